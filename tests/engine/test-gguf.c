/* Tests for the GGUF reader: real files from the test data, and hostile files built
 * here byte by byte (truncations, bad magic, absurd counts, bad offsets, unknown types).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-gguf.h"
#include "hn-gguf-writer.h"
#include "hn-model.h"
#include "hn-quants.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

/* ---- a tiny GGUF builder for hand-made files ---- */

typedef struct {
  GByteArray *bytes;
} Builder;

static void
put_u32 (Builder *b, uint32_t v)
{
  uint8_t le[4] = { v, v >> 8, v >> 16, v >> 24 };
  g_byte_array_append (b->bytes, le, 4);
}

static void
put_u64 (Builder *b, uint64_t v)
{
  uint8_t le[8];
  for (int i = 0; i < 8; i++)
    le[i] = (uint8_t) (v >> (8 * i));
  g_byte_array_append (b->bytes, le, 8);
}

static void
put_str (Builder *b, const char *s)
{
  put_u64 (b, strlen (s));
  g_byte_array_append (b->bytes, (const guint8 *) s, strlen (s));
}

static void
put_f32 (Builder *b, float f)
{
  uint32_t u;
  memcpy (&u, &f, 4);
  put_u32 (b, u);
}

/* Offsets of interesting fields, so tests can corrupt them precisely. */
typedef struct {
  gsize n_tensors_at;
  gsize n_kv_at;
  gsize array_count_at;
  gsize first_dim_at;
  gsize first_type_at;
  gsize second_offset_at;
  gsize data_at;
} Layout;

/* Two KVs besides alignment, an array of strings, and two tensors:
 * "a" F32 [4, 2] and "b.weight" Q8_0 [32, 1]. */
static GByteArray *
build_valid (Layout *layout)
{
  Builder b = { g_byte_array_new () };
  g_byte_array_append (b.bytes, (const guint8 *) "GGUF", 4);
  put_u32 (&b, 3);
  layout->n_tensors_at = b.bytes->len;
  put_u64 (&b, 2);
  layout->n_kv_at = b.bytes->len;
  put_u64 (&b, 4);

  put_str (&b, "general.architecture");
  put_u32 (&b, HN_GGUF_STRING);
  put_str (&b, "llama");

  put_str (&b, "llama.context_length");
  put_u32 (&b, HN_GGUF_UINT32);
  put_u32 (&b, 2048);

  put_str (&b, "llama.rope.freq_base");
  put_u32 (&b, HN_GGUF_FLOAT32);
  put_f32 (&b, 10000.0f);

  put_str (&b, "tokenizer.ggml.tokens");
  put_u32 (&b, HN_GGUF_ARRAY);
  put_u32 (&b, HN_GGUF_STRING);
  layout->array_count_at = b.bytes->len;
  put_u64 (&b, 3);
  put_str (&b, "<s>");
  put_str (&b, "hello");
  put_str (&b, "");

  put_str (&b, "a");
  put_u32 (&b, 2);
  layout->first_dim_at = b.bytes->len;
  put_u64 (&b, 4);
  put_u64 (&b, 2);
  layout->first_type_at = b.bytes->len;
  put_u32 (&b, HN_TYPE_F32);
  put_u64 (&b, 0);

  put_str (&b, "b.weight");
  put_u32 (&b, 1);
  put_u64 (&b, 32);
  put_u32 (&b, HN_TYPE_Q8_0);
  layout->second_offset_at = b.bytes->len;
  put_u64 (&b, 32);

  while (b.bytes->len % 32 != 0)
    g_byte_array_append (b.bytes, (const guint8 *) "", 1);
  layout->data_at = b.bytes->len;
  for (int i = 0; i < 8; i++)
    put_f32 (&b, (float) i);
  /* Q8_0 block: f16 scale 1.0 then 32 int8 quants */
  guint8 block[34] = { 0x00, 0x3c };
  for (int i = 0; i < 32; i++)
    block[2 + i] = (guint8) (i - 16);
  g_byte_array_append (b.bytes, block, sizeof block);
  return b.bytes;
}

static void
test_valid_built_file (void)
{
  Layout layout;
  g_autoptr (GByteArray) bytes = build_valid (&layout);
  HnError err = { 0 };
  HnGguf *g = hn_gguf_open_memory (bytes->data, bytes->len, &err);
  g_assert_nonnull (g);
  g_assert_cmpint (err.code, ==, HN_OK);
  g_assert_cmpuint (hn_gguf_version (g), ==, 3);
  g_assert_cmpint (hn_gguf_n_kv (g), ==, 4);
  g_assert_cmpint (hn_gguf_n_tensors (g), ==, 2);

  HnStr arch;
  g_assert_true (hn_gguf_get_str (g, "general.architecture", &arch, &err));
  g_assert_true (hn_str_eq (arch, "llama"));

  uint32_t ctx;
  g_assert_true (hn_gguf_get_u32 (g, "llama.context_length", &ctx, &err));
  g_assert_cmpuint (ctx, ==, 2048);
  int64_t ctx64;
  g_assert_true (hn_gguf_get_i64 (g, "llama.context_length", &ctx64, &err));
  g_assert_cmpint (ctx64, ==, 2048);

  float base;
  g_assert_true (hn_gguf_get_f32 (g, "llama.rope.freq_base", &base, &err));
  g_assert_cmpfloat (base, ==, 10000.0f);
  /* Integers read as floats; floats are not integers. */
  g_assert_true (hn_gguf_get_f32 (g, "llama.context_length", &base, &err));
  g_assert_cmpfloat (base, ==, 2048.0f);
  g_assert_false (hn_gguf_get_u32 (g, "llama.rope.freq_base", &ctx, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_FORMAT);
  g_assert_nonnull (strstr (err.message, "llama.rope.freq_base"));

  g_assert_false (hn_gguf_get_u32 (g, "missing.key", &ctx, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_NOT_FOUND);
  g_assert_true (hn_gguf_get_u32_or (g, "missing.key", 7, &ctx, &err));
  g_assert_cmpuint (ctx, ==, 7);
  g_assert_false (hn_gguf_get_u32_or (g, "general.architecture", 7, &ctx, &err));

  HnGgufArray tokens;
  g_assert_true (hn_gguf_get_array (g, "tokenizer.ggml.tokens", &tokens, &err));
  g_assert_cmpuint (tokens.type, ==, HN_GGUF_STRING);
  g_assert_cmpuint (tokens.count, ==, 3);
  HnStr strs[3];
  hn_gguf_array_strings (&tokens, strs);
  g_assert_true (hn_str_eq (strs[0], "<s>"));
  g_assert_true (hn_str_eq (strs[1], "hello"));
  g_assert_true (hn_str_eq (strs[2], ""));

  const HnGgufTensor *a = hn_gguf_find_tensor (g, "a");
  g_assert_nonnull (a);
  g_assert_cmpuint (a->n_dims, ==, 2);
  g_assert_cmpint (a->ne[0], ==, 4);
  g_assert_cmpint (a->ne[1], ==, 2);
  g_assert_cmpint (a->ne[2], ==, 1);
  g_assert_cmpuint (a->nbytes, ==, 32);
  g_assert_true ((const guint8 *) a->data == bytes->data + layout.data_at);
  float third;
  memcpy (&third, (const guint8 *) a->data + 8, 4);
  g_assert_cmpfloat (third, ==, 2.0f);

  const HnGgufTensor *bw = hn_gguf_find_tensor (g, "b.weight");
  g_assert_nonnull (bw);
  g_assert_cmpuint (bw->type, ==, HN_TYPE_Q8_0);
  g_assert_cmpuint (bw->nbytes, ==, 34);
  g_assert_null (hn_gguf_find_tensor (g, "c"));
  hn_gguf_close (g);
}

static HnGguf *
open_expect_error (GByteArray *bytes, const char *needle)
{
  HnError err = { 0 };
  HnGguf *g = hn_gguf_open_memory (bytes->data, bytes->len, &err);
  if (g != NULL) {
    hn_gguf_close (g);
    g_error ("expected an error containing '%s', got success", needle);
  }
  g_assert_cmpint (err.code, !=, HN_OK);
  g_assert_cmpstr (err.message, !=, "");
  if (needle != NULL && strstr (err.message, needle) == NULL)
    g_error ("expected an error containing '%s', got '%s'", needle, err.message);
  return NULL;
}

static void
test_truncated_everywhere (void)
{
  Layout layout;
  g_autoptr (GByteArray) bytes = build_valid (&layout);
  /* Every strict prefix of the file must be rejected (the data of the last tensor is
   * needed), never read past the end: ASan watches the exact-size copies. */
  for (gsize len = 0; len < bytes->len; len++) {
    guint8 *copy = g_memdup2 (bytes->data, len ? len : 1);
    HnError err = { 0 };
    HnGguf *g = hn_gguf_open_memory (copy, len, &err);
    if (g != NULL)
      g_error ("truncation at %" G_GSIZE_FORMAT " of %u was accepted", len, bytes->len);
    g_assert_cmpstr (err.message, !=, "");
    /* once the magic is there, a cut-off file is reported as one (an interrupted download),
     * not as a malformed one */
    if (len >= 4 && err.code != HN_ERR_TRUNCATED)
      g_error ("truncation at %" G_GSIZE_FORMAT ": code %d, '%s'", len, err.code, err.message);
    g_free (copy);
  }
}

static void
set_u64 (GByteArray *bytes, gsize at, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    bytes->data[at + i] = (guint8) (v >> (8 * i));
}

static void
set_u32 (GByteArray *bytes, gsize at, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    bytes->data[at + i] = (guint8) (v >> (8 * i));
}

static void
test_hostile_headers (void)
{
  Layout layout;
  g_autoptr (GByteArray) bytes = NULL;

  bytes = build_valid (&layout);
  bytes->data[0] = 'X';
  open_expect_error (bytes, "not a GGUF file");
  g_byte_array_unref (g_steal_pointer (&bytes));

  bytes = build_valid (&layout);
  set_u32 (bytes, 4, 1);
  open_expect_error (bytes, "version 1");
  g_byte_array_unref (g_steal_pointer (&bytes));

  bytes = build_valid (&layout);
  set_u32 (bytes, 4, 99);
  open_expect_error (bytes, "version 99");
  g_byte_array_unref (g_steal_pointer (&bytes));

  bytes = build_valid (&layout);
  set_u64 (bytes, layout.n_tensors_at, G_MAXUINT64);
  open_expect_error (bytes, "tensors");
  g_byte_array_unref (g_steal_pointer (&bytes));

  bytes = build_valid (&layout);
  set_u64 (bytes, layout.n_kv_at, (uint64_t) 1 << 60);
  open_expect_error (bytes, "metadata keys");
  g_byte_array_unref (g_steal_pointer (&bytes));

  bytes = build_valid (&layout);
  set_u64 (bytes, layout.array_count_at, (uint64_t) 1 << 59);
  open_expect_error (bytes, "tokenizer.ggml.tokens");
  g_byte_array_unref (g_steal_pointer (&bytes));

  bytes = build_valid (&layout);
  set_u64 (bytes, layout.first_dim_at, 0);
  open_expect_error (bytes, "tensor 'a' has an invalid dimension");
  g_byte_array_unref (g_steal_pointer (&bytes));

  bytes = build_valid (&layout);
  set_u64 (bytes, layout.first_dim_at, (uint64_t) 1 << 40);
  open_expect_error (bytes, "tensor 'a'");
  g_byte_array_unref (g_steal_pointer (&bytes));

  bytes = build_valid (&layout);
  set_u32 (bytes, layout.first_type_at, 16);
  open_expect_error (bytes, "tensor 'a' has weight type IQ2_XXS");
  g_byte_array_unref (g_steal_pointer (&bytes));

  bytes = build_valid (&layout);
  set_u32 (bytes, layout.first_type_at, 12345);
  open_expect_error (bytes, "tensor 'a' has weight type unknown");
  g_byte_array_unref (g_steal_pointer (&bytes));

  bytes = build_valid (&layout);
  set_u64 (bytes, layout.second_offset_at, 4096);
  open_expect_error (bytes, "tensor 'b.weight' extends past end of file");
  g_byte_array_unref (g_steal_pointer (&bytes));

  bytes = build_valid (&layout);
  set_u64 (bytes, layout.second_offset_at, G_MAXUINT64 - 31);
  open_expect_error (bytes, "tensor 'b.weight' extends past end of file");
  g_byte_array_unref (g_steal_pointer (&bytes));

  bytes = build_valid (&layout);
  set_u64 (bytes, layout.second_offset_at, 33);
  open_expect_error (bytes, "alignment");
  g_byte_array_unref (g_steal_pointer (&bytes));
}

static void
test_random_corruption (void)
{
  Layout layout;
  g_autoptr (GByteArray) pristine = build_valid (&layout);
  GRand *rand = g_rand_new_with_seed (1234);
  /* Flipped bytes may or may not make the file invalid; either way there must be no
   * crash, and an accepted file must have every tensor inside the buffer. */
  for (int iter = 0; iter < 20000; iter++) {
    guint8 *copy = g_memdup2 (pristine->data, pristine->len);
    int flips = g_rand_int_range (rand, 1, 4);
    for (int f = 0; f < flips; f++)
      copy[g_rand_int_range (rand, 0, pristine->len)] = (guint8) g_rand_int_range (rand, 0, 256);
    HnError err = { 0 };
    HnGguf *g = hn_gguf_open_memory (copy, pristine->len, &err);
    if (g != NULL) {
      for (int64_t i = 0; i < hn_gguf_n_tensors (g); i++) {
        const HnGgufTensor *t = hn_gguf_tensor (g, i);
        g_assert_true ((const guint8 *) t->data >= copy);
        g_assert_true ((const guint8 *) t->data + t->nbytes <= copy + pristine->len);
      }
      hn_gguf_close (g);
    } else {
      g_assert_cmpstr (err.message, !=, "");
    }
    g_free (copy);
  }
  g_rand_free (rand);
}

static void
test_open_errors (void)
{
  HnError err = { 0 };
  g_assert_null (hn_gguf_open ("/nonexistent/model.gguf", &err));
  g_assert_cmpint (err.code, ==, HN_ERR_IO);
  g_assert_nonnull (strstr (err.message, "/nonexistent/model.gguf"));

  g_assert_null (hn_gguf_open ("/", &err));
  g_assert_cmpint (err.code, ==, HN_ERR_IO);

  g_autofree char *path = NULL;
  int fd = g_file_open_tmp ("hanashi-gguf-XXXXXX", &path, NULL);
  g_assert_cmpint (fd, >=, 0);
  close (fd);
  g_assert_null (hn_gguf_open (path, &err));
  g_assert_nonnull (strstr (err.message, "too small"));
  g_unlink (path);
}

static void
test_real_files (void)
{
  const char *root = g_getenv ("HANASHI_TESTDATA");
  if (root == NULL || !g_file_test (root, G_FILE_TEST_IS_DIR)) {
    g_test_skip ("HANASHI_TESTDATA not available");
    return;
  }
  const char *subdirs[] = { "models", "vocab" };
  int n_files = 0;
  for (gsize s = 0; s < G_N_ELEMENTS (subdirs); s++) {
    g_autofree char *dir_path = g_build_filename (root, subdirs[s], NULL);
    g_autoptr (GDir) dir = g_dir_open (dir_path, 0, NULL);
    if (dir == NULL)
      continue;
    const char *name;
    while ((name = g_dir_read_name (dir)) != NULL) {
      if (!g_str_has_suffix (name, ".gguf"))
        continue;
      g_autofree char *path = g_build_filename (dir_path, name, NULL);
      HnError err = { 0 };
      HnGguf *g = hn_gguf_open (path, &err);
      if (g == NULL)
        g_error ("%s: %s", name, err.message);
      HnStr arch;
      g_assert_true (hn_gguf_get_str (g, "general.architecture", &arch, &err));
      HnGgufArray tokens;
      g_assert_true (hn_gguf_get_array (g, "tokenizer.ggml.tokens", &tokens, &err));
      g_assert_cmpuint (tokens.type, ==, HN_GGUF_STRING);
      g_assert_cmpuint (tokens.count, >, 0);
      HnStr *strs = g_new (HnStr, tokens.count);
      hn_gguf_array_strings (&tokens, strs);
      g_assert_true (strs[tokens.count - 1].data + strs[tokens.count - 1].len <=
                     (const char *) hn_gguf_bytes (g) + hn_gguf_file_size (g));
      g_free (strs);
      if (g_str_equal (subdirs[s], "models")) {
        g_assert_cmpint (hn_gguf_n_tensors (g), >, 0);
        g_assert_nonnull (hn_gguf_find_tensor (g, "token_embd.weight"));
        g_assert_nonnull (hn_gguf_find_tensor (g, "blk.0.attn_q.weight"));
        /* the loaded model reports the type its file's tensor table gives */
        HnModel *model = hn_model_load (path, NULL, &err);
        if (model == NULL)
          g_error ("%s: %s", name, err.message);
        uint32_t main_type = hn_gguf_main_weight_type (g);
        g_assert_cmpuint (main_type, <, HN_TYPE_COUNT);
        g_assert_cmpuint (hn_model_main_type (model), ==, main_type);
        g_test_message ("%s: main weight type %s", name, hn_type_name (main_type));
        /* the mixes are named after their main type: q4_k_m is mostly Q4_K */
        if (g_str_has_suffix (name, "-q4_k_m.gguf"))
          g_assert_cmpstr (hn_type_name (main_type), ==, "Q4_K");
        hn_model_free (model);
      }
      hn_gguf_close (g);
      n_files++;
    }
  }
  g_assert_cmpint (n_files, >, 0);
  g_test_message ("opened %d real GGUF files", n_files);
}

/* ---- the main weight type ---- */

typedef struct {
  const char *name;
  HnType type;
  int64_t ne0, ne1; /* ne1 == 0: a vector */
} TensorSpec;

/* Writes a GGUF holding just these tensors (zero bytes) and opens it. */
static HnGguf *
open_tensors (const TensorSpec *specs, size_t n)
{
  g_autofree char *dir = g_dir_make_tmp ("hanashi-gguf-XXXXXX", NULL);
  g_assert_nonnull (dir);
  g_autofree char *path = g_build_filename (dir, "weights.gguf", NULL);
  HnError err = { 0 };
  HnGgufWriter *w = hn_gguf_writer_new (&err);
  g_assert_nonnull (w);
  g_assert_true (hn_gguf_writer_set_str (w, "general.architecture", "llama", &err));
  for (size_t i = 0; i < n; i++) {
    int64_t ne[2] = { specs[i].ne0, specs[i].ne1 };
    g_assert_true (hn_gguf_writer_add_tensor (w, specs[i].name, specs[i].type, specs[i].ne1 ? 2 : 1, ne, &err));
  }
  g_assert_true (hn_gguf_writer_begin (w, path, &err));
  static const uint8_t zeros[4096];
  for (int64_t i = 0;; i++) {
    size_t nbytes = hn_gguf_writer_tensor_nbytes (w, i);
    if (nbytes == 0)
      break;
    for (size_t done = 0; done < nbytes;) {
      size_t chunk = MIN (sizeof zeros, nbytes - done);
      g_assert_true (hn_gguf_writer_write (w, zeros, chunk, &err));
      done += chunk;
    }
  }
  if (!hn_gguf_writer_finish (w, &err))
    g_error ("%s", err.message);
  hn_gguf_writer_free (w);
  HnGguf *g = hn_gguf_open (path, &err);
  if (g == NULL)
    g_error ("%s", err.message);
  /* the mapping stays valid after the name is gone */
  g_unlink (path);
  g_rmdir (dir);
  return g;
}

static uint32_t
main_type_of (const TensorSpec *specs, size_t n)
{
  HnGguf *g = open_tensors (specs, n);
  uint32_t type = hn_gguf_main_weight_type (g);
  hn_gguf_close (g);
  return type;
}

static void
test_main_weight_type (void)
{
  /* The layer matrices decide by bytes: not the bigger Q8_0 embedding, not the output
   * head, not the F32 norm vectors, and not layer 0's attn_q alone (Q6_K). */
  const TensorSpec mixed[] = {
    { "token_embd.weight", HN_TYPE_Q8_0, 256, 4096 },
    { "output.weight", HN_TYPE_Q6_K, 256, 4096 },
    { "output_norm.weight", HN_TYPE_F32, 256, 0 },
    { "blk.0.attn_norm.weight", HN_TYPE_F32, 256, 0 },
    { "blk.0.attn_q.weight", HN_TYPE_Q6_K, 256, 256 },
    { "blk.0.ffn_up.weight", HN_TYPE_Q4_K, 256, 768 },
    { "blk.1.ffn_down.weight", HN_TYPE_Q4_K, 768, 256 },
    { "blk.12.ffn_gate.weight", HN_TYPE_Q5_K, 256, 768 },
  };
  g_assert_cmpuint (main_type_of (mixed, G_N_ELEMENTS (mixed)), ==, HN_TYPE_Q4_K);

  /* Bytes, not tensor counts: one large Q5_K matrix outweighs two small Q4_K ones. */
  const TensorSpec by_bytes[] = {
    { "blk.0.attn_k.weight", HN_TYPE_Q4_K, 256, 64 },
    { "blk.0.attn_v.weight", HN_TYPE_Q4_K, 256, 64 },
    { "blk.0.ffn_up.weight", HN_TYPE_Q5_K, 256, 768 },
  };
  g_assert_cmpuint (main_type_of (by_bytes, G_N_ELEMENTS (by_bytes)), ==, HN_TYPE_Q5_K);

  /* Only "blk.<number>." names are layers. */
  const TensorSpec not_layers[] = {
    { "blkx.0.weight", HN_TYPE_Q8_0, 256, 1024 },
    { "blk.a.weight", HN_TYPE_Q8_0, 256, 1024 },
    { "blk..weight", HN_TYPE_Q8_0, 256, 1024 },
    { "blk.3.attn_q.weight", HN_TYPE_Q4_0, 256, 32 },
  };
  g_assert_cmpuint (main_type_of (not_layers, G_N_ELEMENTS (not_layers)), ==, HN_TYPE_Q4_0);

  /* Without layer matrices every matrix counts; vectors never do. */
  const TensorSpec no_layers[] = {
    { "token_embd.weight", HN_TYPE_Q8_0, 256, 512 },
    { "output.weight", HN_TYPE_F16, 256, 64 },
    { "blk.0.attn_norm.weight", HN_TYPE_F32, 65536, 0 },
  };
  g_assert_cmpuint (main_type_of (no_layers, G_N_ELEMENTS (no_layers)), ==, HN_TYPE_Q8_0);

  /* Equal bytes: the lower type id (F16 before BF16). */
  const TensorSpec tie[] = {
    { "blk.0.attn_q.weight", HN_TYPE_BF16, 256, 8 },
    { "blk.0.attn_k.weight", HN_TYPE_F16, 256, 8 },
  };
  g_assert_cmpuint (main_type_of (tie, G_N_ELEMENTS (tie)), ==, HN_TYPE_F16);

  const TensorSpec vectors_only[] = {
    { "blk.0.attn_norm.weight", HN_TYPE_F32, 256, 0 },
  };
  g_assert_cmpuint (main_type_of (vectors_only, G_N_ELEMENTS (vectors_only)), ==, HN_TYPE_COUNT);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/engine/gguf/valid-built-file", test_valid_built_file);
  g_test_add_func ("/engine/gguf/truncated-everywhere", test_truncated_everywhere);
  g_test_add_func ("/engine/gguf/hostile-headers", test_hostile_headers);
  g_test_add_func ("/engine/gguf/random-corruption", test_random_corruption);
  g_test_add_func ("/engine/gguf/open-errors", test_open_errors);
  g_test_add_func ("/engine/gguf/real-files", test_real_files);
  g_test_add_func ("/engine/gguf/main-weight-type", test_main_weight_type);
  return g_test_run ();
}
