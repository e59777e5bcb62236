/* Tests for `hanashi-cli chat-template`: exact stdout (no added newline), options, the
 * template and special tokens read from a GGUF, and errors (exit 1, one line on stderr).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-json.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "cli-run.h"

static const char *
testdata_dir (void)
{
  const char *d = g_getenv ("HANASHI_TESTDATA");
  return d ? d : "../shared/testdata";
}

/* hanashi-cli chat-template with @args (NULL-terminated) */
static CliRun
run_cli (const char *const *args)
{
  return cli_run_full ("chat-template", NULL, NULL, args);
}

static HnJson *
load_json (const char *path)
{
  gchar *text;
  gsize len;
  g_assert_true (g_file_get_contents (path, &text, &len, NULL));
  HnJson *v = hn_json_parse (text, len, NULL);
  g_assert_nonnull (v);
  g_free (text);
  return v;
}

static gchar *
write_temp (const char *name, const char *text, gsize len)
{
  gchar *path = g_build_filename (g_get_tmp_dir (), name, NULL);
  g_assert_true (g_file_set_contents (path, text, (gssize) len, NULL));
  return path;
}

static gchar *
messages_file (const char *conversation)
{
  gchar *path = g_build_filename (testdata_dir (), "templates", "conversations.json", NULL);
  HnJson *all = load_json (path);
  const HnJson *conv = hn_json_object_get (hn_json_object_get (all, "conversations"), conversation);
  g_assert_nonnull (conv);
  size_t len;
  char *text = hn_json_write (conv, NULL, &len);
  gchar *name = g_strdup_printf ("hanashi-test-messages-%d-%s.json", (int) getpid (), conversation);
  gchar *out = write_temp (name, text, len);
  free (text);
  g_free (name);
  hn_json_free (all);
  g_free (path);
  return out;
}

static void
test_template_file_exact (void)
{
  gchar *tdir = g_build_filename (testdata_dir (), "templates", NULL);
  if (!g_file_test (tdir, G_FILE_TEST_IS_DIR)) {
    g_test_skip ("no test data");
    g_free (tdir);
    return;
  }
  const char *names[] = { "Llama-3.json", "Qwen-Qwen2.5-7B-Instruct.json", "meta-llama-Llama-3.1-8B-Instruct.json" };
  for (size_t k = 0; k < G_N_ELEMENTS (names); k++) {
    gchar *path = g_build_filename (tdir, names[k], NULL);
    HnJson *doc = load_json (path);
    const HnJson *src = hn_json_object_get (doc, "template");
    gchar *tname = g_strdup_printf ("hanashi-test-template-%d.jinja", (int) getpid ());
    gchar *tpath = write_temp (tname, hn_json_get_string (src), hn_json_get_string_len (src));
    const HnJson *renders = hn_json_object_get (doc, "renders");
    for (size_t i = 0; i < hn_json_length (renders); i++) {
      const HnJson *rd = hn_json_array_get (renders, i);
      const HnJson *expect = hn_json_object_get (rd, "output");
      if (!expect)
        continue;
      gchar *mpath = messages_file (hn_json_get_string (hn_json_object_get (rd, "conversation")));
      bool agp = hn_json_get_bool (hn_json_object_get (rd, "add_generation_prompt"));
      const char *args[] = { "--template", tpath, "--messages", mpath,
                             "--bos-token", hn_json_get_string (hn_json_object_get (doc, "bos_token")),
                             "--eos-token", hn_json_get_string (hn_json_object_get (doc, "eos_token")),
                             "--now", "2026-07-26", agp ? NULL : "--no-generation-prompt", NULL };
      CliRun r = run_cli (args);
      if (r.status != 0)
        g_error ("%s: exit %d: %s", names[k], r.status, r.err);
      g_assert_cmpstr (r.out, ==, hn_json_get_string (expect));
      g_assert_cmpstr (r.err, ==, "");
      cli_run_clear (&r);
      g_unlink (mpath);
      g_free (mpath);
    }
    g_unlink (tpath);
    g_free (tpath);
    g_free (tname);
    hn_json_free (doc);
    g_free (path);
  }
  g_free (tdir);
}

static void
test_template_from_gguf (void)
{
  gchar *model = g_build_filename (testdata_dir (), "vocab", "ggml-vocab-phi-3.gguf", NULL);
  if (!g_file_test (model, G_FILE_TEST_EXISTS)) {
    g_test_skip ("no test data");
    g_free (model);
    return;
  }
  gchar *mpath = messages_file ("full");
  /* The vocabulary carries Phi-3-mini's template; BOS/EOS texts come from its token list.
   * Expected text: Jinja2 rendering of that template with bos_token "<s>". */
  const char *args[] = { "-m", model, "--messages", mpath, NULL };
  CliRun r = run_cli (args);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==,
                   "<s><|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n"
                   "<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n");
  cli_run_clear (&r);
  const char *args2[] = { "-m", model, "--messages", mpath, "--no-generation-prompt", "--bos-token", "[B]", NULL };
  r = run_cli (args2);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_true (g_str_has_prefix (r.out, "[B]<|user|>\nHello"));
  g_assert_true (g_str_has_suffix (r.out, "Another question<|end|>\n<|assistant|>\n"));
  cli_run_clear (&r);
  /* --template overrides the model's template; the special tokens still come from it */
  gchar *tname = g_strdup_printf ("hanashi-test-tokens-%d.jinja", (int) getpid ());
  const char *tokens = "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}";
  gchar *tpath = write_temp (tname, tokens, strlen (tokens));
  const char *args3[] = { "-m", model, "--template", tpath, "--messages", mpath, NULL };
  r = run_cli (args3);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==, "<s>|<|endoftext|>|True");
  cli_run_clear (&r);
  g_unlink (tpath);
  g_free (tpath);
  g_free (tname);
  /* a model without a template: the ChatML fallback, with a warning */
  gchar *plain = g_build_filename (testdata_dir (), "vocab", "ggml-vocab-gpt-2.gguf", NULL);
  const char *args4[] = { "-m", plain, "--messages", mpath, NULL };
  r = run_cli (args4);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_true (g_str_has_prefix (r.out, "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello"));
  g_assert_true (g_str_has_suffix (r.out, "Another question<|im_end|>\n<|im_start|>assistant\n"));
  g_assert_nonnull (strstr (r.err, "warning"));
  cli_run_clear (&r);
  g_free (plain);
  g_unlink (mpath);
  g_free (mpath);
  g_free (model);
}

static void
test_errors (void)
{
  gchar *tname = g_strdup_printf ("hanashi-test-bad-%d.jinja", (int) getpid ());
  const char *bad = "{% for m in messages %}{{ raise_exception('roles must alternate') }}{% endfor %}";
  gchar *tpath = write_temp (tname, bad, strlen (bad));
  gchar *mname = g_strdup_printf ("hanashi-test-msgs-%d.json", (int) getpid ());
  const char *msgs = "[{\"role\": \"user\", \"content\": \"hi\"}]";
  gchar *mpath = write_temp (mname, msgs, strlen (msgs));

  const char *a1[] = { "--template", tpath, "--messages", mpath, NULL };
  CliRun r = run_cli (a1);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_cmpstr (r.out, ==, "");
  g_assert_cmpstr (r.err, ==, "hanashi-cli: error: chat template: roles must alternate\n");
  cli_run_clear (&r);

  const char *syntax = "hello\n{% if %}";
  g_assert_true (g_file_set_contents (tpath, syntax, -1, NULL));
  r = run_cli (a1);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "line 2, column 7"));
  cli_run_clear (&r);

  const char *a2[] = { "--template", tpath, NULL };
  r = run_cli (a2);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_true (g_str_has_prefix (r.err, "hanashi-cli: error: "));
  cli_run_clear (&r);

  g_assert_true (g_file_set_contents (mpath, "[{\"role\": 1}]", -1, NULL));
  const char *ok = "x";
  g_assert_true (g_file_set_contents (tpath, ok, -1, NULL));
  r = run_cli (a1);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "role"));
  cli_run_clear (&r);

  g_assert_true (g_file_set_contents (mpath, "[{\"role\": \"user\", ", -1, NULL));
  r = run_cli (a1);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "line 1, column"));
  cli_run_clear (&r);

  /* --enable-thinking defines the variable (true or false only); without it, undefined. */
  g_assert_true (g_file_set_contents (mpath, msgs, -1, NULL));
  g_assert_true (g_file_set_contents (tpath, "{{ enable_thinking if enable_thinking is defined else 'unset' }}", -1, NULL));
  r = run_cli (a1);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==, "unset");
  cli_run_clear (&r);
  const char *a3[] = { "--template", tpath, "--messages", mpath, "--enable-thinking", "false", NULL };
  r = run_cli (a3);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==, "False");
  cli_run_clear (&r);
  a3[5] = "true";
  r = run_cli (a3);
  g_assert_cmpstr (r.out, ==, "True");
  cli_run_clear (&r);
  a3[5] = "yes";
  r = run_cli (a3);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "--enable-thinking takes true or false"));
  cli_run_clear (&r);

  /* No trailing newline is added, and a template without one keeps it that way. */
  g_assert_true (g_file_set_contents (mpath, msgs, -1, NULL));
  g_assert_true (g_file_set_contents (tpath, "{{ messages[0].content }}!", -1, NULL));
  r = run_cli (a1);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==, "hi!");
  cli_run_clear (&r);

  g_unlink (tpath);
  g_unlink (mpath);
  g_free (tpath);
  g_free (mpath);
  g_free (tname);
  g_free (mname);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cli/chat-template/template-file", test_template_file_exact);
  g_test_add_func ("/cli/chat-template/gguf", test_template_from_gguf);
  g_test_add_func ("/cli/chat-template/errors", test_errors);
  return g_test_run ();
}
