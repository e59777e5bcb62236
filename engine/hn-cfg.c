/* hn-cfg.c — classifier-free guidance arithmetic.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-cfg.h"

#include <math.h>

/* log of the normaliser of a row: max + log Σ exp(x - max) */
static double
log_sum_exp(const float *row, int32_t n)
{
  float mx = -INFINITY;
  for (int32_t i = 0; i < n; i++)
    if (row[i] > mx)
      mx = row[i];
  if (!(mx > -INFINITY))
    return mx;
  double sum = 0.0;
  for (int32_t i = 0; i < n; i++)
    sum += exp((double) row[i] - (double) mx);
  return (double) mx + log(sum);
}

void
hn_log_softmax(float *row, int32_t n)
{
  double z = log_sum_exp(row, n);
  for (int32_t i = 0; i < n; i++)
    row[i] = (float) ((double) row[i] - z);
}

void
hn_cfg_combine(const float *pos, const float *neg, float scale, float *out, int32_t n)
{
  double zp = log_sum_exp(pos, n);
  double zn = log_sum_exp(neg, n);
  double sc = scale;
  for (int32_t i = 0; i < n; i++) {
    double lp = (double) pos[i] - zp;
    double ln = (double) neg[i] - zn;
    double g;
    if (isinf(lp) || isinf(ln))
      g = (sc == 1.0) ? lp : (sc == 0.0) ? ln : -INFINITY;
    else
      g = ln + sc * (lp - ln);
    out[i] = (float) g;
  }
}
