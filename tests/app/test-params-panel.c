/* The parameter panel: every knob set through its widget reaches the engine request,
 * grammar errors name line and column, JSON round-trips, settings are clamped, presets.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>
#include <glib/gi18n.h>
#include <locale.h>
#include <stdlib.h>
#include <json-glib/json-glib.h>
#include <math.h>

#include "hanashi-engine-backend.h"
#include "hanashi-params-panel.h"
#include "hanashi-params.h"
#include "hn-params.h"
#include "hanashi-presets.h"
#include "test-widgets.h"
#include "test-xdg.h"
#include "test-screenshot.h"

static void
set_text (HanashiParamsPanel *panel, const char *name, const char *text)
{
  GtkWidget *view = find_named (GTK_WIDGET (panel), name);
  g_assert_nonnull (view);
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (GTK_TEXT_VIEW (view)), text, -1);
}

static void
set_dropdown (HanashiParamsPanel *panel, const char *name, guint index)
{
  GtkWidget *dropdown = find_named (GTK_WIDGET (panel), name);
  g_assert_nonnull (dropdown);
  gtk_drop_down_set_selected (GTK_DROP_DOWN (dropdown), index);
}

/* Every parameter of the engine's table is equal. */
static void
assert_sampling_equal (const HnSamplerParams *a, const HnSamplerParams *b)
{
  size_t n = 0;
  const HnParamDesc *table = hn_params_table (&n);
  for (size_t i = 0; i < n; i++)
    if (hn_param_get (&table[i], a) != hn_param_get (&table[i], b))
      g_error ("%s differs: %g and %g", table[i].key, hn_param_get (&table[i], a), hn_param_get (&table[i], b));
}

static HanashiParamsPanel *
new_panel (void)
{
  HanashiParamsPanel *panel = g_object_ref_sink (hanashi_params_panel_new ());
  return panel;
}

/* The grammar is checked on a worker thread shortly after typing pauses; meanwhile the
 * panel says "Checking…".  Runs the main loop until the result is on screen. */
static void
wait_for_check (HanashiParamsPanel *panel)
{
  GtkWidget *label = find_named (GTK_WIDGET (panel), "grammar-error");
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  while (gtk_widget_get_visible (label) && g_str_equal (gtk_label_get_text (GTK_LABEL (label)), "Checking…"))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, TRUE);
    }
}

static void
on_changed (HanashiParamsPanel *panel, int *count)
{
  (*count)++;
}

static void
test_every_knob_reaches_request (void)
{
  g_autoptr (HanashiParamsPanel) panel = new_panel ();
  int changes = 0;
  g_signal_connect (panel, "changed", G_CALLBACK (on_changed), &changes);

  set_spin (panel, "temperature", 1.35);
  set_spin (panel, "top_k", 77);
  set_spin (panel, "top_p", 0.83);
  set_spin (panel, "min_p", 0.12);
  set_spin (panel, "typical_p", 0.91);
  set_spin (panel, "repeat_penalty", 1.17);
  set_spin (panel, "repeat_last_n", 256);
  set_spin (panel, "frequency_penalty", 0.4);
  set_spin (panel, "presence_penalty", -0.3);
  set_dropdown (panel, "mirostat", 2);
  set_spin (panel, "mirostat_tau", 6.5);
  set_spin (panel, "mirostat_eta", 0.23);
  gtk_switch_set_active (GTK_SWITCH (find_named (GTK_WIDGET (panel), "random-seed")), FALSE);
  set_spin (panel, "seed", 123456789);
  set_spin (panel, "max_new_tokens", 300);
  set_text (panel, "stop-strings", "###\nUser:\\n\n\n<|end|>");
  set_text (panel, "negative-prompt", "Be rude.");
  set_spin (panel, "cfg_scale", 1.75);
  set_dropdown (panel, "grammar-mode", HANASHI_GRAMMAR_MODE_CUSTOM);
  set_text (panel, "gbnf-editor", "root ::= \"yes\" | \"no\"\n");
  g_assert_cmpint (changes, >=, 20);

  g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new ("c1");
  g_autoptr (GError) error = NULL;
  g_assert_true (hanashi_params_panel_apply_to_request (panel, req, &error));
  g_assert_no_error (error);

  HnSamplerParams s;
  hanashi_generate_request_get_sampling (req, &s);
  g_assert_cmpfloat_with_epsilon (s.temperature, 1.35, 1e-6);
  g_assert_cmpint (s.top_k, ==, 77);
  g_assert_cmpfloat_with_epsilon (s.top_p, 0.83, 1e-6);
  g_assert_cmpfloat_with_epsilon (s.min_p, 0.12, 1e-6);
  g_assert_cmpfloat_with_epsilon (s.typical_p, 0.91, 1e-6);
  g_assert_cmpfloat_with_epsilon (s.repeat_penalty, 1.17, 1e-6);
  g_assert_cmpint (s.repeat_last_n, ==, 256);
  g_assert_cmpfloat_with_epsilon (s.frequency_penalty, 0.4, 1e-6);
  g_assert_cmpfloat_with_epsilon (s.presence_penalty, -0.3, 1e-6);
  g_assert_cmpint (s.mirostat, ==, 2);
  g_assert_cmpfloat_with_epsilon (s.mirostat_tau, 6.5, 1e-6);
  g_assert_cmpfloat_with_epsilon (s.mirostat_eta, 0.23, 1e-6);
  g_assert_cmpuint (s.seed, ==, 123456789);
  g_assert_cmpint (hanashi_generate_request_get_max_tokens (req), ==, 300);
  const char *const *stops = hanashi_generate_request_get_stop_strings (req);
  g_assert_nonnull (stops);
  g_assert_cmpuint (g_strv_length ((char **) stops), ==, 3);
  g_assert_cmpstr (stops[0], ==, "###");
  g_assert_cmpstr (stops[1], ==, "User:\n");
  g_assert_cmpstr (stops[2], ==, "<|end|>");
  g_assert_cmpstr (hanashi_generate_request_get_cfg_negative (req), ==, "Be rude.");
  g_assert_cmpfloat_with_epsilon (hanashi_generate_request_get_cfg_scale (req), 1.75, 1e-6);
  g_assert_cmpstr (hanashi_generate_request_get_grammar (req), ==, "root ::= \"yes\" | \"no\"\n");
  g_assert_null (hanashi_generate_request_get_json_schema (req));

  /* Random seed again: the engine gets −1. */
  gtk_switch_set_active (GTK_SWITCH (find_named (GTK_WIDGET (panel), "random-seed")), TRUE);
  g_autoptr (HanashiGenerateRequest) req2 = hanashi_generate_request_new ("c1");
  g_assert_true (hanashi_params_panel_apply_to_request (panel, req2, NULL));
  hanashi_generate_request_get_sampling (req2, &s);
  g_assert_cmpuint (s.seed, ==, HN_SAMPLER_SEED_RANDOM);

  /* JSON Schema mode hands the schema over instead of a grammar. */
  set_dropdown (panel, "grammar-mode", HANASHI_GRAMMAR_MODE_JSON_SCHEMA);
  set_text (panel, "schema-editor", "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}");
  g_autoptr (HanashiGenerateRequest) req3 = hanashi_generate_request_new ("c1");
  g_assert_true (hanashi_params_panel_apply_to_request (panel, req3, &error));
  g_assert_no_error (error);
  g_assert_nonnull (hanashi_generate_request_get_json_schema (req3));
  g_assert_true (g_str_has_prefix (hanashi_generate_request_get_json_schema (req3), "{\"type\":\"object\""));
  g_assert_null (hanashi_generate_request_get_grammar (req3));

  /* A shipped grammar arrives as its GBNF text. */
  set_dropdown (panel, "grammar-mode", HANASHI_GRAMMAR_MODE_SHIPPED);
  GtkWidget *shipped = find_named (GTK_WIDGET (panel), "shipped-grammar");
  GListModel *names = gtk_drop_down_get_model (GTK_DROP_DOWN (shipped));
  g_assert_cmpuint (g_list_model_get_n_items (names), ==, 5);
  /* the drop-down lists them by name, in the order of their files */
  g_auto (GStrv) files = hanashi_params_list_shipped_grammars ();
  for (guint i = 0; files[i]; i++)
    if (g_str_equal (files[i], "yes-no"))
      gtk_drop_down_set_selected (GTK_DROP_DOWN (shipped), i);
  g_autoptr (HanashiGenerateRequest) req4 = hanashi_generate_request_new ("c1");
  g_assert_true (hanashi_params_panel_apply_to_request (panel, req4, &error));
  g_autofree char *yes_no = hanashi_params_dup_shipped_grammar ("yes-no");
  g_assert_nonnull (yes_no);
  g_assert_cmpstr (hanashi_generate_request_get_grammar (req4), ==, yes_no);
}

/* The issue-16 proof for the panel: every parameter of the engine's table has a control,
 * and a value other than its default, set through that control, reaches the sampler's
 * parameters unchanged while every other parameter keeps its default.  Rows come from the
 * table, so a parameter added there is covered here without editing this test. */
static void
test_every_table_parameter_reaches_sampler (void)
{
  size_t n = 0;
  const HnParamDesc *table = hn_params_table (&n);
  HnSamplerParams defaults;
  hn_sampler_params_init (&defaults);
  for (size_t i = 0; i < n; i++)
    {
      const HnParamDesc *d = &table[i];
      g_test_message ("%s", d->key);
      g_autoptr (HanashiParamsPanel) panel = new_panel ();
      double value = d->def + d->step <= d->ui_max ? d->def + d->step : d->def - d->step;
      g_autofree char *spin_name = g_strconcat ("spin-", d->key, NULL);
      GtkWidget *spin = find_named (GTK_WIDGET (panel), spin_name);
      GtkWidget *other = find_named (GTK_WIDGET (panel), d->key);
      if (d->type == HN_PARAM_SEED)
        {
          value = 4242;
          gtk_switch_set_active (GTK_SWITCH (find_named (GTK_WIDGET (panel), "random-seed")), FALSE);
          set_spin (panel, d->key, value);
        }
      else if (spin != NULL)
        set_spin (panel, d->key, value);
      else if (other != NULL && GTK_IS_SWITCH (other))
        gtk_switch_set_active (GTK_SWITCH (other), value != 0);
      else if (other != NULL && GTK_IS_DROP_DOWN (other))
        {
          g_assert_cmpuint (g_list_model_get_n_items (gtk_drop_down_get_model (GTK_DROP_DOWN (other))), ==,
                            (guint) (d->max - d->min + 1));
          gtk_drop_down_set_selected (GTK_DROP_DOWN (other), (guint) value);
        }
      else
        g_error ("the panel has no control for %s", d->key);

      g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new ("c1");
      g_assert_true (hanashi_params_panel_apply_to_request (panel, req, NULL));
      HnSamplerParams got;
      hanashi_generate_request_get_sampling (req, &got);
      double expected = d->type == HN_PARAM_FLOAT ? (double) (float) value : value;
      if (hn_param_get (d, &got) != expected)
        g_error ("%s: set %g in the panel, the sampler gets %g", d->key, value, hn_param_get (d, &got));
      for (size_t j = 0; j < n; j++)
        if (j != i && hn_param_get (&table[j], &got) != hn_param_get (&table[j], &defaults))
          g_error ("setting %s changed %s", d->key, table[j].key);
      /* the sampler accepts what the panel produced */
      HnError err = { 0 };
      g_assert_true (hn_sampler_params_validate (&got, 0, &err));
    }
}

/* The grammar is parsed once per text, by the panel's check: sending (twice, as the
 * window does: once to refuse early, once for the reply) hands the engine that same
 * compiled grammar and parses nothing again; a changed text is checked anew. */
static void
test_grammar_compiled_once (void)
{
  g_autoptr (HanashiParamsPanel) panel = new_panel ();
  set_dropdown (panel, "grammar-mode", HANASHI_GRAMMAR_MODE_JSON_SCHEMA);
  set_text (panel, "schema-editor", "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"]}");
  wait_for_check (panel);
  guint parsed = hanashi_grammar_get_n_parsed ();

  g_autoptr (HanashiGenerateRequest) check = hanashi_generate_request_new ("c1");
  g_autoptr (HanashiGenerateRequest) reply = hanashi_generate_request_new ("c1");
  g_assert_true (hanashi_params_panel_apply_to_request (panel, check, NULL));
  g_assert_true (hanashi_params_panel_apply_to_request (panel, reply, NULL));
  g_assert_cmpuint (hanashi_grammar_get_n_parsed (), ==, parsed);
  HanashiGrammar *compiled = hanashi_generate_request_get_compiled_grammar (reply);
  g_assert_nonnull (compiled);
  g_assert_true (hanashi_generate_request_get_compiled_grammar (check) == compiled);
  g_assert_nonnull (hanashi_generate_request_get_json_schema (reply));

  /* sent before the check of a new text finished: checked then, once */
  set_text (panel, "schema-editor", "{\"enum\":[1,2]}");
  g_autoptr (HanashiGenerateRequest) early = hanashi_generate_request_new ("c1");
  g_assert_true (hanashi_params_panel_apply_to_request (panel, early, NULL));
  g_assert_cmpuint (hanashi_grammar_get_n_parsed (), ==, parsed + 1);
  g_assert_nonnull (hanashi_generate_request_get_compiled_grammar (early));
  g_assert_true (hanashi_generate_request_get_compiled_grammar (early) != compiled);

  /* no grammar: nothing compiled, nothing sent */
  set_dropdown (panel, "grammar-mode", HANASHI_GRAMMAR_MODE_NONE);
  g_autoptr (HanashiGenerateRequest) plain = hanashi_generate_request_new ("c1");
  g_assert_true (hanashi_params_panel_apply_to_request (panel, plain, NULL));
  g_assert_null (hanashi_generate_request_get_compiled_grammar (plain));
  g_assert_null (hanashi_generate_request_get_grammar (plain));
}

static void
test_invalid_grammar (void)
{
  g_autoptr (HanashiParamsPanel) panel = new_panel ();
  set_dropdown (panel, "grammar-mode", HANASHI_GRAMMAR_MODE_CUSTOM);
  set_text (panel, "gbnf-editor", "root ::= item+\nitem ::= \"a\" | (\"b\" \n");

  GtkWidget *label = find_named (GTK_WIDGET (panel), "grammar-error");
  g_assert_true (gtk_widget_get_visible (label));
  g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (label)), ==, "Checking…");
  wait_for_check (panel);
  g_assert_true (gtk_widget_get_visible (label));
  g_assert_nonnull (strstr (gtk_label_get_text (GTK_LABEL (label)), "line 2, column"));

  g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new ("c1");
  g_autoptr (GError) error = NULL;
  g_assert_false (hanashi_params_panel_apply_to_request (panel, req, &error));
  g_assert_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_GRAMMAR_INVALID);
  g_assert_nonnull (strstr (error->message, "line 2, column"));
  g_assert_null (hanashi_generate_request_get_grammar (req));
  g_clear_error (&error);

  /* Broken JSON in schema mode: the position of the JSON error is named too. */
  set_dropdown (panel, "grammar-mode", HANASHI_GRAMMAR_MODE_JSON_SCHEMA);
  set_text (panel, "schema-editor", "{\n  \"type\": \"object\",\n  \"properties\": {,}\n}");
  g_assert_false (hanashi_params_panel_apply_to_request (panel, req, &error));
  g_assert_nonnull (strstr (error->message, "line 3, column"));
  g_assert_true (gtk_widget_get_visible (label));

  /* Fixing it clears the inline message. */
  set_dropdown (panel, "grammar-mode", HANASHI_GRAMMAR_MODE_NONE);
  g_assert_false (gtk_widget_get_visible (label));
}

static void
test_json_round_trip (void)
{
  g_autoptr (HanashiParamsPanel) panel = new_panel ();
  int changes = 0;
  g_signal_connect (panel, "changed", G_CALLBACK (on_changed), &changes);
  const char *json =
    "{\"temperature\":0.35,\"top_k\":12,\"top_p\":0.5,\"min_p\":0.2,\"typical_p\":0.7,"
    "\"repeat_penalty\":1.3,\"repeat_last_n\":-1,\"frequency_penalty\":1.5,\"presence_penalty\":-1.5,"
    "\"mirostat\":1,\"mirostat_tau\":3.5,\"mirostat_eta\":0.5,\"seed\":42,\"max_new_tokens\":64,"
    "\"cfg_scale\":2.5,\"stop\":[\"\\n\\n\",\"a\\\\b\"],\"cfg_negative_prompt\":\"no\","
    "\"grammar_mode\":\"gbnf\",\"grammar_name\":\"list\",\"grammar\":\"root ::= \\\"x\\\"\",\"json_schema\":\"{}\"}";
  hanashi_params_panel_set_params_json (panel, json);
  g_assert_cmpint (changes, ==, 0);

  g_autofree char *out = hanashi_params_panel_dup_params_json (panel);
  g_auto (HanashiParams) expected;
  g_auto (HanashiParams) got;
  hanashi_params_init_default (&expected);
  hanashi_params_init_default (&got);
  g_assert_true (hanashi_params_update_from_json (&expected, json, NULL));
  g_assert_true (hanashi_params_update_from_json (&got, out, NULL));
  assert_sampling_equal (&expected.sampling, &got.sampling);
  g_assert_cmpint (got.sampling.repeat_last_n, ==, -1);
  g_assert_cmpuint (got.sampling.seed, ==, 42);
  g_assert_cmpint (got.sampling.max_new_tokens, ==, 64);
  g_assert_cmpfloat (got.cfg_scale, ==, 2.5);
  g_assert_cmpstrv (got.stop, ((const char *const[]) { "\n\n", "a\\b", NULL }));
  g_assert_cmpstr (got.cfg_negative, ==, "no");
  g_assert_cmpint (got.grammar_mode, ==, HANASHI_GRAMMAR_MODE_CUSTOM);
  g_assert_cmpstr (got.grammar_name, ==, "list");
  g_assert_cmpstr (got.grammar, ==, "root ::= \"x\"");
  g_assert_cmpstr (got.json_schema, ==, "{}");

  /* And through the panel once more: stable. */
  hanashi_params_panel_set_params_json (panel, out);
  g_autofree char *again = hanashi_params_panel_dup_params_json (panel);
  g_assert_cmpstr (out, ==, again);
}

static void
test_settings_are_clamped (void)
{
  g_autoptr (GSettings) settings = g_settings_new (APP_ID);
  g_settings_set_string (settings, "default-params",
                         "{\"temperature\":1e300,\"top_k\":-5,\"top_p\":\"lots\",\"min_p\":7,"
                         "\"repeat_last_n\":99999999,\"seed\":-12,\"max_new_tokens\":1e12,"
                         "\"mirostat\":9,\"cfg_scale\":-3,\"grammar_mode\":\"bogus\","
                         "\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\","
                         "\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\",\"18\",\"\",5]}");
  g_autoptr (HanashiParamsPanel) panel = new_panel ();
  g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new ("c1");
  g_assert_true (hanashi_params_panel_apply_to_request (panel, req, NULL));
  HnSamplerParams s;
  hanashi_generate_request_get_sampling (req, &s);
  double min, max, def;
  g_assert_true (hanashi_params_get_range ("temperature", &min, &max, &def));
  g_assert_cmpfloat (s.temperature, ==, max);
  g_assert_cmpint (s.top_k, ==, 0);
  g_assert_cmpfloat (s.top_p, ==, 0.95f);
  g_assert_cmpfloat (s.min_p, ==, 1.0f);
  g_assert_true (hanashi_params_get_range ("repeat_last_n", &min, &max, &def));
  g_assert_cmpint (s.repeat_last_n, ==, (int) max);
  g_assert_cmpuint (s.seed, ==, HN_SAMPLER_SEED_RANDOM);
  g_assert_cmpint (s.mirostat, ==, 2);
  g_assert_true (hanashi_params_get_range ("max_new_tokens", &min, &max, &def));
  g_assert_cmpint (hanashi_generate_request_get_max_tokens (req), ==, (int) max);
  g_assert_cmpfloat (hanashi_generate_request_get_cfg_scale (req), ==, 0);
  g_assert_null (hanashi_generate_request_get_grammar (req));
  g_assert_cmpuint (g_strv_length ((char **) hanashi_generate_request_get_stop_strings (req)), ==, 16);

  /* Not JSON at all: the engine defaults. */
  g_settings_set_string (settings, "default-params", "{{{");
  g_autoptr (HanashiParamsPanel) panel2 = new_panel ();
  g_autoptr (HanashiGenerateRequest) req2 = hanashi_generate_request_new ("c1");
  g_assert_true (hanashi_params_panel_apply_to_request (panel2, req2, NULL));
  HnSamplerParams expected;
  hn_sampler_params_init (&expected);
  hanashi_generate_request_get_sampling (req2, &s);
  assert_sampling_equal (&s, &expected);
  g_settings_reset (settings, "default-params");
}

static void
test_defaults_mode_writes_settings (void)
{
  g_autoptr (GSettings) settings = g_settings_new (APP_ID);
  g_autoptr (HanashiParamsPanel) panel = g_object_ref_sink (hanashi_params_panel_new_for_defaults ());
  set_spin (panel, "temperature", 0.55);
  g_auto (HanashiParams) params;
  hanashi_params_load_defaults (&params, settings);
  g_assert_cmpfloat_with_epsilon (params.sampling.temperature, 0.55, 1e-6);

  /* Reloading the defaults panel shows what is stored. */
  hanashi_params_panel_set_params_json (panel, NULL);
  g_autoptr (HanashiGenerateRequest) reloaded = hanashi_generate_request_new ("c0");
  g_assert_true (hanashi_params_panel_apply_to_request (panel, reloaded, NULL));
  HnSamplerParams r;
  hanashi_generate_request_get_sampling (reloaded, &r);
  g_assert_cmpfloat_with_epsilon (r.temperature, 0.55, 1e-6);

  /* A conversation panel created afterwards starts from those defaults. */
  g_autoptr (HanashiParamsPanel) conversation = new_panel ();
  hanashi_params_panel_set_params_json (conversation, NULL);
  g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new ("c1");
  g_assert_true (hanashi_params_panel_apply_to_request (conversation, req, NULL));
  HnSamplerParams s;
  hanashi_generate_request_get_sampling (req, &s);
  g_assert_cmpfloat_with_epsilon (s.temperature, 0.55, 1e-6);
  g_settings_reset (settings, "default-params");
}

static void
test_screenshots (void)
{
  GtkWidget *window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 380, 900);
  HanashiParamsPanel *panel = hanashi_params_panel_new ();
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (panel));
  gtk_window_present (GTK_WINDOW (window));
  while (!gtk_widget_get_mapped (window))
    g_main_context_iteration (NULL, TRUE);
  test_screenshot (window, "params-panel");

  /* With an invalid custom grammar, scrolled to the message. */
  set_dropdown (panel, "grammar-mode", HANASHI_GRAMMAR_MODE_CUSTOM);
  set_text (panel, "gbnf-editor", "root ::= answer\nanswer ::= \"yes\" | (\"no\"\n");
  GtkWidget *label = find_named (GTK_WIDGET (panel), "grammar-error");
  wait_for_check (panel);
  g_assert_true (gtk_widget_get_visible (label));
  test_screenshot_settle ();
  GtkWidget *scroller = gtk_widget_get_first_child (GTK_WIDGET (panel));
  GtkAdjustment *vadj = gtk_scrolled_window_get_vadjustment (GTK_SCROLLED_WINDOW (scroller));
  gtk_adjustment_set_value (vadj, gtk_adjustment_get_upper (vadj));
  test_screenshot (window, "params-panel-grammar-error");
  gtk_window_destroy (GTK_WINDOW (window));
}

static void
test_presets (void)
{
  g_auto (GStrv) names = hanashi_presets_list ();
  g_assert_cmpuint (g_strv_length (names), ==, HANASHI_N_SHIPPED_PRESETS);
  g_assert_cmpstr (names[0], ==, "Precise");

  g_autoptr (GError) error = NULL;
  g_assert_true (hanashi_presets_save ("Mine", "{\"temperature\":0.33,\"top_k\":3}", &error));
  g_assert_no_error (error);
  g_assert_false (hanashi_presets_save ("Creative", "{}", &error));
  g_clear_error (&error);
  g_auto (GStrv) after = hanashi_presets_list ();
  g_assert_cmpuint (g_strv_length (after), ==, HANASHI_N_SHIPPED_PRESETS + 1);
  g_assert_cmpstr (after[HANASHI_N_SHIPPED_PRESETS], ==, "Mine");

  /* Apply "Precise" through the panel's own controls: choosing it applies it. */
  g_autoptr (HanashiParamsPanel) panel = new_panel ();
  set_spin (panel, "max_new_tokens", 99);
  GtkWidget *presets_row = find_named (GTK_WIDGET (panel), "preset-dropdown");
  g_assert_nonnull (presets_row);
  gtk_drop_down_set_selected (GTK_DROP_DOWN (presets_row), 0);
  g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new ("c1");
  g_assert_true (hanashi_params_panel_apply_to_request (panel, req, NULL));
  HnSamplerParams s;
  hanashi_generate_request_get_sampling (req, &s);
  g_assert_cmpfloat_with_epsilon (s.temperature, 0.2, 1e-6);
  g_assert_cmpint (s.top_k, ==, 20);
  /* Presets of sampling knobs leave the rest alone. */
  g_assert_cmpint (hanashi_generate_request_get_max_tokens (req), ==, 99);

  /* Save the current panel under a name from the entry; it shows up and applies. */
  set_spin (panel, "temperature", 1.9);
  gtk_editable_set_text (GTK_EDITABLE (find_named (GTK_WIDGET (panel), "preset-name")), "Hot");
  g_signal_emit_by_name (find_named (GTK_WIDGET (panel), "preset-save"), "clicked");
  g_autofree char *hot = hanashi_presets_lookup ("Hot");
  g_assert_nonnull (hot);
  g_auto (HanashiParams) params;
  hanashi_params_init_default (&params);
  g_assert_true (hanashi_params_update_from_json (&params, hot, NULL));
  g_assert_cmpfloat_with_epsilon (params.sampling.temperature, 1.9, 1e-6);
  g_assert_cmpint (params.sampling.max_new_tokens, ==, 99);
  /* Saving selects the new preset; shipped ones cannot be deleted, the user's can. */
  GtkWidget *delete_button = find_named (GTK_WIDGET (panel), "preset-delete");
  g_assert_true (gtk_widget_get_sensitive (delete_button));
  g_signal_emit_by_name (delete_button, "clicked");
  g_assert_null (hanashi_presets_lookup ("Hot"));
  gtk_drop_down_set_selected (GTK_DROP_DOWN (presets_row), 1);
  g_assert_false (gtk_widget_get_sensitive (delete_button));
  g_assert_true (hanashi_presets_delete ("Mine", NULL));
  g_auto (GStrv) final = hanashi_presets_list ();
  g_assert_cmpuint (g_strv_length (final), ==, HANASHI_N_SHIPPED_PRESETS);
}

static const char *
selected_preset (HanashiParamsPanel *panel)
{
  GtkDropDown *dropdown = GTK_DROP_DOWN (find_named (GTK_WIDGET (panel), "preset-dropdown"));
  GtkStringObject *item = gtk_drop_down_get_selected_item (dropdown);
  g_assert_nonnull (item);
  return gtk_string_object_get_string (item);
}

static guint
n_preset_items (HanashiParamsPanel *panel)
{
  GtkDropDown *dropdown = GTK_DROP_DOWN (find_named (GTK_WIDGET (panel), "preset-dropdown"));
  return g_list_model_get_n_items (gtk_drop_down_get_model (dropdown));
}

static double
default_of (const char *key)
{
  double min = 0, max = 0, def = 0;
  g_assert_true (hanashi_params_get_range (key, &min, &max, &def));
  return def;
}

/* The preset menu names the preset the values are, says "Custom" as soon as they are not,
 * and names the preset again when they come back to it. */
static void
test_preset_shows_custom (void)
{
  g_autoptr (HanashiParamsPanel) panel = new_panel ();
  GtkDropDown *dropdown = GTK_DROP_DOWN (find_named (GTK_WIDGET (panel), "preset-dropdown"));
  GtkWidget *delete_button = find_named (GTK_WIDGET (panel), "preset-delete");

  /* The defaults are the engine's chain: Balanced. */
  g_assert_cmpstr (selected_preset (panel), ==, "Balanced");
  g_assert_cmpuint (n_preset_items (panel), ==, HANASHI_N_SHIPPED_PRESETS);
  set_spin (panel, "temperature", 0.33);
  g_assert_cmpstr (selected_preset (panel), ==, "Custom");
  g_assert_cmpuint (n_preset_items (panel), ==, HANASHI_N_SHIPPED_PRESETS + 1);
  g_assert_false (gtk_widget_get_sensitive (delete_button));
  set_spin (panel, "temperature", default_of ("temperature"));
  g_assert_cmpstr (selected_preset (panel), ==, "Balanced");
  g_assert_cmpuint (n_preset_items (panel), ==, HANASHI_N_SHIPPED_PRESETS);

  /* Precise, then a knob moved off and back. */
  gtk_drop_down_set_selected (dropdown, 0);
  g_assert_cmpstr (selected_preset (panel), ==, "Precise");
  set_spin (panel, "top_k", 21);
  g_assert_cmpstr (selected_preset (panel), ==, "Custom");
  /* choosing "Custom" itself changes nothing */
  gtk_drop_down_set_selected (dropdown, HANASHI_N_SHIPPED_PRESETS);
  g_assert_cmpstr (selected_preset (panel), ==, "Custom");
  g_autofree char *json = hanashi_params_panel_dup_params_json (panel);
  g_auto (HanashiParams) params;
  hanashi_params_init_default (&params);
  g_assert_true (hanashi_params_update_from_json (&params, json, NULL));
  g_assert_cmpint (params.sampling.top_k, ==, 21);
  g_assert_cmpfloat_with_epsilon (params.sampling.temperature, 0.2, 1e-6);
  set_spin (panel, "top_k", 20);
  g_assert_cmpstr (selected_preset (panel), ==, "Precise");
  /* A shipped preset leaves length and seed alone: changing them keeps it. */
  set_spin (panel, "max_new_tokens", 77);
  g_assert_cmpstr (selected_preset (panel), ==, "Precise");
  /* … but any sampling knob counts, also one the preset does not name. */
  set_spin (panel, "typical_p", 0.5);
  g_assert_cmpstr (selected_preset (panel), ==, "Custom");

  /* A conversation's stored values show their preset; Reset All goes back to Balanced. */
  g_autofree char *creative = hanashi_presets_lookup ("Creative");
  hanashi_params_panel_set_params_json (panel, creative);
  g_assert_cmpstr (selected_preset (panel), ==, "Creative");
  g_signal_emit_by_name (find_named (GTK_WIDGET (panel), "reset-all"), "clicked");
  g_assert_cmpstr (selected_preset (panel), ==, "Balanced");

  /* A user's preset is named when the values are its values. */
  g_assert_true (hanashi_presets_save ("Cold", "{\"temperature\":0.05}", NULL));
  gtk_editable_set_text (GTK_EDITABLE (find_named (GTK_WIDGET (panel), "preset-name")), "Warm");
  set_spin (panel, "temperature", 1.4);
  g_signal_emit_by_name (find_named (GTK_WIDGET (panel), "preset-save"), "clicked");
  g_assert_cmpstr (selected_preset (panel), ==, "Warm");
  g_assert_true (gtk_widget_get_sensitive (delete_button));
  set_spin (panel, "temperature", 1.5);
  g_assert_cmpstr (selected_preset (panel), ==, "Custom");
  set_spin (panel, "temperature", 1.4);
  g_assert_cmpstr (selected_preset (panel), ==, "Warm");
  g_assert_true (hanashi_presets_delete ("Cold", NULL));
  g_assert_true (hanashi_presets_delete ("Warm", NULL));
}

/* Delivers a scroll to @target the way GTK does: capture phase from the window down, then
 * the target, then bubbling up; the first controller that handles it ends it.  Returns
 * whether one did. */
static gboolean
deliver_scroll (GtkWidget *target, double dy)
{
  g_autoptr (GPtrArray) chain = g_ptr_array_new ();
  for (GtkWidget *w = target; w; w = gtk_widget_get_parent (w))
    g_ptr_array_insert (chain, 0, w);
  for (int pass = 0; pass < 3; pass++)
    for (guint k = 0; k < chain->len; k++)
      {
        GtkWidget *widget = pass == 2 ? chain->pdata[chain->len - 1 - k] : chain->pdata[k];
        if (pass == 1 && widget != target)
          continue;
        g_autoptr (GListModel) controllers = gtk_widget_observe_controllers (widget);
        for (guint i = 0; i < g_list_model_get_n_items (controllers); i++)
          {
            g_autoptr (GtkEventController) controller = g_list_model_get_item (controllers, i);
            if (!GTK_IS_EVENT_CONTROLLER_SCROLL (controller))
              continue;
            GtkPropagationPhase phase = gtk_event_controller_get_propagation_phase (controller);
            gboolean runs = (pass == 0 && phase == GTK_PHASE_CAPTURE)
                            || (pass == 1 && (phase == GTK_PHASE_TARGET || phase == GTK_PHASE_BUBBLE))
                            || (pass == 2 && widget != target && phase == GTK_PHASE_BUBBLE);
            if (!runs)
              continue;
            gboolean handled = FALSE;
            g_signal_emit_by_name (controller, "scroll", 0.0, dy, &handled);
            if (handled)
              return TRUE;
          }
      }
  return FALSE;
}

/* The mouse wheel over a slider or a spin button scrolls the panel; the value stays. */
static void
test_wheel_scrolls_panel (void)
{
  GtkWidget *window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 380, 500);
  HanashiParamsPanel *panel = hanashi_params_panel_new ();
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (panel));
  gtk_window_present (GTK_WINDOW (window));
  GtkWidget *scroller = gtk_widget_get_first_child (GTK_WIDGET (panel));
  GtkAdjustment *vadj = gtk_scrolled_window_get_vadjustment (GTK_SCROLLED_WINDOW (scroller));
  while (!gtk_widget_get_mapped (window))
    g_main_context_iteration (NULL, TRUE);
  test_screenshot_settle ();
  g_assert_cmpfloat (gtk_adjustment_get_upper (vadj), >, gtk_adjustment_get_page_size (vadj) + 100);

  const char *controls[] = { "scale-top_p", "spin-top_p", "scale-temperature", "spin-max_new_tokens" };
  for (gsize i = 0; i < G_N_ELEMENTS (controls); i++)
    {
      GtkWidget *control = find_named (GTK_WIDGET (panel), controls[i]);
      g_assert_nonnull (control);
      GtkAdjustment *value = GTK_IS_RANGE (control) ? gtk_range_get_adjustment (GTK_RANGE (control))
                                                    : gtk_spin_button_get_adjustment (GTK_SPIN_BUTTON (control));
      double before = gtk_adjustment_get_value (value);
      gtk_adjustment_set_value (vadj, 0);
      g_assert_true (deliver_scroll (control, 1.0));
      g_assert_cmpfloat (gtk_adjustment_get_value (value), ==, before);
      double scrolled = gtk_adjustment_get_value (vadj);
      g_assert_cmpfloat (scrolled, >, 0);
      /* and back up */
      g_assert_true (deliver_scroll (control, -1.0));
      g_assert_cmpfloat (gtk_adjustment_get_value (value), ==, before);
      g_assert_cmpfloat (gtk_adjustment_get_value (vadj), <, scrolled);
    }
  gtk_window_destroy (GTK_WINDOW (window));

  /* In Preferences the panel sits in a page that scrolls: whichever of the two can move
   * moves, and the value stays. */
  window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 380, 500);
  GtkWidget *page = gtk_scrolled_window_new ();
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (page), GTK_POLICY_NEVER, GTK_POLICY_AUTOMATIC);
  panel = hanashi_params_panel_new_for_defaults ();
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (page), GTK_WIDGET (panel));
  gtk_window_set_child (GTK_WINDOW (window), page);
  gtk_window_present (GTK_WINDOW (window));
  while (!gtk_widget_get_mapped (window))
    g_main_context_iteration (NULL, TRUE);
  test_screenshot_settle ();
  GtkAdjustment *inner = gtk_scrolled_window_get_vadjustment (GTK_SCROLLED_WINDOW (gtk_widget_get_first_child (GTK_WIDGET (panel))));
  GtkAdjustment *outer = gtk_scrolled_window_get_vadjustment (GTK_SCROLLED_WINDOW (page));
  g_assert_cmpfloat (gtk_adjustment_get_upper (inner) - gtk_adjustment_get_page_size (inner)
                     + gtk_adjustment_get_upper (outer) - gtk_adjustment_get_page_size (outer), >, 0);
  GtkWidget *scale = find_named (GTK_WIDGET (panel), "scale-top_p");
  double before = gtk_range_get_value (GTK_RANGE (scale));
  g_assert_true (deliver_scroll (scale, 1.0));
  g_assert_cmpfloat (gtk_range_get_value (GTK_RANGE (scale)), ==, before);
  g_assert_cmpfloat (gtk_adjustment_get_value (inner) + gtk_adjustment_get_value (outer), >, 0);
  gtk_window_destroy (GTK_WINDOW (window));
}

static GtkDropDown *
shipped_grammar_dropdown (HanashiParamsPanel *panel, guint *yes_no)
{
  g_auto (GStrv) files = hanashi_params_list_shipped_grammars ();
  *yes_no = G_MAXUINT;
  for (guint i = 0; files[i]; i++)
    if (g_str_equal (files[i], "yes-no"))
      *yes_no = i;
  g_assert_cmpuint (*yes_no, !=, G_MAXUINT);
  return GTK_DROP_DOWN (find_named (GTK_WIDGET (panel), "shipped-grammar"));
}

static const char *
dropdown_item (GtkDropDown *dropdown, guint i)
{
  g_autoptr (GtkStringObject) item = g_list_model_get_item (gtk_drop_down_get_model (dropdown), i);
  return gtk_string_object_get_string (item);
}

/* The shipped grammars have names, not file names; choosing one still sends its file. */
static void
test_grammar_names (void)
{
  g_autoptr (HanashiParamsPanel) panel = new_panel ();
  guint yes_no = 0;
  GtkDropDown *dropdown = shipped_grammar_dropdown (panel, &yes_no);
  g_auto (GStrv) files = hanashi_params_list_shipped_grammars ();
  g_assert_cmpuint (g_list_model_get_n_items (gtk_drop_down_get_model (dropdown)), ==, g_strv_length (files));
  for (guint i = 0; files[i]; i++)
    g_assert_cmpstr (dropdown_item (dropdown, i), !=, files[i]);
  g_assert_cmpstr (dropdown_item (dropdown, yes_no), ==, "Yes or No");

  set_dropdown (panel, "grammar-mode", HANASHI_GRAMMAR_MODE_SHIPPED);
  gtk_drop_down_set_selected (dropdown, yes_no);
  g_autofree char *json = hanashi_params_panel_dup_params_json (panel);
  g_auto (HanashiParams) params;
  hanashi_params_init_default (&params);
  g_assert_true (hanashi_params_update_from_json (&params, json, NULL));
  g_assert_cmpstr (params.grammar_name, ==, "yes-no");

  /* In Japanese (the catalogue built in this tree), in a process of its own. */
  if (g_test_subprocess ())
    {
      g_assert_nonnull (setlocale (LC_ALL, "C.UTF-8"));
      g_setenv ("LANGUAGE", "ja", TRUE);
      bindtextdomain (GETTEXT_PACKAGE, g_getenv ("HANASHI_TEST_LOCALEDIR"));
      bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
      textdomain (GETTEXT_PACKAGE);
      g_autoptr (HanashiParamsPanel) ja = new_panel ();
      GtkDropDown *ja_dropdown = shipped_grammar_dropdown (ja, &yes_no);
      g_print ("%s\n", dropdown_item (ja_dropdown, yes_no));
      g_print ("%s\n", selected_preset (ja));
      return;
    }
  const char *localedir = g_getenv ("HANASHI_TEST_LOCALEDIR");
  g_assert_nonnull (localedir);
  g_autofree char *catalog = g_build_filename (localedir, "ja", "LC_MESSAGES", GETTEXT_PACKAGE ".mo", NULL);
  g_assert_true (g_file_test (catalog, G_FILE_TEST_EXISTS));
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stdout ("yes / no の二択\nバランス\n");
}

/* A schema large enough that checking it takes a while: objects nested in objects. */
static char *
large_schema (guint n_properties)
{
  GString *schema = g_string_new ("{\"type\": \"object\", \"properties\": {");
  for (guint i = 0; i < n_properties; i++)
    g_string_append_printf (schema,
                            "%s\n  \"field%u\": {\"type\": \"object\", \"properties\": {"
                            "\"name\": {\"type\": \"string\"}, \"count\": {\"type\": \"integer\"},"
                            "\"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a%u\", \"b%u\", \"c%u\"]}}},"
                            "\"required\": [\"name\"]}",
                            i ? "," : "", i, i, i, i);
  g_string_append (schema, "}}");
  return g_string_free (schema, FALSE);
}

typedef struct {
  gint64 last;
  gint64 longest;
} LoopWatch;

static gboolean
on_loop_tick (gpointer data)
{
  LoopWatch *watch = data;
  gint64 now = g_get_monotonic_time ();
  watch->longest = MAX (watch->longest, now - watch->last);
  watch->last = now;
  return G_SOURCE_CONTINUE;
}

/* Typing into a large schema never blocks the main loop: the panel says "Checking…" at
 * once, the check runs on another thread after typing pauses, and the result (here the
 * error of a schema broken at its very end) then replaces it. */
static void
test_check_off_main_loop (void)
{
  g_autoptr (HanashiParamsPanel) panel = new_panel ();
  GtkWidget *label = find_named (GTK_WIDGET (panel), "grammar-error");
  g_autofree char *schema = NULL;
  g_autofree char *broken = NULL;
  gint64 sync_us = 0;
  guint n = 200;

  /* Grow the schema until one check takes at least 300 ms on this machine. */
  for (;;)
    {
      g_auto (HanashiParams) params;
      hanashi_params_init_default (&params);
      params.grammar_mode = HANASHI_GRAMMAR_MODE_JSON_SCHEMA;
      g_free (schema);
      schema = large_schema (n);
      g_free (params.json_schema);
      params.json_schema = g_strdup (schema);
      gint64 start = g_get_monotonic_time ();
      g_autoptr (GError) error = NULL;
      g_assert_true (hanashi_params_validate_grammar (&params, &error));
      sync_us = g_get_monotonic_time () - start;
      if (sync_us >= 300000 || n >= 51200)
        break;
      n *= 2;
    }
  g_test_message ("%u properties, %zu bytes: one check takes %.0f ms", n, strlen (schema), sync_us / 1000.0);
  broken = g_strconcat (schema, ",", NULL);

  set_dropdown (panel, "grammar-mode", HANASHI_GRAMMAR_MODE_JSON_SCHEMA);
  wait_for_check (panel);
  LoopWatch watch = { g_get_monotonic_time (), 0 };
  guint tick = g_timeout_add (5, on_loop_tick, &watch);
  gint64 start = g_get_monotonic_time ();
  /* Three quick edits: none compiles anything itself, and the panel says it is checking.
   * (Counted, not timed: an edit's duration includes GtkSourceView taking the text, and
   * on a loaded machine that alone took longer than one check.) */
  for (int i = 0; i < 3; i++)
    {
      guint parsed = hanashi_grammar_get_n_parsed ();
      set_text (panel, "schema-editor", i < 2 ? schema : broken);
      g_assert_cmpuint (hanashi_grammar_get_n_parsed (), ==, parsed);
      g_assert_true (gtk_widget_get_visible (label));
      g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (label)), ==, "Checking…");
    }
  /* From here on only the check runs; the edits themselves (GtkSourceView taking 80 KB)
   * are the text view's cost, not the check's. */
  watch.last = g_get_monotonic_time ();
  watch.longest = 0;
  wait_for_check (panel);
  gint64 total = g_get_monotonic_time () - start;
  g_source_remove (tick);
  g_test_message ("result after %.0f ms; longest main-loop pause %.0f ms", total / 1000.0, watch.longest / 1000.0);
  g_assert_true (gtk_widget_get_visible (label));
  g_assert_true (strstr (gtk_label_get_text (GTK_LABEL (label)), "JSON schema") != NULL);
  /* The longest main-loop pause is reported, not asserted: it is a timing, and on a
   * machine shared with other tests it measured the neighbours as much as the panel. */

  /* Sending right after an edit does not wait for the timer: it checks at once. */
  set_text (panel, "schema-editor", schema);
  g_autoptr (HanashiGenerateRequest) req = hanashi_generate_request_new ("c1");
  g_autoptr (GError) error = NULL;
  g_assert_true (hanashi_params_panel_apply_to_request (panel, req, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (hanashi_generate_request_get_json_schema (req), ==, schema);
  g_assert_false (gtk_widget_get_visible (label));
}

int
main (int argc, char **argv)
{
  /* Temporary XDG folders (presets are written to the config folder). */
  test_xdg_setup ();
  g_test_init (&argc, &argv, NULL);
  gtk_init ();
  adw_init ();

  g_test_add_func ("/params-panel/every-knob", test_every_knob_reaches_request);
  g_test_add_func ("/params-panel/every-table-parameter", test_every_table_parameter_reaches_sampler);
  g_test_add_func ("/params-panel/grammar-compiled-once", test_grammar_compiled_once);
  g_test_add_func ("/params-panel/invalid-grammar", test_invalid_grammar);
  g_test_add_func ("/params-panel/check-off-main-loop", test_check_off_main_loop);
  g_test_add_func ("/params-panel/json-round-trip", test_json_round_trip);
  g_test_add_func ("/params-panel/settings-clamped", test_settings_are_clamped);
  g_test_add_func ("/params-panel/defaults-mode", test_defaults_mode_writes_settings);
  g_test_add_func ("/params-panel/presets", test_presets);
  g_test_add_func ("/params-panel/preset-shows-custom", test_preset_shows_custom);
  g_test_add_func ("/params-panel/wheel-scrolls-panel", test_wheel_scrolls_panel);
  g_test_add_func ("/params-panel/grammar-names", test_grammar_names);
  g_test_add_func ("/params-panel/screenshots", test_screenshots);
  return g_test_run ();
}
