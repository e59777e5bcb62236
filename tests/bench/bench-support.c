/* SPDX-License-Identifier: GPL-3.0-or-later */
#include "bench-support.h"

#include <stdio.h>
#include <stdlib.h>

const char *
bench_model_path (const char *default_model, char *buf, size_t size)
{
  const char *file = getenv ("HANASHI_BENCH_MODEL");
  if (file != NULL && *file != '\0')
    return file;
  const char *data = getenv ("HANASHI_TESTDATA");
  if (data == NULL)
    return NULL;
  snprintf (buf, size, "%s/models/%s", data, default_model);
  return buf;
}

int
bench_threads (void)
{
  const char *threads = getenv ("HANASHI_BENCH_THREADS");
  return threads != NULL ? atoi (threads) : 2;
}

HnModel *
bench_load_model (const char *bench, const char *path)
{
  HnError err = { 0 };
  HnModel *model = hn_model_load (path, NULL, &err);
  if (model == NULL)
    fprintf (stderr, "%s: %s: %s\n", bench, path, err.message);
  return model;
}

void
bench_decode_or_exit (const char *bench, HnContext *ctx, const HnBatch *batch)
{
  HnError err = { 0 };
  if (!hn_context_decode (ctx, batch, &err))
    {
      fprintf (stderr, "%s: %s\n", bench, err.message);
      exit (1);
    }
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

double
bench_median (double *v, size_t n)
{
  qsort (v, n, sizeof *v, cmp_double);
  return v[n / 2];
}
