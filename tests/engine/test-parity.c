/* Parity with the reference engine: every reference file in testdata/reference (and
 * testdata/arch/reference, the further architectures) against the model it was made from
 * (KL divergence, top-1 agreement, greedy continuation).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hn-context.h"
#include "hn-cpu.h"
#include "hn-quants.h"
#include "hn-vk.h"

static const char *testdata;
static int gpu_layers; /* HANASHI_GPU_LAYERS */

static double
log_sum_exp(const float *x, int n)
{
  double mx = -INFINITY, s = 0.0;
  for (int i = 0; i < n; i++)
    mx = x[i] > mx ? x[i] : mx;
  for (int i = 0; i < n; i++)
    s += exp(x[i] - mx);
  return mx + log(s);
}

static int
argmax(const float *x, int n)
{
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best])
      best = i;
  return best;
}

static void
test_reference(gconstpointer data)
{
  /* "reference/NAME.json" or "arch/reference/NAME.json" under the test data */
  const char *rel = data;
  g_autofree char *ref_dir = g_path_get_dirname(rel);
  g_autofree char *group = g_path_get_dirname(ref_dir); /* "." or "arch" */
  g_autofree char *json_name = g_path_get_basename(rel);
  g_autofree char *json_path = g_build_filename(testdata, rel, NULL);
  g_autofree char *stem = g_strndup(json_name, strlen(json_name) - strlen(".json"));
  const char *dot = strrchr(stem, '.');
  g_autofree char *model_name = g_strdup_printf("%.*s.gguf", (int) (dot - stem), stem);
  g_autofree char *model_path = g_build_filename(testdata, group, "models", model_name, NULL);
  g_autofree char *logits_name = g_strdup_printf("%s.logits.f32", stem);
  g_autofree char *logits_path = g_build_filename(testdata, group, "reference", logits_name, NULL);

  g_autoptr(JsonParser) parser = json_parser_new();
  g_autoptr(GError) gerr = NULL;
  g_assert_true(json_parser_load_from_file(parser, json_path, &gerr));
  JsonObject *root = json_node_get_object(json_parser_get_root(parser));
  JsonArray *positions = json_object_get_array_member(root, "positions");
  JsonArray *full = json_object_get_array_member(root, "full_logits_positions");
  JsonArray *greedy = json_object_get_array_member(root, "greedy");
  JsonArray *prompt = json_object_get_array_member(root, "prompt_tokens");
  int n = (int) json_array_get_length(positions);

  HnError err = { 0 };
  HnModel *model = hn_model_load(model_path, NULL, &err);
  if (!model && err.code == HN_ERR_UNSUPPORTED && strcmp(group, ".") != 0) {
    /* an architecture of arch/ that another part of the engine has yet to bring */
    g_test_skip(err.message);
    return;
  }
  g_assert_true(model != NULL);
  int nv = hn_model_n_vocab(model);
  uint32_t type = hn_model_main_type(model);
  bool exact = type == HN_TYPE_F32 || type == HN_TYPE_F16;
  bool quantized = !exact && type != HN_TYPE_BF16;
  double kl_bound = exact ? 1e-4 : quantized ? 5e-3 : 5e-4;
  double margin = quantized ? 0.3 : 0.1;
  /* A mixture of experts picks its experts by comparing router logits.  Where a token's
   * last chosen expert led the best one left out by no more than rounding moves router
   * logits, an engine that rounds otherwise may have routed the token elsewhere, and the
   * logits there are no fixed target, just as where the reference's own top two are
   * close: such a position is left out of top-1 and ends the greedy comparison (the KL
   * mean still takes every position).  The bounds are a little above the largest change
   * of a router-logit difference between this engine's fast and scalar kernels on the
   * qwen2moe/qwen3moe references: 0.032 with 8-bit activations, 0.003 with F16 weights. */
  double routing_noise = quantized ? 0.04 : 0.004;

  HnContextParams params = hn_context_default_params();
  params.n_ctx = n + 8;
  params.n_batch = n;
  /* HANASHI_TEST_THREADS=1 for emulated runs: under qemu on a few cores the pool's
   * spinning workers crawl (one reference: 10 s with one thread, minutes with two) */
  const char *threads = g_getenv("HANASHI_TEST_THREADS");
  params.n_threads = threads ? CLAMP(atoi(threads), 1, 64) : 2;
  params.n_gpu_layers = gpu_layers;
  HnContext *ctx = hn_context_new(model, &params, &err);
  g_assert_true(ctx != NULL);
  /* the device path takes the llama family; every other architecture says why it stays
   * on the CPU, and the reference must hold either way */
  int n_layer = hn_model_n_layer(model), want_gpu = MIN(gpu_layers, n_layer);
  const char *arch = hn_model_arch(model);
  bool device_arch = strcmp(arch, "llama") == 0 || strcmp(arch, "qwen2") == 0 || strcmp(arch, "qwen3") == 0;
  if (gpu_layers > 0 && device_arch) {
    g_assert_cmpint(hn_context_gpu_layers(ctx), ==, want_gpu);
    g_test_message("%d of %d layers on %s", want_gpu, n_layer, hn_context_gpu_device(ctx));
  } else if (gpu_layers > 0) {
    g_assert_cmpint(hn_context_gpu_layers(ctx), ==, 0);
    g_assert_nonnull(hn_context_notice(ctx));
    g_test_message("%s", hn_context_notice(ctx));
  }
  g_autofree int32_t *tok = g_new(int32_t, n);
  g_autofree int32_t *pos = g_new(int32_t, n);
  g_autofree bool *want = g_new(bool, n);
  for (int i = 0; i < n; i++) {
    tok[i] = (int32_t) json_object_get_int_member(json_array_get_object_element(positions, i), "token");
    pos[i] = i;
    want[i] = true;
  }
  HnBatch batch = { .n_tokens = n, .token = tok, .pos = pos, .want_logits = want };
  g_assert_true(hn_context_decode(ctx, &batch, &err));

  /* KL(reference ‖ ours) over the full rows */
  gsize len = 0;
  g_autofree char *ref_bytes = NULL;
  g_assert_true(g_file_get_contents(logits_path, &ref_bytes, &len, &gerr));
  int n_full = (int) json_array_get_length(full);
  g_assert_cmpuint(len, ==, (gsize) n_full * (gsize) nv * sizeof(float));
  double kl_sum = 0.0, kl_max = 0.0;
  for (int k = 0; k < n_full; k++) {
    const float *ref = (const float *) ref_bytes + (size_t) k * (size_t) nv;
    int p = (int) json_array_get_int_element(full, k);
    const float *ours = hn_context_get_logits(ctx, p);
    double lr = log_sum_exp(ref, nv), lo = log_sum_exp(ours, nv), kl = 0.0;
    for (int v = 0; v < nv; v++) {
      double a = ref[v] - lr, b = ours[v] - lo;
      kl += exp(a) * (a - b);
    }
    kl_sum += kl;
    kl_max = kl > kl_max ? kl : kl_max;
  }
  double kl_mean = kl_sum / n_full;

  /* top-1 agreement where the reference is decisive (and the routing was) */
  int counted = 0, agreed = 0, near_routing = 0;
  for (int i = 0; i < n; i++) {
    JsonArray *top = json_object_get_array_member(json_array_get_object_element(positions, i), "top");
    JsonArray *t0 = json_array_get_array_element(top, 0), *t1 = json_array_get_array_element(top, 1);
    if (json_array_get_double_element(t0, 1) - json_array_get_double_element(t1, 1) < margin)
      continue;
    if (hn_context_routing_lead(ctx, i) < routing_noise) {
      near_routing++;
      continue;
    }
    counted++;
    agreed += argmax(hn_context_get_logits(ctx, i), nv) == (int) json_array_get_int_element(t0, 0);
  }
  double agreement = counted ? (double) agreed / counted : 1.0;

  /* greedy: prompt in one batch, then one token per step, until the reference (or the
   * routing) is unsure */
  hn_kv_cache_clear(hn_context_kv(ctx));
  int n_prompt = (int) json_array_get_length(prompt), n_greedy = (int) json_array_get_length(greedy);
  for (int i = 0; i < n_prompt; i++)
    tok[i] = (int32_t) json_array_get_int_element(prompt, i);
  HnBatch pb = { .n_tokens = n_prompt, .token = tok, .pos = pos };
  g_assert_true(hn_context_decode(ctx, &pb, &err));
  int matched = 0;
  for (int s = 0; s < n_greedy; s++) {
    JsonArray *top = json_object_get_array_member(
        json_array_get_object_element(positions, n_prompt - 1 + s), "top");
    double m = json_array_get_double_element(json_array_get_array_element(top, 0), 1) -
               json_array_get_double_element(json_array_get_array_element(top, 1), 1);
    if (m < margin || hn_context_routing_lead(ctx, 0) < routing_noise)
      break;
    int32_t next = argmax(hn_context_get_logits(ctx, 0), nv);
    g_assert_cmpint(next, ==, (int) json_array_get_int_element(greedy, s));
    matched++;
    int32_t p = n_prompt + s;
    HnBatch one = { .n_tokens = 1, .token = &next, .pos = &p };
    g_assert_true(hn_context_decode(ctx, &one, &err));
  }

  g_autofree char *routing_note = near_routing ? g_strdup_printf(", %d near-tied routings left out", near_routing)
                                                : g_strdup("");
  g_test_message("%s %s: mean KL %.3g, max KL %.3g, top-1 %d/%d (%.1f%%), greedy %d/%d steps%s",
                 stem, hn_type_name(type), kl_mean, kl_max, agreed, counted, 100.0 * agreement,
                 matched, n_greedy, routing_note);
  g_assert_cmpfloat(kl_mean, <=, kl_bound);
  g_assert_cmpfloat(agreement, >=, 0.98);
  /* the device did not fail and hand the layers back along the way */
  if (gpu_layers > 0 && device_arch)
    g_assert_cmpint(hn_context_gpu_layers(ctx), ==, want_gpu);
  hn_context_free(ctx);
  hn_model_free(model);
}

static int
compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Adds "SUBDIR/NAME.json" for every reference file in testdata/SUBDIR. */
static bool
list_references(const char *subdir, GPtrArray *names)
{
  g_autofree char *dir_path = g_build_filename(testdata, subdir, NULL);
  GDir *dir = g_dir_open(dir_path, 0, NULL);
  if (!dir)
    return false;
  const char *entry;
  while ((entry = g_dir_read_name(dir)))
    if (g_str_has_suffix(entry, ".json"))
      g_ptr_array_add(names, g_build_filename(subdir, entry, NULL));
  g_dir_close(dir);
  return true;
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  /* which kernel set is checked (HANASHI_SIMD caps it; a cross build shows its own) */
  g_test_message("kernels: %s", hn_simd_level_name(hn_cpu_simd_level()));
  testdata = g_getenv("HANASHI_TESTDATA");
  /* HANASHI_GPU_LAYERS=N: the same references with the last N layers on the Vulkan device
   * (lavapipe in CI); skipped only where there is no device to run them on */
  const char *gpu = g_getenv("HANASHI_GPU_LAYERS");
  gpu_layers = gpu ? CLAMP(atoi(gpu), 0, 1 << 20) : 0;
  if (gpu_layers > 0) {
    HnVkDeviceInfo dev;
    HnError err = { 0 };
    int n_dev = hn_vk_list_devices(&dev, 1, &err);
    if (n_dev <= 0) {
      g_test_skip(n_dev < 0 ? err.message : "no Vulkan device");
      return g_test_run();
    }
    g_test_message("device: %s (%s)", dev.name, dev.driver);
  }
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  if (!testdata || !list_references("reference", names)) {
    g_ptr_array_unref(names);
    g_test_skip("no test data");
    return g_test_run();
  }
  list_references("arch/reference", names);
  g_ptr_array_sort(names, compare_names);
  /* HANASHI_PARITY_PROMPT=p0: only each model's first prompt (every model is still
   * checked; the Vulkan variants use it, since lavapipe spends seconds per context) */
  const char *only_prompt = g_getenv("HANASHI_PARITY_PROMPT");
  g_autofree char *prompt_infix = only_prompt && *only_prompt ? g_strdup_printf(".%s.", only_prompt) : NULL;
  for (guint i = 0; i < names->len; i++) {
    const char *rel = names->pdata[i];
    if (prompt_infix && !strstr(rel, prompt_infix))
      continue;
    g_autofree char *path = g_strdup_printf("/parity/%s", g_str_has_prefix(rel, "arch/") ? rel : rel + strlen("reference/"));
    g_test_add_data_func(path, names->pdata[i], test_reference);
  }
  int status = g_test_run();
  g_ptr_array_unref(names);
  return status;
}
