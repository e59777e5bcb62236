/* bench-probs — what recording token probabilities costs (hn_sampler_set_probs, K = 10),
 * and what the panel's lens costs to recompute from a stored row (hn_sampler_probe, K =
 * 20).  A benchmark, not a test: it prints numbers and only fails if something errors.
 *
 *  1. the sampler alone on a synthetic 150k-token vocabulary: µs per token, off and on;
 *  2. the lens: one probe of a 150k row per slider position;
 *  3. whole decode steps through the generation loop, off and on, on HANASHI_BENCH_MODEL
 *     (a GGUF path; e.g. a qwen2.5-0.5b shape made with `hanashi-cli make-model`) or else
 *     the 50k-vocabulary test model; runs alternate so that a busy neighbour hurts both.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-context.h"
#include "hn-generate-model.h"
#include "hn-model.h"
#include "hn-sampler.h"
#include "hn-vocab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_VOCAB = 150000, N_ROWS = 48, PROBS_K = 10 };

static uint64_t state = 0x9e3779b9;

static double
gauss(void)
{
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  double u = ((double) (state >> 11) + 1.0) * 0x1.0p-53;
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  double v = (double) (state >> 11) * 0x1.0p-53;
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static void
die(const HnError *err)
{
  fprintf(stderr, "%s\n", err->message);
  exit(1);
}

/* Off and on sample the same row one after the other, five times; each row counts with
 * its fastest time, so a busy neighbour (a shared machine) hurts both sides alike.  Both
 * samplers see the same history (the tokens the one without recording drew). */
static void
compare_chain(const char *label, const HnSamplerParams *p, float **rows)
{
  HnError err = { 0 };
  HnSampler *off = hn_sampler_new(p, N_VOCAB, 4096, &err), *on = hn_sampler_new(p, N_VOCAB, 4096, &err);
  if (!off || !on || !hn_sampler_set_probs(on, PROBS_K, &err))
    die(&err);
  double total_off = 0.0, total_on = 0.0;
  for (int i = 0; i < N_ROWS; i++) {
    double best_off = INFINITY, best_on = INFINITY;
    int32_t t = -1;
    for (int rep = 0; rep < 5; rep++) {
      double a0 = hn_time_now();
      t = hn_sampler_sample(off, rows[i], NULL, &err);
      double a1 = hn_time_now();
      if (t < 0 || hn_sampler_sample(on, rows[i], NULL, &err) < 0)
        die(&err);
      double a2 = hn_time_now();
      best_off = a1 - a0 < best_off ? a1 - a0 : best_off;
      best_on = a2 - a1 < best_on ? a2 - a1 : best_on;
    }
    if (t < 0)
      die(&err);
    hn_sampler_accept(off, t);
    hn_sampler_accept(on, t);
    total_off += best_off;
    total_on += best_on;
  }
  double us_off = total_off * 1e6 / N_ROWS, us_on = total_on * 1e6 / N_ROWS;
  printf("%-44s %8.1f us off %8.1f us on  (+%.1f us/token)\n", label, us_off, us_on, us_on - us_off);
  hn_sampler_free(off);
  hn_sampler_free(on);
}

/* The recording's own part: the raw top K and log-sum-exp of a row. */
static void
bench_top_raw(float **rows)
{
  HnProbCandidate out[HN_PROBS_MAX_K];
  double total = 0.0;
  for (int i = 0; i < N_ROWS; i++) {
    double best = INFINITY;
    for (int rep = 0; rep < 5; rep++) {
      double t0 = hn_time_now();
      hn_probs_top_raw(rows[i], N_VOCAB, PROBS_K, out);
      double t = hn_time_now() - t0;
      best = t < best ? t : best;
    }
    total += best;
  }
  printf("%-44s %8.1f us\n", "raw top K + log-sum-exp alone", total * 1e6 / N_ROWS);
}

static double
generate_ms_per_token(HnGenModelBackend *backend, const int32_t *prompt, size_t n_prompt, int32_t k,
                      int n_tokens)
{
  HnSamplerParams sp;
  hn_sampler_params_init(&sp);
  sp.seed = 1;
  sp.max_new_tokens = n_tokens;
  HnGenRequest req;
  hn_gen_request_init(&req);
  req.prompt = prompt;
  req.n_prompt = n_prompt;
  req.sampler = &sp;
  req.probs_k = k;
  HnGenResult res;
  HnError err = { 0 };
  if (!hn_generate_with_backend(&backend->backend, &req, &res, &err))
    die(&err);
  return res.generate_seconds * 1e3 / (double) (res.n_generated > 1 ? res.n_generated - 1 : 1);
}

static void
bench_decode(void)
{
  const char *path = getenv("HANASHI_BENCH_MODEL");
  char fallback[4096];
  if (path == NULL || *path == '\0') {
    const char *data = getenv("HANASHI_TESTDATA");
    if (data == NULL) {
      printf("neither HANASHI_BENCH_MODEL nor HANASHI_TESTDATA set: decode comparison skipped\n");
      return;
    }
    snprintf(fallback, sizeof fallback, "%s/models/tiny-qwen2-gpt2-q8_0.gguf", data);
    path = fallback;
  }
  HnError err = { 0 };
  HnModel *model = hn_model_load(path, NULL, &err);
  if (!model)
    die(&err);
  HnVocab *vocab = hn_vocab_load(hn_model_gguf(model), &err);
  if (!vocab)
    die(&err);
  HnContextParams cp = hn_context_default_params();
  cp.n_ctx = 256;
  HnContext *ctx = hn_context_new(model, &cp, &err);
  HnGenModelBackend backend;
  if (!ctx || !hn_gen_model_backend_init(&backend, ctx, vocab, &err))
    die(&err);
  const int32_t prompt[] = { 100, 200, 300, 400, 500, 600, 700, 800 };
  enum { TOKENS = 48, ROUNDS = 3 };
  double off = INFINITY, on = INFINITY;
  generate_ms_per_token(&backend, prompt, 8, 0, 4); /* warm up */
  for (int r = 0; r < ROUNDS; r++) {
    double a = generate_ms_per_token(&backend, prompt, 8, 0, TOKENS);
    double b = generate_ms_per_token(&backend, prompt, 8, PROBS_K, TOKENS);
    off = a < off ? a : off;
    on = b < on ? b : on;
  }
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  printf("decode step, %s (vocabulary %d), best of %d x %d tokens:\n", name, hn_model_n_vocab(model), ROUNDS,
         TOKENS);
  printf("  %.3f ms off, %.3f ms with K = %d: %+.2f%%\n", off, on, PROBS_K, (on - off) / off * 100.0);
  hn_gen_model_backend_clear(&backend);
  hn_context_free(ctx);
  hn_vocab_free(vocab);
  hn_model_free(model);
}

int
main(void)
{
  float *rows[N_ROWS];
  for (int i = 0; i < N_ROWS; i++) {
    rows[i] = malloc(N_VOCAB * sizeof(float));
    for (int v = 0; v < N_VOCAB; v++)
      rows[i][v] = (float) (gauss() * 2.0);
    for (int k = 0; k < 8; k++)
      rows[i][(size_t) (fabs(gauss()) * 9973.0) % N_VOCAB] += 8.0f;
  }
  printf("probability recording, K = %d, %d-token vocabulary (fastest of 5 per row, %d rows)\n", PROBS_K, N_VOCAB, N_ROWS);
  HnSamplerParams p;
  hn_sampler_params_init(&p);
  p.seed = 1;
  bench_top_raw(rows);
  compare_chain("defaults (top-k 40, top-p .95, min-p .05)", &p, rows);
  p.top_k = 0;
  compare_chain("top-k off", &p, rows);
  p.typical_p = 0.9f;
  compare_chain("top-k off, typical .9", &p, rows);
  hn_sampler_params_init(&p);
  p.temperature = 0.0f;
  compare_chain("greedy", &p, rows);

  /* the lens: every slider move probes the stored row once */
  HnError err = { 0 };
  hn_sampler_params_init(&p);
  p.seed = 1;
  p.top_k = 0;
  p.typical_p = 0.95f;
  HnSampler *s = hn_sampler_new(&p, N_VOCAB, 4096, &err);
  if (!s || !hn_sampler_set_probs(s, HN_PROBS_MAX_K, &err))
    die(&err);
  double worst = 0.0, total = 0.0;
  for (int i = 0; i < N_ROWS; i++) {
    double t0 = hn_time_now();
    if (hn_sampler_probe(s, rows[i], NULL, &err) < 0)
      die(&err);
    double ms = (hn_time_now() - t0) * 1e3;
    total += ms;
    worst = ms > worst ? ms : worst;
  }
  printf("lens recompute (probe, K = %d, top-k off, typical .95): %.2f ms mean, %.2f ms worst\n",
         HN_PROBS_MAX_K, total / N_ROWS, worst);
  hn_sampler_free(s);
  for (int i = 0; i < N_ROWS; i++)
    free(rows[i]);

  bench_decode();
  return 0;
}
