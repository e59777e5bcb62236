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
hn_attn_merge_blocks(const float *parts, int n_blocks, int n_q, int head_dim, int h, float *out)
{
  const size_t stride = hn_attn_part_floats(n_q, head_dim);
  const float *mx = parts + (size_t)n_q * (size_t)head_dim + h, *sum = mx + n_q;
  const float *o = parts + (size_t)h * (size_t)head_dim;
  if (n_blocks <= 1) {
    if (n_blocks == 1)
      memcpy(out, o, (size_t)head_dim * sizeof(float));
    else
      memset(out, 0, (size_t)head_dim * sizeof(float));
    return;
  }
  float top = -INFINITY;
  for (int b = 0; b < n_blocks; b++)
    top = mx[b * stride] > top ? mx[b * stride] : top;
  /* Σ_b w_b · o_b, then divided by Σ_b w_b: one exp per block (the join runs on one
   * thread between the blocks and the next matrix, 16 blocks per head at 4096 cells) */
  double total = 0.0;
  memset(out, 0, (size_t)head_dim * sizeof(float));
  for (int b = 0; b < n_blocks; b++) {
    const double w = (double)expf(mx[b * stride] - top) * sum[b * stride];
    total += w;
    const float wf = (float)w;
    for (int d = 0; d < head_dim; d++)
      out[d] += wf * o[b * stride + d];
  }
  const float inv = (float)(1.0 / total);
  for (int d = 0; d < head_dim; d++)
    out[d] *= inv;
}
