/* hn-gguf-writer.h — writes GGUF version 3 files (metadata, tensor table, aligned data).
 *
 * Usage: create a writer, set metadata (copied from a reader and/or set one by one; a key
 * set twice keeps its first position and the last value), declare every tensor with its
 * type and shape, then hn_gguf_writer_begin() writes the header and tensor table to a
 * temporary file next to the destination, hn_gguf_writer_write() streams each tensor's
 * bytes in declaration order (in as many pieces as convenient, e.g. row by row), and
 * hn_gguf_writer_finish() checks that everything was written and renames the temporary
 * file over the destination.  A writer freed before finishing removes its temporary
 * file, so a failed or interrupted write never leaves a half-written model in place.
 *
 * Memory use is independent of the tensor data size: nothing but metadata is buffered.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"
#include "hn-gguf.h"
#include "hn-quants.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct HnGgufWriter HnGgufWriter;

HnGgufWriter *hn_gguf_writer_new(HnError *err);
void hn_gguf_writer_free(HnGgufWriter *w);

/* Tensor data alignment (a power of two, default 32).  A value other than 32 is also
 * stored as general.alignment. */
bool hn_gguf_writer_set_alignment(HnGgufWriter *w, uint32_t alignment, HnError *err);

/* Copies one metadata pair of the opened file `src` (any type, including arrays of
 * strings). */
bool hn_gguf_writer_copy_kv(HnGgufWriter *w, const HnGguf *src, const HnGgufKv *kv, HnError *err);
/* Copies every metadata pair of `src`. */
bool hn_gguf_writer_copy_kvs(HnGgufWriter *w, const HnGguf *src, HnError *err);

bool hn_gguf_writer_set_u32(HnGgufWriter *w, const char *key, uint32_t value, HnError *err);
bool hn_gguf_writer_set_i32(HnGgufWriter *w, const char *key, int32_t value, HnError *err);
bool hn_gguf_writer_set_u64(HnGgufWriter *w, const char *key, uint64_t value, HnError *err);
bool hn_gguf_writer_set_f32(HnGgufWriter *w, const char *key, float value, HnError *err);
bool hn_gguf_writer_set_bool(HnGgufWriter *w, const char *key, bool value, HnError *err);
bool hn_gguf_writer_set_str(HnGgufWriter *w, const char *key, const char *value, HnError *err);
/* Arrays of scalars: `elem_type` is a scalar type and `data` holds `count` little-endian
 * values of it.  Arrays of strings: `strings[0..count)`, NUL-terminated. */
bool hn_gguf_writer_set_array(HnGgufWriter *w, const char *key, HnGgufValueType elem_type,
                              const void *data, uint64_t count, HnError *err);
bool hn_gguf_writer_set_str_array(HnGgufWriter *w, const char *key, const char *const *strings,
                                  uint64_t count, HnError *err);
/* Removes a key if present. */
void hn_gguf_writer_remove_kv(HnGgufWriter *w, const char *key);

/* Declares the next tensor.  `ne[0]` is the row length and must be a multiple of the
 * type's block size; unused trailing dimensions may be omitted (n_dims 1..4). */
bool hn_gguf_writer_add_tensor(HnGgufWriter *w, const char *name, HnType type, uint32_t n_dims,
                               const int64_t *ne, HnError *err);

/* Bytes of data the tensor declared at `index` takes. */
size_t hn_gguf_writer_tensor_nbytes(const HnGgufWriter *w, int64_t index);

/* Opens a temporary file beside `path` and writes everything up to the tensor data. */
bool hn_gguf_writer_begin(HnGgufWriter *w, const char *path, HnError *err);

/* Appends `n` bytes of tensor data; pieces may span tensors.  Padding between tensors is
 * added automatically. */
bool hn_gguf_writer_write(HnGgufWriter *w, const void *data, size_t n, HnError *err);

/* Checks that every tensor's data was written, flushes and renames into place. */
bool hn_gguf_writer_finish(HnGgufWriter *w, HnError *err);

#ifdef __cplusplus
}
#endif
