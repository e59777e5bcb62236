/* hanashi-cli quantize IN.gguf OUT.gguf TYPE [-t THREADS] — converts a model to a weight
 * type or one of the common mixes (see hn-quantize.h for the rules).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "cli-common.h"

#include "hn-quantize.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_quantize(int argc, char **argv);

static bool
report_progress(void *user, int64_t done, int64_t total, const char *tensor, HnType type)
{
  if (*(bool *)user)
    fprintf(stderr, "\r\033[K[%lld/%lld] %s -> %s", (long long)done, (long long)total, tensor, hn_type_name(type));
  return true;
}

static void
list_targets(char *buf, size_t cap)
{
  buf[0] = '\0';
  for (const HnQuantizeTarget *t = hn_quantize_targets(); t->name != NULL; t++) {
    if (buf[0] != '\0')
      strncat(buf, " ", cap - strlen(buf) - 1);
    strncat(buf, t->name, cap - strlen(buf) - 1);
  }
}

int
cli_quantize(int argc, char **argv)
{
  const char *positional[3] = { NULL, NULL, NULL };
  int n_positional = 0;
  long long threads = 1;
  char names[256];
  list_targets(names, sizeof names);

  for (int i = 1; i < argc; i++) {
    if ((strcmp(argv[i], "-t") == 0 || strcmp(argv[i], "--threads") == 0) && i + 1 < argc) {
      if (!cli_parse_int(argv[++i], 1, 64, &threads))
        return cli_fail("--threads must be an integer from 1 to 64, not '%s'", argv[i]);
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      printf("Usage: hanashi-cli quantize IN.gguf OUT.gguf TYPE [-t THREADS]\nTypes: %s\n", names);
      return 0;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      return cli_fail("unknown or incomplete option '%s' (usage: hanashi-cli quantize IN.gguf OUT.gguf TYPE "
                      "[-t THREADS])", argv[i]);
    } else if (n_positional < 3) {
      positional[n_positional++] = argv[i];
    } else {
      return cli_fail("unexpected argument '%s'", argv[i]);
    }
  }
  if (n_positional != 3)
    return cli_fail("usage: hanashi-cli quantize IN.gguf OUT.gguf TYPE (types: %s)", names);

  const HnQuantizeTarget *target = hn_quantize_target_find(positional[2]);
  if (target == NULL)
    return cli_fail("unknown quantization type '%s' (types: %s)", positional[2], names);

  /* Writing over the input would unlink the file we are reading from. */
  struct stat in_st, out_st;
  if (stat(positional[0], &in_st) == 0 && stat(positional[1], &out_st) == 0 && in_st.st_dev == out_st.st_dev &&
      in_st.st_ino == out_st.st_ino)
    return cli_fail("output '%s' is the input file", positional[1]);

  bool tty = isatty(fileno(stderr));
  HnError err = { 0 };
  double start = hn_time_now();
  if (!hn_quantize_model(positional[0], positional[1], target, (int)threads, report_progress, &tty, &err)) {
    if (tty)
      fprintf(stderr, "\r\033[K");
    return cli_fail_error(&err);
  }
  if (tty)
    fprintf(stderr, "\r\033[K");
  struct stat st;
  double in_mb = stat(positional[0], &st) == 0 ? (double)st.st_size / 1e6 : 0.0;
  double out_mb = stat(positional[1], &st) == 0 ? (double)st.st_size / 1e6 : 0.0;
  printf("%s: %s, %.2f MB -> %.2f MB in %.1f s\n", positional[1], target->name, in_mb, out_mb,
         hn_time_now() - start);
  return 0;
}
