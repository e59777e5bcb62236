/* hanashi-lens-view.c — see the header.
 *
 * The recompute runs on the main thread: hn_lens_compute takes a few milliseconds on a
 * 150k vocabulary whatever the settings (tests/bench/bench-probs, docs/sampling.md), well
 * inside a frame, and a worker would only add a hop and a stale frame.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-lens"

#include "config.h"

#include <glib/gi18n.h>
#include <math.h>

#include "hanashi-lens-view.h"

struct _HanashiLensView {
  GtkWidget parent_instance;
  GtkExpander *expander;
  GtkLabel *status_label;
  HanashiProbChart *chart;
  GtkLabel *note_label;
  GtkWidget *position_box;     /* shown while a picked token is the row */
  GtkLabel *position_label;
  gint32 marked_token;         /* the token the answer took at the picked position, or -1 */

  HanashiNextLogits *next;     /* the stored row, or NULL */
  HnLens *lens;                /* sized for next's vocabulary */
  HnSamplerParams params;
  gboolean has_params;
  gboolean use_grammar;
  guint n_recomputes;
};

G_DEFINE_FINAL_TYPE (HanashiLensView, hanashi_lens_view, GTK_TYPE_WIDGET)

enum { PROP_0, PROP_OPEN, N_PROPS };
static GParamSpec *properties[N_PROPS];

static void
show_status (HanashiLensView *self, const char *text)
{
  gtk_label_set_text (self->status_label, text ? text : "");
  gtk_widget_set_visible (GTK_WIDGET (self->status_label), text != NULL && *text != '\0');
}

static void
recompute (HanashiLensView *self)
{
  if (!hanashi_lens_view_get_open (self) || self->next == NULL || !self->has_params)
    return;
  HnError err = { 0 };
  if (self->lens == NULL || hn_lens_n_vocab (self->lens) != (int32_t) self->next->n_vocab)
    {
      g_clear_pointer (&self->lens, hn_lens_free);
      self->lens = hn_lens_new ((int32_t) self->next->n_vocab, &err);
      if (self->lens == NULL)
        {
          show_status (self, err.message);
          return;
        }
    }
  gsize history_size = 0, newline_size = 0;
  const gint32 *history = g_bytes_get_data (self->next->history, &history_size);
  const gint32 *newline = self->next->newline_tokens ? g_bytes_get_data (self->next->newline_tokens, &newline_size) : NULL;
  gboolean grammar = self->use_grammar && self->next->allowed != NULL;
  HnLensInput in = {
    .logits = g_bytes_get_data (self->next->logits, NULL),
    .history = history,
    .n_history = history_size / sizeof (gint32),
    .allowed = grammar ? g_bytes_get_data (self->next->allowed, NULL) : NULL,
    .newline_ids = newline,
    .n_newline = MIN (newline_size / sizeof (gint32), 8),
    .mirostat_mu = NAN,
  };
  HnSamplerParams params = self->params;
  params.logit_bias = NULL;
  params.n_logit_bias = 0;
  params.stop = NULL;
  params.n_stop = 0;
  HnTokenProbs record;
  gboolean ok = hn_lens_compute (self->lens, &params, &in, HN_PROBS_MAX_K, &record, &err);
  self->n_recomputes++;
  /* no token survives (a grammar that allows none of them here) still shows the row */
  if (!ok && record.n_candidates == 0)
    {
      show_status (self, err.message);
      hanashi_prob_chart_set_record (self->chart, NULL, NULL);
      return;
    }
  show_status (self, ok ? NULL : err.message);
  const char *texts[HN_PROBS_MAX_K] = { 0 };
  for (guint i = 0; i < record.n_candidates; i++)
    for (guint j = 0; j < self->next->n_top; j++)
      if (self->next->top_ids[j] == record.candidates[i].id)
        texts[i] = self->next->top_texts[j];
  /* at a picked token, the mark is what the answer took there */
  if (self->marked_token >= 0)
    record.token = self->marked_token;
  hanashi_prob_chart_set_record (self->chart, &record, texts);

  GString *note = g_string_new (NULL);
  if (params.mirostat != 0)
    g_string_append (note, _("Mirostat adapts as a reply goes on: this is its cut at the start of a reply."));
  if (grammar)
    g_string_append_printf (note, "%s%s", note->len ? "\n" : "",
                            _("Tokens the grammar does not allow here are marked “removed by grammar”."));
  gtk_label_set_text (self->note_label, note->str);
  gtk_widget_set_visible (GTK_WIDGET (self->note_label), note->len > 0);
  g_string_free (note, TRUE);
}

gboolean
hanashi_lens_view_get_open (HanashiLensView *self)
{
  g_return_val_if_fail (HANASHI_IS_LENS_VIEW (self), FALSE);
  return gtk_expander_get_expanded (self->expander);
}

void
hanashi_lens_view_set_open (HanashiLensView *self, gboolean open)
{
  g_return_if_fail (HANASHI_IS_LENS_VIEW (self));
  gtk_expander_set_expanded (self->expander, open);
}

void
hanashi_lens_view_set_logits (HanashiLensView *self, const HanashiNextLogits *next, const char *status)
{
  g_return_if_fail (HANASHI_IS_LENS_VIEW (self));
  g_clear_pointer (&self->next, hanashi_next_logits_free);
  if (next != NULL)
    self->next = hanashi_next_logits_copy (next);
  else
    hanashi_prob_chart_set_record (self->chart, NULL, NULL);
  show_status (self, status);
  recompute (self);
}

void
hanashi_lens_view_set_position (HanashiLensView *self, const char *picked, gint32 marked)
{
  g_return_if_fail (HANASHI_IS_LENS_VIEW (self));
  gtk_label_set_text (self->position_label, picked != NULL ? picked : "");
  gtk_widget_set_visible (self->position_box, picked != NULL);
  gtk_expander_set_label (self->expander, picked != NULL ? _("_Lens: a Token of an Answer") : _("_Lens: the Next Token"));
  self->marked_token = picked != NULL ? marked : -1;
}

const char *
hanashi_lens_view_get_position (HanashiLensView *self)
{
  g_return_val_if_fail (HANASHI_IS_LENS_VIEW (self), NULL);
  return gtk_widget_get_visible (self->position_box) ? gtk_label_get_text (self->position_label) : NULL;
}

void
hanashi_lens_view_set_params (HanashiLensView *self, const HnSamplerParams *params, gboolean use_grammar)
{
  g_return_if_fail (HANASHI_IS_LENS_VIEW (self));
  self->params = *params;
  self->has_params = TRUE;
  self->use_grammar = use_grammar;
  recompute (self);
}

HanashiProbChart *
hanashi_lens_view_get_chart (HanashiLensView *self)
{
  g_return_val_if_fail (HANASHI_IS_LENS_VIEW (self), NULL);
  return self->chart;
}

guint
hanashi_lens_view_get_n_recomputes (HanashiLensView *self)
{
  g_return_val_if_fail (HANASHI_IS_LENS_VIEW (self), 0);
  return self->n_recomputes;
}

static void
on_expanded (HanashiLensView *self)
{
  recompute (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_OPEN]);
}

static void
hanashi_lens_view_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  HanashiLensView *self = HANASHI_LENS_VIEW (object);
  switch (prop_id)
    {
    case PROP_OPEN: g_value_set_boolean (value, hanashi_lens_view_get_open (self)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hanashi_lens_view_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
  HanashiLensView *self = HANASHI_LENS_VIEW (object);
  switch (prop_id)
    {
    case PROP_OPEN: hanashi_lens_view_set_open (self, g_value_get_boolean (value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hanashi_lens_view_dispose (GObject *object)
{
  HanashiLensView *self = HANASHI_LENS_VIEW (object);
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self))) != NULL)
    gtk_widget_unparent (child);
  G_OBJECT_CLASS (hanashi_lens_view_parent_class)->dispose (object);
}

static void
hanashi_lens_view_finalize (GObject *object)
{
  HanashiLensView *self = HANASHI_LENS_VIEW (object);
  g_clear_pointer (&self->next, hanashi_next_logits_free);
  g_clear_pointer (&self->lens, hn_lens_free);
  G_OBJECT_CLASS (hanashi_lens_view_parent_class)->finalize (object);
}

static void
hanashi_lens_view_class_init (HanashiLensViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->get_property = hanashi_lens_view_get_property;
  object_class->set_property = hanashi_lens_view_set_property;
  object_class->dispose = hanashi_lens_view_dispose;
  object_class->finalize = hanashi_lens_view_finalize;
  properties[PROP_OPEN] = g_param_spec_boolean ("open", NULL, NULL, FALSE,
                                                G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "lensview");
}

static void
hanashi_lens_view_init (HanashiLensView *self)
{
  self->expander = GTK_EXPANDER (gtk_expander_new_with_mnemonic (_("_Lens: the Next Token")));
  gtk_widget_set_name (GTK_WIDGET (self->expander), "lens-expander");
  gtk_widget_set_parent (GTK_WIDGET (self->expander), GTK_WIDGET (self));
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  gtk_widget_set_margin_top (box, 6);
  GtkWidget *explanation = gtk_label_new (_("The model's candidates for the next token: pale bars before the "
                                            "settings below, blue bars after them."));
  gtk_label_set_wrap (GTK_LABEL (explanation), TRUE);
  gtk_label_set_xalign (GTK_LABEL (explanation), 0);
  gtk_widget_add_css_class (explanation, "dim-label");
  gtk_box_append (GTK_BOX (box), explanation);
  /* a token picked in an answer: which one, and the way back */
  self->marked_token = -1;
  self->position_box = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  gtk_widget_set_name (self->position_box, "lens-position");
  self->position_label = GTK_LABEL (gtk_label_new (NULL));
  gtk_label_set_wrap (self->position_label, TRUE);
  gtk_label_set_xalign (self->position_label, 0);
  gtk_widget_set_hexpand (GTK_WIDGET (self->position_label), TRUE);
  gtk_widget_add_css_class (GTK_WIDGET (self->position_label), "heading");
  gtk_box_append (GTK_BOX (self->position_box), GTK_WIDGET (self->position_label));
  GtkWidget *back = gtk_button_new_with_mnemonic (_("_Next Token"));
  gtk_widget_set_name (back, "lens-back");
  gtk_widget_set_tooltip_text (back, _("Back to the next token of the conversation"));
  gtk_widget_set_valign (back, GTK_ALIGN_CENTER);
  gtk_actionable_set_action_name (GTK_ACTIONABLE (back), "win.lens-next-token");
  gtk_box_append (GTK_BOX (self->position_box), back);
  gtk_widget_set_visible (self->position_box, FALSE);
  gtk_box_append (GTK_BOX (box), self->position_box);
  self->status_label = GTK_LABEL (gtk_label_new (NULL));
  gtk_widget_set_name (GTK_WIDGET (self->status_label), "lens-status");
  gtk_label_set_wrap (self->status_label, TRUE);
  gtk_label_set_xalign (self->status_label, 0);
  gtk_widget_set_visible (GTK_WIDGET (self->status_label), FALSE);
  gtk_box_append (GTK_BOX (box), GTK_WIDGET (self->status_label));
  self->chart = HANASHI_PROB_CHART (hanashi_prob_chart_new ());
  gtk_widget_set_name (GTK_WIDGET (self->chart), "lens-chart");
  gtk_box_append (GTK_BOX (box), GTK_WIDGET (self->chart));
  self->note_label = GTK_LABEL (gtk_label_new (NULL));
  gtk_widget_set_name (GTK_WIDGET (self->note_label), "lens-note");
  gtk_label_set_wrap (self->note_label, TRUE);
  gtk_label_set_xalign (self->note_label, 0);
  gtk_widget_add_css_class (GTK_WIDGET (self->note_label), "dim-label");
  gtk_widget_set_visible (GTK_WIDGET (self->note_label), FALSE);
  gtk_box_append (GTK_BOX (box), GTK_WIDGET (self->note_label));
  gtk_expander_set_child (self->expander, box);
  g_signal_connect_swapped (self->expander, "notify::expanded", G_CALLBACK (on_expanded), self);
}

HanashiLensView *
hanashi_lens_view_new (void)
{
  return g_object_new (HANASHI_TYPE_LENS_VIEW, NULL);
}
