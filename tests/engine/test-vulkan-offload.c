/* The Vulkan backend through the engine's own API: how many layers "Auto" gives under the
 * HANASHI_VULKAN_MEMORY_LIMIT test seam (a small limit fewer layers, a large one all, and
 * the context really takes that many), a device number that does not exist, and a device
 * lost in the middle of a generation (the HANASHI_VULKAN_FAIL seam): notice, CPU, the same
 * greedy tokens.  Device 0 is named, so a software driver (lavapipe in CI) is used too;
 * without any Vulkan device the device-dependent tests skip.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <string.h>

#include "hn-context.h"
#include "hn-vk.h"

#define MODEL "stories260K-f32.gguf"
#define N_CTX 64
#define N_BATCH 16
#define N_GEN 8

static HnModel *model;
static int n_devices;

static HnContext *
context (int n_gpu_layers, int device, HnError *err)
{
  HnContextParams p = hn_context_default_params ();
  p.n_ctx = N_CTX;
  p.n_batch = N_BATCH;
  p.n_threads = 2;
  p.n_gpu_layers = n_gpu_layers;
  p.gpu_device = device;
  return hn_context_new (model, &p, err);
}

static int
fit (int device)
{
  HnVkOffloadParams p = { .n_ctx = N_CTX, .n_batch = N_BATCH, .device = device };
  HnError err = { 0 };
  return hn_vk_fit_layers (model, &p, &err);
}

static int
argmax (const float *row, int n)
{
  int best = 0;
  for (int i = 1; i < n; i++)
    if (row[i] > row[best])
      best = i;
  return best;
}

/* Greedy tokens after a short prompt, one decode per token after the prompt's batch. */
static void
greedy (HnContext *c, int32_t *out)
{
  int32_t prompt[] = { 1, 400, 50, 60, 70, 80, 90, 100 };
  int n = G_N_ELEMENTS (prompt), nv = hn_model_n_vocab (model);
  int32_t pos[G_N_ELEMENTS (prompt)];
  for (int i = 0; i < n; i++)
    pos[i] = i;
  HnBatch b = { .n_tokens = n, .token = prompt, .pos = pos };
  HnError err = { 0 };
  if (!hn_context_decode (c, &b, &err))
    g_error ("decode: %s", err.message);
  for (int t = 0; t < N_GEN; t++)
    {
      out[t] = argmax (hn_context_get_logits (c, 0), nv);
      int32_t p = n + t;
      HnBatch one = { .n_tokens = 1, .token = &out[t], .pos = &p };
      if (!hn_context_decode (c, &one, &err))
        g_error ("decode: %s", err.message);
    }
}

static void
cpu_tokens (int32_t *out)
{
  HnError err = { 0 };
  HnContext *c = context (0, -1, &err);
  g_assert_nonnull (c);
  greedy (c, out);
  hn_context_free (c);
}

static void
test_fit_follows_memory_limit (void)
{
  int n_layer = hn_model_n_layer (model);
  g_unsetenv ("HANASHI_VULKAN_MEMORY_LIMIT");
  g_assert_cmpint (fit (0), ==, n_layer);
  g_setenv ("HANASHI_VULKAN_MEMORY_LIMIT", "4096", TRUE);
  g_assert_cmpint (fit (0), ==, 0);

  /* the smallest limit that takes a layer takes fewer than all of them */
  guint64 lo = 4096, hi = 1ull << 30;
  while (hi - lo > 1024)
    {
      guint64 mid = lo + (hi - lo) / 2;
      g_autofree char *text = g_strdup_printf ("%" G_GUINT64_FORMAT, mid);
      g_setenv ("HANASHI_VULKAN_MEMORY_LIMIT", text, TRUE);
      if (fit (0) > 0)
        hi = mid;
      else
        lo = mid;
    }
  g_autofree char *limit = g_strdup_printf ("%" G_GUINT64_FORMAT, hi);
  g_setenv ("HANASHI_VULKAN_MEMORY_LIMIT", limit, TRUE);
  int some = fit (0);
  g_assert_cmpint (some, >, 0);
  g_assert_cmpint (some, <, n_layer);
  /* more memory never gives fewer layers */
  g_autofree char *twice = g_strdup_printf ("%" G_GUINT64_FORMAT, hi * 2);
  g_setenv ("HANASHI_VULKAN_MEMORY_LIMIT", twice, TRUE);
  g_assert_cmpint (fit (0), >=, some);

  /* Auto in a context under that limit: exactly that many layers, really allocated (the
   * margin covers what the estimate leaves out), and the CPU's tokens */
  g_setenv ("HANASHI_VULKAN_MEMORY_LIMIT", limit, TRUE);
  HnError err = { 0 };
  HnContext *c = context (HN_GPU_LAYERS_AUTO, 0, &err);
  g_assert_nonnull (c);
  g_assert_cmpint (hn_context_gpu_layers (c), ==, some);
  g_assert_null (hn_context_notice (c));
  g_assert_nonnull (hn_context_gpu_device (c));
  int32_t on_device[N_GEN], on_cpu[N_GEN];
  greedy (c, on_device);
  hn_context_free (c);
  g_unsetenv ("HANASHI_VULKAN_MEMORY_LIMIT");
  cpu_tokens (on_cpu);
  g_assert_cmpmem (on_device, sizeof on_device, on_cpu, sizeof on_cpu);

  /* a limit that takes nothing: the CPU, and a notice that says why */
  g_setenv ("HANASHI_VULKAN_MEMORY_LIMIT", "4096", TRUE);
  c = context (HN_GPU_LAYERS_AUTO, 0, &err);
  g_assert_nonnull (c);
  g_assert_cmpint (hn_context_gpu_layers (c), ==, 0);
  g_assert_nonnull (hn_context_gpu_notice (c));
  g_assert_nonnull (strstr (hn_context_gpu_notice (c), "Running on the CPU instead."));
  hn_context_free (c);
  g_unsetenv ("HANASHI_VULKAN_MEMORY_LIMIT");
}

static void
test_no_such_device (void)
{
  HnError err = { 0 };
  HnContext *c = context (99, 99, &err);
  g_assert_nonnull (c);
  g_assert_cmpint (hn_context_gpu_layers (c), ==, 0);
  g_assert_null (hn_context_gpu_device (c));
  g_assert_nonnull (strstr (hn_context_gpu_notice (c), "There is no Vulkan device number 99"));
  g_assert_cmpstr (hn_context_notice (c), ==, hn_context_gpu_notice (c));
  hn_context_free (c);
  /* Auto with a device that was named but does not exist says so too */
  c = context (HN_GPU_LAYERS_AUTO, 99, &err);
  g_assert_nonnull (c);
  g_assert_cmpint (hn_context_gpu_layers (c), ==, 0);
  g_assert_nonnull (strstr (hn_context_gpu_notice (c), "There is no Vulkan device number 99"));
  hn_context_free (c);
  g_assert_cmpint (fit (99), ==, -1);
}

/* lost:N and timeout:N: the N-th run of the device's layers fails during the generation;
 * the context finishes on the CPU, says so, and gives the CPU's tokens. */
static void
device_fails_during_decode (const char *failure, const char *sentence)
{
  int32_t on_cpu[N_GEN], failing[N_GEN];
  cpu_tokens (on_cpu);
  g_setenv ("HANASHI_VULKAN_FAIL", failure, TRUE);
  HnError err = { 0 };
  HnContext *c = context (99, 0, &err);
  g_assert_nonnull (c);
  g_assert_cmpint (hn_context_gpu_layers (c), ==, hn_model_n_layer (model));
  g_assert_null (hn_context_notice (c));
  greedy (c, failing);
  g_unsetenv ("HANASHI_VULKAN_FAIL");
  g_assert_cmpint (hn_context_gpu_layers (c), ==, 0);
  g_assert_null (hn_context_gpu_device (c));
  const char *notice = hn_context_gpu_notice (c);
  g_assert_nonnull (notice);
  g_assert_nonnull (strstr (notice, sentence));
  g_assert_nonnull (strstr (notice, "Running on the CPU from now on."));
  g_assert_cmpmem (failing, sizeof failing, on_cpu, sizeof on_cpu);
  hn_context_free (c);
}

static void
test_device_lost (void)
{
  device_fails_during_decode ("lost:3", "The graphics device stopped working while evaluating the layers.");
}

static void
test_device_timeout (void)
{
  device_fails_during_decode ("timeout:2", "did not finish evaluating the layers within 120 seconds");
}

/* A prompt batch goes through the tiled kernel, a decode step through the matrix-vector
 * one, and each of them is one submission and one fence wait however many layers the
 * device runs: no host round trip inside a step. */
static void
test_one_submission_per_step (void)
{
  int n_layer = hn_model_n_layer (model);
  int layer_counts[] = { n_layer, 2 };
  for (size_t i = 0; i < G_N_ELEMENTS (layer_counts); i++)
    {
      HnError err = { 0 };
      HnContext *c = context (layer_counts[i], 0, &err);
      g_assert_nonnull (c);
      g_assert_cmpint (hn_context_gpu_layers (c), ==, layer_counts[i]);
      HnVkCounts before, after;
      g_assert_true (hn_context_gpu_counts (c, &before));
      int32_t prompt[] = { 1, 400, 50, 60, 70, 80, 90, 100 }, pos[G_N_ELEMENTS (prompt)];
      for (size_t t = 0; t < G_N_ELEMENTS (prompt); t++)
        pos[t] = (int32_t) t;
      HnBatch b = { .n_tokens = G_N_ELEMENTS (prompt), .token = prompt, .pos = pos };
      if (!hn_context_decode (c, &b, &err))
        g_error ("decode: %s", err.message);
      g_assert_true (hn_context_gpu_counts (c, &after));
      g_assert_cmpuint (after.runs - before.runs, ==, 1);
      g_assert_cmpuint (after.submissions - before.submissions, ==, 1);
      g_assert_cmpuint (after.fence_waits - before.fence_waits, ==, 1);
      /* seven products per layer (q, k, v, output, gate, up, down), all tiled */
      g_assert_cmpuint (after.tiled_dispatches - before.tiled_dispatches, ==, 7 * layer_counts[i]);
      g_assert_cmpuint (after.matvec_dispatches - before.matvec_dispatches, ==, 0);
      for (int step = 0; step < 3; step++)
        {
          before = after;
          int32_t token = 60 + step, p = (int32_t) G_N_ELEMENTS (prompt) + step;
          HnBatch one = { .n_tokens = 1, .token = &token, .pos = &p };
          if (!hn_context_decode (c, &one, &err))
            g_error ("decode: %s", err.message);
          g_assert_true (hn_context_gpu_counts (c, &after));
          g_assert_cmpuint (after.runs - before.runs, ==, 1);
          g_assert_cmpuint (after.submissions - before.submissions, ==, 1);
          g_assert_cmpuint (after.fence_waits - before.fence_waits, ==, 1);
          g_assert_cmpuint (after.matvec_dispatches - before.matvec_dispatches, ==, 7 * layer_counts[i]);
          g_assert_cmpuint (after.tiled_dispatches - before.tiled_dispatches, ==, 0);
          if (g_test_verbose ())
            g_test_message ("%d layers on the device: %" G_GUINT64_FORMAT " dispatches and %" G_GUINT64_FORMAT
                            " barriers in the one submission of a decode step",
                            layer_counts[i], after.dispatches - before.dispatches, after.barriers - before.barriers);
        }
      hn_context_free (c);
      /* the CPU has no counts */
      c = context (0, 0, &err);
      g_assert_false (hn_context_gpu_counts (c, &after));
      hn_context_free (c);
    }
}

/* A device whose workgroups cannot hold a tile (the small-workgroups seam): the prompt
 * goes through the matrix-vector kernel too, still in one submission, and the greedy
 * tokens are the CPU's. */
static void
test_prompt_without_tiles (void)
{
  int32_t on_cpu[N_GEN], on_device[N_GEN];
  cpu_tokens (on_cpu);
  g_setenv ("HANASHI_VULKAN_FAIL", "small-workgroups", TRUE);
  HnError err = { 0 };
  HnContext *c = context (99, 0, &err);
  g_unsetenv ("HANASHI_VULKAN_FAIL");
  g_assert_nonnull (c);
  int n_layer = hn_model_n_layer (model);
  g_assert_cmpint (hn_context_gpu_layers (c), ==, n_layer);
  HnVkCounts before, after;
  g_assert_true (hn_context_gpu_counts (c, &before));
  greedy (c, on_device);
  g_assert_true (hn_context_gpu_counts (c, &after));
  /* the prompt and N_GEN single tokens: one run and one submission each */
  g_assert_cmpuint (after.runs - before.runs, ==, 1 + N_GEN);
  g_assert_cmpuint (after.submissions - before.submissions, ==, 1 + N_GEN);
  g_assert_cmpuint (after.tiled_dispatches - before.tiled_dispatches, ==, 0);
  g_assert_cmpuint (after.matvec_dispatches - before.matvec_dispatches, ==, 7 * n_layer * (1 + N_GEN));
  g_assert_cmpmem (on_device, sizeof on_device, on_cpu, sizeof on_cpu);
  hn_context_free (c);
}

/* Without any device (or a build without Vulkan) Auto is the CPU and says nothing. */
static void
test_auto_without_device_is_quiet (void)
{
  if (n_devices > 0)
    {
      g_test_skip ("a Vulkan device exists");
      return;
    }
  HnError err = { 0 };
  HnContext *c = context (HN_GPU_LAYERS_AUTO, -1, &err);
  g_assert_nonnull (c);
  g_assert_cmpint (hn_context_gpu_layers (c), ==, 0);
  g_assert_null (hn_context_notice (c));
  hn_context_free (c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  const char *testdata = g_getenv ("HANASHI_TESTDATA");
  if (!testdata)
    {
      g_test_skip ("no test data");
      return g_test_run ();
    }
  g_autofree char *path = g_build_filename (testdata, "models", MODEL, NULL);
  HnError err = { 0 };
  model = hn_model_load (path, NULL, &err);
  if (!model)
    g_error ("%s: %s", MODEL, err.message);
  HnVkDeviceInfo dev;
  n_devices = hn_vk_list_devices (&dev, 1, &err);
  g_test_add_func ("/vulkan-offload/auto-without-device", test_auto_without_device_is_quiet);
  if (n_devices > 0)
    {
      g_test_add_func ("/vulkan-offload/fit-follows-memory-limit", test_fit_follows_memory_limit);
      g_test_add_func ("/vulkan-offload/no-such-device", test_no_such_device);
      g_test_add_func ("/vulkan-offload/device-lost", test_device_lost);
      g_test_add_func ("/vulkan-offload/device-timeout", test_device_timeout);
      g_test_add_func ("/vulkan-offload/one-submission-per-step", test_one_submission_per_step);
      g_test_add_func ("/vulkan-offload/prompt-without-tiles", test_prompt_without_tiles);
    }
  int status = g_test_run ();
  hn_model_free (model);
  return status;
}
