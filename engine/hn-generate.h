/* hn-generate.h — the generation loop shared by hanashi-cli and the engine thread.
 *
 * Evaluates the prompt, then samples and decodes one token at a time until
 * end-of-generation, the token limit, a stop string, the end of the grammar, a full
 * context, cancellation or the callback says stop.  Optional: a grammar constrains the
 * output; a negative prompt with cfg_scale != 1 runs classifier-free guidance as a second
 * sequence (id 1) in the same batches and KV cache as the chat (id 0).
 *
 * The loop talks to the model through HnGenBackend (a few function pointers), so that it
 * can be driven by the real model (see hn-generate-model.h) or by a scripted one in tests.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"
#include "hn-grammar.h"
#include "hn-sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int32_t token;
  int32_t pos;
  int32_t seq;
  bool want_logits;
  bool sampled;       /* a sampled token fed back (see HnBatch.sampled), not a prompt token */
} HnGenBatchItem;

typedef struct {
  void *self;
  int32_t n_vocab;
  int32_t n_ctx;      /* positions per sequence */
  int32_t max_batch;  /* most items per decode call (>= 2) */
  /* Evaluates the items as one batch.  Afterwards get_logits(k) is the row of the k-th
   * item that asked for logits (k counts only those), valid until the next decode. */
  bool (*decode)(void *self, const HnGenBatchItem *items, size_t n, HnError *err);
  const float *(*get_logits)(void *self, size_t k);
  /* Forgets positions >= from of sequence seq (from 0 = the whole sequence). */
  void (*kv_truncate)(void *self, int32_t seq, int32_t from);
  bool (*is_eog)(void *self, int32_t token);
  /* The exact bytes of a token (may be a partial UTF-8 sequence, may be empty). */
  const char *(*token_bytes)(void *self, int32_t token, size_t *len);
  /* The vocabulary's newline tokens, for penalize_nl = false when the request names none. */
  const int32_t *newline_tokens;
  size_t n_newline_tokens;
} HnGenBackend;

typedef enum {
  HN_GEN_STOP_NONE = 0,
  HN_GEN_STOP_EOG,          /* the model ended its turn */
  HN_GEN_STOP_MAX_TOKENS,   /* max_new_tokens reached */
  HN_GEN_STOP_STRING,       /* a stop string appeared (not included in the text) */
  HN_GEN_STOP_GRAMMAR,      /* the grammar is complete and allows nothing more */
  HN_GEN_STOP_CONTEXT_FULL, /* no room left in the context */
  HN_GEN_STOP_CANCELLED,    /* *cancel became true */
  HN_GEN_STOP_CALLBACK,     /* on_token returned false */
  HN_GEN_STOP_ERROR,        /* err says what went wrong */
} HnGenStopReason;

const char *hn_gen_stop_reason_name(HnGenStopReason reason);

/* Called for every generated token with the text that may be shown now: complete UTF-8
 * only, with anything that could start a stop string held back (so `text` may be empty).
 * Return false to stop. */
typedef bool (*HnGenTokenFunc)(int32_t token, const char *text, size_t len, void *user_data);

/* With probs_k > 0: what the sampler saw for each sampled token (the end-of-generation
 * token included), right after the draw and before on_token; valid during the call. */
typedef void (*HnGenProbsFunc)(const HnTokenProbs *probs, void *user_data);

/* For tests and diagnostics: the row the sampler is about to see (after guidance). */
typedef void (*HnGenLogitsFunc)(const float *logits, int32_t n_vocab, void *user_data);

typedef struct {
  const int32_t *prompt;      /* sequence 0 */
  size_t n_prompt;
  /* How many leading prompt tokens sequence 0 already holds in the KV cache (they are
   * not evaluated again); the rest of sequence 0 is dropped first. */
  size_t n_cached;
  const int32_t *negative;    /* sequence 1 for guidance; ignored when cfg_scale == 1 */
  size_t n_negative;
  float cfg_scale;            /* 1 = no guidance */
  const HnSamplerParams *sampler;     /* NULL = defaults */
  const HnGrammar *grammar;           /* optional */
  const HnGrammarVocab *grammar_vocab; /* required with a grammar (build it once per model) */
  /* The last tokens of the prompt that the grammar has already seen: a reply's forced
   * start (a branch of an answer), so the grammar goes on after them instead of starting
   * over; a token it does not accept is an error. */
  const int32_t *grammar_prefix;
  size_t n_grammar_prefix;
  const int32_t *newline_tokens;      /* for penalize_nl = false */
  size_t n_newline_tokens;
  HnGenTokenFunc on_token;
  HnGenLogitsFunc on_logits;
  int32_t probs_k;            /* 0 = off; else 1..HN_PROBS_MAX_K candidates per token */
  HnGenProbsFunc on_probs;
  void *user_data;
  const volatile bool *cancel; /* polled between tokens; may be NULL */
} HnGenRequest;

typedef struct {
  HnGenStopReason stop_reason;
  int stop_string_index;       /* with HN_GEN_STOP_STRING */
  size_t n_prompt_evaluated;   /* prompt tokens actually run (both sequences) */
  size_t n_generated;          /* tokens sampled */
  double prompt_seconds;
  double generate_seconds;
  uint64_t seed;               /* the seed used (drawn if the request asked for random) */
  size_t grammar_truncated_steps; /* see hn_grammar_state_truncated_steps(); 0 without a grammar */
} HnGenResult;

void hn_gen_request_init(HnGenRequest *req);

/* Runs the loop.  `result` is always filled (tokens produced so far, timings); returns
 * false, with stop_reason HN_GEN_STOP_ERROR and err set, when something failed (a bad
 * request, a prompt longer than the context, a decode error, a grammar that allows no
 * token).  After the last token, on_token is called once more with token -1 and the text
 * that was still held back (possibly empty). */
bool hn_generate_with_backend(const HnGenBackend *backend, const HnGenRequest *req,
                              HnGenResult *result, HnError *err);

/* ---- one sequence, one token at a time ------------------------------------------------
 *
 * What hn_generate_with_backend does between two forward passes, for a caller that runs
 * the passes itself (hn-chat-batch: several sequences in one batch).  The backend is used
 * for its vocabulary size, context size, is_eog and token_bytes only; the caller decodes:
 *   g = hn_gen_seq_new(b, req, err);
 *   remove the sequence's cells from hn_gen_seq_n_cached(g) on (and the negative one's);
 *   evaluate hn_gen_seq_prompt_items(g, seq, negative_seq, items), handing the logits rows
 *   to hn_gen_seq_set_logits; hn_gen_seq_prompt_done(g, ...);
 *   while (hn_gen_seq_step(g, &t, err) == HN_GEN_STOP_NONE) {
 *     evaluate t at hn_gen_seq_n_past(g, false) (and, guided, at n_past(g, true) of the
 *     negative sequence), set the logits, hn_gen_seq_advance(g);
 *   }
 * A step that returns a stop reason has finished the sequence (the held-back text went to
 * on_token); HN_GEN_STOP_ERROR comes with err set. */
typedef struct HnGenSeq HnGenSeq;

/* Validates the request as hn_generate_with_backend does; NULL with err set. */
HnGenSeq *hn_gen_seq_new(const HnGenBackend *b, const HnGenRequest *req, HnError *err);
void hn_gen_seq_free(HnGenSeq *g);
/* Prompt tokens the KV cache keeps (n_cached, at most n_prompt - 1). */
size_t hn_gen_seq_n_cached(const HnGenSeq *g);
/* How many items hn_gen_seq_prompt_items writes, and the items: the prompt from
 * n_cached on in `seq`, and with guidance the whole negative prompt in negative_seq. */
size_t hn_gen_seq_n_prompt_items(const HnGenSeq *g);
size_t hn_gen_seq_prompt_items(const HnGenSeq *g, int32_t seq, int32_t negative_seq, HnGenBatchItem *items);
/* A logits row of the sequence (negative: of the negative prompt's); checked for NaN. */
bool hn_gen_seq_set_logits(HnGenSeq *g, bool negative, const float *row, HnError *err);
void hn_gen_seq_prompt_done(HnGenSeq *g, size_t n_evaluated, double seconds);
HnGenStopReason hn_gen_seq_step(HnGenSeq *g, int32_t *token, HnError *err);
bool hn_gen_seq_guided(const HnGenSeq *g);
int32_t hn_gen_seq_n_past(const HnGenSeq *g, bool negative);
void hn_gen_seq_advance(HnGenSeq *g);
/* Ends the sequence from outside (a failed pass, cancellation, a full cache): the text
 * held back goes out as after a step that stopped for this reason. */
HnGenStopReason hn_gen_seq_stop(HnGenSeq *g, HnGenStopReason reason);
/* Counts, timings and the stop reason so far. */
const HnGenResult *hn_gen_seq_result(const HnGenSeq *g);

#ifdef __cplusplus
}
#endif
