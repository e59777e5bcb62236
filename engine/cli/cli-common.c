/* cli-common.c — argument and error helpers shared by the hanashi-cli subcommands.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "cli-common.h"
#include "hn-array.h"

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
