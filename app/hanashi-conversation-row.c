/* hanashi-conversation-row.c — the sidebar row: title, snippet, time and a menu
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-conversation-row"

#include "config.h"

#include <glib/gi18n.h>
#include <string.h>

#include "hanashi-conversation-row.h"

struct _HanashiConversationRow {
  GtkWidget parent_instance;

  /* Child widgets */
  GtkWidget *title;
  GtkWidget *time;
  GtkWidget *snippet;
  GtkWidget *menu_button;

  /* Owned */
  HanashiConversationItem *item;
};

G_DEFINE_FINAL_TYPE (HanashiConversationRow, hanashi_conversation_row, GTK_TYPE_WIDGET)

static void
on_secondary_click (GtkGestureClick *gesture, int n_press, double x, double y, gpointer user_data)
{
  HanashiConversationRow *self = user_data;
  (void) n_press; (void) x; (void) y;
  if (!self->item)
    return;
  gtk_gesture_set_state (GTK_GESTURE (gesture), GTK_EVENT_SEQUENCE_CLAIMED);
  gtk_menu_button_popup (GTK_MENU_BUTTON (self->menu_button));
}

/* The row's menu items name row.* actions, which forward to the sidebar's with this
 * row's id; so one menu model serves every row. */
static void
row_action (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  HanashiConversationRow *self = HANASHI_CONVERSATION_ROW (widget);
  (void) parameter;
  if (!self->item)
    return;
  g_autofree char *target = g_strconcat ("sidebar.", action_name + strlen ("row."), NULL);
  gtk_widget_activate_action (widget, target, "x", hanashi_conversation_item_get_id (self->item));
}

static GMenuModel *
row_menu (void)
{
  static GMenu *menu;
  if (!menu) {
    menu = g_menu_new ();
    g_autoptr(GMenu) edit = g_menu_new ();
    g_menu_append (edit, _("_Rename…"), "row.rename");
    g_autoptr(GMenu) export = g_menu_new ();
    g_menu_append (export, _("Export as _Markdown…"), "row.export-markdown");
    g_menu_append (export, _("Export as _JSON…"), "row.export-json");
    g_autoptr(GMenu) danger = g_menu_new ();
    g_menu_append (danger, _("_Delete"), "row.delete");
    g_menu_append_section (menu, NULL, G_MENU_MODEL (edit));
    g_menu_append_section (menu, NULL, G_MENU_MODEL (export));
    g_menu_append_section (menu, NULL, G_MENU_MODEL (danger));
  }
  return G_MENU_MODEL (menu);
}

/* A popover menu costs milliseconds to build; a list shows some two hundred rows, so each
 * row builds its menu only when it is first opened. */
static void
create_popup (GtkMenuButton *button, gpointer user_data)
{
  (void) user_data;
  gtk_menu_button_set_menu_model (button, row_menu ());
}

static void
hanashi_conversation_row_dispose (GObject *object)
{
  HanashiConversationRow *self = HANASHI_CONVERSATION_ROW (object);
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self))))
    gtk_widget_unparent (child);
  g_clear_object (&self->item);
  G_OBJECT_CLASS (hanashi_conversation_row_parent_class)->dispose (object);
}

static void
hanashi_conversation_row_class_init (HanashiConversationRowClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = hanashi_conversation_row_dispose;
  gtk_widget_class_set_layout_manager_type (GTK_WIDGET_CLASS (klass), GTK_TYPE_BOX_LAYOUT);
  gtk_widget_class_set_css_name (GTK_WIDGET_CLASS (klass), "conversationrow");
  gtk_widget_class_install_action (GTK_WIDGET_CLASS (klass), "row.rename", NULL, row_action);
  gtk_widget_class_install_action (GTK_WIDGET_CLASS (klass), "row.export-markdown", NULL, row_action);
  gtk_widget_class_install_action (GTK_WIDGET_CLASS (klass), "row.export-json", NULL, row_action);
  gtk_widget_class_install_action (GTK_WIDGET_CLASS (klass), "row.delete", NULL, row_action);
}

static GtkWidget *
make_label (const char *css_class, float xalign)
{
  GtkWidget *label = gtk_label_new (NULL);
  gtk_label_set_xalign (GTK_LABEL (label), xalign);
  gtk_label_set_ellipsize (GTK_LABEL (label), PANGO_ELLIPSIZE_END);
  gtk_label_set_single_line_mode (GTK_LABEL (label), TRUE);
  if (css_class)
    gtk_widget_add_css_class (label, css_class);
  return label;
}

static void
hanashi_conversation_row_init (HanashiConversationRow *self)
{
  GtkBoxLayout *layout = GTK_BOX_LAYOUT (gtk_widget_get_layout_manager (GTK_WIDGET (self)));
  gtk_box_layout_set_spacing (layout, 6);
  gtk_widget_set_margin_top (GTK_WIDGET (self), 6);
  gtk_widget_set_margin_bottom (GTK_WIDGET (self), 6);
  gtk_widget_set_margin_start (GTK_WIDGET (self), 6);

  GtkWidget *texts = gtk_box_new (GTK_ORIENTATION_VERTICAL, 2);
  gtk_widget_set_hexpand (texts, TRUE);
  GtkWidget *top = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  self->title = make_label ("heading", 0);
  gtk_widget_set_hexpand (self->title, TRUE);
  self->time = make_label ("caption", 1);
  gtk_widget_add_css_class (self->time, "dim-label");
  gtk_box_append (GTK_BOX (top), self->title);
  gtk_box_append (GTK_BOX (top), self->time);
  self->snippet = make_label ("dim-label", 0);
  gtk_box_append (GTK_BOX (texts), top);
  gtk_box_append (GTK_BOX (texts), self->snippet);
  gtk_widget_set_parent (texts, GTK_WIDGET (self));

  self->menu_button = gtk_menu_button_new ();
  gtk_menu_button_set_icon_name (GTK_MENU_BUTTON (self->menu_button), "view-more-symbolic");
  gtk_widget_add_css_class (self->menu_button, "flat");
  gtk_widget_set_valign (self->menu_button, GTK_ALIGN_CENTER);
  gtk_widget_set_tooltip_text (self->menu_button, _("Chat Menu"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->menu_button),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, _("Chat Menu"), -1);
  gtk_menu_button_set_create_popup_func (GTK_MENU_BUTTON (self->menu_button), create_popup, NULL, NULL);
  gtk_widget_set_parent (self->menu_button, GTK_WIDGET (self));

  GtkGesture *click = gtk_gesture_click_new ();
  gtk_gesture_single_set_button (GTK_GESTURE_SINGLE (click), GDK_BUTTON_SECONDARY);
  g_signal_connect (click, "pressed", G_CALLBACK (on_secondary_click), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (click));
}

GtkWidget *
hanashi_conversation_row_new (void)
{
  return g_object_new (HANASHI_TYPE_CONVERSATION_ROW, NULL);
}

void
hanashi_conversation_row_set_item (HanashiConversationRow *self, HanashiConversationItem *item, gint64 now)
{
  g_return_if_fail (HANASHI_IS_CONVERSATION_ROW (self));
  g_set_object (&self->item, item);
  if (!item)
    return;
  const char *title = hanashi_conversation_item_get_title (item);
  gtk_label_set_text (GTK_LABEL (self->title), *title ? title : _("New Chat"));
  const char *snippet = hanashi_conversation_item_get_snippet (item);
  gtk_label_set_text (GTK_LABEL (self->snippet), snippet);
  gtk_widget_set_visible (self->snippet, *snippet != '\0');
  g_autofree char *when = hanashi_format_relative_time (hanashi_conversation_item_get_updated (item), now);
  gtk_label_set_text (GTK_LABEL (self->time), when);
}

HanashiConversationItem *
hanashi_conversation_row_get_item (HanashiConversationRow *self)
{
  g_return_val_if_fail (HANASHI_IS_CONVERSATION_ROW (self), NULL);
  return self->item;
}

const char *
hanashi_conversation_row_get_title_text (HanashiConversationRow *self)
{
  g_return_val_if_fail (HANASHI_IS_CONVERSATION_ROW (self), NULL);
  return gtk_label_get_text (GTK_LABEL (self->title));
}
