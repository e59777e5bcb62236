/* hn-merge-heap.h — the priority queue of candidate merges both tokenizers use: adjacent
 * symbol pairs, best first, leftmost on ties.  Byte-level BPE ranks by merge rank (lower
 * first), SentencePiece by token score (higher first, so its priority is the negated score).
 * Entries go stale when a neighbour merges; callers skip those when popped (the pair's
 * combined size no longer matches), which keeps every operation O(log n).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  float priority;      /* lower merges first */
  int32_t left, right; /* symbol indices */
  int32_t result;      /* the merged token id when known (BPE), else -1 */
  uint32_t size;       /* bytes the pair covers when pushed */
} HnMergeCandidate;

typedef struct {
  HnMergeCandidate *items;
  size_t n, cap;
} HnMergeHeap;

/* false when out of memory (the heap is unchanged) */
bool hn_merge_heap_push(HnMergeHeap *heap, HnMergeCandidate candidate);
/* the best candidate; the heap must not be empty */
HnMergeCandidate hn_merge_heap_pop(HnMergeHeap *heap);
void hn_merge_heap_clear(HnMergeHeap *heap);
void hn_merge_heap_free(HnMergeHeap *heap);
