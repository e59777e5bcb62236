/* hn-simd-avx2.c — AVX2 + FMA + F16C kernels (compiled with those flags only; chosen at
 * run time by hn-cpu.c).  Integer products use the maddubs sign trick: |a| (unsigned)
 * times sign(a)·b (signed) equals a·b, which lets signed 8-bit operands use the
 * unsigned×signed instruction.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-simd.h"
#include "hn-quants-blocks.h"
#include "hn-simd-x86.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define QK 32

static inline float
h2f(uint16_t h)
{
  return _cvtsh_ss(h);
}

static inline float
hsum_ps(__m256 v)
{
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

static inline int
hsum_epi32(__m256i v)
{
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

/* 32 signed bytes times 32 signed bytes -> 8 int32 partial sums. */
static inline __m256i
dot_i8(__m256i a, __m256i b)
{
  __m256i abs_a = _mm256_sign_epi8(a, a);
  __m256i signed_b = _mm256_sign_epi8(b, a);
  __m256i pairs = _mm256_maddubs_epi16(abs_a, signed_b);
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

/* 32 unsigned bytes (< 128) times 32 signed bytes -> 8 int32 partial sums. */
static inline __m256i
dot_u8_i8(__m256i u, __m256i s)
{
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* 16 packed nibbles -> 32 bytes: low nibbles first (elements 0..15), then high ones. */
static inline __m256i
unpack_nibbles(const uint8_t *qs)
{
  __m128i packed = _mm_loadu_si128((const __m128i *)qs);
  __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

/* 32 bits -> 32 bytes, 0xff where the bit is set. */
static inline __m256i
bits_to_bytes(const uint8_t *bits)
{
  uint32_t x;
  memcpy(&x, bits, 4);
  const __m256i shuffle = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                            0x0101010101010101, 0x0000000000000000);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuffle);
  const __m256i bit_mask = _mm256_set1_epi64x((long long)0x7fbfdfeff7fbfdfeULL);
  bytes = _mm256_or_si256(bytes, bit_mask);
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

/* ---- activation quantizers ----
 *
 * Bit-identical to the reference quantizers in hn-quants.c (tested with memcmp): the
 * scale is computed with the same scalar float operations, the product x·(1/d) is the
 * same IEEE multiplication, and the rounding is the reference's — half away from zero
 * for Q8_0/Q8_1 (roundf), to nearest even for Q8_K. */

static inline float
max_abs_ps(const float *x, int n)
{
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  __m256 amax = _mm256_setzero_ps();
  for (int j = 0; j < n; j += 8)
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(x + j)));
  __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(amax, 1), _mm256_castps256_ps128(amax));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return _mm_cvtss_f32(m4);
}

/* roundf() of 8 floats: truncate, then step away from zero when the dropped fraction is
 * at least one half (x - trunc(x) is exact for every float). */
static inline __m256i
round_half_away(__m256 v)
{
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  __m256 frac = _mm256_andnot_ps(sign_bit, _mm256_sub_ps(v, t));
  __m256 step = _mm256_or_ps(_mm256_and_ps(v, sign_bit), _mm256_set1_ps(1.0f));
  __m256 use = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  return _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(use, step)));
}

/* 4 × 8 int32 in element order -> 32 bytes (saturating) in element order. */
static inline __m256i
pack_i32_to_i8(__m256i i0, __m256i i1, __m256i i2, __m256i i3)
{
  __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  /* packs interleave 128-bit lanes; the permute restores element order */
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline __m256i
quantize_block32(const float *x, float *d_out)
{
  const float amax = max_abs_ps(x, QK);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const __m256 vid = _mm256_set1_ps(id);
  *d_out = d;
  return pack_i32_to_i8(round_half_away(_mm256_mul_ps(_mm256_loadu_ps(x), vid)),
                        round_half_away(_mm256_mul_ps(_mm256_loadu_ps(x + 8), vid)),
                        round_half_away(_mm256_mul_ps(_mm256_loadu_ps(x + 16), vid)),
                        round_half_away(_mm256_mul_ps(_mm256_loadu_ps(x + 24), vid)));
}

static void
quantize_q8_0(const float *src, void *dst, int64_t n)
{
  HnBlockQ8_0 *y = dst;
  for (int64_t i = 0; i < n / QK; i++) {
    float d;
    __m256i q = quantize_block32(src + i * QK, &d);
    y[i].d = hn_fp32_to_fp16(d);
    _mm256_storeu_si256((__m256i *)y[i].qs, q);
  }
}

static void
quantize_q8_1(const float *src, void *dst, int64_t n)
{
  HnBlockQ8_1 *y = dst;
  for (int64_t i = 0; i < n / QK; i++) {
    float d;
    __m256i q = quantize_block32(src + i * QK, &d);
    _mm256_storeu_si256((__m256i *)y[i].qs, q);
    int sum = hsum_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1)));
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
    const float amax = max_abs_ps(x, HN_QK_K);
    if (amax == 0.0f) {
      memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    /* the reference keeps the first element of largest magnitude, with its sign */
    int first = 0;
    while (fabsf(x[first]) != amax)
      first++;
    const float iscale = -127.0f / x[first];
    const __m256 vs = _mm256_set1_ps(iscale);
    const __m256i hi = _mm256_set1_epi32(127);
    for (int j = 0; j < HN_QK_K; j += 32) {
      /* cvtps rounds to nearest even under the default MXCSR mode, as nearest_int() */
      __m256i i0 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j), vs)), hi);
      __m256i i1 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8), vs)), hi);
      __m256i i2 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 16), vs)), hi);
      __m256i i3 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 24), vs)), hi);
      __m256i bytes = pack_i32_to_i8(i0, i1, i2, i3);
      _mm256_storeu_si256((__m256i *)(y[i].qs + j), bytes);
      /* sums of each 16: bytes -> int16 pairs -> two int32 per 16-group half */
      __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes);
      __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1)); /* 8 sums of 4 */
      __m128i lo = _mm256_castsi256_si128(s32), hi4 = _mm256_extracti128_si256(s32, 1);
      lo = _mm_hadd_epi32(lo, hi4);  /* sums of 8: [0-7, 8-15, 16-23, 24-31] */
      lo = _mm_hadd_epi32(lo, lo);   /* sums of 16: [0-15, 16-31, ...] */
      y[i].bsums[j / 16] = (int16_t)_mm_cvtsi128_si32(lo);
      y[i].bsums[j / 16 + 1] = (int16_t)_mm_extract_epi32(lo, 1);
    }
    y[i].d = 1.0f / iscale;
  }
}

static void
quantize_f16(const float *src, void *dst, int64_t n)
{
  uint16_t *y = dst;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++)
    y[i] = hn_fp32_to_fp16(src[i]);
}

/* ---- dot products ---- */

/* Two blocks per iteration into two accumulators: one accumulator would serialise the
 * loop on the FMA latency and leave the decode far from memory bandwidth. */
#define DEFINE_VEC_DOT_32(NAME, WBLOCK, DECODE)                                             \
  static float NAME(int64_t n, const void *w, const void *a)                                \
  {                                                                                         \
    const WBLOCK *x = w;                                                                    \
    const HnBlockQ8_0 *y = a;                                                             \
    const int64_t nb = n / QK;                                                              \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                          \
    int64_t i = 0;                                                                          \
    for (; i + 1 < nb; i += 2) {                                                            \
      __m256i q0 = DECODE(&x[i]), q1 = DECODE(&x[i + 1]);                                   \
      __m256i y0 = _mm256_loadu_si256((const __m256i *)y[i].qs);                            \
      __m256i y1 = _mm256_loadu_si256((const __m256i *)y[i + 1].qs);                        \
      acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)),                     \
                             _mm256_cvtepi32_ps(dot_i8(q0, y0)), acc0);                     \
      acc1 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i + 1].d) * h2f(y[i + 1].d)),             \
                             _mm256_cvtepi32_ps(dot_i8(q1, y1)), acc1);                     \
    }                                                                                       \
    for (; i < nb; i++) {                                                                   \
      __m256i q0 = DECODE(&x[i]);                                                           \
      __m256i y0 = _mm256_loadu_si256((const __m256i *)y[i].qs);                            \
      acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)),                     \
                             _mm256_cvtepi32_ps(dot_i8(q0, y0)), acc0);                     \
    }                                                                                       \
    return hsum_ps(_mm256_add_ps(acc0, acc1));                                              \
  }

static inline __m256i
decode_q8_0(const HnBlockQ8_0 *b)
{
  return _mm256_loadu_si256((const __m256i *)b->qs);
}

static inline __m256i
decode_q4_0(const HnBlockQ4_0 *b)
{
  return _mm256_sub_epi8(unpack_nibbles(b->qs), _mm256_set1_epi8(8));
}

static inline __m256i
decode_q5_0(const HnBlockQ5_0 *b)
{
  /* nibble | 0xf0 is nibble - 16 as a signed byte: exactly the value when the fifth
   * bit is clear; when it is set the value is the plain nibble. */
  __m256i high_clear = _mm256_andnot_si256(bits_to_bytes(b->qh), _mm256_set1_epi8((char)0xf0));
  return _mm256_or_si256(unpack_nibbles(b->qs), high_clear);
}

DEFINE_VEC_DOT_32(vec_dot_q8_0, HnBlockQ8_0, decode_q8_0)
DEFINE_VEC_DOT_32(vec_dot_q4_0, HnBlockQ4_0, decode_q4_0)
DEFINE_VEC_DOT_32(vec_dot_q5_0, HnBlockQ5_0, decode_q5_0)

static float
vec_dot_q4_1(int64_t n, const void *w, const void *a)
{
  const HnBlockQ4_1 *x = w;
  const HnBlockQ8_1 *y = a;
  __m256 acc = _mm256_setzero_ps();
  float summs = 0;
  for (int64_t i = 0; i < n / QK; i++) {
    summs += h2f(x[i].m) * h2f(y[i].s);
    __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
    __m256i qx = unpack_nibbles(x[i].qs);
    __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8_i8(qx, qy)), acc);
  }
  return hsum_ps(acc) + summs;
}

static float
vec_dot_q5_1(int64_t n, const void *w, const void *a)
{
  const HnBlockQ5_1 *x = w;
  const HnBlockQ8_1 *y = a;
  __m256 acc = _mm256_setzero_ps();
  float summs = 0;
  for (int64_t i = 0; i < n / QK; i++) {
    summs += h2f(x[i].m) * h2f(y[i].s);
    __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
    __m256i high = _mm256_and_si256(bits_to_bytes(x[i].qh), _mm256_set1_epi8(0x10));
    __m256i qx = _mm256_or_si256(unpack_nibbles(x[i].qs), high);
    __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8_i8(qx, qy)), acc);
  }
  return hsum_ps(acc) + summs;
}

/* Unpacks the eight 6-bit scales and mins of a Q4_K/Q5_K block. */
static inline void
unpack_scales_k4(const uint8_t *packed, uint8_t scales[8], uint8_t mins[8])
{
  for (int j = 0; j < 8; j++)
    hn_q4k_scale_min(j, packed, &scales[j], &mins[j]);
}

static float
vec_dot_q4_k(int64_t n, const void *w, const void *a)
{
  const HnBlockQ4_K *x = w;
  const HnBlockQ8_K *y = a;
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0;
  for (int64_t i = 0; i < n / HN_QK_K; i++) {
    const float d = y[i].d * h2f(x[i].d);
    const float dmin = y[i].d * h2f(x[i].dmin);
    uint8_t scales[8], mins[8];
    unpack_scales_k4(x[i].scales, scales, mins);
    int min_sum = 0;
    for (int j = 0; j < 8; j++)
      min_sum += mins[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    acc_min += dmin * (float)min_sum;

    __m256i sumi = _mm256_setzero_si256();
    const uint8_t *q4 = x[i].qs;
    const int8_t *q8 = y[i].qs;
    for (int j = 0; j < 4; j++) {
      __m256i bits = _mm256_loadu_si256((const __m256i *)(q4 + 32 * j));
      __m256i lo = _mm256_and_si256(bits, low_mask);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low_mask);
      __m256i ylo = _mm256_loadu_si256((const __m256i *)(q8 + 64 * j));
      __m256i yhi = _mm256_loadu_si256((const __m256i *)(q8 + 64 * j + 32));
      __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_set1_epi16(scales[2 * j]));
      __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, yhi), _mm256_set1_epi16(scales[2 * j + 1]));
      sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc) - acc_min;
}

static float
vec_dot_q5_k(int64_t n, const void *w, const void *a)
{
  const HnBlockQ5_K *x = w;
  const HnBlockQ8_K *y = a;
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0;
  for (int64_t i = 0; i < n / HN_QK_K; i++) {
    const float d = y[i].d * h2f(x[i].d);
    const float dmin = y[i].d * h2f(x[i].dmin);
    uint8_t scales[8], mins[8];
    unpack_scales_k4(x[i].scales, scales, mins);
    int min_sum = 0;
    for (int j = 0; j < 8; j++)
      min_sum += mins[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    acc_min += dmin * (float)min_sum;

    __m256i qh = _mm256_loadu_si256((const __m256i *)x[i].qh);
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
      __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
      /* bit 2j of qh[l] is the fifth bit of element 64j+l, bit 2j+1 of element 64j+32+l */
      __m256i h_lo = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), _mm256_set1_epi8(1));
      __m256i h_hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), _mm256_set1_epi8(1));
      __m256i lo = _mm256_or_si256(_mm256_and_si256(bits, low_mask), _mm256_slli_epi16(h_lo, 4));
      __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), low_mask), _mm256_slli_epi16(h_hi, 4));
      __m256i ylo = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * j));
      __m256i yhi = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * j + 32));
      __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_set1_epi16(scales[2 * j]));
      __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, yhi), _mm256_set1_epi16(scales[2 * j + 1]));
      sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc) - acc_min;
}

static float
vec_dot_q6_k(int64_t n, const void *w, const void *a)
{
  const HnBlockQ6_K *x = w;
  const HnBlockQ8_K *y = a;
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / HN_QK_K; i++) {
    const float d = y[i].d * h2f(x[i].d);
    /* The stored values are q+32; subtract 32·Σy per 16-group via the block sums. */
    int offset = 0;
    for (int g = 0; g < 16; g++)
      offset += x[i].scales[g] * y[i].bsums[g];
    __m256i sumi = _mm256_setzero_si256();
    for (int half = 0; half < 2; half++) {
      const uint8_t *ql = x[i].ql + 64 * half;
      const uint8_t *qhp = x[i].qh + 32 * half;
      const int8_t *q8 = y[i].qs + 128 * half;
      const int8_t *sc = x[i].scales + 8 * half;
      __m256i qh = _mm256_loadu_si256((const __m256i *)qhp);
      __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
      __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(l0, low_mask), _mm256_slli_epi16(_mm256_and_si256(qh, two_bits), 4));
      q[1] = _mm256_or_si256(_mm256_and_si256(l1, low_mask),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two_bits), 4));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low_mask),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two_bits), 4));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low_mask),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two_bits), 4));
      for (int k = 0; k < 4; k++) {
        __m256i yk = _mm256_loadu_si256((const __m256i *)(q8 + 32 * k));
        __m256i p16 = _mm256_maddubs_epi16(q[k], yk);
        /* each 32-run covers two 16-groups with their own scales */
        __m256i scale = _mm256_set_m128i(_mm_set1_epi16(sc[2 * k + 1]), _mm_set1_epi16(sc[2 * k]));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, scale));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi, _mm256_setr_epi32(32 * offset, 0, 0, 0, 0, 0, 0, 0))), acc);
  }
  return hsum_ps(acc);
}

static float
vec_dot_q2_k(int64_t n, const void *w, const void *a)
{
  const HnBlockQ2_K *x = w;
  const HnBlockQ8_K *y = a;
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0;
  for (int64_t i = 0; i < n / HN_QK_K; i++) {
    const float d = y[i].d * h2f(x[i].d);
    const float dmin = y[i].d * h2f(x[i].dmin);
    int min_sum = 0;
    for (int g = 0; g < 16; g++)
      min_sum += (x[i].scales[g] >> 4) * y[i].bsums[g];
    acc_min += dmin * (float)min_sum;
    __m256i sumi = _mm256_setzero_si256();
    for (int half = 0; half < 2; half++) {
      __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * half));
      const uint8_t *sc = x[i].scales + 8 * half;
      for (int j = 0; j < 4; j++) {
        __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), two_bits);
        __m256i yk = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * half + 32 * j));
        __m256i p16 = _mm256_maddubs_epi16(q, yk);
        __m256i scale = _mm256_set_m128i(_mm_set1_epi16(sc[2 * j + 1] & 0xF), _mm_set1_epi16(sc[2 * j] & 0xF));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, scale));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc) - acc_min;
}

static float
vec_dot_q3_k(int64_t n, const void *w, const void *a)
{
  const HnBlockQ3_K *x = w;
  const HnBlockQ8_K *y = a;
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / HN_QK_K; i++) {
    const float d = y[i].d * h2f(x[i].d);
    int8_t scales[16];
    _mm_storeu_si128((__m128i *)scales, scales_q3_k(x[i].scales));
    /* value = q2 - 4·(high bit clear) = q2 + 4·hbit - 4: compute (q2 + 4·hbit)·y and
     * subtract 4·Σy per group through the block sums. */
    int offset = 0;
    for (int g = 0; g < 16; g++)
      offset += scales[g] * y[i].bsums[g];
    __m256i hmask = _mm256_loadu_si256((const __m256i *)x[i].hmask);
    __m256i sumi = _mm256_setzero_si256();
    for (int half = 0; half < 2; half++) {
      __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * half));
      for (int j = 0; j < 4; j++) {
        int bit = 4 * half + j;
        __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hmask, bit), _mm256_set1_epi8(1));
        __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), two_bits), _mm256_slli_epi16(hb, 2));
        __m256i yk = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * half + 32 * j));
        __m256i p16 = _mm256_maddubs_epi16(q, yk);
        const int8_t *sc = scales + 8 * half + 2 * j;
        __m256i scale = _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, scale));
      }
    }
    int total = hsum_epi32(sumi) - 4 * offset;
    acc = _mm256_add_ps(acc, _mm256_setr_ps(d * (float)total, 0, 0, 0, 0, 0, 0, 0));
  }
  return hsum_ps(acc);
}

/* 8 values as floats: F16 by conversion, BF16 (the high half of an f32) by a shift */
#define LOAD8_F16_AS_PS(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define LOAD8_BF16_AS_PS(p) \
  _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))

#define DEFINE_VEC_DOT_16BIT(NAME, LOAD8, TO_F32)                                           \
  static float NAME(int64_t n, const void *w, const void *a)                                \
  {                                                                                         \
    const uint16_t *x = w;                                                                  \
    const uint16_t *y = a;                                                                  \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                          \
    int64_t i = 0;                                                                          \
    for (; i + 16 <= n; i += 16) {                                                          \
      acc0 = _mm256_fmadd_ps(LOAD8(x + i), LOAD8(y + i), acc0);                             \
      acc1 = _mm256_fmadd_ps(LOAD8(x + i + 8), LOAD8(y + i + 8), acc1);                     \
    }                                                                                       \
    float sum = hsum_ps(_mm256_add_ps(acc0, acc1));                                         \
    for (; i < n; i++)                                                                      \
      sum += TO_F32(x[i]) * TO_F32(y[i]);                                                   \
    return sum;                                                                             \
  }

DEFINE_VEC_DOT_16BIT(vec_dot_f16, LOAD8_F16_AS_PS, h2f)
DEFINE_VEC_DOT_16BIT(vec_dot_bf16, LOAD8_BF16_AS_PS, hn_bf16_to_fp32)

static void
round_f16(const float *x, float *y, int64_t n)
{
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; i++)
    y[i] = h2f(hn_fp32_to_fp16(x[i]));
}

/* BF16 rounding exactly as hn_fp32_to_bf16: to nearest even on the 16 dropped bits
 * (add 0x7fff plus the lowest kept bit), NaNs truncated and made quiet.  The BF16 value
 * ends up in the high half of each 32-bit lane; the low half is left over. */
static inline __m256i
bf16_round_bits(__m256 x)
{
  const __m256i b = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(b, _mm256_set1_epi32(0x00400000));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

static void
round_bf16(const float *x, float *y, int64_t n)
{
  const __m256i keep_high = _mm256_set1_epi32((int)0xffff0000u);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_and_si256(bf16_round_bits(_mm256_loadu_ps(x + i)), keep_high)));
  for (; i < n; i++)
    y[i] = hn_bf16_to_fp32(hn_fp32_to_bf16(x[i]));
}

/* BF16 activations for BF16 weights' dot products, bit-identical to hn_fp32_to_bf16 */
static void
quantize_bf16(const float *src, void *dst, int64_t n)
{
  uint16_t *y = dst;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = _mm256_srli_epi32(bf16_round_bits(_mm256_loadu_ps(src + i)), 16);
    const __m256i hi = _mm256_srli_epi32(bf16_round_bits(_mm256_loadu_ps(src + i + 8)), 16);
    /* the pack interleaves the two inputs per 128-bit lane; the permute puts them back */
    _mm256_storeu_si256((__m256i *)(y + i), _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8));
  }
  for (; i < n; i++)
    y[i] = hn_fp32_to_bf16(src[i]);
}

static float
vec_dot_f32(int64_t n, const void *w, const void *a)
{
  const float *x = w;
  const float *y = a;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
  }
  float sum = hsum_ps(_mm256_add_ps(acc0, acc1));
  for (; i < n; i++)
    sum += x[i] * y[i];
  return sum;
}

/* ---- attention ---- */

/* e^x for x <= 0 (attention weights): x = n·ln2 + r with |r| <= ln2/2, a degree-7
 * Taylor polynomial for e^r (relative error below 1e-8 there), times 2^n built in the
 * exponent bits; inputs below -87 give (almost) zero instead of denormals. */
static inline __m256
exp_neg_256(__m256 x)
{
  /* the bound first: MAXPS returns its second operand when either is NaN, so a NaN
   * score (NaN weights) stays NaN and reaches the logits check instead of becoming a
   * finite weight */
  x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

/* Lane i of the result = the sum of the lanes of a[i], for 8 vectors: two levels of
 * pairwise horizontal adds leave each row's two 128-bit half sums in the two halves,
 * which one cross-half add joins. */
static inline __m256
sums8_256(const __m256 *a)
{
  const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 g0 = _mm256_hadd_ps(h01, h23), g1 = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20), _mm256_permute2f128_ps(g0, g1, 0x31));
}

static inline float
hmax_ps(__m256 v)
{
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

/* Σ s[0..n) in double: the softmax denominator, summed in double like the reference's. */
static inline double
sum_as_double_256(const float *s, int n)
{
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(s + i)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(s + i + 4)));
  }
  const __m256d a = _mm256_add_pd(a0, a1);
  const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
  for (; i < n; i++)
    sum += s[i];
  return sum;
}

#define VEC __m256
#define VLEN 8
#define VZERO() _mm256_setzero_ps()
#define VSET1(x) _mm256_set1_ps(x)
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps(p, v)
#define VLOAD_H(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define VROUND_H(v) _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT))
#define VFMADD(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VMUL(a, b) _mm256_mul_ps(a, b)
#define VADD(a, b) _mm256_add_ps(a, b)
#define VHSUM(v) hsum_ps(v)
#define VSUB(a, b) _mm256_sub_ps(a, b)
#define VEXP(v) exp_neg_256(v)
#define VHMAX(v) hmax_ps(v)
#define VSUMS(a) sums8_256(a)
#define VMAX(a, b) _mm256_max_ps(a, b)
#define VSUM_DOUBLE(s, n) sum_as_double_256(s, n)
#define ATTN_ACC_VECS 8
#define ATTN_SCORE_GROUPS 1
#define ATTN_NAME attn_avx2
#define ATTN_BODY attn_body_avx2
#include "hn-simd-attn.h"

/* ---- panel GEMM for prompt processing (panel layout: hn-simd-panel.h) ----
 *
 * The AVX-512 panel handles 16 rows per vector; here a 256-bit vector holds 8, so each
 * panel is walked twice, once per half of 8 rows (the half's codes are the upper or lower
 * 32 bytes of each 64-byte code vector).  Byte products: VPDPBUSD where the processor
 * has AVX-VNNI; otherwise VPMADDUBSW + VPMADDWD, whose 16-bit pair sums cannot saturate
 * for codes up to 63 (every type but Q8_0) — Q8_0 there is packed signed and multiplied
 * with the sign trick (|w| × sign(a, w)), since 255 × 127 twice would saturate. */
#include "hn-simd-panel.h"

/* Decode of Q4_0 and Q8_0 (and Q5_0, Q4_1, Q5_1), HN_DOT_ROWS rows at a time.  The codes are taken unsigned
 * (Q4_0's nibbles; Q8_0's bytes + 128 where VPDPBUSD can take them without saturating)
 * and their zero point comes off once per block for all rows as -offset · Σy; the
 * integer sums are the single-row kernels', so only the float order differs.  Fewer
 * instructions per block than the signed single-row kernels (on a 2-core Xeon AVX2 decode
 * was bound by them, at well under the memory's bandwidth), and four streams in flight
 * with each row's place in the next four rows prefetched into L2.  (codes_q4_0 is the
 * panel packer's, as are those of Q5_0, Q4_1 and Q5_1.) */
static inline __m256i
codes_q8_0_biased(const HnBlockQ8_0 *b)
{
  return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)b->qs), _mm256_set1_epi8((char)0x80));
}

#define ROWS_DOT_MADDUBS(acc, u, s) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)))
#define ROWS_DOT_SIGNED(acc, w, s)                                                                     \
  _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(s, w)), \
                                          _mm256_set1_epi16(1)))
#define ROWS_DOT_VNNI(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)

/* Q4_1 and Q5_1 take Q8_1 activations and add each block's min times the activation
 * block's d · Σq (its s), as the single-row kernels do; the others have no min. */
#define ROWS_NO_MIN(x, y) 0.0f
#define ROWS_MIN_M(x, y) (h2f((x)->m) * h2f((y)->s))

#define DEFINE_VEC_DOT_ROWS(NAME, WBLOCK, ABLOCK, CODES, OFFSET, WITH_MIN, MIN, DOT, ATTR)          \
  static ATTR void NAME(int64_t n, const void *w, size_t row_stride, int n_rows, const void *a, float *out) \
  {                                                                                                \
    const ABLOCK *y = a;                                                                           \
    const int64_t nb = n / QK;                                                                     \
    const WBLOCK *x[HN_DOT_ROWS];                                                                  \
    _Pragma("GCC unroll 4") for (int r = 0; r < HN_DOT_ROWS; r++)                                  \
      x[r] = (const WBLOCK *)((const uint8_t *)w + (size_t)(r < n_rows ? r : 0) * row_stride);     \
    const size_t next_rows = HN_DOT_ROWS * row_stride;                                             \
    __m256 acc[HN_DOT_ROWS];                                                                       \
    float mins[HN_DOT_ROWS];                                                                       \
    _Pragma("GCC unroll 4") for (int r = 0; r < HN_DOT_ROWS; r++) {                                \
      acc[r] = _mm256_setzero_ps();                                                                \
      mins[r] = 0.0f;                                                                              \
    }                                                                                              \
    for (int64_t i = 0; i < nb; i++) {                                                             \
      const __m256i yq = _mm256_loadu_si256((const __m256i *)y[i].qs);                             \
      const float yd = h2f(y[i].d);                                                                \
      const __m256i zero_point =                                                                   \
        OFFSET ? _mm256_sub_epi32(_mm256_setzero_si256(),                                          \
                                  DOT(_mm256_setzero_si256(), _mm256_set1_epi8((char)(OFFSET)), yq)) \
               : _mm256_setzero_si256();                                                           \
      _Pragma("GCC unroll 4") for (int r = 0; r < HN_DOT_ROWS; r++) {                              \
        _mm_prefetch((const char *)&x[r][i] + 768, _MM_HINT_T0);                                   \
        _mm_prefetch((const char *)&x[r][i] + next_rows, _MM_HINT_T1);                             \
        const __m256i p = DOT(zero_point, CODES(&x[r][i]), yq);                                    \
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[r][i].d) * yd), _mm256_cvtepi32_ps(p), acc[r]); \
        if (WITH_MIN)                                                                              \
          mins[r] += MIN(&x[r][i], &y[i]);                                                         \
      }                                                                                            \
    }                                                                                              \
    for (int r = 0; r < n_rows && r < HN_DOT_ROWS; r++)                                            \
      out[r] = WITH_MIN ? hsum_ps(acc[r]) + mins[r] : hsum_ps(acc[r]);                             \
  }

/* The 32-element types regrouped at load (layouts in hn-quants.h): each half of a run's
 * 64-byte quant vectors holds four bytes of each of 8 blocks, lane j of 8 for block j,
 * so the byte products of a block add up in its own lane and its scale applies once.
 * For Q4_0, per 8 blocks and row: 4 loads, 12 unpacking instructions, 8 dot steps, one
 * convert and one FMA, where the four-row kernel below spends about six per block.
 * Q5_0 and Q5_1 add a load and three instructions per code vector for the fifth bits;
 * Q4_1 and Q5_1 a conversion and an FMA per 8 blocks and token for the mins (times the
 * activations' block sums, a vector of 8 like the scales).  Q8_0 takes 8 loads and,
 * for VPDPBUSD, 8 XORs that make its bytes unsigned (without AVX-VNNI its bytes stay
 * signed and take the sign trick).  Tiles of 4 rows for one token (registers: 8 code
 * vectors, 4 sums), of 1 row × up to 4 tokens for more. */

/* the code vectors of a half run (hn-simd-panel.h), by layout */
static inline __attribute__((always_inline)) void
half_codes_q4_0(const uint8_t *group, int half, __m256i codes[8])
{
  half_run_nibble_codes(group, half, 0, 0, codes);
}

static inline __attribute__((always_inline)) void
half_codes_q4_1(const uint8_t *group, int half, __m256i codes[8])
{
  half_run_nibble_codes(group, half, 1, 0, codes);
}

static inline __attribute__((always_inline)) void
half_codes_q5_0(const uint8_t *group, int half, __m256i codes[8])
{
  half_run_nibble_codes(group, half, 0, 1, codes);
}

static inline __attribute__((always_inline)) void
half_codes_q5_1(const uint8_t *group, int half, __m256i codes[8])
{
  half_run_nibble_codes(group, half, 1, 1, codes);
}

static inline __attribute__((always_inline)) void
half_codes_q8_0_biased(const uint8_t *group, int half, __m256i codes[8])
{
  half_codes_q8_0(group, half, codes);
  _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++)
    codes[m] = _mm256_xor_si256(codes[m], _mm256_set1_epi8((char)0x80));
}

/* A grouped tile's rows (one past n_rows reads row 0; its sums are not stored) and its
 * sums, zeroed; at the end each sum's lanes added, plus what was summed outside them. */
static inline __attribute__((always_inline)) void
grouped_tile_begin(const uint8_t *weight, size_t weight_stride, int n_rows, const int NR, const int NC,
                   const uint8_t *rows[4], __m256 acc[4][4])
{
  _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++)
    rows[r] = weight + (size_t)(r < n_rows ? r : 0) * weight_stride;
  _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++)
    _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) acc[r][c] = _mm256_setzero_ps();
}

/* A run's lines 768 bytes ahead into L1, its place in the next tile into L2. */
static inline __attribute__((always_inline)) void
prefetch_run(const uint8_t *group, size_t group_bytes, size_t next_tile)
{
  for (size_t off = 0; off < group_bytes; off += 64) {
    _mm_prefetch((const char *)group + off + 768, _MM_HINT_T0);
    _mm_prefetch((const char *)group + off + next_tile, _MM_HINT_T1);
  }
}

static inline __attribute__((always_inline)) void
grouped_tile_store(__m256 acc[4][4], float extra[4][4], int n_rows, const int NR, const int NC, float *out,
                   size_t out_stride)
{
  for (int r = 0; r < n_rows && r < NR; r++)
    for (int c = 0; c < NC; c++)
      out[(size_t)r * out_stride + c] = hsum_ps(acc[r][c]) + extra[r][c];
}

#define DEFINE_GEMM_GROUPED(NAME, BLOCK, HALF_CODES, FILE_CODES, MINS, TAIL_MIN, DOT, ATTR)     \
  static inline __attribute__((always_inline)) ATTR void NAME##_tile(                            \
    int64_t n, const uint8_t *weight, size_t weight_stride, int n_rows, const HnActChunk *act,     \
    size_t act_stride, const int NR, const int NC, float *out, size_t out_stride)                  \
  {                                                                                                \
    const uint8_t *rows[4];                                                                        \
    __m256 acc[4][4];                                                                              \
    float tail_mins[4][4] = { { 0.0f } }; /* the file-layout blocks' mins times their sums */     \
    grouped_tile_begin(weight, weight_stride, n_rows, NR, NC, rows, acc);                          \
    const int64_t n_blocks = n / 32, n_groups = n_blocks / HN_GROUP_BLOCKS;                        \
    const size_t group_bytes = HN_GROUP_BLOCKS * sizeof(BLOCK);                                    \
    const size_t next_tile = (size_t)NR * weight_stride;                                           \
    for (int64_t g = 0; g < n_groups; g++) {                                                       \
      _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {                                       \
        const uint8_t *group = rows[r] + (size_t)g * group_bytes;                                  \
        prefetch_run(group, group_bytes, next_tile);                                               \
        _Pragma("GCC unroll 2") for (int half = 0; half < 2; half++) {                             \
          __m256i codes[8];                                                                        \
          HALF_CODES(group, half, codes);                                                          \
          const __m256 weight_scales =                                                             \
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(group + 16 * half)));                \
          const __m256 weight_mins =                                                               \
            MINS ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(group + HN_RUN_MINS_AT + 16 * half))) \
                 : _mm256_setzero_ps();                                                            \
          _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {                                   \
            const HnActGroup *a = (const HnActGroup *)(act + (size_t)c * act_stride) + g;          \
            __m256i sum = _mm256_loadu_si256((const __m256i *)(a->neg_offset_sum + 8 * half));     \
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)                                    \
              sum = DOT(sum, codes[i], _mm256_loadu_si256((const __m256i *)(a->q[i] + 32 * half))); \
            acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum),                                   \
                                        _mm256_mul_ps(weight_scales, _mm256_loadu_ps(a->d + 8 * half)), \
                                        acc[r][c]);                                                \
            if (MINS)                                                                              \
              acc[r][c] = _mm256_fmadd_ps(weight_mins, _mm256_loadu_ps(a->block_sum + 8 * half), acc[r][c]); \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    /* the blocks after the last run, in file layout, against the chunks */                       \
    for (int64_t b = n_groups * HN_GROUP_BLOCKS; b < n_blocks; b++) {                         \
      _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {                                       \
        const BLOCK *blk = (const BLOCK *)rows[r] + b;                                             \
        const __m256i codes = FILE_CODES(blk);                                                     \
        const float wd = h2f(blk->d);                                                              \
        _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {                                     \
          const HnActChunk *a = act + (size_t)c * act_stride + b / 2;                              \
          const int half = (int)(b % 2);                                                           \
          const __m256i sum = DOT(_mm256_loadu_si256((const __m256i *)(a->neg_offset_sum + 8 * half)), codes, \
                                  _mm256_loadu_si256((const __m256i *)(a->q + 32 * half)));        \
          acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum),                                     \
                                      _mm256_mul_ps(_mm256_set1_ps(wd), _mm256_loadu_ps(a->d + 8 * half)), \
                                      acc[r][c]);                                                  \
          if (MINS)                                                                                \
            tail_mins[r][c] += TAIL_MIN(blk) * a->block_sum[half];                                 \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    grouped_tile_store(acc, tail_mins, n_rows, NR, NC, out, out_stride);                           \
  }                                                                                                \
  DEFINE_GROUPED_DISPATCH(NAME, ATTR)

/* The kernel NAME over NAME##_tile: a tile of 4 rows for one token, rows one at a time
 * for 2-4 tokens. */
#define DEFINE_GROUPED_DISPATCH(NAME, ATTR)                                                       \
  static ATTR void NAME(int64_t n, const void *weight, size_t weight_stride, int n_rows,           \
                        const HnActChunk *act, size_t act_stride, int n_cols, float *out,          \
                        size_t out_stride)                                                         \
  {                                                                                                \
    const uint8_t *w = weight;                                                                     \
    if (n_cols == 1) {                                                                             \
      NAME##_tile(n, w, weight_stride, n_rows, act, act_stride, 4, 1, out, out_stride);           \
      return;                                                                                      \
    }                                                                                              \
    for (int r = 0; r < n_rows; r++) {                                                             \
      const uint8_t *wr = w + (size_t)r * weight_stride;                                           \
      float *o = out + (size_t)r * out_stride;                                                     \
      switch (n_cols) {                                                                            \
      case 4: NAME##_tile(n, wr, weight_stride, 1, act, act_stride, 1, 4, o, out_stride); break;   \
      case 3: NAME##_tile(n, wr, weight_stride, 1, act, act_stride, 1, 3, o, out_stride); break;   \
      default: NAME##_tile(n, wr, weight_stride, 1, act, act_stride, 1, 2, o, out_stride); break;  \
      }                                                                                            \
    }                                                                                              \
  }

/* Q4_K regrouped at load (hn-quants.h): a half run is one super-block, its 8 sub-blocks'
 * sums in the 8 lanes as Q4_0's blocks are, their scales and mins from the run's header
 * as 8 bytes each.  The super-block after the last run, where the count is odd, is in
 * the file layout: each sub-block's 32 codes against its half of an activation chunk. */
#define DEFINE_GEMM_Q4_K_GROUPED(NAME, DOT, ATTR)                                                 \
  static inline __attribute__((always_inline)) ATTR void NAME##_tile(                            \
    int64_t n, const uint8_t *weight, size_t weight_stride, int n_rows, const HnActChunk *act,     \
    size_t act_stride, const int NR, const int NC, float *out, size_t out_stride)                  \
  {                                                                                                \
    const uint8_t *rows[4];                                                                        \
    __m256 acc[4][4];                                                                              \
    float tail_mins[4][4] = { { 0.0f } }; /* the file-layout super-block's mins times sums */     \
    grouped_tile_begin(weight, weight_stride, n_rows, NR, NC, rows, acc);                          \
    const int64_t n_groups = n / (32 * HN_GROUP_BLOCKS);                                           \
    const size_t group_bytes = 2 * sizeof(HnBlockQ4_K);                                            \
    const size_t next_tile = (size_t)NR * weight_stride;                                           \
    for (int64_t g = 0; g < n_groups; g++) {                                                       \
      _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {                                       \
        const uint8_t *group = rows[r] + (size_t)g * group_bytes;                                  \
        prefetch_run(group, group_bytes, next_tile);                                               \
        /* the 16 scales and mins as bytes, d and dmin of both halves */                           \
        __m128i scale_bytes, min_bytes;                                                            \
        q4_k_run_scale_min_bytes(group, &scale_bytes, &min_bytes);                                 \
        const __m128 halves = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)group));               \
        _Pragma("GCC unroll 2") for (int half = 0; half < 2; half++) {                             \
          __m256i codes[8];                                                                        \
          half_codes_q4_0(group, half, codes);                                                     \
          const __m256 weight_scales =                                                             \
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(half ? _mm_srli_si128(scale_bytes, 8) : scale_bytes)), \
                          _mm256_set1_ps(_mm_cvtss_f32(half ? _mm_shuffle_ps(halves, halves, 1) : halves))); \
          const __m256 weight_mins =                                                               \
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(half ? _mm_srli_si128(min_bytes, 8) : min_bytes)), \
                          _mm256_set1_ps(_mm_cvtss_f32(half ? _mm_shuffle_ps(halves, halves, 3)          \
                                                            : _mm_shuffle_ps(halves, halves, 2))));        \
          _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {                                   \
            const HnActGroup *a = (const HnActGroup *)(act + (size_t)c * act_stride) + g;          \
            __m256i sum = _mm256_setzero_si256();                                                  \
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)                                    \
              sum = DOT(sum, codes[i], _mm256_loadu_si256((const __m256i *)(a->q[i] + 32 * half))); \
            acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum),                                   \
                                        _mm256_mul_ps(weight_scales, _mm256_loadu_ps(a->d + 8 * half)), \
                                        acc[r][c]);                                                \
            acc[r][c] = _mm256_fnmadd_ps(weight_mins, _mm256_loadu_ps(a->block_sum + 8 * half), acc[r][c]); \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    for (int64_t sb = 2 * n_groups; sb < n / HN_QK_K; sb++) {                                      \
      _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {                                       \
        const HnBlockQ4_K *blk = (const HnBlockQ4_K *)rows[r] + sb;                                \
        const float d = h2f(blk->d), dmin = h2f(blk->dmin);                                        \
        for (int j = 0; j < 8; j++) {                                                              \
          uint8_t sc, m;                                                                           \
          hn_q4k_scale_min(j, blk->scales, &sc, &m);                                               \
          const __m256i bits = _mm256_loadu_si256((const __m256i *)(blk->qs + 32 * (j / 2)));      \
          const __m256i codes =                                                                    \
            _mm256_and_si256(j % 2 ? _mm256_srli_epi16(bits, 4) : bits, _mm256_set1_epi8(0x0f));   \
          _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {                                   \
            const HnActChunk *a = act + (size_t)c * act_stride + 4 * sb + j / 2;                   \
            const __m256i sum = DOT(_mm256_setzero_si256(), codes,                                 \
                                    _mm256_loadu_si256((const __m256i *)(a->q + 32 * (j % 2))));   \
            acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum),                                   \
                                        _mm256_mul_ps(_mm256_set1_ps(d * sc), _mm256_loadu_ps(a->d + 8 * (j % 2))), \
                                        acc[r][c]);                                                \
            tail_mins[r][c] -= dmin * m * a->block_sum[j % 2];                                     \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    grouped_tile_store(acc, tail_mins, n_rows, NR, NC, out, out_stride);                           \
  }                                                                                                \
  DEFINE_GROUPED_DISPATCH(NAME, ATTR)

#define VNNI_ATTR __attribute__((target("avxvnni")))
#define NO_TAIL_MIN(blk) ((void)(blk), 0.0f)
#define TAIL_MIN_M(blk) h2f((blk)->m)
DEFINE_GEMM_GROUPED(gemm_q4_0_grouped, HnBlockQ4_0, half_codes_q4_0, codes_q4_0, 0, NO_TAIL_MIN, ROWS_DOT_MADDUBS, )
DEFINE_GEMM_GROUPED(gemm_q4_0_grouped_vnni, HnBlockQ4_0, half_codes_q4_0, codes_q4_0, 0, NO_TAIL_MIN, ROWS_DOT_VNNI,
                    VNNI_ATTR)
DEFINE_GEMM_GROUPED(gemm_q5_0_grouped, HnBlockQ5_0, half_codes_q5_0, codes_q5_0, 0, NO_TAIL_MIN, ROWS_DOT_MADDUBS, )
DEFINE_GEMM_GROUPED(gemm_q5_0_grouped_vnni, HnBlockQ5_0, half_codes_q5_0, codes_q5_0, 0, NO_TAIL_MIN, ROWS_DOT_VNNI,
                    VNNI_ATTR)
DEFINE_GEMM_GROUPED(gemm_q4_1_grouped, HnBlockQ4_1, half_codes_q4_1, codes_q4_1, 1, TAIL_MIN_M, ROWS_DOT_MADDUBS, )
DEFINE_GEMM_GROUPED(gemm_q4_1_grouped_vnni, HnBlockQ4_1, half_codes_q4_1, codes_q4_1, 1, TAIL_MIN_M, ROWS_DOT_VNNI,
                    VNNI_ATTR)
DEFINE_GEMM_GROUPED(gemm_q5_1_grouped, HnBlockQ5_1, half_codes_q5_1, codes_q5_1, 1, TAIL_MIN_M, ROWS_DOT_MADDUBS, )
DEFINE_GEMM_GROUPED(gemm_q5_1_grouped_vnni, HnBlockQ5_1, half_codes_q5_1, codes_q5_1, 1, TAIL_MIN_M, ROWS_DOT_VNNI,
                    VNNI_ATTR)
DEFINE_GEMM_GROUPED(gemm_q8_0_grouped, HnBlockQ8_0, half_codes_q8_0, decode_q8_0, 0, NO_TAIL_MIN, ROWS_DOT_SIGNED, )
DEFINE_GEMM_GROUPED(gemm_q8_0_grouped_vnni, HnBlockQ8_0, half_codes_q8_0_biased, codes_q8_0_biased, 0, NO_TAIL_MIN,
                    ROWS_DOT_VNNI, VNNI_ATTR)
DEFINE_GEMM_Q4_K_GROUPED(gemm_q4_k_grouped, ROWS_DOT_MADDUBS, )
DEFINE_GEMM_Q4_K_GROUPED(gemm_q4_k_grouped_vnni, ROWS_DOT_VNNI, VNNI_ATTR)

DEFINE_VEC_DOT_ROWS(vec_dot_rows_q4_0, HnBlockQ4_0, HnBlockQ8_0, codes_q4_0, 8, false, ROWS_NO_MIN, ROWS_DOT_MADDUBS, )
DEFINE_VEC_DOT_ROWS(vec_dot_rows_q4_0_vnni, HnBlockQ4_0, HnBlockQ8_0, codes_q4_0, 8, false, ROWS_NO_MIN, ROWS_DOT_VNNI,
                    VNNI_ATTR)
DEFINE_VEC_DOT_ROWS(vec_dot_rows_q8_0, HnBlockQ8_0, HnBlockQ8_0, decode_q8_0, 0, false, ROWS_NO_MIN, ROWS_DOT_SIGNED, )
DEFINE_VEC_DOT_ROWS(vec_dot_rows_q8_0_vnni, HnBlockQ8_0, HnBlockQ8_0, codes_q8_0_biased, 128, false, ROWS_NO_MIN,
                    ROWS_DOT_VNNI, VNNI_ATTR)
/* The legacy types with a fifth bit or a min: their codes unsigned (0..31), as the panel
 * packer takes them; Q5_0's zero point is 16. */
DEFINE_VEC_DOT_ROWS(vec_dot_rows_q5_0, HnBlockQ5_0, HnBlockQ8_0, codes_q5_0, 16, false, ROWS_NO_MIN, ROWS_DOT_MADDUBS, )
DEFINE_VEC_DOT_ROWS(vec_dot_rows_q5_0_vnni, HnBlockQ5_0, HnBlockQ8_0, codes_q5_0, 16, false, ROWS_NO_MIN, ROWS_DOT_VNNI,
                    VNNI_ATTR)
DEFINE_VEC_DOT_ROWS(vec_dot_rows_q4_1, HnBlockQ4_1, HnBlockQ8_1, codes_q4_1, 0, true, ROWS_MIN_M, ROWS_DOT_MADDUBS, )
DEFINE_VEC_DOT_ROWS(vec_dot_rows_q4_1_vnni, HnBlockQ4_1, HnBlockQ8_1, codes_q4_1, 0, true, ROWS_MIN_M, ROWS_DOT_VNNI,
                    VNNI_ATTR)
DEFINE_VEC_DOT_ROWS(vec_dot_rows_q5_1, HnBlockQ5_1, HnBlockQ8_1, codes_q5_1, 0, true, ROWS_MIN_M, ROWS_DOT_MADDUBS, )
DEFINE_VEC_DOT_ROWS(vec_dot_rows_q5_1_vnni, HnBlockQ5_1, HnBlockQ8_1, codes_q5_1, 0, true, ROWS_MIN_M, ROWS_DOT_VNNI,
                    VNNI_ATTR)

/* The k-quants' four-row decode (hn-simd-kquant-rows.h), one run of codes per vector. */
#define KQ_VEC __m256i
#define KQ_FVEC __m256
#define KQ_RUNS 1
#define KQ_JOIN256(a, b) (a)
#define KQ_BCAST128(x) _mm256_broadcastsi128_si256(x)
#define KQ_FROM128(x) _mm256_zextsi128_si256(x)
#define KQ_LOADU(p) _mm256_loadu_si256((const __m256i *)(p))
#define KQ_ZERO() _mm256_setzero_si256()
#define KQ_SET1_8(x) _mm256_set1_epi8((char)(x))
#define KQ_AND(a, b) _mm256_and_si256(a, b)
#define KQ_OR(a, b) _mm256_or_si256(a, b)
#define KQ_SRLI16(v, n) _mm256_srli_epi16(v, n)
#define KQ_SLLI16(v, n) _mm256_slli_epi16(v, n)
#define KQ_ADD32(a, b) _mm256_add_epi32(a, b)
#define KQ_MADDUBS(a, b) _mm256_maddubs_epi16(a, b)
#define KQ_MADD(a, b) _mm256_madd_epi16(a, b)
#define KQ_MADD_ACC(acc, a, b) _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
#define KQ_SHUFFLE8(a, b) _mm256_shuffle_epi8(a, b)
#define KQ_CVT(v) _mm256_cvtepi32_ps(v)
#define KQ_FZERO() _mm256_setzero_ps()
#define KQ_FSET1(x) _mm256_set1_ps(x)
#define KQ_FMADD(a, b, c) _mm256_fmadd_ps(a, b, c)
#define KQ_REDUCE(v) hsum_ps(v)
#define KQ_HOIST_Y 0 /* the activation read where it is used: AVX2 has 16 registers */
#define KQ_NAME(x) x
#include "hn-simd-kquant-rows.h"

/* Writes the 32 codes of each of 16 rows (tmp[r], 32 bytes apart) in lane order: two
 * 8 × 8 transposes of 32-bit words (rows 0-7 into the first 32 bytes of each output,
 * rows 8-15 into the second) with unpacks and 128-bit permutes, in place of sixteen
 * gathers per block (slow on AMD processors, hn-simd-avx512.c). */
static inline void
transpose_codes(const uint8_t tmp[HN_PANEL_ROWS][32], uint8_t codes[8][64])
{
  _Pragma("GCC unroll 2") for (int half = 0; half < 2; half++) {
    __m256i t[8], u[8];
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
      const __m256i a = _mm256_load_si256((const __m256i *)tmp[8 * half + 2 * k]);
      const __m256i b = _mm256_load_si256((const __m256i *)tmp[8 * half + 2 * k + 1]);
      t[2 * k] = _mm256_unpacklo_epi32(a, b);
      t[2 * k + 1] = _mm256_unpackhi_epi32(a, b);
    }
    /* u[4h + c]: lane l holds word c + 4 l of rows 4h .. 4h + 3 */
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
      u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
      u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
      u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
      u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
      _mm256_store_si256((__m256i *)(codes[c] + 32 * half), _mm256_permute2x128_si256(u[c], u[4 + c], 0x20));
      _mm256_store_si256((__m256i *)(codes[c + 4] + 32 * half), _mm256_permute2x128_si256(u[c], u[4 + c], 0x31));
    }
  }
}

/* Stores the first `live` (1..8) lanes of v. */
static inline void
store_rows8(float *dst, __m256 v, int live)
{
  if (live >= 8) {
    _mm256_storeu_ps(dst, v);
    return;
  }
  const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(live), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  _mm256_maskstore_ps(dst, keep, v);
}

#define DOT_MADDUBS(acc, u, s) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones16))
#define DOT_SIGNED(acc, w, s)                                                                        \
  _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(s, w)), ones16))
#define DOT_VNNI(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#define NO_ATTR

/* HALVES: 1 scale per 32 codes, or 2 (one per 16).  MINS: 0, 1 per 32 elements (times
 * the activation's d · Σq), or 2 per 16 (Q2_K, with BLOCK = PanelBlockMin16). */
#define DEFINE_PANEL_GEMM_AVX2(NAME, BLOCK, HALVES, MINS, DOT, ATTR)                                  \
  static inline __attribute__((always_inline)) ATTR void NAME##_cols(                               \
    const BLOCK *pb, int64_t n_blocks, int n_rows, const HnActBlock *act, size_t act_stride,       \
    const int n_cols, float *out, size_t out_stride)                                               \
  {                                                                                                \
    const __m256i ones16 = _mm256_set1_epi16(1);                                                   \
    (void)ones16;                                                                                  \
    for (int h = 0; h < 2 && 8 * h < n_rows; h++) {                                                \
      __m256 acc[HN_PANEL_COLS];                                                                   \
      _Pragma("GCC unroll 8") for (int c = 0; c < n_cols; c++) acc[c] = _mm256_setzero_ps();       \
      const BLOCK *p = pb;                                                                         \
      for (int64_t b = 0; b < n_blocks; b++, p++) {                                                \
        const __m256 s0 = _mm256_load_ps(p->scale[0] + 8 * h);                                     \
        const __m256 s1 = HALVES == 2 ? _mm256_load_ps(p->scale[1] + 8 * h) : s0;                  \
        const __m256 nm0 = MINS ? _mm256_load_ps(p->neg_min[0] + 8 * h) : s0;                      \
        const __m256 nm1 = MINS == 2 ? _mm256_load_ps(p->neg_min[MINS == 2 ? 1 : 0] + 8 * h) : s0; \
        _Pragma("GCC unroll 8") for (int c = 0; c < n_cols; c++) {                                 \
          const HnActBlock *a = act + (size_t)c * act_stride + b;                                  \
          const __m256 d = _mm256_set1_ps(a->d);                                                   \
          if (HALVES == 1) {                                                                       \
            __m256i i = _mm256_set1_epi32(a->off_sum32);                                           \
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)                                    \
              i = DOT(i, _mm256_load_si256((const __m256i *)(p->codes[j] + 32 * h)),               \
                      _mm256_set1_epi32(a->q4[j]));                                                \
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_mul_ps(s0, d), acc[c]);         \
          } else {                                                                                 \
            __m256i i0 = _mm256_set1_epi32(a->off_sum[0]), i1 = _mm256_set1_epi32(a->off_sum[1]);  \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                                  \
              i0 = DOT(i0, _mm256_load_si256((const __m256i *)(p->codes[j] + 32 * h)),              \
                       _mm256_set1_epi32(a->q4[j]));                                               \
              i1 = DOT(i1, _mm256_load_si256((const __m256i *)(p->codes[j + 4] + 32 * h)),          \
                       _mm256_set1_epi32(a->q4[j + 4]));                                           \
            }                                                                                      \
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_mul_ps(s0, d), acc[c]);        \
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_mul_ps(s1, d), acc[c]);        \
          }                                                                                        \
          if (MINS == 1)                                                                           \
            acc[c] = _mm256_fmadd_ps(nm0, _mm256_set1_ps(a->dsum), acc[c]);                        \
          if (MINS == 2) {                                                                         \
            acc[c] = _mm256_fmadd_ps(nm0, _mm256_set1_ps(a->dsum_half[0]), acc[c]);                \
            acc[c] = _mm256_fmadd_ps(nm1, _mm256_set1_ps(a->dsum_half[1]), acc[c]);                \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
      _Pragma("GCC unroll 8") for (int c = 0; c < n_cols; c++)                                     \
        store_rows8(out + (size_t)c * out_stride + 8 * h, acc[c], n_rows - 8 * h);                 \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  static ATTR void NAME(const void *panel, int64_t n, int n_rows, const HnActBlock *act,           \
                        size_t act_stride, int n_cols, float *out, size_t out_stride)              \
  {                                                                                                \
    const BLOCK *pb = panel;                                                                       \
    const int64_t nb = n / 32;                                                                     \
    HN_PANEL_DISPATCH_COLS(NAME##_cols, pb, nb, n_rows, act, act_stride, n_cols, out, out_stride); \
  }

/* Both byte-product variants of one panel kernel. */
#define DEFINE_PANEL_GEMM_BOTH(NAME, BLOCK, HALVES, MINS)                                            \
  DEFINE_PANEL_GEMM_AVX2(NAME, BLOCK, HALVES, MINS, DOT_MADDUBS, NO_ATTR)                           \
  DEFINE_PANEL_GEMM_AVX2(NAME##_vnni, BLOCK, HALVES, MINS, DOT_VNNI, VNNI_ATTR)

DEFINE_PANEL_GEMM_AVX2(panel_gemm_signed, PanelBlock, 1, 0, DOT_SIGNED, NO_ATTR)
DEFINE_PANEL_GEMM_BOTH(panel_gemm_single, PanelBlock, 1, 0)
DEFINE_PANEL_GEMM_BOTH(panel_gemm_min, PanelBlock, 1, 1)
DEFINE_PANEL_GEMM_BOTH(panel_gemm_halves, PanelBlock, 2, 0)
DEFINE_PANEL_GEMM_BOTH(panel_gemm_halves_min16, PanelBlockMin16, 2, 2)

/* 8 rows' values of one element as floats: F16 by conversion, BF16 (the high half of an
 * F32) by widening 16 bits. */
#define LOAD8_F16(p) _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(p)))
#define LOAD8_BF16(p) \
  _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_load_si128((const __m128i *)(p))), 16))

#define DEFINE_PANEL_GEMM_FLOAT(NAME, LOAD8)                                                         \
  static inline __attribute__((always_inline)) void NAME##_cols(                                    \
    const uint16_t *panel, int64_t n, int n_rows, const float *act, size_t act_stride, const int n_cols, \
    float *out, size_t out_stride)                                                                 \
  {                                                                                                \
    for (int h = 0; h < 2 && 8 * h < n_rows; h++) {                                                \
      __m256 acc[HN_PANEL_COLS];                                                                   \
      _Pragma("GCC unroll 8") for (int c = 0; c < n_cols; c++) acc[c] = _mm256_setzero_ps();       \
      for (int64_t i = 0; i < n; i++) {                                                            \
        const __m256 w = LOAD8(panel + i * HN_PANEL_ROWS + 8 * h);                                 \
        _Pragma("GCC unroll 8") for (int c = 0; c < n_cols; c++)                                   \
          acc[c] = _mm256_fmadd_ps(w, _mm256_broadcast_ss(act + (size_t)c * act_stride + (size_t)i), acc[c]); \
      }                                                                                            \
      _Pragma("GCC unroll 8") for (int c = 0; c < n_cols; c++)                                     \
        store_rows8(out + (size_t)c * out_stride + 8 * h, acc[c], n_rows - 8 * h);                 \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  static void NAME(const void *panel, int64_t n, int n_rows, const float *act, size_t act_stride,  \
                   int n_cols, float *out, size_t out_stride)                                      \
  {                                                                                                \
    const uint16_t *p = panel;                                                                     \
    HN_PANEL_DISPATCH_COLS(NAME##_cols, p, n, n_rows, act, act_stride, n_cols, out, out_stride);   \
  }

DEFINE_PANEL_GEMM_FLOAT(panel_gemm_f16, LOAD8_F16)
DEFINE_PANEL_GEMM_FLOAT(panel_gemm_bf16, LOAD8_BF16)

void
hn_simd_fill_avx2(HnSimdKernels *k, bool avx_vnni)
{
  k->level = HN_SIMD_AVX2;
  k->name = avx_vnni ? "AVX2 (AVX-VNNI)" : "AVX2";
  k->attn = attn_avx2;
  k->attn_multiple = 8;
  k->quantize[HN_TYPE_Q8_0] = quantize_q8_0;
  k->quantize[HN_TYPE_Q8_1] = quantize_q8_1;
  k->quantize[HN_TYPE_Q8_K] = quantize_q8_k;
  k->quantize[HN_TYPE_F16] = quantize_f16;
  k->quantize[HN_TYPE_BF16] = quantize_bf16;
  k->vec_dot[HN_TYPE_F32] = vec_dot_f32;
  k->vec_dot[HN_TYPE_F16] = vec_dot_f16;
  k->vec_dot[HN_TYPE_BF16] = vec_dot_bf16;
  k->round_f16 = round_f16;
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

  k->round_bf16 = round_bf16;
  k->pack_panel[HN_TYPE_F16] = pack_panel_16bit;
  k->panel_gemm_f16 = panel_gemm_f16;
  k->pack_panel[HN_TYPE_BF16] = pack_panel_16bit;
  k->panel_gemm_bf16 = panel_gemm_bf16;

  /* The panel kernel of each type (by its scales and mins) and the zero point of its
   * packed codes; every code is below 64, so the maddubs variant cannot saturate. */
  const struct {
    HnType type;
    HnPackPanelFn pack;
    HnPanelGemmFn gemm, gemm_vnni;
    int offset;
  } panels[] = {
    { HN_TYPE_Q4_0, pack_panel_q4_0, panel_gemm_single, panel_gemm_single_vnni, 8 },
    { HN_TYPE_Q5_0, pack_panel_q5_0, panel_gemm_single, panel_gemm_single_vnni, 16 },
    { HN_TYPE_Q4_1, pack_panel_q4_1, panel_gemm_min, panel_gemm_min_vnni, 0 },
    { HN_TYPE_Q5_1, pack_panel_q5_1, panel_gemm_min, panel_gemm_min_vnni, 0 },
    { HN_TYPE_Q2_K, pack_panel_q2_k, panel_gemm_halves_min16, panel_gemm_halves_min16_vnni, 0 },
    { HN_TYPE_Q3_K, pack_panel_q3_k, panel_gemm_halves, panel_gemm_halves_vnni, 4 },
    { HN_TYPE_Q4_K, pack_panel_q4_k, panel_gemm_min, panel_gemm_min_vnni, 0 },
    { HN_TYPE_Q4_K_GROUPED, pack_panel_q4_k_grouped, panel_gemm_min, panel_gemm_min_vnni, 0 },
    { HN_TYPE_Q5_K, pack_panel_q5_k, panel_gemm_min, panel_gemm_min_vnni, 0 },
    { HN_TYPE_Q6_K, pack_panel_q6_k, panel_gemm_halves, panel_gemm_halves_vnni, 32 },
  };
  for (size_t i = 0; i < sizeof panels / sizeof panels[0]; i++) {
    k->pack_panel[panels[i].type] = panels[i].pack;
    k->panel_gemm[panels[i].type] = avx_vnni ? panels[i].gemm_vnni : panels[i].gemm;
    k->panel_offset[panels[i].type] = panels[i].offset;
  }
  k->vec_dot_rows[HN_TYPE_Q4_0] = avx_vnni ? vec_dot_rows_q4_0_vnni : vec_dot_rows_q4_0;
  k->vec_dot_rows[HN_TYPE_Q8_0] = avx_vnni ? vec_dot_rows_q8_0_vnni : vec_dot_rows_q8_0;
  k->vec_dot_rows[HN_TYPE_Q5_0] = avx_vnni ? vec_dot_rows_q5_0_vnni : vec_dot_rows_q5_0;
  k->vec_dot_rows[HN_TYPE_Q4_1] = avx_vnni ? vec_dot_rows_q4_1_vnni : vec_dot_rows_q4_1;
  k->vec_dot_rows[HN_TYPE_Q5_1] = avx_vnni ? vec_dot_rows_q5_1_vnni : vec_dot_rows_q5_1;
  k->vec_dot_rows[HN_TYPE_Q4_K] = vec_dot_rows_q4_k;
  k->vec_dot_rows[HN_TYPE_Q5_K] = vec_dot_rows_q5_k;
  k->vec_dot_rows[HN_TYPE_Q2_K] = vec_dot_rows_q2_k;
  k->vec_dot_rows[HN_TYPE_Q3_K] = vec_dot_rows_q3_k;
  k->vec_dot_rows[HN_TYPE_Q6_K] = vec_dot_rows_q6_k;
  /* the tile path, for the layouts regrouped at load only */
  k->gemm_rows = 4;
  k->gemm_cols = 4;
  k->gemm_tile[HN_TYPE_Q4_0_GROUPED] = avx_vnni ? gemm_q4_0_grouped_vnni : gemm_q4_0_grouped;
  k->gemm_offset[HN_TYPE_Q4_0_GROUPED] = 8;
  k->gemm_tile[HN_TYPE_Q5_0_GROUPED] = avx_vnni ? gemm_q5_0_grouped_vnni : gemm_q5_0_grouped;
  k->gemm_offset[HN_TYPE_Q5_0_GROUPED] = 16;
  k->gemm_tile[HN_TYPE_Q4_1_GROUPED] = avx_vnni ? gemm_q4_1_grouped_vnni : gemm_q4_1_grouped;
  k->gemm_offset[HN_TYPE_Q4_1_GROUPED] = 0;
  k->gemm_tile[HN_TYPE_Q5_1_GROUPED] = avx_vnni ? gemm_q5_1_grouped_vnni : gemm_q5_1_grouped;
  k->gemm_offset[HN_TYPE_Q5_1_GROUPED] = 0;
  k->gemm_tile[HN_TYPE_Q4_K_GROUPED] = avx_vnni ? gemm_q4_k_grouped_vnni : gemm_q4_k_grouped;
  k->gemm_offset[HN_TYPE_Q4_K_GROUPED] = 0;
  k->pack_panel[HN_TYPE_Q5_0_GROUPED] = pack_panel_q5_0_grouped;
  k->panel_gemm[HN_TYPE_Q5_0_GROUPED] = avx_vnni ? panel_gemm_single_vnni : panel_gemm_single;
  k->panel_offset[HN_TYPE_Q5_0_GROUPED] = 16;
  k->pack_panel[HN_TYPE_Q4_1_GROUPED] = pack_panel_q4_1_grouped;
  k->panel_gemm[HN_TYPE_Q4_1_GROUPED] = avx_vnni ? panel_gemm_min_vnni : panel_gemm_min;
  k->panel_offset[HN_TYPE_Q4_1_GROUPED] = 0;
  k->pack_panel[HN_TYPE_Q5_1_GROUPED] = pack_panel_q5_1_grouped;
  k->panel_gemm[HN_TYPE_Q5_1_GROUPED] = avx_vnni ? panel_gemm_min_vnni : panel_gemm_min;
  k->panel_offset[HN_TYPE_Q5_1_GROUPED] = 0;
  k->gemm_tile[HN_TYPE_Q8_0_GROUPED] = avx_vnni ? gemm_q8_0_grouped_vnni : gemm_q8_0_grouped;
  k->gemm_offset[HN_TYPE_Q8_0_GROUPED] = avx_vnni ? 128 : 0;
  k->pack_panel[HN_TYPE_Q4_0_GROUPED] = pack_panel_q4_0_grouped;
  k->panel_gemm[HN_TYPE_Q4_0_GROUPED] = avx_vnni ? panel_gemm_single_vnni : panel_gemm_single;
  k->panel_offset[HN_TYPE_Q4_0_GROUPED] = 8;
  if (avx_vnni) {
    k->pack_panel[HN_TYPE_Q8_0] = pack_panel_q8_0;
    k->pack_panel[HN_TYPE_Q8_0_GROUPED] = pack_panel_q8_0_grouped;
  } else {
    k->pack_panel[HN_TYPE_Q8_0] = pack_panel_q8_0_signed;
    k->pack_panel[HN_TYPE_Q8_0_GROUPED] = pack_panel_q8_0_grouped_signed;
  }
  for (int i = 0; i < 2; i++) {
    const HnType t = i == 0 ? HN_TYPE_Q8_0 : HN_TYPE_Q8_0_GROUPED;
    k->panel_gemm[t] = avx_vnni ? panel_gemm_single_vnni : panel_gemm_signed;
    k->panel_offset[t] = avx_vnni ? 128 : 0;
  }
}
