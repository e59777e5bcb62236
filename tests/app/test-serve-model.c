/* "Serve the loaded model": the window's own model served over HTTP while the window chats.
 *
 * The real engine and a tiny model from the test data; an HTTP client (libsoup) in the test
 * process talks to the app's server on loopback, asynchronously, since the server answers
 * from this same main loop.  Serving is turned on through its action and its settings, and
 * Preferences' Server page.  Checked: 503 with an error JSON while no model is loaded;
 * /v1/models names the window's model and a chat completion answers while the window's chat
 * generates; unloading gives 503 again and another model is then served on the same port;
 * turning serving off closes the port; a port in use and the network without a key turn
 * serving off with a sentence; with a key, requests without it are refused.  GLib's test
 * setup (and G_DEBUG) makes warnings and criticals fatal.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <string.h>

#include "hanashi-application.h"
#include "hanashi-composer.h"
#include "hanashi-message.h"
#include "hanashi-params-panel.h"
#include "hanashi-preferences-window.h"
#include "hanashi-serving.h"
#include "hanashi-window.h"
#include "test-remote-helpers.h"
#include "test-xdg.h"

#define FIRST_MODEL "quant-llama-v512-q8_0"
#define SECOND_MODEL "tiny-llama-spm-q8_0"
/* Lowercase ASCII only, at least one character: random weights would otherwise write
 * arbitrary bytes, or end at once */
#define WORDS_GRAMMAR "root ::= [a-z ]+\n"

static GSettings *settings;
static SoupSession *session;

static char *
model_file (const char *name)
{
  g_autofree char *file = g_strconcat (name, ".gguf", NULL);
  char *path = g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", file, NULL);
  g_assert_true (g_file_test (path, G_FILE_TEST_IS_REGULAR));
  return path;
}

static void
open_model (HanashiWindow *window, const char *name)
{
  g_autofree char *path = model_file (name);
  g_autoptr (GFile) file = g_file_new_for_path (path);
  hanashi_window_open_model (window, file);
}

/* ---- the serving state -------------------------------------------------------------------- */

typedef struct {
  HanashiServing      *serving;
  HanashiServingStatus status;
} StatusWanted;

static gboolean
status_is (gpointer data)
{
  StatusWanted *wanted = data;
  return hanashi_serving_get_status (wanted->serving) == wanted->status;
}

static void
wait_for_status (HanashiServing *serving, HanashiServingStatus status)
{
  StatusWanted wanted = { serving, status };
  wait_until (status_is, &wanted);
}

static gboolean
serving_setting_off (gpointer data)
{
  (void) data;
  return !g_settings_get_boolean (settings, "serve-enabled");
}

/* The port of the address serving shows ("http://HOST:PORT"). */
static guint
served_port (HanashiServing *serving)
{
  const char *url = hanashi_serving_get_url (serving);
  g_assert_nonnull (url);
  const char *colon = strrchr (url, ':');
  g_assert_nonnull (colon);
  guint64 port = g_ascii_strtoull (colon + 1, NULL, 10);
  g_assert_cmpuint (port, >, 0);
  g_assert_cmpuint (port, <, 65536);
  return (guint) port;
}

/* ---- HTTP --------------------------------------------------------------------------------- */

typedef struct {
  SoupMessage *msg;
  GBytes      *body;
  GError      *error;
  gboolean     done;
} Reply;

static void
reply_free (Reply *reply)
{
  g_clear_object (&reply->msg);
  g_clear_pointer (&reply->body, g_bytes_unref);
  g_clear_error (&reply->error);
  g_free (reply);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Reply, reply_free)

static void
on_reply (GObject *source, GAsyncResult *result, gpointer data)
{
  Reply *reply = data;
  reply->body = soup_session_send_and_read_finish (SOUP_SESSION (source), result, &reply->error);
  reply->done = TRUE;
}

/* Sends a request to 127.0.0.1:@port; the reply arrives while the main loop runs. */
static Reply *
request_start (guint port, const char *method, const char *path, const char *key, const char *json)
{
  g_autofree char *uri = g_strdup_printf ("http://127.0.0.1:%u%s", port, path);
  Reply *reply = g_new0 (Reply, 1);
  reply->msg = soup_message_new (method, uri);
  g_assert_nonnull (reply->msg);
  if (key != NULL)
    {
      g_autofree char *bearer = g_strconcat ("Bearer ", key, NULL);
      soup_message_headers_replace (soup_message_get_request_headers (reply->msg), "Authorization", bearer);
    }
  if (json != NULL)
    {
      g_autoptr (GBytes) body = g_bytes_new (json, strlen (json));
      soup_message_set_request_body_from_bytes (reply->msg, "application/json", body);
    }
  soup_session_send_and_read_async (session, reply->msg, G_PRIORITY_DEFAULT, NULL, on_reply, reply);
  return reply;
}

static gboolean
reply_arrived (gpointer data)
{
  return ((Reply *) data)->done;
}

/* Waits for @reply, checks its status and returns its body as JSON. */
static JsonNode *
reply_json (Reply *reply, guint status)
{
  wait_until (reply_arrived, reply);
  g_assert_no_error (reply->error);
  gsize len = 0;
  const char *text = g_bytes_get_data (reply->body, &len);
  if (soup_message_get_status (reply->msg) != status)
    g_error ("HTTP %u instead of %u: %.*s", soup_message_get_status (reply->msg), status, (int) len, text);
  g_autoptr (GError) error = NULL;
  JsonNode *root = json_from_string (text, &error);
  g_assert_no_error (error);
  g_assert_nonnull (root);
  return root;
}

static JsonNode *
request (guint port, const char *method, const char *path, const char *key, const char *json, guint status)
{
  g_autoptr (Reply) reply = request_start (port, method, path, key, json);
  return reply_json (reply, status);
}

/* The error JSON of OpenAI: its code, after checking the message is a sentence. */
static const char *
error_code (JsonNode *root)
{
  JsonObject *error = json_object_get_object_member (json_node_get_object (root), "error");
  g_assert_nonnull (error);
  g_assert_cmpuint (strlen (json_object_get_string_member (error, "message")), >, 10);
  return json_object_get_string_member (error, "code");
}

static const char *
listed_model (JsonNode *root)
{
  JsonArray *data = json_object_get_array_member (json_node_get_object (root), "data");
  g_assert_cmpuint (json_array_get_length (data), ==, 1);
  return json_object_get_string_member (json_array_get_object_element (data, 0), "id");
}

/* Whether something accepts connections on 127.0.0.1:@port (a refused connect is quick). */
static gboolean
port_open (guint port)
{
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (GSocketConnection) connection = g_socket_client_connect_to_host (client, "127.0.0.1", port, NULL, &error);
  if (connection == NULL)
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED);
  return connection != NULL;
}

/* ---- the window --------------------------------------------------------------------------- */

static void
set_window_params (HanashiWindow *window)
{
  const char *json = "{\"seed\": 11, \"temperature\": 0.9, \"max_new_tokens\": 24, \"grammar_mode\": \"gbnf\", "
                     "\"grammar\": \"root ::= [a-z ]+\\n\"}";
  hanashi_params_panel_set_params_json (get_panel (window), json);
}

/* ---- the test ----------------------------------------------------------------------------- */

static void
test_serve_model (void)
{
  HanashiApplication *app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, FALSE);
  HanashiServing *serving = hanashi_application_get_serving (app);
  g_assert_nonnull (serving);
  g_assert_cmpint (hanashi_serving_get_status (serving), ==, HANASHI_SERVING_OFF);
  g_assert_false (g_settings_get_boolean (settings, "serve-enabled"));   /* off by default */

  /* On through the action, on any free port, before a model is loaded: it listens and
   * answers 503 with the reason. */
  g_settings_set_int (settings, "serve-port", 0);
  g_action_group_activate_action (G_ACTION_GROUP (app), "serve-enabled", NULL);
  g_assert_true (g_settings_get_boolean (settings, "serve-enabled"));
  wait_for_status (serving, HANASHI_SERVING_WAITING);
  guint port = served_port (serving);
  g_autofree char *address = g_strdup_printf ("http://127.0.0.1:%u", port);
  g_assert_cmpstr (hanashi_serving_get_url (serving), ==, address);
  {
    g_autoptr (JsonNode) refused = request (port, "GET", "/v1/models", NULL, NULL, SOUP_STATUS_SERVICE_UNAVAILABLE);
    g_assert_cmpstr (error_code (refused), ==, "model_not_loaded");
  }

  /* The window loads a model: it is served, on the same port, under its file's name. */
  open_model (window, FIRST_MODEL);
  wait_for_status (serving, HANASHI_SERVING_ON);
  g_assert_cmpuint (served_port (serving), ==, port);
  g_assert_cmpstr (hanashi_serving_get_model_id (serving), ==, FIRST_MODEL);
  {
    g_autoptr (JsonNode) models = request (port, "GET", "/v1/models", NULL, NULL, SOUP_STATUS_OK);
    g_assert_cmpstr (listed_model (models), ==, FIRST_MODEL);
  }

  /* Preferences' Server page says where it serves. */
  g_action_group_activate_action (G_ACTION_GROUP (app), "preferences", NULL);
  HanashiPreferencesWindow *preferences = HANASHI_PREFERENCES_WINDOW (find_toplevel (HANASHI_TYPE_PREFERENCES_WINDOW));
  g_assert_nonnull (preferences);
  GtkWidget *serve_row = find_named (GTK_WIDGET (preferences), "serve-row");
  g_assert_nonnull (serve_row);
  g_assert_nonnull (strstr (adw_action_row_get_subtitle (ADW_ACTION_ROW (serve_row)), address));
  g_assert_nonnull (strstr (adw_action_row_get_subtitle (ADW_ACTION_ROW (serve_row)), FIRST_MODEL));
  GtkWidget *serve_switch = find_named (GTK_WIDGET (preferences), "serve-switch");
  g_assert_true (gtk_switch_get_active (GTK_SWITCH (serve_switch)));

  /* A chat completion while the window's own chat generates: both answer. */
  g_autoptr (Reply) completion =
    request_start (port, "POST", "/v1/chat/completions", NULL,
                   "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell me about the sea.\"}], "
                   "\"max_tokens\": 12, \"seed\": 5, \"temperature\": 0.7, \"grammar\": \"root ::= [a-z ]+\"}");
  set_window_params (window);
  hanashi_composer_set_text (get_composer (window), "Tell me about the hills.");
  gtk_widget_activate_action (GTK_WIDGET (window), "win.send", NULL);
  wait_until (reply_has_text, window);
  wait_until (reply_done, window);
  g_assert_true (hanashi_message_get_complete (message_at (window, 1)));
  g_assert_cmpuint (strlen (hanashi_message_get_text (message_at (window, 1))), >, 0);
  {
    g_autoptr (JsonNode) answer = reply_json (completion, SOUP_STATUS_OK);
    JsonObject *root = json_node_get_object (answer);
    g_assert_cmpstr (json_object_get_string_member (root, "model"), ==, FIRST_MODEL);
    JsonObject *choice = json_array_get_object_element (json_object_get_array_member (root, "choices"), 0);
    const char *content = json_object_get_string_member (json_object_get_object_member (choice, "message"), "content");
    g_assert_cmpuint (strlen (content), >, 0);
    g_assert_true (strspn (content, "abcdefghijklmnopqrstuvwxyz ") == strlen (content));
    JsonObject *usage = json_object_get_object_member (root, "usage");
    g_assert_cmpint (json_object_get_int_member (usage, "completion_tokens"), >, 0);
    g_assert_cmpint (json_object_get_int_member (usage, "completion_tokens"), <=, 12);
  }

  /* Unloaded: 503 again, saying so; another model loaded: that one is served, same port. */
  hanashi_engine_unload (hanashi_application_get_engine (app));
  wait_for_status (serving, HANASHI_SERVING_WAITING);
  {
    g_autoptr (JsonNode) refused = request (port, "POST", "/v1/chat/completions", NULL,
                                            "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}",
                                            SOUP_STATUS_SERVICE_UNAVAILABLE);
    g_assert_cmpstr (error_code (refused), ==, "model_not_loaded");
  }
  open_model (window, SECOND_MODEL);
  wait_for_status (serving, HANASHI_SERVING_ON);
  g_assert_cmpuint (served_port (serving), ==, port);
  {
    g_autoptr (JsonNode) models = request (port, "GET", "/v1/models", NULL, NULL, SOUP_STATUS_OK);
    g_assert_cmpstr (listed_model (models), ==, SECOND_MODEL);
  }

  /* Off through the switch in Preferences: the port closes. */
  gtk_switch_set_active (GTK_SWITCH (serve_switch), FALSE);
  wait_for_status (serving, HANASHI_SERVING_OFF);
  g_assert_null (hanashi_serving_get_url (serving));
  g_assert_false (port_open (port));

  /* A port in use: a sentence that names it, and the switch goes back off. */
  g_autoptr (GSocket) blocker = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr (GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) any_port = g_inet_socket_address_new (loopback, 0);
  g_assert_true (g_socket_bind (blocker, any_port, FALSE, NULL));
  g_assert_true (g_socket_listen (blocker, NULL));
  g_autoptr (GSocketAddress) blocked = g_socket_get_local_address (blocker, NULL);
  guint blocked_port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (blocked));
  g_settings_set_int (settings, "serve-port", (int) blocked_port);
  gtk_switch_set_active (GTK_SWITCH (serve_switch), TRUE);
  wait_until (serving_setting_off, NULL);
  wait_for_status (serving, HANASHI_SERVING_OFF);
  g_assert_false (gtk_switch_get_active (GTK_SWITCH (serve_switch)));
  g_autofree char *in_use = g_strdup_printf ("Port %u is already in use", blocked_port);
  wait_for_text (preferences, in_use);   /* the switch row's subtitle */
  wait_for_text (window, in_use);        /* and a toast in the window */
  g_socket_close (blocker, NULL);

  /* The network without a key is refused, with a sentence. */
  g_settings_set_int (settings, "serve-port", 0);
  g_settings_set_boolean (settings, "serve-network", TRUE);
  g_assert_true (hanashi_serving_get_api_key_known (serving));
  g_assert_null (hanashi_serving_get_api_key (serving));
  g_settings_set_boolean (settings, "serve-enabled", TRUE);
  wait_until (serving_setting_off, NULL);
  wait_for_text (preferences, "needs an API key");
  g_assert_cmpint (hanashi_serving_get_status (serving), ==, HANASHI_SERVING_OFF);

  /* A key generated in Preferences: kept in the secret store, and shown. */
  g_signal_emit_by_name (find_named (GTK_WIDGET (preferences), "serve-key-generate"), "clicked");
  g_autofree char *key = g_strdup (hanashi_serving_get_api_key (serving));   /* it is replaced below */
  g_assert_nonnull (key);
  g_assert_true (g_str_has_prefix (key, "hanashi-"));
  g_assert_cmpuint (strlen (key), ==, strlen ("hanashi-") + 40);
  GtkWidget *key_row = find_named (GTK_WIDGET (preferences), "serve-key");
  g_assert_cmpstr (gtk_editable_get_text (GTK_EDITABLE (key_row)), ==, key);
  settle ();   /* the store runs on a worker thread */
  {
    g_autoptr (GError) error = NULL;
    g_autofree char *stored = hanashi_secret_store_get_default ()->lookup (HANASHI_SERVING_KEY_ID, &error);
    g_assert_no_error (error);
    g_assert_cmpstr (stored, ==, key);
  }

  /* On the network with the key: every address, so loopback too; the key is asked for. */
  g_settings_set_boolean (settings, "serve-enabled", TRUE);
  wait_for_status (serving, HANASHI_SERVING_ON);
  guint network_port = served_port (serving);
  g_assert_true (g_str_has_prefix (hanashi_serving_get_url (serving), "http://"));
  {
    g_autoptr (JsonNode) refused = request (network_port, "GET", "/v1/models", NULL, NULL, SOUP_STATUS_UNAUTHORIZED);
    g_assert_cmpstr (error_code (refused), ==, "invalid_api_key");
    g_autoptr (JsonNode) wrong = request (network_port, "GET", "/v1/models", "hanashi-not-the-key", NULL,
                                          SOUP_STATUS_UNAUTHORIZED);
    g_assert_cmpstr (error_code (wrong), ==, "invalid_api_key");
    g_autoptr (JsonNode) models = request (network_port, "GET", "/v1/models", key, NULL, SOUP_STATUS_OK);
    g_assert_cmpstr (listed_model (models), ==, SECOND_MODEL);
  }

  /* A key typed and applied replaces it at once. */
  gtk_editable_set_text (GTK_EDITABLE (key_row), "typed-key-42");
  g_signal_emit_by_name (key_row, "apply");
  g_assert_cmpstr (hanashi_serving_get_api_key (serving), ==, "typed-key-42");
  wait_for_status (serving, HANASHI_SERVING_ON);
  g_assert_cmpuint (served_port (serving), ==, network_port);
  {
    g_autoptr (JsonNode) old = request (network_port, "GET", "/v1/models", key, NULL, SOUP_STATUS_UNAUTHORIZED);
    g_assert_cmpstr (error_code (old), ==, "invalid_api_key");
    g_autoptr (JsonNode) models = request (network_port, "GET", "/v1/models", "typed-key-42", NULL, SOUP_STATUS_OK);
    g_assert_cmpstr (listed_model (models), ==, SECOND_MODEL);
  }

  /* Quitting closes the port. */
  gtk_window_destroy (GTK_WINDOW (preferences));
  gtk_window_destroy (GTK_WINDOW (window));
  settle ();
  g_signal_emit_by_name (app, "shutdown");
  g_assert_null (hanashi_application_get_serving (app));
  g_assert_false (port_open (network_port));
  /* A shutdown outside g_application_run leaves GApplication's D-Bus side to finalize,
   * which it warns about (there is no bus here: nothing was exported). */
  g_test_expect_message ("GLib-GIO", G_LOG_LEVEL_WARNING, "*did not unregister from D-Bus*");
  g_clear_object (&app);
  g_test_assert_expected_messages ();
}

int
main (int argc, char **argv)
{
  remote_test_init (&argc, &argv);
  settings = g_settings_new (APP_ID);
  session = soup_session_new ();
  g_test_add_func ("/Hanashi/ServeModel/serve", test_serve_model);
  int status = g_test_run ();
  g_clear_object (&session);
  g_clear_object (&settings);
  test_xdg_cleanup ();
  return status;
}
