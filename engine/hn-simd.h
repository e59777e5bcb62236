/* hn-simd.h — the table of fast kernels for one instruction-set level.
 *
 * Every entry computes exactly what the scalar reference in hn-quants.c computes (up to
 * float summation order) and is tested against it.  A NULL entry means "use the
 * reference".  Weight rows are in their GGUF block format; activation rows are in
 * hn_type_vec_dot_type() of the weight type.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-cpu.h"
#include "hn-quants.h"
#include "hn-kv-cache.h" /* HN_KV_TILE: the key tiles the attention reads */

#ifdef __cplusplus
extern "C" {
#endif

/* Dot product of one weight row with one activation row, n elements. */
typedef float (*HnVecDotFn)(int64_t n, const void *weight_row, const void *act_row);

/* The dot products of n_rows (1..HN_DOT_ROWS) consecutive weight rows, row_stride bytes
 * apart, with one activation row: out[r] for r < n_rows.  Reading several rows at once
 * keeps several memory streams in flight and shares the activation's work. */
#define HN_DOT_ROWS 4
typedef void (*HnVecDotRowsFn)(int64_t n, const void *weight, size_t row_stride, int n_rows, const void *act_row,
                               float *out);

/* Converts n floats into activation blocks (Q8_0, Q8_1, Q8_K) or halves (F16). */
typedef void (*HnQuantizeFn)(const float *src, void *dst, int64_t n);

/* Activations packed for the prompt-processing GEMM: 64 elements per chunk, signed
 * 8-bit with one scale per 32, and per 4-element lane the sum of the quants (the GEMM
 * kernels take weights as unsigned codes and correct for their zero point with it). */
typedef struct {
  int8_t q[64];
  int32_t neg_offset_sum[16]; /* -offset · Σ of the 4 quants in the lane */
  float d[16];                /* scale of the 32-block each lane belongs to */
  float lane_sum[16];         /* d · Σ of the lane's 4 quants (for weight types with mins) */
  float block_sum[2];         /* d · Σ of each 32-block's quants (Q4_K decode) */
  float pad[14];
} HnActChunk;

/* The activations of 16 blocks for regrouped weights (hn-quants.h), in the weights' order:
 * lane j (4 bytes) of q[2s] holds quants 4s..4s+3 of block j, of q[2s + 1] quants
 * 16+4s..16+4s+3 (for the 4- and 5-bit types the elements that the low and high nibbles
 * of the weights' bytes 4s..4s+3 stand for; for Q8_0 the weights' vectors 2s and
 * 2s + 1).  A column of a grouped matrix product holds its n / 512 groups from its
 * start, then the chunks (HnActChunk) of the blocks after the last full group at their
 * usual places: the groups take less room than the chunks they replace. */
typedef struct {
  int8_t q[8][64];
  float d[16];                /* scale of block j */
  int32_t neg_offset_sum[16]; /* -offset · Σ of block j's 32 quants */
  float block_sum[16];        /* d · Σ of block j's quants (for the weights' mins) */
} HnActGroup;
_Static_assert(sizeof(HnActGroup) <= 8 * sizeof(HnActChunk), "a group fits where its chunks were");

/* Packs one activation row of n floats (n a multiple of 32) into ceil(n/64) chunks, for
 * a weight type whose unsigned codes have zero point `offset`. */
typedef void (*HnPackActFn)(const float *x, int64_t n, int offset, HnActChunk *out);

/* out[r * out_stride + c] = dot(weight row r, packed activation column c) for r < n_rows,
 * c < n_cols; columns are `act_stride` chunks apart.  A column's result does not depend on
 * n_cols or on the other columns, bit for bit: sequences decoded in one step get what
 * each gets alone (/engine/simd/matmul-rows-alone). */
typedef void (*HnGemmTileFn)(int64_t n, const void *weight, size_t weight_stride, int n_rows,
                             const HnActChunk *act, size_t act_stride, int n_cols,
                             float *out, size_t out_stride);

/* Activations for the panel GEMM, one record per 32 elements (64 bytes).  Built from
 * the reference activation blocks (Q8_0, Q8_1 or Q8_K, bit-identical quantizers), so the GEMM
 * computes exactly what the reference dot products compute, up to summation order. */
typedef struct {
  union {
    int8_t q[32];
    int32_t q4[8]; /* the same bytes, four at a time (broadcast operands) */
  };
  float d;            /* scale of the 32 quants */
  int32_t off_sum[2]; /* -offset · Σ q over each half of 16 */
  int32_t off_sum32;  /* off_sum[0] + off_sum[1] */
  float dsum;         /* d · Σ q, for weight types with mins (Q8_1: its rounded s) */
  float dsum_half[2]; /* d · Σ q over each half of 16 (Q2_K's mins per 16 elements) */
  uint8_t pad[4];
} HnActBlock;

_Static_assert(sizeof(HnActBlock) == 64, "one activation block per cache line");

/* Weight rows per panel: the panel GEMM transposes 16 rows into "row = 32-bit lane"
 * order once per matrix product and then streams every token through them. */
#define HN_PANEL_ROWS 16
#define HN_PANEL_COLS 8

/* Calls COLS_FN(panel, n, n_rows, act, act_stride, C, out, out_stride) with C the
 * constant n_cols (1..HN_PANEL_COLS): each panel kernel is compiled once per column
 * count, so that its accumulators stay in registers. */
#define HN_PANEL_DISPATCH_COLS(COLS_FN, PANEL, N, N_ROWS, ACT, ACT_STRIDE, N_COLS, OUT, OUT_STRIDE) \
  do {                                                                                              \
    switch (N_COLS) {                                                                               \
    case 8: COLS_FN(PANEL, N, N_ROWS, ACT, ACT_STRIDE, 8, OUT, OUT_STRIDE); break;                  \
    case 7: COLS_FN(PANEL, N, N_ROWS, ACT, ACT_STRIDE, 7, OUT, OUT_STRIDE); break;                  \
    case 6: COLS_FN(PANEL, N, N_ROWS, ACT, ACT_STRIDE, 6, OUT, OUT_STRIDE); break;                  \
    case 5: COLS_FN(PANEL, N, N_ROWS, ACT, ACT_STRIDE, 5, OUT, OUT_STRIDE); break;                  \
    case 4: COLS_FN(PANEL, N, N_ROWS, ACT, ACT_STRIDE, 4, OUT, OUT_STRIDE); break;                  \
    case 3: COLS_FN(PANEL, N, N_ROWS, ACT, ACT_STRIDE, 3, OUT, OUT_STRIDE); break;                  \
    case 2: COLS_FN(PANEL, N, N_ROWS, ACT, ACT_STRIDE, 2, OUT, OUT_STRIDE); break;                  \
    default: COLS_FN(PANEL, N, N_ROWS, ACT, ACT_STRIDE, 1, OUT, OUT_STRIDE); break;                 \
    }                                                                                               \
  } while (0)
/* Bytes of one packed panel per 32 elements of a row (the largest layout: Q2_K, with
 * scales and mins per 16 elements). */
#define HN_PANEL_BLOCK_BYTES 768

/* Packs n_rows (<= HN_PANEL_ROWS) weight rows of n elements (n a multiple of the type's
 * block) into `panel` (n / 32 · HN_PANEL_BLOCK_BYTES bytes, 64-byte aligned). */
typedef void (*HnPackPanelFn)(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel);

/* out[c * out_stride + r] = dot(panel row r, activation column c) for r < n_rows,
 * c < n_cols (<= HN_PANEL_COLS); column c starts at act + c * act_stride. */
typedef void (*HnPanelGemmFn)(const void *panel, int64_t n, int n_rows, const HnActBlock *act,
                              size_t act_stride, int n_cols, float *out, size_t out_stride);

/* Attention of one query position for the n_q query heads that share one KV head, over
 * the listed cache cells (F16 rows of the KV head, kv_stride elements from one cell to
 * the next): out_h = Σ_c f16(softmax_c(cap(scale · q_h · k_c))) · v_c.
 * Rounded like the reference engine, whose attention multiplies the F16 cache with F16
 * copies of its operands: q_h holds F16 values (the caller rounds it) and every
 * probability is rounded to F16 before it weights its value.  A single near-tie (an
 * expert choice, a greedy token) can hinge on this last bit. */
#define HN_ATTN_CHUNK 32
typedef struct {
  int head_dim, n_q;
  const float *q;
  size_t q_stride;
  float scale;
  float softcap; /* > 0: scores become softcap · tanh(score / softcap) (gemma2) */
  const uint16_t *k, *v;
  size_t kv_stride;
  const int32_t *cells;
  int n_cells;
  float *out;
  size_t out_stride;
  /* (with several KV heads, n_q below stands for all the query heads: n_q · kv_heads) */
  float *work;   /* hn_attn_work_floats(n_q, head_dim) floats, 64-byte aligned */
  float *scores; /* n_q × hn_attn_score_stride(n_cells) floats, 64-byte aligned */
  /* Not NULL: row_max[h] gets query head h's highest score and row_sum[h] the softmax
   * denominator Σ_c exp(score_c − row_max[h]), so that a caller that split the cells
   * into blocks can weight each block's output by its share of the whole softmax. */
  float *row_max, *row_sum;
  /* Halves of each listed row to fetch ahead from k / v: 0 means head_dim (this head's
   * piece), more covers the heads after it in the same cell row, < 0 none.  (The decode
   * split names next_cells instead, which overrides this.) */
  int prefetch_halves;
  /* KV heads in this call (0 counts as 1): KV head g's piece of a row starts g · head_dim
   * halves into it, and its n_q query heads are q heads g · n_q .. g · n_q + n_q − 1 (out,
   * row_max and row_sum alike).  Running the heads of a block of cells in one call reads
   * the cell rows front to back, where one call per KV head reads a short piece of every
   * row, and lets next_cells fetch whole rows. */
  int kv_heads;
  /* Not NULL: the cells of the next call (same k, v and heads), whose rows this call
   * fetches into the cache, spread over its own work, so that they are there when the
   * next call starts; this call's own rows are then not fetched ahead (prefetch_halves
   * is ignored). */
  const int32_t *next_cells;
  int next_n_cells;
  /* The keys are in tiles of HN_KV_TILE cells (hn-kv-cache.h): k points at this call's
   * first KV head's piece of tile 0, value d of cell c at
   * k + (c / HN_KV_TILE) · kv_stride · HN_KV_TILE + d · HN_KV_TILE + c % HN_KV_TILE, and KV
   * head g's piece head_dim · HN_KV_TILE halves after head 0's.  The values stay rows. */
  bool k_tiled;
  /* x86: next_cells' rows go into the second-level cache only, not every level; each
   * measured faster on one vendor (Intel and AMD; hn-simd-attn.h), so the caller sets it
   * from hn_cpu_features()->intel.  ARM64 always fetches into the second level. */
  bool next_to_l2;
} HnAttnArgs;
typedef void (*HnAttnFn)(const HnAttnArgs *args);

static inline size_t
hn_attn_work_floats(int n_q, int head_dim)
{
  size_t head = (size_t)n_q * (size_t)(head_dim + HN_ATTN_CHUNK + 2);
  return ((head + 15) & ~(size_t)15) + 2 * HN_ATTN_CHUNK * (size_t)head_dim;
}

/* Floats from one query head's scores to the next: n_cells rounded up to whole
 * 16-float vectors. */
static inline size_t
hn_attn_score_stride(int n_cells)
{
  return ((size_t)(n_cells > 0 ? n_cells : 0) + 15) & ~(size_t)15;
}

/* Attention over a long list of cells can run as consecutive blocks of it, each a call
 * of the kernel with row_max and row_sum set, and be joined afterwards.  One block's
 * result for n_q query heads: the outputs (n_q × head_dim, out_stride head_dim), then
 * the n_q maxima, then the n_q sums. */
static inline size_t
hn_attn_part_floats(int n_q, int head_dim)
{
  return (size_t)n_q * (size_t)(head_dim + 2);
}

/* Joins the blocks' softmaxes of query heads h0 .. h1 − 1 (of n_q) into out, head h at
 * out[(h − h0) · head_dim]: each block's output, normalised over its own cells, weighs
 * exp(max_b − max) · sum_b / Σ, summed in block order.  One block is copied as it is (a
 * single softmax rounded like the reference's); none gives zeros. */
void hn_attn_merge_blocks(const float *parts, int n_blocks, int n_q, int head_dim, int h0, int h1, float *out);

/* F16 and BF16 weights: a panel holds 16 rows as 16-bit values, element-major (the 16
 * rows' values of element i together), n · 32 bytes; activations are f32 rows (already
 * rounded to F16 or BF16, as the reference rounds its activations for these types). */
typedef void (*HnPanelGemmF32Fn)(const void *panel, int64_t n, int n_rows, const float *act,
                                 size_t act_stride, int n_cols, float *out, size_t out_stride);
/* y[i] = the F16 (or BF16) value nearest x[i], as a float (round to nearest even;
 * BF16 exactly as hn_fp32_to_bf16, NaNs made quiet). */
typedef void (*HnRoundF16Fn)(const float *x, float *y, int64_t n);

/* Scratch one packed panel of any type needs, per 32 elements of a row. */
#define HN_PANEL_SCRATCH_PER_32 1024

typedef struct {
  HnSimdLevel level;
  /* The kernel set, which one level can have in two variants (AVX2 with or without
   * AVX-VNNI): the key of the measured decode choices (hn-decode-choice.c). */
  const char *name;
  HnPanelGemmF32Fn panel_gemm_f16;
  HnRoundF16Fn round_f16;
  HnPanelGemmF32Fn panel_gemm_bf16;
  HnRoundF16Fn round_bf16;
  HnAttnFn attn;       /* NULL: scalar attention */
  int attn_multiple;   /* head_dim must be a multiple of this for attn */
  HnPackPanelFn pack_panel[HN_TYPE_COUNT];
  HnPanelGemmFn panel_gemm[HN_TYPE_COUNT];
  int panel_offset[HN_TYPE_COUNT]; /* zero point of the packed unsigned codes */
  HnPackActFn pack_act;
  HnGemmTileFn gemm_tile[HN_TYPE_COUNT];
  int gemm_offset[HN_TYPE_COUNT]; /* zero point of the type's unsigned codes */
  int gemm_rows;                  /* tile height the kernels handle in one call (max) */
  int gemm_cols;                  /* tile width (max) */
  HnVecDotFn vec_dot[HN_TYPE_COUNT];
  HnVecDotRowsFn vec_dot_rows[HN_TYPE_COUNT]; /* NULL: one vec_dot per row */
  HnQuantizeFn quantize[HN_TYPE_COUNT];
} HnSimdKernels;

/* The kernels for the machine's best level (capped by HANASHI_SIMD, where
 * "avx2-novnni" also leaves out AVX-VNNI and "neon-noi8mm" I8MM), filled once. */
const HnSimdKernels *hn_simd_kernels(void);

/* The kernels of one level (for tests that compare levels); NULL when the processor
 * cannot run it. */
const HnSimdKernels *hn_simd_kernels_for_level(HnSimdLevel level);

/* Per-level fillers, each in a file compiled for its instruction set. */
/* avx_vnni: use the 256-bit VPDPBUSD (AVX-VNNI) where the processor has it. */
void hn_simd_fill_avx2(HnSimdKernels *kernels, bool avx_vnni);
void hn_simd_fill_avx512(HnSimdKernels *kernels);
void hn_simd_fill_neon(HnSimdKernels *kernels);         /* hn-simd-neon.c, baseline */
/* the same file with +dotprod; i8mm: the single-scale panels use SMMLA (HWCAP2_I8MM) */
void hn_simd_fill_neon_dotprod(HnSimdKernels *kernels, bool i8mm);

#ifdef __cplusplus
}
#endif
