/* KV cache: a pool of cells, each holding one token's keys and values for every layer.
 *
 * Layout (also read by hn-session.c): K and V are separate arrays of IEEE half floats,
 * indexed [layer][cell][kv_dim] with kv_dim = n_head_kv * head_dim, the heads of one
 * cell contiguous.  Keys are stored after RoPE at the cell's position.  A cell is free
 * when its pos is -1; seq_mask has bit s set when sequence s (0..HN_KV_MAX_SEQ-1) sees it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include "hn-common.h"

#define HN_KV_MAX_SEQ 8

typedef struct {
  int32_t pos;
  uint8_t seq_mask;
} HnKvCell;

/* How stored keys were rotated, so that seq_shift can rotate them further. */
typedef struct {
  int head_dim;
  int n_rot;                 /* leading dimensions of each head that are rotated */
  float freq_base;
  float freq_scale;          /* 1/linear factor */
  bool neox;                 /* pairs (i, i + n_rot/2) instead of (2i, 2i+1) */
  const float *freq_factors; /* n_rot/2 divisors (llama3 rope_freqs) or NULL */
} HnRope;

typedef struct HnKvCache HnKvCache;

HnKvCache *hn_kv_cache_new (int n_layer, int n_cells, int kv_dim, HnError *err);
void hn_kv_cache_free (HnKvCache *cache);

int hn_kv_cache_n_cells (const HnKvCache *cache);
int hn_kv_cache_kv_dim (const HnKvCache *cache);
int hn_kv_cache_n_layer (const HnKvCache *cache);
const HnKvCell *hn_kv_cache_cells (const HnKvCache *cache);
int hn_kv_cache_n_used (const HnKvCache *cache);

/* Claims one free cell per token, sets its pos and sequence bit, writes the cell
 * indexes to cells_out.  Fails without changing anything if there is no room. */
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

/* Raw half-float rows of kv_dim values. */
uint16_t *hn_kv_cache_k_row (HnKvCache *cache, int layer, int cell);
uint16_t *hn_kv_cache_v_row (HnKvCache *cache, int layer, int cell);

/* Rotates x[head_dim * n_head] in place by position pos (used for fresh keys/queries too). */
void hn_rope_apply (const HnRope *rope, float *x, int n_head, float pos);
