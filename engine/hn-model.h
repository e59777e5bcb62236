/* hn-model.h — a loaded model: hyper-parameters and memory-mapped weights.
 *
 * Weights stay in the GGUF mapping in their quantized blocks; nothing is dequantized
 * ahead of time except the small norm vectors and biases. */
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

/* Loads `path` (llama, qwen2 or qwen2moe).  Errors name the tensor, key or type at fault. */
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
/* Mixture of experts: experts per layer and how many each token uses (0 and 0: dense). */
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
/* The GGUF the model reads from (for the vocabulary loader, fingerprints). */
const HnGguf *hn_model_gguf(const HnModel *model);

#ifdef __cplusplus
}
#endif
