/* hn-simd-blocks.h — GGUF block layouts as seen by the SIMD kernels.
 * (Sizes are checked against hn-type-traits.c by static assertions.) */
#pragma once

#include <stdint.h>

#include "hn-quants.h"

typedef struct { uint16_t d; uint8_t qs[16]; } SimdBlockQ4_0;
typedef struct { uint16_t d, m; uint8_t qs[16]; } SimdBlockQ4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } SimdBlockQ5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } SimdBlockQ5_1;
typedef struct { uint16_t d; int8_t qs[32]; } SimdBlockQ8_0;
typedef struct { uint16_t d, s; int8_t qs[32]; } SimdBlockQ8_1;
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } SimdBlockQ2_K;
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } SimdBlockQ3_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } SimdBlockQ4_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } SimdBlockQ5_K;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } SimdBlockQ6_K;
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } SimdBlockQ8_K;

_Static_assert(sizeof(SimdBlockQ4_0) == 18, "Q4_0 block");
_Static_assert(sizeof(SimdBlockQ4_1) == 20, "Q4_1 block");
_Static_assert(sizeof(SimdBlockQ5_0) == 22, "Q5_0 block");
_Static_assert(sizeof(SimdBlockQ5_1) == 24, "Q5_1 block");
_Static_assert(sizeof(SimdBlockQ8_0) == 34, "Q8_0 block");
_Static_assert(sizeof(SimdBlockQ8_1) == 36, "Q8_1 block");
_Static_assert(sizeof(SimdBlockQ2_K) == 84, "Q2_K block");
_Static_assert(sizeof(SimdBlockQ3_K) == 110, "Q3_K block");
_Static_assert(sizeof(SimdBlockQ4_K) == 144, "Q4_K block");
_Static_assert(sizeof(SimdBlockQ5_K) == 176, "Q5_K block");
_Static_assert(sizeof(SimdBlockQ6_K) == 210, "Q6_K block");
_Static_assert(sizeof(SimdBlockQ8_K) == 292, "Q8_K block");

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block. */
static inline void
simd_scale_min_k4(int j, const uint8_t *q, uint8_t *scale, uint8_t *min)
{
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}
