#include "hn-kv-cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct HnKvCache {
  int n_layer, n_cells, kv_dim;
  HnKvCell *cells;
  uint16_t *k, *v;
  int search_start; /* where the next find_slot starts, so cells are reused round-robin */
};

HnKvCache *
hn_kv_cache_new (int n_layer, int n_cells, int kv_dim, HnError *err)
{
  if (n_layer <= 0 || n_cells <= 0 || kv_dim <= 0 || n_layer > 4096 || kv_dim > (1 << 20) ||
      n_cells > (1 << 22)) {
    hn_error_set (err, HN_ERR_INVALID_ARG, "invalid KV cache size: %d layers, %d cells, %d wide",
                  n_layer, n_cells, kv_dim);
    return NULL;
  }
  size_t n = (size_t) n_layer * (size_t) n_cells * (size_t) kv_dim;
  if (n > ((size_t) 1 << 36) / sizeof (uint16_t)) {
    hn_error_set (err, HN_ERR_NOMEM, "KV cache of %zu values is too large", n);
    return NULL;
  }
  HnKvCache *c = calloc (1, sizeof *c);
  if (c) {
    c->cells = malloc ((size_t) n_cells * sizeof *c->cells);
    c->k = calloc (n, sizeof (uint16_t));
    c->v = calloc (n, sizeof (uint16_t));
  }
  if (!c || !c->cells || !c->k || !c->v) {
    hn_kv_cache_free (c);
    hn_error_set (err, HN_ERR_NOMEM, "cannot allocate a KV cache of %zu values", 2 * n);
    return NULL;
  }
  c->n_layer = n_layer;
  c->n_cells = n_cells;
  c->kv_dim = kv_dim;
  hn_kv_cache_clear (c);
  return c;
}

void
hn_kv_cache_free (HnKvCache *c)
{
  if (!c)
    return;
  free (c->cells);
  free (c->k);
  free (c->v);
  free (c);
}

int hn_kv_cache_n_cells (const HnKvCache *c) { return c->n_cells; }
int hn_kv_cache_kv_dim (const HnKvCache *c) { return c->kv_dim; }
int hn_kv_cache_n_layer (const HnKvCache *c) { return c->n_layer; }
const HnKvCell *hn_kv_cache_cells (const HnKvCache *c) { return c->cells; }

int
hn_kv_cache_n_used (const HnKvCache *c)
{
  int n = 0;
  for (int i = 0; i < c->n_cells; i++)
    n += c->cells[i].pos >= 0;
  return n;
}

void
hn_kv_cache_clear (HnKvCache *c)
{
  for (int i = 0; i < c->n_cells; i++) {
    c->cells[i].pos = -1;
    c->cells[i].seq_mask = 0;
  }
  c->search_start = 0;
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
  for (int t = 0; t < n_tokens; t++) {
    c->cells[cells_out[t]].pos = pos[t];
    c->cells[cells_out[t]].seq_mask = (uint8_t) (1u << seq_id[t]);
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

static uint8_t
mask_of (int seq)
{
  return seq < 0 ? 0xff : (seq < HN_KV_MAX_SEQ ? (uint8_t) (1u << seq) : 0);
}

void
hn_kv_cache_seq_rm (HnKvCache *c, int seq, int32_t p0, int32_t p1)
{
  uint8_t m = mask_of (seq);
  for (int i = 0; i < c->n_cells; i++) {
    HnKvCell *cell = &c->cells[i];
    if (cell->pos >= 0 && (cell->seq_mask & m) && in_range (cell->pos, p0, p1)) {
      cell->seq_mask &= (uint8_t) ~m;
      if (!cell->seq_mask)
        cell->pos = -1;
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
  uint8_t m = mask_of (seq);
  for (int i = 0; i < c->n_cells; i++) {
    HnKvCell *cell = &c->cells[i];
    cell->seq_mask &= m;
    if (!cell->seq_mask)
      cell->pos = -1;
  }
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

uint16_t *
hn_kv_cache_k_row (HnKvCache *c, int layer, int cell)
{
  return c->k + ((size_t) layer * (size_t) c->n_cells + (size_t) cell) * (size_t) c->kv_dim;
}

uint16_t *
hn_kv_cache_v_row (HnKvCache *c, int layer, int cell)
{
  return c->v + ((size_t) layer * (size_t) c->n_cells + (size_t) cell) * (size_t) c->kv_dim;
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
    float cs = (float) cos (theta), sn = (float) sin (theta);
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
  uint8_t m = mask_of (seq);
  int n_head = c->kv_dim / rope->head_dim;
  float *tmp = malloc ((size_t) c->kv_dim * sizeof (float));
  if (!tmp)
    return;
  for (int i = 0; i < c->n_cells; i++) {
    HnKvCell *cell = &c->cells[i];
    if (cell->pos < 0 || !(cell->seq_mask & m) || !in_range (cell->pos, p0, p1))
      continue;
    int64_t np = (int64_t) cell->pos + delta;
    if (np < 0) {
      cell->pos = -1;
      cell->seq_mask = 0;
      continue;
    }
    cell->pos = (int32_t) np;
    for (int l = 0; l < c->n_layer; l++) {
      uint16_t *k = hn_kv_cache_k_row (c, l, i);
      for (int j = 0; j < c->kv_dim; j++)
        tmp[j] = hn_fp16_to_fp32 (k[j]);
      hn_rope_apply (rope, tmp, n_head, (float) delta);
      for (int j = 0; j < c->kv_dim; j++)
        k[j] = hn_fp32_to_fp16 (tmp[j]);
    }
  }
  free (tmp);
}
