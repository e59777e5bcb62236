/* hn-kv-cache.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-kv-cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct HnKvCache {
  int n_layer, n_cells, kv_dim;
  HnKvCell *cells;
  /* global layers: [global layer][cell][kv_dim] values and, unless borrowed, keys in
   * tiles (k_tiled, see hn-kv-cache.h); in huge pages (hn_huge_alloc): at 4096 cells a
   * TinyLlama-shaped decode step reads 92 MB of them */
  uint16_t *k, *v;
  size_t k_bytes, v_bytes; /* when not borrowed */
  size_t k_layer_halves;   /* from one global layer's keys to the next */
  bool k_tiled;
  int search_start;      /* where the next find_slot starts, so cells are reused round-robin */
  /* sliding-window layers (none when window == 0) */
  int window, n_ring, n_sliding;
  int *group_index;      /* per layer: its index among the global or among the sliding layers */
  bool *sliding;         /* per layer */
  uint16_t *ring_k, *ring_v; /* [sliding layer][ring row][kv_dim], hn_huge_alloc'd */
  size_t ring_bytes;
  int32_t *ring_of_cell; /* per cell: its ring row, -1 none */
  int32_t *cell_of_ring; /* per ring row: its cell, -1 free */
  int ring_start;        /* round-robin start of the next ring search */
  const HnRope **ropes;  /* per layer, for seq_shift; NULL entries: the caller's */
  bool borrowed;         /* k and v belong to the caller (device-visible memory) */
};

HnKvCache *
hn_kv_cache_new (int n_layer, int n_cells, int kv_dim, HnError *err)
{
  return hn_kv_cache_new_windowed (n_layer, n_cells, kv_dim, NULL, 0, 0, err);
}

static HnKvCache *
kv_cache_new (int n_layer, int n_cells, int kv_dim, const bool *sliding, int window, int n_ring,
              uint16_t *k_storage, uint16_t *v_storage, HnError *err)
{
  if (n_layer <= 0 || n_cells <= 0 || kv_dim <= 0 || n_layer > 4096 || kv_dim > (1 << 20) ||
      n_cells > (1 << 22) || window < 0 || (window > 0 && (n_ring <= 0 || !sliding))) {
    hn_error_set (err, HN_ERR_INVALID_ARG, "invalid KV cache size: %d layers, %d cells, %d wide",
                  n_layer, n_cells, kv_dim);
    return NULL;
  }
  int n_sliding = 0;
  for (int l = 0; window > 0 && l < n_layer; l++)
    n_sliding += sliding[l];
  if (n_sliding == 0)
    window = 0;
  if (window == 0)
    n_ring = 0;
  else if (n_ring > n_cells)
    n_ring = n_cells;
  size_t n = (size_t) (n_layer - n_sliding) * (size_t) n_cells * (size_t) kv_dim;
  /* tiles are whole: the last one may have room for cells the table does not have */
  const bool k_tiled = k_storage == NULL;
  size_t k_cells = k_tiled ? ((size_t) n_cells + HN_KV_TILE - 1) / HN_KV_TILE * HN_KV_TILE : (size_t) n_cells;
  size_t n_k = (size_t) (n_layer - n_sliding) * k_cells * (size_t) kv_dim;
  size_t n_r = (size_t) n_sliding * (size_t) n_ring * (size_t) kv_dim;
  if (n_k + n_r > ((size_t) 1 << 36) / sizeof (uint16_t)) {
    hn_error_set (err, HN_ERR_NOMEM, "KV cache of %zu values is too large", n + n_r);
    return NULL;
  }
  HnKvCache *c = calloc (1, sizeof *c);
  bool ok = c != NULL;
  if (ok) {
    c->cells = malloc ((size_t) n_cells * sizeof *c->cells);
    c->borrowed = k_storage != NULL;
    c->k_tiled = k_tiled;
    c->k_layer_halves = k_cells * (size_t) kv_dim;
    c->k_bytes = n_k * sizeof (uint16_t);
    c->v_bytes = n * sizeof (uint16_t);
    c->k = k_storage ? k_storage : hn_huge_alloc (c->k_bytes);
    c->v = v_storage ? v_storage : hn_huge_alloc (c->v_bytes);
    c->group_index = calloc ((size_t) n_layer, sizeof *c->group_index);
    c->sliding = calloc ((size_t) n_layer, sizeof *c->sliding);
    c->ropes = calloc ((size_t) n_layer, sizeof *c->ropes);
    ok = c->cells && c->k && c->v && c->group_index && c->sliding && c->ropes;
    if (ok && window > 0) {
      c->ring_bytes = n_r * sizeof (uint16_t);
      c->ring_k = hn_huge_alloc (c->ring_bytes);
      c->ring_v = hn_huge_alloc (c->ring_bytes);
      c->ring_of_cell = malloc ((size_t) n_cells * sizeof *c->ring_of_cell);
      c->cell_of_ring = malloc ((size_t) n_ring * sizeof *c->cell_of_ring);
      ok = c->ring_k && c->ring_v && c->ring_of_cell && c->cell_of_ring;
    }
  }
  if (!ok) {
    hn_kv_cache_free (c);
    hn_error_set (err, HN_ERR_NOMEM, "cannot allocate a KV cache of %zu values", n_k + n + 2 * n_r);
    return NULL;
  }
  c->n_layer = n_layer;
  c->n_cells = n_cells;
  c->kv_dim = kv_dim;
  c->window = window;
  c->n_ring = n_ring;
  c->n_sliding = n_sliding;
  int n_global = 0, n_slid = 0;
  for (int l = 0; l < n_layer; l++) {
    c->sliding[l] = window > 0 && sliding[l];
    c->group_index[l] = c->sliding[l] ? n_slid++ : n_global++;
  }
  hn_kv_cache_clear (c);
  return c;
}

HnKvCache *
hn_kv_cache_new_windowed (int n_layer, int n_cells, int kv_dim, const bool *sliding, int window,
                          int n_ring, HnError *err)
{
  return kv_cache_new (n_layer, n_cells, kv_dim, sliding, window, n_ring, NULL, NULL, err);
}

HnKvCache *
hn_kv_cache_new_borrowed (int n_layer, int n_cells, int kv_dim, uint16_t *k, uint16_t *v, HnError *err)
{
  if (!k || !v) {
    hn_error_set (err, HN_ERR_INVALID_ARG, "a borrowed KV cache needs its key and value storage");
    return NULL;
  }
  return kv_cache_new (n_layer, n_cells, kv_dim, NULL, 0, 0, k, v, err);
}

void
hn_kv_cache_free (HnKvCache *c)
{
  if (!c)
    return;
  free (c->cells);
  if (!c->borrowed) {
    hn_huge_free (c->k, c->k_bytes);
    hn_huge_free (c->v, c->v_bytes);
  }
  free (c->group_index);
  free (c->sliding);
  free (c->ropes);
  hn_huge_free (c->ring_k, c->ring_bytes);
  hn_huge_free (c->ring_v, c->ring_bytes);
  free (c->ring_of_cell);
  free (c->cell_of_ring);
  free (c);
}

int hn_kv_cache_n_cells (const HnKvCache *c) { return c->n_cells; }
int hn_kv_cache_kv_dim (const HnKvCache *c) { return c->kv_dim; }
int hn_kv_cache_n_layer (const HnKvCache *c) { return c->n_layer; }
const HnKvCell *hn_kv_cache_cells (const HnKvCache *c) { return c->cells; }
int hn_kv_cache_window (const HnKvCache *c) { return c->window; }
int hn_kv_cache_n_ring (const HnKvCache *c) { return c->n_ring; }
bool hn_kv_cache_layer_sliding (const HnKvCache *c, int layer) { return c->sliding[layer]; }

void
hn_kv_cache_set_layer_rope (HnKvCache *c, int layer, const HnRope *rope)
{
  if (layer >= 0 && layer < c->n_layer)
    c->ropes[layer] = rope;
}

int
hn_kv_cache_n_used (const HnKvCache *c)
{
  int n = 0;
  for (int i = 0; i < c->n_cells; i++)
    n += c->cells[i].pos >= 0;
  return n;
}

void
hn_kv_cache_drop_window_rows (HnKvCache *c, int cell)
{
  if (c->window > 0 && cell >= 0 && cell < c->n_cells && c->ring_of_cell[cell] >= 0) {
    c->cell_of_ring[c->ring_of_cell[cell]] = -1;
    c->ring_of_cell[cell] = -1;
  }
}

/* Frees cell i and its ring row. */
static void
cell_free (HnKvCache *c, int i)
{
  c->cells[i].pos = -1;
  c->cells[i].seq_mask = 0;
  if (c->window > 0 && c->ring_of_cell[i] >= 0) {
    c->cell_of_ring[c->ring_of_cell[i]] = -1;
    c->ring_of_cell[i] = -1;
  }
}

void
hn_kv_cache_clear (HnKvCache *c)
{
  for (int i = 0; i < c->n_cells; i++) {
    c->cells[i].pos = -1;
    c->cells[i].seq_mask = 0;
  }
  if (c->window > 0) {
    for (int i = 0; i < c->n_cells; i++)
      c->ring_of_cell[i] = -1;
    for (int r = 0; r < c->n_ring; r++)
      c->cell_of_ring[r] = -1;
  }
  c->search_start = 0;
  c->ring_start = 0;
}

static uint32_t
mask_of (int seq)
{
  return seq < 0 ? UINT32_MAX : (seq < HN_KV_MAX_SEQ ? (uint32_t) 1u << seq : 0);
}

int32_t
hn_kv_cache_seq_pos_max (const HnKvCache *c, int seq)
{
  int32_t best = -1;
  for (int i = 0; i < c->n_cells; i++)
    if (c->cells[i].pos > best && (c->cells[i].seq_mask & mask_of (seq)))
      best = c->cells[i].pos;
  return best;
}

int32_t
hn_kv_cache_seq_resume_min (const HnKvCache *c, int seq)
{
  if (c->window == 0)
    return 0;
  int32_t newest_gone = -1;
  for (int i = 0; i < c->n_cells; i++)
    if (c->cells[i].pos > newest_gone && (c->cells[i].seq_mask & mask_of (seq)) && c->ring_of_cell[i] < 0)
      newest_gone = c->cells[i].pos;
  return newest_gone < 0 ? 0 : newest_gone + c->window;
}

/* Whether no sequence of cell i can see it any more: each of its sequences queries from
 * next_pos[s] on (the batch's first position, or one past the sequence's last). */
static bool
cell_out_of_window (const HnKvCache *c, int i, const int32_t next_pos[HN_KV_MAX_SEQ])
{
  for (int s = 0; s < HN_KV_MAX_SEQ; s++)
    if ((c->cells[i].seq_mask & (1u << s)) && next_pos[s] - c->cells[i].pos < c->window)
      return false;
  return true;
}

bool
hn_kv_cache_find_slot (HnKvCache *c, int n_tokens, const int32_t *pos, const int32_t *seq_id,
                       int32_t *cells_out, HnError *err)
{
  for (int t = 0; t < n_tokens; t++) {
    if (seq_id[t] < 0 || seq_id[t] >= HN_KV_MAX_SEQ)
      return hn_error_set (err, HN_ERR_INVALID_ARG, "sequence id %d out of range 0..%d",
                           seq_id[t], HN_KV_MAX_SEQ - 1);
    if (pos[t] < 0)
      return hn_error_set (err, HN_ERR_INVALID_ARG, "negative position %d", pos[t]);
  }
  int found = 0;
  for (int k = 0; k < c->n_cells && found < n_tokens; k++) {
    int i = (c->search_start + k) % c->n_cells;
    if (c->cells[i].pos < 0)
      cells_out[found++] = i;
  }
  if (found < n_tokens)
    return hn_error_set (err, HN_ERR_NOMEM, "context is full: %d tokens do not fit in %d free cells",
                         n_tokens, found);
  if (c->window > 0) {
    int32_t next_pos[HN_KV_MAX_SEQ];
    for (int s = 0; s < HN_KV_MAX_SEQ; s++)
      next_pos[s] = hn_kv_cache_seq_pos_max (c, s) + 1;
    bool in_batch[HN_KV_MAX_SEQ] = { false };
    for (int t = 0; t < n_tokens; t++) {
      int s = seq_id[t];
      if (!in_batch[s] || pos[t] < next_pos[s])
        next_pos[s] = pos[t];
      in_batch[s] = true;
    }
    int free_rows = 0, reusable = 0;
    for (int r = 0; r < c->n_ring; r++) {
      int cell = c->cell_of_ring[r];
      if (cell < 0)
        free_rows++;
      else if (cell_out_of_window (c, cell, next_pos))
        reusable++;
    }
    if (free_rows + reusable < n_tokens)
      return hn_error_set (err, HN_ERR_NOMEM, "the sliding-window cache is full: %d tokens do not "
                           "fit in %d rows", n_tokens, free_rows + reusable);
    /* rows are handed on only when needed, so going back within the ring stays possible */
    if (free_rows < n_tokens)
      for (int r = 0; r < c->n_ring; r++) {
        int cell = c->cell_of_ring[r];
        if (cell >= 0 && cell_out_of_window (c, cell, next_pos)) {
          c->ring_of_cell[cell] = -1;
          c->cell_of_ring[r] = -1;
        }
      }
    int given = 0, start = c->ring_start;
    for (int k = 0; k < c->n_ring && given < n_tokens; k++) {
      int r = (start + k) % c->n_ring;
      if (c->cell_of_ring[r] < 0) {
        c->cell_of_ring[r] = cells_out[given];
        c->ring_of_cell[cells_out[given]] = r;
        given++;
        c->ring_start = (r + 1) % c->n_ring;
      }
    }
  }
  for (int t = 0; t < n_tokens; t++) {
    c->cells[cells_out[t]].pos = pos[t];
    c->cells[cells_out[t]].seq_mask = (uint32_t) 1u << seq_id[t];
  }
  if (n_tokens > 0)
    c->search_start = (cells_out[n_tokens - 1] + 1) % c->n_cells;
  return true;
}

static bool
in_range (int32_t p, int32_t p0, int32_t p1)
{
  return p >= (p0 < 0 ? 0 : p0) && (p1 < 0 || p < p1);
}

void
hn_kv_cache_seq_rm (HnKvCache *c, int seq, int32_t p0, int32_t p1)
{
  uint32_t m = mask_of (seq);
  for (int i = 0; i < c->n_cells; i++) {
    HnKvCell *cell = &c->cells[i];
    if (cell->pos >= 0 && (cell->seq_mask & m) && in_range (cell->pos, p0, p1)) {
      cell->seq_mask &= ~m;
      if (!cell->seq_mask)
        cell_free (c, i);
    }
  }
}

void
hn_kv_cache_seq_cp (HnKvCache *c, int src, int dst, int32_t p0, int32_t p1)
{
  if (src < 0 || src >= HN_KV_MAX_SEQ || dst < 0 || dst >= HN_KV_MAX_SEQ)
    return;
  for (int i = 0; i < c->n_cells; i++) {
    HnKvCell *cell = &c->cells[i];
    if (cell->pos >= 0 && (cell->seq_mask & mask_of (src)) && in_range (cell->pos, p0, p1))
      cell->seq_mask |= mask_of (dst);
  }
}

void
hn_kv_cache_seq_keep (HnKvCache *c, int seq)
{
  uint32_t m = mask_of (seq);
  for (int i = 0; i < c->n_cells; i++) {
    HnKvCell *cell = &c->cells[i];
    cell->seq_mask &= m;
    if (!cell->seq_mask)
      cell_free (c, i);
  }
}

int
hn_kv_cache_row_of (const HnKvCache *c, int layer, int cell)
{
  return c->sliding[layer] ? c->ring_of_cell[cell] : cell;
}

bool
hn_kv_cache_k_tiled (const HnKvCache *c, int layer)
{
  return c->k_tiled && !c->sliding[layer];
}

uint16_t *
hn_kv_cache_k_data (HnKvCache *c, int layer)
{
  size_t g = (size_t) c->group_index[layer];
  return c->sliding[layer] ? c->ring_k + g * (size_t) c->n_ring * (size_t) c->kv_dim : c->k + g * c->k_layer_halves;
}

uint16_t *
hn_kv_cache_v_data (HnKvCache *c, int layer)
{
  size_t g = (size_t) c->group_index[layer];
  return c->sliding[layer] ? c->ring_v + g * (size_t) c->n_ring * (size_t) c->kv_dim
                           : c->v + g * (size_t) c->n_cells * (size_t) c->kv_dim;
}

uint16_t *
hn_kv_cache_v_row (HnKvCache *c, int layer, int cell)
{
  int row = hn_kv_cache_row_of (c, layer, cell);
  return row < 0 ? NULL : hn_kv_cache_v_data (c, layer) + (size_t) row * (size_t) c->kv_dim;
}

/* Where value j of the cell's key is, and how far apart consecutive values are. */
static uint16_t *
k_value (HnKvCache *c, int layer, int cell, size_t *step)
{
  if (hn_kv_cache_k_tiled (c, layer)) {
    *step = HN_KV_TILE;
    return hn_kv_cache_k_data (c, layer) + (size_t) (cell / HN_KV_TILE) * HN_KV_TILE * (size_t) c->kv_dim +
           (size_t) (cell % HN_KV_TILE);
  }
  int row = hn_kv_cache_row_of (c, layer, cell);
  *step = 1;
  return row < 0 ? NULL : hn_kv_cache_k_data (c, layer) + (size_t) row * (size_t) c->kv_dim;
}

bool
hn_kv_cache_read_k (HnKvCache *c, int layer, int cell, int first, int count, uint16_t *dst)
{
  size_t step;
  const uint16_t *k = k_value (c, layer, cell, &step);
  if (!k)
    return false;
  for (int j = 0; j < count; j++)
    dst[j] = k[(size_t) (first + j) * step];
  return true;
}

bool
hn_kv_cache_write_k (HnKvCache *c, int layer, int cell, const uint16_t *src)
{
  size_t step;
  uint16_t *k = k_value (c, layer, cell, &step);
  if (!k)
    return false;
  for (int j = 0; j < c->kv_dim; j++)
    k[(size_t) j * step] = src[j];
  return true;
}

void
hn_rope_apply (const HnRope *rope, float *x, int n_head, float pos)
{
  int half = rope->n_rot / 2;
  for (int i = 0; i < half; i++) {
    /* The angle in double: positions reach 1e5 and a float angle would lose digits. */
    double freq = pow ((double) rope->freq_base, -2.0 * i / rope->n_rot) * rope->freq_scale;
    if (rope->freq_factors)
      freq /= rope->freq_factors[i];
    double theta = (double) pos * freq;
    float mscale = rope->attn_factor > 0.0f ? rope->attn_factor : 1.0f;
    float cs = (float) cos (theta) * mscale, sn = (float) sin (theta) * mscale;
    for (int h = 0; h < n_head; h++) {
      float *hx = x + (size_t) h * rope->head_dim;
      int a = rope->neox ? i : 2 * i;
      int b = rope->neox ? i + half : 2 * i + 1;
      float x0 = hx[a], x1 = hx[b];
      hx[a] = x0 * cs - x1 * sn;
      hx[b] = x0 * sn + x1 * cs;
    }
  }
}

void
hn_kv_cache_seq_shift (HnKvCache *c, int seq, int32_t p0, int32_t p1, int32_t delta,
                       const HnRope *rope)
{
  if (delta == 0)
    return;
  uint32_t m = mask_of (seq);
  int n_head = c->kv_dim / rope->head_dim;
  float *tmp = malloc ((size_t) c->kv_dim * sizeof (float));
  uint16_t *row = malloc ((size_t) c->kv_dim * sizeof *row);
  if (!tmp || !row) {
    free (tmp);
    free (row);
    return;
  }
  for (int i = 0; i < c->n_cells; i++) {
    HnKvCell *cell = &c->cells[i];
    if (cell->pos < 0 || !(cell->seq_mask & m) || !in_range (cell->pos, p0, p1))
      continue;
    int64_t np = (int64_t) cell->pos + delta;
    if (np < 0) {
      cell_free (c, i);
      continue;
    }
    cell->pos = (int32_t) np;
    for (int l = 0; l < c->n_layer; l++) {
      if (!hn_kv_cache_read_k (c, l, i, 0, c->kv_dim, row))
        continue;
      /* a further rotation only: the attention factor is already in the stored keys */
      HnRope turn = *(c->ropes[l] ? c->ropes[l] : rope);
      turn.attn_factor = 1.0f;
      for (int j = 0; j < c->kv_dim; j++)
        tmp[j] = hn_fp16_to_fp32 (row[j]);
      hn_rope_apply (&turn, tmp, n_head, (float) delta);
      for (int j = 0; j < c->kv_dim; j++)
        row[j] = hn_fp32_to_fp16 (tmp[j]);
      hn_kv_cache_write_k (c, l, i, row);
    }
  }
  free (tmp);
  free (row);
}
