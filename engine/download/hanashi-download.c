/* hanashi-download.c — resumable, verified model downloads.
 *
 * The transfer runs in a worker thread with libsoup's blocking API (one SoupSession per
 * transfer, created and used only on that thread).  The worker publishes progress under
 * a mutex and keeps at most one idle callback pending on the owner's main context, so a
 * fast connection cannot flood the GUI with notifications.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-download"

#include "hanashi-download.h"

#include "hn-gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gunixinputstream.h>
#include <gio/gunixoutputstream.h>
#include <glib/gi18n-lib.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>

#define CHUNK_SIZE (256 * 1024)
/* Hugging Face answers a resolve URL with one or two redirects (to its CDN). */
#define MAX_REDIRECTS 10
/* Speed is averaged over windows of this length so the estimate does not jitter. */
#define SPEED_WINDOW_SECONDS 1.0

struct _HanashiDownload {
  GObject parent_instance;

  char *uri;
  GFile *destination;
  char *sha256;           /* lowercase, or NULL */
  guint64 expected_size;  /* 0 = unknown */
  GMainContext *owner_context;

  /* Shared with the worker: guarded by `lock`. */
  GMutex lock;
  HanashiDownloadState state;
  guint64 received;
  guint64 total;
  double speed;
  GError *error;
  gboolean notify_pending;

  GCancellable *cancellable;
  gboolean delete_part_on_stop; /* cancel (not pause) removes the .part file */
};

enum {
  PROP_0,
  PROP_STATE,
  PROP_RECEIVED,
  PROP_TOTAL,
  N_PROPS
};

enum {
  FINISHED,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (HanashiDownload, hanashi_download, G_TYPE_OBJECT)
G_DEFINE_QUARK (hanashi-download-error-quark, hanashi_download_error)

static char *
part_path (HanashiDownload *self)
{
  g_autofree char *path = g_file_get_path (self->destination);
  return g_strconcat (path, ".part", NULL);
}

/* ---- progress hand-off to the owner's main context ---- */

static gboolean
notify_in_owner (gpointer data)
{
  HanashiDownload *self = data;
  HanashiDownloadState state;

  g_mutex_lock (&self->lock);
  self->notify_pending = FALSE;
  state = self->state;
  g_mutex_unlock (&self->lock);

  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_RECEIVED]);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_TOTAL]);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
  (void) state;
  return G_SOURCE_REMOVE;
}

static void
schedule_notify (HanashiDownload *self)
{
  /* Called with the lock held. */
  if (self->notify_pending)
    return;
  self->notify_pending = TRUE;
  /* Always a queued source: g_main_context_invoke() would run the callback right here
   * on the worker when the owner's context happens to be free. */
  g_autoptr (GSource) source = g_idle_source_new ();
  g_source_set_priority (source, G_PRIORITY_DEFAULT_IDLE);
  g_source_set_callback (source, notify_in_owner, g_object_ref (self), g_object_unref);
  g_source_set_static_name (source, "[hanashi] download progress");
  g_source_attach (source, self->owner_context);
}

static void
set_progress (HanashiDownload *self, guint64 received, guint64 total, double speed)
{
  g_mutex_lock (&self->lock);
  self->received = received;
  self->total = total;
  self->speed = speed;
  schedule_notify (self);
  g_mutex_unlock (&self->lock);
}

static void
set_state (HanashiDownload *self, HanashiDownloadState state)
{
  g_mutex_lock (&self->lock);
  self->state = state;
  schedule_notify (self);
  g_mutex_unlock (&self->lock);
}

/* ---- error wording ---- */

static char *
host_of (const char *uri)
{
  g_autoptr (GUri) parsed = g_uri_parse (uri, G_URI_FLAGS_NONE, NULL);
  return g_strdup (parsed && g_uri_get_host (parsed) ? g_uri_get_host (parsed) : uri);
}

static void
set_network_error (GError **error, const char *uri, const GError *cause)
{
  g_autofree char *host = host_of (uri);
  if (cause->domain == G_RESOLVER_ERROR ||
      g_error_matches (cause, G_IO_ERROR, G_IO_ERROR_NETWORK_UNREACHABLE) ||
      g_error_matches (cause, G_IO_ERROR, G_IO_ERROR_HOST_UNREACHABLE) ||
      g_error_matches (cause, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED) ||
      g_error_matches (cause, G_IO_ERROR, G_IO_ERROR_TIMED_OUT))
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_OFFLINE,
                 _("Could not reach %s. Check your internet connection and try again."), host);
  else
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INTERRUPTED,
                 _("The connection to %s was interrupted (%s). The download can be resumed."),
                 host, cause->message);
}

static void
set_file_error (GError **error, const GError *cause)
{
  if (g_error_matches (cause, G_IO_ERROR, G_IO_ERROR_NO_SPACE))
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_DISK_FULL,
                 _("The disk is full. Free some space and resume the download."));
  else
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_IO,
                 _("Could not write the model file: %s"), cause->message);
}

/* The .part file keeps a fixed name so that a download can resume, which makes it a name
 * someone could plant a symbolic link at: it is opened without following links, never
 * through GFile (which would write through one). */
static int
open_part (const char *part, int flags, GError **error)
{
  int fd = g_open (part, flags | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd >= 0)
    return fd;
  int saved = errno;
  if (saved == ELOOP)
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_IO,
                 _("The partial download “%s” is a symbolic link, which is not followed. Remove it and try again."),
                 part);
  else if (saved == ENOSPC)
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_DISK_FULL,
                 _("The disk is full. Free some space and resume the download."));
  else
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_IO,
                 _("Could not write the model file: %s"), g_strerror (saved));
  return -1;
}

/* ---- the worker ---- */

static gboolean
check_free_space (GFile *destination, guint64 needed, GError **error)
{
  g_autoptr (GFile) parent = g_file_get_parent (destination);
  g_autoptr (GFileInfo) info =
    g_file_query_filesystem_info (parent, G_FILE_ATTRIBUTE_FILESYSTEM_FREE, NULL, NULL);
  if (info == NULL || !g_file_info_has_attribute (info, G_FILE_ATTRIBUTE_FILESYSTEM_FREE))
    return TRUE; /* unknown: the write itself will report a full disk */
  guint64 free_bytes = g_file_info_get_attribute_uint64 (info, G_FILE_ATTRIBUTE_FILESYSTEM_FREE);
  if (needed > free_bytes) {
    g_autofree char *need = g_format_size (needed);
    g_autofree char *have = g_format_size (free_bytes);
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_DISK_FULL,
                 _("Not enough disk space: the model needs %s but only %s is free."), need, have);
    return FALSE;
  }
  return TRUE;
}

/* Feeds the first `length` bytes of the .part file into `sum`: a resumed download's
 * checksum must cover the bytes fetched before the interruption too.  `hashed` is how many
 * there were (fewer only if the file shrank since it was measured). */
static gboolean
hash_existing_part (const char *part, guint64 length, GChecksum *sum, guint64 *hashed,
                    GCancellable *cancellable, GError **error)
{
  g_autoptr (GError) local = NULL;
  int fd = open_part (part, O_RDONLY, error);
  if (fd < 0)
    return FALSE;
  g_autoptr (GInputStream) in = g_unix_input_stream_new (fd, TRUE);
  g_autofree guint8 *buf = g_malloc (CHUNK_SIZE);
  guint64 left = length;
  while (left > 0) {
    gssize n = g_input_stream_read (G_INPUT_STREAM (in), buf, (gsize) MIN (left, (guint64) CHUNK_SIZE),
                                    cancellable, &local);
    if (n < 0) {
      if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_propagate_error (error, g_steal_pointer (&local));
      else
        g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_IO,
                     _("Could not read the partial download: %s"), local->message);
      return FALSE;
    }
    if (n == 0)
      break; /* shorter than a moment ago: resume from where it ends */
    g_checksum_update (sum, buf, n);
    left -= (guint64) n;
  }
  *hashed = length - left;
  return TRUE;
}

static void
set_size_error (GError **error, guint64 offered, guint64 expected)
{
  g_autofree char *have = g_format_size_full (offered, G_FORMAT_SIZE_LONG_FORMAT);
  g_autofree char *want = g_format_size_full (expected, G_FORMAT_SIZE_LONG_FORMAT);
  g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_SIZE,
               _("The file on the server is %s, but %s was expected. It is not the expected "
                 "file, so nothing was kept."),
               have, want);
}

static gboolean
verify_and_install (HanashiDownload *self, const char *part, const char *digest, GError **error)
{
  /* The checksum first: when it matches, the file is exactly the published one. */
  if (self->sha256 != NULL && g_strcmp0 (digest, self->sha256) != 0) {
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_CHECKSUM,
                 _("The downloaded file does not match its SHA-256 checksum (expected %s, got %s), "
                   "so it was deleted. Download it again; if this happens again, the file on the "
                   "server is not the expected one."),
                 self->sha256, digest ? digest : "?");
    return FALSE;
  }

  HnError err = { 0 };
  HnGguf *gguf = hn_gguf_open (part, &err);
  if (gguf == NULL) {
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_NOT_GGUF,
                 _("The downloaded file is not a usable GGUF model (%s)."), err.message);
    return FALSE;
  }
  hn_gguf_close (gguf);

  g_autofree char *dest = g_file_get_path (self->destination);
  if (g_rename (part, dest) != 0) {
    int saved = errno;
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_IO,
                 _("Could not move the finished download into place: %s"), g_strerror (saved));
    return FALSE;
  }
  return TRUE;
}

static gboolean
is_loopback_host (const char *host)
{
  if (host == NULL)
    return FALSE;
  if (g_ascii_strcasecmp (host, "localhost") == 0)
    return TRUE;
  g_autoptr (GInetAddress) address = g_inet_address_new_from_string (host);
  return address != NULL && g_inet_address_get_is_loopback (address);
}

static gboolean
uri_is_allowed (GUri *uri, const char *text, GError **error)
{
  const char *scheme = g_uri_get_scheme (uri);
  if (g_ascii_strcasecmp (scheme, "https") == 0)
    return TRUE;
  if (g_ascii_strcasecmp (scheme, "http") == 0) {
    if (is_loopback_host (g_uri_get_host (uri)))
      return TRUE;
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INSECURE,
                 _("“%s” is not a secure address. Models are downloaded over https only, so that "
                   "nobody on the way can swap the file."),
                 text);
    return FALSE;
  }
  g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INVALID_URI,
               _("“%s” is not a web address (https://…)."), text);
  return FALSE;
}

gboolean
hanashi_download_uri_is_allowed (const char *uri, GError **error)
{
  g_return_val_if_fail (uri != NULL, FALSE);
  g_autoptr (GUri) parsed = g_uri_parse (uri, SOUP_HTTP_URI_FLAGS, NULL);
  if (parsed == NULL || g_uri_get_host (parsed) == NULL || *g_uri_get_host (parsed) == '\0') {
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INVALID_URI,
                 _("“%s” is not a valid web address."), uri);
    return FALSE;
  }
  return uri_is_allowed (parsed, uri, error);
}

gboolean
hanashi_download_sha256_is_valid (const char *text)
{
  if (text == NULL || strlen (text) != 64)
    return FALSE;
  for (const char *c = text; *c; c++)
    if (!g_ascii_isxdigit (*c))
      return FALSE;
  return TRUE;
}

/* Sends the GET and follows redirects itself, so that every hop is checked: libsoup would
 * follow a redirect from https to plain http without asking. */
static GInputStream *
send_checked (HanashiDownload *self, SoupSession *session, guint64 offset, SoupMessage **out_msg,
              GCancellable *cancellable, GError **error)
{
  g_autoptr (GUri) current = g_uri_parse (self->uri, SOUP_HTTP_URI_FLAGS, NULL);
  if (current == NULL || g_uri_get_host (current) == NULL) {
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INVALID_URI,
                 _("“%s” is not a valid web address."), self->uri);
    return NULL;
  }
  for (int hop = 0; hop <= MAX_REDIRECTS; hop++) {
    g_autofree char *text = g_uri_to_string (current);
    if (!uri_is_allowed (current, text, error))
      return NULL;
    g_autoptr (SoupMessage) msg = soup_message_new_from_uri (SOUP_METHOD_GET, current);
    soup_message_add_flags (msg, SOUP_MESSAGE_NO_REDIRECT);
    if (offset > 0)
      soup_message_headers_set_range (soup_message_get_request_headers (msg), (goffset) offset, -1);

    g_autoptr (GError) local = NULL;
    g_autoptr (GInputStream) body = soup_session_send (session, msg, cancellable, &local);
    if (body == NULL) {
      if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_propagate_error (error, g_steal_pointer (&local));
      else
        set_network_error (error, text, local);
      return NULL;
    }
    guint status = soup_message_get_status (msg);
    const char *location = soup_message_headers_get_one (soup_message_get_response_headers (msg), "Location");
    if (!SOUP_STATUS_IS_REDIRECTION (status) || location == NULL) {
      *out_msg = g_steal_pointer (&msg);
      return g_steal_pointer (&body);
    }
    g_input_stream_close (body, NULL, NULL);
    GUri *next = g_uri_parse_relative (current, location, SOUP_HTTP_URI_FLAGS, NULL);
    if (next == NULL) {
      g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_HTTP,
                   _("The server sent the download to an address that is not valid (“%s”)."), location);
      return NULL;
    }
    /* Only ever on to https: plain http is for a loopback address typed in, never for
     * wherever a server points (not even a loopback one). */
    if (g_ascii_strcasecmp (g_uri_get_scheme (next), "https") != 0) {
      g_autofree char *next_text = g_uri_to_string (next);
      g_uri_unref (next);
      g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INSECURE,
                   _("The server redirected the download to “%s”, which is not a secure address. "
                     "The download was stopped."),
                   next_text);
      return NULL;
    }
    g_uri_unref (current);
    current = next;
  }
  g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_HTTP,
               _("The server redirected the download too many times."));
  return NULL;
}

/* Returns TRUE when the whole body was written to the .part file; `digest` then holds the
 * SHA-256 of the whole file when one is expected. */
static gboolean
transfer (HanashiDownload *self, const char *part, char **digest, GCancellable *cancellable, GError **error)
{
  if (self->sha256 != NULL && !hanashi_download_sha256_is_valid (self->sha256)) {
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_CHECKSUM,
                 _("“%s” is not a SHA-256 checksum: it must be 64 hexadecimal digits."), self->sha256);
    return FALSE;
  }
  if (!hanashi_download_uri_is_allowed (self->uri, error))
    return FALSE;

  guint64 expected = self->expected_size;
  guint64 offset = 0;
  GStatBuf st;
  if (g_lstat (part, &st) == 0 && S_ISREG (st.st_mode))
    offset = (guint64) st.st_size;
  if (expected > 0 && offset > expected) {
    g_unlink (part); /* longer than the file can be: it is not a part of it */
    offset = 0;
  }

  g_autoptr (GChecksum) sum = self->sha256 ? g_checksum_new (G_CHECKSUM_SHA256) : NULL;
  if (sum != NULL && offset > 0 && !hash_existing_part (part, offset, sum, &offset, cancellable, error))
    return FALSE;

  g_autoptr (SoupSession) session = soup_session_new_with_options ("user-agent", "Hanashi/" PACKAGE_VERSION,
                                                                   "timeout", 60, NULL);
  g_autoptr (SoupMessage) msg = NULL;
  g_autoptr (GError) local = NULL;
  g_autoptr (GInputStream) body = send_checked (self, session, offset, &msg, cancellable, error);
  if (body == NULL)
    return FALSE;

  guint status = soup_message_get_status (msg);
  SoupMessageHeaders *headers = soup_message_get_response_headers (msg);
  goffset length = soup_message_headers_get_content_length (headers);
  guint64 total = 0;

  if (status == SOUP_STATUS_PARTIAL_CONTENT && offset > 0) {
    goffset start = 0, end = 0, full = 0;
    if (!soup_message_headers_get_content_range (headers, &start, &end, &full) || (guint64) start != offset) {
      g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_HTTP,
                   _("The server resumed the download at the wrong place."));
      return FALSE;
    }
    total = full > 0 ? (guint64) full : 0;
  } else if (status == SOUP_STATUS_REQUESTED_RANGE_NOT_SATISFIABLE && offset > 0) {
    /* Everything was already downloaded before an interruption or restart. */
    goffset start = 0, end = 0, full = 0;
    soup_message_headers_get_content_range (headers, &start, &end, &full);
    if (full > 0 && (guint64) full == offset && (expected == 0 || expected == offset)) {
      set_progress (self, offset, offset, 0);
      if (sum != NULL)
        *digest = g_strdup (g_checksum_get_string (sum));
      return TRUE;
    }
    g_unlink (part); /* the partial file does not belong to this resource */
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INTERRUPTED,
                 _("The file on the server has changed. Start the download again."));
    return FALSE;
  } else if (status == SOUP_STATUS_OK) {
    offset = 0; /* the server ignored the range: start over, and so does the checksum */
    if (sum != NULL)
      g_checksum_reset (sum);
    total = length > 0 ? (guint64) length : 0;
  } else if (status == SOUP_STATUS_NOT_FOUND) {
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_NOT_FOUND,
                 _("The file was not found on the server (HTTP 404). Check the address."));
    return FALSE;
  } else {
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_HTTP,
                 _("The server answered with an error (HTTP %u %s)."), status,
                 soup_message_get_reason_phrase (msg) ? soup_message_get_reason_phrase (msg) : "");
    return FALSE;
  }

  if (expected > 0 && total > 0 && total != expected) {
    g_unlink (part);
    set_size_error (error, total, expected);
    return FALSE;
  }
  if (total == 0)
    total = expected; /* the server did not say; the catalog did */

  if (total > offset && !check_free_space (self->destination, total - offset, error))
    return FALSE;

  int part_fd = open_part (part, O_WRONLY | O_CREAT | (offset > 0 ? O_APPEND : O_TRUNC), error);
  if (part_fd < 0)
    return FALSE;
  g_autoptr (GOutputStream) out = g_unix_output_stream_new (part_fd, TRUE);

  set_progress (self, offset, total, 0);
  g_autofree guint8 *buf = g_malloc (CHUNK_SIZE);
  guint64 received = offset;
  guint64 window_bytes = 0;
  gint64 window_start = g_get_monotonic_time ();
  double speed = 0;

  for (;;) {
    gssize n = g_input_stream_read (body, buf, CHUNK_SIZE, cancellable, &local);
    if (n < 0) {
      g_output_stream_close (G_OUTPUT_STREAM (out), NULL, NULL);
      if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_propagate_error (error, g_steal_pointer (&local));
      else
        set_network_error (error, self->uri, local);
      return FALSE;
    }
    if (n == 0)
      break;
    if (expected > 0 && received + (guint64) n > expected) {
      /* More than the file can hold: whatever this is, it is not the expected file. */
      g_output_stream_close (G_OUTPUT_STREAM (out), NULL, NULL);
      g_unlink (part);
      set_size_error (error, received + (guint64) n, expected);
      return FALSE;
    }
    if (!g_output_stream_write_all (G_OUTPUT_STREAM (out), buf, (gsize) n, NULL, cancellable, &local)) {
      g_output_stream_close (G_OUTPUT_STREAM (out), NULL, NULL);
      if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_propagate_error (error, g_steal_pointer (&local));
      else
        set_file_error (error, local);
      return FALSE;
    }
    if (sum != NULL)
      g_checksum_update (sum, buf, n);
    received += (guint64) n;
    window_bytes += (guint64) n;
    double elapsed = (double) (g_get_monotonic_time () - window_start) / G_USEC_PER_SEC;
    if (elapsed >= SPEED_WINDOW_SECONDS) {
      double current = (double) window_bytes / elapsed;
      speed = speed > 0 ? 0.5 * speed + 0.5 * current : current;
      window_bytes = 0;
      window_start = g_get_monotonic_time ();
    }
    set_progress (self, received, total, speed);
  }

  if (!g_output_stream_close (G_OUTPUT_STREAM (out), cancellable, &local)) {
    set_file_error (error, local);
    return FALSE;
  }
  if (total > 0 && received != total) {
    g_autofree char *host = host_of (self->uri);
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INTERRUPTED,
                 _("The connection to %s ended early. The download can be resumed."), host);
    return FALSE;
  }
  set_progress (self, received, received, speed);
  if (sum != NULL)
    *digest = g_strdup (g_checksum_get_string (sum));
  return TRUE;
}

static void
download_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  HanashiDownload *self = source;
  g_autofree char *part = part_path (self);
  g_autofree char *digest = NULL;
  GError *error = NULL;

  if (!transfer (self, part, &digest, cancellable, &error)) {
    g_task_return_error (task, error);
    return;
  }
  set_state (self, HANASHI_DOWNLOAD_STATE_VERIFYING);
  if (!verify_and_install (self, part, digest, &error)) {
    /* A complete file that fails verification cannot be fixed by resuming it. */
    g_unlink (part);
    g_task_return_error (task, error);
    return;
  }
  g_task_return_boolean (task, TRUE);
}

static void
download_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  HanashiDownload *self = HANASHI_DOWNLOAD (source);
  g_autoptr (GError) error = NULL;
  gboolean ok = g_task_propagate_boolean (G_TASK (result), &error);
  HanashiDownloadState state;

  g_mutex_lock (&self->lock);
  if (ok) {
    state = HANASHI_DOWNLOAD_STATE_DONE;
  } else if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
    state = self->delete_part_on_stop ? HANASHI_DOWNLOAD_STATE_CANCELLED : HANASHI_DOWNLOAD_STATE_PAUSED;
  } else {
    state = HANASHI_DOWNLOAD_STATE_FAILED;
    g_clear_error (&self->error);
    self->error = g_steal_pointer (&error);
  }
  self->state = state;
  g_clear_object (&self->cancellable);
  g_mutex_unlock (&self->lock);

  if (state == HANASHI_DOWNLOAD_STATE_CANCELLED) {
    g_autofree char *part = part_path (self);
    g_unlink (part);
  }
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
  if (state != HANASHI_DOWNLOAD_STATE_PAUSED)
    g_signal_emit (self, signals[FINISHED], 0);
}

void
hanashi_download_start (HanashiDownload *self)
{
  g_return_if_fail (HANASHI_IS_DOWNLOAD (self));

  g_mutex_lock (&self->lock);
  if (self->cancellable != NULL) {
    g_mutex_unlock (&self->lock);
    return; /* already running */
  }
  self->state = HANASHI_DOWNLOAD_STATE_RUNNING;
  self->delete_part_on_stop = FALSE;
  g_clear_error (&self->error);
  self->cancellable = g_cancellable_new ();
  g_autoptr (GTask) task = g_task_new (self, self->cancellable, download_done, NULL);
  g_mutex_unlock (&self->lock);

  g_task_set_source_tag (task, hanashi_download_start);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
  g_task_run_in_thread (task, download_thread);
}

void
hanashi_download_pause (HanashiDownload *self)
{
  g_return_if_fail (HANASHI_IS_DOWNLOAD (self));
  /* Cancel outside the lock: cancellation handlers run synchronously and may wait for
   * the worker, which may be waiting for the lock. */
  g_mutex_lock (&self->lock);
  g_autoptr (GCancellable) cancellable = self->cancellable ? g_object_ref (self->cancellable) : NULL;
  g_mutex_unlock (&self->lock);
  if (cancellable != NULL)
    g_cancellable_cancel (cancellable);
}

void
hanashi_download_cancel (HanashiDownload *self)
{
  g_return_if_fail (HANASHI_IS_DOWNLOAD (self));
  g_mutex_lock (&self->lock);
  self->delete_part_on_stop = TRUE;
  g_autoptr (GCancellable) cancellable = self->cancellable ? g_object_ref (self->cancellable) : NULL;
  gboolean stopped_already = self->state == HANASHI_DOWNLOAD_STATE_CANCELLED ||
                             self->state == HANASHI_DOWNLOAD_STATE_DONE;
  if (cancellable == NULL && !stopped_already)
    self->state = HANASHI_DOWNLOAD_STATE_CANCELLED;
  g_mutex_unlock (&self->lock);

  if (cancellable != NULL) {
    g_cancellable_cancel (cancellable);
  } else if (!stopped_already) {
    /* A paused download has no worker to clean up after it. */
    g_autofree char *part = part_path (self);
    g_unlink (part);
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
    g_signal_emit (self, signals[FINISHED], 0);
  }
}

/* ---- accessors ---- */

const char *
hanashi_download_get_uri (HanashiDownload *self)
{
  return self->uri;
}

GFile *
hanashi_download_get_destination (HanashiDownload *self)
{
  return self->destination;
}

#define LOCKED_GETTER(type, name, field)            \
  type hanashi_download_get_##name (HanashiDownload *self) \
  {                                                 \
    g_mutex_lock (&self->lock);                     \
    type value = self->field;                       \
    g_mutex_unlock (&self->lock);                   \
    return value;                                   \
  }

LOCKED_GETTER (HanashiDownloadState, state, state)
LOCKED_GETTER (guint64, received, received)
LOCKED_GETTER (guint64, total, total)
LOCKED_GETTER (double, speed, speed)

double
hanashi_download_get_eta (HanashiDownload *self)
{
  g_mutex_lock (&self->lock);
  double eta = -1;
  if (self->total > 0 && self->speed > 0 && self->total >= self->received)
    eta = (double) (self->total - self->received) / self->speed;
  g_mutex_unlock (&self->lock);
  return eta;
}

const GError *
hanashi_download_get_error (HanashiDownload *self)
{
  /* Only written by download_done on the owner's context, so no lock is needed here. */
  return self->error;
}

char *
hanashi_download_format_progress (HanashiDownload *self)
{
  guint64 received = hanashi_download_get_received (self);
  guint64 total = hanashi_download_get_total (self);
  double speed = hanashi_download_get_speed (self);
  double eta = hanashi_download_get_eta (self);
  g_autofree char *got = g_format_size (received);
  g_autoptr (GString) text = g_string_new (NULL);

  if (total > 0) {
    g_autofree char *all = g_format_size (total);
    /* Translators: download progress, e.g. "120 MB of 400 MB (30%)" */
    g_string_append_printf (text, _("%s of %s (%d%%)"), got, all, (int) (100.0 * received / total));
  } else {
    g_string_append (text, got);
  }
  if (speed > 0) {
    g_autofree char *rate = g_format_size ((guint64) speed);
    g_string_append (text, " — ");
    /* Translators: transfer speed, e.g. "5.1 MB/s" */
    g_string_append_printf (text, _("%s/s"), rate);
  }
  if (eta >= 0) {
    guint seconds = (guint) (eta + 0.5);
    g_string_append (text, " — ");
    if (seconds >= 3600)
      /* Translators: time left, hours:minutes:seconds */
      g_string_append_printf (text, _("%u:%02u:%02u left"), seconds / 3600, seconds / 60 % 60, seconds % 60);
    else
      /* Translators: time left, minutes:seconds */
      g_string_append_printf (text, _("%u:%02u left"), seconds / 60, seconds % 60);
  }
  return g_string_free (g_steal_pointer (&text), FALSE);
}

static char *
invalid_address (const char *spec, GError **error)
{
  g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INVALID_URI,
               _("“%s” is neither a web address nor a Hugging Face repository (owner/name)."), spec);
  return NULL;
}

static char *
resolve_web_address (const char *spec, GError **error)
{
  g_autoptr (GUri) uri = g_uri_parse (spec, G_URI_FLAGS_NONE, NULL);
  if (uri == NULL || g_uri_get_host (uri) == NULL || *g_uri_get_host (uri) == '\0')
    return invalid_address (spec, error);
  if (!uri_is_allowed (uri, spec, error))
    return NULL;
  /* A Hugging Face file page ("/blob/") shows HTML; the file itself is at "/resolve/". */
  if (g_str_equal (g_uri_get_host (uri), "huggingface.co") && strstr (spec, "/blob/") != NULL) {
    g_auto (GStrv) parts = g_strsplit (spec, "/blob/", 2);
    return g_strconcat (parts[0], "/resolve/", parts[1], NULL);
  }
  return g_strdup (spec);
}

static gboolean
is_plain_name (const char *part)
{
  return *part != '\0' && strchr (part, ' ') == NULL && !g_str_equal (part, "..") && !g_str_equal (part, ".");
}

char *
hanashi_download_resolve_uri_at (const char *repo_or_url, const char *file, const char *revision, GError **error)
{
  g_autofree char *spec = g_strstrip (g_strdup (repo_or_url ? repo_or_url : ""));

  if (g_ascii_strncasecmp (spec, "https://", 8) == 0 || g_ascii_strncasecmp (spec, "http://", 7) == 0)
    return resolve_web_address (spec, error);

  /* owner/repo (+ file) or owner/repo/path/to/file.gguf */
  g_auto (GStrv) parts = g_strsplit (spec, "/", 3);
  if (g_strv_length (parts) < 2 || !is_plain_name (parts[0]) || !is_plain_name (parts[1]))
    return invalid_address (spec, error);
  if (parts[2] != NULL) {
    g_auto (GStrv) segments = g_strsplit (parts[2], "/", -1);
    for (int i = 0; segments[i] != NULL; i++)
      if (!is_plain_name (segments[i]))
        return invalid_address (spec, error);
  }
  const char *path = parts[2] != NULL ? parts[2] : file;
  if (path == NULL || *path == '\0' || !g_str_has_suffix (path, ".gguf")) {
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INVALID_URI,
                 _("Name a .gguf file in the repository “%s/%s”."), parts[0], parts[1]);
    return NULL;
  }
  const char *rev = revision != NULL && *revision != '\0' ? revision : "main";
  if (!is_plain_name (rev) || strchr (rev, '/') != NULL) {
    g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INVALID_URI,
                 _("“%s” is not a repository revision."), rev);
    return NULL;
  }
  /* A mirror of the hub (or, in tests, a server on this computer) may stand in for it:
   * a test seam, listed with the others in tests/support/hanashi-test-seams.h. */
  const char *hub = g_getenv ("HANASHI_HUB_URL");
  g_autofree char *base = g_strdup (hub != NULL && *hub != '\0' ? hub : "https://huggingface.co");
  while (g_str_has_suffix (base, "/"))
    base[strlen (base) - 1] = '\0';
  g_autofree char *escaped = g_uri_escape_string (path, "/", FALSE);
  g_autofree char *escaped_rev = g_uri_escape_string (rev, NULL, FALSE);
  g_autofree char *uri = g_strdup_printf ("%s/%s/%s/resolve/%s/%s", base, parts[0], parts[1], escaped_rev, escaped);
  if (!hanashi_download_uri_is_allowed (uri, error))
    return NULL;
  return g_steal_pointer (&uri);
}

char *
hanashi_download_resolve_uri (const char *repo_or_url, const char *file, GError **error)
{
  return hanashi_download_resolve_uri_at (repo_or_url, file, NULL, error);
}

/* ---- GObject ---- */

HanashiDownload *
hanashi_download_new (const char *uri, GFile *destination, const char *sha256)
{
  g_return_val_if_fail (uri != NULL, NULL);
  g_return_val_if_fail (G_IS_FILE (destination), NULL);

  HanashiDownload *self = g_object_new (HANASHI_TYPE_DOWNLOAD, NULL);
  self->uri = g_strdup (uri);
  self->destination = g_object_ref (destination);
  /* Published checksums come in either case; compare in one. */
  self->sha256 = sha256 != NULL ? g_ascii_strdown (sha256, -1) : NULL;
  return self;
}

void
hanashi_download_set_expected_size (HanashiDownload *self, guint64 size)
{
  g_return_if_fail (HANASHI_IS_DOWNLOAD (self));
  self->expected_size = size; /* read by the worker, which starts after this */
}

guint64
hanashi_download_get_expected_size (HanashiDownload *self)
{
  return self->expected_size;
}

const char *
hanashi_download_get_sha256 (HanashiDownload *self)
{
  return self->sha256;
}

static void
hanashi_download_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  HanashiDownload *self = HANASHI_DOWNLOAD (object);
  switch (prop_id) {
  case PROP_STATE:
    g_value_set_int (value, hanashi_download_get_state (self));
    break;
  case PROP_RECEIVED:
    g_value_set_uint64 (value, hanashi_download_get_received (self));
    break;
  case PROP_TOTAL:
    g_value_set_uint64 (value, hanashi_download_get_total (self));
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
hanashi_download_finalize (GObject *object)
{
  HanashiDownload *self = HANASHI_DOWNLOAD (object);
  g_free (self->uri);
  g_clear_object (&self->destination);
  g_free (self->sha256);
  g_clear_error (&self->error);
  g_clear_object (&self->cancellable);
  g_main_context_unref (self->owner_context);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (hanashi_download_parent_class)->finalize (object);
}

static void
hanashi_download_class_init (HanashiDownloadClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  object_class->get_property = hanashi_download_get_property;
  object_class->finalize = hanashi_download_finalize;

  properties[PROP_STATE] = g_param_spec_int ("state", NULL, NULL, 0, HANASHI_DOWNLOAD_STATE_CANCELLED, 0,
                                             G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  properties[PROP_RECEIVED] = g_param_spec_uint64 ("received", NULL, NULL, 0, G_MAXUINT64, 0,
                                                   G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  properties[PROP_TOTAL] = g_param_spec_uint64 ("total", NULL, NULL, 0, G_MAXUINT64, 0,
                                                G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  /* Emitted once when the download is done, failed or was cancelled (not on pause). */
  signals[FINISHED] = g_signal_new ("finished", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                    NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void
hanashi_download_init (HanashiDownload *self)
{
  g_mutex_init (&self->lock);
  self->owner_context = g_main_context_ref_thread_default ();
}
