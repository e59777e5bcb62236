/* test-markdown-view.c — what a reply's Markdown becomes in its message row: tables as a
 * grid of cells aligned as the separator row says, quotes set off by their style class, and
 * a table that streams in row by row keeping its grid.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>

#include "hanashi-message-row.h"
#include "test-screenshot.h"

static void
collect_widgets (GtkWidget *root, GType type, const char *css_class, GPtrArray *found)
{
  if (G_TYPE_CHECK_INSTANCE_TYPE (root, type) && (css_class == NULL || gtk_widget_has_css_class (root, css_class)))
    g_ptr_array_add (found, root);
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    collect_widgets (child, type, css_class, found);
}

static GtkWidget *
find_only (GtkWidget *root, GType type, const char *css_class)
{
  g_autoptr (GPtrArray) found = g_ptr_array_new ();
  collect_widgets (root, type, css_class, found);
  g_assert_cmpuint (found->len, ==, 1);
  return found->pdata[0];
}

static guint
count_widgets (GtkWidget *root, GType type, const char *css_class)
{
  g_autoptr (GPtrArray) found = g_ptr_array_new ();
  collect_widgets (root, type, css_class, found);
  return found->len;
}

static GtkLabel *
cell_at (GtkWidget *grid, int column, int row)
{
  GtkWidget *cell = gtk_grid_get_child_at (GTK_GRID (grid), column, row);
  g_assert_true (GTK_IS_LABEL (cell));
  return GTK_LABEL (cell);
}

static HanashiMessageRow *
row_for (HanashiMessage *message)
{
  HanashiMessageRow *row = g_object_ref_sink (hanashi_message_row_new ());
  hanashi_message_row_set_message (row, message);
  return row;
}

static void
test_table_grid (void)
{
  g_autoptr (HanashiMessage) message = hanashi_message_new (1, "assistant",
    "Sizes:\n\n"
    "| Model | Params | Note |\n"
    "|:-----:|-------:|------|\n"
    "| tiny | 1.1B | **fast** |\n"
    "| big | 70B |\n");
  g_autoptr (HanashiMessageRow) row = row_for (message);

  GtkWidget *grid = find_only (GTK_WIDGET (row), GTK_TYPE_GRID, "markdown-table");
  const char *texts[3][3] = {
    { "Model", "Params", "Note" },
    { "tiny", "1.1B", "fast" },
    { "big", "70B", "" },
  };
  const float xaligns[3] = { 0.5f, 1.0f, 0.0f };
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++)
      {
        GtkLabel *cell = cell_at (grid, c, r);
        g_assert_cmpstr (gtk_label_get_text (cell), ==, texts[r][c]);
        g_assert_cmpfloat (gtk_label_get_xalign (cell), ==, xaligns[c]);
        g_assert_true (gtk_widget_has_css_class (GTK_WIDGET (cell), "header") == (r == 0));
      }
  g_assert_null (gtk_grid_get_child_at (GTK_GRID (grid), 0, 3));
  g_assert_null (gtk_grid_get_child_at (GTK_GRID (grid), 3, 0));
  /* the bold cell keeps its markup */
  g_assert_cmpstr (gtk_label_get_label (cell_at (grid, 2, 1)), ==, "<b>fast</b>");

  /* Another version of the reply with another table: the grid shows that one only. */
  hanashi_message_set_text (message, "| a | b |\n|---|--:|\n| 1 | 2 |\n");
  grid = find_only (GTK_WIDGET (row), GTK_TYPE_GRID, "markdown-table");
  g_assert_cmpuint (count_widgets (grid, GTK_TYPE_LABEL, "cell"), ==, 4);
  g_assert_cmpstr (gtk_label_get_text (cell_at (grid, 1, 1)), ==, "2");
  g_assert_cmpfloat (gtk_label_get_xalign (cell_at (grid, 1, 1)), ==, 1.0f);
  hanashi_message_set_text (message, "No table now.");
  g_assert_cmpuint (count_widgets (GTK_WIDGET (row), GTK_TYPE_GRID, "markdown-table"), ==, 0);
}

static void
test_quote_style (void)
{
  g_autoptr (HanashiMessage) message = hanashi_message_new (2, "assistant", "Before\n\n> quoted ~~text~~\n\nAfter");
  g_autoptr (HanashiMessageRow) row = row_for (message);
  GtkWidget *quote = find_only (GTK_WIDGET (row), GTK_TYPE_LABEL, "quote");
  g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (quote)), ==, "quoted text");
  g_assert_cmpstr (gtk_label_get_label (GTK_LABEL (quote)), ==, "quoted <s>text</s>");

  /* The same labels are reused for other text: the quote's style goes with the quote. */
  hanashi_message_set_text (message, "Before\n\nMiddle\n\nAfter");
  g_assert_cmpuint (count_widgets (GTK_WIDGET (row), GTK_TYPE_LABEL, "quote"), ==, 0);
  hanashi_message_set_text (message, "> one\n>\n> > two");
  g_assert_cmpuint (count_widgets (GTK_WIDGET (row), GTK_TYPE_LABEL, "quote"), ==, 2);
}

/* A reply that streams a table token by token: once the grid is there it stays the same
 * widget and only gains cells, and every step leaves valid widgets (criticals are fatal). */
static void
test_streaming_table (void)
{
  const char *reply =
    "Here you go:\n\n"
    "| Language | Typing | Year |\n"
    "|:---------|:------:|-----:|\n"
    "| C | static | 1972 |\n"
    "| Python | dynamic | 1991 |\n"
    "| OCaml | static, *inferred* | 1996 |\n"
    "\nAnything else?";
  g_autoptr (HanashiMessage) message = hanashi_message_new (3, "assistant", "");
  hanashi_message_set_complete (message, FALSE);
  g_autoptr (HanashiMessageRow) row = row_for (message);

  GtkWidget *grid = NULL;
  guint cells = 0;
  gsize length = strlen (reply);
  /* pieces of three bytes, about what a tokenizer gives */
  for (gsize at = 0; at < length; at += 3)
    {
      g_autofree char *piece = g_strndup (reply + at, 3);
      hanashi_message_append_text (message, piece);
      guint grids = count_widgets (GTK_WIDGET (row), GTK_TYPE_GRID, "markdown-table");
      if (grid == NULL && grids == 1)
        {
          grid = find_only (GTK_WIDGET (row), GTK_TYPE_GRID, "markdown-table");
          g_object_add_weak_pointer (G_OBJECT (grid), (gpointer *) &grid);
        }
      if (grid != NULL)
        {
          g_assert_cmpuint (grids, ==, 1);
          g_assert_true (find_only (GTK_WIDGET (row), GTK_TYPE_GRID, "markdown-table") == grid);
          guint now = count_widgets (grid, GTK_TYPE_LABEL, "cell");
          g_assert_cmpuint (now, >=, cells);
          g_assert_cmpuint (now % 3, ==, 0);
          cells = now;
        }
    }
  hanashi_message_set_complete (message, TRUE);
  g_assert_nonnull (grid);
  g_assert_cmpuint (cells, ==, 12);
  g_assert_cmpstr (gtk_label_get_text (cell_at (grid, 1, 3)), ==, "static, inferred");
  g_object_remove_weak_pointer (G_OBJECT (grid), (gpointer *) &grid);
}

/* A reply with everything this renders, in a window with the app's style sheet: also the
 * screenshot (markdown-light.png, markdown-dark.png) for the docs.  The style sheet must
 * parse without a warning (warnings are fatal here). */
static void
test_screenshot_reply (void)
{
  g_autoptr (GtkCssProvider) css = gtk_css_provider_new ();
  gtk_css_provider_load_from_resource (css, "/io/github/hanashi/Hanashi/style.css");
  gtk_style_context_add_provider_for_display (gdk_display_get_default (), GTK_STYLE_PROVIDER (css),
                                              GTK_STYLE_PROVIDER_PRIORITY_APPLICATION);
  g_autoptr (HanashiMessage) message = hanashi_message_new (4, "assistant",
    "Three languages compared:\n\n"
    "| Language | Typing | First release |\n"
    "|:---------|:------:|--------------:|\n"
    "| C | static | 1972 |\n"
    "| Python | dynamic | 1991 |\n"
    "| OCaml | static, *inferred* | 1996 |\n\n"
    "> Premature optimization is the root of all evil.\n\n"
    "```c\nint\nmain (void)\n{\n  puts (\"hello\");  /* a greeting */\n  return 0;\n}\n```\n\n"
    "- [x] ~~compare syntax~~\n- [ ] compare speed\n\n"
    "The area is $\\pi r^2$, and in general\n\n$$\\int_a^b f(x)\\,dx = F(b) - F(a)$$\n");
  GtkWidget *window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 560, 470);
  HanashiMessageRow *row = hanashi_message_row_new ();
  hanashi_message_row_set_message (row, message);
  /* In a scroller as in the chat: a window sized by its content would take the height
   * its wrapping labels need at their narrowest. */
  GtkWidget *scroller = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (scroller), GTK_POLICY_NEVER, GTK_POLICY_AUTOMATIC);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (scroller), GTK_WIDGET (row));
  gtk_window_set_child (GTK_WINDOW (window), scroller);
  gtk_window_present (GTK_WINDOW (window));
  while (!gtk_widget_get_mapped (window))
    g_main_context_iteration (NULL, TRUE);
  /* Nothing focused, as in the chat where the composer has the focus: a selectable label
   * given the window's first focus would show its text selected. */
  gtk_window_set_focus (GTK_WINDOW (window), NULL);
  test_screenshot_settle ();
  GtkWidget *grid = find_only (GTK_WIDGET (row), GTK_TYPE_GRID, "markdown-table");
  /* the grid is as wide as its columns need, not the whole reply */
  g_assert_cmpint (gtk_widget_get_width (grid), <, gtk_widget_get_width (GTK_WIDGET (row)));
  test_screenshot (window, "markdown");
  gtk_window_destroy (GTK_WINDOW (window));
  gtk_style_context_remove_provider_for_display (gdk_display_get_default (), GTK_STYLE_PROVIDER (css));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  gtk_init ();
  adw_init ();
  g_test_add_func ("/markdown-view/table-grid", test_table_grid);
  g_test_add_func ("/markdown-view/quote-style", test_quote_style);
  g_test_add_func ("/markdown-view/streaming-table", test_streaming_table);
  g_test_add_func ("/markdown-view/screenshot", test_screenshot_reply);
  return g_test_run ();
}
