/* hanashi-markdown-table.h — a Markdown table (HanashiMarkdownBlock of kind TABLE) as a grid
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

#include "hanashi-markdown.h"

G_BEGIN_DECLS

/* A GtkGrid (CSS class "markdown-table") of one label per cell. */
GtkWidget *hanashi_markdown_table_new    (void);
/* Shows @block in @table, keeping the labels that are there: a table that grows row by row
 * while a reply streams changes only its new cells. */
void       hanashi_markdown_table_update (GtkWidget *table, const HanashiMarkdownBlock *block);

/* Sets a text, code or table widget off as quoted (CSS class "quote", indented by depth)
 * or not. */
void       hanashi_markdown_set_quote_depth (GtkWidget *widget, guint quote_depth);

G_END_DECLS
