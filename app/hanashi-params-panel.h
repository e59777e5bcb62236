/* hanashi-params-panel.h: the parameter panel (sampling knobs, CFG, grammar, presets).
 *
 * The panel edits one set of generation parameters.  Per conversation the window feeds it
 * the conversation's stored JSON; in "defaults" mode (the Preferences window) it edits the
 * app's default parameters in GSettings instead.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

#include "hanashi-engine.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_PARAMS_PANEL (hanashi_params_panel_get_type ())
G_DECLARE_FINAL_TYPE (HanashiParamsPanel, hanashi_params_panel, HANASHI, PARAMS_PANEL, GtkWidget)

HanashiParamsPanel *hanashi_params_panel_new              (void);
/* The Preferences variant: shows the GSettings defaults and writes every change back. */
HanashiParamsPanel *hanashi_params_panel_new_for_defaults (void);

/* Per-conversation values; NULL = the defaults from GSettings.  Values are clamped to
 * their valid ranges; unknown keys are ignored.  Does not emit "changed". */
void      hanashi_params_panel_set_params_json  (HanashiParamsPanel *self, const char *json);
char     *hanashi_params_panel_dup_params_json  (HanashiParamsPanel *self);

/* Copies every value into the request.  FALSE with a human sentence (naming line and
 * column) when the grammar or JSON schema is invalid; the request is then untouched. */
gboolean  hanashi_params_panel_apply_to_request (HanashiParamsPanel      *self,
                                                 HanashiGenerateRequest  *req,
                                                 GError                 **error);

/* The model in use is on a server (@remote) that is or is not a Hanashi server: the
 * parameters such a server does not take are shown unavailable, with the reason as their
 * tooltip (hanashi-remote.h).  FALSE, FALSE: a local model, everything available. */
void      hanashi_params_panel_set_remote       (HanashiParamsPanel *self,
                                                 gboolean            remote,
                                                 gboolean            is_hanashi);

/* The lens section (hanashi-lens-view.h): it follows the panel's values by itself; the
 * owner gives it rows (hanashi_lens_view_set_logits) when "lens-wanted" asks. */
typedef struct _HanashiLensView HanashiLensView;
HanashiLensView *hanashi_params_panel_get_lens  (HanashiParamsPanel *self);

/* Signal "changed" (no arguments): the user changed a value.
 * Signal "lens-wanted" (no arguments): the lens was opened, or the grammar changed while
 * it is open: fetch the next token's row (hanashi_engine_next_logits_async) again. */

G_END_DECLS
