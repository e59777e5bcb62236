/* hanashi-markdown.h — Markdown (md4c, GitHub dialect) to blocks of Pango markup and code
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  HANASHI_MARKDOWN_BLOCK_TEXT,  /* @markup is Pango markup for a GtkLabel */
  HANASHI_MARKDOWN_BLOCK_CODE,  /* @code is raw text for a GtkSourceView, @language may be NULL */
} HanashiMarkdownBlockKind;

typedef struct {
  HanashiMarkdownBlockKind kind;
  char *markup;
  char *code;
  char *language;
} HanashiMarkdownBlock;

void hanashi_markdown_block_free (HanashiMarkdownBlock *block);

/* Parses @text (UTF-8, @length or -1) into blocks; raw HTML is shown as text, never
 * interpreted. Always succeeds: md4c accepts any input. */
GPtrArray *hanashi_markdown_render (const char *text, gssize length);

/* The text without its markup, on one line (blocks and line breaks become single spaces):
 * the sidebar's preview of a message. */
char *hanashi_markdown_to_plain (const char *text, gssize length);

G_END_DECLS
