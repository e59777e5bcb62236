/* remote-test-server.c: see remote-test-server.h. */
#include "remote-test-server.h"

#include "hn-json.h"

#include <libsoup/soup.h>
#include <stdlib.h>
#include <string.h>

struct _RemoteTestServer {
  GThread *thread;
  GMainContext *context;
  GMainLoop *loop;
  SoupServer *soup;
  char *url;
  char *api_key;
  gboolean is_hanashi;

  GMutex lock;   /* guards what follows: the test thread reads it */
  GCond ready;
  char **pieces;
  char *last_body;
  char *last_auth;
  guint n_chats;
  gboolean slow_gone;
  guint slow_sent;
};

static const char *const model_ids[] = { "split", "crlf", "json", "error-500", "stream-error", "drop", "slow" };

/* ---- answers ---------------------------------------------------------------------------- */

static void
answer_json (SoupServerMessage *msg, guint status, const char *json)
{
  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, json, strlen (json));
}

static void
answer_error (SoupServerMessage *msg, guint status, const char *message, const char *type)
{
  g_autofree char *quoted = hn_json_quote (message, strlen (message), false, NULL);
  g_autofree char *json = g_strdup_printf ("{\"error\":{\"message\":%s,\"type\":\"%s\",\"code\":null}}", quoted, type);
  answer_json (msg, status, json);
}

static char *
chunk_event (const char *content, const char *finish_reason, const char *eol)
{
  g_autofree char *quoted = content ? hn_json_quote (content, strlen (content), false, NULL) : NULL;
  g_autofree char *delta = quoted ? g_strdup_printf ("{\"content\":%s}", quoted) : g_strdup ("{}");
  g_autofree char *reason = finish_reason ? g_strdup_printf ("\"%s\"", finish_reason) : g_strdup ("null");
  return g_strdup_printf ("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
                          "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}%s%s",
                          delta, reason, eol, eol);
}

/* ---- streams ------------------------------------------------------------------------------ */

typedef enum { STREAM_FRAGMENTS, STREAM_DROP, STREAM_SLOW } StreamKind;

typedef struct {
  RemoteTestServer *server;
  SoupServerMessage *msg;
  StreamKind kind;
  GString *text;     /* FRAGMENTS, DROP: everything to send */
  gsize pos;
  guint step;
  guint source;
  gboolean gone;
} Stream;

/* A timeout on the server's own context (g_timeout_add would use the global default). */
static guint
server_timeout (Stream *s, guint ms, GSourceFunc func)
{
  GSource *source = g_timeout_source_new (ms);
  g_source_set_callback (source, func, s, NULL);
  guint id = g_source_attach (source, s->server->context);
  g_source_unref (source);
  return id;
}

static void
remove_source (Stream *s)
{
  if (s->source)
    {
      GSource *source = g_main_context_find_source_by_id (s->server->context, s->source);
      if (source)
        g_source_destroy (source);
      s->source = 0;
    }
}

static void
stream_free (Stream *s)
{
  remove_source (s);
  g_string_free (s->text, TRUE);
  g_free (s);
}

static void
on_stream_gone (SoupServerMessage *msg, Stream *s)
{
  (void) msg;
  if (s->gone)
    return;
  s->gone = TRUE;
  if (s->kind == STREAM_SLOW)
    {
      g_mutex_lock (&s->server->lock);
      s->server->slow_gone = TRUE;
      g_mutex_unlock (&s->server->lock);
    }
  remove_source (s);
}

static gboolean
shut_down_connection (gpointer data)
{
  Stream *s = data;
  s->source = 0;
  GSocket *socket = soup_server_message_get_socket (s->msg);
  if (socket)
    g_socket_shutdown (socket, TRUE, TRUE, NULL);
  return G_SOURCE_REMOVE;
}

static gboolean
stream_step (gpointer data)
{
  Stream *s = data;
  SoupMessageBody *body = soup_server_message_get_response_body (s->msg);
  if (s->gone)
    {
      s->source = 0;
      return G_SOURCE_REMOVE;
    }
  if (s->kind == STREAM_SLOW)
    {
      g_autofree char *event = chunk_event ("tick ", NULL, "\n");
      soup_message_body_append (body, SOUP_MEMORY_COPY, event, strlen (event));
      soup_server_message_unpause (s->msg);
      g_mutex_lock (&s->server->lock);
      s->server->slow_sent++;
      g_mutex_unlock (&s->server->lock);
      return G_SOURCE_CONTINUE;
    }
  /* Fragment sizes that cut lines, "data:" prefixes and UTF-8 characters in odd places. */
  static const gsize sizes[] = { 1, 7, 3, 13, 2, 5, 11, 1, 1, 4 };
  gsize n = MIN (sizes[s->step++ % G_N_ELEMENTS (sizes)], s->text->len - s->pos);
  soup_message_body_append (body, SOUP_MEMORY_COPY, s->text->str + s->pos, n);
  s->pos += n;
  if (s->pos >= s->text->len)
    {
      if (s->kind == STREAM_DROP)
        s->source = server_timeout (s, 50, shut_down_connection);
      else
        {
          soup_message_body_complete (body);
          s->source = 0;
        }
      soup_server_message_unpause (s->msg);
      return G_SOURCE_REMOVE;
    }
  soup_server_message_unpause (s->msg);
  return G_SOURCE_CONTINUE;
}

static void
start_stream (RemoteTestServer *server, SoupServerMessage *msg, StreamKind kind, GString *text)
{
  Stream *s = g_new0 (Stream, 1);
  s->server = server;
  s->msg = msg;   /* not a reference: the message owns the stream (its "stream" data) */
  s->kind = kind;
  s->text = text ? text : g_string_new (NULL);
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (msg);
  soup_message_headers_set_encoding (headers, SOUP_ENCODING_CHUNKED);
  soup_message_headers_set_content_type (headers, "text/event-stream", NULL);
  soup_message_body_set_accumulate (soup_server_message_get_response_body (msg), FALSE);
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  g_signal_connect (msg, "disconnected", G_CALLBACK (on_stream_gone), s);
  g_signal_connect (msg, "finished", G_CALLBACK (on_stream_gone), s);
  g_object_set_data_full (G_OBJECT (msg), "stream", s, (GDestroyNotify) stream_free);
  s->source = server_timeout (s, kind == STREAM_SLOW ? 20 : 2, stream_step);
  soup_server_message_pause (msg);
}

static GString *
reply_events (RemoteTestServer *server, const char *eol)
{
  GString *text = g_string_new (NULL);
  g_string_append_printf (text, ": a comment the client skips%s%s", eol, eol);
  g_mutex_lock (&server->lock);
  for (char **p = server->pieces; *p; p++)
    {
      g_autofree char *event = chunk_event (*p, NULL, eol);
      g_string_append (text, event);
    }
  g_mutex_unlock (&server->lock);
  g_autofree char *last = chunk_event (NULL, "length", eol);
  g_string_append (text, last);
  g_string_append_printf (text, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],"
                          "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%u,\"total_tokens\":%u}}%s%s",
                          REMOTE_TEST_PROMPT_TOKENS, g_strv_length (server->pieces),
                          REMOTE_TEST_PROMPT_TOKENS + g_strv_length (server->pieces), eol, eol);
  g_string_append_printf (text, "data: [DONE]%s%s", eol, eol);
  return text;
}

/* ---- handlers ------------------------------------------------------------------------------ */

static gboolean
authorized (RemoteTestServer *server, SoupServerMessage *msg)
{
  if (server->api_key == NULL)
    return TRUE;
  const char *auth = soup_message_headers_get_one (soup_server_message_get_request_headers (msg), "Authorization");
  g_autofree char *expected = g_strconcat ("Bearer ", server->api_key, NULL);
  if (g_strcmp0 (auth, expected) == 0)
    return TRUE;
  answer_error (msg, SOUP_STATUS_UNAUTHORIZED, "Incorrect API key provided", "invalid_request_error");
  return FALSE;
}

static void
handle_models (SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
  RemoteTestServer *server = data;
  (void) soup; (void) path; (void) query;
  if (!authorized (server, msg))
    return;
  GString *json = g_string_new ("{\"object\":\"list\",\"data\":[");
  for (gsize i = 0; i < G_N_ELEMENTS (model_ids); i++)
    g_string_append_printf (json, "%s{\"id\":\"%s\",\"object\":\"model\",\"created\":1,\"owned_by\":\"%s\"}",
                            i ? "," : "", model_ids[i], server->is_hanashi ? "hanashi" : "someone");
  g_string_append (json, "]}");
  answer_json (msg, SOUP_STATUS_OK, json->str);
  g_string_free (json, TRUE);
}

static void
handle_chat (SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
  RemoteTestServer *server = data;
  (void) soup; (void) path; (void) query;
  SoupMessageBody *request = soup_server_message_get_request_body (msg);
  g_autoptr (GBytes) bytes = soup_message_body_flatten (request);
  gsize len = 0;
  const char *text = g_bytes_get_data (bytes, &len);
  g_mutex_lock (&server->lock);
  g_free (server->last_body);
  server->last_body = g_strndup (text ? text : "", len);
  g_free (server->last_auth);
  server->last_auth = g_strdup (soup_message_headers_get_one (soup_server_message_get_request_headers (msg),
                                                              "Authorization"));
  server->n_chats++;
  g_mutex_unlock (&server->lock);
  if (!authorized (server, msg))
    return;
  HnJson *root = hn_json_parse (text ? text : "", len, NULL);
  g_autofree char *model = g_strdup (hn_json_get_string (hn_json_object_get (root, "model")));
  hn_json_free (root);
  if (g_strcmp0 (model, "split") == 0)
    start_stream (server, msg, STREAM_FRAGMENTS, reply_events (server, "\n"));
  else if (g_strcmp0 (model, "crlf") == 0)
    start_stream (server, msg, STREAM_FRAGMENTS, reply_events (server, "\r\n"));
  else if (g_strcmp0 (model, "json") == 0)
    {
      g_mutex_lock (&server->lock);
      g_autofree char *joined = g_strjoinv ("", server->pieces);
      g_mutex_unlock (&server->lock);
      g_autofree char *quoted = hn_json_quote (joined, strlen (joined), false, NULL);
      g_autofree char *json = g_strdup_printf (
        "{\"id\":\"c\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
        "\"content\":%s},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":3}}",
        quoted, REMOTE_TEST_PROMPT_TOKENS);
      answer_json (msg, SOUP_STATUS_OK, json);
    }
  else if (g_strcmp0 (model, "error-500") == 0)
    answer_error (msg, SOUP_STATUS_INTERNAL_SERVER_ERROR, "the GPU caught fire", "server_error");
  else if (g_strcmp0 (model, "stream-error") == 0)
    {
      GString *events = g_string_new (NULL);
      g_autofree char *first = chunk_event ("partial ", NULL, "\n");
      g_string_append (events, first);
      g_string_append (events, "data: {\"error\":{\"message\":\"model crashed\",\"type\":\"server_error\"}}\n\n");
      start_stream (server, msg, STREAM_FRAGMENTS, events);
    }
  else if (g_strcmp0 (model, "drop") == 0)
    {
      GString *events = g_string_new (NULL);
      g_autofree char *a = chunk_event ("half ", NULL, "\n");
      g_autofree char *b = chunk_event ("a reply", NULL, "\n");
      g_string_append (events, a);
      g_string_append (events, b);
      start_stream (server, msg, STREAM_DROP, events);
    }
  else if (g_strcmp0 (model, "slow") == 0)
    start_stream (server, msg, STREAM_SLOW, NULL);
  else
    {
      g_autofree char *message = g_strdup_printf ("The model `%s` does not exist", model ? model : "");
      answer_error (msg, SOUP_STATUS_NOT_FOUND, message, "invalid_request_error");
    }
}

/* ---- the server thread ------------------------------------------------------------------- */

static gpointer
server_thread (gpointer data)
{
  RemoteTestServer *server = data;
  g_main_context_push_thread_default (server->context);
  server->soup = soup_server_new (NULL, NULL);
  soup_server_add_handler (server->soup, "/v1/models", handle_models, server, NULL);
  soup_server_add_handler (server->soup, "/v1/chat/completions", handle_chat, server, NULL);
  g_autoptr (GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) address = g_inet_socket_address_new (loopback, 0);
  g_autoptr (GError) error = NULL;
  if (!soup_server_listen (server->soup, address, 0, &error))
    g_error ("The test server cannot listen: %s", error->message);
  GSList *uris = soup_server_get_uris (server->soup);
  g_mutex_lock (&server->lock);
  server->url = g_strdup_printf ("http://127.0.0.1:%d", g_uri_get_port (uris->data));
  g_cond_signal (&server->ready);
  g_mutex_unlock (&server->lock);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);

  g_main_loop_run (server->loop);

  soup_server_disconnect (server->soup);
  g_clear_object (&server->soup);
  /* Let the streams' messages finish and free what they hold. */
  while (g_main_context_iteration (server->context, FALSE))
    ;
  g_main_context_pop_thread_default (server->context);
  return NULL;
}

RemoteTestServer *
remote_test_server_new (const char *api_key, gboolean is_hanashi)
{
  RemoteTestServer *server = g_new0 (RemoteTestServer, 1);
  static const char *const pieces[] = REMOTE_TEST_REPLY_PIECES;
  server->api_key = g_strdup (api_key);
  server->is_hanashi = is_hanashi;
  server->pieces = g_strdupv ((char **) pieces);
  g_mutex_init (&server->lock);
  g_cond_init (&server->ready);
  server->context = g_main_context_new ();
  server->loop = g_main_loop_new (server->context, FALSE);
  server->thread = g_thread_new ("remote-test-server", server_thread, server);
  g_mutex_lock (&server->lock);
  while (server->url == NULL)
    g_cond_wait (&server->ready, &server->lock);
  g_mutex_unlock (&server->lock);
  return server;
}

static gboolean
quit_loop (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

void
remote_test_server_free (RemoteTestServer *server)
{
  g_main_context_invoke (server->context, quit_loop, server->loop);
  g_thread_join (server->thread);
  g_main_loop_unref (server->loop);
  g_main_context_unref (server->context);
  g_strfreev (server->pieces);
  g_free (server->url);
  g_free (server->api_key);
  g_free (server->last_body);
  g_free (server->last_auth);
  g_mutex_clear (&server->lock);
  g_cond_clear (&server->ready);
  g_free (server);
}

const char *remote_test_server_get_url (RemoteTestServer *server) { return server->url; }

void
remote_test_server_set_reply (RemoteTestServer *server, const char * const *pieces)
{
  static const char *const defaults[] = REMOTE_TEST_REPLY_PIECES;
  g_mutex_lock (&server->lock);
  g_strfreev (server->pieces);
  server->pieces = g_strdupv ((char **) (pieces ? pieces : defaults));
  g_mutex_unlock (&server->lock);
}

#define LOCKED_GET(type, expr)            \
  type value;                             \
  g_mutex_lock (&server->lock);           \
  value = expr;                           \
  g_mutex_unlock (&server->lock);         \
  return value

char *remote_test_server_dup_last_body (RemoteTestServer *server) { LOCKED_GET (char *, g_strdup (server->last_body)); }
char *remote_test_server_dup_last_auth (RemoteTestServer *server) { LOCKED_GET (char *, g_strdup (server->last_auth)); }
guint remote_test_server_get_n_chats (RemoteTestServer *server) { LOCKED_GET (guint, server->n_chats); }
gboolean remote_test_server_slow_client_gone (RemoteTestServer *server) { LOCKED_GET (gboolean, server->slow_gone); }
guint remote_test_server_get_slow_sent (RemoteTestServer *server) { LOCKED_GET (guint, server->slow_sent); }
