/* hanashi-serve-page.c — see hanashi-serve-page.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-serve-page"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-serve-page.h"

struct _HanashiServePage
{
  AdwPreferencesPage parent_instance;

  AdwActionRow   *serve_row;
  GtkSwitch      *serve_switch;
  GtkSpinButton  *port_spin;
  GtkSwitch      *network_switch;
  AdwEntryRow    *key_row;
  GtkButton      *copy_button;
  GtkButton      *generate_button;

  GSettings      *settings;
  HanashiServing *serving;
  gboolean        key_shown;     /* the key row has shown the stored key once */
};

G_DEFINE_FINAL_TYPE (HanashiServePage, hanashi_serve_page, ADW_TYPE_PREFERENCES_PAGE)

static void
toast (HanashiServePage *self, const char *text)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));
  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  if (root != NULL && ADW_IS_PREFERENCES_WINDOW (root))
    adw_preferences_window_add_toast (ADW_PREFERENCES_WINDOW (root), adw_toast_new (text));
  G_GNUC_END_IGNORE_DEPRECATIONS
}

/* The status as the switch row's subtitle, and the stored key once it is known (the row is
 * not overwritten afterwards: it may hold what the user is typing). */
static void
refresh (HanashiServePage *self)
{
  g_autofree char *description = hanashi_serving_dup_description (self->serving);
  g_autofree char *escaped = g_markup_escape_text (description, -1);
  adw_action_row_set_subtitle (self->serve_row, escaped);

  if (!self->key_shown && hanashi_serving_get_api_key_known (self->serving))
    {
      const char *key = hanashi_serving_get_api_key (self->serving);
      self->key_shown = TRUE;
      gtk_editable_set_text (GTK_EDITABLE (self->key_row), key != NULL ? key : "");
    }
  gtk_widget_set_sensitive (GTK_WIDGET (self->copy_button), hanashi_serving_get_api_key (self->serving) != NULL);
}

static void
on_apply_key (HanashiServePage *self)
{
  const char *key = gtk_editable_get_text (GTK_EDITABLE (self->key_row));
  g_autofree char *trimmed = g_strstrip (g_strdup (key));
  self->key_shown = TRUE;
  hanashi_serving_set_api_key (self->serving, trimmed);
  toast (self, *trimmed != '\0' ? _("API key saved") : _("API key removed"));
}

static void
on_generate_key (HanashiServePage *self)
{
  g_autofree char *key = hanashi_serving_generate_api_key ();
  self->key_shown = TRUE;
  gtk_editable_set_text (GTK_EDITABLE (self->key_row), key);
  hanashi_serving_set_api_key (self->serving, key);
  toast (self, _("A new API key is in use"));
}

static void
on_copy_key (HanashiServePage *self)
{
  const char *key = hanashi_serving_get_api_key (self->serving);
  if (key == NULL)
    return;
  gdk_clipboard_set_text (gtk_widget_get_clipboard (GTK_WIDGET (self)), key);
  toast (self, _("API key copied"));
}

static void
hanashi_serve_page_dispose (GObject *object)
{
  HanashiServePage *self = HANASHI_SERVE_PAGE (object);
  if (self->serving != NULL)
    g_signal_handlers_disconnect_by_data (self->serving, self);
  g_clear_object (&self->serving);
  g_clear_object (&self->settings);
  gtk_widget_dispose_template (GTK_WIDGET (self), HANASHI_TYPE_SERVE_PAGE);
  G_OBJECT_CLASS (hanashi_serve_page_parent_class)->dispose (object);
}

static void
hanashi_serve_page_class_init (HanashiServePageClass *klass)
{
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  G_OBJECT_CLASS (klass)->dispose = hanashi_serve_page_dispose;
  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hanashi/Hanashi/ui/hanashi-serve-page.ui");
  gtk_widget_class_bind_template_child (widget_class, HanashiServePage, serve_row);
  gtk_widget_class_bind_template_child (widget_class, HanashiServePage, serve_switch);
  gtk_widget_class_bind_template_child (widget_class, HanashiServePage, port_spin);
  gtk_widget_class_bind_template_child (widget_class, HanashiServePage, network_switch);
  gtk_widget_class_bind_template_child (widget_class, HanashiServePage, key_row);
  gtk_widget_class_bind_template_child (widget_class, HanashiServePage, copy_button);
  gtk_widget_class_bind_template_child (widget_class, HanashiServePage, generate_button);
}

static void
hanashi_serve_page_init (HanashiServePage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->settings = g_settings_new (APP_ID);
  g_settings_bind (self->settings, "serve-enabled", self->serve_switch, "active", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "serve-port", gtk_spin_button_get_adjustment (self->port_spin), "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "serve-network", self->network_switch, "active", G_SETTINGS_BIND_DEFAULT);
  g_signal_connect_swapped (self->key_row, "apply", G_CALLBACK (on_apply_key), self);
  g_signal_connect_swapped (self->generate_button, "clicked", G_CALLBACK (on_generate_key), self);
  g_signal_connect_swapped (self->copy_button, "clicked", G_CALLBACK (on_copy_key), self);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->copy_button), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Copy Key"), -1);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->generate_button), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Generate a New Key"), -1);
}

HanashiServePage *
hanashi_serve_page_new (HanashiServing *serving)
{
  g_return_val_if_fail (HANASHI_IS_SERVING (serving), NULL);
  HanashiServePage *self = g_object_new (HANASHI_TYPE_SERVE_PAGE, NULL);
  self->serving = g_object_ref (serving);
  g_signal_connect_object (serving, "changed", G_CALLBACK (refresh), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (serving, "failed", G_CALLBACK (refresh), self, G_CONNECT_SWAPPED);
  /* the key row shows the stored key: read it now if serving has not yet */
  hanashi_serving_load_api_key (serving);
  refresh (self);
  return self;
}
