/* hanashi-application.h
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define HANASHI_TYPE_APPLICATION (hanashi_application_get_type ())
G_DECLARE_FINAL_TYPE (HanashiApplication, hanashi_application, HANASHI, APPLICATION, AdwApplication)

HanashiApplication *hanashi_application_new (void);

G_END_DECLS
