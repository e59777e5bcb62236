/* Finding widgets the way a user sees them, and waiting for them, for the GUI tests.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>
#include <string.h>

/* The first open toplevel window of @type (a dialog the test opened), or NULL. */
static inline GtkWindow *
find_toplevel (GType type)
{
  GListModel *toplevels = gtk_window_get_toplevels ();
  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr (GtkWindow) toplevel = g_list_model_get_item (toplevels, i);
      if (G_TYPE_CHECK_INSTANCE_TYPE (toplevel, type))
        return toplevel;   /* the list keeps it alive */
    }
  return NULL;
}

/* The first widget under @root (itself included) whose widget name is @name: the rows
 * and controls the app names for its tests and its CSS. */
static inline GtkWidget *
find_named (GtkWidget *root, const char *name)
{
  if (g_strcmp0 (gtk_widget_get_name (root), name) == 0)
    return root;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = find_named (child, name);
      if (found)
        return found;
    }
  return NULL;
}

/* Sets the parameter panel's (@panel, any widget above it) spin button for @key, as typing
 * a value would, and checks that the value was taken (not clamped). */
static inline void
set_spin (gpointer panel, const char *key, double value)
{
  g_autofree char *name = g_strconcat ("spin-", key, NULL);
  GtkWidget *spin = find_named (GTK_WIDGET (panel), name);
  g_assert_nonnull (spin);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (spin), value);
  g_assert_cmpfloat_with_epsilon (gtk_spin_button_get_value (GTK_SPIN_BUTTON (spin)), value, 1e-6);
}

/* The first button under @widget whose label reads @label (mnemonic underscores ignored),
 * e.g. a toast's "Undo". */
static inline GtkWidget *
find_button (GtkWidget *widget, const char *label)
{
  if (GTK_IS_BUTTON (widget)) {
    const char *text = gtk_button_get_label (GTK_BUTTON (widget));
    if (text && gtk_button_get_use_underline (GTK_BUTTON (widget))) {
      g_autofree char *plain = g_strdup (text);
      char *w = plain;
      for (const char *r = text; *r; r++)
        if (*r != '_')
          *w++ = *r;
      *w = '\0';
      if (g_str_equal (plain, label))
        return widget;
    } else if (g_strcmp0 (text, label) == 0) {
      return widget;
    }
  }
  for (GtkWidget *child = gtk_widget_get_first_child (widget); child; child = gtk_widget_get_next_sibling (child)) {
    GtkWidget *found = find_button (child, label);
    if (found)
      return found;
  }
  return NULL;
}

/* How many buttons under @widget read @label (a toast being dismissed keeps its button
 * until its animation ends). */
static inline guint
count_buttons (GtkWidget *widget, const char *label)
{
  guint n = 0;
  if (find_button (widget, label) == NULL)
    return 0;
  if (GTK_IS_BUTTON (widget) && find_button (widget, label) == widget)
    n++;
  for (GtkWidget *child = gtk_widget_get_first_child (widget); child; child = gtk_widget_get_next_sibling (child))
    n += count_buttons (child, label);
  return n;
}

/* The first widget under @root (or @root itself) of @type. */
static inline GtkWidget *
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

static inline gboolean
has_label_containing (GtkWidget *root, const char *needle)
{
  if (GTK_IS_LABEL (root) && strstr (gtk_label_get_label (GTK_LABEL (root)), needle) != NULL)
    return TRUE;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    if (has_label_containing (child, needle))
      return TRUE;
  return FALSE;
}

typedef gboolean (*Condition) (gpointer data);

/* Runs the main loop until @condition holds; the deadline only keeps a broken build from
 * hanging the suite. */
static inline void
wait_until (Condition condition, gpointer data)
{
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (!condition (data))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, FALSE);
      g_usleep (1000);
    }
}

static inline gboolean
window_is_active (gpointer window)
{
  return gtk_window_is_active (window);
}

/* GUI tests share one virtual display without a window manager, where the keyboard goes to
 * the window under the pointer: another test's window mapped on top makes this one
 * inactive, and GTK then takes the focus state (has-focus, :focus-within) off its widgets.
 * Checks of where the keyboard focus is first raise @window back under the pointer. */
static inline void
wait_window_active (GtkWindow *window)
{
  if (!gtk_window_is_active (window))
    gtk_window_present (window);
  wait_until (window_is_active, window);
}

/* Runs the main loop until a label under @root (a window: a toast, say) contains @needle. */
static inline void
wait_for_text (gpointer root, const char *needle)
{
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (!has_label_containing (GTK_WIDGET (root), needle))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, FALSE);
      g_usleep (1000);
    }
}

/* Runs the main loop for @ms milliseconds of real time (toasts time out by the clock). */
static inline void
run_for (guint ms)
{
  gint64 end = g_get_monotonic_time () + (gint64) ms * 1000;
  while (g_get_monotonic_time () < end)
    {
      while (g_main_context_iteration (NULL, FALSE))
        ;
      g_usleep (5000);
    }
}

/* Lets pending idles, timeouts, layout and the frame clock catch up. */
static inline void
settle (void)
{
  for (int i = 0; i < 8; i++)
    {
      while (g_main_context_iteration (NULL, FALSE))
        ;
      g_usleep (20000);
    }
}
