/* hn-generate.c — the generation loop.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-generate.h"

#include "hn-cfg.h"
#include "hn-array.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *
hn_gen_stop_reason_name(HnGenStopReason r)
{
  switch (r) {
  case HN_GEN_STOP_NONE: return "none";
  case HN_GEN_STOP_EOG: return "eog";
  case HN_GEN_STOP_MAX_TOKENS: return "max-tokens";
  case HN_GEN_STOP_STRING: return "stop-string";
  case HN_GEN_STOP_GRAMMAR: return "grammar";
  case HN_GEN_STOP_CONTEXT_FULL: return "context-full";
  case HN_GEN_STOP_CANCELLED: return "cancelled";
  case HN_GEN_STOP_CALLBACK: return "callback";
  case HN_GEN_STOP_ERROR: return "error";
  }
  return "unknown";
}

void
hn_gen_request_init(HnGenRequest *req)
{
  memset(req, 0, sizeof *req);
  req->cfg_scale = 1.0f;
}

/* Byte buffer that grows only when a longer piece than ever before shows up. */
typedef struct {
  char *p;
  size_t len, cap;
} Bytes;

static bool
bytes_reserve(Bytes *b, size_t need)
{
  return HN_ARRAY_RESERVE(b->p, b->cap, need, 256);
}

static size_t
utf8_seq_len(unsigned char b)
{
  if (b < 0x80)
    return 1;
  if (b >= 0xC2 && b <= 0xDF)
    return 2;
  if (b >= 0xE0 && b <= 0xEF)
    return 3;
  if (b >= 0xF0 && b <= 0xF4)
    return 4;
  return 0; /* continuation or invalid lead */
}

/* How many leading bytes of p form whole characters (a trailing incomplete sequence that
 * may still be completed is left out). */
static size_t
utf8_complete_prefix(const char *p, size_t n)
{
  size_t back = n < 4 ? n : 4;
  for (size_t k = 1; k <= back; k++) {
    unsigned char b = (unsigned char) p[n - k];
    if ((b & 0xC0) == 0x80)
      continue;
    size_t need = utf8_seq_len(b);
    if (need > k)
      return n - k;
    return n;
  }
  return n;
}

/* Copies src to dst replacing malformed sequences by U+FFFD; dst needs 3*n bytes. */
static size_t
utf8_sanitize(const char *src, size_t n, char *dst)
{
  size_t w = 0;
  for (size_t i = 0; i < n;) {
    unsigned char b = (unsigned char) src[i];
    size_t need = utf8_seq_len(b);
    bool ok = need > 0 && i + need <= n;
    for (size_t k = 1; ok && k < need; k++)
      ok = ((unsigned char) src[i + k] & 0xC0) == 0x80;
    if (ok && need == 3) {
      unsigned char b1 = (unsigned char) src[i + 1];
      ok = !(b == 0xE0 && b1 < 0xA0) && !(b == 0xED && b1 >= 0xA0);
    } else if (ok && need == 4) {
      unsigned char b1 = (unsigned char) src[i + 1];
      ok = !(b == 0xF0 && b1 < 0x90) && !(b == 0xF4 && b1 >= 0x90);
    }
    if (ok) {
      memcpy(dst + w, src + i, need);
      w += need;
      i += need;
    } else {
      memcpy(dst + w, "\xEF\xBF\xBD", 3);
      w += 3;
      i++;
    }
  }
  return w;
}

/* One sequence's generation state: everything between a logits row and the next token
 * (guidance, sampler, grammar, UTF-8 assembly, stop strings, limits).  The loop below and
 * the batched generator (hn-chat-batch) both drive it one token at a time. */
struct HnGenSeq {
  HnGenBackend b;
  HnGenRequest req;
  HnSamplerParams defaults;
  HnGenResult res;
  HnSampler *sampler;
  HnStopMatcher *stops;
  HnGrammarState *gstate;
  float *pos_row, *neg_row, *guided;
  Bytes pending; /* bytes of an unfinished UTF-8 character */
  Bytes clean;
  bool cfg;
  int32_t n_past[2];
  double t_generate;
};

/* A forward pass over damaged weights (NaN or infinite values in the file) gives NaN
 * scores; left to the sampler they would all count as banned and the error would blame the
 * logit bias.  One pass over the row per token costs nothing next to the pass that made it. */
static bool
row_is_finite(const float *row, int32_t n)
{
  for (int32_t i = 0; i < n; i++)
    if (!isfinite(row[i]))
      return false;
  return true;
}

bool
hn_gen_seq_set_logits(HnGenSeq *g, bool negative, const float *row, HnError *err)
{
  if (row == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "the model returned no logits");
  if (!row_is_finite(row, g->b.n_vocab))
    return hn_error_set(err, HN_ERR_INVALID_NUMBERS,
                        "The model produced invalid numbers (NaN or infinity) instead of token "
                        "scores, so nothing can be generated. Its weights are probably damaged; "
                        "download the model again.");
  float *dst = negative ? g->neg_row : g->pos_row;
  if (dst)
    memcpy(dst, row, (size_t) g->b.n_vocab * sizeof *row);
  return true;
}

/* Text of a token → whole characters → stop-string filter → callback. */
static bool
emit_token(HnGenSeq *g, int32_t token, bool *stop_string, bool *callback_stop)
{
  size_t len = 0;
  const char *bytes = token >= 0 ? g->b.token_bytes(g->b.self, token, &len) : NULL;
  if (!bytes_reserve(&g->pending, g->pending.len + len + 1))
    return false;
  if (len)
    memcpy(g->pending.p + g->pending.len, bytes, len);
  g->pending.len += len;
  size_t whole = token >= 0 ? utf8_complete_prefix(g->pending.p, g->pending.len) : g->pending.len;
  if (!bytes_reserve(&g->clean, whole * 3 + 1))
    return false;
  size_t clean_len = utf8_sanitize(g->pending.p, whole, g->clean.p);
  memmove(g->pending.p, g->pending.p + whole, g->pending.len - whole);
  g->pending.len -= whole;

  const char *out = g->clean.p;
  size_t out_len = clean_len;
  if (g->stops) {
    *stop_string = hn_stop_matcher_feed(g->stops, g->clean.p, clean_len, &out, &out_len);
    if (token < 0 && !*stop_string) {
      /* the end: release what was held back too (it is behind `out` in the matcher) */
      const char *tail;
      size_t tail_len;
      if (!bytes_reserve(&g->clean, out_len + HN_SAMPLER_MAX_STOP_LEN + 1))
        return false;
      memmove(g->clean.p, out, out_len);
      hn_stop_matcher_flush(g->stops, &tail, &tail_len);
      if (!bytes_reserve(&g->clean, out_len + tail_len + 1))
        return false;
      memcpy(g->clean.p + out_len, tail, tail_len);
      out = g->clean.p;
      out_len += tail_len;
    }
  }
  if (g->req.on_token && !g->req.on_token(token, out, out_len, g->req.user_data))
    *callback_stop = true;
  return true;
}

/* The sequence ends: the text still held back goes out (not after a stop string, which
 * ends the text, nor after an error). */
static HnGenStopReason
finish(HnGenSeq *g, HnGenStopReason reason)
{
  g->res.stop_reason = reason;
  if (g->t_generate > 0)
    g->res.generate_seconds = hn_time_now() - g->t_generate;
  if (reason != HN_GEN_STOP_STRING && reason != HN_GEN_STOP_ERROR) {
    bool s = false, c = false;
    emit_token(g, -1, &s, &c);
  }
  if (g->stops && reason == HN_GEN_STOP_STRING)
    g->res.stop_string_index = hn_stop_matcher_matched(g->stops);
  if (g->gstate)
    g->res.grammar_truncated_steps = hn_grammar_state_truncated_steps(g->gstate);
  return reason;
}

size_t
hn_gen_seq_n_cached(const HnGenSeq *g)
{
  /* the last prompt token must run again to get its logits */
  return g->req.n_cached < g->req.n_prompt ? g->req.n_cached : g->req.n_prompt - 1;
}

size_t
hn_gen_seq_n_prompt_items(const HnGenSeq *g)
{
  return g->req.n_prompt - hn_gen_seq_n_cached(g) + (g->cfg ? g->req.n_negative : 0);
}

size_t
hn_gen_seq_prompt_items(const HnGenSeq *g, int32_t seq, int32_t negative_seq, HnGenBatchItem *items)
{
  size_t n = 0;
  for (size_t i = hn_gen_seq_n_cached(g); i < g->req.n_prompt; i++)
    items[n++] = (HnGenBatchItem){ g->req.prompt[i], (int32_t) i, seq, i + 1 == g->req.n_prompt, false };
  if (g->cfg)
    for (size_t i = 0; i < g->req.n_negative; i++)
      items[n++] = (HnGenBatchItem){ g->req.negative[i], (int32_t) i, negative_seq, i + 1 == g->req.n_negative,
                                     false };
  return n;
}

void
hn_gen_seq_prompt_done(HnGenSeq *g, size_t n_evaluated, double seconds)
{
  g->res.n_prompt_evaluated = n_evaluated;
  g->res.prompt_seconds = seconds;
  g->n_past[0] = (int32_t) g->req.n_prompt;
  g->n_past[1] = (int32_t) g->req.n_negative;
  for (size_t i = 0; i < g->req.n_prompt; i++)
    hn_sampler_accept(g->sampler, g->req.prompt[i]);
  g->t_generate = hn_time_now();
}

bool
hn_gen_seq_guided(const HnGenSeq *g)
{
  return g->cfg;
}

int32_t
hn_gen_seq_n_past(const HnGenSeq *g, bool negative)
{
  return g->n_past[negative ? 1 : 0];
}

void
hn_gen_seq_advance(HnGenSeq *g)
{
  g->n_past[0]++;
  if (g->cfg)
    g->n_past[1]++;
}

const HnGenResult *
hn_gen_seq_result(const HnGenSeq *g)
{
  return &g->res;
}

HnGenStopReason
hn_gen_seq_stop(HnGenSeq *g, HnGenStopReason reason)
{
  return finish(g, reason);
}

HnGenStopReason
hn_gen_seq_step(HnGenSeq *g, int32_t *token, HnError *err)
{
  const HnGenRequest *req = &g->req;
  const HnSamplerParams *sp = req->sampler;
  HnGenResult *res = &g->res;
  int32_t nv = g->b.n_vocab;
  *token = -1;
  if (req->cancel && *req->cancel)
    return finish(g, HN_GEN_STOP_CANCELLED);
  if (sp->max_new_tokens >= 0 && res->n_generated >= (size_t) sp->max_new_tokens)
    return finish(g, HN_GEN_STOP_MAX_TOKENS);
  const float *row = g->pos_row;
  if (g->cfg) {
    hn_cfg_combine(g->pos_row, g->neg_row, req->cfg_scale, g->guided, nv);
    row = g->guided;
  }
  if (req->on_logits)
    req->on_logits(row, nv, req->user_data);
  int32_t t = hn_sampler_sample(g->sampler, row, g->gstate, err);
  if (t < 0)
    return finish(g, HN_GEN_STOP_ERROR);
  res->n_generated++;
  if (req->on_probs && hn_sampler_last_probs(g->sampler))
    req->on_probs(hn_sampler_last_probs(g->sampler), req->user_data);
  if (g->b.is_eog(g->b.self, t))
    return finish(g, HN_GEN_STOP_EOG);
  if (g->gstate && !hn_grammar_accept_token(g->gstate, t)) {
    hn_error_set(err, HN_ERR_GRAMMAR, "internal error: sampled token %d rejected by the grammar", t);
    return finish(g, HN_GEN_STOP_ERROR);
  }
  hn_sampler_accept(g->sampler, t);
  bool stop_string = false, callback_stop = false;
  if (!emit_token(g, t, &stop_string, &callback_stop)) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return finish(g, HN_GEN_STOP_ERROR);
  }
  if (stop_string)
    return finish(g, HN_GEN_STOP_STRING);
  if (callback_stop)
    return finish(g, HN_GEN_STOP_CALLBACK);
  if (g->gstate && !hn_grammar_can_continue(g->gstate))
    return finish(g, HN_GEN_STOP_GRAMMAR);
  if (g->n_past[0] >= g->b.n_ctx || (g->cfg && g->n_past[1] >= g->b.n_ctx))
    return finish(g, HN_GEN_STOP_CONTEXT_FULL);
  /* no need to decode a token nobody will sample from */
  if (sp->max_new_tokens >= 0 && res->n_generated >= (size_t) sp->max_new_tokens)
    return finish(g, HN_GEN_STOP_MAX_TOKENS);
  *token = t;
  return HN_GEN_STOP_NONE;
}

HnGenSeq *
hn_gen_seq_new(const HnGenBackend *b, const HnGenRequest *req, HnError *err)
{
  if (!b || !req || !b->decode || !b->get_logits || !b->kv_truncate || !b->is_eog ||
      !b->token_bytes || b->n_vocab <= 0 || b->n_ctx <= 0 || b->max_batch < 2) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "incomplete generation backend");
    return NULL;
  }
  if (req->prompt == NULL || req->n_prompt == 0) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "the prompt is empty");
    return NULL;
  }
  if (req->n_prompt >= (size_t) b->n_ctx) {
    hn_error_set(err, HN_ERR_TOO_LONG,
                 "the prompt is %zu tokens long, but the context holds %d tokens and needs room "
                 "for at least one new token",
                 req->n_prompt, b->n_ctx);
    return NULL;
  }
  if (!(req->cfg_scale >= HN_CFG_SCALE_MIN && req->cfg_scale <= HN_CFG_SCALE_MAX)) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "cfg_scale must be between %g and %g", (double) HN_CFG_SCALE_MIN,
                 (double) HN_CFG_SCALE_MAX);
    return NULL;
  }
  bool cfg = req->cfg_scale != 1.0f;
  if (cfg && (req->negative == NULL || req->n_negative == 0)) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "guidance needs a negative prompt");
    return NULL;
  }
  if (cfg && req->n_negative >= (size_t) b->n_ctx) {
    hn_error_set(err, HN_ERR_TOO_LONG,
                 "the negative prompt is %zu tokens long, but the context holds %d tokens and "
                 "needs room for at least one new token",
                 req->n_negative, b->n_ctx);
    return NULL;
  }
  for (size_t i = 0; i < req->n_prompt; i++)
    if (req->prompt[i] < 0 || req->prompt[i] >= b->n_vocab) {
      hn_error_set(err, HN_ERR_INVALID_ARG, "prompt token %d is not in the vocabulary", req->prompt[i]);
      return NULL;
    }
  for (size_t i = 0; cfg && i < req->n_negative; i++)
    if (req->negative[i] < 0 || req->negative[i] >= b->n_vocab) {
      hn_error_set(err, HN_ERR_INVALID_ARG, "negative prompt token %d is not in the vocabulary",
                   req->negative[i]);
      return NULL;
    }
  if (req->grammar &&
      (req->grammar_vocab == NULL || hn_grammar_vocab_n_vocab(req->grammar_vocab) != b->n_vocab)) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "a grammar needs the model's grammar vocabulary");
    return NULL;
  }

  HnGenSeq *g = calloc(1, sizeof *g);
  if (!g) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return NULL;
  }
  g->b = *b;
  g->req = *req;
  g->cfg = cfg;
  g->res.stop_string_index = -1;
  g->res.stop_reason = HN_GEN_STOP_NONE;
  hn_sampler_params_init(&g->defaults);
  if (g->req.sampler == NULL)
    g->req.sampler = &g->defaults;
  if (!cfg) {
    g->req.negative = NULL;
    g->req.n_negative = 0;
  }
  g->sampler = hn_sampler_new(g->req.sampler, b->n_vocab, b->n_ctx, err);
  if (!g->sampler)
    goto fail;
  g->res.seed = hn_sampler_get_seed(g->sampler);
  if (g->req.probs_k != 0 && !hn_sampler_set_probs(g->sampler, g->req.probs_k, err))
    goto fail;
  if (g->req.n_newline_tokens == 0) {
    g->req.newline_tokens = b->newline_tokens;
    g->req.n_newline_tokens = b->n_newline_tokens;
  }
  if (g->req.n_newline_tokens &&
      !hn_sampler_set_newline_tokens(g->sampler, g->req.newline_tokens, g->req.n_newline_tokens, err))
    goto fail;
  if (g->req.sampler->n_stop) {
    g->stops = hn_stop_matcher_new(g->req.sampler->stop, g->req.sampler->n_stop, err);
    if (!g->stops)
      goto fail;
  }
  if (g->req.grammar) {
    g->gstate = hn_grammar_state_new(g->req.grammar, g->req.grammar_vocab, err);
    if (!g->gstate)
      goto fail;
    for (size_t i = 0; i < g->req.n_grammar_prefix; i++)
      if (!hn_grammar_accept_token(g->gstate, g->req.grammar_prefix[i])) {
        hn_error_set(err, HN_ERR_INVALID_ARG,
                     "The start of the reply (token %zu of it) does not follow the grammar, so the reply "
                     "cannot go on from there under it", i + 1);
        goto fail;
      }
  }
  g->pos_row = malloc((size_t) b->n_vocab * sizeof *g->pos_row);
  g->neg_row = cfg ? malloc((size_t) b->n_vocab * sizeof *g->neg_row) : NULL;
  g->guided = cfg ? malloc((size_t) b->n_vocab * sizeof *g->guided) : NULL;
  if (!g->pos_row || (cfg && (!g->neg_row || !g->guided)) || !bytes_reserve(&g->pending, 256) ||
      !bytes_reserve(&g->clean, 1024)) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto fail;
  }
  return g;
fail:
  hn_gen_seq_free(g);
  return NULL;
}

void
hn_gen_seq_free(HnGenSeq *g)
{
  if (!g)
    return;
  hn_sampler_free(g->sampler);
  hn_stop_matcher_free(g->stops);
  hn_grammar_state_free(g->gstate);
  free(g->pos_row);
  free(g->neg_row);
  free(g->guided);
  free(g->pending.p);
  free(g->clean.p);
  free(g);
}

/* Evaluates items[0..n) in batches of max_batch, handing the logits rows of sequence 0
 * and 1 to the generator. */
static bool
run_items(const HnGenBackend *b, HnGenSeq *g, const HnGenBatchItem *items, size_t n, HnError *err)
{
  size_t step = (size_t) b->max_batch;
  for (size_t off = 0; off < n; off += step) {
    size_t m = n - off < step ? n - off : step;
    if (!b->decode(b->self, items + off, m, err))
      return false;
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
      if (items[off + i].want_logits &&
          !hn_gen_seq_set_logits(g, items[off + i].seq != 0, b->get_logits(b->self, k++), err))
        return false;
  }
  return true;
}

static bool
generate(const HnGenBackend *b, HnGenSeq *g, HnGenBatchItem *items, HnError *err)
{
  double t0 = hn_time_now();
  b->kv_truncate(b->self, 0, (int32_t) hn_gen_seq_n_cached(g));
  if (g->cfg)
    b->kv_truncate(b->self, 1, 0);
  size_t n_items = hn_gen_seq_prompt_items(g, 0, 1, items);
  if (!run_items(b, g, items, n_items, err)) {
    finish(g, HN_GEN_STOP_ERROR);
    return false;
  }
  hn_gen_seq_prompt_done(g, n_items, hn_time_now() - t0);
  for (;;) {
    int32_t t;
    HnGenStopReason reason = hn_gen_seq_step(g, &t, err);
    if (reason != HN_GEN_STOP_NONE)
      return reason != HN_GEN_STOP_ERROR;
    HnGenBatchItem step[2] = { { t, g->n_past[0], 0, true, true }, { t, g->n_past[1], 1, true, true } };
    if (!run_items(b, g, step, g->cfg ? 2 : 1, err)) {
      finish(g, HN_GEN_STOP_ERROR);
      return false;
    }
    hn_gen_seq_advance(g);
  }
}

bool
hn_generate_with_backend(const HnGenBackend *b, const HnGenRequest *req, HnGenResult *res,
                         HnError *err)
{
  memset(res, 0, sizeof *res);
  res->stop_string_index = -1;
  res->stop_reason = HN_GEN_STOP_ERROR;
  HnGenSeq *g = hn_gen_seq_new(b, req, err);
  if (!g)
    return false;
  HnGenBatchItem *items = malloc((hn_gen_seq_n_prompt_items(g) + 2) * sizeof *items);
  bool ok = false;
  if (!items)
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
  else
    ok = generate(b, g, items, err);
  *res = g->res;
  if (!ok)
    res->stop_reason = HN_GEN_STOP_ERROR;
  if (g->gstate)
    res->grammar_truncated_steps = hn_grammar_state_truncated_steps(g->gstate);
  free(items);
  hn_gen_seq_free(g);
  return ok;
}
