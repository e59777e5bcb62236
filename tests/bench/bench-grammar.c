/* bench-grammar — time and peak memory of large JSON schemas and grammars, and the cost
 * of one grammar mask, ordinary and pathological.  A benchmark, not a test: it prints
 * numbers and only fails when something is refused or accepted wrongly.
 *
 * Every case runs in a child process of its own, so that its peak resident memory
 * (ru_maxrss from wait4) is its own and not the high-water mark of the cases before it.
 *
 *   schema-required N   a schema with N required integer properties: convert it, parse the
 *                       grammar, match the document that lists them all
 *   schema-optional N   the same with every property optional; the document lists every
 *                       tenth
 *   chain-tail N        r1 ::= r2, ..., rN ::= "x": each rule only refers to the next
 *   chain-nested N      r1 ::= r2 "y", ...: the parse stack is N deep
 *   mask json           hn_grammar_mask_logits for the shipped json.gbnf over the LLaMA
 *                       vocabulary (32,000 tokens), at every step of a JSON document
 *   mask ambiguous      the same for a grammar that stands for "any line" in many ways
 *                       (found by fuzz-gbnf): the per-mask work budget bounds it
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-generate-model.h"
#include "hn-gguf.h"
#include "hn-grammar.h"
#include "hn-json-schema.h"
#include "hn-vocab.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  char *s;
  size_t len, cap;
} Text;

static void
text_add(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
text_add(Text *t, const char *fmt, ...)
{
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n >= 0 && t->len + (size_t) n < t->cap) {
      t->len += (size_t) n;
      return;
    }
    t->cap = t->cap ? t->cap * 2 : 4096;
    t->s = realloc(t->s, t->cap);
    if (t->s == NULL)
      abort();
  }
}

static void
fail(const char *what, const char *why)
{
  fprintf(stderr, "bench-grammar: %s: %s\n", what, why);
  exit(1);
}

/* Matches text against the grammar from a fresh state; true when all of it is accepted and
 * the grammar is complete there. */
static bool
matches(const HnGrammar *g, const char *text, size_t len)
{
  HnError err = { 0 };
  HnGrammarState *st = hn_grammar_state_new(g, NULL, &err);
  if (st == NULL)
    fail("state", err.message);
  bool ok = hn_grammar_accept_bytes(st, text, len) && hn_grammar_is_complete(st);
  hn_grammar_state_free(st);
  return ok;
}

static void
run_schema(int n, bool required)
{
  Text schema = { 0 }, doc = { 0 };
  text_add(&schema, "{\"type\":\"object\",\"properties\":{");
  for (int i = 0; i < n; i++)
    text_add(&schema, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
  text_add(&schema, "}");
  if (required) {
    text_add(&schema, ",\"required\":[");
    for (int i = 0; i < n; i++)
      text_add(&schema, "%s\"p%d\"", i ? "," : "", i);
    text_add(&schema, "]");
  }
  text_add(&schema, "}");
  text_add(&doc, "{");
  for (int i = 0, k = 0; i < n; i++)
    if (required || i % 10 == 0)
      text_add(&doc, "%s\"p%d\":%d", k++ ? "," : "", i, i);
  text_add(&doc, "}");

  double t0 = hn_time_now();
  HnError err = { 0 };
  char *gbnf = hn_json_schema_to_gbnf(schema.s, schema.len, &err);
  if (gbnf == NULL)
    fail("schema", err.message);
  double t1 = hn_time_now();
  HnGrammar *g = hn_grammar_parse(gbnf, strlen(gbnf), NULL, &err);
  if (g == NULL)
    fail("grammar", err.message);
  double t2 = hn_time_now();
  if (!matches(g, doc.s, doc.len))
    fail("schema", "the document is refused");
  /* one property too many at the end, or (required) one left out, is refused */
  if (required && matches(g, "{\"p0\":0}", 8))
    fail("schema", "a document without the required properties is accepted");
  double t3 = hn_time_now();
  printf("  schema-%s %6d: schema %6.1f KB, grammar %7.1f KB, %7zu rules; convert %7.3f s, parse %7.3f s, "
         "match %7.3f s (document %.1f KB)",
         required ? "required" : "optional", n, schema.len / 1e3, strlen(gbnf) / 1e3, hn_grammar_n_rules(g),
         t1 - t0, t2 - t1, t3 - t2, doc.len / 1e3);
  hn_grammar_free(g);
  free(gbnf);
  free(schema.s);
  free(doc.s);
}

static void
run_chain(int n, bool nested)
{
  Text gbnf = { 0 }, doc = { 0 };
  text_add(&gbnf, "root ::= r1\n");
  for (int i = 1; i < n; i++)
    text_add(&gbnf, nested ? "r%d ::= r%d \"y\"\n" : "r%d ::= r%d\n", i, i + 1);
  text_add(&gbnf, "r%d ::= \"x\"\n", n);
  text_add(&doc, "x");
  for (int i = 1; nested && i < n; i++)
    text_add(&doc, "y");
  double t0 = hn_time_now();
  HnError err = { 0 };
  HnGrammar *g = hn_grammar_parse(gbnf.s, gbnf.len, NULL, &err);
  if (g == NULL)
    fail("chain", err.message);
  double t1 = hn_time_now();
  if (!matches(g, doc.s, doc.len))
    fail("chain", "the chain's sentence is refused");
  double t2 = hn_time_now();
  printf("  chain-%s %6d: parse %7.3f s, match %7.3f s (%zu bytes)", nested ? "nested" : "tail  ", n,
         t1 - t0, t2 - t1, doc.len);
  hn_grammar_free(g);
  free(gbnf.s);
  free(doc.s);
}

static HnGrammarVocab *
llama_vocab(void)
{
  const char *dir = getenv("HANASHI_TESTDATA");
  if (dir == NULL)
    return NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", dir);
  HnError err = { 0 };
  HnGguf *gguf = hn_gguf_open(path, &err);
  if (gguf == NULL)
    return NULL;
  HnVocab *vocab = hn_vocab_load(gguf, &err);
  HnGrammarVocab *gv = vocab ? hn_gen_grammar_vocab_new(vocab, &err) : NULL;
  hn_vocab_free(vocab);
  hn_gguf_close(gguf);
  return gv;
}

/* Masks at every byte of `walk` (accepting it byte by byte): mean and worst time per mask,
 * and how many masks ran out of their work budget. */
static void
run_mask(const char *name, const char *gbnf, const char *walk)
{
  HnGrammarVocab *gv = llama_vocab();
  if (gv == NULL) {
    printf("  mask %-9s: skipped (no LLaMA vocabulary in HANASHI_TESTDATA)", name);
    return;
  }
  HnError err = { 0 };
  HnGrammar *g = hn_grammar_parse(gbnf, strlen(gbnf), NULL, &err);
  if (g == NULL)
    fail(name, err.message);
  HnGrammarState *st = hn_grammar_state_new(g, gv, &err);
  int32_t n_vocab = hn_grammar_vocab_n_vocab(gv);
  float *logits = malloc((size_t) n_vocab * sizeof *logits);
  double total = 0, worst = 0;
  int n_masks = 0, allowed_sum = 0;
  for (size_t i = 0; i <= strlen(walk); i++) {
    for (int32_t t = 0; t < n_vocab; t++)
      logits[t] = 0.0f;
    double t0 = hn_time_now();
    hn_grammar_mask_logits(st, logits, n_vocab);
    double dt = hn_time_now() - t0;
    total += dt;
    worst = dt > worst ? dt : worst;
    n_masks++;
    for (int32_t t = 0; t < n_vocab; t++)
      allowed_sum += logits[t] == 0.0f;
    if (walk[i] == '\0' || !hn_grammar_accept_bytes(st, walk + i, 1))
      break;
  }
  printf("  mask %-9s: %3d masks, mean %8.3f ms, worst %8.3f ms, %6.0f tokens allowed on average, "
         "%zu masks cut at the work budget",
         name, n_masks, 1e3 * total / n_masks, 1e3 * worst, (double) allowed_sum / n_masks,
         hn_grammar_state_truncated_masks(st));
  free(logits);
  hn_grammar_state_free(st);
  hn_grammar_free(g);
  hn_grammar_vocab_free(gv);
}

static char *
read_grammar(const char *name)
{
  const char *dir = getenv("HANASHI_GRAMMARS");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir ? dir : "data/grammars", name);
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    fail(path, "cannot open");
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return buf;
}

typedef enum { SCHEMA_REQUIRED, SCHEMA_OPTIONAL, CHAIN_TAIL, CHAIN_NESTED, MASK_JSON, MASK_AMBIGUOUS } Kind;

static void
run_case(Kind kind, int n)
{
  fflush(stdout);
  double t0 = hn_time_now();
  pid_t pid = fork();
  if (pid < 0)
    fail("fork", "failed");
  if (pid == 0) {
    switch (kind) {
    case SCHEMA_REQUIRED: run_schema(n, true); break;
    case SCHEMA_OPTIONAL: run_schema(n, false); break;
    case CHAIN_TAIL: run_chain(n, false); break;
    case CHAIN_NESTED: run_chain(n, true); break;
    case MASK_JSON:
      run_mask("json", read_grammar("json.gbnf"),
               "{\"name\": \"Hanashi\", \"tags\": [\"chat\", \"local\"], \"size\": 12.5, \"ok\": true}");
      break;
    case MASK_AMBIGUOUS:
      run_mask("ambiguous",
               "root ::= item (\"uu(u,\"* item){217}\n"
               "item ::= [ax42\" | [^\"-~\\*u15e9]+ | \"\\x41\" | [^\"\\\\\\n]?\n",
               "uu(u,aaaa uu(u,uu(u, bbbb");
      break;
    }
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail("case", "the child failed");
  printf("; total %.3f s, peak %.1f MB\n", hn_time_now() - t0, ru.ru_maxrss / 1024.0);
}

int
main(void)
{
  printf("bench-grammar (the numbers vary with the machine's load; nothing here is asserted)\n");
  run_case(SCHEMA_REQUIRED, 2000);
  run_case(SCHEMA_REQUIRED, 20000);
  run_case(SCHEMA_OPTIONAL, 20000);
  run_case(CHAIN_TAIL, 5000);
  run_case(CHAIN_NESTED, 5000);
  run_case(CHAIN_TAIL, 20000);
  run_case(CHAIN_NESTED, 20000);
  run_case(MASK_JSON, 0);
  run_case(MASK_AMBIGUOUS, 0);
  return 0;
}
