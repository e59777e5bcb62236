/* hn-simd-avx512.c — AVX-512 (F, BW, VL, VNNI) kernels: the prompt-processing GEMM.
 *
 * The GEMM multiplies weight rows in their file format with activations packed once per
 * matrix product (HnActChunk).  A tile of 4 weight rows × up to 4 activation columns is
 * computed per call: each 64-element chunk of a weight row is decoded once into unsigned
 * 8-bit codes plus per-lane scales, then used for every column with VPDPBUSD (unsigned ×
 * signed bytes, four products per 32-bit lane).  The codes' zero point is corrected with
 * the activation lane sums that the packer precomputed, so the inner loop is four
 * instructions per 64 multiply-adds: dot, convert, scale, accumulate.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-simd.h"
#include "hn-quants-blocks.h"
#include "hn-quants.h"
#include "hn-simd-x86.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#define TILE_ROWS 4
#define TILE_COLS 4

static inline __m512
broadcast_pair_halves(uint16_t d0, uint16_t d1)
{
  return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)d1), _mm_set1_epi16((short)d0)));
}

/* 8 floats into lanes 8-15 of a zero vector (no AVX512DQ needed). */
static inline __m512
high_half_ps(__m256 v)
{
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_setzero_pd(), _mm256_castps_pd(v), 1));
}

static inline __m512
broadcast_pair(float a, float b)
{
  /* (insertf32x8 would need AVX512DQ, which the dispatcher does not require) */
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(a)),
                                             _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}

/* ---- activation packing ---- */

static inline void
quantize_block32(const float *x, bool present, __m128i *q_lo, __m128i *q_hi, float *d_out)
{
  if (!present) {
    *q_lo = _mm_setzero_si128();
    *q_hi = _mm_setzero_si128();
    *d_out = 0;
    return;
  }
  __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
  float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
  float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  __m512 vid = _mm512_set1_ps(id);
  *q_lo = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(a, vid)));
  *q_hi = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(b, vid)));
  *d_out = amax / 127.0f;
}

static void
pack_act(const float *x, int64_t n, int offset, HnActChunk *out)
{
  const int64_t n_blocks = n / 32;
  const int64_t n_chunks = (n_blocks + 1) / 2;
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i neg_offset = _mm512_set1_epi32(-offset);
  for (int64_t k = 0; k < n_chunks; k++) {
    __m128i q0, q1, q2, q3;
    float d0, d1;
    quantize_block32(x + 64 * k, true, &q0, &q1, &d0);
    quantize_block32(x + 64 * k + 32, 2 * k + 1 < n_blocks, &q2, &q3, &d1);
    __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(q1, q0)), _mm256_set_m128i(q3, q2), 1);
    __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, q);
    __m512 d = broadcast_pair(d0, d1);
    _mm512_storeu_si512(out[k].q, q);
    _mm512_storeu_si512(out[k].neg_offset_sum, _mm512_mullo_epi32(sums, neg_offset));
    _mm512_storeu_ps(out[k].d, d);
    _mm512_storeu_ps(out[k].lane_sum, _mm512_mul_ps(_mm512_cvtepi32_ps(sums), d));
    out[k].block_sum[0] = d0 * (float)_mm512_mask_reduce_add_epi32(0x00ff, sums);
    out[k].block_sum[1] = d1 * (float)_mm512_mask_reduce_add_epi32(0xff00, sums);
  }
}

/* ---- weight chunk decoders: 64 elements -> unsigned codes, lane scales (and mins) ---- */

typedef struct {
  __m512i codes;
  __m512 scale;
} WeightChunk;

static inline void
load_q8_0(const uint8_t *row, int64_t k, bool pair, WeightChunk *w)
{
  const HnBlockQ8_0 *b = (const HnBlockQ8_0 *)row + 2 * k;
  __m256i lo = _mm256_loadu_si256((const __m256i *)b[0].qs);
  __m256i hi = pair ? _mm256_loadu_si256((const __m256i *)b[1].qs) : _mm256_setzero_si256();
  /* q + 128 as an unsigned byte is q with its top bit flipped */
  __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  w->codes = _mm512_xor_si512(q, _mm512_set1_epi8((char)0x80));
  w->scale = broadcast_pair_halves(b[0].d, pair ? b[1].d : 0);
}

/* Two blocks' 16 bytes of nibbles (the second's NULL: none) as 64 codes in element order */
static inline __m512i
nibble_pair_codes(const uint8_t *qs0, const uint8_t *qs1)
{
  __m128i p0 = _mm_loadu_si128((const __m128i *)qs0);
  __m128i p1 = qs1 ? _mm_loadu_si128((const __m128i *)qs1) : _mm_setzero_si128();
  __m256i packed = _mm256_set_m128i(p1, p0);
  __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(packed), _mm256_srli_epi16(packed, 4), 1);
  /* [b0 low, b1 low, b0 high, b1 high] -> element order [b0 low, b0 high, b1 low, b1 high] */
  both = _mm512_shuffle_i64x2(both, both, _MM_SHUFFLE(3, 1, 2, 0));
  return _mm512_and_si512(both, _mm512_set1_epi8(0x0f));
}

/* Two blocks' fifth bits, element i of the pair at bit i, add 16 to the codes where set. */
static inline __m512i
add_fifth_bits(__m512i nibbles, const uint8_t *qh0, const uint8_t *qh1)
{
  uint32_t high0, high1 = 0;
  memcpy(&high0, qh0, 4);
  if (qh1)
    memcpy(&high1, qh1, 4);
  return _mm512_mask_add_epi8(nibbles, (__mmask64)high0 | (__mmask64)high1 << 32, nibbles, _mm512_set1_epi8(16));
}

#define NO_FIFTH_BITS(codes, b, pair) (codes)
#define WITH_FIFTH_BITS(codes, b, pair) add_fifth_bits(codes, (b)[0].qh, (pair) ? (b)[1].qh : NULL)

/* The 4- and 5-bit types in the file layout, two blocks at a time (the experts of a
 * mixture, and the blocks after a regrouped row's last run). */
#define DEFINE_LOAD_NIBBLE_PAIR(NAME, BLOCK, FIFTH_BITS)                                            \
  static inline void NAME(const uint8_t *row, int64_t k, bool pair, WeightChunk *w)                \
  {                                                                                                \
    const BLOCK *b = (const BLOCK *)row + 2 * k;                                                   \
    w->codes = FIFTH_BITS(nibble_pair_codes(b[0].qs, pair ? b[1].qs : NULL), b, pair);             \
    w->scale = broadcast_pair_halves(b[0].d, pair ? b[1].d : 0);                                   \
  }

DEFINE_LOAD_NIBBLE_PAIR(load_q4_0, HnBlockQ4_0, NO_FIFTH_BITS)
DEFINE_LOAD_NIBBLE_PAIR(load_q5_0, HnBlockQ5_0, WITH_FIFTH_BITS)
DEFINE_LOAD_NIBBLE_PAIR(load_q4_1, HnBlockQ4_1, NO_FIFTH_BITS)
DEFINE_LOAD_NIBBLE_PAIR(load_q5_1, HnBlockQ5_1, WITH_FIFTH_BITS)

/* The 8 scales and 8 mins of a Q4_K super-block as floats, times d and -dmin. */
static inline __m512
q4_k_scales_mins(const HnBlockQ4_K *b)
{
  const __m128i bytes = scale_min_bytes_q4_k(b->scales);
  const __m512 all = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)); /* 8 scales, 8 mins */
  const __m512 dd = _mm512_insertf32x4(_mm512_insertf32x4(_mm512_set1_ps(_cvtsh_ss(b->d)),
                                                          _mm_set1_ps(-_cvtsh_ss(b->dmin)), 2),
                                       _mm_set1_ps(-_cvtsh_ss(b->dmin)), 3);
  return _mm512_mul_ps(all, dd);
}

static inline void
load_q6_k(const uint8_t *row, int64_t k, bool pair, WeightChunk *w)
{
  const HnBlockQ6_K *b = (const HnBlockQ6_K *)row + k / 4;
  const int quarter = (int)(k % 4), half = quarter / 2, part = quarter % 2;
  __m512i ql = _mm512_loadu_si512(b->ql + 64 * half);
  __m256i qh256 = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * half));
  __m512i qh = _mm512_inserti64x4(_mm512_castsi256_si512(qh256), qh256, 1);
  /* low nibbles with qh bits 0-1 / 2-3 for the first 64 elements of the half; high
   * nibbles with bits 4-5 / 6-7 for the second 64 */
  const __m512i shifts = part ? _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1)
                              : _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
  __m512i high = _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi16(qh, shifts), 4), _mm512_set1_epi8(0x30));
  __m512i low = part ? _mm512_srli_epi16(ql, 4) : ql;
  w->codes = _mm512_or_si512(_mm512_and_si512(low, _mm512_set1_epi8(0x0f)), high);
  const int g0 = 8 * half + 4 * part;
  int32_t four;
  memcpy(&four, b->scales + g0, 4);
  __m512i sc = _mm512_cvtepi8_epi32(_mm_cvtsi32_si128(four));
  sc = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), sc);
  w->scale = _mm512_mul_ps(_mm512_cvtepi32_ps(sc), _mm512_set1_ps(_cvtsh_ss(b->d)));
  (void)pair;
}

/* ---- the tile driver ----
 *
 * A tile is NR weight rows × NC activation columns, both compile-time constants: 4 × 1..4
 * for small batches, 8 × 1 for decode (more rows in flight keep more memory streams
 * busy; decode is bound by reading the weights).  Rows are software-prefetched a few
 * hundred bytes ahead because every row is a short stream of its own. */

#define PREFETCH_AHEAD 768

/* The prefetch of every weight row at every step: a few hundred bytes ahead into L1, and
 * the same place of the row one tile further down (the next tile's rows follow in
 * memory) into L2.  Without the second, each new tile started with its first few hundred
 * bytes of every row missing, which at TinyLlama's 1152-byte Q4_0 rows was most of the
 * tile: decode went from about 21 to 27 tokens/s. */
static inline __attribute__((always_inline)) void
prefetch_weights(const void *p, size_t next_tile)
{
  _mm_prefetch((const char *)p + PREFETCH_AHEAD, _MM_HINT_T0);
  _mm_prefetch((const char *)p + next_tile, _MM_HINT_T1);
}

/* The same for the kernels that step one super-block (more than a cache line) at a time:
 * a block a few ahead into L1, this block's place in the next tile into L2. */
static inline __attribute__((always_inline)) void
prefetch_block_weights(const void *ahead, const void *next_tile_block, size_t block_bytes)
{
  for (size_t off = 0; off < block_bytes; off += 64) {
    _mm_prefetch((const char *)ahead + off, _MM_HINT_T0);
    _mm_prefetch((const char *)next_tile_block + off, _MM_HINT_T1);
  }
}

/* A tile's rows (one past n_rows reads row 0; its sums are not stored) and its sums,
 * zeroed. */
static inline __attribute__((always_inline)) void
tile_begin(const uint8_t *weight, size_t weight_stride, int n_rows, const int NR, const int NC,
           const uint8_t *rows[8], __m512 acc[8][TILE_COLS])
{
  _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)
    rows[r] = weight + (size_t)(r < n_rows ? r : 0) * weight_stride;
  _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)
    _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) acc[r][c] = _mm512_setzero_ps();
}

/* The tile's results: each sum's lanes added, plus what was summed outside them (or 0). */
static inline __attribute__((always_inline)) void
tile_store(__m512 acc[8][TILE_COLS], float extra[8][TILE_COLS], int n_rows, const int NR, const int NC,
           float *out, size_t out_stride)
{
  for (int r = 0; r < n_rows && r < NR; r++)
    for (int c = 0; c < NC; c++)
      out[(size_t)r * out_stride + c] = _mm512_reduce_add_ps(acc[r][c]) + (extra ? extra[r][c] : 0.0f);
}

/* The kernel NAME over NAME##_tile: one tile of 8 rows for one token, tiles of
 * TILE_ROWS rows for 2-4 tokens. */
#define DEFINE_TILE_DISPATCH(NAME)                                                                 \
  static void NAME(int64_t n, const void *weight, size_t weight_stride, int n_rows,                \
                   const HnActChunk *act, size_t act_stride, int n_cols, float *out,               \
                   size_t out_stride)                                                              \
  {                                                                                                \
    const uint8_t *w = weight;                                                                     \
    if (n_cols == 1) {                                                                             \
      NAME##_tile(n, w, weight_stride, n_rows, act, act_stride, 8, 1, out, out_stride);           \
      return;                                                                                      \
    }                                                                                              \
    for (int r0 = 0; r0 < n_rows; r0 += TILE_ROWS) {                                               \
      const uint8_t *wr = w + (size_t)r0 * weight_stride;                                          \
      float *o = out + (size_t)r0 * out_stride;                                                    \
      const int nr = n_rows - r0;                                                                  \
      switch (n_cols) {                                                                            \
      case 4: NAME##_tile(n, wr, weight_stride, nr, act, act_stride, TILE_ROWS, 4, o, out_stride); break; \
      case 3: NAME##_tile(n, wr, weight_stride, nr, act, act_stride, TILE_ROWS, 3, o, out_stride); break; \
      default: NAME##_tile(n, wr, weight_stride, nr, act, act_stride, TILE_ROWS, 2, o, out_stride); break; \
      }                                                                                            \
    }                                                                                              \
  }

#define DEFINE_GEMM(NAME, LOADER, CHUNK_BYTES)                                                     \
  static inline __attribute__((always_inline)) void NAME##_tile(                                   \
    int64_t n, const uint8_t *weight, size_t weight_stride, int n_rows, const HnActChunk *act,     \
    size_t act_stride, const int NR, const int n_cols, float *out, size_t out_stride)              \
  {                                                                                                \
    const uint8_t *rows[8];                                                                        \
    __m512 acc[8][TILE_COLS];                                                                      \
    tile_begin(weight, weight_stride, n_rows, NR, n_cols, rows, acc);                              \
    const int64_t n_blocks = n / 32, n_chunks = (n_blocks + 1) / 2;                                \
    const size_t next_tile = (size_t)NR * weight_stride;                                           \
    for (int64_t k = 0; k < n_chunks; k++) {                                                       \
      const bool pair = 2 * k + 1 < n_blocks;                                                      \
      WeightChunk w[8];                                                                            \
      _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {                                       \
        prefetch_weights(rows[r] + k * (CHUNK_BYTES), next_tile);                                  \
        LOADER(rows[r], k, pair, &w[r]);                                                           \
      }                                                                                            \
      _Pragma("GCC unroll 4") for (int c = 0; c < n_cols; c++) {                                  \
        const HnActChunk *a = act + (size_t)c * act_stride + k;                                    \
        const __m512i q = _mm512_loadu_si512(a->q);                                                \
        const __m512i off = _mm512_loadu_si512(a->neg_offset_sum);                                 \
        const __m512 d = _mm512_loadu_ps(a->d);                                                    \
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {                                     \
          __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(off, w[r].codes, q));                  \
          acc[r][c] = _mm512_fmadd_ps(f, _mm512_mul_ps(w[r].scale, d), acc[r][c]);                 \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    tile_store(acc, NULL, n_rows, NR, n_cols, out, out_stride);                                    \
  }                                                                                                \
  DEFINE_TILE_DISPATCH(NAME)

DEFINE_GEMM(gemm_q8_0, load_q8_0, 68)
DEFINE_GEMM(gemm_q6_k, load_q6_k, 52)

/* Q4_0 in the file layout (the experts of a mixture; other matrices are regrouped at
 * load): the scales of 16 blocks come from one gather per row; the two blocks of a chunk
 * are unpacked without a cross-lane shuffle (low nibbles of both, then high nibbles of
 * both), and the activation chunk is shuffled to that order instead — once per chunk for
 * all the rows of the call.
 *
 * Each column is summed as it is alone: the same products in the same lanes in the same
 * order, whatever NC is, so sequences decoded in one step get what each gets alone
 * (/engine/simd/matmul-rows-alone).  The block scale is the weight's scale times the
 * activation's, permuted to the chunk's lanes; for one column that product is formed once
 * per group of 16 blocks and permuted, for more the two are permuted and multiplied per
 * chunk: the same lane pairs, so the same results. */
static inline __attribute__((always_inline)) void
gemm_q4_0_tile(int64_t n, const uint8_t *weight, size_t weight_stride, int n_rows, const HnActChunk *act,
               size_t act_stride, const int NR, const int NC, float *out, size_t out_stride)
{
  const uint8_t *rows[8];
  __m512 acc[8][TILE_COLS];
  tile_begin(weight, weight_stride, n_rows, NR, NC, rows, acc);
  const __m512i block_offsets = _mm512_setr_epi32(0, 18, 36, 54, 72, 90, 108, 126, 144, 162, 180, 198, 216,
                                                  234, 252, 270);
  /* in the shuffled order lanes 0-3 and 8-11 belong to the chunk's first block */
  const __m512i pair_pick = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const int64_t n_blocks = n / 32, n_chunks = (n_blocks + 1) / 2;
  const size_t next_tile = (size_t)NR * weight_stride;
  /* where block i of a group of 16 finds its activation scale: lane 0 of chunk i / 2 for
   * the chunk's first block, lane 8 for its second */
  int32_t act_d_index[16];
  for (int i = 0; i < 16; i++)
    act_d_index[i] = (int32_t)((size_t)(i / 2) * sizeof(HnActChunk) + offsetof(HnActChunk, d) +
                               (size_t)(i % 2) * 8 * sizeof(float));
  const __m512i act_d_offsets = _mm512_loadu_si512(act_d_index);
  for (int64_t k0 = 0; k0 < n_chunks; k0 += 8) {
    const int64_t b0 = 2 * k0, group = n_blocks - b0 < 16 ? n_blocks - b0 : 16;
    const __mmask16 valid = (__mmask16)((1u << group) - 1);
    __m512 act_d[TILE_COLS];
    _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++)
      act_d[c] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, act_d_offsets,
                                          (const void *)(act + (size_t)c * act_stride + k0), 1);
    /* one column: the weight's scales times the activation's; more: the weight's alone */
    __m512 scales[8];
    _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
      const __m512i raw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, block_offsets,
                                                      rows[r] + 18 * b0, 1);
      scales[r] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
      if (NC == 1)
        scales[r] = _mm512_mul_ps(scales[r], act_d[0]);
    }
    const int64_t k1 = k0 + 8 < n_chunks ? k0 + 8 : n_chunks;
    for (int64_t k = k0; k < k1; k++) {
      const bool pair = 2 * k + 1 < n_blocks;
      const __m512i pick = _mm512_add_epi32(pair_pick, _mm512_set1_epi32((int)(2 * (k - k0))));
      __m512i q[TILE_COLS], off[TILE_COLS];
      __m512 act_scale[TILE_COLS];
      _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {
        const HnActChunk *a = act + (size_t)c * act_stride + k;
        q[c] = _mm512_shuffle_i64x2(_mm512_loadu_si512(a->q), _mm512_loadu_si512(a->q), _MM_SHUFFLE(3, 1, 2, 0));
        off[c] = _mm512_shuffle_i64x2(_mm512_loadu_si512(a->neg_offset_sum), _mm512_loadu_si512(a->neg_offset_sum),
                                      _MM_SHUFFLE(3, 1, 2, 0));
        if (NC > 1)
          act_scale[c] = _mm512_permutexvar_ps(pick, act_d[c]);
      }
      _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
        const HnBlockQ4_0 *b = (const HnBlockQ4_0 *)rows[r] + 2 * k;
        prefetch_weights(b, next_tile);
        const __m128i p0 = _mm_loadu_si128((const __m128i *)b[0].qs);
        const __m128i p1 = pair ? _mm_loadu_si128((const __m128i *)b[1].qs) : _mm_setzero_si128();
        const __m256i packed = _mm256_inserti128_si256(_mm256_castsi128_si256(p0), p1, 1);
        const __m512i codes = _mm512_and_si512(
          _mm512_inserti64x4(_mm512_castsi256_si512(packed), _mm256_srli_epi16(packed, 4), 1), low4);
        const __m512 weight_scale = _mm512_permutexvar_ps(pick, scales[r]);
        _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {
          const __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(off[c], codes, q[c]));
          const __m512 scale = NC == 1 ? weight_scale : _mm512_mul_ps(weight_scale, act_scale[c]);
          acc[r][c] = _mm512_fmadd_ps(f, scale, acc[r][c]);
        }
      }
    }
  }
  tile_store(acc, NULL, n_rows, NR, NC, out, out_stride);
}
DEFINE_TILE_DISPATCH(gemm_q4_0)

/* The 32-element types regrouped at load (layouts in hn-quants.h).  Each 64-byte load
 * holds quants of 16 blocks with lane j given to block j, so VPDPBUSD sums each block's
 * 32 products in its own lane, and the 16 block scales apply once, as a vector read
 * straight from the row: no gather, no per-block shuffle.  Nibbles unpack with two
 * instructions per 64 codes, fifth bits (Q5_0, Q5_1) with three more from one load of
 * bit planes per run; Q8_0's bytes take one XOR to become unsigned; the mins (Q4_1,
 * Q5_1) take one conversion and one FMA per run and token, times the activations' block
 * sums.  That is about a third of the vector instructions of the file-layout tiles
 * above per weight byte, which is what lets decode keep pace with the memory bus.
 * Blocks after the last run of 16 are in the file layout and take the chunk path. */

/* The nibbles of the 4- and 5-bit layouts: four vectors of bytes from `vectors`, low
 * nibbles giving code vector 2s and high nibbles 2s + 1. */
static inline __attribute__((always_inline)) void
grouped_nibble_codes(const uint8_t *vectors, __m512i codes[8])
{
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  _Pragma("GCC unroll 4") for (int s = 0; s < 4; s++) {
    const __m512i v = _mm512_loadu_si512(vectors + 64 * s);
    codes[2 * s] = _mm512_and_si512(v, low4);
    codes[2 * s + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
  }
}

/* The 5-bit layouts: code vector m takes its fifth bits from bit m of the bit planes,
 * moved to bit 4 by a shift of 16-bit lanes and masked. */
static inline __m512i
plane_to_bit4(__m512i planes, int m)
{
  return m < 4 ? _mm512_slli_epi16(planes, 4 - m) : _mm512_srli_epi16(planes, m - 4);
}

static inline __attribute__((always_inline)) void
grouped_nibble_codes_fifth(const uint8_t *planes, const uint8_t *vectors, __m512i codes[8])
{
  const __m512i bit4 = _mm512_set1_epi8(0x10), bits = _mm512_loadu_si512(planes);
  grouped_nibble_codes(vectors, codes);
  _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++)
    codes[m] = _mm512_or_si512(codes[m], _mm512_and_si512(plane_to_bit4(bits, m), bit4));
}

/* A run of a 4- or 5-bit layout with mins (MINS 1) or not and fifth bits (PLANES 1) or
 * not: its parts where HN_RUN_VECTORS_AT puts them. */
static inline __attribute__((always_inline)) void
grouped_run_nibble_codes(const uint8_t *group, const int mins, const int planes, __m512i codes[8])
{
  if (planes)
    grouped_nibble_codes_fifth(group + HN_RUN_PLANES_AT(mins), group + HN_RUN_VECTORS_AT(mins, 1), codes);
  else
    grouped_nibble_codes(group + HN_RUN_VECTORS_AT(mins, 0), codes);
}

/* the code vectors of a run, by layout */
static inline __attribute__((always_inline)) void
grouped_codes_q4_0(const uint8_t *group, __m512i codes[8])
{
  grouped_run_nibble_codes(group, 0, 0, codes);
}

static inline __attribute__((always_inline)) void
grouped_codes_q4_1(const uint8_t *group, __m512i codes[8])
{
  grouped_run_nibble_codes(group, 1, 0, codes);
}

static inline __attribute__((always_inline)) void
grouped_codes_q5_0(const uint8_t *group, __m512i codes[8])
{
  grouped_run_nibble_codes(group, 0, 1, codes);
}

static inline __attribute__((always_inline)) void
grouped_codes_q5_1(const uint8_t *group, __m512i codes[8])
{
  grouped_run_nibble_codes(group, 1, 1, codes);
}

/* q + 128 as an unsigned byte is q with its top bit flipped */
static inline __attribute__((always_inline)) void
grouped_codes_q8_0(const uint8_t *group, __m512i codes[8])
{
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++)
    codes[m] = _mm512_xor_si512(_mm512_loadu_si512(group + HN_RUN_VECTORS_AT(0, 0) + 64 * m), flip);
}

/* Σ over each block's 32 products (lane j: block j), the zero point already corrected */
static inline __attribute__((always_inline)) __m512
grouped_dot(const __m512i codes[8], const HnActGroup *a)
{
  __m512i sum = _mm512_loadu_si512(a->neg_offset_sum);
  _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
    sum = _mm512_dpbusd_epi32(sum, codes[i], _mm512_loadu_si512(a->q[i]));
  return _mm512_cvtepi32_ps(sum);
}

#define DEFINE_GEMM_GROUPED(NAME, BLOCK, GROUP_CODES, FILE_LOADER, MINS, TAIL_MIN)                \
  static inline __attribute__((always_inline)) void NAME##_tile(                                   \
    int64_t n, const uint8_t *weight, size_t weight_stride, int n_rows, const HnActChunk *act,     \
    size_t act_stride, const int NR, const int NC, float *out, size_t out_stride)                  \
  {                                                                                                \
    const size_t group_bytes = HN_GROUP_BLOCKS * sizeof(BLOCK);                                    \
    const uint8_t *rows[8];                                                                        \
    __m512 acc[8][TILE_COLS];                                                                      \
    float tail_mins[8][TILE_COLS] = { { 0.0f } }; /* the file-layout blocks' mins times their sums */ \
    tile_begin(weight, weight_stride, n_rows, NR, NC, rows, acc);                                  \
    const int64_t n_blocks = n / 32, n_groups = n_blocks / HN_GROUP_BLOCKS, n_chunks = (n_blocks + 1) / 2; \
    const size_t next_tile = (size_t)NR * weight_stride;                                           \
    for (int64_t g = 0; g < n_groups; g++) {                                                       \
      _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {                                       \
        const uint8_t *group = rows[r] + (size_t)g * group_bytes;                                  \
        for (size_t off = 0; off < group_bytes; off += 64)                                         \
          prefetch_weights(group + off, next_tile);                                                \
        __m512i codes[8];                                                                          \
        GROUP_CODES(group, codes);                                                                 \
        const __m512 weight_scales = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)group));  \
        const __m512 weight_mins =                                                                 \
          MINS ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(group + HN_RUN_MINS_AT))) : _mm512_setzero_ps(); \
        _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {                                     \
          const HnActGroup *a = (const HnActGroup *)(act + (size_t)c * act_stride) + g;            \
          acc[r][c] = _mm512_fmadd_ps(grouped_dot(codes, a), _mm512_mul_ps(weight_scales, _mm512_loadu_ps(a->d)), \
                                      acc[r][c]);                                                  \
          if (MINS)                                                                                \
            acc[r][c] = _mm512_fmadd_ps(weight_mins, _mm512_loadu_ps(a->block_sum), acc[r][c]);    \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    for (int64_t k = n_groups * HN_GROUP_BLOCKS / 2; k < n_chunks; k++) {                          \
      const bool pair = 2 * k + 1 < n_blocks;                                                      \
      _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {                                       \
        WeightChunk w;                                                                             \
        FILE_LOADER(rows[r], k, pair, &w);                                                   \
        _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {                                     \
          const HnActChunk *a = act + (size_t)c * act_stride + k;                                  \
          const __m512 f = _mm512_cvtepi32_ps(                                                     \
            _mm512_dpbusd_epi32(_mm512_loadu_si512(a->neg_offset_sum), w.codes, _mm512_loadu_si512(a->q))); \
          acc[r][c] = _mm512_fmadd_ps(f, _mm512_mul_ps(w.scale, _mm512_loadu_ps(a->d)), acc[r][c]); \
          if (MINS) {                                                                              \
            const BLOCK *b = (const BLOCK *)rows[r] + 2 * k;                                       \
            tail_mins[r][c] += TAIL_MIN(&b[0]) * a->block_sum[0] + (pair ? TAIL_MIN(&b[1]) * a->block_sum[1] : 0.0f); \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    tile_store(acc, tail_mins, n_rows, NR, NC, out, out_stride);                                   \
  }                                                                                                \
  DEFINE_TILE_DISPATCH(NAME)

#define NO_TAIL_MIN(blk) ((void)(blk), 0.0f)
#define TAIL_MIN_M(blk) _cvtsh_ss((blk)->m)
DEFINE_GEMM_GROUPED(gemm_q4_0_grouped, HnBlockQ4_0, grouped_codes_q4_0, load_q4_0, 0, NO_TAIL_MIN)
DEFINE_GEMM_GROUPED(gemm_q8_0_grouped, HnBlockQ8_0, grouped_codes_q8_0, load_q8_0, 0, NO_TAIL_MIN)
DEFINE_GEMM_GROUPED(gemm_q5_0_grouped, HnBlockQ5_0, grouped_codes_q5_0, load_q5_0, 0, NO_TAIL_MIN)
DEFINE_GEMM_GROUPED(gemm_q4_1_grouped, HnBlockQ4_1, grouped_codes_q4_1, load_q4_1, 1, TAIL_MIN_M)
DEFINE_GEMM_GROUPED(gemm_q5_1_grouped, HnBlockQ5_1, grouped_codes_q5_1, load_q5_1, 1, TAIL_MIN_M)

/* Q4_K in the file layout, one super-block at a time, for the super-block after the last
 * run of the regrouped tile below: the super-block's scales are unpacked once, the four
 * chunks' codes come from two 64-byte loads, and the mins are applied with one FMA
 * against the activation's group sums instead of once per chunk.  Each column is summed
 * as it is alone, whatever NC is (as Q4_0's above).  Super-blocks [sb_begin, sb_end) of
 * the rows into acc.  This was also a tile of its own for matrices in the file layout;
 * the measured choice took the four-row dot product over it on both processors it was
 * measured on (docs/speed.md), and a Q4_K matrix that is not regrouped (an expert, one
 * of fewer than 512 columns) now always takes the dot product, as at the AVX2 level,
 * since the choice measures the regrouped tile. */
static inline __attribute__((always_inline)) void
q4_k_tile_superblocks(int64_t sb_begin, int64_t sb_end, const uint8_t *const rows[8], size_t next_tile,
                      const HnActChunk *act, size_t act_stride, const int NR, const int NC,
                      __m512 acc[8][TILE_COLS])
{
  const __m512i half_pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512i pick1 = _mm512_add_epi32(half_pick, _mm512_set1_epi32(2));
  const __m512i pick2 = _mm512_add_epi32(half_pick, _mm512_set1_epi32(4));
  const __m512i pick3 = _mm512_add_epi32(half_pick, _mm512_set1_epi32(6));
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int64_t sb = sb_begin; sb < sb_end; sb++) {
    __m512i q[TILE_COLS][4];
    __m512 d[TILE_COLS][4], group_sums[TILE_COLS];
    _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {
      const HnActChunk *a = act + (size_t)c * act_stride + 4 * sb;
      _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        q[c][j] = _mm512_loadu_si512(a[j].q);
        d[c][j] = _mm512_loadu_ps(a[j].d);
      }
      /* lanes 8-15: d·Σ of each group, to meet the -dmin·min lanes of the scale vector */
      group_sums[c] = high_half_ps(_mm256_setr_ps(a[0].block_sum[0], a[0].block_sum[1], a[1].block_sum[0],
                                                  a[1].block_sum[1], a[2].block_sum[0], a[2].block_sum[1],
                                                  a[3].block_sum[0], a[3].block_sum[1]));
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
      const HnBlockQ4_K *b = (const HnBlockQ4_K *)rows[r] + sb;
      prefetch_block_weights(b + 4, (const char *)b + next_tile, sizeof *b);
      const __m512 sm = q4_k_scales_mins(b);
      const __m512i bits01 = _mm512_loadu_si512(b->qs), bits23 = _mm512_loadu_si512(b->qs + 64);
      /* chunk j needs [low nibbles | high nibbles] of qs[32j .. 32j+31] */
      const __m512i lo01 = _mm512_and_si512(bits01, low4), hi01 = _mm512_and_si512(_mm512_srli_epi16(bits01, 4), low4);
      const __m512i lo23 = _mm512_and_si512(bits23, low4), hi23 = _mm512_and_si512(_mm512_srli_epi16(bits23, 4), low4);
      const __m512i codes[4] = {
        _mm512_shuffle_i64x2(lo01, hi01, _MM_SHUFFLE(1, 0, 1, 0)),
        _mm512_shuffle_i64x2(lo01, hi01, _MM_SHUFFLE(3, 2, 3, 2)),
        _mm512_shuffle_i64x2(lo23, hi23, _MM_SHUFFLE(1, 0, 1, 0)),
        _mm512_shuffle_i64x2(lo23, hi23, _MM_SHUFFLE(3, 2, 3, 2)),
      };
      /* lanes 0-7 take group 2j's scale, 8-15 group 2j+1's */
      const __m512 group_scale[4] = {
        _mm512_permutexvar_ps(half_pick, sm),
        _mm512_permutexvar_ps(pick1, sm),
        _mm512_permutexvar_ps(pick2, sm),
        _mm512_permutexvar_ps(pick3, sm),
      };
      const __m512i z = _mm512_setzero_si512();
      _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
          acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(z, codes[j], q[c][j])),
                                      _mm512_mul_ps(group_scale[j], d[c][j]), acc[r][c]);
        acc[r][c] = _mm512_fmadd_ps(sm, group_sums[c], acc[r][c]);
      }
    }
  }
}


/* The 16 sub-blocks' scales (d · scale, lane j: sub-block j) and mins (dmin · min) of a
 * run of Q4_K regrouped (hn-quants.h). */
static inline __attribute__((always_inline)) void
q4_k_run_scales_mins(const uint8_t *group, __m512 *scales, __m512 *mins)
{
  __m128i scale_bytes, min_bytes;
  q4_k_run_scale_min_bytes(group, &scale_bytes, &min_bytes);
  /* the two super-blocks' d, then their dmin; lanes 0-7 take the first's, 8-15 the second's */
  const __m512 halves = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)group)));
  const __m512i pick_d = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512i pick_dmin = _mm512_add_epi32(pick_d, _mm512_set1_epi32(2));
  *scales = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(scale_bytes)), _mm512_permutexvar_ps(pick_d, halves));
  *mins = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(min_bytes)), _mm512_permutexvar_ps(pick_dmin, halves));
}

/* Q4_K regrouped at load: per run of two super-blocks and row, Q4_0's 4 loads, 8 AND or
 * shift and 8 VPDPBUSD give each sub-block's sum in its own lane, whose scale and min
 * apply with one FMA each, where the file layout takes two super-blocks' shuffles and
 * permutes of codes and scales.  The super-block after the last run, where the count is
 * odd, is in the file layout. */
static inline __attribute__((always_inline)) void
gemm_q4_k_grouped_tile(int64_t n, const uint8_t *weight, size_t weight_stride, int n_rows, const HnActChunk *act,
                       size_t act_stride, const int NR, const int NC, float *out, size_t out_stride)
{
  const size_t group_bytes = 2 * sizeof(HnBlockQ4_K);
  const uint8_t *rows[8];
  __m512 acc[8][TILE_COLS];
  tile_begin(weight, weight_stride, n_rows, NR, NC, rows, acc);
  const int64_t n_groups = n / (32 * HN_GROUP_BLOCKS);
  const size_t next_tile = (size_t)NR * weight_stride;
  for (int64_t g = 0; g < n_groups; g++) {
    _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
      const uint8_t *group = rows[r] + (size_t)g * group_bytes;
      for (size_t off = 0; off < group_bytes; off += 64)
        prefetch_weights(group + off, next_tile);
      __m512i codes[8];
      grouped_codes_q4_0(group, codes);
      __m512 weight_scales, weight_mins;
      q4_k_run_scales_mins(group, &weight_scales, &weight_mins);
      _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {
        const HnActGroup *a = (const HnActGroup *)(act + (size_t)c * act_stride) + g;
        acc[r][c] =
          _mm512_fmadd_ps(grouped_dot(codes, a), _mm512_mul_ps(weight_scales, _mm512_loadu_ps(a->d)), acc[r][c]);
        acc[r][c] = _mm512_fnmadd_ps(weight_mins, _mm512_loadu_ps(a->block_sum), acc[r][c]);
      }
    }
  }
  q4_k_tile_superblocks(2 * n_groups, n / HN_QK_K, rows, next_tile, act, act_stride, NR, NC, acc);
  tile_store(acc, NULL, n_rows, NR, NC, out, out_stride);
}
DEFINE_TILE_DISPATCH(gemm_q4_k_grouped)

/* Q6_K decode, one super-block at a time: the 16 group scales are converted once, each
 * half super-block's ql/qh bytes are loaded once for its two chunks, and a chunk's
 * scale vector is one permute of them. */
#define Q6K_ROWS 8
static void
gemv_q6_k(int64_t n, const uint8_t *weight, size_t weight_stride, int n_rows, const HnActChunk *act,
          float *out, size_t out_stride)
{
  const uint8_t *rows[Q6K_ROWS];
  for (int r = 0; r < Q6K_ROWS; r++)
    rows[r] = weight + (size_t)(r < n_rows ? r : 0) * weight_stride;
  __m512 acc[Q6K_ROWS];
  for (int r = 0; r < Q6K_ROWS; r++)
    acc[r] = _mm512_setzero_ps();
  const size_t next_tile = Q6K_ROWS * weight_stride;
  const __m512i group_of_lane = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i low4 = _mm512_set1_epi8(0x0f), two_bits = _mm512_set1_epi8(0x30);
  const __m512i shifts_lo = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
  const __m512i shifts_hi = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
  for (int64_t sb = 0; sb < n / HN_QK_K; sb++) {
    const HnActChunk *a = act + 4 * sb;
    _Pragma("GCC unroll 8") for (int r = 0; r < Q6K_ROWS; r++) {
      const HnBlockQ6_K *b = (const HnBlockQ6_K *)rows[r] + sb;
      prefetch_block_weights(b + 3, (const char *)b + next_tile, sizeof *b);
      const __m512 sv = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b->scales))),
                                      _mm512_set1_ps(_cvtsh_ss(b->d)));
      _Pragma("GCC unroll 2") for (int half = 0; half < 2; half++) {
        const __m512i ql = _mm512_loadu_si512(b->ql + 64 * half);
        const __m256i qh256 = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * half));
        const __m512i qh = _mm512_inserti64x4(_mm512_castsi256_si512(qh256), qh256, 1);
        const __m512i c_lo = _mm512_or_si512(_mm512_and_si512(ql, low4),
                                             _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi16(qh, shifts_lo), 4), two_bits));
        const __m512i c_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                             _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi16(qh, shifts_hi), 4), two_bits));
        const HnActChunk *a0 = a + 2 * half, *a1 = a0 + 1;
        const __m512i i0 = _mm512_dpbusd_epi32(_mm512_loadu_si512(a0->neg_offset_sum), c_lo, _mm512_loadu_si512(a0->q));
        const __m512i i1 = _mm512_dpbusd_epi32(_mm512_loadu_si512(a1->neg_offset_sum), c_hi, _mm512_loadu_si512(a1->q));
        const __m512 s0 = _mm512_permutexvar_ps(_mm512_add_epi32(group_of_lane, _mm512_set1_epi32(8 * half)), sv);
        const __m512 s1 = _mm512_permutexvar_ps(_mm512_add_epi32(group_of_lane, _mm512_set1_epi32(8 * half + 4)), sv);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0), _mm512_mul_ps(s0, _mm512_loadu_ps(a0->d)), acc[r]);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), _mm512_mul_ps(s1, _mm512_loadu_ps(a1->d)), acc[r]);
      }
    }
  }
  for (int r = 0; r < n_rows && r < Q6K_ROWS; r++)
    out[(size_t)r * out_stride] = _mm512_reduce_add_ps(acc[r]);
}

/* Q2_K's codes times their group's scale, for VPDPBUSD (KQ_Q2_K_TABLES below): a code is
 * 0-3 and a scale 0-15, so the product fits an unsigned byte and the sums stay the exact
 * integers of VPMADDUBSW and VPMADDWD against the scales.  Each 128-bit lane of a run
 * holds one group's 16 codes (lane L: group 8 · (L / 2) + 2k + L % 2 for run k), so one
 * byte shuffle of a lane's table [0, s, 2s, 3s] per run does the multiplying: bytes 4k ..
 * 4k + 3 of the lane hold run k's table, and the codes + 4k index it. */
static inline __attribute__((always_inline)) __m512i
q2_k_code_tables(const uint8_t scales[16])
{
  /* byte 4k + j of lane L: the scale of lane L's group in run k */
  static const int8_t group_of[64] = {
    0, 0, 0, 0,  2,  2,  2,  2,  4,  4,  4,  4,  6,  6,  6,  6,  /* lane 0: groups 0, 2, 4, 6 */
    1, 1, 1, 1,  3,  3,  3,  3,  5,  5,  5,  5,  7,  7,  7,  7,  /* lane 1: 1, 3, 5, 7 */
    8, 8, 8, 8,  10, 10, 10, 10, 12, 12, 12, 12, 14, 14, 14, 14, /* lane 2: 8, 10, 12, 14 */
    9, 9, 9, 9,  11, 11, 11, 11, 13, 13, 13, 13, 15, 15, 15, 15, /* lane 3: 9, 11, 13, 15 */
  };
  /* position j of a table: s where j is 1 or 3, 2s where j is 2 or 3 (the scale is the
   * low nibble; the masks drop the min above it) */
  const __m512i once = _mm512_set1_epi32(0x0f000f00), twice = _mm512_set1_epi32(0x1e1e0000);
  const __m512i s = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)scales)),
                                        _mm512_loadu_si512(group_of));
  return _mm512_add_epi8(_mm512_and_si512(s, once), _mm512_and_si512(_mm512_add_epi8(s, s), twice));
}

/* Run k's codes of a step's bits (both halves), each times its group's scale */
static inline __attribute__((always_inline)) __m512i
q2_k_scaled_codes(__m512i tables, __m512i bits, int k)
{
  /* (bits >> 2k & 3) | 4k: the code, pointing into run k's table */
  const __m512i index = _mm512_ternarylogic_epi32(_mm512_srli_epi16(bits, 2 * k), _mm512_set1_epi8(3),
                                                  _mm512_set1_epi8((char)(4 * k)), 0xea);
  return _mm512_shuffle_epi8(tables, index);
}

/* The k-quants' four-row decode (hn-simd-kquant-rows.h), two runs of codes per vector. */
#define KQ_VEC __m512i
#define KQ_FVEC __m512
#define KQ_RUNS 2
#define KQ_JOIN256(a, b) _mm512_inserti64x4(_mm512_castsi256_si512(a), (b), 1)
#define KQ_BCAST128(x) _mm512_broadcast_i32x4(x)
#define KQ_FROM128(x) _mm512_zextsi128_si512(x)
#define KQ_LOADU(p) _mm512_loadu_si512(p)
#define KQ_ZERO() _mm512_setzero_si512()
#define KQ_SET1_8(x) _mm512_set1_epi8((char)(x))
#define KQ_AND(a, b) _mm512_and_si512(a, b)
#define KQ_OR(a, b) _mm512_or_si512(a, b)
#define KQ_SRLI16(v, n) _mm512_srli_epi16(v, n)
#define KQ_SLLI16(v, n) _mm512_slli_epi16(v, n)
#define KQ_ADD32(a, b) _mm512_add_epi32(a, b)
#define KQ_MADDUBS(a, b) _mm512_maddubs_epi16(a, b)
#define KQ_MADD(a, b) _mm512_madd_epi16(a, b)
/* Q3_K's four-row kernel 10.0 -> 9.3 ns per block and row in the caches, Q3_K_M's
 * generation 3 % faster (docs/speed.md, "VPDPWSSD in the 16-group types' runs") */
#define KQ_MADD_ACC(acc, a, b) _mm512_dpwssd_epi32(acc, a, b)
#define KQ_SHUFFLE8(a, b) _mm512_shuffle_epi8(a, b)
#define KQ_CVT(v) _mm512_cvtepi32_ps(v)
#define KQ_FZERO() _mm512_setzero_ps()
#define KQ_FSET1(x) _mm512_set1_ps(x)
#define KQ_FMADD(a, b, c) _mm512_fmadd_ps(a, b, c)
#define KQ_REDUCE(v) _mm512_reduce_add_ps(v)
#define KQ_HOIST_Y 1 /* the activation's runs paired once per block for the four rows */
#define KQ_Q2_K_SCALED 1
#define KQ_Q2_K_TABLES(scales) q2_k_code_tables(scales)
#define KQ_Q2_K_RUN(sum, tables, bits, k, y) _mm512_dpbusd_epi32(sum, q2_k_scaled_codes(tables, bits, k), y)
#define KQ_NAME(x) x##_512
#include "hn-simd-kquant-rows.h"


static void
gemm_q6_k_dispatch(int64_t n, const void *weight, size_t weight_stride, int n_rows, const HnActChunk *act,
                   size_t act_stride, int n_cols, float *out, size_t out_stride)
{
  if (n_cols == 1) {
    gemv_q6_k(n, weight, weight_stride, n_rows, act, out, out_stride);
    return;
  }
  gemm_q6_k(n, weight, weight_stride, n_rows, act, act_stride, n_cols, out, out_stride);
}

/* ---- panel GEMM for prompt processing ----
 *
 * A panel holds 16 weight rows, per 32-element block: eight 64-byte vectors whose 32-bit
 * lane r carries four consecutive unsigned codes of row r, then the 16 rows' scales (two
 * sets for types with 16-element groups) and negated mins.  One VPDPBUSD then does four
 * multiply-adds for each of the 16 rows against four activation bytes broadcast from
 * memory, so a whole block costs eight dot instructions plus one convert and one or two
 * FMAs per token — the per-block float work is shared by 16 rows instead of being paid
 * per row.  Packing costs a few instructions per weight byte, once per matrix product,
 * and is repaid over the batch's tokens. */

#include "hn-simd-panel.h"

/* Writes the 32 codes of each of 16 rows (tmp[r], 32 bytes apart) in lane order: a
 * transpose of 16 rows × 8 words, as two 8 × 8 transposes side by side (rows 0-7 in the
 * low half of each vector, rows 8-15 in the high half) with in-lane unpacks and one
 * two-source permute per output.  It replaced eight gathers per block, which on an AMD
 * EPYC (Zen 5) were most of the packing once the weights were prefetched. */
static inline void
transpose_codes(const uint8_t tmp[HN_PANEL_ROWS][32], uint8_t codes[8][64])
{
  __m512i z[8], t[8], u[8];
  _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
    z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_load_si256((const __m256i *)tmp[i])),
                              _mm256_load_si256((const __m256i *)tmp[i + 8]), 1);
  /* per 128-bit lane: words of rows 2k and 2k+1 interleaved */
  _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
    t[2 * k] = _mm512_unpacklo_epi32(z[2 * k], z[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(z[2 * k], z[2 * k + 1]);
  }
  /* u[4h + c]: lane l holds word c + 4 (l % 2) of rows 4h .. 4h + 3 (+ 8 in lanes 2, 3) */
  _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
    u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
  const __m512i low_words = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i high_words = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
    _mm512_store_si512(codes[c], _mm512_permutex2var_epi64(u[c], low_words, u[4 + c]));
    _mm512_store_si512(codes[c + 4], _mm512_permutex2var_epi64(u[c], high_words, u[4 + c]));
  }
}


/* HALVES: 1 scale per 32 codes, or 2 (one per 16).  MINS: 0, 1 per 32 elements (times
 * the activation's d · Σq), or 2 per 16 (Q2_K, with BLOCK = PanelBlockMin16). */
#define DEFINE_PANEL_GEMM(NAME, BLOCK, HALVES, MINS)                                                 \
  static inline __attribute__((always_inline)) void NAME##_cols(                                    \
    const BLOCK *pb, int64_t n_blocks, int n_rows, const HnActBlock *act, size_t act_stride,       \
    const int n_cols, float *out, size_t out_stride)                                               \
  {                                                                                                \
    __m512 acc[HN_PANEL_COLS];                                                                     \
    _Pragma("GCC unroll 8") for (int c = 0; c < n_cols; c++) acc[c] = _mm512_setzero_ps();         \
    for (int64_t b = 0; b < n_blocks; b++, pb++) {                                                 \
      __m512i codes[8];                                                                            \
      _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)                                          \
        codes[j] = _mm512_load_si512(pb->codes[j]);                                                \
      const __m512 s0 = _mm512_load_ps(pb->scale[0]);                                              \
      const __m512 s1 = HALVES == 2 ? _mm512_load_ps(pb->scale[1]) : s0;                           \
      const __m512 nm0 = MINS ? _mm512_load_ps(pb->neg_min[0]) : s0;                               \
      const __m512 nm1 = MINS == 2 ? _mm512_load_ps(pb->neg_min[MINS == 2 ? 1 : 0]) : s0;          \
      _Pragma("GCC unroll 8") for (int c = 0; c < n_cols; c++) {                                   \
        const HnActBlock *a = act + (size_t)c * act_stride + b;                                    \
        const __m512 d = _mm512_set1_ps(a->d);                                                     \
        if (HALVES == 1) {                                                                         \
          __m512i i = _mm512_set1_epi32(a->off_sum32);                                             \
          _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)                                      \
            i = _mm512_dpbusd_epi32(i, codes[j], _mm512_set1_epi32(a->q4[j]));                     \
          acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_mul_ps(s0, d), acc[c]);           \
        } else {                                                                                   \
          __m512i i0 = _mm512_set1_epi32(a->off_sum[0]), i1 = _mm512_set1_epi32(a->off_sum[1]);    \
          _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                                    \
            i0 = _mm512_dpbusd_epi32(i0, codes[j], _mm512_set1_epi32(a->q4[j]));                   \
            i1 = _mm512_dpbusd_epi32(i1, codes[j + 4], _mm512_set1_epi32(a->q4[j + 4]));           \
          }                                                                                        \
          acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0), _mm512_mul_ps(s0, d), acc[c]);          \
          acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), _mm512_mul_ps(s1, d), acc[c]);          \
        }                                                                                          \
        if (MINS == 1)                                                                             \
          acc[c] = _mm512_fmadd_ps(nm0, _mm512_set1_ps(a->dsum), acc[c]);                          \
        if (MINS == 2) {                                                                           \
          acc[c] = _mm512_fmadd_ps(nm0, _mm512_set1_ps(a->dsum_half[0]), acc[c]);                  \
          acc[c] = _mm512_fmadd_ps(nm1, _mm512_set1_ps(a->dsum_half[1]), acc[c]);                  \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    const __mmask16 keep = (__mmask16)((1u << n_rows) - 1);                                        \
    _Pragma("GCC unroll 8") for (int c = 0; c < n_cols; c++)                                       \
      _mm512_mask_storeu_ps(out + (size_t)c * out_stride, keep, acc[c]);                           \
  }                                                                                                \
                                                                                                   \
  static void NAME(const void *panel, int64_t n, int n_rows, const HnActBlock *act,                \
                   size_t act_stride, int n_cols, float *out, size_t out_stride)                   \
  {                                                                                                \
    const BLOCK *pb = panel;                                                                       \
    const int64_t nb = n / 32;                                                                     \
    HN_PANEL_DISPATCH_COLS(NAME##_cols, pb, nb, n_rows, act, act_stride, n_cols, out, out_stride); \
  }

DEFINE_PANEL_GEMM(panel_gemm_single, PanelBlock, 1, 0)
DEFINE_PANEL_GEMM(panel_gemm_min, PanelBlock, 1, 1)
DEFINE_PANEL_GEMM(panel_gemm_halves, PanelBlock, 2, 0)
DEFINE_PANEL_GEMM(panel_gemm_halves_min16, PanelBlockMin16, 2, 2)

/* ---- F16 and BF16 weights ---- */

/* 16 rows' values of one element as floats: F16 by conversion, BF16 (the high half of
 * an F32) by widening 16 bits. */
#define LOAD16_F16(p) _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(p)))
#define LOAD16_BF16(p)                                                                               \
  _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_load_si256((const __m256i *)(p))), 16))

#define DEFINE_PANEL_GEMM_FLOAT(NAME, LOAD16)                                                        \
  static inline __attribute__((always_inline)) void NAME##_cols(                                    \
    const uint16_t *panel, int64_t n, int n_rows, const float *act, size_t act_stride, const int n_cols, \
    float *out, size_t out_stride)                                                                 \
  {                                                                                                \
    __m512 acc[HN_PANEL_COLS];                                                                     \
    _Pragma("GCC unroll 8") for (int c = 0; c < n_cols; c++) acc[c] = _mm512_setzero_ps();         \
    for (int64_t i = 0; i < n; i++) {                                                              \
      const __m512 w = LOAD16(panel + i * HN_PANEL_ROWS);                                          \
      _Pragma("GCC unroll 8") for (int c = 0; c < n_cols; c++)                                     \
        acc[c] = _mm512_fmadd_ps(w, _mm512_set1_ps(act[(size_t)c * act_stride + (size_t)i]), acc[c]); \
    }                                                                                              \
    const __mmask16 keep = (__mmask16)((1u << n_rows) - 1);                                        \
    _Pragma("GCC unroll 8") for (int c = 0; c < n_cols; c++)                                       \
      _mm512_mask_storeu_ps(out + (size_t)c * out_stride, keep, acc[c]);                           \
  }                                                                                                \
                                                                                                   \
  static void NAME(const void *panel, int64_t n, int n_rows, const float *act, size_t act_stride,  \
                   int n_cols, float *out, size_t out_stride)                                      \
  {                                                                                                \
    const uint16_t *p = panel;                                                                     \
    HN_PANEL_DISPATCH_COLS(NAME##_cols, p, n, n_rows, act, act_stride, n_cols, out, out_stride);   \
  }

DEFINE_PANEL_GEMM_FLOAT(panel_gemm_f16, LOAD16_F16)
DEFINE_PANEL_GEMM_FLOAT(panel_gemm_bf16, LOAD16_BF16)

/* Decode with F16 or BF16 weights reads 2 bytes per weight: wide loads, four
 * accumulators and a prefetch a little ahead of the row keep the memory bus busy.
 * 16 values become floats: F16 by conversion, BF16 (the high half of an f32) by a shift. */
#define LOAD16_F16_AS_PS(v) _mm512_cvtph_ps(v)
#define LOAD16_BF16_AS_PS(v) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16))

#define DEFINE_VEC_DOT_16BIT_512(NAME, TO_PS)                                                  \
  static float NAME(int64_t n, const void *w, const void *a)                                   \
  {                                                                                            \
    const uint16_t *x = w, *y = a;                                                             \
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();                             \
    __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();                             \
    int64_t i = 0;                                                                             \
    for (; i + 64 <= n; i += 64) {                                                             \
      _mm_prefetch((const char *)(x + i) + 1024, _MM_HINT_T0);                                 \
      _mm_prefetch((const char *)(x + i) + 1088, _MM_HINT_T0);                                 \
      acc0 = _mm512_fmadd_ps(TO_PS(_mm256_loadu_si256((const __m256i *)(x + i))),              \
                             TO_PS(_mm256_loadu_si256((const __m256i *)(y + i))), acc0);       \
      acc1 = _mm512_fmadd_ps(TO_PS(_mm256_loadu_si256((const __m256i *)(x + i + 16))),         \
                             TO_PS(_mm256_loadu_si256((const __m256i *)(y + i + 16))), acc1);  \
      acc2 = _mm512_fmadd_ps(TO_PS(_mm256_loadu_si256((const __m256i *)(x + i + 32))),         \
                             TO_PS(_mm256_loadu_si256((const __m256i *)(y + i + 32))), acc2);  \
      acc3 = _mm512_fmadd_ps(TO_PS(_mm256_loadu_si256((const __m256i *)(x + i + 48))),         \
                             TO_PS(_mm256_loadu_si256((const __m256i *)(y + i + 48))), acc3);  \
    }                                                                                          \
    for (; i + 16 <= n; i += 16)                                                               \
      acc0 = _mm512_fmadd_ps(TO_PS(_mm256_loadu_si256((const __m256i *)(x + i))),              \
                             TO_PS(_mm256_loadu_si256((const __m256i *)(y + i))), acc0);       \
    if (i < n) {                                                                               \
      const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);                                    \
      acc1 = _mm512_fmadd_ps(TO_PS(_mm256_maskz_loadu_epi16(m, x + i)),                        \
                             TO_PS(_mm256_maskz_loadu_epi16(m, y + i)), acc1);                 \
    }                                                                                          \
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3))); \
  }

DEFINE_VEC_DOT_16BIT_512(vec_dot_f16_512, LOAD16_F16_AS_PS)
DEFINE_VEC_DOT_16BIT_512(vec_dot_bf16_512, LOAD16_BF16_AS_PS)

/* ---- attention ---- */

/* e^x for x <= 0 (attention weights): x = n·ln2 + r with |r| <= ln2/2, a degree-7
 * Taylor polynomial for e^r (relative error below 1e-8 there), scaled by 2^n; inputs
 * below -87 give (almost) zero instead of denormals. */
static inline __m512
exp_neg_512(__m512 x)
{
  /* the bound first, so that a NaN score stays NaN (see exp_neg_256) */
  x = _mm512_max_ps(_mm512_set1_ps(-87.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

/* Lane i of the result = the sum of the lanes of a[i], for 16 vectors: four levels that
 * each add the two halves of pairs of vectors (256-bit, 128-bit, then within the 128-bit
 * lanes twice), 30 shuffles and 15 adds for 16 sums, and a last permutation that puts the
 * sums in order. */
static inline __m512
sums16_512(const __m512 *a)
{
  __m512 x[8], y[4], z[2];
  for (int c = 0; c < 8; c++) /* 256-bit halves: row c in the low half, row c+8 in the high */
    x[c] = _mm512_add_ps(_mm512_shuffle_f32x4(a[c], a[c + 8], 0x44), _mm512_shuffle_f32x4(a[c], a[c + 8], 0xEE));
  for (int c = 0; c < 4; c++) /* 128-bit blocks: rows c, c+8, c+4, c+12 */
    y[c] = _mm512_add_ps(_mm512_shuffle_f32x4(x[c], x[c + 4], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(x[c], x[c + 4], _MM_SHUFFLE(3, 1, 3, 1)));
  for (int c = 0; c < 2; c++) /* pairs within each block: rows of y[c], then of y[c+2] */
    z[c] = _mm512_add_ps(_mm512_shuffle_ps(y[c], y[c + 2], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(y[c], y[c + 2], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 w = _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
  /* block k, element e of w holds row [0, 2, 1, 3][e] + [0, 8, 4, 12][k] */
  const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
  return _mm512_permutexvar_ps(order, w);
}

/* Σ s[0..n) in double: the softmax denominator, summed in double like the reference's. */
static inline double
sum_as_double_512(const float *s, int n)
{
  __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(s + i)));
    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_loadu_ps(s + i + 8)));
  }
  double sum = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
  for (; i < n; i++)
    sum += s[i];
  return sum;
}

#define VEC __m512
#define VLEN 16
#define VZERO() _mm512_setzero_ps()
#define VSET1(x) _mm512_set1_ps(x)
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps(p, v)
#define VLOAD_H(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define VROUND_H(v) _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT))
#define VFMADD(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VMUL(a, b) _mm512_mul_ps(a, b)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VHSUM(v) _mm512_reduce_add_ps(v)
#define VSUB(a, b) _mm512_sub_ps(a, b)
#define VEXP(v) exp_neg_512(v)
#define VHMAX(v) _mm512_reduce_max_ps(v)
#define VSUMS(a) sums16_512(a)
#define VMAX(a, b) _mm512_max_ps(a, b)
#define VSUM_DOUBLE(s, n) sum_as_double_512(s, n)
#define ATTN_ACC_VECS 16
#define ATTN_NAME attn_avx512
#define ATTN_BODY attn_body_avx512
#include "hn-simd-attn.h"

void
hn_simd_fill_avx512(HnSimdKernels *k)
{
  k->level = HN_SIMD_AVX512;
  k->name = "AVX-512 (VNNI)";
  k->attn = attn_avx512;
  k->pack_panel[HN_TYPE_F16] = pack_panel_16bit;
  k->panel_gemm_f16 = panel_gemm_f16;
  k->pack_panel[HN_TYPE_BF16] = pack_panel_16bit;
  k->panel_gemm_bf16 = panel_gemm_bf16;
  k->vec_dot[HN_TYPE_F16] = vec_dot_f16_512;
  k->vec_dot[HN_TYPE_BF16] = vec_dot_bf16_512;
  k->attn_multiple = 16;
  k->pack_act = pack_act;
  k->gemm_rows = 8; /* 8 rows for one column, split into tiles of 4 for more */
  k->gemm_cols = TILE_COLS;
  k->gemm_tile[HN_TYPE_Q8_0] = gemm_q8_0;
  k->gemm_offset[HN_TYPE_Q8_0] = 128;
  k->gemm_tile[HN_TYPE_Q4_0] = gemm_q4_0;
  k->gemm_offset[HN_TYPE_Q4_0] = 8;
  k->gemm_tile[HN_TYPE_Q4_0_GROUPED] = gemm_q4_0_grouped;
  k->gemm_offset[HN_TYPE_Q4_0_GROUPED] = 8;
  k->gemm_tile[HN_TYPE_Q8_0_GROUPED] = gemm_q8_0_grouped;
  k->gemm_offset[HN_TYPE_Q8_0_GROUPED] = 128;
  k->gemm_tile[HN_TYPE_Q5_0_GROUPED] = gemm_q5_0_grouped;
  k->gemm_offset[HN_TYPE_Q5_0_GROUPED] = 16;
  k->gemm_tile[HN_TYPE_Q4_1_GROUPED] = gemm_q4_1_grouped;
  k->gemm_offset[HN_TYPE_Q4_1_GROUPED] = 0;
  k->gemm_tile[HN_TYPE_Q5_1_GROUPED] = gemm_q5_1_grouped;
  k->gemm_offset[HN_TYPE_Q5_1_GROUPED] = 0;
  k->gemm_tile[HN_TYPE_Q4_K_GROUPED] = gemm_q4_k_grouped;
  k->gemm_offset[HN_TYPE_Q4_K_GROUPED] = 0;
  k->gemm_tile[HN_TYPE_Q6_K] = gemm_q6_k_dispatch;
  k->gemm_offset[HN_TYPE_Q6_K] = 32;

  k->pack_panel[HN_TYPE_Q8_0] = pack_panel_q8_0;
  k->panel_gemm[HN_TYPE_Q8_0] = panel_gemm_single;
  k->panel_offset[HN_TYPE_Q8_0] = 128;
  k->pack_panel[HN_TYPE_Q4_0] = pack_panel_q4_0;
  k->panel_gemm[HN_TYPE_Q4_0] = panel_gemm_single;
  k->panel_offset[HN_TYPE_Q4_0] = 8;
  k->pack_panel[HN_TYPE_Q4_0_GROUPED] = pack_panel_q4_0_grouped;
  k->panel_gemm[HN_TYPE_Q4_0_GROUPED] = panel_gemm_single;
  k->panel_offset[HN_TYPE_Q4_0_GROUPED] = 8;
  k->pack_panel[HN_TYPE_Q8_0_GROUPED] = pack_panel_q8_0_grouped;
  k->panel_gemm[HN_TYPE_Q8_0_GROUPED] = panel_gemm_single;
  k->panel_offset[HN_TYPE_Q8_0_GROUPED] = 128;
  k->pack_panel[HN_TYPE_Q5_0_GROUPED] = pack_panel_q5_0_grouped;
  k->panel_gemm[HN_TYPE_Q5_0_GROUPED] = panel_gemm_single;
  k->panel_offset[HN_TYPE_Q5_0_GROUPED] = 16;
  k->pack_panel[HN_TYPE_Q4_1_GROUPED] = pack_panel_q4_1_grouped;
  k->panel_gemm[HN_TYPE_Q4_1_GROUPED] = panel_gemm_min;
  k->panel_offset[HN_TYPE_Q4_1_GROUPED] = 0;
  k->pack_panel[HN_TYPE_Q5_1_GROUPED] = pack_panel_q5_1_grouped;
  k->panel_gemm[HN_TYPE_Q5_1_GROUPED] = panel_gemm_min;
  k->panel_offset[HN_TYPE_Q5_1_GROUPED] = 0;
  k->pack_panel[HN_TYPE_Q4_K] = pack_panel_q4_k;
  k->panel_gemm[HN_TYPE_Q4_K] = panel_gemm_min;
  k->panel_offset[HN_TYPE_Q4_K] = 0;
  k->pack_panel[HN_TYPE_Q4_K_GROUPED] = pack_panel_q4_k_grouped;
  k->panel_gemm[HN_TYPE_Q4_K_GROUPED] = panel_gemm_min;
  k->panel_offset[HN_TYPE_Q4_K_GROUPED] = 0;
  k->pack_panel[HN_TYPE_Q6_K] = pack_panel_q6_k;
  k->panel_gemm[HN_TYPE_Q6_K] = panel_gemm_halves;
  k->panel_offset[HN_TYPE_Q6_K] = 32;
  k->pack_panel[HN_TYPE_Q5_0] = pack_panel_q5_0;
  k->panel_gemm[HN_TYPE_Q5_0] = panel_gemm_single;
  k->panel_offset[HN_TYPE_Q5_0] = 16;
  k->pack_panel[HN_TYPE_Q4_1] = pack_panel_q4_1;
  k->panel_gemm[HN_TYPE_Q4_1] = panel_gemm_min;
  k->panel_offset[HN_TYPE_Q4_1] = 0;
  k->pack_panel[HN_TYPE_Q5_1] = pack_panel_q5_1;
  k->panel_gemm[HN_TYPE_Q5_1] = panel_gemm_min;
  k->panel_offset[HN_TYPE_Q5_1] = 0;
  k->pack_panel[HN_TYPE_Q5_K] = pack_panel_q5_k;
  k->panel_gemm[HN_TYPE_Q5_K] = panel_gemm_min;
  k->panel_offset[HN_TYPE_Q5_K] = 0;
  k->pack_panel[HN_TYPE_Q3_K] = pack_panel_q3_k;
  k->panel_gemm[HN_TYPE_Q3_K] = panel_gemm_halves;
  k->panel_offset[HN_TYPE_Q3_K] = 4;
  k->pack_panel[HN_TYPE_Q2_K] = pack_panel_q2_k;
  k->panel_gemm[HN_TYPE_Q2_K] = panel_gemm_halves_min16;
  k->panel_offset[HN_TYPE_Q2_K] = 0;
  k->vec_dot_rows[HN_TYPE_Q4_K] = vec_dot_rows_q4_k_512;
  k->vec_dot_rows[HN_TYPE_Q5_K] = vec_dot_rows_q5_k_512;
  k->vec_dot_rows[HN_TYPE_Q2_K] = vec_dot_rows_q2_k_512;
  k->vec_dot_rows[HN_TYPE_Q3_K] = vec_dot_rows_q3_k_512;
  k->vec_dot_rows[HN_TYPE_Q6_K] = vec_dot_rows_q6_k_512;
}
