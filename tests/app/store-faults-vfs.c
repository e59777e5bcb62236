/* store-faults-vfs.c — fault-injecting SQLite VFS for the store tests.
 *
 * Each file is the real VFS's file placed right after our header; every method passes
 * through, except that writes, truncates and syncs fail once the armed fault is due and
 * reads are overwritten with garbage in that mode.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-test"

#include "config.h"

#include "store-faults-vfs.h"

#include <signal.h>
#include <sqlite3.h>
#include <string.h>

typedef struct {
  sqlite3_file base;
  sqlite3_file *real;
} FaultFile;

static sqlite3_vfs fault_vfs;
static sqlite3_vfs *real_vfs;
static HanashiStoreFault armed;
static guint writes_left, writes_seen, injected;

void
hanashi_store_faults_set (HanashiStoreFault fault, guint after_writes)
{
  armed = fault;
  writes_left = after_writes;
  writes_seen = 0;
  injected = 0;
}

guint
hanashi_store_faults_get_writes (void)
{
  return writes_seen;
}

guint
hanashi_store_faults_get_injected (void)
{
  return injected;
}

/* True when this write-like call must fail. */
static gboolean
write_fault_due (void)
{
  if (armed == HANASHI_STORE_FAULT_NONE || armed == HANASHI_STORE_FAULT_GARBAGE_READS)
    return FALSE;
  if (writes_left > 0)
    return FALSE;
  injected++;
  return TRUE;
}

static int
fault_rc (void)
{
  switch (armed)
    {
    case HANASHI_STORE_FAULT_NO_SPACE:
    case HANASHI_STORE_FAULT_SHORT_WRITE:
      return SQLITE_FULL;
    case HANASHI_STORE_FAULT_READ_ONLY:
      return SQLITE_READONLY;
    case HANASHI_STORE_FAULT_IO:
    case HANASHI_STORE_FAULT_NONE:
    case HANASHI_STORE_FAULT_GARBAGE_READS:
    case HANASHI_STORE_FAULT_KILL:
    default:
      return SQLITE_IOERR_WRITE;
    }
}

#define REAL(f) (((FaultFile *) (f))->real)

static int
f_close (sqlite3_file *f)
{
  return REAL (f)->pMethods ? REAL (f)->pMethods->xClose (REAL (f)) : SQLITE_OK;
}

static int
f_read (sqlite3_file *f, void *buf, int amount, sqlite3_int64 offset)
{
  int rc = REAL (f)->pMethods->xRead (REAL (f), buf, amount, offset);
  if (armed == HANASHI_STORE_FAULT_GARBAGE_READS && (rc == SQLITE_OK || rc == SQLITE_IOERR_SHORT_READ))
    {
      /* Not a valid page type, not the magic string, not a WAL frame header. */
      guint8 *bytes = buf;
      for (int i = 0; i < amount; i++)
        bytes[i] = (guint8) (0xa5 ^ (guint8) ((offset + i) * 31));
      injected++;
      return SQLITE_OK;
    }
  return rc;
}

static int
f_write (sqlite3_file *f, const void *buf, int amount, sqlite3_int64 offset)
{
  writes_seen++;
  if (write_fault_due ())
    {
      if ((armed == HANASHI_STORE_FAULT_SHORT_WRITE || armed == HANASHI_STORE_FAULT_KILL) && amount > 1)
        REAL (f)->pMethods->xWrite (REAL (f), buf, amount / 2, offset);
      /* A torn write and then no chance to clean up, as when the power goes or the OOM
       * killer strikes in the middle of a commit. */
      if (armed == HANASHI_STORE_FAULT_KILL)
        raise (SIGKILL);
      return fault_rc ();
    }
  if (writes_left > 0)
    writes_left--;
  return REAL (f)->pMethods->xWrite (REAL (f), buf, amount, offset);
}

static int
f_truncate (sqlite3_file *f, sqlite3_int64 size)
{
  if (write_fault_due ())
    {
      if (armed == HANASHI_STORE_FAULT_KILL)
        raise (SIGKILL);
      return armed == HANASHI_STORE_FAULT_READ_ONLY ? SQLITE_READONLY : SQLITE_IOERR_TRUNCATE;
    }
  return REAL (f)->pMethods->xTruncate (REAL (f), size);
}

static int
f_sync (sqlite3_file *f, int flags)
{
  if (armed == HANASHI_STORE_FAULT_IO && write_fault_due ())
    return SQLITE_IOERR_FSYNC;
  return REAL (f)->pMethods->xSync (REAL (f), flags);
}

static int
f_file_size (sqlite3_file *f, sqlite3_int64 *size)
{
  return REAL (f)->pMethods->xFileSize (REAL (f), size);
}

static int
f_lock (sqlite3_file *f, int level)
{
  return REAL (f)->pMethods->xLock (REAL (f), level);
}

static int
f_unlock (sqlite3_file *f, int level)
{
  return REAL (f)->pMethods->xUnlock (REAL (f), level);
}

static int
f_check_reserved_lock (sqlite3_file *f, int *out)
{
  return REAL (f)->pMethods->xCheckReservedLock (REAL (f), out);
}

static int
f_file_control (sqlite3_file *f, int op, void *arg)
{
  return REAL (f)->pMethods->xFileControl (REAL (f), op, arg);
}

static int
f_sector_size (sqlite3_file *f)
{
  return REAL (f)->pMethods->xSectorSize (REAL (f));
}

static int
f_device_characteristics (sqlite3_file *f)
{
  return REAL (f)->pMethods->xDeviceCharacteristics (REAL (f));
}

static int
f_shm_map (sqlite3_file *f, int region, int size, int extend, void volatile **out)
{
  return REAL (f)->pMethods->xShmMap (REAL (f), region, size, extend, out);
}

static int
f_shm_lock (sqlite3_file *f, int offset, int n, int flags)
{
  return REAL (f)->pMethods->xShmLock (REAL (f), offset, n, flags);
}

static void
f_shm_barrier (sqlite3_file *f)
{
  REAL (f)->pMethods->xShmBarrier (REAL (f));
}

static int
f_shm_unmap (sqlite3_file *f, int delete_flag)
{
  return REAL (f)->pMethods->xShmUnmap (REAL (f), delete_flag);
}

static int
f_fetch (sqlite3_file *f, sqlite3_int64 offset, int amount, void **out)
{
  /* A memory-mapped page would bypass xRead; without one SQLite falls back to reading. */
  if (armed == HANASHI_STORE_FAULT_GARBAGE_READS)
    {
      *out = NULL;
      return SQLITE_OK;
    }
  return REAL (f)->pMethods->xFetch (REAL (f), offset, amount, out);
}

static int
f_unfetch (sqlite3_file *f, sqlite3_int64 offset, void *page)
{
  return REAL (f)->pMethods->xUnfetch (REAL (f), offset, page);
}

static const sqlite3_io_methods fault_methods = {
  .iVersion = 3,
  .xClose = f_close,
  .xRead = f_read,
  .xWrite = f_write,
  .xTruncate = f_truncate,
  .xSync = f_sync,
  .xFileSize = f_file_size,
  .xLock = f_lock,
  .xUnlock = f_unlock,
  .xCheckReservedLock = f_check_reserved_lock,
  .xFileControl = f_file_control,
  .xSectorSize = f_sector_size,
  .xDeviceCharacteristics = f_device_characteristics,
  .xShmMap = f_shm_map,
  .xShmLock = f_shm_lock,
  .xShmBarrier = f_shm_barrier,
  .xShmUnmap = f_shm_unmap,
  .xFetch = f_fetch,
  .xUnfetch = f_unfetch,
};

static int
v_open (sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out_flags)
{
  (void) vfs;
  FaultFile *ff = (FaultFile *) file;
  ff->real = (sqlite3_file *) (ff + 1);
  int rc = real_vfs->xOpen (real_vfs, name, ff->real, flags, out_flags);
  /* SQLite calls xClose only when pMethods is set, so a failed open must leave it NULL. */
  ff->base.pMethods = ff->real->pMethods ? &fault_methods : NULL;
  return rc;
}

static int
v_delete (sqlite3_vfs *vfs, const char *name, int sync_dir)
{
  (void) vfs;
  return real_vfs->xDelete (real_vfs, name, sync_dir);
}

static int
v_access (sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
  (void) vfs;
  return real_vfs->xAccess (real_vfs, name, flags, out);
}

static int
v_full_pathname (sqlite3_vfs *vfs, const char *name, int n, char *out)
{
  (void) vfs;
  return real_vfs->xFullPathname (real_vfs, name, n, out);
}

static void *
v_dl_open (sqlite3_vfs *vfs, const char *name)
{
  (void) vfs;
  return real_vfs->xDlOpen (real_vfs, name);
}

static void
v_dl_error (sqlite3_vfs *vfs, int n, char *out)
{
  (void) vfs;
  real_vfs->xDlError (real_vfs, n, out);
}

static void (*v_dl_sym (sqlite3_vfs *vfs, void *handle, const char *symbol)) (void)
{
  (void) vfs;
  return real_vfs->xDlSym (real_vfs, handle, symbol);
}

static void
v_dl_close (sqlite3_vfs *vfs, void *handle)
{
  (void) vfs;
  real_vfs->xDlClose (real_vfs, handle);
}

static int
v_randomness (sqlite3_vfs *vfs, int n, char *out)
{
  (void) vfs;
  return real_vfs->xRandomness (real_vfs, n, out);
}

static int
v_sleep (sqlite3_vfs *vfs, int microseconds)
{
  (void) vfs;
  return real_vfs->xSleep (real_vfs, microseconds);
}

static int
v_current_time (sqlite3_vfs *vfs, double *out)
{
  (void) vfs;
  return real_vfs->xCurrentTime (real_vfs, out);
}

static int
v_get_last_error (sqlite3_vfs *vfs, int n, char *out)
{
  (void) vfs;
  return real_vfs->xGetLastError ? real_vfs->xGetLastError (real_vfs, n, out) : 0;
}

static int
v_current_time_int64 (sqlite3_vfs *vfs, sqlite3_int64 *out)
{
  (void) vfs;
  return real_vfs->xCurrentTimeInt64 (real_vfs, out);
}

void
hanashi_store_faults_install (void)
{
  if (real_vfs)
    return;
  real_vfs = sqlite3_vfs_find (NULL);
  g_assert (real_vfs != NULL && real_vfs->iVersion >= 2);
  fault_vfs = (sqlite3_vfs) {
    .iVersion = 2,
    .szOsFile = (int) sizeof (FaultFile) + real_vfs->szOsFile,
    .mxPathname = real_vfs->mxPathname,
    .zName = "hanashi-faults",
    .xOpen = v_open,
    .xDelete = v_delete,
    .xAccess = v_access,
    .xFullPathname = v_full_pathname,
    .xDlOpen = v_dl_open,
    .xDlError = v_dl_error,
    .xDlSym = v_dl_sym,
    .xDlClose = v_dl_close,
    .xRandomness = v_randomness,
    .xSleep = v_sleep,
    .xCurrentTime = v_current_time,
    .xGetLastError = v_get_last_error,
    .xCurrentTimeInt64 = v_current_time_int64,
  };
  sqlite3_vfs_register (&fault_vfs, 1);
}
