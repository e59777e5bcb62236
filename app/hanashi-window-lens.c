/* hanashi-window-lens.c — the window feeds the parameter panel's lens: while the lens is
 * open, the next token's row of the conversation shown (the prompt as sending would build
 * it, the draft included) is fetched from the engine shortly after the conversation, the
 * draft or the grammar changed.  Slider moves never come here: the lens replays its stored
 * row by itself (hanashi-lens-view.c).
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

static gboolean
fetch_lens_row (gpointer data)
{
  HanashiWindow *self = data;
  HanashiLensView *lens = hanashi_params_panel_get_lens (self->params_panel);
  self->lens_source = 0;
  if (!hanashi_lens_view_get_open (lens))
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
  g_autoptr (GError) error = NULL;
  if (!hanashi_params_panel_apply_to_request (self->params_panel, req, &error))
    {
      hanashi_lens_view_set_logits (lens, NULL, error->message);
      return G_SOURCE_REMOVE;
    }
  g_cancellable_cancel (self->lens_cancellable);
  g_clear_object (&self->lens_cancellable);
  self->lens_cancellable = g_cancellable_new ();
  hanashi_engine_next_logits_async (self->engine, req, self->lens_cancellable, lens_fetched, g_object_ref (self));
  return G_SOURCE_REMOVE;
}

void
_hanashi_window_refresh_lens (HanashiWindow *self)
{
  if (!hanashi_lens_view_get_open (hanashi_params_panel_get_lens (self->params_panel)))
    return;
  g_clear_handle_id (&self->lens_source, g_source_remove);
  self->lens_source = g_timeout_add (LENS_REFRESH_DELAY_MS, fetch_lens_row, self);
}

void
_hanashi_window_dispose_lens (HanashiWindow *self)
{
  g_clear_handle_id (&self->lens_source, g_source_remove);
  g_cancellable_cancel (self->lens_cancellable);
  g_clear_object (&self->lens_cancellable);
}
