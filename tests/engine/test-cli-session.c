/* hanashi-cli generate --session FILE: the first run saves, the next reuses the common
 * prefix and prints how much; the output is what a run without a session prints; a damaged
 * file is reported, not reused, and replaced by a good one.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "cli-run.h"

#define MODEL "tiny-llama-spm-q8_0.gguf"

static char *tmpdir;

static char *
run (const char *prompt, const char *session, char **err_out)
{
  g_autofree char *model = g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", MODEL, NULL);
  const char *args[] = { "generate", "-m", model, "-p", prompt, "-n", "6", "--ids", "-t", "2",
                         session != NULL ? "--session" : NULL, session, NULL };
  return cli_run_output (cli_run_argv (args), err_out);
}

static void
test_session_reuse (void)
{
  g_autofree char *session = g_build_filename (tmpdir, "chat.hnsession", NULL);
  const char *first = "Once upon a time there was a little";
  const char *second = "Once upon a time there was a little cat who liked";

  g_autofree char *err1 = NULL;
  g_autofree char *out1 = run (first, session, &err1);
  g_assert_nonnull (strstr (err1, "session: reused 0 of "));
  g_assert_true (g_file_test (session, G_FILE_TEST_IS_REGULAR));
  g_autofree char *plain1 = run (first, NULL, NULL);
  g_assert_cmpstr (out1, ==, plain1);

  /* the second prompt extends the first: everything the first evaluated is reused */
  g_autofree char *err2 = NULL;
  g_autofree char *out2 = run (second, session, &err2);
  g_autofree char *plain2 = run (second, NULL, NULL);
  g_assert_cmpstr (out2, ==, plain2);
  guint reused = 0, total = 0;
  const char *line = strstr (err2, "session: reused ");
  g_assert_nonnull (line);
  g_assert_cmpint (sscanf (line, "session: reused %u of %u prompt tokens", &reused, &total), ==, 2);
  g_assert_cmpuint (reused, >, 5);
  g_assert_cmpuint (reused, <, total);

  /* a damaged file: not reused, said so, same output, replaced by a loadable one */
  g_assert_true (g_file_set_contents (session, "HNSESSN\0garbage", 15, NULL));
  g_autofree char *err3 = NULL;
  g_autofree char *out3 = run (second, session, &err3);
  g_assert_cmpstr (out3, ==, plain2);
  g_assert_nonnull (strstr (err3, "session: file not used ("));
  g_assert_nonnull (strstr (err3, "session: reused 0 of "));
  g_autofree char *err4 = NULL;
  g_autofree char *out4 = run (second, session, &err4);
  g_assert_cmpstr (out4, ==, plain2);
  g_assert_null (strstr (err4, "file not used"));
  g_assert_null (strstr (err4, "session: reused 0 of "));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (g_getenv ("HANASHI_TESTDATA") == NULL || g_getenv ("HANASHI_CLI") == NULL) {
    g_test_message ("HANASHI_TESTDATA or HANASHI_CLI is not set");
    return 77;
  }
  tmpdir = g_dir_make_tmp ("hanashi-cli-session-XXXXXX", NULL);
  g_test_add_func ("/cli/session", test_session_reuse);
  int r = g_test_run ();
  g_autofree char *session = g_build_filename (tmpdir, "chat.hnsession", NULL);
  g_unlink (session);
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return r;
}
