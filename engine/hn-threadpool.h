/* Persistent worker threads running one parallel-for at a time.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stdbool.h>
#include "hn-common.h"

typedef struct HnThreadPool HnThreadPool;

/* fn is called once per thread index ith in [0, nth); the caller's thread is index 0. */
typedef void (*HnParallelFn) (void *ctx, int ith, int nth);

/* n_threads <= 0 means the number of physical cores. */
HnThreadPool *hn_threadpool_new (int n_threads, HnError *err);
void hn_threadpool_free (HnThreadPool *pool);
int hn_threadpool_n_threads (const HnThreadPool *pool);
/* Runs fn on every thread and returns when all have finished.  No allocation. */
void hn_threadpool_run (HnThreadPool *pool, HnParallelFn fn, void *ctx);
/* Physical cores from /sys topology, falling back to sysconf. */
int hn_physical_cores (void);
