/* hanashi-window.h
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "hanashi-application.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_WINDOW (hanashi_window_get_type ())
G_DECLARE_FINAL_TYPE (HanashiWindow, hanashi_window, HANASHI, WINDOW, AdwApplicationWindow)

HanashiWindow *hanashi_window_new        (HanashiApplication *application);
void           hanashi_window_open_model (HanashiWindow      *self,
                                          GFile              *file);

G_END_DECLS
