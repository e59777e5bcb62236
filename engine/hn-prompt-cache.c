/* hn-prompt-cache.c — see hn-prompt-cache.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-prompt-cache.h"

#include "hn-gguf.h"
#include "hn-kv-cache.h"
#include "hn-model.h"

#include <stdlib.h>
#include <string.h>

bool
hn_prompt_cache_params (HnContext *ctx, HnSessionParams *out, HnError *err)
{
  const HnGguf *gguf = hn_model_gguf (hn_context_model (ctx));
  HnKvCache *kv = hn_context_kv (ctx);
  const HnRope *rope = hn_context_rope (ctx);
  if (gguf == NULL || kv == NULL || rope == NULL)
    return hn_error_set (err, HN_ERR_INVALID_ARG, "the context has no model or KV cache");
  *out = (HnSessionParams){
    .model_fingerprint = hn_session_fingerprint (hn_gguf_bytes (gguf), hn_gguf_data_offset (gguf)),
    .kv_type = HN_SESSION_KV_F16,
    .n_layer = (uint32_t) hn_kv_cache_n_layer (kv),
    .n_embd_k = (uint32_t) hn_kv_cache_kv_dim (kv),
    .n_embd_v = (uint32_t) hn_kv_cache_kv_dim (kv),
    /* the rotation already applied to stored keys: style, rotated width and whether
     * per-dimension factors were in use; which ones (Phi-3 long or short) depends on the
     * context size, so it is a bit of its own beside the model fingerprint */
    .rope_type = (rope->neox ? 1u : 0u) | ((uint32_t) rope->n_rot << 1) | (hn_context_rope_factor_set (ctx) << 24),
    .rope_freq_base = rope->freq_base,
    .rope_freq_scale = rope->freq_scale,
  };
  return true;
}

typedef struct {
  HnKvCache *kv;
  const int32_t *cell_of_pos; /* cell holding sequence 0's position i */
  uint16_t *key;              /* one key row, copied out of the cache's layout */
} SaveRows;

static const void *
save_row (void *user, uint32_t layer, bool is_v, uint32_t i)
{
  const SaveRows *s = user;
  int cell = s->cell_of_pos[i];
  /* NULL for a sliding layer's row already handed on: the file records where rows start */
  if (is_v)
    return hn_kv_cache_v_row (s->kv, (int) layer, cell);
  return hn_kv_cache_read_k (s->kv, (int) layer, cell, 0, hn_kv_cache_kv_dim (s->kv), s->key) ? s->key : NULL;
}

bool
hn_prompt_cache_save (HnContext *ctx, const char *path, const int32_t *tokens, uint32_t n_tokens,
                      HnError *err)
{
  HnSessionParams params;
  if (!hn_prompt_cache_params (ctx, &params, err))
    return false;
  HnKvCache *kv = hn_context_kv (ctx);
  int n_cells = hn_kv_cache_n_cells (kv);
  if (n_tokens > (uint32_t) n_cells)
    return hn_error_set (err, HN_ERR_INVALID_ARG, "%u tokens cannot be in a cache of %d cells", n_tokens, n_cells);
  int32_t *cell_of_pos = malloc (sizeof *cell_of_pos * (n_tokens ? n_tokens : 1));
  if (cell_of_pos == NULL)
    return hn_error_set (err, HN_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; i < n_tokens; i++)
    cell_of_pos[i] = -1;
  const HnKvCell *cells = hn_kv_cache_cells (kv);
  for (int c = 0; c < n_cells; c++)
    if ((cells[c].seq_mask & 1u) && cells[c].pos >= 0 && (uint32_t) cells[c].pos < n_tokens)
      cell_of_pos[cells[c].pos] = c;
  for (uint32_t i = 0; i < n_tokens; i++)
    if (cell_of_pos[i] < 0) {
      free (cell_of_pos);
      return hn_error_set (err, HN_ERR_INVALID_ARG,
                           "position %u of the conversation is not in the KV cache; nothing was saved", i);
    }
  SaveRows rows = { kv, cell_of_pos, malloc ((size_t) hn_kv_cache_kv_dim (kv) * sizeof (uint16_t)) };
  bool ok = rows.key != NULL
                ? hn_session_write (path, &params, tokens, n_tokens, save_row, &rows, err)
                : hn_error_set (err, HN_ERR_NOMEM, "out of memory");
  free (rows.key);
  free (cell_of_pos);
  return ok;
}

bool
hn_prompt_cache_load (HnContext *ctx, const char *path, const int32_t *prompt, uint32_t n_prompt,
                      uint32_t *n_reused, HnError *err)
{
  *n_reused = 0;
  HnKvCache *kv = hn_context_kv (ctx);
  hn_kv_cache_clear (kv);
  HnSessionParams params;
  if (!hn_prompt_cache_params (ctx, &params, err))
    return false;
  HnSession *session = hn_session_read (path, &params, err);
  if (session == NULL)
    return false;
  uint32_t n_file = 0;
  const int32_t *file_tokens = hn_session_tokens (session, &n_file);
  uint32_t n = hn_session_common_prefix (file_tokens, n_file, prompt, n_prompt);
  if (n > (uint32_t) hn_kv_cache_n_cells (kv))
    n = (uint32_t) hn_kv_cache_n_cells (kv);
  /* Rows the saving cache no longer had: the restored prefix must still reach a window
   * past them, so that evaluating its last token again (as hn_generate does) sees only
   * keys that are there. */
  uint32_t rows_from = hn_session_rows_from (session), window = (uint32_t) hn_kv_cache_window (kv);
  if (rows_from > 0 && n > 0 && (window == 0 || n < rows_from + window))
    {
      hn_session_free (session);
      return hn_error_set (err, HN_ERR_FORMAT,
                           "the sliding-window keys of the first %u tokens were no longer saved and "
                           "the %u tokens in common do not reach a window past them", rows_from, n);
    }
  /* an emptied cache hands out cells 0, 1, 2... in order: the fresh-evaluation layout;
   * a batch at a time, so that a sliding-window ring hands on rows as evaluation would */
  uint32_t chunk = (uint32_t) hn_context_n_batch (ctx);
  int32_t *pos = malloc (sizeof *pos * (chunk ? chunk : 1));
  int32_t *seq = calloc (chunk ? chunk : 1, sizeof *seq);
  int32_t *slot = malloc (sizeof *slot * (chunk ? chunk : 1));
  bool ok = pos && seq && slot;
  if (!ok)
    hn_error_set (err, HN_ERR_NOMEM, "out of memory");
  size_t row_bytes = (size_t) hn_kv_cache_kv_dim (kv) * 2;
  int n_layer = hn_kv_cache_n_layer (kv);
  for (uint32_t i0 = 0; ok && i0 < n; i0 += chunk)
    {
      uint32_t nc = n - i0 < chunk ? n - i0 : chunk;
      for (uint32_t i = 0; i < nc; i++)
        pos[i] = (int32_t) (i0 + i);
      ok = hn_kv_cache_find_slot (kv, (int) nc, pos, seq, slot, err);
      for (uint32_t i = 0; ok && i < nc; i++)
        {
          if (i0 + i < rows_from)
            hn_kv_cache_drop_window_rows (kv, slot[i]);
          for (int l = 0; l < n_layer; l++)
            {
              uint16_t *v = hn_kv_cache_v_row (kv, l, slot[i]);
              if (v == NULL)
                continue; /* a sliding layer's row that the window has already passed */
              hn_kv_cache_write_k (kv, l, slot[i], hn_session_row (session, (uint32_t) l, false, i0 + i));
              memcpy (v, hn_session_row (session, (uint32_t) l, true, i0 + i), row_bytes);
            }
        }
    }
  if (ok)
    *n_reused = n;
  else
    hn_kv_cache_clear (kv);
  free (pos);
  free (seq);
  free (slot);
  hn_session_free (session);
  return ok;
}
