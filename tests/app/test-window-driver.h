/* Driving the real chat window in a GUI test the way a user would, with the engine's
 * scripted backend: find widgets, run the main loop until something holds, press Enter,
 * click a message's buttons.  The including test defines model_path (any readable file
 * is a model to the scripted backend).
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

static char *model_path;

static inline GtkWidget *
driver_find_by_type (GtkWidget *root, GType type)
{
  if (G_TYPE_CHECK_INSTANCE_TYPE (root, type))
    return root;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = driver_find_by_type (child, type);
      if (found)
        return found;
    }
  return NULL;
}

typedef gboolean (*DriverCondition) (gpointer data);

/* Runs the main loop until @condition holds; the deadline only keeps a broken build from
 * hanging the suite. */
static inline void
driver_wait_until (DriverCondition condition, gpointer data)
{
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (!condition (data))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, FALSE);
      g_usleep (1000);
    }
}

/* Runs the main loop for @ms milliseconds of real time (toasts time out by the clock). */
static inline void
driver_run_for (guint ms)
{
  gint64 end = g_get_monotonic_time () + (gint64) ms * 1000;
  while (g_get_monotonic_time () < end)
    {
      while (g_main_context_iteration (NULL, FALSE))
        ;
      g_usleep (5000);
    }
}

/* Lets layout, idles and frame clock catch up. */
static inline void
driver_settle (void)
{
  for (int i = 0; i < 8; i++)
    {
      while (g_main_context_iteration (NULL, FALSE))
        ;
      g_usleep (20000);
    }
}

static inline HanashiComposer *
driver_composer (HanashiWindow *window)
{
  return HANASHI_COMPOSER (driver_find_by_type (GTK_WIDGET (window), HANASHI_TYPE_COMPOSER));
}

static inline HanashiChatView *
driver_chat_view (HanashiWindow *window)
{
  return HANASHI_CHAT_VIEW (driver_find_by_type (GTK_WIDGET (window), HANASHI_TYPE_CHAT_VIEW));
}

static inline HanashiParamsPanel *
driver_panel (HanashiWindow *window)
{
  return HANASHI_PARAMS_PANEL (driver_find_by_type (GTK_WIDGET (window), HANASHI_TYPE_PARAMS_PANEL));
}

/* The status label in the chat's header bar (context meter and speed). */
static inline GtkLabel *
driver_status_label (GtkWidget *root)
{
  if (GTK_IS_LABEL (root) && gtk_widget_has_css_class (root, "status-meter") &&
      gtk_widget_get_ancestor (root, ADW_TYPE_HEADER_BAR) != NULL)
    return GTK_LABEL (root);
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      GtkLabel *found = driver_status_label (child);
      if (found)
        return found;
    }
  return NULL;
}

static inline gboolean
driver_reply_done (gpointer window)
{
  return !hanashi_composer_get_generating (driver_composer (window));
}

static inline gboolean
driver_model_loaded (gpointer window)
{
  return hanashi_engine_get_model_info (hanashi_window_get_engine (window)) != NULL;
}

static inline gboolean
driver_is_mapped (gpointer widget)
{
  return gtk_widget_get_mapped (widget);
}

static inline HanashiApplication *
driver_make_app (void)
{
  HanashiApplication *app = hanashi_application_new ();
  g_autoptr (GError) error = NULL;
  g_application_register (G_APPLICATION (app), NULL, &error);
  g_assert_no_error (error);
  return app;
}

static inline HanashiWindow *
driver_make_window (HanashiApplication *app, int width, int height, gboolean load_model)
{
  HanashiWindow *window = hanashi_window_new (app);
  gtk_window_set_default_size (GTK_WINDOW (window), width, height);
  gtk_window_present (GTK_WINDOW (window));
  driver_wait_until (driver_is_mapped, window);
  if (load_model)
    {
      g_autoptr (GFile) file = g_file_new_for_path (model_path);
      hanashi_window_open_model (window, file);
      driver_wait_until (driver_model_loaded, window);
    }
  return window;
}

/* Enter in the composer, through its key controller as a key press would go. */
static inline gboolean
driver_press_enter (HanashiWindow *window)
{
  GtkWidget *text_view = GTK_WIDGET (hanashi_composer_get_text_view (driver_composer (window)));
  g_autoptr (GListModel) controllers = gtk_widget_observe_controllers (text_view);
  for (guint i = 0; i < g_list_model_get_n_items (controllers); i++)
    {
      g_autoptr (GtkEventController) controller = g_list_model_get_item (controllers, i);
      if (GTK_IS_EVENT_CONTROLLER_KEY (controller) &&
          gtk_event_controller_get_propagation_phase (controller) == GTK_PHASE_CAPTURE)
        {
          gboolean handled = FALSE;
          g_signal_emit_by_name (controller, "key-pressed", GDK_KEY_Return, 36, 0, &handled);
          return handled;
        }
    }
  g_assert_not_reached ();
}

static inline void
driver_send (HanashiWindow *window, const char *text)
{
  hanashi_composer_set_text (driver_composer (window), text);
  g_assert_true (driver_press_enter (window));
}

static inline HanashiMessage *
driver_message_at (HanashiWindow *window, guint index)
{
  GListModel *messages = hanashi_window_get_messages (window);
  g_assert_cmpuint (index, <, g_list_model_get_n_items (messages));
  HanashiMessage *m = g_list_model_get_item (messages, index);
  g_object_unref (m);   /* the list keeps it alive */
  return m;
}

static inline HanashiMessageRow *
driver_row_for (GtkWidget *root, HanashiMessage *message)
{
  if (HANASHI_IS_MESSAGE_ROW (root) && hanashi_message_row_get_message (HANASHI_MESSAGE_ROW (root)) == message)
    return HANASHI_MESSAGE_ROW (root);
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      HanashiMessageRow *found = driver_row_for (child, message);
      if (found)
        return found;
    }
  return NULL;
}

/* The button under @root that activates @action_name ("chat.regenerate", …). */
static inline GtkWidget *
driver_action_button (GtkWidget *root, const char *action_name)
{
  if (GTK_IS_BUTTON (root) && g_strcmp0 (gtk_actionable_get_action_name (GTK_ACTIONABLE (root)), action_name) == 0)
    return root;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = driver_action_button (child, action_name);
      if (found)
        return found;
    }
  return NULL;
}

typedef struct {
  HanashiWindow  *window;
  HanashiMessage *message;
} DriverRowWanted;

static inline gboolean
driver_row_shown (gpointer data)
{
  DriverRowWanted *wanted = data;
  return driver_row_for (GTK_WIDGET (wanted->window), wanted->message) != NULL;
}

/* Clicks a button of @message's row as a pointer would: the button takes the focus (as
 * a click gives it), then is activated. */
static inline void
driver_click_message_button (HanashiWindow *window, const char *action_name, HanashiMessage *message)
{
  DriverRowWanted wanted = { window, message };
  driver_wait_until (driver_row_shown, &wanted);
  GtkWidget *button = driver_action_button (GTK_WIDGET (driver_row_for (GTK_WIDGET (window), message)), action_name);
  g_assert_nonnull (button);
  gtk_widget_grab_focus (button);
  g_signal_emit_by_name (button, "clicked");
}
