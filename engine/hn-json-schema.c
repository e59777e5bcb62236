/* hn-json-schema.c — JSON Schema (subset) to GBNF.
 *
 * The schema is read by a small private JSON reader (the converter needs the raw text of
 * numbers and the written order of object members, and nothing else), then every schema
 * node becomes a GBNF expression; objects, arrays, references and integer ranges get
 * rules of their own.
 */
#include "hn-json-schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================ JSON reader ======== */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } JType;

typedef struct JNode JNode;
struct JNode {
  JType type;
  bool b;
  double num;
  char *str;      /* J_STR: decoded UTF-8; J_NUM: the lexeme */
  size_t str_len;
  JNode **items;  /* J_ARR items, J_OBJ values */
  char **keys;    /* J_OBJ */
  size_t n;
};

typedef struct {
  const char *s;
  size_t len, pos;
  int depth;
  HnError *err;
  bool failed;
} JReader;

static bool jerr(JReader *r, const char *msg)
{
  if (!r->failed) {
    r->failed = true;
    int line = 1, col = 1;
    for (size_t i = 0; i < r->pos && i < r->len; i++) {
      if (r->s[i] == '\n') {
        line++;
        col = 1;
      } else {
        col++;
      }
    }
    hn_error_set(r->err, HN_ERR_FORMAT, "JSON schema line %d, column %d: %s", line, col, msg);
  }
  return false;
}

static void
jfree(JNode *n)
{
  if (n == NULL)
    return;
  for (size_t i = 0; i < n->n; i++) {
    jfree(n->items[i]);
    if (n->keys)
      free(n->keys[i]);
  }
  free(n->items);
  free(n->keys);
  free(n->str);
  free(n);
}

static void
jskip(JReader *r)
{
  while (r->pos < r->len &&
         (r->s[r->pos] == ' ' || r->s[r->pos] == '\t' || r->s[r->pos] == '\n' || r->s[r->pos] == '\r'))
    r->pos++;
}

static bool
put_utf8(char *out, size_t *n, uint32_t cp)
{
  if (cp < 0x80) {
    out[(*n)++] = (char) cp;
  } else if (cp < 0x800) {
    out[(*n)++] = (char) (0xC0 | (cp >> 6));
    out[(*n)++] = (char) (0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out[(*n)++] = (char) (0xE0 | (cp >> 12));
    out[(*n)++] = (char) (0x80 | ((cp >> 6) & 0x3F));
    out[(*n)++] = (char) (0x80 | (cp & 0x3F));
  } else if (cp <= 0x10FFFF) {
    out[(*n)++] = (char) (0xF0 | (cp >> 18));
    out[(*n)++] = (char) (0x80 | ((cp >> 12) & 0x3F));
    out[(*n)++] = (char) (0x80 | ((cp >> 6) & 0x3F));
    out[(*n)++] = (char) (0x80 | (cp & 0x3F));
  } else {
    return false;
  }
  return true;
}

static bool
jhex4(JReader *r, uint32_t *out)
{
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    if (r->pos >= r->len)
      return jerr(r, "truncated \\u escape");
    char c = r->s[r->pos++];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0)
      return jerr(r, "bad \\u escape");
    v = v * 16 + (uint32_t) d;
  }
  *out = v;
  return true;
}

static char *
jstring(JReader *r, size_t *len_out)
{
  r->pos++; /* quote */
  size_t cap = 16, n = 0;
  char *out = malloc(cap);
  if (!out)
    return jerr(r, "out of memory"), NULL;
  for (;;) {
    if (n + 8 > cap) {
      cap *= 2;
      char *g = realloc(out, cap);
      if (!g) {
        free(out);
        return jerr(r, "out of memory"), NULL;
      }
      out = g;
    }
    if (r->pos >= r->len) {
      free(out);
      return jerr(r, "unterminated string"), NULL;
    }
    unsigned char c = (unsigned char) r->s[r->pos++];
    if (c == '"')
      break;
    if (c < 0x20) {
      free(out);
      return jerr(r, "control character in string"), NULL;
    }
    if (c != '\\') {
      out[n++] = (char) c;
      continue;
    }
    if (r->pos >= r->len) {
      free(out);
      return jerr(r, "unterminated string"), NULL;
    }
    char e = r->s[r->pos++];
    uint32_t cp;
    switch (e) {
    case '"': out[n++] = '"'; break;
    case '\\': out[n++] = '\\'; break;
    case '/': out[n++] = '/'; break;
    case 'b': out[n++] = '\b'; break;
    case 'f': out[n++] = '\f'; break;
    case 'n': out[n++] = '\n'; break;
    case 'r': out[n++] = '\r'; break;
    case 't': out[n++] = '\t'; break;
    case 'u':
      if (!jhex4(r, &cp)) {
        free(out);
        return NULL;
      }
      if (cp >= 0xD800 && cp <= 0xDBFF && r->pos + 1 < r->len && r->s[r->pos] == '\\' &&
          r->s[r->pos + 1] == 'u') {
        uint32_t lo;
        r->pos += 2;
        if (!jhex4(r, &lo)) {
          free(out);
          return NULL;
        }
        if (lo < 0xDC00 || lo > 0xDFFF) {
          free(out);
          return jerr(r, "unpaired surrogate"), NULL;
        }
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      } else if (cp >= 0xD800 && cp <= 0xDFFF) {
        free(out);
        return jerr(r, "unpaired surrogate"), NULL;
      }
      put_utf8(out, &n, cp);
      break;
    default:
      free(out);
      return jerr(r, "bad escape in string"), NULL;
    }
  }
  out[n] = '\0';
  *len_out = n;
  return out;
}

static JNode *jvalue(JReader *r);

static bool
jpush(JNode *n, JNode *item, char *key, size_t *cap)
{
  if (n->n == *cap) {
    size_t c = *cap ? *cap * 2 : 4;
    JNode **it = realloc(n->items, c * sizeof *it);
    if (!it)
      return false;
    n->items = it;
    if (n->type == J_OBJ) {
      char **k = realloc(n->keys, c * sizeof *k);
      if (!k)
        return false;
      n->keys = k;
    }
    *cap = c;
  }
  n->items[n->n] = item;
  if (n->type == J_OBJ)
    n->keys[n->n] = key;
  n->n++;
  return true;
}

static JNode *
jvalue(JReader *r)
{
  jskip(r);
  if (r->pos >= r->len)
    return jerr(r, "unexpected end of input"), NULL;
  JNode *n = calloc(1, sizeof *n);
  if (!n)
    return jerr(r, "out of memory"), NULL;
  char c = r->s[r->pos];
  size_t cap = 0;
  if (c == '{' || c == '[') {
    if (++r->depth > 64) {
      free(n);
      return jerr(r, "nested too deeply"), NULL;
    }
    n->type = c == '{' ? J_OBJ : J_ARR;
    char close = c == '{' ? '}' : ']';
    r->pos++;
    jskip(r);
    if (r->pos < r->len && r->s[r->pos] == close) {
      r->pos++;
      r->depth--;
      return n;
    }
    for (;;) {
      char *key = NULL;
      jskip(r);
      if (n->type == J_OBJ) {
        if (r->pos >= r->len || r->s[r->pos] != '"') {
          jfree(n);
          return jerr(r, "expected a member name"), NULL;
        }
        size_t kl;
        key = jstring(r, &kl);
        if (!key) {
          jfree(n);
          return NULL;
        }
        jskip(r);
        if (r->pos >= r->len || r->s[r->pos] != ':') {
          free(key);
          jfree(n);
          return jerr(r, "expected ':'"), NULL;
        }
        r->pos++;
      }
      JNode *item = jvalue(r);
      if (!item || !jpush(n, item, key, &cap)) {
        free(key);
        jfree(item);
        jfree(n);
        return item ? (jerr(r, "out of memory"), NULL) : NULL;
      }
      jskip(r);
      if (r->pos < r->len && r->s[r->pos] == ',') {
        r->pos++;
        continue;
      }
      if (r->pos < r->len && r->s[r->pos] == close) {
        r->pos++;
        r->depth--;
        return n;
      }
      jfree(n);
      return jerr(r, n->type == J_OBJ ? "expected ',' or '}'" : "expected ',' or ']'"), NULL;
    }
  }
  if (c == '"') {
    n->type = J_STR;
    n->str = jstring(r, &n->str_len);
    if (!n->str) {
      free(n);
      return NULL;
    }
    return n;
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    size_t start = r->pos;
    if (r->s[r->pos] == '-')
      r->pos++;
    while (r->pos < r->len && strchr("0123456789.eE+-", r->s[r->pos]))
      r->pos++;
    n->type = J_NUM;
    n->str_len = r->pos - start;
    n->str = malloc(n->str_len + 1);
    if (!n->str) {
      free(n);
      return jerr(r, "out of memory"), NULL;
    }
    memcpy(n->str, r->s + start, n->str_len);
    n->str[n->str_len] = '\0';
    char *end;
    n->num = strtod(n->str, &end);
    if (*end != '\0') {
      jfree(n);
      return jerr(r, "bad number"), NULL;
    }
    return n;
  }
  static const struct { const char *word; JType type; bool b; } words[] = {
    { "true", J_BOOL, true }, { "false", J_BOOL, false }, { "null", J_NULL, false } };
  for (size_t i = 0; i < 3; i++) {
    size_t wl = strlen(words[i].word);
    if (r->len - r->pos >= wl && memcmp(r->s + r->pos, words[i].word, wl) == 0) {
      r->pos += wl;
      n->type = words[i].type;
      n->b = words[i].b;
      return n;
    }
  }
  free(n);
  return jerr(r, "unexpected character"), NULL;
}

static const JNode *
jget(const JNode *obj, const char *key)
{
  if (obj == NULL || obj->type != J_OBJ)
    return NULL;
  for (size_t i = 0; i < obj->n; i++)
    if (strcmp(obj->keys[i], key) == 0)
      return obj->items[i];
  return NULL;
}

/* ============================================================ GBNF writer ======== */

typedef struct {
  char *s;
  size_t len, cap;
  bool oom;
} Buf;

static void
buf_add(Buf *b, const char *text, size_t n)
{
  if (b->oom)
    return;
  if (b->len + n + 1 > b->cap) {
    size_t c = b->cap ? b->cap : 256;
    while (c < b->len + n + 1)
      c *= 2;
    char *g = realloc(b->s, c);
    if (!g) {
      b->oom = true;
      return;
    }
    b->s = g;
    b->cap = c;
  }
  memcpy(b->s + b->len, text, n);
  b->len += n;
  b->s[b->len] = '\0';
}

static void buf_printf(Buf *b, const char *fmt, ...) HN_PRINTF(2, 3);

static void
buf_printf(Buf *b, const char *fmt, ...)
{
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t) n < sizeof tmp) {
    buf_add(b, tmp, (size_t) n);
    return;
  }
  char *big = malloc((size_t) n + 1);
  if (!big) {
    b->oom = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t) n + 1, fmt, ap);
  va_end(ap);
  buf_add(b, big, (size_t) n);
  free(big);
}

static char *
buf_take(Buf *b)
{
  if (b->oom) {
    free(b->s);
    return NULL;
  }
  if (b->s == NULL)
    return strdup("");
  return b->s;
}

typedef struct {
  const JNode *root;
  Buf rules;
  int counter;
  bool need_string, need_number, need_integer, need_value, need_char;
  /* $ref targets already given a rule */
  const JNode **ref_nodes;
  char **ref_names;
  size_t n_refs;
  int depth;
  HnError *err;
  bool failed;
} Conv;

static bool cerr(Conv *c, const char *fmt, ...) HN_PRINTF(2, 3);

static bool
cerr(Conv *c, const char *fmt, ...)
{
  if (c->failed)
    return false;
  c->failed = true;
  va_list ap;
  va_start(ap, fmt);
  hn_error_setv(c->err, HN_ERR_UNSUPPORTED, fmt, ap);
  va_end(ap);
  return false;
}

/* A GBNF string literal for the given bytes. */
static void
add_literal(Buf *b, const char *s, size_t n)
{
  buf_add(b, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char) s[i];
    if (ch == '"' || ch == '\\') {
      char e[2] = { '\\', (char) ch };
      buf_add(b, e, 2);
    } else if (ch == '\n') {
      buf_add(b, "\\n", 2);
    } else if (ch < 0x20 || ch == 0x7F) {
      buf_printf(b, "\\x%02X", ch);
    } else {
      buf_add(b, (const char *) &ch, 1);
    }
  }
  buf_add(b, "\"", 1);
}

/* Compact JSON text of a value (for const and enum). */
static void
json_serialize(Buf *b, const JNode *n)
{
  switch (n->type) {
  case J_NULL: buf_add(b, "null", 4); break;
  case J_BOOL: n->b ? buf_add(b, "true", 4) : buf_add(b, "false", 5); break;
  case J_NUM: buf_add(b, n->str, n->str_len); break;
  case J_STR:
    buf_add(b, "\"", 1);
    for (size_t i = 0; i < n->str_len; i++) {
      unsigned char ch = (unsigned char) n->str[i];
      if (ch == '"' || ch == '\\') {
        char e[2] = { '\\', (char) ch };
        buf_add(b, e, 2);
      } else if (ch == '\n') {
        buf_add(b, "\\n", 2);
      } else if (ch == '\r') {
        buf_add(b, "\\r", 2);
      } else if (ch == '\t') {
        buf_add(b, "\\t", 2);
      } else if (ch < 0x20) {
        buf_printf(b, "\\u%04x", ch);
      } else {
        buf_add(b, (const char *) &ch, 1);
      }
    }
    buf_add(b, "\"", 1);
    break;
  case J_ARR:
  case J_OBJ:
    buf_add(b, n->type == J_ARR ? "[" : "{", 1);
    for (size_t i = 0; i < n->n; i++) {
      if (i)
        buf_add(b, ",", 1);
      if (n->type == J_OBJ) {
        JNode key = { .type = J_STR, .str = n->keys[i], .str_len = strlen(n->keys[i]) };
        json_serialize(b, &key);
        buf_add(b, ":", 1);
      }
      json_serialize(b, n->items[i]);
    }
    buf_add(b, n->type == J_ARR ? "]" : "}", 1);
    break;
  }
}

static void
literal_of_value(Buf *out, const JNode *v)
{
  Buf tmp = { 0 };
  json_serialize(&tmp, v);
  if (tmp.oom)
    out->oom = true;
  else
    add_literal(out, tmp.s ? tmp.s : "", tmp.len);
  free(tmp.s);
}

static char *
new_rule_name(Conv *c, const char *hint)
{
  char name[64];
  snprintf(name, sizeof name, "%s-%d", hint, ++c->counter);
  return strdup(name);
}

static void
emit_rule(Conv *c, const char *name, const char *body)
{
  buf_printf(&c->rules, "%s ::= %s\n", name, body);
}

static bool gen(Conv *c, const JNode *schema, Buf *out);

/* ---- integer ranges -------------------------------------------------------------- */

/* digits of equal-length decimal strings lo <= hi, as a GBNF expression */
static void
range_same_len(Buf *b, const char *lo, const char *hi, size_t n)
{
  if (n == 0)
    return;
  bool lo_rest_zero = true, hi_rest_nine = true;
  for (size_t i = 1; i < n; i++) {
    if (lo[i] != '0')
      lo_rest_zero = false;
    if (hi[i] != '9')
      hi_rest_nine = false;
  }
  if (lo[0] == hi[0]) {
    buf_printf(b, "\"%c\"", lo[0]);
    if (n > 1) {
      buf_add(b, " ", 1);
      range_same_len(b, lo + 1, hi + 1, n - 1);
    }
    return;
  }
  if (lo_rest_zero && hi_rest_nine) {
    buf_printf(b, "[%c-%c]", lo[0], hi[0]);
    if (n > 1)
      buf_printf(b, " [0-9]{%zu}", n - 1);
    return;
  }
  char nines[32], zeros[32];
  memset(nines, '9', n);
  memset(zeros, '0', n);
  buf_add(b, "(", 1);
  /* lo[0] then at least lo[1..] */
  buf_printf(b, "\"%c\"", lo[0]);
  if (n > 1) {
    buf_add(b, " ", 1);
    range_same_len(b, lo + 1, nines, n - 1);
  }
  if (hi[0] - lo[0] >= 2) {
    buf_printf(b, " | [%c-%c]", lo[0] + 1, hi[0] - 1);
    if (n > 1)
      buf_printf(b, " [0-9]{%zu}", n - 1);
  }
  buf_printf(b, " | \"%c\"", hi[0]);
  if (n > 1) {
    buf_add(b, " ", 1);
    range_same_len(b, zeros, hi + 1, n - 1);
  }
  buf_add(b, ")", 1);
}

#define MAX_INT_DIGITS 18

/* non-negative integers in [lo, hi]; hi < 0 means unbounded */
static void
range_nonneg(Buf *b, long long lo, long long hi)
{
  char los[32], his[32];
  snprintf(los, sizeof los, "%lld", lo);
  size_t dl = strlen(los);
  size_t dh = MAX_INT_DIGITS;
  if (hi >= 0) {
    snprintf(his, sizeof his, "%lld", hi);
    dh = strlen(his);
  }
  buf_add(b, "(", 1);
  bool first = true;
  for (size_t d = dl; d <= dh; d++) {
    char a[32], z[32];
    if (d == dl)
      memcpy(a, los, d + 1);
    else {
      a[0] = '1';
      memset(a + 1, '0', d - 1);
      a[d] = '\0';
    }
    if (hi >= 0 && d == dh)
      memcpy(z, his, d + 1);
    else {
      memset(z, '9', d);
      z[d] = '\0';
    }
    if (!first)
      buf_add(b, " | ", 3);
    first = false;
    if (hi < 0 && d > dl) {
      /* every longer number: one rule for all lengths */
      buf_printf(b, "[1-9] [0-9]{%zu,%d}", d - 1, MAX_INT_DIGITS - 1);
      break;
    }
    range_same_len(b, a, z, d);
  }
  buf_add(b, ")", 1);
}

static bool
get_bound(Conv *c, const JNode *s, const char *key, const char *excl_key, bool upper,
          bool *has, long long *value)
{
  const JNode *v = jget(s, key);
  const JNode *ex = jget(s, excl_key);
  *has = false;
  if (v && v->type == J_NUM) {
    double x = upper ? floor(v->num) : ceil(v->num);
    if (fabs(x) > 1e17)
      return cerr(c, "%s %s is too large", key, v->str);
    *value = (long long) x;
    *has = true;
    if (ex && ex->type == J_BOOL && ex->b && x == v->num)
      *value += upper ? -1 : 1;
  } else if (v) {
    return cerr(c, "%s must be a number", key);
  }
  if (ex && ex->type == J_NUM) {
    double x = upper ? ceil(ex->num) - 1 : floor(ex->num) + 1;
    if (fabs(x) > 1e17)
      return cerr(c, "%s %s is too large", excl_key, ex->str);
    long long e = (long long) x;
    if (!*has || (upper ? e < *value : e > *value))
      *value = e;
    *has = true;
  }
  return true;
}

static bool
gen_integer(Conv *c, const JNode *s, Buf *out)
{
  bool has_lo, has_hi;
  long long lo = 0, hi = 0;
  if (!get_bound(c, s, "minimum", "exclusiveMinimum", false, &has_lo, &lo) ||
      !get_bound(c, s, "maximum", "exclusiveMaximum", true, &has_hi, &hi))
    return false;
  if (!has_lo && !has_hi) {
    c->need_integer = true;
    buf_add(out, "integer", 7);
    return true;
  }
  if (has_lo && has_hi && lo > hi)
    return cerr(c, "minimum is above maximum: no integer fits");
  Buf e = { 0 };
  bool first = true;
  /* negative part: "-" then magnitudes */
  if (!has_lo || lo < 0) {
    long long mag_lo = has_hi && hi < 0 ? -hi : 1;
    long long mag_hi = has_lo ? -lo : -1;
    buf_add(&e, "\"-\" ", 4);
    range_nonneg(&e, mag_lo, mag_hi);
    first = false;
  }
  if (!has_hi || hi >= 0) {
    long long a = has_lo && lo > 0 ? lo : 0;
    if (!first)
      buf_add(&e, " | ", 3);
    range_nonneg(&e, a, has_hi ? hi : -1);
  }
  char *name = new_rule_name(c, "int");
  if (!name || e.oom) {
    free(name);
    free(e.s);
    return cerr(c, "out of memory");
  }
  emit_rule(c, name, e.s);
  buf_add(out, name, strlen(name));
  free(name);
  free(e.s);
  return true;
}

/* ---- strings, arrays, objects ----------------------------------------------------- */

static bool
get_count(Conv *c, const JNode *s, const char *key, long long *out, bool *has)
{
  const JNode *v = jget(s, key);
  *has = false;
  if (!v)
    return true;
  if (v->type != J_NUM || v->num < 0 || v->num != floor(v->num) || v->num > 10000)
    return cerr(c, "%s must be an integer between 0 and 10000", key);
  *out = (long long) v->num;
  *has = true;
  return true;
}

static bool
gen_string(Conv *c, const JNode *s, Buf *out)
{
  if (jget(s, "pattern"))
    return cerr(c, "the keyword 'pattern' is not supported");
  long long mn = 0, mx = 0;
  bool has_mn, has_mx;
  if (!get_count(c, s, "minLength", &mn, &has_mn) || !get_count(c, s, "maxLength", &mx, &has_mx))
    return false;
  if (!has_mn && !has_mx) {
    c->need_string = true;
    buf_add(out, "string", 6);
    return true;
  }
  if (has_mx && mn > mx)
    return cerr(c, "minLength is above maxLength");
  c->need_char = true;
  if (has_mx)
    buf_printf(out, "( \"\\\"\" char{%lld,%lld} \"\\\"\" )", mn, mx);
  else
    buf_printf(out, "( \"\\\"\" char{%lld,} \"\\\"\" )", mn);
  return true;
}

static bool
gen_array(Conv *c, const JNode *s, Buf *out)
{
  const JNode *items = jget(s, "items");
  if (items && items->type == J_ARR)
    return cerr(c, "tuple 'items' (an array of schemas) is not supported");
  if (jget(s, "prefixItems"))
    return cerr(c, "the keyword 'prefixItems' is not supported");
  long long mn = 0, mx = 0;
  bool has_mn, has_mx;
  if (!get_count(c, s, "minItems", &mn, &has_mn) || !get_count(c, s, "maxItems", &mx, &has_mx))
    return false;
  if (has_mx && mn > mx)
    return cerr(c, "minItems is above maxItems");
  Buf item = { 0 };
  if (items) {
    if (!gen(c, items, &item)) {
      free(item.s);
      return false;
    }
  } else {
    c->need_value = true;
    buf_add(&item, "value", 5);
  }
  char *item_name = new_rule_name(c, "item");
  if (!item_name || item.oom) {
    free(item_name);
    free(item.s);
    return cerr(c, "out of memory");
  }
  emit_rule(c, item_name, item.s);
  free(item.s);
  Buf e = { 0 };
  if (has_mx && mx == 0) {
    buf_add(&e, "\"[\" \"]\"", 7);
  } else {
    buf_add(&e, "\"[\" ", 4);
    if (mn == 0)
      buf_add(&e, "( ", 2);
    buf_printf(&e, "%s ( \",\" %s )", item_name, item_name);
    long long more_min = mn > 0 ? mn - 1 : 0;
    if (has_mx)
      buf_printf(&e, "{%lld,%lld}", more_min, mx - 1);
    else
      buf_printf(&e, "{%lld,}", more_min);
    if (mn == 0)
      buf_add(&e, " )?", 3);
    buf_add(&e, " \"]\"", 4);
  }
  char *name = new_rule_name(c, "array");
  if (!name || e.oom) {
    free(name);
    free(item_name);
    free(e.s);
    return cerr(c, "out of memory");
  }
  emit_rule(c, name, e.s);
  buf_add(out, name, strlen(name));
  free(name);
  free(item_name);
  free(e.s);
  return true;
}

static bool
is_required(const JNode *required, const char *key)
{
  if (!required || required->type != J_ARR)
    return false;
  for (size_t i = 0; i < required->n; i++)
    if (required->items[i]->type == J_STR && strcmp(required->items[i]->str, key) == 0)
      return true;
  return false;
}

static bool
gen_object(Conv *c, const JNode *s, Buf *out)
{
  const JNode *props = jget(s, "properties");
  const JNode *required = jget(s, "required");
  const JNode *addl = jget(s, "additionalProperties");
  if (props && props->type != J_OBJ)
    return cerr(c, "'properties' must be an object");
  if (required && required->type != J_ARR)
    return cerr(c, "'required' must be an array");
  if (jget(s, "patternProperties"))
    return cerr(c, "the keyword 'patternProperties' is not supported");
  size_t n = props ? props->n : 0;
  if (required)
    for (size_t i = 0; i < required->n; i++) {
      const JNode *r = required->items[i];
      bool found = false;
      for (size_t k = 0; k < n && r->type == J_STR; k++)
        found = found || strcmp(props->keys[k], r->str) == 0;
      if (!found)
        return cerr(c, "required property '%s' is not listed in 'properties'",
                    r->type == J_STR ? r->str : "?");
    }
  /* extra members: allowed when additionalProperties says so, or when no properties are
   * listed at all ({"type": "object"} means any object) */
  bool extra = addl ? !(addl->type == J_BOOL && !addl->b) : n == 0;
  char *extra_kv = NULL;
  if (extra) {
    Buf v = { 0 };
    if (addl && addl->type == J_OBJ) {
      if (!gen(c, addl, &v)) {
        free(v.s);
        return false;
      }
    } else {
      c->need_value = true;
      buf_add(&v, "value", 5);
    }
    c->need_string = true;
    Buf kv = { 0 };
    buf_printf(&kv, "string \":\" %s", v.s ? v.s : "");
    free(v.s);
    extra_kv = new_rule_name(c, "extra-kv");
    if (!extra_kv || kv.oom) {
      free(kv.s);
      free(extra_kv);
      return cerr(c, "out of memory");
    }
    emit_rule(c, extra_kv, kv.s);
    free(kv.s);
  }
  /* kv_i, then F_i (nothing written yet) and C_i (something written: commas first) */
  int base = ++c->counter;
  for (size_t i = 0; i < n; i++) {
    Buf v = { 0 };
    if (!gen(c, props->items[i], &v)) {
      free(v.s);
      free(extra_kv);
      return false;
    }
    Buf kv = { 0 };
    JNode key = { .type = J_STR, .str = props->keys[i], .str_len = strlen(props->keys[i]) };
    literal_of_value(&kv, &key);
    buf_printf(&kv, " \":\" %s", v.s ? v.s : "");
    free(v.s);
    char name[64];
    snprintf(name, sizeof name, "obj-%d-kv%zu", base, i);
    emit_rule(c, name, kv.s ? kv.s : "");
    free(kv.s);
  }
  for (size_t i = n + 1; i-- > 0;) {
    Buf f = { 0 }, cc = { 0 };
    if (i == n) {
      if (extra) {
        buf_printf(&f, "( %s ( \",\" %s )* )?", extra_kv, extra_kv);
        buf_printf(&cc, "( \",\" %s )*", extra_kv);
      } else {
        buf_add(&f, "\"\"", 2);
        buf_add(&cc, "\"\"", 2);
      }
    } else {
      bool req = is_required(required, props->keys[i]);
      buf_printf(&f, "obj-%d-kv%zu obj-%d-c%zu", base, i, base, i + 1);
      if (!req)
        buf_printf(&f, " | obj-%d-f%zu", base, i + 1);
      buf_printf(&cc, "\",\" obj-%d-kv%zu obj-%d-c%zu", base, i, base, i + 1);
      if (!req)
        buf_printf(&cc, " | obj-%d-c%zu", base, i + 1);
    }
    char name[64];
    snprintf(name, sizeof name, "obj-%d-f%zu", base, i);
    emit_rule(c, name, f.s ? f.s : "");
    snprintf(name, sizeof name, "obj-%d-c%zu", base, i);
    emit_rule(c, name, cc.s ? cc.s : "");
    free(f.s);
    free(cc.s);
  }
  free(extra_kv);
  buf_printf(out, "( \"{\" obj-%d-f0 \"}\" )", base);
  return true;
}

/* ---- dispatch -------------------------------------------------------------------- */

static bool
gen_ref(Conv *c, const char *ref, Buf *out)
{
  const char *name = NULL;
  const JNode *defs = NULL;
  if (strncmp(ref, "#/definitions/", 14) == 0) {
    name = ref + 14;
    defs = jget(c->root, "definitions");
  } else if (strncmp(ref, "#/$defs/", 8) == 0) {
    name = ref + 8;
    defs = jget(c->root, "$defs");
  } else if (strcmp(ref, "#") == 0) {
    defs = NULL;
  } else {
    return cerr(c, "$ref '%s' is not supported (only #, #/definitions/... and #/$defs/...)", ref);
  }
  const JNode *target = name ? jget(defs, name) : c->root;
  if (target == NULL)
    return cerr(c, "$ref '%s' does not resolve", ref);
  for (size_t i = 0; i < c->n_refs; i++)
    if (c->ref_nodes[i] == target) {
      buf_add(out, c->ref_names[i], strlen(c->ref_names[i]));
      return true;
    }
  const JNode **rn = realloc(c->ref_nodes, (c->n_refs + 1) * sizeof *rn);
  if (rn)
    c->ref_nodes = rn;
  char **nn = realloc(c->ref_names, (c->n_refs + 1) * sizeof *nn);
  if (nn)
    c->ref_names = nn;
  char *rule = new_rule_name(c, "ref");
  if (!rn || !nn || !rule) {
    free(rule);
    return cerr(c, "out of memory");
  }
  /* register before generating, so that a recursive schema refers to itself */
  c->ref_nodes[c->n_refs] = target;
  c->ref_names[c->n_refs] = rule;
  c->n_refs++;
  Buf body = { 0 };
  if (!gen(c, target, &body)) {
    free(body.s);
    return false;
  }
  emit_rule(c, rule, body.s ? body.s : "\"\"");
  free(body.s);
  buf_add(out, rule, strlen(rule));
  return true;
}

static bool
gen_alternatives(Conv *c, const JNode *list, const char *kw, Buf *out)
{
  if (list->type != J_ARR || list->n == 0)
    return cerr(c, "'%s' must be a non-empty array", kw);
  buf_add(out, "( ", 2);
  for (size_t i = 0; i < list->n; i++) {
    if (i)
      buf_add(out, " | ", 3);
    if (!gen(c, list->items[i], out))
      return false;
  }
  buf_add(out, " )", 2);
  return true;
}

static bool
gen_type(Conv *c, const JNode *s, const char *type, Buf *out)
{
  if (strcmp(type, "string") == 0)
    return gen_string(c, s, out);
  if (strcmp(type, "integer") == 0)
    return gen_integer(c, s, out);
  if (strcmp(type, "number") == 0) {
    if (jget(s, "minimum") || jget(s, "maximum") || jget(s, "exclusiveMinimum") ||
        jget(s, "exclusiveMaximum"))
      return cerr(c, "minimum/maximum on type 'number' is not supported (use 'integer')");
    if (jget(s, "multipleOf"))
      return cerr(c, "the keyword 'multipleOf' is not supported");
    c->need_number = true;
    buf_add(out, "number", 6);
    return true;
  }
  if (strcmp(type, "boolean") == 0) {
    buf_add(out, "( \"true\" | \"false\" )", 20);
    return true;
  }
  if (strcmp(type, "null") == 0) {
    buf_add(out, "\"null\"", 6);
    return true;
  }
  if (strcmp(type, "array") == 0)
    return gen_array(c, s, out);
  if (strcmp(type, "object") == 0)
    return gen_object(c, s, out);
  return cerr(c, "unknown type '%s'", type);
}

static bool
gen(Conv *c, const JNode *s, Buf *out)
{
  if (c->failed)
    return false;
  if (++c->depth > 64)
    return cerr(c, "schema nested too deeply");
  bool ok = false;
  if (s->type == J_BOOL) {
    if (!s->b) {
      cerr(c, "the schema 'false' allows nothing");
      goto done;
    }
    c->need_value = true;
    buf_add(out, "value", 5);
    ok = true;
    goto done;
  }
  if (s->type != J_OBJ) {
    cerr(c, "a schema must be an object or a boolean");
    goto done;
  }
  const JNode *v;
  if ((v = jget(s, "$ref"))) {
    ok = v->type == J_STR ? gen_ref(c, v->str, out) : cerr(c, "$ref must be a string");
    goto done;
  }
  if ((v = jget(s, "const"))) {
    literal_of_value(out, v);
    ok = true;
    goto done;
  }
  if ((v = jget(s, "enum"))) {
    if (v->type != J_ARR || v->n == 0) {
      cerr(c, "'enum' must be a non-empty array");
      goto done;
    }
    buf_add(out, "( ", 2);
    for (size_t i = 0; i < v->n; i++) {
      if (i)
        buf_add(out, " | ", 3);
      literal_of_value(out, v->items[i]);
    }
    buf_add(out, " )", 2);
    ok = true;
    goto done;
  }
  if ((v = jget(s, "anyOf"))) {
    ok = gen_alternatives(c, v, "anyOf", out);
    goto done;
  }
  if ((v = jget(s, "oneOf"))) {
    ok = gen_alternatives(c, v, "oneOf", out);
    goto done;
  }
  if ((v = jget(s, "allOf"))) {
    if (v->type != J_ARR || v->n != 1) {
      cerr(c, "'allOf' is supported with exactly one schema");
      goto done;
    }
    ok = gen(c, v->items[0], out);
    goto done;
  }
  if (jget(s, "not") || jget(s, "if") || jget(s, "dependentSchemas") || jget(s, "dependencies")) {
    cerr(c, "conditional keywords (not, if, dependencies) are not supported");
    goto done;
  }
  v = jget(s, "type");
  if (v == NULL) {
    /* no type: infer from the keywords present, else any value */
    if (jget(s, "properties") || jget(s, "additionalProperties") || jget(s, "required"))
      ok = gen_object(c, s, out);
    else if (jget(s, "items") || jget(s, "minItems") || jget(s, "maxItems"))
      ok = gen_array(c, s, out);
    else {
      c->need_value = true;
      buf_add(out, "value", 5);
      ok = true;
    }
    goto done;
  }
  if (v->type == J_STR) {
    ok = gen_type(c, s, v->str, out);
    goto done;
  }
  if (v->type == J_ARR && v->n > 0) {
    buf_add(out, "( ", 2);
    for (size_t i = 0; i < v->n; i++) {
      if (v->items[i]->type != J_STR) {
        cerr(c, "'type' entries must be strings");
        goto done;
      }
      if (i)
        buf_add(out, " | ", 3);
      if (!gen_type(c, s, v->items[i]->str, out))
        goto done;
    }
    buf_add(out, " )", 2);
    ok = true;
    goto done;
  }
  cerr(c, "'type' must be a string or an array of strings");
done:
  c->depth--;
  return ok && !c->failed;
}

static const char primitives_char[] =
  "char ::= [^\"\\\\\\x00-\\x1F\\x7F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n";
static const char primitives_string[] = "string ::= \"\\\"\" char* \"\\\"\"\n";
static const char primitives_number[] =
  "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?\n";
static const char primitives_integer[] = "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,17} )\n";
static const char primitives_value[] =
  "value ::= any-object | any-array | string | number | \"true\" | \"false\" | \"null\"\n"
  "any-object ::= \"{\" ( string \":\" value ( \",\" string \":\" value )* )? \"}\"\n"
  "any-array ::= \"[\" ( value ( \",\" value )* )? \"]\"\n";

char *
hn_json_schema_to_gbnf(const char *schema_json, size_t len, HnError *err)
{
  if (schema_json == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "no JSON schema"), NULL;
  JReader r = { .s = schema_json, .len = len, .err = err };
  JNode *root = jvalue(&r);
  if (root) {
    jskip(&r);
    if (r.pos < r.len) {
      jerr(&r, "trailing characters after the schema");
      jfree(root);
      root = NULL;
    }
  }
  if (root == NULL)
    return NULL;
  Conv c = { .root = root, .err = err };
  Buf top = { 0 };
  char *result = NULL;
  if (gen(&c, root, &top)) {
    Buf all = { 0 };
    buf_printf(&all, "root ::= %s\n", top.s ? top.s : "\"\"");
    buf_add(&all, c.rules.s ? c.rules.s : "", c.rules.len);
    if (c.need_value) {
      c.need_string = c.need_number = true;
      buf_add(&all, primitives_value, strlen(primitives_value));
    }
    if (c.need_string) {
      c.need_char = true;
      buf_add(&all, primitives_string, strlen(primitives_string));
    }
    if (c.need_char)
      buf_add(&all, primitives_char, strlen(primitives_char));
    if (c.need_number)
      buf_add(&all, primitives_number, strlen(primitives_number));
    if (c.need_integer)
      buf_add(&all, primitives_integer, strlen(primitives_integer));
    if (c.rules.oom || top.oom)
      all.oom = true;
    result = buf_take(&all);
    if (result == NULL)
      hn_error_set(err, HN_ERR_NOMEM, "out of memory");
  }
  free(top.s);
  free(c.rules.s);
  for (size_t i = 0; i < c.n_refs; i++)
    free(c.ref_names[i]);
  free(c.ref_names);
  free(c.ref_nodes);
  jfree(root);
  return result;
}
