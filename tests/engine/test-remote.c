/* The OpenAI-compatible client (hanashi-remote.c) and the engine's remote backend against a
 * real HTTP server in this process (remote-test-server.c): server-sent events cut at awkward
 * places, error answers, a dropped connection, a cancel mid-stream, the request body.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hanashi-engine.h"
#include "hanashi-remote.h"
#include "remote-test-server.h"
#include "cli-run.h"

#include "hn-json.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>

/* ---- server-sent events ------------------------------------------------------------------ */

static void
collect_event (gpointer data, const char *payload)
{
  g_ptr_array_add (data, g_strdup (payload));
}

static char *
events_of (const char *stream, gsize split_a, gsize split_b)
{
  GPtrArray *events = g_ptr_array_new_with_free_func (g_free);
  HanashiSseParser *parser = hanashi_sse_parser_new (collect_event, events);
  gsize len = strlen (stream);
  hanashi_sse_parser_feed (parser, stream, split_a);
  hanashi_sse_parser_feed (parser, stream + split_a, split_b - split_a);
  hanashi_sse_parser_feed (parser, stream + split_b, len - split_b);
  hanashi_sse_parser_end (parser);
  hanashi_sse_parser_free (parser);
  g_ptr_array_add (events, NULL);
  char *joined = g_strjoinv ("|", (char **) events->pdata);
  g_ptr_array_unref (events);
  return joined;
}

static void
test_sse_splits (void)
{
  /* LF, CRLF and lone CR line ends; a comment; "data:" with and without its space; an
   * event of two data lines; other fields; an unterminated last event. */
  static const char stream[] = ": hello\n\ndata: {\"a\":1}\r\n\r\ndata:x\rdata: y\r\revent: e\nid: 3\ndata: 日本\n"
                               "data: 語\n\nretry: 10\n\ndata: [DONE]";
  static const char expected[] = "{\"a\":1}|x\ny|日本\n語|[DONE]";
  gsize len = strlen (stream);
  for (gsize a = 0; a <= len; a++)
    for (gsize b = a; b <= len; b++)
      {
        g_autofree char *got = events_of (stream, a, b);
        if (strcmp (got, expected) != 0)
          g_error ("split at %zu and %zu: got “%s”", a, b, got);
      }
}

/* ---- addresses and models ---------------------------------------------------------------- */

static void
test_url (void)
{
  static const char *const forms[] = { "http://h:8/", "http://h:8/v1", "http://h:8/v1/", " http://h:8 " };
  for (gsize i = 0; i < G_N_ELEMENTS (forms); i++)
    {
      g_autoptr (HanashiRemote) remote = hanashi_remote_new (forms[i], NULL, NULL);
      g_assert_nonnull (remote);
      g_assert_cmpstr (hanashi_remote_get_api_url (remote), ==, "http://h:8/v1");
    }
  static const char *const bad[] = { "", "ftp://h/", "h:8080", "http://", "not a url" };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_assert_null (hanashi_remote_new (bad[i], NULL, &error));
      g_assert_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_INVALID_URL);
    }
}

static void
test_models (void)
{
  for (int hanashi = 0; hanashi < 2; hanashi++)
    {
      RemoteTestServer *server = remote_test_server_new (NULL, hanashi);
      g_autoptr (HanashiRemote) remote = hanashi_remote_new (remote_test_server_get_url (server), NULL, NULL);
      g_autoptr (GError) error = NULL;
      gboolean is_hanashi = !hanashi;
      g_auto (GStrv) ids = hanashi_remote_list_models (remote, &is_hanashi, NULL, &error);
      g_assert_no_error (error);
      g_assert_cmpint (is_hanashi, ==, hanashi);
      g_assert_cmpuint (g_strv_length (ids), ==, 7);
      g_assert_cmpstr (ids[0], ==, "split");
      g_assert_cmpstr (ids[6], ==, "slow");
      remote_test_server_free (server);
    }
}

static void
on_models_listed (GObject *source, GAsyncResult *result, gpointer data)
{
  (void) source;
  gboolean is_hanashi = FALSE;
  g_autoptr (GError) error = NULL;
  char **ids = hanashi_remote_list_models_finish (result, &is_hanashi, &error);
  g_assert_no_error (error);
  g_assert_true (is_hanashi);
  *(char ***) data = ids;
}

static void
test_models_async (void)
{
  RemoteTestServer *server = remote_test_server_new ("sekrit", TRUE);
  g_autoptr (HanashiRemote) remote = hanashi_remote_new (remote_test_server_get_url (server), "sekrit", NULL);
  char **ids = NULL;
  hanashi_remote_list_models_async (remote, NULL, on_models_listed, &ids);
  while (ids == NULL)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpstr (ids[1], ==, "crlf");
  g_strfreev (ids);
  remote_test_server_free (server);
}

static void
test_wrong_key (void)
{
  RemoteTestServer *server = remote_test_server_new ("right", FALSE);
  for (int with_key = 0; with_key < 2; with_key++)
    {
      g_autoptr (HanashiRemote) remote = hanashi_remote_new (remote_test_server_get_url (server),
                                                             with_key ? "wrong" : NULL, NULL);
      g_autoptr (GError) error = NULL;
      g_assert_null (hanashi_remote_list_models (remote, NULL, NULL, &error));
      g_assert_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_UNAUTHORIZED);
      g_assert_nonnull (strstr (error->message, "Incorrect API key provided"));
    }
  remote_test_server_free (server);
}

/* A port nobody listens on: bound once, then released. */
static guint16
closed_port (void)
{
  g_autoptr (GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr (GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) address = g_inet_socket_address_new (loopback, 0);
  g_assert_true (g_socket_bind (socket, address, FALSE, NULL));
  g_autoptr (GSocketAddress) bound = g_socket_get_local_address (socket, NULL);
  guint16 port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
  g_socket_close (socket, NULL);
  return port;
}

static void
test_unreachable (void)
{
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u", closed_port ());
  g_autoptr (HanashiRemote) remote = hanashi_remote_new (url, NULL, NULL);
  g_autoptr (GError) error = NULL;
  g_assert_null (hanashi_remote_list_models (remote, NULL, NULL, &error));
  g_assert_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_UNREACHABLE);
  g_assert_nonnull (strstr (error->message, url));
}

/* ---- streaming ------------------------------------------------------------------------------ */

typedef struct {
  GString *text;
  guint n_deltas;
  GPtrArray *left_out;
  guint cancel_after;        /* > 0: cancel once this many pieces arrived */
  GCancellable *cancellable;
} Collect;

static void
collect_delta (gpointer data, const char *text, gsize len)
{
  Collect *c = data;
  g_assert_cmpuint (len, >, 0);
  g_assert_cmpint (text[len], ==, '\0');
  g_assert_true (g_utf8_validate_len (text, len, NULL));
  g_string_append_len (c->text, text, (gssize) len);
  if (++c->n_deltas == c->cancel_after)
    g_cancellable_cancel (c->cancellable);
}

static void
collect_left_out (gpointer data, const char *message)
{
  Collect *c = data;
  g_ptr_array_add (c->left_out, g_strdup (message));
}

static gboolean
run_chat (RemoteTestServer *server, const char *model, HanashiGenerateRequest *req, gboolean is_hanashi,
          Collect *c, HanashiRemoteResult *result, GError **error)
{
  g_autoptr (HanashiRemote) remote = hanashi_remote_new (remote_test_server_get_url (server), "k", NULL);
  HanashiRemoteChat chat = { .model = model, .request = req, .is_hanashi = is_hanashi };
  HanashiRemoteCallbacks callbacks = { collect_delta, collect_left_out, c };
  c->text = g_string_new (NULL);
  c->left_out = g_ptr_array_new_with_free_func (g_free);
  return hanashi_remote_chat_stream (remote, &chat, &callbacks, result, c->cancellable, error);
}

static void
collect_clear (Collect *c)
{
  g_string_free (c->text, TRUE);
  g_ptr_array_unref (c->left_out);
  g_clear_object (&c->cancellable);
}

static HanashiGenerateRequest *
simple_request (void)
{
  HanashiGenerateRequest *req = hanashi_generate_request_new ("conv");
  hanashi_generate_request_set_system_prompt (req, "Be brief.");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, "Hi");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_ASSISTANT, "Hello!");
  hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, "Say more");
  return req;
}

static void
test_stream (gconstpointer data)
{
  const char *model = data;
  RemoteTestServer *server = remote_test_server_new (NULL, FALSE);
  g_autoptr (HanashiGenerateRequest) req = simple_request ();
  Collect c = { 0 };
  HanashiRemoteResult result;
  g_autoptr (GError) error = NULL;
  g_assert_true (run_chat (server, model, req, FALSE, &c, &result, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (c.text->str, ==, REMOTE_TEST_REPLY_TEXT);
  g_assert_cmpuint (result.n_prompt, ==, REMOTE_TEST_PROMPT_TOKENS);
  if (strcmp (model, "json") == 0)
    {
      g_assert_cmpuint (c.n_deltas, ==, 1);
      g_assert_cmpint (result.stop_reason, ==, HANASHI_STOP_REASON_EOG);
    }
  else
    {
      g_assert_cmpuint (c.n_deltas, ==, 5);
      g_assert_cmpuint (result.n_generated, ==, 5);
      g_assert_cmpint (result.stop_reason, ==, HANASHI_STOP_REASON_MAX_TOKENS);
    }
  collect_clear (&c);
  remote_test_server_free (server);
}

static void
test_stream_errors (void)
{
  RemoteTestServer *server = remote_test_server_new (NULL, FALSE);
  g_autoptr (HanashiGenerateRequest) req = simple_request ();
  static const struct {
    const char *model;
    int code;
    const char *in_message;
    const char *partial;
  } cases[] = {
    { "error-500", HANASHI_REMOTE_ERROR_SERVER, "the GPU caught fire", "" },
    { "no-such-model", HANASHI_REMOTE_ERROR_NOT_FOUND, "does not exist", "" },
    { "stream-error", HANASHI_REMOTE_ERROR_SERVER, "model crashed", "partial " },
    { "drop", HANASHI_REMOTE_ERROR_DISCONNECTED, "before the reply was finished", "half a reply" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      Collect c = { 0 };
      g_autoptr (GError) error = NULL;
      g_assert_false (run_chat (server, cases[i].model, req, FALSE, &c, NULL, &error));
      g_assert_error (error, HANASHI_REMOTE_ERROR, cases[i].code);
      if (strstr (error->message, cases[i].in_message) == NULL)
        g_error ("%s: “%s” lacks “%s”", cases[i].model, error->message, cases[i].in_message);
      /* What arrived before the failure was delivered. */
      g_assert_cmpstr (c.text->str, ==, cases[i].partial);
      collect_clear (&c);
    }
  remote_test_server_free (server);
}

static void
test_stream_cancel (void)
{
  RemoteTestServer *server = remote_test_server_new (NULL, FALSE);
  g_autoptr (HanashiGenerateRequest) req = simple_request ();
  Collect c = { .cancel_after = 3, .cancellable = g_cancellable_new () };
  g_autoptr (GError) error = NULL;
  g_assert_false (run_chat (server, "slow", req, FALSE, &c, NULL, &error));
  g_assert_error (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_CANCELLED);
  g_assert_cmpstr (c.text->str, ==, "tick tick tick ");
  /* The connection was closed, so the server stops writing. */
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  while (!remote_test_server_slow_client_gone (server) && g_get_monotonic_time () < deadline)
    g_usleep (2000);
  g_assert_true (remote_test_server_slow_client_gone (server));
  guint sent = remote_test_server_get_slow_sent (server);
  g_usleep (100000);
  g_assert_cmpuint (remote_test_server_get_slow_sent (server), ==, sent);
  collect_clear (&c);
  remote_test_server_free (server);
}

/* ---- the request body ---------------------------------------------------------------------- */

static HnJson *
last_body (RemoteTestServer *server)
{
  g_autofree char *body = remote_test_server_dup_last_body (server);
  HnJson *root = hn_json_parse (body, strlen (body), NULL);
  g_assert_nonnull (root);
  return root;
}

static void
test_body (void)
{
  RemoteTestServer *server = remote_test_server_new (NULL, FALSE);
  g_autoptr (HanashiGenerateRequest) req = simple_request ();
  HnSamplerParams p;
  hn_sampler_params_init (&p);
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  p.seed = 42;
  p.max_new_tokens = 100;
  p.presence_penalty = 0.5f;
  p.top_k = 5;             /* Hanashi's own: left out for this server */
  p.mirostat = 2;
  hanashi_generate_request_set_sampling (req, &p);
  hanashi_generate_request_add_stop_string (req, "END");
  hanashi_generate_request_set_json_schema (req, "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}");
  hanashi_generate_request_set_cfg (req, "be rude", 1.5);

  Collect c = { 0 };
  g_autoptr (GError) error = NULL;
  g_assert_true (run_chat (server, "split", req, FALSE, &c, NULL, &error));
  g_autofree char *auth = remote_test_server_dup_last_auth (server);
  g_assert_cmpstr (auth, ==, "Bearer k");
  HnJson *root = last_body (server);
  g_assert_cmpstr (hn_json_get_string (hn_json_object_get (root, "model")), ==, "split");
  g_assert_true (hn_json_get_bool (hn_json_object_get (root, "stream")));
  const HnJson *messages = hn_json_object_get (root, "messages");
  g_assert_cmpuint (hn_json_length (messages), ==, 4);
  g_assert_cmpstr (hn_json_get_string (hn_json_object_get (hn_json_array_get (messages, 0), "role")), ==, "system");
  g_assert_cmpstr (hn_json_get_string (hn_json_object_get (hn_json_array_get (messages, 2), "role")), ==, "assistant");
  g_assert_cmpstr (hn_json_get_string (hn_json_object_get (hn_json_array_get (messages, 3), "content")), ==, "Say more");
  g_assert_cmpfloat (hn_json_get_double (hn_json_object_get (root, "temperature")), ==, 0.7);
  g_assert_cmpfloat (hn_json_get_double (hn_json_object_get (root, "top_p")), ==, 0.9);
  g_assert_cmpfloat (hn_json_get_double (hn_json_object_get (root, "presence_penalty")), ==, 0.5);
  g_assert_cmpint (hn_json_get_int (hn_json_object_get (root, "seed")), ==, 42);
  g_assert_cmpint (hn_json_get_int (hn_json_object_get (root, "max_tokens")), ==, 100);
  g_assert_cmpstr (hn_json_get_string (hn_json_array_get (hn_json_object_get (root, "stop"), 0)), ==, "END");
  const HnJson *format = hn_json_object_get (root, "response_format");
  g_assert_cmpstr (hn_json_get_string (hn_json_object_get (format, "type")), ==, "json_schema");
  const HnJson *schema = hn_json_object_get (hn_json_object_get (format, "json_schema"), "schema");
  g_assert_cmpstr (hn_json_get_string (hn_json_object_get (schema, "type")), ==, "object");
  /* Nothing of Hanashi's own goes to another server; what the user changed is reported. */
  static const char *const hanashi_only[] = { "top_k", "min_p", "typical_p", "repeat_penalty", "mirostat",
                                              "grammar", "cfg_scale", "cfg_negative_prompt" };
  for (gsize i = 0; i < G_N_ELEMENTS (hanashi_only); i++)
    g_assert_null (hn_json_object_get (root, hanashi_only[i]));
  g_assert_cmpuint (c.left_out->len, ==, 3);   /* Top-K, Mirostat, guidance */
  g_assert_nonnull (strstr (g_ptr_array_index (c.left_out, 0), "Top-K"));
  g_assert_nonnull (strstr (g_ptr_array_index (c.left_out, 1), "Mirostat"));
  g_assert_nonnull (strstr (g_ptr_array_index (c.left_out, 2), "guidance"));
  hn_json_free (root);
  collect_clear (&c);

  /* A Hanashi server gets them all, and the GBNF grammar. */
  hanashi_generate_request_set_grammar (req, "root ::= \"x\"");
  g_assert_true (run_chat (server, "split", req, TRUE, &c, NULL, &error));
  root = last_body (server);
  g_assert_cmpint (hn_json_get_int (hn_json_object_get (root, "top_k")), ==, 5);
  g_assert_cmpint (hn_json_get_int (hn_json_object_get (root, "mirostat")), ==, 2);
  g_assert_cmpstr (hn_json_get_string (hn_json_object_get (root, "grammar")), ==, "root ::= \"x\"");
  g_assert_cmpstr (hn_json_get_string (hn_json_object_get (root, "cfg_negative_prompt")), ==, "be rude");
  g_assert_cmpfloat (hn_json_get_double (hn_json_object_get (root, "cfg_scale")), ==, 1.5);
  g_assert_null (hn_json_object_get (root, "response_format"));   /* the grammar replaced the schema */
  g_assert_cmpuint (c.left_out->len, ==, 0);
  hn_json_free (root);
  collect_clear (&c);

  g_assert_null (hanashi_remote_param_unavailable_reason ("temperature", FALSE));
  g_assert_nonnull (hanashi_remote_param_unavailable_reason ("min_p", FALSE));
  g_assert_null (hanashi_remote_param_unavailable_reason ("min_p", TRUE));
  remote_test_server_free (server);
}

/* ---- through HanashiEngine ---------------------------------------------------------------- */

typedef struct {
  GString *text;
  gboolean done;
  HanashiGenerationStats stats;
  GError *error;
  guint n_warnings;
  gboolean loaded;
  GError *load_error;
  guint cancel_after;     /* > 0: cancel the generation after this many token signals */
  guint n_tokens;
} EngineRun;

static void
on_token (HanashiEngine *engine, guint id, const char *text, gint token_id, EngineRun *run)
{
  (void) token_id;
  g_string_append (run->text, text);
  if (++run->n_tokens == run->cancel_after)
    hanashi_engine_cancel (engine, id);
}

static void
on_done (HanashiEngine *engine, guint id, HanashiGenerationStats *stats, EngineRun *run)
{
  (void) engine; (void) id;
  run->stats = *stats;
  run->done = TRUE;
}

static void
on_error (HanashiEngine *engine, guint id, GError *error, EngineRun *run)
{
  (void) engine; (void) id;
  run->error = g_error_copy (error);
  run->done = TRUE;
}

static void
on_warning (HanashiEngine *engine, guint id, GError *warning, EngineRun *run)
{
  (void) engine; (void) id;
  g_assert_error (warning, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_PARAM_UNAVAILABLE);
  if (run->n_warnings == 0 && strstr (warning->message, "Min-P"))
    g_assert_nonnull (strstr (warning->message, "Typical-P"));
  run->n_warnings++;
}

static void
on_loaded (GObject *source, GAsyncResult *result, gpointer data)
{
  EngineRun *run = data;
  run->loaded = hanashi_engine_load_model_finish (HANASHI_ENGINE (source), result, &run->load_error);
  if (!run->loaded)
    run->done = TRUE;
}

static void
wait_for (gboolean *flag)
{
  while (!*flag)
    g_main_context_iteration (NULL, TRUE);
}

static void
engine_run_reset (EngineRun *run)
{
  if (run->text)
    g_string_free (run->text, TRUE);
  g_clear_error (&run->error);
  g_clear_error (&run->load_error);
  memset (run, 0, sizeof *run);
  run->text = g_string_new (NULL);
}

static void
test_engine (void)
{
  RemoteTestServer *server = remote_test_server_new (NULL, FALSE);
  g_autoptr (HanashiRemote) remote = hanashi_remote_new (remote_test_server_get_url (server), NULL, NULL);
  g_autoptr (HanashiEngine) engine = hanashi_engine_new ();
  EngineRun run = { 0 };
  engine_run_reset (&run);
  g_signal_connect (engine, "token", G_CALLBACK (on_token), &run);
  g_signal_connect (engine, "generation-done", G_CALLBACK (on_done), &run);
  g_signal_connect (engine, "error", G_CALLBACK (on_error), &run);
  g_signal_connect (engine, "warning", G_CALLBACK (on_warning), &run);

  hanashi_engine_load_remote_async (engine, remote, "split", NULL, on_loaded, &run);
  wait_for (&run.loaded);
  const HanashiModelInfo *info = hanashi_engine_get_model_info (engine);
  g_assert_cmpstr (info->name, ==, "split");
  g_assert_cmpstr (info->remote_url, ==, hanashi_remote_get_api_url (remote));
  g_assert_false (info->remote_is_hanashi);

  /* A reply streams through the same signals as a local model's. */
  g_autoptr (HanashiGenerateRequest) req = simple_request ();
  HnSamplerParams p;
  hn_sampler_params_init (&p);
  p.top_k = 3;
  hanashi_generate_request_set_sampling (req, &p);
  hanashi_engine_generate (engine, req);
  wait_for (&run.done);
  g_assert_no_error (run.error);
  g_assert_cmpstr (run.text->str, ==, REMOTE_TEST_REPLY_TEXT);
  g_assert_cmpuint (run.stats.n_generated, ==, 5);
  g_assert_cmpuint (run.stats.n_prompt, ==, REMOTE_TEST_PROMPT_TOKENS);
  g_assert_cmpint (run.stats.stop_reason, ==, HANASHI_STOP_REASON_MAX_TOKENS);
  g_assert_cmpuint (run.n_warnings, ==, 1);   /* top_k was not sent */

  /* Said once per model, not on every reply; a new setting is said again. */
  engine_run_reset (&run);
  hanashi_engine_generate (engine, req);
  wait_for (&run.done);
  g_assert_cmpuint (run.n_warnings, ==, 0);
  p.min_p = 0.2f;
  p.typical_p = 0.5f;
  hanashi_generate_request_set_sampling (req, &p);
  engine_run_reset (&run);
  hanashi_engine_generate (engine, req);
  wait_for (&run.done);
  g_assert_cmpuint (run.n_warnings, ==, 1);   /* one warning naming both */

  /* A model the server does not list is refused, and the loaded one stays. */
  engine_run_reset (&run);
  hanashi_engine_load_remote_async (engine, remote, "gone", NULL, on_loaded, &run);
  wait_for (&run.done);
  g_assert_error (run.load_error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (run.load_error->message, "slow"));   /* it says what there is */
  g_assert_cmpstr (hanashi_engine_get_model_info (engine)->name, ==, "split");

  /* A failing server is an "error" signal with the server's words. */
  engine_run_reset (&run);
  hanashi_engine_load_remote_async (engine, remote, "error-500", NULL, on_loaded, &run);
  wait_for (&run.loaded);
  hanashi_engine_generate (engine, req);
  run.done = FALSE;
  wait_for (&run.done);
  g_assert_error (run.error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_SERVER);
  g_assert_nonnull (strstr (run.error->message, "the GPU caught fire"));

  /* hanashi_engine_cancel stops a remote stream as it stops a local one. */
  engine_run_reset (&run);
  hanashi_engine_load_remote_async (engine, remote, "slow", NULL, on_loaded, &run);
  wait_for (&run.loaded);
  run.cancel_after = 2;
  hanashi_engine_generate (engine, req);
  run.done = FALSE;
  wait_for (&run.done);
  g_assert_no_error (run.error);
  g_assert_cmpint (run.stats.stop_reason, ==, HANASHI_STOP_REASON_CANCELLED);
  g_assert_true (g_str_has_prefix (run.text->str, "tick tick "));
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  while (!remote_test_server_slow_client_gone (server) && g_get_monotonic_time () < deadline)
    g_usleep (2000);
  g_assert_true (remote_test_server_slow_client_gone (server));

  /* An unreachable server fails the load with its own code. */
  engine_run_reset (&run);
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u", closed_port ());
  g_autoptr (HanashiRemote) nowhere = hanashi_remote_new (url, NULL, NULL);
  hanashi_engine_load_remote_async (engine, nowhere, "split", NULL, on_loaded, &run);
  wait_for (&run.done);
  g_assert_error (run.load_error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_UNREACHABLE);

  engine_run_reset (&run);
  g_string_free (run.text, TRUE);
  g_signal_handlers_disconnect_by_data (engine, &run);
  g_clear_object (&engine);
  remote_test_server_free (server);
}

/* ---- hanashi-cli generate/chat --remote ------------------------------------------------------ */

static void
test_cli (void)
{
  if (g_getenv ("HANASHI_CLI") == NULL)
    {
      g_test_skip ("HANASHI_CLI is not set");
      return;
    }
  RemoteTestServer *server = remote_test_server_new ("key", FALSE);
  const char *url = remote_test_server_get_url (server);

  CliRun r = cli_run ("generate", "--remote", url, "--api-key", "key", "-m", "split", "-p", "Hi", "-n", "20",
                      "--top-k", "5", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==, REMOTE_TEST_REPLY_TEXT "\n");
  g_assert_nonnull (strstr (r.err, "hanashi-cli: notice: Top-K was not sent"));
  HnJson *root = last_body (server);
  const HnJson *messages = hn_json_object_get (root, "messages");
  g_assert_cmpuint (hn_json_length (messages), ==, 1);
  g_assert_cmpstr (hn_json_get_string (hn_json_object_get (hn_json_array_get (messages, 0), "content")), ==, "Hi");
  g_assert_cmpint (hn_json_get_int (hn_json_object_get (root, "max_tokens")), ==, 20);
  hn_json_free (root);
  cli_run_clear (&r);

  /* The default model is the first listed; a wrong key is one error line. */
  r = cli_run ("generate", "--remote", url, "--api-key", "nope", "-p", "Hi", "-n", "5", NULL);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_true (g_str_has_prefix (r.err, "hanashi-cli: error: "));
  g_assert_nonnull (strstr (r.err, "refused the API key"));
  cli_run_clear (&r);

  r = cli_run ("generate", "--remote", url, "--api-key", "key", "-m", "error-500", "-p", "Hi", "-n", "5", NULL);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "the GPU caught fire"));
  cli_run_clear (&r);

  r = cli_run ("generate", "--remote", url, "--api-key", "key", "--ids", "-p", "Hi", "-n", "5", NULL);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "--ids is not available with --remote"));
  cli_run_clear (&r);

  /* chat: every turn resends the conversation, the replies included. */
  g_autofree char *dir = g_dir_make_tmp ("hanashi-remote-XXXXXX", NULL);
  g_autofree char *turns = g_build_filename (dir, "turns.txt", NULL);
  g_assert_true (g_file_set_contents (turns, "First\nSecond\n", -1, NULL));
  r = cli_run ("chat", "--remote", url, "--api-key", "key", "-m", "crlf", "--system", "Be kind.", "-f", turns, NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==, REMOTE_TEST_REPLY_TEXT "\n" REMOTE_TEST_REPLY_TEXT "\n");
  root = last_body (server);
  messages = hn_json_object_get (root, "messages");
  g_assert_cmpuint (hn_json_length (messages), ==, 4);
  g_assert_cmpstr (hn_json_get_string (hn_json_object_get (hn_json_array_get (messages, 0), "content")), ==, "Be kind.");
  g_assert_cmpstr (hn_json_get_string (hn_json_object_get (hn_json_array_get (messages, 2), "content")), ==,
                   REMOTE_TEST_REPLY_TEXT);
  g_assert_cmpstr (hn_json_get_string (hn_json_object_get (hn_json_array_get (messages, 3), "content")), ==, "Second");
  hn_json_free (root);
  cli_run_clear (&r);
  g_unlink (turns);
  g_rmdir (dir);
  remote_test_server_free (server);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/remote/sse/splits", test_sse_splits);
  g_test_add_func ("/remote/url", test_url);
  g_test_add_func ("/remote/models", test_models);
  g_test_add_func ("/remote/models/async", test_models_async);
  g_test_add_func ("/remote/models/wrong-key", test_wrong_key);
  g_test_add_func ("/remote/unreachable", test_unreachable);
  g_test_add_data_func ("/remote/stream/split", "split", test_stream);
  g_test_add_data_func ("/remote/stream/crlf", "crlf", test_stream);
  g_test_add_data_func ("/remote/stream/not-streamed", "json", test_stream);
  g_test_add_func ("/remote/stream/errors", test_stream_errors);
  g_test_add_func ("/remote/stream/cancel", test_stream_cancel);
  g_test_add_func ("/remote/body", test_body);
  g_test_add_func ("/remote/engine", test_engine);
  g_test_add_func ("/remote/cli", test_cli);
  return g_test_run ();
}
