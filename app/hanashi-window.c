/* hanashi-window.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-window"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-window-private.h"


G_DEFINE_FINAL_TYPE (HanashiWindow, hanashi_window, ADW_TYPE_APPLICATION_WINDOW)

enum {
  PROP_0,
  PROP_PANEL_REVEALED,
  PROP_CONVERSATION_ID,
  PROP_ENGINE,
  PROP_SHOW_PROBABILITIES,
  N_PROPS
};

enum {
  SIGNAL_CONVERSATIONS_CHANGED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static GParamSpec *properties[N_PROPS];

static void hanashi_window_constructed (GObject *object);

HanashiWindow *
hanashi_window_new (HanashiApplication *application)
{
  HanashiWindow *self;

  g_return_val_if_fail (HANASHI_IS_APPLICATION (application), NULL);
  self = g_object_new (HANASHI_TYPE_WINDOW,
                       "application", application,
                       "engine", hanashi_application_get_engine (application),
                       NULL);
  /* "application" is set after construction (GtkWindow's property is not construct-only),
   * so the store is bound here.  Last: showing the store opens the latest conversation. */
  _hanashi_window_bind_store (self);
  return self;
}

HanashiStore *
hanashi_window_get_store (HanashiWindow *self)
{
  g_return_val_if_fail (HANASHI_IS_WINDOW (self), NULL);
  return self->store;
}

HanashiEngine *
hanashi_window_get_engine (HanashiWindow *self)
{
  g_return_val_if_fail (HANASHI_IS_WINDOW (self), NULL);
  return self->engine;
}

GListModel *
hanashi_window_get_messages (HanashiWindow *self)
{
  g_return_val_if_fail (HANASHI_IS_WINDOW (self), NULL);
  return hanashi_chat_get_messages (self->chat);
}

gint64
hanashi_window_get_conversation_id (HanashiWindow *self)
{
  g_return_val_if_fail (HANASHI_IS_WINDOW (self), 0);
  return hanashi_chat_get_conversation_id (self->chat);
}

/* While the chat is on screen, toasts appear over its messages, so that they never hide
 * the composer and the text a toast is about; elsewhere (the empty page, the folded
 * sidebar) over the whole window. */
AdwToastOverlay *
_hanashi_window_get_toast_overlay (HanashiWindow *self)
{
  if (gtk_widget_get_mapped (GTK_WIDGET (self->chat_toast_overlay)))
    return self->chat_toast_overlay;
  return self->toast_overlay;
}

void
hanashi_window_add_toast (HanashiWindow *self,
                          const char    *message)
{
  g_return_if_fail (HANASHI_IS_WINDOW (self));
  adw_toast_overlay_add_toast (_hanashi_window_get_toast_overlay (self), adw_toast_new (message));
}

void
_hanashi_window_toast_error (HanashiWindow *self,
             const char    *what,
             const GError  *error)
{
  /* The store's errors are whole sentences already ("The disk is full, so …"). */
  if (error->domain == HANASHI_STORE_ERROR)
    {
      hanashi_window_add_toast (self, error->message);
      return;
    }
  /* Translators: the first %s says what failed, the second why */
  g_autofree char *text = g_strdup_printf (_("%s: %s"), what, error->message);
  hanashi_window_add_toast (self, text);
}

/* ---- the visible thread --------------------------------------------------------------- */

/* The no-model page stands in for an empty chat only: earlier chats stay readable (and
 * copyable) without a model, with sending disabled. */
void
_hanashi_window_update_main_page (HanashiWindow *self)
{
  gboolean loaded = hanashi_engine_get_model_info (self->engine) != NULL;
  gboolean has_messages = g_list_model_get_n_items (hanashi_chat_get_messages (self->chat)) > 0;

  gtk_stack_set_visible_child_name (self->main_stack, loaded || has_messages ? "chat" : "empty");
}

char *
_hanashi_window_conversation_key (gint64 id)
{
  return g_strdup_printf ("%" G_GINT64_FORMAT, id);
}

/* The chat's Think switch is offered when the model's template reads enable_thinking. */
void
_hanashi_window_update_thinking_switch (HanashiWindow *self)
{
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  hanashi_composer_set_thinking_available (self->composer, info != NULL && info->thinking_switch);
}

/* ---- status: model name, context meter, speed --------------------------------------- */

void
_hanashi_window_update_status (HanashiWindow *self)
{
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  g_autoptr (GString) status = g_string_new (NULL);
  double last_speed = hanashi_chat_get_last_speed (self->chat);

  gtk_label_set_label (self->model_label, info ? info->name : _("No Model"));
  _hanashi_window_update_runs_on (self);
  gtk_widget_set_visible (GTK_WIDGET (self->context_bar), info != NULL && self->context_used >= 0);
  if (info != NULL && self->context_used >= 0)
    {
      double fraction = info->n_ctx > 0 ? (double) self->context_used / info->n_ctx : 0;
      gtk_level_bar_set_value (self->context_bar, CLAMP (fraction, 0.0, 1.0));
      /* Translators: the context meter: tokens used / context size */
      g_string_append_printf (status, _("%d / %u"), self->context_used, info->n_ctx);
      g_autofree char *tooltip = g_strdup_printf (_("%d of %u context tokens used"), self->context_used, info->n_ctx);
      gtk_widget_set_tooltip_text (GTK_WIDGET (self->context_bar), tooltip);
    }
  if (info != NULL && last_speed > 0)
    {
      if (status->len > 0)
        g_string_append (status, " · ");
      /* Translators: the speed of the last reply */
      g_string_append_printf (status, _("%.1f tok/s"), last_speed);
    }
  gtk_label_set_label (self->status_label, status->str);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->model_label), status->len > 0 ? status->str : NULL);
}

static void
count_done (GObject      *source,
            GAsyncResult *result,
            gpointer      user_data)
{
  g_autoptr (HanashiWindow) self = user_data;
  g_autoptr (GError) error = NULL;
  int n = hanashi_engine_count_tokens_finish (HANASHI_ENGINE (source), result, &error);

  if (n < 0)
    {
      /* A newer count replaced this one, or the model went away: nothing to show. */
      if (!g_error_matches (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED) &&
          !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_debug ("Counting tokens failed: %s", error->message);
      return;
    }
  self->context_used = n;
  _hanashi_window_update_status (self);
}

void
_hanashi_window_update_context_meter (HanashiWindow *self)
{
  g_autoptr (HanashiGenerateRequest) req = NULL;

  /* what the meter counts is what the lens looks at (with no model, it says so) */
  _hanashi_window_refresh_lens (self);
  g_cancellable_cancel (self->count_cancellable);
  g_clear_object (&self->count_cancellable);
  if (hanashi_engine_get_model_info (self->engine) == NULL)
    {
      _hanashi_window_update_status (self);
      return;
    }
  self->count_cancellable = g_cancellable_new ();
  /* The draft counts as the next user message, so the meter shows what sending it costs
   * (while an earlier message is being edited, the thread after it would change anyway). */
  g_autofree char *draft = hanashi_composer_get_editing (self->composer) ? NULL
                           : hanashi_composer_dup_text (self->composer);
  if (draft != NULL)
    g_strstrip (draft);
  req = hanashi_chat_build_request (self->chat, draft != NULL && *draft != '\0' ? draft : NULL);
  hanashi_engine_count_tokens_async (self->engine, req, self->count_cancellable, count_done, g_object_ref (self));
}

void
_hanashi_window_notify_conversation_id (HanashiWindow *self)
{
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CONVERSATION_ID]);
}

void
_hanashi_window_emit_conversations_changed (HanashiWindow *self)
{
  g_signal_emit (self, signals[SIGNAL_CONVERSATIONS_CHANGED], 0);
}

/* ---- the chats pane ----------------------------------------------------------------------- */

/* Folded (or collapsed), one pane fills the window: these choose which. */
void
_hanashi_window_show_chat_pane (HanashiWindow *self)
{
#if HANASHI_WINDOW_SPLIT_VIEWS
  adw_navigation_split_view_set_show_content (self->split_view, TRUE);
#else
  adw_leaflet_set_visible_child (self->leaflet, self->chat_pane);
#endif
}

static void
show_chats_pane (HanashiWindow *self)
{
#if HANASHI_WINDOW_SPLIT_VIEWS
  adw_navigation_split_view_set_show_content (self->split_view, FALSE);
#else
  adw_leaflet_set_visible_child (self->leaflet, GTK_WIDGET (self->sidebar));
#endif
}

static void
on_conversation_activated (HanashiSidebar *sidebar,
                           gint64          id,
                           HanashiWindow  *self)
{
  /* The chat already open is only brought into view (folded, the chats pane may cover
   * it): reading it again would end a reply being written and an edit in progress. */
  if (id != 0 && id == hanashi_chat_get_conversation_id (self->chat))
    {
      _hanashi_window_show_chat_pane (self);
      return;
    }
  hanashi_window_load_conversation (self, id);
}

static void
on_conversation_deleted (HanashiSidebar *sidebar,
                         gint64          id,
                         HanashiWindow  *self)
{
  g_autofree char *key = _hanashi_window_conversation_key (id);

  /* Its saved engine state is of no use any more (Undo restores only the messages). */
  hanashi_engine_forget_session (self->engine, key);
  if (id == hanashi_chat_get_conversation_id (self->chat))
    hanashi_window_load_conversation (self, 0);
}

static void
on_conversations_changed (HanashiWindow *self)
{
  hanashi_sidebar_reload (self->sidebar);
  hanashi_sidebar_select (self->sidebar, hanashi_chat_get_conversation_id (self->chat));
}

static void
new_chat_action (GtkWidget  *widget,
                 const char *action_name,
                 GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);

  hanashi_window_load_conversation (self, 0);
  gtk_widget_grab_focus (GTK_WIDGET (self->composer));
}

static void
show_chats_action (GtkWidget  *widget,
                   const char *action_name,
                   GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);
  show_chats_pane (self);
}

static void
search_action (GtkWidget  *widget,
               const char *action_name,
               GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);

  /* Search lives in the sidebar: bring it into view on a narrow window. */
  show_chats_pane (self);
  hanashi_sidebar_focus_search (self->sidebar);
}

/* ---- actions and properties ------------------------------------------------------------ */

void
_hanashi_window_update_actions (HanashiWindow *self)
{
  gboolean loaded = hanashi_engine_get_model_info (self->engine) != NULL;

  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.send", loaded && !hanashi_chat_get_generating (self->chat));
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.stop", hanashi_chat_get_request_id (self->chat) != 0);
}

static void
hanashi_window_get_property (GObject    *object,
                             guint       prop_id,
                             GValue     *value,
                             GParamSpec *pspec)
{
  HanashiWindow *self = HANASHI_WINDOW (object);

  switch (prop_id)
    {
    case PROP_CONVERSATION_ID:
      g_value_set_int64 (value, self->chat != NULL ? hanashi_chat_get_conversation_id (self->chat) : 0);
      break;
    case PROP_ENGINE:
      g_value_set_object (value, self->engine);
      break;
    case PROP_SHOW_PROBABILITIES:
      g_value_set_boolean (value, self->show_probabilities);
      break;
    case PROP_PANEL_REVEALED:
      /* The property action asks before the template exists. */
#if HANASHI_WINDOW_SPLIT_VIEWS
      g_value_set_boolean (value, self->panel_split != NULL && adw_overlay_split_view_get_show_sidebar (self->panel_split));
#else
      g_value_set_boolean (value, self->flap != NULL && adw_flap_get_reveal_flap (self->flap));
#endif
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hanashi_window_set_property (GObject      *object,
                             guint         prop_id,
                             const GValue *value,
                             GParamSpec   *pspec)
{
  HanashiWindow *self = HANASHI_WINDOW (object);

  switch (prop_id)
    {
    case PROP_PANEL_REVEALED:
#if HANASHI_WINDOW_SPLIT_VIEWS
      if (self->panel_split != NULL)
        adw_overlay_split_view_set_show_sidebar (self->panel_split, g_value_get_boolean (value));
#else
      if (self->flap != NULL)
        adw_flap_set_reveal_flap (self->flap, g_value_get_boolean (value));
#endif
      break;
    case PROP_ENGINE:
      self->engine = g_value_dup_object (value);
      break;
    case PROP_SHOW_PROBABILITIES:
      if (self->show_probabilities != g_value_get_boolean (value))
        {
          self->show_probabilities = g_value_get_boolean (value);
          /* the token texts come from the engine's model */
          if (self->chat_view != NULL)
            hanashi_chat_view_set_lens (self->chat_view, self->show_probabilities ? self->engine : NULL);
          g_object_notify_by_pspec (object, pspec);
        }
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
on_panel_revealed (GObject       *panel_container,
                   GParamSpec    *pspec,
                   HanashiWindow *self)
{
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_PANEL_REVEALED]);
}

static void
on_folded (GObject       *split,
           GParamSpec    *pspec,
           HanashiWindow *self)
{
#if HANASHI_WINDOW_SPLIT_VIEWS
  gboolean folded = adw_navigation_split_view_get_collapsed (self->split_view);
#else
  gboolean folded = adw_leaflet_get_folded (self->leaflet);
#endif
  /* Narrow header bars need the room for the model name; the numbers move to its tooltip. */
  gtk_widget_set_visible (self->status_box, !folded);
}

static void
hanashi_window_dispose (GObject *object)
{
  HanashiWindow *self = HANASHI_WINDOW (object);

  /* The chat saves what was written of a reply, and tries once more for answers the
   * database refused so far, while the store is still there. */
  if (self->chat != NULL)
    g_signal_handlers_disconnect_by_data (self->chat, self);
  g_clear_object (&self->chat);
  g_clear_handle_id (&self->draft_count_source, g_source_remove);
  _hanashi_window_dispose_lens (self);
  g_cancellable_cancel (self->count_cancellable);
  g_cancellable_cancel (self->load_cancellable);
  g_clear_object (&self->count_cancellable);
  g_clear_object (&self->load_cancellable);
  if (self->engine != NULL)
    g_signal_handlers_disconnect_by_data (self->engine, self);
  g_clear_object (&self->engine);
  g_clear_object (&self->store);
  g_clear_object (&self->settings);
  g_clear_weak_pointer (&self->undo_toast);
  g_clear_object (&self->chat_actions);
  g_clear_handle_id (&self->undo_dismiss_source, g_source_remove);
  g_clear_handle_id (&self->undo_toast_source, g_source_remove);
  g_clear_handle_id (&self->gpu_reload_source, g_source_remove);
  G_OBJECT_CLASS (hanashi_window_parent_class)->dispose (object);
}

static void
hanashi_window_class_init (HanashiWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->constructed = hanashi_window_constructed;
  object_class->dispose = hanashi_window_dispose;
  object_class->get_property = hanashi_window_get_property;
  object_class->set_property = hanashi_window_set_property;

  properties[PROP_PANEL_REVEALED] = g_param_spec_boolean ("panel-revealed", NULL, NULL, FALSE,
                                                          G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  /* "Show probabilities": answers show their tokens shaded by how likely they were */
  properties[PROP_SHOW_PROBABILITIES] = g_param_spec_boolean ("show-probabilities", NULL, NULL, FALSE,
                                                              G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_CONVERSATION_ID] = g_param_spec_int64 ("conversation-id", NULL, NULL, 0, G_MAXINT64, 0,
                                                        G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_ENGINE] = g_param_spec_object ("engine", NULL, NULL, HANASHI_TYPE_ENGINE,
                                                 G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  signals[SIGNAL_CONVERSATIONS_CHANGED] = g_signal_new ("conversations-changed", G_TYPE_FROM_CLASS (klass),
                                                        G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 0);

  g_type_ensure (HANASHI_TYPE_SIDEBAR);
  g_type_ensure (HANASHI_TYPE_CHAT_VIEW);
  g_type_ensure (HANASHI_TYPE_COMPOSER);
  g_type_ensure (HANASHI_TYPE_PARAMS_PANEL);

#if HANASHI_WINDOW_SPLIT_VIEWS
  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hanashi/Hanashi/ui/hanashi-window-split.ui");
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, split_view);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, panel_split);
#else
  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hanashi/Hanashi/ui/hanashi-window.ui");
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, leaflet);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, flap);
#endif
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, chat_toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, sidebar);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, chat_pane);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, model_label);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, status_box);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, context_bar);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, status_label);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, runs_on_label);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, load_progress);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, main_stack);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, empty_page);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, recent_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, recent_list);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, chat_view);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, composer);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, params_panel);

  gtk_widget_class_install_action (widget_class, "win.new-chat", NULL, new_chat_action);
  gtk_widget_class_install_action (widget_class, "win.search", NULL, search_action);
  gtk_widget_class_install_action (widget_class, "win.show-chats", NULL, show_chats_action);
  gtk_widget_class_install_property_action (widget_class, "win.toggle-panel", "panel-revealed");
  gtk_widget_class_install_property_action (widget_class, "win.show-probabilities", "show-probabilities");
  _hanashi_window_class_init_chat (widget_class);
  _hanashi_window_class_init_models (widget_class);
  _hanashi_window_class_init_lens (widget_class);
}

static void
hanashi_window_init (HanashiWindow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->context_used = -1;

  self->settings = g_settings_new (APP_ID);
  g_settings_bind (self->settings, "window-width", self, "default-width", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "window-height", self, "default-height", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "window-maximized", self, "maximized", G_SETTINGS_BIND_DEFAULT);

}

/* The rest needs the engine, a construct property set after init. */
static void
hanashi_window_constructed (GObject *object)
{
  HanashiWindow *self = HANASHI_WINDOW (object);

  G_OBJECT_CLASS (hanashi_window_parent_class)->constructed (object);

  /* The window is a view of what its application owns: the engine and the store. */
  g_return_if_fail (self->engine != NULL);

  _hanashi_window_bind_chat (self);
  _hanashi_window_bind_models (self);
  /* Folded, the chats pane is the whole window and its header needs the window buttons. */
#if HANASHI_WINDOW_SPLIT_VIEWS
  g_object_bind_property (self->split_view, "collapsed", self->sidebar, "show-window-buttons", G_BINDING_SYNC_CREATE);
  g_signal_connect (self->panel_split, "notify::show-sidebar", G_CALLBACK (on_panel_revealed), self);
  g_signal_connect (self->split_view, "notify::collapsed", G_CALLBACK (on_folded), self);
#else
  g_object_bind_property (self->leaflet, "folded", self->sidebar, "show-window-buttons", G_BINDING_SYNC_CREATE);
  g_signal_connect (self->flap, "notify::reveal-flap", G_CALLBACK (on_panel_revealed), self);
  g_signal_connect (self->leaflet, "notify::folded", G_CALLBACK (on_folded), self);
#endif
  g_signal_connect (self->sidebar, "conversation-activated", G_CALLBACK (on_conversation_activated), self);
  g_signal_connect (self->sidebar, "conversation-deleted", G_CALLBACK (on_conversation_deleted), self);
  g_signal_connect (self, "conversations-changed", G_CALLBACK (on_conversations_changed), NULL);
  g_signal_connect (self, "notify::conversation-id", G_CALLBACK (on_conversations_changed), NULL);

  _hanashi_window_on_engine_state (self->engine, NULL, self);
  /* A narrow window opens on the chat, not on the list of chats. */
  _hanashi_window_show_chat_pane (self);
  on_folded (NULL, NULL, self);
}
