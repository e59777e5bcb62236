/* hn-common.c — error reporting and numeric conversions for the engine core.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-common.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

bool
hn_error_setv(HnError *err, HnStatus code, const char *fmt, va_list ap)
{
  if (err == NULL)
    return false;
  err->code = code;
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  return false;
}

bool
hn_error_set(HnError *err, HnStatus code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  hn_error_setv(err, code, fmt, ap);
  va_end(ap);
  return false;
}

void
hn_error_prefix(HnError *err, const char *fmt, ...)
{
  if (err == NULL || err->code == HN_OK)
    return;
  char prefix[HN_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  /* Assemble by hand: the result is deliberately truncated to the message size. */
  char joined[HN_ERROR_MESSAGE_MAX];
  size_t used = 0;
  const char *parts[3] = { prefix, ": ", err->message };
  for (size_t i = 0; i < 3; i++) {
    size_t len = strlen(parts[i]);
    if (len > sizeof joined - 1 - used)
      len = sizeof joined - 1 - used;
    memcpy(joined + used, parts[i], len);
    used += len;
  }
  joined[used] = '\0';
  memcpy(err->message, joined, used + 1);
}

void
hn_error_clear(HnError *err)
{
  if (err == NULL)
    return;
  err->code = HN_OK;
  err->message[0] = '\0';
}

static inline uint32_t
bits_of_float(float f)
{
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float
float_of_bits(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float
hn_fp16_to_fp32(uint16_t h)
{
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;

  if (exponent == 0) {
    if (mantissa == 0)
      return float_of_bits(sign);
    /* Subnormal half: value is mantissa * 2^-24, exactly representable in float. */
    float magnitude = (float)mantissa * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return float_of_bits(sign | 0x7f800000u | (mantissa << 13));
  return float_of_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t
hn_fp32_to_fp16(float f)
{
  uint32_t x = bits_of_float(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;

  if (abs >= 0x7f800000u) /* Inf or NaN; keep NaN quiet and non-zero */
    return (uint16_t)(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) /* rounds to >= 65520: overflow to infinity */
    return (uint16_t)(sign | 0x7c00u);
  if (abs < 0x38800000u) {
    /* Result is subnormal (or zero): round abs / 2^-24 to nearest even. */
    if (abs < 0x33000000u) /* below half of the smallest subnormal */
      return (uint16_t)sign;
    uint32_t e = abs >> 23;
    uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14 + (112 - e) */
    uint32_t half = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t midpoint = 1u << (shift - 1);
    if (rem > midpoint || (rem == midpoint && (half & 1u)))
      half++;
    return (uint16_t)(sign | half);
  }
  /* Normal: rebias exponent, round mantissa to 10 bits, nearest even. */
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

float
hn_bf16_to_fp32(uint16_t h)
{
  return float_of_bits((uint32_t)h << 16);
}

uint16_t
hn_fp32_to_bf16(float f)
{
  uint32_t x = bits_of_float(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: force quiet */
    return (uint16_t)((x >> 16) | 64u);
  return (uint16_t)((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

double
hn_time_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *
hn_huge_alloc(size_t bytes)
{
  void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  madvise(p, bytes ? bytes : 1, MADV_HUGEPAGE); /* advice only */
  return p;
}

void
hn_huge_free(void *p, size_t bytes)
{
  if (p)
    munmap(p, bytes ? bytes : 1);
}
