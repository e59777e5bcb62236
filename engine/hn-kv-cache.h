/* KV cache: a table of cells, each one token of one or more sequences, and their keys and
 * values for every layer.
 *
 * Layout: K and V are separate arrays of IEEE half floats, kv_dim = n_head_kv * head_dim
 * values per (layer, cell), the heads of a cell's values contiguous.  V holds one such row
 * per cell.  K does too in a borrowed cache (the Vulkan offload's layout) and in
 * sliding-window layers, but a global layer of a cache that owns its storage keeps its keys
 * in tiles of HN_KV_TILE consecutive cells, [tile][kv_dim][HN_KV_TILE]: value j of the
 * tile's cells side by side (hn_kv_cache_k_tiled).  Decode scores one query head against a
 * tile as a row of HN_KV_TILE products, a vector, with no key conversion staged through
 * memory and no sums across lanes (docs/speed.md, "Long context, fifth round").  Keys
 * are read and written one cell at a time through hn_kv_cache_read_k / write_k, in rows,
 * whatever the layout (session files store rows).  Keys are stored after RoPE at the
 * cell's position.  A cell is free when its pos is -1; seq_mask has bit s set when
 * sequence s (0..HN_KV_MAX_SEQ-1) sees it.
 *
 * Sliding-window layers (gemma2/3, phi3) keep their rows in a smaller ring of n_ring rows
 * instead: a query at position p only sees keys at p - window + 1 .. p, so when the ring
 * is full, the rows of cells that no sequence can see any more (older than a window
 * before the sequence's next position) are handed to new tokens.  The cell itself stays
 * in the table for the global layers (and for positions and sequences), but its sliding
 * rows are gone: evaluation can no longer go back to before such a cell plus a window
 * (hn_kv_cache_seq_resume_min).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include "hn-common.h"

#define HN_KV_MAX_SEQ 32
/* Cells per tile of a tiled layer's keys. */
#define HN_KV_TILE 16

typedef struct {
  int32_t pos;
  uint32_t seq_mask;
} HnKvCell;

/* How stored keys were rotated, so that seq_shift can rotate them further. */
typedef struct {
  int head_dim;
  int n_rot;                 /* leading dimensions of each head that are rotated */
  float freq_base;
  float freq_scale;          /* 1/linear factor */
  bool neox;                 /* pairs (i, i + n_rot/2) instead of (2i, 2i+1) */
  const float *freq_factors; /* n_rot/2 divisors (llama3 rope_freqs, Phi-3 long/short) or NULL */
  float attn_factor;         /* multiplies cos and sin (Phi-3 long rope); 0 means 1 */
} HnRope;

typedef struct HnKvCache HnKvCache;

HnKvCache *hn_kv_cache_new (int n_layer, int n_cells, int kv_dim, HnError *err);
/* sliding[layer] marks the layers that attend through a window of `window` tokens; their
 * rows live in a ring of n_ring rows (n_ring >= n_cells: never reused, a pure mask). */
HnKvCache *hn_kv_cache_new_windowed (int n_layer, int n_cells, int kv_dim, const bool *sliding,
                                     int window, int n_ring, HnError *err);
/* Without a sliding window, over storage the caller owns and keeps alive until the cache
 * is freed: k and v hold n_layer * n_cells * kv_dim half floats each, in the layout above
 * (the Vulkan offload puts them in memory that both the processor and the device see).
 * Their contents are not cleared. */
HnKvCache *hn_kv_cache_new_borrowed (int n_layer, int n_cells, int kv_dim, uint16_t *k, uint16_t *v,
                                     HnError *err);
void hn_kv_cache_free (HnKvCache *cache);

int hn_kv_cache_n_cells (const HnKvCache *cache);
int hn_kv_cache_kv_dim (const HnKvCache *cache);
int hn_kv_cache_n_layer (const HnKvCache *cache);
const HnKvCell *hn_kv_cache_cells (const HnKvCache *cache);
int hn_kv_cache_n_used (const HnKvCache *cache);

/* Claims one free cell per token, sets its pos and sequence bit, writes the cell
 * indexes to cells_out.  Fails without changing anything if there is no room.  With a
 * sliding window, each token also gets a ring row; when the ring is full, the rows of
 * cells that are out of every one of their sequences' windows are handed on, a sequence's
 * window ending at its lowest position in this batch (or one past its last cell). */
bool hn_kv_cache_find_slot (HnKvCache *cache, int n_tokens, const int32_t *pos,
                            const int32_t *seq_id, int32_t *cells_out, HnError *err);

/* Ranges are [p0, p1); p0 < 0 means 0, p1 < 0 means no end; seq < 0 means every sequence. */
void hn_kv_cache_seq_rm (HnKvCache *cache, int seq, int32_t p0, int32_t p1);
void hn_kv_cache_seq_cp (HnKvCache *cache, int src, int dst, int32_t p0, int32_t p1);
void hn_kv_cache_seq_keep (HnKvCache *cache, int seq);
/* Adds delta to the positions and rotates the stored keys by delta; cells whose
 * position would become negative are freed. */
void hn_kv_cache_seq_shift (HnKvCache *cache, int seq, int32_t p0, int32_t p1, int32_t delta,
                            const HnRope *rope);
/* Highest position of seq, or -1 when it has no cells. */
int32_t hn_kv_cache_seq_pos_max (const HnKvCache *cache, int seq);
void hn_kv_cache_clear (HnKvCache *cache);

/* The cell's value row (kv_dim half floats); NULL for a sliding layer's row that was
 * reused. */
uint16_t *hn_kv_cache_v_row (HnKvCache *cache, int layer, int cell);
/* Copies values first .. first + count - 1 of the cell's key to dst / the cell's whole
 * key (kv_dim values) from src; false (nothing copied) for a sliding layer's row that was
 * reused. */
bool hn_kv_cache_read_k (HnKvCache *cache, int layer, int cell, int first, int count, uint16_t *dst);
bool hn_kv_cache_write_k (HnKvCache *cache, int layer, int cell, const uint16_t *src);
/* Whether the layer's keys are in tiles (see the layout above). */
bool hn_kv_cache_k_tiled (const HnKvCache *cache, int layer);

/* The sliding window (0: none), the ring size and whether a layer uses them. */
int hn_kv_cache_window (const HnKvCache *cache);
int hn_kv_cache_n_ring (const HnKvCache *cache);
bool hn_kv_cache_layer_sliding (const HnKvCache *cache, int layer);
/* Where the layer's values and keys start (value row r at r * kv_dim; key row r likewise,
 * or tile t at t * HN_KV_TILE * kv_dim when tiled) and which row holds a cell: the cell
 * itself for global layers, its ring row for sliding ones, -1 when that row was reused. */
uint16_t *hn_kv_cache_k_data (HnKvCache *cache, int layer);
uint16_t *hn_kv_cache_v_data (HnKvCache *cache, int layer);
int hn_kv_cache_row_of (const HnKvCache *cache, int layer, int cell);
/* The lowest position n from which sequence seq can be evaluated further while keeping its
 * cells below n: 0 unless sliding rows were reused, else one window past the newest cell
 * whose rows are gone.  Evaluating from a lower position needs a cleared sequence. */
int32_t hn_kv_cache_seq_resume_min (const HnKvCache *cache, int seq);
/* Gives the cell's sliding-window rows back, as if they had been reused (a restored
 * session whose file no longer had them). */
void hn_kv_cache_drop_window_rows (HnKvCache *cache, int cell);
/* How a layer's stored keys were rotated, for seq_shift (layers without one use the
 * rope passed to seq_shift). */
void hn_kv_cache_set_layer_rope (HnKvCache *cache, int layer, const HnRope *rope);

/* Rotates x[head_dim * n_head] in place by position pos (used for fresh keys/queries too). */
void hn_rope_apply (const HnRope *rope, float *x, int n_head, float pos);
