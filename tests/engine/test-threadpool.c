/* test-threadpool.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <stdatomic.h>
#include "hn-threadpool.h"

typedef struct { atomic_int calls; atomic_int seen_mask; int nth_seen; long sum[64]; } RunCtx;

static void
count_fn (void *p, int ith, int nth)
{
  RunCtx *c = p;
  atomic_fetch_add (&c->calls, 1);
  atomic_fetch_or (&c->seen_mask, 1 << ith);
  c->nth_seen = nth;
  long s = 0;
  for (int i = ith; i < 10000; i += nth)
    s += i;
  c->sum[ith] = s;
}

static void
test_runs_every_thread (void)
{
  HnError err = {0};
  for (int n = 1; n <= 4; n++) {
    HnThreadPool *pool = hn_threadpool_new (n, &err);
    g_assert_nonnull (pool);
    g_assert_cmpint (hn_threadpool_n_threads (pool), ==, n);
    for (int rep = 0; rep < 500; rep++) {
      RunCtx c = {0};
      hn_threadpool_run (pool, count_fn, &c);
      g_assert_cmpint (atomic_load (&c.calls), ==, n);
      g_assert_cmpint (atomic_load (&c.seen_mask), ==, (1 << n) - 1);
      g_assert_cmpint (c.nth_seen, ==, n);
      long total = 0;
      for (int i = 0; i < n; i++)
        total += c.sum[i];
      g_assert_cmpint (total, ==, 10000L * 9999 / 2);
    }
    hn_threadpool_free (pool);
  }
}

static void
test_defaults_and_limits (void)
{
  HnError err = {0};
  g_assert_cmpint (hn_physical_cores (), >=, 1);
  HnThreadPool *pool = hn_threadpool_new (0, &err);
  g_assert_nonnull (pool);
  g_assert_cmpint (hn_threadpool_n_threads (pool), ==, hn_physical_cores ());
  hn_threadpool_free (pool);
  g_assert_null (hn_threadpool_new (100000, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_INVALID_ARG);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/threadpool/runs-every-thread", test_runs_every_thread);
  g_test_add_func ("/threadpool/defaults-and-limits", test_defaults_and_limits);
  return g_test_run ();
}
