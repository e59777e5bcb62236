/* Session files: exact round trip of tokens and F16 rows, every corruption rejected (so the
 * caller re-evaluates), failed writes keep the previous file, LRU eviction, common prefix.
 * Rows are synthetic here; the logits-level tests need the forward pass (see docs/sessions.md).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "hn-session.h"

enum { N_LAYER = 3, N_EMBD_K = 8, N_EMBD_V = 12 };

static const HnSessionParams params = {
  .model_fingerprint = 0x1234abcd5678ef00ull, .kv_type = HN_SESSION_KV_F16, .n_layer = N_LAYER,
  .n_embd_k = N_EMBD_K, .n_embd_v = N_EMBD_V, .rope_type = 0, .rope_freq_base = 10000.0f,
  .rope_freq_scale = 1.0f,
};

typedef struct {
  uint32_t seed;
  uint16_t row[N_EMBD_V];
} RowGen;

static const void *
synthetic_row (void *user, uint32_t layer, bool is_v, uint32_t i)
{
  RowGen *g = user;
  for (int j = 0; j < N_EMBD_V; j++)
    g->row[j] = (uint16_t) (g->seed * 7919u + layer * 1000u + (is_v ? 500u : 0u) + i * 31u + (uint32_t) j);
  return g->row;
}

static char *tmpdir;

static char *
write_sample (const char *name, uint32_t n_tokens, uint32_t seed)
{
  char *path = g_build_filename (tmpdir, name, NULL);
  int32_t *tokens = g_new (int32_t, n_tokens);
  for (uint32_t i = 0; i < n_tokens; i++)
    tokens[i] = (int32_t) (i * 13 + seed);
  RowGen g = { .seed = seed };
  HnError err = { 0 };
  g_assert_true (hn_session_write (path, &params, tokens, n_tokens, synthetic_row, &g, &err));
  g_free (tokens);
  return path;
}

static void
assert_session_matches (HnSession *s, uint32_t n_tokens, uint32_t seed)
{
  uint32_t n;
  const int32_t *tokens = hn_session_tokens (s, &n);
  g_assert_cmpuint (n, ==, n_tokens);
  RowGen g = { .seed = seed };
  for (uint32_t i = 0; i < n; i++)
    {
      g_assert_cmpint (tokens[i], ==, (int32_t) (i * 13 + seed));
      for (uint32_t l = 0; l < N_LAYER; l++)
        {
          g_assert_cmpmem (hn_session_row (s, l, false, i), N_EMBD_K * 2, synthetic_row (&g, l, false, i), N_EMBD_K * 2);
          g_assert_cmpmem (hn_session_row (s, l, true, i), N_EMBD_V * 2, synthetic_row (&g, l, true, i), N_EMBD_V * 2);
        }
    }
}

static void
test_round_trip (void)
{
  g_autofree char *path = write_sample ("rt.hnsession", 50, 3);
  HnError err = { 0 };
  HnSession *s = hn_session_read (path, &params, &err);
  g_assert_nonnull (s);
  assert_session_matches (s, 50, 3);
  hn_session_free (s);
  /* Exactly the used cells: header + tokens + F16 K/V rows, nothing else. */
  GStatBuf st;
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, HN_SESSION_HEADER_SIZE + 50 * 4 + N_LAYER * 50 * (N_EMBD_K + N_EMBD_V) * 2);
}

static void
test_corruption (void)
{
  g_autofree char *path = write_sample ("c.hnsession", 20, 5);
  g_autofree char *bad = g_build_filename (tmpdir, "bad.hnsession", NULL);
  gchar *data;
  gsize len;
  g_assert_true (g_file_get_contents (path, &data, &len, NULL));
  HnError err = { 0 };
  /* Truncation at every offset. */
  for (gsize cut = 0; cut < len; cut += (cut < 200 ? 1 : 37))
    {
      g_assert_true (g_file_set_contents (bad, data, (gssize) cut, NULL));
      g_assert_null (hn_session_read (bad, &params, &err));
    }
  /* A flipped bit anywhere (header and payload). */
  for (gsize off = 0; off < len; off += (off < HN_SESSION_HEADER_SIZE ? 1 : 11))
    {
      data[off] ^= 0x10;
      g_assert_true (g_file_set_contents (bad, data, (gssize) len, NULL));
      g_assert_null (hn_session_read (bad, &params, &err));
      data[off] ^= 0x10;
    }
  /* Appended garbage. */
  gchar *longer = g_malloc (len + 1);
  memcpy (longer, data, len);
  longer[len] = 0;
  g_assert_true (g_file_set_contents (bad, longer, (gssize) len + 1, NULL));
  g_assert_null (hn_session_read (bad, &params, &err));
  g_free (longer);
  /* Other model, other KV settings. */
  HnSessionParams other = params;
  other.model_fingerprint ^= 1;
  g_assert_null (hn_session_read (path, &other, &err));
  other = params;
  other.rope_freq_base = 500000.0f;
  g_assert_null (hn_session_read (path, &other, &err));
  /* Missing file. */
  g_assert_null (hn_session_read ("/nonexistent/x.hnsession", &params, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_NOT_FOUND);
  /* Intact copy still reads. */
  g_assert_true (g_file_set_contents (bad, data, (gssize) len, NULL));
  HnSession *s = hn_session_read (bad, &params, &err);
  g_assert_nonnull (s);
  hn_session_free (s);
  g_free (data);
}

static void
test_wrong_version (void)
{
  g_autofree char *path = write_sample ("v.hnsession", 4, 1);
  gchar *data;
  gsize len;
  g_assert_true (g_file_get_contents (path, &data, &len, NULL));
  data[8] = HN_SESSION_VERSION + 1; /* header hash recomputed so only the version is wrong */
  uint64_t h = hn_session_hash (data, HN_SESSION_HEADER_SIZE - 8, 0);
  memcpy (data + HN_SESSION_HEADER_SIZE - 8, &h, 8);
  g_assert_true (g_file_set_contents (path, data, (gssize) len, NULL));
  HnError err = { 0 };
  g_assert_null (hn_session_read (path, &params, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_UNSUPPORTED);
  g_free (data);
}

/* Fault injection through the I/O seam. */
enum {
  FAIL_ENOSPC = 1,   /* every write: no space */
  FAIL_EROFS,        /* opening for writing: read-only file system */
  FAIL_SHORT,        /* a few short writes, then writes that make no progress */
  FAIL_RENAME,       /* the final rename */
  FAIL_FSYNC,        /* fsync of the temporary file: the data may not be on disk */
  FAIL_LAST_WRITE,   /* the payload is written, the disk fills up for the header (last) */
  N_FAIL_MODES
};
static int fail_mode;
static int short_writes;

static int
fault_open (const char *path, int flags, mode_t mode)
{
  if (fail_mode == FAIL_EROFS && (flags & (O_WRONLY | O_RDWR)))
    {
      errno = EROFS;
      return -1;
    }
  return hn_session_default_io ()->open (path, flags, mode);
}

static ssize_t
fault_pwrite (int fd, const void *buf, size_t count, off_t offset)
{
  if (fail_mode == FAIL_ENOSPC || (fail_mode == FAIL_LAST_WRITE && offset == 0))
    {
      errno = ENOSPC;
      return -1;
    }
  if (fail_mode == FAIL_SHORT)
    {
      if (short_writes++ > 3)
        return 0;
      return hn_session_default_io ()->pwrite (fd, buf, count > 7 ? 7 : count, offset);
    }
  return hn_session_default_io ()->pwrite (fd, buf, count, offset);
}

static int
fault_rename (const char *from, const char *to)
{
  if (fail_mode == FAIL_RENAME)
    {
      errno = EXDEV;
      return -1;
    }
  return hn_session_default_io ()->rename (from, to);
}

static int
fault_fsync (int fd)
{
  if (fail_mode == FAIL_FSYNC)
    {
      errno = EIO;
      return -1;
    }
  return hn_session_default_io ()->fsync (fd);
}

static void
test_failed_write_keeps_previous (void)
{
  g_autofree char *path = write_sample ("w.hnsession", 10, 7);
  g_autofree gchar *before = NULL;
  gsize before_len = 0;
  g_assert_true (g_file_get_contents (path, &before, &before_len, NULL));
  HnSessionIO io = *hn_session_default_io ();
  io.open = fault_open;
  io.pwrite = fault_pwrite;
  io.rename = fault_rename;
  io.fsync = fault_fsync;
  hn_session_set_io (&io);
  for (fail_mode = 1; fail_mode < N_FAIL_MODES; fail_mode++)
    {
      short_writes = 0;
      int32_t tokens[30] = { 0 };
      RowGen g = { .seed = 99 };
      HnError err = { 0 };
      g_assert_false (hn_session_write (path, &params, tokens, 30, synthetic_row, &g, &err));
      g_assert_cmpint (err.code, ==, HN_ERR_IO);
      g_test_message ("mode %d: %s", fail_mode, err.message);
      /* The previous file is byte for byte what it was, and still loads. */
      g_autofree gchar *after = NULL;
      gsize after_len = 0;
      g_assert_true (g_file_get_contents (path, &after, &after_len, NULL));
      g_assert_cmpmem (after, after_len, before, before_len);
      HnSession *s = hn_session_read (path, &params, &err);
      g_assert_nonnull (s);
      assert_session_matches (s, 10, 7);
      hn_session_free (s);
    }
  hn_session_set_io (NULL);
  /* No temporary files left behind. */
  g_autoptr (GDir) dir = g_dir_open (tmpdir, 0, NULL);
  const char *name;
  while ((name = g_dir_read_name (dir)) != NULL)
    g_assert_null (strstr (name, ".tmp."));
}

/* Temporary files are never written through a name someone else prepared.  The seam's open
 * plants, at the exact name the writer is about to create, first a dangling symbolic link
 * (following it would create a file elsewhere), then a link to an existing file (following
 * it would overwrite that file), then an ordinary file (truncating it would destroy it).
 * The write must step around all three and still produce the target; the old predictable
 * name PATH.tmp.PID, also planted, must stay untouched. */
static char *plant_dir;
static int plant_count;

static int
planting_open (const char *path, int flags, mode_t mode)
{
  if ((flags & O_CREAT) && plant_count < 3)
    {
      g_autofree char *elsewhere = g_build_filename (plant_dir, "created-through-link", NULL);
      g_autofree char *victim = g_build_filename (plant_dir, "victim", NULL);
      if (plant_count == 0)
        g_assert_cmpint (symlink (elsewhere, path), ==, 0);
      else if (plant_count == 1)
        g_assert_cmpint (symlink (victim, path), ==, 0);
      else
        g_assert_true (g_file_set_contents (path, "planted", -1, NULL));
      plant_count++;
    }
  return hn_session_default_io ()->open (path, flags, mode);
}

static void
test_planted_temporary_names (void)
{
  plant_dir = g_build_filename (tmpdir, "planted", NULL);
  g_assert_cmpint (g_mkdir (plant_dir, 0700), ==, 0);
  g_autofree char *victim = g_build_filename (plant_dir, "victim", NULL);
  g_assert_true (g_file_set_contents (victim, "precious", -1, NULL));
  g_autofree char *path = g_build_filename (plant_dir, "s.hnsession", NULL);
  g_autofree char *predictable = g_strdup_printf ("%s.tmp.%ld", path, (long) getpid ());
  g_assert_cmpint (symlink (victim, predictable), ==, 0);

  HnSessionIO io = *hn_session_default_io ();
  io.open = planting_open;
  hn_session_set_io (&io);
  plant_count = 0;
  int32_t tokens[9];
  for (int i = 0; i < 9; i++)
    tokens[i] = i * 13 + 4;
  RowGen g = { .seed = 4 };
  HnError err = { 0 };
  gboolean written = hn_session_write (path, &params, tokens, 9, synthetic_row, &g, &err);
  hn_session_set_io (NULL);
  g_assert_true (written);
  g_assert_cmpint (plant_count, ==, 3);

  /* nothing was written through the links, the planted file is intact */
  g_autofree char *elsewhere = g_build_filename (plant_dir, "created-through-link", NULL);
  g_assert_false (g_file_test (elsewhere, G_FILE_TEST_EXISTS));
  g_autofree gchar *contents = NULL;
  g_assert_true (g_file_get_contents (victim, &contents, NULL, NULL));
  g_assert_cmpstr (contents, ==, "precious");
  g_assert_true (g_file_test (predictable, G_FILE_TEST_IS_SYMLINK));
  g_autoptr (GDir) dir = g_dir_open (plant_dir, 0, NULL);
  const char *name;
  int n_links = 0, n_planted_files = 0;
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *full = g_build_filename (plant_dir, name, NULL);
      if (g_file_test (full, G_FILE_TEST_IS_SYMLINK))
        n_links++;
      else if (strstr (name, ".tmp.") != NULL)
        {
          g_autofree gchar *planted = NULL;
          g_assert_true (g_file_get_contents (full, &planted, NULL, NULL));
          g_assert_cmpstr (planted, ==, "planted");
          n_planted_files++;
        }
    }
  g_assert_cmpint (n_links, ==, 3);
  g_assert_cmpint (n_planted_files, ==, 1);

  /* and the target is a complete, correct session file of its own */
  g_assert_false (g_file_test (path, G_FILE_TEST_IS_SYMLINK));
  HnSession *s = hn_session_read (path, &params, &err);
  g_assert_nonnull (s);
  assert_session_matches (s, 9, 4);
  hn_session_free (s);
  g_clear_pointer (&plant_dir, g_free);
}

/* Reads that fail or return bytes that are not the file's are rejected, never trusted. */
static int read_mode;  /* 1 garbage everywhere, 2 garbage in the payload only, 3 EIO */

static ssize_t
fault_pread (int fd, void *buf, size_t count, off_t offset)
{
  if (read_mode == 3)
    {
      errno = EIO;
      return -1;
    }
  ssize_t n = hn_session_default_io ()->pread (fd, buf, count, offset);
  if (n > 0 && (read_mode == 1 || (read_mode == 2 && offset >= HN_SESSION_HEADER_SIZE)))
    for (ssize_t i = 0; i < n; i++)
      ((uint8_t *) buf)[i] = (uint8_t) (0x5a ^ (uint8_t) ((offset + i) * 131));
  return n;
}

static void
test_garbage_reads (void)
{
  g_autofree char *path = write_sample ("g.hnsession", 12, 3);
  HnSessionIO io = *hn_session_default_io ();
  io.pread = fault_pread;
  hn_session_set_io (&io);
  const HnStatus expected[] = { HN_OK, HN_ERR_FORMAT, HN_ERR_FORMAT, HN_ERR_IO };
  for (read_mode = 1; read_mode <= 3; read_mode++)
    {
      HnError err = { 0 };
      g_assert_null (hn_session_read (path, &params, &err));
      g_assert_cmpint (err.code, ==, expected[read_mode]);
      g_test_message ("read mode %d: %s", read_mode, err.message);
    }
  hn_session_set_io (NULL);
  /* The file itself was never touched. */
  HnError err = { 0 };
  HnSession *s = hn_session_read (path, &params, &err);
  g_assert_nonnull (s);
  assert_session_matches (s, 12, 3);
  hn_session_free (s);
}

static void
test_lru_eviction (void)
{
  g_autofree char *dir = g_build_filename (tmpdir, "lru", NULL);
  g_assert_cmpint (g_mkdir (dir, 0700), ==, 0);
  char *paths[5];
  for (int i = 0; i < 5; i++)
    {
      g_autofree char *name = g_strdup_printf ("lru/s%d.hnsession", i);
      paths[i] = write_sample (name, 10, (uint32_t) i);
      /* Distinct, increasing mtimes without sleeping. */
      struct timespec times[2] = { { 1000 + i, 0 }, { 1000 + i, 0 } };
      g_assert_cmpint (utimensat (AT_FDCWD, paths[i], times, 0), ==, 0);
    }
  GStatBuf st;
  g_assert_cmpint (g_stat (paths[0], &st), ==, 0);
  uint64_t one = (uint64_t) st.st_size;
  /* Using s0 makes it the most recent. */
  g_assert_true (hn_session_touch (paths[0]));
  HnError err = { 0 };
  g_assert_cmpint (hn_session_cache_evict (dir, 3 * one, paths[1], &err), ==, 2);
  g_assert_true (g_file_test (paths[0], G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (paths[1], G_FILE_TEST_EXISTS));   /* kept: in use */
  g_assert_false (g_file_test (paths[2], G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (paths[3], G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (paths[4], G_FILE_TEST_EXISTS));

  /* A link named like a session file, pointing at a large file elsewhere, is neither
   * counted (it would make the cache look full and evict real files) nor touched. */
  g_autofree char *outside = g_build_filename (tmpdir, "outside.bin", NULL);
  g_autofree char *big = g_malloc0 (20 * one);
  g_assert_true (g_file_set_contents (outside, big, (gssize) (20 * one), NULL));
  g_autofree char *link = g_build_filename (dir, "planted.hnsession", NULL);
  g_assert_cmpint (symlink (outside, link), ==, 0);
  g_assert_cmpint (hn_session_cache_evict (dir, 3 * one, paths[1], &err), ==, 0);
  g_assert_true (g_file_test (paths[0], G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (paths[4], G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (link, G_FILE_TEST_IS_SYMLINK));
  g_assert_cmpint (g_stat (outside, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, (goffset) (20 * one));
  g_unlink (link);
  g_unlink (outside);
  for (int i = 0; i < 5; i++)
    g_free (paths[i]);
}

static void
test_common_prefix (void)
{
  int32_t a[] = { 1, 2, 3, 4, 5 }, b[] = { 1, 2, 9, 4 };
  g_assert_cmpuint (hn_session_common_prefix (a, 5, b, 4), ==, 2);
  g_assert_cmpuint (hn_session_common_prefix (a, 5, a, 3), ==, 3);
  g_assert_cmpuint (hn_session_common_prefix (a, 0, b, 4), ==, 0);
}

static int
remove_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void) st; (void) flag; (void) ftw;
  return remove (path);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("hanashi-session-XXXXXX", NULL);
  g_test_add_func ("/session/round-trip", test_round_trip);
  g_test_add_func ("/session/corruption", test_corruption);
  g_test_add_func ("/session/wrong-version", test_wrong_version);
  g_test_add_func ("/session/failed-write-keeps-previous", test_failed_write_keeps_previous);
  g_test_add_func ("/session/planted-temporary-names", test_planted_temporary_names);
  g_test_add_func ("/session/garbage-reads", test_garbage_reads);
  g_test_add_func ("/session/lru-eviction", test_lru_eviction);
  g_test_add_func ("/session/common-prefix", test_common_prefix);
  int rc = g_test_run ();
  nftw (tmpdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
  g_free (tmpdir);
  return rc;
}
