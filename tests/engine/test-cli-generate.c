/* Every sampling option of `hanashi-cli generate` that issue 5 names exists with exactly that
 * spelling, is listed by --help, is accepted with a valid value, and an out-of-range value is
 * refused with a message that names it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <math.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-run.h"
#include "hn-params.h"

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
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  const char *fixed[] = { "generate", "-m", model, "-p", "Hello", "-n", "2", "-t", "1" };
  for (size_t i = 0; i < G_N_ELEMENTS (fixed); i++)
    g_ptr_array_add (args, (gpointer) fixed[i]);
  for (size_t i = 0; extra[i] != NULL; i++)
    g_ptr_array_add (args, (gpointer) extra[i]);
  g_ptr_array_add (args, NULL);
  return cli_run_status ((const char *const *) args->pdata, out, err);
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

/* The value a table parameter has after --print-params printed "key=value". */
static double
printed_value (const char *line, const char *key)
{
  g_autofree char *needle = g_strdup_printf (" %s=", key);
  const char *at = strstr (line, needle);
  if (at == NULL)
    g_error ("%s is not in '%s'", key, line);
  return g_ascii_strtod (at + strlen (needle), NULL);
}

/* The line of stderr that --print-params writes. */
static char *
sampling_line (const char *err)
{
  const char *at = strstr (err, "sampling:");
  g_assert_nonnull (at);
  const char *end = strchr (at, '\n');
  return g_strndup (at, end ? (gsize) (end - at) : strlen (at));
}

static gboolean
same_value (const HnParamDesc *d, double a, double b)
{
  return d->type == HN_PARAM_FLOAT ? (float) a == (float) b : a == b;
}

/* --help shows, for every parameter of the engine's table, the default of the table; the
 * only exception is the documented one (generate is greedy: temperature 0).  And what the
 * help says is what the sampler gets when no option is given. */
static void
test_help_shows_schema_defaults (void)
{
  g_autofree char *help = NULL, *help_err = NULL;
  const char *help_args[] = { "--help", NULL };
  g_assert_cmpint (run (help_args, &help, &help_err), ==, 0);
  g_autofree char *help_text = g_strconcat (help, help_err, NULL);

  const char *plain_args[] = { "--print-params", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (run (plain_args, &out, &err), ==, 0);
  g_autofree char *used = sampling_line (err);

  size_t n;
  const HnParamDesc *table = hn_params_table (&n);
  guint listed = 0;
  for (size_t i = 0; i < n; i++)
    {
      const HnParamDesc *d = &table[i];
      if (d->option == NULL)
        continue;
      g_autofree char *pattern = g_strdup_printf ("^  %s( [A-Z]+)? +[^\\n]*\\(default ([^)]+)\\)$", d->option);
      g_autoptr (GRegex) regex = g_regex_new (pattern, G_REGEX_MULTILINE, 0, NULL);
      g_autoptr (GMatchInfo) match = NULL;
      if (!g_regex_match (regex, help_text, 0, &match))
        g_error ("no help line with a default for %s in:\n%s", d->option, help_text);
      g_autofree char *shown = g_match_info_fetch (match, 2);
      double value = d->type == HN_PARAM_BOOL ? (g_str_equal (shown, "on") ? 1 : g_str_equal (shown, "off") ? 0 : NAN)
                                              : g_ascii_strtod (shown, NULL);
      double expected = g_str_equal (d->key, "temperature") ? 0.0 : d->def;
      if (!same_value (d, value, expected))
        g_error ("--help says the default of %s is %s, the schema %g", d->option, shown, expected);
      if (!same_value (d, printed_value (used, d->key), value))
        g_error ("--help says %s defaults to %s, but the sampler got '%s'", d->option, shown, used);
      listed++;
    }
  g_assert_cmpuint (listed, >=, 14);
}

/* Every parameter of the table, set on the command line to a value other than its default,
 * reaches the sampler exactly (max_new_tokens through -n). */
static void
test_params_reach_sampler (void)
{
  size_t n;
  const HnParamDesc *table = hn_params_table (&n);
  g_autoptr (GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GArray) expected = g_array_new (FALSE, FALSE, sizeof (double));
  for (size_t i = 0; i < n; i++)
    {
      const HnParamDesc *d = &table[i];
      double value = d->def + d->step <= d->max ? d->def + d->step : d->def - d->step;
      if (d->type == HN_PARAM_SEED)
        value = 4242;
      if (d->option == NULL)
        {
          g_assert_cmpstr (d->key, ==, "max_new_tokens");
          value = 2; /* run() passes -n 2 */
        }
      else if (d->type == HN_PARAM_BOOL)
        {
          g_assert_cmpfloat (value, ==, 1);
          g_ptr_array_add (args, g_strdup (d->option));
        }
      else
        {
          char text[G_ASCII_DTOSTR_BUF_SIZE];
          g_ptr_array_add (args, g_strdup (d->option));
          g_ptr_array_add (args, g_strdup (g_ascii_dtostr (text, sizeof text, value)));
        }
      g_array_append_val (expected, value);
    }
  g_ptr_array_add (args, g_strdup ("--print-params"));
  g_ptr_array_add (args, NULL);
  g_autofree char *out = NULL, *err = NULL;
  if (run ((const char *const *) args->pdata, &out, &err) != 0)
    g_error ("refused: %s", err);
  g_autofree char *used = sampling_line (err);
  for (size_t i = 0; i < n; i++)
    if (!same_value (&table[i], printed_value (used, table[i].key), g_array_index (expected, double, i)))
      g_error ("%s should be %g: %s", table[i].key, g_array_index (expected, double, i), used);
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

  /* a grammar too deep to expand within one step's work: the error names the work limit */
  g_autofree char *deep_path = g_build_filename (dir, "deep.gbnf", NULL);
  GString *deep = g_string_new ("root ::= r1\n");
  for (int i = 1; i < 200000; i++)
    g_string_append_printf (deep, "r%d ::= r%d \"y\"\n", i, i + 1);
  g_string_append (deep, "r200000 ::= \"x\"\n");
  g_assert_true (g_file_set_contents (deep_path, deep->str, (gssize) deep->len, NULL));
  g_string_free (deep, TRUE);
  const char *deep_args[] = { "--grammar-file", deep_path, NULL };
  g_autofree char *dout = NULL, *derr = NULL;
  g_assert_cmpint (run (deep_args, &dout, &derr), ==, 1);
  g_assert_true (g_str_has_prefix (derr, "hanashi-cli: error: the grammar is too large or too ambiguous to follow "
                                         "here: the work limit for one token was reached"));
  g_unlink (deep_path);
  g_unlink (path);
  g_rmdir (dir);
}

/* How many tokens `hanashi-cli tokenize -f FILE` gives (generate tokenizes the same way). */
static gsize
count_tokens (const char *model, const char *file)
{
  const char *args[] = { "tokenize", "-m", model, "-f", file, NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (cli_run_status (args, &out, &err), ==, 0);
  g_auto (GStrv) ids = g_strsplit (out, ",", -1);
  return g_strv_length (ids);
}

/* The model's context length, as `hanashi-cli info` reports it. */
static int
context_length (const char *model)
{
  const char *args[] = { "info", model, NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (cli_run_status (args, &out, &err), ==, 0);
  const char *line = strstr (out, "context length: ");
  g_assert_nonnull (line);
  return atoi (line + strlen ("context length: "));
}

/* -f FILE reads the prompt from a file: the same tokens as -p with its text; the file is
 * read byte for byte; a missing file and two prompt sources are refused in one line. */
static void
test_prompt_file (void)
{
  g_autofree char *model = g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", "tiny-llama-spm-q8_0.gguf", NULL);
  g_autofree char *dir = g_dir_make_tmp ("hanashi-cli-generate-XXXXXX", NULL);
  g_autofree char *file = g_build_filename (dir, "prompt.txt", NULL);
  const char *text = "The little red hen said:\n\"Who will help me plant this wheat?\"\n";
  g_assert_true (g_file_set_contents (file, text, -1, NULL));

  const char *by_text[] = { "generate", "-m", model, "-p", text, "-n", "6", "--ids", NULL };
  const char *by_file[] = { "generate", "-m", model, "-f", file, "-n", "6", "--ids", NULL };
  const char *by_long[] = { "generate", "-m", model, "--file", file, "-n", "6", "--ids", NULL };
  g_autofree char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL, *o3 = NULL, *e3 = NULL;
  g_assert_cmpint (cli_run_status (by_text, &o1, &e1), ==, 0);
  g_assert_cmpint (cli_run_status (by_file, &o2, &e2), ==, 0);
  g_assert_cmpint (cli_run_status (by_long, &o3, &e3), ==, 0);
  g_assert_cmpstr (o2, ==, o1);
  g_assert_cmpstr (o3, ==, o1);
  /* logits reads the same file: identical to evaluating its tokens given as ids */
  g_autofree char *f32_file = g_build_filename (dir, "file.f32", NULL);
  g_autofree char *f32_ids = g_build_filename (dir, "ids.f32", NULL);
  const char *tok[] = { "tokenize", "-m", model, "-f", file, NULL };
  g_autofree char *ids = NULL, *tok_err = NULL;
  g_assert_cmpint (cli_run_status (tok, &ids, &tok_err), ==, 0);
  g_strstrip (ids);
  g_autofree char *id_list = g_strndup (ids + 1, strlen (ids) - 2); /* without [ ] */
  const char *logits_file[] = { "logits", "-m", model, "-f", file, "-o", f32_file, NULL };
  const char *logits_ids[] = { "logits", "-m", model, "--tokens", id_list, "-o", f32_ids, NULL };
  g_autofree char *lo1 = NULL, *le1 = NULL, *lo2 = NULL, *le2 = NULL;
  g_assert_cmpint (cli_run_status (logits_file, &lo1, &le1), ==, 0);
  g_assert_cmpint (cli_run_status (logits_ids, &lo2, &le2), ==, 0);
  g_autofree char *a = NULL, *b = NULL;
  gsize a_len = 0, b_len = 0;
  g_assert_true (g_file_get_contents (f32_file, &a, &a_len, NULL));
  g_assert_true (g_file_get_contents (f32_ids, &b, &b_len, NULL));
  g_assert_cmpuint (a_len, ==, count_tokens (model, file) * 32000 * sizeof (float));
  g_assert_cmpmem (a, a_len, b, b_len);

  /* refusals, one line each */
  const char *missing[] = { "generate", "-m", model, "-f", "/nonexistent/prompt.txt", "-n", "2", NULL };
  const char *both[] = { "generate", "-m", model, "-f", file, "-p", "Hi", "-n", "2", NULL };
  const char *logits_missing[] = { "logits", "-m", model, "-f", "/nonexistent/prompt.txt", "-o", f32_file, NULL };
  const char *const *refused[] = { missing, both, logits_missing };
  const char *needles[] = { "cannot open '/nonexistent/prompt.txt'", "usage:", "cannot open '/nonexistent/prompt.txt'" };
  for (size_t i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      g_assert_cmpint (cli_run_status (refused[i], &out, &err), ==, 1);
      g_assert_true (g_str_has_prefix (err, "hanashi-cli: error: "));
      g_assert_nonnull (strstr (err, needles[i]));
      g_assert_true (strchr (err, '\n') == err + strlen (err) - 1);
    }
  g_unlink (f32_file);
  g_unlink (f32_ids);
  g_unlink (file);
  g_rmdir (dir);
}

/* No buffer of its own limits the prompt: one that fits the context runs, whatever its
 * length; one that does not gets one exact sentence with its length and the context's
 * (before, a prompt of more than four times the context's tokens printed "unknown error"). */
static void
test_long_prompt (void)
{
  g_autofree char *model = g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", "tiny-llama-spm-q8_0.gguf", NULL);
  g_autofree char *dir = g_dir_make_tmp ("hanashi-cli-generate-XXXXXX", NULL);
  int n_ctx_train = context_length (model);

  /* a prompt that nearly fills a context: it runs, up to the last free cell */
  g_autofree char *fits = g_build_filename (dir, "fits.txt", NULL);
  GString *text = g_string_new (NULL);
  for (int i = 0; i < 60; i++)
    g_string_append_printf (text, "On day %d the little red hen asked who would help her, and nobody did. ", i);
  g_assert_true (g_file_set_contents (fits, text->str, -1, NULL));
  gsize n_fits = count_tokens (model, fits);
  g_assert_cmpuint (n_fits, >, 1000);
  g_assert_cmpuint (n_fits, <, (gsize) n_ctx_train);
  g_autofree char *just_enough = g_strdup_printf ("%" G_GSIZE_FORMAT, n_fits + 1);
  const char *ok[] = { "generate", "-m", model, "-f", fits, "-n", "4", "-c", just_enough, "--ids", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (cli_run_status (ok, &out, &err), ==, 0);
  g_assert_true (g_str_has_prefix (out, "["));
  /* one token less of context: refused, with the way out */
  g_autofree char *too_small = g_strdup_printf ("%" G_GSIZE_FORMAT, n_fits);
  const char *small[] = { "generate", "-m", model, "-f", fits, "-n", "4", "-c", too_small, NULL };
  g_autofree char *sout = NULL, *serr = NULL;
  g_assert_cmpint (cli_run_status (small, &sout, &serr), ==, 1);
  g_autofree char *expected_small = g_strdup_printf (
      "hanashi-cli: error: the prompt is %" G_GSIZE_FORMAT " tokens long, but the context holds %" G_GSIZE_FORMAT
      " tokens and needs room for at least one new token: give a larger context with -c (this model supports up "
      "to %d tokens) or a shorter prompt\n", n_fits, n_fits, n_ctx_train);
  g_assert_cmpstr (serr, ==, expected_small);

  /* far beyond the whole context (more than four times it, where the fixed buffer gave up) */
  g_autofree char *huge = g_build_filename (dir, "huge.txt", NULL);
  while (text->len < (gsize) n_ctx_train * 4 * 8)
    g_string_append (text, text->str);
  g_assert_true (g_file_set_contents (huge, text->str, -1, NULL));
  gsize n_huge = count_tokens (model, huge);
  g_assert_cmpuint (n_huge, >, (gsize) n_ctx_train * 4);
  const char *too_long[] = { "generate", "-m", model, "-f", huge, "-n", "4", NULL };
  g_autofree char *hout = NULL, *herr = NULL;
  g_assert_cmpint (cli_run_status (too_long, &hout, &herr), ==, 1);
  g_autofree char *expected_huge = g_strdup_printf (
      "hanashi-cli: error: the prompt is %" G_GSIZE_FORMAT " tokens long, but the context holds %d tokens (the "
      "most this model supports) and needs room for at least one new token: shorten the prompt to at most %d "
      "tokens\n", n_huge, n_ctx_train, n_ctx_train - 1);
  g_assert_cmpstr (herr, ==, expected_huge);
  /* the same text given with -p */
  const char *too_long_p[] = { "generate", "-m", model, "-p", text->str, "-n", "4", NULL };
  g_autofree char *pout = NULL, *perr = NULL;
  g_assert_cmpint (cli_run_status (too_long_p, &pout, &perr), ==, 1);
  g_assert_cmpstr (perr, ==, expected_huge);
  /* logits: the model's context is the limit there */
  const char *logits[] = { "logits", "-m", model, "-f", huge, "-o", "/dev/null", NULL };
  g_autofree char *lout = NULL, *lerr = NULL;
  g_assert_cmpint (cli_run_status (logits, &lout, &lerr), ==, 1);
  g_autofree char *expected_logits = g_strdup_printf (
      "hanashi-cli: error: the prompt is %" G_GSIZE_FORMAT " tokens long, but this model's context holds at most %d "
      "tokens\n", n_huge, n_ctx_train);
  g_assert_cmpstr (lerr, ==, expected_logits);

  g_string_free (text, TRUE);
  g_unlink (fits);
  g_unlink (huge);
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
  g_test_add_func ("/cli/generate-help-defaults", test_help_shows_schema_defaults);
  g_test_add_func ("/cli/generate-params-reach-sampler", test_params_reach_sampler);
  g_test_add_func ("/cli/generate-grammar-notice", test_truncated_grammar_notice);
  g_test_add_func ("/cli/generate-prompt-file", test_prompt_file);
  g_test_add_func ("/cli/generate-long-prompt", test_long_prompt);
  return g_test_run ();
}
