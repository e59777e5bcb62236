/* hn-simd.h — the table of fast kernels for one instruction-set level.
 *
 * Every entry computes exactly what the scalar reference in hn-quants.c computes (up to
 * float summation order) and is tested against it.  A NULL entry means "use the
 * reference".  Weight rows are in their GGUF block format; activation rows are in
 * hn_type_vec_dot_type() of the weight type. */
#pragma once

#include "hn-cpu.h"
#include "hn-quants.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Dot product of one weight row with one activation row, n elements. */
typedef float (*HnVecDotFn)(int64_t n, const void *weight_row, const void *act_row);

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
} HnActChunk;

/* Packs one activation row of n floats (n a multiple of 32) into ceil(n/64) chunks, for
 * a weight type whose unsigned codes have zero point `offset`. */
typedef void (*HnPackActFn)(const float *x, int64_t n, int offset, HnActChunk *out);

/* out[r * out_stride + c] = dot(weight row r, packed activation column c) for r < n_rows,
 * c < n_cols; columns are `act_stride` chunks apart. */
typedef void (*HnGemmTileFn)(int64_t n, const void *weight, size_t weight_stride, int n_rows,
                             const HnActChunk *act, size_t act_stride, int n_cols,
                             float *out, size_t out_stride);

typedef struct {
  HnSimdLevel level;
  HnPackActFn pack_act;
  HnGemmTileFn gemm_tile[HN_TYPE_COUNT];
  int gemm_offset[HN_TYPE_COUNT]; /* zero point of the type's unsigned codes */
  int gemm_rows;                  /* tile height the kernels handle in one call (max) */
  int gemm_cols;                  /* tile width (max) */
  HnVecDotFn vec_dot[HN_TYPE_COUNT];
  HnQuantizeFn quantize[HN_TYPE_COUNT];
} HnSimdKernels;

/* The kernels for the machine's best level (capped by HANASHI_SIMD), filled once. */
const HnSimdKernels *hn_simd_kernels(void);

/* The kernels of one level (for tests that compare levels); NULL when the processor
 * cannot run it. */
const HnSimdKernels *hn_simd_kernels_for_level(HnSimdLevel level);

/* Per-level fillers, each in a file compiled for its instruction set. */
void hn_simd_fill_avx2(HnSimdKernels *kernels);
void hn_simd_fill_avx512(HnSimdKernels *kernels);

#ifdef __cplusplus
}
#endif
