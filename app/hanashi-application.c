/* hanashi-application.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-application"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-application.h"
#include "hanashi-preferences-window.h"
#include "hanashi-window.h"

struct _HanashiApplication
{
  AdwApplication parent_instance;

  /* Owned */
  HanashiEngine *engine;
  GSettings     *settings;
};

G_DEFINE_FINAL_TYPE (HanashiApplication, hanashi_application, ADW_TYPE_APPLICATION)

HanashiApplication *
hanashi_application_new (void)
{
  return g_object_new (HANASHI_TYPE_APPLICATION,
                       "application-id", APP_ID,
                       "flags", G_APPLICATION_HANDLES_OPEN,
                       "resource-base-path", "/io/github/hanashi/Hanashi",
                       NULL);
}

static void
apply_session_limit (HanashiApplication *self)
{
  /* The limit applies to every save, so a change in Preferences takes effect at once. */
  hanashi_engine_set_session_cache_limit (self->engine,
                                          (guint64) g_settings_get_int (self->settings, "session-cache-limit-mb") << 20);
}

HanashiEngine *
hanashi_application_get_engine (HanashiApplication *self)
{
  g_return_val_if_fail (HANASHI_IS_APPLICATION (self), NULL);

  if (self->engine == NULL)
    {
      self->engine = hanashi_engine_new ();
      self->settings = g_settings_new (APP_ID);
      apply_session_limit (self);
      g_signal_connect_object (self->settings, "changed::session-cache-limit-mb",
                               G_CALLBACK (apply_session_limit), self, G_CONNECT_SWAPPED);
    }
  return self->engine;
}

static HanashiWindow *
get_or_create_window (HanashiApplication *self)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (self));
  if (window == NULL)
    window = GTK_WINDOW (hanashi_window_new (self));
  return HANASHI_WINDOW (window);
}

static void
hanashi_application_activate (GApplication *app)
{
  gtk_window_present (GTK_WINDOW (get_or_create_window (HANASHI_APPLICATION (app))));
}

static void
hanashi_application_open (GApplication  *app,
                          GFile        **files,
                          int            n_files,
                          const char    *hint)
{
  HanashiWindow *window = get_or_create_window (HANASHI_APPLICATION (app));
  /* One model at a time: the last file named wins. */
  if (n_files > 0)
    hanashi_window_open_model (window, files[n_files - 1]);
  gtk_window_present (GTK_WINDOW (window));
}

static void
about_action (GSimpleAction *action,
              GVariant      *parameter,
              gpointer       user_data)
{
  HanashiApplication *self = user_data;
  const char *developers[] = { "The Hanashi developers", NULL };

  adw_show_about_window (gtk_application_get_active_window (GTK_APPLICATION (self)),
                         "application-name", _("Hanashi"),
                         "application-icon", APP_ID,
                         "developer-name", _("The Hanashi developers"),
                         "version", VERSION,
                         "developers", developers,
                         "copyright", "© 2026 The Hanashi developers",
                         "license-type", GTK_LICENSE_GPL_3_0,
                         "comments", _("Chat with language models that run on your own computer"),
                         /* Translators: replace with your names, one per line */
                         "translator-credits", _("translator-credits"),
                         NULL);
}

static void
preferences_action (GSimpleAction *action,
                    GVariant      *parameter,
                    gpointer       user_data)
{
  HanashiWindow *window = get_or_create_window (HANASHI_APPLICATION (user_data));
  HanashiPreferencesWindow *preferences =
    hanashi_preferences_window_new (GTK_WINDOW (window), hanashi_application_get_engine (HANASHI_APPLICATION (user_data)));

  gtk_window_present (GTK_WINDOW (preferences));
}

static void
shortcuts_action (GSimpleAction *action,
                  GVariant      *parameter,
                  gpointer       user_data)
{
  HanashiWindow *window = get_or_create_window (HANASHI_APPLICATION (user_data));

  /* GtkApplicationWindow builds the window from gtk/help-overlay.ui in our resources. */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.show-help-overlay", NULL);
}

static void
quit_action (GSimpleAction *action,
             GVariant      *parameter,
             gpointer       user_data)
{
  g_application_quit (G_APPLICATION (user_data));
}

static const GActionEntry app_actions[] = {
  { "about", about_action },
  { "preferences", preferences_action },
  { "shortcuts", shortcuts_action },
  { "quit", quit_action },
};

static void
hanashi_application_startup (GApplication *app)
{
  G_APPLICATION_CLASS (hanashi_application_parent_class)->startup (app);

  g_action_map_add_action_entries (G_ACTION_MAP (app), app_actions, G_N_ELEMENTS (app_actions), app);
  static const struct {
    const char *action;
    const char *accels[2];
  } accels[] = {
    { "app.quit", { "<primary>q", NULL } },
    { "app.preferences", { "<primary>comma", NULL } },
    { "win.open-model", { "<primary>o", NULL } },
    { "win.new-chat", { "<primary>n", NULL } },
    { "win.search", { "<primary>f", NULL } },
    { "win.toggle-panel", { "<primary><shift>p", NULL } },
    { "win.stop", { "Escape", NULL } },
    /* The composer's own Ctrl+Z comes first while it has something to undo. */
    { "chat.undo-delete", { "<primary>z", NULL } },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (accels); i++)
    gtk_application_set_accels_for_action (GTK_APPLICATION (app), accels[i].action, accels[i].accels);
}

static void
hanashi_application_dispose (GObject *object)
{
  HanashiApplication *self = HANASHI_APPLICATION (object);

  g_clear_object (&self->settings);
  g_clear_object (&self->engine);
  G_OBJECT_CLASS (hanashi_application_parent_class)->dispose (object);
}

static void
hanashi_application_class_init (HanashiApplicationClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GApplicationClass *app_class = G_APPLICATION_CLASS (klass);

  object_class->dispose = hanashi_application_dispose;
  app_class->activate = hanashi_application_activate;
  app_class->open = hanashi_application_open;
  app_class->startup = hanashi_application_startup;
}

static void
hanashi_application_init (HanashiApplication *self)
{
}
