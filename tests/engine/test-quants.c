/* Tests for hn-quants: block layouts, decoders (hand-built blocks and the reference
 * decoder's output in the shared test data), encoders and reference dot products.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-gguf.h"
#include "hn-quants-blocks.h"

#include <glib.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

static const HnType all_known_types[] = {
  HN_TYPE_F32, HN_TYPE_F16, HN_TYPE_BF16, HN_TYPE_Q4_0, HN_TYPE_Q4_1, HN_TYPE_Q5_0,
  HN_TYPE_Q5_1, HN_TYPE_Q8_0, HN_TYPE_Q8_1, HN_TYPE_Q2_K, HN_TYPE_Q3_K, HN_TYPE_Q4_K,
  HN_TYPE_Q5_K, HN_TYPE_Q6_K, HN_TYPE_Q8_K,
};

static const HnType weight_types[] = {
  HN_TYPE_F32, HN_TYPE_F16, HN_TYPE_BF16, HN_TYPE_Q4_0, HN_TYPE_Q4_1, HN_TYPE_Q5_0,
  HN_TYPE_Q5_1, HN_TYPE_Q8_0, HN_TYPE_Q2_K, HN_TYPE_Q3_K, HN_TYPE_Q4_K, HN_TYPE_Q5_K,
  HN_TYPE_Q6_K,
};

static const char *
testdata_dir (void)
{
  const char *dir = g_getenv ("HANASHI_TESTDATA");
  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    return NULL;
  return dir;
}

static uint16_t
h (float f)
{
  return hn_fp32_to_fp16 (f);
}

/* ---------------------------------------------------------------------------------- */

static void
test_traits (void)
{
  const struct { HnType type; size_t size; int64_t elems; } expected[] = {
    { HN_TYPE_F32, 4, 1 }, { HN_TYPE_F16, 2, 1 }, { HN_TYPE_BF16, 2, 1 },
    { HN_TYPE_Q4_0, sizeof (HnBlockQ4_0), 32 }, { HN_TYPE_Q4_1, sizeof (HnBlockQ4_1), 32 },
    { HN_TYPE_Q5_0, sizeof (HnBlockQ5_0), 32 }, { HN_TYPE_Q5_1, sizeof (HnBlockQ5_1), 32 },
    { HN_TYPE_Q8_0, sizeof (HnBlockQ8_0), 32 }, { HN_TYPE_Q8_1, sizeof (HnBlockQ8_1), 32 },
    { HN_TYPE_Q2_K, sizeof (HnBlockQ2_K), 256 }, { HN_TYPE_Q3_K, sizeof (HnBlockQ3_K), 256 },
    { HN_TYPE_Q4_K, sizeof (HnBlockQ4_K), 256 }, { HN_TYPE_Q5_K, sizeof (HnBlockQ5_K), 256 },
    { HN_TYPE_Q6_K, sizeof (HnBlockQ6_K), 256 }, { HN_TYPE_Q8_K, sizeof (HnBlockQ8_K), 256 },
  };
  for (size_t i = 0; i < G_N_ELEMENTS (expected); i++) {
    HnType t = expected[i].type;
    g_assert_true (hn_type_is_known (t));
    g_assert_cmpuint (hn_type_block_bytes (t), ==, expected[i].size);
    g_assert_cmpint (hn_type_block_elems (t), ==, expected[i].elems);
    g_assert_cmpuint (hn_type_row_bytes (t, expected[i].elems * 7), ==, expected[i].size * 7);
    g_assert_cmpuint (hn_type_row_bytes (t, 0), ==, 0);
    if (expected[i].elems > 1)
      g_assert_cmpuint (hn_type_row_bytes (t, expected[i].elems + 1), ==, 0);
    g_assert_cmpuint (hn_type_row_bytes (t, -32), ==, 0);
    /* Overflow is refused, not wrapped. */
    /* Huge counts either give the exact size or 0, never a wrapped value. */
    for (int shift = 40; shift < 63; shift++) {
      int64_t big = ((INT64_C (1) << shift) - 1) / expected[i].elems * expected[i].elems;
      unsigned __int128 exact = (unsigned __int128) (big / expected[i].elems) * expected[i].size;
      size_t got = hn_type_row_bytes (t, big);
      g_assert_true (got == 0 || (unsigned __int128) got == exact);
      if (exact <= SIZE_MAX)
        g_assert_true ((unsigned __int128) got == exact);
    }
    /* The activation type of every weight type is a known type with the same block. */
    HnType act = hn_type_vec_dot_type (t);
    g_assert_true (hn_type_is_known (act));
    if (t != HN_TYPE_F32 && t != HN_TYPE_F16 && t != HN_TYPE_BF16)
      g_assert_cmpint (hn_type_block_elems (act), ==, hn_type_block_elems (t));
  }
  g_assert_cmpint (hn_type_vec_dot_type (HN_TYPE_Q4_0), ==, HN_TYPE_Q8_0);
  g_assert_cmpint (hn_type_vec_dot_type (HN_TYPE_Q5_0), ==, HN_TYPE_Q8_0);
  g_assert_cmpint (hn_type_vec_dot_type (HN_TYPE_Q8_0), ==, HN_TYPE_Q8_0);
  g_assert_cmpint (hn_type_vec_dot_type (HN_TYPE_Q4_1), ==, HN_TYPE_Q8_1);
  g_assert_cmpint (hn_type_vec_dot_type (HN_TYPE_Q5_1), ==, HN_TYPE_Q8_1);
  g_assert_cmpint (hn_type_vec_dot_type (HN_TYPE_Q2_K), ==, HN_TYPE_Q8_K);
  g_assert_cmpint (hn_type_vec_dot_type (HN_TYPE_Q6_K), ==, HN_TYPE_Q8_K);
  g_assert_cmpint (hn_type_vec_dot_type (HN_TYPE_F16), ==, HN_TYPE_F16);
  g_assert_cmpint (hn_type_vec_dot_type (HN_TYPE_BF16), ==, HN_TYPE_BF16);
  g_assert_cmpint (hn_type_vec_dot_type (HN_TYPE_F32), ==, HN_TYPE_F32);

  for (size_t i = 0; i < G_N_ELEMENTS (weight_types); i++)
    g_assert_true (hn_type_is_weight_type (weight_types[i]));
  g_assert_false (hn_type_is_weight_type (HN_TYPE_Q8_1));
  g_assert_false (hn_type_is_weight_type (HN_TYPE_Q8_K));
  g_assert_false (hn_type_is_known (16)); /* IQ2_XXS */
  g_assert_cmpstr (hn_type_name (16), ==, "IQ2_XXS");
  g_assert_cmpstr (hn_type_name (HN_TYPE_Q4_K), ==, "Q4_K");
  g_assert_cmpstr (hn_type_name (1000), ==, "unknown");
  g_assert_cmpuint (hn_type_row_bytes (16, 256), ==, 0);
}

/* The inlined half decoder used by the block decoders is bit-identical to hn-common's. */
static void
test_half_to_float (void)
{
  for (uint32_t h = 0; h < 0x10000; h++) {
    float a = hn_half_to_float ((uint16_t) h), b = hn_fp16_to_fp32 ((uint16_t) h);
    uint32_t ba, bb;
    memcpy (&ba, &a, 4);
    memcpy (&bb, &b, 4);
    if (ba != bb)
      g_error ("half 0x%04x: inline 0x%08x, reference 0x%08x", h, ba, bb);
  }
}

/* ---------------------------------------------------------------------------------- */
/* Hand-built blocks: every field set to a chosen value, expected values computed by   */
/* hand from the format's definition.                                                  */
/* ---------------------------------------------------------------------------------- */

static void
test_hand_f16_bf16 (void)
{
  const uint8_t f16[] = { 0x00, 0x3c, 0x00, 0xc0, 0x00, 0x35, 0xff, 0x7b };
  float out[4];
  hn_dequantize_row (HN_TYPE_F16, f16, out, 4);
  g_assert_cmpfloat (out[0], ==, 1.0f);
  g_assert_cmpfloat (out[1], ==, -2.0f);
  g_assert_cmpfloat (out[2], ==, 0.3125f);
  g_assert_cmpfloat (out[3], ==, 65504.0f);

  const uint8_t bf16[] = { 0x80, 0x3f, 0x40, 0xc0, 0xa0, 0x3e, 0x00, 0x00 };
  hn_dequantize_row (HN_TYPE_BF16, bf16, out, 4);
  g_assert_cmpfloat (out[0], ==, 1.0f);
  g_assert_cmpfloat (out[1], ==, -3.0f);
  g_assert_cmpfloat (out[2], ==, 0.3125f);
  g_assert_cmpfloat (out[3], ==, 0.0f);

  const float f32[] = { 1.5f, -0.25f };
  hn_dequantize_row (HN_TYPE_F32, f32, out, 2);
  g_assert_cmpfloat (out[0], ==, 1.5f);
  g_assert_cmpfloat (out[1], ==, -0.25f);
}

static void
test_hand_q4_0_q4_1 (void)
{
  uint8_t raw[sizeof (HnBlockQ4_1)];
  float out[32];

  /* Q4_0: d = 0.5 (0x3800), byte j = low nibble j & 15, high nibble 15 - j. */
  raw[0] = 0x00; raw[1] = 0x38;
  for (int j = 0; j < 16; j++)
    raw[2 + j] = (uint8_t) ((j & 15) | ((15 - j) << 4));
  hn_dequantize_row (HN_TYPE_Q4_0, raw, out, 32);
  for (int j = 0; j < 16; j++) {
    g_assert_cmpfloat (out[j], ==, 0.5f * (j - 8));
    g_assert_cmpfloat (out[j + 16], ==, 0.5f * (15 - j - 8));
  }

  /* Q4_1: d = 0.25 (0x3400), m = -1 (0xbc00). */
  raw[0] = 0x00; raw[1] = 0x34; raw[2] = 0x00; raw[3] = 0xbc;
  for (int j = 0; j < 16; j++)
    raw[4 + j] = (uint8_t) (j | ((15 - j) << 4));
  hn_dequantize_row (HN_TYPE_Q4_1, raw, out, 32);
  for (int j = 0; j < 16; j++) {
    g_assert_cmpfloat (out[j], ==, 0.25f * j - 1.0f);
    g_assert_cmpfloat (out[j + 16], ==, 0.25f * (15 - j) - 1.0f);
  }
}

static void
test_hand_q5 (void)
{
  uint8_t raw[sizeof (HnBlockQ5_1)];
  float out[32];

  /* Q5_0: d = 2 (0x4000); qh = 0x80000001: element 0 and element 31 have bit 4. */
  raw[0] = 0x00; raw[1] = 0x40;
  raw[2] = 0x01; raw[3] = 0x00; raw[4] = 0x00; raw[5] = 0x80;
  for (int j = 0; j < 16; j++)
    raw[6 + j] = (uint8_t) (j | (j << 4));
  hn_dequantize_row (HN_TYPE_Q5_0, raw, out, 32);
  g_assert_cmpfloat (out[0], ==, 2.0f * (16 + 0 - 16));
  g_assert_cmpfloat (out[1], ==, 2.0f * (1 - 16));
  g_assert_cmpfloat (out[15], ==, 2.0f * (15 - 16));
  g_assert_cmpfloat (out[16], ==, 2.0f * (0 - 16));
  g_assert_cmpfloat (out[30], ==, 2.0f * (14 - 16));
  g_assert_cmpfloat (out[31], ==, 2.0f * (16 + 15 - 16));

  /* Q5_1: d = 1, m = 0.5; qh = 0x00010002: elements 1 and 16 have bit 4. */
  raw[0] = 0x00; raw[1] = 0x3c; raw[2] = 0x00; raw[3] = 0x38;
  raw[4] = 0x02; raw[5] = 0x00; raw[6] = 0x01; raw[7] = 0x00;
  for (int j = 0; j < 16; j++)
    raw[8 + j] = (uint8_t) (j | ((15 - j) << 4));
  hn_dequantize_row (HN_TYPE_Q5_1, raw, out, 32);
  g_assert_cmpfloat (out[0], ==, 0.5f);
  g_assert_cmpfloat (out[1], ==, 17.5f);
  g_assert_cmpfloat (out[2], ==, 2.5f);
  g_assert_cmpfloat (out[16], ==, 15 + 16 + 0.5f);
  g_assert_cmpfloat (out[17], ==, 14 + 0.5f);
  g_assert_cmpfloat (out[31], ==, 0.5f);
}

static void
test_hand_q8 (void)
{
  uint8_t raw[sizeof (HnBlockQ8_1)];
  float out[32];

  /* Q8_0: d = 0.125 (0x3000), q = j - 16 */
  raw[0] = 0x00; raw[1] = 0x30;
  for (int j = 0; j < 32; j++)
    raw[2 + j] = (uint8_t) (int8_t) (j - 16);
  hn_dequantize_row (HN_TYPE_Q8_0, raw, out, 32);
  for (int j = 0; j < 32; j++)
    g_assert_cmpfloat (out[j], ==, 0.125f * (j - 16));

  /* Q8_1 ignores s when decoding. */
  raw[0] = 0x00; raw[1] = 0x30; raw[2] = 0x00; raw[3] = 0x7c;
  for (int j = 0; j < 32; j++)
    raw[4 + j] = (uint8_t) (int8_t) (127 - 8 * j);
  hn_dequantize_row (HN_TYPE_Q8_1, raw, out, 32);
  for (int j = 0; j < 32; j++)
    g_assert_cmpfloat (out[j], ==, 0.125f * (127 - 8 * j));

  /* Q8_K: d is a float. */
  HnBlockQ8_K k;
  memset (&k, 0, sizeof k);
  k.d = 0.0625f;
  for (int j = 0; j < 256; j++)
    k.qs[j] = (int8_t) ((j % 255) - 127);
  float outk[256];
  hn_dequantize_row (HN_TYPE_Q8_K, &k, outk, 256);
  for (int j = 0; j < 256; j++)
    g_assert_cmpfloat (outk[j], ==, 0.0625f * ((j % 255) - 127));
}

static void
test_hand_q2_k (void)
{
  uint8_t raw[84];
  memset (raw, 0, sizeof raw);
  /* scales[g] = (min = g & 15) << 4 | (scale = 15 - g) */
  for (int g = 0; g < 16; g++)
    raw[g] = (uint8_t) ((g << 4) | (15 - g));
  /* qs byte i of half h: the 4 elements 32 apart (h*128 + 32k + i) get quant (i + k) & 3 */
  for (int b = 0; b < 64; b++) {
    int i = b % 32;
    raw[16 + b] = (uint8_t) (((i + 0) & 3) | (((i + 1) & 3) << 2) | (((i + 2) & 3) << 4) | (((i + 3) & 3) << 6));
  }
  raw[80] = 0x00; raw[81] = 0x3c; /* d = 1 */
  raw[82] = 0x00; raw[83] = 0x38; /* dmin = 0.5 */
  float out[256];
  hn_dequantize_row (HN_TYPE_Q2_K, raw, out, 256);
  for (int e = 0; e < 256; e++) {
    int g = e / 16, k = (e % 128) / 32, i = e % 32;
    int q = (i + k) & 3;
    g_assert_cmpfloat (out[e], ==, 1.0f * (15 - g) * q - 0.5f * g);
  }
}

static void
test_hand_q3_k (void)
{
  uint8_t raw[110];
  memset (raw, 0, sizeof raw);
  /* hmask: bit k of byte l set when (l + k) is even => element 32k + l has its high bit */
  for (int l = 0; l < 32; l++)
    for (int k = 0; k < 8; k++)
      if (((l + k) & 1) == 0)
        raw[l] |= (uint8_t) (1 << k);
  /* qs like Q2_K: element h*128 + 32k + i low bits = (i + k) & 3 */
  for (int b = 0; b < 64; b++) {
    int i = b % 32;
    raw[32 + b] = (uint8_t) ((i & 3) | (((i + 1) & 3) << 2) | (((i + 2) & 3) << 4) | (((i + 3) & 3) << 6));
  }
  /* 6-bit scales s_g = 2g + 1 (then minus 32): low nibbles in bytes 0..7, high 2 bits in 8..11 */
  int want_scale[16];
  for (int g = 0; g < 16; g++) {
    int s = 2 * g + 1;
    want_scale[g] = s - 32;
    if (g < 8)
      raw[96 + g] |= (uint8_t) (s & 15);
    else
      raw[96 + g - 8] |= (uint8_t) ((s & 15) << 4);
    raw[96 + 8 + g % 4] |= (uint8_t) ((s >> 4) << (2 * (g / 4)));
  }
  raw[108] = 0x00; raw[109] = 0x3c; /* d = 1 */
  float out[256];
  hn_dequantize_row (HN_TYPE_Q3_K, raw, out, 256);
  for (int e = 0; e < 256; e++) {
    int g = e / 16, k = (e % 128) / 32, i = e % 32, half = e / 128;
    int low = (i + k) & 3;
    int hbit_index = half * 4 + k; /* which bit of hmask[i] */
    int high = ((i + hbit_index) & 1) == 0;
    int q = low - (high ? 0 : 4);
    g_assert_cmpfloat (out[e], ==, (float) want_scale[g] * q);
  }
}

/* Packs 8 six-bit (scale, min) pairs the way Q4_K/Q5_K store them. */
static void
pack_k4_scales (uint8_t s12[12], const int sc[8], const int mn[8])
{
  memset (s12, 0, 12);
  for (int j = 0; j < 4; j++) {
    s12[j] = (uint8_t) ((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s12[j + 4] = (uint8_t) ((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    s12[j + 8] = (uint8_t) ((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
}

static void
test_hand_q4_k_q5_k (void)
{
  const int sc[8] = { 1, 63, 17, 40, 33, 2, 60, 48 };
  const int mn[8] = { 0, 5, 63, 31, 16, 49, 3, 62 };
  float out[256];

  HnBlockQ4_K b4;
  b4.d = h (0.5f);
  b4.dmin = h (0.25f);
  pack_k4_scales (b4.scales, sc, mn);
  for (int c = 0; c < 4; c++)
    for (int l = 0; l < 32; l++)
      b4.qs[32 * c + l] = (uint8_t) (((l + c) & 15) | (((l * 3 + c) & 15) << 4));
  hn_dequantize_row (HN_TYPE_Q4_K, &b4, out, 256);
  for (int e = 0; e < 256; e++) {
    int g = e / 32, c = g / 2, l = e % 32;
    int q = (g % 2 == 0) ? ((l + c) & 15) : ((l * 3 + c) & 15);
    g_assert_cmpfloat (out[e], ==, 0.5f * sc[g] * q - 0.25f * mn[g]);
  }

  HnBlockQ5_K b5;
  b5.d = h (0.5f);
  b5.dmin = h (0.25f);
  pack_k4_scales (b5.scales, sc, mn);
  memcpy (b5.qs, b4.qs, sizeof b5.qs);
  for (int l = 0; l < 32; l++)
    b5.qh[l] = (uint8_t) (l * 37 + 11); /* arbitrary high bits */
  hn_dequantize_row (HN_TYPE_Q5_K, &b5, out, 256);
  for (int e = 0; e < 256; e++) {
    int g = e / 32, c = g / 2, l = e % 32;
    int q = (g % 2 == 0) ? ((l + c) & 15) : ((l * 3 + c) & 15);
    if ((b5.qh[l] >> g) & 1)
      q += 16;
    g_assert_cmpfloat (out[e], ==, 0.5f * sc[g] * q - 0.25f * mn[g]);
  }
}

static void
test_hand_q6_k (void)
{
  /* Choose q[e] (0..63) and scales, pack, and check x = d * scale * (q - 32). */
  int q[256];
  for (int e = 0; e < 256; e++)
    q[e] = (e * 7 + 3) & 63;
  HnBlockQ6_K b;
  memset (&b, 0, sizeof b);
  for (int half = 0; half < 2; half++) {
    for (int l = 0; l < 32; l++) {
      int base = 128 * half;
      int q1 = q[base + l], q2 = q[base + l + 32], q3 = q[base + l + 64], q4 = q[base + l + 96];
      b.ql[64 * half + l] = (uint8_t) ((q1 & 15) | ((q3 & 15) << 4));
      b.ql[64 * half + l + 32] = (uint8_t) ((q2 & 15) | ((q4 & 15) << 4));
      b.qh[32 * half + l] = (uint8_t) ((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
  for (int g = 0; g < 16; g++)
    b.scales[g] = (int8_t) (g * 17 - 128);
  b.d = h (0.125f);
  float out[256];
  hn_dequantize_row (HN_TYPE_Q6_K, &b, out, 256);
  for (int e = 0; e < 256; e++)
    g_assert_cmpfloat (out[e], ==, 0.125f * (float) (e / 16 * 17 - 128) * (q[e] - 32));
}

/* ---------------------------------------------------------------------------------- */
/* The reference decoder's output on real files.                                       */
/* ---------------------------------------------------------------------------------- */

static void
test_reference_dequant (void)
{
  const char *dir = testdata_dir ();
  if (dir == NULL) {
    g_test_skip ("test data not found");
    return;
  }
  g_autofree char *index_path = g_build_filename (dir, "dequant", "index.json", NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (json_parser_load_from_file (parser, index_path, &error));
  g_assert_no_error (error);
  JsonArray *entries = json_node_get_array (json_parser_get_root (parser));
  guint n_entries = json_array_get_length (entries);
  g_assert_cmpuint (n_entries, >, 0);

  bool seen[HN_TYPE_COUNT] = { false };
  for (guint e = 0; e < n_entries; e++) {
    JsonObject *entry = json_array_get_object_element (entries, e);
    const char *model = json_object_get_string_member (entry, "model");
    const char *tensor_name = json_object_get_string_member (entry, "tensor");
    const char *type_name = json_object_get_string_member (entry, "type");
    const char *file = json_object_get_string_member (entry, "file");
    gint64 n = json_object_get_int_member (entry, "n");

    g_autofree char *model_path = g_build_filename (dir, "models", model, NULL);
    HnError err = { 0 };
    HnGguf *gguf = hn_gguf_open (model_path, &err);
    if (gguf == NULL)
      g_error ("%s: %s", model, err.message);
    const HnGgufTensor *t = hn_gguf_find_tensor (gguf, tensor_name);
    g_assert_nonnull (t);
    g_assert_cmpstr (hn_type_name (t->type), ==, type_name);
    g_assert_true (hn_type_is_weight_type (t->type));
    seen[t->type] = true;

    int64_t count = 1;
    for (uint32_t d = 0; d < HN_GGUF_MAX_DIMS; d++)
      count *= t->ne[d];
    g_assert_cmpint (count, ==, n);

    g_autofree char *ref_path = g_build_filename (dir, "dequant", file, NULL);
    g_autofree char *ref_bytes = NULL;
    gsize ref_len = 0;
    g_assert_true (g_file_get_contents (ref_path, &ref_bytes, &ref_len, &error));
    g_assert_cmpuint (ref_len, ==, (gsize) n * sizeof (float));

    /* Row by row, as the engine will use it. */
    int64_t row_len = t->ne[0];
    size_t row_bytes = hn_type_row_bytes (t->type, row_len);
    g_assert_cmpuint (row_bytes, >, 0);
    g_autofree float *row = g_new (float, row_len);
    int64_t n_rows = n / row_len;
    int64_t mismatches = 0;
    double max_diff = 0.0;
    for (int64_t r = 0; r < n_rows; r++) {
      hn_dequantize_row (t->type, (const uint8_t *) t->data + r * row_bytes, row, row_len);
      for (int64_t i = 0; i < row_len; i++) {
        float ref;
        memcpy (&ref, ref_bytes + (r * row_len + i) * sizeof (float), sizeof ref);
        double diff = fabs ((double) row[i] - (double) ref);
        if (diff > max_diff)
          max_diff = diff;
        if (diff > 1e-6 * fmax (1.0, fabs (ref)))
          mismatches++;
      }
    }
    g_test_message ("%s %s (%s): max |diff| %g", model, tensor_name, type_name, max_diff);
    if (mismatches != 0)
      g_error ("%s %s (%s): %" G_GINT64_FORMAT " values differ (max %g)", model, tensor_name,
               type_name, mismatches, max_diff);
    hn_gguf_close (gguf);
  }
  /* The data covers every weight type except F32 (which is a copy). */
  for (size_t i = 0; i < G_N_ELEMENTS (weight_types); i++)
    if (weight_types[i] != HN_TYPE_F32)
      g_assert_true (seen[weight_types[i]]);
}

/* The quantized test models were made from the f32 model by the reference quantizer
 * (no importance matrix), so quantizing the f32 tensors again must give the same blocks. */
static void
test_reference_quantize (void)
{
  const char *dir = testdata_dir ();
  if (dir == NULL) {
    g_test_skip ("test data not found");
    return;
  }
  static const char *const models[] = { "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                        "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k" };
  g_autofree char *f32_path = g_build_filename (dir, "models", "quant-llama-v512-f32.gguf", NULL);
  HnError err = { 0 };
  HnGguf *src = hn_gguf_open (f32_path, &err);
  if (src == NULL)
    g_error ("%s", err.message);
  int64_t blocks_by_type[HN_TYPE_COUNT] = { 0 }, same_by_type[HN_TYPE_COUNT] = { 0 };
  for (size_t m = 0; m < G_N_ELEMENTS (models); m++) {
    g_autofree char *name = g_strdup_printf ("quant-llama-v512-%s.gguf", models[m]);
    g_autofree char *path = g_build_filename (dir, "models", name, NULL);
    HnGguf *q = hn_gguf_open (path, &err);
    if (q == NULL)
      g_error ("%s", err.message);
    for (int64_t i = 0; i < hn_gguf_n_tensors (q); i++) {
      const HnGgufTensor *t = hn_gguf_tensor (q, i);
      if (t->type == HN_TYPE_F32)
        continue;
      const HnGgufTensor *s = hn_gguf_find_tensor (src, t->name);
      g_assert_nonnull (s);
      g_assert_cmpuint (s->type, ==, HN_TYPE_F32);
      int64_t row_len = t->ne[0];
      size_t row_bytes = hn_type_row_bytes (t->type, row_len);
      size_t block_bytes = hn_type_block_bytes (t->type);
      int64_t n_rows = t->nbytes / row_bytes;
      g_autofree uint8_t *buf = g_malloc (row_bytes);
      for (int64_t r = 0; r < n_rows; r++) {
        hn_quantize_row (t->type, (const float *) s->data + r * row_len, buf, row_len);
        const uint8_t *want = (const uint8_t *) t->data + r * row_bytes;
        for (size_t b = 0; b < row_bytes / block_bytes; b++) {
          blocks_by_type[t->type]++;
          if (memcmp (buf + b * block_bytes, want + b * block_bytes, block_bytes) == 0)
            same_by_type[t->type]++;
        }
      }
    }
    hn_gguf_close (q);
  }
  hn_gguf_close (src);
  for (int t = 0; t < HN_TYPE_COUNT; t++)
    if (blocks_by_type[t] > 0)
      g_test_message ("%s: %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT " blocks identical",
                      hn_type_name (t), same_by_type[t], blocks_by_type[t]);
  for (int t = 0; t < HN_TYPE_COUNT; t++)
    g_assert_cmpint (same_by_type[t], ==, blocks_by_type[t]);
  for (size_t i = 0; i < G_N_ELEMENTS (weight_types); i++)
    if (weight_types[i] != HN_TYPE_F32)
      g_assert_cmpint (blocks_by_type[weight_types[i]], >, 0);
}

/* ---------------------------------------------------------------------------------- */
/* Encoders on random data and the reference dot products.                            */
/* ---------------------------------------------------------------------------------- */

/* Deterministic normal-ish samples (sum of uniforms), so failures reproduce. */
typedef struct { uint64_t state; } Rng;

static double
rng_uniform (Rng *rng)
{
  rng->state ^= rng->state << 13;
  rng->state ^= rng->state >> 7;
  rng->state ^= rng->state << 17;
  return (double) (rng->state >> 11) * (1.0 / 9007199254740992.0);
}

static float
rng_normal (Rng *rng)
{
  double s = 0.0;
  for (int i = 0; i < 12; i++)
    s += rng_uniform (rng);
  return (float) (s - 6.0);
}

static void
fill_random (Rng *rng, float *x, int64_t n, float scale)
{
  for (int64_t i = 0; i < n; i++)
    x[i] = scale * rng_normal (rng);
}

typedef struct {
  HnType type;
  double max_rel_rmse; /* bound on rmse(x - dequant(quant(x))) / rms(x) for normal data */
} RoundTripBound;

/* Typical values for normal data are about 2/3 of these bounds; they follow the bits per
 * weight (2.6 for Q2_K ... 8.5 for Q8_0). */
static const RoundTripBound round_trip_bounds[] = {
  { HN_TYPE_F32, 0.0 },
  { HN_TYPE_F16, 4e-4 },
  { HN_TYPE_BF16, 3e-3 },
  { HN_TYPE_Q8_0, 1e-2 },
  { HN_TYPE_Q8_1, 1e-2 },
  { HN_TYPE_Q8_K, 1e-2 },
  { HN_TYPE_Q6_K, 2.5e-2 },
  { HN_TYPE_Q5_1, 4.5e-2 },
  { HN_TYPE_Q5_0, 5e-2 },
  { HN_TYPE_Q5_K, 4.5e-2 },
  { HN_TYPE_Q4_1, 9e-2 },
  { HN_TYPE_Q4_0, 1.1e-1 },
  { HN_TYPE_Q4_K, 9e-2 },
  { HN_TYPE_Q3_K, 2e-1 },
  { HN_TYPE_Q2_K, 3.5e-1 },
};

static double
round_trip_rel_rmse (HnType type, const float *x, int64_t n, float *y)
{
  size_t bytes = hn_type_row_bytes (type, n);
  g_assert_cmpuint (bytes, >, 0);
  g_autofree uint8_t *q = g_malloc (bytes);
  hn_quantize_row (type, x, q, n);
  hn_dequantize_row (type, q, y, n);
  double err = 0.0, ref = 0.0;
  for (int64_t i = 0; i < n; i++) {
    g_assert_true (isfinite (y[i]));
    err += ((double) x[i] - y[i]) * ((double) x[i] - y[i]);
    ref += (double) x[i] * x[i];
  }
  return ref > 0.0 ? sqrt (err / ref) : sqrt (err);
}

static void
test_round_trip (void)
{
  const int64_t n = 256 * 33; /* odd number of blocks of every size */
  g_autofree float *x = g_new (float, n);
  g_autofree float *y = g_new (float, n);
  Rng rng = { 0x9e3779b97f4a7c15ull };
  for (size_t k = 0; k < G_N_ELEMENTS (round_trip_bounds); k++) {
    HnType type = round_trip_bounds[k].type;
    double worst = 0.0;
    for (int trial = 0; trial < 3; trial++) {
      /* Different magnitudes: the formats are scale-free except for half-float limits. */
      static const float scales[] = { 1.0f, 0.02f, 30.0f };
      fill_random (&rng, x, n, scales[trial]);
      double e = round_trip_rel_rmse (type, x, n, y);
      worst = fmax (worst, e);
    }
    g_test_message ("%s: relative rmse %.5f (bound %.5f)", hn_type_name (type), worst,
                    round_trip_bounds[k].max_rel_rmse);
    g_assert_cmpfloat (worst, <=, round_trip_bounds[k].max_rel_rmse);

    /* Zeros stay zeros; a constant row and tiny values do not produce NaN or Inf. */
    memset (x, 0, n * sizeof *x);
    g_assert_cmpfloat (round_trip_rel_rmse (type, x, n, y), ==, 0.0);
    for (int64_t i = 0; i < n; i++)
      x[i] = 0.75f;
    g_assert_cmpfloat (round_trip_rel_rmse (type, x, n, y), <=, 0.1);
    fill_random (&rng, x, n, 1e-20f);
    (void) round_trip_rel_rmse (type, x, n, y);
  }
}

/* Quantizing the activations and taking hn_vec_dot_ref must equal the dot product of
 * the dequantized rows, up to float rounding. */
static void
test_vec_dot (void)
{
  Rng rng = { 0x243f6a8885a308d3ull };
  for (size_t k = 0; k < G_N_ELEMENTS (all_known_types); k++) {
    HnType type = all_known_types[k];
    HnType act_type = hn_type_vec_dot_type (type);
    int64_t block = hn_type_block_elems (type);
    if (block == 1)
      block = 32;
    for (int64_t nb = 1; nb <= 7; nb += 2) {
      int64_t n = nb * block + (hn_type_block_elems (type) == 1 ? 3 : 0); /* odd tails for float types */
      g_autofree float *w = g_new (float, n);
      g_autofree float *a = g_new (float, n);
      g_autofree float *wd = g_new (float, n);
      g_autofree float *ad = g_new (float, n);
      fill_random (&rng, w, n, 0.05f);
      fill_random (&rng, a, n, 3.0f);
      for (int64_t i = 0; i < n; i++)
        a[i] += 0.5f; /* a non-zero mean exercises the min/offset terms */
      g_autofree uint8_t *wq = g_malloc (hn_type_row_bytes (type, n));
      g_autofree uint8_t *aq = g_malloc (hn_type_row_bytes (act_type, n));
      hn_quantize_row (type, w, wq, n);
      hn_quantize_row (act_type, a, aq, n);
      hn_dequantize_row (type, wq, wd, n);
      hn_dequantize_row (act_type, aq, ad, n);
      double expect = 0.0, magnitude = 0.0;
      for (int64_t i = 0; i < n; i++) {
        expect += (double) wd[i] * ad[i];
        magnitude += fabs ((double) wd[i] * ad[i]);
      }
      double tolerance = 2e-6 * magnitude + 1e-7;
      if (act_type == HN_TYPE_Q8_1) {
        /* Q8_1 carries d * sum(q) rounded to half precision: the weight blocks' offsets
         * multiply that rounded sum. */
        const HnBlockQ8_1 *ab = (const HnBlockQ8_1 *) aq;
        for (int64_t b = 0; b < n / 32; b++) {
          uint16_t m;
          memcpy (&m, wq + b * hn_type_block_bytes (type) + 2, 2);
          tolerance += fabs (hn_fp16_to_fp32 (m) * hn_fp16_to_fp32 (ab[b].s)) * ldexp (1.0, -10);
        }
      }
      float got = hn_vec_dot_ref (type, n, wq, aq);
      if (fabs (got - expect) > tolerance)
        g_error ("%s, n=%" G_GINT64_FORMAT ": vec_dot %.9g, dequantized dot %.9g (tolerance %.3g)",
                 hn_type_name (type), n, got, expect, tolerance);

      /* And the whole path stays close to the exact product of the float rows. */
      double exact = 0.0, exact_mag = 0.0;
      for (int64_t i = 0; i < n; i++) {
        exact += (double) w[i] * a[i];
        exact_mag += fabs ((double) w[i] * a[i]);
      }
      g_assert_cmpfloat (fabs (got - exact), <=, 0.5 * exact_mag);
    }
  }
}

/* Where the layouts of the 4- and 5-bit types put a run's parts (hn-quants.h), and where
 * the blocks of the file hold them. */
typedef struct {
  HnType layout;
  size_t mins, planes, vectors; /* in the run; 0: none */
  size_t block_min, block_qh, block_qs;
} NibbleLayout;

static const NibbleLayout nibble_layouts[] = {
  { HN_TYPE_Q4_0_GROUPED, 0, 0, 32, 0, 0, 2 },
  { HN_TYPE_Q5_0_GROUPED, 0, 32, 96, 0, 2, 6 },
  { HN_TYPE_Q4_1_GROUPED, 32, 0, 64, 2, 0, 4 },
  { HN_TYPE_Q5_1_GROUPED, 32, 64, 128, 2, 4, 8 },
};

/* The first run of a row of a 4- or 5-bit type, byte by byte where it matters: scales
 * first, then the mins, then bit m of plane byte 4j + k the fifth bit of element
 * 4(m / 2) + k (+16 for odd m) of block j, then the nibbles four bytes of a block at a
 * time. */
static void
check_nibble_run (const NibbleLayout *l, const uint8_t *file_row, const uint8_t *grouped, size_t block_bytes)
{
  for (int j = 0; j < HN_GROUP_BLOCKS; j++) {
    const uint8_t *block = file_row + (size_t) j * block_bytes;
    g_assert_cmpint (memcmp (grouped + 2 * j, block, 2), ==, 0);
    if (l->mins)
      g_assert_cmpint (memcmp (grouped + l->mins + 2 * j, block + l->block_min, 2), ==, 0);
    for (int quad = 0; quad < 4; quad++)
      g_assert_cmpint (memcmp (grouped + l->vectors + 64 * quad + 4 * j, block + l->block_qs + 4 * quad, 4), ==, 0);
    if (!l->planes)
      continue;
    const uint8_t *qh = block + l->block_qh;
    const uint32_t bits = (uint32_t) qh[0] | (uint32_t) qh[1] << 8 | (uint32_t) qh[2] << 16 | (uint32_t) qh[3] << 24;
    for (int k = 0; k < 4; k++)
      for (int m = 0; m < 8; m++)
        g_assert_cmpuint ((grouped[l->planes + 4 * j + k] >> m) & 1u, ==,
                          (bits >> ((m % 2 ? 16 : 0) + 4 * (m / 2) + k)) & 1u);
  }
}

/* The first run of a Q4_K row (two super-blocks), read back the way hn-quants.h says:
 * the d and dmin of each, sub-block j's scale and min from its byte and its nibble of
 * high bits, and its 32 codes as a Q4_0 block's bytes, four at a time in the vectors. */
static void
check_q4_k_run (const uint8_t *file_row, const uint8_t *grouped)
{
  for (int sb = 0; sb < 2; sb++) {
    const HnBlockQ4_K *b = (const HnBlockQ4_K *) (file_row + sb * sizeof (HnBlockQ4_K));
    g_assert_cmpint (memcmp (grouped + 2 * sb, &b->d, 2), ==, 0);
    g_assert_cmpint (memcmp (grouped + HN_RUN_Q4_K_DMIN_AT + 2 * sb, &b->dmin, 2), ==, 0);
  }
  for (int j = 0; j < HN_GROUP_BLOCKS; j++) {
    const HnBlockQ4_K *b = (const HnBlockQ4_K *) (file_row + (j / 8) * sizeof (HnBlockQ4_K));
    const int sub = j % 8;
    uint8_t sc, m;
    hn_q4k_scale_min (sub, b->scales, &sc, &m);
    const uint8_t packed = grouped[HN_RUN_Q4_K_SCALES_AT + j];
    const uint8_t high = (grouped[HN_RUN_Q4_K_MINS_HIGH_AT + j / 2] >> (4 * (j % 2))) & 0xF;
    g_assert_cmpuint (packed & 63, ==, sc);
    g_assert_cmpuint ((packed >> 6) | high << 2, ==, m);
    uint8_t run_sc, run_m;
    hn_q4k_run_scale_min (j, grouped, &run_sc, &run_m);
    g_assert_cmpuint (run_sc, ==, sc);
    g_assert_cmpuint (run_m, ==, m);
    for (int e = 0; e < 32; e++) {
      const uint8_t byte = grouped[HN_RUN_VECTORS_AT (0, 0) + 64 * (e % 16 / 4) + 4 * j + e % 4];
      const int code = e < 16 ? byte & 0xF : byte >> 4;
      g_assert_cmpint (code, ==, (b->qs[32 * (sub / 2) + e] >> (4 * (sub % 2))) & 0xF);
    }
  }
}

/* The types regrouped for the decode kernels: the same blocks in another order, so the
 * dequantized row and the reference dot product are bit for bit those of the file row,
 * and ungrouping gives the file bytes back.  Row lengths with no run of 16 blocks, one
 * run and a tail, and whole runs only. */
static void
test_grouped_layouts_keep_values (void)
{
  Rng rng = { 0x9e3779b97f4a7c15ull };
  const HnType layouts[] = { HN_TYPE_Q4_0_GROUPED, HN_TYPE_Q8_0_GROUPED, HN_TYPE_Q5_0_GROUPED,
                             HN_TYPE_Q4_1_GROUPED, HN_TYPE_Q5_1_GROUPED, HN_TYPE_Q4_K_GROUPED };
  /* in blocks of the type: none, one run, a run and a tail, three runs */
  const int64_t lengths_32[] = { 32 * 7, 32 * 16, 32 * 21, 32 * 48 };
  const int64_t lengths_256[] = { 256, 256 * 2, 256 * 3, 256 * 6 };
  for (gsize l = 0; l < G_N_ELEMENTS (layouts); l++)
  for (gsize i = 0; i < G_N_ELEMENTS (lengths_32); i++) {
    const HnType layout = layouts[l], file_type = hn_type_file_layout (layout);
    const HnType act_type = hn_type_vec_dot_type (file_type);
    const int64_t n = hn_type_block_elems (file_type) == 32 ? lengths_32[i] : lengths_256[i];
    const size_t bytes = hn_type_row_bytes (file_type, n);
    g_assert_cmpuint (hn_type_row_bytes (layout, n), ==, bytes);
    g_autofree float *w = g_new (float, n), *a = g_new (float, n);
    g_autofree float *file_values = g_new (float, n), *grouped_values = g_new (float, n);
    fill_random (&rng, w, n, 0.05f);
    fill_random (&rng, a, n, 2.0f);
    g_autofree uint8_t *file_row = g_malloc (bytes), *grouped = g_malloc (bytes), *back = g_malloc (bytes);
    g_autofree uint8_t *in_place = g_malloc (bytes), *quantized = g_malloc (bytes);
    g_autofree uint8_t *act = g_malloc (hn_type_row_bytes (act_type, n));
    hn_quantize_row (file_type, w, file_row, n);
    hn_quantize_row (act_type, a, act, n);
    g_assert_true (hn_type_regroup_row (layout, file_row, grouped, n));
    const gboolean has_run = n >= 32 * HN_GROUP_BLOCKS;
    g_assert_true (has_run ? memcmp (grouped, file_row, bytes) != 0 : memcmp (grouped, file_row, bytes) == 0);
    const size_t block_bytes = hn_type_block_bytes (file_type);
    for (gsize k = 0; has_run && k < G_N_ELEMENTS (nibble_layouts); k++)
      if (nibble_layouts[k].layout == layout)
        check_nibble_run (&nibble_layouts[k], file_row, grouped, block_bytes);
    if (has_run && layout == HN_TYPE_Q4_K_GROUPED)
      check_q4_k_run (file_row, grouped);
    if (has_run && layout == HN_TYPE_Q8_0_GROUPED) {
      /* the scales first, then block 1's first four quant bytes at 36 */
      g_assert_cmpint (memcmp (grouped + 2, file_row + block_bytes, 2), ==, 0);
      g_assert_cmpint (memcmp (grouped + 32 + 4, file_row + block_bytes + 2, 4), ==, 0);
      /* block 0's bytes 4..7 in vector 2, block 1's bytes 16..19 in vector 1 */
      g_assert_cmpint (memcmp (grouped + 32 + 128, file_row + 2 + 4, 4), ==, 0);
      g_assert_cmpint (memcmp (grouped + 32 + 64 + 4, file_row + block_bytes + 2 + 16, 4), ==, 0);
    }
    g_assert_true (hn_type_ungroup_row (layout, grouped, back, n));
    g_assert_cmpint (memcmp (back, file_row, bytes), ==, 0);
    memcpy (in_place, file_row, bytes);
    hn_type_regroup_row (layout, in_place, in_place, n);
    g_assert_cmpint (memcmp (in_place, grouped, bytes), ==, 0);
    hn_quantize_row (layout, w, quantized, n);
    g_assert_cmpint (memcmp (quantized, grouped, bytes), ==, 0);
    hn_dequantize_row (file_type, file_row, file_values, n);
    hn_dequantize_row (layout, grouped, grouped_values, n);
    g_assert_cmpint (memcmp (file_values, grouped_values, sizeof (float) * (size_t) n), ==, 0);
    const float file_dot = hn_vec_dot_ref (file_type, n, file_row, act);
    const float grouped_dot = hn_vec_dot_ref (layout, n, grouped, act);
    g_assert_cmpint (memcmp (&file_dot, &grouped_dot, sizeof file_dot), ==, 0);
    g_assert_cmpint (hn_type_vec_dot_type (layout), ==, act_type);
    /* an in-memory layout only: never a type a file may declare */
    g_assert_false (hn_type_is_weight_type (layout));
  }
}

/* The table of regrouped layouts that the loader, the kernels' activation preparation,
 * the decode choice and the Vulkan upload ask: each layout maps back to its file type,
 * keeps the row length, is no file type itself, and converts rows as its own functions
 * do; a type without a layout is its own file layout and converts nothing. */
static void
test_regrouped_layouts (void)
{
  int layouts = 0;
  for (int t = 0; t < HN_TYPE_COUNT; t++) {
    const HnType layout = hn_type_regrouped ((HnType) t);
    if (layout == HN_TYPE_COUNT) {
      /* a file type without a layout has no runs; a layout has no layout of its own */
      if (hn_type_file_layout ((HnType) t) == (HnType) t)
        g_assert_cmpint (hn_type_group_elems ((HnType) t), ==, 0);
      continue;
    }
    layouts++;
    g_assert_true (hn_type_is_weight_type ((uint32_t) t));
    g_assert_false (hn_type_is_weight_type ((uint32_t) layout));
    g_assert_cmpint (hn_type_file_layout (layout), ==, t);
    g_assert_cmpint (hn_type_file_layout ((HnType) t), ==, t);
    g_assert_cmpint (hn_type_vec_dot_type (layout), ==, hn_type_vec_dot_type ((HnType) t));
    const int64_t run = hn_type_group_elems (layout);
    g_assert_cmpint (run, >, 0);
    g_assert_cmpint (run % hn_type_block_elems ((uint32_t) t), ==, 0);
    g_assert_cmpuint (hn_type_row_bytes (layout, 3 * run), ==, hn_type_row_bytes ((uint32_t) t, 3 * run));
  }
  g_assert_cmpint (layouts, >=, 6);
  g_assert_cmpint (hn_type_regrouped (HN_TYPE_Q4_0), ==, HN_TYPE_Q4_0_GROUPED);
  g_assert_cmpint (hn_type_group_elems (HN_TYPE_Q4_0_GROUPED), ==, 32 * HN_GROUP_BLOCKS);
  g_assert_cmpint (hn_type_regrouped (HN_TYPE_Q4_K), ==, HN_TYPE_Q4_K_GROUPED);
  g_assert_cmpint (hn_type_group_elems (HN_TYPE_Q4_K_GROUPED), ==, 32 * HN_GROUP_BLOCKS);
  g_assert_cmpint (hn_type_file_layout (HN_TYPE_Q4_K), ==, HN_TYPE_Q4_K);
  g_assert_cmpint (hn_type_regrouped (HN_TYPE_Q5_K), ==, HN_TYPE_COUNT);
  g_assert_cmpint (hn_type_group_elems (HN_TYPE_Q4_0), ==, 0);

  g_assert_cmpint (hn_type_regrouped (HN_TYPE_Q8_0), ==, HN_TYPE_Q8_0_GROUPED);
  g_assert_cmpint (hn_type_group_elems (HN_TYPE_Q8_0_GROUPED), ==, 32 * HN_GROUP_BLOCKS);
  g_assert_cmpint (hn_type_regrouped (HN_TYPE_Q5_0), ==, HN_TYPE_Q5_0_GROUPED);
  g_assert_cmpint (hn_type_group_elems (HN_TYPE_Q5_0_GROUPED), ==, 32 * HN_GROUP_BLOCKS);
  g_assert_cmpint (hn_type_regrouped (HN_TYPE_Q4_1), ==, HN_TYPE_Q4_1_GROUPED);
  g_assert_cmpint (hn_type_regrouped (HN_TYPE_Q5_1), ==, HN_TYPE_Q5_1_GROUPED);
  g_assert_cmpint (hn_type_regrouped (HN_TYPE_Q6_K), ==, HN_TYPE_COUNT);

  /* a type that is no layout converts nothing */
  Rng rng = { 0x2545f4914f6cdd1dull };
  const int64_t n = 32 * 37; /* two runs and a tail */
  const size_t bytes = hn_type_row_bytes (HN_TYPE_Q4_0, n);
  g_autofree float *w = g_new (float, n);
  fill_random (&rng, w, n, 0.05f);
  g_autofree uint8_t *file_row = g_malloc (bytes), *untouched = g_malloc (bytes);
  hn_quantize_row (HN_TYPE_Q4_0, w, file_row, n);
  memset (untouched, 0xa5, bytes);
  g_assert_false (hn_type_regroup_row (HN_TYPE_Q4_0, file_row, untouched, n));
  g_assert_false (hn_type_ungroup_row (HN_TYPE_Q8_0, file_row, untouched, n));
  for (size_t i = 0; i < bytes; i++)
    g_assert_cmpuint (untouched[i], ==, 0xa5);
}

/* A Q4_0 x Q8_0 block pair worked out by hand: weights d=0.5, q-8 = j-8 (low) and 7-j
 * (high); activations d=0.25, q=1 everywhere.  sum_j (j-8) + (7-j) = -16 over 16 pairs,
 * so the dot is 0.5 * 0.25 * -16 = -2. */
static void
test_vec_dot_hand (void)
{
  HnBlockQ4_0 w[3];
  HnBlockQ8_0 a[3];
  for (int b = 0; b < 3; b++) {
    w[b].d = h (0.5f);
    for (int j = 0; j < 16; j++)
      w[b].qs[j] = (uint8_t) (j | ((15 - j) << 4));
    a[b].d = h (0.25f);
    for (int j = 0; j < 32; j++)
      a[b].qs[j] = 1;
  }
  g_assert_cmpfloat (hn_vec_dot_ref (HN_TYPE_Q4_0, 96, w, a), ==, -6.0f);

  /* Q6_K x Q8_K: all weight quants 33 (value +1), scales 2, d = 1; activations q = 3,
   * d = 0.5: 256 * (1 * 2 * 1) * (3 * 0.5) = 768. */
  HnBlockQ6_K w6;
  memset (w6.ql, 0x11, sizeof w6.ql); /* low nibbles 1 */
  memset (w6.qh, 0xaa, sizeof w6.qh); /* high bits 2 -> 32 + 1 = 33 */
  memset (w6.scales, 2, sizeof w6.scales);
  w6.d = h (1.0f);
  HnBlockQ8_K a8;
  a8.d = 0.5f;
  memset (a8.qs, 3, sizeof a8.qs);
  for (int g = 0; g < 16; g++)
    a8.bsums[g] = 48;
  g_assert_cmpfloat (hn_vec_dot_ref (HN_TYPE_Q6_K, 256, &w6, &a8), ==, 768.0f);

  /* F32: double accumulation keeps 1 + 1e-8 * many terms. */
  float x[4] = { 1.0f, 2.0f, -3.0f, 0.5f }, y[4] = { 4.0f, 0.25f, 1.0f, -2.0f };
  g_assert_cmpfloat (hn_vec_dot_ref (HN_TYPE_F32, 4, x, y), ==, 4.0f + 0.5f - 3.0f - 1.0f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/quants/traits", test_traits);
  g_test_add_func ("/quants/half-to-float", test_half_to_float);
  g_test_add_func ("/quants/hand/f16-bf16-f32", test_hand_f16_bf16);
  g_test_add_func ("/quants/hand/q4_0-q4_1", test_hand_q4_0_q4_1);
  g_test_add_func ("/quants/grouped-layouts-keep-values", test_grouped_layouts_keep_values);
  g_test_add_func ("/quants/regrouped-layouts", test_regrouped_layouts);
  g_test_add_func ("/quants/hand/q5_0-q5_1", test_hand_q5);
  g_test_add_func ("/quants/hand/q8", test_hand_q8);
  g_test_add_func ("/quants/hand/q2_k", test_hand_q2_k);
  g_test_add_func ("/quants/hand/q3_k", test_hand_q3_k);
  g_test_add_func ("/quants/hand/q4_k-q5_k", test_hand_q4_k_q5_k);
  g_test_add_func ("/quants/hand/q6_k", test_hand_q6_k);
  g_test_add_func ("/quants/reference-dequant", test_reference_dequant);
  g_test_add_func ("/quants/reference-quantize", test_reference_quantize);
  g_test_add_func ("/quants/round-trip", test_round_trip);
  g_test_add_func ("/quants/vec-dot", test_vec_dot);
  g_test_add_func ("/quants/vec-dot-hand", test_vec_dot_hand);
  return g_test_run ();
}
