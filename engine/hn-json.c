/* hn-json.c — JSON value tree, strict parser and Python-compatible writer.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-json.h"
#include "hn-unicode.h"
#include "hn-array.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct HnJson {
  HnJsonType type;
  bool is_int;
  bool b;
  int64_t i;
  double d;
  /* STRING: bytes/len.  ARRAY/OBJECT: items/len/cap, and for objects keys/key_lens plus a
   * hash index (slot = member index + 1) once large enough to matter. */
  char *s;
  size_t len;
  size_t cap;
  HnJson **items;
  char **keys;
  size_t *key_lens;
  uint32_t *index;
  size_t index_cap;
};

/* Objects below this size are searched linearly: cheaper than hashing. */
#define INDEX_MIN 16

/* Parsing and formatting numbers must not follow the process locale (a GTK app sets
 * LC_NUMERIC, and "1.5" must not become "1,5"). */
static locale_t
c_locale(void)
{
  static locale_t loc;
  locale_t l = __atomic_load_n(&loc, __ATOMIC_ACQUIRE);
  if (l == (locale_t)0) {
    l = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t expected = (locale_t)0;
    if (!__atomic_compare_exchange_n(&loc, &expected, l, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      freelocale(l);
      l = expected;
    }
  }
  return l;
}

/* ---- construction ------------------------------------------------------------------ */

static HnJson *
new_value(HnJsonType type)
{
  HnJson *v = calloc(1, sizeof *v);
  if (v)
    v->type = type;
  return v;
}

HnJson *hn_json_new_null(void) { return new_value(HN_JSON_NULL); }

HnJson *
hn_json_new_bool(bool b)
{
  HnJson *v = new_value(HN_JSON_BOOL);
  if (v)
    v->b = b;
  return v;
}

HnJson *
hn_json_new_int(int64_t i)
{
  HnJson *v = new_value(HN_JSON_NUMBER);
  if (v) {
    v->is_int = true;
    v->i = i;
    v->d = (double)i;
  }
  return v;
}

HnJson *
hn_json_new_double(double d)
{
  HnJson *v = new_value(HN_JSON_NUMBER);
  if (v)
    v->d = d;
  return v;
}

HnJson *
hn_json_new_string_len(const char *s, size_t len)
{
  HnJson *v = new_value(HN_JSON_STRING);
  if (!v)
    return NULL;
  v->s = malloc(len + 1);
  if (!v->s) {
    free(v);
    return NULL;
  }
  if (len)
    memcpy(v->s, s, len);
  v->s[len] = '\0';
  v->len = len;
  return v;
}

HnJson *hn_json_new_string(const char *s) { return hn_json_new_string_len(s, s ? strlen(s) : 0); }
HnJson *hn_json_new_array(void) { return new_value(HN_JSON_ARRAY); }
HnJson *hn_json_new_object(void) { return new_value(HN_JSON_OBJECT); }

void
hn_json_free(HnJson *v)
{
  if (!v)
    return;
  for (size_t k = 0; k < v->len && v->items; k++)
    hn_json_free(v->items[k]);
  if (v->keys)
    for (size_t k = 0; k < v->len; k++)
      free(v->keys[k]);
  free(v->items);
  free(v->keys);
  free(v->key_lens);
  free(v->index);
  free(v->s);
  free(v);
}

static bool
grow(HnJson *v)
{
  if (v->len < v->cap)
    return true;
  /* an object's keys and their lengths grow with its items, under the one capacity */
  size_t cap;
  if (!hn_array_grown_cap(v->cap, v->len + 1, sizeof *v->key_lens, 4, &cap) ||
      !HN_ARRAY_RESIZE(v->items, cap))
    return false;
  if (v->type == HN_JSON_OBJECT &&
      (!HN_ARRAY_RESIZE(v->keys, cap) || !HN_ARRAY_RESIZE(v->key_lens, cap)))
    return false;
  v->cap = cap;
  return true;
}

bool
hn_json_array_append(HnJson *array, HnJson *item)
{
  if (!array || array->type != HN_JSON_ARRAY || !item || !grow(array)) {
    hn_json_free(item);
    return false;
  }
  array->items[array->len++] = item;
  return true;
}

static uint64_t
hash_bytes(const char *s, size_t len)
{
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t k = 0; k < len; k++)
    h = (h ^ (unsigned char)s[k]) * 1099511628211ull;
  return h;
}

static bool
index_insert(HnJson *o, size_t member)
{
  size_t mask = o->index_cap - 1;
  size_t slot = hash_bytes(o->keys[member], o->key_lens[member]) & mask;
  while (o->index[slot])
    slot = (slot + 1) & mask;
  o->index[slot] = (uint32_t)(member + 1);
  return true;
}

static bool
index_rebuild(HnJson *o)
{
  size_t cap = 64;
  while (cap < o->len * 2 + 2)
    cap *= 2;
  uint32_t *idx = calloc(cap, sizeof *idx);
  if (!idx)
    return false;
  free(o->index);
  o->index = idx;
  o->index_cap = cap;
  for (size_t k = 0; k < o->len; k++)
    index_insert(o, k);
  return true;
}

static long
object_find(const HnJson *o, const char *key, size_t key_len)
{
  if (o->index) {
    size_t mask = o->index_cap - 1;
    size_t slot = hash_bytes(key, key_len) & mask;
    while (o->index[slot]) {
      size_t m = o->index[slot] - 1;
      if (o->key_lens[m] == key_len && memcmp(o->keys[m], key, key_len) == 0)
        return (long)m;
      slot = (slot + 1) & mask;
    }
    return -1;
  }
  for (size_t m = 0; m < o->len; m++)
    if (o->key_lens[m] == key_len && memcmp(o->keys[m], key, key_len) == 0)
      return (long)m;
  return -1;
}

bool
hn_json_object_set_len(HnJson *object, const char *key, size_t key_len, HnJson *value)
{
  if (!object || object->type != HN_JSON_OBJECT || !value || (!key && key_len)) {
    hn_json_free(value);
    return false;
  }
  long found = object_find(object, key ? key : "", key_len);
  if (found >= 0) {
    hn_json_free(object->items[found]);
    object->items[found] = value;
    return true;
  }
  if (object->len >= UINT32_MAX - 1 || !grow(object)) {
    hn_json_free(value);
    return false;
  }
  char *k = malloc(key_len + 1);
  if (!k) {
    hn_json_free(value);
    return false;
  }
  if (key_len)
    memcpy(k, key, key_len);
  k[key_len] = '\0';
  size_t m = object->len++;
  object->keys[m] = k;
  object->key_lens[m] = key_len;
  object->items[m] = value;
  if (object->len >= INDEX_MIN) {
    if (!object->index || object->len * 2 + 2 > object->index_cap) {
      if (!index_rebuild(object)) {
        /* Fall back to linear search rather than failing the insertion. */
        free(object->index);
        object->index = NULL;
        object->index_cap = 0;
      }
    } else {
      index_insert(object, m);
    }
  }
  return true;
}

bool
hn_json_object_set(HnJson *object, const char *key, HnJson *value)
{
  return hn_json_object_set_len(object, key, key ? strlen(key) : 0, value);
}

HnJson *
hn_json_copy(const HnJson *v)
{
  if (!v)
    return NULL;
  HnJson *c;
  switch (v->type) {
  case HN_JSON_NULL: return hn_json_new_null();
  case HN_JSON_BOOL: return hn_json_new_bool(v->b);
  case HN_JSON_NUMBER:
    c = new_value(HN_JSON_NUMBER);
    if (c) {
      c->is_int = v->is_int;
      c->i = v->i;
      c->d = v->d;
    }
    return c;
  case HN_JSON_STRING: return hn_json_new_string_len(v->s, v->len);
  case HN_JSON_ARRAY:
    c = hn_json_new_array();
    for (size_t k = 0; c && k < v->len; k++) {
      HnJson *item = hn_json_copy(v->items[k]);
      if (!item || !hn_json_array_append(c, item)) {
        hn_json_free(c);
        return NULL;
      }
    }
    return c;
  case HN_JSON_OBJECT:
    c = hn_json_new_object();
    for (size_t k = 0; c && k < v->len; k++) {
      HnJson *item = hn_json_copy(v->items[k]);
      if (!item || !hn_json_object_set_len(c, v->keys[k], v->key_lens[k], item)) {
        hn_json_free(c);
        return NULL;
      }
    }
    return c;
  }
  return NULL;
}

/* ---- inspection -------------------------------------------------------------------- */

HnJsonType hn_json_type(const HnJson *v) { return v ? v->type : HN_JSON_NULL; }

const char *
hn_json_type_name(HnJsonType t)
{
  switch (t) {
  case HN_JSON_NULL: return "null";
  case HN_JSON_BOOL: return "boolean";
  case HN_JSON_NUMBER: return "number";
  case HN_JSON_STRING: return "string";
  case HN_JSON_ARRAY: return "array";
  case HN_JSON_OBJECT: return "object";
  }
  return "invalid";
}

bool hn_json_get_bool(const HnJson *v) { return v && v->type == HN_JSON_BOOL && v->b; }
bool hn_json_is_integer(const HnJson *v) { return v && v->type == HN_JSON_NUMBER && v->is_int; }

int64_t
hn_json_get_int(const HnJson *v)
{
  if (!v || v->type != HN_JSON_NUMBER)
    return 0;
  if (v->is_int)
    return v->i;
  if (isnan(v->d))
    return 0;
  if (v->d >= 9223372036854775807.0)
    return INT64_MAX;
  if (v->d <= -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)v->d;
}

double hn_json_get_double(const HnJson *v) { return v && v->type == HN_JSON_NUMBER ? v->d : 0.0; }
const char *hn_json_get_string(const HnJson *v) { return v && v->type == HN_JSON_STRING ? v->s : NULL; }
size_t hn_json_get_string_len(const HnJson *v) { return v && v->type == HN_JSON_STRING ? v->len : 0; }

size_t
hn_json_length(const HnJson *v)
{
  return v && (v->type == HN_JSON_ARRAY || v->type == HN_JSON_OBJECT) ? v->len : 0;
}

HnJson *
hn_json_array_get(const HnJson *array, size_t index)
{
  if (!array || array->type != HN_JSON_ARRAY || index >= array->len)
    return NULL;
  return array->items[index];
}

HnJson *
hn_json_object_get_len(const HnJson *object, const char *key, size_t key_len)
{
  if (!object || object->type != HN_JSON_OBJECT || (!key && key_len))
    return NULL;
  long m = object_find(object, key ? key : "", key_len);
  return m >= 0 ? object->items[m] : NULL;
}

HnJson *
hn_json_object_get(const HnJson *object, const char *key)
{
  return hn_json_object_get_len(object, key, key ? strlen(key) : 0);
}

const char *
hn_json_object_key_at(const HnJson *object, size_t index, size_t *key_len)
{
  if (!object || object->type != HN_JSON_OBJECT || index >= object->len)
    return NULL;
  if (key_len)
    *key_len = object->key_lens[index];
  return object->keys[index];
}

HnJson *
hn_json_object_value_at(const HnJson *object, size_t index)
{
  if (!object || object->type != HN_JSON_OBJECT || index >= object->len)
    return NULL;
  return object->items[index];
}

bool
hn_json_equal(const HnJson *a, const HnJson *b)
{
  HnJsonType ta = hn_json_type(a), tb = hn_json_type(b);
  if (ta != tb)
    return false;
  switch (ta) {
  case HN_JSON_NULL: return true;
  case HN_JSON_BOOL: return a->b == b->b;
  case HN_JSON_NUMBER:
    if (a->is_int && b->is_int)
      return a->i == b->i;
    return a->d == b->d;
  case HN_JSON_STRING: return a->len == b->len && memcmp(a->s, b->s, a->len) == 0;
  case HN_JSON_ARRAY:
    if (a->len != b->len)
      return false;
    for (size_t k = 0; k < a->len; k++)
      if (!hn_json_equal(a->items[k], b->items[k]))
        return false;
    return true;
  case HN_JSON_OBJECT:
    if (a->len != b->len)
      return false;
    for (size_t k = 0; k < a->len; k++) {
      HnJson *other = hn_json_object_get_len(b, a->keys[k], a->key_lens[k]);
      if (!other || !hn_json_equal(a->items[k], other))
        return false;
    }
    return true;
  }
  return false;
}

/* ---- parser ------------------------------------------------------------------------ */

typedef struct {
  const char *text;
  size_t len;
  size_t pos;
  int depth;
  int max_depth;
  HnError *err;
} Parser;

static bool
parse_fail(Parser *p, size_t at, const char *fmt, ...) HN_PRINTF(3, 4);

static bool
parse_fail(Parser *p, size_t at, const char *fmt, ...)
{
  size_t line = 1, col = 1;
  for (size_t k = 0; k < at && k < p->len; k++) {
    if (p->text[k] == '\n') {
      line++;
      col = 1;
    } else {
      col++;
    }
  }
  char msg[HN_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return hn_error_set(p->err, HN_ERR_FORMAT, "JSON line %zu, column %zu: %s", line, col, msg);
}

static void
skip_ws(Parser *p)
{
  while (p->pos < p->len) {
    char c = p->text[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
      break;
    p->pos++;
  }
}

/* Length of the valid UTF-8 sequence at s (max n bytes), 0 if invalid. */
static size_t
utf8_valid_len(const unsigned char *s, size_t n)
{
  uint32_t cp;
  int len = hn_utf8_decode((const char *)s, n, &cp);
  return cp == HN_UC_INVALID ? 0 : (size_t)len;
}

static int
hex4(const char *s)
{
  int v = 0;
  for (int k = 0; k < 4; k++) {
    char c = s[k];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if (c >= 'a' && c <= 'f')
      v |= c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v |= c - 'A' + 10;
    else
      return -1;
  }
  return v;
}

/* Parses a string literal at p->pos (which is at '"') into a malloc'd buffer. */
static char *
parse_string_raw(Parser *p, size_t *out_len)
{
  size_t start = p->pos++;
  /* The decoded text is never longer than the literal, so the buffer is sized by the
   * literal (up to its closing quote), not by the rest of the document: that made every
   * string of a large document cost the whole remaining size (a 2 MB schema with 40,000
   * strings took 188 MB and most of its parse time in page faults). */
  size_t literal = start + 1;
  while (literal < p->len && p->text[literal] != '"')
    literal += p->text[literal] == '\\' ? 2 : 1;
  size_t cap = (literal < p->len ? literal : p->len) - start;
  char *buf = malloc(cap + 1);
  if (!buf) {
    hn_error_set(p->err, HN_ERR_NOMEM, "out of memory parsing JSON");
    return NULL;
  }
  size_t n = 0;
  for (;;) {
    if (p->pos >= p->len) {
      parse_fail(p, start, "unterminated string");
      goto fail;
    }
    unsigned char c = (unsigned char)p->text[p->pos];
    if (c == '"') {
      p->pos++;
      break;
    }
    if (c < 0x20) {
      parse_fail(p, p->pos, "control character U+%04X in string (must be escaped)", c);
      goto fail;
    }
    if (c == '\\') {
      size_t esc = p->pos;
      if (p->pos + 1 >= p->len) {
        parse_fail(p, start, "unterminated string");
        goto fail;
      }
      char e = p->text[p->pos + 1];
      p->pos += 2;
      switch (e) {
      case '"': buf[n++] = '"'; break;
      case '\\': buf[n++] = '\\'; break;
      case '/': buf[n++] = '/'; break;
      case 'b': buf[n++] = '\b'; break;
      case 'f': buf[n++] = '\f'; break;
      case 'n': buf[n++] = '\n'; break;
      case 'r': buf[n++] = '\r'; break;
      case 't': buf[n++] = '\t'; break;
      case 'u': {
        int u = p->pos + 4 <= p->len ? hex4(p->text + p->pos) : -1;
        if (u < 0) {
          parse_fail(p, esc, "invalid \\u escape (needs 4 hex digits)");
          goto fail;
        }
        p->pos += 4;
        uint32_t cp = (uint32_t)u;
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
          parse_fail(p, esc, "lone low surrogate \\u%04X", cp);
          goto fail;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          int lo = -1;
          if (p->pos + 6 <= p->len && p->text[p->pos] == '\\' && p->text[p->pos + 1] == 'u')
            lo = hex4(p->text + p->pos + 2);
          if (lo < 0xDC00 || lo > 0xDFFF) {
            parse_fail(p, esc, "high surrogate \\u%04X not followed by a low surrogate", cp);
            goto fail;
          }
          p->pos += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
        }
        n += (size_t)hn_utf8_encode(cp, buf + n);
        break;
      }
      default:
        parse_fail(p, esc, "invalid escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
        goto fail;
      }
      continue;
    }
    size_t l = utf8_valid_len((const unsigned char *)p->text + p->pos, p->len - p->pos);
    if (l == 0) {
      parse_fail(p, p->pos, "invalid UTF-8 in string");
      goto fail;
    }
    memcpy(buf + n, p->text + p->pos, l);
    n += l;
    p->pos += l;
  }
  buf[n] = '\0';
  *out_len = n;
  return buf;
fail:
  free(buf);
  return NULL;
}

static HnJson *
parse_number(Parser *p)
{
  size_t start = p->pos;
  const char *t = p->text;
  size_t k = p->pos;
  bool integral = true;
  if (k < p->len && t[k] == '-')
    k++;
  if (k >= p->len || !(t[k] >= '0' && t[k] <= '9')) {
    parse_fail(p, start, "invalid number");
    return NULL;
  }
  if (t[k] == '0') {
    k++;
    if (k < p->len && t[k] >= '0' && t[k] <= '9') {
      parse_fail(p, start, "leading zeros are not allowed in numbers");
      return NULL;
    }
  } else {
    while (k < p->len && t[k] >= '0' && t[k] <= '9')
      k++;
  }
  if (k < p->len && t[k] == '.') {
    integral = false;
    k++;
    if (k >= p->len || !(t[k] >= '0' && t[k] <= '9')) {
      parse_fail(p, k, "expected a digit after the decimal point");
      return NULL;
    }
    while (k < p->len && t[k] >= '0' && t[k] <= '9')
      k++;
  }
  if (k < p->len && (t[k] == 'e' || t[k] == 'E')) {
    integral = false;
    k++;
    if (k < p->len && (t[k] == '+' || t[k] == '-'))
      k++;
    if (k >= p->len || !(t[k] >= '0' && t[k] <= '9')) {
      parse_fail(p, k, "expected a digit in the exponent");
      return NULL;
    }
    while (k < p->len && t[k] >= '0' && t[k] <= '9')
      k++;
  }
  size_t n = k - start;
  char small[64];
  char *tmp = n < sizeof small ? small : malloc(n + 1);
  if (!tmp) {
    hn_error_set(p->err, HN_ERR_NOMEM, "out of memory parsing JSON");
    return NULL;
  }
  memcpy(tmp, t + start, n);
  tmp[n] = '\0';
  HnJson *v = new_value(HN_JSON_NUMBER);
  if (v) {
    v->d = strtod_l(tmp, NULL, c_locale());
    if (integral) {
      errno = 0;
      long long ll = strtoll(tmp, NULL, 10);
      if (errno == 0) {
        v->is_int = true;
        v->i = ll;
      }
    }
  } else {
    hn_error_set(p->err, HN_ERR_NOMEM, "out of memory parsing JSON");
  }
  if (tmp != small)
    free(tmp);
  p->pos = k;
  return v;
}

static HnJson *parse_value(Parser *p);

static HnJson *
parse_container(Parser *p, bool is_object)
{
  size_t open = p->pos;
  if (++p->depth > p->max_depth) {
    parse_fail(p, open, "nesting deeper than %d levels", p->max_depth);
    return NULL;
  }
  p->pos++;
  HnJson *c = is_object ? hn_json_new_object() : hn_json_new_array();
  if (!c) {
    hn_error_set(p->err, HN_ERR_NOMEM, "out of memory parsing JSON");
    return NULL;
  }
  char close = is_object ? '}' : ']';
  skip_ws(p);
  if (p->pos < p->len && p->text[p->pos] == close) {
    p->pos++;
    p->depth--;
    return c;
  }
  for (;;) {
    skip_ws(p);
    char *key = NULL;
    size_t key_len = 0;
    if (is_object) {
      if (p->pos >= p->len || p->text[p->pos] != '"') {
        parse_fail(p, p->pos, p->pos >= p->len ? "unexpected end of input in object" : "expected a string key");
        goto fail;
      }
      key = parse_string_raw(p, &key_len);
      if (!key)
        goto fail;
      skip_ws(p);
      if (p->pos >= p->len || p->text[p->pos] != ':') {
        free(key);
        parse_fail(p, p->pos, "expected ':' after object key");
        goto fail;
      }
      p->pos++;
    }
    HnJson *item = parse_value(p);
    if (!item) {
      free(key);
      goto fail;
    }
    bool ok = is_object ? hn_json_object_set_len(c, key, key_len, item) : hn_json_array_append(c, item);
    free(key);
    if (!ok) {
      hn_error_set(p->err, HN_ERR_NOMEM, "out of memory parsing JSON");
      goto fail;
    }
    skip_ws(p);
    if (p->pos >= p->len) {
      parse_fail(p, open, "unterminated %s", is_object ? "object" : "array");
      goto fail;
    }
    char ch = p->text[p->pos];
    if (ch == ',') {
      p->pos++;
      continue;
    }
    if (ch == close) {
      p->pos++;
      break;
    }
    parse_fail(p, p->pos, "expected ',' or '%c'", close);
    goto fail;
  }
  p->depth--;
  return c;
fail:
  hn_json_free(c);
  return NULL;
}

static bool
match_word(Parser *p, const char *word)
{
  size_t n = strlen(word);
  if (p->len - p->pos >= n && memcmp(p->text + p->pos, word, n) == 0) {
    p->pos += n;
    return true;
  }
  return false;
}

static HnJson *
parse_value(Parser *p)
{
  skip_ws(p);
  if (p->pos >= p->len) {
    parse_fail(p, p->pos, "unexpected end of input");
    return NULL;
  }
  char c = p->text[p->pos];
  HnJson *v = NULL;
  switch (c) {
  case '{': return parse_container(p, true);
  case '[': return parse_container(p, false);
  case '"': {
    size_t len;
    char *s = parse_string_raw(p, &len);
    if (!s)
      return NULL;
    v = new_value(HN_JSON_STRING);
    if (!v) {
      free(s);
      break;
    }
    v->s = s;
    v->len = len;
    return v;
  }
  case 't':
    if (match_word(p, "true"))
      v = hn_json_new_bool(true);
    else
      goto bad;
    break;
  case 'f':
    if (match_word(p, "false"))
      v = hn_json_new_bool(false);
    else
      goto bad;
    break;
  case 'n':
    if (match_word(p, "null"))
      v = hn_json_new_null();
    else
      goto bad;
    break;
  default:
    if (c == '-' || (c >= '0' && c <= '9'))
      return parse_number(p);
    goto bad;
  }
  if (!v)
    hn_error_set(p->err, HN_ERR_NOMEM, "out of memory parsing JSON");
  return v;
bad:
  if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
    parse_fail(p, p->pos, "unexpected character '%c'", c);
  else
    parse_fail(p, p->pos, "unexpected byte 0x%02X", (unsigned char)c);
  return NULL;
}

HnJson *
hn_json_parse_ex(const char *text, size_t len, int max_depth, HnError *err)
{
  if (!text && len) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "no JSON text");
    return NULL;
  }
  Parser p = { text ? text : "", len, 0, 0, max_depth > 0 ? max_depth : HN_JSON_MAX_DEPTH, err };
  /* A UTF-8 byte order mark is tolerated: editors add it. */
  if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
    p.pos = 3;
  HnJson *v = parse_value(&p);
  if (!v)
    return NULL;
  skip_ws(&p);
  if (p.pos < p.len) {
    parse_fail(&p, p.pos, "unexpected data after the JSON value");
    hn_json_free(v);
    return NULL;
  }
  return v;
}

HnJson *
hn_json_parse(const char *text, size_t len, HnError *err)
{
  return hn_json_parse_ex(text, len, 0, err);
}

/* ---- writer ------------------------------------------------------------------------ */

typedef struct {
  char *buf;
  size_t len;
  size_t cap;
  bool failed;
} Buf;

static void
buf_add(Buf *b, const char *s, size_t n)
{
  if (b->failed)
    return;
  size_t need;
  if (!hn_add_size(b->len, n, &need) || !hn_add_size(need, 1, &need) ||
      !HN_ARRAY_RESERVE(b->buf, b->cap, need, 64)) {
    b->failed = true;
    return;
  }
  memcpy(b->buf + b->len, s, n);
  b->len += n;
  b->buf[b->len] = '\0';
}

static void buf_str(Buf *b, const char *s) { buf_add(b, s, strlen(s)); }

static void
write_string(Buf *b, const char *s, size_t len, bool ascii)
{
  buf_add(b, "\"", 1);
  size_t run = 0; /* bytes copied verbatim in one go */
  for (size_t k = 0; k < len;) {
    unsigned char c = (unsigned char)s[k];
    const char *esc = NULL;
    char tmp[16];
    size_t adv = 1;
    switch (c) {
    case '"': esc = "\\\""; break;
    case '\\': esc = "\\\\"; break;
    case '\n': esc = "\\n"; break;
    case '\r': esc = "\\r"; break;
    case '\t': esc = "\\t"; break;
    case '\b': esc = "\\b"; break;
    case '\f': esc = "\\f"; break;
    default:
      if (c < 0x20 || (ascii && c == 0x7f)) {
        snprintf(tmp, sizeof tmp, "\\u%04x", c);
        esc = tmp;
      } else if (c >= 0x80) {
        size_t l = utf8_valid_len((const unsigned char *)s + k, len - k);
        if (l == 0) {
          /* Not representable: Python strings cannot hold such bytes either. */
          esc = ascii ? "\\ufffd" : "\xEF\xBF\xBD";
        } else if (ascii) {
          uint32_t cp;
          if (l == 2)
            cp = ((c & 0x1Fu) << 6) | (s[k + 1] & 0x3F);
          else if (l == 3)
            cp = ((c & 0x0Fu) << 12) | ((s[k + 1] & 0x3Fu) << 6) | (s[k + 2] & 0x3F);
          else
            cp = ((c & 0x07u) << 18) | ((s[k + 1] & 0x3Fu) << 12) | ((s[k + 2] & 0x3Fu) << 6) | (s[k + 3] & 0x3F);
          if (cp >= 0x10000) {
            uint32_t v = cp - 0x10000;
            snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
          } else {
            snprintf(tmp, sizeof tmp, "\\u%04x", cp);
          }
          esc = tmp;
          adv = l;
        } else {
          run += l;
          k += l;
          continue;
        }
      } else {
        run++;
        k++;
        continue;
      }
    }
    if (run) {
      buf_add(b, s + k - run, run);
      run = 0;
    }
    buf_str(b, esc);
    k += adv;
  }
  if (run)
    buf_add(b, s + len - run, run);
  buf_add(b, "\"", 1);
}

/* Python's repr(float): the shortest digits that round-trip, positional notation for
 * decimal exponents -4 <= e < 16, and always a fraction or exponent. */
static void
format_double(double d, char *out, size_t out_size)
{
  if (isnan(d)) {
    snprintf(out, out_size, "NaN");
    return;
  }
  if (isinf(d)) {
    snprintf(out, out_size, d > 0 ? "Infinity" : "-Infinity");
    return;
  }
  locale_t old = uselocale(c_locale());
  char sci[40];
  for (int prec = 0; prec < 17; prec++) {
    snprintf(sci, sizeof sci, "%.*e", prec, d);
    if (strtod_l(sci, NULL, c_locale()) == d)
      break;
  }
  uselocale(old);
  /* sci is [-]D[.DDD]e[+-]XX */
  char digits[32];
  size_t nd = 0;
  const char *q = sci;
  bool neg = false;
  if (*q == '-') {
    neg = true;
    q++;
  }
  for (; *q && *q != 'e'; q++)
    if (*q >= '0' && *q <= '9' && nd < sizeof digits - 1)
      digits[nd++] = *q;
  int exp10 = *q == 'e' ? atoi(q + 1) : 0;
  while (nd > 1 && digits[nd - 1] == '0')
    nd--;
  digits[nd] = '\0';
  char *o = out;
  char *end = out + out_size - 1;
#define PUT(ch) do { if (o < end) *o++ = (ch); } while (0)
  if (neg)
    PUT('-');
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 < 0) {
      PUT('0');
      PUT('.');
      for (int z = 0; z < -exp10 - 1; z++)
        PUT('0');
      for (size_t k = 0; k < nd; k++)
        PUT(digits[k]);
    } else {
      size_t int_digits = (size_t)exp10 + 1;
      for (size_t k = 0; k < int_digits; k++)
        PUT(k < nd ? digits[k] : '0');
      PUT('.');
      if (nd > int_digits)
        for (size_t k = int_digits; k < nd; k++)
          PUT(digits[k]);
      else
        PUT('0');
    }
  } else {
    PUT(digits[0]);
    if (nd > 1) {
      PUT('.');
      for (size_t k = 1; k < nd; k++)
        PUT(digits[k]);
    }
    char e[16];
    snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    for (char *x = e; *x; x++)
      PUT(*x);
  }
#undef PUT
  *o = '\0';
}

static void
newline_indent(Buf *b, int indent, int level)
{
  buf_add(b, "\n", 1);
  for (int k = 0; k < level; k++)
    for (int s = 0; s < indent; s++)
      buf_add(b, " ", 1);
}

static int
cmp_keys(const HnJson *o, size_t a, size_t b)
{
  size_t la = o->key_lens[a], lb = o->key_lens[b];
  int c = memcmp(o->keys[a], o->keys[b], HN_MIN(la, lb));
  if (c)
    return c;
  return la < lb ? -1 : la > lb;
}

static void
write_value(Buf *b, const HnJson *v, const HnJsonWriteOptions *o, int level)
{
  char num[64];
  switch (hn_json_type(v)) {
  case HN_JSON_NULL: buf_str(b, "null"); return;
  case HN_JSON_BOOL: buf_str(b, v->b ? "true" : "false"); return;
  case HN_JSON_NUMBER:
    if (v->is_int)
      snprintf(num, sizeof num, "%lld", (long long)v->i);
    else
      format_double(v->d, num, sizeof num);
    buf_str(b, num);
    return;
  case HN_JSON_STRING: write_string(b, v->s, v->len, o->ensure_ascii); return;
  case HN_JSON_ARRAY:
  case HN_JSON_OBJECT: break;
  }
  bool obj = v->type == HN_JSON_OBJECT;
  buf_add(b, obj ? "{" : "[", 1);
  if (v->len == 0) {
    buf_add(b, obj ? "}" : "]", 1);
    return;
  }
  size_t *order = NULL;
  if (obj && o->sort_keys) {
    order = malloc(v->len * sizeof *order);
    if (!order) {
      b->failed = true;
      return;
    }
    for (size_t k = 0; k < v->len; k++)
      order[k] = k;
    /* insertion sort is fine: templates serialize small objects */
    for (size_t k = 1; k < v->len; k++) {
      size_t x = order[k], j = k;
      while (j > 0 && cmp_keys(v, order[j - 1], x) > 0) {
        order[j] = order[j - 1];
        j--;
      }
      order[j] = x;
    }
  }
  for (size_t k = 0; k < v->len && !b->failed; k++) {
    size_t m = order ? order[k] : k;
    if (k > 0)
      buf_str(b, o->indent < 0 && o->python_separators ? ", " : ",");
    if (o->indent >= 0)
      newline_indent(b, o->indent, level + 1);
    if (obj) {
      write_string(b, v->keys[m], v->key_lens[m], o->ensure_ascii);
      buf_str(b, o->python_separators ? ": " : ":");
    }
    write_value(b, v->items[m], o, level + 1);
  }
  free(order);
  if (o->indent >= 0)
    newline_indent(b, o->indent, level);
  buf_add(b, obj ? "}" : "]", 1);
}

char *
hn_json_write(const HnJson *v, const HnJsonWriteOptions *opts, size_t *out_len)
{
  HnJsonWriteOptions o = opts ? *opts : HN_JSON_WRITE_COMPACT;
  Buf b = { 0 };
  write_value(&b, v, &o, 0);
  if (b.failed || !b.buf) {
    free(b.buf);
    return NULL;
  }
  if (out_len)
    *out_len = b.len;
  return b.buf;
}

char *
hn_json_quote(const char *s, size_t len, bool ensure_ascii, size_t *out_len)
{
  Buf b = { 0 };
  write_string(&b, s ? s : "", s ? len : 0, ensure_ascii);
  if (b.failed) {
    free(b.buf);
    return NULL;
  }
  if (out_len)
    *out_len = b.len;
  return b.buf;
}
