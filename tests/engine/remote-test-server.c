/* remote-test-server.c: see remote-test-server.h.
 *
 * HTTP/1.1 by hand on a GThreadedSocketService rather than libsoup's SoupServer: libsoup
 * 3.2's server leaks every socket it accepts, which LeakSanitizer reports; and writing the
 * wire format here makes the fragments, the chunked framing and the dropped connection
 * exactly what the test says.  Each connection is served on its own worker thread and
 * answered with "Connection: close".
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "remote-test-server.h"

#include "hn-json.h"

#include <gio/gio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>

struct _RemoteTestServer {
  GThread *thread;
  GMainContext *context;
  GMainLoop *loop;
  GSocketService *service;
  char *url;
  char *api_key;
  gboolean is_hanashi;

  GMutex lock;   /* guards what follows: the test thread and the workers read it */
  GCond ready;
  GCond idle;
  guint n_active;   /* connections being served */
  char **pieces;
  char *last_body;
  char *last_auth;
  guint n_chats;
  gboolean slow_gone;
  guint slow_sent;
};

static const char *const model_ids[] = { "split", "crlf", "json", "error-500", "stream-error", "drop", "slow" };

/* ---- writing ------------------------------------------------------------------------------ */

static gboolean
write_all (GOutputStream *out, const char *data, gsize len)
{
  return g_output_stream_write_all (out, data, len, NULL, NULL, NULL);
}

static const char *
reason_phrase (guint status)
{
  switch (status)
    {
    case 200: return "OK";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 500: return "Internal Server Error";
    default: return "Status";
    }
}

static void
answer_json (GOutputStream *out, guint status, const char *json)
{
  g_autofree char *head = g_strdup_printf ("HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                                           "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                                           status, reason_phrase (status), strlen (json));
  if (write_all (out, head, strlen (head)))
    write_all (out, json, strlen (json));
}

static void
answer_error (GOutputStream *out, guint status, const char *message, const char *type)
{
  g_autofree char *quoted = hn_json_quote (message, strlen (message), false, NULL);
  g_autofree char *json = g_strdup_printf ("{\"error\":{\"message\":%s,\"type\":\"%s\",\"code\":null}}", quoted, type);
  answer_json (out, status, json);
}

static gboolean
start_events (GOutputStream *out)
{
  static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  return write_all (out, head, sizeof head - 1);
}

/* One chunk of the chunked body, as its own write (TCP_NODELAY sends it at once). */
static gboolean
write_chunk (GOutputStream *out, const char *data, gsize len)
{
  char size[32];
  g_snprintf (size, sizeof size, "%zx\r\n", len);
  return write_all (out, size, strlen (size)) && write_all (out, data, len) && write_all (out, "\r\n", 2);
}

static gboolean
end_events (GOutputStream *out)
{
  return write_all (out, "0\r\n\r\n", 5);
}

/* @text in fragments that cut lines, "data:" prefixes and UTF-8 characters in odd places,
 * a little apart so that the client reads them one by one. */
static gboolean
write_fragments (GOutputStream *out, const char *text, gsize len)
{
  static const gsize sizes[] = { 1, 7, 3, 13, 2, 5, 11, 1, 1, 4 };
  for (gsize pos = 0, step = 0; pos < len; step++)
    {
      gsize n = MIN (sizes[step % G_N_ELEMENTS (sizes)], len - pos);
      if (!write_chunk (out, text + pos, n))
        return FALSE;
      pos += n;
      g_usleep (2000);
    }
  return TRUE;
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

/* ---- requests ---------------------------------------------------------------------------- */

typedef struct {
  char *method, *path, *auth;
  char *body;
  gsize body_len;
} Request;

static void
request_clear (Request *r)
{
  g_free (r->method);
  g_free (r->path);
  g_free (r->auth);
  g_free (r->body);
}

/* Reads the request line, the headers and a Content-Length body; FALSE on anything else. */
static gboolean
read_request (GInputStream *in, Request *r)
{
  GString *head = g_string_new (NULL);
  char c;
  while (!g_str_has_suffix (head->str, "\r\n\r\n"))
    {
      if (head->len > 65536 || g_input_stream_read (in, &c, 1, NULL, NULL) != 1)
        {
          g_string_free (head, TRUE);
          return FALSE;
        }
      g_string_append_c (head, c);
    }
  g_auto (GStrv) lines = g_strsplit (head->str, "\r\n", -1);
  g_string_free (head, TRUE);
  g_auto (GStrv) request_line = g_strsplit (lines[0], " ", 3);
  if (g_strv_length (request_line) < 2)
    return FALSE;
  r->method = g_strdup (request_line[0]);
  r->path = g_strdup (request_line[1]);
  gsize length = 0;
  for (char **line = lines + 1; *line && **line; line++)
    {
      char *colon = strchr (*line, ':');
      if (colon == NULL)
        continue;
      *colon = '\0';
      const char *value = colon + 1;
      while (*value == ' ')
        value++;
      if (g_ascii_strcasecmp (*line, "Content-Length") == 0)
        length = (gsize) g_ascii_strtoull (value, NULL, 10);
      else if (g_ascii_strcasecmp (*line, "Authorization") == 0)
        r->auth = g_strdup (value);
    }
  r->body = g_malloc0 (length + 1);
  r->body_len = length;
  return length == 0 || g_input_stream_read_all (in, r->body, length, NULL, NULL, NULL);
}

/* ---- handlers ------------------------------------------------------------------------------ */

static gboolean
authorized (RemoteTestServer *server, const Request *r, GOutputStream *out)
{
  if (server->api_key == NULL)
    return TRUE;
  g_autofree char *expected = g_strconcat ("Bearer ", server->api_key, NULL);
  if (g_strcmp0 (r->auth, expected) == 0)
    return TRUE;
  answer_error (out, 401, "Incorrect API key provided", "invalid_request_error");
  return FALSE;
}

static void
handle_models (RemoteTestServer *server, const Request *r, GOutputStream *out)
{
  if (!authorized (server, r, out))
    return;
  GString *json = g_string_new ("{\"object\":\"list\",\"data\":[");
  for (gsize i = 0; i < G_N_ELEMENTS (model_ids); i++)
    g_string_append_printf (json, "%s{\"id\":\"%s\",\"object\":\"model\",\"created\":1,\"owned_by\":\"%s\"}",
                            i ? "," : "", model_ids[i], server->is_hanashi ? "hanashi" : "someone");
  g_string_append (json, "]}");
  answer_json (out, 200, json->str);
  g_string_free (json, TRUE);
}

static void
stream_slow (RemoteTestServer *server, GOutputStream *out)
{
  g_autofree char *event = chunk_event ("tick ", NULL, "\n");
  if (!start_events (out))
    return;
  /* Until the client goes away (a write fails), or 20 s. */
  for (int i = 0; i < 1000; i++)
    {
      if (!write_chunk (out, event, strlen (event)))
        {
          g_mutex_lock (&server->lock);
          server->slow_gone = TRUE;
          g_mutex_unlock (&server->lock);
          return;
        }
      g_mutex_lock (&server->lock);
      server->slow_sent++;
      g_mutex_unlock (&server->lock);
      g_usleep (20000);
    }
}

static void
handle_chat (RemoteTestServer *server, const Request *r, GOutputStream *out, GSocket *socket)
{
  g_mutex_lock (&server->lock);
  g_free (server->last_body);
  server->last_body = g_strndup (r->body, r->body_len);
  g_free (server->last_auth);
  server->last_auth = g_strdup (r->auth);
  server->n_chats++;
  g_mutex_unlock (&server->lock);
  if (!authorized (server, r, out))
    return;
  HnJson *root = hn_json_parse (r->body, r->body_len, NULL);
  g_autofree char *model = g_strdup (hn_json_get_string (hn_json_object_get (root, "model")));
  hn_json_free (root);
  if (g_strcmp0 (model, "split") == 0 || g_strcmp0 (model, "crlf") == 0)
    {
      GString *events = reply_events (server, g_str_equal (model, "crlf") ? "\r\n" : "\n");
      if (start_events (out) && write_fragments (out, events->str, events->len))
        end_events (out);
      g_string_free (events, TRUE);
    }
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
      answer_json (out, 200, json);
    }
  else if (g_strcmp0 (model, "error-500") == 0)
    answer_error (out, 500, "the GPU caught fire", "server_error");
  else if (g_strcmp0 (model, "stream-error") == 0)
    {
      g_autofree char *first = chunk_event ("partial ", NULL, "\n");
      g_autofree char *events = g_strconcat (first, "data: {\"error\":{\"message\":\"model crashed\",\"type\":\"server_error\"}}\n\n", NULL);
      if (start_events (out) && write_fragments (out, events, strlen (events)))
        end_events (out);
    }
  else if (g_strcmp0 (model, "drop") == 0)
    {
      g_autofree char *a = chunk_event ("half ", NULL, "\n");
      g_autofree char *b = chunk_event ("a reply", NULL, "\n");
      g_autofree char *events = g_strconcat (a, b, NULL);
      /* No final chunk: the connection goes away in the middle of the body. */
      if (start_events (out) && write_fragments (out, events, strlen (events)))
        {
          g_usleep (50000);
          g_socket_shutdown (socket, TRUE, TRUE, NULL);
        }
    }
  else if (g_strcmp0 (model, "slow") == 0)
    stream_slow (server, out);
  else
    {
      g_autofree char *message = g_strdup_printf ("The model `%s` does not exist", model ? model : "");
      answer_error (out, 404, message, "invalid_request_error");
    }
}

static gboolean
handle_connection (GThreadedSocketService *service, GSocketConnection *connection, GObject *source, gpointer data)
{
  RemoteTestServer *server = data;
  (void) service; (void) source;
  g_mutex_lock (&server->lock);
  server->n_active++;
  g_mutex_unlock (&server->lock);

  GSocket *socket = g_socket_connection_get_socket (connection);
  g_socket_set_option (socket, IPPROTO_TCP, TCP_NODELAY, 1, NULL);
  GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (connection));
  GOutputStream *out = g_io_stream_get_output_stream (G_IO_STREAM (connection));
  Request r = { 0 };
  if (read_request (in, &r))
    {
      if (g_str_equal (r.method, "GET") && g_str_equal (r.path, "/v1/models"))
        handle_models (server, &r, out);
      else if (g_str_equal (r.method, "POST") && g_str_equal (r.path, "/v1/chat/completions"))
        handle_chat (server, &r, out, socket);
      else
        answer_error (out, 404, "no such endpoint", "invalid_request_error");
    }
  request_clear (&r);
  g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);

  g_mutex_lock (&server->lock);
  server->n_active--;
  g_cond_broadcast (&server->idle);
  g_mutex_unlock (&server->lock);
  return TRUE;
}

/* ---- the server thread ------------------------------------------------------------------- */

/* The listener accepts through this thread's main context, so the test thread may block. */
static gpointer
server_thread (gpointer data)
{
  RemoteTestServer *server = data;
  g_main_context_push_thread_default (server->context);
  server->service = g_threaded_socket_service_new (16);
  g_autoptr (GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) address = g_inet_socket_address_new (loopback, 0);
  g_autoptr (GSocketAddress) effective = NULL;
  g_autoptr (GError) error = NULL;
  if (!g_socket_listener_add_address (G_SOCKET_LISTENER (server->service), address, G_SOCKET_TYPE_STREAM,
                                      G_SOCKET_PROTOCOL_TCP, NULL, &effective, &error))
    g_error ("The test server cannot listen: %s", error->message);
  g_signal_connect (server->service, "run", G_CALLBACK (handle_connection), server);
  g_socket_service_start (server->service);
  g_mutex_lock (&server->lock);
  server->url = g_strdup_printf ("http://127.0.0.1:%u", g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (effective)));
  g_cond_signal (&server->ready);
  g_mutex_unlock (&server->lock);

  g_main_loop_run (server->loop);

  g_socket_service_stop (server->service);
  g_socket_listener_close (G_SOCKET_LISTENER (server->service));
  g_clear_object (&server->service);
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
  g_cond_init (&server->idle);
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
  /* Connections still being served (a stream whose client just left) finish first. */
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  g_mutex_lock (&server->lock);
  while (server->n_active > 0)
    if (!g_cond_wait_until (&server->idle, &server->lock, deadline))
      g_error ("the test server's connections did not finish");
  g_mutex_unlock (&server->lock);
  g_main_loop_unref (server->loop);
  g_main_context_unref (server->context);
  g_strfreev (server->pieces);
  g_free (server->url);
  g_free (server->api_key);
  g_free (server->last_body);
  g_free (server->last_auth);
  g_mutex_clear (&server->lock);
  g_cond_clear (&server->ready);
  g_cond_clear (&server->idle);
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
