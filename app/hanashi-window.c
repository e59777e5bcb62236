/* hanashi-window.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-window"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-window.h"

struct _HanashiWindow
{
  AdwApplicationWindow parent_instance;

  /* Template widgets */
  AdwToastOverlay *toast_overlay;
  AdwStatusPage   *empty_page;

  /* Owned */
  GSettings       *settings;
};

G_DEFINE_FINAL_TYPE (HanashiWindow, hanashi_window, ADW_TYPE_APPLICATION_WINDOW)

HanashiWindow *
hanashi_window_new (HanashiApplication *application)
{
  return g_object_new (HANASHI_TYPE_WINDOW, "application", application, NULL);
}

void
hanashi_window_open_model (HanashiWindow *self,
                           GFile         *file)
{
  g_autofree char *name = g_file_get_basename (file);
  /* Translators: %s is a file name */
  g_autofree char *message = g_strdup_printf (_("Loading “%s”…"), name);

  g_return_if_fail (HANASHI_IS_WINDOW (self));
  adw_toast_overlay_add_toast (self->toast_overlay, adw_toast_new (message));
}

static void
on_model_chosen (GtkNativeDialog *dialog,
                 int              response,
                 gpointer         user_data)
{
  HanashiWindow *self = user_data;

  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr (GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
      if (file != NULL)
        hanashi_window_open_model (self, file);
    }
  g_object_unref (dialog);
}

static void
open_model_action (GtkWidget  *widget,
                   const char *action_name,
                   GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);
  GtkFileChooserNative *chooser;
  g_autoptr (GtkFileFilter) filter = gtk_file_filter_new ();

  gtk_file_filter_set_name (filter, _("GGUF Models"));
  gtk_file_filter_add_suffix (filter, "gguf");

  chooser = gtk_file_chooser_native_new (_("Open Model File"), GTK_WINDOW (self),
                                         GTK_FILE_CHOOSER_ACTION_OPEN, _("_Open"), _("_Cancel"));
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (chooser), filter);
  g_signal_connect (chooser, "response", G_CALLBACK (on_model_chosen), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (chooser));
}

static void
hanashi_window_dispose (GObject *object)
{
  HanashiWindow *self = HANASHI_WINDOW (object);

  g_clear_object (&self->settings);
  G_OBJECT_CLASS (hanashi_window_parent_class)->dispose (object);
}

static void
hanashi_window_class_init (HanashiWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hanashi_window_dispose;

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hanashi/Hanashi/ui/hanashi-window.ui");
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, empty_page);

  gtk_widget_class_install_action (widget_class, "win.open-model", NULL, open_model_action);
}

static void
hanashi_window_init (HanashiWindow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));

  self->settings = g_settings_new (APP_ID);
  g_settings_bind (self->settings, "window-width", self, "default-width", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "window-height", self, "default-height", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "window-maximized", self, "maximized", G_SETTINGS_BIND_DEFAULT);
}
