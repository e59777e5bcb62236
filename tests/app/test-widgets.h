/* Finding widgets the way a user sees them, for the GUI tests.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

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
