/* hanashi-think-splitter.c: the GLib face of the engine's thinking splitter (hn-reasoning.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-engine"

#include "hanashi-think-splitter.h"

#include "hn-reasoning.h"

G_STATIC_ASSERT ((int) HANASHI_THINK_START_ANSWER == (int) HN_THINK_START_ANSWER);
G_STATIC_ASSERT ((int) HANASHI_THINK_START_INSIDE == (int) HN_THINK_START_INSIDE);
G_STATIC_ASSERT ((int) HANASHI_THINK_START_AUTO == (int) HN_THINK_START_AUTO);
G_STATIC_ASSERT ((int) HANASHI_THINK_PART_THINKING == (int) HN_THINK_PART_THINKING);
G_STATIC_ASSERT ((int) HANASHI_THINK_PART_ANSWER == (int) HN_THINK_PART_ANSWER);
G_STATIC_ASSERT ((int) HANASHI_THINK_PART_ANSWER_WAS_THINKING == (int) HN_THINK_PART_ANSWER_WAS_THINKING);

struct _HanashiThinkSplitter
{
  HnThinkSplitter splitter;
};

typedef struct {
  HanashiThinkFunc func;
  gpointer         user_data;
} Receiver;

static void
forward_part (void *data, HnThinkPart part, const char *text, size_t len)
{
  Receiver *receiver = data;
  receiver->func (receiver->user_data, (HanashiThinkPart) part, text, len);
}

HanashiThinkSplitter *
hanashi_think_splitter_new (HanashiThinkStart start)
{
  HanashiThinkSplitter *self = g_new0 (HanashiThinkSplitter, 1);
  hn_think_splitter_init (&self->splitter, (HnThinkStart) start);
  return self;
}

void
hanashi_think_splitter_free (HanashiThinkSplitter *splitter)
{
  g_free (splitter);
}

void
hanashi_think_splitter_feed (HanashiThinkSplitter *splitter, const char *text, gsize len,
                             HanashiThinkFunc func, gpointer user_data)
{
  g_return_if_fail (splitter != NULL && func != NULL);
  Receiver receiver = { func, user_data };
  hn_think_splitter_feed (&splitter->splitter, text, len, forward_part, &receiver);
}

void
hanashi_think_splitter_finish (HanashiThinkSplitter *splitter, HanashiThinkFunc func, gpointer user_data)
{
  g_return_if_fail (splitter != NULL && func != NULL);
  Receiver receiver = { func, user_data };
  hn_think_splitter_finish (&splitter->splitter, forward_part, &receiver);
}

gboolean
hanashi_think_splitter_is_thinking (HanashiThinkSplitter *splitter)
{
  g_return_val_if_fail (splitter != NULL, FALSE);
  return hn_think_splitter_thinking (&splitter->splitter);
}
