/* The probability chart (hanashi-prob-chart.c): a record's candidates become bars, the
 * chosen one is marked, removed ones say which stage removed them, a click names the token,
 * and it draws (a screenshot for docs/user-guide.md when HANASHI_SCREENSHOT_DIR is set).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>
#include <glib/gi18n.h>
#include <math.h>

#include "hanashi-prob-chart.h"
#include "test-screenshot.h"

static HnTokenProbs
sample_record (void)
{
  HnTokenProbs r = { .token = 12, .logprob = logf (0.30f), .p = 0.42f, .n_candidates = 5 };
  const struct { int id; float raw, p; HnSamplerStage stage; } c[] = {
    { 10, 0.40f, 0.55f, HN_STAGE_NONE }, { 12, 0.30f, 0.42f, HN_STAGE_NONE }, { 14, 0.10f, 0.03f, HN_STAGE_NONE },
    { 16, 0.08f, 0.0f, HN_STAGE_MIN_P }, { 18, 0.05f, 0.0f, HN_STAGE_TOP_K },
  };
  for (guint i = 0; i < G_N_ELEMENTS (c); i++)
    r.candidates[i] = (HnProbCandidate){ c[i].id, logf (c[i].raw), c[i].p, (uint8_t) c[i].stage };
  return r;
}

static void
on_activated (HanashiProbChart *chart, int token, int *out)
{
  (void) chart;
  *out = token;
}

static void
test_chart (void)
{
  GtkWidget *window = gtk_window_new ();
  GtkWidget *chart = hanashi_prob_chart_new ();
  gtk_window_set_child (GTK_WINDOW (window), chart);
  gtk_window_set_default_size (GTK_WINDOW (window), 520, 140);
  HnTokenProbs rec = sample_record ();
  const char *texts[] = { " the", " a", " one", " this", "\n" };
  hanashi_prob_chart_set_record (HANASHI_PROB_CHART (chart), &rec, texts);
  gtk_window_present (GTK_WINDOW (window));

  HanashiProbChart *c = HANASHI_PROB_CHART (chart);
  g_assert_cmpuint (hanashi_prob_chart_get_n_bars (c), ==, 5);
  g_assert_cmpint (hanashi_prob_chart_get_chosen_index (c), ==, 1);
  g_assert_false (hanashi_prob_chart_bar_is_removed (c, 0));
  g_assert_true (hanashi_prob_chart_bar_is_removed (c, 3));
  g_assert_true (hanashi_prob_chart_bar_is_removed (c, 4));
  g_assert_nonnull (strstr (hanashi_prob_chart_get_bar_label (c, 0), " the"));
  g_assert_nonnull (strstr (hanashi_prob_chart_get_bar_label (c, 0), "40.0%"));
  g_assert_nonnull (strstr (hanashi_prob_chart_get_bar_label (c, 0), "55.0%"));
  g_assert_nonnull (strstr (hanashi_prob_chart_get_bar_label (c, 3), hanashi_prob_chart_stage_label (HN_STAGE_MIN_P)));
  g_assert_nonnull (strstr (hanashi_prob_chart_get_bar_label (c, 4), "top-k"));
  g_assert_nonnull (strstr (hanashi_prob_chart_get_bar_label (c, 4), "\\n")); /* control characters escaped */
  g_assert_cmpint (gtk_widget_get_height (chart) >= 0, ==, TRUE);

  /* every stage has a label of its own */
  for (int s = HN_STAGE_NONE + 1; s < HN_STAGE_COUNT; s++)
    g_assert_cmpstr (hanashi_prob_chart_stage_label ((HnSamplerStage) s), !=, "");

  /* the chosen token outside the candidates: nothing marked; no texts: the ids */
  rec.token = 99;
  hanashi_prob_chart_set_record (c, &rec, NULL);
  g_assert_cmpint (hanashi_prob_chart_get_chosen_index (c), ==, -1);
  g_assert_nonnull (strstr (hanashi_prob_chart_get_bar_label (c, 2), "#14"));

  int activated = -1;
  g_signal_connect (chart, "candidate-activated", G_CALLBACK (on_activated), &activated);
  g_signal_emit_by_name (chart, "candidate-activated", 14);
  g_assert_cmpint (activated, ==, 14);

  rec.token = 12;
  hanashi_prob_chart_set_record (c, &rec, texts);
  test_screenshot (window, "prob-chart");
  hanashi_prob_chart_set_record (c, NULL, NULL);
  g_assert_cmpuint (hanashi_prob_chart_get_n_bars (c), ==, 0);
  gtk_window_destroy (GTK_WINDOW (window));
}

int
main (int argc, char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  adw_init ();
  g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
  g_test_add_func ("/prob-chart/chart", test_chart);
  return g_test_run ();
}
