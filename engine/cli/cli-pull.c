/* hanashi-cli pull URL -o FILE — downloads a model with the app's download code:
 * progress on stderr, resumes FILE.part when it exists, verifies before renaming.
 * --sha256 HEX and --size BYTES are checked while the file arrives (a mismatch deletes
 * it); --revision pins an "owner/repo" download to a commit; only https is fetched.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "cli-common.h"

#include "hanashi-download.h"

#include <errno.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_pull(int argc, char **argv);

#define PULL_USAGE "hanashi-cli pull URL -o FILE [--file NAME] [--revision REV] [--sha256 HEX] [--size BYTES]"

typedef struct {
  GMainLoop *loop;
  gboolean is_tty;
} PullState;

static void
on_progress(GObject *object, GParamSpec *pspec, gpointer data)
{
  PullState *state = data;
  HanashiDownload *download = HANASHI_DOWNLOAD(object);
  if (hanashi_download_get_state(download) != HANASHI_DOWNLOAD_STATE_RUNNING)
    return;
  g_autofree char *text = hanashi_download_format_progress(download);
  /* On a terminal, redraw one line; in a log, print a line now and then. */
  if (state->is_tty)
    fprintf(stderr, "\r\033[K%s", text);
  else if (g_str_equal(pspec->name, "total"))
    fprintf(stderr, "%s\n", text);
}

static void
on_finished(HanashiDownload *download, gpointer data)
{
  PullState *state = data;
  if (state->is_tty)
    fprintf(stderr, "\r\033[K");
  g_main_loop_quit(state->loop);
}

int
cli_pull(int argc, char **argv)
{
  const char *source = NULL, *output = NULL, *file = NULL, *sha256 = NULL, *revision = NULL;
  const char *size_text = NULL;

  for (int i = 1; i < argc; i++) {
    if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) && i + 1 < argc)
      output = argv[++i];
    else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc)
      file = argv[++i];
    else if (strcmp(argv[i], "--sha256") == 0 && i + 1 < argc)
      sha256 = argv[++i];
    else if (strcmp(argv[i], "--revision") == 0 && i + 1 < argc)
      revision = argv[++i];
    else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
      size_text = argv[++i];
    else if (argv[i][0] == '-')
      return cli_fail("unknown or incomplete option '%s' (usage: " PULL_USAGE ")", argv[i]);
    else if (source == NULL)
      source = argv[i];
    else
      return cli_fail("unexpected argument '%s'", argv[i]);
  }
  if (source == NULL || output == NULL)
    return cli_fail("usage: " PULL_USAGE);
  if (sha256 != NULL && !hanashi_download_sha256_is_valid(sha256))
    return cli_fail("--sha256 '%s' is not a SHA-256 checksum (64 hexadecimal digits)", sha256);
  guint64 expected_size = 0;
  if (size_text != NULL) {
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(size_text, &end, 10);
    if (errno != 0 || end == size_text || *end != '\0' || value == 0 || size_text[0] == '-')
      return cli_fail("--size '%s' is not a size in bytes", size_text);
    expected_size = value;
  }

  setlocale(LC_ALL, "");
  g_autoptr(GError) error = NULL;
  g_autofree char *uri = hanashi_download_resolve_uri_at(source, file, revision, &error);
  if (uri == NULL)
    return cli_fail("%s", error->message);

  g_autoptr(GFile) destination = g_file_new_for_commandline_arg(output);
  g_autoptr(HanashiDownload) download = hanashi_download_new(uri, destination, sha256);
  hanashi_download_set_expected_size(download, expected_size);
  PullState state = { g_main_loop_new(NULL, FALSE), isatty(STDERR_FILENO) };
  g_signal_connect(download, "notify::received", G_CALLBACK(on_progress), &state);
  g_signal_connect(download, "notify::total", G_CALLBACK(on_progress), &state);
  g_signal_connect(download, "finished", G_CALLBACK(on_finished), &state);

  hanashi_download_start(download);
  g_main_loop_run(state.loop);
  g_main_loop_unref(state.loop);

  if (hanashi_download_get_state(download) != HANASHI_DOWNLOAD_STATE_DONE) {
    const GError *failure = hanashi_download_get_error(download);
    return cli_fail("%s", failure ? failure->message : "the download did not finish");
  }
  g_autofree char *received = g_format_size(hanashi_download_get_received(download));
  fprintf(stderr, "downloaded %s to %s\n", received, output);
  return 0;
}
