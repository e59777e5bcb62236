/* "Show probabilities" (the answers' token lens) end to end with the engine's scripted
 * backend: the tokens mapped onto an answer's text (multi-byte characters cut over tokens,
 * Markdown syntax cut by tokens, thinking before and a stop string after); the shading on and
 * off with the window's action; the candidates' chart of a clicked token and of the token
 * under the caret; choosing another candidate continuing the answer from there as a new
 * alternative, and that alternative's records in the store; "Show in the Lens" on a token;
 * a screenshot for the docs.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>

#include "hanashi-application.h"
#include "hanashi-chat-view.h"
#include "hanashi-composer.h"
#include "hanashi-lens-view.h"
#include "hanashi-message-row.h"
#include "hanashi-token-probs.h"
#include "hanashi-token-view.h"
#include "hanashi-window.h"
#include "test-screenshot.h"
#include "test-widgets.h"
#include "test-scripted.h"
#include "test-lens-helpers.h"
#include "test-window-helpers.h"
#include "test-xdg.h"
#include "hanashi-test-seams.h"

/* ---- the mapping on its own ---------------------------------------------------------------- */

static GPtrArray *
pieces_of (const char *const *texts)
{
  GPtrArray *pieces = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  for (guint i = 0; texts[i] != NULL; i++)
    g_ptr_array_add (pieces, *texts[i] ? g_bytes_new (texts[i], strlen (texts[i])) : NULL);
  return pieces;
}

static HanashiTokenSpan
span_at (GArray *spans, guint i)
{
  return g_array_index (spans, HanashiTokenSpan, i);
}

static void
test_spans (void)
{
  /* "é" (C3 A9) cut over two tokens, "**" cut from its word; a thinking part before the
   * answer, the end token (no bytes) and a stop string after it */
  const char *const texts[] = { "<think>hm</think>", "**Bo", "ld", "** caf", "\xc3", "\xa9 ", "ok", "", "STOP", NULL };
  g_autoptr (GPtrArray) pieces = pieces_of (texts);
  const char *answer = "**Bold** café ok";
  g_autoptr (GArray) spans = hanashi_token_spans_map (answer, (GBytes *const *) pieces->pdata, pieces->len);
  g_assert_nonnull (spans);
  g_assert_cmpuint (spans->len, ==, pieces->len);
  const HanashiTokenSpan expected[] = { { 0, 0 }, { 0, 4 }, { 4, 6 }, { 6, 12 }, { 12, 13 }, { 13, 14 },
                                        { 14, 16 }, { 16, 16 }, { 16, 16 } };
  for (guint i = 0; i < spans->len; i++)
    {
      g_assert_cmpint (span_at (spans, i).start, ==, expected[i].start);
      g_assert_cmpint (span_at (spans, i).end, ==, expected[i].end);
    }
  /* the last place the text occurs: an answer that repeats what the thinking said */
  const char *const echo[] = { "ok ", "ok", NULL };
  g_autoptr (GPtrArray) echo_pieces = pieces_of (echo);
  g_autoptr (GArray) echo_spans = hanashi_token_spans_map ("ok", (GBytes *const *) echo_pieces->pdata, 2);
  g_assert_nonnull (echo_spans);
  g_assert_cmpint (span_at (echo_spans, 0).start, ==, span_at (echo_spans, 0).end);
  g_assert_cmpint (span_at (echo_spans, 1).start, ==, 0);
  g_assert_cmpint (span_at (echo_spans, 1).end, ==, 2);
  /* records of another text (or another model's ids) do not map */
  g_assert_null (hanashi_token_spans_map ("**Bold** tea", (GBytes *const *) pieces->pdata, pieces->len));
  g_assert_null (hanashi_token_spans_map ("", (GBytes *const *) pieces->pdata, pieces->len));

  /* the shade grows as the probability falls, and none for a near-certain token */
  g_assert_cmpint (hanashi_token_shade_level (1.0f), ==, 0);
  g_assert_cmpint (hanashi_token_shade_level (0.9f), ==, 0);
  int previous = 0;
  for (float p = 0.89f; p >= 0.0f; p -= 0.01f)
    {
      int level = hanashi_token_shade_level (p);
      g_assert_cmpint (level, >=, previous);
      g_assert_cmpint (level, <, HANASHI_TOKEN_SHADE_LEVELS);
      previous = level;
    }
  g_assert_cmpint (hanashi_token_shade_level (0.89f), ==, 1);
  g_assert_cmpint (hanashi_token_shade_level (0.01f), ==, HANASHI_TOKEN_SHADE_LEVELS - 1);
}

/* ---- the window -------------------------------------------------------------------------- */

/* The scripted reply: Markdown cut by tokens, and "é" cut over two of them. */
static const char *const reply_pieces[] = { "**Bo", "ld** ", "caf", "\xc3", "\xa9 ", "and ", "more", NULL };
#define N_PIECES 7

static HanashiTokenView *
token_view_of (HanashiWindow *window, guint index)
{
  settle ();
  HanashiMessageRow *row = row_for (GTK_WIDGET (window), message_at (window, index));
  g_assert_nonnull (row);
  GtkWidget *view = hanashi_message_row_get_token_view (row);
  return view != NULL ? HANASHI_TOKEN_VIEW (view) : NULL;
}

static gboolean
lens_state (HanashiWindow *window)
{
  gboolean on = FALSE;
  g_object_get (window, "show-probabilities", &on, NULL);
  return on;
}

static char *
buffer_slice (HanashiTokenView *view, HanashiTokenSpan span)
{
  GtkTextView *text_view = GTK_TEXT_VIEW (find_by_type (GTK_WIDGET (view), GTK_TYPE_TEXT_VIEW));
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (text_view);
  GtkTextIter start, end;
  gtk_text_buffer_get_iter_at_offset (buffer, &start, span.start);
  gtk_text_buffer_get_iter_at_offset (buffer, &end, span.end);
  return gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
}

static gboolean
popover_shown (gpointer view)
{
  return gtk_widget_get_visible (GTK_WIDGET (hanashi_token_view_get_popover (view)));
}

static void
check_records_equal (GArray *a, GArray *b)
{
  g_assert_nonnull (a);
  g_assert_nonnull (b);
  g_assert_cmpuint (a->len, ==, b->len);
  for (guint i = 0; i < a->len; i++)
    {
      const HnTokenProbs *x = &g_array_index (a, HnTokenProbs, i), *y = &g_array_index (b, HnTokenProbs, i);
      g_assert_cmpint (x->token, ==, y->token);
      g_assert_cmpfloat (x->p, ==, y->p);
      g_assert_cmpfloat (x->logprob, ==, y->logprob);
      g_assert_cmpuint (x->n_candidates, ==, y->n_candidates);
      for (guint k = 0; k < x->n_candidates; k++)
        {
          g_assert_cmpint (x->candidates[k].id, ==, y->candidates[k].id);
          g_assert_cmpfloat (x->candidates[k].p, ==, y->candidates[k].p);
          g_assert_cmpuint (x->candidates[k].removed_by, ==, y->candidates[k].removed_by);
        }
    }
}

static void
test_lens (void)
{
  hanashi_test_scripted_set_reply (reply_pieces);
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  HanashiStore *store = hanashi_window_get_store (window);
  const char *answer = "**Bold** café and more";

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  hanashi_composer_set_text (get_composer (window), "Tell me something bold");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  HanashiMessage *reply = message_at (window, 1);
  g_assert_cmpstr (hanashi_message_get_text (reply), ==, answer);
  GArray *records = hanashi_message_get_token_probs (reply);
  g_assert_nonnull (records);
  g_assert_cmpuint (records->len, ==, N_PIECES);

  /* off: the answer as Markdown, no token view */
  g_assert_false (lens_state (window));
  g_assert_null (token_view_of (window, 1));

  /* on: each token where it lies in the text, shaded by the probability it was chosen with */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.show-probabilities", NULL);
  g_assert_true (lens_state (window));
  HanashiTokenView *view = token_view_of (window, 1);
  g_assert_nonnull (view);
  g_assert_cmpuint (hanashi_token_view_get_n_tokens (view), ==, N_PIECES);
  /* the character cut over tokens 3 and 4 belongs to the first of them; the second keeps
   * the space after it */
  const char *const expected_texts[N_PIECES] = { "**Bo", "ld** ", "caf", "é", " ", "and ", "more" };
  for (guint i = 0; i < N_PIECES; i++)
    {
      HanashiTokenSpan span = hanashi_token_view_get_span (view, i);
      g_autofree char *slice = buffer_slice (view, span);
      g_assert_cmpstr (slice, ==, expected_texts[i]);
      int shade = hanashi_token_view_get_shade (view, i);
      if (*expected_texts[i] == '\0')
        g_assert_cmpint (shade, ==, -1);
      else
        {
          g_assert_cmpint (shade, ==, hanashi_token_shade_level (g_array_index (records, HnTokenProbs, i).p));
          g_assert_cmpint (shade, >, 0);   /* the scripted tokens are chosen with 60% */
        }
    }
  g_assert_null (hanashi_message_row_get_lens_note (row_for (GTK_WIDGET (window), reply)));
  /* the user's message is not an answer */
  g_assert_null (token_view_of (window, 0));

  /* clicking a token: its candidates, the chosen one marked, the removed one labelled */
  hanashi_token_view_show_candidates (view, 2);
  wait_until (popover_shown, view);
  HanashiProbChart *chart = hanashi_token_view_get_chart (view);
  const HnTokenProbs *third = &g_array_index (records, HnTokenProbs, 2);
  g_assert_cmpuint (hanashi_prob_chart_get_n_bars (chart), ==, third->n_candidates);
  g_assert_cmpint (hanashi_prob_chart_get_chosen_index (chart), ==, 0);
  g_assert_true (g_str_has_prefix (hanashi_prob_chart_get_bar_label (chart, 0), "caf "));
  g_assert_true (g_str_has_prefix (hanashi_prob_chart_get_bar_label (chart, 1), "alt1_2 "));
  guint last = third->n_candidates - 1;
  g_assert_true (hanashi_prob_chart_bar_is_removed (chart, last));
  g_assert_nonnull (strstr (hanashi_prob_chart_get_bar_label (chart, last), "top-k"));
  gtk_popover_popdown (hanashi_token_view_get_popover (view));
  settle ();

  /* the keyboard: Enter on the caret's token opens that token's candidates */
  GtkWidget *text_view = find_by_type (GTK_WIDGET (view), GTK_TYPE_TEXT_VIEW);
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (GTK_TEXT_VIEW (text_view));
  GtkTextIter at;
  gtk_text_buffer_get_iter_at_offset (buffer, &at, hanashi_token_view_get_span (view, 5).start + 1);
  gtk_text_buffer_place_cursor (buffer, &at);
  g_autoptr (GListModel) controllers = gtk_widget_observe_controllers (text_view);
  gboolean handled = FALSE;
  for (guint i = 0; i < g_list_model_get_n_items (controllers) && !handled; i++)
    {
      g_autoptr (GtkEventController) controller = g_list_model_get_item (controllers, i);
      if (GTK_IS_EVENT_CONTROLLER_KEY (controller))
        g_signal_emit_by_name (controller, "key-pressed", GDK_KEY_Return, 36, 0, &handled);
    }
  g_assert_true (handled);
  wait_until (popover_shown, view);
  g_assert_true (g_str_has_prefix (hanashi_prob_chart_get_bar_label (chart, 1), "alt1_5 "));

  /* choosing another candidate (with the popover still open on another token) continues
   * the answer from there as a new version */
  gint64 first_reply = hanashi_message_get_id (reply);
  g_autoptr (GArray) original = g_array_copy (records);
  hanashi_token_view_show_candidates (view, 2);
  wait_until (popover_shown, view);
  GtkWidget *choice = find_button (GTK_WIDGET (hanashi_token_view_get_popover (view)), "alt1_2 ");
  g_assert_nonnull (choice);
  g_signal_emit_by_name (choice, "clicked");
  wait_until (reply_done, window);
  HanashiMessage *branched = message_at (window, 1);
  gint64 branched_id = hanashi_message_get_id (branched);
  g_assert_cmpint (branched_id, !=, first_reply);
  g_assert_cmpuint (hanashi_message_get_n_alternatives (branched), ==, 2);
  /* the prefix up to the token, the chosen candidate, then the reply from token 3 on */
  g_assert_cmpstr (hanashi_message_get_text (branched), ==, "**Bold** alt1_2 \xc3\xa9 and more");
  GArray *branched_records = hanashi_message_get_token_probs (branched);
  g_assert_nonnull (branched_records);
  g_assert_cmpuint (branched_records->len, ==, N_PIECES);
  for (guint i = 0; i < 2; i++)
    g_assert_cmpint (g_array_index (branched_records, HnTokenProbs, i).token, ==,
                     g_array_index (original, HnTokenProbs, i).token);
  const HnTokenProbs *chosen = &g_array_index (branched_records, HnTokenProbs, 2);
  g_assert_cmpint (chosen->token, ==, 1002);
  g_assert_cmpfloat (chosen->p, ==, g_array_index (original, HnTokenProbs, 2).candidates[1].p);
  /* the rest came from the engine, which went on after the three tokens it was given */
  g_assert_cmpint (g_array_index (branched_records, HnTokenProbs, 3).token, ==, 3);

  /* the branched reply's records are stored and come back with it */
  g_autoptr (HanashiStoredMessage) stored = hanashi_store_dup_message (store, branched_id, NULL);
  g_assert_nonnull (stored);
  g_assert_nonnull (stored->token_probs);
  g_autoptr (GArray) unpacked = hanashi_token_probs_unpack (stored->token_probs, NULL);
  check_records_equal (unpacked, branched_records);
  g_autoptr (GArray) branched_copy = g_array_copy (branched_records);
  gint64 conversation = hanashi_window_get_conversation_id (window);
  hanashi_window_load_conversation (window, 0);
  hanashi_window_load_conversation (window, conversation);
  check_records_equal (hanashi_message_get_token_probs (message_at (window, 1)), branched_copy);
  /* and the lens shows the branched answer's tokens, the chosen candidate among them */
  view = token_view_of (window, 1);
  g_assert_nonnull (view);
  g_autofree char *chosen_text = buffer_slice (view, hanashi_token_view_get_span (view, 2));
  g_assert_cmpstr (chosen_text, ==, "alt1_2 ");

  /* an answer without records (an old or a remote one) says so, quietly */
  gint64 old = hanashi_store_create_conversation (store, "Old chat", NULL);
  gint64 question = hanashi_store_add_message (store, old, 0, 0, "user", "Hello?", TRUE, NULL);
  hanashi_store_add_message (store, old, question, 0, "assistant", "Hello.", TRUE, NULL);
  hanashi_window_load_conversation (window, old);
  g_assert_null (token_view_of (window, 1));
  const char *note = hanashi_message_row_get_lens_note (row_for (GTK_WIDGET (window), message_at (window, 1)));
  g_assert_nonnull (note);
  g_assert_nonnull (strstr (note, "No token probabilities"));

  /* off again: Markdown, no note */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.show-probabilities", NULL);
  g_assert_false (lens_state (window));
  settle ();
  g_assert_null (hanashi_message_row_get_lens_note (row_for (GTK_WIDGET (window), message_at (window, 1))));
  hanashi_window_load_conversation (window, conversation);
  g_assert_null (token_view_of (window, 1));

  hanashi_test_scripted_set_reply (NULL);
  gtk_window_destroy (GTK_WINDOW (window));
}

static gboolean
lens_at_next_token (gpointer lens)
{
  return hanashi_lens_view_get_position (lens) == NULL;
}

/* "Show in the Lens" on a token of an answer: one model run for the row at that token (the
 * answer's tokens before it as the reply prefix, nothing else), the panel and its lens
 * opened on it with a heading naming the token, the token the answer took there marked;
 * the sliders then recompute that row without a run, the conversation going on leaves it,
 * and "Next Token" goes back to the next token of the conversation. */
static void
test_show_in_lens (void)
{
  hanashi_test_scripted_set_reply (reply_pieces);
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1200, 900, TRUE);
  HanashiParamsPanel *panel = get_panel (window);
  HanashiLensView *lens = hanashi_params_panel_get_lens (panel);
  HanashiProbChart *chart = hanashi_lens_view_get_chart (lens);

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  hanashi_composer_set_text (get_composer (window), "Tell me something bold");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  set_spin (panel, "top_k", 3);
  set_spin (panel, "top_p", 1.0);
  set_spin (panel, "min_p", 0.0);
  set_spin (panel, "temperature", 1.0);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.show-probabilities", NULL);
  HanashiTokenView *view = token_view_of (window, 1);
  g_assert_nonnull (view);
  GArray *records = hanashi_message_get_token_probs (message_at (window, 1));
  g_assert_cmpuint (records->len, ==, N_PIECES);
  gboolean revealed = TRUE;
  g_object_get (window, "panel-revealed", &revealed, NULL);
  g_assert_false (revealed);
  g_assert_false (hanashi_lens_view_get_open (lens));
  g_assert_null (hanashi_lens_view_get_position (lens));

  /* the third token ("caf"), from its popover */
  guint runs = hanashi_test_scripted_next_logits_runs ();
  hanashi_token_view_show_candidates (view, 2);
  wait_until (popover_shown, view);
  GtkWidget *show = find_named (GTK_WIDGET (hanashi_token_view_get_popover (view)), "show-in-lens");
  g_assert_nonnull (show);
  g_signal_emit_by_name (show, "clicked");
  wait_until (chart_filled, chart);
  run_for (400);   /* a second run would have come by now (the lens's own refresh delay) */
  g_assert_cmpuint (hanashi_test_scripted_next_logits_runs (), ==, runs + 1);
  guint n_prefix = 0;
  g_autofree gint32 *prefix = hanashi_test_scripted_dup_last_lens_prefix (&n_prefix);
  g_assert_cmpuint (n_prefix, ==, 2);
  for (guint i = 0; i < n_prefix; i++)
    g_assert_cmpint (prefix[i], ==, g_array_index (records, HnTokenProbs, i).token);
  g_assert_false (popover_shown (view));
  g_object_get (window, "panel-revealed", &revealed, NULL);
  g_assert_true (revealed);
  g_assert_true (hanashi_lens_view_get_open (lens));
  const char *position = hanashi_lens_view_get_position (lens);
  g_assert_nonnull (position);
  g_assert_nonnull (strstr (position, "Token 3 of the answer"));
  g_assert_nonnull (strstr (position, "caf"));
  /* the scripted row puts the token the answer took (2) second: marked there, not the first */
  g_assert_cmpint (hanashi_prob_chart_get_chosen_index (chart), ==, 1);
  g_assert_true (g_str_has_prefix (hanashi_prob_chart_get_bar_label (chart, 1), "t2 "));

  /* the sliders recompute that row, no model run */
  g_assert_false (hanashi_prob_chart_bar_is_removed (chart, 1));
  g_assert_true (hanashi_prob_chart_bar_is_removed (chart, 3));
  set_spin (panel, "top_k", 1);
  g_assert_true (hanashi_prob_chart_bar_is_removed (chart, 1));
  g_assert_nonnull (strstr (hanashi_prob_chart_get_bar_label (chart, 1), "top-k"));
  set_spin (panel, "top_k", 6);
  g_assert_false (hanashi_prob_chart_bar_is_removed (chart, 3));
  g_assert_cmpint (hanashi_prob_chart_get_chosen_index (chart), ==, 1);

  /* a draft (the conversation going on) leaves the picked token where it is */
  hanashi_composer_set_text (get_composer (window), "And now?");
  run_for (400);
  g_assert_cmpuint (hanashi_test_scripted_next_logits_runs (), ==, runs + 1);
  g_assert_cmpstr (hanashi_lens_view_get_position (lens), ==, position);

  /* back to the next token: a run without a prefix, the draft included */
  GtkWidget *back = find_named (GTK_WIDGET (panel), "lens-back");
  g_assert_nonnull (back);
  g_assert_true (gtk_widget_is_visible (back));
  runs_awaited = runs + 2;
  g_assert_true (gtk_widget_is_sensitive (back));
  g_assert_true (gtk_widget_activate (back));   /* a button clicks once its press is shown */
  wait_until (lens_at_next_token, lens);
  wait_until (runs_reached, NULL);
  wait_until (chart_filled, chart);
  g_free (g_steal_pointer (&prefix));
  prefix = hanashi_test_scripted_dup_last_lens_prefix (&n_prefix);
  g_assert_cmpuint (n_prefix, ==, 0);
  g_assert_false (gtk_widget_is_visible (back));
  g_assert_cmpint (hanashi_prob_chart_get_chosen_index (chart), !=, 1);

  /* picked again, then another chat: back to that chat's next token */
  hanashi_composer_set_text (get_composer (window), "");
  hanashi_token_view_show_candidates (view, 4);
  wait_until (popover_shown, view);
  g_signal_emit_by_name (find_named (GTK_WIDGET (hanashi_token_view_get_popover (view)), "show-in-lens"), "clicked");
  g_assert_nonnull (hanashi_lens_view_get_position (lens));
  g_assert_nonnull (strstr (hanashi_lens_view_get_position (lens), "Token 5 of the answer"));
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  wait_until (lens_at_next_token, lens);

  hanashi_test_scripted_set_reply (NULL);
  gtk_window_destroy (GTK_WINDOW (window));
}

/* A picture of the lens for the user guide: shaded tokens of an answer whose tokens were
 * chosen with different probabilities. */
static void
test_screenshot_lens (void)
{
  if (!g_getenv ("HANASHI_SCREENSHOT_DIR"))
    {
      g_test_skip ("HANASHI_SCREENSHOT_DIR is not set");
      return;
    }
  const char *const pieces[] = { "The", " kettle", " sings", " by", " the", " door", ",", " tea", " for",
                                 " two", " again", ".", NULL };
  const float ps[] = { 0.97f, 0.21f, 0.55f, 0.42f, 0.93f, 0.08f, 0.7f, 0.35f, 0.96f, 0.8f, 0.16f, 0.99f };
  hanashi_test_scripted_set_reply (pieces);
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  HanashiStore *store = hanashi_window_get_store (window);
  g_autoptr (GPtrArray) old = hanashi_store_list_conversations (store, NULL, NULL);
  for (guint i = 0; i < old->len; i++)
    hanashi_store_delete_conversation (store, ((HanashiStoredConversation *) g_ptr_array_index (old, i))->id, NULL);
  gint64 conversation = hanashi_store_create_conversation (store, "Haiku about autumn", NULL);
  gint64 question = hanashi_store_add_message (store, conversation, 0, 0, "user", "Finish my haiku about tea.", TRUE, NULL);
  g_autofree char *text = g_strjoinv ("", (char **) pieces);
  gint64 answer = hanashi_store_add_message (store, conversation, question, 0, "assistant", text, TRUE, NULL);
  /* records as the scripted engine makes them (its token i is piece i), each with its own p */
  g_autoptr (GArray) records = g_array_new (FALSE, TRUE, sizeof (HnTokenProbs));
  for (guint i = 0; i < G_N_ELEMENTS (ps); i++)
    {
      HnTokenProbs r = { .token = (int32_t) i, .logprob = -0.5f, .p = ps[i], .n_candidates = 3 };
      for (int k = 0; k < 3; k++)
        r.candidates[k] = (HnProbCandidate) { .id = k * 1000 + (int32_t) i, .logprob = -(float) (k + 1),
                                              .p = k == 0 ? ps[i] : (1 - ps[i]) / 2 };
      g_array_append_val (records, r);
    }
  g_autoptr (GBytes) blob = hanashi_token_probs_pack ((const HnTokenProbs *) (void *) records->data, records->len);
  g_assert_true (hanashi_store_set_token_probs (store, answer, blob, NULL));
  hanashi_window_load_conversation (window, conversation);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.show-probabilities", NULL);
  HanashiTokenView *view = token_view_of (window, 1);
  g_assert_nonnull (view);
  g_assert_cmpint (hanashi_token_view_get_shade (view, 5), ==, HANASHI_TOKEN_SHADE_LEVELS - 1);
  test_screenshot (GTK_WIDGET (window), "window-probabilities");
  hanashi_test_scripted_set_reply (NULL);
  gtk_window_destroy (GTK_WINDOW (window));
}

int
main (int argc, char **argv)
{
  scripted_test_init (&argc, &argv);
  write_scripted_model (g_get_user_data_dir ());

  g_test_add_func ("/Hanashi/TokenLens/spans", test_spans);
  g_test_add_func ("/Hanashi/TokenLens/lens", test_lens);
  g_test_add_func ("/Hanashi/TokenLens/show-in-lens", test_show_in_lens);
  g_test_add_func ("/Hanashi/TokenLens/screenshot", test_screenshot_lens);
  int status = g_test_run ();
  g_free (model_path);
  return status;
}
