/* hn-quants.c — reference (scalar, portable) decoders, encoders and dot products for
 * every block type.
 *
 * Decoders evaluate each value with the same float operations, in the same order, as the
 * ggml reference decoders, so that they agree bit for bit.  The dot products multiply a
 * weight row with an activation row that was quantized to the matching 8-bit format and
 * accumulate in integers within a block, as the reference engine does; this is what
 * makes our logits follow the reference's rounding rather than an exact product.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-quants-blocks.h"

#include <math.h>
#include <string.h>

/* Tiny values whose scale would overflow 1/x are treated as an all-zero group. */
#define GROUP_MAX_EPS 1e-15f

static inline float
h2f(uint16_t h)
{
  return hn_half_to_float(h);
}

static inline uint16_t
f2h(float f)
{
  return hn_fp32_to_fp16(f);
}

/* The readers of regrouped layouts (at the end of this file, with the layouts' table). */
static void dequant_grouped(HnType layout, const void *src, float *dst, int64_t n);
static float dot_grouped(HnType layout, const void *row, const void *act, int64_t n);

/* Round to nearest, ties to even, for |x| < 2^22 (the k-quant encoders' rounding). */
static inline int
nearest_int(float x)
{
  float shifted = x + 12582912.f; /* 1.5 * 2^23: the sum's low mantissa bits hold round(x) */
  uint32_t bits;
  memcpy(&bits, &shifted, sizeof bits);
  return (int)(bits & 0x007fffff) - 0x00400000;
}

static inline uint32_t
load_u32_le(const uint8_t *p)
{
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline void
store_u32_le(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static inline int
clamp_int(int v, int lo, int hi)
{
  return v < lo ? lo : v > hi ? hi : v;
}

/* ------------------------------------------------------------------------------------ */
/* Decoders                                                                              */
/* ------------------------------------------------------------------------------------ */

static void
dequant_q4_0(const HnBlockQ4_0 *b, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, y += HN_QK4_0) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < HN_QK4_0 / 2; j++) {
      const int x0 = (b[i].qs[j] & 0x0F) - 8;
      const int x1 = (b[i].qs[j] >> 4) - 8;
      y[j] = x0 * d;
      y[j + HN_QK4_0 / 2] = x1 * d;
    }
  }
}

static void
dequant_q4_1(const HnBlockQ4_1 *b, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, y += HN_QK4_1) {
    const float d = h2f(b[i].d);
    const float m = h2f(b[i].m);
    for (int j = 0; j < HN_QK4_1 / 2; j++) {
      const int x0 = b[i].qs[j] & 0x0F;
      const int x1 = b[i].qs[j] >> 4;
      y[j] = x0 * d + m;
      y[j + HN_QK4_1 / 2] = x1 * d + m;
    }
  }
}

static void
dequant_q5_0(const HnBlockQ5_0 *b, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, y += HN_QK5_0) {
    const float d = h2f(b[i].d);
    const uint32_t qh = load_u32_le(b[i].qh);
    for (int j = 0; j < HN_QK5_0 / 2; j++) {
      const int h0 = (int)((qh >> j) & 1u) << 4;
      const int h1 = (int)((qh >> (j + 16)) & 1u) << 4;
      const int x0 = ((b[i].qs[j] & 0x0F) | h0) - 16;
      const int x1 = ((b[i].qs[j] >> 4) | h1) - 16;
      y[j] = x0 * d;
      y[j + HN_QK5_0 / 2] = x1 * d;
    }
  }
}

static void
dequant_q5_1(const HnBlockQ5_1 *b, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, y += HN_QK5_1) {
    const float d = h2f(b[i].d);
    const float m = h2f(b[i].m);
    const uint32_t qh = load_u32_le(b[i].qh);
    for (int j = 0; j < HN_QK5_1 / 2; j++) {
      const int h0 = (int)((qh >> j) & 1u) << 4;
      const int h1 = (int)((qh >> (j + 16)) & 1u) << 4;
      const int x0 = (b[i].qs[j] & 0x0F) | h0;
      const int x1 = (b[i].qs[j] >> 4) | h1;
      y[j] = x0 * d + m;
      y[j + HN_QK5_1 / 2] = x1 * d + m;
    }
  }
}

static void
dequant_q8_0(const HnBlockQ8_0 *b, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, y += HN_QK8_0) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < HN_QK8_0; j++)
      y[j] = b[i].qs[j] * d;
  }
}

static void
dequant_q8_1(const HnBlockQ8_1 *b, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, y += HN_QK8_1) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < HN_QK8_1; j++)
      y[j] = b[i].qs[j] * d;
  }
}

static void
dequant_q2_k(const HnBlockQ2_K *b, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++) {
    const float d = h2f(b[i].d);
    const float dmin = h2f(b[i].dmin);
    const uint8_t *q = b[i].qs;
    int group = 0;
    for (int half = 0; half < 2; half++, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int k = 0; k < 2; k++) {
          const uint8_t sc = b[i].scales[group++];
          const float dl = d * (sc & 0xF);
          const float ml = dmin * (sc >> 4);
          for (int l = 0; l < 16; l++)
            *y++ = dl * ((q[16 * k + l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

static void
dequant_q3_k(const HnBlockQ3_K *b, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++) {
    const float d_all = h2f(b[i].d);
    const uint8_t *q = b[i].qs;
    const uint8_t *hm = b[i].hmask;
    uint8_t mask = 1;
    int group = 0;
    for (int half = 0; half < 2; half++, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, mask <<= 1) {
        for (int k = 0; k < 2; k++) {
          const float dl = d_all * hn_q3k_scale(group++, b[i].scales);
          for (int l = 0; l < 16; l++) {
            const int low = (q[16 * k + l] >> shift) & 3;
            const int sub = (hm[16 * k + l] & mask) ? 0 : 4;
            *y++ = dl * (low - sub);
          }
        }
      }
    }
  }
}

static void
dequant_q4_k(const HnBlockQ4_K *b, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++) {
    const float d = h2f(b[i].d);
    const float dmin = h2f(b[i].dmin);
    const uint8_t *q = b[i].qs;
    for (int j = 0; j < 8; j += 2, q += 32) {
      uint8_t sc, m;
      hn_q4k_scale_min(j, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      hn_q4k_scale_min(j + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; l++)
        *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; l++)
        *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

static void
dequant_q5_k(const HnBlockQ5_K *b, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++) {
    const float d = h2f(b[i].d);
    const float dmin = h2f(b[i].dmin);
    const uint8_t *ql = b[i].qs;
    const uint8_t *qh = b[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < 8; j += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      hn_q4k_scale_min(j, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      hn_q4k_scale_min(j + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; l++)
        *y++ = d1 * ((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; l++)
        *y++ = d2 * ((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

static void
dequant_q6_k(const HnBlockQ6_K *b, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++) {
    const float d = h2f(b[i].d);
    const uint8_t *ql = b[i].ql;
    const uint8_t *qh = b[i].qh;
    const int8_t *sc = b[i].scales;
    for (int n = 0; n < HN_QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; l++) {
        const int g = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[g] * q1;
        y[l + 32] = d * sc[g + 2] * q2;
        y[l + 64] = d * sc[g + 4] * q3;
        y[l + 96] = d * sc[g + 6] * q4;
      }
    }
  }
}

static void
dequant_q8_k(const HnBlockQ8_K *b, float *y, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, y += HN_QK_K)
    for (int j = 0; j < HN_QK_K; j++)
      y[j] = b[i].d * b[i].qs[j];
}

void
hn_dequantize_row(HnType type, const void *src, float *dst, int64_t n)
{
  const int64_t block = hn_type_block_elems(type);
  if (block <= 0 || n <= 0)
    return;
  const int64_t nb = n / block;
  switch (type) {
  case HN_TYPE_F32:
    memcpy(dst, src, (size_t)n * sizeof(float));
    break;
  case HN_TYPE_F16: {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      dst[i] = hn_half_to_float(h);
    }
    break;
  }
  case HN_TYPE_BF16: {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      dst[i] = hn_bf16_to_fp32(h);
    }
    break;
  }
  case HN_TYPE_Q4_0: dequant_q4_0(src, dst, nb); break;
  case HN_TYPE_Q4_0_GROUPED:
  case HN_TYPE_Q8_0_GROUPED:
  case HN_TYPE_Q5_0_GROUPED:
  case HN_TYPE_Q4_1_GROUPED:
  case HN_TYPE_Q5_1_GROUPED:
  case HN_TYPE_Q4_K_GROUPED: dequant_grouped(type, src, dst, n); break;
  case HN_TYPE_Q4_1: dequant_q4_1(src, dst, nb); break;
  case HN_TYPE_Q5_0: dequant_q5_0(src, dst, nb); break;
  case HN_TYPE_Q5_1: dequant_q5_1(src, dst, nb); break;
  case HN_TYPE_Q8_0: dequant_q8_0(src, dst, nb); break;
  case HN_TYPE_Q8_1: dequant_q8_1(src, dst, nb); break;
  case HN_TYPE_Q2_K: dequant_q2_k(src, dst, nb); break;
  case HN_TYPE_Q3_K: dequant_q3_k(src, dst, nb); break;
  case HN_TYPE_Q4_K: dequant_q4_k(src, dst, nb); break;
  case HN_TYPE_Q5_K: dequant_q5_k(src, dst, nb); break;
  case HN_TYPE_Q6_K: dequant_q6_k(src, dst, nb); break;
  case HN_TYPE_Q8_K: dequant_q8_k(src, dst, nb); break;
  default: break;
  }
}

/* ------------------------------------------------------------------------------------ */
/* Encoders: the simple 32-element formats                                               */
/* ------------------------------------------------------------------------------------ */

/* The element of largest magnitude, with its sign. */
static float
signed_absmax(const float *x, int n, float *amax_out)
{
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; j++) {
    const float a = fabsf(x[j]);
    if (a > amax) {
      amax = a;
      max = x[j];
    }
  }
  if (amax_out)
    *amax_out = amax;
  return max;
}

static void
quant_q4_0(const float *x, HnBlockQ4_0 *b, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, x += HN_QK4_0) {
    /* The extreme value maps to -8 so that the full signed range is used on its side. */
    const float max = signed_absmax(x, HN_QK4_0, NULL);
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    for (int j = 0; j < HN_QK4_0 / 2; j++) {
      const int q0 = HN_MIN(15, (int)(int8_t)(x[j] * id + 8.5f));
      const int q1 = HN_MIN(15, (int)(int8_t)(x[j + HN_QK4_0 / 2] * id + 8.5f));
      b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
  }
}

static void
block_min_max(const float *x, int n, float *min_out, float *max_out)
{
  float min = INFINITY, max = -INFINITY;
  for (int j = 0; j < n; j++) {
    if (x[j] < min)
      min = x[j];
    if (x[j] > max)
      max = x[j];
  }
  *min_out = min;
  *max_out = max;
}

static void
quant_q4_1(const float *x, HnBlockQ4_1 *b, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, x += HN_QK4_1) {
    float min, max;
    block_min_max(x, HN_QK4_1, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    b[i].m = f2h(min);
    for (int j = 0; j < HN_QK4_1 / 2; j++) {
      const int q0 = HN_MIN(15, (int)(int8_t)((x[j] - min) * id + 0.5f));
      const int q1 = HN_MIN(15, (int)(int8_t)((x[j + HN_QK4_1 / 2] - min) * id + 0.5f));
      b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
  }
}

static void
quant_q5_0(const float *x, HnBlockQ5_0 *b, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, x += HN_QK5_0) {
    const float max = signed_absmax(x, HN_QK5_0, NULL);
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    uint32_t qh = 0;
    for (int j = 0; j < HN_QK5_0 / 2; j++) {
      const int q0 = HN_MIN(31, (int)(int8_t)(x[j] * id + 16.5f));
      const int q1 = HN_MIN(31, (int)(int8_t)(x[j + HN_QK5_0 / 2] * id + 16.5f));
      b[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= (uint32_t)((q0 >> 4) & 1) << j;
      qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
    }
    store_u32_le(b[i].qh, qh);
  }
}

static void
quant_q5_1(const float *x, HnBlockQ5_1 *b, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, x += HN_QK5_1) {
    float min, max;
    block_min_max(x, HN_QK5_1, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    b[i].m = f2h(min);
    uint32_t qh = 0;
    for (int j = 0; j < HN_QK5_1 / 2; j++) {
      const int q0 = HN_MIN(31, (int)(int8_t)((x[j] - min) * id + 0.5f));
      const int q1 = HN_MIN(31, (int)(int8_t)((x[j + HN_QK5_1 / 2] - min) * id + 0.5f));
      b[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= (uint32_t)((q0 >> 4) & 1) << j;
      qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
    }
    store_u32_le(b[i].qh, qh);
  }
}

static void
quant_q8_0(const float *x, HnBlockQ8_0 *b, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, x += HN_QK8_0) {
    float amax;
    signed_absmax(x, HN_QK8_0, &amax);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    for (int j = 0; j < HN_QK8_0; j++)
      b[i].qs[j] = (int8_t)roundf(x[j] * id);
  }
}

static void
quant_q8_1(const float *x, HnBlockQ8_1 *b, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, x += HN_QK8_1) {
    float amax;
    signed_absmax(x, HN_QK8_1, &amax);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < HN_QK8_1; j++) {
      const int q = (int)roundf(x[j] * id);
      b[i].qs[j] = (int8_t)q;
      sum += q;
    }
    b[i].d = f2h(d);
    b[i].s = f2h((float)sum * d);
  }
}

static void
quant_q8_k(const float *x, HnBlockQ8_K *b, int64_t nb)
{
  for (int64_t i = 0; i < nb; i++, x += HN_QK_K) {
    float amax;
    const float max = signed_absmax(x, HN_QK_K, &amax);
    if (amax == 0.0f) {
      memset(&b[i], 0, sizeof b[i]);
      continue;
    }
    /* -127 (not -128) keeps every quant within int8 symmetric range, as the reference. */
    const float iscale = -127.0f / max;
    for (int j = 0; j < HN_QK_K; j++)
      b[i].qs[j] = (int8_t)HN_MIN(127, nearest_int(iscale * x[j]));
    for (int g = 0; g < HN_QK_K / 16; g++) {
      int sum = 0;
      for (int l = 0; l < 16; l++)
        sum += b[i].qs[16 * g + l];
      b[i].bsums[g] = (int16_t)sum;
    }
    b[i].d = 1.0f / iscale;
  }
}

/* ------------------------------------------------------------------------------------ */
/* Encoders: k-quants                                                                    */
/* ------------------------------------------------------------------------------------ */

/* Symmetric quantization of x[0..n) to integers in [-nmax, nmax-1] (stored + nmax in L).
 * Starts from the scale that maps the extreme value to -nmax, then tries 18 nearby
 * scales and keeps the one with the smallest weighted squared error (weights x^2 for
 * rmse_type 1).  Returns the scale. */
static float
make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type)
{
  float amax;
  const float max = signed_absmax(x, n, &amax);
  if (amax < GROUP_MAX_EPS) {
    memset(L, 0, (size_t)n);
    return 0.0f;
  }
  float iscale = -nmax / max;
  if (rmse_type == 0) {
    for (int i = 0; i < n; i++)
      L[i] = (int8_t)(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
    return 1.0f / iscale;
  }
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; i++) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = (int8_t)(nmax + l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; step++) {
    if (step == 0)
      continue;
    iscale = -(nmax + 0.1f * step) / max;
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
      const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    /* Minimising |x - s*l|^2 over s gives error = |x|^2 - sumlx^2/suml2. */
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; i++)
        L[i] = (int8_t)(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

/* Symmetric 3-bit quantization ([-nmax, nmax-1]) refined by coordinate descent: each
 * quant in turn moves to the value that is optimal given the others, as long as the
 * weighted error drops.  Returns the scale; L holds quants + nmax. */
static float
make_q3_quants(int n, int nmax, const float *x, int8_t *L)
{
  float amax;
  const float max = signed_absmax(x, n, &amax);
  if (amax < GROUP_MAX_EPS) {
    memset(L, 0, (size_t)n);
    return 0.0f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; i++) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = (int8_t)l;
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int pass = 0; pass < 5; pass++) {
    int changed = 0;
    for (int i = 0; i < n; i++) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0.0f) {
        float sl2 = suml2 - w * L[i] * L[i];
        const int l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (l != L[i]) {
          slx += w * x[i] * l;
          sl2 += w * l * l;
          if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = (int8_t)l;
            sumlx = slx;
            suml2 = sl2;
            changed++;
          }
        }
      }
    }
    if (changed == 0)
      break;
  }
  for (int i = 0; i < n; i++)
    L[i] = (int8_t)(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric quantization x ≈ scale * L - min_out with L in [0, nmax].  Starts from the
 * min/max grid, then tries nstep grids around it, solving the weighted least-squares
 * scale and offset for each rounding and keeping the best (absolute error if use_mad,
 * else squared).  The offset is never positive (min stays <= 0) because the formats
 * store it as an unsigned subtracted term. */
static float
make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                 float *min_out, uint8_t *Laux, float rmin, float rdelta, int nstep,
                 bool use_mad)
{
  float min = x[0], max = x[0];
  float sum_w = weights[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; i++) {
    if (x[i] < min)
      min = x[i];
    if (x[i] > max)
      max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0.0f)
    min = 0.0f;
  if (max == min) {
    memset(L, 0, (size_t)n);
    *min_out = -min;
    return 0.0f;
  }
  float iscale = nmax / (max - min);
  float scale = 1.0f / iscale;
  float best_err = 0.0f;
  for (int i = 0; i < n; i++) {
    const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
    L[i] = (uint8_t)l;
    float diff = scale * l + min - x[i];
    diff = use_mad ? fabsf(diff) : diff * diff;
    best_err += weights[i] * diff;
  }
  for (int step = 0; step <= nstep; step++) {
    iscale = (rmin + rdelta * step + nmax) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; i++) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = (uint8_t)l;
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0.0f) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      float err = 0.0f;
      for (int i = 0; i < n; i++) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        err += weights[i] * diff;
      }
      if (err < best_err) {
        memcpy(L, Laux, (size_t)n);
        best_err = err;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *min_out = -min;
  return scale;
}

static void
quant_q2_k(const float *x, HnBlockQ2_K *b, int64_t nb)
{
  uint8_t L[HN_QK_K], Laux[16];
  float weights[16], mins[HN_QK_K / 16], scales[HN_QK_K / 16];
  const float q4scale = 15.0f;

  for (int64_t i = 0; i < nb; i++, x += HN_QK_K) {
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < HN_QK_K / 16; j++) {
      for (int l = 0; l < 16; l++)
        weights[l] = fabsf(x[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                   -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale)
        max_scale = scales[j];
      if (mins[j] > max_min)
        max_min = mins[j];
    }
    if (max_scale > 0.0f) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < HN_QK_K / 16; j++)
        b[i].scales[j] = (uint8_t)clamp_int(nearest_int(iscale * scales[j]), 0, 15);
      b[i].d = f2h(max_scale / q4scale);
    } else {
      memset(b[i].scales, 0, sizeof b[i].scales);
      b[i].d = f2h(0.0f);
    }
    if (max_min > 0.0f) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < HN_QK_K / 16; j++)
        b[i].scales[j] |= (uint8_t)(clamp_int(nearest_int(iscale * mins[j]), 0, 15) << 4);
      b[i].dmin = f2h(max_min / q4scale);
    } else {
      b[i].dmin = f2h(0.0f);
    }
    /* Requantize against the scales as stored, so rounding of d/dmin is accounted for. */
    for (int j = 0; j < HN_QK_K / 16; j++) {
      const float d = h2f(b[i].d) * (b[i].scales[j] & 0xF);
      if (d == 0.0f)
        continue;
      const float dm = h2f(b[i].dmin) * (b[i].scales[j] >> 4);
      for (int l = 0; l < 16; l++)
        L[16 * j + l] = (uint8_t)clamp_int(nearest_int((x[16 * j + l] + dm) / d), 0, 3);
    }
    for (int j = 0; j < HN_QK_K; j += 128)
      for (int l = 0; l < 32; l++)
        b[i].qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                       (L[j + l + 96] << 6));
  }
}

static void
quant_q3_k(const float *x, HnBlockQ3_K *b, int64_t nb)
{
  int8_t L[HN_QK_K];
  float scales[HN_QK_K / 16];

  for (int64_t i = 0; i < nb; i++, x += HN_QK_K) {
    float max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < HN_QK_K / 16; j++) {
      scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
      if (fabsf(scales[j]) > amax) {
        amax = fabsf(scales[j]);
        max_scale = scales[j];
      }
    }
    memset(b[i].scales, 0, sizeof b[i].scales);
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < HN_QK_K / 16; j++) {
        const int l = clamp_int(nearest_int(iscale * scales[j]), -32, 31) + 32;
        if (j < 8)
          b[i].scales[j] = (uint8_t)(l & 0xF);
        else
          b[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
        b[i].scales[8 + (j & 3)] |= (uint8_t)((l >> 4) << (2 * (j >> 2)));
      }
      b[i].d = f2h(1.0f / iscale);
    } else {
      b[i].d = f2h(0.0f);
    }
    for (int j = 0; j < HN_QK_K / 16; j++) {
      const float d = h2f(b[i].d) * hn_q3k_scale(j, b[i].scales);
      if (d == 0.0f)
        continue;
      for (int l = 0; l < 16; l++)
        L[16 * j + l] = (int8_t)(clamp_int(nearest_int(x[16 * j + l] / d), -4, 3) + 4);
    }
    memset(b[i].hmask, 0, sizeof b[i].hmask);
    for (int j = 0; j < HN_QK_K; j++) {
      if (L[j] > 3) {
        b[i].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
        L[j] -= 4;
      }
    }
    for (int j = 0; j < HN_QK_K; j += 128)
      for (int l = 0; l < 32; l++)
        b[i].qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                       (L[j + l + 96] << 6));
  }
}

/* Shared by Q4_K and Q5_K: per-group asymmetric search, then 6-bit scale/min packing.
 * Fills `scales12`, the two super-scales and the quants L[0..255] in 0..nmax. */
static void
quant_k_groups32(const float *x, int nmax, float rmin, int nstep, uint8_t scales12[12],
                 uint16_t *d_out, uint16_t *dmin_out, uint8_t L[HN_QK_K])
{
  uint8_t Laux[32];
  float weights[32], mins[8], scales[8];
  float max_scale = 0.0f, max_min = 0.0f;

  for (int j = 0; j < 8; j++) {
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; l++)
      sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = sqrtf(sum_x2 / 32);
    for (int l = 0; l < 32; l++)
      weights[l] = av_x + fabsf(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                 rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale)
      max_scale = scales[j];
    if (mins[j] > max_min)
      max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  memset(scales12, 0, 12);
  for (int j = 0; j < 8; j++) {
    const int ls = clamp_int(nearest_int(inv_scale * scales[j]), 0, 63);
    const int lm = clamp_int(nearest_int(inv_min * mins[j]), 0, 63);
    if (j < 4) {
      scales12[j] = (uint8_t)ls;
      scales12[j + 4] = (uint8_t)lm;
    } else {
      scales12[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
      scales12[j - 4] |= (uint8_t)((ls >> 4) << 6);
      scales12[j] |= (uint8_t)((lm >> 4) << 6);
    }
  }
  *d_out = f2h(max_scale / 63.0f);
  *dmin_out = f2h(max_min / 63.0f);
  for (int j = 0; j < 8; j++) {
    uint8_t sc, m;
    hn_q4k_scale_min(j, scales12, &sc, &m);
    const float d = h2f(*d_out) * sc;
    if (d == 0.0f)
      continue;
    const float dm = h2f(*dmin_out) * m;
    for (int l = 0; l < 32; l++)
      L[32 * j + l] = (uint8_t)clamp_int(nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
  }
}

static void
quant_q4_k(const float *x, HnBlockQ4_K *b, int64_t nb)
{
  uint8_t L[HN_QK_K];
  for (int64_t i = 0; i < nb; i++, x += HN_QK_K) {
    quant_k_groups32(x, 15, -1.0f, 20, b[i].scales, &b[i].d, &b[i].dmin, L);
    uint8_t *q = b[i].qs;
    for (int j = 0; j < HN_QK_K; j += 64, q += 32)
      for (int l = 0; l < 32; l++)
        q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
  }
}

static void
quant_q5_k(const float *x, HnBlockQ5_K *b, int64_t nb)
{
  uint8_t L[HN_QK_K];
  for (int64_t i = 0; i < nb; i++, x += HN_QK_K) {
    quant_k_groups32(x, 31, -0.5f, 15, b[i].scales, &b[i].d, &b[i].dmin, L);
    memset(b[i].qh, 0, sizeof b[i].qh);
    uint8_t *ql = b[i].qs;
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < HN_QK_K; n += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
      for (int j = 0; j < 32; j++) {
        int l1 = L[n + j], l2 = L[n + j + 32];
        if (l1 > 15) {
          l1 -= 16;
          b[i].qh[j] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          b[i].qh[j] |= m2;
        }
        ql[j] = (uint8_t)(l1 | (l2 << 4));
      }
    }
  }
}

static void
quant_q6_k(const float *x, HnBlockQ6_K *b, int64_t nb)
{
  int8_t L[HN_QK_K];
  float scales[HN_QK_K / 16];

  for (int64_t i = 0; i < nb; i++, x += HN_QK_K) {
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int g = 0; g < HN_QK_K / 16; g++) {
      scales[g] = make_qx_quants(16, 32, x + 16 * g, L + 16 * g, 1);
      if (fabsf(scales[g]) > max_abs_scale) {
        max_abs_scale = fabsf(scales[g]);
        max_scale = scales[g];
      }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
      memset(&b[i], 0, sizeof b[i]);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    b[i].d = f2h(1.0f / iscale);
    for (int g = 0; g < HN_QK_K / 16; g++)
      b[i].scales[g] = (int8_t)clamp_int(nearest_int(iscale * scales[g]), -128, 127);
    for (int g = 0; g < HN_QK_K / 16; g++) {
      const float d = h2f(b[i].d) * b[i].scales[g];
      if (d == 0.0f)
        continue;
      for (int l = 0; l < 16; l++)
        L[16 * g + l] = (int8_t)(clamp_int(nearest_int(x[16 * g + l] / d), -32, 31) + 32);
    }
    uint8_t *ql = b[i].ql, *qh = b[i].qh;
    for (int j = 0; j < HN_QK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; l++) {
        const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
        ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

void
hn_quantize_row(HnType type, const float *src, void *dst, int64_t n)
{
  const int64_t block = hn_type_block_elems(type);
  if (block <= 0 || n <= 0)
    return;
  const int64_t nb = n / block;
  switch (type) {
  case HN_TYPE_F32:
    memcpy(dst, src, (size_t)n * sizeof(float));
    break;
  case HN_TYPE_F16: {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
      const uint16_t h = hn_fp32_to_fp16(src[i]);
      memcpy(p + 2 * i, &h, 2);
    }
    break;
  }
  case HN_TYPE_BF16: {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
      const uint16_t h = hn_fp32_to_bf16(src[i]);
      memcpy(p + 2 * i, &h, 2);
    }
    break;
  }
  case HN_TYPE_Q4_0: quant_q4_0(src, dst, nb); break;
  case HN_TYPE_Q4_0_GROUPED:
  case HN_TYPE_Q8_0_GROUPED:
  case HN_TYPE_Q5_0_GROUPED:
  case HN_TYPE_Q4_1_GROUPED:
  case HN_TYPE_Q5_1_GROUPED:
  case HN_TYPE_Q4_K_GROUPED:
    hn_quantize_row(hn_type_file_layout(type), src, dst, n);
    hn_type_regroup_row(type, dst, dst, n);
    break;
  case HN_TYPE_Q4_1: quant_q4_1(src, dst, nb); break;
  case HN_TYPE_Q5_0: quant_q5_0(src, dst, nb); break;
  case HN_TYPE_Q5_1: quant_q5_1(src, dst, nb); break;
  case HN_TYPE_Q8_0: quant_q8_0(src, dst, nb); break;
  case HN_TYPE_Q8_1: quant_q8_1(src, dst, nb); break;
  case HN_TYPE_Q2_K: quant_q2_k(src, dst, nb); break;
  case HN_TYPE_Q3_K: quant_q3_k(src, dst, nb); break;
  case HN_TYPE_Q4_K: quant_q4_k(src, dst, nb); break;
  case HN_TYPE_Q5_K: quant_q5_k(src, dst, nb); break;
  case HN_TYPE_Q6_K: quant_q6_k(src, dst, nb); break;
  case HN_TYPE_Q8_K: quant_q8_k(src, dst, nb); break;
  default: break;
  }
}

/* ------------------------------------------------------------------------------------ */
/* Dot products                                                                          */
/* ------------------------------------------------------------------------------------ */

HnType
hn_type_vec_dot_type(HnType type)
{
  switch (type) {
  case HN_TYPE_Q4_0:
  case HN_TYPE_Q4_0_GROUPED:
  case HN_TYPE_Q5_0:
  case HN_TYPE_Q5_0_GROUPED:
  case HN_TYPE_Q8_0:
  case HN_TYPE_Q8_0_GROUPED:
    return HN_TYPE_Q8_0;
  case HN_TYPE_Q4_1:
  case HN_TYPE_Q4_1_GROUPED:
  case HN_TYPE_Q5_1:
  case HN_TYPE_Q5_1_GROUPED:
    return HN_TYPE_Q8_1;
  case HN_TYPE_Q2_K:
  case HN_TYPE_Q3_K:
  case HN_TYPE_Q4_K:
  case HN_TYPE_Q4_K_GROUPED:
  case HN_TYPE_Q5_K:
  case HN_TYPE_Q6_K:
    return HN_TYPE_Q8_K;
  default:
    return type;
  }
}

/* Continues `sum` over nb blocks, so that a row taken a few blocks at a time (the grouped
 * layout) adds up in exactly the order of the whole row. */
static float
dot_q4_0_from(float sum, const void *weight, const void *act, int64_t nb)
{
  const HnBlockQ4_0 *x = weight;
  const HnBlockQ8_0 *y = act;
  for (int64_t i = 0; i < nb; i++) {
    int isum = 0;
    for (int j = 0; j < HN_QK4_0 / 2; j++) {
      isum += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j];
      isum += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + HN_QK4_0 / 2];
    }
    sum += isum * (h2f(x[i].d) * h2f(y[i].d));
  }
  return sum;
}

static float
dot_q4_0(const HnBlockQ4_0 *x, const HnBlockQ8_0 *y, int64_t nb)
{
  return dot_q4_0_from(0.0f, x, y, nb);
}

static float
dot_q4_1_from(float sum, const void *weight, const void *act, int64_t nb)
{
  const HnBlockQ4_1 *x = weight;
  const HnBlockQ8_1 *y = act;
  for (int64_t i = 0; i < nb; i++) {
    int isum = 0;
    for (int j = 0; j < HN_QK4_1 / 2; j++) {
      isum += (x[i].qs[j] & 0xF) * y[i].qs[j];
      isum += (x[i].qs[j] >> 4) * y[i].qs[j + HN_QK4_1 / 2];
    }
    /* sum_j (d q_j + m) dy qy_j = d dy sum q qy + m * (dy sum qy) = ... + m * s */
    sum += (h2f(x[i].d) * h2f(y[i].d)) * isum + h2f(x[i].m) * h2f(y[i].s);
  }
  return sum;
}

static float
dot_q4_1(const HnBlockQ4_1 *x, const HnBlockQ8_1 *y, int64_t nb)
{
  return dot_q4_1_from(0.0f, x, y, nb);
}

static float
dot_q5_0_from(float sum, const void *weight, const void *act, int64_t nb)
{
  const HnBlockQ5_0 *x = weight;
  const HnBlockQ8_0 *y = act;
  for (int64_t i = 0; i < nb; i++) {
    const uint32_t qh = load_u32_le(x[i].qh);
    int isum = 0;
    for (int j = 0; j < HN_QK5_0 / 2; j++) {
      const int q0 = ((x[i].qs[j] & 0xF) | (int)(((qh >> j) & 1u) << 4)) - 16;
      const int q1 = ((x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4)) - 16;
      isum += q0 * y[i].qs[j] + q1 * y[i].qs[j + HN_QK5_0 / 2];
    }
    sum += isum * (h2f(x[i].d) * h2f(y[i].d));
  }
  return sum;
}

static float
dot_q5_0(const HnBlockQ5_0 *x, const HnBlockQ8_0 *y, int64_t nb)
{
  return dot_q5_0_from(0.0f, x, y, nb);
}

static float
dot_q5_1_from(float sum, const void *weight, const void *act, int64_t nb)
{
  const HnBlockQ5_1 *x = weight;
  const HnBlockQ8_1 *y = act;
  for (int64_t i = 0; i < nb; i++) {
    const uint32_t qh = load_u32_le(x[i].qh);
    int isum = 0;
    for (int j = 0; j < HN_QK5_1 / 2; j++) {
      const int q0 = (x[i].qs[j] & 0xF) | (int)(((qh >> j) & 1u) << 4);
      const int q1 = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
      isum += q0 * y[i].qs[j] + q1 * y[i].qs[j + HN_QK5_1 / 2];
    }
    sum += (h2f(x[i].d) * h2f(y[i].d)) * isum + h2f(x[i].m) * h2f(y[i].s);
  }
  return sum;
}

static float
dot_q5_1(const HnBlockQ5_1 *x, const HnBlockQ8_1 *y, int64_t nb)
{
  return dot_q5_1_from(0.0f, x, y, nb);
}

static float
dot_q8_0_from(float sum, const void *weight, const void *act, int64_t nb)
{
  const HnBlockQ8_0 *x = weight;
  const HnBlockQ8_0 *y = act;
  for (int64_t i = 0; i < nb; i++) {
    int isum = 0;
    for (int j = 0; j < HN_QK8_0; j++)
      isum += x[i].qs[j] * y[i].qs[j];
    sum += isum * (h2f(x[i].d) * h2f(y[i].d));
  }
  return sum;
}

static float
dot_q8_1(const HnBlockQ8_1 *x, const HnBlockQ8_1 *y, int64_t nb)
{
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; i++) {
    int isum = 0;
    for (int j = 0; j < HN_QK8_1; j++)
      isum += x[i].qs[j] * y[i].qs[j];
    sum += isum * (h2f(x[i].d) * h2f(y[i].d));
  }
  return sum;
}

/* The k-quant dot products accumulate exact integers within a super-block (group scale
 * times the group's quant products) and apply the float super-scales once per block. */

static float
dot_q2_k(const HnBlockQ2_K *x, const HnBlockQ8_K *y, int64_t nb)
{
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; i++) {
    int summs = 0;
    for (int g = 0; g < 16; g++)
      summs += y[i].bsums[g] * (x[i].scales[g] >> 4);
    const int8_t *q8 = y[i].qs;
    const uint8_t *q2 = x[i].qs;
    int isum = 0, group = 0;
    for (int half = 0; half < 2; half++, q2 += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int k = 0; k < 2; k++, q8 += 16) {
          int gsum = 0;
          for (int l = 0; l < 16; l++)
            gsum += q8[l] * ((q2[16 * k + l] >> shift) & 3);
          isum += (x[i].scales[group++] & 0xF) * gsum;
        }
      }
    }
    const float dall = y[i].d * h2f(x[i].d);
    const float dmin = y[i].d * h2f(x[i].dmin);
    sum += dall * isum - dmin * summs;
  }
  return sum;
}

static float
dot_q3_k(const HnBlockQ3_K *x, const HnBlockQ8_K *y, int64_t nb)
{
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; i++) {
    const int8_t *q8 = y[i].qs;
    const uint8_t *q3 = x[i].qs;
    uint8_t mask = 1;
    int isum = 0, group = 0;
    for (int half = 0; half < 2; half++, q3 += 32) {
      for (int shift = 0; shift < 8; shift += 2, mask <<= 1) {
        for (int k = 0; k < 2; k++, q8 += 16) {
          int gsum = 0;
          for (int l = 0; l < 16; l++) {
            const int q = ((q3[16 * k + l] >> shift) & 3) - ((x[i].hmask[16 * k + l] & mask) ? 0 : 4);
            gsum += q8[l] * q;
          }
          isum += hn_q3k_scale(group++, x[i].scales) * gsum;
        }
      }
    }
    sum += (h2f(x[i].d) * y[i].d) * isum;
  }
  return sum;
}

static float
dot_q4_k_from(float sum, const void *weight, const void *act, int64_t nb)
{
  const HnBlockQ4_K *x = weight;
  const HnBlockQ8_K *y = act;
  for (int64_t i = 0; i < nb; i++) {
    const int8_t *q8 = y[i].qs;
    const uint8_t *q4 = x[i].qs;
    int isum = 0, summs = 0;
    for (int j = 0; j < 8; j += 2, q4 += 32) {
      for (int k = 0; k < 2; k++, q8 += 32) {
        uint8_t sc, m;
        hn_q4k_scale_min(j + k, x[i].scales, &sc, &m);
        int gsum = 0;
        for (int l = 0; l < 32; l++)
          gsum += q8[l] * (k == 0 ? (q4[l] & 0xF) : (q4[l] >> 4));
        isum += sc * gsum;
        summs += m * (y[i].bsums[2 * (j + k)] + y[i].bsums[2 * (j + k) + 1]);
      }
    }
    sum += (h2f(x[i].d) * y[i].d) * isum - (h2f(x[i].dmin) * y[i].d) * summs;
  }
  return sum;
}

static float
dot_q4_k(const HnBlockQ4_K *x, const HnBlockQ8_K *y, int64_t nb)
{
  return dot_q4_k_from(0.0f, x, y, nb);
}

static float
dot_q5_k(const HnBlockQ5_K *x, const HnBlockQ8_K *y, int64_t nb)
{
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; i++) {
    const int8_t *q8 = y[i].qs;
    const uint8_t *ql = x[i].qs;
    int isum = 0, summs = 0;
    uint8_t u = 1;
    for (int j = 0; j < 8; j += 2, ql += 32) {
      for (int k = 0; k < 2; k++, q8 += 32, u <<= 1) {
        uint8_t sc, m;
        hn_q4k_scale_min(j + k, x[i].scales, &sc, &m);
        int gsum = 0;
        for (int l = 0; l < 32; l++) {
          const int q = (k == 0 ? (ql[l] & 0xF) : (ql[l] >> 4)) + ((x[i].qh[l] & u) ? 16 : 0);
          gsum += q8[l] * q;
        }
        isum += sc * gsum;
        summs += m * (y[i].bsums[2 * (j + k)] + y[i].bsums[2 * (j + k) + 1]);
      }
    }
    sum += (h2f(x[i].d) * y[i].d) * isum - (h2f(x[i].dmin) * y[i].d) * summs;
  }
  return sum;
}

static float
dot_q6_k(const HnBlockQ6_K *x, const HnBlockQ8_K *y, int64_t nb)
{
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; i++) {
    int isum = 0;
    const uint8_t *ql = x[i].ql, *qh = x[i].qh;
    const int8_t *sc = x[i].scales;
    const int8_t *q8 = y[i].qs;
    for (int n = 0; n < HN_QK_K; n += 128, ql += 64, qh += 32, sc += 8, q8 += 128) {
      int gsum[8] = { 0 };
      for (int l = 0; l < 32; l++) {
        const int g = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        gsum[g] += q1 * q8[l];
        gsum[g + 2] += q2 * q8[l + 32];
        gsum[g + 4] += q3 * q8[l + 64];
        gsum[g + 6] += q4 * q8[l + 96];
      }
      for (int g = 0; g < 8; g++)
        isum += sc[g] * gsum[g];
    }
    sum += (h2f(x[i].d) * y[i].d) * isum;
  }
  return sum;
}

static float
dot_q8_k(const HnBlockQ8_K *x, const HnBlockQ8_K *y, int64_t nb)
{
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; i++) {
    int isum = 0;
    for (int j = 0; j < HN_QK_K; j++)
      isum += x[i].qs[j] * y[i].qs[j];
    sum += (x[i].d * y[i].d) * isum;
  }
  return sum;
}

float
hn_vec_dot_ref(HnType type, int64_t n, const void *weight_row, const void *act_row)
{
  const int64_t block = hn_type_block_elems(type);
  if (block <= 0 || n <= 0)
    return 0.0f;
  const int64_t nb = n / block;
  switch (type) {
  case HN_TYPE_F32: {
    /* Double accumulation, like the reference's scalar path: long rows stay accurate. */
    const float *x = weight_row, *y = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
      sum += (double)(x[i] * y[i]);
    return (float)sum;
  }
  case HN_TYPE_F16:
  case HN_TYPE_BF16: {
    const uint8_t *x = weight_row, *y = act_row;
    const bool half = type == HN_TYPE_F16;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
      uint16_t a, b;
      memcpy(&a, x + 2 * i, 2);
      memcpy(&b, y + 2 * i, 2);
      const float fa = half ? hn_half_to_float(a) : hn_bf16_to_fp32(a);
      const float fb = half ? hn_half_to_float(b) : hn_bf16_to_fp32(b);
      sum += (double)(fa * fb);
    }
    return (float)sum;
  }
  case HN_TYPE_Q4_0: return dot_q4_0(weight_row, act_row, nb);
  case HN_TYPE_Q4_0_GROUPED:
  case HN_TYPE_Q8_0_GROUPED:
  case HN_TYPE_Q5_0_GROUPED:
  case HN_TYPE_Q4_1_GROUPED:
  case HN_TYPE_Q5_1_GROUPED:
  case HN_TYPE_Q4_K_GROUPED: return dot_grouped(type, weight_row, act_row, n);
  case HN_TYPE_Q4_1: return dot_q4_1(weight_row, act_row, nb);
  case HN_TYPE_Q5_0: return dot_q5_0(weight_row, act_row, nb);
  case HN_TYPE_Q5_1: return dot_q5_1(weight_row, act_row, nb);
  case HN_TYPE_Q8_0: return dot_q8_0_from(0.0f, weight_row, act_row, nb);
  case HN_TYPE_Q8_1: return dot_q8_1(weight_row, act_row, nb);
  case HN_TYPE_Q2_K: return dot_q2_k(weight_row, act_row, nb);
  case HN_TYPE_Q3_K: return dot_q3_k(weight_row, act_row, nb);
  case HN_TYPE_Q4_K: return dot_q4_k(weight_row, act_row, nb);
  case HN_TYPE_Q5_K: return dot_q5_k(weight_row, act_row, nb);
  case HN_TYPE_Q6_K: return dot_q6_k(weight_row, act_row, nb);
  case HN_TYPE_Q8_K: return dot_q8_k(weight_row, act_row, nb);
  default: return 0.0f;
  }
}

/* ------------------------------------------------------------------------------------ */
/* Regrouped layouts (hn-quants.h)                                                       */
/* ------------------------------------------------------------------------------------ */

/* A layout is a permutation of the bytes of each run of HN_GROUP_BLOCKS blocks: the
 * blocks' half-float scales first (block j at 2j), their mins next where the type has
 * them, then the fifth bits where it has them, as 64 bytes of bit planes
 * (fifth_bits_to_planes), then vectors of 64 bytes in which block j owns bytes
 * 4j..4j+3.  Quad e of a block's quant bytes (its bytes 4e..4e+3) goes to vector
 * vector_of_quad[e].  The vectors follow the activation records (HnActGroup, hn-simd.h):
 * vector 2s holds elements 4s..4s+3 of each block, 2s + 1 elements 16+4s..16+4s+3 — for
 * the 4- and 5-bit types both in one vector of bytes (low and high nibbles), for Q8_0
 * in two.  Q4_K's run, two super-blocks as 16 blocks of 32, keeps Q4_0's vectors
 * behind a header of its own (convert_run_q4_k). */
typedef struct RegroupedLayout RegroupedLayout;
struct RegroupedLayout {
  HnType layout, file_type;
  int64_t block_elems; /* 32, or HN_QK_K for Q4_K's super-blocks (two to a run) */
  size_t block_bytes;
  /* one run from file order to the layout (grouped true) or back; in and out differ */
  void (*convert)(const RegroupedLayout *l, const uint8_t *in, uint8_t *out, bool grouped);
  bool mins;       /* a half-float min after d in the block (Q4_1, Q5_1) */
  bool fifth_bits; /* 4 bytes of fifth bits before the nibbles (Q5_0, Q5_1) */
  int quads;
  uint8_t vector_of_quad[8];
  /* the reference dot product continued over nb more blocks, so that a row taken a run
   * at a time adds up in exactly the order of the whole row */
  float (*dot_from)(float sum, const void *x, const void *y, int64_t nb);
};

static void convert_run(const RegroupedLayout *l, const uint8_t *in, uint8_t *out, bool grouped);
static void convert_run_q4_k(const RegroupedLayout *l, const uint8_t *in, uint8_t *out, bool grouped);

static const RegroupedLayout regrouped_layouts[] = {
  { HN_TYPE_Q4_0_GROUPED, HN_TYPE_Q4_0, 32, sizeof(HnBlockQ4_0), convert_run, false, false, 4, { 0, 1, 2, 3 },
    dot_q4_0_from },
  { HN_TYPE_Q8_0_GROUPED, HN_TYPE_Q8_0, 32, sizeof(HnBlockQ8_0), convert_run, false, false, 8,
    { 0, 2, 4, 6, 1, 3, 5, 7 }, dot_q8_0_from },
  { HN_TYPE_Q5_0_GROUPED, HN_TYPE_Q5_0, 32, sizeof(HnBlockQ5_0), convert_run, false, true, 4, { 0, 1, 2, 3 },
    dot_q5_0_from },
  { HN_TYPE_Q4_1_GROUPED, HN_TYPE_Q4_1, 32, sizeof(HnBlockQ4_1), convert_run, true, false, 4, { 0, 1, 2, 3 },
    dot_q4_1_from },
  { HN_TYPE_Q5_1_GROUPED, HN_TYPE_Q5_1, 32, sizeof(HnBlockQ5_1), convert_run, true, true, 4, { 0, 1, 2, 3 },
    dot_q5_1_from },
  /* its own conversion: the fields convert_run reads stay empty */
  { HN_TYPE_Q4_K_GROUPED, HN_TYPE_Q4_K, HN_QK_K, sizeof(HnBlockQ4_K), convert_run_q4_k, false, false, 0, { 0 },
    dot_q4_k_from },
};

/* A run is HN_GROUP_BLOCKS · 32 elements of every layout. */
static int64_t
run_blocks(const RegroupedLayout *l)
{
  return 32 * HN_GROUP_BLOCKS / l->block_elems;
}

#define MAX_RUN_BYTES (HN_GROUP_BLOCKS * sizeof(HnBlockQ8_0))

static const RegroupedLayout *
find_layout(HnType layout)
{
  for (size_t i = 0; i < sizeof regrouped_layouts / sizeof regrouped_layouts[0]; i++)
    if (regrouped_layouts[i].layout == layout)
      return &regrouped_layouts[i];
  return NULL;
}

/* A block's 32 fifth bits (qh, little-endian) as the four bytes of its lane in the bit
 * planes: bit m of byte k is the fifth bit of byte k of its lane in code vector m, the
 * element 4 (m / 2) + k, plus 16 for odd m.  So nibble i of the low (m even) or high
 * (m odd) 16 bits of qh goes, bit k to byte k, to bit 2i or 2i + 1 of the bytes: a 4 × 4
 * bit transpose per nibble, which one multiply does (spread_nibble, gather_nibble) —
 * the load converts every block of a model's matrices. */
static uint32_t
spread_nibble(uint32_t v)
{
  return (v * 0x00204081u) & 0x01010101u; /* bit k to bit 8k: v · (1 + 2^7 + 2^14 + 2^21) */
}

static uint32_t
gather_nibble(uint32_t x)
{
  return ((x & 0x01010101u) * 0x01020408u) >> 24 & 0xfu; /* bit 8k to bit 24 + k */
}

static void
fifth_bits_to_planes(const uint8_t qh[4], uint8_t planes[4])
{
  const uint32_t bits = load_u32_le(qh);
  uint32_t p = 0;
  for (int i = 0; i < 4; i++)
    p |= spread_nibble(bits >> (4 * i) & 0xfu) << (2 * i) | spread_nibble(bits >> (16 + 4 * i) & 0xfu) << (2 * i + 1);
  store_u32_le(planes, p);
}

static void
planes_to_fifth_bits(const uint8_t planes[4], uint8_t qh[4])
{
  const uint32_t p = load_u32_le(planes);
  uint32_t bits = 0;
  for (int i = 0; i < 4; i++)
    bits |= gather_nibble(p >> (2 * i)) << (4 * i) | gather_nibble(p >> (2 * i + 1)) << (16 + 4 * i);
  store_u32_le(qh, bits);
}

/* Copies `bytes` bytes from the file's blocks (offset `in_blocks`) to the run's layout
 * (offset `in_run`) where grouped, the other way back where not. */
static void
move_bytes(const uint8_t *in, uint8_t *out, size_t in_run, size_t in_blocks, size_t bytes, bool grouped)
{
  if (grouped)
    memcpy(out + in_run, in + in_blocks, bytes);
  else
    memcpy(out + in_blocks, in + in_run, bytes);
}

/* One run of a 32-element type from file order to the layout (grouped true) or back;
 * in and out differ. */
static void
convert_run(const RegroupedLayout *l, const uint8_t *in, uint8_t *out, bool grouped)
{
  const size_t mins = HN_RUN_MINS_AT, planes = HN_RUN_PLANES_AT(l->mins);
  const size_t vectors = HN_RUN_VECTORS_AT(l->mins, l->fifth_bits);
  const size_t block_qh = l->mins ? 4 : 2, block_quants = block_qh + (l->fifth_bits ? 4 : 0);
  for (int j = 0; j < HN_GROUP_BLOCKS; j++) {
    const size_t block = (size_t)j * l->block_bytes;
    move_bytes(in, out, 2 * (size_t)j, block, 2, grouped);
    if (l->mins)
      move_bytes(in, out, mins + 2 * (size_t)j, block + 2, 2, grouped);
    if (l->fifth_bits && grouped)
      fifth_bits_to_planes(in + block + block_qh, out + planes + 4 * (size_t)j);
    else if (l->fifth_bits)
      planes_to_fifth_bits(in + planes + 4 * (size_t)j, out + block + block_qh);
    for (int e = 0; e < l->quads; e++)
      move_bytes(in, out, vectors + 64 * (size_t)l->vector_of_quad[e] + 4 * (size_t)j,
                 block + block_quants + 4 * (size_t)e, 4, grouped);
  }
}

/* Q4_K's run, two super-blocks (HN_TYPE_Q4_K_GROUPED in hn-quants.h).  In the file,
 * sub-blocks 2p and 2p + 1 of a super-block share qs[32p ..]: byte i holds element i of
 * the first in its low nibble and of the second in its high one.  In the run sub-block j
 * (super-block j / 8) has the 16 bytes of a Q4_0 block (byte i: element i low, i + 16
 * high), quad s in vector s.  Converted eight bytes at a time, with masks that keep
 * every nibble in its byte: the load converts each Q4_K matrix of a model. */
#define LOW_NIBBLES 0x0f0f0f0f0f0f0f0full

static uint64_t
load_u64(const uint8_t *p)
{
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static void
store_u64(uint8_t *p, uint64_t v)
{
  memcpy(p, &v, 8);
}

/* The packed bytes of sub-block j, whose bytes 4s.. are at 64s + 4j of `vectors`. */
static void
sub_block_bytes(const uint8_t *vectors, int j, uint8_t bytes[16])
{
  for (int s = 0; s < 4; s++)
    memcpy(bytes + 4 * s, vectors + 64 * s + 4 * j, 4);
}

static void
convert_run_q4_k(const RegroupedLayout *l, const uint8_t *in, uint8_t *out, bool grouped)
{
  (void)l;
  HnBlockQ4_K b[2];
  if (grouped) {
    uint8_t *vectors = out + HN_RUN_VECTORS_AT(0, 0);
    memcpy(b, in, sizeof b);
    memset(out, 0, HN_RUN_VECTORS_AT(0, 0));
    for (int sb = 0; sb < 2; sb++) {
      memcpy(out + 2 * sb, &b[sb].d, 2);
      memcpy(out + HN_RUN_Q4_K_DMIN_AT + 2 * sb, &b[sb].dmin, 2);
    }
    for (int j = 0; j < HN_GROUP_BLOCKS; j++) {
      uint8_t sc, m;
      hn_q4k_scale_min(j % 8, b[j / 8].scales, &sc, &m);
      out[HN_RUN_Q4_K_SCALES_AT + j] = (uint8_t)(sc | (m & 3) << 6);
      out[HN_RUN_Q4_K_MINS_HIGH_AT + j / 2] |= (uint8_t)((m >> 2) << (4 * (j % 2)));
    }
    for (int pair = 0; pair < HN_GROUP_BLOCKS / 2; pair++) {
      const uint8_t *qs = b[pair / 4].qs + 32 * (pair % 4);
      const int j = 2 * pair; /* sub-blocks j and j + 1 */
      for (int h = 0; h < 2; h++) {
        const uint64_t first = load_u64(qs + 8 * h), second = load_u64(qs + 16 + 8 * h);
        uint8_t low[8], high[8];
        store_u64(low, (first & LOW_NIBBLES) | (second & LOW_NIBBLES) << 4);
        store_u64(high, (first >> 4 & LOW_NIBBLES) | (second & ~LOW_NIBBLES));
        for (int q = 0; q < 2; q++) {
          memcpy(vectors + 64 * (2 * h + q) + 4 * j, low + 4 * q, 4);
          memcpy(vectors + 64 * (2 * h + q) + 4 * (j + 1), high + 4 * q, 4);
        }
      }
    }
    return;
  }
  const uint8_t *vectors = in + HN_RUN_VECTORS_AT(0, 0);
  memset(b, 0, sizeof b);
  for (int sb = 0; sb < 2; sb++) {
    memcpy(&b[sb].d, in + 2 * sb, 2);
    memcpy(&b[sb].dmin, in + HN_RUN_Q4_K_DMIN_AT + 2 * sb, 2);
  }
  for (int j = 0; j < HN_GROUP_BLOCKS; j++) {
    HnBlockQ4_K *blk = &b[j / 8];
    const int sub = j % 8;
    uint8_t sc, m;
    hn_q4k_run_scale_min(j, in, &sc, &m);
    /* the file's packing (hn_q4k_scale_min read backwards) */
    if (sub < 4) {
      blk->scales[sub] |= sc;
      blk->scales[sub + 4] |= m;
    } else {
      blk->scales[sub + 4] = (uint8_t)((sc & 0xF) | (m & 0xF) << 4);
      blk->scales[sub - 4] |= (uint8_t)((sc >> 4) << 6);
      blk->scales[sub] |= (uint8_t)((m >> 4) << 6);
    }
  }
  for (int pair = 0; pair < HN_GROUP_BLOCKS / 2; pair++) {
    uint8_t *qs = b[pair / 4].qs + 32 * (pair % 4);
    uint8_t low[16], high[16];
    sub_block_bytes(vectors, 2 * pair, low);
    sub_block_bytes(vectors, 2 * pair + 1, high);
    for (int h = 0; h < 2; h++) {
      const uint64_t lo = load_u64(low + 8 * h), hi = load_u64(high + 8 * h);
      store_u64(qs + 8 * h, (lo & LOW_NIBBLES) | (hi & LOW_NIBBLES) << 4);
      store_u64(qs + 16 + 8 * h, (lo >> 4 & LOW_NIBBLES) | (hi & ~LOW_NIBBLES));
    }
  }
  memcpy(out, b, sizeof b);
}
#undef LOW_NIBBLES

static void
convert_row(const RegroupedLayout *l, const void *src, void *dst, int64_t n, bool grouped)
{
  const size_t run_bytes = (size_t)run_blocks(l) * l->block_bytes;
  const int64_t runs = n / 32 / HN_GROUP_BLOCKS;
  for (int64_t g = 0; g < runs; g++) {
    uint8_t in[MAX_RUN_BYTES]; /* a copy, so that src may be dst */
    memcpy(in, (const uint8_t *)src + (size_t)g * run_bytes, run_bytes);
    l->convert(l, in, (uint8_t *)dst + (size_t)g * run_bytes, grouped);
  }
  const size_t done = (size_t)runs * run_bytes, total = (size_t)(n / l->block_elems) * l->block_bytes;
  if (src != dst)
    memmove((uint8_t *)dst + done, (const uint8_t *)src + done, total - done);
}

static void
dequant_grouped(HnType layout, const void *src, float *dst, int64_t n)
{
  const RegroupedLayout *l = find_layout(layout);
  const int64_t run_elems = 32 * HN_GROUP_BLOCKS, runs = n / run_elems;
  const size_t run_bytes = (size_t)run_blocks(l) * l->block_bytes;
  for (int64_t g = 0; g < runs; g++) {
    /* as large as a run of F32, the widest type hn_dequantize_row takes: gcc 12 checks the
     * inlined copy of its F32 case against this buffer */
    uint8_t blocks[32 * HN_GROUP_BLOCKS * sizeof(float)];
    l->convert(l, (const uint8_t *)src + (size_t)g * run_bytes, blocks, false);
    hn_dequantize_row(l->file_type, blocks, dst + g * run_elems, run_elems);
  }
  hn_dequantize_row(l->file_type, (const uint8_t *)src + (size_t)runs * run_bytes, dst + runs * run_elems,
                    n - runs * run_elems);
}

static float
dot_grouped(HnType layout, const void *row, const void *act, int64_t n)
{
  const RegroupedLayout *l = find_layout(layout);
  const uint8_t *y = act;
  const HnType act_type = hn_type_vec_dot_type(l->file_type);
  const int64_t per_run = run_blocks(l), nb = n / l->block_elems, runs = nb / per_run;
  const size_t act_run_bytes = hn_type_row_bytes(act_type, 32 * HN_GROUP_BLOCKS);
  const size_t run_bytes = (size_t)per_run * l->block_bytes;
  float sum = 0.0f;
  for (int64_t g = 0; g < runs; g++) {
    uint8_t blocks[MAX_RUN_BYTES];
    l->convert(l, (const uint8_t *)row + (size_t)g * run_bytes, blocks, false);
    sum = l->dot_from(sum, blocks, y + (size_t)g * act_run_bytes, per_run);
  }
  return l->dot_from(sum, (const uint8_t *)row + (size_t)runs * run_bytes, y + (size_t)runs * act_run_bytes,
                     nb - runs * per_run);
}

HnType
hn_type_file_layout(HnType type)
{
  const RegroupedLayout *l = find_layout(type);
  return l ? l->file_type : type;
}

HnType
hn_type_regrouped(HnType file_type)
{
  for (size_t i = 0; i < sizeof regrouped_layouts / sizeof regrouped_layouts[0]; i++)
    if (regrouped_layouts[i].file_type == file_type)
      return regrouped_layouts[i].layout;
  return HN_TYPE_COUNT;
}

int64_t
hn_type_group_elems(HnType layout)
{
  return find_layout(layout) ? 32 * HN_GROUP_BLOCKS : 0;
}

bool
hn_type_regroup_row(HnType layout, const void *src, void *dst, int64_t n)
{
  const RegroupedLayout *l = find_layout(layout);
  if (l)
    convert_row(l, src, dst, n, true);
  return l != NULL;
}

bool
hn_type_ungroup_row(HnType layout, const void *src, void *dst, int64_t n)
{
  const RegroupedLayout *l = find_layout(layout);
  if (l)
    convert_row(l, src, dst, n, false);
  return l != NULL;
}
