/* hanashi-token-probs.h — the sampler's per-token records (HnTokenProbs, hn-sampler.h) kept
 * with a message: a compact blob for the store and JSON for export and import.
 *
 * The blob, little-endian: "HNP1", then per token: token id (int32), its raw logprob and
 * final p (float32 each), the number of candidates (uint8, at most HN_PROBS_MAX_K), and per
 * candidate: id (int32), logprob, p (float32), removed_by (uint8: HnSamplerStage).  13
 * bytes a candidate, so ten candidates a token cost 143 bytes instead of the 332 of the
 * in-memory struct.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "hanashi-engine.h" /* HnTokenProbs and the sampler stages (engine/glib is the door) */

G_BEGIN_DECLS

GBytes *hanashi_token_probs_pack (const HnTokenProbs *records, gsize n_records);
/* NULL (with @error) for a blob that is not one of ours or is cut short; @n_records = 0 and
 * an empty array for an empty or NULL blob. */
GArray *hanashi_token_probs_unpack (GBytes *blob, GError **error);

/* [{"token": ID, "logprob": L, "p": P, "candidates": [{"token": ID, "logprob": L, "p": P,
 *   "removed_by": STAGE or null}, …]}, …] — the CLI's --probs objects without the text. */
JsonNode *hanashi_token_probs_to_json (GBytes *blob);
/* The reverse; NULL (with @error) when the JSON does not have that shape. */
GBytes *hanashi_token_probs_from_json (JsonNode *node, GError **error);

/* ---- the records against the answer's text (the "Show probabilities" lens) ---- */

/* Where each token's text lies in the answer, in characters; start == end: the token wrote
 * nothing of the answer (a thinking token, the end of the reply, the rest of a character). */
typedef struct {
  int start;
  int end;
} HanashiTokenSpan;

/* Maps the tokens' bytes (@pieces, in order; NULL entries write nothing) onto @text, which
 * must be what they wrote after anything before it (a thinking part) and before anything
 * after it (a stop string): the last place the text occurs in their concatenation.  NULL
 * when it does not occur there (the records belong to another text or another model). */
GArray *hanashi_token_spans_map (const char *text, GBytes *const *pieces, guint n_pieces);

/* How strongly a token chosen with probability @p is shaded: 0 (not at all, p >= 0.9)
 * to HANASHI_TOKEN_SHADE_LEVELS - 1 (p < 0.1). */
#define HANASHI_TOKEN_SHADE_LEVELS 5
int hanashi_token_shade_level (float p);

G_END_DECLS
