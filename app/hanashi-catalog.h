/* hanashi-catalog.h: the recommended models (data/models.json, in the GResource).
 *
 * Every entry names a file in a Hugging Face repository at a pinned revision with its
 * exact size and SHA-256, so a download of it is verified byte for byte.  An entry that
 * lacks any of these is not offered: the catalog never hands out an unverifiable file.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

typedef struct {
  char    *id;
  char    *name;
  char    *family;
  char    *repo;
  char    *revision;     /* a commit id */
  char    *file;
  guint64  size_bytes;   /* exact */
  char    *sha256;       /* lowercase hex */
  guint64  memory_bytes; /* weights + KV cache at the catalog's context + working memory */
  char    *parameters;
  char    *license;
  char    *description;
} HanashiCatalogEntry;

void hanashi_catalog_entry_free (HanashiCatalogEntry *entry);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiCatalogEntry, hanashi_catalog_entry_free)

/* Parses a models.json document into HanashiCatalogEntry*, in file order.  Entries
 * without a name, repository, .gguf file, 40-digit revision, size or valid SHA-256 are
 * skipped.  NULL with an error when the document itself cannot be read. */
GPtrArray *hanashi_catalog_parse         (GBytes      *json,
                                          GError     **error);
/* The shipped catalog from the GResource (an empty array if it is missing). */
GPtrArray *hanashi_catalog_load_default  (void);

/* The download address: HUB/repo/resolve/REVISION/file (see hanashi_download_resolve_uri_at). */
char      *hanashi_catalog_entry_uri     (const HanashiCatalogEntry *entry,
                                          GError                   **error);

/* Whether `need` bytes fit in the memory this computer has available now (MemAvailable,
 * or HANASHI_MEM_AVAILABLE_MB in tests).  Returns TRUE when it fits or when the figure
 * cannot be read; `text` (optional) gets a sentence for the row, e.g. “Fits in memory
 * (needs 1.4 GB)” or
 * “Needs 19.3 GB of memory; this computer has 16.0 GB available”. */
gboolean   hanashi_catalog_fits_memory   (guint64      need,
                                          char       **text);

G_END_DECLS
