/* bench-conversations.c — sidebar reload and search over 1000 conversations, export and
 * import of one 10 000-message conversation.  Prints medians; nothing is asserted.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>
#include <glib/gstdio.h>
#include <sqlite3.h>

#include "hanashi-conversation-io.h"
#include "hanashi-conversation-item.h"
#include "hanashi-sidebar.h"
#include "hanashi-store.h"

#define RUNS 11

static int
compare_doubles (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static double
median (double *v, int n)
{
  qsort (v, n, sizeof *v, compare_doubles);
  return v[n / 2];
}

static double
now_ms (void)
{
  return g_get_monotonic_time () / 1000.0;
}

static GPtrArray *
make_messages (guint n, guint words, guint seed)
{
  GPtrArray *messages = g_ptr_array_new_with_free_func ((GDestroyNotify) hanashi_stored_message_free);
  for (guint i = 0; i < n; i++) {
    HanashiStoredMessage *m = g_new0 (HanashiStoredMessage, 1);
    m->id = i + 1;
    m->parent_id = i;
    m->alternative_group = i + 1;
    m->role = g_strdup (i % 2 ? "assistant" : "user");
    GString *text = g_string_new (NULL);
    for (guint w = 0; w < words; w++)
      g_string_append_printf (text, "word%u ", (seed * 131 + i * 7 + w) % 997);
    m->text = g_string_free (text, FALSE);
    m->created = 1700000000 + i;
    m->token_count = words;
    m->generation_seconds = 0.5;
    m->params_json = g_strdup ("{}");
    m->complete = TRUE;
    g_ptr_array_add (messages, m);
  }
  return messages;
}

int
main (int argc, char **argv)
{
  (void) argc; (void) argv;
  g_autofree char *dir = g_dir_make_tmp ("hanashi-bench-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "hanashi.db", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStore) store = hanashi_store_new (path, &error);
  g_assert_no_error (error);

  /* 1000 conversations of 10 messages of 30 words each. */
  for (guint i = 0; i < 1000; i++) {
    g_autoptr(GPtrArray) ten = make_messages (10, 30, i);
    g_autofree char *title = g_strdup_printf ("Conversation %u", i);
    HanashiStoredConversation c = { .title = title, .created = 1700000000 + i, .updated = 1700000000 + i };
    g_assert_cmpint (hanashi_store_insert_conversation (store, &c, ten, FALSE, &error), >, 0);
  }

  double t[RUNS];
  guint hits = 0;
  for (int r = 0; r < RUNS; r++) {
    double start = now_ms ();
    g_autoptr(GPtrArray) list = hanashi_store_list_summaries (store, NULL, &error);
    t[r] = now_ms () - start;
    g_assert_cmpuint (list->len, ==, 1000);
  }
  g_print ("store list_summaries, 1000 conversations: %.2f ms (median of %d)\n", median (t, RUNS), RUNS);
  for (int r = 0; r < RUNS; r++) {
    double start = now_ms ();
    g_autoptr(GPtrArray) list = hanashi_store_list_summaries (store, "word996 ", &error);
    t[r] = now_ms () - start;
    hits = list->len;
  }
  g_print ("search (LIKE) over 1000 conversations / 10000 messages, %u hits: %.2f ms\n", hits, median (t, RUNS));
  for (int r = 0; r < RUNS; r++) {
    double start = now_ms ();
    g_autoptr(GPtrArray) list = hanashi_store_list_summaries (store, "no such text", &error);
    t[r] = now_ms () - start;
    g_assert_cmpuint (list->len, ==, 0);
  }
  g_print ("search (LIKE) over 1000 conversations / 10000 messages, no hit: %.2f ms\n", median (t, RUNS));

  /* For comparison only: the same 10 000 messages in an FTS5 index (the store uses LIKE). */
  {
    sqlite3 *db = NULL;
    g_assert_cmpint (sqlite3_open (path, &db), ==, SQLITE_OK);
    double start = now_ms ();
    int rc = sqlite3_exec (db, "CREATE VIRTUAL TABLE bench_fts USING fts5(text, content='messages', content_rowid='id');"
                               "INSERT INTO bench_fts(bench_fts) VALUES('rebuild');", NULL, NULL, NULL);
    double build = now_ms () - start;
    if (rc == SQLITE_OK) {
      for (int r = 0; r < RUNS; r++) {
        sqlite3_stmt *stmt = NULL;
        start = now_ms ();
        sqlite3_prepare_v2 (db, "SELECT c.id FROM conversations c WHERE c.title LIKE '%word996%' OR c.id IN"
                                " (SELECT m.conversation FROM messages m JOIN bench_fts f ON f.rowid = m.id"
                                "  WHERE bench_fts MATCH '\"word996\"') ORDER BY c.updated DESC;", -1, &stmt, NULL);
        int rows = 0;
        while (sqlite3_step (stmt) == SQLITE_ROW)
          rows++;
        sqlite3_finalize (stmt);
        t[r] = now_ms () - start;
        hits = rows;
      }
      g_print ("search (FTS5, comparison only), same data, %u hits: %.2f ms; index build %.1f ms\n",
               hits, median (t, RUNS), build);
      sqlite3_exec (db, "DROP TABLE bench_fts;", NULL, NULL, NULL);
    } else {
      g_print ("search (FTS5): not available in this SQLite\n");
    }
    sqlite3_close (db);
  }

  if (gtk_init_check ()) {
    adw_init ();
    GtkWidget *window = gtk_window_new ();
    GtkWidget *sidebar = hanashi_sidebar_new ();
    gtk_window_set_child (GTK_WINDOW (window), sidebar);
    gtk_window_set_default_size (GTK_WINDOW (window), 360, 800);
    hanashi_sidebar_set_store (HANASHI_SIDEBAR (sidebar), store);
    gtk_window_present (GTK_WINDOW (window));
    while (g_main_context_iteration (NULL, FALSE))
      ;
    double u[RUNS];
    for (int r = 0; r < RUNS; r++) {
      double start = now_ms ();
      hanashi_sidebar_reload (HANASHI_SIDEBAR (sidebar));
      u[r] = now_ms () - start;
      /* Include the relayout the reload causes. */
      while (g_main_context_iteration (NULL, FALSE))
        ;
      t[r] = now_ms () - start;
    }
    g_print ("sidebar reload, 1000 conversations, nothing changed: %.2f ms for the call, %.2f ms with the relayout\n",
             median (u, RUNS), median (t, RUNS));
    /* The common case: a message lands in one chat halfway down, which moves to the top. */
    for (int r = 0; r < RUNS; r++) {
      GListModel *model = hanashi_sidebar_get_model (HANASHI_SIDEBAR (sidebar));
      g_autoptr(GObject) item = g_list_model_get_item (model, 500);
      gint64 cid = hanashi_conversation_item_get_id (HANASHI_CONVERSATION_ITEM (item));
      g_assert_cmpint (hanashi_store_add_message (store, cid, 0, 0, "user", "moved", TRUE, &error), >, 0);
      double start = now_ms ();
      hanashi_sidebar_reload (HANASHI_SIDEBAR (sidebar));
      u[r] = now_ms () - start;
      while (g_main_context_iteration (NULL, FALSE))
        ;
      t[r] = now_ms () - start;
    }
    g_print ("sidebar reload, 1000 conversations, one moved from the middle to the top: %.2f ms for the call, "
             "%.2f ms with the relayout\n", median (u, RUNS), median (t, RUNS));
    /* The worst case: every row differs (the store was swapped or a search ended). */
    for (int r = 0; r < RUNS; r++) {
      hanashi_sidebar_set_store (HANASHI_SIDEBAR (sidebar), NULL);
      while (g_main_context_iteration (NULL, FALSE))
        ;
      double start = now_ms ();
      hanashi_sidebar_set_store (HANASHI_SIDEBAR (sidebar), store);
      u[r] = now_ms () - start;
      while (g_main_context_iteration (NULL, FALSE))
        ;
      t[r] = now_ms () - start;
    }
    g_print ("sidebar reload, 1000 conversations, all new: %.2f ms for the call, %.2f ms with the relayout\n",
             median (u, RUNS), median (t, RUNS));
    gtk_window_destroy (GTK_WINDOW (window));
  } else {
    g_print ("sidebar reload: skipped (no display)\n");
  }

  /* One conversation of 10 000 messages of 60 words. */
  g_autoptr(GPtrArray) big = make_messages (10000, 60, 0);
  HanashiStoredConversation c = { .title = (char *) "Big", .created = 1, .updated = 1 };
  double start = now_ms ();
  gint64 id = hanashi_store_insert_conversation (store, &c, big, FALSE, &error);
  g_print ("insert 10000 messages in one transaction: %.1f ms\n", now_ms () - start);
  g_assert_cmpint (id, >, 0);

  g_autofree char *json = NULL;
  double tj[5], tm[5], tp[5], ti[5];
  for (int r = 0; r < 5; r++) {
    g_clear_pointer (&json, g_free);
    start = now_ms ();
    json = hanashi_conversation_export_json (store, id, &error);
    tj[r] = now_ms () - start;
    start = now_ms ();
    g_autofree char *md = hanashi_conversation_export_markdown (store, id, &error);
    tm[r] = now_ms () - start;
    g_assert_nonnull (md);
    start = now_ms ();
    g_autoptr(HanashiConversationData) data = hanashi_conversation_import_json_data (json, strlen (json), &error);
    tp[r] = now_ms () - start;
    g_assert_nonnull (data);
    start = now_ms ();
    gint64 imported = hanashi_conversation_import_json (store, json, strlen (json), &error);
    ti[r] = now_ms () - start;
    g_assert_cmpint (imported, >, 0);
  }
  g_print ("10000 messages, JSON %.1f MB: export JSON %.1f ms, export Markdown %.1f ms, "
           "parse+validate %.1f ms, import (parse+insert) %.1f ms (medians of 5)\n",
           strlen (json) / 1e6, median (tj, 5), median (tm, 5), median (tp, 5), median (ti, 5));

  g_clear_object (&store);
  g_autofree char *wal = g_strconcat (path, "-wal", NULL);
  g_autofree char *shm = g_strconcat (path, "-shm", NULL);
  g_remove (path);
  g_remove (wal);
  g_remove (shm);
  g_rmdir (dir);
  return 0;
}
