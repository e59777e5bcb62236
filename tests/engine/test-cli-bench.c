/* hanashi-cli bench on a tiny test model: the --json object has the contract's keys with
 * sane values, the human output has the pp/tg lines, and bad options fail cleanly.
 * (No timing is asserted beyond "positive": the machines running tests are shared.)
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <math.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "cli-run.h"

static char *
model_path(void)
{
  return g_build_filename(g_getenv("HANASHI_TESTDATA"), "models", "tiny-llama-spm-q8_0.gguf", NULL);
}

static void
test_json(void)
{
  g_autofree char *model = model_path();
  const char *args[] = { "bench", "-m", model, "-p", "8", "-n", "4", "-r", "1", "-t", "2", "--json", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint(cli_run_status(args, &out, &err), ==, 0);
  g_autoptr(JsonParser) parser = json_parser_new();
  GError *error = NULL;
  g_assert_true(json_parser_load_from_data(parser, out, -1, &error));
  g_assert_no_error(error);
  JsonNode *root = json_parser_get_root(parser);
  g_assert_true(JSON_NODE_HOLDS_OBJECT(root));
  JsonObject *o = json_node_get_object(root);
  g_assert_cmpint(json_object_get_int_member(o, "n_prompt"), ==, 8);
  g_assert_cmpint(json_object_get_int_member(o, "n_gen"), ==, 4);
  g_assert_cmpint(json_object_get_int_member(o, "threads"), ==, 2);
  double pp = json_object_get_double_member(o, "pp_tps");
  double tg = json_object_get_double_member(o, "tg_tps");
  double rss = json_object_get_double_member(o, "peak_rss_mb");
  g_assert_cmpfloat(pp, >, 0.0);
  g_assert_cmpfloat(pp, <, 1e9);
  g_assert_cmpfloat(tg, >, 0.0);
  g_assert_cmpfloat(tg, <, 1e9);
  /* at least the model file's mapping and the process itself, far below a gigabyte */
  g_assert_cmpfloat(rss, >, 0.5);
  g_assert_cmpfloat(rss, <, 4096.0);
  /* the bandwidth bound: a measured read bandwidth, the model's weights per token
   * (at most the file, more than nothing), and tg as a fraction of what they allow */
  double gbps = json_object_get_double_member(o, "read_gbps");
  double mb = json_object_get_double_member(o, "weight_mb_per_token");
  double bound = json_object_get_double_member(o, "tg_bound_tps");
  double of_bound = json_object_get_double_member(o, "tg_of_bound");
  g_autofree char *model_file = NULL;
  gsize file_size = 0;
  g_assert_true(g_file_get_contents(model, &model_file, &file_size, NULL));
  g_assert_cmpfloat(gbps, >, 0.01);
  g_assert_cmpfloat(mb, >, 0.0);
  g_assert_cmpfloat(mb * 1e6, <=, (double) file_size);
  g_assert_cmpfloat(fabs(bound - gbps * 1e3 / mb), <=, 1e-2 * bound + 0.01);
  g_assert_cmpfloat(fabs(of_bound - tg / bound), <=, 1e-2 * of_bound + 1e-3);
  /* only the JSON object on stdout */
  g_assert_true(strchr(out, '\n') == out + strlen(out) - 1);
}

static void
test_depth(void)
{
  g_autofree char *model = model_path();
  const char *args[] = { "bench", "-m", model, "-p", "4", "-n", "2", "-r", "1", "-d", "20", "--json", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint(cli_run_status(args, &out, &err), ==, 0);
  g_autoptr(JsonParser) parser = json_parser_new();
  g_assert_true(json_parser_load_from_data(parser, out, -1, NULL));
  JsonObject *o = json_node_get_object(json_parser_get_root(parser));
  g_assert_cmpint(json_object_get_int_member(o, "depth"), ==, 20);
  g_assert_cmpfloat(json_object_get_double_member(o, "tg_tps"), >, 0.0);
}

static void
test_human(void)
{
  g_autofree char *model = model_path();
  const char *args[] = { "bench", "-m", model, "-p", "8", "-n", "4", "-r", "2", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint(cli_run_status(args, &out, &err), ==, 0);
  g_autoptr(GRegex) pp = g_regex_new("^pp8 +[0-9.]+ t/s ± [0-9.]+$", G_REGEX_MULTILINE, 0, NULL);
  g_autoptr(GRegex) tg = g_regex_new("^tg4 +[0-9.]+ t/s ± [0-9.]+$", G_REGEX_MULTILINE, 0, NULL);
  g_assert_true(g_regex_match(pp, out, 0, NULL));
  g_assert_true(g_regex_match(tg, out, 0, NULL));
  g_assert_nonnull(strstr(out, "peak resident memory"));
}

static void
test_bad_input(void)
{
  g_autofree char *model = model_path();
  const char *cases[][8] = {
    { "bench", NULL },
    { "bench", "-m", "/nonexistent/model.gguf", NULL },
    { "bench", "-m", model, "-p", "x", NULL },
    { "bench", "-m", model, "-r", "0", NULL },
    { "bench", "-m", model, "-t", NULL },
    { "bench", "-m", model, "--bogus", "1", NULL },
    { "bench", "-m", model, "-p", "0", "-n", "0", NULL },
    { "bench", "-m", model, "-p", "100000", NULL },
    { "bench", "-m", model, "-d", "-1", NULL },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *out = NULL, *err = NULL;
    g_assert_cmpint(cli_run_status(cases[i], &out, &err), ==, 1);
    g_assert_true(g_str_has_prefix(err, "hanashi-cli: error: "));
    g_assert_cmpint(strchr(err, '\n') - err, ==, (int) strlen(err) - 1);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  const char *dir = g_getenv("HANASHI_TESTDATA");
  if (!dir || !g_file_test(dir, G_FILE_TEST_IS_DIR) || !g_getenv("HANASHI_CLI")) {
    g_test_skip("HANASHI_TESTDATA or HANASHI_CLI not set");
    return g_test_run();
  }
  g_test_add_func("/cli-bench/json", test_json);
  g_test_add_func("/cli-bench/human", test_human);
  g_test_add_func("/cli-bench/depth", test_depth);
  g_test_add_func("/cli-bench/bad-input", test_bad_input);
  return g_test_run();
}
