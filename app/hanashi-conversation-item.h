/* hanashi-conversation-item.h — one conversation in the sidebar's list model
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib-object.h>

#include "hanashi-store.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_CONVERSATION_ITEM (hanashi_conversation_item_get_type ())
G_DECLARE_FINAL_TYPE (HanashiConversationItem, hanashi_conversation_item, HANASHI, CONVERSATION_ITEM, GObject)

HanashiConversationItem *hanashi_conversation_item_new (const HanashiConversationSummary *summary);

gint64 hanashi_conversation_item_get_id (HanashiConversationItem *self);
/* The stored title, "" when the conversation has none yet. */
const char *hanashi_conversation_item_get_title (HanashiConversationItem *self);
/* One line of the newest message. */
const char *hanashi_conversation_item_get_snippet (HanashiConversationItem *self);
gint64 hanashi_conversation_item_get_updated (HanashiConversationItem *self);
/* TRUE when both show the same thing (id, title, snippet, time). */
gboolean hanashi_conversation_item_same (HanashiConversationItem *a, HanashiConversationItem *b);

/* "14:05" today, "Yesterday", a weekday within a week, else the locale's date;
 * @then and @now are unix seconds, compared in the local time zone. */
char *hanashi_format_relative_time (gint64 then, gint64 now);

G_END_DECLS
