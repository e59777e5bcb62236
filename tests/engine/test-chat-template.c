/* Tests for hn-chat-template: every reference render in the test data, unit tests for the
 * Jinja subset, whitespace control, errors with positions, limits, and fuzzing.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-chat-template.h"

#include <glib.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat-template-cases.inc"

/* 2026-07-26 12:00 UTC: the date the reference renders were made with. */
#define FIXED_NOW ((time_t)1785067200)

static const char *
testdata_dir (void)
{
  const char *d = g_getenv ("HANASHI_TESTDATA");
  return d ? d : "../shared/testdata";
}

static HnJson *
load_json (const char *path)
{
  gchar *text = NULL;
  gsize len = 0;
  GError *gerr = NULL;
  if (!g_file_get_contents (path, &text, &len, &gerr))
    g_error ("cannot read %s: %s", path, gerr->message);
  HnError err = { 0 };
  HnJson *v = hn_json_parse (text, len, &err);
  if (!v)
    g_error ("%s: %s", path, err.message);
  g_free (text);
  return v;
}

/* ---- reference renders ---- */

static void
test_reference_renders (void)
{
  gchar *dir = g_build_filename (testdata_dir (), "templates", NULL);
  if (!g_file_test (dir, G_FILE_TEST_IS_DIR)) {
    g_test_skip ("no test data");
    g_free (dir);
    return;
  }
  gchar *conv_path = g_build_filename (dir, "conversations.json", NULL);
  HnJson *convs = load_json (conv_path);
  HnJson *conversations = hn_json_object_get (convs, "conversations");
  g_assert_nonnull (conversations);
  GDir *d = g_dir_open (dir, 0, NULL);
  g_assert_nonnull (d);
  GPtrArray *names = g_ptr_array_new_with_free_func (g_free);
  const char *name;
  while ((name = g_dir_read_name (d)))
    if (g_str_has_suffix (name, ".json") && strcmp (name, "conversations.json") != 0)
      g_ptr_array_add (names, g_strdup (name));
  g_dir_close (d);
  g_ptr_array_sort (names, (GCompareFunc) g_strcmp0);
  g_assert_cmpuint (names->len, >, 0);
  guint renders = 0, failures = 0;
  for (guint i = 0; i < names->len; i++) {
    gchar *path = g_build_filename (dir, names->pdata[i], NULL);
    HnJson *doc = load_json (path);
    const HnJson *tsrc = hn_json_object_get (doc, "template");
    HnError err = { 0 };
    HnChatTemplate *t = hn_chat_template_new (hn_json_get_string (tsrc), hn_json_get_string_len (tsrc), &err);
    if (!t) {
      g_printerr ("%s: parse error: %s\n", (char *) names->pdata[i], err.message);
      failures++;
      hn_json_free (doc);
      g_free (path);
      continue;
    }
    const HnJson *list = hn_json_object_get (doc, "renders");
    for (size_t k = 0; k < hn_json_length (list); k++) {
      const HnJson *rd = hn_json_array_get (list, k);
      const char *conv = hn_json_get_string (hn_json_object_get (rd, "conversation"));
      HnChatRenderOptions o = { 0 };
      o.messages = hn_json_object_get (conversations, conv);
      g_assert_nonnull (o.messages);
      o.bos_token = hn_json_get_string (hn_json_object_get (doc, "bos_token"));
      o.eos_token = hn_json_get_string (hn_json_object_get (doc, "eos_token"));
      o.add_generation_prompt = hn_json_get_bool (hn_json_object_get (rd, "add_generation_prompt"));
      o.has_now = true;
      o.now = FIXED_NOW;
      size_t len = 0;
      hn_error_clear (&err);
      char *out = hn_chat_template_render (t, &o, &len, &err);
      const HnJson *expect = hn_json_object_get (rd, "output");
      const HnJson *expect_err = hn_json_object_get (rd, "error");
      renders++;
      if (expect) {
        if (!out) {
          g_printerr ("%s [%s, agp=%d]: unexpected error: %s\n", (char *) names->pdata[i], conv,
                      o.add_generation_prompt, err.message);
          failures++;
        } else if (len != hn_json_get_string_len (expect) || memcmp (out, hn_json_get_string (expect), len) != 0) {
          g_printerr ("%s [%s, agp=%d]: output differs\n--- expected\n%s\n--- got\n%s\n---\n", (char *) names->pdata[i],
                      conv, o.add_generation_prompt, hn_json_get_string (expect), out);
          failures++;
        }
      } else {
        g_assert_nonnull (expect_err);
        if (out) {
          g_printerr ("%s [%s]: expected error '%s', got output\n", (char *) names->pdata[i], conv,
                      hn_json_get_string (expect_err));
          failures++;
        } else if (err.code != HN_ERR_TEMPLATE || strcmp (err.message, hn_json_get_string (expect_err)) != 0) {
          g_printerr ("%s [%s]: expected error '%s', got '%s'\n", (char *) names->pdata[i], conv,
                      hn_json_get_string (expect_err), err.message);
          failures++;
        }
      }
      free (out);
    }
    hn_chat_template_free (t);
    hn_json_free (doc);
    g_free (path);
  }
  g_test_message ("%u templates, %u renders, %u failures", names->len, renders, failures);
  g_assert_cmpuint (failures, ==, 0);
  g_assert_cmpuint (renders, >=, names->len * 2);
  g_ptr_array_unref (names);
  hn_json_free (convs);
  g_free (conv_path);
  g_free (dir);
}

/* ---- helpers ---- */

static char *
render_ex (const char *tmpl, const char *messages_json, const char *extra_json, const HnChatRenderOptions *base,
           HnError *err, size_t *len_out)
{
  HnChatTemplate *t = hn_chat_template_new (tmpl, strlen (tmpl), err);
  if (!t)
    return NULL;
  HnJson *messages = hn_json_parse (messages_json, strlen (messages_json), NULL);
  HnJson *extra = extra_json ? hn_json_parse (extra_json, strlen (extra_json), NULL) : NULL;
  g_assert_nonnull (messages);
  HnChatRenderOptions o = { 0 };
  if (base)
    o = *base;
  o.messages = messages;
  o.extra = extra;
  if (!o.bos_token)
    o.bos_token = "<s>";
  if (!o.eos_token)
    o.eos_token = "</s>";
  if (!base) {
    o.add_generation_prompt = true;
    o.has_now = true;
    o.now = FIXED_NOW;
  }
  size_t len = 0;
  char *out = hn_chat_template_render (t, &o, &len, err);
  if (len_out)
    *len_out = len;
  hn_json_free (messages);
  hn_json_free (extra);
  hn_chat_template_free (t);
  return out;
}

static char *
render (const char *tmpl, HnError *err)
{
  return render_ex (tmpl, CASE_MESSAGES, NULL, NULL, err, NULL);
}

static void
assert_renders (const char *tmpl, const char *expected)
{
  HnError err = { 0 };
  char *out = render (tmpl, &err);
  if (!out)
    g_error ("%s: unexpected error: %s", tmpl, err.message);
  if (strcmp (out, expected) != 0)
    g_error ("%s:\n  expected [%s]\n  got      [%s]", tmpl, expected, out);
  free (out);
}

static void
assert_fails (const char *tmpl, const char *message_part)
{
  HnError err = { 0 };
  char *out = render (tmpl, &err);
  if (out)
    g_error ("%s: expected an error containing '%s', got output [%s]", tmpl, message_part, out);
  g_assert_cmpint (err.code, ==, HN_ERR_TEMPLATE);
  if (!strstr (err.message, message_part))
    g_error ("%s: expected an error containing '%s', got '%s'", tmpl, message_part, err.message);
}

/* ---- Jinja2 parity table ---- */

static void
test_jinja_cases (void)
{
  for (size_t k = 0; k < G_N_ELEMENTS (jinja_cases); k++) {
    HnError err = { 0 };
    size_t len = 0;
    char *out = render_ex (jinja_cases[k].tmpl, CASE_MESSAGES, jinja_cases[k].extra, NULL, &err, &len);
    if (jinja_cases[k].output) {
      if (!out)
        g_error ("case %zu %s: unexpected error: %s", k, jinja_cases[k].tmpl, err.message);
      if (len != strlen (jinja_cases[k].output) || memcmp (out, jinja_cases[k].output, len) != 0)
        g_error ("case %zu %s:\n  expected [%s]\n  got      [%s]", k, jinja_cases[k].tmpl, jinja_cases[k].output, out);
    } else {
      if (out)
        g_error ("case %zu %s: expected error '%s', got [%s]", k, jinja_cases[k].tmpl, jinja_cases[k].error, out);
      g_assert_cmpint (err.code, ==, HN_ERR_TEMPLATE);
      g_assert_cmpstr (err.message, ==, jinja_cases[k].error);
    }
    free (out);
  }
}

/* ---- focused unit tests ---- */

static void
test_whitespace_details (void)
{
  assert_renders ("a {# c #}\nb", "a b");
  assert_renders ("  {%+ if true %}x{% endif %}", "  x");
  assert_renders ("{% if true +%}\nx{% endif %}", "\nx");
  assert_renders ("line\r\n{% if true %}\r\nx\r\n{% endif %}\r\n", "line\nx\n");
  assert_renders ("end\n", "end");                          /* one trailing newline dropped */
  assert_renders ("end\n\n", "end\n");
  assert_renders ("{% raw %}{{ x }}{% endraw %}", "{{ x }}");
}

static void
test_statements (void)
{
  assert_renders ("{% for x in range(5) %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}", "012");
  assert_renders ("{% for x in range(5) %}{% if x is even %}{% continue %}{% endif %}{{ x }}{% endfor %}", "13");
  assert_renders ("{% for x in [] %}a{% else %}b{% endfor %}", "b");
  assert_renders ("{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %}", "37");
  assert_renders ("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", "4");
  assert_renders ("{% if false %}a{% elif none %}b{% elif 1 %}c{% else %}d{% endif %}", "c");
  assert_renders ("{% macro greet(who, how='Hi') %}{{ how }} {{ who }}{% endmacro %}{{ greet('A') }}/{{ greet('B', how='Yo') }}",
                  "Hi A/Yo B");
  assert_renders ("{% set v %}[{{ 1 }}]{% endset %}{{ v }}{{ v }}", "[1][1]");
  assert_renders ("{% generation %}gen{% endgeneration %}", "gen");
}

static void
test_expressions (void)
{
  assert_renders ("{{ 'abcdef'[1:5:2] }}{{ 'abc'[::-1] }}{{ [1, 2, 3][-1] }}{{ [1, 2, 3][5] is defined }}", "bdcba3False");
  assert_renders ("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 8 }} {{ 1 / 4 }} {{ 'a' ~ 1 }}", "3 -4 2 256 0.25 a1");
  assert_renders ("{{ 1 if none else 2 }}{{ 'x' in 'xyz' }}{{ 3 not in [1, 2] }}{{ not 0 }}", "2TrueTrueTrue");
  assert_renders ("{{ {'a': [1, 'b', none, true]} }}", "{'a': [1, 'b', None, True]}");
  assert_renders ("{{ undefined_thing }}|{{ undefined_thing is defined }}", "|False");
}

static void
test_filters_more (void)
{
  assert_renders ("{{ [3, 1, 2]|first }}{{ [3, 1, 2]|last }}{{ [1, 2]|length }}{{ x|default('d') }}{{ ''|default('e', true) }}", "322de");
  assert_renders ("{{ {'a': 1}|tojson }}{{ {'a': [1, 2]}|tojson(indent=2) }}", "{\"a\": 1}{\n  \"a\": [\n    1,\n    2\n  ]\n}");
  assert_renders ("{{ '  a  '.strip() }}{{ 'xax'.strip('x') }}{{ 'abc'.startswith('a') }}{{ 'a,b,c'.split(',', 1)[1] }}", "aaTrueb,c");
  assert_renders ("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join('|') }}",
                  "Hello  |\343\201\223\343\202\223\343\201\253\343\201\241\343\201\257 \360\237\231\202");
  assert_renders ("{{ strftime_now('%d %b %Y') }}", "26 Jul 2026");
  /* select and reject without a test name keep the truthy (falsy) items; without
   * arguments they once offset a null argument array (found by fuzz-chat-template) */
  assert_renders ("{{ [1, 0, 'a', '', none]|select|list }}{{ [1, 0, 'a', '', none]|reject|list }}",
                  "[1, 'a'][0, '', None]");
}

static void
test_errors_with_positions (void)
{
  assert_fails ("hello\n  {% foo %}", "line 2, column 6: unknown or unsupported tag 'foo'");
  assert_fails ("{{ 1 + }}", "line 1, column 8: expected an expression");
  assert_fails ("{% for x in y %}", "line 1, column 4: 'for' is never closed");
  assert_fails ("{{ 'abc }}", "line 1, column 4: unterminated string literal");
  assert_fails ("{# open", "line 1, column 1: unclosed comment");
  assert_fails ("{{ x", "line 1, column 1: unclosed '{{' expression");
  assert_fails ("a\nb {{ x.y }}", "line 2, column 7: 'x' is undefined");
  assert_fails ("{% break %}", "'break' outside of a loop");
  assert_fails ("{{ 1 / 0 }}", "division by zero");
  assert_fails ("{% for x in range(3) recursive %}{% endfor %}", "recursive for-loops are not supported");
  assert_fails ("{% call foo() %}{% endcall %}", "{% call %} needs a macro");
  assert_fails ("{% do x %}", "unknown or unsupported tag 'do'");
  /* raise_exception: the message alone, no position */
  HnError err = { 0 };
  char *out = render ("{{ raise_exception('Only user and assistant roles are supported!') }}", &err);
  g_assert_null (out);
  g_assert_cmpint (err.code, ==, HN_ERR_TEMPLATE);
  g_assert_cmpstr (err.message, ==, "Only user and assistant roles are supported!");
}

static void
test_limits (void)
{
  HnChatRenderOptions o = { 0 };
  o.max_steps = 100000;
  HnError err = { 0 };
  char *out = render_ex ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                         "[]", NULL, &o, &err, NULL);
  g_assert_null (out);
  g_assert_nonnull (strstr (err.message, "steps"));

  /* the default step limit also ends a long loop nest */
  out = render_ex ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                   "[]", NULL, NULL, &err, NULL);
  g_assert_null (out);

  memset (&o, 0, sizeof o);
  o.max_output = 1 << 20;
  out = render_ex ("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", "[]", NULL, &o, &err, NULL);
  g_assert_null (out);
  g_assert_nonnull (strstr (err.message, "exceeds the limit"));

  memset (&o, 0, sizeof o);
  o.max_memory = 32 << 20;
  out = render_ex ("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                   "[]", NULL, &o, &err, NULL);
  g_assert_null (out);
  g_assert_nonnull (strstr (err.message, "memory"));

  /* scans over large values count against the step budget: no multi-minute loops */
  assert_fails ("{% set big = range(100000)|list %}{% for i in range(100000) %}{% if -1 in big %}{% endif %}{% endfor %}",
                "steps");
  assert_fails ("{{ range(100000)|list|unique|list|length }}", "steps");
  assert_fails ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested deeper");
  assert_fails ("{{ range(1000000)|length }}", "Range too big");
  assert_fails ("{{ 'ab' * 100000000000 }}", "memory");

  GString *deep = g_string_new ("{{ ");
  for (int k = 0; k < 5000; k++)
    g_string_append_c (deep, '(');
  g_string_append (deep, "1");
  for (int k = 0; k < 5000; k++)
    g_string_append_c (deep, ')');
  g_string_append (deep, " }}");
  assert_fails (deep->str, "nesting deeper than");
  g_string_free (deep, TRUE);

  /* values nested by a loop: comparison, printing and tojson stop with an error */
  assert_fails ("{% set ns = namespace(x=[]) %}{% for i in range(20000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
                "too deep");
  assert_fails ("{% set ns = namespace(x=[]) %}{% for i in range(20000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson }}",
                "too deep");
  assert_fails ("{% set ns = namespace(x=[]) %}{% for i in range(20000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x < ns.x }}",
                "too deeply");
  assert_renders ("{% set ns = namespace(x=[]) %}{% for i in range(20000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x in [1] }}",
                  "False");
  GString *chain = g_string_new ("{{ x");
  for (int k = 0; k < 20000; k++)
    g_string_append (chain, " + 1");
  g_string_append (chain, " }}");
  assert_fails (chain->str, "nests too deeply");
  g_string_free (chain, TRUE);

  GString *blocks = g_string_new (NULL);
  for (int k = 0; k < 5000; k++)
    g_string_append (blocks, "{% if true %}");
  assert_fails (blocks->str, "nesting deeper than");
  g_string_free (blocks, TRUE);
}

static void
test_fallback (void)
{
  const char *msgs = "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"\\u3053 hi\"},"
                     "{\"role\":\"assistant\",\"content\":null},{\"role\":\"tool\",\"content\":{\"x\":1}}]";
  HnJson *m = hn_json_parse (msgs, strlen (msgs), NULL);
  size_t len;
  HnError err = { 0 };
  char *out = hn_chat_render_fallback (m, true, &len, &err);
  g_assert_cmpstr (out, ==, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n\343\201\223 hi<|im_end|>\n"
                            "<|im_start|>assistant\n<|im_end|>\n<|im_start|>tool\n{\"x\":1}<|im_end|>\n"
                            "<|im_start|>assistant\n");
  g_assert_cmpuint (len, ==, strlen (out));
  free (out);
  out = hn_chat_render_fallback (m, false, &len, &err);
  g_assert_true (g_str_has_suffix (out, "{\"x\":1}<|im_end|>\n"));
  free (out);
  hn_json_free (m);
}

static void
test_now_default (void)
{
  HnChatRenderOptions o = { 0 };
  HnError err = { 0 };
  char *out = render_ex ("{{ strftime_now('%Y') }}", "[]", NULL, &o, &err, NULL);
  g_assert_nonnull (out);
  time_t now = time (NULL);
  struct tm tm;
  localtime_r (&now, &tm);
  char year[16];
  snprintf (year, sizeof year, "%d", tm.tm_year + 1900);
  g_assert_cmpstr (out, ==, year);
  free (out);
}

static void
test_locale_independent (void)
{
  /* a GTK app runs with the user's LC_NUMERIC: numbers must still use '.' */
  const char *locales[] = { "de_DE.UTF-8", "fr_FR.UTF-8", "de_DE.utf8", "fr_FR.utf8" };
  const char *set = NULL;
  for (size_t k = 0; k < G_N_ELEMENTS (locales) && !set; k++)
    set = setlocale (LC_ALL, locales[k]);
  if (!set) {
    g_test_skip ("no locale with a decimal comma installed");
    return;
  }
  assert_renders ("{{ 2.5 + 1 }}|{{ '1.5'|float }}|{{ 2.567|round(2) }}|{{ {'x': 0.25}|tojson }}", "3.5|1.5|2.57|{\"x\": 0.25}");
  setlocale (LC_ALL, "C");
}

/* ---- fuzzing: never crash, never hang ---- */

static void
fuzz_one (const char *src, size_t len, const HnJson *messages)
{
  HnError err = { 0 };
  HnChatTemplate *t = hn_chat_template_new (src, len, &err);
  if (!t) {
    g_assert_cmpint (err.code, ==, HN_ERR_TEMPLATE);
    g_assert_cmpuint (strlen (err.message), >, 0);
    return;
  }
  HnChatRenderOptions o = { 0 };
  o.messages = messages;
  o.bos_token = "<s>";
  o.add_generation_prompt = true;
  o.has_now = true;
  o.now = FIXED_NOW;
  o.max_steps = 20000;
  o.max_output = 1 << 20;
  o.max_memory = 16 << 20;
  size_t out_len;
  char *out = hn_chat_template_render (t, &o, &out_len, &err);
  if (!out)
    g_assert_cmpint (err.code, ==, HN_ERR_TEMPLATE);
  free (out);
  hn_chat_template_free (t);
}

static void
test_fuzz_random (void)
{
  static const char *const pieces[] = {
    "{{", "}}", "{%", "%}", "{#", "#}", "-", "+", " ", "\n", "if", "for", "in", "endif", "endfor", "set", "=", "x",
    "messages", "loop", ".", "[", "]", "(", ")", "'", "\"", "|", "trim", "is", "defined", "not", "else", "elif",
    "macro", "endmacro", "1", "0", ":", ",", "~", "*", "**", "range", "namespace", "ns", "raw", "endraw", "\xff",
    "\xc3", "\\", "{", "}", "%", "#", "break", "continue", "tojson", "items", "9999999999999999999", "-1",
  };
  HnJson *messages = hn_json_parse (CASE_MESSAGES, strlen (CASE_MESSAGES), NULL);
  GRand *rnd = g_rand_new_with_seed (42);
  for (int iter = 0; iter < 3000; iter++) {
    GString *s = g_string_new (NULL);
    int n = g_rand_int_range (rnd, 0, 40);
    for (int k = 0; k < n; k++) {
      if (g_rand_int_range (rnd, 0, 8) == 0)
        g_string_append_c (s, (char) g_rand_int_range (rnd, 0, 256));
      else
        g_string_append (s, pieces[g_rand_int_range (rnd, 0, G_N_ELEMENTS (pieces))]);
    }
    fuzz_one (s->str, s->len, messages);
    g_string_free (s, TRUE);
  }
  g_rand_free (rnd);
  hn_json_free (messages);
}

static void
test_fuzz_mutations (void)
{
  gchar *dir = g_build_filename (testdata_dir (), "templates", NULL);
  GDir *d = g_dir_open (dir, 0, NULL);
  if (!d) {
    g_test_skip ("no test data");
    g_free (dir);
    return;
  }
  HnJson *messages = hn_json_parse (CASE_MESSAGES, strlen (CASE_MESSAGES), NULL);
  GRand *rnd = g_rand_new_with_seed (7);
  const char *name;
  int rounds = g_test_slow () ? 400 : 60;
  while ((name = g_dir_read_name (d))) {
    if (!g_str_has_suffix (name, ".json") || !strcmp (name, "conversations.json"))
      continue;
    gchar *path = g_build_filename (dir, name, NULL);
    HnJson *doc = load_json (path);
    const HnJson *src = hn_json_object_get (doc, "template");
    size_t len = hn_json_get_string_len (src);
    for (int iter = 0; iter < rounds; iter++) {
      GString *s = g_string_new_len (hn_json_get_string (src), (gssize) len);
      int edits = g_rand_int_range (rnd, 1, 6);
      for (int e = 0; e < edits && s->len > 0; e++) {
        guint at = (guint) g_rand_int_range (rnd, 0, (gint32) s->len);
        switch (g_rand_int_range (rnd, 0, 4)) {
        case 0: s->str[at] = (char) g_rand_int_range (rnd, 0, 256); break;
        case 1: {
          gssize n = g_rand_int_range (rnd, 1, 20);
          g_string_erase (s, at, MIN (n, (gssize) (s->len - at)));
          break;
        }
        case 2: g_string_insert_c (s, at, "{}%#-+'\"()[]|.~"[g_rand_int_range (rnd, 0, 15)]); break;
        default: {
          guint from = (guint) g_rand_int_range (rnd, 0, (gint32) s->len);
          guint n = (guint) g_rand_int_range (rnd, 1, 40);
          n = MIN (n, (guint) (s->len - from));
          gchar *piece = g_strndup (s->str + from, n);
          g_string_insert (s, at, piece);
          g_free (piece);
        }
        }
      }
      fuzz_one (s->str, s->len, messages);
      g_string_free (s, TRUE);
    }
    hn_json_free (doc);
    g_free (path);
  }
  g_dir_close (d);
  g_rand_free (rnd);
  hn_json_free (messages);
  g_free (dir);
}

/* ---- enable_thinking (Qwen3) ---- */

/* The parts of Qwen3's template that matter here: earlier answers lose their thinking, and
 * enable_thinking = false closes an empty thinking block in the generation prompt. */
static const char qwen3_style[] =
  "{%- for message in messages %}\n"
  "{%- if message.role == 'assistant' %}\n"
  "{%- set content = message.content %}\n"
  "{%- if '</think>' in content %}\n"
  "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n"
  "{%- endif %}\n"
  "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}\n"
  "{%- else %}\n"
  "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
  "{%- endif %}\n"
  "{%- endfor %}\n"
  "{%- if add_generation_prompt %}\n"
  "{{- '<|im_start|>assistant\\n' }}\n"
  "{%- if enable_thinking is defined and enable_thinking is false %}\n"
  "{{- '<think>\\n\\n</think>\\n\\n' }}\n"
  "{%- endif %}\n"
  "{%- endif %}\n";

static char *
render_thinking (const HnChatTemplate *t, HnChatThinking thinking, const char *extra_json)
{
  static const char msgs[] =
    "[{\"role\":\"user\",\"content\":\"2+2?\"},"
    "{\"role\":\"assistant\",\"content\":\"<think>\\nadd them\\n</think>\\n\\n4\"},"
    "{\"role\":\"user\",\"content\":\"3+3?\"}]";
  HnJson *messages = hn_json_parse (msgs, strlen (msgs), NULL);
  HnJson *extra = extra_json ? hn_json_parse (extra_json, strlen (extra_json), NULL) : NULL;
  HnChatRenderOptions o = { .messages = messages, .add_generation_prompt = true, .extra = extra,
                            .enable_thinking = thinking };
  HnError err = { 0 };
  char *out = hn_chat_template_render (t, &o, NULL, &err);
  g_assert_nonnull (out);
  hn_json_free (messages);
  hn_json_free (extra);
  return out;
}

static void
test_enable_thinking (void)
{
  HnError err = { 0 };
  HnChatTemplate *t = hn_chat_template_new (qwen3_style, strlen (qwen3_style), &err);
  g_assert_nonnull (t);
  g_assert_true (hn_chat_template_uses_variable (t, "enable_thinking"));
  g_assert_false (hn_chat_template_uses_variable (t, "tools"));

  const char *history =
    "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
    "<|im_start|>user\n3+3?<|im_end|>\n<|im_start|>assistant\n";
  char *unset = render_thinking (t, HN_CHAT_THINKING_UNSET, NULL);
  g_assert_cmpstr (unset, ==, history);
  char *on = render_thinking (t, HN_CHAT_THINKING_ON, NULL);
  g_assert_cmpstr (on, ==, history);
  char *off = render_thinking (t, HN_CHAT_THINKING_OFF, NULL);
  char *expected_off = g_strconcat (history, "<think>\n\n</think>\n\n", NULL);
  g_assert_cmpstr (off, ==, expected_off);
  /* Through extra, as any variable; the option wins over it. */
  char *extra_off = render_thinking (t, HN_CHAT_THINKING_UNSET, "{\"enable_thinking\": false}");
  g_assert_cmpstr (extra_off, ==, expected_off);
  char *option_wins = render_thinking (t, HN_CHAT_THINKING_ON, "{\"enable_thinking\": false}");
  g_assert_cmpstr (option_wins, ==, history);
  free (unset); free (on); free (off); free (extra_off); free (option_wins);
  g_free (expected_off);
  hn_chat_template_free (t);

  /* Only a variable read in an expression counts: not text, not an attribute, not a
   * string; a macro's body or default does. */
  static const struct { const char *src; gboolean uses; } cases[] = {
    { "{{ messages[0].content }}enable_thinking", FALSE },
    { "{% set ns = namespace(enable_thinking=true) %}{{ ns.enable_thinking }}", FALSE },
    { "{{ 'enable_thinking' }}{# enable_thinking #}", FALSE },
    { "{% macro m(x=enable_thinking) %}{{ x }}{% endmacro %}{{ m() }}", TRUE },
    { "{% macro m() %}{% if not enable_thinking %}no{% endif %}{% endmacro %}", TRUE },
    { "{% for m in messages if enable_thinking | default(true) %}{{ m }}{% endfor %}", TRUE },
    { "{{ x if y else (enable_thinking is false) }}", TRUE },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    HnChatTemplate *c = hn_chat_template_new (cases[i].src, strlen (cases[i].src), &err);
    g_assert_nonnull (c);
    if (hn_chat_template_uses_variable (c, "enable_thinking") != cases[i].uses)
      g_error ("uses_variable wrong for: %s", cases[i].src);
    hn_chat_template_free (c);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/chat-template/reference-renders", test_reference_renders);
  g_test_add_func ("/chat-template/jinja-parity", test_jinja_cases);
  g_test_add_func ("/chat-template/whitespace", test_whitespace_details);
  g_test_add_func ("/chat-template/statements", test_statements);
  g_test_add_func ("/chat-template/expressions", test_expressions);
  g_test_add_func ("/chat-template/filters", test_filters_more);
  g_test_add_func ("/chat-template/errors", test_errors_with_positions);
  g_test_add_func ("/chat-template/limits", test_limits);
  g_test_add_func ("/chat-template/fallback", test_fallback);
  g_test_add_func ("/chat-template/enable-thinking", test_enable_thinking);
  g_test_add_func ("/chat-template/now-default", test_now_default);
  g_test_add_func ("/chat-template/locale", test_locale_independent);
  g_test_add_func ("/chat-template/fuzz-random", test_fuzz_random);
  g_test_add_func ("/chat-template/fuzz-mutations", test_fuzz_mutations);
  return g_test_run ();
}
