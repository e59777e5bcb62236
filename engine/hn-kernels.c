/* hn-kernels.c — W × X split by weight rows over the thread pool: every weight row is
 * read once per call and dotted with all the batch's tokens while it is in cache. */
#include "hn-kernels.h"

#include "hn-simd.h"
#include <stdlib.h>

size_t
hn_matmul_scratch_bytes(int64_t n, int n_tokens)
{
  /* F32 activations are the widest format any weight type asks for */
  return (size_t) n * sizeof(float) * (size_t) n_tokens;
}

typedef struct {
  HnVecDotFn fast;
  HnType type;
  int64_t n, rows;
  const uint8_t *w;
  size_t w_row_bytes;
  const uint8_t *act;
  size_t act_row_bytes;
  int n_tokens;
  float *y;
  int64_t y_stride;
} MatmulJob;

static void
matmul_worker(void *data, int ith, int nth)
{
  const MatmulJob *job = data;
  int64_t per = (job->rows + nth - 1) / nth;
  int64_t r0 = per * ith, r1 = r0 + per < job->rows ? r0 + per : job->rows;
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t *wr = job->w + (size_t) r * job->w_row_bytes;
    for (int t = 0; t < job->n_tokens; t++) {
      const uint8_t *a = job->act + (size_t) t * job->act_row_bytes;
      float v = job->fast ? job->fast(job->n, wr, a) : hn_vec_dot_ref(job->type, job->n, wr, a);
      job->y[(size_t) t * (size_t) job->y_stride + (size_t) r] = v;
    }
  }
}

void
hn_matmul(HnThreadPool *pool, const HnGgufTensor *w, const float *x, int n_tokens,
          void *act_scratch, float *y, int64_t y_stride)
{
  const HnSimdKernels *k = hn_simd_kernels();
  HnType type = (HnType) w->type;
  HnType vdt = hn_type_vec_dot_type(type);
  int64_t n = w->ne[0];
  MatmulJob job = {
    .fast = k ? k->vec_dot[type] : NULL, .type = type, .n = n, .rows = w->ne[1],
    .w = w->data, .w_row_bytes = hn_type_row_bytes(type, n), .act = act_scratch,
    .act_row_bytes = hn_type_row_bytes(vdt, n), .n_tokens = n_tokens, .y = y, .y_stride = y_stride,
  };
  /* Activations are converted once per product, not once per weight row.  The SIMD
   * quantizers are bit-identical to the reference (test-simd checks it byte for byte). */
  HnQuantizeFn quantize = k ? k->quantize[vdt] : NULL;
  for (int t = 0; t < n_tokens; t++) {
    void *dst = (uint8_t *) act_scratch + (size_t) t * job.act_row_bytes;
    if (quantize)
      quantize(x + (size_t) t * (size_t) n, dst, n);
    else
      hn_quantize_row(vdt, x + (size_t) t * (size_t) n, dst, n);
  }
  hn_threadpool_run(pool, matmul_worker, &job);
}
