/* rel-diff.h — how far two rows of floats (logits, outputs) are apart, for the engine's
 * tests: the largest absolute difference over the largest magnitude of the first row.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <math.h>
#include <stddef.h>

/* (Plain comparisons, not fmax: aarch64 gcc 12's vectoriser stops with an internal
 * compiler error on two fmax reductions in one loop when n is a constant.) */
static inline double
rel_diff(const float *a, const float *b, size_t n)
{
  double d = 0.0, s = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double diff = fabs((double) a[i] - b[i]), size = fabs((double) a[i]);
    d = diff > d ? diff : d;
    s = size > s ? size : s;
  }
  return d / s;
}
