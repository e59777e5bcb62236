/* hanashi-serving.h — "Serve the loaded model": the app's OpenAI-compatible server.
 *
 * HanashiServing follows three settings (serve-enabled, serve-port, serve-network) and the
 * engine.  While serving is on it listens on the port — on 127.0.0.1, or on every address
 * when the user opted for the network, which needs an API key — and serves the model the
 * window has loaded through a HanashiServer over the engine's own weights
 * (hanashi_engine_lend_model: the file is not loaded a second time; the server has contexts
 * of its own, so its clients and the window's chats do not wait for each other).
 *
 * The rule when the window's model changes: from the moment a load starts, or the model is
 * unloaded, or the window uses a model on another server, the server's requests in flight
 * are cancelled and every request is answered 503 with an OpenAI error JSON that says why;
 * once the new model is loaded it is served, on the same port.  A port that cannot be
 * listened on (in use, not allowed) turns serving off again and says why ("failed").
 *
 * The API key lives in the keyring, through the same secret store as the keys of remote
 * servers (hanashi-remote-endpoints.h), under the id HANASHI_SERVING_KEY_ID; it is looked up
 * and stored on worker threads.  When a key is set every request but GET /health must carry
 * it, on loopback too.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "hanashi-engine.h"

G_BEGIN_DECLS

/* The "url" attribute of the served model's API key in the secret store. */
#define HANASHI_SERVING_KEY_ID "hanashi-serve:this-computer"

typedef enum {
  HANASHI_SERVING_OFF,       /* the setting is off */
  HANASHI_SERVING_STARTING,  /* on, the API key is being looked up */
  HANASHI_SERVING_WAITING,   /* listening, but no model to serve: requests get 503 */
  HANASHI_SERVING_ON,        /* serving the window's model */
} HanashiServingStatus;

#define HANASHI_TYPE_SERVING (hanashi_serving_get_type ())
G_DECLARE_FINAL_TYPE (HanashiServing, hanashi_serving, HANASHI, SERVING, GObject)

/* Starts following @settings (the app's schema) and @engine at once. */
HanashiServing      *hanashi_serving_new              (HanashiEngine *engine,
                                                       GSettings     *settings);
HanashiServingStatus hanashi_serving_get_status       (HanashiServing *self);
/* "http://127.0.0.1:8080" while listening (WAITING, ON), else NULL.  On the network the
 * host is this computer's name. */
const char          *hanashi_serving_get_url          (HanashiServing *self);
/* The id GET /v1/models lists (the model file's name without ".gguf") while ON, else NULL. */
const char          *hanashi_serving_get_model_id     (HanashiServing *self);
/* One translated sentence for Preferences: what is served where, or why not. */
char                *hanashi_serving_dup_description  (HanashiServing *self);

/* The API key: FALSE until the secret store has been read (it is read when serving is
 * turned on, or on hanashi_serving_load_api_key); then the key, or NULL for none. */
gboolean             hanashi_serving_get_api_key_known (HanashiServing *self);
const char          *hanashi_serving_get_api_key       (HanashiServing *self);
void                 hanashi_serving_load_api_key      (HanashiServing *self);
/* Keeps @key (NULL or "": none) in the secret store and serves with it from now on. */
void                 hanashi_serving_set_api_key       (HanashiServing *self,
                                                        const char     *key);
/* A new random key (from the system's random source): "hanashi-" and 40 hex digits. */
char                *hanashi_serving_generate_api_key  (void);

/* Signals:
 *   "changed"  ()                      the status, the address, the model or the key changed
 *   "failed"   (const char *message)   serving could not start or go on and was turned off;
 *                                      the sentence is translated
 */

G_END_DECLS
