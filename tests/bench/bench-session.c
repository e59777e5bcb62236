/* Reopening a long conversation: evaluating its whole history cold versus loading its
 * session file and evaluating only the new turn.  Prints medians of 3 runs each, the ratio
 * and the file size per token.
 *
 *   HANASHI_BENCH_MODEL=FILE.gguf   the model (default: the tiny LLaMA test model)
 *   HANASHI_BENCH_THREADS=N         threads (default 2)
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hn-context.h"
#include "hn-model.h"
#include "hn-prompt-cache.h"

enum { N_HISTORY = 2000, N_TURN = 8, N_RUNS = 3 };

static double
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static double
median (double *v)
{
  qsort (v, N_RUNS, sizeof *v, cmp_double);
  return v[N_RUNS / 2];
}

static HnContext *
new_context (const HnModel *model, int threads)
{
  HnContextParams p = hn_context_default_params ();
  p.n_ctx = N_HISTORY + N_TURN;
  p.n_threads = threads;
  HnError err = { 0 };
  HnContext *ctx = hn_context_new (model, &p, &err);
  if (ctx == NULL) {
    fprintf (stderr, "bench-session: %s\n", err.message);
    exit (1);
  }
  return ctx;
}

static void
eval_range (HnContext *ctx, const int32_t *tokens, int from, int to)
{
  static int32_t pos[512];
  for (int start = from; start < to; start += hn_context_n_batch (ctx)) {
    int n = to - start < hn_context_n_batch (ctx) ? to - start : hn_context_n_batch (ctx);
    if (n > 512)
      n = 512;
    for (int i = 0; i < n; i++)
      pos[i] = start + i;
    HnBatch batch = { n, tokens + start, pos, NULL, NULL };
    HnError err = { 0 };
    if (!hn_context_decode (ctx, &batch, &err)) {
      fprintf (stderr, "bench-session: %s\n", err.message);
      exit (1);
    }
  }
}

int
main (void)
{
  const char *model_path = getenv ("HANASHI_BENCH_MODEL");
  char fallback[4096];
  if (model_path == NULL) {
    const char *testdata = getenv ("HANASHI_TESTDATA");
    if (testdata == NULL) {
      fprintf (stderr, "bench-session: set HANASHI_BENCH_MODEL or HANASHI_TESTDATA\n");
      return 77;
    }
    snprintf (fallback, sizeof fallback, "%s/models/tiny-llama-spm-q8_0.gguf", testdata);
    model_path = fallback;
  }
  int threads = getenv ("HANASHI_BENCH_THREADS") ? atoi (getenv ("HANASHI_BENCH_THREADS")) : 2;
  HnError err = { 0 };
  HnModel *model = hn_model_load (model_path, NULL, &err);
  if (model == NULL) {
    fprintf (stderr, "bench-session: %s\n", err.message);
    return 77;
  }
  if (hn_model_n_ctx_train (model) < N_HISTORY + N_TURN) {
    fprintf (stderr, "bench-session: the model's context is too short\n");
    return 77;
  }
  int32_t *tokens = malloc (sizeof *tokens * (N_HISTORY + N_TURN));
  int n_vocab = hn_model_n_vocab (model);
  tokens[0] = 1;
  for (int i = 1; i < N_HISTORY + N_TURN; i++)
    tokens[i] = 100 + (int32_t) ((i * 7919) % (n_vocab - 200));

  char path[] = "/tmp/hanashi-bench-session-XXXXXX";
  int fd = mkstemp (path);
  if (fd < 0)
    return 1;
  close (fd);

  /* the session as the previous day left it: the history, evaluated and saved */
  HnContext *ctx = new_context (model, threads);
  eval_range (ctx, tokens, 0, N_HISTORY);
  double t0 = now ();
  if (!hn_prompt_cache_save (ctx, path, tokens, N_HISTORY, &err)) {
    fprintf (stderr, "bench-session: %s\n", err.message);
    return 1;
  }
  double save_s = now () - t0;
  hn_context_free (ctx);

  double cold[N_RUNS], reopen[N_RUNS];
  for (int r = 0; r < N_RUNS; r++) {
    /* interleaved so that both see the same machine load */
    ctx = new_context (model, threads);
    t0 = now ();
    eval_range (ctx, tokens, 0, N_HISTORY + N_TURN);
    cold[r] = now () - t0;
    hn_context_free (ctx);

    ctx = new_context (model, threads);
    t0 = now ();
    uint32_t reused = 0;
    if (!hn_prompt_cache_load (ctx, path, tokens, N_HISTORY + N_TURN, &reused, &err) || reused != N_HISTORY) {
      fprintf (stderr, "bench-session: reuse failed (%u): %s\n", reused, err.message);
      return 1;
    }
    eval_range (ctx, tokens, N_HISTORY, N_HISTORY + N_TURN);
    reopen[r] = now () - t0;
    hn_context_free (ctx);
  }
  struct stat st;
  stat (path, &st);
  double c = median (cold), o = median (reopen);
  printf ("model %s, %d threads, history %d tokens + turn %d\n", model_path, threads, N_HISTORY, N_TURN);
  printf ("cold evaluation        median %.3f s\n", c);
  printf ("reopen from session    median %.3f s (%.2f%% of cold)\n", o, 100.0 * o / c);
  printf ("session file           %lld bytes, %.0f bytes per token, saved in %.3f s\n", (long long) st.st_size,
          (double) st.st_size / N_HISTORY, save_s);
  unlink (path);
  free (tokens);
  hn_model_free (model);
  return 0;
}
