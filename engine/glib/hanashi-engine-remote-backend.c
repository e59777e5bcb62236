/* hanashi-engine-remote-backend.c: a model on an OpenAI-compatible server, behind the same
 * backend table as a model file, so the engine thread's protocol (queue, events, cancel,
 * coalescing) and the app's streaming path are the same for both.
 *
 * The client calls are blocking (hanashi-remote.c); the engine's cancel is a watermark the
 * backend polls, so while a call runs a small watcher thread polls it and cancels the call's
 * GCancellable, which interrupts the HTTP read at once.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hanashi-engine-backend.h"
#include "hanashi-remote.h"

#include <stdatomic.h>
#include <string.h>

typedef struct {
  HanashiRemote *remote;
  char *model_id;
  gboolean is_hanashi;
  GHashTable *reported;   /* "left out" messages already given as warnings for this model */
} RemoteModel;

/* ---- cancel watcher ----------------------------------------------------------------------- */

typedef struct {
  HanashiBackendSink *sink;
  GCancellable *cancellable;
  atomic_bool finished;
  GThread *thread;
} Watcher;

static gpointer
watch_cancel (gpointer data)
{
  Watcher *w = data;
  while (!atomic_load (&w->finished))
    {
      if (w->sink->is_cancelled (w->sink->data))
        {
          g_cancellable_cancel (w->cancellable);
          break;
        }
      g_usleep (5000);
    }
  return NULL;
}

static void
watcher_start (Watcher *w, HanashiBackendSink *sink)
{
  w->sink = sink;
  w->cancellable = g_cancellable_new ();
  atomic_store (&w->finished, FALSE);
  w->thread = g_thread_new ("hanashi-remote-cancel", watch_cancel, w);
}

static void
watcher_stop (Watcher *w)
{
  atomic_store (&w->finished, TRUE);
  g_thread_join (w->thread);
  g_clear_object (&w->cancellable);
}

/* ---- the backend ---------------------------------------------------------------------------- */

static gpointer
remote_load (const char *path, guint n_ctx, guint n_threads, guint n_batch, HanashiBackendSink *sink,
             void (*progress) (gpointer data, double fraction), HanashiModelInfo **info_out, GError **error)
{
  (void) path; (void) n_ctx; (void) n_threads; (void) n_batch; (void) sink; (void) progress; (void) info_out;
  g_set_error_literal (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_FAILED,
                       "A remote model is loaded from its server, not from a file");
  return NULL;
}

static gpointer
remote_load_from (gpointer source, const char *name, HanashiBackendSink *sink, HanashiModelInfo **info_out,
                  GError **error)
{
  HanashiRemote *remote = source;
  gboolean is_hanashi = FALSE;
  Watcher w;
  watcher_start (&w, sink);
  char **ids = hanashi_remote_list_models (remote, &is_hanashi, w.cancellable, error);
  watcher_stop (&w);
  if (ids == NULL)
    return NULL;
  const char *chosen = NULL;
  for (char **id = ids; *id; id++)
    if (name == NULL || *name == '\0' || strcmp (*id, name) == 0)
      {
        chosen = *id;
        break;
      }
  if (chosen == NULL)
    {
      g_autofree char *listed = ids[0] ? g_strjoinv (", ", ids) : g_strdup ("none");
      if (name && *name)
        g_set_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_NOT_FOUND,
                     "The server at %s does not serve the model “%s” (it lists: %s)",
                     hanashi_remote_get_base_url (remote), name, listed);
      else
        g_set_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_NOT_FOUND,
                     "The server at %s lists no models", hanashi_remote_get_base_url (remote));
      g_strfreev (ids);
      return NULL;
    }
  RemoteModel *model = g_new0 (RemoteModel, 1);
  model->remote = hanashi_remote_ref (remote);
  model->model_id = g_strdup (chosen);
  model->is_hanashi = is_hanashi;
  model->reported = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_strfreev (ids);

  HanashiModelInfo *info = g_new0 (HanashiModelInfo, 1);
  info->name = g_strdup (model->model_id);
  info->arch = g_strdup ("remote");
  info->remote_url = g_strdup (hanashi_remote_get_api_url (remote));
  info->remote_is_hanashi = is_hanashi;
  *info_out = info;
  return model;
}

static void
remote_unload (gpointer data)
{
  RemoteModel *model = data;
  hanashi_remote_unref (model->remote);
  g_free (model->model_id);
  g_hash_table_unref (model->reported);
  g_free (model);
}

typedef struct {
  HanashiBackendSink *sink;
  GCancellable *cancellable;
  gboolean stopped;   /* on_token asked to stop */
  RemoteModel *model;
  GString *left_out;  /* parameters not sent, not reported for this model before */
} Relay;

/* One warning per generation for what was left out, and each thing only once per model:
 * the same reply settings would otherwise repeat it on every reply. */
static void
relay_flush_left_out (Relay *relay)
{
  if (relay->left_out->len > 0 && relay->sink->on_warning)
    relay->sink->on_warning (relay->sink->data, HANASHI_ENGINE_ERROR_PARAM_UNAVAILABLE, relay->left_out->str);
  g_string_truncate (relay->left_out, 0);
}

static void
relay_delta (gpointer data, const char *text, gsize len)
{
  (void) len;   /* the sink takes C strings: a NUL inside a piece ends it, as for local tokens */
  Relay *relay = data;
  if (relay->stopped)
    return;
  relay_flush_left_out (relay);
  /* The server's token ids are not ours: -1. */
  if (!relay->sink->on_token (relay->sink->data, text, -1))
    {
      relay->stopped = TRUE;
      g_cancellable_cancel (relay->cancellable);
    }
}

static void
relay_left_out (gpointer data, const char *message)
{
  Relay *relay = data;
  if (!g_hash_table_add (relay->model->reported, g_strdup (message)))
    return;
  if (relay->left_out->len > 0)
    g_string_append (relay->left_out, "; ");
  g_string_append (relay->left_out, message);
}

static gboolean
remote_generate (gpointer data, HanashiGenerateRequest *req, const HanashiBackendSession *session,
                 HanashiBackendSink *sink, HanashiGenerationStats *stats, GError **error)
{
  RemoteModel *model = data;
  (void) session;   /* the server keeps its own cache; there is no session file */
  Watcher w;
  watcher_start (&w, sink);
  Relay relay = { sink, w.cancellable, FALSE, model, g_string_new (NULL) };
  HanashiRemoteChat chat = { .model = model->model_id, .request = req, .is_hanashi = model->is_hanashi };
  HanashiRemoteCallbacks callbacks = { relay_delta, relay_left_out, &relay };
  HanashiRemoteResult result;
  g_autoptr (GError) local = NULL;
  gboolean ok = hanashi_remote_chat_stream (model->remote, &chat, &callbacks, &result, w.cancellable, &local);
  watcher_stop (&w);
  relay_flush_left_out (&relay);
  g_string_free (relay.left_out, TRUE);

  memset (stats, 0, sizeof *stats);
  stats->n_prompt = result.n_prompt;
  stats->n_generated = result.n_generated;
  stats->time_to_first_token = result.time_to_first_token;
  stats->gen_tokens_per_second = result.gen_tokens_per_second;
  stats->stop_reason = result.stop_reason;
  if (!ok && g_error_matches (local, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_CANCELLED))
    {
      /* A cancel is a normal end, as for a local model: the partial reply stands. */
      stats->stop_reason = HANASHI_STOP_REASON_CANCELLED;
      return TRUE;
    }
  if (!ok)
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  return TRUE;
}

static gint
remote_count_tokens (gpointer data, HanashiGenerateRequest *req, GError **error)
{
  (void) data; (void) req;
  g_set_error_literal (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_FAILED,
                       "A remote server does not count tokens before a reply");
  return -1;
}

static const HanashiEngineBackend remote_backend = {
  .load = remote_load,
  .unload = remote_unload,
  .generate = remote_generate,
  .count_tokens = remote_count_tokens,
  .load_from = remote_load_from,
};

const HanashiEngineBackend *
hanashi_engine_remote_backend (void)
{
  return &remote_backend;
}
