/* Mixture of experts: the routing rule on its own, and tiny qwen2moe / qwen3moe models
 * written here whose router is built to pick known experts.  The logits are checked
 * against a forward pass computed in this file from the same weights, changing one
 * expert's weights must change exactly the tokens routed to it, and a batch (grouped by
 * expert) must give what the tokens give one at a time.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "hn-context.h"
#include "hn-gguf-writer.h"
#include "hn-model-internal.h" /* the layers' expert tensors, where the load put them */
#include "hn-moe.h"
#include "rel-diff.h"

/* ---- the routing rule ---- */

static void
test_route(void)
{
  /* two tokens, five experts */
  float logits[2][5] = { { 0.5f, 2.0f, -1.0f, 1.0f, 2.0f }, { 3.0f, 0.0f, 0.0f, 0.0f, 0.0f } };
  float copy[2][5];
  int32_t choice[2][3];
  float weight[2][3], lead[2];
  for (int norm = 0; norm < 2; norm++) {
    memcpy(copy, logits, sizeof copy);
    hn_moe_route(&copy[0][0], 2, 5, 3, norm, &choice[0][0], &weight[0][0], lead);
    /* the third choice against the best expert left out, in router logits */
    g_assert_cmpfloat_with_epsilon(lead[0], 1.0 - 0.5, 1e-5);
    g_assert_cmpfloat_with_epsilon(lead[1], 0.0, 1e-6);
    for (int t = 0; t < 2; t++) {
      double z = 0.0;
      for (int e = 0; e < 5; e++)
        z += exp(logits[t][e]);
      /* token 0: experts 1 and 4 tie (the lower index first), then 3 */
      const int expected[2][3] = { { 1, 4, 3 }, { 0, 1, 2 } };
      double chosen = 0.0;
      for (int j = 0; j < 3; j++)
        chosen += exp(logits[t][expected[t][j]]) / z;
      for (int j = 0; j < 3; j++) {
        g_assert_cmpint(choice[t][j], ==, expected[t][j]);
        double p = exp(logits[t][expected[t][j]]) / z;
        g_assert_cmpfloat_with_epsilon(weight[t][j], norm ? p / chosen : p, 1e-6);
      }
    }
  }
  /* a single expert per token gets weight 1 when renormalised */
  float one[4] = { 0.1f, 0.7f, 0.3f, -2.0f };
  int32_t c1;
  float w1;
  float lead1;
  hn_moe_route(one, 1, 4, 1, true, &c1, &w1, &lead1);
  g_assert_cmpint(c1, ==, 1);
  g_assert_cmpfloat(w1, ==, 1.0f);
  g_assert_cmpfloat_with_epsilon(lead1, 0.7 - 0.3, 1e-5);
  /* every expert used: nothing was left out */
  float all[2] = { 0.0f, 1.0f };
  int32_t c2[2];
  float w2[2], lead2;
  hn_moe_route(all, 1, 2, 2, false, c2, w2, &lead2);
  g_assert_cmpfloat(lead2, ==, INFINITY);
  hn_moe_route(all, 1, 2, 2, false, c2, w2, NULL);
  g_assert_cmpint(c2[0], ==, 1);
}

/* ---- tiny models ---- */

enum { E = 32, HEADS = 2, HEAD_DIM = 16, V = 8, X = 4, K = 2, F = 32, S = 32, N_TOK = 8 };

typedef struct {
  const char *arch;
  bool shared, norm_weights, qk_norm;
} Arch;

static const Arch arches[] = {
  { "qwen2moe", true, false, false },
  { "qwen3moe", false, true, true },
};

/* The weights, generated once per architecture; the file writer and the reference
 * forward pass below both read them. */
typedef struct {
  float embd[V][E];
  float wq[HEADS * HEAD_DIM][E], wk[HEAD_DIM][E], wv[HEAD_DIM][E];
  float router[X][E];
  float gate[X][F][E], up[X][F][E], down[X][E][F];
  float sh_gate_inp[E], sh_gate[S][E], sh_up[S][E], sh_down[E][S];
  float output[V][E];
} Weights;

/* Token v's embedding points at experts a_v and b_v (1, then 0.5; nothing at the others):
 * with the router rows 0.5·e_x the two win clearly and both carry weight. */
static const int pair[V][2] = { { 0, 1 }, { 2, 3 }, { 1, 2 }, { 3, 0 }, { 0, 2 }, { 1, 3 }, { 2, 0 }, { 3, 1 } };

static void
fill(GRand *r, float *x, size_t n, double scale)
{
  for (size_t i = 0; i < n; i++)
    x[i] = (float) g_rand_double_range(r, -scale, scale);
}

static Weights *
make_weights(void)
{
  Weights *w = g_new0(Weights, 1);
  GRand *r = g_rand_new_with_seed(17);
  for (int v = 0; v < V; v++) {
    fill(r, w->embd[v] + X, E - X, 0.3);
    w->embd[v][pair[v][0]] = 1.0f;
    w->embd[v][pair[v][1]] = 0.5f;
  }
  fill(r, &w->wq[0][0], sizeof w->wq / sizeof(float), 0.3);
  fill(r, &w->wk[0][0], sizeof w->wk / sizeof(float), 0.3);
  fill(r, &w->wv[0][0], sizeof w->wv / sizeof(float), 0.3);
  for (int x = 0; x < X; x++)
    w->router[x][x] = 0.5f;
  fill(r, &w->gate[0][0][0], sizeof w->gate / sizeof(float), 0.4);
  fill(r, &w->up[0][0][0], sizeof w->up / sizeof(float), 0.4);
  fill(r, &w->down[0][0][0], sizeof w->down / sizeof(float), 0.4);
  fill(r, w->sh_gate_inp, E, 0.3);
  fill(r, &w->sh_gate[0][0], sizeof w->sh_gate / sizeof(float), 0.4);
  fill(r, &w->sh_up[0][0], sizeof w->sh_up / sizeof(float), 0.4);
  fill(r, &w->sh_down[0][0], sizeof w->sh_down / sizeof(float), 0.4);
  fill(r, &w->output[0][0], sizeof w->output / sizeof(float), 0.5);
  g_rand_free(r);
  return w;
}

static void
add_tensor(HnGgufWriter *g, const char *name, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2)
{
  HnError err = { 0 };
  int64_t ne[3] = { ne0, ne1, ne2 };
  if (!hn_gguf_writer_add_tensor(g, name, HN_TYPE_F32, (uint32_t) n_dims, ne, &err))
    g_error("%s: %s", name, err.message);
}

static void
put(HnGgufWriter *g, const float *x, size_t n)
{
  HnError err = { 0 };
  if (!hn_gguf_writer_write(g, x, n * sizeof(float), &err))
    g_error("write: %s", err.message);
}

/* Writes the model; expert `boosted` (or none: -1) has its down matrix doubled. */
static char *
write_model(const Arch *a, const Weights *w, int boosted, const char *dir)
{
  char *path = g_strdup_printf("%s/%s-%d.gguf", dir, a->arch, boosted);
  HnError err = { 0 };
  HnGgufWriter *g = hn_gguf_writer_new(&err);
  char key[96];
#define KEY(suffix) (g_snprintf(key, sizeof key, "%s.%s", a->arch, suffix), key)
  gboolean ok = hn_gguf_writer_set_str(g, "general.architecture", a->arch, &err) &&
                hn_gguf_writer_set_u32(g, KEY("context_length"), 64, &err) &&
                hn_gguf_writer_set_u32(g, KEY("embedding_length"), E, &err) &&
                hn_gguf_writer_set_u32(g, KEY("block_count"), 1, &err) &&
                hn_gguf_writer_set_u32(g, KEY("feed_forward_length"), F, &err) &&
                hn_gguf_writer_set_u32(g, KEY("attention.head_count"), HEADS, &err) &&
                hn_gguf_writer_set_u32(g, KEY("attention.head_count_kv"), 1, &err) &&
                hn_gguf_writer_set_u32(g, KEY("attention.key_length"), HEAD_DIM, &err) &&
                hn_gguf_writer_set_u32(g, KEY("attention.value_length"), HEAD_DIM, &err) &&
                hn_gguf_writer_set_f32(g, KEY("attention.layer_norm_rms_epsilon"), 1e-6f, &err) &&
                hn_gguf_writer_set_f32(g, KEY("rope.freq_base"), 10000.0f, &err) &&
                hn_gguf_writer_set_u32(g, KEY("expert_count"), X, &err) &&
                hn_gguf_writer_set_u32(g, KEY("expert_used_count"), K, &err) &&
                hn_gguf_writer_set_u32(g, KEY("expert_feed_forward_length"), F, &err) &&
                (!a->shared || hn_gguf_writer_set_u32(g, KEY("expert_shared_feed_forward_length"), S, &err));
#undef KEY
  if (!ok)
    g_error("metadata: %s", err.message);
  add_tensor(g, "token_embd.weight", 2, E, V, 1);
  add_tensor(g, "blk.0.attn_norm.weight", 1, E, 1, 1);
  add_tensor(g, "blk.0.attn_q.weight", 2, E, HEADS * HEAD_DIM, 1);
  add_tensor(g, "blk.0.attn_k.weight", 2, E, HEAD_DIM, 1);
  add_tensor(g, "blk.0.attn_v.weight", 2, E, HEAD_DIM, 1);
  if (a->qk_norm) {
    add_tensor(g, "blk.0.attn_q_norm.weight", 1, HEAD_DIM, 1, 1);
    add_tensor(g, "blk.0.attn_k_norm.weight", 1, HEAD_DIM, 1, 1);
  }
  add_tensor(g, "blk.0.attn_output.weight", 2, HEADS * HEAD_DIM, E, 1);
  add_tensor(g, "blk.0.ffn_norm.weight", 1, E, 1, 1);
  add_tensor(g, "blk.0.ffn_gate_inp.weight", 2, E, X, 1);
  add_tensor(g, "blk.0.ffn_gate_exps.weight", 3, E, F, X);
  add_tensor(g, "blk.0.ffn_up_exps.weight", 3, E, F, X);
  add_tensor(g, "blk.0.ffn_down_exps.weight", 3, F, E, X);
  if (a->shared) {
    add_tensor(g, "blk.0.ffn_gate_inp_shexp.weight", 1, E, 1, 1);
    add_tensor(g, "blk.0.ffn_gate_shexp.weight", 2, E, S, 1);
    add_tensor(g, "blk.0.ffn_up_shexp.weight", 2, E, S, 1);
    add_tensor(g, "blk.0.ffn_down_shexp.weight", 2, S, E, 1);
  }
  add_tensor(g, "output_norm.weight", 1, E, 1, 1);
  add_tensor(g, "output.weight", 2, E, V, 1);
  if (!hn_gguf_writer_begin(g, path, &err))
    g_error("begin: %s", err.message);

  float ones[E], zeros[HEADS * HEAD_DIM * E] = { 0 };
  for (int i = 0; i < E; i++)
    ones[i] = 1.0f;
  put(g, &w->embd[0][0], V * E);
  put(g, ones, E);
  put(g, &w->wq[0][0], HEADS * HEAD_DIM * E);
  put(g, &w->wk[0][0], HEAD_DIM * E);
  put(g, &w->wv[0][0], HEAD_DIM * E);
  if (a->qk_norm) {
    put(g, ones, HEAD_DIM);
    put(g, ones, HEAD_DIM);
  }
  /* no attention output: the FFN sees each token's own embedding, so the test knows
   * exactly what the router sees */
  put(g, zeros, HEADS * HEAD_DIM * E);
  put(g, ones, E);
  put(g, &w->router[0][0], X * E);
  put(g, &w->gate[0][0][0], X * F * E);
  put(g, &w->up[0][0][0], X * F * E);
  for (int x = 0; x < X; x++) {
    float down[E][F];
    memcpy(down, w->down[x], sizeof down);
    if (x == boosted)
      for (int i = 0; i < E * F; i++)
        (&down[0][0])[i] *= 2.0f;
    put(g, &down[0][0], E * F);
  }
  if (a->shared) {
    put(g, w->sh_gate_inp, E);
    put(g, &w->sh_gate[0][0], S * E);
    put(g, &w->sh_up[0][0], S * E);
    put(g, &w->sh_down[0][0], E * S);
  }
  put(g, ones, E);
  put(g, &w->output[0][0], V * E);
  if (!hn_gguf_writer_finish(g, &err))
    g_error("finish: %s", err.message);
  hn_gguf_writer_free(g);
  return path;
}

static void
rms_norm(const double *x, double *y, int n)
{
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += x[i] * x[i];
  double scale = 1.0 / sqrt(s / n + 1e-6);
  for (int i = 0; i < n; i++)
    y[i] = x[i] * scale;
}

static double
silu(double g)
{
  return g / (1.0 + exp(-g));
}

/* The logits of token v, in double, from the weights: attention adds nothing, so the
 * layer is x + MoE(rmsnorm(x)).  Also returns the two experts chosen and by how much the
 * second one's router logit beat the best expert left out. */
static void
reference_logits(const Arch *a, const Weights *w, int v, double *logits, int chosen[K], double *lead)
{
  double x[E], xn[E], h[E];
  for (int i = 0; i < E; i++)
    h[i] = x[i] = w->embd[v][i];
  rms_norm(x, xn, E);
  double p[X], z = 0.0, mx = -INFINITY;
  for (int e = 0; e < X; e++) {
    p[e] = 0.0;
    for (int i = 0; i < E; i++)
      p[e] += w->router[e][i] * xn[i];
    mx = fmax(mx, p[e]);
  }
  for (int e = 0; e < X; e++)
    z += p[e] = exp(p[e] - mx);
  bool used[X] = { false };
  double wsum = 0.0;
  for (int j = 0; j < K; j++) {
    int best = -1;
    for (int e = 0; e < X; e++)
      if (!used[e] && (best < 0 || p[e] > p[best]))
        best = e;
    used[best] = true;
    chosen[j] = best;
    wsum += p[best] / z;
  }
  double best_left = 0.0;
  for (int e = 0; e < X; e++)
    if (!used[e])
      best_left = fmax(best_left, p[e]);
  *lead = log(p[chosen[K - 1]] / best_left);
  for (int j = 0; j < K; j++) {
    int e = chosen[j];
    double weight = p[e] / z / (a->norm_weights ? wsum : 1.0), act[F];
    for (int f = 0; f < F; f++) {
      double g = 0.0, u = 0.0;
      for (int i = 0; i < E; i++) {
        g += w->gate[e][f][i] * xn[i];
        u += w->up[e][f][i] * xn[i];
      }
      act[f] = silu(g) * u;
    }
    for (int i = 0; i < E; i++) {
      double d = 0.0;
      for (int f = 0; f < F; f++)
        d += w->down[e][i][f] * act[f];
      h[i] += weight * d;
    }
  }
  if (a->shared) {
    double gate = 0.0, act[S];
    for (int i = 0; i < E; i++)
      gate += w->sh_gate_inp[i] * xn[i];
    gate = 1.0 / (1.0 + exp(-gate));
    for (int f = 0; f < S; f++) {
      double g = 0.0, u = 0.0;
      for (int i = 0; i < E; i++) {
        g += w->sh_gate[f][i] * xn[i];
        u += w->sh_up[f][i] * xn[i];
      }
      act[f] = silu(g) * u;
    }
    for (int i = 0; i < E; i++) {
      double d = 0.0;
      for (int f = 0; f < S; f++)
        d += w->sh_down[i][f] * act[f];
      h[i] += gate * d;
    }
  }
  double hn[E];
  rms_norm(h, hn, E);
  for (int o = 0; o < V; o++) {
    logits[o] = 0.0;
    for (int i = 0; i < E; i++)
      logits[o] += w->output[o][i] * hn[i];
  }
}

static const int32_t tokens[N_TOK] = { 3, 0, 5, 1, 7, 2, 6, 4 };

/* Logits of the N_TOK tokens: in one batch, or one decode call per token; and each
 * token's routing lead. */
static void
run_model(const char *path, bool one_by_one, float out[N_TOK][V], float lead[N_TOK])
{
  HnError err = { 0 };
  HnModel *m = hn_model_load(path, NULL, &err);
  if (!m)
    g_error("%s: %s", path, err.message);
  g_assert_cmpint(hn_model_n_expert(m), ==, X);
  g_assert_cmpint(hn_model_n_expert_used(m), ==, K);
  HnContextParams p = hn_context_default_params();
  p.n_ctx = 32;
  p.n_threads = 2;
  HnContext *c = hn_context_new(m, &p, &err);
  g_assert_nonnull(c);
  int32_t pos[N_TOK];
  bool want[N_TOK];
  for (int i = 0; i < N_TOK; i++) {
    pos[i] = i;
    want[i] = true;
  }
  if (one_by_one) {
    for (int i = 0; i < N_TOK; i++) {
      HnBatch b = { .n_tokens = 1, .token = tokens + i, .pos = pos + i };
      g_assert_true(hn_context_decode(c, &b, &err));
      memcpy(out[i], hn_context_get_logits(c, 0), sizeof out[i]);
      lead[i] = hn_context_routing_lead(c, 0);
    }
  } else {
    HnBatch b = { .n_tokens = N_TOK, .token = tokens, .pos = pos, .want_logits = want };
    g_assert_true(hn_context_decode(c, &b, &err));
    for (int i = 0; i < N_TOK; i++) {
      memcpy(out[i], hn_context_get_logits(c, i), sizeof out[i]);
      lead[i] = hn_context_routing_lead(c, i);
    }
    g_assert_true(isnan(hn_context_routing_lead(c, N_TOK)));
  }
  hn_context_free(c);
  hn_model_free(m);
}

/* The experts are copied at load into huge pages as the dense matrices are (a decode
 * step reads a few experts' rows spread over the whole stack, a page walk every 4 KiB
 * from the file's pages), holding the file's bytes. */
static void
assert_experts_placed(const char *path)
{
  HnError err = { 0 };
  HnModel *m = hn_model_load(path, NULL, &err);
  if (!m)
    g_error("%s: %s", path, err.message);
  g_assert_cmpint(m->n_placed, >, 0);
  for (int il = 0; il < hn_model_n_layer(m); il++) {
    const HnMoeLayer *x = &m->layers[il].moe;
    const HnGgufTensor *stacks[] = { x->router, x->gate_exps, x->up_exps, x->down_exps };
    for (gsize i = 0; i < G_N_ELEMENTS(stacks); i++) {
      const HnGgufTensor *f = hn_gguf_find_tensor(hn_model_gguf(m), stacks[i]->name);
      g_assert_nonnull(f);
      g_assert_true(stacks[i] != f);
      g_assert_cmpint(stacks[i]->ne[2], ==, f->ne[2]);
      g_assert_cmpmem(stacks[i]->data, stacks[i]->nbytes, f->data, f->nbytes);
    }
  }
  hn_model_free(m);
}

static void
test_model(gconstpointer data)
{
  const Arch *a = data;
  g_autoptr(GError) gerr = NULL;
  g_autofree char *dir = g_dir_make_tmp("hanashi-moe-XXXXXX", &gerr);
  g_assert_no_error(gerr);
  Weights *w = make_weights();
  g_autofree char *base = write_model(a, w, -1, dir);

  /* the logits follow the weights through the chosen experts, with the router weights
   * this architecture defines */
  float batch[N_TOK][V], single[N_TOK][V], lead[N_TOK], lead_single[N_TOK];
  run_model(base, false, batch, lead);
  for (int i = 0; i < N_TOK; i++) {
    double ref[V], ref_lead;
    int chosen[K];
    reference_logits(a, w, tokens[i], ref, chosen, &ref_lead);
    g_assert_cmpfloat_with_epsilon(lead[i], ref_lead, 1e-4);
    /* the router picks the experts the embedding points at */
    g_assert_cmpint(chosen[0], ==, pair[tokens[i]][0]);
    g_assert_cmpint(chosen[1], ==, pair[tokens[i]][1]);
    float reff[V];
    for (int o = 0; o < V; o++)
      reff[o] = (float) ref[o];
    double d = rel_diff(reff, batch[i], V);
    if (d > 1e-4)
      g_error("%s token %d: logits differ from the reference forward pass by %g", a->arch, tokens[i], d);
  }

  /* placed at load, with the logits of the file's own pages */
  if (!g_getenv("HANASHI_REGROUP")) {
    assert_experts_placed(base);
    float from_file[N_TOK][V], lead_file[N_TOK];
    g_setenv("HANASHI_REGROUP", "0", TRUE);
    run_model(base, false, from_file, lead_file);
    g_unsetenv("HANASHI_REGROUP");
    g_assert_true(memcmp(from_file, batch, sizeof batch) == 0);
  }

  /* the batch, grouped by expert, gives what each token gives alone */
  run_model(base, true, single, lead_single);
  for (int i = 0; i < N_TOK; i++) {
    g_assert_cmpfloat(rel_diff(single[i], batch[i], V), <, 1e-5);
    g_assert_cmpfloat_with_epsilon(lead_single[i], lead[i], 1e-5);
  }

  /* doubling expert x's down matrix changes the tokens routed to x and no other */
  for (int x = 0; x < X; x++) {
    g_autofree char *path = write_model(a, w, x, dir);
    float boosted[N_TOK][V], boosted_lead[N_TOK];
    run_model(path, false, boosted, boosted_lead);
    for (int i = 0; i < N_TOK; i++) {
      bool routed = pair[tokens[i]][0] == x || pair[tokens[i]][1] == x;
      if (routed)
        g_assert_cmpfloat(rel_diff(batch[i], boosted[i], V), >, 1e-3);
      else
        g_assert_true(memcmp(batch[i], boosted[i], sizeof batch[i]) == 0);
    }
    g_assert_cmpint(g_remove(path), ==, 0);
  }
  g_assert_cmpint(g_remove(base), ==, 0);
  g_assert_cmpint(g_rmdir(dir), ==, 0);
  g_free(w);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/moe/route", test_route);
  for (gsize i = 0; i < G_N_ELEMENTS(arches); i++) {
    g_autofree char *path = g_strdup_printf("/moe/model/%s", arches[i].arch);
    g_test_add_data_func(path, &arches[i], test_model);
  }
  return g_test_run();
}
