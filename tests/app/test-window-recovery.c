/* The window when things go wrong around it: a conversation database locked by another
 * process, in a folder that cannot be written, or damaged; and a model file that cannot be
 * loaded while another model works.  The engine's scripted backend stands in for a model.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>
#include <errno.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hanashi-application.h"
#include "hanashi-composer.h"
#include "hanashi-engine-backend.h"
#include "hanashi-store-recovery.h"
#include "hanashi-window.h"
#include "test-widgets.h"
#include "test-scripted.h"
#include "test-window-helpers.h"
#include "test-xdg.h"
#include "hanashi-test-seams.h"


static gboolean
engine_idle (gpointer data)
{
  HanashiEngineState state = hanashi_engine_get_state (hanashi_window_get_engine (data));
  return state == HANASHI_ENGINE_STATE_READY || state == HANASHI_ENGINE_STATE_NO_MODEL;
}

static HanashiStoreBanner *
get_banner (HanashiWindow *window)
{
  return HANASHI_STORE_BANNER (find_by_type (GTK_WIDGET (window), HANASHI_TYPE_STORE_BANNER));
}

static void
load_model (HanashiWindow *window, const char *path)
{
  g_autoptr (GFile) file = g_file_new_for_path (path);
  hanashi_window_open_model (window, file);
  wait_until (model_loaded, window);
  wait_until (engine_idle, window);
}

static char *
database_path (void)
{
  return g_build_filename (g_get_user_data_dir (), "hanashi", "hanashi.db", NULL);
}

/* Each test starts from its own database folder. */
static void
remove_database_folder (void)
{
  g_autofree char *dir = g_build_filename (g_get_user_data_dir (), "hanashi", NULL);
  g_autoptr (GFile) folder = g_file_new_for_path (dir);
  g_chmod (dir, 0700);
  test_xdg_remove_tree (folder);
}

/* A database with one conversation of two messages, closed again (WAL checkpointed). */
static gint64
make_history (void)
{
  g_autofree char *path = database_path ();
  g_autoptr (GError) error = NULL;
  g_autoptr (HanashiStore) store = hanashi_store_new (path, &error);
  g_assert_no_error (error);
  gint64 conversation = hanashi_store_create_conversation (store, "Earlier", &error);
  gint64 question = hanashi_store_add_message (store, conversation, 0, 0, "user", "Earlier question", TRUE, &error);
  g_assert_cmpint (hanashi_store_add_message (store, conversation, question, 0, "assistant", "Earlier answer", TRUE, &error), >, 0);
  g_assert_no_error (error);
  return conversation;
}

static int
count_rows (const char *sql)
{
  g_autofree char *path = database_path ();
  sqlite3 *db = NULL;
  sqlite3_stmt *stmt = NULL;
  int n = -1;
  g_assert_cmpint (sqlite3_open_v2 (path, &db, SQLITE_OPEN_READONLY, NULL), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL), ==, SQLITE_OK);
  if (sqlite3_step (stmt) == SQLITE_ROW)
    n = sqlite3_column_int (stmt, 0);
  sqlite3_finalize (stmt);
  sqlite3_close (db);
  return n;
}

static guint
n_messages (HanashiWindow *window)
{
  return g_list_model_get_n_items (hanashi_window_get_messages (window));
}

/* Sends @text and waits for the whole reply. */
static void
send_and_finish (HanashiWindow *window, const char *text)
{
  guint before = n_messages (window);
  hanashi_composer_set_text (get_composer (window), text);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.send", NULL);
  g_assert_cmpuint (n_messages (window), ==, before + 2);
  wait_until (reply_done, window);
  g_autofree char *left = hanashi_composer_dup_text (get_composer (window));
  g_assert_cmpstr (left, ==, "");
}

/* Sending is refused with @needle in a toast; the text stays and nothing is listed. */
static void
assert_send_refused (HanashiWindow *window, const char *text, const char *needle)
{
  guint before = n_messages (window);
  hanashi_composer_set_text (get_composer (window), text);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.send", NULL);
  wait_for_text (window, needle);
  g_assert_cmpuint (n_messages (window), ==, before);
  g_autofree char *kept = hanashi_composer_dup_text (get_composer (window));
  g_assert_cmpstr (kept, ==, text);
}

/* ---- another process holds an exclusive lock ---------------------------------------------- */

static const char *lock_script =
  "import sqlite3, sys\n"
  "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
  "db.execute('PRAGMA locking_mode=EXCLUSIVE')\n"
  "db.execute('BEGIN EXCLUSIVE')\n"
  "db.execute('SELECT COUNT(*) FROM messages').fetchone()\n"
  "print('locked', flush=True)\n"
  "sys.stdin.readline()\n"
  "db.execute('COMMIT')\n"
  "db.close()\n";

static gboolean
store_writable (gpointer data)
{
  HanashiWindow *window = data;
  HanashiStore *store = hanashi_window_get_store (window);
  return store != NULL && !hanashi_store_is_read_only (store) &&
         hanashi_store_banner_get_text (get_banner (window)) == NULL;
}

static void
test_store_locked (void)
{
  g_autofree char *path = database_path ();
  g_autoptr (GError) error = NULL;
  remove_database_folder ();
  gint64 conversation = make_history ();

  /* A real second process, as another Hanashi or a backup tool would be. */
  g_autoptr (GSubprocess) locker =
    g_subprocess_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE, &error,
                      "python3", "-c", lock_script, path, NULL);
  g_assert_no_error (error);
  g_autoptr (GDataInputStream) out = g_data_input_stream_new (g_subprocess_get_stdout_pipe (locker));
  g_autofree char *line = g_data_input_stream_read_line (out, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (line, ==, "locked");

  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1000, 700, FALSE);
  g_assert_null (hanashi_window_get_store (window));
  const char *banner = hanashi_store_banner_get_text (get_banner (window));
  g_assert_nonnull (banner);
  g_assert_nonnull (strstr (banner, path));
  g_assert_nonnull (strstr (banner, "another program is using it"));
  g_assert_true (gtk_widget_get_mapped (GTK_WIDGET (get_banner (window))));

  load_model (window, model_path);
  assert_send_refused (window, "Are you there?", "another program is using it");

  /* The lock goes away: the window opens the database by itself and shows the history. */
  g_assert_true (g_output_stream_write_all (g_subprocess_get_stdin_pipe (locker), "\n", 1, NULL, NULL, &error));
  g_assert_true (g_subprocess_wait_check (locker, NULL, &error));
  g_assert_no_error (error);
  wait_until (store_writable, window);
  g_assert_false (gtk_widget_get_visible (GTK_WIDGET (get_banner (window))));
  g_assert_cmpint (hanashi_window_get_conversation_id (window), ==, conversation);
  g_assert_cmpuint (n_messages (window), ==, 2);

  send_and_finish (window, "Are you there?");
  g_assert_cmpint (count_rows ("SELECT COUNT(*) FROM messages"), ==, 4);
  gtk_window_destroy (GTK_WINDOW (window));
}

/* ---- a data folder that cannot be written ------------------------------------------------- */

/* Root writes anywhere; the folder is read-only to the user the test drops to. */
static void
become_unprivileged (void)
{
  if (geteuid () != 0)
    return;
  struct passwd *nobody = getpwnam ("nobody");
  g_assert_nonnull (nobody);
  g_assert_cmpint (seteuid (nobody->pw_uid), ==, 0);
}

static void
become_root_again (void)
{
  if (getuid () == 0)
    g_assert_cmpint (seteuid (0), ==, 0);
}

static void
test_store_read_only (void)
{
  g_autofree char *path = database_path ();
  g_autofree char *dir = g_path_get_dirname (path);
  remove_database_folder ();
  gint64 conversation = make_history ();
  int messages_before = count_rows ("SELECT COUNT(*) FROM messages");

  /* Readable by everyone (the unprivileged user included), writable by nobody. */
  g_assert_cmpint (g_chmod (test_xdg_root, 0755), ==, 0);
  g_assert_cmpint (g_chmod (g_get_user_data_dir (), 0755), ==, 0);
  g_assert_cmpint (g_chmod (path, 0644), ==, 0);
  g_assert_cmpint (g_chmod (dir, 0555), ==, 0);
  become_unprivileged ();

  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1000, 700, FALSE);
  /* The history is shown, read-only. */
  HanashiStore *store = hanashi_window_get_store (window);
  g_assert_nonnull (store);
  g_assert_true (hanashi_store_is_read_only (store));
  g_assert_cmpint (hanashi_window_get_conversation_id (window), ==, conversation);
  g_assert_cmpuint (n_messages (window), ==, 2);
  const char *banner = hanashi_store_banner_get_text (get_banner (window));
  g_assert_nonnull (banner);
  g_assert_nonnull (strstr (banner, path));
  g_autofree char *reason = g_strdup_printf ("its folder “%s” cannot be written to (%s)", dir, g_strerror (EACCES));
  g_assert_nonnull (strstr (banner, reason));

  /* Sending says which file and why, and keeps the text. */
  load_model (window, model_path);
  assert_send_refused (window, "Still there?", reason);
  /* Try Again while it still cannot be written: the history stays. */
  gtk_widget_activate (find_button (GTK_WIDGET (get_banner (window)), "Try Again"));
  g_assert_true (hanashi_store_is_read_only (hanashi_window_get_store (window)));
  g_assert_nonnull (strstr (hanashi_store_banner_get_text (get_banner (window)), reason));
  g_assert_cmpuint (n_messages (window), ==, 2);
  become_root_again ();
  g_assert_cmpint (count_rows ("SELECT COUNT(*) FROM messages"), ==, messages_before);

  /* Once the folder can be written again, the next send reopens it and goes through. */
  g_assert_cmpint (g_chmod (dir, 0700), ==, 0);
  send_and_finish (window, "Still there?");
  g_assert_false (hanashi_store_is_read_only (hanashi_window_get_store (window)));
  g_assert_null (hanashi_store_banner_get_text (get_banner (window)));
  g_assert_cmpint (count_rows ("SELECT COUNT(*) FROM messages"), ==, messages_before + 2);
  gtk_window_destroy (GTK_WINDOW (window));
  g_chmod (test_xdg_root, 0700);
}

/* ---- a damaged file ----------------------------------------------------------------------- */

static AdwMessageDialog *
find_message_dialog (void)
{
  GListModel *toplevels = gtk_window_get_toplevels ();   /* not ours */
  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr (GObject) window = g_list_model_get_item (toplevels, i);
      if (ADW_IS_MESSAGE_DIALOG (window) && gtk_widget_get_visible (GTK_WIDGET (window)))
        return ADW_MESSAGE_DIALOG (window);
    }
  return NULL;
}

static gboolean
has_message_dialog (gpointer data)
{
  return find_message_dialog () != NULL;
}

static char *
find_set_aside (const char *dir)
{
  g_autoptr (GDir) listing = g_dir_open (dir, 0, NULL);
  const char *name;
  while (listing != NULL && (name = g_dir_read_name (listing)) != NULL)
    if (g_str_has_prefix (name, "hanashi.db.damaged-") && !g_str_has_suffix (name, "-wal") && !g_str_has_suffix (name, "-shm"))
      return g_build_filename (dir, name, NULL);
  return NULL;
}

static void
test_store_damaged (void)
{
  g_autofree char *path = database_path ();
  g_autofree char *dir = g_path_get_dirname (path);
  remove_database_folder ();
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  char junk[8192];
  for (gsize i = 0; i < sizeof junk; i++)
    junk[i] = (char) (i * 7 + 3);
  g_assert_true (g_file_set_contents (path, junk, sizeof junk, NULL));

  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1000, 700, FALSE);
  g_assert_null (hanashi_window_get_store (window));
  const char *banner = hanashi_store_banner_get_text (get_banner (window));
  g_assert_nonnull (banner);
  g_assert_nonnull (strstr (banner, path));
  g_assert_nonnull (strstr (banner, "it is damaged or is not a database"));
  g_assert_nonnull (find_button (GTK_WIDGET (get_banner (window)), "Start Fresh…"));

  /* The offer comes by itself once the window is shown; declining changes nothing. */
  wait_until (has_message_dialog, NULL);
  AdwMessageDialog *dialog = find_message_dialog ();
  g_assert_nonnull (strstr (adw_message_dialog_get_body (dialog), path));
  adw_message_dialog_response (dialog, "cancel");   /* the dialog closes itself */
  settle ();
  g_assert_null (hanashi_window_get_store (window));
  g_assert_null (find_set_aside (dir));

  /* The banner's button asks again; accepting keeps the damaged file under a new name. */
  gtk_widget_activate (find_button (GTK_WIDGET (get_banner (window)), "Start Fresh…"));
  wait_until (has_message_dialog, NULL);
  dialog = find_message_dialog ();
  adw_message_dialog_response (dialog, "fresh");
  g_assert_true (store_writable (window));
  g_autofree char *aside = find_set_aside (dir);
  g_assert_nonnull (aside);
  g_autofree char *kept = NULL;
  gsize kept_len = 0;
  g_assert_true (g_file_get_contents (aside, &kept, &kept_len, NULL));
  g_assert_cmpmem (kept, kept_len, junk, sizeof junk);
  g_autofree char *aside_name = g_path_get_basename (aside);
  wait_for_text (window, aside_name);

  /* Chatting works on the fresh database. */
  load_model (window, model_path);
  send_and_finish (window, "A fresh start");
  g_assert_cmpint (count_rows ("SELECT COUNT(*) FROM messages"), ==, 2);
  gtk_window_destroy (GTK_WINDOW (window));
}

/* The application owns the database: every window shows the same store, one question
 * about a damaged file is asked for all of them (over the active window), and what one
 * window's banner does, the other window shows. */
static guint
count_message_dialogs (void)
{
  GListModel *toplevels = gtk_window_get_toplevels ();   /* not ours */
  guint n = 0;
  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr (GObject) window = g_list_model_get_item (toplevels, i);
      n += ADW_IS_MESSAGE_DIALOG (window) && gtk_widget_get_visible (GTK_WIDGET (window));
    }
  return n;
}

static void
test_store_shared (void)
{
  g_autofree char *path = database_path ();
  g_autofree char *dir = g_path_get_dirname (path);
  remove_database_folder ();
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  g_assert_true (g_file_set_contents (path, "not a database, not at all, not even close", -1, NULL));

  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *first = make_window (app, 1000, 700, FALSE);
  HanashiWindow *second = make_window (app, 1000, 700, FALSE);
  g_assert_null (hanashi_application_get_store (app));
  g_assert_nonnull (hanashi_application_get_store_problem (app));
  g_assert_cmpstr (hanashi_store_banner_get_text (get_banner (first)), ==, hanashi_store_banner_get_text (get_banner (second)));

  /* Both windows were shown; the offer came once. */
  wait_until (has_message_dialog, NULL);
  settle ();
  g_assert_cmpuint (count_message_dialogs (), ==, 1);
  /* Asking again from a banner brings back the same question, not a second one. */
  gtk_widget_activate (find_button (GTK_WIDGET (get_banner (second)), "Start Fresh…"));
  settle ();
  g_assert_cmpuint (count_message_dialogs (), ==, 1);
  AdwMessageDialog *dialog = find_message_dialog ();
  GtkWindow *parent = gtk_window_get_transient_for (GTK_WINDOW (dialog));
  g_assert_true (parent == GTK_WINDOW (first) || parent == GTK_WINDOW (second));
  adw_message_dialog_response (dialog, "fresh");

  HanashiStore *store = hanashi_application_get_store (app);
  g_assert_nonnull (store);
  g_assert_null (hanashi_application_get_store_problem (app));
  g_assert_true (hanashi_window_get_store (first) == store);
  g_assert_true (hanashi_window_get_store (second) == store);
  g_assert_true (store_writable (first));
  g_assert_true (store_writable (second));

  /* A conversation written through one window is in the other's list at once. */
  load_model (first, model_path);
  send_and_finish (first, "Written in the first window");
  g_autoptr (GPtrArray) conversations = hanashi_store_list_conversations (hanashi_window_get_store (second), NULL, NULL);
  g_assert_nonnull (conversations);
  g_assert_cmpuint (conversations->len, ==, 1);
  gtk_window_destroy (GTK_WINDOW (second));
  gtk_window_destroy (GTK_WINDOW (first));
}

/* ---- a model file that cannot be loaded --------------------------------------------------- */

static void
test_failed_load_keeps_model (void)
{
  remove_database_folder ();
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1000, 700, FALSE);
  load_model (window, model_path);
  g_autofree char *name = g_strdup (hanashi_engine_get_model_info (hanashi_window_get_engine (window))->name);

  g_autofree char *missing = g_build_filename (g_get_user_data_dir (), "gone.gguf", NULL);
  g_autoptr (GFile) file = g_file_new_for_path (missing);
  hanashi_window_open_model (window, file);
  wait_for_text (window, "“gone.gguf” could not be opened as a model. The model file could not be read.");
  g_autofree char *kept = g_strdup_printf ("“%s” is still loaded.", name);
  wait_for_text (window, kept);
  wait_until (engine_idle, window);
  const HanashiModelInfo *info = hanashi_engine_get_model_info (hanashi_window_get_engine (window));
  g_assert_nonnull (info);
  g_assert_cmpstr (info->path, ==, model_path);

  send_and_finish (window, "Still the same model?");
  gtk_window_destroy (GTK_WINDOW (window));
}

/* ---- the sentences and the set-aside names, without a window ---------------------------- */

static void
test_open_best_sentences (void)
{
  g_autofree char *path = database_path ();
  g_autoptr (GError) problem = NULL;
  remove_database_folder ();
  make_history ();

  /* Writable: no problem at all. */
  g_autoptr (HanashiStore) store = hanashi_store_open_best (path, &problem);
  g_assert_no_error (problem);
  g_assert_false (hanashi_store_is_read_only (store));
  g_clear_object (&store);

  /* A newer schema: refused, and the store's own sentence ends the message once. */
  sqlite3 *db = NULL;
  g_assert_cmpint (sqlite3_open (path, &db), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_exec (db, "INSERT INTO schema_version VALUES (99);", NULL, NULL, NULL), ==, SQLITE_OK);
  sqlite3_close (db);
  store = hanashi_store_open_best (path, &problem);
  g_assert_null (store);
  g_assert_error (problem, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_TOO_NEW);
  g_autofree char *expected = g_strdup_printf ("The conversation database “%s” could not be opened: "
                                               "The conversation database was written by a newer version of Hanashi (schema 99).",
                                               path);
  g_assert_cmpstr (problem->message, ==, expected);
  g_clear_error (&problem);

  /* Set aside twice within a second: the second name gets "-2", nothing is overwritten. */
  g_autoptr (GError) error = NULL;
  g_autofree char *first = hanashi_store_set_aside (path, &error);
  g_assert_no_error (error);
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_set_contents (path, "second", -1, NULL));
  g_autofree char *second = hanashi_store_set_aside (path, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (first, !=, second);
  g_assert_true (g_str_has_prefix (first, path));
  g_assert_true (g_file_test (first, G_FILE_TEST_EXISTS));
  g_autofree char *kept = NULL;
  g_assert_true (g_file_get_contents (second, &kept, NULL, NULL));
  g_assert_cmpstr (kept, ==, "second");
  /* Nothing to move: a sentence naming the file. */
  g_autofree char *none = hanashi_store_set_aside (path, &error);
  g_assert_null (none);
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_IO);
  g_assert_nonnull (strstr (error->message, path));
}

int
main (int argc, char **argv)
{
  scripted_test_init (&argc, &argv);

  write_scripted_model (test_xdg_root);
  g_chmod (model_path, 0644);

  g_test_add_func ("/window-recovery/store-locked", test_store_locked);
  g_test_add_func ("/window-recovery/store-read-only", test_store_read_only);
  g_test_add_func ("/window-recovery/store-damaged", test_store_damaged);
  g_test_add_func ("/window-recovery/store-shared", test_store_shared);
  g_test_add_func ("/window-recovery/failed-load-keeps-model", test_failed_load_keeps_model);
  g_test_add_func ("/window-recovery/open-best-sentences", test_open_best_sentences);
  int status = g_test_run ();
  g_free (model_path);
  return status;
}
