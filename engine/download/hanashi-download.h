/* hanashi-download.h — resumable model downloads (libsoup 3), shared by the app's model
 * library and `hanashi-cli pull`.
 *
 * A download writes DESTINATION.part, resumes it with an HTTP Range request when it
 * already exists, and renames it to DESTINATION only after its size, its GGUF header and
 * tensor table (and its SHA-256 when one is known) check out.  The SHA-256 is computed
 * while the bytes arrive; a resumed download first hashes the bytes already in the .part
 * file.  A file that fails a check is deleted, never kept under either name.
 *
 * Only https addresses are fetched, and redirects are followed only to https; plain
 * http is accepted for an address of this computer given directly (127.0.0.0/8, ::1,
 * localhost), which the tests use.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define HANASHI_DOWNLOAD_ERROR (hanashi_download_error_quark ())

typedef enum {
  HANASHI_DOWNLOAD_ERROR_OFFLINE,      /* name resolution or connection failed */
  HANASHI_DOWNLOAD_ERROR_NOT_FOUND,    /* HTTP 404 */
  HANASHI_DOWNLOAD_ERROR_HTTP,         /* any other HTTP error status */
  HANASHI_DOWNLOAD_ERROR_INTERRUPTED,  /* the body ended early; resumable */
  HANASHI_DOWNLOAD_ERROR_NOT_GGUF,     /* the file is not a valid GGUF model */
  HANASHI_DOWNLOAD_ERROR_CHECKSUM,     /* SHA-256 mismatch */
  HANASHI_DOWNLOAD_ERROR_DISK_FULL,    /* not enough space, before or during the download */
  HANASHI_DOWNLOAD_ERROR_IO,           /* any other local file error */
  HANASHI_DOWNLOAD_ERROR_INVALID_URI,  /* the address could not be understood */
  HANASHI_DOWNLOAD_ERROR_INSECURE,     /* plain http to another computer, or a redirect to it */
  HANASHI_DOWNLOAD_ERROR_SIZE,         /* the file's size is not the expected one */
} HanashiDownloadError;

typedef enum {
  HANASHI_DOWNLOAD_STATE_IDLE,
  HANASHI_DOWNLOAD_STATE_RUNNING,
  HANASHI_DOWNLOAD_STATE_VERIFYING,
  HANASHI_DOWNLOAD_STATE_PAUSED,
  HANASHI_DOWNLOAD_STATE_DONE,
  HANASHI_DOWNLOAD_STATE_FAILED,
  HANASHI_DOWNLOAD_STATE_CANCELLED,
} HanashiDownloadState;

#define HANASHI_TYPE_DOWNLOAD (hanashi_download_get_type ())
G_DECLARE_FINAL_TYPE (HanashiDownload, hanashi_download, HANASHI, DOWNLOAD, GObject)

GQuark hanashi_download_error_quark (void);

/* `sha256` (64 hex digits, either case) may be NULL when unknown; a malformed one makes
 * the download fail with HANASHI_DOWNLOAD_ERROR_CHECKSUM before anything is fetched.
 * Signals and property notifications are emitted on the thread-default main context of
 * the caller. */
HanashiDownload     *hanashi_download_new            (const char  *uri,
                                                      GFile       *destination,
                                                      const char  *sha256);
/* The exact size the file must have (0 = unknown, the default).  A server that offers
 * another size, or a body that runs past it, fails with HANASHI_DOWNLOAD_ERROR_SIZE.
 * Set it before hanashi_download_start(). */
void                 hanashi_download_set_expected_size (HanashiDownload *self,
                                                         guint64          size);
guint64              hanashi_download_get_expected_size (HanashiDownload *self);
/* The expected SHA-256 in lowercase, or NULL. */
const char          *hanashi_download_get_sha256     (HanashiDownload *self);
void                 hanashi_download_start          (HanashiDownload *self);
void                 hanashi_download_pause          (HanashiDownload *self);
void                 hanashi_download_cancel         (HanashiDownload *self);

const char          *hanashi_download_get_uri        (HanashiDownload *self);
GFile               *hanashi_download_get_destination (HanashiDownload *self);
HanashiDownloadState hanashi_download_get_state      (HanashiDownload *self);
guint64              hanashi_download_get_received   (HanashiDownload *self);
/* 0 when the server did not say. */
guint64              hanashi_download_get_total      (HanashiDownload *self);
double               hanashi_download_get_speed      (HanashiDownload *self);
/* Seconds left at the current speed, or -1 when unknown. */
double               hanashi_download_get_eta        (HanashiDownload *self);
const GError        *hanashi_download_get_error      (HanashiDownload *self);

/* Turns what a person pastes into a download address: a full https URL (Hugging Face
 * "blob" page URLs become "resolve" URLs), or "owner/repo" plus a file name, or
 * "owner/repo/file.gguf".  Returns NULL with HANASHI_DOWNLOAD_ERROR_INVALID_URI, or
 * HANASHI_DOWNLOAD_ERROR_INSECURE for plain http to another computer. */
char                *hanashi_download_resolve_uri    (const char  *repo_or_url,
                                                      const char  *file,
                                                      GError     **error);
/* The same, with a repository revision (a commit id, a tag or a branch; NULL = "main")
 * for "owner/repo" forms: HUB/owner/repo/resolve/REVISION/file, where HUB is
 * https://huggingface.co or the HANASHI_HUB_URL environment variable (a mirror). */
char                *hanashi_download_resolve_uri_at (const char  *repo_or_url,
                                                      const char  *file,
                                                      const char  *revision,
                                                      GError     **error);

/* TRUE for https addresses and for http addresses of this computer (loopback); otherwise
 * FALSE with HANASHI_DOWNLOAD_ERROR_INSECURE (or _INVALID_URI when it is not an address). */
gboolean             hanashi_download_uri_is_allowed (const char  *uri,
                                                      GError     **error);
/* TRUE when `text` is 64 hexadecimal digits. */
gboolean             hanashi_download_sha256_is_valid (const char *text);

/* "1.2 GB"-style sizes and "3:05"-style durations for progress text. */
char                *hanashi_download_format_progress (HanashiDownload *self);

G_END_DECLS
