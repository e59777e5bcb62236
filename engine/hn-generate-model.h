/* hn-generate-model.h — drives the generation loop (hn-generate.h) with a real model:
 * an HnGenBackend over an HnContext and its vocabulary.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-context.h"
#include "hn-generate.h"
#include "hn-vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  HnGenBackend backend;   /* pass &this->backend to hn_generate_with_backend */
  HnContext *ctx;         /* borrowed */
  const HnVocab *vocab;   /* borrowed */
  int32_t *token, *pos, *seq;
  bool *want, *sampled;
  int32_t newline[8];     /* tokens whose bytes are exactly "\n" */
} HnGenModelBackend;

/* Sets up the backend (buffers for one batch of n_batch items). */
bool hn_gen_model_backend_init(HnGenModelBackend *b, HnContext *ctx, const HnVocab *vocab, HnError *err);
void hn_gen_model_backend_clear(HnGenModelBackend *b);

/* The grammar matcher's view of a vocabulary (exact token bytes, end-of-generation ids). */
HnGrammarVocab *hn_gen_grammar_vocab_new(const HnVocab *vocab, HnError *err);

#ifdef __cplusplus
}
#endif
