/* The Preferences window: settings are written through its widgets, the session cache is
 * cleared on disk without an engine, the default-parameters panel writes GSettings.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>
#include <stdlib.h>
#include <glib/gstdio.h>

#include "hanashi-params.h"
#include "hanashi-preferences-window.h"
#include "test-widgets.h"
#include "test-xdg.h"
#include "test-screenshot.h"

static int
count_rows_titled (GtkWidget *root, const char *title)
{
  int n = ADW_IS_PREFERENCES_ROW (root) && g_strcmp0 (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (root)), title) == 0;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    n += count_rows_titled (child, title);
  return n;
}

static void
test_preferences (void)
{
  g_autoptr (GSettings) settings = g_settings_new (APP_ID);
  HanashiPreferencesWindow *window = hanashi_preferences_window_new (NULL, NULL);
  gtk_window_present (GTK_WINDOW (window));

  test_screenshot (GTK_WIDGET (window), "preferences");
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (find_named (GTK_WIDGET (window), "threads")), 6);
  g_assert_cmpint (g_settings_get_int (settings, "n-threads"), ==, 6);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (find_named (GTK_WIDGET (window), "context-size")), 8192);
  g_assert_cmpint (g_settings_get_int (settings, "context-size"), ==, 8192);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (find_named (GTK_WIDGET (window), "batch-size")), 256);
  g_assert_cmpint (g_settings_get_int (settings, "batch-size"), ==, 256);
  GtkWidget *cache = find_named (GTK_WIDGET (window), "session-cache-limit");
  g_assert_cmpfloat (gtk_spin_button_get_value (GTK_SPIN_BUTTON (cache)), ==, 2.0);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (cache), 1.5);
  g_assert_cmpint (g_settings_get_int (settings, "session-cache-limit-mb"), ==, 1536);

  /* Model folders added elsewhere show up as rows. */
  const char *folders[] = { "/srv/models-for-test", NULL };
  g_settings_set_strv (settings, "model-folders", folders);
  g_assert_cmpint (count_rows_titled (GTK_WIDGET (window), "/srv/models-for-test"), ==, 1);
  g_settings_reset (settings, "model-folders");
  g_assert_cmpint (count_rows_titled (GTK_WIDGET (window), "/srv/models-for-test"), ==, 0);

  /* The default parameters panel writes GSettings. */
  GtkWidget *defaults = find_named (GTK_WIDGET (window), "default-parameters");
  g_assert_nonnull (defaults);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (find_named (defaults, "spin-top_k")), 11);
  g_auto (HanashiParams) params;
  hanashi_params_load_defaults (&params, settings);
  g_assert_cmpint (params.sampling.top_k, ==, 11);

  /* Clear the session cache on disk. */
  g_autofree char *sessions = g_build_filename (g_get_user_cache_dir (), "hanashi", "sessions", NULL);
  g_assert_cmpint (g_mkdir_with_parents (sessions, 0700), ==, 0);
  for (int i = 0; i < 3; i++)
    {
      g_autofree char *name = g_strdup_printf ("conv-%d.hnsession", i);
      g_autofree char *path = g_build_filename (sessions, name, NULL);
      g_assert_true (g_file_set_contents (path, "session", -1, NULL));
    }
  /* A save cut short leaves a temporary file, which goes too; a file that is not ours stays. */
  g_autofree char *leftover = g_build_filename (sessions, "conv-9.hnsession.tmp.00000000deadbeef", NULL);
  g_autofree char *foreign = g_build_filename (sessions, "notes.txt", NULL);
  g_assert_true (g_file_set_contents (leftover, "partial", -1, NULL));
  g_assert_true (g_file_set_contents (foreign, "not a session", -1, NULL));
  GtkWidget *clear = find_named (GTK_WIDGET (window), "clear-session-cache");
  g_signal_emit_by_name (clear, "clicked");
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
  while (!gtk_widget_get_sensitive (clear) && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_autoptr (GDir) dir = g_dir_open (sessions, 0, NULL);
  g_assert_nonnull (dir);
  g_assert_cmpstr (g_dir_read_name (dir), ==, "notes.txt");
  g_assert_null (g_dir_read_name (dir));
  g_assert_cmpint (g_unlink (foreign), ==, 0);

  gtk_window_destroy (GTK_WINDOW (window));
  g_settings_reset (settings, "default-params");
}

int
main (int argc, char **argv)
{
  test_xdg_setup ();
  g_test_init (&argc, &argv, NULL);
  gtk_init ();
  adw_init ();
  g_test_add_func ("/preferences/settings", test_preferences);
  return g_test_run ();
}
