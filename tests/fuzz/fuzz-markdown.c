/* libFuzzer target: the Markdown renderer of the chat view (md4c → blocks).  Every text
 * block and table cell must be markup that a GtkLabel accepts, or the label would show
 * nothing: Pango markup plus GtkLabel's own <a href="..." title="..."> links, which are
 * checked here by turning them into spans first.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <pango/pango.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hanashi-markdown.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
check_label_markup (const char *markup, GRegex *link_open, GRegex *link_close)
{
  GError *error = NULL;
  char *opened = g_regex_replace_literal (link_open, markup, -1, 0, "<span>", 0, NULL);
  char *spans = g_regex_replace_literal (link_close, opened, -1, 0, "</span>", 0, NULL);
  if (!pango_parse_markup (spans, -1, 0, NULL, NULL, NULL, &error)) {
    fprintf (stderr, "invalid label markup (%s): %s\n", error->message, markup);
    abort ();
  }
  g_free (opened);
  g_free (spans);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* the app only renders valid UTF-8 (GTK text is always valid UTF-8) */
  if (!g_utf8_validate ((const char *) data, (gssize) size, NULL))
    return 0;
  static GRegex *link_open, *link_close;
  if (link_open == NULL) {
    link_open = g_regex_new ("<a href=\"[^\"<>]*\"( title=\"[^\"<>]*\")?>", 0, 0, NULL);
    link_close = g_regex_new ("</a>", 0, 0, NULL);
  }
  GPtrArray *blocks = hanashi_markdown_render ((const char *) data, (gssize) size);
  for (guint i = 0; i < blocks->len; i++) {
    HanashiMarkdownBlock *b = blocks->pdata[i];
    if (b->kind == HANASHI_MARKDOWN_BLOCK_TEXT) {
      check_label_markup (b->markup, link_open, link_close);
    } else if (b->kind == HANASHI_MARKDOWN_BLOCK_TABLE) {
      /* a grid of n_rows × n_columns labels, each with an alignment */
      if (b->n_rows == 0 || b->n_columns == 0 || g_strv_length (b->cells) < b->n_rows * b->n_columns
          || b->n_header_rows > b->n_rows) {
        fprintf (stderr, "bad table: %u × %u, %u header rows\n", b->n_rows, b->n_columns, b->n_header_rows);
        abort ();
      }
      for (guint c = 0; c < b->n_columns; c++)
        if (b->alignments[c] > HANASHI_MARKDOWN_ALIGN_RIGHT)
          abort ();
      for (guint r = 0; r < b->n_rows; r++)
        for (guint c = 0; c < b->n_columns; c++)
          check_label_markup (hanashi_markdown_block_get_cell (b, r, c), link_open, link_close);
    }
  }
  g_ptr_array_unref (blocks);
  /* the sidebar preview: valid UTF-8 on one line */
  char *plain = hanashi_markdown_to_plain ((const char *) data, (gssize) size);
  if (!g_utf8_validate (plain, -1, NULL) || strchr (plain, '\n') != NULL) {
    fprintf (stderr, "bad plain text: %s\n", plain);
    abort ();
  }
  g_free (plain);
  return 0;
}
