/* hn-moe.h — the mixture-of-experts feed-forward block (qwen2moe, qwen3moe).
 *
 * A router (ffn_gate_inp) scores every expert per token; the top k experts' SwiGLU
 * feed-forwards run and their outputs are summed with the router's softmax weights
 * (renormalised over the chosen k or not, as the architecture defines).  qwen2moe adds a
 * shared expert that every token passes through, scaled by sigmoid(ffn_gate_inp_shexp · x).
 *
 * Speed: the experts are 3-D tensors in the mapping (one matrix per expert) and are read
 * in place.  A batch is grouped by expert — the rows routed to expert e are gathered, go
 * through one matrix product per weight, and are scattered back with their weights — so
 * each chosen expert's weights are read once per batch, and experts no token chose are
 * not read at all.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-gguf.h"
#include "hn-threadpool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tensors of one MoE layer (views into the mapping) and its sizes. */
typedef struct {
  int n_expert, n_expert_used, n_ff_exp, n_ff_shexp; /* n_ff_shexp 0: no shared expert */
  bool norm_weights;                  /* renormalise the chosen weights to sum 1 */
  const HnGgufTensor *router;         /* [n_embd, n_expert] */
  const HnGgufTensor *gate_exps, *up_exps; /* [n_embd, n_ff_exp, n_expert] */
  const HnGgufTensor *down_exps;      /* [n_ff_exp, n_embd, n_expert] */
  const HnGgufTensor *gate_shexp, *up_shexp, *down_shexp; /* NULL without a shared expert */
  const float *shexp_gate;            /* [n_embd] decoded, NULL without a shared expert */
} HnMoeLayer;

/* Scratch for batches of up to n_batch tokens, allocated once per context. */
typedef struct {
  int n_batch, n_embd, n_expert, n_expert_used, ff_width;
  float *probs;          /* [n_batch][n_expert] router logits, then probabilities */
  int32_t *choice;       /* [n_batch][n_expert_used] chosen experts per token */
  float *choice_weight;  /* [n_batch][n_expert_used] their weights */
  int32_t *group_start;  /* [n_expert + 1] where each expert's routed rows begin */
  int32_t *group_token;  /* [n_batch * n_expert_used] token of each routed row, by expert */
  float *group_weight;   /* [n_batch * n_expert_used] weight of each routed row */
  float *gathered;       /* [n_batch][n_embd] the rows routed to one expert */
  /* the next three have max(n_batch, n_expert_used + 1) rows: a decode step keeps every
   * chosen expert's (and the shared expert's) rows at once */
  float *expert_out;     /* [rows][n_embd] an expert's outputs */
  float *gate, *up;      /* [rows][widest feed-forward] */
  float *layer_lead;     /* [n_batch] this layer's routing leads (hn_moe_route) */
  float *lead;           /* [n_batch] the smallest over the layers, see hn_moe_forward */
} HnMoeScratch;

/* Widest feed-forward row of the layer shape (for the gate/up scratch and matmul scratch). */
int hn_moe_ff_width(int n_ff_exp, int n_ff_shexp);
/* Bytes of hn_matmul / hn_matvec_many scratch hn_moe_forward needs beyond what
 * hn_matmul needs for n_batch tokens (take the larger of the two). */
size_t hn_moe_act_scratch_bytes(int64_t widest_input, int n_expert_used);
/* Bytes hn_moe_scratch_init allocates. */
uint64_t hn_moe_scratch_bytes(int n_batch, int n_embd, int n_expert, int n_expert_used, int ff_width);
bool hn_moe_scratch_init(HnMoeScratch *s, int n_batch, int n_embd, int n_expert, int n_expert_used,
                         int ff_width, HnError *err);
void hn_moe_scratch_clear(HnMoeScratch *s);

/* Routing of n_tokens tokens from their router logits (rows of n_expert, overwritten
 * with the softmax): the k most probable experts per token, highest first (ties: the
 * lower index), with their probabilities, divided by the sum of the k when
 * norm_weights.  lead (NULL: not wanted) gets per token how far the last chosen expert's
 * router logit is above the best one left out (INFINITY when k = n_expert). */
void hn_moe_route(float *logits, int n_tokens, int n_expert, int k, bool norm_weights,
                  int32_t *choice, float *choice_weight, float *lead);

/* residual[t] += MoE(x[t]) for n_tokens rows of n_embd floats (residual must not alias
 * x).  act_scratch is hn_matmul scratch for rows up to max(n_embd, the layer's ff width)
 * and n_batch tokens.  s->lead[t] is lowered to this layer's routing lead of token t
 * (see hn_moe_route) when that is smaller: set it to INFINITY before the first layer to
 * get each token's closest expert choice. */
void hn_moe_forward(const HnMoeLayer *layer, HnMoeScratch *s, HnThreadPool *pool, const float *x,
                    int n_tokens, void *act_scratch, float *residual);

#ifdef __cplusplus
}
#endif
