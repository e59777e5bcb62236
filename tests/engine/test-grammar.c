/* Tests for hn-grammar: the GBNF parser (valid and broken grammars, error positions), the
 * matcher (strings, repetition, UTF-8 split across tokens) and vocabulary masking against
 * a brute-force check, and the grammars shipped in data/grammars.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-generate-model.h"
#include "hn-gguf.h"
#include "hn-grammar.h"
#include "hn-sampler.h"

#include <glib.h>
#include <math.h>
#include <string.h>

static HnGrammar *
parse_ok(const char *text)
{
  HnError err = { 0 };
  HnGrammar *g = hn_grammar_parse(text, strlen(text), NULL, &err);
  if (g == NULL)
    g_error("grammar failed to parse: %s\n%s", err.message, text);
  return g;
}

static gboolean
matches(HnGrammar *g, const char *input, gboolean *complete)
{
  HnError err = { 0 };
  HnGrammarState *s = hn_grammar_state_new(g, NULL, &err);
  g_assert_nonnull(s);
  gboolean ok = hn_grammar_accept_bytes(s, input, strlen(input));
  if (complete)
    *complete = ok && hn_grammar_is_complete(s);
  hn_grammar_state_free(s);
  return ok;
}

/* accepted as a complete sentence */
static gboolean
full(HnGrammar *g, const char *input)
{
  gboolean complete;
  return matches(g, input, &complete) && complete;
}

static void
test_valid_grammars (void)
{
  const char *valid[] = {
    "root ::= \"a\"",
    "root ::= \"\"",
    "root ::= ",
    "root::=\"a\"|\"b\"",
    "root ::= a b\na ::= \"x\"\nb ::= \"y\"  # trailing comment\n",
    "# comment first\n\nroot ::= ( \"a\" | \"b\" )* \"c\"\n",
    "root ::=\n  \"{\" (\n    \"a\"\n  | \"b\"\n  )? \"}\"\n",
    "root ::= \"a\"\n     | \"b\"\n",
    "root ::= [a-zA-Z_] [a-zA-Z0-9_]{0,7}",
    "root ::= [^\\n] . [\\x41-\\x5A] [\\u00e9] [\\]\\[\\-]",
    "root ::= x{3} x{2,} x{0,1} x{1,3}\nx ::= \"x\"",
    "root ::= \"\\x41\\u00e9\\U0001F600\\n\\r\\t\\\\\\\"\"",
    "root ::= a\na ::= \"(\" a? \")\"",
    "root ::= b a\na ::= \"x\" a | \"\"\nb ::= \"\"",
    "root ::= \"é\" [α-ω]+",
    "root-name_2 ::= \"z\"\nroot ::= root-name_2",
  };
  for (size_t i = 0; i < G_N_ELEMENTS(valid); i++) {
    HnGrammar *g = parse_ok(valid[i]);
    g_assert_cmpuint(hn_grammar_n_rules(g), >=, 1);
    hn_grammar_free(g);
  }
}

static void
test_broken_grammars (void)
{
  const struct {
    const char *text;
    const char *where;
    const char *what;
  } broken[] = {
    { "root ::= \"abc", "line 1, column 10", "unterminated string" },
    { "root ::= [a-z", "line 1, column 10", "unterminated character class" },
    { "root ::= foo", "line 1, column 10", "undefined rule 'foo'" },
    { "root ::= \"a\"\nx ::= ( \"b\" \"c\"\n", "line 3, column 1", "expected ')' to close the group opened at line 2, column 7" },
    { "root ::= \"a\"{2,1}", "line 1, column 13", "maximum is below" },
    { "root = \"a\"", "line 1, column 6", "expected '::='" },
    { "root ::= \"\\q\"", "line 1, column 11", "unknown escape" },
    { "a ::= \"x\"", "line 1, column 1", "no rule named 'root'" },
    { "root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1", "defined twice" },
    { "root ::= [z-a]", "line 1, column 11", "reversed" },
    { "root ::= \"a\" )", "line 1, column 14", "unbalanced ')'" },
    { "root ::= *", "line 1, column 10", "unexpected character '*'" },
    { "root ::= root \"a\" | \"b\"", "line 1, column 1", "left-recursive" },
    { "root ::= a\na ::= b? root \"x\"\nb ::= \"y\"", "line 1, column 1", "left-recursive" },
    { "root ::= \"a\"\n  \n x ::= ( \"b\" )++", "line 3, column 16", "without an item" },
    { "root ::= \"\\x4\"", "line 1, column 11", "hexadecimal" },
    { "root ::= []", "line 1, column 10", "empty character class" },
    { "root ::= \"a\"{99999}", "line 1, column 13", "repetition count above" },
    { "", "line 1, column 1", "no rules" },
    { "root ::= \"a\"\n\n   x", "line 3, column 5", "expected '::='" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(broken); i++) {
    HnError err = { 0 };
    HnGrammar *g = hn_grammar_parse(broken[i].text, strlen(broken[i].text), NULL, &err);
    if (g != NULL)
      g_error("grammar %zu parsed but should not: %s", i, broken[i].text);
    g_assert_cmpint(err.code, ==, HN_ERR_GRAMMAR);
    if (!strstr(err.message, broken[i].where) || !strstr(err.message, broken[i].what))
      g_error("grammar %zu: got '%s', want '%s' and '%s'", i, err.message, broken[i].where,
              broken[i].what);
  }
}

static void
test_matcher_basics (void)
{
  HnGrammar *g = parse_ok("root ::= \"ab\" [c-e]+ \"f\"?");
  g_assert_true(full(g, "abc"));
  g_assert_true(full(g, "abcdef"));
  g_assert_false(matches(g, "abf", NULL));
  g_assert_false(matches(g, "abcfx", NULL));
  gboolean complete;
  g_assert_true(matches(g, "ab", &complete));
  g_assert_false(complete);
  hn_grammar_free(g);

  g = parse_ok("root ::= \"x\"{2,4} \"y\"{3} \"z\"{1,}");
  g_assert_true(full(g, "xxyyyz"));
  g_assert_true(full(g, "xxxxyyyzzzz"));
  g_assert_false(matches(g, "xxxxx", NULL));
  g_assert_false(matches(g, "xyyy", NULL));
  g_assert_false(matches(g, "xxyyyy", NULL));
  g_assert_false(full(g, "xxyyy"));
  hn_grammar_free(g);

  g = parse_ok("root ::= [^\"\\\\]* \"\\\"\" . \"\\x41\\u00e9\\U0001F600\\n\"");
  g_assert_true(full(g, "hello\"\xE2\x82\xAC" "A\xC3\xA9\xF0\x9F\x98\x80\n"));
  g_assert_false(matches(g, "a\\", NULL));
  hn_grammar_free(g);

  /* nested, right-recursive and nullable rules */
  g = parse_ok("root ::= a\na ::= \"(\" a? \")\" a?");
  g_assert_true(full(g, "(()(()))()"));
  g_assert_false(matches(g, "())", NULL));
  g_assert_false(full(g, "(()"));
  hn_grammar_free(g);

  /* alternatives continued on the next line */
  g = parse_ok("root ::= \"yes\"\n     | \"no\"\n");
  g_assert_true(full(g, "no"));
  g_assert_true(full(g, "yes"));
  g_assert_false(matches(g, "nope", NULL));
  hn_grammar_free(g);
}

static void
test_matcher_utf8 (void)
{
  HnGrammar *g = parse_ok("root ::= [α-ω]+ \"é\"");
  HnError err = { 0 };
  HnGrammarState *s = hn_grammar_state_new(g, NULL, &err);
  /* "αβ" then é split byte by byte */
  g_assert_true(hn_grammar_accept_bytes(s, "\xCE", 1));
  g_assert_false(hn_grammar_is_complete(s));
  g_assert_true(hn_grammar_accept_bytes(s, "\xB1\xCE\xB2", 3));
  /* a lead byte that cannot start α-ω or é */
  g_assert_false(hn_grammar_accepts_bytes(s, "\xE2", 1));
  /* invalid continuation */
  g_assert_false(hn_grammar_accepts_bytes(s, "\xC3\x41", 2));
  g_assert_true(hn_grammar_accept_bytes(s, "\xC3", 1));
  g_assert_false(hn_grammar_is_complete(s));
  g_assert_true(hn_grammar_accept_bytes(s, "\xA9", 1));
  g_assert_true(hn_grammar_is_complete(s));
  g_assert_false(hn_grammar_can_continue(s));
  /* stray continuation byte */
  hn_grammar_state_reset(s);
  g_assert_false(hn_grammar_accepts_bytes(s, "\xB1", 1));
  hn_grammar_state_free(s);
  hn_grammar_free(g);
}

/* Overlong spellings and surrogates never stand for an allowed character: "o" spelled in
 * two, three or four bytes, and every lead byte of those, is refused. */
static void
test_matcher_overlong (void)
{
  HnGrammar *g = parse_ok("root ::= \"n\" [^x] \"!\"");
  HnError err = { 0 };
  HnGrammarState *s = hn_grammar_state_new(g, NULL, &err);
  g_assert_true(hn_grammar_accept_bytes(s, "n", 1));
  g_assert_false(hn_grammar_accepts_bytes(s, "\xC1\xAF", 2));          /* invalid lead anyway */
  g_assert_false(hn_grammar_accepts_bytes(s, "\xE0\x81\xAF", 3));
  g_assert_false(hn_grammar_accepts_bytes(s, "\xE0\x81", 2));
  g_assert_false(hn_grammar_accepts_bytes(s, "\xF0\x80\x81\xAF", 4));
  g_assert_false(hn_grammar_accepts_bytes(s, "\xF0\x80", 2));
  g_assert_false(hn_grammar_accepts_bytes(s, "\xED\xA0\x80", 3));     /* U+D800 */
  g_assert_false(hn_grammar_accepts_bytes(s, "\xF4\x90\x80\x80", 4)); /* past U+10FFFF */
  /* the shortest forms of neighbours are fine */
  g_assert_true(hn_grammar_accepts_bytes(s, "\xE0\xA0\x80", 3));      /* U+0800 */
  g_assert_true(hn_grammar_accepts_bytes(s, "\xF0\x90\x80\x80", 4)); /* U+10000 */
  g_assert_true(hn_grammar_accepts_bytes(s, "\xED\x9F\xBF", 3));      /* U+D7FF */
  g_assert_true(hn_grammar_accepts_bytes(s, "\xF4\x8F\xBF\xBF", 4)); /* U+10FFFF */
  hn_grammar_state_free(s);
  hn_grammar_free(g);

  /* only ASCII allowed: a lead byte of any longer sequence is refused at once */
  g = parse_ok("root ::= \"n\" \"o\"");
  s = hn_grammar_state_new(g, NULL, &err);
  g_assert_true(hn_grammar_accept_bytes(s, "n", 1));
  g_assert_false(hn_grammar_accepts_bytes(s, "\xC1", 1));
  g_assert_false(hn_grammar_accepts_bytes(s, "\xE0", 1));
  g_assert_false(hn_grammar_accepts_bytes(s, "\xF0", 1));
  g_assert_true(hn_grammar_accepts_bytes(s, "o", 1));
  hn_grammar_state_free(s);
  hn_grammar_free(g);
}

/* Masking over a vocabulary equals testing each token on its own. */
static void
check_mask_against_brute_force(HnGrammarState *s, int32_t n_vocab)
{
  HnCandidate *c = g_new(HnCandidate, n_vocab);
  for (int32_t i = 0; i < n_vocab; i++)
    c[i] = (HnCandidate){ i, 0.0f, 0.0f };
  hn_grammar_mask(s, c, (size_t) n_vocab);
  for (int32_t i = 0; i < n_vocab; i++) {
    gboolean masked_ok = c[i].logit == 0.0f;
    gboolean brute = hn_grammar_accepts_token_bytes(s, i);
    if (masked_ok != brute)
      g_error("token %d: mask says %d, direct test says %d", i, masked_ok, brute);
  }
  g_free(c);
}

static void
test_mask (void)
{
  /* a vocabulary of random byte strings over an alphabet that matters to JSON, with
   * multi-byte characters split at every place */
  static const char *pieces[] = { "{", "}", "[", "]", "\"", ":", ",", " ", "\n", "a", "b",
                                  "1", "0", "-", ".", "e", "t", "r", "u", "\\", "n", "l",
                                  "\xC3", "\xA9", "\xE2\x82", "\xAC", "\xF0\x9F", "\x98\x80",
                                  "\x01", "x", "f", "s" };
  enum { V = 4000 };
  char **bytes = g_new0(char *, V);
  uint32_t *lens = g_new0(uint32_t, V);
  bool *eog = g_new0(bool, V);
  GRand *r = g_rand_new_with_seed(11);
  for (int i = 0; i < V; i++) {
    GString *t = g_string_new(NULL);
    if (i < (int) G_N_ELEMENTS(pieces))
      g_string_append(t, pieces[i]);
    else {
      int n = g_rand_int_range(r, 1, 5);
      for (int k = 0; k < n; k++)
        g_string_append(t, pieces[g_rand_int_range(r, 0, G_N_ELEMENTS(pieces))]);
    }
    lens[i] = (uint32_t) t->len;
    bytes[i] = g_string_free(t, FALSE);
  }
  eog[V - 1] = true;
  lens[V - 2] = 0; /* a control token with no text */
  HnError err = { 0 };
  HnGrammarVocab *v = hn_grammar_vocab_new(V, (const char *const *) bytes, lens, eog, &err);
  g_assert_nonnull(v);
  const char *path = g_getenv("HANASHI_GRAMMARS");
  g_assert_nonnull(path);
  g_autofree char *file = g_build_filename(path, "json.gbnf", NULL);
  g_autofree char *text = NULL;
  gsize len;
  g_assert_true(g_file_get_contents(file, &text, &len, NULL));
  HnGrammar *g = hn_grammar_parse(text, len, NULL, &err);
  g_assert_nonnull(g);
  HnGrammarState *s = hn_grammar_state_new(g, v, &err);
  const char *doc = "{\"a\u00e9\": [1, -0.5e3, true, null, \"\\n\u20ac\"], \"b\": {}}";
  size_t doc_len = strlen(doc);
  for (size_t i = 0; i <= doc_len; i++) {
    check_mask_against_brute_force(s, V);
    if (i < doc_len)
      g_assert_true(hn_grammar_accept_bytes(s, doc + i, 1));
  }
  g_assert_true(hn_grammar_is_complete(s));
  g_assert_true(hn_grammar_accepts_token_bytes(s, V - 1));
  g_assert_false(hn_grammar_accepts_token_bytes(s, V - 2));
  hn_grammar_state_reset(s);
  g_assert_false(hn_grammar_accepts_token_bytes(s, V - 1)); /* EOG before anything */
  hn_grammar_state_free(s);
  hn_grammar_free(g);
  hn_grammar_vocab_free(v);
  for (int i = 0; i < V; i++)
    g_free(bytes[i]);
  g_free(bytes);
  g_free(lens);
  g_free(eog);
  g_rand_free(r);
}

static HnGrammar *
load_shipped(const char *name)
{
  const char *dir = g_getenv("HANASHI_GRAMMARS");
  g_assert_nonnull(dir);
  g_autofree char *file = g_build_filename(dir, name, NULL);
  g_autofree char *text = NULL;
  gsize len;
  g_assert_true(g_file_get_contents(file, &text, &len, NULL));
  HnError err = { 0 };
  HnGrammar *g = hn_grammar_parse(text, len, NULL, &err);
  if (g == NULL)
    g_error("%s: %s", name, err.message);
  return g;
}

static void
test_shipped (void)
{
  HnGrammar *g = load_shipped("json.gbnf");
  g_assert_true(full(g, "{\"a\": [1, 2.5, -3e10, \"x\\u00e9\"], \"b\": {\"c\": null}}"));
  g_assert_true(full(g, "  [true,false , \"\"]\n"));
  g_assert_true(full(g, "\"just a string\""));
  g_assert_true(full(g, "-0.25"));
  g_assert_false(matches(g, "{\"a\" 1}", NULL));
  g_assert_false(matches(g, "[01]", NULL));
  g_assert_false(matches(g, "{'a': 1}", NULL));
  g_assert_false(matches(g, "\"tab\there\"", NULL));
  /* an ordinary grammar never comes near the work budget, masks included */
  HnError err = { 0 };
  HnGrammarState *st = hn_grammar_state_new(g, NULL, &err);
  const char *doc = "{\"list\": [1, 2, 3, {\"deep\": [[[[\"x\"]]]]}], \"s\": \"\\u00e9\\n\", \"t\": true}";
  g_assert_true(hn_grammar_accept_bytes(st, doc, strlen(doc)));
  g_assert_true(hn_grammar_is_complete(st));
  g_assert_cmpuint(hn_grammar_state_truncated_steps(st), ==, 0);
  hn_grammar_state_free(st);
  hn_grammar_free(g);

  g = load_shipped("json-object.gbnf");
  g_assert_true(full(g, "{\"k\": [1, {\"z\": \"y\"}]}"));
  g_assert_false(matches(g, "[1]", NULL));
  hn_grammar_free(g);

  g = load_shipped("list.gbnf");
  g_assert_true(full(g, "- eggs\n- milk and honey\n"));
  g_assert_false(matches(g, "* eggs", NULL));
  g_assert_false(full(g, "- eggs"));
  hn_grammar_free(g);

  g = load_shipped("yes-no.gbnf");
  g_assert_true(full(g, "yes"));
  g_assert_true(full(g, "no"));
  g_assert_false(matches(g, "yes!", NULL));
  g_assert_false(matches(g, "maybe", NULL));
  hn_grammar_free(g);

  g = load_shipped("arithmetic.gbnf");
  g_assert_true(full(g, "(1 + 2.5) * -3 / 4 = -2.625"));
  g_assert_true(full(g, "12-7"));
  g_assert_false(matches(g, "1 ++ 2", NULL));
  g_assert_false(full(g, "(1 + 2"));
  hn_grammar_free(g);
}

/* A grammar whose ambiguity would explode stays within its stack limit. */
static void
test_bounded_state (void)
{
  HnGrammar *g = parse_ok("root ::= a*\na ::= \"x\" | \"x\" \"x\" | b\nb ::= \"x\"+");
  HnError err = { 0 };
  HnGrammarState *s = hn_grammar_state_new(g, NULL, &err);
  for (int i = 0; i < 300; i++) {
    g_assert_true(hn_grammar_accept_bytes(s, "x", 1));
    g_assert_cmpuint(hn_grammar_state_n_stacks(s), <=, HN_GRAMMAR_MAX_STACKS);
  }
  g_assert_true(hn_grammar_is_complete(s));
  hn_grammar_state_free(s);
  hn_grammar_free(g);
}

/* Mutated grammars never crash or hang the parser, and whatever parses can be run on
 * random input within the stack limits. */
static void
test_mutations (void)
{
  const char *names[] = { "json.gbnf", "arithmetic.gbnf", "list.gbnf" };
  GRand *r = g_rand_new_with_seed(99);
  const char alphabet[] = "()[]{}|*+?.\"\\^-:=# \nabc019,xu";
  int parsed = 0;
  for (size_t f = 0; f < G_N_ELEMENTS(names); f++) {
    const char *dir = g_getenv("HANASHI_GRAMMARS");
    g_autofree char *file = g_build_filename(dir, names[f], NULL);
    g_autofree char *orig = NULL;
    gsize len;
    g_assert_true(g_file_get_contents(file, &orig, &len, NULL));
    for (int iter = 0; iter < 400; iter++) {
      char *text = g_memdup2(orig, len + 1);
      int edits = g_rand_int_range(r, 1, 4);
      for (int e = 0; e < edits; e++) {
        gsize at = (gsize) g_rand_int_range(r, 0, (gint32) len);
        text[at] = alphabet[g_rand_int_range(r, 0, sizeof alphabet - 1)];
      }
      HnError err = { 0 };
      HnGrammar *g = hn_grammar_parse(text, len, NULL, &err);
      if (g) {
        parsed++;
        HnGrammarState *s = hn_grammar_state_new(g, NULL, &err);
        for (int k = 0; k < 64; k++) {
          char b = alphabet[g_rand_int_range(r, 0, sizeof alphabet - 1)];
          if (!hn_grammar_accept_bytes(s, &b, 1))
            break;
          g_assert_cmpuint(hn_grammar_state_n_stacks(s), <=, HN_GRAMMAR_MAX_STACKS);
        }
        hn_grammar_state_free(s);
        hn_grammar_free(g);
      } else {
        g_assert_cmpint(err.code, ==, HN_ERR_GRAMMAR);
        g_assert_nonnull(strstr(err.message, "line "));
      }
      g_free(text);
    }
  }
  g_test_message("%d of 1200 mutated grammars parsed", parsed);
  g_rand_free(r);
}

/* Pathological but legal grammars stay cheap: long repetitions and deep nesting. */
static void
test_large_repetitions (void)
{
  HnGrammar *g = parse_ok("root ::= (\"a\"{0,10000}){0,3} \"b\"");
  HnError err = { 0 };
  HnGrammarState *s = hn_grammar_state_new(g, NULL, &err);
  for (int i = 0; i < 2000; i++)
    g_assert_true(hn_grammar_accept_bytes(s, "a", 1));
  g_assert_true(hn_grammar_accept_bytes(s, "b", 1));
  g_assert_true(hn_grammar_is_complete(s));
  hn_grammar_state_free(s);
  hn_grammar_free(g);
  GString *deep = g_string_new("root ::= ");
  for (int i = 0; i < 150; i++)
    g_string_append(deep, "(\"x\" ");
  for (int i = 0; i < 150; i++)
    g_string_append(deep, ")?");
  g = parse_ok(deep->str);
  g_assert_true(full(g, "xxxxxxxxxx"));
  hn_grammar_free(g);
  g_string_truncate(deep, 0);
  g_string_append(deep, "root ::= ");
  for (int i = 0; i < 300; i++)
    g_string_append(deep, "(");
  err = (HnError){ 0 };
  g_assert_null(hn_grammar_parse(deep->str, deep->len, NULL, &err));
  g_assert_nonnull(strstr(err.message, "nested too deeply"));
  g_string_free(deep, TRUE);
}

/* Found by tests/fuzz/fuzz-gbnf: a grammar whose expansion nests without growing the parse
 * stack overflowed the C stack (and took seconds per byte).  Expansion now gives up at a
 * fixed depth; the state still answers. */
static void
test_deep_expansion (void)
{
  HnGrammar *g = parse_ok("root ::= item (\",\" item)root{0,3}\nitem ::=  |  | [^\"\\\\\\n]");
  gboolean complete = FALSE;
  (void) matches(g, "a,b,c,d,e,f,g,h", &complete);
  (void) matches(g, "root ::= item (\",\" item)root{0,3}", &complete);
  hn_grammar_free(g);
}

/* A thousand alternatives alive at once: the stack set's index grows from 16 entries to
 * over a thousand and must still find, and not duplicate, every stack. */
static void
test_many_stacks (void)
{
  GString *text = g_string_new("root ::= (");
  for (int i = 0; i < 1000; i++)
    g_string_append_printf(text, "%s\"w%04d\"", i ? " | " : "", i * 7);
  g_string_append(text, ") \" \" [a-z]*");
  HnGrammar *g = parse_ok(text->str);
  g_assert_true(full(g, "w0000 "));
  g_assert_true(full(g, "w6993 abc"));
  g_assert_true(full(g, "w3500 x"));
  g_assert_false(matches(g, "w0001", NULL)); /* 1 is not a multiple of 7 */
  g_assert_false(matches(g, "w69930", NULL));
  gboolean complete = TRUE;
  g_assert_true(matches(g, "w12", &complete)); /* still a prefix of w1204, w1211, ... */
  g_assert_false(complete);
  hn_grammar_free(g);
  g_string_free(text, TRUE);
}

/* fuzz-gbnf found this grammar taking seconds per byte: many long stacks per step, each
 * compared with every stack already present.  The test runs it the way the fuzzer does,
 * through the mask and then its own text, and checks the matcher still answers. */
static void
test_wide_expansion (void)
{
  const char *text =
      "root ::= item (\"uuuuuuuuuuuuuuuuuuu(uuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuu,\"* item){217}\n"
      "item ::= [ax42\" | [^\"-~\\*u15e9]+ | \"\\x41\" | [^\"\\\\\\n]? #ment\n";
  HnGrammar *g = parse_ok(text);
  const char *pieces[] = { "a", "A", "\"", "u", ",", "\n", "" };
  uint32_t lens[G_N_ELEMENTS(pieces)];
  bool eog[G_N_ELEMENTS(pieces)];
  for (size_t i = 0; i < G_N_ELEMENTS(pieces); i++) {
    lens[i] = (uint32_t) strlen(pieces[i]);
    eog[i] = i == G_N_ELEMENTS(pieces) - 1;
  }
  HnError err = { 0 };
  HnGrammarVocab *vocab = hn_grammar_vocab_new((int32_t) G_N_ELEMENTS(pieces), pieces, lens, eog, &err);
  g_assert_nonnull(vocab);
  HnGrammarState *st = hn_grammar_state_new(g, vocab, &err);
  g_assert_nonnull(st);
  float logits[G_N_ELEMENTS(pieces)] = { 0 };
  hn_grammar_mask_logits(st, logits, (int32_t) G_N_ELEMENTS(pieces));
  /* The first class runs to the first ']' ("[ax42\" | [^\"-~\*u15e9]+") and takes every
   * printable ASCII byte, the last one everything but '"', '\\' and '\n': the grammar
   * stands for any line, which is what makes it ambiguous at every byte. */
  g_assert_true(logits[0] == 0.0f && logits[1] == 0.0f && logits[6] == 0.0f);
  g_assert_true(isinf(logits[5]) && logits[5] < 0);
  size_t len = strlen(text);
  for (size_t i = 0; i < len && i < 256; i++)
    if (!hn_grammar_accept_bytes(st, text + i, 1))
      break;
  hn_grammar_mask_logits(st, logits, (int32_t) G_N_ELEMENTS(pieces));
  g_assert_true(isinf(logits[5]) && logits[5] < 0);
  /* this grammar is ambiguous enough to run out of budget: the state says so */
  g_assert_cmpuint(hn_grammar_state_truncated_steps(st), >, 0);
  hn_grammar_state_reset(st);
  g_assert_cmpuint(hn_grammar_state_truncated_steps(st), ==, 0);
  hn_grammar_state_free(st);
  hn_grammar_vocab_free(vocab);

  gboolean complete = FALSE;
  g_assert_true(matches(g, "root ::= item (\"uuu\\\" \xe3\x81\x82", &complete));
  g_assert_true(complete);
  g_assert_false(matches(g, "item\nitem", NULL));
  hn_grammar_free(g);
}

/* A chain of rules as long as a large JSON schema gives: each rule only refers to the next
 * (the expansion nests as deep as the chain, which a fixed recursion limit refused with
 * "the grammar allows no token here"), or refers to it and then adds a character (the parse
 * stack is as deep as the chain). */
static GString *
chain_grammar(int n, gboolean nested)
{
  GString *text = g_string_new("root ::= r1\n");
  for (int i = 1; i < n; i++)
    g_string_append_printf(text, nested ? "r%d ::= r%d \"y\"\n" : "r%d ::= r%d\n", i, i + 1);
  g_string_append_printf(text, "r%d ::= \"x\"\n", n);
  return text;
}

static void
test_rule_chain (void)
{
  const int lengths[] = { 5000, 20000 };
  for (size_t k = 0; k < G_N_ELEMENTS(lengths); k++) {
    int n = lengths[k];
    GString *tail = chain_grammar(n, FALSE);
    HnGrammar *g = parse_ok(tail->str);
    g_assert_cmpuint(hn_grammar_n_rules(g), ==, (size_t) n + 1);
    g_assert_true(full(g, "x"));
    g_assert_false(matches(g, "y", NULL));
    g_assert_false(matches(g, "xx", NULL));
    /* the mask at the start allows exactly the token "x" */
    const char *pieces[] = { "x", "y", "xy", "" };
    uint32_t lens[] = { 1, 1, 2, 0 };
    bool eog[] = { false, false, false, true };
    HnError err = { 0 };
    HnGrammarVocab *vocab = hn_grammar_vocab_new(4, pieces, lens, eog, &err);
    HnGrammarState *st = hn_grammar_state_new(g, vocab, &err);
    g_assert_nonnull(st);
    float logits[4] = { 0, 0, 0, 0 };
    hn_grammar_mask_logits(st, logits, 4);
    g_assert_true(logits[0] == 0.0f && isinf(logits[1]) && isinf(logits[2]) && isinf(logits[3]));
    g_assert_cmpuint(hn_grammar_state_truncated_steps(st), ==, 0);
    g_assert_false(hn_grammar_state_incomplete(st));
    hn_grammar_state_free(st);
    hn_grammar_vocab_free(vocab);
    hn_grammar_free(g);
    g_string_free(tail, TRUE);

    GString *nested = chain_grammar(n, TRUE);
    g = parse_ok(nested->str);
    GString *sentence = g_string_new("x");
    for (int i = 1; i < n; i++)
      g_string_append_c(sentence, 'y');
    st = hn_grammar_state_new(g, NULL, &err);
    g_assert_true(hn_grammar_accept_bytes(st, sentence->str, sentence->len - 1));
    g_assert_false(hn_grammar_is_complete(st)); /* one "y" short */
    g_assert_true(hn_grammar_accept_bytes(st, "y", 1));
    g_assert_true(hn_grammar_is_complete(st));
    g_assert_false(hn_grammar_accept_bytes(st, "y", 1));
    g_assert_cmpuint(hn_grammar_state_truncated_steps(st), ==, 0);
    hn_grammar_state_free(st);
    hn_grammar_free(g);
    g_string_free(sentence, TRUE);
    g_string_free(nested, TRUE);
  }
}

/* When a bound stops the work, the answer stays safe and says so.  A chain too deep to
 * expand within one step's budget: nothing can be allowed, and the sampler reports the work
 * limit (HN_ERR_LIMIT), not "the grammar allows no token here" -- which stays the answer
 * for a grammar that really allows nothing. */
static void
test_work_bound_message (void)
{
  const char *pieces[] = { "x", "y", "" };
  uint32_t lens[] = { 1, 1, 0 };
  bool eog[] = { false, false, true };
  HnError err = { 0 };
  HnGrammarVocab *vocab = hn_grammar_vocab_new(3, pieces, lens, eog, &err);
  HnSamplerParams sp;
  hn_sampler_params_init(&sp);
  sp.temperature = 0.0f;
  HnSampler *sampler = hn_sampler_new(&sp, 3, 16, &err);
  float logits[3] = { 1.0f, 2.0f, 0.5f };

  GString *deep = chain_grammar(200000, TRUE);
  HnGrammar *g = parse_ok(deep->str);
  HnGrammarState *st = hn_grammar_state_new(g, vocab, &err);
  g_assert_true(hn_grammar_state_incomplete(st));
  g_assert_cmpuint(hn_grammar_state_truncated_steps(st), >, 0);
  hn_error_clear(&err);
  g_assert_cmpint(hn_sampler_sample(sampler, logits, st, &err), ==, -1);
  g_assert_cmpint(err.code, ==, HN_ERR_LIMIT);
  g_assert_nonnull(strstr(err.message, "work limit"));
  g_assert_null(strstr(err.message, "allows no token"));
  hn_grammar_state_free(st);
  hn_grammar_free(g);
  g_string_free(deep, TRUE);

  g = parse_ok("root ::= \"z\"");
  st = hn_grammar_state_new(g, vocab, &err);
  g_assert_false(hn_grammar_state_incomplete(st));
  hn_error_clear(&err);
  g_assert_cmpint(hn_sampler_sample(sampler, logits, st, &err), ==, -1);
  g_assert_cmpint(err.code, ==, HN_ERR_GRAMMAR);
  g_assert_nonnull(strstr(err.message, "allows no token here"));
  hn_grammar_state_free(st);
  hn_grammar_free(g);
  hn_sampler_free(sampler);
  hn_grammar_vocab_free(vocab);
}

/* One mask has a work budget: over the LLaMA vocabulary, the ambiguous grammar of
 * /grammar/wide-expansion would spend seconds on a single mask (thousands of byte steps,
 * each allowed 50,000 units).  Its masks stop at the budget and are counted; every token a
 * cut-short mask allows is one the grammar accepts (the mask stays safe); the JSON grammar
 * never comes near the budget. */
static HnGrammarVocab *
llama_grammar_vocab (void)
{
  const char *dir = g_getenv("HANASHI_TESTDATA");
  if (dir == NULL)
    return NULL;
  g_autofree char *path = g_build_filename(dir, "vocab", "ggml-vocab-llama-spm.gguf", NULL);
  HnError err = { 0 };
  HnGguf *gguf = hn_gguf_open(path, &err);
  if (gguf == NULL)
    return NULL;
  HnVocab *vocab = hn_vocab_load(gguf, &err);
  g_assert_nonnull(vocab);
  HnGrammarVocab *gv = hn_gen_grammar_vocab_new(vocab, &err);
  g_assert_nonnull(gv);
  hn_vocab_free(vocab);
  hn_gguf_close(gguf);
  return gv;
}

static void
test_mask_budget (void)
{
  HnGrammarVocab *gv = llama_grammar_vocab();
  if (gv == NULL) {
    g_test_skip("no LLaMA vocabulary in HANASHI_TESTDATA");
    return;
  }
  int32_t n_vocab = hn_grammar_vocab_n_vocab(gv);
  float *logits = g_new(float, n_vocab);
  HnGrammar *g = parse_ok("root ::= item (\"uu(u,\"* item){217}\n"
                          "item ::= [ax42\" | [^\"-~\\*u15e9]+ | \"\\x41\" | [^\"\\\\\\n]?\n");
  HnError err = { 0 };
  HnGrammarState *st = hn_grammar_state_new(g, gv, &err);
  const char *walk = "uu(u,aa";
  size_t cut = 0;
  for (size_t i = 0; i <= strlen(walk); i++) {
    for (int32_t t = 0; t < n_vocab; t++)
      logits[t] = 0.0f;
    size_t before = hn_grammar_state_truncated_masks(st);
    hn_grammar_mask_logits(st, logits, n_vocab);
    if (hn_grammar_state_truncated_masks(st) > before) {
      cut++;
      g_assert_true(hn_grammar_state_incomplete(st));
      /* safety: a sample of what the cut-short mask allowed is accepted by the grammar */
      int checked = 0;
      for (int32_t t = 0; t < n_vocab && checked < 40; t += 97) {
        if (logits[t] != 0.0f)
          continue;
        g_assert_true(hn_grammar_accepts_token_bytes(st, t));
        checked++;
      }
    }
    if (walk[i] == '\0' || !hn_grammar_accept_bytes(st, walk + i, 1))
      break;
  }
  g_test_message("%zu of %zu masks cut at the work budget", cut, strlen(walk) + 1);
  g_assert_cmpuint(cut, >, 0);
  g_assert_cmpuint(hn_grammar_state_truncated_masks(st), ==, cut);
  g_assert_cmpuint(hn_grammar_state_truncated_steps(st), >=, cut);
  hn_grammar_state_reset(st);
  g_assert_cmpuint(hn_grammar_state_truncated_masks(st), ==, 0);
  hn_grammar_state_free(st);
  hn_grammar_free(g);

  /* an ordinary grammar: no mask is cut */
  g = parse_ok("root ::= \"{\" ( [a-z\" :,0-9] )* \"}\"");
  st = hn_grammar_state_new(g, gv, &err);
  const char *doc = "{\"a\": 1, \"b\": \"xyz\"}";
  for (size_t i = 0; i < strlen(doc); i++) {
    hn_grammar_mask_logits(st, logits, n_vocab);
    g_assert_true(hn_grammar_accept_bytes(st, doc + i, 1));
  }
  g_assert_cmpuint(hn_grammar_state_truncated_masks(st), ==, 0);
  g_assert_false(hn_grammar_state_incomplete(st));
  hn_grammar_state_free(st);
  hn_grammar_free(g);
  g_free(logits);
  hn_grammar_vocab_free(gv);
}

int
main (int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/grammar/valid", test_valid_grammars);
  g_test_add_func("/grammar/broken", test_broken_grammars);
  g_test_add_func("/grammar/matcher", test_matcher_basics);
  g_test_add_func("/grammar/utf8", test_matcher_utf8);
  g_test_add_func("/grammar/utf8-overlong", test_matcher_overlong);
  g_test_add_func("/grammar/mask", test_mask);
  g_test_add_func("/grammar/shipped", test_shipped);
  g_test_add_func("/grammar/bounded-state", test_bounded_state);
  g_test_add_func("/grammar/mutations", test_mutations);
  g_test_add_func("/grammar/large-repetitions", test_large_repetitions);
  g_test_add_func("/grammar/deep-expansion", test_deep_expansion);
  g_test_add_func("/grammar/many-stacks", test_many_stacks);
  g_test_add_func("/grammar/wide-expansion", test_wide_expansion);
  g_test_add_func("/grammar/rule-chain", test_rule_chain);
  g_test_add_func("/grammar/work-bound-message", test_work_bound_message);
  g_test_add_func("/grammar/mask-budget", test_mask_budget);
  return g_test_run();
}
