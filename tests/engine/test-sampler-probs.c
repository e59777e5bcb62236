/* The sampler's probability recording (HnTokenProbs) against an independent computation of
 * every stage in double precision (probs-reference.h): on synthetic rows for many parameter
 * combinations over several steps (penalties see the growing history, mirostat's mu moves),
 * and on a real model's rows through the generation loop, with and without a grammar.
 * Also: recording changes no token, probing changes no state, the stage names.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "hn-context.h"
#include "hn-generate-model.h"
#include "hn-grammar.h"
#include "hn-model.h"
#include "hn-sampler.h"
#include "hn-vocab.h"

#include "probs-reference.h"

enum { SYN_VOCAB = 4000, SYN_STEPS = 8 };

static void
fill_row (GRand *rand, float *row, int32_t nv)
{
  for (int32_t i = 0; i < nv; i++)
    row[i] = (float) g_rand_double_range (rand, -6.0, 6.0) * (float) g_rand_double (rand);
  /* a few strong candidates, as real rows have, some of them repeated tokens */
  for (int k = 0; k < 12; k++)
    row[g_rand_int_range (rand, 0, 64)] = (float) g_rand_double_range (rand, 4.0, 9.0);
  row[g_rand_int_range (rand, 64, nv)] = row[3]; /* an exact tie */
}

typedef struct {
  const char *name;
  void (*set) (HnSamplerParams *p);
} Combo;

static void set_defaults (HnSamplerParams *p) { (void) p; }
static void set_hot_nucleus (HnSamplerParams *p) { p->temperature = 1.3f; p->top_k = 0; p->top_p = 0.9f; p->min_p = 0.0f; }
static void set_min_p_typical (HnSamplerParams *p) { p->temperature = 0.7f; p->top_k = 0; p->top_p = 1.0f; p->min_p = 0.1f; p->typical_p = 0.8f; }
static void set_everything (HnSamplerParams *p) { p->temperature = 1.0f; p->top_k = 10; p->typical_p = 0.5f; p->top_p = 0.7f; p->min_p = 0.02f; }
static void set_penalties (HnSamplerParams *p) { p->top_k = 0; p->top_p = 0.95f; p->min_p = 0.0f; p->repeat_penalty = 1.3f; p->frequency_penalty = 0.5f; p->presence_penalty = 0.4f; p->repeat_last_n = 8; }
static void set_greedy (HnSamplerParams *p) { p->temperature = 0.0f; p->repeat_penalty = 1.5f; p->repeat_last_n = -1; }
static void set_mirostat (HnSamplerParams *p) { p->mirostat = 2; p->mirostat_tau = 3.0f; p->mirostat_eta = 0.1f; p->temperature = 0.9f; }
static void set_top_k_cold (HnSamplerParams *p) { p->temperature = 0.4f; p->top_k = 3; p->top_p = 1.0f; p->min_p = 0.0f; }
static void set_nl_exempt (HnSamplerParams *p) { p->penalize_nl = false; p->repeat_penalty = 2.0f; p->presence_penalty = 1.0f; p->repeat_last_n = -1; p->top_k = 0; p->top_p = 0.9f; p->min_p = 0.01f; }

static const Combo combos[] = {
  { "defaults", set_defaults },       { "hot-nucleus", set_hot_nucleus }, { "min-p-typical", set_min_p_typical },
  { "everything", set_everything },   { "penalties", set_penalties },     { "greedy", set_greedy },
  { "mirostat2", set_mirostat },      { "top-k-cold", set_top_k_cold },   { "newline-exempt", set_nl_exempt },
};

/* Runs one combination for SYN_STEPS tokens; returns how many steps were compared. */
static size_t
run_synthetic (const HnSamplerParams *sp, uint32_t seed, size_t k)
{
  GRand *rand = g_rand_new_with_seed (seed);
  HnError err = { 0 };
  HnSampler *s = hn_sampler_new (sp, SYN_VOCAB, 512, &err);
  g_assert_nonnull (s);
  g_assert_true (hn_sampler_set_probs (s, (int32_t) k, &err));
  const int32_t newline[] = { 5, 6 };
  g_assert_true (hn_sampler_set_newline_tokens (s, newline, 2, &err));
  GArray *history = g_array_new (FALSE, FALSE, sizeof (int32_t));
  /* a "prompt" full of the likely tokens and the newline ones, so penalties matter */
  for (int32_t t = 0; t < 24; t++) {
    int32_t tok = t % 3 == 0 ? 5 : g_rand_int_range (rand, 0, 64);
    hn_sampler_accept (s, tok);
    g_array_append_val (history, tok);
  }
  RefChain ref;
  ref_init (&ref, SYN_VOCAB);
  float *row = g_new (float, SYN_VOCAB);
  double mu = 2.0 * sp->mirostat_tau;
  size_t compared = 0;
  for (int step = 0; step < SYN_STEPS; step++) {
    fill_row (rand, row, SYN_VOCAB);
    ref_chain (&ref, row, sp, (const int32_t *) history->data, history->len, newline, 2, NULL, mu);
    int32_t t = hn_sampler_sample (s, row, NULL, &err);
    g_assert_cmpint (t, >=, 0);
    const HnTokenProbs *rec = hn_sampler_last_probs (s);
    g_assert_nonnull (rec);
    g_assert_cmpint (rec->token, ==, t);
    compared += ref_check_record (&ref, row, rec, k);
    if (sp->mirostat == 2)
      mu -= sp->mirostat_eta * (-log2 (ref.p[t]) - sp->mirostat_tau);
    hn_sampler_accept (s, t);
    g_array_append_val (history, t);
  }
  g_free (row);
  ref_clear (&ref);
  g_array_unref (history);
  hn_sampler_free (s);
  g_rand_free (rand);
  return compared;
}

static void
test_synthetic (void)
{
  size_t compared = 0, total = 0;
  for (size_t c = 0; c < G_N_ELEMENTS (combos); c++)
    for (uint32_t seed = 1; seed <= 4; seed++) {
      HnSamplerParams sp;
      hn_sampler_params_init (&sp);
      sp.seed = seed;
      combos[c].set (&sp);
      size_t k = seed == 1 ? HN_PROBS_MAX_K : 3 + seed * 2;
      size_t n = run_synthetic (&sp, seed * 7919 + (uint32_t) c, k);
      g_test_message ("%s seed %u: %zu of %d steps compared", combos[c].name, seed, n, SYN_STEPS);
      compared += n;
      total += SYN_STEPS;
    }
  /* borderline steps are rare: almost everything must have been compared */
  g_assert_cmpuint (compared * 10, >=, total * 9);
}

/* A -inf bias on the two most likely tokens: removed by "logit_bias"; a +bias lifts one. */
static void
test_logit_bias (void)
{
  GRand *rand = g_rand_new_with_seed (99);
  float *row = g_new (float, SYN_VOCAB);
  fill_row (rand, row, SYN_VOCAB);
  int32_t top[3];
  ref_top_raw (row, SYN_VOCAB, 3, top);
  HnLogitBias bias[] = { { top[0], -INFINITY }, { top[1], -INFINITY }, { 3000, 12.0f } };
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  sp.seed = 5;
  sp.logit_bias = bias;
  sp.n_logit_bias = G_N_ELEMENTS (bias);
  HnError err = { 0 };
  HnSampler *s = hn_sampler_new (&sp, SYN_VOCAB, 64, &err);
  g_assert_true (hn_sampler_set_probs (s, 8, &err));
  int32_t t = hn_sampler_sample (s, row, NULL, &err);
  g_assert_cmpint (t, >=, 0);
  const HnTokenProbs *rec = hn_sampler_last_probs (s);
  g_assert_cmpint (rec->candidates[0].id, ==, top[0]);
  g_assert_cmpstr (hn_sampler_stage_name (rec->candidates[0].removed_by), ==, "logit_bias");
  g_assert_cmpstr (hn_sampler_stage_name (rec->candidates[1].removed_by), ==, "logit_bias");
  g_assert_cmpfloat (rec->candidates[0].p, ==, 0.0f);
  RefChain ref;
  ref_init (&ref, SYN_VOCAB);
  ref_chain (&ref, row, &sp, NULL, 0, NULL, 0, NULL, 0.0);
  g_assert_true (ref_check_record (&ref, row, rec, 8));
  ref_clear (&ref);
  hn_sampler_free (s);
  g_free (row);
  g_rand_free (rand);
}

/* Recording changes no token; probing between samples changes no state. */
static void
test_no_side_effects (void)
{
  int32_t tokens[3][12];
  for (int mode = 0; mode < 3; mode++) {
    GRand *rand = g_rand_new_with_seed (4242);
    HnSamplerParams sp;
    hn_sampler_params_init (&sp);
    sp.seed = 77;
    sp.mirostat = mode == 2 ? 2 : 0;
    sp.repeat_penalty = 1.2f;
    HnError err = { 0 };
    HnSampler *s = hn_sampler_new (&sp, SYN_VOCAB, 64, &err);
    if (mode > 0)
      g_assert_true (hn_sampler_set_probs (s, 10, &err));
    else
      g_assert_null (hn_sampler_last_probs (s));
    float *row = g_new (float, SYN_VOCAB), *other = g_new (float, SYN_VOCAB);
    for (int i = 0; i < 12; i++) {
      fill_row (rand, row, SYN_VOCAB);
      fill_row (rand, other, SYN_VOCAB);
      if (mode > 0) {
        float mu = hn_sampler_mirostat_mu (s);
        g_assert_cmpint (hn_sampler_probe (s, other, NULL, &err), >=, 0);
        g_assert_cmpfloat (hn_sampler_mirostat_mu (s), ==, mu);
      }
      tokens[mode][i] = hn_sampler_sample (s, row, NULL, &err);
      hn_sampler_accept (s, tokens[mode][i]);
    }
    g_free (row);
    g_free (other);
    hn_sampler_free (s);
    g_rand_free (rand);
  }
  /* modes 0 and 1 share parameters: same tokens with recording and probes */
  g_assert_cmpmem (tokens[0], sizeof tokens[0], tokens[1], sizeof tokens[1]);
}

static void
test_stage_names (void)
{
  const char *expected[] = { "logit_bias", "repetition", "grammar", "top_k", "typical",
                             "top_p", "min_p", "temperature", "mirostat" };
  g_assert_null (hn_sampler_stage_name (HN_STAGE_NONE));
  g_assert_null (hn_sampler_stage_name (HN_STAGE_COUNT));
  g_assert_cmpint (HN_STAGE_COUNT - 1, ==, G_N_ELEMENTS (expected));
  for (int i = 1; i < HN_STAGE_COUNT; i++) {
    g_assert_cmpstr (hn_sampler_stage_name ((HnSamplerStage) i), ==, expected[i - 1]);
    g_assert_cmpint (hn_sampler_stage_from_name (expected[i - 1]), ==, i);
  }
  g_assert_cmpint (hn_sampler_stage_from_name ("nothing"), ==, HN_STAGE_NONE);
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  HnError err = { 0 };
  HnSampler *s = hn_sampler_new (&sp, 100, 16, &err);
  g_assert_false (hn_sampler_set_probs (s, HN_PROBS_MAX_K + 1, &err));
  g_assert_nonnull (strstr (err.message, "between 0 and"));
  g_assert_false (hn_sampler_set_probs (s, -1, &err));
  float row[100] = { 0 };
  g_assert_cmpint (hn_sampler_probe (s, row, NULL, &err), <, 0); /* recording is off */
  /* fewer finite tokens than asked: only those */
  for (int i = 0; i < 100; i++)
    row[i] = i < 4 ? (float) i : -INFINITY;
  HnProbCandidate out[HN_PROBS_MAX_K];
  g_assert_cmpuint (hn_probs_top_raw (row, 100, 10, out), ==, 4);
  g_assert_cmpint (out[0].id, ==, 3);
  g_assert_cmpint (out[3].id, ==, 0);
  hn_sampler_free (s);
}

/* ---- the lens ----------------------------------------------------------------------
 * hn_lens_compute on a stored row must say what the sampler would: the same record as
 * hn_sampler_probe with a sampler that saw the same history (bit for bit: one chain), and
 * the independent reference's probabilities and stages, for many parameter sets, with and
 * without a grammar's allowed set.  The vocabulary is large enough (20000) that top-p and
 * typical-p cut by histogram buckets instead of sorting, as they do on a real vocabulary. */

enum { LENS_VOCAB = 20000 };

static void set_lens_typical_only (HnSamplerParams *p) { p->top_k = 0; p->top_p = 1.0f; p->min_p = 0.0f; p->typical_p = 0.95f; }
static void set_lens_typical_tight (HnSamplerParams *p) { p->top_k = 0; p->top_p = 1.0f; p->min_p = 0.0f; p->typical_p = 0.3f; p->temperature = 1.5f; }
static void set_lens_wide_nucleus (HnSamplerParams *p) { p->top_k = 0; p->top_p = 0.99f; p->min_p = 0.0f; p->temperature = 2.0f; }
static void set_lens_all_off (HnSamplerParams *p) { p->top_k = 0; p->top_p = 1.0f; p->min_p = 0.0f; p->temperature = 0.5f; }
static void set_lens_penalised_typical (HnSamplerParams *p) { p->top_k = 0; p->typical_p = 0.9f; p->top_p = 0.95f; p->min_p = 0.0f; p->repeat_penalty = 1.4f; p->frequency_penalty = 0.3f; p->presence_penalty = 0.6f; p->repeat_last_n = -1; }
static void set_lens_mirostat_low (HnSamplerParams *p) { p->mirostat = 2; p->mirostat_tau = 1.0f; p->temperature = 1.2f; }

static const Combo lens_combos[] = {
  { "typical-only", set_lens_typical_only }, { "typical-tight", set_lens_typical_tight },
  { "wide-nucleus", set_lens_wide_nucleus }, { "all-off", set_lens_all_off },
  { "penalised-typical", set_lens_penalised_typical }, { "mirostat-low-tau", set_lens_mirostat_low },
};

static void
fill_lens_row (GRand *rand, float *row, int32_t nv)
{
  /* model-like: a Gaussian body (so most tokens carry a little mass) and a few strong ones */
  for (int32_t i = 0; i < nv; i++) {
    double u = g_rand_double_range (rand, 1e-12, 1.0), v = g_rand_double (rand);
    row[i] = (float) (2.0 * sqrt (-2.0 * log (u)) * cos (6.283185307179586 * v));
  }
  for (int k = 0; k < 10; k++)
    row[g_rand_int_range (rand, 0, 64)] = (float) g_rand_double_range (rand, 6.0, 12.0);
  row[g_rand_int_range (rand, 64, nv)] = row[7]; /* an exact tie */
}

static void
check_lens (const Combo *combo, uint32_t seed, gboolean with_grammar, size_t *compared, size_t *total)
{
  GRand *rand = g_rand_new_with_seed (seed);
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  sp.seed = seed;
  combo->set (&sp);
  HnError err = { 0 };
  HnLens *lens = hn_lens_new (LENS_VOCAB, &err);
  g_assert_nonnull (lens);
  g_assert_cmpint (hn_lens_n_vocab (lens), ==, LENS_VOCAB);
  HnSampler *s = hn_sampler_new (&sp, LENS_VOCAB, 512, &err);
  g_assert_nonnull (s);
  size_t k = seed % 2 ? HN_PROBS_MAX_K : 7;
  g_assert_true (hn_sampler_set_probs (s, (int32_t) k, &err));
  const int32_t newline[] = { 5, 6 };
  g_assert_true (hn_sampler_set_newline_tokens (s, newline, 2, &err));
  int32_t history[40];
  for (int i = 0; i < 40; i++) {
    history[i] = i % 4 == 0 ? 5 : g_rand_int_range (rand, 0, 64);
    hn_sampler_accept (s, history[i]);
  }
  float *row = g_new (float, LENS_VOCAB);
  fill_lens_row (rand, row, LENS_VOCAB);
  uint32_t *bits = g_new0 (uint32_t, (LENS_VOCAB + 31) / 32);
  gboolean *allowed = g_new0 (gboolean, LENS_VOCAB);
  HnGrammarState *no_grammar = NULL;
  if (with_grammar) {
    /* a grammar that forbids about a third of the vocabulary, some of the best among them */
    for (int32_t i = 0; i < LENS_VOCAB; i++) {
      allowed[i] = g_rand_int_range (rand, 0, 3) != 0;
      if (allowed[i])
        bits[i / 32] |= 1u << (i % 32);
    }
  }
  HnLensInput in = {
    .logits = row, .history = history, .n_history = G_N_ELEMENTS (history),
    .allowed = with_grammar ? bits : NULL, .newline_ids = newline, .n_newline = 2, .mirostat_mu = NAN,
  };
  HnTokenProbs lensed;
  g_assert_true (hn_lens_compute (lens, &sp, &in, (uint32_t) k, &lensed, &err));
  g_assert_cmpuint (lensed.n_candidates, ==, k);

  /* against the independent reference */
  RefChain ref;
  ref_init (&ref, LENS_VOCAB);
  ref_chain (&ref, row, &sp, history, G_N_ELEMENTS (history), newline, 2, with_grammar ? allowed : NULL,
             2.0 * sp.mirostat_tau);
  *compared += ref_check_record (&ref, row, &lensed, k);
  (*total)++;
  size_t alive = 0;
  for (uint32_t i = 0; i < lensed.n_candidates; i++) {
    if (with_grammar && !allowed[lensed.candidates[i].id])
      g_assert_cmpint (lensed.candidates[i].removed_by, ==, HN_STAGE_GRAMMAR);
    alive += lensed.candidates[i].removed_by == HN_STAGE_NONE;
  }
  g_test_message ("lens %s seed %u%s: %zu of %zu shown candidates survive", combo->name, seed,
                  with_grammar ? " + grammar" : "", alive, k);

  /* against the sampler's own probe of the same row (no grammar state takes a bitset, so
   * the probe gets the mask applied to its row: -inf is what the grammar stage does) */
  float *masked = g_new (float, LENS_VOCAB);
  for (int32_t i = 0; i < LENS_VOCAB; i++)
    masked[i] = with_grammar && !allowed[i] ? -INFINITY : row[i];
  if (!with_grammar) {
    g_assert_cmpint (hn_sampler_probe (s, masked, no_grammar, &err), ==, lensed.token);
    const HnTokenProbs *probed = hn_sampler_last_probs (s);
    g_assert_nonnull (probed);
    g_assert_cmpmem (probed, sizeof *probed, &lensed, sizeof lensed);
  } else {
    /* the masked row makes the probe's raw distribution differ, but the chain's outcome is
     * the same: every allowed candidate's p and stage agree */
    g_assert_cmpint (hn_sampler_probe (s, masked, no_grammar, &err), ==, lensed.token);
    const HnTokenProbs *probed = hn_sampler_last_probs (s);
    for (uint32_t i = 0; i < lensed.n_candidates; i++) {
      const HnProbCandidate *c = &lensed.candidates[i];
      for (uint32_t j = 0; j < probed->n_candidates; j++)
        if (probed->candidates[j].id == c->id) {
          g_assert_cmpfloat (probed->candidates[j].p, ==, c->p);
          g_assert_cmpint (probed->candidates[j].removed_by, ==, c->removed_by);
        }
    }
  }
  g_free (masked);
  ref_clear (&ref);
  g_free (bits);
  g_free (allowed);
  g_free (row);
  hn_sampler_free (s);
  hn_lens_free (lens);
  g_rand_free (rand);
}

static void
test_lens (void)
{
  size_t compared = 0, total = 0;
  for (int set = 0; set < 2; set++) {
    const Combo *list = set == 0 ? combos : lens_combos;
    size_t n = set == 0 ? G_N_ELEMENTS (combos) : G_N_ELEMENTS (lens_combos);
    for (size_t c = 0; c < n; c++)
      for (uint32_t seed = 1; seed <= 3; seed++)
        for (int g = 0; g < 2; g++)
          check_lens (&list[c], seed * 131 + (uint32_t) c, g, &compared, &total);
  }
  g_test_message ("lens: %zu of %zu compared with the reference", compared, total);
  g_assert_cmpuint (compared * 10, >=, total * 9);
}

/* The same stored row under two settings: the lens follows the settings, not a state. */
static void
test_lens_follows_settings (void)
{
  GRand *rand = g_rand_new_with_seed (2024);
  float *row = g_new (float, LENS_VOCAB);
  fill_lens_row (rand, row, LENS_VOCAB);
  HnError err = { 0 };
  HnLens *lens = hn_lens_new (LENS_VOCAB, &err);
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  sp.top_k = 3;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  HnLensInput in = { .logits = row, .mirostat_mu = NAN };
  HnTokenProbs a, b;
  g_assert_true (hn_lens_compute (lens, &sp, &in, 10, &a, &err));
  for (uint32_t i = 0; i < 10; i++)
    g_assert_cmpint (a.candidates[i].removed_by, ==, i < 3 ? HN_STAGE_NONE : HN_STAGE_TOP_K);
  sp.top_k = 6;
  sp.temperature = 0.2f;
  g_assert_true (hn_lens_compute (lens, &sp, &in, 10, &b, &err));
  for (uint32_t i = 0; i < 10; i++)
    g_assert_cmpint (b.candidates[i].removed_by, ==, i < 6 ? HN_STAGE_NONE : HN_STAGE_TOP_K);
  /* a colder temperature sharpens: the first keeps more, the raw part is unchanged */
  g_assert_cmpfloat (b.candidates[0].p, >, a.candidates[0].p);
  g_assert_cmpfloat (b.candidates[0].logprob, ==, a.candidates[0].logprob);
  /* mirostat depends on its state: a small mu keeps fewer than a large one */
  sp.temperature = 1.0f;
  sp.mirostat = 2;
  in.mirostat_mu = 0.5f;
  g_assert_true (hn_lens_compute (lens, &sp, &in, 10, &a, &err));
  in.mirostat_mu = 12.0f;
  g_assert_true (hn_lens_compute (lens, &sp, &in, 10, &b, &err));
  size_t kept_a = 0, kept_b = 0;
  for (uint32_t i = 0; i < 10; i++) {
    kept_a += a.candidates[i].removed_by == HN_STAGE_NONE;
    kept_b += b.candidates[i].removed_by == HN_STAGE_NONE;
  }
  g_assert_cmpuint (kept_a, <, kept_b);
  /* a grammar that allows nothing: false, with every candidate marked removed by it */
  uint32_t *none = g_new0 (uint32_t, (LENS_VOCAB + 31) / 32);
  in.allowed = none;
  sp.mirostat = 0;
  g_assert_false (hn_lens_compute (lens, &sp, &in, 5, &a, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_GRAMMAR);
  g_assert_cmpuint (a.n_candidates, ==, 5);
  for (uint32_t i = 0; i < 5; i++)
    g_assert_cmpint (a.candidates[i].removed_by, ==, HN_STAGE_GRAMMAR);
  /* refused inputs say why */
  in.allowed = NULL;
  g_assert_false (hn_lens_compute (lens, &sp, &in, 0, &a, &err));
  g_assert_nonnull (strstr (err.message, "candidates"));
  sp.top_p = 3.0f;
  g_assert_false (hn_lens_compute (lens, &sp, &in, 5, &a, &err));
  g_assert_nonnull (strstr (err.message, "top_p"));
  g_free (none);
  hn_lens_free (lens);
  g_free (row);
  g_rand_free (rand);
}

/* ---- a real model through the generation loop ------------------------------------- */

typedef struct {
  const HnSamplerParams *sp;
  HnGenModelBackend *backend;
  HnGrammarState *grammar; /* the test's own, advanced with every accepted token */
  GArray *history;
  RefChain ref;
  float *row;
  gboolean *allowed;
  size_t k, compared, steps;
  double mu;
} ModelRun;

static void
model_on_logits (const float *logits, int32_t n_vocab, void *user_data)
{
  ModelRun *m = user_data;
  memcpy (m->row, logits, (size_t) n_vocab * sizeof *logits);
}

static void
model_on_probs (const HnTokenProbs *rec, void *user_data)
{
  ModelRun *m = user_data;
  const HnGenBackend *b = &m->backend->backend;
  if (m->grammar)
    for (int32_t i = 0; i < b->n_vocab; i++)
      m->allowed[i] = hn_grammar_accepts_token_bytes (m->grammar, i);
  ref_chain (&m->ref, m->row, m->sp, (const int32_t *) m->history->data, m->history->len, b->newline_tokens,
             b->n_newline_tokens, m->grammar ? m->allowed : NULL, m->mu);
  m->compared += ref_check_record (&m->ref, m->row, rec, m->k);
  m->steps++;
  if (m->sp->mirostat == 2)
    m->mu -= m->sp->mirostat_eta * (-log2 (m->ref.p[rec->token]) - m->sp->mirostat_tau);
  if (!b->is_eog (b->self, rec->token)) {
    g_array_append_val (m->history, rec->token);
    if (m->grammar)
      g_assert_true (hn_grammar_accept_token (m->grammar, rec->token));
  }
}

static void
test_model (void)
{
  g_autofree char *path = g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", "stories260K-f32.gguf", NULL);
  HnError err = { 0 };
  HnModel *model = hn_model_load (path, NULL, &err);
  g_assert_nonnull (model);
  HnVocab *vocab = hn_vocab_load (hn_model_gguf (model), &err);
  HnContextParams cp = hn_context_default_params ();
  cp.n_ctx = 128;
  cp.n_threads = 1;
  HnContext *ctx = hn_context_new (model, &cp, &err);
  HnGenModelBackend backend;
  g_assert_true (hn_gen_model_backend_init (&backend, ctx, vocab, &err));
  HnGrammarVocab *gvocab = hn_gen_grammar_vocab_new (vocab, &err);
  const char *gbnf = "root ::= [a-z ]+ \".\"";
  HnGrammar *grammar = hn_grammar_parse (gbnf, strlen (gbnf), "root", &err);
  g_assert_nonnull (grammar);
  const int32_t prompt[] = { 1, 403, 407, 261, 378, 316 };
  size_t compared = 0, steps = 0;

  for (size_t c = 0; c < G_N_ELEMENTS (combos); c++)
    for (int use_grammar = 0; use_grammar < 2; use_grammar++) {
      HnSamplerParams sp;
      hn_sampler_params_init (&sp);
      sp.seed = 11 + c;
      sp.max_new_tokens = 10;
      combos[c].set (&sp);
      ModelRun m = { .sp = &sp, .backend = &backend, .k = 5 + c, .mu = 2.0 * sp.mirostat_tau };
      m.history = g_array_new (FALSE, FALSE, sizeof (int32_t));
      g_array_append_vals (m.history, prompt, G_N_ELEMENTS (prompt));
      ref_init (&m.ref, backend.backend.n_vocab);
      m.row = g_new (float, (guint32) backend.backend.n_vocab);
      m.allowed = g_new (gboolean, (guint32) backend.backend.n_vocab);
      if (use_grammar)
        m.grammar = hn_grammar_state_new (grammar, gvocab, &err);
      HnGenRequest req;
      hn_gen_request_init (&req);
      req.prompt = prompt;
      req.n_prompt = G_N_ELEMENTS (prompt);
      req.sampler = &sp;
      req.grammar = use_grammar ? grammar : NULL;
      req.grammar_vocab = gvocab;
      req.probs_k = (int32_t) m.k;
      req.on_probs = model_on_probs;
      req.on_logits = model_on_logits;
      req.user_data = &m;
      HnGenResult res;
      g_assert_true (hn_generate_with_backend (&backend.backend, &req, &res, &err));
      g_assert_cmpuint (m.steps, ==, res.n_generated);
      g_test_message ("model, %s%s: %zu of %zu steps compared", combos[c].name, use_grammar ? " + grammar" : "",
                      m.compared, m.steps);
      compared += m.compared;
      steps += m.steps;
      hn_grammar_state_free (m.grammar);
      g_free (m.row);
      g_free (m.allowed);
      ref_clear (&m.ref);
      g_array_unref (m.history);
    }
  g_assert_cmpuint (steps, >, 100);
  g_assert_cmpuint (compared * 10, >=, steps * 9);
  hn_grammar_free (grammar);
  hn_grammar_vocab_free (gvocab);
  hn_gen_model_backend_clear (&backend);
  hn_context_free (ctx);
  hn_vocab_free (vocab);
  hn_model_free (model);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/sampler-probs/synthetic", test_synthetic);
  g_test_add_func ("/sampler-probs/logit-bias", test_logit_bias);
  g_test_add_func ("/sampler-probs/no-side-effects", test_no_side_effects);
  g_test_add_func ("/sampler-probs/stage-names", test_stage_names);
  g_test_add_func ("/sampler-probs/lens", test_lens);
  g_test_add_func ("/sampler-probs/lens-follows-settings", test_lens_follows_settings);
  g_test_add_func ("/sampler-probs/model", test_model);
  return g_test_run ();
}
