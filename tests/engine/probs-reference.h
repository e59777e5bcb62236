/* probs-reference.h — the sampler chain computed again, independently and in double
 * precision, straight from its definition in docs/sampling.md: for every token of a logit
 * row, its probability after the whole chain (0 if removed) and the first stage that
 * removed it.  The engine's recording (HnTokenProbs) must agree with it.
 *
 * Cut-offs decided by a hair (a cumulative mass within REF_EPS of top-p, two logits that
 * float and double may order differently at the top-k edge, …) are reported as
 * borderline: the engine works in float, so such a step proves nothing either way and
 * callers skip it (and count how many they compared).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hn-sampler.h"

#define REF_EPS 1e-5
/* a float sum of a few thousand probabilities is good to about 1e-7 */
#define REF_MASS_EPS 1e-6

typedef struct {
  int32_t id;
  double logit;
  double p;
  double score; /* typical-p */
  size_t rank;
} RefCand;

typedef struct {
  double *p;           /* n_vocab: after the chain */
  uint8_t *removed_by; /* n_vocab: HnSamplerStage */
  double *logprob;     /* n_vocab: raw log-softmax */
  RefCand *cands;      /* scratch */
  int32_t *counts;     /* scratch */
  int32_t n_vocab;
  gboolean borderline;
} RefChain;

static inline void
ref_init (RefChain *r, int32_t n_vocab)
{
  memset (r, 0, sizeof *r);
  g_assert_cmpint (n_vocab, >, 0);
  gsize n = (guint32) n_vocab; /* (a sanitizer build warns about negative sizes otherwise) */
  r->n_vocab = n_vocab;
  r->p = g_new0 (double, n);
  r->removed_by = g_new0 (uint8_t, n);
  r->logprob = g_new0 (double, n);
  r->cands = g_new0 (RefCand, n);
  r->counts = g_new0 (int32_t, n);
}

static inline void
ref_clear (RefChain *r)
{
  g_free (r->p);
  g_free (r->removed_by);
  g_free (r->logprob);
  g_free (r->cands);
  g_free (r->counts);
}

static int
ref_by_logit (const void *a, const void *b)
{
  const RefCand *x = a, *y = b;
  if (x->logit != y->logit)
    return x->logit > y->logit ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

static int
ref_by_score (const void *a, const void *b)
{
  const RefCand *x = a, *y = b;
  if (x->score != y->score)
    return x->score < y->score ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static void
ref_softmax (RefCand *c, size_t n, double temperature)
{
  double mx = -INFINITY, sum = 0.0;
  for (size_t i = 0; i < n; i++)
    mx = fmax (mx, c[i].logit / temperature);
  for (size_t i = 0; i < n; i++)
    sum += c[i].p = exp (c[i].logit / temperature - mx);
  for (size_t i = 0; i < n; i++)
    c[i].p /= sum;
}

static void
ref_normalize (RefCand *c, size_t n)
{
  double sum = 0.0;
  for (size_t i = 0; i < n; i++)
    sum += c[i].p;
  for (size_t i = 0; i < n; i++)
    c[i].p /= sum;
}

static void
ref_remove (RefChain *r, RefCand *c, size_t from, size_t n, HnSamplerStage stage)
{
  for (size_t i = from; i < n; i++)
    r->removed_by[c[i].id] = (uint8_t) stage;
}

/* A mass threshold crossed at index `keep - 1` of c (cumulative): borderline when the sum
 * before or at the crossing lies within REF_MASS_EPS of it. */
static size_t
ref_cut_mass (RefChain *r, const RefCand *c, size_t n, double threshold)
{
  double cum = 0.0;
  for (size_t i = 0; i < n; i++) {
    double before = cum;
    cum += c[i].p;
    if (cum >= threshold) {
      if (fabs (cum - threshold) < REF_MASS_EPS || fabs (before - threshold) < REF_MASS_EPS)
        r->borderline = TRUE;
      return i + 1;
    }
  }
  return n;
}

/* `mu`: mirostat's current value (2·tau before the first token).  `allowed`: NULL, or
 * what the grammar allows.  `newline`: the tokens penalize_nl = false exempts. */
static void
ref_chain (RefChain *r, const float *raw, const HnSamplerParams *sp, const int32_t *history, size_t n_history,
           const int32_t *newline, size_t n_newline, const gboolean *allowed, double mu)
{
  int32_t nv = r->n_vocab;
  r->borderline = FALSE;
  double mx = -INFINITY, sum = 0.0;
  for (int32_t i = 0; i < nv; i++)
    if (!isnan (raw[i]))
      mx = fmax (mx, raw[i]);
  for (int32_t i = 0; i < nv; i++)
    if (!isnan (raw[i]))
      sum += exp ((double) raw[i] - mx);
  double lse = mx + log (sum);

  double *l = g_new (double, (guint32) nv);
  for (int32_t i = 0; i < nv; i++) {
    l[i] = isnan (raw[i]) ? -INFINITY : raw[i];
    r->logprob[i] = l[i] - lse;
    r->p[i] = 0.0;
    r->removed_by[i] = HN_STAGE_NONE;
  }

  /* 1. logit bias */
  for (size_t i = 0; i < sp->n_logit_bias; i++)
    l[sp->logit_bias[i].token] += sp->logit_bias[i].bias;
  for (int32_t i = 0; i < nv; i++)
    if (l[i] == -INFINITY && raw[i] > -INFINITY)
      r->removed_by[i] = HN_STAGE_LOGIT_BIAS;

  /* 2. penalties over the window */
  if (sp->repeat_last_n != 0 && n_history > 0) {
    size_t window = sp->repeat_last_n < 0 ? n_history : MIN (n_history, (size_t) sp->repeat_last_n);
    const int32_t *w = history + (n_history - window);
    for (size_t i = 0; i < window; i++)
      r->counts[w[i]]++;
    for (size_t i = 0; i < window; i++) {
      int32_t t = w[i];
      if (r->counts[t] == 0)
        continue;
      gboolean exempt = FALSE;
      for (size_t k = 0; !sp->penalize_nl && k < n_newline; k++)
        exempt |= newline[k] == t;
      if (!exempt) {
        if (sp->repeat_penalty != 1.0f)
          l[t] = l[t] > 0 ? l[t] / sp->repeat_penalty : l[t] * sp->repeat_penalty;
        l[t] -= r->counts[t] * (double) sp->frequency_penalty + sp->presence_penalty;
      }
      r->counts[t] = 0;
    }
  }

  /* 3. grammar */
  for (int32_t i = 0; allowed && i < nv; i++)
    if (!allowed[i] && l[i] > -INFINITY) {
      l[i] = -INFINITY;
      if (r->removed_by[i] == HN_STAGE_NONE)
        r->removed_by[i] = HN_STAGE_GRAMMAR;
    }

  RefCand *c = r->cands;
  size_t n = 0;
  for (int32_t i = 0; i < nv; i++)
    if (l[i] > -INFINITY)
      c[n++] = (RefCand){ .id = i, .logit = l[i] };
  g_free (l);
  if (n == 0)
    return;
  qsort (c, n, sizeof *c, ref_by_logit);

  if (sp->temperature <= 0.0f) {
    /* greedy: the argmax; the temperature stage removes the rest */
    if (n > 1 && c[0].logit - c[1].logit < REF_EPS * (1.0 + fabs (c[0].logit)))
      r->borderline = TRUE;
    ref_remove (r, c, 1, n, HN_STAGE_TEMPERATURE);
    r->p[c[0].id] = 1.0;
    return;
  }

  if (sp->mirostat == 2) {
    ref_softmax (c, n, sp->temperature);
    double threshold = exp2 (-mu);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
      if (fabs (c[i].p - threshold) < REF_EPS * threshold + 1e-9)
        r->borderline = TRUE;
      if (c[i].p >= threshold)
        w++;
    }
    if (w == 0)
      w = 1; /* the most likely always stays (c is sorted, so the kept are a prefix) */
    ref_remove (r, c, w, n, HN_STAGE_MIROSTAT);
    n = w;
    ref_normalize (c, n);
    for (size_t i = 0; i < n; i++)
      r->p[c[i].id] = c[i].p;
    return;
  }
  g_assert_cmpint (sp->mirostat, ==, 0); /* v1 is not recomputed here */

  /* 4. top-k */
  if (sp->top_k > 0 && sp->top_k < nv && (size_t) sp->top_k < n) {
    size_t k = (size_t) sp->top_k;
    if (c[k - 1].logit - c[k].logit < REF_EPS * (1.0 + fabs (c[k].logit)))
      r->borderline = TRUE;
    ref_remove (r, c, k, n, HN_STAGE_TOP_K);
    n = k;
  }
  ref_softmax (c, n, 1.0);

  /* 5. typical-p: by distance of the surprise from the entropy */
  if (sp->typical_p < 1.0f && n > 1) {
    double entropy = 0.0;
    for (size_t i = 0; i < n; i++)
      if (c[i].p > 0)
        entropy -= c[i].p * log (c[i].p);
    for (size_t i = 0; i < n; i++) {
      c[i].score = fabs (-log (c[i].p) - entropy);
      c[i].rank = i;
    }
    qsort (c, n, sizeof *c, ref_by_score);
    size_t keep = ref_cut_mass (r, c, n, sp->typical_p);
    if (keep < n && c[keep].score - c[keep - 1].score < REF_EPS)
      r->borderline = TRUE;
    ref_remove (r, c, keep, n, HN_STAGE_TYPICAL);
    n = keep;
    ref_normalize (c, n);
    qsort (c, n, sizeof *c, ref_by_logit);
  }

  /* 6. top-p, most likely first */
  if (sp->top_p < 1.0f && n > 1) {
    size_t keep = ref_cut_mass (r, c, n, sp->top_p);
    ref_remove (r, c, keep, n, HN_STAGE_TOP_P);
    n = keep;
    ref_normalize (c, n);
  }

  /* 7. min-p */
  if (sp->min_p > 0.0f && n > 1) {
    double threshold = sp->min_p * c[0].p;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
      if (fabs (c[i].p - threshold) < REF_EPS * threshold)
        r->borderline = TRUE;
      if (c[i].p >= threshold)
        c[w++] = c[i];
      else
        r->removed_by[c[i].id] = HN_STAGE_MIN_P;
    }
    n = w;
    ref_normalize (c, n);
  }

  /* 8. temperature over the survivors */
  ref_softmax (c, n, sp->temperature);
  for (size_t i = 0; i < n; i++)
    r->p[c[i].id] = c[i].p;
}

/* The k best raw tokens, highest first, ties by lower id. */
static inline size_t
ref_top_raw (const float *raw, int32_t nv, size_t k, int32_t *ids)
{
  RefCand *c = g_new (RefCand, (guint32) nv);
  size_t n = 0;
  for (int32_t i = 0; i < nv; i++)
    if (raw[i] > -INFINITY)
      c[n++] = (RefCand){ .id = i, .logit = raw[i] };
  qsort (c, n, sizeof *c, ref_by_logit);
  size_t m = MIN (k, n);
  for (size_t i = 0; i < m; i++)
    ids[i] = c[i].id;
  g_free (c);
  return m;
}

/* Compares an engine record with the reference; returns FALSE (without asserting) when the
 * reference says the step was borderline. */
static inline gboolean
ref_check_record_full (RefChain *r, const float *raw, const HnTokenProbs *rec, size_t k, gboolean with_chosen)
{
  if (r->borderline)
    return FALSE;
  int32_t ids[HN_PROBS_MAX_K];
  size_t n = ref_top_raw (raw, r->n_vocab, k, ids);
  g_assert_cmpuint (rec->n_candidates, ==, n);
  for (size_t i = 0; i < n; i++) {
    const HnProbCandidate *c = &rec->candidates[i];
    g_assert_cmpint (c->id, ==, ids[i]);
    g_assert_cmpfloat_with_epsilon (c->logprob, r->logprob[c->id], 2e-4);
    if (c->removed_by != r->removed_by[c->id])
      g_error ("token %d: the engine says removed by %s, the reference by %s", c->id,
               hn_sampler_stage_name (c->removed_by) ? hn_sampler_stage_name (c->removed_by) : "nothing",
               hn_sampler_stage_name (r->removed_by[c->id]) ? hn_sampler_stage_name (r->removed_by[c->id]) : "nothing");
    g_assert_cmpfloat_with_epsilon (c->p, r->p[c->id], 5e-5);
    g_assert_true ((c->p == 0.0f) == (c->removed_by != HN_STAGE_NONE) || r->p[c->id] < 1e-30);
  }
  /* the chosen token: possible, and its probability is the reference's */
  g_assert_cmpfloat (r->p[rec->token], >, 0.0);
  if (with_chosen) {
    g_assert_cmpfloat_with_epsilon (rec->p, r->p[rec->token], 5e-5);
    g_assert_cmpfloat_with_epsilon (rec->logprob, r->logprob[rec->token], 2e-4);
  }
  return TRUE;
}

static inline gboolean
ref_check_record (RefChain *r, const float *raw, const HnTokenProbs *rec, size_t k)
{
  return ref_check_record_full (r, raw, rec, k, TRUE);
}
