/* Model-level errors (the GGUF itself is well-formed): unsupported architecture, missing
 * keys and tensors, wrong shapes, unsupported weight types; and files damaged the way real
 * ones get damaged: cut short by an interrupted download, NaN weights.  Each one must give exit
 * status 1 and one "hanashi-cli: error: ..." line naming the problem.  The files are
 * written by the test itself into a temporary directory.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "cli-run.h"
#include "damaged-models.h"
#include "hn-generate-model.h"
#include "hn-gguf-writer.h"

enum { E = 32, L = 1, H = 4, HKV = 2, FF = 64, V = 16 };

typedef struct {
  const char *arch;           /* general.architecture */
  const char *skip_key;       /* metadata key left out */
  const char *skip_tensor;    /* tensor left out */
  const char *bad_shape;      /* tensor given one extra row */
  const char *bad_type;       /* tensor stored as Q8_1 (not a weight type) */
  uint32_t head_count;        /* 0 = H */
} Variant;

static char *tmpdir;

static bool
add(HnGgufWriter *w, const Variant *v, const char *name, int64_t ne0, int64_t ne1, HnError *err)
{
  if (v->skip_tensor && strcmp(name, v->skip_tensor) == 0)
    return true;
  if (v->bad_shape && strcmp(name, v->bad_shape) == 0)
    ne1 += 1;
  HnType type = v->bad_type && strcmp(name, v->bad_type) == 0 ? HN_TYPE_Q8_1 : HN_TYPE_F32;
  int64_t ne[2] = { ne0, ne1 };
  return hn_gguf_writer_add_tensor(w, name, type, ne1 == 1 ? 1 : 2, ne, err);
}

static char *
write_model(const char *file, const Variant *v)
{
  char *path = g_build_filename(tmpdir, file, NULL);
  HnError err = { 0 };
  HnGgufWriter *w = hn_gguf_writer_new(&err);
  const char *arch = v->arch ? v->arch : "llama";
  char key[128];
  g_assert_true(hn_gguf_writer_set_str(w, "general.architecture", arch, &err));
  struct { const char *suffix; uint32_t value; } keys[] = {
    { "embedding_length", E }, { "block_count", L }, { "attention.head_count", v->head_count ? v->head_count : H },
    { "attention.head_count_kv", HKV }, { "feed_forward_length", FF }, { "context_length", 64 },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
    g_snprintf(key, sizeof key, "%s.%s", arch, keys[i].suffix);
    if (v->skip_key && strcmp(keys[i].suffix, v->skip_key) == 0)
      continue;
    g_assert_true(hn_gguf_writer_set_u32(w, key, keys[i].value, &err));
  }
  int kv = HKV * (E / H);
  g_assert_true(add(w, v, "token_embd.weight", E, V, &err));
  g_assert_true(add(w, v, "output_norm.weight", E, 1, &err));
  g_assert_true(add(w, v, "blk.0.attn_norm.weight", E, 1, &err));
  g_assert_true(add(w, v, "blk.0.attn_q.weight", E, E, &err));
  g_assert_true(add(w, v, "blk.0.attn_k.weight", E, kv, &err));
  g_assert_true(add(w, v, "blk.0.attn_v.weight", E, kv, &err));
  g_assert_true(add(w, v, "blk.0.attn_output.weight", E, E, &err));
  g_assert_true(add(w, v, "blk.0.ffn_norm.weight", E, 1, &err));
  g_assert_true(add(w, v, "blk.0.ffn_gate.weight", E, FF, &err));
  g_assert_true(add(w, v, "blk.0.ffn_up.weight", E, FF, &err));
  g_assert_true(add(w, v, "blk.0.ffn_down.weight", FF, E, &err));
  g_assert_true(hn_gguf_writer_begin(w, path, &err));
  /* small deterministic values; the weights' content does not matter here */
  static float block[1024];
  for (int i = 0; i < 1024; i++)
    block[i] = (float) ((i * 37) % 17 - 8) / 64.0f;
  for (int64_t i = 0;; i++) {
    size_t nbytes = hn_gguf_writer_tensor_nbytes(w, i);
    if (nbytes == 0)
      break;
    for (size_t done = 0; done < nbytes;) {
      size_t n = MIN(sizeof block, nbytes - done);
      g_assert_true(hn_gguf_writer_write(w, block, n, &err));
      done += n;
    }
  }
  if (!hn_gguf_writer_finish(w, &err))
    g_error("%s", err.message);
  hn_gguf_writer_free(w);
  return path;
}

/* The exit status of hanashi-cli with @args; its standard error in @err_out (to free). */
static int
run_cli(const char *const *args, char **err_out)
{
  CliRun r = cli_run_argv(args);
  *err_out = r.err;
  g_free(r.out);
  return r.status;
}

static void
expect_error(const char *path, const char *needle)
{
  const char *cmds[][8] = {
    { "info", path, NULL },
    { "logits", "-m", path, "--tokens", "1,2", "-o", "/dev/null", NULL },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
    g_autofree char *err = NULL;
    g_assert_cmpint(run_cli(cmds[i], &err), ==, 1);
    g_assert_true(g_str_has_prefix(err, "hanashi-cli: error: "));
    if (!strstr(err, needle))
      g_error("expected \"%s\" in: %s", needle, err);
    g_assert_cmpint((int) (strchr(err, '\n') - err), ==, (int) strlen(err) - 1); /* one line */
  }
}

static void
test_valid(void)
{
  Variant v = { 0 };
  g_autofree char *path = write_model("valid.gguf", &v);
  g_autofree char *out = g_build_filename(tmpdir, "out.f32", NULL);
  const char *info[] = { "info", path, NULL };
  const char *logits[] = { "logits", "-m", path, "--tokens", "1,2,3", "-o", out, "-t", "2", NULL };
  g_autofree char *e1 = NULL, *e2 = NULL;
  g_assert_cmpint(run_cli(info, &e1), ==, 0);
  g_assert_cmpint(run_cli(logits, &e2), ==, 0);
  GStatBuf st;
  g_assert_cmpint(g_stat(out, &st), ==, 0);
  g_assert_cmpint(st.st_size, ==, 3 * V * 4);
  /* bad input to a good model */
  const char *bad_token[] = { "logits", "-m", path, "--tokens", "1,16", "-o", out, NULL };
  const char *bad_list[] = { "logits", "-m", path, "--tokens", "1,x", "-o", out, NULL };
  const char *no_file[] = { "info", "/nonexistent/model.gguf", NULL };
  const char *const *bad[] = { bad_token, bad_list, no_file };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *err = NULL;
    g_assert_cmpint(run_cli(bad[i], &err), ==, 1);
    g_assert_true(g_str_has_prefix(err, "hanashi-cli: error: "));
  }
  g_unlink(out);
  g_unlink(path);
}

static void
test_variant(gconstpointer data)
{
  const struct { const char *name; Variant v; const char *needle; } *c = data;
  g_autofree char *file = g_strdup_printf("%s.gguf", c->name);
  g_autofree char *path = write_model(file, &c->v);
  expect_error(path, c->needle);
  g_unlink(path);
}

/* The exit status, the one-line stderr, and that it contains every needle. */
static void
expect_cli_error(const char *const *args, const char *const *needles)
{
  g_autofree char *err = NULL;
  g_assert_cmpint(run_cli(args, &err), ==, 1);
  g_assert_true(g_str_has_prefix(err, "hanashi-cli: error: "));
  g_assert_cmpint((int) (strchr(err, '\n') - err), ==, (int) strlen(err) - 1);
  for (; *needles; needles++)
    if (!strstr(err, *needles))
      g_error("expected \"%s\" in: %s", *needles, err);
  g_assert_null(strstr(err, "not a GGUF"));
  g_test_message("%s", err);
}

static char *
stories_path(void)
{
  const char *dir = g_getenv("HANASHI_TESTDATA");
  char *path = dir ? g_build_filename(dir, "models", "stories260K-f32.gguf", NULL) : NULL;
  if (path == NULL || !g_file_test(path, G_FILE_TEST_EXISTS)) {
    g_free(path);
    return NULL;
  }
  return path;
}

/* A download cut off anywhere -- inside the header, inside the vocabulary, inside the
 * weights, one byte short -- is reported as an incomplete file (HN_ERR_TRUNCATED), never as
 * "not a GGUF model", by the engine and by every command that opens the model. */
static void
test_truncated(void)
{
  g_autofree char *src = stories_path();
  if (src == NULL) {
    g_test_skip("stories260K-f32.gguf not in HANASHI_TESTDATA");
    return;
  }
  GStatBuf st;
  g_assert_cmpint(g_stat(src, &st), ==, 0);
  const gsize cuts[] = { 20, 3000, (gsize) st.st_size / 2, (gsize) st.st_size - 1 };
  for (size_t i = 0; i < G_N_ELEMENTS(cuts); i++) {
    g_autofree char *path = damaged_model_truncated(src, tmpdir, "cut.gguf", cuts[i]);
    HnError err = { 0 };
    g_assert_null(hn_model_load(path, NULL, &err));
    g_assert_cmpint(err.code, ==, HN_ERR_TRUNCATED);
    g_assert_nonnull(strstr(err.message, "interrupted"));
    const char *info[] = { "info", path, NULL };
    const char *generate[] = { "generate", "-m", path, "--tokens", "1,2", "-n", "1", NULL };
    const char *needles[] = { "incomplete", "download it again", NULL };
    expect_cli_error(info, needles);
    expect_cli_error(generate, needles);
    g_unlink(path);
  }
  /* the tensor that runs past the end is named, with the sizes */
  g_autofree char *path = damaged_model_truncated(src, tmpdir, "cut.gguf", (gsize) st.st_size - 1);
  HnError err = { 0 };
  g_assert_null(hn_model_load(path, NULL, &err));
  g_assert_nonnull(strstr(err.message, "extends past end of file"));
  /* exact byte counts, grouped by thousands: one byte short must not read as "1.2 of 1.2 MB" */
  GString *have = g_string_new(NULL), *need = g_string_new(NULL);
  g_autofree char *have_digits = g_strdup_printf("%" G_GSIZE_FORMAT, (gsize) st.st_size - 1);
  g_autofree char *need_digits = g_strdup_printf("%" G_GSIZE_FORMAT, (gsize) st.st_size);
  for (size_t i = 0; have_digits[i]; i++)
    g_string_append_printf(have, "%s%c", i && (strlen(have_digits) - i) % 3 == 0 ? "," : "", have_digits[i]);
  for (size_t i = 0; need_digits[i]; i++)
    g_string_append_printf(need, "%s%c", i && (strlen(need_digits) - i) % 3 == 0 ? "," : "", need_digits[i]);
  g_autofree char *expected = g_strdup_printf("has only %s of its %s bytes (99%%)", have->str, need->str);
  if (!strstr(err.message, expected))
    g_error("expected \"%s\" in: %s", expected, err.message);
  g_string_free(have, TRUE);
  g_string_free(need, TRUE);
  g_unlink(path);
}

static bool
count_token(int32_t token, const char *text, size_t len, void *user_data)
{
  (void) token; (void) text; (void) len;
  (*(int *) user_data)++;
  return true;
}

/* NaN weights make every score NaN: generation stops with HN_ERR_INVALID_NUMBERS and a
 * sentence saying so, greedy or sampling, instead of blaming the logit bias. */
static void
test_nan_weights(void)
{
  g_autofree char *src = stories_path();
  if (src == NULL) {
    g_test_skip("stories260K-f32.gguf not in HANASHI_TESTDATA");
    return;
  }
  g_autofree char *path = damaged_model_nan(src, tmpdir, "nan.gguf", "blk.1.ffn_up.weight");
  HnError err = { 0 };
  HnModel *model = hn_model_load(path, NULL, &err);
  g_assert_nonnull(model);
  HnVocab *vocab = hn_vocab_load(hn_model_gguf(model), &err);
  g_assert_nonnull(vocab);
  HnContextParams cp = hn_context_default_params();
  cp.n_ctx = 64;
  HnContext *ctx = hn_context_new(model, &cp, &err);
  g_assert_nonnull(ctx);
  HnGenModelBackend backend = { 0 };
  g_assert_true(hn_gen_model_backend_init(&backend, ctx, vocab, &err));
  for (int sampling = 0; sampling < 2; sampling++) {
    HnSamplerParams sp;
    hn_sampler_params_init(&sp);
    sp.temperature = sampling ? 0.8f : 0.0f;
    sp.max_new_tokens = 4;
    int32_t prompt[] = { 1, 20, 30 };
    int n_tokens = 0;
    HnGenRequest req;
    hn_gen_request_init(&req);
    req.prompt = prompt;
    req.n_prompt = G_N_ELEMENTS(prompt);
    req.sampler = &sp;
    req.on_token = count_token;
    req.user_data = &n_tokens;
    HnGenResult result;
    hn_error_clear(&err);
    g_assert_false(hn_generate_with_backend(&backend.backend, &req, &result, &err));
    g_assert_cmpint(err.code, ==, HN_ERR_INVALID_NUMBERS);
    g_assert_nonnull(strstr(err.message, "invalid numbers"));
    g_assert_null(strstr(err.message, "logit bias"));
    g_assert_cmpint(result.stop_reason, ==, HN_GEN_STOP_ERROR);
    g_assert_cmpint(n_tokens, ==, 0);
  }
  hn_gen_model_backend_clear(&backend);
  hn_context_free(ctx);
  hn_vocab_free(vocab);
  hn_model_free(model);

  const char *greedy[] = { "generate", "-m", path, "--tokens", "1,20,30", "-n", "4", NULL };
  const char *sampled[] = { "generate", "-m", path, "-p", "Once upon a time", "-n", "4", "--temp", "0.8", NULL };
  const char *needles[] = { "The model produced invalid numbers", "download the model again", NULL };
  expect_cli_error(greedy, needles);
  expect_cli_error(sampled, needles);
  g_unlink(path);
}

static const struct { const char *name; Variant v; const char *needle; } cases[] = {
  { "arch", { .arch = "gpt2" }, "unsupported architecture 'gpt2'" },
  { "missing-key", { .skip_key = "block_count" }, "llama.block_count" },
  { "missing-tensor", { .skip_tensor = "blk.0.ffn_up.weight" }, "missing tensor 'blk.0.ffn_up.weight'" },
  { "missing-norm", { .skip_tensor = "output_norm.weight" }, "output_norm.weight" },
  { "shape", { .bad_shape = "blk.0.attn_k.weight" }, "tensor 'blk.0.attn_k.weight' has shape" },
  { "embd-shape", { .bad_shape = "blk.0.ffn_down.weight" }, "blk.0.ffn_down.weight" },
  { "type", { .bad_type = "blk.0.attn_v.weight" }, "'blk.0.attn_v.weight'" },
  { "heads", { .head_count = 5 }, "inconsistent hyper-parameters" },
};

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  if (!g_getenv("HANASHI_CLI")) {
    g_test_skip("HANASHI_CLI not set");
    return g_test_run();
  }
  tmpdir = g_dir_make_tmp("hanashi-bad-model-XXXXXX", NULL);
  g_assert_nonnull(tmpdir);
  g_test_add_func("/bad-model/valid", test_valid);
  g_test_add_func("/bad-model/truncated", test_truncated);
  g_test_add_func("/bad-model/nan-weights", test_nan_weights);
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *name = g_strdup_printf("/bad-model/%s", cases[i].name);
    g_test_add_data_func(name, &cases[i], test_variant);
  }
  int status = g_test_run();
  g_rmdir(tmpdir);
  g_free(tmpdir);
  return status;
}
