/* Model files are only ever read: opened O_RDONLY, mapped PROT_READ (so the mapping can
 * never be made writable), the descriptor closed after mapping, and nothing written beside
 * the file.  The test data directory is itself read-only (0555, files 0444), as a user's
 * model folder may be; root ignores those bits, so the test also compares the directory
 * and the file's status before and after.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hn-context.h"
#include "hn-model.h"
#include "../support/dir-snapshot.h"

/* The /proc/self/maps line of the mapping of `path`, or NULL. */
static char *
find_mapping (const char *path)
{
  g_autofree char *maps = NULL;
  g_assert_true (g_file_get_contents ("/proc/self/maps", &maps, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (maps, "\n", -1);
  for (char **l = lines; *l; l++)
    if (g_str_has_suffix (*l, path))
      return g_strdup (*l);
  return NULL;
}

static gboolean
fd_open_on (const char *path)
{
  g_autoptr (GDir) d = g_dir_open ("/proc/self/fd", 0, NULL);
  const char *name;
  while ((name = g_dir_read_name (d)))
    {
      g_autofree char *link = g_build_filename ("/proc/self/fd", name, NULL);
      g_autofree char *target = g_file_read_link (link, NULL);
      if (target && g_str_equal (target, path))
        return TRUE;
    }
  return FALSE;
}

static void
test_read_only_model (void)
{
  g_autofree char *dir = g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", NULL);
  g_autofree char *rel = g_build_filename (dir, "tiny-llama-spm-q8_0.gguf", NULL);
  g_autofree char *path = realpath (rel, NULL);
  g_assert_nonnull (path);
  g_autofree char *real_dir = g_path_get_dirname (path);
  g_autofree char *before = snapshot_dir (real_dir);

  HnError err = { 0 };
  HnModel *model = hn_model_load (path, NULL, &err);
  g_assert_nonnull (model);
  /* Mapped read-only, and the descriptor is gone. */
  g_autofree char *line = find_mapping (path);
  g_assert_nonnull (line);
  g_test_message ("%s", line);
  unsigned long start = 0, end = 0;
  char perms[5] = { 0 };
  g_assert_cmpint (sscanf (line, "%lx-%lx %4s", &start, &end, perms), ==, 3);
  g_assert_cmpint (perms[0], ==, 'r');
  g_assert_cmpint (perms[1], ==, '-');
  g_assert_false (fd_open_on (path));
  /* A shared mapping of a descriptor opened O_RDONLY can never become writable. */
  g_assert_cmpint (mprotect ((void *) start, end - start, PROT_READ | PROT_WRITE), ==, -1);
  g_assert_cmpint (errno, ==, EACCES);

  /* Run the model so every tensor is touched. */
  HnContextParams params = hn_context_default_params ();
  params.n_ctx = 64;
  params.n_threads = 1;
  HnContext *ctx = hn_context_new (model, &params, &err);
  g_assert_nonnull (ctx);
  int32_t tokens[] = { 1, 15043, 29892 }, pos[] = { 0, 1, 2 };
  HnBatch batch = { .n_tokens = 3, .token = tokens, .pos = pos };
  g_assert_true (hn_context_decode (ctx, &batch, &err));
  hn_context_free (ctx);
  hn_model_free (model);
  g_assert_null (find_mapping (path));

  g_autofree char *after = snapshot_dir (real_dir);
  g_assert_cmpstr (after, ==, before);
}

/* A model in a folder we may write to: loading and running it leaves the folder exactly as
 * it was (no lock, cache, index or temporary file beside the model). */
static void
test_nothing_written_beside (void)
{
  g_autofree char *src = g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", "stories260K-f32.gguf", NULL);
  g_autofree char *dir = g_dir_make_tmp ("hanashi-models-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "model.gguf", NULL);
  g_autofree gchar *bytes = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (src, &bytes, &len, NULL));
  g_assert_true (g_file_set_contents (path, bytes, (gssize) len, NULL));
  g_assert_cmpint (g_chmod (path, 0444), ==, 0);
  g_assert_cmpint (g_chmod (dir, 0555), ==, 0);
  g_autofree char *before = snapshot_dir (dir);

  HnError err = { 0 };
  HnModel *model = hn_model_load (path, NULL, &err);
  g_assert_nonnull (model);
  HnContextParams params = hn_context_default_params ();
  params.n_ctx = 32;
  params.n_threads = 1;
  HnContext *ctx = hn_context_new (model, &params, &err);
  g_assert_nonnull (ctx);
  int32_t tokens[] = { 1, 2, 3 }, pos[] = { 0, 1, 2 };
  HnBatch batch = { .n_tokens = 3, .token = tokens, .pos = pos };
  g_assert_true (hn_context_decode (ctx, &batch, &err));
  hn_context_free (ctx);
  hn_model_free (model);

  g_autofree char *after = snapshot_dir (dir);
  g_assert_cmpstr (after, ==, before);
  g_autofree gchar *again = NULL;
  gsize again_len = 0;
  g_assert_true (g_file_get_contents (path, &again, &again_len, NULL));
  g_assert_cmpmem (again, again_len, bytes, len);

  g_assert_cmpint (g_chmod (dir, 0755), ==, 0);
  g_assert_cmpint (g_remove (path), ==, 0);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/model-files/read-only-mapping", test_read_only_model);
  g_test_add_func ("/model-files/nothing-written-beside", test_nothing_written_beside);
  return g_test_run ();
}
