/* hanashi-cli bench -m MODEL [-p 512] [-n 128] [-t THREADS] [-r REPS] [--json]
 *
 * Measures prompt processing (p tokens in one decode call) and generation (n tokens one
 * at a time), each from an empty cache and repeated r times after one warm-up run, the
 * way the reference engine's benchmark does, so the two can be compared side by side.
 * Token ids are pseudo-random: the cost of a forward pass does not depend on them.
 * -d DEPTH fills the cache with DEPTH tokens (untimed) before each run, to measure
 * speed deep into a conversation.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli-common.h"
#include "hn-context.h"
#include "hn-cpu.h"
#include "hn-gguf.h"
#include "hn-threadpool.h"

int cli_bench(int argc, char **argv);

#define USAGE "usage: hanashi-cli bench -m MODEL [-p 512] [-n 128] [-t THREADS] [-r REPS] [-d DEPTH] [-ngl N|auto] [--gpu-device N] [--json]"

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
  bool filled; /* the cache has held `depth` tokens since the first run */
  /* what the graphics device was asked per generated token (hn_context_gpu_counts),
   * summed over the generation runs' decode calls */
  uint64_t gen_steps, gen_submissions, gen_fence_waits, gen_dispatches;
} Bench;

/* Leaves the cache holding exactly `depth` tokens (untimed).  The depth is filled once:
 * later runs only remove what the previous run added, unless a sliding window reused the
 * rows the next run would need (then it fills again from an empty cache). */
static bool
reset_cache(Bench *b, HnError *err)
{
  HnKvCache *kv = hn_context_kv(b->ctx);
  if (b->filled) {
    hn_kv_cache_seq_rm(kv, -1, b->depth, -1);
    if (hn_kv_cache_seq_resume_min(kv, 0) <= b->depth)
      return true;
  }
  hn_kv_cache_clear(kv);
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
  b->filled = true;
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
    HnVkCounts before, after;
    bool on_device = hn_context_gpu_counts(b->ctx, &before);
    if (!hn_context_decode(b->ctx, &batch, err))
      return -1.0;
    if (on_device && hn_context_gpu_counts(b->ctx, &after)) {
      b->gen_steps++;
      b->gen_submissions += after.submissions - before.submissions;
      b->gen_fence_waits += after.fence_waits - before.fence_waits;
      b->gen_dispatches += after.dispatches - before.dispatches;
    }
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

/* ---- the memory-bandwidth bound of generation ----
 *
 * Generation reads every weight once per token, so read bandwidth / bytes of weights
 * per token is the speed no decode kernel can beat.  The bandwidth is measured the way
 * decode reads: two threads, each streaming its half of a buffer far larger than the
 * caches, best of a few passes.  A bound must not be beaten, so the reader is at least
 * as good at pulling memory as the decode kernels: besides one plain stream per thread
 * it also reads eight interleaved streams with a software prefetch ahead of each (the
 * decode tile's pattern, which on some processors draws more bandwidth than a single
 * stream), and the best pass of either counts. */

#define BW_MIN_BYTES ((size_t) 256 << 20)
#define BW_MAX_BYTES ((size_t) 1 << 30)
#define BW_THREADS 2
#define BW_STREAMS 8
#define BW_PREFETCH_BYTES 768

typedef struct {
  const uint64_t *p;
  size_t n;
  int n_streams;
  uint64_t sum;
} BwPart;

static void *
bw_read(void *data)
{
  BwPart *part = data;
  const size_t per_stream = part->n / (size_t) part->n_streams / 8 * 8; /* whole cache lines */
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i < per_stream; i += 8)
    for (int s = 0; s < part->n_streams; s++) {
      const uint64_t *line = part->p + (size_t) s * per_stream + i;
      if (part->n_streams > 1)
        __builtin_prefetch((const char *) line + BW_PREFETCH_BYTES);
      s0 += line[0] + line[4];
      s1 += line[1] + line[5];
      s2 += line[2] + line[6];
      s3 += line[3] + line[7];
    }
  part->sum = s0 + s1 + s2 + s3;
  return NULL;
}

/* Several times the last-level cache, so that the passes come from memory (some server
 * processors have hundreds of megabytes of it). */
static size_t
bandwidth_buffer_bytes(void)
{
  size_t bytes = BW_MIN_BYTES;
#ifdef _SC_LEVEL3_CACHE_SIZE
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0 && (size_t) l3 * 4 > bytes)
    bytes = (size_t) l3 * 4;
#endif
  return bytes < BW_MAX_BYTES ? bytes : BW_MAX_BYTES;
}

/* Read bandwidth in bytes per second, 0 when it could not be measured. */
static double
read_bandwidth(void)
{
  const size_t bytes = bandwidth_buffer_bytes();
  uint64_t *buf = malloc(bytes);
  if (!buf)
    return 0;
  memset(buf, 1, bytes);
  double best = 0;
  for (int pass = 0; pass < 10; pass++) {
    BwPart parts[BW_THREADS];
    pthread_t threads[BW_THREADS];
    size_t per = bytes / sizeof *buf / BW_THREADS;
    double t0 = now_seconds();
    int started = 0;
    for (int t = 0; t < BW_THREADS; t++) {
      parts[t] = (BwPart) { .p = buf + (size_t) t * per, .n = per, .n_streams = pass % 2 ? BW_STREAMS : 1 };
      if (pthread_create(&threads[t], NULL, bw_read, &parts[t]) == 0)
        started++;
      else
        bw_read(&parts[t]);
    }
    for (int t = 0; t < started; t++)
      pthread_join(threads[t], NULL);
    double dt = now_seconds() - t0;
    /* the sums are used, so the reads cannot be optimised away */
    if (parts[0].sum + parts[BW_THREADS - 1].sum == 0)
      dt += 1e-9;
    size_t read = 0;
    for (int t = 0; t < BW_THREADS; t++)
      read += parts[t].n / (size_t) parts[t].n_streams / 8 * 8 * (size_t) parts[t].n_streams * sizeof *buf;
    if (dt > 0 && (double) read / dt > best)
      best = (double) read / dt;
  }
  free(buf);
  return best;
}

/* Bytes of weights one generated token reads: every matrix once, of the token embedding
 * one row (all of it when it doubles as the output matrix). */
static double
weight_bytes_per_token(const HnModel *model)
{
  const HnGguf *g = hn_model_gguf(model);
  bool tied = g && !hn_gguf_find_tensor(g, "output.weight");
  double bytes = 0;
  for (int64_t i = 0; g && i < hn_gguf_n_tensors(g); i++) {
    const HnGgufTensor *t = hn_gguf_tensor(g, i);
    if (strcmp(t->name, "token_embd.weight") == 0 && !tied)
      bytes += t->ne[1] > 0 ? (double) t->nbytes / (double) t->ne[1] : 0;
    else
      bytes += (double) t->nbytes;
  }
  return bytes;
}

int
cli_bench(int argc, char **argv)
{
  const char *model_path = NULL;
  long long n_prompt = 512, n_gen = 128, threads = 0, reps = 5, depth = 0, gpu_layers = 0, gpu_device = -1;
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
    } else if (strcmp(opt, "-ngl") == 0 || strcmp(opt, "--gpu-layers") == 0) {
      if (!cli_parse_gpu_layers(val, &gpu_layers))
        return cli_fail("invalid layer count '%s'", val);
    } else if (strcmp(opt, "--gpu-device") == 0) {
      if (!cli_parse_gpu_device(val, &gpu_device))
        return cli_fail("invalid device number '%s'", val);
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
  if (!cli_check_gpu_device(gpu_device))
    return 1;

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
  params.n_gpu_layers = (int) gpu_layers;
  params.gpu_device = (int) gpu_device;
  if (!(b.ctx = hn_context_new(model, &params, &err))) {
    status = cli_fail_error(&err);
    goto out;
  }
  cli_notice(hn_context_notice(b.ctx));
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
  /* after the peak memory was read: the bandwidth buffer is not the model's */
  double bandwidth = n_gen > 0 ? read_bandwidth() : 0, per_token = weight_bytes_per_token(model);
  double bound = per_token > 0 ? bandwidth / per_token : 0;
  double of_bound = bound > 0 && n_gen > 0 ? sg.mean / bound : 0;
  /* where the layers ran (a device that failed during the runs has handed them back) */
  int on_gpu = hn_context_gpu_layers(b.ctx);
  const char *device = on_gpu > 0 ? hn_context_gpu_device(b.ctx) : "CPU";
  double steps = b.gen_steps ? (double) b.gen_steps : 1.0;
  double submissions = (double) b.gen_submissions / steps, fence_waits = (double) b.gen_fence_waits / steps;
  double dispatches = (double) b.gen_dispatches / steps;
  if (json) {
    printf("{\"model\": ");
    print_json_string(model_path);
    printf(", \"n_prompt\": %lld, \"n_gen\": %lld, \"depth\": %lld, \"threads\": %d, \"reps\": %lld, \"simd\": ",
           n_prompt, n_gen, depth, used_threads, reps);
    print_json_string(simd);
    printf(", \"gpu_layers\": %d, \"device\": ", on_gpu);
    print_json_string(device);
    printf(", \"gpu_submissions_per_token\": %.2f, \"gpu_fence_waits_per_token\": %.2f, "
           "\"gpu_dispatches_per_token\": %.1f",
           submissions, fence_waits, dispatches);
    printf(", \"pp_tps\": %.3f, \"pp_tps_stddev\": %.3f, \"tg_tps\": %.3f, \"tg_tps_stddev\": %.3f, "
           "\"peak_rss_mb\": %.1f, \"read_gbps\": %.2f, \"weight_mb_per_token\": %.1f, \"tg_bound_tps\": %.2f, "
           "\"tg_of_bound\": %.3f}\n",
           sp.mean, sp.stddev, sg.mean, sg.stddev, rss, bandwidth / 1e9, per_token / 1e6, bound, of_bound);
  } else {
    char types[256];
    hn_model_type_summary(model, types, sizeof types);
    printf("model: %s (%s)\nthreads: %d, kernels: %s, repetitions: %lld\n", model_path, types,
           used_threads, simd, reps);
    if (on_gpu > 0)
      printf("device: %s, %d of %d layers offloaded\n", device, on_gpu, hn_model_n_layer(model));
    if (on_gpu > 0 && b.gen_steps > 0)
      printf("device work per generated token: %.2f submissions, %.2f fence waits, %.1f dispatches\n", submissions,
             fence_waits, dispatches);
    if (depth > 0)
      printf("depth: %lld tokens in the cache before each run\n", depth);
    if (n_prompt > 0)
      printf("pp%-6lld %10.2f t/s ± %.2f\n", n_prompt, sp.mean, sp.stddev);
    if (n_gen > 0)
      printf("tg%-6lld %10.2f t/s ± %.2f\n", n_gen, sg.mean, sg.stddev);
    printf("peak resident memory: %.1f MiB\n", rss);
    if (bound > 0)
      printf("bandwidth bound: %d threads read %.1f GB/s, %.1f MB of weights per token: %.1f t/s; "
             "tg%lld reaches %.0f%% of it\n",
             BW_THREADS, bandwidth / 1e9, per_token / 1e6, bound, n_gen, 100.0 * of_bound);
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
