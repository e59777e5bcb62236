/* hn-merge-heap.c — binary min-heap of merge candidates (see hn-merge-heap.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-merge-heap.h"
#include "hn-array.h"

#include <stdlib.h>

static bool
before(const HnMergeCandidate *a, const HnMergeCandidate *b)
{
  return a->priority < b->priority || (a->priority == b->priority && a->left < b->left);
}

bool
hn_merge_heap_push(HnMergeHeap *h, HnMergeCandidate c)
{
  if (!HN_ARRAY_RESERVE(h->items, h->cap, h->n + 1, 256))
    return false;
  size_t i = h->n++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(&c, &h->items[parent]))
      break;
    h->items[i] = h->items[parent];
    i = parent;
  }
  h->items[i] = c;
  return true;
}

HnMergeCandidate
hn_merge_heap_pop(HnMergeHeap *h)
{
  HnMergeCandidate top = h->items[0];
  HnMergeCandidate last = h->items[--h->n];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, best = i;
    const HnMergeCandidate *bp = &last;
    if (l < h->n && before(&h->items[l], bp)) {
      best = l;
      bp = &h->items[l];
    }
    if (r < h->n && before(&h->items[r], bp))
      best = r;
    if (best == i)
      break;
    h->items[i] = h->items[best];
    i = best;
  }
  if (h->n > 0)
    h->items[i] = last;
  return top;
}

void
hn_merge_heap_clear(HnMergeHeap *h)
{
  h->n = 0;
}

void
hn_merge_heap_free(HnMergeHeap *h)
{
  free(h->items);
  *h = (HnMergeHeap){ 0 };
}
