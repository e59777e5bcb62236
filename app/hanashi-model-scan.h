/* hanashi-model-scan.h: finds GGUF files in the model folders and reads their metadata
 * (in a worker thread; the header is memory-mapped, so a scan costs little I/O).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

typedef struct {
  char    *path;
  char    *name;          /* general.name, or the file name */
  char    *arch;          /* general.architecture, or NULL */
  char    *weight_type;   /* main weight type, e.g. "Q4_K" (hanashi_model_file_dup_weight_type), or NULL */
  char    *license;       /* general.license, or NULL */
  char    *error;         /* non-NULL when the file could not be read as a model */
  guint64  n_params;
  guint64  file_size;
  guint32  n_ctx_train;   /* 0 when unknown */
  gboolean in_app_folder; /* in $XDG_DATA_HOME/hanashi/models (deletable from the app) */
} HanashiLocalModel;

void hanashi_local_model_free (HanashiLocalModel *model);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiLocalModel, hanashi_local_model_free)

/* $XDG_DATA_HOME/hanashi/models */
char              *hanashi_model_scan_dup_app_folder (void);
/* Reads one file's metadata (blocking). */
HanashiLocalModel *hanashi_model_scan_file       (const char *path);

/* Scans the app folder plus `extra_folders` (not recursive), sorted by name.  The result
 * is a GPtrArray of HanashiLocalModel (free with g_ptr_array_unref). */
void       hanashi_model_scan_async  (const char *const   *extra_folders,
                                      GCancellable        *cancellable,
                                      GAsyncReadyCallback  callback,
                                      gpointer             user_data);
GPtrArray *hanashi_model_scan_finish (GAsyncResult *result, GError **error);

/* "1.2B", "360M" */
char *hanashi_model_format_params (guint64 n_params);

G_END_DECLS
