/* hn-model-regroup.c — weights placed in huge pages at load, and put in the layout of
 * their decode kernel (Q4_0, Q8_0, Q5_0, Q4_1, Q5_1) on the way.
 *
 * Generation reads every weight once per token, so its speed is that of the weight
 * kernel's inner loop against the memory bus.  In the file's Q4_0 layout (18-byte
 * blocks) the AVX-512 kernel spends a gather and a shuffle per block on the scales and
 * the nibbles, and on a 2-core Xeon it read only 60–75 % of the bandwidth the bus gives.
 * Regrouped (hn-quants.h, "Regrouped layouts": 16 scales together, then the quants of
 * 16 blocks interleaved four bytes at a time) the same bytes take about a third of the
 * instructions; the other 32-element types likewise.  Every matrix of the blocks — the
 * experts of a mixture too — and a separate output matrix is copied into anonymous
 * memory of huge pages (regrouped or not: from the file's 4 KiB pages decode paid a page
 * walk every 4 KiB), and the file's pages of each piece are released once it is
 * copied, so the resident size stays about that of one copy.
 *
 * The token embeddings are read a row at a time and stay in the file.  Only 2-D
 * matrices are regrouped (the experts keep the file layout).  Every other
 * reader of a regrouped tensor (the panel GEMM of prompts, the graphics upload, the
 * scalar reference) goes through its type (HN_TYPE_Q4_0_GROUPED, ...).  Which types have a
 * regrouped layout, and how a row is converted, is the type table's business
 * (hn_type_regrouped, hn_type_regroup_row): nothing here names one.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-decode-choice.h"
#include "hn-model-internal.h"
#include "hn-simd.h"
#include "hn-threadpool.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A matrix whose type has a regrouped layout with a tile in this processor's table, with
 * at least one whole run per row: regrouped unless the type's dot product is faster. */
static bool
may_regroup(const HnGgufTensor *t)
{
  if (!t || t->ne[2] != 1 || t->ne[3] != 1)
    return false;
  const HnSimdKernels *k = hn_simd_kernels();
  const HnType layout = hn_type_regrouped((HnType) t->type);
  return k && layout != HN_TYPE_COUNT && k->gemm_tile[layout] && t->ne[0] >= hn_type_group_elems(layout);
}

static bool
wants_regroup(const HnGgufTensor *t)
{
  return may_regroup(t) && hn_model_regroups((HnType) t->type);
}

/* Drops this process's mapping of the whole pages inside [p, p + size): they are not
 * read again, and the page cache keeps them for the next load. */
static void
release_pages(const void *p, size_t size)
{
  const uintptr_t page = (uintptr_t) sysconf(_SC_PAGESIZE);
  uintptr_t start = ((uintptr_t) p + page - 1) & ~(page - 1), end = ((uintptr_t) p + size) & ~(page - 1);
  if (end > start)
    madvise((void *) start, end - start, MADV_DONTNEED);
}

/* HANASHI_REGROUP=0 keeps the file layout, for comparisons. */
static bool
regroup_turned_off(void)
{
  const char *env = getenv("HANASHI_REGROUP");
  return env && strcmp(env, "0") == 0;
}

bool
hn_model_regroups(HnType type)
{
  const HnSimdKernels *k = hn_simd_kernels();
  const HnType layout = hn_type_regrouped(type);
  if (regroup_turned_off() || !k || layout == HN_TYPE_COUNT || !k->gemm_tile[layout])
    return false;
  /* a processor on which the type's dot product was measured faster keeps it */
  return hn_decode_kernel(k, type) != HN_DECODE_DOT;
}

/* Matrices a block may have: the seven of attention and a dense feed-forward, and the
 * router, the experts and the shared expert of a mixture of experts (those a block lacks
 * are NULL). */
#define SLOTS_PER_LAYER 14

/* The matrices that placing considers, as the places that point at them, and the layer
 * of each (-1: the output matrix): every block's and a separate output matrix.  slots
 * and layers have room for SLOTS_PER_LAYER per layer and one; empty slots are listed
 * too. */
static size_t
considered_slots(HnModel *m, const HnGgufTensor ***slots, int *layers)
{
  size_t n = 0;
  for (int i = 0; i < m->n_layer; i++) {
    HnLayer *l = &m->layers[i];
    HnMoeLayer *x = &l->moe;
    const HnGgufTensor **layer[SLOTS_PER_LAYER] = {
      &l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down,
      &x->router, &x->gate_exps, &x->up_exps, &x->down_exps, &x->gate_shexp, &x->up_shexp, &x->down_shexp,
    };
    for (int s = 0; s < SLOTS_PER_LAYER; s++) {
      layers[n] = i;
      slots[n++] = layer[s];
    }
  }
  if (m->output != m->tok_embd) {
    layers[n] = -1;
    slots[n++] = &m->output;
  }
  return n;
}

/* Rows of a matrix, or of all the experts of a stack of them. */
static int64_t
all_rows(const HnGgufTensor *t)
{
  return t->ne[1] * t->ne[2];
}

/* The model is regrouped before any context exists to measure the decode kernels, so
 * what an earlier load measured on this processor decides; on the first load on a
 * processor model nothing is cached yet, and the types that would be regrouped are
 * measured now (on a pool made for it: the context measures the others on its own
 * threads) rather than regrouped without knowing whether their tile is the faster. */
static void
measure_undecided(HnThreadPool *pool, const HnGgufTensor **tensors[], size_t n)
{
  hn_decode_load_cached();
  HnType types[HN_TYPE_COUNT];
  bool listed[HN_TYPE_COUNT] = { false };
  int n_types = 0;
  for (size_t i = 0; i < n; i++)
    if (may_regroup(*tensors[i]) && !listed[(*tensors[i])->type]) {
      listed[(*tensors[i])->type] = true;
      types[n_types++] = (HnType) (*tensors[i])->type;
    }
  if (n_types > 0 && !regroup_turned_off())
    hn_decode_calibrate(pool, types, n_types);
}

static size_t
padded_bytes(const HnGgufTensor *t)
{
  return (t->nbytes + 63) & ~(size_t) 63;
}

/* MemAvailable of /proc/meminfo in bytes; 0 where it cannot be read. */
static size_t
available_memory(void)
{
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f)
    return 0;
  char line[128];
  unsigned long long kib = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
      break;
  fclose(f);
  return (size_t) kib * 1024;
}

/* The copying, shared by the threads in units of about UNIT_BYTES of one matrix. */
#define UNIT_BYTES ((size_t) 4 << 20)
#define POOL_BYTES ((size_t) 64 << 20)

typedef struct {
  HnPlacedMatrix *placed;
  size_t n;
  int64_t *first_unit; /* n + 1 */
  int64_t *unit_rows;  /* n */
  atomic_int_fast64_t next;
} CopyJob;

static void
copy_worker(void *data, int ith, int nth)
{
  CopyJob *job = data;
  (void) ith;
  (void) nth;
  size_t i = 0;
  for (int64_t u; (u = atomic_fetch_add(&job->next, 1)) < job->first_unit[job->n];) {
    while (u >= job->first_unit[i + 1])
      i++;
    const HnPlacedMatrix *p = &job->placed[i];
    const HnGgufTensor *t = p->file;
    const size_t row_bytes = hn_type_row_bytes(t->type, t->ne[0]);
    const int64_t r0 = (u - job->first_unit[i]) * job->unit_rows[i];
    const int64_t r1 = r0 + job->unit_rows[i] < all_rows(t) ? r0 + job->unit_rows[i] : all_rows(t);
    const uint8_t *src = (const uint8_t *) t->data + (size_t) r0 * row_bytes;
    uint8_t *dst = (uint8_t *) p->copy.data + (size_t) r0 * row_bytes;
    if (p->copy.type == t->type) {
      memcpy(dst, src, (size_t) (r1 - r0) * row_bytes);
    } else {
      for (int64_t r = r0; r < r1; r++)
        hn_type_regroup_row(p->copy.type, src + (size_t) (r - r0) * row_bytes, dst + (size_t) (r - r0) * row_bytes,
                            t->ne[0]);
    }
    /* the file's pages of this unit go as soon as it is copied, so that the process
     * holds about one copy of the weights at any time, not both at the end */
    release_pages(src, (size_t) (r1 - r0) * row_bytes);
  }
}

/* Copies every placed matrix, on the pool's threads where there is one. */
static bool
copy_placed(HnThreadPool *pool, HnPlacedMatrix *placed, size_t n)
{
  CopyJob job = { .placed = placed, .n = n };
  job.first_unit = calloc(n + 1, sizeof *job.first_unit);
  job.unit_rows = calloc(n, sizeof *job.unit_rows);
  if (!job.first_unit || !job.unit_rows) {
    free(job.first_unit);
    free(job.unit_rows);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    const HnGgufTensor *t = placed[i].file;
    const size_t row_bytes = hn_type_row_bytes(t->type, t->ne[0]);
    job.unit_rows[i] = row_bytes >= UNIT_BYTES ? 1 : (int64_t) (UNIT_BYTES / row_bytes);
    job.first_unit[i + 1] = job.first_unit[i] + (all_rows(t) + job.unit_rows[i] - 1) / job.unit_rows[i];
  }
  atomic_init(&job.next, 0);
  if (pool)
    hn_threadpool_run(pool, copy_worker, &job);
  else
    copy_worker(&job, 0, 1);
  free(job.first_unit);
  free(job.unit_rows);
  return true;
}

void
hn_model_regroup_weights(HnModel *m)
{
  const HnGgufTensor ***slots = calloc((size_t) m->n_layer * SLOTS_PER_LAYER + 1, sizeof *slots);
  int *layers = calloc((size_t) m->n_layer * SLOTS_PER_LAYER + 1, sizeof *layers);
  HnThreadPool *pool = NULL;
  HnPlacedMatrix *placed = NULL;
  void *mem = NULL;
  size_t n = 0, bytes = 0;
  if (!slots || !layers)
    goto out;
  n = considered_slots(m, slots, layers);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    if (*slots[i] && (*slots[i])->ne[3] == 1) {
      layers[kept] = layers[i];
      slots[kept++] = slots[i];
      bytes += padded_bytes(*slots[i]);
    }
  n = kept;
  /* copying on one thread per physical core (no context exists yet) where the copy is
   * large enough for threads to pay: not for the small test models, whose loads under
   * qemu (the ARM64 check) spun for minutes in a pool of threads */
  if (bytes >= POOL_BYTES && !regroup_turned_off())
    pool = hn_threadpool_new(0, NULL);
  measure_undecided(pool, slots, n);
  /* The copy is anonymous memory, which the kernel cannot drop under pressure as it
   * drops the file's pages: a model that would leave less than half of the available
   * memory to everything else is read from the file's mapping instead. */
  const size_t available = available_memory();
  const bool fits = available == 0 || bytes <= available / 2;
  placed = n > 0 && fits && !regroup_turned_off() ? calloc(n, sizeof *placed) : NULL;
  mem = placed ? hn_huge_alloc(bytes) : NULL;
  if (!mem) /* nothing to place, or no memory for the copy: decode reads the file's mapping */
    goto out;
  uint8_t *dst = mem;
  int n_grouped = 0;
  for (size_t i = 0; i < n; i++) {
    const HnGgufTensor *t = *slots[i];
    HnPlacedMatrix *p = &placed[i];
    p->slot = slots[i];
    p->file = t;
    p->layer = layers[i];
    p->copy = *t;
    p->copy.data = dst;
    if (wants_regroup(t)) {
      p->copy.type = hn_type_regrouped((HnType) t->type);
      n_grouped++;
    }
    dst += padded_bytes(t);
  }
  if (!copy_placed(pool, placed, n)) {
    hn_huge_free(mem, bytes);
    mem = NULL;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    release_pages(placed[i].file->data, placed[i].file->nbytes);
    *slots[i] = &placed[i].copy;
  }
  mprotect(mem, bytes, PROT_READ);
  m->placed = placed;
  m->n_placed = (int) n;
  m->n_grouped = n_grouped;
  m->placed_mem = mem;
  m->placed_bytes = bytes;
  m->placed_held = bytes;
  placed = NULL;
out:
  free(placed);
  free(slots);
  free(layers);
  hn_threadpool_free(pool);
}

void
hn_model_unplace_layers(HnModel *m, int first_layer)
{
  for (int i = 0; i < m->n_placed; i++) {
    HnPlacedMatrix *p = &m->placed[i];
    if (p->layer < first_layer || *p->slot != &p->copy)
      continue;
    *p->slot = p->file;
    if (hn_type_file_layout(p->copy.type) != p->copy.type)
      m->n_grouped--;
    release_pages(p->copy.data, p->copy.nbytes);
    m->placed_held -= padded_bytes(&p->copy);
  }
}

void
hn_model_regroup_free(HnModel *m)
{
  if (m->placed_mem)
    hn_huge_free(m->placed_mem, m->placed_bytes);
  free(m->placed);
}
