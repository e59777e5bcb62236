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
  int32_t bad_seq[1] = {8};
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
  for (int neox = 0; neox < 2; neox++) {
    HnRope rope = {head_dim, head_dim, 10000.0f, 1.0f, neox, NULL};
    HnKvCache *c = hn_kv_cache_new (1, 4, kv_dim, &err);
    int32_t pos[1] = {10}, seq[1] = {0}, cell[1];
    g_assert_true (hn_kv_cache_find_slot (c, 1, pos, seq, cell, &err));
    float x[16], want[16];
    for (int i = 0; i < kv_dim; i++)
      x[i] = want[i] = sinf ((float) i + 0.5f);
    hn_rope_apply (&rope, x, n_head, 10);
    hn_rope_apply (&rope, want, n_head, 3);
    uint16_t *k = hn_kv_cache_k_row (c, 0, cell[0]);
    for (int i = 0; i < kv_dim; i++)
      k[i] = hn_fp32_to_fp16 (x[i]);
    hn_kv_cache_seq_shift (c, 0, 5, -1, -7, &rope);
    g_assert_cmpint (hn_kv_cache_cells (c)[cell[0]].pos, ==, 3);
    for (int i = 0; i < kv_dim; i++)
      g_assert_cmpfloat (fabsf (hn_fp16_to_fp32 (k[i]) - want[i]), <, 2e-3f);
    hn_kv_cache_seq_shift (c, 0, -1, -1, -5, &rope);
    g_assert_cmpint (hn_kv_cache_n_used (c), ==, 0);
    hn_kv_cache_free (c);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/kv-cache/cell-ops", test_cell_ops);
  g_test_add_func ("/kv-cache/shift-rotates-keys", test_shift_rotates_keys);
  return g_test_run ();
}
