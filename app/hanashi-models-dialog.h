/* hanashi-models-dialog.h: the Models page: local models, the curated list and downloads.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "hanashi-download.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_MODELS_DIALOG (hanashi_models_dialog_get_type ())
G_DECLARE_FINAL_TYPE (HanashiModelsDialog, hanashi_models_dialog, HANASHI, MODELS_DIALOG, AdwWindow)

HanashiModelsDialog *hanashi_models_dialog_new (GtkWindow *parent);

/* The file the engine has loaded (NULL for none): it cannot be deleted from the page until
 * another model is loaded, since its weights are memory-mapped from it. */
void             hanashi_models_dialog_set_loaded_model (HanashiModelsDialog *self,
                                                         const char          *path);

/* Rescans the model folders (in a worker thread). */
void             hanashi_models_dialog_refresh  (HanashiModelsDialog *self);
/* Starts a download into the app's models folder, as the Download buttons do: `repo_or_url`
 * is a URL, "owner/repo" or "owner/repo/file.gguf"; `file` may be NULL.  Returns the
 * download (owned by the dialog) or NULL with an error. */
HanashiDownload *hanashi_models_dialog_download (HanashiModelsDialog *self,
                                                 const char          *repo_or_url,
                                                 const char          *file,
                                                 GError             **error);
/* The same, verified: `revision` pins an "owner/repo" download (NULL = main), `sha256`
 * (NULL = unknown) and `size` (0 = unknown) must match, or the file is deleted and the
 * row shows why.  The catalog's Download buttons pass the catalog's values. */
HanashiDownload *hanashi_models_dialog_download_verified (HanashiModelsDialog *self,
                                                          const char          *repo_or_url,
                                                          const char          *file,
                                                          const char          *revision,
                                                          const char          *sha256,
                                                          guint64              size,
                                                          GError             **error);

/* Signals:
 *   "model-activated" (const char *path)  the user chose to open a model
 *   "remote-model-activated" (const char *url, const char *model)  the user chose to chat
 *                                         with a model of an OpenAI-compatible server (url:
 *                                         its API root, hanashi-remote-endpoints.h)
 *   "models-changed"  ()                  the list was rescanned (e.g. a download finished) */

G_END_DECLS
