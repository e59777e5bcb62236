/* Tests for the GGUF writer and model quantization (hn-gguf-writer, hn-quantize and
 * `hanashi-cli quantize`).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-gguf-writer.h"
#include "hn-gguf.h"
#include "hn-quantize.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "cli-run.h"

static const char *
testdata_dir (void)
{
  const char *dir = g_getenv ("HANASHI_TESTDATA");
  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    return NULL;
  return dir;
}

static char *
model_path (const char *name)
{
  return g_build_filename (testdata_dir (), "models", name, NULL);
}

/* Removes a scratch directory and everything in it (flat). */
static void
remove_dir (const char *dir)
{
  GDir *d = g_dir_open (dir, 0, NULL);
  if (d != NULL) {
    const char *name;
    while ((name = g_dir_read_name (d)) != NULL) {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_remove (path);
    }
    g_dir_close (d);
  }
  g_rmdir (dir);
}

static guint
count_dir_entries (const char *dir)
{
  guint n = 0;
  GDir *d = g_dir_open (dir, 0, NULL);
  g_assert_nonnull (d);
  while (g_dir_read_name (d) != NULL)
    n++;
  g_dir_close (d);
  return n;
}

/* ---------------------------------------------------------------------------------- */
/* Writer                                                                             */
/* ---------------------------------------------------------------------------------- */

static void
test_writer_round_trip (void)
{
  g_autofree char *dir = g_dir_make_tmp ("hanashi-writer-XXXXXX", NULL);
  g_assert_nonnull (dir);
  g_autofree char *path = g_build_filename (dir, "out.gguf", NULL);
  g_autofree char *copy_path = g_build_filename (dir, "copy.gguf", NULL);
  HnError err = { 0 };

  HnGgufWriter *w = hn_gguf_writer_new (&err);
  g_assert_nonnull (w);
  g_assert_true (hn_gguf_writer_set_alignment (w, 64, &err));
  g_assert_true (hn_gguf_writer_set_str (w, "general.architecture", "llama", &err));
  g_assert_true (hn_gguf_writer_set_u32 (w, "llama.block_count", 7, &err));
  g_assert_true (hn_gguf_writer_set_i32 (w, "test.negative", -5, &err));
  g_assert_true (hn_gguf_writer_set_u64 (w, "test.big", G_GUINT64_CONSTANT (1) << 40, &err));
  g_assert_true (hn_gguf_writer_set_f32 (w, "test.float", 0.125f, &err));
  g_assert_true (hn_gguf_writer_set_bool (w, "test.flag", true, &err));
  const float scores[3] = { -1.0f, 0.5f, 2.0f };
  g_assert_true (hn_gguf_writer_set_array (w, "test.scores", HN_GGUF_FLOAT32, scores, 3, &err));
  const char *const tokens[] = { "<s>", "", "h\xc3\xa9llo" };
  g_assert_true (hn_gguf_writer_set_str_array (w, "test.tokens", tokens, 3, &err));
  /* Setting a key again replaces its value. */
  g_assert_true (hn_gguf_writer_set_u32 (w, "llama.block_count", 4, &err));
  g_assert_true (hn_gguf_writer_set_str (w, "test.removed", "x", &err));
  hn_gguf_writer_remove_kv (w, "test.removed");

  const int64_t ne_a[2] = { 64, 3 };
  const int64_t ne_b[1] = { 5 };
  const int64_t ne_c[2] = { 256, 2 };
  g_assert_true (hn_gguf_writer_add_tensor (w, "a.weight", HN_TYPE_Q8_0, 2, ne_a, &err));
  g_assert_true (hn_gguf_writer_add_tensor (w, "b.bias", HN_TYPE_F32, 1, ne_b, &err));
  g_assert_true (hn_gguf_writer_add_tensor (w, "c.weight", HN_TYPE_Q4_K, 2, ne_c, &err));
  g_assert_cmpuint (hn_gguf_writer_tensor_nbytes (w, 0), ==, 3 * 2 * 34);
  g_assert_cmpuint (hn_gguf_writer_tensor_nbytes (w, 1), ==, 20);
  g_assert_cmpuint (hn_gguf_writer_tensor_nbytes (w, 2), ==, 2 * 144);

  /* Declaration errors. */
  const int64_t bad_row[2] = { 48, 2 };
  g_assert_false (hn_gguf_writer_add_tensor (w, "bad.weight", HN_TYPE_Q8_0, 2, bad_row, &err));
  g_assert_nonnull (strstr (err.message, "not a multiple"));
  g_assert_false (hn_gguf_writer_add_tensor (w, "a.weight", HN_TYPE_F32, 1, ne_b, &err));
  g_assert_nonnull (strstr (err.message, "twice"));
  g_assert_false (hn_gguf_writer_add_tensor (w, "x", 16 /* IQ2_XXS */, 1, ne_b, &err));
  const int64_t zero[1] = { 0 };
  g_assert_false (hn_gguf_writer_add_tensor (w, "x", HN_TYPE_F32, 1, zero, &err));
  char long_name[80];
  memset (long_name, 'n', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  g_assert_false (hn_gguf_writer_add_tensor (w, long_name, HN_TYPE_F32, 1, ne_b, &err));

  uint8_t a_data[3 * 2 * 34], c_data[2 * 144];
  float b_data[5] = { 1, 2, 3, 4, 5 };
  for (size_t i = 0; i < sizeof a_data; i++)
    a_data[i] = (uint8_t) (i * 7);
  for (size_t i = 0; i < sizeof c_data; i++)
    c_data[i] = (uint8_t) (i * 13 + 1);

  g_assert_true (hn_gguf_writer_begin (w, path, &err));
  /* Pieces that straddle tensors. */
  g_assert_true (hn_gguf_writer_write (w, a_data, 100, &err));
  g_assert_true (hn_gguf_writer_write (w, a_data + 100, sizeof a_data - 100, &err));
  g_assert_true (hn_gguf_writer_write (w, b_data, sizeof b_data, &err));
  g_assert_true (hn_gguf_writer_write (w, c_data, sizeof c_data, &err));
  g_assert_false (hn_gguf_writer_write (w, c_data, 1, &err)); /* too much */
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));   /* not before finish */
  g_assert_true (hn_gguf_writer_finish (w, &err));
  hn_gguf_writer_free (w);
  g_assert_cmpuint (count_dir_entries (dir), ==, 1); /* no temporary left behind */

  HnGguf *g = hn_gguf_open (path, &err);
  if (g == NULL)
    g_error ("%s", err.message);
  g_assert_cmpuint (hn_gguf_version (g), ==, 3);
  g_assert_cmpuint (hn_gguf_alignment (g), ==, 64);
  uint32_t u32 = 0;
  g_assert_true (hn_gguf_get_u32 (g, "llama.block_count", &u32, &err));
  g_assert_cmpuint (u32, ==, 4);
  g_assert_true (hn_gguf_get_u32 (g, "general.alignment", &u32, &err));
  g_assert_cmpuint (u32, ==, 64);
  int64_t i64 = 0;
  g_assert_true (hn_gguf_get_i64 (g, "test.negative", &i64, &err));
  g_assert_cmpint (i64, ==, -5);
  g_assert_true (hn_gguf_get_i64 (g, "test.big", &i64, &err));
  g_assert_cmpint (i64, ==, G_GINT64_CONSTANT (1) << 40);
  float f = 0;
  g_assert_true (hn_gguf_get_f32 (g, "test.float", &f, &err));
  g_assert_cmpfloat (f, ==, 0.125f);
  bool flag = false;
  g_assert_true (hn_gguf_get_bool (g, "test.flag", &flag, &err));
  g_assert_true (flag);
  HnStr s;
  g_assert_true (hn_gguf_get_str (g, "general.architecture", &s, &err));
  g_assert_true (hn_str_eq (s, "llama"));
  g_assert_cmpint (hn_gguf_find_key (g, "test.removed"), ==, -1);
  HnGgufArray arr;
  g_assert_true (hn_gguf_get_array (g, "test.scores", &arr, &err));
  g_assert_cmpuint (arr.count, ==, 3);
  g_assert_cmpfloat (hn_gguf_array_float (&arr, 1), ==, 0.5);
  g_assert_true (hn_gguf_get_array (g, "test.tokens", &arr, &err));
  g_assert_cmpint (arr.type, ==, HN_GGUF_STRING);
  HnStr strs[3];
  hn_gguf_array_strings (&arr, strs);
  g_assert_true (hn_str_eq (strs[0], "<s>"));
  g_assert_cmpuint (strs[1].len, ==, 0);
  g_assert_true (hn_str_eq (strs[2], "h\xc3\xa9llo"));

  g_assert_cmpint (hn_gguf_n_tensors (g), ==, 3);
  const HnGgufTensor *ta = hn_gguf_find_tensor (g, "a.weight");
  const HnGgufTensor *tb = hn_gguf_find_tensor (g, "b.bias");
  const HnGgufTensor *tc = hn_gguf_find_tensor (g, "c.weight");
  g_assert_nonnull (ta);
  g_assert_nonnull (tb);
  g_assert_nonnull (tc);
  g_assert_cmpuint (ta->type, ==, HN_TYPE_Q8_0);
  g_assert_cmpint (ta->ne[0], ==, 64);
  g_assert_cmpint (ta->ne[1], ==, 3);
  g_assert_cmpuint (tb->n_dims, ==, 1);
  g_assert_cmpuint (tc->type, ==, HN_TYPE_Q4_K);
  g_assert_cmpuint (ta->offset % 64, ==, 0);
  g_assert_cmpuint (tb->offset % 64, ==, 0);
  g_assert_cmpuint (tc->offset % 64, ==, 0);
  g_assert_cmpmem (ta->data, ta->nbytes, a_data, sizeof a_data);
  g_assert_cmpmem (tb->data, tb->nbytes, b_data, sizeof b_data);
  g_assert_cmpmem (tc->data, tc->nbytes, c_data, sizeof c_data);

  /* Copying every key of an opened file reproduces it. */
  HnGgufWriter *w2 = hn_gguf_writer_new (&err);
  g_assert_true (hn_gguf_writer_copy_kvs (w2, g, &err));
  g_assert_true (hn_gguf_writer_set_alignment (w2, hn_gguf_alignment (g), &err));
  for (int64_t i = 0; i < hn_gguf_n_tensors (g); i++) {
    const HnGgufTensor *t = hn_gguf_tensor (g, i);
    g_assert_true (hn_gguf_writer_add_tensor (w2, t->name, t->type, t->n_dims, t->ne, &err));
  }
  g_assert_true (hn_gguf_writer_begin (w2, copy_path, &err));
  for (int64_t i = 0; i < hn_gguf_n_tensors (g); i++)
    g_assert_true (hn_gguf_writer_write (w2, hn_gguf_tensor (g, i)->data, hn_gguf_tensor (g, i)->nbytes, &err));
  g_assert_true (hn_gguf_writer_finish (w2, &err));
  hn_gguf_writer_free (w2);
  g_autofree char *orig_bytes = NULL, *copy_bytes = NULL;
  gsize orig_len = 0, copy_len = 0;
  g_assert_true (g_file_get_contents (path, &orig_bytes, &orig_len, NULL));
  g_assert_true (g_file_get_contents (copy_path, &copy_bytes, &copy_len, NULL));
  g_assert_cmpmem (orig_bytes, orig_len, copy_bytes, copy_len);
  hn_gguf_close (g);

  /* An unfinished writer leaves neither the file nor a temporary behind. */
  g_autofree char *unfinished = g_build_filename (dir, "unfinished.gguf", NULL);
  HnGgufWriter *w3 = hn_gguf_writer_new (&err);
  g_assert_true (hn_gguf_writer_add_tensor (w3, "b.bias", HN_TYPE_F32, 1, ne_b, &err));
  g_assert_true (hn_gguf_writer_begin (w3, unfinished, &err));
  g_assert_true (hn_gguf_writer_write (w3, b_data, 8, &err));
  g_assert_false (hn_gguf_writer_finish (w3, &err));
  g_assert_nonnull (strstr (err.message, "missing"));
  hn_gguf_writer_free (w3);
  g_assert_false (g_file_test (unfinished, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (count_dir_entries (dir), ==, 2);

  /* A directory that does not exist is a clear error. */
  HnGgufWriter *w4 = hn_gguf_writer_new (&err);
  g_autofree char *nowhere = g_build_filename (dir, "missing-dir", "x.gguf", NULL);
  g_assert_false (hn_gguf_writer_begin (w4, nowhere, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_IO);
  hn_gguf_writer_free (w4);

  remove_dir (dir);
}

/* ---------------------------------------------------------------------------------- */
/* Quantization                                                                       */
/* ---------------------------------------------------------------------------------- */

static bool
files_equal (const char *a, const char *b)
{
  g_autofree char *da = NULL, *db = NULL;
  gsize la = 0, lb = 0;
  g_assert_true (g_file_get_contents (a, &da, &la, NULL));
  g_assert_true (g_file_get_contents (b, &db, &lb, NULL));
  return la == lb && memcmp (da, db, la) == 0;
}

/* The reference tool made the quantized test models from the f32 one; our quantizer
 * must produce the same files, byte for byte (same mixes, same blocks, same layout). */
static void
test_quantize_matches_reference_files (void)
{
  if (testdata_dir () == NULL) {
    g_test_skip ("test data not found");
    return;
  }
  static const char *const names[] = { "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                       "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k" };
  g_autofree char *dir = g_dir_make_tmp ("hanashi-quantize-XXXXXX", NULL);
  g_autofree char *src = model_path ("quant-llama-v512-f32.gguf");
  g_autofree char *out = g_build_filename (dir, "out.gguf", NULL);
  for (size_t i = 0; i < G_N_ELEMENTS (names); i++) {
    const HnQuantizeTarget *target = hn_quantize_target_find (names[i]);
    g_assert_nonnull (target);
    HnError err = { 0 };
    if (!hn_quantize_model (src, out, target, 2, NULL, NULL, &err))
      g_error ("%s: %s", names[i], err.message);
    g_autofree char *file = g_strdup_printf ("quant-llama-v512-%s.gguf", names[i]);
    g_autofree char *ref = model_path (file);
    if (!files_equal (out, ref))
      g_error ("quantizing to %s does not reproduce %s", target->name, file);
  }
  remove_dir (dir);
}

typedef struct {
  const char *target;
  HnType type;
  double bound; /* relative rmse of the dequantized tensor vs the original */
} ErrorBound;

static double
type_error_bound (HnType type)
{
  switch (type) {
  case HN_TYPE_F32: return 0.0;
  case HN_TYPE_F16: return 1e-3;
  case HN_TYPE_BF16: return 5e-3;
  case HN_TYPE_Q8_0: return 1e-2;
  case HN_TYPE_Q6_K: return 3e-2;
  case HN_TYPE_Q5_0: case HN_TYPE_Q5_1: case HN_TYPE_Q5_K: return 6e-2;
  case HN_TYPE_Q4_0: case HN_TYPE_Q4_1: case HN_TYPE_Q4_K: return 1.2e-1;
  case HN_TYPE_Q3_K: return 2.2e-1;
  case HN_TYPE_Q2_K: return 4e-1;
  default: g_assert_not_reached ();
  }
}

/* Quantizes `src_name` to `target_name` and checks every tensor: 1-D ones copied, 2-D
 * ones decode to the original within their type's error, and each row's blocks are
 * exactly what hn_quantize_row makes. */
static void
check_quantized_model (const char *src_name, const char *target_name, const HnType *expect_types,
                       const char *const *expect_names, size_t n_expect)
{
  g_autofree char *dir = g_dir_make_tmp ("hanashi-quantize-XXXXXX", NULL);
  g_autofree char *src_path = model_path (src_name);
  g_autofree char *out_path = g_build_filename (dir, "out.gguf", NULL);
  HnError err = { 0 };
  const HnQuantizeTarget *target = hn_quantize_target_find (target_name);
  g_assert_nonnull (target);
  if (!hn_quantize_model (src_path, out_path, target, 1, NULL, NULL, &err))
    g_error ("%s: %s", target_name, err.message);

  HnGguf *src = hn_gguf_open (src_path, &err);
  HnGguf *out = hn_gguf_open (out_path, &err);
  g_assert_nonnull (src);
  g_assert_nonnull (out);
  uint32_t file_type = 0;
  g_assert_true (hn_gguf_get_u32 (out, "general.file_type", &file_type, &err));
  g_assert_cmpuint (file_type, ==, target->file_type);
  g_assert_cmpint (hn_gguf_n_tensors (out), ==, hn_gguf_n_tensors (src));
  g_assert_cmpint (hn_gguf_n_kv (out), >=, hn_gguf_n_kv (src));

  for (size_t k = 0; k < n_expect; k++) {
    const HnGgufTensor *t = hn_gguf_find_tensor (out, expect_names[k]);
    g_assert_nonnull (t);
    if (t->type != (uint32_t) expect_types[k])
      g_error ("%s %s: type %s, expected %s", target_name, t->name, hn_type_name (t->type),
               hn_type_name (expect_types[k]));
  }

  for (int64_t i = 0; i < hn_gguf_n_tensors (src); i++) {
    const HnGgufTensor *s = hn_gguf_tensor (src, i);
    const HnGgufTensor *q = hn_gguf_find_tensor (out, s->name);
    g_assert_nonnull (q);
    for (int d = 0; d < HN_GGUF_MAX_DIMS; d++)
      g_assert_cmpint (q->ne[d], ==, s->ne[d]);
    g_assert_cmpuint (s->type, ==, HN_TYPE_F32);
    if (s->ne[1] == 1) {
      g_assert_cmpuint (q->type, ==, HN_TYPE_F32);
      g_assert_cmpmem (q->data, q->nbytes, s->data, s->nbytes);
      continue;
    }
    int64_t row_len = s->ne[0];
    int64_t n_rows = (int64_t) (s->nbytes / (row_len * sizeof (float)));
    size_t row_bytes = hn_type_row_bytes (q->type, row_len);
    g_assert_cmpuint (row_bytes * n_rows, ==, q->nbytes);
    g_autofree uint8_t *mine = g_malloc (row_bytes);
    g_autofree float *decoded = g_new (float, row_len);
    double err2 = 0.0, ref2 = 0.0;
    for (int64_t r = 0; r < n_rows; r++) {
      const float *x = (const float *) s->data + r * row_len;
      const uint8_t *blocks = (const uint8_t *) q->data + r * row_bytes;
      hn_quantize_row (q->type, x, mine, row_len);
      g_assert_cmpmem (mine, row_bytes, blocks, row_bytes);
      hn_dequantize_row (q->type, blocks, decoded, row_len);
      for (int64_t j = 0; j < row_len; j++) {
        err2 += ((double) decoded[j] - x[j]) * ((double) decoded[j] - x[j]);
        ref2 += (double) x[j] * x[j];
      }
    }
    double rel = sqrt (err2 / fmax (ref2, 1e-30));
    g_test_message ("%s %s %s: relative rmse %.4f", target_name, s->name, hn_type_name (q->type), rel);
    g_assert_cmpfloat (rel, <=, type_error_bound (q->type));
  }
  hn_gguf_close (src);
  hn_gguf_close (out);
  remove_dir (dir);
}

static void
test_quantize_q8_0 (void)
{
  if (testdata_dir () == NULL) {
    g_test_skip ("test data not found");
    return;
  }
  const char *const names[] = { "output.weight", "token_embd.weight", "blk.0.attn_q.weight", "blk.3.ffn_down.weight" };
  const HnType types[] = { HN_TYPE_Q8_0, HN_TYPE_Q8_0, HN_TYPE_Q8_0, HN_TYPE_Q8_0 };
  check_quantized_model ("quant-llama-v512-f32.gguf", "Q8_0", types, names, G_N_ELEMENTS (names));
}

static void
test_quantize_q4_k_m (void)
{
  if (testdata_dir () == NULL) {
    g_test_skip ("test data not found");
    return;
  }
  /* 4 layers: the "more bits" layers are 2 and 3. */
  const char *const names[] = { "output.weight", "token_embd.weight", "blk.0.attn_v.weight",
                                "blk.2.attn_v.weight", "blk.3.attn_v.weight", "blk.1.ffn_down.weight",
                                "blk.2.ffn_down.weight", "blk.0.ffn_up.weight", "blk.3.attn_output.weight" };
  const HnType types[] = { HN_TYPE_Q6_K, HN_TYPE_Q4_K, HN_TYPE_Q4_K, HN_TYPE_Q6_K, HN_TYPE_Q6_K,
                           HN_TYPE_Q4_K, HN_TYPE_Q6_K, HN_TYPE_Q4_K, HN_TYPE_Q4_K };
  check_quantized_model ("quant-llama-v512-f32.gguf", "Q4_K_M", types, names, G_N_ELEMENTS (names));
}

static void
test_quantize_plain_k_types (void)
{
  if (testdata_dir () == NULL) {
    g_test_skip ("test data not found");
    return;
  }
  const char *const names[] = { "output.weight", "token_embd.weight", "blk.2.ffn_down.weight" };
  const HnType q3[] = { HN_TYPE_Q6_K, HN_TYPE_Q3_K, HN_TYPE_Q3_K };
  const HnType q4[] = { HN_TYPE_Q6_K, HN_TYPE_Q4_K, HN_TYPE_Q4_K };
  const HnType q5[] = { HN_TYPE_Q6_K, HN_TYPE_Q5_K, HN_TYPE_Q5_K };
  check_quantized_model ("quant-llama-v512-f32.gguf", "Q3_K", q3, names, 3);
  check_quantized_model ("quant-llama-v512-f32.gguf", "Q4_K", q4, names, 3);
  check_quantized_model ("quant-llama-v512-f32.gguf", "q5_k", q5, names, 3);
}

/* stories260K has rows of 64 (not a k-quant block) and 172 (not even a 32-block). */
static void
test_quantize_fallback_types (void)
{
  if (testdata_dir () == NULL) {
    g_test_skip ("test data not found");
    return;
  }
  const char *const names[] = { "output.weight", "token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_down.weight" };
  const HnType q4km[] = { HN_TYPE_Q8_0, HN_TYPE_Q5_0, HN_TYPE_Q5_0, HN_TYPE_F16 };
  const HnType q5km[] = { HN_TYPE_Q8_0, HN_TYPE_Q5_1, HN_TYPE_Q5_1, HN_TYPE_F16 };
  const HnType q3km[] = { HN_TYPE_Q8_0, HN_TYPE_Q4_0, HN_TYPE_Q4_0, HN_TYPE_F16 };
  check_quantized_model ("stories260K-f32.gguf", "Q4_K_M", q4km, names, G_N_ELEMENTS (names));
  check_quantized_model ("stories260K-f32.gguf", "Q5_K_M", q5km, names, G_N_ELEMENTS (names));
  check_quantized_model ("stories260K-f32.gguf", "Q3_K_M", q3km, names, G_N_ELEMENTS (names));
}

/* Requantizing a quantized model decodes and encodes again; same-type tensors are copied. */
static void
test_requantize (void)
{
  if (testdata_dir () == NULL) {
    g_test_skip ("test data not found");
    return;
  }
  g_autofree char *dir = g_dir_make_tmp ("hanashi-quantize-XXXXXX", NULL);
  g_autofree char *src_path = model_path ("quant-llama-v512-q8_0.gguf");
  g_autofree char *out_path = g_build_filename (dir, "out.gguf", NULL);
  HnError err = { 0 };
  g_assert_true (hn_quantize_model (src_path, out_path, hn_quantize_target_find ("Q8_0"), 1, NULL, NULL, &err));
  g_assert_true (files_equal (src_path, out_path));
  g_assert_true (hn_quantize_model (src_path, out_path, hn_quantize_target_find ("F16"), 1, NULL, NULL, &err));
  HnGguf *src = hn_gguf_open (src_path, &err);
  HnGguf *out = hn_gguf_open (out_path, &err);
  const HnGgufTensor *a = hn_gguf_find_tensor (src, "blk.1.ffn_up.weight");
  const HnGgufTensor *b = hn_gguf_find_tensor (out, "blk.1.ffn_up.weight");
  g_assert_cmpuint (b->type, ==, HN_TYPE_F16);
  int64_t n = a->ne[0];
  g_autofree float *x = g_new (float, n);
  g_autofree float *y = g_new (float, n);
  hn_dequantize_row (HN_TYPE_Q8_0, a->data, x, n);
  hn_dequantize_row (HN_TYPE_F16, b->data, y, n);
  for (int64_t i = 0; i < n; i++)
    g_assert_cmpfloat (fabsf (x[i] - y[i]), <=, fabsf (x[i]) * 1e-3f);
  hn_gguf_close (src);
  hn_gguf_close (out);
  remove_dir (dir);
}

/* A model holding NaN is refused with the tensor's name, and nothing is written. */
static void
test_quantize_rejects_nan (void)
{
  g_autofree char *dir = g_dir_make_tmp ("hanashi-quantize-XXXXXX", NULL);
  g_autofree char *in = g_build_filename (dir, "in.gguf", NULL);
  g_autofree char *out = g_build_filename (dir, "out.gguf", NULL);
  HnError err = { 0 };
  HnGgufWriter *w = hn_gguf_writer_new (&err);
  const int64_t ne[2] = { 32, 2 };
  g_assert_true (hn_gguf_writer_add_tensor (w, "blk.0.attn_q.weight", HN_TYPE_F32, 2, ne, &err));
  float data[64] = { 0 };
  data[40] = NAN;
  g_assert_true (hn_gguf_writer_begin (w, in, &err));
  g_assert_true (hn_gguf_writer_write (w, data, sizeof data, &err));
  g_assert_true (hn_gguf_writer_finish (w, &err));
  hn_gguf_writer_free (w);
  g_assert_false (hn_quantize_model (in, out, hn_quantize_target_find ("Q4_0"), 1, NULL, NULL, &err));
  g_assert_nonnull (strstr (err.message, "blk.0.attn_q.weight"));
  g_assert_false (g_file_test (out, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (count_dir_entries (dir), ==, 1);
  remove_dir (dir);
}

static void
assert_cli_error (const char *const *args, const char *needle)
{
  CliRun r = cli_run_argv (args);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_true (g_str_has_prefix (r.err, "hanashi-cli: error: "));
  g_assert_nonnull (strstr (r.err, needle));
  /* exactly one line */
  g_assert_cmpint (strchr (r.err, '\n') - r.err, ==, (long) strlen (r.err) - 1);
  cli_run_clear (&r);
}

static void
test_cli (void)
{
  if (testdata_dir () == NULL || g_getenv ("HANASHI_CLI") == NULL) {
    g_test_skip ("test data or hanashi-cli not found");
    return;
  }
  g_autofree char *dir = g_dir_make_tmp ("hanashi-quantize-XXXXXX", NULL);
  g_autofree char *src = model_path ("quant-llama-v512-f32.gguf");
  g_autofree char *out = g_build_filename (dir, "out.gguf", NULL);
  g_autofree char *missing = g_build_filename (dir, "missing.gguf", NULL);

  const char *const ok_args[] = { "quantize", src, out, "Q4_K_M", "-t", "2", NULL };
  CliRun ok = cli_run_argv (ok_args);
  g_assert_cmpint (ok.status, ==, 0);
  cli_run_clear (&ok);
  g_autofree char *ref = model_path ("quant-llama-v512-q4_k_m.gguf");
  g_assert_true (files_equal (out, ref));

  const char *const bad_type[] = { "quantize", src, out, "Q7_X", NULL };
  assert_cli_error (bad_type, "unknown quantization type 'Q7_X'");
  const char *const no_input[] = { "quantize", missing, out, "Q8_0", NULL };
  assert_cli_error (no_input, "missing.gguf");
  const char *const too_few[] = { "quantize", src, NULL };
  assert_cli_error (too_few, "usage");
  const char *const bad_threads[] = { "quantize", src, out, "Q8_0", "-t", "zero", NULL };
  assert_cli_error (bad_threads, "--threads");
  const char *const same_file[] = { "quantize", out, out, "Q8_0", NULL };
  assert_cli_error (same_file, "is the input");
  /* A file that is not GGUF. */
  g_autofree char *junk = g_build_filename (dir, "junk.gguf", NULL);
  g_assert_true (g_file_set_contents (junk, "not a model at all", -1, NULL));
  const char *const junk_input[] = { "quantize", junk, missing, "Q8_0", NULL };
  CliRun junk_run = cli_run_argv (junk_input);
  g_assert_cmpint (junk_run.status, ==, 1);
  g_assert_true (g_str_has_prefix (junk_run.err, "hanashi-cli: error: "));
  cli_run_clear (&junk_run);
  g_assert_false (g_file_test (missing, G_FILE_TEST_EXISTS));
  remove_dir (dir);
}

static void
test_targets (void)
{
  static const char *const expected[] = { "F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K",
                                          "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q3_K_M", "Q4_K_M", "Q5_K_M" };
  for (size_t i = 0; i < G_N_ELEMENTS (expected); i++) {
    const HnQuantizeTarget *t = hn_quantize_target_find (expected[i]);
    g_assert_nonnull (t);
    g_assert_cmpstr (t->name, ==, expected[i]);
    g_assert_true (hn_type_is_weight_type (t->base));
  }
  g_assert_true (hn_quantize_target_find ("q4_k_m") == hn_quantize_target_find ("Q4_K_M"));
  g_assert_null (hn_quantize_target_find ("IQ2_XXS"));
  g_assert_null (hn_quantize_target_find (""));
  g_assert_cmpuint (hn_quantize_target_find ("Q4_K_M")->file_type, ==, 15);
  g_assert_cmpuint (hn_quantize_target_find ("Q8_0")->file_type, ==, 7);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gguf-writer/round-trip", test_writer_round_trip);
  g_test_add_func ("/quantize/targets", test_targets);
  g_test_add_func ("/quantize/matches-reference-files", test_quantize_matches_reference_files);
  g_test_add_func ("/quantize/q8_0", test_quantize_q8_0);
  g_test_add_func ("/quantize/q4_k_m", test_quantize_q4_k_m);
  g_test_add_func ("/quantize/plain-k-types", test_quantize_plain_k_types);
  g_test_add_func ("/quantize/fallback-types", test_quantize_fallback_types);
  g_test_add_func ("/quantize/requantize", test_requantize);
  g_test_add_func ("/quantize/rejects-nan", test_quantize_rejects_nan);
  g_test_add_func ("/quantize/cli", test_cli);
  return g_test_run ();
}
