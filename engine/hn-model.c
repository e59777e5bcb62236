/* hn-model.c — hyper-parameters from GGUF metadata and validation of the weight tensors.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-model-internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool
key_u32(const HnGguf *g, const char *arch, const char *suffix, uint32_t fallback, bool required,
        uint32_t *out, HnError *err)
{
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  if (required && hn_gguf_find_key(g, key) < 0)
    return hn_error_set(err, HN_ERR_FORMAT, "missing metadata key '%s'", key);
  return hn_gguf_get_u32_or(g, key, fallback, out, err);
}

static bool
key_f32(const HnGguf *g, const char *arch, const char *suffix, float fallback, float *out, HnError *err)
{
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  return hn_gguf_get_f32_or(g, key, fallback, out, err);
}

/* Finds a weight tensor and checks its type and its dimensions: ne2 matrices of ne1 rows
 * of ne0 (ne2 = 1: a plain matrix; more: one matrix per expert). */
static const HnGgufTensor *
weight_3d(const HnGguf *g, const char *name, int64_t ne0, int64_t ne1, int64_t ne2, bool optional, HnError *err)
{
  const HnGgufTensor *t = hn_gguf_find_tensor(g, name);
  if (!t) {
    if (!optional)
      hn_error_set(err, HN_ERR_FORMAT, "missing tensor '%s'", name);
    return NULL;
  }
  if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1) {
    if (ne2 == 1)
      hn_error_set(err, HN_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                   name, (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2],
                   (long long) t->ne[3], (long long) ne0, (long long) ne1);
    else
      hn_error_set(err, HN_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]",
                   name, (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2],
                   (long long) t->ne[3], (long long) ne0, (long long) ne1, (long long) ne2);
    return NULL;
  }
  if (!hn_type_is_weight_type(t->type)) {
    hn_error_set(err, HN_ERR_UNSUPPORTED, "tensor '%s' has unsupported type %s", name, hn_type_name(t->type));
    return NULL;
  }
  if (ne0 % hn_type_block_elems(t->type) != 0) {
    hn_error_set(err, HN_ERR_FORMAT, "tensor '%s': row of %lld is not a whole number of %s blocks",
                 name, (long long) ne0, hn_type_name(t->type));
    return NULL;
  }
  return t;
}

static const HnGgufTensor *
weight(const HnGguf *g, const char *name, int64_t ne0, int64_t ne1, bool optional, HnError *err)
{
  return weight_3d(g, name, ne0, ne1, 1, optional, err);
}

/* Small vectors (norms, biases) are decoded to f32 once at load. */
static float *
vector(const HnGguf *g, const char *name, int64_t n, bool optional, bool *failed, HnError *err)
{
  const HnGgufTensor *t = weight(g, name, n, 1, optional, err);
  if (!t) {
    if (!optional || hn_gguf_find_tensor(g, name))
      *failed = true;
    return NULL;
  }
  if (t->type != HN_TYPE_F32 && t->type != HN_TYPE_F16 && t->type != HN_TYPE_BF16) {
    hn_error_set(err, HN_ERR_UNSUPPORTED, "tensor '%s' has unsupported type %s for a vector",
                 name, hn_type_name(t->type));
    *failed = true;
    return NULL;
  }
  float *v = malloc((size_t) n * sizeof *v);
  if (!v) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    *failed = true;
    return NULL;
  }
  hn_dequantize_row((HnType) t->type, t->data, v, n);
  return v;
}

void
hn_model_free(HnModel *m)
{
  if (!m)
    return;
  if (m->layers) {
    for (int i = 0; i < m->n_layer; i++) {
      HnLayer *l = &m->layers[i];
      free(l->attn_norm);
      free(l->ffn_norm);
      free(l->attn_post_norm);
      free(l->ffn_post_norm);
      free(l->q_norm);
      free(l->k_norm);
      free(l->bq);
      free(l->bk);
      free(l->bv);
      free(l->shexp_gate);
    }
    free(m->layers);
  }
  free(m->out_norm);
  free(m->rope_factors);
  free(m->rope_long);
  free(m->rope_short);
  free(m->layer_sliding);
  hn_model_regroup_free(m);
  hn_gguf_close(m->gguf);
  free(m);
}

HnModel *
hn_model_load(const char *path, const HnModelParams *params, HnError *err)
{
  (void) params;
  HnGguf *g = hn_gguf_open(path, err);
  if (!g)
    return NULL;
  return hn_model_from_gguf(g, err);
}

#define LIMIT (1 << 20)

/* The router, the experts (3-D: one matrix per expert) and, where the model has one
 * (expert_shared_feed_forward_length > 0), the shared expert of layer i. */
static bool
load_moe_layer(const HnModel *m, int i, HnLayer *l, HnError *err)
{
  const HnGguf *g = m->gguf;
  const int64_t E = m->n_embd, F = m->n_ff_exp, S = m->n_ff_shexp, X = m->n_expert;
  HnMoeLayer *moe = &l->moe;
  char name[96];
  *moe = (HnMoeLayer) { .n_expert = m->n_expert, .n_expert_used = m->n_expert_used,
                        .n_ff_exp = m->n_ff_exp, .n_ff_shexp = m->n_ff_shexp,
                        .norm_weights = m->expert_weights_norm };
#define T(field, suffix, a0, a1, a2) \
  snprintf(name, sizeof name, "blk.%d." suffix ".weight", i); \
  if (!(moe->field = weight_3d(g, name, a0, a1, a2, false, err))) return false;
  T(router, "ffn_gate_inp", E, X, 1)
  T(gate_exps, "ffn_gate_exps", E, F, X)
  T(up_exps, "ffn_up_exps", E, F, X)
  T(down_exps, "ffn_down_exps", F, E, X)
  if (S > 0) {
    T(gate_shexp, "ffn_gate_shexp", E, S, 1)
    T(up_shexp, "ffn_up_shexp", E, S, 1)
    T(down_shexp, "ffn_down_shexp", S, E, 1)
    bool failed = false;
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp_shexp.weight", i);
    if (!(l->shexp_gate = vector(g, name, E, false, &failed, err)))
      return false;
    moe->shexp_gate = l->shexp_gate;
  }
#undef T
  return true;
}

/* Rows [row0, row0 + n_rows) of a fused weight, as a tensor of its own. */
static void
row_view(const HnGgufTensor *t, int64_t row0, int64_t n_rows, HnGgufTensor *view)
{
  size_t row_bytes = hn_type_row_bytes((HnType) t->type, t->ne[0]);
  *view = *t;
  view->ne[1] = n_rows;
  view->data = (const uint8_t *) t->data + (size_t) row0 * row_bytes;
  view->offset = t->offset + (uint64_t) row0 * row_bytes;
  view->nbytes = (size_t) n_rows * row_bytes;
}

/* An optional float key that must be positive when present; 0 when absent. */
static bool
positive_key(const HnGguf *g, const char *a, const char *suffix, float *out, HnError *err)
{
  if (!key_f32(g, a, suffix, 0.0f, out, err))
    return false;
  if (*out < 0.0f || isnan(*out))
    return hn_error_set(err, HN_ERR_FORMAT, "%s.%s is %g; it must be positive", a, suffix, *out);
  return true;
}

HnModel *
hn_model_from_gguf(HnGguf *g, HnError *err)
{
  HnModel *m = calloc(1, sizeof *m);
  if (!m) {
    hn_gguf_close(g);
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return NULL;
  }
  m->gguf = g;
  HnStr arch;
  if (!hn_gguf_get_str(g, "general.architecture", &arch, err)) {
    hn_error_prefix(err, "general.architecture");
    goto fail;
  }
  const HnArch *tr = hn_arch_find(arch);
  if (!tr) {
    hn_error_set(err, HN_ERR_UNSUPPORTED, "unsupported architecture '%.*s' (supported: %s)",
                 (int) (arch.len > 64 ? 64 : arch.len), arch.data, hn_arch_supported());
    goto fail;
  }
  m->traits = tr;
  snprintf(m->arch, sizeof m->arch, "%s", tr->name);
  bool moe = tr->moe;
  const char *a = m->arch;
  uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx, n_rot, head_dim, v_dim, window;
  if (!key_u32(g, a, "embedding_length", 0, true, &n_embd, err) ||
      !key_u32(g, a, "block_count", 0, true, &n_layer, err) ||
      !key_u32(g, a, "attention.head_count", 0, true, &n_head, err) ||
      /* a MoE model has no dense feed-forward; the key may still be there */
      !key_u32(g, a, "feed_forward_length", moe ? 1 : 0, !moe, &n_ff, err) ||
      !key_u32(g, a, "attention.head_count_kv", n_head, false, &n_head_kv, err) ||
      !key_u32(g, a, "context_length", 2048, false, &n_ctx, err))
    goto fail;
  if (n_embd == 0 || n_embd > LIMIT || n_layer == 0 || n_layer > 4096 || n_head == 0 ||
      n_head > 4096 || n_head_kv == 0 || n_head % n_head_kv != 0 ||
      n_ff == 0 || n_ff > 16 * LIMIT || n_ctx == 0 || n_ctx > 16 * LIMIT) {
    hn_error_set(err, HN_ERR_FORMAT, "inconsistent hyper-parameters: n_embd %u, n_layer %u, n_head %u, "
                 "n_head_kv %u, n_ff %u, context %u", n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx);
    goto fail;
  }
  /* the head size is its own key where it is not n_embd / n_head (qwen3, gemma) */
  if (!key_u32(g, a, "attention.key_length", n_embd % n_head == 0 ? n_embd / n_head : 0, false, &head_dim, err) ||
      !key_u32(g, a, "attention.value_length", head_dim, false, &v_dim, err))
    goto fail;
  if (head_dim == 0 || head_dim > 4096 || v_dim != head_dim || (uint64_t) head_dim * n_head > 16 * LIMIT) {
    hn_error_set(err, HN_ERR_FORMAT, "%s.attention.key_length %u / value_length %u do not fit %u heads "
                 "of a %u-wide model (they must be equal)", a, head_dim, v_dim, n_head, n_embd);
    goto fail;
  }
  m->n_embd = (int) n_embd;
  m->n_layer = (int) n_layer;
  m->n_head = (int) n_head;
  m->n_head_kv = (int) n_head_kv;
  m->n_ff = (int) n_ff;
  m->n_ctx_train = (int) n_ctx;
  m->head_dim = (int) head_dim;
  if (moe) {
    uint32_t n_expert, n_used, n_ff_exp, n_ff_shexp = 0;
    if (!key_u32(g, a, "expert_count", 0, true, &n_expert, err) ||
        !key_u32(g, a, "expert_used_count", 0, true, &n_used, err) ||
        !key_u32(g, a, "expert_feed_forward_length", 0, true, &n_ff_exp, err) ||
        !key_u32(g, a, "expert_shared_feed_forward_length", 0, false, &n_ff_shexp, err))
      goto fail;
    if (n_expert < 1 || n_expert > 4096 || n_used < 1 || n_used > n_expert || n_ff_exp < 1 ||
        n_ff_exp > 16 * LIMIT || n_ff_shexp > 16 * LIMIT) {
      hn_error_set(err, HN_ERR_FORMAT, "inconsistent expert parameters: %u experts, %u used per token, "
                   "expert feed-forward %u, shared expert feed-forward %u", n_expert, n_used, n_ff_exp, n_ff_shexp);
      goto fail;
    }
    m->n_expert = (int) n_expert;
    m->n_expert_used = (int) n_used;
    m->n_ff_exp = (int) n_ff_exp;
    m->n_ff_shexp = (int) n_ff_shexp;
    m->expert_weights_norm = tr->moe_norm_weights;
  }
  if (!key_u32(g, a, "rope.dimension_count", (uint32_t) m->head_dim, false, &n_rot, err))
    goto fail;
  if (n_rot == 0 || (int) n_rot > m->head_dim || n_rot % 2) {
    hn_error_set(err, HN_ERR_FORMAT, "%s.rope.dimension_count %u does not fit head size %d", a, n_rot, m->head_dim);
    goto fail;
  }
  float base, scale = 1.0f;
  if (!key_f32(g, a, "attention.layer_norm_rms_epsilon", tr->rms_eps, &m->rms_eps, err) ||
      !key_f32(g, a, "rope.freq_base", 10000.0f, &base, err) ||
      !key_f32(g, a, "rope.freq_base_swa", 10000.0f, &m->rope_local_base, err))
    goto fail;
  char key[128];
  snprintf(key, sizeof key, "%s.rope.scaling.type", a);
  HnStr stype;
  bool linear = false;
  if (hn_gguf_find_key(g, key) >= 0) {
    if (!hn_gguf_get_str(g, key, &stype, err))
      goto fail;
    linear = hn_str_eq(stype, "linear");
    /* longrope/su (Phi-3): the per-dimension factors come as tensors, read below */
    if (!linear && !hn_str_eq(stype, "none") && !hn_str_eq(stype, "llama3") &&
        !(tr->long_short_rope && (hn_str_eq(stype, "longrope") || hn_str_eq(stype, "su")))) {
      hn_error_set(err, HN_ERR_UNSUPPORTED, "unsupported rope scaling type '%.*s'",
                   (int) (stype.len > 32 ? 32 : stype.len), stype.data);
      goto fail;
    }
  }
  float factor = 1.0f;
  if (!key_f32(g, a, "rope.scaling.factor", 1.0f, &factor, err))
    goto fail;
  snprintf(key, sizeof key, "%s.rope.scale_linear", a);
  if (hn_gguf_find_key(g, key) >= 0) {
    if (!hn_gguf_get_f32(g, key, &factor, err))
      goto fail;
    linear = true;
  }
  if (linear && factor > 0.0f)
    scale = 1.0f / factor;
  float attn_factor = 1.0f;
  uint32_t n_ctx_orig;
  if (!key_f32(g, a, "rope.scaling.attn_factor", 1.0f, &attn_factor, err) ||
      !key_u32(g, a, "rope.scaling.original_context_length", n_ctx, false, &n_ctx_orig, err))
    goto fail;
  m->n_ctx_orig = (int) n_ctx_orig;
  if (!(base > 0.0f) || !(m->rms_eps > 0.0f) || !(m->rope_local_base > 0.0f) || !(attn_factor > 0.0f)) {
    hn_error_set(err, HN_ERR_FORMAT, "invalid rope base %g, rms epsilon %g or rope attention factor %g",
                 base, m->rms_eps, attn_factor);
    goto fail;
  }

  /* attention particulars: window, soft-caps, query scale */
  window = 0;
  if (tr->swa != HN_SWA_NONE && !key_u32(g, a, "attention.sliding_window", 0, false, &window, err))
    goto fail;
  if (window > 16 * LIMIT) {
    hn_error_set(err, HN_ERR_FORMAT, "%s.attention.sliding_window %u is not a window size", a, window);
    goto fail;
  }
  /* a window as long as the training context never hides anything */
  m->swa_window = window >= n_ctx ? 0 : (int) window;
  if (tr->softcaps && (!positive_key(g, a, "attn_logit_softcapping", &m->attn_softcap, err) ||
                       !positive_key(g, a, "final_logit_softcapping", &m->final_softcap, err)))
    goto fail;
  float query_pre_attn;
  if (!positive_key(g, a, "attention.query_pre_attn_scalar", &query_pre_attn, err))
    goto fail;
  if (query_pre_attn == 0.0f)
    query_pre_attn = tr->wide_query_layers == m->n_layer ? (float) m->n_embd / (float) m->n_head
                                                         : (float) m->head_dim;
  m->query_scale = 1.0f / sqrtf(query_pre_attn);
  m->embd_scale = tr->embd_scale ? sqrtf((float) m->n_embd) : 1.0f;

  const HnGgufTensor *te = hn_gguf_find_tensor(g, "token_embd.weight");
  if (!te) {
    hn_error_set(err, HN_ERR_FORMAT, "missing tensor 'token_embd.weight'");
    goto fail;
  }
  if (te->ne[1] < 1 || te->ne[1] > 16 * LIMIT) {
    hn_error_set(err, HN_ERR_FORMAT, "tensor 'token_embd.weight' has an invalid vocabulary size");
    goto fail;
  }
  m->n_vocab = (int) te->ne[1];
  hn_error_clear(err);
  if (!(m->tok_embd = weight(g, "token_embd.weight", m->n_embd, m->n_vocab, false, err)))
    goto fail;
  bool failed = false;
  m->output = weight(g, "output.weight", m->n_embd, m->n_vocab, true, err);
  if (!m->output) {
    if (hn_gguf_find_tensor(g, "output.weight"))
      goto fail;
    m->output = m->tok_embd; /* tied embeddings */
  }
  if (!(m->out_norm = vector(g, "output_norm.weight", m->n_embd, false, &failed, err)))
    goto fail;
  int half = (int) n_rot / 2;
  if (hn_gguf_find_tensor(g, "rope_freqs.weight")) {
    if (!(m->rope_factors = vector(g, "rope_freqs.weight", half, false, &failed, err)))
      goto fail;
  }
  if (tr->long_short_rope) {
    m->rope_long = vector(g, "rope_factors_long.weight", half, true, &failed, err);
    m->rope_short = vector(g, "rope_factors_short.weight", half, true, &failed, err);
    if (failed)
      goto fail;
    if (!m->rope_long != !m->rope_short) {
      hn_error_set(err, HN_ERR_FORMAT, "tensor '%s' comes without '%s'",
                   m->rope_long ? "rope_factors_long.weight" : "rope_factors_short.weight",
                   m->rope_long ? "rope_factors_short.weight" : "rope_factors_long.weight");
      goto fail;
    }
  }
  m->rope = (HnRope) { .head_dim = m->head_dim, .n_rot = (int) n_rot, .freq_base = base,
                       .freq_scale = scale, .neox = tr->neox,
                       .freq_factors = m->rope_factors ? m->rope_factors : m->rope_short,
                       .attn_factor = attn_factor };
  m->rope_local = m->rope;
  if (tr->swa_local_rope) {
    m->rope_local.freq_base = m->rope_local_base;
    m->rope_local.freq_scale = 1.0f;
  }

  uint32_t n_expert, n_expert_used;
  if (!key_u32(g, a, "expert_count", 0, false, &n_expert, err) ||
      !key_u32(g, a, "expert_used_count", 0, false, &n_expert_used, err))
    goto fail;
  m->n_expert = (int) (n_expert > 4096 ? 4096 : n_expert);
  m->n_expert_used = (int) (n_expert_used > n_expert ? n_expert : n_expert_used);
  int q_dim = m->n_head * m->head_dim, kv_dim = m->n_head_kv * m->head_dim;
  m->layers = calloc((size_t) m->n_layer, sizeof *m->layers);
  m->layer_sliding = calloc((size_t) m->n_layer, sizeof *m->layer_sliding);
  if (!m->layers || !m->layer_sliding) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto fail;
  }
  for (int i = 0; i < m->n_layer; i++) {
    HnLayer *l = &m->layers[i];
    char name[96];
#define W(field, suffix, a0, a1) \
    snprintf(name, sizeof name, "blk.%d." suffix ".weight", i); \
    if (!(l->field = weight(g, name, a0, a1, false, err))) goto fail;
#define V(field, suffix, kind, n, opt) \
    snprintf(name, sizeof name, "blk.%d." suffix "." kind, i); \
    l->field = vector(g, name, n, opt, &failed, err); \
    if (failed) goto fail;
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", i);
    if (tr->fused_qkv && hn_gguf_find_tensor(g, name)) {
      const HnGgufTensor *qkv = weight(g, name, m->n_embd, q_dim + 2 * kv_dim, false, err);
      if (!qkv)
        goto fail;
      row_view(qkv, 0, q_dim, &l->q_view);
      row_view(qkv, q_dim, kv_dim, &l->k_view);
      row_view(qkv, q_dim + kv_dim, kv_dim, &l->v_view);
      l->wq = &l->q_view;
      l->wk = &l->k_view;
      l->wv = &l->v_view;
    } else {
      W(wq, "attn_q", m->n_embd, q_dim)
      W(wk, "attn_k", m->n_embd, kv_dim)
      W(wv, "attn_v", m->n_embd, kv_dim)
    }
    W(wo, "attn_output", q_dim, m->n_embd)
    if (tr->fused_gate_up) {
      const HnGgufTensor *up;
      W(w_up, "ffn_up", m->n_embd, 2 * m->n_ff)
      up = l->w_up;
      row_view(up, 0, m->n_ff, &l->gate_view);
      row_view(up, m->n_ff, m->n_ff, &l->up_view);
      l->w_gate = &l->gate_view;
      l->w_up = &l->up_view;
    } else if (moe) {
      if (!load_moe_layer(m, i, l, err))
        goto fail;
    } else {
      W(w_gate, "ffn_gate", m->n_embd, m->n_ff)
      W(w_up, "ffn_up", m->n_embd, m->n_ff)
    }
    if (!moe) {
      W(w_down, "ffn_down", m->n_ff, m->n_embd)
    }
    V(attn_norm, "attn_norm", "weight", m->n_embd, false)
    V(ffn_norm, "ffn_norm", "weight", m->n_embd, false)
    if (tr->post_norms) {
      V(attn_post_norm, "post_attention_norm", "weight", m->n_embd, false)
      V(ffn_post_norm, "post_ffw_norm", "weight", m->n_embd, false)
    }
    if (tr->qk_norm) {
      V(q_norm, "attn_q_norm", "weight", m->head_dim, false)
      V(k_norm, "attn_k_norm", "weight", m->head_dim, false)
    }
    if (tr->qkv_bias) {
      V(bq, "attn_q", "bias", q_dim, true)
      V(bk, "attn_k", "bias", kv_dim, true)
      V(bv, "attn_v", "bias", kv_dim, true)
    }
    l->sliding = m->swa_window > 0 && hn_arch_layer_is_sliding(tr, i);
    m->layer_sliding[i] = l->sliding;
    m->n_sliding += l->sliding;
#undef W
#undef V
  }
  hn_error_clear(err);
  for (int64_t i = 0; i < hn_gguf_n_tensors(g); i++) {
    const HnGgufTensor *t = hn_gguf_tensor(g, i);
    if (strcmp(t->name, "rope_freqs.weight") == 0 || strncmp(t->name, "rope_factors_", 13) == 0)
      continue;
    m->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
  }
  hn_model_regroup_weights(m);
  return m;
fail:
  hn_model_free(m);
  return NULL;
}

const char *hn_model_arch(const HnModel *m) { return m->arch; }
int hn_model_n_vocab(const HnModel *m) { return m->n_vocab; }
int hn_model_n_ctx_train(const HnModel *m) { return m->n_ctx_train; }
int hn_model_n_embd(const HnModel *m) { return m->n_embd; }
int hn_model_n_layer(const HnModel *m) { return m->n_layer; }
int64_t hn_model_n_params(const HnModel *m) { return m->n_params; }
int hn_model_n_expert(const HnModel *m) { return m->n_expert; }
int hn_model_n_expert_used(const HnModel *m) { return m->n_expert_used; }
size_t hn_model_file_size(const HnModel *m) { return hn_gguf_file_size(m->gguf); }

uint64_t
hn_model_resident_bytes(const HnModel *m)
{
  /* Every tensor is read for every token, so all of the mapping ends up in memory. */
  uint64_t bytes = 0;
  for (int64_t i = 0; i < hn_gguf_n_tensors(m->gguf); i++)
    bytes += hn_gguf_tensor(m->gguf, i)->nbytes;
  uint64_t kv_dim = (uint64_t) m->n_head_kv * (uint64_t) m->head_dim;
  bytes += ((uint64_t) m->n_layer * 2 + 1) * (uint64_t) m->n_embd * sizeof(float);
  uint64_t q_dim = (uint64_t) m->n_head * (uint64_t) m->head_dim;
  for (int l = 0; l < m->n_layer; l++) {
    const HnLayer *L = &m->layers[l];
    if (L->bq)
      bytes += (q_dim + 2 * kv_dim) * sizeof(float);
    if (L->attn_post_norm)
      bytes += 2 * (uint64_t) m->n_embd * sizeof(float);
    if (L->q_norm)
      bytes += 2 * (uint64_t) m->head_dim * sizeof(float);
    if (L->shexp_gate)
      bytes += (uint64_t) m->n_embd * sizeof(float);
  }
  uint64_t n_factors = (m->rope_factors != NULL) + (m->rope_long != NULL) + (m->rope_short != NULL);
  bytes += n_factors * (uint64_t) (m->rope.n_rot / 2) * sizeof(float);
  return bytes;
}
const HnGguf *hn_model_gguf(const HnModel *m) { return m->gguf; }

void
hn_model_describe(const HnModel *m, HnModelDescription *d)
{
  *d = (HnModelDescription) {
    .n_layer = m->n_layer, .n_embd = m->n_embd, .n_ff = m->n_ff, .n_head = m->n_head,
    .n_head_kv = m->n_head_kv, .head_dim = m->head_dim,
    .sliding_window = m->n_sliding ? m->swa_window : 0, .n_sliding = m->n_sliding,
    .layer_sliding = m->layer_sliding,
    .attn_softcap = m->attn_softcap, .final_softcap = m->final_softcap,
    .qk_norm = m->traits->qk_norm, .neox_rope = m->rope.neox, .rope_dims = m->rope.n_rot,
    .rope_base = m->rope.freq_base, .rope_linear_factor = 1.0f / m->rope.freq_scale,
    .rope_local_base = m->n_sliding && m->traits->swa_local_rope ? m->rope_local.freq_base : 0.0f,
    .rope_long_short = m->rope_long != NULL, .rope_freq_factors = m->rope_factors != NULL,
    .n_expert = m->n_expert, .n_expert_used = m->n_expert_used,
  };
}

static void
count_types(const HnModel *m, int64_t counts[HN_TYPE_COUNT], int64_t elems[HN_TYPE_COUNT])
{
  memset(counts, 0, sizeof(int64_t) * HN_TYPE_COUNT);
  memset(elems, 0, sizeof(int64_t) * HN_TYPE_COUNT);
  for (int64_t i = 0; i < hn_gguf_n_tensors(m->gguf); i++) {
    const HnGgufTensor *t = hn_gguf_tensor(m->gguf, i);
    if (t->type < HN_TYPE_COUNT) {
      counts[t->type]++;
      elems[t->type] += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
  }
}

uint32_t
hn_model_main_type(const HnModel *m)
{
  return hn_gguf_main_weight_type(m->gguf);
}

void
hn_model_type_summary(const HnModel *m, char *buf, size_t size)
{
  int64_t counts[HN_TYPE_COUNT], elems[HN_TYPE_COUNT];
  count_types(m, counts, elems);
  size_t used = 0;
  buf[0] = '\0';
  for (;;) {
    int best = -1;
    for (int t = 0; t < HN_TYPE_COUNT; t++)
      if (counts[t] > 0 && (best < 0 || counts[t] > counts[best]))
        best = t;
    if (best < 0)
      break;
    int n = snprintf(buf + used, size - used, "%s%s (%lld tensors)", used ? ", " : "",
                     hn_type_name((uint32_t) best), (long long) counts[best]);
    if (n < 0 || (size_t) n >= size - used)
      break;
    used += (size_t) n;
    counts[best] = 0;
  }
}
