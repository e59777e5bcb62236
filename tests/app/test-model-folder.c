/* test-model-folder.c — scanning a person's model folder only reads it (no display).
 * The folder is the read-only test data, used in place (0555, files 0444); root ignores
 * those bits, so the folder's listing and every file's size, mode, mtime and ctime are
 * compared before and after a scan.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <string.h>
#include <sys/stat.h>

#include "hanashi-model-scan.h"
#include "test-xdg.h"
#include "../support/dir-snapshot.h"

static void
on_scanned (GObject *source, GAsyncResult *result, gpointer user_data)
{
  (void) source;
  GPtrArray **out = user_data;
  g_autoptr (GError) error = NULL;
  *out = hanashi_model_scan_finish (result, &error);
  g_assert_no_error (error);
}

static void
test_scan_writes_nothing (void)
{
  g_autofree char *folder = g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", NULL);
  g_autofree char *before = snapshot_dir (folder);
  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();

  const char *folders[] = { folder, NULL };
  g_autoptr (GPtrArray) models = NULL;
  hanashi_model_scan_async (folders, NULL, on_scanned, &models);
  while (!models)
    g_main_context_iteration (NULL, TRUE);

  /* Every model in the folder was read... */
  g_autoptr (GDir) dir = g_dir_open (folder, 0, NULL);
  guint n_gguf = 0;
  const char *name;
  while ((name = g_dir_read_name (dir)))
    n_gguf += g_str_has_suffix (name, ".gguf");
  g_assert_cmpuint (models->len, ==, n_gguf);
  for (guint i = 0; i < models->len; i++)
    {
      HanashiLocalModel *m = models->pdata[i];
      g_assert_null (m->error);
      g_assert_false (m->in_app_folder);
    }
  /* ...and nothing was written beside them, nor was the app's own folder created. */
  g_autofree char *after = snapshot_dir (folder);
  g_assert_cmpstr (after, ==, before);
  g_assert_false (g_file_test (app_folder, G_FILE_TEST_EXISTS));
}

int
main (int argc, char **argv)
{
  test_xdg_setup ();
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/model-folder/scan-writes-nothing", test_scan_writes_nothing);
  return g_test_run ();
}
