/* hn-kernels.c — W × X over the thread pool.
 *
 * Three paths, all computing what the scalar reference computes (activations quantized
 * with bit-identical quantizers, then exact integer dot products per block; only the
 * float summation order differs):
 *  - panel GEMM, for batches of HN_PANEL_MIN_TOKENS tokens or more when the level has
 *    one for the type: threads take 16-row panels from a shared counter, pack one panel
 *    at a time into their own scratch and stream every token of the batch through it
 *    (matrix-matrix product; the panel stays in L2 while the activations stream);
 *  - tiles, for decode and small batches when the level has them: a few rows against
 *    one to four tokens, rows dealt in 16-row units from a shared counter;
 *  - otherwise one dot product per (row, token), rows dealt the same way.
 * Every weight row is read once per call.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-kernels.h"

#include "hn-decode-choice.h"

#include "hn-quants-blocks.h"
#include "hn-simd.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Below this many tokens, packing panels costs more than it saves. */
#define HN_PANEL_MIN_TOKENS 8

/* Work is dealt from a shared counter in whole 16-row groups (no two threads write one
 * cache line of the output), about eight units per thread: on a machine shared with
 * other programs a thread that gets preempted then holds up nobody. */
static int64_t
unit_rows(int64_t rows, int nth)
{
  int64_t u = (rows / ((int64_t) nth * 8) + 15) / 16 * 16;
  return u < 16 ? 16 : u;
}

/* Claims the next rows [*r0, *r1) of `rows`: `unit` rows at a time while plenty is left,
 * then 1 / (2 · nth) of what is left, down to 16 rows, so that the threads run out of
 * work together.  With whole units to the end, the thread that took the last one kept
 * the others waiting for half a unit on average, at every product: a decode step runs
 * nearly two hundred of them (TinyLlama-shaped Q4_0, AMD EPYC, 2 threads: a median of
 * 2.3-4.1 µs of waiting per product before, 1.0-1.3 µs after). */
static bool
claim_rows(atomic_llong *next, int64_t rows, int64_t unit, int nth, int64_t *r0, int64_t *r1)
{
  long long start = atomic_load_explicit(next, memory_order_relaxed);
  for (;;) {
    if (start >= rows)
      return false;
    int64_t left = rows - start, size = (left / (2 * (int64_t) nth) + 15) / 16 * 16;
    size = size > unit ? unit : size < 16 ? 16 : size;
    size = size > left ? left : size;
    if (atomic_compare_exchange_weak_explicit(next, &start, start + size, memory_order_relaxed,
                                              memory_order_relaxed)) {
      *r0 = start;
      *r1 = start + size;
      return true;
    }
  }
}

static size_t
align64(size_t v)
{
  return (v + 63) & ~(size_t) 63;
}

/* Converted activations of n_tokens rows, in whichever format the path uses. */
static size_t
act_bytes(int64_t n, int n_tokens)
{
  size_t vec_dot = (size_t) n * sizeof(float);                          /* F32: widest */
  size_t chunks = (size_t) (n / 64 + 1) * sizeof(HnActChunk);           /* tiles */
  size_t blocks = (size_t) (n / 32) * sizeof(HnActBlock);               /* panels */
  size_t row = vec_dot > chunks ? vec_dot : chunks;
  return align64((row > blocks ? row : blocks) * (size_t) n_tokens);
}

size_t
hn_matmul_scratch_bytes(int64_t n, int n_tokens, int n_threads)
{
  size_t panel = align64((size_t) (n / 32 + 1) * HN_PANEL_SCRATCH_PER_32);
  return 64 + act_bytes(n, n_tokens) + (size_t) (n_threads > 0 ? n_threads : 1) * panel;
}

/* ---- dot-product path ---- */

typedef struct {
  HnVecDotFn fast;
  HnVecDotRowsFn fast_rows; /* several rows at once, where the level has it */
  HnType type;
  int64_t n, rows;
  const uint8_t *w;
  size_t w_row_bytes;
  const uint8_t *act;
  size_t act_row_bytes;
  int n_tokens;
  float *y;
  int64_t y_stride;
  int64_t unit;
  atomic_llong next;
} MatmulJob;

/* The dot-product path reads one row after the other: one stream per thread, which the
 * hardware prefetcher alone keeps far below the memory's bandwidth.  At the start of each
 * row, a row about a kilobyte further is requested into L2 (on a 2-core Intel Xeon, AVX2
 * decode of a TinyLlama-shaped Q4_0 file went from about 15 to 20 tokens/s). */
static inline void
prefetch_next_rows(const uint8_t *row, size_t row_bytes, int64_t rows_left)
{
  int64_t ahead = row_bytes >= 1024 ? 1 : (int64_t) ((1024 + row_bytes - 1) / row_bytes);
  if (ahead >= rows_left)
    return;
  const uint8_t *next = row + (size_t) ahead * row_bytes;
  for (size_t off = 0; off < row_bytes; off += 64)
    __builtin_prefetch(next + off, 0, 2);
}

static void
matmul_worker(void *data, int ith, int nth)
{
  MatmulJob *job = data;
  (void) ith;
  for (int64_t r0, r1; claim_rows(&job->next, job->rows, job->unit, nth, &r0, &r1);) {
    if (job->fast_rows) {
      /* a token's outputs of consecutive rows are consecutive in y */
      for (int64_t r = r0; r < r1; r += HN_DOT_ROWS) {
        int n_rows = r1 - r < HN_DOT_ROWS ? (int) (r1 - r) : HN_DOT_ROWS;
        for (int t = 0; t < job->n_tokens; t++)
          job->fast_rows(job->n, job->w + (size_t) r * job->w_row_bytes, job->w_row_bytes, n_rows,
                         job->act + (size_t) t * job->act_row_bytes, job->y + (size_t) t * (size_t) job->y_stride + (size_t) r);
      }
      continue;
    }
    for (int64_t r = r0; r < r1; r++) {
      const uint8_t *wr = job->w + (size_t) r * job->w_row_bytes;
      prefetch_next_rows(wr, job->w_row_bytes, job->rows - r);
      for (int t = 0; t < job->n_tokens; t++) {
        const uint8_t *a = job->act + (size_t) t * job->act_row_bytes;
        float v = job->fast ? job->fast(job->n, wr, a) : hn_vec_dot_ref(job->type, job->n, wr, a);
        job->y[(size_t) t * (size_t) job->y_stride + (size_t) r] = v;
      }
    }
  }
}

/* ---- tile path (decode and small batches) ---- */

typedef struct {
  const HnSimdKernels *k;
  HnType type;
  int64_t n, rows, n_chunks;
  const HnActChunk *act;
  int n_tokens;
  const uint8_t *w;
  size_t w_row_bytes;
  float *y;
  int64_t y_stride;
  int64_t unit;
  atomic_llong next;
} TileJob;

/* Quantizes one token (reference format, bit-identical quantizer) and lays it out as
 * 64-element chunks with per-lane scales and sums for the tile kernels.  Each 32-block's
 * d · Σq (block_sum) is, for Q8_1, the block's own rounded s, which the reference
 * multiplies the weights' mins with. */
void
hn_act_chunks_prepare(const HnSimdKernels *k, HnType vdt, int offset, const float *x, int64_t n, HnActChunk *out)
{
  HnQuantizeFn quantize = k->quantize[vdt];
  const int64_t n_blocks = n / 32;
  memset(out, 0, (size_t) ((n_blocks + 1) / 2) * sizeof *out);
  for (int64_t i0 = 0; i0 < n; i0 += HN_QK_K) {
    int64_t len = n - i0 < HN_QK_K ? n - i0 : HN_QK_K;
    int8_t qs[HN_QK_K];
    float d[HN_QK_K / 32], rounded_sum[HN_QK_K / 32];
    if (vdt == HN_TYPE_Q8_K) {
      HnBlockQ8_K q;
      if (quantize)
        quantize(x + i0, &q, HN_QK_K);
      else
        hn_quantize_row(HN_TYPE_Q8_K, x + i0, &q, HN_QK_K);
      memcpy(qs, q.qs, HN_QK_K);
      for (int b = 0; b < HN_QK_K / 32; b++)
        d[b] = q.d;
    } else {
      /* Q8_0 or Q8_1 blocks: d first, then Q8_1's rounded s, then the 32 quants */
      const HnType block_type = vdt == HN_TYPE_Q8_1 ? HN_TYPE_Q8_1 : HN_TYPE_Q8_0;
      const size_t block_bytes = hn_type_block_bytes(block_type);
      _Alignas(16) uint8_t q[HN_QK_K / 32 * sizeof(HnBlockQ8_1)];
      if (quantize)
        quantize(x + i0, q, len);
      else
        hn_quantize_row(block_type, x + i0, q, len);
      for (int b = 0; b < len / 32; b++) {
        const uint8_t *block = q + (size_t) b * block_bytes;
        uint16_t half;
        memcpy(&half, block, 2);
        d[b] = hn_half_to_float(half);
        if (block_type == HN_TYPE_Q8_1) {
          memcpy(&half, block + 2, 2);
          rounded_sum[b] = hn_half_to_float(half);
        }
        memcpy(qs + 32 * b, block + block_bytes - 32, 32);
      }
    }
    for (int64_t e = 0; e < len; e += 4) {
      int64_t g = i0 + e; /* element index in the row */
      HnActChunk *c = &out[g / 64];
      int lane = (int) (g % 64) / 4;
      int32_t s4 = qs[e] + qs[e + 1] + qs[e + 2] + qs[e + 3];
      memcpy(c->q + 4 * lane, qs + e, 4);
      c->d[lane] = d[e / 32];
      c->neg_offset_sum[lane] = -offset * s4;
      c->lane_sum[lane] = d[e / 32] * (float) s4;
    }
    for (int64_t b = 0; b < len / 32; b++) {
      int32_t s32 = 0;
      for (int l = 0; l < 32; l++)
        s32 += qs[32 * b + l];
      int64_t g = i0 / 32 + b;
      out[g / 2].block_sum[g % 2] = vdt == HN_TYPE_Q8_1 ? rounded_sum[b] : d[b] * (float) s32;
    }
  }
}

/* Group g is written below chunk 8g, where no chunk still to be read lies. */
void
hn_act_chunks_group(HnActChunk *chunks, int64_t n)
{
  const int64_t n_groups = n / 32 / HN_GROUP_BLOCKS;
  for (int64_t g = 0; g < n_groups; g++) {
    HnActGroup group;
    for (int j = 0; j < HN_GROUP_BLOCKS; j++) {
      const HnActChunk *c = &chunks[g * HN_GROUP_BLOCKS / 2 + j / 2];
      const int half = j % 2;
      const int8_t *q = c->q + 32 * half;
      for (int s = 0; s < 4; s++) {
        memcpy(&group.q[2 * s][4 * j], q + 4 * s, 4);
        memcpy(&group.q[2 * s + 1][4 * j], q + 16 + 4 * s, 4);
      }
      group.d[j] = c->d[8 * half];
      int32_t offset_sum = 0;
      for (int lane = 8 * half; lane < 8 * half + 8; lane++)
        offset_sum += c->neg_offset_sum[lane];
      group.neg_offset_sum[j] = offset_sum;
      group.block_sum[j] = c->block_sum[half];
    }
    memcpy((HnActGroup *) chunks + g, &group, sizeof group);
  }
}

/* The tile kernels of regrouped layouts read a token's activations as HnActGroup records. */
static inline bool
reads_grouped_act(HnType type)
{
  return hn_type_file_layout(type) != type;
}

/* A token's activations in the form the type's tile kernel reads. */
static void
prepare_tile_act(const HnSimdKernels *k, HnType type, const float *x, int64_t n, HnActChunk *out)
{
  hn_act_chunks_prepare(k, hn_type_vec_dot_type(type), k->gemm_offset[type], x, n, out);
  if (reads_grouped_act(type))
    hn_act_chunks_group(out, n);
}

static void
tile_worker(void *data, int ith, int nth)
{
  TileJob *job = data;
  HnGemmTileFn tile = job->k->gemm_tile[job->type];
  const int tr = job->k->gemm_rows, tc = job->k->gemm_cols;
  (void) ith;
  for (int64_t r0, r1; claim_rows(&job->next, job->rows, job->unit, nth, &r0, &r1);) {
    for (int64_t r = r0; r < r1; r += tr) {
      int n_rows = r1 - r < tr ? (int) (r1 - r) : tr;
      for (int t = 0; t < job->n_tokens; t += tc) {
        int cols = job->n_tokens - t < tc ? job->n_tokens - t : tc;
        /* the tile writes out[row * out_stride + col] while y keeps a token's rows
         * together: one column goes straight to y, several through a small buffer */
        if (cols == 1) {
          tile(job->n, job->w + (size_t) r * job->w_row_bytes, job->w_row_bytes, n_rows,
               job->act + (size_t) t * (size_t) job->n_chunks, (size_t) job->n_chunks, cols,
               job->y + (size_t) t * (size_t) job->y_stride + (size_t) r, 1);
        } else {
          float out[16 * 16];
          tile(job->n, job->w + (size_t) r * job->w_row_bytes, job->w_row_bytes, n_rows,
               job->act + (size_t) t * (size_t) job->n_chunks, (size_t) job->n_chunks, cols, out, 16);
          for (int i = 0; i < n_rows; i++)
            for (int c = 0; c < cols; c++)
              job->y[(size_t) (t + c) * (size_t) job->y_stride + (size_t) (r + i)] = out[i * 16 + c];
        }
      }
    }
  }
}

/* ---- panel path ---- */

typedef struct {
  const HnSimdKernels *k;
  HnType type, vdt;
  int64_t n, rows;
  const float *x;
  int n_tokens;
  int offset;
  HnActBlock *act;
  uint8_t *panels;
  size_t panel_bytes;
  const uint8_t *w;
  size_t w_row_bytes;
  float *y;
  int64_t y_stride;
  atomic_int next;
} PanelJob;

/* Fills one activation block from 32 reference quants: its scale, the zero-point
 * corrections and the sums the types with mins need.  `dsum` is d · Σq, except for Q8_1,
 * whose own rounded s the reference multiplies the weights' min with. */
static void
fill_act_block(HnActBlock *a, const int8_t *qs, float d, int32_t s0, int32_t s1, float dsum, int32_t off)
{
  memcpy(a->q, qs, 32);
  a->d = d;
  a->off_sum[0] = -off * s0;
  a->off_sum[1] = -off * s1;
  a->off_sum32 = -off * (s0 + s1);
  a->dsum = dsum;
  a->dsum_half[0] = d * (float) s0;
  a->dsum_half[1] = d * (float) s1;
}

static void
sums_of_halves(const int8_t *qs, int32_t *s0, int32_t *s1)
{
  *s0 = *s1 = 0;
  for (int l = 0; l < 16; l++) {
    *s0 += qs[l];
    *s1 += qs[16 + l];
  }
}

/* Quantizes one token's row with the reference format of the weight type (Q8_0, Q8_1 or
 * Q8_K), 256 elements at a time, and expands it into activation blocks. */
static void
prepare_token(const PanelJob *job, const float *x, HnActBlock *out)
{
  HnQuantizeFn quantize = job->k->quantize[job->vdt];
  const int32_t off = job->offset;
  for (int64_t i0 = 0; i0 < job->n; i0 += HN_QK_K) {
    int64_t len = job->n - i0 < HN_QK_K ? job->n - i0 : HN_QK_K;
    HnActBlock *a = &out[i0 / 32];
    if (job->vdt == HN_TYPE_Q8_K) {
      HnBlockQ8_K q;
      if (quantize)
        quantize(x + i0, &q, HN_QK_K);
      else
        hn_quantize_row(HN_TYPE_Q8_K, x + i0, &q, HN_QK_K);
      for (int b = 0; b < HN_QK_K / 32; b++) {
        int32_t s0 = q.bsums[2 * b], s1 = q.bsums[2 * b + 1];
        fill_act_block(&a[b], q.qs + 32 * b, q.d, s0, s1, q.d * (float) (s0 + s1), off);
      }
    } else if (job->vdt == HN_TYPE_Q8_1) {
      HnBlockQ8_1 q[HN_QK_K / 32];
      if (quantize)
        quantize(x + i0, q, len);
      else
        hn_quantize_row(HN_TYPE_Q8_1, x + i0, q, len);
      for (int b = 0; b < len / 32; b++) {
        int32_t s0, s1;
        sums_of_halves(q[b].qs, &s0, &s1);
        fill_act_block(&a[b], q[b].qs, hn_half_to_float(q[b].d), s0, s1, hn_half_to_float(q[b].s), off);
      }
    } else {
      HnBlockQ8_0 q[HN_QK_K / 32];
      if (quantize)
        quantize(x + i0, q, len);
      else
        hn_quantize_row(HN_TYPE_Q8_0, x + i0, q, len);
      for (int b = 0; b < len / 32; b++) {
        int32_t s0, s1;
        sums_of_halves(q[b].qs, &s0, &s1);
        const float d = hn_half_to_float(q[b].d);
        fill_act_block(&a[b], q[b].qs, d, s0, s1, d * (float) (s0 + s1), off);
      }
    }
  }
}

static void
prepare_worker(void *data, int ith, int nth)
{
  const PanelJob *job = data;
  int t0 = (int) ((int64_t) job->n_tokens * ith / nth), t1 = (int) ((int64_t) job->n_tokens * (ith + 1) / nth);
  for (int t = t0; t < t1; t++) {
    const float *x = job->x + (size_t) t * (size_t) job->n;
    if (job->type == HN_TYPE_F16 || job->type == HN_TYPE_BF16)
      (job->type == HN_TYPE_F16 ? job->k->round_f16 : job->k->round_bf16)(
        x, (float *) job->act + (size_t) t * (size_t) job->n, job->n);
    else
      prepare_token(job, x, job->act + (size_t) t * (size_t) (job->n / 32));
  }
}

static void
panel_worker(void *data, int ith, int nth)
{
  PanelJob *job = data;
  HnPackPanelFn pack = job->k->pack_panel[job->type];
  HnPanelGemmFn gemm = job->k->panel_gemm[job->type];
  uint8_t *panel = job->panels + (size_t) ith * job->panel_bytes;
  int64_t n_panels = (job->rows + HN_PANEL_ROWS - 1) / HN_PANEL_ROWS;
  size_t act_stride = (size_t) (job->n / 32);
  (void) nth;
  for (int64_t p; (p = atomic_fetch_add(&job->next, 1)) < n_panels;) {
    int64_t r0 = p * HN_PANEL_ROWS;
    int n_rows = job->rows - r0 < HN_PANEL_ROWS ? (int) (job->rows - r0) : HN_PANEL_ROWS;
    pack(job->w + (size_t) r0 * job->w_row_bytes, job->w_row_bytes, n_rows, job->n, panel);
    if (job->type == HN_TYPE_F16 || job->type == HN_TYPE_BF16) {
      const float *act = (const float *) job->act;
      HnPanelGemmF32Fn gemm_float = job->type == HN_TYPE_F16 ? job->k->panel_gemm_f16 : job->k->panel_gemm_bf16;
      for (int t = 0; t < job->n_tokens; t += HN_PANEL_COLS) {
        int cols = job->n_tokens - t < HN_PANEL_COLS ? job->n_tokens - t : HN_PANEL_COLS;
        gemm_float(panel, job->n, n_rows, act + (size_t) t * (size_t) job->n, (size_t) job->n, cols,
                   job->y + (size_t) t * (size_t) job->y_stride + (size_t) r0, (size_t) job->y_stride);
      }
      continue;
    }
    for (int t = 0; t < job->n_tokens; t += HN_PANEL_COLS) {
      int cols = job->n_tokens - t < HN_PANEL_COLS ? job->n_tokens - t : HN_PANEL_COLS;
      gemm(panel, job->n, n_rows, job->act + (size_t) t * act_stride, act_stride, cols,
           job->y + (size_t) t * (size_t) job->y_stride + (size_t) r0, (size_t) job->y_stride);
    }
  }
}

void
hn_matmul(HnThreadPool *pool, const HnGgufTensor *w, const float *x, int n_tokens,
          void *act_scratch, float *y, int64_t y_stride)
{
  hn_matmul_with(pool, w, x, n_tokens, act_scratch, y, y_stride, HN_DECODE_UNMEASURED);
}

static void matmul_impl(HnThreadPool *pool, const HnGgufTensor *w, const float *x, int n_tokens,
                        void *act_scratch, float *y, int64_t y_stride, int decode_kernel, HnMatmulPath path);

void
hn_matmul_with(HnThreadPool *pool, const HnGgufTensor *w, const float *x, int n_tokens,
               void *act_scratch, float *y, int64_t y_stride, int decode_kernel)
{
  matmul_impl(pool, w, x, n_tokens, act_scratch, y, y_stride, decode_kernel, HN_MATMUL_AUTO);
}

void
hn_matmul_path(HnThreadPool *pool, const HnGgufTensor *w, const float *x, int n_tokens,
               void *act_scratch, float *y, int64_t y_stride, HnMatmulPath path)
{
  matmul_impl(pool, w, x, n_tokens, act_scratch, y, y_stride, HN_DECODE_UNMEASURED, path);
}

static void
matmul_impl(HnThreadPool *pool, const HnGgufTensor *w, const float *x, int n_tokens,
            void *act_scratch, float *y, int64_t y_stride, int decode_kernel, HnMatmulPath path)
{
  const HnSimdKernels *k = hn_simd_kernels();
  HnType type = (HnType) w->type;
  HnType vdt = hn_type_vec_dot_type(type);
  int64_t n = w->ne[0];
  uint8_t *scratch = (uint8_t *) align64((size_t) act_scratch);
  /* F16 and BF16 panels take f32 activations rounded like the reference's */
  bool panel_float = k && k->pack_panel[type] &&
                     ((type == HN_TYPE_F16 && k->panel_gemm_f16 && k->round_f16) ||
                      (type == HN_TYPE_BF16 && k->panel_gemm_bf16 && k->round_bf16));
  bool panel_size = path == HN_MATMUL_BATCH || (path == HN_MATMUL_AUTO && n_tokens >= HN_PANEL_MIN_TOKENS);
  if (k && panel_size && ((k->panel_gemm[type] && n % 32 == 0) || panel_float)) {
    PanelJob job = {
      .k = k, .type = type, .vdt = vdt, .n = n, .rows = w->ne[1], .x = x, .n_tokens = n_tokens,
      .offset = k->panel_offset[type], .act = (HnActBlock *) scratch,
      .panels = scratch + act_bytes(n, n_tokens),
      .panel_bytes = align64((size_t) (n / 32 + 1) * HN_PANEL_SCRATCH_PER_32),
      .w = w->data, .w_row_bytes = hn_type_row_bytes(type, n), .y = y, .y_stride = y_stride,
    };
    atomic_init(&job.next, 0);
    hn_threadpool_run(pool, prepare_worker, &job);
    hn_threadpool_run(pool, panel_worker, &job);
    return;
  }
  /* Decode: the tile or the dot product, whichever was measured faster on this
   * processor (hn-decode-choice.h). */
  if (k && decode_kernel == HN_DECODE_UNMEASURED)
    decode_kernel = hn_decode_kernel(k, type);
  if (k && k->gemm_tile[type] && decode_kernel != HN_DECODE_DOT && n % 32 == 0 && k->gemm_rows <= 16 &&
      k->gemm_cols <= 16) {
    TileJob job = {
      .k = k, .type = type, .n = n, .rows = w->ne[1], .n_chunks = (n / 32 + 1) / 2,
      .act = (const HnActChunk *) scratch, .n_tokens = n_tokens, .w = w->data,
      .w_row_bytes = hn_type_row_bytes(type, n), .y = y, .y_stride = y_stride,
      .unit = unit_rows(w->ne[1], hn_threadpool_n_threads(pool)),
    };
    atomic_init(&job.next, 0);
    for (int t = 0; t < n_tokens; t++)
      prepare_tile_act(k, type, x + (size_t) t * (size_t) n, n, (HnActChunk *) scratch + (size_t) t * (size_t) job.n_chunks);
    hn_threadpool_run(pool, tile_worker, &job);
    return;
  }
  MatmulJob job = {
    .fast = k ? k->vec_dot[type] : NULL, .fast_rows = k ? k->vec_dot_rows[type] : NULL, .type = type, .n = n, .rows = w->ne[1],
    .w = w->data, .w_row_bytes = hn_type_row_bytes(type, n), .act = scratch,
    .act_row_bytes = hn_type_row_bytes(vdt, n), .n_tokens = n_tokens, .y = y, .y_stride = y_stride,
    .unit = unit_rows(w->ne[1], hn_threadpool_n_threads(pool)),
  };
  atomic_init(&job.next, 0);
  /* Activations are converted once per product, not once per weight row.  The SIMD
   * quantizers are bit-identical to the reference (test-simd checks it byte for byte). */
  HnQuantizeFn quantize = k ? k->quantize[vdt] : NULL;
  for (int t = 0; t < n_tokens; t++) {
    void *dst = scratch + (size_t) t * job.act_row_bytes;
    if (quantize)
      quantize(x + (size_t) t * (size_t) n, dst, n);
    else
      hn_quantize_row(vdt, x + (size_t) t * (size_t) n, dst, n);
  }
  hn_threadpool_run(pool, matmul_worker, &job);
}

/* ---- several matrix-vector products at once ---- */

typedef struct {
  const HnSimdKernels *k;
  int n_items;
  const HnMatvec *items;
  const uint8_t *act[HN_MATVEC_MAX]; /* each item's converted input */
  bool tiled[HN_MATVEC_MAX];         /* tile kernel, else one dot product per row */
  /* the items' rows laid end to end, each item from a multiple of 16 on (no two threads
   * write one cache line of an output), so the threads claim rows of all of them */
  int64_t first_row[HN_MATVEC_MAX + 1];
  int64_t unit;
  atomic_llong next;
} MatvecJob;

/* Rows [r0, r1) of item `item`. */
static void
matvec_rows(const MatvecJob *job, int item, int64_t r0, int64_t r1)
{
  const HnMatvec *it = &job->items[item];
  HnType type = (HnType) it->w->type;
  int64_t n = it->w->ne[0], rows = it->w->ne[1];
  size_t row_bytes = hn_type_row_bytes(type, n);
  const uint8_t *w = it->w->data;
  if (job->tiled[item]) {
    /* as tile_worker for one token */
    HnGemmTileFn tile = job->k->gemm_tile[type];
    const int tr = job->k->gemm_rows;
    for (int64_t r = r0; r < r1; r += tr) {
      int n_rows = r1 - r < tr ? (int) (r1 - r) : tr;
      tile(n, w + (size_t) r * row_bytes, row_bytes, n_rows, (const HnActChunk *) job->act[item],
           (size_t) ((n / 32 + 1) / 2), 1, it->y + r, 1);
    }
    return;
  }
  /* as matmul_worker for one token */
  HnVecDotFn fast = job->k ? job->k->vec_dot[type] : NULL;
  HnVecDotRowsFn fast_rows = job->k ? job->k->vec_dot_rows[type] : NULL;
  for (int64_t r = r0; fast_rows && r < r1; r += HN_DOT_ROWS)
    fast_rows(n, w + (size_t) r * row_bytes, row_bytes, r1 - r < HN_DOT_ROWS ? (int) (r1 - r) : HN_DOT_ROWS,
              job->act[item], it->y + r);
  for (int64_t r = fast_rows ? r1 : r0; r < r1; r++) {
    prefetch_next_rows(w + (size_t) r * row_bytes, row_bytes, rows - r);
    it->y[r] = fast ? fast(n, w + (size_t) r * row_bytes, job->act[item])
                    : hn_vec_dot_ref(type, n, w + (size_t) r * row_bytes, job->act[item]);
  }
}

static void
matvec_worker(void *data, int ith, int nth)
{
  MatvecJob *job = data;
  (void) ith;
  int item = 0;
  for (int64_t g0, g1; claim_rows(&job->next, job->first_row[job->n_items], job->unit, nth, &g0, &g1);) {
    /* claims only move forward, so the first item to look at never goes back */
    while (g0 >= job->first_row[item + 1])
      item++;
    for (int i = item; i < job->n_items && job->first_row[i] < g1; i++) {
      int64_t from = job->first_row[i], rows = job->items[i].w->ne[1];
      int64_t r0 = g0 > from ? g0 - from : 0, r1 = g1 - from < rows ? g1 - from : rows;
      if (r0 < r1)
        matvec_rows(job, i, r0, r1);
    }
  }
}

size_t
hn_matvec_many_scratch_bytes(int64_t n, int n_inputs)
{
  return 64 + (size_t) (n_inputs > 0 ? n_inputs : 1) * act_bytes(n, 1);
}

void
hn_matvec_many(HnThreadPool *pool, const HnMatvec *items, int n_items, void *act_scratch)
{
  const HnSimdKernels *k = hn_simd_kernels();
  MatvecJob job = { .k = k, .n_items = n_items, .items = items };
  uint8_t *scratch = (uint8_t *) align64((size_t) act_scratch);
  int nth = hn_threadpool_n_threads(pool);
  size_t used = 0;
  job.first_row[0] = 0;
  for (int i = 0; i < n_items; i++) {
    const HnGgufTensor *w = items[i].w;
    HnType type = (HnType) w->type, vdt = hn_type_vec_dot_type(type);
    int64_t n = w->ne[0];
    /* the same choice as hn_matmul makes for one token, the measured decode kernel included */
    job.tiled[i] = k && k->gemm_tile[type] && hn_decode_kernel(k, type) != HN_DECODE_DOT && n % 32 == 0 &&
                   k->gemm_rows <= 16 && k->gemm_cols <= 16;
    job.first_row[i + 1] = job.first_row[i] + (w->ne[1] + 15) / 16 * 16;
    /* an input converted for an earlier item of the same format is reused */
    job.act[i] = NULL;
    for (int j = 0; j < i; j++) {
      const HnGgufTensor *wj = items[j].w;
      if (items[j].x == items[i].x && wj->ne[0] == n && job.tiled[j] == job.tiled[i] &&
          hn_type_vec_dot_type((HnType) wj->type) == vdt &&
          (!job.tiled[i] || (k->gemm_offset[wj->type] == k->gemm_offset[type] &&
                             reads_grouped_act((HnType) wj->type) == reads_grouped_act(type)))) {
        job.act[i] = job.act[j];
        break;
      }
    }
    if (job.act[i])
      continue;
    uint8_t *dst = scratch + used;
    used += act_bytes(n, 1);
    if (job.tiled[i]) {
      prepare_tile_act(k, type, items[i].x, n, (HnActChunk *) dst);
    } else {
      HnQuantizeFn quantize = k ? k->quantize[vdt] : NULL;
      if (quantize)
        quantize(items[i].x, dst, n);
      else
        hn_quantize_row(vdt, items[i].x, dst, n);
    }
    job.act[i] = dst;
  }
  job.unit = unit_rows(job.first_row[n_items], nth);
  atomic_init(&job.next, 0);
  hn_threadpool_run(pool, matvec_worker, &job);
}
