/* remote-test-server.h: a small OpenAI-compatible server inside a test process, for the
 * remote client's tests (engine, CLI, app).  It runs on its own thread and main context, so
 * a test may call the client synchronously from its main thread.
 *
 * GET /v1/models lists the models below (owned by "hanashi" when is_hanashi is set);
 * POST /v1/chat/completions answers by the model asked for:
 *   "split"        the reply pieces as server-sent events, written in fragments of 1 to 13
 *                  bytes (UTF-8 characters and "data:" lines cut in two), with a comment line,
 *                  a finish_reason "length" chunk, a usage chunk and `data: [DONE]`;
 *   "crlf"         the same with CRLF line endings;
 *   "json"         a non-streamed answer (application/json) with the whole reply;
 *   "error-500"    HTTP 500 with OpenAI's error JSON ("the GPU caught fire");
 *   "stream-error" one piece, then an error object inside the stream ("model crashed");
 *   "drop"         two pieces, then the connection is shut down mid-stream;
 *   "slow"         a piece every 20 ms until the client goes away (for cancel);
 * any other model gets 404 with an error JSON.  With api_key set, requests without
 * "Authorization: Bearer KEY" get 401 with an error JSON.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

typedef struct _RemoteTestServer RemoteTestServer;

/* Starts the server on 127.0.0.1 (a free port); @api_key NULL = no key. */
RemoteTestServer *remote_test_server_new       (const char *api_key, gboolean is_hanashi);
void              remote_test_server_free      (RemoteTestServer *server);
/* "http://127.0.0.1:PORT" (no /v1). */
const char       *remote_test_server_get_url   (RemoteTestServer *server);
/* The pieces "split", "crlf", "json" send (default: REMOTE_TEST_REPLY_PIECES). */
void              remote_test_server_set_reply (RemoteTestServer *server, const char * const *pieces);
/* The body and Authorization header of the last chat request (g_free). */
char             *remote_test_server_dup_last_body (RemoteTestServer *server);
char             *remote_test_server_dup_last_auth (RemoteTestServer *server);
guint             remote_test_server_get_n_chats   (RemoteTestServer *server);
/* TRUE once the client of a "slow" stream closed the connection. */
gboolean          remote_test_server_slow_client_gone (RemoteTestServer *server);
/* Pieces of the "slow" stream written so far. */
guint             remote_test_server_get_slow_sent (RemoteTestServer *server);

#define REMOTE_TEST_REPLY_PIECES { "Hello", ", wor", "ld — 日本", "語!", " \"quoted\"\nline", NULL }
#define REMOTE_TEST_REPLY_TEXT "Hello, world — 日本語! \"quoted\"\nline"
#define REMOTE_TEST_PROMPT_TOKENS 12
