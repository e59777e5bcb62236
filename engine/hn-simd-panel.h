/* hn-simd-panel.h — packing weight rows into panels for the prompt-processing GEMM,
 * shared by the AVX2 and AVX-512 kernels (included by each, compiled with its flags).
 *
 * A panel holds 16 weight rows, per 32-element block: eight 64-byte vectors whose 32-bit
 * lane r carries four consecutive codes of row r, then the 16 rows' scales (two sets for
 * types with 16-element groups) and negated mins.  The includer defines
 * transpose_codes(tmp, pb), which writes the 32 codes of each of 16 rows (tmp[r], 32
 * bytes apart) in that lane order, with whichever gathers its instruction set has.
 *
 * Codes are unsigned with a zero point (Q4_0: 8, Q6_K: 32, Q8_0: 128), which the GEMM
 * removes with the activation's precomputed -offset · Σq, except Q8_0 packed signed
 * (pack_panel_q8_0_signed) for kernels whose byte products saturate on 255 × 127.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-quants-blocks.h"
#include "hn-simd.h"

#include <immintrin.h>

typedef struct {
  uint8_t codes[8][64];
  float scale[2][16];
  float neg_min[16];
} PanelBlock;

_Static_assert(sizeof(PanelBlock) == HN_PANEL_BLOCK_BYTES, "panel block size");

/* Defined by the includer. */
static inline void transpose_codes(const uint8_t tmp[HN_PANEL_ROWS][32], PanelBlock *pb);

static inline const uint8_t *
panel_row(const uint8_t *weight, size_t row_stride, int r, int n_rows)
{
  /* missing rows of a tail panel repeat the last row; their outputs are not stored */
  return weight + (size_t)(r < n_rows ? r : n_rows - 1) * row_stride;
}

/* Q8_0 codes: the signed quants with their sign bit flipped by `flip` (0x80: unsigned
 * with zero point 128; 0: as they are). */
static inline void
pack_panel_q8_0_flipped(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel, char flip)
{
  PanelBlock *pb = panel;
  _Alignas(64) uint8_t tmp[HN_PANEL_ROWS][32];
  for (int64_t b = 0; b < n / 32; b++, pb++) {
    for (int r = 0; r < HN_PANEL_ROWS; r++) {
      const HnBlockQ8_0 *blk = (const HnBlockQ8_0 *)panel_row(weight, row_stride, r, n_rows) + b;
      __m256i q = _mm256_loadu_si256((const __m256i *)blk->qs);
      _mm256_store_si256((__m256i *)tmp[r], _mm256_xor_si256(q, _mm256_set1_epi8(flip)));
      pb->scale[0][r] = _cvtsh_ss(blk->d);
    }
    transpose_codes(tmp, pb);
  }
}

static void __attribute__((unused))
pack_panel_q8_0(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  pack_panel_q8_0_flipped(weight, row_stride, n_rows, n, panel, (char)0x80);
}

static void __attribute__((unused))
pack_panel_q8_0_signed(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  pack_panel_q8_0_flipped(weight, row_stride, n_rows, n, panel, 0);
}

static void
pack_panel_q4_0(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  PanelBlock *pb = panel;
  _Alignas(64) uint8_t tmp[HN_PANEL_ROWS][32];
  const __m128i low4 = _mm_set1_epi8(0x0f);
  for (int64_t b = 0; b < n / 32; b++, pb++) {
    for (int r = 0; r < HN_PANEL_ROWS; r++) {
      const HnBlockQ4_0 *blk = (const HnBlockQ4_0 *)panel_row(weight, row_stride, r, n_rows) + b;
      __m128i q = _mm_loadu_si128((const __m128i *)blk->qs);
      _mm_store_si128((__m128i *)tmp[r], _mm_and_si128(q, low4));
      _mm_store_si128((__m128i *)(tmp[r] + 16), _mm_and_si128(_mm_srli_epi16(q, 4), low4));
      pb->scale[0][r] = _cvtsh_ss(blk->d);
    }
    transpose_codes(tmp, pb);
  }
}

static void
pack_panel_q4_k(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  PanelBlock *pb = panel;
  _Alignas(64) uint8_t tmp[2][HN_PANEL_ROWS][32];
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  /* two 32-element groups share one 32-byte run of qs (low, then high nibbles) */
  for (int64_t b = 0; b < n / 32; b += 2, pb += 2) {
    const int64_t sb = b / 8;
    const int j = (int)(b % 8);
    for (int r = 0; r < HN_PANEL_ROWS; r++) {
      const HnBlockQ4_K *blk = (const HnBlockQ4_K *)panel_row(weight, row_stride, r, n_rows) + sb;
      __m256i q = _mm256_loadu_si256((const __m256i *)(blk->qs + 16 * j));
      _mm256_store_si256((__m256i *)tmp[0][r], _mm256_and_si256(q, low4));
      _mm256_store_si256((__m256i *)tmp[1][r], _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
      const float d = _cvtsh_ss(blk->d), dmin = _cvtsh_ss(blk->dmin);
      uint8_t sc, m;
      hn_q4k_scale_min(j, blk->scales, &sc, &m);
      pb[0].scale[0][r] = d * sc;
      pb[0].neg_min[r] = -(dmin * m);
      hn_q4k_scale_min(j + 1, blk->scales, &sc, &m);
      pb[1].scale[0][r] = d * sc;
      pb[1].neg_min[r] = -(dmin * m);
    }
    transpose_codes(tmp[0], &pb[0]);
    transpose_codes(tmp[1], &pb[1]);
  }
}

static void
pack_panel_q6_k(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  PanelBlock *pb = panel;
  _Alignas(64) uint8_t tmp[4][HN_PANEL_ROWS][32];
  const __m256i low4 = _mm256_set1_epi8(0x0f), two = _mm256_set1_epi8(3);
  /* one half super-block (128 elements) at a time: 32 bytes of qh and 64 of ql */
  for (int64_t b = 0; b < n / 32; b += 4, pb += 4) {
    const int64_t sb = b / 8;
    const int half = (int)(b % 8) / 4;
    for (int r = 0; r < HN_PANEL_ROWS; r++) {
      const HnBlockQ6_K *blk = (const HnBlockQ6_K *)panel_row(weight, row_stride, r, n_rows) + sb;
      __m256i l0 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * half));
      __m256i l1 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * half + 32));
      __m256i h = _mm256_loadu_si256((const __m256i *)(blk->qh + 32 * half));
      __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(h, two), 4);
      __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), two), 4);
      __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), two), 4);
      __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), two), 4);
      _mm256_store_si256((__m256i *)tmp[0][r], _mm256_or_si256(_mm256_and_si256(l0, low4), h0));
      _mm256_store_si256((__m256i *)tmp[1][r], _mm256_or_si256(_mm256_and_si256(l1, low4), h1));
      _mm256_store_si256((__m256i *)tmp[2][r], _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), h2));
      _mm256_store_si256((__m256i *)tmp[3][r], _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), h3));
      const float d = _cvtsh_ss(blk->d);
      for (int p = 0; p < 4; p++) {
        pb[p].scale[0][r] = d * blk->scales[8 * half + 2 * p];
        pb[p].scale[1][r] = d * blk->scales[8 * half + 2 * p + 1];
      }
    }
    for (int p = 0; p < 4; p++)
      transpose_codes(tmp[p], &pb[p]);
  }
}

static void
pack_panel_f16(const void *weight, size_t row_stride, int n_rows, int64_t n, void *panel)
{
  uint16_t *out = panel;
  const uint16_t *rows[HN_PANEL_ROWS];
  for (int r = 0; r < HN_PANEL_ROWS; r++)
    rows[r] = (const uint16_t *)panel_row(weight, row_stride, r, n_rows);
  for (int64_t i = 0; i < n; i++)
    for (int r = 0; r < HN_PANEL_ROWS; r++)
      out[i * HN_PANEL_ROWS + r] = rows[r][i];
}
