/* hn-simd-neon.c — ARM64 NEON kernels (decode dot products, activation quantizers,
 * attention over the F16 cache, the panel GEMM for prompt batches).  Compiled twice (see
 * engine/meson.build): once for baseline ARMv8-A, where 8-bit products go through
 * widening multiplies, and once with HN_NEON_DOTPROD and -march=armv8.2-a+dotprod,
 * where they use SDOT.  hn-cpu.c picks the table from the kernel's HWCAP bits, so one
 * binary runs on every ARM64 machine.
 *
 * Every integer product is signed × signed, so both variants compute the same sums: the
 * dot products decode the weights to signed 8-bit values (the zero point already taken
 * off); the panels keep unsigned codes below 64 (the same bytes read as signed) and take
 * the zero point off through the activations, as on x86.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-simd.h"
#include "hn-quants-blocks.h"

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#define QK 32

#ifdef HN_NEON_DOTPROD
#define FILL_NAME hn_simd_fill_neon_dotprod
#define FILL_LEVEL HN_SIMD_NEON_DOTPROD
#else
#define FILL_NAME hn_simd_fill_neon
#define FILL_LEVEL HN_SIMD_NEON
#endif

/* acc + the products of 16 signed bytes, summed four lanes' worth into each int32 lane
 * (which lane gets which product differs between the variants; callers only use the
 * total or add lanes element-wise across calls). */
static inline int32x4_t
dot16(int32x4_t acc, int8x16_t a, int8x16_t b)
{
#ifdef HN_NEON_DOTPROD
  return vdotq_s32(acc, a, b);
#else
  /* |a·b| <= 128·128 fits int16; the pairwise add widens before anything can overflow */
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
  return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

/* Σ a·b over 16 signed bytes. */
static inline int
dot16_sum(int8x16_t a, int8x16_t b)
{
  return vaddvq_s32(dot16(vdupq_n_s32(0), a, b));
}

static inline float
h2f(uint16_t h)
{
  return hn_fp16_to_fp32(h);
}

static inline float32x4_t
load_f16x4(const uint16_t *p)
{
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

/* 16 bits -> 16 bytes, 0xff where the bit is set (bit i -> byte i). */
static inline uint8x16_t
bits16_to_bytes(uint32_t bits)
{
  static const uint8_t bit_of_byte[8] = { 1, 2, 4, 8, 16, 32, 64, 128 };
  const uint8x8_t mask = vld1_u8(bit_of_byte);
  uint8x8_t lo = vtst_u8(vdup_n_u8((uint8_t)(bits & 0xff)), mask);
  uint8x8_t hi = vtst_u8(vdup_n_u8((uint8_t)((bits >> 8) & 0xff)), mask);
  return vcombine_u8(lo, hi);
}

/* ---- activation quantizers ----
 *
 * Bit-identical to the reference quantizers in hn-quants.c (tested byte for byte): the
 * scale comes from the same scalar float operations, x·(1/d) is the same IEEE product,
 * and the rounding is the reference's — FCVTAS (to nearest, ties away from zero) is
 * roundf() for Q8_0/Q8_1, FCVTNS (ties to even) is nearest_int() for Q8_K. */

static inline float
max_abs(const float *x, int n)
{
  float32x4_t m = vdupq_n_f32(0.0f);
  for (int j = 0; j < n; j += 4)
    m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + j)));
  return vmaxvq_f32(m);
}

/* 16 int32 (four vectors, element order) -> 16 saturated bytes in element order. */
static inline int8x16_t
narrow16(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d)
{
  int16x8_t ab = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
  int16x8_t cd = vcombine_s16(vqmovn_s32(c), vqmovn_s32(d));
  return vcombine_s8(vqmovn_s16(ab), vqmovn_s16(cd));
}

static inline int8x16_t
round_away16(const float *x, float32x4_t vid)
{
  return narrow16(vcvtaq_s32_f32(vmulq_f32(vld1q_f32(x), vid)), vcvtaq_s32_f32(vmulq_f32(vld1q_f32(x + 4), vid)),
                  vcvtaq_s32_f32(vmulq_f32(vld1q_f32(x + 8), vid)), vcvtaq_s32_f32(vmulq_f32(vld1q_f32(x + 12), vid)));
}

static inline float
quantize_block32(const float *x, int8_t *qs)
{
  const float amax = max_abs(x, QK);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float32x4_t vid = vdupq_n_f32(id);
  vst1q_s8(qs, round_away16(x, vid));
  vst1q_s8(qs + 16, round_away16(x + 16, vid));
  return d;
}

static void
quantize_q8_0(const float *src, void *dst, int64_t n)
{
  HnBlockQ8_0 *y = dst;
  for (int64_t i = 0; i < n / QK; i++)
    y[i].d = hn_fp32_to_fp16(quantize_block32(src + i * QK, y[i].qs));
}

static void
quantize_q8_1(const float *src, void *dst, int64_t n)
{
  HnBlockQ8_1 *y = dst;
  for (int64_t i = 0; i < n / QK; i++) {
    const float d = quantize_block32(src + i * QK, y[i].qs);
    const int sum = vaddlvq_s8(vld1q_s8(y[i].qs)) + vaddlvq_s8(vld1q_s8(y[i].qs + 16));
    y[i].d = hn_fp32_to_fp16(d);
    y[i].s = hn_fp32_to_fp16((float)sum * d);
  }
}

static void
quantize_q8_k(const float *src, void *dst, int64_t n)
{
  HnBlockQ8_K *y = dst;
  for (int64_t i = 0; i < n / HN_QK_K; i++) {
    const float *x = src + i * HN_QK_K;
    const float amax = max_abs(x, HN_QK_K);
    if (amax == 0.0f) {
      memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    /* the reference keeps the first element of largest magnitude, with its sign */
    int first = 0;
    while (fabsf(x[first]) != amax)
      first++;
    const float iscale = -127.0f / x[first];
    const float32x4_t vs = vdupq_n_f32(iscale);
    const int32x4_t hi = vdupq_n_s32(127);
    for (int j = 0; j < HN_QK_K; j += 16) {
      int32x4_t q[4];
      for (int k = 0; k < 4; k++)
        q[k] = vminq_s32(vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + j + 4 * k), vs)), hi);
      const int8x16_t bytes = narrow16(q[0], q[1], q[2], q[3]);
      vst1q_s8(y[i].qs + j, bytes);
      y[i].bsums[j / 16] = (int16_t)vaddlvq_s8(bytes);
    }
    y[i].d = 1.0f / iscale;
  }
}

static void
quantize_f16(const float *src, void *dst, int64_t n)
{
  uint16_t *y = dst;
  int64_t i = 0;
  /* FCVTN rounds to nearest even under the default FPCR, as hn_fp32_to_fp16 */
  for (; i + 4 <= n; i += 4)
    vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
  for (; i < n; i++)
    y[i] = hn_fp32_to_fp16(src[i]);
}

static void
round_f16(const float *x, float *y, int64_t n)
{
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    vst1q_f32(y + i, vcvt_f32_f16(vcvt_f16_f32(vld1q_f32(x + i))));
  for (; i < n; i++)
    y[i] = h2f(hn_fp32_to_fp16(x[i]));
}

/* ---- dot products of 32-element blocks with Q8_0 / Q8_1 activations ---- */

/* The 32 weights of a Q4_0 block as signed bytes: low nibbles are elements 0..15, high
 * nibbles 16..31, each minus 8. */
static inline void
decode_q4_0(const HnBlockQ4_0 *b, int8x16_t *q0, int8x16_t *q1)
{
  const uint8x16_t packed = vld1q_u8(b->qs);
  *q0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
  *q1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(packed, 4)), vdupq_n_s8(8));
}

/* Q5_0: the nibble plus the fifth bit from qh (bit j for element j), minus 16. */
static inline void
decode_q5_0(const HnBlockQ5_0 *b, int8x16_t *q0, int8x16_t *q1)
{
  uint32_t qh;
  memcpy(&qh, b->qh, 4);
  const uint8x16_t packed = vld1q_u8(b->qs);
  const uint8x16_t fifth = vdupq_n_u8(0x10);
  uint8x16_t lo = vorrq_u8(vandq_u8(packed, vdupq_n_u8(0x0f)), vandq_u8(bits16_to_bytes(qh & 0xffff), fifth));
  uint8x16_t hi = vorrq_u8(vshrq_n_u8(packed, 4), vandq_u8(bits16_to_bytes(qh >> 16), fifth));
  *q0 = vsubq_s8(vreinterpretq_s8_u8(lo), vdupq_n_s8(16));
  *q1 = vsubq_s8(vreinterpretq_s8_u8(hi), vdupq_n_s8(16));
}

static inline void
decode_q8_0(const HnBlockQ8_0 *b, int8x16_t *q0, int8x16_t *q1)
{
  *q0 = vld1q_s8(b->qs);
  *q1 = vld1q_s8(b->qs + 16);
}

/* Two blocks per iteration into two accumulators, so that consecutive blocks do not
 * wait on each other's multiply-add. */
#define DEFINE_VEC_DOT_32(NAME, WBLOCK, DECODE)                                            \
  static float NAME(int64_t n, const void *w, const void *a)                               \
  {                                                                                        \
    const WBLOCK *x = w;                                                                   \
    const HnBlockQ8_0 *y = a;                                                            \
    const int64_t nb = n / QK;                                                             \
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);                        \
    int64_t i = 0;                                                                         \
    for (; i + 1 < nb; i += 2) {                                                           \
      int8x16_t a0, a1, b0, b1;                                                            \
      DECODE(&x[i], &a0, &a1);                                                             \
      DECODE(&x[i + 1], &b0, &b1);                                                         \
      int32x4_t p0 = dot16(dot16(vdupq_n_s32(0), a0, vld1q_s8(y[i].qs)), a1, vld1q_s8(y[i].qs + 16)); \
      int32x4_t p1 = dot16(dot16(vdupq_n_s32(0), b0, vld1q_s8(y[i + 1].qs)), b1,          \
                           vld1q_s8(y[i + 1].qs + 16));                                    \
      acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(p0), h2f(x[i].d) * h2f(y[i].d));              \
      acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(p1), h2f(x[i + 1].d) * h2f(y[i + 1].d));      \
    }                                                                                      \
    for (; i < nb; i++) {                                                                  \
      int8x16_t a0, a1;                                                                    \
      DECODE(&x[i], &a0, &a1);                                                             \
      int32x4_t p0 = dot16(dot16(vdupq_n_s32(0), a0, vld1q_s8(y[i].qs)), a1, vld1q_s8(y[i].qs + 16)); \
      acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(p0), h2f(x[i].d) * h2f(y[i].d));              \
    }                                                                                      \
    return vaddvq_f32(vaddq_f32(acc0, acc1));                                              \
  }

DEFINE_VEC_DOT_32(vec_dot_q8_0, HnBlockQ8_0, decode_q8_0)
DEFINE_VEC_DOT_32(vec_dot_q4_0, HnBlockQ4_0, decode_q4_0)
DEFINE_VEC_DOT_32(vec_dot_q5_0, HnBlockQ5_0, decode_q5_0)

/* Q4_1 / Q5_1: unsigned codes (< 32, so they pass as signed bytes) times the Q8_1
 * activations, plus min · (d_y · Σ y) from the activation block. */
static float
vec_dot_q4_1(int64_t n, const void *w, const void *a)
{
  const HnBlockQ4_1 *x = w;
  const HnBlockQ8_1 *y = a;
  float32x4_t acc = vdupq_n_f32(0.0f);
  float summs = 0;
  for (int64_t i = 0; i < n / QK; i++) {
    summs += h2f(x[i].m) * h2f(y[i].s);
    const uint8x16_t packed = vld1q_u8(x[i].qs);
    int8x16_t q0 = vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0f)));
    int8x16_t q1 = vreinterpretq_s8_u8(vshrq_n_u8(packed, 4));
    int32x4_t p = dot16(dot16(vdupq_n_s32(0), q0, vld1q_s8(y[i].qs)), q1, vld1q_s8(y[i].qs + 16));
    acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), h2f(x[i].d) * h2f(y[i].d));
  }
  return vaddvq_f32(acc) + summs;
}

static float
vec_dot_q5_1(int64_t n, const void *w, const void *a)
{
  const HnBlockQ5_1 *x = w;
  const HnBlockQ8_1 *y = a;
  float32x4_t acc = vdupq_n_f32(0.0f);
  float summs = 0;
  const uint8x16_t fifth = vdupq_n_u8(0x10);
  for (int64_t i = 0; i < n / QK; i++) {
    summs += h2f(x[i].m) * h2f(y[i].s);
    uint32_t qh;
    memcpy(&qh, x[i].qh, 4);
    const uint8x16_t packed = vld1q_u8(x[i].qs);
    uint8x16_t lo = vorrq_u8(vandq_u8(packed, vdupq_n_u8(0x0f)), vandq_u8(bits16_to_bytes(qh & 0xffff), fifth));
    uint8x16_t hi = vorrq_u8(vshrq_n_u8(packed, 4), vandq_u8(bits16_to_bytes(qh >> 16), fifth));
    int32x4_t p = dot16(dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(lo), vld1q_s8(y[i].qs)), vreinterpretq_s8_u8(hi),
                        vld1q_s8(y[i].qs + 16));
    acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), h2f(x[i].d) * h2f(y[i].d));
  }
  return vaddvq_f32(acc) + summs;
}

/* ---- k-quants with Q8_K activations ---- */

/* Σ over one 32-run of weights with the scales of its two 16-element groups. */
static inline int
dot32_scaled(int8x16_t q0, int8x16_t q1, const int8_t *y, int scale0, int scale1)
{
  return scale0 * dot16_sum(q0, vld1q_s8(y)) + scale1 * dot16_sum(q1, vld1q_s8(y + 16));
}

static float
vec_dot_q4_k(int64_t n, const void *w, const void *a)
{
  const HnBlockQ4_K *x = w;
  const HnBlockQ8_K *y = a;
  const uint8x16_t low_mask = vdupq_n_u8(0x0f);
  float sum = 0;
  for (int64_t i = 0; i < n / HN_QK_K; i++) {
    uint8_t scales[8], mins[8];
    for (int j = 0; j < 8; j++)
      hn_q4k_scale_min(j, x[i].scales, &scales[j], &mins[j]);
    int min_sum = 0;
    for (int j = 0; j < 8; j++)
      min_sum += mins[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    /* sub-block 2j is the low nibbles of 32 bytes, 2j+1 their high nibbles */
    int32x4_t acc = vdupq_n_s32(0);
    for (int j = 0; j < 4; j++) {
      const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * j), b1 = vld1q_u8(x[i].qs + 32 * j + 16);
      const int8_t *q8 = y[i].qs + 64 * j;
      int32x4_t lo = dot16(dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(b0, low_mask)), vld1q_s8(q8)),
                           vreinterpretq_s8_u8(vandq_u8(b1, low_mask)), vld1q_s8(q8 + 16));
      int32x4_t hi = dot16(dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vshrq_n_u8(b0, 4)), vld1q_s8(q8 + 32)),
                           vreinterpretq_s8_u8(vshrq_n_u8(b1, 4)), vld1q_s8(q8 + 48));
      acc = vmlaq_n_s32(acc, lo, scales[2 * j]);
      acc = vmlaq_n_s32(acc, hi, scales[2 * j + 1]);
    }
    sum += y[i].d * h2f(x[i].d) * (float)vaddvq_s32(acc) - y[i].d * h2f(x[i].dmin) * (float)min_sum;
  }
  return sum;
}

static float
vec_dot_q5_k(int64_t n, const void *w, const void *a)
{
  const HnBlockQ5_K *x = w;
  const HnBlockQ8_K *y = a;
  const uint8x16_t low_mask = vdupq_n_u8(0x0f), one = vdupq_n_u8(1);
  float sum = 0;
  for (int64_t i = 0; i < n / HN_QK_K; i++) {
    uint8_t scales[8], mins[8];
    for (int j = 0; j < 8; j++)
      hn_q4k_scale_min(j, x[i].scales, &scales[j], &mins[j]);
    int min_sum = 0;
    for (int j = 0; j < 8; j++)
      min_sum += mins[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    const uint8x16_t qh0 = vld1q_u8(x[i].qh), qh1 = vld1q_u8(x[i].qh + 16);
    int32x4_t acc = vdupq_n_s32(0);
    for (int j = 0; j < 4; j++) {
      /* bit 2j of qh[l] is the fifth bit of element 64j+l, bit 2j+1 that of 64j+32+l */
      const int8x16_t sh_lo = vdupq_n_s8((int8_t)(-2 * j)), sh_hi = vdupq_n_s8((int8_t)(-2 * j - 1));
      const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * j), b1 = vld1q_u8(x[i].qs + 32 * j + 16);
      uint8x16_t l0 = vorrq_u8(vandq_u8(b0, low_mask), vshlq_n_u8(vandq_u8(vshlq_u8(qh0, sh_lo), one), 4));
      uint8x16_t l1 = vorrq_u8(vandq_u8(b1, low_mask), vshlq_n_u8(vandq_u8(vshlq_u8(qh1, sh_lo), one), 4));
      uint8x16_t h0 = vorrq_u8(vshrq_n_u8(b0, 4), vshlq_n_u8(vandq_u8(vshlq_u8(qh0, sh_hi), one), 4));
      uint8x16_t h1 = vorrq_u8(vshrq_n_u8(b1, 4), vshlq_n_u8(vandq_u8(vshlq_u8(qh1, sh_hi), one), 4));
      const int8_t *q8 = y[i].qs + 64 * j;
      int32x4_t lo = dot16(dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(l0), vld1q_s8(q8)), vreinterpretq_s8_u8(l1),
                           vld1q_s8(q8 + 16));
      int32x4_t hi = dot16(dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(h0), vld1q_s8(q8 + 32)),
                           vreinterpretq_s8_u8(h1), vld1q_s8(q8 + 48));
      acc = vmlaq_n_s32(acc, lo, scales[2 * j]);
      acc = vmlaq_n_s32(acc, hi, scales[2 * j + 1]);
    }
    sum += y[i].d * h2f(x[i].d) * (float)vaddvq_s32(acc) - y[i].d * h2f(x[i].dmin) * (float)min_sum;
  }
  return sum;
}

static float
vec_dot_q6_k(int64_t n, const void *w, const void *a)
{
  const HnBlockQ6_K *x = w;
  const HnBlockQ8_K *y = a;
  const uint8x16_t low_mask = vdupq_n_u8(0x0f), two_bits = vdupq_n_u8(0x03);
  const int8x16_t offset = vdupq_n_s8(32);
  float sum = 0;
  for (int64_t i = 0; i < n / HN_QK_K; i++) {
    int total = 0;
    for (int half = 0; half < 2; half++) {
      const uint8_t *ql = x[i].ql + 64 * half;
      const uint8_t *qh = x[i].qh + 32 * half;
      const int8_t *q8 = y[i].qs + 128 * half;
      const int8_t *sc = x[i].scales + 8 * half;
      for (int part = 0; part < 2; part++) {
        /* 16 of the 32 columns at a time: element l of run k lives in ql[l] (k even,
         * low nibble; k odd uses ql[32+l]), high nibble for k >= 2, and 2 bits of qh[l] */
        const uint8x16_t l0 = vld1q_u8(ql + 16 * part), l1 = vld1q_u8(ql + 32 + 16 * part);
        const uint8x16_t h = vld1q_u8(qh + 16 * part);
        uint8x16_t u[4];
        u[0] = vorrq_u8(vandq_u8(l0, low_mask), vshlq_n_u8(vandq_u8(h, two_bits), 4));
        u[1] = vorrq_u8(vandq_u8(l1, low_mask), vshlq_n_u8(vandq_u8(vshrq_n_u8(h, 2), two_bits), 4));
        u[2] = vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h, 4), two_bits), 4));
        u[3] = vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(h, 6), 4));
        for (int k = 0; k < 4; k++) {
          const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(u[k]), offset);
          total += sc[2 * k + part] * dot16_sum(q, vld1q_s8(q8 + 32 * k + 16 * part));
        }
      }
    }
    sum += y[i].d * h2f(x[i].d) * (float)total;
  }
  return sum;
}

static float
vec_dot_q2_k(int64_t n, const void *w, const void *a)
{
  const HnBlockQ2_K *x = w;
  const HnBlockQ8_K *y = a;
  const uint8x16_t two_bits = vdupq_n_u8(0x03);
  float sum = 0;
  for (int64_t i = 0; i < n / HN_QK_K; i++) {
    int min_sum = 0;
    for (int g = 0; g < 16; g++)
      min_sum += (x[i].scales[g] >> 4) * y[i].bsums[g];
    int total = 0;
    for (int half = 0; half < 2; half++) {
      const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * half), b1 = vld1q_u8(x[i].qs + 32 * half + 16);
      const uint8_t *sc = x[i].scales + 8 * half;
      for (int j = 0; j < 4; j++) {
        const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * j));
        int8x16_t q0 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b0, shift), two_bits));
        int8x16_t q1 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b1, shift), two_bits));
        total += dot32_scaled(q0, q1, y[i].qs + 128 * half + 32 * j, sc[2 * j] & 0xF, sc[2 * j + 1] & 0xF);
      }
    }
    sum += y[i].d * h2f(x[i].d) * (float)total - y[i].d * h2f(x[i].dmin) * (float)min_sum;
  }
  return sum;
}

static void
unpack_scales_q3_k(const uint8_t *packed, int8_t scales[16])
{
  uint32_t aux[4];
  memcpy(aux, packed, 12);
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  memcpy(scales, aux, 16);
  for (int g = 0; g < 16; g++)
    scales[g] = (int8_t)(scales[g] - 32);
}

static float
vec_dot_q3_k(int64_t n, const void *w, const void *a)
{
  const HnBlockQ3_K *x = w;
  const HnBlockQ8_K *y = a;
  const uint8x16_t two_bits = vdupq_n_u8(0x03), one = vdupq_n_u8(1);
  const int8x16_t four = vdupq_n_s8(4);
  float sum = 0;
  for (int64_t i = 0; i < n / HN_QK_K; i++) {
    int8_t scales[16];
    unpack_scales_q3_k(x[i].scales, scales);
    const uint8x16_t m0 = vld1q_u8(x[i].hmask), m1 = vld1q_u8(x[i].hmask + 16);
    int total = 0;
    for (int half = 0; half < 2; half++) {
      const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * half), b1 = vld1q_u8(x[i].qs + 32 * half + 16);
      for (int j = 0; j < 4; j++) {
        /* value = 2 low bits + 4 · (high-mask bit) - 4 */
        const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * j));
        const int8x16_t hshift = vdupq_n_s8((int8_t)(-(4 * half + j)));
        uint8x16_t u0 = vorrq_u8(vandq_u8(vshlq_u8(b0, shift), two_bits), vshlq_n_u8(vandq_u8(vshlq_u8(m0, hshift), one), 2));
        uint8x16_t u1 = vorrq_u8(vandq_u8(vshlq_u8(b1, shift), two_bits), vshlq_n_u8(vandq_u8(vshlq_u8(m1, hshift), one), 2));
        const int8_t *sc = scales + 8 * half + 2 * j;
        total += dot32_scaled(vsubq_s8(vreinterpretq_s8_u8(u0), four), vsubq_s8(vreinterpretq_s8_u8(u1), four),
                              y[i].qs + 128 * half + 32 * j, sc[0], sc[1]);
      }
    }
    sum += y[i].d * h2f(x[i].d) * (float)total;
  }
  return sum;
}

/* ---- float rows ---- */

static float
vec_dot_f16(int64_t n, const void *w, const void *a)
{
  const uint16_t *x = w;
  const uint16_t *y = a;
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc0 = vfmaq_f32(acc0, load_f16x4(x + i), load_f16x4(y + i));
    acc1 = vfmaq_f32(acc1, load_f16x4(x + i + 4), load_f16x4(y + i + 4));
  }
  float sum = vaddvq_f32(vaddq_f32(acc0, acc1));
  for (; i < n; i++)
    sum += h2f(x[i]) * h2f(y[i]);
  return sum;
}

/* BF16 is the high half of an F32: widening by 16 bits is the exact conversion. */
static inline float32x4_t
load_bf16x4(const uint16_t *p)
{
  return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

static float
vec_dot_bf16(int64_t n, const void *w, const void *a)
{
  const uint16_t *x = w;
  const uint16_t *y = a;
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc0 = vfmaq_f32(acc0, load_bf16x4(x + i), load_bf16x4(y + i));
    acc1 = vfmaq_f32(acc1, load_bf16x4(x + i + 4), load_bf16x4(y + i + 4));
  }
  float sum = vaddvq_f32(vaddq_f32(acc0, acc1));
  for (; i < n; i++)
    sum += hn_bf16_to_fp32(x[i]) * hn_bf16_to_fp32(y[i]);
  return sum;
}

static float
vec_dot_f32(int64_t n, const void *w, const void *a)
{
  const float *x = w;
  const float *y = a;
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc0 = vfmaq_f32(acc0, vld1q_f32(x + i), vld1q_f32(y + i));
    acc1 = vfmaq_f32(acc1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
  }
  float sum = vaddvq_f32(vaddq_f32(acc0, acc1));
  for (; i < n; i++)
    sum += x[i] * y[i];
  return sum;
}

/* ---- attention ---- */

/* e^x for x <= 0: x = n·ln2 + r with |r| <= ln2/2, a degree-7 Taylor polynomial for e^r,
 * times 2^n built in the exponent bits; below -87 the result is (almost) zero instead of
 * a denormal.  The same construction as the x86 files, so all levels agree closely. */
static inline float32x4_t
exp_neg_neon(float32x4_t x)
{
  x = vmaxq_f32(x, vdupq_n_f32(-87.0f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693145751953125f));
  r = vfmsq_f32(r, n, vdupq_n_f32(1.428606765330187e-06f));
  float32x4_t p = vdupq_n_f32(1.0f / 5040.0f);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 720.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  const int32x4_t bits = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  return vmulq_f32(p, vreinterpretq_f32_s32(bits));
}

/* Lane i of the result = the sum of the lanes of a[i], for 4 vectors: two pairwise adds. */
static inline float32x4_t
sums4_neon(const float32x4_t *a)
{
  return vpaddq_f32(vpaddq_f32(a[0], a[1]), vpaddq_f32(a[2], a[3]));
}

/* Σ s[0..n) in double: the softmax denominator, summed in double like the reference's. */
static inline double
sum_as_double_neon(const float *s, int n)
{
  float64x2_t a0 = vdupq_n_f64(0.0), a1 = vdupq_n_f64(0.0);
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t x = vld1q_f32(s + i);
    a0 = vaddq_f64(a0, vcvt_f64_f32(vget_low_f32(x)));
    a1 = vaddq_f64(a1, vcvt_high_f64_f32(x));
  }
  double sum = vaddvq_f64(vaddq_f64(a0, a1));
  for (; i < n; i++)
    sum += s[i];
  return sum;
}

#define VEC float32x4_t
#define VLEN 4
#define VZERO() vdupq_n_f32(0.0f)
#define VSET1(x) vdupq_n_f32(x)
#define VLOAD(p) vld1q_f32(p)
#define VSTORE(p, v) vst1q_f32(p, v)
#define VLOAD_H(p) load_f16x4(p)
#define VROUND_H(v) vcvt_f32_f16(vcvt_f16_f32(v))
#define VFMADD(a, b, c) vfmaq_f32(c, a, b)
#define VMUL(a, b) vmulq_f32(a, b)
#define VADD(a, b) vaddq_f32(a, b)
#define VHSUM(v) vaddvq_f32(v)
#define VSUB(a, b) vsubq_f32(a, b)
#define VEXP(v) exp_neg_neon(v)
#define VHMAX(v) vmaxvq_f32(v)
#define VSUMS(a) sums4_neon(a)
#define VMAX(a, b) vmaxnmq_f32(a, b)
#define VSUM_DOUBLE(s, n) sum_as_double_neon(s, n)
#define ATTN_ACC_VECS 16
#define ATTN_NAME attn_neon
#define ATTN_BODY attn_body_neon
#include "hn-simd-attn.h"

/* ---- panel GEMM for prompt processing ----
 *
 * The panels of hn-simd-panel.h, packed by the same code as on x86 (unsigned codes with
 * the type's zero point, which the activation's -offset · Σq seeding the integer sum
 * takes off; Q8_0 packed signed): a panel holds 16 weight rows; per 32-element block,
 * eight 64-byte vectors whose 32-bit lane r carries four consecutive codes of row r,
 * then the 16 rows' scales and mins.  A 128-bit register holds 4 rows' lanes, so each
 * panel is walked once per group of 4 rows, with up to 8 tokens (HnActBlock records) per
 * walk: per block and token, eight products of one code vector with four activation
 * bytes broadcast to every lane — SDOT where the processor has it, otherwise widening
 * multiplies whose pairwise sums keep each row's four products in its own lane.  Codes
 * other than Q8_0's are below 64, so they are the same bytes read as signed.  The float
 * work per block is one convert and one multiply-add per token and scale set for 4 rows,
 * plus one multiply-add per set of mins. */
#include "hn-simd-panel.h"

/* Writes the 32 codes of each of 16 rows (tmp[r], 32 bytes apart) in lane order: a 4 × 4
 * transpose of 32-bit words per group of 4 rows and half block. */
static inline void
transpose_codes(const uint8_t tmp[HN_PANEL_ROWS][32], uint8_t codes[8][64])
{
  for (int g = 0; g < 4; g++) {
    for (int half = 0; half < 2; half++) {
      uint32x4_t w[4];
      for (int i = 0; i < 4; i++)
        w[i] = vreinterpretq_u32_u8(vld1q_u8(tmp[4 * g + i] + 16 * half));
      /* {a0 b0 a2 b2}, {a1 b1 a3 b3}, {c0 d0 c2 d2}, {c1 d1 c3 d3} */
      const uint64x2_t ab0 = vreinterpretq_u64_u32(vtrn1q_u32(w[0], w[1]));
      const uint64x2_t ab1 = vreinterpretq_u64_u32(vtrn2q_u32(w[0], w[1]));
      const uint64x2_t cd0 = vreinterpretq_u64_u32(vtrn1q_u32(w[2], w[3]));
      const uint64x2_t cd1 = vreinterpretq_u64_u32(vtrn2q_u32(w[2], w[3]));
      uint8_t *dst = codes[4 * half] + 16 * g;
      vst1q_u8(dst, vreinterpretq_u8_u64(vtrn1q_u64(ab0, cd0)));
      vst1q_u8(dst + 64, vreinterpretq_u8_u64(vtrn1q_u64(ab1, cd1)));
      vst1q_u8(dst + 128, vreinterpretq_u8_u64(vtrn2q_u64(ab0, cd0)));
      vst1q_u8(dst + 192, vreinterpretq_u8_u64(vtrn2q_u64(ab1, cd1)));
    }
  }
}

/* acc + per lane the product of the lane's four weights with the four bytes of a4. */
static inline int32x4_t
dot_rows4(int32x4_t acc, int8x16_t codes, int8x16_t a4)
{
#ifdef HN_NEON_DOTPROD
  return vdotq_s32(acc, codes, a4);
#else
  /* bytes 0-7 hold lanes 0-1, bytes 8-15 lanes 2-3: two pairwise widenings each
   * (|w · a| <= 128 · 128 fits int16) */
  const int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(codes), vget_low_s8(a4)));
  const int32x4_t hi = vpaddlq_s16(vmull_high_s8(codes, a4));
  return vaddq_s32(acc, vpaddq_s32(lo, hi));
#endif
}

static inline int8x16_t
broadcast4(const int32_t *q4)
{
  return vreinterpretq_s8_s32(vld1q_dup_s32(q4));
}

/* Stores the first `live` lanes of v (none when live <= 0). */
static inline void
store_rows4(float *dst, float32x4_t v, int live)
{
  if (live >= 4) {
    vst1q_f32(dst, v);
  } else if (live > 0) {
    float lanes[4];
    vst1q_f32(lanes, v);
    memcpy(dst, lanes, sizeof(float) * (size_t)live);
  }
}

/* The integer panel kernels, one per shape as on x86.  HALVES: 1 scale per 32 codes, or
 * 2 (one per 16).  MINS: 0, 1 per 32 elements (times the activation's d · Σq), or 2 per
 * 16 (Q2_K, with BLOCK = PanelBlockMin16). */
#define DEFINE_PANEL_GEMM_NEON(NAME, BLOCK, HALVES, MINS)                                            \
  static inline __attribute__((always_inline)) void NAME##_cols(                                    \
    const BLOCK *pb, int64_t n_blocks, int n_rows, const HnActBlock *act, size_t act_stride,       \
    const int n_cols, float *out, size_t out_stride)                                               \
  {                                                                                                \
    for (int v = 0; v < 4 && 4 * v < n_rows; v++) {                                                \
      float32x4_t acc[HN_PANEL_COLS];                                                              \
      for (int c = 0; c < n_cols; c++)                                                             \
        acc[c] = vdupq_n_f32(0.0f);                                                                \
      const BLOCK *p = pb;                                                                         \
      for (int64_t b = 0; b < n_blocks; b++, p++) {                                                \
        int8x16_t codes[8];                                                                        \
        for (int j = 0; j < 8; j++)                                                                \
          codes[j] = vreinterpretq_s8_u8(vld1q_u8(p->codes[j] + 16 * v));                          \
        const float32x4_t s0 = vld1q_f32(p->scale[0] + 4 * v);                                     \
        const float32x4_t s1 = HALVES == 2 ? vld1q_f32(p->scale[1] + 4 * v) : s0;                  \
        const float32x4_t nm0 = MINS ? vld1q_f32(p->neg_min[0] + 4 * v) : s0;                      \
        const float32x4_t nm1 = MINS == 2 ? vld1q_f32(p->neg_min[MINS == 2 ? 1 : 0] + 4 * v) : s0; \
        for (int c = 0; c < n_cols; c++) {                                                         \
          const HnActBlock *a = act + (size_t)c * act_stride + b;                                  \
          if (HALVES == 1) {                                                                       \
            int32x4_t i0 = vdupq_n_s32(a->off_sum32), i1 = vdupq_n_s32(0);                         \
            for (int j = 0; j < 4; j++) {                                                          \
              i0 = dot_rows4(i0, codes[j], broadcast4(&a->q4[j]));                                 \
              i1 = dot_rows4(i1, codes[j + 4], broadcast4(&a->q4[j + 4]));                         \
            }                                                                                      \
            acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(vaddq_s32(i0, i1)), vmulq_n_f32(s0, a->d));   \
          } else {                                                                                 \
            int32x4_t i0 = vdupq_n_s32(a->off_sum[0]), i1 = vdupq_n_s32(a->off_sum[1]);            \
            for (int j = 0; j < 4; j++) {                                                          \
              i0 = dot_rows4(i0, codes[j], broadcast4(&a->q4[j]));                                 \
              i1 = dot_rows4(i1, codes[j + 4], broadcast4(&a->q4[j + 4]));                         \
            }                                                                                      \
            acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(i0), vmulq_n_f32(s0, a->d));                  \
            acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(i1), vmulq_n_f32(s1, a->d));                  \
          }                                                                                        \
          if (MINS == 1)                                                                           \
            acc[c] = vfmaq_n_f32(acc[c], nm0, a->dsum);                                            \
          if (MINS == 2) {                                                                         \
            acc[c] = vfmaq_n_f32(acc[c], nm0, a->dsum_half[0]);                                    \
            acc[c] = vfmaq_n_f32(acc[c], nm1, a->dsum_half[1]);                                    \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
      for (int c = 0; c < n_cols; c++)                                                             \
        store_rows4(out + (size_t)c * out_stride + 4 * v, acc[c], n_rows - 4 * v);                 \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  static void NAME(const void *panel, int64_t n, int n_rows, const HnActBlock *act, size_t act_stride, \
                   int n_cols, float *out, size_t out_stride)                                      \
  {                                                                                                \
    HN_PANEL_DISPATCH_COLS(NAME##_cols, (const BLOCK *)panel, n / 32, n_rows, act, act_stride, n_cols, out, out_stride);\
  }

DEFINE_PANEL_GEMM_NEON(panel_gemm_single, PanelBlock, 1, 0)
DEFINE_PANEL_GEMM_NEON(panel_gemm_min, PanelBlock, 1, 1)
DEFINE_PANEL_GEMM_NEON(panel_gemm_halves, PanelBlock, 2, 0)
DEFINE_PANEL_GEMM_NEON(panel_gemm_halves_min16, PanelBlockMin16, 2, 2)

#ifdef HN_NEON_DOTPROD
/* With I8MM (SMMLA, compiled for it here and chosen at run time from HWCAP2), the
 * single-scale panels multiply 2 rows × 8 codes with 2 tokens × 8 activation bytes per
 * instruction, giving a 2 × 2 block of sums: half the multiply instructions of SDOT
 * for the same products.  The panel layout stays the same: of two consecutive code
 * vectors (codes 4j..4j+3 and 4j+4..4j+7 of 4 rows), the low and high 32-bit zips are
 * the 8 consecutive codes of rows 0, 1 and of rows 2, 3 — done once per block and
 * shared by the tokens.  Sums and scales are kept as {r0 t0, r0 t1, r1 t0, r1 t1} and
 * unzipped into rows per token at the store. */
#define I8MM_ATTR __attribute__((target("+i8mm")))

#define DEFINE_PANEL_GEMM_I8MM(NAME, MINS)                                                           \
  static inline __attribute__((always_inline)) I8MM_ATTR void NAME##_cols(                          \
    const PanelBlock *pb, int64_t n_blocks, int n_rows, const HnActBlock *act, size_t act_stride,  \
    const int n_cols, float *out, size_t out_stride)                                               \
  {                                                                                                \
    const int n_pairs = (n_cols + 1) / 2;                                                          \
    for (int v = 0; v < 4 && 4 * v < n_rows; v++) {                                                \
      /* acc01[t]: rows 4v, 4v+1 × tokens 2t, 2t+1; acc23[t]: rows 4v+2, 4v+3 */                   \
      float32x4_t acc01[HN_PANEL_COLS / 2], acc23[HN_PANEL_COLS / 2];                              \
      for (int t = 0; t < n_pairs; t++)                                                            \
        acc01[t] = acc23[t] = vdupq_n_f32(0.0f);                                                   \
      const PanelBlock *p = pb;                                                                    \
      for (int64_t b = 0; b < n_blocks; b++, p++) {                                                \
        int8x16_t w01[4], w23[4];                                                                  \
        for (int m = 0; m < 4; m++) {                                                              \
          const uint32x4_t c0 = vreinterpretq_u32_u8(vld1q_u8(p->codes[2 * m] + 16 * v));         \
          const uint32x4_t c1 = vreinterpretq_u32_u8(vld1q_u8(p->codes[2 * m + 1] + 16 * v));     \
          w01[m] = vreinterpretq_s8_u32(vzip1q_u32(c0, c1));                                       \
          w23[m] = vreinterpretq_s8_u32(vzip2q_u32(c0, c1));                                       \
        }                                                                                          \
        const float32x4_t s = vld1q_f32(p->scale[0] + 4 * v);                                      \
        const float32x4_t s01 = vzip1q_f32(s, s), s23 = vzip2q_f32(s, s);                          \
        const float32x4_t nm = MINS ? vld1q_f32(p->neg_min[0] + 4 * v) : s;                        \
        const float32x4_t nm01 = vzip1q_f32(nm, nm), nm23 = vzip2q_f32(nm, nm);                    \
        for (int t = 0; t < n_pairs; t++) {                                                        \
          /* an odd last token is paired with itself; its twin is not stored */                    \
          const HnActBlock *a0 = act + (size_t)(2 * t) * act_stride + b;                           \
          const HnActBlock *a1 = 2 * t + 1 < n_cols ? a0 + act_stride : a0;                        \
          const int32x2_t off = vset_lane_s32(a1->off_sum32, vdup_n_s32(a0->off_sum32), 1);        \
          int32x4_t i01 = vcombine_s32(off, off), i23 = i01;                                       \
          for (int m = 0; m < 4; m++) {                                                            \
            const int8x16_t x = vcombine_s8(vld1_s8(a0->q + 8 * m), vld1_s8(a1->q + 8 * m));       \
            i01 = vmmlaq_s32(i01, w01[m], x);                                                      \
            i23 = vmmlaq_s32(i23, w23[m], x);                                                      \
          }                                                                                        \
          const float32x2_t d2 = vset_lane_f32(a1->d, vdup_n_f32(a0->d), 1);                       \
          const float32x4_t d = vcombine_f32(d2, d2);                                              \
          acc01[t] = vfmaq_f32(acc01[t], vcvtq_f32_s32(i01), vmulq_f32(s01, d));                   \
          acc23[t] = vfmaq_f32(acc23[t], vcvtq_f32_s32(i23), vmulq_f32(s23, d));                   \
          if (MINS) {                                                                              \
            const float32x2_t ds2 = vset_lane_f32(a1->dsum, vdup_n_f32(a0->dsum), 1);              \
            const float32x4_t ds = vcombine_f32(ds2, ds2);                                         \
            acc01[t] = vfmaq_f32(acc01[t], nm01, ds);                                              \
            acc23[t] = vfmaq_f32(acc23[t], nm23, ds);                                              \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
      for (int t = 0; t < n_pairs; t++) {                                                          \
        float *dst = out + (size_t)(2 * t) * out_stride + 4 * v;                                   \
        store_rows4(dst, vuzp1q_f32(acc01[t], acc23[t]), n_rows - 4 * v);                          \
        if (2 * t + 1 < n_cols)                                                                    \
          store_rows4(dst + out_stride, vuzp2q_f32(acc01[t], acc23[t]), n_rows - 4 * v);           \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  static I8MM_ATTR void NAME(const void *panel, int64_t n, int n_rows, const HnActBlock *act,      \
                             size_t act_stride, int n_cols, float *out, size_t out_stride)         \
  {                                                                                                \
    HN_PANEL_DISPATCH_COLS(NAME##_cols, (const PanelBlock *)panel, n / 32, n_rows, act, act_stride, n_cols, out, out_stride);\
  }

DEFINE_PANEL_GEMM_I8MM(panel_gemm_single_i8mm, 0)
DEFINE_PANEL_GEMM_I8MM(panel_gemm_min_i8mm, 1)
#endif

/* F16 and BF16 panels (element-major 16-bit values): 8 rows per walk, two 4-row FMAs per
 * element and token against the token's f32 activation (already rounded as the
 * reference rounds it, so the products are the reference's). */
#define DEFINE_PANEL_GEMM_FLOAT_NEON(NAME, LOAD4)                                                    \
  static inline __attribute__((always_inline)) void NAME##_cols(                                    \
    const uint16_t *panel, int64_t n, int n_rows, const float *act, size_t act_stride, const int n_cols, \
    float *out, size_t out_stride)                                                                 \
  {                                                                                                \
    for (int h = 0; h < 2 && 8 * h < n_rows; h++) {                                                \
      float32x4_t acc0[HN_PANEL_COLS], acc1[HN_PANEL_COLS];                                        \
      for (int c = 0; c < n_cols; c++)                                                             \
        acc0[c] = acc1[c] = vdupq_n_f32(0.0f);                                                     \
      for (int64_t i = 0; i < n; i++) {                                                            \
        const float32x4_t w0 = LOAD4(panel + i * HN_PANEL_ROWS + 8 * h);                           \
        const float32x4_t w1 = LOAD4(panel + i * HN_PANEL_ROWS + 8 * h + 4);                       \
        for (int c = 0; c < n_cols; c++) {                                                         \
          const float x = act[(size_t)c * act_stride + (size_t)i];                                 \
          acc0[c] = vfmaq_n_f32(acc0[c], w0, x);                                                   \
          acc1[c] = vfmaq_n_f32(acc1[c], w1, x);                                                   \
        }                                                                                          \
      }                                                                                            \
      for (int c = 0; c < n_cols; c++) {                                                           \
        float *dst = out + (size_t)c * out_stride + 8 * h;                                         \
        store_rows4(dst, acc0[c], n_rows - 8 * h);                                                 \
        store_rows4(dst + 4, acc1[c], n_rows - 8 * h - 4);                                         \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  static void NAME(const void *panel, int64_t n, int n_rows, const float *act, size_t act_stride,  \
                   int n_cols, float *out, size_t out_stride)                                      \
  {                                                                                                \
    HN_PANEL_DISPATCH_COLS(NAME##_cols, (const uint16_t *)panel, n, n_rows, act, act_stride, n_cols, out, out_stride);\
  }

DEFINE_PANEL_GEMM_FLOAT_NEON(panel_gemm_f16, load_f16x4)
DEFINE_PANEL_GEMM_FLOAT_NEON(panel_gemm_bf16, load_bf16x4)

/* BF16 rounding exactly as hn_fp32_to_bf16: to nearest even on the 16 dropped bits, NaNs
 * truncated and made quiet; the BF16 value ends up in the high half of each lane. */
static inline uint32x4_t
bf16_round_bits(float32x4_t x)
{
  const uint32x4_t b = vreinterpretq_u32_f32(x);
  const uint32x4_t lsb = vandq_u32(vshrq_n_u32(b, 16), vdupq_n_u32(1));
  const uint32x4_t rounded = vaddq_u32(b, vaddq_u32(lsb, vdupq_n_u32(0x7fff)));
  const uint32x4_t nan = vcgtq_u32(vandq_u32(b, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
  const uint32x4_t quiet = vorrq_u32(b, vdupq_n_u32(0x00400000u));
  return vbslq_u32(nan, quiet, rounded);
}

static void
round_bf16(const float *x, float *y, int64_t n)
{
  const uint32x4_t keep_high = vdupq_n_u32(0xffff0000u);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    vst1q_f32(y + i, vreinterpretq_f32_u32(vandq_u32(bf16_round_bits(vld1q_f32(x + i)), keep_high)));
  for (; i < n; i++)
    y[i] = hn_bf16_to_fp32(hn_fp32_to_bf16(x[i]));
}

/* BF16 activations for BF16 weights' dot products, bit-identical to hn_fp32_to_bf16 */
static void
quantize_bf16(const float *src, void *dst, int64_t n)
{
  uint16_t *y = dst;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    vst1_u16(y + i, vshrn_n_u32(bf16_round_bits(vld1q_f32(src + i)), 16));
  for (; i < n; i++)
    y[i] = hn_fp32_to_bf16(src[i]);
}

#ifdef HN_NEON_DOTPROD
void
FILL_NAME(HnSimdKernels *k, bool i8mm)
#else
void
FILL_NAME(HnSimdKernels *k)
#endif
{
  k->level = FILL_LEVEL;
#ifdef HN_NEON_DOTPROD
  k->name = i8mm ? "NEON (DotProd, I8MM)" : "NEON (DotProd)";
#else
  k->name = "NEON";
#endif
  k->attn = attn_neon;
  k->attn_multiple = 4;
  k->round_f16 = round_f16;
  k->round_bf16 = round_bf16;
  k->quantize[HN_TYPE_Q8_0] = quantize_q8_0;
  k->quantize[HN_TYPE_Q8_1] = quantize_q8_1;
  k->quantize[HN_TYPE_Q8_K] = quantize_q8_k;
  k->quantize[HN_TYPE_F16] = quantize_f16;
  k->quantize[HN_TYPE_BF16] = quantize_bf16;
  k->vec_dot[HN_TYPE_F32] = vec_dot_f32;
  k->vec_dot[HN_TYPE_F16] = vec_dot_f16;
  k->vec_dot[HN_TYPE_BF16] = vec_dot_bf16;
  k->vec_dot[HN_TYPE_Q8_0] = vec_dot_q8_0;
  k->vec_dot[HN_TYPE_Q4_0] = vec_dot_q4_0;
  k->vec_dot[HN_TYPE_Q4_1] = vec_dot_q4_1;
  k->vec_dot[HN_TYPE_Q5_0] = vec_dot_q5_0;
  k->vec_dot[HN_TYPE_Q5_1] = vec_dot_q5_1;
  k->vec_dot[HN_TYPE_Q2_K] = vec_dot_q2_k;
  k->vec_dot[HN_TYPE_Q3_K] = vec_dot_q3_k;
  k->vec_dot[HN_TYPE_Q4_K] = vec_dot_q4_k;
  k->vec_dot[HN_TYPE_Q5_K] = vec_dot_q5_k;
  k->vec_dot[HN_TYPE_Q6_K] = vec_dot_q6_k;

  k->pack_panel[HN_TYPE_F16] = pack_panel_16bit;
  k->panel_gemm_f16 = panel_gemm_f16;
  k->pack_panel[HN_TYPE_BF16] = pack_panel_16bit;
  k->panel_gemm_bf16 = panel_gemm_bf16;

  /* The panel kernel of each type (by its scales and mins) and the zero point of its
   * packed codes, as on x86; Q8_0 is packed signed (SDOT, SMMLA and the widening
   * multiplies take signed bytes, and 255 would not be one).  With I8MM the single-scale
   * shapes use SMMLA. */
#ifdef HN_NEON_DOTPROD
  const HnPanelGemmFn single = i8mm ? panel_gemm_single_i8mm : panel_gemm_single;
  const HnPanelGemmFn with_min = i8mm ? panel_gemm_min_i8mm : panel_gemm_min;
#else
  const HnPanelGemmFn single = panel_gemm_single, with_min = panel_gemm_min;
#endif
  const struct {
    HnType type;
    HnPackPanelFn pack;
    HnPanelGemmFn gemm;
    int offset;
  } panels[] = {
    { HN_TYPE_Q8_0, pack_panel_q8_0_signed, single, 0 },
    { HN_TYPE_Q4_0, pack_panel_q4_0, single, 8 },
    { HN_TYPE_Q5_0, pack_panel_q5_0, single, 16 },
    { HN_TYPE_Q4_1, pack_panel_q4_1, with_min, 0 },
    { HN_TYPE_Q5_1, pack_panel_q5_1, with_min, 0 },
    { HN_TYPE_Q2_K, pack_panel_q2_k, panel_gemm_halves_min16, 0 },
    { HN_TYPE_Q3_K, pack_panel_q3_k, panel_gemm_halves, 4 },
    { HN_TYPE_Q4_K, pack_panel_q4_k, with_min, 0 },
    { HN_TYPE_Q5_K, pack_panel_q5_k, with_min, 0 },
    { HN_TYPE_Q6_K, pack_panel_q6_k, panel_gemm_halves, 32 },
  };
  for (size_t i = 0; i < sizeof panels / sizeof panels[0]; i++) {
    k->pack_panel[panels[i].type] = panels[i].pack;
    k->panel_gemm[panels[i].type] = panels[i].gemm;
    k->panel_offset[panels[i].type] = panels[i].offset;
  }
}
