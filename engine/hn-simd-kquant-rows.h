/* hn-simd-kquant-rows.h — the four-row decode of the k-quants (HnVecDotRowsFn), written
 * once over a small vector vocabulary and included by the AVX2 and AVX-512 files, which
 * define:
 *   KQ_VEC, KQ_FVEC (integer and float vectors of 256 or 512 bits), KQ_RUNS (32-byte runs
 *   of codes per vector: 1 or 2), KQ_JOIN256(a, b) (a vector of the 256-bit a, then b
 *   where KQ_RUNS is 2; b unused where it is 1), KQ_BCAST128(x) (a 128-bit value in
 *   every 128-bit lane), KQ_FROM128(x) (zero-extended), KQ_LOADU(p) (KQ_RUNS · 32 bytes
 *   at p, unaligned), KQ_ZERO(), KQ_SET1_8(x),
 *   KQ_AND, KQ_OR, KQ_SRLI16(v, n), KQ_SLLI16(v, n), KQ_ADD32, KQ_MADDUBS, KQ_MADD,
 *   KQ_MADD_ACC(acc, a, b) (acc plus KQ_MADD(a, b): one VPDPWSSD where there is one),
 *   KQ_SHUFFLE8, KQ_CVT (int32 to float), KQ_FZERO(), KQ_FSET1(x), KQ_FMADD(a, b, c),
 *   KQ_REDUCE(v) (the sum of the lanes), KQ_HOIST_Y (whether the activation's vectors
 *   are made once per block for all rows, or where they are used) and KQ_NAME(x)
 *   (this level's name for x); and may define KQ_Q2_K_SCALED 1 with
 *   KQ_Q2_K_TABLES(scales) and KQ_Q2_K_RUN(sum, tables, bits, k, y) (a 512-bit step of
 *   Q2_K: its codes times their scales, then one VPDPBUSD per run).
 *
 * A block is taken in steps of KQ_RUNS runs of 32 codes: with 256-bit vectors one run at
 * a time, with 512-bit ones two, so each multiply-add pair does twice the work.  Per
 * block, the activation's group sums are loaded (and for Q4_K/Q5_K's 32-element mins
 * paired) once for all the rows; per row, the scales come out of their packing in
 * registers (hn-simd-x86.h), one byte shuffle per run hands each 128-bit lane its scale,
 * and the mins or the zero point come off in 16-bit multiply-adds against the group
 * sums.  The integer sums are the single-row kernels'; only the float order differs.
 * On the Intel Xeon without AMX the 512-bit steps took Q3_K_M generation from 37.6 to
 * 39.7 t/s and Q5_K_M from 32.2 to 34.8 (docs/speed.md, "Q3_K's scales in registers").
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-simd-x86.h"

#include <stddef.h>

#ifndef KQ_Q2_K_SCALED
#define KQ_Q2_K_SCALED 0
#endif
_Static_assert(!KQ_Q2_K_SCALED || (KQ_RUNS == 2 && KQ_HOIST_Y),
               "KQ_Q2_K_RUN takes a whole Q2_K block in one step, the activation's runs made once per block");

/* A byte shuffle that gives every 16-bit lane scale 2j + pair of its 128-bit lane of
 * 16-bit scales (bytes 4j + 2·pair and the next): Q4_K's sub-block 2j + pair, a 16-group
 * type's group 2j + pair. */
static inline __attribute__((always_inline)) __m256i
KQ_NAME(scale_pick)(int j, int pair)
{
  const int b = 4 * j + 2 * pair;
  return _mm256_set1_epi16((short)(((b + 1) << 8) | b));
}

/* Fetches a block's lines of the row four rows down into L2 and the block 768 bytes
 * further into L1: each row is a stream of its own. */
static inline __attribute__((always_inline)) void
KQ_NAME(fetch_rows)(const uint8_t *block, size_t next_rows, size_t block_bytes)
{
  for (size_t line = 0; line < block_bytes; line += 64) {
    _mm_prefetch((const char *)block + 768 + line, _MM_HINT_T0);
    _mm_prefetch((const char *)block + next_rows + line, _MM_HINT_T1);
  }
}

/* The rows' starts (a row past n_rows reads row 0; its sum is not stored) and their sums,
 * zeroed. */
static inline __attribute__((always_inline)) void
KQ_NAME(rows_begin)(const void *w, size_t row_stride, int n_rows, const uint8_t *x[HN_DOT_ROWS],
                    KQ_FVEC acc[HN_DOT_ROWS])
{
  _Pragma("GCC unroll 4") for (int r = 0; r < HN_DOT_ROWS; r++) {
    x[r] = (const uint8_t *)w + (size_t)(r < n_rows ? r : 0) * row_stride;
    acc[r] = KQ_FZERO();
  }
}

/* Byte-shuffle tables that take a code's high bit out of a nibble of mask bits: 128-bit
 * lane L of row r gives `value` where bit b of the index is set, b = r for Q3_K's third
 * bits (4, every lane alike) and, for Q5_K's fifth bits (16), b = r in lanes 0-1 and
 * b = r ± 2 in lanes 2-3, where a 512-bit step's second run finds its bits.  Whole
 * vectors in memory, so that a table is one load where building it took inserts. */
#define KQ_BIT_LANE(b, v)                                                                                 \
  0, ((1 >> (b)) & 1) * (v), ((2 >> (b)) & 1) * (v), ((3 >> (b)) & 1) * (v), ((4 >> (b)) & 1) * (v),     \
    ((5 >> (b)) & 1) * (v), ((6 >> (b)) & 1) * (v), ((7 >> (b)) & 1) * (v), ((8 >> (b)) & 1) * (v),      \
    ((9 >> (b)) & 1) * (v), ((10 >> (b)) & 1) * (v), ((11 >> (b)) & 1) * (v), ((12 >> (b)) & 1) * (v),   \
    ((13 >> (b)) & 1) * (v), ((14 >> (b)) & 1) * (v), ((15 >> (b)) & 1) * (v)
static const uint8_t KQ_NAME(third_bit_tables)[4][64] = {
  {KQ_BIT_LANE(0, 4), KQ_BIT_LANE(0, 4), KQ_BIT_LANE(0, 4), KQ_BIT_LANE(0, 4)},
  {KQ_BIT_LANE(1, 4), KQ_BIT_LANE(1, 4), KQ_BIT_LANE(1, 4), KQ_BIT_LANE(1, 4)},
  {KQ_BIT_LANE(2, 4), KQ_BIT_LANE(2, 4), KQ_BIT_LANE(2, 4), KQ_BIT_LANE(2, 4)},
  {KQ_BIT_LANE(3, 4), KQ_BIT_LANE(3, 4), KQ_BIT_LANE(3, 4), KQ_BIT_LANE(3, 4)},
};
static const uint8_t KQ_NAME(fifth_bit_tables)[4][64] = {
  {KQ_BIT_LANE(0, 16), KQ_BIT_LANE(0, 16), KQ_BIT_LANE(2, 16), KQ_BIT_LANE(2, 16)},
  {KQ_BIT_LANE(1, 16), KQ_BIT_LANE(1, 16), KQ_BIT_LANE(3, 16), KQ_BIT_LANE(3, 16)},
  {KQ_BIT_LANE(2, 16), KQ_BIT_LANE(2, 16), KQ_BIT_LANE(0, 16), KQ_BIT_LANE(0, 16)},
  {KQ_BIT_LANE(3, 16), KQ_BIT_LANE(3, 16), KQ_BIT_LANE(1, 16), KQ_BIT_LANE(1, 16)},
};
#undef KQ_BIT_LANE

/* A block's d of the four rows (and its dmin, which follows d, where with_min) times the
 * activation's d, converted in one instruction: scale[2r] = yd · d and scale[2r + 1] =
 * −yd · dmin of row r (0 without a dmin).  The rows' multipliers are then broadcast
 * from memory, which costs no vector unit; converting each row's halves on its own took
 * Q2_K's four-row kernel 6-8% longer (docs/speed.md, "The rows' d and dmin converted
 * together"). */
static inline __attribute__((always_inline)) void
KQ_NAME(block_scales)(const uint8_t *const x[HN_DOT_ROWS], size_t at, size_t d_offset, const bool with_min,
                      float yd, float scale[2 * HN_DOT_ROWS])
{
  _Static_assert(HN_DOT_ROWS == 4, "four rows' d and dmin fill one 128-bit vector");
  uint32_t pair[HN_DOT_ROWS]; /* d in the low 16 bits, dmin in the high */
  for (int r = 0; r < HN_DOT_ROWS; r++) {
    uint16_t d;
    if (with_min) {
      memcpy(&pair[r], x[r] + at + d_offset, sizeof pair[r]);
    } else {
      memcpy(&d, x[r] + at + d_offset, sizeof d);
      pair[r] = d;
    }
  }
  const __m128i halves = _mm_setr_epi32((int)pair[0], (int)pair[1], (int)pair[2], (int)pair[3]);
  _mm256_storeu_ps(scale, _mm256_mul_ps(_mm256_cvtph_ps(halves), _mm256_setr_ps(yd, -yd, yd, -yd, yd, -yd, yd, -yd)));
}

/* Q4_K and Q5_K: step p takes runs KQ_RUNS·p onwards (qs bytes 32 apart), each with its
 * low nibbles (scale 2j, activation bytes 64j ..) and its high ones (scale 2j + 1,
 * 64j + 32 ..); Q5_K's fifth bits of run j are bits 2j and 2j + 1 of qh, which the
 * second run of a 512-bit step finds in qh shifted down by two. */
static inline __attribute__((always_inline)) void
KQ_NAME(vec_dot_rows_k4)(int64_t n, const void *w, size_t row_stride, int n_rows, const void *a, float *out,
                         const bool five_bits)
{
  enum { STEPS = 4 / KQ_RUNS };
  const HnBlockQ8_K *y = a;
  const int64_t nb = n / HN_QK_K;
  const size_t block_bytes = five_bits ? sizeof(HnBlockQ5_K) : sizeof(HnBlockQ4_K);
  const uint8_t *x[HN_DOT_ROWS];
  KQ_FVEC acc[HN_DOT_ROWS];
  KQ_NAME(rows_begin)(w, row_stride, n_rows, x, acc);
  const size_t next_rows = HN_DOT_ROWS * row_stride;
  const KQ_VEC low4 = KQ_SET1_8(0x0f);
  for (int64_t i = 0; i < nb; i++) {
    const __m128i bsum_pairs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[i].bsums),
                                              _mm_loadu_si128((const __m128i *)(y[i].bsums + 8)));
    const int8_t *q8 = y[i].qs;
    KQ_VEC y_lo[STEPS], y_hi[STEPS];
    if (KQ_HOIST_Y)
      _Pragma("GCC unroll 4") for (int p = 0; p < STEPS; p++) {
        y_lo[p] = KQ_JOIN256(_mm256_loadu_si256((const __m256i *)(q8 + 64 * KQ_RUNS * p)),
                             _mm256_loadu_si256((const __m256i *)(q8 + 64 * KQ_RUNS * p + 64)));
        y_hi[p] = KQ_JOIN256(_mm256_loadu_si256((const __m256i *)(q8 + 64 * KQ_RUNS * p + 32)),
                             _mm256_loadu_si256((const __m256i *)(q8 + 64 * KQ_RUNS * p + 96)));
      }
    float scale[2 * HN_DOT_ROWS];
    KQ_NAME(block_scales)(x, (size_t)i * block_bytes, five_bits ? offsetof(HnBlockQ5_K, d) : offsetof(HnBlockQ4_K, d),
                          true, y[i].d, scale);
    _Pragma("GCC unroll 4") for (int r = 0; r < HN_DOT_ROWS; r++) {
      const uint8_t *block = x[r] + (size_t)i * block_bytes;
      const HnBlockQ4_K *b4 = (const HnBlockQ4_K *)block;
      const HnBlockQ5_K *b5 = (const HnBlockQ5_K *)block;
      const uint8_t *qs = five_bits ? b5->qs : b4->qs;
      KQ_NAME(fetch_rows)(block, next_rows, block_bytes);
      __m128i scales16, mins16;
      scales_mins_q4_k(five_bits ? b5->scales : b4->scales, &scales16, &mins16);
      const KQ_VEC scales = KQ_BCAST128(scales16);
      const __m256i qh = five_bits ? _mm256_loadu_si256((const __m256i *)b5->qh) : _mm256_setzero_si256();
      KQ_VEC sum = KQ_ZERO();
      _Pragma("GCC unroll 4") for (int p = 0; p < STEPS; p++) {
        const int j = KQ_RUNS * p; /* the step's first run */
        const KQ_VEC bits = KQ_LOADU(qs + 32 * j);
        KQ_VEC lo = KQ_AND(bits, low4);
        KQ_VEC hi = KQ_AND(KQ_SRLI16(bits, 4), low4);
        if (five_bits) {
          /* the step's fifth bits (bits 2j .. 2j + 2·KQ_RUNS − 1 of each qh byte, one
           * nibble) through a byte shuffle per vector, 16 where the run's bit is set: two
           * instructions where four were */
          const __m256i nibble = _mm256_and_si256(_mm256_srli_epi16(qh, 4 * (j / 2)), _mm256_set1_epi8(0x0f));
          const KQ_VEC index = KQ_JOIN256(nibble, nibble);
          lo = KQ_OR(lo, KQ_SHUFFLE8(KQ_LOADU(KQ_NAME(fifth_bit_tables)[2 * j % 4]), index));
          hi = KQ_OR(hi, KQ_SHUFFLE8(KQ_LOADU(KQ_NAME(fifth_bit_tables)[(2 * j + 1) % 4]), index));
        }
        const KQ_VEC ylo = KQ_HOIST_Y ? y_lo[p]
                                      : KQ_JOIN256(_mm256_loadu_si256((const __m256i *)(q8 + 64 * j)),
                                                   _mm256_loadu_si256((const __m256i *)(q8 + 64 * j + 64)));
        const KQ_VEC yhi = KQ_HOIST_Y ? y_hi[p]
                                      : KQ_JOIN256(_mm256_loadu_si256((const __m256i *)(q8 + 64 * j + 32)),
                                                   _mm256_loadu_si256((const __m256i *)(q8 + 64 * j + 96)));
        const KQ_VEC scale_lo = KQ_SHUFFLE8(scales, KQ_JOIN256(KQ_NAME(scale_pick)(j, 0), KQ_NAME(scale_pick)(j + 1, 0)));
        const KQ_VEC scale_hi = KQ_SHUFFLE8(scales, KQ_JOIN256(KQ_NAME(scale_pick)(j, 1), KQ_NAME(scale_pick)(j + 1, 1)));
        sum = KQ_ADD32(sum, KQ_ADD32(KQ_MADD(KQ_MADDUBS(lo, ylo), scale_lo), KQ_MADD(KQ_MADDUBS(hi, yhi), scale_hi)));
      }
      const KQ_VEC min_sum = KQ_FROM128(_mm_madd_epi16(mins16, bsum_pairs));
      acc[r] = KQ_FMADD(KQ_FSET1(scale[2 * r]), KQ_CVT(sum), acc[r]);
      acc[r] = KQ_FMADD(KQ_FSET1(scale[2 * r + 1]), KQ_CVT(min_sum), acc[r]);
    }
  }
  for (int r = 0; r < n_rows && r < HN_DOT_ROWS; r++)
    out[r] = KQ_REDUCE(acc[r]);
}

/* The codes of the k16 types' step s: half h = KQ_RUNS·s onwards (128 elements each),
 * run k (32 bytes of each half) in q[k], unsigned.  A 512-bit step holds both halves:
 * the second half's bits sit 32 bytes (Q2_K, Q3_K, Q6_K's qh) or 64 bytes (Q6_K's ql)
 * further, and Q3_K's high-mask bits of the second half are bits 4 to 7 of hmask,
 * shifted down by four. */
static inline __attribute__((always_inline)) void
KQ_NAME(k16_codes)(const uint8_t *block, int s, const K16Type type, KQ_VEC q[4])
{
  const KQ_VEC two_bits = KQ_SET1_8(0x03), low4 = KQ_SET1_8(0x0f);
  const int h = KQ_RUNS * s;
  if (type == K16_Q6_K) {
    const HnBlockQ6_K *b = (const HnBlockQ6_K *)block;
    /* run k: nibbles of ql[64h + 32(k % 2) ..], low for k < 2, high after; its fifth and
     * sixth bits at 2k of qh[32h ..] */
    const KQ_VEC qh = KQ_LOADU(b->qh + 32 * h);
    const KQ_VEC l0 = KQ_JOIN256(_mm256_loadu_si256((const __m256i *)(b->ql + 64 * h)),
                                 _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 64)));
    const KQ_VEC l1 = KQ_JOIN256(_mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32)),
                                 _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 96)));
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
      const KQ_VEC low = KQ_AND(k < 2 ? (k ? l1 : l0) : KQ_SRLI16(k == 3 ? l1 : l0, 4), low4);
      q[k] = KQ_OR(low, KQ_SLLI16(KQ_AND(KQ_SRLI16(qh, 2 * k), two_bits), 4));
    }
    return;
  }
  const uint8_t *qs = type == K16_Q2_K ? ((const HnBlockQ2_K *)block)->qs : ((const HnBlockQ3_K *)block)->qs;
  const KQ_VEC bits = KQ_LOADU(qs + 32 * h);
  /* Q3_K: each byte's four high-mask bits of the step (one per run) as a nibble, which a
   * byte shuffle per run turns into the run's third bit, in place: one instruction where
   * a shift, a mask and a shift back were */
  KQ_VEC high_nibble = KQ_ZERO();
  if (type == K16_Q3_K) {
    const __m256i hmask = _mm256_loadu_si256((const __m256i *)((const HnBlockQ3_K *)block)->hmask);
    high_nibble = KQ_AND(KQ_JOIN256(_mm256_srli_epi16(hmask, 4 * h), _mm256_srli_epi16(hmask, 4 * h + 4)), low4);
  }
  _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
    q[k] = KQ_AND(KQ_SRLI16(bits, 2 * k), two_bits);
    if (type == K16_Q3_K)
      q[k] = KQ_OR(q[k], KQ_SHUFFLE8(KQ_LOADU(KQ_NAME(third_bit_tables)[k]), high_nibble));
  }
}

/* Q2_K, Q3_K and Q6_K: 16 groups of 16, so each run of 32 codes covers two groups; the
 * 128-bit lanes of a step hold groups 2k and 2k + 1 of each half, and the scale vector
 * holds the first half's eight scales (then, at 512 bits, the second half's).  Q2_K's
 * mins (4 bits each) come off as dmin · Σ min · group sum, Q3_K's and Q6_K's zero points
 * (4 and 32) as zero point · Σ scale · group sum. */
static inline __attribute__((always_inline)) void
KQ_NAME(vec_dot_rows_k16)(int64_t n, const void *w, size_t row_stride, int n_rows, const void *a, float *out,
                          const K16Type type)
{
  enum { STEPS = 2 / KQ_RUNS };
  const HnBlockQ8_K *y = a;
  const int64_t nb = n / HN_QK_K;
  const size_t block_bytes = type == K16_Q2_K   ? sizeof(HnBlockQ2_K)
                             : type == K16_Q3_K ? sizeof(HnBlockQ3_K)
                                                : sizeof(HnBlockQ6_K);
  const size_t d_offset = type == K16_Q2_K   ? offsetof(HnBlockQ2_K, d)
                          : type == K16_Q3_K ? offsetof(HnBlockQ3_K, d)
                                             : offsetof(HnBlockQ6_K, d);
  const uint8_t *x[HN_DOT_ROWS];
  KQ_FVEC acc[HN_DOT_ROWS];
  KQ_NAME(rows_begin)(w, row_stride, n_rows, x, acc);
  const size_t next_rows = HN_DOT_ROWS * row_stride;
  for (int64_t i = 0; i < nb; i++) {
    const K16GroupSums group_sums = k16_group_sums(&y[i], type);
    /* run k of half h: activation bytes 128h + 32k .. */
    KQ_VEC yk[STEPS][4];
    if (KQ_HOIST_Y)
      _Pragma("GCC unroll 2") for (int s = 0; s < STEPS; s++)
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
          yk[s][k] = KQ_JOIN256(_mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * KQ_RUNS * s + 32 * k)),
                                _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * KQ_RUNS * s + 128 + 32 * k)));
    float scale[2 * HN_DOT_ROWS];
    KQ_NAME(block_scales)(x, (size_t)i * block_bytes, d_offset, type == K16_Q2_K, y[i].d, scale);
    _Pragma("GCC unroll 4") for (int r = 0; r < HN_DOT_ROWS; r++) {
      const uint8_t *block = x[r] + (size_t)i * block_bytes;
      KQ_NAME(fetch_rows)(block, next_rows, block_bytes);
      __m128i scales_lo, scales_hi, min_bytes, mins;
      k16_scales(block, type, &scales_lo, &scales_hi, &min_bytes);
      KQ_VEC sum = KQ_FROM128(k16_corrections(type, scales_lo, scales_hi, min_bytes, &group_sums, &mins));
#if KQ_Q2_K_SCALED
      /* four instructions per run where the scales below take six (measured: docs/speed.md,
       * "Q2_K's scales in its codes"); the 16-bit scales of k16_scales go unused here, and
       * the compiler drops their widening */
      if (type == K16_Q2_K) {
        const HnBlockQ2_K *b2 = (const HnBlockQ2_K *)block;
        const KQ_VEC tables = KQ_Q2_K_TABLES(b2->scales), bits = KQ_LOADU(b2->qs);
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) sum = KQ_Q2_K_RUN(sum, tables, bits, k, yk[0][k]);
      } else
#endif
      _Pragma("GCC unroll 2") for (int s = 0; s < STEPS; s++) {
        const KQ_VEC scales = KQ_JOIN256(_mm256_broadcastsi128_si256(s ? scales_hi : scales_lo),
                                         _mm256_broadcastsi128_si256(scales_hi));
        KQ_VEC q[4];
        KQ_NAME(k16_codes)(block, s, type, q);
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
          /* the low 128-bit lane of each half takes the scale of group 2k, the high 2k + 1 */
          const __m256i pick = _mm256_set_m128i(_mm256_castsi256_si128(KQ_NAME(scale_pick)(k, 1)),
                                                _mm256_castsi256_si128(KQ_NAME(scale_pick)(k, 0)));
          const int h = KQ_RUNS * s;
          const KQ_VEC y_run =
            KQ_HOIST_Y ? yk[s][k]
                       : KQ_JOIN256(_mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * k)),
                                    _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 128 + 32 * k)));
          sum = KQ_MADD_ACC(sum, KQ_MADDUBS(q[k], y_run), KQ_SHUFFLE8(scales, KQ_JOIN256(pick, pick)));
        }
      }
      acc[r] = KQ_FMADD(KQ_FSET1(scale[2 * r]), KQ_CVT(sum), acc[r]);
      if (type == K16_Q2_K)
        acc[r] = KQ_FMADD(KQ_FSET1(scale[2 * r + 1]), KQ_CVT(KQ_FROM128(mins)), acc[r]);
    }
  }
  for (int r = 0; r < n_rows && r < HN_DOT_ROWS; r++)
    out[r] = KQ_REDUCE(acc[r]);
}

/* the HnVecDotRowsFn entry points, one instance of a body per type */
#define KQ_ENTRY(TYPE_NAME, BODY, TYPE)                                                                 \
  static void KQ_NAME(vec_dot_rows_##TYPE_NAME)(int64_t n, const void *w, size_t row_stride, int n_rows, \
                                               const void *a, float *out)                              \
  {                                                                                                     \
    KQ_NAME(BODY)(n, w, row_stride, n_rows, a, out, TYPE);                                              \
  }
KQ_ENTRY(q4_k, vec_dot_rows_k4, false)
KQ_ENTRY(q5_k, vec_dot_rows_k4, true)
KQ_ENTRY(q2_k, vec_dot_rows_k16, K16_Q2_K)
KQ_ENTRY(q3_k, vec_dot_rows_k16, K16_Q3_K)
KQ_ENTRY(q6_k, vec_dot_rows_k16, K16_Q6_K)
#undef KQ_ENTRY

#undef KQ_VEC
#undef KQ_FVEC
#undef KQ_RUNS
#undef KQ_JOIN256
#undef KQ_BCAST128
#undef KQ_FROM128
#undef KQ_LOADU
#undef KQ_ZERO
#undef KQ_SET1_8
#undef KQ_AND
#undef KQ_OR
#undef KQ_SRLI16
#undef KQ_SLLI16
#undef KQ_ADD32
#undef KQ_MADDUBS
#undef KQ_MADD
#undef KQ_MADD_ACC
#undef KQ_SHUFFLE8
#undef KQ_CVT
#undef KQ_FZERO
#undef KQ_FSET1
#undef KQ_FMADD
#undef KQ_REDUCE
#undef KQ_HOIST_Y
#undef KQ_Q2_K_SCALED
#undef KQ_Q2_K_TABLES
#undef KQ_Q2_K_RUN
#undef KQ_NAME
