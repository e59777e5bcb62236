/* Resource limits: MemAvailable parsing and its test override, the refusal sentence, the
 * estimate for a real (tiny) model, refusal exactly at the boundary, the clamped context
 * with its notice, and both as hanashi-cli prints them.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "hn-context.h"
#include "hn-memory.h"
#include "hn-model.h"
#include "cli-run.h"

static char *
model_path (void)
{
  return g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", "tiny-llama-spm-q8_0.gguf", NULL);
}

static void
test_parse_meminfo (void)
{
  uint64_t bytes = 0;
  g_assert_true (hn_memory_parse_meminfo ("MemTotal:       24684012 kB\nMemFree:        23721348 kB\n"
                                          "MemAvailable:   24241220 kB\nBuffers:           31064 kB\n", &bytes));
  g_assert_cmpuint (bytes, ==, 24241220ull * 1024);
  g_assert_false (hn_memory_parse_meminfo ("MemTotal: 100 kB\nMemFree: 50 kB\n", &bytes));
  g_assert_false (hn_memory_parse_meminfo ("MemAvailable: lots\n", &bytes));
  g_assert_false (hn_memory_parse_meminfo ("MemAvailable: 100 MB\n", &bytes));
  g_assert_false (hn_memory_parse_meminfo ("MemAvailable: 99999999999999999999999 kB\n", &bytes));
  g_assert_false (hn_memory_parse_meminfo ("", &bytes));
}

static void
test_format (void)
{
  char buf[32];
  hn_memory_format (5200000000ull, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "5.2 GB");
  hn_memory_format (1000000000ull, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "1.0 GB");
  hn_memory_format (640000000ull, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "640 MB");
  hn_memory_format (33400000ull, buf, sizeof buf);
  g_assert_cmpstr (buf, ==, "33 MB");
}

static void
test_available_override (void)
{
  uint64_t bytes = 0;
  g_setenv ("HANASHI_MEM_AVAILABLE_MB", "3100", TRUE);
  g_assert_true (hn_memory_available (&bytes));
  g_assert_cmpuint (bytes, ==, 3100000000ull);
  /* Junk in the override is ignored: the real MemAvailable is read instead. */
  g_setenv ("HANASHI_MEM_AVAILABLE_MB", "3100x", TRUE);
  g_assert_true (hn_memory_available (&bytes));
  g_assert_cmpuint (bytes, !=, 3100000000ull);
  g_assert_cmpuint (bytes, >, 0);
  g_unsetenv ("HANASHI_MEM_AVAILABLE_MB");
}

static void
test_check_sentence (void)
{
  HnError err = { 0 };
  g_setenv ("HANASHI_MEM_AVAILABLE_MB", "3100", TRUE);
  HnMemoryNeed small_kv = { .weights = 4600000000ull, .kv_cache = 400000000ull, .scratch = 200000000ull, .n_ctx = 4096 };
  g_assert_false (hn_memory_check (&small_kv, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_NOMEM);
  g_assert_cmpstr (err.message, ==, "This model needs about 5.2 GB of memory but only 3.1 GB is available.");

  /* A context that takes a big share is named, since it is what people can change. */
  HnMemoryNeed big_kv = { .weights = 1000000000ull, .kv_cache = 4000000000ull, .scratch = 200000000ull, .n_ctx = 131072 };
  g_assert_false (hn_memory_check (&big_kv, &err));
  g_assert_cmpstr (err.message, ==, "This model needs about 5.2 GB of memory but only 3.1 GB is available. "
                   "The context of 131072 tokens takes 4.0 GB of that; a smaller context size needs less.");

  HnMemoryNeed fits = { .weights = 3000000000ull, .kv_cache = 50000000ull, .scratch = 50000000ull, .n_ctx = 2048 };
  g_assert_true (hn_memory_check (&fits, &err));

  /* Weights the process holds already (the copy placed at load) are no longer in
   * MemAvailable: they count as available to the check, and the sentence says so. */
  HnMemoryNeed held = small_kv;
  held.held = 2200000000ull;
  g_assert_true (hn_memory_check (&held, &err));
  held.held = 1000000000ull;
  g_assert_false (hn_memory_check (&held, &err));
  g_assert_cmpstr (err.message, ==, "This model needs about 5.2 GB of memory but only 4.1 GB is available.");
  /* never more than the weights */
  HnMemoryNeed odd = fits;
  odd.kv_cache = 3200000000ull;
  odd.held = 10000000000ull;
  g_assert_false (hn_memory_check (&odd, &err));
  g_unsetenv ("HANASHI_MEM_AVAILABLE_MB");
}

static uint32_t
gguf_u32 (const HnModel *model, const char *key)
{
  uint32_t value = 0;
  HnError err = { 0 };
  g_assert_true (hn_gguf_get_u32_or (hn_model_gguf (model), key, 0, &value, &err));
  return value;
}

static void
test_model_estimate_and_refusal (void)
{
  g_autofree char *path = model_path ();
  HnError err = { 0 };
  HnModel *model = hn_model_load (path, NULL, &err);
  g_assert_nonnull (model);

  HnContextParams params = hn_context_default_params ();
  params.n_ctx = 512;
  params.n_threads = 1;
  HnMemoryNeed need;
  g_assert_true (hn_context_memory_need (model, &params, &need));
  /* KV: K and V, F16, every layer and cell, plus the cell table. */
  uint64_t kv_dim = gguf_u32 (model, "llama.attention.head_count_kv")
                    * (gguf_u32 (model, "llama.embedding_length") / gguf_u32 (model, "llama.attention.head_count"));
  g_assert_cmpuint (need.kv_cache, ==, (uint64_t) hn_model_n_layer (model) * 512 * kv_dim * 4 + 512 * sizeof (HnKvCell));
  g_assert_cmpint (need.n_ctx, ==, 512);
  /* Weights: all tensor bytes (every one is read per token), just under the file size. */
  uint64_t tensors = 0;
  for (int64_t i = 0; i < hn_gguf_n_tensors (hn_model_gguf (model)); i++)
    tensors += hn_gguf_tensor (hn_model_gguf (model), i)->nbytes;
  g_assert_cmpuint (need.weights, >=, tensors);
  g_assert_cmpuint (need.weights, <, hn_model_file_size (model));
  g_assert_cmpuint (need.scratch, >, 0);
  /* A bigger context needs more. */
  HnMemoryNeed need_2k;
  params.n_ctx = 2048;
  g_assert_true (hn_context_memory_need (model, &params, &need_2k));
  g_assert_cmpuint (need_2k.kv_cache, ==, 4 * need.kv_cache);
  params.n_ctx = 512;

  /* The weights copied at load are held already (none with HANASHI_REGROUP=0). */
  g_assert_cmpuint (need.held, <=, need.weights);
  if (!g_getenv ("HANASHI_REGROUP"))
    g_assert_cmpuint (need.held, >, 0);

  /* Exactly at the boundary: one megabyte short is refused, enough is accepted. */
  uint64_t total = hn_memory_need_total (&need), beyond_held = total - need.held;
  g_autofree char *short_mb = g_strdup_printf ("%" G_GUINT64_FORMAT, beyond_held / 1000000);
  g_autofree char *enough_mb = g_strdup_printf ("%" G_GUINT64_FORMAT, (beyond_held + 999999) / 1000000);
  g_setenv ("HANASHI_MEM_AVAILABLE_MB", short_mb, TRUE);
  g_assert_null (hn_context_new (model, &params, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_NOMEM);
  char need_s[32], avail_s[32];
  hn_memory_format (total, need_s, sizeof need_s);
  hn_memory_format (beyond_held / 1000000 * 1000000 + need.held, avail_s, sizeof avail_s);
  g_autofree char *expected = g_strdup_printf ("This model needs about %s of memory but only %s is available.",
                                               need_s, avail_s);
  g_assert_cmpstr (err.message, ==, expected);
  g_test_message ("%s", err.message);

  g_setenv ("HANASHI_MEM_AVAILABLE_MB", enough_mb, TRUE);
  HnContext *ctx = hn_context_new (model, &params, &err);
  g_assert_nonnull (ctx);
  hn_context_free (ctx);
  g_unsetenv ("HANASHI_MEM_AVAILABLE_MB");
  hn_model_free (model);
}

static void
test_context_clamped_with_notice (void)
{
  g_autofree char *path = model_path ();
  HnError err = { 0 };
  HnModel *model = hn_model_load (path, NULL, &err);
  g_assert_nonnull (model);
  g_assert_cmpint (hn_model_n_ctx_train (model), ==, 2048);
  HnContextParams params = hn_context_default_params ();
  params.n_threads = 1;

  params.n_ctx = 1000000;
  HnContext *ctx = hn_context_new (model, &params, &err);
  g_assert_nonnull (ctx);
  g_assert_cmpint (hn_context_n_ctx (ctx), ==, 2048);
  g_assert_cmpstr (hn_context_notice (ctx), ==,
                   "The context size of 1000000 tokens is more than this model supports; using 2048 tokens.");
  hn_context_free (ctx);

  /* What the model supports, or "the model's own" (0), changes nothing and says nothing. */
  int quiet[] = { 2048, 256, 0, -5 };
  int expect[] = { 2048, 256, 2048, 2048 };
  for (gsize i = 0; i < G_N_ELEMENTS (quiet); i++)
    {
      params.n_ctx = quiet[i];
      ctx = hn_context_new (model, &params, &err);
      g_assert_nonnull (ctx);
      g_assert_cmpint (hn_context_n_ctx (ctx), ==, expect[i]);
      g_assert_null (hn_context_notice (ctx));
      hn_context_free (ctx);
    }
  hn_model_free (model);
}

static int
run_cli (const char *const *args, const char *mem_mb, char **out, char **err)
{
  g_auto (GStrv) envp = g_get_environ ();
  envp = mem_mb ? g_environ_setenv (envp, "HANASHI_MEM_AVAILABLE_MB", mem_mb, TRUE)
                : g_environ_unsetenv (envp, "HANASHI_MEM_AVAILABLE_MB");
  CliRun r = cli_run_full (NULL, NULL, envp, args);
  *out = r.out;
  *err = r.err;
  return r.status;
}

static void
test_cli (void)
{
  g_autofree char *model = model_path ();
  const char *clamped[] = { "generate", "-m", model, "-p", "Hello", "-n", "2", "-t", "1", "-c", "100000", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (run_cli (clamped, NULL, &out, &err), ==, 0);
  g_assert_cmpstr (err, ==, "hanashi-cli: notice: The context size of 100000 tokens is more than this model "
                   "supports; using 2048 tokens.\n");
  g_assert_cmpstr (out, !=, "");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  const char *plain[] = { "generate", "-m", model, "-p", "Hello", "-n", "2", "-t", "1", NULL };
  g_assert_cmpint (run_cli (plain, "1", &out, &err), ==, 1);
  g_assert_true (g_str_has_prefix (err, "hanashi-cli: error: This model needs about "));
  /* what is available: the 1 MB given plus the weights the load copied already */
  g_assert_nonnull (strstr (err, " MB of memory but only "));
  g_assert_true (g_str_has_suffix (err, " MB is available.\n"));
  g_assert_cmpstr (out, ==, "");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_unsetenv ("HANASHI_MEM_AVAILABLE_MB");
  g_test_add_func ("/memory/parse-meminfo", test_parse_meminfo);
  g_test_add_func ("/memory/format", test_format);
  g_test_add_func ("/memory/available-override", test_available_override);
  g_test_add_func ("/memory/check-sentence", test_check_sentence);
  g_test_add_func ("/memory/model-estimate-and-refusal", test_model_estimate_and_refusal);
  g_test_add_func ("/memory/context-clamped-with-notice", test_context_clamped_with_notice);
  g_test_add_func ("/memory/cli", test_cli);
  return g_test_run ();
}
