/* Prompt cache on a real model: a conversation continued from its session file gives the same
 * logits, bit for bit, as one that never stopped; an edit reuses exactly the tokens before it
 * and evaluates only the rest; every damaged, foreign or missing file restores nothing and
 * re-evaluation gives the same result; a failed save leaves the previous file as it was.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "hn-context.h"
#include "hn-generate-model.h"
#include "hn-kv-cache.h"
#include "hn-model.h"
#include "hn-prompt-cache.h"
#include "hn-vocab.h"

#define MODEL "tiny-llama-spm-q8_0.gguf"
enum { N_PROMPT = 24, N_CONTINUE = 4 };

static char *tmpdir;

static char *
model_path (const char *name)
{
  return g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", name, NULL);
}

static HnModel *
load_model (const char *name)
{
  g_autofree char *path = model_path (name);
  HnError err = { 0 };
  HnModel *m = hn_model_load (path, NULL, &err);
  if (m == NULL)
    g_error ("%s: %s", path, err.message);
  return m;
}

static HnContext *
new_context (const HnModel *model)
{
  HnContextParams p = hn_context_default_params ();
  p.n_ctx = 128;
  p.n_threads = 2;
  HnError err = { 0 };
  HnContext *ctx = hn_context_new (model, &p, &err);
  g_assert_nonnull (ctx);
  return ctx;
}

/* A fixed prompt of valid ids (BOS first). */
static void
make_prompt (int32_t *tokens, int n, int32_t n_vocab)
{
  tokens[0] = 1;
  for (int i = 1; i < n; i++)
    tokens[i] = (int32_t) (100 + (i * 7919) % (n_vocab - 200));
}

/* Evaluates tokens[from .. to) at their positions as one batch; returns a copy of the last
 * row of logits. */
static float *
eval (HnContext *ctx, const int32_t *tokens, int from, int to)
{
  int32_t pos[256];
  for (int i = from; i < to; i++)
    pos[i - from] = i;
  HnBatch batch = { to - from, tokens + from, pos, NULL, NULL };
  HnError err = { 0 };
  if (!hn_context_decode (ctx, &batch, &err))
    g_error ("decode: %s", err.message);
  int n_vocab = hn_model_n_vocab (hn_context_model (ctx));
  return g_memdup2 (hn_context_get_logits (ctx, 0), sizeof (float) * (gsize) n_vocab);
}

static void
assert_same_logits (const float *a, const float *b, int n_vocab)
{
  g_assert_cmpint (memcmp (a, b, sizeof (float) * (gsize) n_vocab), ==, 0);
}

/* Prompt in one batch, then N_CONTINUE tokens one by one: the logits after each. */
static float **
continue_one_by_one (HnContext *ctx, const int32_t *all, int start)
{
  float **rows = g_new0 (float *, N_CONTINUE);
  for (int k = 0; k < N_CONTINUE; k++)
    rows[k] = eval (ctx, all, start + k, start + k + 1);
  return rows;
}

static void
free_rows (float **rows)
{
  for (int k = 0; k < N_CONTINUE; k++)
    g_free (rows[k]);
  g_free (rows);
}

static void
test_bit_identical_continuation (void)
{
  HnModel *model = load_model (MODEL);
  int n_vocab = hn_model_n_vocab (model);
  int32_t all[N_PROMPT + N_CONTINUE];
  make_prompt (all, N_PROMPT + N_CONTINUE, n_vocab);
  g_autofree char *path = g_build_filename (tmpdir, "continue.hnsession", NULL);

  /* never stopped */
  HnContext *a = new_context (model);
  g_free (eval (a, all, 0, N_PROMPT));
  float **never_stopped = continue_one_by_one (a, all, N_PROMPT);

  /* stopped after the prompt, saved, loaded into a new context */
  HnContext *b = new_context (model);
  g_free (eval (b, all, 0, N_PROMPT));
  HnError err = { 0 };
  g_assert_true (hn_prompt_cache_save (b, path, all, N_PROMPT, &err));
  hn_context_free (b);

  HnContext *c = new_context (model);
  uint32_t reused = 99;
  g_assert_true (hn_prompt_cache_load (c, path, all, N_PROMPT + N_CONTINUE, &reused, &err));
  g_assert_cmpuint (reused, ==, N_PROMPT);
  g_assert_cmpint (hn_kv_cache_n_used (hn_context_kv (c)), ==, N_PROMPT);
  float **resumed = continue_one_by_one (c, all, N_PROMPT);
  for (int k = 0; k < N_CONTINUE; k++)
    assert_same_logits (never_stopped[k], resumed[k], n_vocab);

  free_rows (never_stopped);
  free_rows (resumed);
  hn_context_free (a);
  hn_context_free (c);
  hn_model_free (model);
}

/* Through the generation loop, as the CLI and the engine thread use it: after an edit at
 * token E, exactly E tokens come from the file and N_PROMPT - E are evaluated. */
static void
test_edit_reuses_prefix (void)
{
  HnModel *model = load_model (MODEL);
  HnError err = { 0 };
  HnVocab *vocab = hn_vocab_load (hn_model_gguf (model), &err);
  g_assert_nonnull (vocab);
  int n_vocab = hn_model_n_vocab (model);
  int32_t prompt[N_PROMPT];
  make_prompt (prompt, N_PROMPT, n_vocab);
  g_autofree char *path = g_build_filename (tmpdir, "edit.hnsession", NULL);

  HnContext *ctx = new_context (model);
  g_free (eval (ctx, prompt, 0, N_PROMPT));
  g_assert_true (hn_prompt_cache_save (ctx, path, prompt, N_PROMPT, &err));
  hn_context_free (ctx);

  static const int edits[] = { 1, 9, 17, N_PROMPT - 1 };
  for (size_t e = 0; e < G_N_ELEMENTS (edits); e++) {
    int32_t edited[N_PROMPT];
    memcpy (edited, prompt, sizeof prompt);
    edited[edits[e]] = edited[edits[e]] == 42 ? 43 : 42;
    ctx = new_context (model);
    uint32_t reused = 0;
    g_assert_true (hn_prompt_cache_load (ctx, path, edited, N_PROMPT, &reused, &err));
    g_assert_cmpuint (reused, ==, (guint) edits[e]);

    HnGenModelBackend backend = { 0 };
    g_assert_true (hn_gen_model_backend_init (&backend, ctx, vocab, &err));
    HnSamplerParams sp;
    hn_sampler_params_init (&sp);
    sp.temperature = 0.0f;
    sp.max_new_tokens = 1;
    HnGenRequest req;
    hn_gen_request_init (&req);
    req.prompt = edited;
    req.n_prompt = N_PROMPT;
    req.n_cached = reused;
    req.sampler = &sp;
    HnGenResult result;
    g_assert_true (hn_generate_with_backend (&backend.backend, &req, &result, &err));
    g_assert_cmpuint (result.n_prompt_evaluated, ==, (gsize) (N_PROMPT - edits[e]));
    hn_gen_model_backend_clear (&backend);
    hn_context_free (ctx);
  }
  hn_vocab_free (vocab);
  hn_model_free (model);
}

static void
write_bytes (const char *path, const guint8 *data, gsize len)
{
  g_assert_true (g_file_set_contents (path, (const char *) data, (gssize) len, NULL));
}

/* Load must fail, leave the context empty, and fresh evaluation must match the baseline. */
static void
assert_rejected (const HnModel *model, const char *path, const int32_t *prompt, const float *baseline)
{
  HnContext *ctx = new_context (model);
  /* something in the cache first: a failed load must still leave it empty */
  g_free (eval (ctx, prompt, 0, 3));
  uint32_t reused = 77;
  HnError err = { 0 };
  g_assert_false (hn_prompt_cache_load (ctx, path, prompt, N_PROMPT, &reused, &err));
  g_assert_cmpuint (reused, ==, 0);
  g_assert_cmpstr (err.message, !=, "");
  g_assert_cmpint (hn_kv_cache_n_used (hn_context_kv (ctx)), ==, 0);
  g_autofree float *logits = eval (ctx, prompt, 0, N_PROMPT);
  assert_same_logits (baseline, logits, hn_model_n_vocab (model));
  hn_context_free (ctx);
}

static void
test_corruption_falls_back (void)
{
  HnModel *model = load_model (MODEL);
  int n_vocab = hn_model_n_vocab (model);
  int32_t prompt[N_PROMPT];
  make_prompt (prompt, N_PROMPT, n_vocab);
  g_autofree char *good = g_build_filename (tmpdir, "good.hnsession", NULL);
  g_autofree char *bad = g_build_filename (tmpdir, "bad.hnsession", NULL);

  HnContext *ctx = new_context (model);
  g_autofree float *baseline = eval (ctx, prompt, 0, N_PROMPT);
  HnError err = { 0 };
  g_assert_true (hn_prompt_cache_save (ctx, good, prompt, N_PROMPT, &err));
  hn_context_free (ctx);

  g_autofree guint8 *bytes = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (good, (char **) &bytes, &len, NULL));
  int cases = 0;

  /* truncation: every offset in the header, then a spread through the payload */
  for (gsize cut = 0; cut < len; cut += cut < 96 ? 1 : len / 37 + 1, cases++) {
    write_bytes (bad, bytes, cut);
    assert_rejected (model, bad, prompt, baseline);
  }
  /* one flipped bit at offsets spread over header and payload */
  for (gsize at = 0; at < len; at += at < 96 ? 3 : len / 29 + 1, cases++) {
    g_autofree guint8 *copy = g_memdup2 (bytes, len);
    copy[at] ^= 0x10;
    write_bytes (bad, copy, len);
    assert_rejected (model, bad, prompt, baseline);
  }
  /* a newer format version (header checksum fixed up is not possible without the writer:
   * the version check must come first or the checksum catches it; both are rejections) */
  {
    g_autofree guint8 *copy = g_memdup2 (bytes, len);
    copy[8] = 99;
    write_bytes (bad, copy, len);
    assert_rejected (model, bad, prompt, baseline);
    cases++;
  }
  /* a file that is not a session at all, an empty one, a missing one, a directory */
  write_bytes (bad, (const guint8 *) "GGUF this is not a session", 26);
  assert_rejected (model, bad, prompt, baseline);
  write_bytes (bad, (const guint8 *) "", 0);
  assert_rejected (model, bad, prompt, baseline);
  g_autofree char *missing = g_build_filename (tmpdir, "missing.hnsession", NULL);
  assert_rejected (model, missing, prompt, baseline);
  assert_rejected (model, tmpdir, prompt, baseline);
  cases += 4;

  /* another model's file: same shape, other weights */
  HnModel *other = load_model ("quant-llama-v512-q8_0.gguf");
  HnModel *other2 = load_model ("quant-llama-v512-q4_0.gguf");
  int32_t small_prompt[N_PROMPT];
  make_prompt (small_prompt, N_PROMPT, hn_model_n_vocab (other));
  ctx = new_context (other);
  g_autofree float *other_baseline = eval (ctx, small_prompt, 0, N_PROMPT);
  g_assert_true (hn_prompt_cache_save (ctx, bad, small_prompt, N_PROMPT, &err));
  hn_context_free (ctx);
  HnContext *ctx2 = new_context (other2);
  g_autofree float *other2_baseline = eval (ctx2, small_prompt, 0, N_PROMPT);
  hn_context_free (ctx2);
  assert_rejected (other2, bad, small_prompt, other2_baseline);
  /* ... and the tiny LLaMA refuses it too */
  assert_rejected (model, bad, prompt, baseline);
  cases += 2;
  g_test_message ("%d damaged or foreign files rejected", cases);
  (void) other_baseline;

  /* the good file still loads */
  ctx = new_context (model);
  uint32_t reused = 0;
  g_assert_true (hn_prompt_cache_load (ctx, good, prompt, N_PROMPT, &reused, &err));
  g_assert_cmpuint (reused, ==, N_PROMPT);
  hn_context_free (ctx);
  hn_model_free (other);
  hn_model_free (other2);
  hn_model_free (model);
}

static void
test_failed_save_keeps_previous (void)
{
  HnModel *model = load_model (MODEL);
  int32_t prompt[N_PROMPT];
  make_prompt (prompt, N_PROMPT, hn_model_n_vocab (model));
  g_autofree char *path = g_build_filename (tmpdir, "keep.hnsession", NULL);
  HnContext *ctx = new_context (model);
  g_free (eval (ctx, prompt, 0, N_PROMPT));
  HnError err = { 0 };
  g_assert_true (hn_prompt_cache_save (ctx, path, prompt, N_PROMPT, &err));
  g_autofree char *before = NULL;
  gsize before_len = 0;
  g_assert_true (g_file_get_contents (path, &before, &before_len, NULL));

  /* more tokens than the cache holds for sequence 0: refused before anything is written */
  int32_t longer[N_PROMPT + 8];
  make_prompt (longer, N_PROMPT + 8, hn_model_n_vocab (model));
  g_assert_false (hn_prompt_cache_save (ctx, path, longer, N_PROMPT + 8, &err));
  g_assert_nonnull (strstr (err.message, "not in the KV cache"));
  /* a path under a regular file cannot be written */
  g_autofree char *under_file = g_build_filename (path, "x.hnsession", NULL);
  g_assert_false (hn_prompt_cache_save (ctx, under_file, prompt, N_PROMPT, &err));

  g_autofree char *after = NULL;
  gsize after_len = 0;
  g_assert_true (g_file_get_contents (path, &after, &after_len, NULL));
  g_assert_cmpuint (after_len, ==, before_len);
  g_assert_cmpint (memcmp (before, after, before_len), ==, 0);
  hn_context_free (ctx);
  hn_model_free (model);
}

/* Only the used cells are written: the file grows with the tokens, not the context size. */
static void
test_file_holds_only_used_cells (void)
{
  HnModel *model = load_model (MODEL);
  int32_t prompt[N_PROMPT];
  make_prompt (prompt, N_PROMPT, hn_model_n_vocab (model));
  HnContext *ctx = new_context (model);
  g_free (eval (ctx, prompt, 0, N_PROMPT));
  g_autofree char *p8 = g_build_filename (tmpdir, "p8.hnsession", NULL);
  g_autofree char *p24 = g_build_filename (tmpdir, "p24.hnsession", NULL);
  HnError err = { 0 };
  g_assert_true (hn_prompt_cache_save (ctx, p8, prompt, 8, &err));
  g_assert_true (hn_prompt_cache_save (ctx, p24, prompt, N_PROMPT, &err));
  GStatBuf s8, s24;
  g_assert_cmpint (g_stat (p8, &s8), ==, 0);
  g_assert_cmpint (g_stat (p24, &s24), ==, 0);
  HnKvCache *kv = hn_context_kv (ctx);
  gsize per_token = 4 + 2u * 2u * (gsize) hn_kv_cache_n_layer (kv) * (gsize) hn_kv_cache_kv_dim (kv);
  g_assert_cmpuint ((gsize) (s24.st_size - s8.st_size), ==, per_token * (N_PROMPT - 8));
  g_assert_cmpuint ((gsize) s8.st_size, ==, HN_SESSION_HEADER_SIZE + per_token * 8);
  hn_context_free (ctx);
  hn_model_free (model);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (g_getenv ("HANASHI_TESTDATA") == NULL) {
    g_test_message ("HANASHI_TESTDATA is not set");
    return 77;
  }
  tmpdir = g_dir_make_tmp ("hanashi-prompt-cache-XXXXXX", NULL);
  g_test_add_func ("/prompt-cache/bit-identical-continuation", test_bit_identical_continuation);
  g_test_add_func ("/prompt-cache/edit-reuses-prefix", test_edit_reuses_prefix);
  g_test_add_func ("/prompt-cache/corruption-falls-back", test_corruption_falls_back);
  g_test_add_func ("/prompt-cache/failed-save-keeps-previous", test_failed_save_keeps_previous);
  g_test_add_func ("/prompt-cache/only-used-cells", test_file_holds_only_used_cells);
  int r = g_test_run ();
  GDir *d = g_dir_open (tmpdir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name (d)) != NULL) {
    g_autofree char *p = g_build_filename (tmpdir, name, NULL);
    g_unlink (p);
  }
  if (d)
    g_dir_close (d);
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return r;
}
