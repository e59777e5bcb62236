/* hn-tokenizer-bpe.c — byte-level BPE: each pre-tokenizer piece starts as one symbol per
 * byte (the byte's GPT-2 printable character); adjacent pairs are merged lowest merge rank
 * first (leftmost on ties) using a hash map from (left id, right id) to rank. */
#include "hn-vocab-private.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  int32_t prev, next, id;
  uint32_t len; /* bytes covered; 0 = merged away */
} Sym;

typedef struct {
  int32_t rank, left, right, result;
  uint32_t size;
} Pair;

static bool
pair_before(const Pair *a, const Pair *b)
{
  return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

typedef struct {
  Pair *items;
  size_t n, cap;
} Heap;

static bool
heap_push(Heap *h, Pair b)
{
  if (h->n == h->cap) {
    size_t c = h->cap ? h->cap * 2 : 256;
    Pair *p = realloc(h->items, c * sizeof *p);
    if (p == NULL)
      return false;
    h->items = p;
    h->cap = c;
  }
  size_t i = h->n++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!pair_before(&b, &h->items[parent]))
      break;
    h->items[i] = h->items[parent];
    i = parent;
  }
  h->items[i] = b;
  return true;
}

static Pair
heap_pop(Heap *h)
{
  Pair top = h->items[0];
  Pair last = h->items[--h->n];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, best = i;
    const Pair *bp = &last;
    if (l < h->n && pair_before(&h->items[l], bp)) {
      best = l;
      bp = &h->items[l];
    }
    if (r < h->n && pair_before(&h->items[r], bp))
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

static bool
try_pair(const HnVocab *v, const Sym *syms, int32_t left, int32_t right, Heap *h)
{
  if (left < 0 || right < 0)
    return true;
  int32_t result;
  int32_t rank = hn_vocab_merge_rank(v, syms[left].id, syms[right].id, &result);
  if (rank < 0)
    return true;
  Pair p = { rank, left, right, result, syms[left].len + syms[right].len };
  return heap_push(h, p);
}

/* the piece in byte-level characters, for the whole-word lookup (ignore_merges) */
static int32_t
lookup_word(const HnVocab *v, const char *s, size_t len, char *scratch)
{
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    int32_t bt = v->byte_token[(unsigned char)s[i]];
    if (bt < 0)
      return -1;
    memcpy(scratch + o, v->text + v->tokens[bt].text_off, v->tokens[bt].text_len);
    o += v->tokens[bt].text_len;
  }
  return hn_vocab_lookup(v, scratch, o);
}

int64_t
hn_tokenize_bpe(const HnVocab *v, const char *text, size_t len, int32_t *out, int64_t n, int64_t n_max)
{
  uint32_t *pieces = NULL;
  int64_t n_pieces = hn_pretokenize(v->pre, text, len, &pieces);
  if (n_pieces < 0)
    return -1;
  size_t max_piece = 0;
  for (int64_t p = 0; p < n_pieces; p++)
    max_piece = HN_MAX(max_piece, (size_t)(pieces[2 * p + 1] - pieces[2 * p]));
  Sym *syms = malloc(sizeof(Sym) * (max_piece + 1));
  char *scratch = v->ignore_merges ? malloc(max_piece * 4 + 1) : NULL;
  Heap heap = { 0 };
  if (syms == NULL || (v->ignore_merges && scratch == NULL)) {
    free(pieces);
    free(syms);
    free(scratch);
    return -1;
  }
  bool ok = true;
  for (int64_t p = 0; p < n_pieces && ok; p++) {
    const char *s = text + pieces[2 * p];
    int32_t plen = (int32_t)(pieces[2 * p + 1] - pieces[2 * p]);
    if (v->ignore_merges) {
      int32_t id = lookup_word(v, s, (size_t)plen, scratch);
      if (id >= 0) {
        if (n < n_max)
          out[n] = id;
        n++;
        continue;
      }
    }
    for (int32_t i = 0; i < plen; i++)
      syms[i] = (Sym){ i - 1, i + 1 < plen ? i + 1 : -1, v->byte_token[(unsigned char)s[i]], 1 };
    heap.n = 0;
    for (int32_t i = 1; i < plen && ok; i++)
      ok = try_pair(v, syms, i - 1, i, &heap);
    while (ok && heap.n > 0) {
      Pair b = heap_pop(&heap);
      Sym *l = &syms[b.left], *r = &syms[b.right];
      if (l->len == 0 || r->len == 0 || l->len + r->len != b.size || l->next != b.right)
        continue;
      l->len += r->len;
      l->id = b.result;
      r->len = 0;
      l->next = r->next;
      if (r->next >= 0)
        syms[r->next].prev = b.left;
      ok = try_pair(v, syms, l->prev, b.left, &heap) && try_pair(v, syms, b.left, l->next, &heap);
    }
    for (int32_t i = 0; plen > 0 && i >= 0; i = syms[i].next) {
      if (syms[i].id >= 0) {
        if (n < n_max)
          out[n] = syms[i].id;
        n++;
      }
    }
  }
  free(heap.items);
  free(pieces);
  free(syms);
  free(scratch);
  return ok ? n : -1;
}
