/* SIMD kernels against the scalar reference: every dot product on random blocks of
 * every type (odd block counts and tails included), activation packing, and the GEMM
 * tiles against a float computation from the dequantized operands.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-decode-choice.h"
#include "hn-kernels.h"
#include "hn-quants-blocks.h"
#include "hn-quants.h"
#include "hn-simd.h"

#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const HnType weight_types[] = {
  HN_TYPE_F32, HN_TYPE_F16, HN_TYPE_BF16, HN_TYPE_Q8_0, HN_TYPE_Q4_0, HN_TYPE_Q4_1, HN_TYPE_Q5_0,
  HN_TYPE_Q5_1, HN_TYPE_Q2_K, HN_TYPE_Q3_K, HN_TYPE_Q4_K, HN_TYPE_Q5_K, HN_TYPE_Q6_K,
};

static void
fill_random (GRand *rand, float *x, int64_t n)
{
  /* Mixed magnitudes so that per-block scales differ. */
  for (int64_t i = 0; i < n; i++) {
    double scale = (i / 32) % 3 == 0 ? 0.05 : ((i / 32) % 3 == 1 ? 1.0 : 8.0);
    x[i] = (float) (g_rand_double_range (rand, -1.0, 1.0) * scale);
  }
}

/* Quantizes n random floats to `type` (weights) and to its activation type. */
typedef struct {
  void *w, *a;
  float *wf, *af;
} Operands;

static Operands
make_operands (GRand *rand, HnType type, int64_t n)
{
  Operands o;
  HnType act = hn_type_vec_dot_type (type);
  o.wf = g_new (float, n);
  o.af = g_new (float, n);
  fill_random (rand, o.wf, n);
  fill_random (rand, o.af, n);
  o.w = g_malloc0 (hn_type_row_bytes (type, n));
  o.a = g_malloc0 (hn_type_row_bytes (act, n));
  hn_quantize_row (type, o.wf, o.w, n);
  hn_quantize_row (act, o.af, o.a, n);
  return o;
}

static void
free_operands (Operands *o)
{
  g_free (o->w);
  g_free (o->a);
  g_free (o->wf);
  g_free (o->af);
}

static void
test_vec_dot_levels (void)
{
  GRand *rand = g_rand_new_with_seed (42);
  int checked = 0;
  for (HnSimdLevel level = HN_SIMD_SCALAR + 1; level < HN_SIMD_LEVEL_COUNT; level++) {
    const HnSimdKernels *k = hn_simd_kernels_for_level (level);
    if (k == NULL)
      continue;
    for (gsize t = 0; t < G_N_ELEMENTS (weight_types); t++) {
      HnType type = weight_types[t];
      if (k->vec_dot[type] == NULL)
        continue;
      int64_t block = hn_type_block_elems (type) == 1 ? 32 : hn_type_block_elems (type);
      /* odd block counts, plus a non-multiple-of-16 length for the float types */
      int64_t lengths[] = { block, 3 * block, 7 * block, hn_type_block_elems (type) == 1 ? 37 : 5 * block };
      for (gsize li = 0; li < G_N_ELEMENTS (lengths); li++) {
        int64_t n = lengths[li];
        for (int rep = 0; rep < 20; rep++) {
          Operands o = make_operands (rand, type, n);
          float ref = hn_vec_dot_ref (type, n, o.w, o.a);
          float fast = k->vec_dot[type] (n, o.w, o.a);
          double mag = 0;
          for (int64_t i = 0; i < n; i++)
            mag += fabs (o.wf[i] * o.af[i]);
          if (fabs (ref - fast) > 1e-4 * (mag + 1e-3))
            g_error ("%s %s n=%" G_GINT64_FORMAT ": reference %g, fast %g", hn_simd_level_name (level),
                     hn_type_name (type), n, ref, fast);
          checked++;
          free_operands (&o);
        }
      }
    }
  }
  if (checked == 0)
    g_test_skip ("this processor has no SIMD level to test");
  g_test_message ("%d dot products compared", checked);
  g_rand_free (rand);
}

/* Random values plus rows built to hit exact rounding ties (x·(1/d) = k + 0.5), where
 * half-away-from-zero and half-to-even differ. */
static void
fill_quantize_case (GRand *rand, float *x, int64_t n, int kind)
{
  fill_random (rand, x, n);
  if (kind == 0)
    return;
  for (int64_t i = 0; i < n; i++) {
    int64_t in_block = kind == 1 ? i % 32 : i % HN_QK_K;
    if (in_block == 0)
      x[i] = kind == 1 ? 127.0f : -127.0f; /* scale exactly 1 */
    else
      x[i] = (float) (g_rand_int_range (rand, -126, 126)) + (g_rand_boolean (rand) ? 0.5f : 0.0f);
  }
}

static void
test_quantize_levels (void)
{
  GRand *rand = g_rand_new_with_seed (7);
  const HnType acts[] = { HN_TYPE_Q8_0, HN_TYPE_Q8_1, HN_TYPE_Q8_K, HN_TYPE_F16, HN_TYPE_BF16 };
  int checked = 0;
  for (HnSimdLevel level = HN_SIMD_SCALAR + 1; level < HN_SIMD_LEVEL_COUNT; level++) {
    const HnSimdKernels *k = hn_simd_kernels_for_level (level);
    if (k == NULL)
      continue;
    for (gsize t = 0; t < G_N_ELEMENTS (acts); t++) {
      if (k->quantize[acts[t]] == NULL)
        continue;
      int64_t block = acts[t] == HN_TYPE_Q8_K ? HN_QK_K : 32;
      for (int kind = 0; kind < 3; kind++)
        for (int64_t nb = 1; nb <= 7; nb += 3) {
          int64_t n = nb * block;
          float *x = g_new (float, n);
          fill_quantize_case (rand, x, n, kind);
          if (kind == 0 && nb == 4)
            memset (x + block, 0, sizeof (float) * (size_t) block); /* an all-zero block */
          size_t bytes = hn_type_row_bytes (acts[t], n);
          guint8 *ref = g_malloc0 (bytes), *fast = g_malloc0 (bytes);
          hn_quantize_row (acts[t], x, ref, n);
          k->quantize[acts[t]] (x, fast, n);
          if (acts[t] != HN_TYPE_F16) {
            /* the fast activation quantizers must be bit-identical to the reference */
            for (size_t i = 0; i < bytes; i++)
              if (ref[i] != fast[i])
                g_error ("%s quantize %s (case %d, %" G_GINT64_FORMAT " blocks): byte %zu differs: %u vs %u",
                         hn_simd_level_name (level), hn_type_name (acts[t]), kind, nb, i, ref[i], fast[i]);
          } else {
            float *rd = g_new (float, n), *fd = g_new (float, n);
            hn_dequantize_row (acts[t], ref, rd, n);
            hn_dequantize_row (acts[t], fast, fd, n);
            for (int64_t i = 0; i < n; i++)
              if (fabs (rd[i] - fd[i]) > 1e-3 * fabs (x[i]))
                g_error ("%s quantize F16 element %" G_GINT64_FORMAT ": %g vs %g", hn_simd_level_name (level),
                         i, rd[i], fd[i]);
            g_free (rd);
            g_free (fd);
          }
          g_free (x);
          g_free (ref);
          g_free (fast);
          checked++;
        }
    }
  }
  if (checked == 0)
    g_test_skip ("this processor has no SIMD level to test");
  g_test_message ("%d quantized rows compared", checked);
  g_rand_free (rand);
}

/* Every tile kernel of every level the processor runs (AVX-512's for six types, AVX2's
 * with and without AVX-VNNI for grouped Q4_0 and Q8_0) against the dequantized weights. */
static void
test_gemm_tiles (void)
{
  GRand *rand = g_rand_new_with_seed (99);
  int checked = 0;
  for (int variant = 0; variant < 3; variant++) {
  const HnSimdKernels *k = NULL;
  if (variant == 0)
    k = hn_simd_kernels_for_level (HN_SIMD_AVX512);
  else if (variant == 1)
    k = hn_simd_kernels_for_level (HN_SIMD_AVX2);
  else if (hn_simd_kernels_for_level (HN_SIMD_AVX2) != NULL) {
    g_setenv ("HANASHI_SIMD", "avx2-novnni", TRUE);
    k = hn_simd_kernels ();
    g_unsetenv ("HANASHI_SIMD");
  }
  if (k == NULL)
    continue;
  for (int t = 0; t < HN_TYPE_COUNT; t++) {
    if (k->gemm_tile[t] == NULL)
      continue;
    int64_t block = hn_type_block_elems ((uint32_t) t);
    /* for 32-blocks odd counts exercise the half chunk at the end, and 37 blocks more
     * than one group of 16 in the decode kernels */
    for (int64_t n = block == 32 ? 32 * 9 : block * 3; n <= (block == 32 ? 32 * 37 : block * 3);
         n += block == 32 ? 32 * 28 : block) {
    size_t row_bytes = hn_type_row_bytes ((uint32_t) t, n);
    int64_t n_chunks = (n / 32 + 1) / 2;
    for (int rows = 1; rows <= k->gemm_rows; rows++)
      for (int cols = 1; cols <= k->gemm_cols; cols++) {
        guint8 *w = g_malloc0 (row_bytes * rows);
        float *wf = g_new (float, n * rows);
        float *wd = g_new (float, n * rows);
        fill_random (rand, wf, n * rows);
        for (int r = 0; r < rows; r++) {
          hn_quantize_row ((HnType) t, wf + r * n, w + r * row_bytes, n);
          hn_dequantize_row ((HnType) t, w + r * row_bytes, wd + r * n, n);
        }
        const bool grouped = hn_type_file_layout ((HnType) t) != (HnType) t;
        HnActChunk *act = g_new0 (HnActChunk, n_chunks * cols);
        float *af = g_new (float, n * cols);
        fill_random (rand, af, n * cols);
        for (int c = 0; c < cols; c++) {
          if (k->pack_act)
            k->pack_act (af + c * n, n, k->gemm_offset[t], act + c * n_chunks);
          else
            hn_act_chunks_prepare (k, hn_type_vec_dot_type ((HnType) t), k->gemm_offset[t], af + c * n, n,
                                   act + c * n_chunks);
        }
        /* the expectation below reads the chunks; the grouped kernel reads them regrouped */
        g_autofree HnActChunk *kernel_act = g_memdup2 (act, sizeof *act * (gsize) (n_chunks * cols));
        for (int c = 0; grouped && c < cols; c++)
          hn_act_chunks_group (kernel_act + c * n_chunks, n);
        float out[64];
        k->gemm_tile[t] (n, w, row_bytes, rows, kernel_act, n_chunks, cols, out, 8);
        for (int r = 0; r < rows; r++)
          for (int c = 0; c < cols; c++) {
            /* exact value from the dequantized weights and the packed activations */
            double expect = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
              const HnActChunk *a = act + c * n_chunks + i / 64;
              double av = a->q[i % 64] * (double) a->d[(i % 64) / 4];
              expect += wd[r * n + i] * av;
              mag += fabs (wd[r * n + i] * av);
            }
            /* Q4_1 and Q5_1 take each block's min times the activations' d · Σq as the
             * chunks give it (block_sum: for Q8_1 its rounded s, as the reference) */
            if (hn_type_vec_dot_type ((HnType) t) == HN_TYPE_Q8_1) {
              g_autofree uint8_t *file_row = g_memdup2 (w + r * row_bytes, row_bytes);
              hn_type_ungroup_row ((HnType) t, w + r * row_bytes, file_row, n);
              for (int64_t b = 0; b < n / 32; b++) {
                uint16_t min_half;
                memcpy (&min_half, file_row + b * hn_type_block_bytes ((uint32_t) t) + 2, 2);
                const HnActChunk *a = act + c * n_chunks + b / 2;
                double sum = 0;
                for (int i = 0; i < 32; i++)
                  sum += a->q[32 * (b % 2) + i] * (double) a->d[8 * (b % 2)];
                expect += hn_half_to_float (min_half) * (a->block_sum[b % 2] - sum);
              }
            }
            double got = out[r * 8 + c];
            if (fabs (got - expect) > 1e-4 * (mag + 1e-3))
              g_error ("GEMM %s %s rows=%d cols=%d r=%d c=%d: expected %g, got %g",
                       hn_simd_level_name (k->level), hn_type_name ((uint32_t) t), rows, cols, r, c, expect, got);
            /* and close to the float product (the activation rounding only) */
            double exact = 0;
            for (int64_t i = 0; i < n; i++)
              exact += wd[r * n + i] * af[c * n + i];
            g_assert_cmpfloat (fabs (got - exact), <=, 0.02 * mag + 1e-3);
            checked++;
          }
        g_free (w);
        g_free (wf);
        g_free (wd);
        g_free (act);
        g_free (af);
      }
    }
  }
  }
  if (checked == 0)
    g_test_skip ("no GEMM kernels on this processor");
  g_test_message ("%d GEMM outputs compared", checked);
  g_rand_free (rand);
}

/* A weight tensor of `rows` rows of n random values quantized to `type` (its data
 * g_malloc'd); the values before quantization in *values when asked for (g_free both). */
static HnGgufTensor
random_weight (GRand *rand, HnType type, int64_t n, int64_t rows, float **values)
{
  size_t row_bytes = hn_type_row_bytes (type, n);
  float *wf = g_new (float, n * rows);
  guint8 *w = g_malloc0 (row_bytes * rows);
  fill_random (rand, wf, n * rows);
  for (int64_t r = 0; r < rows; r++)
    hn_quantize_row (type, wf + r * n, w + r * row_bytes, n);
  if (values)
    *values = wf;
  else
    g_free (wf);
  return (HnGgufTensor) { .name = "w", .type = type, .n_dims = 2, .ne = { n, rows, 1, 1 }, .data = w,
                          .nbytes = row_bytes * rows };
}

/* hn_matmul (whatever path it takes: panel GEMM for batches, dot products otherwise)
 * against the reference dot product of the reference-quantized activations, for every
 * weight type, row counts that leave tail panels (and tail halves of the 8-row AVX2
 * walk), odd block counts and every batch size from 1 to 33 (below, at and above the
 * panel threshold, every tail of the 8-token panel width).  Batches below the threshold
 * also go through the panels on purpose (HN_MATMUL_BATCH), so that panels see 1 to 7
 * tokens too.  Each case's reference is computed once and checked at every level. */
static void
test_matmul_paths (void)
{
  GRand *rand = g_rand_new_with_seed (1234);
  HnError err = { 0 };
  HnThreadPool *pool = hn_threadpool_new (3, &err);
  g_assert_nonnull (pool);
  enum { MAX_TOKENS = 33 };
  const int row_counts[] = { 1, 7, 16, 37 };
#if defined(__aarch64__)
  /* "neon-noi8mm": DotProd without the I8MM panels */
  const char *levels[] = { "scalar", "neon", "neon-dotprod", "neon-noi8mm" };
#else
  /* "avx512-dot": AVX-512 with the dot-product decode kernel (HANASHI_DECODE=dot) */
  const char *levels[] = { "scalar", "avx2", "avx2-novnni", "avx512", "avx512-dot" };
#endif
  int checked = 0;
  for (gsize ti = 0; ti < G_N_ELEMENTS (weight_types); ti++) {
    HnType type = weight_types[ti];
    HnType vdt = hn_type_vec_dot_type (type);
    int64_t block = hn_type_block_elems (type) == 1 ? 32 : hn_type_block_elems (type);
    int64_t n = block == 32 ? 32 * 7 : block * 3;
    size_t row_bytes = hn_type_row_bytes (type, n), act_row = hn_type_row_bytes (vdt, n);
    for (gsize ri = 0; ri < G_N_ELEMENTS (row_counts); ri++) {
      int rows = row_counts[ri];
      float *wf;
      HnGgufTensor tensor = random_weight (rand, type, n, rows, &wf);
      const guint8 *w = tensor.data;
      int64_t y_stride = rows + 3;
      for (int nt = 1; nt <= MAX_TOKENS; nt++) {
        float *x = g_new (float, n * nt);
        guint8 *a = g_malloc0 (act_row * nt);
        fill_random (rand, x, n * nt);
        for (int t = 0; t < nt; t++)
          hn_quantize_row (vdt, x + t * n, a + t * act_row, n);
        float *ref = g_new (float, rows * nt), *tol = g_new (float, rows * nt);
        for (int t = 0; t < nt; t++)
          for (int r = 0; r < rows; r++) {
            ref[t * rows + r] = hn_vec_dot_ref (type, n, w + r * row_bytes, a + t * act_row);
            double mag = 0;
            for (int64_t i = 0; i < n; i++)
              mag += fabs (wf[r * n + i] * x[t * n + i]);
            tol[t * rows + r] = (float) (1e-4 * (mag + 1e-3));
          }
        void *scratch = g_malloc (hn_matmul_scratch_bytes (n, nt, 3));
        float *y = g_new0 (float, y_stride * nt);
        for (gsize li = 0; li < G_N_ELEMENTS (levels); li++)
          for (int forced = 0; forced < (nt < 8 ? 2 : 1); forced++) {
            /* hn_matmul picks its kernels per call, capped by HANASHI_SIMD */
            gboolean dot = g_str_equal (levels[li], "avx512-dot");
            g_setenv ("HANASHI_SIMD", dot ? "avx512" : levels[li], TRUE);
            if (dot)
              g_setenv ("HANASHI_DECODE", "dot", TRUE);
            else
              g_unsetenv ("HANASHI_DECODE");
            for (int64_t i = 0; i < y_stride * nt; i++)
              y[i] = NAN;
            hn_matmul_path (pool, &tensor, x, nt, scratch, y, y_stride, forced ? HN_MATMUL_BATCH : HN_MATMUL_AUTO);
            for (int t = 0; t < nt; t++) {
              for (int r = 0; r < rows; r++) {
                float got = y[t * y_stride + r], want = ref[t * rows + r];
                if (!(fabsf (got - want) <= tol[t * rows + r]))
                  g_error ("matmul (%s%s) %s rows=%d tokens=%d r=%d t=%d: reference %g, got %g", levels[li],
                           forced ? ", batch path" : "", hn_type_name (type), rows, nt, r, t, want, got);
                checked++;
              }
              /* nothing beyond the rows is written */
              for (int r = rows; r < y_stride; r++)
                g_assert_true (isnan (y[t * y_stride + r]));
            }
          }
        g_free (x);
        g_free (a);
        g_free (ref);
        g_free (tol);
        g_free (scratch);
        g_free (y);
      }
      g_free (wf);
      g_free ((void *) w);
    }
  }
  g_unsetenv ("HANASHI_SIMD");
  g_unsetenv ("HANASHI_DECODE");
  g_test_message ("%d matmul outputs compared over the levels this processor has", checked);
  hn_threadpool_free (pool);
  g_rand_free (rand);
}

/* The panel GEMM's activation records built from reference-quantized activation rows
 * (Q8_0, Q8_1 or Q8_K), written here from the block formats rather than taken from
 * hn-kernels.c, so that the kernels are checked against the formats themselves. */
static void
act_blocks_from_reference (HnType vdt, const void *a, int64_t n, int offset, HnActBlock *out)
{
  for (int64_t b = 0; b < n / 32; b++) {
    const int8_t *q;
    float d, dsum = 0;
    if (vdt == HN_TYPE_Q8_K) {
      const HnBlockQ8_K *blk = (const HnBlockQ8_K *) a + b / 8;
      q = blk->qs + 32 * (b % 8);
      d = blk->d;
    } else if (vdt == HN_TYPE_Q8_1) {
      const HnBlockQ8_1 *blk = (const HnBlockQ8_1 *) a + b;
      q = blk->qs;
      d = hn_half_to_float (blk->d);
      dsum = hn_half_to_float (blk->s);
    } else {
      const HnBlockQ8_0 *blk = (const HnBlockQ8_0 *) a + b;
      q = blk->qs;
      d = hn_half_to_float (blk->d);
    }
    int32_t s0 = 0, s1 = 0;
    for (int l = 0; l < 16; l++) {
      s0 += q[l];
      s1 += q[16 + l];
    }
    HnActBlock *o = &out[b];
    memset (o, 0, sizeof *o);
    memcpy (o->q, q, 32);
    o->d = d;
    o->off_sum[0] = -offset * s0;
    o->off_sum[1] = -offset * s1;
    o->off_sum32 = -offset * (s0 + s1);
    o->dsum = vdt == HN_TYPE_Q8_1 ? dsum : d * (float) (s0 + s1);
    o->dsum_half[0] = d * (float) s0;
    o->dsum_half[1] = d * (float) s1;
  }
}

/* The panel kernels on their own (single-threaded: this is the check that runs under
 * qemu for ARM64): every type a level has a panel for (the quantized types, F16 and
 * BF16), row counts that leave every tail of the 4-row NEON groups and of the 8-row AVX2
 * halves, and every batch of 1 to 33 tokens, dealt to the kernel HN_PANEL_COLS tokens at
 * a time as hn_matmul deals them, against the reference dot product; outputs beyond the
 * rows and tokens stay untouched. */
static void
test_panel_kernels (void)
{
  enum { MAX_TOKENS = 33, OUT_STRIDE = HN_PANEL_ROWS + 3 };
  const int row_counts[] = { 1, 3, 6, 7, 13, 16 };
  GRand *rand = g_rand_new_with_seed (808);
  int checked = 0;
  for (HnSimdLevel level = HN_SIMD_SCALAR + 1; level <= HN_SIMD_LEVEL_COUNT; level++) {
    /* one round past the levels: the AVX2 variant without AVX-VNNI where there is AVX2,
     * DotProd without I8MM where there is DotProd */
    const HnSimdKernels *k;
    const char *name;
    if (level < HN_SIMD_LEVEL_COUNT) {
      k = hn_simd_kernels_for_level (level);
      name = k ? hn_simd_level_name (level) : NULL;
    } else {
      k = NULL;
#if defined(__aarch64__)
      name = "neon-noi8mm";
      const HnSimdLevel variant_of = HN_SIMD_NEON_DOTPROD;
#else
      name = "avx2-novnni";
      const HnSimdLevel variant_of = HN_SIMD_AVX2;
#endif
      if (hn_simd_kernels_for_level (variant_of) != NULL) {
        g_setenv ("HANASHI_SIMD", name, TRUE);
        k = hn_simd_kernels ();
        g_unsetenv ("HANASHI_SIMD");
      }
    }
    if (k == NULL)
      continue;
    for (int t = 0; t < HN_TYPE_COUNT; t++) {
      HnType type = (HnType) t;
      /* F16 and BF16 panels take f32 activations, rounded as the reference rounds them */
      gboolean is_float = type == HN_TYPE_F16 || type == HN_TYPE_BF16;
      HnPanelGemmF32Fn gemm_float = type == HN_TYPE_F16 ? k->panel_gemm_f16 : k->panel_gemm_bf16;
      HnRoundF16Fn round = type == HN_TYPE_F16 ? k->round_f16 : k->round_bf16;
      if (k->pack_panel[type] == NULL)
        continue;
      if (is_float ? (gemm_float == NULL || round == NULL) : k->panel_gemm[type] == NULL)
        continue;
      HnType vdt = hn_type_vec_dot_type (type);
      int64_t block = hn_type_block_elems (type);
      /* float rows need not be whole blocks of 32 */
      /* regrouped layouts: one run of 16 blocks (Q4_K: two super-blocks) and the file
       * layout after it */
      const gboolean grouped = hn_type_file_layout (type) != type;
      int64_t n = is_float ? 32 * 9 + 5 : grouped && block == 32 ? 32 * 21 : (block == 32 ? 32 * 9 : block * 3);
      size_t row_bytes = hn_type_row_bytes (type, n), act_row = hn_type_row_bytes (vdt, n);
      float *wf = g_new (float, n * HN_PANEL_ROWS), *x = g_new (float, n * MAX_TOKENS);
      guint8 *w = g_malloc0 (row_bytes * HN_PANEL_ROWS), *a = g_malloc0 (act_row * MAX_TOKENS);
      fill_random (rand, wf, n * HN_PANEL_ROWS);
      fill_random (rand, x, n * MAX_TOKENS);
      for (int r = 0; r < HN_PANEL_ROWS; r++)
        hn_quantize_row (type, wf + r * n, w + r * row_bytes, n);
      HnActBlock *act = g_new (HnActBlock, (n / 32) * MAX_TOKENS);
      float *act_float = g_new (float, n * MAX_TOKENS);
      float *ref = g_new (float, MAX_TOKENS * HN_PANEL_ROWS), *tol = g_new (float, MAX_TOKENS * HN_PANEL_ROWS);
      for (int c = 0; c < MAX_TOKENS; c++) {
        hn_quantize_row (vdt, x + c * n, a + c * act_row, n);
        if (is_float)
          round (x + c * n, act_float + c * n, n);
        else
          act_blocks_from_reference (vdt, a + c * act_row, n, k->panel_offset[type], act + c * (n / 32));
        for (int r = 0; r < HN_PANEL_ROWS; r++) {
          ref[c * HN_PANEL_ROWS + r] = hn_vec_dot_ref (type, n, w + r * row_bytes, a + c * act_row);
          double mag = 0;
          for (int64_t i = 0; i < n; i++)
            mag += fabs (wf[r * n + i] * x[c * n + i]);
          tol[c * HN_PANEL_ROWS + r] = (float) (1e-4 * (mag + 1e-3));
        }
      }
      size_t panel_bytes = ((size_t) (n / 32 + 1) * HN_PANEL_SCRATCH_PER_32 + 63) & ~(size_t) 63;
      void *panel = aligned_alloc (64, panel_bytes);
      float *out = g_new (float, MAX_TOKENS * OUT_STRIDE);
      for (gsize ri = 0; ri < G_N_ELEMENTS (row_counts); ri++) {
        int rows = row_counts[ri];
        k->pack_panel[type] (w, row_bytes, rows, n, panel);
        for (int tokens = 1; tokens <= MAX_TOKENS; tokens++) {
          for (int i = 0; i < MAX_TOKENS * OUT_STRIDE; i++)
            out[i] = NAN;
          for (int c0 = 0; c0 < tokens; c0 += HN_PANEL_COLS) {
            int cols = MIN (HN_PANEL_COLS, tokens - c0);
            if (is_float)
              gemm_float (panel, n, rows, act_float + c0 * n, (size_t) n, cols, out + c0 * OUT_STRIDE, OUT_STRIDE);
            else
              k->panel_gemm[type] (panel, n, rows, act + c0 * (n / 32), (size_t) (n / 32), cols,
                                   out + c0 * OUT_STRIDE, OUT_STRIDE);
          }
          for (int c = 0; c < MAX_TOKENS; c++)
            for (int r = 0; r < OUT_STRIDE; r++) {
              float got = out[c * OUT_STRIDE + r];
              if (c >= tokens || r >= rows) {
                if (!isnan (got))
                  g_error ("panel %s %s rows=%d tokens=%d: wrote outside the output at r=%d c=%d", name,
                           hn_type_name (type), rows, tokens, r, c);
                continue;
              }
              float want = ref[c * HN_PANEL_ROWS + r];
              if (!(fabsf (got - want) <= tol[c * HN_PANEL_ROWS + r]))
                g_error ("panel %s %s rows=%d tokens=%d r=%d c=%d: reference %g, got %g", name,
                         hn_type_name (type), rows, tokens, r, c, want, got);
              checked++;
            }
        }
      }
      free (panel);
      g_free (out);
      g_free (act);
      g_free (act_float);
      g_free (ref);
      g_free (tol);
      g_free (wf);
      g_free (x);
      g_free (w);
      g_free (a);
    }
  }
  if (checked == 0)
    g_test_skip ("no panel GEMM at the levels this processor has");
  g_test_message ("%d panel outputs compared", checked);
  g_rand_free (rand);
}

/* Every SIMD level has the prompt GEMM (panel kernels) for every quantized type and for
 * F16 and BF16, so that a batch never falls back to one dot product per row and token
 * (several times slower): on x86 AVX2 (with and without AVX-VNNI) and AVX-512, on ARM64
 * baseline NEON and NEON with DotProd (with and without I8MM).  test_panel_kernels and test_matmul_paths check
 * what they compute. */
static void
test_panel_types (void)
{
#if defined(__x86_64__)
  const char *caps[] = { "avx2", "avx2-novnni", "avx512" };
  const HnSimdLevel cap_levels[] = { HN_SIMD_AVX2, HN_SIMD_AVX2, HN_SIMD_AVX512 };
#elif defined(__aarch64__)
  const char *caps[] = { "neon", "neon-dotprod", "neon-noi8mm" };
  const HnSimdLevel cap_levels[] = { HN_SIMD_NEON, HN_SIMD_NEON_DOTPROD, HN_SIMD_NEON_DOTPROD };
#else
  const char *caps[] = { NULL };
  const HnSimdLevel cap_levels[] = { HN_SIMD_SCALAR };
#endif
  int checked = 0;
  for (gsize ci = 0; ci < G_N_ELEMENTS (caps); ci++) {
    if (caps[ci] == NULL || hn_simd_kernels_for_level (cap_levels[ci]) == NULL)
      continue;
    g_setenv ("HANASHI_SIMD", caps[ci], TRUE);
    const HnSimdKernels *k = hn_simd_kernels ();
    g_assert_cmpint (k->level, ==, cap_levels[ci]);
    for (gsize ti = 0; ti < G_N_ELEMENTS (weight_types); ti++) {
      HnType type = weight_types[ti];
      if (type == HN_TYPE_F32)
        continue;
      if (k->pack_panel[type] == NULL)
        g_error ("%s: no panel packing for %s", caps[ci], hn_type_name (type));
      if (type == HN_TYPE_F16) {
        if (k->panel_gemm_f16 == NULL || k->round_f16 == NULL)
          g_error ("%s: no panel GEMM for F16", caps[ci]);
      } else if (type == HN_TYPE_BF16) {
        if (k->panel_gemm_bf16 == NULL || k->round_bf16 == NULL)
          g_error ("%s: no panel GEMM for BF16", caps[ci]);
      } else if (k->panel_gemm[type] == NULL) {
        g_error ("%s: no panel GEMM for %s", caps[ci], hn_type_name (type));
      }
      checked++;
    }
  }
  g_unsetenv ("HANASHI_SIMD");
  if (checked == 0)
    g_test_skip ("this processor has no SIMD level with a panel GEMM");
}

/* Every SIMD level has a decode dot product for every weight type, and a fast quantizer
 * for the activations it takes (F32 takes them as they are), so that generation never
 * falls back to the scalar reference (BF16 did on x86); test_vec_dot_levels and
 * test_quantize_levels check what they compute. */
static void
test_decode_types (void)
{
  int checked = 0;
  for (HnSimdLevel level = HN_SIMD_SCALAR + 1; level < HN_SIMD_LEVEL_COUNT; level++) {
    const HnSimdKernels *k = hn_simd_kernels_for_level (level);
    if (k == NULL)
      continue;
    for (gsize ti = 0; ti < G_N_ELEMENTS (weight_types); ti++) {
      HnType type = weight_types[ti];
      if (k->vec_dot[type] == NULL)
        g_error ("%s: no decode dot product for %s", hn_simd_level_name (level), hn_type_name (type));
      HnType act = hn_type_vec_dot_type (type);
      if (act != HN_TYPE_F32 && k->quantize[act] == NULL)
        g_error ("%s: no activation quantizer %s for %s", hn_simd_level_name (level), hn_type_name (act),
                 hn_type_name (type));
      checked++;
    }
  }
  if (checked == 0)
    g_test_skip ("this processor has no SIMD level to test");
}

/* round_f16 and round_bf16 against the reference conversions, bit for bit: random
 * values of every magnitude, exact ties (to even both ways), values that round up into
 * the next binade or to infinity, denormals, infinities and NaNs (made quiet). */
static void
test_round_levels (void)
{
  GRand *rand = g_rand_new_with_seed (77);
  enum { N = 1003 }; /* not a multiple of the vector width: the tail too */
  float *x = g_new (float, N), *y = g_new (float, N);
  for (int i = 0; i < N; i++) {
    uint32_t bits = g_rand_int (rand);
    switch (i % 8) {
    case 0: x[i] = (float) g_rand_double_range (rand, -100.0, 100.0); continue;
    case 1: bits = (bits & 0xffff0000u) | 0x8000u; break; /* BF16 tie */
    case 2: bits = (bits & 0xffffe000u) | 0x1000u; break; /* F16 tie (normal range) */
    case 3: bits = (bits & 0x807fffffu) | 0x7f800000u; break; /* NaN or infinity */
    case 4: bits = bits & 0x807fffffu; break; /* denormal */
    case 5: bits = (bits & 0x80000000u) | 0x7f7f8000u | (bits & 0x7fffu); break; /* near FLT_MAX */
    default: break; /* any bit pattern */
    }
    memcpy (&x[i], &bits, 4);
  }
  int checked = 0;
  for (HnSimdLevel level = HN_SIMD_SCALAR + 1; level < HN_SIMD_LEVEL_COUNT; level++) {
    const HnSimdKernels *k = hn_simd_kernels_for_level (level);
    if (k == NULL)
      continue;
    if (k->round_bf16 != NULL) {
      k->round_bf16 (x, y, N);
      for (int i = 0; i < N; i++) {
        float want = hn_bf16_to_fp32 (hn_fp32_to_bf16 (x[i]));
        if (memcmp (&want, &y[i], 4) != 0)
          g_error ("%s round_bf16(%a): %a, reference %a", hn_simd_level_name (level), x[i], y[i], want);
      }
      checked++;
    }
    /* the BF16 activations of BF16 dot products: the same rounding, stored as 16 bits */
    if (k->quantize[HN_TYPE_BF16] != NULL) {
      uint16_t *h = g_new (uint16_t, N);
      k->quantize[HN_TYPE_BF16] (x, h, N);
      for (int i = 0; i < N; i++)
        if (h[i] != hn_fp32_to_bf16 (x[i]))
          g_error ("%s quantize BF16(%a): %04x, reference %04x", hn_simd_level_name (level), x[i], h[i],
                   hn_fp32_to_bf16 (x[i]));
      g_free (h);
      checked++;
    }
    if (k->round_f16 != NULL) {
      k->round_f16 (x, y, N);
      for (int i = 0; i < N; i++) {
        float want = hn_half_to_float (hn_fp32_to_fp16 (x[i]));
        if (isnan (want) ? !isnan (y[i]) : memcmp (&want, &y[i], 4) != 0)
          g_error ("%s round_f16(%a): %a, reference %a", hn_simd_level_name (level), x[i], y[i], want);
      }
      checked++;
    }
  }
  if (checked == 0)
    g_test_skip ("this processor has no SIMD level to test");
  g_free (x);
  g_free (y);
  g_rand_free (rand);
}

/* hn_matmul_path with HN_MATMUL_ROW gives each token bit for bit what it gets alone,
 * whatever else the call holds: sequences decoded together must each get what they get
 * alone (test-chat-batch).  Every weight type, at every level, with the tile and the dot
 * product decode kernels.  The tile driver hands up to four tokens to one tile call, so
 * this holds only while every tile kernel sums a column as it does alone (AVX-512's Q4_0
 * and Q4_K once did not).  Lengths with a partial group of 16 blocks and an odd block
 * count, where the types allow them. */
static void
test_matmul_rows_alone (void)
{
  GRand *rand = g_rand_new_with_seed (2468);
  HnError err = { 0 };
  /* one thread: the property is the kernels', and under emulation (the ARM64 run in CI)
   * waiting workers cost more than the products */
  HnThreadPool *pool = hn_threadpool_new (1, &err);
  g_assert_nonnull (pool);
  /* (a name a processor has no level for means its best one) */
  const char *levels[] = { "scalar", "avx2", "avx512", "neon" }, *decode[] = { "tile", "dot" };
  enum { N_TOKENS = 5 };
  const int64_t max_n = 32 * 25, rows = 21;
  float *x = g_new (float, max_n * N_TOKENS), *y = g_new (float, rows * N_TOKENS), *alone = g_new (float, rows);
  void *scratch = g_malloc (hn_matmul_scratch_bytes (max_n, N_TOKENS, 2));
  int checked = 0;
  for (gsize li = 0; li < G_N_ELEMENTS (levels); li++)
    for (gsize di = 0; di < G_N_ELEMENTS (decode); di++) {
      g_setenv ("HANASHI_SIMD", levels[li], TRUE);
      g_setenv ("HANASHI_DECODE", decode[di], TRUE);
      for (gsize ti = 0; ti < G_N_ELEMENTS (weight_types); ti++) {
        HnType type = weight_types[ti];
        const int64_t n = hn_type_block_elems (type) == HN_QK_K ? HN_QK_K * 3 : max_n;
        fill_random (rand, x, n * N_TOKENS);
        HnGgufTensor t = random_weight (rand, type, n, rows, NULL);
        for (int nt = 2; nt <= N_TOKENS; nt += N_TOKENS - 2) {
          hn_matmul_path (pool, &t, x, nt, scratch, y, rows, HN_MATMUL_ROW);
          for (int c = 0; c < nt; c++) {
            hn_matmul_path (pool, &t, x + c * n, 1, scratch, alone, rows, HN_MATMUL_ROW);
            if (memcmp (alone, y + c * rows, rows * sizeof (float)) != 0)
              g_error ("%s %s decode %s: token %d of %d differs from the token alone", levels[li],
                       hn_type_name (type), decode[di], c, nt);
            checked++;
          }
        }
        g_free ((void *) t.data);
      }
    }
  g_unsetenv ("HANASHI_SIMD");
  g_unsetenv ("HANASHI_DECODE");
  g_test_message ("%d tokens compared", checked);
  g_free (x);
  g_free (y);
  g_free (alone);
  g_free (scratch);
  hn_threadpool_free (pool);
  g_rand_free (rand);
}

/* hn_matvec_many (several one-token products in one parallel section, the chosen
 * experts of a decode step) gives every item bit for bit what hn_matmul gives it alone:
 * items of every weight type and of several lengths, some sharing their input, at every
 * level. */
static void
test_matvec_many (void)
{
  GRand *rand = g_rand_new_with_seed (4321);
  HnError err = { 0 };
  HnThreadPool *pool = hn_threadpool_new (3, &err);
  g_assert_nonnull (pool);
  const char *levels[] = { "scalar", "avx2", "avx512" };
  enum { N_ITEMS = 2 * G_N_ELEMENTS (weight_types) };
  int checked = 0;
  for (gsize li = 0; li < G_N_ELEMENTS (levels); li++) {
    g_setenv ("HANASHI_SIMD", levels[li], TRUE);
    HnGgufTensor tensors[N_ITEMS];
    HnMatvec items[N_ITEMS];
    float *inputs[3];
    int64_t lengths[3] = { 256 * 3, 256 * 2, 256 * 3 }; /* two inputs of one length */
    for (int i = 0; i < 3; i++) {
      inputs[i] = g_new (float, lengths[i]);
      fill_random (rand, inputs[i], lengths[i]);
    }
    size_t scratch_bytes = 0;
    for (int i = 0; i < N_ITEMS; i++) {
      HnType type = weight_types[i % G_N_ELEMENTS (weight_types)];
      int which = i % 3;
      int64_t n = lengths[which], rows = 5 + 11 * (i % 4); /* tails of the 8-row tiles */
      tensors[i] = random_weight (rand, type, n, rows, NULL);
      items[i] = (HnMatvec) { &tensors[i], inputs[which], g_new0 (float, rows) };
      scratch_bytes = MAX (scratch_bytes, hn_matmul_scratch_bytes (n, 1, 3));
    }
    void *scratch = g_malloc (MAX (scratch_bytes, hn_matvec_many_scratch_bytes (256 * 3, 3)));
    hn_matvec_many (pool, items, N_ITEMS, scratch);
    for (int i = 0; i < N_ITEMS; i++) {
      int64_t rows = tensors[i].ne[1];
      float *alone = g_new (float, rows);
      hn_matmul (pool, &tensors[i], items[i].x, 1, scratch, alone, rows);
      for (int64_t r = 0; r < rows; r++) {
        if (memcmp (&alone[r], &items[i].y[r], sizeof (float)) != 0)
          g_error ("matvec-many (%s) item %d (%s) row %d: %g, alone %g", levels[li], i,
                   hn_type_name (tensors[i].type), (int) r, items[i].y[r], alone[r]);
        checked++;
      }
      g_free (alone);
      g_free ((void *) tensors[i].data);
      g_free (items[i].y);
    }
    g_free (scratch);
    for (int i = 0; i < 3; i++)
      g_free (inputs[i]);
  }
  g_unsetenv ("HANASHI_SIMD");
  g_test_message ("%d products compared", checked);
  hn_threadpool_free (pool);
  g_rand_free (rand);
}

/* Checks the output of an attention call against a double-precision softmax over the
 * same F16 keys (kc, in rows) and values with the probabilities rounded to F16 (the
 * rounding HnAttnArgs asks for).  A probability that lies within float rounding of a
 * halfway point between two F16 values may round either way: for those alone one F16
 * step times the value is allowed on top.  Returns the outputs compared. */
static int
expect_attention (HnSimdLevel level, const HnAttnArgs *args, const guint16 *kc, const guint16 *vc, int first_head,
                  const float *row_max, const float *row_sum)
{
  const int hd = args->head_dim, n_kv = MAX (args->kv_heads, 1), n_q = args->n_q * n_kv;
  const int n_cells = args->n_cells, kv_stride = (int) args->kv_stride;
  const float softcap = args->softcap, *q = args->q, *out = args->out;
  const size_t q_stride = args->q_stride;
  const gint32 *cells = args->cells;
  int checked = 0;
  for (int h = 0; h < n_q; h++) {
    const int koff = (first_head + h / args->n_q) * hd; /* the head's piece of a row */
    double *s = g_new (double, n_cells + 1), mx = -INFINITY, sum = 0;
    for (int c = 0; c < n_cells; c++) {
      double d = 0;
      for (int i = 0; i < hd; i++)
        d += q[h * q_stride + i] * (double) hn_fp16_to_fp32 (kc[cells[c] * kv_stride + koff + i]);
      s[c] = d * args->scale;
      if (softcap > 0)
        s[c] = softcap * tanh (s[c] / softcap);
      mx = MAX (mx, s[c]);
    }
    for (int c = 0; c < n_cells; c++)
      sum += s[c] = exp (s[c] - mx);
    if (n_cells > 0) {
      /* the block statistics a caller joins blocks with */
      if (fabs (row_max[h] - mx) > 1e-5 * (1 + fabs (mx)) || fabs (row_sum[h] - sum) > 1e-5 * sum)
        g_error ("%s attention hd=%d n_q=%d cells=%d tiled=%d head %d: max %g sum %g, expected %g and %g",
                 hn_simd_level_name (level), hd, n_q, n_cells, args->k_tiled, h, row_max[h], row_sum[h], mx, sum);
    }
    for (int i = 0; i < hd; i++) {
      double o = 0, slack = 0;
      for (int c = 0; c < n_cells; c++) {
        double exact = s[c] / sum;
        guint16 bits = hn_fp32_to_fp16 ((float) exact);
        double p = hn_fp16_to_fp32 (bits), step = hn_fp16_to_fp32 ((guint16) (bits + 1)) - p;
        double v = hn_fp16_to_fp32 (vc[cells[c] * kv_stride + koff + i]);
        o += p * v;
        if (fabs (fabs (exact - p) - step / 2) < 1e-6 * exact)
          slack += step * fabs (v);
      }
      if (fabs (out[h * hd + i] - o) > 1e-5 + slack)
        g_error ("%s attention hd=%d n_q=%d cells=%d softcap=%g tiled=%d head %d [%d]: %g, expected %g",
                 hn_simd_level_name (level), hd, n_q, n_cells, softcap, args->k_tiled, h, i, out[h * hd + i], o);
      checked++;
    }
    g_free (s);
  }
  return checked;
}

/* Copies keys in rows (n_cells rows of kv_stride halves) into tiles of HN_KV_TILE cells,
 * the layout of HnAttnArgs.k_tiled; the last tile's missing cells hold garbage (0x7e00,
 * NaN), which no listed cell may reach. */
static guint16 *
keys_in_tiles (const guint16 *rows, int n_cells, int kv_stride)
{
  const int n_tiles = (n_cells + HN_KV_TILE - 1) / HN_KV_TILE;
  guint16 *tiles = g_new (guint16, (gsize) n_tiles * HN_KV_TILE * kv_stride);
  for (gsize i = 0; i < (gsize) n_tiles * HN_KV_TILE * kv_stride; i++)
    tiles[i] = 0x7e00;
  for (int c = 0; c < n_cells; c++)
    for (int j = 0; j < kv_stride; j++)
      tiles[(gsize) (c / HN_KV_TILE) * HN_KV_TILE * kv_stride + (gsize) j * HN_KV_TILE + c % HN_KV_TILE] =
          rows[(gsize) c * kv_stride + j];
  return tiles;
}

/* The SIMD attention kernels against a double-precision softmax (expect_attention):
 * several head sizes, one to eight query heads sharing the KV head (grouped-query
 * attention), two and three KV heads in one call, cell lists shorter than a vector, around
 * the chunk and vector sizes, out of order, deep into a context (4099 cells), empty, and
 * with gemma2's soft-cap; every case fetches ahead its own rows, whole rows, the rows of a
 * next call, or nothing, which must not change a bit.  Each case runs with the keys in
 * rows and in tiles, over a list out of order and, for tiles, also over consecutive cells
 * from inside a tile (whole tiles between a partial first and last one). */
static void
test_attention (void)
{
  GRand *rand = g_rand_new_with_seed (5);
  int checked = 0;
  typedef struct {
    int n_q, n_cells;
    float softcap;
    int kv_heads;
  } Case;
  const Case cases[] = {
    { 3, 0, 0, 1 }, { 3, 1, 0, 1 }, { 3, 31, 0, 1 }, { 3, 33, 0, 1 }, { 3, 100, 0, 1 }, { 1, 7, 0, 1 },
    { 1, 15, 0, 1 }, { 8, 17, 0, 1 }, { 8, 47, 0, 1 }, { 1, 1000, 0, 1 }, { 8, 4099, 0, 1 }, { 4, 1031, 0, 1 },
    { 2, 45, 20.0f, 1 }, { 3, 130, 5.0f, 1 }, { 8, 256, 0, 3 }, { 7, 77, 0, 2 }, { 2, 33, 30.0f, 3 },
    { 1, 5, 0, 2 }, { 16, 70, 0, 1 }, { 6, 90, 0, 2 },
  };
  for (HnSimdLevel level = HN_SIMD_SCALAR + 1; level < HN_SIMD_LEVEL_COUNT; level++) {
    const HnSimdKernels *k = hn_simd_kernels_for_level (level);
    if (k == NULL || k->attn == NULL)
      continue;
    const int head_dims[] = { 64, 128, 48, 80 };
    for (gsize hi = 0; hi < G_N_ELEMENTS (head_dims); hi++)
      for (gsize ci = 0; ci < G_N_ELEMENTS (cases); ci++)
        for (int layout = 0; layout < 3; layout++) {
          /* one KV head: the second of a row of two; several: the first ones of a row of
           * four */
          const int hd = head_dims[hi], n_kv = cases[ci].kv_heads, n_q = cases[ci].n_q * n_kv;
          const int n_cells = cases[ci].n_cells, kv_stride = (n_kv > 1 ? 4 : 2) * hd;
          const int first_head = n_kv > 1 ? 0 : 1;
          const bool tiled = layout > 0, consecutive = layout == 2;
          int n_total = n_cells + 28 > 128 ? n_cells + 28 : 128; /* never a multiple of 37 */
          float softcap = cases[ci].softcap;
          if (hd % k->attn_multiple != 0)
            continue;
          /* the queries packed head after head (the context's layout) or with a gap */
          const int q_stride = ci % 2 == 0 ? hd : hd + 8;
          float *q = g_new (float, n_q * q_stride), *out = g_new (float, n_q * hd);
          guint16 *kc = g_new (guint16, n_total * kv_stride), *vc = g_new (guint16, n_total * kv_stride);
          gint32 *cells = g_new (gint32, n_total);
          float *work = g_aligned_alloc (hn_attn_work_floats (n_q, hd), sizeof (float), 64);
          float *scores = g_aligned_alloc (n_q * hn_attn_score_stride (n_cells) + 1, sizeof (float), 64);
          for (int i = 0; i < n_q * q_stride; i++)
            q[i] = hn_fp16_to_fp32 (hn_fp32_to_fp16 ((float) g_rand_double_range (rand, -2, 2)));
          for (int i = 0; i < n_total * kv_stride; i++) {
            kc[i] = hn_fp32_to_fp16 ((float) g_rand_double_range (rand, -1, 1));
            vc[i] = hn_fp32_to_fp16 ((float) g_rand_double_range (rand, -1, 1));
          }
          guint16 *kt = tiled ? keys_in_tiles (kc, n_total, kv_stride) : NULL;
          while (n_total % 37 == 0)
            n_total--;
          for (int i = 0; i < n_cells; i++) /* distinct; not ascending, or ascending from cell 5 */
            cells[i] = consecutive ? (i + 5) % n_total : (i * 37 + 5) % n_total;
          float row_max[48], row_sum[48];
          HnAttnArgs args = {
            .head_dim = hd, .n_q = n_q / n_kv, .kv_heads = n_kv, .q = q, .q_stride = (size_t) q_stride,
            .scale = 1.0f / sqrtf ((float) hd), .softcap = softcap,
            .k = tiled ? kt + first_head * hd * HN_KV_TILE : kc + first_head * hd, .k_tiled = tiled,
            .v = vc + first_head * hd, .kv_stride = (size_t) kv_stride, .cells = cells, .n_cells = n_cells,
            .out = out, .out_stride = (size_t) hd, .work = work, .scores = scores, .row_max = row_max,
            .row_sum = row_sum,
            .prefetch_halves = ci % 4 == 0 ? 0 : ci % 4 == 1 ? kv_stride - first_head * hd : -1,
            /* a next call's cells: any list of cells in the cache */
            .next_cells = ci % 4 == 3 ? cells : NULL,
            .next_n_cells = ci % 4 == 3 ? n_cells / 2 : 0,
            /* both places the next rows may go, which must not change a result */
            .next_to_l2 = ci % 8 == 7,
          };
          k->attn (&args);
          checked += expect_attention (level, &args, kc, vc, first_head, row_max, row_sum);
          g_free (q);
          g_free (out);
          g_free (kc);
          g_free (kt);
          g_free (vc);
          g_free (cells);
          g_aligned_free (work);
          g_aligned_free (scores);
        }
  }
  if (checked == 0)
    g_test_skip ("no SIMD attention on this processor");
  g_test_message ("%d attention outputs compared", checked);
  g_rand_free (rand);
}

/* With the keys in tiles, a cell's key is read where it lies when its whole tile is listed
 * in order, and copied into a tile of its own otherwise; the two must give the same bits,
 * or a sequence decoded beside others (its cells scattered) would answer differently from
 * the same sequence alone (its cells consecutive).  The same keys and values, once in
 * consecutive cells from the start of a tile and once scattered, must give equal
 * outputs, maxima and sums, for every query-head count the score tiles split into. */
static void
test_attention_tiles_placement (void)
{
  GRand *rand = g_rand_new_with_seed (11);
  int compared = 0;
  for (HnSimdLevel level = HN_SIMD_SCALAR + 1; level < HN_SIMD_LEVEL_COUNT; level++) {
    const HnSimdKernels *k = hn_simd_kernels_for_level (level);
    if (k == NULL || k->attn == NULL)
      continue;
    const int head_dims[] = { 32, 64, 128 }, groups[] = { 1, 2, 3, 4, 5, 8, 16 }, lengths[] = { 16, 40, 300 };
    for (gsize hi = 0; hi < G_N_ELEMENTS (head_dims); hi++)
      for (gsize gi = 0; gi < G_N_ELEMENTS (groups); gi++)
        for (gsize li = 0; li < G_N_ELEMENTS (lengths); li++)
          for (int n_kv = 1; n_kv <= 2; n_kv++) {
            const int hd = head_dims[hi], n_q = groups[gi] * n_kv, n = lengths[li], kv_stride = 2 * hd;
            const int n_total = 2 * n + 64;
            if (hd % k->attn_multiple != 0)
              continue;
            float *q = g_new (float, n_q * hd), *out[2], mx[2][32], sum[2][32];
            guint16 *kc[2], *vc[2], *kt[2];
            gint32 *cells[2];
            float *work = g_aligned_alloc (hn_attn_work_floats (n_q, hd), sizeof (float), 64);
            float *scores = g_aligned_alloc (n_q * hn_attn_score_stride (n), sizeof (float), 64);
            for (int i = 0; i < n_q * hd; i++)
              q[i] = hn_fp16_to_fp32 (hn_fp32_to_fp16 ((float) g_rand_double_range (rand, -2, 2)));
            for (int p = 0; p < 2; p++) {
              out[p] = g_new (float, n_q * hd);
              kc[p] = g_new0 (guint16, (gsize) n_total * kv_stride);
              vc[p] = g_new0 (guint16, (gsize) n_total * kv_stride);
              cells[p] = g_new (gint32, n);
              for (int i = 0, c = 47; i < n; i++, c++) { /* consecutive from tile 1; runs with holes */
                if (c % 32 == 31)
                  c++;
                cells[p][i] = p == 0 ? HN_KV_TILE + i : c;
              }
            }
            for (int i = 0; i < n; i++)
              for (int j = 0; j < kv_stride; j++) {
                guint16 key = hn_fp32_to_fp16 ((float) g_rand_double_range (rand, -1, 1));
                guint16 value = hn_fp32_to_fp16 ((float) g_rand_double_range (rand, -1, 1));
                for (int p = 0; p < 2; p++) {
                  kc[p][cells[p][i] * kv_stride + j] = key;
                  vc[p][cells[p][i] * kv_stride + j] = value;
                }
              }
            for (int p = 0; p < 2; p++) {
              kt[p] = keys_in_tiles (kc[p], n_total, kv_stride);
              HnAttnArgs args = {
                .head_dim = hd, .n_q = n_q / n_kv, .kv_heads = n_kv, .q = q, .q_stride = (size_t) hd,
                .scale = 1.0f / sqrtf ((float) hd), .k = kt[p], .k_tiled = true, .v = vc[p],
                .kv_stride = (size_t) kv_stride, .cells = cells[p], .n_cells = n, .out = out[p],
                .out_stride = (size_t) hd, .work = work, .scores = scores, .row_max = mx[p], .row_sum = sum[p],
                .prefetch_halves = p == 0 ? 0 : -1,
              };
              k->attn (&args);
              if (p == 0)
                expect_attention (level, &args, kc[p], vc[p], 0, mx[p], sum[p]);
            }
            /* the KV heads one call each, as the worker of longer batches runs them */
            float *alone = g_new (float, n_q * hd), amx[32], asum[32];
            for (int g = 0; g < n_kv; g++) {
              const int group = n_q / n_kv;
              HnAttnArgs args = {
                .head_dim = hd, .n_q = group, .q = q + g * group * hd, .q_stride = (size_t) hd,
                .scale = 1.0f / sqrtf ((float) hd), .k = kt[1] + g * hd * HN_KV_TILE, .k_tiled = true,
                .v = vc[1] + g * hd, .kv_stride = (size_t) kv_stride, .cells = cells[1], .n_cells = n,
                .out = alone + g * group * hd, .out_stride = (size_t) hd, .work = work, .scores = scores,
                .row_max = amx + g * group, .row_sum = asum + g * group, .prefetch_halves = hd,
              };
              k->attn (&args);
            }
            if (memcmp (out[1], alone, (gsize) n_q * hd * sizeof (float)) != 0)
              g_error ("%s attention hd=%d n_q=%d kv_heads=%d cells=%d: one call per KV head gave other bits",
                       hn_simd_level_name (level), hd, n_q, n_kv, n);
            g_free (alone);
            if (memcmp (out[0], out[1], (gsize) n_q * hd * sizeof (float)) != 0 ||
                memcmp (mx[0], mx[1], (gsize) n_q * sizeof (float)) != 0 ||
                memcmp (sum[0], sum[1], (gsize) n_q * sizeof (float)) != 0)
              g_error ("%s attention hd=%d n_q=%d kv_heads=%d cells=%d: the keys' place in the cache changed the result",
                       hn_simd_level_name (level), hd, n_q, n_kv, n);
            compared++;
            for (int p = 0; p < 2; p++) {
              g_free (out[p]);
              g_free (kc[p]);
              g_free (vc[p]);
              g_free (kt[p]);
              g_free (cells[p]);
            }
            g_free (q);
            g_aligned_free (work);
            g_aligned_free (scores);
          }
  }
  if (compared == 0)
    g_test_skip ("no SIMD attention on this processor");
  g_test_message ("%d placements compared", compared);
  g_rand_free (rand);
}

/* A NaN that reaches the attention (NaN weights in a damaged file) must come out as NaN,
 * as it does from the scalar code, so that the logits check reports the file instead of
 * the model answering from made-up numbers: a NaN in one query head, and a NaN key in one
 * cell, at every level this processor has.  Clamping e^x's input with the bound second
 * (MAXPS keeps its second operand on NaN) once turned such a score into e^-87. */
static void
test_attention_nan (void)
{
  const int hd = 64, n_q = 2, n_cells = 40, kv_stride = 2 * hd;
  int checked = 0;
  for (HnSimdLevel level = HN_SIMD_SCALAR + 1; level < HN_SIMD_LEVEL_COUNT; level++) {
    const HnSimdKernels *k = hn_simd_kernels_for_level (level);
    if (k == NULL || k->attn == NULL || hd % k->attn_multiple != 0)
      continue;
    for (int poisoned = 0; poisoned < 2; poisoned++) {
      float *q = g_new (float, n_q * hd), *out = g_new (float, n_q * hd);
      guint16 *kc = g_new (guint16, n_cells * kv_stride), *vc = g_new (guint16, n_cells * kv_stride);
      gint32 *cells = g_new (gint32, n_cells);
      float *work = g_aligned_alloc (hn_attn_work_floats (n_q, hd), sizeof (float), 64);
      float *scores = g_aligned_alloc (n_q * hn_attn_score_stride (n_cells) + 1, sizeof (float), 64);
      for (int i = 0; i < n_q * hd; i++)
        q[i] = 0.25f * (float) ((i % 7) - 3);
      for (int i = 0; i < n_cells * kv_stride; i++) {
        kc[i] = hn_fp32_to_fp16 (0.125f * (float) ((i % 5) - 2));
        vc[i] = hn_fp32_to_fp16 (0.5f);
      }
      for (int c = 0; c < n_cells; c++)
        cells[c] = c;
      if (poisoned == 0)
        q[3] = NAN;                            /* head 0 only */
      else
        kc[17 * kv_stride + 5] = 0x7e00;       /* F16 NaN in cell 17's key: every head */
      HnAttnArgs args = {
        .head_dim = hd, .n_q = n_q, .q = q, .q_stride = (size_t) hd, .scale = 0.125f,
        .k = kc, .v = vc, .kv_stride = (size_t) kv_stride, .cells = cells, .n_cells = n_cells,
        .out = out, .out_stride = (size_t) hd, .work = work, .scores = scores,
      };
      k->attn (&args);
      for (int h = 0; h < n_q; h++) {
        gboolean expect_nan = poisoned == 1 || h == 0;
        for (int i = 0; i < hd; i++) {
          if (expect_nan && !isnan (out[h * hd + i]))
            g_error ("%s attention, NaN %s: head %d [%d] is %g, not NaN", hn_simd_level_name (level),
                     poisoned ? "key" : "query", h, i, out[h * hd + i]);
          if (!expect_nan && fabsf (out[h * hd + i] - 0.5f) > 1e-3f)
            g_error ("%s attention, NaN query in head 0: head %d [%d] is %g, not 0.5",
                     hn_simd_level_name (level), h, i, out[h * hd + i]);
          checked++;
        }
      }
      g_free (q);
      g_free (out);
      g_free (kc);
      g_free (vc);
      g_free (cells);
      g_aligned_free (work);
      g_aligned_free (scores);
    }
  }
  if (checked == 0)
    g_test_skip ("no SIMD attention on this processor");
}

/* Attention run over consecutive blocks of the cell list and joined with
 * hn_attn_merge_blocks (the context does so deep in a context) against a double-precision
 * softmax over all the cells: each block's probabilities are rounded to F16 within the
 * block, so the output may be off by one F16 rounding of each probability, 2^-11 of the
 * weighted values (all within ±1 here), and no more; a wrong weight of a block is far
 * beyond that, because the blocks' scores are shifted apart.  One block is the kernel's
 * output exactly. */
static void
test_attention_blocks (void)
{
  GRand *rand = g_rand_new_with_seed (11);
  int checked = 0;
  for (HnSimdLevel level = HN_SIMD_SCALAR + 1; level < HN_SIMD_LEVEL_COUNT; level++) {
    const HnSimdKernels *k = hn_simd_kernels_for_level (level);
    if (k == NULL || k->attn == NULL)
      continue;
    const int n_cells_cases[] = { 200, 257, 1100 }, block_cases[] = { 256, 100 };
    for (gsize ni = 0; ni < G_N_ELEMENTS (n_cells_cases); ni++)
      for (gsize bi = 0; bi < G_N_ELEMENTS (block_cases); bi++) {
        const int hd = 64, n_q = 4, kv_stride = 3 * hd, n = n_cells_cases[ni], block = block_cases[bi];
        const int n_blocks = (n + block - 1) / block;
        float *q = g_new (float, n_q * hd), *out = g_new (float, n_q * hd), *whole = g_new (float, n_q * hd);
        guint16 *kc = g_new (guint16, (gsize) n * kv_stride), *vc = g_new (guint16, (gsize) n * kv_stride);
        gint32 *cells = g_new (gint32, n);
        float *work = g_aligned_alloc (hn_attn_work_floats (n_q, hd), sizeof (float), 64);
        float *scores = g_aligned_alloc (n_q * hn_attn_score_stride (n), sizeof (float), 64);
        float *parts = g_new (float, n_blocks * hn_attn_part_floats (n_q, hd));
        for (int i = 0; i < n_q * hd; i++)
          q[i] = hn_fp16_to_fp32 (hn_fp32_to_fp16 ((float) g_rand_double_range (rand, -2, 2)));
        for (int c = 0; c < n; c++)
          for (int i = 0; i < kv_stride; i++) {
            /* later cells' keys lean towards the query, so the blocks' maxima differ */
            double lean = (double) c / n * (i >= hd && i < 2 * hd ? q[i - hd] : 0);
            kc[c * kv_stride + i] = hn_fp32_to_fp16 ((float) (g_rand_double_range (rand, -1, 1) + lean));
            vc[c * kv_stride + i] = hn_fp32_to_fp16 ((float) g_rand_double_range (rand, -1, 1));
          }
        for (int c = 0; c < n; c++)
          cells[c] = c;
        HnAttnArgs args = {
          .head_dim = hd, .n_q = n_q, .q = q, .q_stride = (size_t) hd, .scale = 1.0f / sqrtf ((float) hd),
          .k = kc + hd, .v = vc + hd, .kv_stride = (size_t) kv_stride, .out_stride = (size_t) hd,
          .work = work, .scores = scores,
        };
        for (int b = 0; b < n_blocks; b++) {
          float *pb = parts + b * hn_attn_part_floats (n_q, hd);
          args.cells = cells + b * block;
          args.n_cells = MIN (block, n - b * block);
          args.out = pb;
          args.row_max = pb + n_q * hd;
          args.row_sum = args.row_max + n_q;
          k->attn (&args);
        }
        hn_attn_merge_blocks (parts, n_blocks, n_q, hd, 0, n_q, out);
        /* the threads join ranges of heads: any cut gives the same outputs bit for bit */
        for (int cut = 1; cut < n_q; cut++) {
          float *pieces = g_new (float, n_q * hd);
          hn_attn_merge_blocks (parts, n_blocks, n_q, hd, 0, cut, pieces);
          hn_attn_merge_blocks (parts, n_blocks, n_q, hd, cut, n_q, pieces + cut * hd);
          g_assert_cmpmem (pieces, n_q * hd * sizeof (float), out, n_q * hd * sizeof (float));
          g_free (pieces);
        }
        if (n_blocks == 1) {
          args.cells = cells;
          args.n_cells = n;
          args.out = whole;
          args.row_max = args.row_sum = NULL;
          k->attn (&args);
          g_assert_cmpmem (out, n_q * hd * sizeof (float), whole, n_q * hd * sizeof (float));
        }
        for (int h = 0; h < n_q; h++) {
          double *s = g_new (double, n), mx = -INFINITY, sum = 0;
          for (int c = 0; c < n; c++) {
            double d = 0;
            for (int i = 0; i < hd; i++)
              d += q[h * hd + i] * (double) hn_fp16_to_fp32 (kc[c * kv_stride + hd + i]);
            s[c] = d * args.scale;
            mx = MAX (mx, s[c]);
          }
          for (int c = 0; c < n; c++)
            sum += s[c] = exp (s[c] - mx);
          for (int i = 0; i < hd; i++) {
            double o = 0;
            for (int c = 0; c < n; c++)
              o += s[c] / sum * hn_fp16_to_fp32 (vc[c * kv_stride + hd + i]);
            if (fabs (out[h * hd + i] - o) > 1.0 / 2048 + 1e-5)
              g_error ("%s attention in blocks of %d, %d cells, head %d [%d]: %g, expected %g",
                       hn_simd_level_name (level), block, n, h, i, out[h * hd + i], o);
            checked++;
          }
          g_free (s);
        }
        g_free (q);
        g_free (out);
        g_free (whole);
        g_free (kc);
        g_free (vc);
        g_free (cells);
        g_free (parts);
        g_aligned_free (work);
        g_aligned_free (scores);
      }
  }
  if (checked == 0)
    g_test_skip ("no SIMD attention on this processor");
  g_test_message ("%d attention outputs compared", checked);
  g_rand_free (rand);
}

/* The decode kernel is chosen by comparing the candidates within each round of
 * interleaved timings: one outlier (a neighbour's burst) must not decide, nor a change of
 * load between rounds; ties keep the first candidate. */
static void
test_decode_pick (void)
{
  /* candidate 0 has the lower mean (one huge outlier in candidate 1 the other way) but
   * candidate 1 is the faster in three rounds of five */
  const double a[] = { 5.0, 5.0, 5.0, 1.0, 1.0,
                       4.0, 4.0, 4.0, 4.0, 90.0 };
  g_assert_cmpint (hn_decode_pick_fastest (a, 2, 5), ==, 1);
  /* the machine got three times slower after round 2, and in round 5 a burst hit
   * candidate 0 alone: candidate 1 has the lower median of its raw times (1.1 against
   * 3.0), but candidate 0 is 10% faster in every other round */
  const double load[] = { 1.0, 1.0, 3.0, 3.0, 3.0,
                          1.1, 1.1, 3.3, 3.3, 1.1 };
  g_assert_cmpint (hn_decode_pick_fastest (load, 2, 5), ==, 0);
  const double tie[] = { 3.0, 2.0, 2.0, 3.0 };
  g_assert_cmpint (hn_decode_pick_fastest (tie, 2, 2), ==, 0);
  /* three candidates: ratios to each round's fastest, medians 1.5, 2.67 and 2.56 */
  const double three[] = { 1.0, 9.0, 9.0, 1.0,
                           4.0, 4.0, 6.0, 6.0,
                           4.0, 4.5, 4.5, 4.0 };
  g_assert_cmpint (hn_decode_pick_fastest (three, 3, 4), ==, 0);
  const double later[] = { 2.0, 2.0, 2.0,
                           3.0, 3.0, 3.0,
                           1.0, 1.5, 2.5 /* ratios 1, 1 and 1.25: median 1 */ };
  g_assert_cmpint (hn_decode_pick_fastest (later, 3, 3), ==, 2);
  const double one[] = { 7.0 };
  g_assert_cmpint (hn_decode_pick_fastest (one, 1, 1), ==, 0);
  g_assert_cmpint (hn_decode_pick_fastest (one, 0, 1), ==, -1);
  g_assert_cmpint (hn_decode_pick_fastest (one, 1, HN_DECODE_MAX_SAMPLES + 1), ==, -1);
}

/* The cache file: written and read back for the same processor and level; ignored for
 * another processor model, another level, a damaged file. */
static void
test_decode_cache_text (void)
{
  HnDecodeKernel choice[HN_TYPE_COUNT] = { 0 }, back[HN_TYPE_COUNT];
  choice[HN_TYPE_Q4_0] = HN_DECODE_DOT;
  choice[HN_TYPE_Q4_K] = HN_DECODE_TILE;
  choice[HN_TYPE_Q6_K] = HN_DECODE_DOT;
  char text[4096];
  size_t len = hn_decode_choice_format (text, sizeof text, NULL, "AMD Ryzen 9 7950X 16-Core Processor",
                                        "AVX-512 (VNNI)", choice);
  g_assert_cmpuint (len, ==, strlen (text));
  memset (back, 0, sizeof back);
  g_assert_true (hn_decode_choice_parse (text, "AMD Ryzen 9 7950X 16-Core Processor", "AVX-512 (VNNI)", back));
  g_assert_cmpmem (choice, sizeof choice, back, sizeof back);

  HnDecodeKernel untouched[HN_TYPE_COUNT];
  for (int t = 0; t < HN_TYPE_COUNT; t++)
    untouched[t] = back[t] = HN_DECODE_TILE;
  g_assert_false (hn_decode_choice_parse (text, "Intel(R) Xeon(R) Processor", "AVX-512 (VNNI)", back));
  g_assert_false (hn_decode_choice_parse (text, "AMD Ryzen 9 7950X 16-Core Processor", "AVX2", back));
  g_assert_false (hn_decode_choice_parse (text, "AMD Ryzen 9", "AVX-512 (VNNI)", back));
  g_autofree char *bad_kernel = g_strdup (text);
  char *word = strstr (bad_kernel, " dot");
  g_assert_nonnull (word);
  memcpy (word, " dXt", 4);
  g_assert_false (hn_decode_choice_parse (bad_kernel, "AMD Ryzen 9 7950X 16-Core Processor", "AVX-512 (VNNI)", back));
  g_autofree char *old = g_strdup (text);
  char *version = strchr (old, '\n') - 1;
  *version = (char) (*version + 1);
  g_assert_false (hn_decode_choice_parse (old, "AMD Ryzen 9 7950X 16-Core Processor", "AVX-512 (VNNI)", back));
  g_assert_false (hn_decode_choice_parse ("", "x", "y", back));
  g_assert_cmpmem (untouched, sizeof untouched, back, sizeof back);

  /* a short buffer gets the length it would need, like snprintf */
  char small[16];
  g_assert_cmpuint (hn_decode_choice_format (small, sizeof small, NULL, "AMD Ryzen 9 7950X 16-Core Processor",
                                             "AVX-512 (VNNI)", choice), ==, len);
}

/* The text's section of one kernel set holds exactly `want`. */
static void
assert_section (const char *text, const char *cpu, const char *kernel_set, const HnDecodeKernel want[HN_TYPE_COUNT])
{
  HnDecodeKernel back[HN_TYPE_COUNT] = { 0 };
  g_assert_true (hn_decode_choice_parse (text, cpu, kernel_set, back));
  g_assert_cmpmem (want, sizeof back, back, sizeof back);
}

/* One file holds a section per kernel set: writing one set's choices keeps the others
 * (switching HANASHI_SIMD must not measure again each time), replaces its own, and drops
 * a previous text of another processor or a damaged one. */
static void
test_decode_cache_sections (void)
{
  const char *cpu = "AMD Ryzen 9 7950X 16-Core Processor";
  HnDecodeKernel wide[HN_TYPE_COUNT] = { 0 }, narrow[HN_TYPE_COUNT] = { 0 }, back[HN_TYPE_COUNT];
  wide[HN_TYPE_Q4_0] = HN_DECODE_DOT;
  wide[HN_TYPE_Q8_0] = HN_DECODE_TILE;
  narrow[HN_TYPE_Q4_0] = HN_DECODE_TILE;
  char first[4096], both[4096], again[4096];
  g_assert_cmpuint (hn_decode_choice_format (first, sizeof first, NULL, cpu, "AVX-512 (VNNI)", wide), <, sizeof first);
  g_assert_cmpuint (hn_decode_choice_format (both, sizeof both, first, cpu, "AVX2 (AVX-VNNI)", narrow), <, sizeof both);
  assert_section (both, cpu, "AVX-512 (VNNI)", wide);
  assert_section (both, cpu, "AVX2 (AVX-VNNI)", narrow);
  /* "AVX2" is the same level without AVX-VNNI: other kernels, not yet measured */
  g_assert_false (hn_decode_choice_parse (both, cpu, "AVX2", back));

  /* measuring the first set again replaces its section; the second stays */
  wide[HN_TYPE_Q4_0] = HN_DECODE_TILE;
  g_assert_cmpuint (hn_decode_choice_format (again, sizeof again, both, cpu, "AVX-512 (VNNI)", wide), <, sizeof again);
  char *first_section = strstr (again, "level AVX-512");
  g_assert_nonnull (first_section);
  g_assert_null (strstr (first_section + 1, "level AVX-512"));
  assert_section (again, cpu, "AVX-512 (VNNI)", wide);
  assert_section (again, cpu, "AVX2 (AVX-VNNI)", narrow);

  /* a previous text of another processor, or one with a line that cannot be read, is
   * not carried over */
  char other[4096], damaged_copy[4096];
  g_assert_cmpuint (hn_decode_choice_format (other, sizeof other, both, "Intel(R) Core(TM) i7-1165G7", "AVX2", narrow), <, sizeof other);
  g_assert_null (strstr (other, "AVX-512"));
  g_autofree char *damaged = g_strconcat (both, "Q9_9 tile\n", NULL);
  g_assert_false (hn_decode_choice_parse (damaged, cpu, "AVX2 (AVX-VNNI)", back));
  g_assert_cmpuint (hn_decode_choice_format (damaged_copy, sizeof damaged_copy, damaged, cpu, "AVX2", narrow), <, sizeof damaged_copy);
  g_assert_null (strstr (damaged_copy, "AVX-512"));
  assert_section (damaged_copy, cpu, "AVX2", narrow);

  /* every kernel table is named, and no two levels share a name */
  const char *names[HN_SIMD_LEVEL_COUNT] = { NULL };
  for (int level = 0; level < HN_SIMD_LEVEL_COUNT; level++) {
    const HnSimdKernels *k = hn_simd_kernels_for_level ((HnSimdLevel) level);
    if (!k)
      continue;
    g_assert_nonnull (k->name);
    names[level] = k->name;
    for (int other_level = 0; other_level < level; other_level++)
      if (names[other_level])
        g_assert_cmpstr (names[other_level], !=, k->name);
  }
  /* the variant without AVX-VNNI (or I8MM) shares its level's name only where it runs the
   * same kernels, that is where the processor lacks the extension anyway */
#if defined(__aarch64__)
  const char *variant = "neon-noi8mm";
  const HnSimdLevel variant_of = HN_SIMD_NEON_DOTPROD;
#else
  const char *variant = "avx2-novnni";
  const HnSimdLevel variant_of = HN_SIMD_AVX2;
#endif
  const HnSimdKernels *full = hn_simd_kernels_for_level (variant_of);
  if (full) {
    g_setenv ("HANASHI_SIMD", variant, TRUE);
    const HnSimdKernels *reduced = hn_simd_kernels ();
    g_unsetenv ("HANASHI_SIMD");
    g_assert_nonnull (reduced->name);
    g_assert_cmpint (strcmp (full->name, reduced->name) == 0, ==,
                     full->panel_gemm[HN_TYPE_Q4_0] == reduced->panel_gemm[HN_TYPE_Q4_0]);
  }
}

/* HANASHI_DECODE forces a kernel; without it the choice stands, and a type whose level
 * has only one kernel gets that one whatever is asked. */
static void
test_decode_kernel_override (void)
{
  const HnSimdKernels *k = hn_simd_kernels_for_level (HN_SIMD_AVX512);
  if (!k) {
    g_test_skip ("no AVX-512 here: no level with two decode kernels");
    return;
  }
  g_setenv ("HANASHI_DECODE", "dot", TRUE);
  g_assert_cmpint (hn_decode_kernel (k, HN_TYPE_Q4_0), ==, HN_DECODE_DOT);
  g_setenv ("HANASHI_DECODE", "tile", TRUE);
  g_assert_cmpint (hn_decode_kernel (k, HN_TYPE_Q4_0), ==, HN_DECODE_TILE);
  g_assert_cmpint (hn_decode_kernel (k, HN_TYPE_Q5_K), ==, HN_DECODE_DOT); /* no tile for Q5_K */
  g_unsetenv ("HANASHI_DECODE");
  const HnSimdKernels *avx2 = hn_simd_kernels_for_level (HN_SIMD_AVX2);
  g_setenv ("HANASHI_DECODE", "tile", TRUE);
  g_assert_cmpint (hn_decode_kernel (avx2, HN_TYPE_Q5_K), ==, HN_DECODE_DOT);
  g_assert_cmpint (hn_decode_kernel (avx2, HN_TYPE_Q6_K), ==, HN_DECODE_DOT);
  /* AVX2's tiles for the 32-element types and Q4_K are the regrouped ones (regrouped at
   * load): two candidates each */
  const HnType with_layouts[] = { HN_TYPE_Q4_0, HN_TYPE_Q8_0, HN_TYPE_Q5_0, HN_TYPE_Q4_1, HN_TYPE_Q5_1, HN_TYPE_Q4_K };
  for (gsize i = 0; i < G_N_ELEMENTS (with_layouts); i++) {
    const HnType t = with_layouts[i];
    g_setenv ("HANASHI_DECODE", "dot", TRUE);
    g_assert_cmpint (hn_decode_kernel (avx2, t), ==, HN_DECODE_DOT);
    g_setenv ("HANASHI_DECODE", "tile", TRUE);
    g_assert_cmpint (hn_decode_kernel (avx2, t), ==, HN_DECODE_TILE);
  }
  g_unsetenv ("HANASHI_DECODE");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* which kernel set the run has (a cross-built run under qemu shows it did not fall back) */
  g_test_message ("kernels: %s", hn_simd_level_name (hn_cpu_simd_level ()));
  g_test_add_func ("/engine/simd/vec-dot", test_vec_dot_levels);
  g_test_add_func ("/engine/simd/quantize", test_quantize_levels);
  g_test_add_func ("/engine/simd/gemm-tiles", test_gemm_tiles);
  g_test_add_func ("/engine/simd/matmul", test_matmul_paths);
  g_test_add_func ("/engine/simd/panel", test_panel_kernels);
  g_test_add_func ("/engine/simd/panel-types", test_panel_types);
  g_test_add_func ("/engine/simd/round", test_round_levels);
  g_test_add_func ("/engine/simd/decode-types", test_decode_types);
  g_test_add_func ("/engine/simd/matvec-many", test_matvec_many);
  g_test_add_func ("/engine/simd/matmul-rows-alone", test_matmul_rows_alone);
  g_test_add_func ("/engine/simd/attention", test_attention);
  g_test_add_func ("/engine/simd/attention-tiles-placement", test_attention_tiles_placement);
  g_test_add_func ("/engine/simd/attention-nan", test_attention_nan);
  g_test_add_func ("/engine/simd/attention-blocks", test_attention_blocks);
  g_test_add_func ("/engine/simd/decode-pick", test_decode_pick);
  g_test_add_func ("/engine/simd/decode-cache-text", test_decode_cache_text);
  g_test_add_func ("/engine/simd/decode-cache-sections", test_decode_cache_sections);
  g_test_add_func ("/engine/simd/decode-override", test_decode_kernel_override);
  return g_test_run ();
}
