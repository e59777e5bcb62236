/* hn-sampler.c — the sampler chain, penalties, mirostat, RNG and stop strings.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-sampler.h"
#include "hn-grammar.h"
#include "hn-array.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- Random numbers: xoshiro256** seeded through splitmix64 ------------------------ */

static uint64_t
splitmix64(uint64_t *x)
{
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void
hn_rng_seed(HnRng *rng, uint64_t seed)
{
  uint64_t x = seed;
  for (int i = 0; i < 4; i++)
    rng->s[i] = splitmix64(&x);
}

static inline uint64_t
rotl64(uint64_t x, int k)
{
  return (x << k) | (x >> (64 - k));
}

uint64_t
hn_rng_next(HnRng *rng)
{
  uint64_t *s = rng->s;
  uint64_t result = rotl64(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl64(s[3], 45);
  return result;
}

double
hn_rng_uniform(HnRng *rng)
{
  return (double) (hn_rng_next(rng) >> 11) * 0x1.0p-53;
}

/* The parameters (init, validate, clamp, set, get) are in hn-params.c, from its table. */

/* ---- Candidate ordering --------------------------------------------------------
 * A total order (logit descending, then id ascending) keeps every stage deterministic
 * whatever the initial order was. */

static inline bool
cand_before(const HnCandidate *a, const HnCandidate *b)
{
  return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static inline void
cand_swap(HnCandidate *a, HnCandidate *b)
{
  HnCandidate t = *a;
  *a = *b;
  *b = t;
}

/* In-place introsort-free quicksort (median of three, insertion sort below 16, loop on
 * the larger side): glibc's qsort may allocate for large arrays, and the sampler must not
 * allocate per token. */
#define DEFINE_SORT(NAME, TYPE, BEFORE)                                                     \
  static void NAME(TYPE *a, size_t n)                                                       \
  {                                                                                         \
    while (n > 16) {                                                                        \
      size_t mid = n / 2, last = n - 1;                                                     \
      TYPE t;                                                                               \
      if (BEFORE(&a[mid], &a[0])) { t = a[mid]; a[mid] = a[0]; a[0] = t; }                 \
      if (BEFORE(&a[last], &a[0])) { t = a[last]; a[last] = a[0]; a[0] = t; }              \
      if (BEFORE(&a[last], &a[mid])) { t = a[last]; a[last] = a[mid]; a[mid] = t; }        \
      TYPE pivot = a[mid];                                                                  \
      size_t i = 0, j = last;                                                               \
      for (;;) {                                                                            \
        while (BEFORE(&a[i], &pivot))                                                       \
          i++;                                                                              \
        while (BEFORE(&pivot, &a[j]))                                                       \
          j--;                                                                              \
        if (i >= j)                                                                         \
          break;                                                                            \
        t = a[i]; a[i] = a[j]; a[j] = t;                                                    \
        i++;                                                                                \
        j--;                                                                                \
      }                                                                                     \
      /* [0..j] before-or-equal pivot, [j+1..n) after-or-equal */                          \
      size_t left = j + 1, right = n - left;                                                \
      if (left < right) {                                                                   \
        NAME(a, left);                                                                      \
        a += left;                                                                          \
        n = right;                                                                          \
      } else {                                                                              \
        NAME(a + left, right);                                                              \
        n = left;                                                                           \
      }                                                                                     \
    }                                                                                       \
    for (size_t i = 1; i < n; i++) {                                                        \
      TYPE x = a[i];                                                                        \
      size_t j = i;                                                                         \
      while (j > 0 && BEFORE(&x, &a[j - 1])) {                                              \
        a[j] = a[j - 1];                                                                    \
        j--;                                                                                \
      }                                                                                     \
      a[j] = x;                                                                             \
    }                                                                                       \
  }

DEFINE_SORT(sort_cands, HnCandidate, cand_before)

/* Partial selection: afterwards the k best candidates are in cands[0..k) (unordered),
 * everything after them is worse.  Iterative quickselect, median-of-three pivot. */
static void
select_top(HnCandidate *c, size_t n, size_t k)
{
  if (k == 0 || k >= n)
    return;
  size_t lo = 0, hi = n - 1;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cand_before(&c[mid], &c[lo]))
      cand_swap(&c[mid], &c[lo]);
    if (cand_before(&c[hi], &c[lo]))
      cand_swap(&c[hi], &c[lo]);
    if (cand_before(&c[hi], &c[mid]))
      cand_swap(&c[hi], &c[mid]);
    /* c[lo] best, c[mid] median, c[hi] worst of the three; the median is the pivot */
    HnCandidate pivot = c[mid];
    size_t i = lo, j = hi;
    while (i <= j) {
      while (cand_before(&c[i], &pivot))
        i++;
      while (cand_before(&pivot, &c[j]))
        j--;
      if (i <= j) {
        cand_swap(&c[i], &c[j]);
        i++;
        if (j == 0)
          break;
        j--;
      }
    }
    /* now [lo..j] <= pivot-ish (better or equal), [i..hi] worse or equal */
    if (k - 1 <= j)
      hi = j;
    else if (k - 1 >= i)
      lo = i;
    else
      break;
  }
}

/* Makes cands[0..want) the `want` best, sorted; cheap when want << n. */
static void
sort_prefix(HnCandidate *c, size_t n, size_t want)
{
  if (want > n)
    want = n;
  select_top(c, n, want);
  sort_cands(c, want);
}

void
hn_sampler_softmax(HnCandidate *c, size_t n)
{
  if (n == 0)
    return;
  float max = -INFINITY;
  for (size_t i = 0; i < n; i++)
    if (c[i].logit > max)
      max = c[i].logit;
  if (isinf(max) && max < 0) {
    /* every candidate is banned: uniform, so callers still get a distribution */
    for (size_t i = 0; i < n; i++)
      c[i].p = 1.0f / (float) n;
    return;
  }
  if (isinf(max)) {
    /* +inf logits take all the mass, shared equally */
    size_t n_inf = 0;
    for (size_t i = 0; i < n; i++)
      n_inf += isinf(c[i].logit) && c[i].logit > 0;
    for (size_t i = 0; i < n; i++)
      c[i].p = isinf(c[i].logit) && c[i].logit > 0 ? 1.0f / (float) n_inf : 0.0f;
    return;
  }
  double sum = 0.0;
  for (size_t i = 0; i < n; i++) {
    float e = expf(c[i].logit - max);
    c[i].p = e;
    sum += e;
  }
  float inv = (float) (1.0 / sum);
  for (size_t i = 0; i < n; i++)
    c[i].p *= inv;
}

/* After a truncation the survivors' p only need rescaling, not new exponentials. */
static void
renormalize(HnCandidate *c, size_t n)
{
  double sum = 0.0;
  for (size_t i = 0; i < n; i++)
    sum += c[i].p;
  if (!(sum > 0.0)) {
    hn_sampler_softmax(c, n);
    return;
  }
  float inv = (float) (1.0 / sum);
  for (size_t i = 0; i < n; i++)
    c[i].p *= inv;
}

void
hn_sampler_apply_top_k(HnCandidate *c, size_t *n, int32_t k)
{
  if (k > 0 && (size_t) k < *n) {
    sort_prefix(c, *n, (size_t) k);
    *n = (size_t) k;
  }
  hn_sampler_softmax(c, *n);
}

/* The part of the nucleus that lies in c[0..n) when `need` more mass is wanted: a
 * histogram of the logits (monotonic in p) finds the bucket where the mass crosses
 * `need`; everything above it is kept unsorted, only that bucket is sorted.  Returns how
 * many of the (reordered) candidates to keep. */
static size_t
nucleus_by_buckets(HnCandidate *c, size_t n, double need)
{
  enum { NB = 2048 };
  uint32_t count[NB];
  double mass[NB];
  float mx = -INFINITY, mn = INFINITY;
  for (size_t i = 0; i < n; i++) {
    if (c[i].logit > mx)
      mx = c[i].logit;
    if (c[i].logit < mn)
      mn = c[i].logit;
  }
  float scale = (float) NB / (mx - mn);
  if (!(mx > mn) || !isfinite(scale) || !isfinite(mx) || !isfinite(mn) || !(scale > 0.0f)) {
    sort_cands(c, n);
    double cum = 0.0;
    for (size_t i = 0; i < n; i++)
      if ((cum += c[i].p) >= need)
        return i + 1;
    return n;
  }
  memset(count, 0, sizeof count);
  memset(mass, 0, sizeof mass);
#define P_BUCKET(v) HN_MIN(NB - 1, (int) (((v) - mn) * scale))
  for (size_t i = 0; i < n; i++) {
    int b = P_BUCKET(c[i].logit);
    count[b]++;
    mass[b] += c[i].p;
  }
  int bt = NB - 1;
  double above = 0.0;
  while (bt > 0 && above + mass[bt] < need)
    above += mass[bt--];
  /* move the buckets above bt to the front, then bucket bt */
  size_t w = 0;
  for (size_t i = 0; i < n; i++)
    if (P_BUCKET(c[i].logit) > bt)
      cand_swap(&c[w++], &c[i]);
  size_t start = w;
  for (size_t i = w; i < n; i++)
    if (P_BUCKET(c[i].logit) == bt)
      cand_swap(&c[w++], &c[i]);
#undef P_BUCKET
  sort_cands(c + start, w - start);
  double cum = above;
  for (size_t i = start; i < w; i++)
    if ((cum += c[i].p) >= need)
      return i + 1;
  return w;
}

/* top-p on candidates whose p are already normalised */
static void
top_p_core(HnCandidate *c, size_t *n, float top_p)
{
  if (top_p >= 1.0f || *n <= 1)
    return;
  /* Sort only as much as the nucleus needs: the best 1024 first (one quickselect and a
   * short sort), growing geometrically on small sets; a larger nucleus is cut by a
   * histogram instead of a sort. */
  size_t sorted = 0, want = 1024;
  double cum = 0.0;
  size_t keep = *n;
  for (;;) {
    if (want > *n)
      want = *n;
    if (sorted == 0)
      sort_prefix(c, *n, want);
    else
      sort_prefix(c + sorted, *n - sorted, want - sorted);
    bool found = false;
    for (size_t i = sorted; i < want; i++) {
      cum += c[i].p;
      if (cum >= top_p) {
        keep = i + 1;
        found = true;
        break;
      }
    }
    sorted = want;
    if (found || want == *n)
      break;
    if (want >= 1024 && *n - sorted > 4096) {
      keep = sorted + nucleus_by_buckets(c + sorted, *n - sorted, (double) top_p - cum);
      break;
    }
    want *= 2;
  }
  *n = keep;
  renormalize(c, *n);
}

void
hn_sampler_apply_top_p(HnCandidate *c, size_t *n, float top_p)
{
  hn_sampler_softmax(c, *n);
  top_p_core(c, n, top_p);
}

static void
min_p_core(HnCandidate *c, size_t *n, float min_p)
{
  if (min_p <= 0.0f || *n <= 1)
    return;
  float max_p = 0.0f;
  for (size_t i = 0; i < *n; i++)
    if (c[i].p > max_p)
      max_p = c[i].p;
  float threshold = min_p * max_p;
  size_t w = 0;
  for (size_t i = 0; i < *n; i++)
    if (c[i].p >= threshold)
      c[w++] = c[i];
  *n = w;
  renormalize(c, *n);
}

void
hn_sampler_apply_min_p(HnCandidate *c, size_t *n, float min_p)
{
  hn_sampler_softmax(c, *n);
  min_p_core(c, n, min_p);
}

/* Typical sampling scores each token by how far its surprise is from the entropy. */
typedef struct {
  float score;
  uint32_t index;
} TypicalKey;

static inline bool
key_before(const TypicalKey *a, const TypicalKey *b)
{
  return a->score < b->score || (a->score == b->score && a->index < b->index);
}

DEFINE_SORT(sort_keys, TypicalKey, key_before)

/* The surprise of a candidate, −ln p, taken from the logits rather than from the float p
 * (which underflow to 0 far from the top, and would cost a logarithm each):
 * −ln p_i = (max − l_i) − ln p_max, with p_max the softmax's largest p.  One formula for
 * every path, so the large-set path below and the full sort agree on each score. */
typedef struct {
  float max_logit;
  double log_p_max; /* ln of the largest p */
  double entropy;
  bool finite;      /* false: +inf logits, where p is 0 or shared and −ln p is used as is */
} TypicalBasis;

static TypicalBasis
typical_basis(const HnCandidate *c, size_t n)
{
  TypicalBasis b = { .max_logit = -INFINITY };
  float p_max = 0.0f;
  for (size_t i = 0; i < n; i++) {
    if (c[i].logit > b.max_logit)
      b.max_logit = c[i].logit;
    if (c[i].p > p_max)
      p_max = c[i].p;
  }
  b.finite = isfinite(b.max_logit) && p_max > 0.0f;
  b.log_p_max = b.finite ? log((double) p_max) : 0.0;
  return b;
}

static inline double
typical_surprise(const TypicalBasis *b, const HnCandidate *x)
{
  if (b->finite)
    return (double) (b->max_logit - x->logit) - b->log_p_max;
  return x->p > 0.0f ? -log((double) x->p) : INFINITY;
}

static inline float
typical_score(const TypicalBasis *b, const HnCandidate *x)
{
  return (float) fabs(typical_surprise(b, x) - b->entropy);
}

/* Above this many candidates typical-p does not sort them all (see below). */
#define TYPICAL_SORT_MAX 4096

/* Keeps c[0..*n) sorted by score (ties by rank) up to the mass typical_p, as the full sort
 * would, without sorting them all: a histogram of the scores finds the bucket where the
 * kept mass crosses typical_p; the buckets below it are kept in any order, only the
 * crossing bucket is sorted (by rank, then by score) and cut.  Returns false, having
 * changed nothing, when the scores cannot be bucketed. */
static bool
typical_by_buckets(HnCandidate *c, size_t *n, float typical_p, const TypicalBasis *basis,
                   TypicalKey *keys, HnCandidate *scratch)
{
  enum { NB = 2048 };
  uint32_t count[NB];
  double mass[NB];
  size_t nn = *n;
  float lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < nn; i++) {
    float v = typical_score(basis, &c[i]);
    keys[i].score = v;
    if (v < lo)
      lo = v;
    if (v > hi)
      hi = v;
  }
  float scale = (float) NB / (hi - lo);
  if (!(hi > lo) || !isfinite(lo) || !isfinite(hi) || !isfinite(scale) || !(scale > 0.0f))
    return false;
  memset(count, 0, sizeof count);
  memset(mass, 0, sizeof mass);
#define S_BUCKET(v) HN_MIN(NB - 1, (int) (((v) - lo) * scale))
  for (size_t i = 0; i < nn; i++) {
    int b = S_BUCKET(keys[i].score);
    count[b]++;
    mass[b] += c[i].p;
  }
  int crossing_bucket = 0;
  double below = 0.0;
  while (crossing_bucket < NB - 1 && below + mass[crossing_bucket] < typical_p)
    below += mass[crossing_bucket++];
  /* the kept buckets to the front of scratch, the crossing one to its back */
  size_t crossing = count[crossing_bucket], start = nn - crossing;
  size_t w = 0, m = start;
  for (size_t i = 0; i < nn; i++) {
    int b = S_BUCKET(keys[i].score);
    if (b < crossing_bucket)
      scratch[w++] = c[i];
    else if (b == crossing_bucket)
      scratch[m++] = c[i];
  }
#undef S_BUCKET
  /* rank order first, so that equal scores resolve by rank as in the full sort */
  sort_cands(scratch + start, crossing);
  for (size_t j = 0; j < crossing; j++) {
    keys[j].score = typical_score(basis, &scratch[start + j]);
    keys[j].index = (uint32_t) (start + j);
  }
  sort_keys(keys, crossing);
  double cum = below;
  size_t keep = crossing;
  for (size_t j = 0; j < crossing; j++) {
    cum += scratch[keys[j].index].p;
    if (cum >= typical_p) {
      keep = j + 1;
      break;
    }
  }
  memcpy(c, scratch, w * sizeof *c);
  for (size_t j = 0; j < keep; j++)
    c[w + j] = scratch[keys[j].index];
  *n = w + keep;
  return true;
}

/* `keys` and `scratch` must hold n entries. */
static void
apply_typical_with(HnCandidate *c, size_t *n, float typical_p, TypicalKey *keys,
                   HnCandidate *scratch)
{
  /* p must be normalised on entry */
  if (typical_p >= 1.0f || *n <= 1)
    return;
  TypicalBasis basis = typical_basis(c, *n);
  for (size_t i = 0; i < *n; i++)
    if (c[i].p > 0.0f)
      basis.entropy += (double) c[i].p * typical_surprise(&basis, &c[i]);
  if (*n > TYPICAL_SORT_MAX && typical_by_buckets(c, n, typical_p, &basis, keys, scratch)) {
    renormalize(c, *n);
    return;
  }
  /* sort by logit first so that ties in score resolve by rank, deterministically */
  sort_cands(c, *n);
  for (size_t i = 0; i < *n; i++) {
    keys[i].score = typical_score(&basis, &c[i]);
    keys[i].index = (uint32_t) i;
  }
  sort_keys(keys, *n);
  double cum = 0.0;
  size_t keep = *n;
  for (size_t i = 0; i < *n; i++) {
    cum += c[keys[i].index].p;
    if (cum >= typical_p) {
      keep = i + 1;
      break;
    }
  }
  for (size_t i = 0; i < keep; i++)
    scratch[i] = c[keys[i].index];
  memcpy(c, scratch, keep * sizeof *c);
  *n = keep;
  renormalize(c, *n);
}

void
hn_sampler_apply_typical(HnCandidate *c, size_t *n, float typical_p)
{
  hn_sampler_softmax(c, *n);
  if (typical_p >= 1.0f || *n <= 1)
    return;
  TypicalKey *keys = malloc(*n * sizeof *keys);
  HnCandidate *scratch = malloc(*n * sizeof *scratch);
  if (keys && scratch)
    apply_typical_with(c, n, typical_p, keys, scratch);
  else
    hn_sampler_softmax(c, *n);
  free(keys);
  free(scratch);
}

void
hn_sampler_apply_temperature(HnCandidate *c, size_t n, float temperature)
{
  if (temperature > 0.0f && temperature != 1.0f) {
    float inv = 1.0f / temperature;
    for (size_t i = 0; i < n; i++)
      c[i].logit *= inv;
  }
  hn_sampler_softmax(c, n);
}

void
hn_sampler_apply_penalties(float *logits, int32_t n_vocab, const int32_t *history,
                           size_t n_history, float repeat_penalty, float frequency_penalty,
                           float presence_penalty, uint32_t *counts, const int32_t *keep_ids,
                           size_t n_keep)
{
  if (n_history == 0)
    return;
  if (repeat_penalty == 1.0f && frequency_penalty == 0.0f && presence_penalty == 0.0f)
    return;
  /* newline tokens exempt from penalties: remember their logits and put them back */
  float kept[8];
  size_t n_kept = n_keep < 8 ? n_keep : 8;
  for (size_t i = 0; i < n_kept; i++)
    kept[i] = logits[keep_ids[i]];
  for (size_t i = 0; i < n_history; i++) {
    int32_t t = history[i];
    if (t >= 0 && t < n_vocab)
      counts[t]++;
  }
  for (size_t i = 0; i < n_history; i++) {
    int32_t t = history[i];
    if (t < 0 || t >= n_vocab || counts[t] == 0)
      continue;
    float l = logits[t];
    if (repeat_penalty != 1.0f)
      l = l > 0.0f ? l / repeat_penalty : l * repeat_penalty;
    l -= (float) counts[t] * frequency_penalty + presence_penalty;
    logits[t] = l;
    counts[t] = 0; /* each distinct token once; also leaves counts zeroed */
  }
  for (size_t i = 0; i < n_kept; i++)
    logits[keep_ids[i]] = kept[i];
}

/* ---- The sampler --------------------------------------------------------------- */

struct HnSampler {
  HnSamplerParams params;
  HnLogitBias *bias;
  int32_t n_vocab;
  uint64_t seed;
  HnRng rng;
  /* penalty history: a ring of the last `history_cap` tokens */
  int32_t *history;
  size_t history_cap, history_len, history_head;
  int32_t *window;   /* the window, unrolled in order, for the penalty pass */
  uint32_t *counts;
  int32_t newline_ids[8];
  size_t n_newline;
  float *work_logits;
  HnCandidate *cands;
  HnCandidate *scratch;
  TypicalKey *keys;
  size_t n_last;
  const HnCandidate *last;
  float mu;
  HnSamplerGrammarStats grammar_stats;
  /* probability recording (off while probs_k == 0) */
  int32_t probs_k;
  uint8_t *probs_slot;   /* per token: 0, or 1 + its index in probs.candidates */
  HnTokenProbs probs;
  float probs_lse;       /* log-sum-exp of the raw row being recorded */
  bool probs_valid;
  bool recording;        /* inside a sample that records */
};

HnSampler *
hn_sampler_new(const HnSamplerParams *params, int32_t n_vocab, int32_t n_history, HnError *err)
{
  if (n_vocab <= 0 || n_vocab > (1 << 24))
    return hn_error_set(err, HN_ERR_INVALID_ARG, "vocabulary size %d out of range", n_vocab), NULL;
  if (!hn_sampler_params_validate(params, n_vocab, err))
    return NULL;
  HnSampler *s = calloc(1, sizeof *s);
  if (s == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  s->params = *params;
  s->params.stop = NULL;
  s->params.n_stop = 0;
  s->n_vocab = n_vocab;
  size_t cap = params->repeat_last_n < 0 ? (size_t) (n_history > 0 ? n_history : 4096)
                                          : (size_t) params->repeat_last_n;
  if (cap == 0)
    cap = 1;
  s->history_cap = cap;
  size_t nv = (size_t) n_vocab;
  s->history = calloc(cap, sizeof *s->history);
  s->window = calloc(cap, sizeof *s->window);
  s->counts = calloc(nv, sizeof *s->counts);
  s->work_logits = calloc(nv, sizeof *s->work_logits);
  s->cands = calloc(nv, sizeof *s->cands);
  s->scratch = calloc(nv, sizeof *s->scratch);
  s->keys = calloc(nv, sizeof *s->keys);
  if (params->n_logit_bias > 0) {
    s->bias = calloc(params->n_logit_bias, sizeof *s->bias);
    if (s->bias)
      memcpy(s->bias, params->logit_bias, params->n_logit_bias * sizeof *s->bias);
  }
  s->params.logit_bias = s->bias;
  if (!s->history || !s->window || !s->counts || !s->work_logits || !s->cands ||
      !s->scratch || !s->keys || (params->n_logit_bias > 0 && !s->bias)) {
    hn_sampler_free(s);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory for a %d-token sampler", n_vocab), NULL;
  }
  s->seed = params->seed;
  if (s->seed == HN_SAMPLER_SEED_RANDOM) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t) ts.tv_sec * 1000000007ULL ^ (uint64_t) ts.tv_nsec ^ (uintptr_t) s;
    s->seed = splitmix64(&x) & 0xffffffffULL; /* a seed short enough to write down */
  }
  hn_sampler_reset(s);
  return s;
}

void
hn_sampler_free(HnSampler *s)
{
  if (s == NULL)
    return;
  free(s->bias);
  free(s->history);
  free(s->window);
  free(s->counts);
  free(s->work_logits);
  free(s->cands);
  free(s->scratch);
  free(s->keys);
  free(s->probs_slot);
  free(s);
}

uint64_t
hn_sampler_get_seed(const HnSampler *s)
{
  return s->seed;
}

bool
hn_sampler_set_newline_tokens(HnSampler *s, const int32_t *ids, size_t n, HnError *err)
{
  if (n > HN_ARRAY_LEN(s->newline_ids))
    return hn_error_set(err, HN_ERR_INVALID_ARG, "at most %zu newline tokens",
                        HN_ARRAY_LEN(s->newline_ids));
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= s->n_vocab)
      return hn_error_set(err, HN_ERR_INVALID_ARG, "newline token %d out of range", ids[i]);
  if (n > 0)
    memcpy(s->newline_ids, ids, n * sizeof *ids);
  s->n_newline = n;
  return true;
}

void
hn_sampler_reset(HnSampler *s)
{
  s->history_len = 0;
  s->history_head = 0;
  s->mu = 2.0f * s->params.mirostat_tau;
  s->n_last = 0;
  s->last = NULL;
  s->probs_valid = false;
  hn_rng_seed(&s->rng, s->seed);
}

void
hn_sampler_accept(HnSampler *s, int32_t token)
{
  s->history[s->history_head] = token;
  s->history_head = (s->history_head + 1) % s->history_cap;
  if (s->history_len < s->history_cap)
    s->history_len++;
}

float
hn_sampler_mirostat_mu(const HnSampler *s)
{
  return s->mu;
}

const HnCandidate *
hn_sampler_last_candidates(const HnSampler *s, size_t *n_out)
{
  *n_out = s->n_last;
  return s->last;
}


/* ---- Probability recording ------------------------------------------------------ */

static const char *const stage_names[HN_STAGE_COUNT] = {
  [HN_STAGE_LOGIT_BIAS] = "logit_bias",
  [HN_STAGE_REPETITION] = "repetition",
  [HN_STAGE_GRAMMAR] = "grammar",
  [HN_STAGE_TOP_K] = "top_k",
  [HN_STAGE_TYPICAL] = "typical",
  [HN_STAGE_TOP_P] = "top_p",
  [HN_STAGE_MIN_P] = "min_p",
  [HN_STAGE_TEMPERATURE] = "temperature",
  [HN_STAGE_MIROSTAT] = "mirostat",
};

const char *
hn_sampler_stage_name(HnSamplerStage stage)
{
  return stage > HN_STAGE_NONE && stage < HN_STAGE_COUNT ? stage_names[stage] : NULL;
}

HnSamplerStage
hn_sampler_stage_from_name(const char *name)
{
  for (int i = HN_STAGE_NONE + 1; name && i < HN_STAGE_COUNT; i++)
    if (strcmp(stage_names[i], name) == 0)
      return (HnSamplerStage) i;
  return HN_STAGE_NONE;
}

/* The raw distribution's top K and log-sum-exp, in GCC/Clang vector types (SSE2 on baseline
 * x86-64, NEON on arm64; 16 bytes, so no wider ABI is involved): libm's expf stays scalar, and recording must cost a
 * small part of a decode step on a 150k vocabulary.  exp by 2^f on [-0.5, 0.5] with its
 * degree-6 Taylor polynomial: relative error below 3e-7, far below what a probability
 * shown to a person needs. */
typedef float HnV4f __attribute__((vector_size(16)));
typedef int32_t HnV4i __attribute__((vector_size(16)));

static inline HnV4f
v4_load(const float *p)
{
  HnV4f x;
  memcpy(&x, p, sizeof x);
  return x;
}

static inline HnV4f
v4_splat(float v)
{
  return (HnV4f){ v, v, v, v };
}

/* b where b > a, else a: NaN in b never wins */
static inline HnV4f
v4_max(HnV4f a, HnV4f b)
{
  HnV4i m = b > a;
  return (HnV4f) (((HnV4i) a & ~m) | ((HnV4i) b & m));
}

static inline float
v4_hmax(HnV4f v)
{
  float m = v[0];
  for (int j = 1; j < 4; j++)
    m = v[j] > m ? v[j] : m;
  return m;
}

/* exp(x - mx) for x <= mx; NaN and -inf give 0 */
static inline HnV4f
v4_exp_shifted(HnV4f x, float mx)
{
  HnV4i keep = x > -INFINITY;
  HnV4f d = x - mx;
  HnV4i low = d < -87.0f;
  d = (HnV4f) (((HnV4i) d & ~low) | ((HnV4i) v4_splat(-87.0f) & low));
  HnV4f t = d * 1.44269504088896341f;
  HnV4f n = (t + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5·2^23 drops the fraction */
  HnV4f f = (t - n) * 0.693147180559945309f;  /* e^f = 2^(t-n) */
  HnV4f poly = 1.0f + f * (1.0f + f * (0.5f + f * (0.166666672f + f * (0.0416666679f +
               f * (0.00833333377f + f * 0.00138888892f)))));
  HnV4i scale = (__builtin_convertvector(n, HnV4i) + 127) << 23;
  return (HnV4f) ((HnV4i) (poly * (HnV4f) scale) & keep);
}

/* Puts (i, v) into the sorted list out[0..*n) of at most k if it belongs there; equal
 * values keep id order (the newcomer, a higher id, goes after them). */
static inline void
top_insert(HnProbCandidate *out, uint32_t *n, uint32_t k, float *floor_value, int32_t i, float v)
{
  if (!(v > *floor_value))
    return;
  uint32_t at = *n < k ? *n : k - 1;
  while (at > 0 && v > out[at - 1].logprob) {
    out[at] = out[at - 1];
    at--;
  }
  if (*n < k)
    (*n)++;
  out[at] = (HnProbCandidate){ .id = i, .logprob = v };
  if (*n == k)
    *floor_value = out[k - 1].logprob;
}

/* Pass 1 finds the maximum; pass 2 sums the exponentials and, per block of 64, looks at
 * the block's values only when its maximum beats the k-th best so far (rarely, once the
 * list is full), so the selection costs nearly nothing on top of the sum. */
static uint32_t
top_raw_lse(const float *l, int32_t nv, uint32_t k, HnProbCandidate *out, float *lse_out)
{
  enum { BLOCK = 64 };
  if (k > HN_PROBS_MAX_K)
    k = HN_PROBS_MAX_K;
  int32_t n_blocked = nv / BLOCK * BLOCK;
  HnV4f vmax = v4_splat(-INFINITY);
  HnV4f vmax2 = vmax;
  for (int32_t i = 0; i < n_blocked; i += 8) {
    vmax = v4_max(vmax, v4_load(l + i));
    vmax2 = v4_max(vmax2, v4_load(l + i + 4));
  }
  vmax = v4_max(vmax, vmax2);
  float mx = v4_hmax(vmax);
  for (int32_t i = n_blocked; i < nv; i++)
    mx = l[i] > mx ? l[i] : mx;
  bool finite = isfinite(mx);

  uint32_t n = 0;
  float floor_value = -INFINITY; /* what a value must beat to enter a full list */
  double sum = 0.0;
  for (int32_t b = 0; b < n_blocked; b += BLOCK) {
    HnV4f acc = v4_splat(0.0f), acc2 = acc, bmax = v4_splat(-INFINITY);
    for (int32_t i = b; i < b + BLOCK; i += 8) {
      HnV4f x = v4_load(l + i), y = v4_load(l + i + 4);
      if (finite) {
        acc += v4_exp_shifted(x, mx);
        acc2 += v4_exp_shifted(y, mx);
      }
      bmax = v4_max(bmax, v4_max(x, y));
    }
    HnV4f both = acc + acc2;
    sum += (double) ((both[0] + both[1]) + (both[2] + both[3]));
    if (k > 0 && v4_hmax(bmax) > floor_value)
      for (int32_t i = b; i < b + BLOCK; i++)
        top_insert(out, &n, k, &floor_value, i, l[i]);
  }
  for (int32_t i = n_blocked; i < nv; i++) {
    if (finite && l[i] > -INFINITY) /* NaN and -inf add nothing */
      sum += expf(l[i] - mx);
    if (k > 0)
      top_insert(out, &n, k, &floor_value, i, l[i]);
  }
  float lse = finite ? mx + (float) log(sum) : mx;
  for (uint32_t i = 0; i < n; i++) {
    out[i].logprob = finite ? out[i].logprob - lse : (out[i].logprob == mx ? 0.0f : -INFINITY);
    out[i].p = 0.0f;
    out[i].removed_by = HN_STAGE_NONE;
  }
  if (lse_out)
    *lse_out = lse;
  return n;
}

uint32_t
hn_probs_top_raw(const float *logits, int32_t n_vocab, uint32_t k, HnProbCandidate *out)
{
  return top_raw_lse(logits, n_vocab, k, out, NULL);
}

bool
hn_sampler_set_probs(HnSampler *s, int32_t k, HnError *err)
{
  if (k < 0 || k > HN_PROBS_MAX_K)
    return hn_error_set(err, HN_ERR_INVALID_ARG,
                        "the number of candidates to record must be between 0 and %d, not %d",
                        HN_PROBS_MAX_K, k);
  if (k > 0 && s->probs_slot == NULL) {
    s->probs_slot = calloc((size_t) s->n_vocab, 1);
    if (s->probs_slot == NULL)
      return hn_error_set(err, HN_ERR_NOMEM, "out of memory");
  }
  s->probs_k = k;
  s->probs_valid = false;
  return true;
}

int32_t
hn_sampler_get_probs_k(const HnSampler *s)
{
  return s->probs_k;
}

const HnTokenProbs *
hn_sampler_last_probs(const HnSampler *s)
{
  return s->probs_k > 0 && s->probs_valid ? &s->probs : NULL;
}

static void
probs_begin(HnSampler *s, const float *raw)
{
  HnTokenProbs *r = &s->probs;
  r->n_candidates = top_raw_lse(raw, s->n_vocab, (uint32_t) s->probs_k, r->candidates, &s->probs_lse);
  r->token = -1;
  r->p = 0.0f;
  r->logprob = -INFINITY;
  for (uint32_t i = 0; i < r->n_candidates; i++)
    s->probs_slot[r->candidates[i].id] = (uint8_t) (i + 1);
}

/* After a stage that works on the logit row: what it set to -inf is removed. */
static void
probs_mark_row(HnSampler *s, const float *l, HnSamplerStage stage)
{
  HnTokenProbs *r = &s->probs;
  for (uint32_t i = 0; i < r->n_candidates; i++)
    if (r->candidates[i].removed_by == HN_STAGE_NONE && !(l[r->candidates[i].id] > -INFINITY))
      r->candidates[i].removed_by = (uint8_t) stage;
}

/* After a stage that shrank the candidate set to c[0..n): whatever was alive and is not
 * there any more was removed by it. */
static void
probs_mark_set(HnSampler *s, const HnCandidate *c, size_t n, HnSamplerStage stage)
{
  HnTokenProbs *r = &s->probs;
  uint32_t seen = 0;
  for (size_t i = 0; i < n; i++) {
    uint8_t slot = s->probs_slot[c[i].id];
    if (slot)
      seen |= 1u << (slot - 1);
  }
  for (uint32_t i = 0; i < r->n_candidates; i++)
    if (r->candidates[i].removed_by == HN_STAGE_NONE && !(seen & (1u << i)))
      r->candidates[i].removed_by = (uint8_t) stage;
}

/* The final probabilities from the set the draw used, and the drawn token's own. */
static void
probs_finish(HnSampler *s, const float *raw, int32_t token)
{
  HnTokenProbs *r = &s->probs;
  r->token = token;
  for (size_t i = 0; i < s->n_last; i++) {
    const HnCandidate *c = &s->last[i];
    uint8_t slot = s->probs_slot[c->id];
    if (slot && r->candidates[slot - 1].removed_by == HN_STAGE_NONE)
      r->candidates[slot - 1].p = c->p;
    if (c->id == token)
      r->p = c->p;
  }
  if (token >= 0 && token < s->n_vocab && raw[token] > -INFINITY)
    r->logprob = raw[token] - s->probs_lse;
  for (uint32_t i = 0; i < r->n_candidates; i++)
    s->probs_slot[r->candidates[i].id] = 0;
  s->probs_valid = token >= 0;
}

/* Draws from cands[0..n) whose p sum to 1 (up to rounding). */
static size_t
draw(HnSampler *s, const HnCandidate *c, size_t n)
{
  double u = hn_rng_uniform(&s->rng);
  double cum = 0.0;
  for (size_t i = 0; i < n; i++) {
    cum += c[i].p;
    if (u < cum)
      return i;
  }
  /* rounding left u above the total: the last token with any mass */
  for (size_t i = n; i-- > 0;)
    if (c[i].p > 0.0f)
      return i;
  return 0;
}

static size_t
argmax(const HnCandidate *c, size_t n)
{
  size_t best = 0;
  for (size_t i = 1; i < n; i++)
    if (cand_before(&c[i], &c[best]))
      best = i;
  return best;
}

/* Candidates for every token that is not banned (-inf). */
static size_t
gather_all(const float *l, int32_t nv, HnCandidate *c)
{
  size_t n = 0;
  for (int32_t i = 0; i < nv; i++)
    if (l[i] > -INFINITY)
      c[n++] = (HnCandidate){ i, l[i], 0.0f };
  return n;
}

/* The k best tokens of a logit row, sorted, without touching the rest more than three
 * times: a histogram of the logits finds a threshold that at least k tokens reach, only
 * those are gathered, and a partial selection on that short list does the rest. */
static size_t
gather_top_k(const float *l, int32_t nv, size_t k, HnCandidate *c)
{
  enum { NB = 2048 };
  uint32_t hist[NB];
  float mx = -INFINITY, mn = INFINITY;
  size_t finite = 0;
  for (int32_t i = 0; i < nv; i++) {
    float v = l[i];
    if (v > -INFINITY) {
      finite++;
      if (v > mx)
        mx = v;
      if (v < mn)
        mn = v;
    }
  }
  if (finite <= k || !(mx > mn) || isinf(mx)) {
    size_t n = gather_all(l, nv, c);
    sort_prefix(c, n, k);
    return n < k ? n : k;
  }
  memset(hist, 0, sizeof hist);
  float scale = (float) NB / (mx - mn);
  if (!isfinite(scale) || !(scale > 0.0f)) {
    size_t n = gather_all(l, nv, c);
    sort_prefix(c, n, k);
    return n < k ? n : k;
  }
  for (int32_t i = 0; i < nv; i++) {
    float v = l[i];
    if (v > -INFINITY) {
      int bucket = (int) ((v - mn) * scale);
      hist[bucket < NB ? bucket : NB - 1]++;
    }
  }
  int bt = NB - 1;
  size_t acc = hist[bt];
  while (acc < k && bt > 0)
    acc += hist[--bt];
  /* gather from a little below the bucket's edge: a superset is harmless (the selection
   * below trims it), missing a token to rounding would not be */
  float threshold = bt == 0 ? -INFINITY : mn + ((float) bt - 0.5f) / scale;
  size_t n = 0;
  for (int32_t i = 0; i < nv; i++)
    if (l[i] >= threshold && l[i] > -INFINITY)
      c[n++] = (HnCandidate){ i, l[i], 0.0f };
  sort_prefix(c, n, k);
  return n < k ? n : k;
}

static int32_t
argmax_row(const float *l, int32_t nv)
{
  int32_t best = -1;
  float bv = -INFINITY;
  for (int32_t i = 0; i < nv; i++)
    if (l[i] > bv) {
      bv = l[i];
      best = i;
    }
  return best;
}

static int32_t
mirostat_v1(HnSampler *s, HnCandidate *c, size_t n)
{
  const size_t m = 100;
  size_t n_total = n;
  hn_sampler_softmax(c, n);
  sort_prefix(c, n, m);
  /* estimate the Zipf exponent from the top m probabilities (least squares) */
  double sum_ti_bi = 0.0, sum_ti_sq = 0.0;
  for (size_t i = 0; i + 1 < n && i + 1 < m; i++) {
    if (c[i + 1].p <= 0.0f)
      break;
    double t_i = log((double) (i + 2) / (double) (i + 1));
    double b_i = log((double) c[i].p / (double) c[i + 1].p);
    sum_ti_bi += t_i * b_i;
    sum_ti_sq += t_i * t_i;
  }
  double s_hat = sum_ti_sq > 0.0 ? sum_ti_bi / sum_ti_sq : 1.0;
  double eps_hat = s_hat - 1.0;
  double k_d;
  if (fabs(eps_hat) < 1e-9)
    k_d = (double) n_total;
  else
    k_d = pow(eps_hat * pow(2.0, s->mu) / (1.0 - pow((double) n_total, -eps_hat)), 1.0 / s_hat);
  size_t k = 1;
  if (isfinite(k_d) && k_d > 1.0)
    k = k_d >= (double) n ? n : (size_t) k_d;
  if (k > m)
    sort_prefix(c, n, k);
  n = k;
  hn_sampler_softmax(c, n);
  size_t idx = draw(s, c, n);
  double surprise = -log2((double) c[idx].p);
  s->mu -= s->params.mirostat_eta * (float) (surprise - s->params.mirostat_tau);
  s->last = c;
  s->n_last = n;
  return c[idx].id;
}

/* v2 keeps the tokens whose surprise -log2 p is at most mu: a threshold on p, no sort. */
static int32_t
mirostat_v2(HnSampler *s, HnCandidate *c, size_t n)
{
  hn_sampler_softmax(c, n);
  double threshold = exp2(-(double) s->mu);
  size_t best = argmax(c, n);
  HnCandidate top = c[best];
  size_t w = 0;
  for (size_t i = 0; i < n; i++)
    if ((double) c[i].p >= threshold)
      c[w++] = c[i];
  if (w == 0)
    c[w++] = top;
  n = w;
  hn_sampler_softmax(c, n);
  size_t idx = draw(s, c, n);
  double surprise = -log2((double) c[idx].p);
  s->mu -= s->params.mirostat_eta * (float) (surprise - s->params.mirostat_tau);
  s->last = c;
  s->n_last = n;
  return c[idx].id;
}

/* Everything after the grammar mask, from the (biased, penalised, masked) logit row:
 * truncation, temperature, draw.  Returns -1 if every token is banned. */
static int32_t
run_tail(HnSampler *s, const float *l)
{
  const HnSamplerParams *p = &s->params;
  int32_t nv = s->n_vocab;
  HnCandidate *c = s->cands;
  bool rec = s->recording;
  s->last = c;
  s->n_last = 0;
  if (p->temperature <= 0.0f) {
    int32_t best = argmax_row(l, nv);
    if (best < 0)
      return -1;
    c[0] = (HnCandidate){ best, l[best], 1.0f };
    s->n_last = 1;
    if (rec)
      probs_mark_set(s, c, 1, HN_STAGE_TEMPERATURE);
    return best;
  }
  size_t n;
  if (p->mirostat == 1 || p->mirostat == 2) {
    n = gather_all(l, nv, c);
    if (n == 0)
      return -1;
    hn_sampler_apply_temperature(c, n, p->temperature);
    int32_t t = p->mirostat == 1 ? mirostat_v1(s, c, n) : mirostat_v2(s, c, n);
    if (rec)
      probs_mark_set(s, s->last, s->n_last, HN_STAGE_MIROSTAT);
    return t;
  }
  if (p->top_k > 0 && p->top_k < nv) {
    n = gather_top_k(l, nv, (size_t) p->top_k, c);
    if (rec)
      probs_mark_set(s, c, n, HN_STAGE_TOP_K);
  } else {
    n = gather_all(l, nv, c);
  }
  if (n == 0)
    return -1;
  hn_sampler_softmax(c, n);
  size_t before = n;
  if (p->typical_p < 1.0f)
    apply_typical_with(c, &n, p->typical_p, s->keys, s->scratch);
  if (rec && n < before)
    probs_mark_set(s, c, n, HN_STAGE_TYPICAL);
  before = n;
  top_p_core(c, &n, p->top_p);
  if (rec && n < before)
    probs_mark_set(s, c, n, HN_STAGE_TOP_P);
  before = n;
  min_p_core(c, &n, p->min_p);
  if (rec && n < before)
    probs_mark_set(s, c, n, HN_STAGE_MIN_P);
  if (p->temperature != 1.0f)
    hn_sampler_apply_temperature(c, n, p->temperature);
  s->n_last = n;
  return c[draw(s, c, n)].id;
}

/* The chain on one row.  The penalties look at window[0..window_len); the grammar is a
 * state (with the lazy check when not recording) or, for the lens, a bitset of the allowed
 * tokens (bit i of word i / 32), or neither. */
static int32_t
sample_row(HnSampler *s, const float *logits, HnGrammarState *grammar, const uint32_t *allowed,
           const int32_t *window, size_t window_len, HnError *err)
{
  const HnSamplerParams *p = &s->params;
  int32_t nv = s->n_vocab;
  float *l = s->work_logits;
  bool rec = s->probs_k > 0;
  s->recording = rec;
  s->probs_valid = false;
  bool any_nan = false;
  for (int32_t i = 0; i < nv; i++) {
    bool nan = isnan(logits[i]);
    any_nan |= nan;
    l[i] = nan ? -INFINITY : logits[i];
  }
  if (rec)
    probs_begin(s, l);

  for (size_t i = 0; i < p->n_logit_bias; i++)
    l[s->bias[i].token] += s->bias[i].bias;
  if (rec && p->n_logit_bias > 0)
    probs_mark_row(s, l, HN_STAGE_LOGIT_BIAS);

  if (p->repeat_last_n != 0 && window_len > 0) {
    hn_sampler_apply_penalties(l, nv, window, window_len, p->repeat_penalty, p->frequency_penalty,
                               p->presence_penalty, s->counts,
                               p->penalize_nl ? NULL : s->newline_ids,
                               p->penalize_nl ? 0 : s->n_newline);
    if (rec)
      probs_mark_row(s, l, HN_STAGE_REPETITION);
  }

  int32_t t;
  if (allowed != NULL) {
    for (int32_t i = 0; i < nv; i++)
      if (!(allowed[i >> 5] & (1u << (i & 31))))
        l[i] = -INFINITY;
    if (rec)
      probs_mark_row(s, l, HN_STAGE_GRAMMAR);
    t = run_tail(s, l);
    if (t < 0)
      hn_error_set(err, HN_ERR_GRAMMAR, "the grammar allows no token here");
  } else if (grammar != NULL) {
    if (!rec) {
      /* Lazy check: run the chain on the unmasked row and keep its choice if the grammar
       * allows it; only a rejection pays for masking the whole vocabulary (and the draw is
       * then repeated with the same random number).  Recording skips it: the record must
       * describe the distribution the token was really drawn from. */
      HnRng saved = s->rng;
      float saved_mu = s->mu;
      t = run_tail(s, l);
      if (t >= 0 && hn_grammar_accepts_token_bytes(grammar, t)) {
        s->grammar_stats.lazy_accepted++;
        return t;
      }
      s->rng = saved;
      s->mu = saved_mu;
    }
    s->grammar_stats.full_masks++;
    hn_grammar_mask_logits(grammar, l, nv);
    if (rec)
      probs_mark_row(s, l, HN_STAGE_GRAMMAR);
    t = run_tail(s, l);
    if (t < 0 && hn_grammar_state_incomplete(grammar))
      /* the mask (or the parse state) stopped at a work bound: nothing was found allowed in
       * the part that was checked, which says nothing about the grammar itself */
      hn_error_set(err, HN_ERR_LIMIT,
                   "the grammar is too large or too ambiguous to follow here: the work limit for one "
                   "token was reached before any token was found allowed; simplify the grammar");
    else if (t < 0)
      hn_error_set(err, HN_ERR_GRAMMAR, "the grammar allows no token here");
  } else {
    t = run_tail(s, l);
    if (t < 0 && any_nan)
      /* NaN scores count as banned above; when nothing is left, they are the reason */
      hn_error_set(err, HN_ERR_INVALID_NUMBERS,
                   "the model produced invalid numbers (NaN) instead of token scores; its weights are "
                   "probably damaged");
    else if (t < 0)
      hn_error_set(err, HN_ERR_INVALID_ARG, "every token is banned by the logit bias");
  }
  if (rec)
    probs_finish(s, logits, t);
  s->recording = false;
  return t;
}

int32_t
hn_sampler_sample(HnSampler *s, const float *logits, HnGrammarState *grammar, HnError *err)
{
  const HnSamplerParams *p = &s->params;
  size_t window = 0;
  if (p->repeat_last_n != 0 && s->history_len > 0) {
    window = s->history_len;
    if (p->repeat_last_n > 0 && (size_t) p->repeat_last_n < window)
      window = (size_t) p->repeat_last_n;
    size_t start = (s->history_head + s->history_cap - window) % s->history_cap;
    for (size_t i = 0; i < window; i++)
      s->window[i] = s->history[(start + i) % s->history_cap];
  }
  return sample_row(s, logits, grammar, NULL, s->window, window, err);
}

int32_t
hn_sampler_probe(HnSampler *s, const float *logits, HnGrammarState *grammar, HnError *err)
{
  if (s->probs_k <= 0)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "probing needs probability recording on"), -1;
  HnRng saved_rng = s->rng;
  float saved_mu = s->mu;
  HnSamplerGrammarStats saved_stats = s->grammar_stats;
  int32_t t = hn_sampler_sample(s, logits, grammar, err);
  s->rng = saved_rng;
  s->mu = saved_mu;
  s->grammar_stats = saved_stats;
  return t;
}

/* ---- The lens ------------------------------------------------------------------ */

struct HnLens {
  HnSampler *sampler; /* its buffers and chain; params, mu and rng are set per computation */
};

HnLens *
hn_lens_new(int32_t n_vocab, HnError *err)
{
  HnSamplerParams defaults;
  hn_sampler_params_init(&defaults);
  defaults.seed = 0;
  HnLens *lens = calloc(1, sizeof *lens);
  if (lens == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  /* the history ring is unused: the lens reads the caller's history in place */
  lens->sampler = hn_sampler_new(&defaults, n_vocab, 1, err);
  if (lens->sampler == NULL) {
    free(lens);
    return NULL;
  }
  HnSampler *s = lens->sampler;
  s->bias = calloc(HN_SAMPLER_MAX_LOGIT_BIAS, sizeof *s->bias);
  if (s->bias == NULL || !hn_sampler_set_probs(s, HN_PROBS_MAX_K, err)) {
    hn_lens_free(lens);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory for a %d-token lens", n_vocab), NULL;
  }
  return lens;
}

void
hn_lens_free(HnLens *lens)
{
  if (lens == NULL)
    return;
  hn_sampler_free(lens->sampler);
  free(lens);
}

int32_t
hn_lens_n_vocab(const HnLens *lens)
{
  return lens->sampler->n_vocab;
}

bool
hn_lens_compute(HnLens *lens, const HnSamplerParams *params, const HnLensInput *in, uint32_t k,
                HnTokenProbs *out, HnError *err)
{
  HnSampler *s = lens->sampler;
  memset(out, 0, sizeof *out);
  out->token = -1;
  if (in->logits == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "the lens needs a row of logits");
  if (k < 1 || k > HN_PROBS_MAX_K)
    return hn_error_set(err, HN_ERR_INVALID_ARG,
                        "the lens shows between 1 and %d candidates, not %u", HN_PROBS_MAX_K, k);
  if (in->n_history > 0 && in->history == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "the lens was given a history without its tokens");
  if (!hn_sampler_params_validate(params, s->n_vocab, err) ||
      !hn_sampler_set_newline_tokens(s, in->newline_ids, in->n_newline, err) ||
      !hn_sampler_set_probs(s, (int32_t) k, err))
    return false;
  s->params = *params;
  s->params.stop = NULL;
  s->params.n_stop = 0;
  if (params->n_logit_bias > 0)
    memcpy(s->bias, params->logit_bias, params->n_logit_bias * sizeof *s->bias);
  s->params.logit_bias = s->bias;
  s->mu = isnan(in->mirostat_mu) ? 2.0f * params->mirostat_tau : in->mirostat_mu;
  hn_rng_seed(&s->rng, params->seed == HN_SAMPLER_SEED_RANDOM ? 0 : params->seed);
  /* the penalty window is the history's tail, read where it lies */
  size_t window = 0;
  if (params->repeat_last_n != 0) {
    window = in->n_history;
    if (params->repeat_last_n > 0 && (size_t) params->repeat_last_n < window)
      window = (size_t) params->repeat_last_n;
  }
  const int32_t *window_start = window > 0 ? in->history + (in->n_history - window) : NULL;
  int32_t t = sample_row(s, in->logits, NULL, in->allowed, window_start, window, err);
  *out = s->probs;
  if (t < 0) {
    /* nothing survived: the stage that emptied the set removed the rest */
    for (uint32_t i = 0; i < out->n_candidates; i++) {
      out->candidates[i].p = 0.0f;
      if (out->candidates[i].removed_by == HN_STAGE_NONE)
        out->candidates[i].removed_by = in->allowed ? HN_STAGE_GRAMMAR : HN_STAGE_LOGIT_BIAS;
    }
    out->token = -1;
    return false;
  }
  return true;
}

HnSamplerGrammarStats
hn_sampler_grammar_stats(const HnSampler *s)
{
  return s->grammar_stats;
}

/* ---- Stop strings -------------------------------------------------------------- */

struct HnStopMatcher {
  char **stops;
  size_t *lens;
  size_t n;
  size_t max_len;
  char *buf;      /* held text, then the new piece */
  size_t len, cap;
  char *out;      /* what may be shown */
  size_t out_cap;
  int matched;
};

HnStopMatcher *
hn_stop_matcher_new(const char *const *stops, size_t n, HnError *err)
{
  if (n > HN_SAMPLER_MAX_STOP)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "at most %d stop strings", HN_SAMPLER_MAX_STOP),
           NULL;
  HnStopMatcher *m = calloc(1, sizeof *m);
  if (m == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  m->stops = calloc(n ? n : 1, sizeof *m->stops);
  m->lens = calloc(n ? n : 1, sizeof *m->lens);
  if (!m->stops || !m->lens)
    goto nomem;
  for (size_t i = 0; i < n; i++) {
    size_t len = stops[i] ? strlen(stops[i]) : 0;
    if (len == 0 || len > HN_SAMPLER_MAX_STOP_LEN) {
      hn_stop_matcher_free(m);
      return hn_error_set(err, HN_ERR_INVALID_ARG, "stop string %zu must be 1 to %d bytes",
                          i + 1, HN_SAMPLER_MAX_STOP_LEN),
             NULL;
    }
    m->stops[i] = strdup(stops[i]);
    m->n = i + 1;
    if (!m->stops[i])
      goto nomem;
    m->lens[i] = len;
    if (len > m->max_len)
      m->max_len = len;
  }
  m->cap = 2 * HN_SAMPLER_MAX_STOP_LEN + 256;
  m->buf = malloc(m->cap);
  m->out_cap = m->cap;
  m->out = malloc(m->out_cap);
  if (!m->buf || !m->out)
    goto nomem;
  m->matched = -1;
  return m;
nomem:
  hn_stop_matcher_free(m);
  hn_error_set(err, HN_ERR_NOMEM, "out of memory");
  return NULL;
}

void
hn_stop_matcher_free(HnStopMatcher *m)
{
  if (m == NULL)
    return;
  for (size_t i = 0; i < m->n; i++)
    free(m->stops[i]);
  free(m->stops);
  free(m->lens);
  free(m->buf);
  free(m->out);
  free(m);
}

void
hn_stop_matcher_reset(HnStopMatcher *m)
{
  m->len = 0;
  m->matched = -1;
}

int
hn_stop_matcher_matched(const HnStopMatcher *m)
{
  return m->matched;
}

static bool
grow(char **buf, size_t *cap, size_t need)
{
  return HN_ARRAY_RESERVE(*buf, *cap, need, 64);
}

bool
hn_stop_matcher_feed(HnStopMatcher *m, const char *piece, size_t len, const char **emit,
                     size_t *emit_len)
{
  *emit = m->out;
  *emit_len = 0;
  if (m->matched >= 0)
    return true;
  if (!grow(&m->buf, &m->cap, m->len + len) || !grow(&m->out, &m->out_cap, m->len + len)) {
    /* out of memory: give the text out unfiltered rather than lose it */
    *emit = piece;
    *emit_len = len;
    return false;
  }
  if (len > 0)
    memcpy(m->buf + m->len, piece, len);
  m->len += len;
  if (m->n == 0) {
    memcpy(m->out, m->buf, m->len);
    *emit_len = m->len;
    m->len = 0;
    return false;
  }
  /* earliest complete stop string */
  size_t best_pos = SIZE_MAX;
  int best = -1;
  for (size_t s = 0; s < m->n; s++) {
    if (m->lens[s] > m->len)
      continue;
    for (size_t i = 0; i + m->lens[s] <= m->len && i < best_pos; i++)
      if (memcmp(m->buf + i, m->stops[s], m->lens[s]) == 0) {
        best_pos = i;
        best = (int) s;
        break;
      }
  }
  if (best >= 0) {
    memcpy(m->out, m->buf, best_pos);
    *emit_len = best_pos;
    m->len = 0;
    m->matched = best;
    return true;
  }
  /* hold back the longest tail that is a proper prefix of some stop string */
  size_t hold = 0;
  size_t max_tail = m->max_len - 1 < m->len ? m->max_len - 1 : m->len;
  for (size_t t = max_tail; t > 0 && hold == 0; t--) {
    const char *tail = m->buf + m->len - t;
    for (size_t s = 0; s < m->n; s++)
      if (m->lens[s] > t && memcmp(tail, m->stops[s], t) == 0) {
        hold = t;
        break;
      }
  }
  size_t give = m->len - hold;
  memcpy(m->out, m->buf, give);
  memmove(m->buf, m->buf + give, hold);
  m->len = hold;
  *emit_len = give;
  return false;
}

void
hn_stop_matcher_flush(HnStopMatcher *m, const char **emit, size_t *emit_len)
{
  memcpy(m->out, m->buf, m->len);
  *emit = m->out;
  *emit_len = m->matched >= 0 ? 0 : m->len;
  m->len = 0;
}
