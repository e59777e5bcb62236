/* hn-model-internal.h — the model struct, shared by hn-model.c and hn-context.c only. */
#pragma once

#include "hn-kv-cache.h"
#include "hn-model.h"
#include "hn-moe.h"
#include "hn-quants.h"

typedef struct {
  const HnGgufTensor *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
  float *attn_norm, *ffn_norm;  /* owned */
  float *bq, *bk, *bv;          /* owned, NULL when absent */
  /* mixture of experts (n_expert > 0 in the model): w_gate/w_up/w_down are NULL */
  HnMoeLayer moe;
  float *shexp_gate;            /* owned (moe.shexp_gate), NULL without a shared expert */
} HnLayer;

struct HnModel {
  HnGguf *gguf;
  char arch[32];
  int n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx_train, head_dim;
  float rms_eps;
  /* mixture of experts: 0 experts in a dense model */
  int n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
  bool expert_weights_norm; /* the chosen experts' weights are renormalised to sum 1 */
  HnRope rope;
  float *rope_factors; /* owned, NULL without rope_freqs */
  const HnGgufTensor *tok_embd, *output;
  float *out_norm;
  HnLayer *layers;
  int64_t n_params;
};
