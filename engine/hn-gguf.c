/* hn-gguf.c — validating, memory-mapped GGUF reader.
 *
 * All validation happens once, in parse_file(): afterwards every offset in the
 * HnGguf structures is known to lie inside the mapping, which is what lets the
 * accessors be infallible and the rest of the engine trust tensor pointers.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-gguf.h"

#include "hn-quants.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"
/* Nested arrays are legal GGUF but unused by real models; the limit only stops a
 * hostile file from recursing deeply. */
#define MAX_ARRAY_NESTING 4

struct HnGguf {
  const uint8_t *bytes;
  size_t size;
  bool mapped; /* unmap on close */
  uint32_t version;
  uint32_t alignment;
  size_t data_offset;
  int64_t n_kv;
  HnGgufKv *kvs;
  int64_t n_tensors;
  HnGgufTensor *tensors;
  char *names; /* storage for all tensor names, NUL-separated */
};

typedef struct {
  const uint8_t *base;
  size_t size;
  size_t pos;
  HnError *err;
} Reader;

static size_t
remaining(const Reader *r)
{
  return r->size - r->pos;
}

/* The advice every "the file ends too early" message ends with. */
#define TRUNCATED_ADVICE                                                                      \
  "The file is incomplete, probably because a download or copy was interrupted; download it " \
  "again."

/* A count or length that runs past the end of the file: an ordinary one (below 16 M) means
 * the file was cut short; an absurd one means the header itself is damaged. */
#define PLAUSIBLE_COUNT ((uint64_t)1 << 24)
static HnStatus
beyond_end_status(uint64_t claimed)
{
  return claimed <= PLAUSIBLE_COUNT ? HN_ERR_TRUNCATED : HN_ERR_FORMAT;
}

static const char *
beyond_end_advice(uint64_t claimed)
{
  return claimed <= PLAUSIBLE_COUNT ? " " TRUNCATED_ADVICE : "";
}

static bool
read_bytes(Reader *r, void *out, size_t n, const char *what)
{
  if (remaining(r) < n)
    return hn_error_set(r->err, HN_ERR_TRUNCATED, "The file ends while reading %s (file is truncated). " TRUNCATED_ADVICE,
                        what);
  memcpy(out, r->base + r->pos, n);
  r->pos += n;
  return true;
}

static bool
read_u32(Reader *r, uint32_t *out, const char *what)
{
  uint8_t b[4] = { 0 };
  if (!read_bytes(r, b, 4, what))
    return false;
  *out = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
  return true;
}

static uint64_t
load_u64(const uint8_t *b)
{
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | b[i];
  return v;
}

static bool
read_u64(Reader *r, uint64_t *out, const char *what)
{
  uint8_t b[8] = { 0 };
  if (!read_bytes(r, b, 8, what))
    return false;
  *out = load_u64(b);
  return true;
}

/* A GGUF string: u64 length then bytes.  Returns a view into the mapping. */
static bool
read_string(Reader *r, HnStr *out, const char *what)
{
  uint64_t len;
  if (!read_u64(r, &len, what))
    return false;
  if (len > remaining(r))
    return hn_error_set(r->err, beyond_end_status(len), "%s has length %llu, which extends past end of file.%s",
                        what, (unsigned long long)len, beyond_end_advice(len));
  out->data = (const char *)(r->base + r->pos);
  out->len = len;
  r->pos += (size_t)len;
  return true;
}

size_t
hn_gguf_scalar_size(HnGgufValueType type)
{
  switch (type) {
  case HN_GGUF_UINT8:
  case HN_GGUF_INT8:
  case HN_GGUF_BOOL:
    return 1;
  case HN_GGUF_UINT16:
  case HN_GGUF_INT16:
    return 2;
  case HN_GGUF_UINT32:
  case HN_GGUF_INT32:
  case HN_GGUF_FLOAT32:
    return 4;
  case HN_GGUF_UINT64:
  case HN_GGUF_INT64:
  case HN_GGUF_FLOAT64:
    return 8;
  case HN_GGUF_STRING:
  case HN_GGUF_ARRAY:
  default:
    return 0;
  }
}

const char *
hn_gguf_type_name(HnGgufValueType type)
{
  static const char *const names[] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
  };
  if ((unsigned)type < HN_ARRAY_LEN(names))
    return names[type];
  return "unknown";
}

static bool
value_type_is_valid(uint32_t type)
{
  return type <= HN_GGUF_FLOAT64;
}

/* Skips over (and validates) one value of `type`, which may be an array. */
static bool
skip_value(Reader *r, uint32_t type, const char *key, int depth)
{
  if (type == HN_GGUF_STRING) {
    HnStr s;
    return read_string(r, &s, "a string value");
  }
  if (type != HN_GGUF_ARRAY) {
    size_t n = hn_gguf_scalar_size((HnGgufValueType)type);
    if (remaining(r) < n)
      return hn_error_set(r->err, HN_ERR_TRUNCATED, "file is truncated in the value of key '%s'. " TRUNCATED_ADVICE,
                          key);
    r->pos += n;
    return true;
  }
  if (depth >= MAX_ARRAY_NESTING)
    return hn_error_set(r->err, HN_ERR_FORMAT, "key '%s' nests arrays too deeply", key);
  uint32_t elem_type;
  uint64_t count;
  if (!read_u32(r, &elem_type, "an array type") || !read_u64(r, &count, "an array length"))
    return false;
  if (!value_type_is_valid(elem_type))
    return hn_error_set(r->err, HN_ERR_FORMAT, "key '%s' has an array of unknown type %u", key, elem_type);
  size_t elem_size = hn_gguf_scalar_size((HnGgufValueType)elem_type);
  if (elem_size > 0) {
    if (count > remaining(r) / elem_size)
      return hn_error_set(r->err, beyond_end_status(count),
                          "array of key '%s' has %llu elements, which extends past end of file.%s", key,
                          (unsigned long long)count, beyond_end_advice(count));
    r->pos += (size_t)count * elem_size;
    return true;
  }
  /* Strings and arrays take at least 8 bytes each: bound the loop by the file size. */
  if (count > remaining(r) / 8)
    return hn_error_set(r->err, beyond_end_status(count),
                        "array of key '%s' has %llu elements, which extends past end of file.%s", key,
                        (unsigned long long)count, beyond_end_advice(count));
  for (uint64_t i = 0; i < count; i++)
    if (!skip_value(r, elem_type, key, depth + 1))
      return false;
  return true;
}

static bool
key_is_printable(HnStr key)
{
  for (uint64_t i = 0; i < key.len; i++)
    if ((unsigned char)key.data[i] < 0x20)
      return false;
  return key.len > 0;
}

/* Copies a key into a NUL-terminated buffer for error messages, shortened if needed. */
static const char *
key_for_message(HnStr key, char *buf, size_t cap)
{
  size_t n = key.len < cap - 1 ? (size_t)key.len : cap - 1;
  memcpy(buf, key.data, n);
  buf[n] = '\0';
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)buf[i] < 0x20)
      buf[i] = '?';
  return buf;
}

static bool
parse_kvs(HnGguf *g, Reader *r, uint64_t n_kv)
{
  /* Each pair takes at least 8 (key length) + 4 (type) + 1 bytes. */
  if (n_kv > remaining(r) / 13)
    return hn_error_set(r->err, beyond_end_status(n_kv), "header claims %llu metadata keys, more than the file can hold.%s",
                        (unsigned long long)n_kv, beyond_end_advice(n_kv));
  g->kvs = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kvs);
  if (g->kvs == NULL)
    return hn_error_set(r->err, HN_ERR_NOMEM, "out of memory reading metadata");
  g->n_kv = (int64_t)n_kv;

  for (uint64_t i = 0; i < n_kv; i++) {
    HnGgufKv *kv = &g->kvs[i];
    char name[128];
    if (!read_string(r, &kv->key, "a metadata key"))
      return false;
    if (!key_is_printable(kv->key))
      return hn_error_set(r->err, HN_ERR_FORMAT, "metadata key %llu has an empty or binary name",
                          (unsigned long long)i);
    key_for_message(kv->key, name, sizeof name);
    for (uint64_t j = 0; j < i; j++)
      if (g->kvs[j].key.len == kv->key.len && memcmp(g->kvs[j].key.data, kv->key.data, kv->key.len) == 0)
        return hn_error_set(r->err, HN_ERR_FORMAT, "metadata key '%s' appears twice", name);

    uint32_t type;
    if (!read_u32(r, &type, "a metadata type"))
      return false;
    if (!value_type_is_valid(type))
      return hn_error_set(r->err, HN_ERR_FORMAT, "metadata key '%s' has unknown value type %u", name, type);
    kv->type = (HnGgufValueType)type;

    if (type == HN_GGUF_STRING) {
      HnStr s;
      if (!read_string(r, &s, "a string value"))
        return hn_error_set(r->err, HN_ERR_TRUNCATED, "string value of key '%s' extends past end of file. " TRUNCATED_ADVICE,
                            name);
      kv->value = (const uint8_t *)s.data;
      kv->array_count = s.len;
    } else if (type == HN_GGUF_ARRAY) {
      uint32_t elem_type;
      uint64_t count;
      if (!read_u32(r, &elem_type, "an array type") || !read_u64(r, &count, "an array length"))
        return false;
      if (!value_type_is_valid(elem_type))
        return hn_error_set(r->err, HN_ERR_FORMAT, "key '%s' has an array of unknown type %u", name, elem_type);
      kv->array_type = (HnGgufValueType)elem_type;
      kv->array_count = count;
      kv->value = r->base + r->pos;
      /* Rewind over the array header so skip_value validates the elements. */
      r->pos -= 12;
      if (!skip_value(r, HN_GGUF_ARRAY, name, 0))
        return false;
    } else {
      kv->value = r->base + r->pos;
      if (!skip_value(r, type, name, 0))
        return false;
    }
  }
  return true;
}

static bool
parse_tensors(HnGguf *g, Reader *r, uint64_t n_tensors)
{
  /* Each tensor info takes at least 8 (name) + 4 (dims) + 8 (ne) + 4 (type) + 8 (offset). */
  if (n_tensors > remaining(r) / 32)
    return hn_error_set(r->err, beyond_end_status(n_tensors), "header claims %llu tensors, more than the file can hold.%s",
                        (unsigned long long)n_tensors, beyond_end_advice(n_tensors));
  g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
  if (g->tensors == NULL)
    return hn_error_set(r->err, HN_ERR_NOMEM, "out of memory reading the tensor table");
  g->n_tensors = (int64_t)n_tensors;

  /* First pass: read names (views) and shapes; names are copied after we know the total. */
  HnStr *views = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *views);
  if (views == NULL)
    return hn_error_set(r->err, HN_ERR_NOMEM, "out of memory reading the tensor table");
  size_t names_size = 0;
  bool ok = true;
  for (uint64_t i = 0; ok && i < n_tensors; i++) {
    HnGgufTensor *t = &g->tensors[i];
    char name[128];
    if (!read_string(r, &views[i], "a tensor name")) {
      ok = false;
      break;
    }
    key_for_message(views[i], name, sizeof name);
    if (views[i].len == 0 || memchr(views[i].data, '\0', views[i].len) != NULL) {
      ok = hn_error_set(r->err, HN_ERR_FORMAT, "tensor %llu has an empty or binary name", (unsigned long long)i);
      break;
    }
    names_size += (size_t)views[i].len + 1;

    if (!read_u32(r, &t->n_dims, "tensor dimensions")) {
      ok = false;
      break;
    }
    if (t->n_dims == 0 || t->n_dims > HN_GGUF_MAX_DIMS) {
      ok = hn_error_set(r->err, HN_ERR_FORMAT, "tensor '%s' has %u dimensions (1 to %d allowed)", name,
                        t->n_dims, HN_GGUF_MAX_DIMS);
      break;
    }
    for (int d = 0; d < HN_GGUF_MAX_DIMS; d++)
      t->ne[d] = 1;
    for (uint32_t d = 0; ok && d < t->n_dims; d++) {
      uint64_t ne;
      if (!read_u64(r, &ne, "a tensor dimension")) {
        ok = false;
        break;
      }
      if (ne == 0 || ne > ((uint64_t)1 << 40))
        ok = hn_error_set(r->err, HN_ERR_FORMAT, "tensor '%s' has an invalid dimension %llu", name,
                          (unsigned long long)ne);
      t->ne[d] = (int64_t)ne;
    }
    if (!ok)
      break;
    if (!read_u32(r, &t->type, "a tensor type") || !read_u64(r, &t->offset, "a tensor offset")) {
      ok = false;
      break;
    }
    if (!hn_type_is_weight_type(t->type)) {
      ok = hn_error_set(r->err, HN_ERR_UNSUPPORTED,
                        "tensor '%s' has weight type %s (%u), which Hanashi does not support", name,
                        hn_type_name(t->type), t->type);
      break;
    }
    int64_t block = hn_type_block_elems(t->type);
    if (t->ne[0] % block != 0) {
      ok = hn_error_set(r->err, HN_ERR_FORMAT,
                        "tensor '%s' has rows of %lld elements, not a multiple of the %s block size %lld",
                        name, (long long)t->ne[0], hn_type_name(t->type), (long long)block);
      break;
    }
    size_t nbytes = hn_type_row_bytes(t->type, t->ne[0]);
    for (int d = 1; ok && d < HN_GGUF_MAX_DIMS; d++)
      if (!hn_mul_size(nbytes, (size_t)t->ne[d], &nbytes))
        ok = hn_error_set(r->err, HN_ERR_FORMAT, "tensor '%s' is impossibly large", name);
    t->nbytes = nbytes;
  }

  if (ok) {
    g->names = malloc(names_size ? names_size : 1);
    if (g->names == NULL)
      ok = hn_error_set(r->err, HN_ERR_NOMEM, "out of memory reading the tensor table");
  }
  if (ok) {
    char *p = g->names;
    for (uint64_t i = 0; i < n_tensors; i++) {
      memcpy(p, views[i].data, views[i].len);
      p[views[i].len] = '\0';
      g->tensors[i].name = p;
      p += views[i].len + 1;
    }
  }
  free(views);
  return ok;
}

/* 1234567 -> "1,234,567": exact, because a file one byte short must not read as complete. */
static void
format_bytes(size_t bytes, char *buf, size_t cap)
{
  char digits[32];
  int n = snprintf(digits, sizeof digits, "%zu", bytes);
  size_t w = 0;
  for (int i = 0; i < n && w + 2 < cap; i++) {
    if (i > 0 && (n - i) % 3 == 0)
      buf[w++] = ',';
    buf[w++] = digits[i];
  }
  buf[w] = '\0';
}

static bool
check_tensor_data(HnGguf *g, HnError *err)
{
  /* A file cut short (an interrupted download) is told apart from a damaged tensor table:
   * every offset is sane, the data just stops early.  The message gives the size the file
   * should have, the largest end of any tensor. */
  size_t needed = 0;
  const char *first_beyond = NULL;
  for (int64_t i = 0; i < g->n_tensors; i++) {
    HnGgufTensor *t = &g->tensors[i];
    if (t->offset % g->alignment != 0)
      return hn_error_set(err, HN_ERR_FORMAT, "tensor '%s' has offset %llu, not a multiple of the alignment %u",
                          t->name, (unsigned long long)t->offset, g->alignment);
    size_t start, end;
    if (t->offset > SIZE_MAX || !hn_add_size(g->data_offset, (size_t)t->offset, &start) ||
        !hn_add_size(start, t->nbytes, &end))
      return hn_error_set(err, HN_ERR_FORMAT, "tensor '%s' extends past end of file (its offset is impossible)",
                          t->name);
    needed = end > needed ? end : needed;
    if (end > g->size) {
      if (first_beyond == NULL)
        first_beyond = t->name;
      continue;
    }
    t->data = g->bytes + start;
    for (int64_t j = 0; j < i; j++)
      if (strcmp(g->tensors[j].name, t->name) == 0)
        return hn_error_set(err, HN_ERR_FORMAT, "tensor '%s' appears twice", t->name);
  }
  if (first_beyond != NULL) {
    char have[32], need[32];
    format_bytes(g->size, have, sizeof have);
    format_bytes(needed, need, sizeof need);
    return hn_error_set(err, HN_ERR_TRUNCATED,
                        "The model file has only %s of its %s bytes (%.0f%%): tensor '%s' extends past end "
                        "of file. " TRUNCATED_ADVICE,
                        have, need, floor(100.0 * (double)g->size / (double)needed), first_beyond);
  }
  return true;
}

static bool
parse_file(HnGguf *g, HnError *err)
{
  Reader r = { .base = g->bytes, .size = g->size, .pos = 0, .err = err };
  char magic[4];
  if (g->size < 4 || memcmp(g->bytes, GGUF_MAGIC, 4) != 0)
    return hn_error_set(err, HN_ERR_FORMAT, "not a GGUF file (bad magic)");
  if (!read_bytes(&r, magic, 4, "the magic"))
    return false;
  if (!read_u32(&r, &g->version, "the version"))
    return false;
  if (g->version != 2 && g->version != 3)
    return hn_error_set(err, HN_ERR_UNSUPPORTED, "GGUF version %u is not supported (only 2 and 3)", g->version);

  uint64_t n_tensors, n_kv;
  if (!read_u64(&r, &n_tensors, "the tensor count") || !read_u64(&r, &n_kv, "the metadata count"))
    return false;
  if (!parse_kvs(g, &r, n_kv))
    return false;

  g->alignment = HN_GGUF_DEFAULT_ALIGNMENT;
  if (hn_gguf_find_key(g, "general.alignment") >= 0) {
    HnError local = { 0 };
    uint32_t alignment = 0;
    if (!hn_gguf_get_u32(g, "general.alignment", &alignment, &local) || alignment == 0 ||
        (alignment & (alignment - 1)) != 0 || alignment > (1u << 20))
      return hn_error_set(err, HN_ERR_FORMAT, "general.alignment must be a power of two");
    g->alignment = alignment;
  }

  if (!parse_tensors(g, &r, n_tensors))
    return false;

  size_t data_offset = r.pos;
  size_t misalign = data_offset % g->alignment;
  if (misalign != 0)
    data_offset += g->alignment - misalign;
  if (data_offset > g->size) {
    if (n_tensors > 0)
      return hn_error_set(err, HN_ERR_TRUNCATED,
                          "The file ends before its tensor data begins (file is truncated). " TRUNCATED_ADVICE);
    data_offset = g->size;
  }
  g->data_offset = data_offset;
  return check_tensor_data(g, err);
}

static void
free_tables(HnGguf *g)
{
  free(g->kvs);
  free(g->tensors);
  free(g->names);
}

HnGguf *
hn_gguf_open_memory(const void *data, size_t size, HnError *err)
{
  HnGguf *g = calloc(1, sizeof *g);
  if (g == NULL) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return NULL;
  }
  g->bytes = data;
  g->size = size;
  if (!parse_file(g, err)) {
    free_tables(g);
    free(g);
    return NULL;
  }
  return g;
}

HnGguf *
hn_gguf_open(const char *path, HnError *err)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    hn_error_set(err, HN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    hn_error_set(err, HN_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    close(fd);
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    hn_error_set(err, HN_ERR_IO, "'%s' is not a regular file", path);
    close(fd);
    return NULL;
  }
  if (st.st_size < 24) {
    /* the start of a GGUF header that stops short is a cut-off file, anything else is not
     * a model at all */
    char magic[4];
    if (pread(fd, magic, 4, 0) == 4 && memcmp(magic, GGUF_MAGIC, 4) == 0)
      hn_error_set(err, HN_ERR_TRUNCATED, "'%s' is too small to be a GGUF file (%lld bytes). " TRUNCATED_ADVICE,
                   path, (long long)st.st_size);
    else
      hn_error_set(err, HN_ERR_FORMAT, "'%s' is too small to be a GGUF file (%lld bytes)", path,
                   (long long)st.st_size);
    close(fd);
    return NULL;
  }
  size_t size = (size_t)st.st_size;
  void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    hn_error_set(err, HN_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
    return NULL;
  }
  HnGguf *g = hn_gguf_open_memory(map, size, err);
  if (g == NULL) {
    munmap(map, size);
    return NULL;
  }
  g->mapped = true;
  return g;
}

void
hn_gguf_close(HnGguf *g)
{
  if (g == NULL)
    return;
  if (g->mapped)
    munmap((void *)g->bytes, g->size);
  free_tables(g);
  free(g);
}

uint32_t hn_gguf_version(const HnGguf *g) { return g->version; }
size_t hn_gguf_file_size(const HnGguf *g) { return g->size; }
uint32_t hn_gguf_alignment(const HnGguf *g) { return g->alignment; }
const uint8_t *hn_gguf_bytes(const HnGguf *g) { return g->bytes; }
size_t hn_gguf_data_offset(const HnGguf *g) { return g->data_offset; }
int64_t hn_gguf_n_kv(const HnGguf *g) { return g->n_kv; }
int64_t hn_gguf_n_tensors(const HnGguf *g) { return g->n_tensors; }

const HnGgufKv *
hn_gguf_kv(const HnGguf *g, int64_t index)
{
  return index >= 0 && index < g->n_kv ? &g->kvs[index] : NULL;
}

const HnGgufTensor *
hn_gguf_tensor(const HnGguf *g, int64_t index)
{
  return index >= 0 && index < g->n_tensors ? &g->tensors[index] : NULL;
}

bool
hn_str_eq(HnStr s, const char *cstr)
{
  size_t n = strlen(cstr);
  return s.len == n && memcmp(s.data, cstr, n) == 0;
}

int64_t
hn_gguf_find_key(const HnGguf *g, const char *key)
{
  for (int64_t i = 0; i < g->n_kv; i++)
    if (hn_str_eq(g->kvs[i].key, key))
      return i;
  return -1;
}

const HnGgufTensor *
hn_gguf_find_tensor(const HnGguf *g, const char *name)
{
  for (int64_t i = 0; i < g->n_tensors; i++)
    if (strcmp(g->tensors[i].name, name) == 0)
      return &g->tensors[i];
  return NULL;
}

/* Reads a scalar of an integer or bool type as a wide integer.  Signedness is kept
 * apart so that a uint64 above INT64_MAX is not mistaken for a negative number. */
static bool
scalar_as_int(HnGgufValueType type, const uint8_t *p, int64_t *value, bool *is_huge_unsigned)
{
  *is_huge_unsigned = false;
  switch (type) {
  case HN_GGUF_UINT8:
  case HN_GGUF_BOOL:
    *value = p[0];
    return true;
  case HN_GGUF_INT8:
    *value = (int8_t)p[0];
    return true;
  case HN_GGUF_UINT16:
    *value = (uint16_t)(p[0] | p[1] << 8);
    return true;
  case HN_GGUF_INT16:
    *value = (int16_t)(uint16_t)(p[0] | p[1] << 8);
    return true;
  case HN_GGUF_UINT32:
    *value = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return true;
  case HN_GGUF_INT32:
    *value = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    return true;
  case HN_GGUF_UINT64: {
    uint64_t u = load_u64(p);
    *is_huge_unsigned = u > INT64_MAX;
    *value = (int64_t)(u & INT64_MAX);
    return true;
  }
  case HN_GGUF_INT64:
    *value = (int64_t)load_u64(p);
    return true;
  default:
    return false;
  }
}

static bool
scalar_as_double(HnGgufValueType type, const uint8_t *p, double *value)
{
  if (type == HN_GGUF_FLOAT32) {
    uint32_t bits = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &bits, sizeof f);
    *value = f;
    return true;
  }
  if (type == HN_GGUF_FLOAT64) {
    uint64_t bits = load_u64(p);
    memcpy(value, &bits, sizeof *value);
    return true;
  }
  int64_t i;
  bool huge;
  if (!scalar_as_int(type, p, &i, &huge))
    return false;
  *value = huge ? (double)i + 9223372036854775808.0 : (double)i;
  return true;
}

static const HnGgufKv *
lookup(const HnGguf *g, const char *key, HnError *err)
{
  int64_t i = hn_gguf_find_key(g, key);
  if (i < 0) {
    hn_error_set(err, HN_ERR_NOT_FOUND, "metadata key '%s' is missing", key);
    return NULL;
  }
  return &g->kvs[i];
}

bool
hn_gguf_get_i64(const HnGguf *g, const char *key, int64_t *out, HnError *err)
{
  const HnGgufKv *kv = lookup(g, key, err);
  if (kv == NULL)
    return false;
  int64_t value;
  bool huge;
  if (!scalar_as_int(kv->type, kv->value, &value, &huge))
    return hn_error_set(err, HN_ERR_FORMAT, "metadata key '%s' should be an integer but is a %s", key,
                        hn_gguf_type_name(kv->type));
  if (huge)
    return hn_error_set(err, HN_ERR_FORMAT, "metadata key '%s' is out of range", key);
  *out = value;
  return true;
}

bool
hn_gguf_get_u32(const HnGguf *g, const char *key, uint32_t *out, HnError *err)
{
  int64_t value;
  if (!hn_gguf_get_i64(g, key, &value, err))
    return false;
  if (value < 0 || value > UINT32_MAX)
    return hn_error_set(err, HN_ERR_FORMAT, "metadata key '%s' has out-of-range value %lld", key, (long long)value);
  *out = (uint32_t)value;
  return true;
}

bool
hn_gguf_get_f32(const HnGguf *g, const char *key, float *out, HnError *err)
{
  const HnGgufKv *kv = lookup(g, key, err);
  if (kv == NULL)
    return false;
  double value;
  if (kv->type == HN_GGUF_BOOL || !scalar_as_double(kv->type, kv->value, &value))
    return hn_error_set(err, HN_ERR_FORMAT, "metadata key '%s' should be a number but is a %s", key,
                        hn_gguf_type_name(kv->type));
  *out = (float)value;
  return true;
}

bool
hn_gguf_get_bool(const HnGguf *g, const char *key, bool *out, HnError *err)
{
  const HnGgufKv *kv = lookup(g, key, err);
  if (kv == NULL)
    return false;
  int64_t value;
  bool huge;
  if (!scalar_as_int(kv->type, kv->value, &value, &huge))
    return hn_error_set(err, HN_ERR_FORMAT, "metadata key '%s' should be a boolean but is a %s", key,
                        hn_gguf_type_name(kv->type));
  *out = value != 0 || huge;
  return true;
}

bool
hn_gguf_get_str(const HnGguf *g, const char *key, HnStr *out, HnError *err)
{
  const HnGgufKv *kv = lookup(g, key, err);
  if (kv == NULL)
    return false;
  if (kv->type != HN_GGUF_STRING)
    return hn_error_set(err, HN_ERR_FORMAT, "metadata key '%s' should be a string but is a %s", key,
                        hn_gguf_type_name(kv->type));
  out->data = (const char *)kv->value;
  out->len = kv->array_count;
  return true;
}

bool
hn_gguf_get_array(const HnGguf *g, const char *key, HnGgufArray *out, HnError *err)
{
  const HnGgufKv *kv = lookup(g, key, err);
  if (kv == NULL)
    return false;
  if (kv->type != HN_GGUF_ARRAY)
    return hn_error_set(err, HN_ERR_FORMAT, "metadata key '%s' should be an array but is a %s", key,
                        hn_gguf_type_name(kv->type));
  out->type = kv->array_type;
  out->count = kv->array_count;
  out->data = kv->value;
  return true;
}

bool
hn_gguf_get_u32_or(const HnGguf *g, const char *key, uint32_t fallback, uint32_t *out, HnError *err)
{
  if (hn_gguf_find_key(g, key) < 0) {
    *out = fallback;
    return true;
  }
  return hn_gguf_get_u32(g, key, out, err);
}

bool
hn_gguf_get_f32_or(const HnGguf *g, const char *key, float fallback, float *out, HnError *err)
{
  if (hn_gguf_find_key(g, key) < 0) {
    *out = fallback;
    return true;
  }
  return hn_gguf_get_f32(g, key, out, err);
}

bool
hn_gguf_get_bool_or(const HnGguf *g, const char *key, bool fallback, bool *out, HnError *err)
{
  if (hn_gguf_find_key(g, key) < 0) {
    *out = fallback;
    return true;
  }
  return hn_gguf_get_bool(g, key, out, err);
}

int64_t
hn_gguf_array_int(const HnGgufArray *array, uint64_t i)
{
  size_t size = hn_gguf_scalar_size(array->type);
  int64_t value = 0;
  bool huge;
  if (size == 0 || i >= array->count || !scalar_as_int(array->type, array->data + i * size, &value, &huge))
    return 0;
  return value;
}

double
hn_gguf_array_float(const HnGgufArray *array, uint64_t i)
{
  size_t size = hn_gguf_scalar_size(array->type);
  double value = 0;
  if (size == 0 || i >= array->count || !scalar_as_double(array->type, array->data + i * size, &value))
    return 0;
  return value;
}

void
hn_gguf_array_strings(const HnGgufArray *array, HnStr *out)
{
  if (array->type != HN_GGUF_STRING)
    return;
  /* Lengths were validated at open time, so the walk stays inside the mapping. */
  const uint8_t *p = array->data;
  for (uint64_t i = 0; i < array->count; i++) {
    uint64_t len = load_u64(p);
    out[i].data = (const char *)(p + 8);
    out[i].len = len;
    p += 8 + len;
  }
}

static bool
is_layer_tensor(const char *name)
{
  if (strncmp(name, "blk.", 4) != 0)
    return false;
  const char *p = name + 4;
  if (*p < '0' || *p > '9')
    return false;
  while (*p >= '0' && *p <= '9')
    p++;
  return *p == '.';
}

uint32_t
hn_gguf_main_weight_type(const HnGguf *gguf)
{
  /* [0]: layer matrices, [1]: every matrix (the fallback) */
  uint64_t bytes[2][HN_TYPE_COUNT] = { { 0 } };
  for (int64_t i = 0; i < hn_gguf_n_tensors(gguf); i++) {
    const HnGgufTensor *t = hn_gguf_tensor(gguf, i);
    if (t->n_dims < 2 || t->type >= HN_TYPE_COUNT)
      continue;
    bytes[1][t->type] += t->nbytes;
    if (is_layer_tensor(t->name))
      bytes[0][t->type] += t->nbytes;
  }
  for (int pass = 0; pass < 2; pass++) {
    uint32_t best = HN_TYPE_COUNT;
    for (uint32_t type = 0; type < HN_TYPE_COUNT; type++)
      if (bytes[pass][type] > 0 && (best == HN_TYPE_COUNT || bytes[pass][type] > bytes[pass][best]))
        best = type;
    if (best != HN_TYPE_COUNT)
      return best;
  }
  return HN_TYPE_COUNT;
}
