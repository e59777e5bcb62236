/* hanashi-params-panel.c: one row per parameter of the engine's table (hanashi-param-table.h) —
 * slider and spin button, switch or drop-down by the row's type — plus CFG, grammar and
 * presets.  The widgets are the only state: values are read back from them when the
 * window asks, so what the user sees is exactly what the engine receives.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-params-panel"

#include "config.h"

#include <adwaita.h>
#include <glib/gi18n.h>
#include <gtksourceview/gtksource.h>
#include <math.h>

#include "hanashi-params-panel.h"
#include "hanashi-lens-view.h"
#include "hanashi-params.h"
#include "hanashi-presets.h"

/* A large JSON schema takes long to convert and check (hundreds of milliseconds): checking
 * it at every keystroke on the main thread froze the window.  The check waits until typing
 * pauses this long (ms) and runs on a worker thread. */
#define VALIDATE_DELAY_MS 250

typedef enum {
  KNOB_NUMBER,  /* spin button, and a slider unless it is the seed */
  KNOB_SWITCH,  /* flags */
  KNOB_CHOICE,  /* integers with named values */
} KnobKind;

/* One row per parameter of the engine's table (hanashi-param-table.h), in its order, plus the
 * guidance scale, which belongs to the request rather than the sampler. */
typedef struct {
  const char        *key;
  const char        *label;       /* untranslated */
  const char        *hint;        /* untranslated, may be NULL */
  double             step;
  int                digits;
  const HanashiParamInfo *desc;        /* NULL for the guidance scale */
  KnobKind           kind;
  GtkAdjustment     *adjustment;  /* KNOB_NUMBER */
  GtkSwitch         *toggle;      /* KNOB_SWITCH */
  GtkDropDown       *choice;      /* KNOB_CHOICE */
  GtkWidget         *row;
  GtkWidget         *reset_button;
} Knob;

struct _HanashiParamsPanel
{
  GtkWidget parent_instance;

  GtkWidget           *scroller;
  GtkBox              *content;
  AdwPreferencesGroup *presets_group;
  AdwPreferencesGroup *sampling_group;
  AdwPreferencesGroup *output_group;
  AdwPreferencesGroup *cfg_group;
  AdwPreferencesGroup *grammar_group;
  GtkButton           *reset_all_button;
  GtkDropDown         *preset_dropdown;
  GtkButton           *preset_delete_button;
  GtkEntry            *preset_name_entry;
  GtkButton           *preset_save_button;

  Knob                *knobs;
  guint                n_knobs;
  GtkSwitch           *random_seed_switch;  /* the seed's "-1 = random", as a switch */
  GtkTextBuffer       *stop_buffer;
  GtkTextBuffer       *negative_buffer;
  GtkDropDown         *grammar_mode_dropdown;
  GtkDropDown         *shipped_dropdown;
  GtkWidget           *shipped_row;
  GtkWidget           *gbnf_scroller;
  GtkWidget           *schema_scroller;
  GtkTextBuffer       *gbnf_buffer;
  GtkTextBuffer       *schema_buffer;
  GtkLabel            *grammar_error_label;

  HanashiLensView     *lens_view;
  char                *lens_grammar_key; /* the grammar of the row the lens has or awaits */

  /* Grammar checks run on a worker thread, VALIDATE_DELAY_MS after the last change. */
  guint                validate_source;
  GCancellable        *validate_cancellable;
  char                *checked_key;   /* the grammar input the last finished check was of */
  GError              *checked_error; /* what it found; NULL = valid */
  HanashiGrammar      *checked_grammar; /* what it compiled (NULL for none): sent as it is */

  /* The presets in the drop-down, and their parameters (JSON), read once per change of
   * the list; the drop-down has one more item, "Custom", while the values match none. */
  GStrv                preset_names;
  GStrv                preset_params;
  guint                showing_preset;  /* > 0 while the panel sets the drop-down itself */

  GStrv                shipped_grammars;
  GSettings           *settings;
  HanashiParams        defaults;     /* what the reset buttons go back to */
  gboolean             defaults_mode;
  guint                updating;     /* > 0 while the panel fills its own widgets */
};

G_DEFINE_FINAL_TYPE (HanashiParamsPanel, hanashi_params_panel, GTK_TYPE_WIDGET)

#ifdef HANASHI_HAVE_REMOTE
#include "hanashi-remote.h"
#endif

enum { SIGNAL_CHANGED, SIGNAL_LENS_WANTED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void show_matching_preset (HanashiParamsPanel *self);

/* ---- stop strings: one per line, with \n \t \\ escapes --------------------------------- */

static char *
escape_stop (const char *stop)
{
  GString *out = g_string_new (NULL);
  for (const char *c = stop; *c; c++)
    switch (*c)
      {
      case '\\': g_string_append (out, "\\\\"); break;
      case '\n': g_string_append (out, "\\n"); break;
      case '\t': g_string_append (out, "\\t"); break;
      case '\r': g_string_append (out, "\\r"); break;
      default: g_string_append_c (out, *c); break;
      }
  return g_string_free (out, FALSE);
}

static char *
buffer_text (GtkTextBuffer *buffer)
{
  GtkTextIter start, end;
  gtk_text_buffer_get_bounds (buffer, &start, &end);
  return gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
}

static GStrv
stops_from_buffer (GtkTextBuffer *buffer)
{
  g_autofree char *text = buffer_text (buffer);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  for (char **line = lines; *line; line++)
    if (**line)
      {
        g_autofree char *stop = g_strcompress (*line);
        g_strv_builder_add (builder, stop);
      }
  return g_strv_builder_end (builder);
}

/* ---- widgets <-> HanashiParams ----------------------------------------------------------- */

static Knob *
find_knob (HanashiParamsPanel *self, const char *key)
{
  for (guint i = 0; i < self->n_knobs; i++)
    if (g_str_equal (self->knobs[i].key, key))
      return &self->knobs[i];
  return NULL;
}

/* What the knob's widgets say, as the number hanashi_params_set_number takes. */
static double
knob_get_value (HanashiParamsPanel *self, const Knob *knob)
{
  switch (knob->kind)
    {
    case KNOB_SWITCH:
      return gtk_switch_get_active (knob->toggle) ? 1 : 0;
    case KNOB_CHOICE:
      return gtk_drop_down_get_selected (knob->choice);
    case KNOB_NUMBER:
    default:
      if (knob->desc && knob->desc->type == HANASHI_PARAM_SEED && gtk_switch_get_active (self->random_seed_switch))
        return -1;
      return gtk_adjustment_get_value (knob->adjustment);
    }
}

static void
knob_set_value (HanashiParamsPanel *self, Knob *knob, double value)
{
  switch (knob->kind)
    {
    case KNOB_SWITCH:
      gtk_switch_set_active (knob->toggle, value != 0);
      break;
    case KNOB_CHOICE:
      gtk_drop_down_set_selected (knob->choice, (guint) MAX (value, 0));
      break;
    case KNOB_NUMBER:
      if (knob->desc && knob->desc->type == HANASHI_PARAM_SEED)
        {
          gtk_switch_set_active (self->random_seed_switch, value < 0);
          if (value < 0)
            break;   /* keep the last fixed seed for when the switch goes off */
        }
      gtk_adjustment_set_value (knob->adjustment, value);
      break;
    }
}

static void
collect_params (HanashiParamsPanel *self, HanashiParams *params)
{
  hanashi_params_init_default (params);
  for (guint i = 0; i < self->n_knobs; i++)
    hanashi_params_set_number (params, self->knobs[i].key, knob_get_value (self, &self->knobs[i]));

  g_strfreev (params->stop);
  params->stop = stops_from_buffer (self->stop_buffer);
  g_free (params->cfg_negative);
  params->cfg_negative = buffer_text (self->negative_buffer);

  params->grammar_mode = (HanashiGrammarMode) gtk_drop_down_get_selected (self->grammar_mode_dropdown);
  guint shipped = gtk_drop_down_get_selected (self->shipped_dropdown);
  if (self->shipped_grammars && shipped < g_strv_length (self->shipped_grammars))
    {
      g_free (params->grammar_name);
      params->grammar_name = g_strdup (self->shipped_grammars[shipped]);
    }
  g_free (params->grammar);
  params->grammar = buffer_text (self->gbnf_buffer);
  g_free (params->json_schema);
  params->json_schema = buffer_text (self->schema_buffer);
  hanashi_params_clamp (params);
}

static void
update_reset_buttons (HanashiParamsPanel *self)
{
  for (guint i = 0; i < self->n_knobs; i++)
    {
      Knob *knob = &self->knobs[i];
      double def = 0;
      hanashi_params_get_number (&self->defaults, knob->key, &def);
      gtk_widget_set_sensitive (knob->reset_button, fabs (knob_get_value (self, knob) - def) > 1e-9);
    }
}

static void
update_visibility (HanashiParamsPanel *self)
{
  guint mode = gtk_drop_down_get_selected (self->grammar_mode_dropdown);
  gtk_widget_set_visible (self->shipped_row, mode == HANASHI_GRAMMAR_MODE_SHIPPED);
  gtk_widget_set_visible (self->gbnf_scroller, mode == HANASHI_GRAMMAR_MODE_CUSTOM);
  gtk_widget_set_visible (self->schema_scroller, mode == HANASHI_GRAMMAR_MODE_JSON_SCHEMA);

  /* Mirostat (its mode is the choice in its group) replaces the truncation stages; its
   * own knobs matter only while it is on. */
  gboolean mirostat = FALSE;
  for (guint i = 0; i < self->n_knobs; i++)
    if (self->knobs[i].desc && self->knobs[i].desc->group == HANASHI_PARAM_GROUP_MIROSTAT
        && self->knobs[i].kind == KNOB_CHOICE)
      mirostat = mirostat || knob_get_value (self, &self->knobs[i]) != 0;
  for (guint i = 0; i < self->n_knobs; i++)
    {
      const Knob *knob = &self->knobs[i];
      if (!knob->desc)
        continue;
      if (knob->desc->group == HANASHI_PARAM_GROUP_TRUNCATION)
        gtk_widget_set_sensitive (knob->row, !mirostat);
      else if (knob->desc->group == HANASHI_PARAM_GROUP_MIROSTAT && knob->kind != KNOB_CHOICE)
        gtk_widget_set_sensitive (knob->row, mirostat);
      else if (knob->desc->type == HANASHI_PARAM_SEED)
        gtk_widget_set_sensitive (knob->row, !gtk_switch_get_active (self->random_seed_switch));
    }
}

/* What a grammar check depends on: the mode and the one text it reads. */
static char *
grammar_key (const HanashiParams *params)
{
  switch (params->grammar_mode)
    {
    case HANASHI_GRAMMAR_MODE_SHIPPED:
      return g_strconcat ("shipped\n", params->grammar_name ? params->grammar_name : "", NULL);
    case HANASHI_GRAMMAR_MODE_CUSTOM:
      return g_strconcat ("gbnf\n", params->grammar, NULL);
    case HANASHI_GRAMMAR_MODE_JSON_SCHEMA:
      return g_strconcat ("schema\n", params->json_schema, NULL);
    case HANASHI_GRAMMAR_MODE_NONE:
    default:
      return g_strdup ("none");
    }
}

static void
show_grammar_result (HanashiParamsPanel *self, const GError *error)
{
  GtkWidget *label = GTK_WIDGET (self->grammar_error_label);
  gtk_widget_remove_css_class (label, "dim-label");
  gtk_widget_add_css_class (label, "error");
  gtk_label_set_text (self->grammar_error_label, error ? error->message : "");
  gtk_widget_set_visible (label, error != NULL);
}

static void
show_checking (HanashiParamsPanel *self)
{
  GtkWidget *label = GTK_WIDGET (self->grammar_error_label);
  gtk_widget_remove_css_class (label, "error");
  gtk_widget_add_css_class (label, "dim-label");
  gtk_label_set_text (self->grammar_error_label, _("Checking…"));
  gtk_widget_set_visible (label, TRUE);
}

/* Takes @error (NULL: valid) and @grammar (what the check compiled) as the result for
 * @key and shows it. */
static void
remember_check (HanashiParamsPanel *self, const char *key, GError *error, HanashiGrammar *grammar)
{
  g_free (self->checked_key);
  self->checked_key = g_strdup (key);
  g_clear_error (&self->checked_error);
  self->checked_error = error;
  g_clear_pointer (&self->checked_grammar, hanashi_grammar_unref);
  self->checked_grammar = grammar;
  show_grammar_result (self, error);
}

static void
stop_pending_check (HanashiParamsPanel *self)
{
  g_clear_handle_id (&self->validate_source, g_source_remove);
  if (self->validate_cancellable != NULL)
    {
      g_cancellable_cancel (self->validate_cancellable);
      g_clear_object (&self->validate_cancellable);
    }
}

typedef struct {
  HanashiParams params;
  char         *key;
} GrammarCheck;

static void
grammar_check_free (GrammarCheck *check)
{
  hanashi_params_clear (&check->params);
  g_free (check->key);
  g_free (check);
}

static void
grammar_check_thread (GTask        *task,
                      gpointer      source_object,
                      gpointer      task_data,
                      GCancellable *cancellable)
{
  GrammarCheck *check = task_data;
  GError *error = NULL;
  HanashiGrammar *compiled = NULL;
  if (hanashi_params_compile_grammar (&check->params, &compiled, &error))
    g_task_return_pointer (task, compiled, (GDestroyNotify) hanashi_grammar_unref);
  else
    g_task_return_error (task, error);
}

static void
grammar_check_done (GObject      *source,
                    GAsyncResult *result,
                    gpointer      user_data)
{
  HanashiParamsPanel *self = HANASHI_PARAMS_PANEL (source);
  GTask *task = G_TASK (result);
  GrammarCheck *check = g_task_get_task_data (task);
  GError *error = NULL;

  /* A newer change cancelled it (check_cancellable reports that first). */
  HanashiGrammar *compiled = g_task_propagate_pointer (task, &error);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      g_error_free (error);
      return;
    }
  g_clear_object (&self->validate_cancellable);
  remember_check (self, check->key, error, compiled);
}

static gboolean
start_grammar_check (gpointer data)
{
  HanashiParamsPanel *self = data;
  GrammarCheck *check = g_new0 (GrammarCheck, 1);
  g_autoptr (GTask) task = NULL;

  self->validate_source = 0;
  collect_params (self, &check->params);
  check->key = grammar_key (&check->params);
  self->validate_cancellable = g_cancellable_new ();
  task = g_task_new (self, self->validate_cancellable, grammar_check_done, NULL);
  g_task_set_source_tag (task, start_grammar_check);
  g_task_set_task_data (task, check, (GDestroyNotify) grammar_check_free);
  g_task_run_in_thread (task, grammar_check_thread);
  return G_SOURCE_REMOVE;
}

/* The panel says "Checking…" until the check of what is there now has finished; a result
 * already known for the same text is shown at once. */
static void
validate_grammar (HanashiParamsPanel *self)
{
  g_auto (HanashiParams) params;
  g_autofree char *key = NULL;

  collect_params (self, &params);
  key = grammar_key (&params);
  stop_pending_check (self);
  if (g_strcmp0 (key, self->checked_key) == 0)
    {
      show_grammar_result (self, self->checked_error);
      return;
    }
  if (params.grammar_mode == HANASHI_GRAMMAR_MODE_NONE)
    {
      remember_check (self, key, NULL, NULL);
      return;
    }
  show_checking (self);
  self->validate_source = g_timeout_add (VALIDATE_DELAY_MS, start_grammar_check, self);
}

static void
set_buffer_text (GtkTextBuffer *buffer, const char *text)
{
  g_autofree char *current = buffer_text (buffer);
  if (g_strcmp0 (current, text) != 0)
    gtk_text_buffer_set_text (buffer, text, -1);
}

static void
fill_widgets (HanashiParamsPanel *self, const HanashiParams *params)
{
  self->updating++;
  for (guint i = 0; i < self->n_knobs; i++)
    {
      double value = 0;
      hanashi_params_get_number (params, self->knobs[i].key, &value);
      knob_set_value (self, &self->knobs[i], value);
    }

  GString *stops = g_string_new (NULL);
  for (char **s = params->stop; s && *s; s++)
    {
      g_autofree char *escaped = escape_stop (*s);
      if (stops->len)
        g_string_append_c (stops, '\n');
      g_string_append (stops, escaped);
    }
  g_autofree char *stop_text = g_string_free (stops, FALSE);
  set_buffer_text (self->stop_buffer, stop_text);
  set_buffer_text (self->negative_buffer, params->cfg_negative);

  for (guint i = 0; self->shipped_grammars && self->shipped_grammars[i]; i++)
    if (g_str_equal (self->shipped_grammars[i], params->grammar_name))
      gtk_drop_down_set_selected (self->shipped_dropdown, i);
  set_buffer_text (self->gbnf_buffer, params->grammar);
  set_buffer_text (self->schema_buffer, params->json_schema);
  gtk_drop_down_set_selected (self->grammar_mode_dropdown, params->grammar_mode);
  self->updating--;

  update_visibility (self);
  update_reset_buttons (self);
  validate_grammar (self);
  show_matching_preset (self);
}

/* ---- the lens ------------------------------------------------------------------------------ */

/* Hands the lens the settings as a request would carry them; asks for a new row when the
 * grammar changed (its allowed set comes from the engine), never for a slider. */
static void
update_lens (HanashiParamsPanel *self)
{
  if (self->lens_view == NULL || !hanashi_lens_view_get_open (self->lens_view))
    return;
  g_auto (HanashiParams) params;
  collect_params (self, &params);
  g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new (NULL);
  hanashi_params_apply_checked_to_request (&params, NULL, req);
  HnSamplerParams sp;
  hanashi_generate_request_get_sampling (req, &sp);
  hanashi_lens_view_set_params (self->lens_view, &sp, params.grammar_mode != HANASHI_GRAMMAR_MODE_NONE);
  g_autofree char *key = grammar_key (&params);
  if (g_strcmp0 (key, self->lens_grammar_key) != 0)
    {
      g_free (self->lens_grammar_key);
      self->lens_grammar_key = g_steal_pointer (&key);
      g_signal_emit (self, signals[SIGNAL_LENS_WANTED], 0);
    }
}

static void
on_lens_open (HanashiParamsPanel *self)
{
  if (!hanashi_lens_view_get_open (self->lens_view))
    return;
  /* opened: whatever row there was may be stale */
  g_clear_pointer (&self->lens_grammar_key, g_free);
  update_lens (self);
}

HanashiLensView *
hanashi_params_panel_get_lens (HanashiParamsPanel *self)
{
  g_return_val_if_fail (HANASHI_IS_PARAMS_PANEL (self), NULL);
  return self->lens_view;
}

static void
on_user_changed (HanashiParamsPanel *self)
{
  if (self->updating)
    return;
  update_visibility (self);
  update_reset_buttons (self);
  validate_grammar (self);
  show_matching_preset (self);
  if (self->defaults_mode && self->settings)
    {
      g_autofree char *json = hanashi_params_panel_dup_params_json (self);
      /* The defaults mode edits what "reset" returns to in conversations, not here. */
      g_settings_set_string (self->settings, "default-params", json);
    }
  update_lens (self);
  g_signal_emit (self, signals[SIGNAL_CHANGED], 0);
}

/* ---- rows --------------------------------------------------------------------------------- */

static void
on_knob_reset (GtkButton *button, HanashiParamsPanel *self)
{
  Knob *knob = g_object_get_data (G_OBJECT (button), "knob");
  double def = 0;
  hanashi_params_get_number (&self->defaults, knob->key, &def);
  knob_set_value (self, knob, def);
}

static GtkWidget *
make_row (GtkWidget *child)
{
  /* An AdwPreferencesRow, not a plain GtkListBoxRow: only those go into the group's
   * boxed list. */
  GtkWidget *row = adw_preferences_row_new ();
  gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (row), FALSE);
  gtk_list_box_row_set_selectable (GTK_LIST_BOX_ROW (row), FALSE);
  gtk_widget_set_margin_start (child, 12);
  gtk_widget_set_margin_end (child, 12);
  gtk_widget_set_margin_top (child, 6);
  gtk_widget_set_margin_bottom (child, 6);
  gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (row), child);
  return row;
}

static GtkWidget *
make_label_box (const char *label, const char *hint, GtkWidget *mnemonic_widget)
{
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 2);
  gtk_widget_set_hexpand (box, TRUE);
  gtk_widget_set_valign (box, GTK_ALIGN_CENTER);
  GtkWidget *title = gtk_label_new (label);
  gtk_label_set_xalign (GTK_LABEL (title), 0);
  gtk_label_set_wrap (GTK_LABEL (title), TRUE);
  if (mnemonic_widget)
    gtk_label_set_mnemonic_widget (GTK_LABEL (title), mnemonic_widget);
  gtk_box_append (GTK_BOX (box), title);
  if (hint)
    {
      GtkWidget *sub = gtk_label_new (hint);
      gtk_label_set_xalign (GTK_LABEL (sub), 0);
      gtk_label_set_wrap (GTK_LABEL (sub), TRUE);
      gtk_widget_add_css_class (sub, "caption");
      gtk_widget_add_css_class (sub, "dim-label");
      gtk_box_append (GTK_BOX (box), sub);
    }
  return box;
}

static GtkDropDown *make_dropdown (const char *const *items);

/* The wheel over a slider or a spin button scrolls the panel, as it does everywhere else
 * in it: GtkRange and GtkSpinButton would change their value instead, and a user scrolling
 * down the panel changed the sliders they passed (Top-P from 0.95 to 0 unnoticed).  This
 * runs in the capture phase, before the control's own handler, moves the nearest scrolled
 * window around the control that can move that way (the panel's own, or the Preferences
 * page the panel sits in at its full height) and stops the event there.  Values change by
 * drag, click and keys. */
static gboolean
on_control_scroll (GtkEventControllerScroll *controller,
                   double                    dx,
                   double                    dy,
                   gpointer                  user_data)
{
  (void) dx;
  (void) user_data;
  GtkWidget *control = gtk_event_controller_get_widget (GTK_EVENT_CONTROLLER (controller));
  for (GtkWidget *w = gtk_widget_get_parent (control); w != NULL; w = gtk_widget_get_parent (w))
    {
      if (!GTK_IS_SCROLLED_WINDOW (w))
        continue;
      GtkAdjustment *vadjustment = gtk_scrolled_window_get_vadjustment (GTK_SCROLLED_WINDOW (w));
      double value = gtk_adjustment_get_value (vadjustment);
      double page = gtk_adjustment_get_page_size (vadjustment);
      double top = gtk_adjustment_get_upper (vadjustment) - page;
      if (!((dy > 0 && value < top) || (dy < 0 && value > gtk_adjustment_get_lower (vadjustment))))
        continue;
      /* A wheel notch moves as far as GtkScrolledWindow moves for one; smooth (touchpad)
       * scrolling comes in pixels already. */
      double step = gtk_event_controller_scroll_get_unit (controller) == GDK_SCROLL_UNIT_WHEEL
                      ? pow (MAX (page, 1.0), 2.0 / 3.0) : 1.0;
      gtk_adjustment_set_value (vadjustment, value + dy * step);
      break;
    }
  return GDK_EVENT_STOP;
}

static void
scroll_panel_not_value (GtkWidget *control)
{
  GtkEventController *scroll = gtk_event_controller_scroll_new (GTK_EVENT_CONTROLLER_SCROLL_BOTH_AXES);
  gtk_event_controller_set_propagation_phase (scroll, GTK_PHASE_CAPTURE);
  gtk_event_controller_set_name (scroll, "hanashi-scroll-panel");
  g_signal_connect (scroll, "scroll", G_CALLBACK (on_control_scroll), NULL);
  gtk_widget_add_controller (control, scroll);
}

/* The row for one knob: label and hint, its control, a reset button; numbers get a slider
 * under them (except the seed, where a slider means nothing). */
static void
build_knob (HanashiParamsPanel *self, Knob *knob)
{
  const char *label = _(knob->label);
  GtkWidget *control;
  if (knob->desc && knob->desc->type == HANASHI_PARAM_BOOL)
    {
      knob->kind = KNOB_SWITCH;
      knob->toggle = GTK_SWITCH (gtk_switch_new ());
      control = GTK_WIDGET (knob->toggle);
      g_signal_connect_swapped (knob->toggle, "notify::active", G_CALLBACK (on_user_changed), self);
    }
  else if (knob->desc && knob->desc->choices)
    {
      knob->kind = KNOB_CHOICE;
      g_autoptr (GStrvBuilder) names = g_strv_builder_new ();
      for (const char *const *c = knob->desc->choices; *c; c++)
        g_strv_builder_add (names, _(*c));
      g_auto (GStrv) items = g_strv_builder_end (names);
      knob->choice = make_dropdown ((const char *const *) items);
      control = GTK_WIDGET (knob->choice);
      g_signal_connect_swapped (knob->choice, "notify::selected", G_CALLBACK (on_user_changed), self);
    }
  else
    {
      double min = 0, max = 1, def = 0;
      hanashi_params_get_range (knob->key, &min, &max, &def);
      gboolean seed = knob->desc && knob->desc->type == HANASHI_PARAM_SEED;
      if (seed)
        min = 0;   /* −1 (random) is the switch */
      knob->kind = KNOB_NUMBER;
      knob->adjustment = g_object_ref_sink (gtk_adjustment_new (CLAMP (def, min, max), min, max,
                                                                knob->step, knob->step * 10, 0));
      control = gtk_spin_button_new (knob->adjustment, knob->step, (guint) knob->digits);
      g_autofree char *spin_name = g_strconcat ("spin-", knob->key, NULL);
      gtk_widget_set_name (control, spin_name);
      gtk_spin_button_set_numeric (GTK_SPIN_BUTTON (control), TRUE);
      gtk_editable_set_width_chars (GTK_EDITABLE (control), seed ? 10 : 6);
      scroll_panel_not_value (control);
      g_signal_connect_swapped (knob->adjustment, "value-changed", G_CALLBACK (on_user_changed), self);
    }
  if (knob->kind != KNOB_NUMBER)
    gtk_widget_set_name (control, knob->key);
  gtk_widget_set_valign (control, GTK_ALIGN_CENTER);
  gtk_accessible_update_property (GTK_ACCESSIBLE (control), GTK_ACCESSIBLE_PROPERTY_LABEL, label, -1);

  knob->reset_button = gtk_button_new_from_icon_name ("edit-undo-symbolic");
  gtk_widget_add_css_class (knob->reset_button, "flat");
  gtk_widget_set_valign (knob->reset_button, GTK_ALIGN_CENTER);
  g_autofree char *reset_tip = g_strdup_printf (_("Reset %s to Default"), label);
  gtk_widget_set_tooltip_text (knob->reset_button, reset_tip);
  gtk_accessible_update_property (GTK_ACCESSIBLE (knob->reset_button), GTK_ACCESSIBLE_PROPERTY_LABEL, reset_tip, -1);
  g_object_set_data (G_OBJECT (knob->reset_button), "knob", knob);
  g_signal_connect (knob->reset_button, "clicked", G_CALLBACK (on_knob_reset), self);

  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 4);
  GtkWidget *top = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  gtk_box_append (GTK_BOX (top), make_label_box (label, knob->hint ? _(knob->hint) : NULL, NULL));
  gtk_box_append (GTK_BOX (top), control);
  gtk_box_append (GTK_BOX (top), knob->reset_button);
  gtk_box_append (GTK_BOX (box), top);

  if (knob->kind == KNOB_NUMBER && !(knob->desc && knob->desc->type == HANASHI_PARAM_SEED))
    {
      GtkWidget *scale = gtk_scale_new (GTK_ORIENTATION_HORIZONTAL, knob->adjustment);
      gtk_scale_set_digits (GTK_SCALE (scale), knob->digits);
      gtk_scale_set_draw_value (GTK_SCALE (scale), FALSE);
      gtk_widget_set_hexpand (scale, TRUE);
      g_autofree char *scale_name = g_strconcat ("scale-", knob->key, NULL);
      gtk_widget_set_name (scale, scale_name);
      scroll_panel_not_value (scale);
      gtk_accessible_update_property (GTK_ACCESSIBLE (scale), GTK_ACCESSIBLE_PROPERTY_LABEL, label, -1);
      if (g_str_equal (knob->key, "cfg_scale"))
        gtk_scale_add_mark (GTK_SCALE (scale), 1.0, GTK_POS_BOTTOM, _("Off"));
      gtk_box_append (GTK_BOX (box), scale);
    }
  knob->row = make_row (box);
}

static GtkWidget *
make_text_area (GtkTextBuffer *buffer, const char *accessible_name, int height, gboolean monospace,
                GtkWidget **view_out)
{
  GtkWidget *view = buffer && GTK_SOURCE_IS_BUFFER (buffer)
                      ? gtk_source_view_new_with_buffer (GTK_SOURCE_BUFFER (buffer))
                      : gtk_text_view_new_with_buffer (buffer);
  gtk_text_view_set_wrap_mode (GTK_TEXT_VIEW (view), GTK_WRAP_WORD_CHAR);
  gtk_text_view_set_monospace (GTK_TEXT_VIEW (view), monospace);
  gtk_text_view_set_top_margin (GTK_TEXT_VIEW (view), 6);
  gtk_text_view_set_bottom_margin (GTK_TEXT_VIEW (view), 6);
  gtk_text_view_set_left_margin (GTK_TEXT_VIEW (view), 6);
  gtk_text_view_set_right_margin (GTK_TEXT_VIEW (view), 6);
  gtk_accessible_update_property (GTK_ACCESSIBLE (view), GTK_ACCESSIBLE_PROPERTY_LABEL, accessible_name, -1);
  GtkWidget *scroller = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (scroller), GTK_POLICY_NEVER, GTK_POLICY_AUTOMATIC);
  gtk_scrolled_window_set_min_content_height (GTK_SCROLLED_WINDOW (scroller), height);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (scroller), view);
  gtk_widget_add_css_class (scroller, "card");
  gtk_widget_set_overflow (scroller, GTK_OVERFLOW_HIDDEN);
  if (view_out)
    *view_out = view;
  return scroller;
}

static GtkWidget *
labelled_box (const char *label, const char *hint, GtkWidget *child)
{
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  gtk_box_append (GTK_BOX (box), make_label_box (label, hint, NULL));
  gtk_box_append (GTK_BOX (box), child);
  return make_row (box);
}

/* What the shipped grammars (data/grammars, by file name) are called in the panel.  A
 * grammar file without a name here (one a packager added) shows its file name. */
static const struct {
  const char *file_name;
  const char *title;   /* untranslated */
} grammar_titles[] = {
  { "arithmetic", N_("Arithmetic Expression") },
  { "json", N_("Any JSON Value") },
  { "json-object", N_("JSON Object") },
  { "list", N_("Bulleted List") },
  /* Translators: a grammar that lets the model answer only with the English word "yes" or "no" */
  { "yes-no", N_("Yes or No") },
};

static const char *
grammar_title (const char *file_name)
{
  for (gsize i = 0; i < G_N_ELEMENTS (grammar_titles); i++)
    if (g_str_equal (grammar_titles[i].file_name, file_name))
      return _(grammar_titles[i].title);
  return file_name;
}

static GtkDropDown *
make_dropdown (const char *const *items)
{
  return GTK_DROP_DOWN (gtk_drop_down_new_from_strings (items));
}

static void
build_rows (HanashiParamsPanel *self)
{
  /* One knob per row of the engine's table, then the guidance scale. */
  guint n = 0;
  const HanashiParamInfo *table = hanashi_param_table (&n);
  self->n_knobs = n + 1;
  self->knobs = g_new0 (Knob, self->n_knobs);
  for (guint i = 0; i < n; i++)
    self->knobs[i] = (Knob) { .key = table[i].key, .label = table[i].label, .hint = table[i].hint,
                              .step = table[i].step, .digits = table[i].digits, .desc = &table[i] };
  self->knobs[n] = (Knob) { .key = "cfg_scale", .label = N_("Guidance Scale"), .step = 0.05, .digits = 2 };

  /* The seed's random switch exists before any knob reads it. */
  self->random_seed_switch = GTK_SWITCH (gtk_switch_new ());
  gtk_widget_set_name (GTK_WIDGET (self->random_seed_switch), "random-seed");
  gtk_widget_set_valign (GTK_WIDGET (self->random_seed_switch), GTK_ALIGN_CENTER);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->random_seed_switch), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Random Seed"), -1);
  g_signal_connect_swapped (self->random_seed_switch, "notify::active", G_CALLBACK (on_user_changed), self);

  /* Sampling: everything but the output group, in table order; output: seed (random switch
   * + fixed value), maximum tokens, then the stop strings. */
  for (guint i = 0; i < self->n_knobs; i++)
    {
      Knob *knob = &self->knobs[i];
      build_knob (self, knob);
      if (!knob->desc)
        continue;
      if (knob->desc->group != HANASHI_PARAM_GROUP_OUTPUT)
        {
          adw_preferences_group_add (self->sampling_group, knob->row);
          continue;
        }
      if (knob->desc->type == HANASHI_PARAM_SEED)
        {
          GtkWidget *seed_box = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
          gtk_box_append (GTK_BOX (seed_box), make_label_box (_("Random Seed"), _("Off repeats the same answer for the same prompt"), NULL));
          gtk_box_append (GTK_BOX (seed_box), GTK_WIDGET (self->random_seed_switch));
          adw_preferences_group_add (self->output_group, make_row (seed_box));
        }
      adw_preferences_group_add (self->output_group, knob->row);
    }

  self->stop_buffer = gtk_text_buffer_new (NULL);
  GtkWidget *stop_view = NULL;
  GtkWidget *stop_area = make_text_area (self->stop_buffer, _("Stop Strings"), 60, TRUE, &stop_view);
  gtk_widget_set_name (stop_view, "stop-strings");
  adw_preferences_group_add (self->output_group,
                             labelled_box (_("Stop Strings"), _("One per line; \\n is a line break"), stop_area));
  g_signal_connect_swapped (self->stop_buffer, "changed", G_CALLBACK (on_user_changed), self);

  /* CFG */
  self->negative_buffer = gtk_text_buffer_new (NULL);
  GtkWidget *negative_view = NULL;
  GtkWidget *negative_area = make_text_area (self->negative_buffer, _("Negative Prompt"), 60, FALSE, &negative_view);
  gtk_widget_set_name (negative_view, "negative-prompt");
  adw_preferences_group_add (self->cfg_group, labelled_box (_("Negative Prompt"), NULL, negative_area));
  g_signal_connect_swapped (self->negative_buffer, "changed", G_CALLBACK (on_user_changed), self);
  adw_preferences_group_add (self->cfg_group, find_knob (self, "cfg_scale")->row);

  /* Grammar */
  const char *grammar_modes[] = { _("None"), _("Built-in"), _("Custom GBNF"), _("JSON Schema"), NULL };
  self->grammar_mode_dropdown = make_dropdown (grammar_modes);
  gtk_widget_set_name (GTK_WIDGET (self->grammar_mode_dropdown), "grammar-mode");
  gtk_widget_set_valign (GTK_WIDGET (self->grammar_mode_dropdown), GTK_ALIGN_CENTER);
  GtkWidget *mode_box = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  gtk_box_append (GTK_BOX (mode_box), make_label_box (_("Constrain With"), NULL, NULL));
  gtk_box_append (GTK_BOX (mode_box), GTK_WIDGET (self->grammar_mode_dropdown));
  adw_preferences_group_add (self->grammar_group, make_row (mode_box));
  g_signal_connect_swapped (self->grammar_mode_dropdown, "notify::selected", G_CALLBACK (on_user_changed), self);

  /* The drop-down shows names; the params keep the file name, which the engine loads. */
  self->shipped_grammars = hanashi_params_list_shipped_grammars ();
  g_autoptr (GStrvBuilder) titles = g_strv_builder_new ();
  for (char **name = self->shipped_grammars; name && *name; name++)
    g_strv_builder_add (titles, grammar_title (*name));
  g_auto (GStrv) grammar_names = g_strv_builder_end (titles);
  self->shipped_dropdown = make_dropdown ((const char *const *) grammar_names);
  gtk_widget_set_name (GTK_WIDGET (self->shipped_dropdown), "shipped-grammar");
  gtk_widget_set_valign (GTK_WIDGET (self->shipped_dropdown), GTK_ALIGN_CENTER);
  GtkWidget *shipped_box = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  gtk_box_append (GTK_BOX (shipped_box), make_label_box (_("Grammar"), NULL, NULL));
  gtk_box_append (GTK_BOX (shipped_box), GTK_WIDGET (self->shipped_dropdown));
  self->shipped_row = make_row (shipped_box);
  adw_preferences_group_add (self->grammar_group, self->shipped_row);
  g_signal_connect_swapped (self->shipped_dropdown, "notify::selected", G_CALLBACK (on_user_changed), self);

  GtkSourceLanguageManager *languages = gtk_source_language_manager_get_default ();
  self->gbnf_buffer = GTK_TEXT_BUFFER (gtk_source_buffer_new (NULL));
  GtkWidget *gbnf_view = NULL;
  self->gbnf_scroller = make_text_area (self->gbnf_buffer, _("Custom GBNF Grammar"), 160, TRUE, &gbnf_view);
  gtk_widget_set_name (gbnf_view, "gbnf-editor");
  gtk_source_view_set_show_line_numbers (GTK_SOURCE_VIEW (gbnf_view), TRUE);
  adw_preferences_group_add (self->grammar_group, self->gbnf_scroller);
  g_signal_connect_swapped (self->gbnf_buffer, "changed", G_CALLBACK (on_user_changed), self);

  self->schema_buffer = GTK_TEXT_BUFFER (gtk_source_buffer_new (NULL));
  /* Highlighting is a nicety: the language files may be missing (tests, minimal installs). */
  GtkSourceLanguage *json_language = gtk_source_language_manager_get_language (languages, "json");
  if (json_language)
    gtk_source_buffer_set_language (GTK_SOURCE_BUFFER (self->schema_buffer), json_language);
  GtkWidget *schema_view = NULL;
  self->schema_scroller = make_text_area (self->schema_buffer, _("JSON Schema"), 160, TRUE, &schema_view);
  gtk_widget_set_name (schema_view, "schema-editor");
  gtk_source_view_set_show_line_numbers (GTK_SOURCE_VIEW (schema_view), TRUE);
  adw_preferences_group_add (self->grammar_group, self->schema_scroller);
  g_signal_connect_swapped (self->schema_buffer, "changed", G_CALLBACK (on_user_changed), self);

  self->grammar_error_label = GTK_LABEL (gtk_label_new (NULL));
  gtk_widget_set_name (GTK_WIDGET (self->grammar_error_label), "grammar-error");
  gtk_label_set_wrap (self->grammar_error_label, TRUE);
  gtk_label_set_xalign (self->grammar_error_label, 0);
  gtk_label_set_selectable (self->grammar_error_label, TRUE);
  gtk_widget_add_css_class (GTK_WIDGET (self->grammar_error_label), "error");
  gtk_widget_set_margin_top (GTK_WIDGET (self->grammar_error_label), 6);
  gtk_widget_set_visible (GTK_WIDGET (self->grammar_error_label), FALSE);
  adw_preferences_group_add (self->grammar_group, GTK_WIDGET (self->grammar_error_label));
}

/* GtkSourceView does not follow the dark style by itself. */
static void
update_editor_scheme (HanashiParamsPanel *self)
{
  gboolean dark = adw_style_manager_get_dark (adw_style_manager_get_default ());
  GtkSourceStyleScheme *scheme = gtk_source_style_scheme_manager_get_scheme (
    gtk_source_style_scheme_manager_get_default (), dark ? "Adwaita-dark" : "Adwaita");
  if (!scheme)
    return;
  gtk_source_buffer_set_style_scheme (GTK_SOURCE_BUFFER (self->gbnf_buffer), scheme);
  gtk_source_buffer_set_style_scheme (GTK_SOURCE_BUFFER (self->schema_buffer), scheme);
}

/* ---- presets ------------------------------------------------------------------------------ */

/* Whether two sets of parameters are the same to the engine: numbers to within rounding
 * (spin buttons keep a few digits), texts exactly. */
static gboolean
same_params (HanashiParamsPanel *self, const HanashiParams *a, const HanashiParams *b)
{
  for (guint i = 0; i < self->n_knobs; i++)
    {
      double x = 0, y = 0;
      hanashi_params_get_number (a, self->knobs[i].key, &x);
      hanashi_params_get_number (b, self->knobs[i].key, &y);
      if (fabs (x - y) > 1e-6 * MAX (1.0, fabs (x)))
        return FALSE;
    }
  return g_strv_equal ((const char *const *) a->stop, (const char *const *) b->stop)
         && g_strcmp0 (a->cfg_negative, b->cfg_negative) == 0
         && a->grammar_mode == b->grammar_mode
         && g_strcmp0 (a->grammar_name, b->grammar_name) == 0
         && g_strcmp0 (a->grammar, b->grammar) == 0
         && g_strcmp0 (a->json_schema, b->json_schema) == 0;
}

/* A preset matches when applying it would change nothing: it may set only some values
 * (the shipped ones leave seed, length, stop strings and grammar alone). */
static gboolean
preset_matches (HanashiParamsPanel *self, guint index, const HanashiParams *current)
{
  g_auto (HanashiParams) applied;
  hanashi_params_copy (&applied, current);
  return self->preset_params[index] != NULL
         && hanashi_params_update_from_json (&applied, self->preset_params[index], NULL)
         && same_params (self, &applied, current);
}

static void
update_preset_delete (HanashiParamsPanel *self)
{
  /* Only the user's own presets can be deleted. */
  guint selected = gtk_drop_down_get_selected (self->preset_dropdown);
  guint n = self->preset_names ? g_strv_length (self->preset_names) : 0;
  gtk_widget_set_sensitive (GTK_WIDGET (self->preset_delete_button),
                            selected >= HANASHI_N_SHIPPED_PRESETS && selected < n);
}

/* The drop-down names the preset the values are now (the one chosen last when several
 * are alike), or says "Custom" when they are none of them, and names it again when the
 * values come back to it. */
static void
show_matching_preset (HanashiParamsPanel *self)
{
  if (self->preset_names == NULL || self->showing_preset)
    return;
  g_auto (HanashiParams) current;
  collect_params (self, &current);
  guint n = g_strv_length (self->preset_names);
  guint selected = gtk_drop_down_get_selected (self->preset_dropdown);
  guint match = GTK_INVALID_LIST_POSITION;
  if (selected < n && preset_matches (self, selected, &current))
    match = selected;
  for (guint i = 0; i < n && match == GTK_INVALID_LIST_POSITION; i++)
    if (preset_matches (self, i, &current))
      match = i;

  GtkStringList *model = GTK_STRING_LIST (gtk_drop_down_get_model (self->preset_dropdown));
  gboolean has_custom = g_list_model_get_n_items (G_LIST_MODEL (model)) > n;
  self->showing_preset++;
  if (match == GTK_INVALID_LIST_POSITION)
    {
      if (!has_custom)
        /* Translators: the preset menu when the parameters match none of the presets */
        gtk_string_list_append (model, _("Custom"));
      gtk_drop_down_set_selected (self->preset_dropdown, n);
    }
  else
    {
      gtk_drop_down_set_selected (self->preset_dropdown, match);
      if (has_custom)
        gtk_string_list_remove (model, n);
    }
  self->showing_preset--;
  update_preset_delete (self);
}

static void on_preset_selected (HanashiParamsPanel *self);

static void
reload_presets (HanashiParamsPanel *self, const char *select)
{
  g_clear_pointer (&self->preset_names, g_strfreev);
  g_clear_pointer (&self->preset_params, g_strfreev);
  self->preset_names = hanashi_presets_list ();
  guint n = g_strv_length (self->preset_names);
  self->preset_params = g_new0 (char *, n + 1);
  for (guint i = 0; i < n; i++)
    self->preset_params[i] = hanashi_presets_lookup (self->preset_names[i]);

  self->showing_preset++;
  GtkStringList *model = gtk_string_list_new ((const char *const *) self->preset_names);
  gtk_drop_down_set_model (self->preset_dropdown, G_LIST_MODEL (model));
  g_object_unref (model);
  gtk_drop_down_set_selected (self->preset_dropdown, GTK_INVALID_LIST_POSITION);
  for (guint i = 0; select && i < n; i++)
    if (g_str_equal (self->preset_names[i], select))
      gtk_drop_down_set_selected (self->preset_dropdown, i);
  self->showing_preset--;
  show_matching_preset (self);
}

/* Choosing a preset applies it: the drop-down always names what the values are. */
static void
apply_preset (HanashiParamsPanel *self, guint index)
{
  g_auto (HanashiParams) params;
  collect_params (self, &params);
  if (self->preset_params[index] && hanashi_params_update_from_json (&params, self->preset_params[index], NULL))
    {
      fill_widgets (self, &params);
      on_user_changed (self);
    }
}

static void
on_preset_selected (HanashiParamsPanel *self)
{
  guint selected = gtk_drop_down_get_selected (self->preset_dropdown);
  guint n = self->preset_names ? g_strv_length (self->preset_names) : 0;
  if (!self->showing_preset && selected < n)
    apply_preset (self, selected);
  /* "Custom" chosen by hand changes nothing; the values stay as they are. */
  update_preset_delete (self);
}

static void
on_preset_delete (HanashiParamsPanel *self)
{
  guint selected = gtk_drop_down_get_selected (self->preset_dropdown);
  if (selected < HANASHI_N_SHIPPED_PRESETS || selected >= g_strv_length (self->preset_names))
    return;
  g_autoptr (GError) error = NULL;
  if (!hanashi_presets_delete (self->preset_names[selected], &error))
    g_message ("Could not delete the preset: %s", error->message);
  reload_presets (self, NULL);
}

static void
on_preset_save (HanashiParamsPanel *self)
{
  const char *name = gtk_editable_get_text (GTK_EDITABLE (self->preset_name_entry));
  g_autofree char *json = hanashi_params_panel_dup_params_json (self);
  g_autoptr (GError) error = NULL;
  if (!hanashi_presets_save (name, json, &error))
    {
      gtk_widget_add_css_class (GTK_WIDGET (self->preset_name_entry), "error");
      gtk_widget_set_tooltip_text (GTK_WIDGET (self->preset_name_entry), error->message);
      return;
    }
  g_autofree char *saved = g_strstrip (g_strdup (name));
  reload_presets (self, saved);
  gtk_editable_set_text (GTK_EDITABLE (self->preset_name_entry), "");
}

static void
on_preset_name_changed (HanashiParamsPanel *self)
{
  g_autofree char *name = g_strstrip (g_strdup (gtk_editable_get_text (GTK_EDITABLE (self->preset_name_entry))));
  gtk_widget_remove_css_class (GTK_WIDGET (self->preset_name_entry), "error");
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->preset_name_entry), NULL);
  gtk_widget_set_sensitive (GTK_WIDGET (self->preset_save_button), *name != '\0');
}

static void
on_reset_all (HanashiParamsPanel *self)
{
  fill_widgets (self, &self->defaults);
  on_user_changed (self);
}

/* ---- GObject ------------------------------------------------------------------------------ */

void
hanashi_params_panel_set_remote (HanashiParamsPanel *self, gboolean remote, gboolean is_hanashi)
{
  g_return_if_fail (HANASHI_IS_PARAMS_PANEL (self));
  const char *why = _("Only Hanashi servers take this parameter: the model in use is on another OpenAI-compatible server.");
  gboolean others = !remote || is_hanashi;
  for (guint i = 0; i < self->n_knobs; i++)
    {
      Knob *knob = &self->knobs[i];
#ifdef HANASHI_HAVE_REMOTE
      gboolean available = !remote || hanashi_remote_param_unavailable_reason (knob->key, is_hanashi) == NULL;
#else
      gboolean available = TRUE;
#endif
      gtk_widget_set_sensitive (knob->row, available);
      gtk_widget_set_tooltip_text (knob->row, available ? NULL : why);
    }
  /* Guidance is Hanashi's own; of the grammars, a JSON Schema goes as response_format. */
  gtk_widget_set_sensitive (GTK_WIDGET (self->cfg_group), others);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->cfg_group), others ? NULL : why);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->grammar_group), others ? NULL
                               : _("This server takes a JSON Schema, but not a GBNF grammar: only Hanashi servers do."));
}

static void
hanashi_params_panel_dispose (GObject *object)
{
  HanashiParamsPanel *self = HANASHI_PARAMS_PANEL (object);
  stop_pending_check (self);
  gtk_widget_dispose_template (GTK_WIDGET (self), HANASHI_TYPE_PARAMS_PANEL);
  g_clear_object (&self->stop_buffer);
  g_clear_object (&self->negative_buffer);
  g_clear_object (&self->gbnf_buffer);
  g_clear_object (&self->schema_buffer);
  for (guint i = 0; i < self->n_knobs; i++)
    g_clear_object (&self->knobs[i].adjustment);
  G_OBJECT_CLASS (hanashi_params_panel_parent_class)->dispose (object);
}

static void
hanashi_params_panel_finalize (GObject *object)
{
  HanashiParamsPanel *self = HANASHI_PARAMS_PANEL (object);
  g_clear_pointer (&self->shipped_grammars, g_strfreev);
  g_clear_pointer (&self->preset_names, g_strfreev);
  g_clear_pointer (&self->preset_params, g_strfreev);
  g_clear_pointer (&self->knobs, g_free);
  g_clear_pointer (&self->checked_key, g_free);
  g_clear_pointer (&self->lens_grammar_key, g_free);
  g_clear_error (&self->checked_error);
  g_clear_pointer (&self->checked_grammar, hanashi_grammar_unref);
  g_clear_object (&self->settings);
  hanashi_params_clear (&self->defaults);
  G_OBJECT_CLASS (hanashi_params_panel_parent_class)->finalize (object);
}

static void
hanashi_params_panel_class_init (HanashiParamsPanelClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hanashi_params_panel_dispose;
  object_class->finalize = hanashi_params_panel_finalize;

  signals[SIGNAL_CHANGED] = g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                          0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  /* The lens was opened, or the grammar changed while it is open: its owner should fetch
   * the next token's row again (hanashi_lens_view_set_logits). */
  signals[SIGNAL_LENS_WANTED] = g_signal_new ("lens-wanted", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                              0, NULL, NULL, NULL, G_TYPE_NONE, 0);

  gtk_source_init ();
  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hanashi/Hanashi/ui/hanashi-params-panel.ui");
  gtk_widget_class_bind_template_child (widget_class, HanashiParamsPanel, scroller);
  gtk_widget_class_bind_template_child (widget_class, HanashiParamsPanel, content);
  gtk_widget_class_bind_template_child (widget_class, HanashiParamsPanel, presets_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiParamsPanel, sampling_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiParamsPanel, output_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiParamsPanel, cfg_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiParamsPanel, grammar_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiParamsPanel, reset_all_button);
  gtk_widget_class_bind_template_child (widget_class, HanashiParamsPanel, preset_dropdown);
  gtk_widget_class_bind_template_child (widget_class, HanashiParamsPanel, preset_delete_button);
  gtk_widget_class_bind_template_child (widget_class, HanashiParamsPanel, preset_name_entry);
  gtk_widget_class_bind_template_child (widget_class, HanashiParamsPanel, preset_save_button);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "paramspanel");
}

static void
hanashi_params_panel_init (HanashiParamsPanel *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));

  GSettingsSchema *schema = g_settings_schema_source_lookup (g_settings_schema_source_get_default (), APP_ID, TRUE);
  if (schema && g_settings_schema_has_key (schema, "default-params"))
    self->settings = g_settings_new (APP_ID);
  g_clear_pointer (&schema, g_settings_schema_unref);
  hanashi_params_load_defaults (&self->defaults, self->settings);

  build_rows (self);
  /* the lens, collapsed, between the presets and the sliders it follows */
  self->lens_view = hanashi_lens_view_new ();
  gtk_box_insert_child_after (self->content, GTK_WIDGET (self->lens_view), GTK_WIDGET (self->presets_group));
  g_signal_connect_swapped (self->lens_view, "notify::open", G_CALLBACK (on_lens_open), self);
  update_editor_scheme (self);
  g_signal_connect_object (adw_style_manager_get_default (), "notify::dark",
                           G_CALLBACK (update_editor_scheme), self, G_CONNECT_SWAPPED);
  reload_presets (self, NULL);
  g_signal_connect_swapped (self->reset_all_button, "clicked", G_CALLBACK (on_reset_all), self);
  g_signal_connect_swapped (self->preset_save_button, "clicked", G_CALLBACK (on_preset_save), self);
  g_signal_connect_swapped (self->preset_delete_button, "clicked", G_CALLBACK (on_preset_delete), self);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->preset_delete_button), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Delete Preset"), -1);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->preset_dropdown), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Preset"), -1);
  g_signal_connect_swapped (self->preset_dropdown, "notify::selected", G_CALLBACK (on_preset_selected), self);
  g_signal_connect_swapped (self->preset_name_entry, "activate", G_CALLBACK (on_preset_save), self);
  g_signal_connect_swapped (self->preset_name_entry, "changed", G_CALLBACK (on_preset_name_changed), self);

  fill_widgets (self, &self->defaults);
}

HanashiParamsPanel *
hanashi_params_panel_new (void)
{
  return g_object_new (HANASHI_TYPE_PARAMS_PANEL, NULL);
}

HanashiParamsPanel *
hanashi_params_panel_new_for_defaults (void)
{
  HanashiParamsPanel *self = hanashi_params_panel_new ();
  self->defaults_mode = TRUE;
  /* the Preferences edit defaults for every conversation: no next token to look at */
  gtk_widget_set_visible (GTK_WIDGET (self->lens_view), FALSE);
  /* Reset in the Preferences goes back to the engine's own defaults. */
  hanashi_params_clear (&self->defaults);
  hanashi_params_init_default (&self->defaults);
  update_reset_buttons (self);
  return self;
}

void
hanashi_params_panel_set_params_json (HanashiParamsPanel *self, const char *json)
{
  g_return_if_fail (HANASHI_IS_PARAMS_PANEL (self));

  /* Conversations follow the current defaults for anything they never set; the
   * defaults themselves reset to the engine's. */
  hanashi_params_clear (&self->defaults);
  if (self->defaults_mode)
    hanashi_params_init_default (&self->defaults);
  else
    hanashi_params_load_defaults (&self->defaults, self->settings);

  g_auto (HanashiParams) params;
  if (self->defaults_mode)
    hanashi_params_load_defaults (&params, self->settings);
  else
    hanashi_params_copy (&params, &self->defaults);
  g_autoptr (GError) error = NULL;
  if (json && !hanashi_params_update_from_json (&params, json, &error))
    g_message ("Ignoring unreadable conversation parameters: %s", error->message);
  fill_widgets (self, &params);
  update_lens (self);
}

char *
hanashi_params_panel_dup_params_json (HanashiParamsPanel *self)
{
  g_return_val_if_fail (HANASHI_IS_PARAMS_PANEL (self), NULL);
  g_auto (HanashiParams) params;
  collect_params (self, &params);
  return hanashi_params_to_json (&params);
}

gboolean
hanashi_params_panel_apply_to_request (HanashiParamsPanel *self, HanashiGenerateRequest *req,
                                       GError **error)
{
  g_return_val_if_fail (HANASHI_IS_PARAMS_PANEL (self), FALSE);
  g_auto (HanashiParams) params;
  g_autofree char *key = NULL;
  GError *check_error = NULL;
  HanashiGrammar *compiled = NULL;

  collect_params (self, &params);
  key = grammar_key (&params);
  if (g_strcmp0 (key, self->checked_key) != 0)
    {
      /* Sent before the check of this text finished: the answer is needed now. */
      stop_pending_check (self);
      hanashi_params_compile_grammar (&params, &compiled, &check_error);
      remember_check (self, key, check_error, compiled);
    }
  if (self->checked_error != NULL)
    {
      g_propagate_error (error, g_error_copy (self->checked_error));
      return FALSE;
    }
  /* The grammar the check compiled goes along: the engine does not parse it again. */
  hanashi_params_apply_checked_to_request (&params, self->checked_grammar, req);
  return TRUE;
}
