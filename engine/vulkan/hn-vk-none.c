/* hn-vk-none.c — the Vulkan functions of a build without Vulkan: no device, ever.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-vk.h"

#include <stddef.h>

bool hn_vk_built(void) { return false; }

int
hn_vk_list_devices(HnVkDeviceInfo *out, int max, HnError *err)
{
  (void) out;
  (void) max;
  hn_error_set(err, HN_ERR_UNSUPPORTED, "This build of Hanashi has no Vulkan support.");
  return -1;
}

HnVkOffload *
hn_vk_offload_new(const HnModel *model, const HnVkOffloadParams *params, HnError *err)
{
  (void) model;
  (void) params;
  hn_error_set(err, HN_ERR_UNSUPPORTED, "This build of Hanashi has no Vulkan support.");
  return NULL;
}

int
hn_vk_fit_layers(const HnModel *model, const HnVkOffloadParams *params, HnError *err)
{
  (void) model;
  (void) params;
  hn_error_set(err, HN_ERR_UNSUPPORTED, "This build of Hanashi has no Vulkan support.");
  return -1;
}

void hn_vk_offload_free(HnVkOffload *offload) { (void) offload; }
uint16_t *hn_vk_offload_k_storage(HnVkOffload *offload) { (void) offload; return NULL; }
uint16_t *hn_vk_offload_v_storage(HnVkOffload *offload) { (void) offload; return NULL; }
const char *hn_vk_offload_device_name(const HnVkOffload *offload) { (void) offload; return NULL; }
uint64_t hn_vk_offload_device_bytes(const HnVkOffload *offload) { (void) offload; return 0; }

bool
hn_vk_offload_run(HnVkOffload *offload, float *x, int nt, const int32_t *pos, const int32_t *seq,
                  const int32_t *cells, const HnKvCache *kv, const HnRope *rope, HnError *err)
{
  (void) offload; (void) x; (void) nt; (void) pos; (void) seq; (void) cells; (void) kv; (void) rope;
  return hn_error_set(err, HN_ERR_UNSUPPORTED, "This build of Hanashi has no Vulkan support.");
}

void
hn_vk_offload_counts(const HnVkOffload *offload, HnVkCounts *out)
{
  (void) offload;
  *out = (HnVkCounts) { 0 };
}

bool
hn_vk_matmul(int device, uint32_t type, const void *weights, int n_cols, int n_rows, const float *x, int nt,
             float *y, HnError *err)
{
  (void) device; (void) type; (void) weights; (void) n_cols; (void) n_rows; (void) x; (void) nt; (void) y;
  return hn_error_set(err, HN_ERR_UNSUPPORTED, "This build of Hanashi has no Vulkan support.");
}
