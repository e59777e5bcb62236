/* `hanashi-cli chat` against the app's engine thread (HanashiEngine with the real model
 * backend): the same conversation, parameters and seed give the same token ids, the same
 * text and byte-identical session files, also when old turns are dropped to fit the
 * context, with a chat template that reads enable_thinking, and for a whole conversation
 * given as JSON.  Also: turns from stdin equal turns from -f, the session file is reused on
 * the next run, and bad input fails with one error line.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hanashi-engine.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>

#include "cli-run.h"
#include "templated-model.h"

#define LLAMA "tiny-llama-spm-q8_0.gguf"
#define QWEN "tiny-qwen2-gpt2-q8_0.gguf"
#define SYSTEM "You are terse."

static char *tmpdir;

static char *
model_path (const char *name)
{
  return g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", name, NULL);
}

/* ---- the CLI ---------------------------------------------------------------------------- */

/* Runs hanashi-cli chat with the arguments (NULL-terminated) and, if given, stdin. */
static CliRun
run_chat (const char *stdin_text, const char *const *args)
{
  g_autofree char *stdin_path = g_build_filename (tmpdir, "stdin.txt", NULL);
  g_assert_true (g_file_set_contents (stdin_path, stdin_text ? stdin_text : "", -1, NULL));
  CliRun r = cli_run_full ("chat", stdin_path, NULL, args);
  g_unlink (stdin_path);
  return r;
}

/* "[1,2,3]" lines → one GArray of int32 per line. */
static GPtrArray *
parse_id_lines (const char *out)
{
  GPtrArray *lines = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  g_auto (GStrv) parts = g_strsplit (out, "\n", -1);
  for (guint i = 0; parts[i] != NULL; i++)
    {
      if (parts[i][0] == '\0')
        continue;
      g_assert_true (parts[i][0] == '[' && g_str_has_suffix (parts[i], "]"));
      GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
      g_autofree char *inner = g_strndup (parts[i] + 1, strlen (parts[i]) - 2);
      g_auto (GStrv) nums = g_strsplit (inner, ",", -1);
      for (guint k = 0; nums[k] != NULL && nums[k][0] != '\0'; k++)
        {
          gint32 v = (gint32) g_ascii_strtoll (nums[k], NULL, 10);
          g_array_append_val (ids, v);
        }
      g_ptr_array_add (lines, ids);
    }
  return lines;
}

/* The "session: reused N of M" lines of a run, in order. */
static GArray *
parse_reuse_lines (const char *err)
{
  GArray *pairs = g_array_new (FALSE, FALSE, sizeof (guint) * 2);
  for (const char *p = err; (p = strstr (p, "session: reused ")) != NULL; p++)
    {
      guint v[2];
      g_assert_cmpint (sscanf (p, "session: reused %u of %u prompt tokens", &v[0], &v[1]), ==, 2);
      g_array_append_vals (pairs, v, 1);
    }
  return pairs;
}

/* ---- the engine thread ------------------------------------------------------------------ */

typedef struct {
  HanashiEngine *engine;
  GString *text;
  gint last_token_id;
  guint n_done, n_errors, n_dropped;
  HanashiGenerationStats stats;
  gboolean loaded;
} Engine;

static void
on_token (HanashiEngine *engine, guint id, const char *text, gint token_id, Engine *e)
{
  (void) engine; (void) id;
  g_string_append (e->text, text);
  e->last_token_id = token_id;
}

static void
on_done (HanashiEngine *engine, guint id, HanashiGenerationStats *stats, Engine *e)
{
  (void) engine; (void) id;
  e->stats = *stats;
  e->n_done++;
}

static void
on_error (HanashiEngine *engine, guint id, GError *error, Engine *e)
{
  (void) engine; (void) id;
  g_test_message ("engine error: %s", error->message);
  e->n_errors++;
}

static void
on_dropped (HanashiEngine *engine, guint id, guint n_messages, guint n_tokens, Engine *e)
{
  (void) engine; (void) id; (void) n_messages; (void) n_tokens;
  e->n_dropped++;
}

static void
load_done (GObject *source, GAsyncResult *result, gpointer data)
{
  Engine *e = data;
  GError *error = NULL;
  g_assert_true (hanashi_engine_load_model_finish (HANASHI_ENGINE (source), result, &error));
  g_assert_no_error (error);
  e->loaded = TRUE;
}

static void
engine_start (Engine *e, const char *path, guint n_ctx)
{
  memset (e, 0, sizeof *e);
  e->text = g_string_new (NULL);
  e->engine = hanashi_engine_new ();
  hanashi_engine_set_session_dir (e->engine, tmpdir);   /* the LRU trim stays in here */
  g_signal_connect (e->engine, "token", G_CALLBACK (on_token), e);
  g_signal_connect (e->engine, "generation-done", G_CALLBACK (on_done), e);
  g_signal_connect (e->engine, "error", G_CALLBACK (on_error), e);
  g_signal_connect (e->engine, "context-dropped", G_CALLBACK (on_dropped), e);
  hanashi_engine_load_model_async (e->engine, path, n_ctx, 1, NULL, load_done, e);
  while (!e->loaded)
    g_main_context_iteration (NULL, TRUE);
}

static void
engine_stop (Engine *e)
{
  g_object_unref (e->engine);
  g_string_free (e->text, TRUE);
}

static void
engine_generate (Engine *e, HanashiGenerateRequest *req)
{
  g_string_truncate (e->text, 0);
  e->last_token_id = -1;
  guint before = e->n_done + e->n_errors;
  hanashi_engine_generate (e->engine, req);
  while (e->n_done + e->n_errors == before)
    g_main_context_iteration (NULL, TRUE);
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_assert_cmpuint (e->n_errors, ==, 0);
}

/* The tokens a session file holds (format: docs/sessions.md): the header says its own
 * size, and the token count sits at offset 52. */
static GArray *
session_tokens (const char *path)
{
  g_autofree char *data = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (path, &data, &len, NULL));
  g_assert_cmpuint (len, >=, 16);
  guint32 header = 0, n = 0;
  memcpy (&header, data + 12, 4);
  g_assert_cmpuint (header, >=, 56);
  g_assert_cmpuint (len, >=, header);
  memcpy (&n, data + 52, 4);
  g_assert_cmpuint (len, >=, header + (gsize) n * 4);
  GArray *tokens = g_array_new (FALSE, FALSE, sizeof (gint32));
  g_array_append_vals (tokens, data + header, n);
  return tokens;
}

static void
assert_files_equal (const char *a, const char *b)
{
  g_autofree char *da = NULL, *db = NULL;
  gsize la = 0, lb = 0;
  g_assert_true (g_file_get_contents (a, &da, &la, NULL));
  g_assert_true (g_file_get_contents (b, &db, &lb, NULL));
  g_assert_cmpuint (la, ==, lb);
  g_assert_true (memcmp (da, db, la) == 0);
}

/* ---- the comparison --------------------------------------------------------------------- */

typedef struct {
  const char *model;           /* a test model name, or a path */
  guint n_ctx;
  int n_predict;
  const char *const *turns;
  const char *thinking;        /* "true", "false" or NULL */
  gboolean expect_drop;
} Case;

static void
compare_with_engine (const Case *c)
{
  g_autofree char *path = g_path_is_absolute (c->model) ? g_strdup (c->model) : model_path (c->model);
  g_autofree char *turns_file = g_build_filename (tmpdir, "turns.txt", NULL);
  g_autofree char *cli_session = g_build_filename (tmpdir, "cli.hnsession", NULL);
  g_autofree char *engine_session = g_build_filename (tmpdir, "engine.hnsession", NULL);
  g_autofree char *ctx_text = g_strdup_printf ("%u", c->n_ctx);
  g_autofree char *n_text = g_strdup_printf ("%d", c->n_predict);
  g_unlink (cli_session);
  g_unlink (engine_session);
  guint n_turns = g_strv_length ((char **) c->turns);
  g_autofree char *joined = g_strjoinv ("\n", (char **) c->turns);
  g_autofree char *turns_text = g_strconcat (joined, "\n", NULL);
  g_assert_true (g_file_set_contents (turns_file, turns_text, -1, NULL));

  /* sampled (not greedy), with a repetition penalty, so that the seed and the newline
   * handling both matter */
  const char *common[] = { "-m", path, "-c", ctx_text, "-t", "1", "-n", n_text, "--system", SYSTEM,
                           "--temp", "0.9", "--seed", "1234", "--repeat-penalty", "1.3",
                           c->thinking ? "--enable-thinking" : NULL, c->thinking, NULL };
  g_autoptr (GStrvBuilder) b1 = g_strv_builder_new ();
  g_autoptr (GStrvBuilder) b2 = g_strv_builder_new ();
  for (guint i = 0; common[i] != NULL; i++)
    {
      g_strv_builder_add (b1, common[i]);
      g_strv_builder_add (b2, common[i]);
    }
  g_strv_builder_add_many (b1, "-f", turns_file, "--session", cli_session, NULL);
  g_strv_builder_add (b2, "--ids");
  g_auto (GStrv) text_args = g_strv_builder_end (b1);
  g_auto (GStrv) ids_args = g_strv_builder_end (b2);

  CliRun text_run = run_chat (NULL, (const char *const *) text_args);
  g_assert_cmpint (text_run.status, ==, 0);
  CliRun ids_run = run_chat (turns_text, (const char *const *) ids_args);   /* turns from stdin */
  g_assert_cmpint (ids_run.status, ==, 0);
  g_autoptr (GPtrArray) cli_ids = parse_id_lines (ids_run.out);
  g_assert_cmpuint (cli_ids->len, ==, n_turns);
  g_autoptr (GArray) reuse = parse_reuse_lines (text_run.err);
  g_assert_cmpuint (reuse->len, ==, n_turns);
  g_assert_nonnull (strstr (text_run.err, "session: file not used ("));
  if (c->expect_drop)
    g_assert_nonnull (strstr (text_run.err, "were left out to fit the context"));

  Engine e;
  engine_start (&e, path, c->n_ctx);
  g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new ("proof");
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  sp.temperature = 0.9;
  sp.seed = 1234;
  sp.repeat_penalty = 1.3;
  hanashi_generate_request_set_sampling (req, &sp);
  hanashi_generate_request_set_max_tokens (req, c->n_predict);
  hanashi_generate_request_set_system_prompt (req, SYSTEM);
  hanashi_generate_request_set_session_path (req, engine_session);
  if (c->thinking != NULL)
    hanashi_generate_request_set_thinking (req, strcmp (c->thinking, "true") == 0 ? HANASHI_THINKING_ON
                                                                                  : HANASHI_THINKING_OFF);
  GString *engine_out = g_string_new (NULL);
  guint n_dropped_turns = 0;
  for (guint k = 0; k < n_turns; k++)
    {
      hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, c->turns[k]);
      engine_generate (&e, req);
      GArray *ids = g_ptr_array_index (cli_ids, k);
      g_test_message ("turn %u: %u prompt tokens, %u reused, %u generated, %u dropped: %s", k, e.stats.n_prompt,
                      e.stats.n_reused, e.stats.n_generated, e.stats.n_messages_dropped, e.text->str);
      n_dropped_turns += e.stats.n_messages_dropped > 0;
      /* the same number of tokens, and those that went through the model (the session
       * file holds them after the prompt) are the CLI's ids */
      g_assert_cmpuint (e.stats.n_generated, ==, ids->len);
      g_autoptr (GArray) held = session_tokens (engine_session);
      g_assert_cmpuint (held->len, >=, e.stats.n_prompt);
      guint n_reply_held = held->len - e.stats.n_prompt;
      g_assert_cmpuint (n_reply_held, <=, ids->len);
      g_assert_cmpuint (n_reply_held + 1, >=, ids->len);
      g_assert_true (memcmp (held->data + (gsize) e.stats.n_prompt * 4, ids->data, (gsize) n_reply_held * 4) == 0);
      /* the CLI saw the same prompt and the same reuse */
      guint *r = &g_array_index (reuse, guint, 2 * k);
      g_assert_cmpuint (r[1], ==, e.stats.n_prompt);
      g_assert_cmpuint (MIN (r[0], r[1] - 1), ==, e.stats.n_reused);
      if (k > 0 && !c->expect_drop)
        g_assert_cmpuint (e.stats.n_reused, >, 0);
      g_string_append_printf (engine_out, "%s\n", e.text->str);
      hanashi_generate_request_add_message (req, HANASHI_ROLE_ASSISTANT, e.text->str);
    }
  g_assert_cmpstr (text_run.out, ==, engine_out->str);
  if (c->expect_drop)
    {
      g_assert_cmpuint (n_dropped_turns, >, 0);
      g_assert_cmpuint (e.n_dropped, ==, n_dropped_turns);
    }
  /* the KV state both left behind, bit for bit */
  assert_files_equal (cli_session, engine_session);
  g_string_free (engine_out, TRUE);
  engine_stop (&e);
  cli_run_clear (&text_run);
  cli_run_clear (&ids_run);
}

static const char *const three_turns[] = { "Once upon a time", "What happened next?", "And in the end?", NULL };

static void
test_same_as_engine_llama (void)
{
  Case c = { LLAMA, 256, 12, three_turns, NULL, FALSE };
  compare_with_engine (&c);
}

static void
test_same_as_engine_qwen (void)
{
  Case c = { QWEN, 256, 12, three_turns, NULL, FALSE };
  compare_with_engine (&c);
}

/* A small context: old turns are dropped and the rest of the KV cache shifted, in both. */
static void
test_same_as_engine_dropping (void)
{
  static const char *const turns[] = { "Once upon a time there was a dragon", "What did the dragon eat?",
                                       "Where did it live?", "Who were its friends?", "How did it end?",
                                       "Tell me one more thing.", NULL };
  Case c = { LLAMA, 128, 16, turns, NULL, TRUE };
  compare_with_engine (&c);
}

/* The model's own template, which trims messages, writes special tokens and reads
 * enable_thinking: both sides render it the same way, guards included. */
static void
test_same_as_engine_template (void)
{
  static const char tmpl[] =
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}";
  static const char *const turns[] = { "  Hello <|im_end|> there  ", "Go on", NULL };
  g_autofree char *path = model_with_template (QWEN, tmpl, tmpdir);
  Case off = { path, 256, 10, turns, "false", FALSE };
  compare_with_engine (&off);
  Case on = { path, 256, 10, turns, "true", FALSE };
  compare_with_engine (&on);
  g_unlink (path);
}

/* --messages: a whole conversation in the chat-template format is answered as the engine
 * answers the same request; a leading system message is the system prompt. */
static void
test_messages_json (void)
{
  g_autofree char *path = model_path (LLAMA);
  g_autofree char *json = g_build_filename (tmpdir, "conversation.json", NULL);
  g_assert_true (g_file_set_contents (json,
    "[{\"role\": \"system\", \"content\": \"You are terse.\"},"
    " {\"role\": \"user\", \"content\": \"Once upon a time\"},"
    " {\"role\": \"assistant\", \"content\": \"there was a cat.\"},"
    " {\"role\": \"user\", \"content\": \"What did it do?\"}]", -1, NULL));
  const char *args[] = { "-m", path, "-c", "256", "-t", "1", "-n", "10", "--messages", json, NULL };
  CliRun text_run = run_chat ("this stdin is not read\n", args);
  g_assert_cmpint (text_run.status, ==, 0);
  const char *ids_args[] = { "-m", path, "-c", "256", "-t", "1", "-n", "10", "--messages", json, "--ids", NULL };
  CliRun ids_run = run_chat (NULL, ids_args);
  g_assert_cmpint (ids_run.status, ==, 0);
  g_autoptr (GPtrArray) ids = parse_id_lines (ids_run.out);
  g_assert_cmpuint (ids->len, ==, 1);

  Engine e;
  engine_start (&e, path, 256);
  g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new ("json");
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  sp.temperature = 0;
  hanashi_generate_request_set_sampling (req, &sp);
  hanashi_generate_request_set_max_tokens (req, 10);
  hanashi_generate_request_set_use_session (req, FALSE);
  hanashi_generate_request_set_system_prompt (req, "You are terse.");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, "Once upon a time");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_ASSISTANT, "there was a cat.");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, "What did it do?");
  engine_generate (&e, req);
  g_autofree char *expected = g_strconcat (e.text->str, "\n", NULL);
  g_assert_cmpstr (text_run.out, ==, expected);
  g_assert_cmpuint (e.stats.n_generated, ==, ((GArray *) g_ptr_array_index (ids, 0))->len);
  engine_stop (&e);

  /* --system and a system message in the file: refused */
  const char *both[] = { "-m", path, "--messages", json, "--system", "Other", NULL };
  CliRun r = run_chat (NULL, both);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_true (g_str_has_prefix (r.err, "hanashi-cli: error: "));
  cli_run_clear (&r);
  cli_run_clear (&text_run);
  cli_run_clear (&ids_run);
  g_unlink (json);
}

/* The second run with the same session file reuses the first turn completely and prints
 * the same replies as a run without any file. */
static void
test_session_rerun (void)
{
  g_autofree char *path = model_path (LLAMA);
  g_autofree char *session = g_build_filename (tmpdir, "sub", "dir", "rerun.hnsession", NULL);
  const char *args[] = { "-m", path, "-c", "256", "-t", "1", "-n", "8", "--session", session, NULL };
  const char *plain_args[] = { "-m", path, "-c", "256", "-t", "1", "-n", "8", NULL };
  const char *turns = "Hello\n\nHow are you?\n";
  CliRun plain = run_chat (turns, plain_args);
  CliRun first = run_chat (turns, args);
  CliRun second = run_chat (turns, args);
  g_assert_cmpint (first.status, ==, 0);
  g_assert_cmpint (second.status, ==, 0);
  g_assert_cmpstr (first.out, ==, plain.out);
  g_assert_cmpstr (second.out, ==, plain.out);
  g_assert_null (strstr (plain.err, "session:"));
  g_autoptr (GArray) r1 = parse_reuse_lines (first.err);
  g_autoptr (GArray) r2 = parse_reuse_lines (second.err);
  g_assert_cmpuint (r1->len, ==, 2);   /* the empty line is no turn */
  g_assert_cmpuint (r2->len, ==, 2);
  g_assert_cmpuint (g_array_index (r1, guint, 0), ==, 0);
  g_assert_cmpuint (g_array_index (r2, guint, 0), ==, g_array_index (r2, guint, 1));
  g_assert_cmpuint (g_array_index (r1, guint, 2), >, 0);
  g_assert_null (strstr (second.err, "file not used"));
  cli_run_clear (&plain);
  cli_run_clear (&first);
  cli_run_clear (&second);
  g_unlink (session);
  g_autofree char *dir = g_path_get_dirname (session);
  g_rmdir (dir);
  g_autofree char *sub = g_path_get_dirname (dir);
  g_rmdir (sub);
}

static void
test_bad_input (void)
{
  g_autofree char *path = model_path (LLAMA);
  g_autofree char *bad_json = g_build_filename (tmpdir, "bad.json", NULL);
  g_assert_true (g_file_set_contents (bad_json, "[{\"role\": \"user\", \"content\": 3}]", -1, NULL));
  g_autofree char *missing = g_build_filename (tmpdir, "missing.txt", NULL);
  const char *const cases[][8] = {
    { "-m", path, "-f", missing, NULL },
    { "--messages", bad_json, NULL },
    { "-m", path, "--enable-thinking", "maybe", NULL },
    { "-m", path, "--temp", "-1", NULL },
    { "-m", path, "--frobnicate", NULL },
    { "-m", path, "-n", NULL },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      CliRun r = run_chat (NULL, cases[i]);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_true (g_str_has_prefix (r.err, "hanashi-cli: error: "));
      g_assert_cmpstr (strchr (r.err, '\n'), ==, "\n");   /* exactly one line */
      g_assert_cmpstr (r.out, ==, "");
      cli_run_clear (&r);
    }
  g_unlink (bad_json);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (g_getenv ("HANASHI_TESTDATA") == NULL || g_getenv ("HANASHI_CLI") == NULL)
    {
      g_test_message ("HANASHI_TESTDATA or HANASHI_CLI is not set");
      return 77;
    }
  tmpdir = g_dir_make_tmp ("hanashi-cli-chat-XXXXXX", NULL);
  g_test_add_func ("/cli-chat/same-as-engine/llama", test_same_as_engine_llama);
  g_test_add_func ("/cli-chat/same-as-engine/qwen2", test_same_as_engine_qwen);
  g_test_add_func ("/cli-chat/same-as-engine/dropping", test_same_as_engine_dropping);
  g_test_add_func ("/cli-chat/same-as-engine/template-thinking", test_same_as_engine_template);
  g_test_add_func ("/cli-chat/messages-json", test_messages_json);
  g_test_add_func ("/cli-chat/session-rerun", test_session_rerun);
  g_test_add_func ("/cli-chat/bad-input", test_bad_input);
  int r = g_test_run ();
  const char *leftovers[] = { "turns.txt", "cli.hnsession", "engine.hnsession" };
  for (guint i = 0; i < G_N_ELEMENTS (leftovers); i++)
    {
      g_autofree char *p = g_build_filename (tmpdir, leftovers[i], NULL);
      g_unlink (p);
    }
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return r;
}
