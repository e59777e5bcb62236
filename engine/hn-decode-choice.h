/* hn-decode-choice.h — which decode kernel each weight type uses, chosen by measurement.
 *
 * Generation reads every weight once per token, so the fastest decode kernel is the one
 * that keeps the memory bus busiest, and that depends on the processor, not on which
 * instruction set is widest (on AMD Zen 4 the AVX-512 tiles were reported 1.7–2.1×
 * slower than the AVX2 dot products).  Where a level has two candidates for a type —
 * the multi-row tile (gemm_tile) and the per-row dot product (vec_dot) — the first
 * model load times both on a matrix larger than the caches, interleaved, and keeps the
 * faster by median.  The result is cached per processor model in
 * $XDG_CACHE_HOME/hanashi/decode-kernels (~/.cache/… without it), one section per kernel
 * set (HnSimdKernels.name: "AVX2" and "AVX2 (AVX-VNNI)" are different kernels), so later
 * loads cost nothing, also when HANASHI_SIMD switches between sets.
 * HANASHI_DECODE=tile|dot forces one kernel.
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

/* Bumped whenever a decode kernel, the cache's text or the way of choosing changes, so
 * that cached choices are measured again. */
#define HN_DECODE_CHOICE_VERSION 10

/* Index of the fastest of n_candidates kernels timed in n_samples rounds, one timing of
 * each per round (times[c * n_samples + s]): each timing is divided by the fastest of its
 * round, and the candidate with the lowest median of these ratios wins.  Comparing within
 * a round keeps a change of load between rounds (a neighbour's build starting) out of
 * the choice, which medians of the raw times let in.  Ties go to the earlier candidate;
 * -1 when there is none or more than HN_DECODE_MAX_SAMPLES rounds. */
#define HN_DECODE_MAX_SAMPLES 64
int hn_decode_pick_fastest(const double *times, int n_candidates, int n_samples);

/* The cache file's text with choice[] as the section of kernel set `kernel_set`, after the
 * other sections of `previous` (the file's text so far, or NULL) where that is a cache
 * text of this processor model and version.  Returns the length, which like snprintf's
 * may exceed size (then buf holds a truncated text); 0 on an encoding error. */
size_t hn_decode_choice_format(char *buf, size_t size, const char *previous, const char *cpu_model,
                               const char *kernel_set, const HnDecodeKernel choice[HN_TYPE_COUNT]);

/* Reads the section of kernel set `kernel_set` of a cache file's text into choice[]; false
 * (choice untouched) when the text has no such section, was written for another
 * processor model or version, or has a line it cannot read. */
bool hn_decode_choice_parse(const char *text, const char *cpu_model, const char *kernel_set,
                            HnDecodeKernel choice[HN_TYPE_COUNT]);

/* The kernel hn_matmul uses for one token of this type with table k: HANASHI_DECODE if
 * set, else the measured choice, else the tile where there is one. */
HnDecodeKernel hn_decode_kernel(const HnSimdKernels *k, HnType type);

/* Takes the cached choices for this processor model and level, where none is known yet,
 * without measuring anything (model loading asks before any context exists). */
void hn_decode_load_cached(void);

/* Measures the candidates for each listed type that has two and no choice yet (reading
 * and then updating the cache file first), on the pool's threads (pool NULL: on a pool
 * of one thread per physical core, made for the measuring).  Costs a few tens of
 * milliseconds per type on the first load on a processor model, nothing after. */
void hn_decode_calibrate(HnThreadPool *pool, const HnType *types, int n_types);

#ifdef __cplusplus
}
#endif
