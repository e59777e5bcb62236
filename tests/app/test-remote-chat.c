/* The window chatting with an OpenAI-compatible server (the test server of
 * tests/engine/remote-test-server.c, in this process): adding it in the Models window, its
 * key kept in the (in-memory) secret store, a reply streamed into the list and the database,
 * a failing and a vanishing server, a conversation going back to its engine.  GLib's test
 * setup makes warnings and criticals fatal.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>
#include <string.h>

#include "hanashi-application.h"
#include "hanashi-composer.h"
#include "hanashi-message.h"
#include "hanashi-models-dialog.h"
#include "hanashi-remote-endpoints.h"
#include "hanashi-store.h"
#include "hanashi-window.h"
#include "remote-test-server.h"
#include "test-remote-helpers.h"
#include "test-xdg.h"

static void
use_model (HanashiWindow *window, const char *url, const char *name)
{
  hanashi_window_use_remote_model (window, url, name);
  wait_for_model (window, name);
}

static void
send (HanashiWindow *window, const char *text)
{
  hanashi_composer_set_text (get_composer (window), text);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.send", NULL);
  wait_until (reply_done, window);
}

static void
test_remote_chat (void)
{
  RemoteTestServer *server = remote_test_server_new ("sekrit", FALSE);
  g_autofree char *api_url = g_strconcat (remote_test_server_get_url (server), "/v1", NULL);
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, FALSE);

  /* Models → Servers: the address and key typed, Add Server; the server's models listed. */
  HanashiModelsDialog *dialog = open_models_dialog (window);
  add_server (dialog, remote_test_server_get_url (server), "wrong");
  /* A wrong key is refused with a sentence, and nothing is remembered. */
  wait_for_text (dialog, "The server refused the API key");
  g_autoptr (GSettings) settings = g_settings_new (APP_ID);
  g_auto (GStrv) none = g_settings_get_strv (settings, "remote-endpoints");
  g_assert_cmpuint (g_strv_length (none), ==, 0);

  add_server (dialog, remote_test_server_get_url (server), "sekrit");
  GtkWidget *chat_button = wait_for_chat_button (dialog, "split");
  g_auto (GStrv) urls = g_settings_get_strv (settings, "remote-endpoints");
  g_assert_cmpuint (g_strv_length (urls), ==, 1);
  g_assert_cmpstr (urls[0], ==, api_url);
  /* The key went to the secret store, under the API root. */
  g_autofree char *key = hanashi_secret_store_get_default ()->lookup (api_url, NULL);
  g_assert_cmpstr (key, ==, "sekrit");

  /* Chat: the model is chosen like a local one and the dialog closes. */
  g_signal_emit_by_name (chat_button, "clicked");
  wait_for_model (window, "split");
  g_assert_cmpstr (hanashi_engine_get_model_info (hanashi_window_get_engine (window))->remote_url, ==, api_url);

  /* The panel shows what this server (not a Hanashi one) does not take, and why. */
  GtkWidget *top_k = find_named (GTK_WIDGET (window), "spin-top_k");
  GtkWidget *temperature = find_named (GTK_WIDGET (window), "spin-temperature");
  g_assert_nonnull (top_k);
  g_assert_nonnull (temperature);
  GtkWidget *top_k_row = gtk_widget_get_ancestor (top_k, ADW_TYPE_PREFERENCES_ROW);
  g_assert_false (gtk_widget_get_sensitive (top_k_row));
  g_assert_nonnull (strstr (gtk_widget_get_tooltip_text (top_k_row), "Only Hanashi servers"));
  g_assert_true (gtk_widget_get_sensitive (gtk_widget_get_ancestor (temperature, ADW_TYPE_PREFERENCES_ROW)));

  /* A reply streams into the list and the database. */
  send (window, "Hello over there");
  GListModel *messages = hanashi_window_get_messages (window);
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 2);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 1)), ==, REMOTE_TEST_REPLY_TEXT);
  g_assert_true (hanashi_message_get_complete (message_at (window, 1)));
  g_autofree char *auth = remote_test_server_dup_last_auth (server);
  g_assert_cmpstr (auth, ==, "Bearer sekrit");
  HanashiStore *store = hanashi_window_get_store (window);
  gint64 first = hanashi_window_get_conversation_id (window);
  g_autoptr (GPtrArray) stored = hanashi_store_list_messages (store, first, NULL);
  g_assert_cmpuint (stored->len, ==, 2);
  g_assert_cmpstr (((HanashiStoredMessage *) g_ptr_array_index (stored, 1))->text, ==, REMOTE_TEST_REPLY_TEXT);
  /* The conversation remembers its engine. */
  g_autofree char *engine_id = hanashi_remote_engine_id (api_url, "split");
  g_autoptr (HanashiStoredConversation) conversation = hanashi_store_dup_conversation (store, first, NULL);
  g_assert_cmpstr (conversation->engine, ==, engine_id);

  /* A failing server: a sentence with the server's words; the user's message stays. */
  use_model (window, api_url, "error-500");
  send (window, "Are you there?");
  wait_for_text (window, "The server failed while answering.");
  wait_for_text (window, "the GPU caught fire");
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 3);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 2)), ==, "Are you there?");
  g_ptr_array_unref (stored);
  stored = hanashi_store_list_messages (store, first, NULL);
  g_assert_cmpuint (stored->len, ==, 3);

  /* A server that goes away mid-reply: the partial reply is kept, marked cut off. */
  use_model (window, api_url, "drop");
  send (window, "Tell me more");
  wait_for_text (window, "The connection to the server broke");
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 5);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 4)), ==, "half a reply");
  g_assert_false (hanashi_message_get_complete (message_at (window, 4)));
  g_ptr_array_unref (stored);
  stored = hanashi_store_list_messages (store, first, NULL);
  g_assert_cmpuint (stored->len, ==, 5);
  g_assert_false (((HanashiStoredMessage *) g_ptr_array_index (stored, 4))->complete);

  /* Another chat with another model; going back brings back the first chat's engine. */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  use_model (window, api_url, "crlf");
  send (window, "New chat");
  g_assert_cmpint (hanashi_window_get_conversation_id (window), !=, first);
  hanashi_window_load_conversation (window, first);
  wait_for_model (window, "drop");

  /* An unreachable server: a sentence, and the model in use stays. */
  RemoteTestServer *gone = remote_test_server_new (NULL, FALSE);
  g_autofree char *gone_url = g_strdup (remote_test_server_get_url (gone));
  remote_test_server_free (gone);
  hanashi_window_use_remote_model (window, gone_url, "split");
  wait_for_text (window, "The server cannot be reached.");
  wait_for_model (window, "drop");

  gtk_window_destroy (GTK_WINDOW (window));
  remote_test_server_free (server);
}

int
main (int argc, char **argv)
{
  remote_test_init (&argc, &argv);
  g_test_add_func ("/Hanashi/Remote/chat", test_remote_chat);
  int status = g_test_run ();
  test_xdg_cleanup ();
  return status;
}
