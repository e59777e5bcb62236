/* hanashi-remote.c: the OpenAI-compatible client (see hanashi-remote.h).
 *
 * Requests are built and answers read with the engine's own JSON (hn-json); the transport is
 * libsoup 3's synchronous API, with a SoupSession per call so that the engine thread and the
 * CLI use the same code without sharing a session across threads.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hanashi-remote.h"
#include "hanashi-engine-backend.h"

#include "hn-json.h"
#include "hn-params.h"

#include <libsoup/soup.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK (hanashi-remote-error-quark, hanashi_remote_error)

/* An error answer is read whole only up to this size (its message is all we want). */
#define ERROR_BODY_LIMIT (64 * 1024)
/* A non-streamed answer (a server that ignores "stream") is read up to this size. */
#define PLAIN_BODY_LIMIT (16 * 1024 * 1024)
/* Seconds without a byte from the server before the call gives up; a long prompt on a busy
 * server can take this long before its first token. */
#define IO_TIMEOUT_SECONDS 300

struct _HanashiRemote {
  atomic_int ref_count;
  char *base_url;   /* as given */
  char *api_url;    /* normalized, ends in "/v1" */
  char *api_key;    /* NULL: none */
};

HanashiRemote *
hanashi_remote_new (const char *base_url, const char *api_key, GError **error)
{
  g_autofree char *trimmed = g_strstrip (g_strdup (base_url ? base_url : ""));
  g_autoptr (GUri) uri = g_uri_parse (trimmed, G_URI_FLAGS_NONE, NULL);
  const char *scheme = uri ? g_uri_get_scheme (uri) : NULL;
  if (uri == NULL || (g_ascii_strcasecmp (scheme, "http") != 0 && g_ascii_strcasecmp (scheme, "https") != 0)
      || g_uri_get_host (uri) == NULL || *g_uri_get_host (uri) == '\0')
    {
      g_set_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_INVALID_URL,
                   "“%s” is not a server address: give one like http://127.0.0.1:8080", trimmed);
      return NULL;
    }
  /* The API root: what was given without its trailing slashes and "/v1". */
  gsize len = strlen (trimmed);
  while (len > 0 && trimmed[len - 1] == '/')
    len--;
  if (len >= 3 && strncmp (trimmed + len - 3, "/v1", 3) == 0)
    len -= 3;
  while (len > 0 && trimmed[len - 1] == '/')
    len--;

  HanashiRemote *remote = g_new0 (HanashiRemote, 1);
  remote->ref_count = 1;
  remote->base_url = g_strdup (trimmed);
  remote->api_url = g_strdup_printf ("%.*s/v1", (int) len, trimmed);
  remote->api_key = api_key && *api_key ? g_strdup (api_key) : NULL;
  return remote;
}

HanashiRemote *
hanashi_remote_ref (HanashiRemote *remote)
{
  atomic_fetch_add (&remote->ref_count, 1);
  return remote;
}

void
hanashi_remote_unref (HanashiRemote *remote)
{
  if (remote == NULL || atomic_fetch_sub (&remote->ref_count, 1) != 1)
    return;
  g_free (remote->base_url);
  g_free (remote->api_url);
  if (remote->api_key)
    memset (remote->api_key, 0, strlen (remote->api_key));
  g_free (remote->api_key);
  g_free (remote);
}

const char *hanashi_remote_get_api_url (HanashiRemote *remote) { return remote->api_url; }
const char *hanashi_remote_get_base_url (HanashiRemote *remote) { return remote->base_url; }

/* ---- transport ------------------------------------------------------------------------ */

static SoupSession *
new_session (void)
{
  return soup_session_new_with_options ("timeout", IO_TIMEOUT_SECONDS, "idle-timeout", 30,
                                        "user-agent", "Hanashi", NULL);
}

static SoupMessage *
new_message (HanashiRemote *remote, const char *method, const char *path, GError **error)
{
  g_autofree char *url = g_strconcat (remote->api_url, path, NULL);
  SoupMessage *msg = soup_message_new (method, url);
  if (msg == NULL)
    {
      g_set_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_INVALID_URL,
                   "“%s” is not a server address: give one like http://127.0.0.1:8080", remote->base_url);
      return NULL;
    }
  if (remote->api_key)
    {
      g_autofree char *auth = g_strconcat ("Bearer ", remote->api_key, NULL);
      soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", auth);
    }
  return msg;
}

/* A transport failure (no answer at all) as a sentence. */
static void
set_transport_error (GError **error, HanashiRemote *remote, GError *cause)
{
  if (g_error_matches (cause, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    g_set_error_literal (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_CANCELLED,
                         "The request to the server was cancelled");
  else
    g_set_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_UNREACHABLE,
                 "Cannot reach the server at %s: %s", remote->base_url, cause->message);
}

/* Reads up to @limit bytes (the rest is ignored); NULL with @error on a read failure. */
static GBytes *
read_body (GInputStream *stream, gsize limit, GCancellable *cancellable, GError **error)
{
  GByteArray *data = g_byte_array_new ();
  char buf[8192];
  for (;;)
    {
      gssize n = g_input_stream_read (stream, buf, sizeof buf, cancellable, error);
      if (n < 0)
        {
          g_byte_array_unref (data);
          return NULL;
        }
      if (n == 0)
        break;
      if (data->len < limit)
        g_byte_array_append (data, (const guint8 *) buf, (guint) MIN ((gsize) n, limit - data->len));
    }
  return g_byte_array_free_to_bytes (data);
}

/* The server's own words from an OpenAI error answer ({"error": {"message": …}} or
 * {"error": "…"} or {"message": …} or {"detail": …}), or NULL. */
static char *
error_message_from_json (const HnJson *root)
{
  const HnJson *err = hn_json_object_get (root, "error");
  const HnJson *msg = NULL;
  if (hn_json_is_string (err))
    msg = err;
  else if (hn_json_is_object (err))
    msg = hn_json_object_get (err, "message");
  if (!hn_json_is_string (msg))
    msg = hn_json_object_get (root, "message");
  if (!hn_json_is_string (msg))
    msg = hn_json_object_get (root, "detail");
  if (!hn_json_is_string (msg) || hn_json_get_string_len (msg) == 0)
    return NULL;
  return g_strndup (hn_json_get_string (msg), hn_json_get_string_len (msg));
}

static char *
error_message_from_body (GBytes *body)
{
  gsize len = 0;
  const char *text = body ? g_bytes_get_data (body, &len) : NULL;
  if (len == 0)
    return NULL;
  HnJson *root = hn_json_parse (text, len, NULL);
  char *message = root ? error_message_from_json (root) : NULL;
  hn_json_free (root);
  if (message == NULL && g_utf8_validate (text, (gssize) len, NULL) && len < 300)
    message = g_strstrip (g_strndup (text, len));   /* a plain-text answer, short enough to show */
  if (message && *message == '\0')
    g_clear_pointer (&message, g_free);
  return message;
}

/* An HTTP error status (with the server's message when it gave one) as a sentence. */
static void
set_status_error (GError **error, HanashiRemote *remote, SoupMessage *msg, GBytes *body)
{
  guint status = soup_message_get_status (msg);
  g_autofree char *detail = error_message_from_body (body);
  g_autofree char *said = detail ? g_strdup_printf (" The server said: “%s”", detail) : g_strdup ("");
  if (status == SOUP_STATUS_UNAUTHORIZED || status == SOUP_STATUS_FORBIDDEN)
    g_set_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_UNAUTHORIZED,
                 "The server at %s refused the API key (HTTP %u): check the key.%s", remote->base_url, status, said);
  else if (status == SOUP_STATUS_NOT_FOUND)
    g_set_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_NOT_FOUND,
                 "The server at %s does not know this model or address (HTTP 404).%s", remote->base_url, said);
  else if (status >= 400 && status < 500)
    g_set_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_BAD_REQUEST,
                 "The server at %s refused the request (HTTP %u).%s", remote->base_url, status, said);
  else
    g_set_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_SERVER,
                 "The server at %s failed (HTTP %u).%s", remote->base_url, status, said);
}

/* Sends @msg; on a 2xx status returns the body stream, else NULL with @error. */
static GInputStream *
send_checked (HanashiRemote *remote, SoupSession *session, SoupMessage *msg, GCancellable *cancellable,
              GError **error)
{
  g_autoptr (GError) local = NULL;
  GInputStream *stream = soup_session_send (session, msg, cancellable, &local);
  if (stream == NULL)
    {
      set_transport_error (error, remote, local);
      return NULL;
    }
  if (SOUP_STATUS_IS_SUCCESSFUL (soup_message_get_status (msg)))
    return stream;
  g_autoptr (GBytes) body = read_body (stream, ERROR_BODY_LIMIT, cancellable, NULL);
  g_object_unref (stream);
  if (g_cancellable_is_cancelled (cancellable))
    g_set_error_literal (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_CANCELLED,
                         "The request to the server was cancelled");
  else
    set_status_error (error, remote, msg, body);
  return NULL;
}

/* ---- GET /v1/models -------------------------------------------------------------------- */

char **
hanashi_remote_list_models (HanashiRemote *remote, gboolean *is_hanashi_out, GCancellable *cancellable,
                            GError **error)
{
  g_autoptr (SoupSession) session = new_session ();
  g_autoptr (SoupMessage) msg = new_message (remote, "GET", "/models", error);
  if (msg == NULL)
    return NULL;
  g_autoptr (GInputStream) stream = send_checked (remote, session, msg, cancellable, error);
  if (stream == NULL)
    return NULL;
  g_autoptr (GError) local = NULL;
  g_autoptr (GBytes) body = read_body (stream, PLAIN_BODY_LIMIT, cancellable, &local);
  if (body == NULL)
    {
      set_transport_error (error, remote, local);
      return NULL;
    }
  gsize len = 0;
  const char *text = g_bytes_get_data (body, &len);
  HnJson *root = hn_json_parse (text ? text : "", len, NULL);
  const HnJson *data = hn_json_object_get (root, "data");
  if (!hn_json_is_array (data))
    {
      hn_json_free (root);
      g_set_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_PROTOCOL,
                   "The server at %s did not answer with a list of models: is it an OpenAI-compatible server?",
                   remote->base_url);
      return NULL;
    }
  GPtrArray *ids = g_ptr_array_new ();
  gboolean is_hanashi = FALSE;
  for (size_t i = 0; i < hn_json_length (data); i++)
    {
      const HnJson *model = hn_json_array_get (data, i);
      const HnJson *id = hn_json_object_get (model, "id");
      if (!hn_json_is_string (id) || hn_json_get_string_len (id) == 0)
        continue;
      g_ptr_array_add (ids, g_strndup (hn_json_get_string (id), hn_json_get_string_len (id)));
      const char *owner = hn_json_get_string (hn_json_object_get (model, "owned_by"));
      if (owner && g_ascii_strcasecmp (owner, "hanashi") == 0)
        is_hanashi = TRUE;
    }
  g_ptr_array_add (ids, NULL);
  hn_json_free (root);
  if (is_hanashi_out)
    *is_hanashi_out = is_hanashi;
  return (char **) g_ptr_array_free (ids, FALSE);
}

typedef struct {
  char **ids;
  gboolean is_hanashi;
} ModelList;

static void
model_list_free (ModelList *list)
{
  g_strfreev (list->ids);
  g_free (list);
}

static void
list_models_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  (void) source;
  GError *error = NULL;
  ModelList *list = g_new0 (ModelList, 1);
  list->ids = hanashi_remote_list_models (task_data, &list->is_hanashi, cancellable, &error);
  if (list->ids == NULL)
    {
      model_list_free (list);
      g_task_return_error (task, error);
    }
  else
    g_task_return_pointer (task, list, (GDestroyNotify) model_list_free);
}

void
hanashi_remote_list_models_async (HanashiRemote *remote, GCancellable *cancellable, GAsyncReadyCallback callback,
                                  gpointer user_data)
{
  g_autoptr (GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  g_task_set_source_tag (task, hanashi_remote_list_models_async);
  g_task_set_task_data (task, hanashi_remote_ref (remote), (GDestroyNotify) hanashi_remote_unref);
  g_task_run_in_thread (task, list_models_thread);
}

char **
hanashi_remote_list_models_finish (GAsyncResult *result, gboolean *is_hanashi_out, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  ModelList *list = g_task_propagate_pointer (G_TASK (result), error);
  if (list == NULL)
    return NULL;
  char **ids = g_steal_pointer (&list->ids);
  if (is_hanashi_out)
    *is_hanashi_out = list->is_hanashi;
  model_list_free (list);
  return ids;
}

/* ---- which parameters go where ------------------------------------------------------- */

/* The sampling parameters of OpenAI's chat completions API; every other one is Hanashi's. */
static const char *const openai_params[] = {
  "temperature", "top_p", "frequency_penalty", "presence_penalty", "seed", "max_new_tokens",
  "json_schema", "logit_bias", "stop",
};

const char *
hanashi_remote_param_unavailable_reason (const char *key, gboolean is_hanashi)
{
  if (is_hanashi || key == NULL)
    return NULL;
  for (gsize i = 0; i < G_N_ELEMENTS (openai_params); i++)
    if (strcmp (key, openai_params[i]) == 0)
      return NULL;
  return "OpenAI-compatible servers other than Hanashi do not take this parameter";
}

/* A float as the short decimal the user typed (0.7, not 0.699999988). */
static HnJson *
json_float (float value)
{
  char buf[32];
  g_snprintf (buf, sizeof buf, "%.6g", (double) value);
  return hn_json_new_double (g_ascii_strtod (buf, NULL));
}

static void
left_out (const HanashiRemoteCallbacks *callbacks, const char *what)
{
  if (callbacks && callbacks->on_left_out)
    {
      g_autofree char *message = g_strdup_printf (
        "%s was not sent: the server is not a Hanashi server, and other OpenAI-compatible servers do not take it",
        what);
      callbacks->on_left_out (callbacks->data, message);
    }
}

char *
hanashi_remote_build_chat_body (const HanashiRemoteChat *chat, const HanashiRemoteCallbacks *callbacks)
{
  HanashiGenerateRequest *req = chat->request;
  HnSamplerParams p, defaults;
  hanashi_generate_request_get_sampling (req, &p);
  hn_sampler_params_init (&defaults);

  HnJson *body = hn_json_new_object ();
  hn_json_object_set (body, "model", hn_json_new_string (chat->model ? chat->model : ""));
  hn_json_object_set (body, "stream", hn_json_new_bool (true));
  HnJson *stream_options = hn_json_new_object ();
  hn_json_object_set (stream_options, "include_usage", hn_json_new_bool (true));
  hn_json_object_set (body, "stream_options", stream_options);

  static const char *const roles[] = { "system", "user", "assistant" };
  HnJson *messages = hn_json_new_array ();
  const char *system = hanashi_generate_request_get_system_prompt (req);
  if (system && *system)
    {
      HnJson *m = hn_json_new_object ();
      hn_json_object_set (m, "role", hn_json_new_string ("system"));
      hn_json_object_set (m, "content", hn_json_new_string (system));
      hn_json_array_append (messages, m);
    }
  for (guint i = 0; i < hanashi_generate_request_get_n_messages (req); i++)
    {
      HanashiRole role = hanashi_generate_request_get_message_role (req, i);
      HnJson *m = hn_json_new_object ();
      hn_json_object_set (m, "role", hn_json_new_string (roles[role <= HANASHI_ROLE_ASSISTANT ? role : 1]));
      hn_json_object_set (m, "content", hn_json_new_string (hanashi_generate_request_get_message_text (req, i)));
      hn_json_array_append (messages, m);
    }
  hn_json_object_set (body, "messages", messages);

  /* OpenAI's own fields. */
  hn_json_object_set (body, "temperature", json_float (p.temperature < 0 ? 0 : p.temperature));
  hn_json_object_set (body, "top_p", json_float (p.top_p));
  hn_json_object_set (body, "frequency_penalty", json_float (p.frequency_penalty));
  hn_json_object_set (body, "presence_penalty", json_float (p.presence_penalty));
  if (p.max_new_tokens > 0)
    hn_json_object_set (body, "max_tokens", hn_json_new_int (p.max_new_tokens));
  if (p.seed != HN_SAMPLER_SEED_RANDOM && p.seed <= (uint64_t) INT64_MAX)
    hn_json_object_set (body, "seed", hn_json_new_int ((int64_t) p.seed));
  const char *const *stops = hanashi_generate_request_get_stop_strings (req);
  if (stops && stops[0])
    {
      HnJson *stop = hn_json_new_array ();
      for (gsize i = 0; stops[i]; i++)
        hn_json_array_append (stop, hn_json_new_string (stops[i]));
      hn_json_object_set (body, "stop", stop);
    }
  if (chat->n_logit_bias > 0)
    {
      HnJson *bias = hn_json_new_object ();
      for (gsize i = 0; i < chat->n_logit_bias; i++)
        {
          char id[16];
          g_snprintf (id, sizeof id, "%d", chat->logit_bias[i].token);
          /* OpenAI's range is -100..100, where -100 bans the token. */
          float b = isinf (chat->logit_bias[i].bias) ? (chat->logit_bias[i].bias < 0 ? -100.0f : 100.0f)
                                                      : CLAMP (chat->logit_bias[i].bias, -100.0f, 100.0f);
          hn_json_object_set (bias, id, json_float (b));
        }
      hn_json_object_set (body, "logit_bias", bias);
    }
  const char *schema = hanashi_generate_request_get_json_schema (req);
  if (schema)
    {
      HnJson *parsed = hn_json_parse (schema, strlen (schema), NULL);
      if (parsed)
        {
          HnJson *format = hn_json_new_object (), *js = hn_json_new_object ();
          hn_json_object_set (format, "type", hn_json_new_string ("json_schema"));
          hn_json_object_set (js, "name", hn_json_new_string ("response"));
          hn_json_object_set (js, "schema", parsed);
          hn_json_object_set (js, "strict", hn_json_new_bool (true));
          hn_json_object_set (format, "json_schema", js);
          hn_json_object_set (body, "response_format", format);
        }
      else if (callbacks && callbacks->on_left_out)
        callbacks->on_left_out (callbacks->data, "The JSON schema was not sent: it is not valid JSON");
    }

  /* Hanashi's own fields: only a Hanashi server takes them (OpenAI refuses unknown fields).
   * For another server, a value the user changed from its default is reported as left out. */
  const char *grammar = hanashi_generate_request_get_grammar (req);
  const char *cfg_negative = hanashi_generate_request_get_cfg_negative (req);
  double cfg_scale = hanashi_generate_request_get_cfg_scale (req);
  gboolean cfg_on = cfg_negative != NULL && *cfg_negative && cfg_scale != 1.0;
  if (chat->is_hanashi)
    {
      hn_json_object_set (body, "top_k", hn_json_new_int (p.top_k));
      hn_json_object_set (body, "min_p", json_float (p.min_p));
      hn_json_object_set (body, "typical_p", json_float (p.typical_p));
      hn_json_object_set (body, "repeat_penalty", json_float (p.repeat_penalty));
      hn_json_object_set (body, "repeat_last_n", hn_json_new_int (p.repeat_last_n));
      hn_json_object_set (body, "penalize_nl", hn_json_new_bool (p.penalize_nl));
      hn_json_object_set (body, "mirostat", hn_json_new_int (p.mirostat));
      hn_json_object_set (body, "mirostat_tau", json_float (p.mirostat_tau));
      hn_json_object_set (body, "mirostat_eta", json_float (p.mirostat_eta));
      if (grammar)
        hn_json_object_set (body, "grammar", hn_json_new_string (grammar));
      if (cfg_on)
        {
          hn_json_object_set (body, "cfg_negative_prompt", hn_json_new_string (cfg_negative));
          hn_json_object_set (body, "cfg_scale", hn_json_new_double (cfg_scale));
        }
      HanashiThinking thinking = hanashi_generate_request_get_thinking (req);
      if (thinking != HANASHI_THINKING_DEFAULT)
        {
          HnJson *kwargs = hn_json_new_object ();
          hn_json_object_set (kwargs, "enable_thinking", hn_json_new_bool (thinking == HANASHI_THINKING_ON));
          hn_json_object_set (body, "chat_template_kwargs", kwargs);
        }
    }
  else
    {
      size_t n_desc = 0;
      const HnParamDesc *table = hn_params_table (&n_desc);
      for (size_t i = 0; i < n_desc; i++)
        {
          if (hanashi_remote_param_unavailable_reason (table[i].key, FALSE) == NULL)
            continue;
          if (hn_param_get (&table[i], &p) != hn_param_get (&table[i], &defaults))
            left_out (callbacks, table[i].label);
        }
      if (grammar)
        left_out (callbacks, "The grammar");
      if (cfg_on)
        left_out (callbacks, "Classifier-free guidance");
    }

  char *json = hn_json_write (body, &HN_JSON_WRITE_COMPACT, NULL);
  hn_json_free (body);
  char *copy = g_strdup (json);
  free (json);
  return copy;
}

/* ---- server-sent events ---------------------------------------------------------------- */

struct _HanashiSseParser {
  GString *line;       /* the line being read */
  GString *data;       /* the event's data lines so far */
  gboolean has_data;
  gboolean after_cr;   /* the last byte was CR: a following LF belongs to it */
  void (*on_event) (gpointer data, const char *payload);
  gpointer user_data;
};

HanashiSseParser *
hanashi_sse_parser_new (void (*on_event) (gpointer data, const char *payload), gpointer data)
{
  HanashiSseParser *parser = g_new0 (HanashiSseParser, 1);
  parser->line = g_string_new (NULL);
  parser->data = g_string_new (NULL);
  parser->on_event = on_event;
  parser->user_data = data;
  return parser;
}

void
hanashi_sse_parser_free (HanashiSseParser *parser)
{
  if (parser == NULL)
    return;
  g_string_free (parser->line, TRUE);
  g_string_free (parser->data, TRUE);
  g_free (parser);
}

static void
sse_dispatch (HanashiSseParser *parser)
{
  if (parser->has_data)
    parser->on_event (parser->user_data, parser->data->str);
  g_string_truncate (parser->data, 0);
  parser->has_data = FALSE;
}

static void
sse_line (HanashiSseParser *parser)
{
  const char *line = parser->line->str;
  if (parser->line->len == 0)
    sse_dispatch (parser);
  else if (line[0] != ':')
    {
      const char *colon = strchr (line, ':');
      gsize name_len = colon ? (gsize) (colon - line) : parser->line->len;
      if (name_len == 4 && strncmp (line, "data", 4) == 0)
        {
          const char *value = colon ? colon + 1 : "";
          if (*value == ' ')
            value++;
          if (parser->has_data)
            g_string_append_c (parser->data, '\n');
          g_string_append (parser->data, value);
          parser->has_data = TRUE;
        }
      /* event:, id:, retry: and unknown fields carry nothing the chat API uses. */
    }
  g_string_truncate (parser->line, 0);
}

void
hanashi_sse_parser_feed (HanashiSseParser *parser, const char *bytes, gsize len)
{
  for (gsize i = 0; i < len; i++)
    {
      char c = bytes[i];
      if (c == '\n' && parser->after_cr)
        {
          parser->after_cr = FALSE;
          continue;
        }
      parser->after_cr = c == '\r';
      if (c == '\n' || c == '\r')
        sse_line (parser);
      else
        {
          /* Runs of ordinary bytes are appended at once. */
          gsize j = i;
          while (j < len && bytes[j] != '\n' && bytes[j] != '\r')
            j++;
          g_string_append_len (parser->line, bytes + i, (gssize) (j - i));
          i = j - 1;
        }
    }
}

void
hanashi_sse_parser_end (HanashiSseParser *parser)
{
  if (parser->line->len > 0)
    sse_line (parser);
  sse_dispatch (parser);
}

/* ---- POST /v1/chat/completions ------------------------------------------------------------ */

typedef struct {
  HanashiRemote *remote;
  const HanashiRemoteCallbacks *callbacks;
  HanashiRemoteResult *result;
  gint64 started, first_at, last_at;
  guint n_pieces;
  gboolean done;            /* [DONE] seen */
  gboolean finished;        /* a finish_reason seen */
  GError *error;            /* the first error the stream reported */
  GCancellable *cancellable;
} StreamState;

static HanashiStopReason
stop_reason_from (const char *finish_reason)
{
  if (finish_reason == NULL)
    return HANASHI_STOP_REASON_EOG;
  if (strcmp (finish_reason, "length") == 0)
    return HANASHI_STOP_REASON_MAX_TOKENS;
  return HANASHI_STOP_REASON_EOG;   /* "stop", "eos", "content_filter", … */
}

static void
read_usage (StreamState *st, const HnJson *root)
{
  const HnJson *usage = hn_json_object_get (root, "usage");
  if (!hn_json_is_object (usage))
    return;
  const HnJson *prompt = hn_json_object_get (usage, "prompt_tokens");
  const HnJson *completion = hn_json_object_get (usage, "completion_tokens");
  if (hn_json_is_number (prompt))
    st->result->n_prompt = (guint) CLAMP (hn_json_get_int (prompt), 0, G_MAXUINT);
  if (hn_json_is_number (completion))
    st->result->n_generated = (guint) CLAMP (hn_json_get_int (completion), 0, G_MAXUINT);
}

static void
deliver (StreamState *st, const HnJson *content)
{
  if (!hn_json_is_string (content) || hn_json_get_string_len (content) == 0)
    return;
  gint64 now = g_get_monotonic_time ();
  if (st->n_pieces == 0)
    st->first_at = now;
  st->last_at = now;
  st->n_pieces++;
  if (st->callbacks && st->callbacks->on_delta)
    {
      /* the JSON string's own bytes: already NUL-terminated, and NULs inside are kept */
      st->callbacks->on_delta (st->callbacks->data, hn_json_get_string (content), hn_json_get_string_len (content));
    }
}

/* One chunk object: its error, its delta (or message, for a non-streamed answer), its
 * finish_reason and usage. */
static void
handle_chunk (StreamState *st, const HnJson *root, gboolean streamed)
{
  g_autofree char *message = hn_json_object_get (root, "error") ? error_message_from_json (root) : NULL;
  if (hn_json_object_get (root, "error"))
    {
      g_set_error (&st->error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_SERVER,
                   "The server at %s stopped with an error: “%s”", st->remote->base_url,
                   message ? message : "no reason given");
      return;
    }
  const HnJson *choice = hn_json_array_get (hn_json_object_get (root, "choices"), 0);
  if (hn_json_is_object (choice))
    {
      const HnJson *part = hn_json_object_get (choice, streamed ? "delta" : "message");
      deliver (st, hn_json_object_get (part, "content"));
      const HnJson *reason = hn_json_object_get (choice, "finish_reason");
      if (hn_json_is_string (reason))
        {
          st->finished = TRUE;
          st->result->stop_reason = stop_reason_from (hn_json_get_string (reason));
        }
    }
  read_usage (st, root);
}

static void
on_sse_event (gpointer data, const char *payload)
{
  StreamState *st = data;
  /* Events already read when the call was cancelled are not delivered. */
  if (st->done || st->error || g_cancellable_is_cancelled (st->cancellable))
    return;
  if (strcmp (payload, "[DONE]") == 0)
    {
      st->done = TRUE;
      return;
    }
  HnJson *root = hn_json_parse (payload, strlen (payload), NULL);
  if (!hn_json_is_object (root))
    g_set_error (&st->error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_PROTOCOL,
                 "The server at %s sent a piece of its reply that is not JSON", st->remote->base_url);
  else
    handle_chunk (st, root, TRUE);
  hn_json_free (root);
}

static void
finish_result (StreamState *st)
{
  HanashiRemoteResult *r = st->result;
  if (r->n_generated == 0)
    r->n_generated = st->n_pieces;
  if (st->n_pieces > 0)
    {
      r->time_to_first_token = (double) (st->first_at - st->started) / G_USEC_PER_SEC;
      double span = (double) (st->last_at - st->first_at) / G_USEC_PER_SEC;
      r->gen_tokens_per_second = span > 0 && r->n_generated > 1 ? (r->n_generated - 1) / span : 0;
    }
}

gboolean
hanashi_remote_chat_stream (HanashiRemote *remote, const HanashiRemoteChat *chat,
                            const HanashiRemoteCallbacks *callbacks, HanashiRemoteResult *result,
                            GCancellable *cancellable, GError **error)
{
  HanashiRemoteResult local_result;
  if (result == NULL)
    result = &local_result;
  memset (result, 0, sizeof *result);
  result->stop_reason = HANASHI_STOP_REASON_EOG;

  g_autoptr (SoupSession) session = new_session ();
  g_autoptr (SoupMessage) msg = new_message (remote, "POST", "/chat/completions", error);
  if (msg == NULL)
    return FALSE;
  char *json = hanashi_remote_build_chat_body (chat, callbacks);
  gsize json_len = strlen (json);
  g_autoptr (GBytes) body = g_bytes_new_take (json, json_len);
  soup_message_set_request_body_from_bytes (msg, "application/json", body);
  soup_message_headers_replace (soup_message_get_request_headers (msg), "Accept", "text/event-stream");

  StreamState st = { .remote = remote, .callbacks = callbacks, .result = result,
                     .started = g_get_monotonic_time (), .cancellable = cancellable };
  g_autoptr (GInputStream) stream = send_checked (remote, session, msg, cancellable, error);
  if (stream == NULL)
    return FALSE;

  const char *content_type = soup_message_headers_get_content_type (soup_message_get_response_headers (msg), NULL);
  g_autoptr (GError) read_error = NULL;
  if (content_type && g_ascii_strcasecmp (content_type, "application/json") == 0)
    {
      /* A server that does not stream answers the whole completion at once. */
      g_autoptr (GBytes) whole = read_body (stream, PLAIN_BODY_LIMIT, cancellable, &read_error);
      if (whole)
        {
          gsize len = 0;
          const char *text = g_bytes_get_data (whole, &len);
          HnJson *root = hn_json_parse (text ? text : "", len, NULL);
          if (hn_json_is_object (root))
            handle_chunk (&st, root, FALSE);
          hn_json_free (root);
          st.done = st.error == NULL && st.finished;
        }
    }
  else
    {
      HanashiSseParser *parser = hanashi_sse_parser_new (on_sse_event, &st);
      char buf[4096];
      while (!st.done && st.error == NULL)
        {
          gssize n = g_input_stream_read (stream, buf, sizeof buf, cancellable, &read_error);
          if (n <= 0)
            break;
          hanashi_sse_parser_feed (parser, buf, (gsize) n);
          if (parser->line->len + parser->data->len > PLAIN_BODY_LIMIT)
            {
              g_set_error (&st.error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_PROTOCOL,
                           "The server at %s sent an event larger than %d MB", remote->base_url,
                           PLAIN_BODY_LIMIT >> 20);
              break;
            }
        }
      if (read_error == NULL && !st.done && st.error == NULL)
        hanashi_sse_parser_end (parser);
      hanashi_sse_parser_free (parser);
    }
  /* The connection is not reused: closing it tells the server to stop generating. */
  g_input_stream_close (stream, NULL, NULL);
  finish_result (&st);

  if (g_cancellable_is_cancelled (cancellable))
    {
      g_clear_error (&st.error);
      g_set_error_literal (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_CANCELLED,
                           "The request to the server was cancelled");
      return FALSE;
    }
  if (st.error)
    {
      g_propagate_error (error, st.error);
      return FALSE;
    }
  if (st.done || st.finished)
    return TRUE;
  if (read_error)
    g_set_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_DISCONNECTED,
                 "The connection to the server at %s broke before the reply was finished: %s",
                 remote->base_url, read_error->message);
  else
    g_set_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_DISCONNECTED,
                 "The server at %s closed the connection before the reply was finished", remote->base_url);
  return FALSE;
}
