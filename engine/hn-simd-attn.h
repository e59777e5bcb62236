/* hn-simd-attn.h — attention of one query position over the F16 KV cache, written once
 * over a small vector vocabulary and included by each SIMD file, which defines:
 *   VEC, VLEN, VZERO(), VSET1(x), VLOAD(p), VSTORE(p, v), VLOAD_H(p) (VLEN halves),
 *   VROUND_H(v) (each lane to the nearest F16 value), VFMADD(a, b, c), VMUL(a, b),
 *   VADD(a, b), VMAX(a, b) (lane-wise, b where a is NaN), VHMAX(v), VEXP(v) (for v <= 0),
 *   VSUMS(a) (a vector whose lane i is the sum of the lanes of a[i], for VLEN vectors
 *   a[0..VLEN-1]), VSUM_DOUBLE(s, n) (Σ s[0..n) in double), ATTN_ACC_VECS (vectors of
 *   the output the value pass may hold in registers) and ATTN_NAME / ATTN_BODY, and may
 *   define ATTN_SCORE_GROUPS (below).
 *
 * Rounded like the reference engine (see HnAttnArgs): the query (already rounded by the
 * caller) meets the F16 keys, the softmax is taken over every visible cell, and each
 * probability is rounded to F16 before it weights its value.  So two passes: the first
 * converts the keys CHUNK cells at a time — once for all the query heads that share the
 * KV head — and keeps the scores, the second does the same with the values.  Keys in
 * tiles (HnAttnArgs.k_tiled, what a context's cache holds) take tiled_score_pass
 * instead: the query heads times whole tiles, nothing staged.  A call may
 * cover several KV heads (HnAttnArgs.kv_heads): each chunk then runs through them in
 * turn, so the rows are read front to back.
 *
 * Why the loops look as they do (decode deep into a context is bound by them):
 * - scores are made VLEN cells at a time, one accumulator per cell, and the VLEN
 *   accumulators are summed across their lanes together (VSUMS: a transposing tree of
 *   shuffles and adds), instead of one horizontal sum per score; the running maximum is
 *   kept by lane and reduced once per head;
 * - the values are accumulated for several query heads at once (value_tile), up to
 *   ATTN_ACC_VECS independent vectors, so that consecutive FMAs do not wait for each
 *   other: one head's four vectors alone left the FMA units waiting on their own results
 *   (4-cycle latency, one FMA per vector per cell);
 * - the softmax sum runs vectorised, in double.
 * With the next block's rows fetched during this one (next_cells, below) these took a
 * TinyLlama-shaped decode's attention at 4096 cells from 11.6 to 7.6 ms of CPU time per
 * token with AVX-512 (bench-attention; docs/speed.md, "Long context, third round").
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <math.h>

#define CHUNK HN_ATTN_CHUNK
/* How far ahead the rows are fetched when the caller names no next block: one KV head's
 * row is a short piece of a longer cell row (128 of 512 bytes for TinyLlama), a pattern
 * the hardware prefetchers follow poorly.  One chunk ahead, into every cache level: on
 * the AVX-512 Xeon this measured about 10% faster at 4096 cells than none; two chunks
 * ahead gained less, and a non-temporal hint two chunks ahead was slower than none. */
#define PREFETCH_CELLS CHUNK
/* How many cells ahead the value loop fetches its rows into the first-level cache, once
 * the next-block fetch (below) has brought them into the second: on the Intel Xeon
 * without AMX, from memory, about 3% faster than leaving it to the hardware (4, 8 and 16
 * measured alike). */
#define VALUE_ROWS_AHEAD 8

/* Spreads the fetches of the next call's rows over this call's work (see
 * HnAttnArgs.next_cells): `quota` 1/FETCH_ONE of a line at each step (a share that need
 * not be whole lines, carried from step to step), K rows first, then V rows.  A burst of
 * fetches at the start of each chunk stalled on the core's few outstanding misses;
 * spread out, they overlap the arithmetic.  On x86 where they go is the
 * processor's (HnAttnArgs.next_to_l2): on the AMD EPYC (Zen 5) into every cache level
 * measured about 5% faster than into the second level only (bench-attention, 2 threads,
 * 4096 and 8192 cells, AVX-512 and AVX2 alike), although a block's rows are far larger
 * than the first-level cache; on the Intel Xeon without AMX the second level only was
 * about 6% faster (one thread, rows in the third level).  ARM64 keeps the second level,
 * unmeasured on real hardware. */
#if defined(__x86_64__) || defined(__i386__)
/* (an if, not a conditional expression of two fetches: clang 14 crashes on that at -O0) */
#define FETCH_NEXT_LINE(r, p)                                                                                \
  do {                                                                                                       \
    if ((r)->to_l2)                                                                                          \
      __builtin_prefetch((p), 0, 2);                                                                         \
    else                                                                                                     \
      __builtin_prefetch((p), 0, 3);                                                                         \
  } while (0)
#else
#define FETCH_NEXT_LINE(r, p) __builtin_prefetch((p), 0, 2)
#endif
typedef struct {
  const char *base[2];
  const int32_t *cells;
  int n, cell, which;
  size_t row_bytes[2], stride_bytes[2], off;
  int tile_shift[2]; /* K in tiles: one tile of row_bytes per HN_KV_TILE listed cells */
  bool to_l2;        /* HnAttnArgs.next_to_l2 */
  /* When the next cells are consecutive and the call covers whole rows, their K and then
   * their V rows are two spans of memory: span walks them (span_end[which]), with no list
   * lookup or multiply per line.  NULL: walk the list. */
  const char *span, *span_start[2], *span_end[2];
  unsigned credit; /* the part of a line that the quotas so far have left over, in 1/FETCH_ONE */
} NextRows;

/* One line in the units of the fetch quotas. */
enum { FETCH_SHIFT = 8, FETCH_ONE = 1 << FETCH_SHIFT };

/* Whether cells[0 .. n) are consecutive: cells[0], cells[0] + 1, ... */
static inline bool
cells_consecutive(const int32_t *cells, int n)
{
  for (int i = 1; i < n; i++)
    if (cells[i] != cells[0] + i)
      return false;
  return true;
}

/* Turns r into two spans when its cells are consecutive and each row is read whole (the
 * common case: a decode step's blocks); otherwise leaves the list walk. */
static inline void
next_rows_spans(NextRows *r)
{
  r->span = NULL;
  if (r->which == 2 || r->row_bytes[0] != r->stride_bytes[0] || r->row_bytes[1] != r->stride_bytes[1] ||
      !cells_consecutive(r->cells, r->n))
    return;
  const int32_t first = r->cells[0], last = first + r->n - 1;
  for (int w = 0; w < 2; w++) {
    r->span_start[w] = r->base[w] + (size_t)(first >> r->tile_shift[w]) * r->stride_bytes[w];
    r->span_end[w] = r->base[w] + (size_t)((last >> r->tile_shift[w]) + 1) * r->stride_bytes[w];
  }
  r->span = r->span_start[0];
}

/* Fetches the lines that `quota_parts` more make due.  Most steps only add and compare:
 * AVX2's value steps are short, and a first version that divided at every step, with the
 * carried part in the structure, made them 7% slower with every row in the caches.  The
 * caller's loop keeps the carried part in a local (`credit`, from and back to
 * NextRows.credit), so that it stays in a register. */
static inline __attribute__((always_inline)) void
next_rows_fetch(NextRows *r, unsigned *credit, int quota_parts)
{
  *credit += (unsigned)quota_parts;
  if (*credit < FETCH_ONE)
    return;
  const int quota = (int)(*credit >> FETCH_SHIFT);
  *credit &= FETCH_ONE - 1;
  if (r->span) {
    for (int q = 0; q < quota && r->which < 2; q++) {
      FETCH_NEXT_LINE(r, r->span);
      r->span += 64;
      if (r->span >= r->span_end[r->which] && ++r->which < 2)
        r->span = r->span_start[1];
    }
    return;
  }
  for (int q = 0; q < quota && r->which < 2; q++) {
    const int w = r->which, shift = r->tile_shift[w];
    FETCH_NEXT_LINE(r, r->base[w] + (size_t)(r->cells[r->cell] >> shift) * r->stride_bytes[w] + r->off);
    r->off += 64;
    if (r->off >= r->row_bytes[w]) {
      r->off = 0;
      if ((r->cell += 1 << shift) >= r->n) {
        r->cell = 0;
        r->which++;
      }
    }
  }
}

static inline __attribute__((always_inline)) void
prefetch_row(const uint16_t *row, int halves)
{
  for (int b = 0; b < halves * 2; b += 64)
    __builtin_prefetch((const char *)row + b, 0, 3);
}

/* Converts the rows of cells[c0 .. c0 + nc) (hd halves each) to f32 in buf, cell i at
 * i · hd, fetching the rows PREFETCH_CELLS cells ahead (pf halves of each, when pf > 0);
 * with buf NULL it only fetches. */
static inline __attribute__((always_inline)) void
stage_rows(const uint16_t *rows, const int32_t *cells, int c0, int nc, int n, size_t kv_stride, int pf,
           int hd, float *buf)
{
  for (int i = 0; i < nc; i++) {
    if (pf > 0 && c0 + PREFETCH_CELLS + i < n)
      prefetch_row(rows + (size_t)cells[c0 + PREFETCH_CELLS + i] * kv_stride, pf);
    if (buf) {
      const uint16_t *r = rows + (size_t)cells[c0 + i] * kv_stride;
      for (int j = 0; j < hd / VLEN; j++)
        VSTORE(buf + i * hd + j * VLEN, VLOAD_H(r + j * VLEN));
    }
  }
}

/* out[h][j0 + t] += Σ_i p[h][i] · v[i][j0 + t] for `heads` query heads and `w` (<= vecs)
 * vectors of the output, all held in registers: heads × vecs independent sums, so that
 * consecutive FMAs do not wait for each other (one head's four vectors alone would leave
 * the FMA units idle most of the time, each sum waiting on its previous step).  The
 * values come from vf (converted to f32 beforehand, cell i at i · hd) or, with `direct`,
 * straight from the F16 rows of `cells`: when each converted vector feeds two heads or
 * more, converting it in the loop costs less than a pass that stores it and loads it
 * back (about 6% of the attention at 4096 cells with AVX-512's four heads). */
static inline __attribute__((always_inline)) void
value_tile(const float *p, size_t p_stride, const float *vf, const bool direct, const uint16_t *v,
           const int32_t *cells, const bool consecutive, size_t kv_stride, int nc, int n_rest, int hd, float *acc,
           int j0, const int heads, const int vecs, int w, NextRows *next, int quota)
{
  VEC o[ATTN_ACC_VECS];
#pragma GCC unroll 16
  for (int t = 0; t < ATTN_ACC_VECS; t++) /* (what the tile leaves unused stays dead) */
    o[t] = VZERO();
#pragma GCC unroll 16
  for (int h = 0; h < heads; h++)
#pragma GCC unroll 16
    for (int t = 0; t < vecs; t++)
      o[h * vecs + t] = t < w ? VLOAD(acc + h * hd + (j0 + t) * VLEN) : VZERO();
  unsigned credit = next->credit;
  for (int i = 0; i < nc; i++) {
    const float *vi = vf + i * hd + j0 * VLEN;
    const uint16_t *vh = !direct ? NULL
                         : v + (size_t)(consecutive ? cells[0] + i : cells[i]) * kv_stride + j0 * VLEN;
    if (direct && consecutive && i + VALUE_ROWS_AHEAD < n_rest)
      for (int b = 0; b < w * VLEN * 2; b += 64)
        __builtin_prefetch((const char *)(vh + VALUE_ROWS_AHEAD * kv_stride) + b, 0, 3);
    next_rows_fetch(next, &credit, quota);
#pragma GCC unroll 16
    for (int h = 0; h < heads; h++) {
      const VEC pi = VSET1(p[(size_t)h * p_stride + i]);
#pragma GCC unroll 16
      for (int t = 0; t < vecs; t++)
        if (t < w)
          o[h * vecs + t] = VFMADD(pi, direct ? VLOAD_H(vh + t * VLEN) : VLOAD(vi + t * VLEN), o[h * vecs + t]);
    }
  }
  next->credit = credit;
#pragma GCC unroll 16
  for (int h = 0; h < heads; h++)
#pragma GCC unroll 16
    for (int t = 0; t < vecs; t++)
      if (t < w)
        VSTORE(acc + h * hd + (j0 + t) * VLEN, o[h * vecs + t]);
}

/* The value pass of one chunk for the query heads h0 .. h_end − 1 of one KV head: tiles
 * of tile_heads heads, then the heads left over one at a time. */
static inline __attribute__((always_inline)) void
value_tiles(const float *p, size_t p_stride, const float *vf, const bool direct, const uint16_t *v,
            const int32_t *cells, const bool consecutive, size_t kv_stride, int nc, int n_rest, int hd, float *acc,
            int h0,
            int h_end, const int tile_heads, const int tile_vecs, int nv, NextRows *next, int quota)
{
  int h = h0;
  for (; h + tile_heads <= h_end; h += tile_heads)
    for (int j0 = 0; j0 < nv; j0 += tile_vecs)
      value_tile(p + (size_t)h * p_stride, p_stride, vf, direct, v, cells, consecutive, kv_stride, nc, n_rest, hd,
                 acc + h * hd, j0, tile_heads, tile_vecs, nv - j0 < tile_vecs ? nv - j0 : tile_vecs, next, quota);
  for (; h < h_end; h++)
    for (int j0 = 0; j0 < nv; j0 += tile_vecs)
      value_tile(p + (size_t)h * p_stride, p_stride, vf, direct, v, cells, consecutive, kv_stride, nc, n_rest, hd,
                 acc + h * hd, j0, 1, tile_vecs, nv - j0 < tile_vecs ? nv - j0 : tile_vecs, next, quota);
}

/* Keys in tiles (HnAttnArgs.k_tiled).  The listed cells are taken in groups of at most
 * HN_KV_TILE: a group of HN_KV_TILE consecutive cells that fill one tile is read where it
 * is; any other group (the end of the list, cells out of order, a list that starts inside
 * a tile) is first copied into a tile of its own, the cells in list order, zeros after
 * them.  Either way the same products run in the same order, so a cell's score does not
 * depend on where its key sits. */
/* Groups of cells a tile of key products takes at once (1 or 2): with AVX2's eight
 * accumulators two groups leave room for two query heads, one conversion of a key vector
 * for every two FMAs; one group, for four heads, one for every four, and measured 5%
 * faster on the Intel Xeon without AMX.  AVX-512 keeps two groups of eight heads. */
#ifndef ATTN_SCORE_GROUPS
#define ATTN_SCORE_GROUPS 2
#endif
enum { TILE_VECS = HN_KV_TILE / VLEN, TILE_PAIR_HEADS = ATTN_ACC_VECS / (ATTN_SCORE_GROUPS * TILE_VECS) };
_Static_assert(TILE_PAIR_HEADS >= 1 && TILE_PAIR_HEADS <= 8, "the score tile shapes below");

/* Whether list entries i .. i + HN_KV_TILE − 1 are one whole tile, in order. */
static inline __attribute__((always_inline)) bool
whole_tile_at(const int32_t *cells, int i, int n)
{
  return cells[i] % HN_KV_TILE == 0 && i + HN_KV_TILE <= n && cells_consecutive(cells + i, HN_KV_TILE);
}

/* The length of the group that starts at list entry i: a whole tile, or the entries up
 * to the next whole tile (at most HN_KV_TILE). */
static inline __attribute__((always_inline)) int
tile_group_len(const int32_t *cells, int i, int n, bool *whole)
{
  *whole = whole_tile_at(cells, i, n);
  if (*whole)
    return HN_KV_TILE;
  int len = 1;
  while (len < HN_KV_TILE && i + len < n && !whole_tile_at(cells, i + len, n))
    len++;
  return len;
}

/* Copies the keys of cells[0 .. len) (one KV head's piece, head_k) into the tile `out`. */
static inline __attribute__((always_inline)) void
gather_tile(const uint16_t *head_k, size_t tile_halves, const int32_t *cells, int len, int hd, uint16_t *out)
{
  for (int l = 0; l < HN_KV_TILE; l++) {
    const uint16_t *src = l < len ? head_k + (size_t)(cells[l] / HN_KV_TILE) * tile_halves + cells[l] % HN_KV_TILE
                                  : NULL;
    for (int d = 0; d < hd; d++)
      out[d * HN_KV_TILE + l] = src ? src[(size_t)d * HN_KV_TILE] : 0;
  }
}

/* acc[h · n_tiles · TILE_VECS + t · TILE_VECS + v] += q_h[d] · tile_t[d][v · VLEN ..]: one
 * dimension of the scores of `heads` query heads against n_tiles tiles, every sum in a
 * register, each converted key vector used by every head. */
static inline __attribute__((always_inline)) void
tile_products_at(const float *q, size_t q_stride, const uint16_t *t0, const uint16_t *t1, const int n_tiles,
                 const int heads, VEC *acc, int d)
{
  VEC k[2 * TILE_VECS];
#pragma GCC unroll 16
  for (int v = 0; v < TILE_VECS; v++) {
    k[v] = VLOAD_H(t0 + d * HN_KV_TILE + v * VLEN);
    if (n_tiles == 2)
      k[TILE_VECS + v] = VLOAD_H(t1 + d * HN_KV_TILE + v * VLEN);
  }
#pragma GCC unroll 16
  for (int h = 0; h < heads; h++) {
    const VEC qh = VSET1(q[(size_t)h * q_stride + d]);
#pragma GCC unroll 16
    for (int x = 0; x < n_tiles * TILE_VECS; x++)
      acc[h * n_tiles * TILE_VECS + x] = VFMADD(qh, k[x], acc[h * n_tiles * TILE_VECS + x]);
  }
}

/* The same, fetching the next call's lines spread over the loop (`quota`, in 1/FETCH_ONE
 * of a line), a share every four dimensions: in one burst before the loop they stalled
 * it on the Intel Xeon without AMX (a tenth of the attention's time sat on the fetches),
 * spread out it ran 9-13% faster there (one thread, from the caches and from L3);
 * spreading them made no difference on the AMD EPYC. */
static inline __attribute__((always_inline)) void
tile_products(const float *q, size_t q_stride, const uint16_t *t0, const uint16_t *t1, const int n_tiles, int hd,
              const int heads, VEC *acc, NextRows *next, int quota)
{
#pragma GCC unroll 16
  for (int x = 0; x < heads * n_tiles * TILE_VECS; x++)
    acc[x] = VZERO();
  const int steps = hd >= 4 ? hd / 4 : 1, per_step = (quota + steps - 1) / steps;
  int d = 0;
  unsigned credit = next->credit;
  for (; d + 4 <= hd; d += 4) {
    next_rows_fetch(next, &credit, per_step);
#pragma GCC unroll 4
    for (int e = 0; e < 4; e++)
      tile_products_at(q, q_stride, t0, t1, n_tiles, heads, acc, d + e);
  }
  for (; d < hd; d++) {
    next_rows_fetch(next, &credit, per_step);
    tile_products_at(q, q_stride, t0, t1, n_tiles, heads, acc, d);
  }
  next->credit = credit;
}

/* The products and scores of query heads h .. h + heads − 1 (of KV head g) over one or two
 * groups: scaled, stored, and their running maximum kept, by lane for whole groups
 * without a cap.  Other groups go through `part` first and are finished one score at a
 * time once no sum is held in a register any more: a call (tanhf) while the sums were
 * live would have sent them all to memory for the whole product loop. */
static inline __attribute__((always_inline)) void
tile_scores(const HnAttnArgs *a, int hd, int h, const int heads, const uint16_t *t0, const uint16_t *t1,
            const int n_tiles, const int *start, const int *len, size_t stride, float *lane_mx, float *mx,
            NextRows *next, int quota)
{
  VEC acc[ATTN_ACC_VECS];
  float part[ATTN_ACC_VECS * VLEN];
  /* queries packed head after head (the context's layout): a constant stride lets the
   * heads' broadcasts share one base register instead of a pointer each */
  if (a->q_stride == (size_t)hd)
    tile_products(a->q + (size_t)h * (size_t)hd, (size_t)hd, t0, t1, n_tiles, hd, heads, acc, next, quota);
  else
    tile_products(a->q + (size_t)h * a->q_stride, a->q_stride, t0, t1, n_tiles, hd, heads, acc, next, quota);
  const bool by_lane = a->softcap <= 0.0f;
#pragma GCC unroll 16
  for (int x = 0; x < heads; x++)
#pragma GCC unroll 2
    for (int t = 0; t < n_tiles; t++)
#pragma GCC unroll 16
      for (int v = 0; v < TILE_VECS; v++) {
        const int i = (x * n_tiles + t) * TILE_VECS + v;
        const VEC sv = VMUL(acc[i], VSET1(a->scale));
        if (by_lane && len[t] == HN_KV_TILE) {
          VSTORE(a->scores + (size_t)(h + x) * stride + start[t] + v * VLEN, sv);
          VSTORE(lane_mx + (h + x) * VLEN, VMAX(sv, VLOAD(lane_mx + (h + x) * VLEN)));
        } else {
          VSTORE(part + i * VLEN, sv);
        }
      }
  for (int x = 0; x < heads; x++)
    for (int t = 0; t < n_tiles; t++) {
      if (by_lane && len[t] == HN_KV_TILE)
        continue;
      float *s = a->scores + (size_t)(h + x) * stride + start[t];
      const float *from = part + (x * n_tiles + t) * HN_KV_TILE;
      for (int i = 0; i < len[t]; i++) {
        float sc = from[i];
        if (a->softcap > 0.0f)
          sc = a->softcap * tanhf(sc / a->softcap);
        s[i] = sc;
        mx[h + x] = sc > mx[h + x] ? sc : mx[h + x];
      }
    }
}

/* The score pass over tiled keys: groups two at a time, through every KV head, the query
 * heads of each in shapes of TILE_PAIR_HEADS, then halves of it. */
static inline __attribute__((always_inline)) void
tiled_score_pass(const HnAttnArgs *a, const int hd, int group, int n_kv, size_t stride, uint16_t *gathered,
                 int pf, float *lane_mx, float *mx, NextRows *next, int score_quota)
{
  const int n = a->n_cells;
  const size_t tile_halves = a->kv_stride * HN_KV_TILE, head_halves = (size_t)hd * HN_KV_TILE;
  for (int i = 0; i < n;) {
    int start[2] = {0, 0}, len[2] = {0, 0}, n_groups = 0;
    bool whole[2] = {false, false};
    for (; n_groups < ATTN_SCORE_GROUPS && i < n; n_groups++) {
      start[n_groups] = i;
      len[n_groups] = tile_group_len(a->cells, i, n, &whole[n_groups]);
      i += len[n_groups];
    }
    /* the tiles PREFETCH_CELLS ahead, when the caller names no next block */
    if (pf > 0)
      for (int x = 0; x < n_groups; x++)
        if (start[x] + PREFETCH_CELLS < n) {
          const char *p = (const char *)(a->k + (size_t)(a->cells[start[x] + PREFETCH_CELLS] / HN_KV_TILE) * tile_halves);
          for (int b = 0; b < pf * HN_KV_TILE * 2; b += 64)
            __builtin_prefetch(p + b, 0, 3);
        }
    for (int g = 0; g < n_kv; g++) {
      const uint16_t *head_k = a->k + (size_t)g * head_halves, *tiles[2] = {NULL, NULL};
      for (int x = 0; x < n_groups; x++) {
        const uint16_t *own = gathered + (size_t)x * head_halves;
        if (whole[x]) {
          tiles[x] = head_k + (size_t)(a->cells[start[x]] / HN_KV_TILE) * tile_halves;
        } else {
          gather_tile(head_k, tile_halves, a->cells + start[x], len[x], hd, (uint16_t *)own);
          tiles[x] = own;
        }
      }
      for (int h = g * group, h_end = (g + 1) * group; h < h_end;) {
        const int left = h_end - h;
        /* constant shapes: TILE_PAIR_HEADS, then its halves, down to one head */
        const int heads = left >= TILE_PAIR_HEADS ? TILE_PAIR_HEADS
                          : TILE_PAIR_HEADS >= 8 && left >= 4 ? 4
                          : TILE_PAIR_HEADS >= 4 && left >= 2 ? 2
                          : 1;
        const int quota = score_quota * heads * n_groups * TILE_VECS;
#define TILE_SCORES(H)                                                                                       \
  (ATTN_SCORE_GROUPS == 2 && n_groups == 2                                                            \
     ? tile_scores(a, hd, h, H, tiles[0], tiles[1], 2, start, len, stride, lane_mx, mx, next, quota)  \
     : tile_scores(a, hd, h, H, tiles[0], NULL, 1, start, len, stride, lane_mx, mx, next, quota))
        if (heads == TILE_PAIR_HEADS)
          TILE_SCORES(TILE_PAIR_HEADS);
        else if (heads == 4)
          TILE_SCORES(TILE_PAIR_HEADS >= 8 ? 4 : 1);
        else if (heads == 2)
          TILE_SCORES(TILE_PAIR_HEADS >= 4 ? 2 : 1);
        else
          TILE_SCORES(1);
#undef TILE_SCORES
        h += heads;
      }
    }
  }
}

static inline __attribute__((always_inline)) void
ATTN_BODY(const HnAttnArgs *a, const int hd)
{
  const int group = a->n_q, n_kv = a->kv_heads > 1 ? a->kv_heads : 1, nq = group * n_kv;
  const int nv = hd / VLEN, n = a->n_cells;
  const size_t stride = hn_attn_score_stride(n);
  float *acc = a->work;                   /* nq × hd */
  float *lane_mx = acc + nq * hd;         /* nq × VLEN (VLEN <= CHUNK) */
  float *mx = acc + nq * hd + nq * CHUNK; /* nq (the layout of hn_attn_work_floats) */
  /* CHUNK × hd; with tiled keys, the two tiles a score step copies its groups into */
  float *kf = a->work + ((size_t)nq * (size_t)(hd + CHUNK + 2) + 15) / 16 * 16;
  float *vf = kf + CHUNK * hd;            /* CHUNK × hd */
  /* Tiles need their shape at compile time to keep the sums in registers: the head
   * sizes compiled as constants (ATTN_NAME) get the widest tile that fits, any other
   * takes 4 vectors of one head at a time (a tile of runtime shape would index its
   * accumulators at run time, through memory). */
  const bool shaped = __builtin_constant_p(hd);
  const int tile_vecs = !shaped ? (nv < 4 ? nv : 4) : nv < ATTN_ACC_VECS ? nv : ATTN_ACC_VECS;
  const int tile_heads = shaped ? ATTN_ACC_VECS / tile_vecs : 1;
  /* halves of each row to fetch a chunk ahead (not with next_cells: those rows are
   * fetched instead); with several KV heads each fetches its own piece */
  const int pf = a->next_cells || a->prefetch_halves < 0 ? -1
                 : n_kv > 1 || a->prefetch_halves == 0 ? hd : a->prefetch_halves;
  const int tile = a->k_tiled ? HN_KV_TILE : 1, tile_shift = a->k_tiled ? 4 : 0;
  _Static_assert(HN_KV_TILE == 1 << 4, "tile_shift");
  const size_t row_bytes = (size_t)(n_kv * hd) * 2;
  NextRows next = {.base = {(const char *)a->k, (const char *)a->v},
                   .cells = a->next_cells,
                   .n = a->next_n_cells,
                   .which = a->next_cells && a->next_n_cells > 0 ? 0 : 2,
                   .row_bytes = {row_bytes * (size_t)tile, row_bytes},
                   .stride_bytes = {a->kv_stride * 2 * (size_t)tile, a->kv_stride * 2},
                   .tile_shift = {tile_shift, 0},
                   .to_l2 = a->next_to_l2};
  next_rows_spans(&next);
  /* Lines to fetch, shared out over the call's three phases about as their time goes: 3/8
   * over the score steps (one per VLEN cells of a query head), 1/8 over the softmax's
   * exponentials (one per vector) and 1/2 over the value steps (one per cell of a tile).
   * A core sustains these fetches beside the arithmetic only up to a rate (about 16 GB/s
   * on the Intel Xeon without AMX); half the lines in the key products, a third of the
   * call, asked for more than that, and stalled them (docs/speed.md, "Long context,
   * tenth round").  Quotas are in 1/FETCH_ONE of a line, rounded up, so each phase
   * ends its share on time. */
  const int64_t n_parts = next.which == 2 ? 0 : (int64_t)2 * a->next_n_cells * (int64_t)((row_bytes + 63) / 64) * FETCH_ONE;
  const int64_t score_parts = n_parts * 3 / 8, softmax_parts = n_parts / 8;
  const int score_steps = (n + VLEN - 1) / VLEN * nq, value_steps = n * n_kv * ((group + tile_heads - 1) / tile_heads) * ((nv + tile_vecs - 1) / tile_vecs);
  const int softmax_steps = (int)(stride / VLEN) * nq;
#define FETCH_QUOTA(parts, steps) ((steps) > 0 ? (int)(((parts) + (steps) - 1) / (steps)) : 0)
  const int score_quota = FETCH_QUOTA(score_parts, score_steps);
  const int softmax_quota = FETCH_QUOTA(softmax_parts, softmax_steps);
  const int v_quota = FETCH_QUOTA(n_parts - score_parts - softmax_parts, value_steps);
#undef FETCH_QUOTA
  for (int h = 0; h < nq; h++) {
    for (int j = 0; j < nv; j++)
      VSTORE(acc + h * hd + j * VLEN, VZERO());
    VSTORE(lane_mx + h * VLEN, VSET1(-INFINITY));
    mx[h] = -INFINITY;
  }
  if (a->k_tiled)
    tiled_score_pass(a, hd, group, n_kv, stride, (uint16_t *)kf, pf, lane_mx, mx, &next, score_quota);
  unsigned credit = next.credit;
  for (int c0 = 0; c0 < n && !a->k_tiled; c0 += CHUNK) {
    const int nc = n - c0 < CHUNK ? n - c0 : CHUNK;
    /* a chunk's last partial group of VLEN cells meets zero keys (scores ignored) */
    const int padded = (nc + VLEN - 1) / VLEN * VLEN;
    for (int g = 0; g < n_kv; g++) {
      stage_rows(a->k + (size_t)g * (size_t)hd, a->cells, c0, nc, n, a->kv_stride, pf, hd, kf);
      for (int i = nc; i < padded; i++)
        for (int j = 0; j < nv; j++)
          VSTORE(kf + i * hd + j * VLEN, VZERO());
      for (int h = g * group; h < (g + 1) * group; h++) {
        const float *q = a->q + (size_t)h * a->q_stride;
        float *s = a->scores + (size_t)h * stride + c0;
        for (int i0 = 0; i0 < padded; i0 += VLEN) {
          next_rows_fetch(&next, &credit, score_quota);
          VEC d[VLEN];
#pragma GCC unroll 16
          for (int c = 0; c < VLEN; c++) {
            const float *kc = kf + (i0 + c) * hd;
            VEC e = VMUL(VLOAD(q), VLOAD(kc));
            for (int j = 1; j < nv; j++)
              e = VFMADD(VLOAD(q + j * VLEN), VLOAD(kc + j * VLEN), e);
            d[c] = e;
          }
          const VEC sv = VMUL(VSUMS(d), VSET1(a->scale));
          VSTORE(s + i0, sv);
          const int valid = nc - i0 < VLEN ? nc - i0 : VLEN;
          if (a->softcap > 0.0f || valid < VLEN) {
            for (int i = i0; i < i0 + valid; i++) {
              if (a->softcap > 0.0f)
                s[i] = a->softcap * tanhf(s[i] / a->softcap);
              mx[h] = s[i] > mx[h] ? s[i] : mx[h];
            }
          } else {
            VSTORE(lane_mx + h * VLEN, VMAX(sv, VLOAD(lane_mx + h * VLEN)));
          }
        }
      }
    }
  }
  /* probabilities, rounded to F16; the slots past n up to a whole vector hold the
   * maximum (a finite value) and are left out of the sum */
  for (int h = 0; h < nq; h++) {
    float *s = a->scores + (size_t)h * stride;
    const float lm = VHMAX(VLOAD(lane_mx + h * VLEN));
    mx[h] = lm > mx[h] ? lm : mx[h];
    for (size_t i = (size_t)n; i < stride; i++)
      s[i] = mx[h];
    const VEC vm = VSET1(mx[h]);
    for (size_t i = 0; i < stride; i += VLEN) {
      next_rows_fetch(&next, &credit, softmax_quota);
      VSTORE(s + i, VEXP(VSUB(VLOAD(s + i), vm)));
    }
    const double sum = VSUM_DOUBLE(s, n);
    if (a->row_max) {
      a->row_max[h] = mx[h];
      a->row_sum[h] = (float)sum;
    }
    const VEC inv = VSET1(n > 0 ? (float)(1.0 / sum) : 0.0f);
    for (size_t k = 0; k < stride; k += VLEN)
      VSTORE(s + k, VROUND_H(VMUL(VLOAD(s + k), inv)));
  }
  next.credit = credit;
  for (int c0 = 0; c0 < n; c0 += CHUNK) {
    const int nc = n - c0 < CHUNK ? n - c0 : CHUNK;
    /* consecutive cells (a decode step's blocks): the rows are walked by pointer */
    const bool consecutive = cells_consecutive(a->cells + c0, nc);
    for (int g = 0; g < n_kv; g++) {
      const uint16_t *v = a->v + (size_t)g * (size_t)hd;
      const float *p = a->scores + c0;
      /* with tiles of two heads or more the values are converted in the tile's loop */
      const bool direct = tile_heads >= 2;
      stage_rows(v, a->cells, c0, nc, n, a->kv_stride, pf, hd, direct ? NULL : vf);
      if (consecutive)
        value_tiles(p, stride, vf, direct, v, a->cells + c0, true, a->kv_stride, nc, n - c0, hd, acc, g * group,
                    (g + 1) * group, tile_heads, tile_vecs, nv, &next, v_quota);
      else
        value_tiles(p, stride, vf, direct, v, a->cells + c0, false, a->kv_stride, nc, n - c0, hd, acc, g * group,
                    (g + 1) * group, tile_heads, tile_vecs, nv, &next, v_quota);
    }
  }
  for (int h = 0; h < nq; h++) {
    float *out = a->out + (size_t)h * a->out_stride;
    for (int j = 0; j < nv; j++)
      VSTORE(out + j * VLEN, VLOAD(acc + h * hd + j * VLEN));
  }
}

static void
ATTN_NAME(const HnAttnArgs *a)
{
  /* constant head sizes let the compiler unroll the inner loops */
  if (a->head_dim == 64)
    ATTN_BODY(a, 64);
  else if (a->head_dim == 128)
    ATTN_BODY(a, 128);
  else
    ATTN_BODY(a, a->head_dim);
}

#undef CHUNK
#undef PREFETCH_CELLS
#undef FETCH_NEXT_LINE
#undef ATTN_SCORE_GROUPS
#undef VALUE_ROWS_AHEAD
