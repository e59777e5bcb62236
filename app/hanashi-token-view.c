/* hanashi-token-view.c — see the header.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-token-view"

#include "config.h"

#include <glib/gi18n.h>
#include <string.h>

#include "hanashi-token-probs.h"
#include "hanashi-token-view.h"

struct _HanashiTokenView {
  GtkWidget parent_instance;

  GtkTextView *text_view;
  GtkTextTag  *shades[HANASHI_TOKEN_SHADE_LEVELS];   /* [0] unused: no shade */
  GtkPopover  *popover;
  GtkLabel    *popover_heading;
  HanashiProbChart *chart;
  GtkWidget   *choices;          /* a button per other candidate */

  HanashiEngine *engine;
  GArray *records;               /* HnTokenProbs */
  GArray *spans;                 /* HanashiTokenSpan, one per record */
  int popover_token;             /* the token the popover shows, -1 none */
};

G_DEFINE_FINAL_TYPE (HanashiTokenView, hanashi_token_view, GTK_TYPE_WIDGET)

enum { SIGNAL_BRANCH, SIGNAL_SHOW_IN_LENS, N_SIGNALS };
static guint signals[N_SIGNALS];

/* ---- the view ------------------------------------------------------------------------- */

static const HnTokenProbs *
record_at (HanashiTokenView *self, guint index)
{
  return &g_array_index (self->records, HnTokenProbs, index);
}

guint
hanashi_token_view_get_n_tokens (HanashiTokenView *self)
{
  g_return_val_if_fail (HANASHI_IS_TOKEN_VIEW (self), 0);
  return self->spans != NULL ? self->spans->len : 0;
}

HanashiTokenSpan
hanashi_token_view_get_span (HanashiTokenView *self, guint index)
{
  HanashiTokenSpan none = { -1, -1 };
  g_return_val_if_fail (HANASHI_IS_TOKEN_VIEW (self), none);
  if (self->spans == NULL || index >= self->spans->len)
    return none;
  return g_array_index (self->spans, HanashiTokenSpan, index);
}

int
hanashi_token_view_get_shade (HanashiTokenView *self, guint index)
{
  HanashiTokenSpan span = hanashi_token_view_get_span (self, index);
  if (span.start < 0 || span.start == span.end)
    return -1;
  GtkTextIter iter;
  gtk_text_buffer_get_iter_at_offset (gtk_text_view_get_buffer (self->text_view), &iter, span.start);
  for (int level = 1; level < HANASHI_TOKEN_SHADE_LEVELS; level++)
    if (gtk_text_iter_has_tag (&iter, self->shades[level]))
      return level;
  return 0;
}

int
hanashi_token_view_get_token_at (HanashiTokenView *self, int offset)
{
  g_return_val_if_fail (HANASHI_IS_TOKEN_VIEW (self), -1);
  if (self->spans == NULL)
    return -1;
  /* spans are in order and do not overlap: the first that ends after the offset */
  guint lo = 0, hi = self->spans->len;
  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;
      if (g_array_index (self->spans, HanashiTokenSpan, mid).end <= offset)
        lo = mid + 1;
      else
        hi = mid;
    }
  for (; lo < self->spans->len; lo++)
    {
      HanashiTokenSpan span = g_array_index (self->spans, HanashiTokenSpan, lo);
      if (span.start == span.end)
        continue;
      return span.start <= offset ? (int) lo : -1;
    }
  return -1;
}

/* A candidate's text as a person reads it: control tokens by their spelling, line breaks
 * and tabs escaped; NULL when the engine cannot say (the chart shows the id). */
static char *
dup_candidate_text (HanashiTokenView *self, gint32 token)
{
  if (self->engine == NULL)
    return NULL;
  g_autoptr (GBytes) bytes = hanashi_engine_dup_token_text (self->engine, token, NULL);
  if (bytes == NULL)
    return NULL;
  gsize len = 0;
  const char *data = g_bytes_get_data (bytes, &len);
  return g_utf8_make_valid (data != NULL ? data : "", (gssize) len);
}

static char **
dup_candidate_texts (HanashiTokenView *self, const HnTokenProbs *record)
{
  char **texts = g_new0 (char *, record->n_candidates + 1);
  for (guint i = 0; i < record->n_candidates; i++)
    texts[i] = dup_candidate_text (self, record->candidates[i].id);
  return texts;
}

static char *
describe_choice (HanashiTokenView *self, const HnTokenProbs *record)
{
  g_autofree char *text = dup_candidate_text (self, record->token);
  g_autofree char *shown = text != NULL ? g_strescape (text, NULL) : g_strdup_printf ("#%d", record->token);
  /* Translators: the heading of a token's candidates: the token's text and the probability
   * it was chosen with */
  return g_strdup_printf (_("“%s” was chosen with %.1f%%"), shown, (double) record->p * 100.0);
}

/* The focus goes back to the text: the popover's buttons are rebuilt for the next token,
 * and GTK 4.8 complains later when the focused one is removed under it. */
static void
close_popover (HanashiTokenView *self)
{
  if (!gtk_widget_get_visible (GTK_WIDGET (self->popover)))
    return;
  gtk_popover_popdown (self->popover);
  gtk_widget_grab_focus (GTK_WIDGET (self->text_view));
}

static void
on_choice_clicked (GtkButton        *button,
                   HanashiTokenView *self)
{
  int candidate = GPOINTER_TO_INT (g_object_get_data (G_OBJECT (button), "candidate"));
  int index = self->popover_token;
  close_popover (self);
  if (index >= 0)
    g_signal_emit (self, signals[SIGNAL_BRANCH], 0, (guint) index, candidate);
}

static void
on_show_in_lens_clicked (GtkButton        *button,
                         HanashiTokenView *self)
{
  int index = self->popover_token;
  close_popover (self);
  if (index >= 0)
    g_signal_emit (self, signals[SIGNAL_SHOW_IN_LENS], 0, (guint) index);
}

static void
on_chart_candidate (HanashiProbChart *chart,
                    int               candidate,
                    HanashiTokenView *self)
{
  int index = self->popover_token;
  if (index < 0 || candidate == record_at (self, (guint) index)->token)
    return;
  close_popover (self);
  g_signal_emit (self, signals[SIGNAL_BRANCH], 0, (guint) index, candidate);
}

/* The token's rectangle in the view's coordinates. */
static GdkRectangle
token_rectangle (HanashiTokenView *self, guint index)
{
  HanashiTokenSpan span = hanashi_token_view_get_span (self, index);
  GtkTextIter iter;
  GdkRectangle rect;
  gtk_text_buffer_get_iter_at_offset (gtk_text_view_get_buffer (self->text_view), &iter, MAX (0, span.start));
  gtk_text_view_get_iter_location (self->text_view, &iter, &rect);
  gtk_text_view_buffer_to_window_coords (self->text_view, GTK_TEXT_WINDOW_WIDGET, rect.x, rect.y, &rect.x, &rect.y);
#if GTK_CHECK_VERSION (4, 12, 0)
  graphene_point_t point;
  if (gtk_widget_compute_point (GTK_WIDGET (self->text_view), GTK_WIDGET (self),
                                &GRAPHENE_POINT_INIT ((float) rect.x, (float) rect.y), &point))
    {
      rect.x = (int) point.x;
      rect.y = (int) point.y;
    }
#else
  double x = 0, y = 0;
  if (gtk_widget_translate_coordinates (GTK_WIDGET (self->text_view), GTK_WIDGET (self), rect.x, rect.y, &x, &y))
    {
      rect.x = (int) x;
      rect.y = (int) y;
    }
#endif
  rect.width = MAX (rect.width, 1);
  return rect;
}

void
hanashi_token_view_show_candidates (HanashiTokenView *self, guint index)
{
  g_return_if_fail (HANASHI_IS_TOKEN_VIEW (self));
  if (self->spans == NULL || index >= self->spans->len)
    return;
  close_popover (self);
  const HnTokenProbs *record = record_at (self, index);
  g_auto (GStrv) texts = dup_candidate_texts (self, record);
  self->popover_token = (int) index;
  hanashi_prob_chart_set_record (self->chart, record, (const char *const *) texts);

  g_autofree char *heading = describe_choice (self, record);
  gtk_label_set_label (self->popover_heading, heading);
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (self->choices)) != NULL)
    gtk_flow_box_remove (GTK_FLOW_BOX (self->choices), child);
  for (guint i = 0; i < record->n_candidates; i++)
    {
      const HnProbCandidate *c = &record->candidates[i];
      if (c->id == record->token)
        continue;
      g_autofree char *shown = texts[i] != NULL ? g_strescape (texts[i], NULL) : g_strdup_printf ("#%d", c->id);
      GtkWidget *button = gtk_button_new_with_label (shown);
      gtk_widget_add_css_class (button, "flat");
      g_object_set_data (G_OBJECT (button), "candidate", GINT_TO_POINTER (c->id));
      /* Translators: the tooltip of a candidate token's button in the probability popover */
      gtk_widget_set_tooltip_text (button, _("Continue the answer from here with this token"));
      g_signal_connect (button, "clicked", G_CALLBACK (on_choice_clicked), self);
      gtk_flow_box_append (GTK_FLOW_BOX (self->choices), button);
    }

  /* what the chart draws, for a screen reader: the heading and every row */
  GString *description = g_string_new (heading);
  for (guint i = 0; i < hanashi_prob_chart_get_n_bars (self->chart); i++)
    g_string_append_printf (description, "; %s", hanashi_prob_chart_get_bar_label (self->chart, i));
  gtk_accessible_update_property (GTK_ACCESSIBLE (gtk_popover_get_child (self->popover)),
                                  GTK_ACCESSIBLE_PROPERTY_DESCRIPTION, description->str, -1);
  g_string_free (description, TRUE);

  GdkRectangle rect = token_rectangle (self, index);
  gtk_popover_set_pointing_to (self->popover, &rect);
  gtk_popover_popup (self->popover);
}

GtkPopover *
hanashi_token_view_get_popover (HanashiTokenView *self)
{
  g_return_val_if_fail (HANASHI_IS_TOKEN_VIEW (self), NULL);
  return self->popover;
}

HanashiProbChart *
hanashi_token_view_get_chart (HanashiTokenView *self)
{
  g_return_val_if_fail (HANASHI_IS_TOKEN_VIEW (self), NULL);
  return self->chart;
}

static void
clear_answer (HanashiTokenView *self)
{
  g_clear_object (&self->engine);
  g_clear_pointer (&self->records, g_array_unref);
  g_clear_pointer (&self->spans, g_array_unref);
  self->popover_token = -1;
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->text_view), "", 0);
}

gboolean
hanashi_token_view_set_answer (HanashiTokenView *self,
                               HanashiEngine    *engine,
                               const char       *text,
                               GArray           *records)
{
  g_return_val_if_fail (HANASHI_IS_TOKEN_VIEW (self), FALSE);

  if (self->popover_token >= 0)
    gtk_popover_popdown (self->popover);
  clear_answer (self);
  if (engine == NULL || text == NULL || *text == '\0' || records == NULL || records->len == 0)
    return FALSE;
  g_autoptr (GPtrArray) pieces = g_ptr_array_new_full (records->len, (GDestroyNotify) g_bytes_unref);
  for (guint i = 0; i < records->len; i++)
    {
      gboolean is_control = FALSE;
      GBytes *bytes = hanashi_engine_dup_token_text (engine, g_array_index (records, HnTokenProbs, i).token, &is_control);
      if (bytes == NULL)
        return FALSE;   /* no model, or not the one that wrote this */
      if (is_control)
        g_clear_pointer (&bytes, g_bytes_unref);   /* it wrote nothing */
      g_ptr_array_add (pieces, bytes);
    }
  GArray *spans = hanashi_token_spans_map (text, (GBytes *const *) pieces->pdata, pieces->len);
  if (spans == NULL)
    return FALSE;
  self->engine = g_object_ref (engine);
  self->records = g_array_ref (records);
  self->spans = spans;

  GtkTextBuffer *buffer = gtk_text_view_get_buffer (self->text_view);
  gtk_text_buffer_set_text (buffer, text, -1);
  for (guint i = 0; i < spans->len; i++)
    {
      HanashiTokenSpan span = g_array_index (spans, HanashiTokenSpan, i);
      int level = hanashi_token_shade_level (record_at (self, i)->p);
      if (span.start == span.end || level == 0)
        continue;
      GtkTextIter start, end;
      gtk_text_buffer_get_iter_at_offset (buffer, &start, span.start);
      gtk_text_buffer_get_iter_at_offset (buffer, &end, span.end);
      gtk_text_buffer_apply_tag (buffer, self->shades[level], &start, &end);
    }
  GtkTextIter first;
  gtk_text_buffer_get_start_iter (buffer, &first);
  gtk_text_buffer_place_cursor (buffer, &first);
  return TRUE;
}

/* ---- input ------------------------------------------------------------------------------- */

static int
token_at_point (HanashiTokenView *self, double x, double y)
{
  int bx = 0, by = 0;
  GtkTextIter iter;
  gtk_text_view_window_to_buffer_coords (self->text_view, GTK_TEXT_WINDOW_WIDGET, (int) x, (int) y, &bx, &by);
  if (!gtk_text_view_get_iter_at_location (self->text_view, &iter, bx, by))
    return -1;
  return hanashi_token_view_get_token_at (self, gtk_text_iter_get_offset (&iter));
}

static void
on_released (GtkGestureClick  *gesture,
             int               n_press,
             double            x,
             double            y,
             HanashiTokenView *self)
{
  (void) gesture;
  /* a drag that selected text, or a double click, is not a choice of token */
  if (n_press != 1 || gtk_text_buffer_get_has_selection (gtk_text_view_get_buffer (self->text_view)))
    return;
  int index = token_at_point (self, x, y);
  if (index >= 0)
    hanashi_token_view_show_candidates (self, (guint) index);
}

static gboolean
on_key_pressed (GtkEventControllerKey *controller,
                guint                  keyval,
                guint                  keycode,
                GdkModifierType        state,
                HanashiTokenView      *self)
{
  (void) controller; (void) keycode;
  if ((state & (GDK_CONTROL_MASK | GDK_ALT_MASK | GDK_SHIFT_MASK)) != 0 ||
      (keyval != GDK_KEY_Return && keyval != GDK_KEY_KP_Enter && keyval != GDK_KEY_space))
    return FALSE;
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (self->text_view);
  GtkTextIter cursor;
  gtk_text_buffer_get_iter_at_mark (buffer, &cursor, gtk_text_buffer_get_insert (buffer));
  int offset = gtk_text_iter_get_offset (&cursor);
  int index = hanashi_token_view_get_token_at (self, offset);
  if (index < 0 && offset > 0)
    index = hanashi_token_view_get_token_at (self, offset - 1);   /* the caret after the last */
  if (index < 0)
    return FALSE;
  hanashi_token_view_show_candidates (self, (guint) index);
  return TRUE;
}

static gboolean
on_query_tooltip (GtkWidget        *widget,
                  int               x,
                  int               y,
                  gboolean          keyboard,
                  GtkTooltip       *tooltip,
                  HanashiTokenView *self)
{
  (void) widget;
  if (keyboard || self->records == NULL)
    return FALSE;
  int index = token_at_point (self, x, y);
  if (index < 0)
    return FALSE;
  const HnTokenProbs *record = record_at (self, (guint) index);
  g_auto (GStrv) texts = dup_candidate_texts (self, record);
  g_autofree char *heading = describe_choice (self, record);
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  GtkWidget *label = gtk_label_new (heading);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_box_append (GTK_BOX (box), label);
  GtkWidget *chart = hanashi_prob_chart_new ();
  hanashi_prob_chart_set_record (HANASHI_PROB_CHART (chart), record, (const char *const *) texts);
  gtk_box_append (GTK_BOX (box), chart);
  gtk_tooltip_set_custom (tooltip, box);
  return TRUE;
}

/* ---- GtkWidget ----------------------------------------------------------------------------- */

static void
hanashi_token_view_measure (GtkWidget *widget, GtkOrientation orientation, int for_size,
                            int *minimum, int *natural, int *minimum_baseline, int *natural_baseline)
{
  HanashiTokenView *self = HANASHI_TOKEN_VIEW (widget);
  gtk_widget_measure (GTK_WIDGET (self->text_view), orientation, for_size, minimum, natural,
                      minimum_baseline, natural_baseline);
}

static void
hanashi_token_view_size_allocate (GtkWidget *widget, int width, int height, int baseline)
{
  HanashiTokenView *self = HANASHI_TOKEN_VIEW (widget);
  gtk_widget_allocate (GTK_WIDGET (self->text_view), width, height, baseline, NULL);
  gtk_popover_present (self->popover);
}

static void
hanashi_token_view_dispose (GObject *object)
{
  HanashiTokenView *self = HANASHI_TOKEN_VIEW (object);

  g_clear_object (&self->engine);
  g_clear_pointer (&self->records, g_array_unref);
  g_clear_pointer (&self->spans, g_array_unref);
  if (self->popover != NULL)
    {
      gtk_widget_unparent (GTK_WIDGET (self->popover));
      self->popover = NULL;
    }
  if (self->text_view != NULL)
    {
      gtk_widget_unparent (GTK_WIDGET (self->text_view));
      self->text_view = NULL;
    }
  G_OBJECT_CLASS (hanashi_token_view_parent_class)->dispose (object);
}

static void
hanashi_token_view_class_init (HanashiTokenViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hanashi_token_view_dispose;
  widget_class->measure = hanashi_token_view_measure;
  widget_class->size_allocate = hanashi_token_view_size_allocate;
  gtk_widget_class_set_css_name (widget_class, "tokenview");

  /* (guint token_index, gint candidate_token) */
  signals[SIGNAL_BRANCH] = g_signal_new ("branch", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                         NULL, G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_INT);
  /* (guint token_index): the user wants the panel's lens on that token */
  signals[SIGNAL_SHOW_IN_LENS] = g_signal_new ("show-in-lens", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                               NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_UINT);
}

static void
hanashi_token_view_init (HanashiTokenView *self)
{
  self->popover_token = -1;
  self->text_view = GTK_TEXT_VIEW (gtk_text_view_new ());
  gtk_text_view_set_editable (self->text_view, FALSE);
  /* the caret stays, so the keyboard can walk the tokens and open one with Enter */
  gtk_text_view_set_cursor_visible (self->text_view, TRUE);
  gtk_text_view_set_wrap_mode (self->text_view, GTK_WRAP_WORD_CHAR);
  gtk_widget_add_css_class (GTK_WIDGET (self->text_view), "token-view");
  gtk_widget_set_has_tooltip (GTK_WIDGET (self->text_view), TRUE);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->text_view), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Answer by tokens"), GTK_ACCESSIBLE_PROPERTY_DESCRIPTION,
                                  _("Each token is shaded by how likely it was; press Enter to see the other candidates"),
                                  -1);
  gtk_widget_set_parent (GTK_WIDGET (self->text_view), GTK_WIDGET (self));

  /* One hue, stronger for less likely tokens: it reads by lightness alone (colour-blind
   * safe) and, being translucent, over a light or a dark background; the least likely are
   * also underlined so the scale does not rest on colour at all. */
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (self->text_view);
  static const float alphas[HANASHI_TOKEN_SHADE_LEVELS] = { 0, 0.14f, 0.28f, 0.45f, 0.65f };
  for (int level = 1; level < HANASHI_TOKEN_SHADE_LEVELS; level++)
    {
      GdkRGBA shade = { 0.90f, 0.38f, 0.0f, alphas[level] };   /* libadwaita's orange 4 */
      g_autofree char *name = g_strdup_printf ("shade-%d", level);
      self->shades[level] = gtk_text_buffer_create_tag (buffer, name, "background-rgba", &shade, NULL);
      if (level == HANASHI_TOKEN_SHADE_LEVELS - 1)
        g_object_set (self->shades[level], "underline", PANGO_UNDERLINE_SINGLE, NULL);
    }

  GtkGesture *click = gtk_gesture_click_new ();
  g_signal_connect (click, "released", G_CALLBACK (on_released), self);
  gtk_widget_add_controller (GTK_WIDGET (self->text_view), GTK_EVENT_CONTROLLER (click));
  GtkEventController *keys = gtk_event_controller_key_new ();
  g_signal_connect (keys, "key-pressed", G_CALLBACK (on_key_pressed), self);
  gtk_widget_add_controller (GTK_WIDGET (self->text_view), keys);
  g_signal_connect (self->text_view, "query-tooltip", G_CALLBACK (on_query_tooltip), self);

  /* the popover: what was chosen, the chart, and a button per other candidate */
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 8);
  gtk_widget_set_margin_start (box, 6);
  gtk_widget_set_margin_end (box, 6);
  gtk_widget_set_margin_top (box, 6);
  gtk_widget_set_margin_bottom (box, 6);
  self->popover_heading = GTK_LABEL (gtk_label_new (NULL));
  gtk_label_set_xalign (self->popover_heading, 0);
  gtk_widget_add_css_class (GTK_WIDGET (self->popover_heading), "heading");
  gtk_box_append (GTK_BOX (box), GTK_WIDGET (self->popover_heading));
  self->chart = HANASHI_PROB_CHART (hanashi_prob_chart_new ());
  g_signal_connect (self->chart, "candidate-activated", G_CALLBACK (on_chart_candidate), self);
  gtk_box_append (GTK_BOX (box), GTK_WIDGET (self->chart));
  GtkWidget *branch_label = gtk_label_new (_("Continue the answer with another token:"));
  gtk_label_set_xalign (GTK_LABEL (branch_label), 0);
  gtk_widget_add_css_class (branch_label, "dim-label");
  gtk_box_append (GTK_BOX (box), branch_label);
  self->choices = gtk_flow_box_new ();
  gtk_flow_box_set_selection_mode (GTK_FLOW_BOX (self->choices), GTK_SELECTION_NONE);
  gtk_flow_box_set_max_children_per_line (GTK_FLOW_BOX (self->choices), 5);
  gtk_box_append (GTK_BOX (box), self->choices);
  /* the same position under the panel's current settings, live as the sliders move */
  GtkWidget *lens_button = gtk_button_new_with_mnemonic (_("Show in the _Lens"));
  gtk_widget_set_name (lens_button, "show-in-lens");
  gtk_widget_set_tooltip_text (lens_button, _("See this token's candidates under the panel's settings"));
  gtk_widget_set_halign (lens_button, GTK_ALIGN_END);
  g_signal_connect (lens_button, "clicked", G_CALLBACK (on_show_in_lens_clicked), self);
  gtk_box_append (GTK_BOX (box), lens_button);
  gtk_accessible_update_property (GTK_ACCESSIBLE (box), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Candidates for this token"), -1);
  self->popover = GTK_POPOVER (gtk_popover_new ());
  gtk_popover_set_child (self->popover, box);
  gtk_widget_set_parent (GTK_WIDGET (self->popover), GTK_WIDGET (self));
}

GtkWidget *
hanashi_token_view_new (void)
{
  return g_object_new (HANASHI_TYPE_TOKEN_VIEW, NULL);
}
