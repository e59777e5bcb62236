/* hanashi-message-row.h: one message in the chat view (a GtkListView row).
 *
 * The row shows the message bound to it: plain text for the user, Markdown for the
 * assistant, the alternatives arrows, a footer with the reply's speed, and the message
 * actions, which activate the "chat." actions with the message id.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

#include "hanashi-engine.h"
#include "hanashi-message.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_MESSAGE_ROW (hanashi_message_row_get_type ())
G_DECLARE_FINAL_TYPE (HanashiMessageRow, hanashi_message_row, HANASHI, MESSAGE_ROW, GtkWidget)

HanashiMessageRow *hanashi_message_row_new         (void);
void               hanashi_message_row_set_message (HanashiMessageRow *self,
                                                    HanashiMessage    *message);
HanashiMessage    *hanashi_message_row_get_message (HanashiMessageRow *self);
/* "Show probabilities": with an engine, an answer with token records shows its tokens
 * shaded by probability (hanashi-token-view.h), their texts taken from @engine's model;
 * NULL turns it off.  Choosing another candidate activates "chat.branch" with (message id,
 * token index, candidate token) as "(xui)". */
void               hanashi_message_row_set_lens    (HanashiMessageRow *self,
                                                    HanashiEngine     *engine);
/* For tests: the token view while it shows the answer (else NULL), and the line that says
 * why the lens shows nothing (NULL when none). */
GtkWidget         *hanashi_message_row_get_token_view (HanashiMessageRow *self);
const char        *hanashi_message_row_get_lens_note  (HanashiMessageRow *self);
/* How many rows exist right now (the list view recycles them; tests check it stays small). */
guint              hanashi_message_row_get_n_instances (void);

G_END_DECLS
