/* hanashi-window.h: the main window: conversations, the chat, the composer and the
 * parameter panel.  A view: the application owns the engine (the window's construct-only
 * "engine" property) and the conversation store (hanashi_application_get_store, followed
 * through "store-changed"); the window shows one HanashiChat over them.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "hanashi-application.h"
#include "hanashi-engine.h"
#include "hanashi-store.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_WINDOW (hanashi_window_get_type ())
G_DECLARE_FINAL_TYPE (HanashiWindow, hanashi_window, HANASHI, WINDOW, AdwApplicationWindow)

HanashiWindow *hanashi_window_new              (HanashiApplication *application);
/* Loads a model (asynchronously, with a progress bar; errors become toasts). */
/* Chats with @model of the OpenAI-compatible server at @url (its API root, as the Models
 * window lists it; the key comes from the secret store), in place of the model in use. */
void           hanashi_window_use_remote_model (HanashiWindow      *self,
                                                const char         *url,
                                                const char         *model);
void           hanashi_window_open_model       (HanashiWindow      *self,
                                                GFile              *file);
/* Shows a stored conversation; 0 starts a new, not yet stored one. */
void           hanashi_window_load_conversation (HanashiWindow     *self,
                                                 gint64             conversation_id);
gint64         hanashi_window_get_conversation_id (HanashiWindow   *self);
/* The application's store as this window shows it; NULL when the database could not be
 * opened (the banner says why).  Borrowed. */
HanashiStore  *hanashi_window_get_store        (HanashiWindow      *self);
HanashiEngine *hanashi_window_get_engine       (HanashiWindow      *self);
/* The visible thread: HanashiMessage items, oldest first. */
GListModel    *hanashi_window_get_messages     (HanashiWindow      *self);
void           hanashi_window_add_toast        (HanashiWindow      *self,
                                                const char         *message);

/* Property "conversation-id" (gint64, read-only): the chat shown, 0 for a new one.
 * Signal "conversations-changed" (): a conversation was created or gained, lost or
 * finished a message (for the list of chats to refresh). */

G_END_DECLS
