/* hn-model-internal.h — the model struct, shared by hn-model.c and hn-context.c only.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-arch.h"
#include "hn-kv-cache.h"
#include "hn-model.h"
#include "hn-moe.h"
#include "hn-quants.h"

typedef struct {
  const HnGgufTensor *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
  /* row ranges of fused tensors (attn_qkv, gate+up in ffn_up), read like separate ones */
  HnGgufTensor q_view, k_view, v_view, gate_view, up_view;
  float *attn_norm, *ffn_norm;            /* owned */
  float *attn_post_norm, *ffn_post_norm;  /* owned, NULL when the architecture has none */
  float *q_norm, *k_norm;                 /* owned, head_dim each, NULL when absent */
  float *bq, *bk, *bv;                    /* owned, NULL when absent */
  bool sliding;                           /* attends through the sliding window */
  /* mixture of experts (traits->moe): w_gate/w_up/w_down are NULL */
  HnMoeLayer moe;
  float *shexp_gate;                      /* owned (moe.shexp_gate), NULL without a shared expert */
} HnLayer;

struct HnModel {
  HnGguf *gguf;
  const HnArch *traits;
  char arch[32];
  int n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx_train, head_dim;
  int n_ctx_orig;      /* rope.scaling.original_context_length (long/short rope factors) */
  float rms_eps;
  /* mixture of experts (traits->moe; n_expert and n_expert_used are below) */
  int n_ff_exp, n_ff_shexp;
  bool expert_weights_norm; /* the chosen experts' weights are renormalised to sum 1 */
  float query_scale;   /* multiplies q·k */
  float embd_scale;    /* multiplies the token embeddings (1 unless gemma) */
  float attn_softcap, final_softcap; /* 0: none */
  int swa_window;      /* sliding window in tokens, 0: none */
  int n_sliding;       /* layers that attend through the window */
  HnRope rope;         /* global layers (and every layer without sliding-window rope) */
  HnRope rope_local;   /* sliding layers */
  float *rope_factors; /* owned, NULL without rope_freqs */
  float *rope_long, *rope_short; /* owned, NULL without rope_factors_long/short */
  float rope_local_base;
  const HnGgufTensor *tok_embd, *output;
  float *out_norm;
  HnLayer *layers;
  bool *layer_sliding; /* n_layer, for hn_model_describe */
  int n_expert, n_expert_used; /* as the file states; the experts run where traits->moe */
  int64_t n_params;
  /* Q4_0 matrices regrouped for the decode kernel (hn-model-regroup.c); the layer and
   * output pointers above point at these copies */
  HnGgufTensor *grouped_tensors;
  int n_grouped;
  void *grouped; /* anonymous mapping of grouped_bytes */
  size_t grouped_bytes;
};

/* Whether hn_model_regroup_weights regroups matrices of `type` on this processor: the
 * type has a regrouped layout whose tile the kernel table has, its decode choice (as
 * cached when the last model was loaded) is not the dot product, and HANASHI_REGROUP is
 * not "0". */
bool hn_model_regroups(HnType type);
/* Regroups the model's matrices of those types (see hn-model-regroup.c).  An
 * optimization only: without memory for the copy the matrices keep the file layout. */
void hn_model_regroup_weights(HnModel *m);
void hn_model_regroup_free(HnModel *m);
