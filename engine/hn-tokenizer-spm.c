/* hn-tokenizer-spm.c — SentencePiece-style tokenization: the text (spaces written as
 * U+2581) starts as one symbol per UTF-8 character; adjacent pairs whose concatenation is
 * a token are merged, highest score first (leftmost on ties), until no pair is a token.
 * Leftover symbols that are not tokens become byte tokens <0xXX> (or UNK).
 * A binary heap of candidate pairs keeps this O(n log n).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-merge-heap.h"
#include "hn-vocab-private.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  int32_t prev, next;
  uint32_t off, len; /* in the escaped text; len 0 = merged away */
} Sym;

static bool
mergeable(uint8_t type)
{
  return type != HN_TOKEN_TYPE_CONTROL && type != HN_TOKEN_TYPE_UNKNOWN && type != HN_TOKEN_TYPE_BYTE;
}

static bool
try_pair(const HnVocab *v, const char *text, const Sym *syms, int32_t left, int32_t right, HnMergeHeap *h)
{
  if (left < 0 || right < 0)
    return true;
  uint32_t size = syms[left].len + syms[right].len;
  int32_t id = hn_vocab_lookup(v, text + syms[left].off, size);
  /* SentencePiece merges only into pieces of its vocabulary proper: control, unknown and
   * byte tokens are never the result of a merge (typed "<0x41>" or "</s>" stays text) */
  if (id < 0 || !mergeable(v->tokens[id].type))
    return true;
  HnMergeCandidate c = { -v->tokens[id].score, left, right, -1, size };
  return hn_merge_heap_push(h, c);
}

static int
utf8_len(unsigned char c)
{
  static const int lens[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
  return lens[c >> 4];
}

int64_t
hn_tokenize_spm(const HnVocab *v, const char *in, size_t in_len, bool add_prefix, int32_t *out, int64_t n,
                int64_t n_max)
{
  size_t spaces = 0;
  for (size_t i = 0; i < in_len; i++)
    spaces += in[i] == ' ';
  size_t len = in_len + spaces * 2 + (add_prefix ? 3 : 0);
  char *text = malloc(len + 1);
  Sym *syms = malloc(sizeof(Sym) * (len + 1));
  HnMergeHeap heap = { 0 };
  if (text == NULL || syms == NULL) {
    free(text);
    free(syms);
    return -1;
  }
  size_t o = 0;
  if (add_prefix) {
    memcpy(text, "\xe2\x96\x81", 3);
    o = 3;
  }
  for (size_t i = 0; i < in_len; i++) {
    if (in[i] == ' ') {
      memcpy(text + o, "\xe2\x96\x81", 3);
      o += 3;
    } else
      text[o++] = in[i];
  }
  int32_t n_syms = 0;
  for (size_t i = 0; i < len;) {
    size_t l = HN_MIN((size_t)utf8_len((unsigned char)text[i]), len - i);
    syms[n_syms] = (Sym){ n_syms - 1, n_syms + 1, (uint32_t)i, (uint32_t)l };
    n_syms++;
    i += l;
  }
  if (n_syms > 0)
    syms[n_syms - 1].next = -1;
  /* Cut the text where no token can span two neighbouring characters: merges never cross
   * such a cut, so the pieces are independent and a small heap per piece gives the same
   * result as one heap over everything, much faster (the heap stays in cache). */
  bool ok = true;
  for (int32_t start = 0; start < n_syms && ok;) {
    int32_t end = start + 1;
    while (end < n_syms && hn_vocab_spm_pair_possible(v, text + syms[end - 1].off, syms[end - 1].len + syms[end].len))
      end++;
    syms[start].prev = -1;
    syms[end - 1].next = -1;
    hn_merge_heap_clear(&heap);
    for (int32_t i = start + 1; i < end && ok; i++)
      ok = try_pair(v, text, syms, i - 1, i, &heap);
    while (ok && heap.n > 0) {
      HnMergeCandidate b = hn_merge_heap_pop(&heap);
      Sym *l = &syms[b.left], *r = &syms[b.right];
      if (l->len == 0 || r->len == 0 || l->len + r->len != b.size)
        continue;
      l->len += r->len;
      r->len = 0;
      l->next = r->next;
      if (r->next >= 0)
        syms[r->next].prev = b.left;
      ok = try_pair(v, text, syms, l->prev, b.left, &heap) && try_pair(v, text, syms, b.left, l->next, &heap);
    }
    for (int32_t i = start; ok && i >= 0; i = syms[i].next) {
      const Sym *s = &syms[i];
      int32_t id = hn_vocab_lookup(v, text + s->off, s->len);
      if (id >= 0) {
        if (n < n_max)
          out[n] = id;
        n++;
        continue;
      }
      for (uint32_t k = 0; k < s->len; k++) {
        int32_t bt = v->byte_token[(unsigned char)text[s->off + k]];
        if (bt < 0)
          bt = v->unk;
        if (bt < 0)
          continue;
        if (n < n_max)
          out[n] = bt;
        n++;
      }
    }
    start = end;
  }
  hn_merge_heap_free(&heap);
  free(text);
  free(syms);
  return ok ? n : -1;
}
