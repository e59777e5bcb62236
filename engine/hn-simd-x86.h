/* hn-simd-x86.h — the k-quant block unpacking that the AVX2 and AVX-512 decode kernels
 * share (included by each, compiled with its flags; both have AVX2).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-quants-blocks.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* The eight 6-bit scales and the eight mins of a Q4_K block (hn_q4k_scale_min) as 16
 * bytes, scales first, unpacked four at a time with 32-bit masks. */
static inline __attribute__((always_inline)) __m128i
scale_min_bytes_q4_k(const uint8_t *packed)
{
  uint32_t p[3];
  memcpy(p, packed, 12);
  const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, top2 = 0x03030303;
  const uint32_t scales_hi = (p[2] & low4) | (((p[0] >> 6) & top2) << 4);
  const uint32_t mins_hi = ((p[2] >> 4) & low4) | (((p[1] >> 6) & top2) << 4);
  return _mm_setr_epi32((int)(p[0] & low6), (int)scales_hi, (int)(p[1] & low6), (int)mins_hi);
}

/* The same as 16-bit lanes, scales and mins apart. */
static inline __attribute__((always_inline)) void
scales_mins_q4_k(const uint8_t *packed, __m128i *scales, __m128i *mins)
{
  const __m128i bytes = scale_min_bytes_q4_k(packed);
  *scales = _mm_cvtepu8_epi16(bytes);
  *mins = _mm_unpackhi_epi8(bytes, _mm_setzero_si128());
}

/* The 16 sub-blocks' 6-bit scales and mins of a run of Q4_K regrouped (hn-quants.h,
 * HN_TYPE_Q4_K_GROUPED) as bytes, sub-block j in byte j: a scale is the low six bits of
 * its byte, a min the two above them and a nibble of the high-bits bytes. */
static inline __attribute__((always_inline)) void
q4_k_run_scale_min_bytes(const uint8_t *run, __m128i *scales, __m128i *mins)
{
  const __m128i packed = _mm_loadu_si128((const __m128i *)(run + HN_RUN_Q4_K_SCALES_AT));
  const __m128i high = _mm_loadl_epi64((const __m128i *)(run + HN_RUN_Q4_K_MINS_HIGH_AT));
  const __m128i low4 = _mm_set1_epi8(0x0f);
  const __m128i high_bytes = _mm_unpacklo_epi8(_mm_and_si128(high, low4), _mm_and_si128(_mm_srli_epi16(high, 4), low4));
  *scales = _mm_and_si128(packed, _mm_set1_epi8(63));
  *mins = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(packed, 6), _mm_set1_epi8(3)), _mm_slli_epi16(high_bytes, 2));
}

/* The k-quants with 16 groups of 16, which share one decode kernel per level. */
typedef enum { K16_Q2_K, K16_Q3_K, K16_Q6_K } K16Type;

/* Q3_K's 16 group scales, signed, from their 12 packed bytes: the low four bits of scale
 * g are the low (g < 8) or high nibble of byte g % 8, the high two bits are bits
 * 2 · (g / 4) of byte 8 + g % 4; then minus 32.  In registers: a scalar unpack through
 * memory cost a sixth of a Q2_K file's decode on the Intel Xeon without AMX (the
 * 16-byte load waited on four 4-byte stores). */
static inline __attribute__((always_inline)) __m128i
scales_q3_k(const uint8_t *packed)
{
  const __m128i mask4 = _mm_set1_epi8(0x0f), mask2 = _mm_set1_epi8(0x03);
  const __m128i bytes = _mm_loadl_epi64((const __m128i *)packed);
  const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(bytes, mask4), _mm_and_si128(_mm_srli_epi16(bytes, 4), mask4));
  uint32_t top;
  memcpy(&top, packed + 8, 4);
  /* lane k: the four bytes shifted by 2k, so byte j of lane k holds scale 4k + j's bits */
  const __m128i high = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)top), _mm_setr_epi32(0, 2, 4, 6)), mask2);
  return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
}

/* A block's 16 group scales as signed 16-bit values (groups 0-7 in *lo, 8-15 in *hi)
 * and, for Q2_K, its 16 mins as bytes (else zero). */
static inline __attribute__((always_inline)) void
k16_scales(const uint8_t *block, const K16Type type, __m128i *lo, __m128i *hi, __m128i *min_bytes)
{
  __m128i scale_bytes;
  *min_bytes = _mm_setzero_si128();
  if (type == K16_Q2_K) {
    const HnBlockQ2_K *b = (const HnBlockQ2_K *)block;
    const __m128i packed = _mm_loadu_si128((const __m128i *)b->scales);
    scale_bytes = _mm_and_si128(packed, _mm_set1_epi8(0x0f));
    *min_bytes = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0f));
  } else if (type == K16_Q3_K) {
    scale_bytes = scales_q3_k(((const HnBlockQ3_K *)block)->scales);
  } else {
    scale_bytes = _mm_loadu_si128((const __m128i *)((const HnBlockQ6_K *)block)->scales);
  }
  *lo = _mm_cvtepi8_epi16(scale_bytes);
  *hi = _mm_cvtepi8_epi16(_mm_unpackhi_epi64(scale_bytes, scale_bytes));
}

/* The activation's group sums of a block (groups 0-7 in lo, 8-15 in hi), taken once for
 * all the rows, times the type's −zero point where that fits 16 bits: Q3_K's −4 does
 * (16 · 128 · 4 at most), and saves a 32-bit multiply per row; Q6_K's −32 would not, so
 * `after` holds what k16_corrections still multiplies the rows' 32-bit sums by.  Q2_K has
 * no zero point: its sums stay as they are, for its mins. */
typedef struct {
  __m128i lo, hi;
  int32_t after;
} K16GroupSums;

static inline __attribute__((always_inline)) K16GroupSums
k16_group_sums(const HnBlockQ8_K *y, const K16Type type)
{
  K16GroupSums g = {_mm_loadu_si128((const __m128i *)y->bsums), _mm_loadu_si128((const __m128i *)(y->bsums + 8)),
                    type == K16_Q6_K ? -32 : 1};
  if (type == K16_Q3_K) {
    g.lo = _mm_sub_epi16(_mm_setzero_si128(), _mm_slli_epi16(g.lo, 2));
    g.hi = _mm_sub_epi16(_mm_setzero_si128(), _mm_slli_epi16(g.hi, 2));
  }
  return g;
}

/* What a block's zero point and mins take off its sum, from the group sums above:
 * −zero point · Σ scale · group sum as four 32-bit parts (zero for Q2_K), and Q2_K's
 * Σ min · group sum (*mins; zero for the others). */
static inline __attribute__((always_inline)) __m128i
k16_corrections(const K16Type type, __m128i scales_lo, __m128i scales_hi, __m128i min_bytes, const K16GroupSums *g,
                __m128i *mins)
{
  *mins = _mm_setzero_si128();
  if (type == K16_Q2_K) {
    *mins = _mm_add_epi32(_mm_madd_epi16(_mm_cvtepu8_epi16(min_bytes), g->lo),
                          _mm_madd_epi16(_mm_unpackhi_epi8(min_bytes, _mm_setzero_si128()), g->hi));
    return _mm_setzero_si128();
  }
  const __m128i offsets = _mm_add_epi32(_mm_madd_epi16(scales_lo, g->lo), _mm_madd_epi16(scales_hi, g->hi));
  return g->after == 1 ? offsets : _mm_mullo_epi32(offsets, _mm_set1_epi32(g->after));
}
