/* hanashi-token-view.h — an answer shown token by token, shaded by how likely each token
 * was (the "Show probabilities" lens).
 *
 * The answer's text is shown as written (its Markdown source, not rendered: a token may
 * start inside "**" and end in the word after it, and the lens is about the tokens), each
 * token shaded by the probability it was chosen with (HnTokenProbs.p, after the sampler
 * chain): the less likely, the stronger the shade.  Hovering a token shows its candidates
 * in a tooltip; clicking it, or Enter/Space on the caret's token, opens a popover with the
 * candidates' chart (HanashiProbChart) and a button per other candidate, which emits
 * "branch" (the answer continues from there with that token), and "Show in the Lens".
 *
 * The records' token ids are the loaded model's: their texts come from the engine
 * (hanashi_engine_dup_token_text), mapped onto the answer's text by
 * hanashi_token_spans_map (hanashi-token-probs.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

#include "hanashi-engine.h"
#include "hanashi-prob-chart.h"
#include "hanashi-token-probs.h" /* the spans and shades */

G_BEGIN_DECLS

#define HANASHI_TYPE_TOKEN_VIEW (hanashi_token_view_get_type ())
G_DECLARE_FINAL_TYPE (HanashiTokenView, hanashi_token_view, HANASHI, TOKEN_VIEW, GtkWidget)

GtkWidget *hanashi_token_view_new (void);

/* Shows @text with its @records (HnTokenProbs), the token texts taken from @engine.  FALSE
 * (and an empty view) when they do not line up: no model is loaded, or not the one that
 * wrote the answer. */
gboolean   hanashi_token_view_set_answer (HanashiTokenView *self,
                                          HanashiEngine    *engine,
                                          const char       *text,
                                          GArray           *records);

/* For tests and for the row: the tokens shown, where they are and how they are shaded (read
 * back from the buffer's tags). */
guint      hanashi_token_view_get_n_tokens       (HanashiTokenView *self);
HanashiTokenSpan hanashi_token_view_get_span     (HanashiTokenView *self, guint index);
int        hanashi_token_view_get_shade          (HanashiTokenView *self, guint index);
/* The token at character @offset of the answer, -1 when none. */
int        hanashi_token_view_get_token_at       (HanashiTokenView *self, int offset);

/* Opens the candidates' popover for token @index (what a click or Enter does). */
void       hanashi_token_view_show_candidates    (HanashiTokenView *self, guint index);
/* The popover and its chart (the chart shows the token last opened). */
GtkPopover       *hanashi_token_view_get_popover (HanashiTokenView *self);
HanashiProbChart *hanashi_token_view_get_chart   (HanashiTokenView *self);

/* Signal "branch" (guint token_index, gint candidate_token): the user chose another
 * candidate for that token.
 * Signal "show-in-lens" (guint token_index): the user wants that token's distribution in
 * the parameter panel's lens ("Show in the Lens" in the popover). */

G_END_DECLS
