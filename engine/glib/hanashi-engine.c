/* hanashi-engine.c: the engine thread and its GObject front.
 *
 * The object lives on the GUI thread; a private refcounted EngineCore is shared with the
 * engine thread, so the thread never holds a reference on the GObject and dispose can always
 * stop it (raise the quit flag, push QUIT, join).  Commands reach the thread through a
 * GAsyncQueue; events travel back through one ordered list drained by at most one idle
 * source on the captured main context; consecutive token events of the same request are
 * merged there, so a fast stream costs one main-loop wakeup per frame rather than one per
 * token.  Hand-overs that ThreadSanitizer cannot see through GLib are annotated
 * (hanashi-tsan.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-engine"

#include "hanashi-engine.h"
#include "hanashi-engine-backend.h"
#include "hanashi-tsan.h"
#include "hanashi-remote.h"

#include "hn-chat-template.h"
#include "hn-grammar.h"
#include "hn-json-schema.h"
#include "hn-memory.h"
#include "hn-reasoning.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

G_DEFINE_QUARK (hanashi-engine-error-quark, hanashi_engine_error)

/* hn_session_cache_evict() counts only files with this suffix. */
#define SESSION_SUFFIX HANASHI_SESSION_SUFFIX

/* ---- enums & boxed types -------------------------------------------------------------- */

GType
hanashi_engine_state_get_type (void)
{
  static gsize type = 0;
  static const GEnumValue values[] = {
    { HANASHI_ENGINE_STATE_NO_MODEL, "HANASHI_ENGINE_STATE_NO_MODEL", "no-model" },
    { HANASHI_ENGINE_STATE_LOADING, "HANASHI_ENGINE_STATE_LOADING", "loading" },
    { HANASHI_ENGINE_STATE_READY, "HANASHI_ENGINE_STATE_READY", "ready" },
    { HANASHI_ENGINE_STATE_GENERATING, "HANASHI_ENGINE_STATE_GENERATING", "generating" },
    { 0, NULL, NULL },
  };
  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("HanashiEngineState", values));
  return type;
}

GType
hanashi_stop_reason_get_type (void)
{
  static gsize type = 0;
  static const GEnumValue values[] = {
    { HANASHI_STOP_REASON_EOG, "HANASHI_STOP_REASON_EOG", "eog" },
    { HANASHI_STOP_REASON_MAX_TOKENS, "HANASHI_STOP_REASON_MAX_TOKENS", "max-tokens" },
    { HANASHI_STOP_REASON_STOP_STRING, "HANASHI_STOP_REASON_STOP_STRING", "stop-string" },
    { HANASHI_STOP_REASON_CANCELLED, "HANASHI_STOP_REASON_CANCELLED", "cancelled" },
    { HANASHI_STOP_REASON_CONTEXT_FULL, "HANASHI_STOP_REASON_CONTEXT_FULL", "context-full" },
    { HANASHI_STOP_REASON_GRAMMAR_DONE, "HANASHI_STOP_REASON_GRAMMAR_DONE", "grammar-done" },
    { 0, NULL, NULL },
  };
  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("HanashiStopReason", values));
  return type;
}

HanashiModelInfo *
hanashi_model_info_copy (const HanashiModelInfo *info)
{
  HanashiModelInfo *copy = g_new (HanashiModelInfo, 1);
  *copy = *info;
  copy->name = g_strdup (info->name);
  copy->arch = g_strdup (info->arch);
  copy->weight_type = g_strdup (info->weight_type);
  copy->path = g_strdup (info->path);
  copy->remote_url = g_strdup (info->remote_url);
  copy->gpu_device = g_strdup (info->gpu_device);
  copy->gpu_notice = g_strdup (info->gpu_notice);
  return copy;
}

void
hanashi_model_info_free (HanashiModelInfo *info)
{
  if (info == NULL)
    return;
  g_free (info->name);
  g_free (info->arch);
  g_free (info->weight_type);
  g_free (info->path);
  g_free (info->remote_url);
  g_free (info->gpu_device);
  g_free (info->gpu_notice);
  g_free (info);
}

G_DEFINE_BOXED_TYPE (HanashiModelInfo, hanashi_model_info, hanashi_model_info_copy, hanashi_model_info_free)

HanashiGenerationStats *
hanashi_generation_stats_copy (const HanashiGenerationStats *stats)
{
  return g_memdup2 (stats, sizeof *stats);
}

void
hanashi_generation_stats_free (HanashiGenerationStats *stats)
{
  g_free (stats);
}

G_DEFINE_BOXED_TYPE (HanashiGenerationStats, hanashi_generation_stats,
                     hanashi_generation_stats_copy, hanashi_generation_stats_free)

HanashiNextLogits *
hanashi_next_logits_copy (const HanashiNextLogits *next)
{
  HanashiNextLogits *copy = g_new0 (HanashiNextLogits, 1);
  copy->n_vocab = next->n_vocab;
  copy->logits = next->logits ? g_bytes_ref (next->logits) : NULL;
  copy->history = next->history ? g_bytes_ref (next->history) : NULL;
  copy->allowed = next->allowed ? g_bytes_ref (next->allowed) : NULL;
  copy->newline_tokens = next->newline_tokens ? g_bytes_ref (next->newline_tokens) : NULL;
  copy->n_top = MIN (next->n_top, HN_PROBS_MAX_K);
  for (guint i = 0; i < copy->n_top; i++)
    {
      copy->top_ids[i] = next->top_ids[i];
      copy->top_texts[i] = g_strdup (next->top_texts[i]);
    }
  return copy;
}

void
hanashi_next_logits_free (HanashiNextLogits *next)
{
  if (next == NULL)
    return;
  g_clear_pointer (&next->logits, g_bytes_unref);
  g_clear_pointer (&next->history, g_bytes_unref);
  g_clear_pointer (&next->allowed, g_bytes_unref);
  g_clear_pointer (&next->newline_tokens, g_bytes_unref);
  for (guint i = 0; i < HN_PROBS_MAX_K; i++)
    g_free (next->top_texts[i]);
  g_free (next);
}

G_DEFINE_BOXED_TYPE (HanashiNextLogits, hanashi_next_logits, hanashi_next_logits_copy, hanashi_next_logits_free)

/* ---- compiled grammars ----------------------------------------------------------------- */

struct _HanashiGrammar {
  atomic_int ref_count;
  HnGrammar *grammar;
};

static atomic_uint grammars_parsed;

static GQuark
grammar_error_code (const HnError *err)
{
  return err->code == HN_ERR_LIMIT ? HANASHI_ENGINE_ERROR_GRAMMAR_TOO_COMPLEX
                                   : HANASHI_ENGINE_ERROR_GRAMMAR_INVALID;
}

HanashiGrammar *
hanashi_grammar_new_gbnf (const char *gbnf, GError **error)
{
  HnError err = { 0 };
  atomic_fetch_add (&grammars_parsed, 1);
  HnGrammar *parsed = hn_grammar_parse (gbnf ? gbnf : "", gbnf ? strlen (gbnf) : 0, NULL, &err);
  if (parsed == NULL)
    {
      g_set_error_literal (error, HANASHI_ENGINE_ERROR, grammar_error_code (&err), err.message);
      return NULL;
    }
  HanashiGrammar *grammar = g_new0 (HanashiGrammar, 1);
  grammar->ref_count = 1;
  grammar->grammar = parsed;
  return grammar;
}

HanashiGrammar *
hanashi_grammar_new_json_schema (const char *schema, GError **error)
{
  HnError err = { 0 };
  char *gbnf = hn_json_schema_to_gbnf (schema ? schema : "", schema ? strlen (schema) : 0, &err);
  if (gbnf == NULL)
    {
      g_set_error_literal (error, HANASHI_ENGINE_ERROR, grammar_error_code (&err), err.message);
      return NULL;
    }
  HanashiGrammar *grammar = hanashi_grammar_new_gbnf (gbnf, error);
  free (gbnf);
  return grammar;
}

HanashiGrammar *
hanashi_grammar_ref (HanashiGrammar *grammar)
{
  atomic_fetch_add (&grammar->ref_count, 1);
  return grammar;
}

void
hanashi_grammar_unref (HanashiGrammar *grammar)
{
  if (grammar == NULL || atomic_fetch_sub (&grammar->ref_count, 1) != 1)
    return;
  hn_grammar_free (grammar->grammar);
  g_free (grammar);
}

G_DEFINE_BOXED_TYPE (HanashiGrammar, hanashi_grammar, hanashi_grammar_ref, hanashi_grammar_unref)

const HnGrammar *hanashi_grammar_get_hn (HanashiGrammar *grammar) { return grammar->grammar; }
guint hanashi_grammar_get_n_parsed (void) { return atomic_load (&grammars_parsed); }

/* ---- lent models ------------------------------------------------------------------------ */

struct _HanashiModelLoan {
  atomic_int ref_count;
  HnModel *model;
  HnVocab *vocab;
  char *path;
  guint n_ctx;
};

HanashiModelLoan *
hanashi_model_loan_new (HnModel *model, HnVocab *vocab, const char *path, guint n_ctx)
{
  HanashiModelLoan *loan = g_new0 (HanashiModelLoan, 1);
  loan->ref_count = 1;
  loan->model = model;
  loan->vocab = vocab;
  loan->path = g_strdup (path);
  loan->n_ctx = n_ctx;
  return loan;
}

HanashiModelLoan *
hanashi_model_loan_ref (HanashiModelLoan *loan)
{
  atomic_fetch_add (&loan->ref_count, 1);
  return loan;
}

void
hanashi_model_loan_unref (HanashiModelLoan *loan)
{
  if (loan == NULL || atomic_fetch_sub (&loan->ref_count, 1) != 1)
    return;
  hn_vocab_free (loan->vocab);
  hn_model_free (loan->model);
  g_free (loan->path);
  g_free (loan);
}

const char *hanashi_model_loan_get_path (HanashiModelLoan *loan) { return loan->path; }
guint hanashi_model_loan_get_n_ctx (HanashiModelLoan *loan) { return loan->n_ctx; }
const HnModel *hanashi_model_loan_get_model (HanashiModelLoan *loan) { return loan->model; }
const HnVocab *hanashi_model_loan_get_vocab (HanashiModelLoan *loan) { return loan->vocab; }

/* ---- generate request ------------------------------------------------------------------ */

typedef struct {
  HanashiRole role;
  char *text;
} Message;

struct _HanashiGenerateRequest {
  atomic_int ref_count;   /* C11 atomics: visible to TSan, unlike GLib's */
  char *conversation_id;
  char *system_prompt;
  GArray *messages;          /* Message */
  HnSamplerParams sampling;   /* logit_bias and stop always NULL; max_new_tokens is the limit */
  char *grammar;
  char *json_schema;
  HanashiGrammar *compiled_grammar;   /* one of the two above, already parsed; or NULL */
  char *cfg_negative;
  double cfg_scale;
  GPtrArray *stop_strings;   /* NULL-terminated */
  char *session_path;
  gboolean use_session;
  HanashiThinking thinking;
  int probs_k;
  GArray *reply_prefix;      /* gint32, or NULL */
};

static void
message_clear (gpointer p)
{
  g_free (((Message *) p)->text);
}

HanashiGenerateRequest *
hanashi_generate_request_new (const char *conversation_id)
{
  HanashiGenerateRequest *req = g_new0 (HanashiGenerateRequest, 1);
  req->ref_count = 1;
  req->conversation_id = g_strdup (conversation_id ? conversation_id : "");
  req->messages = g_array_new (FALSE, TRUE, sizeof (Message));
  g_array_set_clear_func (req->messages, message_clear);
  hn_sampler_params_init (&req->sampling);
  req->cfg_scale = 1.0;
  req->stop_strings = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (req->stop_strings, NULL);
  req->use_session = TRUE;
  return req;
}

HanashiGenerateRequest *
hanashi_generate_request_ref (HanashiGenerateRequest *req)
{
  atomic_fetch_add (&req->ref_count, 1);
  return req;
}

void
hanashi_generate_request_unref (HanashiGenerateRequest *req)
{
  if (req == NULL || atomic_fetch_sub (&req->ref_count, 1) != 1)
    return;
  g_free (req->conversation_id);
  g_free (req->system_prompt);
  g_array_unref (req->messages);
  g_free (req->grammar);
  g_free (req->json_schema);
  hanashi_grammar_unref (req->compiled_grammar);
  g_free (req->cfg_negative);
  g_ptr_array_unref (req->stop_strings);
  g_free (req->session_path);
  g_clear_pointer (&req->reply_prefix, g_array_unref);
  g_free (req);
}

G_DEFINE_BOXED_TYPE (HanashiGenerateRequest, hanashi_generate_request,
                     hanashi_generate_request_ref, hanashi_generate_request_unref)

const char *hanashi_generate_request_get_conversation_id (HanashiGenerateRequest *req) { return req->conversation_id; }
void hanashi_generate_request_set_system_prompt (HanashiGenerateRequest *req, const char *text) { g_free (req->system_prompt); req->system_prompt = g_strdup (text); }
const char *hanashi_generate_request_get_system_prompt (HanashiGenerateRequest *req) { return req->system_prompt; }

void
hanashi_generate_request_add_message (HanashiGenerateRequest *req, HanashiRole role, const char *content)
{
  Message m = { role, g_strdup (content ? content : "") };
  g_array_append_val (req->messages, m);
}

guint hanashi_generate_request_get_n_messages (HanashiGenerateRequest *req) { return req->messages->len; }
HanashiRole hanashi_generate_request_get_message_role (HanashiGenerateRequest *req, guint i) { g_return_val_if_fail (i < req->messages->len, HANASHI_ROLE_USER); return g_array_index (req->messages, Message, i).role; }
const char *hanashi_generate_request_get_message_text (HanashiGenerateRequest *req, guint i) { g_return_val_if_fail (i < req->messages->len, NULL); return g_array_index (req->messages, Message, i).text; }
void
hanashi_generate_request_set_sampling (HanashiGenerateRequest *req, const HnSamplerParams *p)
{
  req->sampling = *p;
  /* Pointers are never kept: the caller's arrays may not outlive the request. */
  req->sampling.logit_bias = NULL;
  req->sampling.n_logit_bias = 0;
  req->sampling.stop = NULL;
  req->sampling.n_stop = 0;
}

void hanashi_generate_request_get_sampling (HanashiGenerateRequest *req, HnSamplerParams *out) { *out = req->sampling; }

void
hanashi_generate_request_set_grammar (HanashiGenerateRequest *req, const char *gbnf)
{
  g_free (req->grammar);
  req->grammar = g_strdup (gbnf);
  g_clear_pointer (&req->json_schema, g_free);
  g_clear_pointer (&req->compiled_grammar, hanashi_grammar_unref);
}

void
hanashi_generate_request_set_json_schema (HanashiGenerateRequest *req, const char *schema)
{
  g_free (req->json_schema);
  req->json_schema = g_strdup (schema);
  g_clear_pointer (&req->grammar, g_free);
  g_clear_pointer (&req->compiled_grammar, hanashi_grammar_unref);
}

void
hanashi_generate_request_set_compiled_grammar (HanashiGenerateRequest *req, HanashiGrammar *grammar)
{
  if (grammar)
    hanashi_grammar_ref (grammar);
  hanashi_grammar_unref (req->compiled_grammar);
  req->compiled_grammar = grammar;
}

HanashiGrammar *hanashi_generate_request_get_compiled_grammar (HanashiGenerateRequest *req) { return req->compiled_grammar; }

const char *hanashi_generate_request_get_grammar (HanashiGenerateRequest *req) { return req->grammar; }
const char *hanashi_generate_request_get_json_schema (HanashiGenerateRequest *req) { return req->json_schema; }

void
hanashi_generate_request_set_cfg (HanashiGenerateRequest *req, const char *negative_prompt, double scale)
{
  g_free (req->cfg_negative);
  req->cfg_negative = g_strdup (negative_prompt);
  req->cfg_scale = scale;
}

const char *hanashi_generate_request_get_cfg_negative (HanashiGenerateRequest *req) { return req->cfg_negative; }
double hanashi_generate_request_get_cfg_scale (HanashiGenerateRequest *req) { return req->cfg_scale; }
void hanashi_generate_request_set_max_tokens (HanashiGenerateRequest *req, int max_tokens) { req->sampling.max_new_tokens = max_tokens; }
int hanashi_generate_request_get_max_tokens (HanashiGenerateRequest *req) { return req->sampling.max_new_tokens; }

void
hanashi_generate_request_add_stop_string (HanashiGenerateRequest *req, const char *stop)
{
  if (stop == NULL || *stop == '\0')
    return;
  g_ptr_array_insert (req->stop_strings, req->stop_strings->len - 1, g_strdup (stop));
}

const char * const *hanashi_generate_request_get_stop_strings (HanashiGenerateRequest *req) { return (const char * const *) req->stop_strings->pdata; }
void hanashi_generate_request_set_session_path (HanashiGenerateRequest *req, const char *path) { g_free (req->session_path); req->session_path = g_strdup (path); }
const char *hanashi_generate_request_get_session_path (HanashiGenerateRequest *req) { return req->session_path; }
void hanashi_generate_request_set_use_session (HanashiGenerateRequest *req, gboolean use) { req->use_session = use; }
gboolean hanashi_generate_request_get_use_session (HanashiGenerateRequest *req) { return req->use_session; }
void hanashi_generate_request_set_thinking (HanashiGenerateRequest *req, HanashiThinking thinking) { req->thinking = thinking; }
void hanashi_generate_request_set_probs_k (HanashiGenerateRequest *req, int k) { req->probs_k = CLAMP (k, 0, HN_PROBS_MAX_K); }
int hanashi_generate_request_get_probs_k (HanashiGenerateRequest *req) { return req->probs_k; }

void
hanashi_generate_request_set_reply_prefix (HanashiGenerateRequest *req, const gint32 *tokens, guint n_tokens)
{
  g_clear_pointer (&req->reply_prefix, g_array_unref);
  if (tokens == NULL || n_tokens == 0)
    return;
  req->reply_prefix = g_array_sized_new (FALSE, FALSE, sizeof (gint32), n_tokens);
  g_array_append_vals (req->reply_prefix, tokens, n_tokens);
}

const gint32 *
hanashi_generate_request_get_reply_prefix (HanashiGenerateRequest *req, guint *n_tokens)
{
  *n_tokens = req->reply_prefix != NULL ? req->reply_prefix->len : 0;
  return req->reply_prefix != NULL ? (const gint32 *) (void *) req->reply_prefix->data : NULL;
}
HanashiThinking hanashi_generate_request_get_thinking (HanashiGenerateRequest *req) { return req->thinking; }

/* ---- backends --------------------------------------------------------------------------- */

void
hanashi_engine_template_traits (const HnChatTemplate *tmpl, const char *source, const char *bos,
                                const char *eos, HanashiModelInfo *info)
{
  info->thinking_switch = FALSE;
  info->reply_opens_thinking = FALSE;
  info->thinking_aware = FALSE;
  if (tmpl == NULL)
    return;
  info->thinking_switch = hn_chat_template_uses_variable (tmpl, "enable_thinking");
  info->thinking_aware = source != NULL && hn_think_mentions_close (source, strlen (source));
  /* A probe conversation shows whether the generation prompt opens the thinking. */
  static const char probe[] = "[{\"role\":\"user\",\"content\":\"Hi\"}]";
  HnJson *messages = hn_json_parse (probe, sizeof probe - 1, NULL);
  HnChatRenderOptions o = { .messages = messages, .bos_token = bos, .eos_token = eos,
                            .add_generation_prompt = true };
  size_t len = 0;
  char *prompt = hn_chat_template_render (tmpl, &o, &len, NULL);
  if (prompt != NULL)
    info->reply_opens_thinking = hn_think_prompt_opens (prompt, len);
  free (prompt);
  hn_json_free (messages);
}

static const HanashiEngineBackend *default_backend = NULL;
static pthread_mutex_t default_backend_lock = PTHREAD_MUTEX_INITIALIZER;

void
hanashi_engine_set_default_backend (const HanashiEngineBackend *backend)
{
  pthread_mutex_lock (&default_backend_lock);
  default_backend = backend;
  pthread_mutex_unlock (&default_backend_lock);
}

static const HanashiEngineBackend *
pick_backend (void)
{
  const HanashiEngineBackend *b;
  pthread_mutex_lock (&default_backend_lock);
  b = default_backend;
  pthread_mutex_unlock (&default_backend_lock);
  if (b != NULL)
    return b;
  return hanashi_engine_model_backend ();
}

/* ---- commands & events ------------------------------------------------------------------ */

typedef enum {
  CMD_LOAD, CMD_UNLOAD, CMD_GENERATE, CMD_COUNT, CMD_NEXT_LOGITS, CMD_FORGET_SESSION, CMD_CLEAR_SESSIONS,
  CMD_QUIT,
} CmdType;

typedef struct {
  CmdType type;
  guint id;
  char *path;          /* model, or session file (generate, forget) */
  char *dir;           /* session directory (generate, clear) */
  guint64 limit;       /* session cache size limit (generate) */
  guint n_ctx, n_threads, n_batch;
  char *gpu_device;    /* load: hanashi_engine_set_gpu's choice */
  int gpu_layers;
  HanashiGenerateRequest *req;
  GTask *task;
  HanashiRemote *remote;  /* load: the server of a remote model (path is then its id) */
} Cmd;

typedef enum {
  EV_STATE, EV_LOAD_PROGRESS, EV_MODEL_LOADED, EV_PROMPT_PROGRESS, EV_TOKEN, EV_DONE, EV_ERROR,
  EV_CONTEXT_DROPPED, EV_TASK_DONE, EV_WARNING, EV_SESSION_WRITE_FAILED, EV_PROBS,
} EvType;

typedef struct {
  EvType type;
  guint id;
  HanashiEngineState state;
  double fraction;
  guint a, b;
  GString *text;       /* token text, session write failure */
  gint token_id;
  GByteArray *probs;   /* EV_TOKEN, EV_PROBS: HnTokenProbs records, or NULL */
  HanashiModelInfo *info;
  HanashiGenerationStats stats;
  GError *error;
  GTask *task;       /* EV_TASK_DONE: completed on the main thread, after earlier events */
  gint task_value;
  HanashiNextLogits *next_logits; /* EV_TASK_DONE of a next-logits task */
} Event;

typedef struct {
  atomic_int ref_count;
  GMainContext *main_ctx;
  /* Cmd, in the order they were given; the engine thread blocks on it.  First in, first
   * out is all the ordering commands need: cancelling is not a command but the watermarks
   * below, which overtake the queue at once, and QUIT goes to the tail so that the commands
   * before it still complete their tasks (as cancelled).  Every push and pop is annotated
   * for ThreadSanitizer (push_command, engine_thread_main; hanashi-tsan.h). */
  GAsyncQueue *commands;
  const HanashiEngineBackend *backend;          /* for model files */
  const HanashiEngineBackend *model_backend;    /* the loaded model's: backend or the remote one */

  atomic_bool quitting;
  atomic_uint last_id;
  atomic_uint gen_cancel_upto;   /* generations with id <= this stop */
  atomic_uint load_cancel_upto;  /* loads with id <= this stop */

  /* Protects events, idle_pending.  A pthread mutex, which ThreadSanitizer sees, rather
   * than a GAsyncQueue: post_event merges a token into the event at the tail in place,
   * which needs the list itself under the lock, not just push and pop. */
  pthread_mutex_t lock;
  /* Protects model and model_backend against the main thread's reads
   * (hanashi_engine_dup_token_text); the engine thread writes them under it and reads them
   * without it. */
  pthread_mutex_t model_lock;
  GQueue events;
  gboolean idle_pending;
  HanashiModelLoan *loan;        /* the current model's weights, for hanashi_engine_lend_model */
  HanashiEngine *engine;         /* main thread only reads it; NULL after dispose */

  /* engine thread only */
  gpointer model;
  char *model_path;              /* what the model was loaded from and with, to load it again */
  guint model_n_ctx, model_n_threads, model_n_batch;
  char *model_gpu_device;
  int model_gpu_layers;
  gboolean restoring_model;      /* loading the previous model again after a refused load */
  guint current_id;
  gboolean current_is_load;
  const char *current_session;   /* session path of the running generation */
  GCancellable *current_cancellable; /* the running next-logits task's (borrowed), or NULL */
  GByteArray *pending_probs;     /* records waiting for the next token text (or NULL) */
  GHashTable *write_failed;      /* session paths whose failed write was already reported */
} EngineCore;

struct _HanashiEngine {
  GObject parent_instance;
  EngineCore *core;
  GThread *thread;
  HanashiEngineState state;
  HanashiModelInfo *model_info;
  char *session_dir;
  guint64 session_limit;
  guint n_batch;
  char *gpu_device;
  int gpu_layers;
  guint streamed_id;      /* the generation whose tokens "token" delivered last */
  guint streamed_tokens;  /* how many of them, coalesced events counted in full */
};

G_DEFINE_FINAL_TYPE (HanashiEngine, hanashi_engine, G_TYPE_OBJECT)

enum { PROP_0, PROP_STATE, PROP_MODEL_INFO, N_PROPS };
static GParamSpec *properties[N_PROPS];

enum {
  SIG_LOAD_PROGRESS, SIG_MODEL_LOADED, SIG_PROMPT_PROGRESS, SIG_TOKEN, SIG_GENERATION_DONE,
  SIG_CONTEXT_DROPPED, SIG_ERROR, SIG_SESSION_WRITE_FAILED, SIG_WARNING, SIG_TOKEN_PROBS, N_SIGNALS,
};
static guint signals[N_SIGNALS];

static void
cmd_free (Cmd *cmd)
{
  g_free (cmd->path);
  g_free (cmd->dir);
  g_free (cmd->gpu_device);
  if (cmd->req)
    hanashi_generate_request_unref (cmd->req);
#ifdef HANASHI_HAVE_REMOTE
  g_clear_pointer (&cmd->remote, hanashi_remote_unref);
#endif
  g_clear_object (&cmd->task);
  g_free (cmd);
}

static void
event_free (Event *ev)
{
  if (ev->text)
    g_string_free (ev->text, TRUE);
  if (ev->probs)
    g_byte_array_unref (ev->probs);
  hanashi_model_info_free (ev->info);
  hanashi_next_logits_free (ev->next_logits);
  g_clear_error (&ev->error);
  g_clear_object (&ev->task);
  g_free (ev);
}

static EngineCore *
core_ref (EngineCore *core)
{
  atomic_fetch_add (&core->ref_count, 1);
  return core;
}

static void
core_unref (EngineCore *core)
{
  if (atomic_fetch_sub (&core->ref_count, 1) != 1)
    return;
  g_queue_clear_full (&core->events, (GDestroyNotify) event_free);
  g_clear_pointer (&core->pending_probs, g_byte_array_unref);
  g_async_queue_unref (core->commands);   /* frees commands never run (cmd_free) */
  g_main_context_unref (core->main_ctx);
  g_clear_pointer (&core->write_failed, g_hash_table_unref);
  hanashi_model_loan_unref (core->loan);
  pthread_mutex_destroy (&core->lock);
  pthread_mutex_destroy (&core->model_lock);
  g_free (core);
}

static void engine_dispatch (HanashiEngine *self, Event *ev);

static gboolean
drain_events (gpointer data)
{
  EngineCore *core = data;
  /* Pairs with the release in post_event: the source was made on the engine thread and
   * reached this one through the main context's GMutex, which ThreadSanitizer cannot see;
   * it is freed here once this returns. */
  hanashi_tsan_acquire (g_main_current_source ());
  for (;;)
    {
      pthread_mutex_lock (&core->lock);
      Event *ev = g_queue_pop_head (&core->events);
      if (ev == NULL)
        core->idle_pending = FALSE;
      pthread_mutex_unlock (&core->lock);
      HanashiEngine *engine = core->engine;
      if (ev == NULL)
        break;
      if (engine != NULL)
        {
          g_object_ref (engine);
          engine_dispatch (engine, ev);
          g_object_unref (engine);
        }
      event_free (ev);
    }
  return G_SOURCE_REMOVE;
}

/* Called on the engine thread. */
static void
post_event (EngineCore *core, Event *ev)
{
  gboolean schedule = FALSE;
  pthread_mutex_lock (&core->lock);
  Event *tail = g_queue_peek_tail (&core->events);
  if (ev->type == EV_TOKEN && tail != NULL && tail->type == EV_TOKEN && tail->id == ev->id)
    {
      g_string_append_len (tail->text, ev->text->str, (gssize) ev->text->len);
      tail->token_id = ev->token_id;
      if (ev->probs != NULL && tail->probs == NULL)
        tail->probs = g_steal_pointer (&ev->probs);
      else if (ev->probs != NULL)
        g_byte_array_append (tail->probs, ev->probs->data, ev->probs->len);
      tail->a += ev->a;
      pthread_mutex_unlock (&core->lock);
      event_free (ev);
      return;
    }
  if (ev->type == EV_PROMPT_PROGRESS && tail != NULL && tail->type == EV_PROMPT_PROGRESS && tail->id == ev->id)
    {
      tail->a = ev->a;
      tail->b = ev->b;
      pthread_mutex_unlock (&core->lock);
      event_free (ev);
      return;
    }
  g_queue_push_tail (&core->events, ev);
  if (!core->idle_pending)
    {
      core->idle_pending = TRUE;
      schedule = TRUE;
    }
  pthread_mutex_unlock (&core->lock);
  /* An attached idle source, not g_main_context_invoke(): invoke runs the callback right
   * here, on the engine thread, whenever it can acquire an idle main context. */
  if (schedule)
    {
      GSource *source = g_idle_source_new ();
      g_source_set_priority (source, G_PRIORITY_DEFAULT);
      g_source_set_callback (source, drain_events, core_ref (core), (GDestroyNotify) core_unref);
      g_source_set_static_name (source, "[hanashi-engine] events");
      hanashi_tsan_release (source);
      /* Attaching allocates the context's bookkeeping (a per-priority list), which the main
       * thread frees when the source goes, ordered only by the context's GMutex. */
      hanashi_tsan_ignore_writes_begin ();
      g_source_attach (source, core->main_ctx);
      hanashi_tsan_ignore_writes_end ();
      g_source_unref (source);
    }
}

static void
post_state (EngineCore *core, HanashiEngineState state)
{
  Event *ev = g_new0 (Event, 1);
  ev->type = EV_STATE;
  ev->state = state;
  post_event (core, ev);
}

static void
post_task_done (EngineCore *core, Cmd *cmd, gint value, GError *error)
{
  Event *ev = g_new0 (Event, 1);
  ev->type = EV_TASK_DONE;
  ev->task = g_steal_pointer (&cmd->task);
  ev->task_value = value;
  ev->error = error;
  post_event (core, ev);
}

static gboolean
thread_is_cancelled (gpointer data)
{
  EngineCore *core = data;
  if (atomic_load (&core->quitting))
    return TRUE;
  if (core->restoring_model)
    return FALSE;
  if (core->current_cancellable != NULL && g_cancellable_is_cancelled (core->current_cancellable))
    return TRUE;
  guint upto = core->current_is_load ? atomic_load (&core->load_cancel_upto)
                                     : atomic_load (&core->gen_cancel_upto);
  return core->current_id <= upto;
}

/* An event about the command the thread is running now. */
static Event *
current_event (EngineCore *core, EvType type)
{
  Event *ev = g_new0 (Event, 1);
  ev->type = type;
  ev->id = core->current_id;
  return ev;
}

static void
thread_load_progress (gpointer data, double fraction)
{
  EngineCore *core = data;
  Event *ev = current_event (core, EV_LOAD_PROGRESS);
  ev->fraction = fraction;
  post_event (core, ev);
}

static gboolean
thread_on_token (gpointer data, const char *text, gint token_id)
{
  EngineCore *core = data;
  Event *ev = current_event (core, EV_TOKEN);
  ev->text = g_string_new (text);
  ev->token_id = token_id;
  ev->probs = g_steal_pointer (&core->pending_probs);
  ev->a = 1;   /* tokens in the event, added up when events are coalesced */
  post_event (core, ev);
  return !thread_is_cancelled (core);
}

/* A record waits for the text it belongs to, so the app gets both in one go. */
static void
thread_on_probs (gpointer data, const HnTokenProbs *probs)
{
  EngineCore *core = data;
  if (core->pending_probs == NULL)
    core->pending_probs = g_byte_array_sized_new (sizeof *probs * 4);
  g_byte_array_append (core->pending_probs, (const guint8 *) probs, sizeof *probs);
}

/* Records of tokens with no text left (end of generation) go out on their own. */
static void
thread_flush_probs (EngineCore *core)
{
  if (core->pending_probs == NULL)
    return;
  Event *ev = current_event (core, EV_PROBS);
  ev->probs = g_steal_pointer (&core->pending_probs);
  post_event (core, ev);
}

static void
thread_on_prompt_progress (gpointer data, guint done, guint total)
{
  EngineCore *core = data;
  Event *ev = current_event (core, EV_PROMPT_PROGRESS);
  ev->a = done;
  ev->b = total;
  post_event (core, ev);
}

static void
thread_on_warning (gpointer data, int code, const char *message)
{
  EngineCore *core = data;
  Event *ev = current_event (core, EV_WARNING);
  ev->error = g_error_new_literal (HANASHI_ENGINE_ERROR, code, message);
  post_event (core, ev);
}

static void
thread_on_context_dropped (gpointer data, guint n_messages, guint n_tokens)
{
  EngineCore *core = data;
  Event *ev = current_event (core, EV_CONTEXT_DROPPED);
  ev->a = n_messages;
  ev->b = n_tokens;
  post_event (core, ev);
}

/* Once per session file: a full disk would otherwise complain after every reply. */
static void
thread_on_session_write_failed (gpointer data, const char *message)
{
  EngineCore *core = data;
  if (core->current_session == NULL
      || g_hash_table_contains (core->write_failed, core->current_session))
    return;
  g_message ("Session file not written: %s", message);
  g_hash_table_add (core->write_failed, g_strdup (core->current_session));
  Event *ev = current_event (core, EV_SESSION_WRITE_FAILED);
  ev->text = g_string_new (message);
  post_event (core, ev);
}

#define SINK_INIT(core) { thread_on_token, thread_on_prompt_progress, core, thread_is_cancelled, \
                          thread_on_warning, thread_on_context_dropped, thread_on_session_write_failed, \
                          thread_on_probs }

/* Offers the current model (or nothing) to hanashi_engine_lend_model; the reference it
 * replaces goes outside the lock (it may be the last one, which unmaps the weights). */
static void
thread_publish_loan (EngineCore *core)
{
  HanashiModelLoan *loan = NULL;
  if (core->model != NULL && core->model_backend->lend != NULL)
    loan = core->model_backend->lend (core->model);
  pthread_mutex_lock (&core->lock);
  HanashiModelLoan *previous = core->loan;
  core->loan = loan;
  pthread_mutex_unlock (&core->lock);
  hanashi_model_loan_unref (previous);
}

static void
thread_unload (EngineCore *core)
{
  /* (only this thread writes core->loan: reading it here needs no lock) */
  if (core->loan != NULL)
    {
      pthread_mutex_lock (&core->lock);
      HanashiModelLoan *previous = g_steal_pointer (&core->loan);
      pthread_mutex_unlock (&core->lock);
      hanashi_model_loan_unref (previous);
    }
  if (core->model != NULL)
    {
      pthread_mutex_lock (&core->model_lock);
      gpointer model = core->model;
      core->model = NULL;
      pthread_mutex_unlock (&core->model_lock);
      core->model_backend->unload (model);
    }
  g_clear_pointer (&core->model_path, g_free);
  g_clear_pointer (&core->model_gpu_device, g_free);
}

static void
thread_no_progress (gpointer data, double fraction)
{
  (void) data; (void) fraction;
}

/* The backend that loads @cmd's model: the remote one for a model on a server. */
static const HanashiEngineBackend *
backend_for (EngineCore *core, Cmd *cmd)
{
#ifdef HANASHI_HAVE_REMOTE
  if (cmd->remote != NULL)
    return hanashi_engine_remote_backend ();
#else
  (void) cmd;
#endif
  return core->backend;
}

static gpointer
thread_try_load (EngineCore *core, Cmd *cmd, void (*progress) (gpointer, double), HanashiModelInfo **info,
                 GError **error)
{
  HanashiBackendSink sink = SINK_INIT (core);
  sink.gpu_device = cmd->gpu_device;
  sink.gpu_layers = cmd->gpu_layers;
  if (thread_is_cancelled (core))
    {
      g_set_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED, "Loading was cancelled");
      return NULL;
    }
  const HanashiEngineBackend *backend = backend_for (core, cmd);
  if (cmd->remote != NULL)
    {
      if (backend->load_from == NULL)
        {
          g_set_error_literal (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_FAILED,
                               "This build of Hanashi cannot use remote servers (it was built without libsoup)");
          return NULL;
        }
      return backend->load_from (cmd->remote, cmd->path, &sink, info, error);
    }
  return backend->load (cmd->path, cmd->n_ctx, cmd->n_threads, cmd->n_batch, &sink, progress, info, error);
}

static void
thread_post_model_loaded (EngineCore *core, guint id, HanashiModelInfo *info)
{
  Event *ev = g_new0 (Event, 1);
  ev->type = EV_MODEL_LOADED;
  ev->id = id;
  ev->info = info;
  post_event (core, ev);
}

/* A file that is not a usable model must not take away the model that was working, so the
 * current model stays loaded while the new one loads and is freed only once the new one
 * works (the weights are mapped, so holding both costs mostly address space).  When the
 * new model is refused for memory, the current model's memory may be what it lacks: it is
 * freed and the new one tried once more; if that fails too, the current model is loaded
 * again from its file with its settings. */
static void
thread_run_load (EngineCore *core, Cmd *cmd)
{
  GError *error = NULL;
  HanashiModelInfo *info = NULL;
  gpointer model;

  core->current_id = cmd->id;
  core->current_is_load = TRUE;
  post_state (core, HANASHI_ENGINE_STATE_LOADING);
  model = thread_try_load (core, cmd, thread_load_progress, &info, &error);
  /* (A remote model holds no memory worth freeing, and is not loaded again from a path.) */
  if (model == NULL && core->model != NULL && core->model_backend == core->backend && cmd->remote == NULL
      && g_error_matches (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_OUT_OF_MEMORY))
    {
      g_autofree char *previous_path = g_steal_pointer (&core->model_path);
      guint previous_n_ctx = core->model_n_ctx, previous_n_threads = core->model_n_threads;
      guint previous_n_batch = core->model_n_batch;
      g_autofree char *previous_gpu_device = g_steal_pointer (&core->model_gpu_device);
      int previous_gpu_layers = core->model_gpu_layers;

      g_clear_error (&error);
      thread_unload (core);
      model = thread_try_load (core, cmd, thread_load_progress, &info, &error);
      if (model == NULL && !atomic_load (&core->quitting))
        {
          HanashiModelInfo *previous_info = NULL;
          g_autoptr (GError) previous_error = NULL;
          /* Only quitting stops this: the load was already refused, and bringing back what
           * worked is part of refusing it. */
          HanashiBackendSink sink = SINK_INIT (core);
          sink.gpu_device = previous_gpu_device;
          sink.gpu_layers = previous_gpu_layers;
          core->restoring_model = TRUE;
          gpointer previous = core->backend->load (previous_path, previous_n_ctx, previous_n_threads,
                                                   previous_n_batch, &sink, thread_no_progress,
                                                   &previous_info, &previous_error);
          core->restoring_model = FALSE;
          if (previous != NULL)
            {
              pthread_mutex_lock (&core->model_lock);
              core->model = previous;
              core->model_backend = core->backend;
              pthread_mutex_unlock (&core->model_lock);
              core->model_path = g_steal_pointer (&previous_path);
              core->model_n_ctx = previous_n_ctx;
              core->model_n_threads = previous_n_threads;
              core->model_n_batch = previous_n_batch;
              core->model_gpu_device = g_steal_pointer (&previous_gpu_device);
              core->model_gpu_layers = previous_gpu_layers;
              thread_publish_loan (core);
              thread_post_model_loaded (core, cmd->id, previous_info);
            }
          else
            g_message ("The previous model could not be loaded again: %s",
                       previous_error ? previous_error->message : "unknown reason");
        }
    }
  if (model != NULL)
    {
      thread_unload (core);
      pthread_mutex_lock (&core->model_lock);
      core->model = model;
      core->model_backend = backend_for (core, cmd);
      pthread_mutex_unlock (&core->model_lock);
      core->model_path = g_strdup (cmd->path);
      core->model_n_ctx = cmd->n_ctx;
      core->model_n_threads = cmd->n_threads;
      core->model_n_batch = cmd->n_batch;
      g_free (core->model_gpu_device);
      core->model_gpu_device = g_strdup (cmd->gpu_device);
      core->model_gpu_layers = cmd->gpu_layers;
      thread_publish_loan (core);
      thread_post_model_loaded (core, cmd->id, info);
      post_state (core, HANASHI_ENGINE_STATE_READY);
      post_task_done (core, cmd, TRUE, NULL);
    }
  else
    {
      post_state (core, core->model != NULL ? HANASHI_ENGINE_STATE_READY : HANASHI_ENGINE_STATE_NO_MODEL);
      if (error == NULL)
        g_set_error (&error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_FAILED, "The model could not be loaded");
      post_task_done (core, cmd, 0, error);
    }
}

static void
thread_run_generate (EngineCore *core, Cmd *cmd)
{
  HanashiBackendSink sink = SINK_INIT (core);
  HanashiBackendSession session = { cmd->path, cmd->dir, cmd->limit };
  Event *done = g_new0 (Event, 1);
  GError *error = NULL;

  core->current_id = cmd->id;
  core->current_is_load = FALSE;
  done->id = cmd->id;
  if (core->model == NULL)
    {
      done->type = EV_ERROR;
      g_set_error (&done->error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_NO_MODEL, "No model is loaded");
      post_event (core, done);
      return;
    }
  if (thread_is_cancelled (core))
    {
      done->type = EV_DONE;
      done->stats.stop_reason = HANASHI_STOP_REASON_CANCELLED;
      post_event (core, done);
      return;
    }
  post_state (core, HANASHI_ENGINE_STATE_GENERATING);
  core->current_session = cmd->path;
  gboolean ok = core->model_backend->generate (core->model, cmd->req, &session, &sink, &done->stats, &error);
  core->current_session = NULL;
  thread_flush_probs (core);
  if (ok)
    done->type = EV_DONE;
  else
    {
      done->type = EV_ERROR;
      done->error = error;
    }
  post_event (core, done);
  post_state (core, HANASHI_ENGINE_STATE_READY);
}

static void
thread_run_next_logits (EngineCore *core, Cmd *cmd)
{
  HanashiBackendSink sink = SINK_INIT (core);
  GError *error = NULL;
  Event *ev;
  core->current_id = cmd->id;
  core->current_is_load = FALSE;
  core->current_cancellable = g_task_get_cancellable (cmd->task);
  if (core->model == NULL)
    g_set_error (&error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_NO_MODEL, "No model is loaded");
  else if (core->model_backend->next_logits == NULL)
    g_set_error (&error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_FAILED,
                 "The next token's probabilities are not available for this model");
  if (error == NULL && thread_is_cancelled (core))
    g_set_error (&error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED, "Cancelled");
  HanashiNextLogits *next = NULL;
  if (error == NULL)
    {
      post_state (core, HANASHI_ENGINE_STATE_GENERATING);
      next = core->model_backend->next_logits (core->model, cmd->req, &sink, &error);
      post_state (core, HANASHI_ENGINE_STATE_READY);
      if (next == NULL && error == NULL)
        g_set_error (&error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED, "Cancelled");
    }
  core->current_cancellable = NULL;
  ev = g_new0 (Event, 1);
  ev->type = EV_TASK_DONE;
  ev->task = g_steal_pointer (&cmd->task);
  ev->error = error;
  ev->next_logits = next;
  post_event (core, ev);
}

static void
thread_run_count (EngineCore *core, Cmd *cmd)
{
  GError *error = NULL;
  if (core->model == NULL)
    {
      g_set_error (&error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_NO_MODEL, "No model is loaded");
      post_task_done (core, cmd, -1, error);
      return;
    }
  gint n = core->model_backend->count_tokens (core->model, cmd->req, &error);
  post_task_done (core, cmd, n, n < 0 ? error : NULL);
}

gboolean
hanashi_memory_available (guint64 *bytes)
{
  uint64_t available = 0;
  g_return_val_if_fail (bytes != NULL, FALSE);
  if (!hn_memory_available (&available))
    return FALSE;
  *bytes = available;
  return TRUE;
}

char *
hanashi_session_cache_dup_default_dir (void)
{
  return g_build_filename (g_get_user_cache_dir (), "hanashi", "sessions", NULL);
}

static gboolean
is_session_cache_file (const char *name)
{
  return g_str_has_suffix (name, SESSION_SUFFIX) || strstr (name, SESSION_SUFFIX ".tmp.") != NULL;
}

gboolean
hanashi_session_cache_clear (const char    *dir_path,
                             GCancellable  *cancellable,
                             GError       **error)
{
  g_autoptr (GError) open_error = NULL;
  g_autoptr (GDir) dir = g_dir_open (dir_path, 0, &open_error);
  const char *name;

  if (dir == NULL)
    {
      if (g_error_matches (open_error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        return TRUE;
      g_propagate_error (error, g_steal_pointer (&open_error));
      return FALSE;
    }
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        return FALSE;
      if (!is_session_cache_file (name))
        continue;
      g_autofree char *path = g_build_filename (dir_path, name, NULL);
      if (g_unlink (path) != 0 && errno != ENOENT)
        {
          int saved_errno = errno;
          g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (saved_errno),
                       "%s: %s", path, g_strerror (saved_errno));
          return FALSE;
        }
    }
  return TRUE;
}

static gpointer
engine_thread_main (gpointer data)
{
  EngineCore *core = data;
  for (;;)
    {
      /* The pop frees the queue's list node, allocated by the pushing thread, before the
       * acquire below can order it: that free, GLib's alone, is left unchecked. */
      hanashi_tsan_ignore_writes_begin ();
      Cmd *cmd = g_async_queue_pop (core->commands);
      hanashi_tsan_ignore_writes_end ();
      /* Pairs with the release in push_command: the command and all it points to (the
       * request, the task) were written by the thread that pushed it. */
      hanashi_tsan_acquire (core->commands);
      CmdType type = cmd->type;
      if (type != CMD_QUIT && atomic_load (&core->quitting))
        {
          /* Pending async calls still complete, as cancelled. */
          if (cmd->task)
            post_task_done (core, cmd, -1, g_error_new (HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED,
                                                        "The engine is shutting down"));
          cmd_free (cmd);
          continue;
        }
      switch (type)
        {
        case CMD_LOAD: thread_run_load (core, cmd); break;
        case CMD_UNLOAD:
          thread_unload (core);
          post_state (core, HANASHI_ENGINE_STATE_NO_MODEL);
          break;
        case CMD_GENERATE: thread_run_generate (core, cmd); break;
        case CMD_COUNT: thread_run_count (core, cmd); break;
        case CMD_NEXT_LOGITS: thread_run_next_logits (core, cmd); break;
        case CMD_FORGET_SESSION:
          if (g_unlink (cmd->path) != 0 && errno != ENOENT)
            g_message ("Cannot delete the session file %s: %s", cmd->path, g_strerror (errno));
          g_hash_table_remove (core->write_failed, cmd->path);
          break;
        case CMD_CLEAR_SESSIONS:
          {
            g_autoptr (GError) clear_error = NULL;
            if (!hanashi_session_cache_clear (cmd->dir, NULL, &clear_error))
              g_message ("Session cache not cleared: %s", clear_error->message);
          }
          g_hash_table_remove_all (core->write_failed);
          break;
        case CMD_QUIT: break;
        }
      cmd_free (cmd);
      if (type == CMD_QUIT)
        break;
    }
  thread_unload (core);
  core_unref (core);
  return NULL;
}

/* ---- GObject side ----------------------------------------------------------------------- */

static void
set_state (HanashiEngine *self, HanashiEngineState state)
{
  if (self->state == state)
    return;
  self->state = state;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
}

static void
engine_dispatch (HanashiEngine *self, Event *ev)
{
  switch (ev->type)
    {
    case EV_STATE:
      if (ev->state == HANASHI_ENGINE_STATE_NO_MODEL && self->model_info != NULL)
        {
          g_clear_pointer (&self->model_info, hanashi_model_info_free);
          g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_MODEL_INFO]);
        }
      set_state (self, ev->state);
      break;
    case EV_LOAD_PROGRESS:
      g_signal_emit (self, signals[SIG_LOAD_PROGRESS], 0, ev->fraction);
      break;
    case EV_MODEL_LOADED:
      hanashi_model_info_free (self->model_info);
      self->model_info = g_steal_pointer (&ev->info);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_MODEL_INFO]);
      g_signal_emit (self, signals[SIG_MODEL_LOADED], 0, self->model_info);
      break;
    case EV_PROMPT_PROGRESS:
      g_signal_emit (self, signals[SIG_PROMPT_PROGRESS], 0, ev->id, ev->a, ev->b);
      break;
    case EV_TOKEN:
      if (ev->probs != NULL)
        {
          g_autoptr (GBytes) records = g_byte_array_free_to_bytes (g_steal_pointer (&ev->probs));
          g_signal_emit (self, signals[SIG_TOKEN_PROBS], 0, ev->id, records);
        }
      self->streamed_tokens = self->streamed_id == ev->id ? self->streamed_tokens + ev->a : ev->a;
      self->streamed_id = ev->id;
      g_signal_emit (self, signals[SIG_TOKEN], 0, ev->id, ev->text->str, ev->token_id);
      break;
    case EV_PROBS:
      {
        g_autoptr (GBytes) records = g_byte_array_free_to_bytes (g_steal_pointer (&ev->probs));
        g_signal_emit (self, signals[SIG_TOKEN_PROBS], 0, ev->id, records);
      }
      break;
    case EV_DONE:
      g_signal_emit (self, signals[SIG_GENERATION_DONE], 0, ev->id, &ev->stats);
      break;
    case EV_CONTEXT_DROPPED:
      g_signal_emit (self, signals[SIG_CONTEXT_DROPPED], 0, ev->id, ev->a, ev->b);
      break;
    case EV_ERROR:
      g_signal_emit (self, signals[SIG_ERROR], 0, ev->id, ev->error);
      break;
    case EV_WARNING:
      /* The device failed during this generation: the model info says where it runs now. */
      if (g_error_matches (ev->error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_GPU_FAILED) && self->model_info != NULL)
        {
          g_clear_pointer (&self->model_info->gpu_device, g_free);
          self->model_info->gpu_layers = 0;
          g_free (self->model_info->gpu_notice);
          self->model_info->gpu_notice = g_strdup (ev->error->message);
          g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_MODEL_INFO]);
        }
      g_signal_emit (self, signals[SIG_WARNING], 0, ev->id, ev->error);
      break;
    case EV_SESSION_WRITE_FAILED:
      g_signal_emit (self, signals[SIG_SESSION_WRITE_FAILED], 0, ev->text->str);
      break;
    case EV_TASK_DONE:
      if (ev->error != NULL)
        g_task_return_error (ev->task, g_steal_pointer (&ev->error));
      else if (g_task_get_source_tag (ev->task) == hanashi_engine_count_tokens_async)
        g_task_return_int (ev->task, ev->task_value);
      else if (g_task_get_source_tag (ev->task) == hanashi_engine_next_logits_async)
        g_task_return_pointer (ev->task, g_steal_pointer (&ev->next_logits),
                               (GDestroyNotify) hanashi_next_logits_free);
      else
        g_task_return_boolean (ev->task, TRUE);
      break;
    }
}

static void
push_command (HanashiEngine *self, Cmd *cmd)
{
  GAsyncQueue *commands = self->core->commands;
  /* The release is inside the queue's lock, so the engine thread cannot pop @cmd (and
   * acquire) before it: ThreadSanitizer gets the same edge the queue's mutex gives. */
  g_async_queue_lock (commands);
  g_async_queue_push_unlocked (commands, cmd);
  hanashi_tsan_release (commands);
  g_async_queue_unlock (commands);
}

static guint
next_id (HanashiEngine *self)
{
  return atomic_fetch_add (&self->core->last_id, 1) + 1;
}

static void
raise_to (atomic_uint *value, guint to)
{
  guint cur = atomic_load (value);
  while (cur < to && !atomic_compare_exchange_weak (value, &cur, to))
    ;
}

HanashiEngine *
hanashi_engine_new (void)
{
  return g_object_new (HANASHI_TYPE_ENGINE, NULL);
}

HanashiEngineState hanashi_engine_get_state (HanashiEngine *self) { g_return_val_if_fail (HANASHI_IS_ENGINE (self), HANASHI_ENGINE_STATE_NO_MODEL); return self->state; }
const HanashiModelInfo *hanashi_engine_get_model_info (HanashiEngine *self) { g_return_val_if_fail (HANASHI_IS_ENGINE (self), NULL); return self->model_info; }

void
hanashi_engine_load_model_async (HanashiEngine *self, const char *path, guint n_ctx, guint n_threads,
                                 GCancellable *cancellable, GAsyncReadyCallback callback,
                                 gpointer user_data)
{
  g_return_if_fail (HANASHI_IS_ENGINE (self));
  g_return_if_fail (path != NULL);
  Cmd *cmd = g_new0 (Cmd, 1);
  cmd->type = CMD_LOAD;
  cmd->id = next_id (self);
  cmd->path = g_strdup (path);
  cmd->n_ctx = n_ctx;
  cmd->n_threads = n_threads;
  cmd->n_batch = self->n_batch;
  cmd->gpu_device = g_strdup (self->gpu_device);
  cmd->gpu_layers = self->gpu_layers;
  cmd->task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (cmd->task, hanashi_engine_load_model_async);
  g_task_set_check_cancellable (cmd->task, TRUE);
  /* A new model replaces everything in flight. */
  raise_to (&self->core->gen_cancel_upto, cmd->id);
  raise_to (&self->core->load_cancel_upto, cmd->id - 1);
  push_command (self, cmd);
}

HanashiModelLoan *
hanashi_engine_lend_model (HanashiEngine *self)
{
  g_return_val_if_fail (HANASHI_IS_ENGINE (self), NULL);
  EngineCore *core = self->core;
  pthread_mutex_lock (&core->lock);
  HanashiModelLoan *loan = core->loan != NULL ? hanashi_model_loan_ref (core->loan) : NULL;
  pthread_mutex_unlock (&core->lock);
  return loan;
}

void
hanashi_engine_load_remote_async (HanashiEngine *self, HanashiRemote *remote, const char *model_id,
                                  GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (HANASHI_IS_ENGINE (self));
  g_return_if_fail (remote != NULL);
#ifndef HANASHI_HAVE_REMOTE
  /* Without libsoup there is no HanashiRemote to pass (hanashi-remote.c is not built). */
  g_task_report_new_error (self, callback, user_data, hanashi_engine_load_model_async, HANASHI_ENGINE_ERROR,
                           HANASHI_ENGINE_ERROR_FAILED,
                           "This build of Hanashi cannot use remote servers (it was built without libsoup)");
  (void) model_id; (void) cancellable;
  return;
#else
  Cmd *cmd = g_new0 (Cmd, 1);
  cmd->type = CMD_LOAD;
  cmd->id = next_id (self);
  cmd->path = g_strdup (model_id ? model_id : "");
  cmd->remote = hanashi_remote_ref (remote);
  cmd->task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (cmd->task, hanashi_engine_load_model_async);
  g_task_set_check_cancellable (cmd->task, TRUE);
  raise_to (&self->core->gen_cancel_upto, cmd->id);
  raise_to (&self->core->load_cancel_upto, cmd->id - 1);
  push_command (self, cmd);
#endif
}

gboolean
hanashi_engine_load_model_finish (HanashiEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

void
hanashi_engine_unload (HanashiEngine *self)
{
  g_return_if_fail (HANASHI_IS_ENGINE (self));
  Cmd *cmd = g_new0 (Cmd, 1);
  cmd->type = CMD_UNLOAD;
  cmd->id = next_id (self);
  raise_to (&self->core->gen_cancel_upto, cmd->id);
  raise_to (&self->core->load_cancel_upto, cmd->id);
  push_command (self, cmd);
}

/* <dir>/<conversation-id>.hnsession; NULL without a directory or an id. */
static char *
session_path_for (HanashiEngine *self, const char *conversation_id)
{
  if (self->session_dir == NULL || conversation_id == NULL || conversation_id[0] == '\0')
    return NULL;
  g_autofree char *name = g_strconcat (conversation_id, SESSION_SUFFIX, NULL);
  g_strdelimit (name, "/\\", '_');
  return g_build_filename (self->session_dir, name, NULL);
}

guint
hanashi_engine_generate (HanashiEngine *self, HanashiGenerateRequest *req)
{
  g_return_val_if_fail (HANASHI_IS_ENGINE (self), 0);
  g_return_val_if_fail (req != NULL, 0);
  Cmd *cmd = g_new0 (Cmd, 1);
  cmd->type = CMD_GENERATE;
  cmd->id = next_id (self);
  cmd->req = hanashi_generate_request_ref (req);
  if (req->use_session)
    {
      if (req->session_path != NULL)
        cmd->path = g_strdup (req->session_path);
      else
        cmd->path = session_path_for (self, req->conversation_id);
      cmd->dir = g_strdup (self->session_dir);
      cmd->limit = self->session_limit;
    }
  raise_to (&self->core->gen_cancel_upto, cmd->id - 1);
  guint id = cmd->id;
  push_command (self, cmd);
  return id;
}

guint
hanashi_engine_get_streamed_tokens (HanashiEngine *self, guint request_id)
{
  g_return_val_if_fail (HANASHI_IS_ENGINE (self), 0);
  return request_id != 0 && request_id == self->streamed_id ? self->streamed_tokens : 0;
}

void
hanashi_engine_cancel (HanashiEngine *self, guint request_id)
{
  g_return_if_fail (HANASHI_IS_ENGINE (self));
  raise_to (&self->core->gen_cancel_upto, request_id ? request_id : atomic_load (&self->core->last_id));
}

GBytes *
hanashi_engine_dup_token_text (HanashiEngine *self, gint32 token, gboolean *is_control)
{
  g_return_val_if_fail (HANASHI_IS_ENGINE (self), NULL);
  EngineCore *core = self->core;
  GBytes *text = NULL;
  if (is_control != NULL)
    *is_control = FALSE;
  pthread_mutex_lock (&core->model_lock);
  if (core->model != NULL && core->model_backend->token_text != NULL)
    {
      gsize len = 0;
      const char *bytes = core->model_backend->token_text (core->model, token, FALSE, &len);
      if (bytes != NULL && len == 0)
        {
          bytes = core->model_backend->token_text (core->model, token, TRUE, &len);
          if (is_control != NULL)
            *is_control = TRUE;
        }
      if (bytes != NULL)
        text = g_bytes_new (bytes, len);
    }
  pthread_mutex_unlock (&core->model_lock);
  return text;
}

void
hanashi_engine_count_tokens_async (HanashiEngine *self, HanashiGenerateRequest *req,
                                   GCancellable *cancellable, GAsyncReadyCallback callback,
                                   gpointer user_data)
{
  g_return_if_fail (HANASHI_IS_ENGINE (self));
  g_return_if_fail (req != NULL);
  Cmd *cmd = g_new0 (Cmd, 1);
  cmd->type = CMD_COUNT;
  cmd->id = next_id (self);
  cmd->req = hanashi_generate_request_ref (req);
  cmd->task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (cmd->task, hanashi_engine_count_tokens_async);
  g_task_set_check_cancellable (cmd->task, TRUE);
  push_command (self, cmd);
}

gint
hanashi_engine_count_tokens_finish (HanashiEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), -1);
  GError *local = NULL;
  gssize n = g_task_propagate_int (G_TASK (result), &local);
  if (local != NULL)
    {
      g_propagate_error (error, local);
      return -1;
    }
  return (gint) n;
}

void
hanashi_engine_next_logits_async (HanashiEngine *self, HanashiGenerateRequest *req, GCancellable *cancellable,
                                  GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (HANASHI_IS_ENGINE (self));
  g_return_if_fail (req != NULL);
  Cmd *cmd = g_new0 (Cmd, 1);
  cmd->type = CMD_NEXT_LOGITS;
  cmd->id = next_id (self);
  cmd->req = hanashi_generate_request_ref (req);
  cmd->task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (cmd->task, hanashi_engine_next_logits_async);
  g_task_set_check_cancellable (cmd->task, TRUE);
  push_command (self, cmd);
}

HanashiNextLogits *
hanashi_engine_next_logits_finish (HanashiEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
hanashi_engine_set_session_dir (HanashiEngine *self, const char *dir)
{
  g_return_if_fail (HANASHI_IS_ENGINE (self));
  g_free (self->session_dir);
  self->session_dir = g_strdup (dir);
}

void
hanashi_engine_set_session_cache_limit (HanashiEngine *self, guint64 bytes)
{
  g_return_if_fail (HANASHI_IS_ENGINE (self));
  self->session_limit = bytes;
}

void
hanashi_engine_set_batch_size (HanashiEngine *self, guint n_batch)
{
  g_return_if_fail (HANASHI_IS_ENGINE (self));
  self->n_batch = n_batch;
}

void
hanashi_engine_set_gpu (HanashiEngine *self, const char *device, int n_layers)
{
  g_return_if_fail (HANASHI_IS_ENGINE (self));
  g_return_if_fail (n_layers >= HANASHI_GPU_LAYERS_AUTO);
  g_free (self->gpu_device);
  self->gpu_device = g_strdup (device);
  self->gpu_layers = n_layers;
}

void
hanashi_engine_forget_session (HanashiEngine *self, const char *conversation_id)
{
  g_return_if_fail (HANASHI_IS_ENGINE (self));
  g_autofree char *path = session_path_for (self, conversation_id);
  if (path == NULL)
    return;
  Cmd *cmd = g_new0 (Cmd, 1);
  cmd->type = CMD_FORGET_SESSION;
  cmd->id = next_id (self);
  cmd->path = g_steal_pointer (&path);
  push_command (self, cmd);
}

void
hanashi_engine_clear_session_cache (HanashiEngine *self)
{
  g_return_if_fail (HANASHI_IS_ENGINE (self));
  if (self->session_dir == NULL)
    return;
  Cmd *cmd = g_new0 (Cmd, 1);
  cmd->type = CMD_CLEAR_SESSIONS;
  cmd->id = next_id (self);
  cmd->dir = g_strdup (self->session_dir);
  push_command (self, cmd);
}

static void
hanashi_engine_dispose (GObject *object)
{
  HanashiEngine *self = HANASHI_ENGINE (object);
  if (self->thread != NULL)
    {
      Cmd *quit = g_new0 (Cmd, 1);
      quit->type = CMD_QUIT;
      atomic_store (&self->core->quitting, TRUE);
      push_command (self, quit);
      g_thread_join (self->thread);
      self->thread = NULL;
      self->core->engine = NULL;
    }
  G_OBJECT_CLASS (hanashi_engine_parent_class)->dispose (object);
}

static void
hanashi_engine_finalize (GObject *object)
{
  HanashiEngine *self = HANASHI_ENGINE (object);
  hanashi_model_info_free (self->model_info);
  g_free (self->session_dir);
  g_free (self->gpu_device);
  core_unref (self->core);
  G_OBJECT_CLASS (hanashi_engine_parent_class)->finalize (object);
}

static void
hanashi_engine_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  HanashiEngine *self = HANASHI_ENGINE (object);
  switch (prop_id)
    {
    case PROP_STATE: g_value_set_enum (value, self->state); break;
    case PROP_MODEL_INFO: g_value_set_boxed (value, self->model_info); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hanashi_engine_class_init (HanashiEngineClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  object_class->dispose = hanashi_engine_dispose;
  object_class->finalize = hanashi_engine_finalize;
  object_class->get_property = hanashi_engine_get_property;

  properties[PROP_STATE] = g_param_spec_enum ("state", NULL, NULL, HANASHI_TYPE_ENGINE_STATE,
                                              HANASHI_ENGINE_STATE_NO_MODEL,
                                              G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_MODEL_INFO] = g_param_spec_boxed ("model-info", NULL, NULL, HANASHI_TYPE_MODEL_INFO,
                                                    G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  signals[SIG_LOAD_PROGRESS] = g_signal_new ("load-progress", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                             0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_DOUBLE);
  signals[SIG_MODEL_LOADED] = g_signal_new ("model-loaded", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                            0, NULL, NULL, NULL, G_TYPE_NONE, 1, HANASHI_TYPE_MODEL_INFO);
  signals[SIG_PROMPT_PROGRESS] = g_signal_new ("prompt-progress", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                               0, NULL, NULL, NULL, G_TYPE_NONE, 3,
                                               G_TYPE_UINT, G_TYPE_UINT, G_TYPE_UINT);
  signals[SIG_TOKEN] = g_signal_new ("token", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                     0, NULL, NULL, NULL, G_TYPE_NONE, 3,
                                     G_TYPE_UINT, G_TYPE_STRING | G_SIGNAL_TYPE_STATIC_SCOPE, G_TYPE_INT);
  signals[SIG_GENERATION_DONE] = g_signal_new ("generation-done", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                               0, NULL, NULL, NULL, G_TYPE_NONE, 2,
                                               G_TYPE_UINT, HANASHI_TYPE_GENERATION_STATS | G_SIGNAL_TYPE_STATIC_SCOPE);
  signals[SIG_CONTEXT_DROPPED] = g_signal_new ("context-dropped", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                               0, NULL, NULL, NULL, G_TYPE_NONE, 3,
                                               G_TYPE_UINT, G_TYPE_UINT, G_TYPE_UINT);
  signals[SIG_ERROR] = g_signal_new ("error", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                     0, NULL, NULL, NULL, G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_ERROR);
  signals[SIG_TOKEN_PROBS] = g_signal_new ("token-probs", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                           0, NULL, NULL, NULL, G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_BYTES);
  signals[SIG_SESSION_WRITE_FAILED] = g_signal_new ("session-write-failed", G_TYPE_FROM_CLASS (klass),
                                                    G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                    G_TYPE_NONE, 1, G_TYPE_STRING);
  signals[SIG_WARNING] = g_signal_new ("warning", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                       0, NULL, NULL, NULL, G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_ERROR);
}

static void
hanashi_engine_init (HanashiEngine *self)
{
  EngineCore *core = g_new0 (EngineCore, 1);
  core->ref_count = 1;
  core->main_ctx = g_main_context_ref_thread_default ();
  core->commands = g_async_queue_new_full ((GDestroyNotify) cmd_free);
  core->backend = pick_backend ();
  core->model_backend = core->backend;
  core->write_failed = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  pthread_mutex_init (&core->lock, NULL);
  pthread_mutex_init (&core->model_lock, NULL);
  g_queue_init (&core->events);
  core->engine = self;
  self->core = core;
  self->session_limit = G_GUINT64_CONSTANT (2) << 30;
  self->session_dir = hanashi_session_cache_dup_default_dir ();
  self->thread = g_thread_new ("hanashi-engine", engine_thread_main, core_ref (core));
}
