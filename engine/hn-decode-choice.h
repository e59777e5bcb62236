/* hn-decode-choice.h — which decode kernel each weight type uses, chosen by measurement.
 *
 * Generation reads every weight once per token, so the fastest decode kernel is the one
 * that keeps the memory bus busiest, and that depends on the processor, not on which
 * instruction set is widest (on AMD Zen 4 the AVX-512 tiles were reported 1.7–2.1×
 * slower than the AVX2 dot products).  Where a level has two candidates for a type —
 * the multi-row tile (gemm_tile) and the per-row dot product (vec_dot) — the first
 * model load times both on a matrix larger than the caches, interleaved, and keeps the
 * faster by median.  The result is cached per processor model in
 * $XDG_CACHE_HOME/hanashi/decode-kernels (~/.cache/… without it), so later loads cost
 * nothing.  HANASHI_DECODE=tile|dot forces one; HANASHI_SIMD still caps the level.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-quants.h"
#include "hn-simd.h"
#include "hn-threadpool.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HN_DECODE_UNMEASURED = 0, /* not chosen yet: the tile, where the level has one */
  HN_DECODE_TILE = 1,
  HN_DECODE_DOT = 2,
} HnDecodeKernel;

/* Bumped whenever a decode kernel changes, so that cached choices are measured again. */
#define HN_DECODE_CHOICE_VERSION 3

/* Index of the candidate with the lowest median of its n_samples timings
 * (times[c * n_samples + s]); ties go to the earlier candidate.  -1 when there is none. */
int hn_decode_pick_fastest(const double *times, int n_candidates, int n_samples);

/* The cache file's text for one processor model and level. */
size_t hn_decode_choice_format(char *buf, size_t size, const char *cpu_model, const char *level,
                               const HnDecodeKernel choice[HN_TYPE_COUNT]);

/* Reads a cache file's text into choice[]; false (choice untouched) when it was written
 * for another processor model, level or version, or is not a cache file. */
bool hn_decode_choice_parse(const char *text, const char *cpu_model, const char *level,
                            HnDecodeKernel choice[HN_TYPE_COUNT]);

/* The kernel hn_matmul uses for one token of this type with table k: HANASHI_DECODE if
 * set, else the measured choice, else the tile where there is one. */
HnDecodeKernel hn_decode_kernel(const HnSimdKernels *k, HnType type);

/* Takes the cached choices for this processor model and level, where none is known yet,
 * without measuring anything (model loading asks before any context exists). */
void hn_decode_load_cached(void);

/* Measures the candidates for each listed type that has two and no choice yet (reading
 * and then updating the cache file first), on the pool's threads.  Costs a few tens of
 * milliseconds per type on the first load on a processor model, nothing after. */
void hn_decode_calibrate(HnThreadPool *pool, const HnType *types, int n_types);

#ifdef __cplusplus
}
#endif
