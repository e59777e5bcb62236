/* hanashi-preferences-window.h: engine settings, session cache, default parameters and
 * model folders.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "hanashi-engine.h"
#include "hanashi-serving.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_PREFERENCES_WINDOW (hanashi_preferences_window_get_type ())
G_DECLARE_FINAL_TYPE (HanashiPreferencesWindow, hanashi_preferences_window, HANASHI, PREFERENCES_WINDOW, AdwPreferencesWindow)

/* `engine` may be NULL (the session cache is then cleared directly on disk). */
HanashiPreferencesWindow *hanashi_preferences_window_new (GtkWindow *parent, HanashiEngine *engine);
/* Adds the Server page ("Serve the loaded model", hanashi-serve-page.h) for @serving. */
void hanashi_preferences_window_set_serving (HanashiPreferencesWindow *self, HanashiServing *serving);

G_END_DECLS
