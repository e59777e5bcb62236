/* hanashi-cli bench -m MODEL [-p 512] [-n 128] [-t THREADS] [-r REPS] [--json]
 *
 * Measures prompt processing (p tokens in one decode call) and generation (n tokens one
 * at a time), each from an empty cache and repeated r times after one warm-up run, the
 * way the reference engine's benchmark does, so the two can be compared side by side.
 * Token ids are pseudo-random: the cost of a forward pass does not depend on them.
 * -d DEPTH fills the cache with DEPTH tokens (untimed) before each run, to measure
 * speed deep into a conversation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli-common.h"
#include "hn-context.h"
#include "hn-cpu.h"
#include "hn-threadpool.h"

int cli_bench(int argc, char **argv);

#define USAGE "usage: hanashi-cli bench -m MODEL [-p 512] [-n 128] [-t THREADS] [-r REPS] [-d DEPTH] [--json]"

static double
now_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static uint32_t
next_random(uint32_t *state)
{
  *state = *state * 1664525u + 1013904223u;
  return *state >> 8;
}

typedef struct {
  HnContext *ctx;
  int n_vocab, depth, n_batch;
  int32_t *tokens, *pos;
  uint32_t rng;
} Bench;

/* Empties the cache and, with a depth, fills it with that many tokens (untimed). */
static bool
reset_cache(Bench *b, HnError *err)
{
  hn_kv_cache_clear(hn_context_kv(b->ctx));
  for (int done = 0; done < b->depth;) {
    int n = b->depth - done < b->n_batch ? b->depth - done : b->n_batch;
    for (int i = 0; i < n; i++) {
      b->tokens[i] = (int32_t) (next_random(&b->rng) % (uint32_t) b->n_vocab);
      b->pos[i] = done + i;
    }
    HnBatch batch = { .n_tokens = n, .token = b->tokens, .pos = b->pos };
    if (!hn_context_decode(b->ctx, &batch, err))
      return false;
    done += n;
  }
  return true;
}

/* One prompt-processing run of n tokens in a single batch; seconds or < 0 on error. */
static double
run_prompt(Bench *b, int n, HnError *err)
{
  if (!reset_cache(b, err))
    return -1.0;
  for (int i = 0; i < n; i++) {
    b->tokens[i] = (int32_t) (next_random(&b->rng) % (uint32_t) b->n_vocab);
    b->pos[i] = b->depth + i;
  }
  HnBatch batch = { .n_tokens = n, .token = b->tokens, .pos = b->pos };
  double t0 = now_seconds();
  if (!hn_context_decode(b->ctx, &batch, err))
    return -1.0;
  return now_seconds() - t0;
}

/* One generation run: n single-token decode calls at positions 0..n-1. */
static double
run_generate(Bench *b, int n, HnError *err)
{
  if (!reset_cache(b, err))
    return -1.0;
  double t0 = now_seconds();
  for (int i = 0; i < n; i++) {
    int32_t token = (int32_t) (next_random(&b->rng) % (uint32_t) b->n_vocab), pos = b->depth + i;
    HnBatch batch = { .n_tokens = 1, .token = &token, .pos = &pos };
    if (!hn_context_decode(b->ctx, &batch, err))
      return -1.0;
  }
  return now_seconds() - t0;
}

typedef struct {
  double mean, stddev;
} Stats;

static Stats
stats_of(const double *tps, int n)
{
  Stats s = { 0.0, 0.0 };
  for (int i = 0; i < n; i++)
    s.mean += tps[i];
  s.mean /= n;
  if (n > 1) {
    double var = 0.0;
    for (int i = 0; i < n; i++)
      var += (tps[i] - s.mean) * (tps[i] - s.mean);
    s.stddev = sqrt(var / (n - 1));
  }
  return s;
}

/* Warm-up plus reps timed runs; fills tps[reps] with tokens per second. */
static bool
measure(Bench *b, double (*run)(Bench *, int, HnError *), int n, int reps, double *tps, HnError *err)
{
  if (run(b, n, err) < 0.0)
    return false;
  for (int r = 0; r < reps; r++) {
    double seconds = run(b, n, err);
    if (seconds < 0.0)
      return false;
    tps[r] = seconds > 0.0 ? n / seconds : 0.0;
  }
  return true;
}

static double
peak_rss_mb(void)
{
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return 0.0;
  return (double) ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

static void
print_json_string(const char *s)
{
  putchar('"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char) *s;
    if (ch == '"' || ch == '\\')
      printf("\\%c", ch);
    else if (ch < 0x20)
      printf("\\u%04x", ch);
    else
      putchar(ch);
  }
  putchar('"');
}

int
cli_bench(int argc, char **argv)
{
  const char *model_path = NULL;
  long long n_prompt = 512, n_gen = 128, threads = 0, reps = 5, depth = 0;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    const char *opt = argv[i];
    if (strcmp(opt, "--json") == 0) {
      json = true;
      continue;
    }
    if (i + 1 >= argc)
      return cli_fail("option '%s' needs a value (" USAGE ")", opt);
    const char *val = argv[++i];
    if (strcmp(opt, "-m") == 0 || strcmp(opt, "--model") == 0)
      model_path = val;
    else if (strcmp(opt, "-p") == 0 || strcmp(opt, "--n-prompt") == 0) {
      if (!cli_parse_int(val, 0, 1 << 20, &n_prompt))
        return cli_fail("invalid prompt length '%s'", val);
    } else if (strcmp(opt, "-n") == 0 || strcmp(opt, "--n-gen") == 0) {
      if (!cli_parse_int(val, 0, 1 << 20, &n_gen))
        return cli_fail("invalid generation length '%s'", val);
    } else if (strcmp(opt, "-t") == 0 || strcmp(opt, "--threads") == 0) {
      if (!cli_parse_int(val, 1, 512, &threads))
        return cli_fail("invalid thread count '%s'", val);
    } else if (strcmp(opt, "-d") == 0 || strcmp(opt, "--depth") == 0) {
      if (!cli_parse_int(val, 0, 1 << 20, &depth))
        return cli_fail("invalid depth '%s'", val);
    } else if (strcmp(opt, "-r") == 0 || strcmp(opt, "--repetitions") == 0) {
      if (!cli_parse_int(val, 1, 1000, &reps))
        return cli_fail("invalid repetition count '%s'", val);
    } else
      return cli_fail("unknown option '%s' (" USAGE ")", opt);
  }
  if (!model_path)
    return cli_fail(USAGE);
  if (n_prompt == 0 && n_gen == 0)
    return cli_fail("nothing to measure: -p and -n are both 0");

  HnError err = { 0 };
  HnModel *model = hn_model_load(model_path, NULL, &err);
  if (!model)
    return cli_fail_error(&err);
  int status = 1;
  Bench b = { .n_vocab = hn_model_n_vocab(model), .depth = (int) depth, .rng = 12345u };
  double *pp = NULL, *tg = NULL;
  long long n_ctx = depth + (n_prompt > n_gen ? n_prompt : n_gen);
  if (n_ctx > hn_model_n_ctx_train(model)) {
    status = cli_fail("%lld tokens exceed the model's context of %d", n_ctx, hn_model_n_ctx_train(model));
    goto out;
  }
  HnContextParams params = hn_context_default_params();
  params.n_ctx = (int) n_ctx;
  long long widest = n_prompt > depth ? n_prompt : depth;
  params.n_batch = widest > 0 ? (int) (widest < 512 ? widest : 512) : 1;
  params.n_threads = (int) threads;
  if (!(b.ctx = hn_context_new(model, &params, &err))) {
    status = cli_fail_error(&err);
    goto out;
  }
  b.n_batch = params.n_batch;
  size_t n_ids = (size_t) (widest > 0 ? widest : 1);
  b.tokens = malloc(n_ids * sizeof *b.tokens);
  b.pos = malloc(n_ids * sizeof *b.pos);
  pp = calloc((size_t) reps, sizeof *pp);
  tg = calloc((size_t) reps, sizeof *tg);
  if (!b.tokens || !b.pos || !pp || !tg) {
    status = cli_fail("out of memory");
    goto out;
  }
  if ((n_prompt > 0 && !measure(&b, run_prompt, (int) n_prompt, (int) reps, pp, &err)) ||
      (n_gen > 0 && !measure(&b, run_generate, (int) n_gen, (int) reps, tg, &err))) {
    status = cli_fail_error(&err);
    goto out;
  }
  Stats sp = stats_of(pp, (int) reps), sg = stats_of(tg, (int) reps);
  int used_threads = threads > 0 ? (int) threads : hn_physical_cores();
  double rss = peak_rss_mb();
  const char *simd = hn_simd_level_name(hn_cpu_simd_level());
  if (json) {
    printf("{\"model\": ");
    print_json_string(model_path);
    printf(", \"n_prompt\": %lld, \"n_gen\": %lld, \"depth\": %lld, \"threads\": %d, \"reps\": %lld, \"simd\": ",
           n_prompt, n_gen, depth, used_threads, reps);
    print_json_string(simd);
    printf(", \"pp_tps\": %.3f, \"pp_tps_stddev\": %.3f, \"tg_tps\": %.3f, \"tg_tps_stddev\": %.3f, "
           "\"peak_rss_mb\": %.1f}\n", sp.mean, sp.stddev, sg.mean, sg.stddev, rss);
  } else {
    char types[256];
    hn_model_type_summary(model, types, sizeof types);
    printf("model: %s (%s)\nthreads: %d, kernels: %s, repetitions: %lld\n", model_path, types,
           used_threads, simd, reps);
    if (depth > 0)
      printf("depth: %lld tokens in the cache before each run\n", depth);
    if (n_prompt > 0)
      printf("pp%-6lld %10.2f t/s ± %.2f\n", n_prompt, sp.mean, sp.stddev);
    if (n_gen > 0)
      printf("tg%-6lld %10.2f t/s ± %.2f\n", n_gen, sg.mean, sg.stddev);
    printf("peak resident memory: %.1f MiB\n", rss);
  }
  status = 0;
out:
  free(pp);
  free(tg);
  free(b.tokens);
  free(b.pos);
  hn_context_free(b.ctx);
  hn_model_free(model);
  return status;
}
