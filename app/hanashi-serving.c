/* hanashi-serving.c — see hanashi-serving.h.
 *
 * One thing listens on the port at a time: the HanashiServer over the engine's current
 * model, or, while there is no model to serve, a small SoupServer that answers every
 * request 503 with the reason.  Each change (a setting, the engine's state, the key) runs
 * update(), which works out what should listen and replaces what listens when that differs;
 * the switch happens within one main-loop callback, on the same port.
 *
 * Replacing or stopping the HanashiServer cancels its generations and joins its slot
 * threads: a cancelled generation stops at the next layer it computes, so the join waits
 * for at most one layer.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-serving"

#include "config.h"

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "hanashi-remote-endpoints.h"
#include "hanashi-server.h"
#include "hanashi-serving.h"

#define LOOPBACK_HOST "127.0.0.1"
#define NETWORK_HOST "0.0.0.0"

/* Why there is no model to serve (the 503's sentence, and Preferences' in translation). */
typedef enum {
  NO_MODEL_UNLOADED,
  NO_MODEL_LOADING,
  NO_MODEL_REMOTE,
} NoModelReason;

struct _HanashiServing
{
  GObject parent_instance;

  HanashiEngine       *engine;
  GSettings           *settings;
  HanashiServingStatus status;
  char                *problem;        /* why serving went off, until it is turned on again */

  /* the API key */
  gboolean             key_known;
  char                *api_key;        /* NULL: none */
  char                *key_problem;    /* the secret store could not be read */
  GCancellable        *key_lookup;     /* the lookup in flight, or NULL */

  /* what listens now: server (a model) or refuser (no model), or neither */
  HanashiServer       *server;
  HanashiModelLoan    *served;         /* the loan server was made for (compared, not used) */
  SoupServer          *refuser;
  NoModelReason        refusal;
  char                *host;           /* where it listens, with which key */
  guint                port;
  char                *listen_key;
  char                *url;
  char                *model_id;

  guint                turn_off_source;
  gboolean             updating;       /* in update() (see there) */
  gboolean             update_again;
};

G_DEFINE_FINAL_TYPE (HanashiServing, hanashi_serving, G_TYPE_OBJECT)

enum { SIGNAL_CHANGED, SIGNAL_FAILED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void update (HanashiServing *self);

/* ---- the 503 while there is no model -------------------------------------------------- */

/* Not translated: API errors are read by programs and their developers, and every other
 * error of the server is in English (docs/server.md). */
static const char *
refusal_message (NoModelReason reason)
{
  switch (reason)
    {
    case NO_MODEL_LOADING:
      return "Hanashi is loading another model: try again in a moment.";
    case NO_MODEL_REMOTE:
      return "Hanashi's window is using a model on another server, which this server does not pass on: "
             "load a model file in Hanashi to serve it.";
    case NO_MODEL_UNLOADED:
    default:
      return "No model is loaded in Hanashi: open one in its window.";
    }
}

static void
refuse_request (SoupServer        *server,
                SoupServerMessage *msg,
                const char        *path,
                GHashTable        *query,
                gpointer           data)
{
  HanashiServing *self = data;
  g_autoptr (JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "error");
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "message");
  json_builder_add_string_value (builder, refusal_message (self->refusal));
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, "server_error");
  json_builder_set_member_name (builder, "param");
  json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "code");
  json_builder_add_string_value (builder, "model_not_loaded");
  json_builder_end_object (builder);
  json_builder_end_object (builder);
  g_autoptr (JsonNode) root = json_builder_get_root (builder);
  g_autofree char *body = json_to_string (root, FALSE);

  soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Retry-After",
                                self->refusal == NO_MODEL_LOADING ? "2" : "10");
  soup_server_message_set_status (msg, SOUP_STATUS_SERVICE_UNAVAILABLE, NULL);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, body, strlen (body));
}

/* ---- listening -------------------------------------------------------------------------- */

/* The fields are cleared before anything is torn down: disposing a HanashiServer runs the
 * main context's pending sources (its last flushes), which may call update() again. */
static void
stop_listening (HanashiServing *self)
{
  g_autoptr (HanashiServer) server = g_steal_pointer (&self->server);
  /* held only to be released last, after the server has stopped */
  G_GNUC_UNUSED g_autoptr (HanashiModelLoan) served = g_steal_pointer (&self->served);
  g_autoptr (SoupServer) refuser = g_steal_pointer (&self->refuser);

  g_clear_pointer (&self->host, g_free);
  g_clear_pointer (&self->listen_key, g_free);
  g_clear_pointer (&self->url, g_free);
  g_clear_pointer (&self->model_id, g_free);
  if (server != NULL)
    hanashi_server_stop (server);
  if (refuser != NULL)
    soup_server_disconnect (refuser);
}

/* The port bound (the one asked for, or the system's choice for 0), or 0 with @error set. */
static guint
listen_refusing (HanashiServing *self, const char *host, guint port, GError **error)
{
  g_autoptr (SoupServer) refuser = soup_server_new ("server-header", "hanashi", NULL);
  g_autoptr (GInetAddress) address = g_inet_address_new_from_string (host);
  g_autoptr (GSocketAddress) wanted = g_inet_socket_address_new (address, (guint16) port);

  soup_server_add_handler (refuser, NULL, refuse_request, self, NULL);
  if (!soup_server_listen (refuser, wanted, 0, error))
    return 0;
  GSList *listeners = soup_server_get_listeners (refuser);
  guint bound = 0;
  if (listeners != NULL)
    {
      g_autoptr (GSocketAddress) local = g_socket_get_local_address (listeners->data, error);
      if (local != NULL)
        bound = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (local));
    }
  g_slist_free (listeners);
  if (bound != 0)
    self->refuser = g_steal_pointer (&refuser);
  else
    soup_server_disconnect (refuser);
  return bound;
}

/* The name /v1/models lists: the file's name without ".gguf", as `hanashi-cli serve` says. */
static char *
model_id_for (HanashiModelLoan *loan)
{
  g_autofree char *base = g_path_get_basename (hanashi_model_loan_get_path (loan));
  if (g_str_has_suffix (base, ".gguf"))
    base[strlen (base) - strlen (".gguf")] = '\0';
  return g_steal_pointer (&base);
}

static guint
listen_model (HanashiServing *self, HanashiModelLoan *loan, const char *host, guint port, GError **error)
{
  HanashiServerOptions options;
  g_autofree char *model_id = model_id_for (loan);

  hanashi_server_options_init (&options);
  options.model_id = model_id;
  options.api_key = self->api_key;
  /* the threads the window's own chats use (0: one per physical core) */
  options.n_threads = g_settings_get_int (self->settings, "n-threads");
  g_autoptr (HanashiServer) server = hanashi_server_new_for_loan (loan, &options, error);
  if (server == NULL)
    return 0;
  guint bound = hanashi_server_listen (server, host, port, error);
  if (bound == 0)
    return 0;
  self->server = g_steal_pointer (&server);
  self->served = hanashi_model_loan_ref (loan);
  self->model_id = g_steal_pointer (&model_id);
  return bound;
}

/* ---- state ------------------------------------------------------------------------------ */

static void
set_status (HanashiServing *self, HanashiServingStatus status)
{
  self->status = status;
  g_signal_emit (self, signals[SIGNAL_CHANGED], 0);
}

static gboolean
turn_setting_off (gpointer data)
{
  HanashiServing *self = data;
  self->turn_off_source = 0;
  if (self->problem != NULL)
    g_settings_set_boolean (self->settings, "serve-enabled", FALSE);
  return G_SOURCE_REMOVE;
}

/* Turns serving off and says why.  The setting goes off from an idle callback: this may run
 * inside the setting's own change (a switch bound to it), which a binding does not hear. */
static void
fail (HanashiServing *self, char *message)
{
  stop_listening (self);
  g_free (self->problem);
  self->problem = message;
  g_message ("Serving turned off: %s", message);
  set_status (self, HANASHI_SERVING_OFF);
  g_signal_emit (self, signals[SIGNAL_FAILED], 0, message);
  if (self->turn_off_source == 0)
    self->turn_off_source = g_idle_add (turn_setting_off, self);
}

static char *
listen_problem (const GError *error, guint port, gboolean preparing)
{
  if (preparing)
    /* Translators: %s says why (in English, from the engine) */
    return g_strdup_printf (_("The model could not be prepared for serving: %s"), error->message);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE))
    return g_strdup_printf (_("Port %u is already in use by another program. Choose another port, then turn serving on again."), port);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED))
    return g_strdup_printf (_("This system does not let Hanashi listen on port %u (ports below 1024 are usually reserved). Choose another port."), port);
  /* Translators: %u is a port number, %s says why */
  return g_strdup_printf (_("Could not listen on port %u: %s"), port, error->message);
}

static void
update_once (HanashiServing *self)
{
  if (!g_settings_get_boolean (self->settings, "serve-enabled") || self->problem != NULL)
    {
      gboolean was_listening = self->host != NULL;
      stop_listening (self);
      if (self->status != HANASHI_SERVING_OFF || was_listening)
        set_status (self, HANASHI_SERVING_OFF);
      return;
    }
  if (!self->key_known)
    {
      hanashi_serving_load_api_key (self);
      if (self->status != HANASHI_SERVING_STARTING)
        set_status (self, HANASHI_SERVING_STARTING);
      return;
    }

  gboolean network = g_settings_get_boolean (self->settings, "serve-network");
  if (network && self->api_key == NULL)
    {
      if (self->key_problem != NULL)
        /* Translators: %s says why the keyring could not be read */
        fail (self, g_strdup_printf (_("Serving on the network needs an API key, and the keyring could not be read: %s"),
                                     self->key_problem));
      else
        fail (self, g_strdup (_("Serving on the network needs an API key. Generate one or type one, then turn serving on again.")));
      return;
    }
  const char *host = network ? NETWORK_HOST : LOOPBACK_HOST;
  guint wanted_port = (guint) g_settings_get_int (self->settings, "serve-port");

  /* What should be served: the engine's model once it is ready, else nothing, and why. */
  g_autoptr (HanashiModelLoan) loan = NULL;
  NoModelReason reason = NO_MODEL_UNLOADED;
  switch (hanashi_engine_get_state (self->engine))
    {
    case HANASHI_ENGINE_STATE_LOADING:
      reason = NO_MODEL_LOADING;
      break;
    case HANASHI_ENGINE_STATE_READY:
    case HANASHI_ENGINE_STATE_GENERATING:
      loan = hanashi_engine_lend_model (self->engine);
      reason = loan == NULL && hanashi_engine_get_model_info (self->engine) != NULL ? NO_MODEL_REMOTE
                                                                                       : NO_MODEL_UNLOADED;
      break;
    case HANASHI_ENGINE_STATE_NO_MODEL:
    default:
      break;
    }

  gboolean same_place = self->host != NULL && g_str_equal (self->host, host)
                        && g_strcmp0 (self->listen_key, self->api_key) == 0
                        && (wanted_port == 0 || wanted_port == self->port);
  if (same_place && loan != NULL && loan == self->served)
    return;
  if (same_place && loan == NULL && self->refuser != NULL)
    {
      if (self->refusal != reason)
        {
          self->refusal = reason;
          g_signal_emit (self, signals[SIGNAL_CHANGED], 0);
        }
      return;
    }

  /* Port 0 (any free port) keeps the port it got while it listens at the same address. */
  guint port = wanted_port != 0 ? wanted_port
               : self->host != NULL && g_str_equal (self->host, host) ? self->port : 0;
  stop_listening (self);
  g_autoptr (GError) error = NULL;
  guint bound;
  if (loan != NULL)
    bound = listen_model (self, loan, host, port, &error);
  else
    {
      self->refusal = reason;
      bound = listen_refusing (self, host, port, &error);
    }
  if (bound == 0)
    {
      if (error == NULL)   /* (a listener that says nothing of its address) */
        error = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_FAILED, "no listening socket");
      gboolean preparing = error != NULL && error->domain == HANASHI_SERVER_ERROR;
      fail (self, listen_problem (error, port, preparing));
      return;
    }
  self->host = g_strdup (host);
  self->port = bound;
  self->listen_key = g_strdup (self->api_key);
  self->url = g_strdup_printf ("http://%s:%u", network ? g_get_host_name () : LOOPBACK_HOST, bound);
  set_status (self, loan != NULL ? HANASHI_SERVING_ON : HANASHI_SERVING_WAITING);
}

/* One update at a time: one that is asked for while another runs (from a signal the first
 * one caused, or from the main-loop iterations of a server being disposed) runs after it. */
static void
update (HanashiServing *self)
{
  if (self->updating)
    {
      self->update_again = TRUE;
      return;
    }
  self->updating = TRUE;
  do
    {
      self->update_again = FALSE;
      update_once (self);
    }
  while (self->update_again && self->settings != NULL);
  self->updating = FALSE;
}

static void
on_enabled_changed (HanashiServing *self)
{
  if (g_settings_get_boolean (self->settings, "serve-enabled"))
    g_clear_pointer (&self->problem, g_free);
  update (self);
}

/* ---- the API key ------------------------------------------------------------------------ */

static void
lookup_key_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  GError *error = NULL;
  char *key = hanashi_secret_store_get_default ()->lookup (HANASHI_SERVING_KEY_ID, &error);
  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, key, g_free);
}

static void
key_looked_up (GObject *source, GAsyncResult *result, gpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *key = g_task_propagate_pointer (G_TASK (result), &error);

  /* cancelled: a key was set (or the object went away) meanwhile */
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  HanashiServing *self = HANASHI_SERVING (source);
  g_clear_object (&self->key_lookup);
  self->key_known = TRUE;
  g_clear_pointer (&self->key_problem, g_free);
  if (error != NULL)
    {
      g_message ("The served model's API key could not be read: %s", error->message);
      self->key_problem = g_strdup (error->message);
    }
  g_free (self->api_key);
  self->api_key = key != NULL && *key != '\0' ? g_steal_pointer (&key) : NULL;
  g_signal_emit (self, signals[SIGNAL_CHANGED], 0);
  update (self);
}

void
hanashi_serving_load_api_key (HanashiServing *self)
{
  g_return_if_fail (HANASHI_IS_SERVING (self));
  if (self->key_known || self->key_lookup != NULL)
    return;
  self->key_lookup = g_cancellable_new ();
  g_autoptr (GTask) task = g_task_new (self, self->key_lookup, key_looked_up, NULL);
  g_task_run_in_thread (task, lookup_key_thread);
}

static void
store_key_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  const char *key = data;
  const HanashiSecretStore *store = hanashi_secret_store_get_default ();
  GError *error = NULL;
  gboolean ok = key != NULL ? store->store (HANASHI_SERVING_KEY_ID, key, &error)
                            : store->clear (HANASHI_SERVING_KEY_ID, &error);
  if (ok)
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

static void
key_stored (GObject *source, GAsyncResult *result, gpointer data)
{
  g_autoptr (GError) error = NULL;
  if (g_task_propagate_boolean (G_TASK (result), &error))
    return;
  /* the key is used in this session all the same; the user hears that it will not last */
  /* Translators: %s says why */
  g_autofree char *text = g_strdup_printf (_("The API key could not be kept in the keyring: %s"), error->message);
  g_message ("%s", text);
  g_signal_emit (source, signals[SIGNAL_FAILED], 0, text);
}

void
hanashi_serving_set_api_key (HanashiServing *self, const char *key)
{
  g_return_if_fail (HANASHI_IS_SERVING (self));
  if (self->key_lookup != NULL)
    {
      g_cancellable_cancel (self->key_lookup);
      g_clear_object (&self->key_lookup);
    }
  self->key_known = TRUE;
  g_clear_pointer (&self->key_problem, g_free);
  g_free (self->api_key);
  self->api_key = key != NULL && *key != '\0' ? g_strdup (key) : NULL;

  /* Stores run one after the other in GLib's pool, but may finish out of order with two in
   * flight; the keyring keeps the last one that ran, and the user set them in this order. */
  g_autoptr (GTask) task = g_task_new (self, NULL, key_stored, NULL);
  g_task_set_task_data (task, g_strdup (self->api_key), g_free);
  g_task_run_in_thread (task, store_key_thread);

  g_signal_emit (self, signals[SIGNAL_CHANGED], 0);
  update (self);
}

char *
hanashi_serving_generate_api_key (void)
{
  guint8 bytes[20];
  gsize filled = 0;
  while (filled < sizeof bytes)
    {
      ssize_t n = getrandom (bytes + filled, sizeof bytes - filled, 0);
      if (n < 0)
        g_error ("The system's random source failed: %s", g_strerror (errno));
      filled += (gsize) n;
    }
  GString *key = g_string_new ("hanashi-");
  for (gsize i = 0; i < sizeof bytes; i++)
    g_string_append_printf (key, "%02x", bytes[i]);
  return g_string_free (key, FALSE);
}

gboolean
hanashi_serving_get_api_key_known (HanashiServing *self)
{
  g_return_val_if_fail (HANASHI_IS_SERVING (self), FALSE);
  return self->key_known;
}

const char *
hanashi_serving_get_api_key (HanashiServing *self)
{
  g_return_val_if_fail (HANASHI_IS_SERVING (self), NULL);
  return self->api_key;
}

/* ---- public ----------------------------------------------------------------------------- */

HanashiServingStatus
hanashi_serving_get_status (HanashiServing *self)
{
  g_return_val_if_fail (HANASHI_IS_SERVING (self), HANASHI_SERVING_OFF);
  return self->status;
}

const char *
hanashi_serving_get_url (HanashiServing *self)
{
  g_return_val_if_fail (HANASHI_IS_SERVING (self), NULL);
  return self->url;
}

const char *
hanashi_serving_get_model_id (HanashiServing *self)
{
  g_return_val_if_fail (HANASHI_IS_SERVING (self), NULL);
  return self->status == HANASHI_SERVING_ON ? self->model_id : NULL;
}

char *
hanashi_serving_dup_description (HanashiServing *self)
{
  g_return_val_if_fail (HANASHI_IS_SERVING (self), NULL);
  switch (self->status)
    {
    case HANASHI_SERVING_STARTING:
      return g_strdup (_("Starting…"));
    case HANASHI_SERVING_WAITING:
      switch (self->refusal)
        {
        case NO_MODEL_LOADING:
          /* Translators: %s is an address such as http://127.0.0.1:8080 */
          return g_strdup_printf (_("Listening on %s; a model is loading"), self->url);
        case NO_MODEL_REMOTE:
          /* Translators: %s is an address such as http://127.0.0.1:8080 */
          return g_strdup_printf (_("Listening on %s; a model on another server cannot be served again"), self->url);
        case NO_MODEL_UNLOADED:
        default:
          /* Translators: %s is an address such as http://127.0.0.1:8080 */
          return g_strdup_printf (_("Listening on %s; no model is loaded"), self->url);
        }
    case HANASHI_SERVING_ON:
      /* Translators: the first %s is a model's name, the second an address such as http://127.0.0.1:8080 */
      return g_strdup_printf (_("Serving “%s” on %s"), self->model_id, self->url);
    case HANASHI_SERVING_OFF:
    default:
      return g_strdup (self->problem != NULL ? self->problem : _("Off"));
    }
}

/* ---- GObject ---------------------------------------------------------------------------- */

HanashiServing *
hanashi_serving_new (HanashiEngine *engine, GSettings *settings)
{
  g_return_val_if_fail (HANASHI_IS_ENGINE (engine), NULL);
  g_return_val_if_fail (G_IS_SETTINGS (settings), NULL);
  HanashiServing *self = g_object_new (HANASHI_TYPE_SERVING, NULL);
  self->engine = g_object_ref (engine);
  self->settings = g_object_ref (settings);
  g_signal_connect_object (settings, "changed::serve-enabled", G_CALLBACK (on_enabled_changed), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (settings, "changed::serve-port", G_CALLBACK (update), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (settings, "changed::serve-network", G_CALLBACK (update), self, G_CONNECT_SWAPPED);
  /* the model changing: a load starts (LOADING), ends (READY), or the model goes (NO_MODEL) */
  g_signal_connect_object (engine, "notify::state", G_CALLBACK (update), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (engine, "model-loaded", G_CALLBACK (update), self, G_CONNECT_SWAPPED);
  update (self);
  return self;
}

static void
hanashi_serving_dispose (GObject *object)
{
  HanashiServing *self = HANASHI_SERVING (object);
  if (self->key_lookup != NULL)
    g_cancellable_cancel (self->key_lookup);
  g_clear_object (&self->key_lookup);
  if (self->settings != NULL)
    g_signal_handlers_disconnect_by_data (self->settings, self);
  if (self->engine != NULL)
    g_signal_handlers_disconnect_by_data (self->engine, self);
  g_clear_handle_id (&self->turn_off_source, g_source_remove);
  /* quitting, or the window's engine going: the port closes now */
  self->updating = TRUE;
  stop_listening (self);
  g_clear_object (&self->settings);
  g_clear_object (&self->engine);
  G_OBJECT_CLASS (hanashi_serving_parent_class)->dispose (object);
}

static void
hanashi_serving_finalize (GObject *object)
{
  HanashiServing *self = HANASHI_SERVING (object);
  g_free (self->problem);
  g_free (self->api_key);
  g_free (self->key_problem);
  G_OBJECT_CLASS (hanashi_serving_parent_class)->finalize (object);
}

static void
hanashi_serving_class_init (HanashiServingClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  object_class->dispose = hanashi_serving_dispose;
  object_class->finalize = hanashi_serving_finalize;

  signals[SIGNAL_CHANGED] = g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                          0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_FAILED] = g_signal_new ("failed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                         0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
hanashi_serving_init (HanashiServing *self)
{
}
