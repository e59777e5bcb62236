/* hanashi-store-recovery.h — opening the conversation database when it is locked by another
 * program, cannot be written or is damaged, and the strip that tells the user so.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

#include "hanashi-store.h"

G_BEGIN_DECLS

/* Opens @path for writing or, when that fails, for reading only, so that earlier chats stay
 * visible.  Returns NULL when neither works.  Whenever the result is not a writable store,
 * @problem is set: a HANASHI_STORE_ERROR with the code of the failed writable open and a
 * sentence for people that names the file and the reason. */
HanashiStore *hanashi_store_open_best        (const char           *path,
                                              GError              **problem);
/* The same on a worker thread: a locked database makes SQLite wait for its busy timeout. */
void          hanashi_store_open_best_async  (const char           *path,
                                              GCancellable         *cancellable,
                                              GAsyncReadyCallback   callback,
                                              gpointer              user_data);
HanashiStore *hanashi_store_open_best_finish (GAsyncResult         *result,
                                              GError              **problem);

/* Moves a damaged database and its "-wal" and "-shm" files aside, to
 * "<path>.damaged-YYYYMMDD-HHMMSS" (plus "-2", "-3", … if taken), so that a fresh database
 * can be created in its place.  Returns the new name of the database file. */
char         *hanashi_store_set_aside        (const char           *path,
                                              GError              **error);

/* A strip above the chat that says what is wrong with the database, with "Try Again" and,
 * for a damaged file, "Start Fresh…".  Signals "retry" and "start-fresh" (no arguments). */
#define HANASHI_TYPE_STORE_BANNER (hanashi_store_banner_get_type ())
G_DECLARE_FINAL_TYPE (HanashiStoreBanner, hanashi_store_banner, HANASHI, STORE_BANNER, GtkWidget)

HanashiStoreBanner *hanashi_store_banner_new         (void);
/* @problem NULL hides the strip. */
void                hanashi_store_banner_set_problem (HanashiStoreBanner *self,
                                                      const GError       *problem);
const char         *hanashi_store_banner_get_text    (HanashiStoreBanner *self);

G_END_DECLS
