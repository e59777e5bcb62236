/* store-faults-vfs.h — a SQLite VFS that wraps the real one and fails on request.
 *
 * Tests only: it is linked into the test programs, never into the app.  Once installed it
 * is SQLite's default VFS, so every HanashiStore opened afterwards goes through it with no
 * change to the store itself.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  HANASHI_STORE_FAULT_NONE,
  HANASHI_STORE_FAULT_NO_SPACE,      /* writes fail with SQLITE_FULL (ENOSPC) */
  HANASHI_STORE_FAULT_SHORT_WRITE,   /* half the buffer reaches the file, then SQLITE_FULL */
  HANASHI_STORE_FAULT_READ_ONLY,     /* writes and truncates fail with SQLITE_READONLY */
  HANASHI_STORE_FAULT_IO,            /* writes and syncs fail with an I/O error */
  HANASHI_STORE_FAULT_GARBAGE_READS, /* every read returns bytes that are not the file's */
  HANASHI_STORE_FAULT_KILL,          /* half the buffer reaches the file, then SIGKILL */
} HanashiStoreFault;

/* Registers the wrapper as the default VFS; idempotent. */
void  hanashi_store_faults_install (void);
/* Arms @fault after @after_writes more writes have gone through unharmed (write faults), or at
 * once (garbage reads).  Resets the write counter. */
void  hanashi_store_faults_set (HanashiStoreFault fault, guint after_writes);
/* Writes (xWrite calls on any file) since the last hanashi_store_faults_set (). */
guint hanashi_store_faults_get_writes (void);
/* Faults actually injected since the last hanashi_store_faults_set (). */
guint hanashi_store_faults_get_injected (void);

G_END_DECLS
