/* hn-gguf.h — read-only, memory-mapped GGUF reader (versions 2 and 3).
 *
 * hn_gguf_open() validates the whole header, metadata and tensor table against the file
 * size before returning, so every accessor below is infallible on an opened file: string
 * lengths, array counts, tensor shapes, types, offsets and sizes are known to be in range.
 * Strings are views into the mapping (not NUL-terminated) except tensor names.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HN_GGUF_UINT8 = 0,
  HN_GGUF_INT8 = 1,
  HN_GGUF_UINT16 = 2,
  HN_GGUF_INT16 = 3,
  HN_GGUF_UINT32 = 4,
  HN_GGUF_INT32 = 5,
  HN_GGUF_FLOAT32 = 6,
  HN_GGUF_BOOL = 7,
  HN_GGUF_STRING = 8,
  HN_GGUF_ARRAY = 9,
  HN_GGUF_UINT64 = 10,
  HN_GGUF_INT64 = 11,
  HN_GGUF_FLOAT64 = 12,
} HnGgufValueType;

#define HN_GGUF_MAX_DIMS 4
#define HN_GGUF_DEFAULT_ALIGNMENT 32

typedef struct {
  const char *data; /* not NUL-terminated; may contain any bytes */
  uint64_t len;
} HnStr;

typedef struct HnGguf HnGguf;

typedef struct {
  HnStr key;
  HnGgufValueType type;
  /* Scalars: `value` points at the little-endian value in the mapping.
   * Strings: `value` points at the string bytes and `array_count` is its length.
   * Arrays: `array_type` and `array_count`; `value` points at the first element.
   *         Arrays of strings are stored as (u64 length, bytes) pairs back to back. */
  HnGgufValueType array_type;
  uint64_t array_count;
  const uint8_t *value;
} HnGgufKv;

typedef struct {
  const char *name;   /* NUL-terminated, owned by the HnGguf */
  uint32_t type;      /* ggml type id, see hn-quants.h; always a known type */
  uint32_t n_dims;
  int64_t ne[HN_GGUF_MAX_DIMS]; /* ne[0] is the innermost (row length); unused dims are 1 */
  uint64_t offset;    /* relative to the start of the tensor data section */
  const void *data;   /* in the mapping, aligned to general.alignment */
  size_t nbytes;
} HnGgufTensor;

/* An array value; elements can be read with the helpers below. */
typedef struct {
  HnGgufValueType type;
  uint64_t count;
  const uint8_t *data;
} HnGgufArray;

/* Opens and maps `path` read-only and validates it.  On error returns NULL with a message
 * that names the problem (and the key or tensor involved). */
HnGguf *hn_gguf_open(const char *path, HnError *err);

/* Same, over a caller-owned buffer that must outlive the HnGguf (used by fuzzers and
 * tests).  Tensor data pointers point into `data`. */
HnGguf *hn_gguf_open_memory(const void *data, size_t size, HnError *err);

void hn_gguf_close(HnGguf *gguf);

uint32_t hn_gguf_version(const HnGguf *gguf);
size_t hn_gguf_file_size(const HnGguf *gguf);
uint32_t hn_gguf_alignment(const HnGguf *gguf);
/* The whole mapping and the offset where tensor data begins (for fingerprints). */
const uint8_t *hn_gguf_bytes(const HnGguf *gguf);
size_t hn_gguf_data_offset(const HnGguf *gguf);

int64_t hn_gguf_n_kv(const HnGguf *gguf);
const HnGgufKv *hn_gguf_kv(const HnGguf *gguf, int64_t index);
/* Index of `key`, or -1. */
int64_t hn_gguf_find_key(const HnGguf *gguf, const char *key);

/* Typed getters.  They return false with HN_ERR_NOT_FOUND when the key is absent and
 * with HN_ERR_FORMAT when it has an incompatible type or an out-of-range value.
 * Integer getters accept any integer (and bool) type whose value fits; the float getter
 * accepts float and integer types. */
bool hn_gguf_get_u32(const HnGguf *gguf, const char *key, uint32_t *out, HnError *err);
bool hn_gguf_get_i64(const HnGguf *gguf, const char *key, int64_t *out, HnError *err);
bool hn_gguf_get_f32(const HnGguf *gguf, const char *key, float *out, HnError *err);
bool hn_gguf_get_bool(const HnGguf *gguf, const char *key, bool *out, HnError *err);
bool hn_gguf_get_str(const HnGguf *gguf, const char *key, HnStr *out, HnError *err);
bool hn_gguf_get_array(const HnGguf *gguf, const char *key, HnGgufArray *out, HnError *err);

/* Convenience: like the getters but with a default when the key is absent.  A present
 * key of the wrong type is still an error. */
bool hn_gguf_get_u32_or(const HnGguf *gguf, const char *key, uint32_t fallback, uint32_t *out, HnError *err);
bool hn_gguf_get_f32_or(const HnGguf *gguf, const char *key, float fallback, float *out, HnError *err);
bool hn_gguf_get_bool_or(const HnGguf *gguf, const char *key, bool fallback, bool *out, HnError *err);

/* Array element readers (i < count; the caller checks the element type). */
int64_t hn_gguf_array_int(const HnGgufArray *array, uint64_t i);   /* integer and bool types */
double hn_gguf_array_float(const HnGgufArray *array, uint64_t i);  /* float and integer types */
/* Strings: fills `out[0 .. count-1]` in one sequential pass (random access would need an
 * index; callers that want one build it this way). */
void hn_gguf_array_strings(const HnGgufArray *array, HnStr *out);

int64_t hn_gguf_n_tensors(const HnGguf *gguf);
const HnGgufTensor *hn_gguf_tensor(const HnGguf *gguf, int64_t index);
const HnGgufTensor *hn_gguf_find_tensor(const HnGguf *gguf, const char *name);

/* The model's main weight type (a ggml type id, see hn-quants.h): the type holding the
 * most bytes of the layer weight matrices, the tensors named "blk.N...." with two or more
 * dimensions.  Embeddings, the output head and norm vectors do not count: they are often
 * kept at a higher precision than the rest (Q6_K, F32) and in small models with a large
 * vocabulary would otherwise win.  A file without layer matrices falls back to all of its
 * matrices; ties go to the lower type id.  HN_TYPE_COUNT when the file holds no matrix.
 * Works from the tensor table alone, so a file can be described without loading it; the
 * engine (hn_model_main_type) and the app's model list both report this. */
uint32_t hn_gguf_main_weight_type(const HnGguf *gguf);

/* Compares an HnStr with a NUL-terminated string. */
bool hn_str_eq(HnStr s, const char *cstr);

/* Size in bytes of one scalar of `type` (0 for STRING and ARRAY). */
size_t hn_gguf_scalar_size(HnGgufValueType type);
const char *hn_gguf_type_name(HnGgufValueType type);

#ifdef __cplusplus
}
#endif
