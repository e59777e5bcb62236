/* hanashi-engine-model-backend.c: the real backend of the engine thread, a thin adapter over
 * the GLib-free conversation core (engine/hn-chat.h).
 *
 * Everything here runs on the engine thread.  The core renders the conversation, fits it to
 * the context, reuses what the KV cache or the session file holds, generates and saves the
 * session; this file loads the model, translates the request, the sink and the statistics,
 * and maps the core's errors and warnings onto HanashiEngineError.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-engine"

#include "hanashi-engine-backend.h"

#include <math.h>
#include <string.h>

#include "hn-chat.h"
#include "hn-context.h"
#include "hn-quants.h"
#include "hn-vk.h"

/* The context meter and the default context when the caller passes 0. */
#define DEFAULT_N_CTX 4096

typedef struct {
  HnModel *model;                /* owned by weights once that exists, before by this */
  HnVocab *vocab;
  HanashiModelLoan *weights;     /* model and vocab, lent to whoever asks (the app's server) */
  HnChatModel *chat_model;
  HnChat *chat;
  GString *piece;                /* the text of one token event, reused */
  int gpu_layers;                /* on the device after the last generation (or the load) */
} ModelBackend;

/* The index hn_vk_list_devices gives the device of that name, or -1 when it is not there
 * (listing asks the driver: this runs on the engine thread, never the main loop). */
static int
gpu_device_index (const char *name)
{
  HnVkDeviceInfo devices[16];
  HnError err = { 0 };
  int n = hn_vk_list_devices (devices, G_N_ELEMENTS (devices), &err);
  for (int i = 0; i < MIN (n, (int) G_N_ELEMENTS (devices)); i++)
    if (g_strcmp0 (devices[i].name, name) == 0)
      return i;
  return -1;
}

/* ---- errors ----------------------------------------------------------------------------- */

static void
set_error_from_hn (GError **error, const HnError *err, int fallback_code, const char *prefix)
{
  int code = fallback_code;
  switch (err->code)
    {
    case HN_ERR_IO: code = HANASHI_ENGINE_ERROR_MODEL_UNREADABLE; break;
    case HN_ERR_NOMEM: code = HANASHI_ENGINE_ERROR_OUT_OF_MEMORY; break;
    case HN_ERR_CANCELLED: code = HANASHI_ENGINE_ERROR_CANCELLED; break;
    case HN_ERR_GRAMMAR: code = HANASHI_ENGINE_ERROR_GRAMMAR_INVALID; break;
    case HN_ERR_TEMPLATE: code = HANASHI_ENGINE_ERROR_TEMPLATE_FAILED; break;
    case HN_ERR_INVALID_ARG: code = HANASHI_ENGINE_ERROR_INVALID_ARGUMENT; break;
    case HN_ERR_TRUNCATED: code = HANASHI_ENGINE_ERROR_MODEL_TRUNCATED; break;
    case HN_ERR_INVALID_NUMBERS: code = HANASHI_ENGINE_ERROR_INVALID_NUMBERS; break;
    case HN_ERR_TOO_LONG: code = HANASHI_ENGINE_ERROR_PROMPT_TOO_LONG; break;
    case HN_ERR_LIMIT: code = HANASHI_ENGINE_ERROR_GRAMMAR_TOO_COMPLEX; break;
    default: break;
    }
  if (prefix != NULL)
    g_set_error (error, HANASHI_ENGINE_ERROR, code, "%s: %s", prefix, err->message);
  else
    g_set_error_literal (error, HANASHI_ENGINE_ERROR, code, err->message);
}

/* ---- loading ---------------------------------------------------------------------------- */

static char *
gguf_string_dup (const HnGguf *gguf, const char *key)
{
  HnStr s;
  if (!hn_gguf_get_str (gguf, key, &s, NULL) || s.len == 0)
    return NULL;
  return g_strndup (s.data, s.len);
}

static void
model_backend_free (ModelBackend *mb)
{
  hn_chat_free (mb->chat);
  hn_chat_model_free (mb->chat_model);
  /* the weights stay while a borrower holds them */
  if (mb->weights != NULL)
    hanashi_model_loan_unref (mb->weights);
  else
    {
      hn_vocab_free (mb->vocab);
      hn_model_free (mb->model);
    }
  if (mb->piece != NULL)
    g_string_free (mb->piece, TRUE);
  g_free (mb);
}

/* Reads every page of the weights once, so that loading (not the first reply) pays for the
 * disk and progress and cancel mean something on a multi-gigabyte file. */
static gboolean
prefault (const HnGguf *gguf, HanashiBackendSink *sink, void (*progress) (gpointer, double),
          double from, double to)
{
  const volatile uint8_t *bytes = hn_gguf_bytes (gguf);
  size_t size = hn_gguf_file_size (gguf);
  size_t start = hn_gguf_data_offset (gguf);
  const size_t chunk = 8u << 20;
  unsigned sum = 0;
  for (size_t off = start; off < size; off += chunk)
    {
      if (sink->is_cancelled (sink->data))
        return FALSE;
      size_t end = MIN (size, off + chunk);
      for (size_t p = off; p < end; p += 4096)
        sum += bytes[p];
      progress (sink->data, from + (to - from) * (double) (end - start) / (double) (size - start));
    }
  (void) sum;
  return TRUE;
}

static gpointer
model_load (const char *path, guint n_ctx, guint n_threads, guint n_batch, HanashiBackendSink *sink,
            void (*progress) (gpointer, double), HanashiModelInfo **info_out, GError **error)
{
  HnError err = { 0 };
  g_autofree char *missing_device = NULL;   /* the device chosen in Preferences is not there */
  ModelBackend *mb = g_new0 (ModelBackend, 1);
  mb->piece = g_string_new (NULL);

  progress (sink->data, 0.0);
  mb->model = hn_model_load (path, NULL, &err);
  if (mb->model == NULL)
    {
      int code = err.code == HN_ERR_UNSUPPORTED ? HANASHI_ENGINE_ERROR_UNSUPPORTED_ARCH
                 : err.code == HN_ERR_IO ? HANASHI_ENGINE_ERROR_MODEL_UNREADABLE
                 : err.code == HN_ERR_NOMEM ? HANASHI_ENGINE_ERROR_OUT_OF_MEMORY
                 : err.code == HN_ERR_TRUNCATED ? HANASHI_ENGINE_ERROR_MODEL_TRUNCATED
                 : HANASHI_ENGINE_ERROR_NOT_GGUF;
      g_set_error_literal (error, HANASHI_ENGINE_ERROR, code, err.message);
      goto fail;
    }
  const HnGguf *gguf = hn_model_gguf (mb->model);
  progress (sink->data, 0.05);
  mb->vocab = hn_vocab_load (gguf, &err);
  if (mb->vocab == NULL)
    {
      set_error_from_hn (error, &err, HANASHI_ENGINE_ERROR_UNSUPPORTED_ARCH, "tokenizer");
      goto fail;
    }
  progress (sink->data, 0.1);
  if (!prefault (gguf, sink, progress, 0.1, 0.9))
    {
      g_set_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED, "Loading was cancelled");
      goto fail;
    }

  HnContextParams cp = hn_context_default_params ();
  cp.n_ctx = n_ctx > 0 ? (int) n_ctx : MIN (hn_model_n_ctx_train (mb->model), DEFAULT_N_CTX);
  cp.n_threads = (int) n_threads;
  if (n_batch > 0)
    cp.n_batch = (int) MIN (n_batch, (guint) G_MAXINT);
  cp.n_seq_max = 2;   /* the chat and the CFG negative prompt */
  cp.n_gpu_layers = sink->gpu_layers == HANASHI_GPU_LAYERS_AUTO ? HN_GPU_LAYERS_AUTO : MAX (sink->gpu_layers, 0);
  if (cp.n_gpu_layers != 0 && sink->gpu_device != NULL)
    {
      cp.gpu_device = gpu_device_index (sink->gpu_device);
      if (cp.gpu_device < 0)
        {
          missing_device = g_strdup_printf ("The graphics device “%s” was not found. Running on the CPU instead.",
                                            sink->gpu_device);
          cp.n_gpu_layers = 0;
        }
    }
  if ((mb->chat_model = hn_chat_model_new (mb->model, mb->vocab, &err)) == NULL
      || (mb->chat = hn_chat_new (mb->chat_model, &cp, &err)) == NULL)
    {
      set_error_from_hn (error, &err, HANASHI_ENGINE_ERROR_OUT_OF_MEMORY, NULL);
      goto fail;
    }
  HnContext *ctx = hn_chat_context (mb->chat);

  char *name = gguf_string_dup (gguf, "general.name");
  HanashiModelInfo *info = g_new0 (HanashiModelInfo, 1);
  info->name = name != NULL ? name : g_path_get_basename (path);
  info->arch = g_strdup (hn_model_arch (mb->model));
  info->weight_type = g_strdup (hn_type_name (hn_model_main_type (mb->model)));
  info->path = g_strdup (path);
  info->n_params = (guint64) hn_model_n_params (mb->model);
  info->file_size = hn_model_file_size (mb->model);
  info->n_ctx = (guint32) hn_context_n_ctx (ctx);
  info->n_batch = (guint32) hn_context_n_batch (ctx);
  /* The notice is the clamped context's sentence, then the device's. */
  const char *notice = hn_context_notice (ctx), *gpu_notice = hn_context_gpu_notice (ctx);
  if (notice != NULL && (gpu_notice == NULL || strlen (notice) > strlen (gpu_notice)))
    sink->on_warning (sink->data, HANASHI_ENGINE_ERROR_CONTEXT_CLAMPED, notice);
  mb->gpu_layers = hn_context_gpu_layers (ctx);
  info->gpu_layers = (guint32) mb->gpu_layers;
  info->gpu_device = g_strdup (hn_context_gpu_device (ctx));
  info->n_layers = (guint32) hn_model_n_layer (mb->model);
  info->gpu_notice = g_strdup (missing_device != NULL ? missing_device : gpu_notice);
  info->n_ctx_train = (guint32) hn_model_n_ctx_train (mb->model);
  info->n_vocab = (guint32) hn_model_n_vocab (mb->model);
  /* the source too: whether it mentions a closing thinking marker */
  char *template_source = gguf_string_dup (gguf, "tokenizer.chat_template");
  hanashi_engine_template_traits (hn_chat_model_template (mb->chat_model), template_source,
                                  hn_chat_model_bos_text (mb->chat_model),
                                  hn_chat_model_eos_text (mb->chat_model), info);
  g_free (template_source);
  mb->weights = hanashi_model_loan_new (mb->model, mb->vocab, path, info->n_ctx);
  *info_out = info;
  progress (sink->data, 1.0);
  return mb;

fail:
  model_backend_free (mb);
  return NULL;
}

static void
model_unload (gpointer model)
{
  model_backend_free (model);
}



/* The request carries the sampler's own parameters: only the stop strings are added. */
static gboolean
sampler_params (HanashiGenerateRequest *req, int32_t n_vocab, HnSamplerParams *sp, GError **error)
{
  HnError err = { 0 };
  hanashi_generate_request_get_sampling (req, sp);
  const char * const *stops = hanashi_generate_request_get_stop_strings (req);
  size_t n_stop = 0;
  while (stops[n_stop] != NULL)
    n_stop++;
  sp->stop = stops;
  sp->n_stop = n_stop;
  if (!hn_sampler_params_validate (sp, n_vocab, &err))
    {
      g_set_error_literal (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_INVALID_ARGUMENT, err.message);
      return FALSE;
    }
  return TRUE;
}

/* ---- generation ------------------------------------------------------------------------- */

static const char *
role_name (HanashiRole role)
{
  switch (role)
    {
    case HANASHI_ROLE_SYSTEM: return "system";
    case HANASHI_ROLE_ASSISTANT: return "assistant";
    case HANASHI_ROLE_USER: default: return "user";
    }
}

static HnChatThinking
template_thinking (HanashiThinking thinking)
{
  switch (thinking)
    {
    case HANASHI_THINKING_ON: return HN_CHAT_THINKING_ON;
    case HANASHI_THINKING_OFF: return HN_CHAT_THINKING_OFF;
    case HANASHI_THINKING_DEFAULT: default: return HN_CHAT_THINKING_UNSET;
    }
}

/* The request's messages (after the system prompt) for the core; free with g_free. */
static HnChatMessage *
request_messages (HanashiGenerateRequest *req, guint *n_out)
{
  guint n = hanashi_generate_request_get_n_messages (req);
  HnChatMessage *msgs = g_new0 (HnChatMessage, MAX (n, 1));
  for (guint i = 0; i < n; i++)
    msgs[i] = (HnChatMessage) { role_name (hanashi_generate_request_get_message_role (req, i)),
                                hanashi_generate_request_get_message_text (req, i) };
  *n_out = n;
  return msgs;
}

typedef struct {
  ModelBackend *mb;
  HanashiBackendSink *sink;
  const char *session_path;
} Run;

static void
run_on_probs (void *data, const HnTokenProbs *probs)
{
  Run *r = data;
  if (r->sink->on_probs != NULL)
    r->sink->on_probs (r->sink->data, probs);
}

static bool
run_on_text (void *data, const char *text, size_t len, int32_t token)
{
  Run *r = data;
  g_string_truncate (r->mb->piece, 0);
  g_string_append_len (r->mb->piece, text, (gssize) len);
  return r->sink->on_token (r->sink->data, r->mb->piece->str, token) != FALSE;
}

static void
run_prompt_progress (void *data, size_t done, size_t total)
{
  Run *r = data;
  r->sink->on_prompt_progress (r->sink->data, (guint) MIN (done, G_MAXUINT), (guint) MIN (total, G_MAXUINT));
}

static bool
run_is_cancelled (void *data)
{
  Run *r = data;
  return r->sink->is_cancelled (r->sink->data) != FALSE;
}

static void
run_warning (void *data, HnChatWarning code, const char *message)
{
  Run *r = data;
  switch (code)
    {
    case HN_CHAT_WARNING_TEMPLATE_FALLBACK:
      r->sink->on_warning (r->sink->data, HANASHI_ENGINE_ERROR_TEMPLATE_FAILED, message);
      break;
    case HN_CHAT_WARNING_SESSION_NOT_USED:
      /* the conversation is evaluated from its text: only the log needs to know */
      g_message ("Session file %s not used: %s", r->session_path, message);
      break;
    case HN_CHAT_WARNING_SESSION_NOT_SAVED:
      r->sink->on_session_write_failed (r->sink->data, message);
      break;
    case HN_CHAT_WARNING_SESSION_CACHE_NOT_TRIMMED:
      g_message ("Session cache not trimmed: %s", message);
      break;
    case HN_CHAT_WARNING_SESSION_MISSING:   /* a new conversation: nothing to say */
    default:
      break;
    }
}

static void
run_context_dropped (void *data, size_t n_messages, size_t n_tokens)
{
  Run *r = data;
  r->sink->on_context_dropped (r->sink->data, (guint) MIN (n_messages, G_MAXUINT), (guint) MIN (n_tokens, G_MAXUINT));
}

static HanashiStopReason
map_stop (HnGenStopReason r)
{
  switch (r)
    {
    case HN_GEN_STOP_EOG: return HANASHI_STOP_REASON_EOG;
    case HN_GEN_STOP_MAX_TOKENS: return HANASHI_STOP_REASON_MAX_TOKENS;
    case HN_GEN_STOP_STRING: return HANASHI_STOP_REASON_STOP_STRING;
    case HN_GEN_STOP_GRAMMAR: return HANASHI_STOP_REASON_GRAMMAR_DONE;
    case HN_GEN_STOP_CONTEXT_FULL: return HANASHI_STOP_REASON_CONTEXT_FULL;
    case HN_GEN_STOP_CANCELLED:
    case HN_GEN_STOP_CALLBACK:
    case HN_GEN_STOP_NONE:
    case HN_GEN_STOP_ERROR:
    default: return HANASHI_STOP_REASON_CANCELLED;
    }
}

/* The request's grammar: the one its sender compiled already, or parsed here from its
 * text (callers that did not check it first), so that it is parsed once either way. */
static gboolean
request_grammar (HanashiGenerateRequest *req, HanashiGrammar **out, GError **error)
{
  const char *gbnf = hanashi_generate_request_get_grammar (req);
  const char *schema = hanashi_generate_request_get_json_schema (req);
  HanashiGrammar *compiled = hanashi_generate_request_get_compiled_grammar (req);
  *out = NULL;
  if (compiled != NULL)
    *out = hanashi_grammar_ref (compiled);
  else if (schema != NULL && *schema != '\0')
    {
      if ((*out = hanashi_grammar_new_json_schema (schema, error)) == NULL)
        {
          g_prefix_error (error, "JSON schema: ");
          return FALSE;
        }
    }
  else if (gbnf != NULL && *gbnf != '\0')
    return (*out = hanashi_grammar_new_gbnf (gbnf, error)) != NULL;
  return TRUE;
}

/* The part of a chat request that a reply and a next-token query share: the prompt (system
 * prompt, messages, thinking mode), the sampler, classifier-free guidance and the
 * conversation whose KV cache the run reuses. */
static void
chat_request_init_from (HnChatRequest *cr, HanashiGenerateRequest *req, const HnChatMessage *messages,
                        guint n_messages, const HnSamplerParams *sp)
{
  hn_chat_request_init (cr);
  cr->system = hanashi_generate_request_get_system_prompt (req);
  cr->messages = messages;
  cr->n_messages = n_messages;
  cr->thinking = template_thinking (hanashi_generate_request_get_thinking (req));
  cr->sampler = sp;
  cr->cfg_negative = hanashi_generate_request_get_cfg_negative (req);
  cr->cfg_scale = (float) hanashi_generate_request_get_cfg_scale (req);
  cr->conversation = hanashi_generate_request_get_conversation_id (req);
  guint n_prefix = 0;
  cr->reply_prefix = hanashi_generate_request_get_reply_prefix (req, &n_prefix);
  cr->n_reply_prefix = n_prefix;
}

static gboolean
model_generate (gpointer model, HanashiGenerateRequest *req, const HanashiBackendSession *session,
                HanashiBackendSink *sink, HanashiGenerationStats *stats, GError **error)
{
  ModelBackend *mb = model;
  HnError err = { 0 };
  HnSamplerParams sp;
  g_autoptr (HanashiGrammar) grammar = NULL;
  if (!sampler_params (req, hn_model_n_vocab (mb->model), &sp, error) || !request_grammar (req, &grammar, error))
    return FALSE;
  guint n_messages = 0;
  g_autofree HnChatMessage *messages = request_messages (req, &n_messages);

  HnChatRequest cr;
  chat_request_init_from (&cr, req, messages, n_messages, &sp);
  cr.grammar = grammar != NULL ? hanashi_grammar_get_hn (grammar) : NULL;
  cr.session_path = session->path;
  cr.session_cache_dir = session->dir;
  cr.session_cache_limit = session->limit;
  cr.probs_k = hanashi_generate_request_get_probs_k (req);

  Run run = { mb, sink, session->path };
  HnChatCallbacks cb = {
    .on_text = run_on_text,
    .on_prompt_progress = run_prompt_progress,
    .is_cancelled = run_is_cancelled,
    .on_warning = run_warning,
    .on_context_dropped = run_context_dropped,
    .on_probs = run_on_probs,
    .user_data = &run,
  };
  HnChatStats cs;
  gboolean generated = hn_chat_generate (mb->chat, &cr, &cb, &cs, &err);
  HnContext *ctx = hn_chat_context (mb->chat);
  if (hn_context_gpu_layers (ctx) < mb->gpu_layers)
    {
      mb->gpu_layers = hn_context_gpu_layers (ctx);
      sink->on_warning (sink->data, HANASHI_ENGINE_ERROR_GPU_FAILED, hn_context_gpu_notice (ctx));
    }
  if (!generated)
    {
      set_error_from_hn (error, &err, HANASHI_ENGINE_ERROR_FAILED, NULL);
      return FALSE;
    }
  stats->n_prompt = (guint) cs.n_prompt;
  stats->n_reused = (guint) cs.n_reused;
  stats->n_generated = (guint) cs.n_generated;
  stats->n_messages_dropped = (guint) cs.n_messages_dropped;
  stats->n_tokens_dropped = (guint) cs.n_tokens_dropped;
  stats->grammar_truncated_steps = (guint) MIN (cs.grammar_truncated_steps, (size_t) G_MAXUINT);
  stats->prompt_tokens_per_second = cs.prompt_seconds > 0 ? cs.n_evaluated / cs.prompt_seconds : 0;
  stats->gen_tokens_per_second = cs.generate_seconds > 0 ? cs.n_generated / cs.generate_seconds : 0;
  stats->time_to_first_token = cs.time_to_first_token;
  stats->stop_reason = map_stop (cs.stop_reason);
  stats->session_saved = cs.session_saved;
  return TRUE;
}

/* ---- the next token's logits, for the lens ------------------------------------------------ */

typedef struct {
  HanashiNextLogits *next;
  HanashiBackendSink *sink;
  const HnVocab *vocab;
} NextRun;

static void
next_run_on_first_logits (void *data, const float *logits, int32_t n_vocab, const int32_t *history,
                          size_t n_history, const int32_t *newline_tokens, size_t n_newline_tokens)
{
  HanashiNextLogits *next = ((NextRun *) data)->next;
  next->n_vocab = (guint32) n_vocab;
  next->logits = g_bytes_new (logits, (gsize) n_vocab * sizeof *logits);
  next->history = g_bytes_new (history, n_history * sizeof *history);
  next->newline_tokens = g_bytes_new (newline_tokens, n_newline_tokens * sizeof *newline_tokens);
  HnProbCandidate top[HN_PROBS_MAX_K];
  next->n_top = hn_probs_top_raw (logits, n_vocab, HN_PROBS_MAX_K, top);
  for (guint i = 0; i < next->n_top; i++)
    {
      size_t len = 0;
      const char *bytes = hn_token_bytes (((NextRun *) data)->vocab, top[i].id, &len);
      if (bytes == NULL || len == 0) /* a control token: its name */
        bytes = hn_vocab_token_text (((NextRun *) data)->vocab, top[i].id, &len);
      next->top_ids[i] = top[i].id;
      next->top_texts[i] = g_utf8_make_valid (bytes ? bytes : "", (gssize) len);
    }
}

static bool
next_run_is_cancelled (void *data)
{
  HanashiBackendSink *sink = ((NextRun *) data)->sink;
  return sink->is_cancelled (sink->data) != FALSE;
}

/* What the grammar allows as the reply's next token after @prefix (its first token when
 * there is none), as a bitset.  A prefix the grammar does not accept allows nothing. */
static GBytes *
grammar_allowed_bits (ModelBackend *mb, HanashiGrammar *grammar, int32_t n_vocab, const gint32 *prefix,
                      guint n_prefix, GError **error)
{
  HnError err = { 0 };
  const HnGrammarVocab *gvocab = hn_chat_model_grammar_vocab (mb->chat_model, &err);
  HnGrammarState *state = gvocab ? hn_grammar_state_new (hanashi_grammar_get_hn (grammar), gvocab, &err) : NULL;
  if (state == NULL)
    {
      set_error_from_hn (error, &err, HANASHI_ENGINE_ERROR_GRAMMAR_INVALID, NULL);
      return NULL;
    }
  gboolean accepted = TRUE;
  for (guint i = 0; i < n_prefix && accepted; i++)
    accepted = hn_grammar_accept_token (state, prefix[i]);
  gsize n_words = ((gsize) n_vocab + 31) / 32;
  guint32 *bits = g_new0 (guint32, n_words);
  if (!accepted)
    {
      hn_grammar_state_free (state);
      return g_bytes_new_take (bits, n_words * sizeof *bits);
    }
  /* the mask the sampler applies, on a row of zeros: what stays finite is allowed */
  g_autofree float *row = g_new0 (float, (gsize) n_vocab);
  hn_grammar_mask_logits (state, row, n_vocab);
  hn_grammar_state_free (state);
  for (int32_t i = 0; i < n_vocab; i++)
    if (row[i] > -INFINITY)
      bits[i / 32] |= 1u << (i % 32);
  return g_bytes_new_take (bits, n_words * sizeof *bits);
}

static HanashiNextLogits *
model_next_logits (gpointer model, HanashiGenerateRequest *req, HanashiBackendSink *sink, GError **error)
{
  ModelBackend *mb = model;
  HnError err = { 0 };
  HnSamplerParams sp;
  g_autoptr (HanashiGrammar) grammar = NULL;
  int32_t n_vocab = hn_model_n_vocab (mb->model);
  if (!sampler_params (req, n_vocab, &sp, error) || !request_grammar (req, &grammar, error))
    return NULL;
  /* one token, drawn greedily and thrown away: the run exists for the row before it */
  sp.max_new_tokens = 1;
  sp.temperature = 0.0f;
  sp.stop = NULL;
  sp.n_stop = 0;
  guint n_messages = 0;
  g_autofree HnChatMessage *messages = request_messages (req, &n_messages);
  /* the conversation's own KV cache, but no session file: nothing to restore that the
   * reply would not restore anyway, and nothing worth saving; the grammar is not applied
   * to the run but reported as the allowed set below */
  HnChatRequest cr;
  chat_request_init_from (&cr, req, messages, n_messages, &sp);

  g_autoptr (HanashiNextLogits) next = g_new0 (HanashiNextLogits, 1);
  NextRun run = { next, sink, mb->vocab };
  HnChatCallbacks cb = {
    .is_cancelled = next_run_is_cancelled,
    .on_first_logits = next_run_on_first_logits,
    .user_data = &run,
  };
  HnChatStats cs;
  if (!hn_chat_generate (mb->chat, &cr, &cb, &cs, &err))
    {
      set_error_from_hn (error, &err, HANASHI_ENGINE_ERROR_FAILED, NULL);
      return NULL;
    }
  if (next->logits == NULL)
    {
      g_set_error_literal (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED,
                           cs.stop_reason == HN_GEN_STOP_CANCELLED ? "Cancelled"
                                                                   : "The model gave no scores for the next token");
      return NULL;
    }
  if (grammar != NULL &&
      (next->allowed = grammar_allowed_bits (mb, grammar, n_vocab, cr.reply_prefix, (guint) cr.n_reply_prefix, error))
          == NULL)
    return NULL;
  return g_steal_pointer (&next);
}

static gint
model_count_tokens (gpointer model, HanashiGenerateRequest *req, GError **error)
{
  ModelBackend *mb = model;
  HnError err = { 0 };
  HnChatPrompt prompt = { 0 };
  guint n_messages = 0;
  g_autofree HnChatMessage *messages = request_messages (req, &n_messages);
  if (!hn_chat_model_tokenize (mb->chat_model, hanashi_generate_request_get_system_prompt (req), messages,
                               n_messages, template_thinking (hanashi_generate_request_get_thinking (req)),
                               &prompt, &err))
    {
      set_error_from_hn (error, &err, HANASHI_ENGINE_ERROR_FAILED, NULL);
      return -1;
    }
  gint n = (gint) MIN (prompt.n_tokens, (size_t) G_MAXINT);
  hn_chat_prompt_clear (&prompt);
  return n;
}

static const char *
model_token_text (gpointer model, gint32 token, gboolean spelling, gsize *len)
{
  ModelBackend *mb = model;
  if (token < 0 || token >= hn_vocab_n_tokens (mb->vocab))
    return NULL;
  size_t n = 0;
  const char *text = spelling ? hn_vocab_token_text (mb->vocab, token, &n) : hn_token_bytes (mb->vocab, token, &n);
  *len = n;
  return text;
}

static HanashiModelLoan *
model_lend (gpointer model)
{
  ModelBackend *mb = model;
  return hanashi_model_loan_ref (mb->weights);
}

static const HanashiEngineBackend model_backend = {
  .load = model_load,
  .unload = model_unload,
  .generate = model_generate,
  .count_tokens = model_count_tokens,
  .next_logits = model_next_logits,
  .token_text = model_token_text,
  .lend = model_lend,
};

const HanashiEngineBackend *
hanashi_engine_model_backend (void)
{
  return &model_backend;
}
