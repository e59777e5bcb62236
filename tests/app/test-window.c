/* GUI smoke test: the real window opens under a virtual display and shows the
 * no-model status page with its Open Model File button. */
#include "config.h"

#include <adwaita.h>

#include "hanashi-application.h"
#include "hanashi-window.h"

static GtkWidget *
find_by_type (GtkWidget *root, GType type)
{
  if (G_TYPE_CHECK_INSTANCE_TYPE (root, type))
    return root;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = find_by_type (child, type);
      if (found)
        return found;
    }
  return NULL;
}

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

int
main (int argc, char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  adw_init ();
  g_test_add_func ("/Hanashi/Window/empty-state", test_window_shows_empty_state);
  return g_test_run ();
}
