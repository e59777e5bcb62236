/* Tests for hn-json-schema: every supported keyword produces a grammar (valid for our own
 * parser) that accepts the documents the schema allows and rejects the others; bounded
 * schemas produce bounded languages; unsupported keywords are refused by name.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-grammar.h"
#include "hn-json-schema.h"

#include <glib.h>
#include <string.h>

static HnGrammar *
convert(const char *schema)
{
  HnError err = { 0 };
  char *gbnf = hn_json_schema_to_gbnf(schema, strlen(schema), &err);
  if (gbnf == NULL)
    g_error("schema failed to convert: %s\n%s", err.message, schema);
  HnGrammar *g = hn_grammar_parse(gbnf, strlen(gbnf), NULL, &err);
  if (g == NULL)
    g_error("converted grammar does not parse: %s\n%s", err.message, gbnf);
  free(gbnf);
  return g;
}

static gboolean
accepts(HnGrammar *g, const char *doc)
{
  HnError err = { 0 };
  HnGrammarState *s = hn_grammar_state_new(g, NULL, &err);
  gboolean ok = hn_grammar_accept_bytes(s, doc, strlen(doc)) && hn_grammar_is_complete(s);
  hn_grammar_state_free(s);
  return ok;
}

#define YES(g, doc) do { if (!accepts(g, doc)) g_error("should accept: %s", doc); } while (0)
#define NO(g, doc) do { if (accepts(g, doc)) g_error("should reject: %s", doc); } while (0)

static void
test_object (void)
{
  HnGrammar *g = convert(
    "{\"type\": \"object\", \"properties\": {"
    "  \"name\": {\"type\": \"string\"},"
    "  \"age\": {\"type\": \"integer\"},"
    "  \"email\": {\"type\": \"string\"},"
    "  \"admin\": {\"type\": \"boolean\"}},"
    " \"required\": [\"name\", \"admin\"]}");
  YES(g, "{\"name\":\"Ada\",\"admin\":true}");
  YES(g, "{\"name\":\"Ada\",\"age\":36,\"admin\":false}");
  YES(g, "{\"name\":\"Ada\",\"age\":-3,\"email\":\"a@b\",\"admin\":true}");
  YES(g, "{\"name\":\"\\u00e9\\n\",\"email\":\"x\",\"admin\":true}");
  NO(g, "{\"admin\":true}");                          /* required missing */
  NO(g, "{\"admin\":true,\"name\":\"Ada\"}");         /* order */
  NO(g, "{\"name\":\"Ada\",\"admin\":true,\"x\":1}"); /* additional */
  NO(g, "{\"name\":\"Ada\",,\"admin\":true}");
  NO(g, "{\"name\":\"Ada\",\"age\":1.5,\"admin\":true}");
  hn_grammar_free(g);

  /* all optional: the empty object and any in-order subset */
  g = convert("{\"properties\": {\"a\": {\"type\": \"null\"}, \"b\": {\"type\": \"number\"}}}");
  YES(g, "{}");
  YES(g, "{\"b\":1.5e3}");
  YES(g, "{\"a\":null,\"b\":-0.5}");
  NO(g, "{,\"b\":1}");
  NO(g, "{\"a\":null,}");
  hn_grammar_free(g);

  g = convert("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}},"
              " \"additionalProperties\": {\"type\": \"string\"}}");
  YES(g, "{\"a\":1,\"x\":\"y\",\"z\":\"w\"}");
  YES(g, "{\"x\":\"y\"}");
  NO(g, "{\"a\":1,\"x\":2}");
  hn_grammar_free(g);

  g = convert("{\"type\": \"object\"}");
  YES(g, "{\"anything\":[1,{\"b\":null}]}");
  hn_grammar_free(g);
}

static void
test_strings_enums (void)
{
  HnGrammar *g = convert("{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 4}");
  YES(g, "\"ab\"");
  YES(g, "\"a\\\"cd\"");
  YES(g, "\"\xC3\xA9\xC3\xA9\"");
  NO(g, "\"a\"");
  NO(g, "\"abcde\"");
  hn_grammar_free(g);

  g = convert("{\"enum\": [\"red\", \"green\", 3, null, {\"k\": [true]}]}");
  YES(g, "\"red\"");
  YES(g, "3");
  YES(g, "null");
  YES(g, "{\"k\":[true]}");
  NO(g, "\"blue\"");
  NO(g, "\"re\"");
  hn_grammar_free(g);

  g = convert("{\"const\": \"say \\\"hi\\\"\\n\"}");
  YES(g, "\"say \\\"hi\\\"\\n\"");
  NO(g, "\"say hi\"");
  hn_grammar_free(g);
}

static void
test_integer_ranges (void)
{
  struct {
    const char *schema;
    long lo, hi;
  } cases[] = {
    { "{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 9}", 0, 9 },
    { "{\"type\": \"integer\", \"minimum\": 7, \"maximum\": 1234}", 7, 1234 },
    { "{\"type\": \"integer\", \"minimum\": -45, \"maximum\": 3}", -45, 3 },
    { "{\"type\": \"integer\", \"minimum\": -300, \"maximum\": -17}", -300, -17 },
    { "{\"type\": \"integer\", \"minimum\": 18, \"maximum\": 120}", 18, 120 },
    { "{\"type\": \"integer\", \"exclusiveMinimum\": 0, \"exclusiveMaximum\": 100}", 1, 99 },
    { "{\"type\": \"integer\", \"minimum\": 1990, \"maximum\": 2026}", 1990, 2026 },
  };
  for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
    HnGrammar *g = convert(cases[k].schema);
    for (long v = cases[k].lo - 1100; v <= cases[k].hi + 1100; v++) {
      char doc[32];
      g_snprintf(doc, sizeof doc, "%ld", v);
      gboolean want = v >= cases[k].lo && v <= cases[k].hi;
      if (accepts(g, doc) != want)
        g_error("%s: %ld should be %s", cases[k].schema, v, want ? "accepted" : "rejected");
    }
    NO(g, "007");
    NO(g, "-0");
    NO(g, "1.0");
    hn_grammar_free(g);
  }
  /* half-open */
  HnGrammar *g = convert("{\"type\": \"integer\", \"minimum\": 250}");
  for (long v = -20; v < 3000; v++) {
    char doc[32];
    g_snprintf(doc, sizeof doc, "%ld", v);
    g_assert_true(accepts(g, doc) == (v >= 250));
  }
  YES(g, "123456789012");
  hn_grammar_free(g);
  g = convert("{\"type\": \"integer\", \"maximum\": -5}");
  for (long v = -3000; v < 100; v++) {
    char doc[32];
    g_snprintf(doc, sizeof doc, "%ld", v);
    g_assert_true(accepts(g, doc) == (v <= -5));
  }
  hn_grammar_free(g);
}

static void
test_arrays_refs (void)
{
  HnGrammar *g = convert("{\"type\": \"array\", \"items\": {\"type\": \"boolean\"},"
                         " \"minItems\": 1, \"maxItems\": 3}");
  YES(g, "[true]");
  YES(g, "[true,false,true]");
  NO(g, "[]");
  NO(g, "[true,true,true,true]");
  NO(g, "[1]");
  hn_grammar_free(g);

  g = convert("{\"type\": \"array\", \"maxItems\": 0}");
  YES(g, "[]");
  NO(g, "[1]");
  hn_grammar_free(g);

  g = convert("{\"type\": \"array\"}");
  YES(g, "[]");
  YES(g, "[1,\"a\",[null]]");
  hn_grammar_free(g);

  g = convert("{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {"
              "\"v\": {\"type\": \"integer\"}, \"next\": {\"anyOf\": [{\"$ref\": \"#/$defs/node\"},"
              " {\"type\": \"null\"}]}}, \"required\": [\"v\", \"next\"]}},"
              " \"$ref\": \"#/$defs/node\"}");
  YES(g, "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}");
  NO(g, "{\"v\":1}");
  hn_grammar_free(g);

  g = convert("{\"oneOf\": [{\"type\": \"string\", \"maxLength\": 1}, {\"type\": [\"integer\", \"null\"]}]}");
  YES(g, "\"a\"");
  YES(g, "12");
  YES(g, "null");
  NO(g, "\"ab\"");
  hn_grammar_free(g);
}

static void
test_refused (void)
{
  const char *bad[][2] = {
    { "{\"type\": \"string\", \"pattern\": \"^a$\"}", "pattern" },
    { "{\"type\": \"number\", \"minimum\": 1}", "number" },
    { "{\"type\": \"widget\"}", "unknown type 'widget'" },
    { "{\"$ref\": \"#/definitions/missing\"}", "does not resolve" },
    { "{\"$ref\": \"http://example.com/s.json\"}", "not supported" },
    { "{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 1}", "minimum is above maximum" },
    { "{\"type\": \"object\", \"required\": [\"x\"], \"properties\": {}}", "'x'" },
    { "{\"not\": {}}", "not supported" },
    { "false", "allows nothing" },
    { "{\"type\": ", "schema: JSON line 1, column 10" },
    { "{\"a\": 1} x", "schema: JSON line 1" },
    /* found by tests/fuzz/fuzz-json-schema: schemas that only refer to themselves */
    { "{\"$ref\": \"#\"}", "no value can match it" },
    { "{\"$defs\": {\"p\": {\"$ref\": \"#/$defs/q\"}, \"q\": {\"$ref\": \"#/$defs/p\"}}, \"$ref\": \"#/$defs/p\"}",
      "no value can match it" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    HnError err = { 0 };
    char *gbnf = hn_json_schema_to_gbnf(bad[i][0], strlen(bad[i][0]), &err);
    if (gbnf != NULL)
      g_error("schema %zu converted but should not: %s", i, bad[i][0]);
    if (strstr(err.message, bad[i][1]) == NULL)
      g_error("schema %zu: message '%s' lacks '%s'", i, err.message, bad[i][1]);
  }
}

/* Large schemas convert in linear work (20,000 required properties took 39 s and 188 MB
 * before; tests/bench/bench-grammar prints the numbers now) and still mean exactly what
 * they say: every required property, in order; optional ones may be left out; many
 * definitions referred to by name each become one rule. */
static void
test_large (void)
{
  enum { N = 20000 };
  GString *schema = g_string_new("{\"type\": \"object\", \"properties\": {");
  for (int i = 0; i < N; i++)
    g_string_append_printf(schema, "%s\"p%d\": {\"type\": \"integer\"}", i ? ", " : "", i);
  g_string_append(schema, "}, \"required\": [");
  /* listed backwards: the order of `required` does not matter, that of `properties` does */
  for (int i = N - 1; i >= 0; i--)
    g_string_append_printf(schema, "\"p%d\"%s", i, i ? ", " : "");
  g_string_append(schema, "]}");
  HnGrammar *g = convert(schema->str);
  GString *doc = g_string_new("{");
  for (int i = 0; i < N; i++)
    g_string_append_printf(doc, "%s\"p%d\":%d", i ? "," : "", i, i * 7 - 5);
  g_string_append(doc, "}");
  YES(g, doc->str);
  /* one required property missing, the last one as well as one in the middle */
  GString *missing = g_string_new(NULL);
  g_string_append_len(missing, doc->str, (gssize) (strrchr(doc->str, ',') - doc->str));
  g_string_append(missing, "}");
  NO(g, missing->str);
  g_string_assign(missing, doc->str);
  char *middle = strstr(missing->str, ",\"p10000\":");
  g_string_erase(missing, middle - missing->str, (gssize) strlen(",\"p10000\":69995"));
  NO(g, missing->str);
  NO(g, "{}");
  hn_grammar_free(g);

  /* optional properties: any subset, in the written order (each one left out keeps every
   * later one possible, so at most HN_GRAMMAR_MAX_STACKS of them are followed at once) */
  enum { OPTIONAL = 900, M = 2000 };
  g_string_assign(schema, "{\"type\": \"object\", \"properties\": {");
  for (int i = 0; i < OPTIONAL; i++)
    g_string_append_printf(schema, "%s\"q%d\": {\"type\": \"boolean\"}", i ? ", " : "", i);
  g_string_append(schema, "}, \"required\": [\"q899\"]}");
  g = convert(schema->str);
  g_string_assign(doc, "{");
  for (int i = 0; i < OPTIONAL - 1; i += 13)
    g_string_append_printf(doc, "\"q%d\":true,", i);
  g_string_append(doc, "\"q899\":false}");
  YES(g, doc->str);
  YES(g, "{\"q899\":true}");
  NO(g, "{\"q5\":true}");                       /* q899 is required */
  NO(g, "{\"q7\":true,\"q5\":true,\"q899\":true}"); /* out of order */
  hn_grammar_free(g);

  /* many definitions, each referred to twice */
  g_string_assign(schema, "{\"$defs\": {");
  for (int i = 0; i < M; i++)
    g_string_append_printf(schema, "%s\"d%d\": {\"const\": %d}", i ? ", " : "", i, i);
  g_string_append(schema, "}, \"type\": \"object\", \"properties\": {");
  for (int i = 0; i < 2 * M; i++)
    g_string_append_printf(schema, "%s\"a%d\": {\"$ref\": \"#/$defs/d%d\"}", i ? ", " : "", i, i % M);
  g_string_append(schema, "}, \"required\": [");
  for (int i = 0; i < 2 * M; i++)
    g_string_append_printf(schema, "%s\"a%d\"", i ? ", " : "", i);
  g_string_append(schema, "]}");
  HnError err = { 0 };
  char *gbnf = hn_json_schema_to_gbnf(schema->str, schema->len, &err);
  g_assert_nonnull(gbnf);
  /* exactly one rule per definition */
  int n_ref_rules = 0;
  for (const char *p = gbnf; (p = strstr(p, "\nref-")) != NULL; p++)
    n_ref_rules++;
  g_assert_cmpint(n_ref_rules, ==, M);
  g = hn_grammar_parse(gbnf, strlen(gbnf), NULL, &err);
  g_assert_nonnull(g);
  g_string_assign(doc, "{");
  for (int i = 0; i < 2 * M; i++)
    g_string_append_printf(doc, "%s\"a%d\":%d", i ? "," : "", i, i % M);
  g_string_append(doc, "}");
  YES(g, doc->str);
  char *wrong = strstr(doc->str, "\"a2001\":1");
  wrong[strlen("\"a2001\":")] = '2'; /* a2001 refers to d1, whose value is 1 */
  NO(g, doc->str);
  hn_grammar_free(g);
  free(gbnf);
  g_string_free(missing, TRUE);
  g_string_free(doc, TRUE);
  g_string_free(schema, TRUE);
}

/* A schema whose grammar would exceed the engine's size bound is refused as too large
 * (HN_ERR_LIMIT), with a sentence about the schema, not about a line of a grammar the
 * author never wrote and not "no value can match it". */
static void
test_too_large (void)
{
  GString *schema = g_string_new("{\"type\": \"object\", \"properties\": {");
  for (int i = 0; i < 200; i++)
    g_string_append_printf(schema, "%s\"s%d\": {\"type\": \"string\", \"maxLength\": 10000}", i ? ", " : "", i);
  g_string_append(schema, "}}");
  HnError err = { 0 };
  char *gbnf = hn_json_schema_to_gbnf(schema->str, schema->len, &err);
  g_assert_null(gbnf);
  g_assert_cmpint(err.code, ==, HN_ERR_LIMIT);
  g_assert_nonnull(strstr(err.message, "schema: too large"));
  g_assert_null(strstr(err.message, "line "));
  g_assert_null(strstr(err.message, "no value can match"));
  g_string_free(schema, TRUE);
}

int
main (int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/json-schema/object", test_object);
  g_test_add_func("/json-schema/strings-enums", test_strings_enums);
  g_test_add_func("/json-schema/integer-ranges", test_integer_ranges);
  g_test_add_func("/json-schema/arrays-refs", test_arrays_refs);
  g_test_add_func("/json-schema/refused", test_refused);
  g_test_add_func("/json-schema/large", test_large);
  g_test_add_func("/json-schema/too-large", test_too_large);
  return g_test_run();
}
