/* hanashi-markdown-table.c — Markdown tables as a GtkGrid of labels, and the quote style
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-markdown"

#include "config.h"

#include "hanashi-markdown-table.h"

/* The grid's size as last shown, kept on the widget. */
#define N_ROWS_KEY "hanashi-table-rows"
#define N_COLUMNS_KEY "hanashi-table-columns"

GtkWidget *
hanashi_markdown_table_new (void)
{
  GtkWidget *grid = gtk_grid_new ();
  /* No spacing: the cells' padding and borders (style.css) draw the rules between rows,
   * which gaps would break up. */
  gtk_grid_set_row_spacing (GTK_GRID (grid), 0);
  gtk_grid_set_column_spacing (GTK_GRID (grid), 0);
  gtk_widget_set_halign (grid, GTK_ALIGN_START);
  gtk_widget_add_css_class (grid, "markdown-table");
  return grid;
}

static GtkWidget *
create_cell (void)
{
  GtkWidget *label = gtk_label_new (NULL);
  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
  gtk_label_set_selectable (GTK_LABEL (label), TRUE);
  /* Selectable labels would otherwise take focus before the message actions. */
  gtk_widget_set_focus_on_click (label, FALSE);
  gtk_widget_set_hexpand (label, FALSE);
  gtk_widget_set_valign (label, GTK_ALIGN_FILL);
  gtk_label_set_yalign (GTK_LABEL (label), 0);
  gtk_widget_add_css_class (label, "cell");
  return label;
}

/* A column without colons reads like text, from the start.  GtkLabel mirrors xalign in
 * right-to-left locales, as it does for all text there. */
static float
column_xalign (HanashiMarkdownAlign align)
{
  switch (align)
    {
    case HANASHI_MARKDOWN_ALIGN_CENTER:
      return 0.5f;
    case HANASHI_MARKDOWN_ALIGN_RIGHT:
      return 1.0f;
    case HANASHI_MARKDOWN_ALIGN_LEFT:
    case HANASHI_MARKDOWN_ALIGN_DEFAULT:
    default:
      return 0.0f;
    }
}

void
hanashi_markdown_table_update (GtkWidget *table, const HanashiMarkdownBlock *block)
{
  g_return_if_fail (GTK_IS_GRID (table));
  g_return_if_fail (block != NULL && block->kind == HANASHI_MARKDOWN_BLOCK_TABLE);

  GtkGrid *grid = GTK_GRID (table);
  guint shown_rows = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (table), N_ROWS_KEY));
  guint shown_columns = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (table), N_COLUMNS_KEY));

  /* Another number of columns is another table (an alternative reply): start over. */
  if (shown_columns != block->n_columns)
    {
      GtkWidget *child;
      while ((child = gtk_widget_get_first_child (table)) != NULL)
        gtk_grid_remove (grid, child);
      shown_rows = 0;
    }
  for (guint row = block->n_rows; row < shown_rows; row++)
    for (guint column = 0; column < block->n_columns; column++)
      {
        GtkWidget *cell = gtk_grid_get_child_at (grid, (int) column, (int) row);
        if (cell != NULL)
          gtk_grid_remove (grid, cell);
      }

  for (guint row = 0; row < block->n_rows; row++)
    for (guint column = 0; column < block->n_columns; column++)
      {
        GtkWidget *cell = gtk_grid_get_child_at (grid, (int) column, (int) row);
        if (cell == NULL)
          {
            cell = create_cell ();
            gtk_grid_attach (grid, cell, (int) column, (int) row, 1, 1);
          }
        const char *markup = hanashi_markdown_block_get_cell (block, row, column);
        if (g_strcmp0 (gtk_label_get_label (GTK_LABEL (cell)), markup) != 0)
          gtk_label_set_markup (GTK_LABEL (cell), markup);
        gtk_label_set_xalign (GTK_LABEL (cell), column_xalign (block->alignments[column]));
        gboolean header = row < block->n_header_rows;
        if (header)
          gtk_widget_add_css_class (cell, "header");
        else
          gtk_widget_remove_css_class (cell, "header");
      }

  g_object_set_data (G_OBJECT (table), N_ROWS_KEY, GUINT_TO_POINTER (block->n_rows));
  g_object_set_data (G_OBJECT (table), N_COLUMNS_KEY, GUINT_TO_POINTER (block->n_columns));
}

void
hanashi_markdown_set_quote_depth (GtkWidget *widget, guint quote_depth)
{
  if (quote_depth > 0)
    gtk_widget_add_css_class (widget, "quote");
  else
    gtk_widget_remove_css_class (widget, "quote");
  /* A quote in a quote sits further in; the bar of the outer one is not drawn again. */
  gtk_widget_set_margin_start (widget, quote_depth > 1 ? (int) (quote_depth - 1) * 16 : 0);
}
