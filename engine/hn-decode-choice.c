/* hn-decode-choice.c — measured choice of the decode kernel per weight type.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-decode-choice.h"

#include "hn-kernels.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

#define CACHE_HEADER "hanashi decode kernels"

/* Per level, per type: an HnDecodeKernel. */
static atomic_int chosen[HN_SIMD_AVX512 + 1][HN_TYPE_COUNT];

static int
compare_doubles(const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

int
hn_decode_pick_fastest(const double *times, int n_candidates, int n_samples)
{
  if (n_candidates <= 0 || n_samples <= 0 || n_samples > HN_DECODE_MAX_SAMPLES)
    return -1;
  int best = -1;
  double best_median = 0;
  for (int c = 0; c < n_candidates; c++) {
    /* each timing against the fastest of its own round */
    double ratios[HN_DECODE_MAX_SAMPLES];
    for (int s = 0; s < n_samples; s++) {
      double fastest = times[s];
      for (int o = 1; o < n_candidates; o++)
        fastest = times[(size_t) o * (size_t) n_samples + (size_t) s] < fastest
                    ? times[(size_t) o * (size_t) n_samples + (size_t) s] : fastest;
      ratios[s] = times[(size_t) c * (size_t) n_samples + (size_t) s] / fastest;
    }
    qsort(ratios, (size_t) n_samples, sizeof *ratios, compare_doubles);
    double median = n_samples % 2 ? ratios[n_samples / 2]
                                  : 0.5 * (ratios[n_samples / 2 - 1] + ratios[n_samples / 2]);
    if (best < 0 || median < best_median) {
      best = c;
      best_median = median;
    }
  }
  return best;
}

static const char *
kernel_word(HnDecodeKernel k)
{
  return k == HN_DECODE_TILE ? "tile" : k == HN_DECODE_DOT ? "dot" : NULL;
}

/* Text appended to a buffer like snprintf: `used` keeps counting past the end, so the
 * length a short buffer would have needed is known. */
typedef struct {
  char *buf;
  size_t size, used;
  bool failed;
} Appender;

static void
append_line(Appender *a, const char *first, const char *second)
{
  int w = snprintf(a->used < a->size ? a->buf + a->used : NULL, a->used < a->size ? a->size - a->used : 0,
                   "%s%s%s\n", first, second ? " " : "", second ? second : "");
  if (w < 0)
    a->failed = true;
  else
    a->used += (size_t) w;
}

/* The next line of *text (without its newline) into line[size]; false at the end. */
static bool
next_line(const char **text, char *line, size_t size)
{
  if (**text == '\0')
    return false;
  const char *end = strchr(*text, '\n');
  size_t len = end ? (size_t) (end - *text) : strlen(*text);
  size_t copy = len < size - 1 ? len : size - 1;
  memcpy(line, *text, copy);
  line[copy] = '\0';
  *text += len + (end ? 1 : 0);
  return true;
}

/* Reads a whole cache text: the header, the processor, then one section per kernel set
 * ("level NAME" and a line per type).  Fills choice[] from the section of `kernel_set` (the
 * last one, were there two) and sets *found; copies every line of the other sections to
 * `others` when given.  False, with nothing filled, for another version or processor or
 * any line it cannot read: a damaged file is measured over as a whole. */
static bool
scan_cache(const char *text, const char *cpu_model, const char *kernel_set, HnDecodeKernel choice[HN_TYPE_COUNT],
           bool *found, Appender *others)
{
  char line[256], expect[256];
  *found = false;
  snprintf(expect, sizeof expect, "%s %d", CACHE_HEADER, HN_DECODE_CHOICE_VERSION);
  if (!next_line(&text, line, sizeof line) || strcmp(line, expect) != 0)
    return false;
  snprintf(expect, sizeof expect, "cpu %s", cpu_model);
  if (!next_line(&text, line, sizeof line) || strcmp(line, expect) != 0)
    return false;
  HnDecodeKernel parsed[HN_TYPE_COUNT] = { 0 };
  bool in_section = false, in_wanted = false;
  while (next_line(&text, line, sizeof line)) {
    if (strncmp(line, "level ", 6) == 0) {
      in_section = true;
      in_wanted = strcmp(line + 6, kernel_set) == 0;
      if (in_wanted) {
        memset(parsed, 0, sizeof parsed);
        *found = true;
      }
    } else {
      char *space = strchr(line, ' ');
      if (!in_section || !space)
        return false;
      *space = '\0';
      HnDecodeKernel k = strcmp(space + 1, "tile") == 0 ? HN_DECODE_TILE
                         : strcmp(space + 1, "dot") == 0 ? HN_DECODE_DOT
                                                          : HN_DECODE_UNMEASURED;
      int type = -1;
      for (int t = 0; t < HN_TYPE_COUNT; t++)
        if (hn_type_name((HnType) t) && strcmp(hn_type_name((HnType) t), line) == 0)
          type = t;
      if (type < 0 || k == HN_DECODE_UNMEASURED)
        return false;
      if (in_wanted)
        parsed[type] = k;
      *space = ' ';
    }
    if (others && !in_wanted)
      append_line(others, line, NULL);
  }
  if (*found)
    memcpy(choice, parsed, sizeof parsed);
  return true;
}

size_t
hn_decode_choice_format(char *buf, size_t size, const char *previous, const char *cpu_model,
                        const char *kernel_set, const HnDecodeKernel choice[HN_TYPE_COUNT])
{
  Appender a = { buf, size, 0, false };
  char header[64];
  snprintf(header, sizeof header, "%s %d", CACHE_HEADER, HN_DECODE_CHOICE_VERSION);
  append_line(&a, header, NULL);
  append_line(&a, "cpu", cpu_model);
  HnDecodeKernel ignored[HN_TYPE_COUNT];
  bool found;
  /* checked whole before anything of it is copied */
  if (previous && scan_cache(previous, cpu_model, kernel_set, ignored, &found, NULL))
    scan_cache(previous, cpu_model, kernel_set, ignored, &found, &a);
  append_line(&a, "level", kernel_set);
  for (int t = 0; t < HN_TYPE_COUNT; t++) {
    const char *word = kernel_word(choice[t]);
    const char *name = hn_type_name((HnType) t);
    if (word && name)
      append_line(&a, name, word);
  }
  return a.failed ? 0 : a.used;
}

bool
hn_decode_choice_parse(const char *text, const char *cpu_model, const char *kernel_set,
                       HnDecodeKernel choice[HN_TYPE_COUNT])
{
  bool found;
  return scan_cache(text, cpu_model, kernel_set, choice, &found, NULL) && found;
}

/* The type whose tile runs for a matrix of `type`: a type with a regrouped layout is
 * regrouped at load where the table has that layout's tile (hn-model-regroup.c). */
static HnType
tile_type(const HnSimdKernels *k, HnType type)
{
  const HnType grouped = hn_type_regrouped(type);
  return grouped != HN_TYPE_COUNT && k->gemm_tile[grouped] ? grouped : type;
}

static bool
has_both(const HnSimdKernels *k, HnType type)
{
  return k && type >= 0 && type < HN_TYPE_COUNT && k->gemm_tile[tile_type(k, type)] && k->vec_dot[type];
}

HnDecodeKernel
hn_decode_kernel(const HnSimdKernels *k, HnType type)
{
  if (!has_both(k, type))
    return k && type >= 0 && type < HN_TYPE_COUNT && k->gemm_tile[type] ? HN_DECODE_TILE : HN_DECODE_DOT;
  const char *force = getenv("HANASHI_DECODE");
  if (force && strcmp(force, "tile") == 0)
    return HN_DECODE_TILE;
  if (force && strcmp(force, "dot") == 0)
    return HN_DECODE_DOT;
  int c = atomic_load_explicit(&chosen[k->level][type], memory_order_relaxed);
  return c == HN_DECODE_DOT ? HN_DECODE_DOT : HN_DECODE_TILE;
}

/* ---- the cache file ---- */

static bool
cache_path(char *path, size_t size, bool make_dir)
{
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char dir[1024];
  if (xdg && xdg[0] == '/')
    snprintf(dir, sizeof dir, "%s", xdg);
  else if (home && home[0] == '/')
    snprintf(dir, sizeof dir, "%s/.cache", home);
  else
    return false;
  if (make_dir && mkdir(dir, 0700) != 0 && errno != EEXIST)
    return false;
  size_t len = strlen(dir);
  if (len + sizeof "/hanashi/decode-kernels" > size || len + sizeof "/hanashi" > sizeof dir)
    return false;
  strcat(dir, "/hanashi");
  if (make_dir && mkdir(dir, 0700) != 0 && errno != EEXIST)
    return false;
  snprintf(path, size, "%s/decode-kernels", dir);
  return true;
}

#define CACHE_TEXT_MAX 4096

/* The cache file's text; false when there is none or it is longer than any this code
 * writes (a few sections of a few lines). */
static bool
read_cache_text(char text[CACHE_TEXT_MAX])
{
  char path[1100];
  if (!cache_path(path, sizeof path, false))
    return false;
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  size_t len = fread(text, 1, CACHE_TEXT_MAX - 1, f);
  bool whole = len < CACHE_TEXT_MAX - 1 || fgetc(f) == EOF;
  fclose(f);
  text[len] = '\0';
  return whole;
}

static bool
read_cache(const char *cpu, const char *kernel_set, HnDecodeKernel choice[HN_TYPE_COUNT])
{
  char text[CACHE_TEXT_MAX];
  return read_cache_text(text) && hn_decode_choice_parse(text, cpu, kernel_set, choice);
}

/* Replaces this kernel set's section and keeps the others.  Best effort: a read-only or
 * missing cache directory only means measuring next time. */
static void
write_cache(const char *cpu, const char *kernel_set, const HnDecodeKernel choice[HN_TYPE_COUNT])
{
  char path[1100], tmp[1200], previous[CACHE_TEXT_MAX], text[CACHE_TEXT_MAX];
  if (!cache_path(path, sizeof path, true))
    return;
  bool had = read_cache_text(previous);
  size_t len = hn_decode_choice_format(text, sizeof text, had ? previous : NULL, cpu, kernel_set, choice);
  if (len >= sizeof text) /* the other sections do not fit: keep this one alone */
    len = hn_decode_choice_format(text, sizeof text, NULL, cpu, kernel_set, choice);
  if (len == 0 || len >= sizeof text)
    return;
  snprintf(tmp, sizeof tmp, "%s.%ld", path, (long) getpid());
  FILE *f = fopen(tmp, "w");
  if (!f)
    return;
  bool ok = fwrite(text, 1, len, f) == len;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0)
    remove(tmp);
}

/* ---- measuring ---- */

static double
now_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

#define CAL_N 4096                     /* elements per row */
#define CAL_BYTES ((size_t) 48 << 20)  /* about a matrix of a 7B model */
#define CAL_SAMPLES 9

/* Decode streams its weights from memory, so each timed pass starts with the matrix in
 * no cache.  A matrix larger than the last-level cache is not enough: an AMD EPYC
 * (Zen 5) virtual machine reports 508 MiB of it, and there the 48 MiB matrix could stay
 * cached between the passes. */
static void
evict_from_caches(const void *p, size_t bytes)
{
#if defined(__x86_64__) || defined(__i386__)
  for (size_t off = 0; off < bytes; off += 64)
    _mm_clflush((const char *) p + off);
  _mm_mfence();
#else
  (void) p; /* the levels with two decode kernels to measure are x86's */
  (void) bytes;
#endif
}

/* Times the two candidates for `type` on one matrix of CAL_BYTES, interleaved; returns
 * the faster, or HN_DECODE_UNMEASURED when memory ran out. */
static HnDecodeKernel
measure(HnThreadPool *pool, HnType type)
{
  size_t row_bytes = hn_type_row_bytes(type, CAL_N);
  int64_t rows = (int64_t) (CAL_BYTES / row_bytes) / 16 * 16;
  int nth = hn_threadpool_n_threads(pool);
  const size_t matrix_bytes = row_bytes * (size_t) rows;
  /* in huge pages, as the model's matrices are (hn-model-regroup.c): with the matrices
   * of a 1B model in Q8_0 on an AMD EPYC (Zen 5) the dot product decoded 27% faster from
   * huge pages than from the file's small pages, so the kind of page is part of what is
   * measured */
  uint8_t *w = hn_huge_alloc(matrix_bytes);
  float *x = malloc(sizeof(float) * CAL_N * 16);
  float *y = malloc(sizeof(float) * (size_t) rows);
  void *scratch = malloc(hn_matmul_scratch_bytes(CAL_N, 1, nth));
  uint8_t *grouped = NULL;
  HnDecodeKernel result = HN_DECODE_UNMEASURED;
  if (!w || !x || !y || !scratch)
    goto out;
  /* 16 distinct quantized rows (ordinary values: no subnormals or NaNs to slow the
   * float work), repeated over the matrix */
  uint32_t seed = 12345;
  for (int i = 0; i < CAL_N * 16; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float) ((int) (seed >> 9) % 2001 - 1000) / 1000.0f;
  }
  for (int r = 0; r < 16; r++)
    hn_quantize_row(type, x + (size_t) r * CAL_N, w + (size_t) r * row_bytes, CAL_N);
  for (int64_t r = 16; r < rows; r++)
    memcpy(w + (size_t) r * row_bytes, w + (size_t) (r % 16) * row_bytes, row_bytes);
  HnGgufTensor t = { .name = "calibration", .type = type, .n_dims = 2, .ne = { CAL_N, rows, 1, 1 },
                     .data = w, .nbytes = row_bytes * (size_t) rows };
  /* Where matrices of the type are regrouped at load (hn-model-regroup.c) the tile that
   * would run is the regrouped layout's, so that is the tile measured against the dot
   * product. */
  HnGgufTensor tile_t = t;
  const HnType layout = tile_type(hn_simd_kernels(), type);
  if (layout != type) {
    grouped = hn_huge_alloc(matrix_bytes);
    if (!grouped)
      goto out;
    for (int64_t r = 0; r < rows; r++)
      hn_type_regroup_row(layout, w + (size_t) r * row_bytes, grouped + (size_t) r * row_bytes, CAL_N);
    tile_t.type = layout;
    tile_t.data = grouped;
  }
  const HnDecodeKernel candidates[2] = { HN_DECODE_TILE, HN_DECODE_DOT };
  const HnGgufTensor *tensors[2] = { &tile_t, &t };
  double times[2 * CAL_SAMPLES];
  for (int c = 0; c < 2; c++) /* warm-up: page in the matrix, wake the workers */
    hn_matmul_with(pool, tensors[c], x, 1, scratch, y, rows, candidates[c]);
  for (int s = 0; s < CAL_SAMPLES; s++)
    for (int c = 0; c < 2; c++) {
      evict_from_caches(tensors[c]->data, tensors[c]->nbytes);
      double t0 = now_seconds();
      hn_matmul_with(pool, tensors[c], x, 1, scratch, y, rows, candidates[c]);
      times[c * CAL_SAMPLES + s] = now_seconds() - t0;
    }
  result = candidates[hn_decode_pick_fastest(times, 2, CAL_SAMPLES)];
out:
  hn_huge_free(w, matrix_bytes);
  hn_huge_free(grouped, matrix_bytes);
  free(x);
  free(y);
  free(scratch);
  return result;
}

void
hn_decode_load_cached(void)
{
  const HnSimdKernels *k = hn_simd_kernels();
  if (!k || k->level > HN_SIMD_AVX512) /* the levels with two decode kernels per type */
    return;
  HnDecodeKernel choice[HN_TYPE_COUNT] = { 0 };
  if (!read_cache(hn_cpu_model_name(), k->name, choice))
    return;
  for (int t = 0; t < HN_TYPE_COUNT; t++) {
    int unmeasured = HN_DECODE_UNMEASURED;
    if (choice[t] != HN_DECODE_UNMEASURED)
      atomic_compare_exchange_strong(&chosen[k->level][t], &unmeasured, (int) choice[t]);
  }
}

void
hn_decode_calibrate(HnThreadPool *pool, const HnType *types, int n_types)
{
  const HnSimdKernels *k = hn_simd_kernels();
  if (!k || getenv("HANASHI_DECODE"))
    return;
  bool needed = false;
  for (int i = 0; i < n_types; i++)
    if (has_both(k, types[i]) && atomic_load(&chosen[k->level][types[i]]) == HN_DECODE_UNMEASURED)
      needed = true;
  if (!needed)
    return;
  HnThreadPool *own = NULL;
  if (!pool && !(pool = own = hn_threadpool_new(0, NULL)))
    return;
  const char *cpu = hn_cpu_model_name(), *kernel_set = k->name;
  HnDecodeKernel choice[HN_TYPE_COUNT] = { 0 };
  read_cache(cpu, kernel_set, choice);
  bool measured = false;
  for (int i = 0; i < n_types; i++) {
    HnType type = types[i];
    if (!has_both(k, type) || choice[type] != HN_DECODE_UNMEASURED)
      continue;
    choice[type] = measure(pool, type);
    measured = measured || choice[type] != HN_DECODE_UNMEASURED;
  }
  for (int t = 0; t < HN_TYPE_COUNT; t++)
    if (choice[t] != HN_DECODE_UNMEASURED)
      atomic_store(&chosen[k->level][t], (int) choice[t]);
  if (measured)
    write_cache(cpu, kernel_set, choice);
  hn_threadpool_free(own);
}
