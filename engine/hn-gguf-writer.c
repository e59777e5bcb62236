/* hn-gguf-writer.c — GGUF v3 writer (see hn-gguf-writer.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-gguf-writer.h"
#include "hn-array.h"

#include "hn-quants.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ggml refuses tensor names of 64 bytes or more (its fixed name buffer). */
#define MAX_TENSOR_NAME 63

typedef struct {
  char *key;
  size_t key_len;
  uint32_t type;
  uint8_t *payload; /* the serialized value, as it follows the type field in the file */
  size_t payload_len;
} WriterKv;

typedef struct {
  char *name;
  uint32_t type;
  uint32_t n_dims;
  int64_t ne[HN_GGUF_MAX_DIMS];
  uint64_t offset;
  size_t nbytes;
} WriterTensor;

struct HnGgufWriter {
  uint32_t alignment;
  WriterKv *kvs;
  int64_t n_kv;
  size_t cap_kv;
  WriterTensor *tensors;
  int64_t n_tensors;
  size_t cap_tensors;

  /* Set by begin(). */
  FILE *file;
  char *path;
  char *tmp_path;
  int64_t current;      /* tensor whose data is being written */
  size_t current_done;  /* bytes of it written so far */
  bool failed;
};

HnGgufWriter *
hn_gguf_writer_new(HnError *err)
{
  HnGgufWriter *w = calloc(1, sizeof *w);
  if (w == NULL) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory creating a GGUF writer");
    return NULL;
  }
  w->alignment = HN_GGUF_DEFAULT_ALIGNMENT;
  return w;
}

void
hn_gguf_writer_free(HnGgufWriter *w)
{
  if (w == NULL)
    return;
  if (w->file != NULL) {
    fclose(w->file);
    if (w->tmp_path != NULL)
      unlink(w->tmp_path);
  }
  for (int64_t i = 0; i < w->n_kv; i++) {
    free(w->kvs[i].key);
    free(w->kvs[i].payload);
  }
  for (int64_t i = 0; i < w->n_tensors; i++)
    free(w->tensors[i].name);
  free(w->kvs);
  free(w->tensors);
  free(w->path);
  free(w->tmp_path);
  free(w);
}

bool
hn_gguf_writer_set_alignment(HnGgufWriter *w, uint32_t alignment, HnError *err)
{
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > (1u << 20))
    return hn_error_set(err, HN_ERR_INVALID_ARG, "GGUF alignment %u is not a power of two up to 1 MiB", alignment);
  if (w->file != NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "GGUF alignment set after writing began");
  w->alignment = alignment;
  return true;
}

/* ---------------------------------------------------------------------------------- */
/* Metadata                                                                           */
/* ---------------------------------------------------------------------------------- */

static int64_t
find_kv(const HnGgufWriter *w, const char *key, size_t key_len)
{
  for (int64_t i = 0; i < w->n_kv; i++)
    if (w->kvs[i].key_len == key_len && memcmp(w->kvs[i].key, key, key_len) == 0)
      return i;
  return -1;
}

/* Takes ownership of `payload` (freed on failure too). */
static bool
put_kv(HnGgufWriter *w, const char *key, size_t key_len, uint32_t type, uint8_t *payload,
       size_t payload_len, HnError *err)
{
  if (w->file != NULL) {
    free(payload);
    return hn_error_set(err, HN_ERR_INVALID_ARG, "GGUF metadata changed after writing began");
  }
  if (key_len == 0) {
    free(payload);
    return hn_error_set(err, HN_ERR_INVALID_ARG, "GGUF metadata key is empty");
  }
  int64_t at = find_kv(w, key, key_len);
  if (at >= 0) {
    free(w->kvs[at].payload);
    w->kvs[at].type = type;
    w->kvs[at].payload = payload;
    w->kvs[at].payload_len = payload_len;
    return true;
  }
  if (!HN_ARRAY_RESERVE(w->kvs, w->cap_kv, (size_t)w->n_kv + 1, 32)) {
    free(payload);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory adding GGUF metadata");
  }
  char *copy = malloc(key_len + 1);
  if (copy == NULL) {
    free(payload);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory adding GGUF metadata");
  }
  memcpy(copy, key, key_len);
  copy[key_len] = '\0';
  w->kvs[w->n_kv++] = (WriterKv){ copy, key_len, type, payload, payload_len };
  return true;
}

static bool
put_copy(HnGgufWriter *w, const char *key, uint32_t type, const void *bytes, size_t len, HnError *err)
{
  uint8_t *payload = malloc(len ? len : 1);
  if (payload == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory adding GGUF metadata");
  memcpy(payload, bytes, len);
  return put_kv(w, key, strlen(key), type, payload, len, err);
}

static void
le64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static void
le32(uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

bool
hn_gguf_writer_set_u32(HnGgufWriter *w, const char *key, uint32_t value, HnError *err)
{
  uint8_t b[4];
  le32(b, value);
  return put_copy(w, key, HN_GGUF_UINT32, b, 4, err);
}

bool
hn_gguf_writer_set_i32(HnGgufWriter *w, const char *key, int32_t value, HnError *err)
{
  uint8_t b[4];
  le32(b, (uint32_t)value);
  return put_copy(w, key, HN_GGUF_INT32, b, 4, err);
}

bool
hn_gguf_writer_set_u64(HnGgufWriter *w, const char *key, uint64_t value, HnError *err)
{
  uint8_t b[8];
  le64(b, value);
  return put_copy(w, key, HN_GGUF_UINT64, b, 8, err);
}

bool
hn_gguf_writer_set_f32(HnGgufWriter *w, const char *key, float value, HnError *err)
{
  uint32_t bits;
  memcpy(&bits, &value, 4);
  uint8_t b[4];
  le32(b, bits);
  return put_copy(w, key, HN_GGUF_FLOAT32, b, 4, err);
}

bool
hn_gguf_writer_set_bool(HnGgufWriter *w, const char *key, bool value, HnError *err)
{
  uint8_t b = value ? 1 : 0;
  return put_copy(w, key, HN_GGUF_BOOL, &b, 1, err);
}

bool
hn_gguf_writer_set_str(HnGgufWriter *w, const char *key, const char *value, HnError *err)
{
  size_t len = strlen(value);
  uint8_t *payload = malloc(8 + len);
  if (payload == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory adding GGUF metadata");
  le64(payload, len);
  memcpy(payload + 8, value, len);
  return put_kv(w, key, strlen(key), HN_GGUF_STRING, payload, 8 + len, err);
}

bool
hn_gguf_writer_set_array(HnGgufWriter *w, const char *key, HnGgufValueType elem_type,
                         const void *data, uint64_t count, HnError *err)
{
  size_t elem = hn_gguf_scalar_size(elem_type);
  if (elem == 0)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "array of key '%s' must hold scalars", key);
  size_t bytes, total;
  if (count > SIZE_MAX || !hn_mul_size((size_t)count, elem, &bytes) || !hn_add_size(bytes, 12, &total))
    return hn_error_set(err, HN_ERR_NOMEM, "array of key '%s' is too large", key);
  uint8_t *payload = malloc(total);
  if (payload == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory adding GGUF metadata");
  le32(payload, (uint32_t)elem_type);
  le64(payload + 4, count);
  memcpy(payload + 12, data, bytes);
  return put_kv(w, key, strlen(key), HN_GGUF_ARRAY, payload, total, err);
}

bool
hn_gguf_writer_set_str_array(HnGgufWriter *w, const char *key, const char *const *strings,
                             uint64_t count, HnError *err)
{
  size_t total = 12;
  for (uint64_t i = 0; i < count; i++)
    if (!hn_add_size(total, 8 + strlen(strings[i]), &total))
      return hn_error_set(err, HN_ERR_NOMEM, "array of key '%s' is too large", key);
  uint8_t *payload = malloc(total);
  if (payload == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory adding GGUF metadata");
  le32(payload, HN_GGUF_STRING);
  le64(payload + 4, count);
  size_t pos = 12;
  for (uint64_t i = 0; i < count; i++) {
    size_t len = strlen(strings[i]);
    le64(payload + pos, len);
    memcpy(payload + pos + 8, strings[i], len);
    pos += 8 + len;
  }
  return put_kv(w, key, strlen(key), HN_GGUF_ARRAY, payload, total, err);
}

void
hn_gguf_writer_remove_kv(HnGgufWriter *w, const char *key)
{
  int64_t at = find_kv(w, key, strlen(key));
  if (at < 0 || w->file != NULL)
    return;
  free(w->kvs[at].key);
  free(w->kvs[at].payload);
  memmove(&w->kvs[at], &w->kvs[at + 1], (size_t)(w->n_kv - at - 1) * sizeof *w->kvs);
  w->n_kv--;
}

static uint64_t
read_le64(const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

static uint32_t
read_le32(const uint8_t *p)
{
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Size of one serialized value of `type` at p (the reader has validated it already;
 * `end` still bounds the walk so a reader bug cannot run us off the mapping). */
static bool
value_extent(const uint8_t *p, const uint8_t *end, uint32_t type, size_t *out, int depth)
{
  if (type == HN_GGUF_STRING) {
    if (end - p < 8)
      return false;
    uint64_t len = read_le64(p);
    if (len > (uint64_t)(end - p) - 8)
      return false;
    *out = 8 + (size_t)len;
    return true;
  }
  if (type != HN_GGUF_ARRAY) {
    size_t n = hn_gguf_scalar_size((HnGgufValueType)type);
    if (n == 0 || (size_t)(end - p) < n)
      return false;
    *out = n;
    return true;
  }
  if (depth > 8 || end - p < 12)
    return false;
  uint32_t elem_type = read_le32(p);
  uint64_t count = read_le64(p + 4);
  size_t pos = 12;
  size_t elem = hn_gguf_scalar_size((HnGgufValueType)elem_type);
  if (elem_type != HN_GGUF_STRING && elem_type != HN_GGUF_ARRAY) {
    if (elem == 0 || count > (uint64_t)(end - p - 12) / elem)
      return false;
    *out = 12 + (size_t)count * elem;
    return true;
  }
  for (uint64_t i = 0; i < count; i++) {
    size_t n;
    if (!value_extent(p + pos, end, elem_type, &n, depth + 1))
      return false;
    pos += n;
  }
  *out = pos;
  return true;
}

bool
hn_gguf_writer_copy_kv(HnGgufWriter *w, const HnGguf *src, const HnGgufKv *kv, HnError *err)
{
  /* Rebuild the serialized value from the reader's view of it. */
  const uint8_t *start;
  uint32_t type = kv->type;
  if (type == HN_GGUF_STRING) {
    uint8_t *payload = malloc(8 + (size_t)kv->array_count);
    if (payload == NULL)
      return hn_error_set(err, HN_ERR_NOMEM, "out of memory copying GGUF metadata");
    le64(payload, kv->array_count);
    memcpy(payload + 8, kv->value, (size_t)kv->array_count);
    return put_kv(w, kv->key.data, (size_t)kv->key.len, type, payload, 8 + (size_t)kv->array_count, err);
  }
  if (type == HN_GGUF_ARRAY) {
    start = kv->value - 12; /* the value points past the array's type and count */
  } else {
    start = kv->value;
  }
  size_t len;
  const uint8_t *file_start = hn_gguf_bytes(src);
  const uint8_t *end = file_start + hn_gguf_file_size(src);
  if (start < file_start || start >= end)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "metadata key does not belong to the source file");
  if (!value_extent(start, end, type, &len, 0))
    return hn_error_set(err, HN_ERR_FORMAT, "cannot copy the value of a metadata key");
  uint8_t *payload = malloc(len ? len : 1);
  if (payload == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory copying GGUF metadata");
  memcpy(payload, start, len);
  return put_kv(w, kv->key.data, (size_t)kv->key.len, type, payload, len, err);
}

bool
hn_gguf_writer_copy_kvs(HnGgufWriter *w, const HnGguf *src, HnError *err)
{
  for (int64_t i = 0; i < hn_gguf_n_kv(src); i++)
    if (!hn_gguf_writer_copy_kv(w, src, hn_gguf_kv(src, i), err))
      return false;
  return true;
}

/* ---------------------------------------------------------------------------------- */
/* Tensors and output                                                                 */
/* ---------------------------------------------------------------------------------- */

bool
hn_gguf_writer_add_tensor(HnGgufWriter *w, const char *name, HnType type, uint32_t n_dims,
                          const int64_t *ne, HnError *err)
{
  if (w->file != NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "tensor '%s' declared after writing began", name);
  size_t name_len = strlen(name);
  if (name_len == 0 || name_len > MAX_TENSOR_NAME)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "tensor name '%s' must have 1 to %d bytes", name,
                        MAX_TENSOR_NAME);
  if (!hn_type_is_known(type))
    return hn_error_set(err, HN_ERR_INVALID_ARG, "tensor '%s' has type %s, which cannot be written", name,
                        hn_type_name(type));
  if (n_dims < 1 || n_dims > HN_GGUF_MAX_DIMS)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "tensor '%s' has %u dimensions", name, n_dims);
  for (int64_t i = 0; i < w->n_tensors; i++)
    if (strcmp(w->tensors[i].name, name) == 0)
      return hn_error_set(err, HN_ERR_INVALID_ARG, "tensor '%s' declared twice", name);

  WriterTensor t = { .type = type, .n_dims = n_dims };
  int64_t count = 1;
  for (uint32_t d = 0; d < HN_GGUF_MAX_DIMS; d++) {
    t.ne[d] = d < n_dims ? ne[d] : 1;
    if (t.ne[d] <= 0 || t.ne[d] > (INT64_C(1) << 40) || __builtin_mul_overflow(count, t.ne[d], &count) ||
        count > (INT64_C(1) << 50))
      return hn_error_set(err, HN_ERR_INVALID_ARG, "tensor '%s' has an invalid shape", name);
  }
  size_t row = hn_type_row_bytes(type, t.ne[0]);
  if (row == 0)
    return hn_error_set(err, HN_ERR_INVALID_ARG,
                        "tensor '%s': row length %lld is not a multiple of the %s block size %lld", name,
                        (long long)t.ne[0], hn_type_name(type), (long long)hn_type_block_elems(type));
  if (!hn_mul_size(row, (size_t)(count / t.ne[0]), &t.nbytes))
    return hn_error_set(err, HN_ERR_INVALID_ARG, "tensor '%s' is too large", name);

  if (!HN_ARRAY_RESERVE(w->tensors, w->cap_tensors, (size_t)w->n_tensors + 1, 64))
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory declaring tensors");
  t.name = malloc(name_len + 1);
  if (t.name == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory declaring tensors");
  memcpy(t.name, name, name_len + 1);
  w->tensors[w->n_tensors++] = t;
  return true;
}

size_t
hn_gguf_writer_tensor_nbytes(const HnGgufWriter *w, int64_t index)
{
  if (index < 0 || index >= w->n_tensors)
    return 0;
  return w->tensors[index].nbytes;
}

static bool
put_bytes(HnGgufWriter *w, const void *data, size_t n, HnError *err)
{
  if (n != 0 && fwrite(data, 1, n, w->file) != n) {
    w->failed = true;
    return hn_error_set(err, HN_ERR_IO, "cannot write '%s': %s", w->tmp_path, strerror(errno));
  }
  return true;
}

static bool
put_u32(HnGgufWriter *w, uint32_t v, HnError *err)
{
  uint8_t b[4];
  le32(b, v);
  return put_bytes(w, b, 4, err);
}

static bool
put_u64(HnGgufWriter *w, uint64_t v, HnError *err)
{
  uint8_t b[8];
  le64(b, v);
  return put_bytes(w, b, 8, err);
}

static bool
put_padding(HnGgufWriter *w, uint64_t position, HnError *err)
{
  static const uint8_t zeros[64] = { 0 };
  uint64_t pad = (w->alignment - position % w->alignment) % w->alignment;
  while (pad > 0) {
    size_t n = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
    if (!put_bytes(w, zeros, n, err))
      return false;
    pad -= n;
  }
  return true;
}

static uint64_t
align_up(uint64_t v, uint32_t alignment)
{
  return (v + alignment - 1) / alignment * alignment;
}

/* Moves past tensors whose data is complete (pads them). */
static bool
advance(HnGgufWriter *w, HnError *err)
{
  while (w->current < w->n_tensors && w->current_done == w->tensors[w->current].nbytes) {
    if (!put_padding(w, w->tensors[w->current].nbytes, err))
      return false;
    w->current++;
    w->current_done = 0;
  }
  return true;
}

bool
hn_gguf_writer_begin(HnGgufWriter *w, const char *path, HnError *err)
{
  if (w->file != NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "GGUF writing already began");
  if (w->alignment != HN_GGUF_DEFAULT_ALIGNMENT || find_kv(w, "general.alignment", 17) >= 0)
    if (!hn_gguf_writer_set_u32(w, "general.alignment", w->alignment, err))
      return false;

  uint64_t offset = 0;
  for (int64_t i = 0; i < w->n_tensors; i++) {
    w->tensors[i].offset = offset;
    offset = align_up(offset + w->tensors[i].nbytes, w->alignment);
  }

  size_t path_len = strlen(path);
  w->path = malloc(path_len + 1);
  w->tmp_path = malloc(path_len + 16);
  if (w->path == NULL || w->tmp_path == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory");
  memcpy(w->path, path, path_len + 1);
  snprintf(w->tmp_path, path_len + 16, "%s.tmp-XXXXXX", path);
  int fd = mkstemp(w->tmp_path);
  if (fd < 0) {
    int e = errno;
    free(w->tmp_path);
    w->tmp_path = NULL;
    return hn_error_set(err, HN_ERR_IO, "cannot create a file beside '%s': %s", path, strerror(e));
  }
  w->file = fdopen(fd, "wb");
  if (w->file == NULL) {
    int e = errno;
    close(fd);
    unlink(w->tmp_path);
    return hn_error_set(err, HN_ERR_IO, "cannot write '%s': %s", w->tmp_path, strerror(e));
  }
  /* mkstemp creates 0600; a model file is an ordinary document. */
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  setvbuf(w->file, NULL, _IOFBF, 1 << 20);

  uint64_t position = 0;
  if (!put_bytes(w, "GGUF", 4, err) || !put_u32(w, 3, err) || !put_u64(w, (uint64_t)w->n_tensors, err) ||
      !put_u64(w, (uint64_t)w->n_kv, err))
    return false;
  position += 24;
  for (int64_t i = 0; i < w->n_kv; i++) {
    const WriterKv *kv = &w->kvs[i];
    if (!put_u64(w, kv->key_len, err) || !put_bytes(w, kv->key, kv->key_len, err) ||
        !put_u32(w, kv->type, err) || !put_bytes(w, kv->payload, kv->payload_len, err))
      return false;
    position += 8 + kv->key_len + 4 + kv->payload_len;
  }
  for (int64_t i = 0; i < w->n_tensors; i++) {
    const WriterTensor *t = &w->tensors[i];
    size_t name_len = strlen(t->name);
    if (!put_u64(w, name_len, err) || !put_bytes(w, t->name, name_len, err) || !put_u32(w, t->n_dims, err))
      return false;
    for (uint32_t d = 0; d < t->n_dims; d++)
      if (!put_u64(w, (uint64_t)t->ne[d], err))
        return false;
    if (!put_u32(w, t->type, err) || !put_u64(w, t->offset, err))
      return false;
    position += 8 + name_len + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
  }
  if (!put_padding(w, position, err))
    return false;
  w->current = 0;
  w->current_done = 0;
  return advance(w, err);
}

bool
hn_gguf_writer_write(HnGgufWriter *w, const void *data, size_t n, HnError *err)
{
  if (w->file == NULL || w->failed)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "GGUF writer is not ready for tensor data");
  const uint8_t *p = data;
  while (n > 0) {
    if (w->current >= w->n_tensors)
      return hn_error_set(err, HN_ERR_INVALID_ARG, "more tensor data than the declared tensors hold");
    size_t room = w->tensors[w->current].nbytes - w->current_done;
    size_t take = n < room ? n : room;
    if (!put_bytes(w, p, take, err))
      return false;
    p += take;
    n -= take;
    w->current_done += take;
    if (!advance(w, err))
      return false;
  }
  return true;
}

bool
hn_gguf_writer_finish(HnGgufWriter *w, HnError *err)
{
  if (w->file == NULL || w->failed)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "GGUF writer is not ready to finish");
  if (w->current < w->n_tensors)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "tensor '%s' is missing %zu bytes of data",
                        w->tensors[w->current].name, w->tensors[w->current].nbytes - w->current_done);
  FILE *f = w->file;
  w->file = NULL;
  bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
  int e = errno;
  if (fclose(f) != 0 && ok) {
    ok = false;
    e = errno;
  }
  if (!ok) {
    unlink(w->tmp_path);
    return hn_error_set(err, HN_ERR_IO, "cannot write '%s': %s", w->tmp_path, strerror(e));
  }
  if (rename(w->tmp_path, w->path) != 0) {
    e = errno;
    unlink(w->tmp_path);
    return hn_error_set(err, HN_ERR_IO, "cannot rename '%s' to '%s': %s", w->tmp_path, w->path, strerror(e));
  }
  return true;
}
