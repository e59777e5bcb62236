/* hn-threadpool.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void) 0)
#endif

/* How long a thread polls before it sleeps on the condition variable.  Decode runs a
 * few hundred parallel sections per token with microseconds between them; a futex
 * wake-up costs tens of microseconds on a busy machine, so the pool polls for roughly
 * a tenth of a millisecond (pause takes 10-150 cycles depending on the core). */
#define SPIN_ROUNDS 4096

struct HnThreadPool {
  int n_threads;
  pthread_t *threads;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_cond_t done_cond;
  HnParallelFn fn;
  void *ctx;
  atomic_uint generation;
  atomic_int pending;
  atomic_bool stop;
};

typedef struct { HnThreadPool *pool; int ith; } WorkerArg;
static WorkerArg *worker_args_of (HnThreadPool *pool) { return (WorkerArg *) (pool->threads + pool->n_threads); }

static void *
worker_main (void *arg)
{
  WorkerArg *wa = arg;
  HnThreadPool *pool = wa->pool;
  unsigned seen = 0;
  for (;;) {
    /* Spin briefly: decode steps follow each other closely, and a condvar wake costs more. */
    unsigned gen = atomic_load (&pool->generation);
    for (int spin = 0; gen == seen && spin < SPIN_ROUNDS; spin++) {
      cpu_relax ();
      gen = atomic_load_explicit (&pool->generation, memory_order_acquire);
    }
    if (gen == seen) {
      pthread_mutex_lock (&pool->lock);
      while ((gen = atomic_load (&pool->generation)) == seen && !pool->stop)
        pthread_cond_wait (&pool->wake, &pool->lock);
      pthread_mutex_unlock (&pool->lock);
    }
    if (pool->stop)
      return NULL;
    seen = gen;
    pool->fn (pool->ctx, wa->ith, pool->n_threads);
    if (atomic_fetch_sub (&pool->pending, 1) == 1) {
      pthread_mutex_lock (&pool->lock);
      pthread_cond_signal (&pool->done_cond);
      pthread_mutex_unlock (&pool->lock);
    }
  }
}

int
hn_physical_cores (void)
{
  /* Count distinct (package, core) pairs: hyperthread siblings share a core. */
  int pairs[1024][2];
  int n_pairs = 0;
  for (int cpu = 0; cpu < 1024; cpu++) {
    char path[128];
    int ids[2];
    const char *names[2] = { "physical_package_id", "core_id" };
    bool ok = true;
    for (int k = 0; k < 2 && ok; k++) {
      snprintf (path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, names[k]);
      FILE *f = fopen (path, "r");
      if (!f) { ok = false; break; }
      if (fscanf (f, "%d", &ids[k]) != 1) ok = false;
      fclose (f);
    }
    if (!ok)
      break;
    bool seen = false;
    for (int i = 0; i < n_pairs && !seen; i++)
      seen = pairs[i][0] == ids[0] && pairs[i][1] == ids[1];
    if (!seen) { pairs[n_pairs][0] = ids[0]; pairs[n_pairs][1] = ids[1]; n_pairs++; }
  }
  if (n_pairs > 0)
    return n_pairs;
  long n = sysconf (_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int) n : 1;
}

HnThreadPool *
hn_threadpool_new (int n_threads, HnError *err)
{
  if (n_threads <= 0)
    n_threads = hn_physical_cores ();
  if (n_threads > 512) {
    hn_error_set (err, HN_ERR_INVALID_ARG, "too many threads: %d", n_threads);
    return NULL;
  }
  HnThreadPool *pool = calloc (1, sizeof *pool);
  if (!pool) { hn_error_set (err, HN_ERR_NOMEM, "out of memory"); return NULL; }
  pool->n_threads = n_threads;
  pool->threads = calloc ((size_t) n_threads, sizeof (pthread_t) + sizeof (WorkerArg));
  if (!pool->threads) { free (pool); hn_error_set (err, HN_ERR_NOMEM, "out of memory"); return NULL; }
  pthread_mutex_init (&pool->lock, NULL);
  pthread_cond_init (&pool->wake, NULL);
  pthread_cond_init (&pool->done_cond, NULL);
  WorkerArg *args = worker_args_of (pool);
  for (int i = 1; i < n_threads; i++) {
    args[i].pool = pool;
    args[i].ith = i;
    if (pthread_create (&pool->threads[i], NULL, worker_main, &args[i]) != 0) {
      pool->n_threads = i;
      hn_threadpool_free (pool);
      hn_error_set (err, HN_ERR_IO, "cannot start worker thread %d", i);
      return NULL;
    }
  }
  return pool;
}

int hn_threadpool_n_threads (const HnThreadPool *pool) { return pool->n_threads; }

void
hn_threadpool_run (HnThreadPool *pool, HnParallelFn fn, void *ctx)
{
  if (pool->n_threads == 1) { fn (ctx, 0, 1); return; }
  pool->fn = fn;
  pool->ctx = ctx;
  atomic_store (&pool->pending, pool->n_threads - 1);
  pthread_mutex_lock (&pool->lock);
  atomic_fetch_add (&pool->generation, 1);
  pthread_cond_broadcast (&pool->wake);
  pthread_mutex_unlock (&pool->lock);
  fn (ctx, 0, pool->n_threads);
  for (int spin = 0; atomic_load_explicit (&pool->pending, memory_order_acquire) > 0 && spin < SPIN_ROUNDS; spin++)
    cpu_relax ();
  pthread_mutex_lock (&pool->lock);
  while (atomic_load (&pool->pending) > 0)
    pthread_cond_wait (&pool->done_cond, &pool->lock);
  pthread_mutex_unlock (&pool->lock);
}

void
hn_threadpool_free (HnThreadPool *pool)
{
  if (!pool)
    return;
  pthread_mutex_lock (&pool->lock);
  pool->stop = true;
  atomic_fetch_add (&pool->generation, 1);
  pthread_cond_broadcast (&pool->wake);
  pthread_mutex_unlock (&pool->lock);
  for (int i = 1; i < pool->n_threads; i++)
    pthread_join (pool->threads[i], NULL);
  pthread_cond_destroy (&pool->wake);
  pthread_cond_destroy (&pool->done_cond);
  pthread_mutex_destroy (&pool->lock);
  free (pool->threads);
  free (pool);
}
