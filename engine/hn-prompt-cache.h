/* hn-prompt-cache.h — a context's conversation (sequence 0) saved to and restored from a
 * session file (hn-session.h), so that a conversation reopened later evaluates only what
 * changed.
 *
 * Saving writes the tokens of sequence 0 at positions 0..n-1 and their K/V rows, nothing
 * else.  Loading compares the file's tokens with the new prompt and restores the longest
 * common prefix into an emptied context, in cells 0..k-1 in position order, which is the
 * layout a fresh evaluation produces: continuing from a loaded prefix then gives the same
 * logits, bit for bit, as never having stopped (same thread count).
 *
 * With sliding-window layers the file holds only the window rows the cache still had
 * (zeros before hn_session_rows_from); a prefix is restored only when it reaches a window
 * past the missing rows, and the ring is filled a batch at a time as evaluation fills it.
 *
 * A file that is missing, stale, truncated, corrupt, from another model or from other
 * context settings never restores anything: the caller re-evaluates from text.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hn-common.h"
#include "hn-context.h"
#include "hn-session.h"

/* What the KV rows of this context depend on: the model's fingerprint (its GGUF metadata and
 * tensor table), the cache layout and the rotation settings. */
bool hn_prompt_cache_params (HnContext *ctx, HnSessionParams *out, HnError *err);

/* Empties the context, then restores from `path` the longest common prefix of the file's
 * tokens and prompt[0 .. n_prompt) as sequence 0.  *n_reused is the number of tokens
 * restored (0 on failure).  Returns false, with err saying why, when the file cannot be used;
 * the context is then empty.  At most n_prompt tokens are restored; hn_generate evaluates
 * the last prompt token again anyway to get its logits. */
bool hn_prompt_cache_load (HnContext *ctx, const char *path, const int32_t *prompt, uint32_t n_prompt,
                           uint32_t *n_reused, HnError *err);

/* Writes tokens[0 .. n_tokens) and their rows, which must be sequence 0's cells at positions
 * 0 .. n_tokens-1, atomically to `path`.  On failure the previous file stays as it was. */
bool hn_prompt_cache_save (HnContext *ctx, const char *path, const int32_t *tokens, uint32_t n_tokens,
                           HnError *err);
