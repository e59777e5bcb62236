/* test-store-crash.c — the app killed with SIGKILL while it streams an answer (no display).
 *
 * The test program runs itself as a child that writes a conversation the way the window
 * does: the user message committed at once, then the assistant's reply added incomplete and
 * rewritten with the text so far after every chunk, each update its own commit, and marked
 * complete at the end.  After each commit the child prints a line; the parent kills it with
 * SIGKILL right after reading a chosen line, so the kill lands while the next update is
 * being written.  A second mode makes the kill exact: the child runs on the fault VFS and
 * kills itself inside its n-th write, after half the buffer reached the file, for every n.
 * Either way the database must open, pass integrity_check, hold everything the child
 * reported committed, and show the half answer as incomplete.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <sqlite3.h>

#include "hanashi-store.h"
#include "store-faults-vfs.h"

#define N_CHUNKS 400
#define QUESTION "Tell me a long story about a lighthouse."

/* The answer after n chunks; every prefix is distinct, so the stored text tells how far the
 * child got.  Chunks are large so each commit takes a while and the kill lands inside one. */
static char *
answer_after (int n)
{
  GString *s = g_string_new (NULL);
  for (int k = 0; k < n; k++)
    {
      g_string_append_printf (s, "[%d] ", k);
      for (int j = 0; j < 2000; j++)
        g_string_append_c (s, (char) ('a' + (k + j) % 26));
    }
  return g_string_free (s, FALSE);
}

static void
say (const char *fmt, ...) G_GNUC_PRINTF (1, 2);

static void
say (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  vprintf (fmt, ap);
  va_end (ap);
  fflush (stdout);
}

/* n_chunks answer updates; with `linger` the child waits to be killed after "done". */
static int
run_child (const char *path, int n_chunks, gboolean linger)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStore) store = hanashi_store_new (path, &error);
  if (!store)
    return 2;
  gint64 conversation = hanashi_store_create_conversation (store, "Lighthouse", &error);
  gint64 question = hanashi_store_add_message (store, conversation, 0, 0, "user", QUESTION, TRUE, &error);
  if (!question)
    return 3;
  say ("user %" G_GINT64_FORMAT " %" G_GINT64_FORMAT "\n", conversation, question);
  gint64 answer = hanashi_store_add_message (store, conversation, question, 0, "assistant", "", FALSE, &error);
  if (!answer)
    return 4;
  say ("answer %" G_GINT64_FORMAT "\n", answer);
  for (int n = 1; n <= n_chunks; n++)
    {
      g_autofree char *text = answer_after (n);
      if (!hanashi_store_update_message (store, answer, text, n, n * 0.01, NULL, FALSE, &error))
        return 5;
      say ("committed %d\n", n);
    }
  g_autofree char *text = answer_after (n_chunks);
  if (!hanashi_store_update_message (store, answer, text, n_chunks, 9.0, "{}", TRUE, &error))
    return 6;
  say ("done\n");
  while (linger)
    pause ();
  return 0;
}

typedef struct {
  const char *name;
  const char *kill_after;  /* the line prefix after which the parent kills */
  int kill_after_chunk;    /* with "committed" */
} KillPoint;

static const KillPoint kill_points[] = {
  { "after-user-message", "user", 0 },
  { "after-empty-answer", "answer", 0 },
  { "after-1-chunk", "committed", 1 },
  { "after-7-chunks", "committed", 7 },
  { "after-50-chunks", "committed", 50 },
  { "after-333-chunks", "committed", 333 },
  { "after-complete", "done", 0 },
};

static char *self_exe;

static void
remove_database (const char *dir, const char *path)
{
  g_autofree char *wal = g_strconcat (path, "-wal", NULL);
  g_autofree char *shm = g_strconcat (path, "-shm", NULL);
  g_remove (wal);
  g_remove (shm);
  g_remove (path);
  g_rmdir (dir);
}

/* What must hold after a kill, given what the child reported before it died. */
static void
verify_database (const char *path, gint64 conversation, gint64 question, gint64 answer,
                 int committed, gboolean done, int n_chunks)
{
  g_autoptr(GError) error = NULL;
  /* The file is sound. */
  sqlite3 *db = NULL;
  g_assert_cmpint (sqlite3_open (path, &db), ==, SQLITE_OK);
  sqlite3_stmt *stmt = NULL;
  g_assert_cmpint (sqlite3_prepare_v2 (db, "PRAGMA integrity_check;", -1, &stmt, NULL), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_step (stmt), ==, SQLITE_ROW);
  g_assert_cmpstr ((const char *) sqlite3_column_text (stmt, 0), ==, "ok");
  sqlite3_finalize (stmt);
  sqlite3_close (db);

  g_autoptr(HanashiStore) store = hanashi_store_new (path, &error);
  g_assert_no_error (error);
  if (conversation == 0)
    {
      /* Killed before the first report: whatever is there must be whole. */
      g_autoptr(GPtrArray) all = hanashi_store_list_conversations (store, NULL, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (all->len, <=, 1);
      if (all->len == 0)
        return;
      conversation = ((HanashiStoredConversation *) all->pdata[0])->id;
    }
  g_autoptr(HanashiStoredConversation) conv = hanashi_store_dup_conversation (store, conversation, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (conv->title, ==, "Lighthouse");
  g_autoptr(GPtrArray) messages = hanashi_store_list_messages (store, conversation, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (messages->len, >=, answer ? 2 : question ? 1 : 0);
  if (messages->len == 0)
    {
      g_assert_cmpint (question, ==, 0);
      return;
    }
  HanashiStoredMessage *q = messages->pdata[0];
  if (question)
    g_assert_cmpint (q->id, ==, question);
  g_assert_cmpstr (q->role, ==, "user");
  g_assert_cmpstr (q->text, ==, QUESTION);
  g_assert_true (q->complete);

  g_autoptr(GPtrArray) incomplete = hanashi_store_list_incomplete (store, &error);
  g_assert_no_error (error);
  if (messages->len == 1)
    {
      /* Killed before the answer row was committed: nothing half-made is left behind. */
      g_assert_cmpint (answer, ==, 0);
      g_assert_cmpuint (incomplete->len, ==, 0);
      return;
    }
  g_assert_cmpuint (messages->len, ==, 2);
  HanashiStoredMessage *a = messages->pdata[1];
  g_assert_cmpstr (a->role, ==, "assistant");
  g_assert_cmpint (a->parent_id, ==, q->id);
  if (answer)
    g_assert_cmpint (a->id, ==, answer);
  /* The stored text is exactly the answer after some number of chunks, at least as many as
   * the child reported committed (it may have committed more before the kill landed). */
  int n = a->token_count;
  g_assert_cmpint (n, >=, committed);
  g_assert_cmpint (n, <=, n_chunks);
  g_autofree char *expected = answer_after (n);
  g_assert_cmpstr (a->text, ==, expected);
  g_test_message ("killed after %d reported commits; %d chunks stored", committed, n);
  if (done)
    {
      g_assert_true (a->complete);
      g_assert_cmpint (n, ==, n_chunks);
      g_assert_cmpuint (incomplete->len, ==, 0);
    }
  else if (!a->complete)
    {
      g_assert_cmpuint (incomplete->len, ==, 1);
      g_assert_cmpint (((HanashiStoredMessage *) incomplete->pdata[0])->id, ==, a->id);
    }
  else
    {
      /* The child finished between our read and the kill: only possible near the end. */
      g_assert_cmpint (n, ==, n_chunks);
    }
}

/* Reads the child's reports until its stdout closes. */
static void
read_reports (FILE *out, gint64 *conversation, gint64 *question, gint64 *answer, int *committed,
              gboolean *done)
{
  char line[256];
  while (fgets (line, sizeof line, out))
    {
      if (sscanf (line, "user %" G_GINT64_FORMAT " %" G_GINT64_FORMAT, conversation, question) == 2)
        continue;
      if (sscanf (line, "answer %" G_GINT64_FORMAT, answer) == 1)
        continue;
      if (sscanf (line, "committed %d", committed) == 1)
        continue;
      if (g_str_has_prefix (line, "done"))
        *done = TRUE;
    }
}

#define KILL_AT_CHUNKS 5

/* The child kills itself in the middle of its n-th write (half the buffer on disk), for
 * every n until it gets through the whole script: every write of creating the conversation,
 * adding both messages, each streamed update, marking it complete and closing. */
static void
test_kill_at_every_write (void)
{
  guint points = 0;
  for (guint n = 0;; n++)
    {
      g_autofree char *dir = g_dir_make_tmp ("hanashi-crash-XXXXXX", NULL);
      g_autofree char *path = g_build_filename (dir, "hanashi.db", NULL);
      g_autofree char *at = g_strdup_printf ("%u", n);
      const char *argv[] = { self_exe, "--crash-child-at", at, path, NULL };
      GPid pid;
      int out_fd;
      g_autoptr(GError) error = NULL;
      g_assert_true (g_spawn_async_with_pipes (NULL, (char **) argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                               NULL, &pid, NULL, &out_fd, NULL, &error));
      g_assert_no_error (error);
      FILE *out = fdopen (out_fd, "r");
      gint64 conversation = 0, question = 0, answer = 0;
      int committed = 0;
      gboolean done = FALSE;
      read_reports (out, &conversation, &question, &answer, &committed, &done);
      fclose (out);
      int status = 0;
      g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
      g_spawn_close_pid (pid);
      gboolean finished = WIFEXITED (status);
      if (finished)
        {
          g_assert_cmpint (WEXITSTATUS (status), ==, 0);
          g_assert_true (done);
        }
      else
        {
          g_assert_true (WIFSIGNALED (status));
          g_assert_cmpint (WTERMSIG (status), ==, SIGKILL);
          points++;
        }
      verify_database (path, conversation, question, answer, committed, done, KILL_AT_CHUNKS);
      remove_database (dir, path);
      if (finished)
        break;
    }
  g_test_message ("killed inside each of %u writes", points);
  /* Conversation, two messages, five updates and completion: at least one write each. */
  g_assert_cmpuint (points, >=, 9);
}

static void
test_sigkill (gconstpointer data)
{
  const KillPoint *kp = data;
  g_autofree char *dir = g_dir_make_tmp ("hanashi-crash-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "hanashi.db", NULL);
  const char *argv[] = { self_exe, "--crash-child", path, NULL };
  GPid pid;
  int out_fd;
  g_autoptr(GError) error = NULL;
  g_assert_true (g_spawn_async_with_pipes (NULL, (char **) argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL,
                                           &pid, NULL, &out_fd, NULL, &error));
  g_assert_no_error (error);

  FILE *out = fdopen (out_fd, "r");
  char line[256];
  gint64 conversation = 0, question = 0, answer = 0;
  int committed = 0;
  gboolean done = FALSE, reached = FALSE;
  while (!reached && fgets (line, sizeof line, out))
    {
      if (sscanf (line, "user %" G_GINT64_FORMAT " %" G_GINT64_FORMAT, &conversation, &question) == 2)
        reached = g_str_equal (kp->kill_after, "user");
      else if (sscanf (line, "answer %" G_GINT64_FORMAT, &answer) == 1)
        reached = g_str_equal (kp->kill_after, "answer");
      else if (sscanf (line, "committed %d", &committed) == 1)
        reached = g_str_equal (kp->kill_after, "committed") && committed == kp->kill_after_chunk;
      else if (g_str_has_prefix (line, "done"))
        reached = done = TRUE;
    }
  g_assert_true (reached);
  g_assert_cmpint (kill (pid, SIGKILL), ==, 0);
  int status = 0;
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFSIGNALED (status));
  g_assert_cmpint (WTERMSIG (status), ==, SIGKILL);
  fclose (out);
  g_spawn_close_pid (pid);

  verify_database (path, conversation, question, answer, committed, done, N_CHUNKS);
  remove_database (dir, path);
}

int
main (int argc, char **argv)
{
  if (argc == 3 && g_str_equal (argv[1], "--crash-child"))
    return run_child (argv[2], N_CHUNKS, TRUE);
  if (argc == 4 && g_str_equal (argv[1], "--crash-child-at"))
    {
      hanashi_store_faults_install ();
      hanashi_store_faults_set (HANASHI_STORE_FAULT_KILL, (guint) g_ascii_strtoull (argv[2], NULL, 10));
      return run_child (argv[3], KILL_AT_CHUNKS, FALSE);
    }
  g_test_init (&argc, &argv, NULL);
  self_exe = g_file_read_link ("/proc/self/exe", NULL);
  g_assert_nonnull (self_exe);
  for (gsize i = 0; i < G_N_ELEMENTS (kill_points); i++)
    {
      g_autofree char *name = g_strdup_printf ("/store/sigkill/%s", kill_points[i].name);
      g_test_add_data_func (name, &kill_points[i], test_sigkill);
    }
  g_test_add_func ("/store/sigkill/inside-every-write", test_kill_at_every_write);
  int rc = g_test_run ();
  g_free (self_exe);
  return rc;
}
