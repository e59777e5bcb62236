/* hanashi-sidebar.c — the conversations sidebar.  The list is a GListStore of
 * HanashiConversationItem rebuilt from one store query on every reload: a thousand rows
 * cost a few milliseconds (docs/conversations.md), far less than keeping a diff in sync.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-sidebar"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-conversation-io.h"
#include "hanashi-conversation-item.h"
#include "hanashi-conversation-row.h"
#include "hanashi-sidebar.h"

struct _HanashiSidebar {
  GtkWidget parent_instance;

  /* Template widgets */
  AdwToastOverlay *own_toast_overlay;
  AdwHeaderBar *header_bar;
  GtkSearchBar *search_bar;
  GtkSearchEntry *search_entry;
  GtkToggleButton *search_button;
  GtkStack *stack;
  GtkListView *list_view;
  AdwStatusPage *empty_page;

  /* Owned */
  HanashiStore *store;
  GListStore *items;
  GtkSingleSelection *selection;
  GHashTable *deleted;   /* id → HanashiConversationData kept for Undo */
  char *query;
  gboolean quiet;        /* selection changes made by code, not by the user */
};

G_DEFINE_FINAL_TYPE (HanashiSidebar, hanashi_sidebar, GTK_TYPE_WIDGET)

enum {
  PROP_0,
  PROP_STORE,
  PROP_SHOW_WINDOW_BUTTONS,
  N_PROPS
};
static GParamSpec *properties[N_PROPS];

enum {
  SIGNAL_CONVERSATION_ACTIVATED,
  SIGNAL_CONVERSATION_DELETED,
  N_SIGNALS
};
static guint signals[N_SIGNALS];

static void
show_toast (HanashiSidebar *self, AdwToast *toast)
{
  GtkWidget *overlay = gtk_widget_get_ancestor (GTK_WIDGET (self), ADW_TYPE_TOAST_OVERLAY);
  adw_toast_overlay_add_toast (overlay ? ADW_TOAST_OVERLAY (overlay) : self->own_toast_overlay, toast);
}

static void
show_message (HanashiSidebar *self, const char *text)
{
  show_toast (self, adw_toast_new (text));
}

static HanashiConversationItem *
find_item (HanashiSidebar *self, gint64 id, guint *position)
{
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->items));
  for (guint i = 0; i < n; i++) {
    g_autoptr(HanashiConversationItem) item = g_list_model_get_item (G_LIST_MODEL (self->items), i);
    if (hanashi_conversation_item_get_id (item) == id) {
      if (position)
        *position = i;
      return item;
    }
  }
  return NULL;
}

gboolean
hanashi_sidebar_select (HanashiSidebar *self, gint64 id)
{
  g_return_val_if_fail (HANASHI_IS_SIDEBAR (self), FALSE);
  guint position = GTK_INVALID_LIST_POSITION;
  gboolean found = id != 0 && find_item (self, id, &position) != NULL;
  self->quiet = TRUE;
  gtk_single_selection_set_selected (self->selection, found ? position : GTK_INVALID_LIST_POSITION);
  self->quiet = FALSE;
  return found;
}

gint64
hanashi_sidebar_get_selected_id (HanashiSidebar *self)
{
  g_return_val_if_fail (HANASHI_IS_SIDEBAR (self), 0);
  HanashiConversationItem *item = gtk_single_selection_get_selected_item (self->selection);
  return item ? hanashi_conversation_item_get_id (item) : 0;
}

/* When the @new_n new items from @start are the @n old ones with one chat taken from
 * further down and put first (it got a message), returns that chat's old position; else
 * G_MAXUINT. */
static guint
find_single_move (GListModel *old, guint start, guint n, GPtrArray *items, guint new_n)
{
  if (n < 2 || new_n != n)
    return G_MAXUINT;
  HanashiConversationItem *first = g_ptr_array_index (items, start);
  gint64 id = hanashi_conversation_item_get_id (first);
  guint from = G_MAXUINT;
  for (guint i = 0, j = start + 1; i < n; i++) {
    g_autoptr(HanashiConversationItem) a = g_list_model_get_item (old, start + i);
    if (hanashi_conversation_item_get_id (a) == id && from == G_MAXUINT) {
      from = start + i;
      continue;
    }
    if (j >= start + n || !hanashi_conversation_item_same (a, g_ptr_array_index (items, j)))
      return G_MAXUINT;
    j++;
  }
  return from;
}

void
hanashi_sidebar_reload (HanashiSidebar *self)
{
  g_return_if_fail (HANASHI_IS_SIDEBAR (self));
  gint64 selected = hanashi_sidebar_get_selected_id (self);
  g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func (g_object_unref);
  if (self->store) {
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) summaries = hanashi_store_list_summaries (self->store, self->query, &error);
    if (!summaries)
      show_message (self, error->message);
    for (guint i = 0; summaries && i < summaries->len; i++)
      g_ptr_array_add (items, hanashi_conversation_item_new (g_ptr_array_index (summaries, i)));
  }
  /* Replace only what changed between the unchanged head and tail: a new message moves
   * one chat to the top, and every replaced item costs the list view a fresh row. */
  GListModel *old = G_LIST_MODEL (self->items);
  guint old_n = g_list_model_get_n_items (old), head = 0, tail = 0;
  while (head < old_n && head < items->len) {
    g_autoptr(HanashiConversationItem) a = g_list_model_get_item (old, head);
    if (!hanashi_conversation_item_same (a, g_ptr_array_index (items, head)))
      break;
    head++;
  }
  while (tail < old_n - head && tail < items->len - head) {
    g_autoptr(HanashiConversationItem) a = g_list_model_get_item (old, old_n - 1 - tail);
    if (!hanashi_conversation_item_same (a, g_ptr_array_index (items, items->len - 1 - tail)))
      break;
    tail++;
  }
  self->quiet = TRUE;
  guint moved_from = find_single_move (old, head, old_n - head - tail, items, items->len - head - tail);
  if (moved_from != G_MAXUINT) {
    g_list_store_remove (self->items, moved_from);
    g_list_store_insert (self->items, head, g_ptr_array_index (items, head));
  } else if (head < old_n || head < items->len) {
    g_list_store_splice (self->items, head, old_n - head - tail, items->pdata + head, items->len - head - tail);
  }
  self->quiet = FALSE;
  hanashi_sidebar_select (self, selected);

  gboolean searching = self->query && *self->query;
  if (items->len > 0) {
    gtk_stack_set_visible_child_name (self->stack, "list");
  } else {
    adw_status_page_set_title (self->empty_page, searching ? _("No Results") : _("No Chats"));
    adw_status_page_set_description (self->empty_page,
      searching ? _("No chat title or message contains this text.") : _("Start a new chat to see it here."));
    adw_status_page_set_icon_name (self->empty_page, searching ? "system-search-symbolic" : "chat-message-new-symbolic");
    gtk_stack_set_visible_child_name (self->stack, "empty");
  }
}

void
hanashi_sidebar_set_store (HanashiSidebar *self, HanashiStore *store)
{
  g_return_if_fail (HANASHI_IS_SIDEBAR (self));
  g_return_if_fail (!store || HANASHI_IS_STORE (store));
  if (!g_set_object (&self->store, store))
    return;
  g_hash_table_remove_all (self->deleted);
  hanashi_sidebar_reload (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STORE]);
}

HanashiStore *
hanashi_sidebar_get_store (HanashiSidebar *self)
{
  g_return_val_if_fail (HANASHI_IS_SIDEBAR (self), NULL);
  return self->store;
}

GListModel *
hanashi_sidebar_get_model (HanashiSidebar *self)
{
  g_return_val_if_fail (HANASHI_IS_SIDEBAR (self), NULL);
  return G_LIST_MODEL (self->items);
}

void
hanashi_sidebar_focus_search (HanashiSidebar *self)
{
  g_return_if_fail (HANASHI_IS_SIDEBAR (self));
  gtk_search_bar_set_search_mode (self->search_bar, TRUE);
  gtk_widget_grab_focus (GTK_WIDGET (self->search_entry));
}

static void
on_search_changed (GtkSearchEntry *entry, HanashiSidebar *self)
{
  g_free (self->query);
  self->query = g_strdup (gtk_editable_get_text (GTK_EDITABLE (entry)));
  hanashi_sidebar_reload (self);
}

static void
on_search_mode_changed (HanashiSidebar *self)
{
  /* Closing the bar shows every chat again, as the hidden entry no longer filters. */
  if (!gtk_search_bar_get_search_mode (self->search_bar))
    gtk_editable_set_text (GTK_EDITABLE (self->search_entry), "");
}

static void
on_selection_changed (HanashiSidebar *self)
{
  if (self->quiet)
    return;
  gint64 id = hanashi_sidebar_get_selected_id (self);
  if (id != 0)
    g_signal_emit (self, signals[SIGNAL_CONVERSATION_ACTIVATED], 0, id);
}

static void
on_list_activate (GtkListView *view, guint position, HanashiSidebar *self)
{
  (void) view;
  g_autoptr(HanashiConversationItem) item = g_list_model_get_item (G_LIST_MODEL (self->items), position);
  if (item)
    g_signal_emit (self, signals[SIGNAL_CONVERSATION_ACTIVATED], 0, hanashi_conversation_item_get_id (item));
}

/* ---- rename ---- */

G_GNUC_BEGIN_IGNORE_DEPRECATIONS
/* AdwMessageDialog is what libadwaita 1.2 has (AdwAlertDialog arrived in 1.5). */
static void
on_rename_response (AdwMessageDialog *dialog, const char *response, HanashiSidebar *self)
{
  if (g_strcmp0 (response, "rename") != 0 || !self->store)
    return;
  GtkEditable *entry = GTK_EDITABLE (adw_message_dialog_get_extra_child (dialog));
  gint64 id = GPOINTER_TO_SIZE (g_object_get_data (G_OBJECT (dialog), "conversation-id"));
  g_autofree char *title = g_strstrip (g_strdup (gtk_editable_get_text (entry)));
  g_autoptr(GError) error = NULL;
  if (!hanashi_store_rename_conversation (self->store, id, title, &error))
    show_message (self, error->message);
  hanashi_sidebar_reload (self);
}

static void
rename_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  HanashiSidebar *self = HANASHI_SIDEBAR (widget);
  (void) action_name;
  gint64 id = g_variant_get_int64 (parameter);
  HanashiConversationItem *item = find_item (self, id, NULL);
  if (!item || !self->store)
    return;
  GtkRoot *root = gtk_widget_get_root (widget);
  GtkWidget *dialog = adw_message_dialog_new (GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                              _("Rename Chat"), NULL);
  GtkWidget *entry = gtk_entry_new ();
  gtk_editable_set_text (GTK_EDITABLE (entry), hanashi_conversation_item_get_title (item));
  gtk_entry_set_activates_default (GTK_ENTRY (entry), TRUE);
  gtk_accessible_update_property (GTK_ACCESSIBLE (entry), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Chat title"), -1);
  adw_message_dialog_set_extra_child (ADW_MESSAGE_DIALOG (dialog), entry);
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog),
                                    "cancel", _("_Cancel"),
                                    "rename", _("_Rename"),
                                    NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "rename", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "rename");
  adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  g_object_set_data (G_OBJECT (dialog), "conversation-id", GSIZE_TO_POINTER ((gsize) id));
  g_signal_connect_object (dialog, "response", G_CALLBACK (on_rename_response), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
  gtk_widget_grab_focus (entry);
}
G_GNUC_END_IGNORE_DEPRECATIONS

/* ---- delete and undo ---- */

static void
undo_delete_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  HanashiSidebar *self = HANASHI_SIDEBAR (widget);
  (void) action_name;
  gint64 id = g_variant_get_int64 (parameter);
  HanashiConversationData *data = g_hash_table_lookup (self->deleted, &id);
  if (!data || !self->store)
    return;
  g_autoptr(GError) error = NULL;
  /* The same ids come back, so anything that remembered the conversation finds it again. */
  if (!hanashi_store_insert_conversation (self->store, data->conversation, data->messages, TRUE, &error))
    show_message (self, error->message);
  g_hash_table_remove (self->deleted, &id);
  hanashi_sidebar_reload (self);
}

typedef struct {
  HanashiSidebar *self; /* weak */
  gint64 id;
} ToastData;

static void
toast_data_free (gpointer data, GClosure *closure)
{
  (void) closure;
  ToastData *td = data;
  g_clear_weak_pointer (&td->self);
  g_free (td);
}

static void
on_undo_clicked (AdwToast *toast, ToastData *td)
{
  (void) toast;
  if (td->self)
    gtk_widget_activate_action (GTK_WIDGET (td->self), "sidebar.undo-delete", "x", td->id);
}

static void
on_toast_dismissed (AdwToast *toast, ToastData *td)
{
  (void) toast;
  /* Undo comes before dismissal; after it the snapshot is no longer needed. */
  if (td->self)
    g_hash_table_remove (td->self->deleted, &td->id);
}

static void
delete_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  HanashiSidebar *self = HANASHI_SIDEBAR (widget);
  (void) action_name;
  gint64 id = g_variant_get_int64 (parameter);
  if (!self->store)
    return;
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiConversationData) data = hanashi_conversation_data_load (self->store, id, &error);
  if (!data || !hanashi_store_delete_conversation (self->store, id, &error)) {
    show_message (self, error->message);
    return;
  }
  const char *title = data->conversation->title && *data->conversation->title
    ? data->conversation->title : _("New Chat");
  /* Translators: %s is a chat title */
  g_autofree char *text = g_strdup_printf (_("“%s” deleted"), title);
  gint64 *key = g_memdup2 (&id, sizeof id);
  g_hash_table_replace (self->deleted, key, g_steal_pointer (&data));

  gboolean was_selected = hanashi_sidebar_get_selected_id (self) == id;
  hanashi_sidebar_reload (self);
  if (was_selected)
    hanashi_sidebar_select (self, 0);
  g_signal_emit (self, signals[SIGNAL_CONVERSATION_DELETED], 0, id);

  AdwToast *toast = adw_toast_new (text);
  adw_toast_set_button_label (toast, _("_Undo"));
  adw_toast_set_priority (toast, ADW_TOAST_PRIORITY_HIGH);
  ToastData *td = g_new0 (ToastData, 1);
  td->id = id;
  g_set_weak_pointer (&td->self, self);
  g_signal_connect_data (toast, "button-clicked", G_CALLBACK (on_undo_clicked), td, NULL, 0);
  g_signal_connect_data (toast, "dismissed", G_CALLBACK (on_toast_dismissed), td, toast_data_free, 0);
  show_toast (self, toast);
}

/* ---- export ---- */

static void
on_export_written (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  if (!g_file_replace_contents_finish (G_FILE (source), result, NULL, &error))
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

void
hanashi_sidebar_export_async (HanashiSidebar *self, gint64 id, HanashiExportFormat format, GFile *file,
                              GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (HANASHI_IS_SIDEBAR (self));
  g_return_if_fail (G_IS_FILE (file));
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, hanashi_sidebar_export_async);
  if (!self->store) {
    g_task_return_new_error (task, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND, _("No conversation database"));
    return;
  }
  GError *error = NULL;
  /* Reading one conversation from SQLite is quick (docs/conversations.md); the file write is not. */
  char *text = format == HANASHI_EXPORT_JSON
    ? hanashi_conversation_export_json (self->store, id, &error)
    : hanashi_conversation_export_markdown (self->store, id, &error);
  if (!text) {
    g_task_return_error (task, error);
    return;
  }
  g_autoptr(GBytes) bytes = g_bytes_new_take (text, strlen (text));
  g_file_replace_contents_bytes_async (file, bytes, NULL, FALSE, G_FILE_CREATE_REPLACE_DESTINATION,
                                       cancellable, on_export_written, g_steal_pointer (&task));
}

gboolean
hanashi_sidebar_export_finish (HanashiSidebar *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

static void
on_export_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  HanashiSidebar *self = HANASHI_SIDEBAR (source);
  g_autoptr(GFile) file = user_data;
  g_autoptr(GError) error = NULL;
  g_autofree char *name = g_file_get_basename (file);
  if (!hanashi_sidebar_export_finish (self, result, &error)) {
    /* Translators: the first %s is a file name, the second the reason */
    g_autofree char *text = g_strdup_printf (_("Could not save “%s”: %s"), name, error->message);
    show_message (self, text);
    return;
  }
  /* Translators: %s is a file name */
  g_autofree char *text = g_strdup_printf (_("Saved “%s”"), name);
  show_message (self, text);
}

G_GNUC_BEGIN_IGNORE_DEPRECATIONS
/* GtkFileChooserNative is what GTK 4.8 has (GtkFileDialog arrived in 4.10). */
static void
on_export_chosen (GtkNativeDialog *dialog, int response, HanashiSidebar *self)
{
  if (response == GTK_RESPONSE_ACCEPT) {
    GFile *file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
    gint64 id = *(gint64 *) g_object_get_data (G_OBJECT (dialog), "conversation-id");
    HanashiExportFormat format = GPOINTER_TO_INT (g_object_get_data (G_OBJECT (dialog), "format"));
    if (file)
      hanashi_sidebar_export_async (self, id, format, file, NULL, on_export_done, file);
  }
  gtk_native_dialog_destroy (dialog);
  g_object_unref (dialog);
}

static void
export_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  HanashiSidebar *self = HANASHI_SIDEBAR (widget);
  gint64 id = g_variant_get_int64 (parameter);
  HanashiExportFormat format = g_str_equal (action_name, "sidebar.export-json")
    ? HANASHI_EXPORT_JSON : HANASHI_EXPORT_MARKDOWN;
  HanashiConversationItem *item = find_item (self, id, NULL);
  if (!item)
    return;
  GtkRoot *root = gtk_widget_get_root (widget);
  GtkFileChooserNative *chooser = gtk_file_chooser_native_new (
    format == HANASHI_EXPORT_JSON ? _("Export Chat as JSON") : _("Export Chat as Markdown"),
    GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL, GTK_FILE_CHOOSER_ACTION_SAVE, _("_Export"), _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (chooser), TRUE);
  g_autofree char *name = hanashi_conversation_export_file_name (hanashi_conversation_item_get_title (item),
                                                                  format == HANASHI_EXPORT_JSON ? ".json" : ".md");
  gtk_file_chooser_set_current_name (GTK_FILE_CHOOSER (chooser), name);
  g_object_set_data_full (G_OBJECT (chooser), "conversation-id", g_memdup2 (&id, sizeof id), g_free);
  g_object_set_data (G_OBJECT (chooser), "format", GINT_TO_POINTER (format));
  g_signal_connect_object (chooser, "response", G_CALLBACK (on_export_chosen), self, 0);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (chooser));
}
G_GNUC_END_IGNORE_DEPRECATIONS

/* ---- import ---- */

static void
parse_in_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  (void) source; (void) cancellable;
  GBytes *bytes = task_data;
  gsize length = 0;
  const char *contents = g_bytes_get_data (bytes, &length);
  GError *error = NULL;
  HanashiConversationData *data = hanashi_conversation_import_json_data (contents, length, &error);
  if (data)
    g_task_return_pointer (task, data, (GDestroyNotify) hanashi_conversation_data_free);
  else
    g_task_return_error (task, error);
}

static void
on_import_parsed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  HanashiSidebar *self = HANASHI_SIDEBAR (source);
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  g_autoptr(HanashiConversationData) data = g_task_propagate_pointer (G_TASK (result), &error);
  if (!data) {
    g_task_return_error (task, error);
    return;
  }
  if (!self->store) {
    g_task_return_new_error (task, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND, _("No conversation database"));
    return;
  }
  gint64 id = hanashi_store_insert_conversation (self->store, data->conversation, data->messages, FALSE, &error);
  if (id == 0) {
    g_task_return_error (task, error);
    return;
  }
  hanashi_sidebar_reload (self);
  hanashi_sidebar_select (self, id);
  g_signal_emit (self, signals[SIGNAL_CONVERSATION_ACTIVATED], 0, id);
  g_task_return_int (task, id);
}

static void
on_import_loaded (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  GError *error = NULL;
  char *contents = NULL;
  gsize length = 0;
  if (!g_file_load_contents_finish (G_FILE (source), result, &contents, &length, NULL, &error)) {
    g_task_return_error (task, error);
    return;
  }
  HanashiSidebar *self = g_task_get_source_object (task);
  GCancellable *cancellable = g_task_get_cancellable (task);
  GTask *parse = g_task_new (self, cancellable, on_import_parsed, g_steal_pointer (&task));
  g_task_set_task_data (parse, g_bytes_new_take (contents, length), (GDestroyNotify) g_bytes_unref);
  g_task_run_in_thread (parse, parse_in_thread);
  g_object_unref (parse);
}

void
hanashi_sidebar_import_async (HanashiSidebar *self, GFile *file, GCancellable *cancellable,
                              GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (HANASHI_IS_SIDEBAR (self));
  g_return_if_fail (G_IS_FILE (file));
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, hanashi_sidebar_import_async);
  g_file_load_contents_async (file, cancellable, on_import_loaded, task);
}

gint64
hanashi_sidebar_import_finish (HanashiSidebar *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), 0);
  GError *local = NULL;
  gssize id = g_task_propagate_int (G_TASK (result), &local);
  if (local) {
    g_propagate_error (error, local);
    return 0;
  }
  return id;
}

static void
on_import_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  HanashiSidebar *self = HANASHI_SIDEBAR (source);
  g_autoptr(GFile) file = user_data;
  g_autoptr(GError) error = NULL;
  if (hanashi_sidebar_import_finish (self, result, &error) == 0) {
    g_autofree char *name = g_file_get_basename (file);
    /* Translators: the first %s is a file name, the second the reason */
    g_autofree char *text = g_strdup_printf (_("Could not import “%s”: %s"), name, error->message);
    show_message (self, text);
  }
}

G_GNUC_BEGIN_IGNORE_DEPRECATIONS
static void
on_import_chosen (GtkNativeDialog *dialog, int response, HanashiSidebar *self)
{
  if (response == GTK_RESPONSE_ACCEPT) {
    GFile *file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
    if (file)
      hanashi_sidebar_import_async (self, file, NULL, on_import_done, file);
  }
  gtk_native_dialog_destroy (dialog);
  g_object_unref (dialog);
}

static void
import_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  HanashiSidebar *self = HANASHI_SIDEBAR (widget);
  (void) action_name; (void) parameter;
  GtkRoot *root = gtk_widget_get_root (widget);
  GtkFileChooserNative *chooser = gtk_file_chooser_native_new (_("Import Chat"),
    GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL, GTK_FILE_CHOOSER_ACTION_OPEN, _("_Import"), _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (chooser), TRUE);
  g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();
  gtk_file_filter_set_name (filter, _("Hanashi Chats (JSON)"));
  gtk_file_filter_add_pattern (filter, "*.json");
  gtk_file_filter_add_mime_type (filter, "application/json");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (chooser), filter);
  g_signal_connect_object (chooser, "response", G_CALLBACK (on_import_chosen), self, 0);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (chooser));
}
G_GNUC_END_IGNORE_DEPRECATIONS

static void
focus_search_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  (void) action_name; (void) parameter;
  hanashi_sidebar_focus_search (HANASHI_SIDEBAR (widget));
}

/* ---- list factory ---- */

/* A tap on the chat that is already selected changes no selection, so the list says
 * nothing; in the folded layout the user still expects to be taken to that chat. */
static void
on_row_tapped (GtkGestureClick *gesture, int n_press, double x, double y, HanashiSidebar *self)
{
  (void) x; (void) y;
  GtkWidget *row = gtk_event_controller_get_widget (GTK_EVENT_CONTROLLER (gesture));
  HanashiConversationItem *item = hanashi_conversation_row_get_item (HANASHI_CONVERSATION_ROW (row));
  if (n_press != 1 || item == NULL)
    return;
  gint64 id = hanashi_conversation_item_get_id (item);
  if (id != 0 && id == hanashi_sidebar_get_selected_id (self))
    g_signal_emit (self, signals[SIGNAL_CONVERSATION_ACTIVATED], 0, id);
}

static void
setup_row (GtkSignalListItemFactory *factory, GtkListItem *list_item, gpointer user_data)
{
  (void) factory;
  GtkWidget *row = hanashi_conversation_row_new ();
  GtkGesture *tap = gtk_gesture_click_new ();
  gtk_gesture_single_set_button (GTK_GESTURE_SINGLE (tap), GDK_BUTTON_PRIMARY);
  g_signal_connect (tap, "released", G_CALLBACK (on_row_tapped), user_data);
  gtk_widget_add_controller (row, GTK_EVENT_CONTROLLER (tap));
  gtk_list_item_set_child (list_item, row);
}

static void
bind_row (GtkSignalListItemFactory *factory, GtkListItem *list_item, gpointer user_data)
{
  (void) factory; (void) user_data;
  HanashiConversationRow *row = HANASHI_CONVERSATION_ROW (gtk_list_item_get_child (list_item));
  hanashi_conversation_row_set_item (row, gtk_list_item_get_item (list_item), g_get_real_time () / G_USEC_PER_SEC);
}

static void
unbind_row (GtkSignalListItemFactory *factory, GtkListItem *list_item, gpointer user_data)
{
  (void) factory; (void) user_data;
  hanashi_conversation_row_set_item (HANASHI_CONVERSATION_ROW (gtk_list_item_get_child (list_item)), NULL, 0);
}

gboolean
hanashi_sidebar_get_show_window_buttons (HanashiSidebar *self)
{
  g_return_val_if_fail (HANASHI_IS_SIDEBAR (self), FALSE);
  return adw_header_bar_get_show_end_title_buttons (self->header_bar);
}

void
hanashi_sidebar_set_show_window_buttons (HanashiSidebar *self, gboolean show)
{
  g_return_if_fail (HANASHI_IS_SIDEBAR (self));
  if (hanashi_sidebar_get_show_window_buttons (self) == !!show)
    return;
  adw_header_bar_set_show_end_title_buttons (self->header_bar, show);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_SHOW_WINDOW_BUTTONS]);
}

/* ---- GObject ---- */

static void
hanashi_sidebar_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  HanashiSidebar *self = HANASHI_SIDEBAR (object);
  switch (prop_id) {
  case PROP_STORE:
    g_value_set_object (value, self->store);
    break;
  case PROP_SHOW_WINDOW_BUTTONS:
    g_value_set_boolean (value, hanashi_sidebar_get_show_window_buttons (self));
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
hanashi_sidebar_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
  HanashiSidebar *self = HANASHI_SIDEBAR (object);
  switch (prop_id) {
  case PROP_STORE:
    hanashi_sidebar_set_store (self, g_value_get_object (value));
    break;
  case PROP_SHOW_WINDOW_BUTTONS:
    hanashi_sidebar_set_show_window_buttons (self, g_value_get_boolean (value));
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
hanashi_sidebar_dispose (GObject *object)
{
  HanashiSidebar *self = HANASHI_SIDEBAR (object);
  gtk_widget_dispose_template (GTK_WIDGET (self), HANASHI_TYPE_SIDEBAR);
  g_clear_object (&self->selection);
  g_clear_object (&self->items);
  g_clear_object (&self->store);
  g_clear_pointer (&self->deleted, g_hash_table_unref);
  g_clear_pointer (&self->query, g_free);
  G_OBJECT_CLASS (hanashi_sidebar_parent_class)->dispose (object);
}

static void
hanashi_sidebar_class_init (HanashiSidebarClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hanashi_sidebar_dispose;
  object_class->get_property = hanashi_sidebar_get_property;
  object_class->set_property = hanashi_sidebar_set_property;

  properties[PROP_STORE] = g_param_spec_object ("store", NULL, NULL, HANASHI_TYPE_STORE,
                                                G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_SHOW_WINDOW_BUTTONS] =
    g_param_spec_boolean ("show-window-buttons", NULL, NULL, FALSE,
                          G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  /* The user chose a conversation (click, keyboard or import); the window shows it. */
  signals[SIGNAL_CONVERSATION_ACTIVATED] =
    g_signal_new ("conversation-activated", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_INT64);
  /* A conversation left the store (Undo may bring it back with the same id). */
  signals[SIGNAL_CONVERSATION_DELETED] =
    g_signal_new ("conversation-deleted", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                  0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_INT64);

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hanashi/Hanashi/ui/hanashi-sidebar.ui");
  gtk_widget_class_bind_template_child (widget_class, HanashiSidebar, own_toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, HanashiSidebar, header_bar);
  gtk_widget_class_bind_template_child (widget_class, HanashiSidebar, search_bar);
  gtk_widget_class_bind_template_child (widget_class, HanashiSidebar, search_entry);
  gtk_widget_class_bind_template_child (widget_class, HanashiSidebar, search_button);
  gtk_widget_class_bind_template_child (widget_class, HanashiSidebar, stack);
  gtk_widget_class_bind_template_child (widget_class, HanashiSidebar, list_view);
  gtk_widget_class_bind_template_child (widget_class, HanashiSidebar, empty_page);
  gtk_widget_class_bind_template_callback (widget_class, on_search_changed);

  gtk_widget_class_install_action (widget_class, "sidebar.rename", "x", rename_action);
  gtk_widget_class_install_action (widget_class, "sidebar.delete", "x", delete_action);
  gtk_widget_class_install_action (widget_class, "sidebar.undo-delete", "x", undo_delete_action);
  gtk_widget_class_install_action (widget_class, "sidebar.export-markdown", "x", export_action);
  gtk_widget_class_install_action (widget_class, "sidebar.export-json", "x", export_action);
  gtk_widget_class_install_action (widget_class, "sidebar.import", NULL, import_action);
  gtk_widget_class_install_action (widget_class, "sidebar.focus-search", NULL, focus_search_action);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_f, GDK_CONTROL_MASK, "sidebar.focus-search", NULL);

  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "hanashisidebar");
}

static void
hanashi_sidebar_init (HanashiSidebar *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->deleted = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free,
                                         (GDestroyNotify) hanashi_conversation_data_free);
  self->items = g_list_store_new (HANASHI_TYPE_CONVERSATION_ITEM);
  self->selection = gtk_single_selection_new (g_object_ref (G_LIST_MODEL (self->items)));
  gtk_single_selection_set_autoselect (self->selection, FALSE);
  gtk_single_selection_set_can_unselect (self->selection, TRUE);
  gtk_single_selection_set_selected (self->selection, GTK_INVALID_LIST_POSITION);
  g_signal_connect_swapped (self->selection, "notify::selected", G_CALLBACK (on_selection_changed), self);

  GtkListItemFactory *factory = gtk_signal_list_item_factory_new ();
  g_signal_connect (factory, "setup", G_CALLBACK (setup_row), self);
  g_signal_connect (factory, "bind", G_CALLBACK (bind_row), NULL);
  g_signal_connect (factory, "unbind", G_CALLBACK (unbind_row), NULL);
  gtk_list_view_set_factory (self->list_view, factory);
  g_object_unref (factory);
  gtk_list_view_set_model (self->list_view, GTK_SELECTION_MODEL (self->selection));
  g_signal_connect (self->list_view, "activate", G_CALLBACK (on_list_activate), self);

  gtk_search_entry_set_search_delay (self->search_entry, 200);
  gtk_search_bar_connect_entry (self->search_bar, GTK_EDITABLE (self->search_entry));
  g_signal_connect_swapped (self->search_bar, "notify::search-mode-enabled", G_CALLBACK (on_search_mode_changed), self);
  hanashi_sidebar_reload (self);
}

GtkWidget *
hanashi_sidebar_new (void)
{
  return g_object_new (HANASHI_TYPE_SIDEBAR, NULL);
}
