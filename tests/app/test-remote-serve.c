/* The window's remote engine against our own server: `hanashi-cli serve` runs as a child
 * process on a free loopback port, is added in the Models window like any OpenAI-compatible
 * server, and a chat with it gives exactly the reply `hanashi-cli chat` gives locally for the
 * same model, messages, seed and parameters (Hanashi's extension fields, such as the grammar,
 * reach the server because it says it is a Hanashi server).  Stop cuts a reply short, and the
 * server goes on serving.  GLib's test setup makes warnings and criticals fatal.
 *
 * The server dies with the test: a fixture teardown stops it (SIGTERM, then SIGKILL), and
 * the child asks the kernel for SIGKILL should this process end first (a failed assertion
 * aborts before any teardown runs).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "hanashi-application.h"
#include "hanashi-composer.h"
#include "hanashi-message.h"
#include "hanashi-models-dialog.h"
#include "hanashi-params-panel.h"
#include "hanashi-remote-endpoints.h"
#include "hanashi-window.h"
#include "test-remote-helpers.h"
#include "test-xdg.h"

#define SERVER_KEY "serve-test-key-7"
#define SERVER_MODEL_ID "tiny"
#define MODEL_FILE "quant-llama-v512-q8_0.gguf"   /* context 2048: room for a long reply */
/* Lowercase ASCII only: random weights would otherwise write arbitrary bytes */
#define WORDS_GRAMMAR "root ::= [a-z ]+\n"
/* No end before 1500 characters: the reply runs until Stop (or max_new_tokens) */
#define ENDLESS_GRAMMAR "root ::= [a-z ]{1500}\n"

typedef struct {
  GSubprocess *server;
  char *tmpdir;
  char *stderr_path;
  char *url;          /* http://127.0.0.1:PORT */
  char *model_path;
} ServeFixture;

static void
die_with_parent (gpointer data)
{
  (void) data;
  /* Between fork and exec: only async-signal-safe calls.  If the test process is already
   * gone (it died before the prctl), end at once. */
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (getppid () == 1)
    _exit (1);
}

static void
serve_fixture_set_up (ServeFixture *f, gconstpointer data)
{
  (void) data;
  const char *cli = g_getenv ("HANASHI_CLI");
  const char *testdata = g_getenv ("HANASHI_TESTDATA");
  g_assert_nonnull (cli);
  g_assert_nonnull (testdata);
  f->model_path = g_build_filename (testdata, "models", MODEL_FILE, NULL);
  g_assert_true (g_file_test (f->model_path, G_FILE_TEST_IS_REGULAR));
  f->tmpdir = g_dir_make_tmp ("hanashi-serve-XXXXXX", NULL);
  g_assert_nonnull (f->tmpdir);
  f->stderr_path = g_build_filename (f->tmpdir, "serve.log", NULL);

  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE);
  /* A file rather than a pipe: the server never blocks on a reader that is busy with GTK. */
  g_subprocess_launcher_set_stderr_file_path (launcher, f->stderr_path);
  g_subprocess_launcher_set_child_setup (launcher, die_with_parent, NULL, NULL);
  const char *asan = g_getenv ("ASAN_OPTIONS");
  if (asan && *asan)
    {
      /* full stacks, so that tests/lsan.supp can name libsoup's known leak of idle
       * connections (GLib has no frame pointers for the fast unwinder) */
      g_autofree char *options = g_strconcat (asan, ":fast_unwind_on_malloc=0", NULL);
      g_subprocess_launcher_setenv (launcher, "ASAN_OPTIONS", options, TRUE);
    }
  g_autoptr (GError) error = NULL;
  f->server = g_subprocess_launcher_spawn (launcher, &error, cli, "serve", "-m", f->model_path, "--port", "0",
                                           "-c", "2048", "-t", "2", "--api-key", SERVER_KEY, "--model-id",
                                           SERVER_MODEL_ID, NULL);
  g_assert_no_error (error);

  /* The port is the one on "serve: listening on http://HOST:PORT" (hanashi-cli's contract). */
  g_autoptr (GRegex) listening = g_regex_new ("serve: listening on http://[^\\s]+:(\\d+)", 0, 0, NULL);
  gint64 deadline = g_get_monotonic_time () + 120 * G_USEC_PER_SEC;
  while (f->url == NULL)
    {
      g_autofree char *log = NULL;
      g_file_get_contents (f->stderr_path, &log, NULL, NULL);
      g_autoptr (GMatchInfo) match = NULL;
      if (log && g_regex_match (listening, log, 0, &match))
        {
          g_autofree char *port = g_match_info_fetch (match, 1);
          f->url = g_strconcat ("http://127.0.0.1:", port, NULL);
          break;
        }
      /* poll the child without reaping it: GSubprocess does that */
      if (g_subprocess_get_identifier (f->server) == NULL || g_get_monotonic_time () > deadline)
        g_error ("hanashi-cli serve did not start listening:\n%s", log ? log : "");
      g_usleep (10000);
    }
}

static void
serve_fixture_tear_down (ServeFixture *f, gconstpointer data)
{
  (void) data;
  if (f->server)
    {
      /* SIGTERM lets it finish cleanly (and the sanitizers report); a server that does not
       * stop within 60 s is killed. */
      g_subprocess_send_signal (f->server, SIGTERM);
      /* GLib's worker thread reaps the child and clears its identifier */
      gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
      while (g_subprocess_get_identifier (f->server) != NULL && g_get_monotonic_time () < deadline)
        g_usleep (10000);
      if (g_subprocess_get_identifier (f->server) != NULL)
        g_subprocess_force_exit (f->server);
      g_assert_true (g_subprocess_wait (f->server, NULL, NULL));
      g_autofree char *log = NULL;
      g_file_get_contents (f->stderr_path, &log, NULL, NULL);
      if (!g_subprocess_get_if_exited (f->server) || g_subprocess_get_exit_status (f->server) != 0)
        g_error ("hanashi-cli serve did not exit cleanly:\n%s", log ? log : "");
      g_clear_object (&f->server);
    }
  g_unlink (f->stderr_path);
  g_rmdir (f->tmpdir);
  g_free (f->stderr_path);
  g_free (f->tmpdir);
  g_free (f->url);
  g_free (f->model_path);
}

/* ---- the window -------------------------------------------------------------------------- */

static void
send (HanashiWindow *window, const char *text)
{
  hanashi_composer_set_text (get_composer (window), text);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.send", NULL);
}

/* The same conversation through the local `hanashi-cli chat` (a fresh context, one thread). */
static char *
local_reply (ServeFixture *f, const char *system, const char *user, const char *grammar, guint seed,
             double temperature, guint max_tokens)
{
  g_autofree char *grammar_path = g_build_filename (f->tmpdir, "grammar.gbnf", NULL);
  g_autofree char *messages_path = g_build_filename (f->tmpdir, "messages.json", NULL);
  g_assert_true (g_file_set_contents (grammar_path, grammar, -1, NULL));
  g_autoptr (JsonBuilder) builder = json_builder_new ();
  json_builder_begin_array (builder);
  for (int i = 0; i < 2; i++)
    {
      const char *role = i == 0 ? "system" : "user", *content = i == 0 ? system : user;
      if (content == NULL || *content == '\0')
        continue;
      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "role");
      json_builder_add_string_value (builder, role);
      json_builder_set_member_name (builder, "content");
      json_builder_add_string_value (builder, content);
      json_builder_end_object (builder);
    }
  json_builder_end_array (builder);
  g_autoptr (JsonNode) root = json_builder_get_root (builder);
  g_autofree char *messages = json_to_string (root, FALSE);
  g_assert_true (g_file_set_contents (messages_path, messages, -1, NULL));

  char seed_s[16], temp_s[G_ASCII_DTOSTR_BUF_SIZE], n_s[16];
  g_snprintf (seed_s, sizeof seed_s, "%u", seed);
  g_ascii_dtostr (temp_s, sizeof temp_s, temperature);
  g_snprintf (n_s, sizeof n_s, "%u", max_tokens);
  const char *argv[] = { g_getenv ("HANASHI_CLI"), "chat", "-m", f->model_path, "-t", "1", "--messages",
                         messages_path, "--grammar-file", grammar_path, "--seed", seed_s, "--temp", temp_s,
                         "-n", n_s, NULL };
  g_autofree char *out = NULL, *err = NULL;
  int status = 0;
  g_autoptr (GError) error = NULL;
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("hanashi-cli chat failed: %s", err);
  g_unlink (grammar_path);
  g_unlink (messages_path);
  /* chat ends the reply with a newline of its own */
  g_assert_true (g_str_has_suffix (out, "\n"));
  out[strlen (out) - 1] = '\0';
  return g_steal_pointer (&out);
}

static void
set_params (HanashiWindow *window, const char *grammar, guint seed, double temperature, guint max_tokens)
{
  g_autoptr (JsonBuilder) builder = json_builder_new ();
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "seed");
  json_builder_add_int_value (builder, seed);
  json_builder_set_member_name (builder, "temperature");
  json_builder_add_double_value (builder, temperature);
  json_builder_set_member_name (builder, "max_new_tokens");
  json_builder_add_int_value (builder, max_tokens);
  json_builder_set_member_name (builder, "grammar_mode");
  json_builder_add_string_value (builder, "gbnf");
  json_builder_set_member_name (builder, "grammar");
  json_builder_add_string_value (builder, grammar);
  json_builder_end_object (builder);
  g_autoptr (JsonNode) root = json_builder_get_root (builder);
  g_autofree char *json = json_to_string (root, FALSE);
  hanashi_params_panel_set_params_json (get_panel (window), json);
}

static void
test_chat_with_served_model (ServeFixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, FALSE);

  /* Models → Servers: the server's address and key, Add Server; its model listed. */
  HanashiModelsDialog *dialog = open_models_dialog (window);
  /* a wrong key first: the server's 401 becomes the dialog's sentence */
  add_server (dialog, f->url, "not-the-key");
  wait_for_text (dialog, "The server refused the API key");
  add_server (dialog, f->url, SERVER_KEY);
  g_signal_emit_by_name (wait_for_chat_button (dialog, SERVER_MODEL_ID), "clicked");
  wait_for_model (window, SERVER_MODEL_ID);
  const HanashiModelInfo *info = hanashi_engine_get_model_info (hanashi_window_get_engine (window));
  g_autofree char *api_url = g_strconcat (f->url, "/v1", NULL);
  g_assert_cmpstr (info->remote_url, ==, api_url);
  /* /v1/models says owned_by "hanashi": Hanashi's own parameters stay available. */
  g_assert_true (info->remote_is_hanashi);
  GtkWidget *top_k = find_named (GTK_WIDGET (window), "spin-top_k");
  g_assert_nonnull (top_k);
  g_assert_true (gtk_widget_get_sensitive (gtk_widget_get_ancestor (top_k, ADW_TYPE_PREFERENCES_ROW)));

  /* A reply equals the local CLI's for the same messages, grammar, seed and temperature. */
  const char *question = "Tell me about the sea.";
  set_params (window, WORDS_GRAMMAR, 1234, 0.9, 24);
  send (window, question);
  wait_until (reply_has_text, window);
  wait_until (reply_done, window);
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 2);
  HanashiMessage *reply = message_at (window, 1);
  g_assert_true (hanashi_message_get_complete (reply));
  /* the chat's system prompt (none unless Preferences sets a default) goes to the CLI too */
  g_autofree char *system = g_strdup (hanashi_composer_get_system_prompt (get_composer (window)));
  g_autofree char *expected = local_reply (f, system, question, WORDS_GRAMMAR, 1234, 0.9, 24);
  g_assert_cmpstr (expected, !=, "");
  g_assert_cmpstr (hanashi_message_get_text (reply), ==, expected);

  /* Another seed, another reply, and still the CLI's (the seed reached the server). */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  wait_for_model (window, SERVER_MODEL_ID);
  set_params (window, WORDS_GRAMMAR, 99, 0.9, 24);
  send (window, question);
  wait_until (reply_has_text, window);
  wait_until (reply_done, window);
  g_free (system);
  system = g_strdup (hanashi_composer_get_system_prompt (get_composer (window)));
  g_autofree char *expected_99 = local_reply (f, system, question, WORDS_GRAMMAR, 99, 0.9, 24);
  g_assert_cmpstr (expected_99, !=, expected);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 1)), ==, expected_99);

  /* Stop mid-reply: a reply that cannot end before 1500 characters stops where it is, is
   * kept as it stands, and the composer is free again. */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  wait_for_model (window, SERVER_MODEL_ID);
  set_params (window, ENDLESS_GRAMMAR, 5, 0.9, 1500);
  send (window, "Go on forever");
  wait_until (reply_has_text, window);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.stop", NULL));
  wait_until (reply_done, window);
  HanashiMessage *stopped = message_at (window, 1);
  gsize stopped_len = strlen (hanashi_message_get_text (stopped));
  g_assert_cmpuint (stopped_len, >, 0);
  g_assert_cmpuint (stopped_len, <, 1500);
  settle ();
  g_assert_cmpuint (strlen (hanashi_message_get_text (stopped)), ==, stopped_len);

  /* The server serves on after the client went away mid-stream: the first reply again. */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  wait_for_model (window, SERVER_MODEL_ID);
  set_params (window, WORDS_GRAMMAR, 1234, 0.9, 24);
  send (window, question);
  wait_until (reply_has_text, window);
  wait_until (reply_done, window);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 1)), ==, expected);

  gtk_window_destroy (GTK_WINDOW (window));
  settle ();
}

int
main (int argc, char **argv)
{
  remote_test_init (&argc, &argv);
  g_test_add ("/Hanashi/RemoteServe/chat", ServeFixture, NULL, serve_fixture_set_up, test_chat_with_served_model,
              serve_fixture_tear_down);
  int status = g_test_run ();
  test_xdg_cleanup ();
  return status;
}
