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
  HANASHI_MARKDOWN_BLOCK_TABLE, /* @cells: @n_rows × @n_columns of Pango markup, for a grid */
} HanashiMarkdownBlockKind;

/* A table column's alignment, from the colons of the separator row (`:--`, `:-:`, `--:`). */
typedef enum {
  HANASHI_MARKDOWN_ALIGN_DEFAULT,
  HANASHI_MARKDOWN_ALIGN_LEFT,
  HANASHI_MARKDOWN_ALIGN_CENTER,
  HANASHI_MARKDOWN_ALIGN_RIGHT,
} HanashiMarkdownAlign;

typedef struct {
  HanashiMarkdownBlockKind kind;
  char *markup;
  char *code;
  char *language;
  /* How many block quotes the block sits in (0: none); the view marks quoted blocks. */
  guint quote_depth;
  /* Tables: the cells row by row (every row has @n_columns, missing cells are ""), the
   * first @n_header_rows of them the header; one alignment per column. */
  guint n_rows;
  guint n_columns;
  guint n_header_rows;
  char **cells;
  HanashiMarkdownAlign *alignments;
} HanashiMarkdownBlock;

/* The markup of the cell in @row and @column of a table block. */
const char *hanashi_markdown_block_get_cell (const HanashiMarkdownBlock *block, guint row, guint column);

void hanashi_markdown_block_free (HanashiMarkdownBlock *block);

/* Parses @text (UTF-8, @length or -1) into blocks; raw HTML is shown as text, never
 * interpreted. Always succeeds: md4c accepts any input.  Besides GitHub's dialect
 * (tables, strikethrough, task lists) it reads TeX math, `$…$` and `$$…$$`, which is
 * shown as code. */
GPtrArray *hanashi_markdown_render (const char *text, gssize length);

/* The text without its markup, on one line (blocks and line breaks become single spaces):
 * the sidebar's preview of a message. */
char *hanashi_markdown_to_plain (const char *text, gssize length);

G_END_DECLS
