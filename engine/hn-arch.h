/* hn-arch.h — what sets the supported architectures apart, one row per architecture.
 *
 * The loader (hn-model.c) reads the tensors and keys a row asks for and the forward pass
 * (hn-context.c) branches on the traits, never on the architecture's name, so a new
 * architecture is a row here plus whatever genuinely new computation it brings.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stdbool.h>

#include "hn-gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HN_ACT_SILU,      /* SwiGLU: silu(gate) · up */
  HN_ACT_GELU_TANH, /* GeGLU: gelu(gate) · up, the tanh approximation */
} HnActivation;

/* Which layers attend through a sliding window (`<arch>.attention.sliding_window`). */
typedef enum {
  HN_SWA_NONE,
  HN_SWA_ALL,        /* every layer */
  HN_SWA_EVEN,       /* layers 0, 2, 4, … (gemma2) */
  HN_SWA_PERIODIC,   /* every layer except each swa_period-th: (il + 1) % period == 0 is global */
} HnSwaPattern;

typedef struct {
  const char *name;
  bool neox;            /* rope rotates pairs (i, i + n_rot/2) */
  float rms_eps;        /* when the file has no layer_norm_rms_epsilon */
  bool qkv_bias;        /* optional attn_q/k/v biases are read */
  bool qk_norm;         /* attn_q_norm / attn_k_norm: per-head RMSNorm before rope */
  bool fused_qkv;       /* attn_qkv holds q, k, v rows (separate tensors also accepted) */
  bool fused_gate_up;   /* ffn_up holds the gate rows, then the up rows; no ffn_gate */
  bool post_norms;      /* post_attention_norm and post_ffw_norm before each residual add */
  bool embd_scale;      /* embeddings × sqrt(n_embd) */
  bool softcaps;        /* attn_logit_softcapping / final_logit_softcapping keys */
  HnActivation act;
  HnSwaPattern swa;
  int swa_period;       /* HN_SWA_PERIODIC */
  bool swa_local_rope;  /* sliding layers rotate with base 1e4 (or rope.freq_base_swa), unscaled */
  int wide_query_layers; /* models of this many layers scale queries by 1/sqrt(n_embd/n_head)
                            instead of 1/sqrt(head size) (gemma2 27B, gemma3 27B); 0: never */
  bool long_short_rope; /* rope_factors_long / rope_factors_short (Phi-3 128k, Phi-4-mini) */
  bool moe;             /* a mixture of experts in place of the feed-forward (hn-moe.h); a
                           shared expert where expert_shared_feed_forward_length > 0 */
  bool moe_norm_weights; /* the chosen experts' router weights are renormalised to sum 1 */
} HnArch;

/* The row for general.architecture, or NULL when it is not supported. */
const HnArch *hn_arch_find(HnStr name);
/* "llama, qwen2, …" for error messages. */
const char *hn_arch_supported(void);
/* Whether layer il of n_layer attends through the sliding window. */
bool hn_arch_layer_is_sliding(const HnArch *arch, int il);

#ifdef __cplusplus
}
#endif
