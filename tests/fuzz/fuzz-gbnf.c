/* libFuzzer target: the GBNF parser; an accepted grammar is then driven with the input's
 * own bytes through the matcher and masked over a small vocabulary.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stddef.h>
#include <stdint.h>

#include "hn-grammar.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static HnGrammarVocab *
small_vocab (void)
{
  static const char *const bytes[] = { "a", "b", " ", "\"", "{", "}", "[", "]", ",", ":", "0", "1", "\n",
                                       "\xc3", "\xa9", "\xe3\x81\x82", "true", "null", "\\", "" };
  uint32_t lens[sizeof bytes / sizeof bytes[0]];
  bool eog[sizeof bytes / sizeof bytes[0]];
  int32_t n = (int32_t) (sizeof bytes / sizeof bytes[0]);
  for (int32_t i = 0; i < n; i++) {
    lens[i] = 0;
    while (bytes[i][lens[i]] != '\0')
      lens[i]++;
    eog[i] = i == n - 1;
  }
  HnError err = { 0 };
  return hn_grammar_vocab_new (n, bytes, lens, eog, &err);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static HnGrammarVocab *vocab;
  if (vocab == NULL)
    vocab = small_vocab ();
  HnError err = { 0 };
  HnGrammar *g = hn_grammar_parse ((const char *) data, size, NULL, &err);
  if (g == NULL)
    return 0;
  HnGrammarState *st = hn_grammar_state_new (g, vocab, &err);
  if (st != NULL) {
    float logits[20] = { 0 };
    hn_grammar_mask_logits (st, logits, 20);
    /* feed the grammar's own text, a byte at a time, as far as it is accepted */
    for (size_t i = 0; i < size && i < 256; i++)
      if (!hn_grammar_accept_bytes (st, data + i, 1))
        break;
    (void) hn_grammar_is_complete (st);
    hn_grammar_mask_logits (st, logits, 20);
    hn_grammar_state_free (st);
  }
  hn_grammar_free (g);
  return 0;
}
