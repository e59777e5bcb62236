/* bench-attention — the attention kernel alone in TinyLlama's decode shape (22 layers,
 * 4 KV heads of 64, 8 query heads sharing each), one token over 1024, 4096 and 8192
 * cells, for every SIMD level the processor has, in two orders: each KV head over all
 * the cells, and blocks of cells with every KV head over each (a decode step's order).
 * The cache holds all 22 layers' F16 rows (88 MiB at 4096 cells), so the keys and
 * values come from memory as in decode.  It prints the thread CPU time per token (best of five; a busy neighbour inflates CPU time
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
/* cells per block, as the context's ATTN_BLOCK_CELLS */
enum { BLOCK = 256 };

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
  float *parts = aligned_floats((max_depth + BLOCK - 1) / BLOCK * hn_attn_part_floats(KV_HEADS * GROUP, HEAD_DIM));
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

  printf("CPU time per token of the attention, TinyLlama decode shape, one thread;\n"
         "\"by head\": each KV head over all the cells, \"by block\": blocks of %d cells, every KV\n"
         "head over each block, then joined (what a decode step does deep in a context):\n", BLOCK);
  for (HnSimdLevel level = HN_SIMD_SCALAR + 1; level < HN_SIMD_LEVEL_COUNT; level++) {
    const HnSimdKernels *kern = hn_simd_kernels_for_level(level);
    if (!kern || !kern->attn || HEAD_DIM % kern->attn_multiple != 0)
      continue;
    for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++)
      for (int blocked = 0; blocked < 2; blocked++) {
        int depth = depths[di];
        double best = 1e30;
        for (int rep = 0; rep < 6; rep++) { /* the first is a warm-up */
          double t0 = cpu_seconds();
          for (int l = 0; l < LAYERS; l++) {
            /* the layer's rows are laid out for max_depth cells, as a cache is for n_ctx */
            HnAttnArgs a = {
              .head_dim = HEAD_DIM, .n_q = GROUP, .q_stride = HEAD_DIM, .scale = 0.125f,
              .kv_stride = KV_DIM, .out_stride = HEAD_DIM, .work = work, .scores = scores,
            };
            if (!blocked) {
              a.cells = cells;
              a.n_cells = depth;
              for (int h = 0; h < KV_HEADS; h++) {
                a.q = q + h * GROUP * HEAD_DIM;
                a.k = k + l * per_layer + h * HEAD_DIM;
                a.v = v + l * per_layer + h * HEAD_DIM;
                a.out = out + h * GROUP * HEAD_DIM;
                kern->attn(&a);
              }
              continue;
            }
            int n_blocks = (depth + BLOCK - 1) / BLOCK;
            for (int b = 0; b < n_blocks; b++) {
              float *pb = parts + b * hn_attn_part_floats(KV_HEADS * GROUP, HEAD_DIM);
              a.cells = cells + b * BLOCK;
              a.n_cells = depth - b * BLOCK < BLOCK ? depth - b * BLOCK : BLOCK;
              for (int h = 0; h < KV_HEADS; h++) {
                a.q = q + h * GROUP * HEAD_DIM;
                a.k = k + l * per_layer + h * HEAD_DIM;
                a.v = v + l * per_layer + h * HEAD_DIM;
                a.out = pb + h * GROUP * HEAD_DIM;
                a.row_max = pb + KV_HEADS * GROUP * HEAD_DIM + h * GROUP;
                a.row_sum = a.row_max + KV_HEADS * GROUP;
                a.prefetch_halves = h == 0 ? KV_DIM : 0;
                kern->attn(&a);
              }
            }
            for (int h = 0; h < KV_HEADS * GROUP; h++)
              hn_attn_merge_blocks(parts, n_blocks, KV_HEADS * GROUP, HEAD_DIM, h, out + h * HEAD_DIM);
          }
          double t = cpu_seconds() - t0;
          if (rep > 0 && t < best)
            best = t;
        }
        double bytes = (double) depth * LAYERS * 2.0 * HEAD_DIM * KV_HEADS * sizeof(uint16_t);
        printf("  %-16s %-8s depth %5d: %7.2f ms, %5.1f GB/s of keys and values (out[0] = %.6f)\n",
               hn_simd_level_name(level), blocked ? "by block" : "by head", depth, best * 1e3,
               bytes / best * 1e-9, out[0]);
      }
  }
  free(k);
  free(v);
  free(cells);
  free(q);
  free(out);
  free(work);
  free(scores);
  free(parts);
  return 0;
}
