/* hn-grammar-parser.c — GBNF text to the flattened rule table: lexing and parsing the
 * rules, rewriting repetition and groups into generated rules, the size limits, and the
 * structural checks (undefined rules, left recursion) done before a grammar is accepted.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-grammar-private.h"
#include "hn-array.h"

/* ===================================================================== Parser ==== */

typedef struct {
  Elem *v;
  size_t n, cap;
} ElemVec;

typedef struct {
  char *name;
  ElemVec body; /* alternatives, each closed by EL_END */
  bool defined;
  bool generated;
  size_t def_pos;  /* where it was defined (or, generated: where its text starts) */
  size_t ref_pos;  /* first reference, for "undefined rule" */
} PRule;

typedef struct {
  const char *src;
  size_t len, pos;
  PRule *rules;
  size_t n_rules, cap_rules;
  uint32_t *ranges;
  size_t n_ranges, cap_ranges; /* counted in uint32 */
  CharClass *classes;
  size_t n_classes, cap_classes;
  size_t total_elems;
  int depth;
  /* Open-addressed index of the named rules (rule + 1, 0 = empty), at most half full: a
   * linear search per reference made a grammar of many rules quadratic to parse (a JSON
   * schema with 20,000 properties gives 60,000 rules). */
  uint32_t *name_index;
  size_t name_index_cap;
  size_t n_named;
  HnError *err;
  bool failed;
} Parser;

static void
pos_to_line_col(const char *src, size_t len, size_t pos, int *line, int *col)
{
  int l = 1, c = 1;
  for (size_t i = 0; i < pos && i < len; i++) {
    if (src[i] == '\n') {
      l++;
      c = 1;
    } else if (((unsigned char) src[i] & 0xC0) != 0x80) {
      c++;
    }
  }
  *line = l;
  *col = c;
}

static bool perr(Parser *P, size_t pos, const char *fmt, ...) HN_PRINTF(3, 4);

static bool
perr(Parser *P, size_t pos, const char *fmt, ...)
{
  if (P->failed)
    return false;
  P->failed = true;
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int line, col;
  pos_to_line_col(P->src, P->len, pos, &line, &col);
  return hn_error_set(P->err, HN_ERR_GRAMMAR, "line %d, column %d: %s", line, col, msg);
}

/* A size bound of the engine (not a mistake in the grammar): HN_ERR_LIMIT, so that callers
 * can say "too large" rather than "invalid". */
static bool
perr_limit(Parser *P, size_t pos, const char *what)
{
  if (P->failed)
    return false;
  perr(P, pos, "%s", what);
  if (P->err)
    P->err->code = HN_ERR_LIMIT;
  return false;
}

static bool
push_elem(Parser *P, uint32_t rule, uint32_t type, uint32_t value)
{
  if (P->failed)
    return false;
  if (++P->total_elems > HN_GRAMMAR_MAX_ELEMENTS) {
    char what[96];
    snprintf(what, sizeof what, "grammar too large (more than %u elements)", HN_GRAMMAR_MAX_ELEMENTS);
    return perr_limit(P, P->pos, what);
  }
  ElemVec *b = &P->rules[rule].body;
  if (!HN_ARRAY_RESERVE(b->v, b->cap, b->n + 1, 8))
    return perr(P, P->pos, "out of memory");
  b->v[b->n++] = (Elem){ type, value };
  return true;
}

static int64_t
add_rule(Parser *P, const char *name, size_t name_len, bool generated, size_t pos)
{
  if (P->n_rules >= (1u << 24)) {
    perr_limit(P, pos, "too many rules");
    return -1;
  }
  if (!HN_ARRAY_RESERVE(P->rules, P->cap_rules, P->n_rules + 1, 8)) {
    perr(P, pos, "out of memory");
    return -1;
  }
  PRule *r = &P->rules[P->n_rules];
  memset(r, 0, sizeof *r);
  r->name = malloc(name_len + 1);
  if (r->name == NULL) {
    perr(P, pos, "out of memory");
    return -1;
  }
  memcpy(r->name, name, name_len);
  r->name[name_len] = '\0';
  r->generated = generated;
  r->def_pos = pos;
  r->ref_pos = pos;
  return (int64_t) P->n_rules++;
}

static uint32_t
hash_name(const char *name, size_t len)
{
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++)
    h = (h ^ (uint8_t) name[i]) * 16777619u;
  return h;
}

/* Re-enters every named rule into an index of `cap` slots (a power of two). */
static bool
name_index_rebuild(Parser *P, size_t cap)
{
  uint32_t *index = calloc(cap, sizeof *index);
  if (index == NULL)
    return false;
  for (size_t i = 0; i < P->n_rules; i++) {
    if (P->rules[i].generated)
      continue;
    size_t slot = hash_name(P->rules[i].name, strlen(P->rules[i].name)) & (cap - 1);
    while (index[slot] != 0)
      slot = (slot + 1) & (cap - 1);
    index[slot] = (uint32_t) i + 1;
  }
  free(P->name_index);
  P->name_index = index;
  P->name_index_cap = cap;
  return true;
}

static int64_t
find_or_add_rule(Parser *P, const char *name, size_t name_len, size_t pos)
{
  if (P->name_index == NULL && !name_index_rebuild(P, 64)) {
    perr(P, pos, "out of memory");
    return -1;
  }
  size_t mask = P->name_index_cap - 1;
  size_t slot = hash_name(name, name_len) & mask;
  for (; P->name_index[slot] != 0; slot = (slot + 1) & mask) {
    const PRule *r = &P->rules[P->name_index[slot] - 1];
    if (strlen(r->name) == name_len && memcmp(r->name, name, name_len) == 0)
      return (int64_t) P->name_index[slot] - 1;
  }
  int64_t r = add_rule(P, name, name_len, false, pos);
  if (r < 0)
    return -1;
  P->name_index[slot] = (uint32_t) r + 1;
  if (++P->n_named * 2 > P->name_index_cap && !name_index_rebuild(P, P->name_index_cap * 2)) {
    perr(P, pos, "out of memory");
    return -1;
  }
  return r;
}

static int64_t
new_generated_rule(Parser *P, size_t pos)
{
  return add_rule(P, "(generated)", 11, true, pos);
}

static bool
is_name_char(int c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

static int
peek(Parser *P, size_t off)
{
  return P->pos + off < P->len ? (unsigned char) P->src[P->pos + off] : -1;
}

/* Skips blanks and comments; newlines too when `newline_ok`. */
static void
skip_space(Parser *P, bool newline_ok)
{
  while (P->pos < P->len) {
    char c = P->src[P->pos];
    if (c == ' ' || c == '\t' || c == '\r')
      P->pos++;
    else if (c == '#') {
      while (P->pos < P->len && P->src[P->pos] != '\n')
        P->pos++;
    } else if (c == '\n' && newline_ok)
      P->pos++;
    else
      break;
  }
}

/* Decodes one UTF-8 code point of the grammar text. */
static bool
read_utf8(Parser *P, uint32_t *cp)
{
  const unsigned char *s = (const unsigned char *) P->src;
  size_t start = P->pos;
  unsigned char b = s[P->pos];
  int extra;
  uint32_t v;
  if (b < 0x80) {
    *cp = b;
    P->pos++;
    return true;
  } else if (b >= 0xC2 && b <= 0xDF) {
    extra = 1;
    v = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    extra = 2;
    v = b & 0x0F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    extra = 3;
    v = b & 0x07;
  } else {
    return perr(P, start, "invalid UTF-8 in grammar");
  }
  P->pos++;
  for (int i = 0; i < extra; i++) {
    if (P->pos >= P->len || (s[P->pos] & 0xC0) != 0x80)
      return perr(P, start, "invalid UTF-8 in grammar");
    v = (v << 6) | (s[P->pos++] & 0x3F);
  }
  if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
    return perr(P, start, "invalid UTF-8 in grammar");
  *cp = v;
  return true;
}

static bool
read_hex(Parser *P, int digits, uint32_t *out, size_t esc_pos)
{
  uint32_t v = 0;
  for (int i = 0; i < digits; i++) {
    int c = peek(P, 0);
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return perr(P, esc_pos, "escape needs %d hexadecimal digits", digits);
    v = v * 16 + (uint32_t) d;
    P->pos++;
  }
  if (v > 0x10FFFF)
    return perr(P, esc_pos, "code point U+%X is beyond U+10FFFF", v);
  *out = v;
  return true;
}

/* One character of a literal or class, escapes included. */
static bool
read_char(Parser *P, uint32_t *cp)
{
  if (P->pos >= P->len)
    return perr(P, P->pos, "unexpected end of grammar");
  if (P->src[P->pos] != '\\')
    return read_utf8(P, cp);
  size_t esc = P->pos;
  P->pos++;
  int c = peek(P, 0);
  if (c < 0)
    return perr(P, esc, "unexpected end of grammar after '\\'");
  P->pos++;
  switch (c) {
  case 'n': *cp = '\n'; return true;
  case 'r': *cp = '\r'; return true;
  case 't': *cp = '\t'; return true;
  case '0': *cp = 0; return true;
  case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/':
  case '.': case '(': case ')': case '|': case '*': case '+': case '?': case '{': case '}':
    *cp = (uint32_t) c;
    return true;
  case 'x': return read_hex(P, 2, cp, esc);
  case 'u': return read_hex(P, 4, cp, esc);
  case 'U': return read_hex(P, 8, cp, esc);
  default:
    return perr(P, esc, "unknown escape '\\%c'", c >= 32 && c < 127 ? c : '?');
  }
}

static bool parse_alternatives(Parser *P, uint32_t rule, bool nested);

static bool
parse_literal(Parser *P, uint32_t rule)
{
  size_t start = P->pos;
  P->pos++; /* opening quote */
  for (;;) {
    if (P->pos >= P->len || P->src[P->pos] == '\n')
      return perr(P, start, "unterminated string literal");
    if (P->src[P->pos] == '"') {
      P->pos++;
      return true;
    }
    uint32_t cp;
    if (!read_char(P, &cp) || !push_elem(P, rule, EL_LIT, cp))
      return false;
  }
}

static bool
parse_class(Parser *P, uint32_t rule)
{
  size_t start = P->pos;
  P->pos++;
  bool negated = false;
  if (peek(P, 0) == '^') {
    negated = true;
    P->pos++;
  }
  uint32_t off = (uint32_t) P->n_ranges;
  for (;;) {
    if (P->pos >= P->len || P->src[P->pos] == '\n')
      return perr(P, start, "unterminated character class");
    if (P->src[P->pos] == ']') {
      P->pos++;
      break;
    }
    size_t item = P->pos;
    uint32_t lo, hi;
    if (!read_char(P, &lo))
      return false;
    hi = lo;
    if (peek(P, 0) == '-' && peek(P, 1) != ']' && peek(P, 1) >= 0) {
      P->pos++;
      if (!read_char(P, &hi))
        return false;
      if (hi < lo)
        return perr(P, item, "character range is reversed");
    }
    if (!HN_ARRAY_RESERVE(P->ranges, P->cap_ranges, P->n_ranges + 2, 8))
      return perr(P, item, "out of memory");
    P->ranges[P->n_ranges++] = lo;
    P->ranges[P->n_ranges++] = hi;
  }
  uint32_t n = (uint32_t) (P->n_ranges - off) / 2;
  if (n == 0 && !negated)
    return perr(P, start, "empty character class");
  if (!HN_ARRAY_RESERVE(P->classes, P->cap_classes, P->n_classes + 1, 8))
    return perr(P, start, "out of memory");
  P->classes[P->n_classes] = (CharClass){ off, n, negated };
  return push_elem(P, rule, EL_CLASS, (uint32_t) P->n_classes++);
}

/* Moves body[from..] of `rule` into a new generated rule (one alternative) and returns it. */
static int64_t
wrap_in_rule(Parser *P, uint32_t rule, size_t from, size_t pos)
{
  int64_t g = new_generated_rule(P, pos);
  if (g < 0)
    return -1;
  ElemVec *src = &P->rules[rule].body;
  size_t n = src->n - from;
  for (size_t i = 0; i < n; i++) {
    Elem e = P->rules[rule].body.v[from + i];
    P->total_elems--; /* moved, not added */
    if (!push_elem(P, (uint32_t) g, e.type, e.value))
      return -1;
  }
  P->rules[rule].body.n = from;
  if (!push_elem(P, (uint32_t) g, EL_END, 0))
    return -1;
  return g;
}

static bool
parse_repeat_count(Parser *P, unsigned long *out, size_t at)
{
  if (!(peek(P, 0) >= '0' && peek(P, 0) <= '9'))
    return perr(P, at, "expected a number in repetition");
  unsigned long v = 0;
  while (peek(P, 0) >= '0' && peek(P, 0) <= '9') {
    v = v * 10 + (unsigned long) (peek(P, 0) - '0');
    if (v > HN_GRAMMAR_MAX_REPEAT)
      return perr(P, at, "repetition count above %d", HN_GRAMMAR_MAX_REPEAT);
    P->pos++;
  }
  *out = v;
  return true;
}

/* Applies x{min,max} (max = ULONG_MAX: unbounded) to the element body[at] of `rule`,
 * which is the single element standing for x. */
static bool
apply_repeat(Parser *P, uint32_t rule, size_t at, unsigned long min, unsigned long max,
             size_t pos)
{
  Elem x = P->rules[rule].body.v[at];
  P->rules[rule].body.n = at;
  P->total_elems--;
  for (unsigned long i = 0; i < min; i++)
    if (!push_elem(P, rule, x.type, x.value))
      return false;
  if (max == (unsigned long) -1) {
    /* R ::= x R | ε */
    int64_t r = new_generated_rule(P, pos);
    if (r < 0)
      return false;
    if (!push_elem(P, (uint32_t) r, x.type, x.value) || !push_elem(P, (uint32_t) r, EL_RULE, (uint32_t) r) ||
        !push_elem(P, (uint32_t) r, EL_END, 0) || !push_elem(P, (uint32_t) r, EL_END, 0))
      return false;
    return push_elem(P, rule, EL_RULE, (uint32_t) r);
  }
  /* up to (max - min) more, nested so that each is optional only after the previous:
   * O_1 ::= x | ε ;  O_k ::= x O_{k-1} | ε */
  int64_t prev = -1;
  for (unsigned long k = min; k < max; k++) {
    int64_t r = new_generated_rule(P, pos);
    if (r < 0)
      return false;
    if (!push_elem(P, (uint32_t) r, x.type, x.value))
      return false;
    if (prev >= 0 && !push_elem(P, (uint32_t) r, EL_RULE, (uint32_t) prev))
      return false;
    if (!push_elem(P, (uint32_t) r, EL_END, 0) || !push_elem(P, (uint32_t) r, EL_END, 0))
      return false;
    prev = r;
  }
  if (prev >= 0)
    return push_elem(P, rule, EL_RULE, (uint32_t) prev);
  return true;
}

static bool
parse_sequence(Parser *P, uint32_t rule, bool nested)
{
  for (;;) {
    skip_space(P, nested);
    int c = peek(P, 0);
    size_t item_pos = P->pos;
    size_t start = P->rules[rule].body.n;
    if (c == '"') {
      if (!parse_literal(P, rule))
        return false;
    } else if (c == '[') {
      if (!parse_class(P, rule))
        return false;
    } else if (c == '.') {
      P->pos++;
      if (!HN_ARRAY_RESERVE(P->classes, P->cap_classes, P->n_classes + 1, 8))
        return perr(P, item_pos, "out of memory");
      P->classes[P->n_classes] = (CharClass){ 0, 0, true };
      if (!push_elem(P, rule, EL_CLASS, (uint32_t) P->n_classes++))
        return false;
    } else if (c == '(') {
      P->pos++;
      if (++P->depth > 200)
        return perr(P, item_pos, "parentheses nested too deeply");
      int64_t g = new_generated_rule(P, item_pos);
      if (g < 0 || !parse_alternatives(P, (uint32_t) g, true))
        return false;
      P->depth--;
      skip_space(P, true);
      if (peek(P, 0) != ')')
      {
        int gl, gc;
        pos_to_line_col(P->src, P->len, item_pos, &gl, &gc);
        return perr(P, P->pos, "expected ')' to close the group opened at line %d, column %d",
                    gl, gc);
      }
      P->pos++;
      if (!push_elem(P, rule, EL_RULE, (uint32_t) g))
        return false;
    } else if (c >= 0 && is_name_char(c)) {
      size_t s = P->pos;
      while (P->pos < P->len && is_name_char((unsigned char) P->src[P->pos]))
        P->pos++;
      /* a name followed by ::= starts the next rule: the sequence has ended */
      size_t save = P->pos;
      skip_space(P, false);
      if (peek(P, 0) == ':' && peek(P, 1) == ':' && peek(P, 2) == '=') {
        if (nested)
          return perr(P, s, "rule definition inside parentheses (missing ')'?)");
        P->pos = s;
        return true;
      }
      P->pos = save;
      int64_t r = find_or_add_rule(P, P->src + s, P->pos - s, s);
      if (r < 0 || !push_elem(P, rule, EL_RULE, (uint32_t) r))
        return false;
    } else {
      return true;
    }

    /* repetition operators apply to the item just parsed */
    int op = peek(P, 0);
    if (op == '*' || op == '+' || op == '?' || op == '{') {
      size_t op_pos = P->pos;
      unsigned long min = 0, max = 0;
      P->pos++;
      if (op == '*') {
        min = 0;
        max = (unsigned long) -1;
      } else if (op == '+') {
        min = 1;
        max = (unsigned long) -1;
      } else if (op == '?') {
        min = 0;
        max = 1;
      } else {
        skip_space(P, false);
        if (!parse_repeat_count(P, &min, op_pos))
          return false;
        skip_space(P, false);
        if (peek(P, 0) == ',') {
          P->pos++;
          skip_space(P, false);
          if (peek(P, 0) == '}')
            max = (unsigned long) -1;
          else if (!parse_repeat_count(P, &max, op_pos))
            return false;
        } else {
          max = min;
        }
        skip_space(P, false);
        if (peek(P, 0) != '}')
          return perr(P, op_pos, "expected '}' to close the repetition");
        P->pos++;
        if (max < min)
          return perr(P, op_pos, "repetition maximum is below its minimum");
      }
      size_t n_items = P->rules[rule].body.n - start;
      if (n_items == 0)
        return perr(P, op_pos, "nothing to repeat");
      if (n_items > 1) {
        int64_t g = wrap_in_rule(P, rule, start, item_pos);
        if (g < 0 || !push_elem(P, rule, EL_RULE, (uint32_t) g))
          return false;
      }
      if (!apply_repeat(P, rule, start, min, max, item_pos))
        return false;
      int next = peek(P, 0);
      if (next == '*' || next == '+' || next == '?' || next == '{')
        return perr(P, P->pos, "repetition operator without an item (use parentheses)");
    }
  }
}

static bool
parse_alternatives(Parser *P, uint32_t rule, bool nested)
{
  for (;;) {
    if (!parse_sequence(P, rule, nested) || !push_elem(P, rule, EL_END, 0))
      return false;
    skip_space(P, nested);
    if (peek(P, 0) == '|') {
      P->pos++;
      skip_space(P, true);
      continue;
    }
    if (!nested) {
      /* allow an alternative to continue on the next line when it starts with '|' */
      size_t save = P->pos;
      skip_space(P, true);
      if (peek(P, 0) == '|') {
        P->pos++;
        skip_space(P, true);
        continue;
      }
      P->pos = save;
    }
    return true;
  }
}

static bool
parse_rule(Parser *P)
{
  size_t name_pos = P->pos;
  if (!is_name_char(peek(P, 0)))
    return perr(P, P->pos, "expected a rule name");
  while (P->pos < P->len && is_name_char((unsigned char) P->src[P->pos]))
    P->pos++;
  size_t name_len = P->pos - name_pos;
  skip_space(P, false);
  if (!(peek(P, 0) == ':' && peek(P, 1) == ':' && peek(P, 2) == '='))
    return perr(P, P->pos, "expected '::=' after rule name");
  P->pos += 3;
  int64_t r = find_or_add_rule(P, P->src + name_pos, name_len, name_pos);
  if (r < 0)
    return false;
  if (P->rules[r].defined)
    return perr(P, name_pos, "rule '%.*s' is defined twice", (int) name_len, P->src + name_pos);
  P->rules[r].defined = true;
  P->rules[r].def_pos = name_pos;
  skip_space(P, true);
  if (!parse_alternatives(P, (uint32_t) r, false))
    return false;
  skip_space(P, false);
  if (P->pos < P->len && P->src[P->pos] != '\n') {
    int c = peek(P, 0);
    if (c == ')')
      return perr(P, P->pos, "unbalanced ')'");
    return perr(P, P->pos, "unexpected character '%c'", c >= 32 && c < 127 ? c : '?');
  }
  return true;
}

static void
parser_free(Parser *P)
{
  for (size_t i = 0; i < P->n_rules; i++) {
    free(P->rules[i].name);
    free(P->rules[i].body.v);
  }
  free(P->rules);
  free(P->ranges);
  free(P->classes);
  free(P->name_index);
}

/* Which rules can match the empty input, by a worklist: every alternative made only of
 * rule references counts the references not yet known to be nullable, and a rule found
 * nullable decrements the alternatives that mention it.  Linear in the grammar's size; a
 * pass-until-nothing-changes loop was quadratic on a chain of rules each nullable only
 * through the next. */
static bool
compute_nullable(const Parser *P, bool *nullable)
{
  size_t n = P->n_rules, n_alts = 0, n_refs = 0;
  for (size_t r = 0; r < n; r++)
    for (size_t i = 0; i < P->rules[r].body.n; i++) {
      Elem e = P->rules[r].body.v[i];
      n_alts += e.type == EL_END;
      n_refs += e.type == EL_RULE;
    }
  uint32_t *alt_rule = malloc((n_alts ? n_alts : 1) * sizeof *alt_rule);
  uint32_t *pending = malloc((n_alts ? n_alts : 1) * sizeof *pending);
  uint32_t *occ_off = calloc(n + 1, sizeof *occ_off); /* references to rule r, by alternative */
  uint32_t *occ = malloc((n_refs ? n_refs : 1) * sizeof *occ);
  uint32_t *queue = malloc((n ? n : 1) * sizeof *queue);
  bool ok = alt_rule && pending && occ_off && occ && queue;
  size_t head = 0, tail = 0;
  if (ok) {
    /* pending = references in the alternative, or UINT32_MAX when it holds a character */
    size_t a = 0;
    for (size_t r = 0; r < n; r++) {
      uint32_t refs = 0;
      bool terminal = false;
      for (size_t i = 0; i < P->rules[r].body.n; i++) {
        Elem e = P->rules[r].body.v[i];
        if (e.type == EL_END) {
          alt_rule[a] = (uint32_t) r;
          pending[a] = terminal ? UINT32_MAX : refs;
          if (!terminal && refs == 0 && !nullable[r]) {
            nullable[r] = true;
            queue[tail++] = (uint32_t) r;
          }
          a++;
          refs = 0;
          terminal = false;
        } else if (e.type == EL_RULE) {
          refs++;
          occ_off[e.value + 1]++;
        } else {
          terminal = true;
        }
      }
    }
    for (size_t r = 0; r < n; r++)
      occ_off[r + 1] += occ_off[r];
    /* fill: occ_off[r] walks forward while filling, then is restored */
    a = 0;
    for (size_t r = 0; r < n; r++)
      for (size_t i = 0; i < P->rules[r].body.n; i++) {
        Elem e = P->rules[r].body.v[i];
        if (e.type == EL_END)
          a++;
        else if (e.type == EL_RULE)
          occ[occ_off[e.value]++] = (uint32_t) a;
      }
    for (size_t r = n; r > 0; r--)
      occ_off[r] = occ_off[r - 1];
    occ_off[0] = 0;
    while (head < tail) {
      uint32_t r = queue[head++];
      for (uint32_t k = occ_off[r]; k < occ_off[r + 1]; k++) {
        uint32_t alt = occ[k];
        if (pending[alt] == UINT32_MAX || --pending[alt] != 0 || nullable[alt_rule[alt]])
          continue;
        nullable[alt_rule[alt]] = true;
        queue[tail++] = alt_rule[alt];
      }
    }
  }
  free(alt_rule);
  free(pending);
  free(occ_off);
  free(occ);
  free(queue);
  return ok;
}

/* Nullable rules and left recursion.  A rule is left-recursive when it can reach itself
 * through references each preceded only by nullable elements. */
static bool
check_structure(Parser *P, uint32_t root)
{
  size_t n = P->n_rules;
  for (size_t i = 0; i < n; i++)
    if (!P->rules[i].defined && !P->rules[i].generated)
      return perr(P, P->rules[i].ref_pos, "undefined rule '%s'", P->rules[i].name);
  bool *nullable = calloc(n, sizeof *nullable);
  uint8_t *color = calloc(n, 1);
  uint32_t *stack = malloc(n * sizeof *stack * 2 + 16);
  if (!nullable || !color || !stack || !compute_nullable(P, nullable)) {
    free(nullable);
    free(color);
    free(stack);
    return perr(P, 0, "out of memory");
  }
  /* iterative DFS over "leftmost reference" edges; a back edge is left recursion.  An
   * element is leftmost when everything before it in its alternative is a nullable rule;
   * the DFS only moves forward through a body, so it carries that as it goes (restarting at
   * each EL_END) instead of looking back from every element. */
  bool ok = true;
  for (size_t s = 0; s < n && ok; s++) {
    if (color[s] != 0)
      continue;
    /* stack of (rule, element index); bit 31 of the index: "not leftmost any more" */
    size_t sp = 0;
    stack[sp++] = (uint32_t) s;
    stack[sp++] = 0;
    color[s] = 1;
    while (sp > 0 && ok) {
      uint32_t r = stack[sp - 2];
      uint32_t i = stack[sp - 1] & 0x7fffffffu;
      bool leftmost = !(stack[sp - 1] & 0x80000000u);
      const ElemVec *b = &P->rules[r].body;
      /* find the next leftmost reference from element i on */
      bool pushed = false;
      while (i < b->n) {
        Elem e = b->v[i];
        bool here = leftmost;
        i++;
        if (e.type == EL_END) {
          leftmost = true;
          continue;
        }
        leftmost = here && e.type == EL_RULE && nullable[e.value];
        if (e.type != EL_RULE || !here)
          continue;
        if (color[e.value] == 1) {
          uint32_t culprit = e.value;
          /* name a rule the user wrote */
          size_t pos = P->rules[culprit].def_pos;
          if (P->rules[culprit].generated)
            for (size_t k = 0; k + 1 < sp; k += 2)
              if (!P->rules[stack[k]].generated)
                culprit = stack[k], pos = P->rules[culprit].def_pos;
          perr(P, pos, "rule '%s' is left-recursive",
               P->rules[culprit].generated ? "(group)" : P->rules[culprit].name);
          ok = false;
          break;
        }
        if (color[e.value] == 0) {
          stack[sp - 1] = i | (leftmost ? 0u : 0x80000000u);
          color[e.value] = 1;
          stack[sp++] = e.value;
          stack[sp++] = 0;
          pushed = true;
          break;
        }
      }
      if (!ok || pushed)
        continue;
      color[r] = 2;
      sp -= 2;
    }
  }
  (void) root;
  free(nullable);
  free(color);
  free(stack);
  return ok;
}

HnGrammar *
hn_grammar_parse(const char *text, size_t len, const char *root, HnError *err)
{
  if (text == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "no grammar text"), NULL;
  if (root == NULL)
    root = "root";
  Parser P = { .src = text, .len = len, .err = err };
  for (;;) {
    skip_space(&P, true);
    if (P.pos >= P.len)
      break;
    if (!parse_rule(&P))
      break;
  }
  HnGrammar *g = NULL;
  if (P.failed)
    goto out;
  int64_t root_idx = -1;
  for (size_t i = 0; i < P.n_rules; i++)
    if (!P.rules[i].generated && strcmp(P.rules[i].name, root) == 0)
      root_idx = (int64_t) i;
  if (P.n_rules == 0) {
    perr(&P, 0, "the grammar has no rules");
    goto out;
  }
  if (root_idx < 0 || !P.rules[root_idx].defined) {
    perr(&P, 0, "no rule named '%s'", root);
    goto out;
  }
  if (!check_structure(&P, (uint32_t) root_idx))
    goto out;

  g = calloc(1, sizeof *g);
  if (g == NULL) {
    perr(&P, 0, "out of memory");
    goto out;
  }
  size_t n_elems = 2, n_alts = 0;
  for (size_t r = 0; r < P.n_rules; r++) {
    n_elems += P.rules[r].body.n;
    for (size_t i = 0; i < P.rules[r].body.n; i++)
      if (P.rules[r].body.v[i].type == EL_END)
        n_alts++;
  }
  g->n_rules = P.n_rules;
  g->elems = malloc(n_elems * sizeof *g->elems);
  g->alts = malloc((n_alts ? n_alts : 1) * sizeof *g->alts);
  g->rule_alt_off = malloc(P.n_rules * sizeof *g->rule_alt_off);
  g->rule_alt_n = malloc(P.n_rules * sizeof *g->rule_alt_n);
  g->classes = malloc((P.n_classes ? P.n_classes : 1) * sizeof *g->classes);
  g->ranges = malloc((P.n_ranges ? P.n_ranges : 1) * sizeof *g->ranges);
  if (!g->elems || !g->alts || !g->rule_alt_off || !g->rule_alt_n || !g->classes || !g->ranges) {
    hn_grammar_free(g);
    g = NULL;
    perr(&P, 0, "out of memory");
    goto out;
  }
  if (P.n_classes)
    memcpy(g->classes, P.classes, P.n_classes * sizeof *g->classes);
  if (P.n_ranges)
    memcpy(g->ranges, P.ranges, P.n_ranges * sizeof *g->ranges);
  g->n_classes = P.n_classes;
  /* position 0: the reference to root that every parse starts from */
  g->elems[0] = (Elem){ EL_RULE, (uint32_t) root_idx };
  g->elems[1] = (Elem){ EL_END, 0 };
  size_t w = 2, a = 0;
  for (size_t r = 0; r < P.n_rules; r++) {
    g->rule_alt_off[r] = (uint32_t) a;
    const ElemVec *b = &P.rules[r].body;
    bool at_start = true;
    for (size_t i = 0; i < b->n; i++) {
      if (at_start) {
        g->alts[a++] = (uint32_t) w;
        at_start = false;
      }
      g->elems[w++] = b->v[i];
      if (b->v[i].type == EL_END)
        at_start = true;
    }
    g->rule_alt_n[r] = (uint32_t) a - g->rule_alt_off[r];
  }
  g->n_elems = w;
out:
  parser_free(&P);
  return g;
}

void
hn_grammar_free(HnGrammar *g)
{
  if (g == NULL)
    return;
  free(g->elems);
  free(g->alts);
  free(g->rule_alt_off);
  free(g->rule_alt_n);
  free(g->classes);
  free(g->ranges);
  free(g);
}

size_t
hn_grammar_n_rules(const HnGrammar *g)
{
  return g->n_rules;
}
