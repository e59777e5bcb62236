/* hanashi-presets.c: shipped and user presets.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-presets"

#include "config.h"

#include <errno.h>
#include <glib/gi18n.h>
#include <json-glib/json-glib.h>

#include "hanashi-param-table.h"
#include "hanashi-presets.h"

typedef struct {
  const char *key;    /* a key of the engine's parameter table (hanashi-param-table.h) */
  double      value;
} PresetOverride;

#define MAX_OVERRIDES 16

typedef struct {
  const char     *name;   /* untranslated; shown through _() */
  PresetOverride  overrides[MAX_OVERRIDES];   /* ends at the first NULL key */
} ShippedPreset;

/* A shipped preset is the table's defaults for every sampling parameter (all but the
 * output group: seed and length stay as they are) with these values instead.  Precise
 * keeps to the most likely tokens, Creative lets the tail in; Balanced is the engine's
 * default chain. */
static const ShippedPreset shipped[HANASHI_N_SHIPPED_PRESETS] = {
  { N_("Precise"), { { "temperature", 0.2 }, { "top_k", 20 }, { "top_p", 0.9 }, { "min_p", 0.1 },
                     { "repeat_penalty", 1.05 } } },
  { N_("Balanced"), { { NULL, 0 } } },
  { N_("Creative"), { { "temperature", 1.1 }, { "top_k", 100 }, { "top_p", 0.98 }, { "min_p", 0.02 },
                      { "repeat_penalty", 1.1 }, { "repeat_last_n", 128 }, { "frequency_penalty", 0.1 },
                      { "presence_penalty", 0.1 } } },
};

/* The preset as parameter JSON: defaults of the table, then its overrides. */
static char *
shipped_json (const ShippedPreset *preset)
{
  g_autoptr (JsonObject) object = json_object_new ();
  guint n = 0;
  const HanashiParamInfo *table = hanashi_param_table (&n);
  for (guint i = 0; i < n; i++)
    if (table[i].group != HANASHI_PARAM_GROUP_OUTPUT)
      json_object_set_double_member (object, table[i].key, table[i].def);
  for (guint i = 0; i < MAX_OVERRIDES && preset->overrides[i].key; i++)
    {
      /* A key that is not in the table is a programming error: tests list every preset. */
      g_return_val_if_fail (hanashi_param_find (preset->overrides[i].key) != NULL, NULL);
      json_object_set_double_member (object, preset->overrides[i].key, preset->overrides[i].value);
    }
  g_autoptr (JsonNode) node = json_node_init_object (json_node_alloc (), object);
  return json_to_string (node, FALSE);
}

static char *
presets_path (void)
{
  return g_build_filename (g_get_user_config_dir (), "hanashi", "presets.json", NULL);
}

/* The user's presets as a JSON array (new and empty when the file is missing or broken:
 * a damaged file must not take the panel down). */
static JsonArray *
load_user_presets (void)
{
  g_autofree char *path = presets_path ();
  g_autofree char *text = NULL;
  if (g_file_get_contents (path, &text, NULL, NULL))
    {
      g_autoptr (JsonParser) parser = json_parser_new ();
      if (json_parser_load_from_data (parser, text, -1, NULL))
        {
          JsonNode *root = json_parser_get_root (parser);
          if (root && JSON_NODE_HOLDS_OBJECT (root))
            {
              JsonNode *list = json_object_get_member (json_node_get_object (root), "presets");
              if (list && JSON_NODE_HOLDS_ARRAY (list))
                return json_array_ref (json_node_get_array (list));
            }
        }
    }
  return json_array_new ();
}

static const char *
preset_name (JsonArray *array, guint i, JsonObject **params_out)
{
  JsonNode *node = json_array_get_element (array, i);
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return NULL;
  JsonObject *object = json_node_get_object (node);
  const char *name = json_object_get_string_member_with_default (object, "name", NULL);
  JsonNode *params = json_object_get_member (object, "params");
  if (!name || !*name || !params || !JSON_NODE_HOLDS_OBJECT (params))
    return NULL;
  if (params_out)
    *params_out = json_node_get_object (params);
  return name;
}

GStrv
hanashi_presets_list (void)
{
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  for (guint i = 0; i < G_N_ELEMENTS (shipped); i++)
    g_strv_builder_add (builder, _(shipped[i].name));
  g_autoptr (JsonArray) user = load_user_presets ();
  for (guint i = 0; i < json_array_get_length (user); i++)
    {
      const char *name = preset_name (user, i, NULL);
      if (name)
        g_strv_builder_add (builder, name);
    }
  return g_strv_builder_end (builder);
}

static gboolean
is_shipped_name (const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS (shipped); i++)
    if (g_str_equal (name, _(shipped[i].name)) || g_str_equal (name, shipped[i].name))
      return TRUE;
  return FALSE;
}

char *
hanashi_presets_lookup (const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS (shipped); i++)
    if (g_str_equal (name, _(shipped[i].name)) || g_str_equal (name, shipped[i].name))
      return shipped_json (&shipped[i]);

  g_autoptr (JsonArray) user = load_user_presets ();
  for (guint i = 0; i < json_array_get_length (user); i++)
    {
      JsonObject *params = NULL;
      const char *found = preset_name (user, i, &params);
      if (found && g_str_equal (found, name))
        {
          g_autoptr (JsonNode) node = json_node_init_object (json_node_alloc (), params);
          return json_to_string (node, FALSE);
        }
    }
  return NULL;
}

static gboolean
write_user_presets (JsonArray *array, GError **error)
{
  g_autoptr (JsonObject) root = json_object_new ();
  json_object_set_array_member (root, "presets", json_array_ref (array));
  g_autoptr (JsonNode) node = json_node_init_object (json_node_alloc (), root);
  g_autofree char *text = json_to_string (node, TRUE);
  g_autofree char *path = presets_path ();
  g_autofree char *dir = g_path_get_dirname (path);
  if (g_mkdir_with_parents (dir, 0700) != 0)
    {
      int saved = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (saved),
                   _("Could not create the folder %s: %s"), dir, g_strerror (saved));
      return FALSE;
    }
  return g_file_set_contents (path, text, -1, error);
}

gboolean
hanashi_presets_save (const char *name, const char *params_json, GError **error)
{
  g_autofree char *trimmed = g_strstrip (g_strdup (name ? name : ""));
  if (!*trimmed)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, _("A preset needs a name"));
      return FALSE;
    }
  if (is_shipped_name (trimmed))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_EXISTS,
                   _("“%s” is a built-in preset; choose another name"), trimmed);
      return FALSE;
    }
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, params_json, -1, error))
    return FALSE;
  JsonNode *params = json_parser_get_root (parser);
  if (!params || !JSON_NODE_HOLDS_OBJECT (params))
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                           _("The parameters are not a JSON object"));
      return FALSE;
    }

  g_autoptr (JsonArray) user = load_user_presets ();
  g_autoptr (JsonObject) entry = json_object_new ();
  json_object_set_string_member (entry, "name", trimmed);
  json_object_set_member (entry, "params", json_node_copy (params));

  g_autoptr (JsonArray) updated = json_array_new ();
  gboolean replaced = FALSE;
  for (guint i = 0; i < json_array_get_length (user); i++)
    {
      const char *found = preset_name (user, i, NULL);
      if (found && g_str_equal (found, trimmed))
        {
          json_array_add_object_element (updated, json_object_ref (entry));
          replaced = TRUE;
        }
      else
        json_array_add_element (updated, json_node_copy (json_array_get_element (user, i)));
    }
  if (!replaced)
    json_array_add_object_element (updated, json_object_ref (entry));
  return write_user_presets (updated, error);
}

gboolean
hanashi_presets_delete (const char *name, GError **error)
{
  g_autoptr (JsonArray) user = load_user_presets ();
  g_autoptr (JsonArray) updated = json_array_new ();
  for (guint i = 0; i < json_array_get_length (user); i++)
    {
      const char *found = preset_name (user, i, NULL);
      if (!found || !g_str_equal (found, name))
        json_array_add_element (updated, json_node_copy (json_array_get_element (user, i)));
    }
  return write_user_presets (updated, error);
}
