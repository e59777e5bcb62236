/* The window tests' shared steps: an application registered for the test, and the
 * conditions they wait for (see wait_until in test-widgets.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hanashi-application.h"
#include "hanashi-composer.h"
#include "hanashi-window.h"
#include "test-widgets.h"

static inline HanashiApplication *
make_app (void)
{
  HanashiApplication *app = hanashi_application_new ();
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, NULL));
  return app;
}

static inline gboolean
is_mapped (gpointer widget)
{
  return gtk_widget_get_mapped (widget);
}

static inline gboolean
model_loaded (gpointer window)
{
  return hanashi_engine_get_model_info (hanashi_window_get_engine (window)) != NULL;
}

static inline HanashiComposer *
get_composer (HanashiWindow *window)
{
  return HANASHI_COMPOSER (find_by_type (GTK_WIDGET (window), HANASHI_TYPE_COMPOSER));
}

/* The composer no longer shows a reply being written. */
static inline gboolean
reply_done (gpointer window)
{
  return !hanashi_composer_get_generating (get_composer (window));
}
