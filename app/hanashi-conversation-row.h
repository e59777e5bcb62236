/* hanashi-conversation-row.h — the sidebar row: title, snippet, time and a menu
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

#include "hanashi-conversation-item.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_CONVERSATION_ROW (hanashi_conversation_row_get_type ())
G_DECLARE_FINAL_TYPE (HanashiConversationRow, hanashi_conversation_row, HANASHI, CONVERSATION_ROW, GtkWidget)

GtkWidget *hanashi_conversation_row_new (void);
/* Shows @item (NULL forgets it); the row menu acts on its id through the sidebar.* actions. */
void hanashi_conversation_row_set_item (HanashiConversationRow *self, HanashiConversationItem *item, gint64 now);
HanashiConversationItem *hanashi_conversation_row_get_item (HanashiConversationRow *self);
const char *hanashi_conversation_row_get_title_text (HanashiConversationRow *self);

G_END_DECLS
