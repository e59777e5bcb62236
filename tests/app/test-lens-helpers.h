/* What the lens tests wait for: a chart with bars, and the scripted backend's next-token
 * runs reaching a count (set runs_awaited, then wait_until (runs_reached, NULL)).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hanashi-prob-chart.h"
#include "hanashi-test-seams.h"

static inline gboolean
chart_filled (gpointer chart)
{
  return hanashi_prob_chart_get_n_bars (chart) > 0;
}

static guint runs_awaited;

static inline gboolean
runs_reached (gpointer data)
{
  (void) data;
  return hanashi_test_scripted_next_logits_runs () >= runs_awaited;
}
