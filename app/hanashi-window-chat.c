/* hanashi-window-chat.c — the window as a view of its HanashiChat: sending, the message
 * actions, and what the chat and the engine report about the reply.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-window"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-chat.h"
#include "hanashi-chat-view.h"
#include "hanashi-composer.h"
#include "hanashi-engine-errors.h"
#include "hanashi-message.h"
#include "hanashi-params-panel.h"
#include "hanashi-window-private.h"

static void
on_thinking_changed (HanashiComposer *composer,
                     HanashiWindow   *self)
{
  g_autoptr (GError) error = NULL;

  if (!hanashi_chat_set_thinking (self->chat, hanashi_composer_get_thinking (composer), &error))
    _hanashi_window_toast_error (self, _("Could not save the Think switch"), error);
  _hanashi_window_update_context_meter (self);
}

/* ---- what the chat reports -------------------------------------------------------------- */

static void
on_chat_problem (HanashiChat   *chat,
                 const char    *what,
                 const GError  *error,
                 HanashiWindow *self)
{
  if (what == NULL)
    hanashi_window_add_toast (self, error->message);
  else
    _hanashi_window_toast_error (self, what, error);
}

static void
on_chat_notice (HanashiChat   *chat,
                const char    *text,
                HanashiWindow *self)
{
  hanashi_window_add_toast (self, text);
}

static void
on_chat_generating (HanashiChat   *chat,
                    GParamSpec    *pspec,
                    HanashiWindow *self)
{
  hanashi_composer_set_generating (self->composer, hanashi_chat_get_generating (chat));
  _hanashi_window_update_actions (self);
  /* The conversation remembers the engine its replies come from. */
  if (hanashi_chat_get_generating (chat))
    _hanashi_window_remember_engine (self);
  if (!hanashi_chat_get_generating (chat))
    {
      _hanashi_window_update_context_meter (self);
      _hanashi_window_update_status (self);
    }
}

/* A sent edit (or another chat) ends editing; the composer's note goes with it. */
static void
on_chat_editing (HanashiChat   *chat,
                 GParamSpec    *pspec,
                 HanashiWindow *self)
{
  if (hanashi_chat_get_editing_id (chat) == 0)
    hanashi_composer_set_editing (self->composer, FALSE);
}

static void
on_reply_started (HanashiChat   *chat,
                  HanashiWindow *self)
{
  hanashi_chat_view_scroll_to_bottom (self->chat_view);
}

static void
on_chat_title (HanashiChat   *chat,
               GParamSpec    *pspec,
               HanashiWindow *self)
{
  const char *title = hanashi_chat_get_title (chat);

  /* The title names the window in the window switcher. */
  gtk_window_set_title (GTK_WINDOW (self), *title != '\0' ? title : _("Hanashi"));
}

static void
on_chat_conversation_id (HanashiChat   *chat,
                         GParamSpec    *pspec,
                         HanashiWindow *self)
{
  _hanashi_window_notify_conversation_id (self);
}

static void
on_chat_changed (HanashiChat   *chat,
                 HanashiWindow *self)
{
  _hanashi_window_emit_conversations_changed (self);
}

/* The chat reads the composer and the panel when it builds a request: the widgets are
 * the state, so what the user sees is what the engine gets. */
static const char *
composer_system_prompt (gpointer data)
{
  return hanashi_composer_get_system_prompt (HANASHI_WINDOW (data)->composer);
}

static gboolean
composer_thinking (gpointer data)
{
  return hanashi_composer_get_thinking (HANASHI_WINDOW (data)->composer);
}

static gboolean
apply_panel_params (gpointer                 data,
                    HanashiGenerateRequest  *request,
                    GError                 **error)
{
  return hanashi_params_panel_apply_to_request (HANASHI_WINDOW (data)->params_panel, request, error);
}

static char *
dup_panel_params (gpointer data)
{
  return hanashi_params_panel_dup_params_json (HANASHI_WINDOW (data)->params_panel);
}

static const HanashiChatSettingsSource window_settings = {
  composer_system_prompt,
  composer_thinking,
  apply_panel_params,
  dup_panel_params,
};

/* ---- engine events about the reply -------------------------------------------------------- */

/* A long conversation can take a while to read before the first token: the bar under the
 * header (also used for loading) shows how far the engine is. */
static void
on_prompt_progress (HanashiEngine *engine,
                    guint          id,
                    guint          done,
                    guint          total,
                    HanashiWindow *self)
{
  if (id == 0 || id != hanashi_chat_get_request_id (self->chat) || total == 0)
    return;
  gtk_progress_bar_set_fraction (self->load_progress, (double) done / total);
  gtk_widget_set_visible (GTK_WIDGET (self->load_progress), done < total);
}

static void
on_token (HanashiEngine *engine,
          guint          id,
          const char    *text,
          int            token_id,
          HanashiWindow *self)
{
  /* The first token ends the reading of the prompt (a model load keeps its bar). */
  if (id != 0 && id == hanashi_chat_get_request_id (self->chat) && self->load_cancellable == NULL)
    gtk_widget_set_visible (GTK_WIDGET (self->load_progress), FALSE);
}

/* The engine thread is busy writing, so nothing can be counted anew while a reply
 * streams: the meter shows the request's count plus the tokens written, and the count
 * after the reply settles it. */
static void
on_reply_context_tokens (HanashiChat   *chat,
                         GParamSpec    *pspec,
                         HanashiWindow *self)
{
  int in_context = hanashi_chat_get_reply_context_tokens (chat);

  if (in_context < 0)
    return;
  self->context_used = in_context;
  _hanashi_window_update_status (self);
}

static void
on_engine_error (HanashiEngine *engine,
                 guint          id,
                 GError        *error,
                 HanashiWindow *self)
{
  g_autofree char *text = hanashi_describe_engine_error (error);

  hanashi_window_add_toast (self, text);
}

static void
on_context_dropped (HanashiEngine *engine,
                    guint          id,
                    guint          n_messages,
                    guint          n_tokens,
                    HanashiWindow *self)
{
  if (id == 0 || id != hanashi_chat_get_request_id (self->chat))
    return;
  /* Translators: said when a long chat no longer fits in the model's context */
  g_autofree char *text = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE,
                                                         "The oldest message no longer fits in the context: the model did not see it.",
                                                         "The %u oldest messages no longer fit in the context: the model did not see them.",
                                                         n_messages), n_messages);
  hanashi_window_add_toast (self, text);
}

static void
on_engine_warning (HanashiEngine *engine,
                   guint          id,
                   GError        *warning,
                   HanashiWindow *self)
{
  g_autofree char *text = NULL;

  /* The engine's reason is technical and English: the log keeps it, the toast says what
   * it means for the user. */
  g_message ("Engine warning: %s", warning->message);
  if (g_error_matches (warning, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_TEMPLATE_FAILED))
    text = g_strdup (_("The model’s chat template could not be used, so the chat is written in the ChatML format instead. Answers may be worse."));
  else if (g_error_matches (warning, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CONTEXT_CLAMPED))
    text = g_strdup (_("This model supports a smaller context than the one set in Preferences, so it uses the largest it supports."));
  else
    text = hanashi_describe_engine_error (warning);
  hanashi_window_add_toast (self, text);
}

static void
send_action (GtkWidget  *widget,
             const char *action_name,
             GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);
  g_autofree char *text = hanashi_composer_dup_text (self->composer);
  g_autoptr (GError) error = NULL;

  g_autofree char *trimmed = g_strstrip (g_strdup (text));
  if (*trimmed == '\0')
    return;
  if (hanashi_chat_get_generating (self->chat) || hanashi_engine_get_model_info (self->engine) == NULL)
    return;
  if (!_hanashi_window_ensure_writable_store (self))
    return;

  if (!hanashi_chat_send (self->chat, text, &error))
    {
      /* The text stays in the composer, so nothing typed is lost.  The store's errors and
       * the panel's (an unusable grammar) are whole sentences. */
      if (error != NULL)
        hanashi_window_add_toast (self, error->message);
      return;
    }
  hanashi_composer_set_text (self->composer, "");
}

static void
stop_action (GtkWidget  *widget,
             const char *action_name,
             GVariant   *parameter)
{
  hanashi_chat_stop (HANASHI_WINDOW (widget)->chat);
}

/* ---- message actions: "chat.*", the message id as parameter ------------------------------- */

static HanashiMessage *
find_message (HanashiWindow *self,
              gint64         id)
{
  GListModel *messages = hanashi_chat_get_messages (self->chat);
  guint n = g_list_model_get_n_items (messages);

  for (guint i = 0; i < n; i++)
    {
      g_autoptr (HanashiMessage) item = g_list_model_get_item (messages, i);
      if (hanashi_message_get_id (item) == id)
        return item;   /* the list keeps it alive */
    }
  return NULL;
}

/* The actions below replace rows of the chat.  A click leaves the focus on the clicked
 * button; were that row torn down with the focus in it, GTK 4.8 would log criticals
 * (gtk_widget_is_ancestor) and hand the focus on to the next selectable label, which
 * selects all of its text.  The composer takes it first, where typing goes on anyway. */
static void
move_focus_out_of_chat (HanashiWindow *self)
{
  GtkWidget *focus = gtk_root_get_focus (GTK_ROOT (self));

  if (focus != NULL && gtk_widget_is_ancestor (focus, GTK_WIDGET (self->chat_view)))
    gtk_widget_grab_focus (GTK_WIDGET (self->composer));
}

static void
show_copied_toast (HanashiWindow *self)
{
  AdwToast *toast = adw_toast_new (_("Copied to clipboard"));
  /* Feedback, not news: gone after two seconds. */
  adw_toast_set_timeout (toast, 2);
  adw_toast_overlay_add_toast (_hanashi_window_get_toast_overlay (self), toast);
}

static void
copy_message_action (GSimpleAction *action,
                     GVariant      *parameter,
                     gpointer       user_data)
{
  HanashiWindow *self = user_data;
  HanashiMessage *message = find_message (self, g_variant_get_int64 (parameter));

  if (message == NULL)
    return;
  gdk_clipboard_set_text (gtk_widget_get_clipboard (GTK_WIDGET (self)), hanashi_message_get_text (message));
  show_copied_toast (self);
}

/* A code block's own copy button puts its text on the clipboard and says so here. */
static void
copied_action (GSimpleAction *action,
               GVariant      *parameter,
               gpointer       user_data)
{
  show_copied_toast (user_data);
}

static void
edit_message_action (GSimpleAction *action,
                     GVariant      *parameter,
                     gpointer       user_data)
{
  HanashiWindow *self = user_data;
  gint64 id = g_variant_get_int64 (parameter);
  HanashiMessage *message;

  hanashi_chat_begin_edit (self->chat, id);
  message = find_message (self, id);
  if (message == NULL || hanashi_chat_get_editing_id (self->chat) != id)
    return;
  hanashi_composer_set_text (self->composer, hanashi_message_get_text (message));
  hanashi_composer_set_editing (self->composer, TRUE);
  gtk_widget_grab_focus (GTK_WIDGET (self->composer));
}

static void
regenerate_message_action (GSimpleAction *action,
                           GVariant      *parameter,
                           gpointer       user_data)
{
  HanashiWindow *self = user_data;

  move_focus_out_of_chat (self);
  hanashi_chat_regenerate (self->chat, g_variant_get_int64 (parameter));
}

static void
branch_message_action (GSimpleAction *action,
                       GVariant      *parameter,
                       gpointer       user_data)
{
  HanashiWindow *self = user_data;
  gint64 id;
  guint32 token_index;
  gint32 candidate;

  g_variant_get (parameter, "(xui)", &id, &token_index, &candidate);
  move_focus_out_of_chat (self);
  hanashi_chat_branch (self->chat, id, token_index, candidate);
}

static void
show_token_in_lens_action (GSimpleAction *action,
                           GVariant      *parameter,
                           gpointer       user_data)
{
  HanashiWindow *self = user_data;
  gint64 id;
  guint32 token_index;

  g_variant_get (parameter, "(xu)", &id, &token_index);
  _hanashi_window_show_token_in_lens (self, id, token_index);
}

static void
delete_message_action (GSimpleAction *action,
                       GVariant      *parameter,
                       gpointer       user_data)
{
  HanashiWindow *self = user_data;

  move_focus_out_of_chat (self);
  hanashi_chat_delete_message (self->chat, g_variant_get_int64 (parameter));
}

static void
previous_alternative_action (GSimpleAction *action,
                             GVariant      *parameter,
                             gpointer       user_data)
{
  HanashiWindow *self = user_data;

  move_focus_out_of_chat (self);
  hanashi_chat_switch_alternative (self->chat, g_variant_get_int64 (parameter), -1);
}

static void
next_alternative_action (GSimpleAction *action,
                         GVariant      *parameter,
                         gpointer       user_data)
{
  HanashiWindow *self = user_data;

  move_focus_out_of_chat (self);
  hanashi_chat_switch_alternative (self->chat, g_variant_get_int64 (parameter), +1);
}

static void
undo_delete_action (GSimpleAction *action,
                    GVariant      *parameter,
                    gpointer       user_data)
{
  HanashiWindow *self = user_data;

  move_focus_out_of_chat (self);
  hanashi_chat_undo_delete (self->chat);
}

/* Undo (the toast's button, Ctrl+Z) is offered in the chat the deletion was made in, until
 * the next change to it. */
static gboolean
undo_offered (HanashiWindow *self)
{
  return hanashi_chat_get_can_undo (self->chat) &&
         hanashi_chat_get_undo_conversation_id (self->chat) == hanashi_chat_get_conversation_id (self->chat);
}

/* How long libadwaita 1.2 animates a toast in or out, with room to spare. */
#define UNDO_TOAST_ANIMATION_US (500 * 1000)

static gboolean
dismiss_undo_toast_cb (gpointer data)
{
  HanashiWindow *self = data;

  self->undo_dismiss_source = 0;
  /* Gone already when its button was used (the "dismissed" handler clears it); a newer
   * deletion may have made the offer good again. */
  if (self->undo_toast != NULL && !undo_offered (self))
    {
      /* libadwaita 1.2 crashes when a toast is dismissed while it still animates in
       * (a message deleted and a new one sent at once): wait until it is fully shown. */
      gint64 shown_for = g_get_monotonic_time () - self->undo_toast_shown;
      if (shown_for < UNDO_TOAST_ANIMATION_US)
        {
          self->undo_dismiss_source = g_timeout_add ((guint) ((UNDO_TOAST_ANIMATION_US - shown_for) / 1000) + 1,
                                                     dismiss_undo_toast_cb, self);
          return G_SOURCE_REMOVE;
        }

      AdwToast *toast = self->undo_toast;
      g_clear_weak_pointer (&self->undo_toast);
      adw_toast_dismiss (toast);
    }
  return G_SOURCE_REMOVE;
}

static void
update_undo (HanashiWindow *self)
{
  gboolean can_undo = undo_offered (self);
  GAction *action = g_action_map_lookup_action (G_ACTION_MAP (self->chat_actions), "undo-delete");

  g_simple_action_set_enabled (G_SIMPLE_ACTION (action), can_undo);
  /* Not from here: this may run inside the toast's own Undo button, which dismisses its
   * toast right after; a toast is dismissed once. */
  if (!can_undo && self->undo_toast != NULL && self->undo_dismiss_source == 0)
    self->undo_dismiss_source = g_idle_add (dismiss_undo_toast_cb, self);
}

static const GActionEntry chat_actions[] = {
  { "copy", copy_message_action, "x" },
  { "copied", copied_action },
  { "edit", edit_message_action, "x" },
  { "regenerate", regenerate_message_action, "x" },
  { "branch", branch_message_action, "(xui)" },
  { "show-token-in-lens", show_token_in_lens_action, "(xu)" },
  { "delete", delete_message_action, "x" },
  { "previous-alternative", previous_alternative_action, "x" },
  { "next-alternative", next_alternative_action, "x" },
  { "undo-delete", undo_delete_action },
};

static void
on_message_undo_dismissed (AdwToast      *toast,
                           HanashiWindow *self)
{
  /* Closing the toast only hides it: Ctrl+Z still undoes until the chat changes. */
  if (self->undo_toast == toast)
    g_clear_weak_pointer (&self->undo_toast);
  self->undo_toast_gone = g_get_monotonic_time ();
}

static void
show_undo_toast (HanashiWindow *self)
{
  AdwToast *toast = adw_toast_new (_("Message deleted"));

  adw_toast_set_button_label (toast, _("_Undo"));
  adw_toast_set_action_name (toast, "chat.undo-delete");
  adw_toast_set_priority (toast, ADW_TOAST_PRIORITY_HIGH);
  /* A deleted reply can take minutes to write again: the offer stays until the chat
   * changes (or the user closes it), not a few seconds. */
  adw_toast_set_timeout (toast, 0);
  g_signal_connect_object (toast, "dismissed", G_CALLBACK (on_message_undo_dismissed), self, 0);
  g_set_weak_pointer (&self->undo_toast, toast);
  self->undo_toast_shown = g_get_monotonic_time ();
  /* The window's own overlay, not the chat's (_hanashi_window_get_toast_overlay): this
   * toast outlives a switch to another chat, and libadwaita 1.2 crashes when a toast's
   * overlay is unmapped while the toast animates out. */
  adw_toast_overlay_add_toast (self->toast_overlay, toast);
}

static gboolean
show_undo_toast_cb (gpointer data)
{
  HanashiWindow *self = data;

  self->undo_toast_source = 0;
  if (self->undo_toast == NULL && undo_offered (self))
    show_undo_toast (self);
  return G_SOURCE_REMOVE;
}


static void
on_message_deleted (HanashiChat   *chat,
                    HanashiWindow *self)
{
  gint64 since_gone = g_get_monotonic_time () - self->undo_toast_gone;

  /* One deletion can be undone at a time: a toast still on screen now undoes the newest. */
  if (self->undo_toast != NULL || self->undo_toast_source != 0)
    return;
  /* A toast added while the previous one animates out crashes libadwaita 1.2 (after Undo
   * and another deletion at once, say): the new one waits for the old one to leave. */
  if (self->undo_toast_gone != 0 && since_gone < UNDO_TOAST_ANIMATION_US)
    self->undo_toast_source = g_timeout_add ((guint) ((UNDO_TOAST_ANIMATION_US - since_gone) / 1000) + 1,
                                             show_undo_toast_cb, self);
  else
    show_undo_toast (self);
}

static void
on_edit_cancelled (HanashiComposer *composer,
                   HanashiWindow   *self)
{
  hanashi_chat_cancel_edit (self->chat);
  hanashi_composer_set_text (self->composer, "");
}

/* ---- conversations ---------------------------------------------------------------------- */

void
hanashi_window_load_conversation (HanashiWindow *self,
                                  gint64         conversation_id)
{
  g_autoptr (GError) error = NULL;

  g_return_if_fail (HANASHI_IS_WINDOW (self));

  /* The text of a message being edited belongs to the chat it came from. */
  if (hanashi_chat_get_editing_id (self->chat) != 0)
    hanashi_composer_set_text (self->composer, "");
  hanashi_composer_set_editing (self->composer, FALSE);
  if (!hanashi_chat_load (self->chat, conversation_id, &error))
    _hanashi_window_toast_error (self, _("Could not open the conversation"), error);
  hanashi_composer_set_system_prompt (self->composer, hanashi_chat_get_system_prompt (self->chat));
  hanashi_composer_set_thinking (self->composer, hanashi_chat_get_thinking (self->chat));
  /* "{}" and NULL both mean: the defaults from Preferences. */
  hanashi_params_panel_set_params_json (self->params_panel, hanashi_chat_get_params_json (self->chat));
  /* A chat with a server's model goes back to that model. */
  _hanashi_window_restore_engine (self);
  _hanashi_window_update_context_meter (self);
  hanashi_chat_view_scroll_to_bottom (self->chat_view);
  _hanashi_window_show_chat_pane (self);
}

static gboolean
count_draft_cb (gpointer data)
{
  HanashiWindow *self = data;

  self->draft_count_source = 0;
  _hanashi_window_update_context_meter (self);
  return G_SOURCE_REMOVE;
}

static void
on_draft_changed (GtkTextBuffer *buffer,
                  HanashiWindow *self)
{
  if (gtk_widget_in_destruction (GTK_WIDGET (self)))
    return;
  /* Counting goes through the engine thread: once typing pauses, not per keystroke. */
  g_clear_handle_id (&self->draft_count_source, g_source_remove);
  self->draft_count_source = g_timeout_add (300, count_draft_cb, self);
}

static void
on_system_prompt_changed (HanashiComposer *composer,
                          HanashiWindow   *self)
{
  g_autoptr (GError) error = NULL;

  if (!hanashi_chat_set_system_prompt (self->chat, hanashi_composer_get_system_prompt (composer), &error))
    _hanashi_window_toast_error (self, _("Could not save the system prompt"), error);
  _hanashi_window_update_context_meter (self);
}

static void
on_params_changed (HanashiParamsPanel *panel,
                   HanashiWindow      *self)
{
  g_autoptr (GError) error = NULL;

  if (!hanashi_chat_save_params (self->chat, &error))
    _hanashi_window_toast_error (self, _("Could not save the parameters"), error);
}


void
_hanashi_window_bind_chat (HanashiWindow *self)
{
  g_autoptr (GSimpleActionGroup) chat_group = g_simple_action_group_new ();

  self->chat = hanashi_chat_new (self->engine);
  hanashi_chat_set_settings_source (self->chat, &window_settings, self);
  g_signal_connect_swapped (hanashi_chat_get_messages (self->chat), "items-changed",
                            G_CALLBACK (_hanashi_window_update_main_page), self);
  hanashi_chat_view_set_model (self->chat_view, hanashi_chat_get_messages (self->chat));
  g_signal_connect (self->chat, "problem", G_CALLBACK (on_chat_problem), self);
  g_signal_connect (self->chat, "notice", G_CALLBACK (on_chat_notice), self);
  g_signal_connect (self->chat, "notify::generating", G_CALLBACK (on_chat_generating), self);
  g_signal_connect (self->chat, "notify::title", G_CALLBACK (on_chat_title), self);
  g_signal_connect (self->chat, "notify::editing-id", G_CALLBACK (on_chat_editing), self);
  g_signal_connect (self->chat, "notify::conversation-id", G_CALLBACK (on_chat_conversation_id), self);
  g_signal_connect (self->chat, "reply-started", G_CALLBACK (on_reply_started), self);
  g_signal_connect (self->chat, "notify::reply-context-tokens", G_CALLBACK (on_reply_context_tokens), self);
  g_signal_connect (self->chat, "changed", G_CALLBACK (on_chat_changed), self);
  g_signal_connect (self->chat, "message-deleted", G_CALLBACK (on_message_deleted), self);
  g_action_map_add_action_entries (G_ACTION_MAP (chat_group), chat_actions, G_N_ELEMENTS (chat_actions), self);
  gtk_widget_insert_action_group (GTK_WIDGET (self), "chat", G_ACTION_GROUP (chat_group));
  self->chat_actions = g_object_ref (chat_group);
  g_signal_connect_swapped (self->chat, "notify::can-undo", G_CALLBACK (update_undo), self);
  g_signal_connect_swapped (self->chat, "notify::conversation-id", G_CALLBACK (update_undo), self);
  update_undo (self);

  g_signal_connect (self->engine, "token", G_CALLBACK (on_token), self);
  g_signal_connect (self->engine, "prompt-progress", G_CALLBACK (on_prompt_progress), self);
  g_signal_connect (self->engine, "error", G_CALLBACK (on_engine_error), self);
  g_signal_connect (self->engine, "warning", G_CALLBACK (on_engine_warning), self);
  g_signal_connect (self->engine, "context-dropped", G_CALLBACK (on_context_dropped), self);

  g_signal_connect (self->composer, "system-prompt-changed", G_CALLBACK (on_system_prompt_changed), self);
  g_signal_connect (self->composer, "thinking-changed", G_CALLBACK (on_thinking_changed), self);
  g_signal_connect (self->composer, "edit-cancelled", G_CALLBACK (on_edit_cancelled), self);
  g_signal_connect_object (gtk_text_view_get_buffer (hanashi_composer_get_text_view (self->composer)), "changed",
                           G_CALLBACK (on_draft_changed), self, 0);
  g_signal_connect (self->params_panel, "changed", G_CALLBACK (on_params_changed), self);
  g_signal_connect_swapped (self->params_panel, "lens-wanted", G_CALLBACK (_hanashi_window_lens_wanted), self);
}

void
_hanashi_window_class_init_chat (GtkWidgetClass *widget_class)
{
  gtk_widget_class_install_action (widget_class, "win.send", NULL, send_action);
  gtk_widget_class_install_action (widget_class, "win.stop", NULL, stop_action);
}
