/* Model-level errors (the GGUF itself is well-formed): unsupported architecture, missing
 * keys and tensors, wrong shapes, unsupported weight types.  Each one must give exit
 * status 1 and one "hanashi-cli: error: ..." line naming the problem.  The files are
 * written by the test itself into a temporary directory. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

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

static int
run_cli(const char *const *args, char **err_out)
{
  GPtrArray *argv = g_ptr_array_new();
  g_ptr_array_add(argv, (gpointer) g_getenv("HANASHI_CLI"));
  for (; *args; args++)
    g_ptr_array_add(argv, (gpointer) *args);
  g_ptr_array_add(argv, NULL);
  int status = 0;
  GError *gerr = NULL;
  g_assert_true(g_spawn_sync(NULL, (char **) argv->pdata, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                             NULL, err_out, &status, &gerr));
  g_ptr_array_free(argv, TRUE);
  g_assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
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
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *name = g_strdup_printf("/bad-model/%s", cases[i].name);
    g_test_add_data_func(name, &cases[i], test_variant);
  }
  int status = g_test_run();
  g_rmdir(tmpdir);
  g_free(tmpdir);
  return status;
}
