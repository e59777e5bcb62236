/* test-params-limits.c — hand-edited settings and stored parameters are clamped, never
 * trusted (no display).  Values come from a settings keyfile as a person might edit it, and
 * from the per-conversation JSON in the database.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_SETTINGS_ENABLE_BACKEND
#include <gio/gsettingsbackend.h>
#include <glib/gstdio.h>
#include <math.h>

#include <json-glib/json-glib.h>

#include "hanashi-params.h"
#include "hanashi-presets.h"
/* The engine's own table, to check the app against it. */
#include "hn-params.h"

static double
range_max (const char *key)
{
  double min, max, def;
  g_assert_true (hanashi_params_get_range (key, &min, &max, &def));
  return max;
}

static double
range_min (const char *key)
{
  double min, max, def;
  g_assert_true (hanashi_params_get_range (key, &min, &max, &def));
  return min;
}

static double
number (const HanashiParams *p, const char *key)
{
  double value = 0;
  g_assert_true (hanashi_params_get_number (p, key, &value));
  return value;
}

/* Every knob far past both ends of its range lands exactly on that end. */
static void
test_json_absurd_numbers (void)
{
  /* every parameter of the engine's table, and guidance's scale */
  size_t n_table = 0;
  const HnParamDesc *table = hn_params_table (&n_table);
  g_autoptr (GPtrArray) key_list = g_ptr_array_new ();
  for (size_t i = 0; i < n_table; i++)
    g_ptr_array_add (key_list, (gpointer) table[i].key);
  g_ptr_array_add (key_list, (gpointer) "cfg_scale");
  const char *const *keys = (const char *const *) key_list->pdata;
  for (guint i = 0; i < key_list->len; i++)
    {
      g_auto (HanashiParams) p;
      hanashi_params_init_default (&p);
      g_autofree char *high = g_strdup_printf ("{\"%s\": 1e300}", keys[i]);
      g_assert_true (hanashi_params_update_from_json (&p, high, NULL));
      g_assert_cmpfloat (number (&p, keys[i]), ==, range_max (keys[i]));
      g_autofree char *low = g_strdup_printf ("{\"%s\": -1e300}", keys[i]);
      g_assert_true (hanashi_params_update_from_json (&p, low, NULL));
      g_assert_cmpfloat (number (&p, keys[i]), ==, range_min (keys[i]));
      /* json-glib wraps integer literals beyond 64 bits (this one reads as -1), so the
       * value cannot land on the near end; it must still land inside the range. */
      g_autofree char *wrapped = g_strdup_printf ("{\"%s\": 99999999999999999999}", keys[i]);
      g_assert_true (hanashi_params_update_from_json (&p, wrapped, NULL));
      g_assert_cmpfloat (number (&p, keys[i]), >=, range_min (keys[i]));
      g_assert_cmpfloat (number (&p, keys[i]), <=, range_max (keys[i]));
    }
  /* The ends themselves, spelled out, so a widened range shows up here. */
  g_auto (HanashiParams) p;
  hanashi_params_init_default (&p);
  g_assert_true (hanashi_params_update_from_json (&p,
    "{\"temperature\": 1e300, \"top_k\": 1e300, \"max_new_tokens\": 1e300, \"seed\": 1e300,"
    " \"cfg_scale\": 1e300, \"repeat_last_n\": 1e300, \"top_p\": -1}", NULL));
  g_assert_cmpfloat (p.sampling.temperature, ==, 5.0);
  g_assert_cmpint (p.sampling.top_k, ==, 1000);
  g_assert_cmpint (p.sampling.max_new_tokens, ==, 131072);
  g_assert_cmpuint (p.sampling.seed, ==, G_GUINT64_CONSTANT (4294967295));
  g_assert_cmpfloat (p.cfg_scale, ==, 10.0);
  g_assert_cmpint (p.sampling.repeat_last_n, ==, 8192);
  g_assert_cmpfloat (p.sampling.top_p, ==, 0.0);
}

/* Values of the wrong kind keep what was there; the rest of the object still applies. */
static void
test_json_wrong_types (void)
{
  g_auto (HanashiParams) p;
  hanashi_params_init_default (&p);
  HanashiParams defaults;
  hanashi_params_init_default (&defaults);
  g_assert_true (hanashi_params_update_from_json (&p,
    "{\"temperature\": \"very hot\", \"top_k\": true, \"top_p\": null, \"min_p\": [1],"
    " \"stop\": \"not a list\", \"grammar_mode\": \"rm -rf\", \"grammar\": 42, \"cfg_scale\": 2.5}", NULL));
  g_assert_cmpfloat (p.sampling.temperature, ==, defaults.sampling.temperature);
  g_assert_cmpint (p.sampling.top_k, ==, defaults.sampling.top_k);
  g_assert_cmpfloat (p.sampling.top_p, ==, defaults.sampling.top_p);
  g_assert_cmpfloat (p.sampling.min_p, ==, defaults.sampling.min_p);
  g_assert_cmpuint (g_strv_length (p.stop), ==, 0);
  g_assert_cmpint (p.grammar_mode, ==, HANASHI_GRAMMAR_MODE_NONE);
  g_assert_cmpstr (p.grammar, ==, "");
  g_assert_cmpfloat (p.cfg_scale, ==, 2.5);
  hanashi_params_clear (&defaults);

  /* Not an object at all: an error, and nothing changes. */
  g_autoptr (GError) error = NULL;
  g_assert_false (hanashi_params_update_from_json (&p, "[1, 2, 3]", &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  g_assert_false (hanashi_params_update_from_json (&p, "{\"temperature\": ", &error));
  g_assert_nonnull (error);
  g_assert_cmpfloat (p.cfg_scale, ==, 2.5);
}

/* Too many, empty, over-long and non-string stop strings are dropped, never passed on. */
static void
test_json_stop_strings (void)
{
  GString *json = g_string_new ("{\"stop\": [\"\", 7, ");
  g_autofree char *huge = g_strnfill (100000, 'x');
  g_string_append_printf (json, "\"%s\"", huge);
  for (int i = 0; i < 100; i++)
    g_string_append_printf (json, ", \"stop%d\"", i);
  g_string_append (json, "]}");
  g_auto (HanashiParams) p;
  hanashi_params_init_default (&p);
  g_assert_true (hanashi_params_update_from_json (&p, json->str, NULL));
  g_string_free (json, TRUE);
  g_assert_cmpuint (g_strv_length (p.stop), ==, HANASHI_PARAMS_MAX_STOP);
  g_assert_cmpstr (p.stop[0], ==, "stop0");
  g_assert_cmpstr (p.stop[HANASHI_PARAMS_MAX_STOP - 1], ==, "stop15");
}

/* NaN and infinities set directly (as a corrupted double in memory or a bad binding would). */
static void
test_non_finite (void)
{
  g_auto (HanashiParams) p;
  hanashi_params_init_default (&p);
  double min, max, def;
  g_assert_true (hanashi_params_get_range ("temperature", &min, &max, &def));
  g_assert_true (hanashi_params_set_number (&p, "temperature", NAN));
  g_assert_cmpfloat (p.sampling.temperature, ==, (float) def);
  g_assert_true (hanashi_params_set_number (&p, "temperature", INFINITY));
  g_assert_cmpfloat (p.sampling.temperature, ==, max);
  g_assert_true (hanashi_params_set_number (&p, "top_k", -INFINITY));
  g_assert_cmpint (p.sampling.top_k, ==, (int) range_min ("top_k"));
  p.sampling.top_p = NAN;
  p.grammar_mode = (HanashiGrammarMode) 77;
  hanashi_params_clamp (&p);
  g_assert_true (hanashi_params_get_range ("top_p", &min, &max, &def));
  g_assert_cmpfloat (p.sampling.top_p, ==, (float) def);
  g_assert_cmpint (p.grammar_mode, ==, HANASHI_GRAMMAR_MODE_NONE);
}

/* A settings file edited by hand: numbers outside the schema's ranges are ignored by
 * GSettings (the default is used), and the default parameters are clamped on load. */
static void
test_hand_edited_settings (void)
{
  g_autofree char *dir = g_dir_make_tmp ("hanashi-settings-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "keyfile", NULL);
  g_assert_true (g_file_set_contents (path,
    "[io/github/hanashi/Hanashi]\n"
    "context-size=999999999\n"
    "n-threads=-40\n"
    "batch-size=0\n"
    "session-cache-limit-mb=-1\n"
    "default-params='{\"temperature\": 1e9, \"top_k\": -3, \"max_new_tokens\": 1e15, \"seed\": -7}'\n",
    -1, NULL));
  g_autoptr (GSettingsBackend) backend = g_keyfile_settings_backend_new (path, "/", NULL);
  g_autoptr (GSettings) settings = g_settings_new_with_backend ("io.github.hanashi.Hanashi", backend);
  g_assert_cmpint (g_settings_get_int (settings, "context-size"), ==, 4096);
  g_assert_cmpint (g_settings_get_int (settings, "n-threads"), ==, 0);
  g_assert_cmpint (g_settings_get_int (settings, "batch-size"), ==, 512);
  g_assert_cmpint (g_settings_get_int (settings, "session-cache-limit-mb"), ==, 2048);

  g_auto (HanashiParams) p;
  hanashi_params_load_defaults (&p, settings);
  g_assert_cmpfloat (p.sampling.temperature, ==, 5.0);
  g_assert_cmpint (p.sampling.top_k, ==, 0);
  g_assert_cmpint (p.sampling.max_new_tokens, ==, 131072);
  g_assert_cmpuint (p.sampling.seed, ==, HN_SAMPLER_SEED_RANDOM);

  g_remove (path);
  g_rmdir (dir);
}

/* The GSettings default of "default-params" holds no numbers of its own: with nothing
 * stored, the app's defaults are the engine table's, every one. */
static void
test_settings_default_is_the_table (void)
{
  g_autoptr (GSettingsBackend) backend = g_memory_settings_backend_new ();
  g_autoptr (GSettings) settings = g_settings_new_with_backend ("io.github.hanashi.Hanashi", backend);
  g_auto (HanashiParams) p;
  hanashi_params_load_defaults (&p, settings);
  HnSamplerParams table_defaults;
  hn_sampler_params_init (&table_defaults);
  size_t n = 0;
  const HnParamDesc *table = hn_params_table (&n);
  for (size_t i = 0; i < n; i++)
    {
      if (hn_param_get (&table[i], &p.sampling) != hn_param_get (&table[i], &table_defaults))
        g_error ("the settings' default %s is %g, the table's %g", table[i].key,
                 hn_param_get (&table[i], &p.sampling), hn_param_get (&table[i], &table_defaults));
      /* the JSON form keeps the table's default too */
      g_autofree char *json = hanashi_params_to_json (&p);
      g_auto (HanashiParams) back;
      hanashi_params_init_default (&back);
      hn_param_set (&table[i], &back.sampling, table[i].max);
      g_assert_true (hanashi_params_update_from_json (&back, json, NULL));
      g_assert_cmpfloat (hn_param_get (&table[i], &back.sampling), ==, hn_param_get (&table[i], &table_defaults));
    }
}

/* The shipped presets are overrides of the table: each sets every row outside the
 * output group (Balanced: to the table's defaults), names only table keys, and stays
 * inside the app's ranges; the seed and the length are never touched. */
static void
test_shipped_presets_follow_the_table (void)
{
  const char *names[] = { "Precise", "Balanced", "Creative" };
  G_STATIC_ASSERT (G_N_ELEMENTS (names) == HANASHI_N_SHIPPED_PRESETS);
  size_t n = 0;
  const HnParamDesc *table = hn_params_table (&n);
  HnSamplerParams defaults;
  hn_sampler_params_init (&defaults);
  for (guint k = 0; k < G_N_ELEMENTS (names); k++)
    {
      g_autofree char *json = hanashi_presets_lookup (names[k]);
      g_assert_nonnull (json);
      g_autoptr (JsonNode) root = json_from_string (json, NULL);
      g_assert_true (JSON_NODE_HOLDS_OBJECT (root));
      JsonObject *object = json_node_get_object (root);
      g_autoptr (GList) members = json_object_get_members (object);
      for (GList *m = members; m; m = m->next)
        {
          const HnParamDesc *d = hn_params_find (m->data);
          if (d == NULL)
            g_error ("preset %s sets %s, which is not in the table", names[k], (const char *) m->data);
          g_assert_cmpint (d->group, !=, HN_PARAM_GROUP_OUTPUT);
          double v = json_object_get_double_member (object, m->data);
          g_assert_cmpfloat (v, >=, d->ui_min);
          g_assert_cmpfloat (v, <=, d->ui_max);
        }
      for (size_t i = 0; i < n; i++)
        g_assert_true (json_object_has_member (object, table[i].key) == (table[i].group != HN_PARAM_GROUP_OUTPUT));

      /* applied over a set with every row moved, it leaves the output rows alone */
      g_auto (HanashiParams) p;
      hanashi_params_init_default (&p);
      for (size_t i = 0; i < n; i++)
        hanashi_params_set_number (&p, table[i].key, table[i].ui_max);
      g_assert_true (hanashi_params_update_from_json (&p, json, NULL));
      for (size_t i = 0; i < n; i++)
        if (table[i].group == HN_PARAM_GROUP_OUTPUT)
          g_assert_cmpfloat (hn_param_get (&table[i], &p.sampling), ==, table[i].ui_max);
        else if (k == 1)
          g_assert_cmpfloat (hn_param_get (&table[i], &p.sampling), ==, hn_param_get (&table[i], &defaults));
    }
  /* Precise is colder than Balanced, Creative warmer */
  g_auto (HanashiParams) precise;
  hanashi_params_init_default (&precise);
  g_autofree char *precise_json = hanashi_presets_lookup ("Precise");
  g_assert_true (hanashi_params_update_from_json (&precise, precise_json, NULL));
  g_assert_cmpfloat (precise.sampling.temperature, <, defaults.temperature);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/params-limits/json-absurd-numbers", test_json_absurd_numbers);
  g_test_add_func ("/params-limits/json-wrong-types", test_json_wrong_types);
  g_test_add_func ("/params-limits/json-stop-strings", test_json_stop_strings);
  g_test_add_func ("/params-limits/non-finite", test_non_finite);
  g_test_add_func ("/params-limits/hand-edited-settings", test_hand_edited_settings);
  g_test_add_func ("/params-limits/settings-default-is-the-table", test_settings_default_is_the_table);
  g_test_add_func ("/params-limits/shipped-presets-follow-the-table", test_shipped_presets_follow_the_table);
  return g_test_run ();
}
