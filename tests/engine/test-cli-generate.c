/* Every sampling option of `hanashi-cli generate` that issue 5 names exists with exactly that
 * spelling, is listed by --help, is accepted with a valid value, and an out-of-range value is
 * refused with a message that names it. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

static const struct {
  const char *option, *good, *bad;
} options[] = {
  { "--temp", "0.7", "-1" },
  { "--top-k", "40", "-5" },
  { "--top-p", "0.9", "1.5" },
  { "--min-p", "0.05", "2" },
  { "--typical", "0.95", "-0.5" },
  { "--repeat-penalty", "1.1", "-3" },
  { "--repeat-last-n", "64", "-7" },
  { "--frequency-penalty", "0.5", "9" },
  { "--presence-penalty", "0.5", "-9" },
  { "--mirostat", "2", "3" },
  { "--mirostat-tau", "5", "-1" },
  { "--mirostat-eta", "0.1", "-1" },
  { "--seed", "42", "x" },
  { "--logit-bias", "13=-1.5", "13" },
  { "--stop", "\n\n", NULL },
  { "--grammar-file", "GRAMMAR", "/nonexistent/grammar.gbnf" },
  { "--json-schema", "SCHEMA", "/nonexistent/schema.json" },
  { "--cfg-negative-prompt", "Be rude.", NULL },
  { "--cfg-scale", "1.5", "-2" },
};

static int
run (const char *const *extra, char **out, char **err)
{
  g_autofree char *model = g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", "tiny-llama-spm-q8_0.gguf", NULL);
  GPtrArray *argv = g_ptr_array_new ();
  const char *fixed[] = { g_getenv ("HANASHI_CLI"), "generate", "-m", model, "-p", "Hello", "-n", "2", "-t", "1" };
  for (size_t i = 0; i < G_N_ELEMENTS (fixed); i++)
    g_ptr_array_add (argv, (gpointer) fixed[i]);
  for (size_t i = 0; extra[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) extra[i]);
  g_ptr_array_add (argv, NULL);
  int status = 0;
  g_assert_true (g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, out, err, &status, NULL));
  g_ptr_array_unref (argv);
  return g_spawn_check_wait_status (status, NULL) ? 0 : 1;
}

static void
test_options (void)
{
  g_autofree char *grammar = g_build_filename (g_getenv ("HANASHI_GRAMMARS"), "yes-no.gbnf", NULL);
  g_autofree char *dir = g_dir_make_tmp ("hanashi-cli-generate-XXXXXX", NULL);
  g_autofree char *schema = g_build_filename (dir, "schema.json", NULL);
  g_assert_true (g_file_set_contents (schema, "{\"enum\": [\"yes\", \"no\"]}", -1, NULL));

  g_autofree char *help = NULL, *help_err = NULL;
  const char *help_args[] = { "--help", NULL };
  g_assert_cmpint (run (help_args, &help, &help_err), ==, 0);
  g_autofree char *help_text = g_strconcat (help, help_err, NULL);

  for (size_t i = 0; i < G_N_ELEMENTS (options); i++) {
    const char *opt = options[i].option;
    /* listed as a whole word in the help */
    g_autofree char *pattern = g_strdup_printf ("(^|[^-a-z])%s([^-a-z]|$)", opt);
    if (!g_regex_match_simple (pattern, help_text, G_REGEX_MULTILINE, 0))
      g_error ("%s is not in 'generate --help'", opt);

    const char *good = options[i].good;
    if (strcmp (good, "GRAMMAR") == 0)
      good = grammar;
    else if (strcmp (good, "SCHEMA") == 0)
      good = schema;
    /* guidance needs its negative prompt (alone, --cfg-scale is refused for lack of it) */
    gboolean cfg = strcmp (opt, "--cfg-scale") == 0;
    const char *ok_args[] = { opt, good, cfg ? "--cfg-negative-prompt" : NULL, "Be rude.", NULL };
    g_autofree char *out = NULL, *err = NULL;
    if (run (ok_args, &out, &err) != 0)
      g_error ("%s %s was refused: %s", opt, good, err);

    if (options[i].bad != NULL) {
      const char *bad_args[] = { opt, options[i].bad, cfg ? "--cfg-negative-prompt" : NULL, "Be rude.", NULL };
      g_autofree char *bout = NULL, *berr = NULL;
      if (run (bad_args, &bout, &berr) == 0)
        g_error ("%s %s was accepted", opt, options[i].bad);
      g_assert_nonnull (strstr (berr, "hanashi-cli: "));
    }
  }
  /* an option that does not exist is refused */
  const char *unknown[] = { "--temperature", "0.5", NULL };
  g_autofree char *uout = NULL, *uerr = NULL;
  g_assert_cmpint (run (unknown, &uout, &uerr), ==, 1);
  g_assert_nonnull (strstr (uerr, "--temperature"));
  g_unlink (schema);
  g_rmdir (dir);
}

/* A grammar too ambiguous to follow in full gets a notice on stderr; an ordinary one none. */
static void
test_truncated_grammar_notice (void)
{
  g_autofree char *dir = g_dir_make_tmp ("hanashi-cli-generate-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "ambiguous.gbnf", NULL);
  g_assert_true (g_file_set_contents (path,
      "root ::= item (\"uu(u,\"* item){217}\n"
      "item ::= [ax42\" | [^\"-~\\*u15e9]+ | \"\\x41\" | [^\"\\\\\\n]?\n", -1, NULL));
  const char *args[] = { "--grammar-file", path, NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (run (args, &out, &err), ==, 0);
  g_assert_nonnull (strstr (err, "hanashi-cli: notice: the grammar was too ambiguous to follow in full"));

  g_autofree char *plain = g_build_filename (g_getenv ("HANASHI_GRAMMARS"), "json.gbnf", NULL);
  const char *plain_args[] = { "--grammar-file", plain, NULL };
  g_autofree char *pout = NULL, *perr = NULL;
  g_assert_cmpint (run (plain_args, &pout, &perr), ==, 0);
  g_assert_null (strstr (perr, "too ambiguous"));
  g_unlink (path);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (g_getenv ("HANASHI_TESTDATA") == NULL || g_getenv ("HANASHI_CLI") == NULL || g_getenv ("HANASHI_GRAMMARS") == NULL) {
    g_test_message ("HANASHI_TESTDATA, HANASHI_CLI or HANASHI_GRAMMARS is not set");
    return 77;
  }
  g_test_add_func ("/cli/generate-options", test_options);
  g_test_add_func ("/cli/generate-grammar-notice", test_truncated_grammar_notice);
  return g_test_run ();
}
