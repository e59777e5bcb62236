/* hanashi-remote.h: a client for OpenAI-compatible servers (vLLM, Ollama, llama.cpp's
 * server, TGI, `hanashi-cli serve`), on libsoup 3.
 *
 * One client code for every user: the engine thread's remote backend (so the app streams a
 * remote reply through the same HanashiEngine signals as a local one) and `hanashi-cli
 * generate/chat --remote`.  The calls here are synchronous and run on the caller's thread
 * (each call makes its own SoupSession, so any thread may use a HanashiRemote); a
 * GCancellable stops a call at once, mid-stream included.
 *
 * Which parameters are sent: the fields of OpenAI's chat completions API always (temperature,
 * top_p, max_tokens, stop, seed, frequency and presence penalty, logit_bias, response_format
 * for a JSON schema); Hanashi's own (top_k, min_p, typical_p, repeat_penalty, repeat_last_n,
 * mirostat, grammar, cfg) only when the server is a Hanashi server, which it says by
 * `"owned_by": "hanashi"` on its models in GET /v1/models.  A parameter that the server does
 * not take is left out and reported (hanashi_remote_param_unavailable_reason).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "hanashi-engine.h"
#include "hn-sampler.h"

G_BEGIN_DECLS

#define HANASHI_REMOTE_ERROR (hanashi_remote_error_quark ())
GQuark hanashi_remote_error_quark (void);

typedef enum {
  HANASHI_REMOTE_ERROR_INVALID_URL,    /* not an http:// or https:// address */
  HANASHI_REMOTE_ERROR_UNREACHABLE,    /* no connection: refused, unknown host, timeout, TLS */
  HANASHI_REMOTE_ERROR_UNAUTHORIZED,   /* 401/403: the key is missing or wrong */
  HANASHI_REMOTE_ERROR_NOT_FOUND,      /* 404: no such model or endpoint */
  HANASHI_REMOTE_ERROR_BAD_REQUEST,    /* 4xx other than the above: the server refused the request */
  HANASHI_REMOTE_ERROR_SERVER,         /* 5xx, or an error object inside the stream */
  HANASHI_REMOTE_ERROR_PROTOCOL,       /* the answer is not what the API describes */
  HANASHI_REMOTE_ERROR_DISCONNECTED,   /* the connection ended before the reply did */
  HANASHI_REMOTE_ERROR_CANCELLED,      /* the GCancellable was cancelled */
} HanashiRemoteError;

typedef struct _HanashiRemote HanashiRemote;

/* @base_url: the server's address, with or without the trailing "/v1" (both
 * "http://host:8080" and "http://host:8080/v1/" work); @api_key: NULL or "" for none, else
 * sent as "Authorization: Bearer KEY".  Immutable, refcounted, thread-safe. */
HanashiRemote *hanashi_remote_new          (const char *base_url, const char *api_key, GError **error);
HanashiRemote *hanashi_remote_ref          (HanashiRemote *remote);
void           hanashi_remote_unref        (HanashiRemote *remote);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiRemote, hanashi_remote_unref)
/* The API root, always ending in "/v1" (e.g. "http://127.0.0.1:8080/v1"). */
const char    *hanashi_remote_get_api_url  (HanashiRemote *remote);
/* The address as given, for showing. */
const char    *hanashi_remote_get_base_url (HanashiRemote *remote);

/* GET /v1/models: the model ids (NULL-terminated, free with g_strfreev), in the server's
 * order; *is_hanashi_out (may be NULL) tells whether the server is a Hanashi server. */
char         **hanashi_remote_list_models  (HanashiRemote *remote, gboolean *is_hanashi_out,
                                            GCancellable *cancellable, GError **error);
void           hanashi_remote_list_models_async  (HanashiRemote *remote, GCancellable *cancellable,
                                                  GAsyncReadyCallback callback, gpointer user_data);
char         **hanashi_remote_list_models_finish (GAsyncResult *result, gboolean *is_hanashi_out,
                                                  GError **error);

/* Why a sampling parameter (a key of the hn-params.h table, or "grammar", "json_schema",
 * "cfg", "logit_bias") cannot be used with this kind of server, as a sentence; NULL when it
 * can.  Only Hanashi servers take Hanashi's own parameters. */
const char    *hanashi_remote_param_unavailable_reason (const char *key, gboolean is_hanashi);

typedef struct {
  /* Each piece of the reply as it arrives (never empty): @len bytes, which may include NUL
   * (a token can decode to one; JSON carries it as \u0000), then a terminating NUL. */
  void (*on_delta)   (gpointer data, const char *text, gsize len);
  /* A parameter the request set that was not sent (the message says which and why). */
  void (*on_left_out) (gpointer data, const char *message);
  gpointer data;
} HanashiRemoteCallbacks;

typedef struct {
  const char *model;                 /* model id as /v1/models lists it */
  HanashiGenerateRequest *request;   /* system prompt, messages, sampling, stop, grammar, cfg */
  const HnLogitBias *logit_bias;     /* token id → bias (the ids are the server's) */
  gsize n_logit_bias;
  gboolean is_hanashi;               /* send Hanashi's extension fields */
} HanashiRemoteChat;

typedef struct {
  HanashiStopReason stop_reason;     /* from finish_reason ("stop" → EOG, "length" → MAX_TOKENS) */
  guint n_prompt;                    /* usage.prompt_tokens when the server sent it, else 0 */
  guint n_generated;                 /* usage.completion_tokens, else the pieces counted */
  double time_to_first_token;        /* seconds from sending to the first piece */
  double gen_tokens_per_second;
} HanashiRemoteResult;

/* The JSON body of a streaming POST /v1/chat/completions for @chat (g_free).  Parameters
 * left out are passed to @callbacks->on_left_out (callbacks may be NULL). */
char    *hanashi_remote_build_chat_body (const HanashiRemoteChat *chat,
                                         const HanashiRemoteCallbacks *callbacks);

/* Streams a chat completion: on_delta per piece, until `data: [DONE]` (or the stream ends
 * after a finish_reason).  FALSE with @error when the request fails, the server answers an
 * error (its own message is kept in the sentence) or the connection breaks: the pieces
 * already delivered stay delivered.  Cancelling gives HANASHI_REMOTE_ERROR_CANCELLED. */
gboolean hanashi_remote_chat_stream (HanashiRemote *remote, const HanashiRemoteChat *chat,
                                     const HanashiRemoteCallbacks *callbacks,
                                     HanashiRemoteResult *result, GCancellable *cancellable,
                                     GError **error);

/* ---- server-sent events (exposed for tests) ---------------------------------------------
 * Bytes in, events out, whatever the chunking: lines end in LF, CRLF or CR; "data:" lines
 * of one event are joined with "\n"; comments (":…") and other fields are skipped. */
typedef struct _HanashiSseParser HanashiSseParser;
HanashiSseParser *hanashi_sse_parser_new  (void (*on_event) (gpointer data, const char *payload),
                                           gpointer data);
void              hanashi_sse_parser_feed (HanashiSseParser *parser, const char *bytes, gsize len);
/* The end of the stream: an event not yet closed by a blank line is dispatched. */
void              hanashi_sse_parser_end  (HanashiSseParser *parser);
void              hanashi_sse_parser_free (HanashiSseParser *parser);

/* The engine-thread side (a server's model behind HanashiEngine) is
 * hanashi_engine_load_remote_async() in hanashi-engine.h. */

G_END_DECLS
