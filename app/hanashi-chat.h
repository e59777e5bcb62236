/* hanashi-chat.h: one conversation as the window shows it, without any widget.
 *
 * A HanashiChat owns the visible thread (a GListModel of HanashiMessage, following the
 * shown alternative at every step), the reply being written (streamed from the engine,
 * committed to the store at most every 250 ms and finally when it ends), the replies the
 * store refused so far (tried again every second), editing, regenerating, switching
 * alternatives, and deleting a message with one step of Undo.  The window is a view of it:
 * it forwards what the user does and shows what the chat reports.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "hanashi-engine.h"
#include "hanashi-store.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_CHAT (hanashi_chat_get_type ())
G_DECLARE_FINAL_TYPE (HanashiChat, hanashi_chat, HANASHI, CHAT, GObject)

/* Where the settings of the next request come from: the window's composer and parameter
 * panel, read at the moment a request is built so that what the user sees is what the engine
 * gets.  Any member may be NULL: the chat then uses what it was loaded with or given by
 * hanashi_chat_set_system_prompt()/set_thinking(), and no parameters (the engine's
 * defaults).  @apply_params puts sampling and grammar into a request and refuses ones that
 * cannot be used; @dup_params_json returns them as the JSON stored with a reply and a new
 * conversation (owned; NULL for the defaults). */
typedef struct {
  const char *(*get_system_prompt) (gpointer                 user_data);
  gboolean    (*get_thinking)      (gpointer                 user_data);
  gboolean    (*apply_params)      (gpointer                 user_data,
                                    HanashiGenerateRequest  *request,
                                    GError                 **error);
  char       *(*dup_params_json)   (gpointer                 user_data);
} HanashiChatSettingsSource;

HanashiChat   *hanashi_chat_new                  (HanashiEngine *engine);
HanashiEngine *hanashi_chat_get_engine           (HanashiChat   *self);
/* NULL while there is no database; a store opened again (same file) replaces it. */
void           hanashi_chat_set_store            (HanashiChat   *self,
                                                  HanashiStore  *store);
HanashiStore  *hanashi_chat_get_store            (HanashiChat   *self);
/* @source is borrowed (a static table); @user_data must outlive the chat's use of it. */
void           hanashi_chat_set_settings_source  (HanashiChat                     *self,
                                                  const HanashiChatSettingsSource *source,
                                                  gpointer                         user_data);

/* The visible thread: HanashiMessage items, oldest first (borrowed). */
GListModel    *hanashi_chat_get_messages         (HanashiChat   *self);
/* 0: a new chat, stored with its first message. */
gint64         hanashi_chat_get_conversation_id  (HanashiChat   *self);
/* The stored title, "" for a new chat (borrowed). */
const char    *hanashi_chat_get_title            (HanashiChat   *self);
/* What the loaded conversation was saved with: the window shows these (borrowed). */
const char    *hanashi_chat_get_system_prompt    (HanashiChat   *self);
gboolean       hanashi_chat_get_thinking         (HanashiChat   *self);
const char    *hanashi_chat_get_params_json      (HanashiChat   *self);
/* TRUE while a reply is being written. */
gboolean       hanashi_chat_get_generating       (HanashiChat   *self);
/* The engine's id for the reply being written, 0 when none. */
guint          hanashi_chat_get_request_id       (HanashiChat   *self);
/* The user message being edited (sending replaces it with a new version), or 0. */
gint64         hanashi_chat_get_editing_id       (HanashiChat   *self);
/* Speed of the last finished reply in tokens per second, 0 when none yet. */
double         hanashi_chat_get_last_speed       (HanashiChat   *self);
/* While a reply streams: the tokens its request takes plus those written so far (what the
 * context holds now), -1 before the request is counted and when no reply is written. */
int            hanashi_chat_get_reply_context_tokens (HanashiChat *self);

/* Shows a stored conversation (0: a new one).  A reply being written ends first.  FALSE
 * with @error when it cannot be read; the chat is then a new one. */
gboolean       hanashi_chat_load                 (HanashiChat   *self,
                                                  gint64         conversation_id,
                                                  GError       **error);
/* Settings of the chat, saved with it once it is stored. */
gboolean       hanashi_chat_set_system_prompt    (HanashiChat   *self,
                                                  const char    *prompt,
                                                  GError       **error);
gboolean       hanashi_chat_set_thinking         (HanashiChat   *self,
                                                  gboolean       thinking,
                                                  GError       **error);
gboolean       hanashi_chat_save_params          (HanashiChat   *self,
                                                  GError       **error);

/* The thread as an engine request, with @draft as the next user message (may be NULL):
 * what the context meter counts. */
HanashiGenerateRequest *hanashi_chat_build_request (HanashiChat *self,
                                                    const char  *draft);

/* Stores @text as the next user message (or as a new version of the one being edited)
 * and starts the reply.  FALSE with @error when nothing was stored: the text is still the
 * caller's.  A problem after the message was stored is reported by "problem". */
gboolean       hanashi_chat_send                 (HanashiChat   *self,
                                                  const char    *text,
                                                  GError       **error);
/* Stops the reply; the engine still reports its partial text and stats. */
void           hanashi_chat_stop                 (HanashiChat   *self);
/* Ends the reply on our side at once (a model is being replaced): what was written of it
 * is kept and whatever the engine sends later for it is ignored. */
void           hanashi_chat_end_reply            (HanashiChat   *self);

/* The message actions, each by message id; problems are reported by "problem". */
void           hanashi_chat_begin_edit           (HanashiChat   *self,
                                                  gint64         message_id);
void           hanashi_chat_cancel_edit          (HanashiChat   *self);
void           hanashi_chat_regenerate           (HanashiChat   *self,
                                                  gint64         message_id);
/* Continues answer @message_id from its token @token_index with @candidate (one of that
 * token's recorded candidates) instead, as a new alternative of it: its text is the answer's
 * up to that token plus the candidate's, its records those of the tokens before and the
 * token's own with the other choice, and the engine goes on from exactly those tokens
 * (reusing the KV cells of the answer up to the branch).  Needs the records and the model
 * that wrote the answer; "notice" says when that model is not the one loaded. */
void           hanashi_chat_branch               (HanashiChat   *self,
                                                  gint64         message_id,
                                                  guint          token_index,
                                                  gint32         candidate);
/* The request whose next token is token @token_index of answer @message_id: the thread
 * before that answer with the answer's tokens before it as the reply prefix (for the
 * panel's lens; the sampling settings are the caller's to apply), and in @chosen the token
 * the answer took there.  NULL when that token cannot be looked at: no model, no records,
 * or not the model that wrote the answer ("notice" says which of the last two). */
HanashiGenerateRequest *hanashi_chat_build_token_request (HanashiChat *self,
                                                          gint64       message_id,
                                                          guint        token_index,
                                                          gint32      *chosen);
void           hanashi_chat_delete_message       (HanashiChat   *self,
                                                  gint64         message_id);
/* Shows the previous (@delta -1) or next (+1) version of a message. */
void           hanashi_chat_switch_alternative   (HanashiChat   *self,
                                                  gint64         message_id,
                                                  int            delta);
/* Undo of the last deletion, while "can-undo" is TRUE. */
gboolean       hanashi_chat_get_can_undo         (HanashiChat   *self);
/* The conversation the deletion that can be undone was made in (0: none). */
gint64         hanashi_chat_get_undo_conversation_id (HanashiChat *self);
void           hanashi_chat_undo_delete          (HanashiChat   *self);
void           hanashi_chat_forget_undo          (HanashiChat   *self);

/* Properties (read-only, notified): "conversation-id" (gint64), "title" (string),
 * "generating" (boolean), "editing-id" (gint64), "can-undo" (boolean),
 *   "reply-context-tokens" (int).
 * Signals:
 *   "changed" ()                  a conversation was created, or gained, lost or finished
 *                                 a message (the list of chats refreshes)
 *   "reply-started" ()            a reply was added at the end of the thread
 *   "message-deleted" ()          a deletion that "can-undo" now offers to undo
 *   "problem" (what, GError)      something failed; @what (translated, may be NULL when the
 *                                 error's sentence stands alone) says what
 *   "notice" (text)               a translated sentence for the user */

G_END_DECLS
