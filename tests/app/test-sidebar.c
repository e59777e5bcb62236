/* test-sidebar.c — the conversations sidebar under Xvfb: order by activity, search as you
 * type, rename through the dialog, delete and undo, activation, export and import
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>
#include <glib/gstdio.h>

#include "hanashi-conversation-io.h"
#include "hanashi-conversation-item.h"
#include "hanashi-conversation-row.h"
#include "hanashi-sidebar.h"
#include "hanashi-store.h"
#include "test-screenshot.h"
#include "test-widgets.h"
#include "test-xdg.h"

typedef struct {
  HanashiStore *store;
  GtkWidget *window;
  HanashiSidebar *sidebar;
  gint64 activated;
  guint n_activated;
  gint64 deleted;
} Fixture;

static gint64
insert (HanashiStore *store, const char *title, gint64 updated, const char *const *texts)
{
  HanashiStoredConversation c = { .title = (char *) title, .created = updated, .updated = updated };
  g_autoptr(GPtrArray) messages = g_ptr_array_new_with_free_func ((GDestroyNotify) hanashi_stored_message_free);
  for (guint i = 0; texts && texts[i]; i++) {
    HanashiStoredMessage *m = g_new0 (HanashiStoredMessage, 1);
    m->id = i + 1;
    m->parent_id = i;
    m->alternative_group = i + 1;
    m->role = g_strdup (i % 2 ? "assistant" : "user");
    m->text = g_strdup (texts[i]);
    m->created = updated;
    m->complete = TRUE;
    g_ptr_array_add (messages, m);
  }
  g_autoptr(GError) error = NULL;
  gint64 id = hanashi_store_insert_conversation (store, &c, messages, FALSE, &error);
  g_assert_no_error (error);
  return id;
}

static void
on_activated (HanashiSidebar *sidebar, gint64 id, Fixture *f)
{
  (void) sidebar;
  f->activated = id;
  f->n_activated++;
}

static void
on_deleted (HanashiSidebar *sidebar, gint64 id, Fixture *f)
{
  (void) sidebar;
  f->deleted = id;
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  (void) data;
  static guint counter;
  g_autofree char *name = g_strdup_printf ("sidebar-%u", counter++);
  g_autofree char *path = g_build_filename (g_get_user_data_dir (), name, "hanashi.db", NULL);
  g_autoptr(GError) error = NULL;
  f->store = hanashi_store_new (path, &error);
  g_assert_no_error (error);
  const char *const a[] = { "How do I boil an egg?", "Put it in boiling water\nfor seven minutes.", NULL };
  const char *const b[] = { "Summer sale: 50% off", NULL };
  const char *const c[] = { "We sold 500 items", "Great news", NULL };
  /* Real recent times so the screenshots read like a day of use. */
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  insert (f->store, "Eggs", now - 5 * 86400, a);
  insert (f->store, "Sale", now - 600, b);
  insert (f->store, "", now - 86400, c);

  f->window = adw_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (f->window), 360, 560);
  GtkWidget *overlay = adw_toast_overlay_new ();
  f->sidebar = HANASHI_SIDEBAR (hanashi_sidebar_new ());
  adw_toast_overlay_set_child (ADW_TOAST_OVERLAY (overlay), GTK_WIDGET (f->sidebar));
  adw_window_set_content (ADW_WINDOW (f->window), overlay);
  hanashi_sidebar_set_store (f->sidebar, f->store);
  g_signal_connect (f->sidebar, "conversation-activated", G_CALLBACK (on_activated), f);
  g_signal_connect (f->sidebar, "conversation-deleted", G_CALLBACK (on_deleted), f);
  gtk_window_present (GTK_WINDOW (f->window));
  test_screenshot_settle ();
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  (void) data;
  gtk_window_destroy (GTK_WINDOW (f->window));
  test_screenshot_settle ();
  g_assert_finalize_object (f->store);
}

static char *
titles (HanashiSidebar *sidebar)
{
  GListModel *model = hanashi_sidebar_get_model (sidebar);
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < g_list_model_get_n_items (model); i++) {
    g_autoptr(HanashiConversationItem) item = g_list_model_get_item (model, i);
    g_string_append_printf (s, "%s%s", i ? "|" : "", hanashi_conversation_item_get_title (item));
  }
  return g_string_free (s, FALSE);
}

static HanashiConversationItem *
item_at (HanashiSidebar *sidebar, guint position)
{
  return g_list_model_get_item (hanashi_sidebar_get_model (sidebar), position);
}

static void
collect_rows (GtkWidget *widget, GPtrArray *rows)
{
  if (HANASHI_IS_CONVERSATION_ROW (widget))
    g_ptr_array_add (rows, widget);
  for (GtkWidget *child = gtk_widget_get_first_child (widget); child; child = gtk_widget_get_next_sibling (child))
    collect_rows (child, rows);
}

static void
test_order (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autofree char *order = titles (f->sidebar);
  g_assert_cmpstr (order, ==, "Sale||Eggs");
  g_autoptr(HanashiConversationItem) first = item_at (f->sidebar, 0);
  g_assert_cmpstr (hanashi_conversation_item_get_snippet (first), ==, "Summer sale: 50% off");
  g_autoptr(HanashiConversationItem) last = item_at (f->sidebar, 2);
  /* The newest message, on one line. */
  g_assert_cmpstr (hanashi_conversation_item_get_snippet (last), ==, "Put it in boiling water for seven minutes.");
  g_assert_cmpint (hanashi_conversation_item_get_updated (last), <, hanashi_conversation_item_get_updated (first) - 4 * 86400);

  /* The rows on screen show the titles; an untitled chat reads "New Chat". */
  g_autoptr(GPtrArray) rows = g_ptr_array_new ();
  collect_rows (f->window, rows);
  g_assert_cmpuint (rows->len, ==, 3);
  g_autoptr(GPtrArray) shown = g_ptr_array_new ();
  for (guint i = 0; i < rows->len; i++)
    g_ptr_array_add (shown, (gpointer) hanashi_conversation_row_get_title_text (g_ptr_array_index (rows, i)));
  g_assert_true (g_ptr_array_find_with_equal_func (shown, "New Chat", g_str_equal, NULL));
  g_assert_true (g_ptr_array_find_with_equal_func (shown, "Eggs", g_str_equal, NULL));
  g_assert_true (g_ptr_array_find_with_equal_func (shown, "Sale", g_str_equal, NULL));

  /* A new message moves its conversation to the top. */
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiConversationItem) eggs = item_at (f->sidebar, 2);
  hanashi_store_add_message (f->store, hanashi_conversation_item_get_id (eggs), 2, 0, "user", "And a soft one?", TRUE, &error);
  g_assert_no_error (error);
  hanashi_sidebar_reload (f->sidebar);
  g_autofree char *order2 = titles (f->sidebar);
  g_assert_cmpstr (order2, ==, "Eggs|Sale|");
  g_autoptr(HanashiConversationItem) top = item_at (f->sidebar, 0);
  g_assert_cmpstr (hanashi_conversation_item_get_snippet (top), ==, "And a soft one?");

  /* One chat moves up while another appears lower down: the reload must not take it
   * for a single move. */
  g_autoptr(HanashiConversationItem) sale = item_at (f->sidebar, 1);
  hanashi_store_add_message (f->store, hanashi_conversation_item_get_id (sale), 1, 0, "user", "Still on?", TRUE, &error);
  g_assert_no_error (error);
  insert (f->store, "Later", g_get_real_time () / G_USEC_PER_SEC - 3600, NULL);
  hanashi_sidebar_reload (f->sidebar);
  g_autofree char *order3 = titles (f->sidebar);
  g_assert_cmpstr (order3, ==, "Sale|Eggs|Later|");
}

typedef struct {
  const char *want;
  gboolean done;
} SearchWait;

/* Replacing the text passes through "" (emitted at once); wait for the text asked for. */
static void
on_search_changed (GtkSearchEntry *entry, SearchWait *wait)
{
  if (g_strcmp0 (gtk_editable_get_text (GTK_EDITABLE (entry)), wait->want) == 0)
    wait->done = TRUE;
}

static void
search_for (Fixture *f, const char *text)
{
  hanashi_sidebar_focus_search (f->sidebar);
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (f->sidebar));
  GtkWidget *focus = gtk_root_get_focus (root);
  g_assert_nonnull (focus);
  GtkWidget *search_entry = gtk_widget_get_ancestor (focus, GTK_TYPE_SEARCH_ENTRY);
  g_assert_nonnull (search_entry);
  SearchWait wait = { text, FALSE };
  gulong handler = g_signal_connect_after (search_entry, "search-changed", G_CALLBACK (on_search_changed), &wait);
  gtk_editable_set_text (GTK_EDITABLE (search_entry), text);
  /* The entry debounces; wait for its signal rather than a fixed time. */
  while (!wait.done)
    g_main_context_iteration (NULL, TRUE);
  g_signal_handler_disconnect (search_entry, handler);
}

static void
test_search (Fixture *f, gconstpointer data)
{
  (void) data;
  search_for (f, "boiling");
  g_autofree char *a = titles (f->sidebar);
  g_assert_cmpstr (a, ==, "Eggs");
  search_for (f, "SALE");
  g_autofree char *b = titles (f->sidebar);
  g_assert_cmpstr (b, ==, "Sale");
  /* % and _ are literal, not wildcards: "50%" is not in "500 items". */
  search_for (f, "50%");
  g_autofree char *c = titles (f->sidebar);
  g_assert_cmpstr (c, ==, "Sale");
  search_for (f, "50");
  g_autofree char *d = titles (f->sidebar);
  g_assert_cmpstr (d, ==, "Sale|");
  search_for (f, "nothing like this");
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_sidebar_get_model (f->sidebar)), ==, 0);
  test_screenshot (f->window, "sidebar-no-results");
  search_for (f, "");
  g_autofree char *e = titles (f->sidebar);
  g_assert_cmpstr (e, ==, "Sale||Eggs");
}

static void
test_rename (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr(HanashiConversationItem) item = item_at (f->sidebar, 2);
  gint64 id = hanashi_conversation_item_get_id (item);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f->sidebar), "sidebar.rename", "x", id));
  test_screenshot_settle ();
  GtkWidget *dialog = GTK_WIDGET (find_toplevel (ADW_TYPE_MESSAGE_DIALOG));
  g_assert_nonnull (dialog);
  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  GtkWidget *entry = adw_message_dialog_get_extra_child (ADW_MESSAGE_DIALOG (dialog));
  g_assert_cmpstr (gtk_editable_get_text (GTK_EDITABLE (entry)), ==, "Eggs");
  gtk_editable_set_text (GTK_EDITABLE (entry), "  Boiled eggs  ");
  test_screenshot (dialog, "sidebar-rename");
  /* What the Rename button does; the button also closes the dialog, done here by hand. */
  adw_message_dialog_response (ADW_MESSAGE_DIALOG (dialog), "rename");
  G_GNUC_END_IGNORE_DEPRECATIONS
  gtk_window_destroy (GTK_WINDOW (dialog));
  test_screenshot_settle ();
  g_assert_null (find_toplevel (ADW_TYPE_MESSAGE_DIALOG));
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStoredConversation) c = hanashi_store_dup_conversation (f->store, id, &error);
  g_assert_cmpstr (c->title, ==, "Boiled eggs");
  g_autofree char *order = titles (f->sidebar);
  g_assert_cmpstr (order, ==, "Sale||Boiled eggs");
}

static void
test_delete_undo (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiConversationItem) item = item_at (f->sidebar, 2);
  gint64 id = hanashi_conversation_item_get_id (item);
  g_autofree char *before = hanashi_conversation_export_json (f->store, id, &error);
  g_assert_no_error (error);
  g_assert_true (hanashi_sidebar_select (f->sidebar, id));

  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f->sidebar), "sidebar.delete", "x", id));
  g_assert_cmpint (f->deleted, ==, id);
  g_autofree char *order = titles (f->sidebar);
  g_assert_cmpstr (order, ==, "Sale|");
  g_assert_cmpint (hanashi_sidebar_get_selected_id (f->sidebar), ==, 0);
  g_assert_null (hanashi_store_dup_conversation (f->store, id, &error));
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_autoptr(GPtrArray) gone = hanashi_store_list_messages (f->store, id, &error);
  g_assert_cmpuint (gone->len, ==, 0);
  test_screenshot (f->window, "sidebar-deleted");

  /* The toast's Undo button brings back the same ids and every field. */
  GtkWidget *undo = find_button (f->window, "Undo");
  g_assert_nonnull (undo);
  g_signal_emit_by_name (undo, "clicked");
  g_autofree char *after = hanashi_conversation_export_json (f->store, id, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (after, ==, before);
  g_autofree char *order2 = titles (f->sidebar);
  g_assert_cmpstr (order2, ==, "Sale||Eggs");
  /* A second undo finds nothing to restore and changes nothing. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f->sidebar), "sidebar.undo-delete", "x", id));
  g_autofree char *order3 = titles (f->sidebar);
  g_assert_cmpstr (order3, ==, "Sale||Eggs");
  g_assert_cmpint (f->n_activated, ==, 0);
}

static void
test_activation (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr(HanashiConversationItem) item = item_at (f->sidebar, 1);
  gint64 id = hanashi_conversation_item_get_id (item);
  /* The window selecting a chat it opened itself is not a user choice. */
  g_assert_true (hanashi_sidebar_select (f->sidebar, id));
  g_assert_cmpint (f->n_activated, ==, 0);
  g_assert_cmpint (hanashi_sidebar_get_selected_id (f->sidebar), ==, id);
  g_assert_false (hanashi_sidebar_select (f->sidebar, 999));
  g_assert_cmpint (hanashi_sidebar_get_selected_id (f->sidebar), ==, 0);

  /* A selection made in the list view (click or keyboard) activates. */
  g_autoptr(GPtrArray) rows = g_ptr_array_new ();
  collect_rows (GTK_WIDGET (f->sidebar), rows);
  GtkListView *view = GTK_LIST_VIEW (gtk_widget_get_ancestor (g_ptr_array_index (rows, 0), GTK_TYPE_LIST_VIEW));
  GtkSelectionModel *selection = gtk_list_view_get_model (view);
  gtk_selection_model_select_item (selection, 2, TRUE);
  g_autoptr(HanashiConversationItem) third = item_at (f->sidebar, 2);
  g_assert_cmpint (f->n_activated, ==, 1);
  g_assert_cmpint (f->activated, ==, hanashi_conversation_item_get_id (third));

  /* A reload keeps the selection without activating again. */
  hanashi_sidebar_reload (f->sidebar);
  g_assert_cmpint (hanashi_sidebar_get_selected_id (f->sidebar), ==, hanashi_conversation_item_get_id (third));
  g_assert_cmpint (f->n_activated, ==, 1);

  /* Enter on a row (the list view's activate) opens it as well. */
  g_signal_emit_by_name (view, "activate", 0);
  g_autoptr(HanashiConversationItem) top = item_at (f->sidebar, 0);
  g_assert_cmpint (f->n_activated, ==, 2);
  g_assert_cmpint (f->activated, ==, hanashi_conversation_item_get_id (top));
}

static void
on_async_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  (void) source;
  *(GAsyncResult **) user_data = g_object_ref (result);
}

static GAsyncResult *
wait_for (GAsyncResult **slot)
{
  while (!*slot)
    g_main_context_iteration (NULL, TRUE);
  return *slot;
}

static void
test_export_import (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiConversationItem) item = item_at (f->sidebar, 2);
  gint64 id = hanashi_conversation_item_get_id (item);
  g_autofree char *dir = g_build_filename (g_get_user_cache_dir (), "export", NULL);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  g_autofree char *json_path = g_build_filename (dir, "eggs.json", NULL);
  g_autofree char *md_path = g_build_filename (dir, "eggs.md", NULL);
  g_autoptr(GFile) json_file = g_file_new_for_path (json_path);
  g_autoptr(GFile) md_file = g_file_new_for_path (md_path);

  g_autoptr(GAsyncResult) r1 = NULL;
  hanashi_sidebar_export_async (f->sidebar, id, HANASHI_EXPORT_MARKDOWN, md_file, NULL, on_async_done, &r1);
  g_assert_true (hanashi_sidebar_export_finish (f->sidebar, wait_for (&r1), &error));
  g_assert_no_error (error);
  g_autofree char *md = NULL;
  g_assert_true (g_file_get_contents (md_path, &md, NULL, NULL));
  g_assert_cmpstr (md, ==, "# Eggs\n\n## User\n\nHow do I boil an egg?\n\n## Assistant\n\n"
                           "Put it in boiling water\nfor seven minutes.\n");

  g_autoptr(GAsyncResult) r2 = NULL;
  hanashi_sidebar_export_async (f->sidebar, id, HANASHI_EXPORT_JSON, json_file, NULL, on_async_done, &r2);
  g_assert_true (hanashi_sidebar_export_finish (f->sidebar, wait_for (&r2), &error));
  g_assert_no_error (error);

  g_autoptr(GAsyncResult) r3 = NULL;
  hanashi_sidebar_import_async (f->sidebar, json_file, NULL, on_async_done, &r3);
  gint64 imported = hanashi_sidebar_import_finish (f->sidebar, wait_for (&r3), &error);
  g_assert_no_error (error);
  g_assert_cmpint (imported, ==, 4);
  g_assert_cmpint (f->activated, ==, 4);
  g_assert_cmpint (hanashi_sidebar_get_selected_id (f->sidebar), ==, 4);
  g_autofree char *order = titles (f->sidebar);
  /* The import keeps the original's last activity, so it sorts beside it (newer id first). */
  g_assert_cmpstr (order, ==, "Sale||Eggs|Eggs");
  g_autoptr(GPtrArray) messages = hanashi_store_list_messages (f->store, imported, &error);
  g_assert_cmpuint (messages->len, ==, 2);

  /* A bad file: an error in words, and nothing added. */
  g_autofree char *bad_path = g_build_filename (dir, "bad.json", NULL);
  g_assert_true (g_file_set_contents (bad_path, "{\"format\":\"hanashi-conversation\",\"version\":1}", -1, NULL));
  g_autoptr(GFile) bad_file = g_file_new_for_path (bad_path);
  g_autoptr(GAsyncResult) r4 = NULL;
  hanashi_sidebar_import_async (f->sidebar, bad_file, NULL, on_async_done, &r4);
  g_assert_cmpint (hanashi_sidebar_import_finish (f->sidebar, wait_for (&r4), &error), ==, 0);
  g_assert_error (error, HANASHI_CONVERSATION_IO_ERROR, HANASHI_CONVERSATION_IO_ERROR_INVALID);
  g_assert_cmpstr (error->message, ==, "The field “messages” is missing in the conversation.");
  g_clear_error (&error);
  g_autofree char *order2 = titles (f->sidebar);
  g_assert_cmpstr (order2, ==, "Sale||Eggs|Eggs");

  /* A missing file fails with GIO's error. */
  g_autofree char *missing_path = g_build_filename (dir, "missing.json", NULL);
  g_autoptr(GFile) missing = g_file_new_for_path (missing_path);
  g_autoptr(GAsyncResult) r5 = NULL;
  hanashi_sidebar_import_async (f->sidebar, missing, NULL, on_async_done, &r5);
  g_assert_cmpint (hanashi_sidebar_import_finish (f->sidebar, wait_for (&r5), &error), ==, 0);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
}

static void
test_relative_time (void)
{
  g_autoptr(GDateTime) now = g_date_time_new_utc (2026, 11, 24, 12, 0, 0);
  gint64 n = g_date_time_to_unix (now);
  const struct { gint64 then; const char *text; } cases[] = {
    { n - 3 * 3600 + 5 * 60, "09:05" },
    { n - 12 * 3600, "00:00" },
    { n - 12 * 3600 - 1, "Yesterday" },
    { n - 36 * 3600, "Yesterday" },
    { n - 3 * 86400, "Saturday" },
    { n - 10 * 86400, "11/14/26" },
    { n + 60, "12:01" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree char *text = hanashi_format_relative_time (cases[i].then, n);
    g_assert_cmpstr (text, ==, cases[i].text);
  }
}

/* Random edits; after every reload the model must list exactly what the store lists. */
static void
test_reload_matches_store (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr(GRand) rand = g_rand_new_with_seed (7);
  g_autoptr(GError) error = NULL;
  for (int step = 0; step < 300; step++) {
    /* One to three edits per reload, as when several chats change between two reloads. */
    for (int edits = g_rand_int_range (rand, 1, 4); edits > 0; edits--) {
      g_autoptr(GPtrArray) now = hanashi_store_list_summaries (f->store, NULL, &error);
      g_assert_no_error (error);
      gint64 some = now->len
        ? ((HanashiConversationSummary *) g_ptr_array_index (now, g_rand_int_range (rand, 0, now->len)))->id : 0;
      int what = g_rand_int_range (rand, 0, 5);
      g_autofree char *text = g_strdup_printf ("step %d.%d", step, edits);
      if (what == 0 || !some) {
        insert (f->store, text, g_get_real_time () / G_USEC_PER_SEC - g_rand_int_range (rand, 0, 100000), NULL);
      } else if (what == 1 || what == 2) {
        hanashi_store_add_message (f->store, some, 0, 0, "user", text, TRUE, &error);
      } else if (what == 3) {
        hanashi_store_rename_conversation (f->store, some, text, &error);
      } else {
        hanashi_store_delete_conversation (f->store, some, &error);
      }
      g_assert_no_error (error);
    }
    hanashi_sidebar_reload (f->sidebar);

    g_autoptr(GPtrArray) expected = hanashi_store_list_summaries (f->store, NULL, &error);
    GListModel *model = hanashi_sidebar_get_model (f->sidebar);
    g_assert_cmpuint (g_list_model_get_n_items (model), ==, expected->len);
    for (guint i = 0; i < expected->len; i++) {
      HanashiConversationSummary *e = g_ptr_array_index (expected, i);
      g_autoptr(HanashiConversationItem) item = g_list_model_get_item (model, i);
      g_assert_cmpint (hanashi_conversation_item_get_id (item), ==, e->id);
      g_assert_cmpstr (hanashi_conversation_item_get_title (item), ==, e->title);
      g_assert_cmpint (hanashi_conversation_item_get_updated (item), ==, e->updated);
    }
  }
}

static void
test_screenshots (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr(HanashiConversationItem) item = item_at (f->sidebar, 0);
  hanashi_sidebar_select (f->sidebar, hanashi_conversation_item_get_id (item));
  test_screenshot (f->window, "sidebar");
  hanashi_sidebar_set_store (f->sidebar, NULL);
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_sidebar_get_model (f->sidebar)), ==, 0);
  test_screenshot (f->window, "sidebar-empty");
}

int
main (int argc, char **argv)
{
  test_xdg_setup ();
  /* Fixed zone and locale so times and dates read the same everywhere. */
  g_setenv ("TZ", "UTC", TRUE);
  g_setenv ("LC_ALL", "C.UTF-8", TRUE);
  g_test_init (&argc, &argv, NULL);
  gtk_init ();
  adw_init ();
  g_test_add_func ("/sidebar/relative-time", test_relative_time);
#define ADD(path, fn) g_test_add ("/sidebar/" path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
  ADD ("order", test_order);
  ADD ("search", test_search);
  ADD ("rename", test_rename);
  ADD ("delete-undo", test_delete_undo);
  ADD ("activation", test_activation);
  ADD ("export-import", test_export_import);
  ADD ("reload-matches-store", test_reload_matches_store);
  ADD ("screenshots", test_screenshots);
  return g_test_run ();
}
