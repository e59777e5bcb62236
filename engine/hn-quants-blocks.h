/* hn-quants-blocks.h — in-memory layout of every block type (internal to the engine).
 *
 * These structs mirror the GGUF/ggml on-disk blocks byte for byte so that a tensor in the
 * memory mapping can be read as an array of them.  Half-precision fields are kept as raw
 * uint16_t bits (IEEE half unless the name says otherwise); multi-byte fields are little
 * endian, like the file.  Shared by the reference code (hn-quants.c) and the SIMD kernels.
 *
 * Every struct has alignment 2 (or 4 for Q8_K, which is only ever built in memory), so a
 * row of blocks that starts on an even address can be indexed directly.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-quants.h"

#include <string.h>

#define HN_QK4_0 32
#define HN_QK4_1 32
#define HN_QK5_0 32
#define HN_QK5_1 32
#define HN_QK8_0 32
#define HN_QK8_1 32

/* d * (q - 8), q in 0..15; element j in the low nibble of qs[j], element j+16 in the high. */
typedef struct {
  uint16_t d;
  uint8_t qs[HN_QK4_0 / 2];
} HnBlockQ4_0;

/* d * q + m, q in 0..15, same nibble order as Q4_0. */
typedef struct {
  uint16_t d;
  uint16_t m;
  uint8_t qs[HN_QK4_1 / 2];
} HnBlockQ4_1;

/* d * (q - 16), q in 0..31: low 4 bits as in Q4_0, bit 4 of element j is bit j of qh
 * (a little-endian uint32). */
typedef struct {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[HN_QK5_0 / 2];
} HnBlockQ5_0;

/* d * q + m, q in 0..31, bits laid out as in Q5_0. */
typedef struct {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[HN_QK5_1 / 2];
} HnBlockQ5_1;

/* d * q, q in -127..127. */
typedef struct {
  uint16_t d;
  int8_t qs[HN_QK8_0];
} HnBlockQ8_0;

/* Activation format for Q4_1/Q5_1: like Q8_0 plus s = d * sum(qs), which carries the
 * weight block's offset m through the dot product. */
typedef struct {
  uint16_t d;
  uint16_t s;
  int8_t qs[HN_QK8_1];
} HnBlockQ8_1;

/* 16 groups of 16 with 2-bit quants: x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4).
 * qs byte l of each 32-byte half holds 4 elements 32 apart (shifts 0, 2, 4, 6). */
typedef struct {
  uint8_t scales[HN_QK_K / 16];
  uint8_t qs[HN_QK_K / 4];
  uint16_t d;
  uint16_t dmin;
} HnBlockQ2_K;

/* 16 groups of 16 with 3-bit quants: low 2 bits in qs (as Q2_K), the third bit in hmask
 * (bit k of hmask[l] belongs to element 32k + l; a clear bit subtracts 4).  The 16 scales
 * are 6-bit, stored in 12 bytes, minus 32. */
typedef struct {
  uint8_t hmask[HN_QK_K / 8];
  uint8_t qs[HN_QK_K / 4];
  uint8_t scales[12];
  uint16_t d;
} HnBlockQ3_K;

/* 8 groups of 32 with 4-bit quants, 6-bit scale and min per group packed in 12 bytes:
 * x = d * sc * q - dmin * m.  Each 32 bytes of qs hold two groups (low then high nibble). */
typedef struct {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[HN_QK_K / 2];
} HnBlockQ4_K;

/* As Q4_K with a fifth bit per element in qh (bit 2k / 2k+1 of qh[l] for the groups of
 * the k-th 64-element chunk). */
typedef struct {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[HN_QK_K / 8];
  uint8_t qs[HN_QK_K / 2];
} HnBlockQ5_K;

/* 16 groups of 16 with 6-bit quants (4 low bits in ql, 2 high bits in qh) and signed
 * 8-bit scales: x = d * scales[g] * (q - 32). */
typedef struct {
  uint8_t ql[HN_QK_K / 2];
  uint8_t qh[HN_QK_K / 4];
  int8_t scales[HN_QK_K / 16];
  uint16_t d;
} HnBlockQ6_K;

/* Activation format for the k-quants: a float scale, 256 signed bytes and the sums of
 * each group of 16 (used to apply the weight blocks' mins without touching the quants). */
typedef struct {
  float d;
  int8_t qs[HN_QK_K];
  int16_t bsums[HN_QK_K / 16];
} HnBlockQ8_K;

_Static_assert(sizeof(HnBlockQ4_0) == 18, "Q4_0 block size");
_Static_assert(sizeof(HnBlockQ4_1) == 20, "Q4_1 block size");
_Static_assert(sizeof(HnBlockQ5_0) == 22, "Q5_0 block size");
_Static_assert(sizeof(HnBlockQ5_1) == 24, "Q5_1 block size");
_Static_assert(sizeof(HnBlockQ8_0) == 34, "Q8_0 block size");
_Static_assert(sizeof(HnBlockQ8_1) == 36, "Q8_1 block size");
_Static_assert(sizeof(HnBlockQ2_K) == 84, "Q2_K block size");
_Static_assert(sizeof(HnBlockQ3_K) == 110, "Q3_K block size");
_Static_assert(sizeof(HnBlockQ4_K) == 144, "Q4_K block size");
_Static_assert(sizeof(HnBlockQ5_K) == 176, "Q5_K block size");
_Static_assert(sizeof(HnBlockQ6_K) == 210, "Q6_K block size");
_Static_assert(sizeof(HnBlockQ8_K) == 292, "Q8_K block size");

/* Half to float without branches or a table, exact for every half (including
 * subnormals, infinities and NaN payloads, signaling or not): the same value as hn_fp16_to_fp32, inlined so
 * the decoders' loops vectorize.  Normal halves: shift exponent and mantissa into place
 * and rebias with one exact multiplication by 2^-112; subnormals: place the mantissa
 * below a float with exponent -1 and subtract 0.5, which is exact as well. */
static inline float
hn_half_to_float(uint16_t h)
{
  const uint32_t w = (uint32_t)h << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w; /* exponent and mantissa, sign shifted out */
  uint32_t bits = (two_w >> 4) + (0xE0u << 23);
  float normal;
  memcpy(&normal, &bits, 4);
  normal *= 0x1.0p-112f;
  bits = (two_w >> 17) | (126u << 23);
  float subnormal;
  memcpy(&subnormal, &bits, 4);
  subnormal -= 0.5f;
  float magnitude = two_w < (1u << 27) ? subnormal : normal;
  memcpy(&bits, &magnitude, 4);
  /* Infinities and NaNs bypass the multiplication, which would quiet a signaling NaN. */
  const uint32_t special = 0x7f800000u | ((uint32_t)(h & 0x3ffu) << 13);
  bits = (h & 0x7c00u) == 0x7c00u ? special : bits;
  bits |= sign;
  float result;
  memcpy(&result, &bits, 4);
  return result;
}

/* The 6-bit scale and min of group j (0..7) of a Q4_K/Q5_K block. */
static inline void
hn_q4k_scale_min(int j, const uint8_t *scales, uint8_t *sc, uint8_t *m)
{
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (uint8_t)((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *m = (uint8_t)((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

/* The 6-bit scale and min of sub-block j (0..15) of a run of Q4_K regrouped
 * (HN_TYPE_Q4_K_GROUPED in hn-quants.h). */
static inline void
hn_q4k_run_scale_min(int j, const uint8_t *run, uint8_t *sc, uint8_t *m)
{
  const uint8_t packed = run[HN_RUN_Q4_K_SCALES_AT + j];
  *sc = packed & 63;
  *m = (uint8_t)(packed >> 6 | ((run[HN_RUN_Q4_K_MINS_HIGH_AT + j / 2] >> (4 * (j % 2))) & 0xF) << 2);
}

/* The signed scale (-32..31) of group j (0..15) of a Q3_K block. */
static inline int
hn_q3k_scale(int j, const uint8_t *scales)
{
  int low = j < 8 ? (scales[j] & 0xF) : (scales[j - 8] >> 4);
  int high = (scales[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
  return (low | (high << 4)) - 32;
}
