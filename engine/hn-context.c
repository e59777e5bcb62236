/* hn-context.c — the forward pass over a batch of tokens, for every architecture of
 * hn-arch.h: the traits decide the norms, projections, activation, attention details and
 * whether a mixture of experts (hn-moe.h) takes the feed-forward's place.
 *
 * Activations are [token][dim] f32 rows; every projection is one hn_matmul over the whole
 * micro-batch.  Attention reads the F16 cache once per (token, KV head): the keys in a
 * first pass that keeps one row of scores per query head (per thread, n_ctx long), the
 * values in a second, so the probabilities can be rounded as the reference engine
 * rounds them (see HnAttnArgs).  Beyond ATTN_SINGLE_CELLS visible cells it does so per
 * block of cells and joins the blocks' softmaxes; a decode step shares the blocks
 * between the threads (attn_worker_split).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-context.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hn-kernels.h"
#include "hn-memory.h"
#include "hn-simd.h"
#include "hn-model-internal.h"
#include "hn-moe.h"
#include "hn-threadpool.h"
#include "hn-decode-choice.h"
#include "hn-vk.h"

#define NOTICE_MAX 512

/* Whose visible cells a thread's attn_cells holds: token `token` of micro-batch number
 * `ubatch` (see list_rows); ubatch 0 holds nothing. */
typedef struct {
  uint64_t ubatch;
  int token, n;
} AttnListed;

struct HnContext {
  const HnModel *model;
  HnContextParams params;
  HnThreadPool *pool;
  HnKvCache *kv;
  /* rotation of global and sliding-window layers (the long or short Phi-3 factors chosen
   * for this context size) */
  HnRope rope, rope_local;
  HnCancelFn cancel;
  void *cancel_data;
  /* scratch sized for n_batch tokens at creation */
  float *x, *xn, *q, *k, *v, *attn, *gate, *up, *acc;
  void *act;
  int32_t *cells, *out_rows;
  /* A batch with `sampled` rows, reordered per micro-batch: the prompt rows first (they
   * take the batch GEMM), then the sampled ones (the one-row kernels); see HnBatch. */
  int32_t *ord_tok, *ord_pos, *ord_seq, *ord_from;
  bool *ord_want;
  int split; /* rows of the micro-batch on the batch path; -1: every product by batch size */
  HnMoeScratch moe; /* mixture-of-experts models only */
  /* attention: per thread, a work area and the list of visible cells */
  float *attn_work;
  size_t attn_work_floats;
  float *attn_scores; /* per thread: group × hn_attn_score_stride(n_ctx) */
  size_t attn_scores_floats;
  int32_t *attn_cells;
  /* a key on its way into the cache (kv_dim), then per thread one head's key copied out
   * of it for the scalar attention (head_dim each): keys are not rows in every layout */
  uint16_t *k_half;
  AttnListed *attn_listed; /* per thread */
  uint64_t ubatch_serial;  /* micro-batches decoded, the current one included */
  /* block results of the attention deep in a context (see attn_blocks): per thread
   * for one KV head's query heads, and shared by the threads for every query head of up
   * to ATTN_SPLIT_TOKENS tokens, with each shared block's number of cells */
  float *attn_parts;
  size_t attn_parts_floats;
  float *attn_split;
  int32_t *attn_split_len;
  int attn_max_blocks;
  /* output */
  float *logits;
  float *routing_lead; /* per logits row, see hn_context_routing_lead */
  int32_t *logit_row;  /* the caller's i-th logits row → the stored row */
  int n_logits, logits_cap;
  char notice[NOTICE_MAX]; /* empty: nothing was changed from what the caller asked */
  char gpu_notice[NOTICE_MAX]; /* the sentences of notice about the graphics device */
  /* Vulkan offload of layers first_gpu..n_layer-1 (first_gpu == n_layer: none); it owns
   * the KV cache's storage, so it lives as long as the context even after a failure */
  HnVkOffload *offload;
  int first_gpu;
};

HnContextParams
hn_context_default_params(void)
{
  return (HnContextParams) { .n_ctx = 0, .n_batch = 512, .n_threads = 0, .n_seq_max = 1, .n_gpu_layers = 0,
                             .gpu_device = -1 };
}

void
hn_context_free(HnContext *c)
{
  if (!c)
    return;
  hn_threadpool_free(c->pool);
  hn_kv_cache_free(c->kv);
  hn_vk_offload_free(c->offload); /* after the cache: it owns the cache's storage */
  free(c->x); free(c->xn); free(c->q); free(c->k); free(c->v); free(c->attn);
  free(c->gate); free(c->up); free(c->acc); free(c->act); free(c->cells); free(c->out_rows);
  free(c->ord_tok); free(c->ord_pos); free(c->ord_seq); free(c->ord_from); free(c->ord_want);
  free(c->logit_row);
  free(c->attn_work); free(c->attn_cells); free(c->attn_listed); free(c->attn_scores); free(c->k_half);
  free(c->attn_parts); free(c->attn_split); free(c->attn_split_len);
  hn_moe_scratch_clear(&c->moe);
  free(c->logits);
  free(c->routing_lead);
  free(c);
}

/* Pulls the parameters into what the model supports; a changed context size is reported
 * in `notice` (empty otherwise) because the caller asked for something specific. */
static HnContextParams
clamp_params(const HnModel *m, const HnContextParams *params, char *notice, size_t notice_size)
{
  HnContextParams p = params ? *params : hn_context_default_params();
  if (notice_size)
    notice[0] = '\0';
  if (p.n_ctx > m->n_ctx_train) {
    if (notice_size)
      snprintf(notice, notice_size,
               "The context size of %d tokens is more than this model supports; using %d tokens.",
               p.n_ctx, m->n_ctx_train);
    p.n_ctx = m->n_ctx_train;
  }
  if (p.n_ctx <= 0)
    p.n_ctx = m->n_ctx_train;
  if (p.n_batch <= 0)
    p.n_batch = 512;
  if (p.n_batch > p.n_ctx)
    p.n_batch = p.n_ctx;
  /* cells beyond n_ctx only for several sequences (each still at most n_ctx positions) */
  if (p.n_kv_cells < p.n_ctx)
    p.n_kv_cells = p.n_ctx;
  if (p.n_seq_max <= 0)
    p.n_seq_max = 1;
  if (p.n_gpu_layers < 0 && p.n_gpu_layers != HN_GPU_LAYERS_AUTO)
    p.n_gpu_layers = 0;
  if (p.n_gpu_layers > m->n_layer)
    p.n_gpu_layers = m->n_layer;
  return p;
}

/* The dense feed-forward's width (0 in a mixture-of-experts model, whose experts have
 * their own scratch). */
static int
dense_ff(const HnModel *m)
{
  return m->traits->moe ? 0 : m->n_ff;
}

/* The widest row a projection reads. */
static int64_t
widest_input(const HnModel *m)
{
  int64_t q_dim = (int64_t) m->n_head * m->head_dim, w = dense_ff(m) > m->n_embd ? dense_ff(m) : m->n_embd;
  int64_t moe = hn_moe_ff_width(m->n_ff_exp, m->n_ff_shexp);
  w = moe > w ? moe : w;
  return q_dim > w ? q_dim : w;
}

enum { ATTN_BLOCK_CELLS = 128, ATTN_SINGLE_CELLS = 256, ATTN_SPLIT_TOKENS = 4 };

/* Per thread: the scores of every cell for the query heads of one KV head, or of one
 * block of cells for every query head (attn_worker_split). */
static size_t
attn_scores_floats(const HnModel *m, const HnContextParams *p)
{
  size_t one_kv_head = (size_t) (m->n_head / m->n_head_kv) * hn_attn_score_stride(p->n_kv_cells);
  size_t one_block = (size_t) m->n_head * hn_attn_score_stride(ATTN_SINGLE_CELLS); /* attn_blocks */
  return one_kv_head > one_block ? one_kv_head : one_block;
}

/* Beyond ATTN_SINGLE_CELLS visible cells the attention splits the cells of a query into
 * blocks of ATTN_BLOCK_CELLS, in the order of their positions, and joins the blocks'
 * softmaxes (hn_attn_merge_blocks).  A block is the unit of work when few tokens are
 * evaluated (decode): each thread takes a range of blocks and runs every KV head over
 * them, so it reads whole cell rows, one after the other, instead of every thread picking
 * its KV heads' pieces out of each row.  The blocks are the same however the work is
 * shared, so a token's result depends only on the cells it sees; up to
 * ATTN_SINGLE_CELLS (short contexts) it is a single softmax, rounded as the reference
 * rounds it.  Why 128 and not 256 (docs/speed.md, "Long context, eleventh round"): a
 * thread's first block of a layer finds nothing of its rows in the caches, and a smaller
 * block halves what that call waits for. */
static int
attn_blocks(int n)
{
  return n <= ATTN_SINGLE_CELLS ? 1 : (n + ATTN_BLOCK_CELLS - 1) / ATTN_BLOCK_CELLS;
}

static int
attn_max_blocks(const HnContextParams *p)
{
  return attn_blocks(p->n_kv_cells);
}

/* Rows the sliding-window layers keep: a window for every sequence plus one batch. */
static int
ring_rows(const HnModel *m, const HnContextParams *p)
{
  if (m->swa_window == 0 || m->n_sliding == 0)
    return 0;
  int64_t rows = (int64_t) p->n_seq_max * m->swa_window + p->n_batch;
  return rows < p->n_kv_cells ? (int) rows : p->n_kv_cells;
}

/* Scratch for the activations of one matrix product (or a decode step's experts). */
static size_t
act_scratch_bytes(const HnModel *m, const HnContextParams *p, int nth)
{
  size_t bytes = hn_matmul_scratch_bytes(widest_input(m), p->n_batch, nth);
  size_t moe = m->traits->moe ? hn_moe_act_scratch_bytes(widest_input(m), m->n_expert_used) : 0;
  size_t same_input = hn_matvec_many_scratch_bytes(widest_input(m), 3); /* project_same_input */
  bytes = same_input > bytes ? same_input : bytes;
  return moe > bytes ? moe : bytes;
}

/* Must match the allocations in hn_context_new. */
static uint64_t
scratch_bytes(const HnModel *m, const HnContextParams *p, int nth)
{
  uint64_t nb = (uint64_t) p->n_batch, kv_dim = (uint64_t) m->n_head_kv * (uint64_t) m->head_dim;
  uint64_t q_dim = (uint64_t) m->n_head * (uint64_t) m->head_dim;
  uint64_t moe = m->traits->moe ? hn_moe_scratch_bytes(p->n_batch, m->n_embd, m->n_expert, m->n_expert_used,
                                                   hn_moe_ff_width(m->n_ff_exp, m->n_ff_shexp)) : 0;
  uint64_t floats = nb * (uint64_t) m->n_embd * 2 + nb * q_dim * 2 + nb * kv_dim * 2 + nb * (uint64_t) dense_ff(m) * 2
                    + (uint64_t) nth * (uint64_t) m->head_dim
                    + (uint64_t) nth * hn_attn_work_floats(m->n_head, m->head_dim)
                    + (uint64_t) nth * attn_scores_floats(m, p)
                    + (uint64_t) (nth + ATTN_SPLIT_TOKENS) * (uint64_t) attn_max_blocks(p)
                        * hn_attn_part_floats(m->n_head, m->head_dim)
                    + (uint64_t) m->n_vocab;
  return moe + floats * sizeof(float) + act_scratch_bytes(m, p, nth)
         + (uint64_t) nth * (uint64_t) p->n_kv_cells * sizeof(int32_t) + nb * 2 * sizeof(int32_t)
         + (kv_dim + (uint64_t) nth * (uint64_t) m->head_dim) * sizeof(uint16_t)
         + (uint64_t) ATTN_SPLIT_TOKENS * (uint64_t) attn_max_blocks(p) * sizeof(int32_t);
}

static uint64_t
kv_bytes(const HnModel *m, const HnContextParams *p)
{
  int n_ring = ring_rows(m, p), n_sliding = n_ring ? m->n_sliding : 0;
  uint64_t rows = (uint64_t) (m->n_layer - n_sliding) * (uint64_t) p->n_kv_cells + (uint64_t) n_sliding * (uint64_t) n_ring;
  /* keys in tiles take whole tiles (a borrowed cache's keys, in rows, take less) */
  uint64_t key_rows = rows + (uint64_t) (m->n_layer - n_sliding) * (uint64_t) ((HN_KV_TILE - p->n_kv_cells % HN_KV_TILE) % HN_KV_TILE);
  uint64_t kv_dim = (uint64_t) m->n_head_kv * (uint64_t) m->head_dim;
  uint64_t ring_index = n_ring ? (uint64_t) p->n_kv_cells * 4 + (uint64_t) n_ring * 4 : 0;
  return (rows + key_rows) * kv_dim * sizeof(uint16_t) + (uint64_t) p->n_kv_cells * sizeof(HnKvCell) + ring_index;
}

static HnMemoryNeed
need_for(const HnModel *m, const HnContextParams *p, int nth)
{
  return (HnMemoryNeed) {
    .weights = hn_model_resident_bytes(m),
    .kv_cache = kv_bytes(m, p),
    .scratch = scratch_bytes(m, p, nth),
    .n_ctx = p->n_ctx,
    .held = m->placed_held,
  };
}

bool
hn_context_memory_need(const HnModel *m, const HnContextParams *params, HnMemoryNeed *need)
{
  HnContextParams p = clamp_params(m, params, NULL, 0);
  *need = need_for(m, &p, p.n_threads > 0 ? p.n_threads : hn_physical_cores());
  return true;
}

/* The first context of a model type on a processor measures which decode kernel is
 * faster for each weight type the model has (then cached; see hn-decode-choice.h). */
static void
calibrate_decode(const HnModel *m, HnThreadPool *pool)
{
  const HnGguf *g = hn_model_gguf(m);
  bool present[HN_TYPE_COUNT] = { false };
  for (int64_t i = 0; g && i < hn_gguf_n_tensors(g); i++) {
    const HnGgufTensor *t = hn_gguf_tensor(g, i);
    if (t->n_dims == 2 && t->type < HN_TYPE_COUNT)
      present[t->type] = true;
  }
  HnType types[HN_TYPE_COUNT];
  int n = 0;
  for (int t = 0; t < HN_TYPE_COUNT; t++)
    if (present[t])
      types[n++] = (HnType) t;
  hn_decode_calibrate(pool, types, n);
}

/* Adds a sentence about the graphics device to the context's notice. */
static void
add_notice(HnContext *c, const char *text)
{
  size_t len = strlen(c->notice);
  snprintf(c->notice + len, sizeof c->notice - len, "%s%s", len ? " " : "", text);
  len = strlen(c->gpu_notice);
  snprintf(c->gpu_notice + len, sizeof c->gpu_notice - len, "%s%s", len ? " " : "", text);
}

/* HN_GPU_LAYERS_AUTO becomes a layer count.  No device to use is no failure when none was
 * named; a device that cannot take this model is worth a notice. */
static int
auto_gpu_layers(HnContext *c, const HnContextParams *p)
{
  HnError err = { 0 };
  HnVkOffloadParams vp = { .first_layer = 0, .n_ctx = p->n_ctx, .n_batch = p->n_batch, .device = p->gpu_device };
  int n = hn_vk_fit_layers(c->model, &vp, &err);
  if ((n < 0 && p->gpu_device >= 0) || (n == 0 && err.message[0])) {
    char text[sizeof err.message + 32];
    snprintf(text, sizeof text, "%s Running on the CPU instead.", err.message);
    add_notice(c, text);
  }
  return n > 0 ? n : 0;
}

/* Moves the last p->n_gpu_layers layers to the graphics device; when that fails, the
 * notice says why and everything stays on the CPU. */
static void
start_offload(HnContext *c, const HnContextParams *p)
{
  const HnModel *m = c->model;
  HnError err = { 0 };
  HnVkOffloadParams vp = { .first_layer = m->n_layer - p->n_gpu_layers, .n_ctx = p->n_kv_cells, .n_batch = p->n_batch,
                           .device = p->gpu_device };
  c->offload = hn_vk_offload_new(m, &vp, &err);
  if (c->offload) {
    c->first_gpu = vp.first_layer;
    /* the device has those layers' matrices now: their copies in host memory go back
     * (the layers point at the file's mapping again, which the kernel may drop) */
    hn_model_unplace_layers((HnModel *) m, vp.first_layer);
    return;
  }
  char text[sizeof err.message + 32];
  snprintf(text, sizeof text, "%s Running on the CPU instead.", err.message);
  add_notice(c, text);
}

HnContext *
hn_context_new(const HnModel *m, const HnContextParams *params, HnError *err)
{
  char notice[NOTICE_MAX];
  HnContextParams p = clamp_params(m, params, notice, sizeof notice);
  if (p.n_seq_max > HN_KV_MAX_SEQ) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "at most %d sequences", HN_KV_MAX_SEQ);
    return NULL;
  }
  HnContext *c = calloc(1, sizeof *c);
  if (!c) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return NULL;
  }
  c->model = m;
  c->params = p;
  memcpy(c->notice, notice, sizeof notice);
  int kv_dim = m->n_head_kv * m->head_dim;
  if (!(c->pool = hn_threadpool_new(p.n_threads, err)))
    goto fail;
  int nth = hn_threadpool_n_threads(c->pool);
  calibrate_decode(m, c->pool);
  /* Refuse before the large allocations: a KV cache or scratch that does not fit would get
   * the process killed later, when the pages are first touched. */
  HnMemoryNeed need = need_for(m, &p, nth);
  if (!hn_memory_check(&need, err))
    goto fail;
  int n_ring = ring_rows(m, &p);
  bool *sliding = calloc((size_t) m->n_layer, sizeof *sliding);
  if (!sliding) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto fail;
  }
  for (int il = 0; il < m->n_layer; il++)
    sliding[il] = m->layers[il].sliding;
  c->first_gpu = m->n_layer;
  if (p.n_gpu_layers == HN_GPU_LAYERS_AUTO)
    c->params.n_gpu_layers = p.n_gpu_layers = auto_gpu_layers(c, &p);
  if (p.n_gpu_layers > 0)
    start_offload(c, &p);
  if (c->offload)
    c->kv = hn_kv_cache_new_borrowed(m->n_layer, p.n_kv_cells, kv_dim, hn_vk_offload_k_storage(c->offload),
                                     hn_vk_offload_v_storage(c->offload), err);
  else
    c->kv = hn_kv_cache_new_windowed(m->n_layer, p.n_kv_cells, kv_dim, sliding, n_ring ? m->swa_window : 0, n_ring, err);
  free(sliding);
  if (!c->kv)
    goto fail;
  /* Phi-3 128k: the long factors beyond the original training context, else the short */
  c->rope = m->rope;
  c->rope_local = m->rope_local;
  if (m->rope_long && p.n_ctx > m->n_ctx_orig)
    c->rope.freq_factors = c->rope_local.freq_factors = m->rope_long;
  for (int il = 0; il < m->n_layer; il++)
    hn_kv_cache_set_layer_rope(c->kv, il, m->layers[il].sliding ? &c->rope_local : &c->rope);
  size_t nb = (size_t) p.n_batch, q_dim = (size_t) m->n_head * (size_t) m->head_dim;
  c->x = malloc(nb * (size_t) m->n_embd * sizeof(float));
  c->xn = malloc(nb * (size_t) m->n_embd * sizeof(float));
  c->q = malloc(nb * q_dim * sizeof(float));
  c->attn = malloc(nb * q_dim * sizeof(float));
  c->k = malloc(nb * (size_t) kv_dim * sizeof(float));
  c->v = malloc(nb * (size_t) kv_dim * sizeof(float));
  if (dense_ff(m)) {
    c->gate = malloc(nb * (size_t) m->n_ff * sizeof(float));
    c->up = malloc(nb * (size_t) m->n_ff * sizeof(float));
  } else if (!hn_moe_scratch_init(&c->moe, p.n_batch, m->n_embd, m->n_expert, m->n_expert_used,
                                  hn_moe_ff_width(m->n_ff_exp, m->n_ff_shexp), err)) {
    goto fail;
  }
  c->acc = malloc((size_t) nth * (size_t) m->head_dim * sizeof(float));
  c->act = malloc(act_scratch_bytes(m, &p, nth));
  c->attn_work_floats = hn_attn_work_floats(m->n_head, m->head_dim); /* all the heads: attn_worker_split */
  c->attn_work = aligned_alloc(64, (size_t) nth * c->attn_work_floats * sizeof(float));
  c->attn_cells = malloc((size_t) nth * (size_t) p.n_kv_cells * sizeof(int32_t));
  c->attn_listed = calloc((size_t) nth, sizeof(AttnListed));
  c->k_half = malloc(((size_t) kv_dim + (size_t) nth * (size_t) m->head_dim) * sizeof(uint16_t));
  c->attn_scores_floats = attn_scores_floats(m, &p);
  c->attn_scores = aligned_alloc(64, (size_t) nth * c->attn_scores_floats * sizeof(float));
  c->attn_max_blocks = attn_max_blocks(&p);
  c->attn_parts_floats = (size_t) c->attn_max_blocks * hn_attn_part_floats(m->n_head / m->n_head_kv, m->head_dim);
  c->attn_parts = malloc((size_t) nth * c->attn_parts_floats * sizeof(float));
  c->attn_split = malloc((size_t) ATTN_SPLIT_TOKENS * (size_t) c->attn_max_blocks
                         * hn_attn_part_floats(m->n_head, m->head_dim) * sizeof(float));
  c->attn_split_len = malloc((size_t) ATTN_SPLIT_TOKENS * (size_t) c->attn_max_blocks * sizeof(int32_t));
  c->cells = malloc(nb * sizeof(int32_t));
  c->out_rows = malloc(nb * sizeof(int32_t));
  c->ord_tok = malloc(nb * sizeof(int32_t));
  c->ord_pos = malloc(nb * sizeof(int32_t));
  c->ord_seq = malloc(nb * sizeof(int32_t));
  c->ord_from = malloc(nb * sizeof(int32_t));
  c->ord_want = malloc(nb * sizeof(bool));
  c->split = -1;
  if (!c->ord_tok || !c->ord_pos || !c->ord_seq || !c->ord_from || !c->ord_want ||
      !c->x || !c->xn || !c->q || !c->attn || !c->k || !c->v || (dense_ff(m) && (!c->gate || !c->up)) ||
      !c->acc || !c->act || !c->cells || !c->out_rows || !c->attn_work || !c->attn_cells || !c->attn_listed || !c->k_half ||
      !c->attn_scores || !c->attn_parts || !c->attn_split || !c->attn_split_len) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory for a context of %d tokens", p.n_batch);
    goto fail;
  }
  return c;
fail:
  hn_context_free(c);
  return NULL;
}

const char *
hn_context_notice(const HnContext *c)
{
  return c->notice[0] ? c->notice : NULL;
}

int hn_context_n_ctx(const HnContext *c) { return c->params.n_ctx; }
int hn_context_n_batch(const HnContext *c) { return c->params.n_batch; }
const HnModel *hn_context_model(const HnContext *c) { return c->model; }
HnKvCache *hn_context_kv(HnContext *c) { return c->kv; }
const HnRope *hn_context_rope(const HnContext *c) { return &c->rope; }

uint32_t
hn_context_rope_factor_set(const HnContext *c)
{
  if (!c->model->rope_long)
    return 0;
  return c->rope.freq_factors == c->model->rope_long ? 2u : 1u;
}
int hn_context_n_logits(const HnContext *c) { return c->n_logits; }

int hn_context_gpu_layers(const HnContext *c) { return c->model->n_layer - c->first_gpu; }

const char *
hn_context_gpu_notice(const HnContext *c)
{
  return c->gpu_notice[0] ? c->gpu_notice : NULL;
}

bool
hn_context_gpu_counts(const HnContext *c, HnVkCounts *out)
{
  if (c->first_gpu >= c->model->n_layer)
    return false;
  hn_vk_offload_counts(c->offload, out);
  return true;
}

const char *
hn_context_gpu_device(const HnContext *c)
{
  return c->first_gpu < c->model->n_layer ? hn_vk_offload_device_name(c->offload) : NULL;
}

void
hn_context_set_cancel(HnContext *c, HnCancelFn fn, void *user_data)
{
  c->cancel = fn;
  c->cancel_data = user_data;
}

float
hn_context_routing_lead(const HnContext *c, int i)
{
  if (i < 0 || i >= c->n_logits)
    return NAN;
  return c->routing_lead[c->logit_row[i]];
}

const float *
hn_context_get_logits(const HnContext *c, int i)
{
  if (i < 0 || i >= c->n_logits)
    return NULL;
  return c->logits + (size_t) c->logit_row[i] * (size_t) c->model->n_vocab;
}

static void
rms_norm(const float *x, const float *w, float *y, int n, float eps)
{
  double sum = 0.0;
  for (int i = 0; i < n; i++)
    sum += (double) x[i] * x[i];
  float scale = (float) (1.0 / sqrt(sum / n + eps));
  for (int i = 0; i < n; i++)
    y[i] = x[i] * scale * w[i];
}

typedef struct {
  HnContext *c;
  int layer, n_tokens;
  const int32_t *pos, *seq;
  HnAttnFn attn;
  int window;    /* 0: every earlier position is visible */
  float softcap; /* 0: none */
  int split_blocks; /* attn_worker_split: blocks per token (a bound: the later ones may be empty) */
} AttnJob;

/* Whether a query of sequence bit `bit` at position p sees the cell. */
static inline bool
cell_visible(const HnKvCell *cell, uint32_t bit, int32_t p, int window)
{
  return cell->pos >= 0 && cell->pos <= p && (cell->seq_mask & bit) && (window == 0 || p - cell->pos < window);
}

static void sort_cells_by_pos(int32_t *a, int n, const HnKvCell *cells);

/* The cells a query of sequence `seq` at position p sees, in the order of their positions
 * (see attn_worker); returns how many. */
static int
list_visible(const HnKvCell *cells, int n_cells, int32_t seq, int32_t p, int window, int32_t *out)
{
  uint32_t bit = (uint32_t) 1u << seq;
  int n = 0;
  bool in_order = true;
  for (int cell = 0; cell < n_cells; cell++)
    if (cell_visible(&cells[cell], bit, p, window)) {
      in_order = in_order && (n == 0 || cells[out[n - 1]].pos < cells[cell].pos);
      out[n++] = cell;
    }
  if (!in_order)
    sort_cells_by_pos(out, n, cells);
  return n;
}

/* Scalar reference attention, one (token, head) at a time (no SIMD level, or a head size
 * the SIMD kernels do not take); rounded like the SIMD kernels (see HnAttnArgs). */
static void
attn_worker_scalar(void *data, int ith, int nth)
{
  const AttnJob *job = data;
  const HnModel *m = job->c->model;
  HnKvCache *kv = job->c->kv;
  const HnKvCell *cells = hn_kv_cache_cells(kv);
  int n_cells = hn_kv_cache_n_cells(kv);
  int hd = m->head_dim, group = m->n_head / m->n_head_kv, q_dim = m->n_head * hd;
  float *acc = job->c->acc + (size_t) ith * (size_t) hd;
  uint16_t *kr = job->c->k_half + (size_t) hn_kv_cache_kv_dim(kv) + (size_t) ith * (size_t) hd;
  float *prob = job->c->attn_scores + (size_t) ith * job->c->attn_scores_floats;
  int32_t *visible = job->c->attn_cells + (size_t) ith * (size_t) job->c->params.n_kv_cells;
  job->c->attn_listed[ith] = (AttnListed){ 0, -1, 0 }; /* (visible is overwritten below) */
  int listed_for = -1, n_visible = 0;
  for (int item = ith; item < job->n_tokens * m->n_head; item += nth) {
    int t = item / m->n_head, h = item % m->n_head, kvh = h / group;
    const float *q = job->c->q + (size_t) t * (size_t) q_dim + (size_t) h * (size_t) hd;
    if (listed_for != t) {
      n_visible = list_visible(cells, n_cells, job->seq[t], job->pos[t], job->window, visible);
      listed_for = t;
    }
    float mx = -INFINITY;
    for (int i = 0; i < n_visible; i++) {
      prob[i] = -INFINITY;
      if (!hn_kv_cache_read_k(kv, job->layer, visible[i], kvh * hd, hd, kr))
        continue;
      float s = 0.0f;
      for (int d = 0; d < hd; d++)
        s += q[d] * hn_fp16_to_fp32(kr[d]);
      s *= m->query_scale;
      if (job->softcap > 0.0f)
        s = job->softcap * tanhf(s / job->softcap);
      prob[i] = s;
      mx = s > mx ? s : mx;
    }
    double sum = 0.0;
    for (int i = 0; i < n_visible; i++)
      if (prob[i] > -INFINITY)
        sum += prob[i] = expf(prob[i] - mx);
    float inv = sum > 0.0 ? (float) (1.0 / sum) : 0.0f;
    memset(acc, 0, (size_t) hd * sizeof(float));
    for (int i = 0; i < n_visible; i++) {
      if (prob[i] == -INFINITY)
        continue;
      float p = hn_fp16_to_fp32(hn_fp32_to_fp16(prob[i] * inv));
      const uint16_t *vr = hn_kv_cache_v_row(kv, job->layer, visible[i]) + (size_t) kvh * (size_t) hd;
      for (int d = 0; d < hd; d++)
        acc[d] += p * hn_fp16_to_fp32(vr[d]);
    }
    float *out = job->c->attn + (size_t) t * (size_t) q_dim + (size_t) h * (size_t) hd;
    memcpy(out, acc, (size_t) hd * sizeof(float));
  }
}

/* Sorts cell indexes by their positions (a heap sort: in place, n log n even for a list
 * that is two sorted runs, which a cache that wrapped around gives). */
static void
sort_cells_by_pos(int32_t *a, int n, const HnKvCell *cells)
{
  for (int start = n / 2 - 1, end = n; end > 1;) {
    int root;
    if (start >= 0) {
      root = start--;
    } else {
      end--;
      int32_t t = a[0];
      a[0] = a[end];
      a[end] = t;
      root = 0;
    }
    for (int child; (child = 2 * root + 1) < end; root = child) {
      if (child + 1 < end && cells[a[child + 1]].pos > cells[a[child]].pos)
        child++;
      if (cells[a[root]].pos >= cells[a[child]].pos)
        break;
      int32_t t = a[root];
      a[root] = a[child];
      a[child] = t;
    }
  }
}

/* The cells token t sees, as rows of the layer's storage (ring rows for sliding layers),
 * in the order of their positions, so that the sums run as in a fresh evaluation; into
 * thread ith's visible (its part of attn_cells).  The cell table does not change between
 * the layers of a micro-batch, so a global layer takes the list the thread made for the
 * same token at an earlier layer: the scan goes over every cell of the context, however
 * few of them the conversation uses. */
static int
list_rows(const AttnJob *job, int ith, int t, int32_t *visible)
{
  HnContext *c = job->c;
  HnKvCache *kv = c->kv;
  AttnListed *held = &c->attn_listed[ith];
  const bool global = job->window == 0 && !hn_kv_cache_layer_sliding(kv, job->layer);
  if (global && held->ubatch == c->ubatch_serial && held->token == t)
    return held->n;
  /* The sums run over the keys in the order of their positions, whatever cells they
   * landed in (holes left by removed tokens, a table that wrapped around, other
   * sequences in between), so a token's result does not depend on the cache's
   * history: sequences decoded together give what each gives alone. */
  int n = list_visible(hn_kv_cache_cells(kv), hn_kv_cache_n_cells(kv), job->seq[t], job->pos[t], job->window,
                       visible);
  /* (a visible cell always has its row: decode refuses positions before
   * hn_kv_cache_seq_resume_min; the check only keeps a broken invariant harmless) */
  if (hn_kv_cache_layer_sliding(kv, job->layer)) {
    int kept = 0;
    for (int i = 0; i < n; i++) {
      int row = hn_kv_cache_row_of(kv, job->layer, visible[i]);
      if (row >= 0)
        visible[kept++] = row;
    }
    n = kept;
  } /* else a global layer's row is the cell itself: no call per cell on long contexts */
  *held = global ? (AttnListed){ c->ubatch_serial, t, n } : (AttnListed){ 0, -1, 0 };
  return n;
}

/* The cells of block b of n visible cells (attn_blocks); block b starts at
 * b · ATTN_BLOCK_CELLS. */
static int
block_cells(int n, int b)
{
  if (n <= ATTN_SINGLE_CELLS)
    return b == 0 ? n : 0;
  int len = n - b * ATTN_BLOCK_CELLS;
  return len < 0 ? 0 : len < ATTN_BLOCK_CELLS ? len : ATTN_BLOCK_CELLS;
}

/* SIMD attention: one item is a (token, KV head) pair with all the query heads that
 * share the KV head, so each cached key and value is converted once per group.  Items
 * are dealt round-robin, which evens out the causal mask's growing rows. */
static void
attn_worker(void *data, int ith, int nth)
{
  const AttnJob *job = data;
  HnContext *c = job->c;
  const HnModel *m = c->model;
  HnKvCache *kv = c->kv;
  const int kv_dim = hn_kv_cache_kv_dim(kv);
  const int hd = m->head_dim, group = m->n_head / m->n_head_kv, q_dim = m->n_head * hd;
  int32_t *visible = c->attn_cells + (size_t) ith * (size_t) c->params.n_kv_cells;
  float *parts = c->attn_parts + (size_t) ith * c->attn_parts_floats;
  const size_t part = hn_attn_part_floats(group, hd);
  HnAttnArgs args = {
    .head_dim = hd, .n_q = group, .q_stride = (size_t) hd, .scale = m->query_scale,
    .softcap = job->softcap, .kv_stride = (size_t) kv_dim, .out_stride = (size_t) hd,
    .work = c->attn_work + (size_t) ith * c->attn_work_floats,
    .scores = c->attn_scores + (size_t) ith * c->attn_scores_floats,
  };
  const uint16_t *k0 = hn_kv_cache_k_data(kv, job->layer), *v0 = hn_kv_cache_v_data(kv, job->layer);
  args.k_tiled = hn_kv_cache_k_tiled(kv, job->layer);
  const size_t k_head = (size_t) hd * (args.k_tiled ? HN_KV_TILE : 1); /* from one KV head's keys to the next */
  int listed_for = -1, n = 0;
  for (int item = ith; item < job->n_tokens * m->n_head_kv; item += nth) {
    int t = item / m->n_head_kv, kvh = item % m->n_head_kv;
    if (listed_for != t) {
      n = list_rows(job, ith, t, visible);
      listed_for = t;
    }
    args.q = c->q + (size_t) t * (size_t) q_dim + (size_t) kvh * (size_t) group * (size_t) hd;
    args.k = k0 + (size_t) kvh * k_head;
    args.v = v0 + (size_t) kvh * (size_t) hd;
    float *out = c->attn + (size_t) t * (size_t) q_dim + (size_t) kvh * (size_t) group * (size_t) hd;
    int n_blocks = attn_blocks(n);
    if (n_blocks <= 1) {
      args.cells = visible;
      args.n_cells = n;
      args.out = out;
      args.row_max = args.row_sum = NULL;
      job->attn(&args);
      continue;
    }
    for (int b = 0; b < n_blocks; b++) {
      float *pb = parts + (size_t) b * part;
      args.cells = visible + (size_t) b * ATTN_BLOCK_CELLS;
      args.n_cells = block_cells(n, b);
      args.out = pb;
      args.row_max = pb + (size_t) group * (size_t) hd;
      args.row_sum = args.row_max + group;
      job->attn(&args);
    }
    hn_attn_merge_blocks(parts, n_blocks, group, hd, 0, group, out);
  }
}

/* SIMD attention of a few tokens deep in a context: one item is a (token, block) pair,
 * run for every KV head in one call, and each thread takes one contiguous range of items,
 * so it streams through whole cell rows, front to back, and fetches the rows of its next
 * block while it works on this one (HnAttnArgs.next_cells).  The blocks land in
 * c->attn_split; attn_join_split merges them. */
static void
attn_worker_split(void *data, int ith, int nth)
{
  const AttnJob *job = data;
  HnContext *c = job->c;
  const HnModel *m = c->model;
  HnKvCache *kv = c->kv;
  const int kv_dim = hn_kv_cache_kv_dim(kv);
  const int hd = m->head_dim, group = m->n_head / m->n_head_kv, q_dim = m->n_head * hd;
  int32_t *visible = c->attn_cells + (size_t) ith * (size_t) c->params.n_kv_cells;
  const size_t part = hn_attn_part_floats(m->n_head, hd);
  HnAttnArgs args = {
    .head_dim = hd, .n_q = group, .kv_heads = m->n_head_kv, .q_stride = (size_t) hd, .scale = m->query_scale,
    .softcap = job->softcap, .kv_stride = (size_t) kv_dim, .out_stride = (size_t) hd,
    .k = hn_kv_cache_k_data(kv, job->layer), .v = hn_kv_cache_v_data(kv, job->layer),
    .k_tiled = hn_kv_cache_k_tiled(kv, job->layer),
    .next_to_l2 = hn_cpu_features()->intel,
    .work = c->attn_work + (size_t) ith * c->attn_work_floats,
    .scores = c->attn_scores + (size_t) ith * c->attn_scores_floats,
  };
  const int n_items = job->n_tokens * job->split_blocks;
  const int first = (int) ((int64_t) n_items * ith / nth), end = (int) ((int64_t) n_items * (ith + 1) / nth);
  int listed_for = -1, n = 0;
  for (int item = first; item < end; item++) {
    int t = item / job->split_blocks, b = item % job->split_blocks;
    if (listed_for != t) {
      n = list_rows(job, ith, t, visible);
      listed_for = t;
    }
    const int slot = t * c->attn_max_blocks + b;
    const int len = block_cells(n, b);
    c->attn_split_len[slot] = len;
    if (len == 0)
      continue;
    float *pb = c->attn_split + (size_t) slot * part;
    args.cells = visible + (size_t) b * ATTN_BLOCK_CELLS;
    args.n_cells = len;
    /* the next block of the same token (the next token's list is not made yet) */
    const bool next_here = item + 1 < end && (item + 1) / job->split_blocks == t;
    args.next_cells = next_here ? args.cells + ATTN_BLOCK_CELLS : NULL;
    args.next_n_cells = next_here ? block_cells(n, b + 1) : 0;
    args.q = c->q + (size_t) t * (size_t) q_dim;
    args.out = pb;
    args.row_max = pb + (size_t) m->n_head * (size_t) hd;
    args.row_sum = args.row_max + m->n_head;
    job->attn(&args);
  }
}

/* Joins the blocks of attn_worker_split, every thread a range of the query heads of
 * every token: on one thread, after the blocks, the other thread waited for it. */
static void
attn_join_split(void *data, int ith, int nth)
{
  const AttnJob *job = data;
  HnContext *c = job->c;
  const HnModel *m = c->model;
  const int hd = m->head_dim, q_dim = m->n_head * hd;
  const size_t part = hn_attn_part_floats(m->n_head, hd);
  const int h0 = (int) ((int64_t) m->n_head * ith / nth), h1 = (int) ((int64_t) m->n_head * (ith + 1) / nth);
  for (int t = 0; t < job->n_tokens && h0 < h1; t++) {
    const int slot = t * c->attn_max_blocks;
    int n_blocks = 0;
    while (n_blocks < job->split_blocks && c->attn_split_len[slot + n_blocks] > 0)
      n_blocks++;
    hn_attn_merge_blocks(c->attn_split + (size_t) slot * part, n_blocks, m->n_head, hd, h0, h1,
                         c->attn + (size_t) t * (size_t) q_dim + (size_t) h0 * (size_t) hd);
  }
}

static void
add_bias(float *y, const float *b, int n_tokens, int n)
{
  if (!b)
    return;
  for (int t = 0; t < n_tokens; t++)
    for (int i = 0; i < n; i++)
      y[(size_t) t * (size_t) n + (size_t) i] += b[i];
}

/* RMSNorm of every head of every token (qwen3 / gemma3 q and k norms), in place. */
static void
head_norm(float *x, const float *w, int n_tokens, int n_head, int head_dim, float eps)
{
  if (!w)
    return;
  for (size_t h = 0; h < (size_t) n_tokens * (size_t) n_head; h++)
    rms_norm(x + h * (size_t) head_dim, w, x + h * (size_t) head_dim, head_dim, eps);
}

/* x += norm(y) when the architecture normalises a block's output (gemma), else x += y. */
static void
add_residual(float *x, float *y, const float *post_norm, int n_tokens, int n, float eps)
{
  if (post_norm)
    for (int t = 0; t < n_tokens; t++)
      rms_norm(y + (size_t) t * n, post_norm, y + (size_t) t * n, n, eps);
  for (size_t i = 0; i < (size_t) n_tokens * (size_t) n; i++)
    x[i] += y[i];
}

static inline float
gelu_tanh(float x)
{
  const float sqrt_2_over_pi = 0.79788456080286535588f;
  return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + 0.044715f * x * x)));
}

/* W × x for the micro-batch's nt rows: by batch size, or with c->split set, the first
 * split rows through the batch GEMM and the rest through the one-row kernels. */
static void
project(HnContext *c, const HnGgufTensor *w, const float *x, int nt, float *y, int64_t y_stride)
{
  if (c->split < 0) {
    hn_matmul(c->pool, w, x, nt, c->act, y, y_stride);
    return;
  }
  int nb = HN_MIN(c->split, nt);
  if (nb > 0)
    hn_matmul_path(c->pool, w, x, nb, c->act, y, y_stride, HN_MATMUL_BATCH);
  if (nt > nb)
    hn_matmul_path(c->pool, w, x + (size_t) nb * (size_t) w->ne[0], nt - nb, c->act, y + (size_t) nb * (size_t) y_stride,
                   y_stride, HN_MATMUL_ROW);
}

/* Products of one input x (a layer's query, key and value; its gate and up): for a
 * micro-batch of one row on the one-row kernels, in one parallel section
 * (hn_matvec_many, which gives each what hn_matmul gives), so the threads meet once
 * instead of once per matrix and x is converted once per format; else one by one. */
static void
project_same_input(HnContext *c, const float *x, int nt, HnMatvec *items, int n_items)
{
  if (nt == 1 && c->split <= 0) {
    for (int i = 0; i < n_items; i++)
      items[i].x = x;
    hn_matvec_many(c->pool, items, n_items, c->act);
    return;
  }
  for (int i = 0; i < n_items; i++)
    project(c, items[i].w, x, nt, items[i].y, items[i].w->ne[1]);
}

/* One micro-batch of at most n_batch tokens; outputs go to logits rows from *n_out on. */
static bool
decode_ubatch(HnContext *c, int nt, const int32_t *tok, const int32_t *pos, const int32_t *seq,
              const bool *want, bool want_last, HnError *err)
{
  const HnModel *m = c->model;
  int E = m->n_embd, kv_dim = m->n_head_kv * m->head_dim, F = dense_ff(m), Q = m->n_head * m->head_dim;
  /* a query must not land where the sliding-window keys it would see were handed on */
  if (hn_kv_cache_window(c->kv) > 0) {
    int32_t first[HN_KV_MAX_SEQ];
    for (int s = 0; s < HN_KV_MAX_SEQ; s++)
      first[s] = INT32_MAX;
    for (int t = 0; t < nt; t++)
      if (pos[t] < first[seq[t]])
        first[seq[t]] = pos[t];
    for (int s = 0; s < HN_KV_MAX_SEQ; s++) {
      int32_t resume = first[s] == INT32_MAX ? 0 : hn_kv_cache_seq_resume_min(c->kv, s);
      if (first[s] < resume)
        return hn_error_set(err, HN_ERR_INVALID_ARG,
                            "position %d of sequence %d cannot be evaluated: the sliding-window keys "
                            "before it were already reused (evaluation can go on from position %d; "
                            "clear the sequence to start over)", first[s], s, resume);
    }
  }
  if (!hn_kv_cache_find_slot(c->kv, nt, pos, seq, c->cells, err))
    return false;
  size_t erow = hn_type_row_bytes(m->tok_embd->type, E);
  for (int t = 0; t < nt; t++)
    hn_dequantize_row((HnType) m->tok_embd->type, (const uint8_t *) m->tok_embd->data + (size_t) tok[t] * erow,
                      c->x + (size_t) t * E, E);
  if (m->embd_scale != 1.0f)
    for (size_t i = 0; i < (size_t) nt * E; i++)
      c->x[i] *= m->embd_scale;
  if (m->traits->moe)
    for (int t = 0; t < nt; t++)
      c->moe.lead[t] = INFINITY;
  const int n_used = hn_kv_cache_n_used(c->kv);
  c->ubatch_serial++; /* the lists of visible cells made for the last one are stale */
  for (int il = 0; il < m->n_layer; il++) {
    if (c->cancel && c->cancel(c->cancel_data)) {
      hn_error_set(err, HN_ERR_CANCELLED, "cancelled");
      goto undo;
    }
    if (il == c->first_gpu) {
      HnError gpu_err = { 0 };
      if (hn_vk_offload_run(c->offload, c->x, nt, pos, seq, c->cells, c->kv, &c->rope, &gpu_err))
        break;
      /* the KV storage is shared, so the CPU simply takes over from this layer on */
      char text[sizeof gpu_err.message + 40];
      snprintf(text, sizeof text, "%s Running on the CPU from now on.", gpu_err.message);
      add_notice(c, text);
      c->first_gpu = m->n_layer;
    }
    const HnLayer *L = &m->layers[il];
    const HnRope *rope = L->sliding ? &c->rope_local : &c->rope;
    for (int t = 0; t < nt; t++)
      rms_norm(c->x + (size_t) t * E, L->attn_norm, c->xn + (size_t) t * E, E, m->rms_eps);
    project_same_input(c, c->xn, nt, (HnMatvec[]){ { .w = L->wq, .y = c->q }, { .w = L->wk, .y = c->k },
                                                    { .w = L->wv, .y = c->v } }, 3);
    add_bias(c->q, L->bq, nt, Q);
    add_bias(c->k, L->bk, nt, kv_dim);
    add_bias(c->v, L->bv, nt, kv_dim);
    head_norm(c->q, L->q_norm, nt, m->n_head, m->head_dim, m->rms_eps);
    head_norm(c->k, L->k_norm, nt, m->n_head_kv, m->head_dim, m->rms_eps);
    for (int t = 0; t < nt; t++) {
      hn_rope_apply(rope, c->q + (size_t) t * Q, m->n_head, (float) pos[t]);
      hn_rope_apply(rope, c->k + (size_t) t * kv_dim, m->n_head_kv, (float) pos[t]);
      uint16_t *vr = hn_kv_cache_v_row(c->kv, il, c->cells[t]);
      for (int i = 0; i < kv_dim; i++) {
        c->k_half[i] = hn_fp32_to_fp16(c->k[(size_t) t * kv_dim + i]);
        vr[i] = hn_fp32_to_fp16(c->v[(size_t) t * kv_dim + i]);
      }
      hn_kv_cache_write_k(c->kv, il, c->cells[t], c->k_half);
    }
    /* the reference engine's attention takes the query as F16 (see HnAttnArgs) */
    const HnSimdKernels *k = hn_simd_kernels();
    if (k && k->round_f16)
      k->round_f16(c->q, c->q, (int64_t) nt * Q);
    else
      for (size_t i = 0; i < (size_t) nt * Q; i++)
        c->q[i] = hn_fp16_to_fp32(hn_fp32_to_fp16(c->q[i]));
    AttnJob job = { .c = c, .layer = il, .n_tokens = nt, .pos = pos, .seq = seq,
                    .attn = k->attn && m->head_dim % k->attn_multiple == 0 ? k->attn : NULL,
                    .window = L->sliding ? m->swa_window : 0, .softcap = m->attn_softcap };
    /* a bound on the cells a token sees: the used cells, or a window of them */
    int most_visible = job.window > 0 && job.window < n_used ? job.window : n_used;
    job.split_blocks = attn_blocks(most_visible);
    if (job.attn && nt <= ATTN_SPLIT_TOKENS && job.split_blocks > 1) {
      hn_threadpool_run(c->pool, attn_worker_split, &job);
      hn_threadpool_run(c->pool, attn_join_split, &job);
    } else {
      hn_threadpool_run(c->pool, job.attn ? attn_worker : attn_worker_scalar, &job);
    }
    project(c, L->wo, c->attn, nt, c->xn, E);
    add_residual(c->x, c->xn, L->attn_post_norm, nt, E, m->rms_eps);
    for (int t = 0; t < nt; t++)
      rms_norm(c->x + (size_t) t * E, L->ffn_norm, c->xn + (size_t) t * E, E, m->rms_eps);
    if (m->traits->moe) {
      /* adds into the residual itself (no MoE architecture has a post-FFN norm) */
      hn_moe_forward(&L->moe, &c->moe, c->pool, c->xn, nt, c->act, c->x);
      continue;
    }
    project_same_input(c, c->xn, nt, (HnMatvec[]){ { .w = L->w_gate, .y = c->gate }, { .w = L->w_up, .y = c->up } },
                       2);
    if (m->traits->act == HN_ACT_GELU_TANH)
      for (size_t i = 0; i < (size_t) nt * F; i++)
        c->gate[i] = gelu_tanh(c->gate[i]) * c->up[i];
    else
      for (size_t i = 0; i < (size_t) nt * F; i++) {
        float g = c->gate[i];
        c->gate[i] = g / (1.0f + expf(-g)) * c->up[i];
      }
    project(c, L->w_down, c->gate, nt, c->xn, E);
    add_residual(c->x, c->xn, L->ffn_post_norm, nt, E, m->rms_eps);
  }
  int n_out = 0;
  for (int t = 0; t < nt; t++)
    if (want ? want[t] : want_last && t == nt - 1) {
      rms_norm(c->x + (size_t) t * E, m->out_norm, c->xn + (size_t) n_out * E, E, m->rms_eps);
      c->routing_lead[c->n_logits + n_out] = m->traits->moe ? c->moe.lead[t] : INFINITY;
      n_out++;
    }
  if (n_out > 0) {
    float *rows = c->logits + (size_t) c->n_logits * (size_t) m->n_vocab;
    /* logits rows: one per sequence and step, so with exact rows the one-row kernels */
    hn_matmul_path(c->pool, m->output, c->xn, n_out, c->act, rows, m->n_vocab,
                   c->split < 0 ? HN_MATMUL_AUTO : HN_MATMUL_ROW);
    if (m->final_softcap > 0.0f)
      for (size_t i = 0; i < (size_t) n_out * (size_t) m->n_vocab; i++)
        rows[i] = m->final_softcap * tanhf(rows[i] / m->final_softcap);
    c->n_logits += n_out;
  }
  return true;
undo:
  /* the cells this micro-batch claimed hold no finished keys: release them */
  for (int t = 0; t < nt; t++)
    hn_kv_cache_seq_rm(c->kv, seq[t], pos[t], pos[t] + 1);
  return false;
}

bool
hn_context_decode(HnContext *c, const HnBatch *b, HnError *err)
{
  const HnModel *m = c->model;
  c->n_logits = 0;
  if (!b || b->n_tokens <= 0 || !b->token || !b->pos)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "empty batch");
  int n_want = 0;
  for (int i = 0; i < b->n_tokens; i++) {
    if (b->token[i] < 0 || b->token[i] >= m->n_vocab)
      return hn_error_set(err, HN_ERR_INVALID_ARG, "token id %d out of range (vocabulary of %d)",
                          b->token[i], m->n_vocab);
    if (b->pos[i] < 0)
      return hn_error_set(err, HN_ERR_INVALID_ARG, "negative position %d", b->pos[i]);
    if (b->seq_id && (b->seq_id[i] < 0 || b->seq_id[i] >= c->params.n_seq_max))
      return hn_error_set(err, HN_ERR_INVALID_ARG, "sequence id %d out of range (n_seq_max %d)",
                          b->seq_id[i], c->params.n_seq_max);
    if (b->want_logits ? b->want_logits[i] : i == b->n_tokens - 1)
      n_want++;
  }
  if (n_want > c->logits_cap) {
    /* grows only when a call wants more logit rows than any call before */
    float *nl = realloc(c->logits, (size_t) n_want * (size_t) m->n_vocab * sizeof(float));
    if (!nl)
      return hn_error_set(err, HN_ERR_NOMEM, "out of memory for %d rows of logits", n_want);
    c->logits = nl;
    float *lead = realloc(c->routing_lead, (size_t) n_want * sizeof(float));
    if (!lead)
      return hn_error_set(err, HN_ERR_NOMEM, "out of memory for %d rows of logits", n_want);
    c->routing_lead = lead;
    int32_t *map = realloc(c->logit_row, (size_t) n_want * sizeof(int32_t));
    if (!map)
      return hn_error_set(err, HN_ERR_NOMEM, "out of memory for %d rows of logits", n_want);
    c->logit_row = map;
    c->logits_cap = n_want;
  }
  for (int i0 = 0; i0 < b->n_tokens; i0 += c->params.n_batch) {
    int nt = b->n_tokens - i0 < c->params.n_batch ? b->n_tokens - i0 : c->params.n_batch;
    const int32_t *tok = b->token + i0, *pos = b->pos + i0;
    const int32_t *seq = b->seq_id ? b->seq_id + i0 : NULL;
    if (!seq) {
      for (int t = 0; t < nt; t++)
        c->out_rows[t] = 0;
      seq = c->out_rows;
    }
    /* without want_logits only the last token of the whole batch gives logits */
    bool last_chunk = i0 + nt == b->n_tokens;
    const bool *w = b->want_logits ? b->want_logits + i0 : NULL;
    bool want_last = b->want_logits == NULL && last_chunk;
    int first_logit = c->n_logits;
    c->split = -1;
    if (b->sampled) {
      /* prompt rows first, then the sampled ones, each group in the caller's order */
      int n = 0;
      for (int pass = 0; pass < 2; pass++) {
        for (int t = 0; t < nt; t++)
          if (b->sampled[i0 + t] == (pass == 1))
            c->ord_from[n++] = t;
        if (pass == 0)
          c->split = n;
      }
      for (int i = 0; i < nt; i++) {
        int t = c->ord_from[i];
        c->ord_tok[i] = tok[t];
        c->ord_pos[i] = pos[t];
        c->ord_seq[i] = seq[t];
        c->ord_want[i] = w ? w[t] : want_last && t == nt - 1;
      }
      tok = c->ord_tok;
      pos = c->ord_pos;
      seq = c->ord_seq;
      w = c->ord_want;
    }
    bool ok = decode_ubatch(c, nt, tok, pos, seq, w, want_last, err);
    c->split = -1;
    if (!ok) {
      c->n_logits = 0;
      return false;
    }
    if (!b->sampled) {
      for (int i = first_logit; i < c->n_logits; i++)
        c->logit_row[i] = i;
      continue;
    }
    /* the stored rows follow the new order; the caller counts in its own */
    int stored = first_logit;
    for (int i = 0; i < nt; i++) {
      if (!c->ord_want[i])
        continue;
      int t = c->ord_from[i], rank = first_logit;
      for (int u = 0; u < t; u++)
        if (b->want_logits ? b->want_logits[i0 + u] : false)
          rank++;
      c->logit_row[rank] = stored++;
    }
  }
  return true;
}
