/* test-kv-cache.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <math.h>
#include "hn-kv-cache.h"

static void
test_cell_ops (void)
{
  HnError err = {0};
  HnKvCache *c = hn_kv_cache_new (2, 8, 4, &err);
  g_assert_nonnull (c);
  int32_t pos[5] = {0, 1, 2, 0, 1}, seq[5] = {0, 0, 0, 1, 1}, cells[5];
  g_assert_true (hn_kv_cache_find_slot (c, 5, pos, seq, cells, &err));
  g_assert_cmpint (hn_kv_cache_n_used (c), ==, 5);
  g_assert_cmpint (hn_kv_cache_seq_pos_max (c, 0), ==, 2);
  g_assert_cmpint (hn_kv_cache_seq_pos_max (c, 1), ==, 1);
  int32_t more[4] = {3, 4, 5, 6}, s0[4] = {0, 0, 0, 0};
  g_assert_false (hn_kv_cache_find_slot (c, 4, more, s0, cells, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_NOMEM);
  g_assert_cmpint (hn_kv_cache_n_used (c), ==, 5);
  int32_t bad_seq[1] = {HN_KV_MAX_SEQ};
  g_assert_false (hn_kv_cache_find_slot (c, 1, more, bad_seq, cells, &err));

  hn_kv_cache_seq_cp (c, 0, 2, 0, 2);
  g_assert_cmpint (hn_kv_cache_seq_pos_max (c, 2), ==, 1);
  hn_kv_cache_seq_rm (c, 0, 1, -1);
  g_assert_cmpint (hn_kv_cache_seq_pos_max (c, 0), ==, 0);
  g_assert_cmpint (hn_kv_cache_n_used (c), ==, 4); /* pos 1 still used by seq 2, pos 2 freed */
  hn_kv_cache_seq_keep (c, 1);
  g_assert_cmpint (hn_kv_cache_n_used (c), ==, 2);
  g_assert_cmpint (hn_kv_cache_seq_pos_max (c, 0), ==, -1);
  hn_kv_cache_clear (c);
  g_assert_cmpint (hn_kv_cache_n_used (c), ==, 0);
  hn_kv_cache_free (c);
  g_assert_null (hn_kv_cache_new (0, 8, 4, &err));
}

static void
test_shift_rotates_keys (void)
{
  HnError err = {0};
  const int head_dim = 8, n_head = 2, kv_dim = head_dim * n_head;
  uint16_t k_rows[4 * 16], v_rows[4 * 16];
  for (int neox = 0; neox < 2; neox++)
    for (int borrowed = 0; borrowed < 2; borrowed++) {
      HnRope rope = {head_dim, head_dim, 10000.0f, 1.0f, neox, NULL};
      HnKvCache *c = borrowed ? hn_kv_cache_new_borrowed (1, 4, kv_dim, k_rows, v_rows, &err)
                              : hn_kv_cache_new (1, 4, kv_dim, &err);
      g_assert_nonnull (c);
      g_assert_true (hn_kv_cache_k_tiled (c, 0) == !borrowed);
      int32_t pos[2] = {10, 11}, seq[2] = {0, 0}, cell[2];
      g_assert_true (hn_kv_cache_find_slot (c, 2, pos, seq, cell, &err));
      float x[16], want[16];
      uint16_t k[16], other[16], back[16];
      for (int i = 0; i < kv_dim; i++) {
        x[i] = want[i] = sinf ((float) i + 0.5f);
        other[i] = hn_fp32_to_fp16 ((float) i);
      }
      hn_rope_apply (&rope, x, n_head, 10);
      hn_rope_apply (&rope, want, n_head, 3);
      for (int i = 0; i < kv_dim; i++)
        k[i] = hn_fp32_to_fp16 (x[i]);
      g_assert_true (hn_kv_cache_write_k (c, 0, cell[0], k));
      g_assert_true (hn_kv_cache_write_k (c, 0, cell[1], other));
      /* only position 10 moves */
      hn_kv_cache_seq_shift (c, 0, 5, 11, -7, &rope);
      g_assert_cmpint (hn_kv_cache_cells (c)[cell[0]].pos, ==, 3);
      g_assert_true (hn_kv_cache_read_k (c, 0, cell[0], 0, kv_dim, back));
      for (int i = 0; i < kv_dim; i++)
        g_assert_cmpfloat (fabsf (hn_fp16_to_fp32 (back[i]) - want[i]), <, 2e-3f);
      g_assert_true (hn_kv_cache_read_k (c, 0, cell[1], 0, kv_dim, back));
      g_assert_cmpmem (back, kv_dim * 2, other, kv_dim * 2);
      hn_kv_cache_seq_shift (c, 0, -1, -1, -12, &rope);
      g_assert_cmpint (hn_kv_cache_n_used (c), ==, 0);
      hn_kv_cache_free (c);
    }
}

/* Keys of global layers in a cache that owns its storage lie in tiles of HN_KV_TILE
 * cells, the layout the attention kernels read (HnAttnArgs.k_tiled); a cell's key goes
 * in and comes out as a row, whole or in part. */
static void
test_key_tiles (void)
{
  HnError err = {0};
  const int n_cells = HN_KV_TILE + 5, kv_dim = 6, n_layer = 3;
  const bool sliding[3] = {false, true, false};
  HnKvCache *c = hn_kv_cache_new_windowed (n_layer, n_cells, kv_dim, sliding, 4, n_cells, &err);
  g_assert_nonnull (c);
  g_assert_true (hn_kv_cache_k_tiled (c, 0));
  g_assert_false (hn_kv_cache_k_tiled (c, 1));
  g_assert_true (hn_kv_cache_k_tiled (c, 2));
  int32_t pos[HN_KV_TILE + 5], seq[HN_KV_TILE + 5] = {0}, cells[HN_KV_TILE + 5];
  for (int i = 0; i < n_cells; i++)
    pos[i] = i;
  g_assert_true (hn_kv_cache_find_slot (c, n_cells, pos, seq, cells, &err));
  uint16_t row[6], back[6];
  for (int l = 0; l < n_layer; l++)
    for (int i = 0; i < n_cells; i++) {
      for (int j = 0; j < kv_dim; j++)
        row[j] = (uint16_t) (l * 1000 + cells[i] * 10 + j);
      g_assert_true (hn_kv_cache_write_k (c, l, cells[i], row));
    }
  for (int l = 0; l < n_layer; l++) {
    const uint16_t *data = hn_kv_cache_k_data (c, l);
    for (int i = 0; i < n_cells; i++) {
      int cell = cells[i];
      g_assert_true (hn_kv_cache_read_k (c, l, cell, 2, 3, back));
      for (int j = 0; j < 3; j++)
        g_assert_cmpint (back[j], ==, l * 1000 + cell * 10 + 2 + j);
      for (int j = 0; j < kv_dim; j++) {
        size_t at = sliding[l] ? (size_t) hn_kv_cache_row_of (c, l, cell) * kv_dim + j
                               : (size_t) (cell / HN_KV_TILE) * HN_KV_TILE * kv_dim + (size_t) j * HN_KV_TILE +
                                     cell % HN_KV_TILE;
        g_assert_cmpint (data[at], ==, l * 1000 + cell * 10 + j);
      }
    }
  }
  /* a sliding row that was handed on has no key to read or write */
  hn_kv_cache_drop_window_rows (c, cells[0]);
  g_assert_false (hn_kv_cache_read_k (c, 1, cells[0], 0, kv_dim, back));
  g_assert_false (hn_kv_cache_write_k (c, 1, cells[0], row));
  g_assert_true (hn_kv_cache_read_k (c, 0, cells[0], 0, kv_dim, back));
  hn_kv_cache_free (c);
}

/* Ring rows held by cells of the table. */
static int
rows_held (HnKvCache *c, int layer)
{
  int n = 0;
  for (int i = 0; i < hn_kv_cache_n_cells (c); i++)
    n += hn_kv_cache_cells (c)[i].pos >= 0 && hn_kv_cache_row_of (c, layer, i) >= 0;
  return n;
}

/* Layers 0 and 2 slide (window 4, ring of 6 rows), layer 1 is global (16 cells). */
static void
test_window_ring (void)
{
  HnError err = {0};
  const bool sliding[3] = {true, false, true};
  HnKvCache *c = hn_kv_cache_new_windowed (3, 16, 2, sliding, 4, 6, &err);
  g_assert_nonnull (c);
  g_assert_cmpint (hn_kv_cache_window (c), ==, 4);
  g_assert_cmpint (hn_kv_cache_n_ring (c), ==, 6);
  g_assert_true (hn_kv_cache_layer_sliding (c, 0));
  g_assert_false (hn_kv_cache_layer_sliding (c, 1));
  int32_t cells[6], seq0[6] = {0}, pos[6];
  /* six tokens fill the ring; nothing needed to be handed on */
  for (int i = 0; i < 6; i++)
    pos[i] = i;
  g_assert_true (hn_kv_cache_find_slot (c, 6, pos, seq0, cells, &err));
  g_assert_cmpint (rows_held (c, 0), ==, 6);
  g_assert_cmpint (hn_kv_cache_seq_resume_min (c, 0), ==, 0);
  /* position 6 sees 3..6: the rows of 0, 1 and 2 are handed on, 3..5 stay */
  int32_t p6 = 6;
  g_assert_true (hn_kv_cache_find_slot (c, 1, &p6, seq0, cells, &err));
  for (int i = 0; i < 16; i++) {
    const HnKvCell *cell = &hn_kv_cache_cells (c)[i];
    if (cell->pos < 0)
      continue;
    g_assert_cmpint (hn_kv_cache_row_of (c, 1, i), ==, i); /* global rows never move */
    g_assert_cmpint (hn_kv_cache_row_of (c, 0, i) >= 0, ==, cell->pos >= 3);
    g_assert_true ((hn_kv_cache_v_row (c, 2, i) != NULL) == (cell->pos >= 3));
    g_assert_nonnull (hn_kv_cache_v_row (c, 1, i));
  }
  g_assert_cmpint (hn_kv_cache_n_used (c), ==, 7);
  g_assert_cmpint (hn_kv_cache_seq_resume_min (c, 0), ==, 2 + 4);
  /* a batch that would need rows still in the window does not fit: nothing changes */
  int32_t many[5] = {7, 8, 9, 10, 11};
  g_assert_false (hn_kv_cache_find_slot (c, 5, many, seq0, cells, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_NOMEM);
  g_assert_cmpint (hn_kv_cache_n_used (c), ==, 7);
  /* a cell another sequence still sees keeps its row: seq 1 shares position 3 and goes
   * on from 4, so for 7, 8, 9 of seq 0 there are only the two free rows */
  hn_kv_cache_seq_cp (c, 0, 1, 3, 4);
  int32_t p7[3] = {7, 8, 9};
  g_assert_false (hn_kv_cache_find_slot (c, 3, p7, seq0, cells, &err));
  g_assert_true (hn_kv_cache_find_slot (c, 2, p7, seq0, cells, &err));
  for (int i = 0; i < 16; i++) {
    const HnKvCell *cell = &hn_kv_cache_cells (c)[i];
    if (cell->pos == 3)
      g_assert_cmpint (hn_kv_cache_row_of (c, 0, i), >=, 0);
  }
  /* freeing cells frees their rows; dropping rows marks them as handed on */
  hn_kv_cache_seq_rm (c, -1, 7, -1);
  g_assert_cmpint (rows_held (c, 0), ==, 4); /* 3, 4, 5, 6 */
  hn_kv_cache_drop_window_rows (c, cells[0]); /* already freed: nothing happens */
  for (int i = 0; i < 16; i++)
    if (hn_kv_cache_cells (c)[i].pos == 6)
      hn_kv_cache_drop_window_rows (c, i);
  g_assert_cmpint (rows_held (c, 0), ==, 3);
  g_assert_cmpint (hn_kv_cache_seq_resume_min (c, 0), ==, 6 + 4);
  hn_kv_cache_clear (c);
  g_assert_cmpint (rows_held (c, 0), ==, 0);
  g_assert_cmpint (hn_kv_cache_seq_resume_min (c, 0), ==, 0);
  hn_kv_cache_free (c);

  /* no sliding layer: a plain cache */
  const bool none[2] = {false, false};
  c = hn_kv_cache_new_windowed (2, 8, 2, none, 4, 6, &err);
  g_assert_cmpint (hn_kv_cache_window (c), ==, 0);
  g_assert_cmpint (hn_kv_cache_n_ring (c), ==, 0);
  hn_kv_cache_free (c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/kv-cache/cell-ops", test_cell_ops);
  g_test_add_func ("/kv-cache/shift-rotates-keys", test_shift_rotates_keys);
  g_test_add_func ("/kv-cache/window-ring", test_window_ring);
  g_test_add_func ("/kv-cache/key-tiles", test_key_tiles);
  return g_test_run ();
}
