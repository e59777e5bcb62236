/* `hanashi-cli info` states each architecture's particulars (sliding window and its layer
 * pattern, head size, soft-caps, q/k norm, rope scaling, experts), and the optional keys
 * and tensors that real models carry and the small test models lack are read: expert
 * counts, and Phi-3's long/short rope factors, chosen by the context size.  Models with
 * those are written by the test as copies of testdata/arch models with keys and tensors
 * added.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "cli-run.h"
#include "hn-context.h"
#include "hn-gguf-writer.h"
#include "hn-model.h"
#include "hn-prompt-cache.h"

static char *tmpdir;

static char *
arch_model_path (const char *name)
{
  return g_build_filename (g_getenv ("HANASHI_TESTDATA"), "arch", "models", name, NULL);
}

/* hanashi-cli info PATH; returns its standard output. */
static char *
run_info (const char *path)
{
  return cli_run_output (cli_run ("info", path, NULL), NULL);
}

static void
assert_line (const char *out, const char *line)
{
  g_autofree char *needle = g_strdup_printf ("\n%s\n", line);
  g_autofree char *text = g_strdup_printf ("\n%s", out);
  if (!strstr (text, needle))
    g_error ("no line '%s' in:\n%s", line, out);
}

static void
assert_no_line_starting (const char *out, const char *prefix)
{
  g_autofree char *needle = g_strdup_printf ("\n%s", prefix);
  g_autofree char *text = g_strdup_printf ("\n%s", out);
  if (strstr (text, needle))
    g_error ("unexpected line '%s…' in:\n%s", prefix, out);
}

static void
test_info_qwen3 (void)
{
  g_autofree char *path = arch_model_path ("arch-qwen3-v512-q8_0.gguf");
  g_autofree char *out = run_info (path);
  assert_line (out, "architecture: qwen3");
  assert_line (out, "attention heads: 8 (4 key/value)");
  assert_line (out, "head size: 64"); /* key_length, not 256 / 8 */
  assert_line (out, "sliding window: none");
  assert_line (out, "q/k norm: yes");
  assert_line (out, "rope: neox, base 1000000, 64 of 64 dimensions");
  assert_no_line_starting (out, "experts:");
  assert_no_line_starting (out, "attention logit soft-cap:");
}

static void
test_info_gemma2 (void)
{
  g_autofree char *path = arch_model_path ("arch-gemma2-v512-f16.gguf");
  g_autofree char *out = run_info (path);
  assert_line (out, "architecture: gemma2");
  assert_line (out, "layers: 26");
  assert_line (out, "head size: 32");
  assert_line (out, "sliding window: 8 tokens on 13 of 26 layers");
  assert_line (out, "layer pattern: SGSGSGSGSGSGSGSGSGSGSGSGSG (S sliding window, G global)");
  assert_line (out, "attention logit soft-cap: 20");
  assert_line (out, "final logit soft-cap: 30");
  assert_line (out, "q/k norm: no");
}

static void
test_info_gemma3 (void)
{
  g_autofree char *path = arch_model_path ("arch-gemma3-v512-q8_0.gguf");
  g_autofree char *out = run_info (path);
  assert_line (out, "architecture: gemma3");
  assert_line (out, "sliding window: 8 tokens on 5 of 6 layers");
  assert_line (out, "layer pattern: SSSSSG (S sliding window, G global)");
  assert_line (out, "q/k norm: yes");
  assert_line (out, "rope: neox, base 1000000, 32 of 32 dimensions, linear scaling 8 (global layers), "
                    "sliding layers base 10000 unscaled");
  assert_no_line_starting (out, "attention logit soft-cap:");
  assert_no_line_starting (out, "final logit soft-cap:");
}

static void
test_info_phi3 (void)
{
  g_autofree char *path = arch_model_path ("arch-phi3-v512-f16.gguf");
  g_autofree char *out = run_info (path);
  assert_line (out, "architecture: phi3");
  assert_line (out, "sliding window: 16 tokens on 4 of 4 layers");
  assert_line (out, "layer pattern: SSSS (S sliding window, G global)");
  assert_line (out, "rope: neox, base 10000, 32 of 32 dimensions");
}

typedef struct {
  const char *name;
  int64_t n;
  float value;
} ExtraVector;

/* Copies `src` to `dst` with extra u32/f32 keys and extra F32 vectors of one value. */
static void
copy_model (const char *src, const char *dst, const char *const *u32_keys, const uint32_t *u32_values,
            const char *const *f32_keys, const float *f32_values, const ExtraVector *vectors)
{
  HnError err = { 0 };
  HnGguf *g = hn_gguf_open (src, &err);
  g_assert_nonnull (g);
  HnGgufWriter *w = hn_gguf_writer_new (&err);
  g_assert_true (hn_gguf_writer_copy_kvs (w, g, &err));
  for (int i = 0; u32_keys && u32_keys[i]; i++)
    g_assert_true (hn_gguf_writer_set_u32 (w, u32_keys[i], u32_values[i], &err));
  for (int i = 0; f32_keys && f32_keys[i]; i++)
    g_assert_true (hn_gguf_writer_set_f32 (w, f32_keys[i], f32_values[i], &err));
  for (int64_t i = 0; i < hn_gguf_n_tensors (g); i++) {
    const HnGgufTensor *t = hn_gguf_tensor (g, i);
    g_assert_true (hn_gguf_writer_add_tensor (w, t->name, (HnType) t->type, t->n_dims, t->ne, &err));
  }
  for (int i = 0; vectors && vectors[i].name; i++)
    g_assert_true (hn_gguf_writer_add_tensor (w, vectors[i].name, HN_TYPE_F32, 1, &vectors[i].n, &err));
  g_assert_true (hn_gguf_writer_begin (w, dst, &err));
  for (int64_t i = 0; i < hn_gguf_n_tensors (g); i++) {
    const HnGgufTensor *t = hn_gguf_tensor (g, i);
    g_assert_true (hn_gguf_writer_write (w, t->data, t->nbytes, &err));
  }
  for (int i = 0; vectors && vectors[i].name; i++)
    for (int64_t j = 0; j < vectors[i].n; j++)
      g_assert_true (hn_gguf_writer_write (w, &vectors[i].value, sizeof (float), &err));
  if (!hn_gguf_writer_finish (w, &err))
    g_error ("%s", err.message);
  hn_gguf_writer_free (w);
  hn_gguf_close (g);
}

static void
test_info_experts (void)
{
  g_autofree char *src = arch_model_path ("arch-qwen3-v512-f16.gguf");
  g_autofree char *dst = g_build_filename (tmpdir, "qwen3-expert-keys.gguf", NULL);
  const char *keys[] = { "qwen3.expert_count", "qwen3.expert_used_count", NULL };
  const uint32_t values[] = { 8, 2 };
  copy_model (src, dst, keys, values, NULL, NULL, NULL);
  g_autofree char *out = run_info (dst);
  assert_line (out, "experts: 2 used of 8");
  g_unlink (dst);
}

/* Last-position logits of a fixed prompt with a context of n_ctx cells. */
static float *
last_logits (const char *path, int n_ctx, int *n_vocab)
{
  HnError err = { 0 };
  HnModel *m = hn_model_load (path, NULL, &err);
  if (m == NULL)
    g_error ("%s: %s", path, err.message);
  HnContextParams p = hn_context_default_params ();
  p.n_ctx = n_ctx;
  p.n_threads = 2;
  HnContext *ctx = hn_context_new (m, &p, &err);
  g_assert_nonnull (ctx);
  int32_t tok[24], pos[24];
  for (int i = 0; i < 24; i++) {
    tok[i] = (int32_t) ((i * 131 + 7) % hn_model_n_vocab (m));
    pos[i] = i;
  }
  HnBatch b = { .n_tokens = 24, .token = tok, .pos = pos };
  g_assert_true (hn_context_decode (ctx, &b, &err));
  *n_vocab = hn_model_n_vocab (m);
  float *out = g_memdup2 (hn_context_get_logits (ctx, 0), (gsize) *n_vocab * sizeof (float));
  hn_context_free (ctx);
  hn_model_free (m);
  return out;
}

static void
test_phi3_long_short_factors (void)
{
  g_autofree char *src = arch_model_path ("arch-phi3-v512-f16.gguf");
  g_autofree char *dst = g_build_filename (tmpdir, "phi3-longrope.gguf", NULL);
  /* short factors of 1 leave the rotation as it was; long factors of 4 slow it down */
  const ExtraVector vectors[] = { { "rope_factors_long.weight", 16, 4.0f },
                                  { "rope_factors_short.weight", 16, 1.0f }, { NULL, 0, 0 } };
  const char *u32_keys[] = { "phi3.rope.scaling.original_context_length", NULL };
  const uint32_t u32_values[] = { 64 };
  copy_model (src, dst, u32_keys, u32_values, NULL, NULL, vectors);
  g_autofree char *out = run_info (dst);
  assert_line (out, "rope: neox, base 10000, 32 of 32 dimensions, long/short frequency factors");

  int nv = 0;
  g_autofree float *plain_small = last_logits (src, 64, &nv);
  g_autofree float *short_small = last_logits (dst, 64, &nv);
  g_autofree float *plain_large = last_logits (src, 128, &nv);
  g_autofree float *long_large = last_logits (dst, 128, &nv);
  /* within the original context: the short factors, here the identity */
  g_assert_cmpmem (plain_small, (gsize) nv * sizeof (float), short_small, (gsize) nv * sizeof (float));
  /* beyond it: the long factors, a different rotation */
  double diff = 0.0;
  for (int v = 0; v < nv; v++)
    diff = fmax (diff, fabs ((double) plain_large[v] - long_large[v]));
  g_assert_cmpfloat (diff, >, 1e-3);

  /* keys rotated with the long factors are not restored into a context that uses the
   * short ones (and the other way round): the session says which were in use */
  HnError err = { 0 };
  HnModel *m = hn_model_load (dst, NULL, &err);
  g_assert_nonnull (m);
  HnContextParams p = hn_context_default_params ();
  p.n_threads = 2;
  p.n_ctx = 128;
  HnContext *long_ctx = hn_context_new (m, &p, &err);
  p.n_ctx = 64;
  HnContext *short_ctx = hn_context_new (m, &p, &err);
  g_assert_cmpuint (hn_context_rope_factor_set (long_ctx), ==, 2);
  g_assert_cmpuint (hn_context_rope_factor_set (short_ctx), ==, 1);
  int32_t tok[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, pos[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
  HnBatch b = { .n_tokens = 8, .token = tok, .pos = pos };
  g_assert_true (hn_context_decode (long_ctx, &b, &err));
  g_autofree char *session = g_build_filename (tmpdir, "longrope.hnsession", NULL);
  g_assert_true (hn_prompt_cache_save (long_ctx, session, tok, 8, &err));
  uint32_t n_reused = 99;
  g_assert_false (hn_prompt_cache_load (short_ctx, session, tok, 8, &n_reused, &err));
  g_assert_cmpuint (n_reused, ==, 0);
  g_assert_true (hn_prompt_cache_load (long_ctx, session, tok, 8, &n_reused, &err));
  g_assert_cmpuint (n_reused, ==, 8);
  hn_context_free (long_ctx);
  hn_context_free (short_ctx);
  hn_model_free (m);
  g_unlink (session);
  g_unlink (dst);
}

/* make-model's small shapes of the new architectures: written, described, and evaluated
 * to finite logits over more tokens than the sliding window. */
static void
test_make_model_shapes (void)
{
  static const struct { const char *shape, *lines[3]; } cases[] = {
    { "test-tiny-qwen3", { "architecture: qwen3", "head size: 64", "q/k norm: yes" } },
    { "test-tiny-gemma3", { "architecture: gemma3", "layer pattern: SSSSSG (S sliding window, G global)",
                            "sliding window: 16 tokens on 5 of 6 layers" } },
    { "test-tiny-phi3", { "architecture: phi3", "sliding window: 32 tokens on 2 of 2 layers",
                          "rope: neox, base 10000, 24 of 32 dimensions, long/short frequency factors" } },
  };
  g_autofree char *vocab = g_build_filename (g_getenv ("HANASHI_TESTDATA"), "vocab", "ggml-vocab-gpt-2.gguf", NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree char *path = g_build_filename (tmpdir, "shape.gguf", NULL);
    g_free (cli_run_output (cli_run ("make-model", "--shape", cases[i].shape, "--type", "q8_0", "--vocab", vocab,
                                     "-o", path, NULL),
                            NULL));
    g_autofree char *out = run_info (path);
    for (int j = 0; j < 3; j++)
      assert_line (out, cases[i].lines[j]);
    HnError err = { 0 };
    HnModel *m = hn_model_load (path, NULL, &err);
    g_assert_nonnull (m);
    HnContextParams p = hn_context_default_params ();
    p.n_ctx = 128;
    p.n_batch = 8;
    p.n_threads = 2;
    HnContext *ctx = hn_context_new (m, &p, &err);
    g_assert_nonnull (ctx);
    for (int32_t t = 0; t < 80; t++) {
      int32_t tok = (t * 97 + 5) % hn_model_n_vocab (m);
      HnBatch b = { .n_tokens = 1, .token = &tok, .pos = &t };
      g_assert_true (hn_context_decode (ctx, &b, &err));
      const float *logits = hn_context_get_logits (ctx, 0);
      for (int v = 0; v < hn_model_n_vocab (m); v += 97)
        g_assert_true (isfinite (logits[v]));
    }
    hn_context_free (ctx);
    hn_model_free (m);
    g_unlink (path);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  const char *testdata = g_getenv ("HANASHI_TESTDATA");
  g_autofree char *probe = testdata ? g_build_filename (testdata, "arch", "models", NULL) : NULL;
  if (probe == NULL || !g_file_test (probe, G_FILE_TEST_IS_DIR) || !g_getenv ("HANASHI_CLI")) {
    g_test_skip ("no test data or no hanashi-cli");
    return g_test_run ();
  }
  tmpdir = g_dir_make_tmp ("hanashi-arch-info-XXXXXX", NULL);
  g_test_add_func ("/arch-info/qwen3", test_info_qwen3);
  g_test_add_func ("/arch-info/gemma2", test_info_gemma2);
  g_test_add_func ("/arch-info/gemma3", test_info_gemma3);
  g_test_add_func ("/arch-info/phi3", test_info_phi3);
  g_test_add_func ("/arch-info/experts", test_info_experts);
  g_test_add_func ("/arch-info/phi3-long-short-rope", test_phi3_long_short_factors);
  g_test_add_func ("/arch-info/make-model-shapes", test_make_model_shapes);
  int rc = g_test_run ();
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return rc;
}
