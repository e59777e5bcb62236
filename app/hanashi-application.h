/* hanashi-application.h
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "hanashi-engine.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_APPLICATION (hanashi_application_get_type ())
G_DECLARE_FINAL_TYPE (HanashiApplication, hanashi_application, HANASHI, APPLICATION, AdwApplication)

HanashiApplication *hanashi_application_new (void);
/* The one engine of the process, made on first use, with the session cache limit from
 * GSettings kept up to date; every window and Preferences use it (borrowed). */
HanashiEngine      *hanashi_application_get_engine (HanashiApplication *self);

G_END_DECLS
