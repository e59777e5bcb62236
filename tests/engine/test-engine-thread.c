/* The engine-thread protocol, driven through the scripted backend (the real inference
 * backend plugs into the same table): events arrive on the main context in order, cancel
 * stops within one step, a model switch cancels cleanly, dispose joins the thread, and a
 * random command storm never deadlocks, leaks or crashes (run under ASan and TSan).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "hanashi-engine.h"
#include "hanashi-engine-backend.h"
#include "hanashi-test-seams.h"

typedef struct {
  GThread *main_thread;
  GString *text;
  guint n_token_signals;
  guint n_done;
  guint n_errors;
  guint last_done_id;
  HanashiGenerationStats last_stats;
  gboolean loaded;
  gboolean load_finished;
  GError *load_error;
  double last_progress;
  guint cancel_after_tokens;
  gboolean check_streamed;   /* each "token" signal: the engine's count matches the text */
  HanashiEngine *engine;
} Fixture;

static char *
model_path (void)
{
  /* The scripted backend accepts any regular file: use this test's own executable. */
  return g_file_read_link ("/proc/self/exe", NULL);
}

static void
on_token (HanashiEngine *engine, guint id, const char *text, gint token_id, Fixture *f)
{
  (void) token_id;
  g_assert_true (g_thread_self () == f->main_thread);
  g_string_append (f->text, text);
  f->n_token_signals++;
  if (f->check_streamed)
    {
      /* The scripted tokens are "tokN ": one space each, however many a signal carries. */
      guint n = 0;
      for (const char *c = f->text->str; *c != '\0'; c++)
        n += *c == ' ';
      g_assert_cmpuint (hanashi_engine_get_streamed_tokens (engine, id), ==, n);
    }
  if (f->cancel_after_tokens && f->n_token_signals == f->cancel_after_tokens)
    hanashi_engine_cancel (engine, 0);
}

static void
on_done (HanashiEngine *engine, guint id, HanashiGenerationStats *stats, Fixture *f)
{
  (void) engine;
  g_assert_true (g_thread_self () == f->main_thread);
  f->n_done++;
  f->last_done_id = id;
  f->last_stats = *stats;
}

static void
on_error (HanashiEngine *engine, guint id, GError *error, Fixture *f)
{
  (void) engine; (void) id; (void) error;
  f->n_errors++;
}

static void
on_progress (HanashiEngine *engine, double fraction, Fixture *f)
{
  (void) engine;
  /* Monotonic within one load; the stress test overlaps loads and opts out with -1. */
  if (f->last_progress >= 0)
    {
      g_assert_cmpfloat (fraction, >=, f->last_progress);
      f->last_progress = fraction;
    }
}

static void
load_done (GObject *source, GAsyncResult *result, gpointer data)
{
  Fixture *f = data;
  f->loaded = hanashi_engine_load_model_finish (HANASHI_ENGINE (source), result, &f->load_error);
  f->load_finished = TRUE;
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  f->main_thread = g_thread_self ();
  f->text = g_string_new (NULL);
  /* @data: a backend for this test's engine instead of the scripted one. */
  if (data != NULL)
    hanashi_engine_set_default_backend (data);
  f->engine = hanashi_engine_new ();
  hanashi_test_use_scripted_backend ();
  /* Never created: the scripted backend writes no sessions. */
  hanashi_engine_set_session_dir (f->engine, "/nonexistent/hanashi-sessions");
  g_signal_connect (f->engine, "token", G_CALLBACK (on_token), f);
  g_signal_connect (f->engine, "generation-done", G_CALLBACK (on_done), f);
  g_signal_connect (f->engine, "error", G_CALLBACK (on_error), f);
  g_signal_connect (f->engine, "load-progress", G_CALLBACK (on_progress), f);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  (void) data;
  g_object_add_weak_pointer (G_OBJECT (f->engine), (gpointer *) &f->engine);
  g_object_unref (f->engine);
  g_assert_null (f->engine);
  g_string_free (f->text, TRUE);
  g_clear_error (&f->load_error);
}

static void
load_and_wait (Fixture *f)
{
  g_autofree char *path = model_path ();
  f->load_finished = FALSE;
  f->last_progress = 0;
  hanashi_engine_load_model_async (f->engine, path, 256, 1, NULL, load_done, f);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_no_error (f->load_error);
  g_assert_true (f->loaded);
  /* Drain the state and model-loaded events that follow the task. */
  while (hanashi_engine_get_state (f->engine) != HANASHI_ENGINE_STATE_READY
         || hanashi_engine_get_model_info (f->engine) == NULL)
    g_main_context_iteration (NULL, TRUE);
}

static HanashiGenerateRequest *
make_request (int max_tokens)
{
  HanashiGenerateRequest *req = hanashi_generate_request_new ("conv-1");
  hanashi_generate_request_set_system_prompt (req, "You are terse.");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, "Hello");
  hanashi_generate_request_set_max_tokens (req, max_tokens);
  return req;
}

static void
test_load_generate (Fixture *f, gconstpointer data)
{
  (void) data;
  g_assert_cmpint (hanashi_engine_get_state (f->engine), ==, HANASHI_ENGINE_STATE_NO_MODEL);
  load_and_wait (f);
  g_assert_cmpfloat (f->last_progress, ==, 1.0);
  g_assert_cmpstr (hanashi_engine_get_model_info (f->engine)->arch, ==, "scripted");
  g_assert_cmpuint (hanashi_engine_get_model_info (f->engine)->n_ctx, ==, 256);

  g_autoptr (HanashiGenerateRequest) req = make_request (20);
  f->check_streamed = TRUE;
  guint id = hanashi_engine_generate (f->engine, req);
  g_assert_cmpuint (id, >, 0);
  while (f->n_done == 0)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (f->last_done_id, ==, id);
  g_assert_cmpuint (f->last_stats.n_generated, ==, 20);
  /* The tokens delivered, counted in full though signals coalesce them; for this
   * generation only. */
  g_assert_cmpuint (hanashi_engine_get_streamed_tokens (f->engine, id), ==, 20);
  g_assert_cmpuint (hanashi_engine_get_streamed_tokens (f->engine, id + 1), ==, 0);
  g_assert_cmpint (f->last_stats.stop_reason, ==, HANASHI_STOP_REASON_MAX_TOKENS);
  /* Every token, in order, coalesced or not. */
  GString *expected = g_string_new (NULL);
  for (int i = 0; i < 20; i++)
    g_string_append_printf (expected, "tok%d ", i);
  g_assert_cmpstr (f->text->str, ==, expected->str);
  g_string_free (expected, TRUE);
  g_assert_cmpuint (f->n_token_signals, >=, 1);
  g_assert_cmpuint (f->n_token_signals, <=, 20);
  g_assert_cmpuint (f->n_errors, ==, 0);
}

typedef struct {
  GArray *records;       /* HnTokenProbs */
  guint n_signals;
  gint last_token_seen;  /* by the "token" signal */
} ProbsSink;

static void
on_token_probs (HanashiEngine *engine, guint id, GBytes *records, ProbsSink *ps)
{
  (void) engine; (void) id;
  gsize size = 0;
  const HnTokenProbs *recs = g_bytes_get_data (records, &size);
  g_assert_cmpuint (size % sizeof (HnTokenProbs), ==, 0);
  g_assert_cmpuint (size, >, 0);
  g_array_append_vals (ps->records, recs, size / sizeof (HnTokenProbs));
  ps->n_signals++;
}

static void
on_token_after_probs (HanashiEngine *engine, guint id, const char *text, gint token_id, ProbsSink *ps)
{
  (void) engine; (void) id; (void) text;
  /* the records of the tokens in this text came first */
  g_assert_cmpuint (ps->records->len, >=, (guint) token_id + 1);
  g_assert_cmpint (g_array_index (ps->records, HnTokenProbs, token_id).token, ==, token_id);
  ps->last_token_seen = token_id;
}

/* With probs_k, every token's record arrives through "token-probs", before its text. */
static void
test_token_probs (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f);
  ProbsSink ps = { g_array_new (FALSE, FALSE, sizeof (HnTokenProbs)), 0, -1 };
  g_signal_connect (f->engine, "token-probs", G_CALLBACK (on_token_probs), &ps);
  g_autoptr (HanashiGenerateRequest) plain = make_request (5);
  hanashi_engine_generate (f->engine, plain);
  while (f->n_done == 0)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (ps.n_signals, ==, 0); /* off by default */
  g_signal_connect (f->engine, "token", G_CALLBACK (on_token_after_probs), &ps);

  g_autoptr (HanashiGenerateRequest) req = make_request (20);
  hanashi_generate_request_set_probs_k (req, 4);
  g_assert_cmpint (hanashi_generate_request_get_probs_k (req), ==, 4);
  hanashi_engine_generate (f->engine, req);
  while (f->n_done < 2)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (ps.records->len, ==, 20);
  g_assert_cmpuint (ps.n_signals, >=, 1);
  g_assert_cmpint (ps.last_token_seen, ==, 19);
  for (guint i = 0; i < 20; i++)
    {
      const HnTokenProbs *r = &g_array_index (ps.records, HnTokenProbs, i);
      g_assert_cmpint (r->token, ==, (gint) i);
      g_assert_cmpuint (r->n_candidates, ==, 4);
      g_assert_cmpint (r->candidates[3].removed_by, ==, HN_STAGE_TOP_K);
    }
  hanashi_generate_request_set_probs_k (req, 99);
  g_assert_cmpint (hanashi_generate_request_get_probs_k (req), ==, HN_PROBS_MAX_K);
  g_signal_handlers_disconnect_by_data (f->engine, &ps);
  g_array_unref (ps.records);
}

typedef struct {
  HanashiNextLogits *next;
  GError *error;
  gboolean finished;
} NextWait;

static void
next_logits_done (GObject *source, GAsyncResult *result, gpointer data)
{
  NextWait *w = data;
  g_assert_null (w->next);
  w->next = hanashi_engine_next_logits_finish (HANASHI_ENGINE (source), result, &w->error);
  w->finished = TRUE;
}

static HanashiNextLogits *
next_logits_wait (Fixture *f, HanashiGenerateRequest *req, GCancellable *cancellable, GError **error)
{
  NextWait w = { 0 };
  hanashi_engine_next_logits_async (f->engine, req, cancellable, next_logits_done, &w);
  while (!w.finished)
    g_main_context_iteration (NULL, TRUE);
  if (w.error != NULL)
    g_propagate_error (error, w.error);
  return w.next;
}

/* The lens's request: the next token's row, the history and the grammar's allowed set,
 * one backend run per call, errors and cancellation through the task. */
static void
test_next_logits (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr (HanashiGenerateRequest) req = make_request (8);
  g_autoptr (GError) error = NULL;
  g_assert_null (next_logits_wait (f, req, NULL, &error));
  g_assert_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_NO_MODEL);
  g_clear_error (&error);

  load_and_wait (f);
  guint runs = hanashi_test_scripted_next_logits_runs ();
  g_autoptr (HanashiNextLogits) next = next_logits_wait (f, req, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (hanashi_test_scripted_next_logits_runs (), ==, runs + 1);
  g_assert_cmpuint (next->n_vocab, ==, 256);
  g_assert_cmpuint (g_bytes_get_size (next->logits), ==, 256 * sizeof (float));
  g_assert_null (next->allowed);
  /* the most likely tokens, with their texts */
  g_assert_cmpuint (next->n_top, ==, HN_PROBS_MAX_K);
  const float *row = g_bytes_get_data (next->logits, NULL);
  for (guint i = 1; i < next->n_top; i++)
    g_assert_cmpfloat (row[next->top_ids[i]], <, row[next->top_ids[i - 1]]);
  g_autofree char *first_text = g_strdup_printf ("t%d", next->top_ids[0]);
  g_assert_cmpstr (next->top_texts[0], ==, first_text);
  /* the history is the prompt as rendered: it ends with the user's message and the
   * assistant's header */
  gsize n_history = g_bytes_get_size (next->history) / sizeof (gint32);
  const gint32 *history = g_bytes_get_data (next->history, NULL);
  GString *text = g_string_new (NULL);
  for (gsize i = 0; i < n_history; i++)
    g_string_append_c (text, (char) history[i]);
  g_assert_nonnull (strstr (text->str, "Hello"));
  g_assert_true (g_str_has_suffix (text->str, "assistant\n"));
  g_string_free (text, TRUE);
  /* no token, no generation signal */
  g_assert_cmpuint (f->n_token_signals, ==, 0);
  g_assert_cmpuint (f->n_done, ==, 0);

  /* a boxed copy shares the bytes */
  g_autoptr (HanashiNextLogits) copy = g_boxed_copy (HANASHI_TYPE_NEXT_LOGITS, next);
  g_assert_true (g_bytes_equal (copy->logits, next->logits));
  g_assert_cmpstr (copy->top_texts[3], ==, next->top_texts[3]);

  /* with a grammar: the allowed set comes along */
  hanashi_generate_request_set_grammar (req, "root ::= \"a\"");
  g_autoptr (HanashiNextLogits) constrained = next_logits_wait (f, req, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (constrained->allowed);
  g_assert_cmpuint (g_bytes_get_size (constrained->allowed), ==, 256 / 8);

  /* another conversation, another row */
  g_autoptr (HanashiGenerateRequest) other = make_request (8);
  hanashi_generate_request_add_message (other, HANASHI_ROLE_ASSISTANT, "Hi.");
  hanashi_generate_request_add_message (other, HANASHI_ROLE_USER, "And now?");
  g_autoptr (HanashiNextLogits) other_next = next_logits_wait (f, other, NULL, &error);
  g_assert_no_error (error);
  g_assert_false (g_bytes_equal (other_next->logits, next->logits));

  /* cancelled before it runs */
  g_autoptr (GCancellable) cancellable = g_cancellable_new ();
  g_cancellable_cancel (cancellable);
  g_assert_null (next_logits_wait (f, req, cancellable, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  g_assert_cmpint (hanashi_engine_get_state (f->engine), ==, HANASHI_ENGINE_STATE_READY);
  g_assert_cmpuint (f->n_errors, ==, 0);
}

static void
test_no_model_error (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr (HanashiGenerateRequest) req = make_request (5);
  hanashi_engine_generate (f->engine, req);
  while (f->n_errors == 0)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (f->n_done, ==, 0);

  f->load_finished = FALSE;
  hanashi_engine_load_model_async (f->engine, "/nonexistent/model.gguf", 0, 0, NULL, load_done, f);
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  g_assert_error (f->load_error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_MODEL_UNREADABLE);
}

static void
test_cancel (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f);
  g_autoptr (HanashiGenerateRequest) req = make_request (100000);
  f->cancel_after_tokens = 1;
  hanashi_engine_generate (f->engine, req);
  while (f->n_done == 0)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpint (f->last_stats.stop_reason, ==, HANASHI_STOP_REASON_CANCELLED);
  /* Tokens produced between the cancel call and the engine noticing: at most the ones
   * already queued when the main loop ran the cancel, plus one step. */
  g_assert_cmpuint (f->last_stats.n_generated, <, 100000);
  g_test_message ("cancelled after %u tokens", f->last_stats.n_generated);
}

static void
test_model_switch (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f);
  g_autoptr (HanashiGenerateRequest) req = make_request (100000);
  guint id = hanashi_engine_generate (f->engine, req);
  while (f->n_token_signals == 0)
    g_main_context_iteration (NULL, TRUE);
  load_and_wait (f);
  while (f->n_done == 0)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (f->last_done_id, ==, id);
  g_assert_cmpint (f->last_stats.stop_reason, ==, HANASHI_STOP_REASON_CANCELLED);
  g_assert_cmpint (hanashi_engine_get_state (f->engine), ==, HANASHI_ENGINE_STATE_READY);
}

static void
test_dispose_while_generating (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f);
  g_autoptr (HanashiGenerateRequest) req = make_request (100000);
  hanashi_engine_generate (f->engine, req);
  while (f->n_token_signals == 0)
    g_main_context_iteration (NULL, TRUE);
  /* teardown drops the last reference: dispose must stop and join the thread promptly. */
}

static void
count_done (GObject *source, GAsyncResult *result, gpointer data)
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
  g_autofree char *path = model_path ();
  GRand *rand = g_rand_new_with_seed (1234);
  guint pending = 0;
  guint n_generate = 0;
  f->last_progress = -1;
  for (int i = 0; i < 1000; i++)
    {
      switch (g_rand_int_range (rand, 0, 6))
        {
        case 0:
          pending++;
          hanashi_engine_load_model_async (f->engine, path, 128, 1, NULL, stress_load_done, &pending);
          break;
        case 1:
          hanashi_engine_unload (f->engine);
          break;
        case 2:
        case 3:
          {
            g_autoptr (HanashiGenerateRequest) req = make_request (g_rand_int_range (rand, 1, 30));
            hanashi_engine_generate (f->engine, req);
            n_generate++;
          }
          break;
        case 4:
          hanashi_engine_cancel (f->engine, 0);
          break;
        case 5:
          {
            g_autoptr (HanashiGenerateRequest) req = make_request (1);
            pending++;
            hanashi_engine_count_tokens_async (f->engine, req, NULL, count_done, &pending);
          }
          break;
        }
      while (g_rand_boolean (rand) && g_main_context_iteration (NULL, FALSE))
        ;
    }
  while (pending > 0 || f->n_done + f->n_errors < n_generate)
    g_main_context_iteration (NULL, TRUE);
  /* Every generate ended exactly once, either done or error (no model at that moment). */
  g_assert_cmpuint (f->n_done + f->n_errors, ==, n_generate);
  g_rand_free (rand);
}

/* What test_commands_in_order saw, in the order the main thread saw it. */
typedef struct {
  GString *log;
  guint pending;
} OrderLog;

static void
order_count_done (GObject *source, GAsyncResult *result, gpointer data)
{
  OrderLog *order = data;
  g_autoptr (GError) error = NULL;
  gint n = hanashi_engine_count_tokens_finish (HANASHI_ENGINE (source), result, &error);
  g_assert_no_error (error);
  g_string_append_printf (order->log, "count %d;", n);
  order->pending--;
}

static void
order_generation_done (HanashiEngine *engine, guint id, HanashiGenerationStats *stats, OrderLog *order)
{
  (void) engine; (void) stats;
  g_string_append_printf (order->log, "generate %u;", id);
  order->pending--;
}

/* The engine thread runs commands in the order they were given, whatever their kind: four
 * commands queued back to back (the main loop does not run in between) complete in that
 * order, a generation between two token counts included. */
static void
test_commands_in_order (Fixture *f, gconstpointer data)
{
  (void) data;
  load_and_wait (f);
  OrderLog order = { g_string_new (NULL), 4 };
  g_signal_connect (f->engine, "generation-done", G_CALLBACK (order_generation_done), &order);
  g_autoptr (HanashiGenerateRequest) one = make_request (3);
  g_autoptr (HanashiGenerateRequest) two = make_request (3);
  hanashi_generate_request_add_message (two, HANASHI_ROLE_ASSISTANT, "Hi there");
  /* the scripted count: the system prompt's bytes plus 4 and the text's bytes per message */
  gint n_one = (gint) strlen ("You are terse.") + 4 + 5;
  gint n_two = n_one + 4 + 8;

  hanashi_engine_count_tokens_async (f->engine, two, NULL, order_count_done, &order);
  guint first = hanashi_engine_generate (f->engine, one);
  hanashi_engine_count_tokens_async (f->engine, one, NULL, order_count_done, &order);
  guint second = hanashi_engine_generate (f->engine, two);
  while (order.pending > 0)
    g_main_context_iteration (NULL, TRUE);

  g_autofree char *expected = g_strdup_printf ("count %d;generate %u;count %d;generate %u;",
                                               n_two, first, n_one, second);
  g_assert_cmpstr (order.log->str, ==, expected);
  g_signal_handlers_disconnect_by_data (f->engine, &order);
  g_string_free (order.log, TRUE);
}

static void
wait_for_load (Fixture *f)
{
  while (!f->load_finished)
    g_main_context_iteration (NULL, TRUE);
  /* Drain the state events that follow the task. */
  while (hanashi_engine_get_state (f->engine) == HANASHI_ENGINE_STATE_LOADING)
    g_main_context_iteration (NULL, TRUE);
}

static void
load_path (Fixture *f, const char *path)
{
  f->load_finished = FALSE;
  f->last_progress = 0;
  g_clear_error (&f->load_error);
  hanashi_engine_load_model_async (f->engine, path, 256, 1, NULL, load_done, f);
  wait_for_load (f);
}

static void
assert_generates (Fixture *f, int n_tokens)
{
  g_autoptr (HanashiGenerateRequest) req = make_request (n_tokens);
  guint done_before = f->n_done;
  g_string_truncate (f->text, 0);
  guint id = hanashi_engine_generate (f->engine, req);
  while (f->n_done == done_before)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (f->last_done_id, ==, id);
  g_assert_cmpuint (f->last_stats.n_generated, ==, (guint) n_tokens);
  g_assert_true (g_str_has_prefix (f->text->str, "tok0 tok1 "));
}

/* A file that is not a usable model leaves the model that was working loaded and usable. */
static void
test_failed_load_keeps_model (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autofree char *path = model_path ();
  load_and_wait (f);
  load_path (f, "/nonexistent/model.gguf");
  g_assert_false (f->loaded);
  g_assert_error (f->load_error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_MODEL_UNREADABLE);
  g_assert_cmpint (hanashi_engine_get_state (f->engine), ==, HANASHI_ENGINE_STATE_READY);
  g_assert_nonnull (hanashi_engine_get_model_info (f->engine));
  g_assert_cmpstr (hanashi_engine_get_model_info (f->engine)->path, ==, path);
  assert_generates (f, 5);
  g_assert_cmpuint (f->n_errors, ==, 0);

  /* Without a model before, a failed load leaves none. */
  hanashi_engine_unload (f->engine);
  while (hanashi_engine_get_state (f->engine) != HANASHI_ENGINE_STATE_NO_MODEL)
    g_main_context_iteration (NULL, TRUE);
  load_path (f, "/nonexistent/model.gguf");
  g_assert_error (f->load_error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_MODEL_UNREADABLE);
  g_assert_cmpint (hanashi_engine_get_state (f->engine), ==, HANASHI_ENGINE_STATE_NO_MODEL);
  g_assert_null (hanashi_engine_get_model_info (f->engine));
}

/* A backend with room for one model: files named "needs-all-memory" load only when no other
 * model is held, "never-fits" never; both are refused the way the real backend refuses a
 * model too big for the machine. */
static gint live_models;
static gint n_loads;

static gpointer
one_model_load (const char *path, guint n_ctx, guint n_threads, guint n_batch, HanashiBackendSink *sink,
                void (*progress) (gpointer, double), HanashiModelInfo **info_out, GError **error)
{
  if (strstr (path, "never-fits") != NULL
      || (strstr (path, "needs-all-memory") != NULL && g_atomic_int_get (&live_models) > 0))
    {
      g_set_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_OUT_OF_MEMORY,
                   "This model needs about 30 MB of memory but only 29 MB is available.");
      return NULL;
    }
  gpointer model = hanashi_test_scripted_backend ()->load (path, n_ctx, n_threads, n_batch, sink, progress,
                                                             info_out, error);
  if (model != NULL)
    {
      g_atomic_int_inc (&live_models);
      g_atomic_int_inc (&n_loads);
    }
  return model;
}

static void
one_model_unload (gpointer model)
{
  hanashi_test_scripted_backend ()->unload (model);
  g_atomic_int_add (&live_models, -1);
}

static gboolean
one_model_generate (gpointer model, HanashiGenerateRequest *req, const HanashiBackendSession *session,
                    HanashiBackendSink *sink, HanashiGenerationStats *stats, GError **error)
{
  return hanashi_test_scripted_backend ()->generate (model, req, session, sink, stats, error);
}

static gint
one_model_count (gpointer model, HanashiGenerateRequest *req, GError **error)
{
  return hanashi_test_scripted_backend ()->count_tokens (model, req, error);
}

static const HanashiEngineBackend one_model_backend = {
  one_model_load, one_model_unload, one_model_generate, one_model_count,
};

static char *
make_model_file (const char *name_template)
{
  g_autoptr (GError) error = NULL;
  char *path = NULL;
  int fd = g_file_open_tmp (name_template, &path, &error);
  g_assert_no_error (error);
  close (fd);
  return path;
}

/* Refused for memory while another model is held: the held one is freed and the new one
 * tried again; when that fails too, the previous model is loaded again. */
static void
test_load_refused_for_memory (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autofree char *first = model_path ();
  g_autofree char *big = make_model_file ("needs-all-memory-XXXXXX.gguf");
  g_autofree char *huge = make_model_file ("never-fits-XXXXXX.gguf");

  load_path (f, first);
  g_assert_no_error (f->load_error);
  g_assert_cmpint (g_atomic_int_get (&live_models), ==, 1);

  load_path (f, big);
  g_assert_no_error (f->load_error);
  g_assert_true (f->loaded);
  g_assert_cmpstr (hanashi_engine_get_model_info (f->engine)->path, ==, big);
  g_assert_cmpint (g_atomic_int_get (&live_models), ==, 1);
  assert_generates (f, 3);

  load_path (f, first);
  g_assert_no_error (f->load_error);
  gint loads_before = g_atomic_int_get (&n_loads);
  load_path (f, huge);
  g_assert_error (f->load_error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_OUT_OF_MEMORY);
  /* The first model was freed for the second try and then loaded again. */
  g_assert_cmpint (g_atomic_int_get (&n_loads), ==, loads_before + 1);
  g_assert_cmpint (g_atomic_int_get (&live_models), ==, 1);
  g_assert_cmpint (hanashi_engine_get_state (f->engine), ==, HANASHI_ENGINE_STATE_READY);
  g_assert_cmpstr (hanashi_engine_get_model_info (f->engine)->path, ==, first);
  assert_generates (f, 4);
  g_assert_cmpuint (f->n_errors, ==, 0);

  g_unlink (big);
  g_unlink (huge);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  hanashi_test_use_scripted_backend ();
  g_test_add ("/engine-thread/load-generate", Fixture, NULL, fixture_setup, test_load_generate, fixture_teardown);
  g_test_add ("/engine-thread/token-probs", Fixture, NULL, fixture_setup, test_token_probs, fixture_teardown);
  g_test_add ("/engine-thread/next-logits", Fixture, NULL, fixture_setup, test_next_logits, fixture_teardown);
  g_test_add ("/engine-thread/no-model", Fixture, NULL, fixture_setup, test_no_model_error, fixture_teardown);
  g_test_add ("/engine-thread/cancel", Fixture, NULL, fixture_setup, test_cancel, fixture_teardown);
  g_test_add ("/engine-thread/failed-load-keeps-model", Fixture, NULL, fixture_setup, test_failed_load_keeps_model, fixture_teardown);
  g_test_add ("/engine-thread/load-refused-for-memory", Fixture, &one_model_backend, fixture_setup, test_load_refused_for_memory, fixture_teardown);
  g_test_add ("/engine-thread/model-switch", Fixture, NULL, fixture_setup, test_model_switch, fixture_teardown);
  g_test_add ("/engine-thread/dispose-while-generating", Fixture, NULL, fixture_setup, test_dispose_while_generating, fixture_teardown);
  g_test_add ("/engine-thread/commands-in-order", Fixture, NULL, fixture_setup, test_commands_in_order, fixture_teardown);
  g_test_add ("/engine-thread/stress", Fixture, NULL, fixture_setup, test_stress, fixture_teardown);
  return g_test_run ();
}
