/* The window tests' shared steps: an application registered for the test, a window
 * driven the way a user would (with the engine's scripted backend: press Enter, click a
 * message's buttons), and the conditions they wait for (see wait_until in test-widgets.h).
 * The including test sets model_path (any readable file is a model to the scripted
 * backend).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "hanashi-application.h"
#include "hanashi-chat-view.h"
#include "hanashi-composer.h"
#include "hanashi-message-row.h"
#include "hanashi-params-panel.h"
#include "hanashi-window.h"
#include "test-widgets.h"

static char *model_path;

/* The scripted backend takes any readable file as a model: writes one in @dir and points
 * model_path at it (the test frees model_path after g_test_run). */
static inline void
write_scripted_model (const char *dir)
{
  model_path = g_build_filename (dir, "tiny-test.gguf", NULL);
  g_assert_true (g_file_set_contents (model_path, "GGUF", 4, NULL));
}

static inline HanashiApplication *
make_app (void)
{
  HanashiApplication *app = hanashi_application_new ();
  g_autoptr (GError) error = NULL;
  g_application_register (G_APPLICATION (app), NULL, &error);
  g_assert_no_error (error);
  return app;
}

static inline gboolean
is_mapped (gpointer widget)
{
  return gtk_widget_get_mapped (widget);
}

static inline gboolean
model_loaded (gpointer window)
{
  return hanashi_engine_get_model_info (hanashi_window_get_engine (window)) != NULL;
}

static inline HanashiComposer *
get_composer (HanashiWindow *window)
{
  return HANASHI_COMPOSER (find_by_type (GTK_WIDGET (window), HANASHI_TYPE_COMPOSER));
}

/* The composer no longer shows a reply being written. */
static inline gboolean
reply_done (gpointer window)
{
  return !hanashi_composer_get_generating (get_composer (window));
}

static inline HanashiParamsPanel *
get_panel (HanashiWindow *window)
{
  return HANASHI_PARAMS_PANEL (find_by_type (GTK_WIDGET (window), HANASHI_TYPE_PARAMS_PANEL));
}

static inline GtkLabel *
find_status_label (GtkWidget *root)
{
  if (GTK_IS_LABEL (root) && gtk_widget_has_css_class (root, "status-meter") &&
      gtk_widget_get_ancestor (root, ADW_TYPE_HEADER_BAR) != NULL)
    return GTK_LABEL (root);
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      GtkLabel *found = find_status_label (child);
      if (found)
        return found;
    }
  return NULL;
}

static inline HanashiChatView *
get_chat_view (HanashiWindow *window)
{
  return HANASHI_CHAT_VIEW (find_by_type (GTK_WIDGET (window), HANASHI_TYPE_CHAT_VIEW));
}

static inline HanashiWindow *
make_window (HanashiApplication *app, int width, int height, gboolean load_model)
{
  HanashiWindow *window = hanashi_window_new (app);
  gtk_window_set_default_size (GTK_WINDOW (window), width, height);
  gtk_window_present (GTK_WINDOW (window));
  wait_until (is_mapped, window);
  if (load_model)
    {
      g_autoptr (GFile) file = g_file_new_for_path (model_path);
      hanashi_window_open_model (window, file);
      wait_until (model_loaded, window);
    }
  return window;
}

static inline gboolean
press_enter (HanashiWindow *window, GdkModifierType state)
{
  GtkWidget *text_view = GTK_WIDGET (hanashi_composer_get_text_view (get_composer (window)));
  g_autoptr (GListModel) controllers = gtk_widget_observe_controllers (text_view);
  for (guint i = 0; i < g_list_model_get_n_items (controllers); i++)
    {
      g_autoptr (GtkEventController) controller = g_list_model_get_item (controllers, i);
      if (GTK_IS_EVENT_CONTROLLER_KEY (controller) &&
          gtk_event_controller_get_propagation_phase (controller) == GTK_PHASE_CAPTURE)
        {
          gboolean handled = FALSE;
          g_signal_emit_by_name (controller, "key-pressed", GDK_KEY_Return, 36, state, &handled);
          return handled;
        }
    }
  g_assert_not_reached ();
}

static inline HanashiMessage *
message_at (HanashiWindow *window, guint index)
{
  GListModel *messages = hanashi_window_get_messages (window);
  g_assert_cmpuint (index, <, g_list_model_get_n_items (messages));
  HanashiMessage *m = g_list_model_get_item (messages, index);
  g_object_unref (m);   /* the list keeps it alive */
  return m;
}

/* Whether the newest message of @window is the model's reply and has text: a reply that is
 * on its way, for tests that act while it streams. */
static inline gboolean
reply_has_text (gpointer window)
{
  GListModel *messages = hanashi_window_get_messages (window);
  guint n = g_list_model_get_n_items (messages);
  if (n == 0)
    return FALSE;
  HanashiMessage *last = message_at (window, n - 1);
  return !hanashi_message_is_user (last) && *hanashi_message_get_text (last) != '\0';
}

static inline HanashiMessageRow *
row_for (GtkWidget *root, HanashiMessage *message)
{
  if (HANASHI_IS_MESSAGE_ROW (root) && hanashi_message_row_get_message (HANASHI_MESSAGE_ROW (root)) == message)
    return HANASHI_MESSAGE_ROW (root);
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      HanashiMessageRow *found = row_for (child, message);
      if (found)
        return found;
    }
  return NULL;
}

/* The button of a message row that activates @action_name ("chat.regenerate",
 * "row.previous-alternative", …), NULL while the row is not on screen yet. */
static inline GtkWidget *
find_action_button (GtkWidget *root, const char *action_name)
{
  if (GTK_IS_BUTTON (root) && g_strcmp0 (gtk_actionable_get_action_name (GTK_ACTIONABLE (root)), action_name) == 0)
    return root;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = find_action_button (child, action_name);
      if (found)
        return found;
    }
  return NULL;
}

typedef struct {
  HanashiWindow  *window;
  HanashiMessage *message;
} RowWanted;

static inline gboolean
row_shown (gpointer data)
{
  RowWanted *wanted = data;
  return row_for (GTK_WIDGET (wanted->window), wanted->message) != NULL;
}

/* Clicks a button of @message's row as a pointer would: the button takes the focus (as
 * a click gives it), then is activated; the row's buttons carry the message id to the
 * window's "chat." actions. */
static inline void
click_message_button (HanashiWindow *window, const char *action_name, HanashiMessage *message)
{
  RowWanted wanted = { window, message };
  wait_until (row_shown, &wanted);
  GtkWidget *button = find_action_button (GTK_WIDGET (row_for (GTK_WIDGET (window), message)), action_name);
  g_assert_nonnull (button);
  gtk_widget_grab_focus (button);
  if (g_str_has_prefix (action_name, "chat."))
    {
      GVariant *target = gtk_actionable_get_action_target_value (GTK_ACTIONABLE (button));
      g_assert_nonnull (target);
      g_assert_cmpint (g_variant_get_int64 (target), ==, hanashi_message_get_id (message));
    }
  g_signal_emit_by_name (button, "clicked");
}

static inline void
send_text (HanashiWindow *window, const char *text)
{
  hanashi_composer_set_text (get_composer (window), text);
  g_assert_true (press_enter (window, 0));
}

/* No Undo toast in @window: with libadwaita 1.2, destroying a window while a toast's hide
 * animation runs crashed (in the "done" of the animation, which unmapping skips to its
 * end), and a toast being dismissed keeps its button until its animation ends. */
static inline gboolean
no_undo_toast (gpointer window)
{
  return count_buttons (GTK_WIDGET (window), "Undo") == 0;
}

/* One Undo toast (a new one waits for the previous one to leave). */
static inline gboolean
one_undo_toast (gpointer window)
{
  return count_buttons (GTK_WIDGET (window), "Undo") == 1;
}
