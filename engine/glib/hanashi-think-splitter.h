/* hanashi-think-splitter.h: a reasoning model's streamed output split into its thinking and
 * its answer, as the engine splits it (hn-reasoning.h), for the app.
 *
 * Markers ("<think>" … "</think>" and the other known pairs) may be cut anywhere across
 * the pieces fed in; what might be the start of a marker is held back until the next piece
 * says whether it is one.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  HANASHI_THINK_START_ANSWER,  /* thinking only when the output opens with a marker */
  HANASHI_THINK_START_INSIDE,  /* the prompt opened the thinking: it ends at a closing marker */
  HANASHI_THINK_START_AUTO,    /* as ANSWER, and a lone closing marker means the text before
                                * it was thinking */
} HanashiThinkStart;

typedef enum {
  HANASHI_THINK_PART_THINKING,
  HANASHI_THINK_PART_ANSWER,
  /* No text: the answer so far was thinking after all (AUTO); the receiver moves it. */
  HANASHI_THINK_PART_ANSWER_WAS_THINKING,
} HanashiThinkPart;

typedef void (*HanashiThinkFunc) (gpointer          user_data,
                                  HanashiThinkPart  part,
                                  const char       *text,
                                  gsize             len);

typedef struct _HanashiThinkSplitter HanashiThinkSplitter;

HanashiThinkSplitter *hanashi_think_splitter_new      (HanashiThinkStart      start);
void                  hanashi_think_splitter_free     (HanashiThinkSplitter  *splitter);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiThinkSplitter, hanashi_think_splitter_free)
/* Calls @func for each part of @text that is known to be thinking or answer. */
void                  hanashi_think_splitter_feed     (HanashiThinkSplitter  *splitter,
                                                       const char            *text,
                                                       gsize                  len,
                                                       HanashiThinkFunc       func,
                                                       gpointer               user_data);
/* The output ended: what was held back goes out. */
void                  hanashi_think_splitter_finish   (HanashiThinkSplitter  *splitter,
                                                       HanashiThinkFunc       func,
                                                       gpointer               user_data);
/* TRUE while the text fed so far ends inside the thinking. */
gboolean              hanashi_think_splitter_is_thinking (HanashiThinkSplitter *splitter);

G_END_DECLS
