/* hanashi-chat-view.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-chat-view"

#include "config.h"

#include <adwaita.h>
#include <glib/gi18n.h>

#include "hanashi-chat-view.h"
#include "hanashi-message-row.h"

/* Within this many pixels of the end counts as "at the bottom". */
#define FOLLOW_SLACK 48.0

struct _HanashiChatView
{
  GtkWidget parent_instance;

  /* Template widgets */
  GtkStack           *stack;
  GtkScrolledWindow  *scroller;
  GtkListView        *list_view;

  /* Owned */
  GtkNoSelection     *selection;
  GListModel         *messages;
  HanashiEngine      *lens_engine;   /* "Show probabilities" is on (see the row's set_lens) */

  gboolean            following;
  gboolean            scrolling;     /* our own adjustment change, not the user's */
  gboolean            user_dragging; /* the scrollbar is held */
  guint               scroll_idle;
};

G_DEFINE_FINAL_TYPE (HanashiChatView, hanashi_chat_view, GTK_TYPE_WIDGET)

HanashiChatView *
hanashi_chat_view_new (void)
{
  return g_object_new (HANASHI_TYPE_CHAT_VIEW, NULL);
}

GtkAdjustment *
hanashi_chat_view_get_vadjustment (HanashiChatView *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT_VIEW (self), NULL);
  return gtk_scrolled_window_get_vadjustment (self->scroller);
}

gboolean
hanashi_chat_view_get_following (HanashiChatView *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT_VIEW (self), FALSE);
  return self->following;
}

static void
jump_to_bottom (HanashiChatView *self)
{
  GtkAdjustment *adj = hanashi_chat_view_get_vadjustment (self);

  self->scrolling = TRUE;
  gtk_adjustment_set_value (adj, gtk_adjustment_get_upper (adj) - gtk_adjustment_get_page_size (adj));
  self->scrolling = FALSE;
}

static gboolean
scroll_idle_cb (gpointer data)
{
  HanashiChatView *self = data;

  self->scroll_idle = 0;
  if (self->following)
    jump_to_bottom (self);
  return G_SOURCE_REMOVE;
}

static void
queue_follow (HanashiChatView *self)
{
  /* After layout: the list view measures new rows only when it allocates. */
  if (self->following && self->scroll_idle == 0)
    self->scroll_idle = g_idle_add_full (G_PRIORITY_LOW, scroll_idle_cb, self, NULL);
}

void
hanashi_chat_view_scroll_to_bottom (HanashiChatView *self)
{
  guint n;

  g_return_if_fail (HANASHI_IS_CHAT_VIEW (self));
  self->following = TRUE;
  n = self->messages != NULL ? g_list_model_get_n_items (self->messages) : 0;
  if (n == 0)
    {
      jump_to_bottom (self);
      return;
    }
  /* The list view knows the heights of the rows it has made only, and estimates the
   * others: a value set from its adjustment alone lands wherever the estimate says (the
   * top of a chat just opened, typically, or "failed to scroll to given position").
   * Anchoring it on the last message makes it build the rows at the end; after that
   * layout the adjustment's end is the thread's end. */
  gtk_widget_activate_action (GTK_WIDGET (self->list_view), "list.scroll-to-item", "u", n - 1);
  queue_follow (self);
}

static gboolean
at_bottom (GtkAdjustment *adj)
{
  return gtk_adjustment_get_value (adj) + gtk_adjustment_get_page_size (adj)
         >= gtk_adjustment_get_upper (adj) - FOLLOW_SLACK;
}

/* The list view moves the adjustment itself while it measures rows, so a value change
 * alone does not say the user scrolled: only their input stops the following, and
 * reaching the bottom again resumes it. */
static void
on_value_changed (GtkAdjustment   *adj,
                  HanashiChatView *self)
{
  if (self->scrolling)
    return;
  if (at_bottom (adj))
    self->following = TRUE;
  else if (self->following && !self->user_dragging)
    queue_follow (self);
}

static void
on_adjustment_changed (GtkAdjustment   *adj,
                       HanashiChatView *self)
{
  if (self->following)
    jump_to_bottom (self);
}

static gboolean
on_scroll (GtkEventControllerScroll *controller,
           double                    dx,
           double                    dy,
           HanashiChatView          *self)
{
  if (dy < 0)
    self->following = FALSE;
  return GDK_EVENT_PROPAGATE;
}

static void
on_press (GtkGestureClick *gesture,
          int              n_press,
          double           x,
          double           y,
          HanashiChatView *self)
{
  /* A press on the scrollbar may start a drag upwards. */
  GtkWidget *target = gtk_widget_pick (GTK_WIDGET (self->scroller), x, y, GTK_PICK_DEFAULT);
  if (target != NULL && gtk_widget_get_ancestor (target, GTK_TYPE_SCROLLBAR) != NULL)
    {
      self->user_dragging = TRUE;
      self->following = FALSE;
    }
}

static void
on_release (GtkGestureClick *gesture,
            int              n_press,
            double           x,
            double           y,
            HanashiChatView *self)
{
  if (!self->user_dragging)
    return;
  self->user_dragging = FALSE;
  self->following = at_bottom (hanashi_chat_view_get_vadjustment (self));
}

static gboolean
on_key_pressed (GtkEventControllerKey *controller,
                guint                  keyval,
                guint                  keycode,
                GdkModifierType        state,
                HanashiChatView       *self)
{
  switch (keyval)
    {
    case GDK_KEY_Up:
    case GDK_KEY_KP_Up:
    case GDK_KEY_Page_Up:
    case GDK_KEY_KP_Page_Up:
    case GDK_KEY_Home:
    case GDK_KEY_KP_Home:
      self->following = FALSE;
      break;
    default:
      break;
    }
  return GDK_EVENT_PROPAGATE;
}

void
hanashi_chat_view_stop_following (HanashiChatView *self)
{
  g_return_if_fail (HANASHI_IS_CHAT_VIEW (self));
  self->following = FALSE;
}

static void
update_stack (HanashiChatView *self)
{
  gboolean empty = self->messages == NULL || g_list_model_get_n_items (self->messages) == 0;
  gtk_stack_set_visible_child_name (self->stack, empty ? "empty" : "messages");
}

static void
on_items_changed (GListModel      *model,
                  guint            position,
                  guint            removed,
                  guint            added,
                  HanashiChatView *self)
{
  update_stack (self);
  queue_follow (self);
}

GListModel *
hanashi_chat_view_get_model (HanashiChatView *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT_VIEW (self), NULL);
  return self->messages;
}

void
hanashi_chat_view_set_model (HanashiChatView *self,
                             GListModel      *messages)
{
  g_return_if_fail (HANASHI_IS_CHAT_VIEW (self));

  if (self->messages != NULL)
    g_signal_handlers_disconnect_by_func (self->messages, on_items_changed, self);
  g_set_object (&self->messages, messages);
  if (messages != NULL)
    g_signal_connect (messages, "items-changed", G_CALLBACK (on_items_changed), self);
  gtk_no_selection_set_model (self->selection, messages);
  update_stack (self);
  /* A conversation opens at its end. */
  hanashi_chat_view_scroll_to_bottom (self);
}

static void
setup_row (GtkSignalListItemFactory *factory,
           GtkListItem              *item,
           gpointer                  user_data)
{
  gtk_list_item_set_child (item, GTK_WIDGET (hanashi_message_row_new ()));
  gtk_list_item_set_activatable (item, FALSE);
  gtk_list_item_set_selectable (item, FALSE);
}

static void
bind_row (GtkSignalListItemFactory *factory,
          GtkListItem              *item,
          gpointer                  user_data)
{
  HanashiChatView *self = user_data;
  HanashiMessageRow *row = HANASHI_MESSAGE_ROW (gtk_list_item_get_child (item));

  hanashi_message_row_set_lens (row, self->lens_engine);
  hanashi_message_row_set_message (row, gtk_list_item_get_item (item));
}

/* The rows that exist now, wherever the list view keeps them. */
static void
collect_rows (GtkWidget *widget,
              GPtrArray *rows)
{
  for (GtkWidget *child = gtk_widget_get_first_child (widget); child != NULL; child = gtk_widget_get_next_sibling (child))
    {
      if (HANASHI_IS_MESSAGE_ROW (child))
        g_ptr_array_add (rows, child);
      else
        collect_rows (child, rows);
    }
}

GPtrArray *
hanashi_chat_view_list_rows (HanashiChatView *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT_VIEW (self), NULL);
  GPtrArray *rows = g_ptr_array_new ();
  collect_rows (GTK_WIDGET (self->list_view), rows);
  return rows;
}

void
hanashi_chat_view_set_lens (HanashiChatView *self,
                            HanashiEngine   *engine)
{
  g_return_if_fail (HANASHI_IS_CHAT_VIEW (self));

  if (!g_set_object (&self->lens_engine, engine))
    return;
  g_autoptr (GPtrArray) rows = hanashi_chat_view_list_rows (self);
  for (guint i = 0; i < rows->len; i++)
    hanashi_message_row_set_lens (g_ptr_array_index (rows, i), engine);
}

static void
unbind_row (GtkSignalListItemFactory *factory,
            GtkListItem              *item,
            gpointer                  user_data)
{
  hanashi_message_row_set_message (HANASHI_MESSAGE_ROW (gtk_list_item_get_child (item)), NULL);
}

static void
hanashi_chat_view_dispose (GObject *object)
{
  HanashiChatView *self = HANASHI_CHAT_VIEW (object);

  g_clear_handle_id (&self->scroll_idle, g_source_remove);
  if (self->messages != NULL)
    g_signal_handlers_disconnect_by_func (self->messages, on_items_changed, self);
  gtk_widget_dispose_template (GTK_WIDGET (self), HANASHI_TYPE_CHAT_VIEW);
  /* Template roots without an id are not cleared by dispose_template. */
  for (GtkWidget *child; (child = gtk_widget_get_first_child (GTK_WIDGET (self))) != NULL;)
    gtk_widget_unparent (child);
  g_clear_object (&self->selection);
  g_clear_object (&self->messages);
  g_clear_object (&self->lens_engine);
  G_OBJECT_CLASS (hanashi_chat_view_parent_class)->dispose (object);
}

static void
hanashi_chat_view_class_init (HanashiChatViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hanashi_chat_view_dispose;

  g_type_ensure (HANASHI_TYPE_MESSAGE_ROW);
  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hanashi/Hanashi/ui/hanashi-chat-view.ui");
  gtk_widget_class_bind_template_child (widget_class, HanashiChatView, stack);
  gtk_widget_class_bind_template_child (widget_class, HanashiChatView, scroller);
  gtk_widget_class_bind_template_child (widget_class, HanashiChatView, list_view);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
}

static void
hanashi_chat_view_init (HanashiChatView *self)
{
  GtkListItemFactory *factory = gtk_signal_list_item_factory_new ();
  GtkEventController *controller;
  GtkAdjustment *adj;

  gtk_widget_init_template (GTK_WIDGET (self));
  self->following = TRUE;

  g_signal_connect (factory, "setup", G_CALLBACK (setup_row), self);
  g_signal_connect (factory, "bind", G_CALLBACK (bind_row), self);
  g_signal_connect (factory, "unbind", G_CALLBACK (unbind_row), self);
  gtk_list_view_set_factory (self->list_view, factory);
  g_object_unref (factory);

  self->selection = gtk_no_selection_new (NULL);
  gtk_list_view_set_model (self->list_view, GTK_SELECTION_MODEL (self->selection));

  controller = gtk_event_controller_scroll_new (GTK_EVENT_CONTROLLER_SCROLL_VERTICAL);
  gtk_event_controller_set_propagation_phase (controller, GTK_PHASE_CAPTURE);
  g_signal_connect (controller, "scroll", G_CALLBACK (on_scroll), self);
  gtk_widget_add_controller (GTK_WIDGET (self->scroller), controller);

  controller = GTK_EVENT_CONTROLLER (gtk_gesture_click_new ());
  gtk_event_controller_set_propagation_phase (controller, GTK_PHASE_CAPTURE);
  g_signal_connect (controller, "pressed", G_CALLBACK (on_press), self);
  g_signal_connect (controller, "released", G_CALLBACK (on_release), self);
  gtk_widget_add_controller (GTK_WIDGET (self->scroller), controller);

  controller = gtk_event_controller_key_new ();
  gtk_event_controller_set_propagation_phase (controller, GTK_PHASE_CAPTURE);
  g_signal_connect (controller, "key-pressed", G_CALLBACK (on_key_pressed), self);
  gtk_widget_add_controller (GTK_WIDGET (self->scroller), controller);

  adj = gtk_scrolled_window_get_vadjustment (self->scroller);
  g_signal_connect_object (adj, "value-changed", G_CALLBACK (on_value_changed), self, 0);
  g_signal_connect_object (adj, "changed", G_CALLBACK (on_adjustment_changed), self, 0);
  update_stack (self);
}
