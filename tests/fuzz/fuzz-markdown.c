/* libFuzzer target: the Markdown renderer of the chat view (md4c → blocks).  Every text
 * block must be markup that a GtkLabel accepts, or the label would show nothing: Pango
 * markup plus GtkLabel's own <a href="..." title="..."> links, which are checked here by
 * turning them into spans first.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <pango/pango.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hanashi-markdown.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

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
    if (b->kind != HANASHI_MARKDOWN_BLOCK_TEXT)
      continue;
    GError *error = NULL;
    char *opened = g_regex_replace_literal (link_open, b->markup, -1, 0, "<span>", 0, NULL);
    char *spans = g_regex_replace_literal (link_close, opened, -1, 0, "</span>", 0, NULL);
    if (!pango_parse_markup (spans, -1, 0, NULL, NULL, NULL, &error)) {
      fprintf (stderr, "invalid label markup (%s): %s\n", error->message, b->markup);
      abort ();
    }
    g_free (opened);
    g_free (spans);
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
