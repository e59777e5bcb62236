/* hn-simd-panel.h — packing weight rows into panels for the prompt-processing GEMM,
 * shared by the AVX2, AVX-512 and NEON kernels (included by each, compiled with its
 * flags).
 *
 * A panel holds 16 weight rows, per 32-element block: eight 64-byte vectors whose 32-bit
 * lane r carries four consecutive codes of row r, then the 16 rows' scales (two sets for
 * types with 16-element groups) and their mins (one set per 32 elements; Q2_K, whose
 * mins change every 16 elements, has the larger PanelBlockMin16 with two).  The includer
 * defines transpose_codes(tmp, codes), which writes the 32 codes of each of 16 rows
 * (tmp[r], 32 bytes apart) in that lane order, with whichever gathers or shuffles its
 * instruction set has.
 *
 * The packers are written once, on 32 bytes of codes at a time (PanelCodes and the pc_*
 * operations below: one 256-bit register on x86, a pair of 128-bit registers on ARM64),
 * so every level packs exactly the same panel.
 *
 * Codes are unsigned with a zero point (Q4_0: 8, Q5_0: 16, Q3_K: 4, Q6_K: 32, Q8_0: 128;
 * 0 for the types with mins), which the GEMM removes with the activation's precomputed
 * -offset · Σq, except Q8_0 packed signed (pack_panel_q8_0_signed) for kernels whose
 * byte products saturate on 255 × 127 or that multiply signed bytes.  The "min" of a
 * block is whatever its weights add on top of scale · code: -dmin · m for the k-quants,
 * +m for Q4_1 and Q5_1; the GEMM multiplies it by the activation's d · Σq.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-quants-blocks.h"
#include "hn-quants.h"
#include "hn-simd.h"

#include <stddef.h>
#include <string.h>

/* ---- 32 bytes of codes ----
 *
 * pc_shr and pc_shl may carry bits across byte boundaries (x86 shifts 16-bit lanes):
 * callers mask the result, or shift values that leave no bits to carry. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

typedef __m256i PanelCodes;

static inline float
panel_h2f(uint16_t h)
{
  return _cvtsh_ss(h);
}

static inline PanelCodes
pc_load(const uint8_t *p)
{
  return _mm256_loadu_si256((const __m256i *)p);
}

static inline void
pc_store(uint8_t *p, PanelCodes v)
{
  _mm256_store_si256((__m256i *)p, v);
}

static inline PanelCodes
pc_set1(char value)
{
  return _mm256_set1_epi8(value);
}

static inline PanelCodes
pc_and(PanelCodes a, PanelCodes b)
{
  return _mm256_and_si256(a, b);
}

static inline PanelCodes
pc_or(PanelCodes a, PanelCodes b)
{
  return _mm256_or_si256(a, b);
}

static inline PanelCodes
pc_xor(PanelCodes a, PanelCodes b)
{
  return _mm256_xor_si256(a, b);
}

static inline PanelCodes
pc_shr(PanelCodes v, int bits)
{
  return _mm256_srli_epi16(v, bits);
}

static inline PanelCodes
pc_shl(PanelCodes v, int bits)
{
  return _mm256_slli_epi16(v, bits);
}

/* The 32 codes of a block's 16 packed nibbles: low nibbles (elements 0-15), then high. */
static inline PanelCodes
panel_nibbles(const uint8_t *qs)
{
  const __m128i q = _mm_loadu_si128((const __m128i *)qs);
  const __m128i low4 = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low4), _mm_and_si128(q, low4));
}

/* 32 bits (little-endian bytes) -> 32 bytes: `value` in byte i where bit i is set. */
static inline PanelCodes
panel_bits(const uint8_t *bits, char value)
{
  uint32_t x;
  memcpy(&x, bits, 4);
  /* byte i gets byte i / 8 of x, then keeps only bit i % 8 */
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x),
                                             _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                               0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(value));
}

/* `value` in each byte of `bytes` whose bit `bit` is set, else 0. */
static inline PanelCodes
panel_bit_plane(PanelCodes bytes, int bit, char value)
{
  const __m256i m = _mm256_set1_epi8((char)(1 << bit));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, m), m), _mm256_set1_epi8(value));
}

#elif defined(__aarch64__)
#include <arm_neon.h>

typedef uint8x16x2_t PanelCodes;

static inline float
panel_h2f(uint16_t h)
{
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

static inline PanelCodes
pc_load(const uint8_t *p)
{
  return (PanelCodes){ { vld1q_u8(p), vld1q_u8(p + 16) } };
}

static inline void
pc_store(uint8_t *p, PanelCodes v)
{
  vst1q_u8(p, v.val[0]);
  vst1q_u8(p + 16, v.val[1]);
}

static inline PanelCodes
pc_set1(char value)
{
  const uint8x16_t v = vdupq_n_u8((uint8_t)value);
  return (PanelCodes){ { v, v } };
}

static inline PanelCodes
pc_and(PanelCodes a, PanelCodes b)
{
  return (PanelCodes){ { vandq_u8(a.val[0], b.val[0]), vandq_u8(a.val[1], b.val[1]) } };
}

static inline PanelCodes
pc_or(PanelCodes a, PanelCodes b)
{
  return (PanelCodes){ { vorrq_u8(a.val[0], b.val[0]), vorrq_u8(a.val[1], b.val[1]) } };
}

static inline PanelCodes
pc_xor(PanelCodes a, PanelCodes b)
{
  return (PanelCodes){ { veorq_u8(a.val[0], b.val[0]), veorq_u8(a.val[1], b.val[1]) } };
}

/* USHL by a negative count shifts right; the count may be a variable */
static inline PanelCodes
pc_shr(PanelCodes v, int bits)
{
  const int8x16_t count = vdupq_n_s8((int8_t)-bits);
  return (PanelCodes){ { vshlq_u8(v.val[0], count), vshlq_u8(v.val[1], count) } };
}

static inline PanelCodes
pc_shl(PanelCodes v, int bits)
{
  const int8x16_t count = vdupq_n_s8((int8_t)bits);
  return (PanelCodes){ { vshlq_u8(v.val[0], count), vshlq_u8(v.val[1], count) } };
}

static inline PanelCodes
panel_nibbles(const uint8_t *qs)
{
  const uint8x16_t q = vld1q_u8(qs);
  return (PanelCodes){ { vandq_u8(q, vdupq_n_u8(0x0f)), vshrq_n_u8(q, 4) } };
}

static inline PanelCodes
panel_bits(const uint8_t *bits, char value)
{
  static const uint8_t bit_of_byte[16] = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
  const uint8x16_t bit = vld1q_u8(bit_of_byte), v = vdupq_n_u8((uint8_t)value);
  /* byte i gets byte i / 8 of the bits, then keeps only bit i % 8 */
  const uint8x16_t lo = vcombine_u8(vdup_n_u8(bits[0]), vdup_n_u8(bits[1]));
  const uint8x16_t hi = vcombine_u8(vdup_n_u8(bits[2]), vdup_n_u8(bits[3]));
  return (PanelCodes){ { vandq_u8(vtstq_u8(lo, bit), v), vandq_u8(vtstq_u8(hi, bit), v) } };
}

static inline PanelCodes
panel_bit_plane(PanelCodes bytes, int bit, char value)
{
  const uint8x16_t m = vdupq_n_u8((uint8_t)(1 << bit)), v = vdupq_n_u8((uint8_t)value);
  return (PanelCodes){ { vandq_u8(vtstq_u8(bytes.val[0], m), v), vandq_u8(vtstq_u8(bytes.val[1], m), v) } };
}

#else
#error "hn-simd-panel.h: no 32-byte code operations for this processor"
#endif

typedef struct {
  uint8_t codes[8][64];
  float scale[2][16];
  float neg_min[1][16];
} PanelBlock;

/* Q2_K: scales and mins per 16 elements. */
typedef struct {
  uint8_t codes[8][64];
  float scale[2][16];
  float neg_min[2][16];
} PanelBlockMin16;

_Static_assert(sizeof(PanelBlock) % 64 == 0, "panel block alignment");
_Static_assert(sizeof(PanelBlockMin16) == HN_PANEL_BLOCK_BYTES, "largest panel block size");

/* Defined by the includer. */
static inline void transpose_codes(const uint8_t tmp[HN_PANEL_ROWS][32], uint8_t codes[8][64]);

static inline const uint8_t *
panel_row(const uint8_t *weight, size_t row_stride, int r, int n_rows)
{
  /* missing rows of a tail panel repeat the last row; their outputs are not stored */
  return weight + (size_t)(r < n_rows ? r : n_rows - 1) * row_stride;
}

/* A packer reads its 16 rows side by side: 16 short streams, which the hardware
 * prefetchers follow poorly, so that waiting for the weights was most of the time of a
 * panel packed for a few tokens.  As a packer starts on a row's next `bytes`, it asks
 * for the bytes PANEL_AHEAD further on into the first-level cache and for the same place
 * 16 rows down (the next panel) into the second.  AMD EPYC (Zen 5), TinyLlama-shaped
 * Q4_K_M, `bench -p 8`: 47 t/s without, 63–70 with both, 60–66 with the first alone,
 * 52–55 with the second alone; 576 or 1024 bytes ahead were slower than 288. */
#define PANEL_AHEAD 288

static inline void
panel_prefetch(const void *at, size_t bytes, size_t row_stride)
{
  const char *p = at;
  for (size_t off = 0; off < bytes; off += 64) {
    __builtin_prefetch(p + off + PANEL_AHEAD, 0, 3);
    __builtin_prefetch(p + off + HN_PANEL_ROWS * row_stride, 0, 2);
  }
}

#if defined(__x86_64__) || defined(__i386__)
static inline void ungroup_run_q8_0(const uint8_t *group, HnBlockQ8_0 out[HN_GROUP_BLOCKS]);
#endif

/* Q8_0 codes: the signed quants with their sign bit flipped by `flip` (0x80: unsigned
 * with zero point 128; 0: as they are).  With `grouped` the rows are Q8_0 regrouped at
 * load (x86 only), each run of 16 blocks put back in file form first. */
static inline void
pack_panel_q8_0_flipped(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel, char flip,
                        bool grouped)
{
  PanelBlock *pb = panel;
  _Alignas(64) uint8_t tmp[HN_PANEL_ROWS][32];
#if defined(__x86_64__) || defined(__i386__)
  HnBlockQ8_0 run[HN_PANEL_ROWS][HN_GROUP_BLOCKS];
  const int64_t full = grouped ? n / 32 / HN_GROUP_BLOCKS * HN_GROUP_BLOCKS : 0;
#else
  (void)grouped; /* the regrouped layouts are x86's */
#endif
  for (int64_t b = 0; b < n / 32; b++, pb++) {
#if defined(__x86_64__) || defined(__i386__)
    if (b < full && b % HN_GROUP_BLOCKS == 0)
      for (int r = 0; r < HN_PANEL_ROWS; r++)
        ungroup_run_q8_0(panel_row(weight, row_stride, r, n_rows) + b * sizeof(HnBlockQ8_0), run[r]);
#endif
    for (int r = 0; r < HN_PANEL_ROWS; r++) {
      const HnBlockQ8_0 *blk = (const HnBlockQ8_0 *)panel_row(weight, row_stride, r, n_rows) + b;
      panel_prefetch(blk, sizeof *blk, row_stride); /* (a regrouped run takes the same bytes) */
#if defined(__x86_64__) || defined(__i386__)
      if (b < full)
        blk = &run[r][b % HN_GROUP_BLOCKS];
#endif
      pc_store(tmp[r], pc_xor(pc_load((const uint8_t *)blk->qs), pc_set1(flip)));
      pb->scale[0][r] = panel_h2f(blk->d);
    }
    transpose_codes(tmp, pb->codes);
  }
}

static void __attribute__((unused))
pack_panel_q8_0(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  pack_panel_q8_0_flipped(weight, row_stride, n_rows, n, panel, (char)0x80, false);
}

static void __attribute__((unused))
pack_panel_q8_0_signed(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  pack_panel_q8_0_flipped(weight, row_stride, n_rows, n, panel, 0, false);
}

static inline PanelCodes
codes_q4_0(const HnBlockQ4_0 *b)
{
  return panel_nibbles(b->qs);
}

static inline PanelCodes
codes_q4_1(const HnBlockQ4_1 *b)
{
  return panel_nibbles(b->qs);
}

static inline PanelCodes
codes_q5_0(const HnBlockQ5_0 *b)
{
  return pc_or(panel_nibbles(b->qs), panel_bits(b->qh, 0x10));
}

static inline PanelCodes
codes_q5_1(const HnBlockQ5_1 *b)
{
  return pc_or(panel_nibbles(b->qs), panel_bits(b->qh, 0x10));
}

#define PANEL_NO_MIN(blk) 0.0f
#define PANEL_MIN_M(blk) panel_h2f((blk)->m)

/* The 32-element types: per block its 32 codes, its scale d and its min (+m, or 0). */
#define DEFINE_PACK_PANEL_32(NAME, BLOCK, CODES, MIN)                                                \
  static void NAME(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)      \
  {                                                                                                \
    PanelBlock *pb = panel;                                                                        \
    _Alignas(64) uint8_t tmp[HN_PANEL_ROWS][32];                                                   \
    for (int64_t b = 0; b < n / 32; b++, pb++) {                                                   \
      for (int r = 0; r < HN_PANEL_ROWS; r++) {                                                    \
        const BLOCK *blk = (const BLOCK *)panel_row(weight, row_stride, r, n_rows) + b;            \
        panel_prefetch(blk, sizeof *blk, row_stride);                                              \
        pc_store(tmp[r], CODES(blk));                                                              \
        pb->scale[0][r] = panel_h2f(blk->d);                                                       \
        pb->neg_min[0][r] = MIN(blk);                                                              \
      }                                                                                            \
      transpose_codes(tmp, pb->codes);                                                             \
    }                                                                                              \
  }

DEFINE_PACK_PANEL_32(pack_panel_q4_0, HnBlockQ4_0, codes_q4_0, PANEL_NO_MIN)
DEFINE_PACK_PANEL_32(pack_panel_q5_0, HnBlockQ5_0, codes_q5_0, PANEL_NO_MIN)
DEFINE_PACK_PANEL_32(pack_panel_q4_1, HnBlockQ4_1, codes_q4_1, PANEL_MIN_M)
DEFINE_PACK_PANEL_32(pack_panel_q5_1, HnBlockQ5_1, codes_q5_1, PANEL_MIN_M)

#if defined(__x86_64__) || defined(__i386__)
/* The layouts regrouped at load (hn-quants.h; x86 only, where their decode kernels
 * are).  In each 128-bit lane of four vectors of a half run sit four bytes of each of
 * four blocks, so a 4 × 4 transpose of 32-bit words within the lanes gives the 16 bytes
 * those vectors hold of block 4c + k (c the lane) in t[k] — 8 unpacks per 8 blocks. */
static inline void
transpose_quads(__m256i v0, __m256i v1, __m256i v2, __m256i v3, uint8_t t[4][32])
{
  const __m256i a0 = _mm256_unpacklo_epi32(v0, v1), a1 = _mm256_unpackhi_epi32(v0, v1);
  const __m256i a2 = _mm256_unpacklo_epi32(v2, v3), a3 = _mm256_unpackhi_epi32(v2, v3);
  _mm256_storeu_si256((__m256i *)t[0], _mm256_unpacklo_epi64(a0, a2));
  _mm256_storeu_si256((__m256i *)t[1], _mm256_unpackhi_epi64(a0, a2));
  _mm256_storeu_si256((__m256i *)t[2], _mm256_unpacklo_epi64(a1, a3));
  _mm256_storeu_si256((__m256i *)t[3], _mm256_unpackhi_epi64(a1, a3));
}

/* Eight code vectors of a half run (blocks 8 · half ..), vector 2s holding elements
 * 4s..4s+3 of each block and 2s + 1 elements 16+4s..16+4s+3, as each block's 32 codes in
 * element order. */
static inline void
half_run_block_codes(const __m256i v[8], int half, uint8_t codes[HN_GROUP_BLOCKS][32])
{
  uint8_t lo[4][32], hi[4][32];
  transpose_quads(v[0], v[2], v[4], v[6], lo);
  transpose_quads(v[1], v[3], v[5], v[7], hi);
  for (int b = 0; b < 8; b++) {
    memcpy(codes[8 * half + b], lo[b % 4] + 16 * (b / 4), 16);
    memcpy(codes[8 * half + b] + 16, hi[b % 4] + 16 * (b / 4), 16);
  }
}

/* The code vectors of half `half` of a run (blocks 8 · half ..), as a 256-bit tile takes
 * them and the packers below unpack them.  The nibbles of the 4- and 5-bit layouts: four
 * vectors of bytes from `vectors`, low nibbles giving code vector 2s and high nibbles
 * 2s + 1. */
static inline __attribute__((always_inline)) void
half_nibble_codes(const uint8_t *vectors, int half, __m256i codes[8])
{
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  _Pragma("GCC unroll 4") for (int s = 0; s < 4; s++) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(vectors + 64 * s + 32 * half));
    codes[2 * s] = _mm256_and_si256(v, low4);
    codes[2 * s + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
  }
}

/* The 5-bit layouts: code vector m takes its fifth bits from bit m of the bit planes
 * (two shifts of 16-bit lanes move them to bit 4; the mask drops what crossed from the
 * neighbouring byte). */
static inline __attribute__((always_inline)) void
half_nibble_codes_fifth(const uint8_t *planes, const uint8_t *vectors, int half, __m256i codes[8])
{
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  const __m256i bits = _mm256_loadu_si256((const __m256i *)(planes + 32 * half));
  half_nibble_codes(vectors, half, codes);
  _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++) {
    const __m256i at4 = m < 4 ? _mm256_slli_epi16(bits, 4 - m) : _mm256_srli_epi16(bits, m - 4);
    codes[m] = _mm256_or_si256(codes[m], _mm256_and_si256(at4, bit4));
  }
}

/* A run of a 4- or 5-bit layout with mins (MINS 1) or not and fifth bits (PLANES 1) or
 * not: its parts where HN_RUN_VECTORS_AT puts them. */
static inline __attribute__((always_inline)) void
half_run_nibble_codes(const uint8_t *group, int half, const int mins, const int planes, __m256i codes[8])
{
  if (planes)
    half_nibble_codes_fifth(group + HN_RUN_PLANES_AT(mins), group + HN_RUN_VECTORS_AT(mins, 1), half, codes);
  else
    half_nibble_codes(group + HN_RUN_VECTORS_AT(mins, 0), half, codes);
}

/* Q8_0's eight vectors of signed quants */
static inline __attribute__((always_inline)) void
half_codes_q8_0(const uint8_t *group, int half, __m256i codes[8])
{
  _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++)
    codes[m] = _mm256_loadu_si256((const __m256i *)(group + HN_RUN_VECTORS_AT(0, 0) + 64 * m + 32 * half));
}

/* Q8_0's vectors 0, 2, 4, 6 hold a block's bytes 0-15, vectors 1, 3, 5, 7 bytes 16-31. */
static inline void
ungroup_run_q8_0(const uint8_t *group, HnBlockQ8_0 out[HN_GROUP_BLOCKS])
{
  uint8_t codes[HN_GROUP_BLOCKS][32];
  for (int half = 0; half < 2; half++) {
    __m256i v[8];
    half_codes_q8_0(group, half, v);
    half_run_block_codes(v, half, codes);
  }
  for (int b = 0; b < HN_GROUP_BLOCKS; b++) {
    memcpy(&out[b].d, group + 2 * b, 2);
    memcpy(out[b].qs, codes[b], 32);
  }
}

/* The unsigned codes of a run of the 4- and 5-bit layouts, block by block. */
static inline void
nibble_run_codes(const uint8_t *group, const int mins, const int planes, uint8_t codes[HN_GROUP_BLOCKS][32])
{
  for (int half = 0; half < 2; half++) {
    __m256i v[8];
    half_run_nibble_codes(group, half, mins, planes, v);
    half_run_block_codes(v, half, codes);
  }
}

/* A regrouped row of a 4- or 5-bit type (MINS, PLANES: whether it has mins and fifth
 * bits): the codes of each run of 16 blocks come out of its vectors, its scales and mins
 * straight from the run; the blocks after the last run are in file form. */
#define DEFINE_PACK_PANEL_GROUPED(NAME, BLOCK, CODES, MIN, MINS, PLANES)                          \
  static void __attribute__((unused)) NAME(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel) \
  {                                                                                                \
    PanelBlock *pb = panel;                                                                        \
    _Alignas(64) uint8_t tmp[HN_PANEL_ROWS][32];                                                   \
    uint8_t run[HN_PANEL_ROWS][HN_GROUP_BLOCKS][32];                                               \
    const int64_t n_blocks = n / 32, full = n_blocks / HN_GROUP_BLOCKS * HN_GROUP_BLOCKS;          \
    for (int64_t b = 0; b < n_blocks; b++, pb++) {                                                 \
      const int64_t first = b / HN_GROUP_BLOCKS * HN_GROUP_BLOCKS;                                 \
      const int j = (int)(b % HN_GROUP_BLOCKS);                                                    \
      for (int r = 0; r < HN_PANEL_ROWS; r++) {                                                    \
        const uint8_t *row = panel_row(weight, row_stride, r, n_rows);                             \
        const BLOCK *in_file = (const BLOCK *)row + b;                                             \
        panel_prefetch(in_file, sizeof *in_file, row_stride); /* (a regrouped run takes the same bytes) */ \
        if (b >= full) {                                                                           \
          pc_store(tmp[r], CODES(in_file));                                                        \
          pb->scale[0][r] = panel_h2f(in_file->d);                                                 \
          pb->neg_min[0][r] = MIN(in_file);                                                        \
          continue;                                                                                \
        }                                                                                          \
        const uint8_t *group = row + first * sizeof(BLOCK);                                        \
        if (j == 0)                                                                                \
          nibble_run_codes(group, MINS, PLANES, run[r]);                                           \
        uint16_t scale, min = 0;                                                                   \
        memcpy(&scale, group + 2 * j, 2);                                                          \
        if (MINS)                                                                                  \
          memcpy(&min, group + HN_RUN_MINS_AT + 2 * j, 2);                                         \
        memcpy(tmp[r], run[r][j], 32);                                                             \
        pb->scale[0][r] = panel_h2f(scale);                                                        \
        pb->neg_min[0][r] = MINS ? panel_h2f(min) : 0.0f;                                          \
      }                                                                                            \
      transpose_codes(tmp, pb->codes);                                                             \
    }                                                                                              \
  }

DEFINE_PACK_PANEL_GROUPED(pack_panel_q4_0_grouped, HnBlockQ4_0, codes_q4_0, PANEL_NO_MIN, 0, 0)
DEFINE_PACK_PANEL_GROUPED(pack_panel_q5_0_grouped, HnBlockQ5_0, codes_q5_0, PANEL_NO_MIN, 0, 1)
DEFINE_PACK_PANEL_GROUPED(pack_panel_q4_1_grouped, HnBlockQ4_1, codes_q4_1, PANEL_MIN_M, 1, 0)
DEFINE_PACK_PANEL_GROUPED(pack_panel_q5_1_grouped, HnBlockQ5_1, codes_q5_1, PANEL_MIN_M, 1, 1)

static void __attribute__((unused))
pack_panel_q8_0_grouped(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  pack_panel_q8_0_flipped(weight, row_stride, n_rows, n, panel, (char)0x80, true);
}

static void __attribute__((unused))
pack_panel_q8_0_grouped_signed(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  pack_panel_q8_0_flipped(weight, row_stride, n_rows, n, panel, 0, true);
}
#endif

/* Q4_K and Q5_K (the same header: d, dmin, 12 bytes of 6-bit scales and mins; Q5_K adds
 * 32 bytes of fifth bits, bit g of qh[l] for element l of group g). */
static inline __attribute__((always_inline)) void
pack_panel_k_mins(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel, size_t block_bytes,
                  size_t qs_offset, bool fifth_bit, size_t qh_offset)
{
  PanelBlock *pb = panel;
  _Alignas(64) uint8_t tmp[2][HN_PANEL_ROWS][32];
  const PanelCodes low4 = pc_set1(0x0f);
  /* two 32-element groups share one 32-byte run of qs (low, then high nibbles) */
  for (int64_t b = 0; b < n / 32; b += 2, pb += 2) {
    const int64_t sb = b / 8;
    const int j = (int)(b % 8);
    for (int r = 0; r < HN_PANEL_ROWS; r++) {
      const uint8_t *blk = panel_row(weight, row_stride, r, n_rows) + (size_t)sb * block_bytes;
      const HnBlockQ4_K *head = (const HnBlockQ4_K *)blk; /* d, dmin, scales: same offsets */
      if (j == 0)
        panel_prefetch(blk, block_bytes, row_stride);
      const PanelCodes q = pc_load(blk + qs_offset + 16 * j);
      PanelCodes lo = pc_and(q, low4), hi = pc_and(pc_shr(q, 4), low4);
      if (fifth_bit) {
        const PanelCodes h = pc_load(blk + qh_offset);
        lo = pc_or(lo, panel_bit_plane(h, j, 0x10));
        hi = pc_or(hi, panel_bit_plane(h, j + 1, 0x10));
      }
      pc_store(tmp[0][r], lo);
      pc_store(tmp[1][r], hi);
      const float d = panel_h2f(head->d), dmin = panel_h2f(head->dmin);
      uint8_t sc, m;
      hn_q4k_scale_min(j, head->scales, &sc, &m);
      pb[0].scale[0][r] = d * sc;
      pb[0].neg_min[0][r] = -(dmin * m);
      hn_q4k_scale_min(j + 1, head->scales, &sc, &m);
      pb[1].scale[0][r] = d * sc;
      pb[1].neg_min[0][r] = -(dmin * m);
    }
    transpose_codes(tmp[0], pb[0].codes);
    transpose_codes(tmp[1], pb[1].codes);
  }
}

_Static_assert(offsetof(HnBlockQ4_K, scales) == offsetof(HnBlockQ5_K, scales), "k-quant headers");

static void
pack_panel_q4_k(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  pack_panel_k_mins(weight, row_stride, n_rows, n, panel, sizeof(HnBlockQ4_K), offsetof(HnBlockQ4_K, qs), false, 0);
}

static void
pack_panel_q5_k(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  pack_panel_k_mins(weight, row_stride, n_rows, n, panel, sizeof(HnBlockQ5_K), offsetof(HnBlockQ5_K, qs), true,
                    offsetof(HnBlockQ5_K, qh));
}

#if defined(__x86_64__) || defined(__i386__)
/* Q4_K regrouped at load: each run's codes come out of its vectors as Q4_0's, the scales
 * and mins out of its header; the super-block after the last run is in file form. */
static void __attribute__((unused))
pack_panel_q4_k_grouped(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  PanelBlock *pb = panel;
  _Alignas(64) uint8_t tmp[HN_PANEL_ROWS][32];
  uint8_t run[HN_PANEL_ROWS][HN_GROUP_BLOCKS][32];
  const size_t run_bytes = 2 * sizeof(HnBlockQ4_K);
  const int64_t n_runs = n / (32 * HN_GROUP_BLOCKS);
  for (int64_t g = 0; g < n_runs; g++) {
    for (int r = 0; r < HN_PANEL_ROWS; r++) {
      const uint8_t *group = panel_row(weight, row_stride, r, n_rows) + (size_t)g * run_bytes;
      panel_prefetch(group, run_bytes, row_stride);
      nibble_run_codes(group, 0, 0, run[r]);
    }
    for (int j = 0; j < HN_GROUP_BLOCKS; j++, pb++) {
      for (int r = 0; r < HN_PANEL_ROWS; r++) {
        const uint8_t *group = panel_row(weight, row_stride, r, n_rows) + (size_t)g * run_bytes;
        uint16_t d, dmin;
        memcpy(&d, group + 2 * (j / 8), 2);
        memcpy(&dmin, group + HN_RUN_Q4_K_DMIN_AT + 2 * (j / 8), 2);
        uint8_t sc, m;
        hn_q4k_run_scale_min(j, group, &sc, &m);
        memcpy(tmp[r], run[r][j], 32);
        pb->scale[0][r] = panel_h2f(d) * sc;
        pb->neg_min[0][r] = -(panel_h2f(dmin) * m);
      }
      transpose_codes(tmp, pb->codes);
    }
  }
  if (n_runs * 32 * HN_GROUP_BLOCKS < n)
    pack_panel_q4_k((const uint8_t *)weight + (size_t)n_runs * run_bytes, row_stride, n_rows,
                    n - n_runs * 32 * HN_GROUP_BLOCKS, pb);
}
#endif

static void
pack_panel_q6_k(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  PanelBlock *pb = panel;
  _Alignas(64) uint8_t tmp[4][HN_PANEL_ROWS][32];
  const PanelCodes low4 = pc_set1(0x0f), two = pc_set1(3);
  /* one half super-block (128 elements) at a time: 32 bytes of qh and 64 of ql */
  for (int64_t b = 0; b < n / 32; b += 4, pb += 4) {
    const int64_t sb = b / 8;
    const int half = (int)(b % 8) / 4;
    for (int r = 0; r < HN_PANEL_ROWS; r++) {
      const HnBlockQ6_K *blk = (const HnBlockQ6_K *)panel_row(weight, row_stride, r, n_rows) + sb;
      if (half == 0)
        panel_prefetch(blk, sizeof *blk, row_stride);
      const PanelCodes l0 = pc_load(blk->ql + 64 * half), l1 = pc_load(blk->ql + 64 * half + 32);
      const PanelCodes h = pc_load(blk->qh + 32 * half);
      const PanelCodes h0 = pc_shl(pc_and(h, two), 4);
      const PanelCodes h1 = pc_shl(pc_and(pc_shr(h, 2), two), 4);
      const PanelCodes h2 = pc_shl(pc_and(pc_shr(h, 4), two), 4);
      const PanelCodes h3 = pc_shl(pc_and(pc_shr(h, 6), two), 4);
      pc_store(tmp[0][r], pc_or(pc_and(l0, low4), h0));
      pc_store(tmp[1][r], pc_or(pc_and(l1, low4), h1));
      pc_store(tmp[2][r], pc_or(pc_and(pc_shr(l0, 4), low4), h2));
      pc_store(tmp[3][r], pc_or(pc_and(pc_shr(l1, 4), low4), h3));
      const float d = panel_h2f(blk->d);
      for (int p = 0; p < 4; p++) {
        pb[p].scale[0][r] = d * blk->scales[8 * half + 2 * p];
        pb[p].scale[1][r] = d * blk->scales[8 * half + 2 * p + 1];
      }
    }
    for (int p = 0; p < 4; p++)
      transpose_codes(tmp[p], pb[p].codes);
  }
}

/* Q3_K and Q2_K keep 2-bit codes the same way: a half super-block (128 elements) is 32
 * bytes of qs whose bits 2p, 2p+1 are block p's (element l of the block in byte l), with
 * a scale per 16 elements.  Q3_K adds a third bit (bit 4·half + p of hmask[l]; a clear
 * bit means -4, so code = low | bit << 2 with zero point 4). */
static inline PanelCodes
panel_2bit_codes(PanelCodes q, int p)
{
  return pc_and(pc_shr(q, 2 * p), pc_set1(3));
}

static void
pack_panel_q3_k(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  PanelBlock *pb = panel;
  _Alignas(64) uint8_t tmp[4][HN_PANEL_ROWS][32];
  for (int64_t b = 0; b < n / 32; b += 4, pb += 4) {
    const int64_t sb = b / 8;
    const int half = (int)(b % 8) / 4;
    for (int r = 0; r < HN_PANEL_ROWS; r++) {
      const HnBlockQ3_K *blk = (const HnBlockQ3_K *)panel_row(weight, row_stride, r, n_rows) + sb;
      if (half == 0)
        panel_prefetch(blk, sizeof *blk, row_stride);
      const PanelCodes q = pc_load(blk->qs + 32 * half);
      const PanelCodes hm = pc_load(blk->hmask);
      const float d = panel_h2f(blk->d);
      for (int p = 0; p < 4; p++) {
        const int block = 4 * half + p;
        pc_store(tmp[p][r], pc_or(panel_2bit_codes(q, p), panel_bit_plane(hm, block, 4)));
        pb[p].scale[0][r] = d * (float)hn_q3k_scale(2 * block, blk->scales);
        pb[p].scale[1][r] = d * (float)hn_q3k_scale(2 * block + 1, blk->scales);
      }
    }
    for (int p = 0; p < 4; p++)
      transpose_codes(tmp[p], pb[p].codes);
  }
}

static void
pack_panel_q2_k(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  PanelBlockMin16 *pb = panel;
  _Alignas(64) uint8_t tmp[4][HN_PANEL_ROWS][32];
  for (int64_t b = 0; b < n / 32; b += 4, pb += 4) {
    const int64_t sb = b / 8;
    const int half = (int)(b % 8) / 4;
    for (int r = 0; r < HN_PANEL_ROWS; r++) {
      const HnBlockQ2_K *blk = (const HnBlockQ2_K *)panel_row(weight, row_stride, r, n_rows) + sb;
      if (half == 0)
        panel_prefetch(blk, sizeof *blk, row_stride);
      const PanelCodes q = pc_load(blk->qs + 32 * half);
      const float d = panel_h2f(blk->d), dmin = panel_h2f(blk->dmin);
      for (int p = 0; p < 4; p++) {
        const int block = 4 * half + p;
        pc_store(tmp[p][r], panel_2bit_codes(q, p));
        for (int k = 0; k < 2; k++) {
          const uint8_t sc = blk->scales[2 * block + k];
          pb[p].scale[k][r] = d * (float)(sc & 0xf);
          pb[p].neg_min[k][r] = -(dmin * (float)(sc >> 4));
        }
      }
    }
    for (int p = 0; p < 4; p++)
      transpose_codes(tmp[p], pb[p].codes);
  }
}

/* F16 and BF16: the 16 rows' 16-bit values of each element together. */
static void
pack_panel_16bit(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  uint16_t *out = panel;
  const uint16_t *rows[HN_PANEL_ROWS];
  for (int r = 0; r < HN_PANEL_ROWS; r++)
    rows[r] = (const uint16_t *)panel_row(weight, row_stride, r, n_rows);
  for (int64_t i = 0; i < n; i++) {
    if (i % 32 == 0)
      for (int r = 0; r < HN_PANEL_ROWS; r++)
        panel_prefetch(rows[r] + i, 64, row_stride);
    for (int r = 0; r < HN_PANEL_ROWS; r++)
      out[i * HN_PANEL_ROWS + r] = rows[r][i];
  }
}
