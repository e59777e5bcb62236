/* hanashi-serve-page.h — Preferences' Server page: "Serve the loaded model" on and off, its
 * port, the network, and the API key (see hanashi-serving.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "hanashi-serving.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_SERVE_PAGE (hanashi_serve_page_get_type ())
G_DECLARE_FINAL_TYPE (HanashiServePage, hanashi_serve_page, HANASHI, SERVE_PAGE, AdwPreferencesPage)

/* The switches and the port are the settings; the status and the key are @serving's. */
HanashiServePage *hanashi_serve_page_new (HanashiServing *serving);

G_END_DECLS
