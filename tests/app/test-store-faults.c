/* test-store-faults.c — HanashiStore under injected disk faults (no display).
 *
 * For each fault and each write a store operation makes, the fault is armed to hit that
 * write: the call must fail with the fault's error code and a sentence for people, the
 * caller's text must be left alone, and after the fault clears the database must hold
 * exactly what it held before, pass integrity_check and open again.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib/gstdio.h>
#include <sqlite3.h>

#include "hanashi-store.h"
#include "store-faults-vfs.h"

typedef struct {
  char *dir;
  char *path;
  gint64 conversation;
  gint64 question;
  gint64 answer;
} Fixture;

static void
remove_tree (const char *path)
{
  GDir *dir = g_dir_open (path, 0, NULL);
  if (dir)
    {
      const char *name;
      while ((name = g_dir_read_name (dir)))
        {
          g_autofree char *child = g_build_filename (path, name, NULL);
          remove_tree (child);
        }
      g_dir_close (dir);
    }
  g_remove (path);
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  (void) data;
  hanashi_store_faults_set (HANASHI_STORE_FAULT_NONE, 0);
  f->dir = g_dir_make_tmp ("hanashi-faults-XXXXXX", NULL);
  g_assert_nonnull (f->dir);
  f->path = g_build_filename (f->dir, "hanashi.db", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStore) store = hanashi_store_new (f->path, &error);
  g_assert_no_error (error);
  f->conversation = hanashi_store_create_conversation (store, "Kept", &error);
  f->question = hanashi_store_add_message (store, f->conversation, 0, 0, "user", "Is it safe?", TRUE, &error);
  f->answer = hanashi_store_add_message (store, f->conversation, f->question, 0, "assistant", "Yes, it", FALSE, &error);
  g_assert_no_error (error);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  (void) data;
  hanashi_store_faults_set (HANASHI_STORE_FAULT_NONE, 0);
  remove_tree (f->dir);
  g_free (f->dir);
  g_free (f->path);
}

/* Every row of both tables as text, plus integrity_check, read without the store. */
static char *
dump_database (const char *path)
{
  sqlite3 *db = NULL;
  g_assert_cmpint (sqlite3_open_v2 (path, &db, SQLITE_OPEN_READONLY, NULL), ==, SQLITE_OK);
  GString *out = g_string_new (NULL);
  const char *queries[] = {
    "PRAGMA integrity_check;",
    "SELECT * FROM conversations ORDER BY id;",
    "SELECT * FROM messages ORDER BY id;",
  };
  for (gsize q = 0; q < G_N_ELEMENTS (queries); q++)
    {
      sqlite3_stmt *stmt = NULL;
      g_assert_cmpint (sqlite3_prepare_v2 (db, queries[q], -1, &stmt, NULL), ==, SQLITE_OK);
      while (sqlite3_step (stmt) == SQLITE_ROW)
        {
          for (int c = 0; c < sqlite3_column_count (stmt); c++)
            g_string_append_printf (out, "%s|", (const char *) sqlite3_column_text (stmt, c));
          g_string_append_c (out, '\n');
        }
      g_assert_cmpint (sqlite3_finalize (stmt), ==, SQLITE_OK);
    }
  sqlite3_close (db);
  return g_string_free (out, FALSE);
}

typedef enum {
  OP_ADD_MESSAGE,
  OP_ADD_ALTERNATIVE,
  OP_UPDATE_MESSAGE,
  OP_CREATE_CONVERSATION,
  OP_RENAME_CONVERSATION,
  OP_DELETE_CONVERSATION,
  N_OPS
} Op;

static const char *const op_names[] = {
  "add-message", "add-alternative", "update-message", "create-conversation",
  "rename-conversation", "delete-conversation",
};

static gboolean
run_op (Fixture *f, HanashiStore *store, Op op, const char *text, GError **error)
{
  switch (op)
    {
    case OP_ADD_MESSAGE:
      return hanashi_store_add_message (store, f->conversation, f->answer, 0, "user", text, TRUE, error) > 0;
    case OP_ADD_ALTERNATIVE:
      return hanashi_store_add_message (store, f->conversation, f->question, f->answer, "assistant", text,
                                        FALSE, error) > 0;
    case OP_UPDATE_MESSAGE:
      return hanashi_store_update_message (store, f->answer, text, 9, 1.5, "{\"top_k\":5}", TRUE, error);
    case OP_CREATE_CONVERSATION:
      return hanashi_store_create_conversation (store, text, error) > 0;
    case OP_RENAME_CONVERSATION:
      return hanashi_store_rename_conversation (store, f->conversation, text, error);
    case OP_DELETE_CONVERSATION:
      return hanashi_store_delete_conversation (store, f->conversation, error);
    case N_OPS:
    default:
      g_assert_not_reached ();
    }
}

typedef struct {
  HanashiStoreFault fault;
  int code;  /* a HanashiStoreError */
  const char *sentence;
} FaultCase;

static const FaultCase fault_cases[] = {
  { HANASHI_STORE_FAULT_NO_SPACE, HANASHI_STORE_ERROR_NO_SPACE,
    "The disk is full, so the conversation could not be saved. Free some space and try again." },
  { HANASHI_STORE_FAULT_SHORT_WRITE, HANASHI_STORE_ERROR_NO_SPACE,
    "The disk is full, so the conversation could not be saved. Free some space and try again." },
  { HANASHI_STORE_FAULT_READ_ONLY, HANASHI_STORE_ERROR_READ_ONLY,
    "The conversation database is read-only, so nothing can be saved." },
  { HANASHI_STORE_FAULT_IO, HANASHI_STORE_ERROR_IO,
    "The disk reported an error while reading or writing the conversation database." },
};

static void
test_write_faults (Fixture *f, gconstpointer data)
{
  const FaultCase *fc = data;
  const char *typed = "Please remember this: 42 ✓";
  g_autofree char *before = dump_database (f->path);

  for (Op op = 0; op < N_OPS; op++)
    {
      guint failures = 0;
      for (guint after = 0;; after++)
        {
          g_autoptr(GError) error = NULL;
          g_autoptr(HanashiStore) store = hanashi_store_new (f->path, &error);
          g_assert_no_error (error);
          g_autofree char *composer = g_strdup (typed);

          hanashi_store_faults_set (fc->fault, after);
          gboolean ok = run_op (f, store, op, composer, &error);
          guint injected = hanashi_store_faults_get_injected ();
          hanashi_store_faults_set (HANASHI_STORE_FAULT_NONE, 0);
          if (ok)
            {
              /* The write point is past the last write: the operation really went through. */
              g_assert_no_error (error);
              g_assert_cmpuint (injected, ==, 0);
              g_test_message ("%s: %u write points failed cleanly", op_names[op], failures);
              break;
            }
          failures++;
          g_assert_error (error, HANASHI_STORE_ERROR, fc->code);
          g_assert_cmpstr (error->message, ==, fc->sentence);
          g_assert_cmpuint (injected, >, 0);
          g_assert_cmpstr (composer, ==, typed);

          /* Same connection, fault gone: the store still reads correctly. */
          g_autoptr(GError) read_error = NULL;
          g_autoptr(GPtrArray) messages = hanashi_store_list_messages (store, f->conversation, &read_error);
          g_assert_no_error (read_error);
          g_assert_cmpuint (messages->len, ==, 2);
          g_clear_object (&store);

          g_autofree char *after_dump = dump_database (f->path);
          g_assert_cmpstr (after_dump, ==, before);
        }
      /* Every operation writes at least once, so at least one point was tried. */
      g_assert_cmpuint (failures, >, 0);

      /* Put the fixture back for the next operation. */
      fixture_teardown (f, NULL);
      fixture_setup (f, NULL);
      g_free (before);
      before = dump_database (f->path);
    }
}

static void
test_garbage_reads (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autofree char *before = dump_database (f->path);
  g_autoptr(GError) error = NULL;

  hanashi_store_faults_set (HANASHI_STORE_FAULT_GARBAGE_READS, 0);
  g_autoptr(HanashiStore) store = hanashi_store_new (f->path, &error);
  guint injected = hanashi_store_faults_get_injected ();
  hanashi_store_faults_set (HANASHI_STORE_FAULT_NONE, 0);
  g_assert_null (store);
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_CORRUPT);
  g_assert_cmpstr (error->message, ==, "The conversation database is damaged and could not be read.");
  g_assert_cmpuint (injected, >, 0);
  g_clear_error (&error);

  /* Nothing was written in response to the garbage. */
  g_autofree char *after = dump_database (f->path);
  g_assert_cmpstr (after, ==, before);
  store = hanashi_store_new (f->path, &error);
  g_assert_no_error (error);
  g_autoptr(HanashiStoredMessage) m = hanashi_store_dup_message (store, f->answer, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (m->text, ==, "Yes, it");
  g_assert_false (m->complete);
}

/* A file that is not a database at all (a damaged disk block, a stray download). */
static void
test_not_a_database (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autofree char *path = g_build_filename (f->dir, "junk.db", NULL);
  g_autofree char *junk = g_strnfill (8192, 'x');
  g_assert_true (g_file_set_contents (path, junk, -1, NULL));
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStore) store = hanashi_store_new (path, &error);
  g_assert_null (store);
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_CORRUPT);
  g_autofree char *contents = NULL;
  g_assert_true (g_file_get_contents (path, &contents, NULL, NULL));
  g_assert_cmpstr (contents, ==, junk);
}

/* Once space is back the same text saves, and exactly once. */
static void
test_retry_after_fault (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStore) store = hanashi_store_new (f->path, &error);
  g_assert_no_error (error);
  hanashi_store_faults_set (HANASHI_STORE_FAULT_NO_SPACE, 0);
  g_assert_cmpint (hanashi_store_add_message (store, f->conversation, f->answer, 0, "user", "again", TRUE, &error), ==, 0);
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NO_SPACE);
  g_clear_error (&error);
  hanashi_store_faults_set (HANASHI_STORE_FAULT_NONE, 0);
  gint64 id = hanashi_store_add_message (store, f->conversation, f->answer, 0, "user", "again", TRUE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (id, >, f->answer);
  g_autoptr(GPtrArray) messages = hanashi_store_list_messages (store, f->conversation, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (messages->len, ==, 3);
  HanashiStoredMessage *last = messages->pdata[2];
  g_assert_cmpstr (last->text, ==, "again");
  g_assert_cmpint (last->alternative_group, ==, id);
}

/* Another program holds the write lock (a second Hanashi, a backup tool): after the busy
 * timeout the call fails with BUSY and writes nothing; once the lock is gone it works. */
static void
test_busy (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autofree char *before = dump_database (f->path);
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStore) store = hanashi_store_new (f->path, &error);
  g_assert_no_error (error);
  sqlite3 *other = NULL;
  g_assert_cmpint (sqlite3_open (f->path, &other), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_exec (other, "BEGIN IMMEDIATE;", NULL, NULL, NULL), ==, SQLITE_OK);

  g_assert_cmpint (hanashi_store_add_message (store, f->conversation, f->answer, 0, "user", "wait", TRUE, &error), ==, 0);
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_BUSY);
  g_assert_cmpstr (error->message, ==, "The conversation database is in use by another program. Try again in a moment.");
  g_clear_error (&error);

  g_assert_cmpint (sqlite3_exec (other, "ROLLBACK;", NULL, NULL, NULL), ==, SQLITE_OK);
  sqlite3_close (other);
  g_clear_object (&store);
  g_autofree char *after = dump_database (f->path);
  g_assert_cmpstr (after, ==, before);

  store = hanashi_store_new (f->path, &error);
  g_assert_cmpint (hanashi_store_add_message (store, f->conversation, f->answer, 0, "user", "wait", TRUE, &error), >, 0);
  g_assert_no_error (error);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  hanashi_store_faults_install ();
  g_test_add ("/store/faults/no-space", Fixture, &fault_cases[0], fixture_setup, test_write_faults, fixture_teardown);
  g_test_add ("/store/faults/short-write", Fixture, &fault_cases[1], fixture_setup, test_write_faults, fixture_teardown);
  g_test_add ("/store/faults/read-only", Fixture, &fault_cases[2], fixture_setup, test_write_faults, fixture_teardown);
  g_test_add ("/store/faults/io-error", Fixture, &fault_cases[3], fixture_setup, test_write_faults, fixture_teardown);
  g_test_add ("/store/faults/garbage-reads", Fixture, NULL, fixture_setup, test_garbage_reads, fixture_teardown);
  g_test_add ("/store/faults/not-a-database", Fixture, NULL, fixture_setup, test_not_a_database, fixture_teardown);
  g_test_add ("/store/faults/busy", Fixture, NULL, fixture_setup, test_busy, fixture_teardown);
  g_test_add ("/store/faults/retry", Fixture, NULL, fixture_setup, test_retry_after_fault, fixture_teardown);
  return g_test_run ();
}
