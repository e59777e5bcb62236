/* hn-model.h — a loaded model: hyper-parameters and memory-mapped weights.
 *
 * Weights stay in the GGUF mapping in their quantized blocks; nothing is dequantized
 * ahead of time except the small norm vectors and biases.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"
#include "hn-gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct HnModel HnModel;

typedef struct {
  int reserved; /* room for future options (e.g. mlock) */
} HnModelParams;

/* What sets a model's architecture apart, for `hanashi-cli info` and the about dialogs. */
typedef struct {
  int n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim;
  int sliding_window;      /* tokens, 0: every layer sees the whole context */
  int n_sliding;           /* layers that attend through the window */
  const bool *layer_sliding; /* n_layer entries, owned by the model */
  float attn_softcap, final_softcap; /* 0: none */
  bool qk_norm;            /* per-head RMSNorm of queries and keys */
  bool neox_rope;
  int rope_dims;           /* dimensions of each head that are rotated */
  float rope_base, rope_linear_factor; /* factor 1: no scaling */
  float rope_local_base;   /* sliding layers' base when it differs (gemma3), else 0 */
  bool rope_long_short;    /* Phi-3 long/short per-dimension factors */
  bool rope_freq_factors;  /* llama3-style rope_freqs */
  int n_expert, n_expert_used; /* from <arch>.expert_count / expert_used_count, 0 when absent */
} HnModelDescription;

/* Loads `path` (see hn_arch_supported()).  Errors name the tensor, key or type at fault. */
HnModel *hn_model_load(const char *path, const HnModelParams *params, HnError *err);
/* Same over an already opened GGUF; the model takes ownership of it, also on failure. */
HnModel *hn_model_from_gguf(HnGguf *gguf, HnError *err);
void hn_model_free(HnModel *model);

const char *hn_model_arch(const HnModel *model);
int hn_model_n_vocab(const HnModel *model);
int hn_model_n_ctx_train(const HnModel *model);
int hn_model_n_embd(const HnModel *model);
int hn_model_n_layer(const HnModel *model);
int64_t hn_model_n_params(const HnModel *model);
/* Experts per layer and how many each token uses, as <arch>.expert_count and
 * expert_used_count state (0 when absent). */
int hn_model_n_expert(const HnModel *model);
int hn_model_n_expert_used(const HnModel *model);
size_t hn_model_file_size(const HnModel *model);
/* Bytes of weights that inference keeps in memory: every mapped tensor plus the engine's
 * own float copies (norms, biases). */
uint64_t hn_model_resident_bytes(const HnModel *model);
/* "Q4_K (120), F32 (45)": tensor counts per weight type, most frequent first. */
void hn_model_type_summary(const HnModel *model, char *buf, size_t size);
/* The main weight type, hn_gguf_main_weight_type() of the model file (tolerance choices, info). */
uint32_t hn_model_main_type(const HnModel *model);
void hn_model_describe(const HnModel *model, HnModelDescription *out);
/* The GGUF the model reads from (for the vocabulary loader, fingerprints). */
const HnGguf *hn_model_gguf(const HnModel *model);

#ifdef __cplusplus
}
#endif
