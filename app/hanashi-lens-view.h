/* hanashi-lens-view.h — the parameter panel's lens: a live chart of what the panel's
 * settings do to the next token of the conversation.
 *
 * It keeps one stored row of logits (HanashiNextLogits, from the engine thread) and
 * replays the sampler chain on it (hn_lens_compute) whenever the settings change: no model
 * run per slider move.  Collapsed, it computes nothing; the owner fetches a row only while
 * it is open ("open" property).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

#include "hanashi-engine.h"
#include "hanashi-prob-chart.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_LENS_VIEW (hanashi_lens_view_get_type ())
G_DECLARE_FINAL_TYPE (HanashiLensView, hanashi_lens_view, HANASHI, LENS_VIEW, GtkWidget)

HanashiLensView *hanashi_lens_view_new (void);

/* Whether the section is expanded (property "open"). */
gboolean  hanashi_lens_view_get_open   (HanashiLensView *self);
void      hanashi_lens_view_set_open   (HanashiLensView *self, gboolean open);

/* The row to look at: the next token of the conversation, or any other position (a token
 * picked in an answer) given as its logits, history and allowed set (copied; NULL: none,
 * and @status says why, e.g. "Load a model to see …").  Recomputes at once. */
void      hanashi_lens_view_set_logits (HanashiLensView         *self,
                                        const HanashiNextLogits *next,
                                        const char              *status);

/* Which position the row is: @picked NULL for the next token of the conversation, or a
 * heading naming a token picked in an answer, shown with a button back to the next token
 * (action win.lens-next-token); @marked: the token the answer took there, marked in the
 * chart instead of the likeliest.  The row itself comes with set_logits. */
void        hanashi_lens_view_set_position (HanashiLensView *self,
                                            const char      *picked,
                                            gint32           marked);
/* The heading of the picked token, NULL while the row is the next token. */
const char *hanashi_lens_view_get_position (HanashiLensView *self);

/* The settings to look through.  @use_grammar FALSE ignores the row's allowed set (the
 * panel's grammar is off).  Recomputes at once when open and a row is there. */
void      hanashi_lens_view_set_params (HanashiLensView        *self,
                                        const HnSamplerParams  *params,
                                        gboolean                use_grammar);

/* For tests: the chart, and how many times the chain was replayed. */
HanashiProbChart *hanashi_lens_view_get_chart          (HanashiLensView *self);
guint             hanashi_lens_view_get_n_recomputes   (HanashiLensView *self);

G_END_DECLS
