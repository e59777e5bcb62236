/* hn-simd.c — picks the kernel table for the machine once.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-simd.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static HnSimdKernels tables[HN_SIMD_LEVEL_COUNT];
/* The AVX2 level as a processor without AVX-VNNI runs it (HANASHI_SIMD=avx2-novnni), so
 * that both variants can be tested and measured on one machine. */
static HnSimdKernels avx2_without_vnni;
/* The same for ARM64 DotProd without I8MM (HANASHI_SIMD=neon-noi8mm). */
static HnSimdKernels neon_without_i8mm;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void
fill_tables(void)
{
  tables[HN_SIMD_SCALAR].level = HN_SIMD_SCALAR;
  tables[HN_SIMD_SCALAR].name = "scalar";
#if defined(__x86_64__)
  const HnCpuFeatures *f = hn_cpu_features();
  if (f->avx2 && f->fma && f->f16c) {
    hn_simd_fill_avx2(&tables[HN_SIMD_AVX2], f->avx_vnni);
    hn_simd_fill_avx2(&avx2_without_vnni, false);
    if (f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni) {
      hn_simd_fill_avx2(&tables[HN_SIMD_AVX512], f->avx_vnni);
      hn_simd_fill_avx512(&tables[HN_SIMD_AVX512]);
    }
  }
#elif defined(__aarch64__)
  const HnCpuFeatures *f = hn_cpu_features();
  if (f->neon) {
    hn_simd_fill_neon(&tables[HN_SIMD_NEON]);
    if (f->neon_dotprod) {
      hn_simd_fill_neon_dotprod(&tables[HN_SIMD_NEON_DOTPROD], f->neon_i8mm);
      hn_simd_fill_neon_dotprod(&neon_without_i8mm, false);
    }
  }
#endif
}

const HnSimdKernels *
hn_simd_kernels_for_level(HnSimdLevel level)
{
  pthread_once(&tables_once, fill_tables);
  if (level < HN_SIMD_SCALAR || level >= HN_SIMD_LEVEL_COUNT || tables[level].level != level)
    return NULL;
  return &tables[level];
}

const HnSimdKernels *
hn_simd_kernels(void)
{
  HnSimdLevel level = hn_cpu_simd_level();
  const char *cap = getenv("HANASHI_SIMD");
  if (level == HN_SIMD_AVX2 && cap != NULL && strcmp(cap, "avx2-novnni") == 0 &&
      hn_simd_kernels_for_level(HN_SIMD_AVX2) != NULL)
    return &avx2_without_vnni;
  if (level == HN_SIMD_NEON_DOTPROD && cap != NULL && strcmp(cap, "neon-noi8mm") == 0 &&
      hn_simd_kernels_for_level(HN_SIMD_NEON_DOTPROD) != NULL)
    return &neon_without_i8mm;
  const HnSimdKernels *k = hn_simd_kernels_for_level(level);
  return k ? k : hn_simd_kernels_for_level(HN_SIMD_SCALAR);
}

void
hn_attn_merge_blocks(const float *parts, int n_blocks, int n_q, int head_dim, int h0, int h1, float *out)
{
  /* Heads a pass takes together and blocks whose weights it keeps at once: the blocks'
   * maxima and sums are read as their rows of heads, not one head at a time down the
   * blocks (a load 8 KiB from the last for each block of each head, the maximum kept
   * through memory: a fifth of the samples of a join that took 15 µs per layer for 33
   * blocks of 32 heads), and each group of MERGE_LANES outputs is summed over the blocks
   * in registers, not stored and reloaded once per block: 12.9 µs.  The sums run in
   * block order, as before. */
  enum { MERGE_HEADS = 32, MERGE_SPAN = 32, MERGE_LANES = 16 };
  const size_t stride = hn_attn_part_floats(n_q, head_dim);
  for (int g0 = h0; g0 < h1; g0 += MERGE_HEADS) {
    const int ng = h1 - g0 < MERGE_HEADS ? h1 - g0 : MERGE_HEADS;
    float *gout = out + (size_t)(g0 - h0) * (size_t)head_dim;
    if (n_blocks <= 1) {
      for (int x = 0; x < ng; x++) {
        float *o = gout + (size_t)x * (size_t)head_dim;
        if (n_blocks == 1)
          memcpy(o, parts + (size_t)(g0 + x) * (size_t)head_dim, (size_t)head_dim * sizeof(float));
        else
          memset(o, 0, (size_t)head_dim * sizeof(float));
      }
      continue;
    }
    float top[MERGE_HEADS], wf[MERGE_SPAN][MERGE_HEADS];
    double total[MERGE_HEADS];
    for (int x = 0; x < ng; x++) {
      top[x] = -INFINITY;
      total[x] = 0.0;
    }
    for (int b = 0; b < n_blocks; b++) {
      const float *mx = parts + (size_t)b * stride + (size_t)n_q * (size_t)head_dim + g0;
      for (int x = 0; x < ng; x++)
        top[x] = mx[x] > top[x] ? mx[x] : top[x];
    }
    memset(gout, 0, (size_t)ng * (size_t)head_dim * sizeof(float));
    /* Σ_b w_b · o_b, then divided by Σ_b w_b: one exp per block */
    for (int b0 = 0; b0 < n_blocks; b0 += MERGE_SPAN) {
      const int nb = n_blocks - b0 < MERGE_SPAN ? n_blocks - b0 : MERGE_SPAN;
      for (int i = 0; i < nb; i++) {
        const float *mx = parts + (size_t)(b0 + i) * stride + (size_t)n_q * (size_t)head_dim + g0, *sum = mx + n_q;
        for (int x = 0; x < ng; x++) {
          const double w = (double)expf(mx[x] - top[x]) * sum[x];
          total[x] += w;
          wf[i][x] = (float)w;
        }
      }
      for (int x = 0; x < ng; x++) {
        const float *ob = parts + (size_t)b0 * stride + (size_t)(g0 + x) * (size_t)head_dim;
        float *o = gout + (size_t)x * (size_t)head_dim;
        /* the next head's outputs, one block apart each: too far apart for the hardware
         * to fetch ahead, and on another core's cache for the blocks it ran */
        if (x + 1 < ng)
          for (int i = 0; i < nb; i++)
            for (int d = 0; d < head_dim; d += 16)
              __builtin_prefetch(ob + head_dim + (size_t)i * stride + (size_t)d);
        int d = 0;
        for (; d + MERGE_LANES <= head_dim; d += MERGE_LANES) {
          float acc[MERGE_LANES];
          memcpy(acc, o + d, sizeof acc);
          for (int i = 0; i < nb; i++)
            for (int j = 0; j < MERGE_LANES; j++)
              acc[j] += wf[i][x] * ob[(size_t)i * stride + (size_t)(d + j)];
          memcpy(o + d, acc, sizeof acc);
        }
        for (; d < head_dim; d++)
          for (int i = 0; i < nb; i++)
            o[d] += wf[i][x] * ob[(size_t)i * stride + (size_t)d];
      }
    }
    for (int x = 0; x < ng; x++) {
      const float inv = (float)(1.0 / total[x]);
      float *o = gout + (size_t)x * (size_t)head_dim;
      for (int d = 0; d < head_dim; d++)
        o[d] *= inv;
    }
  }
}
