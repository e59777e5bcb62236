/* Tests for hn-common: half/bfloat16 conversions and error helpers; and hn-array.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-array.h"
#include "hn-common.h"

#include <glib.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void
test_fp16_round_trip_every_half (void)
{
  /* Every finite half converts to float and back to the same bits. */
  for (uint32_t h = 0; h < 0x10000; h++) {
    uint32_t exponent = (h >> 10) & 0x1f;
    float f = hn_fp16_to_fp32 ((uint16_t) h);
    if (exponent == 31) {
      g_assert_true (isinf (f) || isnan (f));
      continue;
    }
    g_assert_cmpuint (hn_fp32_to_fp16 (f), ==, h);
  }
}

static void
test_fp16_rounding (void)
{
  g_assert_cmpfloat (hn_fp16_to_fp32 (0x3c00), ==, 1.0f);
  g_assert_cmpfloat (hn_fp16_to_fp32 (0xc000), ==, -2.0f);
  g_assert_cmpfloat (hn_fp16_to_fp32 (0x0001), ==, ldexpf (1.0f, -24));
  g_assert_cmpfloat (hn_fp16_to_fp32 (0x7bff), ==, 65504.0f);
  /* 1 + 2^-11 is exactly between 1 and 1 + 2^-10: ties to even (1.0). */
  g_assert_cmpuint (hn_fp32_to_fp16 (1.0f + ldexpf (1.0f, -11)), ==, 0x3c00);
  /* 1 + 3*2^-11 ties to 1 + 2^-9 (even mantissa 2). */
  g_assert_cmpuint (hn_fp32_to_fp16 (1.0f + 3 * ldexpf (1.0f, -11)), ==, 0x3c02);
  g_assert_cmpuint (hn_fp32_to_fp16 (65520.0f), ==, 0x7c00);
  g_assert_cmpuint (hn_fp32_to_fp16 (65519.0f), ==, 0x7bff);
  g_assert_cmpuint (hn_fp32_to_fp16 (ldexpf (1.0f, -25)), ==, 0x0000); /* tie to even zero */
  g_assert_cmpuint (hn_fp32_to_fp16 (ldexpf (1.5f, -25)), ==, 0x0001);
  g_assert_cmpuint (hn_fp32_to_fp16 (-0.0f), ==, 0x8000);
  g_assert_true (isnan (hn_fp16_to_fp32 (hn_fp32_to_fp16 (NAN))));
}

static void
test_bf16 (void)
{
  g_assert_cmpfloat (hn_bf16_to_fp32 (0x3f80), ==, 1.0f);
  g_assert_cmpuint (hn_fp32_to_bf16 (1.0f), ==, 0x3f80);
  /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even. */
  g_assert_cmpuint (hn_fp32_to_bf16 (1.0f + ldexpf (1.0f, -8)), ==, 0x3f80);
  g_assert_cmpuint (hn_fp32_to_bf16 (1.0f + 3 * ldexpf (1.0f, -8)), ==, 0x3f82);
  g_assert_true (isnan (hn_bf16_to_fp32 (hn_fp32_to_bf16 (NAN))));
}

static void
test_error_helpers (void)
{
  HnError err = { 0 };
  g_assert_false (hn_error_set (&err, HN_ERR_FORMAT, "tensor '%s' is bad", "x"));
  g_assert_cmpint (err.code, ==, HN_ERR_FORMAT);
  g_assert_cmpstr (err.message, ==, "tensor 'x' is bad");
  hn_error_prefix (&err, "loading %s", "m.gguf");
  g_assert_cmpstr (err.message, ==, "loading m.gguf: tensor 'x' is bad");
  hn_error_clear (&err);
  g_assert_cmpint (err.code, ==, HN_OK);
  g_assert_false (hn_error_set (NULL, HN_ERR_IO, "ignored"));
  size_t out;
  g_assert_false (hn_mul_size (SIZE_MAX / 2 + 1, 2, &out));
  g_assert_true (hn_add_size (1, 2, &out));
  g_assert_cmpuint (out, ==, 3);
}

static void
test_array_growth (void)
{
  /* capacity doubles from the first capacity until the wanted count fits */
  size_t cap = 0;
  g_assert_true (hn_array_grown_cap (0, 1, 4, 16, &cap));
  g_assert_cmpuint (cap, ==, 16);
  g_assert_true (hn_array_grown_cap (16, 17, 4, 16, &cap));
  g_assert_cmpuint (cap, ==, 32);
  g_assert_true (hn_array_grown_cap (16, 100, 4, 16, &cap));
  g_assert_cmpuint (cap, ==, 128);
  g_assert_true (hn_array_grown_cap (16, 10, 4, 16, &cap));
  g_assert_cmpuint (cap, ==, 16);
  /* the count or the byte size would overflow size_t */
  g_assert_false (hn_array_grown_cap (16, SIZE_MAX, 1, 16, &cap));
  g_assert_false (hn_array_grown_cap (16, SIZE_MAX / 4, 8, 16, &cap));

  int32_t *items = NULL;
  size_t n = 0, capacity = 0;
  for (int32_t i = 0; i < 1000; i++) {
    g_assert_true (HN_ARRAY_RESERVE (items, capacity, n + 1, 8));
    g_assert_cmpuint (capacity, >=, n + 1);
    items[n++] = i;
  }
  g_assert_cmpuint (capacity, ==, 1024);
  for (int32_t i = 0; i < 1000; i++)
    g_assert_cmpint (items[i], ==, i);
  /* a failure leaves the array and its capacity as they were */
  int32_t *before = items;
  g_assert_false (HN_ARRAY_RESERVE (items, capacity, SIZE_MAX / 2, 8));
  g_assert_true (items == before);
  g_assert_cmpuint (capacity, ==, 1024);
  g_assert_false (HN_ARRAY_RESIZE (items, SIZE_MAX / 2));
  g_assert_true (items == before);
  g_assert_cmpint (items[999], ==, 999);
  /* an exact resize keeps the contents */
  g_assert_true (HN_ARRAY_RESIZE (items, 10));
  g_assert_cmpint (items[9], ==, 9);
  free (items);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/engine/common/fp16-round-trip", test_fp16_round_trip_every_half);
  g_test_add_func ("/engine/common/fp16-rounding", test_fp16_rounding);
  g_test_add_func ("/engine/common/bf16", test_bf16);
  g_test_add_func ("/engine/common/errors", test_error_helpers);
  g_test_add_func ("/engine/common/array-growth", test_array_growth);
  return g_test_run ();
}
