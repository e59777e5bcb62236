/* hanashi-cli make-model with the mixture-of-experts shapes: the files load, hold 3-D
 * expert tensors in the asked type next to F32 routers, --layers keeps that many layers,
 * `info` names the experts, and a decode runs; --ctx replaces the shape's context length.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "cli-run.h"

#include "hn-context.h"
#include "hn-quants.h"

typedef struct {
  const char *shape, *arch;
  bool shared;
} Shape;

static const Shape shapes[] = {
  { "test-tiny-qwen3moe", "qwen3moe", false },
  { "test-tiny-qwen2moe", "qwen2moe", true },
};

static void
test_shape(gconstpointer data)
{
  const Shape *s = data;
  g_autoptr(GError) gerr = NULL;
  g_autofree char *dir = g_dir_make_tmp("hanashi-make-model-XXXXXX", &gerr);
  g_assert_no_error(gerr);
  g_autofree char *path = g_build_filename(dir, "model.gguf", NULL);
  g_autofree char *vocab = g_build_filename(g_getenv("HANASHI_TESTDATA"), "vocab", "ggml-vocab-gpt-2.gguf", NULL);
  const char *make[] = { "make-model", "--shape", s->shape, "--type", "q4_0", "--vocab", vocab, "--layers", "1",
                         "-o", path, NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint(cli_run_status(make, &out, &err), ==, 0);

  HnError e = { 0 };
  HnModel *m = hn_model_load(path, NULL, &e);
  g_assert_nonnull(m);
  g_assert_cmpstr(hn_model_arch(m), ==, s->arch);
  g_assert_cmpint(hn_model_n_layer(m), ==, 1);
  g_assert_cmpint(hn_model_n_expert(m), ==, 8);
  g_assert_cmpint(hn_model_n_expert_used(m), ==, 2);
  const HnGguf *g = hn_model_gguf(m);
  const HnGgufTensor *router = hn_gguf_find_tensor(g, "blk.0.ffn_gate_inp.weight");
  const HnGgufTensor *up = hn_gguf_find_tensor(g, "blk.0.ffn_up_exps.weight");
  g_assert_nonnull(router);
  g_assert_nonnull(up);
  g_assert_cmpuint(router->type, ==, HN_TYPE_F32);
  g_assert_cmpuint(up->type, ==, HN_TYPE_Q4_0);
  g_assert_cmpint(up->ne[2], ==, 8);
  g_assert_true((hn_gguf_find_tensor(g, "blk.0.ffn_up_shexp.weight") != NULL) == s->shared);
  g_assert_null(hn_gguf_find_tensor(g, "blk.1.ffn_up_exps.weight"));

  /* a prompt and a step run, and the logits are numbers */
  HnContextParams p = hn_context_default_params();
  p.n_ctx = 32;
  p.n_threads = 2;
  HnContext *c = hn_context_new(m, &p, &e);
  g_assert_nonnull(c);
  int32_t tok[5] = { 11, 400, 9, 77, 1234 }, pos[5] = { 0, 1, 2, 3, 4 };
  HnBatch prompt = { .n_tokens = 4, .token = tok, .pos = pos };
  HnBatch step = { .n_tokens = 1, .token = tok + 4, .pos = pos + 4 };
  g_assert_true(hn_context_decode(c, &prompt, &e));
  g_assert_true(hn_context_decode(c, &step, &e));
  const float *logits = hn_context_get_logits(c, 0);
  for (int i = 0; i < hn_model_n_vocab(m); i++)
    g_assert_true(isfinite(logits[i]));
  hn_context_free(c);
  hn_model_free(m);

  const char *info[] = { "info", path, NULL };
  g_autofree char *info_out = NULL, *info_err = NULL;
  g_assert_cmpint(cli_run_status(info, &info_out, &info_err), ==, 0);
  g_assert_nonnull(strstr(info_out, "\nexperts: 2 used of 8\n"));

  g_assert_cmpint(g_remove(path), ==, 0);
  g_assert_cmpint(g_rmdir(dir), ==, 0);
}

static void
test_layers_option(void)
{
  g_autofree char *vocab = g_build_filename(g_getenv("HANASHI_TESTDATA"), "vocab", "ggml-vocab-gpt-2.gguf", NULL);
  const char *too_many[] = { "make-model", "--shape", "test-tiny-qwen3moe", "--type", "q4_0", "--vocab", vocab,
                             "--layers", "3", "-o", "/nonexistent/never.gguf", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint(cli_run_status(too_many, &out, &err), !=, 0);
  g_assert_nonnull(strstr(err, "more than the 2 layers"));
  const char *zero[] = { "make-model", "--shape", "test-tiny-qwen3moe", "--type", "q4_0", "--vocab", vocab,
                         "--layers", "0", "-o", "/nonexistent/never.gguf", NULL };
  g_autofree char *out2 = NULL, *err2 = NULL;
  g_assert_cmpint(cli_run_status(zero, &out2, &err2), !=, 0);
  g_assert_nonnull(strstr(err2, "--layers"));
}

static void
test_ctx_option(void)
{
  g_autoptr(GError) gerr = NULL;
  g_autofree char *dir = g_dir_make_tmp("hanashi-make-model-XXXXXX", &gerr);
  g_assert_no_error(gerr);
  g_autofree char *path = g_build_filename(dir, "model.gguf", NULL);
  g_autofree char *vocab = g_build_filename(g_getenv("HANASHI_TESTDATA"), "vocab", "ggml-vocab-gpt-2.gguf", NULL);
  /* test-tiny's own context is 512 */
  const char *make[] = { "make-model", "--shape", "test-tiny", "--type", "q8_0", "--vocab", vocab, "--ctx", "3000",
                         "-o", path, NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint(cli_run_status(make, &out, &err), ==, 0);
  HnError e = { 0 };
  HnModel *m = hn_model_load(path, NULL, &e);
  g_assert_nonnull(m);
  g_assert_cmpint(hn_model_n_ctx_train(m), ==, 3000);
  hn_model_free(m);
  g_assert_cmpint(g_remove(path), ==, 0);
  g_assert_cmpint(g_rmdir(dir), ==, 0);

  const char *zero[] = { "make-model", "--shape", "test-tiny", "--type", "q8_0", "--vocab", vocab, "--ctx", "0",
                         "-o", "/nonexistent/never.gguf", NULL };
  g_autofree char *out2 = NULL, *err2 = NULL;
  g_assert_cmpint(cli_run_status(zero, &out2, &err2), !=, 0);
  g_assert_nonnull(strstr(err2, "--ctx"));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  if (!g_getenv("HANASHI_TESTDATA") || !g_getenv("HANASHI_CLI")) {
    g_test_skip("no test data or CLI");
    return g_test_run();
  }
  for (gsize i = 0; i < G_N_ELEMENTS(shapes); i++) {
    g_autofree char *name = g_strdup_printf("/cli-make-model/%s", shapes[i].shape);
    g_test_add_data_func(name, &shapes[i], test_shape);
  }
  g_test_add_func("/cli-make-model/layers-option", test_layers_option);
  g_test_add_func("/cli-make-model/ctx-option", test_ctx_option);
  return g_test_run();
}
