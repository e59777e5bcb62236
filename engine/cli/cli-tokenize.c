/* hanashi-cli tokenize / detokenize — the tokenizer from the command line.
 *
 *   hanashi-cli tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--parse-special]
 *     prints the ids as a JSON array on one line, e.g. [1, 15043, 3186]
 *     (BOS/EOS are added as the vocabulary asks unless --no-bos).
 *   hanashi-cli detokenize -m MODEL --ids 1,2,3
 *     prints the text exactly (no added newline); control tokens are not printed.
 *
 * MODEL may hold only a vocabulary: only the GGUF metadata is read, never the weights.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "cli-common.h"
#include "hn-gguf.h"
#include "hn-vocab.h"

#include <stdlib.h>
#include <string.h>

int cli_tokenize(int argc, char **argv);
int cli_detokenize(int argc, char **argv);

static HnVocab *
open_vocab(const char *path, HnError *err)
{
  HnGguf *g = hn_gguf_open(path, err);
  if (g == NULL)
    return NULL;
  HnVocab *v = hn_vocab_load(g, err);
  hn_gguf_close(g);
  if (v != NULL)
    cli_notice(hn_vocab_notice(v));
  return v;
}

int
cli_tokenize(int argc, char **argv)
{
  const char *model = NULL, *prompt = NULL, *file = NULL;
  bool no_bos = false, parse_special = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) && i + 1 < argc)
      model = argv[++i];
    else if ((strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) && i + 1 < argc)
      prompt = argv[++i];
    else if ((strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0) && i + 1 < argc)
      file = argv[++i];
    else if (strcmp(a, "--no-bos") == 0)
      no_bos = true;
    else if (strcmp(a, "--parse-special") == 0)
      parse_special = true;
    else
      return cli_fail("tokenize: unexpected argument '%s' (usage: tokenize -m MODEL (-p TEXT | -f FILE) "
                      "[--no-bos] [--parse-special])", a);
  }
  if (model == NULL)
    return cli_fail("tokenize: -m MODEL is required");
  if ((prompt == NULL) == (file == NULL))
    return cli_fail("tokenize: give exactly one of -p TEXT or -f FILE");
  HnError err = { 0 };
  char *owned = NULL;
  size_t len;
  if (file != NULL) {
    owned = cli_read_file(file, &len, &err);
    if (owned == NULL)
      return cli_fail_error(&err);
    prompt = owned;
  } else
    len = strlen(prompt);
  HnVocab *v = open_vocab(model, &err);
  if (v == NULL) {
    free(owned);
    return cli_fail_error(&err);
  }
  int32_t n = hn_tokenize(v, prompt, len, !no_bos, parse_special, NULL, 0, &err);
  int32_t *ids = NULL;
  if (n < 0 && n != INT32_MIN) {
    ids = malloc(sizeof(int32_t) * (size_t)-n);
    n = ids ? hn_tokenize(v, prompt, len, !no_bos, parse_special, ids, -n, &err) : INT32_MIN;
    if (ids == NULL)
      hn_error_set(&err, HN_ERR_NOMEM, "out of memory");
  }
  int status = 0;
  if (n == INT32_MIN)
    status = cli_fail_error(&err);
  else {
    fputc('[', stdout);
    for (int32_t i = 0; i < n; i++)
      printf("%s%d", i ? ", " : "", ids[i]);
    fputs("]\n", stdout);
  }
  free(ids);
  free(owned);
  hn_vocab_free(v);
  return status;
}

int
cli_detokenize(int argc, char **argv)
{
  const char *model = NULL, *ids_text = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) && i + 1 < argc)
      model = argv[++i];
    else if (strcmp(a, "--ids") == 0 && i + 1 < argc)
      ids_text = argv[++i];
    else
      return cli_fail("detokenize: unexpected argument '%s' (usage: detokenize -m MODEL --ids 1,2,3)", a);
  }
  if (model == NULL || ids_text == NULL)
    return cli_fail("detokenize: -m MODEL and --ids 1,2,3 are required");
  int32_t *ids;
  size_t n;
  if (!cli_parse_ids(ids_text, &ids, &n))
    return cli_fail("detokenize: --ids must be a comma-separated list of token ids");
  HnError err = { 0 };
  HnVocab *v = open_vocab(model, &err);
  if (v == NULL) {
    free(ids);
    return cli_fail_error(&err);
  }
  int status = 0;
  int64_t len = hn_detokenize(v, ids, n, true, false, NULL, 0, &err);
  char *buf = len > 0 ? malloc((size_t)len) : NULL;
  if (len < 0)
    status = cli_fail_error(&err);
  else if (len > 0 && buf == NULL)
    status = cli_fail("out of memory");
  else {
    if (len > 0)
      hn_detokenize(v, ids, n, true, false, buf, (size_t)len, &err);
    fwrite(buf, 1, (size_t)len, stdout);
  }
  free(buf);
  free(ids);
  hn_vocab_free(v);
  return status;
}
