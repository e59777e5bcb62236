/* hn-generate-model.c — HnGenBackend over HnContext + HnVocab.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-generate-model.h"

#include <stdlib.h>
#include <string.h>

static bool
backend_decode(void *self, const HnGenBatchItem *items, size_t n, HnError *err)
{
  HnGenModelBackend *b = self;
  if (n == 0 || n > (size_t) hn_context_n_batch(b->ctx))
    return hn_error_set(err, HN_ERR_INVALID_ARG, "batch of %zu items (at most %d)", n,
                        hn_context_n_batch(b->ctx));
  for (size_t i = 0; i < n; i++) {
    b->token[i] = items[i].token;
    b->pos[i] = items[i].pos;
    b->seq[i] = items[i].seq;
    b->want[i] = items[i].want_logits;
    b->sampled[i] = items[i].sampled;
  }
  /* every row with its own kernels: a reply is the same decoded alone or together with
   * other sequences (hn-chat-batch) */
  HnBatch batch = { .n_tokens = (int) n, .token = b->token, .pos = b->pos, .seq_id = b->seq,
                    .want_logits = b->want, .sampled = b->sampled };
  return hn_context_decode(b->ctx, &batch, err);
}

static const float *
backend_get_logits(void *self, size_t k)
{
  HnGenModelBackend *b = self;
  return hn_context_get_logits(b->ctx, (int) k);
}

static void
backend_kv_truncate(void *self, int32_t seq, int32_t from)
{
  HnGenModelBackend *b = self;
  hn_kv_cache_seq_rm(hn_context_kv(b->ctx), seq, from, -1);
}

static bool
backend_is_eog(void *self, int32_t token)
{
  HnGenModelBackend *b = self;
  return hn_vocab_is_eog(b->vocab, token);
}

static const char *
backend_token_bytes(void *self, int32_t token, size_t *len)
{
  HnGenModelBackend *b = self;
  const char *bytes = hn_token_bytes(b->vocab, token, len);
  if (!bytes) {
    *len = 0;
    return "";
  }
  return bytes;
}

bool
hn_gen_model_backend_init(HnGenModelBackend *b, HnContext *ctx, const HnVocab *vocab, HnError *err)
{
  memset(b, 0, sizeof *b);
  const HnModel *model = hn_context_model(ctx);
  if (hn_vocab_n_tokens(vocab) > hn_model_n_vocab(model))
    return hn_error_set(err, HN_ERR_FORMAT, "the vocabulary has %d tokens but the model only %d logits",
                        hn_vocab_n_tokens(vocab), hn_model_n_vocab(model));
  size_t n = (size_t) hn_context_n_batch(ctx);
  b->ctx = ctx;
  b->vocab = vocab;
  b->token = malloc(n * sizeof *b->token);
  b->pos = malloc(n * sizeof *b->pos);
  b->seq = malloc(n * sizeof *b->seq);
  b->want = malloc(n * sizeof *b->want);
  b->sampled = malloc(n * sizeof *b->sampled);
  if (!b->token || !b->pos || !b->seq || !b->want || !b->sampled) {
    hn_gen_model_backend_clear(b);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory");
  }
  b->backend = (HnGenBackend) {
    .self = b,
    .n_vocab = hn_model_n_vocab(model),
    .n_ctx = hn_context_n_ctx(ctx),
    .max_batch = (int32_t) n,
    .decode = backend_decode,
    .get_logits = backend_get_logits,
    .kv_truncate = backend_kv_truncate,
    .is_eog = backend_is_eog,
    .token_bytes = backend_token_bytes,
    .newline_tokens = b->newline,
  };
  /* SentencePiece has <0x0A>, byte-level BPE "Ċ"; some vocabularies have both kinds */
  for (int32_t id = 0; id < hn_vocab_n_tokens(vocab) && b->backend.n_newline_tokens < HN_ARRAY_LEN(b->newline); id++) {
    size_t len = 0;
    const char *bytes = hn_token_bytes(vocab, id, &len);
    if (len == 1 && bytes[0] == '\n')
      b->newline[b->backend.n_newline_tokens++] = id;
  }
  return true;
}

void
hn_gen_model_backend_clear(HnGenModelBackend *b)
{
  free(b->token);
  free(b->pos);
  free(b->seq);
  free(b->want);
  free(b->sampled);
  memset(b, 0, sizeof *b);
}

HnGrammarVocab *
hn_gen_grammar_vocab_new(const HnVocab *vocab, HnError *err)
{
  int32_t n = hn_vocab_n_tokens(vocab);
  const char **bytes = malloc((size_t) n * sizeof *bytes);
  uint32_t *lens = malloc((size_t) n * sizeof *lens);
  bool *eog = malloc((size_t) n * sizeof *eog);
  HnGrammarVocab *gv = NULL;
  if (!bytes || !lens || !eog) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (int32_t i = 0; i < n; i++) {
    size_t len = 0;
    /* control tokens never spell grammar text */
    const char *b = hn_vocab_is_control(vocab, i) ? NULL : hn_token_bytes(vocab, i, &len);
    bytes[i] = b ? b : "";
    lens[i] = b ? (uint32_t) len : 0;
    eog[i] = hn_vocab_is_eog(vocab, i);
  }
  gv = hn_grammar_vocab_new(n, bytes, lens, eog, err);
out:
  free(bytes);
  free(lens);
  free(eog);
  return gv;
}
