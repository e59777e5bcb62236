/* hn-cpu.c — feature detection: CPUID/XGETBV on x86-64, the kernel's HWCAP bits on ARM64.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-cpu.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t
read_xcr0(void)
{
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t)hi << 32 | lo;
}

static void
detect(HnCpuFeatures *f)
{
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d))
    return;
  f->intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu; /* "Genu" "ineI" "ntel" */
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return;
  bool osxsave = (c >> 27) & 1;
  bool avx = (c >> 28) & 1;
  f->fma = (c >> 12) & 1;
  f->f16c = (c >> 29) & 1;
  if (!osxsave || !avx)
    return;
  uint64_t xcr0 = read_xcr0();
  bool ymm_state = (xcr0 & 0x6) == 0x6;
  bool zmm_state = (xcr0 & 0xe6) == 0xe6;
  if (!ymm_state)
    return;
  if (__get_cpuid_max(0, NULL) < 7)
    return;
  __cpuid_count(7, 0, a, b, c, d);
  f->avx2 = (b >> 5) & 1;
  if (zmm_state) {
    f->avx512f = (b >> 16) & 1;
    f->avx512bw = (b >> 30) & 1;
    f->avx512vl = (b >> 31) & 1;
    f->avx512vnni = (c >> 11) & 1;
  }
  __cpuid_count(7, 1, a, b, c, d);
  f->avx_vnni = (a >> 4) & 1;
}
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>

/* Linux's HWCAP bits (asm/hwcap.h), spelled out for C libraries that lack the names. */
#define HWCAP_BIT_ASIMD (1UL << 1)
#define HWCAP_BIT_ASIMDDP (1UL << 20)
#define HWCAP2_BIT_I8MM (1UL << 13)

static void
detect(HnCpuFeatures *f)
{
  const unsigned long hwcap = getauxval(AT_HWCAP);
  const unsigned long hwcap2 = getauxval(AT_HWCAP2);
  f->neon = (hwcap & HWCAP_BIT_ASIMD) != 0;
  f->neon_dotprod = f->neon && (hwcap & HWCAP_BIT_ASIMDDP) != 0;
  f->neon_i8mm = f->neon && (hwcap2 & HWCAP2_BIT_I8MM) != 0;
}
#else
static void
detect(HnCpuFeatures *f)
{
  (void)f;
}
#endif

static void
read_model_name(char name[49])
{
  strcpy(name, "unknown");
#if defined(__x86_64__) || defined(__i386__)
  unsigned regs[12];
  if ((unsigned) __get_cpuid_max(0x80000000u, NULL) < 0x80000004u)
    return;
  for (unsigned i = 0; i < 3; i++)
    __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
  char raw[49];
  memcpy(raw, regs, 48);
  raw[48] = '\0';
  const char *start = raw;
  while (*start == ' ')
    start++;
  size_t len = strlen(start);
  while (len > 0 && start[len - 1] == ' ')
    len--;
  if (len == 0)
    return;
  memcpy(name, start, len);
  name[len] = '\0';
#endif
}

const char *
hn_cpu_model_name(void)
{
  /* Like the features: idempotent, so a race between first callers is harmless. */
  static char name[49];
  static volatile int done;
  if (!done) {
    char n[49];
    read_model_name(n);
    memcpy(name, n, sizeof n);
    done = 1;
  }
  return name;
}

const HnCpuFeatures *
hn_cpu_features(void)
{
  /* Detection is idempotent, so a benign race between first callers is harmless. */
  static HnCpuFeatures features;
  static volatile int done;
  if (!done) {
    HnCpuFeatures f;
    memset(&f, 0, sizeof f);
    detect(&f);
    features = f;
    done = 1;
  }
  return &features;
}

HnSimdLevel
hn_cpu_simd_level(void)
{
  const HnCpuFeatures *f = hn_cpu_features();
  HnSimdLevel level = HN_SIMD_SCALAR;
  if (f->avx2 && f->fma && f->f16c)
    level = HN_SIMD_AVX2;
  if (level == HN_SIMD_AVX2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni)
    level = HN_SIMD_AVX512;
  if (f->neon)
    level = f->neon_dotprod ? HN_SIMD_NEON_DOTPROD : HN_SIMD_NEON;

  const char *cap = getenv("HANASHI_SIMD");
  if (cap != NULL) {
    if (strcmp(cap, "scalar") == 0)
      level = HN_SIMD_SCALAR;
    else if ((strcmp(cap, "avx2") == 0 || strcmp(cap, "avx2-novnni") == 0) && level > HN_SIMD_AVX2 &&
             level <= HN_SIMD_AVX512)
      level = HN_SIMD_AVX2;
    else if (strcmp(cap, "neon") == 0 && level == HN_SIMD_NEON_DOTPROD)
      level = HN_SIMD_NEON;
  }
  return level;
}

const char *
hn_simd_level_name(HnSimdLevel level)
{
  switch (level) {
  case HN_SIMD_AVX512:
    return "AVX-512 (VNNI)";
  case HN_SIMD_AVX2:
    return "AVX2";
  case HN_SIMD_NEON_DOTPROD:
    return "NEON (DotProd)";
  case HN_SIMD_NEON:
    return "NEON";
  case HN_SIMD_SCALAR:
  default:
    return "scalar";
  }
}
