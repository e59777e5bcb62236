/* Tests for hn-json: parsing (valid and invalid, with positions), escapes, numbers,
 * writer options compatible with Python's json.dumps, round trips, depth limit.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-json.h"

#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static HnJson *
parse_ok (const char *text)
{
  HnError err = { 0 };
  HnJson *v = hn_json_parse (text, strlen (text), &err);
  if (!v)
    g_error ("unexpected parse failure of %s: %s", text, err.message);
  return v;
}

static char *
write_with (const HnJson *v, int indent, bool ascii, bool py)
{
  HnJsonWriteOptions o = { indent, ascii, py, false };
  char *s = hn_json_write (v, &o, NULL);
  g_assert_nonnull (s);
  return s;
}

static void
test_parse_values (void)
{
  HnJson *v = parse_ok (" {\"a\": [1, -2.5, true, false, null, \"x\"], \"b\": {}, \"c\": []} ");
  g_assert_true (hn_json_is_object (v));
  g_assert_cmpuint (hn_json_length (v), ==, 3);
  HnJson *a = hn_json_object_get (v, "a");
  g_assert_true (hn_json_is_array (a));
  g_assert_cmpuint (hn_json_length (a), ==, 6);
  g_assert_true (hn_json_is_integer (hn_json_array_get (a, 0)));
  g_assert_cmpint (hn_json_get_int (hn_json_array_get (a, 0)), ==, 1);
  g_assert_false (hn_json_is_integer (hn_json_array_get (a, 1)));
  g_assert_cmpfloat (hn_json_get_double (hn_json_array_get (a, 1)), ==, -2.5);
  g_assert_true (hn_json_get_bool (hn_json_array_get (a, 2)));
  g_assert_true (hn_json_is_bool (hn_json_array_get (a, 3)));
  g_assert_false (hn_json_get_bool (hn_json_array_get (a, 3)));
  g_assert_true (hn_json_is_null (hn_json_array_get (a, 4)));
  g_assert_cmpstr (hn_json_get_string (hn_json_array_get (a, 5)), ==, "x");
  g_assert_null (hn_json_array_get (a, 6));
  g_assert_null (hn_json_object_get (v, "zz"));
  size_t kl;
  g_assert_cmpstr (hn_json_object_key_at (v, 2, &kl), ==, "c");
  g_assert_cmpuint (kl, ==, 1);
  hn_json_free (v);
}

static void
test_key_order_and_duplicates (void)
{
  HnJson *v = parse_ok ("{\"z\":1,\"a\":2,\"m\":3,\"a\":4}");
  g_assert_cmpuint (hn_json_length (v), ==, 3);
  g_assert_cmpstr (hn_json_object_key_at (v, 0, NULL), ==, "z");
  g_assert_cmpstr (hn_json_object_key_at (v, 1, NULL), ==, "a");
  g_assert_cmpint (hn_json_get_int (hn_json_object_get (v, "a")), ==, 4);
  char *s = write_with (v, -1, false, false);
  g_assert_cmpstr (s, ==, "{\"z\":1,\"a\":4,\"m\":3}");
  free (s);
  HnJsonWriteOptions sorted = { -1, false, true, true };
  s = hn_json_write (v, &sorted, NULL);
  g_assert_cmpstr (s, ==, "{\"a\": 4, \"m\": 3, \"z\": 1}");
  free (s);
  hn_json_free (v);

  /* Many keys: the hash index must agree with insertion order and lookups. */
  HnJson *o = hn_json_new_object ();
  for (int k = 0; k < 1000; k++) {
    char key[32];
    snprintf (key, sizeof key, "k%d", k);
    g_assert_true (hn_json_object_set (o, key, hn_json_new_int (k)));
  }
  g_assert_true (hn_json_object_set (o, "k500", hn_json_new_int (-1)));
  g_assert_cmpuint (hn_json_length (o), ==, 1000);
  for (int k = 0; k < 1000; k++) {
    char key[32];
    snprintf (key, sizeof key, "k%d", k);
    g_assert_cmpint (hn_json_get_int (hn_json_object_get (o, key)), ==, k == 500 ? -1 : k);
    g_assert_cmpstr (hn_json_object_key_at (o, (size_t) k, NULL), ==, key);
  }
  hn_json_free (o);
}

static void
test_unicode_escapes (void)
{
  HnJson *v = parse_ok ("\"a\\u00e9\\u65e5\\ud83d\\ude00\\n\\t\\\"\\\\\\/\\b\\f\\r\"");
  g_assert_cmpstr (hn_json_get_string (v), ==, "a\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\n\t\"\\/\b\f\r");
  char *s = write_with (v, -1, true, false);
  g_assert_cmpstr (s, ==, "\"a\\u00e9\\u65e5\\ud83d\\ude00\\n\\t\\\"\\\\/\\b\\f\\r\"");
  free (s);
  s = write_with (v, -1, false, false);
  g_assert_cmpstr (s, ==, "\"a\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\\n\\t\\\"\\\\/\\b\\f\\r\"");
  free (s);
  hn_json_free (v);

  /* Embedded NUL survives with its length. */
  v = parse_ok ("\"a\\u0000b\"");
  g_assert_cmpuint (hn_json_get_string_len (v), ==, 3);
  g_assert_cmpint (memcmp (hn_json_get_string (v), "a\0b", 3), ==, 0);
  s = write_with (v, -1, false, false);
  g_assert_cmpstr (s, ==, "\"a\\u0000b\"");
  free (s);
  hn_json_free (v);

  /* Raw UTF-8 passes through. */
  v = parse_ok ("\"\xe3\x81\x93\xe3\x82\x93\"");
  g_assert_cmpstr (hn_json_get_string (v), ==, "\xe3\x81\x93\xe3\x82\x93");
  hn_json_free (v);
}

typedef struct {
  const char *text;
  const char *message; /* substring expected, including the position */
} BadCase;

static void
test_invalid_documents (void)
{
  static const BadCase cases[] = {
    { "", "line 1, column 1: unexpected end of input" },
    { "   ", "line 1, column 4" },
    { "{", "line 1, column 2" },
    { "[1,]", "line 1, column 4: unexpected character ']'" },
    { "[1 2]", "line 1, column 4: expected ',' or ']'" },
    { "{\"a\" 1}", "line 1, column 6: expected ':'" },
    { "{1:2}", "line 1, column 2: expected a string key" },
    { "[\n  tru]", "line 2, column 3: unexpected character 't'" },
    { "\"abc", "line 1, column 1: unterminated string" },
    { "\"a\nb\"", "line 1, column 3: control character" },
    { "\"\\x\"", "line 1, column 2: invalid escape" },
    { "\"\\u12\"", "line 1, column 2: invalid \\u escape" },
    { "\"\\ud800\"", "line 1, column 2: high surrogate" },
    { "\"\\ud800\\u0041\"", "high surrogate" },
    { "\"\\udc00\"", "lone low surrogate" },
    { "\"\xff\"", "line 1, column 2: invalid UTF-8" },
    { "\"\xc0\xaf\"", "invalid UTF-8" },
    { "\"\xed\xa0\x80\"", "invalid UTF-8" },
    { "01", "leading zeros" },
    { "1.", "line 1, column 3: expected a digit after the decimal point" },
    { "1e", "expected a digit in the exponent" },
    { "-", "invalid number" },
    { "+1", "unexpected character '+'" },
    { "NaN", "unexpected character 'N'" },
    { "1 2", "line 1, column 3: unexpected data after the JSON value" },
    { "{\"a\":1}}", "unexpected data" },
    { "[\"a\",\n\n   x]", "line 3, column 4" },
  };
  for (size_t k = 0; k < G_N_ELEMENTS (cases); k++) {
    HnError err = { 0 };
    HnJson *v = hn_json_parse (cases[k].text, strlen (cases[k].text), &err);
    if (v)
      g_error ("%s parsed but should fail", cases[k].text);
    g_assert_cmpint (err.code, ==, HN_ERR_FORMAT);
    if (!strstr (err.message, cases[k].message))
      g_error ("for %s: got '%s', expected '%s'", cases[k].text, err.message, cases[k].message);
  }
}

static void
test_numbers (void)
{
  HnJson *v = parse_ok ("[9223372036854775807, -9223372036854775808, 9223372036854775808, "
                        "123456789012345678901234567890, 1e400, 1.5e-5, 0, -0, 1E2, 0.1]");
  g_assert_true (hn_json_is_integer (hn_json_array_get (v, 0)));
  g_assert_cmpint (hn_json_get_int (hn_json_array_get (v, 0)), ==, INT64_MAX);
  g_assert_cmpint (hn_json_get_int (hn_json_array_get (v, 1)), ==, INT64_MIN);
  g_assert_false (hn_json_is_integer (hn_json_array_get (v, 2)));
  g_assert_cmpfloat (hn_json_get_double (hn_json_array_get (v, 2)), ==, 9223372036854775808.0);
  g_assert_cmpfloat (hn_json_get_double (hn_json_array_get (v, 3)), ==, 1.2345678901234568e29);
  g_assert_true (isinf (hn_json_get_double (hn_json_array_get (v, 4))));
  g_assert_cmpint (hn_json_get_int (hn_json_array_get (v, 4)), ==, INT64_MAX);
  char *s = write_with (v, -1, false, true);
  g_assert_cmpstr (s, ==, "[9223372036854775807, -9223372036854775808, 9.223372036854776e+18, "
                          "1.2345678901234568e+29, Infinity, 1.5e-05, 0, 0, 100.0, 0.1]");
  free (s);
  hn_json_free (v);

  static const struct { double d; const char *py; } reprs[] = {
    { 1.0, "1.0" }, { -2.5, "-2.5" }, { 0.1, "0.1" }, { 1e16, "1e+16" }, { 1e15, "1000000000000000.0" },
    { 0.0001, "0.0001" }, { 0.00001, "1e-05" }, { 123.456, "123.456" }, { 1.0 / 3, "0.3333333333333333" },
    { 5e-324, "5e-324" }, { 1.7976931348623157e308, "1.7976931348623157e+308" }, { -0.0, "-0.0" },
    { 12345678901234567.0, "1.2345678901234568e+16" },
  };
  for (size_t k = 0; k < G_N_ELEMENTS (reprs); k++) {
    HnJson *d = hn_json_new_double (reprs[k].d);
    char *out = hn_json_write (d, NULL, NULL);
    g_assert_cmpstr (out, ==, reprs[k].py);
    free (out);
    hn_json_free (d);
  }
}

static void
test_writer_styles (void)
{
  HnJson *v = parse_ok ("{\"name\":\"f\",\"args\":{\"x\":[1,2],\"y\":{}},\"e\":[]}");
  char *s = write_with (v, -1, false, true);
  g_assert_cmpstr (s, ==, "{\"name\": \"f\", \"args\": {\"x\": [1, 2], \"y\": {}}, \"e\": []}");
  free (s);
  s = write_with (v, -1, false, false);
  g_assert_cmpstr (s, ==, "{\"name\":\"f\",\"args\":{\"x\":[1,2],\"y\":{}},\"e\":[]}");
  free (s);
  s = write_with (v, 2, false, true);
  g_assert_cmpstr (s, ==, "{\n  \"name\": \"f\",\n  \"args\": {\n    \"x\": [\n      1,\n      2\n    ],\n"
                          "    \"y\": {}\n  },\n  \"e\": []\n}");
  free (s);
  s = write_with (v, 0, false, true);
  g_assert_cmpstr (s, ==, "{\n\"name\": \"f\",\n\"args\": {\n\"x\": [\n1,\n2\n],\n\"y\": {}\n},\n\"e\": []\n}");
  free (s);
  hn_json_free (v);

  size_t n;
  char *q = hn_json_quote ("a\x01\x7f\xff", 4, false, &n);
  g_assert_cmpstr (q, ==, "\"a\\u0001\x7f\xef\xbf\xbd\"");
  free (q);
  q = hn_json_quote ("\x7f", 1, true, &n);
  g_assert_cmpstr (q, ==, "\"\\u007f\"");
  free (q);
}

static void
test_round_trip (void)
{
  const char *docs[] = {
    "[]", "{}", "null", "true", "\"\"", "[[[[]]]]",
    "{\"a\":[1,2.5,\"\\u00e9\\ud83d\\ude00\",null,{\"b\":false}],\"c\":-0.001}",
    "[1e-300,1.7976931348623157e+308,-123456789,0.30000000000000004]",
  };
  for (size_t k = 0; k < G_N_ELEMENTS (docs); k++) {
    for (int style = 0; style < 4; style++) {
      HnJson *v = parse_ok (docs[k]);
      char *s = write_with (v, style == 2 ? 4 : -1, style & 1, style == 3);
      HnError err = { 0 };
      HnJson *w = hn_json_parse (s, strlen (s), &err);
      g_assert_nonnull (w);
      g_assert_true (hn_json_equal (v, w));
      HnJson *c = hn_json_copy (w);
      g_assert_true (hn_json_equal (c, v));
      hn_json_free (c);
      hn_json_free (v);
      hn_json_free (w);
      free (s);
    }
  }
}

static void
test_depth_limit (void)
{
  GString *s = g_string_new (NULL);
  for (int k = 0; k < 100000; k++)
    g_string_append_c (s, '[');
  HnError err = { 0 };
  HnJson *v = hn_json_parse (s->str, s->len, &err);
  g_assert_null (v);
  g_assert_nonnull (strstr (err.message, "nesting deeper than 256"));
  g_assert_nonnull (strstr (err.message, "column 257"));

  g_string_truncate (s, 0);
  for (int k = 0; k < 10; k++)
    g_string_append (s, "{\"a\":[");
  for (int k = 0; k < 10; k++)
    g_string_append (s, "]}");
  v = hn_json_parse_ex (s->str, s->len, 20, &err);
  g_assert_nonnull (v);
  hn_json_free (v);
  v = hn_json_parse_ex (s->str, s->len, 19, &err);
  g_assert_null (v);
  g_string_free (s, TRUE);
}

static void
test_random_bytes (void)
{
  GRand *r = g_rand_new_with_seed (1234);
  const char alphabet[] = "{}[]\",:0123456789.eE-+ \\utruefalsenull\n\xc3\xa9\xff";
  for (int iter = 0; iter < 20000; iter++) {
    char buf[64];
    int n = g_rand_int_range (r, 0, sizeof buf);
    for (int k = 0; k < n; k++)
      buf[k] = alphabet[g_rand_int_range (r, 0, sizeof alphabet - 1)];
    HnError err = { 0 };
    HnJson *v = hn_json_parse (buf, (size_t) n, &err);
    if (v) {
      char *s = hn_json_write (v, NULL, NULL);
      HnJson *w = hn_json_parse (s, strlen (s), &err);
      /* Overflowing numbers become Infinity, which JSON cannot read back (Python can). */
      if (w)
        g_assert_true (hn_json_equal (v, w));
      else
        g_assert_nonnull (strstr (s, "Infinity"));
      hn_json_free (w);
      free (s);
      hn_json_free (v);
    } else {
      g_assert_nonnull (strstr (err.message, "line "));
    }
  }
  g_rand_free (r);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/json/parse-values", test_parse_values);
  g_test_add_func ("/json/key-order", test_key_order_and_duplicates);
  g_test_add_func ("/json/unicode-escapes", test_unicode_escapes);
  g_test_add_func ("/json/invalid", test_invalid_documents);
  g_test_add_func ("/json/numbers", test_numbers);
  g_test_add_func ("/json/writer-styles", test_writer_styles);
  g_test_add_func ("/json/round-trip", test_round_trip);
  g_test_add_func ("/json/depth-limit", test_depth_limit);
  g_test_add_func ("/json/random-bytes", test_random_bytes);
  return g_test_run ();
}
