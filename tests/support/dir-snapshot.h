/* dir-snapshot.h — a folder's listing and every entry's status as one string, for tests
 * that check a folder was only read (model files, a person's model folder): compare a
 * snapshot taken before with one taken after.  Header only (GLib), so that engine and
 * app tests include it without linking the test-support library.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>
#include <string.h>
#include <sys/stat.h>

static inline int
dir_snapshot_compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* One line per entry of @dir, by name: name, size, mode, mtime and ctime (to free). */
static inline char *
snapshot_dir (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  g_assert_nonnull (d);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;
  while ((name = g_dir_read_name (d)))
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, dir_snapshot_compare_names);
  GString *out = g_string_new (NULL);
  for (guint i = 0; i < names->len; i++)
    {
      g_autofree char *path = g_build_filename (dir, names->pdata[i], NULL);
      struct stat st;
      g_assert_cmpint (stat (path, &st), ==, 0);
      /* mtime and ctime move on any write or metadata change; atime may move on reads. */
      g_string_append_printf (out, "%s %lld %o %lld.%09ld %lld.%09ld\n", (char *) names->pdata[i],
                              (long long) st.st_size, (unsigned) st.st_mode, (long long) st.st_mtim.tv_sec,
                              st.st_mtim.tv_nsec, (long long) st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
    }
  return g_string_free (out, FALSE);
}
