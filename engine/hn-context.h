/* hn-context.h — evaluation state for one model: KV cache, scratch buffers, threads.
 *
 * One code path for prompt processing (many tokens per decode call) and generation
 * (one token): every matrix product quantizes the batch's activations once and streams
 * each weight row once for all tokens of the batch.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"
#include "hn-kv-cache.h"
#include "hn-memory.h"
#include "hn-model.h"
#include "hn-vk.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct HnContext HnContext;

#define HN_GPU_LAYERS_AUTO (-1)

typedef struct {
  int n_ctx;      /* KV cells; <= 0 or above the model's training length → capped by it */
  int n_batch;    /* most tokens per decode call (default 512) */
  int n_threads;  /* <= 0: physical cores */
  int n_seq_max;  /* sequences used at once (1..HN_KV_MAX_SEQ) */
  /* KV cells for all sequences together; below n_ctx (0): n_ctx.  More lets several
   * sequences of up to n_ctx positions each share one context (hn-chat-batch). */
  int n_kv_cells;
  /* Layers evaluated on a Vulkan device (the last ones; more than the model has: all of
   * them).  0: none, the CPU only.  When the device cannot take them (no device, an
   * architecture the device path lacks, its memory runs out), the context runs on the CPU
   * and hn_context_notice says why.  HN_GPU_LAYERS_AUTO: as many as fit the device's
   * memory with a margin (hn_vk_fit_layers); with gpu_device < 0 that never picks a
   * software driver, and no hardware device means the CPU without a notice. */
  int n_gpu_layers;
  int gpu_device; /* index in hn_vk_list_devices' order; < 0: the best device */
} HnContextParams;

HnContextParams hn_context_default_params(void);

typedef struct {
  int n_tokens;
  const int32_t *token;
  const int32_t *pos;
  const int32_t *seq_id;     /* NULL: all sequence 0 */
  const bool *want_logits;   /* NULL: only the last token */
  /* NULL: each product picks its kernels by the batch's size (the fastest).  Else every
   * row's kernels are fixed by the row itself, so its result does not depend on what else
   * the batch holds — several sequences decoded together then give bit for bit what each
   * gives alone: rows marked true (a sampled token fed back) go through the one-row decode
   * kernels, the others (prompt) through the batch GEMM, and logits rows through the
   * one-row kernels.  The generation loop (hn-generate-model) always sets it. */
  const bool *sampled;
} HnBatch;

/* Called between layers; returning true cancels the decode (HN_ERR_CANCELLED). */
typedef bool (*HnCancelFn)(void *user_data);

/* Fails with HN_ERR_NOMEM and a sentence ("This model needs about 5.2 GB of memory but only
 * 3.1 GB is available.") before allocating when weights + KV cache + scratch exceed
 * hn_memory_available(). */
HnContext *hn_context_new(const HnModel *model, const HnContextParams *params, HnError *err);
/* What hn_context_new would need for these parameters (after clamping). */
bool hn_context_memory_need(const HnModel *model, const HnContextParams *params, HnMemoryNeed *need);
/* A sentence for people when the parameters were changed (a context size beyond the
 * model's was clamped), else NULL. */
const char *hn_context_notice(const HnContext *ctx);
void hn_context_free(HnContext *ctx);

/* Evaluates the batch; more than n_batch tokens are split internally.  On failure the
 * cells claimed by this call are released again. */
bool hn_context_decode(HnContext *ctx, const HnBatch *batch, HnError *err);
/* Logits (n_vocab floats) of the i-th batch entry that asked for them, or NULL. */
const float *hn_context_get_logits(const HnContext *ctx, int i);
int hn_context_n_logits(const HnContext *ctx);
/* For the i-th logits row of a mixture-of-experts model: by how much (in router logits)
 * the token's closest expert choice was won — the last expert chosen over the best one
 * left out, the smallest over the layers.  INFINITY for a dense model, NAN for a row that
 * does not exist.  Where it is within rounding noise, another engine (or this one with
 * other kernels) may route the token elsewhere and its logits are not a fixed point of
 * comparison; the parity tests use it that way. */
float hn_context_routing_lead(const HnContext *ctx, int i);

int hn_context_n_ctx(const HnContext *ctx);
int hn_context_n_batch(const HnContext *ctx);
const HnModel *hn_context_model(const HnContext *ctx);
HnKvCache *hn_context_kv(HnContext *ctx);
/* The rotation keys were stored with (for hn_kv_cache_seq_shift). */
const HnRope *hn_context_rope(const HnContext *ctx);
/* Which per-dimension rope factors this context's keys use: 0 none or the model's only
 * ones, 1 Phi-3's short factors, 2 its long ones (chosen by the context size). */
uint32_t hn_context_rope_factor_set(const HnContext *ctx);
void hn_context_set_cancel(HnContext *ctx, HnCancelFn fn, void *user_data);
/* Layers that run on the graphics device now (0 when everything runs on the CPU, also
 * after the device failed during a decode), and the device's name (NULL then). */
int hn_context_gpu_layers(const HnContext *ctx);
const char *hn_context_gpu_device(const HnContext *ctx);
/* What the graphics device has been asked to do so far (hn_vk_offload_counts in
 * hn-vk.h: submissions, fence waits, dispatches); false, leaving *out alone, when no layer
 * runs there. */
bool hn_context_gpu_counts(const HnContext *ctx, HnVkCounts *out);
/* Only the sentences of hn_context_notice about the graphics device (why it was not used,
 * or stopped being used during a decode), or NULL. */
const char *hn_context_gpu_notice(const HnContext *ctx);

#ifdef __cplusplus
}
#endif
