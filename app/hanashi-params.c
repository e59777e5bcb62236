/* hanashi-params.c: generation parameters as data, JSON and clamping.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-params"

#include "config.h"

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "hanashi-params.h"

#define GRAMMAR_RESOURCE_DIR "/io/github/hanashi/Hanashi/grammars"

/* The one knob that is not a sampler parameter: guidance belongs to the request.  Its
 * range is the engine's (hanashi-param-table.h), as for `hanashi-cli generate --cfg-scale`. */
#define CFG_SCALE_KEY "cfg_scale"
#define CFG_SCALE_DEFAULT 1.0

gboolean
hanashi_params_get_range (const char *key, double *min, double *max, double *def)
{
  const HanashiParamInfo *param = hanashi_param_find (key);
  if (param)
    {
      *min = param->ui_min, *max = param->ui_max, *def = param->def;
      return TRUE;
    }
  if (g_strcmp0 (key, CFG_SCALE_KEY) == 0)
    {
      *min = HANASHI_CFG_SCALE_MIN, *max = HANASHI_CFG_SCALE_MAX, *def = CFG_SCALE_DEFAULT;
      return TRUE;
    }
  return FALSE;
}

gboolean
hanashi_params_get_number (const HanashiParams *params, const char *key, double *value)
{
  const HanashiParamInfo *param = hanashi_param_find (key);
  if (param)
    *value = hanashi_param_get_value (param, &params->sampling);
  else if (g_strcmp0 (key, CFG_SCALE_KEY) == 0)
    *value = params->cfg_scale;
  else
    return FALSE;
  return TRUE;
}

/* Stores `value` pulled into the key's range; NaN becomes the default, so a hand-edited
 * file can never push the engine out of range. */
gboolean
hanashi_params_set_number (HanashiParams *params, const char *key, double value)
{
  const HanashiParamInfo *param = hanashi_param_find (key);
  if (param)
    {
      hanashi_param_set_value (param, &params->sampling, value);
      return TRUE;
    }
  if (g_strcmp0 (key, CFG_SCALE_KEY) == 0)
    {
      params->cfg_scale = isnan (value) ? CFG_SCALE_DEFAULT : CLAMP (value, HANASHI_CFG_SCALE_MIN, HANASHI_CFG_SCALE_MAX);
      return TRUE;
    }
  return FALSE;
}

/* Every numeric key: the table's, then CFG's. */
static guint
n_number_keys (void)
{
  guint n = 0;
  hanashi_param_table (&n);
  return n + 1;
}

static const char *
number_key (guint i)
{
  guint n = 0;
  const HanashiParamInfo *table = hanashi_param_table (&n);
  return i < n ? table[i].key : CFG_SCALE_KEY;
}

/* A float field as the decimal a person wrote: 0.8, not 0.800000011920929. */
static double
short_decimal (float value)
{
  char text[32];
  for (int digits = 1; digits <= 9; digits++)
    {
      g_snprintf (text, sizeof text, "%.*g", digits, (double) value);
      if ((float) g_ascii_strtod (text, NULL) == value)
        break;
    }
  return g_ascii_strtod (text, NULL);
}

void
hanashi_params_init_default (HanashiParams *params)
{
  memset (params, 0, sizeof *params);
  hanashi_sampling_init (&params->sampling);
  params->stop = g_new0 (char *, 1);
  params->cfg_negative = g_strdup ("");
  params->cfg_scale = 1.0;
  params->grammar_mode = HANASHI_GRAMMAR_MODE_NONE;
  params->grammar_name = g_strdup ("json");
  params->grammar = g_strdup ("");
  params->json_schema = g_strdup ("");
}

void
hanashi_params_clear (HanashiParams *params)
{
  g_clear_pointer (&params->stop, g_strfreev);
  g_clear_pointer (&params->cfg_negative, g_free);
  g_clear_pointer (&params->grammar_name, g_free);
  g_clear_pointer (&params->grammar, g_free);
  g_clear_pointer (&params->json_schema, g_free);
}

void
hanashi_params_copy (HanashiParams *dest, const HanashiParams *src)
{
  *dest = *src;
  dest->stop = g_strdupv (src->stop);
  dest->cfg_negative = g_strdup (src->cfg_negative);
  dest->grammar_name = g_strdup (src->grammar_name);
  dest->grammar = g_strdup (src->grammar);
  dest->json_schema = g_strdup (src->json_schema);
}

void
hanashi_params_clamp (HanashiParams *params)
{
  for (guint i = 0; i < n_number_keys (); i++)
    {
      double value = 0;
      hanashi_params_get_number (params, number_key (i), &value);
      hanashi_params_set_number (params, number_key (i), value);
    }
  if ((guint) params->grammar_mode > HANASHI_GRAMMAR_MODE_JSON_SCHEMA)
    params->grammar_mode = HANASHI_GRAMMAR_MODE_NONE;

  /* The engine takes at most HANASHI_SAMPLING_MAX_STOP non-empty stop strings of bounded length. */
  g_autoptr (GPtrArray) stops = g_ptr_array_new ();
  for (char **s = params->stop; s && *s; s++)
    if (**s && strlen (*s) <= HANASHI_SAMPLING_MAX_STOP_LEN && g_utf8_validate (*s, -1, NULL)
        && stops->len < HANASHI_PARAMS_MAX_STOP)
      g_ptr_array_add (stops, g_strdup (*s));
  g_ptr_array_add (stops, NULL);
  g_strfreev (params->stop);
  params->stop = (GStrv) g_ptr_array_free (g_steal_pointer (&stops), FALSE);
}

static const char *const grammar_mode_names[] = { "none", "shipped", "gbnf", "json-schema" };

static void
replace_string (char **slot, JsonObject *object, const char *member)
{
  JsonNode *node = json_object_get_member (object, member);
  if (node && JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING)
    {
      const char *text = json_node_get_string (node);
      if (g_utf8_validate (text, -1, NULL))
        {
          g_free (*slot);
          *slot = g_strdup (text);
        }
    }
}

gboolean
hanashi_params_update_from_json (HanashiParams *params, const char *json, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, json, -1, error))
    return FALSE;
  JsonNode *root = json_parser_get_root (parser);
  if (!root || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                           _("The parameters are not a JSON object"));
      return FALSE;
    }
  JsonObject *object = json_node_get_object (root);

  for (guint i = 0; i < n_number_keys (); i++)
    {
      const char *key = number_key (i);
      JsonNode *node = json_object_get_member (object, key);
      if (!node || !JSON_NODE_HOLDS_VALUE (node))
        continue;
      GType type = json_node_get_value_type (node);
      if (type == G_TYPE_INT64)
        hanashi_params_set_number (params, key, (double) json_node_get_int (node));
      else if (type == G_TYPE_DOUBLE)
        hanashi_params_set_number (params, key, json_node_get_double (node));
      else if (type == G_TYPE_BOOLEAN && hanashi_param_find (key) && hanashi_param_find (key)->type == HANASHI_PARAM_BOOL)
        hanashi_params_set_number (params, key, json_node_get_boolean (node) ? 1 : 0);
    }

  JsonNode *stop = json_object_get_member (object, "stop");
  if (stop && JSON_NODE_HOLDS_ARRAY (stop))
    {
      JsonArray *array = json_node_get_array (stop);
      g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
      for (guint i = 0; i < json_array_get_length (array); i++)
        {
          JsonNode *item = json_array_get_element (array, i);
          if (JSON_NODE_HOLDS_VALUE (item) && json_node_get_value_type (item) == G_TYPE_STRING)
            g_strv_builder_add (builder, json_node_get_string (item));
        }
      g_strfreev (params->stop);
      params->stop = g_strv_builder_end (builder);
    }

  replace_string (&params->cfg_negative, object, "cfg_negative_prompt");
  replace_string (&params->grammar_name, object, "grammar_name");
  replace_string (&params->grammar, object, "grammar");
  replace_string (&params->json_schema, object, "json_schema");

  const char *mode = json_object_get_string_member_with_default (object, "grammar_mode", NULL);
  for (guint i = 0; mode && i < G_N_ELEMENTS (grammar_mode_names); i++)
    if (g_str_equal (mode, grammar_mode_names[i]))
      params->grammar_mode = (HanashiGrammarMode) i;

  hanashi_params_clamp (params);
  return TRUE;
}

char *
hanashi_params_to_json (const HanashiParams *params)
{
  g_autoptr (JsonBuilder) builder = json_builder_new ();
  json_builder_begin_object (builder);
  guint n = 0;
  const HanashiParamInfo *table = hanashi_param_table (&n);
  for (guint i = 0; i < n; i++)
    {
      double value = hanashi_param_get_value (&table[i], &params->sampling);
      json_builder_set_member_name (builder, table[i].key);
      switch (table[i].type)
        {
        case HANASHI_PARAM_FLOAT: json_builder_add_double_value (builder, short_decimal ((float) value)); break;
        case HANASHI_PARAM_BOOL: json_builder_add_boolean_value (builder, value != 0); break;
        case HANASHI_PARAM_INT:
        case HANASHI_PARAM_SEED: json_builder_add_int_value (builder, (gint64) value); break;
        }
    }
  json_builder_set_member_name (builder, CFG_SCALE_KEY);
  json_builder_add_double_value (builder, params->cfg_scale);
  json_builder_set_member_name (builder, "stop");
  json_builder_begin_array (builder);
  for (char **s = params->stop; s && *s; s++)
    json_builder_add_string_value (builder, *s);
  json_builder_end_array (builder);
  json_builder_set_member_name (builder, "cfg_negative_prompt");
  json_builder_add_string_value (builder, params->cfg_negative);
  json_builder_set_member_name (builder, "grammar_mode");
  json_builder_add_string_value (builder, grammar_mode_names[params->grammar_mode]);
  json_builder_set_member_name (builder, "grammar_name");
  json_builder_add_string_value (builder, params->grammar_name);
  json_builder_set_member_name (builder, "grammar");
  json_builder_add_string_value (builder, params->grammar);
  json_builder_set_member_name (builder, "json_schema");
  json_builder_add_string_value (builder, params->json_schema);
  json_builder_end_object (builder);

  g_autoptr (JsonGenerator) generator = json_generator_new ();
  g_autoptr (JsonNode) root = json_builder_get_root (builder);
  json_generator_set_root (generator, root);
  return json_generator_to_data (generator, NULL);
}

void
hanashi_params_load_defaults (HanashiParams *params, GSettings *settings)
{
  hanashi_params_init_default (params);
  if (!settings)
    return;
  g_autofree char *json = g_settings_get_string (settings, "default-params");
  g_autoptr (GError) error = NULL;
  if (json && *json && !hanashi_params_update_from_json (params, json, &error))
    g_message ("Ignoring the default parameters in the settings: %s", error->message);
}

static int
compare_strings (const void *a, const void *b)
{
  return g_strcmp0 (*(char *const *) a, *(char *const *) b);
}

GStrv
hanashi_params_list_shipped_grammars (void)
{
  g_auto (GStrv) children = g_resources_enumerate_children (GRAMMAR_RESOURCE_DIR, 0, NULL);
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  for (char **c = children; c && *c; c++)
    if (g_str_has_suffix (*c, ".gbnf"))
      {
        g_autofree char *name = g_strndup (*c, strlen (*c) - strlen (".gbnf"));
        g_strv_builder_add (builder, name);
      }
  GStrv names = g_strv_builder_end (builder);
  qsort (names, g_strv_length (names), sizeof (char *), compare_strings);
  return names;
}

char *
hanashi_params_dup_shipped_grammar (const char *name)
{
  if (!name || strchr (name, '/'))
    return NULL;
  g_autofree char *path = g_strdup_printf (GRAMMAR_RESOURCE_DIR "/%s.gbnf", name);
  g_autoptr (GBytes) bytes = g_resources_lookup_data (path, 0, NULL);
  if (!bytes)
    return NULL;
  return g_strndup (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
}

/* Takes @compiled (NULL: failed) and says what was wrong in the app's words. */
static gboolean
take_compiled (HanashiGrammar *compiled, gboolean schema, GError *parse_error,
               HanashiGrammar **grammar_out, GError **error)
{
  if (compiled == NULL)
    {
      if (schema)
        g_set_error (error, HANASHI_ENGINE_ERROR, parse_error->code,
                     _("The JSON schema is invalid: %s"), parse_error->message);
      else
        g_set_error (error, HANASHI_ENGINE_ERROR, parse_error->code,
                     _("The grammar is invalid: %s"), parse_error->message);
      g_error_free (parse_error);
      return FALSE;
    }
  if (grammar_out)
    *grammar_out = compiled;
  else
    hanashi_grammar_unref (compiled);
  return TRUE;
}

gboolean
hanashi_params_compile_grammar (const HanashiParams *params, HanashiGrammar **grammar_out, GError **error)
{
  GError *parse_error = NULL;
  if (grammar_out)
    *grammar_out = NULL;
  switch (params->grammar_mode)
    {
    case HANASHI_GRAMMAR_MODE_NONE:
      return TRUE;
    case HANASHI_GRAMMAR_MODE_SHIPPED:
      {
        g_autofree char *text = hanashi_params_dup_shipped_grammar (params->grammar_name);
        if (!text)
          {
            g_set_error (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_GRAMMAR_INVALID,
                         _("There is no built-in grammar called “%s”"), params->grammar_name);
            return FALSE;
          }
        HanashiGrammar *compiled = hanashi_grammar_new_gbnf (text, &parse_error);
        return take_compiled (compiled, FALSE, parse_error, grammar_out, error);
      }
    case HANASHI_GRAMMAR_MODE_CUSTOM:
      {
        HanashiGrammar *compiled = hanashi_grammar_new_gbnf (params->grammar, &parse_error);
        return take_compiled (compiled, FALSE, parse_error, grammar_out, error);
      }
    case HANASHI_GRAMMAR_MODE_JSON_SCHEMA:
      {
        HanashiGrammar *compiled = hanashi_grammar_new_json_schema (params->json_schema, &parse_error);
        return take_compiled (compiled, TRUE, parse_error, grammar_out, error);
      }
    }
  return TRUE;
}

gboolean
hanashi_params_validate_grammar (const HanashiParams *params, GError **error)
{
  return hanashi_params_compile_grammar (params, NULL, error);
}

gboolean
hanashi_params_apply_to_request (const HanashiParams *params, HanashiGenerateRequest *req,
                                 GError **error)
{
  g_autoptr (HanashiGrammar) compiled = NULL;
  if (!hanashi_params_compile_grammar (params, &compiled, error))
    return FALSE;
  hanashi_params_apply_checked_to_request (params, compiled, req);
  return TRUE;
}

void
hanashi_params_apply_checked_to_request (const HanashiParams *params, HanashiGrammar *compiled,
                                         HanashiGenerateRequest *req)
{
  hanashi_generate_request_set_sampling (req, &params->sampling);
  for (char **s = params->stop; s && *s; s++)
    hanashi_generate_request_add_stop_string (req, *s);
  hanashi_generate_request_set_cfg (req, params->cfg_negative, params->cfg_scale);
  switch (params->grammar_mode)
    {
    case HANASHI_GRAMMAR_MODE_NONE:
      hanashi_generate_request_set_grammar (req, NULL);
      break;
    case HANASHI_GRAMMAR_MODE_SHIPPED:
      {
        g_autofree char *text = hanashi_params_dup_shipped_grammar (params->grammar_name);
        hanashi_generate_request_set_grammar (req, text);
        break;
      }
    case HANASHI_GRAMMAR_MODE_CUSTOM:
      hanashi_generate_request_set_grammar (req, params->grammar);
      break;
    case HANASHI_GRAMMAR_MODE_JSON_SCHEMA:
      hanashi_generate_request_set_json_schema (req, params->json_schema);
      break;
    }
  /* The engine thread uses the check's result instead of parsing the text again. */
  if (params->grammar_mode != HANASHI_GRAMMAR_MODE_NONE && compiled != NULL)
    hanashi_generate_request_set_compiled_grammar (req, compiled);
}
