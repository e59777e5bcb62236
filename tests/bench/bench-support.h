/* What the model benchmarks share: which model and how many threads they run with
 * (HANASHI_BENCH_MODEL, HANASHI_BENCH_THREADS), loading it, and medians of timings.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stddef.h>

#include "hn-context.h"
#include "hn-model.h"

/* The model file: HANASHI_BENCH_MODEL when set and not empty, else `default_model` (a file
 * name in the test data's models/ folder) written into `buf`.  NULL when neither
 * HANASHI_BENCH_MODEL nor HANASHI_TESTDATA is set: there is nothing to run on, and what
 * that means (skip, or leave one part out) is the benchmark's to say. */
const char *bench_model_path (const char *default_model, char *buf, size_t size);

/* HANASHI_BENCH_THREADS, or 2 (the shared build machine's cores) when it is not set. */
int bench_threads (void);

/* The model at `path`, or NULL after printing "<bench>: <path>: <why>" on stderr. */
HnModel *bench_load_model (const char *bench, const char *path);

/* Decodes `batch`; a failure prints "<bench>: <why>" and ends the process with status 1,
 * since a timing of a failed call would mean nothing. */
void bench_decode_or_exit (const char *bench, HnContext *ctx, const HnBatch *batch);

/* The median of `n` timings; sorts `v`. */
double bench_median (double *v, size_t n);
