/* bench-attention — the attention kernel alone in TinyLlama's decode shape (22 layers,
 * 4 KV heads of 64, 8 query heads sharing each), one token over 1024, 4096 and 8192
 * cells, for every SIMD level the processor has, with one and two threads, in two
 * orders: whole KV heads over all the cells, and blocks of cells with every KV head over
 * each in one call (a decode step's order; with two threads each takes a range of blocks
 * and reads whole cell rows, instead of picking its heads' pieces out of every row, and
 * fetches its next block's rows while it works on one).  The keys are in tiles of
 * HN_KV_TILE cells, as a context's cache keeps them; the block order also runs on the
 * same keys in rows (the layout before the tiles, and that of the Vulkan offload's
 * storage).  The cache holds all 22 layers' F16 keys and values (88 MiB at 4096 cells),
 * and before every run the benchmark reads a buffer twice the size of the last-level
 * cache, so they come from memory as in decode, where a token's 600 MB of weights pass
 * between two reads of a layer's cells: a processor whose last-level cache holds them
 * all (260 MiB on one Xeon) would otherwise serve them from there.  It prints the thread CPU time per token (the
 * slower thread's; best of five, the orders alternating; a busy neighbour inflates CPU
 * time far less than wall time) and the bytes of keys and values read per second.  The
 * cache lives in huge pages, as the context's does (hn_huge_alloc); the block order over
 * rows also runs on a copy in ordinary 4 KiB pages, in the same alternation, to show what
 * the pages are worth.
 * It also times the join of the blocks (hn_attn_merge_blocks) for every layer on one
 * thread (the context shares it out by query heads).  A benchmark,
 * not a test: it prints numbers and only fails if something errors.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hn-cpu.h"
#include "hn-quants.h"
#include "hn-simd.h"
#include "hn-threadpool.h"

enum { LAYERS = 22, KV_HEADS = 4, GROUP = 8, HEAD_DIM = 64, KV_DIM = KV_HEADS * HEAD_DIM };
/* cells per block, as the context's ATTN_BLOCK_CELLS */
enum { BLOCK = 128 };

static double
cpu_seconds(void)
{
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

/* Bytes that evict the last-level cache when read: twice its size, as the C library
 * reports it, and at least 64 MiB. */
static size_t
eviction_bytes(void)
{
  long llc = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
  const size_t least = (size_t) 64 << 20;
  return llc > 0 && 2 * (size_t) llc > least ? 2 * (size_t) llc : least;
}

static void
evict_caches(const unsigned char *buf, size_t bytes)
{
  unsigned sum = 0;
  for (size_t i = 0; i < bytes; i += 64)
    sum += buf[i];
  volatile unsigned sink = sum;
  (void) sink;
}

static void *
aligned_floats(size_t n)
{
  void *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

/* The keys and values of every layer, laid out for max_depth cells as a cache is for
 * n_ctx, and one token's queries. */
typedef struct {
  const uint16_t *k, *v;
  bool k_tiled;
  size_t per_layer;
  const int32_t *cells;
  const float *q;
  float *out;
  float *parts; /* every query head's block results, shared */
} Cache;

typedef struct {
  float *work, *scores;
} Scratch;

typedef struct {
  const Cache *cache;
  const HnSimdKernels *kern;
  int depth;
  bool blocked;
  Scratch scratch[2];
  double cpu[2]; /* each thread's CPU time */
} Run;

static int
block_cells(int depth, int b)
{
  return depth - b * BLOCK < BLOCK ? depth - b * BLOCK : BLOCK;
}

/* Thread ith of nth's share of one token's attention over every layer: whole KV heads
 * dealt round-robin ("by head"), or a contiguous range of blocks with every KV head run
 * over each ("by block"; the blocks are joined afterwards by join_blocks). */
static void
attention_share(void *data, int ith, int nth)
{
  Run *r = data;
  const Cache *c = r->cache;
  double t0 = cpu_seconds();
  HnAttnArgs a = {
    .head_dim = HEAD_DIM, .n_q = GROUP, .q_stride = HEAD_DIM, .scale = 0.125f, .kv_stride = KV_DIM,
    .out_stride = HEAD_DIM, .work = r->scratch[ith].work, .scores = r->scratch[ith].scores,
    .k_tiled = c->k_tiled, .next_to_l2 = hn_cpu_features()->intel,
  };
  const int k_head = HEAD_DIM * (c->k_tiled ? HN_KV_TILE : 1); /* from one KV head's keys to the next */
  const int n_blocks = (r->depth + BLOCK - 1) / BLOCK;
  const int part = (int) hn_attn_part_floats(KV_HEADS * GROUP, HEAD_DIM);
  for (int l = 0; l < LAYERS; l++) {
    const uint16_t *k = c->k + l * c->per_layer, *v = c->v + l * c->per_layer;
    if (!r->blocked) {
      a.cells = c->cells;
      a.n_cells = r->depth;
      for (int h = ith; h < KV_HEADS; h += nth) {
        a.q = c->q + h * GROUP * HEAD_DIM;
        a.k = k + h * k_head;
        a.v = v + h * HEAD_DIM;
        a.out = c->out + h * GROUP * HEAD_DIM;
        r->kern->attn(&a);
      }
      continue;
    }
    /* as attn_worker_split: every KV head in one call per block, which fetches the rows
     * of the thread's next block while it works */
    const int first = n_blocks * ith / nth, end = n_blocks * (ith + 1) / nth;
    for (int b = first; b < end; b++) {
      float *pb = c->parts + b * part;
      a.cells = c->cells + b * BLOCK;
      a.n_cells = block_cells(r->depth, b);
      a.kv_heads = KV_HEADS;
      a.q = c->q;
      a.k = k;
      a.v = v;
      a.out = pb;
      a.row_max = pb + KV_HEADS * GROUP * HEAD_DIM;
      a.row_sum = a.row_max + KV_HEADS * GROUP;
      a.next_cells = b + 1 < end ? a.cells + BLOCK : NULL;
      a.next_n_cells = b + 1 < end ? block_cells(r->depth, b + 1) : 0;
      r->kern->attn(&a);
    }
  }
  r->cpu[ith] = cpu_seconds() - t0;
}

static void
join_blocks(const Run *r)
{
  if (r->blocked)
    hn_attn_merge_blocks(r->cache->parts, (r->depth + BLOCK - 1) / BLOCK, KV_HEADS * GROUP, HEAD_DIM, 0,
                         KV_HEADS * GROUP, r->cache->out);
}

int
main(void)
{
  const int depths[] = { 1024, 4096, 8192 };
  const int max_depth = 8192;
  size_t per_layer = (size_t) max_depth * KV_DIM;
  const size_t kv_bytes = per_layer * LAYERS * sizeof(uint16_t);
  uint16_t *k = hn_huge_alloc(kv_bytes), *v = hn_huge_alloc(kv_bytes);
  uint16_t *k_small = malloc(kv_bytes), *v_small = malloc(kv_bytes), *k_tiles = hn_huge_alloc(kv_bytes);
  int32_t *cells = malloc(max_depth * sizeof(int32_t));
  float *q = aligned_floats(KV_HEADS * GROUP * HEAD_DIM), *out = aligned_floats(KV_HEADS * GROUP * HEAD_DIM);
  /* (room for every query head: the blocked order runs all of them in one call) */
  float *work = aligned_floats(hn_attn_work_floats(KV_HEADS * GROUP, HEAD_DIM));
  float *scores = aligned_floats(GROUP * hn_attn_score_stride(max_depth));
  float *work2 = aligned_floats(hn_attn_work_floats(KV_HEADS * GROUP, HEAD_DIM));
  float *scores2 = aligned_floats(GROUP * hn_attn_score_stride(max_depth));
  float *parts = aligned_floats((max_depth + BLOCK - 1) / BLOCK * hn_attn_part_floats(KV_HEADS * GROUP, HEAD_DIM));
  const size_t evict_bytes = eviction_bytes();
  unsigned char *evict = malloc(evict_bytes);
  if (!k || !v || !k_small || !v_small || !k_tiles || !cells || !evict)
    return 1;
  memset(evict, 1, evict_bytes);
  uint32_t state = 1;
  for (size_t i = 0; i < per_layer * LAYERS; i++) {
    state = state * 1664525u + 1013904223u;
    k[i] = hn_fp32_to_fp16((float) (state >> 8) / 16777216.0f - 0.5f);
    v[i] = hn_fp32_to_fp16((float) (state & 0xffff) / 65536.0f - 0.5f);
  }
  memcpy(k_small, k, kv_bytes);
  memcpy(v_small, v, kv_bytes);
  /* max_depth is a whole number of tiles */
  for (size_t l = 0; l < LAYERS; l++)
    for (size_t c = 0; c < (size_t) max_depth; c++)
      for (size_t j = 0; j < KV_DIM; j++)
        k_tiles[l * per_layer + c / HN_KV_TILE * HN_KV_TILE * KV_DIM + j * HN_KV_TILE + c % HN_KV_TILE] =
            k[l * per_layer + c * KV_DIM + j];
  for (int i = 0; i < max_depth; i++)
    cells[i] = i;
  for (int i = 0; i < KV_HEADS * GROUP * HEAD_DIM; i++)
    q[i] = hn_fp16_to_fp32(hn_fp32_to_fp16((float) (i * 37 % 101 - 50) / 64.0f));

  Cache rows = { .k = k, .v = v, .per_layer = per_layer, .cells = cells, .q = q, .out = out, .parts = parts };
  Cache cache = rows;
  cache.k = k_tiles;
  cache.k_tiled = true;
  Cache small_pages = cache;
  small_pages.k = k_small;
  small_pages.k_tiled = false;
  small_pages.v = v_small;
  /* the orders measured, alternating */
  enum { BY_HEAD, BY_BLOCK, BY_BLOCK_ROWS, BY_BLOCK_ROWS_SMALL_PAGES, N_ORDERS };
  static const char *const order_names[N_ORDERS] = { "by head", "by block", "by block, keys in rows",
                                                     "by block, rows, 4 KiB" };
  HnThreadPool *pool = hn_threadpool_new(2, NULL);
  if (!pool)
    return 1;
  printf("CPU time per token of the attention, TinyLlama decode shape (the slower thread's with\n"
         "two); \"by head\": whole KV heads over all the cells, dealt round-robin to the threads,\n"
         "\"by block\": blocks of %d cells, every KV head over each block, each thread a range\n"
         "of blocks, then joined (what a decode step does deep in a context); the caches are\n"
         "evicted before every run:\n", BLOCK);
  for (HnSimdLevel level = HN_SIMD_SCALAR + 1; level < HN_SIMD_LEVEL_COUNT; level++) {
    const HnSimdKernels *kern = hn_simd_kernels_for_level(level);
    if (!kern || !kern->attn || HEAD_DIM % kern->attn_multiple != 0)
      continue;
    for (int nth = 1; nth <= 2; nth++)
      for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++) {
        double best[N_ORDERS] = { 1e30, 1e30, 1e30, 1e30 }, best_join = 1e30;
        /* the orders alternate, so that a neighbour's burst hits them alike */
        for (int rep = 0; rep < 6 * N_ORDERS; rep++) { /* the first round is a warm-up */
          const int order = rep % N_ORDERS;
          const Cache *in = order == BY_BLOCK_ROWS_SMALL_PAGES ? &small_pages : order == BY_BLOCK_ROWS ? &rows : &cache;
          Run r = { .cache = in, .kern = kern,
                    .depth = depths[di], .blocked = order != BY_HEAD,
                    .scratch = { { work, scores }, { work2, scores2 } } };
          evict_caches(evict, evict_bytes);
          if (nth == 1)
            attention_share(&r, 0, 1);
          else
            hn_threadpool_run(pool, attention_share, &r);
          /* the context joins every layer's blocks on one thread, between the pool's runs */
          const double join_start = cpu_seconds();
          for (int l = 0; l < LAYERS; l++)
            join_blocks(&r);
          const double join = cpu_seconds() - join_start;
          if (rep >= N_ORDERS && order == BY_BLOCK && join < best_join)
            best_join = join;
          double t = nth == 1 || r.cpu[0] > r.cpu[1] ? r.cpu[0] : r.cpu[1];
          if (rep >= N_ORDERS && t < best[order])
            best[order] = t;
        }
        double bytes = (double) depths[di] * LAYERS * 2.0 * HEAD_DIM * KV_HEADS * sizeof(uint16_t);
        for (int order = 0; order < N_ORDERS; order++)
          printf("  %-16s %d thread%s %-22s depth %5d: %7.2f ms, %5.1f GB/s of keys and values\n",
                 hn_simd_level_name(level), nth, nth == 1 ? " " : "s", order_names[order], depths[di],
                 best[order] * 1e3, bytes / best[order] * 1e-9);
        printf("  %-16s %d thread%s %-22s depth %5d: %7.2f ms on one thread, every layer\n",
               hn_simd_level_name(level), nth, nth == 1 ? " " : "s", "joining the blocks", depths[di],
               best_join * 1e3);
      }
  }
  hn_threadpool_free(pool);
  hn_huge_free(k, kv_bytes);
  hn_huge_free(v, kv_bytes);
  hn_huge_free(k_tiles, kv_bytes);
  free(k_small);
  free(v_small);
  free(cells);
  free(q);
  free(out);
  free(work);
  free(scores);
  free(work2);
  free(scores2);
  free(parts);
  free(evict);
  return 0;
}
