/* test-code-blocks.c — a reply's code blocks in the chat list are as tall as their lines:
 * while the reply streams in token by token, when it ends, after switching between the
 * versions of a reply, after the window is resized, and after the list recycled the row
 * (scrolled away and back).  Each check compares the block's allocated height with its
 * number of lines times the height of a line of its font, so a block clipped to a line
 * or collapsed to nothing fails, whatever the block is made of.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>

#include "hanashi-chat-view.h"
#include "hanashi-code-block.h"
#include "hanashi-message-row.h"
#include "hanashi-store.h"
#include "hanashi-window.h"
#include "test-scripted.h"
#include "test-widgets.h"
#include "test-window-helpers.h"

/* Lines short enough for a 400 pixel wide window, so each is one line on screen. */
static const char *const first_code =
  "def fib(n):\n"
  "    a, b = 0, 1\n"
  "    for _ in range(n):\n"
  "        a, b = b, a + b\n"
  "    return a\n"
  "\n"
  "for i in range(10):\n"
  "    print(i, fib(i))";

static const char *const second_code =
  "#include <stdio.h>\n"
  "\n"
  "int main (void)\n"
  "{\n"
  "  for (int i = 0; i < 3; i++)\n"
  "    printf (\"%d\\n\", i);\n"
  "  return 0;\n"
  "}\n"
  "/* three lines of output */\n"
  "/* and nothing else */\n"
  "/* the end */";

static guint
count_lines (const char *code)
{
  guint lines = 1;
  for (const char *p = code; *p; p++)
    lines += *p == '\n';
  return lines;
}

/* A reply around @code, as the scripted model's tokens: a few bytes each, the way a
 * tokenizer cuts text (fences and newlines fall inside pieces). */
static GStrv
reply_pieces (const char *intro, const char *language, const char *code)
{
  g_autofree char *text = g_strdup_printf ("%s\n\n```%s\n%s\n```\n\nThat is all.", intro, language, code);
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  gsize length = strlen (text);
  for (gsize at = 0; at < length; at += 4)
    {
      g_autofree char *piece = g_strndup (text + at, 4);
      g_strv_builder_add (builder, piece);
    }
  return g_strv_builder_end (builder);
}

static void
collect_code_blocks (GtkWidget *root, GPtrArray *found)
{
  if (gtk_widget_has_css_class (root, "code-block"))
    g_ptr_array_add (found, root);
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    collect_code_blocks (child, found);
}

/* The height of one line of @widget's text in its font (the code font). */
static int
line_height (GtkWidget *widget)
{
  g_autoptr (PangoLayout) layout = gtk_widget_create_pango_layout (widget, "Xg");
  int width, height;
  pango_layout_get_pixel_size (layout, &width, &height);
  g_assert_cmpint (height, >, 0);
  return height;
}

/* The code block of @message's row (waiting for the row), as tall as @lines lines of its
 * font and as its own measure says, within its row, and its row within the list's rows. */
static void
assert_code_height (HanashiWindow *window, HanashiMessage *message, guint lines, const char *when)
{
  RowWanted wanted = { window, message };
  wait_until (row_shown, &wanted);
  GtkWidget *row = GTK_WIDGET (row_for (GTK_WIDGET (window), message));
  g_autoptr (GPtrArray) blocks = g_ptr_array_new ();
  collect_code_blocks (row, blocks);
  g_assert_cmpuint (blocks->len, ==, 1);
  GtkWidget *block = blocks->pdata[0];
  g_assert_true (gtk_widget_get_mapped (block));

  int width = gtk_widget_get_width (block), height = gtk_widget_get_height (block);
  int minimum, natural;
  /* A measure includes the widget's margins, its allocation does not. */
  int margins_x = gtk_widget_get_margin_start (block) + gtk_widget_get_margin_end (block);
  int margins_y = gtk_widget_get_margin_top (block) + gtk_widget_get_margin_bottom (block);
  gtk_widget_measure (block, GTK_ORIENTATION_VERTICAL, width + margins_x, &minimum, &natural, NULL, NULL);
  minimum -= margins_y;
  natural -= margins_y;
  int line = line_height (block);
  /* A text view rounds each line to whole pixels, a pixel less than the layout's at most. */
  int needed = (int) lines * (line - 1);
  g_test_message ("%s: %u lines of %d px: allocated %d × %d, measured %d (natural %d), needed %d",
                  when, lines, line, width, height, minimum, natural, needed);
  if (height < needed || height < minimum)
    g_error ("%s: the code block is %d px tall, its %u lines need %d px (its measure says %d)",
             when, height, lines, needed, minimum);
  /* Not taller than its lines and some padding either: a stale height from other text
   * (a longer version of the reply, a narrower window) is as wrong as a clipped one. */
  if (height > needed + 2 * line + 32)
    g_error ("%s: the code block is %d px tall for %u lines of %d px", when, height, lines, line);

  /* The row holds the whole block: rows are laid out one after another, so a block
   * overflowing its row would be drawn over by the next message. */
  graphene_rect_t in_row;
  g_assert_true (gtk_widget_compute_bounds (block, row, &in_row));
  int row_height = gtk_widget_get_height (row);
  if (in_row.origin.y < 0 || in_row.origin.y + in_row.size.height > row_height + 0.5)
    g_error ("%s: the code block (%g..%g) sticks out of its row (0..%d)", when,
             in_row.origin.y, in_row.origin.y + in_row.size.height, row_height);
  int row_min;
  gtk_widget_measure (row, GTK_ORIENTATION_VERTICAL, gtk_widget_get_width (row), &row_min, NULL, NULL, NULL);
  if (row_height < row_min)
    g_error ("%s: the row is %d px tall, less than the %d px it needs", when, row_height, row_min);
}

typedef struct {
  HanashiWindow *window;
  guint index;
  gsize length;
} TextWanted;

/* The message at index has at least this many bytes of text. */
static gboolean
text_reached (gpointer data)
{
  TextWanted *wanted = data;
  GListModel *messages = hanashi_window_get_messages (wanted->window);
  if (g_list_model_get_n_items (messages) <= wanted->index)
    return FALSE;
  return strlen (hanashi_message_get_text (message_at (wanted->window, wanted->index))) >= wanted->length;
}

/* The number of lines of the code block in @text so far (an open fence counts). */
static guint
lines_so_far (const char *text)
{
  const char *open = strstr (text, "```");
  g_assert_nonnull (open);
  const char *code = strchr (open, '\n');
  if (code == NULL)
    return 0;
  code++;
  const char *close = strstr (code, "```");
  g_autofree char *body = close ? g_strndup (code, close - code) : g_strdup (code);
  /* the newline before the closing fence, or one the stream stopped after, ends a line */
  gsize n = strlen (body);
  if (n > 0 && body[n - 1] == '\n')
    body[n - 1] = '\0';
  return *body ? count_lines (body) : 0;
}

/* Streams a reply with a code block one token at a time, letting a few frames pass after
 * each as a model writing at reading speed does, then lets it end: the block is as tall
 * as its lines after every token. */
static void
stream_and_check (HanashiWindow *window, guint index, const char *const *pieces, const char *what)
{
  guint n_pieces = g_strv_length ((char **) pieces);
  gsize length = 0;
  for (guint token = 1; token <= n_pieces; token++)
    {
      length += strlen (pieces[token - 1]);
      hanashi_test_scripted_hold_at (token < n_pieces ? (int) token : -1);
      TextWanted wanted = { window, index, length };
      wait_until (text_reached, &wanted);
      run_for (40);
      HanashiMessage *reply = message_at (window, index);
      const char *text = hanashi_message_get_text (reply);
      guint lines = strstr (text, "```") != NULL ? lines_so_far (text) : 0;
      if (lines == 0)
        continue;
      g_autofree char *when = g_strdup_printf ("%s, streaming (token %u of %u)", what, token, n_pieces);
      assert_code_height (window, reply, lines, when);
    }
  wait_until (reply_done, window);
}

static gboolean
is_narrower_than_600 (gpointer window)
{
  return gtk_widget_get_width (window) < 600;
}

static gboolean
is_wider_than_1000 (gpointer window)
{
  return gtk_widget_get_width (window) > 1000;
}

static void
test_streamed_and_switched (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  g_auto (GStrv) first = reply_pieces ("Here is a Fibonacci function:", "python", first_code);
  g_auto (GStrv) second = reply_pieces ("The same in C:", "c", second_code);
  guint first_lines = count_lines (first_code), second_lines = count_lines (second_code);

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  hanashi_params_panel_set_params_json (get_panel (window), "{\"max_new_tokens\": 1000}");
  hanashi_test_scripted_set_reply ((const char *const *) first);
  hanashi_test_scripted_hold_at (1);
  send_text (window, "Show me some code");
  stream_and_check (window, 1, (const char *const *) first, "first reply");
  settle ();
  assert_code_height (window, message_at (window, 1), first_lines, "first reply, done");

  /* Another version of the reply, with another code block. */
  hanashi_test_scripted_set_reply ((const char *const *) second);
  hanashi_test_scripted_hold_at (1);
  click_message_button (window, "chat.regenerate", message_at (window, 1));
  stream_and_check (window, 1, (const char *const *) second, "second version");
  settle ();
  assert_code_height (window, message_at (window, 1), second_lines, "second version, done");

  /* Switching versions shows the other block at its own height, both ways. */
  click_message_button (window, "row.previous-alternative", message_at (window, 1));
  settle ();
  assert_code_height (window, message_at (window, 1), first_lines, "switched to the first version");
  click_message_button (window, "row.next-alternative", message_at (window, 1));
  settle ();
  assert_code_height (window, message_at (window, 1), second_lines, "switched to the second version");
  click_message_button (window, "row.previous-alternative", message_at (window, 1));

  /* Narrow and wide again. */
  gtk_window_set_default_size (GTK_WINDOW (window), 400, 700);
  wait_until (is_narrower_than_600, window);
  settle ();
  assert_code_height (window, message_at (window, 1), first_lines, "narrow window");
  gtk_window_set_default_size (GTK_WINDOW (window), 1100, 760);
  wait_until (is_wider_than_1000, window);
  settle ();
  assert_code_height (window, message_at (window, 1), first_lines, "wide window again");

  hanashi_test_scripted_set_reply (NULL);
  gtk_window_destroy (GTK_WINDOW (window));
}

static void
collect_rows (GtkWidget *root, GPtrArray *found)
{
  if (HANASHI_IS_MESSAGE_ROW (root))
    g_ptr_array_add (found, root);
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    collect_rows (child, found);
}

/* Every row on screen in @window's list with a code block has it at its full height;
 * returns how many there were. */
static guint
assert_visible_code_heights (HanashiWindow *window, const char *when)
{
  GtkWidget *list = find_by_type (GTK_WIDGET (get_chat_view (window)), GTK_TYPE_LIST_VIEW);
  GtkWidget *scroller = gtk_widget_get_ancestor (list, GTK_TYPE_SCROLLED_WINDOW);
  g_autoptr (GPtrArray) rows = g_ptr_array_new ();
  collect_rows (list, rows);
  guint checked = 0;
  for (guint i = 0; i < rows->len; i++)
    {
      GtkWidget *row = rows->pdata[i];
      HanashiMessage *message = hanashi_message_row_get_message (HANASHI_MESSAGE_ROW (row));
      graphene_rect_t bounds;
      if (message == NULL || !gtk_widget_get_mapped (row) || !gtk_widget_compute_bounds (row, scroller, &bounds))
        continue;
      if (bounds.origin.y + bounds.size.height <= 0 || bounds.origin.y >= gtk_widget_get_height (scroller))
        continue;
      const char *text = hanashi_message_get_text (message);
      if (strstr (text, "```") == NULL)
        continue;
      g_autofree char *where = g_strdup_printf ("%s, message %" G_GINT64_FORMAT, when, hanashi_message_get_id (message));
      assert_code_height (window, message, lines_so_far (text), where);
      checked++;
    }
  return checked;
}

/* A long chat of replies with code, scrolled through a page at a time from its end to its
 * top and back: the list view makes rows for the messages coming into view from the rows
 * that left it (bound anew, their code set while the list lays itself out), and each block
 * on screen is as tall as its lines. */
static void
test_recycled_rows (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  HanashiStore *store = hanashi_window_get_store (window);
  gint64 conversation = hanashi_store_create_conversation (store, "Code", NULL);
  gint64 parent = 0;
  for (guint i = 0; i < 30; i++)
    {
      g_autofree char *question = g_strdup_printf ("Question %u", i);
      g_autofree char *answer = g_strdup_printf ("Answer %u:\n\n```%s\n%s\n```\n", i, i % 2 ? "c" : "python",
                                                 i % 2 ? second_code : first_code);
      parent = hanashi_store_add_message (store, conversation, parent, 0, "user", question, TRUE, NULL);
      parent = hanashi_store_add_message (store, conversation, parent, 0, "assistant", answer, TRUE, NULL);
      g_assert_cmpint (parent, >, 0);
    }
  hanashi_window_load_conversation (window, conversation);
  settle ();
  HanashiChatView *view = get_chat_view (window);
  GtkAdjustment *adj = hanashi_chat_view_get_vadjustment (view);
  guint checked = assert_visible_code_heights (window, "opened at the end");
  g_assert_cmpuint (checked, >, 0);

  hanashi_chat_view_stop_following (view);
  for (int pass = 0; pass < 2; pass++)
    {
      /* Up to the top, then down to the end again. */
      for (int step = 0; step < 200; step++)
        {
          double value = gtk_adjustment_get_value (adj);
          double page = gtk_adjustment_get_page_size (adj);
          double next = pass == 0 ? MAX (0, value - page * 0.8)
                                  : MIN (gtk_adjustment_get_upper (adj) - page, value + page * 0.8);
          gtk_adjustment_set_value (adj, next);
          settle ();
          g_autofree char *when = g_strdup_printf ("scrolled %s to %.0f", pass == 0 ? "up" : "down", gtk_adjustment_get_value (adj));
          checked += assert_visible_code_heights (window, when);
          if (pass == 0 ? gtk_adjustment_get_value (adj) <= 0
                        : gtk_adjustment_get_value (adj) >= gtk_adjustment_get_upper (adj) - gtk_adjustment_get_page_size (adj) - 1)
            break;
        }
    }
  g_test_message ("%u code blocks checked", checked);
  gtk_window_destroy (GTK_WINDOW (window));
}

/* The colour Pango draws the byte at @index of @label's text in: FALSE where the
 * label's own colour applies. */
static gboolean
foreground_at (GtkLabel *label, int index, PangoColor *color)
{
  PangoAttrList *attributes = gtk_label_get_attributes (label);
  if (attributes == NULL)
    return FALSE;
  PangoAttrIterator *iter = pango_attr_list_get_iterator (attributes);
  gboolean found = FALSE;
  do
    {
      int start, end;
      pango_attr_iterator_range (iter, &start, &end);
      if (index >= start && index < end)
        {
          PangoAttribute *attribute = pango_attr_iterator_get (iter, PANGO_ATTR_FOREGROUND);
          if (attribute != NULL)
            {
              *color = ((PangoAttrColor *) attribute)->color;
              found = TRUE;
            }
          break;
        }
    }
  while (pango_attr_iterator_next (iter));
  pango_attr_iterator_destroy (iter);
  return found;
}

static gboolean
same_color (const PangoColor *a, const PangoColor *b)
{
  return a->red == b->red && a->green == b->green && a->blue == b->blue;
}

static GtkLabel *
code_label (GtkWidget *block)
{
  g_autoptr (GPtrArray) found = g_ptr_array_new ();
  collect_code_blocks (block, found);
  g_assert_cmpuint (found->len, ==, 1);
  g_assert_true (GTK_IS_LABEL (found->pdata[0]));
  return found->pdata[0];
}

static void
text_read (GObject *source, GAsyncResult *result, gpointer data)
{
  *(char **) data = gdk_clipboard_read_text_finish (GDK_CLIPBOARD (source), result, NULL);
}

static gboolean
pointer_set (gpointer data)
{
  return *(char **) data != NULL;
}

/* The block on its own: the code as typed, selectable, coloured by its language (light
 * and dark, and the tail of a streaming block too), plain without one, and its copy
 * button copies exactly the code. */
static void
test_highlighting_and_copy (void)
{
  GtkWidget *window = gtk_window_new ();
  GtkWidget *block = hanashi_code_block_new ();
  gtk_window_set_child (GTK_WINDOW (window), block);
  gtk_window_present (GTK_WINDOW (window));
  wait_until (is_mapped, window);
  GtkLabel *label = code_label (block);
  /* foreground_at fills them where it returns TRUE; zeroed for gcc -O3, which cannot tell */
  PangoColor keyword_light = { 0 }, keyword_dark = { 0 }, color = { 0 };

  /* bytes: "x = 1\n" 0..5, "if" 6..7, " x:" 8..10 */
  hanashi_code_block_set_code (HANASHI_CODE_BLOCK (block), "x = 1\n", "Python");
  g_assert_cmpstr (gtk_label_get_text (label), ==, "x = 1\n");
  g_assert_true (gtk_label_get_selectable (label));
  g_assert_true (gtk_widget_has_css_class (GTK_WIDGET (label), "monospace"));
  /* streamed on: the new tail is coloured too */
  hanashi_code_block_set_code (HANASHI_CODE_BLOCK (block), "x = 1\nif x:\n    pass", "Python");
  g_assert_cmpstr (hanashi_code_block_get_code (HANASHI_CODE_BLOCK (block)), ==, "x = 1\nif x:\n    pass");
  g_assert_true (foreground_at (label, 6, &keyword_light));
  g_assert_true (foreground_at (label, 7, &color));
  g_assert_true (same_color (&color, &keyword_light));
  g_assert_false (foreground_at (label, 0, &color));   /* a name: the label's colour */
  g_assert_true (foreground_at (label, 4, &color));    /* a number */
  g_assert_false (same_color (&color, &keyword_light));

  AdwStyleManager *style = adw_style_manager_get_default ();
  adw_style_manager_set_color_scheme (style, ADW_COLOR_SCHEME_FORCE_DARK);
  g_assert_true (foreground_at (label, 6, &keyword_dark));
  g_assert_false (same_color (&keyword_dark, &keyword_light));
  adw_style_manager_set_color_scheme (style, ADW_COLOR_SCHEME_FORCE_LIGHT);
  g_assert_true (foreground_at (label, 6, &color));
  g_assert_true (same_color (&color, &keyword_light));
  adw_style_manager_set_color_scheme (style, ADW_COLOR_SCHEME_DEFAULT);

  /* Other code in a language nobody knows, or none: plain. */
  hanashi_code_block_set_code (HANASHI_CODE_BLOCK (block), "if x:\n    pass", "no-such-language");
  g_assert_cmpstr (gtk_label_get_text (label), ==, "if x:\n    pass");
  g_assert_false (foreground_at (label, 0, &color));
  hanashi_code_block_set_code (HANASHI_CODE_BLOCK (block), "if x:\n    pass", NULL);
  g_assert_false (foreground_at (label, 0, &color));
  hanashi_code_block_set_code (HANASHI_CODE_BLOCK (block), "if x:\n    pass", "python");
  g_assert_true (foreground_at (label, 0, &color));

  GtkWidget *copy = find_by_type (block, GTK_TYPE_BUTTON);
  g_assert_nonnull (copy);
  g_signal_emit_by_name (copy, "clicked");
  g_autofree char *copied = NULL;
  gdk_clipboard_read_text_async (gtk_widget_get_clipboard (block), NULL, text_read, &copied);
  wait_until (pointer_set, &copied);
  g_assert_cmpstr (copied, ==, "if x:\n    pass");
  gtk_window_destroy (GTK_WINDOW (window));
}

int
main (int argc, char **argv)
{
  scripted_test_init (&argc, &argv);
  write_scripted_model (g_get_user_data_dir ());

  g_test_add_func ("/Hanashi/CodeBlocks/highlighting-and-copy", test_highlighting_and_copy);
  g_test_add_func ("/Hanashi/CodeBlocks/streamed-and-switched", test_streamed_and_switched);
  g_test_add_func ("/Hanashi/CodeBlocks/recycled-rows", test_recycled_rows);
  int status = g_test_run ();
  g_free (model_path);
  return status;
}
