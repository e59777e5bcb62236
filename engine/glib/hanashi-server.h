/* hanashi-server.h — an OpenAI-compatible HTTP server over one loaded model.
 *
 * HanashiServer answers GET /health, GET /v1/models, POST /v1/chat/completions and
 * POST /v1/completions on libsoup 3's SoupServer, in the thread-default main context of
 * the thread that created it.  Generation never runs there: the server owns N slots, each
 * a worker thread with its own HnChat (KV cache) over one shared HnChatModel, so a client
 * that resends a growing conversation lands on the slot that holds its prefix and only the
 * new tokens are evaluated.  `hanashi-cli serve` is a thin wrapper; the app can embed the
 * same object to serve the model its window has loaded.
 *
 * Ownership: the server borrows the model and vocabulary (they must outlive it, or come
 * with a loan it holds: hanashi_server_new_for_loan) and owns the chat model, the slots and
 * their threads.  Disposing it cancels every generation,
 * joins the threads and closes the listening socket.
 *
 * The request fields, the limits and the error codes are described in docs/server.md.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "hanashi-engine.h"
#include "hn-model.h"
#include "hn-vocab.h"

G_BEGIN_DECLS

#define HANASHI_SERVER_ERROR (hanashi_server_error_quark())
GQuark hanashi_server_error_quark(void);

typedef enum {
  HANASHI_SERVER_ERROR_FAILED,  /* the model could not be prepared for serving */
  HANASHI_SERVER_ERROR_ADDRESS, /* the host is not an address this server can bind */
} HanashiServerError;

#define HANASHI_SERVER_DEFAULT_MAX_BODY (8u * 1024 * 1024)
#define HANASHI_SERVER_DEFAULT_MAX_TOKENS 4096
#define HANASHI_SERVER_DEFAULT_MAX_CONNECTIONS 64
#define HANASHI_SERVER_DEFAULT_MAX_QUEUE 64
#define HANASHI_SERVER_MAX_PARALLEL 16

typedef struct {
  const char *model_id;      /* the name /v1/models lists (NULL: "hanashi") */
  guint n_parallel;          /* slots: requests generated at once, 1..HANASHI_SERVER_MAX_PARALLEL */
  int n_ctx;                 /* context per slot (0: the model's) */
  int n_threads;             /* threads in all, shared out between the slots (0: physical cores) */
  const char *api_key;       /* NULL or "": no key is asked for */
  gsize max_body_bytes;      /* larger request bodies get 413 */
  int max_tokens;            /* the most tokens one reply may have (and the default) */
  guint max_connections;     /* open connections; more are answered 503 and closed */
  guint max_queue;           /* requests waiting for a slot; more are answered 503 */
} HanashiServerOptions;

/* The defaults above: one slot, the model's context, no key. */
void hanashi_server_options_init(HanashiServerOptions *options);

#define HANASHI_TYPE_SERVER (hanashi_server_get_type())
G_DECLARE_FINAL_TYPE(HanashiServer, hanashi_server, HANASHI, SERVER, GObject)

/* Prepares the slots (one context each) for model and vocab, which are borrowed. */
HanashiServer *hanashi_server_new(const HnModel *model, const HnVocab *vocab, const HanashiServerOptions *options,
                                  GError **error);

/* The same over a model the app's engine lends (hanashi_engine_lend_model): the server
 * takes a reference of its own to @loan and lets go of it once its slots are gone, so the
 * weights outlive it even when the engine unloads or replaces the model meanwhile.
 * options->n_ctx 0 is the context the engine gave the model. */
HanashiServer *hanashi_server_new_for_loan(HanashiModelLoan *loan, const HanashiServerOptions *options,
                                          GError **error);

/* Listens on host (an IP address, or "localhost" for the loopback address) and port (0:
 * any free port).  Returns the port bound, or 0 with error set. */
guint hanashi_server_listen(HanashiServer *server, const char *host, guint port, GError **error);

/* Stops listening and cancels every generation in flight (they end as cancelled). */
void hanashi_server_stop(HanashiServer *server);

G_END_DECLS
