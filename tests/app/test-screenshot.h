/* Saves PNG screenshots of a window in the light and the dark style when
 * HANASHI_SCREENSHOT_DIR is set (tests/app/meson.build points it into the build tree).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

static void
test_screenshot_settle (void)
{
  /* Let layout, style changes and idle work finish before drawing. */
  for (int round = 0; round < 3; round++)
    {
      while (g_main_context_iteration (NULL, FALSE))
        ;
      g_usleep (50000);
    }
}

/* gtk_window_present() maps a window only when the display server has answered, which
 * on a loaded machine can take longer than test_screenshot_settle() waits, and an
 * unmapped window draws nothing.  Waits for the map, ten seconds at most. */
static void
test_screenshot_wait_mapped (GtkWidget *window)
{
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while (!gtk_widget_get_mapped (window) && g_get_monotonic_time () < deadline)
    {
      while (g_main_context_iteration (NULL, FALSE))
        ;
      g_usleep (10000);
    }
  g_assert_true (gtk_widget_get_mapped (window));
}

static void
test_screenshot_one (GtkWidget *window, const char *path)
{
  test_screenshot_wait_mapped (window);
  test_screenshot_settle ();
  int width = gtk_widget_get_width (window), height = gtk_widget_get_height (window);
  g_assert_cmpint (width, >, 0);
  g_autoptr (GdkPaintable) paintable = gtk_widget_paintable_new (window);
  GtkSnapshot *snapshot = gtk_snapshot_new ();
  gdk_paintable_snapshot (paintable, snapshot, width, height);
  g_autoptr (GskRenderNode) node = gtk_snapshot_free_to_node (snapshot);
  g_assert_nonnull (node);
  GskRenderer *renderer = gtk_native_get_renderer (gtk_widget_get_native (window));
  g_autoptr (GdkTexture) texture = gsk_renderer_render_texture (renderer, node, &GRAPHENE_RECT_INIT (0, 0, width, height));
  g_assert_true (gdk_texture_save_to_png (texture, path));
}

static void
test_screenshot (GtkWidget *window, const char *name)
{
  const char *dir = g_getenv ("HANASHI_SCREENSHOT_DIR");
  if (!dir || !*dir)
    return;
  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  AdwStyleManager *style = adw_style_manager_get_default ();
  const char *variants[] = { "light", "dark" };
  AdwColorScheme schemes[] = { ADW_COLOR_SCHEME_FORCE_LIGHT, ADW_COLOR_SCHEME_FORCE_DARK };
  for (guint i = 0; i < G_N_ELEMENTS (variants); i++)
    {
      adw_style_manager_set_color_scheme (style, schemes[i]);
      g_autofree char *file = g_strdup_printf ("%s-%s.png", name, variants[i]);
      g_autofree char *path = g_build_filename (dir, file, NULL);
      test_screenshot_one (window, path);
    }
  adw_style_manager_set_color_scheme (style, ADW_COLOR_SCHEME_DEFAULT);
}
