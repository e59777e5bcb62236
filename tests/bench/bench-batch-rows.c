/* What fixing each row's kernels costs (HnBatch.sampled, which every generation sets so
 * that sequences decoded together give what each gives alone): the same decode calls
 * with the kernels chosen by batch size (sampled = NULL) and with them fixed per row.
 * The rows whose kernels change are
 *  - short prompts (below the panel GEMM's 8 tokens: a resent conversation evaluates 1),
 *    which now take the panel GEMM instead of the one-row kernels;
 *  - steps of 8 or more sequences together, whose rows now take the one-row kernels
 *    instead of the panel GEMM.
 * Prints the median of 41 calls of each (the two kinds taking turns, so that load from
 * other programs falls on both alike), in milliseconds.
 *
 *   HANASHI_BENCH_MODEL=FILE.gguf   the model (default: the test data's Q8_0 LLaMA)
 *   HANASHI_BENCH_THREADS=N         threads (default 2)
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-support.h"
#include "hn-common.h"

enum { N_RUNS = 41, N_PAST = 64, MAX_SEQ = 16 };

/* n rows: one per sequence (a step) or n prompt tokens of sequence 0 after N_PAST; the
 * kernels chosen by batch size, then fixed (`fixed`), in turns.  Medians in ms. */
static void
time_rows (HnContext *ctx, int n, bool step, const bool *fixed, double *ms_auto, double *ms_fixed)
{
  int32_t tok[MAX_SEQ], pos[MAX_SEQ], seq[MAX_SEQ];
  bool want[MAX_SEQ];
  for (int i = 0; i < n; i++)
    {
      tok[i] = 10 + i;
      pos[i] = step ? N_PAST : N_PAST + i;
      seq[i] = step ? i : 0;
      want[i] = step || i == n - 1;
    }
  double t[2][N_RUNS];
  for (int r = 0; r < N_RUNS; r++)
    for (int kind = 0; kind < 2; kind++)
      {
        HnBatch b = { .n_tokens = n, .token = tok, .pos = pos, .seq_id = seq, .want_logits = want,
                      .sampled = kind ? fixed : NULL };
        double t0 = hn_time_now ();
        bench_decode_or_exit ("bench-batch-rows", ctx, &b);
        t[kind][r] = hn_time_now () - t0;
        for (int i = 0; i < n; i++)
          hn_kv_cache_seq_rm (hn_context_kv (ctx), seq[i], N_PAST, -1);
      }
  *ms_auto = bench_median (t[0], N_RUNS) * 1e3;
  *ms_fixed = bench_median (t[1], N_RUNS) * 1e3;
}

int
main (void)
{
  char buf[4096];
  const char *path = bench_model_path ("quant-llama-v512-q8_0.gguf", buf, sizeof buf);
  if (path == NULL)
    {
      fprintf (stderr, "bench-batch-rows: set HANASHI_TESTDATA or HANASHI_BENCH_MODEL\n");
      return 77;
    }
  HnModel *model = bench_load_model ("bench-batch-rows", path);
  if (!model)
    return 1;
  HnContextParams cp = hn_context_default_params ();
  cp.n_ctx = 256;
  cp.n_seq_max = MAX_SEQ;
  cp.n_kv_cells = 256 * MAX_SEQ;
  cp.n_threads = bench_threads ();
  HnError err = { 0 };
  HnContext *ctx = hn_context_new (model, &cp, &err);
  if (!ctx)
    {
      fprintf (stderr, "%s\n", err.message);
      return 1;
    }
  /* every sequence holds N_PAST tokens first, so that attention has something to do */
  for (int s = 0; s < MAX_SEQ; s++)
    {
      int32_t tok[N_PAST], pos[N_PAST], seq[N_PAST];
      for (int i = 0; i < N_PAST; i++)
        {
          tok[i] = (i * 7 + s) % 500;
          pos[i] = i;
          seq[i] = s;
        }
      HnBatch b = { .n_tokens = N_PAST, .token = tok, .pos = pos, .seq_id = seq };
      bench_decode_or_exit ("bench-batch-rows", ctx, &b);
    }
  static const bool all_prompt[MAX_SEQ] = { false }, all_sampled[MAX_SEQ] = {
    true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true,
  };
  printf ("fixed row kernels, %s, %d thread(s): median of %d calls, ms (by batch size / fixed per row)\n", path,
          cp.n_threads, N_RUNS);
  static const int prompts[] = { 1, 2, 4, 7 };
  for (size_t i = 0; i < sizeof prompts / sizeof *prompts; i++)
    {
      double a, f;
      time_rows (ctx, prompts[i], false, all_prompt, &a, &f);
      printf ("  prompt of %d token%s: %.3f / %.3f\n", prompts[i], prompts[i] == 1 ? "" : "s", a, f);
    }
  static const int steps[] = { 1, 4, 8, 16 };
  for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
    {
      double a, f;
      time_rows (ctx, steps[i], true, all_sampled, &a, &f);
      printf ("  step of %d sequence%s: %.3f / %.3f\n", steps[i], steps[i] == 1 ? "" : "s", a, f);
    }
  hn_context_free (ctx);
  hn_model_free (model);
  return 0;
}
