/* hanashi-sidebar.h — the conversations sidebar: new chat, search, list, rename, delete
 * with undo, export and import
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "hanashi-store.h"

G_BEGIN_DECLS

typedef enum {
  HANASHI_EXPORT_MARKDOWN,
  HANASHI_EXPORT_JSON,
} HanashiExportFormat;

#define HANASHI_TYPE_SIDEBAR (hanashi_sidebar_get_type ())
G_DECLARE_FINAL_TYPE (HanashiSidebar, hanashi_sidebar, HANASHI, SIDEBAR, GtkWidget)

GtkWidget *hanashi_sidebar_new (void);
/* The sidebar reads and writes @store (NULL empties the list) and reloads. */
void hanashi_sidebar_set_store (HanashiSidebar *self, HanashiStore *store);
HanashiStore *hanashi_sidebar_get_store (HanashiSidebar *self);
/* Rereads the list from the store (call after the window adds a message or a chat),
 * keeping the current search and selection. */
void hanashi_sidebar_reload (HanashiSidebar *self);
/* Selects the row of @id without emitting conversation-activated (0 unselects);
 * FALSE when @id is not in the list shown. */
gboolean hanashi_sidebar_select (HanashiSidebar *self, gint64 id);
/* The selected conversation, 0 when none. */
gint64 hanashi_sidebar_get_selected_id (HanashiSidebar *self);
/* Opens the search bar and focuses the entry (the window binds Ctrl+F to this). */
void hanashi_sidebar_focus_search (HanashiSidebar *self);
/* Property "show-window-buttons": the header's close button and window controls.  Off in
 * the wide layout (the chat's header has them); on when the sidebar is the whole window. */
gboolean hanashi_sidebar_get_show_window_buttons (HanashiSidebar *self);
void hanashi_sidebar_set_show_window_buttons (HanashiSidebar *self, gboolean show);
/* The list shown: HanashiConversationItem, newest activity first (borrowed). */
GListModel *hanashi_sidebar_get_model (HanashiSidebar *self);

/* What the row menu's Export items do once a file is chosen: write @id to @file. */
void hanashi_sidebar_export_async (HanashiSidebar *self, gint64 id, HanashiExportFormat format, GFile *file,
                                   GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data);
gboolean hanashi_sidebar_export_finish (HanashiSidebar *self, GAsyncResult *result, GError **error);
/* What Import does once a file is chosen: read, validate (in a worker thread) and insert
 * @file; the list reloads and the new conversation is selected and activated. */
void hanashi_sidebar_import_async (HanashiSidebar *self, GFile *file, GCancellable *cancellable,
                                   GAsyncReadyCallback callback, gpointer user_data);
/* The new conversation id, 0 on error. */
gint64 hanashi_sidebar_import_finish (HanashiSidebar *self, GAsyncResult *result, GError **error);

G_END_DECLS
