/* hanashi-prob-chart.h — one token's candidates as a bar chart, drawn with GtkSnapshot.
 *
 * Each row is a candidate of the model's raw distribution (HnTokenProbs, hn-sampler.h),
 * most likely first: a pale bar for its raw probability, a strong bar for its probability
 * after the sampler chain, the token's text and both percentages.  A candidate a stage
 * removed is greyed and says which stage; the chosen token is marked.  Clicking a row
 * emits "candidate-activated" with its token id (the chat branches there).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

#include "hanashi-engine.h" /* HnTokenProbs and the sampler stages (engine/glib is the door) */

G_BEGIN_DECLS

#define HANASHI_TYPE_PROB_CHART (hanashi_prob_chart_get_type ())
G_DECLARE_FINAL_TYPE (HanashiProbChart, hanashi_prob_chart, HANASHI, PROB_CHART, GtkWidget)

GtkWidget *hanashi_prob_chart_new (void);

/* Shows @record (copied); @texts: the candidates' texts in order (NULL entries or NULL: the
 * token id is shown).  NULL @record empties the chart. */
void hanashi_prob_chart_set_record (HanashiProbChart *self, const HnTokenProbs *record,
                                    const char *const *texts);

/* What the chart shows, for tests and accessibility. */
guint        hanashi_prob_chart_get_n_bars        (HanashiProbChart *self);
/* The row's whole text: "TEXT  42.0% → 61.0%" or "TEXT  3.0%  removed by top-k". */
const char  *hanashi_prob_chart_get_bar_label     (HanashiProbChart *self, guint index);
gboolean     hanashi_prob_chart_bar_is_removed    (HanashiProbChart *self, guint index);
/* The index of the chosen token's row, or -1 when it is not among the candidates. */
int          hanashi_prob_chart_get_chosen_index  (HanashiProbChart *self);

/* The stage's name for people ("top-k", "grammar", …), translated. */
const char  *hanashi_prob_chart_stage_label       (HnSamplerStage stage);

G_END_DECLS
