/* The chat window end to end with the engine's scripted backend: sending, streaming into
 * the list and the database, stop, store failures, alternatives, the narrow layout, a long
 * conversation and screenshots.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>
#include <sqlite3.h>

#include "hanashi-application.h"
#include "hanashi-chat-view.h"
#include "hanashi-composer.h"
#include "hanashi-conversation-io.h"
#include "hanashi-conversation-item.h"
#include "hanashi-sidebar.h"
#include "hanashi-engine-backend.h"
#include "hanashi-message-row.h"
#include "hanashi-models-dialog.h"
#include "hanashi-params-panel.h"
#include "hanashi-window.h"
#include "test-screenshot.h"
#include "test-widgets.h"
#include "test-scripted.h"
#include "test-window-helpers.h"
#include "test-xdg.h"
#include "hanashi-test-seams.h"

static GtkWidget *
find_label_containing (GtkWidget *root, const char *needle)
{
  if (GTK_IS_LABEL (root) && strstr (gtk_label_get_label (GTK_LABEL (root)), needle) != NULL)
    return root;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = find_label_containing (child, needle);
      if (found)
        return found;
    }
  return NULL;
}

static const char *full_reply =
  "tok0 tok1 tok2 tok3 tok4 tok5 tok6 tok7 tok8 tok9 tok10 tok11 tok12 tok13 tok14 tok15 ";

static void
count_changes (guint *changes)
{
  (*changes)++;
}

/* The status label reads "used / size", then " · N tok/s" once a reply has a speed. */
static gboolean
meter_reads (GtkLabel *status, const char *meter)
{
  const char *text = gtk_label_get_label (status);
  return g_str_has_prefix (text, meter) &&
         (text[strlen (meter)] == '\0' || g_str_has_prefix (text + strlen (meter), " · "));
}

/* What the label should read for @meter, for a readable assertion message. */
static const char *
expect_status (GtkLabel *status, const char *meter)
{
  return meter_reads (status, meter) ? gtk_label_get_label (status) : meter;
}

static void
test_send (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  HanashiComposer *composer = get_composer (window);
  GListModel *messages = hanashi_window_get_messages (window);

  /* With the model loaded, typing goes into the composer. */
  wait_window_active (GTK_WINDOW (window));
  g_assert_true (gtk_widget_has_focus (GTK_WIDGET (hanashi_composer_get_text_view (composer))));
  guint changes = 0;
  g_signal_connect_swapped (window, "conversations-changed", G_CALLBACK (count_changes), &changes);

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 0);
  hanashi_composer_set_text (composer, "Hello there, how are you today? This first line is long");

  /* Shift+Enter is left to the text view (a new line); nothing is sent. */
  g_assert_false (press_enter (window, GDK_SHIFT_MASK));
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 0);

  /* While an input method composes (Japanese, Chinese), Enter confirms it and sends nothing. */
  GtkTextView *text_view = hanashi_composer_get_text_view (composer);
  g_signal_emit_by_name (text_view, "preedit-changed", "にほん");
  g_assert_false (press_enter (window, 0));
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 0);
  g_signal_emit_by_name (text_view, "preedit-changed", "");

  g_assert_true (press_enter (window, 0));
  /* The user message and the (empty, incomplete) reply exist at once. */
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 2);
  g_assert_true (hanashi_message_is_user (message_at (window, 0)));
  g_assert_false (hanashi_message_get_complete (message_at (window, 1)));
  g_autofree char *left = hanashi_composer_dup_text (composer);
  g_assert_cmpstr (left, ==, "");
  g_assert_true (hanashi_composer_get_generating (composer));

  wait_until (reply_done, window);
  /* The list of chats hears of the new message and of the finished reply. */
  g_assert_cmpuint (changes, ==, 2);
  g_assert_cmpint (hanashi_window_get_conversation_id (window), >, 0);
  HanashiMessage *reply = message_at (window, 1);
  g_assert_cmpstr (hanashi_message_get_text (reply), ==, full_reply);
  g_assert_true (hanashi_message_get_complete (reply));
  g_assert_cmpint (hanashi_message_get_token_count (reply), ==, 16);

  /* Both are in the database, the reply complete, under a title from the first line. */
  HanashiStore *store = hanashi_window_get_store (window);
  gint64 conversation = hanashi_window_get_conversation_id (window);
  g_autoptr (GPtrArray) stored = hanashi_store_list_messages (store, conversation, NULL);
  g_assert_cmpuint (stored->len, ==, 2);
  HanashiStoredMessage *user = g_ptr_array_index (stored, 0), *assistant = g_ptr_array_index (stored, 1);
  g_assert_cmpstr (user->role, ==, "user");
  g_assert_cmpstr (user->text, ==, "Hello there, how are you today? This first line is long");
  g_assert_cmpstr (assistant->role, ==, "assistant");
  g_assert_cmpstr (assistant->text, ==, full_reply);
  g_assert_true (assistant->complete);
  g_assert_cmpint (assistant->parent_id, ==, user->id);
  g_assert_cmpint (assistant->token_count, ==, 16);
  g_autoptr (HanashiStoredConversation) c = hanashi_store_dup_conversation (store, conversation, NULL);
  g_assert_cmpstr (c->title, ==, "Hello there, how are you today? This fi…");
  g_assert_cmpstr (gtk_window_get_title (GTK_WINDOW (window)), ==, c->title);

  /* The context meter counts the conversation as the engine templates it (the scripted
   * backend: 4 tokens per message plus one per byte) against the context the engine
   * allocated: with the setting at its default, what the model supports (the scripted
   * model's 512). */
  g_autofree char *meter = g_strdup_printf ("%d / 512", (int) (4 + strlen (user->text) + 4 + strlen (full_reply)));
  GtkLabel *status = find_status_label (GTK_WIDGET (window));
  g_assert_nonnull (status);
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (!meter_reads (status, meter) && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, FALSE);
  g_assert_cmpstr (gtk_label_get_label (status), ==, expect_status (status, meter));

  /* A draft counts as the next message once typing pauses, and leaves with the text. */
  hanashi_composer_set_text (get_composer (window), "Draft!");
  g_autofree char *with_draft = g_strdup_printf ("%d / 512", (int) (4 + strlen (user->text) + 4 + strlen (full_reply) + 4 + 6));
  deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (!meter_reads (status, with_draft) && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, FALSE);
  g_assert_cmpstr (gtk_label_get_label (status), ==, expect_status (status, with_draft));
  hanashi_composer_set_text (get_composer (window), "");
  deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (!meter_reads (status, meter) && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, FALSE);
  g_assert_cmpstr (gtk_label_get_label (status), ==, expect_status (status, meter));

  /* The rows show the user and the assistant differently. */
  settle ();
  GtkWidget *row = find_by_type (GTK_WIDGET (get_chat_view (window)), HANASHI_TYPE_MESSAGE_ROW);
  g_assert_nonnull (row);
  g_assert_true (gtk_widget_has_css_class (row, "user"));
  GtkWidget *next = gtk_widget_get_next_sibling (gtk_widget_get_parent (row));
  g_assert_nonnull (next);
  g_assert_true (gtk_widget_has_css_class (gtk_widget_get_first_child (next), "assistant"));

  gtk_window_destroy (GTK_WINDOW (window));
}

static void
test_send_disabled_without_model (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, FALSE);
  HanashiStore *store = hanashi_window_get_store (window);

  /* A new chat without a model: the page that says what to do. */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  settle ();
  GtkWidget *page = find_by_type (GTK_WIDGET (window), ADW_TYPE_STATUS_PAGE);
  g_assert_cmpstr (adw_status_page_get_title (ADW_STATUS_PAGE (page)), ==, "No Model Loaded");
  g_assert_true (gtk_widget_get_mapped (page));
  g_assert_false (gtk_widget_get_mapped (GTK_WIDGET (get_composer (window))));

  /* An earlier chat stays readable, but nothing is sent, and the text stays. */
  gint64 conversation = hanashi_store_create_conversation (store, "Old", NULL);
  gint64 question = hanashi_store_add_message (store, conversation, 0, 0, "user", "Old question", TRUE, NULL);
  hanashi_store_add_message (store, conversation, question, 0, "assistant", "Old answer", TRUE, NULL);
  hanashi_window_load_conversation (window, conversation);
  settle ();
  g_assert_false (gtk_widget_get_mapped (page));
  g_assert_true (gtk_widget_get_mapped (GTK_WIDGET (get_composer (window))));
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 2);
  hanashi_composer_set_text (get_composer (window), "Anyone there?");
  g_assert_true (press_enter (window, 0));
  gtk_widget_activate_action (GTK_WIDGET (window), "win.send", NULL);
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 2);
  g_autofree char *kept = hanashi_composer_dup_text (get_composer (window));
  g_assert_cmpstr (kept, ==, "Anyone there?");
  g_autoptr (GPtrArray) stored = hanashi_store_list_messages (store, conversation, NULL);
  g_assert_cmpuint (stored->len, ==, 2);
  gtk_window_destroy (GTK_WINDOW (window));
}

static HanashiParamsPanel *get_panel (HanashiWindow *window);

/* The panel's values are what the engine gets; an invalid grammar refuses to send. */
static void
test_params (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  GListModel *messages = hanashi_window_get_messages (window);

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  hanashi_params_panel_set_params_json (get_panel (window),
                                        "{\"grammar_mode\": \"gbnf\", \"grammar\": \"root ::= \\\"a\"}");
  hanashi_composer_set_text (get_composer (window), "Say a");
  g_assert_true (press_enter (window, 0));
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 0);
  g_autofree char *kept = hanashi_composer_dup_text (get_composer (window));
  g_assert_cmpstr (kept, ==, "Say a");
  g_assert_cmpint (hanashi_window_get_conversation_id (window), ==, 0);

  hanashi_params_panel_set_params_json (get_panel (window), "{\"max_new_tokens\": 5}");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 1)), ==, "tok0 tok1 tok2 tok3 tok4 ");
  /* The conversation keeps the values it was started with. */
  g_autoptr (HanashiStoredConversation) c = hanashi_store_dup_conversation (hanashi_window_get_store (window),
                                                                           hanashi_window_get_conversation_id (window), NULL);
  g_assert_nonnull (strstr (c->params_json, "\"max_new_tokens\":5"));
  gtk_window_destroy (GTK_WINDOW (window));
}

static gboolean
reply_started (gpointer data)
{
  GListModel *messages = hanashi_window_get_messages (data);
  guint n = g_list_model_get_n_items (messages);
  if (n == 0)
    return FALSE;
  g_autoptr (HanashiMessage) last = g_list_model_get_item (messages, n - 1);
  return !hanashi_message_is_user (last) && strlen (hanashi_message_get_text (last)) > 40;
}

static void
test_stop (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  /* Long enough that Stop lands mid-answer; the reply waits before its 21st token until
   * Stop cancels it, so a slow main loop cannot see it end first. */
  hanashi_params_panel_set_params_json (get_panel (window), "{\"max_new_tokens\": 100000}");
  hanashi_test_scripted_hold_at (20);
  hanashi_composer_set_text (get_composer (window), "Count forever");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_started, window);

  /* While the reply is written, Enter keeps the next message in the composer. */
  hanashi_composer_set_text (get_composer (window), "Next one");
  g_assert_true (press_enter (window, 0));
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 2);
  g_autofree char *waiting = hanashi_composer_dup_text (get_composer (window));
  g_assert_cmpstr (waiting, ==, "Next one");

  g_auto (GStrv) accels = gtk_application_get_accels_for_action (GTK_APPLICATION (app), "win.stop");
  g_assert_cmpstr (accels[0], ==, "Escape");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.stop", NULL));
  wait_until (reply_done, window);
  hanashi_test_scripted_hold_at (-1);

  HanashiMessage *reply = message_at (window, 1);
  g_assert_true (hanashi_message_get_complete (reply));
  g_assert_true (g_str_has_prefix (hanashi_message_get_text (reply), "tok0 tok1 "));
  g_autoptr (HanashiStoredMessage) stored = hanashi_store_dup_message (hanashi_window_get_store (window),
                                                                      hanashi_message_get_id (reply), NULL);
  g_assert_true (stored->complete);
  /* What was shown is what was kept, and it is less than the 100000 tokens asked for. */
  g_assert_cmpstr (stored->text, ==, hanashi_message_get_text (reply));
  g_assert_cmpint (stored->token_count, <, 100000);
  g_assert_cmpint (stored->token_count, >, 0);
  gtk_window_destroy (GTK_WINDOW (window));
}

static gboolean reply_started (gpointer data);

typedef struct {
  HanashiWindow *window;
  gsize length;   /* the reply's length when the watch began */
} GrowthWatch;

/* The streaming reply (message 1) has grown past the watch's length. */
static gboolean
reply_grew (gpointer data)
{
  GrowthWatch *watch = data;
  return strlen (hanashi_message_get_text (message_at (watch->window, 1))) > watch->length;
}
static gboolean
reply_saved (gpointer data)
{
  HanashiMessage *reply = message_at (data, 1);
  g_autoptr (HanashiStoredMessage) stored = hanashi_store_dup_message (hanashi_window_get_store (data),
                                                                      hanashi_message_get_id (reply), NULL);
  return stored->complete;
}

static void
test_store_failure_keeps_text (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  g_autofree char *db_path = g_build_filename (g_get_user_data_dir (), "hanashi", "hanashi.db", NULL);
  sqlite3 *db = NULL;

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  /* A real failure through the real code path: the database refuses new messages. */
  g_assert_cmpint (sqlite3_open (db_path, &db), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_exec (db, "CREATE TRIGGER refuse BEFORE INSERT ON messages"
                                     " BEGIN SELECT RAISE(ABORT, 'disk full'); END;", NULL, NULL, NULL), ==, SQLITE_OK);

  hanashi_composer_set_text (get_composer (window), "Please keep this text");
  g_assert_true (press_enter (window, 0));
  g_autofree char *left = hanashi_composer_dup_text (get_composer (window));
  g_assert_cmpstr (left, ==, "Please keep this text");
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 0);
  g_assert_false (hanashi_composer_get_generating (get_composer (window)));
  /* The store's sentence is shown as it is. */
  wait_for_text (window, "The conversation database reported an unexpected error.");

  /* Once the database accepts writes again, the same text goes through. */
  g_assert_cmpint (sqlite3_exec (db, "DROP TRIGGER refuse;", NULL, NULL, NULL), ==, SQLITE_OK);
  hanashi_params_panel_set_params_json (get_panel (window), "{\"max_new_tokens\": 2000}");
  /* The reply waits at token 20 until the failing trigger is in place, so that it cannot
   * finish first however slow the machine (or a sanitizer) makes the test. */
  hanashi_test_scripted_hold_at (20);
  g_assert_true (press_enter (window, 0));
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 2);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 0)), ==, "Please keep this text");

  /* Saving the growing reply fails for a while (here until after it has finished): it
   * keeps streaming on screen, and once the database works again the whole of it is
   * stored. */
  wait_until (reply_started, window);
  g_assert_cmpint (sqlite3_exec (db, "CREATE TRIGGER refuse_update BEFORE UPDATE ON messages"
                                     " BEGIN SELECT RAISE(ABORT, 'disk full'); END;", NULL, NULL, NULL), ==, SQLITE_OK);
  GrowthWatch growth = { window, strlen (hanashi_message_get_text (message_at (window, 1))) };
  hanashi_test_scripted_hold_at (-1);
  wait_until (reply_grew, &growth);
  wait_until (reply_done, window);
  g_assert_cmpint (sqlite3_exec (db, "DROP TRIGGER refuse_update;", NULL, NULL, NULL), ==, SQLITE_OK);
  sqlite3_close (db);
  wait_until (reply_done, window);
  HanashiMessage *reply = message_at (window, 1);
  wait_until (reply_saved, window);
  g_autoptr (HanashiStoredMessage) stored = hanashi_store_dup_message (hanashi_window_get_store (window),
                                                                      hanashi_message_get_id (reply), NULL);
  g_assert_cmpuint (strlen (stored->text), ==, strlen (hanashi_message_get_text (reply)));
  g_assert_true (g_str_equal (stored->text, hanashi_message_get_text (reply)));
  g_assert_true (stored->complete);
  gtk_window_destroy (GTK_WINDOW (window));
}

static void
test_alternatives (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  HanashiStore *store = hanashi_window_get_store (window);

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  hanashi_composer_set_text (get_composer (window), "First question");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  gint64 user_id = hanashi_message_get_id (message_at (window, 0));
  gint64 first_reply = hanashi_message_get_id (message_at (window, 1));

  /* Regenerate: a second version of the reply, shown, with the first kept. */
  click_message_button (window, "chat.regenerate", message_at (window, 1));
  wait_until (reply_done, window);
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 2);
  gint64 second_reply = hanashi_message_get_id (message_at (window, 1));
  g_assert_cmpint (second_reply, !=, first_reply);
  g_assert_cmpuint (hanashi_message_get_n_alternatives (message_at (window, 1)), ==, 2);
  g_assert_cmpuint (hanashi_message_get_alternative_index (message_at (window, 1)), ==, 1);
  g_autoptr (GPtrArray) all = hanashi_store_list_messages (store, hanashi_window_get_conversation_id (window), NULL);
  g_assert_cmpuint (all->len, ==, 3);

  /* The arrows switch between them, and the choice is stored. */
  click_message_button (window, "row.previous-alternative", message_at (window, 1));
  g_assert_cmpint (hanashi_message_get_id (message_at (window, 1)), ==, first_reply);
  g_assert_cmpuint (hanashi_message_get_alternative_index (message_at (window, 1)), ==, 0);
  g_autoptr (HanashiStoredMessage) shown = hanashi_store_dup_message (store, first_reply, NULL);
  g_assert_true (shown->shown);
  click_message_button (window, "row.next-alternative", message_at (window, 1));
  g_assert_cmpint (hanashi_message_get_id (message_at (window, 1)), ==, second_reply);

  /* Edit the question: a new version of it with its own reply; the old one stays. */
  click_message_button (window, "chat.edit", message_at (window, 0));
  g_autofree char *editing = hanashi_composer_dup_text (get_composer (window));
  g_assert_cmpstr (editing, ==, "First question");
  g_assert_true (hanashi_composer_get_editing (get_composer (window)));
  hanashi_composer_set_text (get_composer (window), "Second question");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 2);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 0)), ==, "Second question");
  g_assert_cmpuint (hanashi_message_get_n_alternatives (message_at (window, 0)), ==, 2);
  g_assert_cmpuint (hanashi_message_get_n_alternatives (message_at (window, 1)), ==, 1);
  g_assert_false (hanashi_composer_get_editing (get_composer (window)));

  /* Back to the first question: its thread, with both of its replies, comes back. */
  click_message_button (window, "row.previous-alternative", message_at (window, 0));
  g_assert_cmpint (hanashi_message_get_id (message_at (window, 0)), ==, user_id);
  g_assert_cmpint (hanashi_message_get_id (message_at (window, 1)), ==, second_reply);
  g_assert_cmpuint (hanashi_message_get_n_alternatives (message_at (window, 1)), ==, 2);

  /* Deleting one version shows its neighbour. */
  click_message_button (window, "chat.delete", message_at (window, 1));
  g_assert_cmpint (hanashi_message_get_id (message_at (window, 1)), ==, first_reply);
  g_assert_cmpuint (hanashi_message_get_n_alternatives (message_at (window, 1)), ==, 1);
  /* Deleting the only reply leaves the question. */
  click_message_button (window, "chat.delete", message_at (window, 1));
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 1);

  /* The toast's Undo brings it back with its id, in the store and on screen (the toast of
   * the first deletion now undoes the second). */
  gint64 conversation = hanashi_window_get_conversation_id (window);
  wait_until (one_undo_toast, window);
  GtkWidget *undo = find_button (GTK_WIDGET (window), "Undo");
  g_assert_nonnull (undo);
  g_signal_emit_by_name (undo, "clicked");
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 2);
  g_assert_cmpint (hanashi_message_get_id (message_at (window, 1)), ==, first_reply);
  g_autoptr (GPtrArray) restored = hanashi_store_list_messages (store, conversation, NULL);
  g_assert_cmpuint (restored->len, ==, 4);  /* both questions, and the second one's reply */

  /* Undo never overwrites what happened after the deletion. */
  click_message_button (window, "chat.delete", message_at (window, 1));
  wait_until (one_undo_toast, window);
  undo = find_button (GTK_WIDGET (window), "Undo");
  g_assert_nonnull (undo);
  hanashi_composer_set_text (get_composer (window), "Third question");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 3);
  /* The change ended the offer: the toast leaves, and its button (still animating out)
   * and Ctrl+Z's action bring nothing back. */
  g_signal_emit_by_name (undo, "clicked");
  gtk_widget_activate_action (GTK_WIDGET (window), "chat.undo-delete", NULL);
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 3);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 1)), ==, "Third question");
  /* With libadwaita 1.2, destroying the window while the toast animates out crashed. */
  wait_until (no_undo_toast, window);
  settle ();
  gtk_window_destroy (GTK_WINDOW (window));
}

static void
text_read (GObject *source, GAsyncResult *result, gpointer data)
{
  *(char **) data = gdk_clipboard_read_text_finish (GDK_CLIPBOARD (source), result, NULL);
}

static gboolean
pointer_set (gpointer data)
{
  return *(char **) data != NULL;
}

/* Whether the part of @row under @child is drawn in one colour (the child invisible):
 * the row is rendered as the screen shows it, CSS opacity included. */
static gboolean
child_drawn_blank (GtkWidget *row, GtkWidget *child)
{
  int width = gtk_widget_get_width (row), height = gtk_widget_get_height (row);
  g_assert_cmpint (width, >, 0);
  g_autoptr (GdkPaintable) paintable = gtk_widget_paintable_new (row);
  GtkSnapshot *snapshot = gtk_snapshot_new ();
  gdk_paintable_snapshot (paintable, snapshot, width, height);
  g_autoptr (GskRenderNode) node = gtk_snapshot_free_to_node (snapshot);
  g_assert_nonnull (node);
  GskRenderer *renderer = gtk_native_get_renderer (gtk_widget_get_native (row));
  g_autoptr (GdkTexture) texture = gsk_renderer_render_texture (renderer, node, &GRAPHENE_RECT_INIT (0, 0, width, height));
  int tw = gdk_texture_get_width (texture), th = gdk_texture_get_height (texture);
  g_autofree guint32 *pixels = g_new (guint32, (gsize) tw * th);
  gdk_texture_download (texture, (guchar *) pixels, tw * sizeof (guint32));
  graphene_rect_t bounds;
  g_assert_true (gtk_widget_compute_bounds (child, row, &bounds));
  int x0 = MAX (0, (int) bounds.origin.x), y0 = MAX (0, (int) bounds.origin.y);
  int x1 = MIN (tw, (int) (bounds.origin.x + bounds.size.width));
  int y1 = MIN (th, (int) (bounds.origin.y + bounds.size.height));
  g_assert_cmpint (x1, >, x0);
  g_assert_cmpint (y1, >, y0);
  guint32 first = pixels[y0 * tw + x0];
  for (int y = y0; y < y1; y++)
    for (int x = x0; x < x1; x++)
      if (pixels[y * tw + x] != first)
        return FALSE;
  return TRUE;
}

/* Whether @child ends up drawn blank (@blank) or visible once the CSS transition (150 ms)
 * has run.  The transition follows the frame clock, which a loaded machine or a sanitizer
 * slows down, so this looks again for up to ten seconds before it gives the last answer.
 * Another test's window can take the shared display's keyboard meanwhile (and the focus
 * state with it): the window is raised again before each look. */
static gboolean
child_becomes_blank (GtkWidget *row, GtkWidget *child, gboolean blank)
{
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  for (;;)
    {
      wait_window_active (GTK_WINDOW (gtk_widget_get_root (row)));
      while (g_main_context_iteration (NULL, FALSE))
        ;
      g_usleep (20000);
      gboolean now = child_drawn_blank (row, child);
      if (now == blank || g_get_monotonic_time () > deadline)
        return now;
    }
}

/* Copy puts the message's raw text (the Markdown source for replies) on the clipboard. */
static void
test_copy (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  g_autofree char *text = NULL;

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  hanashi_composer_set_text (get_composer (window), "Copy **this**");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  click_message_button (window, "chat.copy", message_at (window, 0));
  GdkClipboard *clipboard = gtk_widget_get_clipboard (GTK_WIDGET (window));
  gdk_clipboard_read_text_async (clipboard, NULL, text_read, &text);
  wait_until (pointer_set, &text);
  g_assert_cmpstr (text, ==, "Copy **this**");
  g_clear_pointer (&text, g_free);
  /* The chat's title is plain text, the Markdown source only on the clipboard. */
  g_assert_cmpstr (gtk_window_get_title (GTK_WINDOW (window)), ==, "Copy this");
  /* It says so, in a toast above the composer: the text being written stays visible. */
  hanashi_composer_set_text (get_composer (window), "A draft the toast must not hide");
  /* The toast goes after two seconds, which a loaded machine can spend settling: then it
   * is copied again (a few times at most) to look at a toast that is still there. */
  GtkWidget *copied = NULL;
  for (int attempt = 0; attempt < 4 && copied == NULL; attempt++)
    {
      if (attempt > 0)
        click_message_button (window, "chat.copy", message_at (window, 0));
      wait_for_text (window, "Copied to clipboard");
      settle ();
      copied = find_label_containing (GTK_WIDGET (window), "Copied to clipboard");
    }
  g_assert_nonnull (copied);
  graphene_rect_t toast_bounds, composer_bounds;
  g_assert_true (gtk_widget_compute_bounds (copied, GTK_WIDGET (window), &toast_bounds));
  g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (get_composer (window)), GTK_WIDGET (window), &composer_bounds));
  g_assert_cmpfloat (toast_bounds.origin.y + toast_bounds.size.height, <=, composer_bounds.origin.y);

  /* A message's actions are hidden until the pointer is on it or the keyboard focus is in
   * it (the pointer of the virtual display may rest on a row; then only focus is checked). */
  GtkWidget *reply_row = GTK_WIDGET (row_for (GTK_WIDGET (window), message_at (window, 1)));
  g_assert_nonnull (reply_row);
  GtkWidget *copy_button = find_action_button (reply_row, "chat.copy");
  g_assert_nonnull (copy_button);
  gtk_widget_grab_focus (GTK_WIDGET (hanashi_composer_get_text_view (get_composer (window))));
  if (!(gtk_widget_get_state_flags (reply_row) & GTK_STATE_FLAG_PRELIGHT))
    g_assert_true (child_becomes_blank (reply_row, copy_button, TRUE));
  else
    g_test_message ("the pointer is on the reply; its hidden state is not checked");
  g_assert_true (gtk_widget_grab_focus (copy_button));
  wait_window_active (GTK_WINDOW (window));
  g_assert_true (gtk_widget_get_state_flags (reply_row) & GTK_STATE_FLAG_FOCUS_WITHIN);
  g_assert_false (child_becomes_blank (reply_row, copy_button, FALSE));
  click_message_button (window, "chat.copy", message_at (window, 1));
  gdk_clipboard_read_text_async (clipboard, NULL, text_read, &text);
  wait_until (pointer_set, &text);
  g_assert_cmpstr (text, ==, full_reply);
  gtk_window_destroy (GTK_WINDOW (window));
}

/* Editing a message in the middle: the chat continues from the new version, and the old
 * version keeps everything that followed it. */
static void
test_edit_earlier (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  GListModel *messages = hanashi_window_get_messages (window);
  const char *questions[] = { "One", "Two", "Three" };

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  hanashi_params_panel_set_params_json (get_panel (window), "{\"max_new_tokens\": 2}");
  for (guint i = 0; i < G_N_ELEMENTS (questions); i++)
    {
      hanashi_composer_set_text (get_composer (window), questions[i]);
      g_assert_true (press_enter (window, 0));
      wait_until (reply_done, window);
    }
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 6);
  gint64 old_two = hanashi_message_get_id (message_at (window, 2));

  click_message_button (window, "chat.edit", message_at (window, 2));
  hanashi_composer_set_text (get_composer (window), "Two, better");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 4);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 0)), ==, "One");
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 2)), ==, "Two, better");
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 3)), ==, "tok0 tok1 ");
  g_assert_cmpuint (hanashi_message_get_alternative_index (message_at (window, 2)), ==, 1);

  click_message_button (window, "row.previous-alternative", message_at (window, 2));
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 6);
  g_assert_cmpint (hanashi_message_get_id (message_at (window, 2)), ==, old_two);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 4)), ==, "Three");
  gtk_window_destroy (GTK_WINDOW (window));
}

/* The chats list and the window together: a sent message puts its chat on top and selected,
 * choosing another chat opens it, Ctrl+F searches, deleting the open chat starts anew. */
static void
test_sidebar (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  HanashiSidebar *sidebar = HANASHI_SIDEBAR (find_by_type (GTK_WIDGET (window), HANASHI_TYPE_SIDEBAR));
  GListModel *list = hanashi_sidebar_get_model (sidebar);

  g_assert_true (hanashi_sidebar_get_store (sidebar) == hanashi_window_get_store (window));
  HanashiStore *store = hanashi_window_get_store (window);
  gint64 before = hanashi_store_create_conversation (store, "Older chat", NULL);
  g_assert_cmpint (hanashi_store_add_message (store, before, 0, 0, "user", "Old words", TRUE, NULL), >, 0);
  hanashi_window_load_conversation (window, before);
  g_assert_cmpint (hanashi_sidebar_get_selected_id (sidebar), ==, before);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  g_assert_cmpint (hanashi_sidebar_get_selected_id (sidebar), ==, 0);
  hanashi_composer_set_text (get_composer (window), "A brand new topic");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  gint64 fresh = hanashi_window_get_conversation_id (window);
  g_assert_cmpint (fresh, !=, before);
  g_autoptr (HanashiConversationItem) top = g_list_model_get_item (list, 0);
  g_assert_cmpint (hanashi_conversation_item_get_id (top), ==, fresh);
  g_assert_cmpstr (hanashi_conversation_item_get_title (top), ==, "A brand new topic");
  g_assert_cmpint (hanashi_sidebar_get_selected_id (sidebar), ==, fresh);

  /* Choosing the previous chat in the list opens it. */
  g_signal_emit_by_name (sidebar, "conversation-activated", before);
  g_assert_cmpint (hanashi_window_get_conversation_id (window), ==, before);
  g_assert_cmpint (hanashi_sidebar_get_selected_id (sidebar), ==, before);

  /* Ctrl+F's action puts the focus into the search entry. */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.search", NULL);
  GtkWidget *focus = gtk_root_get_focus (GTK_ROOT (window));
  g_assert_nonnull (gtk_widget_get_ancestor (focus, GTK_TYPE_SEARCH_ENTRY));

  /* Deleting the chat that is open leaves an empty new chat. */
  g_signal_emit_by_name (sidebar, "conversation-deleted", before);
  g_assert_cmpint (hanashi_window_get_conversation_id (window), ==, 0);
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 0);
  gtk_window_destroy (GTK_WINDOW (window));
}

static gboolean
is_folded (gpointer data)
{
  return adw_leaflet_get_folded (data);
}

static gboolean
is_unfolded (gpointer data)
{
  return !adw_leaflet_get_folded (data);
}

static void
test_narrow (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 360, 640, TRUE);
  AdwLeaflet *leaflet = ADW_LEAFLET (find_by_type (GTK_WIDGET (window), ADW_TYPE_LEAFLET));
  AdwFlap *flap = ADW_FLAP (find_by_type (GTK_WIDGET (window), ADW_TYPE_FLAP));

  wait_until (is_folded, leaflet);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  settle ();
  /* The chat is what shows; its back button leads to the chats and New Chat back again. */
  GtkWidget *chat = adw_leaflet_get_visible_child (leaflet);
  g_assert_true (gtk_widget_is_ancestor (GTK_WIDGET (get_composer (window)), chat));
  g_assert_true (gtk_widget_get_mapped (GTK_WIDGET (get_composer (window))));
  test_screenshot (GTK_WIDGET (window), "window-narrow");

  gtk_widget_activate_action (GTK_WIDGET (window), "win.show-chats", NULL);
  g_assert_false (gtk_widget_is_ancestor (GTK_WIDGET (get_composer (window)), adw_leaflet_get_visible_child (leaflet)));
  /* Alone in the window, the chats pane has the window buttons. */
  GtkWidget *sidebar_header = find_by_type (find_by_type (GTK_WIDGET (window), HANASHI_TYPE_SIDEBAR), ADW_TYPE_HEADER_BAR);
  g_assert_true (adw_header_bar_get_show_end_title_buttons (ADW_HEADER_BAR (sidebar_header)));
  g_assert_true (hanashi_sidebar_get_show_window_buttons (HANASHI_SIDEBAR (find_by_type (GTK_WIDGET (window), HANASHI_TYPE_SIDEBAR))));
  /* Wide again, the chat's header has them and the sidebar's does not. */
  gtk_window_set_default_size (GTK_WINDOW (window), 1100, 760);
  wait_until (is_unfolded, leaflet);
  g_assert_false (adw_header_bar_get_show_end_title_buttons (ADW_HEADER_BAR (sidebar_header)));
  gtk_window_set_default_size (GTK_WINDOW (window), 360, 640);
  wait_until (is_folded, leaflet);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  g_assert_true (gtk_widget_is_ancestor (GTK_WIDGET (get_composer (window)), adw_leaflet_get_visible_child (leaflet)));

  /* The parameter panel slides over the chat. */
  g_assert_false (adw_flap_get_reveal_flap (flap));
  gtk_widget_activate_action (GTK_WIDGET (window), "win.toggle-panel", NULL);
  g_assert_true (adw_flap_get_reveal_flap (flap));
  settle ();
  g_assert_true (adw_flap_get_folded (flap));
  g_assert_true (gtk_widget_get_mapped (GTK_WIDGET (get_panel (window))));
  gtk_widget_activate_action (GTK_WIDGET (window), "win.toggle-panel", NULL);
  g_assert_false (adw_flap_get_reveal_flap (flap));

  gtk_window_destroy (GTK_WINDOW (window));
}

static gint64
make_long_conversation (HanashiStore *store, guint n)
{
  gint64 conversation = hanashi_store_create_conversation (store, "Long", NULL);
  gint64 parent = 0;
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *text = g_strdup_printf ("Message number %u", i);
      parent = hanashi_store_add_message (store, conversation, parent, 0, i % 2 ? "assistant" : "user", text, TRUE, NULL);
      g_assert_cmpint (parent, >, 0);
    }
  return conversation;
}

static void
test_long_conversation (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  HanashiChatView *view = get_chat_view (window);

  gint64 conversation = make_long_conversation (hanashi_window_get_store (window), 2000);
  hanashi_window_load_conversation (window, conversation);
  settle ();
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 2000);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 1999)), ==, "Message number 1999");
  /* Only rows near the visible part exist: GTK 4.8's list view keeps at most about 200
   * items around its anchor, however long the list. */
  guint rows = hanashi_message_row_get_n_instances ();
  g_test_message ("%u row widgets for 2000 messages", rows);
  g_assert_cmpuint (rows, >, 0);
  g_assert_cmpuint (rows, <=, 250);

  /* Opened at the end; a streaming reply is followed... */
  GtkAdjustment *adj = hanashi_chat_view_get_vadjustment (view);
  g_assert_true (hanashi_chat_view_get_following (view));
  hanashi_params_panel_set_params_json (get_panel (window), "{\"max_new_tokens\": 20000}");
  hanashi_composer_set_text (get_composer (window), "And now a long answer");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_started, window);
  settle ();
  g_assert_true (hanashi_chat_view_get_following (view));
  g_assert_cmpfloat (gtk_adjustment_get_value (adj) + gtk_adjustment_get_page_size (adj), >=,
                     gtk_adjustment_get_upper (adj) - 48);

  /* ...until the user scrolls up: the wheel event, then the move it causes. */
  GtkWidget *scroller = gtk_widget_get_ancestor (find_by_type (GTK_WIDGET (view), GTK_TYPE_LIST_VIEW), GTK_TYPE_SCROLLED_WINDOW);
  g_autoptr (GListModel) controllers = gtk_widget_observe_controllers (scroller);
  gboolean scrolled = FALSE;
  for (guint i = 0; i < g_list_model_get_n_items (controllers); i++)
    {
      g_autoptr (GtkEventController) controller = g_list_model_get_item (controllers, i);
      gboolean handled;
      if (GTK_IS_EVENT_CONTROLLER_SCROLL (controller) &&
          gtk_event_controller_get_propagation_phase (controller) == GTK_PHASE_CAPTURE)
        {
          g_signal_emit_by_name (controller, "scroll", 0.0, -3.0, &handled);
          scrolled = !hanashi_chat_view_get_following (view);
        }
    }
  g_assert_true (scrolled);
  gtk_adjustment_set_value (adj, 0);
  g_assert_false (hanashi_chat_view_get_following (view));
  settle ();
  g_assert_cmpfloat (gtk_adjustment_get_value (adj), ==, 0);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.stop", NULL);
  wait_until (reply_done, window);
  g_assert_cmpuint (hanashi_message_row_get_n_instances (), <=, 250);
  gtk_window_destroy (GTK_WINDOW (window));
}

static void
test_restore (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  hanashi_composer_set_system_prompt (get_composer (window), "Be brief.");
  hanashi_composer_set_text (get_composer (window), "Remember me");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  gint64 conversation = hanashi_window_get_conversation_id (window);
  gtk_window_destroy (GTK_WINDOW (window));

  /* A new window opens the most recent conversation, system prompt included. */
  window = make_window (app, 1100, 760, FALSE);
  g_assert_cmpint (hanashi_window_get_conversation_id (window), ==, conversation);
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 2);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 0)), ==, "Remember me");
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 1)), ==, full_reply);
  g_assert_cmpstr (hanashi_composer_get_system_prompt (get_composer (window)), ==, "Be brief.");
  gtk_window_destroy (GTK_WINDOW (window));
}

/* `hanashi MODEL.gguf` goes through GApplication's open: the window loads that model, and
 * it is remembered in the recent models of the empty page. */
static void
test_open_file (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  g_autoptr (GFile) file = g_file_new_for_path (model_path);
  GSettings *settings = g_settings_new (APP_ID);

  g_settings_set_strv (settings, "recent-models", NULL);
  g_application_open (G_APPLICATION (app), &file, 1, "");
  HanashiWindow *window = HANASHI_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  g_assert_nonnull (window);
  wait_until (model_loaded, window);
  g_assert_cmpstr (hanashi_engine_get_model_info (hanashi_window_get_engine (window))->path, ==, model_path);
  /* The loading bar goes away once the model is there. */
  GtkWidget *bar = find_by_type (GTK_WIDGET (window), GTK_TYPE_PROGRESS_BAR);
  g_assert_nonnull (bar);
  settle ();
  g_assert_false (gtk_widget_get_visible (bar));
  g_auto (GStrv) recent = g_settings_get_strv (settings, "recent-models");
  g_assert_cmpuint (g_strv_length (recent), ==, 1);
  g_assert_cmpstr (recent[0], ==, model_path);
  /* Starting the app again presents the same window. */
  g_application_activate (G_APPLICATION (app));
  g_assert_true (gtk_application_get_active_window (GTK_APPLICATION (app)) == GTK_WINDOW (window));
  g_assert_cmpuint (g_list_length (gtk_application_get_windows (GTK_APPLICATION (app))), ==, 1);
  gtk_window_destroy (GTK_WINDOW (window));

  /* A new window starts without a model and offers the recent one. */
  window = make_window (app, 1100, 760, FALSE);
  GtkWidget *row = find_by_type (GTK_WIDGET (window), ADW_TYPE_ACTION_ROW);
  g_assert_nonnull (row);
  g_assert_cmpstr (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (row)), ==, "tiny-test.gguf");
  g_assert_cmpstr (gtk_actionable_get_action_name (GTK_ACTIONABLE (row)), ==, "win.open-recent");
  g_signal_emit_by_name (row, "activate");
  wait_until (model_loaded, window);
  gtk_window_destroy (GTK_WINDOW (window));
  g_object_unref (settings);
}

static gboolean
models_dialog_gone (gpointer data)
{
  return find_toplevel (HANASHI_TYPE_MODELS_DIALOG) == NULL;
}

/* The model name in the header opens the Models page; choosing a model there loads it. */
static void
test_models_dialog (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, FALSE);

  /* The chat pane's header (the nearest to the composer) has the model button as title. */
  GtkWidget *chat_header = NULL;
  for (GtkWidget *w = GTK_WIDGET (get_composer (window)); w && !chat_header; w = gtk_widget_get_parent (w))
    chat_header = find_by_type (w, ADW_TYPE_HEADER_BAR);
  GtkWidget *model_button = adw_header_bar_get_title_widget (ADW_HEADER_BAR (chat_header));
  g_assert_cmpstr (gtk_actionable_get_action_name (GTK_ACTIONABLE (model_button)), ==, "win.choose-model");
  g_signal_emit_by_name (model_button, "clicked");
  GtkWindow *dialog = find_toplevel (HANASHI_TYPE_MODELS_DIALOG);
  g_assert_nonnull (dialog);
  g_assert_true (gtk_window_get_transient_for (dialog) == GTK_WINDOW (window));

  g_signal_emit_by_name (dialog, "model-activated", model_path);
  wait_until (model_loaded, window);
  wait_until (models_dialog_gone, NULL);
  g_assert_cmpstr (hanashi_engine_get_model_info (hanashi_window_get_engine (window))->path, ==, model_path);
  gtk_window_destroy (GTK_WINDOW (window));
}

/* The small Qwen2 test model for the tests that run the real backend, or NULL (and the test
 * skipped) when the test data is not there. */
static GFile *
real_model_file (void)
{
  const char *testdata = g_getenv ("HANASHI_TESTDATA");
  g_autofree char *path = testdata ? g_build_filename (testdata, "models", "tiny-qwen2-gpt2-q8_0.gguf", NULL) : NULL;
  if (path == NULL || !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("tiny-qwen2-gpt2-q8_0.gguf is not in HANASHI_TESTDATA");
      return NULL;
    }
  return g_file_new_for_path (path);
}

/* The same path with the real engine backend and a tiny model from the shared test data. */
static void
test_real_model (void)
{
  g_autoptr (GFile) file = real_model_file ();
  if (file == NULL)
    return;
  hanashi_engine_set_default_backend (NULL);
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, FALSE);

  hanashi_window_open_model (window, file);
  wait_until (model_loaded, window);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  hanashi_params_panel_set_params_json (get_panel (window), "{\"max_new_tokens\": 8, \"temperature\": 0}");
  hanashi_composer_set_text (get_composer (window), "Hello");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);

  HanashiMessage *reply = message_at (window, 1);
  g_assert_true (hanashi_message_get_complete (reply));
  g_assert_cmpint (hanashi_message_get_token_count (reply), >=, 1);
  g_assert_cmpint (hanashi_message_get_token_count (reply), <=, 8);
  g_autoptr (HanashiStoredMessage) stored = hanashi_store_dup_message (hanashi_window_get_store (window),
                                                                      hanashi_message_get_id (reply), NULL);
  g_assert_cmpstr (stored->text, ==, hanashi_message_get_text (reply));
  g_assert_cmpint (stored->token_count, ==, hanashi_message_get_token_count (reply));
  g_assert_true (g_str_has_prefix (stored->params_json, "{"));
  g_assert_nonnull (strstr (stored->params_json, "\"max_new_tokens\":8"));
  /* The real backend measures speed: the reply's footer and the header show it. */
  g_assert_cmpfloat (hanashi_message_get_tokens_per_second (reply), >, 0);
  g_assert_cmpfloat (stored->generation_seconds, >, 0);
  g_assert_nonnull (strstr (gtk_label_get_label (find_status_label (GTK_WIDGET (window))), " tok/s"));

  /* Restart with the conversation's saved state damaged (written here when the engine did
   * not save one): the restored chat still goes on. */
  gint64 conversation = hanashi_window_get_conversation_id (window);
  g_autofree char *session_name = g_strdup_printf ("%" G_GINT64_FORMAT ".hnsession", conversation);
  g_autofree char *session_dir = g_build_filename (g_get_user_cache_dir (), "hanashi", "sessions", NULL);
  g_autofree char *session = g_build_filename (session_dir, session_name, NULL);
  gtk_window_destroy (GTK_WINDOW (window));
  g_assert_cmpint (g_mkdir_with_parents (session_dir, 0700), ==, 0);
  g_assert_true (g_file_set_contents (session, "not a session file at all", -1, NULL));

  window = make_window (app, 1100, 760, FALSE);
  g_assert_cmpint (hanashi_window_get_conversation_id (window), ==, conversation);
  hanashi_window_open_model (window, file);
  wait_until (model_loaded, window);
  hanashi_composer_set_text (get_composer (window), "And again");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 4);
  HanashiMessage *second = message_at (window, 3);
  g_assert_true (hanashi_message_get_complete (second));
  g_assert_cmpint (hanashi_message_get_token_count (second), >=, 1);
  hanashi_test_use_scripted_backend ();
  gtk_window_destroy (GTK_WINDOW (window));
}


/* A chat longer than the context: the engine leaves the oldest turns out and the window
 * says so (real backend, context size 256 and batch size 32 from the settings, so the
 * prompt is read in several steps). */
static void
test_context_overflow (void)
{
  g_autoptr (GFile) file = real_model_file ();
  if (file == NULL)
    return;
  g_autoptr (GSettings) settings = g_settings_new (APP_ID);
  g_settings_set_int (settings, "context-size", 256);
  g_settings_set_int (settings, "batch-size", 32);
  hanashi_engine_set_default_backend (NULL);
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, FALSE);
  hanashi_window_open_model (window, file);
  wait_until (model_loaded, window);
  const HanashiModelInfo *info = hanashi_engine_get_model_info (hanashi_window_get_engine (window));
  g_assert_cmpuint (info->n_ctx, ==, 256);
  g_assert_cmpuint (info->n_batch, ==, 32);

  HanashiStore *store = hanashi_window_get_store (window);
  gint64 conversation = hanashi_store_create_conversation (store, "Long", NULL);
  gint64 parent = 0;
  for (int i = 0; i < 8; i++)
    {
      g_autoptr (GString) text = g_string_new (NULL);
      for (int w = 0; w < 40; w++)
        g_string_append_printf (text, "word%d ", w);
      parent = hanashi_store_add_message (store, conversation, parent, 0, i % 2 ? "assistant" : "user", text->str, TRUE, NULL);
    }
  hanashi_window_load_conversation (window, conversation);
  hanashi_params_panel_set_params_json (get_panel (window), "{\"max_new_tokens\": 4, \"temperature\": 0}");
  hanashi_composer_set_text (get_composer (window), "Still there?");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  g_assert_true (hanashi_message_get_complete (message_at (window, 9)));
  wait_for_text (window, "no longer fit");

  /* a grammar too ambiguous to follow in full: the reply still comes, with a toast */
  g_assert_false (has_label_containing (GTK_WIDGET (window), "too ambiguous to follow"));
  hanashi_params_panel_set_params_json (get_panel (window),
      "{\"max_new_tokens\": 4, \"temperature\": 0, \"grammar_mode\": \"gbnf\", \"grammar\": "
      "\"root ::= item (\\\"uu(u,\\\"* item){217}\\nitem ::= [ -~]+ | [a-z]?\\n\"}");
  hanashi_composer_set_text (get_composer (window), "Any line will do.");
  g_assert_true (press_enter (window, 0));
  wait_until (reply_done, window);
  wait_for_text (window, "too ambiguous to follow");
  gtk_window_destroy (GTK_WINDOW (window));
  g_settings_reset (settings, "context-size");
  g_settings_reset (settings, "batch-size");
  hanashi_test_use_scripted_backend ();
}

/* ---- a reasoning model's thinking ---------------------------------------------------------- */

/* Qwen3's way with enable_thinking: false closes an empty thinking block in the prompt. */
static const char thinking_template[] =
  "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
  "{% if add_generation_prompt %}<|im_start|>assistant\n"
  "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
  "{% endif %}";

/* The output of a reasoning model in pieces, the markers cut across them. */
static const char *const thinking_reply[] = {
  "<th", "ink>\nLet me ", "add 2 and 2.", "\n</th", "ink>\n\n", "The answer ", "is **4**.", NULL,
};

typedef struct {
  HanashiWindow *window;
  guint index;
  const char *thinking, *text;
} ReplyState;

/* The message at index has exactly this thinking and answer so far, and its row exists. */
static gboolean
reply_reached (gpointer data)
{
  ReplyState *st = data;
  GListModel *messages = hanashi_window_get_messages (st->window);
  if (g_list_model_get_n_items (messages) <= st->index)
    return FALSE;
  HanashiMessage *m = message_at (st->window, st->index);
  return g_strcmp0 (hanashi_message_get_thinking (m), st->thinking) == 0
         && g_strcmp0 (hanashi_message_get_text (m), st->text) == 0
         && row_for (GTK_WIDGET (st->window), m) != NULL;
}

static GtkExpander *
thinking_section (HanashiWindow *window, guint index)
{
  settle ();
  HanashiMessageRow *row = row_for (GTK_WIDGET (window), message_at (window, index));
  g_assert_nonnull (row);
  GtkWidget *expander = find_by_type (GTK_WIDGET (row), GTK_TYPE_EXPANDER);
  g_assert_nonnull (expander);
  return GTK_EXPANDER (expander);
}

/* The screenshots' answer: a code block and a table among the text. */
static const char *sample_reply =
  "Use **slicing** or `reversed()`:\n\n"
  "```python\nnumbers = [1, 2, 3]\n"
  "print(numbers[::-1])          # [3, 2, 1]\n"
  "print(list(reversed(numbers)))  # the same\n"
  "numbers.reverse()             # in place\n```\n\n"
  "| Way | Gives | Changes `numbers` |\n"
  "|:----|:------|:-----------------:|\n"
  "| `numbers[::-1]` | a *new* list | no |\n"
  "| `reversed(numbers)` | an iterator | no |\n"
  "| `numbers.reverse()` | nothing | yes |\n";

static void
test_screenshots (void)
{
  if (!g_getenv ("HANASHI_SCREENSHOT_DIR"))
    {
      g_test_skip ("HANASHI_SCREENSHOT_DIR is not set");
      return;
    }
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, FALSE);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  test_screenshot (GTK_WIDGET (window), "window-empty");
  gtk_window_destroy (GTK_WINDOW (window));

  window = make_window (app, 1100, 760, TRUE);
  HanashiStore *store = hanashi_window_get_store (window);
  /* The pictures show a tidy list, not the chats the other tests left behind. */
  g_autoptr (GPtrArray) old = hanashi_store_list_conversations (store, NULL, NULL);
  for (guint i = 0; i < old->len; i++)
    g_assert_true (hanashi_store_delete_conversation (store, ((HanashiStoredConversation *) g_ptr_array_index (old, i))->id, NULL));
  const char *samples[][2] = {
    { "Haiku about autumn", "Red leaves on the path, / the kettle sings by the door, / tea for two again." },
    { "Trip to Kyoto", "Start early at Fushimi Inari, before the crowds." },
  };
  for (guint i = 0; i < G_N_ELEMENTS (samples); i++)
    {
      gint64 c = hanashi_store_create_conversation (store, samples[i][0], NULL);
      hanashi_store_add_message (store, c, 0, 0, "assistant", samples[i][1], TRUE, NULL);
    }
  gint64 conversation = hanashi_store_create_conversation (store, "Reversing a list", NULL);
  gint64 question = hanashi_store_add_message (store, conversation, 0, 0, "user",
                                               "How do I reverse a list in Python?", TRUE, NULL);
  gint64 answer = hanashi_store_add_message (store, conversation, question, 0, "assistant", sample_reply, TRUE, NULL);
  g_assert_true (hanashi_store_update_message (store, answer, sample_reply, 58, 1.25, NULL, TRUE, NULL));
  hanashi_window_load_conversation (window, conversation);
  test_screenshot (GTK_WIDGET (window), "window-chat");
  gtk_widget_activate_action (GTK_WIDGET (window), "win.toggle-panel", NULL);
  test_screenshot (GTK_WIDGET (window), "window-panel");
  gtk_widget_activate_action (GTK_WIDGET (window), "win.toggle-panel", NULL);

  /* A reasoning model: its thinking opened above the answer, the Think switch by the entry. */
  hanashi_test_scripted_set_template (thinking_template);
  g_autoptr (GFile) file = g_file_new_for_path (model_path);
  hanashi_window_open_model (window, file);
  wait_until (model_loaded, window);
  conversation = hanashi_store_create_conversation (store, "Train times", NULL);
  question = hanashi_store_add_message (store, conversation, 0, 0, "user",
                                        "A train leaves at 9:40 and the trip takes 2 h 35 min. When does it arrive?", TRUE, NULL);
  answer = hanashi_store_add_message (store, conversation, question, 0, "assistant", "", TRUE, NULL);
  g_assert_true (hanashi_store_update_reply (store, answer, "It arrives at **12:15**.",
                                             "9:40 plus 2 hours is 11:40. Plus 35 minutes: 11:75, which is 12:15.",
                                             7.4, 41, 0.9, NULL, TRUE, NULL));
  hanashi_window_load_conversation (window, conversation);
  settle ();
  gtk_expander_set_expanded (GTK_EXPANDER (find_by_type (GTK_WIDGET (row_for (GTK_WIDGET (window), message_at (window, 1))),
                                                         GTK_TYPE_EXPANDER)), TRUE);
  test_screenshot (GTK_WIDGET (window), "window-thinking");
  hanashi_test_scripted_set_template (NULL);
  gtk_window_destroy (GTK_WINDOW (window));
}

/* Engine warnings reach the user in their language, not as the engine's English reason. */
static void
test_engine_warning (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, FALSE);
  g_autoptr (GError) warning = g_error_new_literal (HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_TEMPLATE_FAILED,
                                                    "The model’s chat template cannot be used (unknown filter 'x'); using ChatML instead");
  g_assert_false (has_label_containing (GTK_WIDGET (window), "written in the ChatML format instead"));
  g_signal_emit_by_name (hanashi_window_get_engine (window), "warning", 0, warning);
  wait_for_text (window, "written in the ChatML format instead");
  g_assert_false (has_label_containing (GTK_WIDGET (window), "unknown filter"));
  g_autoptr (GError) clamped = g_error_new_literal (HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CONTEXT_CLAMPED,
                                                    "The context size of 8192 tokens is more than this model supports; using 2048 tokens.");
  g_signal_emit_by_name (hanashi_window_get_engine (window), "warning", 0, clamped);
  wait_for_text (window, "supports a smaller context");
  gtk_window_destroy (GTK_WINDOW (window));
}

/* The context size left at its default takes what the model supports (no warning); one
 * chosen above it is clamped, and the window says so. */
static void
test_context_clamped (void)
{
  g_autoptr (GFile) file = real_model_file ();
  if (file == NULL)
    return;
  g_autoptr (GSettings) settings = g_settings_new (APP_ID);
  g_settings_reset (settings, "context-size");
  hanashi_engine_set_default_backend (NULL);
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, FALSE);
  hanashi_window_open_model (window, file);
  wait_until (model_loaded, window);
  guint trained = hanashi_engine_get_model_info (hanashi_window_get_engine (window))->n_ctx_train;
  g_assert_cmpuint (hanashi_engine_get_model_info (hanashi_window_get_engine (window))->n_ctx, ==, MIN (trained, 4096));
  settle ();
  g_assert_false (has_label_containing (GTK_WIDGET (window), "supports a smaller context"));

  g_settings_set_int (settings, "context-size", (int) trained * 2);
  hanashi_window_open_model (window, file);
  wait_for_text (window, "supports a smaller context");
  g_assert_cmpuint (hanashi_engine_get_model_info (hanashi_window_get_engine (window))->n_ctx, ==, trained);
  gtk_window_destroy (GTK_WINDOW (window));
  g_settings_reset (settings, "context-size");
  hanashi_test_use_scripted_backend ();
}

static void
test_thinking (void)
{
  hanashi_test_scripted_set_template (thinking_template);
  hanashi_test_scripted_set_reply (thinking_reply);
  /* The reply waits before its closing marker, then before the end of the answer. */
  hanashi_test_scripted_hold_at (3);
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  HanashiComposer *composer = get_composer (window);
  GtkToggleButton *think = hanashi_composer_get_think_button (composer);

  /* The template reads enable_thinking: the chat has a Think switch, on by default. */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (think)));
  g_assert_true (gtk_toggle_button_get_active (think));
  send_text (window, "What is 2+2?");

  /* While the thinking streams its section is open and says so; the answer is empty. */
  ReplyState st = { window, 1, "Let me add 2 and 2.", "" };
  wait_until (reply_reached, &st);
  g_assert_true (hanashi_message_get_thinking_active (message_at (window, 1)));
  GtkExpander *section = thinking_section (window, 1);
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (section)));
  g_assert_true (gtk_expander_get_expanded (section));
  g_assert_cmpstr (gtk_expander_get_label (section), ==, "Thinking…");
  g_assert_true (has_label_containing (GTK_WIDGET (section), "Let me add 2 and 2."));

  /* The answer starts: the section folds and says how long the thinking took. */
  hanashi_test_scripted_hold_at (6);
  st.text = "The answer ";
  wait_until (reply_reached, &st);
  section = thinking_section (window, 1);
  g_assert_false (gtk_expander_get_expanded (section));
  g_assert_true (g_str_has_prefix (gtk_expander_get_label (section), "Thought for"));
  g_assert_false (hanashi_message_get_thinking_active (message_at (window, 1)));
  g_assert_cmpfloat (hanashi_message_get_thinking_seconds (message_at (window, 1)), >, 0);
  /* The user may open it again. */
  gtk_expander_set_expanded (section, TRUE);
  hanashi_test_scripted_hold_at (-1);
  wait_until (reply_done, window);
  g_assert_true (gtk_expander_get_expanded (thinking_section (window, 1)));

  /* Stored apart: the answer is the text, the thinking and its time beside it. */
  HanashiMessage *reply = message_at (window, 1);
  g_assert_cmpstr (hanashi_message_get_text (reply), ==, "The answer is **4**.");
  g_assert_cmpstr (hanashi_message_get_thinking (reply), ==, "Let me add 2 and 2.");
  HanashiStore *store = hanashi_window_get_store (window);
  gint64 conversation = hanashi_window_get_conversation_id (window);
  g_autoptr (HanashiStoredMessage) stored = hanashi_store_dup_message (store, hanashi_message_get_id (reply), NULL);
  g_assert_cmpstr (stored->text, ==, "The answer is **4**.");
  g_assert_cmpstr (stored->thinking, ==, "Let me add 2 and 2.");
  g_assert_cmpfloat (stored->thinking_seconds, ==, hanashi_message_get_thinking_seconds (reply));
  g_assert_true (stored->complete);

  /* Copy and export carry the answer only. */
  g_autofree char *copied = NULL;
  click_message_button (window, "chat.copy", reply);
  gdk_clipboard_read_text_async (gtk_widget_get_clipboard (GTK_WIDGET (window)), NULL, text_read, &copied);
  wait_until (pointer_set, &copied);
  g_assert_cmpstr (copied, ==, "The answer is **4**.");
  g_autofree char *markdown = hanashi_conversation_export_markdown (store, conversation, NULL);
  g_autofree char *json = hanashi_conversation_export_json (store, conversation, NULL);
  g_assert_nonnull (strstr (markdown, "The answer is **4**."));
  g_assert_null (strstr (markdown, "Let me add"));
  g_assert_nonnull (strstr (json, "The answer is **4**."));
  g_assert_null (strstr (json, "Let me add"));

  /* The next request sends the answer back without the thinking; with the switch on the
   * template leaves the generation prompt open for the model to think. */
  hanashi_test_scripted_set_reply (NULL);
  send_text (window, "And 3+3?");
  wait_until (reply_done, window);
  g_autofree char *prompt = hanashi_test_scripted_dup_last_prompt ();
  g_assert_cmpstr (prompt, ==,
                   "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                   "<|im_start|>assistant\nThe answer is **4**.<|im_end|>\n"
                   "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
                   "<|im_start|>assistant\n");
  /* A reply without thinking has no section. */
  g_assert_false (gtk_widget_get_visible (GTK_WIDGET (thinking_section (window, 3))));
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 3)), ==, full_reply);

  /* Switched off, the chat remembers it and the template gets enable_thinking = false. */
  gtk_toggle_button_set_active (think, FALSE);
  g_autoptr (HanashiStoredConversation) c = hanashi_store_dup_conversation (store, conversation, NULL);
  g_assert_true (c->thinking_off);
  send_text (window, "Thanks");
  wait_until (reply_done, window);
  g_free (prompt);
  prompt = hanashi_test_scripted_dup_last_prompt ();
  g_assert_true (g_str_has_suffix (prompt, "<|im_start|>user\nThanks<|im_end|>\n"
                                           "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  g_assert_null (strstr (prompt, "Let me add"));

  /* A new chat starts with thinking on; the stored chat keeps its own switch. */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  g_assert_true (gtk_toggle_button_get_active (think));
  hanashi_window_load_conversation (window, conversation);
  g_assert_false (gtk_toggle_button_get_active (think));
  gtk_window_destroy (GTK_WINDOW (window));

  /* The thinking survives a restart, folded, with its time. */
  window = make_window (app, 1100, 760, TRUE);
  g_assert_cmpint (hanashi_window_get_conversation_id (window), ==, conversation);
  g_assert_cmpstr (hanashi_message_get_thinking (message_at (window, 1)), ==, "Let me add 2 and 2.");
  section = thinking_section (window, 1);
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (section)));
  g_assert_false (gtk_expander_get_expanded (section));
  g_assert_true (g_str_has_prefix (gtk_expander_get_label (section), "Thought for"));
  g_assert_false (gtk_toggle_button_get_active (hanashi_composer_get_think_button (get_composer (window))));

  /* A model whose template has no enable_thinking: no switch, and the request leaves the
   * variable alone. */
  hanashi_test_scripted_set_template (NULL);
  g_autoptr (GFile) file = g_file_new_for_path (model_path);
  hanashi_window_open_model (window, file);
  wait_until (model_loaded, window);
  settle ();
  g_assert_false (gtk_widget_get_visible (GTK_WIDGET (hanashi_composer_get_think_button (get_composer (window)))));
  gtk_window_destroy (GTK_WINDOW (window));
}

/* DeepSeek-R1 opens the thinking in its generation prompt: the output has only the end
 * marker, and the section is open from the first token. */
static void
test_thinking_opened_by_prompt (void)
{
  static const char *const reply[] = { "Hmm, ", "greetings.", "\n</think>", "\n\nHello!", NULL };
  hanashi_test_scripted_set_template (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}");
  hanashi_test_scripted_set_reply (reply);
  hanashi_test_scripted_hold_at (2);
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  g_assert_false (gtk_widget_get_visible (GTK_WIDGET (hanashi_composer_get_think_button (get_composer (window)))));
  send_text (window, "Hi");
  ReplyState st = { window, 1, "Hmm, greetings.", "" };
  wait_until (reply_reached, &st);
  GtkExpander *section = thinking_section (window, 1);
  g_assert_true (gtk_expander_get_expanded (section));
  g_assert_cmpstr (gtk_expander_get_label (section), ==, "Thinking…");
  hanashi_test_scripted_hold_at (-1);
  wait_until (reply_done, window);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 1)), ==, "Hello!");
  g_assert_cmpstr (hanashi_message_get_thinking (message_at (window, 1)), ==, "Hmm, greetings.");
  g_assert_false (gtk_expander_get_expanded (thinking_section (window, 1)));
  gtk_window_destroy (GTK_WINDOW (window));
  hanashi_test_scripted_set_template (NULL);
  hanashi_test_scripted_set_reply (NULL);
}

int
main (int argc, char **argv)
{
  scripted_test_init (&argc, &argv);

  write_scripted_model (g_get_user_data_dir ());

  g_test_add_func ("/Hanashi/Chat/send", test_send);
  g_test_add_func ("/Hanashi/Chat/no-model", test_send_disabled_without_model);
  g_test_add_func ("/Hanashi/Chat/engine-warning", test_engine_warning);
  g_test_add_func ("/Hanashi/Chat/context-clamped", test_context_clamped);
  g_test_add_func ("/Hanashi/Chat/params", test_params);
  g_test_add_func ("/Hanashi/Chat/stop", test_stop);
  g_test_add_func ("/Hanashi/Chat/store-failure", test_store_failure_keeps_text);
  g_test_add_func ("/Hanashi/Chat/alternatives", test_alternatives);
  g_test_add_func ("/Hanashi/Chat/edit-earlier", test_edit_earlier);
  g_test_add_func ("/Hanashi/Chat/copy", test_copy);
  g_test_add_func ("/Hanashi/Chat/sidebar", test_sidebar);
  g_test_add_func ("/Hanashi/Chat/narrow", test_narrow);
  g_test_add_func ("/Hanashi/Chat/long-conversation", test_long_conversation);
  g_test_add_func ("/Hanashi/Chat/restore", test_restore);
  g_test_add_func ("/Hanashi/Chat/open-file", test_open_file);
  g_test_add_func ("/Hanashi/Chat/models-dialog", test_models_dialog);
  g_test_add_func ("/Hanashi/Chat/real-model", test_real_model);
  g_test_add_func ("/Hanashi/Chat/context-overflow", test_context_overflow);
  g_test_add_func ("/Hanashi/Chat/screenshots", test_screenshots);
  g_test_add_func ("/Hanashi/Chat/thinking", test_thinking);
  g_test_add_func ("/Hanashi/Chat/thinking-opened-by-prompt", test_thinking_opened_by_prompt);
  int status = g_test_run ();
  g_free (model_path);
  return status;
}
