/* hn-quants.h — weight types: block layouts, dequantization, quantization and the
 * scalar reference dot products.
 *
 * Type ids are the GGUF/ggml ids, so a tensor's type field is used as is.  The block
 * layouts follow the ggml file format bit for bit; the block structs (for kernels) are in
 * the internal header hn-quants-blocks.h, each checked with a static assertion.
 *
 * Everything here is the portable reference implementation.  Fast kernels (hn-kernels*)
 * must agree with it and are tested against it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HN_TYPE_F32 = 0,
  HN_TYPE_F16 = 1,
  HN_TYPE_Q4_0 = 2,
  HN_TYPE_Q4_1 = 3,
  HN_TYPE_Q5_0 = 6,
  HN_TYPE_Q5_1 = 7,
  HN_TYPE_Q8_0 = 8,
  HN_TYPE_Q8_1 = 9,
  HN_TYPE_Q2_K = 10,
  HN_TYPE_Q3_K = 11,
  HN_TYPE_Q4_K = 12,
  HN_TYPE_Q5_K = 13,
  HN_TYPE_Q6_K = 14,
  HN_TYPE_Q8_K = 15,
  HN_TYPE_BF16 = 30,
  /* Not file types: rows of the 32-element types and Q4_K regrouped in memory for the decode kernels (see
   * "Regrouped layouts" below).  GGUF readers reject them, as they reject every id that
   * is not a weight type. */
  HN_TYPE_Q4_0_GROUPED = 40,
  HN_TYPE_Q8_0_GROUPED = 41,
  HN_TYPE_Q5_0_GROUPED = 42,
  HN_TYPE_Q4_1_GROUPED = 43,
  HN_TYPE_Q5_1_GROUPED = 44,
  HN_TYPE_Q4_K_GROUPED = 45,
  HN_TYPE_COUNT = 46, /* one past the largest id the name table knows */
} HnType;

#define HN_QK_K 256 /* super-block size of the k-quants */

/* The name of any ggml type id ("Q4_K", "IQ2_XXS", ...), or "unknown type N" (in a
 * static buffer per call site is not needed: unknown ids yield "unknown"). */
const char *hn_type_name(uint32_t type);

/* True for the types a weight tensor may have: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1
 * Q2_K Q3_K Q4_K Q5_K Q6_K.  (Q8_1 and Q8_K exist only as activation formats.) */
bool hn_type_is_weight_type(uint32_t type);

/* True for every type whose block layout is known (weight types plus Q8_1, Q8_K). */
bool hn_type_is_known(uint32_t type);

/* Elements per block (1 for F32/F16/BF16) and bytes per block; 0 for unknown types. */
int64_t hn_type_block_elems(uint32_t type);
size_t hn_type_block_bytes(uint32_t type);

/* Bytes taken by `n` elements (n a multiple of the block size), or 0 when n is not a
 * multiple or the type is unknown.  Overflow-safe for any n < 2^62. */
size_t hn_type_row_bytes(uint32_t type, int64_t n);

/* Decodes `n` elements (multiple of the block size) of `type` at `src` into floats.
 * Bit-exact with the ggml reference decoders. */
void hn_dequantize_row(HnType type, const void *src, float *dst, int64_t n);

/* Encodes `n` floats into `type` blocks with the reference (round-to-nearest, ggml
 * compatible) quantizer.  Available for every weight type and for Q8_1 and Q8_K. */
void hn_quantize_row(HnType type, const float *src, void *dst, int64_t n);

/* The format activations are converted to before a dot product with a weight row of
 * `type`: Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the k-quants, and the
 * weight's own type for F32/F16/BF16 (F32 activations for F32 weights). */
HnType hn_type_vec_dot_type(HnType type);

/* Dot product of one weight row of `type` with one activation row already converted to
 * hn_type_vec_dot_type(type); `n` elements.  Scalar reference implementation. */
float hn_vec_dot_ref(HnType type, int64_t n, const void *weight_row, const void *act_row);

/* Regrouped layouts: the rows of a file type rearranged in memory for a decode kernel,
 * each row keeping its length in bytes and its blocks their values, so that converting
 * a row there and back gives its bytes again.  Every run of HN_GROUP_BLOCKS blocks of 32
 * elements (Q4_K: sub-blocks, two super-blocks to a run) is laid out so that one 64-byte
 * load holds four quant bytes of each of its 16 blocks: the
 * 16 half-float scales first (32 bytes), then 64-byte vectors in which block j owns bytes
 * 4j..4j+3.  Vector 2s holds what stands for elements 4s..4s+3 of each block, vector
 * 2s + 1 elements 16+4s..16+4s+3:
 *   HN_TYPE_Q4_0_GROUPED  (288-byte runs) 4 vectors, each byte the two nibbles of those
 *                         elements (vector s = the block's quant bytes 4s..4s+3), so
 *                         low nibbles give vector 2s and high nibbles vector 2s + 1;
 *   HN_TYPE_Q8_0_GROUPED  (544-byte runs) 8 vectors of the signed quants themselves;
 *   HN_TYPE_Q5_0_GROUPED  (352-byte runs) Q4_0's 4 vectors of nibbles, after 64 bytes
 *                         of fifth bits between the scales and them: bit m of byte
 *                         4j + k is the fifth bit of byte 4j + k of code vector m
 *                         (vector 2s: low nibbles of nibble vector s, 2s + 1: high),
 *                         so one shift and one mask give 16 blocks' bits of vector m;
 *   HN_TYPE_Q4_1_GROUPED  (320-byte runs) Q4_0's, with the 16 half-float mins (32 bytes)
 *                         after the scales;
 *   HN_TYPE_Q5_1_GROUPED  (384-byte runs) Q5_0's, with the mins after the scales;
 *   HN_TYPE_Q4_K_GROUPED  (288-byte runs) a header of 32 bytes in place of the scales:
 *                         the two super-blocks' d, then their dmin (halves, from
 *                         HN_RUN_Q4_K_DMIN_AT), then per sub-block j a byte of its 6-bit
 *                         scale with its min's low two bits above (from
 *                         HN_RUN_Q4_K_SCALES_AT), then the mins' high four bits, nibble j
 *                         in byte j / 2, low first (from HN_RUN_Q4_K_MINS_HIGH_AT); then
 *                         Q4_0's 4 vectors, each sub-block's codes as a Q4_0 block's.
 * Blocks after the last full run stay in the file layout.  Their tile kernels read a
 * token's activations as HnActGroup records (hn-simd.h) in the same order; every other
 * reader goes through the type.  Code that has to tell a regrouped layout from its file
 * type asks these functions instead of naming a layout. */
#define HN_GROUP_BLOCKS 16
/* Where the parts of a run start, in bytes from its start, for a layout that has mins
 * (MINS 1) or not (0) and fifth bits (PLANES 1) or not: the scales at 0, the mins after
 * them, then the bit planes, then the vectors (Q8_0's: HN_RUN_VECTORS_AT(0, 0)). */
#define HN_RUN_MINS_AT (2 * HN_GROUP_BLOCKS)
#define HN_RUN_PLANES_AT(MINS) (2 * HN_GROUP_BLOCKS * (1 + (MINS)))
#define HN_RUN_VECTORS_AT(MINS, PLANES) (HN_RUN_PLANES_AT(MINS) + 64 * (PLANES))
/* Q4_K's header: d at 0 */
#define HN_RUN_Q4_K_DMIN_AT 4
#define HN_RUN_Q4_K_SCALES_AT 8
#define HN_RUN_Q4_K_MINS_HIGH_AT 24

/* The file type whose rows `type` rearranges; `type` itself where it is a file type. */
HnType hn_type_file_layout(HnType type);

/* The regrouped layout of a file type; HN_TYPE_COUNT where it has none. */
HnType hn_type_regrouped(HnType file_type);

/* Elements of one regrouped run of `layout` (shorter rows keep the file layout
 * throughout); 0 where `layout` is not a regrouped type. */
int64_t hn_type_group_elems(HnType layout);

/* One row of n elements from the file layout into `layout` and back; src may be dst.
 * False (nothing written) where `layout` is not a regrouped type. */
bool hn_type_regroup_row(HnType layout, const void *src, void *dst, int64_t n);
bool hn_type_ungroup_row(HnType layout, const void *src, void *dst, int64_t n);

#ifdef __cplusplus
}
#endif
