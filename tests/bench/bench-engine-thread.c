/* bench-engine-thread — time to first token through HanashiEngine for one long conversation:
 * cold (nothing cached), with the in-memory KV cache of the same conversation (regenerate),
 * and from its session file (after another conversation took the KV cache).  Medians of
 * repetitions.  A benchmark, not a test: it prints numbers and fails only on errors.
 *
 * HANASHI_BENCH_MODEL=FILE picks another model (default: testdata tiny-llama-spm-q8_0);
 * HANASHI_BENCH_TURNS=N the conversation length in turns (default 12);
 * HANASHI_BENCH_REPS=N the repetitions (default 7, at most 15).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hanashi-engine.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_REPS 15

typedef struct {
  gboolean finished;
  gboolean failed;
  HanashiGenerationStats stats;
} Run;

static void
on_done (HanashiEngine *engine, guint id, HanashiGenerationStats *stats, Run *run)
{
  (void) engine; (void) id;
  run->stats = *stats;
  run->finished = TRUE;
}

static void
on_error (HanashiEngine *engine, guint id, GError *error, Run *run)
{
  (void) engine; (void) id;
  fprintf (stderr, "bench-engine-thread: %s\n", error->message);
  run->failed = run->finished = TRUE;
}

static void
load_done (GObject *source, GAsyncResult *result, gpointer data)
{
  GError *error = NULL;
  if (!hanashi_engine_load_model_finish (HANASHI_ENGINE (source), result, &error))
    {
      fprintf (stderr, "bench-engine-thread: %s\n", error->message);
      exit (1);
    }
  *(gboolean *) data = TRUE;
}

static HanashiGenerateRequest *
conversation (const char *id, int turns, gboolean use_session)
{
  static const char *const lines[] = {
    "Tell me about the little red hen who found some wheat in the farmyard one day.",
    "She asked the cat, the dog and the duck to help her plant it, but none of them would.",
    "What did she do with the wheat after it grew tall and golden in the summer sun?",
    "She cut it, took it to the mill, and baked a fine loaf of bread all by herself.",
  };
  HanashiGenerateRequest *req = hanashi_generate_request_new (id);
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  sp.temperature = 0;
  hanashi_generate_request_set_sampling (req, &sp);
  hanashi_generate_request_set_system_prompt (req, "You are a patient storyteller.");
  for (int i = 0; i < turns; i++)
    hanashi_generate_request_add_message (req, i % 2 ? HANASHI_ROLE_ASSISTANT : HANASHI_ROLE_USER,
                                          lines[i % G_N_ELEMENTS (lines)]);
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, "And then?");
  hanashi_generate_request_set_max_tokens (req, 4);
  hanashi_generate_request_set_use_session (req, use_session);
  return req;
}

static HanashiGenerationStats
run_one (HanashiEngine *engine, HanashiGenerateRequest *req)
{
  Run run = { 0 };
  gulong a = g_signal_connect (engine, "generation-done", G_CALLBACK (on_done), &run);
  gulong b = g_signal_connect (engine, "error", G_CALLBACK (on_error), &run);
  hanashi_engine_generate (engine, req);
  while (!run.finished)
    g_main_context_iteration (NULL, TRUE);
  g_signal_handler_disconnect (engine, a);
  g_signal_handler_disconnect (engine, b);
  if (run.failed)
    exit (1);
  return run.stats;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static double
median (double *v, int n)
{
  qsort (v, (size_t) n, sizeof *v, cmp_double);
  return v[n / 2];
}

int
main (void)
{
  const char *model = g_getenv ("HANASHI_BENCH_MODEL");
  g_autofree char *default_model = NULL;
  if (model == NULL)
    {
      const char *dir = g_getenv ("HANASHI_TESTDATA");
      if (dir == NULL)
        {
          fprintf (stderr, "bench-engine-thread: set HANASHI_TESTDATA or HANASHI_BENCH_MODEL\n");
          return 1;
        }
      model = default_model = g_build_filename (dir, "models", "tiny-llama-spm-q8_0.gguf", NULL);
    }
  int turns = g_getenv ("HANASHI_BENCH_TURNS") ? atoi (g_getenv ("HANASHI_BENCH_TURNS")) : 12;
  int reps = g_getenv ("HANASHI_BENCH_REPS") ? atoi (g_getenv ("HANASHI_BENCH_REPS")) : 7;
  reps = CLAMP (reps, 1, MAX_REPS);
  g_autofree char *session_dir = g_dir_make_tmp ("hanashi-bench-XXXXXX", NULL);

  HanashiEngine *engine = hanashi_engine_new ();
  hanashi_engine_set_session_dir (engine, session_dir);
  gboolean loaded = FALSE;
  hanashi_engine_load_model_async (engine, model, 0, 0, NULL, load_done, &loaded);
  while (!loaded)
    g_main_context_iteration (NULL, TRUE);

  double cold[MAX_REPS], warm[MAX_REPS], file[MAX_REPS];
  guint n_prompt = 0, n_reused_warm = 0, n_reused_file = 0;
  guint64 file_size = 0;
  for (int r = 0; r < reps; r++)
    {
      /* cold: a conversation never seen, no session file */
      g_autofree char *id = g_strdup_printf ("cold-%d", r);
      g_autoptr (HanashiGenerateRequest) c = conversation (id, turns, FALSE);
      HanashiGenerationStats s = run_one (engine, c);
      cold[r] = s.time_to_first_token;
      n_prompt = s.n_prompt;

      /* warm: the same conversation again, from the in-memory KV cache */
      s = run_one (engine, c);
      warm[r] = s.time_to_first_token;
      n_reused_warm = s.n_reused;

      /* from the session file: written after a reply, read back once another
       * conversation has taken the KV cache */
      g_autofree char *sid = g_strdup_printf ("file-%d", r);
      g_autoptr (HanashiGenerateRequest) f = conversation (sid, turns, TRUE);
      run_one (engine, f);
      g_autoptr (HanashiGenerateRequest) other = conversation ("other", 1, FALSE);
      run_one (engine, other);
      s = run_one (engine, f);
      file[r] = s.time_to_first_token;
      n_reused_file = s.n_reused;
      g_autofree char *name = g_strconcat (sid, ".hnsession", NULL);
      g_autofree char *path = g_build_filename (session_dir, name, NULL);
      GStatBuf st;
      if (g_stat (path, &st) == 0)
        file_size = (guint64) st.st_size;
    }
  g_autofree char *base = g_path_get_basename (model);
  printf ("model %s, prompt %u tokens, median of %d\n", base, n_prompt, reps);
  printf ("cold           %8.2f ms to first token\n", 1000 * median (cold, reps));
  printf ("in-memory KV   %8.2f ms to first token (%u tokens reused)\n", 1000 * median (warm, reps), n_reused_warm);
  printf ("session file   %8.2f ms to first token (%u tokens reused, file %" G_GUINT64_FORMAT " bytes)\n",
          1000 * median (file, reps), n_reused_file, file_size);
  g_object_unref (engine);
  g_autoptr (GDir) dir = g_dir_open (session_dir, 0, NULL);
  const char *n;
  while (dir != NULL && (n = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *p = g_build_filename (session_dir, n, NULL);
      g_unlink (p);
    }
  g_rmdir (session_dir);
  return 0;
}
