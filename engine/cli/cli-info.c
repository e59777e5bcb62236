/* hanashi-cli info MODEL — what a model file is, one "key: value" line each. */
#include <stdio.h>
#include <string.h>

#include "cli-common.h"
#include "hn-model.h"

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

int
cli_info(int argc, char **argv)
{
  if (argc != 2 || argv[1][0] == '-')
    return cli_fail("usage: hanashi-cli info MODEL");
  HnError err = { 0 };
  HnModel *model = hn_model_load(argv[1], NULL, &err);
  if (!model)
    return cli_fail_error(&err);
  char types[512], size[64];
  hn_model_type_summary(model, types, sizeof types);
  human_size(hn_model_file_size(model), size, sizeof size);
  printf("architecture: %s\n", hn_model_arch(model));
  printf("parameters: %lld\n", (long long) hn_model_n_params(model));
  if (hn_model_n_expert(model) > 0)
    printf("experts: %d used of %d\n", hn_model_n_expert_used(model), hn_model_n_expert(model));
  printf("weight types: %s\n", types);
  printf("context length: %d\n", hn_model_n_ctx_train(model));
  printf("vocabulary size: %d\n", hn_model_n_vocab(model));
  printf("file size: %s\n", size);
  hn_model_free(model);
  return 0;
}
