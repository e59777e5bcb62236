/* hn-quantize.h — converts a GGUF model to another weight type or a type mix.
 *
 * Targets are named like the reference tool's file types:
 *   F32 F16 BF16                every 2-D weight in that type;
 *   Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q3_K Q4_K Q5_K Q6_K
 *                               every 2-D weight in that type, except output.weight
 *                               (or token_embd.weight when the embeddings are tied) in Q6_K;
 *   Q2_K                        the reference's Q2_K mix (attn_output/ffn_down/attn_v in Q3_K
 *                               or Q4_K);
 *   Q3_K_M Q4_K_M Q5_K_M        the reference's medium mixes.
 * 1-D tensors (norms, biases) keep their type.  Rows whose length does not fit a k-quant
 * block fall back to a 32-element type of similar size (Q4_0, Q5_0, Q5_1, Q8_0), and to
 * F16 when not even that fits.  The result is byte-identical to the reference tool's
 * output for the same input (no importance matrix).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"
#include "hn-gguf.h"
#include "hn-quants.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char *name;   /* "Q4_K_M" */
  HnType base;        /* the type most tensors get */
  uint32_t file_type; /* value of general.file_type */
} HnQuantizeTarget;

/* Looks up a target by name (case-insensitive); NULL if unknown. */
const HnQuantizeTarget *hn_quantize_target_find(const char *name);

/* All targets, NULL-name terminated (for help texts). */
const HnQuantizeTarget *hn_quantize_targets(void);

/* The type tensor `index` of `src` gets under `target`. */
HnType hn_quantize_tensor_type(const HnGguf *src, const HnQuantizeTarget *target, int64_t index);

/* Called after each tensor; returning false cancels. */
typedef bool (*HnQuantizeProgress)(void *user, int64_t done, int64_t total, const char *tensor, HnType type);

/* Reads `in_path`, writes `out_path` (through a temporary file; never half-written).
 * `n_threads` <= 0 means 1. */
bool hn_quantize_model(const char *in_path, const char *out_path, const HnQuantizeTarget *target,
                       int n_threads, HnQuantizeProgress progress, void *user, HnError *err);

#ifdef __cplusplus
}
#endif
