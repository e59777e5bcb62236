/* hanashi-remote-endpoints.h — OpenAI-compatible servers the user added: their addresses
 * (GSettings "remote-endpoints"), their API keys (the keyring, behind a small secret-store
 * interface), and the engine id a conversation stores to remember a remote model.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "hanashi-remote.h"

G_BEGIN_DECLS

/* Where API keys live.  The calls block (the keyring is a D-Bus service), so the app makes
 * them on worker threads only; implementations are thread-safe.  lookup returns NULL and
 * no error when there is no key. */
typedef struct {
  char    *(*lookup) (const char *url, GError **error);
  gboolean (*store)  (const char *url, const char *key, GError **error);
  gboolean (*clear)  (const char *url, GError **error);
} HanashiSecretStore;

/* The keyring (libsecret's Secret Service; in Flatpak its portal). */
const HanashiSecretStore *hanashi_secret_store_keyring (void);
/* In memory, for the process's life: tests, which must not need a running keyring. */
const HanashiSecretStore *hanashi_secret_store_memory  (void);
/* The store the app uses: the keyring, unless a test set another (a test seam, listed
 * in tests/support/hanashi-test-seams.h). */
const HanashiSecretStore *hanashi_secret_store_get_default (void);
void                      hanashi_secret_store_set_default (const HanashiSecretStore *store);

/* The addresses the user added, in order. */
/* Addresses are API roots as hanashi_remote_get_api_url() gives them. */
char   **hanashi_remote_endpoints_dup_urls (GSettings *settings);
void     hanashi_remote_endpoints_add      (GSettings *settings, const char *url);
void     hanashi_remote_endpoints_remove   (GSettings *settings, const char *url);

/* A conversation's engine: "" for the local model, else "remote\n<url>\n<model>".  parse
 * returns FALSE for "" and anything else that is not a remote id. */
char    *hanashi_remote_engine_id       (const char *url, const char *model);
gboolean hanashi_remote_engine_id_parse (const char *id, char **url_out, char **model_out);

/* Forgets a server: its address from @settings, its key from the secret store (on a worker
 * thread). */
void     hanashi_remote_endpoints_forget   (GSettings *settings, const char *url);

/* On a worker thread: stores @key for @url when @key is not NULL (an empty key clears it),
 * else looks the key up; then lists the server's models.  Finish gives the client (with
 * its key) and the model ids. */
void           hanashi_remote_connect_async  (const char          *url,
                                              const char          *key,
                                              GCancellable        *cancellable,
                                              GAsyncReadyCallback  callback,
                                              gpointer             user_data);
HanashiRemote *hanashi_remote_connect_finish (GAsyncResult  *result,
                                              char        ***models_out,
                                              gboolean      *is_hanashi_out,
                                              GError       **error);

/* A translated sentence for an error of HANASHI_REMOTE_ERROR (with the server's own words
 * when it gave some); NULL for other domains. */
char *hanashi_describe_remote_error (const GError *error);

G_END_DECLS
