/* hanashi-chat-view.h: the message list of one conversation.
 *
 * A GtkListView over a GListModel of HanashiMessage, so only the rows on screen exist as
 * widgets however long the conversation is.  While a reply streams in, the view follows
 * the bottom unless the user has scrolled up.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

#include "hanashi-engine.h"
#include "hanashi-message.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_CHAT_VIEW (hanashi_chat_view_get_type ())
G_DECLARE_FINAL_TYPE (HanashiChatView, hanashi_chat_view, HANASHI, CHAT_VIEW, GtkWidget)

HanashiChatView *hanashi_chat_view_new            (void);
/* A model of HanashiMessage (borrowed by the view's selection model; NULL clears). */
void             hanashi_chat_view_set_model      (HanashiChatView *self,
                                                   GListModel      *messages);
GListModel      *hanashi_chat_view_get_model      (HanashiChatView *self);
void             hanashi_chat_view_scroll_to_bottom (HanashiChatView *self);
/* TRUE while the view sticks to the bottom as content grows. */
gboolean         hanashi_chat_view_get_following  (HanashiChatView *self);
GtkAdjustment   *hanashi_chat_view_get_vadjustment (HanashiChatView *self);
/* What scrolling up by wheel, scrollbar or keyboard does: stay put while content grows. */
void             hanashi_chat_view_stop_following (HanashiChatView *self);

/* "Show probabilities": answers show their tokens shaded by probability, their texts taken
 * from @engine's model (hanashi_message_row_set_lens); NULL turns it off. */
void             hanashi_chat_view_set_lens       (HanashiChatView *self,
                                                   HanashiEngine   *engine);
/* The HanashiMessageRow widgets that exist now (a new array of borrowed rows; for tests). */
GPtrArray       *hanashi_chat_view_list_rows      (HanashiChatView *self);

/* The rows' buttons activate "chat.copy", "chat.edit", "chat.regenerate", "chat.delete",
 * "chat.previous-alternative" and "chat.next-alternative" with the message id (int64) as
 * parameter, and "chat.branch" with (message id, token index, candidate token) "(xui)":
 * whoever holds the view provides that action group (the window does). */

G_END_DECLS
