/* hn-kernels.h — matrix products of memory-mapped weights with f32 activations.
 *
 * The one place that picks the dot-product kernel per weight type (SIMD table from
 * hn-simd.h, scalar reference otherwise). */
#pragma once

#include "hn-gguf.h"
#include "hn-quants.h"
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

/* hn_matmul with the decode kernel for batches below the panel threshold given
 * (an HnDecodeKernel: 1 tile, 2 dot product, 0 the measured choice); for measuring. */
void hn_matmul_with(HnThreadPool *pool, const HnGgufTensor *w, const float *x, int n_tokens,
                    void *act_scratch, float *y, int64_t y_stride, int decode_kernel);
