/* Sliding-window attention with a ring of KV rows (gemma3: five sliding layers to one global;
 * phi3: every layer sliding), on the random-weight models of testdata/arch:
 *  - a long generation crosses the window many times in a ring of window + batch rows and
 *    gives, at every step, exactly the logits of a context whose ring never reuses a row
 *    (a pure mask), and logits close to one batch over the whole sequence;
 *  - evaluation cannot go back before a window past reused rows; from there on it can;
 *  - a session saved after rows were reused restores a prefix that reaches far enough, bit
 *    for bit, and refuses one that does not.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "hn-context.h"
#include "hn-kv-cache.h"
#include "hn-model.h"
#include "hn-prompt-cache.h"

enum { N_CTX = 256, N_LONG = 200, SMALL_BATCH = 4 };

static char *tmpdir;

static HnModel *
load_arch_model (const char *name)
{
  const char *testdata = g_getenv ("HANASHI_TESTDATA");
  g_autofree char *path = g_build_filename (testdata ? testdata : ".", "arch", "models", name, NULL);
  HnError err = { 0 };
  HnModel *m = hn_model_load (path, NULL, &err);
  if (m == NULL)
    g_error ("%s: %s", path, err.message);
  return m;
}

static HnContext *
new_context (const HnModel *m, int n_batch)
{
  HnContextParams p = hn_context_default_params ();
  p.n_ctx = N_CTX;
  p.n_batch = n_batch;
  p.n_threads = 2;
  HnError err = { 0 };
  HnContext *ctx = hn_context_new (m, &p, &err);
  if (ctx == NULL)
    g_error ("context: %s", err.message);
  return ctx;
}

static void
make_tokens (int32_t *tok, int n, int n_vocab)
{
  for (int i = 0; i < n; i++)
    tok[i] = (int32_t) ((i * 7919 + 13) % n_vocab);
}

/* Evaluates tok[i] at position i alone and returns a copy of its logits. */
static float *
step (HnContext *ctx, const int32_t *tok, int i, int n_vocab)
{
  int32_t pos = i;
  HnBatch b = { .n_tokens = 1, .token = &tok[i], .pos = &pos };
  HnError err = { 0 };
  if (!hn_context_decode (ctx, &b, &err))
    g_error ("decode at %d: %s", i, err.message);
  return g_memdup2 (hn_context_get_logits (ctx, 0), (gsize) n_vocab * sizeof (float));
}

/* KL(softmax(p) ‖ softmax(q)) */
static double
kl_divergence (const float *p, const float *q, int n)
{
  double mp = -INFINITY, mq = -INFINITY, sp = 0.0, sq = 0.0, kl = 0.0;
  for (int i = 0; i < n; i++) {
    mp = fmax (mp, p[i]);
    mq = fmax (mq, q[i]);
  }
  for (int i = 0; i < n; i++) {
    sp += exp (p[i] - mp);
    sq += exp (q[i] - mq);
  }
  double lp = mp + log (sp), lq = mq + log (sq);
  for (int i = 0; i < n; i++) {
    double a = p[i] - lp, b = q[i] - lq;
    kl += exp (a) * (a - b);
  }
  return kl;
}

static void
test_long_generation (gconstpointer data)
{
  HnModel *m = load_arch_model (data);
  int nv = hn_model_n_vocab (m);
  HnContext *ring = new_context (m, SMALL_BATCH), *mask = new_context (m, N_CTX), *batch = new_context (m, N_CTX);
  HnKvCache *kv = hn_context_kv (ring);
  int window = hn_kv_cache_window (kv);
  g_assert_cmpint (window, >, 0);
  /* the ring holds one window and one batch, no more, however long the generation */
  g_assert_cmpint (hn_kv_cache_n_ring (kv), ==, window + SMALL_BATCH);
  g_assert_cmpint (hn_kv_cache_n_ring (hn_context_kv (mask)), ==, N_CTX);
  g_assert_cmpint (N_LONG, >, 5 * hn_kv_cache_n_ring (kv));
  HnContextParams small = hn_context_default_params (), large = small;
  small.n_ctx = large.n_ctx = N_CTX;
  small.n_batch = SMALL_BATCH;
  large.n_batch = N_CTX;
  HnMemoryNeed need_small, need_large;
  hn_context_memory_need (m, &small, &need_small);
  hn_context_memory_need (m, &large, &need_large);
  g_assert_cmpuint (need_small.kv_cache, <, need_large.kv_cache);

  int32_t tok[N_LONG + 4], pos[N_LONG];
  make_tokens (tok, N_LONG + 4, nv);
  for (int i = 0; i < N_LONG; i++)
    pos[i] = i;
  bool want[N_LONG];
  for (int i = 0; i < N_LONG; i++)
    want[i] = true;
  HnBatch all = { .n_tokens = N_LONG, .token = tok, .pos = pos, .want_logits = want };
  HnError err = { 0 };
  g_assert_true (hn_context_decode (batch, &all, &err));

  double max_diff = 0.0;
  for (int i = 0; i < N_LONG; i++) {
    g_autofree float *a = step (ring, tok, i, nv);
    g_autofree float *b = step (mask, tok, i, nv);
    /* same cells in the same order, only stored in other rows: the very same sums */
    g_assert_cmpmem (a, (gsize) nv * sizeof (float), b, (gsize) nv * sizeof (float));
    const float *full = hn_context_get_logits (batch, i);
    double kl = kl_divergence (full, a, nv);
    max_diff = fmax (max_diff, kl);
  }
  g_test_message ("%s: window %d, ring %d rows, %d steps, max KL to one batch %.3g",
                  (const char *) data, window, hn_kv_cache_n_ring (kv), N_LONG, max_diff);
  /* the parity suite's bound for F16 weights: rounding, not a different mask */
  g_assert_cmpfloat (max_diff, <, 1e-4);
  /* rows were handed on: the cells before the last window no longer have sliding rows */
  int32_t resume = hn_kv_cache_seq_resume_min (kv, 0);
  g_assert_cmpint (resume, >, N_LONG - window - SMALL_BATCH - 1);
  g_assert_cmpint (resume, <=, N_LONG);
  g_assert_cmpint (hn_kv_cache_n_used (kv), ==, N_LONG);

  /* going back before `resume` is refused and changes nothing ... */
  hn_kv_cache_seq_rm (kv, 0, resume - 1, -1);
  hn_kv_cache_seq_rm (hn_context_kv (mask), 0, resume - 1, -1);
  int32_t p = resume - 1;
  HnBatch back = { .n_tokens = 1, .token = &tok[p], .pos = &p };
  g_assert_false (hn_context_decode (ring, &back, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_INVALID_ARG);
  g_assert_cmpint (hn_kv_cache_n_used (kv), ==, resume - 1);
  /* ... while from `resume` on, after removing what followed, evaluation is exact again */
  hn_kv_cache_seq_rm (kv, 0, resume, -1);
  hn_kv_cache_seq_rm (hn_context_kv (mask), 0, resume, -1);
  for (int i = resume; i < resume + 4; i++) {
    g_autofree float *a = step (ring, tok, i, nv);
    g_autofree float *b = step (mask, tok, i, nv);
    g_assert_cmpmem (a, (gsize) nv * sizeof (float), b, (gsize) nv * sizeof (float));
  }
  hn_context_free (ring);
  hn_context_free (mask);
  hn_context_free (batch);
  hn_model_free (m);
}

static void
test_resume_exact (gconstpointer data)
{
  HnModel *m = load_arch_model (data);
  int nv = hn_model_n_vocab (m);
  HnContext *ring = new_context (m, SMALL_BATCH), *mask = new_context (m, N_CTX);
  HnKvCache *kv = hn_context_kv (ring);
  int32_t tok[N_LONG];
  make_tokens (tok, N_LONG, nv);
  for (int i = 0; i < 120; i++) {
    g_free (step (ring, tok, i, nv));
    g_free (step (mask, tok, i, nv));
  }
  /* an edit after the resume point: drop the tail in both and evaluate other tokens */
  int32_t resume = hn_kv_cache_seq_resume_min (kv, 0);
  g_assert_cmpint (resume, >, 0);
  g_assert_cmpint (resume, <, 120);
  hn_kv_cache_seq_rm (kv, 0, resume, -1);
  hn_kv_cache_seq_rm (hn_context_kv (mask), 0, resume, -1);
  for (int i = resume; i < resume + 30; i++)
    tok[i] = (int32_t) ((tok[i] + 101) % nv);
  for (int i = resume; i < resume + 30; i++) {
    g_autofree float *a = step (ring, tok, i, nv);
    g_autofree float *b = step (mask, tok, i, nv);
    g_assert_cmpmem (a, (gsize) nv * sizeof (float), b, (gsize) nv * sizeof (float));
  }
  hn_context_free (ring);
  hn_context_free (mask);
  hn_model_free (m);
}

static void
test_session (gconstpointer data)
{
  HnModel *m = load_arch_model (data);
  int nv = hn_model_n_vocab (m);
  HnContext *a = new_context (m, SMALL_BATCH);
  int32_t tok[N_LONG];
  make_tokens (tok, N_LONG, nv);
  int n_saved = 150;
  for (int i = 0; i < n_saved - 1; i++)
    g_free (step (a, tok, i, nv));
  g_autofree float *last = step (a, tok, n_saved - 1, nv);
  g_assert_cmpint (hn_kv_cache_seq_resume_min (hn_context_kv (a), 0), >, 0);
  g_autofree char *path = g_build_filename (tmpdir, "window.hnsession", NULL);
  HnError err = { 0 };
  g_assert_true (hn_prompt_cache_save (a, path, tok, (uint32_t) n_saved, &err));

  /* the whole conversation plus new tokens: everything is restored, and going on from it
   * gives the logits of the context that never stopped */
  HnContext *b = new_context (m, SMALL_BATCH);
  uint32_t n_reused = 0;
  g_assert_true (hn_prompt_cache_load (b, path, tok, N_LONG, &n_reused, &err));
  g_assert_cmpuint (n_reused, ==, (uint32_t) n_saved);
  for (int i = n_saved; i < N_LONG; i++) {
    g_autofree float *x = step (a, tok, i, nv);
    g_autofree float *y = step (b, tok, i, nv);
    g_assert_cmpmem (x, (gsize) nv * sizeof (float), y, (gsize) nv * sizeof (float));
  }
  /* the last prompt token again (what generation does): allowed and exact */
  hn_kv_cache_clear (hn_context_kv (b));
  g_assert_true (hn_prompt_cache_load (b, path, tok, (uint32_t) n_saved, &n_reused, &err));
  hn_kv_cache_seq_rm (hn_context_kv (b), 0, n_saved - 1, -1);
  g_autofree float *again = step (b, tok, n_saved - 1, nv);
  g_assert_cmpmem (again, (gsize) nv * sizeof (float), last, (gsize) nv * sizeof (float));

  /* a prompt that leaves the conversation early: the rows it would need are not in the
   * file, so nothing is restored and the context stays empty */
  int32_t edited[N_LONG];
  memcpy (edited, tok, sizeof edited);
  edited[40] = (edited[40] + 1) % nv;
  g_assert_false (hn_prompt_cache_load (b, path, edited, N_LONG, &n_reused, &err));
  g_assert_cmpuint (n_reused, ==, 0);
  g_assert_cmpint (hn_kv_cache_n_used (hn_context_kv (b)), ==, 0);
  g_unlink (path);
  hn_context_free (a);
  hn_context_free (b);
  hn_model_free (m);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  const char *testdata = g_getenv ("HANASHI_TESTDATA");
  g_autofree char *probe = testdata ? g_build_filename (testdata, "arch", "models", NULL) : NULL;
  if (probe == NULL || !g_file_test (probe, G_FILE_TEST_IS_DIR)) {
    g_test_skip ("no test data");
    return g_test_run ();
  }
  tmpdir = g_dir_make_tmp ("hanashi-swa-XXXXXX", NULL);
  /* F16 weights: one batch and single steps then differ by rounding only (quantized weights
   * multiply 8-bit activations grouped differently in the two paths) */
  static const char *models[] = { "arch-gemma3-v512-f16.gguf", "arch-phi3-v512-f16.gguf",
                                  "arch-gemma2-v512-f16.gguf" };
  for (gsize i = 0; i < G_N_ELEMENTS (models); i++) {
    g_autofree char *a = g_strdup_printf ("/sliding-window/long-generation/%s", models[i]);
    g_autofree char *b = g_strdup_printf ("/sliding-window/resume/%s", models[i]);
    g_autofree char *c = g_strdup_printf ("/sliding-window/session/%s", models[i]);
    g_test_add_data_func (a, models[i], test_long_generation);
    g_test_add_data_func (b, models[i], test_resume_exact);
    g_test_add_data_func (c, models[i], test_session);
  }
  int rc = g_test_run ();
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return rc;
}
