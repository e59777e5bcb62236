/* hanashi-engine-model-backend.c: the real backend of the engine thread, over the GLib-free
 * engine (hn-model, hn-context, hn-generate, hn-chat-template, hn-vocab, hn-grammar).
 *
 * Everything here runs on the engine thread.  Besides the model, a loaded backend keeps the
 * tokens whose keys and values sit in sequence 0 of the KV cache (positions 0..n-1), so the
 * next request of a conversation evaluates only the tail that differs; sequence 1 holds the
 * CFG negative prompt while a guided generation runs and is emptied afterwards.
 */
#include "hanashi-engine-backend.h"

#include <errno.h>
#include <string.h>

#include "hn-chat-template.h"
#include "hn-context.h"
#include "hn-generate-model.h"
#include "hn-json-schema.h"
#include "hn-json.h"
#include "hn-prompt-cache.h"
#include "hn-quants.h"

/* The context meter and the default context when the caller passes 0. */
#define DEFAULT_N_CTX 4096
/* A shifted run shorter than this is not worth the bookkeeping (and is likely chance). */
#define MIN_SHIFT_RUN 16

typedef struct {
  HnModel *model;
  HnVocab *vocab;
  HnContext *ctx;
  HnGenModelBackend gen;
  HnGrammarVocab *gvocab;        /* built on the first constrained request */
  HnChatTemplate *tmpl;          /* NULL: ChatML */
  char *tmpl_error;              /* why the model's own template could not be parsed */
  char *bos_text, *eos_text;
  int32_t newline_tokens[2];
  size_t n_newline_tokens;

  /* What sequence 0 of the KV cache holds, position by position. */
  GArray *cached;                /* int32 */
  char *cached_conversation;
} ModelBackend;

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
token_text_dup (const HnVocab *vocab, int32_t id)
{
  size_t len = 0;
  const char *text = id >= 0 ? hn_vocab_token_text (vocab, id, &len) : NULL;
  return text != NULL ? g_strndup (text, len) : NULL;
}

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
  hn_gen_model_backend_clear (&mb->gen);
  hn_grammar_vocab_free (mb->gvocab);
  hn_chat_template_free (mb->tmpl);
  hn_context_free (mb->ctx);
  hn_vocab_free (mb->vocab);
  hn_model_free (mb->model);
  g_free (mb->tmpl_error);
  g_free (mb->bos_text);
  g_free (mb->eos_text);
  if (mb->cached != NULL)
    g_array_unref (mb->cached);
  g_free (mb->cached_conversation);
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
  ModelBackend *mb = g_new0 (ModelBackend, 1);
  mb->cached = g_array_new (FALSE, FALSE, sizeof (int32_t));

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
  mb->ctx = hn_context_new (mb->model, &cp, &err);
  if (mb->ctx == NULL || !hn_gen_model_backend_init (&mb->gen, mb->ctx, mb->vocab, &err))
    {
      set_error_from_hn (error, &err, HANASHI_ENGINE_ERROR_OUT_OF_MEMORY, NULL);
      goto fail;
    }

  /* freed once the model info has taken what it needs from it */
  char *tsrc = gguf_string_dup (gguf, "tokenizer.chat_template");
  if (tsrc != NULL)
    {
      mb->tmpl = hn_chat_template_new (tsrc, strlen (tsrc), &err);
      if (mb->tmpl == NULL)
        mb->tmpl_error = g_strdup (err.message);
    }
  mb->bos_text = token_text_dup (mb->vocab, hn_vocab_bos (mb->vocab));
  mb->eos_text = token_text_dup (mb->vocab, hn_vocab_eos (mb->vocab));

  /* Newlines keep their logit through the repetition penalties (penalize_nl off). */
  int32_t nl[4];
  int32_t n = hn_tokenize (mb->vocab, "\n", 1, false, false, nl, 4, NULL);
  if (n == 1)
    mb->newline_tokens[mb->n_newline_tokens++] = nl[0];
  int32_t byte_nl = hn_vocab_find_token (mb->vocab, "<0x0A>");
  if (byte_nl >= 0 && (n != 1 || byte_nl != nl[0]))
    mb->newline_tokens[mb->n_newline_tokens++] = byte_nl;

  char *name = gguf_string_dup (gguf, "general.name");
  HanashiModelInfo *info = g_new0 (HanashiModelInfo, 1);
  info->name = name != NULL ? name : g_path_get_basename (path);
  info->arch = g_strdup (hn_model_arch (mb->model));
  info->weight_type = g_strdup (hn_type_name (hn_model_main_type (mb->model)));
  info->path = g_strdup (path);
  info->n_params = (guint64) hn_model_n_params (mb->model);
  info->file_size = hn_model_file_size (mb->model);
  info->n_ctx = (guint32) hn_context_n_ctx (mb->ctx);
  info->n_batch = (guint32) hn_context_n_batch (mb->ctx);
  if (hn_context_notice (mb->ctx) != NULL)
    sink->on_warning (sink->data, HANASHI_ENGINE_ERROR_CONTEXT_CLAMPED, hn_context_notice (mb->ctx));
  info->n_ctx_train = (guint32) hn_model_n_ctx_train (mb->model);
  info->n_vocab = (guint32) hn_model_n_vocab (mb->model);
  hanashi_engine_template_traits (mb->tmpl, tsrc, mb->bos_text, mb->eos_text, info);
  g_free (tsrc);
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

/* ---- prompts ---------------------------------------------------------------------------- */

/* One rendered and tokenized conversation. */
typedef struct {
  GArray *tokens;            /* int32 */
  char *fallback_reason;     /* why the model's template was not used (ChatML instead) */
} Prompt;

static void
prompt_clear (Prompt *p)
{
  if (p->tokens != NULL)
    g_array_unref (p->tokens);
  p->tokens = NULL;
  g_clear_pointer (&p->fallback_reason, g_free);
}

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

typedef struct {
  const char *role;
  const char *text;
} Msg;

/* The messages as the template sees them: the system prompt (or the CFG negative prompt in
 * its place), then req's messages from `first` on. */
static GArray *
collect_messages (HanashiGenerateRequest *req, const char *system, guint first)
{
  GArray *msgs = g_array_new (FALSE, FALSE, sizeof (Msg));
  if (system != NULL && *system != '\0')
    g_array_append_val (msgs, ((Msg) { "system", system }));
  guint n = hanashi_generate_request_get_n_messages (req);
  for (guint i = first; i < n; i++)
    g_array_append_val (msgs, ((Msg) { role_name (hanashi_generate_request_get_message_role (req, i)),
                                       hanashi_generate_request_get_message_text (req, i) }));
  return msgs;
}

/* texts: NULL = the messages' own, else one replacement per message. */
static HnJson *
messages_json (GArray *msgs, char **texts)
{
  HnJson *arr = hn_json_new_array ();
  for (guint i = 0; i < msgs->len; i++)
    {
      Msg *m = &g_array_index (msgs, Msg, i);
      HnJson *o = hn_json_new_object ();
      hn_json_object_set (o, "role", hn_json_new_string (m->role));
      hn_json_object_set (o, "content", hn_json_new_string (texts ? texts[i] : m->text));
      hn_json_array_append (arr, o);
    }
  return arr;
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

static char *
render (ModelBackend *mb, GArray *msgs, char **texts, HanashiThinking thinking, size_t *len, HnError *err)
{
  HnJson *messages = messages_json (msgs, texts);
  HnChatRenderOptions o = { 0 };
  o.messages = messages;
  o.bos_token = mb->bos_text;
  o.eos_token = mb->eos_text;
  o.add_generation_prompt = true;
  o.enable_thinking = template_thinking (thinking);
  char *text = hn_chat_template_render (mb->tmpl, &o, len, err);
  hn_json_free (messages);
  return text;
}

/* Renders with the model's template and finds exactly where each message landed: the
 * template is rendered once with placeholders, and the real text must equal the pieces
 * around the placeholders with the messages put back (as they are, or trimmed, which
 * common templates do).  FALSE when the template fails or rewrites messages otherwise. */
static gboolean
render_template (ModelBackend *mb, GArray *msgs, HanashiThinking thinking, GString *out, GArray *guards,
                 char **why)
{
  HnError err = { 0 };
  size_t real_len = 0, mark_len = 0;
  char *real = render (mb, msgs, NULL, thinking, &real_len, &err);
  if (real == NULL)
    {
      *why = g_strdup (err.message);
      return FALSE;
    }
  g_auto (GStrv) marks = g_new0 (char *, msgs->len + 1);
  for (guint i = 0; i < msgs->len; i++)
    marks[i] = g_strdup_printf ("\x01hn%u\x02", i);
  char *marked = render (mb, msgs, marks, thinking, &mark_len, &err);
  gboolean ok = FALSE;
  for (int trim = 0; marked != NULL && !ok && trim < 2; trim++)
    {
      g_string_truncate (out, 0);
      g_array_set_size (guards, 0);
      size_t from = 0;
      guint i;
      for (i = 0; i < msgs->len; i++)
        {
          const char *hit = g_strstr_len (marked + from, (gssize) (mark_len - from), marks[i]);
          if (hit == NULL)
            break;
          g_string_append_len (out, marked + from, hit - (marked + from));
          const char *text = g_array_index (msgs, Msg, i).text;
          g_autofree char *trimmed = trim ? g_strstrip (g_strdup (text)) : NULL;
          if (trimmed != NULL)
            text = trimmed;
          HnTextRange r = { out->len, out->len + strlen (text) };
          g_string_append (out, text);
          if (r.end > r.start)
            g_array_append_val (guards, r);
          from = (size_t) (hit - marked) + strlen (marks[i]);
        }
      if (i < msgs->len)
        break;
      g_string_append_len (out, marked + from, (gssize) (mark_len - from));
      ok = out->len == real_len && memcmp (out->str, real, real_len) == 0;
    }
  if (!ok)
    *why = g_strdup (marked == NULL ? err.message : "it changes the text of messages");
  free (real);
  free (marked);
  return ok;
}

/* The built-in ChatML (the same text as hn_chat_render_fallback), built here so that the
 * position of every message is known. */
static void
render_chatml (GArray *msgs, GString *out, GArray *guards)
{
  g_string_truncate (out, 0);
  g_array_set_size (guards, 0);
  for (guint i = 0; i < msgs->len; i++)
    {
      Msg *m = &g_array_index (msgs, Msg, i);
      g_string_append_printf (out, "<|im_start|>%s\n", m->role);
      HnTextRange r = { out->len, out->len + strlen (m->text) };
      g_string_append (out, m->text);
      if (r.end > r.start)
        g_array_append_val (guards, r);
      g_string_append (out, "<|im_end|>\n");
    }
  g_string_append (out, "<|im_start|>assistant\n");
}

static gboolean
tokenize_guarded (ModelBackend *mb, const char *text, size_t len, GArray *guards, GArray *out,
                  GError **error)
{
  HnError err = { 0 };
  int32_t cap = (int32_t) MIN ((size_t) G_MAXINT32 / 2, len + 16);
  g_array_set_size (out, (guint) cap);
  int32_t n = hn_tokenize_guarded (mb->vocab, text, len, false,
                                   (const HnTextRange *) (gpointer) guards->data, guards->len,
                                   (int32_t *) (gpointer) out->data, cap, &err);
  if (n < 0 && n != INT32_MIN)
    {
      cap = -n;
      g_array_set_size (out, (guint) cap);
      n = hn_tokenize_guarded (mb->vocab, text, len, false,
                               (const HnTextRange *) (gpointer) guards->data, guards->len,
                               (int32_t *) (gpointer) out->data, cap, &err);
    }
  if (n < 0)
    {
      set_error_from_hn (error, &err, HANASHI_ENGINE_ERROR_FAILED, "tokenizer");
      return FALSE;
    }
  g_array_set_size (out, (guint) n);
  /* The template decides about BOS; a model that wants one gets it even from ChatML. */
  int32_t bos = hn_vocab_bos (mb->vocab);
  if (hn_vocab_add_bos (mb->vocab) && bos >= 0
      && (out->len == 0 || g_array_index (out, int32_t, 0) != bos))
    g_array_prepend_val (out, bos);
  return TRUE;
}

/* Renders the conversation (messages from `first` on) and tokenizes it.  Special tokens are
 * recognised only where the template wrote them, never inside a message. */
static gboolean
build_prompt (ModelBackend *mb, HanashiGenerateRequest *req, const char *system, guint first,
              Prompt *out, GError **error)
{
  g_autoptr (GArray) msgs = collect_messages (req, system, first);
  g_autoptr (GArray) guards = g_array_new (FALSE, FALSE, sizeof (HnTextRange));
  g_autoptr (GString) text = g_string_new (NULL);

  out->tokens = g_array_new (FALSE, FALSE, sizeof (int32_t));
  out->fallback_reason = NULL;
  if (mb->tmpl == NULL || !render_template (mb, msgs, hanashi_generate_request_get_thinking (req), text, guards,
                                            &out->fallback_reason))
    {
      if (mb->tmpl_error != NULL && out->fallback_reason == NULL)
        out->fallback_reason = g_strdup (mb->tmpl_error);
      render_chatml (msgs, text, guards);
    }
  if (!tokenize_guarded (mb, text->str, text->len, guards, out->tokens, error))
    {
      prompt_clear (out);
      return FALSE;
    }
  return TRUE;
}


/* ---- generation ------------------------------------------------------------------------- */

typedef struct {
  ModelBackend *mb;
  HanashiBackendSink *sink;
  HnGenBackend inner;          /* the model backend */
  HnGenBackend outer;          /* the same, counting prompt progress */
  guint prompt_total, prompt_done;
  gboolean no_room;
  GArray *generated;           /* int32 */
  gint last_token;
  double t_start, t_first;
} GenRun;

static bool
run_decode (void *self, const HnGenBatchItem *items, size_t n, HnError *err)
{
  GenRun *r = self;
  HnKvCache *kv = hn_context_kv (r->mb->ctx);
  if ((size_t) hn_kv_cache_n_used (kv) + n > (size_t) hn_kv_cache_n_cells (kv))
    {
      r->no_room = TRUE;
      return hn_error_set (err, HN_ERR_NOMEM, "the context is full");
    }
  if (!r->inner.decode (r->inner.self, items, n, err))
    return false;
  if (r->prompt_done < r->prompt_total)
    {
      r->prompt_done = MIN (r->prompt_total, r->prompt_done + (guint) n);
      r->sink->on_prompt_progress (r->sink->data, r->prompt_done, r->prompt_total);
    }
  return true;
}

static const float *run_get_logits (void *self, size_t k) { GenRun *r = self; return r->inner.get_logits (r->inner.self, k); }
static void run_kv_truncate (void *self, int32_t seq, int32_t from) { GenRun *r = self; r->inner.kv_truncate (r->inner.self, seq, from); }
static bool run_is_eog (void *self, int32_t t) { GenRun *r = self; return r->inner.is_eog (r->inner.self, t); }
static const char *run_token_bytes (void *self, int32_t t, size_t *len) { GenRun *r = self; return r->inner.token_bytes (r->inner.self, t, len); }

static bool
run_on_token (int32_t token, const char *text, size_t len, void *user_data)
{
  GenRun *r = user_data;
  if (token >= 0)
    {
      g_array_append_val (r->generated, token);
      r->last_token = token;
      if (r->t_first == 0)
        r->t_first = hn_time_now ();
    }
  if (len == 0)
    return !r->sink->is_cancelled (r->sink->data);
  g_autofree char *piece = g_strndup (text, len);
  /* the text held back until the end belongs to the last token */
  return r->sink->on_token (r->sink->data, piece, r->last_token) != FALSE;
}

static bool
run_cancel (void *user_data)
{
  GenRun *r = user_data;
  return r->sink->is_cancelled (r->sink->data);
}

/* The request's grammar: the one its sender compiled already, or parsed here from its
 * text (callers that did not check it first). */
static gboolean
load_grammar (ModelBackend *mb, HanashiGenerateRequest *req, HanashiGrammar **out, GError **error)
{
  HnError err = { 0 };
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
    {
      if ((*out = hanashi_grammar_new_gbnf (gbnf, error)) == NULL)
        return FALSE;
    }
  else
    return TRUE;
  if (mb->gvocab == NULL && (mb->gvocab = hn_gen_grammar_vocab_new (mb->vocab, &err)) == NULL)
    {
      g_clear_pointer (out, hanashi_grammar_unref);
      set_error_from_hn (error, &err, HANASHI_ENGINE_ERROR_FAILED, NULL);
      return FALSE;
    }
  return TRUE;
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

/* Index just past the oldest turn from `first` on: a turn is a message and the replies up
 * to the next user message.  Returns `first` when nothing may go (the last user message
 * and what follows it always stay). */
static guint
next_turn_end (HanashiGenerateRequest *req, guint first)
{
  guint n = hanashi_generate_request_get_n_messages (req);
  guint last_user = n;
  for (guint i = n; i > 0; i--)
    if (hanashi_generate_request_get_message_role (req, i - 1) == HANASHI_ROLE_USER)
      {
        last_user = i - 1;
        break;
      }
  if (last_user == n || first >= last_user)
    return first;
  guint end = first + 1;
  while (end < last_user && hanashi_generate_request_get_message_role (req, end) != HANASHI_ROLE_USER)
    end++;
  return end;
}

/* Makes sequence 0 of the KV cache a prefix of `want` that is as long as possible without
 * evaluating anything: keep the common prefix, and when the cache continues with a stretch
 * of `want` found further on (turns were dropped in between), remove the gap and shift that
 * stretch down.  `hint` is where to look first (the size of the dropped turns). */
static guint
reuse_cache (ModelBackend *mb, const GArray *want, guint hint)
{
  HnKvCache *kv = hn_context_kv (mb->ctx);
  const int32_t *c = (const int32_t *) (gpointer) mb->cached->data;
  const int32_t *w = (const int32_t *) (gpointer) want->data;
  guint nc = mb->cached->len, nw = want->len;
  guint p = 0;
  while (p < nc && p < nw && c[p] == w[p])
    p++;
  guint best_d = 0, best_run = 0;
  /* Only after dropping turns: elsewhere a shifted stretch would see different tokens
   * before it than when it was evaluated, and reuse must stay exact. */
  if (hint > 0 && p < nc && p < nw)
    {
      /* Try the hint first; a search over every offset only if it does not match. */
      for (int pass = 0; pass < 2 && best_run < MIN_SHIFT_RUN; pass++)
        for (guint d = pass == 0 ? hint : 1; d > 0 && p + d < nc; d++)
          {
            guint run = 0;
            while (p + d + run < nc && p + run < nw && c[p + d + run] == w[p + run])
              run++;
            if (run > best_run)
              {
                best_run = run;
                best_d = d;
              }
            if (pass == 0 || p + d + run == nc)
              break;
          }
    }
  if (best_run >= MIN_SHIFT_RUN)
    {
      const HnRope *rope = hn_context_rope (mb->ctx);
      hn_kv_cache_seq_rm (kv, 0, (int32_t) p, (int32_t) (p + best_d));
      hn_kv_cache_seq_rm (kv, 0, (int32_t) (p + best_d + best_run), -1);
      hn_kv_cache_seq_shift (kv, 0, (int32_t) (p + best_d), (int32_t) (p + best_d + best_run),
                             -(int32_t) best_d, rope);
      p += best_run;
    }
  else
    hn_kv_cache_seq_rm (kv, 0, (int32_t) p, -1);
  /* A sliding-window cache may have handed on the keys that evaluating from the prefix's
   * last token (which generation evaluates again) would need: then start over. */
  if (p > 0 && (gint64) p - 1 < (gint64) hn_kv_cache_seq_resume_min (kv, 0))
    {
      hn_kv_cache_seq_rm (kv, 0, -1, -1);
      p = 0;
    }
  g_array_set_size (mb->cached, 0);
  g_array_append_vals (mb->cached, want->data, p);
  return p;
}

/* ---- session files ---------------------------------------------------------------------- */

/* The first request of a conversation since the cache held another one: restore what its
 * session file shares with the prompt.  Anything wrong with the file only costs time. */
static void
session_restore (ModelBackend *mb, const HanashiBackendSession *session, const GArray *prompt)
{
  HnError err = { 0 };
  uint32_t n = 0;
  if (session->path == NULL || !g_file_test (session->path, G_FILE_TEST_IS_REGULAR))
    return;
  if (!hn_prompt_cache_load (mb->ctx, session->path, (const int32_t *) (gpointer) prompt->data,
                             prompt->len, &n, &err))
    {
      g_message ("Session file %s not used: %s", session->path, err.message);
      return;
    }
  g_array_set_size (mb->cached, 0);
  g_array_append_vals (mb->cached, prompt->data, n);
  hn_session_touch (session->path);
}

/* After a reply: the conversation's KV state to its file, then the cache back under its
 * size limit (the file just written stays). */
static gboolean
session_store (ModelBackend *mb, const HanashiBackendSession *session, HanashiBackendSink *sink)
{
  HnError err = { 0 };
  if (session->path == NULL || mb->cached->len == 0)
    return FALSE;
  g_autofree char *dir = g_path_get_dirname (session->path);
  if (g_mkdir_with_parents (dir, 0700) != 0)
    {
      g_autofree char *message = g_strdup_printf ("cannot create %s: %s", dir, g_strerror (errno));
      sink->on_session_write_failed (sink->data, message);
      return FALSE;
    }
  if (!hn_prompt_cache_save (mb->ctx, session->path, (const int32_t *) (gpointer) mb->cached->data,
                             mb->cached->len, &err))
    {
      sink->on_session_write_failed (sink->data, err.message);
      return FALSE;
    }
  if (session->dir != NULL && hn_session_cache_evict (session->dir, session->limit, session->path, &err) < 0)
    g_message ("Session cache not trimmed: %s", err.message);
  return TRUE;
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

static gboolean
model_generate (gpointer model, HanashiGenerateRequest *req, const HanashiBackendSession *session,
                HanashiBackendSink *sink, HanashiGenerationStats *stats, GError **error)
{
  ModelBackend *mb = model;
  HnError err = { 0 };
  HanashiGrammar *grammar = NULL;
  Prompt prompt = { 0 }, negative = { 0 };
  GenRun run = { 0 };
  gboolean ok = FALSE;
  int32_t n_ctx = hn_context_n_ctx (mb->ctx);
  int32_t n_vocab = hn_model_n_vocab (mb->model);
  const char *conversation = hanashi_generate_request_get_conversation_id (req);

  run.t_start = hn_time_now ();
  run.generated = g_array_new (FALSE, FALSE, sizeof (int32_t));

  HnSamplerParams sp;
  if (!sampler_params (req, n_vocab, &sp, error) || !load_grammar (mb, req, &grammar, error))
    goto out;
  if (hanashi_generate_request_get_n_messages (req) == 0)
    {
      g_set_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_INVALID_ARGUMENT,
                   "The conversation has no messages");
      goto out;
    }

  /* The conversation as it fits: the system prompt stays, the oldest turns go first, and
   * some room stays free for the reply. */
  const char *system = hanashi_generate_request_get_system_prompt (req);
  const char *neg_text = hanashi_generate_request_get_cfg_negative (req);
  double cfg_scale = hanashi_generate_request_get_cfg_scale (req);
  gboolean cfg = cfg_scale != 1.0 && neg_text != NULL && *neg_text != '\0';
  int max_tokens = hanashi_generate_request_get_max_tokens (req);
  int32_t reserve = max_tokens > 0 ? MIN (max_tokens, n_ctx / 2) : n_ctx / 4;
  guint first = 0, n_full = 0, dropped_tokens = 0;
  for (;;)
    {
      prompt_clear (&prompt);
      prompt_clear (&negative);
      if (!build_prompt (mb, req, system, first, &prompt, error)
          || (cfg && !build_prompt (mb, req, neg_text, first, &negative, error)))
        goto out;
      if (first == 0)
        n_full = prompt.tokens->len;
      gint64 need = (gint64) prompt.tokens->len + reserve
                    + (cfg ? (gint64) negative.tokens->len + reserve : 0);
      if (need <= n_ctx)
        break;
      guint next = next_turn_end (req, first);
      if (next == first)
        {
          if ((gint64) prompt.tokens->len + (cfg ? negative.tokens->len : 0) + 1 < n_ctx)
            break;   /* no room for the whole reserve: generate until the context is full */
          g_set_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_PROMPT_TOO_LONG,
                       "The last message (%u tokens) does not fit the context (%d tokens)",
                       prompt.tokens->len, n_ctx);
          goto out;
        }
      first = next;
    }
  if (prompt.fallback_reason != NULL)
    {
      g_autofree char *warning = g_strdup_printf ("The model’s chat template cannot be used (%s); "
                                                  "using ChatML instead", prompt.fallback_reason);
      sink->on_warning (sink->data, HANASHI_ENGINE_ERROR_TEMPLATE_FAILED, warning);
    }
  if (first > 0)
    {
      dropped_tokens = n_full > prompt.tokens->len ? n_full - prompt.tokens->len : 0;
      stats->n_messages_dropped = first;
      stats->n_tokens_dropped = dropped_tokens;
      sink->on_context_dropped (sink->data, first, dropped_tokens);
    }

  /* Reuse: the in-memory cache of the last conversation, else its session file. */
  if (g_strcmp0 (mb->cached_conversation, conversation) != 0)
    {
      hn_kv_cache_seq_rm (hn_context_kv (mb->ctx), -1, -1, -1);
      g_array_set_size (mb->cached, 0);
      g_free (mb->cached_conversation);
      mb->cached_conversation = g_strdup (conversation);
      session_restore (mb, session, prompt.tokens);
    }
  guint n_cached = reuse_cache (mb, prompt.tokens, dropped_tokens);

  run.mb = mb;
  run.sink = sink;
  run.inner = mb->gen.backend;
  run.outer = run.inner;
  run.outer.self = &run;
  run.outer.decode = run_decode;
  run.outer.get_logits = run_get_logits;
  run.outer.kv_truncate = run_kv_truncate;
  run.outer.is_eog = run_is_eog;
  run.outer.token_bytes = run_token_bytes;
  guint eval_cached = MIN (n_cached, prompt.tokens->len - 1);
  run.prompt_total = prompt.tokens->len - eval_cached + (cfg ? negative.tokens->len : 0);

  HnGenRequest gr;
  hn_gen_request_init (&gr);
  gr.prompt = (const int32_t *) (gpointer) prompt.tokens->data;
  gr.n_prompt = prompt.tokens->len;
  gr.n_cached = n_cached;
  if (cfg)
    {
      gr.negative = (const int32_t *) (gpointer) negative.tokens->data;
      gr.n_negative = negative.tokens->len;
      gr.cfg_scale = (float) cfg_scale;
    }
  gr.sampler = &sp;
  gr.grammar = grammar ? hanashi_grammar_get_hn (grammar) : NULL;
  gr.grammar_vocab = mb->gvocab;
  gr.newline_tokens = mb->newline_tokens;
  gr.n_newline_tokens = mb->n_newline_tokens;
  gr.on_token = run_on_token;
  gr.user_data = &run;

  HnGenResult res;
  hn_context_set_cancel (mb->ctx, run_cancel, &run);
  gboolean gen_ok = hn_generate_with_backend (&run.outer, &gr, &res, &err);
  hn_context_set_cancel (mb->ctx, NULL, NULL);

  /* Whatever ran, sequence 0 now holds a prefix of prompt + generated tokens. */
  HnKvCache *kv = hn_context_kv (mb->ctx);
  hn_kv_cache_seq_rm (kv, 1, -1, -1);
  g_array_set_size (mb->cached, 0);
  g_array_append_vals (mb->cached, prompt.tokens->data, prompt.tokens->len);
  g_array_append_vals (mb->cached, run.generated->data, run.generated->len);
  guint held = (guint) (hn_kv_cache_seq_pos_max (kv, 0) + 1);
  g_array_set_size (mb->cached, MIN (held, mb->cached->len));

  stats->n_prompt = prompt.tokens->len;
  stats->n_reused = eval_cached;
  stats->n_generated = (guint) res.n_generated;
  stats->grammar_truncated_steps = (guint) MIN (res.grammar_truncated_steps, (size_t) G_MAXUINT);
  stats->prompt_tokens_per_second = res.prompt_seconds > 0 ? res.n_prompt_evaluated / res.prompt_seconds : 0;
  stats->gen_tokens_per_second = res.generate_seconds > 0 ? res.n_generated / res.generate_seconds : 0;
  stats->time_to_first_token = run.t_first > 0 ? run.t_first - run.t_start : 0;
  if (gen_ok)
    stats->stop_reason = map_stop (res.stop_reason);
  else if (err.code == HN_ERR_CANCELLED || sink->is_cancelled (sink->data))
    stats->stop_reason = HANASHI_STOP_REASON_CANCELLED;
  else if (run.no_room)
    stats->stop_reason = HANASHI_STOP_REASON_CONTEXT_FULL;
  else
    {
      set_error_from_hn (error, &err, HANASHI_ENGINE_ERROR_FAILED, NULL);
      goto out;
    }
  stats->session_saved = session_store (mb, session, sink);
  ok = TRUE;

out:
  hanashi_grammar_unref (grammar);
  prompt_clear (&prompt);
  prompt_clear (&negative);
  g_array_unref (run.generated);
  return ok;
}

static gint
model_count_tokens (gpointer model, HanashiGenerateRequest *req, GError **error)
{
  ModelBackend *mb = model;
  Prompt prompt = { 0 };
  if (!build_prompt (mb, req, hanashi_generate_request_get_system_prompt (req), 0, &prompt, error))
    return -1;
  gint n = (gint) prompt.tokens->len;
  prompt_clear (&prompt);
  return n;
}

static const HanashiEngineBackend model_backend = {
  model_load, model_unload, model_generate, model_count_tokens,
};

const HanashiEngineBackend *
hanashi_engine_model_backend (void)
{
  return &model_backend;
}
