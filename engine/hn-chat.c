/* hn-chat.c — the conversation core (see hn-chat.h): template rendering with the
 * special-token guards, fitting to the context, prefix reuse from the KV cache or a session
 * file, generation, and saving the session.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-chat.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hn-generate-model.h"
#include "hn-json-schema.h"
#include "hn-json.h"
#include "hn-kv-cache.h"
#include "hn-prompt-cache.h"
#include "hn-session.h"

/* A shifted run shorter than this is not worth the bookkeeping (and is likely chance). */
#define MIN_SHIFT_RUN 16

struct HnChatModel {
  const HnModel *model;          /* borrowed */
  const HnVocab *vocab;          /* borrowed */
  HnChatTemplate *tmpl;          /* NULL: ChatML */
  char *tmpl_error;              /* why the model's own template could not be parsed */
  char *bos_text, *eos_text;
  /* Newlines keep their logit through the repetition penalties (penalize_nl off). */
  int32_t newline_tokens[2];
  size_t n_newline_tokens;
  HnGrammarVocab *gvocab;        /* built on the first constrained request */
};

/* One conversation's share of a context: its sequence (and the one its CFG negative prompt
 * uses), and which tokens the sequence holds. */
typedef struct {
  HnContext *ctx;                /* borrowed */
  int32_t seq, negative_seq;
  /* What the sequence holds, position by position (at most n_ctx). */
  int32_t *held;
  size_t n_held, cap;
  /* The tokens of the reply being generated (at most n_ctx: every one takes a position). */
  int32_t *generated;
  size_t n_generated;
  char *conversation;            /* whose tokens `held` are */
} ChatSeq;

static void chat_seq_forget(ChatSeq *cs);

struct HnChat {
  HnChatModel *cm;               /* borrowed */
  HnContext *ctx;
  HnGenModelBackend gen;
  ChatSeq s;                     /* sequence 0 (1 for the negative prompt) */
};

/* ---- small helpers ------------------------------------------------------------------- */

static char *
dup_len(const char *s, size_t len)
{
  char *d = malloc(len + 1);
  if (d) {
    memcpy(d, s, len);
    d[len] = '\0';
  }
  return d;
}

static char *
dup_str(const char *s)
{
  return s ? dup_len(s, strlen(s)) : NULL;
}

/* Text built piece by piece; a failed allocation is remembered and reported once. */
typedef struct {
  char *data;
  size_t len, cap;
  bool failed;
} Text;

static void
text_add(Text *t, const char *s, size_t n)
{
  if (t->failed)
    return;
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + n + 1)
      cap *= 2;
    char *d = realloc(t->data, cap);
    if (!d) {
      t->failed = true;
      return;
    }
    t->data = d;
    t->cap = cap;
  }
  memcpy(t->data + t->len, s, n);
  t->len += n;
  t->data[t->len] = '\0';
}

typedef struct {
  HnTextRange *items;
  size_t n, cap;
  bool failed;
} Ranges;

static void
ranges_add(Ranges *r, size_t start, size_t end)
{
  if (r->failed || end <= start)
    return;
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 16;
    HnTextRange *items = realloc(r->items, cap * sizeof *items);
    if (!items) {
      r->failed = true;
      return;
    }
    r->items = items;
    r->cap = cap;
  }
  r->items[r->n++] = (HnTextRange) { start, end };
}

static char *
token_text_dup(const HnVocab *vocab, int32_t id)
{
  size_t len = 0;
  const char *text = id >= 0 ? hn_vocab_token_text(vocab, id, &len) : NULL;
  return text ? dup_len(text, len) : NULL;
}

/* ---- the model side ------------------------------------------------------------------ */

HnChatModel *
hn_chat_model_new(const HnModel *model, const HnVocab *vocab, HnError *err)
{
  HnChatModel *cm = calloc(1, sizeof *cm);
  if (!cm) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return NULL;
  }
  cm->model = model;
  cm->vocab = vocab;
  HnStr src;
  if (hn_gguf_get_str(hn_model_gguf(model), "tokenizer.chat_template", &src, NULL) && src.len > 0) {
    HnError terr = { 0 };
    cm->tmpl = hn_chat_template_new(src.data, src.len, &terr);
    if (!cm->tmpl)
      cm->tmpl_error = dup_str(terr.message);
  }
  cm->bos_text = token_text_dup(vocab, hn_vocab_bos(vocab));
  cm->eos_text = token_text_dup(vocab, hn_vocab_eos(vocab));

  int32_t nl[4];
  int32_t n = hn_tokenize(vocab, "\n", 1, false, false, nl, 4, NULL);
  if (n == 1)
    cm->newline_tokens[cm->n_newline_tokens++] = nl[0];
  int32_t byte_nl = hn_vocab_find_token(vocab, "<0x0A>");
  if (byte_nl >= 0 && (n != 1 || byte_nl != nl[0]))
    cm->newline_tokens[cm->n_newline_tokens++] = byte_nl;
  return cm;
}

void
hn_chat_model_free(HnChatModel *cm)
{
  if (!cm)
    return;
  hn_grammar_vocab_free(cm->gvocab);
  hn_chat_template_free(cm->tmpl);
  free(cm->tmpl_error);
  free(cm->bos_text);
  free(cm->eos_text);
  free(cm);
}

const HnChatTemplate *
hn_chat_model_template(const HnChatModel *cm)
{
  return cm->tmpl;
}

const char *
hn_chat_model_bos_text(const HnChatModel *cm)
{
  return cm->bos_text;
}

const char *
hn_chat_model_eos_text(const HnChatModel *cm)
{
  return cm->eos_text;
}

const HnGrammarVocab *
hn_chat_model_grammar_vocab(HnChatModel *cm, HnError *err)
{
  if (!cm->gvocab)
    cm->gvocab = hn_gen_grammar_vocab_new(cm->vocab, err);
  return cm->gvocab;
}

void
hn_chat_prompt_clear(HnChatPrompt *p)
{
  free(p->tokens);
  free(p->fallback_reason);
  memset(p, 0, sizeof *p);
}

/* ---- rendering ----------------------------------------------------------------------- */

/* texts: NULL = the messages' own, else one replacement per message. */
static HnJson *
messages_json(const HnChatMessage *msgs, size_t n, char **texts)
{
  HnJson *arr = hn_json_new_array();
  for (size_t i = 0; arr && i < n; i++) {
    HnJson *o = hn_json_new_object();
    if (!o || !hn_json_object_set(o, "role", hn_json_new_string(msgs[i].role)) ||
        !hn_json_object_set(o, "content", hn_json_new_string(texts ? texts[i] : msgs[i].content)) ||
        !hn_json_array_append(arr, o)) {
      hn_json_free(o);
      hn_json_free(arr);
      return NULL;
    }
  }
  return arr;
}

static char *
render(const HnChatModel *cm, const HnChatMessage *msgs, size_t n, char **texts, HnChatThinking thinking,
       size_t *len, HnError *err)
{
  HnJson *messages = messages_json(msgs, n, texts);
  if (!messages) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return NULL;
  }
  HnChatRenderOptions o = { 0 };
  o.messages = messages;
  o.bos_token = cm->bos_text;
  o.eos_token = cm->eos_text;
  o.add_generation_prompt = true;
  o.enable_thinking = thinking;
  char *text = hn_chat_template_render(cm->tmpl, &o, len, err);
  hn_json_free(messages);
  return text;
}

/* Whitespace as templates' trim() removes it in practice (ASCII). */
static bool
is_trim_space(char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

/* Renders with the model's template and finds exactly where each message landed: the
 * template is rendered once more with placeholders, and the real text must equal the pieces
 * around the placeholders with the messages put back (as they are, or trimmed, which common
 * templates do).  False, with *why, when the template fails or rewrites messages otherwise. */
static bool
render_template(const HnChatModel *cm, const HnChatMessage *msgs, size_t n, HnChatThinking thinking,
                Text *out, Ranges *guards, char **why)
{
  HnError err = { 0 };
  size_t real_len = 0, mark_len = 0;
  char *real = render(cm, msgs, n, NULL, thinking, &real_len, &err);
  if (!real) {
    *why = dup_str(err.message);
    return false;
  }
  char **marks = calloc(n + 1, sizeof *marks);
  bool ok = false, marks_ok = marks != NULL;
  for (size_t i = 0; marks_ok && i < n; i++) {
    char buf[32];
    snprintf(buf, sizeof buf, "\x01hn%zu\x02", i);
    marks_ok = (marks[i] = dup_str(buf)) != NULL;
  }
  char *marked = marks_ok ? render(cm, msgs, n, marks, thinking, &mark_len, &err) : NULL;
  for (int trim = 0; marked && !ok && trim < 2; trim++) {
    out->len = 0;
    guards->n = 0;
    size_t from = 0, i;
    for (i = 0; i < n; i++) {
      size_t mlen = strlen(marks[i]);
      const char *hit = memmem(marked + from, mark_len - from, marks[i], mlen);
      if (!hit)
        break;
      text_add(out, marked + from, (size_t) (hit - (marked + from)));
      const char *content = msgs[i].content;
      size_t clen = strlen(content);
      if (trim) {
        while (clen > 0 && is_trim_space(*content)) {
          content++;
          clen--;
        }
        while (clen > 0 && is_trim_space(content[clen - 1]))
          clen--;
      }
      size_t start = out->len;
      text_add(out, content, clen);
      ranges_add(guards, start, start + clen);
      from = (size_t) (hit - marked) + mlen;
    }
    if (i < n)
      break;
    text_add(out, marked + from, mark_len - from);
    ok = !out->failed && !guards->failed && out->len == real_len && memcmp(out->data, real, real_len) == 0;
  }
  if (!ok)
    *why = dup_str(!marks_ok ? "out of memory" : !marked ? err.message : "it changes the text of messages");
  for (size_t i = 0; marks && i < n; i++)
    free(marks[i]);
  free(marks);
  free(real);
  free(marked);
  return ok;
}

/* ChatML with the position of every message (the one ChatML writer, hn-chat-template). */
static bool
render_chatml(const HnChatMessage *msgs, size_t n, Text *out, Ranges *guards, HnError *err)
{
  HnJson *messages = messages_json(msgs, n, NULL);
  if (!messages)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory");
  size_t len = 0, n_ranges = 0;
  HnTextRange *ranges = NULL;
  char *text = hn_chat_render_fallback_ranges(messages, true, &len, &ranges, &n_ranges, err);
  hn_json_free(messages);
  if (!text)
    return false;
  out->len = 0;
  guards->n = 0;
  text_add(out, text, len);
  for (size_t i = 0; i < n_ranges; i++)
    ranges_add(guards, ranges[i].start, ranges[i].end);
  free(text);
  free(ranges);
  if (out->failed || guards->failed)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory");
  return true;
}

static bool
tokenize_guarded(const HnChatModel *cm, const Text *text, const Ranges *guards, HnChatPrompt *out, HnError *err)
{
  size_t cap = text->len + 16;
  if (cap > (size_t) INT32_MAX / 2)
    cap = (size_t) INT32_MAX / 2;
  for (int attempt = 0; attempt < 2; attempt++) {
    free(out->tokens);
    /* one spare slot for a BOS the template did not write */
    out->tokens = malloc((cap + 1) * sizeof *out->tokens);
    if (!out->tokens)
      return hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    int32_t n = hn_tokenize_guarded(cm->vocab, text->data ? text->data : "", text->len, false, guards->items,
                                    guards->n, out->tokens + 1, (int32_t) cap, err);
    if (n >= 0) {
      out->n_tokens = (size_t) n;
      break;
    }
    if (n == INT32_MIN) {
      hn_error_prefix(err, "tokenizer");
      return false;
    }
    if (attempt == 1)
      return hn_error_set(err, HN_ERR_NOMEM, "tokenizer: the prompt needs more than %zu tokens", cap);
    cap = (size_t) -(int64_t) n;
  }
  /* The template decides about BOS; a model that wants one gets it even from ChatML. */
  int32_t bos = hn_vocab_bos(cm->vocab);
  if (hn_vocab_add_bos(cm->vocab) && bos >= 0 && (out->n_tokens == 0 || out->tokens[1] != bos)) {
    out->tokens[0] = bos;
    out->n_tokens++;
  } else {
    memmove(out->tokens, out->tokens + 1, out->n_tokens * sizeof *out->tokens);
  }
  return true;
}

/* Renders the system prompt (or the CFG negative prompt in its place) and messages[first..]
 * and tokenizes them.  Special tokens are recognised only where the template wrote them,
 * never inside a message. */
static bool
build_prompt(const HnChatModel *cm, const char *system, const HnChatMessage *messages, size_t n_messages,
             size_t first, HnChatThinking thinking, HnChatPrompt *out, HnError *err)
{
  memset(out, 0, sizeof *out);
  size_t n = 0;
  HnChatMessage *msgs = malloc((n_messages - first + 1) * sizeof *msgs);
  Text text = { 0 };
  Ranges guards = { 0 };
  bool ok = false;
  if (!msgs) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto out;
  }
  if (system && *system)
    msgs[n++] = (HnChatMessage) { "system", system };
  for (size_t i = first; i < n_messages; i++)
    msgs[n++] = messages[i];
  if (!cm->tmpl || !render_template(cm, msgs, n, thinking, &text, &guards, &out->fallback_reason)) {
    if (cm->tmpl_error && !out->fallback_reason)
      out->fallback_reason = dup_str(cm->tmpl_error);
    if (!render_chatml(msgs, n, &text, &guards, err))
      goto out;
  }
  ok = tokenize_guarded(cm, &text, &guards, out, err);
out:
  if (!ok)
    hn_chat_prompt_clear(out);
  free(msgs);
  free(text.data);
  free(guards.items);
  return ok;
}

bool
hn_chat_model_tokenize(HnChatModel *cm, const char *system, const HnChatMessage *messages, size_t n_messages,
                       HnChatThinking thinking, HnChatPrompt *out, HnError *err)
{
  return build_prompt(cm, system, messages, n_messages, 0, thinking, out, err);
}

/* ---- one conversation ---------------------------------------------------------------- */

HnChat *
hn_chat_new(HnChatModel *cm, const HnContextParams *params, HnError *err)
{
  HnChat *chat = calloc(1, sizeof *chat);
  if (!chat) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return NULL;
  }
  chat->cm = cm;
  HnContextParams cp = params ? *params : hn_context_default_params();
  if (cp.n_seq_max < 2)
    cp.n_seq_max = 2; /* the chat and the CFG negative prompt */
  chat->ctx = hn_context_new(cm->model, &cp, err);
  if (!chat->ctx || !hn_gen_model_backend_init(&chat->gen, chat->ctx, cm->vocab, err))
    goto fail;
  chat->s.ctx = chat->ctx;
  chat->s.seq = 0;
  chat->s.negative_seq = 1;
  chat->s.cap = (size_t) hn_context_n_ctx(chat->ctx);
  chat->s.held = malloc((chat->s.cap + 1) * sizeof *chat->s.held);
  chat->s.generated = malloc((chat->s.cap + 1) * sizeof *chat->s.generated);
  if (!chat->s.held || !chat->s.generated) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto fail;
  }
  return chat;
fail:
  hn_chat_free(chat);
  return NULL;
}

void
hn_chat_free(HnChat *chat)
{
  if (!chat)
    return;
  hn_gen_model_backend_clear(&chat->gen);
  hn_context_free(chat->ctx);
  free(chat->s.held);
  free(chat->s.generated);
  free(chat->s.conversation);
  free(chat);
}

HnContext *
hn_chat_context(HnChat *chat)
{
  return chat->ctx;
}

const int32_t *
hn_chat_tokens_held(const HnChat *chat, size_t *n_tokens)
{
  *n_tokens = chat->s.n_held;
  return chat->s.held;
}

const int32_t *
hn_chat_reply_tokens(const HnChat *chat, size_t *n_tokens)
{
  *n_tokens = chat->s.n_generated;
  return chat->s.generated;
}

static void
chat_seq_forget(ChatSeq *cs)
{
  hn_kv_cache_seq_rm(hn_context_kv(cs->ctx), cs->seq, -1, -1);
  hn_kv_cache_seq_rm(hn_context_kv(cs->ctx), cs->negative_seq, -1, -1);
  cs->n_held = 0;
  free(cs->conversation);
  cs->conversation = NULL;
}

void
hn_chat_forget(HnChat *chat)
{
  hn_kv_cache_seq_rm(hn_context_kv(chat->ctx), -1, -1, -1);
  chat_seq_forget(&chat->s);
}

void
hn_chat_request_init(HnChatRequest *req)
{
  memset(req, 0, sizeof *req);
  req->cfg_scale = 1.0f;
}

static bool
same_conversation(const char *a, const char *b)
{
  return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static void
held_set(ChatSeq *cs, const int32_t *tokens, size_t n)
{
  if (n > cs->cap)
    n = cs->cap;
  memmove(cs->held, tokens, n * sizeof *tokens);
  cs->n_held = n;
}

/* Index just past the oldest turn from `first` on: a turn is a message and the replies up
 * to the next user message.  Returns `first` when nothing may go (the last user message and
 * what follows it always stay). */
static size_t
next_turn_end(const HnChatMessage *msgs, size_t n, size_t first)
{
  size_t last_user = n;
  for (size_t i = n; i > 0; i--)
    if (strcmp(msgs[i - 1].role, "user") == 0) {
      last_user = i - 1;
      break;
    }
  if (last_user == n || first >= last_user)
    return first;
  size_t end = first + 1;
  while (end < last_user && strcmp(msgs[end].role, "user") != 0)
    end++;
  return end;
}

/* Makes sequence 0 of the KV cache a prefix of `want` that is as long as possible without
 * evaluating anything: keep the common prefix, and when the cache continues with a stretch
 * of `want` found further on (turns were dropped in between), remove the gap and shift that
 * stretch down.  `hint` is where to look first (the size of the dropped turns). */
static size_t
reuse_cache(ChatSeq *cs, const int32_t *w, size_t nw, size_t hint)
{
  HnKvCache *kv = hn_context_kv(cs->ctx);
  const int32_t seq = cs->seq;
  const int32_t *c = cs->held;
  size_t nc = cs->n_held;
  size_t p = 0;
  while (p < nc && p < nw && c[p] == w[p])
    p++;
  size_t best_d = 0, best_run = 0;
  /* Only after dropping turns: elsewhere a shifted stretch would see different tokens
   * before it than when it was evaluated, and reuse must stay exact. */
  if (hint > 0 && p < nc && p < nw) {
    /* Try the hint first; a search over every offset only if it does not match. */
    for (int pass = 0; pass < 2 && best_run < MIN_SHIFT_RUN; pass++)
      for (size_t d = pass == 0 ? hint : 1; d > 0 && p + d < nc; d++) {
        size_t run = 0;
        while (p + d + run < nc && p + run < nw && c[p + d + run] == w[p + run])
          run++;
        if (run > best_run) {
          best_run = run;
          best_d = d;
        }
        if (pass == 0 || p + d + run == nc)
          break;
      }
  }
  if (best_run >= MIN_SHIFT_RUN) {
    const HnRope *rope = hn_context_rope(cs->ctx);
    hn_kv_cache_seq_rm(kv, seq, (int32_t) p, (int32_t) (p + best_d));
    hn_kv_cache_seq_rm(kv, seq, (int32_t) (p + best_d + best_run), -1);
    hn_kv_cache_seq_shift(kv, seq, (int32_t) (p + best_d), (int32_t) (p + best_d + best_run), -(int32_t) best_d,
                          rope);
    p += best_run;
  } else {
    hn_kv_cache_seq_rm(kv, seq, (int32_t) p, -1);
  }
  /* A sliding-window cache may have handed on the keys that evaluating from the prefix's
   * last token (which generation evaluates again) would need: then start over. */
  if (p > 0 && (int64_t) p - 1 < (int64_t) hn_kv_cache_seq_resume_min(kv, seq)) {
    hn_kv_cache_seq_rm(kv, seq, -1, -1);
    p = 0;
  }
  held_set(cs, w, p);
  return p;
}

/* ---- generation ---------------------------------------------------------------------- */

typedef struct {
  HnChat *chat;
  ChatSeq *cs;
  const HnChatCallbacks *cb;
  HnGenBackend inner;          /* the model backend */
  HnGenBackend outer;          /* the same, counting prompt progress and free cells */
  size_t prompt_total, prompt_done;
  bool no_room;
  size_t n_generated;
  int32_t last_token;
  double t_start, t_first;
  /* for on_first_logits */
  const int32_t *prompt;
  size_t n_prompt;
  const int32_t *newline_tokens;
  size_t n_newline_tokens;
  bool first_logits_sent;
} Run;

static bool
run_cancelled(const Run *r)
{
  return r->cb->is_cancelled && r->cb->is_cancelled(r->cb->user_data);
}

static bool
run_decode(void *self, const HnGenBatchItem *items, size_t n, HnError *err)
{
  Run *r = self;
  HnKvCache *kv = hn_context_kv(r->chat->ctx);
  if ((size_t) hn_kv_cache_n_used(kv) + n > (size_t) hn_kv_cache_n_cells(kv)) {
    r->no_room = true;
    return hn_error_set(err, HN_ERR_NOMEM, "the context is full");
  }
  if (!r->inner.decode(r->inner.self, items, n, err))
    return false;
  if (r->prompt_done < r->prompt_total) {
    r->prompt_done = HN_MIN(r->prompt_total, r->prompt_done + n);
    if (r->cb->on_prompt_progress)
      r->cb->on_prompt_progress(r->cb->user_data, r->prompt_done, r->prompt_total);
  }
  return true;
}

static const float *run_get_logits(void *self, size_t k) { Run *r = self; return r->inner.get_logits(r->inner.self, k); }
static void run_kv_truncate(void *self, int32_t seq, int32_t from) { Run *r = self; r->inner.kv_truncate(r->inner.self, seq, from); }
static bool run_is_eog(void *self, int32_t t) { Run *r = self; return r->inner.is_eog(r->inner.self, t); }
static const char *run_token_bytes(void *self, int32_t t, size_t *len) { Run *r = self; return r->inner.token_bytes(r->inner.self, t, len); }

static bool
run_on_token(int32_t token, const char *text, size_t len, void *user_data)
{
  Run *r = user_data;
  if (token >= 0) {
    if (r->n_generated < r->cs->cap)
      r->cs->generated[r->n_generated++] = token;
    r->last_token = token;
    if (r->t_first == 0)
      r->t_first = hn_time_now();
  }
  if (len == 0 || !r->cb->on_text)
    return !run_cancelled(r);
  /* the text held back until the end belongs to the last token */
  return r->cb->on_text(r->cb->user_data, text, len, r->last_token);
}

static void
run_on_logits(const float *logits, int32_t n_vocab, void *user_data)
{
  Run *r = user_data;
  if (r->n_generated > 0 || r->first_logits_sent)
    return;
  r->first_logits_sent = true;
  r->cb->on_first_logits(r->cb->user_data, logits, n_vocab, r->prompt, r->n_prompt, r->newline_tokens,
                         r->n_newline_tokens);
}

static void
run_on_probs(const HnTokenProbs *probs, void *user_data)
{
  Run *r = user_data;
  if (r->cb->on_probs)
    r->cb->on_probs(r->cb->user_data, probs);
}

static bool
run_cancel(void *user_data)
{
  return run_cancelled(user_data);
}

static void
warn(const HnChatCallbacks *cb, HnChatWarning code, const char *fmt, ...) HN_PRINTF(3, 4);

static void
warn(const HnChatCallbacks *cb, HnChatWarning code, const char *fmt, ...)
{
  if (!cb->on_warning)
    return;
  char message[HN_ERROR_MESSAGE_MAX + 256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  cb->on_warning(cb->user_data, code, message);
}

/* The grammar the request asks for: borrowed, or parsed into *owned. */
static bool
load_grammar(HnChatModel *cm, const HnChatRequest *req, const HnGrammar **use, HnGrammar **owned,
             const HnGrammarVocab **gvocab, HnError *err)
{
  *use = req->grammar;
  *owned = NULL;
  *gvocab = NULL;
  if (!*use) {
    const char *gbnf = req->gbnf;
    char *converted = NULL;
    if (req->json_schema && *req->json_schema) {
      HnError serr = { 0 };
      converted = hn_json_schema_to_gbnf(req->json_schema, strlen(req->json_schema), &serr);
      if (!converted)
        return hn_error_set(err, serr.code == HN_ERR_LIMIT ? HN_ERR_LIMIT : HN_ERR_GRAMMAR, "JSON schema: %s",
                            serr.message);
      gbnf = converted;
    }
    if (gbnf && *gbnf) {
      HnError gerr = { 0 };
      *owned = hn_grammar_parse(gbnf, strlen(gbnf), NULL, &gerr);
      if (!*owned) {
        free(converted);
        return hn_error_set(err, gerr.code == HN_ERR_LIMIT ? HN_ERR_LIMIT : HN_ERR_GRAMMAR, "%s", gerr.message);
      }
      *use = *owned;
    }
    free(converted);
  }
  if (*use && !(*gvocab = hn_chat_model_grammar_vocab(cm, err))) {
    hn_grammar_free(*owned);
    *owned = NULL;
    *use = NULL;
    return false;
  }
  return true;
}

/* The first request of a conversation since the cache held another one: restore what its
 * session file shares with the prompt.  Anything wrong with the file only costs time. */
static size_t
session_restore(HnChat *chat, const char *path, const int32_t *prompt, size_t n_prompt, const HnChatCallbacks *cb)
{
  struct stat st;
  if (stat(path, &st) != 0) {
    warn(cb, HN_CHAT_WARNING_SESSION_MISSING, "%s: %s", path, strerror(errno));
    return 0;
  }
  if (!S_ISREG(st.st_mode)) {
    warn(cb, HN_CHAT_WARNING_SESSION_MISSING, "%s is not a regular file", path);
    return 0;
  }
  HnError err = { 0 };
  uint32_t n = 0;
  if (!hn_prompt_cache_load(chat->ctx, path, prompt, (uint32_t) HN_MIN(n_prompt, (size_t) UINT32_MAX), &n, &err)) {
    warn(cb, HN_CHAT_WARNING_SESSION_NOT_USED, "%s", err.message);
    return 0;
  }
  held_set(&chat->s, prompt, n);
  hn_session_touch(path);
  return n;
}

/* Creates the directories above `path`, like mkdir -p on its dirname.  On failure, the
 * directory that could not be made is in failed_dir and errno says why. */
static bool
make_parent_dirs(const char *path, char *failed_dir, size_t failed_size)
{
  char *dir = dup_str(path);
  if (!dir) {
    errno = ENOMEM;
    snprintf(failed_dir, failed_size, "%s", path);
    return false;
  }
  char *slash = strrchr(dir, '/');
  bool ok = true;
  if (slash && slash != dir) {
    *slash = '\0';
    for (char *p = dir + 1; ok; p++) {
      if (*p != '/' && *p != '\0')
        continue;
      char saved = *p;
      *p = '\0';
      struct stat st;
      if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        ok = false;
      else if (saved == '\0' && stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        ok = false;
      }
      if (!ok)
        snprintf(failed_dir, failed_size, "%s", dir);
      *p = saved;
      if (saved == '\0')
        break;
    }
  }
  free(dir);
  return ok;
}

/* After a reply: the conversation's KV state to its file, then the cache directory back
 * under its size limit (the file just written stays). */
static bool
session_store(HnChat *chat, const HnChatRequest *req, const HnChatCallbacks *cb)
{
  if (!req->session_path || chat->s.n_held == 0)
    return false;
  char dir[4096];
  if (!make_parent_dirs(req->session_path, dir, sizeof dir)) {
    warn(cb, HN_CHAT_WARNING_SESSION_NOT_SAVED, "cannot create %s: %s", dir, strerror(errno));
    return false;
  }
  HnError err = { 0 };
  if (!hn_prompt_cache_save(chat->ctx, req->session_path, chat->s.held, (uint32_t) chat->s.n_held, &err)) {
    warn(cb, HN_CHAT_WARNING_SESSION_NOT_SAVED, "%s", err.message);
    return false;
  }
  if (req->session_cache_dir &&
      hn_session_cache_evict(req->session_cache_dir, req->session_cache_limit, req->session_path, &err) < 0)
    warn(cb, HN_CHAT_WARNING_SESSION_CACHE_NOT_TRIMMED, "%s", err.message);
  return true;
}

/* A request made ready for the generation loop: the prompt as it fits, the grammar, and
 * the KV cells of the sequence reused as far as they match.  The same for one chat and for
 * a sequence of a batch. */
typedef struct {
  HnChatPrompt prompt, negative;
  HnGrammar *owned_grammar;
  int32_t *with_prefix, *negative_with_prefix; /* the prompts + req->reply_prefix */
  HnSamplerParams default_params;
  const int32_t *prompt_ids;
  size_t n_prompt, eval_cached, prompt_total;
  bool cfg;
  HnGenRequest gr;               /* callbacks left for the caller */
} ChatPrep;

static void
chat_prep_clear(ChatPrep *p)
{
  hn_grammar_free(p->owned_grammar);
  free(p->with_prefix);
  free(p->negative_with_prefix);
  hn_chat_prompt_clear(&p->prompt);
  hn_chat_prompt_clear(&p->negative);
  memset(p, 0, sizeof *p);
}

/* session_chat: the single chat whose sequence 0 may be restored from a session file
 * (NULL: no session files). */
typedef void (*ChatDonorFn)(void *data, ChatSeq *cs, const int32_t *prompt, size_t n_prompt);

/* donor (may be NULL): called after a change of conversation and before the reuse, so that
 * a batch may give the sequence another sequence's matching cells. */
static bool
chat_prepare(HnChatModel *cm, ChatSeq *cs, HnChat *session_chat, ChatDonorFn donor, void *donor_data,
             const HnChatRequest *req, const HnChatCallbacks *cb, ChatPrep *p, HnChatStats *stats, HnError *err)
{
  const HnGrammar *grammar = NULL;
  const HnGrammarVocab *gvocab = NULL;
  size_t n_ctx = (size_t) hn_context_n_ctx(cs->ctx);
  const HnSamplerParams *sp = req->sampler;

  memset(p, 0, sizeof *p);
  memset(stats, 0, sizeof *stats);
  stats->stop_string_index = -1;
  cs->n_generated = 0;
  if (!sp) {
    hn_sampler_params_init(&p->default_params);
    sp = &p->default_params;
  }
  HnError verr = { 0 };
  if (!hn_sampler_params_validate(sp, hn_model_n_vocab(cm->model), &verr))
    return hn_error_set(err, HN_ERR_INVALID_ARG, "%s", verr.message);
  if (!load_grammar(cm, req, &grammar, &p->owned_grammar, &gvocab, err))
    return false;

  const int32_t *prompt_ids, *negative_ids = NULL;
  size_t n_prompt, n_negative = 0, dropped_tokens = 0;
  bool cfg = req->cfg_scale != 1.0f;
  if (req->prompt_tokens) {
    if (req->n_prompt_tokens == 0)
      return hn_error_set(err, HN_ERR_INVALID_ARG, "The prompt has no tokens");
    prompt_ids = req->prompt_tokens;
    n_prompt = req->n_prompt_tokens;
    /* passed on as given: hn-generate refuses guidance without a negative prompt */
    negative_ids = req->negative_tokens;
    n_negative = req->n_negative_tokens;
  } else {
    if (req->n_messages == 0)
      return hn_error_set(err, HN_ERR_INVALID_ARG, "The conversation has no messages");
    /* The conversation as it fits: the system prompt stays, the oldest turns go first, and
     * some room stays free for the reply. */
    cfg = cfg && req->cfg_negative && *req->cfg_negative;
    int32_t max_tokens = sp->max_new_tokens;
    size_t reserve = max_tokens > 0 ? HN_MIN((size_t) max_tokens, n_ctx / 2) : n_ctx / 4;
    size_t first = 0, n_full = 0;
    for (;;) {
      hn_chat_prompt_clear(&p->prompt);
      hn_chat_prompt_clear(&p->negative);
      if (!build_prompt(cm, req->system, req->messages, req->n_messages, first, req->thinking, &p->prompt, err) ||
          (cfg && !build_prompt(cm, req->cfg_negative, req->messages, req->n_messages, first, req->thinking,
                                &p->negative, err)))
        return false;
      if (first == 0)
        n_full = p->prompt.n_tokens;
      size_t need = p->prompt.n_tokens + req->n_reply_prefix + reserve +
                    (cfg ? p->negative.n_tokens + req->n_reply_prefix + reserve : 0);
      if (need <= n_ctx)
        break;
      size_t next = next_turn_end(req->messages, req->n_messages, first);
      if (next == first) {
        if (p->prompt.n_tokens + (cfg ? p->negative.n_tokens : 0) + 1 < n_ctx)
          break; /* no room for the whole reserve: generate until the context is full */
        return hn_error_set(err, HN_ERR_TOO_LONG,
                            "The last message (%zu tokens) does not fit the context (%zu tokens)",
                            p->prompt.n_tokens, n_ctx);
      }
      first = next;
    }
    if (p->prompt.fallback_reason)
      warn(cb, HN_CHAT_WARNING_TEMPLATE_FALLBACK,
           "The model’s chat template cannot be used (%s); using ChatML instead", p->prompt.fallback_reason);
    if (first > 0) {
      dropped_tokens = n_full > p->prompt.n_tokens ? n_full - p->prompt.n_tokens : 0;
      stats->n_messages_dropped = first;
      stats->n_tokens_dropped = dropped_tokens;
      if (cb->on_context_dropped)
        cb->on_context_dropped(cb->user_data, first, dropped_tokens);
    }
    prompt_ids = p->prompt.tokens;
    n_prompt = p->prompt.n_tokens;
    negative_ids = p->negative.tokens;
    n_negative = p->negative.n_tokens;
  }

  /* A forced reply prefix goes after the conversation (and after the negative prompt: CFG
   * sees the reply in both sequences), as though it had been sampled. */
  if (req->n_reply_prefix > 0) {
    int32_t n_vocab = hn_model_n_vocab(cm->model);
    for (size_t i = 0; i < req->n_reply_prefix; i++)
      if (req->reply_prefix[i] < 0 || req->reply_prefix[i] >= n_vocab)
        return hn_error_set(err, HN_ERR_INVALID_ARG,
                            "The reply prefix holds token %" PRId32 ", which the model does not have",
                            req->reply_prefix[i]);
    if (n_prompt + req->n_reply_prefix + (cfg ? n_negative + req->n_reply_prefix : 0) + 1 > n_ctx)
      return hn_error_set(err, HN_ERR_TOO_LONG,
                          "The conversation and the start of the reply (%zu tokens) do not fit the context (%zu tokens)",
                          n_prompt + req->n_reply_prefix, n_ctx);
    p->with_prefix = malloc((n_prompt + req->n_reply_prefix) * sizeof *p->with_prefix);
    p->negative_with_prefix = cfg ? malloc((n_negative + req->n_reply_prefix) * sizeof *p->negative_with_prefix) : NULL;
    if (!p->with_prefix || (cfg && !p->negative_with_prefix))
      return hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    memcpy(p->with_prefix, prompt_ids, n_prompt * sizeof *prompt_ids);
    memcpy(p->with_prefix + n_prompt, req->reply_prefix, req->n_reply_prefix * sizeof *p->with_prefix);
    prompt_ids = p->with_prefix;
    n_prompt += req->n_reply_prefix;
    if (cfg) {
      if (n_negative > 0)
        memcpy(p->negative_with_prefix, negative_ids, n_negative * sizeof *negative_ids);
      memcpy(p->negative_with_prefix + n_negative, req->reply_prefix,
             req->n_reply_prefix * sizeof *p->negative_with_prefix);
      negative_ids = p->negative_with_prefix;
      n_negative += req->n_reply_prefix;
    }
  }

  /* Reuse: the cells this sequence holds for the conversation, else its session file. */
  HnChatReuse reuse = { .n_prompt = n_prompt };
  if (!same_conversation(cs->conversation, req->conversation)) {
    char *conversation = dup_str(req->conversation);
    if (req->conversation && !conversation)
      return hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    if (session_chat)
      hn_chat_forget(session_chat);
    else
      chat_seq_forget(cs);
    cs->conversation = conversation;
    if (req->session_path && session_chat) {
      reuse.restored = true;
      reuse.n_restored = session_restore(session_chat, req->session_path, prompt_ids, n_prompt, cb);
    }
  }
  if (donor)
    donor(donor_data, cs, prompt_ids, n_prompt);
  size_t n_cached = reuse_cache(cs, prompt_ids, n_prompt, dropped_tokens);
  reuse.n_cached = n_cached;
  if (cb->on_reuse)
    cb->on_reuse(cb->user_data, &reuse);

  p->prompt_ids = prompt_ids;
  p->n_prompt = n_prompt;
  p->cfg = cfg;
  p->eval_cached = HN_MIN(n_cached, n_prompt - 1);
  p->prompt_total = n_prompt - p->eval_cached + (cfg ? n_negative : 0);

  HnGenRequest *gr = &p->gr;
  hn_gen_request_init(gr);
  gr->prompt = prompt_ids;
  gr->n_prompt = n_prompt;
  gr->n_cached = n_cached;
  if (cfg) {
    gr->negative = negative_ids;
    gr->n_negative = n_negative;
    gr->cfg_scale = req->cfg_scale;
  }
  gr->sampler = sp;
  gr->grammar = grammar;
  gr->grammar_vocab = gvocab;
  if (grammar) {
    /* a branch of an answer: the grammar already saw the answer's tokens up to it */
    gr->grammar_prefix = req->reply_prefix;
    gr->n_grammar_prefix = req->n_reply_prefix;
  }
  if (!req->prompt_tokens) {
    /* a raw prompt keeps hn-generate's own newline set (every token spelling "\n") */
    gr->newline_tokens = cm->newline_tokens;
    gr->n_newline_tokens = cm->n_newline_tokens;
  }
  gr->probs_k = req->probs_k;
  return true;
}

/* After the loop, whatever ran: the sequence holds a prefix of prompt + generated tokens
 * (the negative prompt's cells go), and the stats say how it ended.  False (err set) when
 * the generation failed for another reason than cancellation or a full cache. */
static bool
chat_conclude(ChatSeq *cs, const ChatPrep *p, const HnGenResult *res, size_t n_generated, bool gen_ok,
              const HnError *gen_err, bool cancelled, bool no_room, double time_to_first_token, HnChatStats *stats,
              HnError *err)
{
  HnKvCache *kv = hn_context_kv(cs->ctx);
  hn_kv_cache_seq_rm(kv, cs->negative_seq, -1, -1);
  int32_t pos_max = hn_kv_cache_seq_pos_max(kv, cs->seq);
  size_t n_keep = HN_MIN(pos_max < 0 ? 0 : (size_t) pos_max + 1, p->n_prompt + n_generated);
  n_keep = HN_MIN(n_keep, cs->cap);
  size_t from_prompt = HN_MIN(n_keep, p->n_prompt);
  memcpy(cs->held, p->prompt_ids, from_prompt * sizeof *p->prompt_ids);
  memcpy(cs->held + from_prompt, cs->generated, (n_keep - from_prompt) * sizeof *cs->generated);
  cs->n_held = n_keep;
  cs->n_generated = n_generated;

  stats->n_prompt = p->n_prompt;
  stats->n_reused = p->eval_cached;
  stats->n_evaluated = res->n_prompt_evaluated;
  stats->n_generated = res->n_generated;
  stats->grammar_truncated_steps = res->grammar_truncated_steps;
  stats->prompt_seconds = res->prompt_seconds;
  stats->generate_seconds = res->generate_seconds;
  stats->time_to_first_token = time_to_first_token;
  stats->seed = res->seed;
  stats->stop_string_index = res->stop_string_index;
  if (gen_ok) {
    stats->stop_reason = res->stop_reason;
    if (res->stop_reason == HN_GEN_STOP_CALLBACK && cancelled)
      stats->stop_reason = HN_GEN_STOP_CANCELLED;
  } else if (gen_err->code == HN_ERR_CANCELLED || cancelled) {
    stats->stop_reason = HN_GEN_STOP_CANCELLED;
  } else if (no_room) {
    stats->stop_reason = HN_GEN_STOP_CONTEXT_FULL;
  } else {
    stats->stop_reason = HN_GEN_STOP_ERROR;
    if (err)
      *err = *gen_err;
    return false;
  }
  return true;
}

bool
hn_chat_generate(HnChat *chat, const HnChatRequest *req, const HnChatCallbacks *callbacks, HnChatStats *stats,
                 HnError *err)
{
  static const HnChatCallbacks no_callbacks = { 0 };
  const HnChatCallbacks *cb = callbacks ? callbacks : &no_callbacks;
  ChatPrep prep;
  Run run = { 0 };
  run.t_start = hn_time_now();
  if (!chat_prepare(chat->cm, &chat->s, chat, NULL, NULL, req, cb, &prep, stats, err)) {
    chat_prep_clear(&prep);
    return false;
  }

  run.chat = chat;
  run.cs = &chat->s;
  run.cb = cb;
  run.inner = chat->gen.backend;
  run.outer = run.inner;
  run.outer.self = &run;
  run.outer.decode = run_decode;
  run.outer.get_logits = run_get_logits;
  run.outer.kv_truncate = run_kv_truncate;
  run.outer.is_eog = run_is_eog;
  run.outer.token_bytes = run_token_bytes;
  run.prompt_total = prep.prompt_total;
  prep.gr.on_token = run_on_token;
  prep.gr.on_probs = run_on_probs;
  prep.gr.user_data = &run;
  if (cb->on_first_logits) {
    run.prompt = prep.prompt_ids;
    run.n_prompt = prep.n_prompt;
    run.newline_tokens = prep.gr.newline_tokens;
    run.n_newline_tokens = prep.gr.n_newline_tokens;
    prep.gr.on_logits = run_on_logits;
  }

  HnGenResult res;
  HnError gen_err = { 0 };
  hn_context_set_cancel(chat->ctx, run_cancel, &run);
  bool gen_ok = hn_generate_with_backend(&run.outer, &prep.gr, &res, &gen_err);
  hn_context_set_cancel(chat->ctx, NULL, NULL);

  bool ok = chat_conclude(&chat->s, &prep, &res, run.n_generated, gen_ok, &gen_err, run_cancelled(&run),
                          run.no_room, run.t_first > 0 ? run.t_first - run.t_start : 0, stats, err);
  if (ok)
    stats->session_saved = session_store(chat, req, cb);
  chat_prep_clear(&prep);
  return ok;
}

/* ---- several conversations in one batch ---------------------------------------------- */

typedef enum {
  SEQ_IDLE,
  SEQ_PROMPT,  /* reading its prompt (and negative prompt) */
  SEQ_DECODE,  /* `token` is to be evaluated next */
  SEQ_DONE,    /* finished; the result waits for hn_chat_batch_take_result */
} SeqState;

typedef struct {
  ChatSeq cs;
  SeqState state;
  ChatPrep prep;
  HnGenSeq *gen;
  HnChatCallbacks cb;
  Run run;
  HnGenBatchItem *prompt_items;  /* 2 n_ctx + 2: a prompt and a negative prompt */
  size_t n_prompt_items, prompt_next;
  int32_t token;
  uint64_t started;              /* order of arrival: prompts are read oldest first */
  double t_prompt;
  bool fresh_logits;             /* this step gave the row to sample from */
  bool no_room;
  bool ok;
  HnError err;
  HnChatStats stats;
} BatchSeq;

struct HnChatBatch {
  HnChatModel *cm;
  HnContext *ctx;
  HnGenModelBackend gen;
  int n_seq;
  BatchSeq seqs[HN_CHAT_BATCH_MAX];
  HnGenBatchItem *items;         /* one pass: n_batch items */
  int *owner;                    /* the sequence of each item */
  uint64_t n_started;
};

HnChatBatch *
hn_chat_batch_new(HnChatModel *cm, const HnContextParams *params, int n_seq, HnError *err)
{
  if (n_seq < 1 || n_seq > HN_CHAT_BATCH_MAX) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "a batch has 1 to %d sequences, not %d", HN_CHAT_BATCH_MAX, n_seq);
    return NULL;
  }
  HnChatBatch *b = calloc(1, sizeof *b);
  if (!b) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return NULL;
  }
  b->cm = cm;
  b->n_seq = n_seq;
  HnContextParams cp = params ? *params : hn_context_default_params();
  int train = hn_model_n_ctx_train(cm->model);
  int per_seq = cp.n_ctx > 0 && cp.n_ctx < train ? cp.n_ctx : train;
  cp.n_seq_max = 2 * n_seq; /* the replies, then their CFG negative prompts */
  cp.n_kv_cells = (int) HN_MIN((int64_t) per_seq * n_seq, (int64_t) INT32_MAX / 2);
  b->ctx = hn_context_new(cm->model, &cp, err);
  if (!b->ctx || !hn_gen_model_backend_init(&b->gen, b->ctx, cm->vocab, err))
    goto fail;
  size_t n_ctx = (size_t) hn_context_n_ctx(b->ctx), n_batch = (size_t) hn_context_n_batch(b->ctx);
  b->items = malloc(n_batch * sizeof *b->items);
  b->owner = malloc(n_batch * sizeof *b->owner);
  if (!b->items || !b->owner)
    goto nomem;
  for (int i = 0; i < n_seq; i++) {
    BatchSeq *bs = &b->seqs[i];
    bs->cs.ctx = b->ctx;
    bs->cs.seq = i;
    bs->cs.negative_seq = n_seq + i;
    bs->cs.cap = n_ctx;
    bs->cs.held = malloc((n_ctx + 1) * sizeof *bs->cs.held);
    bs->cs.generated = malloc((n_ctx + 1) * sizeof *bs->cs.generated);
    bs->prompt_items = malloc((2 * n_ctx + 2) * sizeof *bs->prompt_items);
    if (!bs->cs.held || !bs->cs.generated || !bs->prompt_items)
      goto nomem;
  }
  return b;
nomem:
  hn_error_set(err, HN_ERR_NOMEM, "out of memory");
fail:
  hn_chat_batch_free(b);
  return NULL;
}

void
hn_chat_batch_free(HnChatBatch *b)
{
  if (!b)
    return;
  for (int i = 0; i < b->n_seq; i++) {
    BatchSeq *bs = &b->seqs[i];
    hn_gen_seq_free(bs->gen);
    chat_prep_clear(&bs->prep);
    free(bs->cs.held);
    free(bs->cs.generated);
    free(bs->cs.conversation);
    free(bs->prompt_items);
  }
  hn_gen_model_backend_clear(&b->gen);
  hn_context_free(b->ctx);
  free(b->items);
  free(b->owner);
  free(b);
}

int
hn_chat_batch_n_seq(const HnChatBatch *b)
{
  return b->n_seq;
}

HnContext *
hn_chat_batch_context(HnChatBatch *b)
{
  return b->ctx;
}

static bool
seq_running(const BatchSeq *bs)
{
  return bs->state == SEQ_PROMPT || bs->state == SEQ_DECODE;
}

bool
hn_chat_batch_busy(const HnChatBatch *b, int seq)
{
  return seq >= 0 && seq < b->n_seq && b->seqs[seq].state != SEQ_IDLE;
}

int
hn_chat_batch_n_running(const HnChatBatch *b)
{
  int n = 0;
  for (int i = 0; i < b->n_seq; i++)
    n += seq_running(&b->seqs[i]);
  return n;
}

const int32_t *
hn_chat_batch_reply_tokens(const HnChatBatch *b, int seq, size_t *n_tokens)
{
  *n_tokens = b->seqs[seq].cs.n_generated;
  return b->seqs[seq].cs.generated;
}

const int32_t *
hn_chat_batch_tokens_held(const HnChatBatch *b, int seq, size_t *n_tokens)
{
  *n_tokens = b->seqs[seq].cs.n_held;
  return b->seqs[seq].cs.held;
}

void
hn_chat_batch_forget(HnChatBatch *b, int seq)
{
  if (seq >= 0 && seq < b->n_seq && !seq_running(&b->seqs[seq]))
    chat_seq_forget(&b->seqs[seq].cs);
}

static size_t
common_prefix(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
  size_t p = 0;
  while (p < na && p < nb && a[p] == b[p])
    p++;
  return p;
}

/* A new request on cs: when another sequence holds a longer prefix of the prompt than cs
 * does (the same system prompt, a conversation that moved to another sequence), cs starts
 * from that sequence's cells, shared in the cache (hn_kv_cache_seq_cp), instead of
 * evaluating them again.  The cells of a running sequence below what it held at its start
 * do not change while it runs, so any sequence can give. */
static void
batch_donor(void *data, ChatSeq *cs, const int32_t *prompt, size_t n_prompt)
{
  HnChatBatch *b = data;
  size_t own = common_prefix(cs->held, cs->n_held, prompt, n_prompt), best = own;
  const ChatSeq *from = NULL;
  for (int i = 0; i < b->n_seq; i++) {
    const ChatSeq *o = &b->seqs[i].cs;
    if (o == cs)
      continue;
    size_t p = common_prefix(o->held, o->n_held, prompt, n_prompt);
    if (p > best) {
      best = p;
      from = o;
    }
  }
  if (!from)
    return;
  HnKvCache *kv = hn_context_kv(b->ctx);
  hn_kv_cache_seq_rm(kv, cs->seq, -1, -1);
  hn_kv_cache_seq_cp(kv, from->seq, cs->seq, 0, (int32_t) best);
  held_set(cs, prompt, best);
}

bool
hn_chat_batch_start(HnChatBatch *b, int seq, const HnChatRequest *req, const HnChatCallbacks *callbacks,
                    HnError *err)
{
  if (seq < 0 || seq >= b->n_seq)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "no sequence %d in a batch of %d", seq, b->n_seq);
  BatchSeq *bs = &b->seqs[seq];
  if (bs->state != SEQ_IDLE)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "sequence %d is busy", seq);
  if (req->session_path)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "session files are not used in a batch");
  static const HnChatCallbacks no_callbacks = { 0 };
  bs->cb = callbacks ? *callbacks : no_callbacks;
  memset(&bs->run, 0, sizeof bs->run);
  bs->run.t_start = hn_time_now();
  bs->run.cs = &bs->cs;
  bs->run.cb = &bs->cb;
  bs->no_room = false;
  if (!chat_prepare(b->cm, &bs->cs, NULL, batch_donor, b, req, &bs->cb, &bs->prep, &bs->stats, err))
    goto fail;
  bs->prep.gr.on_token = run_on_token;
  bs->prep.gr.on_probs = run_on_probs;
  bs->prep.gr.user_data = &bs->run;
  bs->gen = hn_gen_seq_new(&b->gen.backend, &bs->prep.gr, err);
  if (!bs->gen)
    goto fail;
  HnKvCache *kv = hn_context_kv(b->ctx);
  hn_kv_cache_seq_rm(kv, bs->cs.seq, (int32_t) hn_gen_seq_n_cached(bs->gen), -1);
  hn_kv_cache_seq_rm(kv, bs->cs.negative_seq, -1, -1);
  bs->n_prompt_items = hn_gen_seq_prompt_items(bs->gen, bs->cs.seq, bs->cs.negative_seq, bs->prompt_items);
  bs->prompt_next = 0;
  bs->run.prompt_total = bs->n_prompt_items;
  bs->started = b->n_started++;
  bs->t_prompt = hn_time_now();
  bs->state = SEQ_PROMPT;
  return true;
fail:
  hn_gen_seq_free(bs->gen);
  bs->gen = NULL;
  chat_prep_clear(&bs->prep);
  return false;
}

/* The sequence ends: `reason` from its own step, or imposed (cancellation, a full cache, a
 * failed pass: the generator has not stopped yet). */
static void
batch_end(BatchSeq *bs, HnGenStopReason reason, bool imposed, const HnError *gen_err)
{
  if (imposed)
    hn_gen_seq_stop(bs->gen, reason);
  const HnGenResult *res = hn_gen_seq_result(bs->gen);
  HnError none = { 0 };
  bool gen_ok = reason != HN_GEN_STOP_ERROR && !(imposed && reason == HN_GEN_STOP_CONTEXT_FULL);
  memset(&bs->err, 0, sizeof bs->err);
  bs->ok = chat_conclude(&bs->cs, &bs->prep, res, bs->run.n_generated, gen_ok, gen_err ? gen_err : &none,
                         run_cancelled(&bs->run), bs->no_room,
                         bs->run.t_first > 0 ? bs->run.t_first - bs->run.t_start : 0, &bs->stats, &bs->err);
  hn_gen_seq_free(bs->gen);
  bs->gen = NULL;
  chat_prep_clear(&bs->prep);
  bs->state = SEQ_DONE;
}

bool
hn_chat_batch_take_result(HnChatBatch *b, int seq, bool *finished, HnChatStats *stats, HnError *err)
{
  *finished = false;
  if (seq < 0 || seq >= b->n_seq || b->seqs[seq].state != SEQ_DONE)
    return false;
  BatchSeq *bs = &b->seqs[seq];
  *finished = true;
  if (stats)
    *stats = bs->stats;
  if (!bs->ok && err)
    *err = bs->err;
  bs->state = SEQ_IDLE;
  return bs->ok;
}

/* Free cells for `need` more: first the cells idle sequences keep for reuse, the oldest
 * conversation first; false when that is not enough. */
static bool
batch_make_room(HnChatBatch *b, size_t need)
{
  HnKvCache *kv = hn_context_kv(b->ctx);
  for (;;) {
    size_t free_cells = (size_t) (hn_kv_cache_n_cells(kv) - hn_kv_cache_n_used(kv));
    if (free_cells >= need)
      return true;
    BatchSeq *victim = NULL;
    for (int i = 0; i < b->n_seq; i++) {
      BatchSeq *bs = &b->seqs[i];
      if (!seq_running(bs) && bs->cs.n_held > 0 && (!victim || bs->started < victim->started))
        victim = bs;
    }
    if (!victim)
      return false;
    chat_seq_forget(&victim->cs);
  }
}

/* The running sequence that arrived last (it gives way when the cache is full). */
static BatchSeq *
batch_newest_running(HnChatBatch *b)
{
  BatchSeq *newest = NULL;
  for (int i = 0; i < b->n_seq; i++)
    if (seq_running(&b->seqs[i]) && (!newest || b->seqs[i].started > newest->started))
      newest = &b->seqs[i];
  return newest;
}

bool
hn_chat_batch_step(HnChatBatch *b, HnError *err)
{
  HnKvCache *kv = hn_context_kv(b->ctx);
  size_t n_batch = (size_t) hn_context_n_batch(b->ctx);
  for (int i = 0; i < b->n_seq; i++) {
    BatchSeq *bs = &b->seqs[i];
    bs->fresh_logits = false;
    if (seq_running(bs) && run_cancelled(&bs->run))
      batch_end(bs, HN_GEN_STOP_CANCELLED, true, NULL);
  }
  if (hn_chat_batch_n_running(b) == 0)
    return true;

  /* The next token of every generating sequence; a full cache ends the newest sequences
   * (with the stop reason a full context gives) until the rest fits. */
  size_t n = 0;
  for (;;) {
    size_t n_decode = 0;
    for (int i = 0; i < b->n_seq; i++)
      if (b->seqs[i].state == SEQ_DECODE)
        n_decode += hn_gen_seq_guided(b->seqs[i].gen) ? 2 : 1;
    bool any_prompt = false;
    for (int i = 0; i < b->n_seq; i++)
      any_prompt = any_prompt || b->seqs[i].state == SEQ_PROMPT;
    if (batch_make_room(b, n_decode + (any_prompt ? 1 : 0)))
      break;
    BatchSeq *newest = batch_newest_running(b);
    if (!newest)
      return true;
    newest->no_room = true;
    batch_end(newest, HN_GEN_STOP_CONTEXT_FULL, true, NULL);
  }
  for (int i = 0; i < b->n_seq; i++) {
    BatchSeq *bs = &b->seqs[i];
    if (bs->state != SEQ_DECODE)
      continue;
    b->items[n] = (HnGenBatchItem){ bs->token, hn_gen_seq_n_past(bs->gen, false), bs->cs.seq, true, true };
    b->owner[n++] = i;
    if (hn_gen_seq_guided(bs->gen)) {
      b->items[n] = (HnGenBatchItem){ bs->token, hn_gen_seq_n_past(bs->gen, true), bs->cs.negative_seq, true, true };
      b->owner[n++] = i;
    }
  }
  /* Then prompt tokens, oldest request first, as far as the pass and the free cells go. */
  size_t free_cells = (size_t) (hn_kv_cache_n_cells(kv) - hn_kv_cache_n_used(kv));
  size_t room = HN_MIN(n_batch, free_cells);
  size_t chunk[HN_CHAT_BATCH_MAX] = { 0 };
  for (;;) {
    BatchSeq *oldest = NULL;
    for (int i = 0; i < b->n_seq; i++) {
      BatchSeq *bs = &b->seqs[i];
      if (bs->state == SEQ_PROMPT && chunk[i] == 0 && (!oldest || bs->started < oldest->started))
        oldest = bs;
    }
    if (!oldest || n >= room)
      break;
    int i = (int) (oldest - b->seqs);
    size_t take = HN_MIN(room - n, oldest->n_prompt_items - oldest->prompt_next);
    memcpy(b->items + n, oldest->prompt_items + oldest->prompt_next, take * sizeof *b->items);
    for (size_t k = 0; k < take; k++)
      b->owner[n + k] = i;
    n += take;
    chunk[i] = take;
  }
  if (n == 0)
    return true;

  HnError pass_err = { 0 };
  if (!b->gen.backend.decode(b->gen.backend.self, b->items, n, &pass_err)) {
    for (int i = 0; i < b->n_seq; i++) {
      BatchSeq *bs = &b->seqs[i];
      bool in_pass = chunk[i] > 0 || bs->state == SEQ_DECODE;
      if (in_pass)
        batch_end(bs, HN_GEN_STOP_ERROR, true, &pass_err);
    }
    if (err)
      *err = pass_err;
    return false;
  }
  /* logits rows to their sequences */
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (!b->items[i].want_logits)
      continue;
    BatchSeq *bs = &b->seqs[b->owner[i]];
    const float *row = b->gen.backend.get_logits(b->gen.backend.self, k++);
    HnError row_err = { 0 };
    if (!seq_running(bs))
      continue;
    if (!hn_gen_seq_set_logits(bs->gen, b->items[i].seq != bs->cs.seq, row, &row_err))
      batch_end(bs, HN_GEN_STOP_ERROR, true, &row_err);
  }
  for (int i = 0; i < b->n_seq; i++) {
    BatchSeq *bs = &b->seqs[i];
    if (bs->state == SEQ_DECODE) {
      hn_gen_seq_advance(bs->gen);
      bs->fresh_logits = true;
    } else if (bs->state == SEQ_PROMPT && chunk[i] > 0) {
      bs->prompt_next += chunk[i];
      bs->run.prompt_done = bs->prompt_next;
      if (bs->cb.on_prompt_progress)
        bs->cb.on_prompt_progress(bs->cb.user_data, bs->prompt_next, bs->n_prompt_items);
      if (bs->prompt_next == bs->n_prompt_items) {
        hn_gen_seq_prompt_done(bs->gen, bs->n_prompt_items, hn_time_now() - bs->t_prompt);
        bs->fresh_logits = true;
      }
    }
  }
  /* every sequence with a new row samples its next token */
  for (int i = 0; i < b->n_seq; i++) {
    BatchSeq *bs = &b->seqs[i];
    if (!bs->fresh_logits || !seq_running(bs))
      continue;
    HnError step_err = { 0 };
    int32_t t;
    HnGenStopReason reason = hn_gen_seq_step(bs->gen, &t, &step_err);
    if (reason == HN_GEN_STOP_NONE) {
      bs->token = t;
      bs->state = SEQ_DECODE;
    } else {
      batch_end(bs, reason, false, &step_err);
    }
  }
  return true;
}
