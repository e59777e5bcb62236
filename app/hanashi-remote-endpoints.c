/* hanashi-remote-endpoints.c — see hanashi-remote-endpoints.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-remote"

#include "config.h"

#include <glib/gi18n.h>
#include <libsecret/secret.h>
#include <string.h>

#include "hanashi-remote-endpoints.h"

/* ---- secret stores ----------------------------------------------------------------------- */

static const SecretSchema *
api_key_schema (void)
{
  static const SecretSchema schema = {
    APP_ID ".ApiKey", SECRET_SCHEMA_NONE,
    { { "url", SECRET_SCHEMA_ATTRIBUTE_STRING }, { NULL, 0 } },
    0, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  };
  return &schema;
}

static char *
keyring_lookup (const char *url, GError **error)
{
  char *key = secret_password_lookup_sync (api_key_schema (), NULL, error, "url", url, NULL);
  if (key == NULL)
    return NULL;
  char *copy = g_strdup (key);
  secret_password_free (key);
  return copy;
}

static gboolean
keyring_store (const char *url, const char *key, GError **error)
{
  /* Translators: the label of an API key in the keyring; %s is the server's address */
  g_autofree char *label = g_strdup_printf (_("Hanashi API key for %s"), url);
  return secret_password_store_sync (api_key_schema (), SECRET_COLLECTION_DEFAULT, label, key, NULL, error,
                                     "url", url, NULL);
}

static gboolean
keyring_clear (const char *url, GError **error)
{
  GError *local = NULL;
  secret_password_clear_sync (api_key_schema (), NULL, &local, "url", url, NULL);
  if (local)
    {
      g_propagate_error (error, local);
      return FALSE;
    }
  return TRUE;
}

static const HanashiSecretStore keyring_store_impl = { keyring_lookup, keyring_store, keyring_clear };
const HanashiSecretStore *hanashi_secret_store_keyring (void) { return &keyring_store_impl; }

static GMutex memory_lock;
static GHashTable *memory_keys;   /* url → key */

static char *
memory_lookup (const char *url, GError **error)
{
  (void) error;
  g_mutex_lock (&memory_lock);
  char *key = memory_keys ? g_strdup (g_hash_table_lookup (memory_keys, url)) : NULL;
  g_mutex_unlock (&memory_lock);
  return key;
}

static gboolean
memory_store (const char *url, const char *key, GError **error)
{
  (void) error;
  g_mutex_lock (&memory_lock);
  if (memory_keys == NULL)
    memory_keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_hash_table_replace (memory_keys, g_strdup (url), g_strdup (key));
  g_mutex_unlock (&memory_lock);
  return TRUE;
}

static gboolean
memory_clear (const char *url, GError **error)
{
  (void) error;
  g_mutex_lock (&memory_lock);
  if (memory_keys)
    g_hash_table_remove (memory_keys, url);
  g_mutex_unlock (&memory_lock);
  return TRUE;
}

static const HanashiSecretStore memory_store_impl = { memory_lookup, memory_store, memory_clear };
const HanashiSecretStore *hanashi_secret_store_memory (void) { return &memory_store_impl; }

static const HanashiSecretStore *default_store;
static GMutex default_lock;

const HanashiSecretStore *
hanashi_secret_store_get_default (void)
{
  g_mutex_lock (&default_lock);
  const HanashiSecretStore *store = default_store;
  g_mutex_unlock (&default_lock);
  if (store)
    return store;
  return &keyring_store_impl;
}

void
hanashi_secret_store_set_default (const HanashiSecretStore *store)
{
  g_mutex_lock (&default_lock);
  default_store = store;
  g_mutex_unlock (&default_lock);
}

/* ---- endpoints ----------------------------------------------------------------------------- */

char **
hanashi_remote_endpoints_dup_urls (GSettings *settings)
{
  return g_settings_get_strv (settings, "remote-endpoints");
}

void
hanashi_remote_endpoints_add (GSettings *settings, const char *url)
{
  g_auto (GStrv) urls = g_settings_get_strv (settings, "remote-endpoints");
  if (g_strv_contains ((const char * const *) urls, url))
    return;
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  g_strv_builder_addv (builder, (const char **) urls);
  g_strv_builder_add (builder, url);
  g_auto (GStrv) updated = g_strv_builder_end (builder);
  g_settings_set_strv (settings, "remote-endpoints", (const char * const *) updated);
}

void
hanashi_remote_endpoints_remove (GSettings *settings, const char *url)
{
  g_auto (GStrv) urls = g_settings_get_strv (settings, "remote-endpoints");
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  for (char **u = urls; *u; u++)
    if (!g_str_equal (*u, url))
      g_strv_builder_add (builder, *u);
  g_auto (GStrv) updated = g_strv_builder_end (builder);
  g_settings_set_strv (settings, "remote-endpoints", (const char * const *) updated);
}

static void
clear_key_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  g_autoptr (GError) error = NULL;
  (void) source; (void) cancellable;
  if (!hanashi_secret_store_get_default ()->clear (data, &error))
    g_message ("The API key for %s could not be removed from the keyring: %s", (char *) data, error->message);
  g_task_return_boolean (task, TRUE);
}

void
hanashi_remote_endpoints_forget (GSettings *settings, const char *url)
{
  hanashi_remote_endpoints_remove (settings, url);
  g_autoptr (GTask) task = g_task_new (NULL, NULL, NULL, NULL);
  g_task_set_task_data (task, g_strdup (url), g_free);
  g_task_run_in_thread (task, clear_key_thread);
}

char *
hanashi_remote_engine_id (const char *url, const char *model)
{
  return g_strconcat ("remote\n", url, "\n", model ? model : "", NULL);
}

gboolean
hanashi_remote_engine_id_parse (const char *id, char **url_out, char **model_out)
{
  if (id == NULL || !g_str_has_prefix (id, "remote\n"))
    return FALSE;
  const char *url = id + strlen ("remote\n");
  const char *nl = strchr (url, '\n');
  if (nl == NULL || nl == url)
    return FALSE;
  if (url_out)
    *url_out = g_strndup (url, (gsize) (nl - url));
  if (model_out)
    *model_out = g_strdup (nl + 1);
  return TRUE;
}

/* ---- connecting ---------------------------------------------------------------------------- */

typedef struct {
  char *url;
  char *key;            /* to store, or NULL to look up */
  HanashiRemote *remote;
  char **models;
  gboolean is_hanashi;
} Connect;

static void
connect_free (Connect *c)
{
  g_free (c->url);
  g_free (c->key);
  if (c->remote)
    hanashi_remote_unref (c->remote);
  g_strfreev (c->models);
  g_free (c);
}

static void
connect_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  Connect *c = data;
  const HanashiSecretStore *secrets = hanashi_secret_store_get_default ();
  GError *error = NULL;
  g_autofree char *key = NULL;
  (void) source;

  /* Keys and settings are filed under the API root ("http://host:8080/v1"), however the
   * address was typed. */
  HanashiRemote *keyless = hanashi_remote_new (c->url, NULL, &error);
  if (keyless == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  g_free (c->url);
  c->url = g_strdup (hanashi_remote_get_api_url (keyless));
  hanashi_remote_unref (keyless);

  if (c->key != NULL)
    {
      gboolean ok = *c->key ? secrets->store (c->url, c->key, &error) : secrets->clear (c->url, &error);
      if (!ok)
        {
          g_task_return_error (task, error);
          return;
        }
      key = g_strdup (c->key);
    }
  else
    {
      key = secrets->lookup (c->url, &error);
      if (error)
        {
          /* No keyring is not the end: a server without a key still works. */
          g_message ("The API key for %s could not be read from the keyring: %s", c->url, error->message);
          g_clear_error (&error);
        }
    }
  c->remote = hanashi_remote_new (c->url, key, &error);
  if (c->remote == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  c->models = hanashi_remote_list_models (c->remote, &c->is_hanashi, cancellable, &error);
  if (c->models == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

void
hanashi_remote_connect_async (const char *url, const char *key, GCancellable *cancellable,
                              GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr (GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  Connect *c = g_new0 (Connect, 1);
  c->url = g_strstrip (g_strdup (url));
  c->key = key ? g_strstrip (g_strdup (key)) : NULL;
  g_task_set_source_tag (task, hanashi_remote_connect_async);
  g_task_set_task_data (task, c, (GDestroyNotify) connect_free);
  g_task_run_in_thread (task, connect_thread);
}

HanashiRemote *
hanashi_remote_connect_finish (GAsyncResult *result, char ***models_out, gboolean *is_hanashi_out, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  if (!g_task_propagate_boolean (G_TASK (result), error))
    return NULL;
  Connect *c = g_task_get_task_data (G_TASK (result));
  if (models_out)
    *models_out = g_steal_pointer (&c->models);
  if (is_hanashi_out)
    *is_hanashi_out = c->is_hanashi;
  return g_steal_pointer (&c->remote);
}

/* ---- errors -------------------------------------------------------------------------------- */

/* The server's own words, which the client quotes after "said: “…”", or NULL. */
static char *
server_words (const char *message)
{
  const char *start = strstr (message, "said: “");
  if (start == NULL)
    start = strstr (message, "error: “");
  if (start == NULL)
    return NULL;
  start = strstr (start, "“") + strlen ("“");
  const char *end = g_strrstr (start, "”");
  return end ? g_strndup (start, (gsize) (end - start)) : NULL;
}

char *
hanashi_describe_remote_error (const GError *error)
{
  if (error == NULL || error->domain != HANASHI_REMOTE_ERROR)
    return NULL;
  const char *text = NULL;
  switch ((HanashiRemoteError) error->code)
    {
    case HANASHI_REMOTE_ERROR_INVALID_URL:
      text = _("This is not a server address. Give one like http://127.0.0.1:8080.");
      break;
    case HANASHI_REMOTE_ERROR_UNREACHABLE:
      text = _("The server cannot be reached. Check the address, and that the server is running.");
      break;
    case HANASHI_REMOTE_ERROR_UNAUTHORIZED:
      text = _("The server refused the API key. Check the key.");
      break;
    case HANASHI_REMOTE_ERROR_NOT_FOUND:
      text = _("The server does not serve this model.");
      break;
    case HANASHI_REMOTE_ERROR_BAD_REQUEST:
      text = _("The server refused the request.");
      break;
    case HANASHI_REMOTE_ERROR_SERVER:
      text = _("The server failed while answering.");
      break;
    case HANASHI_REMOTE_ERROR_PROTOCOL:
      text = _("The server’s answer is not what an OpenAI-compatible server sends.");
      break;
    case HANASHI_REMOTE_ERROR_DISCONNECTED:
      text = _("The connection to the server broke before the reply was finished.");
      break;
    case HANASHI_REMOTE_ERROR_CANCELLED:
    default:
      return g_strdup (error->message);
    }
  g_autofree char *said = server_words (error->message);
  if (said == NULL)
    return g_strdup (text);
  /* Translators: %s is the server's own error message, which may be in English */
  g_autofree char *quoted = g_strdup_printf (_("The server said: “%s”"), said);
  return g_strjoin (" ", text, quoted, NULL);
}
