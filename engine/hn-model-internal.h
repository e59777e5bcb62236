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

/* A matrix copied out of the file's mapping (hn-model-regroup.c). */
typedef struct {
  const HnGgufTensor **slot; /* the layer's or the model's pointer, which points at copy */
  const HnGgufTensor *file;  /* the file's tensor */
  int layer;                 /* -1: the output matrix */
  HnGgufTensor copy;
} HnPlacedMatrix;

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
  /* The blocks' matrices and a separate output matrix copied into memory of huge pages,
   * regrouped where their type has a layout for the decode kernel (hn-model-regroup.c);
   * the layer and output pointers above point at these copies */
  HnPlacedMatrix *placed;
  int n_placed, n_grouped; /* n_grouped of them in a regrouped layout */
  void *placed_mem; /* anonymous mapping of placed_bytes */
  size_t placed_bytes;
  size_t placed_held; /* of those, the copies not given back (hn_model_unplace_layers) */
};

/* Whether hn_model_regroup_weights regroups matrices of `type` on this processor: the
 * type has a regrouped layout whose tile the kernel table has, its decode choice (as
 * cached when the last model was loaded) is not the dot product, and HANASHI_REGROUP is
 * not "0". */
bool hn_model_regroups(HnType type);
/* Copies the blocks' matrices and a separate output matrix into memory of huge pages and
 * regroups those of the types above (see hn-model-regroup.c).  An optimization only:
 * without memory for the copy, or with HANASHI_REGROUP=0, the matrices stay in the
 * file's mapping and layout. */
void hn_model_regroup_weights(HnModel *m);
/* Points the matrices of layers first_layer.. back at the file and gives their copies'
 * memory back: those layers run on the graphics device, which has its own copy. */
void hn_model_unplace_layers(HnModel *m, int first_layer);
void hn_model_regroup_free(HnModel *m);
