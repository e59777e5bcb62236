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
#include <unistd.h>

#include "bench-support.h"
#include "hn-common.h"
#include "hn-prompt-cache.h"

enum { N_HISTORY = 2000, N_TURN = 8, N_RUNS = 3 };

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
    bench_decode_or_exit ("bench-session", ctx, &batch);
  }
}

int
main (void)
{
  char buf[4096];
  const char *model_path = bench_model_path ("tiny-llama-spm-q8_0.gguf", buf, sizeof buf);
  if (model_path == NULL) {
    fprintf (stderr, "bench-session: set HANASHI_BENCH_MODEL or HANASHI_TESTDATA\n");
    return 77;
  }
  int threads = bench_threads ();
  HnError err = { 0 };
  HnModel *model = bench_load_model ("bench-session", model_path);
  if (model == NULL)
    return 77;
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
  double t0 = hn_time_now ();
  if (!hn_prompt_cache_save (ctx, path, tokens, N_HISTORY, &err)) {
    fprintf (stderr, "bench-session: %s\n", err.message);
    return 1;
  }
  double save_s = hn_time_now () - t0;
  hn_context_free (ctx);

  double cold[N_RUNS], reopen[N_RUNS];
  for (int r = 0; r < N_RUNS; r++) {
    /* interleaved so that both see the same machine load */
    ctx = new_context (model, threads);
    t0 = hn_time_now ();
    eval_range (ctx, tokens, 0, N_HISTORY + N_TURN);
    cold[r] = hn_time_now () - t0;
    hn_context_free (ctx);

    ctx = new_context (model, threads);
    t0 = hn_time_now ();
    uint32_t reused = 0;
    if (!hn_prompt_cache_load (ctx, path, tokens, N_HISTORY + N_TURN, &reused, &err) || reused != N_HISTORY) {
      fprintf (stderr, "bench-session: reuse failed (%u): %s\n", reused, err.message);
      return 1;
    }
    eval_range (ctx, tokens, N_HISTORY, N_HISTORY + N_TURN);
    reopen[r] = hn_time_now () - t0;
    hn_context_free (ctx);
  }
  struct stat st;
  stat (path, &st);
  double c = bench_median (cold, N_RUNS), o = bench_median (reopen, N_RUNS);
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
