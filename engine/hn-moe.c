/* hn-moe.c — routing and the grouped expert feed-forward.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hn-kernels.h"
#include "hn-quants.h"

int
hn_moe_ff_width(int n_ff_exp, int n_ff_shexp)
{
  return n_ff_exp > n_ff_shexp ? n_ff_exp : n_ff_shexp;
}

/* A decode step runs every chosen expert's products in one hn_matvec_many: at most
 * HN_MATVEC_MAX items, gate and up for each expert and the shared one. */
#define ONE_TOKEN_MAX_USED (HN_MATVEC_MAX / 2 - 1)

static size_t
expert_rows(int n_batch, int n_expert_used)
{
  return (size_t) (n_batch > n_expert_used + 1 ? n_batch : n_expert_used + 1);
}

size_t
hn_moe_act_scratch_bytes(int64_t widest_input, int n_expert_used)
{
  return hn_matvec_many_scratch_bytes(widest_input, n_expert_used + 1);
}

uint64_t
hn_moe_scratch_bytes(int n_batch, int n_embd, int n_expert, int n_expert_used, int ff_width)
{
  uint64_t nb = (uint64_t) n_batch, routed = nb * (uint64_t) n_expert_used;
  uint64_t rows = expert_rows(n_batch, n_expert_used);
  return nb * (uint64_t) n_expert * sizeof(float)                   /* probs */
         + routed * (sizeof(int32_t) + sizeof(float)) * 2           /* choice + group */
         + ((uint64_t) n_expert + 1) * sizeof(int32_t)              /* group_start */
         + nb * (uint64_t) n_embd * sizeof(float)                   /* gathered */
         + rows * (uint64_t) n_embd * sizeof(float)                 /* expert_out */
         + rows * (uint64_t) ff_width * sizeof(float) * 2           /* gate, up */
         + nb * sizeof(float) * 2;                                  /* layer_lead, lead */
}

bool
hn_moe_scratch_init(HnMoeScratch *s, int n_batch, int n_embd, int n_expert, int n_expert_used,
                    int ff_width, HnError *err)
{
  memset(s, 0, sizeof *s);
  size_t nb = (size_t) n_batch, routed = nb * (size_t) n_expert_used;
  size_t rows = expert_rows(n_batch, n_expert_used);
  s->n_batch = n_batch;
  s->ff_width = ff_width;
  s->n_embd = n_embd;
  s->n_expert = n_expert;
  s->n_expert_used = n_expert_used;
  s->probs = malloc(nb * (size_t) n_expert * sizeof(float));
  s->choice = malloc(routed * sizeof(int32_t));
  s->choice_weight = malloc(routed * sizeof(float));
  s->group_start = malloc(((size_t) n_expert + 1) * sizeof(int32_t));
  s->group_token = malloc(routed * sizeof(int32_t));
  s->group_weight = malloc(routed * sizeof(float));
  s->gathered = malloc(nb * (size_t) n_embd * sizeof(float));
  s->expert_out = malloc(rows * (size_t) n_embd * sizeof(float));
  s->gate = malloc(rows * (size_t) ff_width * sizeof(float));
  s->up = malloc(rows * (size_t) ff_width * sizeof(float));
  s->layer_lead = malloc(nb * sizeof(float));
  s->lead = malloc(nb * sizeof(float));
  if (!s->probs || !s->choice || !s->choice_weight || !s->group_start || !s->group_token ||
      !s->group_weight || !s->gathered || !s->expert_out || !s->gate || !s->up || !s->layer_lead ||
      !s->lead) {
    hn_moe_scratch_clear(s);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory for the experts' work area (%d tokens)", n_batch);
  }
  return true;
}

void
hn_moe_scratch_clear(HnMoeScratch *s)
{
  free(s->probs);
  free(s->choice);
  free(s->choice_weight);
  free(s->group_start);
  free(s->group_token);
  free(s->group_weight);
  free(s->gathered);
  free(s->expert_out);
  free(s->gate);
  free(s->up);
  free(s->layer_lead);
  free(s->lead);
  memset(s, 0, sizeof *s);
}

void
hn_moe_route(float *logits, int n_tokens, int n_expert, int k, bool norm_weights,
             int32_t *choice, float *choice_weight, float *lead)
{
  for (int t = 0; t < n_tokens; t++) {
    float *p = logits + (size_t) t * (size_t) n_expert;
    float mx = p[0];
    for (int e = 1; e < n_expert; e++)
      mx = p[e] > mx ? p[e] : mx;
    float sum = 0.0f;
    for (int e = 0; e < n_expert; e++) {
      p[e] = expf(p[e] - mx);
      sum += p[e];
    }
    for (int e = 0; e < n_expert; e++)
      p[e] /= sum;
    /* k is small (2..8 in practice): selection by repeated insertion, highest first; a
     * later expert only displaces an earlier one when strictly more probable */
    int32_t *ids = choice + (size_t) t * (size_t) k;
    float *w = choice_weight + (size_t) t * (size_t) k;
    int n = 0;
    for (int e = 0; e < n_expert; e++) {
      if (n == k && !(p[e] > w[k - 1]))
        continue;
      int i = n < k ? n++ : k - 1;
      while (i > 0 && p[e] > w[i - 1]) {
        ids[i] = ids[i - 1];
        w[i] = w[i - 1];
        i--;
      }
      ids[i] = e;
      w[i] = p[e];
    }
    if (lead) {
      /* a ratio of probabilities is a difference of logits */
      float best_left = 0.0f;
      for (int e = 0; e < n_expert; e++) {
        bool chosen = false;
        for (int j = 0; j < k; j++)
          chosen |= ids[j] == e;
        if (!chosen && p[e] > best_left)
          best_left = p[e];
      }
      lead[t] = k == n_expert ? INFINITY : best_left > 0.0f ? logf(w[k - 1] / best_left) : INFINITY;
    }
    if (norm_weights) {
      float total = 0.0f;
      for (int i = 0; i < k; i++)
        total += w[i];
      for (int i = 0; i < k; i++)
        w[i] /= total;
    }
  }
}

/* One expert's matrix (a 2-D view of the 3-D tensor, still in the mapping). */
static HnGgufTensor
expert_matrix(const HnGgufTensor *t, int e)
{
  HnGgufTensor v = *t;
  size_t bytes = hn_type_row_bytes((HnType) t->type, t->ne[0]) * (size_t) t->ne[1];
  v.ne[2] = 1;
  v.n_dims = 2;
  v.data = (const uint8_t *) t->data + (size_t) e * bytes;
  v.nbytes = bytes;
  return v;
}

/* gate ← silu(gate) · up, n values */
static void
swiglu(float *gate, const float *up, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

/* y = down(silu(gate · x) ⊙ (up · x)) for n rows of x */
static void
swiglu_ffn(HnThreadPool *pool, const HnGgufTensor *gate, const HnGgufTensor *up, const HnGgufTensor *down,
           const float *x, int n, HnMoeScratch *s, void *act, float *y)
{
  int64_t ff = gate->ne[1];
  hn_matmul(pool, gate, x, n, act, s->gate, ff);
  hn_matmul(pool, up, x, n, act, s->up, ff);
  swiglu(s->gate, s->up, (size_t) n * (size_t) ff);
  hn_matmul(pool, down, s->gate, n, act, y, down->ne[1]);
}

/* out += sigmoid(shexp_gate · x) · y for one token */
static void
add_shared(const HnMoeLayer *L, int E, const float *x, const float *y, float *out)
{
  float dot = 0.0f;
  for (int i = 0; i < E; i++)
    dot += L->shexp_gate[i] * x[i];
  float scale = 1.0f / (1.0f + expf(-dot));
  for (int i = 0; i < E; i++)
    out[i] += scale * y[i];
}

/* A decode step: the chosen experts (and the shared one) in two parallel sections, gate
 * and up of all of them, then all the downs; the sums in the grouped path's order
 * (shared expert, then experts by index), so a token gets the same result either way. */
static void
forward_one_token(const HnMoeLayer *L, HnMoeScratch *s, HnThreadPool *pool, const float *x, void *act,
                  float *out)
{
  const int E = s->n_embd;
  const size_t ffw = (size_t) s->ff_width;
  int chosen[ONE_TOKEN_MAX_USED], n = 0;
  float weight[ONE_TOKEN_MAX_USED];
  for (int e = 0; e < L->n_expert; e++)
    if (s->group_start[e + 1] > s->group_start[e]) {
      chosen[n] = e;
      weight[n] = s->group_weight[s->group_start[e]];
      n++;
    }
  HnGgufTensor gate[ONE_TOKEN_MAX_USED], up[ONE_TOKEN_MAX_USED], down[ONE_TOKEN_MAX_USED];
  HnMatvec items[HN_MATVEC_MAX];
  int m = 0;
  for (int i = 0; i < n; i++) {
    gate[i] = expert_matrix(L->gate_exps, chosen[i]);
    up[i] = expert_matrix(L->up_exps, chosen[i]);
    down[i] = expert_matrix(L->down_exps, chosen[i]);
    items[m++] = (HnMatvec) { &gate[i], x, s->gate + (size_t) i * ffw };
    items[m++] = (HnMatvec) { &up[i], x, s->up + (size_t) i * ffw };
  }
  if (L->gate_shexp) {
    items[m++] = (HnMatvec) { L->gate_shexp, x, s->gate + (size_t) n * ffw };
    items[m++] = (HnMatvec) { L->up_shexp, x, s->up + (size_t) n * ffw };
  }
  hn_matvec_many(pool, items, m, act);
  m = 0;
  for (int i = 0; i < n; i++) {
    swiglu(s->gate + (size_t) i * ffw, s->up + (size_t) i * ffw, (size_t) L->n_ff_exp);
    items[m++] = (HnMatvec) { &down[i], s->gate + (size_t) i * ffw, s->expert_out + (size_t) i * E };
  }
  if (L->gate_shexp) {
    swiglu(s->gate + (size_t) n * ffw, s->up + (size_t) n * ffw, (size_t) L->n_ff_shexp);
    items[m++] = (HnMatvec) { L->down_shexp, s->gate + (size_t) n * ffw, s->expert_out + (size_t) n * E };
  }
  hn_matvec_many(pool, items, m, act);
  if (L->gate_shexp)
    add_shared(L, E, x, s->expert_out + (size_t) n * E, out);
  for (int i = 0; i < n; i++) {
    const float *y = s->expert_out + (size_t) i * E;
    for (int c = 0; c < E; c++)
      out[c] += weight[i] * y[c];
  }
}

void
hn_moe_forward(const HnMoeLayer *L, HnMoeScratch *s, HnThreadPool *pool, const float *x, int n_tokens,
               void *act, float *out)
{
  const int E = s->n_embd, n_exp = L->n_expert, k = L->n_expert_used;
  const size_t row = (size_t) E;

  hn_matmul(pool, L->router, x, n_tokens, act, s->probs, n_exp);
  hn_moe_route(s->probs, n_tokens, n_exp, k, L->norm_weights, s->choice, s->choice_weight, s->layer_lead);
  for (int t = 0; t < n_tokens; t++)
    s->lead[t] = s->layer_lead[t] < s->lead[t] ? s->layer_lead[t] : s->lead[t];

  /* counting sort of the (token, expert) pairs by expert, tokens in order within one */
  int32_t *start = s->group_start;
  memset(start, 0, ((size_t) n_exp + 1) * sizeof *start);
  for (int i = 0; i < n_tokens * k; i++)
    start[s->choice[i] + 1]++;
  for (int e = 0; e < n_exp; e++)
    start[e + 1] += start[e];
  for (int t = 0; t < n_tokens; t++)
    for (int j = 0; j < k; j++) {
      int i = t * k + j, e = s->choice[i];
      /* start[e] advances while filling; it is restored below */
      s->group_token[start[e]] = t;
      s->group_weight[start[e]] = s->choice_weight[i];
      start[e]++;
    }
  for (int e = n_exp; e > 0; e--)
    start[e] = start[e - 1];
  start[0] = 0;

  if (n_tokens == 1 && k <= ONE_TOKEN_MAX_USED) {
    forward_one_token(L, s, pool, x, act, out);
    return;
  }

  if (L->gate_shexp) {
    /* the shared expert sees every token, scaled by its own sigmoid gate */
    swiglu_ffn(pool, L->gate_shexp, L->up_shexp, L->down_shexp, x, n_tokens, s, act, s->expert_out);
    for (int t = 0; t < n_tokens; t++)
      add_shared(L, E, x + (size_t) t * row, s->expert_out + (size_t) t * row, out + (size_t) t * row);
  }

  for (int e = 0; e < n_exp; e++) {
    int first = start[e], n = start[e + 1] - first;
    if (n == 0)
      continue; /* nobody chose it: its weights are not touched */
    const float *in = x;
    if (n < n_tokens) { /* all tokens: x is already the gathered rows, in order */
      for (int i = 0; i < n; i++)
        memcpy(s->gathered + (size_t) i * row, x + (size_t) s->group_token[first + i] * row, row * sizeof(float));
      in = s->gathered;
    }
    HnGgufTensor gate = expert_matrix(L->gate_exps, e), up = expert_matrix(L->up_exps, e);
    HnGgufTensor down = expert_matrix(L->down_exps, e);
    swiglu_ffn(pool, &gate, &up, &down, in, n, s, act, s->expert_out);
    for (int i = 0; i < n; i++) {
      float w = s->group_weight[first + i];
      float *o = out + (size_t) s->group_token[first + i] * row;
      const float *y = s->expert_out + (size_t) i * row;
      for (int c = 0; c < E; c++)
        o[c] += w * y[c];
    }
  }
}
