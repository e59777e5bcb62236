/* hn-kernels.h — matrix products of memory-mapped weights with f32 activations.
 *
 * The one place that picks the dot-product kernel per weight type (SIMD table from
 * hn-simd.h, scalar reference otherwise).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-gguf.h"
#include "hn-quants.h"
#include "hn-simd.h"
#include "hn-threadpool.h"

/* Bytes of scratch hn_matmul needs for n_tokens rows of n elements on a pool of
 * n_threads threads (converted activations plus one weight panel per thread). */
size_t hn_matmul_scratch_bytes(int64_t n, int n_tokens, int n_threads);

/* y[t * rows + r] = W[r] · x[t] for t < n_tokens, r < rows (= W->ne[1]); n = W->ne[0].
 * x holds n_tokens rows of n floats; act_scratch has hn_matmul_scratch_bytes bytes
 * (for at least this n, n_tokens and the pool's thread count).
 * y_stride is the distance between output rows (>= rows). */
void hn_matmul(HnThreadPool *pool, const HnGgufTensor *w, const float *x, int n_tokens,
               void *act_scratch, float *y, int64_t y_stride);

/* Several matrix-vector products in one parallel section: y_i = W_i · x_i (one token
 * each), with the same kernels as hn_matmul for one token, so each y_i is bit for bit
 * what hn_matmul gives.  Items that share an x pointer share its conversion.  For the
 * chosen experts of a decode step, whose matrices are small, and a one-token step's
 * products of one input (query, key and value; gate and up): one dispatch instead of one
 * per matrix, and the threads balance over all of them at once. */
typedef struct {
  const HnGgufTensor *w;
  const float *x; /* w->ne[0] floats */
  float *y;       /* w->ne[1] floats */
} HnMatvec;

/* Scratch hn_matvec_many needs for items with at most n_inputs distinct x of at most n
 * elements. */
size_t hn_matvec_many_scratch_bytes(int64_t n, int n_inputs);

/* Quantizes one token of n elements (reference format, bit-identical quantizer) and lays
 * it out as the tile kernels' chunks, for codes with zero point `offset`. */
void hn_act_chunks_prepare(const HnSimdKernels *k, HnType vdt, int offset, const float *x, int64_t n,
                           HnActChunk *out);

/* Rearranges one token's n / 64 packed chunks, in place, into the groups of 16 blocks
 * (HnActGroup) that the tile kernels of regrouped layouts read; the chunks after the
 * last full group stay where they are. */
void hn_act_chunks_group(HnActChunk *chunks, int64_t n);
/* At most HN_MATVEC_MAX items. */
#define HN_MATVEC_MAX 64
void hn_matvec_many(HnThreadPool *pool, const HnMatvec *items, int n_items, void *act_scratch);

/* Which kernels a product uses for its rows.  The panel GEMM and the decode kernels sum
 * in different orders, so a token's result depends on the path; a caller that needs a
 * row's result independent of what else the batch holds (several sequences decoded
 * together) names the path instead of letting the batch size choose it. */
typedef enum {
  HN_MATMUL_AUTO = 0, /* the panel GEMM from HN_PANEL_MIN_TOKENS tokens on, else decode */
  HN_MATMUL_BATCH,    /* the panel GEMM for any number of tokens, where the type has one */
  HN_MATMUL_ROW,      /* the decode kernels (tile or dot product), each token on its own */
} HnMatmulPath;

void hn_matmul_path(HnThreadPool *pool, const HnGgufTensor *w, const float *x, int n_tokens,
                    void *act_scratch, float *y, int64_t y_stride, HnMatmulPath path);

/* hn_matmul with the decode kernel for batches below the panel threshold given
 * (an HnDecodeKernel: 1 tile, 2 dot product, 0 the measured choice); for measuring. */
void hn_matmul_with(HnThreadPool *pool, const HnGgufTensor *w, const float *x, int n_tokens,
                    void *act_scratch, float *y, int64_t y_stride, int decode_kernel);
