/* hanashi-cli make-model --shape NAME --type TYPE -o FILE [--vocab VOCAB.gguf]
 *                        [--seed N] [-t THREADS] [--layers N] [--ctx N]
 *
 * Writes a GGUF model of a realistic shape with random weights, for benchmarks: random
 * weights cost exactly what trained ones cost.  The vocabulary (tokenizer.* metadata) is
 * copied from a vocabulary GGUF and padded with unused tokens up to the shape's size.
 * The weights are generated as F16 into a temporary file next to FILE and then converted
 * with the same code as `hanashi-cli quantize`, so every type and mix it knows works.
 * --layers N keeps the first N layers of the shape (every layer has the same shape), for
 * shapes whose full file is larger than the machine at hand.  --ctx N writes N as the
 * context length instead of the shape's, so that a small shape can be measured deep
 * into a long context (bench -d refuses depths beyond the file's context).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "cli-common.h"

#include "hn-gguf-writer.h"
#include "hn-quantize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_make_model(int argc, char **argv);

typedef struct {
  const char *name;
  const char *arch;
  uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
  float rope_base, rms_eps;
  bool qkv_bias, tied;
  /* the further architectures (hn-arch.h); zero for llama/qwen2 */
  uint32_t head_dim;      /* 0: n_embd / n_head */
  uint32_t rope_dims;     /* 0: the whole head */
  uint32_t window;        /* attention.sliding_window, 0: none */
  bool qk_norm;           /* attn_q_norm / attn_k_norm */
  bool post_norms;        /* gemma's post_attention_norm / post_ffw_norm */
  bool fused;             /* phi3: attn_qkv and gate+up in ffn_up */
  uint32_t n_ctx_orig;    /* phi3 long/short rope factors above this context, 0: none */
  /* mixture of experts (n_expert 0: a dense feed-forward of n_ff) */
  uint32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
} ModelShape;

static const ModelShape shapes[] = {
  { "tinyllama-1.1b", "llama", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f, false, false },
  { "llama-3.2-1b", "llama", 2048, 16, 32, 8, 8192, 128256, 8192, 500000.0f, 1e-5f, false, true },
  { "qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 4864, 151936, 32768, 1000000.0f, 1e-6f, true, true },
  /* small enough for tests: every feature of the big shapes at a few megabytes */
  { "test-tiny", "llama", 128, 2, 4, 2, 352, 0, 512, 10000.0f, 1e-5f, false, false },
  { "test-tiny-qwen2", "qwen2", 128, 2, 4, 2, 352, 0, 512, 1000000.0f, 1e-6f, true, true },
  /* Qwen3-0.6B: head size 128 (16 × 128 ≠ 1024), q/k norms, no biases */
  { "qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 3072, 151936, 40960, 1000000.0f, 1e-6f, false, true,
    .head_dim = 128, .qk_norm = true },
  /* Gemma 3 1B: one KV head of 256, five 512-token sliding layers to one global */
  { "gemma3-1b", "gemma3", 1152, 26, 4, 1, 6912, 262144, 32768, 1000000.0f, 1e-6f, false, true,
    .head_dim = 256, .window = 512, .qk_norm = true, .post_norms = true },
  /* Phi-4-mini: fused projections, 96 of 128 dimensions rotated, long/short rope factors
   * (its sliding_window of 262144 exceeds the context: no window) */
  { "phi4-mini", "phi3", 3072, 32, 24, 8, 8192, 200064, 131072, 10000.0f, 1e-5f, false, true,
    .rope_dims = 96, .window = 262144, .fused = true, .n_ctx_orig = 4096 },
  /* small enough for tests, with every feature of the shapes above */
  { "test-tiny-qwen3", "qwen3", 128, 2, 4, 2, 256, 0, 512, 1000000.0f, 1e-6f, false, true,
    .head_dim = 64, .qk_norm = true },
  { "test-tiny-gemma3", "gemma3", 128, 6, 4, 1, 256, 0, 512, 1000000.0f, 1e-6f, false, true,
    .head_dim = 64, .window = 16, .qk_norm = true, .post_norms = true },
  { "test-tiny-phi3", "phi3", 128, 2, 4, 2, 256, 0, 512, 10000.0f, 1e-5f, false, true,
    .rope_dims = 24, .window = 32, .fused = true, .n_ctx_orig = 128 },
  /* Qwen3-30B-A3B: 128 experts of which 8 per token; the dense shape after it has the
   * same attention and a feed-forward as wide as the 8 experts together, i.e. the same
   * weights read per token: the yardstick for how fast the experts run */
  { "qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 6144, 151936, 40960, 1000000.0f, 1e-6f, false, false,
    .head_dim = 128, .qk_norm = true, .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768 },
  { "qwen3-30b-a3b-dense", "qwen3", 2048, 48, 32, 4, 8 * 768, 151936, 40960, 1000000.0f, 1e-6f, false, false,
    .head_dim = 128, .qk_norm = true },
  { "test-tiny-qwen3moe", "qwen3moe", 128, 2, 4, 2, 256, 0, 512, 1000000.0f, 1e-6f, false, false,
    .head_dim = 64, .qk_norm = true, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 64 },
  { "test-tiny-qwen2moe", "qwen2moe", 128, 2, 4, 2, 256, 0, 512, 1000000.0f, 1e-6f, true, false,
    .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 64, .n_ff_shexp = 128 },
  { NULL },
};

/* xoshiro128+ and a Box-Muller normal: fast enough to fill a billion weights. */
typedef struct {
  uint32_t s[4];
} Rng;

static uint32_t
rotl(uint32_t x, int k)
{
  return (x << k) | (x >> (32 - k));
}

static uint32_t
rng_next(Rng *r)
{
  uint32_t result = r->s[0] + r->s[3];
  uint32_t t = r->s[1] << 9;
  r->s[2] ^= r->s[0];
  r->s[3] ^= r->s[1];
  r->s[1] ^= r->s[2];
  r->s[0] ^= r->s[3];
  r->s[2] ^= t;
  r->s[3] = rotl(r->s[3], 11);
  return result;
}

static void
rng_seed(Rng *r, uint64_t seed)
{
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < 4; i++) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    r->s[i] = (uint32_t)(z >> 32) | 1u;
  }
}

static float
rng_uniform(Rng *r)
{
  return ((float)(rng_next(r) >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

static void
fill_normal(Rng *r, float *x, int64_t n, float mean, float stddev)
{
  for (int64_t i = 0; i < n; i += 2) {
    float u1 = rng_uniform(r), u2 = rng_uniform(r);
    float radius = sqrtf(-2.0f * logf(u1)) * stddev;
    x[i] = mean + radius * cosf(6.2831853f * u2);
    if (i + 1 < n)
      x[i + 1] = mean + radius * sinf(6.2831853f * u2);
  }
}

typedef struct {
  char name[64];
  bool is_vector;
  bool keep_f32; /* written as F32, which quantizing leaves alone (MoE routers) */
  int64_t ne[3]; /* ne[2] > 1: one matrix per expert */
} TensorPlan;

static int
plan_tensors(const ModelShape *shape, uint32_t n_vocab, TensorPlan *plan)
{
  const int64_t embd = shape->n_embd;
  const int64_t head_dim = shape->head_dim ? shape->head_dim : shape->n_embd / shape->n_head;
  const int64_t kv = head_dim * shape->n_head_kv, q = head_dim * shape->n_head;
  const int64_t rope_dims = shape->rope_dims ? shape->rope_dims : head_dim;
  const int64_t n_exp = shape->n_expert, ff_exp = shape->n_ff_exp, ff_sh = shape->n_ff_shexp;
  int n = 0;
#define ADD3(vec, a, b, c, ...)                                              \
  do {                                                                       \
    snprintf(plan[n].name, sizeof plan[n].name, __VA_ARGS__);                \
    plan[n].is_vector = (vec);                                               \
    plan[n].keep_f32 = false;                                                \
    plan[n].ne[0] = (a);                                                     \
    plan[n].ne[1] = (b);                                                     \
    plan[n].ne[2] = (c);                                                     \
    n++;                                                                     \
  } while (0)
#define ADD(vec, a, b, ...) ADD3(vec, a, b, 1, __VA_ARGS__)
  ADD(false, embd, n_vocab, "token_embd.weight");
  if (shape->n_ctx_orig) {
    ADD(true, rope_dims / 2, 1, "rope_factors_long.weight");
    ADD(true, rope_dims / 2, 1, "rope_factors_short.weight");
  }
  for (uint32_t l = 0; l < shape->n_layer; l++) {
    ADD(true, embd, 1, "blk.%u.attn_norm.weight", l);
    if (shape->fused) {
      ADD(false, embd, q + 2 * kv, "blk.%u.attn_qkv.weight", l);
    } else {
      ADD(false, embd, q, "blk.%u.attn_q.weight", l);
      ADD(false, embd, kv, "blk.%u.attn_k.weight", l);
      ADD(false, embd, kv, "blk.%u.attn_v.weight", l);
    }
    if (shape->qkv_bias) {
      ADD(true, q, 1, "blk.%u.attn_q.bias", l);
      ADD(true, kv, 1, "blk.%u.attn_k.bias", l);
      ADD(true, kv, 1, "blk.%u.attn_v.bias", l);
    }
    if (shape->qk_norm) {
      ADD(true, head_dim, 1, "blk.%u.attn_q_norm.weight", l);
      ADD(true, head_dim, 1, "blk.%u.attn_k_norm.weight", l);
    }
    ADD(false, q, embd, "blk.%u.attn_output.weight", l);
    if (shape->post_norms)
      ADD(true, embd, 1, "blk.%u.post_attention_norm.weight", l);
    ADD(true, embd, 1, "blk.%u.ffn_norm.weight", l);
    if (n_exp > 0) {
      ADD(false, embd, n_exp, "blk.%u.ffn_gate_inp.weight", l);
      plan[n - 1].keep_f32 = true;
      ADD3(false, embd, ff_exp, n_exp, "blk.%u.ffn_gate_exps.weight", l);
      ADD3(false, embd, ff_exp, n_exp, "blk.%u.ffn_up_exps.weight", l);
      ADD3(false, ff_exp, embd, n_exp, "blk.%u.ffn_down_exps.weight", l);
      if (ff_sh > 0) {
        ADD(true, embd, 1, "blk.%u.ffn_gate_inp_shexp.weight", l);
        ADD(false, embd, ff_sh, "blk.%u.ffn_gate_shexp.weight", l);
        ADD(false, embd, ff_sh, "blk.%u.ffn_up_shexp.weight", l);
        ADD(false, ff_sh, embd, "blk.%u.ffn_down_shexp.weight", l);
      }
    } else if (shape->fused) {
      ADD(false, embd, 2 * (int64_t) shape->n_ff, "blk.%u.ffn_up.weight", l);
    } else {
      ADD(false, embd, shape->n_ff, "blk.%u.ffn_gate.weight", l);
      ADD(false, embd, shape->n_ff, "blk.%u.ffn_up.weight", l);
    }
    if (n_exp == 0)
      ADD(false, shape->n_ff, embd, "blk.%u.ffn_down.weight", l);
    if (shape->post_norms)
      ADD(true, embd, 1, "blk.%u.post_ffw_norm.weight", l);
  }
  ADD(true, embd, 1, "output_norm.weight");
  if (!shape->tied)
    ADD(false, embd, n_vocab, "output.weight");
#undef ADD
#undef ADD3
  return n;
}

static int
max_tensors(const ModelShape *shape)
{
  return 5 + (int)shape->n_layer * 20;
}

/* Copies the tokenizer metadata of `vocab`, padding the token list to `n_vocab`. */
static bool
copy_vocabulary(HnGgufWriter *w, const HnGguf *vocab, uint32_t n_vocab, HnError *err)
{
  HnGgufArray tokens;
  if (!hn_gguf_get_array(vocab, "tokenizer.ggml.tokens", &tokens, err))
    return false;
  if (tokens.type != HN_GGUF_STRING || tokens.count == 0 || tokens.count > n_vocab)
    return hn_error_set(err, HN_ERR_FORMAT, "the vocabulary has %llu tokens, more than the shape's %u",
                        (unsigned long long)tokens.count, n_vocab);
  for (int64_t i = 0; i < hn_gguf_n_kv(vocab); i++) {
    const HnGgufKv *kv = hn_gguf_kv(vocab, i);
    if (kv->key.len > 10 && memcmp(kv->key.data, "tokenizer.", 10) == 0 &&
        !hn_str_eq(kv->key, "tokenizer.ggml.tokens") && !hn_str_eq(kv->key, "tokenizer.ggml.scores") &&
        !hn_str_eq(kv->key, "tokenizer.ggml.token_type") && !hn_gguf_writer_copy_kv(w, vocab, kv, err))
      return false;
  }

  bool ok = false;
  HnStr *strs = calloc(tokens.count, sizeof *strs);
  char **names = calloc(n_vocab, sizeof *names);
  float *scores = calloc(n_vocab, sizeof *scores);
  int32_t *types = calloc(n_vocab, sizeof *types);
  if (strs == NULL || names == NULL || scores == NULL || types == NULL) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory copying the vocabulary");
    goto out;
  }
  hn_gguf_array_strings(&tokens, strs);
  HnGgufArray src_scores = { 0 }, src_types = { 0 };
  bool have_scores = hn_gguf_get_array(vocab, "tokenizer.ggml.scores", &src_scores, NULL) &&
                     src_scores.count == tokens.count;
  bool have_types = hn_gguf_get_array(vocab, "tokenizer.ggml.token_type", &src_types, NULL) &&
                    src_types.count == tokens.count;
  for (uint32_t i = 0; i < n_vocab; i++) {
    if (i < tokens.count) {
      names[i] = strndup(strs[i].data, strs[i].len);
      scores[i] = have_scores ? (float)hn_gguf_array_float(&src_scores, i) : 0.0f;
      types[i] = have_types ? (int32_t)hn_gguf_array_int(&src_types, i) : 1;
    } else {
      char pad[32];
      snprintf(pad, sizeof pad, "<|hanashi_pad_%u|>", i);
      names[i] = strdup(pad);
      scores[i] = -1e9f;
      types[i] = 5; /* unused */
    }
    if (names[i] == NULL) {
      hn_error_set(err, HN_ERR_NOMEM, "out of memory copying the vocabulary");
      goto out;
    }
  }
  ok = hn_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)names, n_vocab, err) &&
       hn_gguf_writer_set_array(w, "tokenizer.ggml.scores", HN_GGUF_FLOAT32, scores, n_vocab, err) &&
       hn_gguf_writer_set_array(w, "tokenizer.ggml.token_type", HN_GGUF_INT32, types, n_vocab, err);
out:
  if (names != NULL)
    for (uint32_t i = 0; i < n_vocab; i++)
      free(names[i]);
  free(names);
  free(scores);
  free(types);
  free(strs);
  return ok;
}

static bool
set_hparams(HnGgufWriter *w, const ModelShape *shape, uint32_t n_vocab, HnError *err)
{
  char key[96];
  const char *a = shape->arch;
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
  return hn_gguf_writer_set_str(w, "general.architecture", a, err) &&
         hn_gguf_writer_set_str(w, "general.name", shape->name, err) &&
         hn_gguf_writer_set_u32(w, KEY("context_length"), shape->n_ctx, err) &&
         hn_gguf_writer_set_u32(w, KEY("embedding_length"), shape->n_embd, err) &&
         hn_gguf_writer_set_u32(w, KEY("block_count"), shape->n_layer, err) &&
         hn_gguf_writer_set_u32(w, KEY("feed_forward_length"), shape->n_ff, err) &&
         hn_gguf_writer_set_u32(w, KEY("attention.head_count"), shape->n_head, err) &&
         hn_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), shape->n_head_kv, err) &&
         hn_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), shape->rms_eps, err) &&
         hn_gguf_writer_set_f32(w, KEY("rope.freq_base"), shape->rope_base, err) &&
         hn_gguf_writer_set_u32(w, KEY("vocab_size"), n_vocab, err) &&
         hn_gguf_writer_set_u32(w, "general.file_type", 1 /* F16 */, err) &&
         (!shape->head_dim || (hn_gguf_writer_set_u32(w, KEY("attention.key_length"), shape->head_dim, err) &&
                               hn_gguf_writer_set_u32(w, KEY("attention.value_length"), shape->head_dim, err))) &&
         (!shape->rope_dims || hn_gguf_writer_set_u32(w, KEY("rope.dimension_count"), shape->rope_dims, err)) &&
         (!shape->window || hn_gguf_writer_set_u32(w, KEY("attention.sliding_window"), shape->window, err)) &&
         (!shape->n_ctx_orig ||
          (hn_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), shape->n_ctx_orig, err) &&
           hn_gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"),
                                  sqrtf(1.0f + logf((float)shape->n_ctx / (float)shape->n_ctx_orig) /
                                                   logf((float)shape->n_ctx_orig)), err))) &&
         (!shape->n_expert ||
          (hn_gguf_writer_set_u32(w, KEY("expert_count"), shape->n_expert, err) &&
           hn_gguf_writer_set_u32(w, KEY("expert_used_count"), shape->n_expert_used, err) &&
           hn_gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), shape->n_ff_exp, err))) &&
         (!shape->n_ff_shexp ||
          hn_gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"), shape->n_ff_shexp, err));
#undef KEY
}

static bool
write_f16_model(const char *path, const ModelShape *shape, const HnGguf *vocab, uint64_t seed, HnError *err)
{
  HnGgufArray tokens;
  if (!hn_gguf_get_array(vocab, "tokenizer.ggml.tokens", &tokens, err))
    return false;
  uint32_t n_vocab = shape->n_vocab ? shape->n_vocab : (uint32_t)tokens.count;

  TensorPlan *plan = calloc((size_t)max_tensors(shape), sizeof *plan);
  HnGgufWriter *w = hn_gguf_writer_new(err);
  float *row = NULL;
  uint16_t *half = NULL;
  bool ok = plan != NULL && w != NULL;
  if (!ok) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto out;
  }
  int n_tensors = plan_tensors(shape, n_vocab, plan);
  ok = set_hparams(w, shape, n_vocab, err) && copy_vocabulary(w, vocab, n_vocab, err);
  int64_t widest = 1;
  for (int i = 0; ok && i < n_tensors; i++) {
    bool f32 = plan[i].is_vector || plan[i].keep_f32;
    uint32_t n_dims = plan[i].is_vector ? 1 : plan[i].ne[2] > 1 ? 3 : 2;
    ok = hn_gguf_writer_add_tensor(w, plan[i].name, f32 ? HN_TYPE_F32 : HN_TYPE_F16, n_dims, plan[i].ne, err);
    widest = HN_MAX(widest, plan[i].ne[0]);
  }
  ok = ok && hn_gguf_writer_begin(w, path, err);
  row = malloc(sizeof *row * (size_t)widest);
  half = malloc(sizeof *half * (size_t)widest);
  if (ok && (row == NULL || half == NULL))
    ok = hn_error_set(err, HN_ERR_NOMEM, "out of memory");

  Rng rng;
  rng_seed(&rng, seed);
  /* Scale like a trained network: unit-ish activations through every layer. */
  for (int i = 0; ok && i < n_tensors; i++) {
    const int64_t cols = plan[i].ne[0], rows = plan[i].ne[1];
    if (plan[i].is_vector && strncmp(plan[i].name, "rope_factors_", 13) == 0) {
      /* frequency divisors: 1 (short) and a ramp up to 40 over the dimensions (long) */
      bool is_long = strstr(plan[i].name, "long") != NULL;
      for (int64_t c = 0; c < cols; c++)
        row[c] = is_long ? 1.0f + 39.0f * (float)c / (float)(cols > 1 ? cols - 1 : 1) : 1.0f;
      ok = hn_gguf_writer_write(w, row, sizeof *row * (size_t)cols, err);
      continue;
    }
    if (plan[i].is_vector) {
      bool is_norm = strstr(plan[i].name, "norm") != NULL;
      fill_normal(&rng, row, cols, is_norm ? 1.0f : 0.0f, is_norm ? 0.05f : 0.02f);
      ok = hn_gguf_writer_write(w, row, sizeof *row * (size_t)cols, err);
      continue;
    }
    float stddev = 1.0f / sqrtf((float)cols);
    for (int64_t r = 0; ok && r < rows * plan[i].ne[2]; r++) {
      fill_normal(&rng, row, cols, 0.0f, stddev);
      if (plan[i].keep_f32) {
        ok = hn_gguf_writer_write(w, row, sizeof *row * (size_t)cols, err);
        continue;
      }
      for (int64_t c = 0; c < cols; c++)
        half[c] = hn_fp32_to_fp16(row[c]);
      ok = hn_gguf_writer_write(w, half, sizeof *half * (size_t)cols, err);
    }
  }
  ok = ok && hn_gguf_writer_finish(w, err);
out:
  hn_gguf_writer_free(w);
  free(plan);
  free(row);
  free(half);
  return ok;
}

int
cli_make_model(int argc, char **argv)
{
  const char *shape_name = NULL, *type_name = NULL, *output = NULL, *vocab_path = NULL;
  long long seed = 1, threads = 2, layers = 0, n_ctx = 0;

  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(arg, "--shape") == 0 && value)
      shape_name = argv[++i];
    else if (strcmp(arg, "--type") == 0 && value)
      type_name = argv[++i];
    else if ((strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) && value)
      output = argv[++i];
    else if (strcmp(arg, "--vocab") == 0 && value)
      vocab_path = argv[++i];
    else if (strcmp(arg, "--seed") == 0 && value) {
      if (!cli_parse_int(argv[++i], 0, INT64_MAX, &seed))
        return cli_fail("--seed must be a non-negative integer, not '%s'", argv[i]);
    } else if (strcmp(arg, "--layers") == 0 && value) {
      if (!cli_parse_int(argv[++i], 1, 4096, &layers))
        return cli_fail("--layers must be a positive integer, not '%s'", argv[i]);
    } else if (strcmp(arg, "--ctx") == 0 && value) {
      if (!cli_parse_int(argv[++i], 1, INT32_MAX, &n_ctx))
        return cli_fail("--ctx must be a positive integer, not '%s'", argv[i]);
    } else if ((strcmp(arg, "-t") == 0 || strcmp(arg, "--threads") == 0) && value) {
      if (!cli_parse_int(argv[++i], 1, 64, &threads))
        return cli_fail("--threads must be an integer from 1 to 64, not '%s'", argv[i]);
    } else
      return cli_fail("unknown or incomplete option '%s' (usage: hanashi-cli make-model --shape NAME "
                      "--type TYPE -o FILE --vocab VOCAB.gguf [--seed N] [-t THREADS] [--layers N] [--ctx N])", arg);
  }
  if (shape_name == NULL || type_name == NULL || output == NULL || vocab_path == NULL)
    return cli_fail("usage: hanashi-cli make-model --shape NAME --type TYPE -o FILE --vocab VOCAB.gguf "
                    "[--seed N] [-t THREADS] [--layers N] [--ctx N]");

  const ModelShape *found = NULL;
  char known[512] = "";
  for (const ModelShape *s = shapes; s->name != NULL; s++) {
    if (strcmp(s->name, shape_name) == 0)
      found = s;
    size_t used = strlen(known);
    snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "", s->name);
  }
  if (found == NULL)
    return cli_fail("unknown shape '%s' (known: %s)", shape_name, known);
  ModelShape chosen = *found;
  if (layers > 0) {
    if (layers > (long long)chosen.n_layer)
      return cli_fail("--layers %lld is more than the %u layers of shape '%s'", layers, chosen.n_layer,
                      chosen.name);
    chosen.n_layer = (uint32_t)layers;
  }
  if (n_ctx > 0)
    chosen.n_ctx = (uint32_t)n_ctx;
  const ModelShape *shape = &chosen;
  const HnQuantizeTarget *target = hn_quantize_target_find(type_name);
  if (target == NULL)
    return cli_fail("unknown type '%s' (see hanashi-cli quantize --help)", type_name);

  HnError err = { 0 };
  HnGguf *vocab = hn_gguf_open(vocab_path, &err);
  if (vocab == NULL)
    return cli_fail("%s", err.message);

  size_t len = strlen(output);
  char *temp = malloc(len + 16);
  if (temp == NULL) {
    hn_gguf_close(vocab);
    return cli_fail("out of memory");
  }
  snprintf(temp, len + 16, "%s.f16.tmp", output);
  bool ok = write_f16_model(temp, shape, vocab, (uint64_t)seed, &err);
  hn_gguf_close(vocab);
  if (ok)
    ok = hn_quantize_model(temp, output, target, (int)threads, NULL, NULL, &err);
  unlink(temp);
  free(temp);
  if (!ok)
    return cli_fail("%s", err.message);
  return 0;
}
