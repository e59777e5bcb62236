/* hn-chat-template.c — a Jinja2-subset interpreter for chat templates.
 *
 * Pipeline: source → newline normalisation → lexer (applies the whitespace rules:
 * {%- -%}, trim_blocks, lstrip_blocks) → token array → recursive-descent parser → AST →
 * tree-walking evaluator.  Everything a parse or a render allocates lives in an arena
 * freed in one go, and errors unwind with longjmp to the entry point: no partial
 * ownership to track in a tree walker that can fail anywhere.
 */
#include "hn-chat-template.h"
#include "hn-unicode.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

/* ==== arena ============================================================================ */

typedef struct Chunk {
  struct Chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} Chunk;

typedef struct {
  Chunk *head;
  size_t total;
  size_t limit;
} Arena;

static void
arena_free(Arena *a)
{
  Chunk *c = a->head;
  while (c) {
    Chunk *n = c->next;
    free(c);
    c = n;
  }
  a->head = NULL;
  a->total = 0;
}

/* Returns NULL when over the limit or out of memory; callers turn that into an error. */
static void *
arena_try_alloc(Arena *a, size_t n)
{
  n = (n + 15) & ~(size_t)15;
  if (n == 0)
    n = 16;
  Chunk *c = a->head;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > 32768 ? n : 65536;
    if (a->total + cap > a->limit || cap < n)
      return NULL;
    Chunk *nc = malloc(sizeof(Chunk) + cap);
    if (!nc)
      return NULL;
    nc->cap = cap;
    nc->used = 0;
    a->total += cap;
    if (c && n > 32768 && c->cap - c->used > 4096) {
      /* Keep filling the current chunk; put the big block behind it. */
      nc->next = c->next;
      c->next = nc;
      nc->used = n;
      return nc->data;
    }
    nc->next = c;
    a->head = nc;
    c = nc;
  }
  void *p = c->data + c->used;
  c->used += n;
  return p;
}

/* ==== shared context: error unwinding ==================================================== */

typedef struct {
  Arena arena;
  HnError *err;
  jmp_buf jump;
  const char *src; /* for positions of the parser */
} Ctx;

static _Noreturn void
fail_at(Ctx *c, int line, int col, const char *fmt, ...) HN_PRINTF(4, 5);

static _Noreturn void
fail_at(Ctx *c, int line, int col, const char *fmt, ...)
{
  char msg[HN_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (line > 0)
    hn_error_set(c->err, HN_ERR_TEMPLATE, "line %d, column %d: %s", line, col, msg);
  else
    hn_error_set(c->err, HN_ERR_TEMPLATE, "%s", msg);
  longjmp(c->jump, 1);
}

static _Noreturn void
fail_nomem(Ctx *c)
{
  hn_error_set(c->err, HN_ERR_TEMPLATE, "the template needs more than %zu MB of memory", c->arena.limit >> 20);
  longjmp(c->jump, 1);
}

static void *
xalloc(Ctx *c, size_t n)
{
  void *p = arena_try_alloc(&c->arena, n);
  if (!p)
    fail_nomem(c);
  return p;
}

static void *
xalloc0(Ctx *c, size_t n)
{
  void *p = xalloc(c, n);
  memset(p, 0, n);
  return p;
}

static size_t
xmul(Ctx *c, size_t a, size_t b)
{
  size_t r;
  if (!hn_mul_size(a, b, &r))
    fail_nomem(c);
  return r;
}

/* ==== UTF-8 helpers ==================================================================== */

/* Decodes one code point; invalid bytes decode as themselves (U+0080..U+00FF range is
 * never produced for them: they map to 0xDC80+byte like Python's surrogateescape). */
static uint32_t
utf8_next(const char *s, size_t n, size_t *adv)
{
  uint32_t cp;
  *adv = (size_t)hn_utf8_decode(s, n, &cp);
  return cp == HN_UC_INVALID ? 0xDC00u + (unsigned char)s[0] : cp;
}

/* Like hn_utf8_encode, but the surrogate escapes U+DC80..U+DCFF that stand for
 * undecodable input bytes turn back into those bytes. */
static size_t
utf8_put(uint32_t cp, char *out)
{
  if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out[0] = (char)(cp - 0xDC00);
    return 1;
  }
  return (size_t)hn_utf8_encode(cp, out);
}

/* Python's str.isspace(). */
static bool
py_space(uint32_t c)
{
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

/* Byte length of the whitespace run at the end of s[0..n). */
static size_t
trailing_space(const char *s, size_t n)
{
  size_t end = n;
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && end - start < 4 && ((unsigned char)s[start] & 0xC0) == 0x80)
      start--;
    size_t adv;
    uint32_t cp = utf8_next(s + start, end - start, &adv);
    if (start + adv != end || !py_space(cp)) {
      /* not a whole character or not a space */
      if (start + adv != end) {
        if (py_space((unsigned char)s[end - 1]))
          end--;
        else
          break;
        continue;
      }
      break;
    }
    end = start;
  }
  return n - end;
}

static size_t
leading_space(const char *s, size_t n)
{
  size_t k = 0;
  while (k < n) {
    size_t adv;
    uint32_t cp = utf8_next(s + k, n - k, &adv);
    if (!py_space(cp))
      break;
    k += adv;
  }
  return k;
}

static size_t
utf8_count(const char *s, size_t n)
{
  size_t count = 0;
  for (size_t k = 0; k < n;) {
    size_t adv;
    utf8_next(s + k, n - k, &adv);
    k += adv;
    count++;
  }
  return count;
}

static locale_t
utf8_ctype_locale(void)
{
  static locale_t loc;
  static int tried;
  if (!__atomic_load_n(&tried, __ATOMIC_ACQUIRE)) {
    locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    locale_t expected = (locale_t)0;
    if (l && !__atomic_compare_exchange_n(&loc, &expected, l, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      freelocale(l);
    __atomic_store_n(&tried, 1, __ATOMIC_RELEASE);
  }
  return __atomic_load_n(&loc, __ATOMIC_ACQUIRE);
}

static locale_t
c_time_locale(void)
{
  static locale_t loc;
  locale_t l = __atomic_load_n(&loc, __ATOMIC_ACQUIRE);
  if (!l) {
    l = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    locale_t expected = (locale_t)0;
    if (l && !__atomic_compare_exchange_n(&loc, &expected, l, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      freelocale(l);
      l = expected;
    }
  }
  return l;
}

/* Python's float() and Jinja's number literals ignore the process locale. */
static double
c_strtod(const char *s, char **end)
{
  locale_t l = c_time_locale();
  return l ? strtod_l(s, end, l) : strtod(s, end);
}

static uint32_t
cp_upper(uint32_t c)
{
  if (c < 0x80)
    return c >= 'a' && c <= 'z' ? c - 32 : c;
  if (c >= 0xD800 && c <= 0xDFFF)
    return c;
  locale_t l = utf8_ctype_locale();
  return l ? (uint32_t)towupper_l((wint_t)c, l) : c;
}

static uint32_t
cp_lower(uint32_t c)
{
  if (c < 0x80)
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
  if (c >= 0xD800 && c <= 0xDFFF)
    return c;
  locale_t l = utf8_ctype_locale();
  return l ? (uint32_t)towlower_l((wint_t)c, l) : c;
}

static bool
cp_alpha(uint32_t c)
{
  if (c < 0x80)
    return (c | 32) >= 'a' && (c | 32) <= 'z';
  if (c >= 0xD800 && c <= 0xDFFF)
    return false;
  locale_t l = utf8_ctype_locale();
  return l ? iswalpha_l((wint_t)c, l) != 0 : false;
}

/* ==== values =========================================================================== */

typedef enum {
  T_UNDEF,
  T_NONE,
  T_BOOL,
  T_INT,
  T_FLOAT,
  T_STR,
  T_LIST,
  T_DICT,
  T_NS,
  T_MACRO,
  T_FUNC,
  T_METHOD,
  T_LOOP,
} VType;

typedef struct Str {
  size_t len;
  char s[]; /* NUL-terminated too */
} Str;

typedef struct Value Value;
typedef struct List List;
typedef struct Dict Dict;
typedef struct Macro Macro;
typedef struct Method Method;
typedef struct LoopState LoopState;

struct Value {
  uint8_t t;
  /* T_STR: a markupsafe.Markup (from |safe or |escape).  Jinja runs without autoescape
   * in chat templates, but Markup + str still HTML-escapes the plain side. */
  uint8_t markup;
  union {
    bool b;
    int64_t i;
    double f;
    Str *s;      /* T_STR; T_UNDEF: the message to raise when misused (may be NULL) */
    List *l;
    Dict *d;     /* T_DICT, T_NS */
    Macro *m;
    int fn;
    Method *meth;
    LoopState *loop;
  };
};

struct List {
  size_t n;
  bool tuple;
  /* a Python generator/iterator (what map, select, unique, reverse... return): always
   * true, no len(), no indexing, not JSON serializable */
  bool lazy;
  Value *items;
};

struct Dict {
  size_t n, cap;
  Value *keys;
  Value *vals;
};

struct Method {
  Value self;
  const char *name;
};

struct LoopState {
  size_t index0, length, depth0;
  List *items;
};

enum { FN_RANGE = 1, FN_NAMESPACE, FN_RAISE, FN_STRFTIME, FN_DICT };

static const Value UNDEF = { .t = T_UNDEF };
static const Value NONE = { .t = T_NONE };

static Value
v_bool(bool b)
{
  Value v = { .t = T_BOOL };
  v.b = b;
  return v;
}

static Value
v_int(int64_t i)
{
  Value v = { .t = T_INT };
  v.i = i;
  return v;
}

static Value
v_float(double f)
{
  Value v = { .t = T_FLOAT };
  v.f = f;
  return v;
}

static Str *
str_new(Ctx *c, const char *s, size_t n)
{
  Str *r = xalloc(c, sizeof(Str) + n + 1);
  r->len = n;
  if (n)
    memcpy(r->s, s, n);
  r->s[n] = '\0';
  return r;
}

static Value
v_str(Ctx *c, const char *s, size_t n)
{
  Value v = { .t = T_STR };
  v.s = str_new(c, s, n);
  return v;
}

static Value
v_cstr(Ctx *c, const char *s)
{
  return v_str(c, s, strlen(s));
}

static Value
v_list(Ctx *c, size_t n)
{
  Value v = { .t = T_LIST };
  v.l = xalloc0(c, sizeof(List));
  v.l->n = n;
  v.l->items = n ? xalloc0(c, xmul(c, n, sizeof(Value))) : NULL;
  return v;
}

static Value
v_dict(Ctx *c)
{
  Value v = { .t = T_DICT };
  v.d = xalloc0(c, sizeof(Dict));
  return v;
}

static const char *
type_name(const Value *v)
{
  switch (v->t) {
  case T_UNDEF: return "Undefined";
  case T_NONE: return "NoneType";
  case T_BOOL: return "bool";
  case T_INT: return "int";
  case T_FLOAT: return "float";
  case T_STR: return "str";
  case T_LIST: return v->l->lazy ? "generator" : v->l->tuple ? "tuple" : "list";
  case T_DICT: return "dict";
  case T_NS: return "Namespace";
  case T_MACRO: return "Macro";
  case T_FUNC: return "function";
  case T_METHOD: return "builtin_function_or_method";
  case T_LOOP: return "LoopContext";
  }
  return "object";
}

/* ==== growable byte buffer (in the arena) =============================================== */

typedef struct {
  char *data;
  size_t len, cap;
  size_t limit; /* 0 = only the arena limit */
} Buf;

static void
buf_reserve(Ctx *c, Buf *b, size_t extra)
{
  size_t need;
  if (!hn_add_size(b->len, extra, &need) || !hn_add_size(need, 1, &need))
    fail_nomem(c);
  if (need <= b->cap)
    return;
  size_t cap = b->cap ? b->cap * 2 : 256;
  while (cap < need)
    cap = xmul(c, cap, 2);
  char *d = xalloc(c, cap);
  if (b->len)
    memcpy(d, b->data, b->len);
  b->data = d;
  b->cap = cap;
}

static void buf_add(Ctx *c, Buf *b, const char *s, size_t n);

static void
buf_addc(Ctx *c, Buf *b, char ch)
{
  buf_add(c, b, &ch, 1);
}

static void
buf_adds(Ctx *c, Buf *b, const char *s)
{
  buf_add(c, b, s, strlen(s));
}

static Value
buf_value(Ctx *c, Buf *b)
{
  return v_str(c, b->data ? b->data : "", b->len);
}

/* ==== lexer ============================================================================ */

typedef enum {
  K_TEXT,
  K_VAR_BEGIN,
  K_VAR_END,
  K_BLOCK_BEGIN,
  K_BLOCK_END,
  K_NAME,
  K_STRING,
  K_INT,
  K_FLOAT,
  K_OP,
  K_EOF,
} TokKind;

typedef struct {
  TokKind kind;
  int line, col;
  size_t at;    /* byte offset, turned into line:col once lexing is done */
  Str *s;       /* TEXT, NAME, STRING, OP */
  int64_t i;
  double f;
} Token;

typedef struct {
  Ctx *c;
  const char *src;
  size_t len;
  size_t pos;
  Token *toks;
  size_t n, cap;
} Lexer;

static void
pos_of(const char *src, size_t at, int *line, int *col)
{
  int l = 1, co = 1;
  for (size_t k = 0; k < at; k++) {
    if (src[k] == '\n') {
      l++;
      co = 1;
    } else if (((unsigned char)src[k] & 0xC0) != 0x80) {
      co++;
    }
  }
  *line = l;
  *col = co;
}

static _Noreturn void
lex_fail(Lexer *lx, size_t at, const char *fmt, ...) HN_PRINTF(3, 4);

static _Noreturn void
lex_fail(Lexer *lx, size_t at, const char *fmt, ...)
{
  char msg[HN_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int line, col;
  pos_of(lx->src, at, &line, &col);
  fail_at(lx->c, line, col, "%s", msg);
}

static Token *
lex_push(Lexer *lx, TokKind kind, size_t at)
{
  if (lx->n == lx->cap) {
    size_t cap = lx->cap ? lx->cap * 2 : 256;
    Token *t = xalloc(lx->c, xmul(lx->c, cap, sizeof(Token)));
    if (lx->n)
      memcpy(t, lx->toks, lx->n * sizeof(Token));
    lx->toks = t;
    lx->cap = cap;
  }
  Token *t = &lx->toks[lx->n++];
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->at = at;
  return t;
}

static bool
is_name_start(char ch)
{
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

static bool
is_name_char(char ch)
{
  return is_name_start(ch) || (ch >= '0' && ch <= '9');
}

static int
hexval(char ch)
{
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

/* A string literal with Python's escapes (as Jinja decodes them). */
static void
lex_string(Lexer *lx)
{
  size_t start = lx->pos;
  char q = lx->src[lx->pos++];
  Buf b = { 0 };
  for (;;) {
    if (lx->pos >= lx->len)
      lex_fail(lx, start, "unterminated string literal");
    char ch = lx->src[lx->pos];
    if (ch == q) {
      lx->pos++;
      break;
    }
    if (ch != '\\') {
      buf_addc(lx->c, &b, ch);
      lx->pos++;
      continue;
    }
    if (lx->pos + 1 >= lx->len)
      lex_fail(lx, start, "unterminated string literal");
    char e = lx->src[lx->pos + 1];
    lx->pos += 2;
    int digits = 0;
    switch (e) {
    case '\n': break;
    case '\\': buf_addc(lx->c, &b, '\\'); break;
    case '\'': buf_addc(lx->c, &b, '\''); break;
    case '"': buf_addc(lx->c, &b, '"'); break;
    case 'a': buf_addc(lx->c, &b, '\a'); break;
    case 'b': buf_addc(lx->c, &b, '\b'); break;
    case 'f': buf_addc(lx->c, &b, '\f'); break;
    case 'n': buf_addc(lx->c, &b, '\n'); break;
    case 'r': buf_addc(lx->c, &b, '\r'); break;
    case 't': buf_addc(lx->c, &b, '\t'); break;
    case 'v': buf_addc(lx->c, &b, '\v'); break;
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    default:
      if (e >= '0' && e <= '7') {
        uint32_t v = (uint32_t)(e - '0');
        for (int k = 0; k < 2 && lx->pos < lx->len && lx->src[lx->pos] >= '0' && lx->src[lx->pos] <= '7'; k++)
          v = v * 8 + (uint32_t)(lx->src[lx->pos++] - '0');
        char tmp[4];
        buf_add(lx->c, &b, tmp, utf8_put(v, tmp));
      } else {
        /* unknown escapes stay as written */
        buf_addc(lx->c, &b, '\\');
        lx->pos--;
      }
    }
    if (digits) {
      uint32_t v = 0;
      for (int k = 0; k < digits; k++) {
        int h = lx->pos < lx->len ? hexval(lx->src[lx->pos]) : -1;
        if (h < 0)
          lex_fail(lx, lx->pos, "truncated \\%c escape in string literal", e);
        v = v * 16 + (uint32_t)h;
        lx->pos++;
      }
      if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        lex_fail(lx, lx->pos, "escape \\%c%0*X is not a valid character", e, digits, v);
      char tmp[4];
      buf_add(lx->c, &b, tmp, utf8_put(v, tmp));
    }
  }
  Token *t = lex_push(lx, K_STRING, start);
  t->s = str_new(lx->c, b.data ? b.data : "", b.len);
}

static void
lex_number(Lexer *lx)
{
  size_t start = lx->pos;
  const char *s = lx->src;
  size_t k = lx->pos;
  bool is_float = false;
  while (k < lx->len && ((s[k] >= '0' && s[k] <= '9') || (s[k] == '_' && k + 1 < lx->len && s[k + 1] >= '0' && s[k + 1] <= '9')))
    k++;
  if (k + 1 < lx->len && s[k] == '.' && s[k + 1] >= '0' && s[k + 1] <= '9') {
    is_float = true;
    k++;
    while (k < lx->len && ((s[k] >= '0' && s[k] <= '9') || s[k] == '_'))
      k++;
  }
  if (k < lx->len && (s[k] == 'e' || s[k] == 'E')) {
    size_t e = k + 1;
    if (e < lx->len && (s[e] == '+' || s[e] == '-'))
      e++;
    if (e < lx->len && s[e] >= '0' && s[e] <= '9') {
      is_float = true;
      k = e;
      while (k < lx->len && s[k] >= '0' && s[k] <= '9')
        k++;
    }
  }
  char tmp[128];
  size_t n = 0;
  for (size_t j = start; j < k && n < sizeof tmp - 1; j++)
    if (s[j] != '_')
      tmp[n++] = s[j];
  tmp[n] = '\0';
  if (k - start >= sizeof tmp - 1)
    lex_fail(lx, start, "number literal too long");
  Token *t = lex_push(lx, is_float ? K_FLOAT : K_INT, start);
  if (is_float) {
    t->f = c_strtod(tmp, NULL);
  } else {
    uint64_t v = 0;
    for (size_t j = 0; j < n; j++) {
      if (v > (UINT64_MAX - 9) / 10 || v * 10 + (uint64_t)(tmp[j] - '0') > (uint64_t)INT64_MAX)
        lex_fail(lx, start, "integer literal too large");
      v = v * 10 + (uint64_t)(tmp[j] - '0');
    }
    t->i = (int64_t)v;
  }
  lx->pos = k;
}

static const char *const OPS2[] = { "//", "**", "==", "!=", "<=", ">=", NULL };
static const char OPS1[] = "()[]{}.,:|~+-*/%=<>!";

/* Lexes the inside of a {{ }} or {% %} tag up to and including its end delimiter.
 * Returns the end's strip sign: '-', '+' or 0. */
static char
lex_tag(Lexer *lx, bool is_block, size_t tag_start)
{
  int depth = 0;
  for (;;) {
    while (lx->pos < lx->len && (lx->src[lx->pos] == ' ' || lx->src[lx->pos] == '\t' || lx->src[lx->pos] == '\n' ||
                                 lx->src[lx->pos] == '\r' || lx->src[lx->pos] == '\f' || lx->src[lx->pos] == '\v'))
      lx->pos++;
    if (lx->pos >= lx->len)
      lex_fail(lx, tag_start, "unclosed %s", is_block ? "'{%' tag" : "'{{' expression");
    const char *p = lx->src + lx->pos;
    size_t left = lx->len - lx->pos;
    if (depth == 0) {
      char end0 = is_block ? '%' : '}';
      char sign = 0;
      size_t skip = 0;
      if (left >= 3 && (p[0] == '-' || p[0] == '+') && p[1] == end0 && p[2] == '}') {
        sign = p[0];
        skip = 3;
      } else if (left >= 2 && p[0] == end0 && p[1] == '}') {
        skip = 2;
      }
      if (skip && !(sign == '+' && !is_block)) {
        lex_push(lx, is_block ? K_BLOCK_END : K_VAR_END, lx->pos);
        lx->pos += skip;
        return sign;
      }
    }
    char ch = p[0];
    if (ch == '"' || ch == '\'') {
      lex_string(lx);
      continue;
    }
    if (ch >= '0' && ch <= '9') {
      lex_number(lx);
      continue;
    }
    if (is_name_start(ch)) {
      size_t k = 1;
      while (k < left && is_name_char(p[k]))
        k++;
      Token *t = lex_push(lx, K_NAME, lx->pos);
      t->s = str_new(lx->c, p, k);
      lx->pos += k;
      continue;
    }
    size_t oplen = 0;
    for (int k = 0; OPS2[k]; k++)
      if (left >= 2 && p[0] == OPS2[k][0] && p[1] == OPS2[k][1])
        oplen = 2;
    if (!oplen && strchr(OPS1, ch) && ch)
      oplen = 1;
    if (!oplen || (ch == '!' && oplen == 1)) {
      if ((unsigned char)ch >= 0x20 && (unsigned char)ch < 0x7f)
        lex_fail(lx, lx->pos, "unexpected character '%c'", ch);
      lex_fail(lx, lx->pos, "unexpected byte 0x%02X", (unsigned char)ch);
    }
    if (oplen == 1) {
      if (ch == '(' || ch == '[' || ch == '{')
        depth++;
      else if (ch == ')' || ch == ']' || ch == '}') {
        if (depth == 0)
          lex_fail(lx, lx->pos, "unexpected '%c'", ch);
        depth--;
      }
    }
    Token *t = lex_push(lx, K_OP, lx->pos);
    t->s = str_new(lx->c, p, oplen);
    lx->pos += oplen;
  }
}

static void
lex_text(Lexer *lx, size_t at, const char *s, size_t n)
{
  if (n == 0)
    return;
  Token *t = lex_push(lx, K_TEXT, at);
  t->s = str_new(lx->c, s, n);
}

/* Finds "{% endraw %}" (any strip signs/spaces); returns its start or len. */
static size_t
find_endraw(Lexer *lx, size_t from, size_t *tag_end, char *lsign, char *rsign)
{
  for (size_t k = from; k + 1 < lx->len; k++) {
    if (lx->src[k] != '{' || lx->src[k + 1] != '%')
      continue;
    size_t p = k + 2;
    *lsign = 0;
    if (p < lx->len && (lx->src[p] == '-' || lx->src[p] == '+'))
      *lsign = lx->src[p++];
    while (p < lx->len && (lx->src[p] == ' ' || lx->src[p] == '\t' || lx->src[p] == '\n'))
      p++;
    if (lx->len - p < 6 || memcmp(lx->src + p, "endraw", 6) != 0)
      continue;
    p += 6;
    while (p < lx->len && (lx->src[p] == ' ' || lx->src[p] == '\t' || lx->src[p] == '\n'))
      p++;
    *rsign = 0;
    if (p < lx->len && (lx->src[p] == '-' || lx->src[p] == '+'))
      *rsign = lx->src[p++];
    if (lx->len - p >= 2 && lx->src[p] == '%' && lx->src[p + 1] == '}') {
      *tag_end = p + 2;
      return k;
    }
  }
  return lx->len;
}

static void
lex_all(Lexer *lx)
{
  bool line_starting = true;
  size_t text_start = 0;
  const char *src = lx->src;
  while (text_start <= lx->len) {
    size_t k = text_start;
    while (k + 1 < lx->len && !(src[k] == '{' && (src[k + 1] == '{' || src[k + 1] == '%' || src[k + 1] == '#')))
      k++;
    if (k + 1 >= lx->len) {
      lex_text(lx, text_start, src + text_start, lx->len - text_start);
      break;
    }
    char kind = src[k + 1];
    char sign = k + 2 < lx->len && (src[k + 2] == '-' || src[k + 2] == '+') ? src[k + 2] : 0;
    if (kind == '{' && sign == '+')
      sign = 0; /* "{{+" is not a strip marker; '+' is then a unary plus */
    size_t text_len = k - text_start;
    const char *text = src + text_start;
    if (sign == '-') {
      text_len -= trailing_space(text, text_len);
    } else if (sign != '+' && kind != '{') {
      /* lstrip_blocks */
      size_t l_pos = 0;
      for (size_t j = text_len; j > 0; j--)
        if (text[j - 1] == '\n') {
          l_pos = j;
          break;
        }
      if ((l_pos > 0 || line_starting) && text_len > l_pos &&
          leading_space(text + l_pos, text_len - l_pos) == text_len - l_pos)
        text_len = l_pos;
    }
    lex_text(lx, text_start, text, text_len);
    lx->pos = k + 2 + (sign ? 1 : 0);
    char end_sign;
    bool is_block = kind == '%';
    if (kind == '#') {
      size_t e = lx->pos;
      while (e + 1 < lx->len && !(src[e] == '#' && src[e + 1] == '}'))
        e++;
      if (e + 1 >= lx->len)
        lex_fail(lx, k, "unclosed comment");
      end_sign = e > lx->pos && (src[e - 1] == '-' || src[e - 1] == '+') ? src[e - 1] : 0;
      lx->pos = e + 2;
      is_block = true;
    } else {
      size_t first_tok = lx->n;
      lex_push(lx, is_block ? K_BLOCK_BEGIN : K_VAR_BEGIN, k);
      end_sign = lex_tag(lx, is_block, k);
      /* {% raw %} ... {% endraw %}: the body is text, untouched by the lexer */
      if (is_block && lx->n == first_tok + 3 && lx->toks[first_tok + 1].kind == K_NAME &&
          strcmp(lx->toks[first_tok + 1].s->s, "raw") == 0) {
        lx->n = first_tok;
        size_t tag_end;
        char ls, rs;
        size_t r = find_endraw(lx, lx->pos, &tag_end, &ls, &rs);
        if (r == lx->len)
          lex_fail(lx, k, "missing {%% endraw %%}");
        size_t body = lx->pos;
        if (end_sign == '-')
          body += leading_space(src + body, r - body);
        else if (end_sign != '+' && body < r && src[body] == '\n')
          body++;
        size_t body_len = r - body;
        if (ls == '-')
          body_len -= trailing_space(src + body, body_len);
        else if (ls != '+') {
          size_t l_pos = 0;
          for (size_t j = body_len; j > 0; j--)
            if (src[body + j - 1] == '\n') {
              l_pos = j;
              break;
            }
          if (l_pos > 0 && body_len > l_pos && leading_space(src + body + l_pos, body_len - l_pos) == body_len - l_pos)
            body_len = l_pos;
        }
        lex_text(lx, body, src + body, body_len);
        lx->pos = tag_end;
        end_sign = rs;
      }
    }
    if (end_sign == '-')
      lx->pos += leading_space(src + lx->pos, lx->len - lx->pos);
    else if (is_block && end_sign != '+' && lx->pos < lx->len && src[lx->pos] == '\n')
      lx->pos++; /* trim_blocks */
    line_starting = lx->pos > 0 && src[lx->pos - 1] == '\n';
    text_start = lx->pos;
    if (text_start == lx->len)
      break;
  }
  lex_push(lx, K_EOF, lx->len);
  /* resolve byte offsets into line:column in one pass */
  int line = 1, col = 1;
  size_t at = 0;
  for (size_t t = 0; t < lx->n; t++) {
    size_t target = lx->toks[t].at;
    for (; at < target && at < lx->len; at++) {
      if (src[at] == '\n') {
        line++;
        col = 1;
      } else if (((unsigned char)src[at] & 0xC0) != 0x80) {
        col++;
      }
    }
    lx->toks[t].line = line;
    lx->toks[t].col = col;
  }
}

static void
buf_add(Ctx *c, Buf *b, const char *s, size_t n)
{
  if (n == 0)
    return;
  if (b->limit && b->len + n > b->limit) {
    hn_error_set(c->err, HN_ERR_TEMPLATE, "the rendered prompt exceeds the limit of %zu bytes", b->limit);
    longjmp(c->jump, 1);
  }
  buf_reserve(c, b, n);
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

/* ==== AST and parser =================================================================== */

typedef enum {
  S_TEXT,
  S_OUTPUT,
  S_IF,
  S_FOR,
  S_SET,
  S_SETBLOCK,
  S_MACRO,
  S_BREAK,
  S_CONTINUE,
  S_PASSBLOCK,   /* {% generation %}: renders its body */
  S_FILTERBLOCK,
  S_CALLBLOCK,   /* {% call macro(...) %}: the body becomes caller() */
  E_LIT,
  E_NAME,
  E_LIST,
  E_TUPLE,
  E_DICT,
  E_ATTR,
  E_INDEX,
  E_SLICE,
  E_CALL,
  E_FILTER,
  E_TEST,
  E_UNARY,
  E_BIN,
  E_AND,
  E_OR,
  E_NOT,
  E_CMP,
  E_COND,
  E_CONCAT,
} NodeKind;

enum {
  OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
  OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
  OP_NEG, OP_POS,
};

typedef struct Node Node;

typedef struct {
  Node **items;
  size_t n;
} NodeList;

struct Node {
  NodeKind kind;
  int line, col;
  int op;
  bool negated;       /* E_TEST: "is not" */
  Str *name;          /* names, attributes, filters, tests, text */
  Value lit;
  Node *a, *b, *c;
  NodeList args;      /* positional arguments, list items, dict keys, compare operands */
  NodeList kwargs;    /* keyword values, dict values, macro defaults (NULL = none) */
  Str **kwnames;      /* keyword names, macro parameter names */
  int *ops;           /* E_CMP operators */
  Str **targets;      /* for/set targets */
  size_t ntargets;
  NodeList body, orelse;
};

struct HnChatTemplate {
  Ctx ctx; /* the arena holds the AST */
  NodeList body;
};

typedef struct {
  Ctx *c;
  Token *t;
  size_t pos;
  int depth;
  int loops;  /* enclosing for-loops, for break/continue */
  int macros;
} P;

static _Noreturn void
p_fail(P *p, const Token *t, const char *fmt, ...) HN_PRINTF(3, 4);

static _Noreturn void
p_fail(P *p, const Token *t, const char *fmt, ...)
{
  char msg[HN_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fail_at(p->c, t->line, t->col, "%s", msg);
}

static Token *cur(P *p) { return &p->t[p->pos]; }
static Token *peek_at(P *p, size_t k) { Token *t = &p->t[p->pos]; for (size_t j = 0; j < k && t->kind != K_EOF; j++) t++; return t; }
static Token *advance(P *p) { Token *t = &p->t[p->pos]; if (t->kind != K_EOF) p->pos++; return t; }

static bool
tok_op(const Token *t, const char *op)
{
  return t->kind == K_OP && strcmp(t->s->s, op) == 0;
}

static bool
tok_name(const Token *t, const char *name)
{
  return t->kind == K_NAME && strcmp(t->s->s, name) == 0;
}

static const char *
tok_desc(const Token *t, char *buf, size_t n)
{
  switch (t->kind) {
  case K_TEXT: return "template text";
  case K_VAR_BEGIN: return "'{{'";
  case K_VAR_END: return "'}}'";
  case K_BLOCK_BEGIN: return "'{%'";
  case K_BLOCK_END: return "'%}'";
  case K_NAME:
  case K_OP: snprintf(buf, n, "'%.40s'", t->s->s); return buf;
  case K_STRING: return "a string";
  case K_INT:
  case K_FLOAT: return "a number";
  case K_EOF: return "end of template";
  }
  return "?";
}

static void
expect_op(P *p, const char *op)
{
  Token *t = cur(p);
  if (!tok_op(t, op)) {
    char b[64];
    p_fail(p, t, "expected '%s', got %s", op, tok_desc(t, b, sizeof b));
  }
  advance(p);
}

static void
expect_kind(P *p, TokKind kind, const char *what)
{
  Token *t = cur(p);
  if (t->kind != kind) {
    char b[64];
    p_fail(p, t, "expected %s, got %s", what, tok_desc(t, b, sizeof b));
  }
  advance(p);
}

static Node *
node_new(P *p, NodeKind kind, const Token *at)
{
  Node *n = xalloc0(p->c, sizeof(Node));
  n->kind = kind;
  n->line = at->line;
  n->col = at->col;
  return n;
}

typedef struct {
  Node **items;
  size_t n, cap;
} NodeVec;

static void
vec_push(P *p, NodeVec *v, Node *n)
{
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 4;
    Node **items = xalloc(p->c, xmul(p->c, cap, sizeof(Node *)));
    if (v->n)
      memcpy(items, v->items, v->n * sizeof(Node *));
    v->items = items;
    v->cap = cap;
  }
  v->items[v->n++] = n;
}

static NodeList
vec_list(NodeVec *v)
{
  NodeList l = { v->items, v->n };
  return l;
}

static Node *parse_expr(P *p);
static Node *parse_or(P *p);
static Node *parse_unary(P *p, bool with_filter);
static Node *parse_primary(P *p);
static Node *parse_postfix(P *p, Node *n);

static void
enter(P *p)
{
  if (++p->depth > HN_CHAT_MAX_DEPTH)
    p_fail(p, cur(p), "expression or block nesting deeper than %d", HN_CHAT_MAX_DEPTH);
}

/* Comma-separated expressions; a single one without a comma is itself. */
static Node *
parse_tuple(P *p, bool explicit_parens, bool with_condexpr)
{
  Token *start = cur(p);
  NodeVec items = { 0 };
  bool comma = false;
  for (;;) {
    if (items.n > 0) {
      if (!tok_op(cur(p), ","))
        break;
      advance(p);
      comma = true;
    }
    Token *t = cur(p);
    if (t->kind == K_BLOCK_END || t->kind == K_VAR_END || tok_op(t, ")") || tok_name(t, "if") ||
        (items.n > 0 && (tok_op(t, "=") || tok_name(t, "in"))))
      break;
    vec_push(p, &items, with_condexpr ? parse_expr(p) : parse_or(p));
  }
  if (items.n == 1 && !comma)
    return items.items[0];
  if (items.n == 0 && !explicit_parens) {
    char b[64];
    p_fail(p, start, "expected an expression, got %s", tok_desc(start, b, sizeof b));
  }
  Node *n = node_new(p, E_TUPLE, start);
  n->args = vec_list(&items);
  return n;
}

static void
parse_call_args(P *p, Node *n)
{
  /* at '(' */
  advance(p);
  NodeVec args = { 0 }, kwv = { 0 };
  Str **names = NULL;
  size_t nnames = 0, cap = 0;
  while (!tok_op(cur(p), ")")) {
    if (args.n + kwv.n > 0)
      expect_op(p, ",");
    if (tok_op(cur(p), ")"))
      break;
    if (tok_op(cur(p), "*") || tok_op(cur(p), "**"))
      p_fail(p, cur(p), "*args and **kwargs in calls are not supported");
    if (cur(p)->kind == K_NAME && tok_op(peek_at(p, 1), "=")) {
      if (nnames == cap) {
        cap = cap ? cap * 2 : 4;
        Str **nn = xalloc(p->c, xmul(p->c, cap, sizeof(Str *)));
        if (nnames)
          memcpy(nn, names, nnames * sizeof(Str *));
        names = nn;
      }
      names[nnames++] = advance(p)->s;
      advance(p);
      vec_push(p, &kwv, parse_expr(p));
    } else {
      if (kwv.n)
        p_fail(p, cur(p), "positional argument after keyword argument");
      vec_push(p, &args, parse_expr(p));
    }
  }
  advance(p);
  n->args = vec_list(&args);
  n->kwargs = vec_list(&kwv);
  n->kwnames = names;
}

static Node *
parse_subscript(P *p, Node *target, Token *at)
{
  /* after '[' */
  Node *parts[3] = { NULL, NULL, NULL };
  int nparts = 0;
  bool is_slice = false;
  for (;;) {
    if (tok_op(cur(p), ":")) {
      is_slice = true;
      advance(p);
      if (++nparts > 2)
        p_fail(p, cur(p), "too many ':' in slice");
      continue;
    }
    if (tok_op(cur(p), "]"))
      break;
    if (parts[nparts])
      p_fail(p, cur(p), "expected ':' or ']'");
    parts[nparts] = parse_expr(p);
  }
  advance(p);
  if (!is_slice) {
    if (!parts[0])
      p_fail(p, at, "empty subscript");
    Node *n = node_new(p, E_INDEX, at);
    n->a = target;
    n->b = parts[0];
    return n;
  }
  Node *n = node_new(p, E_SLICE, at);
  n->a = target;
  n->b = parts[0];
  n->c = parts[1];
  n->args.n = 1;
  n->args.items = xalloc0(p->c, sizeof(Node *));
  n->args.items[0] = parts[2];
  return n;
}

static Node *
parse_postfix(P *p, Node *n)
{
  for (;;) {
    Token *t = cur(p);
    if (tok_op(t, ".")) {
      advance(p);
      Token *name = cur(p);
      if (name->kind == K_NAME) {
        advance(p);
        Node *a = node_new(p, E_ATTR, t);
        a->a = n;
        a->name = name->s;
        n = a;
      } else if (name->kind == K_INT) {
        advance(p);
        Node *a = node_new(p, E_INDEX, t);
        a->a = n;
        a->b = node_new(p, E_LIT, name);
        a->b->lit = v_int(name->i);
        n = a;
      } else {
        p_fail(p, name, "expected an attribute name after '.'");
      }
    } else if (tok_op(t, "[")) {
      advance(p);
      n = parse_subscript(p, n, t);
    } else if (tok_op(t, "(")) {
      Node *call = node_new(p, E_CALL, t);
      call->a = n;
      parse_call_args(p, call);
      n = call;
    } else {
      return n;
    }
  }
}

static Node *
parse_filter_chain(P *p, Node *n)
{
  /* at a name after '|' */
  for (;;) {
    Token *t = cur(p);
    if (t->kind != K_NAME) {
      char b[64];
      p_fail(p, t, "expected a filter name, got %s", tok_desc(t, b, sizeof b));
    }
    advance(p);
    Node *f = node_new(p, E_FILTER, t);
    f->a = n;
    f->name = t->s;
    if (tok_op(cur(p), "("))
      parse_call_args(p, f);
    n = f;
    if (!tok_op(cur(p), "|"))
      return n;
    advance(p);
  }
}

static Node *
parse_filter_expr(P *p, Node *n)
{
  for (;;) {
    Token *t = cur(p);
    if (tok_op(t, "|")) {
      advance(p);
      n = parse_filter_chain(p, n);
    } else if (tok_name(t, "is")) {
      advance(p);
      Node *test = node_new(p, E_TEST, t);
      test->a = n;
      if (tok_name(cur(p), "not")) {
        advance(p);
        test->negated = true;
      }
      Token *name = cur(p);
      if (name->kind != K_NAME) {
        char b[64];
        p_fail(p, name, "expected a test name, got %s", tok_desc(name, b, sizeof b));
      }
      advance(p);
      test->name = name->s;
      Token *a = cur(p);
      if (tok_op(a, "(")) {
        parse_call_args(p, test);
      } else if ((a->kind == K_NAME || a->kind == K_STRING || a->kind == K_INT || a->kind == K_FLOAT ||
                  tok_op(a, "[") || tok_op(a, "{")) &&
                 !tok_name(a, "else") && !tok_name(a, "or") && !tok_name(a, "and") && !tok_name(a, "if") &&
                 !tok_name(a, "in") && !tok_name(a, "is") && !tok_name(a, "not") && !tok_name(a, "recursive")) {
        NodeVec args = { 0 };
        enter(p);
        vec_push(p, &args, parse_postfix(p, parse_primary(p)));
        p->depth--;
        test->args = vec_list(&args);
      }
      n = test;
    } else if (tok_op(t, "(")) {
      Node *call = node_new(p, E_CALL, t);
      call->a = n;
      parse_call_args(p, call);
      n = call;
    } else {
      return n;
    }
  }
}

static Node *
parse_primary(P *p)
{
  Token *t = cur(p);
  Node *n;
  switch (t->kind) {
  case K_NAME: {
    advance(p);
    const char *s = t->s->s;
    n = node_new(p, E_LIT, t);
    if (!strcmp(s, "true") || !strcmp(s, "True"))
      n->lit = v_bool(true);
    else if (!strcmp(s, "false") || !strcmp(s, "False"))
      n->lit = v_bool(false);
    else if (!strcmp(s, "none") || !strcmp(s, "None"))
      n->lit = NONE;
    else {
      n->kind = E_NAME;
      n->name = t->s;
    }
    return n;
  }
  case K_STRING: {
    advance(p);
    n = node_new(p, E_LIT, t);
    if (cur(p)->kind != K_STRING) {
      n->lit.t = T_STR;
      n->lit.s = t->s;
      return n;
    }
    Buf b = { 0 };
    buf_add(p->c, &b, t->s->s, t->s->len);
    while (cur(p)->kind == K_STRING) {
      Token *more = advance(p);
      buf_add(p->c, &b, more->s->s, more->s->len);
    }
    n->lit = buf_value(p->c, &b);
    return n;
  }
  case K_INT:
    advance(p);
    n = node_new(p, E_LIT, t);
    n->lit = v_int(t->i);
    return n;
  case K_FLOAT:
    advance(p);
    n = node_new(p, E_LIT, t);
    n->lit = v_float(t->f);
    return n;
  case K_OP:
    if (tok_op(t, "(")) {
      advance(p);
      n = parse_tuple(p, true, true);
      expect_op(p, ")");
      return n;
    }
    if (tok_op(t, "[")) {
      advance(p);
      NodeVec items = { 0 };
      while (!tok_op(cur(p), "]")) {
        if (items.n)
          expect_op(p, ",");
        if (tok_op(cur(p), "]"))
          break;
        vec_push(p, &items, parse_expr(p));
      }
      advance(p);
      n = node_new(p, E_LIST, t);
      n->args = vec_list(&items);
      return n;
    }
    if (tok_op(t, "{")) {
      advance(p);
      NodeVec keys = { 0 }, vals = { 0 };
      while (!tok_op(cur(p), "}")) {
        if (keys.n)
          expect_op(p, ",");
        if (tok_op(cur(p), "}"))
          break;
        vec_push(p, &keys, parse_expr(p));
        expect_op(p, ":");
        vec_push(p, &vals, parse_expr(p));
      }
      advance(p);
      n = node_new(p, E_DICT, t);
      n->args = vec_list(&keys);
      n->kwargs = vec_list(&vals);
      return n;
    }
    break;
  default:
    break;
  }
  char b[64];
  p_fail(p, t, "expected an expression, got %s", tok_desc(t, b, sizeof b));
}

static Node *
parse_unary(P *p, bool with_filter)
{
  enter(p);
  Token *t = cur(p);
  Node *n;
  if (tok_op(t, "-") || tok_op(t, "+")) {
    advance(p);
    n = node_new(p, E_UNARY, t);
    n->op = tok_op(t, "-") ? OP_NEG : OP_POS;
    n->a = parse_unary(p, false);
  } else {
    n = parse_postfix(p, parse_primary(p));
  }
  if (with_filter)
    n = parse_filter_expr(p, n);
  p->depth--;
  return n;
}

static Node *
bin_node(P *p, Token *t, int op, Node *a, Node *b)
{
  Node *n = node_new(p, E_BIN, t);
  n->op = op;
  n->a = a;
  n->b = b;
  return n;
}

static Node *
parse_pow(P *p)
{
  Node *n = parse_unary(p, true);
  while (tok_op(cur(p), "**")) {
    Token *t = advance(p);
    n = bin_node(p, t, OP_POW, n, parse_unary(p, true));
  }
  return n;
}

static Node *
parse_math2(P *p)
{
  Node *n = parse_pow(p);
  for (;;) {
    Token *t = cur(p);
    int op = tok_op(t, "*") ? OP_MUL : tok_op(t, "/") ? OP_DIV : tok_op(t, "//") ? OP_FLOORDIV : tok_op(t, "%") ? OP_MOD : 0;
    if (!op)
      return n;
    advance(p);
    n = bin_node(p, t, op, n, parse_pow(p));
  }
}

static Node *
parse_concat(P *p)
{
  Token *start = cur(p);
  Node *n = parse_math2(p);
  if (!tok_op(cur(p), "~"))
    return n;
  NodeVec parts = { 0 };
  vec_push(p, &parts, n);
  while (tok_op(cur(p), "~")) {
    advance(p);
    vec_push(p, &parts, parse_math2(p));
  }
  Node *c = node_new(p, E_CONCAT, start);
  c->args = vec_list(&parts);
  return c;
}

static Node *
parse_math1(P *p)
{
  Node *n = parse_concat(p);
  for (;;) {
    Token *t = cur(p);
    int op = tok_op(t, "+") ? OP_ADD : tok_op(t, "-") ? OP_SUB : 0;
    if (!op)
      return n;
    advance(p);
    n = bin_node(p, t, op, n, parse_concat(p));
  }
}

static Node *
parse_compare(P *p)
{
  Token *start = cur(p);
  Node *first = parse_math1(p);
  NodeVec operands = { 0 };
  int ops[64];
  size_t nops = 0;
  for (;;) {
    Token *t = cur(p);
    int op = tok_op(t, "==") ? OP_EQ : tok_op(t, "!=") ? OP_NE : tok_op(t, "<") ? OP_LT : tok_op(t, "<=") ? OP_LE
           : tok_op(t, ">") ? OP_GT : tok_op(t, ">=") ? OP_GE : tok_name(t, "in") ? OP_IN : 0;
    if (!op && tok_name(t, "not") && tok_name(peek_at(p, 1), "in")) {
      advance(p);
      op = OP_NOTIN;
    }
    if (!op)
      break;
    if (nops == HN_ARRAY_LEN(ops))
      p_fail(p, t, "comparison chain too long");
    advance(p);
    ops[nops++] = op;
    vec_push(p, &operands, parse_math1(p));
  }
  if (!nops)
    return first;
  Node *n = node_new(p, E_CMP, start);
  n->a = first;
  n->args = vec_list(&operands);
  n->ops = xalloc(p->c, nops * sizeof(int));
  memcpy(n->ops, ops, nops * sizeof(int));
  return n;
}

static Node *
parse_not(P *p)
{
  Token *t = cur(p);
  if (tok_name(t, "not")) {
    advance(p);
    enter(p);
    Node *n = node_new(p, E_NOT, t);
    n->a = parse_not(p);
    p->depth--;
    return n;
  }
  return parse_compare(p);
}

static Node *
parse_and(P *p)
{
  Node *n = parse_not(p);
  while (tok_name(cur(p), "and")) {
    Token *t = advance(p);
    Node *a = node_new(p, E_AND, t);
    a->a = n;
    a->b = parse_not(p);
    n = a;
  }
  return n;
}

static Node *
parse_or(P *p)
{
  Node *n = parse_and(p);
  while (tok_name(cur(p), "or")) {
    Token *t = advance(p);
    Node *a = node_new(p, E_OR, t);
    a->a = n;
    a->b = parse_and(p);
    n = a;
  }
  return n;
}

static Node *
parse_expr(P *p)
{
  enter(p);
  Node *n = parse_or(p);
  while (tok_name(cur(p), "if")) {
    Token *t = advance(p);
    Node *c = node_new(p, E_COND, t);
    c->a = n;
    c->b = parse_or(p);
    if (tok_name(cur(p), "else")) {
      advance(p);
      c->c = parse_expr(p);
    }
    n = c;
  }
  p->depth--;
  return n;
}

/* ---- statements ---- */

static NodeList parse_body(P *p, const char *const *ends, const char **which, Token *opener);

static void
expect_block_end(P *p)
{
  expect_kind(p, K_BLOCK_END, "'%}'");
}

static void
parse_targets(P *p, Node *n, bool allow_attr)
{
  Str *names[16];
  size_t count = 0;
  bool paren = tok_op(cur(p), "(");
  if (paren)
    advance(p);
  for (;;) {
    Token *t = cur(p);
    if (t->kind != K_NAME) {
      char b[64];
      p_fail(p, t, "expected a variable name, got %s", tok_desc(t, b, sizeof b));
    }
    advance(p);
    if (allow_attr && count == 0 && tok_op(cur(p), ".")) {
      advance(p);
      Token *attr = cur(p);
      if (attr->kind != K_NAME)
        p_fail(p, attr, "expected an attribute name after '.'");
      advance(p);
      n->a = node_new(p, E_NAME, t);
      n->a->name = t->s;
      n->name = attr->s;
      return;
    }
    if (count == HN_ARRAY_LEN(names))
      p_fail(p, t, "too many targets");
    names[count++] = t->s;
    if (!tok_op(cur(p), ","))
      break;
    advance(p);
  }
  if (paren)
    expect_op(p, ")");
  n->targets = xalloc(p->c, count * sizeof(Str *));
  memcpy(n->targets, names, count * sizeof(Str *));
  n->ntargets = count;
}

/* "(a, b=default, ...)" of a macro or call block */
static void
parse_params(P *p, Node *n)
{
  expect_op(p, "(");
  NodeVec defaults = { 0 };
  Str *params[64];
  size_t np = 0;
  while (!tok_op(cur(p), ")")) {
    if (np)
      expect_op(p, ",");
    Token *pt = cur(p);
    if (pt->kind != K_NAME)
      p_fail(p, pt, "expected a parameter name");
    if (np == HN_ARRAY_LEN(params))
      p_fail(p, pt, "too many macro parameters");
    advance(p);
    params[np++] = pt->s;
    Node *def = NULL;
    if (tok_op(cur(p), "=")) {
      advance(p);
      def = parse_expr(p);
    } else if (defaults.n && defaults.items[defaults.n - 1]) {
      p_fail(p, pt, "parameter without a default after one with a default");
    }
    vec_push(p, &defaults, def);
  }
  advance(p);
  n->kwnames = xalloc(p->c, (np ? np : 1) * sizeof(Str *));
  memcpy(n->kwnames, params, np * sizeof(Str *));
  n->kwargs = vec_list(&defaults);
  n->kwargs.n = np;
}

static Node *
parse_statement(P *p)
{
  advance(p); /* {% */
  Token *t = cur(p);
  if (t->kind != K_NAME) {
    char b[64];
    p_fail(p, t, "expected a tag name, got %s", tok_desc(t, b, sizeof b));
  }
  const char *tag = t->s->s;
  advance(p);
  const char *which = NULL;
  Node *n;
  if (!strcmp(tag, "if")) {
    n = node_new(p, S_IF, t);
    n->a = parse_expr(p);
    expect_block_end(p);
    static const char *const ends[] = { "elif", "else", "endif", NULL };
    n->body = parse_body(p, ends, &which, t);
    Node *tail = n;
    while (!strcmp(which, "elif")) {
      Token *et = &p->t[p->pos - 1];
      Node *e = node_new(p, S_IF, et);
      e->a = parse_expr(p);
      expect_block_end(p);
      e->body = parse_body(p, ends, &which, et);
      tail->orelse.items = xalloc(p->c, sizeof(Node *));
      tail->orelse.items[0] = e;
      tail->orelse.n = 1;
      tail = e;
    }
    if (!strcmp(which, "else")) {
      expect_block_end(p);
      static const char *const endif[] = { "endif", NULL };
      tail->orelse = parse_body(p, endif, &which, t);
    }
    expect_block_end(p);
    return n;
  }
  if (!strcmp(tag, "for")) {
    n = node_new(p, S_FOR, t);
    parse_targets(p, n, false);
    if (!tok_name(cur(p), "in")) {
      char b[64];
      p_fail(p, cur(p), "expected 'in', got %s", tok_desc(cur(p), b, sizeof b));
    }
    advance(p);
    n->a = parse_tuple(p, false, false);
    if (tok_name(cur(p), "if")) {
      advance(p);
      n->b = parse_expr(p);
    }
    if (tok_name(cur(p), "recursive"))
      p_fail(p, cur(p), "recursive for-loops are not supported");
    expect_block_end(p);
    static const char *const ends[] = { "else", "endfor", NULL };
    p->loops++;
    n->body = parse_body(p, ends, &which, t);
    p->loops--;
    if (!strcmp(which, "else")) {
      expect_block_end(p);
      static const char *const endfor[] = { "endfor", NULL };
      /* break/continue in the else branch belong to an outer loop */
      int saved = p->loops;
      n->orelse = parse_body(p, endfor, &which, t);
      p->loops = saved;
    }
    expect_block_end(p);
    return n;
  }
  if (!strcmp(tag, "set")) {
    n = node_new(p, S_SET, t);
    parse_targets(p, n, true);
    if (tok_op(cur(p), "=")) {
      advance(p);
      n->b = parse_tuple(p, false, true);
      expect_block_end(p);
      return n;
    }
    if (n->a || n->ntargets != 1)
      p_fail(p, cur(p), "a block set takes one variable name");
    n->kind = S_SETBLOCK;
    if (tok_op(cur(p), "|")) {
      advance(p);
      n->c = parse_filter_chain(p, NULL);
    }
    expect_block_end(p);
    static const char *const ends[] = { "endset", NULL };
    n->body = parse_body(p, ends, &which, t);
    expect_block_end(p);
    return n;
  }
  if (!strcmp(tag, "call")) {
    n = node_new(p, S_CALLBLOCK, t);
    n->name = str_new(p->c, "caller", 6);
    if (tok_op(cur(p), "("))
      parse_params(p, n);
    Token *ct = cur(p);
    n->a = parse_expr(p);
    if (n->a->kind != E_CALL)
      p_fail(p, ct, "{%% call %%} needs a macro call");
    expect_block_end(p);
    static const char *const ends[] = { "endcall", NULL };
    int saved_loops = p->loops;
    p->loops = 0;
    n->body = parse_body(p, ends, &which, t);
    p->loops = saved_loops;
    expect_block_end(p);
    return n;
  }
  if (!strcmp(tag, "macro")) {
    n = node_new(p, S_MACRO, t);
    Token *name = cur(p);
    if (name->kind != K_NAME)
      p_fail(p, name, "expected a macro name");
    advance(p);
    n->name = name->s;
    parse_params(p, n);
    expect_block_end(p);
    static const char *const ends[] = { "endmacro", NULL };
    int saved_loops = p->loops;
    p->loops = 0;
    p->macros++;
    n->body = parse_body(p, ends, &which, t);
    p->macros--;
    p->loops = saved_loops;
    if (cur(p)->kind == K_NAME && !strcmp(cur(p)->s->s, name->s->s))
      advance(p);
    expect_block_end(p);
    return n;
  }
  if (!strcmp(tag, "break") || !strcmp(tag, "continue")) {
    if (p->loops == 0)
      p_fail(p, t, "'%s' outside of a loop", tag);
    n = node_new(p, tag[0] == 'b' ? S_BREAK : S_CONTINUE, t);
    expect_block_end(p);
    return n;
  }
  if (!strcmp(tag, "generation")) {
    n = node_new(p, S_PASSBLOCK, t);
    expect_block_end(p);
    static const char *const ends[] = { "endgeneration", NULL };
    n->body = parse_body(p, ends, &which, t);
    expect_block_end(p);
    return n;
  }
  if (!strcmp(tag, "filter")) {
    n = node_new(p, S_FILTERBLOCK, t);
    n->c = parse_filter_chain(p, NULL);
    expect_block_end(p);
    static const char *const ends[] = { "endfilter", NULL };
    n->body = parse_body(p, ends, &which, t);
    expect_block_end(p);
    return n;
  }
  p_fail(p, t, "unknown or unsupported tag '%s'", tag);
}

static NodeList
parse_body(P *p, const char *const *ends, const char **which, Token *opener)
{
  NodeVec body = { 0 };
  enter(p);
  for (;;) {
    Token *t = cur(p);
    switch (t->kind) {
    case K_TEXT: {
      advance(p);
      Node *n = node_new(p, S_TEXT, t);
      n->name = t->s;
      vec_push(p, &body, n);
      break;
    }
    case K_VAR_BEGIN: {
      advance(p);
      Node *n = node_new(p, S_OUTPUT, t);
      n->a = parse_tuple(p, false, true);
      expect_kind(p, K_VAR_END, "'}}'");
      vec_push(p, &body, n);
      break;
    }
    case K_BLOCK_BEGIN: {
      Token *name = peek_at(p, 1);
      if (name->kind == K_NAME && ends) {
        for (int k = 0; ends[k]; k++)
          if (!strcmp(name->s->s, ends[k])) {
            p->pos += 2;
            *which = ends[k];
            p->depth--;
            return vec_list(&body);
          }
      }
      if (name->kind == K_NAME &&
          (!strcmp(name->s->s, "endif") || !strcmp(name->s->s, "endfor") || !strcmp(name->s->s, "elif") ||
           !strcmp(name->s->s, "else") || !strcmp(name->s->s, "endmacro") || !strcmp(name->s->s, "endset") ||
           !strcmp(name->s->s, "endfilter") || !strcmp(name->s->s, "endgeneration")))
        p_fail(p, name, "unexpected '%s'%s", name->s->s, ends ? "" : " (no block is open)");
      vec_push(p, &body, parse_statement(p));
      break;
    }
    case K_EOF:
      if (ends)
      {
        const char *last = ends[0];
        for (int k = 0; ends[k]; k++)
          last = ends[k];
        p_fail(p, opener, "'%s' is never closed (expected '{%% %s %%}')", opener->s->s, last);
      }
      p->depth--;
      return vec_list(&body);
    default: {
      char b[64];
      p_fail(p, t, "unexpected %s", tok_desc(t, b, sizeof b));
    }
    }
  }
}

static void
normalize_source(Ctx *c, const char *src, size_t len, char **out, size_t *out_len)
{
  char *d = xalloc(c, len + 1);
  size_t n = 0;
  for (size_t k = 0; k < len; k++) {
    if (src[k] == '\r') {
      d[n++] = '\n';
      if (k + 1 < len && src[k + 1] == '\n')
        k++;
    } else {
      d[n++] = src[k];
    }
  }
  /* Jinja drops one trailing newline (keep_trailing_newline is off) */
  if (n > 0 && d[n - 1] == '\n')
    n--;
  d[n] = '\0';
  *out = d;
  *out_len = n;
}

HnChatTemplate *
hn_chat_template_new(const char *source, size_t len, HnError *err)
{
  if (!source && len)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "no template source"), NULL;
  if (len > HN_CHAT_TEMPLATE_MAX_SOURCE) {
    hn_error_set(err, HN_ERR_TEMPLATE, "the template is %zu bytes, more than the limit of %u", len, HN_CHAT_TEMPLATE_MAX_SOURCE);
    return NULL;
  }
  HnChatTemplate *t = calloc(1, sizeof *t);
  if (!t) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return NULL;
  }
  HnError local = { 0 };
  t->ctx.err = err ? err : &local;
  t->ctx.arena.limit = 64u << 20;
  if (setjmp(t->ctx.jump)) {
    arena_free(&t->ctx.arena);
    free(t);
    return NULL;
  }
  char *src;
  size_t n;
  normalize_source(&t->ctx, source ? source : "", len, &src, &n);
  t->ctx.src = src;
  Lexer lx = { &t->ctx, src, n, 0, NULL, 0, 0 };
  lex_all(&lx);
  P p = { &t->ctx, lx.toks, 0, 0, 0, 0 };
  t->body = parse_body(&p, NULL, NULL, NULL);
  t->ctx.err = NULL;
  return t;
}

void
hn_chat_template_free(HnChatTemplate *tmpl)
{
  if (!tmpl)
    return;
  arena_free(&tmpl->ctx.arena);
  free(tmpl);
}

/* ==== evaluator ======================================================================== */

typedef struct Scope {
  struct Scope *parent;
  size_t n, cap;
  Str **names;
  Value *vals;
} Scope;

struct Macro {
  const Node *node;
  Scope *scope;
};

typedef struct {
  Ctx c;
  Buf *out;
  Scope *scope;
  Value block_input;
  bool json_ascii;
  uint64_t steps, max_steps;
  int macro_depth;
  int depth;
  time_t now;
  Scope *root;
} R;

typedef struct {
  Value *pos;
  size_t npos;
  Str **kwn;
  Value *kwv;
  size_t nkw;
} Args;

#define MAX_EVAL_DEPTH 3000

static Value eval(R *r, const Node *n);
static int exec_list(R *r, const NodeList *l, Scope *sc);
static void to_str_buf(R *r, Buf *b, Value v);
static void repr_buf(R *r, Buf *b, Value v);
static bool values_equal(const Value *a, const Value *b);

static _Noreturn void
rfail(R *r, const Node *n, const char *fmt, ...) HN_PRINTF(3, 4);

static _Noreturn void
rfail(R *r, const Node *n, const char *fmt, ...)
{
  char msg[HN_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fail_at(&r->c, n ? n->line : 0, n ? n->col : 0, "%s", msg);
}

static _Noreturn void
undef_fail(R *r, const Node *n, const Value *v)
{
  rfail(r, n, "%s", v->s ? v->s->s : "value is undefined");
}

static Value
make_undef(R *r, const char *fmt, ...) HN_PRINTF(2, 3);

static Value
make_undef(R *r, const char *fmt, ...)
{
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  Value v = { .t = T_UNDEF };
  v.s = str_new(&r->c, msg, strlen(msg));
  return v;
}

static void
step(R *r, const Node *n)
{
  if (++r->steps > r->max_steps)
    rfail(r, n, "the template ran for more than %llu steps (endless loop?)", (unsigned long long)r->max_steps);
}

/* Work that does not allocate (scans, comparisons) is charged to the step budget, so
 * that a loop over a large value cannot run for minutes without hitting a limit. */
static void
charge(R *r, const Node *n, size_t amount)
{
  r->steps += amount;
  if (r->steps > r->max_steps)
    rfail(r, n, "the template ran for more than %llu steps (endless loop?)", (unsigned long long)r->max_steps);
}

static size_t
value_size(const Value *v)
{
  switch (v->t) {
  case T_STR: return v->s->len / 64;
  case T_LIST: return v->l->n;
  case T_DICT: return v->d->n;
  default: return 0;
  }
}

/* ---- scopes ---- */

static Scope *
scope_new(R *r, Scope *parent)
{
  Scope *s = xalloc0(&r->c, sizeof(Scope));
  s->parent = parent;
  return s;
}

static Value *
scope_find_local(Scope *s, const char *name, size_t len)
{
  for (size_t k = s->n; k > 0; k--)
    if (s->names[k - 1]->len == len && memcmp(s->names[k - 1]->s, name, len) == 0)
      return &s->vals[k - 1];
  return NULL;
}

static void
scope_set(R *r, Scope *s, Str *name, Value v)
{
  Value *slot = scope_find_local(s, name->s, name->len);
  if (slot) {
    *slot = v;
    return;
  }
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 8;
    Str **names = xalloc(&r->c, xmul(&r->c, cap, sizeof(Str *)));
    Value *vals = xalloc(&r->c, xmul(&r->c, cap, sizeof(Value)));
    if (s->n) {
      memcpy(names, s->names, s->n * sizeof(Str *));
      memcpy(vals, s->vals, s->n * sizeof(Value));
    }
    s->names = names;
    s->vals = vals;
    s->cap = cap;
  }
  s->names[s->n] = name;
  s->vals[s->n] = v;
  s->n++;
}

static void
scope_set_c(R *r, Scope *s, const char *name, Value v)
{
  scope_set(r, s, str_new(&r->c, name, strlen(name)), v);
}

static const struct { const char *name; int fn; } BUILTINS[] = {
  { "range", FN_RANGE }, { "namespace", FN_NAMESPACE }, { "raise_exception", FN_RAISE },
  { "strftime_now", FN_STRFTIME }, { "dict", FN_DICT },
};


static Value
lookup(R *r, Scope *s, const Str *name)
{
  for (; s; s = s->parent) {
    Value *v = scope_find_local(s, name->s, name->len);
    if (v)
      return *v;
  }
  for (size_t k = 0; k < HN_ARRAY_LEN(BUILTINS); k++)
    if (!strcmp(BUILTINS[k].name, name->s)) {
      Value v = { .t = T_FUNC };
      v.fn = BUILTINS[k].fn;
      return v;
    }
  return make_undef(r, "'%.100s' is undefined", name->s);
}

/* ---- dicts ---- */

static Value *
dict_find(Dict *d, const Value *key)
{
  for (size_t k = 0; k < d->n; k++)
    if (values_equal(&d->keys[k], key))
      return &d->vals[k];
  return NULL;
}

static Value *
dict_find_str(Dict *d, const char *key, size_t len)
{
  for (size_t k = 0; k < d->n; k++)
    if (d->keys[k].t == T_STR && d->keys[k].s->len == len && memcmp(d->keys[k].s->s, key, len) == 0)
      return &d->vals[k];
  return NULL;
}

static void
dict_set(R *r, Dict *d, Value key, Value v)
{
  Value *slot = dict_find(d, &key);
  if (slot) {
    *slot = v;
    return;
  }
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 4;
    Value *keys = xalloc(&r->c, xmul(&r->c, cap, sizeof(Value)));
    Value *vals = xalloc(&r->c, xmul(&r->c, cap, sizeof(Value)));
    if (d->n) {
      memcpy(keys, d->keys, d->n * sizeof(Value));
      memcpy(vals, d->vals, d->n * sizeof(Value));
    }
    d->keys = keys;
    d->vals = vals;
    d->cap = cap;
  }
  d->keys[d->n] = key;
  d->vals[d->n] = v;
  d->n++;
}

/* ---- conversions ---- */

static bool
truthy(const Value *v)
{
  switch (v->t) {
  case T_UNDEF:
  case T_NONE: return false;
  case T_BOOL: return v->b;
  case T_INT: return v->i != 0;
  case T_FLOAT: return v->f != 0.0;
  case T_STR: return v->s->len != 0;
  case T_LIST: return v->l->lazy || v->l->n != 0;
  case T_DICT: return v->d->n != 0;
  default: return true;
  }
}

static bool is_num(const Value *v) { return v->t == T_INT || v->t == T_FLOAT || v->t == T_BOOL; }
static double num_f(const Value *v) { return v->t == T_FLOAT ? v->f : v->t == T_INT ? (double)v->i : (double)v->b; }
static int64_t num_i(const Value *v) { return v->t == T_INT ? v->i : v->t == T_BOOL ? (int64_t)v->b : (int64_t)v->f; }

static void
float_str(double d, char *out, size_t n)
{
  if (isnan(d)) {
    snprintf(out, n, "nan");
    return;
  }
  if (isinf(d)) {
    snprintf(out, n, d > 0 ? "inf" : "-inf");
    return;
  }
  HnJson *j = hn_json_new_double(d);
  char *s = j ? hn_json_write(j, NULL, NULL) : NULL;
  snprintf(out, n, "%s", s ? s : "0.0");
  free(s);
  hn_json_free(j);
}

/* Python's str.isprintable() for one code point: not a control, format, surrogate,
 * private-use, unassigned or separator character (the ASCII space excepted). */
static bool
py_printable(uint32_t c)
{
  if (c < 0x80)
    return c >= 0x20 && c < 0x7f;
  if (c < 0xA0 || c == 0xAD)
    return false;
  if (c == ' ' || (py_space(c) && c != 0x1C && c != 0x1D && c != 0x1E && c != 0x1F && c != 0x85) ||
      c == 0x2028 || c == 0x2029)
    return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E ||
      (c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E) || (c >= 0x2060 && c <= 0x206F) ||
      c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0xE0000 && c <= 0xE007F))
    return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || c >= 0xF0000)
    return false;
  locale_t l = utf8_ctype_locale();
  return l ? iswprint_l((wint_t)c, l) != 0 : true;
}

static void
repr_str(R *r, Buf *b, const Str *s)
{
  bool has_sq = memchr(s->s, '\'', s->len) != NULL, has_dq = memchr(s->s, '"', s->len) != NULL;
  char q = has_sq && !has_dq ? '"' : '\'';
  buf_addc(&r->c, b, q);
  for (size_t k = 0; k < s->len; k++) {
    unsigned char ch = (unsigned char)s->s[k];
    char tmp[8];
    if (ch == (unsigned char)q || ch == '\\') {
      buf_addc(&r->c, b, '\\');
      buf_addc(&r->c, b, (char)ch);
    } else if (ch == '\n') {
      buf_adds(&r->c, b, "\\n");
    } else if (ch == '\r') {
      buf_adds(&r->c, b, "\\r");
    } else if (ch == '\t') {
      buf_adds(&r->c, b, "\\t");
    } else if (ch < 0x20 || ch == 0x7f) {
      snprintf(tmp, sizeof tmp, "\\x%02x", ch);
      buf_adds(&r->c, b, tmp);
    } else if (ch >= 0x80) {
      size_t adv;
      uint32_t cp = utf8_next(s->s + k, s->len - k, &adv);
      char esc[16];
      if (cp >= 0xDC80 && cp <= 0xDCFF)
        snprintf(esc, sizeof esc, "\\udc%02x", cp & 0xFF);
      else if (py_printable(cp)) {
        buf_add(&r->c, b, s->s + k, adv);
        k += adv - 1;
        continue;
      } else if (cp < 0x100)
        snprintf(esc, sizeof esc, "\\x%02x", cp);
      else if (cp < 0x10000)
        snprintf(esc, sizeof esc, "\\u%04x", cp);
      else
        snprintf(esc, sizeof esc, "\\U%08x", cp);
      buf_adds(&r->c, b, esc);
      k += adv - 1;
    } else {
      buf_addc(&r->c, b, (char)ch);
    }
  }
  buf_addc(&r->c, b, q);
}

static void
repr_buf(R *r, Buf *b, Value v)
{
  if (++r->depth > MAX_EVAL_DEPTH)
    rfail(r, NULL, "value nesting too deep");
  switch (v.t) {
  case T_STR:
    if (v.markup)
      buf_adds(&r->c, b, "Markup(");
    repr_str(r, b, v.s);
    if (v.markup)
      buf_addc(&r->c, b, ')');
    break;
  case T_UNDEF: buf_adds(&r->c, b, "Undefined"); break;
  case T_LIST:
    if (v.l->lazy) {
      buf_adds(&r->c, b, "<generator object>");
      break;
    }
    buf_addc(&r->c, b, v.l->tuple ? '(' : '[');
    for (size_t k = 0; k < v.l->n; k++) {
      if (k)
        buf_adds(&r->c, b, ", ");
      repr_buf(r, b, v.l->items[k]);
    }
    if (v.l->tuple && v.l->n == 1)
      buf_addc(&r->c, b, ',');
    buf_addc(&r->c, b, v.l->tuple ? ')' : ']');
    break;
  case T_DICT:
  case T_NS:
    buf_adds(&r->c, b, v.t == T_NS ? "<Namespace {" : "{");
    for (size_t k = 0; k < v.d->n; k++) {
      if (k)
        buf_adds(&r->c, b, ", ");
      repr_buf(r, b, v.d->keys[k]);
      buf_adds(&r->c, b, ": ");
      repr_buf(r, b, v.d->vals[k]);
    }
    buf_adds(&r->c, b, v.t == T_NS ? "}>" : "}");
    break;
  default: to_str_buf(r, b, v); break;
  }
  r->depth--;
}

static void
to_str_buf(R *r, Buf *b, Value v)
{
  char tmp[64];
  switch (v.t) {
  case T_UNDEF: return;
  case T_NONE: buf_adds(&r->c, b, "None"); return;
  case T_BOOL: buf_adds(&r->c, b, v.b ? "True" : "False"); return;
  case T_INT:
    snprintf(tmp, sizeof tmp, "%lld", (long long)v.i);
    buf_adds(&r->c, b, tmp);
    return;
  case T_FLOAT:
    float_str(v.f, tmp, sizeof tmp);
    buf_adds(&r->c, b, tmp);
    return;
  case T_STR: buf_add(&r->c, b, v.s->s, v.s->len); return;
  case T_LIST:
  case T_DICT:
  case T_NS: repr_buf(r, b, v); return;
  case T_MACRO:
    buf_adds(&r->c, b, "<Macro '");
    buf_adds(&r->c, b, v.m->node->name->s);
    buf_adds(&r->c, b, "'>");
    return;
  case T_FUNC: buf_adds(&r->c, b, "<function>"); return;
  case T_METHOD:
    buf_adds(&r->c, b, "<built-in method ");
    buf_adds(&r->c, b, v.meth->name);
    buf_adds(&r->c, b, ">");
    return;
  case T_LOOP: buf_adds(&r->c, b, "<LoopContext>"); return;
  }
}

static Value
to_str(R *r, Value v)
{
  if (v.t == T_STR)
    return v;
  Buf b = { 0 };
  to_str_buf(r, &b, v);
  return buf_value(&r->c, &b);
}

/* ---- equality and ordering ---- */

/* Values built by a template can nest arbitrarily deep ({% set ns.x = [ns.x] %} in a
 * loop): past this depth, comparison gives up and calls them different. */
#define MAX_COMPARE_DEPTH 1000

static bool values_equal_at(const Value *a, const Value *b, int depth);

static bool
values_equal(const Value *a, const Value *b)
{
  return values_equal_at(a, b, 0);
}

static bool
values_equal_at(const Value *a, const Value *b, int depth)
{
  if (depth > MAX_COMPARE_DEPTH)
    return false;
  if (is_num(a) && is_num(b)) {
    if (a->t == T_FLOAT || b->t == T_FLOAT)
      return num_f(a) == num_f(b);
    return num_i(a) == num_i(b);
  }
  if (a->t != b->t)
    return false;
  switch (a->t) {
  case T_UNDEF:
  case T_NONE: return true;
  case T_STR: return a->s->len == b->s->len && memcmp(a->s->s, b->s->s, a->s->len) == 0;
  case T_LIST:
    if (a->l->lazy || b->l->lazy)
      return a->l == b->l;
    if (a->l->n != b->l->n || a->l->tuple != b->l->tuple)
      return false;
    for (size_t k = 0; k < a->l->n; k++)
      if (!values_equal_at(&a->l->items[k], &b->l->items[k], depth + 1))
        return false;
    return true;
  case T_DICT:
    if (a->d->n != b->d->n)
      return false;
    for (size_t k = 0; k < a->d->n; k++) {
      Value *o = dict_find(b->d, &a->d->keys[k]);
      if (!o || !values_equal_at(&a->d->vals[k], o, depth + 1))
        return false;
    }
    return true;
  case T_NS: return a->d == b->d;
  case T_MACRO: return a->m == b->m;
  case T_FUNC: return a->fn == b->fn;
  case T_LOOP: return a->loop == b->loop;
  default: return false;
  }
}

static int
compare(R *r, const Node *n, const Value *a, const Value *b, const char *opname)
{
  if (a->t == T_UNDEF)
    undef_fail(r, n, a);
  if (b->t == T_UNDEF)
    undef_fail(r, n, b);
  if (is_num(a) && is_num(b)) {
    if (a->t == T_FLOAT || b->t == T_FLOAT) {
      double x = num_f(a), y = num_f(b);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = num_i(a), y = num_i(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a->t == T_STR && b->t == T_STR) {
    int c = memcmp(a->s->s, b->s->s, HN_MIN(a->s->len, b->s->len));
    if (c)
      return c < 0 ? -1 : 1;
    return a->s->len < b->s->len ? -1 : a->s->len > b->s->len;
  }
  if (a->t == T_LIST && b->t == T_LIST && a->l->tuple == b->l->tuple && !a->l->lazy && !b->l->lazy) {
    if (++r->depth > MAX_EVAL_DEPTH)
      rfail(r, n, "values nested too deeply to compare");
    int result = a->l->n < b->l->n ? -1 : a->l->n > b->l->n;
    for (size_t k = 0; k < a->l->n && k < b->l->n; k++) {
      if (!values_equal(&a->l->items[k], &b->l->items[k])) {
        result = compare(r, n, &a->l->items[k], &b->l->items[k], opname);
        break;
      }
    }
    r->depth--;
    return result;
  }
  rfail(r, n, "'%s' not supported between instances of '%s' and '%s'", opname, type_name(a), type_name(b));
}

/* ---- iteration ---- */

static List *
str_chars(R *r, const Str *s)
{
  size_t count = utf8_count(s->s, s->len);
  Value lv = v_list(&r->c, count);
  size_t k = 0, i = 0;
  while (k < s->len) {
    size_t adv;
    utf8_next(s->s + k, s->len - k, &adv);
    lv.l->items[i++] = v_str(&r->c, s->s + k, adv);
    k += adv;
  }
  return lv.l;
}

static List *
iterate(R *r, const Node *n, Value v)
{
  static List empty = { 0 };
  switch (v.t) {
  case T_UNDEF: return &empty;
  case T_LIST: return v.l;
  case T_DICT: {
    Value lv = v_list(&r->c, v.d->n);
    for (size_t k = 0; k < v.d->n; k++)
      lv.l->items[k] = v.d->keys[k];
    return lv.l;
  }
  case T_STR: return str_chars(r, v.s);
  default: rfail(r, n, "'%s' object is not iterable", type_name(&v));
  }
}

/* ---- attribute and item access ---- */

static bool
name_in(const char *name, const char *const *list)
{
  for (; *list; list++)
    if (!strcmp(name, *list))
      return true;
  return false;
}

static const char *const STR_METHODS[] = {
  "strip", "lstrip", "rstrip", "startswith", "endswith", "split", "rsplit", "title", "upper", "lower",
  "capitalize", "replace", "find", "rfind", "count", "join", "splitlines", "isdigit", "isalpha", "isalnum",
  "isspace", "isupper", "islower", "index", "format", "swapcase", "casefold", NULL,
};
static const char *const DICT_METHODS[] = {
  "items", "keys", "values", "get", "update", "pop", "popitem", "setdefault", "clear", "copy", NULL,
};
static const char *const LIST_METHODS[] = {
  "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "index", "count", "copy", NULL,
};

static Value
method_value(R *r, Value self, const char *name)
{
  Value v = { .t = T_METHOD };
  v.meth = xalloc(&r->c, sizeof(Method));
  v.meth->self = self;
  v.meth->name = name;
  return v;
}

static Value
loop_attr(R *r, LoopState *ls, const char *name)
{
  size_t i = ls->index0, len = ls->length;
  if (!strcmp(name, "index")) return v_int((int64_t)i + 1);
  if (!strcmp(name, "index0")) return v_int((int64_t)i);
  if (!strcmp(name, "revindex")) return v_int((int64_t)(len - i));
  if (!strcmp(name, "revindex0")) return v_int((int64_t)(len - i - 1));
  if (!strcmp(name, "first")) return v_bool(i == 0);
  if (!strcmp(name, "last")) return v_bool(i + 1 == len);
  if (!strcmp(name, "length")) return v_int((int64_t)len);
  if (!strcmp(name, "depth")) return v_int((int64_t)ls->depth0 + 1);
  if (!strcmp(name, "depth0")) return v_int((int64_t)ls->depth0);
  if (!strcmp(name, "previtem"))
    return i > 0 ? ls->items->items[i - 1] : make_undef(r, "there is no previous item");
  if (!strcmp(name, "nextitem"))
    return i + 1 < len ? ls->items->items[i + 1] : make_undef(r, "there is no next item");
  if (!strcmp(name, "cycle")) {
    Value self = { .t = T_LOOP };
    self.loop = ls;
    return method_value(r, self, "cycle");
  }
  return make_undef(r, "'LoopContext object' has no attribute '%.100s'", name);
}

static Value
get_attr(R *r, const Node *n, Value obj, const Str *name)
{
  if (obj.t == T_DICT || obj.t == T_NS)
    charge(r, n, obj.d->n / 16);
  switch (obj.t) {
  case T_UNDEF: undef_fail(r, n, &obj);
  case T_DICT: {
    if (name_in(name->s, DICT_METHODS))
      return method_value(r, obj, name->s);
    Value *v = dict_find_str(obj.d, name->s, name->len);
    if (v)
      return *v;
    break;
  }
  case T_NS: {
    Value *v = dict_find_str(obj.d, name->s, name->len);
    if (v)
      return *v;
    break;
  }
  case T_STR:
    if (name_in(name->s, STR_METHODS))
      return method_value(r, obj, name->s);
    break;
  case T_LIST:
    if (name_in(name->s, LIST_METHODS))
      return method_value(r, obj, name->s);
    break;
  case T_LOOP: return loop_attr(r, obj.loop, name->s);
  default: break;
  }
  return make_undef(r, "'%s object' has no attribute '%.100s'", obj.t == T_DICT ? "dict" : type_name(&obj), name->s);
}

static Value
get_item(R *r, const Node *n, Value obj, Value key)
{
  switch (obj.t) {
  case T_UNDEF: undef_fail(r, n, &obj);
  case T_DICT:
  case T_NS: {
    Value *v = dict_find(obj.d, &key);
    if (v)
      return *v;
    if (key.t == T_STR && obj.t == T_DICT && name_in(key.s->s, DICT_METHODS))
      return method_value(r, obj, key.s->s);
    if (key.t == T_STR)
      return make_undef(r, "'dict object' has no attribute '%.100s'", key.s->s);
    return make_undef(r, "'dict object' has no item");
    }
  case T_LIST:
  case T_STR: {
    /* Jinja turns a failed subscript into an undefined value */
    if (obj.t == T_LIST && obj.l->lazy)
      return make_undef(r, "'generator object' has no item");
    if (key.t == T_STR)
      return get_attr(r, n, obj, key.s);
    if (key.t != T_INT && key.t != T_BOOL)
      return make_undef(r, "'%s object' has no item", type_name(&obj));
    int64_t i = num_i(&key);
    if (obj.t == T_LIST) {
      int64_t len = (int64_t)obj.l->n;
      if (i < 0)
        i += len;
      if (i < 0 || i >= len)
        return make_undef(r, "%s object has no element %lld", type_name(&obj), (long long)num_i(&key));
      return obj.l->items[i];
    }
    /* strings index by character */
    bool ascii = true;
    for (size_t k = 0; k < obj.s->len && ascii; k++)
      ascii = (unsigned char)obj.s->s[k] < 0x80;
    if (ascii) {
      int64_t len = (int64_t)obj.s->len;
      if (i < 0)
        i += len;
      if (i < 0 || i >= len)
        return make_undef(r, "str object has no element %lld", (long long)num_i(&key));
      Value ch = v_str(&r->c, obj.s->s + i, 1);
    ch.markup = obj.markup;
    return ch;
    }
    List *chars = str_chars(r, obj.s);
    int64_t len = (int64_t)chars->n;
    if (i < 0)
      i += len;
    if (i < 0 || i >= len)
      return make_undef(r, "str object has no element %lld", (long long)num_i(&key));
    Value ch = chars->items[i];
    ch.markup = obj.markup;
    return ch;
  }
  case T_LOOP:
    if (key.t == T_STR)
      return loop_attr(r, obj.loop, key.s->s);
    break;
  default:
    break;
  }
  return make_undef(r, "'%s object' has no item", type_name(&obj));
}

/* Python slice index adjustment. */
static Value
do_slice(R *r, const Node *n, Value obj, Value vstart, Value vstop, Value vstep)
{
  int64_t step_v = 1;
  if (vstep.t != T_NONE && vstep.t != T_UNDEF) {
    if (vstep.t != T_INT && vstep.t != T_BOOL)
      rfail(r, n, "slice indices must be integers or None");
    step_v = num_i(&vstep);
    if (step_v == 0)
      rfail(r, n, "slice step cannot be zero");
  }
  List *items;
  bool is_str = obj.t == T_STR;
  /* slices bypass Jinja's getitem: Python's TypeError surfaces */
  if (obj.t == T_LIST && obj.l->lazy)
    rfail(r, n, "'generator' object is not subscriptable");
  if (obj.t == T_LIST)
    items = obj.l;
  else if (is_str)
    items = str_chars(r, obj.s);
  else if (obj.t == T_UNDEF)
    undef_fail(r, n, &obj);
  else if (obj.t == T_DICT)
    rfail(r, n, "unhashable type: 'slice'");
  else
    rfail(r, n, "'%s' object is not subscriptable", type_name(&obj));
  int64_t len = (int64_t)items->n;
  int64_t start, stop;
  Value *bounds[2] = { &vstart, &vstop };
  int64_t out[2];
  for (int k = 0; k < 2; k++) {
    Value *b = bounds[k];
    if (b->t == T_NONE || b->t == T_UNDEF) {
      out[k] = k == 0 ? (step_v < 0 ? len - 1 : 0) : (step_v < 0 ? -1 : len);
      continue;
    }
    if (b->t != T_INT && b->t != T_BOOL)
      rfail(r, n, "slice indices must be integers or None");
    int64_t x = num_i(b);
    if (x < 0) {
      x += len;
      if (x < 0)
        x = step_v < 0 ? -1 : 0;
    } else if (x >= len) {
      x = step_v < 0 ? len - 1 : len;
    }
    out[k] = x;
  }
  start = out[0];
  stop = out[1];
  size_t count = 0;
  if (step_v > 0 && start < stop)
    count = (size_t)((stop - start - 1) / step_v + 1);
  else if (step_v < 0 && stop < start)
    count = (size_t)((start - stop - 1) / (-step_v) + 1);
  if (is_str) {
    Buf b = { 0 };
    for (size_t k = 0; k < count; k++) {
      Value *ch = &items->items[start + (int64_t)k * step_v];
      buf_add(&r->c, &b, ch->s->s, ch->s->len);
    }
    Value sv = buf_value(&r->c, &b);
    sv.markup = obj.markup;
    return sv;
  }
  Value res = v_list(&r->c, count);
  res.l->tuple = obj.l->tuple;
  for (size_t k = 0; k < count; k++)
    res.l->items[k] = items->items[start + (int64_t)k * step_v];
  return res;
}

/* ---- arithmetic ---- */

/* markupsafe.escape(): the result is Markup */
static Value
html_escape(R *r, const Str *s)
{
  Buf b = { 0 };
  for (size_t k = 0; k < s->len; k++) {
    char ch = s->s[k];
    const char *rep = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;" : ch == '\'' ? "&#39;" : NULL;
    if (rep)
      buf_adds(&r->c, &b, rep);
    else
      buf_addc(&r->c, &b, ch);
  }
  Value v = buf_value(&r->c, &b);
  v.markup = 1;
  return v;
}

static Value
repeat_value(R *r, const Node *n, Value seq, int64_t times)
{
  if (times < 0)
    times = 0;
  if (seq.t == T_STR) {
    size_t total = xmul(&r->c, seq.s->len, (size_t)times);
    if (total > r->c.arena.limit)
      fail_nomem(&r->c);
    Buf b = { 0 };
    for (int64_t k = 0; k < times; k++)
      buf_add(&r->c, &b, seq.s->s, seq.s->len);
    return buf_value(&r->c, &b);
  }
  size_t total = xmul(&r->c, seq.l->n, (size_t)times);
  Value res = v_list(&r->c, total);
  res.l->tuple = seq.l->tuple;
  for (size_t k = 0; k < total; k++)
    res.l->items[k] = seq.l->items[k % seq.l->n];
  (void)n;
  return res;
}

/* "%s" % x: the conversions templates use (%s %r %d %i %%), no widths or flags. */
static Value
printf_format(R *r, const Node *n, const Str *fmt, Value args)
{
  List single = { .n = 1, .items = &args };
  List *list = args.t == T_LIST && args.l->tuple ? args.l : &single;
  size_t used = 0;
  Buf b = { 0 };
  for (size_t k = 0; k < fmt->len; k++) {
    char ch = fmt->s[k];
    if (ch != '%') {
      buf_addc(&r->c, &b, ch);
      continue;
    }
    if (++k >= fmt->len)
      rfail(r, n, "incomplete format");
    char conv = fmt->s[k];
    if (conv == '%') {
      buf_addc(&r->c, &b, '%');
      continue;
    }
    if (used >= list->n)
      rfail(r, n, "not enough arguments for format string");
    Value v = list->items[used++];
    if (v.t == T_UNDEF)
      undef_fail(r, n, &v);
    if (conv == 's')
      to_str_buf(r, &b, v);
    else if (conv == 'r')
      repr_buf(r, &b, v);
    else if (conv == 'd' || conv == 'i') {
      if (!is_num(&v))
        rfail(r, n, "%%%c format: a number is required, not %s", conv, type_name(&v));
      to_str_buf(r, &b, v_int(v.t == T_FLOAT ? (int64_t)v.f : num_i(&v)));
    } else
      rfail(r, n, "unsupported format character '%c'", conv);
  }
  if (used < list->n)
    rfail(r, n, "not all arguments converted during string formatting");
  return buf_value(&r->c, &b);
}

static const char *
op_symbol(int op)
{
  switch (op) {
  case OP_ADD: return "+";
  case OP_SUB: return "-";
  case OP_MUL: return "*";
  case OP_DIV: return "/";
  case OP_FLOORDIV: return "//";
  case OP_MOD: return "%";
  case OP_POW: return "**";
  default: return "?";
  }
}

static Value
arith(R *r, const Node *n, int op, Value a, Value b)
{
  if (a.t == T_UNDEF)
    undef_fail(r, n, &a);
  if (b.t == T_UNDEF)
    undef_fail(r, n, &b);
  if (is_num(&a) && is_num(&b)) {
    if (a.t != T_FLOAT && b.t != T_FLOAT && op != OP_DIV) {
      int64_t x = num_i(&a), y = num_i(&b), z;
      switch (op) {
      case OP_ADD:
        if (__builtin_add_overflow(x, y, &z))
          rfail(r, n, "integer overflow");
        return v_int(z);
      case OP_SUB:
        if (__builtin_sub_overflow(x, y, &z))
          rfail(r, n, "integer overflow");
        return v_int(z);
      case OP_MUL:
        if (__builtin_mul_overflow(x, y, &z))
          rfail(r, n, "integer overflow");
        return v_int(z);
      case OP_FLOORDIV:
      case OP_MOD: {
        if (y == 0)
          rfail(r, n, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1)
          rfail(r, n, "integer overflow");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          q--;
          m += y;
        }
        return v_int(op == OP_MOD ? m : q);
      }
      case OP_POW: {
        if (y < 0)
          return v_float(pow((double)x, (double)y));
        int64_t result = 1, base = x;
        while (y > 0) {
          if (y & 1)
            if (__builtin_mul_overflow(result, base, &result))
              rfail(r, n, "integer overflow");
          y >>= 1;
          if (y && __builtin_mul_overflow(base, base, &base))
            rfail(r, n, "integer overflow");
        }
        return v_int(result);
      }
      }
    }
    double x = num_f(&a), y = num_f(&b);
    switch (op) {
    case OP_ADD: return v_float(x + y);
    case OP_SUB: return v_float(x - y);
    case OP_MUL: return v_float(x * y);
    case OP_DIV:
      if (y == 0)
        rfail(r, n, "division by zero");
      return v_float(x / y);
    case OP_FLOORDIV: {
      if (y == 0)
        rfail(r, n, "float floor division by zero");
      /* CPython's float_floor_div: derived from fmod, so 2.5 // 0.1 == 24.0 */
      double mod = fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0 && ((y < 0) != (mod < 0)))
        div -= 1.0;
      double floordiv;
      if (div != 0) {
        floordiv = floor(div);
        if (div - floordiv > 0.5)
          floordiv += 1.0;
      } else {
        floordiv = copysign(0.0, x / y);
      }
      return v_float(floordiv);
    }
    case OP_MOD: {
      if (y == 0)
        rfail(r, n, "float modulo");
      double m = fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0)))
        m += y;
      return v_float(m);
    }
    case OP_POW: return v_float(pow(x, y));
    }
  }
  if (op == OP_ADD && a.t == T_STR && b.t == T_STR && (a.markup || b.markup)) {
    Value x = a.markup ? a : html_escape(r, a.s), y = b.markup ? b : html_escape(r, b.s);
    Value res = arith(r, n, OP_ADD, (Value){ .t = T_STR, .s = x.s }, (Value){ .t = T_STR, .s = y.s });
    res.markup = 1;
    return res;
  }
  if (op == OP_ADD && a.t == T_STR && b.t == T_STR) {
    Buf buf = { 0 };
    buf_reserve(&r->c, &buf, a.s->len + b.s->len);
    buf_add(&r->c, &buf, a.s->s, a.s->len);
    buf_add(&r->c, &buf, b.s->s, b.s->len);
    return buf_value(&r->c, &buf);
  }
  if (op == OP_ADD && a.t == T_LIST && b.t == T_LIST && a.l->tuple == b.l->tuple && !a.l->lazy && !b.l->lazy) {
    Value res = v_list(&r->c, a.l->n + b.l->n);
    res.l->tuple = a.l->tuple;
    if (a.l->n)
      memcpy(res.l->items, a.l->items, a.l->n * sizeof(Value));
    if (b.l->n)
      memcpy(res.l->items + a.l->n, b.l->items, b.l->n * sizeof(Value));
    return res;
  }
  if (op == OP_MUL && (a.t == T_STR || (a.t == T_LIST && !a.l->lazy)) && (b.t == T_INT || b.t == T_BOOL)) {
    Value res = repeat_value(r, n, a, num_i(&b));
    res.markup = a.markup;
    return res;
  }
  if (op == OP_MUL && (b.t == T_STR || (b.t == T_LIST && !b.l->lazy)) && (a.t == T_INT || a.t == T_BOOL)) {
    Value res = repeat_value(r, n, b, num_i(&a));
    res.markup = b.markup;
    return res;
  }
  if (op == OP_ADD && (a.t == T_STR || a.t == T_LIST))
    rfail(r, n, "can only concatenate %s (not \"%s\") to %s", type_name(&a), type_name(&b), type_name(&a));
  if (op == OP_MOD && a.t == T_STR)
    return printf_format(r, n, a.s, b);
  rfail(r, n, "unsupported operand type(s) for %s: '%s' and '%s'", op_symbol(op), type_name(&a), type_name(&b));
}

static bool
contains(R *r, const Node *n, Value item, Value container)
{
  charge(r, n, value_size(&container));
  switch (container.t) {
  case T_STR:
    if (item.t != T_STR)
      rfail(r, n, "'in <string>' requires string as left operand, not %s", type_name(&item));
    if (item.s->len == 0)
      return true;
    return memmem(container.s->s, container.s->len, item.s->s, item.s->len) != NULL;
  case T_LIST:
    for (size_t k = 0; k < container.l->n; k++)
      if (values_equal(&container.l->items[k], &item))
        return true;
    return false;
  case T_DICT:
    if ((item.t == T_LIST && !item.l->tuple) || item.t == T_DICT || item.t == T_NS)
      rfail(r, n, "unhashable type: '%s'", type_name(&item));
    return dict_find(container.d, &item) != NULL;
  case T_UNDEF: return false;
  default: rfail(r, n, "argument of type '%s' is not iterable", type_name(&container));
  }
}

/* ---- arguments ---- */

static Value
arg(const Args *a, size_t index, const char *kw, Value def)
{
  if (index < a->npos)
    return a->pos[index];
  for (size_t k = 0; k < a->nkw; k++)
    if (kw && !strcmp(a->kwn[k]->s, kw))
      return a->kwv[k];
  return def;
}

static void
check_args(R *r, const Node *n, const Args *a, size_t max_pos, const char *const *kws, const char *what)
{
  if (a->npos > max_pos)
    rfail(r, n, "%s takes at most %zu positional argument(s), %zu given", what, max_pos, a->npos);
  for (size_t k = 0; k < a->nkw; k++) {
    bool ok = false;
    for (size_t j = 0; kws && kws[j]; j++)
      if (!strcmp(a->kwn[k]->s, kws[j]))
        ok = true;
    if (!ok)
      rfail(r, n, "%s got an unexpected keyword argument '%s'", what, a->kwn[k]->s);
  }
}

static Str *
need_str(R *r, const Node *n, Value v, const char *what)
{
  if (v.t == T_STR)
    return v.s;
  if (v.t == T_UNDEF)
    undef_fail(r, n, &v);
  rfail(r, n, "%s must be a string, not %s", what, type_name(&v));
}

static int64_t
need_int(R *r, const Node *n, Value v, const char *what)
{
  if (v.t == T_INT || v.t == T_BOOL)
    return num_i(&v);
  if (v.t == T_UNDEF)
    undef_fail(r, n, &v);
  rfail(r, n, "%s must be an integer, not %s", what, type_name(&v));
}

/* ---- string helpers ---- */

typedef uint32_t (*CaseFn)(uint32_t);

static Value
map_case(R *r, const Str *s, CaseFn fn)
{
  Buf b = { 0 };
  buf_reserve(&r->c, &b, s->len + 8);
  for (size_t k = 0; k < s->len;) {
    size_t adv;
    uint32_t cp = utf8_next(s->s + k, s->len - k, &adv);
    char tmp[4];
    buf_add(&r->c, &b, tmp, utf8_put(fn(cp), tmp));
    k += adv;
  }
  return buf_value(&r->c, &b);
}

/* Python str.title(): a letter after a non-letter is upper-cased, others lower-cased. */
static Value
py_title(R *r, const Str *s)
{
  Buf b = { 0 };
  bool prev_cased = false;
  for (size_t k = 0; k < s->len;) {
    size_t adv;
    uint32_t cp = utf8_next(s->s + k, s->len - k, &adv);
    char tmp[4];
    bool alpha = cp_alpha(cp);
    uint32_t out = alpha ? (prev_cased ? cp_lower(cp) : cp_upper(cp)) : cp;
    prev_cased = alpha;
    buf_add(&r->c, &b, tmp, utf8_put(out, tmp));
    k += adv;
  }
  return buf_value(&r->c, &b);
}

/* Jinja's title filter: words start after whitespace, '-', '(', '{', '[' or '<'. */
static Value
jinja_title(R *r, const Str *s)
{
  Buf b = { 0 };
  bool at_start = true;
  for (size_t k = 0; k < s->len;) {
    size_t adv;
    uint32_t cp = utf8_next(s->s + k, s->len - k, &adv);
    bool sep = py_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    char tmp[4];
    uint32_t out = sep ? cp : at_start ? cp_upper(cp) : cp_lower(cp);
    at_start = sep;
    buf_add(&r->c, &b, tmp, utf8_put(out, tmp));
    k += adv;
  }
  return buf_value(&r->c, &b);
}

static Value
capitalize(R *r, const Str *s)
{
  Buf b = { 0 };
  bool first = true;
  for (size_t k = 0; k < s->len;) {
    size_t adv;
    uint32_t cp = utf8_next(s->s + k, s->len - k, &adv);
    char tmp[4];
    buf_add(&r->c, &b, tmp, utf8_put(first ? cp_upper(cp) : cp_lower(cp), tmp));
    first = false;
    k += adv;
  }
  return buf_value(&r->c, &b);
}

static bool
char_in_set(uint32_t cp, const Str *chars)
{
  if (!chars)
    return py_space(cp);
  for (size_t k = 0; k < chars->len;) {
    size_t adv;
    if (utf8_next(chars->s + k, chars->len - k, &adv) == cp)
      return true;
    k += adv;
  }
  return false;
}

static Value
strip(R *r, const Str *s, const Str *chars, bool left, bool right)
{
  size_t start = 0, end = s->len;
  if (left) {
    while (start < end) {
      size_t adv;
      uint32_t cp = utf8_next(s->s + start, end - start, &adv);
      if (!char_in_set(cp, chars))
        break;
      start += adv;
    }
  }
  if (right) {
    while (end > start) {
      size_t b = end - 1;
      while (b > start && ((unsigned char)s->s[b] & 0xC0) == 0x80 && end - b < 4)
        b--;
      size_t adv;
      uint32_t cp = utf8_next(s->s + b, end - b, &adv);
      if (b + adv != end) {
        b = end - 1;
        cp = 0xDC00 + (unsigned char)s->s[b];
      }
      if (!char_in_set(cp, chars))
        break;
      end = b;
    }
  }
  return v_str(&r->c, s->s + start, end - start);
}

static Value
replace(R *r, const Str *s, const Str *old, const Str *with, int64_t count)
{
  Buf b = { 0 };
  if (old->len == 0) {
    /* Python inserts `with` between characters and at both ends */
    int64_t done = 0;
    size_t k = 0;
    for (;;) {
      if (count < 0 || done < count) {
        buf_add(&r->c, &b, with->s, with->len);
        done++;
      }
      if (k >= s->len)
        break;
      size_t adv;
      utf8_next(s->s + k, s->len - k, &adv);
      buf_add(&r->c, &b, s->s + k, adv);
      k += adv;
    }
    return buf_value(&r->c, &b);
  }
  size_t k = 0;
  int64_t done = 0;
  while (k < s->len) {
    const char *hit = (count < 0 || done < count) ? memmem(s->s + k, s->len - k, old->s, old->len) : NULL;
    if (!hit) {
      buf_add(&r->c, &b, s->s + k, s->len - k);
      break;
    }
    buf_add(&r->c, &b, s->s + k, (size_t)(hit - (s->s + k)));
    buf_add(&r->c, &b, with->s, with->len);
    k = (size_t)(hit - s->s) + old->len;
    done++;
  }
  return buf_value(&r->c, &b);
}

static Value
split(R *r, const Node *n, const Str *s, const Str *sep, int64_t maxsplit)
{
  size_t cap = 8, count = 0;
  Value *items = xalloc(&r->c, cap * sizeof(Value));
#define PUSH(v)                                                                \
  do {                                                                         \
    if (count == cap) {                                                        \
      Value *ni = xalloc(&r->c, xmul(&r->c, cap * 2, sizeof(Value)));          \
      memcpy(ni, items, count * sizeof(Value));                                \
      items = ni;                                                              \
      cap *= 2;                                                                \
    }                                                                          \
    items[count++] = (v);                                                      \
  } while (0)
  if (sep) {
    if (sep->len == 0)
      rfail(r, n, "empty separator");
    size_t k = 0;
    int64_t done = 0;
    for (;;) {
      const char *hit = (maxsplit < 0 || done < maxsplit) ? memmem(s->s + k, s->len - k, sep->s, sep->len) : NULL;
      if (!hit) {
        PUSH(v_str(&r->c, s->s + k, s->len - k));
        break;
      }
      PUSH(v_str(&r->c, s->s + k, (size_t)(hit - (s->s + k))));
      k = (size_t)(hit - s->s) + sep->len;
      done++;
    }
  } else {
    size_t k = 0;
    int64_t done = 0;
    for (;;) {
      k += leading_space(s->s + k, s->len - k);
      if (k >= s->len)
        break;
      if (maxsplit >= 0 && done >= maxsplit) {
        size_t end = s->len - trailing_space(s->s + k, s->len - k);
        PUSH(v_str(&r->c, s->s + k, end - k));
        break;
      }
      size_t e = k;
      while (e < s->len) {
        size_t adv;
        uint32_t cp = utf8_next(s->s + e, s->len - e, &adv);
        if (py_space(cp))
          break;
        e += adv;
      }
      PUSH(v_str(&r->c, s->s + k, e - k));
      done++;
      k = e;
    }
  }
#undef PUSH
  Value res = { .t = T_LIST };
  res.l = xalloc0(&r->c, sizeof(List));
  res.l->n = count;
  res.l->items = items;
  return res;
}

static Value
list_from(R *r, Value *items, size_t n)
{
  Value res = v_list(&r->c, n);
  if (n)
    memcpy(res.l->items, items, n * sizeof(Value));
  return res;
}

static Value
dict_items(R *r, Dict *d)
{
  Value res = v_list(&r->c, d->n);
  for (size_t k = 0; k < d->n; k++) {
    Value pair = v_list(&r->c, 2);
    pair.l->tuple = true;
    pair.l->items[0] = d->keys[k];
    pair.l->items[1] = d->vals[k];
    res.l->items[k] = pair;
  }
  return res;
}

static size_t
length_of(R *r, const Node *n, Value v)
{
  switch (v.t) {
  case T_STR: return utf8_count(v.s->s, v.s->len);
  case T_LIST:
    if (v.l->lazy)
      rfail(r, n, "object of type 'generator' has no len()");
    return v.l->n;
  case T_DICT: return v.d->n;
  case T_UNDEF: return 0;
  default: rfail(r, n, "object of type '%s' has no len()", type_name(&v));
  }
}

/* ---- tests ---- */

static bool run_test(R *r, const Node *n, const char *name, Value v, const Args *a);

static bool
run_test(R *r, const Node *n, const char *name, Value v, const Args *a)
{
  Value x = arg(a, 0, NULL, UNDEF);
  if (!strcmp(name, "defined")) return v.t != T_UNDEF;
  if (!strcmp(name, "undefined")) return v.t == T_UNDEF;
  if (!strcmp(name, "none")) return v.t == T_NONE;
  if (!strcmp(name, "string")) return v.t == T_STR;
  if (!strcmp(name, "number")) return is_num(&v);
  if (!strcmp(name, "integer")) return v.t == T_INT;
  if (!strcmp(name, "float")) return v.t == T_FLOAT;
  if (!strcmp(name, "boolean")) return v.t == T_BOOL;
  if (!strcmp(name, "true")) return v.t == T_BOOL && v.b;
  if (!strcmp(name, "false")) return v.t == T_BOOL && !v.b;
  if (!strcmp(name, "mapping")) return v.t == T_DICT;
  if (!strcmp(name, "iterable")) return v.t == T_STR || v.t == T_LIST || v.t == T_DICT || v.t == T_UNDEF;
  if (!strcmp(name, "sequence")) return v.t == T_STR || v.t == T_LIST || v.t == T_DICT;
  if (!strcmp(name, "callable")) return v.t == T_MACRO || v.t == T_FUNC || v.t == T_METHOD;
  if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
    /* value % 2 == 1, value % 2 == 0, value % num == 0 with Python's modulo */
    Value divisor = name[0] == 'd' ? x : v_int(2);
    if (!is_num(&v) || !is_num(&divisor)) {
      if (v.t == T_UNDEF)
        undef_fail(r, n, &v);
      rfail(r, n, "test '%s' needs numbers, not %s", name, type_name(is_num(&v) ? &divisor : &v));
    }
    Value m = arith(r, n, OP_MOD, v, divisor);
    double mv = num_f(&m);
    return name[0] == 'o' ? mv == 1.0 : mv == 0.0;
  }
  if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return values_equal(&v, &x);
  if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !values_equal(&v, &x);
  if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) return compare(r, n, &v, &x, "<") < 0;
  if (!strcmp(name, "le") || !strcmp(name, "<=")) return compare(r, n, &v, &x, "<=") <= 0;
  if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) return compare(r, n, &v, &x, ">") > 0;
  if (!strcmp(name, "ge") || !strcmp(name, ">=")) return compare(r, n, &v, &x, ">=") >= 0;
  if (!strcmp(name, "in")) return contains(r, n, v, x);
  if (!strcmp(name, "sameas")) {
    if (v.t != x.t)
      return false;
    if (v.t == T_NONE || v.t == T_UNDEF)
      return true;
    if (v.t == T_BOOL)
      return v.b == x.b;
    if (v.t == T_STR)
      return v.s == x.s;
    if (v.t == T_LIST)
      return v.l == x.l;
    if (v.t == T_DICT || v.t == T_NS)
      return v.d == x.d;
    return values_equal(&v, &x);
  }
  if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
    if (v.t != T_STR)
      rfail(r, n, "test '%s' needs a string", name);
    Value m = map_case(r, v.s, name[0] == 'l' ? cp_lower : cp_upper);
    return m.s->len == v.s->len && memcmp(m.s->s, v.s->s, v.s->len) == 0;
  }
  if (!strcmp(name, "escaped")) return false;
  rfail(r, n, "unknown test '%s'", name);
}

/* ---- JSON output (HF's tojson: json.dumps(ensure_ascii=False)) ---- */

static void merge_sort(R *r, const Node *n, Value *items, Value *keys, size_t count, bool reverse, bool case_sensitive);

typedef struct {
  int64_t indent;        /* < 0: one line */
  const Str *item_sep;   /* NULL: Python's default for the indent mode */
  const Str *key_sep;
  bool sort_keys;
} JsonStyle;

static void
json_out(R *r, const Node *n, Buf *b, Value v, const JsonStyle *st, int level)
{
  int64_t indent = st->indent;
  if (++r->depth > MAX_EVAL_DEPTH)
    rfail(r, n, "value nesting too deep for tojson");
  char tmp[64];
  switch (v.t) {
  case T_NONE: buf_adds(&r->c, b, "null"); break;
  case T_BOOL: buf_adds(&r->c, b, v.b ? "true" : "false"); break;
  case T_INT:
    snprintf(tmp, sizeof tmp, "%lld", (long long)v.i);
    buf_adds(&r->c, b, tmp);
    break;
  case T_FLOAT:
    if (isnan(v.f))
      buf_adds(&r->c, b, "NaN");
    else if (isinf(v.f))
      buf_adds(&r->c, b, v.f > 0 ? "Infinity" : "-Infinity");
    else {
      float_str(v.f, tmp, sizeof tmp);
      buf_adds(&r->c, b, tmp);
    }
    break;
  case T_STR: {
    size_t len;
    char *q = hn_json_quote(v.s->s, v.s->len, r->json_ascii, &len);
    if (!q)
      fail_nomem(&r->c);
    /* copy then free before anything can unwind */
    Str *copy = (Str *)arena_try_alloc(&r->c.arena, sizeof(Str) + len + 1);
    if (copy)
      memcpy(copy->s, q, len);
    free(q);
    if (!copy)
      fail_nomem(&r->c);
    buf_add(&r->c, b, copy->s, len);
    break;
  }
  case T_LIST:
    if (v.l->lazy)
      rfail(r, n, "Object of type generator is not JSON serializable");
    /* fall through */
  case T_DICT: {
    bool obj = v.t == T_DICT;
    size_t count = obj ? v.d->n : v.l->n;
    size_t *order = NULL;
    if (obj && st->sort_keys && count > 1) {
      /* sort_keys: keys must all be strings (Python cannot order mixed types) */
      Value *keys = xalloc(&r->c, xmul(&r->c, count, sizeof(Value)));
      Value *idx = xalloc(&r->c, xmul(&r->c, count, sizeof(Value)));
      for (size_t k = 0; k < count; k++) {
        keys[k] = v.d->keys[k];
        idx[k] = v_int((int64_t)k);
      }
      merge_sort(r, n, idx, keys, count, false, true);
      order = xalloc(&r->c, xmul(&r->c, count, sizeof(size_t)));
      for (size_t k = 0; k < count; k++)
        order[k] = (size_t)idx[k].i;
    }
    buf_addc(&r->c, b, obj ? '{' : '[');
    for (size_t k = 0; k < count; k++) {
      size_t m = k;
      if (obj && order)
        m = order[k];
      if (k) {
        if (st->item_sep)
          buf_add(&r->c, b, st->item_sep->s, st->item_sep->len);
        else
          buf_adds(&r->c, b, indent >= 0 ? "," : ", ");
      }
      if (indent >= 0) {
        buf_addc(&r->c, b, '\n');
        for (int64_t s = 0; s < indent * (level + 1); s++)
          buf_addc(&r->c, b, ' ');
      }
      if (obj) {
        Value key = v.d->keys[m];
        if (key.t == T_STR) {
          json_out(r, n, b, key, st, level + 1);
        } else if (key.t == T_INT || key.t == T_FLOAT || key.t == T_BOOL || key.t == T_NONE) {
          Buf kb = { 0 };
          if (key.t == T_BOOL)
            buf_adds(&r->c, &kb, key.b ? "true" : "false");
          else if (key.t == T_NONE)
            buf_adds(&r->c, &kb, "null");
          else
            to_str_buf(r, &kb, key);
          json_out(r, n, b, buf_value(&r->c, &kb), st, level + 1);
        } else {
          rfail(r, n, "keys must be str, int, float, bool or None, not %s", type_name(&key));
        }
        if (st->key_sep)
          buf_add(&r->c, b, st->key_sep->s, st->key_sep->len);
        else
          buf_adds(&r->c, b, ": ");
        json_out(r, n, b, v.d->vals[m], st, level + 1);
      } else {
        json_out(r, n, b, v.l->items[k], st, level + 1);
      }
    }
    if (indent >= 0 && count) {
      buf_addc(&r->c, b, '\n');
      for (int64_t s = 0; s < indent * level; s++)
        buf_addc(&r->c, b, ' ');
    }
    buf_addc(&r->c, b, obj ? '}' : ']');
    break;
  }
  default:
    rfail(r, n, "Object of type %s is not JSON serializable", type_name(&v));
  }
  r->depth--;
}

/* ---- filters ---- */

static Value call_value(R *r, const Node *n, Value callee, const Args *a);
static Value apply_filter(R *r, const Node *n, const char *name, Value v, const Args *a);
static Value apply_str_filter(R *r, const Node *n, const char *name, Str *s, const Args *a);

/* Jinja's attribute getter for filters: item lookup first, dotted paths, integer parts. */
static Value
attr_path(R *r, const Node *n, Value v, const Str *path)
{
  size_t k = 0;
  while (k <= path->len) {
    const char *dot = memchr(path->s + k, '.', path->len - k);
    size_t e = dot ? (size_t)(dot - path->s) : path->len;
    Str *part = str_new(&r->c, path->s + k, e - k);
    bool digits = part->len > 0;
    for (size_t j = 0; j < part->len; j++)
      digits = digits && part->s[j] >= '0' && part->s[j] <= '9';
    if (v.t == T_UNDEF)
      return v;
    if (digits && part->len < 18) {
      v = get_item(r, n, v, v_int(strtoll(part->s, NULL, 10)));
    } else {
      Value key = { .t = T_STR };
      key.s = part;
      v = get_item(r, n, v, key);
    }
    if (!dot)
      break;
    k = e + 1;
  }
  return v;
}

static Args
args_shift(const Args *a, size_t skip)
{
  Args out = *a;
  if (skip > out.npos)
    skip = out.npos;
  out.pos += skip;
  out.npos -= skip;
  return out;
}

static int
sort_cmp(R *r, const Node *n, Value x, Value y, bool case_sensitive)
{
  step(r, n);
  /* Jinja sorts on one-element key lists, which compare equal items (even two
   * undefined attributes) without calling '<' */
  if (values_equal(&x, &y))
    return 0;
  if (!case_sensitive) {
    if (x.t == T_STR)
      x = map_case(r, x.s, cp_lower);
    if (y.t == T_STR)
      y = map_case(r, y.s, cp_lower);
  }
  return compare(r, n, &x, &y, "<");
}

static void
merge_sort(R *r, const Node *n, Value *items, Value *keys, size_t count, bool reverse, bool case_sensitive)
{
  if (count < 2)
    return;
  Value *tmp_items = xalloc(&r->c, xmul(&r->c, count, sizeof(Value)));
  Value *tmp_keys = xalloc(&r->c, xmul(&r->c, count, sizeof(Value)));
  for (size_t width = 1; width < count; width *= 2) {
    for (size_t lo = 0; lo < count; lo += 2 * width) {
      size_t mid = HN_MIN(lo + width, count), hi = HN_MIN(lo + 2 * width, count);
      size_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi) {
        int c = sort_cmp(r, n, keys[i], keys[j], case_sensitive);
        bool take_right = reverse ? c < 0 : c > 0;
        if (take_right) {
          tmp_items[o] = items[j];
          tmp_keys[o++] = keys[j++];
        } else {
          tmp_items[o] = items[i];
          tmp_keys[o++] = keys[i++];
        }
      }
      while (i < mid) {
        tmp_items[o] = items[i];
        tmp_keys[o++] = keys[i++];
      }
      while (j < hi) {
        tmp_items[o] = items[j];
        tmp_keys[o++] = keys[j++];
      }
    }
    memcpy(items, tmp_items, count * sizeof(Value));
    memcpy(keys, tmp_keys, count * sizeof(Value));
  }
}

static Value
select_items(R *r, const Node *n, Value v, const Args *a, bool by_attr, bool keep)
{
  if (!truthy(&v)) { /* Jinja: `if value:` guards the generator, so none|select is empty */
    Value e = v_list(&r->c, 0);
    e.l->lazy = true;
    return e;
  }
  List *items = iterate(r, n, v);
  Value res = v_list(&r->c, items->n);
  size_t count = 0;
  Value attr = by_attr ? arg(a, 0, NULL, UNDEF) : UNDEF;
  if (by_attr && attr.t != T_STR)
    rfail(r, n, "%s needs an attribute name", keep ? "selectattr" : "rejectattr");
  Args rest = args_shift(a, by_attr ? 1 : 0);
  Value test = arg(&rest, 0, NULL, UNDEF);
  Args targs = args_shift(&rest, 1);
  for (size_t k = 0; k < items->n; k++) {
    step(r, n);
    Value x = items->items[k];
    if (by_attr)
      x = attr_path(r, n, x, attr.s);
    bool ok;
    if (test.t == T_UNDEF)
      ok = truthy(&x);
    else
      ok = run_test(r, n, need_str(r, n, test, "the test name")->s, x, &targs);
    if (ok == keep)
      res.l->items[count++] = items->items[k];
  }
  res.l->n = count;
  res.l->lazy = true;
  return res;
}

static Value
indent_filter(R *r, const Node *n, const Str *s, const Args *a)
{
  Value width = arg(a, 0, "width", v_int(4));
  Value vfirst = arg(a, 1, "first", v_bool(false));
  Value vblank = arg(a, 2, "blank", v_bool(false));
  bool first = truthy(&vfirst);
  bool blank = truthy(&vblank);
  Buf ind = { 0 };
  if (width.t == T_STR) {
    buf_add(&r->c, &ind, width.s->s, width.s->len);
  } else {
    int64_t w = need_int(r, n, width, "indent width");
    for (int64_t k = 0; k < w && k < 4096; k++)
      buf_addc(&r->c, &ind, ' ');
  }
  Buf out = { 0 };
  if (first)
    buf_add(&r->c, &out, ind.data, ind.len);
  /* Python's splitlines() boundaries: \n \r \r\n \v \f \x1c-\x1e \x85 \u2028 \u2029 */
  size_t k = 0;
  bool line_start = false;
  while (k < s->len) {
    size_t adv;
    uint32_t cp = utf8_next(s->s + k, s->len - k, &adv);
    bool nl = cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' || (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 ||
              cp == 0x2028 || cp == 0x2029;
    if (line_start) {
      /* a line that is empty (ends right away) is not indented unless blank */
      if (!nl || blank)
        buf_add(&r->c, &out, ind.data, ind.len);
      line_start = false;
    }
    if (nl) {
      if (cp == '\r' && k + 1 < s->len && s->s[k + 1] == '\n')
        adv = 2;
      buf_addc(&r->c, &out, '\n');
      line_start = true;
    } else {
      buf_add(&r->c, &out, s->s + k, adv);
    }
    k += adv;
  }
  if (line_start && blank)
    buf_add(&r->c, &out, ind.data, ind.len);
  return buf_value(&r->c, &out);
}

static Value
apply_filter(R *r, const Node *n, const char *name, Value v, const Args *a)
{
  step(r, n);
  if (!strcmp(name, "safe")) {
    if (v.t == T_STR && v.markup)
      return v;
    Value m = to_str(r, v);
    m.markup = 1;
    return m;
  }
  if (!strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "forceescape")) {
    if (v.t == T_STR && v.markup && name[0] != 'f')
      return v;
    return html_escape(r, to_str(r, v).s);
  }
  if (!strcmp(name, "length") || !strcmp(name, "count"))
    return v_int((int64_t)length_of(r, n, v));
  if (!strcmp(name, "default") || !strcmp(name, "d")) {
    Value def = arg(a, 0, "default_value", v_str(&r->c, "", 0));
    Value boolean = arg(a, 1, "boolean", v_bool(false));
    if (v.t == T_UNDEF || (truthy(&boolean) && !truthy(&v)))
      return def;
    return v;
  }
  if (!strcmp(name, "string"))
    return to_str(r, v);
  if (!strcmp(name, "tojson")) {
    /* HF's signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
    Value ascii = arg(a, 1, "ensure_ascii", v_bool(false));
    Value ind = arg(a, 0, "indent", NONE);
    Value seps = arg(a, 2, "separators", NONE);
    Value sort = arg(a, 3, "sort_keys", v_bool(false));
    JsonStyle st = { -1, NULL, NULL, truthy(&sort) };
    if (seps.t != T_NONE) {
      if (seps.t != T_LIST || seps.l->n != 2)
        rfail(r, n, "tojson: separators must be a pair of strings");
      st.item_sep = need_str(r, n, seps.l->items[0], "item separator");
      st.key_sep = need_str(r, n, seps.l->items[1], "key separator");
    }
    r->json_ascii = truthy(&ascii);
    st.indent = ind.t == T_NONE ? -1 : need_int(r, n, ind, "indent");
    if (st.indent > 64)
      st.indent = 64;
    Buf b = { 0 };
    json_out(r, n, &b, v, &st, 0);
    return buf_value(&r->c, &b);
  }
  if (!strcmp(name, "list")) {
    List *items = iterate(r, n, v);
    return list_from(r, items->items, items->n);
  }
  if (!strcmp(name, "items")) {
    if (v.t == T_UNDEF)
      return v_list(&r->c, 0);
    if (v.t != T_DICT)
      rfail(r, n, "can only get item pairs from a mapping, not %s", type_name(&v));
    Value items = dict_items(r, v.d);
    items.l->lazy = true;
    return items;
  }
  if (!strcmp(name, "first") || !strcmp(name, "last")) {
    List *items = iterate(r, n, v);
    if (name[0] == 'l' && v.t == T_LIST && v.l->lazy)
      rfail(r, n, "'generator' object is not reversible");
    if (items->n == 0)
      return make_undef(r, "No %s item, sequence was empty.", name);
    return items->items[name[0] == 'f' ? 0 : items->n - 1];
  }
  if (!strcmp(name, "reverse")) {
    if (v.t == T_STR) {
      List *chars = str_chars(r, v.s);
      Buf b = { 0 };
      for (size_t k = chars->n; k > 0; k--)
        buf_add(&r->c, &b, chars->items[k - 1].s->s, chars->items[k - 1].s->len);
      return buf_value(&r->c, &b);
    }
    List *items = iterate(r, n, v);
    Value res = v_list(&r->c, items->n);
    for (size_t k = 0; k < items->n; k++)
      res.l->items[k] = items->items[items->n - 1 - k];
    /* reversed() of a list is an iterator; of a generator, Jinja builds a list */
    res.l->lazy = !(v.t == T_LIST && v.l->lazy);
    return res;
  }
  if (!strcmp(name, "join")) {
    Value sep = arg(a, 0, "d", v_str(&r->c, "", 0));
    Value attr = arg(a, 1, "attribute", NONE);
    Str *s = need_str(r, n, to_str(r, sep), "separator");
    List *items = iterate(r, n, v);
    Buf b = { 0 };
    for (size_t k = 0; k < items->n; k++) {
      if (k)
        buf_add(&r->c, &b, s->s, s->len);
      Value x = items->items[k];
      if (attr.t == T_STR)
        x = attr_path(r, n, x, attr.s);
      to_str_buf(r, &b, x);
    }
    return buf_value(&r->c, &b);
  }
  if (!strcmp(name, "map")) {
    if (!truthy(&v)) {
      Value e = v_list(&r->c, 0);
      e.l->lazy = true;
      return e;
    }
    List *items = iterate(r, n, v);
    Value res = v_list(&r->c, items->n);
    Value attr = arg(a, 99, "attribute", UNDEF);
    Value def = arg(a, 99, "default", UNDEF);
    for (size_t k = 0; k < items->n; k++) {
      step(r, n);
      Value x = items->items[k];
      if (attr.t != T_UNDEF) {
        x = attr_path(r, n, x, to_str(r, attr).s);
        if (x.t == T_UNDEF && def.t != T_UNDEF)
          x = def;
      } else {
        Value fname = arg(a, 0, NULL, UNDEF);
        if (fname.t != T_STR)
          rfail(r, n, "map needs a filter name or attribute=");
        Args rest = args_shift(a, 1);
        rest.nkw = 0;
        x = apply_filter(r, n, fname.s->s, x, &rest);
      }
      res.l->items[k] = x;
    }
    res.l->lazy = true;
    return res;
  }
  if (!strcmp(name, "select")) return select_items(r, n, v, a, false, true);
  if (!strcmp(name, "reject")) return select_items(r, n, v, a, false, false);
  if (!strcmp(name, "selectattr")) return select_items(r, n, v, a, true, true);
  if (!strcmp(name, "rejectattr")) return select_items(r, n, v, a, true, false);
  if (!strcmp(name, "sort") || !strcmp(name, "unique") || !strcmp(name, "min") || !strcmp(name, "max")) {
    bool is_sort = name[0] == 's', is_unique = name[0] == 'u';
    Value rev = is_sort ? arg(a, 0, "reverse", v_bool(false)) : v_bool(false);
    Value cs = arg(a, is_sort ? 1 : 0, "case_sensitive", v_bool(false));
    Value attr = arg(a, is_sort ? 2 : 1, "attribute", NONE);
    List *items = iterate(r, n, v);
    Value res = list_from(r, items->items, items->n);
    Value *keys = xalloc(&r->c, xmul(&r->c, items->n + 1, sizeof(Value)));
    for (size_t k = 0; k < items->n; k++)
      keys[k] = attr.t == T_STR ? attr_path(r, n, items->items[k], attr.s) : items->items[k];
    if (is_unique) {
      size_t count = 0;
      for (size_t k = 0; k < items->n; k++) {
        step(r, n);
        Value key = keys[k];
        if ((key.t == T_LIST && !key.l->tuple) || key.t == T_DICT || key.t == T_NS)
          rfail(r, n, "unhashable type: '%s'", type_name(&key));
        if (!truthy(&cs) && key.t == T_STR)
          key = map_case(r, key.s, cp_lower);
        bool seen = false;
        charge(r, n, k);
        for (size_t j = 0; j < k && !seen; j++) {
          Value other = keys[j];
          if (!truthy(&cs) && other.t == T_STR)
            other = map_case(r, other.s, cp_lower);
          seen = values_equal(&key, &other);
        }
        if (!seen)
          res.l->items[count++] = items->items[k];
      }
      res.l->n = count;
      res.l->lazy = true;
      return res;
    }
    merge_sort(r, n, res.l->items, keys, res.l->n, truthy(&rev), truthy(&cs));
    if (is_sort)
      return res;
    if (res.l->n == 0)
      return make_undef(r, "No aggregated item, sequence was empty.");
    return name[1] == 'i' ? res.l->items[0] : res.l->items[res.l->n - 1];
  }
  if (!strcmp(name, "sum")) {
    Value attr = arg(a, 0, "attribute", NONE);
    Value total = arg(a, 1, "start", v_int(0));
    List *items = iterate(r, n, v);
    for (size_t k = 0; k < items->n; k++)
      total = arith(r, n, OP_ADD, total, attr.t == T_STR ? attr_path(r, n, items->items[k], attr.s) : items->items[k]);
    return total;
  }
  if (!strcmp(name, "abs")) {
    if (v.t == T_INT) {
      if (v.i == INT64_MIN)
        rfail(r, n, "integer overflow");
      return v_int(v.i < 0 ? -v.i : v.i);
    }
    if (v.t == T_BOOL)
      return v_int(v.b);
    if (v.t == T_FLOAT)
      return v_float(fabs(v.f));
    rfail(r, n, "bad operand type for abs(): '%s'", type_name(&v));
  }
  if (!strcmp(name, "round")) {
    Value prec = arg(a, 0, "precision", v_int(0));
    Value method = arg(a, 1, "method", v_cstr(&r->c, "common"));
    if (!is_num(&v))
      rfail(r, n, "round needs a number, not %s", type_name(&v));
    int64_t digits = need_int(r, n, prec, "precision");
    double x = num_f(&v), m = pow(10.0, (double)digits);
    const char *how = need_str(r, n, method, "method")->s;
    /* Python's round() of an int stays an int */
    if (!strcmp(how, "common") && (v.t == T_INT || v.t == T_BOOL) && digits >= 0)
      return v_int(num_i(&v));
    double y;
    if (!strcmp(how, "common") && digits >= 0 && digits <= 60 && isfinite(x) && fabs(x) < 1e16) {
      /* Python's round(): correctly rounded from the exact binary value, ties to even,
       * which is what glibc's printf does */
      char tmp[400];
      locale_t old = uselocale(c_time_locale());
      snprintf(tmp, sizeof tmp, "%.*f", (int)digits, x);
      y = c_strtod(tmp, NULL);
      uselocale(old);
    } else if (!strcmp(how, "common"))
      y = round(x * m) / m;
    else if (!strcmp(how, "floor"))
      y = floor(x * m) / m;
    else if (!strcmp(how, "ceil"))
      y = ceil(x * m) / m;
    else
      rfail(r, n, "method must be common, ceil or floor");
    return v_float(y);
  }
  if ((!strcmp(name, "int") || !strcmp(name, "float")) && v.t == T_UNDEF)
    undef_fail(r, n, &v);
  if (!strcmp(name, "int")) {
    Value def = arg(a, 0, "default", v_int(0));
    if (v.t == T_INT)
      return v;
    if (v.t == T_BOOL)
      return v_int(v.b);
    if (v.t == T_FLOAT)
      return isfinite(v.f) && fabs(v.f) < 9.2e18 ? v_int((int64_t)v.f) : def;
    if (v.t == T_STR) {
      Value t = strip(r, v.s, NULL, true, true);
      char *end;
      errno = 0;
      long long i = strtoll(t.s->s, &end, 10);
      if (t.s->len && *end == '\0' && errno == 0)
        return v_int(i);
      double d = c_strtod(t.s->s, &end);
      if (t.s->len && *end == '\0' && isfinite(d) && fabs(d) < 9.2e18)
        return v_int((int64_t)d);
    }
    return def;
  }
  if (!strcmp(name, "float")) {
    Value def = arg(a, 0, "default", v_float(0.0));
    if (is_num(&v))
      return v_float(num_f(&v));
    if (v.t == T_STR) {
      Value t = strip(r, v.s, NULL, true, true);
      char *end;
      double d = c_strtod(t.s->s, &end);
      if (t.s->len && *end == '\0')
        return v_float(d);
    }
    return def;
  }
  if (!strcmp(name, "attr")) {
    Str *attr = need_str(r, n, arg(a, 0, "name", UNDEF), "attribute name");
    return get_attr(r, n, v, attr);
  }
  if (!strcmp(name, "dictsort")) {
    if (v.t != T_DICT)
      rfail(r, n, "dictsort needs a mapping");
    Value items = dict_items(r, v.d);
    Value *keys = xalloc(&r->c, xmul(&r->c, items.l->n + 1, sizeof(Value)));
    Value by = arg(a, 1, "by", v_cstr(&r->c, "key"));
    for (size_t k = 0; k < items.l->n; k++)
      keys[k] = items.l->items[k].l->items[!strcmp(to_str(r, by).s->s, "value") ? 1 : 0];
    Value cs = arg(a, 0, "case_sensitive", v_bool(false));
    Value rev = arg(a, 2, "reverse", v_bool(false));
    merge_sort(r, n, items.l->items, keys, items.l->n, truthy(&rev), truthy(&cs));
    return items;
  }
  /* string filters: the value is converted with str() first, like Jinja's soft_str */
  if (!strcmp(name, "trim") || !strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") ||
      !strcmp(name, "capitalize") || !strcmp(name, "replace") || !strcmp(name, "indent") ||
      !strcmp(name, "wordcount") || !strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "center") ||
      !strcmp(name, "truncate") || !strcmp(name, "striptags")) {
    if (v.t == T_UNDEF && strcmp(name, "trim") && strcmp(name, "upper") && strcmp(name, "lower"))
      v = v_str(&r->c, "", 0);
    bool mk = v.t == T_STR && v.markup;
    /* Jinja's indent does `s += "\n"` on the value itself: only strings work */
    if (!strcmp(name, "indent") && v.t != T_STR)
      rfail(r, n, "unsupported operand type(s) for +=: '%s' and 'str'", type_name(&v));
    Value res = apply_str_filter(r, n, name, to_str(r, v).s, a);
    /* Markup methods return Markup; replace and title go through plain str */
    if (mk && res.t == T_STR && strcmp(name, "replace") && strcmp(name, "title"))
      res.markup = 1;
    return res;
  }
  rfail(r, n, "no filter named '%s'", name);
}

static Value
apply_str_filter(R *r, const Node *n, const char *name, Str *s, const Args *a)
{
  {
    if (!strcmp(name, "trim")) {
      Value chars = arg(a, 0, "chars", NONE);
      return strip(r, s, chars.t == T_STR ? chars.s : NULL, true, true);
    }
    if (!strcmp(name, "upper")) return map_case(r, s, cp_upper);
    if (!strcmp(name, "lower")) return map_case(r, s, cp_lower);
    if (!strcmp(name, "title")) return jinja_title(r, s);
    if (!strcmp(name, "capitalize")) return capitalize(r, s);
    if (!strcmp(name, "replace")) {
      Str *old = need_str(r, n, arg(a, 0, "old", UNDEF), "old");
      Str *with = need_str(r, n, arg(a, 1, "new", UNDEF), "new");
      Value count = arg(a, 2, "count", NONE);
      return replace(r, s, old, with, count.t == T_NONE ? -1 : need_int(r, n, count, "count"));
    }
    if (!strcmp(name, "indent")) return indent_filter(r, n, s, a);  /* input checked by the caller */
    if (!strcmp(name, "wordcount")) {
      int64_t words = 0;
      bool in_word = false;
      for (size_t k = 0; k < s->len;) {
        size_t adv;
        uint32_t cp = utf8_next(s->s + k, s->len - k, &adv);
        bool w = cp_alpha(cp) || (cp >= '0' && cp <= '9') || cp == '_';
        if (w && !in_word)
          words++;
        in_word = w;
        k += adv;
      }
      return v_int(words);
    }
    if (!strcmp(name, "center")) {
      int64_t width = need_int(r, n, arg(a, 0, "width", v_int(80)), "width");
      int64_t len = (int64_t)utf8_count(s->s, s->len);
      if (width > 1 << 20)
        width = 1 << 20;
      if (width <= len)
        return v_str(&r->c, s->s, s->len);
      /* Python's str.center puts the odd space on the left when the width is odd */
      int64_t total = width - len, left = total / 2 + (total & width & 1);
      Buf b = { 0 };
      for (int64_t k = 0; k < left; k++)
        buf_addc(&r->c, &b, ' ');
      buf_add(&r->c, &b, s->s, s->len);
      for (int64_t k = 0; k < total - left; k++)
        buf_addc(&r->c, &b, ' ');
      return buf_value(&r->c, &b);
    }
    if (!strcmp(name, "escape") || !strcmp(name, "e")) {
      Buf b = { 0 };
      for (size_t k = 0; k < s->len; k++) {
        char ch = s->s[k];
        const char *rep = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;" : ch == '\'' ? "&#39;" : NULL;
        if (rep)
          buf_adds(&r->c, &b, rep);
        else
          buf_addc(&r->c, &b, ch);
      }
      return buf_value(&r->c, &b);
    }
  }
  rfail(r, n, "no filter named '%s'", name);
}

/* ---- methods ---- */

static Value call_str_method(R *r, const Node *n, Method *m, const Args *a);

static Value
call_method(R *r, const Node *n, Method *m, const Args *a)
{
  if (m->self.t == T_STR) {
    Value res = call_str_method(r, n, m, a);
    if (m->self.markup) {
      if (res.t == T_STR && strcmp(m->name, "join") && strcmp(m->name, "format"))
        res.markup = 1;
      else if (res.t == T_LIST && (!strcmp(m->name, "split") || !strcmp(m->name, "rsplit") || !strcmp(m->name, "splitlines")))
        for (size_t k = 0; k < res.l->n; k++)
          res.l->items[k].markup = 1;
    }
    return res;
  }
  return call_str_method(r, n, m, a);
}

static Value
call_str_method(R *r, const Node *n, Method *m, const Args *a)
{
  Value self = m->self;
  const char *name = m->name;
  if (self.t == T_STR) {
    Str *s = self.s;
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
      Value chars = arg(a, 0, "chars", NONE);
      Str *set = chars.t == T_NONE ? NULL : need_str(r, n, chars, "chars");
      return strip(r, s, set, name[0] != 'r', name[0] != 'l');
    }
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
      Value pre = arg(a, 0, NULL, UNDEF);
      List *cands;
      Value one[1] = { pre };
      List single = { .n = 1, .items = one };
      cands = pre.t == T_LIST ? pre.l : &single;
      for (size_t k = 0; k < cands->n; k++) {
        Str *p = need_str(r, n, cands->items[k], name);
        if (p->len <= s->len &&
            memcmp(name[0] == 's' ? s->s : s->s + s->len - p->len, p->s, p->len) == 0)
          return v_bool(true);
      }
      return v_bool(false);
    }
    if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
      Value sep = arg(a, 0, "sep", NONE);
      Value maxsplit = arg(a, 1, "maxsplit", v_int(-1));
      int64_t ms = need_int(r, n, maxsplit, "maxsplit");
      if (name[0] == 'r' && ms >= 0) {
        /* rsplit with a limit: split fully, then re-join the leading parts */
        Value all = split(r, n, s, sep.t == T_NONE ? NULL : need_str(r, n, sep, "sep"), -1);
        if ((int64_t)all.l->n <= ms + 1)
          return all;
        size_t keep_from = all.l->n - (size_t)ms;
        Value res = v_list(&r->c, (size_t)ms + 1);
        Buf head = { 0 };
        for (size_t k = 0; k < keep_from; k++) {
          if (k)
            buf_adds(&r->c, &head, sep.t == T_NONE ? " " : sep.s->s);
          buf_add(&r->c, &head, all.l->items[k].s->s, all.l->items[k].s->len);
        }
        res.l->items[0] = buf_value(&r->c, &head);
        for (size_t k = keep_from; k < all.l->n; k++)
          res.l->items[k - keep_from + 1] = all.l->items[k];
        return res;
      }
      return split(r, n, s, sep.t == T_NONE ? NULL : need_str(r, n, sep, "sep"), ms);
    }
    if (!strcmp(name, "title")) return py_title(r, s);
    if (!strcmp(name, "upper")) return map_case(r, s, cp_upper);
    if (!strcmp(name, "lower") || !strcmp(name, "casefold")) return map_case(r, s, cp_lower);
    if (!strcmp(name, "capitalize")) return capitalize(r, s);
    if (!strcmp(name, "replace")) {
      Value count = arg(a, 2, "count", v_int(-1));
      return replace(r, s, need_str(r, n, arg(a, 0, NULL, UNDEF), "old"), need_str(r, n, arg(a, 1, NULL, UNDEF), "new"),
                     need_int(r, n, count, "count"));
    }
    charge(r, n, s->len / 64);
    if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") || !strcmp(name, "count")) {
      Str *sub = need_str(r, n, arg(a, 0, NULL, UNDEF), "substring");
      if (!strcmp(name, "count")) {
        if (sub->len == 0)
          return v_int((int64_t)utf8_count(s->s, s->len) + 1);
        int64_t c = 0;
        for (const char *p = s->s; (p = memmem(p, s->len - (size_t)(p - s->s), sub->s, sub->len)); p += sub->len)
          c++;
        return v_int(c);
      }
      const char *hit = NULL;
      if (name[0] == 'r') {
        for (size_t k = s->len + 1; k > 0; k--)
          if (k - 1 + sub->len <= s->len && memcmp(s->s + k - 1, sub->s, sub->len) == 0) {
            hit = s->s + k - 1;
            break;
          }
      } else {
        hit = sub->len ? memmem(s->s, s->len, sub->s, sub->len) : s->s;
      }
      if (!hit) {
        if (name[0] == 'i')
          rfail(r, n, "substring not found");
        return v_int(-1);
      }
      return v_int((int64_t)utf8_count(s->s, (size_t)(hit - s->s)));
    }
    if (!strcmp(name, "join")) {
      List *items = iterate(r, n, arg(a, 0, NULL, UNDEF));
      Buf b = { 0 };
      for (size_t k = 0; k < items->n; k++) {
        if (k)
          buf_add(&r->c, &b, s->s, s->len);
        buf_add(&r->c, &b, need_str(r, n, items->items[k], "join item")->s, items->items[k].s->len);
      }
      return buf_value(&r->c, &b);
    }
    if (!strcmp(name, "splitlines")) {
      /* Python's line boundaries; no empty item after a final line break */
      Value res = v_list(&r->c, 0);
      size_t cap = 0, start = 0, k = 0;
      while (k < s->len) {
        size_t adv;
        uint32_t cp = utf8_next(s->s + k, s->len - k, &adv);
        bool nl = cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' || (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 ||
                  cp == 0x2028 || cp == 0x2029;
        if (nl || k + adv >= s->len) {
          size_t end = nl ? k : k + adv;
          if (res.l->n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            Value *items = xalloc(&r->c, xmul(&r->c, ncap, sizeof(Value)));
            if (res.l->n)
              memcpy(items, res.l->items, res.l->n * sizeof(Value));
            res.l->items = items;
            cap = ncap;
          }
          res.l->items[res.l->n++] = v_str(&r->c, s->s + start, end - start);
          if (cp == '\r' && k + 1 < s->len && s->s[k + 1] == '\n')
            adv = 2;
          start = k + adv;
        }
        k += adv;
      }
      return res;
    }
    if (!strncmp(name, "is", 2)) {
      if (s->len == 0)
        return v_bool(false);
      bool all = true, any_cased = false;
      for (size_t k = 0; k < s->len && all;) {
        size_t adv;
        uint32_t cp = utf8_next(s->s + k, s->len - k, &adv);
        if (!strcmp(name, "isdigit")) all = cp >= '0' && cp <= '9';
        else if (!strcmp(name, "isalpha")) all = cp_alpha(cp);
        else if (!strcmp(name, "isalnum")) all = cp_alpha(cp) || (cp >= '0' && cp <= '9');
        else if (!strcmp(name, "isspace")) all = py_space(cp);
        else if (!strcmp(name, "isupper")) { if (cp_lower(cp) != cp) any_cased = true; else if (cp_upper(cp) != cp) all = false; }
        else if (!strcmp(name, "islower")) { if (cp_upper(cp) != cp) any_cased = true; else if (cp_lower(cp) != cp) all = false; }
        k += adv;
      }
      if (!strcmp(name, "isupper") || !strcmp(name, "islower"))
        return v_bool(all && any_cased);
      return v_bool(all);
    }
    if (!strcmp(name, "format")) {
      /* str.format: {} {0} {name} with !s/!r; format specs are not supported */
      Buf b = { 0 };
      size_t auto_index = 0;
      for (size_t k = 0; k < s->len; k++) {
        char ch = s->s[k];
        if ((ch == '{' || ch == '}') && k + 1 < s->len && s->s[k + 1] == ch) {
          buf_addc(&r->c, &b, ch);
          k++;
          continue;
        }
        if (ch == '}')
          rfail(r, n, "Single '}' encountered in format string");
        if (ch != '{') {
          buf_addc(&r->c, &b, ch);
          continue;
        }
        const char *close = memchr(s->s + k, '}', s->len - k);
        if (!close)
          rfail(r, n, "Single '{' encountered in format string");
        size_t fstart = k + 1, fend = (size_t)(close - s->s);
        char conv = 0;
        size_t name_end = fend;
        for (size_t j = fstart; j < fend; j++)
          if (s->s[j] == '!' || s->s[j] == ':') {
            if (s->s[j] == ':')
              rfail(r, n, "format specifications in str.format are not supported");
            if (j + 2 != fend)
              rfail(r, n, "invalid conversion in format string");
            conv = s->s[j + 1];
            name_end = j;
            break;
          }
        Value v;
        if (name_end == fstart) {
          v = arg(a, auto_index++, NULL, UNDEF);
          if (auto_index > a->npos)
            rfail(r, n, "Replacement index %zu out of range for positional args tuple", auto_index - 1);
        } else if (s->s[fstart] >= '0' && s->s[fstart] <= '9') {
          size_t idx = (size_t)strtoul(s->s + fstart, NULL, 10);
          if (idx >= a->npos)
            rfail(r, n, "Replacement index %zu out of range for positional args tuple", idx);
          v = a->pos[idx];
        } else {
          Str *key = str_new(&r->c, s->s + fstart, name_end - fstart);
          v = arg(a, SIZE_MAX, key->s, (Value){ .t = 255 });
          if (v.t == 255)
            rfail(r, n, "KeyError: '%s'", key->s);
        }
        if (v.t == T_UNDEF)
          undef_fail(r, n, &v);
        if (conv == 'r')
          repr_buf(r, &b, v);
        else if (conv == 0 || conv == 's')
          to_str_buf(r, &b, v);
        else
          rfail(r, n, "Unknown conversion specifier %c", conv);
        k = fend;
      }
      return buf_value(&r->c, &b);
    }
    if (!strcmp(name, "swapcase")) {
      Buf b = { 0 };
      for (size_t k = 0; k < s->len;) {
        size_t adv;
        uint32_t cp = utf8_next(s->s + k, s->len - k, &adv);
        uint32_t up = cp_upper(cp);
        char tmp[4];
        buf_add(&r->c, &b, tmp, utf8_put(up != cp ? up : cp_lower(cp), tmp));
        k += adv;
      }
      return buf_value(&r->c, &b);
    }
    rfail(r, n, "str.%s() is not supported", name);
  }
  if (self.t == T_DICT) {
    if (!strcmp(name, "items")) return dict_items(r, self.d);
    if (!strcmp(name, "keys")) return list_from(r, self.d->keys, self.d->n);
    if (!strcmp(name, "values")) return list_from(r, self.d->vals, self.d->n);
    if (!strcmp(name, "get")) {
      Value key = arg(a, 0, NULL, UNDEF);
      Value *v = dict_find(self.d, &key);
      return v ? *v : arg(a, 1, NULL, NONE);
    }
    if (!strcmp(name, "copy")) {
      Value d = v_dict(&r->c);
      for (size_t k = 0; k < self.d->n; k++)
        dict_set(r, d.d, self.d->keys[k], self.d->vals[k]);
      return d;
    }
    rfail(r, n, "access to attribute '%s' of 'dict' object is unsafe", name);
  }
  if (self.t == T_LIST) {
    if (!strcmp(name, "index") || !strcmp(name, "count")) {
      Value x = arg(a, 0, NULL, UNDEF);
      int64_t c = 0;
      for (size_t k = 0; k < self.l->n; k++)
        if (values_equal(&self.l->items[k], &x)) {
          if (name[0] == 'i')
            return v_int((int64_t)k);
          c++;
        }
      if (name[0] == 'i')
        rfail(r, n, "value is not in list");
      return v_int(c);
    }
    if (!strcmp(name, "copy"))
      return list_from(r, self.l->items, self.l->n);
    rfail(r, n, "access to attribute '%s' of '%s' object is unsafe", name, type_name(&self));
  }
  if (self.t == T_LOOP && !strcmp(name, "cycle")) {
    if (a->npos == 0)
      rfail(r, n, "no items for cycling given");
    return a->pos[self.loop->index0 % a->npos];
  }
  rfail(r, n, "'%s' object has no method '%s'", type_name(&self), name);
}

/* ---- calls ---- */

#define MAX_RANGE 100000

static Value
call_builtin(R *r, const Node *n, int fn, const Args *a)
{
  switch (fn) {
  case FN_RANGE: {
    static const char *const none[] = { NULL };
    check_args(r, n, a, 3, none, "range()");
    if (a->npos == 0)
      rfail(r, n, "range expected at least 1 argument, got 0");
    int64_t start = 0, stop, stp = 1;
    if (a->npos == 1) {
      stop = need_int(r, n, a->pos[0], "range() argument");
    } else {
      start = need_int(r, n, a->pos[0], "range() argument");
      stop = need_int(r, n, a->pos[1], "range() argument");
      if (a->npos == 3)
        stp = need_int(r, n, a->pos[2], "range() argument");
    }
    if (stp == 0)
      rfail(r, n, "range() arg 3 must not be zero");
    double count_d = stp > 0 ? ceil(((double)stop - (double)start) / (double)stp)
                             : ceil(((double)start - (double)stop) / (double)-stp);
    if (count_d < 0)
      count_d = 0;
    if (count_d > MAX_RANGE)
      rfail(r, n, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", MAX_RANGE);
    size_t count = (size_t)count_d;
    Value res = v_list(&r->c, count);
    for (size_t k = 0; k < count; k++)
      res.l->items[k] = v_int(start + (int64_t)k * stp);
    return res;
  }
  case FN_NAMESPACE:
  case FN_DICT: {
    Value d = v_dict(&r->c);
    if (fn == FN_NAMESPACE)
      d.t = T_NS;
    for (size_t k = 0; k < a->npos; k++) {
      if (a->pos[k].t != T_DICT)
        rfail(r, n, "%s() positional arguments must be mappings", fn == FN_DICT ? "dict" : "namespace");
      for (size_t j = 0; j < a->pos[k].d->n; j++)
        dict_set(r, d.d, a->pos[k].d->keys[j], a->pos[k].d->vals[j]);
    }
    for (size_t k = 0; k < a->nkw; k++) {
      Value key = { .t = T_STR };
      key.s = a->kwn[k];
      dict_set(r, d.d, key, a->kwv[k]);
    }
    return d;
  }
  case FN_RAISE: {
    Value msg = arg(a, 0, NULL, v_cstr(&r->c, "raise_exception() called"));
    Value s = to_str(r, msg);
    fail_at(&r->c, 0, 0, "%s", s.s->s);
  }
  case FN_STRFTIME: {
    Str *fmt = need_str(r, n, arg(a, 0, NULL, UNDEF), "strftime_now() format");
    struct tm tm;
    if (!localtime_r(&r->now, &tm))
      rfail(r, n, "cannot convert the current time");
    locale_t cloc = c_time_locale();
    size_t cap = 256 + fmt->len * 16;
    if (fmt->len > 1024)
      rfail(r, n, "strftime_now() format too long");
    char *out = xalloc(&r->c, cap);
    /* The format comes from the template by design (strftime_now is part of the HF API). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    size_t len = cloc ? strftime_l(out, cap, fmt->s, &tm, cloc) : strftime(out, cap, fmt->s, &tm);
#pragma GCC diagnostic pop
    return v_str(&r->c, out, len);
  }
  }
  rfail(r, n, "not callable");
}

static Value
call_macro_with(R *r, const Node *n, Macro *m, const Args *a, const Value *caller)
{
  const Node *def = m->node;
  size_t np = def->kwargs.n;
  if (a->npos > np)
    rfail(r, n, "macro '%s' takes not more than %zu argument(s)", def->name->s, np);
  if (++r->macro_depth > HN_CHAT_MAX_DEPTH)
    rfail(r, n, "macro calls nested deeper than %d", HN_CHAT_MAX_DEPTH);
  step(r, n);
  Scope *sc = scope_new(r, m->scope);
  Scope *saved_scope = r->scope;
  for (size_t k = 0; k < a->nkw; k++) {
    bool known = false;
    for (size_t j = 0; j < np; j++)
      if (!strcmp(def->kwnames[j]->s, a->kwn[k]->s))
        known = true;
    if (!known)
      rfail(r, n, "macro '%s' takes no keyword argument '%s'", def->name->s, a->kwn[k]->s);
  }
  for (size_t j = 0; j < np; j++) {
    Value v;
    if (j < a->npos) {
      v = a->pos[j];
    } else {
      v = arg(a, SIZE_MAX, def->kwnames[j]->s, (Value){ .t = 255 });
      if (v.t == 255) {
        if (def->kwargs.items[j]) {
          r->scope = sc;
          v = eval(r, def->kwargs.items[j]);
          r->scope = saved_scope;
        } else {
          v = make_undef(r, "'%.100s' is undefined", def->kwnames[j]->s);
        }
      }
    }
    scope_set(r, sc, def->kwnames[j], v);
  }
  if (caller)
    scope_set_c(r, sc, "caller", *caller);
  Buf out = { 0 };
  Buf *saved_out = r->out;
  r->out = &out;
  r->scope = sc;
  exec_list(r, &def->body, sc);
  r->out = saved_out;
  r->scope = saved_scope;
  r->macro_depth--;
  return buf_value(&r->c, &out);
}

static Value
call_macro(R *r, const Node *n, Macro *m, const Args *a)
{
  return call_macro_with(r, n, m, a, NULL);
}

static Value
call_value(R *r, const Node *n, Value callee, const Args *a)
{
  switch (callee.t) {
  case T_FUNC: return call_builtin(r, n, callee.fn, a);
  case T_MACRO: return call_macro(r, n, callee.m, a);
  case T_METHOD: return call_method(r, n, callee.meth, a);
  case T_UNDEF: undef_fail(r, n, &callee);
  default: rfail(r, n, "'%s' object is not callable", type_name(&callee));
  }
}

static void
eval_args(R *r, const Node *n, Args *a)
{
  a->npos = n->args.n;
  a->nkw = n->kwargs.n;
  a->kwn = n->kwnames;
  a->pos = a->npos ? xalloc(&r->c, a->npos * sizeof(Value)) : NULL;
  a->kwv = a->nkw ? xalloc(&r->c, a->nkw * sizeof(Value)) : NULL;
  for (size_t k = 0; k < a->npos; k++)
    a->pos[k] = eval(r, n->args.items[k]);
  for (size_t k = 0; k < a->nkw; k++)
    a->kwv[k] = eval(r, n->kwargs.items[k]);
}

/* ---- expressions ---- */

static Value
eval_inner(R *r, const Node *n)
{
  switch (n->kind) {
  case E_LIT: return n->lit;
  case E_NAME: return lookup(r, r->scope, n->name);
  case E_LIST:
  case E_TUPLE: {
    Value res = v_list(&r->c, n->args.n);
    res.l->tuple = n->kind == E_TUPLE;
    for (size_t k = 0; k < n->args.n; k++)
      res.l->items[k] = eval(r, n->args.items[k]);
    return res;
  }
  case E_DICT: {
    Value d = v_dict(&r->c);
    for (size_t k = 0; k < n->args.n; k++) {
      Value key = eval(r, n->args.items[k]);
      if (key.t == T_LIST && !key.l->tuple)
        rfail(r, n->args.items[k], "unhashable type: 'list'");
      if (key.t == T_DICT || key.t == T_UNDEF)
        rfail(r, n->args.items[k], "unhashable type: '%s'", type_name(&key));
      dict_set(r, d.d, key, eval(r, n->kwargs.items[k]));
    }
    return d;
  }
  case E_ATTR: return get_attr(r, n, eval(r, n->a), n->name);
  case E_INDEX: return get_item(r, n, eval(r, n->a), eval(r, n->b));
  case E_SLICE: {
    Value obj = eval(r, n->a);
    Value start = n->b ? eval(r, n->b) : NONE;
    Value stop = n->c ? eval(r, n->c) : NONE;
    Value stp = n->args.items[0] ? eval(r, n->args.items[0]) : NONE;
    return do_slice(r, n, obj, start, stop, stp);
  }
  case E_CALL: {
    Value callee = eval(r, n->a);
    Args a;
    eval_args(r, n, &a);
    return call_value(r, n, callee, &a);
  }
  case E_FILTER: {
    Value input = n->a ? eval(r, n->a) : r->block_input;
    Args a;
    eval_args(r, n, &a);
    return apply_filter(r, n, n->name->s, input, &a);
  }
  case E_TEST: {
    Value v = eval(r, n->a);
    Args a;
    eval_args(r, n, &a);
    bool res = run_test(r, n, n->name->s, v, &a);
    return v_bool(res != n->negated);
  }
  case E_UNARY: {
    Value v = eval(r, n->a);
    if (v.t == T_UNDEF)
      undef_fail(r, n, &v);
    if (!is_num(&v))
      rfail(r, n, "bad operand type for unary %s: '%s'", n->op == OP_NEG ? "-" : "+", type_name(&v));
    if (n->op == OP_POS)
      return v.t == T_BOOL ? v_int(v.b) : v;
    if (v.t == T_FLOAT)
      return v_float(-v.f);
    if (num_i(&v) == INT64_MIN)
      rfail(r, n, "integer overflow");
    return v_int(-num_i(&v));
  }
  case E_BIN: return arith(r, n, n->op, eval(r, n->a), eval(r, n->b));
  case E_AND: {
    Value a = eval(r, n->a);
    return truthy(&a) ? eval(r, n->b) : a;
  }
  case E_OR: {
    Value a = eval(r, n->a);
    return truthy(&a) ? a : eval(r, n->b);
  }
  case E_NOT: {
    Value a = eval(r, n->a);
    return v_bool(!truthy(&a));
  }
  case E_CMP: {
    Value left = eval(r, n->a);
    for (size_t k = 0; k < n->args.n; k++) {
      Value right = eval(r, n->args.items[k]);
      bool ok;
      charge(r, n, HN_MIN(value_size(&left), value_size(&right)));
      switch (n->ops[k]) {
      case OP_EQ: ok = values_equal(&left, &right); break;
      case OP_NE: ok = !values_equal(&left, &right); break;
      case OP_LT: ok = compare(r, n, &left, &right, "<") < 0; break;
      case OP_LE: ok = compare(r, n, &left, &right, "<=") <= 0; break;
      case OP_GT: ok = compare(r, n, &left, &right, ">") > 0; break;
      case OP_GE: ok = compare(r, n, &left, &right, ">=") >= 0; break;
      case OP_IN: ok = contains(r, n, left, right); break;
      default: ok = !contains(r, n, left, right); break;
      }
      if (!ok)
        return v_bool(false);
      left = right;
    }
    return v_bool(true);
  }
  case E_COND: {
    Value c = eval(r, n->b);
    if (truthy(&c))
      return eval(r, n->a);
    return n->c ? eval(r, n->c) : make_undef(r, "the inline if-expression has no else");
  }
  case E_CONCAT: {
    Buf b = { 0 };
    for (size_t k = 0; k < n->args.n; k++)
      to_str_buf(r, &b, eval(r, n->args.items[k]));
    return buf_value(&r->c, &b);
  }
  default:
    rfail(r, n, "internal error: not an expression");
  }
}

static Value
eval(R *r, const Node *n)
{
  if (++r->depth > MAX_EVAL_DEPTH)
    rfail(r, n, "the template nests too deeply");
  Value v = eval_inner(r, n);
  r->depth--;
  return v;
}

/* ---- statements ---- */

enum { FLOW_NORMAL = 0, FLOW_BREAK, FLOW_CONTINUE };

static void
assign_targets(R *r, const Node *n, Scope *sc, Value v)
{
  if (n->ntargets == 1) {
    scope_set(r, sc, n->targets[0], v);
    return;
  }
  List *items;
  if (v.t == T_LIST)
    items = v.l;
  else if (v.t == T_STR || v.t == T_DICT)
    items = iterate(r, n, v);
  else
    rfail(r, n, "cannot unpack non-iterable %s object", type_name(&v));
  if (items->n != n->ntargets)
    rfail(r, n, "%s values to unpack (expected %zu)", items->n > n->ntargets ? "too many" : "not enough", n->ntargets);
  for (size_t k = 0; k < n->ntargets; k++)
    scope_set(r, sc, n->targets[k], items->items[k]);
}

static Value
capture(R *r, const NodeList *body, Scope *sc)
{
  Buf out = { 0 };
  Buf *saved = r->out;
  r->out = &out;
  exec_list(r, body, sc);
  r->out = saved;
  return buf_value(&r->c, &out);
}

static int
exec_for(R *r, const Node *n, Scope *sc)
{
  Value seq = eval(r, n->a);
  List *items = iterate(r, n->a, seq);
  Scope *ls = scope_new(r, sc);
  if (n->b) {
    /* the filter sees the loop variables but not `loop`; loop.length counts what passes */
    Value filtered = v_list(&r->c, items->n);
    size_t count = 0;
    for (size_t k = 0; k < items->n; k++) {
      step(r, n);
      ls->n = 0;
      assign_targets(r, n, ls, items->items[k]);
      r->scope = ls;
      Value c = eval(r, n->b);
      r->scope = sc;
      if (truthy(&c))
        filtered.l->items[count++] = items->items[k];
    }
    filtered.l->n = count;
    items = filtered.l;
  }
  LoopState *state = xalloc0(&r->c, sizeof(LoopState));
  state->items = items;
  state->length = items->n;
  /* loop.depth counts recursive loop() calls, which are not supported: always 1 */
  Value loopv = { .t = T_LOOP };
  loopv.loop = state;
  Str *loop_name = str_new(&r->c, "loop", 4);
  /* Jinja clears its "no iteration" flag at the end of the body, so an iteration left
   * with break or continue does not count: the else block still runs. */
  bool completed = false;
  for (size_t k = 0; k < items->n; k++) {
    step(r, n);
    state->index0 = k;
    ls->n = 0; /* each iteration starts with a fresh scope, as in Jinja */
    scope_set(r, ls, loop_name, loopv);
    assign_targets(r, n, ls, items->items[k]);
    r->scope = ls;
    int flow = exec_list(r, &n->body, ls);
    r->scope = sc;
    if (flow == FLOW_NORMAL)
      completed = true;
    if (flow == FLOW_BREAK)
      break;
  }
  if (!completed && n->orelse.n)
    return exec_list(r, &n->orelse, sc);
  return FLOW_NORMAL;
}

static int
exec_node(R *r, const Node *n, Scope *sc)
{
  step(r, n);
  switch (n->kind) {
  case S_TEXT:
    buf_add(&r->c, r->out, n->name->s, n->name->len);
    return FLOW_NORMAL;
  case S_OUTPUT:
    to_str_buf(r, r->out, eval(r, n->a));
    return FLOW_NORMAL;
  case S_IF: {
    Value c = eval(r, n->a);
    return exec_list(r, truthy(&c) ? &n->body : &n->orelse, sc);
  }
  case S_FOR: return exec_for(r, n, sc);
  case S_SET: {
    Value v = eval(r, n->b);
    if (n->a) {
      Value target = lookup(r, sc, n->a->name);
      if (target.t != T_NS)
        rfail(r, n, "cannot assign attribute on non-namespace object");
      Value key = { .t = T_STR };
      key.s = n->name;
      dict_set(r, target.d, key, v);
      return FLOW_NORMAL;
    }
    assign_targets(r, n, sc, v);
    return FLOW_NORMAL;
  }
  case S_SETBLOCK: {
    /* the body of a block set has a scope of its own */
    Value v = capture(r, &n->body, scope_new(r, sc));
    if (n->c) {
      r->block_input = v;
      v = eval(r, n->c);
    }
    scope_set(r, sc, n->targets[0], v);
    return FLOW_NORMAL;
  }
  case S_MACRO: {
    Value m = { .t = T_MACRO };
    m.m = xalloc(&r->c, sizeof(Macro));
    m.m->node = n;
    m.m->scope = sc;
    scope_set(r, sc, n->name, m);
    return FLOW_NORMAL;
  }
  case S_BREAK: return FLOW_BREAK;
  case S_CONTINUE: return FLOW_CONTINUE;
  case S_PASSBLOCK: return exec_list(r, &n->body, sc);
  case S_CALLBLOCK: {
    Value callee = eval(r, n->a->a);
    if (callee.t != T_MACRO)
      rfail(r, n, "{%% call %%} needs a macro, not %s", type_name(&callee));
    Args a;
    eval_args(r, n->a, &a);
    Value caller = { .t = T_MACRO };
    caller.m = xalloc(&r->c, sizeof(Macro));
    caller.m->node = n;
    caller.m->scope = sc;
    to_str_buf(r, r->out, call_macro_with(r, n, callee.m, &a, &caller));
    return FLOW_NORMAL;
  }
  case S_FILTERBLOCK: {
    Value v = capture(r, &n->body, scope_new(r, sc));
    r->block_input = v;
    to_str_buf(r, r->out, eval(r, n->c));
    return FLOW_NORMAL;
  }
  default:
    rfail(r, n, "internal error: not a statement");
  }
}

static int
exec_list(R *r, const NodeList *l, Scope *sc)
{
  if (++r->depth > MAX_EVAL_DEPTH)
    rfail(r, l->n ? l->items[0] : NULL, "the template nests too deeply");
  Scope *saved = r->scope;
  r->scope = sc;
  int flow = FLOW_NORMAL;
  for (size_t k = 0; k < l->n && flow == FLOW_NORMAL; k++)
    flow = exec_node(r, l->items[k], sc);
  r->scope = saved;
  r->depth--;
  return flow;
}

/* ---- entry points ---- */

static Value
from_json(R *r, const HnJson *j, int depth)
{
  if (depth > 512)
    rfail(r, NULL, "input JSON nested too deeply");
  switch (hn_json_type(j)) {
  case HN_JSON_NULL: return NONE;
  case HN_JSON_BOOL: return v_bool(hn_json_get_bool(j));
  case HN_JSON_NUMBER:
    return hn_json_is_integer(j) ? v_int(hn_json_get_int(j)) : v_float(hn_json_get_double(j));
  case HN_JSON_STRING: return v_str(&r->c, hn_json_get_string(j), hn_json_get_string_len(j));
  case HN_JSON_ARRAY: {
    Value l = v_list(&r->c, hn_json_length(j));
    for (size_t k = 0; k < l.l->n; k++)
      l.l->items[k] = from_json(r, hn_json_array_get(j, k), depth + 1);
    return l;
  }
  case HN_JSON_OBJECT: {
    Value d = v_dict(&r->c);
    for (size_t k = 0; k < hn_json_length(j); k++) {
      size_t kl;
      const char *key = hn_json_object_key_at(j, k, &kl);
      dict_set(r, d.d, v_str(&r->c, key, kl), from_json(r, hn_json_object_value_at(j, k), depth + 1));
    }
    return d;
  }
  }
  return NONE;
}

char *
hn_chat_template_render(const HnChatTemplate *tmpl, const HnChatRenderOptions *opts, size_t *out_len, HnError *err)
{
  if (!tmpl || !opts) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "no template or options");
    return NULL;
  }
  if (opts->messages && !hn_json_is_array(opts->messages)) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "messages must be a JSON array");
    return NULL;
  }
  if (opts->extra && !hn_json_is_object(opts->extra)) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "extra variables must be a JSON object");
    return NULL;
  }
  R *r = calloc(1, sizeof *r);
  if (!r) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return NULL;
  }
  HnError local = { 0 };
  r->c.err = err ? err : &local;
  r->c.arena.limit = opts->max_memory ? opts->max_memory : HN_CHAT_DEFAULT_MAX_MEMORY;
  r->max_steps = opts->max_steps ? opts->max_steps : HN_CHAT_DEFAULT_MAX_STEPS;
  r->now = opts->has_now ? opts->now : time(NULL);
  if (setjmp(r->c.jump)) {
    arena_free(&r->c.arena);
    free(r);
    return NULL;
  }
  Buf *out = xalloc0(&r->c, sizeof(Buf));
  out->limit = opts->max_output ? opts->max_output : HN_CHAT_DEFAULT_MAX_OUTPUT;
  r->out = out;
  Scope *root = scope_new(r, NULL);
  r->root = root;
  if (opts->extra)
    for (size_t k = 0; k < hn_json_length(opts->extra); k++) {
      size_t kl;
      const char *key = hn_json_object_key_at(opts->extra, k, &kl);
      scope_set(r, root, str_new(&r->c, key, kl), from_json(r, hn_json_object_value_at(opts->extra, k), 0));
    }
  scope_set_c(r, root, "messages", opts->messages ? from_json(r, opts->messages, 0) : v_list(&r->c, 0));
  scope_set_c(r, root, "bos_token", v_cstr(&r->c, opts->bos_token ? opts->bos_token : ""));
  scope_set_c(r, root, "eos_token", v_cstr(&r->c, opts->eos_token ? opts->eos_token : ""));
  scope_set_c(r, root, "add_generation_prompt", v_bool(opts->add_generation_prompt));
  /* Like a keyword argument of HF's apply_chat_template: given, it wins over extra. */
  if (opts->enable_thinking != HN_CHAT_THINKING_UNSET)
    scope_set_c(r, root, "enable_thinking", v_bool(opts->enable_thinking == HN_CHAT_THINKING_ON));
  r->scope = root;
  exec_list(r, &tmpl->body, root);
  char *result = malloc(out->len + 1);
  if (!result) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
  } else {
    if (out->len)
      memcpy(result, out->data, out->len);
    result[out->len] = '\0';
    if (out_len)
      *out_len = out->len;
  }
  arena_free(&r->c.arena);
  free(r);
  return result;
}

/* ---- which variables a template reads ---- */

static bool node_uses_name(const Node *n, const char *name);

static bool
list_uses_name(const NodeList *l, const char *name)
{
  for (size_t k = 0; k < l->n; k++)
    if (node_uses_name(l->items[k], name))
      return true;
  return false;
}

/* Whether an expression anywhere (macro bodies and defaults included) reads the variable;
 * an attribute of the same name (ns.enable_thinking) or text outside tags does not count. */
static bool
node_uses_name(const Node *n, const char *name)
{
  if (n == NULL)
    return false;
  if (n->kind == E_NAME && n->name != NULL && strcmp(n->name->s, name) == 0)
    return true;
  return node_uses_name(n->a, name) || node_uses_name(n->b, name) || node_uses_name(n->c, name)
         || list_uses_name(&n->args, name) || list_uses_name(&n->kwargs, name)
         || list_uses_name(&n->body, name) || list_uses_name(&n->orelse, name);
}

bool
hn_chat_template_uses_variable(const HnChatTemplate *tmpl, const char *name)
{
  return tmpl != NULL && name != NULL && list_uses_name(&tmpl->body, name);
}

/* ---- fallback: ChatML ---- */

typedef struct {
  char *data;
  size_t len, cap;
  bool failed;
} MBuf;

static void
mbuf_add(MBuf *b, const char *s, size_t n)
{
  if (b->failed)
    return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
      b->failed = true;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

/* Appends [start, end) to the growable range list; false when memory ran out. */
static bool
ranges_add(HnTextRange **ranges, size_t *n, size_t *cap, size_t start, size_t end)
{
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    HnTextRange *r = realloc(*ranges, c * sizeof *r);
    if (!r)
      return false;
    *ranges = r;
    *cap = c;
  }
  (*ranges)[(*n)++] = (HnTextRange) { start, end };
  return true;
}

char *
hn_chat_render_fallback_ranges(const HnJson *messages, bool add_generation_prompt, size_t *out_len,
                               HnTextRange **ranges_out, size_t *n_ranges_out, HnError *err)
{
  if (ranges_out)
    *ranges_out = NULL;
  if (n_ranges_out)
    *n_ranges_out = 0;
  if (messages && !hn_json_is_array(messages)) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "messages must be a JSON array");
    return NULL;
  }
  MBuf b = { 0 };
  HnTextRange *ranges = NULL;
  size_t n_ranges = 0, cap_ranges = 0;
  mbuf_add(&b, "", 0);
  for (size_t k = 0; k < hn_json_length(messages); k++) {
    const HnJson *m = hn_json_array_get(messages, k);
    const HnJson *role = hn_json_object_get(m, "role");
    const HnJson *content = hn_json_object_get(m, "content");
    mbuf_add(&b, "<|im_start|>", 12);
    if (hn_json_is_string(role))
      mbuf_add(&b, hn_json_get_string(role), hn_json_get_string_len(role));
    mbuf_add(&b, "\n", 1);
    size_t content_start = b.len;
    if (hn_json_is_string(content)) {
      mbuf_add(&b, hn_json_get_string(content), hn_json_get_string_len(content));
    } else if (content && !hn_json_is_null(content)) {
      size_t len;
      char *j = hn_json_write(content, NULL, &len);
      if (j)
        mbuf_add(&b, j, len);
      else
        b.failed = true;
      free(j);
    }
    if (ranges_out && !b.failed && b.len > content_start &&
        !ranges_add(&ranges, &n_ranges, &cap_ranges, content_start, b.len))
      b.failed = true;
    mbuf_add(&b, "<|im_end|>\n", 11);
  }
  if (add_generation_prompt)
    mbuf_add(&b, "<|im_start|>assistant\n", 22);
  if (b.failed) {
    free(b.data);
    free(ranges);
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return NULL;
  }
  if (out_len)
    *out_len = b.len;
  if (ranges_out) {
    *ranges_out = ranges;
    *n_ranges_out = n_ranges;
  }
  return b.data;
}

char *
hn_chat_render_fallback(const HnJson *messages, bool add_generation_prompt, size_t *out_len, HnError *err)
{
  return hn_chat_render_fallback_ranges(messages, add_generation_prompt, out_len, NULL, NULL, err);
}
