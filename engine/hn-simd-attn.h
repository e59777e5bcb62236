/* hn-simd-attn.h — attention of one query position over the F16 KV cache, written once
 * over a small vector vocabulary and included by each SIMD file, which defines:
 *   VEC, VLEN, VZERO(), VSET1(x), VLOAD(p), VSTORE(p, v), VLOAD_H(p) (VLEN halves),
 *   VROUND_H(v) (each lane to the nearest F16 value), VFMADD(a, b, c), VMUL(a, b),
 *   VADD(a, b), VHSUM(v), VEXP(v) (for v <= 0) and ATTN_NAME / ATTN_BODY.
 *
 * Rounded like the reference engine (see HnAttnArgs): the query (already rounded by the
 * caller) meets the F16 keys, the softmax is taken over every visible cell, and each
 * probability is rounded to F16 before it weights its value.  So two passes: the first
 * converts the keys CHUNK cells at a time — once for all the query heads that share the
 * KV head — and keeps the scores, the second does the same with the values.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <math.h>

#define CHUNK HN_ATTN_CHUNK

static inline __attribute__((always_inline)) void
ATTN_BODY(const HnAttnArgs *a, const int hd)
{
  const int nq = a->n_q, nv = hd / VLEN, n = a->n_cells;
  const size_t stride = hn_attn_score_stride(n);
  float *acc = a->work;                 /* nq × hd */
  float *mx = acc + nq * hd + nq * CHUNK; /* nq (the layout of hn_attn_work_floats) */
  float *kf = a->work + ((size_t)nq * (size_t)(hd + CHUNK + 2) + 15) / 16 * 16; /* CHUNK × hd */
  float *vf = kf + CHUNK * hd;          /* CHUNK × hd */
  for (int h = 0; h < nq; h++) {
    for (int j = 0; j < nv; j++)
      VSTORE(acc + h * hd + j * VLEN, VZERO());
    mx[h] = -INFINITY;
  }
  for (int c0 = 0; c0 < n; c0 += CHUNK) {
    const int nc = n - c0 < CHUNK ? n - c0 : CHUNK;
    for (int i = 0; i < nc; i++) {
      const uint16_t *kr = a->k + (size_t)a->cells[c0 + i] * a->kv_stride;
      for (int j = 0; j < nv; j++)
        VSTORE(kf + i * hd + j * VLEN, VLOAD_H(kr + j * VLEN));
    }
    for (int h = 0; h < nq; h++) {
      const float *q = a->q + (size_t)h * a->q_stride;
      float *s = a->scores + (size_t)h * stride + c0;
      for (int i = 0; i < nc; i++) {
        VEC d0 = VZERO(), d1 = VZERO();
        int j = 0;
        for (; j + 1 < nv; j += 2) {
          d0 = VFMADD(VLOAD(q + j * VLEN), VLOAD(kf + i * hd + j * VLEN), d0);
          d1 = VFMADD(VLOAD(q + (j + 1) * VLEN), VLOAD(kf + i * hd + (j + 1) * VLEN), d1);
        }
        if (j < nv)
          d0 = VFMADD(VLOAD(q + j * VLEN), VLOAD(kf + i * hd + j * VLEN), d0);
        s[i] = VHSUM(VADD(d0, d1)) * a->scale;
        if (a->softcap > 0.0f)
          s[i] = a->softcap * tanhf(s[i] / a->softcap);
        mx[h] = s[i] > mx[h] ? s[i] : mx[h];
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
    double sum = 0.0;
    for (int i = 0; i < n; i++)
      sum += s[i];
    const VEC inv = VSET1(n > 0 ? (float)(1.0 / sum) : 0.0f);
    for (size_t i = 0; i < stride; i += VLEN)
      VSTORE(s + i, VROUND_H(VMUL(VLOAD(s + i), inv)));
  }
  for (int c0 = 0; c0 < n; c0 += CHUNK) {
    const int nc = n - c0 < CHUNK ? n - c0 : CHUNK;
    for (int i = 0; i < nc; i++) {
      const uint16_t *vr = a->v + (size_t)a->cells[c0 + i] * a->kv_stride;
      for (int j = 0; j < nv; j++)
        VSTORE(vf + i * hd + j * VLEN, VLOAD_H(vr + j * VLEN));
    }
    for (int h = 0; h < nq; h++) {
      const float *p = a->scores + (size_t)h * stride + c0;
      float *ah = acc + h * hd;
      for (int j = 0; j < nv; j++) {
        VEC o = VLOAD(ah + j * VLEN);
        for (int i = 0; i < nc; i++)
          o = VFMADD(VSET1(p[i]), VLOAD(vf + i * hd + j * VLEN), o);
        VSTORE(ah + j * VLEN, o);
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
