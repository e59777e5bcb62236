/* The GUI tests draw with cairo and never load the machine's OpenGL driver (tests/app/
 * meson.build pins GSK_RENDERER=cairo and GDK_DEBUG=gl-disable).  A driver loaded into the
 * process (Mesa's on every desktop) brings its own allocations, and under LeakSanitizer
 * those made the GUI tests fail or pass depending on the machine they ran on.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <gtk/gtk.h>

static gboolean
is_mapped (GtkWidget *window)
{
  return gtk_widget_get_mapped (window);
}

static void
test_renderer_pinned (void)
{
  GtkWidget *window = gtk_window_new ();
  gtk_window_set_child (GTK_WINDOW (window), gtk_label_new ("drawn with cairo"));
  gtk_window_present (GTK_WINDOW (window));
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (!is_mapped (window))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, TRUE);
    }

  GskRenderer *renderer = gtk_native_get_renderer (GTK_NATIVE (window));
  g_assert_nonnull (renderer);
  g_test_message ("renderer: %s", G_OBJECT_TYPE_NAME (renderer));
  g_assert_true (GSK_IS_CAIRO_RENDERER (renderer));

  /* Nothing of an OpenGL driver in the process: no DRI driver, no vendor GL library. */
  g_autofree char *maps = NULL;
  g_assert_true (g_file_get_contents ("/proc/self/maps", &maps, NULL, NULL));
  /* The Vulkan loader itself (libvulkan.so.1) is linked by the engine's Vulkan backend and
   * loads no driver until a model is offloaded; its drivers are libvulkan_<name>.so (Mesa)
   * or NVIDIA's libnvidia-*. */
  const char *driver_parts[] = { "/dri/", "_dri.so", "libEGL_", "libGLX_", "libvulkan_", "libnvidia-" };
  for (gsize i = 0; i < G_N_ELEMENTS (driver_parts); i++)
    if (strstr (maps, driver_parts[i]) != NULL)
      g_error ("an OpenGL or Vulkan driver is loaded (%s)", driver_parts[i]);
  gtk_window_destroy (GTK_WINDOW (window));
}

int
main (int argc, char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gui-environment/renderer-pinned", test_renderer_pinned);
  return g_test_run ();
}
