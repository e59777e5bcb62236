/* hanashi-store.h — conversations and messages in SQLite ($XDG_DATA_HOME/hanashi/hanashi.db)
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

#define HANASHI_STORE_ERROR (hanashi_store_error_quark ())
GQuark hanashi_store_error_quark (void);

/* Every error carries a translated sentence for people (SQLite's own text goes to
 * g_debug); the code says what kind of trouble it is. */
typedef enum {
  HANASHI_STORE_ERROR_FAILED,
  HANASHI_STORE_ERROR_NOT_FOUND,
  HANASHI_STORE_ERROR_TOO_NEW,
  HANASHI_STORE_ERROR_NO_SPACE,   /* disk full, or a short write */
  HANASHI_STORE_ERROR_READ_ONLY,  /* the file or its folder cannot be written */
  HANASHI_STORE_ERROR_IO,         /* the disk reported an error */
  HANASHI_STORE_ERROR_CORRUPT,    /* the file is damaged or not a database */
  HANASHI_STORE_ERROR_BUSY,       /* another program holds the database */
} HanashiStoreError;

#define HANASHI_STORE_SCHEMA_VERSION 6

#define HANASHI_TYPE_STORE (hanashi_store_get_type ())
G_DECLARE_FINAL_TYPE (HanashiStore, hanashi_store, HANASHI, STORE, GObject)

/* Plain snapshot of one stored message row. */
typedef struct {
  gint64 id;
  gint64 conversation_id;
  gint64 parent_id;          /* previous message in the thread, 0 = first */
  gint64 alternative_group;  /* messages sharing a group are alternatives of each other */
  char *role;
  char *text;
  gint64 created;            /* unix seconds */
  int token_count;
  double generation_seconds;
  char *params_json;
  gboolean complete;
  gboolean shown;            /* the alternative of its group that the thread continues from */
  char *thinking;            /* a reasoning model's thinking before the answer ("" = none) */
  double thinking_seconds;   /* how long the thinking took */
  GBytes *token_probs;       /* the sampler's record of each token (hanashi-token-probs.h), or NULL */
} HanashiStoredMessage;

void hanashi_stored_message_free (HanashiStoredMessage *message);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiStoredMessage, hanashi_stored_message_free)

typedef struct {
  gint64 id;
  char *title;
  gint64 created;
  gint64 updated;
  char *system_prompt;
  char *params_json;
  gboolean thinking_off;     /* the Think switch of the chat is off (on by default) */
  char *engine;              /* "" = the local model; a remote model as written by
                              * hanashi_remote_engine_id() (hanashi-remote-endpoints.h) */
} HanashiStoredConversation;

void hanashi_stored_conversation_free (HanashiStoredConversation *conversation);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiStoredConversation, hanashi_stored_conversation_free)

/* Opens (creating and migrating as needed) the database at @path. */
HanashiStore *hanashi_store_new (const char *path, GError **error);
/* Opens an existing database for reading only (a folder or file that cannot be written):
 * nothing is created, migrated or written, and every write fails with READ_ONLY. */
HanashiStore *hanashi_store_new_read_only (const char *path, GError **error);
gboolean hanashi_store_is_read_only (HanashiStore *self);
/* The default location, $XDG_DATA_HOME/hanashi/hanashi.db. */
char *hanashi_store_dup_default_path (void);
int hanashi_store_get_schema_version (HanashiStore *self);

gint64 hanashi_store_create_conversation (HanashiStore *self, const char *title, GError **error);
gboolean hanashi_store_rename_conversation (HanashiStore *self, gint64 id, const char *title, GError **error);
gboolean hanashi_store_set_system_prompt (HanashiStore *self, gint64 id, const char *prompt, GError **error);
gboolean hanashi_store_set_conversation_params (HanashiStore *self, gint64 id, const char *params_json, GError **error);
/* The chat's Think switch (for models whose template has one). */
gboolean hanashi_store_set_conversation_thinking (HanashiStore *self, gint64 id, gboolean enabled, GError **error);
gboolean hanashi_store_set_conversation_engine (HanashiStore *self, gint64 id, const char *engine, GError **error);
gboolean hanashi_store_delete_conversation (HanashiStore *self, gint64 id, GError **error);
/* A copy the caller owns (hanashi_stored_conversation_free). */
HanashiStoredConversation *hanashi_store_dup_conversation (HanashiStore *self, gint64 id, GError **error);
/* Conversations by last activity, newest first; @query (may be NULL/empty) matches titles and message text. */
GPtrArray *hanashi_store_list_conversations (HanashiStore *self, const char *query, GError **error);

/* One row of the sidebar: title, the start of the newest message, last activity. */
typedef struct {
  gint64 id;
  char *title;
  char *snippet;   /* up to 120 characters of the newest message, "" when empty */
  gint64 updated;  /* unix seconds */
} HanashiConversationSummary;

void hanashi_conversation_summary_free (HanashiConversationSummary *summary);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiConversationSummary, hanashi_conversation_summary_free)

/* Summaries by last activity, newest first.  @query (NULL or "" = all) is matched as a
 * literal substring (LIKE with %, _ and \ escaped; ASCII case-insensitive) against the
 * title and the text of every message. */
GPtrArray *hanashi_store_list_summaries (HanashiStore *self, const char *query, GError **error);

/* Inserts a whole conversation in one transaction: all of it or nothing.  The ids,
 * parent_id and alternative_group of @messages (HanashiStoredMessage*, in creation order)
 * are references among themselves and may point only at earlier messages (0 = none).
 * With @keep_ids the stored ids are exactly those of @conversation and @messages (undoing a
 * delete); otherwise fresh ids are given and the references follow.  Returns the
 * conversation id, 0 on error. */
gint64 hanashi_store_insert_conversation (HanashiStore *self, const HanashiStoredConversation *conversation,
                                          GPtrArray *messages, gboolean keep_ids, GError **error);
/* Replaces every message of a conversation with @messages, ids kept (Undo of a message
 * deletion), in one transaction: on error nothing changed. */
gboolean hanashi_store_replace_messages (HanashiStore *self, gint64 conversation_id, GPtrArray *messages,
                                         GError **error);


/* Adds a message; @alternative_of = 0 starts a new group, otherwise joins that message's group.
 * One transaction: on failure (0 and @error set) nothing was written and @text is still the
 * caller's, so the window can leave it in the composer. */
gint64 hanashi_store_add_message (HanashiStore *self, gint64 conversation_id, gint64 parent_id,
                                  gint64 alternative_of, const char *role, const char *text,
                                  gboolean complete, GError **error);
/* Periodic update of a streaming reply (text so far, stats, complete flag). */
gboolean hanashi_store_update_message (HanashiStore *self, gint64 id, const char *text,
                                       int token_count, double generation_seconds,
                                       const char *params_json, gboolean complete, GError **error);
/* The same with a reasoning model's thinking and its duration (@thinking NULL: unchanged). */
gboolean hanashi_store_update_reply (HanashiStore *self, gint64 id, const char *text,
                                     const char *thinking, double thinking_seconds,
                                     int token_count, double generation_seconds,
                                     const char *params_json, gboolean complete, GError **error);
/* Keeps the sampler's records of a reply's tokens (hanashi_token_probs_pack; NULL clears). */
gboolean hanashi_store_set_token_probs (HanashiStore *self, gint64 id, GBytes *token_probs, GError **error);
gboolean hanashi_store_delete_message (HanashiStore *self, gint64 id, GError **error);
/* A copy the caller owns (hanashi_stored_message_free). */
HanashiStoredMessage *hanashi_store_dup_message (HanashiStore *self, gint64 id, GError **error);
/* All messages of a conversation in creation order. */
GPtrArray *hanashi_store_list_messages (HanashiStore *self, gint64 conversation_id, GError **error);
/* The alternatives (same group) of a message, in creation order, including itself. */
GPtrArray *hanashi_store_list_alternatives (HanashiStore *self, gint64 message_id, GError **error);
/* Makes @message_id the shown member of its alternative group (new messages start shown). */
gboolean hanashi_store_show_alternative (HanashiStore *self, gint64 message_id, GError **error);
/* Moves every child of @old_parent in the conversation under @new_parent. */
gboolean hanashi_store_reparent_children (HanashiStore *self, gint64 old_parent, gint64 new_parent,
                                          gint64 conversation_id, GError **error);
/* Deletes a message and every message that descends from it, in one transaction. */
gboolean hanashi_store_delete_branch (HanashiStore *self, gint64 message_id, GError **error);
/* Replies left unfinished by a crash (complete = 0). */
GPtrArray *hanashi_store_list_incomplete (HanashiStore *self, GError **error);

G_END_DECLS
