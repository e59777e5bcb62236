/* hn-model-regroup.c — weights put in the layout of their decode kernel (today Q4_0).
 *
 * Generation reads every weight once per token, so its speed is that of the weight
 * kernel's inner loop against the memory bus.  In the file's Q4_0 layout (18-byte
 * blocks) the AVX-512 kernel spends a gather and a shuffle per block on the scales and
 * the nibbles, and on a 2-core Xeon it read only 60–75 % of the bandwidth the bus gives.
 * Regrouped (hn_q4_0_regroup_row: 16 scales together, then the quants of 16 blocks
 * interleaved four bytes at a time) the same bytes take about a third of the
 * instructions.  The regrouped copy lives in anonymous memory and the file's pages of
 * those tensors are released, so the resident size stays that of one copy.
 *
 * Only the matrices of the transformer blocks and a separate output matrix are
 * regrouped: the token embeddings are read a row at a time, in file layout.  Every other
 * reader of a regrouped tensor (the panel GEMM of prompts, the graphics upload, the
 * scalar reference) goes through its type, HN_TYPE_Q4_0_GROUPED.  Which types have a
 * regrouped layout, and how a row is converted, is the type table's business
 * (hn_type_regrouped, hn_type_regroup_row): nothing here names one.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-decode-choice.h"
#include "hn-model-internal.h"
#include "hn-simd.h"

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

/* The matrices that regrouping considers, as the places that point at them: every
 * block's seven and a separate output matrix.  slots has room for 7 per layer and one. */
static size_t
considered_slots(HnModel *m, const HnGgufTensor ***slots)
{
  size_t n = 0;
  for (int i = 0; i < m->n_layer; i++) {
    HnLayer *l = &m->layers[i];
    const HnGgufTensor **layer[7] = { &l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down };
    for (int s = 0; s < 7; s++)
      slots[n++] = layer[s];
  }
  if (m->output != m->tok_embd)
    slots[n++] = &m->output;
  return n;
}

/* The model is regrouped before any context exists to measure the decode kernels, so
 * what an earlier load measured on this processor decides; on the first load on a
 * processor model nothing is cached yet, and the types that would be regrouped are
 * measured now (on a pool made for it: the context measures the others on its own
 * threads) rather than regrouped without knowing whether their tile is the faster. */
static void
measure_undecided(const HnGgufTensor **tensors[], size_t n)
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
    hn_decode_calibrate(NULL, types, n_types);
}

/* Keeps the slots whose matrices are regrouped; returns how many. */
static size_t
keep_regrouped(const HnGgufTensor ***slots, size_t n)
{
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    if (wants_regroup(*slots[i]))
      slots[kept++] = slots[i];
  return kept;
}

static size_t
padded_bytes(const HnGgufTensor *t)
{
  return (t->nbytes + 63) & ~(size_t) 63;
}

void
hn_model_regroup_weights(HnModel *m)
{
  const HnGgufTensor ***slots = calloc((size_t) m->n_layer * 7 + 1, sizeof *slots);
  if (!slots)
    return;
  size_t n = considered_slots(m, slots);
  measure_undecided(slots, n);
  n = keep_regrouped(slots, n);
  size_t bytes = 0;
  for (size_t i = 0; i < n; i++)
    bytes += padded_bytes(*slots[i]);
  HnGgufTensor *copies = n > 0 ? calloc(n, sizeof *copies) : NULL;
  void *mem = copies ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
  if (mem == MAP_FAILED) {
    /* nothing to regroup, or no memory for the copy: decode reads the file layout */
    free(copies);
    free(slots);
    return;
  }
  /* fewer TLB misses in a decode that walks all of it; advice only */
  madvise(mem, bytes, MADV_HUGEPAGE);
  uint8_t *dst = mem;
  for (size_t i = 0; i < n; i++) {
    const HnGgufTensor *t = *slots[i];
    const HnType layout = hn_type_regrouped((HnType) t->type);
    const size_t row_bytes = hn_type_row_bytes(t->type, t->ne[0]);
    for (int64_t r = 0; r < t->ne[1]; r++)
      hn_type_regroup_row(layout, (const uint8_t *) t->data + (size_t) r * row_bytes, dst + (size_t) r * row_bytes,
                          t->ne[0]);
    release_pages(t->data, t->nbytes);
    copies[i] = *t;
    copies[i].data = dst;
    copies[i].type = layout;
    *slots[i] = &copies[i];
    dst += padded_bytes(t);
  }
  mprotect(mem, bytes, PROT_READ);
  m->grouped_tensors = copies;
  m->n_grouped = (int) n;
  m->grouped = mem;
  m->grouped_bytes = bytes;
  free(slots);
}

void
hn_model_regroup_free(HnModel *m)
{
  if (m->grouped)
    munmap(m->grouped, m->grouped_bytes);
  free(m->grouped_tensors);
}
