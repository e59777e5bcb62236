/* The Vulkan matrix kernels against the processor's product: for every weight type the
 * device multiplies natively (and one it converts to F16 at upload), rows that are not a
 * multiple of any tile (67), grouped Q4_0 (the CPU's layout, put back at upload), rows whose length is not a multiple of the tiles' 32 where the
 * type allows it (100 for F32/F16/BF16), and batches of 1 and 3 tokens (the matrix-vector
 * kernel) and 7, 33 and 100 (the tiled kernel, partial token tiles included).  The
 * reference dequantizes the same bytes and sums in double; the device sums in float, so
 * the bound is relative to the sum of the products' magnitudes.  Again under
 * HANASHI_VULKAN_FAIL=small-workgroups, where a device too small for the tiles runs every
 * batch through the matrix-vector kernel.  Device 0 is named, so a software driver
 * (lavapipe in CI) is used; without any device the tests skip.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <math.h>

#include "hn-common.h"
#include "hn-quants.h"
#include "hn-vk.h"

#define N_ROWS 67

typedef struct {
  const char *name;
  HnType type;
  int n_cols;
  bool to_f16; /* no kernel: the device holds it as F16 */
} Case;

static const Case cases[] = {
  { "f32", HN_TYPE_F32, 100, false },   { "f16", HN_TYPE_F16, 100, false },
  { "bf16", HN_TYPE_BF16, 100, false }, { "q4_0", HN_TYPE_Q4_0, 96, false },
  { "q8_0", HN_TYPE_Q8_0, 96, false },  { "q4_k", HN_TYPE_Q4_K, 512, false },
  { "q5_k", HN_TYPE_Q5_K, 512, false }, { "q6_k", HN_TYPE_Q6_K, 512, false },
  { "q4_1", HN_TYPE_Q4_1, 96, true },
  /* types regrouped at load for the processor (two runs of 16 blocks and a tail block;
   * Q4_K: two runs of two super-blocks and a fifth):
   * put back in file layout for the file type's kernel, or converted to F16 as the file
   * type is */
  { "q4_0-grouped", HN_TYPE_Q4_0_GROUPED, 32 * 33, false },
  { "q8_0-grouped", HN_TYPE_Q8_0_GROUPED, 32 * 33, false },
  { "q5_0-grouped", HN_TYPE_Q5_0_GROUPED, 32 * 33, true },
  { "q4_1-grouped", HN_TYPE_Q4_1_GROUPED, 32 * 33, true },
  { "q5_1-grouped", HN_TYPE_Q5_1_GROUPED, 32 * 33, true },
  { "q4_k-grouped", HN_TYPE_Q4_K_GROUPED, 256 * 5, false },
};

static const int token_counts[] = { 1, 3, 7, 33, 100 };

static void
test_product (gconstpointer data)
{
  const Case *c = data;
  int K = c->n_cols;
  GRand *rng = g_rand_new_with_seed (23);
  size_t row_bytes = hn_type_row_bytes (c->type, K);
  g_assert_cmpuint (row_bytes, >, 0);
  g_autofree float *src = g_new (float, (size_t) K);
  g_autofree uint8_t *weights = g_malloc ((size_t) N_ROWS * row_bytes);
  g_autofree float *w_ref = g_new (float, (size_t) N_ROWS * K);
  for (int r = 0; r < N_ROWS; r++)
    {
      /* rows of different scales, so a row or scale mixed up shows */
      double scale = 0.05 * (1 + r % 5);
      for (int k = 0; k < K; k++)
        src[k] = (float) (g_rand_double_range (rng, -1.0, 1.0) * scale);
      hn_quantize_row (c->type, src, weights + (size_t) r * row_bytes, K);
      hn_dequantize_row (c->type, weights + (size_t) r * row_bytes, w_ref + (size_t) r * K, K);
      if (c->to_f16)
        for (int k = 0; k < K; k++)
          w_ref[(size_t) r * K + k] = hn_fp16_to_fp32 (hn_fp32_to_fp16 (w_ref[(size_t) r * K + k]));
    }
  for (size_t i = 0; i < G_N_ELEMENTS (token_counts); i++)
    {
      int nt = token_counts[i];
      g_autofree float *x = g_new (float, (size_t) nt * K);
      g_autofree float *y = g_new (float, (size_t) nt * N_ROWS);
      for (size_t j = 0; j < (size_t) nt * K; j++)
        x[j] = (float) g_rand_double_range (rng, -2.0, 2.0);
      for (size_t j = 0; j < (size_t) nt * N_ROWS; j++)
        y[j] = NAN; /* a cell the device never writes stays NaN and fails */
      HnError err = { 0 };
      if (!hn_vk_matmul (0, c->type, weights, K, N_ROWS, x, nt, y, &err))
        g_error ("%s, %d tokens: %s", c->name, nt, err.message);
      for (int t = 0; t < nt; t++)
        for (int r = 0; r < N_ROWS; r++)
          {
            double want = 0, magnitude = 0;
            for (int k = 0; k < K; k++)
              {
                double p = (double) w_ref[(size_t) r * K + k] * x[(size_t) t * K + k];
                want += p;
                magnitude += fabs (p);
              }
            double got = y[(size_t) t * N_ROWS + r];
            if (!(fabs (got - want) <= 1e-5 * magnitude + 1e-6))
              g_error ("%s, %d tokens: row %d of token %d is %.7g, the processor says %.7g", c->name, nt, r, t,
                       got, want);
          }
    }
  g_rand_free (rng);
}

static void
test_product_without_tiles (gconstpointer data)
{
  g_setenv ("HANASHI_VULKAN_FAIL", "small-workgroups", TRUE);
  test_product (data);
  g_unsetenv ("HANASHI_VULKAN_FAIL");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  HnVkDeviceInfo dev;
  HnError err = { 0 };
  if (hn_vk_list_devices (&dev, 1, &err) <= 0)
    {
      g_test_skip ("no Vulkan device");
      return g_test_run ();
    }
  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/vulkan-matmul/%s", cases[i].name);
      g_test_add_data_func (path, &cases[i], test_product);
      g_autofree char *small = g_strdup_printf ("/vulkan-matmul/small-workgroups/%s", cases[i].name);
      g_test_add_data_func (small, &cases[i], test_product_without_tiles);
    }
  return g_test_run ();
}
