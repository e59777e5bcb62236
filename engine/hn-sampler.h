/* hn-sampler.h — turns one row of logits into the next token.
 *
 * The chain, applied in this order to the whole vocabulary:
 *
 *   logit bias → repetition penalties → grammar mask → top-k → typical-p → top-p
 *   → min-p → temperature → draw
 *
 * With mirostat 1 or 2 the truncation stages (top-k … min-p) are replaced:
 *   logit bias → penalties → grammar → temperature → mirostat truncation → draw.
 * Temperature <= 0 means greedy: the argmax after bias, penalties and grammar.
 *
 * A sampler owns every buffer it needs (allocated once for n_vocab), its own random
 * state (xoshiro256**, seeded from `seed`) and the token history used by the penalties.
 * Nothing is allocated per token.  See docs/sampling.md for the definitions.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct HnGrammarState HnGrammarState;

/* One entry of the candidate array that every stage works on. */
typedef struct {
  int32_t id;
  float logit;
  float p;
} HnCandidate;

typedef struct {
  int32_t token;
  float bias;      /* added to the logit; -INFINITY bans the token */
} HnLogitBias;

#define HN_SAMPLER_SEED_RANDOM UINT64_MAX
#define HN_SAMPLER_MAX_STOP 16
#define HN_SAMPLER_MAX_STOP_LEN 256
#define HN_SAMPLER_MAX_LOGIT_BIAS 4096

/* Defaults and ranges of the numeric fields: the table in hn-params.c (one row each). */
typedef struct {
  float temperature;        /* <= 0 = greedy */
  int32_t top_k;            /* 0 (or >= n_vocab) = off */
  float top_p;              /* 1 = off */
  float min_p;              /* 0 = off */
  float typical_p;          /* 1 = off */
  float repeat_penalty;     /* 1 = off */
  int32_t repeat_last_n;    /* -1 = whole history, 0 = penalties off */
  float frequency_penalty;  /* 0 = off */
  float presence_penalty;   /* 0 = off */
  bool penalize_nl;         /* false: newline tokens keep their logit through the penalties */
  int32_t mirostat;         /* 0 (off), 1 or 2 */
  float mirostat_tau;       /* target surprise in bits */
  float mirostat_eta;       /* learning rate */
  uint64_t seed;            /* HN_SAMPLER_SEED_RANDOM = pick one from the clock */
  const HnLogitBias *logit_bias;   /* copied by hn_sampler_new */
  size_t n_logit_bias;             /* <= HN_SAMPLER_MAX_LOGIT_BIAS */
  int32_t max_new_tokens;   /* -1 = until the context is full */
  const char *const *stop;  /* stop strings, copied by hn_stop_matcher_new */
  size_t n_stop;            /* <= HN_SAMPLER_MAX_STOP, each 1..HN_SAMPLER_MAX_STOP_LEN bytes */
} HnSamplerParams;

/* The table's defaults; no logit biases, no stop strings. */
void hn_sampler_params_init(HnSamplerParams *params);

/* Checks every field against its documented range (n_vocab for the logit-bias ids;
 * pass 0 to skip that check).  The message names the field. */
bool hn_sampler_params_validate(const HnSamplerParams *params, int32_t n_vocab, HnError *err);

/* Pulls every numeric field into its range (NaN becomes the default).  Pointers and
 * counts are not touched; logit-bias entries are validated, not clamped. */
void hn_sampler_params_clamp(HnSamplerParams *params, int32_t n_vocab);

/* Sets the parameter named `key` (a key of the hn-params.h table); false (with a message) for an unknown key or a value
 * out of range. */
bool hn_sampler_params_set(HnSamplerParams *params, const char *key, double value, HnError *err);
/* Reads it back; false for an unknown key. */
bool hn_sampler_params_get(const HnSamplerParams *params, const char *key, double *value);

typedef struct HnSampler HnSampler;

/* `n_history` is the most tokens the penalties ever look at when repeat_last_n is -1
 * (normally the context length). */
HnSampler *hn_sampler_new(const HnSamplerParams *params, int32_t n_vocab, int32_t n_history,
                          HnError *err);
void hn_sampler_free(HnSampler *sampler);

/* The seed in use (the drawn one if params asked for a random seed). */
uint64_t hn_sampler_get_seed(const HnSampler *sampler);

/* How the grammar checks went: a draw the grammar allowed costs one token check; only a
 * rejected one masks the whole vocabulary and draws again. */
typedef struct {
  uint64_t lazy_accepted; /* draws kept after checking just the drawn token */
  uint64_t full_masks;    /* draws rejected, so the vocabulary was masked */
} HnSamplerGrammarStats;
HnSamplerGrammarStats hn_sampler_grammar_stats(const HnSampler *sampler);

/* Tokens that count as a newline for penalize_nl = false (usually "\n" and <0x0A>). */
bool hn_sampler_set_newline_tokens(HnSampler *sampler, const int32_t *ids, size_t n, HnError *err);

/* Forgets history and mirostat state and re-seeds the random generator. */
void hn_sampler_reset(HnSampler *sampler);

/* Appends a token (prompt or generated) to the penalty history. */
void hn_sampler_accept(HnSampler *sampler, int32_t token);

/* Samples from one row of n_vocab logits.  With a grammar state, only a token that the
 * grammar accepts can come out (end-of-generation only where the grammar may end); the
 * state is NOT advanced — call hn_grammar_state_accept_token with the result.  Returns
 * the token id, or -1 when no token is possible (err says why). */
int32_t hn_sampler_sample(HnSampler *sampler, const float *logits, HnGrammarState *grammar,
                          HnError *err);

/* For tests and diagnostics: the candidates that the last hn_sampler_sample drew from
 * (after the whole chain, probabilities normalised), valid until the next call. */
const HnCandidate *hn_sampler_last_candidates(const HnSampler *sampler, size_t *n_out);

/* ---- What the sampler saw: token probabilities -------------------------------------
 * With recording on (hn_sampler_set_probs), every hn_sampler_sample and hn_sampler_probe
 * fills one HnTokenProbs in a buffer the sampler owns (no allocation per token):
 *
 *  - candidates: the K most likely tokens of the model's raw distribution (the logits as
 *    given, before any stage; NaN counts as -inf), highest first, ties by lower id;
 *  - logprob: the raw log-probability, log-softmax of the given logits;
 *  - p: the probability after the whole chain (what the draw used), 0 when a stage
 *    removed the token;
 *  - removed_by: the first stage that removed it (HN_STAGE_NONE when it survived).
 *
 * The stages and their names (hn_sampler_stage_name), in chain order:
 *   "logit_bias"   a -inf bias banned it
 *   "repetition"   the penalties left it at -inf
 *   "grammar"      the grammar does not allow it here
 *   "top_k", "typical", "top_p", "min_p"   the truncations
 *   "temperature"  temperature <= 0 (greedy) keeps only the argmax
 *   "mirostat"     mirostat's truncation (replaces top_k … min_p)
 * Temperature > 0 reshapes but never removes.
 *
 * With a grammar, recording masks the vocabulary for every token (no lazy check), so the
 * recorded distribution is the one the token was drawn from; see docs/sampling.md. */
typedef enum {
  HN_STAGE_NONE = 0,
  HN_STAGE_LOGIT_BIAS,
  HN_STAGE_REPETITION,
  HN_STAGE_GRAMMAR,
  HN_STAGE_TOP_K,
  HN_STAGE_TYPICAL,
  HN_STAGE_TOP_P,
  HN_STAGE_MIN_P,
  HN_STAGE_TEMPERATURE,
  HN_STAGE_MIROSTAT,
  HN_STAGE_COUNT
} HnSamplerStage;

/* "top_k" etc.; NULL for HN_STAGE_NONE or an unknown value. */
const char *hn_sampler_stage_name(HnSamplerStage stage);
/* The stage with that name; HN_STAGE_NONE when there is none. */
HnSamplerStage hn_sampler_stage_from_name(const char *name);

#define HN_PROBS_MAX_K 20

typedef struct {
  int32_t id;
  float logprob;   /* raw log-softmax */
  float p;         /* after the whole chain; 0 if removed */
  uint8_t removed_by; /* HnSamplerStage */
} HnProbCandidate;

typedef struct {
  int32_t token;     /* the token drawn (for hn_sampler_probe: the one that would be) */
  float logprob;     /* its raw log-probability */
  float p;           /* its probability after the whole chain: how likely the choice was */
  uint32_t n_candidates;
  HnProbCandidate candidates[HN_PROBS_MAX_K];
} HnTokenProbs;

/* k = 0 turns recording off; 1..HN_PROBS_MAX_K turns it on for the k best raw candidates. */
bool hn_sampler_set_probs(HnSampler *sampler, int32_t k, HnError *err);
int32_t hn_sampler_get_probs_k(const HnSampler *sampler);
/* The record of the last sample or probe, NULL when recording is off or nothing was sampled
 * yet; valid until the next call. */
const HnTokenProbs *hn_sampler_last_probs(const HnSampler *sampler);

/* Runs the chain on one row exactly as hn_sampler_sample would (history, mirostat mu and
 * the random state included) and records it, but changes no state: the random generator
 * and mu are as before.  For showing what the settings do to a stored row.  Needs
 * recording on.  Returns the token the draw would give, or -1 (err says why). */
int32_t hn_sampler_probe(HnSampler *sampler, const float *logits, HnGrammarState *grammar,
                         HnError *err);

/* The raw part alone: the k (<= HN_PROBS_MAX_K) best tokens of a row by partial selection,
 * highest first, with their log-softmax; p and removed_by are left 0.  Returns how many. */
uint32_t hn_probs_top_raw(const float *logits, int32_t n_vocab, uint32_t k, HnProbCandidate *out);

/* ---- The lens --------------------------------------------------------------------
 * What given settings do to one stored row of logits: the parameter panel's live view of
 * the next token.  It runs the sampler's own chain and recording (the code is shared, not
 * copied) from explicit inputs instead of a sampler's state, so that a slider move costs
 * one pass over the stored row and no model run.  Nothing in the chain sorts the whole
 * vocabulary (top-p and typical-p cut large sets by histogram buckets), so one computation
 * takes a few milliseconds on a 150k vocabulary whatever the settings (bench-probs).  An
 * HnLens owns every buffer for one vocabulary size: nothing is allocated per computation. */
typedef struct HnLens HnLens;

typedef struct {
  const float *logits;         /* the raw row: n_vocab scores of the next position */
  const int32_t *history;      /* the tokens before it, oldest first, for the penalties */
  size_t n_history;
  const uint32_t *allowed;     /* NULL (no grammar) or (n_vocab + 31) / 32 words: bit i % 32
                                * of word i / 32 is set when the grammar allows token i */
  const int32_t *newline_ids;  /* the tokens penalize_nl = false exempts (at most 8) */
  size_t n_newline;
  float mirostat_mu;           /* mirostat's state; NaN: its value when an answer starts,
                                * 2·tau.  Mirostat's cut depends on it, so a lens can only
                                * show it for a given state. */
} HnLensInput;

HnLens *hn_lens_new(int32_t n_vocab, HnError *err);
void hn_lens_free(HnLens *lens);
int32_t hn_lens_n_vocab(const HnLens *lens);

/* Fills *out exactly as hn_sampler_sample's recording would for this row, history and
 * grammar under `params`: the k (1..HN_PROBS_MAX_K) best raw candidates with their raw
 * logprob, p after the whole chain and the stage that removed each; out->token is what a
 * draw seeded with params->seed would pick (0 for a random seed).  Returns false (err says
 * why) for invalid parameters or inputs, and when no token survives (a grammar that allows
 * none here): out then still holds the raw candidates, every one marked removed. */
bool hn_lens_compute(HnLens *lens, const HnSamplerParams *params, const HnLensInput *in, uint32_t k,
                     HnTokenProbs *out, HnError *err);

/* Current mirostat mu (2·tau after a reset). */
float hn_sampler_mirostat_mu(const HnSampler *sampler);

/* ---- The stages on their own, for tests and for other callers ----------------------
 * Each works on cands[0..*n) in place and may reorder and shrink it.  Stages that need
 * probabilities compute them from the logits (softmax over the current set); on return
 * the `p` field holds the softmax of the surviving set. */
void hn_sampler_softmax(HnCandidate *cands, size_t n);
void hn_sampler_apply_top_k(HnCandidate *cands, size_t *n, int32_t k);
void hn_sampler_apply_typical(HnCandidate *cands, size_t *n, float typical_p);
void hn_sampler_apply_top_p(HnCandidate *cands, size_t *n, float top_p);
void hn_sampler_apply_min_p(HnCandidate *cands, size_t *n, float min_p);
void hn_sampler_apply_temperature(HnCandidate *cands, size_t n, float temperature);
/* Penalties over a history: counts[] must be n_vocab zeros (it is returned zeroed). */
void hn_sampler_apply_penalties(float *logits, int32_t n_vocab, const int32_t *history,
                                size_t n_history, float repeat_penalty, float frequency_penalty,
                                float presence_penalty, uint32_t *counts,
                                const int32_t *keep_ids, size_t n_keep);

/* ---- Random numbers -------------------------------------------------------------- */
typedef struct {
  uint64_t s[4];
} HnRng;
void hn_rng_seed(HnRng *rng, uint64_t seed);
uint64_t hn_rng_next(HnRng *rng);
/* Uniform in [0, 1) with 53 bits. */
double hn_rng_uniform(HnRng *rng);

/* ---- Stop strings ---------------------------------------------------------------
 * Watches the generated text for stop strings.  Text that could still be the start of a
 * stop string is held back until it is known not to be; the streaming code shows only
 * what hn_stop_matcher_feed hands out. */
typedef struct HnStopMatcher HnStopMatcher;

HnStopMatcher *hn_stop_matcher_new(const char *const *stops, size_t n_stops, HnError *err);
void hn_stop_matcher_free(HnStopMatcher *matcher);
void hn_stop_matcher_reset(HnStopMatcher *matcher);

/* Feeds the next piece of text.  *emit / *emit_len receive the text that may be shown
 * now (valid until the next call).  Returns true when a stop string was completed: the
 * emitted text is then everything before it, and the matcher ignores further input. */
bool hn_stop_matcher_feed(HnStopMatcher *matcher, const char *piece, size_t len,
                          const char **emit, size_t *emit_len);

/* Releases the text still held back (at the end of generation without a stop). */
void hn_stop_matcher_flush(HnStopMatcher *matcher, const char **emit, size_t *emit_len);

/* Index of the stop string that matched, or -1. */
int hn_stop_matcher_matched(const HnStopMatcher *matcher);

#ifdef __cplusplus
}
#endif
