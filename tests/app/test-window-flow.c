/* The window as a user goes through it (issue 20): a chat opens at its end and a sent
 * message comes into view; code blocks keep their height; the numbers in the header and
 * under replies tell the truth; no text is selected by itself after an action; Undo of a
 * deletion lasts; the folded layout shows the chat that is tapped.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>

#include "hanashi-conversation-item.h"
#include "hanashi-conversation-row.h"
#include "hanashi-test-seams.h"
#include "hanashi-sidebar.h"
#include "test-widgets.h"
#include "test-scripted.h"
#include "test-window-helpers.h"
#include "test-xdg.h"

/* Closes @window once its toasts have left (see no_undo_toast). */
static void
close_window (HanashiWindow *window)
{
  wait_until (no_undo_toast, window);
  run_for (400);
  gtk_window_destroy (GTK_WINDOW (window));
}

static GtkAdjustment *
vadjustment (HanashiWindow *window)
{
  return hanashi_chat_view_get_vadjustment (get_chat_view (window));
}

static gboolean
at_end (GtkAdjustment *adj)
{
  return gtk_adjustment_get_value (adj) + gtk_adjustment_get_page_size (adj) >= gtk_adjustment_get_upper (adj) - 1;
}

/* The scrolled window around the message list. */
static GtkWidget *
chat_scroller (HanashiWindow *window)
{
  GtkWidget *list = find_by_type (GTK_WIDGET (get_chat_view (window)), GTK_TYPE_LIST_VIEW);
  return gtk_widget_get_ancestor (list, GTK_TYPE_SCROLLED_WINDOW);
}

/* Whether @message's row lies inside the visible part of the chat, entirely. */
static gboolean
row_in_view (HanashiWindow *window, HanashiMessage *message)
{
  HanashiMessageRow *row = row_for (GTK_WIDGET (window), message);
  GtkWidget *scroller = chat_scroller (window);
  graphene_rect_t bounds;

  if (row == NULL || !gtk_widget_get_mapped (GTK_WIDGET (row)) ||
      !gtk_widget_compute_bounds (GTK_WIDGET (row), scroller, &bounds))
    return FALSE;
  if (bounds.origin.y >= -1 && bounds.origin.y + bounds.size.height <= gtk_widget_get_height (scroller) + 1)
    return TRUE;
  GtkAdjustment *adj = vadjustment (window);
  g_test_message ("row at %.0f+%.0f in %d; adjustment %.0f/%.0f page %.0f", bounds.origin.y, bounds.size.height,
                  gtk_widget_get_height (scroller), gtk_adjustment_get_value (adj), gtk_adjustment_get_upper (adj),
                  gtk_adjustment_get_page_size (adj));
  return FALSE;
}

static gint64
make_conversation (HanashiStore *store, const char *title, guint n, guint lines)
{
  gint64 conversation = hanashi_store_create_conversation (store, title, NULL);
  gint64 parent = 0;
  for (guint i = 0; i < n; i++)
    {
      g_autoptr (GString) text = g_string_new (NULL);
      for (guint l = 0; l < lines; l++)
        g_string_append_printf (text, "%s%s message %u, line %u", l ? "\n\n" : "", title, i, l);
      parent = hanashi_store_add_message (store, conversation, parent, 0, i % 2 ? "assistant" : "user", text->str, TRUE, NULL);
      g_assert_cmpint (parent, >, 0);
    }
  return conversation;
}

static gboolean
ends_in_view (gpointer data)
{
  HanashiWindow *window = data;
  GListModel *messages = hanashi_window_get_messages (window);
  guint n = g_list_model_get_n_items (messages);
  return n > 0 && at_end (vadjustment (window)) && row_in_view (window, message_at (window, n - 1));
}

/* Item 1: a chat chosen in the sidebar opens at its end, whichever chat was open before;
 * a message sent while the view is up the thread brings it and the reply into view
 * before the first token (while the prompt is read). */
static void
test_scrolling (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  HanashiStore *store = hanashi_window_get_store (window);
  HanashiSidebar *sidebar = HANASHI_SIDEBAR (find_by_type (GTK_WIDGET (window), HANASHI_TYPE_SIDEBAR));
  gint64 longer = make_conversation (store, "Longer", 80, 3);
  gint64 shorter = make_conversation (store, "Shorter", 24, 2);
  GtkAdjustment *adj = vadjustment (window);

  hanashi_sidebar_reload (sidebar);
  const gint64 order[] = { longer, shorter, longer, shorter };
  for (guint i = 0; i < G_N_ELEMENTS (order); i++)
    {
      g_signal_emit_by_name (sidebar, "conversation-activated", order[i]);
      g_assert_cmpint (hanashi_window_get_conversation_id (window), ==, order[i]);
      settle ();
      g_assert_cmpfloat (gtk_adjustment_get_upper (adj), >, gtk_adjustment_get_page_size (adj));
      g_assert_true (at_end (adj));
      GListModel *messages = hanashi_window_get_messages (window);
      g_assert_true (row_in_view (window, message_at (window, g_list_model_get_n_items (messages) - 1)));
    }

  /* The user scrolls to the top, then sends: the prompt is still being read (the reply
   * holds before its first token), and the new message is already in view. */
  gtk_adjustment_set_value (adj, 0);
  hanashi_chat_view_stop_following (get_chat_view (window));
  settle ();
  g_assert_cmpfloat (gtk_adjustment_get_value (adj), ==, 0);
  hanashi_test_scripted_hold_at (0);
  send_text (window, "A question sent from the top of the chat");
  guint n = g_list_model_get_n_items (hanashi_window_get_messages (window));
  HanashiMessage *question = message_at (window, n - 2);
  g_assert_true (hanashi_message_is_user (question));
  wait_until (ends_in_view, window);
  g_assert_true (row_in_view (window, question));
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, n - 1)), ==, "");
  hanashi_test_scripted_hold_at (-1);
  wait_until (reply_done, window);
  settle ();
  g_assert_true (at_end (adj));
  close_window (window);
}

/* The code blocks' text widgets under @root, in order. */
static void
collect_code_views (GtkWidget *root, GPtrArray *views)
{
  if (gtk_widget_has_css_class (root, "code-block"))
    g_ptr_array_add (views, root);
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    collect_code_views (child, views);
}

/* A code block shows all of its lines: its allocated height holds every line as laid out
 * at its width (wrapped ones too), and is what the block asks for at that width. */
static void
assert_code_block_whole (HanashiWindow *window, HanashiMessage *message, guint n_lines)
{
  g_autoptr (GPtrArray) views = g_ptr_array_new ();
  HanashiMessageRow *row = row_for (GTK_WIDGET (window), message);
  g_assert_nonnull (row);
  collect_code_views (GTK_WIDGET (row), views);
  g_assert_cmpuint (views->len, ==, 1);

  GtkWidget *view = g_ptr_array_index (views, 0);
  g_assert_true (GTK_IS_LABEL (view));
  const char *text = gtk_label_get_text (GTK_LABEL (view));
  guint lines = 1;
  for (const char *p = text; *p; p++)
    lines += *p == '\n';
  g_assert_cmpuint (lines, ==, n_lines);
  PangoLayout *layout = gtk_label_get_layout (GTK_LABEL (view));
  PangoRectangle logical;
  pango_layout_get_pixel_extents (layout, NULL, &logical);
  int shown_lines = pango_layout_get_line_count (layout);
  int height = gtk_widget_get_height (view), width = gtk_widget_get_width (view);
  int margins_x = gtk_widget_get_margin_start (view) + gtk_widget_get_margin_end (view);
  int margins_y = gtk_widget_get_margin_top (view) + gtk_widget_get_margin_bottom (view);
  int minimum, natural;
  gtk_widget_measure (view, GTK_ORIENTATION_VERTICAL, width + margins_x, &minimum, &natural, NULL, NULL);
  g_test_message ("code block: %d px allocated, %d px asked, %d lines shown in %d px, %d px wide in a row of %d",
                  height, natural - margins_y, shown_lines, logical.height, width,
                  gtk_widget_get_width (GTK_WIDGET (row)));
  g_assert_cmpint (shown_lines, >=, (int) n_lines);
  g_assert_cmpint (height, >=, logical.height);
  g_assert_cmpint (height, >=, minimum - margins_y);
}

/* Some lines are long enough to wrap, so the block's height depends on its width. */
static const char * const code_reply[] = {
  "Here is the loop:\n\n", "```c\n", "for (int i = 0; i < 3; i++)\n", "  {\n",
  "    puts (\"one: a line long enough to wrap in a chat column of ordinary width, because it goes on and on and on and on and on and on and on\");\n",
  "    puts (\"two\");\n",
  "    puts (\"three: another line that is long enough to wrap at the width of the chat, for it too goes on and on and on and on and on and on\");\n",
  "  }\n", "return 0;\n", "```\n", "\nThat prints six lines.", NULL
};
#define CODE_LINES 7

static const char * const plain_reply[] = { "Nothing ", "to ", "show ", "here.", NULL };

/* Item 2: the height of a code block while it streams, after switching to the version of
 * the reply that has it, and after the window is resized. */
static void
test_code_block_heights (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  hanashi_test_scripted_set_reply (code_reply);
  /* Token by token, with frames drawn in between as a model writes at reading speed. */
  hanashi_test_scripted_hold_at (1);
  send_text (window, "Show me a loop");
  HanashiMessage *reply = message_at (window, 1);
  for (int token = 1; code_reply[token] != NULL; token++)
    {
      gsize before = strlen (hanashi_message_get_text (reply));
      hanashi_test_scripted_hold_at (token + 1);
      while (strlen (hanashi_message_get_text (reply)) == before)
        g_main_context_iteration (NULL, TRUE);
      run_for (60);
      /* Half written: the block has four of its lines. */
      if (token == 5)
        assert_code_block_whole (window, reply, 4);
    }
  hanashi_test_scripted_hold_at (-1);
  wait_until (reply_done, window);
  settle ();
  assert_code_block_whole (window, reply, CODE_LINES);

  /* A second version without code, then back to the first. */
  hanashi_test_scripted_set_reply (plain_reply);
  click_message_button (window, "chat.regenerate", reply);
  wait_until (reply_done, window);
  settle ();
  /* Not following the end (the user scrolled, or all fits): nothing else moves then. */
  hanashi_chat_view_stop_following (get_chat_view (window));
  click_message_button (window, "row.previous-alternative", message_at (window, 1));
  settle ();
  reply = message_at (window, 1);
  g_assert_nonnull (strstr (hanashi_message_get_text (reply), "```c"));
  assert_code_block_whole (window, reply, CODE_LINES);

  /* Narrower: the lines wrap, and the block grows with them. */
  gtk_window_set_default_size (GTK_WINDOW (window), 900, 700);
  settle ();
  assert_code_block_whole (window, reply, CODE_LINES);
  gtk_window_set_default_size (GTK_WINDOW (window), 1100, 760);
  settle ();
  assert_code_block_whole (window, reply, CODE_LINES);

  hanashi_test_scripted_set_reply (NULL);
  close_window (window);
}

typedef struct {
  GtkLabel   *label;
  const char *prefix;
} LabelWanted;

static gboolean
label_starts_with (gpointer data)
{
  LabelWanted *wanted = data;
  return g_str_has_prefix (gtk_label_get_label (wanted->label), wanted->prefix);
}

/* Waits for @label to start with @prefix, saying what it read when it never does. */
static void
wait_for_label (GtkLabel *label, const char *prefix)
{
  LabelWanted wanted = { label, prefix };
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (!label_starts_with (&wanted) && g_get_monotonic_time () < deadline)
    {
      g_main_context_iteration (NULL, FALSE);
      g_usleep (1000);
    }
  g_assert_cmpstr (gtk_label_get_label (label), ==, label_starts_with (&wanted) ? gtk_label_get_label (label) : prefix);
}

static gboolean
label_has_speed (gpointer data)
{
  return strstr (gtk_label_get_label (data), "tok/s") != NULL;
}

/* The footer label of @message's row (tokens and speed). */
static const char *
footer_text (HanashiWindow *window, HanashiMessage *message)
{
  HanashiMessageRow *row = row_for (GTK_WIDGET (window), message);
  g_assert_nonnull (row);
  for (GtkWidget *w = GTK_WIDGET (row); w != NULL;)
    {
      if (GTK_IS_LABEL (w) && strstr (gtk_label_get_label (GTK_LABEL (w)), "token") != NULL)
        return gtk_label_get_label (GTK_LABEL (w));
      /* Depth first through the row. */
      if (gtk_widget_get_first_child (w) != NULL)
        w = gtk_widget_get_first_child (w);
      else
        {
          while (w != GTK_WIDGET (row) && gtk_widget_get_next_sibling (w) == NULL)
            w = gtk_widget_get_parent (w);
          w = w == GTK_WIDGET (row) ? NULL : gtk_widget_get_next_sibling (w);
        }
    }
  return "";
}

/* Item 5: the context meter moves while a reply streams (the request's tokens plus those
 * written); the speed in the header is the open chat's; a stopped reply has its speed. */
static void
test_numbers (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  HanashiStore *store = hanashi_window_get_store (window);
  GtkLabel *status = find_status_label (GTK_WIDGET (window));
  const char *question = "How long is this?";

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  /* The scripted backend counts 4 tokens per message plus one per byte. */
  for (int held = 3; held <= 9; held += 3)
    {
      hanashi_test_scripted_hold_at (held);
      if (held == 3)
        send_text (window, question);
      g_autofree char *meter = g_strdup_printf ("%d / 512", (int) (4 + strlen (question)) + held);
      wait_for_label (status, meter);
      g_assert_true (hanashi_composer_get_generating (get_composer (window)));
    }
  hanashi_test_scripted_hold_at (-1);
  wait_until (reply_done, window);
  HanashiMessage *reply = message_at (window, 1);
  /* Done, the count of the whole conversation settles it. */
  g_autofree char *final = g_strdup_printf ("%d / 512", (int) (4 + strlen (question) + 4 + strlen (hanashi_message_get_text (reply))));
  wait_for_label (status, final);
  wait_until (label_has_speed, status);
  gint64 measured = hanashi_window_get_conversation_id (window);

  /* Another chat, whose reply has no speed: none is shown, not the other chat's. */
  gint64 other = hanashi_store_create_conversation (store, "Other", NULL);
  gint64 q = hanashi_store_add_message (store, other, 0, 0, "user", "Hi", TRUE, NULL);
  hanashi_store_add_message (store, other, q, 0, "assistant", "Hello", TRUE, NULL);
  hanashi_window_load_conversation (window, other);
  wait_for_label (status, "15 / 512");
  g_assert_null (strstr (gtk_label_get_label (status), "tok/s"));
  /* Back in the first chat, its own speed. */
  hanashi_window_load_conversation (window, measured);
  wait_until (label_has_speed, status);
  g_assert_nonnull (strstr (footer_text (window, message_at (window, 1)), "tokens/s"));

  /* A stopped reply tells its length and speed, under it and in the header. */
  hanashi_window_load_conversation (window, other);
  wait_for_label (status, "15 / 512");
  hanashi_params_panel_set_params_json (get_panel (window), "{\"max_new_tokens\": 100000}");
  hanashi_test_scripted_hold_at (40);
  send_text (window, "Go on and on");
  reply = message_at (window, 3);
  while (hanashi_message_get_text (reply)[0] == '\0' || strstr (hanashi_message_get_text (reply), "tok39 ") == NULL)
    g_main_context_iteration (NULL, TRUE);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.stop", NULL);
  hanashi_test_scripted_hold_at (-1);
  wait_until (reply_done, window);
  settle ();
  /* (The scripted backend still hands over the token it was holding.) */
  int n_tokens = hanashi_message_get_token_count (reply);
  g_assert_cmpint (n_tokens, >=, 40);
  g_assert_cmpint (n_tokens, <=, 41);
  g_assert_cmpfloat (hanashi_message_get_tokens_per_second (reply), >, 0);
  const char *footer = footer_text (window, reply);
  g_test_message ("stopped reply: %s", footer);
  g_autofree char *length = g_strdup_printf ("%d tokens · ", n_tokens);
  g_assert_true (g_str_has_prefix (footer, length));
  g_assert_nonnull (strstr (footer, "tokens/s"));
  wait_until (label_has_speed, status);
  close_window (window);
}

/* Ctrl+Z's action, as its accelerator activates it. */
static void
press_ctrl_z (HanashiWindow *window)
{
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "chat.undo-delete", NULL));
}

static gboolean
has_selected_label (GtkWidget *root)
{
  int start, end;
  if (GTK_IS_LABEL (root) && gtk_label_get_selectable (GTK_LABEL (root)) &&
      gtk_label_get_selection_bounds (GTK_LABEL (root), &start, &end))
    return TRUE;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    if (has_selected_label (child))
      return TRUE;
  return FALSE;
}

static void
assert_nothing_selected (HanashiWindow *window)
{
  settle ();
  g_assert_false (has_selected_label (GTK_WIDGET (get_chat_view (window))));
}

/* Item 6: regenerating, switching versions, deleting and undoing, with the focus on the
 * clicked button as after a real click, select no text by themselves (and log no
 * critical: criticals are fatal in the GUI tests). */
static void
test_no_stray_selection (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  hanashi_params_panel_set_params_json (get_panel (window), "{\"max_new_tokens\": 4}");
  send_text (window, "Pick a word");
  wait_until (reply_done, window);
  assert_nothing_selected (window);

  click_message_button (window, "chat.regenerate", message_at (window, 1));
  wait_until (reply_done, window);
  assert_nothing_selected (window);
  click_message_button (window, "row.previous-alternative", message_at (window, 1));
  assert_nothing_selected (window);
  click_message_button (window, "row.next-alternative", message_at (window, 1));
  assert_nothing_selected (window);

  click_message_button (window, "chat.delete", message_at (window, 1));
  assert_nothing_selected (window);
  /* Undo from the toast's button, which has the focus when it goes away with the toast. */
  GtkWidget *undo = find_button (GTK_WIDGET (window), "Undo");
  g_assert_nonnull (undo);
  gtk_widget_grab_focus (undo);
  g_signal_emit_by_name (undo, "clicked");
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 2);
  assert_nothing_selected (window);
  /* And with Ctrl+Z. */
  click_message_button (window, "chat.delete", message_at (window, 1));
  press_ctrl_z (window);
  g_assert_cmpuint (g_list_model_get_n_items (hanashi_window_get_messages (window)), ==, 2);
  assert_nothing_selected (window);

  /* The focus stays in the chat, on something that is still there. */
  GtkWidget *focus = gtk_root_get_focus (GTK_ROOT (window));
  g_assert_nonnull (focus);
  g_assert_true (gtk_widget_get_mapped (focus));
  close_window (window);
}

/* Item 7: the offer to undo a deletion outlasts the toast's usual five seconds and the
 * toast itself (Ctrl+Z), and ends with the next change to that chat. */
static void
test_undo_lasts (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1100, 760, TRUE);
  GListModel *messages = hanashi_window_get_messages (window);

  g_auto (GStrv) accels = gtk_application_get_accels_for_action (GTK_APPLICATION (app), "chat.undo-delete");
  g_assert_nonnull (accels[0]);
  guint key;
  GdkModifierType mods;
  g_assert_true (gtk_accelerator_parse (accels[0], &key, &mods));
  g_assert_cmpuint (key, ==, GDK_KEY_z);
  g_assert_cmpuint (mods, ==, GDK_CONTROL_MASK);

  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  hanashi_params_panel_set_params_json (get_panel (window), "{\"max_new_tokens\": 3}");
  send_text (window, "Keep this answer");
  wait_until (reply_done, window);
  g_autofree char *answer = g_strdup (hanashi_message_get_text (message_at (window, 1)));

  click_message_button (window, "chat.delete", message_at (window, 1));
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 1);
  /* Past the five seconds a toast usually stays. */
  run_for (6500);
  g_assert_cmpuint (count_buttons (GTK_WIDGET (window), "Undo"), ==, 1);
  g_signal_emit_by_name (find_button (GTK_WIDGET (window), "Undo"), "clicked");
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 2);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 1)), ==, answer);
  wait_until (no_undo_toast, window);

  /* Closing the toast leaves Ctrl+Z, even after another chat was looked at. */
  gint64 chat = hanashi_window_get_conversation_id (window);
  click_message_button (window, "chat.delete", message_at (window, 1));
  wait_until (one_undo_toast, window);
  /* Once it has finished coming in: libadwaita 1.2 crashes when a toast is closed while it
   * animates in (the window itself never dismisses one that early). */
  run_for (800);
  /* The toast's close button. */
  GtkWidget *close = NULL;
  for (GtkWidget *w = find_button (GTK_WIDGET (window), "Undo"); w != NULL && close == NULL; w = gtk_widget_get_parent (w))
    for (GtkWidget *c = gtk_widget_get_first_child (w); c != NULL && close == NULL; c = gtk_widget_get_next_sibling (c))
      if (GTK_IS_BUTTON (c) && gtk_button_get_label (GTK_BUTTON (c)) == NULL)
        close = c;
  g_assert_nonnull (close);
  g_signal_emit_by_name (close, "clicked");
  wait_until (no_undo_toast, window);
  /* In another chat, Ctrl+Z does not reach back into this one. */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.new-chat", NULL);
  press_ctrl_z (window);
  hanashi_window_load_conversation (window, chat);
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 1);
  press_ctrl_z (window);
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 2);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 1)), ==, answer);

  /* The next change to the chat ends the offer, and its toast. */
  click_message_button (window, "chat.delete", message_at (window, 1));
  wait_until (one_undo_toast, window);
  send_text (window, "Something new");
  wait_until (no_undo_toast, window);
  wait_until (reply_done, window);
  press_ctrl_z (window);
  g_assert_cmpuint (g_list_model_get_n_items (messages), ==, 3);
  g_assert_cmpstr (hanashi_message_get_text (message_at (window, 1)), ==, "Something new");
  close_window (window);
}

static gboolean
is_folded (gpointer leaflet)
{
  return adw_leaflet_get_folded (leaflet);
}

static HanashiConversationRow *
conversation_row (GtkWidget *root, gint64 id)
{
  if (HANASHI_IS_CONVERSATION_ROW (root))
    {
      HanashiConversationItem *item = hanashi_conversation_row_get_item (HANASHI_CONVERSATION_ROW (root));
      if (item != NULL && hanashi_conversation_item_get_id (item) == id)
        return HANASHI_CONVERSATION_ROW (root);
    }
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      HanashiConversationRow *found = conversation_row (child, id);
      if (found)
        return found;
    }
  return NULL;
}

/* A primary-button tap on the sidebar's row of chat @id, as GTK 4.8 delivers it: the
 * list row selects its item (its own gesture, which needs a real event, runs the
 * "list.select-item" action), then the row's own click gestures see the release. */
static void
tap_chat (HanashiSidebar *sidebar, gint64 id)
{
  HanashiConversationRow *row = conversation_row (GTK_WIDGET (sidebar), id);
  GListModel *list = hanashi_sidebar_get_model (sidebar);
  guint position = G_MAXUINT;

  g_assert_nonnull (row);
  for (guint i = 0; i < g_list_model_get_n_items (list); i++)
    {
      g_autoptr (HanashiConversationItem) item = g_list_model_get_item (list, i);
      if (hanashi_conversation_item_get_id (item) == id)
        position = i;
    }
  g_assert_cmpuint (position, !=, G_MAXUINT);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (row), "list.select-item", "(ubb)", position, FALSE, FALSE));

  double x = gtk_widget_get_width (GTK_WIDGET (row)) / 2.0, y = gtk_widget_get_height (GTK_WIDGET (row)) / 2.0;
  g_autoptr (GListModel) controllers = gtk_widget_observe_controllers (GTK_WIDGET (row));
  for (guint i = 0; i < g_list_model_get_n_items (controllers); i++)
    {
      g_autoptr (GtkEventController) controller = g_list_model_get_item (controllers, i);
      if (GTK_IS_GESTURE_CLICK (controller) &&
          gtk_gesture_single_get_button (GTK_GESTURE_SINGLE (controller)) == GDK_BUTTON_PRIMARY)
        g_signal_emit_by_name (controller, "released", 1, x, y);
    }
}

/* Item 8: folded, tapping the chat that is already open in the list shows it. */
static void
test_folded_tap_open_chat (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 360, 640, TRUE);
  AdwLeaflet *leaflet = ADW_LEAFLET (find_by_type (GTK_WIDGET (window), ADW_TYPE_LEAFLET));
  HanashiSidebar *sidebar = HANASHI_SIDEBAR (find_by_type (GTK_WIDGET (window), HANASHI_TYPE_SIDEBAR));
  HanashiStore *store = hanashi_window_get_store (window);
  gint64 first = make_conversation (store, "First", 2, 1);
  gint64 second = make_conversation (store, "Second", 2, 1);

  wait_until (is_folded, leaflet);
  hanashi_sidebar_reload (sidebar);
  hanashi_window_load_conversation (window, first);
  g_assert_cmpint (hanashi_sidebar_get_selected_id (sidebar), ==, first);
  GtkWidget *composer = GTK_WIDGET (get_composer (window));
  g_assert_true (gtk_widget_is_ancestor (composer, adw_leaflet_get_visible_child (leaflet)));

  gtk_widget_activate_action (GTK_WIDGET (window), "win.show-chats", NULL);
  settle ();
  g_assert_false (gtk_widget_is_ancestor (composer, adw_leaflet_get_visible_child (leaflet)));
  /* Half-typed text stays: the chat is shown, not read again. */
  hanashi_composer_set_text (get_composer (window), "half typed");
  tap_chat (sidebar, first);
  settle ();
  g_assert_true (gtk_widget_is_ancestor (composer, adw_leaflet_get_visible_child (leaflet)));
  g_assert_cmpint (hanashi_window_get_conversation_id (window), ==, first);
  g_autofree char *kept = hanashi_composer_dup_text (get_composer (window));
  g_assert_cmpstr (kept, ==, "half typed");

  /* Another chat still opens as before. */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.show-chats", NULL);
  settle ();
  tap_chat (sidebar, second);
  settle ();
  g_assert_cmpint (hanashi_window_get_conversation_id (window), ==, second);
  g_assert_true (gtk_widget_is_ancestor (composer, adw_leaflet_get_visible_child (leaflet)));
  close_window (window);
}

int
main (int argc, char **argv)
{
  scripted_test_init (&argc, &argv);

  write_scripted_model (g_get_user_data_dir ());

  g_test_add_func ("/Hanashi/WindowFlow/scrolling", test_scrolling);
  g_test_add_func ("/Hanashi/WindowFlow/code-block-heights", test_code_block_heights);
  g_test_add_func ("/Hanashi/WindowFlow/numbers", test_numbers);
  g_test_add_func ("/Hanashi/WindowFlow/no-stray-selection", test_no_stray_selection);
  g_test_add_func ("/Hanashi/WindowFlow/undo-lasts", test_undo_lasts);
  g_test_add_func ("/Hanashi/WindowFlow/folded-tap-open-chat", test_folded_tap_open_chat);
  int status = g_test_run ();
  g_free (model_path);
  return status;
}
