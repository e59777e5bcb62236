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
/* libadwaita 1.5 replaced the preferences window with an adaptive dialog; with it
 * Preferences is an AdwPreferencesDialog (shown with hanashi_preferences_window_present(),
 * which gives it its window then), with Debian 12's 1.2 an AdwPreferencesWindow.  The same
 * template (no parent class named in it) fills both. */
#define HANASHI_PREFERENCES_DIALOG ADW_CHECK_VERSION (1, 5, 0)

#if HANASHI_PREFERENCES_DIALOG
G_DECLARE_FINAL_TYPE (HanashiPreferencesWindow, hanashi_preferences_window, HANASHI, PREFERENCES_WINDOW, AdwPreferencesDialog)
#else
G_DECLARE_FINAL_TYPE (HanashiPreferencesWindow, hanashi_preferences_window, HANASHI, PREFERENCES_WINDOW, AdwPreferencesWindow)
#endif

/* `engine` may be NULL (the session cache is then cleared directly on disk).  `parent`
 * becomes the window's transient parent; a dialog gets its window when presented. */
HanashiPreferencesWindow *hanashi_preferences_window_new     (GtkWindow                *parent,
                                                              HanashiEngine            *engine);
/* Shows it over `parent` (a window, or a dialog presented over it). */
void                      hanashi_preferences_window_present (HanashiPreferencesWindow *self,
                                                              GtkWindow                *parent);
/* Adds the Server page ("Serve the loaded model", hanashi-serve-page.h) for @serving. */
void                      hanashi_preferences_window_set_serving (HanashiPreferencesWindow *self,
                                                                   HanashiServing           *serving);

G_END_DECLS
