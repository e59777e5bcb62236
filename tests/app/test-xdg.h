/* Temporary XDG folders for a GUI test.  G_TEST_OPTION_ISOLATE_DIRS would also replace
 * XDG_DATA_DIRS, which hides shared-mime-info and so breaks GTK's SVG icon loading;
 * only the user's own folders are redirected here.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <glib/gstdio.h>

static char *test_xdg_root;

static void
test_xdg_remove_tree (GFile *file)
{
  g_autoptr (GFileEnumerator) children =
    g_file_enumerate_children (file, G_FILE_ATTRIBUTE_STANDARD_NAME, G_FILE_QUERY_INFO_NOFOLLOW_SYMLINKS, NULL, NULL);
  if (children)
    {
      GFileInfo *info;
      GFile *child;
      while (g_file_enumerator_iterate (children, &info, &child, NULL, NULL) && info)
        test_xdg_remove_tree (child);
    }
  g_file_delete (file, NULL, NULL);
}

static void
test_xdg_cleanup (void)
{
  if (test_xdg_root)
    {
      g_autoptr (GFile) root = g_file_new_for_path (test_xdg_root);
      test_xdg_remove_tree (root);
      g_clear_pointer (&test_xdg_root, g_free);
    }
}

/* Call before anything reads the XDG folders (before gtk_init). */
static void
test_xdg_setup (void)
{
  test_xdg_root = g_dir_make_tmp ("hanashi-test-XXXXXX", NULL);
  g_assert_nonnull (test_xdg_root);
  const char *vars[][2] = {
    { "HOME", "home" }, { "XDG_CONFIG_HOME", "config" }, { "XDG_DATA_HOME", "data" },
    { "XDG_CACHE_HOME", "cache" }, { "XDG_STATE_HOME", "state" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (vars); i++)
    {
      g_autofree char *dir = g_build_filename (test_xdg_root, vars[i][1], NULL);
      g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
      g_setenv (vars[i][0], dir, TRUE);
    }
  atexit (test_xdg_cleanup);
}
