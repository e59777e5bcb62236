/* hanashi-preferences-window.c */
#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-preferences-window.h"

struct _HanashiPreferencesWindow
{
  AdwPreferencesWindow parent_instance;
  HanashiEngine *engine;
};

G_DEFINE_FINAL_TYPE (HanashiPreferencesWindow, hanashi_preferences_window, ADW_TYPE_PREFERENCES_WINDOW)

static void
hanashi_preferences_window_dispose (GObject *object)
{
  HanashiPreferencesWindow *self = HANASHI_PREFERENCES_WINDOW (object);
  g_clear_object (&self->engine);
  G_OBJECT_CLASS (hanashi_preferences_window_parent_class)->dispose (object);
}

static void
hanashi_preferences_window_class_init (HanashiPreferencesWindowClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = hanashi_preferences_window_dispose;
  gtk_widget_class_set_template_from_resource (GTK_WIDGET_CLASS (klass),
                                               "/io/github/hanashi/Hanashi/ui/hanashi-preferences-window.ui");
}

static void
hanashi_preferences_window_init (HanashiPreferencesWindow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
}

HanashiPreferencesWindow *
hanashi_preferences_window_new (GtkWindow *parent, HanashiEngine *engine)
{
  HanashiPreferencesWindow *self = g_object_new (HANASHI_TYPE_PREFERENCES_WINDOW,
                                                 "transient-for", parent, NULL);
  g_set_object (&self->engine, engine);
  return self;
}
