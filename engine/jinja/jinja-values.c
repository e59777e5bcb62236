/* jinja-values.c — the value type, strings, lists, dicts, the arena they live in, and
 * the conversions between them (truth, str(), repr(), equality, ordering, iteration).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "jinja-private.h"

void
jinja_arena_free(Arena *a)
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
void *
jinja_arena_try_alloc(Arena *a, size_t n)
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

_Noreturn void
jinja_fail_at(Ctx *c, int line, int col, const char *fmt, ...)
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

_Noreturn void
jinja_fail_nomem(Ctx *c)
{
  hn_error_set(c->err, HN_ERR_TEMPLATE, "the template needs more than %zu MB of memory", c->arena.limit >> 20);
  longjmp(c->jump, 1);
}

void *
jinja_xalloc(Ctx *c, size_t n)
{
  void *p = jinja_arena_try_alloc(&c->arena, n);
  if (!p)
    jinja_fail_nomem(c);
  return p;
}

void *
jinja_xalloc0(Ctx *c, size_t n)
{
  void *p = jinja_xalloc(c, n);
  memset(p, 0, n);
  return p;
}

size_t
jinja_xmul(Ctx *c, size_t a, size_t b)
{
  size_t r;
  if (!hn_mul_size(a, b, &r))
    jinja_fail_nomem(c);
  return r;
}

/* ==== UTF-8 helpers ==================================================================== */

/* Decodes one code point; invalid bytes decode as themselves (U+0080..U+00FF range is
 * never produced for them: they map to 0xDC80+byte like Python's surrogateescape). */
uint32_t
jinja_utf8_next(const char *s, size_t n, size_t *adv)
{
  uint32_t cp;
  *adv = (size_t)hn_utf8_decode(s, n, &cp);
  return cp == HN_UC_INVALID ? 0xDC00u + (unsigned char)s[0] : cp;
}

/* Like hn_utf8_encode, but the surrogate escapes U+DC80..U+DCFF that stand for
 * undecodable input bytes turn back into those bytes. */
size_t
jinja_utf8_put(uint32_t cp, char *out)
{
  if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out[0] = (char)(cp - 0xDC00);
    return 1;
  }
  return (size_t)hn_utf8_encode(cp, out);
}

/* Python's str.isspace(). */
bool
jinja_py_space(uint32_t c)
{
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

/* Byte length of the whitespace run at the end of s[0..n). */
size_t
jinja_trailing_space(const char *s, size_t n)
{
  size_t end = n;
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && end - start < 4 && ((unsigned char)s[start] & 0xC0) == 0x80)
      start--;
    size_t adv;
    uint32_t cp = jinja_utf8_next(s + start, end - start, &adv);
    if (start + adv != end || !jinja_py_space(cp)) {
      /* not a whole character or not a space */
      if (start + adv != end) {
        if (jinja_py_space((unsigned char)s[end - 1]))
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

size_t
jinja_leading_space(const char *s, size_t n)
{
  size_t k = 0;
  while (k < n) {
    size_t adv;
    uint32_t cp = jinja_utf8_next(s + k, n - k, &adv);
    if (!jinja_py_space(cp))
      break;
    k += adv;
  }
  return k;
}

size_t
jinja_utf8_count(const char *s, size_t n)
{
  size_t count = 0;
  for (size_t k = 0; k < n;) {
    size_t adv;
    jinja_utf8_next(s + k, n - k, &adv);
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

locale_t
jinja_c_time_locale(void)
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
double
jinja_c_strtod(const char *s, char **end)
{
  locale_t l = jinja_c_time_locale();
  return l ? strtod_l(s, end, l) : strtod(s, end);
}

uint32_t
jinja_cp_upper(uint32_t c)
{
  if (c < 0x80)
    return c >= 'a' && c <= 'z' ? c - 32 : c;
  if (c >= 0xD800 && c <= 0xDFFF)
    return c;
  locale_t l = utf8_ctype_locale();
  return l ? (uint32_t)towupper_l((wint_t)c, l) : c;
}

uint32_t
jinja_cp_lower(uint32_t c)
{
  if (c < 0x80)
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
  if (c >= 0xD800 && c <= 0xDFFF)
    return c;
  locale_t l = utf8_ctype_locale();
  return l ? (uint32_t)towlower_l((wint_t)c, l) : c;
}

bool
jinja_cp_alpha(uint32_t c)
{
  if (c < 0x80)
    return (c | 32) >= 'a' && (c | 32) <= 'z';
  if (c >= 0xD800 && c <= 0xDFFF)
    return false;
  locale_t l = utf8_ctype_locale();
  return l ? iswalpha_l((wint_t)c, l) != 0 : false;
}

Value
jinja_v_bool(bool b)
{
  Value v = { .t = T_BOOL };
  v.b = b;
  return v;
}

Value
jinja_v_int(int64_t i)
{
  Value v = { .t = T_INT };
  v.i = i;
  return v;
}

Value
jinja_v_float(double f)
{
  Value v = { .t = T_FLOAT };
  v.f = f;
  return v;
}

Str *
jinja_str_new(Ctx *c, const char *s, size_t n)
{
  Str *r = jinja_xalloc(c, sizeof(Str) + n + 1);
  r->len = n;
  if (n)
    memcpy(r->s, s, n);
  r->s[n] = '\0';
  return r;
}

Value
jinja_v_str(Ctx *c, const char *s, size_t n)
{
  Value v = { .t = T_STR };
  v.s = jinja_str_new(c, s, n);
  return v;
}

Value
jinja_v_cstr(Ctx *c, const char *s)
{
  return jinja_v_str(c, s, strlen(s));
}

Value
jinja_v_list(Ctx *c, size_t n)
{
  Value v = { .t = T_LIST };
  v.l = jinja_xalloc0(c, sizeof(List));
  v.l->n = n;
  v.l->items = n ? jinja_xalloc0(c, jinja_xmul(c, n, sizeof(Value))) : NULL;
  return v;
}

Value
jinja_v_dict(Ctx *c)
{
  Value v = { .t = T_DICT };
  v.d = jinja_xalloc0(c, sizeof(Dict));
  return v;
}

const char *
jinja_type_name(const Value *v)
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

void
jinja_buf_reserve(Ctx *c, Buf *b, size_t extra)
{
  size_t need;
  if (!hn_add_size(b->len, extra, &need) || !hn_add_size(need, 1, &need))
    jinja_fail_nomem(c);
  JINJA_ARENA_RESERVE(c, b->data, b->len, b->cap, need, 256);
}

void
jinja_arena_reserve(Ctx *c, void *items_ptr, size_t n, size_t *cap, size_t need, size_t elem_size,
                    size_t first_cap)
{
  if (need <= *cap)
    return;
  size_t new_cap;
  if (!hn_array_grown_cap(*cap, need, elem_size, first_cap, &new_cap))
    jinja_fail_nomem(c);
  /* through memcpy, like hn_array_resize_impl: one function for every element type */
  void *old;
  memcpy(&old, items_ptr, sizeof old);
  void *grown = jinja_xalloc(c, new_cap * elem_size);
  if (n)
    memcpy(grown, old, n * elem_size);
  memcpy(items_ptr, &grown, sizeof grown);
  *cap = new_cap;
}

void
jinja_buf_addc(Ctx *c, Buf *b, char ch)
{
  jinja_buf_add(c, b, &ch, 1);
}

void
jinja_buf_adds(Ctx *c, Buf *b, const char *s)
{
  jinja_buf_add(c, b, s, strlen(s));
}

Value
jinja_buf_value(Ctx *c, Buf *b)
{
  return jinja_v_str(c, b->data ? b->data : "", b->len);
}

void
jinja_buf_add(Ctx *c, Buf *b, const char *s, size_t n)
{
  if (n == 0)
    return;
  if (b->limit && b->len + n > b->limit) {
    hn_error_set(c->err, HN_ERR_TEMPLATE, "the rendered prompt exceeds the limit of %zu bytes", b->limit);
    longjmp(c->jump, 1);
  }
  jinja_buf_reserve(c, b, n);
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

/* ---- dicts ---- */

Value *
jinja_dict_find(Dict *d, const Value *key)
{
  for (size_t k = 0; k < d->n; k++)
    if (jinja_values_equal(&d->keys[k], key))
      return &d->vals[k];
  return NULL;
}

Value *
jinja_dict_find_str(Dict *d, const char *key, size_t len)
{
  for (size_t k = 0; k < d->n; k++)
    if (d->keys[k].t == T_STR && d->keys[k].s->len == len && memcmp(d->keys[k].s->s, key, len) == 0)
      return &d->vals[k];
  return NULL;
}

void
jinja_dict_set(R *r, Dict *d, Value key, Value v)
{
  Value *slot = jinja_dict_find(d, &key);
  if (slot) {
    *slot = v;
    return;
  }
  if (d->n == d->cap) {
    /* keys and values share one capacity: the values grow to what the keys got */
    size_t cap = d->cap;
    JINJA_ARENA_RESERVE(&r->c, d->keys, d->n, cap, d->n + 1, 4);
    JINJA_ARENA_RESERVE(&r->c, d->vals, d->n, d->cap, cap, 4);
  }
  d->keys[d->n] = key;
  d->vals[d->n] = v;
  d->n++;
}

/* ---- conversions ---- */

bool
jinja_truthy(const Value *v)
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

bool jinja_is_num(const Value *v) { return v->t == T_INT || v->t == T_FLOAT || v->t == T_BOOL; }
double jinja_num_f(const Value *v) { return v->t == T_FLOAT ? v->f : v->t == T_INT ? (double)v->i : (double)v->b; }
int64_t jinja_num_i(const Value *v) { return v->t == T_INT ? v->i : v->t == T_BOOL ? (int64_t)v->b : (int64_t)v->f; }

void
jinja_float_str(double d, char *out, size_t n)
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
  if (c == ' ' || (jinja_py_space(c) && c != 0x1C && c != 0x1D && c != 0x1E && c != 0x1F && c != 0x85) ||
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
  jinja_buf_addc(&r->c, b, q);
  for (size_t k = 0; k < s->len; k++) {
    unsigned char ch = (unsigned char)s->s[k];
    char tmp[8];
    if (ch == (unsigned char)q || ch == '\\') {
      jinja_buf_addc(&r->c, b, '\\');
      jinja_buf_addc(&r->c, b, (char)ch);
    } else if (ch == '\n') {
      jinja_buf_adds(&r->c, b, "\\n");
    } else if (ch == '\r') {
      jinja_buf_adds(&r->c, b, "\\r");
    } else if (ch == '\t') {
      jinja_buf_adds(&r->c, b, "\\t");
    } else if (ch < 0x20 || ch == 0x7f) {
      snprintf(tmp, sizeof tmp, "\\x%02x", ch);
      jinja_buf_adds(&r->c, b, tmp);
    } else if (ch >= 0x80) {
      size_t adv;
      uint32_t cp = jinja_utf8_next(s->s + k, s->len - k, &adv);
      char esc[16];
      if (cp >= 0xDC80 && cp <= 0xDCFF)
        snprintf(esc, sizeof esc, "\\udc%02x", cp & 0xFF);
      else if (py_printable(cp)) {
        jinja_buf_add(&r->c, b, s->s + k, adv);
        k += adv - 1;
        continue;
      } else if (cp < 0x100)
        snprintf(esc, sizeof esc, "\\x%02x", cp);
      else if (cp < 0x10000)
        snprintf(esc, sizeof esc, "\\u%04x", cp);
      else
        snprintf(esc, sizeof esc, "\\U%08x", cp);
      jinja_buf_adds(&r->c, b, esc);
      k += adv - 1;
    } else {
      jinja_buf_addc(&r->c, b, (char)ch);
    }
  }
  jinja_buf_addc(&r->c, b, q);
}

void
jinja_repr_buf(R *r, Buf *b, Value v)
{
  if (++r->depth > MAX_EVAL_DEPTH)
    jinja_rfail(r, NULL, "value nesting too deep");
  switch (v.t) {
  case T_STR:
    if (v.markup)
      jinja_buf_adds(&r->c, b, "Markup(");
    repr_str(r, b, v.s);
    if (v.markup)
      jinja_buf_addc(&r->c, b, ')');
    break;
  case T_UNDEF: jinja_buf_adds(&r->c, b, "Undefined"); break;
  case T_LIST:
    if (v.l->lazy) {
      jinja_buf_adds(&r->c, b, "<generator object>");
      break;
    }
    jinja_buf_addc(&r->c, b, v.l->tuple ? '(' : '[');
    for (size_t k = 0; k < v.l->n; k++) {
      if (k)
        jinja_buf_adds(&r->c, b, ", ");
      jinja_repr_buf(r, b, v.l->items[k]);
    }
    if (v.l->tuple && v.l->n == 1)
      jinja_buf_addc(&r->c, b, ',');
    jinja_buf_addc(&r->c, b, v.l->tuple ? ')' : ']');
    break;
  case T_DICT:
  case T_NS:
    jinja_buf_adds(&r->c, b, v.t == T_NS ? "<Namespace {" : "{");
    for (size_t k = 0; k < v.d->n; k++) {
      if (k)
        jinja_buf_adds(&r->c, b, ", ");
      jinja_repr_buf(r, b, v.d->keys[k]);
      jinja_buf_adds(&r->c, b, ": ");
      jinja_repr_buf(r, b, v.d->vals[k]);
    }
    jinja_buf_adds(&r->c, b, v.t == T_NS ? "}>" : "}");
    break;
  default: jinja_to_str_buf(r, b, v); break;
  }
  r->depth--;
}

void
jinja_to_str_buf(R *r, Buf *b, Value v)
{
  char tmp[64];
  switch (v.t) {
  case T_UNDEF: return;
  case T_NONE: jinja_buf_adds(&r->c, b, "None"); return;
  case T_BOOL: jinja_buf_adds(&r->c, b, v.b ? "True" : "False"); return;
  case T_INT:
    snprintf(tmp, sizeof tmp, "%lld", (long long)v.i);
    jinja_buf_adds(&r->c, b, tmp);
    return;
  case T_FLOAT:
    jinja_float_str(v.f, tmp, sizeof tmp);
    jinja_buf_adds(&r->c, b, tmp);
    return;
  case T_STR: jinja_buf_add(&r->c, b, v.s->s, v.s->len); return;
  case T_LIST:
  case T_DICT:
  case T_NS: jinja_repr_buf(r, b, v); return;
  case T_MACRO:
    jinja_buf_adds(&r->c, b, "<Macro '");
    jinja_buf_adds(&r->c, b, v.m->node->name->s);
    jinja_buf_adds(&r->c, b, "'>");
    return;
  case T_FUNC: jinja_buf_adds(&r->c, b, "<function>"); return;
  case T_METHOD:
    jinja_buf_adds(&r->c, b, "<built-in method ");
    jinja_buf_adds(&r->c, b, v.meth->name);
    jinja_buf_adds(&r->c, b, ">");
    return;
  case T_LOOP: jinja_buf_adds(&r->c, b, "<LoopContext>"); return;
  }
}

Value
jinja_to_str(R *r, Value v)
{
  if (v.t == T_STR)
    return v;
  Buf b = { 0 };
  jinja_to_str_buf(r, &b, v);
  return jinja_buf_value(&r->c, &b);
}

/* ---- equality and ordering ---- */

/* Values built by a template can nest arbitrarily deep ({% set ns.x = [ns.x] %} in a
 * loop): past this depth, comparison gives up and calls them different. */
#define MAX_COMPARE_DEPTH 1000

static bool values_equal_at(const Value *a, const Value *b, int depth);

bool
jinja_values_equal(const Value *a, const Value *b)
{
  return values_equal_at(a, b, 0);
}

static bool
values_equal_at(const Value *a, const Value *b, int depth)
{
  if (depth > MAX_COMPARE_DEPTH)
    return false;
  if (jinja_is_num(a) && jinja_is_num(b)) {
    if (a->t == T_FLOAT || b->t == T_FLOAT)
      return jinja_num_f(a) == jinja_num_f(b);
    return jinja_num_i(a) == jinja_num_i(b);
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
      Value *o = jinja_dict_find(b->d, &a->d->keys[k]);
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

int
jinja_compare(R *r, const Node *n, const Value *a, const Value *b, const char *opname)
{
  if (a->t == T_UNDEF)
    jinja_undef_fail(r, n, a);
  if (b->t == T_UNDEF)
    jinja_undef_fail(r, n, b);
  if (jinja_is_num(a) && jinja_is_num(b)) {
    if (a->t == T_FLOAT || b->t == T_FLOAT) {
      double x = jinja_num_f(a), y = jinja_num_f(b);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = jinja_num_i(a), y = jinja_num_i(b);
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
      jinja_rfail(r, n, "values nested too deeply to compare");
    int result = a->l->n < b->l->n ? -1 : a->l->n > b->l->n;
    for (size_t k = 0; k < a->l->n && k < b->l->n; k++) {
      if (!jinja_values_equal(&a->l->items[k], &b->l->items[k])) {
        result = jinja_compare(r, n, &a->l->items[k], &b->l->items[k], opname);
        break;
      }
    }
    r->depth--;
    return result;
  }
  jinja_rfail(r, n, "'%s' not supported between instances of '%s' and '%s'", opname, jinja_type_name(a), jinja_type_name(b));
}

/* ---- iteration ---- */

List *
jinja_str_chars(R *r, const Str *s)
{
  size_t count = jinja_utf8_count(s->s, s->len);
  Value lv = jinja_v_list(&r->c, count);
  size_t k = 0, i = 0;
  while (k < s->len) {
    size_t adv;
    jinja_utf8_next(s->s + k, s->len - k, &adv);
    lv.l->items[i++] = jinja_v_str(&r->c, s->s + k, adv);
    k += adv;
  }
  return lv.l;
}

List *
jinja_iterate(R *r, const Node *n, Value v)
{
  static List empty = { 0 };
  switch (v.t) {
  case T_UNDEF: return &empty;
  case T_LIST: return v.l;
  case T_DICT: {
    Value lv = jinja_v_list(&r->c, v.d->n);
    for (size_t k = 0; k < v.d->n; k++)
      lv.l->items[k] = v.d->keys[k];
    return lv.l;
  }
  case T_STR: return jinja_str_chars(r, v.s);
  default: jinja_rfail(r, n, "'%s' object is not iterable", jinja_type_name(&v));
  }
}
