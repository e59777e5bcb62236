/* hanashi-test-seams.c — the fakes behind hanashi-test-seams.h: the scripted engine
 * backend and the environment's seams.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-test"

#include "hanashi-test-seams.h"

#include <glib/gstdio.h>
#include <pthread.h>
#include <string.h>

#include "hn-chat-template.h"
#include "hn-json.h"

/* ---- the scripted engine backend ---------------------------------------------------------- */

typedef struct {
  char *path;
  HnChatTemplate *tmpl;   /* NULL: ChatML */
} ScriptedModel;

/* Layers of every scripted model (where they run follows hanashi_engine_set_gpu). */
#define SCRIPTED_N_LAYERS 4

/* The test hooks (hanashi_test_scripted_set_reply and friends). */
static pthread_mutex_t scripted_lock = PTHREAD_MUTEX_INITIALIZER;
static char **scripted_reply;
static char *scripted_template;
static char *scripted_last_prompt;
static int scripted_hold = -1;
static char *scripted_gpu_device;      /* the last load's device request */
static int scripted_gpu_layers;
static char *scripted_gpu_notice;      /* set: the device cannot be used, for this reason */

void
hanashi_test_scripted_set_gpu_failure (const char *notice)
{
  pthread_mutex_lock (&scripted_lock);
  g_free (scripted_gpu_notice);
  scripted_gpu_notice = g_strdup (notice);
  pthread_mutex_unlock (&scripted_lock);
}

char *
hanashi_test_scripted_dup_last_gpu (int *n_layers)
{
  pthread_mutex_lock (&scripted_lock);
  char *device = g_strdup (scripted_gpu_device);
  *n_layers = scripted_gpu_layers;
  pthread_mutex_unlock (&scripted_lock);
  return device;
}

/* A named device takes the layers asked for (Auto: all of them); the scripted world has no
 * hardware device, so the automatic choice is the processor, as on a computer without one. */
static void
scripted_place_layers (const HanashiBackendSink *sink, HanashiModelInfo *info)
{
  pthread_mutex_lock (&scripted_lock);
  g_free (scripted_gpu_device);
  scripted_gpu_device = g_strdup (sink->gpu_device);
  scripted_gpu_layers = sink->gpu_layers;
  info->n_layers = SCRIPTED_N_LAYERS;
  if (sink->gpu_layers != 0 && sink->gpu_device != NULL && scripted_gpu_notice != NULL)
    info->gpu_notice = g_strdup (scripted_gpu_notice);
  else if (sink->gpu_layers != 0 && sink->gpu_device != NULL)
    {
      info->gpu_device = g_strdup (sink->gpu_device);
      info->gpu_layers = sink->gpu_layers == HANASHI_GPU_LAYERS_AUTO ? SCRIPTED_N_LAYERS
                                                                       : MIN (sink->gpu_layers, SCRIPTED_N_LAYERS);
    }
  pthread_mutex_unlock (&scripted_lock);
}

void
hanashi_test_scripted_set_reply (const char * const *pieces)
{
  pthread_mutex_lock (&scripted_lock);
  g_strfreev (scripted_reply);
  scripted_reply = g_strdupv ((char **) pieces);
  pthread_mutex_unlock (&scripted_lock);
}

void
hanashi_test_scripted_hold_at (int index)
{
  pthread_mutex_lock (&scripted_lock);
  scripted_hold = index;
  pthread_mutex_unlock (&scripted_lock);
}

/* Blocks before token @index while the test holds the generation there (cancel still
 * ends the wait). */
static void
scripted_wait_at (int index, HanashiBackendSink *sink)
{
  pthread_mutex_lock (&scripted_lock);
  while (scripted_hold == index && !sink->is_cancelled (sink->data))
    {
      pthread_mutex_unlock (&scripted_lock);
      g_usleep (1000);
      pthread_mutex_lock (&scripted_lock);
    }
  pthread_mutex_unlock (&scripted_lock);
}

void
hanashi_test_scripted_set_template (const char *source)
{
  pthread_mutex_lock (&scripted_lock);
  g_free (scripted_template);
  scripted_template = g_strdup (source);
  pthread_mutex_unlock (&scripted_lock);
}

char *
hanashi_test_scripted_dup_last_prompt (void)
{
  pthread_mutex_lock (&scripted_lock);
  char *prompt = g_strdup (scripted_last_prompt);
  pthread_mutex_unlock (&scripted_lock);
  return prompt;
}

/* The request as the scripted model's template (or ChatML) writes it. */
static char *
scripted_render (ScriptedModel *m, HanashiGenerateRequest *req)
{
  static const char *const roles[] = { "system", "user", "assistant" };
  HnJson *messages = hn_json_new_array ();
  const char *system = hanashi_generate_request_get_system_prompt (req);
  if (system != NULL && *system != '\0')
    {
      HnJson *o = hn_json_new_object ();
      hn_json_object_set (o, "role", hn_json_new_string ("system"));
      hn_json_object_set (o, "content", hn_json_new_string (system));
      hn_json_array_append (messages, o);
    }
  for (guint i = 0; i < hanashi_generate_request_get_n_messages (req); i++)
    {
      HnJson *o = hn_json_new_object ();
      hn_json_object_set (o, "role", hn_json_new_string (roles[hanashi_generate_request_get_message_role (req, i)]));
      hn_json_object_set (o, "content", hn_json_new_string (hanashi_generate_request_get_message_text (req, i)));
      hn_json_array_append (messages, o);
    }
  char *prompt = NULL;
  if (m->tmpl != NULL)
    {
      HanashiThinking thinking = hanashi_generate_request_get_thinking (req);
      HnChatRenderOptions o = { .messages = messages, .add_generation_prompt = true,
                                .enable_thinking = thinking == HANASHI_THINKING_ON ? HN_CHAT_THINKING_ON
                                                   : thinking == HANASHI_THINKING_OFF ? HN_CHAT_THINKING_OFF
                                                   : HN_CHAT_THINKING_UNSET };
      prompt = hn_chat_template_render (m->tmpl, &o, NULL, NULL);
    }
  if (prompt == NULL)
    prompt = hn_chat_render_fallback (messages, true, NULL, NULL);
  hn_json_free (messages);
  char *copy = g_strdup (prompt);
  free (prompt);
  return copy;
}

static gpointer
scripted_load (const char *path, guint n_ctx, guint n_threads, guint n_batch, HanashiBackendSink *sink,
               void (*progress) (gpointer, double), HanashiModelInfo **info_out, GError **error)
{
  GStatBuf st;
  (void) n_threads;
  if (g_stat (path, &st) != 0 || !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_set_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_MODEL_UNREADABLE,
                   "Cannot read the model file “%s”", path);
      return NULL;
    }
  for (int i = 1; i <= 4; i++)
    {
      if (sink->is_cancelled (sink->data))
        {
          g_set_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED, "Loading was cancelled");
          return NULL;
        }
      g_usleep (500);
      progress (sink->data, i / 4.0);
    }
  ScriptedModel *m = g_new0 (ScriptedModel, 1);
  m->path = g_strdup (path);
  pthread_mutex_lock (&scripted_lock);
  g_autofree char *source = g_strdup (scripted_template);
  pthread_mutex_unlock (&scripted_lock);
  if (source != NULL)
    m->tmpl = hn_chat_template_new (source, strlen (source), NULL);
  guint ctx = n_ctx ? n_ctx : 512;
  HanashiModelInfo info = {
    .name = g_path_get_basename (path), .arch = g_strdup ("scripted"),
    .weight_type = g_strdup ("F32"), .path = g_strdup (path), .n_params = 1000,
    .file_size = (guint64) st.st_size, .n_ctx = ctx, .n_batch = MIN (n_batch ? n_batch : 512, ctx), .n_ctx_train = 512,
    .n_vocab = 256,
  };
  hanashi_engine_template_traits (m->tmpl, source, NULL, NULL, &info);
  scripted_place_layers (sink, &info);
  *info_out = hanashi_model_info_copy (&info);
  g_free (info.name); g_free (info.arch); g_free (info.weight_type); g_free (info.path);
  g_free (info.gpu_device); g_free (info.gpu_notice);
  return m;
}

static void
scripted_unload (gpointer model)
{
  ScriptedModel *m = model;
  hn_chat_template_free (m->tmpl);
  g_free (m->path);
  g_free (m);
}

static gint
scripted_count (gpointer model, HanashiGenerateRequest *req, GError **error)
{
  (void) model; (void) error;
  const char *system = hanashi_generate_request_get_system_prompt (req);
  gint n = system ? (gint) strlen (system) : 0;
  for (guint i = 0; i < hanashi_generate_request_get_n_messages (req); i++)
    n += 4 + (gint) strlen (hanashi_generate_request_get_message_text (req, i));
  return n;
}

static gboolean
scripted_generate (gpointer model, HanashiGenerateRequest *req, const HanashiBackendSession *session,
                   HanashiBackendSink *sink, HanashiGenerationStats *stats, GError **error)
{
  (void) session;
  const char *grammar = hanashi_generate_request_get_grammar (req);
  if (grammar != NULL && strstr (grammar, "::=") == NULL)
    {
      g_set_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_GRAMMAR_INVALID,
                   "1:1: expected a rule definition");
      return FALSE;
    }
  char *prompt = scripted_render (model, req);
  pthread_mutex_lock (&scripted_lock);
  g_free (scripted_last_prompt);
  scripted_last_prompt = prompt;
  g_auto (GStrv) script = g_strdupv (scripted_reply);
  pthread_mutex_unlock (&scripted_lock);
  guint n_prompt = (guint) scripted_count (model, req, NULL);
  for (guint done = 0; done < n_prompt; done += 64)
    {
      if (sink->is_cancelled (sink->data))
        break;
      sink->on_prompt_progress (sink->data, MIN (done + 64, n_prompt), n_prompt);
    }
  stats->n_prompt = n_prompt;
  int limit = hanashi_generate_request_get_max_tokens (req);
  int probs_k = hanashi_generate_request_get_probs_k (req);
  stats->stop_reason = HANASHI_STOP_REASON_MAX_TOKENS;
  /* a reply prefix of n tokens: the reply goes on with token n (as the real one would
   * after the tokens it was given) */
  guint n_prefix = 0;
  hanashi_generate_request_get_reply_prefix (req, &n_prefix);
  int max = (int) n_prefix + (limit > 0 ? limit : 16);
  if (script != NULL)
    max = limit > 0 ? MIN (max, (int) g_strv_length (script)) : (int) g_strv_length (script);
  stats->n_reused = n_prefix;
  g_autoptr (GString) pending = g_string_new (NULL);
  for (int i = (int) n_prefix; i < max; i++)
    {
      if (sink->is_cancelled (sink->data))
        {
          stats->stop_reason = HANASHI_STOP_REASON_CANCELLED;
          break;
        }
      char text[32];
      g_snprintf (text, sizeof text, "tok%d ", i);
      g_usleep (200);
      scripted_wait_at (i, sink);
      stats->n_generated++;
      if (probs_k > 0 && sink->on_probs != NULL)
        {
          /* A made-up record: candidates i, 1000 + i, 2000 + i, … with raw probabilities
           * 1/2, 1/4, …; the last of them removed by top-k. */
          HnTokenProbs rec = { .token = i, .logprob = -(float) G_LN2, .p = 0.6f,
                               .n_candidates = (uint32_t) probs_k };
          for (int k = 0; k < probs_k; k++)
            {
              HnProbCandidate *c = &rec.candidates[k];
              c->id = k * 1000 + i;
              c->logprob = -(float) (k + 1) * (float) G_LN2;
              gboolean last = k + 1 == probs_k && k > 0;
              c->removed_by = last ? HN_STAGE_TOP_K : HN_STAGE_NONE;
              c->p = last ? 0.0f : (k == 0 ? 0.6f : 0.4f / (float) MAX (1, probs_k - 2));
            }
          sink->on_probs (sink->data, &rec);
        }
      /* like the real engine, a character cut over pieces is sent once it is whole */
      g_string_append (pending, script != NULL ? script[i] : text);
      if (!g_utf8_validate (pending->str, (gssize) pending->len, NULL) && i + 1 < max)
        continue;
      gboolean go_on = sink->on_token (sink->data, pending->str, i);
      g_string_truncate (pending, 0);
      if (!go_on)
        {
          stats->stop_reason = HANASHI_STOP_REASON_CANCELLED;
          break;
        }
    }
  return TRUE;
}

static guint scripted_next_logits_runs;
static GArray *scripted_last_lens_prefix;   /* gint32: the last next-token request's reply prefix */

gint32 *
hanashi_test_scripted_dup_last_lens_prefix (guint *n_tokens)
{
  pthread_mutex_lock (&scripted_lock);
  guint n = scripted_last_lens_prefix != NULL ? scripted_last_lens_prefix->len : 0;
  gint32 *copy = g_new (gint32, MAX (n, 1));
  if (n > 0)
    memcpy (copy, scripted_last_lens_prefix->data, n * sizeof *copy);
  pthread_mutex_unlock (&scripted_lock);
  *n_tokens = n;
  return copy;
}

guint
hanashi_test_scripted_next_logits_runs (void)
{
  pthread_mutex_lock (&scripted_lock);
  guint n = scripted_next_logits_runs;
  pthread_mutex_unlock (&scripted_lock);
  return n;
}

/* The next token's row for the lens: the prompt's bytes are the history (the vocabulary is
 * the 256 bytes), then the reply prefix's ids as the real engine appends them, and the
 * logits a permutation of 4.0, 3.7, 3.4, … picked by a hash of the prompt and the prefix,
 * so that every conversation and every position in an answer has its own; with a grammar,
 * even ids are allowed. */
static HanashiNextLogits *
scripted_next_logits (gpointer model, HanashiGenerateRequest *req, HanashiBackendSink *sink, GError **error)
{
  enum { N_VOCAB = 256 };
  g_autofree char *prompt = scripted_render (model, req);
  guint n_prefix = 0;
  const gint32 *prefix = hanashi_generate_request_get_reply_prefix (req, &n_prefix);
  pthread_mutex_lock (&scripted_lock);
  scripted_next_logits_runs++;
  if (scripted_last_lens_prefix == NULL)
    scripted_last_lens_prefix = g_array_new (FALSE, FALSE, sizeof (gint32));
  g_array_set_size (scripted_last_lens_prefix, 0);
  if (n_prefix > 0)
    g_array_append_vals (scripted_last_lens_prefix, prefix, n_prefix);
  pthread_mutex_unlock (&scripted_lock);
  g_usleep (500);
  if (sink->is_cancelled (sink->data))
    {
      g_set_error_literal (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED, "Cancelled");
      return NULL;
    }
  guint hash = g_str_hash (prompt);
  for (guint i = 0; i < n_prefix; i++)
    hash = hash * 33u + (guint) prefix[i] + 1u;
  float *logits = g_new (float, N_VOCAB);
  guint rank_of[N_VOCAB];
  for (guint i = 0; i < N_VOCAB; i++)
    rank_of[i] = (i * 97u + hash) % N_VOCAB;
  /* after a prefix of n tokens the scripted reply took token n (see scripted_generate): it
   * is the runner-up here, so a test can tell its mark from the likeliest */
  if (n_prefix > 0 && n_prefix < N_VOCAB)
    {
      guint taken = rank_of[n_prefix];
      for (guint i = 0; i < N_VOCAB; i++)
        if (taken == 0 && rank_of[i] == 1)
          rank_of[i] = 0;                   /* swapped with the likeliest */
        else if (taken > 1 && rank_of[i] >= 1 && rank_of[i] < taken)
          rank_of[i]++;                     /* moved down one to make room */
      rank_of[n_prefix] = 1;
    }
  for (guint i = 0; i < N_VOCAB; i++)
    logits[i] = 4.0f - 0.3f * (float) rank_of[i];
  gsize len = strlen (prompt);
  gint32 *history = g_new (gint32, MAX (len + n_prefix, 1));
  for (gsize i = 0; i < len; i++)
    history[i] = (guchar) prompt[i];
  for (guint i = 0; i < n_prefix; i++)
    history[len + i] = prefix[i];
  len += n_prefix;
  HanashiNextLogits *next = g_new0 (HanashiNextLogits, 1);
  next->n_vocab = N_VOCAB;
  next->logits = g_bytes_new_take (logits, N_VOCAB * sizeof *logits);
  next->history = g_bytes_new_take (history, len * sizeof *history);
  static const gint32 newline[] = { '\n' };
  next->newline_tokens = g_bytes_new_static (newline, sizeof newline);
  /* the most likely: the ids whose permuted rank is 0, 1, 2, …; their text is "tN" */
  next->n_top = HN_PROBS_MAX_K;
  for (guint rank = 0; rank < HN_PROBS_MAX_K; rank++)
    for (guint i = 0; i < N_VOCAB; i++)
      if (rank_of[i] == rank)
        {
          next->top_ids[rank] = (gint32) i;
          next->top_texts[rank] = g_strdup_printf ("t%u", i);
        }
  const char *grammar = hanashi_generate_request_get_grammar (req);
  if (hanashi_generate_request_get_compiled_grammar (req) != NULL || (grammar != NULL && *grammar != '\0'))
    {
      guint32 *bits = g_new (guint32, N_VOCAB / 32);
      for (guint w = 0; w < N_VOCAB / 32; w++)
        bits[w] = 0x55555555u;
      next->allowed = g_bytes_new_take (bits, N_VOCAB / 32 * sizeof *bits);
    }
  return next;
}

/* Token i of a reply writes script[i] (or "tokI "); the made-up candidate k * 1000 + i
 * writes "altK_I ".  Interned: the texts outlive a change of the script. */
static const char *
scripted_token_text (gpointer model, gint32 token, gboolean spelling, gsize *len)
{
  (void) model; (void) spelling;
  if (token < 0 || token >= 1000 * HN_PROBS_MAX_K)
    return NULL;
  g_autofree char *text = NULL;
  if (token >= 1000)
    text = g_strdup_printf ("alt%d_%d ", token / 1000, token % 1000);
  else
    {
      pthread_mutex_lock (&scripted_lock);
      if (scripted_reply != NULL && (guint) token < g_strv_length (scripted_reply))
        text = g_strdup (scripted_reply[token]);
      pthread_mutex_unlock (&scripted_lock);
      if (text == NULL)
        text = g_strdup_printf ("tok%d ", token);
    }
  const char *interned = g_intern_string (text);
  *len = strlen (interned);
  return interned;
}

static const HanashiEngineBackend scripted_backend = {
  .load = scripted_load,
  .unload = scripted_unload,
  .generate = scripted_generate,
  .count_tokens = scripted_count,
  .next_logits = scripted_next_logits,
  .token_text = scripted_token_text,
};

const HanashiEngineBackend *
hanashi_test_scripted_backend (void)
{
  return &scripted_backend;
}

void
hanashi_test_use_scripted_backend (void)
{
  hanashi_engine_set_default_backend (&scripted_backend);
}

/* ---- the environment's seams -------------------------------------------------------------- */

static void
set_or_unset (const char *name, const char *value)
{
  if (value != NULL)
    g_setenv (name, value, TRUE);
  else
    g_unsetenv (name);
}

void
hanashi_test_set_memory_available_mb (const char *megabytes)
{
  set_or_unset ("HANASHI_MEM_AVAILABLE_MB", megabytes);
}

void
hanashi_test_set_hub_url (const char *url)
{
  set_or_unset ("HANASHI_HUB_URL", url);
}

