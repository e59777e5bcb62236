/* hn-tokenizer-bpe.c — byte-level BPE: each pre-tokenizer piece starts as one symbol per
 * byte (the byte's GPT-2 printable character); adjacent pairs are merged lowest merge rank
 * first (leftmost on ties) using a hash map from (left id, right id) to rank.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-merge-heap.h"
#include "hn-vocab-private.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  int32_t prev, next, id;
  uint32_t len; /* bytes covered; 0 = merged away */
} Sym;

static bool
try_pair(const HnVocab *v, const Sym *syms, int32_t left, int32_t right, HnMergeHeap *h)
{
  if (left < 0 || right < 0)
    return true;
  int32_t result;
  int32_t rank = hn_vocab_merge_rank(v, syms[left].id, syms[right].id, &result);
  if (rank < 0)
    return true;
  /* ranks are below 2^24, exact as floats */
  HnMergeCandidate c = { (float)rank, left, right, result, syms[left].len + syms[right].len };
  return hn_merge_heap_push(h, c);
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
  HnMergeHeap heap = { 0 };
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
    hn_merge_heap_clear(&heap);
    for (int32_t i = 1; i < plen && ok; i++)
      ok = try_pair(v, syms, i - 1, i, &heap);
    while (ok && heap.n > 0) {
      HnMergeCandidate b = hn_merge_heap_pop(&heap);
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
  hn_merge_heap_free(&heap);
  free(pieces);
  free(syms);
  free(scratch);
  return ok ? n : -1;
}
