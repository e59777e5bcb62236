/* hn-quantize.c — model conversion to a weight type or mix (see hn-quantize.h).
 *
 * The per-tensor choices follow the reference quantizer's published rules for LLaMA-like
 * models, so that a file we produce matches the one people would download.  Rows are
 * quantized in chunks, split over threads, and streamed to the writer: memory stays a
 * few megabytes whatever the model size.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-quantize.h"

#include "hn-gguf-writer.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* general.file_type values of the reference tool. */
enum {
  FT_ALL_F32 = 0,
  FT_F16 = 1,
  FT_Q4_0 = 2,
  FT_Q4_1 = 3,
  FT_Q8_0 = 7,
  FT_Q5_0 = 8,
  FT_Q5_1 = 9,
  FT_Q2_K = 10,
  FT_Q3_K_S = 11,
  FT_Q3_K_M = 12,
  FT_Q4_K_S = 14,
  FT_Q4_K_M = 15,
  FT_Q5_K_S = 16,
  FT_Q5_K_M = 17,
  FT_Q6_K = 18,
  FT_BF16 = 32,
};

static const HnQuantizeTarget targets[] = {
  { "F32", HN_TYPE_F32, FT_ALL_F32 },
  { "F16", HN_TYPE_F16, FT_F16 },
  { "BF16", HN_TYPE_BF16, FT_BF16 },
  { "Q8_0", HN_TYPE_Q8_0, FT_Q8_0 },
  { "Q4_0", HN_TYPE_Q4_0, FT_Q4_0 },
  { "Q4_1", HN_TYPE_Q4_1, FT_Q4_1 },
  { "Q5_0", HN_TYPE_Q5_0, FT_Q5_0 },
  { "Q5_1", HN_TYPE_Q5_1, FT_Q5_1 },
  { "Q2_K", HN_TYPE_Q2_K, FT_Q2_K },
  { "Q3_K", HN_TYPE_Q3_K, FT_Q3_K_S },
  { "Q4_K", HN_TYPE_Q4_K, FT_Q4_K_S },
  { "Q5_K", HN_TYPE_Q5_K, FT_Q5_K_S },
  { "Q6_K", HN_TYPE_Q6_K, FT_Q6_K },
  { "Q3_K_M", HN_TYPE_Q3_K, FT_Q3_K_M },
  { "Q4_K_M", HN_TYPE_Q4_K, FT_Q4_K_M },
  { "Q5_K_M", HN_TYPE_Q5_K, FT_Q5_K_M },
  { NULL, HN_TYPE_F32, 0 },
};

const HnQuantizeTarget *
hn_quantize_targets(void)
{
  return targets;
}

const HnQuantizeTarget *
hn_quantize_target_find(const char *name)
{
  for (const HnQuantizeTarget *t = targets; t->name != NULL; t++)
    if (strcasecmp(t->name, name) == 0)
      return t;
  return NULL;
}

static bool
is_float_type(HnType t)
{
  return t == HN_TYPE_F32 || t == HN_TYPE_F16 || t == HN_TYPE_BF16;
}

static bool
is_k_quant(HnType t)
{
  return t == HN_TYPE_Q2_K || t == HN_TYPE_Q3_K || t == HN_TYPE_Q4_K || t == HN_TYPE_Q5_K ||
         t == HN_TYPE_Q6_K;
}

static bool
ends_with(const char *s, const char *suffix)
{
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* ggml's notion of dimensionality: trailing sizes of 1 do not count. */
static int
effective_dims(const HnGgufTensor *t)
{
  int n = 1;
  for (int d = 1; d < HN_GGUF_MAX_DIMS; d++)
    if (t->ne[d] > 1)
      n = d + 1;
  return n;
}

/* Matrices are; vectors (norms, biases) and the MoE routers (ffn_gate_inp, which pick
 * the experts: a rounding there changes which weights run) stay as they are, as the
 * reference's quantizer leaves them. */
static bool
is_quantizable(const HnGgufTensor *t)
{
  return ends_with(t->name, "weight") && effective_dims(t) >= 2 && strstr(t->name, "ffn_gate_inp") == NULL;
}

/* Layer index from "blk.N.", or -1. */
static int
layer_of(const char *name)
{
  if (strncmp(name, "blk.", 4) != 0)
    return -1;
  char *end = NULL;
  long v = strtol(name + 4, &end, 10);
  if (end == name + 4 || *end != '.' || v < 0 || v > 100000)
    return -1;
  return (int)v;
}

/* The reference's "spend more bits here" layer pattern: the first and last eighth of
 * the layers and every third layer in between. */
static bool
use_more_bits(int i_layer, int n_layers)
{
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

static int
count_tensors_containing(const HnGguf *src, const char *part)
{
  int n = 0;
  for (int64_t i = 0; i < hn_gguf_n_tensors(src); i++)
    if (strstr(hn_gguf_tensor(src, i)->name, part) != NULL)
      n++;
  return n;
}

/* Position of tensor `index` among the tensors whose names contain `part`. */
static int
rank_among(const HnGguf *src, const char *part, int64_t index)
{
  int n = 0;
  for (int64_t i = 0; i < index; i++)
    if (strstr(hn_gguf_tensor(src, i)->name, part) != NULL)
      n++;
  return n;
}

static uint32_t
gqa_ratio(const HnGguf *src)
{
  HnStr arch;
  if (!hn_gguf_get_str(src, "general.architecture", &arch, NULL) || arch.len > 64)
    return 1;
  char key[128];
  uint32_t n_head = 0, n_head_kv = 0;
  snprintf(key, sizeof key, "%.*s.attention.head_count", (int)arch.len, arch.data);
  if (!hn_gguf_get_u32(src, key, &n_head, NULL) || n_head == 0)
    return 1;
  snprintf(key, sizeof key, "%.*s.attention.head_count_kv", (int)arch.len, arch.data);
  if (!hn_gguf_get_u32(src, key, &n_head_kv, NULL) || n_head_kv == 0)
    return 1;
  return n_head / n_head_kv;
}

HnType
hn_quantize_tensor_type(const HnGguf *src, const HnQuantizeTarget *target, int64_t index)
{
  const HnGgufTensor *t = hn_gguf_tensor(src, index);
  if (!is_quantizable(t))
    return (HnType)t->type;
  HnType type = target->base;
  if (is_float_type(type))
    return type;

  const char *name = t->name;
  const uint32_t ft = target->file_type;
  const bool has_output = hn_gguf_find_tensor(src, "output.weight") != NULL;
  const bool is_output = strcmp(name, "output.weight") == 0 ||
                         (!has_output && strcmp(name, "token_embd.weight") == 0);

  if (is_output) {
    /* The output matrix decides every token: the reference keeps it at 6+ bits. */
    if (t->ne[0] % HN_QK_K != 0)
      type = HN_TYPE_Q8_0;
    else if (type != HN_TYPE_Q8_0)
      type = HN_TYPE_Q6_K;
  } else if (strstr(name, "attn_v.weight") != NULL) {
    int i = layer_of(name);
    if (i < 0)
      i = rank_among(src, "attn_v.weight", index);
    const int n = count_tensors_containing(src, "attn_v.weight");
    if (ft == FT_Q2_K)
      type = gqa_ratio(src) >= 4 ? HN_TYPE_Q4_K : HN_TYPE_Q3_K;
    else if (ft == FT_Q3_K_M)
      type = i < 2 ? HN_TYPE_Q5_K : HN_TYPE_Q4_K;
    else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(i, n))
      type = HN_TYPE_Q6_K;
  } else if (strstr(name, "ffn_down") != NULL) {
    int i = layer_of(name);
    if (i < 0)
      i = rank_among(src, "ffn_down", index);
    const int n = count_tensors_containing(src, "ffn_down");
    if (ft == FT_Q2_K)
      type = HN_TYPE_Q3_K;
    else if (ft == FT_Q3_K_M)
      type = i < n / 16 ? HN_TYPE_Q5_K : HN_TYPE_Q4_K;
    else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(i, n))
      type = HN_TYPE_Q6_K;
  } else if (strstr(name, "attn_output.weight") != NULL) {
    if (ft == FT_Q2_K)
      type = HN_TYPE_Q3_K;
    else if (ft == FT_Q3_K_M)
      type = HN_TYPE_Q4_K;
  }

  /* Rows that do not fill 256-element super-blocks: a 32-element type of similar size. */
  if (is_k_quant(type) && t->ne[0] % HN_QK_K != 0) {
    switch (type) {
    case HN_TYPE_Q2_K:
    case HN_TYPE_Q3_K: type = HN_TYPE_Q4_0; break;
    case HN_TYPE_Q4_K: type = HN_TYPE_Q5_0; break;
    case HN_TYPE_Q5_K: type = HN_TYPE_Q5_1; break;
    default: type = HN_TYPE_Q8_0; break;
    }
  }
  if (t->ne[0] % hn_type_block_elems(type) != 0)
    type = HN_TYPE_F16;
  return type;
}

/* ---------------------------------------------------------------------------------- */

typedef struct {
  const HnGgufTensor *src;
  HnType out_type;
  int64_t row_len;
  size_t in_row_bytes, out_row_bytes;
  int64_t row_begin, row_end; /* rows of this job */
  uint8_t *out;               /* out_row_bytes per row, starting at row_begin */
  float *scratch;             /* row_len floats, this job's own */
  bool bad_value;
} Job;

static void *
run_job(void *arg)
{
  Job *job = arg;
  for (int64_t r = job->row_begin; r < job->row_end; r++) {
    const uint8_t *in = (const uint8_t *)job->src->data + (size_t)r * job->in_row_bytes;
    const float *row;
    if (job->src->type == HN_TYPE_F32) {
      row = (const float *)in;
    } else {
      hn_dequantize_row((HnType)job->src->type, in, job->scratch, job->row_len);
      row = job->scratch;
    }
    for (int64_t i = 0; i < job->row_len; i++) {
      if (!isfinite(row[i])) {
        job->bad_value = true;
        return NULL;
      }
    }
    hn_quantize_row(job->out_type, row, job->out + (size_t)(r - job->row_begin) * job->out_row_bytes,
                    job->row_len);
  }
  return NULL;
}

/* Output order of the reference tool: tensors outside the layers first, then layer by
 * layer; by name within each group. */
typedef struct {
  int layer;
  const char *name;
  int64_t index;
} OrderKey;

static int
compare_tensor_order(const void *a, const void *b)
{
  const OrderKey *ka = a, *kb = b;
  if (ka->layer != kb->layer)
    return ka->layer < kb->layer ? -1 : 1;
  return strcmp(ka->name, kb->name);
}

#define MAX_THREADS 64
#define CHUNK_BYTES (4u << 20) /* output bytes per round of work */

static bool
convert_tensor(HnGgufWriter *w, const HnGgufTensor *t, HnType out_type, int n_threads, uint8_t *chunk,
               float *scratch, HnError *err)
{
  if ((HnType)t->type == out_type)
    return hn_gguf_writer_write(w, t->data, t->nbytes, err);

  const int64_t row_len = t->ne[0];
  const size_t in_row_bytes = hn_type_row_bytes(t->type, row_len);
  const size_t out_row_bytes = hn_type_row_bytes(out_type, row_len);
  if (in_row_bytes == 0 || out_row_bytes == 0)
    return hn_error_set(err, HN_ERR_UNSUPPORTED, "tensor '%s' cannot be converted from %s to %s", t->name,
                        hn_type_name(t->type), hn_type_name(out_type));
  const int64_t n_rows = (int64_t)(t->nbytes / in_row_bytes);
  int64_t rows_per_chunk = (int64_t)(CHUNK_BYTES / out_row_bytes);
  if (rows_per_chunk < 1)
    rows_per_chunk = 1;

  for (int64_t first = 0; first < n_rows; first += rows_per_chunk) {
    const int64_t rows = HN_MIN(rows_per_chunk, n_rows - first);
    Job jobs[MAX_THREADS];
    pthread_t threads[MAX_THREADS];
    bool started[MAX_THREADS] = { false };
    const int n_jobs = (int)HN_MIN((int64_t)n_threads, rows);
    for (int j = 0; j < n_jobs; j++) {
      const int64_t begin = first + rows * j / n_jobs, end = first + rows * (j + 1) / n_jobs;
      jobs[j] = (Job){
        .src = t, .out_type = out_type, .row_len = row_len, .in_row_bytes = in_row_bytes,
        .out_row_bytes = out_row_bytes, .row_begin = begin, .row_end = end,
        .out = chunk + (size_t)(begin - first) * out_row_bytes, .scratch = scratch + (size_t)j * row_len,
      };
    }
    for (int j = 1; j < n_jobs; j++)
      started[j] = pthread_create(&threads[j], NULL, run_job, &jobs[j]) == 0;
    run_job(&jobs[0]);
    for (int j = 1; j < n_jobs; j++) {
      if (started[j])
        pthread_join(threads[j], NULL);
      else
        run_job(&jobs[j]); /* could not start a thread: do its share here */
    }
    for (int j = 0; j < n_jobs; j++)
      if (jobs[j].bad_value)
        return hn_error_set(err, HN_ERR_FORMAT, "tensor '%s' contains NaN or infinite values", t->name);
    if (!hn_gguf_writer_write(w, chunk, (size_t)rows * out_row_bytes, err))
      return false;
  }
  return true;
}

bool
hn_quantize_model(const char *in_path, const char *out_path, const HnQuantizeTarget *target,
                  int n_threads, HnQuantizeProgress progress, void *user, HnError *err)
{
  if (target == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "no quantization type given");
  if (n_threads < 1)
    n_threads = 1;
  if (n_threads > MAX_THREADS)
    n_threads = MAX_THREADS;

  HnGguf *src = hn_gguf_open(in_path, err);
  if (src == NULL)
    return false;
  HnGgufWriter *w = NULL;
  uint8_t *chunk = NULL;
  float *scratch = NULL;
  int64_t *order = NULL;
  bool ok = false;

  const int64_t n_tensors = hn_gguf_n_tensors(src);
  int64_t max_row = 1;
  size_t max_out_row = 1;
  HnType *types = calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *types);
  if (types == NULL) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (int64_t i = 0; i < n_tensors; i++) {
    const HnGgufTensor *t = hn_gguf_tensor(src, i);
    types[i] = hn_quantize_tensor_type(src, target, i);
    if (types[i] != (HnType)t->type && !hn_type_is_weight_type(t->type)) {
      hn_error_set(err, HN_ERR_UNSUPPORTED, "tensor '%s' has type %s, which cannot be converted", t->name,
                   hn_type_name(t->type));
      goto out;
    }
    max_row = HN_MAX(max_row, t->ne[0]);
    max_out_row = HN_MAX(max_out_row, hn_type_row_bytes(types[i], t->ne[0]));
  }

  w = hn_gguf_writer_new(err);
  if (w == NULL || !hn_gguf_writer_copy_kvs(w, src, err) ||
      !hn_gguf_writer_set_alignment(w, hn_gguf_alignment(src), err))
    goto out;
  /* Appended last, where the reference tool puts them, so that our output is the same
   * file byte for byte. */
  hn_gguf_writer_remove_kv(w, "general.quantization_version");
  hn_gguf_writer_remove_kv(w, "general.file_type");
  if (!hn_gguf_writer_set_u32(w, "general.quantization_version", 2, err) ||
      !hn_gguf_writer_set_u32(w, "general.file_type", target->file_type, err))
    goto out;
  order = malloc((size_t)(n_tensors ? n_tensors : 1) * sizeof *order);
  OrderKey *keys = malloc((size_t)(n_tensors ? n_tensors : 1) * sizeof *keys);
  if (order == NULL || keys == NULL) {
    free(keys);
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (int64_t i = 0; i < n_tensors; i++) {
    const char *name = hn_gguf_tensor(src, i)->name;
    keys[i] = (OrderKey){ layer_of(name), name, i };
  }
  qsort(keys, (size_t)n_tensors, sizeof *keys, compare_tensor_order);
  for (int64_t k = 0; k < n_tensors; k++)
    order[k] = keys[k].index;
  free(keys);
  for (int64_t k = 0; k < n_tensors; k++) {
    const HnGgufTensor *t = hn_gguf_tensor(src, order[k]);
    if (!hn_gguf_writer_add_tensor(w, t->name, types[order[k]], t->n_dims, t->ne, err))
      goto out;
  }

  size_t chunk_bytes = HN_MAX((size_t)CHUNK_BYTES, max_out_row);
  chunk = malloc(chunk_bytes);
  scratch = malloc((size_t)n_threads * (size_t)max_row * sizeof *scratch);
  if (chunk == NULL || scratch == NULL) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto out;
  }
  if (!hn_gguf_writer_begin(w, out_path, err))
    goto out;
  for (int64_t k = 0; k < n_tensors; k++) {
    const HnGgufTensor *t = hn_gguf_tensor(src, order[k]);
    if (!convert_tensor(w, t, types[order[k]], n_threads, chunk, scratch, err))
      goto out;
    if (progress != NULL && !progress(user, k + 1, n_tensors, t->name, types[order[k]])) {
      hn_error_set(err, HN_ERR_CANCELLED, "quantization cancelled");
      goto out;
    }
  }
  ok = hn_gguf_writer_finish(w, err);

out:
  free(order);
  free(types);
  free(chunk);
  free(scratch);
  hn_gguf_writer_free(w);
  hn_gguf_close(src);
  return ok;
}
