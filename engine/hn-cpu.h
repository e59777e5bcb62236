/* hn-cpu.h — run-time CPU feature detection for choosing kernels.
 *
 * One binary runs on every x86-64 machine: SIMD kernels are compiled per instruction set
 * and chosen here.  HANASHI_SIMD=scalar|avx2|avx2-novnni|avx512 in the environment caps the choice
 * (tests use it to run the reference path and each fast path on the same machine). */
#pragma once

#include "hn-common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HN_SIMD_SCALAR = 0,
  HN_SIMD_AVX2 = 1,   /* AVX2 + FMA + F16C */
  HN_SIMD_AVX512 = 2, /* AVX-512 F, BW, VL and VNNI, plus the AVX2 set */
} HnSimdLevel;

typedef struct {
  bool avx2, fma, f16c;
  bool avx512f, avx512bw, avx512vl, avx512vnni;
  bool avx_vnni;
} HnCpuFeatures;

/* What the processor (and the operating system, via XSAVE state) supports. */
const HnCpuFeatures *hn_cpu_features(void);

/* The best level the processor supports, capped by HANASHI_SIMD when set. */
HnSimdLevel hn_cpu_simd_level(void);

/* The processor's model name (CPUID brand string, trimmed), "unknown" without one. */
const char *hn_cpu_model_name(void);

const char *hn_simd_level_name(HnSimdLevel level);

#ifdef __cplusplus
}
#endif
