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
#include "test-xdg.h"

static GtkWidget *
find_by_type (GtkWidget *root, GType type)
{
  if (G_TYPE_CHECK_INSTANCE_TYPE (root, type))
    return root;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = find_by_type (child, type);
      if (found)
        return found;
    }
  return NULL;
}

static GtkWidget *
find_by_name (GtkWidget *root, const char *name, const char *model)
{
  if (g_strcmp0 (gtk_widget_get_name (root), name) == 0
      && (model == NULL || g_strcmp0 (g_object_get_data (G_OBJECT (root), "model"), model) == 0))
    return root;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = find_by_name (child, name, model);
      if (found)
        return found;
    }
  return NULL;
}

static gboolean
has_label_containing (GtkWidget *root, const char *needle)
{
  if (GTK_IS_LABEL (root) && strstr (gtk_label_get_label (GTK_LABEL (root)), needle) != NULL)
    return TRUE;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    if (has_label_containing (child, needle))
      return TRUE;
  return FALSE;
}

typedef gboolean (*Condition) (gpointer data);

static void
wait_until (Condition condition, gpointer data)
{
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (!condition (data))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, FALSE);
      g_usleep (1000);
    }
}

static void
wait_for_text (gpointer window, const char *needle)
{
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (!has_label_containing (GTK_WIDGET (window), needle))
    {
      if (g_get_monotonic_time () > deadline)
        g_error ("no label contains “%s”", needle);
      g_main_context_iteration (NULL, FALSE);
      g_usleep (1000);
    }
}

static gboolean
is_mapped (gpointer data)
{
  return gtk_widget_get_mapped (data);
}

static HanashiComposer *
get_composer (HanashiWindow *window)
{
  return HANASHI_COMPOSER (find_by_type (GTK_WIDGET (window), HANASHI_TYPE_COMPOSER));
}

static gboolean
reply_done (gpointer data)
{
  return !hanashi_composer_get_generating (get_composer (data));
}

typedef struct {
  HanashiWindow *window;
  const char *name;
} ModelWanted;

static gboolean
model_is (gpointer data)
{
  ModelWanted *wanted = data;
  const HanashiModelInfo *info = hanashi_engine_get_model_info (hanashi_window_get_engine (wanted->window));
  return info != NULL && g_strcmp0 (info->name, wanted->name) == 0;
}

static void
use_model (HanashiWindow *window, const char *url, const char *name)
{
  hanashi_window_use_remote_model (window, url, name);
  ModelWanted wanted = { window, name };
  wait_until (model_is, &wanted);
}

static HanashiMessage *
message_at (HanashiWindow *window, guint index)
{
  GListModel *messages = hanashi_window_get_messages (window);
  g_assert_cmpuint (index, <, g_list_model_get_n_items (messages));
  HanashiMessage *m = g_list_model_get_item (messages, index);
  g_object_unref (m);
  return m;
}

static void
send (HanashiWindow *window, const char *text)
{
  hanashi_composer_set_text (get_composer (window), text);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.send", NULL);
  wait_until (reply_done, window);
}

static HanashiModelsDialog *
find_models_dialog (void)
{
  GListModel *toplevels = gtk_window_get_toplevels ();
  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr (GObject) w = g_list_model_get_item (toplevels, i);
      if (HANASHI_IS_MODELS_DIALOG (w))
        return HANASHI_MODELS_DIALOG (w);
    }
  return NULL;
}

typedef struct {
  GtkWidget *root;
  const char *model;
} ButtonWanted;

static gboolean
chat_button_shown (gpointer data)
{
  ButtonWanted *wanted = data;
  return find_by_name (wanted->root, "remote-model-chat", wanted->model) != NULL;
}

static void
test_remote_chat (void)
{
  RemoteTestServer *server = remote_test_server_new ("sekrit", FALSE);
  g_autofree char *api_url = g_strconcat (remote_test_server_get_url (server), "/v1", NULL);
  g_autoptr (HanashiApplication) app = hanashi_application_new ();
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, NULL));
  HanashiWindow *window = hanashi_window_new (app);
  gtk_window_set_default_size (GTK_WINDOW (window), 1100, 760);
  gtk_window_present (GTK_WINDOW (window));
  wait_until (is_mapped, window);

  /* Models → Servers: the address and key typed, Add Server; the server's models listed. */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.choose-model", NULL);
  HanashiModelsDialog *dialog = find_models_dialog ();
  g_assert_nonnull (dialog);
  GtkWidget *url_row = find_by_name (GTK_WIDGET (dialog), "server-url-row", NULL);
  GtkWidget *key_row = find_by_name (GTK_WIDGET (dialog), "server-key-row", NULL);
  g_assert_nonnull (url_row);
  g_assert_nonnull (key_row);
  gtk_editable_set_text (GTK_EDITABLE (key_row), "wrong");
  gtk_editable_set_text (GTK_EDITABLE (url_row), remote_test_server_get_url (server));
  g_signal_emit_by_name (find_by_name (GTK_WIDGET (dialog), "add-server", NULL), "clicked");
  /* A wrong key is refused with a sentence, and nothing is remembered. */
  wait_for_text (dialog, "The server refused the API key");
  g_autoptr (GSettings) settings = g_settings_new (APP_ID);
  g_auto (GStrv) none = g_settings_get_strv (settings, "remote-endpoints");
  g_assert_cmpuint (g_strv_length (none), ==, 0);

  gtk_editable_set_text (GTK_EDITABLE (key_row), "sekrit");
  g_signal_emit_by_name (find_by_name (GTK_WIDGET (dialog), "add-server", NULL), "clicked");
  ButtonWanted wanted = { GTK_WIDGET (dialog), "split" };
  wait_until (chat_button_shown, &wanted);
  g_auto (GStrv) urls = g_settings_get_strv (settings, "remote-endpoints");
  g_assert_cmpuint (g_strv_length (urls), ==, 1);
  g_assert_cmpstr (urls[0], ==, api_url);
  /* The key went to the secret store, under the API root. */
  g_autofree char *key = hanashi_secret_store_get_default ()->lookup (api_url, NULL);
  g_assert_cmpstr (key, ==, "sekrit");

  /* Chat: the model is chosen like a local one and the dialog closes. */
  g_signal_emit_by_name (find_by_name (GTK_WIDGET (dialog), "remote-model-chat", "split"), "clicked");
  ModelWanted split = { window, "split" };
  wait_until (model_is, &split);
  g_assert_cmpstr (hanashi_engine_get_model_info (hanashi_window_get_engine (window))->remote_url, ==, api_url);

  /* The panel shows what this server (not a Hanashi one) does not take, and why. */
  GtkWidget *top_k = find_by_name (GTK_WIDGET (window), "spin-top_k", NULL);
  GtkWidget *temperature = find_by_name (GTK_WIDGET (window), "spin-temperature", NULL);
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
  ModelWanted drop = { window, "drop" };
  wait_until (model_is, &drop);

  /* An unreachable server: a sentence, and the model in use stays. */
  RemoteTestServer *gone = remote_test_server_new (NULL, FALSE);
  g_autofree char *gone_url = g_strdup (remote_test_server_get_url (gone));
  remote_test_server_free (gone);
  hanashi_window_use_remote_model (window, gone_url, "split");
  wait_for_text (window, "The server cannot be reached.");
  wait_until (model_is, &drop);

  gtk_window_destroy (GTK_WINDOW (window));
  remote_test_server_free (server);
}

int
main (int argc, char **argv)
{
  test_xdg_setup ();
  /* No keyring in a test: the in-memory secret store. */
  hanashi_secret_store_set_default (hanashi_secret_store_memory ());
  gtk_test_init (&argc, &argv, NULL);
  adw_init ();
  g_test_add_func ("/Hanashi/Remote/chat", test_remote_chat);
  int status = g_test_run ();
  test_xdg_cleanup ();
  return status;
}
