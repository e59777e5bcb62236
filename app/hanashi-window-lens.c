/* hanashi-window-lens.c — the window feeds the parameter panel's lens: while the lens is
 * open, the next token's row of the conversation shown (the prompt as sending would build
 * it, the draft included) is fetched from the engine shortly after the conversation, the
 * draft or the grammar changed.  Slider moves never come here: the lens replays its stored
 * row by itself (hanashi-lens-view.c).
 *
 * Or a token picked in an answer ("Show in the Lens" in its popover): the row at that
 * position, one model run with the answer's tokens before it as the reply prefix.  It stays
 * while the conversation goes on (the user is looking at that token), until the user goes
 * back (win.lens-next-token), another chat is shown or the answer is gone; a new grammar
 * fetches that token's row again, for its allowed set.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-window"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-chat.h"
#include "hanashi-composer.h"
#include "hanashi-lens-view.h"
#include "hanashi-params-panel.h"
#include "hanashi-window-private.h"

/* A burst of changes (typing, a reply ending) costs one model run. */
#define LENS_REFRESH_DELAY_MS 250

static void
lens_fetched (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (HanashiWindow) self = user_data;
  g_autoptr (GError) error = NULL;
  g_autoptr (HanashiNextLogits) next = hanashi_engine_next_logits_finish (HANASHI_ENGINE (source), result, &error);
  if (next == NULL)
    {
      /* a newer request or a reply replaced this one: it brings its own row */
      if (g_error_matches (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED)
          || g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        return;
      hanashi_lens_view_set_logits (hanashi_params_panel_get_lens (self->params_panel), NULL, error->message);
      return;
    }
  hanashi_lens_view_set_logits (hanashi_params_panel_get_lens (self->params_panel), next, NULL);
}

static void
fetch_row (HanashiWindow *self, HanashiGenerateRequest *req)
{
  HanashiLensView *lens = hanashi_params_panel_get_lens (self->params_panel);
  g_autoptr (GError) error = NULL;
  if (!hanashi_params_panel_apply_to_request (self->params_panel, req, &error))
    {
      hanashi_lens_view_set_logits (lens, NULL, error->message);
      return;
    }
  g_cancellable_cancel (self->lens_cancellable);
  g_clear_object (&self->lens_cancellable);
  self->lens_cancellable = g_cancellable_new ();
  hanashi_engine_next_logits_async (self->engine, req, self->lens_cancellable, lens_fetched, g_object_ref (self));
}

/* The answer the picked token belongs to is still in the thread shown. */
static gboolean
picked_answer_shown (HanashiWindow *self)
{
  GListModel *messages = hanashi_chat_get_messages (self->chat);
  for (guint i = 0; i < g_list_model_get_n_items (messages); i++)
    {
      g_autoptr (HanashiMessage) message = g_list_model_get_item (messages, i);
      if (hanashi_message_get_id (message) == self->lens_pick_message)
        return TRUE;
    }
  return FALSE;
}

/* "Token 12 of the answer: “caf”", the token's text as the loaded model writes it, with
 * line breaks and tabs spelled out so that the heading stays one line. */
static char *
describe_picked_token (HanashiWindow *self, gint32 token)
{
  gboolean is_control = FALSE;
  g_autoptr (GBytes) bytes = hanashi_engine_dup_token_text (self->engine, token, &is_control);
  gsize len = 0;
  const char *data = bytes != NULL ? g_bytes_get_data (bytes, &len) : "";
  g_autofree char *valid = g_utf8_make_valid (data != NULL ? data : "", (gssize) len);
  GString *shown = g_string_new (NULL);
  for (const char *c = valid; *c != '\0'; c++)
    if (*c == '\n')
      g_string_append (shown, "\\n");
    else if (*c == '\t')
      g_string_append (shown, "\\t");
    else
      g_string_append_c (shown, *c);
  g_autofree char *text = g_string_free (shown, FALSE);
  /* Translators: the heading of the panel's lens when it shows a token picked in an answer;
   * %u is the token's number in the answer, %s its text */
  return g_strdup_printf (_("Token %u of the answer: “%s”"), self->lens_pick_index + 1, text);
}

/* The picked token's row: FALSE (and back to the next token) when it cannot be had any more. */
static gboolean
fetch_picked_row (HanashiWindow *self)
{
  gint32 chosen = -1;
  g_autoptr (HanashiGenerateRequest) req = NULL;
  if (picked_answer_shown (self))
    req = hanashi_chat_build_token_request (self->chat, self->lens_pick_message, self->lens_pick_index, &chosen);
  if (req == NULL)
    {
      self->lens_pick_message = 0;
      hanashi_lens_view_set_position (hanashi_params_panel_get_lens (self->params_panel), NULL, -1);
      return FALSE;
    }
  g_autofree char *heading = describe_picked_token (self, chosen);
  hanashi_lens_view_set_position (hanashi_params_panel_get_lens (self->params_panel), heading, chosen);
  fetch_row (self, req);
  return TRUE;
}

static gboolean
fetch_lens_row (gpointer data)
{
  HanashiWindow *self = data;
  HanashiLensView *lens = hanashi_params_panel_get_lens (self->params_panel);
  self->lens_source = 0;
  if (!hanashi_lens_view_get_open (lens))
    return G_SOURCE_REMOVE;
  if (self->lens_pick_message != 0 && fetch_picked_row (self))
    return G_SOURCE_REMOVE;
  if (hanashi_engine_get_model_info (self->engine) == NULL)
    {
      hanashi_lens_view_set_logits (lens, NULL, _("Load a model to see its candidates for the next token."));
      return G_SOURCE_REMOVE;
    }
  /* a reply being written: the row follows when it ends (the context meter's update) */
  if (hanashi_chat_get_generating (self->chat))
    return G_SOURCE_REMOVE;
  g_autofree char *draft = hanashi_composer_get_editing (self->composer) ? NULL
                           : hanashi_composer_dup_text (self->composer);
  if (draft != NULL)
    g_strstrip (draft);
  g_autoptr (HanashiGenerateRequest) req
      = hanashi_chat_build_request (self->chat, draft != NULL && *draft != '\0' ? draft : NULL);
  fetch_row (self, req);
  return G_SOURCE_REMOVE;
}

static void
schedule_fetch (HanashiWindow *self)
{
  g_clear_handle_id (&self->lens_source, g_source_remove);
  self->lens_source = g_timeout_add (LENS_REFRESH_DELAY_MS, fetch_lens_row, self);
}

/* The conversation, the draft or the model changed. */
void
_hanashi_window_refresh_lens (HanashiWindow *self)
{
  if (self->lens_pick_message != 0)
    {
      /* the picked token's row holds until its answer is gone (or the model that wrote it) */
      if (picked_answer_shown (self) && hanashi_engine_get_model_info (self->engine) != NULL)
        return;
      self->lens_pick_message = 0;
      hanashi_lens_view_set_position (hanashi_params_panel_get_lens (self->params_panel), NULL, -1);
    }
  if (!hanashi_lens_view_get_open (hanashi_params_panel_get_lens (self->params_panel)))
    return;
  schedule_fetch (self);
}

/* The lens was opened, or the panel's grammar changed: whichever row it shows, again. */
void
_hanashi_window_lens_wanted (HanashiWindow *self)
{
  if (self->lens_pick_message != 0)
    {
      /* the new grammar's allowed set at that token, at once */
      g_clear_handle_id (&self->lens_source, g_source_remove);
      if (fetch_picked_row (self))
        return;
    }
  if (hanashi_lens_view_get_open (hanashi_params_panel_get_lens (self->params_panel)))
    schedule_fetch (self);
}

void
_hanashi_window_show_token_in_lens (HanashiWindow *self,
                                    gint64         message_id,
                                    guint          token_index)
{
  HanashiLensView *lens = hanashi_params_panel_get_lens (self->params_panel);
  gint64 previous = self->lens_pick_message;
  guint previous_index = self->lens_pick_index;
  self->lens_pick_message = message_id;
  self->lens_pick_index = token_index;
  g_clear_handle_id (&self->lens_source, g_source_remove);
  if (!fetch_picked_row (self))
    {
      /* nothing to look at there (a notice said why, if anything): keep what was shown */
      self->lens_pick_message = previous;
      self->lens_pick_index = previous_index;
      if (previous != 0)
        fetch_picked_row (self);
      return;
    }
  g_object_set (self, "panel-revealed", TRUE, NULL);
  /* opening asks for the row again ("lens-wanted"): the picked one, already on its way */
  if (!hanashi_lens_view_get_open (lens))
    {
      g_signal_handlers_block_by_func (self->params_panel, _hanashi_window_lens_wanted, self);
      hanashi_lens_view_set_open (lens, TRUE);
      g_signal_handlers_unblock_by_func (self->params_panel, _hanashi_window_lens_wanted, self);
    }
  gtk_widget_grab_focus (GTK_WIDGET (lens));
}

static void
lens_next_token_action (GtkWidget  *widget,
                        const char *action_name,
                        GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);
  if (self->lens_pick_message == 0)
    return;
  self->lens_pick_message = 0;
  HanashiLensView *lens = hanashi_params_panel_get_lens (self->params_panel);
  hanashi_lens_view_set_position (lens, NULL, -1);
  hanashi_lens_view_set_logits (lens, NULL, NULL);
  g_clear_handle_id (&self->lens_source, g_source_remove);
  fetch_lens_row (self);
}

void
_hanashi_window_class_init_lens (GtkWidgetClass *widget_class)
{
  gtk_widget_class_install_action (widget_class, "win.lens-next-token", NULL, lens_next_token_action);
}

void
_hanashi_window_dispose_lens (HanashiWindow *self)
{
  g_clear_handle_id (&self->lens_source, g_source_remove);
  g_cancellable_cancel (self->lens_cancellable);
  g_clear_object (&self->lens_cancellable);
}
