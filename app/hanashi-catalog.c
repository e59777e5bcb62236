/* hanashi-catalog.c: reading the recommended-models catalog and judging memory fit.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-catalog"

#include "config.h"

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "hanashi-catalog.h"
#include "hanashi-download.h"
#include "hanashi-engine.h"

/* The descriptions in data/models.json, repeated for translation: xgettext cannot read
 * JSON, so they are marked here, and the Models page shows each through gettext.  The
 * data suite's models-json test fails when a description in the file is missing here. */
static const char *const catalog_descriptions[] G_GNUC_UNUSED = {
  N_("A tiny English chat model: the quickest download to try Hanashi."),
  N_("The smallest Qwen2.5 chat model: quick on any laptop, good at short answers and simple structured output."),
  N_("The smallest Qwen3, from Qwen's own repository: thinks before it answers, or answers directly with /no_think."),
  N_("Google's smallest Gemma 3: fluent in many languages for its size."),
  N_("Meta's small Llama 3.2 chat model, tuned for dialogue and summaries."),
  N_("The largest SmolLM2: better reasoning and writing, still light enough for a laptop."),
  N_("A capable multilingual assistant that still runs comfortably on a CPU."),
  N_("A small Qwen3 with thinking and non-thinking modes; a good everyday model for a laptop."),
  N_("The larger Llama 3.2: noticeably better answers, at about twice the memory of the 1B."),
  N_("A strong multilingual Gemma 3 for chat and writing (text only in Hanashi)."),
  N_("Microsoft's compact model, good at reasoning, maths and code."),
  N_("Qwen3 at 4B parameters: clearly stronger reasoning, for computers with 8 GB of memory or more."),
  N_("A mixture of experts: the knowledge of a 30B model at the speed of a 3B one, for computers with 32 GB of memory."),
};

void
hanashi_catalog_entry_free (HanashiCatalogEntry *entry)
{
  if (!entry)
    return;
  g_free (entry->id);
  g_free (entry->name);
  g_free (entry->family);
  g_free (entry->repo);
  g_free (entry->revision);
  g_free (entry->file);
  g_free (entry->sha256);
  g_free (entry->parameters);
  g_free (entry->license);
  g_free (entry->description);
  g_free (entry);
}

static char *
dup_string_member (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);
  if (!node || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return g_strdup (json_node_get_string (node));
}

/* A positive whole number of bytes; 0 when missing, negative, fractional or not a number. */
static guint64
bytes_member (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);
  if (!node || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    return 0;
  gint64 value = json_node_get_int (node);
  return value > 0 ? (guint64) value : 0;
}

static gboolean
is_commit_id (const char *text)
{
  if (!text || strlen (text) != 40)
    return FALSE;
  for (const char *c = text; *c; c++)
    if (!g_ascii_isxdigit (*c))
      return FALSE;
  return TRUE;
}

static HanashiCatalogEntry *
parse_entry (JsonObject *m)
{
  g_autoptr (HanashiCatalogEntry) entry = g_new0 (HanashiCatalogEntry, 1);
  entry->id = dup_string_member (m, "id");
  entry->name = dup_string_member (m, "name");
  entry->family = dup_string_member (m, "family");
  entry->repo = dup_string_member (m, "repo");
  entry->revision = dup_string_member (m, "revision");
  entry->file = dup_string_member (m, "file");
  entry->sha256 = dup_string_member (m, "sha256");
  entry->parameters = dup_string_member (m, "parameters");
  entry->license = dup_string_member (m, "license");
  entry->description = dup_string_member (m, "description");
  entry->size_bytes = bytes_member (m, "size_bytes");
  entry->memory_bytes = bytes_member (m, "memory_bytes");

  if (!entry->id || !entry->name || !entry->repo || !entry->file || !g_str_has_suffix (entry->file, ".gguf")
      || strchr (entry->file, '/') || entry->file[0] == '.' || !is_commit_id (entry->revision)
      || entry->size_bytes == 0 || !hanashi_download_sha256_is_valid (entry->sha256))
    return NULL;
  char *lower = g_ascii_strdown (entry->sha256, -1);
  g_free (entry->sha256);
  entry->sha256 = lower;
  /* Less than the weights themselves is not a memory figure; the weights are the floor. */
  if (entry->memory_bytes < entry->size_bytes)
    entry->memory_bytes = entry->size_bytes;
  if (!entry->family)
    entry->family = g_strdup ("");
  if (!entry->parameters)
    entry->parameters = g_strdup ("");
  if (!entry->license)
    entry->license = g_strdup ("");
  if (!entry->description)
    entry->description = g_strdup ("");
  return g_steal_pointer (&entry);
}

GPtrArray *
hanashi_catalog_parse (GBytes *json, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  gsize size = 0;
  const char *data = g_bytes_get_data (json, &size);
  if (!json_parser_load_from_data (parser, data ? data : "", (gssize) size, error))
    return NULL;
  JsonNode *root = json_parser_get_root (parser);
  JsonNode *models = root && JSON_NODE_HOLDS_OBJECT (root)
                       ? json_object_get_member (json_node_get_object (root), "models")
                       : NULL;
  if (!models || !JSON_NODE_HOLDS_ARRAY (models))
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                           _("The model catalog has no list of models."));
      return NULL;
    }
  GPtrArray *entries = g_ptr_array_new_with_free_func ((GDestroyNotify) hanashi_catalog_entry_free);
  JsonArray *array = json_node_get_array (models);
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      JsonNode *node = json_array_get_element (array, i);
      HanashiCatalogEntry *entry = JSON_NODE_HOLDS_OBJECT (node) ? parse_entry (json_node_get_object (node)) : NULL;
      if (entry)
        g_ptr_array_add (entries, entry);
      else
        g_message ("models.json: entry %u is incomplete (name, repository, file, revision, size and "
                   "SHA-256 are required) and is not offered", i);
    }
  return entries;
}

GPtrArray *
hanashi_catalog_load_default (void)
{
  g_autoptr (GBytes) bytes = g_resources_lookup_data ("/io/github/hanashi/Hanashi/models.json", 0, NULL);
  g_autoptr (GError) error = NULL;
  GPtrArray *entries = bytes ? hanashi_catalog_parse (bytes, &error) : NULL;
  if (!entries)
    {
      if (error)
        g_warning ("models.json: %s", error->message);
      entries = g_ptr_array_new_with_free_func ((GDestroyNotify) hanashi_catalog_entry_free);
    }
  return entries;
}

char *
hanashi_catalog_entry_uri (const HanashiCatalogEntry *entry, GError **error)
{
  return hanashi_download_resolve_uri_at (entry->repo, entry->file, entry->revision, error);
}

gboolean
hanashi_catalog_fits_memory (guint64 need, char **text)
{
  guint64 available = 0;
  g_autofree char *need_text = g_format_size (need);
  if (!hanashi_memory_available (&available))
    {
      /* Unknown: say what it needs rather than guess. */
      if (text)
        *text = g_strdup_printf (_("Needs %s of memory"), need_text);
      return TRUE;
    }
  gboolean fits = need <= available;
  if (text)
    {
      g_autofree char *have_text = g_format_size (available);
      *text = fits ? g_strdup_printf (_("Fits in memory (needs %s)"), need_text)
                   /* Translators: e.g. "Needs 19.3 GB of memory; this computer has 16.0 GB available" */
                   : g_strdup_printf (_("Needs %s of memory; this computer has %s available"), need_text, have_text);
    }
  return fits;
}
