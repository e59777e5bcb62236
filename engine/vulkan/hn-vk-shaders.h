/* hn-vk-shaders.h — the compute shaders, compiled by glslc at build time and embedded as
 * SPIR-V words (hn-vk-shaders.c includes the generated *.spv.inc files).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

enum {
  HN_VK_SHADER_MATMUL_F32,
  HN_VK_SHADER_MATMUL_F16,
  HN_VK_SHADER_MATMUL_BF16,
  HN_VK_SHADER_MATMUL_Q4_0,
  HN_VK_SHADER_MATMUL_Q8_0,
  HN_VK_SHADER_MATMUL_Q4_K,
  HN_VK_SHADER_MATMUL_Q5_K,
  HN_VK_SHADER_MATMUL_Q6_K,
  HN_VK_SHADER_MATVEC_F32,
  HN_VK_SHADER_MATVEC_F16,
  HN_VK_SHADER_MATVEC_BF16,
  HN_VK_SHADER_MATVEC_Q4_0,
  HN_VK_SHADER_MATVEC_Q8_0,
  HN_VK_SHADER_MATVEC_Q4_K,
  HN_VK_SHADER_MATVEC_Q5_K,
  HN_VK_SHADER_MATVEC_Q6_K,
  HN_VK_SHADER_RMSNORM,
  HN_VK_SHADER_ROPE,
  HN_VK_SHADER_KVSTORE,
  HN_VK_SHADER_ATTENTION,
  HN_VK_SHADER_ELTWISE,
  HN_VK_SHADER_COUNT
};

typedef struct {
  const char *name;
  const uint32_t *words;
  size_t n_words;
} HnVkShader;

extern const HnVkShader hn_vk_shaders[HN_VK_SHADER_COUNT];
