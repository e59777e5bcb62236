/* hanashi-presets.h: named parameter presets.  Three are shipped (Precise, Balanced,
 * Creative); the user's own live in $XDG_CONFIG_HOME/hanashi/presets.json as
 * {"presets": [{"name": …, "params": {…}}]}, where params is the HanashiParams JSON.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define HANASHI_N_SHIPPED_PRESETS 3

/* Display names: the shipped presets (translated) first, then the user's, in file order. */
GStrv     hanashi_presets_list   (void);
/* The preset's parameters as JSON (shipped presets set the sampling knobs only), or NULL. */
char     *hanashi_presets_lookup (const char *name);
/* Adds or replaces a user preset.  A shipped preset's name cannot be reused. */
gboolean  hanashi_presets_save   (const char *name, const char *params_json, GError **error);
gboolean  hanashi_presets_delete (const char *name, GError **error);

G_END_DECLS
