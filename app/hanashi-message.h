/* hanashi-message.h — one chat message as a GObject, the item type of the message list model
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib-object.h>

#include "hanashi-store.h"
#include "hanashi-think-splitter.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_MESSAGE (hanashi_message_get_type ())
G_DECLARE_FINAL_TYPE (HanashiMessage, hanashi_message, HANASHI, MESSAGE, GObject)

HanashiMessage *hanashi_message_new (gint64 id, const char *role, const char *text);
HanashiMessage *hanashi_message_new_from_stored (const HanashiStoredMessage *stored);

gint64 hanashi_message_get_id (HanashiMessage *self);
const char *hanashi_message_get_role (HanashiMessage *self);
gboolean hanashi_message_is_user (HanashiMessage *self);
const char *hanashi_message_get_text (HanashiMessage *self);
void hanashi_message_set_text (HanashiMessage *self, const char *text);
/* Streaming: appends a decoded piece and notifies "text" once. */
void hanashi_message_append_text (HanashiMessage *self, const char *piece);
gboolean hanashi_message_get_complete (HanashiMessage *self);
void hanashi_message_set_complete (HanashiMessage *self, gboolean complete);
int hanashi_message_get_token_count (HanashiMessage *self);
double hanashi_message_get_generation_seconds (HanashiMessage *self);
void hanashi_message_set_stats (HanashiMessage *self, int token_count, double generation_seconds);
/* Tokens per second, 0 when unknown. */
double hanashi_message_get_tokens_per_second (HanashiMessage *self);

/* The message this one answers or follows in its thread (0 = first). */
gint64 hanashi_message_get_parent_id (HanashiMessage *self);
void hanashi_message_set_parent_id (HanashiMessage *self, gint64 parent_id);
/* Which of its alternatives (regenerated or edited versions) this is, 0-based. */
guint hanashi_message_get_alternative_index (HanashiMessage *self);
guint hanashi_message_get_n_alternatives (HanashiMessage *self);
void hanashi_message_set_alternatives (HanashiMessage *self, guint index, guint n_alternatives);

/* A reasoning model's thinking, kept apart from the answer (the text): "" when none. */
const char *hanashi_message_get_thinking (HanashiMessage *self);
double hanashi_message_get_thinking_seconds (HanashiMessage *self);
void hanashi_message_set_thinking (HanashiMessage *self, const char *thinking, double seconds);
/* TRUE while the thinking of a streaming reply is being written. */
gboolean hanashi_message_get_thinking_active (HanashiMessage *self);

/* Streaming a model's output: between begin and end, append_output splits each piece into
 * thinking and answer (markers may be cut across pieces) and times the thinking.
 * @start: INSIDE when the prompt opened the thinking (HanashiModelInfo.reply_opens_thinking),
 * AUTO when the template knows thinking (thinking_aware), else ANSWER (see hanashi-think-splitter.h). */
void hanashi_message_begin_output (HanashiMessage *self, HanashiThinkStart start);
void hanashi_message_append_output (HanashiMessage *self, const char *piece);
void hanashi_message_end_output (HanashiMessage *self);

/* The sampler's records of the reply's tokens (HnTokenProbs, in order), as they streamed in
 * or as stored (hanashi-token-probs.h); NULL when none were recorded. */
void    hanashi_message_append_token_probs (HanashiMessage *self, GBytes *records);
/* The records packed for the store (hanashi_token_probs_pack), or NULL. */
GBytes *hanashi_message_dup_token_probs_blob (HanashiMessage *self);
/* The records themselves; NULL when none. */
GArray *hanashi_message_get_token_probs (HanashiMessage *self);

G_END_DECLS
