/* hanashi-conversation-io.c — export to Markdown and JSON, validated atomic JSON import
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-conversation-io"

#include "config.h"

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>

#include "hanashi-conversation-io.h"
#include "hanashi-markdown.h"
#include "hanashi-token-probs.h"

G_DEFINE_QUARK (hanashi-conversation-io-error-quark, hanashi_conversation_io_error)

void
hanashi_conversation_data_free (HanashiConversationData *data)
{
  if (!data)
    return;
  hanashi_stored_conversation_free (data->conversation);
  g_clear_pointer (&data->messages, g_ptr_array_unref);
  g_free (data);
}

HanashiConversationData *
hanashi_conversation_data_load (HanashiStore *store, gint64 id, GError **error)
{
  g_autoptr(HanashiConversationData) data = g_new0 (HanashiConversationData, 1);
  data->conversation = hanashi_store_dup_conversation (store, id, error);
  if (!data->conversation)
    return NULL;
  data->messages = hanashi_store_list_messages (store, id, error);
  if (!data->messages)
    return NULL;
  return g_steal_pointer (&data);
}

static const char *
role_heading (const char *role)
{
  if (g_strcmp0 (role, "user") == 0)
    return _("User");
  if (g_strcmp0 (role, "assistant") == 0)
    return _("Assistant");
  return _("System");
}

char *
hanashi_conversation_data_to_markdown (const HanashiConversationData *data)
{
  const HanashiStoredConversation *c = data->conversation;
  GString *out = g_string_new (NULL);
  g_string_append_printf (out, "# %s\n", c->title && *c->title ? c->title : _("Untitled Chat"));
  if (c->system_prompt && *c->system_prompt)
    g_string_append_printf (out, "\n## %s\n\n%s\n", _("System Prompt"), c->system_prompt);

  /* Alternatives make a tree; Markdown shows the one thread that ends at the newest message. */
  g_autoptr(GPtrArray) thread = g_ptr_array_new ();
  g_autoptr(GHashTable) by_id = g_hash_table_new (g_int64_hash, g_int64_equal);
  for (guint i = 0; i < data->messages->len; i++) {
    HanashiStoredMessage *m = g_ptr_array_index (data->messages, i);
    g_hash_table_insert (by_id, &m->id, m);
  }
  HanashiStoredMessage *m = data->messages->len
    ? g_ptr_array_index (data->messages, data->messages->len - 1) : NULL;
  while (m && thread->len <= data->messages->len) {
    g_ptr_array_add (thread, m);
    m = m->parent_id ? g_hash_table_lookup (by_id, &m->parent_id) : NULL;
  }
  for (guint i = thread->len; i > 0; i--) {
    m = g_ptr_array_index (thread, i - 1);
    g_string_append_printf (out, "\n## %s\n\n%s\n", role_heading (m->role), m->text);
  }
  return g_string_free (out, FALSE);
}

char *
hanashi_conversation_export_markdown (HanashiStore *store, gint64 id, GError **error)
{
  g_autoptr(HanashiConversationData) data = hanashi_conversation_data_load (store, id, error);
  return data ? hanashi_conversation_data_to_markdown (data) : NULL;
}

static JsonNode *
params_node (const char *params_json)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  if (params_json && json_parser_load_from_data (parser, params_json, -1, NULL)) {
    JsonNode *root = json_parser_get_root (parser);
    if (root && JSON_NODE_HOLDS_OBJECT (root))
      return json_node_copy (root);
  }
  JsonNode *empty = json_node_new (JSON_NODE_OBJECT);
  json_node_take_object (empty, json_object_new ());
  return empty;
}

char *
hanashi_conversation_data_to_json (const HanashiConversationData *data)
{
  const HanashiStoredConversation *c = data->conversation;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "format");
  json_builder_add_string_value (b, HANASHI_CONVERSATION_FORMAT);
  json_builder_set_member_name (b, "version");
  json_builder_add_int_value (b, HANASHI_CONVERSATION_FORMAT_VERSION);
  json_builder_set_member_name (b, "title");
  json_builder_add_string_value (b, c->title ? c->title : "");
  json_builder_set_member_name (b, "system_prompt");
  json_builder_add_string_value (b, c->system_prompt ? c->system_prompt : "");
  json_builder_set_member_name (b, "created");
  json_builder_add_int_value (b, c->created);
  json_builder_set_member_name (b, "updated");
  json_builder_add_int_value (b, c->updated);
  json_builder_set_member_name (b, "parameters");
  json_builder_add_value (b, params_node (c->params_json));
  json_builder_set_member_name (b, "messages");
  json_builder_begin_array (b);
  for (guint i = 0; i < data->messages->len; i++) {
    const HanashiStoredMessage *m = g_ptr_array_index (data->messages, i);
    json_builder_begin_object (b);
    json_builder_set_member_name (b, "id");
    json_builder_add_int_value (b, m->id);
    json_builder_set_member_name (b, "parent");
    json_builder_add_int_value (b, m->parent_id);
    json_builder_set_member_name (b, "group");
    json_builder_add_int_value (b, m->alternative_group);
    json_builder_set_member_name (b, "role");
    json_builder_add_string_value (b, m->role);
    json_builder_set_member_name (b, "text");
    json_builder_add_string_value (b, m->text ? m->text : "");
    json_builder_set_member_name (b, "created");
    json_builder_add_int_value (b, m->created);
    json_builder_set_member_name (b, "token_count");
    json_builder_add_int_value (b, m->token_count);
    json_builder_set_member_name (b, "generation_seconds");
    json_builder_add_double_value (b, m->generation_seconds);
    json_builder_set_member_name (b, "complete");
    json_builder_add_boolean_value (b, m->complete);
    json_builder_set_member_name (b, "shown");
    json_builder_add_boolean_value (b, m->shown);
    json_builder_set_member_name (b, "parameters");
    json_builder_add_value (b, params_node (m->params_json));
    if (m->token_probs != NULL && g_bytes_get_size (m->token_probs) > 0) {
      /* what the sampler saw for each token, as hanashi-cli generate --probs prints it */
      json_builder_set_member_name (b, "token_probs");
      json_builder_add_value (b, hanashi_token_probs_to_json (m->token_probs));
    }
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
  json_builder_end_object (b);

  g_autoptr(JsonNode) root = json_builder_get_root (b);
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  json_generator_set_pretty (gen, TRUE);
  json_generator_set_indent (gen, 2);
  json_generator_set_root (gen, root);
  char *text = json_generator_to_data (gen, NULL);
  /* Files end with a newline like any text file. */
  char *with_newline = g_strconcat (text, "\n", NULL);
  g_free (text);
  return with_newline;
}

char *
hanashi_conversation_export_json (HanashiStore *store, gint64 id, GError **error)
{
  g_autoptr(HanashiConversationData) data = hanashi_conversation_data_load (store, id, error);
  return data ? hanashi_conversation_data_to_json (data) : NULL;
}

/* ---- import ---- */

static gboolean
invalid (GError **error, const char *format, ...) G_GNUC_PRINTF (2, 3);

static gboolean
invalid (GError **error, const char *format, ...)
{
  va_list args;
  va_start (args, format);
  g_autofree char *message = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error_literal (error, HANASHI_CONVERSATION_IO_ERROR, HANASHI_CONVERSATION_IO_ERROR_INVALID, message);
  return FALSE;
}

/* @where names the object for the message, e.g. "the conversation" or "message 3". */
static gboolean
get_string (JsonObject *o, const char *name, gboolean required, const char *fallback,
            char **out, const char *where, GError **error)
{
  JsonNode *n = json_object_get_member (o, name);
  if (!n) {
    if (required)
      return invalid (error, _("The field “%s” is missing in %s."), name, where);
    *out = g_strdup (fallback);
    return TRUE;
  }
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    return invalid (error, _("The field “%s” in %s must be text."), name, where);
  /* JSON escapes can spell lone surrogates, which json-glib passes on as invalid UTF-8
   * (found by tests/fuzz/fuzz-import: such a file imported but could not be exported) */
  const char *text = json_node_get_string (n);
  if (!g_utf8_validate (text, -1, NULL))
    return invalid (error, _("The field “%s” in %s contains characters that are not valid Unicode."), name, where);
  *out = g_strdup (text);
  return TRUE;
}

static gboolean
get_bool (JsonObject *o, const char *name, gboolean fallback, gboolean *out, const char *where, GError **error)
{
  JsonNode *n = json_object_get_member (o, name);
  if (!n) {
    *out = fallback;
    return TRUE;
  }
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
    return invalid (error, _("The field “%s” in %s must be true or false."), name, where);
  *out = json_node_get_boolean (n);
  return TRUE;
}

static gboolean
get_int (JsonObject *o, const char *name, gboolean required, gint64 fallback, gint64 min, gint64 max,
         gint64 *out, const char *where, GError **error)
{
  JsonNode *n = json_object_get_member (o, name);
  if (!n) {
    if (required)
      return invalid (error, _("The field “%s” is missing in %s."), name, where);
    *out = fallback;
    return TRUE;
  }
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64)
    return invalid (error, _("The field “%s” in %s must be a whole number."), name, where);
  gint64 v = json_node_get_int (n);
  if (v < min || v > max) {
    g_autofree char *value = g_strdup_printf ("%" G_GINT64_FORMAT, v);
    /* Translators: the first %s is a field name, the second "message 3" or "the conversation",
     * the third the number found */
    return invalid (error, _("The field “%s” in %s is out of range (%s)."), name, where, value);
  }
  *out = v;
  return TRUE;
}

static gboolean
get_params (JsonObject *o, const char *name, char **out, const char *where, GError **error)
{
  JsonNode *n = json_object_get_member (o, name);
  if (!n) {
    *out = g_strdup ("{}");
    return TRUE;
  }
  if (!JSON_NODE_HOLDS_OBJECT (n))
    return invalid (error, _("The field “%s” in %s must be an object."), name, where);
  *out = json_to_string (n, FALSE);
  if (!g_utf8_validate (*out, -1, NULL)) {
    g_clear_pointer (out, g_free);
    return invalid (error, _("The field “%s” in %s contains characters that are not valid Unicode."), name, where);
  }
  return TRUE;
}

static HanashiStoredMessage *
parse_message (JsonNode *node, guint index, GHashTable *seen, GError **error)
{
  /* Translators: completes sentences like "The field “id” is missing in %s." */
  g_autofree char *where = g_strdup_printf (_("message %u"), index + 1);
  if (!JSON_NODE_HOLDS_OBJECT (node)) {
    invalid (error, _("Message %u is not an object."), index + 1);
    return NULL;
  }
  JsonObject *o = json_node_get_object (node);
  g_autoptr(HanashiStoredMessage) m = g_new0 (HanashiStoredMessage, 1);
  if (!get_int (o, "id", TRUE, 0, 1, G_MAXINT64, &m->id, where, error)
      || !get_int (o, "parent", FALSE, 0, 0, G_MAXINT64, &m->parent_id, where, error)
      || !get_int (o, "group", FALSE, m->id, 1, G_MAXINT64, &m->alternative_group, where, error)
      || !get_string (o, "role", TRUE, NULL, &m->role, where, error)
      || !get_string (o, "text", TRUE, NULL, &m->text, where, error)
      || !get_int (o, "created", FALSE, 0, 0, G_MAXINT64, &m->created, where, error)
      || !get_params (o, "parameters", &m->params_json, where, error))
    return NULL;
  gint64 tokens = 0;
  if (!get_int (o, "token_count", FALSE, 0, 0, G_MAXINT, &tokens, where, error))
    return NULL;
  m->token_count = (int) tokens;

  JsonNode *n = json_object_get_member (o, "generation_seconds");
  if (n) {
    GType t = JSON_NODE_HOLDS_VALUE (n) ? json_node_get_value_type (n) : G_TYPE_INVALID;
    if (t != G_TYPE_DOUBLE && t != G_TYPE_INT64) {
      invalid (error, _("The field “%s” in %s must be a number."), "generation_seconds", where);
      return NULL;
    }
    m->generation_seconds = t == G_TYPE_DOUBLE ? json_node_get_double (n) : (double) json_node_get_int (n);
    if (!(m->generation_seconds >= 0) || m->generation_seconds > 1e9) {
      invalid (error, _("The field “%s” in %s must be a number."), "generation_seconds", where);
      return NULL;
    }
  }
  if (!get_bool (o, "complete", TRUE, &m->complete, where, error)
      || !get_bool (o, "shown", FALSE, &m->shown, where, error))
    return NULL;
  JsonNode *probs = json_object_get_member (o, "token_probs");
  if (probs != NULL && !JSON_NODE_HOLDS_NULL (probs)) {
    g_autoptr(GError) probs_error = NULL;
    m->token_probs = hanashi_token_probs_from_json (probs, &probs_error);
    if (m->token_probs == NULL) {
      invalid (error, _("The field “%s” in %s is not a list of token probabilities."), "token_probs", where);
      return NULL;
    }
  }

  if (g_strcmp0 (m->role, "user") != 0 && g_strcmp0 (m->role, "assistant") != 0
      && g_strcmp0 (m->role, "system") != 0) {
    invalid (error, _("The role of %s must be “user”, “assistant” or “system”."), where);
    return NULL;
  }
  if (g_hash_table_contains (seen, &m->id)) {
    invalid (error, _("The id of %s is used by an earlier message."), where);
    return NULL;
  }
  if (m->parent_id != 0 && !g_hash_table_contains (seen, &m->parent_id)) {
    invalid (error, _("The parent of %s is not an earlier message."), where);
    return NULL;
  }
  if (m->alternative_group != m->id && !g_hash_table_contains (seen, &m->alternative_group)) {
    invalid (error, _("The group of %s is neither its own id nor an earlier message."), where);
    return NULL;
  }
  return g_steal_pointer (&m);
}

/* Exactly one message of each alternative group is shown: the last one the file marks
 * shown, or, in files without the field, the newest (as the v3 store migration does). */
static void
show_one_per_group (GPtrArray *messages)
{
  g_autoptr(GHashTable) chosen = g_hash_table_new (g_int64_hash, g_int64_equal);
  for (guint i = 0; i < messages->len; i++) {
    HanashiStoredMessage *m = g_ptr_array_index (messages, i);
    HanashiStoredMessage *pick = g_hash_table_lookup (chosen, &m->alternative_group);
    if (pick == NULL || m->shown || !pick->shown)
      g_hash_table_insert (chosen, &m->alternative_group, m);
  }
  for (guint i = 0; i < messages->len; i++) {
    HanashiStoredMessage *m = g_ptr_array_index (messages, i);
    m->shown = g_hash_table_lookup (chosen, &m->alternative_group) == m;
  }
}

HanashiConversationData *
hanashi_conversation_import_json_data (const char *data, gsize length, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) parse_error = NULL;
  if (length > G_MAXSSIZE || !json_parser_load_from_data (parser, data, (gssize) length, &parse_error)) {
    invalid (error, _("The file is not valid JSON: %s"), parse_error ? parse_error->message : _("too large"));
    return NULL;
  }
  JsonNode *root = json_parser_get_root (parser);
  if (!root) {
    invalid (error, _("The file is empty."));
    return NULL;
  }
  if (!JSON_NODE_HOLDS_OBJECT (root)) {
    invalid (error, _("The file does not hold a conversation (expected a JSON object)."));
    return NULL;
  }
  JsonObject *o = json_node_get_object (root);
  /* Translators: completes sentences like "The field “title” in %s must be text." */
  const char *where = _("the conversation");
  g_autofree char *format = NULL;
  gint64 version = 0;
  if (!get_string (o, "format", TRUE, NULL, &format, where, error))
    return NULL;
  if (g_strcmp0 (format, HANASHI_CONVERSATION_FORMAT) != 0) {
    g_set_error (error, HANASHI_CONVERSATION_IO_ERROR, HANASHI_CONVERSATION_IO_ERROR_UNSUPPORTED,
                 _("The file is not a Hanashi conversation (format “%s”)."), format);
    return NULL;
  }
  if (!get_int (o, "version", TRUE, 0, 1, G_MAXINT, &version, where, error))
    return NULL;
  if (version > HANASHI_CONVERSATION_FORMAT_VERSION) {
    g_set_error (error, HANASHI_CONVERSATION_IO_ERROR, HANASHI_CONVERSATION_IO_ERROR_UNSUPPORTED,
                 _("The conversation was saved by a newer Hanashi (format version %d)."), (int) version);
    return NULL;
  }

  g_autoptr(HanashiConversationData) result = g_new0 (HanashiConversationData, 1);
  HanashiStoredConversation *c = result->conversation = g_new0 (HanashiStoredConversation, 1);
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  if (!get_string (o, "title", FALSE, "", &c->title, where, error)
      || !get_string (o, "system_prompt", FALSE, "", &c->system_prompt, where, error)
      || !get_int (o, "created", FALSE, now, 0, G_MAXINT64, &c->created, where, error)
      || !get_int (o, "updated", FALSE, c->created, 0, G_MAXINT64, &c->updated, where, error)
      || !get_params (o, "parameters", &c->params_json, where, error))
    return NULL;

  JsonNode *messages = json_object_get_member (o, "messages");
  if (!messages) {
    invalid (error, _("The field “%s” is missing in %s."), "messages", where);
    return NULL;
  }
  if (!JSON_NODE_HOLDS_ARRAY (messages)) {
    invalid (error, _("The field “%s” in %s must be a list."), "messages", where);
    return NULL;
  }
  JsonArray *array = json_node_get_array (messages);
  guint n = json_array_get_length (array);
  result->messages = g_ptr_array_new_full (n, (GDestroyNotify) hanashi_stored_message_free);
  g_autoptr(GHashTable) seen = g_hash_table_new (g_int64_hash, g_int64_equal);
  for (guint i = 0; i < n; i++) {
    HanashiStoredMessage *m = parse_message (json_array_get_element (array, i), i, seen, error);
    if (!m)
      return NULL;
    g_ptr_array_add (result->messages, m);
    g_hash_table_add (seen, &m->id);
  }
  show_one_per_group (result->messages);
  return g_steal_pointer (&result);
}

gint64
hanashi_conversation_import_json (HanashiStore *store, const char *data, gsize length, GError **error)
{
  g_autoptr(HanashiConversationData) parsed = hanashi_conversation_import_json_data (data, length, error);
  if (!parsed)
    return 0;
  return hanashi_store_insert_conversation (store, parsed->conversation, parsed->messages, FALSE, error);
}

/* ---- titles ---- */

char *
hanashi_conversation_export_file_name (const char *title, const char *extension)
{
  g_autofree char *plain = hanashi_conversation_title_strip_markdown (title);
  GString *name = g_string_new (NULL);
  for (const char *p = plain; *p; p = g_utf8_next_char (p)) {
    gunichar c = g_utf8_get_char (p);
    if (c == '/' || c == '\\' || g_unichar_iscntrl (c))
      g_string_append_c (name, '-');
    else if (c == '.' && name->len == 0)
      continue;
    else
      g_string_append_unichar (name, c);
  }
  if (name->len == 0)
    g_string_append (name, _("New Chat"));
  g_string_append (name, extension);
  return g_string_free (name, FALSE);
}

static gboolean
is_markdown_delimiter (gunichar c)
{
  return c == '*' || c == '_' || c == '~' || c == '`';
}

/* Whether @p (NULL at either end of the text) counts as a space around a delimiter run. */
static gboolean
is_space_or_edge (const char *p, const char *text_end)
{
  if (!p || p >= text_end)
    return TRUE;
  return g_unichar_isspace (g_utf8_get_char (p));
}

char *
hanashi_conversation_title_strip_markdown (const char *text)
{
  if (!text || !g_utf8_validate (text, -1, NULL))
    return g_strdup ("");
  /* md4c removes the delimiters it can pair and the block markers; what it leaves is
   * literal text, including the unpaired delimiters of a title cut before its end. */
  g_autofree char *plain = hanashi_markdown_to_plain (text, -1);
  const char *end = plain + strlen (plain);
  GString *out = g_string_sized_new (strlen (plain));
  const char *p = plain;
  while (p < end) {
    gunichar c = g_utf8_get_char (p);
    if (!is_markdown_delimiter (c)) {
      const char *next = g_utf8_next_char (p);
      g_string_append_len (out, p, next - p);
      p = next;
      continue;
    }
    const char *run_end = p;
    while (run_end < end && (gunichar) *run_end == c)
      run_end++;
    gsize run = run_end - p;
    const char *before = p > plain ? g_utf8_prev_char (p) : NULL;
    /* A run that touches a word on exactly one side opens or closes emphasis or code. */
    gboolean opens = !is_space_or_edge (run_end, end);
    gboolean closes = before && !is_space_or_edge (before, end);
    gboolean markup;
    if (c == '`')
      markup = opens || closes;
    else if (c == '~')
      markup = run >= 2 && (opens || closes);
    else
      markup = opens != closes;
    if (!markup)
      g_string_append_len (out, p, run);
    p = run_end;
  }
  /* One line, as a title is shown. */
  g_autofree char *joined = g_string_free (out, FALSE);
  return hanashi_conversation_title_from_text (joined, G_MAXUINT);
}

static gboolean
is_cjk_break (gunichar c)
{
  return c == 0x3001 || c == 0x3002 || c == 0xFF0C || c == 0xFF0E || c == 0xFF01 || c == 0xFF1F
         || c == 0xFF1A || c == 0xFF1B;
}

char *
hanashi_conversation_title_from_text (const char *text, guint max_chars)
{
  g_return_val_if_fail (max_chars >= 2, g_strdup (""));
  if (!text || !g_utf8_validate (text, -1, NULL))
    return g_strdup ("");
  /* One line: every run of whitespace (newlines too) becomes one space. */
  GString *flat = g_string_new (NULL);
  gboolean pending_space = FALSE;
  for (const char *p = text; *p; p = g_utf8_next_char (p)) {
    gunichar c = g_utf8_get_char (p);
    if (g_unichar_isspace (c) || c == 0x3000) {
      pending_space = flat->len > 0;
      continue;
    }
    if (g_unichar_iscntrl (c))
      continue;
    if (pending_space)
      g_string_append_c (flat, ' ');
    pending_space = FALSE;
    g_string_append_unichar (flat, c);
  }
  glong chars = g_utf8_strlen (flat->str, -1);
  if ((guint) chars <= max_chars)
    return g_string_free (flat, FALSE);

  /* Room for the ellipsis; prefer the last boundary in the second half. */
  guint keep = max_chars - 1;
  const char *cut = g_utf8_offset_to_pointer (flat->str, keep);
  const char *best = NULL;
  guint index = 0;
  for (const char *p = flat->str; p < cut; p = g_utf8_next_char (p), index++) {
    gunichar c = g_utf8_get_char (p);
    if (index >= keep / 2) {
      if (c == ' ')
        best = p;
      else if (is_cjk_break (c))
        best = g_utf8_next_char (p);
    }
  }
  if (g_utf8_get_char (cut) == ' ')
    best = cut;
  const char *end = best ? best : cut;
  g_autofree char *head = g_strndup (flat->str, end - flat->str);
  g_string_free (flat, TRUE);
  g_strchomp (head);
  return g_strconcat (head, "…", NULL);
}
