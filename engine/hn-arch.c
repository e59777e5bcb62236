/* hn-arch.c — the architecture table (see hn-arch.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-arch.h"

static const HnArch arches[] = {
  { .name = "llama", .rms_eps = 1e-5f },
  { .name = "qwen2", .neox = true, .rms_eps = 1e-6f, .qkv_bias = true },
  { .name = "qwen3", .neox = true, .rms_eps = 1e-6f, .qk_norm = true },
  { .name = "qwen2moe", .neox = true, .rms_eps = 1e-6f, .qkv_bias = true, .moe = true },
  { .name = "qwen3moe", .neox = true, .rms_eps = 1e-6f, .qk_norm = true, .moe = true,
    .moe_norm_weights = true },
  { .name = "gemma2", .neox = true, .rms_eps = 1e-6f, .post_norms = true, .embd_scale = true,
    .softcaps = true, .act = HN_ACT_GELU_TANH, .swa = HN_SWA_EVEN, .wide_query_layers = 46 },
  { .name = "gemma3", .neox = true, .rms_eps = 1e-6f, .qk_norm = true, .post_norms = true,
    .embd_scale = true, .act = HN_ACT_GELU_TANH, .swa = HN_SWA_PERIODIC, .swa_period = 6,
    .swa_local_rope = true, .wide_query_layers = 62 },
  { .name = "phi3", .neox = true, .rms_eps = 1e-5f, .fused_qkv = true, .fused_gate_up = true,
    .swa = HN_SWA_ALL, .long_short_rope = true },
};

const HnArch *
hn_arch_find(HnStr name)
{
  for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++)
    if (hn_str_eq(name, arches[i].name))
      return &arches[i];
  return NULL;
}

const char *
hn_arch_supported(void)
{
  return "llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen2moe, qwen3moe";
}

bool
hn_arch_layer_is_sliding(const HnArch *arch, int il)
{
  switch (arch->swa) {
  case HN_SWA_ALL:
    return true;
  case HN_SWA_EVEN:
    return il % 2 == 0;
  case HN_SWA_PERIODIC:
    return arch->swa_period > 0 && (il + 1) % arch->swa_period != 0;
  case HN_SWA_NONE:
  default:
    return false;
  }
}
