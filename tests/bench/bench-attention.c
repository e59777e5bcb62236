/* bench-attention — the attention kernel alone in TinyLlama's decode shape (22 layers,
 * 4 KV heads of 64, 8 query heads sharing each), one token over 1024, 4096 and 8192
 * cells, for every SIMD level the processor has.  The cache holds all 22 layers' F16 rows
 * (88 MiB at 4096 cells), so the keys and values come from memory as in decode.  It
 * prints the thread CPU time per token (best of five; a busy neighbour inflates CPU time
 * far less than wall time) and the bytes of keys and values read per second.  A
 * benchmark, not a test: it prints numbers and only fails if something errors.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hn-cpu.h"
#include "hn-quants.h"
#include "hn-simd.h"

enum { LAYERS = 22, KV_HEADS = 4, GROUP = 8, HEAD_DIM = 64, KV_DIM = KV_HEADS * HEAD_DIM };

static double
cpu_seconds(void)
{
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

static void *
aligned_floats(size_t n)
{
  void *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

int
main(void)
{
  const int depths[] = { 1024, 4096, 8192 };
  const int max_depth = 8192;
  size_t per_layer = (size_t) max_depth * KV_DIM;
  uint16_t *k = malloc(per_layer * LAYERS * sizeof(uint16_t)), *v = malloc(per_layer * LAYERS * sizeof(uint16_t));
  int32_t *cells = malloc(max_depth * sizeof(int32_t));
  float *q = aligned_floats(KV_HEADS * GROUP * HEAD_DIM), *out = aligned_floats(KV_HEADS * GROUP * HEAD_DIM);
  float *work = aligned_floats(hn_attn_work_floats(GROUP, HEAD_DIM));
  float *scores = aligned_floats(GROUP * hn_attn_score_stride(max_depth));
  if (!k || !v || !cells)
    return 1;
  uint32_t state = 1;
  for (size_t i = 0; i < per_layer * LAYERS; i++) {
    state = state * 1664525u + 1013904223u;
    k[i] = hn_fp32_to_fp16((float) (state >> 8) / 16777216.0f - 0.5f);
    v[i] = hn_fp32_to_fp16((float) (state & 0xffff) / 65536.0f - 0.5f);
  }
  for (int i = 0; i < max_depth; i++)
    cells[i] = i;
  for (int i = 0; i < KV_HEADS * GROUP * HEAD_DIM; i++)
    q[i] = hn_fp16_to_fp32(hn_fp32_to_fp16((float) (i * 37 % 101 - 50) / 64.0f));

  printf("CPU time per token of the attention, TinyLlama decode shape, one thread:\n");
  for (HnSimdLevel level = HN_SIMD_SCALAR + 1; level < HN_SIMD_LEVEL_COUNT; level++) {
    const HnSimdKernels *kern = hn_simd_kernels_for_level(level);
    if (!kern || !kern->attn || HEAD_DIM % kern->attn_multiple != 0)
      continue;
    for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++) {
      int depth = depths[di];
      double best = 1e30;
      for (int rep = 0; rep < 6; rep++) { /* the first is a warm-up */
        double t0 = cpu_seconds();
        for (int l = 0; l < LAYERS; l++)
          for (int h = 0; h < KV_HEADS; h++) {
            /* the layer's rows are laid out for max_depth cells, as a cache is for n_ctx */
            HnAttnArgs a = {
              .head_dim = HEAD_DIM, .n_q = GROUP, .q = q + h * GROUP * HEAD_DIM, .q_stride = HEAD_DIM,
              .scale = 0.125f, .k = k + l * per_layer + h * HEAD_DIM, .v = v + l * per_layer + h * HEAD_DIM,
              .kv_stride = KV_DIM, .cells = cells, .n_cells = depth, .out = out + h * GROUP * HEAD_DIM,
              .out_stride = HEAD_DIM, .work = work, .scores = scores,
            };
            kern->attn(&a);
          }
        double t = cpu_seconds() - t0;
        if (rep > 0 && t < best)
          best = t;
      }
      double bytes = (double) depth * LAYERS * 2.0 * HEAD_DIM * KV_HEADS * sizeof(uint16_t);
      printf("  %-16s depth %5d: %7.2f ms, %5.1f GB/s of keys and values (out[0] = %.6f)\n",
             hn_simd_level_name(level), depth, best * 1e3, bytes / best * 1e-9, out[0]);
    }
  }
  free(k);
  free(v);
  free(cells);
  free(q);
  free(out);
  free(work);
  free(scores);
  return 0;
}
