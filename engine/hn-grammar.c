/* hn-grammar.c — GBNF parser and pushdown matcher.
 *
 * A grammar is flattened into one array of elements.  Every alternative of every rule is
 * a run of elements closed by EL_END; an element is a literal code point, a character
 * class or a reference to a rule.  Repetition and grouping are rewritten into generated
 * rules while parsing (x* becomes R ::= x R | ε), so the matcher only knows these three.
 *
 * A parse stack is a list of element positions, the top being the next element to
 * match; stacks are kept expanded so that every top is a character element (an empty
 * stack means "the input may end here").  Reading a code point advances every stack whose
 * top matches it and expands rule references at the new top, which may fork the stack
 * into one per alternative.
 */
#include "hn-grammar.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EL_END = 0, EL_RULE, EL_LIT, EL_CLASS };

typedef struct {
  uint32_t type;
  uint32_t value; /* rule index, code point or class index */
} Elem;

typedef struct {
  uint32_t off, n; /* into ranges[] (pairs) */
  bool negated;
} CharClass;

struct HnGrammar {
  Elem *elems;
  size_t n_elems;
  CharClass *classes;
  size_t n_classes;
  uint32_t *ranges; /* lo, hi pairs */
  uint32_t *alts;   /* start position of each alternative, grouped by rule */
  uint32_t *rule_alt_off, *rule_alt_n;
  size_t n_rules;
};

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
grow_array(void **ptr, size_t *cap, size_t need, size_t elem_size)
{
  if (need <= *cap)
    return true;
  size_t c = *cap ? *cap : 8;
  while (c < need)
    c *= 2;
  size_t bytes;
  if (!hn_mul_size(c, elem_size, &bytes))
    return false;
  void *p = realloc(*ptr, bytes);
  if (p == NULL)
    return false;
  *ptr = p;
  *cap = c;
  return true;
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
  if (!grow_array((void **) &b->v, &b->cap, b->n + 1, sizeof *b->v))
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
  if (!grow_array((void **) &P->rules, &P->cap_rules, P->n_rules + 1, sizeof *P->rules)) {
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
    if (!grow_array((void **) &P->ranges, &P->cap_ranges, P->n_ranges + 2, sizeof *P->ranges))
      return perr(P, item, "out of memory");
    P->ranges[P->n_ranges++] = lo;
    P->ranges[P->n_ranges++] = hi;
  }
  uint32_t n = (uint32_t) (P->n_ranges - off) / 2;
  if (n == 0 && !negated)
    return perr(P, start, "empty character class");
  if (!grow_array((void **) &P->classes, &P->cap_classes, P->n_classes + 1, sizeof *P->classes))
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
      if (!grow_array((void **) &P->classes, &P->cap_classes, P->n_classes + 1,
                      sizeof *P->classes))
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

/* ==================================================================== Matcher ==== */

static inline bool
class_matches(const HnGrammar *g, uint32_t cls, uint32_t cp)
{
  const CharClass *c = &g->classes[cls];
  const uint32_t *r = g->ranges + c->off;
  bool in = false;
  for (uint32_t i = 0; i < c->n; i++)
    if (cp >= r[2 * i] && cp <= r[2 * i + 1]) {
      in = true;
      break;
    }
  return in != c->negated;
}

static inline bool
elem_matches(const HnGrammar *g, Elem e, uint32_t cp)
{
  return e.type == EL_LIT ? e.value == cp : class_matches(g, e.value, cp);
}

/* Could the element match some code point in [lo, hi]?  (Over-approximates for negated
 * classes; the exact test happens when the code point is complete.) */
static bool
elem_may_match_range(const HnGrammar *g, Elem e, uint32_t lo, uint32_t hi)
{
  if (e.type == EL_LIT)
    return e.value >= lo && e.value <= hi;
  const CharClass *c = &g->classes[e.value];
  const uint32_t *r = g->ranges + c->off;
  for (uint32_t i = 0; i < c->n; i++) {
    bool overlaps = r[2 * i] <= hi && r[2 * i + 1] >= lo;
    bool covers = r[2 * i] <= lo && r[2 * i + 1] >= hi;
    if (!c->negated && overlaps)
      return true;
    if (c->negated && covers)
      return false;
  }
  return c->negated;
}

typedef struct {
  uint32_t *data;
  size_t len, cap;
  uint32_t *off; /* n + 1 entries */
  uint32_t *hash;
  size_t n, cap_n;
  /* Open-addressed index over the stacks (entry + 1, 0 = empty), at most half full, so
   * that adding a stack costs its length, not the number of stacks already present: a
   * linear scan made a step quadratic in stacks (fuzz-gbnf: seconds per byte). */
  uint32_t *index;
  size_t index_mask;
  uint32_t partial_cp;
  uint32_t partial_left;
  bool overflow;
} StackSet;

static size_t
index_slot_of_hash(const StackSet *s, uint32_t h)
{
  size_t slot = h & s->index_mask;
  while (s->index[slot] != 0)
    slot = (slot + 1) & s->index_mask;
  return slot;
}

/* Reallocates the index for room_for entries and re-enters the present ones. */
static bool
index_rebuild(StackSet *s, size_t room_for)
{
  size_t size = 32;
  while (size < 2 * room_for)
    size *= 2;
  uint32_t *index = calloc(size, sizeof *index);
  if (index == NULL)
    return false;
  free(s->index);
  s->index = index;
  s->index_mask = size - 1;
  for (size_t i = 0; i < s->n; i++)
    s->index[index_slot_of_hash(s, s->hash[i])] = (uint32_t) i + 1;
  return true;
}

static void
set_clear(StackSet *s)
{
  /* empty only the slots in use: sets are cleared once per trie node while masking, far
   * too often to wipe the whole index */
  for (size_t i = 0; i < s->n; i++) {
    size_t slot = s->hash[i] & s->index_mask;
    while (s->index[slot] != i + 1)
      slot = (slot + 1) & s->index_mask;
    s->index[slot] = 0;
  }
  s->len = 0;
  s->n = 0;
  s->partial_cp = 0;
  s->partial_left = 0;
  s->overflow = false;
  if (s->off)
    s->off[0] = 0;
}

static void
set_free(StackSet *s)
{
  free(s->data);
  free(s->off);
  free(s->hash);
  free(s->index);
  memset(s, 0, sizeof *s);
}

static bool
set_init(StackSet *s)
{
  memset(s, 0, sizeof *s);
  s->cap_n = 16;
  s->cap = 256;
  s->data = malloc(s->cap * sizeof *s->data);
  s->off = malloc((s->cap_n + 1) * sizeof *s->off);
  s->hash = malloc(s->cap_n * sizeof *s->hash);
  if (!s->data || !s->off || !s->hash || !index_rebuild(s, s->cap_n)) {
    set_free(s);
    return false;
  }
  set_clear(s);
  return true;
}

static uint32_t
hash_stack(const uint32_t *st, size_t len)
{
  uint32_t h = 2166136261u ^ (uint32_t) len;
  for (size_t i = 0; i < len; i++)
    h = (h ^ st[i]) * 16777619u;
  return h;
}

static void
set_add(StackSet *s, const uint32_t *st, size_t len)
{
  uint32_t h = hash_stack(st, len);
  for (size_t slot = h & s->index_mask; s->index[slot] != 0; slot = (slot + 1) & s->index_mask) {
    size_t i = s->index[slot] - 1;
    if (s->hash[i] == h && s->off[i + 1] - s->off[i] == len &&
        memcmp(s->data + s->off[i], st, len * sizeof *st) == 0)
      return;
  }
  if (s->n >= HN_GRAMMAR_MAX_STACKS) {
    s->overflow = true;
    return;
  }
  if (s->n + 1 > s->cap_n) {
    size_t nc = s->cap_n * 2;
    uint32_t *o = realloc(s->off, (nc + 1) * sizeof *o);
    if (o)
      s->off = o;
    uint32_t *hh = realloc(s->hash, nc * sizeof *hh);
    if (hh)
      s->hash = hh;
    if (!o || !hh || !index_rebuild(s, nc)) {
      s->overflow = true;
      return;
    }
    s->cap_n = nc;
  }
  if (s->len + len > s->cap) {
    size_t nc = s->cap * 2;
    while (nc < s->len + len)
      nc *= 2;
    uint32_t *d = realloc(s->data, nc * sizeof *d);
    if (!d) {
      s->overflow = true;
      return;
    }
    s->data = d;
    s->cap = nc;
  }
  memcpy(s->data + s->len, st, len * sizeof *st);
  s->len += len;
  s->hash[s->n] = h;
  s->index[index_slot_of_hash(s, h)] = (uint32_t) s->n + 1;
  s->n++;
  s->off[s->n] = (uint32_t) s->len;
}

/* A rule reference being expanded: its alternatives are tried in order, each on top of the
 * first `base` elements of the expander's buffer. */
typedef struct {
  uint32_t rule;
  uint32_t next_alt;
  uint32_t base;
} ExpandFrame;

typedef struct {
  const HnGrammar *g;
  uint32_t *buf; /* HN_GRAMMAR_MAX_DEPTH + 2 */
  long budget;
  ExpandFrame *frames; /* the expansion's own stack (grows; bounded by the budget) */
  size_t frames_cap;
  size_t truncated_steps; /* steps that hit the budget or the stack limit */
  long work; /* units spent by the steps since the current mask (or token check) began */
} Expander;

/* Expansion work allowed per byte: one unit per expansion and per eight stack elements
 * hashed.  The shipped grammars need at most 40 on real models, a 1,000-way alternative
 * about 1,000, the deepest repetition test 5,633, a chain of 20,000 nested rules about
 * 22,500; an ambiguous grammar that could spend millions per byte stops here, about a
 * millisecond.  Beyond it the step keeps the stacks found so far. */
#define EXPAND_BUDGET_PER_BYTE 50000

/* One expansion of the stack buf[0..len): a stack whose top is a character (or that is
 * empty) goes to dst; a rule reference at the top is replaced by what follows it and
 * becomes a frame whose alternatives expand() tries next.  False when the step must give
 * up (budget spent or no memory); dst is then marked as overflowed. */
static bool
expand_top(Expander *x, StackSet *dst, size_t len, size_t *n_frames)
{
  if (--x->budget < 0) {
    dst->overflow = true;
    x->budget = -1; /* the rest of this step gives up at once too */
    return false;
  }
  if (len == 0) {
    set_add(dst, x->buf, 0);
    return true;
  }
  const HnGrammar *g = x->g;
  uint32_t p = x->buf[len - 1];
  Elem e = g->elems[p];
  if (e.type != EL_RULE) {
    /* adding a stack hashes and copies it: charge its length, so that a step's work is
     * bounded in elements touched, not just in calls (fuzz-gbnf found a grammar of long,
     * many stacks that took seconds per byte) */
    x->budget -= (long) (len / 8);
    if (x->budget < 0) {
      dst->overflow = true;
      return false;
    }
    set_add(dst, x->buf, len);
    return true;
  }
  size_t base = len - 1;
  if (g->elems[p + 1].type != EL_END)
    x->buf[base++] = p + 1; /* what follows the reference, once the rule is done */
  if (*n_frames == x->frames_cap) {
    size_t cap = x->frames_cap ? x->frames_cap * 2 : 64;
    ExpandFrame *grown = realloc(x->frames, cap * sizeof *grown);
    if (grown == NULL) {
      dst->overflow = true;
      x->budget = -1;
      return false;
    }
    x->frames = grown;
    x->frames_cap = cap;
  }
  x->frames[(*n_frames)++] = (ExpandFrame){ e.value, 0, (uint32_t) base };
  return true;
}

/* buf[0..len) is a stack whose top may be a rule reference: add every fully expanded
 * stack it stands for to dst, depth first (the order of the alternatives).  The expansion
 * keeps its own stack of frames instead of recursing: a chain of rules (r1 ::= r2, r2 ::=
 * r3, ... thousands deep, as a JSON schema with many properties gives) nests as deep as
 * it is long, which a fixed recursion limit refused and the C stack could not hold.  Only
 * the budget bounds it now.  A frame is dropped as its last alternative starts, so a
 * chain of single-alternative rules needs one frame, not one per rule. */
static void
expand(Expander *x, StackSet *dst, size_t len)
{
  size_t n_frames = 0;
  if (!expand_top(x, dst, len, &n_frames))
    return;
  const HnGrammar *g = x->g;
  while (n_frames > 0) {
    ExpandFrame *f = &x->frames[n_frames - 1];
    uint32_t start = g->alts[g->rule_alt_off[f->rule] + f->next_alt];
    size_t l = f->base;
    if (++f->next_alt == g->rule_alt_n[f->rule])
      n_frames--;
    if (g->elems[start].type != EL_END) {
      if (l >= HN_GRAMMAR_MAX_DEPTH) {
        dst->overflow = true;
        continue;
      }
      x->buf[l++] = start;
    }
    if (!expand_top(x, dst, l, &n_frames))
      return;
  }
}

/* Advances every stack of src by the complete code point cp. */
static void
step_cp(Expander *x, const StackSet *src, uint32_t cp, StackSet *dst)
{
  const HnGrammar *g = x->g;
  for (size_t i = 0; i < src->n; i++) {
    size_t len = src->off[i + 1] - src->off[i];
    if (len == 0)
      continue;
    const uint32_t *st = src->data + src->off[i];
    uint32_t top = st[len - 1];
    if (!elem_matches(g, g->elems[top], cp))
      continue;
    memcpy(x->buf, st, (len - 1) * sizeof *st);
    size_t l = len - 1;
    if (g->elems[top + 1].type != EL_END)
      x->buf[l++] = top + 1;
    expand(x, dst, l);
  }
}

static void
filter_partial(const HnGrammar *g, const StackSet *src, uint32_t lo, uint32_t hi, StackSet *dst)
{
  for (size_t i = 0; i < src->n; i++) {
    size_t len = src->off[i + 1] - src->off[i];
    if (len == 0)
      continue;
    const uint32_t *st = src->data + src->off[i];
    if (elem_may_match_range(g, g->elems[st[len - 1]], lo, hi))
      set_add(dst, st, len);
  }
}

static bool step_byte_untallied(Expander *x, const StackSet *src, uint8_t b, StackSet *dst);

/* dst = src after one byte.  Returns whether any parse survives.  The step's work (its
 * expansion units and the stacks it looked at) is added to x->work. */
static bool
step_byte(Expander *x, const StackSet *src, uint8_t b, StackSet *dst)
{
  bool alive = step_byte_untallied(x, src, b, dst);
  if (dst->overflow)
    x->truncated_steps++;
  x->work += EXPAND_BUDGET_PER_BYTE - (x->budget > 0 ? x->budget : 0) + (long) src->n;
  return alive;
}

static bool
step_byte_untallied(Expander *x, const StackSet *src, uint8_t b, StackSet *dst)
{
  set_clear(dst);
  x->budget = EXPAND_BUDGET_PER_BYTE;
  uint32_t val, left;
  if (src->partial_left == 0) {
    if (b < 0x80) {
      step_cp(x, src, b, dst);
      return dst->n > 0;
    }
    if (b >= 0xC2 && b <= 0xDF) {
      left = 1;
      val = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      left = 2;
      val = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      left = 3;
      val = b & 0x07;
    } else {
      return false;
    }
  } else {
    if ((b & 0xC0) != 0x80)
      return false;
    val = (src->partial_cp << 6) | (b & 0x3F);
    left = src->partial_left - 1;
    /* Only shortest forms and no surrogates, checked at the second byte (so that an
     * overlong spelling of an allowed character cannot slip through).  A 3-byte sequence
     * is at its second byte exactly when the bits so far are below 0x10, because a valid
     * 4-byte one has at least 0x10 after its second byte. */
    if (src->partial_left == 3 && (val < 0x10 || val > 0x10F))
      return false;
    if (src->partial_left == 2 && src->partial_cp < 0x10 && (val < 0x20 || (val >= 0x360 && val <= 0x37F)))
      return false;
    if (left == 0) {
      if (val > 0x10FFFF || (val >= 0xD800 && val <= 0xDFFF))
        return false;
      step_cp(x, src, val, dst);
      return dst->n > 0;
    }
  }
  uint32_t lo = val << (6 * left);
  uint32_t hi = lo | ((1u << (6 * left)) - 1);
  if (src->partial_left == 0) /* the lead byte: the shortest code point of its length */
    lo = HN_MAX(lo, left == 1 ? 0x80u : left == 2 ? 0x800u : 0x10000u);
  hi = HN_MIN(hi, 0x10FFFFu);
  filter_partial(x->g, src, lo, hi, dst);
  dst->partial_cp = val;
  dst->partial_left = left;
  return dst->n > 0;
}

static bool
set_is_complete(const StackSet *s)
{
  if (s->partial_left != 0)
    return false;
  for (size_t i = 0; i < s->n; i++)
    if (s->off[i + 1] == s->off[i])
      return true;
  return false;
}

/* ---- Vocabulary ---------------------------------------------------------------- */

#define MAX_TOKEN_BYTES 1024

struct HnGrammarVocab {
  int32_t n_vocab;
  uint8_t *blob;
  size_t *tok_off;    /* n_vocab + 1 */
  bool *is_eog;
  int32_t *order;     /* tokens with bytes, sorted by bytes */
  uint16_t *lcp;      /* common prefix with the previous token in order */
  size_t n_order;
  size_t max_len;
};

typedef struct {
  const uint8_t *bytes;
  uint32_t len;
  int32_t id;
} SortEntry;

static int
sort_entry_cmp(const void *pa, const void *pb)
{
  const SortEntry *a = pa, *b = pb;
  int c = memcmp(a->bytes, b->bytes, a->len < b->len ? a->len : b->len);
  if (c != 0)
    return c;
  if (a->len != b->len)
    return a->len < b->len ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

HnGrammarVocab *
hn_grammar_vocab_new(int32_t n_vocab, const char *const *token_bytes, const uint32_t *token_len,
                     const bool *is_eog, HnError *err)
{
  if (n_vocab <= 0 || n_vocab > (1 << 24) || token_bytes == NULL || token_len == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "invalid vocabulary for the grammar"), NULL;
  HnGrammarVocab *v = calloc(1, sizeof *v);
  if (v == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  v->n_vocab = n_vocab;
  size_t total = 0;
  for (int32_t i = 0; i < n_vocab; i++) {
    uint32_t l = token_len[i];
    if (l > MAX_TOKEN_BYTES)
      l = 0; /* never allowed under a grammar */
    total += l;
  }
  v->blob = malloc(total ? total : 1);
  v->tok_off = malloc(((size_t) n_vocab + 1) * sizeof *v->tok_off);
  v->is_eog = calloc((size_t) n_vocab, sizeof *v->is_eog);
  v->order = malloc((size_t) n_vocab * sizeof *v->order);
  v->lcp = malloc((size_t) n_vocab * sizeof *v->lcp);
  if (!v->blob || !v->tok_off || !v->is_eog || !v->order || !v->lcp) {
    hn_grammar_vocab_free(v);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  }
  size_t w = 0;
  for (int32_t i = 0; i < n_vocab; i++) {
    uint32_t l = token_len[i] > MAX_TOKEN_BYTES ? 0 : token_len[i];
    if (l > 0 && token_bytes[i] == NULL)
      l = 0;
    v->tok_off[i] = w;
    if (l)
      memcpy(v->blob + w, token_bytes[i], l);
    w += l;
    if (is_eog)
      v->is_eog[i] = is_eog[i];
    if (l > 0 && !v->is_eog[i])
      v->order[v->n_order++] = i;
    if (l > v->max_len)
      v->max_len = l;
  }
  v->tok_off[n_vocab] = w;
  /* sorted by bytes, so that tokens sharing a prefix are neighbours (built once per model) */
  SortEntry *entries = malloc((v->n_order ? v->n_order : 1) * sizeof *entries);
  if (entries == NULL) {
    hn_grammar_vocab_free(v);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  }
  for (size_t k = 0; k < v->n_order; k++) {
    int32_t t = v->order[k];
    entries[k] = (SortEntry){ v->blob + v->tok_off[t],
                              (uint32_t) (v->tok_off[t + 1] - v->tok_off[t]), t };
  }
  qsort(entries, v->n_order, sizeof *entries, sort_entry_cmp);
  for (size_t k = 0; k < v->n_order; k++)
    v->order[k] = entries[k].id;
  free(entries);
  for (size_t k = 0; k < v->n_order; k++) {
    if (k == 0) {
      v->lcp[k] = 0;
      continue;
    }
    int32_t a = v->order[k - 1], b = v->order[k];
    size_t la = v->tok_off[a + 1] - v->tok_off[a], lb = v->tok_off[b + 1] - v->tok_off[b];
    size_t m = la < lb ? la : lb, i = 0;
    while (i < m && v->blob[v->tok_off[a] + i] == v->blob[v->tok_off[b] + i])
      i++;
    v->lcp[k] = (uint16_t) i;
  }
  return v;
}

void
hn_grammar_vocab_free(HnGrammarVocab *v)
{
  if (v == NULL)
    return;
  free(v->blob);
  free(v->tok_off);
  free(v->is_eog);
  free(v->order);
  free(v->lcp);
  free(v);
}

int32_t
hn_grammar_vocab_n_vocab(const HnGrammarVocab *v)
{
  return v->n_vocab;
}

/* ---- State ----------------------------------------------------------------------- */

struct HnGrammarState {
  const HnGrammar *g;
  const HnGrammarVocab *v;
  StackSet cur, tmp[2];
  StackSet *levels; /* max_len + 1 for masking; levels[0] unused (cur is the root) */
  size_t n_levels;
  uint8_t *allowed;
  Expander x;
  /* Masking memo: distinct stack sets met while walking the vocabulary, and for each of
   * them the set reached by every byte.  Parse states repeat constantly (inside a JSON
   * string every letter leads back to the same set), so most steps of the walk become
   * one table lookup.  Kept across calls; flushed when full. */
  StackSet *memo_sets;
  uint32_t *memo_hash;
  size_t memo_n;
  int32_t *memo_trans; /* MEMO_CAP * 256 */
  int32_t *memo_level; /* set index per prefix length */
  bool last_mask_truncated; /* the last mask ran out of work before the end of the vocabulary */
  size_t truncated_masks;
};

/* Work allowed for one mask (the walk over the vocabulary) or one lazy token check, in the
 * units of EXPAND_BUDGET_PER_BYTE.  Measured with the LLaMA vocabulary (32,000 tokens): the
 * shipped json.gbnf needs at most 31,000 per mask (its first, with an empty memo), most masks
 * a few hundred; the ambiguous grammar of /grammar/wide-expansion would need far more than
 * this for almost every mask, and stops at it after 0.2-0.3 s on the shared test machine
 * under load (about 50 ns a unit there, some 20 ns when idle).  Without this bound one
 * token's mask could take seconds: thousands of byte steps, each allowed 50,000 units.
 * When it runs out, the tokens not yet checked stay forbidden: the mask stays safe (it never
 * allows what the grammar forbids), and the step is counted in
 * hn_grammar_state_truncated_steps and hn_grammar_state_truncated_masks. */
#define MASK_WORK_BUDGET 5000000L

#define MEMO_CAP 1024
#define MEMO_UNKNOWN (-2)
#define MEMO_DEAD (-1)

HnGrammarState *
hn_grammar_state_new(const HnGrammar *g, const HnGrammarVocab *v, HnError *err)
{
  if (g == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "no grammar"), NULL;
  HnGrammarState *s = calloc(1, sizeof *s);
  if (s == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  s->g = g;
  s->v = v;
  s->x.g = g;
  s->x.buf = malloc((HN_GRAMMAR_MAX_DEPTH + 2) * sizeof *s->x.buf);
  bool ok = s->x.buf && set_init(&s->cur) && set_init(&s->tmp[0]) && set_init(&s->tmp[1]);
  if (ok && v) {
    s->n_levels = v->max_len + 1;
    s->levels = calloc(s->n_levels, sizeof *s->levels);
    s->allowed = calloc((size_t) v->n_vocab, 1);
    s->memo_sets = calloc(MEMO_CAP, sizeof *s->memo_sets);
    s->memo_hash = calloc(MEMO_CAP, sizeof *s->memo_hash);
    s->memo_trans = malloc((size_t) MEMO_CAP * 256 * sizeof *s->memo_trans);
    s->memo_level = calloc(s->n_levels + 1, sizeof *s->memo_level);
    ok = s->levels && s->allowed && s->memo_sets && s->memo_hash && s->memo_trans &&
         s->memo_level;
    for (size_t i = 1; ok && i < s->n_levels; i++)
      ok = set_init(&s->levels[i]);
  }
  if (!ok) {
    hn_grammar_state_free(s);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  }
  hn_grammar_state_reset(s);
  return s;
}

void
hn_grammar_state_free(HnGrammarState *s)
{
  if (s == NULL)
    return;
  set_free(&s->cur);
  set_free(&s->tmp[0]);
  set_free(&s->tmp[1]);
  if (s->levels)
    for (size_t i = 0; i < s->n_levels; i++)
      set_free(&s->levels[i]);
  free(s->levels);
  free(s->allowed);
  if (s->memo_sets)
    for (size_t i = 0; i < MEMO_CAP; i++)
      set_free(&s->memo_sets[i]);
  free(s->memo_sets);
  free(s->memo_hash);
  free(s->memo_trans);
  free(s->memo_level);
  free(s->x.buf);
  free(s->x.frames);
  free(s);
}

void
hn_grammar_state_reset(HnGrammarState *s)
{
  set_clear(&s->cur);
  s->x.buf[0] = 0; /* the reference to root */
  s->x.budget = EXPAND_BUDGET_PER_BYTE;
  s->x.truncated_steps = 0;
  s->truncated_masks = 0;
  s->last_mask_truncated = false;
  expand(&s->x, &s->cur, 1);
  if (s->cur.overflow)
    s->x.truncated_steps++;
}

/* Runs the bytes from cur through the scratch sets; returns the final set or NULL (also
 * when the work exceeds work_limit: the bytes then count as refused, which is safe). */
static StackSet *
run_bytes(HnGrammarState *s, const uint8_t *b, size_t len, long work_limit)
{
  const StackSet *src = &s->cur;
  StackSet *dst = NULL;
  s->x.work = 0;
  for (size_t i = 0; i < len; i++) {
    if (s->x.work > work_limit)
      return NULL;
    dst = &s->tmp[i & 1];
    if (!step_byte(&s->x, src, b[i], dst))
      return NULL;
    src = dst;
  }
  return dst;
}

bool
hn_grammar_accepts_bytes(HnGrammarState *s, const void *bytes, size_t len)
{
  if (len == 0)
    return true;
  return run_bytes(s, bytes, len, LONG_MAX) != NULL;
}

bool
hn_grammar_accept_bytes(HnGrammarState *s, const void *bytes, size_t len)
{
  if (len == 0)
    return true;
  StackSet *end = run_bytes(s, bytes, len, LONG_MAX);
  if (end == NULL)
    return false;
  StackSet t = s->cur;
  s->cur = *end;
  *end = t;
  return true;
}

static bool
token_span(const HnGrammarState *s, int32_t token, const uint8_t **b, size_t *len)
{
  if (s->v == NULL || token < 0 || token >= s->v->n_vocab)
    return false;
  *b = s->v->blob + s->v->tok_off[token];
  *len = s->v->tok_off[token + 1] - s->v->tok_off[token];
  return true;
}

bool
hn_grammar_accepts_token_bytes(HnGrammarState *s, int32_t token)
{
  const uint8_t *b;
  size_t len;
  if (!token_span(s, token, &b, &len))
    return false;
  if (s->v->is_eog[token])
    return set_is_complete(&s->cur);
  if (len == 0)
    return false;
  /* the sampler's quick check of its favourite: if that alone costs a mask's budget, say no
   * and let the (bounded) mask decide */
  return run_bytes(s, b, len, MASK_WORK_BUDGET) != NULL;
}

bool
hn_grammar_accept_token(HnGrammarState *s, int32_t token)
{
  const uint8_t *b;
  size_t len;
  if (!token_span(s, token, &b, &len))
    return false;
  if (s->v->is_eog[token])
    return set_is_complete(&s->cur);
  if (len == 0)
    return false;
  return hn_grammar_accept_bytes(s, b, len);
}

static uint32_t
set_hash(const StackSet *s)
{
  uint32_t h = 0x9747b28cu ^ (uint32_t) s->n ^ (s->partial_cp << 8) ^ s->partial_left;
  for (size_t i = 0; i < s->n; i++)
    h = (h ^ s->hash[i]) * 16777619u;
  return h;
}

static bool
set_equal(const StackSet *a, const StackSet *b)
{
  return a->n == b->n && a->len == b->len && a->partial_cp == b->partial_cp &&
         a->partial_left == b->partial_left &&
         memcmp(a->off, b->off, (a->n + 1) * sizeof *a->off) == 0 &&
         memcmp(a->data, b->data, a->len * sizeof *a->data) == 0;
}

/* dst = src, raw (src is already free of duplicates). */
static bool
set_assign(StackSet *dst, const StackSet *src)
{
  if (dst->data == NULL && !set_init(dst))
    return false;
  set_clear(dst); /* empties the index while it still matches the old entries */
  if (src->len > dst->cap) {
    uint32_t *d = realloc(dst->data, src->len * sizeof *d);
    if (!d)
      return false;
    dst->data = d;
    dst->cap = src->len;
  }
  if (src->n > dst->cap_n) {
    uint32_t *o = realloc(dst->off, (src->n + 1) * sizeof *o);
    if (o)
      dst->off = o;
    uint32_t *h = realloc(dst->hash, src->n * sizeof *h);
    if (h)
      dst->hash = h;
    if (!o || !h)
      return false;
    dst->cap_n = src->n;
  }
  if (dst->index_mask + 1 < 2 * dst->cap_n && !index_rebuild(dst, dst->cap_n))
    return false;
  memcpy(dst->data, src->data, src->len * sizeof *dst->data);
  memcpy(dst->off, src->off, (src->n + 1) * sizeof *dst->off);
  memcpy(dst->hash, src->hash, src->n * sizeof *dst->hash);
  dst->len = src->len;
  for (size_t i = 0; i < src->n; i++) {
    dst->index[index_slot_of_hash(dst, dst->hash[i])] = (uint32_t) dst->n + 1;
    dst->n++;
  }
  dst->partial_cp = src->partial_cp;
  dst->partial_left = src->partial_left;
  dst->overflow = src->overflow;
  return true;
}

/* Index of the memo entry equal to set, adding it if new; -1 when the memo is full. */
static int32_t
memo_intern(HnGrammarState *s, const StackSet *set)
{
  uint32_t h = set_hash(set);
  for (size_t i = 0; i < s->memo_n; i++)
    if (s->memo_hash[i] == h && set_equal(&s->memo_sets[i], set))
      return (int32_t) i;
  if (s->memo_n >= MEMO_CAP || !set_assign(&s->memo_sets[s->memo_n], set))
    return -1;
  s->memo_hash[s->memo_n] = h;
  int32_t *row = s->memo_trans + s->memo_n * 256;
  for (int b = 0; b < 256; b++)
    row[b] = MEMO_UNKNOWN;
  return (int32_t) s->memo_n++;
}

typedef enum { WALK_DONE, WALK_MEMO_FULL, WALK_OUT_OF_WORK } WalkResult;

/* Fills s->allowed for every token: a walk over the tokens sorted by their bytes, where
 * each token reuses the parse states of the prefix it shares with the previous one and a
 * dead prefix rules out every token that starts with it.  WALK_MEMO_FULL: the memo filled
 * up (the caller flushes it and walks again); WALK_OUT_OF_WORK: the mask's budget ran out,
 * the tokens not reached stay forbidden. */
static WalkResult
compute_allowed_memo(HnGrammarState *s)
{
  const HnGrammarVocab *v = s->v;
  memset(s->allowed, 0, (size_t) v->n_vocab);
  int32_t root = memo_intern(s, &s->cur);
  if (root < 0)
    return WALK_MEMO_FULL;
  int32_t *lv = s->memo_level;
  lv[0] = root;
  size_t valid = 0;          /* lv[0..valid] hold the states of the current prefix */
  size_t dead_at = SIZE_MAX; /* a prefix of this length has no parse */
  for (size_t k = 0; k < v->n_order; k++) {
    int32_t t = v->order[k];
    size_t lcp = v->lcp[k];
    if (dead_at != SIZE_MAX && lcp >= dead_at)
      continue;
    dead_at = SIZE_MAX;
    if (valid > lcp)
      valid = lcp;
    const uint8_t *b = v->blob + v->tok_off[t];
    size_t len = v->tok_off[t + 1] - v->tok_off[t];
    bool alive = true;
    while (valid < len) {
      int32_t si = lv[valid];
      int32_t *slot = &s->memo_trans[(size_t) si * 256 + b[valid]];
      int32_t next = *slot;
      if (next == MEMO_UNKNOWN) {
        if (s->x.work > MASK_WORK_BUDGET)
          return WALK_OUT_OF_WORK;
        StackSet *tmp = &s->tmp[0];
        if (step_byte(&s->x, &s->memo_sets[si], b[valid], tmp)) {
          next = memo_intern(s, tmp);
          if (next < 0)
            return WALK_MEMO_FULL;
        } else {
          next = MEMO_DEAD;
        }
        *slot = next;
      }
      valid++;
      if (next == MEMO_DEAD) {
        dead_at = valid;
        alive = false;
        break;
      }
      lv[valid] = next;
    }
    if (alive)
      s->allowed[t] = 1;
  }
  return WALK_DONE;
}

/* The same walk without the memo, for grammars whose states do not repeat. */
static WalkResult
compute_allowed_direct(HnGrammarState *s)
{
  const HnGrammarVocab *v = s->v;
  memset(s->allowed, 0, (size_t) v->n_vocab);
  size_t valid = 0;
  size_t dead_at = SIZE_MAX;
  for (size_t k = 0; k < v->n_order; k++) {
    int32_t t = v->order[k];
    size_t lcp = v->lcp[k];
    if (dead_at != SIZE_MAX && lcp >= dead_at)
      continue;
    dead_at = SIZE_MAX;
    if (valid > lcp)
      valid = lcp;
    const uint8_t *b = v->blob + v->tok_off[t];
    size_t len = v->tok_off[t + 1] - v->tok_off[t];
    bool alive = true;
    while (valid < len) {
      if (s->x.work > MASK_WORK_BUDGET)
        return WALK_OUT_OF_WORK;
      const StackSet *src = valid == 0 ? &s->cur : &s->levels[valid];
      StackSet *dst = &s->levels[valid + 1];
      bool ok = step_byte(&s->x, src, b[valid], dst);
      valid++;
      if (!ok) {
        dead_at = valid;
        alive = false;
        break;
      }
    }
    if (alive)
      s->allowed[t] = 1;
  }
  return WALK_DONE;
}

static void
compute_allowed(HnGrammarState *s)
{
  s->x.work = 0;
  WalkResult r = compute_allowed_memo(s);
  if (r == WALK_MEMO_FULL) {
    s->memo_n = 0;
    r = compute_allowed_memo(s);
  }
  if (r == WALK_MEMO_FULL) {
    s->memo_n = 0;
    r = compute_allowed_direct(s);
  }
  s->last_mask_truncated = r == WALK_OUT_OF_WORK;
  if (s->last_mask_truncated) {
    s->truncated_masks++;
    s->x.truncated_steps++;
  }
}

void
hn_grammar_mask(HnGrammarState *s, HnCandidate *cands, size_t n)
{
  if (s->v == NULL) {
    for (size_t i = 0; i < n; i++)
      cands[i].logit = -INFINITY;
    return;
  }
  compute_allowed(s);
  bool complete = set_is_complete(&s->cur);
  for (size_t i = 0; i < n; i++) {
    int32_t t = cands[i].id;
    if (t < 0 || t >= s->v->n_vocab)
      cands[i].logit = -INFINITY;
    else if (s->v->is_eog[t])
      cands[i].logit = complete ? cands[i].logit : -INFINITY;
    else if (!s->allowed[t])
      cands[i].logit = -INFINITY;
  }
}

void
hn_grammar_mask_logits(HnGrammarState *s, float *logits, int32_t n_vocab)
{
  if (s->v == NULL || n_vocab != s->v->n_vocab) {
    for (int32_t i = 0; i < n_vocab; i++)
      logits[i] = -INFINITY;
    return;
  }
  compute_allowed(s);
  bool complete = set_is_complete(&s->cur);
  for (int32_t t = 0; t < n_vocab; t++)
    if (s->v->is_eog[t] ? !complete : !s->allowed[t])
      logits[t] = -INFINITY;
}

bool
hn_grammar_is_complete(const HnGrammarState *s)
{
  return set_is_complete(&s->cur);
}

bool
hn_grammar_can_continue(const HnGrammarState *s)
{
  for (size_t i = 0; i < s->cur.n; i++)
    if (s->cur.off[i + 1] > s->cur.off[i])
      return true;
  return false;
}

size_t
hn_grammar_state_n_stacks(const HnGrammarState *s)
{
  return s->cur.n;
}

size_t
hn_grammar_state_truncated_steps(const HnGrammarState *s)
{
  return s->x.truncated_steps;
}

size_t
hn_grammar_state_truncated_masks(const HnGrammarState *s)
{
  return s->truncated_masks;
}

bool
hn_grammar_state_incomplete(const HnGrammarState *s)
{
  return s->cur.overflow || s->last_mask_truncated;
}
