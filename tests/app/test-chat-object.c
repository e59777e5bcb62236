/* test-chat-object.c — HanashiChat without any window: the engine's scripted backend and a
 * database in a temporary folder.  Sending, streaming with periodic commits, the settings
 * source, alternatives, editing, deleting with Undo, loading, and what dispose keeps.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <gio/gio.h>

#include "hanashi-chat.h"
#include "hanashi-engine-backend.h"
#include "hanashi-message.h"
#include "test-widgets.h"
#include "test-xdg.h"
#include "hanashi-test-seams.h"

static const char *full_reply =
  "tok0 tok1 tok2 tok3 tok4 tok5 tok6 tok7 tok8 tok9 tok10 tok11 tok12 tok13 tok14 tok15 ";

typedef struct {
  char          *dir;
  HanashiEngine *engine;
  HanashiStore  *store;
  HanashiChat   *chat;
  guint          changes;
  guint          deletions;
  GPtrArray     *problems;   /* the "problem" and "notice" sentences */
} Fixture;

static void
on_changed (HanashiChat *chat, Fixture *f)
{
  f->changes++;
}

static void
on_deleted (HanashiChat *chat, Fixture *f)
{
  f->deletions++;
}

static void
on_problem (HanashiChat *chat, const char *what, const GError *error, Fixture *f)
{
  g_ptr_array_add (f->problems, g_strdup (error->message));
}

static void
on_notice (HanashiChat *chat, const char *text, Fixture *f)
{
  g_ptr_array_add (f->problems, g_strdup (text));
}

static gboolean
model_loaded (gpointer data)
{
  return hanashi_engine_get_model_info (data) != NULL;
}

static gboolean
not_generating (gpointer data)
{
  return !hanashi_chat_get_generating (data);
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->dir = g_dir_make_tmp ("hanashi-chat-XXXXXX", &error);
  g_assert_no_error (error);
  g_autofree char *db = g_build_filename (f->dir, "hanashi.db", NULL);
  g_autofree char *model = g_build_filename (f->dir, "tiny.gguf", NULL);
  g_assert_true (g_file_set_contents (model, "GGUF", 4, NULL));

  f->store = hanashi_store_new (db, &error);
  g_assert_no_error (error);
  f->engine = hanashi_engine_new ();
  hanashi_engine_set_session_dir (f->engine, NULL);
  hanashi_engine_load_model_async (f->engine, model, 0, 1, NULL, NULL, NULL);
  wait_until (model_loaded, f->engine);

  f->problems = g_ptr_array_new_with_free_func (g_free);
  f->chat = hanashi_chat_new (f->engine);
  hanashi_chat_set_store (f->chat, f->store);
  g_signal_connect (f->chat, "changed", G_CALLBACK (on_changed), f);
  g_signal_connect (f->chat, "message-deleted", G_CALLBACK (on_deleted), f);
  g_signal_connect (f->chat, "problem", G_CALLBACK (on_problem), f);
  g_signal_connect (f->chat, "notice", G_CALLBACK (on_notice), f);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_autoptr (GFile) dir = g_file_new_for_path (f->dir);

  if (f->chat != NULL)
    g_assert_finalize_object (f->chat);
  g_clear_object (&f->engine);
  g_assert_finalize_object (f->store);
  g_ptr_array_unref (f->problems);
  test_xdg_remove_tree (dir);
  g_free (f->dir);
  hanashi_test_scripted_set_reply (NULL);
  hanashi_test_scripted_hold_at (-1);
}

static HanashiMessage *
message_at (HanashiChat *chat, guint index)
{
  GListModel *messages = hanashi_chat_get_messages (chat);
  g_assert_cmpuint (index, <, g_list_model_get_n_items (messages));
  HanashiMessage *m = g_list_model_get_item (messages, index);
  g_object_unref (m);   /* the list keeps it alive */
  return m;
}

static guint
n_messages (HanashiChat *chat)
{
  return g_list_model_get_n_items (hanashi_chat_get_messages (chat));
}

static void
send_and_wait (Fixture *f, const char *text)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (hanashi_chat_send (f->chat, text, &error));
  g_assert_no_error (error);
  wait_until (not_generating, f->chat);
}

/* A first message creates the conversation, named after its first line; the reply streams
 * into the list and ends up complete in the database. */
static void
test_send (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  g_assert_cmpint (hanashi_chat_get_conversation_id (f->chat), ==, 0);
  g_assert_false (hanashi_chat_send (f->chat, "   \n ", &error));   /* nothing to send */
  g_assert_no_error (error);
  g_assert_cmpint (hanashi_chat_get_conversation_id (f->chat), ==, 0);

  g_assert_true (hanashi_chat_send (f->chat, "  Hello there  \nsecond line", &error));
  g_assert_no_error (error);
  g_assert_true (hanashi_chat_get_generating (f->chat));
  g_assert_cmpuint (hanashi_chat_get_request_id (f->chat), !=, 0);
  gint64 conversation = hanashi_chat_get_conversation_id (f->chat);
  g_assert_cmpint (conversation, !=, 0);
  g_assert_cmpstr (hanashi_chat_get_title (f->chat), ==, "Hello there");
  g_assert_cmpuint (n_messages (f->chat), ==, 2);
  /* Another message while one is written is refused, and nothing is stored. */
  g_assert_false (hanashi_chat_send (f->chat, "Too soon", NULL));

  wait_until (not_generating, f->chat);
  g_assert_cmpuint (hanashi_chat_get_request_id (f->chat), ==, 0);
  HanashiMessage *reply = message_at (f->chat, 1);
  g_assert_cmpstr (hanashi_message_get_text (reply), ==, full_reply);
  g_assert_true (hanashi_message_get_complete (reply));
  g_assert_cmpint (hanashi_message_get_token_count (reply), ==, 16);
  g_assert_cmpuint (f->changes, >=, 2);   /* the question stored, the reply finished */

  g_autoptr (HanashiStoredMessage) stored = hanashi_store_dup_message (f->store, hanashi_message_get_id (reply), &error);
  g_assert_no_error (error);
  g_assert_cmpstr (stored->text, ==, full_reply);
  g_assert_true (stored->complete);
  g_autoptr (GPtrArray) all = hanashi_store_list_messages (f->store, conversation, NULL);
  g_assert_cmpuint (all->len, ==, 2);
  g_assert_cmpuint (f->problems->len, ==, 0);
}

/* The settings source is read when a request is built, and what it holds goes with a new
 * conversation; parameters it refuses stop the send before anything is stored. */
typedef struct {
  const char *prompt;
  gboolean    refuse;
  guint       applied;
} Settings;

static const char *
settings_prompt (gpointer data)
{
  return ((Settings *) data)->prompt;
}

static gboolean
settings_apply (gpointer data, HanashiGenerateRequest *request, GError **error)
{
  Settings *settings = data;
  settings->applied++;
  if (settings->refuse)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "The grammar is not valid");
      return FALSE;
    }
  hanashi_generate_request_set_max_tokens (request, 3);
  return TRUE;
}

static char *
settings_json (gpointer data)
{
  return g_strdup ("{\"max_new_tokens\": 3}");
}

static const HanashiChatSettingsSource settings_source = {
  settings_prompt, NULL, settings_apply, settings_json,
};

static void
test_settings_source (Fixture *f, gconstpointer data)
{
  Settings settings = { "Be brief.", TRUE, 0 };
  g_autoptr (GError) error = NULL;

  hanashi_chat_set_settings_source (f->chat, &settings_source, &settings);
  g_assert_false (hanashi_chat_send (f->chat, "Refused", &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  g_assert_cmpint (hanashi_chat_get_conversation_id (f->chat), ==, 0);
  g_assert_cmpuint (n_messages (f->chat), ==, 0);
  g_autoptr (GPtrArray) none = hanashi_store_list_conversations (f->store, NULL, NULL);
  g_assert_cmpuint (none->len, ==, 0);

  settings.refuse = FALSE;
  send_and_wait (f, "Accepted");
  g_assert_cmpuint (settings.applied, >=, 2);
  g_assert_cmpstr (hanashi_message_get_text (message_at (f->chat, 1)), ==, "tok0 tok1 tok2 ");
  g_autoptr (HanashiStoredConversation) conversation =
    hanashi_store_dup_conversation (f->store, hanashi_chat_get_conversation_id (f->chat), &error);
  g_assert_no_error (error);
  g_assert_cmpstr (conversation->system_prompt, ==, "Be brief.");
  g_assert_cmpstr (conversation->params_json, ==, "{\"max_new_tokens\": 3}");
  g_autoptr (HanashiStoredMessage) reply =
    hanashi_store_dup_message (f->store, hanashi_message_get_id (message_at (f->chat, 1)), NULL);
  g_assert_cmpstr (reply->params_json, ==, "{\"max_new_tokens\": 3}");
  /* The system prompt reached the engine. */
  g_autofree char *prompt = hanashi_test_scripted_dup_last_prompt ();
  g_assert_nonnull (strstr (prompt, "Be brief."));
}

typedef struct {
  HanashiChat *chat;
  const char  *needle;
} TextWanted;

static gboolean
reply_contains (gpointer data)
{
  TextWanted *wanted = data;
  GListModel *messages = hanashi_chat_get_messages (wanted->chat);
  guint n = g_list_model_get_n_items (messages);
  if (n == 0)
    return FALSE;
  g_autoptr (HanashiMessage) last = g_list_model_get_item (messages, n - 1);
  return strstr (hanashi_message_get_text (last), wanted->needle) != NULL;
}

static void
spin_for (guint ms)
{
  gint64 until = g_get_monotonic_time () + ms * 1000;
  while (g_get_monotonic_time () < until)
    {
      g_main_context_iteration (NULL, FALSE);
      g_usleep (1000);
    }
}

/* A reply reaches the database while it is written (at most every 250 ms), not only at
 * its end: tokens that come after a pause are committed at once. */
static void
test_periodic_commit (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  hanashi_test_scripted_hold_at (5);
  g_assert_true (hanashi_chat_send (f->chat, "Take your time", &error));
  TextWanted wanted = { f->chat, "tok4 " };
  wait_until (reply_contains, &wanted);
  HanashiMessage *reply = message_at (f->chat, 1);
  gint64 id = hanashi_message_get_id (reply);
  /* The pause is longer than the commit interval: the next token is committed with it. */
  spin_for (300);
  hanashi_test_scripted_hold_at (8);
  wanted.needle = "tok7 ";
  wait_until (reply_contains, &wanted);
  g_autoptr (HanashiStoredMessage) partial = hanashi_store_dup_message (f->store, id, NULL);
  g_assert_false (partial->complete);
  g_assert_true (g_str_has_prefix (partial->text, "tok0 tok1 tok2 tok3 tok4 tok5 "));
  g_assert_true (g_str_has_prefix (hanashi_message_get_text (reply), partial->text));

  hanashi_test_scripted_hold_at (-1);
  wait_until (not_generating, f->chat);
  g_autoptr (HanashiStoredMessage) final = hanashi_store_dup_message (f->store, id, NULL);
  g_assert_true (final->complete);
  g_assert_cmpstr (final->text, ==, full_reply);
}

/* A chat dropped while a reply is written keeps what was written, marked complete. */
static void
test_dispose_keeps_reply (Fixture *f, gconstpointer data)
{
  hanashi_test_scripted_hold_at (5);
  g_assert_true (hanashi_chat_send (f->chat, "Interrupted", NULL));
  TextWanted wanted = { f->chat, "tok4 " };
  wait_until (reply_contains, &wanted);
  gint64 reply_id = hanashi_message_get_id (message_at (f->chat, 1));
  g_assert_finalize_object (g_steal_pointer (&f->chat));
  hanashi_test_scripted_hold_at (-1);

  g_autoptr (HanashiStoredMessage) stored = hanashi_store_dup_message (f->store, reply_id, NULL);
  g_assert_cmpstr (stored->text, ==, "tok0 tok1 tok2 tok3 tok4 ");
  g_assert_true (stored->complete);
}

/* Regenerate adds a version, the arrows switch, an edit adds a version of the question
 * with its own reply, and deleting a message can be undone once. */
static void
test_alternatives_and_undo (Fixture *f, gconstpointer data)
{
  send_and_wait (f, "Question");
  gint64 question = hanashi_message_get_id (message_at (f->chat, 0));
  gint64 first_reply = hanashi_message_get_id (message_at (f->chat, 1));

  hanashi_chat_regenerate (f->chat, first_reply);
  g_assert_true (hanashi_chat_get_generating (f->chat));
  wait_until (not_generating, f->chat);
  gint64 second_reply = hanashi_message_get_id (message_at (f->chat, 1));
  g_assert_cmpint (second_reply, !=, first_reply);
  g_assert_cmpuint (hanashi_message_get_n_alternatives (message_at (f->chat, 1)), ==, 2);
  g_assert_cmpuint (hanashi_message_get_alternative_index (message_at (f->chat, 1)), ==, 1);

  hanashi_chat_switch_alternative (f->chat, second_reply, -1);
  g_assert_cmpint (hanashi_message_get_id (message_at (f->chat, 1)), ==, first_reply);
  hanashi_chat_switch_alternative (f->chat, first_reply, -1);   /* already the first */
  g_assert_cmpint (hanashi_message_get_id (message_at (f->chat, 1)), ==, first_reply);
  hanashi_chat_switch_alternative (f->chat, first_reply, +1);
  g_assert_cmpint (hanashi_message_get_id (message_at (f->chat, 1)), ==, second_reply);

  /* Editing: sending replaces the question with a new version and a new reply. */
  hanashi_chat_begin_edit (f->chat, question);
  g_assert_cmpint (hanashi_chat_get_editing_id (f->chat), ==, question);
  send_and_wait (f, "Better question");
  g_assert_cmpint (hanashi_chat_get_editing_id (f->chat), ==, 0);
  g_assert_cmpuint (n_messages (f->chat), ==, 2);
  g_assert_cmpstr (hanashi_message_get_text (message_at (f->chat, 0)), ==, "Better question");
  g_assert_cmpuint (hanashi_message_get_n_alternatives (message_at (f->chat, 0)), ==, 2);
  hanashi_chat_switch_alternative (f->chat, hanashi_message_get_id (message_at (f->chat, 0)), -1);
  g_assert_cmpint (hanashi_message_get_id (message_at (f->chat, 0)), ==, question);
  g_assert_cmpint (hanashi_message_get_id (message_at (f->chat, 1)), ==, second_reply);

  /* Delete one version: its neighbour is shown; Undo brings it back with its id. */
  g_assert_false (hanashi_chat_get_can_undo (f->chat));
  hanashi_chat_delete_message (f->chat, second_reply);
  g_assert_cmpuint (f->deletions, ==, 1);
  g_assert_true (hanashi_chat_get_can_undo (f->chat));
  g_assert_cmpint (hanashi_message_get_id (message_at (f->chat, 1)), ==, first_reply);
  hanashi_chat_undo_delete (f->chat);
  g_assert_false (hanashi_chat_get_can_undo (f->chat));
  g_autoptr (HanashiStoredMessage) restored = hanashi_store_dup_message (f->store, second_reply, NULL);
  g_assert_nonnull (restored);
  g_autoptr (GPtrArray) alternatives = hanashi_store_list_alternatives (f->store, second_reply, NULL);
  g_assert_cmpuint (alternatives->len, ==, 2);

  /* The offer lasts until the next change to the chat (switching versions is one), so
   * Undo never overwrites what happened after the deletion. */
  hanashi_chat_delete_message (f->chat, hanashi_message_get_id (message_at (f->chat, 1)));
  g_assert_true (hanashi_chat_get_can_undo (f->chat));
  g_assert_cmpint (hanashi_chat_get_undo_conversation_id (f->chat), ==, hanashi_chat_get_conversation_id (f->chat));
  hanashi_chat_switch_alternative (f->chat, hanashi_message_get_id (message_at (f->chat, 0)), +1);
  g_assert_false (hanashi_chat_get_can_undo (f->chat));
  hanashi_chat_switch_alternative (f->chat, hanashi_message_get_id (message_at (f->chat, 0)), -1);
  hanashi_chat_delete_message (f->chat, hanashi_message_get_id (message_at (f->chat, 1)));
  g_assert_true (hanashi_chat_get_can_undo (f->chat));
  send_and_wait (f, "Meanwhile");
  g_assert_false (hanashi_chat_get_can_undo (f->chat));
  g_assert_cmpint (hanashi_chat_get_undo_conversation_id (f->chat), ==, 0);
  guint before = f->problems->len;
  hanashi_chat_undo_delete (f->chat);
  g_assert_cmpuint (f->problems->len, ==, before);
  g_assert_cmpstr (hanashi_message_get_text (message_at (f->chat, n_messages (f->chat) - 2)), ==, "Meanwhile");
}

/* Loading shows a stored conversation with what it was saved with; one that cannot be read
 * leaves a new chat. */
static void
test_load (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (hanashi_chat_set_system_prompt (f->chat, "Stay calm.", &error));
  g_assert_true (hanashi_chat_set_thinking (f->chat, FALSE, &error));
  send_and_wait (f, "Stored chat");
  gint64 conversation = hanashi_chat_get_conversation_id (f->chat);

  g_assert_true (hanashi_chat_load (f->chat, 0, &error));
  g_assert_cmpint (hanashi_chat_get_conversation_id (f->chat), ==, 0);
  g_assert_cmpuint (n_messages (f->chat), ==, 0);
  g_assert_cmpstr (hanashi_chat_get_system_prompt (f->chat), ==, "");
  g_assert_true (hanashi_chat_get_thinking (f->chat));

  g_assert_true (hanashi_chat_load (f->chat, conversation, &error));
  g_assert_no_error (error);
  g_assert_cmpint (hanashi_chat_get_conversation_id (f->chat), ==, conversation);
  g_assert_cmpstr (hanashi_chat_get_title (f->chat), ==, "Stored chat");
  g_assert_cmpstr (hanashi_chat_get_system_prompt (f->chat), ==, "Stay calm.");
  g_assert_false (hanashi_chat_get_thinking (f->chat));
  g_assert_cmpuint (n_messages (f->chat), ==, 2);
  g_assert_cmpstr (hanashi_message_get_text (message_at (f->chat, 1)), ==, full_reply);

  g_assert_false (hanashi_chat_load (f->chat, conversation + 1000, &error));
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND);
  g_assert_cmpint (hanashi_chat_get_conversation_id (f->chat), ==, 0);
  g_assert_cmpuint (n_messages (f->chat), ==, 0);
}

int
main (int argc, char **argv)
{
  test_xdg_setup ();
  hanashi_test_use_scripted_backend ();
  g_test_init (&argc, &argv, NULL);

#define ADD(path, func) g_test_add ("/Hanashi/ChatObject/" path, Fixture, NULL, fixture_set_up, func, fixture_tear_down)
  ADD ("send", test_send);
  ADD ("settings-source", test_settings_source);
  ADD ("periodic-commit", test_periodic_commit);
  ADD ("dispose-keeps-reply", test_dispose_keeps_reply);
  ADD ("alternatives-and-undo", test_alternatives_and_undo);
  ADD ("load", test_load);
#undef ADD
  return g_test_run ();
}
