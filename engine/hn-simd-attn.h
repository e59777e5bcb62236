/* hn-simd-attn.h — attention of one query position over the F16 KV cache, written once
 * over a small vector vocabulary and included by each SIMD file, which defines:
 *   VEC, VLEN, VZERO(), VSET1(x), VLOAD(p), VSTORE(p, v), VLOAD_H(p) (VLEN halves),
 *   VFMADD(a, b, c), VMUL(a, b), VADD(a, b), VSUB(a, b), VHSUM(v), VEXP(v) (for v <= 0)
 *   and ATTN_NAME / ATTN_BODY.
 *
 * One pass with a running maximum and sum per query head: the cells are taken CHUNK at
 * a time, their keys and values converted to f32 once for all the query heads that
 * share the KV head (grouped-query attention), so nothing grows with the context
 * except the loop count. */
#include <math.h>

#define CHUNK HN_ATTN_CHUNK

static inline __attribute__((always_inline)) void
ATTN_BODY(const HnAttnArgs *a, const int hd)
{
  const int nq = a->n_q, nv = hd / VLEN;
  float *acc = a->work;                 /* nq × hd */
  float *score = acc + nq * hd;         /* nq × CHUNK */
  float *mx = score + nq * CHUNK;       /* nq */
  float *sum = mx + nq;                 /* nq */
  float *kf = a->work + ((size_t)nq * (size_t)(hd + CHUNK + 2) + 15) / 16 * 16; /* CHUNK × hd */
  float *vf = kf + CHUNK * hd;          /* CHUNK × hd */
  for (int h = 0; h < nq; h++) {
    for (int j = 0; j < nv; j++)
      VSTORE(acc + h * hd + j * VLEN, VZERO());
    mx[h] = -INFINITY;
    sum[h] = 0.0f;
  }
  for (int c0 = 0; c0 < a->n_cells; c0 += CHUNK) {
    const int nc = a->n_cells - c0 < CHUNK ? a->n_cells - c0 : CHUNK;
    for (int i = 0; i < nc; i++) {
      const uint16_t *kr = a->k + (size_t)a->cells[c0 + i] * a->kv_stride;
      const uint16_t *vr = a->v + (size_t)a->cells[c0 + i] * a->kv_stride;
      for (int j = 0; j < nv; j++) {
        VSTORE(kf + i * hd + j * VLEN, VLOAD_H(kr + j * VLEN));
        VSTORE(vf + i * hd + j * VLEN, VLOAD_H(vr + j * VLEN));
      }
    }
    for (int h = 0; h < nq; h++) {
      const float *q = a->q + (size_t)h * a->q_stride;
      float *s = score + h * CHUNK;
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
      }
      if (a->softcap > 0.0f)
        for (int i = 0; i < nc; i++)
          s[i] = a->softcap * tanhf(s[i] / a->softcap);
      float cm = s[0];
      for (int i = 1; i < nc; i++)
        cm = s[i] > cm ? s[i] : cm;
      float *ah = acc + h * hd;
      if (cm > mx[h]) {
        const float r = expf(mx[h] - cm); /* 0 on the first chunk */
        sum[h] *= r;
        const VEC vr = VSET1(r);
        for (int j = 0; j < nv; j++)
          VSTORE(ah + j * VLEN, VMUL(VLOAD(ah + j * VLEN), vr));
        mx[h] = cm;
      }
      /* exponentials a vector at a time (unused slots of the chunk hold the maximum,
       * a finite value, and are left out of the sum) */
      for (int i = nc; i < CHUNK; i++)
        s[i] = mx[h];
      const VEC vm = VSET1(mx[h]);
      for (int i = 0; i < CHUNK; i += VLEN)
        VSTORE(s + i, VEXP(VSUB(VLOAD(s + i), vm)));
      float l = 0.0f;
      for (int i = 0; i < nc; i++)
        l += s[i];
      sum[h] += l;
      for (int j = 0; j < nv; j++) {
        VEC o = VLOAD(ah + j * VLEN);
        for (int i = 0; i < nc; i++)
          o = VFMADD(VSET1(s[i]), VLOAD(vf + i * hd + j * VLEN), o);
        VSTORE(ah + j * VLEN, o);
      }
    }
  }
  for (int h = 0; h < nq; h++) {
    const VEC inv = VSET1(sum[h] > 0.0f ? 1.0f / sum[h] : 0.0f);
    float *out = a->out + (size_t)h * a->out_stride;
    for (int j = 0; j < nv; j++)
      VSTORE(out + j * VLEN, VMUL(VLOAD(acc + h * hd + j * VLEN), inv));
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
