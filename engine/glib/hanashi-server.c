/* hanashi-server.c — the OpenAI-compatible server (see hanashi-server.h, docs/server.md).
 *
 * Threads: everything that touches libsoup runs in the main context the server was created
 * in.  A request is parsed and validated there into a Job, which goes to an idle slot (the
 * one whose last conversation shares the longest prefix with it) or waits in a queue.  The
 * slots are the sequences of one HnChatBatch: a single decode thread starts each job it
 * receives on its slot's sequence and runs one forward pass after another for all of
 * them (hn_chat_batch_step), the context's thread pool working inside each pass.  Every
 * piece of text a job produces is appended to the job under its mutex and one idle
 * callback in the main context moves what has arrived to the HTTP response (one SSE event
 * per piece) and unpauses the message.  When the generation ends, the same callback
 * writes the end of the response and frees the slot for the next waiting job.
 *
 * A client that goes away makes libsoup finish the message ("finished" after a failed
 * write); the job is then cancelled, which the decode thread sees before its next pass,
 * and the slot is free again once that pass is done.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hanashi-server.h"
#include "hanashi-engine-backend.h"
#include "hanashi-tsan.h"

#include <libsoup/soup.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

#include "hn-chat.h"
#include "hn-json.h"
#include "hn-params.h"
#include "hn-threadpool.h"

G_DEFINE_QUARK(hanashi-server-error-quark, hanashi_server_error)

G_STATIC_ASSERT(HANASHI_SERVER_MAX_PARALLEL <= HN_CHAT_BATCH_MAX);

typedef struct _Slot Slot;

typedef enum { JOB_CHAT, JOB_COMPLETION } JobKind;

/* One request from its parse to its last byte.  Reference-counted: the main context, the
 * worker and pending idle callbacks each hold one. */
typedef struct {
  gint ref_count;
  HanashiServer *server;     /* borrowed: the server outlives every job (dispose drains them) */
  SoupServerMessage *msg;    /* main context only; NULL once libsoup finished it */
  gulong finished_handler;
  JobKind kind;
  gboolean stream, include_usage;
  char *id;
  gint64 created;

  /* the request, owned */
  char *system;
  HnChatMessage *messages;
  gsize n_messages;
  int32_t *prompt_tokens, *negative_tokens;
  gsize n_prompt_tokens, n_negative_tokens;
  char *prefix_key;          /* what the slot choice compares (see choose_slot) */
  HnSamplerParams sampler;
  char **stops;
  HnLogitBias *bias;
  char *json_schema, *gbnf, *cfg_negative;
  float cfg_scale;

  /* shared with the worker: lock (a pthread mutex, which ThreadSanitizer sees) */
  pthread_mutex_t lock;
  GPtrArray *pieces;         /* GBytes not yet written (streaming), or every piece; bytes, not
                              * C strings: a token can decode to a NUL, which JSON carries */
  gboolean flush_scheduled;
  gboolean done;
  gboolean failed;
  HnStatus error_code;
  char *error_message;
  HnChatStats stats;
  gint cancelled;            /* atomic */

  guint seq;                 /* the slot's sequence, set before the job goes to the decode thread */

  /* main context only */
  Slot *slot;
  gboolean started;          /* the first SSE event (the role) went out */
} Job;

struct _Slot {
  HanashiServer *server;
  guint index;               /* its sequence in the batch */
  Job *job;                  /* main context: the job it runs, NULL when idle */
  char *prefix_key;          /* main context: the last job's key */
};

struct _HanashiServer {
  GObject parent_instance;
  HanashiServerOptions options;
  char *model_id, *api_key;
  const HnModel *model;
  const HnVocab *vocab;
  HanashiModelLoan *loan;    /* what keeps model and vocab alive, or NULL (the caller does) */
  HnChatModel *chat_model;
  GMainContext *context;
  SoupServer *soup;
  GHashTable *connections;   /* GSocket* of the open connections (a reference each) */
  Slot *slots;
  guint n_slots;
  HnChatBatch *batch;        /* the decode thread's */
  GThread *decoder;
  GAsyncQueue *jobs;         /* to the decode thread: Job*, or the server itself as "stop" */
  GQueue waiting;            /* Job* that wait for a slot */
  guint64 next_id;
  guint64 n_finished, n_cancelled; /* generations that ended, and of those the cancelled */
  gboolean stopping;
};

G_DEFINE_FINAL_TYPE(HanashiServer, hanashi_server, G_TYPE_OBJECT)

void
hanashi_server_options_init(HanashiServerOptions *options)
{
  *options = (HanashiServerOptions) {
    .model_id = NULL,
    .n_parallel = 1,
    .n_ctx = 0,
    .n_threads = 0,
    .api_key = NULL,
    .max_body_bytes = HANASHI_SERVER_DEFAULT_MAX_BODY,
    .max_tokens = HANASHI_SERVER_DEFAULT_MAX_TOKENS,
    .max_connections = HANASHI_SERVER_DEFAULT_MAX_CONNECTIONS,
    .max_queue = HANASHI_SERVER_DEFAULT_MAX_QUEUE,
  };
}

/* ---- jobs ------------------------------------------------------------------------------- */

static Job *
job_ref(Job *job)
{
  g_atomic_int_inc(&job->ref_count);
  return job;
}

static void
job_unref(Job *job)
{
  if (!g_atomic_int_dec_and_test(&job->ref_count))
    return;
  g_assert(job->msg == NULL);
  g_free(job->id);
  g_free(job->system);
  for (gsize i = 0; i < job->n_messages; i++) {
    g_free((char *) job->messages[i].role);
    g_free((char *) job->messages[i].content);
  }
  g_free(job->messages);
  g_free(job->prompt_tokens);
  g_free(job->negative_tokens);
  g_free(job->prefix_key);
  g_strfreev(job->stops);
  g_free(job->bias);
  g_free(job->json_schema);
  g_free(job->gbnf);
  g_free(job->cfg_negative);
  pthread_mutex_destroy(&job->lock);
  g_ptr_array_unref(job->pieces);
  g_free(job->error_message);
  g_free(job);
}

/* Lets go of the message (main context). */
static void
job_release_message(Job *job)
{
  if (!job->msg)
    return;
  g_signal_handler_disconnect(job->msg, job->finished_handler);
  g_clear_object(&job->msg);
}

/* ---- responses -------------------------------------------------------------------------- */

static void
set_json_response(SoupServerMessage *msg, guint status, HnJson *body)
{
  size_t len = 0;
  char *text = hn_json_write(body, &HN_JSON_WRITE_COMPACT, &len);
  hn_json_free(body);
  soup_server_message_set_status(msg, status, NULL);
  if (!text) {
    soup_server_message_set_status(msg, SOUP_STATUS_INTERNAL_SERVER_ERROR, NULL);
    return;
  }
  /* hn_json_write's buffer is malloc'ed: hand over a GLib copy */
  soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_COPY, text, len);
  free(text);
}

static HnJson *
error_json(const char *message, const char *type, const char *param, const char *code)
{
  HnJson *error = hn_json_new_object();
  hn_json_object_set(error, "message", hn_json_new_string(message));
  hn_json_object_set(error, "type", hn_json_new_string(type));
  hn_json_object_set(error, "param", param ? hn_json_new_string(param) : hn_json_new_null());
  hn_json_object_set(error, "code", code ? hn_json_new_string(code) : hn_json_new_null());
  HnJson *root = hn_json_new_object();
  hn_json_object_set(root, "error", error);
  return root;
}

/* OpenAI's error types: invalid_request_error (4xx), authentication_error-like codes are
 * given in `code`, server_error (5xx). */
static void
send_error(SoupServerMessage *msg, guint status, const char *param, const char *code, const char *fmt, ...)
  G_GNUC_PRINTF(5, 6);

static void
send_error(SoupServerMessage *msg, guint status, const char *param, const char *code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *message = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  const char *type = status >= 500 ? "server_error" : "invalid_request_error";
  set_json_response(msg, status, error_json(message, type, param, code));
}

/* ---- the request ------------------------------------------------------------------------ */

/* Why a request was refused: an HTTP status, the field and a sentence. */
typedef struct {
  guint status;
  const char *param;
  const char *code;
  char *message;
} Refusal;

static gboolean
refuse(Refusal *r, const char *param, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

static gboolean
refuse(Refusal *r, const char *param, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  r->status = SOUP_STATUS_BAD_REQUEST;
  r->param = param;
  r->code = NULL;
  g_free(r->message);
  r->message = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  return FALSE;
}

/* A message's content: a string, null, or an array of {"type": "text", "text": ...} parts. */
static gboolean
message_content(const HnJson *content, gsize index, char **out, Refusal *r)
{
  if (hn_json_is_null(content)) {
    *out = g_strdup("");
    return TRUE;
  }
  if (hn_json_is_string(content)) {
    *out = g_strndup(hn_json_get_string(content), hn_json_get_string_len(content));
    return TRUE;
  }
  if (hn_json_is_array(content)) {
    GString *text = g_string_new(NULL);
    for (size_t k = 0; k < hn_json_length(content); k++) {
      const HnJson *part = hn_json_array_get(content, k);
      const HnJson *type = hn_json_object_get(part, "type"), *ptext = hn_json_object_get(part, "text");
      if (!hn_json_is_string(type) || strcmp(hn_json_get_string(type), "text") != 0 || !hn_json_is_string(ptext)) {
        g_string_free(text, TRUE);
        return refuse(r, "messages", "message %zu: only text content parts are supported", (size_t) index);
      }
      g_string_append_len(text, hn_json_get_string(ptext), (gssize) hn_json_get_string_len(ptext));
    }
    *out = g_string_free(text, FALSE);
    return TRUE;
  }
  return refuse(r, "messages", "message %zu: \"content\" must be a string or an array of text parts", (size_t) index);
}

static gboolean
parse_messages(Job *job, const HnJson *messages, Refusal *r)
{
  if (!hn_json_is_array(messages) || hn_json_length(messages) == 0)
    return refuse(r, "messages", "\"messages\" must be a non-empty array");
  gsize n = hn_json_length(messages);
  job->messages = g_new0(HnChatMessage, n);
  GString *key = g_string_new(NULL);
  for (gsize i = 0; i < n; i++) {
    const HnJson *m = hn_json_array_get(messages, i);
    const HnJson *role = hn_json_object_get(m, "role");
    if (!hn_json_is_object(m) || !hn_json_is_string(role)) {
      g_string_free(key, TRUE);
      return refuse(r, "messages", "message %zu is not an object with a string \"role\"", (size_t) i);
    }
    char *content = NULL;
    if (!message_content(hn_json_object_get(m, "content"), i, &content, r)) {
      g_string_free(key, TRUE);
      return FALSE;
    }
    const char *role_text = hn_json_get_string(role);
    g_string_append(key, role_text);
    g_string_append_c(key, '\x1f');
    g_string_append(key, content);
    g_string_append_c(key, '\x1e');
    /* the leading system message is the system prompt, which the core never drops */
    if (i == 0 && strcmp(role_text, "system") == 0) {
      job->system = content;
      continue;
    }
    job->messages[job->n_messages++] = (HnChatMessage) { g_strdup(role_text), content };
  }
  job->prefix_key = g_string_free(key, FALSE);
  if (job->n_messages == 0)
    return refuse(r, "messages", "\"messages\" holds only a system message: there is nothing to answer");
  return TRUE;
}

static gboolean
tokenize_text(const HnVocab *vocab, const char *text, gsize len, int32_t **out, gsize *n_out, Refusal *r,
              const char *param)
{
  HnError err = { 0 };
  int32_t cap = (int32_t) MIN(len + 16, (gsize) G_MAXINT32 / 2);
  int32_t *ids = g_new(int32_t, cap);
  int32_t n = hn_tokenize(vocab, text, len, true, true, ids, cap, &err);
  if (n < 0 && n != INT32_MIN) {
    cap = -n;
    ids = g_renew(int32_t, ids, cap);
    n = hn_tokenize(vocab, text, len, true, true, ids, cap, &err);
  }
  if (n < 0) {
    g_free(ids);
    return refuse(r, param, "%s cannot be tokenized: %s", param, err.message);
  }
  *out = ids;
  *n_out = (gsize) n;
  return TRUE;
}

static gboolean
parse_prompt(Job *job, const HnJson *prompt, Refusal *r)
{
  const HnJson *text = prompt;
  if (hn_json_is_array(prompt)) {
    if (hn_json_length(prompt) != 1)
      return refuse(r, "prompt", "\"prompt\" must be a string (or an array of exactly one string)");
    text = hn_json_array_get(prompt, 0);
  }
  if (!hn_json_is_string(text))
    return refuse(r, "prompt", "\"prompt\" must be a string");
  job->prefix_key = g_strndup(hn_json_get_string(text), hn_json_get_string_len(text));
  if (!tokenize_text(job->server->vocab, hn_json_get_string(text), hn_json_get_string_len(text), &job->prompt_tokens,
                     &job->n_prompt_tokens, r, "prompt"))
    return FALSE;
  if (job->n_prompt_tokens == 0)
    return refuse(r, "prompt", "\"prompt\" is empty");
  return TRUE;
}

static gboolean
number_field(const HnJson *body, const char *key, gboolean *present, double *value, Refusal *r)
{
  const HnJson *v = hn_json_object_get(body, key);
  *present = v != NULL && !hn_json_is_null(v);
  if (!*present)
    return TRUE;
  if (hn_json_is_bool(v)) {
    *value = hn_json_get_bool(v) ? 1 : 0;
    return TRUE;
  }
  if (!hn_json_is_number(v))
    return refuse(r, key, "\"%s\" must be a number", key);
  *value = hn_json_get_double(v);
  return TRUE;
}

/* Every sampler parameter of the hn-params.h table under its own key (temperature, top_p,
 * seed and the penalties are OpenAI's names too; top_k, min_p, typical_p, repeat_penalty,
 * repeat_last_n, mirostat… are Hanashi's extensions). */
static gboolean
parse_sampler(Job *job, const HnJson *body, Refusal *r)
{
  HanashiServer *self = job->server;
  size_t n_params = 0;
  const HnParamDesc *table = hn_params_table(&n_params);
  hn_sampler_params_init(&job->sampler);
  for (size_t i = 0; i < n_params; i++) {
    const HnParamDesc *desc = &table[i];
    if (strcmp(desc->key, "max_new_tokens") == 0)
      continue;
    gboolean present = FALSE;
    double value = 0;
    if (!number_field(body, desc->key, &present, &value, r))
      return FALSE;
    if (!present)
      continue;
    HnError err = { 0 };
    if (!hn_param_check(desc, value, &err))
      return refuse(r, desc->key, "%s", err.message);
    hn_param_set(desc, &job->sampler, value);
  }

  /* max_completion_tokens is the newer name of max_tokens */
  gboolean present = FALSE;
  double max_tokens = self->options.max_tokens;
  const char *max_key = hn_json_object_get(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (!number_field(body, max_key, &present, &max_tokens, r))
    return FALSE;
  if (present && (max_tokens < 1 || max_tokens != floor(max_tokens)))
    return refuse(r, max_key, "\"%s\" must be a whole number of at least 1", max_key);
  /* above the server's cap: clamped (documented), as a client cannot know the cap */
  job->sampler.max_new_tokens = (int32_t) MIN(max_tokens, (double) self->options.max_tokens);

  const HnJson *n = hn_json_object_get(body, "n");
  if (n && !hn_json_is_null(n) && !(hn_json_is_number(n) && hn_json_get_double(n) == 1))
    return refuse(r, "n", "only n = 1 is supported: one choice per request");

  const HnJson *stop = hn_json_object_get(body, "stop");
  if (stop && !hn_json_is_null(stop)) {
    GPtrArray *stops = g_ptr_array_new();
    gboolean ok = TRUE;
    if (hn_json_is_string(stop)) {
      g_ptr_array_add(stops, g_strdup(hn_json_get_string(stop)));
    } else if (hn_json_is_array(stop)) {
      for (size_t k = 0; k < hn_json_length(stop) && ok; k++) {
        const HnJson *s = hn_json_array_get(stop, k);
        if (!hn_json_is_string(s))
          ok = refuse(r, "stop", "\"stop\" must be a string or an array of strings");
        else
          g_ptr_array_add(stops, g_strdup(hn_json_get_string(s)));
      }
    } else {
      ok = refuse(r, "stop", "\"stop\" must be a string or an array of strings");
    }
    g_ptr_array_add(stops, NULL);
    job->stops = (char **) g_ptr_array_free(stops, FALSE);
    if (!ok)
      return FALSE;
    job->sampler.stop = (const char *const *) job->stops;
    job->sampler.n_stop = g_strv_length(job->stops);
  }

  const HnJson *bias = hn_json_object_get(body, "logit_bias");
  if (bias && !hn_json_is_null(bias)) {
    if (!hn_json_is_object(bias))
      return refuse(r, "logit_bias", "\"logit_bias\" must be an object of token id → bias");
    gsize nb = hn_json_length(bias);
    if (nb > HN_SAMPLER_MAX_LOGIT_BIAS)
      return refuse(r, "logit_bias", "\"logit_bias\" has %zu entries; at most %d are allowed", (size_t) nb,
                    HN_SAMPLER_MAX_LOGIT_BIAS);
    job->bias = g_new0(HnLogitBias, MAX(nb, 1));
    for (gsize k = 0; k < nb; k++) {
      const char *key = hn_json_object_key_at(bias, k, NULL);
      const HnJson *v = hn_json_object_value_at(bias, k);
      char *end = NULL;
      gint64 id = g_ascii_strtoll(key, &end, 10);
      if (!*key || *end || id < 0 || id >= hn_vocab_n_tokens(self->vocab))
        return refuse(r, "logit_bias", "logit_bias: '%s' is not a token id of this model (0..%d)", key,
                      hn_vocab_n_tokens(self->vocab) - 1);
      if (!hn_json_is_number(v) || hn_json_get_double(v) < -100 || hn_json_get_double(v) > 100)
        return refuse(r, "logit_bias", "logit_bias: the bias of token %s must be a number from -100 to 100", key);
      job->bias[k] = (HnLogitBias) { (int32_t) id, (float) hn_json_get_double(v) };
    }
    job->sampler.logit_bias = job->bias;
    job->sampler.n_logit_bias = nb;
  }

  HnError err = { 0 };
  if (!hn_sampler_params_validate(&job->sampler, hn_vocab_n_tokens(self->vocab), &err))
    return refuse(r, NULL, "%s", err.message);
  return TRUE;
}

/* response_format (json_object, json_schema) or the extension "grammar" (GBNF); CFG. */
static gboolean
parse_constraints(Job *job, const HnJson *body, Refusal *r)
{
  const HnJson *format = hn_json_object_get(body, "response_format");
  const HnJson *grammar = hn_json_object_get(body, "grammar");
  if (grammar && !hn_json_is_null(grammar)) {
    if (!hn_json_is_string(grammar))
      return refuse(r, "grammar", "\"grammar\" must be a GBNF grammar as a string");
    job->gbnf = g_strdup(hn_json_get_string(grammar));
  }
  if (format && !hn_json_is_null(format)) {
    const HnJson *type = hn_json_object_get(format, "type");
    if (!hn_json_is_object(format) || !hn_json_is_string(type))
      return refuse(r, "response_format", "\"response_format\" must be an object with a \"type\"");
    const char *t = hn_json_get_string(type);
    if (strcmp(t, "json_object") == 0) {
      job->json_schema = g_strdup("{\"type\":\"object\"}");
    } else if (strcmp(t, "json_schema") == 0) {
      const HnJson *spec = hn_json_object_get(format, "json_schema");
      const HnJson *schema = hn_json_object_get(spec, "schema");
      if (!hn_json_is_object(spec) || !hn_json_is_object(schema))
        return refuse(r, "response_format", "response_format json_schema needs \"json_schema\": {\"schema\": {...}}");
      char *text = hn_json_write(schema, &HN_JSON_WRITE_COMPACT, NULL);
      job->json_schema = g_strdup(text);
      free(text);
    } else if (strcmp(t, "text") != 0) {
      return refuse(r, "response_format", "response_format type '%s' is not supported (text, json_object, json_schema)", t);
    }
    if (job->json_schema && job->gbnf)
      return refuse(r, "grammar", "give either \"grammar\" or a JSON \"response_format\", not both");
  }

  job->cfg_scale = 1.0f;
  const HnJson *negative = hn_json_object_get(body, "cfg_negative_prompt");
  if (negative && !hn_json_is_null(negative)) {
    if (!hn_json_is_string(negative))
      return refuse(r, "cfg_negative_prompt", "\"cfg_negative_prompt\" must be a string");
    job->cfg_negative = g_strdup(hn_json_get_string(negative));
  }
  gboolean present = FALSE;
  double scale = 1;
  if (!number_field(body, "cfg_scale", &present, &scale, r))
    return FALSE;
  if (present && (!isfinite(scale) || scale < 0 || scale > 100))
    return refuse(r, "cfg_scale", "\"cfg_scale\" must be a number from 0 to 100 (1 = off)");
  job->cfg_scale = (float) scale;
  if (job->kind == JOB_COMPLETION && job->cfg_negative && job->cfg_scale != 1.0f &&
      !tokenize_text(job->server->vocab, job->cfg_negative, strlen(job->cfg_negative), &job->negative_tokens,
                     &job->n_negative_tokens, r, "cfg_negative_prompt"))
    return FALSE;
  return TRUE;
}

static Job *
job_new(HanashiServer *self, JobKind kind)
{
  Job *job = g_new0(Job, 1);
  job->ref_count = 1;
  job->server = self;
  job->kind = kind;
  pthread_mutex_init(&job->lock, NULL);
  job->pieces = g_ptr_array_new_with_free_func((GDestroyNotify) g_bytes_unref);
  job->created = g_get_real_time() / G_USEC_PER_SEC;
  job->id = g_strdup_printf("%s-%" G_GUINT64_FORMAT, kind == JOB_CHAT ? "chatcmpl" : "cmpl", ++self->next_id);
  return job;
}

static Job *
parse_request(HanashiServer *self, JobKind kind, const char *text, gsize len, Refusal *r)
{
  HnError err = { 0 };
  HnJson *body = hn_json_parse_ex(text, len, 64, &err);
  if (!body) {
    refuse(r, NULL, "the request body is not valid JSON: %s", err.message);
    return NULL;
  }
  Job *job = job_new(self, kind);
  gboolean ok = hn_json_is_object(body) || refuse(r, NULL, "the request body must be a JSON object");
  if (ok) {
    const HnJson *stream = hn_json_object_get(body, "stream");
    if (stream && !hn_json_is_null(stream) && !hn_json_is_bool(stream))
      ok = refuse(r, "stream", "\"stream\" must be true or false");
    job->stream = hn_json_get_bool(stream);
    job->include_usage = hn_json_get_bool(hn_json_object_get(hn_json_object_get(body, "stream_options"), "include_usage"));
  }
  if (ok)
    ok = kind == JOB_CHAT ? parse_messages(job, hn_json_object_get(body, "messages"), r)
                          : parse_prompt(job, hn_json_object_get(body, "prompt"), r);
  ok = ok && parse_sampler(job, body, r) && parse_constraints(job, body, r);
  hn_json_free(body);
  if (!ok) {
    job_unref(job);
    return NULL;
  }
  return job;
}

/* ---- writing the reply ------------------------------------------------------------------- */

static const char *
finish_reason(HnGenStopReason reason)
{
  switch (reason) {
  case HN_GEN_STOP_MAX_TOKENS:
  case HN_GEN_STOP_CONTEXT_FULL:
    return "length";
  default:
    return "stop";
  }
}

static HnJson *
usage_json(const HnChatStats *stats)
{
  HnJson *usage = hn_json_new_object();
  hn_json_object_set(usage, "prompt_tokens", hn_json_new_int((int64_t) stats->n_prompt));
  hn_json_object_set(usage, "completion_tokens", hn_json_new_int((int64_t) stats->n_generated));
  hn_json_object_set(usage, "total_tokens", hn_json_new_int((int64_t) (stats->n_prompt + stats->n_generated)));
  /* OpenAI's name for the prompt tokens whose KV cells were reused */
  HnJson *details = hn_json_new_object();
  hn_json_object_set(details, "cached_tokens", hn_json_new_int((int64_t) stats->n_reused));
  hn_json_object_set(usage, "prompt_tokens_details", details);
  return usage;
}

/* The envelope every response and chunk shares: id, object, created, model. */
static HnJson *
envelope(Job *job, const char *object)
{
  HnJson *root = hn_json_new_object();
  hn_json_object_set(root, "id", hn_json_new_string(job->id));
  hn_json_object_set(root, "object", hn_json_new_string(object));
  hn_json_object_set(root, "created", hn_json_new_int(job->created));
  hn_json_object_set(root, "model", hn_json_new_string(job->server->model_id));
  return root;
}

/* One streamed event: a delta (chat) or a piece of text (completion); finish = NULL while
 * the reply goes on. */
static HnJson *
chunk_json(Job *job, const char *text, gsize len, gboolean role, const char *finish)
{
  gboolean chat = job->kind == JOB_CHAT;
  HnJson *root = envelope(job, chat ? "chat.completion.chunk" : "text_completion");
  HnJson *choice = hn_json_new_object();
  hn_json_object_set(choice, "index", hn_json_new_int(0));
  if (chat) {
    HnJson *delta = hn_json_new_object();
    if (role)
      hn_json_object_set(delta, "role", hn_json_new_string("assistant"));
    if (text)
      hn_json_object_set(delta, "content", hn_json_new_string_len(text, len));
    hn_json_object_set(choice, "delta", delta);
  } else {
    hn_json_object_set(choice, "text", hn_json_new_string_len(text ? text : "", text ? len : 0));
    hn_json_object_set(choice, "logprobs", hn_json_new_null());
  }
  hn_json_object_set(choice, "finish_reason", finish ? hn_json_new_string(finish) : hn_json_new_null());
  HnJson *choices = hn_json_new_array();
  hn_json_array_append(choices, choice);
  hn_json_object_set(root, "choices", choices);
  return root;
}

static void
append_event_text(SoupMessageBody *body, const char *data, gsize len)
{
  GString *event = g_string_sized_new(len + 8);
  g_string_append(event, "data: ");
  g_string_append_len(event, data, (gssize) len);
  g_string_append(event, "\n\n");
  gsize event_len = event->len;
  soup_message_body_append(body, SOUP_MEMORY_TAKE, g_string_free(event, FALSE), event_len);
}

static void
append_event(SoupMessageBody *body, HnJson *json)
{
  size_t len = 0;
  char *text = hn_json_write(json, &HN_JSON_WRITE_COMPACT, &len);
  hn_json_free(json);
  if (text)
    append_event_text(body, text, len);
  free(text);
}

static guint
error_status(HnStatus code)
{
  switch (code) {
  case HN_ERR_INVALID_ARG:
  case HN_ERR_GRAMMAR:
  case HN_ERR_TOO_LONG:
  case HN_ERR_LIMIT:
  case HN_ERR_FORMAT:
  case HN_ERR_TEMPLATE:
  case HN_ERR_UNSUPPORTED:
    return SOUP_STATUS_BAD_REQUEST;
  default:
    return SOUP_STATUS_INTERNAL_SERVER_ERROR;
  }
}

static const char *
error_code_name(HnStatus code)
{
  return code == HN_ERR_TOO_LONG ? "context_length_exceeded" : NULL;
}

static void
start_stream(Job *job)
{
  SoupServerMessage *msg = job->msg;
  SoupMessageHeaders *headers = soup_server_message_get_response_headers(msg);
  soup_server_message_set_status(msg, SOUP_STATUS_OK, NULL);
  soup_message_headers_set_content_type(headers, "text/event-stream", NULL);
  soup_message_headers_replace(headers, "Cache-Control", "no-cache");
  soup_message_headers_set_encoding(headers, SOUP_ENCODING_CHUNKED);
  SoupMessageBody *body = soup_server_message_get_response_body(msg);
  soup_message_body_set_accumulate(body, FALSE);
  if (job->kind == JOB_CHAT)
    append_event(body, chunk_json(job, "", 0, TRUE, NULL));
  job->started = TRUE;
}

/* The whole non-streaming reply. */
static void
write_complete(Job *job, GPtrArray *pieces)
{
  GString *text = g_string_new(NULL);
  for (guint i = 0; i < pieces->len; i++) {
    gsize len = 0;
    const char *piece = g_bytes_get_data(g_ptr_array_index(pieces, i), &len);
    g_string_append_len(text, piece, (gssize) len);
  }
  gboolean chat = job->kind == JOB_CHAT;
  HnJson *root = envelope(job, chat ? "chat.completion" : "text_completion");
  HnJson *choice = hn_json_new_object();
  hn_json_object_set(choice, "index", hn_json_new_int(0));
  if (chat) {
    HnJson *message = hn_json_new_object();
    hn_json_object_set(message, "role", hn_json_new_string("assistant"));
    hn_json_object_set(message, "content", hn_json_new_string_len(text->str, text->len));
    hn_json_object_set(choice, "message", message);
  } else {
    hn_json_object_set(choice, "text", hn_json_new_string_len(text->str, text->len));
    hn_json_object_set(choice, "logprobs", hn_json_new_null());
  }
  hn_json_object_set(choice, "finish_reason", hn_json_new_string(finish_reason(job->stats.stop_reason)));
  HnJson *choices = hn_json_new_array();
  hn_json_array_append(choices, choice);
  hn_json_object_set(root, "choices", choices);
  hn_json_object_set(root, "usage", usage_json(&job->stats));
  g_string_free(text, TRUE);
  set_json_response(job->msg, SOUP_STATUS_OK, root);
}

static void dispatch(HanashiServer *self);

/* Main context: moves what the worker produced into the response. */
static gboolean
job_flush(gpointer data)
{
  Job *job = data;
  HanashiServer *self = job->server;
  /* pairs with the release in schedule_flush_locked (the source crossed threads) */
  hanashi_tsan_acquire(g_main_current_source());
  pthread_mutex_lock(&job->lock);
  job->flush_scheduled = FALSE;
  GPtrArray *pieces = job->pieces;
  gboolean done = job->done;
  if (job->stream || done)
    job->pieces = g_ptr_array_new_with_free_func((GDestroyNotify) g_bytes_unref);
  else
    pieces = NULL; /* non-streaming: keep collecting */
  pthread_mutex_unlock(&job->lock);

  if (job->msg && !self->stopping) {
    SoupMessageBody *body = soup_server_message_get_response_body(job->msg);
    if (done && job->failed && !job->started) {
      send_error(job->msg, error_status(job->error_code), NULL, error_code_name(job->error_code), "%s",
                 job->error_message);
    } else if (job->stream) {
      if (!job->started)
        start_stream(job);
      for (guint i = 0; pieces && i < pieces->len; i++) {
        gsize len = 0;
        const char *piece = g_bytes_get_data(g_ptr_array_index(pieces, i), &len);
        append_event(body, chunk_json(job, piece, len, FALSE, NULL));
      }
      if (done) {
        if (job->failed) {
          append_event(body, error_json(job->error_message, "server_error", NULL, NULL));
        } else {
          HnJson *last = chunk_json(job, job->kind == JOB_CHAT ? NULL : "", 0, FALSE,
                                    finish_reason(job->stats.stop_reason));
          append_event(body, last);
          if (job->include_usage) {
            HnJson *usage = envelope(job, job->kind == JOB_CHAT ? "chat.completion.chunk" : "text_completion");
            hn_json_object_set(usage, "choices", hn_json_new_array());
            hn_json_object_set(usage, "usage", usage_json(&job->stats));
            append_event(body, usage);
          }
        }
        append_event_text(body, "[DONE]", 6);
        soup_message_body_complete(body);
      }
    } else if (done) {
      write_complete(job, pieces);
    }
    if (job->msg && (job->stream || done))
      soup_server_message_unpause(job->msg);
  }
  if (pieces)
    g_ptr_array_unref(pieces);

  if (done && job->slot) {
    Slot *slot = job->slot;
    job->slot = NULL;
    self->n_finished++;
    if (job->stats.stop_reason == HN_GEN_STOP_CANCELLED)
      self->n_cancelled++;
    slot->job = NULL;
    g_free(slot->prefix_key);
    slot->prefix_key = g_strdup(job->prefix_key);
    if (job->msg)
      job_release_message(job);
    job_unref(job); /* the slot's reference */
    if (!self->stopping)
      dispatch(self);
  }
  return G_SOURCE_REMOVE;
}

/* Worker: asks the main context to flush (once until it has). Called with the lock held. */
static void
schedule_flush_locked(Job *job)
{
  if (job->flush_scheduled)
    return;
  job->flush_scheduled = TRUE;
  GSource *source = g_idle_source_new();
  g_source_set_priority(source, G_PRIORITY_DEFAULT);
  g_source_set_callback(source, job_flush, job_ref(job), (GDestroyNotify) job_unref);
  /* pairs with the acquire in job_flush; attaching allocates the context's bookkeeping,
   * which the main thread frees, ordered only by GLib's own mutex (hanashi-tsan.h) */
  hanashi_tsan_release(source);
  hanashi_tsan_ignore_writes_begin();
  g_source_attach(source, job->server->context);
  hanashi_tsan_ignore_writes_end();
  g_source_unref(source);
}

/* ---- the worker ------------------------------------------------------------------------- */

static bool
on_text(void *user_data, const char *text, size_t len, int32_t token)
{
  Job *job = user_data;
  (void) token;
  if (len == 0)
    return true;
  pthread_mutex_lock(&job->lock);
  g_ptr_array_add(job->pieces, g_bytes_new(text, len));
  if (job->stream)
    schedule_flush_locked(job);
  pthread_mutex_unlock(&job->lock);
  return true;
}

static bool
is_cancelled(void *user_data)
{
  Job *job = user_data;
  return g_atomic_int_get(&job->cancelled) != 0;
}

/* Decode thread: what a job asks, as a request of the conversation core (pointing into the
 * job, which outlives its sequence). */
static void
job_request(Job *job, HnChatRequest *req)
{
  hn_chat_request_init(req);
  if (job->kind == JOB_CHAT) {
    req->system = job->system;
    req->messages = job->messages;
    req->n_messages = job->n_messages;
  } else {
    req->prompt_tokens = job->prompt_tokens;
    req->n_prompt_tokens = job->n_prompt_tokens;
    req->negative_tokens = job->negative_tokens;
    req->n_negative_tokens = job->n_negative_tokens;
  }
  req->sampler = &job->sampler;
  req->json_schema = job->json_schema;
  req->gbnf = job->gbnf;
  req->cfg_negative = job->cfg_negative;
  req->cfg_scale = job->cfg_scale;
  /* one name for every request: each sequence keeps the longest common prefix of its cells */
  req->conversation = "server";
}

/* Decode thread: the job's generation ended (ok, or err says why). */
static void
job_done(Job *job, gboolean ok, const HnChatStats *stats, const HnError *err)
{
  pthread_mutex_lock(&job->lock);
  job->stats = *stats;
  job->done = TRUE;
  if (!ok) {
    job->failed = TRUE;
    job->error_code = err->code;
    job->error_message = g_strdup(err->message[0] ? err->message : "the generation failed");
  }
  schedule_flush_locked(job);
  pthread_mutex_unlock(&job->lock);
}

/* Decode thread: starts a job on its sequence; one the core refuses ends at once. */
static void
decoder_start(HanashiServer *self, Job *job, Job **running, HnChatRequest *requests, HnChatCallbacks *callbacks)
{
  guint seq = job->seq;
  job_request(job, &requests[seq]);
  callbacks[seq] = (HnChatCallbacks) { .on_text = on_text, .is_cancelled = is_cancelled, .user_data = job };
  HnError err = { 0 };
  if (!hn_chat_batch_start(self->batch, (int) seq, &requests[seq], &callbacks[seq], &err)) {
    HnChatStats stats;
    memset(&stats, 0, sizeof stats);
    stats.stop_string_index = -1;
    job_done(job, FALSE, &stats, &err);
    job_unref(job); /* the decode thread's reference */
    return;
  }
  running[seq] = job;
}

static gpointer
decoder_thread(gpointer data)
{
  HanashiServer *self = data;
  Job *running[HANASHI_SERVER_MAX_PARALLEL] = { NULL };
  HnChatRequest requests[HANASHI_SERVER_MAX_PARALLEL];
  HnChatCallbacks callbacks[HANASHI_SERVER_MAX_PARALLEL];
  gboolean stop = FALSE;
  for (;;) {
    /* new jobs join between passes; with nothing to do, wait for one */
    for (;;) {
      gboolean idle = hn_chat_batch_n_running(self->batch) == 0;
      if (idle && stop)
        return NULL;
      /* the pop frees the list node the pushing thread allocated (hanashi-tsan.h) */
      hanashi_tsan_ignore_writes_begin();
      gpointer item = idle ? g_async_queue_pop(self->jobs) : g_async_queue_try_pop(self->jobs);
      hanashi_tsan_ignore_writes_end();
      if (!item)
        break;
      /* pairs with the release in push_job: the job was written by the main thread */
      hanashi_tsan_acquire(self->jobs);
      if (item == self)
        stop = TRUE;
      else
        decoder_start(self, item, running, requests, callbacks);
    }
    HnError err = { 0 };
    hn_chat_batch_step(self->batch, &err); /* a failed pass ends its sequences, reported below */
    for (guint i = 0; i < self->n_slots; i++) {
      if (!running[i])
        continue;
      bool finished = false;
      HnChatStats stats;
      HnError job_err = { 0 };
      bool ok = hn_chat_batch_take_result(self->batch, (int) i, &finished, &stats, &job_err);
      if (!finished)
        continue;
      job_done(running[i], ok, &stats, &job_err);
      g_clear_pointer(&running[i], job_unref); /* the decode thread's reference */
    }
  }
}

/* ---- scheduling (main context) ----------------------------------------------------------- */

static gsize
common_prefix(const char *a, const char *b)
{
  gsize n = 0;
  if (!a || !b)
    return 0;
  while (a[n] && a[n] == b[n])
    n++;
  return n;
}

/* The idle slot whose last conversation shares the longest prefix with the job's (so its
 * KV cells are reused), the first idle one on a tie; NULL when every slot is busy. */
static Slot *
choose_slot(HanashiServer *self, Job *job)
{
  Slot *best = NULL;
  gsize best_len = 0;
  for (guint i = 0; i < self->n_slots; i++) {
    Slot *slot = &self->slots[i];
    if (slot->job)
      continue;
    gsize len = common_prefix(slot->prefix_key, job->prefix_key);
    if (!best || len > best_len) {
      best = slot;
      best_len = len;
    }
  }
  return best;
}

/* The release is inside the queue's lock, so the decode thread cannot pop (and acquire)
 * first. */
static void
push_job(HanashiServer *self, gpointer item)
{
  g_async_queue_lock(self->jobs);
  g_async_queue_push_unlocked(self->jobs, item);
  hanashi_tsan_release(self->jobs);
  g_async_queue_unlock(self->jobs);
}

static void
start_job(Slot *slot, Job *job)
{
  slot->job = job_ref(job);
  job->slot = slot;
  job->seq = slot->index;
  push_job(slot->server, job_ref(job));
}

/* Hands waiting jobs to idle slots, first come first served. */
static void
dispatch(HanashiServer *self)
{
  while (!g_queue_is_empty(&self->waiting)) {
    Job *job = g_queue_peek_head(&self->waiting);
    if (!job->msg) { /* its client left while it waited */
      g_queue_pop_head(&self->waiting);
      job_unref(job);
      continue;
    }
    Slot *slot = choose_slot(self, job);
    if (!slot)
      return;
    g_queue_pop_head(&self->waiting);
    start_job(slot, job);
    job_unref(job); /* the queue's reference */
  }
}

/* libsoup is done with the message: the reply went out, or the client went away. */
static void
on_message_finished(SoupServerMessage *msg, gpointer data)
{
  Job *job = data;
  g_atomic_int_set(&job->cancelled, 1);
  job_release_message(job);
}

/* ---- HTTP handlers ---------------------------------------------------------------------- */

static gboolean
constant_time_equal(const char *a, const char *b)
{
  gsize la = strlen(a), lb = strlen(b);
  guint diff = (guint) (la ^ lb);
  /* every byte of the expected key is looked at whatever the input */
  for (gsize i = 0; i < lb; i++)
    diff |= (guchar) b[i] ^ (guchar) (i < la ? a[i] : 0);
  return diff == 0;
}

static gboolean
authorized(HanashiServer *self, SoupServerMessage *msg)
{
  if (!self->api_key)
    return TRUE;
  const char *header = soup_message_headers_get_one(soup_server_message_get_request_headers(msg), "Authorization");
  if (header && g_ascii_strncasecmp(header, "Bearer ", 7) == 0 && constant_time_equal(header + 7, self->api_key))
    return TRUE;
  soup_message_headers_replace(soup_server_message_get_response_headers(msg), "WWW-Authenticate", "Bearer");
  send_error(msg, SOUP_STATUS_UNAUTHORIZED, NULL, "invalid_api_key",
             header ? "the API key is not valid" : "an API key is needed: send \"Authorization: Bearer KEY\"");
  return FALSE;
}

static void
handle_completion(HanashiServer *self, SoupServerMessage *msg, JobKind kind)
{
  SoupMessageBody *request = soup_server_message_get_request_body(msg);
  if (request->length > (goffset) self->options.max_body_bytes) {
    send_error(msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, NULL, "request_too_large",
               "the request body is larger than %zu bytes", (size_t) self->options.max_body_bytes);
    return;
  }
  g_autoptr(GBytes) bytes = soup_message_body_flatten(request);
  gsize len = 0;
  const char *text = g_bytes_get_data(bytes, &len);
  Refusal r = { 0 };
  Job *job = parse_request(self, kind, text ? text : "", len, &r);
  if (!job) {
    send_error(msg, r.status, r.param, r.code, "%s", r.message);
    g_free(r.message);
    return;
  }
  Slot *slot = choose_slot(self, job);
  if (!slot && g_queue_get_length(&self->waiting) >= self->options.max_queue) {
    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Retry-After", "1");
    send_error(msg, SOUP_STATUS_SERVICE_UNAVAILABLE, NULL, "server_busy",
               "every slot is busy and %u requests are waiting: try again shortly", self->options.max_queue);
    job_unref(job);
    return;
  }
  job->msg = g_object_ref(msg);
  job->finished_handler = g_signal_connect(msg, "finished", G_CALLBACK(on_message_finished), job);
  soup_server_message_pause(msg);
  if (slot) {
    start_job(slot, job);
    job_unref(job);
  } else {
    g_queue_push_tail(&self->waiting, job);
  }
}

static void
handle_models(HanashiServer *self, SoupServerMessage *msg)
{
  HnJson *model = hn_json_new_object();
  hn_json_object_set(model, "id", hn_json_new_string(self->model_id));
  hn_json_object_set(model, "object", hn_json_new_string("model"));
  hn_json_object_set(model, "created", hn_json_new_int(0));
  hn_json_object_set(model, "owned_by", hn_json_new_string("hanashi"));
  HnJson *data = hn_json_new_array();
  hn_json_array_append(data, model);
  HnJson *root = hn_json_new_object();
  hn_json_object_set(root, "object", hn_json_new_string("list"));
  hn_json_object_set(root, "data", data);
  set_json_response(msg, SOUP_STATUS_OK, root);
}

static void
handle_health(HanashiServer *self, SoupServerMessage *msg)
{
  guint idle = 0;
  for (guint i = 0; i < self->n_slots; i++)
    idle += self->slots[i].job == NULL;
  HnJson *root = hn_json_new_object();
  hn_json_object_set(root, "status", hn_json_new_string("ok"));
  hn_json_object_set(root, "slots_idle", hn_json_new_int(idle));
  hn_json_object_set(root, "slots_total", hn_json_new_int(self->n_slots));
  hn_json_object_set(root, "requests_waiting", hn_json_new_int(g_queue_get_length(&self->waiting)));
  hn_json_object_set(root, "generations_finished", hn_json_new_int((int64_t) self->n_finished));
  hn_json_object_set(root, "generations_cancelled", hn_json_new_int((int64_t) self->n_cancelled));
  set_json_response(msg, SOUP_STATUS_OK, root);
}

static void
handle_request(SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
  HanashiServer *self = data;
  const char *method = soup_server_message_get_method(msg);
  gboolean get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
  struct {
    const char *path;
    gboolean post;
  } routes[] = { { "/health", FALSE }, { "/v1/models", FALSE }, { "/v1/chat/completions", TRUE },
                 { "/v1/completions", TRUE } };
  int route = -1;
  for (guint i = 0; i < G_N_ELEMENTS(routes); i++)
    if (strcmp(path, routes[i].path) == 0)
      route = (int) i;
  if (route < 0) {
    send_error(msg, SOUP_STATUS_NOT_FOUND, NULL, "not_found", "there is no %s here", path);
    return;
  }
  if ((routes[route].post && !post) || (!routes[route].post && !get)) {
    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Allow",
                                 routes[route].post ? "POST" : "GET");
    send_error(msg, SOUP_STATUS_METHOD_NOT_ALLOWED, NULL, NULL, "%s takes %s", path,
               routes[route].post ? "POST" : "GET");
    return;
  }
  if (route == 0) {
    handle_health(self, msg); /* for load balancers: no key needed */
    return;
  }
  if (!authorized(self, msg))
    return;
  switch (route) {
  case 1: handle_models(self, msg); break;
  case 2: handle_completion(self, msg, JOB_CHAT); break;
  default: handle_completion(self, msg, JOB_COMPLETION); break;
  }
}

/* A body announced larger than the limit is refused before it is read; the connection is
 * closed after the answer since the rest of the body is never read. */
static void
on_got_headers(SoupServerMessage *msg, gpointer data)
{
  HanashiServer *self = data;
  if (g_object_get_data(G_OBJECT(msg), "hanashi-over-limit")) {
    SoupMessageHeaders *response = soup_server_message_get_response_headers(msg);
    soup_message_headers_replace(response, "Connection", "close");
    soup_message_headers_replace(response, "Retry-After", "1");
    send_error(msg, SOUP_STATUS_SERVICE_UNAVAILABLE, NULL, "server_busy",
               "%u connections are open, the most this server takes: try again shortly",
               self->options.max_connections);
    return;
  }
  SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
  goffset length = soup_message_headers_get_content_length(headers);
  if (soup_message_headers_get_encoding(headers) == SOUP_ENCODING_CONTENT_LENGTH &&
      length > (goffset) self->options.max_body_bytes) {
    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Connection", "close");
    send_error(msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, NULL, "request_too_large",
               "the request body is larger than %zu bytes", (size_t) self->options.max_body_bytes);
  }
}

static void
on_got_chunk(SoupServerMessage *msg, GBytes *chunk, gpointer data)
{
  HanashiServer *self = data;
  /* a chunked body is counted as it arrives; once over the limit it is not kept */
  SoupMessageBody *body = soup_server_message_get_request_body(msg);
  if (body->length > (goffset) self->options.max_body_bytes)
    soup_message_body_set_accumulate(body, FALSE);
}

static void forget_closed_connections(HanashiServer *self);

static void
on_request_started(SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
  HanashiServer *self = data;
  GSocket *socket = soup_server_message_get_socket(msg);
  if (socket && !g_hash_table_contains(self->connections, socket)) {
    forget_closed_connections(self);
    if (g_hash_table_size(self->connections) >= self->options.max_connections)
      g_object_set_data(G_OBJECT(msg), "hanashi-over-limit", GINT_TO_POINTER(1));
    else
      g_hash_table_add(self->connections, g_object_ref(socket));
  }
  g_signal_connect(msg, "got-headers", G_CALLBACK(on_got_headers), data);
  g_signal_connect(msg, "got-chunk", G_CALLBACK(on_got_chunk), data);
}

/* ---- connections ------------------------------------------------------------------------ */

/* Connections are counted by their socket from the first request on it (request-started);
 * the table holds a reference to each and forgets the ones libsoup has closed whenever a
 * new connection is counted.  A request on a connection over the limit is answered 503
 * and the connection closed (see on_got_headers). */
/* Closed by libsoup, or by the peer: an idle connection whose client hung up reads as
 * the end of the stream, which a peek sees without taking anything from libsoup. */
static gboolean
connection_closed(GSocket *socket)
{
  if (g_socket_is_closed(socket) || (g_socket_condition_check(socket, G_IO_HUP | G_IO_ERR) != 0))
    return TRUE;
  if (!(g_socket_condition_check(socket, G_IO_IN) & G_IO_IN))
    return FALSE;
  char byte;
  ssize_t n = recv(g_socket_get_fd(socket), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0;
}

static void
forget_closed_connections(HanashiServer *self)
{
  GHashTableIter iter;
  gpointer socket;
  g_hash_table_iter_init(&iter, self->connections);
  while (g_hash_table_iter_next(&iter, &socket, NULL))
    if (connection_closed(socket))
      g_hash_table_iter_remove(&iter);
}

/* ---- life cycle ------------------------------------------------------------------------- */

HanashiServer *
hanashi_server_new(const HnModel *model, const HnVocab *vocab, const HanashiServerOptions *options, GError **error)
{
  g_return_val_if_fail(model && vocab && options, NULL);
  HanashiServer *self = g_object_new(HANASHI_TYPE_SERVER, NULL);
  self->options = *options;
  self->options.n_parallel = CLAMP(options->n_parallel, 1, HANASHI_SERVER_MAX_PARALLEL);
  self->options.max_tokens = MAX(options->max_tokens, 1);
  self->options.max_connections = MAX(options->max_connections, 1);
  self->model_id = g_strdup(options->model_id && *options->model_id ? options->model_id : "hanashi");
  self->api_key = options->api_key && *options->api_key ? g_strdup(options->api_key) : NULL;
  self->options.model_id = self->model_id;
  self->options.api_key = self->api_key;
  self->model = model;
  self->vocab = vocab;
  self->context = g_main_context_ref_thread_default();

  HnError err = { 0 };
  /* the grammar view is built now, so that the slots share the chat model read-only */
  if (!(self->chat_model = hn_chat_model_new(model, vocab, &err)) ||
      !hn_chat_model_grammar_vocab(self->chat_model, &err)) {
    g_set_error(error, HANASHI_SERVER_ERROR, HANASHI_SERVER_ERROR_FAILED, "%s", err.message);
    g_object_unref(self);
    return NULL;
  }
  self->n_slots = self->options.n_parallel;
  self->slots = g_new0(Slot, self->n_slots);
  for (guint i = 0; i < self->n_slots; i++) {
    self->slots[i].server = self;
    self->slots[i].index = i;
  }
  /* one context for every slot (a sequence each, n_ctx positions each) and all the
   * threads working inside each pass */
  HnContextParams cp = hn_context_default_params();
  cp.n_ctx = options->n_ctx;
  cp.n_threads = options->n_threads > 0 ? options->n_threads : hn_physical_cores();
  if (!(self->batch = hn_chat_batch_new(self->chat_model, &cp, (int) self->n_slots, &err))) {
    g_set_error(error, HANASHI_SERVER_ERROR, HANASHI_SERVER_ERROR_FAILED, "%s", err.message);
    g_object_unref(self);
    return NULL;
  }
  self->jobs = g_async_queue_new();
  self->decoder = g_thread_new("hanashi-decode", decoder_thread, self);

  self->soup = soup_server_new("server-header", "hanashi", NULL);
  soup_server_add_handler(self->soup, NULL, handle_request, self, NULL);
  g_signal_connect(self->soup, "request-started", G_CALLBACK(on_request_started), self);
  return self;
}

HanashiServer *
hanashi_server_new_for_loan(HanashiModelLoan *loan, const HanashiServerOptions *options, GError **error)
{
  g_return_val_if_fail(loan && options, NULL);
  HanashiServerOptions lent = *options;
  if (lent.n_ctx <= 0)
    lent.n_ctx = (int) MIN(hanashi_model_loan_get_n_ctx(loan), (guint) G_MAXINT);
  HanashiServer *self =
    hanashi_server_new(hanashi_model_loan_get_model(loan), hanashi_model_loan_get_vocab(loan), &lent, error);
  if (self)
    self->loan = hanashi_model_loan_ref(loan); /* let go of in finalize, after the slots */
  return self;
}

guint
hanashi_server_listen(HanashiServer *self, const char *host, guint port, GError **error)
{
  g_return_val_if_fail(HANASHI_IS_SERVER(self), 0);
  g_autoptr(GInetAddress) address = NULL;
  if (!host || strcmp(host, "localhost") == 0)
    address = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
  else
    address = g_inet_address_new_from_string(host);
  if (!address) {
    g_set_error(error, HANASHI_SERVER_ERROR, HANASHI_SERVER_ERROR_ADDRESS,
                "'%s' is not an IP address (use 127.0.0.1, ::1, 0.0.0.0 or an address of this machine)", host);
    return 0;
  }
  g_autoptr(GSocketAddress) wanted = g_inet_socket_address_new(address, (guint16) port);
  if (!soup_server_listen(self->soup, wanted, 0, error))
    return 0;
  /* the last listener is the one just added: its port (the one chosen for port 0) */
  GSList *listeners = soup_server_get_listeners(self->soup);
  guint bound = 0;
  GSList *last = g_slist_last(listeners);
  if (last) {
    g_autoptr(GSocketAddress) local = g_socket_get_local_address(last->data, error);
    if (local)
      bound = g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(local));
  }
  g_slist_free(listeners);
  return bound;
}

void
hanashi_server_stop(HanashiServer *self)
{
  g_return_if_fail(HANASHI_IS_SERVER(self));
  if (self->soup)
    soup_server_disconnect(self->soup);
  self->stopping = TRUE;
  for (guint i = 0; i < self->n_slots; i++)
    if (self->slots[i].job)
      g_atomic_int_set(&self->slots[i].job->cancelled, 1);
}

static void
hanashi_server_dispose(GObject *object)
{
  HanashiServer *self = HANASHI_SERVER(object);
  if (!self->stopping)
    hanashi_server_stop(self);
  /* the decode thread finishes its jobs (cancelled) and stops */
  if (self->decoder) {
    push_job(self, self);
    g_thread_join(self->decoder);
    self->decoder = NULL;
  }
  /* their last flushes are still in the main context: run them (they write nothing now) */
  while (self->context && g_main_context_pending(self->context))
    g_main_context_iteration(self->context, FALSE);
  for (guint i = 0; i < self->n_slots; i++) {
    Slot *slot = &self->slots[i];
    if (slot->job) { /* its flush never ran (another thread's context): let go here */
      slot->job->slot = NULL;
      job_release_message(slot->job);
      g_clear_pointer(&slot->job, job_unref);
    }
  }
  Job *job;
  while ((job = g_queue_pop_head(&self->waiting))) {
    job_release_message(job);
    job_unref(job);
  }
  if (self->soup) {
    soup_server_disconnect(self->soup);
    g_signal_handlers_disconnect_by_data(self->soup, self);
    g_clear_object(&self->soup);
  }
  G_OBJECT_CLASS(hanashi_server_parent_class)->dispose(object);
}

static void
hanashi_server_finalize(GObject *object)
{
  HanashiServer *self = HANASHI_SERVER(object);
  for (guint i = 0; i < self->n_slots; i++)
    g_free(self->slots[i].prefix_key);
  hn_chat_batch_free(self->batch);
  g_clear_pointer(&self->jobs, g_async_queue_unref);
  g_free(self->slots);
  hn_chat_model_free(self->chat_model);
  g_clear_pointer(&self->loan, hanashi_model_loan_unref);
  g_free(self->model_id);
  g_free(self->api_key);
  g_clear_pointer(&self->connections, g_hash_table_unref);
  g_clear_pointer(&self->context, g_main_context_unref);
  G_OBJECT_CLASS(hanashi_server_parent_class)->finalize(object);
}

static void
hanashi_server_class_init(HanashiServerClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS(klass);
  object_class->dispose = hanashi_server_dispose;
  object_class->finalize = hanashi_server_finalize;
}

static void
hanashi_server_init(HanashiServer *self)
{
  g_queue_init(&self->waiting);
  self->connections = g_hash_table_new_full(NULL, NULL, g_object_unref, NULL);
}
