/* hanashi-cli logits -m MODEL (--tokens 1,2,3 | -p TEXT | -f FILE) -o OUT.f32 [-t THREADS] —
 * evaluates the tokens in one batch at positions 0..n-1 and writes every position's logits
 * (n × n_vocab LE f32).  A text (-p, or -f: a file's exact bytes) is tokenized as generate
 * does it: BOS/EOS as the vocabulary asks, special tokens parsed.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-common.h"
#include "hn-context.h"
#include "hn-vocab.h"

#define LOGITS_USAGE "usage: hanashi-cli logits -m MODEL (--tokens 1,2,3 | -p TEXT | -f FILE) -o OUT.f32 [-t THREADS] [-ngl N|auto] [--gpu-device N]"

int cli_logits(int argc, char **argv);

int
cli_logits(int argc, char **argv)
{
  const char *model_path = NULL, *tokens = NULL, *text = NULL, *text_file = NULL, *out_path = NULL;
  long long threads = 0, gpu_layers = 0, gpu_device = -1;
  for (int i = 1; i < argc; i++) {
    const char *opt = argv[i];
    if (i + 1 >= argc)
      return cli_fail("option '%s' needs a value (" LOGITS_USAGE ")", opt);
    const char *val = argv[++i];
    if (strcmp(opt, "-m") == 0 || strcmp(opt, "--model") == 0)
      model_path = val;
    else if (strcmp(opt, "--tokens") == 0)
      tokens = val;
    else if (strcmp(opt, "-p") == 0 || strcmp(opt, "--prompt") == 0)
      text = val;
    else if (strcmp(opt, "-f") == 0 || strcmp(opt, "--file") == 0)
      text_file = val;
    else if (strcmp(opt, "-o") == 0 || strcmp(opt, "--output") == 0)
      out_path = val;
    else if (strcmp(opt, "-t") == 0 || strcmp(opt, "--threads") == 0) {
      if (!cli_parse_int(val, 1, 1024, &threads))
        return cli_fail("invalid thread count '%s'", val);
    } else if (strcmp(opt, "-ngl") == 0 || strcmp(opt, "--gpu-layers") == 0) {
      if (!cli_parse_gpu_layers(val, &gpu_layers))
        return cli_fail("invalid layer count '%s'", val);
    } else if (strcmp(opt, "--gpu-device") == 0) {
      if (!cli_parse_gpu_device(val, &gpu_device))
        return cli_fail("invalid device number '%s'", val);
    } else
      return cli_fail("unknown option '%s'", opt);
  }
  if (!model_path || !out_path || (!!tokens + !!text + !!text_file) != 1)
    return cli_fail(LOGITS_USAGE);
  if (!cli_check_gpu_device(gpu_device))
    return 1;
  int32_t *ids = NULL;
  size_t n = 0;
  if (tokens && (!cli_parse_ids(tokens, &ids, &n) || n == 0)) {
    free(ids);
    return cli_fail("invalid token list '%s'", tokens);
  }
  HnError err = { 0 };
  char *file_text = NULL;
  size_t text_len = text ? strlen(text) : 0;
  if (text_file && !(text = file_text = cli_read_file(text_file, &text_len, &err)))
    return cli_fail_error(&err);
  HnModel *model = hn_model_load(model_path, NULL, &err);
  if (!model) {
    free(ids);
    free(file_text);
    return cli_fail_error(&err);
  }
  if (text) {
    HnVocab *vocab = hn_vocab_load(hn_model_gguf(model), &err);
    bool ok = vocab && cli_tokenize_all(vocab, text, text_len, &ids, &n, &err);
    hn_vocab_free(vocab);
    free(file_text);
    if (!ok || n == 0) {
      hn_model_free(model);
      free(ids);
      return ok ? cli_fail("the prompt gives no tokens") : cli_fail_error(&err);
    }
  }
  int status = 1;
  HnContext *ctx = NULL;
  int32_t *pos = malloc(n * sizeof *pos);
  bool *want = malloc(n * sizeof *want);
  FILE *f = NULL;
  if (!pos || !want) {
    status = cli_fail("out of memory");
    goto out;
  }
  if (n > (size_t) hn_model_n_ctx_train(model)) {
    status = cli_fail("the prompt is %zu tokens long, but this model's context holds at most %d tokens", n,
                      hn_model_n_ctx_train(model));
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    pos[i] = (int32_t) i;
    want[i] = true;
  }
  HnContextParams params = hn_context_default_params();
  params.n_ctx = (int) n;
  params.n_batch = (int) n;
  params.n_threads = (int) threads;
  params.n_gpu_layers = (int) gpu_layers;
  params.gpu_device = (int) gpu_device;
  if (!(ctx = hn_context_new(model, &params, &err))) {
    status = cli_fail_error(&err);
    goto out;
  }
  cli_notice(hn_context_notice(ctx));
  HnBatch batch = { .n_tokens = (int) n, .token = ids, .pos = pos, .want_logits = want };
  if (!hn_context_decode(ctx, &batch, &err)) {
    status = cli_fail_error(&err);
    goto out;
  }
  if (!(f = fopen(out_path, "wb"))) {
    status = cli_fail("cannot write '%s'", out_path);
    goto out;
  }
  size_t nv = (size_t) hn_model_n_vocab(model);
  for (size_t i = 0; i < n; i++)
    if (fwrite(hn_context_get_logits(ctx, (int) i), sizeof(float), nv, f) != nv) {
      status = cli_fail("cannot write '%s'", out_path);
      goto out;
    }
  if (fclose(f) != 0) {
    f = NULL;
    status = cli_fail("cannot write '%s'", out_path);
    goto out;
  }
  f = NULL;
  status = 0;
out:
  if (f)
    fclose(f);
  free(pos);
  free(want);
  free(ids);
  hn_context_free(ctx);
  hn_model_free(model);
  return status;
}
