/* hanashi-cli and the Vulkan backend: info --devices, bench -ngl naming its device, session
 * files shared between device and CPU runs, the out-of-memory path through the
 * HANASHI_VULKAN_MEMORY_LIMIT test seam, the other rows of docs/vulkan.md's failure table
 * through the HANASHI_VULKAN_FAIL seam (a shader that does not build, a driver without push
 * descriptors, a tensor larger than the device binds, a device lost during generation)
 * and no driver at all, and -ngl auto.  Needs a Vulkan device (lavapipe in CI); without
 * one every test skips.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "cli-run.h"
#include "hn-vk.h"

#define MODEL "stories260K-f32.gguf"
#define PROMPT "1,400,50,60,70,80,90,100"
#define LONGER PROMPT ",110,120,130,140"

static char *tmpdir;
static char device_name[256];
static int n_devices;

/* Runs hanashi-cli with the arguments (NULL-terminated) and extra environment entries;
 * returns stdout, stderr in *err_out; fails the test on a non-zero exit. */
static char *
run (const char *const *env_extra, char **err_out, ...)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  va_list ap;
  va_start (ap, err_out);
  for (const char *a = va_arg (ap, const char *); a; a = va_arg (ap, const char *))
    g_ptr_array_add (args, (gpointer) a);
  va_end (ap);
  g_ptr_array_add (args, NULL);
  g_auto (GStrv) envp = g_get_environ ();
  for (size_t i = 0; env_extra && env_extra[i]; i += 2)
    envp = g_environ_setenv (envp, env_extra[i], env_extra[i + 1], TRUE);
  return cli_run_output (cli_run_full (NULL, NULL, envp, (const char *const *) args->pdata), err_out);
}

static char *
model_path (void)
{
  return g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", MODEL, NULL);
}

/* generate greedily from the token list, on the CPU (ngl "0") or the device */
static char *
generate (const char *tokens, const char *ngl, const char *session, char **err_out)
{
  g_autofree char *model = model_path ();
  if (session)
    return run (NULL, err_out, "generate", "-m", model, "--tokens", tokens, "-n", "8", "--ids", "-t", "2", "-ngl", ngl,
                "--session", session, NULL);
  return run (NULL, err_out, "generate", "-m", model, "--tokens", tokens, "-n", "8", "--ids", "-t", "2", "-ngl", ngl,
              NULL);
}

static void
test_devices (void)
{
  g_autofree char *out = run (NULL, NULL, "info", "--devices", NULL);
  g_assert_true (g_str_has_prefix (out, "device 0: "));
  g_assert_nonnull (strstr (out, device_name));
  g_assert_nonnull (strstr (out, "\n  type: "));
  g_assert_nonnull (strstr (out, "\n  memory: "));
  g_assert_nonnull (strstr (out, "\n  driver: "));
}

static void
test_bench_names_device (void)
{
  g_autofree char *model = model_path ();
  g_autofree char *out = run (NULL, NULL, "bench", "-m", model, "-p", "16", "-n", "4", "-r", "1", "-t", "2", "-ngl", "99",
                              NULL);
  g_autofree char *line = g_strdup_printf ("device: %s, 5 of 5 layers offloaded\n", device_name);
  g_assert_nonnull (strstr (out, line));
  /* one submission per token however many layers; 16 dispatches per layer of stories260K */
  g_assert_nonnull (strstr (out, "device work per generated token: 1.00 submissions, 1.00 fence waits, 80.0 dispatches\n"));
  g_autofree char *partial = run (NULL, NULL, "bench", "-m", model, "-p", "16", "-n", "4", "-r", "1", "-t", "2", "-ngl",
                                  "2", "--json", NULL);
  g_assert_nonnull (strstr (partial, "\"gpu_layers\": 2, \"device\": \""));
  g_assert_nonnull (strstr (partial, "\"gpu_submissions_per_token\": 1.00, \"gpu_fence_waits_per_token\": 1.00, "
                                     "\"gpu_dispatches_per_token\": 32.0"));
  g_autofree char *cpu = run (NULL, NULL, "bench", "-m", model, "-p", "16", "-n", "4", "-r", "1", "-t", "2", "--json", NULL);
  g_assert_nonnull (strstr (cpu, "\"gpu_layers\": 0, \"device\": \"CPU\""));
}

/* A session written by one side is reused by the other: the reuse is reported and the
 * tokens are those of a run without a session on the reading side. */
static void
session_between (const char *writer, const char *reader)
{
  g_autofree char *session = g_build_filename (tmpdir, "shared.hnsession", NULL);
  g_remove (session);
  g_autofree char *err1 = NULL;
  g_free (generate (PROMPT, writer, session, &err1)); /* (its text: what the session is written for) */
  g_assert_nonnull (strstr (err1, "session: reused 0 of "));
  g_autofree char *err2 = NULL;
  g_autofree char *reused = generate (LONGER, reader, session, &err2);
  guint n_reused = 0, total = 0;
  const char *line = strstr (err2, "session: reused ");
  g_assert_nonnull (line);
  g_assert_cmpint (sscanf (line, "session: reused %u of %u prompt tokens", &n_reused, &total), ==, 2);
  g_assert_cmpuint (n_reused, >=, 8);
  g_autofree char *plain = generate (LONGER, reader, NULL, NULL);
  g_assert_cmpstr (reused, ==, plain);
  g_assert_null (strstr (err2, "notice:"));
}

static void
test_session_device_to_cpu (void)
{
  session_between ("99", "0");
}

static void
test_session_cpu_to_device (void)
{
  session_between ("0", "99");
}

static void
test_device_out_of_memory (void)
{
  g_autofree char *model = model_path ();
  const char *limit[] = { "HANASHI_VULKAN_MEMORY_LIMIT", "4096", NULL };
  g_autofree char *err = NULL;
  g_autofree char *out = run (limit, &err, "generate", "-m", model, "--tokens", PROMPT, "-n", "8", "--ids", "-t", "2",
                              "-ngl", "99", NULL);
  g_assert_nonnull (strstr (err, "hanashi-cli: notice: The graphics device ran out of memory"));
  g_assert_nonnull (strstr (err, "Running on the CPU instead."));
  g_autofree char *cpu = generate (PROMPT, "0", NULL, NULL);
  g_assert_cmpstr (out, ==, cpu);
  /* the same limit in bench: the CPU is named as where it ran */
  g_autofree char *bench = run (limit, NULL, "bench", "-m", model, "-p", "8", "-n", "2", "-r", "1", "-t", "2", "-ngl", "99",
                                "--json", NULL);
  g_assert_nonnull (strstr (bench, "\"gpu_layers\": 0, \"device\": \"CPU\""));
}

/* A failure the HANASHI_VULKAN_FAIL seam (or the environment) causes when the offload is
 * set up: the notice names it, and the tokens are the CPU's. */
static void
fails_at_setup (const char *const *env, const char *sentence)
{
  g_autofree char *model = model_path ();
  g_autofree char *err = NULL;
  g_autofree char *out = run (env, &err, "generate", "-m", model, "--tokens", PROMPT, "-n", "8", "--ids", "-t", "2",
                              "-ngl", "99", NULL);
  g_assert_nonnull (strstr (err, "hanashi-cli: notice: "));
  g_assert_nonnull (strstr (err, sentence));
  g_assert_nonnull (strstr (err, "Running on the CPU instead."));
  g_autofree char *cpu = generate (PROMPT, "0", NULL, NULL);
  g_assert_cmpstr (out, ==, cpu);
}

static void
test_shader_fails_to_build (void)
{
  const char *env[] = { "HANASHI_VULKAN_FAIL", "shader:attention", NULL };
  fails_at_setup (env, "The graphics driver could not build the attention shader");
  const char *matmul[] = { "HANASHI_VULKAN_FAIL", "shader:F32 matrix product", NULL };
  fails_at_setup (matmul, "could not build the F32 matrix product shader");
  const char *matvec[] = { "HANASHI_VULKAN_FAIL", "shader:F32 matrix-vector product", NULL };
  fails_at_setup (matvec, "could not build the F32 matrix-vector product shader");
}

static void
test_no_push_descriptors (void)
{
  const char *env[] = { "HANASHI_VULKAN_FAIL", "push-descriptors", NULL };
  fails_at_setup (env, "lacks VK_KHR_push_descriptor, which Hanashi needs.");
}

static void
test_tensor_too_large_to_bind (void)
{
  /* every weight matrix of the test model is larger than 1 KiB */
  const char *env[] = { "HANASHI_VULKAN_FAIL", "range:1024", NULL };
  fails_at_setup (env, "larger than");
}

static void
test_no_driver (void)
{
  /* the loader finds no driver at all */
  const char *env[] = { "VK_ICD_FILENAMES", "/nonexistent/hanashi-icd.json", "VK_DRIVER_FILES",
                        "/nonexistent/hanashi-icd.json", NULL };
  fails_at_setup (env, "Vulkan");
}

/* lost:N during generate: the notice, the CPU from then on, the same tokens */
static void
test_device_lost_in_generate (void)
{
  const char *env[] = { "HANASHI_VULKAN_FAIL", "lost:2", NULL };
  g_autofree char *model = model_path ();
  g_autofree char *err = NULL;
  g_autofree char *out = run (env, &err, "generate", "-m", model, "--tokens", PROMPT, "-n", "8", "--ids", "-t", "2",
                              "-ngl", "99", NULL);
  g_assert_nonnull (strstr (err, "The graphics device stopped working while evaluating the layers."));
  g_assert_nonnull (strstr (err, "Running on the CPU from now on."));
  g_autofree char *cpu = generate (PROMPT, "0", NULL, NULL);
  g_assert_cmpstr (out, ==, cpu);
}

/* Runs hanashi-cli expecting it to fail: returns its stderr. */
static char *
run_failing (const char *const *env_extra, const char *const *args)
{
  GPtrArray *argv = g_ptr_array_new ();
  g_ptr_array_add (argv, (gpointer) g_getenv ("HANASHI_CLI"));
  for (size_t i = 0; args[i]; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  char **envp = g_get_environ ();
  for (size_t i = 0; env_extra && env_extra[i]; i += 2)
    envp = g_environ_setenv (envp, env_extra[i], env_extra[i + 1], TRUE);
  g_autofree char *out = NULL;
  char *err = NULL;
  int status = 0;
  g_assert_true (g_spawn_sync (NULL, (char **) argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, NULL));
  g_strfreev (envp);
  g_ptr_array_unref (argv);
  g_assert_false (g_spawn_check_wait_status (status, NULL));
  g_assert_cmpstr (out, ==, "");
  return err;
}

/* --gpu-device N picks the device info --devices numbers N in generate, chat, logits and
 * bench; a number that does not exist is an error (a sentence, a non-zero exit), not a
 * silent run elsewhere. */
static void
test_gpu_device (void)
{
  g_autofree char *model = model_path ();
  g_autofree char *bench = run (NULL, NULL, "bench", "-m", model, "-p", "8", "-n", "2", "-r", "1", "-t", "2", "-ngl", "99",
                                "--gpu-device", "0", NULL);
  g_autofree char *line = g_strdup_printf ("device: %s, 5 of 5 layers offloaded\n", device_name);
  g_assert_nonnull (strstr (bench, line));
  g_autofree char *cpu = generate (PROMPT, "0", NULL, NULL);
  g_autofree char *on_device = run (NULL, NULL, "generate", "-m", model, "--tokens", PROMPT, "-n", "8", "--ids", "-t", "2",
                                    "-ngl", "99", "--gpu-device", "0", NULL);
  g_assert_cmpstr (on_device, ==, cpu);

  g_autofree char *missing = g_strdup_printf ("%d", n_devices);
  g_autofree char *logits_out = g_build_filename (tmpdir, "device.f32", NULL);
  const char *const generate_args[] = { "generate", "-m", model, "--tokens", PROMPT, "-n", "2", "-ngl", "99",
                                        "--gpu-device", missing, NULL };
  const char *const chat_args[] = { "chat", "-m", model, "-n", "2", "--gpu-device", missing, NULL };
  const char *const logits_args[] = { "logits", "-m", model, "--tokens", PROMPT, "-o", logits_out, "-ngl", "99",
                                      "--gpu-device", missing, NULL };
  const char *const bench_args[] = { "bench", "-m", model, "-p", "8", "-n", "2", "-r", "1", "-ngl", "99",
                                     "--gpu-device", missing, NULL };
  const char *const *commands[] = { generate_args, chat_args, logits_args, bench_args };
  g_autofree char *sentence = g_strdup_printf ("there is no Vulkan device number %d (%d found; 'hanashi-cli info "
                                               "--devices' lists them)", n_devices, n_devices);
  for (size_t i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      g_autofree char *err = run_failing (NULL, commands[i]);
      if (!strstr (err, sentence))
        g_error ("%s --gpu-device %s said: %s", commands[i][0], missing, err);
    }
  g_assert_false (g_file_test (logits_out, G_FILE_TEST_EXISTS));
  /* no driver at all: device 0 does not exist either */
  const char *no_driver[] = { "VK_ICD_FILENAMES", "/nonexistent/hanashi-icd.json", "VK_DRIVER_FILES",
                              "/nonexistent/hanashi-icd.json", NULL };
  const char *const zero_args[] = { "generate", "-m", model, "--tokens", PROMPT, "-n", "2", "--gpu-device", "0", NULL };
  g_autofree char *err = run_failing (no_driver, zero_args);
  g_assert_nonnull (strstr (err, "hanashi-cli: error: there is no Vulkan device number 0"));
  /* not a number */
  const char *const bad_args[] = { "bench", "-m", model, "--gpu-device", "first", NULL };
  g_autofree char *bad = run_failing (NULL, bad_args);
  g_assert_nonnull (strstr (bad, "invalid device number 'first'"));
}

/* -ngl auto is taken by every subcommand that takes -ngl, and gives the CPU's tokens */
static void
test_gpu_layers_auto (void)
{
  g_autofree char *auto_out = generate (PROMPT, "auto", NULL, NULL);
  g_autofree char *cpu = generate (PROMPT, "0", NULL, NULL);
  g_assert_cmpstr (auto_out, ==, cpu);
  g_autofree char *model = model_path ();
  g_autofree char *bench = run (NULL, NULL, "bench", "-m", model, "-p", "8", "-n", "2", "-r", "1", "-t", "2", "-ngl",
                                "auto", "--json", NULL);
  g_assert_nonnull (strstr (bench, "\"gpu_layers\": "));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  HnVkDeviceInfo dev;
  HnError err = { 0 };
  int n = hn_vk_list_devices (&dev, 1, &err);
  if (!g_getenv ("HANASHI_TESTDATA") || n <= 0) {
    g_test_skip (n < 0 ? err.message : "no Vulkan device or no test data");
    return g_test_run ();
  }
  g_strlcpy (device_name, dev.name, sizeof device_name);
  n_devices = n;
  tmpdir = g_dir_make_tmp ("hanashi-vulkan-XXXXXX", NULL);
  g_test_add_func ("/cli-vulkan/devices", test_devices);
  g_test_add_func ("/cli-vulkan/bench-names-device", test_bench_names_device);
  g_test_add_func ("/cli-vulkan/session-device-to-cpu", test_session_device_to_cpu);
  g_test_add_func ("/cli-vulkan/session-cpu-to-device", test_session_cpu_to_device);
  g_test_add_func ("/cli-vulkan/out-of-memory", test_device_out_of_memory);
  g_test_add_func ("/cli-vulkan/shader-fails-to-build", test_shader_fails_to_build);
  g_test_add_func ("/cli-vulkan/no-push-descriptors", test_no_push_descriptors);
  g_test_add_func ("/cli-vulkan/tensor-too-large-to-bind", test_tensor_too_large_to_bind);
  g_test_add_func ("/cli-vulkan/no-driver", test_no_driver);
  g_test_add_func ("/cli-vulkan/device-lost-in-generate", test_device_lost_in_generate);
  g_test_add_func ("/cli-vulkan/gpu-layers-auto", test_gpu_layers_auto);
  g_test_add_func ("/cli-vulkan/gpu-device", test_gpu_device);
  int status = g_test_run ();
  g_autofree char *session = g_build_filename (tmpdir, "shared.hnsession", NULL);
  g_remove (session);
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return status;
}
