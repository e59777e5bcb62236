/* hn-common.h — error reporting and small helpers shared by the GLib-free engine core.
 *
 * Every fallible engine function takes an `HnError *` (which may be NULL) as its last
 * argument and returns false / NULL / a negative count on failure.  The message is a
 * complete sentence fragment meant for people, e.g.
 *   "tensor 'blk.3.ffn_up.weight' extends past end of file".
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HN_OK = 0,
  HN_ERR_IO,           /* the operating system refused: open, read, mmap, write */
  HN_ERR_FORMAT,       /* the input is malformed or inconsistent */
  HN_ERR_UNSUPPORTED,  /* well-formed, but uses something the engine does not implement */
  HN_ERR_NOT_FOUND,    /* a key, tensor or token that was asked for is absent */
  HN_ERR_NOMEM,        /* an allocation failed or would exceed a sane limit */
  HN_ERR_INVALID_ARG,  /* the caller passed a value outside the documented range */
  HN_ERR_CANCELLED,    /* the operation was cancelled by the caller */
  HN_ERR_TEMPLATE,     /* a chat template failed to parse or raised an exception */
  HN_ERR_GRAMMAR,      /* a grammar failed to parse */
  /* The codes below say more precisely what went wrong, so that a front end can put it in
   * the user's language (engine/glib maps each to its own HanashiEngineError; the values
   * are stable: new codes are added at the end). */
  HN_ERR_TRUNCATED,    /* a file ends before the data it declares: an interrupted download
                        * or copy (a GGUF whose tensors extend past its end) */
  HN_ERR_INVALID_NUMBERS, /* the model computed NaN or infinite scores: its weights are damaged */
  HN_ERR_TOO_LONG,     /* an input (a prompt) is longer than the context can hold */
  HN_ERR_LIMIT,        /* a bound on work or size was reached (a grammar or JSON schema too
                        * large or too ambiguous to follow); the input itself may be valid */
} HnStatus;

#define HN_ERROR_MESSAGE_MAX 512

typedef struct {
  HnStatus code;
  char message[HN_ERROR_MESSAGE_MAX];
} HnError;

#if defined(__GNUC__)
#define HN_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#define HN_LIKELY(x) __builtin_expect(!!(x), 1)
#define HN_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define HN_PRINTF(fmt_idx, arg_idx)
#define HN_LIKELY(x) (x)
#define HN_UNLIKELY(x) (x)
#endif

#define HN_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define HN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HN_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Sets `err` (if not NULL) to `code` and the formatted message.  Always returns false so
 * that callers can write `return hn_error_set (err, ...);` in bool functions. */
bool hn_error_set(HnError *err, HnStatus code, const char *fmt, ...) HN_PRINTF(3, 4);
bool hn_error_setv(HnError *err, HnStatus code, const char *fmt, va_list ap) HN_PRINTF(3, 0);

/* Prepends "context: " to an error already set, keeping its code. */
void hn_error_prefix(HnError *err, const char *fmt, ...) HN_PRINTF(2, 3);

void hn_error_clear(HnError *err);

/* Overflow-checked size arithmetic: return false instead of wrapping. */
static inline bool hn_mul_size(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool hn_add_size(size_t a, size_t b, size_t *out) {
  return !__builtin_add_overflow(a, b, out);
}

/* IEEE half and bfloat16 conversions (exact, round-to-nearest-even on the way down). */
float hn_fp16_to_fp32(uint16_t h);
uint16_t hn_fp32_to_fp16(float f);
float hn_bf16_to_fp32(uint16_t h);
uint16_t hn_fp32_to_bf16(float f);

/* Monotonic clock in seconds, for timings reported to people. */
double hn_time_now(void);

/* `bytes` of zeroed anonymous memory, advised into huge pages where the kernel has them:
 * memory that decode streams through (the placed weights, the KV cache) reads
 * measurably faster from 2 MiB pages than from 4 KiB ones, whose page walks the hardware
 * prefetchers do not cross.  NULL when it cannot be mapped; freed with hn_huge_free. */
void *hn_huge_alloc(size_t bytes);
void hn_huge_free(void *p, size_t bytes);

#ifdef __cplusplus
}
#endif
