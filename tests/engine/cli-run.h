/* cli-run.h: running hanashi-cli (the binary in HANASHI_CLI) from a test and keeping what
 * it wrote and how it ended, for the tests of its subcommands.
 *
 * The output is read with g_spawn_sync, on the calling thread.  GSubprocess would hand its
 * buffers to GLib's worker threads, a hand-over ThreadSanitizer cannot see (the
 * engine-thread suite runs under TSan without suppressions); standard input therefore
 * comes from a file rather than a pipe.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>
#include <stdarg.h>
#include <sys/wait.h>

typedef struct {
  char *out, *err; /* standard output and error, never NULL */
  int status;      /* the exit status; -1 when a signal ended the process */
} CliRun;

static inline void
cli_run_clear (CliRun *r)
{
  g_clear_pointer (&r->out, g_free);
  g_clear_pointer (&r->err, g_free);
}

/* Runs hanashi-cli @subcommand (NULL: @args name it) with @args (NULL-terminated), in the
 * environment @envp (NULL: this process's), with standard input read from the file
 * @stdin_path (NULL: this process's). */
static inline CliRun
cli_run_full (const char *subcommand, const char *stdin_path, char **envp, const char *const *args)
{
  const char *cli = g_getenv ("HANASHI_CLI");
  g_assert_nonnull (cli);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) stdin_envp = NULL;
  if (stdin_path != NULL)
    {
      /* the shell opens the file and then becomes hanashi-cli */
      g_ptr_array_add (argv, (gpointer) "/bin/sh");
      g_ptr_array_add (argv, (gpointer) "-c");
      g_ptr_array_add (argv, (gpointer) "exec \"$0\" \"$@\" < \"$HANASHI_TEST_STDIN\"");
      stdin_envp = g_environ_setenv (envp != NULL ? g_strdupv (envp) : g_get_environ (), "HANASHI_TEST_STDIN",
                                     stdin_path, TRUE);
      envp = stdin_envp;
    }
  g_ptr_array_add (argv, (gpointer) cli);
  if (subcommand != NULL)
    g_ptr_array_add (argv, (gpointer) subcommand);
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  CliRun r = { 0 };
  g_autoptr (GError) error = NULL;
  int wait_status = 0;
  g_assert_true (g_spawn_sync (NULL, (char **) argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL, &r.out, &r.err,
                               &wait_status, &error));
  g_assert_no_error (error);
  r.status = WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : -1;
  if (r.out == NULL)
    r.out = g_strdup ("");
  if (r.err == NULL)
    r.err = g_strdup ("");
  return r;
}

/* hanashi-cli with @args (NULL-terminated), this process's environment and input. */
static inline CliRun
cli_run_argv (const char *const *args)
{
  return cli_run_full (NULL, NULL, NULL, args);
}

/* hanashi-cli with the arguments given, up to a NULL. */
G_GNUC_NULL_TERMINATED static inline CliRun
cli_run (const char *first, ...)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  va_list ap;
  va_start (ap, first);
  for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (args, (gpointer) a);
  va_end (ap);
  g_ptr_array_add (args, NULL);
  return cli_run_argv ((const char *const *) args->pdata);
}

/* The exit status of hanashi-cli with @args (-1: a signal ended it), its standard output
 * and error handed to @out and @err (to free). */
static inline int
cli_run_status (const char *const *args, char **out, char **err)
{
  CliRun r = cli_run_argv (args);
  *out = r.out;
  *err = r.err;
  return r.status;
}

/* The standard output of a run that had to succeed (to free): any other end fails the test
 * with what the run wrote on standard error, which goes to @err_out when that is not NULL. */
static inline char *
cli_run_output (CliRun r, char **err_out)
{
  if (r.status != 0)
    g_error ("hanashi-cli failed: %s", r.err);
  if (err_out != NULL)
    *err_out = r.err;
  else
    g_free (r.err);
  return r.out;
}
