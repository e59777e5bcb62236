/* cli-common.c — argument and error helpers shared by the hanashi-cli subcommands.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "cli-common.h"
#include "cli-sampling.h"
#include "hn-array.h"
#include "hn-context.h"
#include "hn-vk.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int
cli_fail(const char *fmt, ...)
{
  char message[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  /* One line, whatever the message contains. */
  for (char *p = message; *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  fprintf(stderr, "hanashi-cli: error: %s\n", message);
  return 1;
}

int
cli_fail_error(const HnError *err)
{
  return cli_fail("%s", err && err->message[0] ? err->message : "unknown error");
}

bool
cli_parse_int(const char *text, long long min, long long max, long long *out)
{
  if (text == NULL || *text == '\0')
    return false;
  char *end = NULL;
  errno = 0;
  long long value = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < min || value > max)
    return false;
  *out = value;
  return true;
}

bool
cli_parse_gpu_layers(const char *value, long long *out)
{
  if (strcmp(value, "auto") == 0) {
    *out = HN_GPU_LAYERS_AUTO;
    return true;
  }
  return cli_parse_int(value, 0, 1 << 20, out);
}

bool
cli_parse_gpu_device(const char *value, long long *out)
{
  return cli_parse_int(value, 0, 1023, out);
}

bool
cli_check_gpu_device(long long device)
{
  if (device < 0)
    return true;
  HnError err = { 0 };
  int n = hn_vk_list_devices(NULL, 0, &err);
  if (n < 0) {
    cli_fail("there is no Vulkan device number %lld: %s", device, err.message);
    return false;
  }
  if (device >= n) {
    cli_fail("there is no Vulkan device number %lld (%d found; 'hanashi-cli info --devices' lists them)", device, n);
    return false;
  }
  return true;
}

bool
cli_parse_run_option(CliRunOption which, const char *value, long long *out)
{
  switch (which) {
  case CLI_RUN_THREADS:
    if (cli_parse_int(value, 1, 1024, out))
      return true;
    cli_fail("invalid thread count '%s'", value);
    return false;
  case CLI_RUN_CTX:
    if (cli_parse_int(value, 1, 1 << 24, out))
      return true;
    cli_fail("invalid context size '%s'", value);
    return false;
  case CLI_RUN_GPU_LAYERS:
    if (cli_parse_gpu_layers(value, out))
      return true;
    cli_fail("invalid layer count '%s'", value);
    return false;
  case CLI_RUN_GPU_DEVICE:
    if (cli_parse_gpu_device(value, out))
      return true;
    cli_fail("invalid device number '%s'", value);
    return false;
  }
  return false;
}

bool
cli_parse_float(const char *text, double *out)
{
  if (text == NULL || *text == '\0')
    return false;
  char *end = NULL;
  errno = 0;
  double value = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0')
    return false;
  *out = value;
  return true;
}

bool
cli_parse_ids(const char *text, int32_t **ids_out, size_t *n_out)
{
  size_t cap = 16, n = 0;
  int32_t *ids = malloc(cap * sizeof *ids);
  if (ids == NULL)
    return false;
  const char *p = text;
  while (*p == ' ')
    p++;
  if (*p == '\0') {
    *ids_out = ids;
    *n_out = 0;
    return true;
  }
  for (;;) {
    while (*p == ' ')
      p++;
    char *end = NULL;
    errno = 0;
    long value = strtol(p, &end, 10);
    if (end == p || errno != 0 || value < 0 || value > INT32_MAX)
      goto fail;
    if (!HN_ARRAY_RESERVE(ids, cap, n + 1, 16))
      goto fail;
    ids[n++] = (int32_t)value;
    p = end;
    while (*p == ' ')
      p++;
    if (*p == '\0')
      break;
    if (*p != ',')
      goto fail;
    p++;
  }
  *ids_out = ids;
  *n_out = n;
  return true;
fail:
  free(ids);
  return false;
}

char *
cli_read_file(const char *path, size_t *len_out, HnError *err)
{
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    hn_error_set(err, HN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  if (buf == NULL) {
    fclose(f);
    hn_error_set(err, HN_ERR_NOMEM, "out of memory reading '%s'", path);
    return NULL;
  }
  for (;;) {
    /* room for at least one more byte and the terminating NUL */
    if (!HN_ARRAY_RESERVE(buf, cap, len + 2, 4096)) {
      free(buf);
      fclose(f);
      hn_error_set(err, HN_ERR_NOMEM, "out of memory reading '%s'", path);
      return NULL;
    }
    size_t got = fread(buf + len, 1, cap - len - 1, f);
    len += got;
    if (got == 0)
      break;
  }
  bool failed = ferror(f);
  fclose(f);
  if (failed) {
    free(buf);
    hn_error_set(err, HN_ERR_IO, "cannot read '%s'", path);
    return NULL;
  }
  buf[len] = '\0';
  if (len_out)
    *len_out = len;
  return buf;
}

void
cli_notice(const char *text)
{
  if (text != NULL)
    fprintf(stderr, "hanashi-cli: notice: %s\n", text);
}

bool
cli_tokenize_all(const HnVocab *vocab, const char *text, size_t len, int32_t **ids_out, size_t *n_out,
                 HnError *err)
{
  *ids_out = NULL;
  *n_out = 0;
  /* a first pass with no room returns -(tokens needed) */
  int32_t need = hn_tokenize(vocab, text, len, true, true, NULL, 0, err);
  if (need == INT32_MIN)
    return false;
  size_t n = need < 0 ? (size_t) -(int64_t) need : (size_t) need;
  int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
  if (ids == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory for the %zu tokens of the prompt", n);
  int32_t got = n ? hn_tokenize(vocab, text, len, true, true, ids, (int32_t) n, err) : 0;
  if (got < 0) {
    free(ids);
    if (got != INT32_MIN)
      hn_error_set(err, HN_ERR_INVALID_ARG, "the tokenizer gave a different count the second time");
    return false;
  }
  *ids_out = ids;
  *n_out = (size_t) got;
  return true;
}

int
cli_next_option(int argc, char **argv, int *i, const CliValueOption *options, size_t n_options,
                CliSamplingOptions *sampling, const char *command, const char **value)
{
  int found = -1;
  for (size_t k = 0; k < n_options; k++)
    if ((options[k].short_name && strcmp(argv[*i], options[k].short_name) == 0) ||
        strcmp(argv[*i], options[k].long_name) == 0)
      found = options[k].id;
  if (found < 0) {
    int r = cli_sampling_parse_arg(sampling, argc, argv, i);
    if (r < 0)
      return CLI_OPTION_ERROR;
    if (r == 0) {
      cli_fail("unknown option '%s' (try 'hanashi-cli %s --help')", argv[*i], command);
      return CLI_OPTION_ERROR;
    }
    (*i)--; /* the sampling parser moved past its option; the caller's loop moves on */
    return CLI_OPTION_SAMPLING;
  }
  if (*i + 1 >= argc) {
    cli_fail("option '%s' needs a value", argv[*i]);
    return CLI_OPTION_ERROR;
  }
  *value = argv[++*i];
  return found;
}

bool
cli_chat_model_load(CliChatModel *cm, const char *path)
{
  HnError err = { 0 };
  if (!(cm->model = hn_model_load(path, NULL, &err)) || !(cm->vocab = hn_vocab_load(hn_model_gguf(cm->model), &err))) {
    cli_fail_error(&err);
    return false;
  }
  cli_notice(hn_vocab_notice(cm->vocab));
  return true;
}

bool
cli_chat_model_start(CliChatModel *cm, CliSamplingOptions *sampling, long long n_predict, long long n_ctx,
                     long long threads, long long gpu_layers, long long gpu_device, bool print_params)
{
  HnError err = { 0 };
  if (!cli_check_gpu_device(gpu_device))
    return false;
  sampling->params.max_new_tokens = (int32_t) n_predict;
  if (!cli_sampling_finish(sampling, hn_model_n_vocab(cm->model)) || !cli_sampling_load_grammar(sampling, &cm->grammar))
    return false;
  if (print_params)
    cli_sampling_print_params(stderr, sampling);
  HnContextParams cp = hn_context_default_params();
  cp.n_ctx = (int) n_ctx;
  cp.n_threads = (int) threads;
  cp.n_gpu_layers = (int) gpu_layers;
  cp.gpu_device = (int) gpu_device;
  if (!(cm->chat_model = hn_chat_model_new(cm->model, cm->vocab, &err)) ||
      !(cm->chat = hn_chat_new(cm->chat_model, &cp, &err)) ||
      (cm->grammar && !hn_chat_model_grammar_vocab(cm->chat_model, &err))) {
    cli_fail_error(&err);
    return false;
  }
  cli_notice(hn_context_notice(hn_chat_context(cm->chat)));
  const char *device_notice = hn_context_gpu_notice(hn_chat_context(cm->chat));
  cm->gpu_notice_shown = device_notice ? strlen(device_notice) : 0;
  return true;
}

void
cli_chat_model_notice_device(CliChatModel *cm)
{
  const char *device_notice = hn_context_gpu_notice(hn_chat_context(cm->chat));
  size_t len = device_notice ? strlen(device_notice) : 0;
  if (len <= cm->gpu_notice_shown)
    return;
  const char *fresh = device_notice + cm->gpu_notice_shown;
  cli_notice(fresh + strspn(fresh, " "));
  cm->gpu_notice_shown = len;
}

void
cli_chat_model_clear(CliChatModel *cm)
{
  hn_chat_free(cm->chat);
  hn_chat_model_free(cm->chat_model);
  hn_grammar_free(cm->grammar);
  hn_vocab_free(cm->vocab);
  hn_model_free(cm->model);
  *cm = (CliChatModel) { 0 };
}
