/* hn-vk.h — the Vulkan compute backend: device discovery and the offload of a model's last
 * layers to a graphics device.
 *
 * Plain C11 without GLib, like the rest of the engine core.  When the build has Vulkan
 * disabled (meson -Dvulkan=disabled, or auto without glslc/libvulkan) the same functions
 * exist and report that no device can be used, so callers never need #ifdefs.
 *
 * What runs where (see docs/vulkan.md): the device evaluates layers first_layer..n_layer-1
 * of a llama-family model (llama, qwen2, qwen3 traits) in one command buffer per
 * micro-batch; embeddings, the CPU's layers, the output norm and the output matrix stay on
 * the processor.  The KV cache of every layer lives in memory that both sides can see, so
 * session files, sequence shifts and a fall back to the CPU need no copies.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hn-common.h"
#include "hn-kv-cache.h"
#include "hn-model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  char name[256];
  char driver[256];  /* driver name and version text, or "unknown" */
  const char *type;  /* "discrete", "integrated", "virtual", "cpu" or "other" */
  uint64_t memory;   /* bytes of device-local memory */
  uint32_t api_version;
} HnVkDeviceInfo;

/* Whether this build has the Vulkan backend. */
bool hn_vk_built(void);

/* Lists up to max devices into out; returns how many exist (may exceed max), or -1 with a
 * sentence in err when there is no Vulkan driver at all. */
int hn_vk_list_devices(HnVkDeviceInfo *out, int max, HnError *err);

typedef struct HnVkOffload HnVkOffload;

typedef struct {
  int first_layer; /* layers first_layer..n_layer-1 run on the device */
  int n_ctx;       /* KV cells */
  int n_batch;     /* most tokens per run */
  int device;      /* index in hn_vk_list_devices' order; < 0: the best one */
} HnVkOffloadParams;

/* Picks the device, builds the shaders, uploads the offloaded layers' weights once and
 * allocates the shared KV storage.  Fails with a sentence for people (HN_ERR_UNSUPPORTED
 * for no device or an architecture the device path lacks, HN_ERR_NOMEM when the device's
 * memory runs out) and leaves nothing behind.
 *
 * Test seams: HANASHI_VULKAN_MEMORY_LIMIT=<bytes> makes the offload treat the device as
 * having only that much memory, to exercise the out-of-memory path;
 * HANASHI_VULKAN_FAIL=<failures> makes it fail where a driver could (see docs/vulkan.md):
 * a comma-separated list of shader:NAME (that shader does not build), push-descriptors
 * (the driver lacks them), range:BYTES (the device binds at most BYTES at once), lost:N
 * and timeout:N (the N-th run of the layers loses the device or does not finish), unbuilt
 * (every function answers as in a build without Vulkan, for the app's tests),
 * small-workgroups (the device takes only the 128 invocations per workgroup that Vulkan
 * guarantees, too few for the tiled matrix kernel). */
HnVkOffload *hn_vk_offload_new(const HnModel *model, const HnVkOffloadParams *params, HnError *err);
void hn_vk_offload_free(HnVkOffload *offload);

/* How many of the model's last layers the device takes with a margin, for "Auto" (the app)
 * and -ngl auto (the CLI); first_layer in params is ignored.  The device's memory is the
 * budget its driver reports as free now (VK_EXT_memory_budget) or else its device-local
 * heaps, capped by HANASHI_VULKAN_MEMORY_LIMIT.  Out of that come, first, what every
 * offload allocates whatever its layer count (the KV cache of every layer, the activations,
 * the inputs and outputs, the upload buffer of a card the processor cannot map) and the
 * margin, HN_VK_FIT_MARGIN_PERCENT of it but at most HN_VK_FIT_MARGIN_MAX bytes, left for
 * the driver and other programs; the layers' weights, as they would be uploaded, fill the
 * rest from the last layer down.
 *
 * With params->device < 0 only hardware devices are considered: a software driver such
 * as lavapipe is slower than the processor, so it runs a model only when it is named.
 * Returns the layer count (0..n_layer; 0 with a sentence in err when the device cannot
 * take even one layer or this model), or -1 with a sentence in err when there is no
 * device to use (no driver, no hardware device, no such device number). */
#define HN_VK_FIT_MARGIN_PERCENT 10
#define HN_VK_FIT_MARGIN_MAX ((uint64_t) 1 << 30)
int hn_vk_fit_layers(const HnModel *model, const HnVkOffloadParams *params, HnError *err);

/* The KV storage (n_layer * n_ctx * kv_dim half floats each) for hn_kv_cache_new_borrowed;
 * owned by the offload, which must outlive the cache. */
uint16_t *hn_vk_offload_k_storage(HnVkOffload *offload);
uint16_t *hn_vk_offload_v_storage(HnVkOffload *offload);
const char *hn_vk_offload_device_name(const HnVkOffload *offload);
/* Bytes of device memory the offload allocated. */
uint64_t hn_vk_offload_device_bytes(const HnVkOffload *offload);

/* Runs the offloaded layers over x[nt][n_embd] in place for tokens at positions pos of
 * sequences seq, whose KV cells (already claimed in kv) are cells[t]; rope gives the
 * rotation.  One submission, waited for with a time limit. */
bool hn_vk_offload_run(HnVkOffload *offload, float *x, int nt, const int32_t *pos, const int32_t *seq,
                       const int32_t *cells, const HnKvCache *kv, const HnRope *rope, HnError *err);

/* What the offload has asked of the device so far, for tests and benchmarks: a decode step
 * (one micro-batch) makes exactly one submission and one fence wait whatever the number of
 * offloaded layers (docs/vulkan.md).  Submissions and waits include the weight uploads
 * through the staging buffer at creation. */
typedef struct {
  uint64_t runs;              /* hn_vk_offload_run calls that finished on the device */
  uint64_t submissions;       /* vkQueueSubmit calls */
  uint64_t fence_waits;       /* vkWaitForFences calls */
  uint64_t dispatches;        /* compute dispatches recorded */
  uint64_t barriers;          /* pipeline barriers recorded */
  uint64_t matvec_dispatches; /* matrix products through the matrix-vector kernel */
  uint64_t tiled_dispatches;  /* matrix products through the tiled matrix-matrix kernel */
} HnVkCounts;
void hn_vk_offload_counts(const HnVkOffload *offload, HnVkCounts *out);

/* One matrix product on a device, for kernel tests and benchmarks:
 * y[t][r] = sum_k W[r][k] * x[t][k] for nt tokens, W being n_rows rows of n_cols values of
 * the ggml type `type` (types without a kernel are converted to F16 as the offload's upload
 * does).  The kernel is chosen by nt as in the offload: the matrix-vector one for a few
 * tokens, the tiled one for more.  device as HnVkOffloadParams.device. */
bool hn_vk_matmul(int device, uint32_t type, const void *weights, int n_cols, int n_rows, const float *x, int nt,
                  float *y, HnError *err);

#ifdef __cplusplus
}
#endif
