/* GUI smoke test: the real window opens under a virtual display and shows the
 * no-model status page with its Open Model File button.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>

#include "hanashi-application.h"
#include "hanashi-preferences-window.h"
#include "hanashi-window.h"
#include "test-widgets.h"
#include "test-xdg.h"

static void
test_window_shows_empty_state (void)
{
  g_autoptr (HanashiApplication) app = hanashi_application_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, &error));
  g_assert_no_error (error);

  HanashiWindow *window = hanashi_window_new (app);
  gtk_window_present (GTK_WINDOW (window));
  while (!gtk_widget_get_mapped (GTK_WIDGET (window)))
    g_main_context_iteration (NULL, TRUE);

  GtkWidget *page = find_by_type (GTK_WIDGET (window), ADW_TYPE_STATUS_PAGE);
  g_assert_nonnull (page);
  g_assert_true (gtk_widget_is_visible (page));
  g_assert_cmpstr (adw_status_page_get_title (ADW_STATUS_PAGE (page)), ==, "No Model Loaded");
  g_assert_cmpstr (adw_status_page_get_icon_name (ADW_STATUS_PAGE (page)), ==, APP_ID "-symbolic");

  /* The status page shows the symbolic icon from our resources; without an SVG loader
   * GTK would quietly draw the missing-image icon instead. */
  g_autoptr (GError) icon_error = NULL;
  g_autoptr (GBytes) svg = g_resources_lookup_data ("/io/github/hanashi/Hanashi/icons/scalable/apps/" APP_ID "-symbolic.svg",
                                                    G_RESOURCE_LOOKUP_FLAGS_NONE, &icon_error);
  g_assert_no_error (icon_error);
  g_autoptr (GdkTexture) icon = gdk_texture_new_from_bytes (svg, &icon_error);
  g_assert_no_error (icon_error);
  g_assert_cmpint (gdk_texture_get_width (icon), >, 0);
  GtkIconTheme *theme = gtk_icon_theme_get_for_display (gtk_widget_get_display (page));
  g_assert_true (gtk_icon_theme_has_icon (theme, APP_ID "-symbolic"));

  /* The empty state's button is wired to the window's open-model action. */
  GtkWidget *button = find_by_type (page, GTK_TYPE_BUTTON);
  g_assert_nonnull (button);
  g_assert_cmpstr (gtk_actionable_get_action_name (GTK_ACTIONABLE (button)), ==, "win.open-model");
  gboolean found = FALSE;
  GtkWidgetClass *klass = GTK_WIDGET_GET_CLASS (window);
  GType owner;
  const char *name;
  const GVariantType *param;
  const char *property;
  for (guint i = 0; gtk_widget_class_query_action (klass, i, &owner, &name, &param, &property); i++)
    found |= g_str_equal (name, "win.open-model");
  g_assert_true (found);

  gtk_window_destroy (GTK_WINDOW (window));
}

static GtkWindow *
wait_for_toplevel (GType type)
{
  GtkWindow *found;
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while ((found = find_toplevel (type)) == NULL && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, FALSE);
  return found;
}

/* Every entry of the primary menu that exists in this shell does something. */
static void
test_menu_actions (void)
{
  g_autoptr (HanashiApplication) app = hanashi_application_new ();
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, NULL));

  HanashiWindow *window = hanashi_window_new (app);
  gtk_window_present (GTK_WINDOW (window));
  while (!gtk_widget_get_mapped (GTK_WIDGET (window)))
    g_main_context_iteration (NULL, TRUE);

  g_action_group_activate_action (G_ACTION_GROUP (app), "about", NULL);
#if ADW_CHECK_VERSION (1, 5, 0)
  /* Newer libadwaita: a dialog inside the window (not built on Debian 12's 1.2). */
  AdwDialog *about = adw_application_window_get_visible_dialog (ADW_APPLICATION_WINDOW (window));
  g_assert_true (ADW_IS_ABOUT_DIALOG (about));
  g_assert_cmpstr (adw_about_dialog_get_application_name (ADW_ABOUT_DIALOG (about)), ==, "Hanashi");
  g_assert_cmpstr (adw_about_dialog_get_version (ADW_ABOUT_DIALOG (about)), ==, VERSION);
  adw_dialog_force_close (about);
#else
  GtkWindow *about = wait_for_toplevel (ADW_TYPE_ABOUT_WINDOW);
  g_assert_nonnull (about);
  g_assert_cmpstr (adw_about_window_get_application_name (ADW_ABOUT_WINDOW (about)), ==, "Hanashi");
  g_assert_cmpstr (adw_about_window_get_version (ADW_ABOUT_WINDOW (about)), ==, VERSION);
  g_assert_cmpstr (adw_about_window_get_website (ADW_ABOUT_WINDOW (about)), ==, "https://github.com/hanashi/hanashi");
  gtk_window_destroy (about);
#endif

  g_action_group_activate_action (G_ACTION_GROUP (app), "shortcuts", NULL);
  GtkWindow *shortcuts = wait_for_toplevel (GTK_TYPE_SHORTCUTS_WINDOW);
  g_assert_nonnull (shortcuts);
  gtk_window_close (shortcuts);

  g_action_group_activate_action (G_ACTION_GROUP (app), "preferences", NULL);
  GtkWindow *preferences = wait_for_toplevel (HANASHI_TYPE_PREFERENCES_WINDOW);
  g_assert_nonnull (preferences);
  g_assert_true (gtk_window_get_transient_for (preferences) == GTK_WINDOW (window));
  gtk_window_destroy (preferences);

  /* Every command has its shortcut, and the shortcuts window lists them. */
  const char *expected[][2] = {
    { "win.new-chat", "<Control>n" }, { "win.search", "<Control>f" },
    { "win.toggle-panel", "<Shift><Control>p" }, { "win.stop", "Escape" },
    { "win.open-model", "<Control>o" }, { "app.preferences", "<Control>comma" },
  };
  g_auto (GStrv) help_accels = gtk_application_get_accels_for_action (GTK_APPLICATION (app), "win.show-help-overlay");
  g_assert_cmpstr (help_accels[0], ==, "<Control>question");
  g_autoptr (GBytes) overlay = g_resources_lookup_data ("/io/github/hanashi/Hanashi/gtk/help-overlay.ui", 0, NULL);
  g_assert_nonnull (overlay);
  for (gsize i = 0; i < G_N_ELEMENTS (expected); i++)
    {
      g_auto (GStrv) accels = gtk_application_get_accels_for_action (GTK_APPLICATION (app), expected[i][0]);
      g_assert_cmpuint (g_strv_length (accels), ==, 1);
      g_assert_cmpstr (accels[0], ==, expected[i][1]);
      g_autofree char *needle = g_strdup_printf (">%s<", expected[i][0]);
      g_assert_nonnull (g_strstr_len (g_bytes_get_data (overlay, NULL), g_bytes_get_size (overlay), needle));
    }

  g_auto (GStrv) quit_accels = gtk_application_get_accels_for_action (GTK_APPLICATION (app), "app.quit");
  g_assert_cmpuint (g_strv_length (quit_accels), ==, 1);
  g_assert_cmpstr (quit_accels[0], ==, "<Control>q");

  gtk_window_destroy (GTK_WINDOW (window));
}

int
main (int argc, char **argv)
{
  /* The window opens its conversation database under XDG_DATA_HOME. */
  test_xdg_setup ();
  gtk_test_init (&argc, &argv, NULL);
  adw_init ();
  g_test_add_func ("/Hanashi/Window/empty-state", test_window_shows_empty_state);
  g_test_add_func ("/Hanashi/Window/menu-actions", test_menu_actions);
  return g_test_run ();
}
