/* hanashi-conversation-item.c — one conversation in the sidebar's list model
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-conversation-item"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-conversation-io.h"
#include "hanashi-conversation-item.h"
#include "hanashi-markdown.h"

struct _HanashiConversationItem {
  GObject parent_instance;

  gint64 id;
  char *title;
  char *snippet;
  gint64 updated;
};

G_DEFINE_FINAL_TYPE (HanashiConversationItem, hanashi_conversation_item, G_TYPE_OBJECT)

static void
hanashi_conversation_item_finalize (GObject *object)
{
  HanashiConversationItem *self = HANASHI_CONVERSATION_ITEM (object);
  g_free (self->title);
  g_free (self->snippet);
  G_OBJECT_CLASS (hanashi_conversation_item_parent_class)->finalize (object);
}

static void
hanashi_conversation_item_class_init (HanashiConversationItemClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = hanashi_conversation_item_finalize;
}

static void
hanashi_conversation_item_init (HanashiConversationItem *self)
{
  (void) self;
}

HanashiConversationItem *
hanashi_conversation_item_new (const HanashiConversationSummary *summary)
{
  HanashiConversationItem *self = g_object_new (HANASHI_TYPE_CONVERSATION_ITEM, NULL);
  self->id = summary->id;
  /* Plain text: titles stored by older versions may hold Markdown ("**Recipe**"). */
  self->title = hanashi_conversation_title_strip_markdown (summary->title);
  /* The snippet is one line of plain text (replies are Markdown), so rows keep one height. */
  g_autofree char *plain = hanashi_markdown_to_plain (summary->snippet, -1);
  self->snippet = hanashi_conversation_title_from_text (plain, 80);
  self->updated = summary->updated;
  return self;
}

gint64
hanashi_conversation_item_get_id (HanashiConversationItem *self)
{
  g_return_val_if_fail (HANASHI_IS_CONVERSATION_ITEM (self), 0);
  return self->id;
}

const char *
hanashi_conversation_item_get_title (HanashiConversationItem *self)
{
  g_return_val_if_fail (HANASHI_IS_CONVERSATION_ITEM (self), NULL);
  return self->title;
}

const char *
hanashi_conversation_item_get_snippet (HanashiConversationItem *self)
{
  g_return_val_if_fail (HANASHI_IS_CONVERSATION_ITEM (self), NULL);
  return self->snippet;
}

gint64
hanashi_conversation_item_get_updated (HanashiConversationItem *self)
{
  g_return_val_if_fail (HANASHI_IS_CONVERSATION_ITEM (self), 0);
  return self->updated;
}

gboolean
hanashi_conversation_item_same (HanashiConversationItem *a, HanashiConversationItem *b)
{
  g_return_val_if_fail (HANASHI_IS_CONVERSATION_ITEM (a) && HANASHI_IS_CONVERSATION_ITEM (b), FALSE);
  return a->id == b->id && a->updated == b->updated && g_str_equal (a->title, b->title)
         && g_str_equal (a->snippet, b->snippet);
}

char *
hanashi_format_relative_time (gint64 then, gint64 now)
{
  g_autoptr(GDateTime) t = g_date_time_new_from_unix_local (then);
  g_autoptr(GDateTime) n = g_date_time_new_from_unix_local (now);
  if (!t || !n)
    return g_strdup ("");
  g_autoptr(GDateTime) t_day = g_date_time_new_local (g_date_time_get_year (t), g_date_time_get_month (t),
                                                      g_date_time_get_day_of_month (t), 0, 0, 0);
  g_autoptr(GDateTime) n_day = g_date_time_new_local (g_date_time_get_year (n), g_date_time_get_month (n),
                                                      g_date_time_get_day_of_month (n), 0, 0, 0);
  /* Whole calendar days apart; rounding absorbs daylight-saving hours. */
  gint64 days = (g_date_time_difference (n_day, t_day) + G_TIME_SPAN_DAY / 2) / G_TIME_SPAN_DAY;
  if (days <= 0)
    return g_date_time_format (t, "%R");
  if (days == 1)
    return g_strdup (_("Yesterday"));
  if (days < 7)
    return g_date_time_format (t, "%A");
  return g_date_time_format (t, "%x");
}
