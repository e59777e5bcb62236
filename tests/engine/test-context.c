/* Forward pass through the KV cache: incremental decode, several sequences in one batch,
 * position shift, cancellation, bad batches, attention deep in a context.  Uses the test models (2 threads).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hn-context.h"
#include "hn-model-internal.h" /* n_grouped, placed: where the weights were put at load */
#include "hn-simd.h"
#include "hn-vk.h"
#include "rel-diff.h"

static const char *testdata;

static HnModel *
load(const char *name)
{
  g_autofree char *path = g_build_filename(testdata, "models", name, NULL);
  HnError err = { 0 };
  HnModel *m = hn_model_load(path, NULL, &err);
  if (!m)
    g_error("%s: %s", name, err.message);
  return m;
}

static HnContext *
context(HnModel *m, int n_ctx, int n_batch)
{
  HnContextParams p = hn_context_default_params();
  p.n_ctx = n_ctx;
  p.n_batch = n_batch;
  p.n_threads = 2;
  p.n_seq_max = 2;
  HnError err = { 0 };
  HnContext *c = hn_context_new(m, &p, &err);
  g_assert_nonnull(c);
  return c;
}

/* Decodes tokens at positions pos0.. of sequence seq, every row wanted; copies rows out. */
static void
run(HnContext *c, const int32_t *tok, int n, int32_t pos0, int32_t seq, float *rows)
{
  int32_t pos[64], sq[64];
  bool want[64];
  g_assert_cmpint(n, <=, 64);
  for (int i = 0; i < n; i++) {
    pos[i] = pos0 + i;
    sq[i] = seq;
    want[i] = true;
  }
  HnBatch b = { .n_tokens = n, .token = tok, .pos = pos, .seq_id = sq, .want_logits = want };
  HnError err = { 0 };
  if (!hn_context_decode(c, &b, &err))
    g_error("decode: %s", err.message);
  int nv = hn_model_n_vocab(hn_context_model(c));
  for (int i = 0; i < n; i++)
    memcpy(rows + (size_t) i * nv, hn_context_get_logits(c, i), (size_t) nv * sizeof(float));
}

static const int32_t toks[16] = { 1, 72, 305, 11, 400, 9, 77, 123, 45, 310, 2, 88, 256, 17, 500, 63 };

static void
test_incremental(gconstpointer name)
{
  HnModel *m = load(name);
  int nv = hn_model_n_vocab(m);
  HnContext *c = context(m, 32, 16);
  g_autofree float *full = g_new(float, 16 * (size_t) nv);
  g_autofree float *step = g_new(float, 16 * (size_t) nv);
  run(c, toks, 16, 0, 0, full);
  hn_kv_cache_clear(hn_context_kv(c));
  run(c, toks, 6, 0, 0, step);
  for (int i = 6; i < 16; i++)
    run(c, toks + i, 1, i, 0, step + (size_t) i * nv);
  /* A batch goes through the matrix-matrix kernels and a single token through dot
   * products: the same integer products, summed in another float order.  With 8-bit
   * activations a last-bit difference can flip one rounding of the next layer's input
   * and move the logits by a few 1e-3; a wrong position or mask moves them by O(1). */
  double bound = strstr((const char *) name, "f32") ? 1e-4 : 2e-2;
  for (int i = 0; i < 16; i++)
    g_assert_cmpfloat(rel_diff(full + (size_t) i * nv, step + (size_t) i * nv, (size_t) nv), <, bound);
  hn_context_free(c);
  hn_model_free(m);
}

static void
test_two_sequences(gconstpointer name)
{
  HnModel *m = load(name);
  int nv = hn_model_n_vocab(m);
  HnContext *c = context(m, 32, 16);
  const int na = 9, nb = 7;
  g_autofree float *alone = g_new(float, 16 * (size_t) nv);
  g_autofree float *both = g_new(float, 16 * (size_t) nv);
  run(c, toks, na, 0, 0, alone);
  hn_kv_cache_clear(hn_context_kv(c));
  run(c, toks + na, nb, 0, 1, alone + (size_t) na * nv);
  hn_kv_cache_clear(hn_context_kv(c));
  /* interleaved in one batch: a0 b0 a1 b1 ... */
  int32_t tok[16], pos[16], seq[16];
  bool want[16];
  int n = 0, ia = 0, ib = 0, order[16];
  while (ia < na || ib < nb) {
    if (ia < na) {
      tok[n] = toks[ia]; pos[n] = ia; seq[n] = 0; order[n] = ia; ia++; want[n++] = true;
    }
    if (ib < nb) {
      tok[n] = toks[na + ib]; pos[n] = ib; seq[n] = 1; order[n] = na + ib; ib++; want[n++] = true;
    }
  }
  HnBatch b = { .n_tokens = n, .token = tok, .pos = pos, .seq_id = seq, .want_logits = want };
  HnError err = { 0 };
  g_assert_true(hn_context_decode(c, &b, &err));
  for (int i = 0; i < n; i++)
    memcpy(both + (size_t) order[i] * nv, hn_context_get_logits(c, i), (size_t) nv * sizeof(float));
  /* The 7 tokens alone may take the small-batch kernels and the 16 together the batch
   * kernels: as in test_incremental, a last-bit difference can flip one rounding (F16
   * query and probabilities in attention, 8-bit activations) of a quantized model; a
   * leak between the sequences moves the logits by O(1). */
  double bound = strstr((const char *) name, "f32") ? 1e-5 : 2e-2;
  for (int i = 0; i < n; i++)
    g_assert_cmpfloat(rel_diff(alone + (size_t) i * nv, both + (size_t) i * nv, (size_t) nv), <, bound);
  hn_context_free(c);
  hn_model_free(m);
}

static void
test_shift(gconstpointer name)
{
  HnModel *m = load(name);
  int nv = hn_model_n_vocab(m);
  HnContext *c = context(m, 32, 16);
  g_autofree float *rows = g_new(float, 16 * (size_t) nv);
  g_autofree float *fresh = g_new(float, 16 * (size_t) nv);
  /* Attention depends on relative positions only, so 12 tokens evaluated at 10..21 and
   * shifted down by 10 must give the cache of positions 0..11 (a shift after removing
   * tokens is an approximation by design: later keys saw the removed tokens). */
  run(c, toks, 12, 10, 0, rows);
  HnKvCache *kv = hn_context_kv(c);
  hn_kv_cache_seq_shift(kv, 0, 10, -1, -10, hn_context_rope(c));
  g_assert_cmpint(hn_kv_cache_seq_pos_max(kv, 0), ==, 11);
  run(c, toks + 12, 1, 12, 0, rows);
  hn_kv_cache_clear(kv);
  run(c, toks, 13, 0, 0, fresh);
  double d = rel_diff(fresh + (size_t) 12 * nv, rows, (size_t) nv);
  /* The yardstick: the same tokens evaluated from scratch at 10..22, equal in exact
   * arithmetic; F16 keys and 8-bit activations make them differ (a lot on the random
   * qwen2 model).  A correct shift stays within that rounding noise. */
  hn_kv_cache_clear(kv);
  run(c, toks, 13, 10, 0, rows);
  double base = rel_diff(fresh + (size_t) 12 * nv, rows + (size_t) 12 * nv, (size_t) nv);
  g_test_message("%s: shifted vs recomputed %.2g, recomputed 10 positions later %.2g",
                 (const char *) name, d, base);
  g_assert_cmpfloat(d, <, 2.0 * base + 1e-3);
  hn_context_free(c);
  hn_model_free(m);
}

static bool
cancel_now(void *data)
{
  (void) data;
  return true;
}

static void
test_cancel_and_bad_batches(void)
{
  HnModel *m = load("stories260K-f32.gguf");
  HnContext *c = context(m, 8, 4);
  int32_t tok[3] = { 1, 2, 3 }, pos[3] = { 0, 1, 2 }, bad_tok[1] = { 512 }, bad_seq[3] = { 0, 5, 0 };
  HnError err = { 0 };
  HnBatch b = { .n_tokens = 3, .token = tok, .pos = pos };
  hn_context_set_cancel(c, cancel_now, NULL);
  g_assert_false(hn_context_decode(c, &b, &err));
  g_assert_cmpint(err.code, ==, HN_ERR_CANCELLED);
  g_assert_cmpint(hn_kv_cache_n_used(hn_context_kv(c)), ==, 0);
  hn_context_set_cancel(c, NULL, NULL);
  HnBatch bt = { .n_tokens = 1, .token = bad_tok, .pos = pos };
  g_assert_false(hn_context_decode(c, &bt, &err));
  g_assert_cmpint(err.code, ==, HN_ERR_INVALID_ARG);
  HnBatch bs = { .n_tokens = 3, .token = tok, .pos = pos, .seq_id = bad_seq };
  g_assert_false(hn_context_decode(c, &bs, &err));
  /* a batch longer than n_batch is split; only the last token gives logits */
  int32_t t8[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, p8[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
  HnBatch b8 = { .n_tokens = 8, .token = t8, .pos = p8 };
  g_assert_true(hn_context_decode(c, &b8, &err));
  g_assert_cmpint(hn_context_n_logits(c), ==, 1);
  /* the cache is full now */
  int32_t p9[1] = { 8 };
  HnBatch b9 = { .n_tokens = 1, .token = t8, .pos = p9 };
  g_assert_false(hn_context_decode(c, &b9, &err));
  hn_context_free(c);
  hn_model_free(m);
}

/* Deep in a context (more than one block of the attention's cells) a token's result
 * depends only on the cells it sees, not on how the work was shared: one token alone
 * (split into blocks across the threads), two tokens (the same) and six tokens of six
 * sequences in one batch (each thread a KV head at a time) give the same logits to the
 * last bit, every row wanting logits so that all take the one-row products.  And the
 * blocked softmax still agrees with the same token evaluated as part of a prompt batch. */
static void
test_deep_attention(gconstpointer name)
{
  enum { DEPTH = 600, SEQS = 6 };
  HnModel *m = load(name);
  int nv = hn_model_n_vocab(m);
  HnContextParams p = hn_context_default_params();
  p.n_ctx = DEPTH + 8;
  p.n_batch = 64;
  p.n_threads = 2;
  p.n_seq_max = SEQS;
  HnError err = { 0 };
  HnContext *c = hn_context_new(m, &p, &err);
  g_assert_nonnull(c);
  g_autofree int32_t *prompt = g_new(int32_t, DEPTH + 1);
  for (int i = 0; i <= DEPTH; i++)
    prompt[i] = toks[i % 16] + i % 7;
  g_autofree float *rows = g_new(float, 64 * (size_t) nv);
  for (int i = 0; i <= DEPTH; i += 64)
    run(c, prompt + i, MIN(64, DEPTH + 1 - i), i, 0, rows);
  /* the prompt's last row: token DEPTH among the 25 of the last batch */
  g_autofree float *in_prompt = g_memdup2(rows + (size_t) (DEPTH % 64) * nv, (size_t) nv * sizeof(float));
  HnKvCache *kv = hn_context_kv(c);
  hn_kv_cache_seq_rm(kv, 0, DEPTH, -1);
  for (int s = 1; s < SEQS; s++)
    hn_kv_cache_seq_cp(kv, 0, s, -1, -1);

  g_autofree float *alone = g_new(float, (size_t) nv);
  run(c, prompt + DEPTH, 1, DEPTH, 0, alone);
  hn_kv_cache_seq_rm(kv, 0, DEPTH, -1);
  double bound = strstr((const char *) name, "f32") ? 1e-4 : 2e-2;
  g_assert_cmpfloat(rel_diff(in_prompt, alone, (size_t) nv), <, bound);

  for (int n = 2; n <= SEQS; n += SEQS - 2) {
    int32_t tok[SEQS], pos[SEQS], sq[SEQS];
    bool want[SEQS];
    for (int i = 0; i < n; i++) {
      tok[i] = prompt[DEPTH];
      pos[i] = DEPTH;
      sq[i] = i;
      want[i] = true;
    }
    HnBatch b = { .n_tokens = n, .token = tok, .pos = pos, .seq_id = sq, .want_logits = want };
    if (!hn_context_decode(c, &b, &err))
      g_error("decode: %s", err.message);
    for (int i = 0; i < n; i++)
      g_assert_cmpmem(hn_context_get_logits(c, i), (size_t) nv * sizeof(float), alone, (size_t) nv * sizeof(float));
    hn_kv_cache_seq_rm(kv, -1, DEPTH, -1);
  }
  hn_context_free(c);
  hn_model_free(m);
}

/* A type regrouped at load for its decode tile (Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, Q4_K)
 * against the file layout: the same 8-bit products summed in another order, for a
 * prompt (the panel GEMM reads the grouped rows back) and for one token at a time (the
 * grouped tile).  In these models only ffn_down (768 columns: one run of 16 blocks and a
 * tail, for Q4_K one run of two super-blocks and a third) is wide enough to regroup; the
 * Q4_K_M file has it in Q4_K in some layers and in Q6_K in the others. */
static void
test_grouped_model(gconstpointer data)
{
  const HnType type = (HnType) GPOINTER_TO_INT(data);
  g_autofree char *type_name = g_ascii_strdown(hn_type_name(type), -1);
  g_autofree char *name =
    g_strdup_printf("quant-llama-v512-%s%s.gguf", type_name, type == HN_TYPE_Q4_K ? "_m" : "");
  g_setenv("HANASHI_REGROUP", "0", TRUE);
  HnModel *file_layout = load(name);
  g_unsetenv("HANASHI_REGROUP");
  HnModel *grouped = load(name);
  g_assert_cmpint(file_layout->n_grouped, ==, 0);
  if (!hn_model_regroups(type)) {
    g_assert_cmpint(grouped->n_grouped, ==, 0);
    hn_model_free(file_layout);
    hn_model_free(grouped);
    g_test_skip("this processor's kernels read the type in its file layout");
    return;
  }
  int of_type = 0;
  for (int il = 0; il < hn_model_n_layer(grouped); il++) {
    const HnType in_file = (HnType) file_layout->layers[il].w_down->type;
    of_type += in_file == type;
    g_assert_cmpint(grouped->layers[il].w_down->type, ==, in_file == type ? hn_type_regrouped(type) : in_file);
    g_assert_cmpint(grouped->layers[il].w_gate->type, ==, file_layout->layers[il].w_gate->type);
  }
  g_assert_cmpint(of_type, >, 0);
  g_assert_cmpint(grouped->n_grouped, ==, of_type);
  const int nv = hn_model_n_vocab(grouped), n_prompt = 12, n_steps = 4;
  g_autofree float *want = g_new(float, (size_t) (n_prompt + n_steps) * nv);
  g_autofree float *got = g_new(float, (size_t) (n_prompt + n_steps) * nv);
  HnModel *models[2] = { file_layout, grouped };
  float *rows[2] = { want, got };
  for (int m = 0; m < 2; m++) {
    HnContext *c = context(models[m], 64, 16);
    run(c, toks, n_prompt, 0, 0, rows[m]);
    for (int i = 0; i < n_steps; i++)
      run(c, toks + n_prompt + i, 1, n_prompt + i, 0, rows[m] + (size_t) (n_prompt + i) * nv);
    hn_context_free(c);
  }
  /* Q4_K in the file layout decodes through the four-row dot product, whose float order
   * differs from the tile's more than one tile's from another: a last-bit difference can
   * flip one rounding of the next layer's 8-bit input and move the logits by a few 1e-3
   * (as a batch against single tokens above); a wrong scale or min moves them by O(1).
   * The kernels themselves are checked to 1e-4 of their magnitude in test-simd. */
  const double bound = type == HN_TYPE_Q4_K ? 2e-2 : 1e-4;
  for (int i = 0; i < n_prompt + n_steps; i++)
    g_assert_cmpfloat(rel_diff(want + (size_t) i * nv, got + (size_t) i * nv, (size_t) nv), <, bound);
  hn_model_free(file_layout);
  hn_model_free(grouped);
}

/* Whether `t` is the file's tensor of that name (the file's mapping), not a copy. */
static gboolean
reads_file(HnModel *m, const HnGgufTensor *t)
{
  return t == hn_gguf_find_tensor(hn_model_gguf(m), t->name);
}

/* The blocks' matrices are copied at load into memory of huge pages (decode on an AMD
 * EPYC ran 27-29% faster there than from the file's pages), holding the file's bytes;
 * HANASHI_REGROUP=0 leaves them in the file.  The same logits either way.  Layers that
 * a context moves to the graphics device go back to the file's mapping, their copies
 * given back; the layers left on the processor keep theirs. */
static void
test_placed_weights(void)
{
  const char *name = "quant-llama-v512-q6_k.gguf"; /* a type without a regrouped layout */
  g_setenv("HANASHI_REGROUP", "0", TRUE);
  HnModel *file = load(name);
  g_unsetenv("HANASHI_REGROUP");
  HnModel *placed = load(name);
  g_assert_cmpint(file->n_placed, ==, 0);
  const int n_layer = hn_model_n_layer(placed);
  g_assert_cmpint(placed->n_placed, >=, 7 * n_layer);
  g_assert_cmpint(placed->n_grouped, ==, 0);
  for (int il = 0; il < n_layer; il++) {
    const HnLayer *L = &placed->layers[il];
    const HnGgufTensor *mats[7] = { L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down };
    for (int i = 0; i < 7; i++) {
      g_assert_false(reads_file(placed, mats[i]));
      const HnGgufTensor *f = hn_gguf_find_tensor(hn_model_gguf(file), mats[i]->name);
      g_assert_cmpint(mats[i]->type, ==, f->type);
      g_assert_cmpmem(mats[i]->data, mats[i]->nbytes, f->data, f->nbytes);
    }
    g_assert_true(reads_file(file, file->layers[il].wq));
  }
  const int nv = hn_model_n_vocab(placed), n_prompt = 6;
  g_autofree float *want = g_new(float, (size_t) (n_prompt + 1) * nv);
  g_autofree float *got = g_new(float, (size_t) (n_prompt + 1) * nv);
  HnModel *models[2] = { file, placed };
  float *rows[2] = { want, got };
  for (int m = 0; m < 2; m++) {
    HnContext *c = context(models[m], 64, 16);
    run(c, toks, n_prompt, 0, 0, rows[m]);
    run(c, toks + n_prompt, 1, n_prompt, 0, rows[m] + (size_t) n_prompt * nv);
    hn_context_free(c);
  }
  g_assert_cmpmem(want, sizeof(float) * (size_t) (n_prompt + 1) * nv, got, sizeof(float) * (size_t) (n_prompt + 1) * nv);

  HnVkDeviceInfo dev;
  HnError err = { 0 };
  if (hn_vk_list_devices(&dev, 1, &err) > 0) {
    HnContextParams p = hn_context_default_params();
    p.n_ctx = 64;
    p.n_batch = 16;
    p.n_threads = 2;
    p.n_gpu_layers = 1;
    p.gpu_device = 0;
    HnContext *c = hn_context_new(placed, &p, &err);
    g_assert_nonnull(c);
    g_test_message("%d layer(s) on %s", hn_context_gpu_layers(c), dev.name);
    if (hn_context_gpu_layers(c) == 1) {
      g_assert_true(reads_file(placed, placed->layers[n_layer - 1].w_down));
      g_assert_true(reads_file(placed, placed->layers[n_layer - 1].wq));
      g_assert_false(reads_file(placed, placed->layers[n_layer - 2].w_down));
    }
    hn_context_free(c);
  }
  hn_model_free(file);
  hn_model_free(placed);
}

/* A "VmRSS:" / "VmHWM:" line of /proc/self/status in bytes; -1 where there is none. */
static gint64
status_bytes(const char *field)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/self/status", &text, NULL, NULL))
    return -1;
  const char *line = strstr(text, field);
  return line ? g_ascii_strtoll(line + strlen(field), NULL, 10) * 1024 : -1;
}

/* VmHWM reset to the present resident size; false where /proc does not allow it. */
static gboolean
reset_peak(void)
{
  FILE *clear = fopen("/proc/self/clear_refs", "w");
  gboolean reset = clear && fputs("5", clear) >= 0;
  if (clear && fclose(clear) != 0)
    reset = FALSE;
  return reset;
}

/* How much the peak resident size grows while `name` loads (kept loaded in *out). */
static gint64
load_growth(const char *name, HnModel **out)
{
  g_assert_true(reset_peak());
  const gint64 before = status_bytes("VmRSS:");
  *out = load(name);
  const gint64 peak = status_bytes("VmHWM:");
  g_assert_cmpint(before, >, 0);
  g_assert_cmpint(peak, >=, before);
  return peak - before;
}

/* Placing the weights holds about one copy of them at any time: the file's pages of
 * each piece are dropped as soon as it is copied.  Dropping them only after the whole
 * copy made the load's peak two copies (a TinyLlama-shaped Q4_0 file: 1150 MB against
 * 580 MB read from the file).  Measured against a load that reads the file (its
 * bookkeeping, the same in both), both models held, so that neither load reuses memory
 * the other freed. */
static void
test_placed_weights_peak(void)
{
  const char *name = "tiny-llama-spm-q8_0.gguf";
  if (!reset_peak()) {
    g_test_skip("the peak resident size cannot be reset here");
    return;
  }
  /* a first load measures the decode kernels where nothing is cached (a matrix of its
   * own, not part of what is compared) */
  hn_model_free(load(name));
  HnModel *file = NULL, *placed = NULL;
  g_setenv("HANASHI_REGROUP", "0", TRUE);
  const gint64 file_growth = load_growth(name, &file);
  g_unsetenv("HANASHI_REGROUP");
  const gint64 placed_growth = load_growth(name, &placed);
  g_assert_cmpint(file->n_placed, ==, 0);
  g_assert_cmpint(placed->n_placed, >, 0);
  const gint64 bytes = (gint64) placed->placed_bytes;
  g_test_message("placed %.1f MB; peak grew by %.1f MB reading the file, by %.1f MB placing", bytes / 1e6,
                 file_growth / 1e6, placed_growth / 1e6);
  /* one copy, and pieces of the file in flight (up to 4 MiB per copying thread): two
   * copies would be 2 × bytes */
  g_assert_cmpint(placed_growth - file_growth, <, bytes + bytes / 2);
  hn_model_free(placed);
  hn_model_free(file);
}

/* The first load on a processor model, with nothing cached, measures the decode kernels
 * of the types it would regroup before regrouping them (it used to regroup without
 * knowing and leave the measuring to the first context).  Runs in a child process with
 * an empty cache directory, so that no earlier test's choice is known. */
static void
test_regroup_measures_first(void)
{
  const HnSimdKernels *k = hn_simd_kernels();
  const HnType layout = hn_type_regrouped(HN_TYPE_Q4_0);
  if (!k || layout == HN_TYPE_COUNT || !k->gemm_tile[layout] || !k->vec_dot[HN_TYPE_Q4_0] ||
      g_getenv("HANASHI_DECODE") || g_getenv("HANASHI_REGROUP")) {
    g_test_skip("no regrouped Q4_0 tile to measure against the dot product here");
    return;
  }
  if (g_test_subprocess()) {
    g_setenv("XDG_CACHE_HOME", g_getenv("HANASHI_TEST_CACHE"), TRUE);
    HnModel *m = load("quant-llama-v512-q4_0.gguf");
    /* no context yet: whatever the cache holds now was measured by the load */
    g_autofree char *path = g_build_filename(g_getenv("HANASHI_TEST_CACHE"), "hanashi", "decode-kernels", NULL);
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    g_assert_nonnull(strstr(text, "\nQ4_0 "));
    /* and the load followed what it measured */
    const gboolean tile = strstr(text, "\nQ4_0 tile") != NULL;
    g_assert_cmpint(m->n_grouped > 0, ==, tile);
    hn_model_free(m);
    return;
  }
  g_autofree char *cache = g_dir_make_tmp("hanashi-cache-XXXXXX", NULL);
  g_assert_nonnull(cache);
  g_autofree char *file = g_build_filename(cache, "hanashi", "decode-kernels", NULL);
  g_setenv("HANASHI_TEST_CACHE", cache, TRUE);
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_unsetenv("HANASHI_TEST_CACHE");
  const gboolean written = g_file_test(file, G_FILE_TEST_EXISTS);
  g_remove(file);
  g_autofree char *dir = g_path_get_dirname(file);
  g_rmdir(dir);
  g_rmdir(cache);
  g_test_trap_assert_passed();
  g_assert_true(written);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  testdata = g_getenv("HANASHI_TESTDATA");
  g_autofree char *probe = testdata ? g_build_filename(testdata, "models", "stories260K-f32.gguf", NULL) : NULL;
  if (!probe || !g_file_test(probe, G_FILE_TEST_EXISTS)) {
    g_test_skip("no test data");
    return g_test_run();
  }
  static const char *models[] = { "stories260K-f32.gguf", "tiny-qwen2-gpt2-q8_0.gguf" };
  for (size_t i = 0; i < G_N_ELEMENTS(models); i++) {
    g_autofree char *a = g_strdup_printf("/context/incremental/%s", models[i]);
    g_autofree char *b = g_strdup_printf("/context/two-sequences/%s", models[i]);
    g_autofree char *s = g_strdup_printf("/context/shift/%s", models[i]);
    g_test_add_data_func(a, models[i], test_incremental);
    g_test_add_data_func(b, models[i], test_two_sequences);
    g_test_add_data_func(s, models[i], test_shift);
  }
  g_test_add_func("/context/cancel-and-bad-batches", test_cancel_and_bad_batches);
  g_test_add_data_func("/context/q4_0-grouped", GINT_TO_POINTER(HN_TYPE_Q4_0), test_grouped_model);
  g_test_add_data_func("/context/q8_0-grouped", GINT_TO_POINTER(HN_TYPE_Q8_0), test_grouped_model);
  g_test_add_data_func("/context/q5_0-grouped", GINT_TO_POINTER(HN_TYPE_Q5_0), test_grouped_model);
  g_test_add_data_func("/context/q4_1-grouped", GINT_TO_POINTER(HN_TYPE_Q4_1), test_grouped_model);
  g_test_add_data_func("/context/q5_1-grouped", GINT_TO_POINTER(HN_TYPE_Q5_1), test_grouped_model);
  g_test_add_data_func("/context/q4_k-grouped", GINT_TO_POINTER(HN_TYPE_Q4_K), test_grouped_model);
  g_test_add_func("/context/placed-weights", test_placed_weights);
  g_test_add_func("/context/placed-weights-peak", test_placed_weights_peak);
  g_test_add_func("/context/regroup-measures-first", test_regroup_measures_first);
  static const char *deep_models[] = { "quant-llama-v512-f32.gguf", "tiny-qwen2-gpt2-q8_0.gguf" };
  for (size_t i = 0; i < G_N_ELEMENTS(deep_models); i++) {
    g_autofree char *d = g_strdup_printf("/context/deep-attention/%s", deep_models[i]);
    g_test_add_data_func(d, deep_models[i], test_deep_attention);
  }
  return g_test_run();
}
