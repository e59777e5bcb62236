/* hanashi-cli info MODEL — what a model file is, one "key: value" line each.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdio.h>
#include <string.h>

#include "cli-common.h"
#include "hn-model.h"
#include "hn-vk.h"

int cli_info(int argc, char **argv);

static void
human_size(size_t bytes, char *buf, size_t size)
{
  const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
  double v = (double) bytes;
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, size, u ? "%.1f %s (%zu bytes)" : "%.0f %s", v, units[u], bytes);
}

/* What sets the architecture apart: shape, attention window, caps, norms, rotation. */
static void
print_particulars(const HnModel *model)
{
  HnModelDescription d;
  hn_model_describe(model, &d);
  printf("layers: %d\n", d.n_layer);
  printf("embedding size: %d\n", d.n_embd);
  printf("feed-forward size: %d\n", d.n_ff);
  printf("attention heads: %d (%d key/value)\n", d.n_head, d.n_head_kv);
  printf("head size: %d\n", d.head_dim);
  if (d.sliding_window > 0) {
    printf("sliding window: %d tokens on %d of %d layers\n", d.sliding_window, d.n_sliding, d.n_layer);
    /* one letter per layer: S through the window, G over the whole context */
    printf("layer pattern: ");
    for (int i = 0; i < d.n_layer; i++)
      putchar(d.layer_sliding[i] ? 'S' : 'G');
    printf(" (S sliding window, G global)\n");
  } else {
    printf("sliding window: none\n");
  }
  if (d.attn_softcap > 0.0f)
    printf("attention logit soft-cap: %g\n", d.attn_softcap);
  if (d.final_softcap > 0.0f)
    printf("final logit soft-cap: %g\n", d.final_softcap);
  printf("q/k norm: %s\n", d.qk_norm ? "yes" : "no");
  printf("rope: %s, base %.9g, %d of %d dimensions", d.neox_rope ? "neox" : "normal", d.rope_base,
         d.rope_dims, d.head_dim);
  if (d.rope_linear_factor != 1.0f)
    printf(", linear scaling %g%s", d.rope_linear_factor, d.rope_local_base > 0.0f ? " (global layers)" : "");
  if (d.rope_local_base > 0.0f)
    printf(", sliding layers base %.9g unscaled", d.rope_local_base);
  if (d.rope_long_short)
    printf(", long/short frequency factors");
  if (d.rope_freq_factors)
    printf(", frequency factors");
  printf("\n");
  if (d.n_expert > 0)
    printf("experts: %d used of %d\n", d.n_expert_used, d.n_expert);
}

/* hanashi-cli info --devices: the Vulkan devices, numbered as --gpu-device and the
 * preferences count them. */
static int
list_devices(void)
{
  HnVkDeviceInfo devs[16];
  HnError err = { 0 };
  int n = hn_vk_list_devices(devs, 16, &err);
  if (n < 0) {
    printf("no Vulkan devices: %s\n", err.message);
    return 0;
  }
  if (n == 0)
    printf("no Vulkan devices: the Vulkan driver reports none\n");
  for (int i = 0; i < n && i < 16; i++) {
    char mem[64];
    human_size(devs[i].memory, mem, sizeof mem);
    printf("device %d: %s\n  type: %s\n  memory: %s\n  driver: %s\n  vulkan: %u.%u.%u\n", i, devs[i].name,
           devs[i].type, mem, devs[i].driver, devs[i].api_version >> 22, (devs[i].api_version >> 12) & 0x3ffu,
           devs[i].api_version & 0xfffu);
  }
  return 0;
}

int
cli_info(int argc, char **argv)
{
  if (argc == 2 && strcmp(argv[1], "--devices") == 0)
    return list_devices();
  if (argc != 2 || argv[1][0] == '-')
    return cli_fail("usage: hanashi-cli info MODEL | hanashi-cli info --devices");
  HnError err = { 0 };
  HnModel *model = hn_model_load(argv[1], NULL, &err);
  if (!model)
    return cli_fail_error(&err);
  char types[512], size[64];
  hn_model_type_summary(model, types, sizeof types);
  human_size(hn_model_file_size(model), size, sizeof size);
  printf("architecture: %s\n", hn_model_arch(model));
  printf("parameters: %lld\n", (long long) hn_model_n_params(model));
  printf("weight types: %s\n", types);
  printf("context length: %d\n", hn_model_n_ctx_train(model));
  printf("vocabulary size: %d\n", hn_model_n_vocab(model));
  printf("file size: %s\n", size);
  print_particulars(model);
  hn_model_free(model);
  return 0;
}
