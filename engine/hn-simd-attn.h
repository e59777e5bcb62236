/* hn-simd-attn.h — attention of one query position over the F16 KV cache, written once
 * over a small vector vocabulary and included by each SIMD file, which defines:
 *   VEC, VLEN, VZERO(), VSET1(x), VLOAD(p), VSTORE(p, v), VLOAD_H(p) (VLEN halves),
 *   VROUND_H(v) (each lane to the nearest F16 value), VFMADD(a, b, c), VMUL(a, b),
 *   VADD(a, b), VHMAX(v), VEXP(v) (for v <= 0), VSUMS(a) (a vector whose
 *   lane i is the sum of the lanes of a[i], for VLEN vectors a[0..VLEN-1]) and
 *   ATTN_NAME / ATTN_BODY.
 *
 * Rounded like the reference engine (see HnAttnArgs): the query (already rounded by the
 * caller) meets the F16 keys, the softmax is taken over every visible cell, and each
 * probability is rounded to F16 before it weights its value.  So two passes: the first
 * converts the keys CHUNK cells at a time — once for all the query heads that share the
 * KV head — and keeps the scores, the second does the same with the values.
 *
 * Why the loops look as they do (decode deep into a context is bound by them):
 * - scores are made VLEN cells at a time, one accumulator per cell, and the VLEN
 *   accumulators are summed across their lanes together (VSUMS: a transposing tree of
 *   shuffles and adds), instead of one horizontal sum per score;
 * - the values are accumulated into up to four independent vectors of the output at a
 *   time, so consecutive FMAs do not wait for each other;
 * - the softmax sum runs in four independent double sums.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <math.h>

#define CHUNK HN_ATTN_CHUNK
/* How far ahead the rows are fetched: one KV head's row is a short piece of a longer
 * cell row (128 of 512 bytes for TinyLlama), a pattern the hardware prefetchers follow
 * poorly, and deep in a context these reads are what the attention waits for.  One
 * chunk ahead, into every cache level: on the AVX-512 Xeon this measured about 10%
 * faster at 4096 cells than none; two chunks ahead gained less, and a non-temporal
 * hint two chunks ahead was slower than none.  A caller that runs every KV head over
 * the same block of cells asks the first head to fetch whole cell rows
 * (prefetch_halves), so the others find their pieces in the cache. */
#define PREFETCH_CELLS CHUNK

static inline __attribute__((always_inline)) void
prefetch_row(const uint16_t *row, int halves)
{
  for (int b = 0; b < halves * 2; b += 64)
    __builtin_prefetch((const char *)row + b, 0, 3);
}

static inline __attribute__((always_inline)) void
ATTN_BODY(const HnAttnArgs *a, const int hd)
{
  const int nq = a->n_q, nv = hd / VLEN, n = a->n_cells;
  const size_t stride = hn_attn_score_stride(n);
  float *acc = a->work;                 /* nq × hd */
  float *mx = acc + nq * hd + nq * CHUNK; /* nq (the layout of hn_attn_work_floats) */
  float *kf = a->work + ((size_t)nq * (size_t)(hd + CHUNK + 2) + 15) / 16 * 16; /* CHUNK × hd */
  float *vf = kf + CHUNK * hd;          /* CHUNK × hd */
  const int pf = a->prefetch_halves == 0 ? hd : a->prefetch_halves;
  for (int h = 0; h < nq; h++) {
    for (int j = 0; j < nv; j++)
      VSTORE(acc + h * hd + j * VLEN, VZERO());
    mx[h] = -INFINITY;
  }
  for (int c0 = 0; c0 < n; c0 += CHUNK) {
    const int nc = n - c0 < CHUNK ? n - c0 : CHUNK;
    /* a chunk's last partial group of VLEN cells meets zero keys (scores ignored) */
    const int padded = (nc + VLEN - 1) / VLEN * VLEN;
    for (int i = 0; i < nc; i++) {
      const uint16_t *kr = a->k + (size_t)a->cells[c0 + i] * a->kv_stride;
      if (pf > 0 && c0 + PREFETCH_CELLS + i < n)
        prefetch_row(a->k + (size_t)a->cells[c0 + PREFETCH_CELLS + i] * a->kv_stride, pf);
      for (int j = 0; j < nv; j++)
        VSTORE(kf + i * hd + j * VLEN, VLOAD_H(kr + j * VLEN));
    }
    for (int i = nc; i < padded; i++)
      for (int j = 0; j < nv; j++)
        VSTORE(kf + i * hd + j * VLEN, VZERO());
    for (int h = 0; h < nq; h++) {
      const float *q = a->q + (size_t)h * a->q_stride;
      float *s = a->scores + (size_t)h * stride + c0;
      for (int i0 = 0; i0 < padded; i0 += VLEN) {
        VEC d[VLEN];
#pragma GCC unroll 16
        for (int c = 0; c < VLEN; c++) {
          const float *kc = kf + (i0 + c) * hd;
          VEC e = VMUL(VLOAD(q), VLOAD(kc));
          for (int j = 1; j < nv; j++)
            e = VFMADD(VLOAD(q + j * VLEN), VLOAD(kc + j * VLEN), e);
          d[c] = e;
        }
        const VEC sv = VMUL(VSUMS(d), VSET1(a->scale));
        VSTORE(s + i0, sv);
        const int valid = nc - i0 < VLEN ? nc - i0 : VLEN;
        if (a->softcap > 0.0f || valid < VLEN) {
          for (int i = i0; i < i0 + valid; i++) {
            if (a->softcap > 0.0f)
              s[i] = a->softcap * tanhf(s[i] / a->softcap);
            mx[h] = s[i] > mx[h] ? s[i] : mx[h];
          }
        } else {
          const float m = VHMAX(sv);
          mx[h] = m > mx[h] ? m : mx[h];
        }
      }
    }
  }
  /* probabilities, rounded to F16; the slots past n up to a whole vector hold the
   * maximum (a finite value) and are left out of the sum */
  for (int h = 0; h < nq; h++) {
    float *s = a->scores + (size_t)h * stride;
    for (size_t i = (size_t)n; i < stride; i++)
      s[i] = mx[h];
    const VEC vm = VSET1(mx[h]);
    for (size_t i = 0; i < stride; i += VLEN)
      VSTORE(s + i, VEXP(VSUB(VLOAD(s + i), vm)));
    double sum0 = 0.0, sum1 = 0.0, sum2 = 0.0, sum3 = 0.0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
      sum0 += s[i];
      sum1 += s[i + 1];
      sum2 += s[i + 2];
      sum3 += s[i + 3];
    }
    for (; i < n; i++)
      sum0 += s[i];
    const double sum = (sum0 + sum1) + (sum2 + sum3);
    if (a->row_max) {
      a->row_max[h] = mx[h];
      a->row_sum[h] = (float)sum;
    }
    const VEC inv = VSET1(n > 0 ? (float)(1.0 / sum) : 0.0f);
    for (size_t k = 0; k < stride; k += VLEN)
      VSTORE(s + k, VROUND_H(VMUL(VLOAD(s + k), inv)));
  }
  for (int c0 = 0; c0 < n; c0 += CHUNK) {
    const int nc = n - c0 < CHUNK ? n - c0 : CHUNK;
    for (int i = 0; i < nc; i++) {
      const uint16_t *vr = a->v + (size_t)a->cells[c0 + i] * a->kv_stride;
      if (pf > 0 && c0 + PREFETCH_CELLS + i < n)
        prefetch_row(a->v + (size_t)a->cells[c0 + PREFETCH_CELLS + i] * a->kv_stride, pf);
      for (int j = 0; j < nv; j++)
        VSTORE(vf + i * hd + j * VLEN, VLOAD_H(vr + j * VLEN));
    }
    for (int h = 0; h < nq; h++) {
      const float *p = a->scores + (size_t)h * stride + c0;
      float *ah = acc + h * hd;
      for (int j0 = 0; j0 < nv; j0 += 4) {
        const int w = nv - j0 < 4 ? nv - j0 : 4;
        VEC o[4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
          o[t] = t < w ? VLOAD(ah + (j0 + t) * VLEN) : VZERO();
        for (int i = 0; i < nc; i++) {
          const VEC pi = VSET1(p[i]);
          const float *vi = vf + i * hd + j0 * VLEN;
#pragma GCC unroll 4
          for (int t = 0; t < 4; t++)
            if (t < w)
              o[t] = VFMADD(pi, VLOAD(vi + t * VLEN), o[t]);
        }
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
          if (t < w)
            VSTORE(ah + (j0 + t) * VLEN, o[t]);
      }
    }
  }
  for (int h = 0; h < nq; h++) {
    float *out = a->out + (size_t)h * a->out_stride;
    for (int j = 0; j < nv; j++)
      VSTORE(out + j * VLEN, VLOAD(acc + h * hd + j * VLEN));
  }
}

static void
ATTN_NAME(const HnAttnArgs *a)
{
  /* constant head sizes let the compiler unroll the inner loops */
  if (a->head_dim == 64)
    ATTN_BODY(a, 64);
  else if (a->head_dim == 128)
    ATTN_BODY(a, 128);
  else
    ATTN_BODY(a, a->head_dim);
}

#undef CHUNK
#undef PREFETCH_CELLS
