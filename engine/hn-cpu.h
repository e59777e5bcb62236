/* hn-cpu.h — run-time CPU feature detection for choosing kernels.
 *
 * One binary runs on every x86-64 (or every ARM64) machine: SIMD kernels are compiled per
 * instruction set and chosen here.
 * HANASHI_SIMD=scalar|avx2|avx2-novnni|avx512|neon|neon-dotprod|neon-noi8mm in the
 * environment caps the choice (tests use it to run the reference path and each fast
 * path on the same machine); a level the processor lacks leaves the choice alone.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HN_SIMD_SCALAR = 0,
  HN_SIMD_AVX2 = 1,   /* AVX2 + FMA + F16C */
  HN_SIMD_AVX512 = 2, /* AVX-512 F, BW, VL and VNNI, plus the AVX2 set */
  HN_SIMD_NEON = 3,   /* ARM64 Advanced SIMD (every ARMv8-A processor) */
  HN_SIMD_NEON_DOTPROD = 4, /* ARM64 NEON plus the 8-bit dot product (ARMv8.2-A DotProd) */
  HN_SIMD_LEVEL_COUNT
} HnSimdLevel;

typedef struct {
  bool avx2, fma, f16c;
  bool avx512f, avx512bw, avx512vl, avx512vnni;
  bool avx_vnni;
  bool intel; /* x86: the vendor is GenuineIntel (some cache hints differ by vendor) */
  bool neon, neon_dotprod, neon_i8mm; /* ARM64: from the kernel's HWCAP bits */
} HnCpuFeatures;

/* What the processor (and the operating system, via XSAVE state or HWCAP) supports. */
const HnCpuFeatures *hn_cpu_features(void);

/* The best level the processor supports, capped by HANASHI_SIMD when set. */
HnSimdLevel hn_cpu_simd_level(void);

/* The processor's model name (CPUID brand string, trimmed), "unknown" without one. */
const char *hn_cpu_model_name(void);

const char *hn_simd_level_name(HnSimdLevel level);

#ifdef __cplusplus
}
#endif
