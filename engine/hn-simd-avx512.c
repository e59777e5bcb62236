/* hn-simd-avx512.c — AVX-512 (F, BW, VL, VNNI) kernels: the prompt-processing GEMM.
 *
 * The GEMM multiplies weight rows in their file format with activations packed once per
 * matrix product (HnActChunk).  A tile of 4 weight rows × up to 4 activation columns is
 * computed per call: each 64-element chunk of a weight row is decoded once into unsigned
 * 8-bit codes plus per-lane scales, then used for every column with VPDPBUSD (unsigned ×
 * signed bytes, four products per 32-bit lane).  The codes' zero point is corrected with
 * the activation lane sums that the packer precomputed, so the inner loop is four
 * instructions per 64 multiply-adds: dot, convert, scale, accumulate. */
#include "hn-simd.h"
#include "hn-simd-blocks.h"

#include <immintrin.h>
#include <string.h>

#define TILE_ROWS 4
#define TILE_COLS 4

static inline __m512
broadcast_pair_halves(uint16_t d0, uint16_t d1)
{
  return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)d1), _mm_set1_epi16((short)d0)));
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
  }
}

/* ---- weight chunk decoders: 64 elements -> unsigned codes, lane scales (and mins) ---- */

typedef struct {
  __m512i codes;
  __m512 scale;
  __m512 neg_min; /* only for types with mins */
} WeightChunk;

static inline void
load_q8_0(const uint8_t *row, int64_t k, bool pair, WeightChunk *w)
{
  const SimdBlockQ8_0 *b = (const SimdBlockQ8_0 *)row + 2 * k;
  __m256i lo = _mm256_loadu_si256((const __m256i *)b[0].qs);
  __m256i hi = pair ? _mm256_loadu_si256((const __m256i *)b[1].qs) : _mm256_setzero_si256();
  /* q + 128 as an unsigned byte is q with its top bit flipped */
  __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  w->codes = _mm512_xor_si512(q, _mm512_set1_epi8((char)0x80));
  w->scale = broadcast_pair_halves(b[0].d, pair ? b[1].d : 0);
}

static inline void
load_q4_0(const uint8_t *row, int64_t k, bool pair, WeightChunk *w)
{
  const SimdBlockQ4_0 *b = (const SimdBlockQ4_0 *)row + 2 * k;
  __m128i p0 = _mm_loadu_si128((const __m128i *)b[0].qs);
  __m128i p1 = pair ? _mm_loadu_si128((const __m128i *)b[1].qs) : _mm_setzero_si128();
  __m256i packed = _mm256_set_m128i(p1, p0);
  __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(packed), _mm256_srli_epi16(packed, 4), 1);
  /* [b0 low, b1 low, b0 high, b1 high] -> element order [b0 low, b0 high, b1 low, b1 high] */
  both = _mm512_shuffle_i64x2(both, both, _MM_SHUFFLE(3, 1, 2, 0));
  w->codes = _mm512_and_si512(both, _mm512_set1_epi8(0x0f));
  w->scale = broadcast_pair_halves(b[0].d, pair ? b[1].d : 0);
}

static inline void
load_q4_k(const uint8_t *row, int64_t k, bool pair, WeightChunk *w)
{
  const SimdBlockQ4_K *b = (const SimdBlockQ4_K *)row + k / 4;
  const int j = (int)(k % 4);
  __m256i bits = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * j));
  __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(bits), _mm256_srli_epi16(bits, 4), 1);
  w->codes = _mm512_and_si512(both, _mm512_set1_epi8(0x0f));
  uint8_t s0, m0, s1, m1;
  simd_scale_min_k4(2 * j, b->scales, &s0, &m0);
  simd_scale_min_k4(2 * j + 1, b->scales, &s1, &m1);
  const float d = _cvtsh_ss(b->d), dmin = _cvtsh_ss(b->dmin);
  w->scale = broadcast_pair(d * s0, d * s1);
  w->neg_min = broadcast_pair(-dmin * m0, -dmin * m1);
  (void)pair;
}

static inline void
load_q6_k(const uint8_t *row, int64_t k, bool pair, WeightChunk *w)
{
  const SimdBlockQ6_K *b = (const SimdBlockQ6_K *)row + k / 4;
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

/* ---- the tile driver ---- */

#define DEFINE_GEMM(NAME, LOADER, HAS_MIN)                                                          \
  static inline __attribute__((always_inline)) void NAME##_tile(                                   \
    int64_t n, const uint8_t *weight, size_t weight_stride, int n_rows, const HnActChunk *act,     \
    size_t act_stride, const int n_cols, float *out, size_t out_stride)                            \
  {                                                                                                \
    const uint8_t *rows[TILE_ROWS];                                                                \
    _Pragma("GCC unroll 4") for (int r = 0; r < TILE_ROWS; r++)                                   \
      rows[r] = weight + (size_t)(r < n_rows ? r : 0) * weight_stride;                             \
    __m512 acc[TILE_ROWS][TILE_COLS];                                                              \
    _Pragma("GCC unroll 4") for (int r = 0; r < TILE_ROWS; r++)                                   \
      _Pragma("GCC unroll 4") for (int c = 0; c < n_cols; c++)                                    \
        acc[r][c] = _mm512_setzero_ps();                                                           \
    const int64_t n_blocks = n / 32, n_chunks = (n_blocks + 1) / 2;                                \
    for (int64_t k = 0; k < n_chunks; k++) {                                                       \
      const bool pair = 2 * k + 1 < n_blocks;                                                      \
      WeightChunk w[TILE_ROWS];                                                                    \
      _Pragma("GCC unroll 4") for (int r = 0; r < TILE_ROWS; r++)                                 \
        LOADER(rows[r], k, pair, &w[r]);                                                           \
      _Pragma("GCC unroll 4") for (int c = 0; c < n_cols; c++) {                                                           \
        const HnActChunk *a = act + (size_t)c * act_stride + k;                                    \
        const __m512i q = _mm512_loadu_si512(a->q);                                                \
        const __m512i off = _mm512_loadu_si512(a->neg_offset_sum);                                 \
        const __m512 d = _mm512_loadu_ps(a->d);                                                    \
        _Pragma("GCC unroll 4") for (int r = 0; r < TILE_ROWS; r++) {                             \
          __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(off, w[r].codes, q));                  \
          if (HAS_MIN)                                                                             \
            acc[r][c] = _mm512_fmadd_ps(w[r].neg_min, _mm512_loadu_ps(a->lane_sum), acc[r][c]);    \
          acc[r][c] = _mm512_fmadd_ps(f, _mm512_mul_ps(w[r].scale, d), acc[r][c]);                 \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    for (int r = 0; r < n_rows && r < TILE_ROWS; r++)                                              \
      for (int c = 0; c < n_cols; c++)                                                             \
        out[(size_t)r * out_stride + c] = _mm512_reduce_add_ps(acc[r][c]);                        \
  }                                                                                                \
                                                                                                   \
  static void NAME(int64_t n, const void *weight, size_t weight_stride, int n_rows,                \
                   const HnActChunk *act, size_t act_stride, int n_cols, float *out,               \
                   size_t out_stride)                                                              \
  {                                                                                                \
    switch (n_cols) {                                                                              \
    case 4:                                                                                        \
      NAME##_tile(n, weight, weight_stride, n_rows, act, act_stride, 4, out, out_stride);         \
      break;                                                                                       \
    case 3:                                                                                        \
      NAME##_tile(n, weight, weight_stride, n_rows, act, act_stride, 3, out, out_stride);         \
      break;                                                                                       \
    case 2:                                                                                        \
      NAME##_tile(n, weight, weight_stride, n_rows, act, act_stride, 2, out, out_stride);         \
      break;                                                                                       \
    default:                                                                                       \
      NAME##_tile(n, weight, weight_stride, n_rows, act, act_stride, 1, out, out_stride);         \
      break;                                                                                       \
    }                                                                                              \
  }

DEFINE_GEMM(gemm_q8_0, load_q8_0, false)
DEFINE_GEMM(gemm_q4_0, load_q4_0, false)
DEFINE_GEMM(gemm_q4_k, load_q4_k, true)
DEFINE_GEMM(gemm_q6_k, load_q6_k, false)

void
hn_simd_fill_avx512(HnSimdKernels *k)
{
  k->level = HN_SIMD_AVX512;
  k->pack_act = pack_act;
  k->gemm_rows = TILE_ROWS;
  k->gemm_cols = TILE_COLS;
  k->gemm_tile[HN_TYPE_Q8_0] = gemm_q8_0;
  k->gemm_offset[HN_TYPE_Q8_0] = 128;
  k->gemm_tile[HN_TYPE_Q4_0] = gemm_q4_0;
  k->gemm_offset[HN_TYPE_Q4_0] = 8;
  k->gemm_tile[HN_TYPE_Q4_K] = gemm_q4_k;
  k->gemm_offset[HN_TYPE_Q4_K] = 0;
  k->gemm_tile[HN_TYPE_Q6_K] = gemm_q6_k;
  k->gemm_offset[HN_TYPE_Q6_K] = 32;
}
