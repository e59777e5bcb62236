/* HanashiEngine with the real model backend, on the small models in testdata/models:
 * loading and model info, greedy generation equal to hn-generate on the same prompt,
 * streaming, cancel (through the thread, and deterministically through the backend table),
 * model switch, grammars, the context overflow policy, prefix reuse, session files, the
 * token counter, a reply prefix (a branch) with the token texts, and a random command
 * storm (also run under ASan and TSan).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hanashi-engine.h"
#include "hanashi-engine-backend.h"
#include "hanashi-model-file.h"
#include "hanashi-param-table.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "damaged-models.h"
#include "hn-chat.h"
#include "hn-generate-model.h"
#include "hn-params.h"
#include "hn-quantize.h"
#include "hn-vk.h"
#include "cli-run.h"
#include "templated-model.h"

#define LLAMA "tiny-llama-spm-q8_0.gguf"
#define QWEN "tiny-qwen2-gpt2-q8_0.gguf"
#define STORIES "stories260K-f32.gguf"

typedef struct {
  HanashiEngine *engine;
  GString *text;
  GPtrArray *pieces;
  guint n_done, n_errors, n_warnings, n_dropped_signals;
  int last_warning_code;
  guint last_done_id, last_error_id;
  guint dropped_messages, dropped_tokens;
  HanashiGenerationStats stats;
  GError *error;
  gboolean load_finished, loaded;
  GError *load_error;
  double last_progress;
  gboolean progress_regressed;
  guint cancel_after_signals;
  guint progress_done, progress_total;
  guint n_token_signals;
  char *session_dir;
  char *switch_to;       /* load this model on the first token */
} Fixture;

static char *
model_path (const char *name)
{
  const char *dir = g_getenv ("HANASHI_TESTDATA");
  g_assert_nonnull (dir);
  return g_build_filename (dir, "models", name, NULL);
}

static void
load_done (GObject *source, GAsyncResult *result, gpointer data)
{
  Fixture *f = data;
  g_clear_error (&f->load_error);
  f->loaded = hanashi_engine_load_model_finish (HANASHI_ENGINE (source), result, &f->load_error);
  f->load_finished = TRUE;
}

static void
on_token (HanashiEngine *engine, guint id, const char *text, gint token_id, Fixture *f)
{
  (void) id; (void) token_id;
  g_assert_true (g_utf8_validate (text, -1, NULL));
  g_string_append (f->text, text);
  g_ptr_array_add (f->pieces, g_strdup (text));
  f->n_token_signals++;
  if (f->cancel_after_signals && f->n_token_signals == f->cancel_after_signals)
    hanashi_engine_cancel (engine, 0);
  if (f->switch_to != NULL)
    {
      g_autofree char *path = g_steal_pointer (&f->switch_to);
      f->load_finished = FALSE;
      hanashi_engine_load_model_async (engine, path, 256, 1, NULL, load_done, f);
    }
}

static void
on_done (HanashiEngine *engine, guint id, HanashiGenerationStats *stats, Fixture *f)
{
  (void) engine;
  f->n_done++;
  f->last_done_id = id;
  f->stats = *stats;
}

static void
on_error (HanashiEngine *engine, guint id, GError *error, Fixture *f)
{
  (void) engine;
  f->n_errors++;
  f->last_error_id = id;
  g_clear_error (&f->error);
  f->error = g_error_copy (error);
}

static void
on_warning (HanashiEngine *engine, guint id, GError *warning, Fixture *f)
{
  (void) engine; (void) id;
  g_assert_true (warning->domain == HANASHI_ENGINE_ERROR);
  if (warning->code == HANASHI_ENGINE_ERROR_TEMPLATE_FAILED)
    g_assert_nonnull (strstr (warning->message, "ChatML"));
  else if (warning->code == HANASHI_ENGINE_ERROR_GPU_FAILED)
    {
      /* the model info says so before the warning arrives */
      const HanashiModelInfo *info = hanashi_engine_get_model_info (engine);
      g_assert_cmpuint (info->gpu_layers, ==, 0);
      g_assert_null (info->gpu_device);
      g_assert_cmpstr (info->gpu_notice, ==, warning->message);
      g_assert_nonnull (strstr (warning->message, "Running on the CPU from now on."));
    }
  else
    g_assert_cmpint (warning->code, ==, HANASHI_ENGINE_ERROR_CONTEXT_CLAMPED);
  f->last_warning_code = warning->code;
  f->n_warnings++;
}

static void
on_dropped (HanashiEngine *engine, guint id, guint n_messages, guint n_tokens, Fixture *f)
{
  (void) engine; (void) id;
  f->n_dropped_signals++;
  f->dropped_messages = n_messages;
  f->dropped_tokens = n_tokens;
}

static void
on_progress (HanashiEngine *engine, double fraction, Fixture *f)
{
  (void) engine;
  if (f->last_progress >= 0)
    {
      if (fraction < f->last_progress)
        f->progress_regressed = TRUE;
      f->last_progress = fraction;
    }
}

static void
on_prompt_progress (HanashiEngine *engine, guint id, guint done, guint total, Fixture *f)
{
  (void) engine; (void) id;
  g_assert_cmpuint (done, <=, total);
  f->progress_done = done;
  f->progress_total = total;
}

static void
connect_engine (Fixture *f)
{
  f->engine = hanashi_engine_new ();
  hanashi_engine_set_session_dir (f->engine, f->session_dir);
  g_signal_connect (f->engine, "token", G_CALLBACK (on_token), f);
  g_signal_connect (f->engine, "generation-done", G_CALLBACK (on_done), f);
  g_signal_connect (f->engine, "error", G_CALLBACK (on_error), f);
  g_signal_connect (f->engine, "warning", G_CALLBACK (on_warning), f);
  g_signal_connect (f->engine, "context-dropped", G_CALLBACK (on_dropped), f);
  g_signal_connect (f->engine, "load-progress", G_CALLBACK (on_progress), f);
  g_signal_connect (f->engine, "prompt-progress", G_CALLBACK (on_prompt_progress), f);
}

static void
destroy_engine (Fixture *f)
{
  g_object_add_weak_pointer (G_OBJECT (f->engine), (gpointer *) &f->engine);
  g_object_unref (f->engine);
  g_assert_null (f->engine);
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  (void) data;
  f->text = g_string_new (NULL);
  f->pieces = g_ptr_array_new_with_free_func (g_free);
  f->session_dir = g_dir_make_tmp ("hanashi-sessions-XXXXXX", NULL);
  g_assert_nonnull (f->session_dir);
  connect_engine (f);
}

static void
remove_dir (const char *path)
{
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;
  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *p = g_build_filename (path, name, NULL);
      g_unlink (p);
    }
  g_rmdir (path);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  (void) data;
  destroy_engine (f);
  g_string_free (f->text, TRUE);
  g_ptr_array_unref (f->pieces);
  g_clear_error (&f->error);
  g_clear_error (&f->load_error);
  g_free (f->switch_to);
  remove_dir (f->session_dir);
  g_free (f->session_dir);
}

static void
load_and_wait (Fixture *f, const char *name, guint n_ctx)
{
  g_autofree char *path = model_path (name);
  f->load_finished = FALSE;
  f->last_progress = 0;
  f->progress_regressed = FALSE;
  hanashi_engine_load_model_async (f->engine, path, n_ctx, 1, NULL, load_done, f);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_no_error (f->load_error);
  g_assert_true (f->loaded);
  while (hanashi_engine_get_state (f->engine) != HANASHI_ENGINE_STATE_READY)
    g_main_context_iteration (NULL, TRUE);
}

static void
reset_run (Fixture *f)
{
  g_string_truncate (f->text, 0);
  g_ptr_array_set_size (f->pieces, 0);
  f->n_token_signals = 0;
  f->n_done = f->n_errors = f->n_warnings = f->n_dropped_signals = 0;
  f->progress_done = f->progress_total = 0;
  memset (&f->stats, 0, sizeof f->stats);
}

/* Runs one generation to its end (done or error). */
static guint
generate_and_wait (Fixture *f, HanashiGenerateRequest *req)
{
  reset_run (f);
  guint id = hanashi_engine_generate (f->engine, req);
  while (f->n_done + f->n_errors == 0)
    g_main_context_iteration (NULL, TRUE);
  /* a drained queue: later events (state) of this request are in too */
  while (g_main_context_iteration (NULL, FALSE))
    ;
  return id;
}

static HanashiGenerateRequest *
make_request (const char *conversation, int max_tokens)
{
  HanashiGenerateRequest *req = hanashi_generate_request_new (conversation);
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  sp.temperature = 0;
  hanashi_generate_request_set_sampling (req, &sp);
  hanashi_generate_request_set_system_prompt (req, "You are terse.");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, "Once upon a time");
  hanashi_generate_request_set_max_tokens (req, max_tokens);
  return req;
}

/* ---- reference: hn-generate directly on the same rendered prompt ------------------------- */

typedef struct {
  GString *text;
  GArray *ids;
} RefOut;

static bool
ref_on_token (int32_t token, const char *text, size_t len, void *user_data)
{
  RefOut *o = user_data;
  g_string_append_len (o->text, text, (gssize) len);
  if (token >= 0)
    g_array_append_val (o->ids, token);
  return true;
}

/* ChatML as docs/chat-templates.md defines it (the test models have no template). */
static char *
chatml (const char *system, const char * const *msgs, guint n)
{
  GString *s = g_string_new (NULL);
  if (system)
    g_string_append_printf (s, "<|im_start|>system\n%s<|im_end|>\n", system);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (s, "<|im_start|>%s\n%s<|im_end|>\n", i % 2 ? "assistant" : "user", msgs[i]);
  g_string_append (s, "<|im_start|>assistant\n");
  return g_string_free (s, FALSE);
}

static int32_t *
tokenize (const char *model_name, const char *text, bool parse_special, int32_t *n_out)
{
  g_autofree char *path = model_path (model_name);
  HnError err = { 0 };
  HnModel *model = hn_model_load (path, NULL, &err);
  g_assert_nonnull (model);
  HnVocab *vocab = hn_vocab_load (hn_model_gguf (model), &err);
  g_assert_nonnull (vocab);
  int32_t cap = (int32_t) strlen (text) + 8;
  int32_t *ids = g_new (int32_t, cap);
  *n_out = hn_tokenize (vocab, text, strlen (text), true, parse_special, ids, cap, &err);
  g_assert_cmpint (*n_out, >, 0);
  hn_vocab_free (vocab);
  hn_model_free (model);
  return ids;
}

/* How many tokens the text is (where only the count is compared) */
static int32_t
count_tokens (const char *model_name, const char *text, bool parse_special)
{
  int32_t n = 0;
  g_free (tokenize (model_name, text, parse_special, &n));
  return n;
}

static char *
reference_generate_cfg (const char *model_name, const char *prompt, const char *negative,
                        float scale, int n_predict, guint *n_generated)
{
  g_autofree char *path = model_path (model_name);
  HnError err = { 0 };
  HnModel *model = hn_model_load (path, NULL, &err);
  g_assert_nonnull (model);
  HnVocab *vocab = hn_vocab_load (hn_model_gguf (model), &err);
  g_assert_nonnull (vocab);
  HnContextParams cp = hn_context_default_params ();
  cp.n_ctx = 256;
  cp.n_threads = 1;
  cp.n_seq_max = 2;
  HnContext *ctx = hn_context_new (model, &cp, &err);
  g_assert_nonnull (ctx);
  HnGenModelBackend backend;
  g_assert_true (hn_gen_model_backend_init (&backend, ctx, vocab, &err));
  int32_t n_prompt = 0;
  int32_t *ids = tokenize (model_name, prompt, true, &n_prompt);
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  sp.temperature = 0;
  sp.max_new_tokens = n_predict;
  RefOut out = { g_string_new (NULL), g_array_new (FALSE, FALSE, sizeof (int32_t)) };
  HnGenRequest req;
  hn_gen_request_init (&req);
  req.prompt = ids;
  req.n_prompt = (size_t) n_prompt;
  int32_t n_neg = 0;
  g_autofree int32_t *neg = negative ? tokenize (model_name, negative, true, &n_neg) : NULL;
  req.negative = neg;
  req.n_negative = (size_t) n_neg;
  req.cfg_scale = negative ? scale : 1.0f;
  req.sampler = &sp;
  req.on_token = ref_on_token;
  req.user_data = &out;
  HnGenResult res;
  g_assert_true (hn_generate_with_backend (&backend.backend, &req, &res, &err));
  *n_generated = (guint) res.n_generated;
  g_array_unref (out.ids);
  g_free (ids);
  hn_gen_model_backend_clear (&backend);
  hn_context_free (ctx);
  hn_vocab_free (vocab);
  hn_model_free (model);
  return g_string_free (out.text, FALSE);
}

static char *
reference_generate (const char *model_name, const char *prompt, int n_predict, guint *n_generated)
{
  return reference_generate_cfg (model_name, prompt, NULL, 1.0f, n_predict, n_generated);
}

/* ---- tests ------------------------------------------------------------------------------ */

/* The weight type the app lists a file with (read without loading it) is the one the
 * engine reports once the file is loaded, for mixed files too. */
static void
test_file_weight_type (Fixture *f, gconstpointer data)
{
  (void) data;
  const char *files[] = {
    "quant-llama-v512-q4_k_m.gguf", "quant-llama-v512-q3_k_m.gguf", "quant-llama-v512-q5_k_m.gguf",
    "quant-llama-v512-q2_k.gguf", "quant-llama-v512-f16.gguf", LLAMA, STORIES,
  };
  for (gsize i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_autofree char *path = model_path (files[i]);
      g_autoptr (GError) error = NULL;
      g_autofree char *from_file = hanashi_model_file_dup_weight_type (path, &error);
      g_assert_no_error (error);
      g_assert_nonnull (from_file);
      load_and_wait (f, files[i], 64);
      g_assert_cmpstr (hanashi_engine_get_model_info (f->engine)->weight_type, ==, from_file);
      g_test_message ("%s: %s", files[i], from_file);
    }
  g_autofree char *q4_k_m = model_path ("quant-llama-v512-q4_k_m.gguf");
  g_autofree char *type = hanashi_model_file_dup_weight_type (q4_k_m, NULL);
  g_assert_cmpstr (type, ==, "Q4_K");

  /* Q4_K keeps output.weight in Q6_K; with a 32000-token vocabulary that one matrix holds
   * more bytes than every Q4_K tensor together, and the model is still a Q4_K model. */
  g_autofree char *source = model_path (LLAMA);
  g_autofree char *q4_k = g_build_filename (f->session_dir, "tiny-llama-q4_k.gguf", NULL);
  HnError err = { 0 };
  if (!hn_quantize_model (source, q4_k, hn_quantize_target_find ("Q4_K"), 2, NULL, NULL, &err))
    g_error ("%s", err.message);
  g_autofree char *large_vocab = hanashi_model_file_dup_weight_type (q4_k, NULL);
  g_assert_cmpstr (large_vocab, ==, "Q4_K");
  f->load_finished = FALSE;
  hanashi_engine_load_model_async (f->engine, q4_k, 64, 1, NULL, load_done, f);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_no_error (f->load_error);
  g_assert_cmpstr (hanashi_engine_get_model_info (f->engine)->weight_type, ==, large_vocab);
  g_unlink (q4_k);

  /* the same errors as a load of the file */
  g_autoptr (GError) error = NULL;
  g_autofree char *missing = model_path ("no-such-model.gguf");
  g_assert_null (hanashi_model_file_dup_weight_type (missing, &error));
  g_assert_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_MODEL_UNREADABLE);
  g_clear_error (&error);
  g_autofree char *junk = g_build_filename (f->session_dir, "junk.gguf", NULL);
  g_assert_true (g_file_set_contents (junk, "this is not a model", -1, NULL));
  g_assert_null (hanashi_model_file_dup_weight_type (junk, &error));
  g_assert_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_NOT_GGUF);
}

/* The model list's facts, read from the header alone, are the engine's own once the file
 * is loaded; a file that is not a model fails as its load would. */
static void
test_file_facts (Fixture *f, gconstpointer data)
{
  (void) data;
  const char *files[] = { LLAMA, QWEN, STORIES, "quant-llama-v512-q4_k_m.gguf" };
  for (gsize i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_autofree char *path = model_path (files[i]);
      g_autoptr (GError) error = NULL;
      g_autoptr (HanashiModelFileFacts) facts = hanashi_model_file_read_facts (path, &error);
      g_assert_no_error (error);
      load_and_wait (f, files[i], 64);
      const HanashiModelInfo *info = hanashi_engine_get_model_info (f->engine);
      g_assert_cmpstr (facts->arch, ==, info->arch);
      g_assert_cmpstr (facts->weight_type, ==, info->weight_type);
      g_assert_cmpuint (facts->n_ctx_train, ==, info->n_ctx_train);
      g_assert_cmpuint (facts->n_params, ==, info->n_params);
      if (facts->name != NULL)
        g_assert_cmpstr (facts->name, ==, info->name);
    }

  g_autoptr (GError) error = NULL;
  g_autofree char *junk = g_build_filename (f->session_dir, "junk.gguf", NULL);
  g_assert_true (g_file_set_contents (junk, "this is not a model", -1, NULL));
  g_assert_null (hanashi_model_file_read_facts (junk, &error));
  g_assert_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_NOT_GGUF);
}

/* The GLib view of the parameter table is the engine's table, row for row, and its
 * setter keeps a value inside the app's range as the engine clamps it. */
static void
test_param_table (void)
{
  size_t n_engine = 0;
  const HnParamDesc *rows = hn_params_table (&n_engine);
  guint n = 0;
  const HanashiParamInfo *table = hanashi_param_table (&n);
  g_assert_cmpuint (n, ==, n_engine);
  HnSamplerParams sampling, expected;
  hanashi_sampling_init (&sampling);
  hn_sampler_params_init (&expected);
  g_assert_cmpmem (&sampling, sizeof sampling, &expected, sizeof expected);
  const double tries[] = { -1e9, 1e9, NAN, 0.5, 3 };
  for (guint i = 0; i < n; i++)
    {
      g_assert_cmpstr (table[i].key, ==, rows[i].key);
      g_assert_cmpstr (table[i].label, ==, rows[i].label);
      g_assert_cmpint (table[i].type, ==, rows[i].type);
      g_assert_cmpint (table[i].group, ==, rows[i].group);
      g_assert_cmpfloat (table[i].def, ==, rows[i].def);
      g_assert_cmpfloat (table[i].ui_min, ==, rows[i].ui_min);
      g_assert_cmpfloat (table[i].ui_max, ==, rows[i].ui_max);
      g_assert_true (hanashi_param_find (rows[i].key) == &table[i]);
      for (gsize t = 0; t < G_N_ELEMENTS (tries); t++)
        {
          hanashi_param_set_value (&table[i], &sampling, tries[t]);
          hn_param_set (&rows[i], &expected, hn_param_clamp_to (&rows[i], tries[t], rows[i].ui_min, rows[i].ui_max));
          g_assert_cmpfloat (hanashi_param_get_value (&table[i], &sampling), ==, hn_param_get (&rows[i], &expected));
          g_assert_cmpfloat (hanashi_param_get_value (&table[i], &sampling), >=, table[i].ui_min);
          g_assert_cmpfloat (hanashi_param_get_value (&table[i], &sampling), <=, table[i].ui_max);
        }
    }
  g_assert_null (hanashi_param_find ("no_such_parameter"));
  g_assert_null (hanashi_param_find (NULL));
}

static void
test_load_info (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  const HanashiModelInfo *info = hanashi_engine_get_model_info (f->engine);
  g_assert_nonnull (info);
  g_assert_cmpstr (info->arch, ==, "llama");
  g_assert_cmpstr (info->weight_type, ==, "Q8_0");
  g_assert_cmpuint (info->n_params, ==, 19532032);
  g_assert_cmpuint (info->file_size, ==, 21485792);
  g_assert_cmpuint (info->n_ctx, ==, 256);
  g_assert_cmpuint (info->n_batch, ==, 256); /* the default 512, no more than the context */
  g_assert_cmpuint (info->n_ctx_train, ==, 2048);
  g_assert_cmpuint (info->n_vocab, ==, 32000);
  g_assert_false (info->thinking_switch);
  g_assert_false (info->reply_opens_thinking);
  g_assert_false (info->thinking_aware);
  g_assert_true (g_str_has_suffix (info->path, LLAMA));
  g_assert_nonnull (info->name);
  g_assert_cmpfloat (f->last_progress, ==, 1.0);
  g_assert_false (f->progress_regressed);

  /* more context than the model was trained for: clamped, with a warning */
  f->n_warnings = 0;
  load_and_wait (f, LLAMA, 8192);
  g_assert_cmpuint (hanashi_engine_get_model_info (f->engine)->n_ctx, ==, 2048);
  g_assert_cmpuint (f->n_warnings, ==, 1);
  g_assert_cmpint (f->last_warning_code, ==, HANASHI_ENGINE_ERROR_CONTEXT_CLAMPED);

  /* n_ctx 0: the training context, capped at 4096; a batch size set before the load */
  f->n_warnings = 0;
  hanashi_engine_set_batch_size (f->engine, 16);
  load_and_wait (f, STORIES, 0);
  hanashi_engine_set_batch_size (f->engine, 0);
  info = hanashi_engine_get_model_info (f->engine);
  g_assert_cmpstr (info->arch, ==, "llama");
  g_assert_cmpuint (info->n_ctx, ==, 128);
  g_assert_cmpuint (info->n_batch, ==, 16);
  g_assert_cmpuint (f->n_warnings, ==, 0);
  g_assert_cmpuint (info->n_vocab, ==, 512);

  hanashi_engine_unload (f->engine);
  while (hanashi_engine_get_state (f->engine) != HANASHI_ENGINE_STATE_NO_MODEL)
    g_main_context_iteration (NULL, TRUE);
  g_assert_null (hanashi_engine_get_model_info (f->engine));

  f->load_finished = FALSE;
  g_autofree char *path = model_path ("no-such-model.gguf");
  hanashi_engine_load_model_async (f->engine, path, 0, 1, NULL, load_done, f);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_error (f->load_error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_MODEL_UNREADABLE);

  g_autofree char *junk = g_build_filename (f->session_dir, "junk.gguf", NULL);
  g_assert_true (g_file_set_contents (junk, "this is not a model", -1, NULL));
  f->load_finished = FALSE;
  hanashi_engine_load_model_async (f->engine, junk, 0, 1, NULL, load_done, f);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_error (f->load_error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_NOT_GGUF);
  while (hanashi_engine_get_state (f->engine) != HANASHI_ENGINE_STATE_NO_MODEL)
    g_main_context_iteration (NULL, TRUE);
}

static void
check_greedy (Fixture *f, const char *model_name)
{
  load_and_wait (f, model_name, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request (NULL, 24);
  hanashi_generate_request_set_use_session (req, FALSE);
  guint id = generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_cmpuint (f->last_done_id, ==, id);

  const char *msgs[] = { "Once upon a time" };
  g_autofree char *prompt = chatml ("You are terse.", msgs, 1);
  guint ref_n = 0;
  g_autofree char *expected = reference_generate (model_name, prompt, 24, &ref_n);
  g_test_message ("%s: %s", model_name, expected);
  g_assert_cmpstr (f->text->str, ==, expected);
  g_assert_cmpuint (f->stats.n_generated, ==, ref_n);
  /* and hanashi-cli generate on the same prompt prints the same (plus a newline) */
  if (g_getenv ("HANASHI_CLI") != NULL)
    {
      g_autofree char *path = model_path (model_name);
      g_autofree char *out = cli_run_output (cli_run ("generate", "-m", path, "-p", prompt, "-n", "24", "-t", "1",
                                                      "-c", "256", NULL),
                                             NULL);
      g_autofree char *with_newline = g_strconcat (expected, "\n", NULL);
      g_assert_cmpstr (out, ==, with_newline);
    }
  int32_t n_prompt = count_tokens (model_name, prompt, true);
  g_assert_cmpuint (f->stats.n_prompt, ==, (guint) n_prompt);
  g_assert_cmpuint (f->stats.n_reused, ==, 0);
  g_assert_cmpuint (f->progress_done, ==, (guint) n_prompt);
  g_assert_cmpuint (f->progress_total, ==, (guint) n_prompt);
  g_assert_cmpfloat (f->stats.time_to_first_token, >, 0);
  g_assert_cmpfloat (f->stats.gen_tokens_per_second, >, 0);
  g_assert_true (f->stats.stop_reason == HANASHI_STOP_REASON_MAX_TOKENS
                 || f->stats.stop_reason == HANASHI_STOP_REASON_EOG);
  /* the pieces, in order, are the text */
  GString *joined = g_string_new (NULL);
  for (guint i = 0; i < f->pieces->len; i++)
    g_string_append (joined, g_ptr_array_index (f->pieces, i));
  g_assert_cmpstr (joined->str, ==, f->text->str);
  g_string_free (joined, TRUE);
}

/* Where the layers run reaches the model info: the processor by default, a device that is
 * not there, and (with a Vulkan device) Auto on a named device and that device failing
 * during a generation (HANASHI_VULKAN_FAIL=lost:N): the warning, the info updated, the
 * processor's text. */
static void
test_gpu_info (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, STORIES, 128);
  const HanashiModelInfo *info = hanashi_engine_get_model_info (f->engine);
  g_assert_cmpuint (info->n_layers, ==, 5);
  g_assert_cmpuint (info->gpu_layers, ==, 0);
  g_assert_null (info->gpu_device);
  g_assert_null (info->gpu_notice);
  g_autoptr (HanashiGenerateRequest) req = make_request (NULL, 12);
  hanashi_generate_request_set_use_session (req, FALSE);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_autofree char *on_cpu = g_strdup (f->text->str);

  hanashi_engine_set_gpu (f->engine, "No Such Graphics Card", 3);
  load_and_wait (f, STORIES, 128);
  info = hanashi_engine_get_model_info (f->engine);
  g_assert_cmpuint (info->gpu_layers, ==, 0);
  g_assert_nonnull (strstr (info->gpu_notice, "“No Such Graphics Card” was not found"));

  HnVkDeviceInfo device = { 0 };
#if defined(__SANITIZE_THREAD__)
  /* a Vulkan driver's threads share the KV cache with ours behind fences TSan cannot see */
  int n = 0;
#else
  HnError err = { 0 };
  int n = hn_vk_list_devices (&device, 1, &err);
#endif
  if (n <= 0)
    {
      g_test_message ("no Vulkan device (or a thread-sanitizer build): the device part is left out");
      hanashi_engine_set_gpu (f->engine, NULL, 0);
      return;
    }
  hanashi_engine_set_gpu (f->engine, device.name, HANASHI_GPU_LAYERS_AUTO);
  load_and_wait (f, STORIES, 128);
  info = hanashi_engine_get_model_info (f->engine);
  g_assert_cmpuint (info->gpu_layers, ==, 5);
  g_assert_cmpstr (info->gpu_device, ==, device.name);
  g_assert_null (info->gpu_notice);

  g_setenv ("HANASHI_VULKAN_FAIL", "lost:3", TRUE);
  generate_and_wait (f, req);
  g_unsetenv ("HANASHI_VULKAN_FAIL");
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_cmpuint (f->n_warnings, ==, 1);
  g_assert_cmpint (f->last_warning_code, ==, HANASHI_ENGINE_ERROR_GPU_FAILED);
  g_assert_cmpuint (hanashi_engine_get_model_info (f->engine)->gpu_layers, ==, 0);
  g_assert_cmpstr (f->text->str, ==, on_cpu);
  hanashi_engine_set_gpu (f->engine, NULL, 0);
}

static void test_greedy_llama (Fixture *f, gconstpointer data) { (void) data; check_greedy (f, LLAMA); }
static void test_greedy_qwen (Fixture *f, gconstpointer data) { (void) data; check_greedy (f, QWEN); }
static void test_greedy_stories (Fixture *f, gconstpointer data) { (void) data; check_greedy (f, STORIES); }

static void
collect_probs (HanashiEngine *engine, guint id, GBytes *records, GArray *out)
{
  (void) engine; (void) id;
  gsize size = 0;
  const HnTokenProbs *recs = g_bytes_get_data (records, &size);
  g_array_append_vals (out, recs, size / sizeof (HnTokenProbs));
}

/* The real backend passes the sampler's records through: one per sampled token, greedy's
 * choice first with p 1 and every other candidate removed by "temperature", and the text
 * is what it is without them. */
static void
test_token_probs (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, STORIES, 256);
  g_autoptr (HanashiGenerateRequest) plain = make_request (NULL, 12);
  hanashi_generate_request_set_use_session (plain, FALSE);
  generate_and_wait (f, plain);
  g_autofree char *plain_text = g_strdup (f->text->str);

  g_autoptr (GArray) records = g_array_new (FALSE, FALSE, sizeof (HnTokenProbs));
  gulong handler = g_signal_connect (f->engine, "token-probs", G_CALLBACK (collect_probs), records);
  g_autoptr (HanashiGenerateRequest) req = make_request (NULL, 12);
  hanashi_generate_request_set_use_session (req, FALSE);
  hanashi_generate_request_set_probs_k (req, 5);
  generate_and_wait (f, req);
  g_signal_handler_disconnect (f->engine, handler);
  g_assert_cmpstr (f->text->str, ==, plain_text);
  g_assert_cmpuint (records->len, ==, f->stats.n_generated);
  for (guint i = 0; i < records->len; i++)
    {
      const HnTokenProbs *r = &g_array_index (records, HnTokenProbs, i);
      g_assert_cmpuint (r->n_candidates, ==, 5);
      g_assert_cmpint (r->candidates[0].id, ==, r->token);
      g_assert_cmpfloat (r->candidates[0].p, ==, 1.0f);
      g_assert_cmpfloat (r->p, ==, 1.0f);
      for (guint k = 1; k < 5; k++)
        {
          g_assert_cmpint (r->candidates[k].removed_by, ==, HN_STAGE_TEMPERATURE);
          g_assert_cmpfloat (r->candidates[k].logprob, <=, r->candidates[k - 1].logprob);
        }
    }
}

/* A branch of an answer: the token texts the app maps onto the answer come from the
 * loaded model, and a request with a reply prefix goes on after exactly those tokens,
 * reusing the cells of the answer up to where it differs. */
static void
test_reply_prefix (Fixture *f, gconstpointer data)
{
  (void) data;
  g_assert_null (hanashi_engine_dup_token_text (f->engine, 1, NULL));   /* no model yet */
  load_and_wait (f, STORIES, 256);
  g_autoptr (GArray) records = g_array_new (FALSE, FALSE, sizeof (HnTokenProbs));
  gulong handler = g_signal_connect (f->engine, "token-probs", G_CALLBACK (collect_probs), records);
  g_autoptr (HanashiGenerateRequest) req = make_request ("branch", 12);
  hanashi_generate_request_set_use_session (req, FALSE);
  hanashi_generate_request_set_probs_k (req, 3);
  generate_and_wait (f, req);
  g_signal_handler_disconnect (f->engine, handler);
  guint n_conversation = f->stats.n_prompt;
  g_assert_cmpuint (records->len, >, 6);

  /* the records' tokens spell the reply (a control token writes nothing) */
  GString *spelled = g_string_new (NULL);
  for (guint i = 0; i < records->len; i++)
    {
      gboolean is_control = FALSE;
      g_autoptr (GBytes) piece = hanashi_engine_dup_token_text (f->engine, g_array_index (records, HnTokenProbs, i).token,
                                                                &is_control);
      g_assert_nonnull (piece);
      if (!is_control)
        g_string_append_len (spelled, g_bytes_get_data (piece, NULL), (gssize) g_bytes_get_size (piece));
    }
  g_assert_cmpstr (spelled->str, ==, f->text->str);
  g_string_free (spelled, TRUE);
  g_assert_null (hanashi_engine_dup_token_text (f->engine, -1, NULL));
  g_assert_null (hanashi_engine_dup_token_text (f->engine, G_MAXINT32, NULL));

  /* branch at the fifth token with the runner-up */
  gint32 prefix[5];
  for (guint i = 0; i < 4; i++)
    prefix[i] = g_array_index (records, HnTokenProbs, i).token;
  prefix[4] = g_array_index (records, HnTokenProbs, 4).candidates[1].id;
  g_autoptr (HanashiGenerateRequest) branch = make_request ("branch", 6);
  hanashi_generate_request_set_use_session (branch, FALSE);
  hanashi_generate_request_set_reply_prefix (branch, prefix, G_N_ELEMENTS (prefix));
  generate_and_wait (f, branch);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_cmpuint (f->stats.n_prompt, ==, n_conversation + G_N_ELEMENTS (prefix));
  g_assert_cmpuint (f->stats.n_reused, ==, n_conversation + 4);
  g_autofree char *continued = g_strdup (f->text->str);

  /* the same from scratch: a new conversation id empties the cache, nothing is reused, and
   * the continuation is the same */
  g_autoptr (HanashiGenerateRequest) fresh = make_request ("fresh", 6);
  hanashi_generate_request_set_use_session (fresh, FALSE);
  hanashi_generate_request_set_reply_prefix (fresh, prefix, G_N_ELEMENTS (prefix));
  generate_and_wait (f, fresh);
  g_assert_cmpuint (f->stats.n_reused, ==, 0);
  g_assert_cmpstr (f->text->str, ==, continued);
}

static void
next_logits_done (GObject *source, GAsyncResult *result, gpointer data)
{
  HanashiNextLogits **out = data;
  g_autoptr (GError) error = NULL;
  *out = hanashi_engine_next_logits_finish (HANASHI_ENGINE (source), result, &error);
  g_assert_no_error (error);
}

/* The lens's request on the real backend: the row, history and allowed set it returns,
 * replayed through hn_lens_compute under the request's settings, give the record the
 * generation itself makes for its first token (same candidates, stages and p; the same
 * seed draws the same token), with and without a grammar. */
static void
test_next_logits (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, STORIES, 256);
  for (int with_grammar = 0; with_grammar < 2; with_grammar++)
    {
      g_autoptr (HanashiGenerateRequest) req = make_request ("lens", 3);
      HnSamplerParams sp;
      hn_sampler_params_init (&sp);
      sp.seed = 42;
      sp.temperature = 1.1f;
      sp.top_k = 0;
      sp.top_p = 0.9f;
      sp.typical_p = 0.95f;
      sp.repeat_penalty = 1.3f;
      sp.presence_penalty = 0.5f;
      sp.repeat_last_n = -1;
      sp.max_new_tokens = 3;
      hanashi_generate_request_set_sampling (req, &sp);
      hanashi_generate_request_set_use_session (req, FALSE);
      if (with_grammar)
        hanashi_generate_request_set_grammar (req, "root ::= [a-z ]+ \".\"");
      HanashiNextLogits *next = NULL;
      reset_run (f);
      hanashi_engine_next_logits_async (f->engine, req, NULL, next_logits_done, &next);
      while (next == NULL)
        g_main_context_iteration (NULL, TRUE);
      g_assert_cmpuint (next->n_vocab, ==, hanashi_engine_get_model_info (f->engine)->n_vocab);
      g_assert_cmpuint (g_bytes_get_size (next->logits), ==, next->n_vocab * sizeof (float));
      g_assert_true ((next->allowed != NULL) == with_grammar);
      g_assert_cmpuint (next->n_top, ==, HN_PROBS_MAX_K);
      for (guint i = 0; i < next->n_top; i++)
        g_assert_true (g_utf8_validate (next->top_texts[i], -1, NULL));
      g_assert_cmpuint (f->n_token_signals, ==, 0);

      g_autoptr (GArray) records = g_array_new (FALSE, FALSE, sizeof (HnTokenProbs));
      gulong handler = g_signal_connect (f->engine, "token-probs", G_CALLBACK (collect_probs), records);
      hanashi_generate_request_set_probs_k (req, 12);
      generate_and_wait (f, req);
      g_signal_handler_disconnect (f->engine, handler);
      g_assert_cmpuint (records->len, >=, 1);
      /* the conversation's cache was reused: only the last prompt token was read again */
      g_assert_cmpuint (f->stats.n_reused + 1, ==, f->stats.n_prompt);
      g_assert_cmpuint (g_bytes_get_size (next->history) / sizeof (int32_t), ==, f->stats.n_prompt);

      HnError err = { 0 };
      HnLens *lens = hn_lens_new ((int32_t) next->n_vocab, &err);
      g_assert_nonnull (lens);
      gsize n_history = 0, n_newline = 0;
      const int32_t *history = g_bytes_get_data (next->history, &n_history);
      const int32_t *newline = g_bytes_get_data (next->newline_tokens, &n_newline);
      HnLensInput in = {
        .logits = g_bytes_get_data (next->logits, NULL), .history = history,
        .n_history = n_history / sizeof *history, .allowed = next->allowed ? g_bytes_get_data (next->allowed, NULL) : NULL,
        .newline_ids = newline, .n_newline = n_newline / sizeof *newline, .mirostat_mu = NAN,
      };
      HnTokenProbs lensed;
      g_assert_true (hn_lens_compute (lens, &sp, &in, 12, &lensed, &err));
      const HnTokenProbs *first = &g_array_index (records, HnTokenProbs, 0);
      g_assert_cmpint (lensed.token, ==, first->token);
      g_assert_cmpuint (lensed.n_candidates, ==, first->n_candidates);
      guint removed_by_grammar = 0;
      for (guint i = 0; i < lensed.n_candidates; i++)
        {
          g_assert_cmpint (lensed.candidates[i].id, ==, first->candidates[i].id);
          g_assert_cmpint (lensed.candidates[i].id, ==, next->top_ids[i]);
          g_assert_cmpint (lensed.candidates[i].removed_by, ==, first->candidates[i].removed_by);
          g_assert_cmpfloat_with_epsilon (lensed.candidates[i].p, first->candidates[i].p, 1e-4);
          g_assert_cmpfloat_with_epsilon (lensed.candidates[i].logprob, first->candidates[i].logprob, 1e-3);
          removed_by_grammar += lensed.candidates[i].removed_by == HN_STAGE_GRAMMAR;
        }
      /* the grammar wants lower-case letters first: most of the story's likely tokens go */
      if (with_grammar)
        g_assert_cmpuint (removed_by_grammar, >, 0);

      /* the lens on a token picked in the answer: the row after the answer's tokens before
       * it gives that token's own record (the grammar's allowed set there included) */
      g_assert_cmpuint (records->len, >=, 2);
      for (guint at = 1; at < records->len; at++)
        {
          gint32 prefix[8];
          g_assert_cmpuint (at, <=, G_N_ELEMENTS (prefix));
          for (guint i = 0; i < at; i++)
            prefix[i] = g_array_index (records, HnTokenProbs, i).token;
          hanashi_generate_request_set_reply_prefix (req, prefix, at);
          HanashiNextLogits *picked = NULL;
          hanashi_engine_next_logits_async (f->engine, req, NULL, next_logits_done, &picked);
          while (picked == NULL)
            g_main_context_iteration (NULL, TRUE);
          hanashi_generate_request_set_reply_prefix (req, NULL, 0);
          g_assert_cmpuint (g_bytes_get_size (picked->history) / sizeof (int32_t), ==, f->stats.n_prompt + at);
          gsize n_picked_history = 0;
          HnLensInput at_in = in;
          at_in.logits = g_bytes_get_data (picked->logits, NULL);
          at_in.history = g_bytes_get_data (picked->history, &n_picked_history);
          at_in.n_history = n_picked_history / sizeof (int32_t);
          at_in.allowed = picked->allowed ? g_bytes_get_data (picked->allowed, NULL) : NULL;
          g_assert_true ((picked->allowed != NULL) == with_grammar);
          HnTokenProbs picked_lensed;
          g_assert_true (hn_lens_compute (lens, &sp, &at_in, 12, &picked_lensed, &err));
          const HnTokenProbs *recorded = &g_array_index (records, HnTokenProbs, at);
          g_assert_cmpuint (picked_lensed.n_candidates, ==, recorded->n_candidates);
          for (guint i = 0; i < recorded->n_candidates; i++)
            {
              g_assert_cmpint (picked_lensed.candidates[i].id, ==, recorded->candidates[i].id);
              g_assert_cmpint (picked_lensed.candidates[i].removed_by, ==, recorded->candidates[i].removed_by);
              g_assert_cmpfloat_with_epsilon (picked_lensed.candidates[i].p, recorded->candidates[i].p, 1e-4);
              g_assert_cmpfloat_with_epsilon (picked_lensed.candidates[i].logprob, recorded->candidates[i].logprob, 1e-3);
            }
          hanashi_next_logits_free (picked);
        }
      hn_lens_free (lens);
      hanashi_next_logits_free (next);
    }
}

static void
test_count_tokens_done (GObject *source, GAsyncResult *result, gpointer data)
{
  gint *out = data;
  g_autoptr (GError) error = NULL;
  *out = hanashi_engine_count_tokens_finish (HANASHI_ENGINE (source), result, &error);
  g_assert_no_error (error);
}

/* The meter counts with the real tokenizer, and a message cannot smuggle in special tokens. */
static void
test_count_tokens (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, QWEN, 256);
  const char *msgs[] = { "Say <|endoftext|> twice" };
  g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new ("c");
  hanashi_generate_request_set_system_prompt (req, "You are terse.");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, msgs[0]);
  gint n = -2;
  hanashi_engine_count_tokens_async (f->engine, req, NULL, test_count_tokens_done, &n);
  while (n == -2)
    g_main_context_iteration (NULL, TRUE);
  g_autofree char *prompt = chatml ("You are terse.", msgs, 1);
  int32_t n_plain = count_tokens (QWEN, prompt, false), n_special = count_tokens (QWEN, prompt, true);
  g_assert_cmpint (n_plain, !=, n_special);   /* the vocabulary knows <|endoftext|> */
  g_assert_cmpint (n, ==, n_plain);
}

/* Guidance: the negative sequence is the conversation with the negative prompt as system
 * prompt; the result equals hn-generate given both prompts. */
static void
test_cfg (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request ("cfg", 16);
  hanashi_generate_request_set_cfg (req, "You are rude and loud.", 1.5);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  const char *msgs[] = { "Once upon a time" };
  g_autofree char *prompt = chatml ("You are terse.", msgs, 1);
  g_autofree char *negative = chatml ("You are rude and loud.", msgs, 1);
  guint n = 0;
  g_autofree char *expected = reference_generate_cfg (LLAMA, prompt, negative, 1.5f, 16, &n);
  g_autofree char *plain = reference_generate (LLAMA, prompt, 16, &n);
  g_assert_cmpstr (f->text->str, ==, expected);
  g_assert_cmpstr (expected, !=, plain);
  /* and the chat sequence stays reusable afterwards */
  hanashi_generate_request_set_cfg (req, NULL, 1.0);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->stats.n_reused, ==, f->stats.n_prompt - 1);
  g_assert_cmpstr (f->text->str, ==, plain);
}

/* The model's own template is used, and it may write special tokens: here the template adds
 * the BOS text and wraps turns in </s>, which become token ids, while the same text inside a
 * message stays text.  A template that fails falls back to ChatML with a warning. */
static void
test_template (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autofree char *path = model_with_template (
      LLAMA,
      "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] | trim }}{{ eos_token }}"
      "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}",
      f->session_dir);
  f->load_finished = FALSE;
  hanashi_engine_load_model_async (f->engine, path, 256, 1, NULL, load_done, f);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_no_error (f->load_error);

  g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new ("t");
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  sp.temperature = 0;
  hanashi_generate_request_set_sampling (req, &sp);
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, "  Say </s> please ");
  hanashi_generate_request_set_max_tokens (req, 8);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_cmpuint (f->n_warnings, ==, 0);
  /* <s> and </s> from the template are single tokens (so the text after </s> is a new
   * fragment with its own space prefix); the message's "</s>" is plain text */
  int32_t n_first = count_tokens (LLAMA, "[user] Say </s> please", false);
  int32_t n_last = count_tokens (LLAMA, "[assistant]", false);
  /* BOS + the first fragment, EOS, the last fragment (without its own BOS) */
  guint expected = (guint) n_first + 1 + (guint) (n_last - 1);
  g_assert_cmpuint (f->stats.n_prompt, ==, expected);

  gint counted = -2;
  hanashi_engine_count_tokens_async (f->engine, req, NULL, test_count_tokens_done, &counted);
  while (counted == -2)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpint (counted, ==, (gint) expected);
  g_unlink (path);
  g_free (g_steal_pointer (&path));

  path = model_with_template (LLAMA, "{{ raise_exception('no system role here') }}", f->session_dir);
  f->load_finished = FALSE;
  hanashi_engine_load_model_async (f->engine, path, 256, 1, NULL, load_done, f);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_no_error (f->load_error);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_cmpuint (f->n_warnings, ==, 1);
  g_assert_cmpuint (f->n_done, ==, 1);
  const char *msgs[] = { "  Say </s> please " };
  g_autofree char *prompt = chatml (NULL, msgs, 1);
  int32_t n_chatml = count_tokens (LLAMA, prompt, false);
  g_assert_cmpuint (f->stats.n_prompt, ==, (guint) n_chatml);
  g_unlink (path);
}

static gint
count_with_thinking (Fixture *f, HanashiGenerateRequest *req, HanashiThinking thinking)
{
  gint counted = -2;
  hanashi_generate_request_set_thinking (req, thinking);
  hanashi_engine_count_tokens_async (f->engine, req, NULL, test_count_tokens_done, &counted);
  while (counted == -2)
    g_main_context_iteration (NULL, TRUE);
  return counted;
}

static void
load_templated (Fixture *f, const char *tmpl, char **path)
{
  *path = model_with_template (LLAMA, tmpl, f->session_dir);
  f->load_finished = FALSE;
  hanashi_engine_load_model_async (f->engine, *path, 256, 1, NULL, load_done, f);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_no_error (f->load_error);
}

/* A template that reads enable_thinking gets the request's value (Qwen3 closes an empty
 * thinking block when it is false), and the model info says it can; a template whose
 * generation prompt opens the thinking (DeepSeek-R1) is recognised. */
static void
test_template_thinking (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autofree char *path = NULL;
  load_templated (f,
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n"
      "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
      "{% endif %}", &path);
  const HanashiModelInfo *info = hanashi_engine_get_model_info (f->engine);
  g_assert_true (info->thinking_switch);
  g_assert_false (info->reply_opens_thinking);
  g_assert_true (info->thinking_aware);   /* it writes </think> */
  g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new ("t");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, "Why is the sky blue?");
  gint by_default = count_with_thinking (f, req, HANASHI_THINKING_DEFAULT);
  gint on = count_with_thinking (f, req, HANASHI_THINKING_ON);
  gint off = count_with_thinking (f, req, HANASHI_THINKING_OFF);
  g_assert_cmpint (by_default, >, 0);
  g_assert_cmpint (on, ==, by_default);
  int32_t n_block = count_tokens (LLAMA, "<think>\n\n</think>\n\n", false);
  g_assert_cmpint (off, >, on);
  g_assert_cmpint (off, <=, on + n_block);
  g_unlink (path);
  g_free (g_steal_pointer (&path));

  load_templated (f,
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant><think>\n{% endif %}", &path);
  info = hanashi_engine_get_model_info (f->engine);
  g_assert_false (info->thinking_switch);
  g_assert_true (info->reply_opens_thinking);
  g_assert_false (info->thinking_aware);
  g_unlink (path);
}

/* Cancel from the GUI thread: the generation ends as cancelled, well before its limit. */
static void
test_cancel (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request ("c", 200);
  f->cancel_after_signals = 1;
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_done, ==, 1);
  g_assert_cmpint (f->stats.stop_reason, ==, HANASHI_STOP_REASON_CANCELLED);
  g_assert_cmpuint (f->stats.n_generated, <, 200);
}

/* Cancel seen by the backend itself, without thread timing: the loop stops at the step
 * where is_cancelled first says so, and in the middle of a prompt the decode stops between
 * layers. */
typedef struct {
  guint tokens, cancel_at, polls, cancel_at_poll;
  guint progress_calls;
} SinkState;

static gboolean
sink_token (gpointer data, const char *text, gint token_id)
{
  (void) text; (void) token_id;
  SinkState *s = data;
  s->tokens++;
  return TRUE;
}

static void sink_progress (gpointer data, guint done, guint total) { (void) done; (void) total; ((SinkState *) data)->progress_calls++; }
static void sink_warning (gpointer data, int code, const char *message) { (void) data; (void) code; (void) message; }
static void sink_dropped (gpointer data, guint a, guint b) { (void) data; (void) a; (void) b; }
static void sink_write_failed (gpointer data, const char *message) { (void) data; (void) message; }

static gboolean
sink_cancelled (gpointer data)
{
  SinkState *s = data;
  s->polls++;
  return (s->cancel_at && s->tokens >= s->cancel_at) || (s->cancel_at_poll && s->polls >= s->cancel_at_poll);
}

static void
backend_progress (gpointer data, double fraction)
{
  (void) data; (void) fraction;
}

static void
test_backend_cancel (void)
{
  const HanashiEngineBackend *b = hanashi_engine_model_backend ();
  SinkState s = { 0 };
  HanashiBackendSink sink = { sink_token, sink_progress, &s, sink_cancelled, sink_warning, sink_dropped,
                              sink_write_failed };
  HanashiModelInfo *info = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *path = model_path (LLAMA);
  gpointer model = b->load (path, 256, 1, 0, &sink, backend_progress, &info, &error);
  g_assert_no_error (error);
  hanashi_model_info_free (info);
  HanashiBackendSession session = { NULL, NULL, 0 };

  /* the step after the 5th token is never decoded */
  g_autoptr (HanashiGenerateRequest) req = make_request ("a", 100);
  HanashiGenerationStats stats = { 0 };
  s = (SinkState) { .cancel_at = 5 };
  g_assert_true (b->generate (model, req, &session, &sink, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpint (stats.stop_reason, ==, HANASHI_STOP_REASON_CANCELLED);
  g_assert_cmpuint (stats.n_generated, ==, 5);

  /* cancelled at the first poll inside the prompt's decode: no token, no progress */
  g_autoptr (HanashiGenerateRequest) req2 = make_request ("b", 100);
  memset (&stats, 0, sizeof stats);
  s = (SinkState) { .cancel_at_poll = 1 };
  g_assert_true (b->generate (model, req2, &session, &sink, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpint (stats.stop_reason, ==, HANASHI_STOP_REASON_CANCELLED);
  g_assert_cmpuint (stats.n_generated, ==, 0);
  g_assert_cmpuint (s.tokens, ==, 0);
  g_assert_cmpuint (s.progress_calls, ==, 0);

  /* and the state is clean: the same request now runs to its limit */
  memset (&stats, 0, sizeof stats);
  s = (SinkState) { 0 };
  hanashi_generate_request_set_max_tokens (req2, 4);
  g_assert_true (b->generate (model, req2, &session, &sink, &stats, &error));
  g_assert_cmpuint (stats.n_generated, ==, 4);
  g_assert_cmpint (stats.stop_reason, ==, HANASHI_STOP_REASON_MAX_TOKENS);
  b->unload (model);
}

static void
test_model_switch (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request ("c", 200);
  f->switch_to = model_path (QWEN);
  guint id = generate_and_wait (f, req);
  g_assert_cmpuint (f->last_done_id, ==, id);
  g_assert_cmpint (f->stats.stop_reason, ==, HANASHI_STOP_REASON_CANCELLED);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_no_error (f->load_error);
  while (hanashi_engine_get_state (f->engine) != HANASHI_ENGINE_STATE_READY)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpstr (hanashi_engine_get_model_info (f->engine)->arch, ==, "qwen2");
  /* the new model generates (its own conversation state, nothing left from the old one) */
  hanashi_generate_request_set_max_tokens (req, 3);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_cmpuint (f->stats.n_generated, ==, 3);
  g_assert_cmpuint (f->stats.n_reused, ==, 0);
}

/* Opening a file that is not a usable model keeps the model that was working: the same
 * greedy reply comes out before and after the refused load. */
static void
test_failed_load_keeps_model (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request ("keep", 8);
  hanashi_generate_request_set_use_session (req, FALSE);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_autofree char *before = g_strdup (f->text->str);

  g_autofree char *junk = g_build_filename (f->session_dir, "not-a-model.gguf", NULL);
  g_assert_true (g_file_set_contents (junk, "this is not a model", -1, NULL));
  f->load_finished = FALSE;
  hanashi_engine_load_model_async (f->engine, junk, 0, 1, NULL, load_done, f);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_error (f->load_error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_NOT_GGUF);
  while (hanashi_engine_get_state (f->engine) == HANASHI_ENGINE_STATE_LOADING)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpint (hanashi_engine_get_state (f->engine), ==, HANASHI_ENGINE_STATE_READY);
  g_assert_cmpstr (hanashi_engine_get_model_info (f->engine)->arch, ==, "llama");

  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_cmpuint (f->stats.n_generated, ==, 8);
  g_assert_cmpstr (f->text->str, ==, before);
}

/* ---- lending the model ------------------------------------------------------------------- */

static bool
collect_text (void *data, const char *text, size_t len, int32_t token)
{
  (void) token;
  g_string_append_len (data, text, (gssize) len);
  return true;
}

/* The greedy reply of make_request's conversation, computed on a lent model with a chat of
 * its own (as the app's server does), single-threaded as the engine in these tests. */
static char *
greedy_on_loan (HanashiModelLoan *loan, int max_tokens)
{
  HnError err = { 0 };
  HnChatModel *cm = hn_chat_model_new (hanashi_model_loan_get_model (loan), hanashi_model_loan_get_vocab (loan), &err);
  g_assert_nonnull (cm);
  HnContextParams cp = hn_context_default_params ();
  cp.n_ctx = 256;
  cp.n_threads = 1;
  HnChat *chat = hn_chat_new (cm, &cp, &err);
  g_assert_nonnull (chat);
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  sp.temperature = 0;
  sp.max_new_tokens = max_tokens;
  HnChatMessage message = { "user", "Once upon a time" };
  HnChatRequest req;
  hn_chat_request_init (&req);
  req.system = "You are terse.";
  req.messages = &message;
  req.n_messages = 1;
  req.sampler = &sp;
  GString *text = g_string_new (NULL);
  HnChatCallbacks callbacks = { .on_text = collect_text, .user_data = text };
  HnChatStats stats;
  g_assert_true (hn_chat_generate (chat, &req, &callbacks, &stats, &err));
  g_assert_cmpuint (stats.n_generated, ==, (size_t) max_tokens);
  hn_chat_free (chat);
  hn_chat_model_free (cm);
  return g_string_free (text, FALSE);
}

/* hanashi_engine_lend_model: nothing without a model; the engine's own weights (the same
 * loan until the model changes) with its context size; and a loan outlives the engine's
 * use of the model: after a switch and an unload it still computes the reply the engine
 * gave (ASan would see weights freed under it). */
static void
test_lend_model (Fixture *f, gconstpointer data)
{
  (void) data;
  g_assert_null (hanashi_engine_lend_model (f->engine));
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiModelLoan) llama = hanashi_engine_lend_model (f->engine);
  g_assert_nonnull (llama);
  g_autofree char *llama_path = model_path (LLAMA);
  g_assert_cmpstr (hanashi_model_loan_get_path (llama), ==, llama_path);
  g_assert_cmpuint (hanashi_model_loan_get_n_ctx (llama), ==, hanashi_engine_get_model_info (f->engine)->n_ctx);
  g_autoptr (HanashiModelLoan) again = hanashi_engine_lend_model (f->engine);
  g_assert_true (again == llama);

  g_autoptr (HanashiGenerateRequest) req = make_request ("lend", 6);
  hanashi_generate_request_set_use_session (req, FALSE);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_autofree char *engine_reply = g_strdup (f->text->str);

  load_and_wait (f, QWEN, 256);
  g_autoptr (HanashiModelLoan) qwen = hanashi_engine_lend_model (f->engine);
  g_assert_nonnull (qwen);
  g_assert_true (qwen != llama);
  g_assert_cmpstr (hn_model_arch (hanashi_model_loan_get_model (qwen)), ==, "qwen2");
  hanashi_engine_unload (f->engine);
  while (hanashi_engine_get_state (f->engine) != HANASHI_ENGINE_STATE_NO_MODEL)
    g_main_context_iteration (NULL, TRUE);
  g_assert_null (hanashi_engine_lend_model (f->engine));

  g_assert_cmpstr (hn_model_arch (hanashi_model_loan_get_model (llama)), ==, "llama");
  g_autofree char *lent_reply = greedy_on_loan (llama, 6);
  g_assert_cmpstr (lent_reply, ==, engine_reply);
}

/* Closing while a reply streams: dispose stops and joins the thread (ASan checks leaks). */
static void
test_dispose_while_generating (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request ("c", 200);
  reset_run (f);
  hanashi_engine_generate (f->engine, req);
  while (f->n_token_signals == 0)
    g_main_context_iteration (NULL, TRUE);
}

static void
test_grammar (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request ("c", 40);
  hanashi_generate_request_set_grammar (req, "root ::= (\"yes\" | \"no\") \"!\"");
  generate_and_wait (f, req);
  g_test_message ("grammar: '%s' %s", f->text->str, f->error ? f->error->message : "");
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_true (g_str_equal (f->text->str, "yes!") || g_str_equal (f->text->str, "no!"));
  g_assert_true (f->stats.stop_reason == HANASHI_STOP_REASON_GRAMMAR_DONE
                 || f->stats.stop_reason == HANASHI_STOP_REASON_EOG);
  g_assert_cmpuint (f->stats.grammar_truncated_steps, ==, 0);

  /* a grammar that stands for any line in many ambiguous ways runs out of work budget,
   * and the stats say so (the window turns that into a toast) */
  hanashi_generate_request_set_grammar (req,
      "root ::= item (\"uu(u,\"* item){217}\n"
      "item ::= [ax42\" | [^\"-~\\*u15e9]+ | \"\\x41\" | [^\"\\\\\\n]?\n");
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_cmpuint (f->stats.grammar_truncated_steps, >, 0);

  hanashi_generate_request_set_json_schema (req, "{\"enum\": [\"red\", \"green\"]}");
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_true (g_str_equal (f->text->str, "\"red\"") || g_str_equal (f->text->str, "\"green\""));

  /* A grammar compiled by the sender (the app's check) is used as it is: the engine
   * thread parses nothing, and the output follows it. */
  const char *schema = "{\"enum\": [\"up\", \"down\"]}";
  g_autoptr (GError) compile_error = NULL;
  g_autoptr (HanashiGrammar) compiled = hanashi_grammar_new_json_schema (schema, &compile_error);
  g_assert_no_error (compile_error);
  hanashi_generate_request_set_json_schema (req, schema);
  hanashi_generate_request_set_compiled_grammar (req, compiled);
  guint parsed_before = hanashi_grammar_get_n_parsed ();
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_true (g_str_equal (f->text->str, "\"up\"") || g_str_equal (f->text->str, "\"down\""));
  g_assert_cmpuint (hanashi_grammar_get_n_parsed (), ==, parsed_before);
  /* without it, the text is parsed on the engine thread */
  hanashi_generate_request_set_json_schema (req, schema);
  generate_and_wait (f, req);
  g_assert_cmpuint (hanashi_grammar_get_n_parsed (), ==, parsed_before + 1);
}

static void
test_invalid_grammar (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request ("c", 40);
  hanashi_generate_request_set_grammar (req, "root ::= \"a\"\nitem ::= (\"b\"");
  guint id = generate_and_wait (f, req);
  g_assert_cmpuint (f->n_done, ==, 0);
  g_assert_cmpuint (f->n_token_signals, ==, 0);
  g_assert_cmpuint (f->last_error_id, ==, id);
  g_assert_error (f->error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_GRAMMAR_INVALID);
  g_test_message ("%s", f->error->message);
  g_assert_true (g_str_has_prefix (f->error->message, "line 2, column "));

  hanashi_generate_request_set_json_schema (req, "{\"type\": \"string\", \"pattern\": \"a+\"}");
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_done, ==, 0);
  g_assert_error (f->error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_GRAMMAR_INVALID);

  /* valid but beyond the engine's bounds: GRAMMAR_TOO_COMPLEX, not "invalid" -- a schema
   * whose grammar exceeds the size bound (refused before generating), and a chain of rules
   * too deep to expand within one step's work (refused at the first token) */
  GString *big = g_string_new ("{\"type\": \"object\", \"properties\": {");
  for (int i = 0; i < 200; i++)
    g_string_append_printf (big, "%s\"s%d\": {\"type\": \"string\", \"maxLength\": 10000}", i ? ", " : "", i);
  g_string_append (big, "}}");
  hanashi_generate_request_set_json_schema (req, big->str);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_done, ==, 0);
  g_assert_error (f->error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_GRAMMAR_TOO_COMPLEX);
  g_string_free (big, TRUE);
  GString *deep = g_string_new ("root ::= r1\n");
  for (int i = 1; i < 200000; i++)
    g_string_append_printf (deep, "r%d ::= r%d \"y\"\n", i, i + 1);
  g_string_append (deep, "r200000 ::= \"x\"\n");
  hanashi_generate_request_set_grammar (req, deep->str);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_done, ==, 0);
  g_assert_cmpuint (f->n_token_signals, ==, 0);
  g_assert_error (f->error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_GRAMMAR_TOO_COMPLEX);
  g_assert_nonnull (strstr (f->error->message, "work limit"));
  g_string_free (deep, TRUE);

  /* the engine is still fine */
  hanashi_generate_request_set_grammar (req, NULL);
  hanashi_generate_request_set_max_tokens (req, 2);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_done, ==, 1);
}

static void
test_stop_string (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request (NULL, 24);
  hanashi_generate_request_set_use_session (req, FALSE);
  generate_and_wait (f, req);
  g_autofree char *full = g_strdup (f->text->str);
  g_assert_cmpuint (strlen (full), >, 6);
  /* stop at the text's 4th..6th bytes: what is shown is everything before them */
  g_autofree char *stop = g_strndup (full + 3, 3);
  hanashi_generate_request_add_stop_string (req, stop);
  generate_and_wait (f, req);
  g_assert_cmpint (f->stats.stop_reason, ==, HANASHI_STOP_REASON_STOP_STRING);
  const char *first = strstr (full, stop);
  g_autofree char *before = g_strndup (full, (gsize) (first - full));
  g_assert_cmpstr (f->text->str, ==, before);
}

/* The same conversation again evaluates only the tail; a longer one only what was added. */
static void
test_prefix_reuse (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request ("conv", 12);
  generate_and_wait (f, req);
  g_autofree char *reply = g_strdup (f->text->str);
  guint n_prompt = f->stats.n_prompt;
  g_assert_cmpuint (f->stats.n_reused, ==, 0);

  /* regenerate: everything but the last prompt token (needed for its logits) is reused,
   * and greedy gives the same reply */
  generate_and_wait (f, req);
  g_assert_cmpuint (f->stats.n_prompt, ==, n_prompt);
  g_assert_cmpuint (f->stats.n_reused, ==, n_prompt - 1);
  g_assert_cmpstr (f->text->str, ==, reply);
  g_assert_cmpuint (f->progress_total, ==, 1);   /* only what is evaluated */

  /* the next turn: the old prompt is reused */
  g_autoptr (HanashiGenerateRequest) next = make_request ("conv", 4);
  hanashi_generate_request_add_message (next, HANASHI_ROLE_ASSISTANT, reply);
  hanashi_generate_request_add_message (next, HANASHI_ROLE_USER, "And then?");
  generate_and_wait (f, next);
  g_assert_cmpuint (f->stats.n_reused, >=, n_prompt);
  g_assert_cmpuint (f->stats.n_prompt - f->stats.n_reused, <, f->stats.n_prompt - n_prompt + 2);
  g_test_message ("turn 2: %u of %u prompt tokens reused", f->stats.n_reused, f->stats.n_prompt);

  /* another conversation starts from nothing */
  g_autoptr (HanashiGenerateRequest) other = make_request ("other", 2);
  generate_and_wait (f, other);
  g_assert_cmpuint (f->stats.n_reused, ==, 0);
}

/* Conversation that outgrows the context: the system prompt stays, the oldest turn goes, the
 * rest of the cache is shifted rather than evaluated again, and generation goes on. */
static void
test_overflow (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  const char *turns[] = {
    "Tell me about the little red hen who found some wheat in the farmyard one day.",
    "She asked the cat, the dog and the duck to help her plant the wheat, but none of them would.",
    "What did she do with the wheat after it grew tall and golden in the summer sun?",
    "She cut it, took it to the mill, and baked a fine loaf of bread all by herself.",
    "And who helped her eat the bread when it came out of the oven, warm and brown?",
  };
  g_autoptr (HanashiGenerateRequest) req = make_request ("long", 8);
  /* make_request's first user message, then the turns */
  for (guint i = 0; i < G_N_ELEMENTS (turns); i++)
    hanashi_generate_request_add_message (req, i % 2 ? HANASHI_ROLE_USER : HANASHI_ROLE_ASSISTANT, turns[i]);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_cmpuint (f->stats.n_messages_dropped, ==, 0);
  guint first_prompt = f->stats.n_prompt;
  g_test_message ("first prompt: %u tokens", first_prompt);

  /* grow it past 256 - 8 */
  hanashi_generate_request_add_message (req, HANASHI_ROLE_ASSISTANT, f->text->str);
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER,
                                        "Nobody, of course. She ate it with her chicks, and the others only watched.");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_ASSISTANT, "That seems fair to me.");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, "Tell me another story like that one, please.");
  gint full = -2;
  hanashi_engine_count_tokens_async (f->engine, req, NULL, test_count_tokens_done, &full);
  while (full == -2)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpint (full, >, 256 - 8);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_cmpuint (f->n_dropped_signals, ==, 1);
  g_assert_cmpuint (f->stats.n_messages_dropped, >=, 2);
  g_assert_cmpuint (f->stats.n_messages_dropped % 2, ==, 0);   /* whole turns */
  g_assert_cmpuint (f->dropped_messages, ==, f->stats.n_messages_dropped);
  g_assert_cmpuint (f->dropped_tokens, ==, f->stats.n_tokens_dropped);
  g_assert_cmpuint (f->stats.n_prompt, ==, (guint) full - f->stats.n_tokens_dropped);
  g_assert_cmpuint (f->stats.n_prompt + 8, <=, 256);
  g_test_message ("dropped %u messages (%u tokens); reused %u of %u", f->stats.n_messages_dropped,
                  f->stats.n_tokens_dropped, f->stats.n_reused, f->stats.n_prompt);
  /* what followed the dropped turns in the cache was shifted, not evaluated again: only the
   * messages added since the first request are new */
  g_assert_cmpuint (f->stats.n_reused, >, first_prompt - f->stats.n_tokens_dropped);
  g_assert_true (f->stats.stop_reason == HANASHI_STOP_REASON_MAX_TOKENS
                 || f->stats.stop_reason == HANASHI_STOP_REASON_EOG);
  g_assert_cmpuint (f->stats.n_generated, >=, 1);

  /* a last message longer than the whole context: nothing older can be dropped to make room */
  GString *huge = g_string_new (NULL);
  for (int i = 0; i < 60; i++)
    g_string_append (huge, "The little red hen baked bread again. ");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_ASSISTANT, "Gladly.");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, huge->str);
  g_string_free (huge, TRUE);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 1);
  g_assert_error (f->error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_PROMPT_TOO_LONG);
}

/* ---- session files ---------------------------------------------------------------------- */

static char *
session_file (Fixture *f, const char *conversation)
{
  g_autofree char *name = g_strconcat (conversation, ".hnsession", NULL);
  return g_build_filename (f->session_dir, name, NULL);
}

static void
restart_engine (Fixture *f, const char *model)
{
  destroy_engine (f);
  connect_engine (f);
  load_and_wait (f, model, 256);
}

/* A queued command after forget/clear: when its answer arrives, they have run. */
static void
sync_engine (Fixture *f)
{
  g_autoptr (HanashiGenerateRequest) req = make_request ("sync", 1);
  gint n = -2;
  hanashi_engine_count_tokens_async (f->engine, req, NULL, test_count_tokens_done, &n);
  while (n == -2)
    g_main_context_iteration (NULL, TRUE);
}

/* After a reply the conversation's KV state is on disk; a new engine (the app restarted)
 * evaluates only the last prompt token and continues exactly as before. */
static void
test_session_reuse (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request ("sess", 12);
  generate_and_wait (f, req);
  g_assert_true (f->stats.session_saved);
  g_autofree char *reply = g_strdup (f->text->str);
  guint n_prompt = f->stats.n_prompt;
  g_autofree char *path = session_file (f, "sess");
  g_assert_true (g_file_test (path, G_FILE_TEST_IS_REGULAR));

  restart_engine (f, LLAMA);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_cmpuint (f->stats.n_prompt, ==, n_prompt);
  g_assert_cmpuint (f->stats.n_reused, ==, n_prompt - 1);
  g_assert_cmpstr (f->text->str, ==, reply);

  /* the next turn after a restart: the saved prompt and reply are reused */
  g_autoptr (HanashiGenerateRequest) next = make_request ("sess", 4);
  hanashi_generate_request_add_message (next, HANASHI_ROLE_ASSISTANT, reply);
  hanashi_generate_request_add_message (next, HANASHI_ROLE_USER, "And then?");
  restart_engine (f, LLAMA);
  generate_and_wait (f, next);
  g_assert_cmpuint (f->stats.n_reused, >=, n_prompt);

  /* a request that opts out neither reads nor writes */
  g_autoptr (HanashiGenerateRequest) off = make_request ("nosess", 2);
  hanashi_generate_request_set_use_session (off, FALSE);
  generate_and_wait (f, off);
  g_assert_false (f->stats.session_saved);
  g_autofree char *off_path = session_file (f, "nosess");
  g_assert_false (g_file_test (off_path, G_FILE_TEST_EXISTS));

  /* another model's file is not used (and is replaced) */
  restart_engine (f, STORIES);
  hanashi_generate_request_set_max_tokens (req, 2);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 0);
  g_assert_cmpuint (f->stats.n_reused, ==, 0);
  g_assert_true (f->stats.session_saved);
}

/* Damaged files are ignored (re-evaluated from text, same reply) and replaced. */
static void
test_session_corrupt (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request ("bad", 8);
  generate_and_wait (f, req);
  g_autofree char *reply = g_strdup (f->text->str);
  guint n_prompt = f->stats.n_prompt;
  g_autofree char *path = session_file (f, "bad");
  g_autofree char *good = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (path, &good, &len, NULL));

  for (int kind = 0; kind < 4; kind++)
    {
      g_autofree char *bytes = g_memdup2 (good, len);
      gsize n = len;
      switch (kind)
        {
        case 0: n = len / 2; break;                    /* truncated */
        case 1: bytes[len - 100] ^= 0x10; break;      /* a flipped bit in the rows */
        case 2: bytes[9] ^= 0x01; break;               /* the header's version */
        case 3: n = 7; break;                          /* shorter than a header */
        }
      g_assert_true (g_file_set_contents (path, bytes, (gssize) n, NULL));
      restart_engine (f, LLAMA);
      generate_and_wait (f, req);
      g_assert_cmpuint (f->n_errors, ==, 0);
      g_assert_cmpuint (f->stats.n_reused, ==, 0);
      g_assert_cmpstr (f->text->str, ==, reply);
      g_assert_true (f->stats.session_saved);
    }
  /* the last run wrote a good file again */
  restart_engine (f, LLAMA);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->stats.n_reused, ==, n_prompt - 1);
}

/* Damaged model files reach the app with codes it can put in the user's language: a file
 * cut short (an interrupted download) is MODEL_TRUNCATED, not NOT_GGUF; NaN weights load,
 * but generating is INVALID_NUMBERS, not a complaint about the logit bias. */
static void
test_damaged_model_files (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autofree char *src = model_path (STORIES);
  GStatBuf st;
  g_assert_cmpint (g_stat (src, &st), ==, 0);
  g_autofree char *cut = damaged_model_truncated (src, f->session_dir, "cut.gguf", (gsize) st.st_size * 3 / 4);
  f->load_finished = FALSE;
  hanashi_engine_load_model_async (f->engine, cut, 128, 1, NULL, load_done, f);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_false (f->loaded);
  g_assert_error (f->load_error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_MODEL_TRUNCATED);
  g_assert_nonnull (strstr (f->load_error->message, "interrupted"));

  g_autofree char *nan = damaged_model_nan (src, f->session_dir, "nan.gguf", "blk.2.attn_q.weight");
  f->load_finished = FALSE;
  hanashi_engine_load_model_async (f->engine, nan, 128, 1, NULL, load_done, f);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_no_error (f->load_error);
  g_autoptr (HanashiGenerateRequest) req = make_request ("nan", 4);
  generate_and_wait (f, req);
  g_assert_cmpuint (f->n_errors, ==, 1);
  g_assert_error (f->error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_INVALID_NUMBERS);
  g_assert_null (strstr (f->error->message, "logit bias"));
  g_assert_cmpstr (f->text->str, ==, "");
}

static guint n_write_failed;

static void
on_write_failed (HanashiEngine *engine, const char *message, gpointer data)
{
  (void) engine; (void) data;
  g_assert_nonnull (message);
  n_write_failed++;
}

/* A cache directory that cannot be written: the replies still come, the failure is
 * reported once per conversation, nothing is an error. */
static void
test_session_write_failure (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autofree char *blocker = g_build_filename (f->session_dir, "not-a-dir", NULL);
  g_assert_true (g_file_set_contents (blocker, "x", 1, NULL));
  g_autofree char *dir = g_build_filename (blocker, "sessions", NULL);
  hanashi_engine_set_session_dir (f->engine, dir);
  n_write_failed = 0;
  g_signal_connect (f->engine, "session-write-failed", G_CALLBACK (on_write_failed), NULL);
  load_and_wait (f, LLAMA, 256);
  g_autoptr (HanashiGenerateRequest) req = make_request ("w1", 3);
  for (int i = 0; i < 3; i++)
    {
      generate_and_wait (f, req);
      g_assert_cmpuint (f->n_errors, ==, 0);
      g_assert_cmpuint (f->n_done, ==, 1);
      g_assert_false (f->stats.session_saved);
    }
  g_assert_cmpuint (n_write_failed, ==, 1);
  g_autoptr (HanashiGenerateRequest) other = make_request ("w2", 3);
  generate_and_wait (f, other);
  g_assert_cmpuint (n_write_failed, ==, 2);
}

/* Forget and clear go through the queue; the size limit evicts the least recently used. */
static void
test_session_cache (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f, LLAMA, 256);
  const char *ids[] = { "a", "b", "c" };
  for (guint i = 0; i < G_N_ELEMENTS (ids); i++)
    {
      g_autoptr (HanashiGenerateRequest) req = make_request (ids[i], 2);
      generate_and_wait (f, req);
      g_assert_true (f->stats.session_saved);
    }
  g_autofree char *a = session_file (f, "a");
  g_autofree char *b = session_file (f, "b");
  g_autofree char *c = session_file (f, "c");
  g_assert_true (g_file_test (a, G_FILE_TEST_EXISTS));
  hanashi_engine_forget_session (f->engine, "a");
  sync_engine (f);
  g_assert_false (g_file_test (a, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (b, G_FILE_TEST_EXISTS));

  /* room for about one file and a half: writing c again evicts b, keeps c */
  GStatBuf st;
  g_assert_cmpint (g_stat (c, &st), ==, 0);
  hanashi_engine_set_session_cache_limit (f->engine, (guint64) st.st_size * 3 / 2);
  g_autoptr (HanashiGenerateRequest) req = make_request ("c", 2);
  generate_and_wait (f, req);
  g_assert_true (f->stats.session_saved);
  g_assert_false (g_file_test (b, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (c, G_FILE_TEST_EXISTS));

  hanashi_engine_clear_session_cache (f->engine);
  sync_engine (f);
  g_assert_false (g_file_test (c, G_FILE_TEST_EXISTS));
}

/* ---- stress ----------------------------------------------------------------------------- */

static void
stress_count_done (GObject *source, GAsyncResult *result, gpointer data)
{
  guint *pending = data;
  g_autoptr (GError) error = NULL;
  hanashi_engine_count_tokens_finish (HANASHI_ENGINE (source), result, &error);
  (*pending)--;
}

static void
stress_load_done (GObject *source, GAsyncResult *result, gpointer data)
{
  guint *pending = data;
  g_autoptr (GError) error = NULL;
  hanashi_engine_load_model_finish (HANASHI_ENGINE (source), result, &error);
  (*pending)--;
}

static void
test_stress (Fixture *f, gconstpointer data)
{
  (void) data;
  const char *models[] = { LLAMA, QWEN, STORIES };
  const char *convs[] = { "s1", "s2", "s3" };
  GRand *rand = g_rand_new_with_seed (20261124);
  guint pending = 0, n_generate = 0;
  f->last_progress = -1;
  reset_run (f);
  for (int i = 0; i < 1000; i++)
    {
      switch (g_rand_int_range (rand, 0, 9))
        {
        case 8:
          /* let everything queued finish, so that later commands meet a loaded model */
          while (pending > 0 || f->n_done + f->n_errors < n_generate)
            g_main_context_iteration (NULL, TRUE);
          break;
        case 0:
          {
            g_autofree char *path = model_path (models[g_rand_int_range (rand, 0, 3)]);
            pending++;
            hanashi_engine_load_model_async (f->engine, path, 128, 1, NULL, stress_load_done, &pending);
          }
          break;
        case 1:
          if (g_rand_int_range (rand, 0, 3) == 0)
            hanashi_engine_unload (f->engine);
          break;
        case 2:
        case 3:
        case 4:
          {
            g_autoptr (HanashiGenerateRequest) req = make_request (convs[g_rand_int_range (rand, 0, 3)],
                                                                   g_rand_int_range (rand, 1, 6));
            if (g_rand_boolean (rand))
              hanashi_generate_request_add_message (req, HANASHI_ROLE_ASSISTANT, "The end.");
            hanashi_engine_generate (f->engine, req);
            n_generate++;
          }
          break;
        case 5:
          hanashi_engine_cancel (f->engine, 0);
          break;
        case 6:
          {
            g_autoptr (HanashiGenerateRequest) req = make_request ("s1", 1);
            pending++;
            hanashi_engine_count_tokens_async (f->engine, req, NULL, stress_count_done, &pending);
          }
          break;
        case 7:
          hanashi_engine_forget_session (f->engine, convs[g_rand_int_range (rand, 0, 3)]);
          break;
        }
      while (g_rand_boolean (rand) && g_main_context_iteration (NULL, FALSE))
        ;
    }
  while (pending > 0 || f->n_done + f->n_errors < n_generate)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (f->n_done + f->n_errors, ==, n_generate);
  g_test_message ("%u generations: %u done, %u errors", n_generate, f->n_done, f->n_errors);
  g_rand_free (rand);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/engine-model/load-info", Fixture, NULL, fixture_setup, test_load_info, fixture_teardown);
  g_test_add ("/engine-model/gpu-info", Fixture, NULL, fixture_setup, test_gpu_info, fixture_teardown);
  g_test_add ("/engine-model/file-facts", Fixture, NULL, fixture_setup, test_file_facts, fixture_teardown);
  g_test_add_func ("/engine-model/param-table", test_param_table);
  g_test_add ("/engine-model/file-weight-type", Fixture, NULL, fixture_setup, test_file_weight_type, fixture_teardown);
  g_test_add ("/engine-model/greedy/llama", Fixture, NULL, fixture_setup, test_greedy_llama, fixture_teardown);
  g_test_add ("/engine-model/greedy/qwen2", Fixture, NULL, fixture_setup, test_greedy_qwen, fixture_teardown);
  g_test_add ("/engine-model/greedy/stories", Fixture, NULL, fixture_setup, test_greedy_stories, fixture_teardown);
  g_test_add ("/engine-model/token-probs", Fixture, NULL, fixture_setup, test_token_probs, fixture_teardown);
  g_test_add ("/engine-model/next-logits", Fixture, NULL, fixture_setup, test_next_logits, fixture_teardown);
  g_test_add ("/engine-model/reply-prefix", Fixture, NULL, fixture_setup, test_reply_prefix, fixture_teardown);
  g_test_add ("/engine-model/count-tokens", Fixture, NULL, fixture_setup, test_count_tokens, fixture_teardown);
  g_test_add ("/engine-model/cfg", Fixture, NULL, fixture_setup, test_cfg, fixture_teardown);
  g_test_add ("/engine-model/template", Fixture, NULL, fixture_setup, test_template, fixture_teardown);
  g_test_add ("/engine-model/template-thinking", Fixture, NULL, fixture_setup, test_template_thinking, fixture_teardown);
  g_test_add ("/engine-model/cancel", Fixture, NULL, fixture_setup, test_cancel, fixture_teardown);
  g_test_add_func ("/engine-model/backend-cancel", test_backend_cancel);
  g_test_add ("/engine-model/failed-load-keeps-model", Fixture, NULL, fixture_setup, test_failed_load_keeps_model, fixture_teardown);
  g_test_add ("/engine-model/model-switch", Fixture, NULL, fixture_setup, test_model_switch, fixture_teardown);
  g_test_add ("/engine-model/dispose-while-generating", Fixture, NULL, fixture_setup, test_dispose_while_generating, fixture_teardown);
  g_test_add ("/engine-model/grammar", Fixture, NULL, fixture_setup, test_grammar, fixture_teardown);
  g_test_add ("/engine-model/invalid-grammar", Fixture, NULL, fixture_setup, test_invalid_grammar, fixture_teardown);
  g_test_add ("/engine-model/stop-string", Fixture, NULL, fixture_setup, test_stop_string, fixture_teardown);
  g_test_add ("/engine-model/prefix-reuse", Fixture, NULL, fixture_setup, test_prefix_reuse, fixture_teardown);
  g_test_add ("/engine-model/overflow", Fixture, NULL, fixture_setup, test_overflow, fixture_teardown);
  g_test_add ("/engine-model/session/reuse", Fixture, NULL, fixture_setup, test_session_reuse, fixture_teardown);
  g_test_add ("/engine-model/session/corrupt", Fixture, NULL, fixture_setup, test_session_corrupt, fixture_teardown);
  g_test_add ("/engine-model/session/write-failure", Fixture, NULL, fixture_setup, test_session_write_failure, fixture_teardown);
  g_test_add ("/engine-model/session/cache", Fixture, NULL, fixture_setup, test_session_cache, fixture_teardown);
  g_test_add ("/engine-model/damaged-model-files", Fixture, NULL, fixture_setup, test_damaged_model_files, fixture_teardown);
  g_test_add ("/engine-model/lend", Fixture, NULL, fixture_setup, test_lend_model, fixture_teardown);
  g_test_add ("/engine-model/stress", Fixture, NULL, fixture_setup, test_stress, fixture_teardown);
  return g_test_run ();
}
