/* bench-probs — what recording token probabilities costs (hn_sampler_set_probs, K = 10),
 * and what the panel's lens costs to recompute from a stored row (hn_lens_compute, K =
 * 20).  A benchmark, not a test: it prints numbers and only fails if something errors.
 *
 *  1. the sampler alone on a synthetic 150k-token vocabulary: µs per token, off and on;
 *  2. the lens: one hn_lens_compute of a 150k row per slider position, for settings that
 *     keep most of the vocabulary (top-k off, typical on, penalties, mirostat, a grammar);
 *  3. whole decode steps through the generation loop, off and on, on HANASHI_BENCH_MODEL
 *     (a GGUF path; e.g. a qwen2.5-0.5b shape made with `hanashi-cli make-model`) or else
 *     the 50k-vocabulary test model; runs alternate so that a busy neighbour hurts both.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "bench-support.h"
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
  char buf[4096];
  const char *path = bench_model_path("tiny-qwen2-gpt2-q8_0.gguf", buf, sizeof buf);
  if (path == NULL) {
    printf("neither HANASHI_BENCH_MODEL nor HANASHI_TESTDATA set: decode comparison skipped\n");
    return;
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

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

typedef struct {
  const char *label;
  void (*set)(HnSamplerParams *p, uint32_t *allowed);
} LensSetting;

static void lens_defaults(HnSamplerParams *p, uint32_t *allowed) { (void) p; (void) allowed; }
static void lens_all_off(HnSamplerParams *p, uint32_t *allowed) { (void) allowed; p->top_k = 0; p->top_p = 1.0f; p->min_p = 0.0f; }
static void lens_nucleus(HnSamplerParams *p, uint32_t *allowed) { (void) allowed; p->top_k = 0; p->top_p = 0.95f; p->min_p = 0.0f; p->temperature = 1.3f; }
static void lens_typical(HnSamplerParams *p, uint32_t *allowed) { (void) allowed; p->top_k = 0; p->top_p = 1.0f; p->min_p = 0.0f; p->typical_p = 0.95f; }
static void lens_penalties(HnSamplerParams *p, uint32_t *allowed)
{
  (void) allowed;
  p->top_k = 0; p->top_p = 1.0f; p->min_p = 0.0f; p->typical_p = 0.9f;
  p->repeat_penalty = 1.3f; p->frequency_penalty = 0.4f; p->presence_penalty = 0.4f; p->repeat_last_n = -1;
}
static void lens_mirostat(HnSamplerParams *p, uint32_t *allowed) { (void) allowed; p->mirostat = 2; p->top_k = 0; }
static void lens_grammar(HnSamplerParams *p, uint32_t *allowed)
{
  p->top_k = 0; p->top_p = 1.0f; p->min_p = 0.0f; p->typical_p = 0.95f;
  for (int32_t i = 0; i < N_VOCAB; i++)
    if ((i * 2654435761u) % 3 == 0) /* a third of the vocabulary forbidden */
      allowed[i / 32] &= ~(1u << (i % 32));
}

/* The lens: one hn_lens_compute per slider position on a stored 150k row, K = 20; the
 * median and worst over the rows for each setting (every run counts: a frame has no
 * second try). */
static void
bench_lens(float **rows)
{
  static const LensSetting settings[] = {
    { "defaults (top-k 40, top-p .95, min-p .05)", lens_defaults },
    { "top-k off, top-p 1, min-p 0", lens_all_off },
    { "top-k off, top-p .95, T 1.3", lens_nucleus },
    { "top-k off, typical .95", lens_typical },
    { "typical .9 + penalties over 4096 tokens", lens_penalties },
    { "mirostat 2, top-k off", lens_mirostat },
    { "typical .95 + grammar mask (1/3 banned)", lens_grammar },
  };
  HnError err = { 0 };
  HnLens *lens = hn_lens_new(N_VOCAB, &err);
  if (!lens)
    die(&err);
  size_t words = (N_VOCAB + 31) / 32;
  uint32_t *allowed = malloc(words * sizeof *allowed);
  int32_t *history = malloc(4096 * sizeof *history);
  for (int i = 0; i < 4096; i++)
    history[i] = (int32_t) ((unsigned) i * 7919u % N_VOCAB);
  double ms[N_ROWS];
  printf("lens recompute (hn_lens_compute, K = %d, %d-token row, every run of %d rows):\n", HN_PROBS_MAX_K,
         N_VOCAB, N_ROWS);
  for (size_t si = 0; si < sizeof settings / sizeof settings[0]; si++) {
    HnSamplerParams p;
    hn_sampler_params_init(&p);
    p.seed = 1;
    memset(allowed, 0xff, words * sizeof *allowed);
    settings[si].set(&p, allowed);
    bool grammar = settings[si].set == lens_grammar;
    HnTokenProbs out;
    for (int i = 0; i < N_ROWS; i++) {
      HnLensInput in = { .logits = rows[i], .history = history, .n_history = 4096,
                         .allowed = grammar ? allowed : NULL, .mirostat_mu = NAN };
      double t0 = hn_time_now();
      if (!hn_lens_compute(lens, &p, &in, HN_PROBS_MAX_K, &out, &err))
        die(&err);
      ms[i] = (hn_time_now() - t0) * 1e3;
    }
    qsort(ms, N_ROWS, sizeof ms[0], cmp_double);
    printf("  %-44s %6.2f ms median %6.2f ms worst\n", settings[si].label, ms[N_ROWS / 2], ms[N_ROWS - 1]);
  }
  free(history);
  free(allowed);
  hn_lens_free(lens);
}

static void
print_cpu(void)
{
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[512];
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "model name", 10) == 0) {
      const char *colon = strchr(line, ':');
      printf("CPU:%s", colon ? colon + 1 : line);
      break;
    }
  if (f)
    fclose(f);
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
  print_cpu();
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

  bench_lens(rows);
  for (int i = 0; i < N_ROWS; i++)
    free(rows[i]);

  bench_decode();
  return 0;
}
