/* hanashi-conversation-io.h — a conversation to and from Markdown and the versioned JSON
 * format described in docs/conversations.md
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "hanashi-store.h"

G_BEGIN_DECLS

#define HANASHI_CONVERSATION_FORMAT "hanashi-conversation"
#define HANASHI_CONVERSATION_FORMAT_VERSION 1

#define HANASHI_CONVERSATION_IO_ERROR (hanashi_conversation_io_error_quark ())
GQuark hanashi_conversation_io_error_quark (void);

typedef enum {
  HANASHI_CONVERSATION_IO_ERROR_INVALID,     /* not JSON, or a field has the wrong type or value */
  HANASHI_CONVERSATION_IO_ERROR_UNSUPPORTED, /* another format or a newer version */
} HanashiConversationIoError;

/* A parsed, validated conversation that is not in the store yet. */
typedef struct {
  HanashiStoredConversation *conversation;
  GPtrArray *messages; /* HanashiStoredMessage*, in file order; ids are the file's own */
} HanashiConversationData;

void hanashi_conversation_data_free (HanashiConversationData *data);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiConversationData, hanashi_conversation_data_free)

/* Reads the conversation and all its messages from the store. */
HanashiConversationData *hanashi_conversation_data_load (HanashiStore *store, gint64 id, GError **error);

/* The thread ending at the newest message as Markdown (see docs/conversations.md). */
char *hanashi_conversation_data_to_markdown (const HanashiConversationData *data);
char *hanashi_conversation_export_markdown (HanashiStore *store, gint64 id, GError **error);

/* Every message, alternatives included, in the JSON format (pretty-printed, UTF-8). */
char *hanashi_conversation_data_to_json (const HanashiConversationData *data);
char *hanashi_conversation_export_json (HanashiStore *store, gint64 id, GError **error);

/* Parses and validates @length bytes (need not end in NUL) without touching any store;
 * every field is type-checked.  The fuzz target calls this. */
HanashiConversationData *hanashi_conversation_import_json_data (const char *data, gsize length, GError **error);

/* Parses, validates and inserts in one transaction: on error the store is unchanged.
 * Returns the new conversation id, 0 on error. */
gint64 hanashi_conversation_import_json (HanashiStore *store, const char *data, gsize length, GError **error);

/* A one-line title from the first user message: whitespace collapsed, at most
 * @max_chars characters, cut at a word (or CJK punctuation) boundary when one is near,
 * with "…" when shortened.  Returns "" for blank text. */
char *hanashi_conversation_title_from_text (const char *text, guint max_chars);

/* A title or file name without Markdown syntax: @text is read as Markdown (emphasis,
 * code spans, links, headings, list and quote markers go, their text stays), every line
 * break becomes a space, and emphasis or code delimiters left unpaired (a title cut
 * short in the middle of "**bold**") are dropped where they open or close a word.
 * Delimiters inside a word ("snake_case", "2*3") or standing alone ("a * b") stay.
 * Returns "" for NULL or invalid UTF-8. */
char *hanashi_conversation_title_strip_markdown (const char *text);

/* The file name offered when a chat is exported: its title as plain text (as above),
 * with characters that cannot or should not be in a file name ("/", "\\", control
 * characters) replaced by "-", a leading "." dropped (no hidden file), "New Chat" for a
 * blank title, then @extension (".md", ".json"). */
char *hanashi_conversation_export_file_name (const char *title, const char *extension);

G_END_DECLS
