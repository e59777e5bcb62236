/* hanashi-prob-chart.c — see the header.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-prob-chart"

#include "config.h"

#include <glib/gi18n.h>
#include <math.h>

#include "hanashi-prob-chart.h"

#define ROW_HEIGHT 26
#define LABEL_WIDTH 90   /* the token's text */
#define INFO_WIDTH 190   /* the percentages or the stage, right of the bars */

struct _HanashiProbChart {
  GtkWidget parent_instance;
  HnTokenProbs record;
  gboolean has_record;
  GPtrArray *labels;     /* char*: the row texts */
  GPtrArray *texts;      /* char*: the candidates' own texts */
  GPtrArray *shown;      /* char*: those texts as drawn (escaped, or #id) */
  GPtrArray *infos;      /* char*: the numbers or the stage */
};

G_DEFINE_FINAL_TYPE (HanashiProbChart, hanashi_prob_chart, GTK_TYPE_WIDGET)

enum { SIGNAL_CANDIDATE_ACTIVATED, N_SIGNALS };
static guint signals[N_SIGNALS];

const char *
hanashi_prob_chart_stage_label (HnSamplerStage stage)
{
  switch (stage)
    {
    case HN_STAGE_LOGIT_BIAS: return _("logit bias");
    case HN_STAGE_REPETITION: return _("repetition penalty");
    case HN_STAGE_GRAMMAR: return _("grammar");
    case HN_STAGE_TOP_K: return _("top-k");
    case HN_STAGE_TYPICAL: return _("typical-p");
    case HN_STAGE_TOP_P: return _("top-p");
    case HN_STAGE_MIN_P: return _("min-p");
    case HN_STAGE_TEMPERATURE: return _("temperature 0 (greedy)");
    case HN_STAGE_MIROSTAT: return _("mirostat");
    case HN_STAGE_NONE:
    case HN_STAGE_COUNT:
    default: return "";
    }
}

static void
rebuild_labels (HanashiProbChart *self)
{
  g_ptr_array_set_size (self->labels, 0);
  g_ptr_array_set_size (self->shown, 0);
  g_ptr_array_set_size (self->infos, 0);
  for (guint i = 0; self->has_record && i < self->record.n_candidates; i++)
    {
      const HnProbCandidate *c = &self->record.candidates[i];
      const char *text = g_ptr_array_index (self->texts, i);
      char *shown = text ? g_strescape (text, NULL) : g_strdup_printf ("#%d", c->id);
      double raw = exp ((double) c->logprob) * 100.0;
      char *info;
      if (c->removed_by != HN_STAGE_NONE)
        /* Translators: a candidate token in the probability chart: its probability under the
         * model, and the sampler stage that removed it ("top-k", "grammar", …) */
        info = g_strdup_printf (_("%.1f%%  removed by %s"), raw, hanashi_prob_chart_stage_label (c->removed_by));
      else
        /* Translators: a candidate token: its probability under the model, and its
         * probability after the sampler settings */
        info = g_strdup_printf (_("%.1f%% → %.1f%%"), raw, (double) c->p * 100.0);
      g_ptr_array_add (self->labels, g_strdup_printf ("%s  %s", shown, info));
      g_ptr_array_add (self->shown, shown);
      g_ptr_array_add (self->infos, info);
    }
}

void
hanashi_prob_chart_set_record (HanashiProbChart *self, const HnTokenProbs *record, const char *const *texts)
{
  g_return_if_fail (HANASHI_IS_PROB_CHART (self));
  self->has_record = record != NULL;
  g_ptr_array_set_size (self->texts, 0);
  if (record != NULL)
    {
      self->record = *record;
      self->record.n_candidates = MIN (record->n_candidates, HN_PROBS_MAX_K);
      for (guint i = 0; i < self->record.n_candidates; i++)
        g_ptr_array_add (self->texts, g_strdup (texts ? texts[i] : NULL));
    }
  rebuild_labels (self);
  /* a screen reader reads the rows as the chart's description */
  GString *description = g_string_new (NULL);
  for (guint i = 0; i < self->labels->len; i++)
    g_string_append_printf (description, "%s%s", i ? "; " : "", (const char *) g_ptr_array_index (self->labels, i));
  gtk_accessible_update_property (GTK_ACCESSIBLE (self), GTK_ACCESSIBLE_PROPERTY_DESCRIPTION, description->str, -1);
  g_string_free (description, TRUE);
  gtk_widget_queue_resize (GTK_WIDGET (self));
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

guint
hanashi_prob_chart_get_n_bars (HanashiProbChart *self)
{
  g_return_val_if_fail (HANASHI_IS_PROB_CHART (self), 0);
  return self->labels->len;
}

const char *
hanashi_prob_chart_get_bar_label (HanashiProbChart *self, guint index)
{
  g_return_val_if_fail (HANASHI_IS_PROB_CHART (self) && index < self->labels->len, NULL);
  return g_ptr_array_index (self->labels, index);
}

gboolean
hanashi_prob_chart_bar_is_removed (HanashiProbChart *self, guint index)
{
  g_return_val_if_fail (HANASHI_IS_PROB_CHART (self) && index < self->labels->len, FALSE);
  return self->record.candidates[index].removed_by != HN_STAGE_NONE;
}

int
hanashi_prob_chart_get_chosen_index (HanashiProbChart *self)
{
  g_return_val_if_fail (HANASHI_IS_PROB_CHART (self), -1);
  for (guint i = 0; self->has_record && i < self->record.n_candidates; i++)
    if (self->record.candidates[i].id == self->record.token)
      return (int) i;
  return -1;
}

static void
hanashi_prob_chart_measure (GtkWidget *widget, GtkOrientation orientation, int for_size,
                            int *minimum, int *natural, int *minimum_baseline, int *natural_baseline)
{
  HanashiProbChart *self = HANASHI_PROB_CHART (widget);
  (void) for_size; (void) minimum_baseline; (void) natural_baseline;
  if (orientation == GTK_ORIENTATION_HORIZONTAL)
    {
      *minimum = LABEL_WIDTH + INFO_WIDTH + 60;
      *natural = LABEL_WIDTH + INFO_WIDTH + 240;
    }
  else
    *minimum = *natural = (int) MAX (1u, self->labels->len) * ROW_HEIGHT;
}

static void
hanashi_prob_chart_snapshot (GtkWidget *widget, GtkSnapshot *snapshot)
{
  HanashiProbChart *self = HANASHI_PROB_CHART (widget);
  int width = gtk_widget_get_width (widget);
  GdkRGBA fg;
#if GTK_CHECK_VERSION (4, 10, 0)
  gtk_widget_get_color (widget, &fg);
#else
  gtk_style_context_get_color (gtk_widget_get_style_context (widget), &fg);
#endif
  GdkRGBA accent = { 0.21f, 0.52f, 0.89f, 1.0f };  /* libadwaita's blue 3 */
  GdkRGBA raw_color = fg, grey = fg, chosen = { 0.90f, 0.38f, 0.0f, 1.0f };
  raw_color.alpha = 0.18f;
  grey.alpha = 0.35f;
  float bar_width = (float) MAX (10, width - LABEL_WIDTH - INFO_WIDTH - 8);
  int chosen_index = hanashi_prob_chart_get_chosen_index (self);

  for (guint i = 0; i < self->labels->len; i++)
    {
      const HnProbCandidate *c = &self->record.candidates[i];
      float y = (float) (i * ROW_HEIGHT);
      gboolean removed = c->removed_by != HN_STAGE_NONE;
      float raw = (float) exp ((double) c->logprob);
      /* the raw probability, pale, under the final one */
      gtk_snapshot_append_color (snapshot, &raw_color,
                                 &GRAPHENE_RECT_INIT (LABEL_WIDTH, y + 4, MAX (1.0f, raw * bar_width), ROW_HEIGHT - 8));
      if (!removed)
        gtk_snapshot_append_color (snapshot, &accent,
                                   &GRAPHENE_RECT_INIT (LABEL_WIDTH, y + 9, MAX (1.0f, c->p * bar_width), ROW_HEIGHT - 18));
      if ((int) i == chosen_index)
        gtk_snapshot_append_color (snapshot, &chosen, &GRAPHENE_RECT_INIT (0, y + 3, 4, ROW_HEIGHT - 6));
      const char *cells[2] = { g_ptr_array_index (self->shown, i), g_ptr_array_index (self->infos, i) };
      const float xs[2] = { 10.0f, LABEL_WIDTH + bar_width + 8.0f };
      const int widths[2] = { LABEL_WIDTH - 14, INFO_WIDTH - 4 };
      for (int cell = 0; cell < 2; cell++)
        {
          PangoLayout *layout = gtk_widget_create_pango_layout (widget, cells[cell]);
          pango_layout_set_width (layout, widths[cell] * PANGO_SCALE);
          pango_layout_set_ellipsize (layout, PANGO_ELLIPSIZE_END);
          gtk_snapshot_save (snapshot);
          gtk_snapshot_translate (snapshot, &GRAPHENE_POINT_INIT (xs[cell], y + 4));
          gtk_snapshot_append_layout (snapshot, layout, removed ? &grey : &fg);
          gtk_snapshot_restore (snapshot);
          g_object_unref (layout);
        }
    }
}

static void
on_click (GtkGestureClick *gesture, int n_press, double x, double y, HanashiProbChart *self)
{
  (void) gesture; (void) n_press; (void) x;
  if (y < 0)
    return;
  guint index = (guint) (y / ROW_HEIGHT);
  if (index < self->labels->len)
    g_signal_emit (self, signals[SIGNAL_CANDIDATE_ACTIVATED], 0, self->record.candidates[index].id);
}

static void
hanashi_prob_chart_finalize (GObject *object)
{
  HanashiProbChart *self = HANASHI_PROB_CHART (object);
  g_ptr_array_unref (self->labels);
  g_ptr_array_unref (self->texts);
  g_ptr_array_unref (self->shown);
  g_ptr_array_unref (self->infos);
  G_OBJECT_CLASS (hanashi_prob_chart_parent_class)->finalize (object);
}

static void
hanashi_prob_chart_class_init (HanashiProbChartClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->finalize = hanashi_prob_chart_finalize;
  widget_class->measure = hanashi_prob_chart_measure;
  widget_class->snapshot = hanashi_prob_chart_snapshot;
  gtk_widget_class_set_css_name (widget_class, "probchart");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
  /* (gint token): a candidate was clicked */
  signals[SIGNAL_CANDIDATE_ACTIVATED] = g_signal_new ("candidate-activated", G_TYPE_FROM_CLASS (klass),
                                                      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                      G_TYPE_NONE, 1, G_TYPE_INT);
}

static void
hanashi_prob_chart_init (HanashiProbChart *self)
{
  self->labels = g_ptr_array_new_with_free_func (g_free);
  self->texts = g_ptr_array_new_with_free_func (g_free);
  self->shown = g_ptr_array_new_with_free_func (g_free);
  self->infos = g_ptr_array_new_with_free_func (g_free);
  GtkGesture *click = gtk_gesture_click_new ();
  g_signal_connect (click, "released", G_CALLBACK (on_click), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (click));
  gtk_accessible_update_property (GTK_ACCESSIBLE (self), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Candidates for this token"), -1);
}

GtkWidget *
hanashi_prob_chart_new (void)
{
  return g_object_new (HANASHI_TYPE_PROB_CHART, NULL);
}
