/* hanashi-download.h — resumable model downloads (libsoup 3), shared by the app's model
 * library and `hanashi-cli pull`.
 *
 * A download writes DESTINATION.part, resumes it with an HTTP Range request when it
 * already exists, and renames it to DESTINATION only after its size, its GGUF header and
 * tensor table (and its SHA-256 when one is known) check out. */
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

/* `sha256` (lowercase hex) may be NULL when unknown.  Signals and property
 * notifications are emitted on the thread-default main context of the caller. */
HanashiDownload     *hanashi_download_new            (const char  *uri,
                                                      GFile       *destination,
                                                      const char  *sha256);
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
 * "owner/repo/file.gguf".  Returns NULL with HANASHI_DOWNLOAD_ERROR_INVALID_URI. */
char                *hanashi_download_resolve_uri    (const char  *repo_or_url,
                                                      const char  *file,
                                                      GError     **error);

/* "1.2 GB"-style sizes and "3:05"-style durations for progress text. */
char                *hanashi_download_format_progress (HanashiDownload *self);

G_END_DECLS
