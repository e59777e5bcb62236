/* Tests for hn-sampler: every stage against its definition on hand-made logits, the draw
 * against the expected distribution, penalties, mirostat, seeds and stop strings.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-grammar.h"
#include "hn-params.h"
#include "hn-sampler.h"

#include <glib.h>
#include <math.h>
#include <string.h>

#define EPS 1e-6

static void
fill(HnCandidate *c, const float *logits, size_t n)
{
  for (size_t i = 0; i < n; i++)
    c[i] = (HnCandidate){ (int32_t) i, logits[i], 0.0f };
}

static double
p_of(const HnCandidate *c, size_t n, int32_t id)
{
  for (size_t i = 0; i < n; i++)
    if (c[i].id == id)
      return c[i].p;
  return 0.0;
}

static void
test_softmax (void)
{
  float l[] = { 1, 2, 3 };
  HnCandidate c[3];
  fill(c, l, 3);
  hn_sampler_softmax(c, 3);
  double z = exp(1) + exp(2) + exp(3);
  for (int i = 0; i < 3; i++)
    g_assert_cmpfloat_with_epsilon(c[i].p, exp(i + 1) / z, EPS);
}

static void
test_top_k (void)
{
  enum { N = 5000 };
  float *l = g_new(float, N);
  HnCandidate *c = g_new(HnCandidate, N);
  GRand *r = g_rand_new_with_seed(3);
  for (int trial = 0; trial < 20; trial++) {
    for (int i = 0; i < N; i++)
      l[i] = (float) g_rand_double_range(r, -10, 10);
    /* a few ties, to check that ties resolve by id */
    l[17] = l[4000] = 11.0f;
    fill(c, l, N);
    size_t n = N;
    int k = 1 + trial * 7;
    hn_sampler_apply_top_k(c, &n, k);
    g_assert_cmpuint(n, ==, (size_t) k);
    /* reference: full sort */
    HnCandidate *ref = g_new(HnCandidate, N);
    fill(ref, l, N);
    for (int i = 0; i < k; i++) {
      int best = -1;
      for (int j = 0; j < N; j++)
        if (ref[j].logit > -INFINITY &&
            (best < 0 || ref[j].logit > ref[best].logit))
          best = j;
      g_assert_cmpint(c[i].id, ==, ref[best].id);
      ref[best].logit = -INFINITY;
    }
    g_free(ref);
    double sum = 0;
    for (int i = 0; i < k; i++)
      sum += c[i].p;
    g_assert_cmpfloat_with_epsilon(sum, 1.0, 1e-5);
  }
  g_assert_cmpint(c[0].id, ==, 17); /* tie at 11.0 with 4000: lower id first */
  g_rand_free(r);
  g_free(l);
  g_free(c);
}

/* logits whose softmax is exactly the given probabilities */
static void
fill_probs(HnCandidate *c, const double *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    c[i] = (HnCandidate){ (int32_t) i, (float) log(p[i]), 0.0f };
}

static void
test_top_p (void)
{
  const double p[] = { 0.1, 0.5, 0.15, 0.25 };
  HnCandidate c[4];
  size_t n = 4;
  fill_probs(c, p, 4);
  hn_sampler_apply_top_p(c, &n, 0.7f); /* 0.5 + 0.25 = 0.75 >= 0.7 */
  g_assert_cmpuint(n, ==, 2);
  g_assert_cmpfloat_with_epsilon(p_of(c, n, 1), 0.5 / 0.75, EPS);
  g_assert_cmpfloat_with_epsilon(p_of(c, n, 3), 0.25 / 0.75, EPS);
  n = 4;
  fill_probs(c, p, 4);
  hn_sampler_apply_top_p(c, &n, 0.4f);
  g_assert_cmpuint(n, ==, 1);
  g_assert_cmpint(c[0].id, ==, 1);
  n = 4;
  fill_probs(c, p, 4);
  hn_sampler_apply_top_p(c, &n, 1.0f);
  g_assert_cmpuint(n, ==, 4);

  /* a large flat-ish vocabulary: the partial sort must still find the exact nucleus */
  enum { N = 20000 };
  HnCandidate *big = g_new(HnCandidate, N);
  double *pp = g_new(double, N);
  double z = 0;
  for (int i = 0; i < N; i++)
    z += (pp[i] = 1.0 / (1 + (i * 7919) % N));
  for (int i = 0; i < N; i++)
    pp[i] /= z;
  fill_probs(big, pp, N);
  n = N;
  hn_sampler_apply_top_p(big, &n, 0.9f);
  size_t need = 0;
  double cum = 0;
  /* probabilities are 1/(1+k) for k a permutation of 0..N-1: descending is k = 0,1,2... */
  for (int k = 0; k < N; k++) {
    cum += (1.0 / (1 + k)) / z;
    need++;
    if (cum >= 0.9)
      break;
  }
  g_assert_cmpuint(n, ==, need);
  g_free(pp);
  g_free(big);
}

static void
test_min_p (void)
{
  const double p[] = { 0.5, 0.1, 0.25, 0.15 };
  HnCandidate c[4];
  size_t n = 4;
  fill_probs(c, p, 4);
  hn_sampler_apply_min_p(c, &n, 0.29f); /* threshold 0.145 */
  g_assert_cmpuint(n, ==, 3);
  g_assert_cmpfloat_with_epsilon(p_of(c, n, 0), 0.5 / 0.9, EPS);
  g_assert_cmpfloat_with_epsilon(p_of(c, n, 2), 0.25 / 0.9, EPS);
  g_assert_cmpfloat_with_epsilon(p_of(c, n, 3), 0.15 / 0.9, 1e-5);
  g_assert_cmpfloat(p_of(c, n, 1), ==, 0.0);
}

static void
test_typical (void)
{
  const double p[] = { 0.4, 0.3, 0.2, 0.1 };
  double h = 0;
  for (int i = 0; i < 4; i++)
    h -= p[i] * log(p[i]);
  /* H = 1.2799; |-ln p - H|: 0.364, 0.0240, 0.330, 1.023 → order 1, 2, 0, 3 */
  g_assert_cmpfloat(fabs(-log(0.3) - h), <, fabs(-log(0.2) - h));
  g_assert_cmpfloat(fabs(-log(0.2) - h), <, fabs(-log(0.4) - h));
  HnCandidate c[4];
  size_t n = 4;
  fill_probs(c, p, 4);
  hn_sampler_apply_typical(c, &n, 0.45f); /* 0.3 + 0.2 = 0.5 >= 0.45 */
  g_assert_cmpuint(n, ==, 2);
  g_assert_cmpfloat_with_epsilon(p_of(c, n, 1), 0.6, EPS);
  g_assert_cmpfloat_with_epsilon(p_of(c, n, 2), 0.4, EPS);
  n = 4;
  fill_probs(c, p, 4);
  hn_sampler_apply_typical(c, &n, 0.75f); /* 0.3 + 0.2 + 0.4 = 0.9 */
  g_assert_cmpuint(n, ==, 3);
  g_assert_cmpfloat(p_of(c, n, 3), ==, 0.0);
  g_assert_cmpfloat_with_epsilon(p_of(c, n, 0), 0.4 / 0.9, EPS);
}

static void
test_temperature (void)
{
  float l[] = { 1, 2, 3 };
  HnCandidate c[3];
  fill(c, l, 3);
  hn_sampler_apply_temperature(c, 3, 0.5f);
  double z = exp(2) + exp(4) + exp(6);
  for (int i = 0; i < 3; i++)
    g_assert_cmpfloat_with_epsilon(c[i].p, exp(2 * (i + 1)) / z, EPS);
  fill(c, l, 3);
  hn_sampler_apply_temperature(c, 3, 2.0f);
  z = exp(0.5) + exp(1) + exp(1.5);
  for (int i = 0; i < 3; i++)
    g_assert_cmpfloat_with_epsilon(c[i].p, exp(0.5 * (i + 1)) / z, EPS);
}

static void
test_penalties (void)
{
  float l[8] = { 0.5f, 3.0f, -1.0f, 2.0f, 0.0f, 4.0f, -2.0f, 1.0f };
  float orig[8];
  memcpy(orig, l, sizeof l);
  uint32_t counts[8] = { 0 };
  const int32_t history[] = { 1, 1, 2, 5, 1, 6 };
  const int32_t keep[] = { 6 }; /* a newline token, exempt */
  hn_sampler_apply_penalties(l, 8, history, 6, 2.0f, 0.5f, 0.25f, counts, keep, 1);
  /* token 1: seen 3 times, positive: 3/2 - (3*0.5 + 0.25) */
  g_assert_cmpfloat_with_epsilon(l[1], 1.5 - 1.75, EPS);
  /* token 2: once, negative: -1*2 - 0.75 */
  g_assert_cmpfloat_with_epsilon(l[2], -2.75, EPS);
  /* token 5: once, positive: 4/2 - 0.75 */
  g_assert_cmpfloat_with_epsilon(l[5], 1.25, EPS);
  /* exempt and unseen tokens keep their logits exactly */
  for (int i = 0; i < 8; i++)
    if (i != 1 && i != 2 && i != 5)
      g_assert_cmpfloat(l[i], ==, orig[i]);
  for (int i = 0; i < 8; i++)
    g_assert_cmpuint(counts[i], ==, 0);
}

/* The whole sampler: penalties see the last N accepted tokens only. */
static void
test_penalty_window (void)
{
  HnSamplerParams p;
  hn_sampler_params_init(&p);
  p.temperature = 0.0f;
  p.repeat_penalty = 1.0f;
  p.presence_penalty = 2.0f;
  p.repeat_last_n = 2;
  p.seed = 1;
  HnError err = { 0 };
  HnSampler *s = hn_sampler_new(&p, 4, 64, &err);
  g_assert_nonnull(s);
  float l[4] = { 1.0f, 2.5f, 2.0f, 0.0f };
  g_assert_cmpint(hn_sampler_sample(s, l, NULL, &err), ==, 1);
  hn_sampler_accept(s, 1);
  /* 1 is penalised to 0.5: 2 wins */
  g_assert_cmpint(hn_sampler_sample(s, l, NULL, &err), ==, 2);
  hn_sampler_accept(s, 3);
  hn_sampler_accept(s, 3);
  /* 1 fell out of the 2-token window */
  g_assert_cmpint(hn_sampler_sample(s, l, NULL, &err), ==, 1);
  hn_sampler_free(s);
}

static HnSampler *
plain_sampler(int32_t n_vocab, uint64_t seed)
{
  HnSamplerParams p;
  hn_sampler_params_init(&p);
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  HnError err = { 0 };
  HnSampler *s = hn_sampler_new(&p, n_vocab, 64, &err);
  g_assert_nonnull(s);
  return s;
}

static double
chi_square(const int *observed, const double *expected_p, int n, int draws)
{
  double x2 = 0;
  for (int i = 0; i < n; i++) {
    double e = expected_p[i] * draws;
    x2 += (observed[i] - e) * (observed[i] - e) / e;
  }
  return x2;
}

static void
test_draw_distribution (void)
{
  const double p[8] = { 0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02 };
  float l[8];
  for (int i = 0; i < 8; i++)
    l[i] = (float) log(p[i]) + 3.0f; /* an offset must not matter */
  HnSampler *s = plain_sampler(8, 12345);
  int counts[8] = { 0 };
  const int draws = 40000;
  HnError err = { 0 };
  for (int i = 0; i < draws; i++) {
    int32_t t = hn_sampler_sample(s, l, NULL, &err);
    g_assert_cmpint(t, >=, 0);
    counts[t]++;
  }
  /* 7 degrees of freedom: 24.32 is the 0.001 critical value */
  double x2 = chi_square(counts, p, 8, draws);
  g_test_message("chi-square (7 dof) = %.2f", x2);
  g_assert_cmpfloat(x2, <, 24.32);
  hn_sampler_free(s);

  /* top-k 3 + temperature 0.5: p ∝ p_i^2 over the three best */
  HnSamplerParams prm;
  hn_sampler_params_init(&prm);
  prm.temperature = 0.5f;
  prm.top_k = 3;
  prm.top_p = 1.0f;
  prm.min_p = 0.0f;
  prm.seed = 99;
  s = hn_sampler_new(&prm, 8, 64, &err);
  double q[3] = { 0.09, 0.04, 0.0225 }, z = q[0] + q[1] + q[2];
  for (int i = 0; i < 3; i++)
    q[i] /= z;
  int c3[8] = { 0 };
  for (int i = 0; i < draws; i++)
    c3[hn_sampler_sample(s, l, NULL, &err)]++;
  for (int i = 3; i < 8; i++)
    g_assert_cmpint(c3[i], ==, 0);
  x2 = chi_square(c3, q, 3, draws);
  g_test_message("chi-square top-k/temperature (2 dof) = %.2f", x2);
  g_assert_cmpfloat(x2, <, 13.82);
  hn_sampler_free(s);
}

static void
test_seed_determinism (void)
{
  enum { V = 1000 };
  float *l = g_new(float, V);
  for (int i = 0; i < V; i++)
    l[i] = (float) sin(i * 0.37) * 3.0f;
  int32_t a[64], b[64], c[64];
  HnError err = { 0 };
  for (int run = 0; run < 3; run++) {
    HnSampler *s = plain_sampler(V, run == 2 ? 8 : 7);
    int32_t *out = run == 0 ? a : run == 1 ? b : c;
    for (int i = 0; i < 64; i++)
      out[i] = hn_sampler_sample(s, l, NULL, &err);
    hn_sampler_free(s);
  }
  g_assert_cmpmem(a, sizeof a, b, sizeof b);
  g_assert_true(memcmp(a, c, sizeof a) != 0);
  /* reset replays the same sequence */
  HnSampler *s = plain_sampler(V, 7);
  for (int i = 0; i < 10; i++)
    hn_sampler_sample(s, l, NULL, &err);
  hn_sampler_reset(s);
  for (int i = 0; i < 64; i++)
    g_assert_cmpint(hn_sampler_sample(s, l, NULL, &err), ==, a[i]);
  hn_sampler_free(s);
  g_free(l);
}

static void
test_greedy_and_bias (void)
{
  float l[5] = { 1.0f, 5.0f, 4.5f, 0.0f, 5.0f };
  HnSamplerParams p;
  hn_sampler_params_init(&p);
  p.temperature = 0.0f;
  HnError err = { 0 };
  HnSampler *s = hn_sampler_new(&p, 5, 64, &err);
  g_assert_cmpint(hn_sampler_sample(s, l, NULL, &err), ==, 1); /* tie 1/4: lower id */
  hn_sampler_free(s);
  HnLogitBias bias[] = { { 1, -INFINITY }, { 2, 0.6f } };
  p.logit_bias = bias;
  p.n_logit_bias = 2;
  s = hn_sampler_new(&p, 5, 64, &err);
  g_assert_cmpint(hn_sampler_sample(s, l, NULL, &err), ==, 2); /* 5.1 beats 5.0 */
  hn_sampler_free(s);
  /* a banned token never comes out of a stochastic draw either */
  p.temperature = 5.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 4;
  s = hn_sampler_new(&p, 5, 64, &err);
  for (int i = 0; i < 2000; i++)
    g_assert_cmpint(hn_sampler_sample(s, l, NULL, &err), !=, 1);
  hn_sampler_free(s);
  /* everything banned: a clear error, no token */
  HnLogitBias all[5];
  for (int i = 0; i < 5; i++)
    all[i] = (HnLogitBias){ i, -INFINITY };
  p.logit_bias = all;
  p.n_logit_bias = 5;
  s = hn_sampler_new(&p, 5, 64, &err);
  g_assert_cmpint(hn_sampler_sample(s, l, NULL, &err), ==, -1);
  g_assert_cmpint(err.code, ==, HN_ERR_INVALID_ARG);
  hn_sampler_free(s);
}

static void
run_mirostat(int mode, float tau, double *mean_surprise)
{
  enum { V = 2000 };
  float *l = g_new(float, V);
  /* Zipf-like: p_i ∝ 1/(i+1) */
  for (int i = 0; i < V; i++)
    l[i] = -logf((float) (i + 1));
  HnSamplerParams p;
  hn_sampler_params_init(&p);
  p.temperature = 1.0f;
  p.mirostat = mode;
  p.mirostat_tau = tau;
  p.mirostat_eta = 0.1f;
  p.seed = 5;
  HnError err = { 0 };
  HnSampler *s = hn_sampler_new(&p, V, 64, &err);
  g_assert_cmpfloat(hn_sampler_mirostat_mu(s), ==, 2 * tau);
  /* surprise is measured against the full distribution (what the model meant) */
  double z = 0;
  for (int i = 0; i < V; i++)
    z += 1.0 / (i + 1);
  double sum = 0;
  int counted = 0;
  for (int step = 0; step < 3000; step++) {
    float mu_before = hn_sampler_mirostat_mu(s);
    int32_t t = hn_sampler_sample(s, l, NULL, &err);
    size_t n_last;
    const HnCandidate *last = hn_sampler_last_candidates(s, &n_last);
    double pt = p_of(last, n_last, t);
    g_assert_cmpfloat(pt, >, 0.0);
    /* the update rule: mu -= eta * (surprise - tau), surprise in the truncated set */
    g_assert_cmpfloat_with_epsilon(hn_sampler_mirostat_mu(s),
                                   mu_before - 0.1 * (-log2(pt) - tau), 1e-4);
    if (mode == 2) /* v2 keeps exactly the tokens with surprise <= mu (at least one) */
      for (size_t i = 0; i < n_last; i++)
        g_assert_true(i == 0 || -log2(((1.0 / (last[i].id + 1)) / z)) <= mu_before + 1e-4);
    if (step >= 1000) {
      sum += -log2(pt);
      counted++;
    }
  }
  *mean_surprise = sum / counted;
  hn_sampler_free(s);
  g_free(l);
}

static void
test_mirostat (void)
{
  for (int mode = 1; mode <= 2; mode++) {
    double lo, hi;
    run_mirostat(mode, 3.0f, &lo);
    run_mirostat(mode, 6.0f, &hi);
    g_test_message("mirostat %d: mean surprise %.2f (tau 3), %.2f (tau 6)", mode, lo, hi);
    /* the controller holds the observed surprise near tau */
    g_assert_cmpfloat(fabs(lo - 3.0), <, 0.5);
    g_assert_cmpfloat(fabs(hi - 6.0), <, 0.5);
  }
}

/* Non-finite logits from a broken model never crash the chain or produce NaN draws. */
static void
test_non_finite (void)
{
  enum { V = 6000 };
  float *l = g_new(float, V);
  for (int i = 0; i < V; i++)
    l[i] = (float) (i % 13);
  l[17] = NAN;
  l[4321] = INFINITY;
  HnError err = { 0 };
  for (int mode = 0; mode < 4; mode++) {
    HnSamplerParams p;
    hn_sampler_params_init(&p);
    p.seed = 3;
    if (mode == 1)
      p.top_k = 0;
    if (mode == 2)
      p.mirostat = 2;
    if (mode == 3) {
      p.top_k = 0;
      p.typical_p = 0.5f;
    }
    HnSampler *s = hn_sampler_new(&p, V, 64, &err);
    for (int i = 0; i < 20; i++)
      g_assert_cmpint(hn_sampler_sample(s, l, NULL, &err), ==, 4321);
    hn_sampler_free(s);
  }
  /* all NaN: every token is "banned", and the error says why (a damaged model), not that
   * the logit bias banned everything */
  for (int i = 0; i < V; i++)
    l[i] = NAN;
  HnSamplerParams p;
  hn_sampler_params_init(&p);
  HnSampler *s = hn_sampler_new(&p, V, 64, &err);
  hn_error_clear(&err);
  g_assert_cmpint(hn_sampler_sample(s, l, NULL, &err), ==, -1);
  g_assert_cmpint(err.code, ==, HN_ERR_INVALID_NUMBERS);
  g_assert_nonnull(strstr(err.message, "invalid numbers"));
  hn_sampler_free(s);
  g_free(l);
}

static void
test_params (void)
{
  HnSamplerParams p;
  hn_sampler_params_init(&p);
  HnError err = { 0 };
  g_assert_true(hn_sampler_params_validate(&p, 100, &err));
  p.top_p = 1.5f;
  g_assert_false(hn_sampler_params_validate(&p, 100, &err));
  g_assert_nonnull(strstr(err.message, "top_p"));
  hn_sampler_params_clamp(&p, 100);
  g_assert_cmpfloat(p.top_p, ==, 1.0f);
  p.temperature = NAN;
  p.top_k = -3;
  p.mirostat = 7;
  hn_sampler_params_clamp(&p, 100);
  g_assert_cmpfloat(p.temperature, ==, 0.8f);
  g_assert_cmpint(p.top_k, ==, 0);
  g_assert_cmpint(p.mirostat, ==, 2);
  g_assert_true(hn_sampler_params_validate(&p, 100, &err));
  /* every row of the parameter table agrees with init, validate, clamp and set/get */
  size_t n_desc;
  const HnParamDesc *table = hn_params_table(&n_desc);
  g_assert_cmpuint(n_desc, >=, 15);
  HnSamplerParams d;
  hn_sampler_params_init(&d);
  for (size_t i = 0; i < n_desc; i++) {
    const HnParamDesc *desc = &table[i];
    g_test_message("%s", desc->key);
    g_assert_true(hn_params_find(desc->key) == desc);
    if (desc->option)
      g_assert_true(hn_params_find_option(desc->option) == desc);
    double v;
    g_assert_true(hn_sampler_params_get(&d, desc->key, &v));
    g_assert_cmpfloat(v, ==, hn_param_get(desc, &d));
    g_assert_cmpfloat_with_epsilon(v, desc->def, 1e-6);
    /* the default, the off value and the app's range lie inside the engine's range */
    g_assert_cmpfloat(desc->min, <=, desc->def);
    g_assert_cmpfloat(desc->def, <=, desc->max);
    g_assert_cmpfloat(desc->min, <=, desc->ui_min);
    g_assert_cmpfloat(desc->ui_min, <, desc->ui_max);
    g_assert_cmpfloat(desc->ui_max, <=, desc->max);
    g_assert_cmpfloat(desc->ui_min, <=, desc->def);
    g_assert_cmpfloat(desc->def, <=, desc->ui_max);
    g_assert_cmpfloat(desc->step, >, 0);
    g_assert_nonnull(desc->label);
    g_assert_nonnull(desc->help);
    if (desc->has_off) {
      g_assert_cmpfloat(desc->min, <=, desc->off);
      g_assert_cmpfloat(desc->off, <=, desc->max);
    }
    /* a field of its own: setting it changes only that field */
    HnSamplerParams q = d;
    double other = desc->def + desc->step <= desc->max ? desc->def + desc->step : desc->def - desc->step;
    hn_param_set(desc, &q, other);
    g_assert_cmpfloat(hn_param_get(desc, &q), ==, desc->type == HN_PARAM_FLOAT ? (double) (float) other : other);
    for (size_t j = 0; j < n_desc; j++)
      if (j != i)
        g_assert_cmpfloat(hn_param_get(&table[j], &q), ==, hn_param_get(&table[j], &d));
    q = d;
    g_assert_true(hn_sampler_params_set(&q, desc->key, desc->ui_max, &err));
    g_assert_true(hn_sampler_params_validate(&q, 0, &err));
    g_assert_true(hn_sampler_params_set(&q, desc->key, desc->min, &err));
    g_assert_true(hn_sampler_params_validate(&q, 0, &err));
    /* (the seed's maximum is near 2^64, where + 1 is lost in a double) */
    g_assert_false(hn_sampler_params_set(&q, desc->key, desc->max + fmax(1, desc->max * 1e-9), &err));
    g_assert_nonnull(strstr(err.message, desc->key));
    g_assert_false(hn_sampler_params_set(&q, desc->key, desc->min - 1, &err));
    g_assert_nonnull(strstr(err.message, desc->key));
    if (desc->type == HN_PARAM_FLOAT || desc->type == HN_PARAM_INT) {
      /* validate refuses what the table refuses; clamp brings it back to the edge, NaN
       * to the default */
      q = d;
      hn_param_set(desc, &q, desc->max + 1);
      g_assert_false(hn_sampler_params_validate(&q, 0, &err));
      g_assert_nonnull(strstr(err.message, desc->key));
      hn_sampler_params_clamp(&q, 0);
      g_assert_cmpfloat(hn_param_get(desc, &q), ==, desc->type == HN_PARAM_FLOAT ? (double) (float) desc->max : desc->max);
      hn_param_set(desc, &q, desc->min - 1);
      g_assert_false(hn_sampler_params_validate(&q, 0, &err));
      hn_sampler_params_clamp(&q, 0);
      g_assert_cmpfloat(hn_param_get(desc, &q), ==, desc->type == HN_PARAM_FLOAT ? (double) (float) desc->min : desc->min);
      /* far beyond the range: saturates (never wraps around), then clamps to the edge */
      hn_param_set(desc, &q, 1e300);
      g_assert_false(hn_sampler_params_validate(&q, 0, &err));
      hn_sampler_params_clamp(&q, 0);
      g_assert_cmpfloat(hn_param_get(desc, &q), ==, desc->type == HN_PARAM_FLOAT ? (double) (float) desc->max : desc->max);
      hn_param_set(desc, &q, -1e300);
      g_assert_false(hn_sampler_params_validate(&q, 0, &err));
      hn_sampler_params_clamp(&q, 0);
      g_assert_cmpfloat(hn_param_get(desc, &q), ==, desc->type == HN_PARAM_FLOAT ? (double) (float) desc->min : desc->min);
      if (desc->type == HN_PARAM_FLOAT) {
        hn_param_set(desc, &q, NAN);
        hn_sampler_params_clamp(&q, 0);
        g_assert_cmpfloat(hn_param_get(desc, &q), ==, (double) (float) desc->def);
      }
    }
  }
  /* keys, options and offsets are unique */
  for (size_t i = 0; i < n_desc; i++)
    for (size_t j = i + 1; j < n_desc; j++) {
      g_assert_cmpstr(table[i].key, !=, table[j].key);
      g_assert_cmpuint(table[i].offset, !=, table[j].offset);
      if (table[i].option && table[j].option)
        g_assert_cmpstr(table[i].option, !=, table[j].option);
    }
  /* -1 is the random seed, any other seed is kept */
  g_assert_true(hn_sampler_params_set(&d, "seed", 42, &err));
  g_assert_cmpuint(d.seed, ==, 42);
  g_assert_true(hn_sampler_params_set(&d, "seed", -1, &err));
  g_assert_cmpuint(d.seed, ==, HN_SAMPLER_SEED_RANDOM);
  g_assert_false(hn_sampler_params_set(&d, "warmth", 1, &err));
  HnLogitBias b = { 100, 1.0f };
  p.logit_bias = &b;
  p.n_logit_bias = 1;
  g_assert_false(hn_sampler_params_validate(&p, 100, &err));
  g_assert_null(hn_sampler_new(&p, 100, 64, &err));
}

static GString *
feed(HnStopMatcher *m, const char *piece, gboolean *stopped)
{
  const char *e;
  size_t n;
  *stopped = hn_stop_matcher_feed(m, piece, strlen(piece), &e, &n);
  return g_string_new_len(e, (gssize) n);
}

#define FEED_EXPECT(piece, expect, expect_stop)                                             \
  do {                                                                                    \
    gboolean st;                                                                          \
    GString *got = feed(m, piece, &st);                                                   \
    g_assert_cmpstr(got->str, ==, expect);                                                \
    g_assert_cmpint(st, ==, expect_stop);                                                 \
    g_string_free(got, TRUE);                                                             \
  } while (0)

static void
test_stop_strings (void)
{
  const char *stops[] = { "</s>", "STOP", "ab" };
  HnError err = { 0 };
  HnStopMatcher *m = hn_stop_matcher_new(stops, 3, &err);
  FEED_EXPECT("Hello <", "Hello ", FALSE);
  FEED_EXPECT("/", "", FALSE);
  FEED_EXPECT("x> S", "</x> ", FALSE);
  FEED_EXPECT("T", "", FALSE);
  FEED_EXPECT("ONE a", "STONE ", FALSE);
  FEED_EXPECT("xa", "ax", FALSE);
  FEED_EXPECT("b and more", "", TRUE);
  g_assert_cmpint(hn_stop_matcher_matched(m), ==, 2);
  FEED_EXPECT("later", "", TRUE);
  hn_stop_matcher_reset(m);
  FEED_EXPECT("one STOP two", "one ", TRUE);
  g_assert_cmpint(hn_stop_matcher_matched(m), ==, 1);
  hn_stop_matcher_reset(m);
  FEED_EXPECT("tail <", "tail ", FALSE);
  const char *e;
  size_t n;
  hn_stop_matcher_flush(m, &e, &n);
  g_assert_cmpmem(e, n, "<", 1);
  /* the earliest stop string wins when two complete in one piece */
  hn_stop_matcher_reset(m);
  FEED_EXPECT("x STOP </s>", "x ", TRUE);
  g_assert_cmpint(hn_stop_matcher_matched(m), ==, 1);
  hn_stop_matcher_free(m);

  const char *bad[] = { "" };
  g_assert_null(hn_stop_matcher_new(bad, 1, &err));
}

/* The grammar is checked lazily: a drawn token the grammar allows costs one check; only a
 * rejected draw masks the vocabulary and draws again (from the allowed tokens). */
static void
test_grammar_lazy_check (void)
{
  const char *bytes[] = { "a", "b", "c", "" };
  const uint32_t lens[] = { 1, 1, 1, 0 };
  const bool eog[] = { false, false, false, true };
  HnError err = { 0 };
  HnGrammarVocab *gv = hn_grammar_vocab_new(4, bytes, lens, eog, &err);
  g_assert_nonnull(gv);
  const char *gbnf = "root ::= \"a\"+";
  HnGrammar *g = hn_grammar_parse(gbnf, strlen(gbnf), NULL, &err);
  g_assert_nonnull(g);
  HnGrammarState *st = hn_grammar_state_new(g, gv, &err);
  g_assert_nonnull(st);
  HnSamplerParams p;
  hn_sampler_params_init(&p);
  p.temperature = 0.0f;
  HnSampler *s = hn_sampler_new(&p, 4, 16, &err);
  g_assert_nonnull(s);

  const float allowed_first[] = { 5, 1, 1, 0 };
  g_assert_cmpint(hn_sampler_sample(s, allowed_first, st, &err), ==, 0);
  HnSamplerGrammarStats stats = hn_sampler_grammar_stats(s);
  g_assert_cmpuint(stats.lazy_accepted, ==, 1);
  g_assert_cmpuint(stats.full_masks, ==, 0);
  g_assert_true(hn_grammar_accept_token(st, 0));

  const float rejected_first[] = { 1, 5, 2, 0 };
  g_assert_cmpint(hn_sampler_sample(s, rejected_first, st, &err), ==, 0);
  stats = hn_sampler_grammar_stats(s);
  g_assert_cmpuint(stats.lazy_accepted, ==, 1);
  g_assert_cmpuint(stats.full_masks, ==, 1);
  g_assert_true(hn_grammar_accept_token(st, 0));

  /* after "aa" the grammar may end: end-of-generation passes the lazy check */
  const float end_first[] = { 1, 2, 3, 9 };
  g_assert_cmpint(hn_sampler_sample(s, end_first, st, &err), ==, 3);
  stats = hn_sampler_grammar_stats(s);
  g_assert_cmpuint(stats.lazy_accepted, ==, 2);
  g_assert_cmpuint(stats.full_masks, ==, 1);

  hn_sampler_free(s);
  hn_grammar_state_free(st);
  hn_grammar_free(g);
  hn_grammar_vocab_free(gv);
}

int
main (int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/sampler/softmax", test_softmax);
  g_test_add_func("/sampler/top-k", test_top_k);
  g_test_add_func("/sampler/top-p", test_top_p);
  g_test_add_func("/sampler/min-p", test_min_p);
  g_test_add_func("/sampler/typical", test_typical);
  g_test_add_func("/sampler/temperature", test_temperature);
  g_test_add_func("/sampler/penalties", test_penalties);
  g_test_add_func("/sampler/penalty-window", test_penalty_window);
  g_test_add_func("/sampler/draw-distribution", test_draw_distribution);
  g_test_add_func("/sampler/seed", test_seed_determinism);
  g_test_add_func("/sampler/greedy-bias", test_greedy_and_bias);
  g_test_add_func("/sampler/mirostat", test_mirostat);
  g_test_add_func("/sampler/params", test_params);
  g_test_add_func("/sampler/non-finite", test_non_finite);
  g_test_add_func("/sampler/stop-strings", test_stop_strings);
  g_test_add_func("/sampler/grammar-lazy-check", test_grammar_lazy_check);
  return g_test_run();
}
