/* jinja-filters.c — the builtins: string helpers, tests, tojson, filters and the methods of
 * str, list and dict.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "jinja-private.h"

/* ---- string helpers ---- */

typedef uint32_t (*CaseFn)(uint32_t);

static Value
map_case(R *r, const Str *s, CaseFn fn)
{
  Buf b = { 0 };
  jinja_buf_reserve(&r->c, &b, s->len + 8);
  for (size_t k = 0; k < s->len;) {
    size_t adv;
    uint32_t cp = jinja_utf8_next(s->s + k, s->len - k, &adv);
    char tmp[4];
    jinja_buf_add(&r->c, &b, tmp, jinja_utf8_put(fn(cp), tmp));
    k += adv;
  }
  return jinja_buf_value(&r->c, &b);
}

/* Python str.title(): a letter after a non-letter is upper-cased, others lower-cased. */
static Value
py_title(R *r, const Str *s)
{
  Buf b = { 0 };
  bool prev_cased = false;
  for (size_t k = 0; k < s->len;) {
    size_t adv;
    uint32_t cp = jinja_utf8_next(s->s + k, s->len - k, &adv);
    char tmp[4];
    bool alpha = jinja_cp_alpha(cp);
    uint32_t out = alpha ? (prev_cased ? jinja_cp_lower(cp) : jinja_cp_upper(cp)) : cp;
    prev_cased = alpha;
    jinja_buf_add(&r->c, &b, tmp, jinja_utf8_put(out, tmp));
    k += adv;
  }
  return jinja_buf_value(&r->c, &b);
}

/* Jinja's title filter: words start after whitespace, '-', '(', '{', '[' or '<'. */
static Value
jinja_title(R *r, const Str *s)
{
  Buf b = { 0 };
  bool at_start = true;
  for (size_t k = 0; k < s->len;) {
    size_t adv;
    uint32_t cp = jinja_utf8_next(s->s + k, s->len - k, &adv);
    bool sep = jinja_py_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    char tmp[4];
    uint32_t out = sep ? cp : at_start ? jinja_cp_upper(cp) : jinja_cp_lower(cp);
    at_start = sep;
    jinja_buf_add(&r->c, &b, tmp, jinja_utf8_put(out, tmp));
    k += adv;
  }
  return jinja_buf_value(&r->c, &b);
}

static Value
capitalize(R *r, const Str *s)
{
  Buf b = { 0 };
  bool first = true;
  for (size_t k = 0; k < s->len;) {
    size_t adv;
    uint32_t cp = jinja_utf8_next(s->s + k, s->len - k, &adv);
    char tmp[4];
    jinja_buf_add(&r->c, &b, tmp, jinja_utf8_put(first ? jinja_cp_upper(cp) : jinja_cp_lower(cp), tmp));
    first = false;
    k += adv;
  }
  return jinja_buf_value(&r->c, &b);
}

static bool
char_in_set(uint32_t cp, const Str *chars)
{
  if (!chars)
    return jinja_py_space(cp);
  for (size_t k = 0; k < chars->len;) {
    size_t adv;
    if (jinja_utf8_next(chars->s + k, chars->len - k, &adv) == cp)
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
      uint32_t cp = jinja_utf8_next(s->s + start, end - start, &adv);
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
      uint32_t cp = jinja_utf8_next(s->s + b, end - b, &adv);
      if (b + adv != end) {
        b = end - 1;
        cp = 0xDC00 + (unsigned char)s->s[b];
      }
      if (!char_in_set(cp, chars))
        break;
      end = b;
    }
  }
  return jinja_v_str(&r->c, s->s + start, end - start);
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
        jinja_buf_add(&r->c, &b, with->s, with->len);
        done++;
      }
      if (k >= s->len)
        break;
      size_t adv;
      jinja_utf8_next(s->s + k, s->len - k, &adv);
      jinja_buf_add(&r->c, &b, s->s + k, adv);
      k += adv;
    }
    return jinja_buf_value(&r->c, &b);
  }
  size_t k = 0;
  int64_t done = 0;
  while (k < s->len) {
    const char *hit = (count < 0 || done < count) ? memmem(s->s + k, s->len - k, old->s, old->len) : NULL;
    if (!hit) {
      jinja_buf_add(&r->c, &b, s->s + k, s->len - k);
      break;
    }
    jinja_buf_add(&r->c, &b, s->s + k, (size_t)(hit - (s->s + k)));
    jinja_buf_add(&r->c, &b, with->s, with->len);
    k = (size_t)(hit - s->s) + old->len;
    done++;
  }
  return jinja_buf_value(&r->c, &b);
}

static Value
split(R *r, const Node *n, const Str *s, const Str *sep, int64_t maxsplit)
{
  size_t cap = 8, count = 0;
  Value *items = jinja_xalloc(&r->c, cap * sizeof(Value));
#define PUSH(v)                                                                \
  do {                                                                         \
    JINJA_ARENA_RESERVE(&r->c, items, count, cap, count + 1, 8);               \
    items[count++] = (v);                                                      \
  } while (0)
  if (sep) {
    if (sep->len == 0)
      jinja_rfail(r, n, "empty separator");
    size_t k = 0;
    int64_t done = 0;
    for (;;) {
      const char *hit = (maxsplit < 0 || done < maxsplit) ? memmem(s->s + k, s->len - k, sep->s, sep->len) : NULL;
      if (!hit) {
        PUSH(jinja_v_str(&r->c, s->s + k, s->len - k));
        break;
      }
      PUSH(jinja_v_str(&r->c, s->s + k, (size_t)(hit - (s->s + k))));
      k = (size_t)(hit - s->s) + sep->len;
      done++;
    }
  } else {
    size_t k = 0;
    int64_t done = 0;
    for (;;) {
      k += jinja_leading_space(s->s + k, s->len - k);
      if (k >= s->len)
        break;
      if (maxsplit >= 0 && done >= maxsplit) {
        size_t end = s->len - jinja_trailing_space(s->s + k, s->len - k);
        PUSH(jinja_v_str(&r->c, s->s + k, end - k));
        break;
      }
      size_t e = k;
      while (e < s->len) {
        size_t adv;
        uint32_t cp = jinja_utf8_next(s->s + e, s->len - e, &adv);
        if (jinja_py_space(cp))
          break;
        e += adv;
      }
      PUSH(jinja_v_str(&r->c, s->s + k, e - k));
      done++;
      k = e;
    }
  }
#undef PUSH
  Value res = { .t = T_LIST };
  res.l = jinja_xalloc0(&r->c, sizeof(List));
  res.l->n = count;
  res.l->items = items;
  return res;
}

static Value
list_from(R *r, Value *items, size_t n)
{
  Value res = jinja_v_list(&r->c, n);
  if (n)
    memcpy(res.l->items, items, n * sizeof(Value));
  return res;
}

static Value
dict_items(R *r, Dict *d)
{
  Value res = jinja_v_list(&r->c, d->n);
  for (size_t k = 0; k < d->n; k++) {
    Value pair = jinja_v_list(&r->c, 2);
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
  case T_STR: return jinja_utf8_count(v.s->s, v.s->len);
  case T_LIST:
    if (v.l->lazy)
      jinja_rfail(r, n, "object of type 'generator' has no len()");
    return v.l->n;
  case T_DICT: return v.d->n;
  case T_UNDEF: return 0;
  default: jinja_rfail(r, n, "object of type '%s' has no len()", jinja_type_name(&v));
  }
}

/* ---- tests ---- */

bool
jinja_run_test(R *r, const Node *n, const char *name, Value v, const Args *a)
{
  Value x = jinja_arg(a, 0, NULL, UNDEF);
  if (!strcmp(name, "defined")) return v.t != T_UNDEF;
  if (!strcmp(name, "undefined")) return v.t == T_UNDEF;
  if (!strcmp(name, "none")) return v.t == T_NONE;
  if (!strcmp(name, "string")) return v.t == T_STR;
  if (!strcmp(name, "number")) return jinja_is_num(&v);
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
    Value divisor = name[0] == 'd' ? x : jinja_v_int(2);
    if (!jinja_is_num(&v) || !jinja_is_num(&divisor)) {
      if (v.t == T_UNDEF)
        jinja_undef_fail(r, n, &v);
      jinja_rfail(r, n, "test '%s' needs numbers, not %s", name, jinja_type_name(jinja_is_num(&v) ? &divisor : &v));
    }
    Value m = jinja_arith(r, n, OP_MOD, v, divisor);
    double mv = jinja_num_f(&m);
    return name[0] == 'o' ? mv == 1.0 : mv == 0.0;
  }
  if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return jinja_values_equal(&v, &x);
  if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !jinja_values_equal(&v, &x);
  if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) return jinja_compare(r, n, &v, &x, "<") < 0;
  if (!strcmp(name, "le") || !strcmp(name, "<=")) return jinja_compare(r, n, &v, &x, "<=") <= 0;
  if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) return jinja_compare(r, n, &v, &x, ">") > 0;
  if (!strcmp(name, "ge") || !strcmp(name, ">=")) return jinja_compare(r, n, &v, &x, ">=") >= 0;
  if (!strcmp(name, "in")) return jinja_contains(r, n, v, x);
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
    return jinja_values_equal(&v, &x);
  }
  if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
    if (v.t != T_STR)
      jinja_rfail(r, n, "test '%s' needs a string", name);
    Value m = map_case(r, v.s, name[0] == 'l' ? jinja_cp_lower : jinja_cp_upper);
    return m.s->len == v.s->len && memcmp(m.s->s, v.s->s, v.s->len) == 0;
  }
  if (!strcmp(name, "escaped")) return false;
  jinja_rfail(r, n, "unknown test '%s'", name);
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
    jinja_rfail(r, n, "value nesting too deep for tojson");
  char tmp[64];
  switch (v.t) {
  case T_NONE: jinja_buf_adds(&r->c, b, "null"); break;
  case T_BOOL: jinja_buf_adds(&r->c, b, v.b ? "true" : "false"); break;
  case T_INT:
    snprintf(tmp, sizeof tmp, "%lld", (long long)v.i);
    jinja_buf_adds(&r->c, b, tmp);
    break;
  case T_FLOAT:
    if (isnan(v.f))
      jinja_buf_adds(&r->c, b, "NaN");
    else if (isinf(v.f))
      jinja_buf_adds(&r->c, b, v.f > 0 ? "Infinity" : "-Infinity");
    else {
      jinja_float_str(v.f, tmp, sizeof tmp);
      jinja_buf_adds(&r->c, b, tmp);
    }
    break;
  case T_STR: {
    size_t len;
    char *q = hn_json_quote(v.s->s, v.s->len, r->json_ascii, &len);
    if (!q)
      jinja_fail_nomem(&r->c);
    /* copy then free before anything can unwind */
    Str *copy = (Str *)jinja_arena_try_alloc(&r->c.arena, sizeof(Str) + len + 1);
    if (copy)
      memcpy(copy->s, q, len);
    free(q);
    if (!copy)
      jinja_fail_nomem(&r->c);
    jinja_buf_add(&r->c, b, copy->s, len);
    break;
  }
  case T_LIST:
    if (v.l->lazy)
      jinja_rfail(r, n, "Object of type generator is not JSON serializable");
    /* fall through */
  case T_DICT: {
    bool obj = v.t == T_DICT;
    size_t count = obj ? v.d->n : v.l->n;
    size_t *order = NULL;
    if (obj && st->sort_keys && count > 1) {
      /* sort_keys: keys must all be strings (Python cannot order mixed types) */
      Value *keys = jinja_xalloc(&r->c, jinja_xmul(&r->c, count, sizeof(Value)));
      Value *idx = jinja_xalloc(&r->c, jinja_xmul(&r->c, count, sizeof(Value)));
      for (size_t k = 0; k < count; k++) {
        keys[k] = v.d->keys[k];
        idx[k] = jinja_v_int((int64_t)k);
      }
      merge_sort(r, n, idx, keys, count, false, true);
      order = jinja_xalloc(&r->c, jinja_xmul(&r->c, count, sizeof(size_t)));
      for (size_t k = 0; k < count; k++)
        order[k] = (size_t)idx[k].i;
    }
    jinja_buf_addc(&r->c, b, obj ? '{' : '[');
    for (size_t k = 0; k < count; k++) {
      size_t m = k;
      if (obj && order)
        m = order[k];
      if (k) {
        if (st->item_sep)
          jinja_buf_add(&r->c, b, st->item_sep->s, st->item_sep->len);
        else
          jinja_buf_adds(&r->c, b, indent >= 0 ? "," : ", ");
      }
      if (indent >= 0) {
        jinja_buf_addc(&r->c, b, '\n');
        for (int64_t s = 0; s < indent * (level + 1); s++)
          jinja_buf_addc(&r->c, b, ' ');
      }
      if (obj) {
        Value key = v.d->keys[m];
        if (key.t == T_STR) {
          json_out(r, n, b, key, st, level + 1);
        } else if (key.t == T_INT || key.t == T_FLOAT || key.t == T_BOOL || key.t == T_NONE) {
          Buf kb = { 0 };
          if (key.t == T_BOOL)
            jinja_buf_adds(&r->c, &kb, key.b ? "true" : "false");
          else if (key.t == T_NONE)
            jinja_buf_adds(&r->c, &kb, "null");
          else
            jinja_to_str_buf(r, &kb, key);
          json_out(r, n, b, jinja_buf_value(&r->c, &kb), st, level + 1);
        } else {
          jinja_rfail(r, n, "keys must be str, int, float, bool or None, not %s", jinja_type_name(&key));
        }
        if (st->key_sep)
          jinja_buf_add(&r->c, b, st->key_sep->s, st->key_sep->len);
        else
          jinja_buf_adds(&r->c, b, ": ");
        json_out(r, n, b, v.d->vals[m], st, level + 1);
      } else {
        json_out(r, n, b, v.l->items[k], st, level + 1);
      }
    }
    if (indent >= 0 && count) {
      jinja_buf_addc(&r->c, b, '\n');
      for (int64_t s = 0; s < indent * level; s++)
        jinja_buf_addc(&r->c, b, ' ');
    }
    jinja_buf_addc(&r->c, b, obj ? '}' : ']');
    break;
  }
  default:
    jinja_rfail(r, n, "Object of type %s is not JSON serializable", jinja_type_name(&v));
  }
  r->depth--;
}

/* ---- filters ---- */

static Value apply_str_filter(R *r, const Node *n, const char *name, Str *s, const Args *a);

/* Jinja's attribute getter for filters: item lookup first, dotted paths, integer parts. */
static Value
attr_path(R *r, const Node *n, Value v, const Str *path)
{
  size_t k = 0;
  while (k <= path->len) {
    const char *dot = memchr(path->s + k, '.', path->len - k);
    size_t e = dot ? (size_t)(dot - path->s) : path->len;
    Str *part = jinja_str_new(&r->c, path->s + k, e - k);
    bool digits = part->len > 0;
    for (size_t j = 0; j < part->len; j++)
      digits = digits && part->s[j] >= '0' && part->s[j] <= '9';
    if (v.t == T_UNDEF)
      return v;
    if (digits && part->len < 18) {
      v = jinja_get_item(r, n, v, jinja_v_int(strtoll(part->s, NULL, 10)));
    } else {
      Value key = { .t = T_STR };
      key.s = part;
      v = jinja_get_item(r, n, v, key);
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
  /* a filter called without arguments has no argument array: NULL + 0 is undefined */
  if (skip > 0) {
    out.pos += skip;
    out.npos -= skip;
  }
  return out;
}

static int
sort_cmp(R *r, const Node *n, Value x, Value y, bool case_sensitive)
{
  jinja_step(r, n);
  /* Jinja sorts on one-element key lists, which compare equal items (even two
   * undefined attributes) without calling '<' */
  if (jinja_values_equal(&x, &y))
    return 0;
  if (!case_sensitive) {
    if (x.t == T_STR)
      x = map_case(r, x.s, jinja_cp_lower);
    if (y.t == T_STR)
      y = map_case(r, y.s, jinja_cp_lower);
  }
  return jinja_compare(r, n, &x, &y, "<");
}

static void
merge_sort(R *r, const Node *n, Value *items, Value *keys, size_t count, bool reverse, bool case_sensitive)
{
  if (count < 2)
    return;
  Value *tmp_items = jinja_xalloc(&r->c, jinja_xmul(&r->c, count, sizeof(Value)));
  Value *tmp_keys = jinja_xalloc(&r->c, jinja_xmul(&r->c, count, sizeof(Value)));
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
  if (!jinja_truthy(&v)) { /* Jinja: `if value:` guards the generator, so none|select is empty */
    Value e = jinja_v_list(&r->c, 0);
    e.l->lazy = true;
    return e;
  }
  List *items = jinja_iterate(r, n, v);
  Value res = jinja_v_list(&r->c, items->n);
  size_t count = 0;
  Value attr = by_attr ? jinja_arg(a, 0, NULL, UNDEF) : UNDEF;
  if (by_attr && attr.t != T_STR)
    jinja_rfail(r, n, "%s needs an attribute name", keep ? "selectattr" : "rejectattr");
  Args rest = args_shift(a, by_attr ? 1 : 0);
  Value test = jinja_arg(&rest, 0, NULL, UNDEF);
  Args targs = args_shift(&rest, 1);
  for (size_t k = 0; k < items->n; k++) {
    jinja_step(r, n);
    Value x = items->items[k];
    if (by_attr)
      x = attr_path(r, n, x, attr.s);
    bool ok;
    if (test.t == T_UNDEF)
      ok = jinja_truthy(&x);
    else
      ok = jinja_run_test(r, n, jinja_need_str(r, n, test, "the test name")->s, x, &targs);
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
  Value width = jinja_arg(a, 0, "width", jinja_v_int(4));
  Value vfirst = jinja_arg(a, 1, "first", jinja_v_bool(false));
  Value vblank = jinja_arg(a, 2, "blank", jinja_v_bool(false));
  bool first = jinja_truthy(&vfirst);
  bool blank = jinja_truthy(&vblank);
  Buf ind = { 0 };
  if (width.t == T_STR) {
    jinja_buf_add(&r->c, &ind, width.s->s, width.s->len);
  } else {
    int64_t w = jinja_need_int(r, n, width, "indent width");
    for (int64_t k = 0; k < w && k < 4096; k++)
      jinja_buf_addc(&r->c, &ind, ' ');
  }
  Buf out = { 0 };
  if (first)
    jinja_buf_add(&r->c, &out, ind.data, ind.len);
  /* Python's splitlines() boundaries: \n \r \r\n \v \f \x1c-\x1e \x85 \u2028 \u2029 */
  size_t k = 0;
  bool line_start = false;
  while (k < s->len) {
    size_t adv;
    uint32_t cp = jinja_utf8_next(s->s + k, s->len - k, &adv);
    bool nl = cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' || (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 ||
              cp == 0x2028 || cp == 0x2029;
    if (line_start) {
      /* a line that is empty (ends right away) is not indented unless blank */
      if (!nl || blank)
        jinja_buf_add(&r->c, &out, ind.data, ind.len);
      line_start = false;
    }
    if (nl) {
      if (cp == '\r' && k + 1 < s->len && s->s[k + 1] == '\n')
        adv = 2;
      jinja_buf_addc(&r->c, &out, '\n');
      line_start = true;
    } else {
      jinja_buf_add(&r->c, &out, s->s + k, adv);
    }
    k += adv;
  }
  if (line_start && blank)
    jinja_buf_add(&r->c, &out, ind.data, ind.len);
  return jinja_buf_value(&r->c, &out);
}

Value
jinja_apply_filter(R *r, const Node *n, const char *name, Value v, const Args *a)
{
  jinja_step(r, n);
  if (!strcmp(name, "safe")) {
    if (v.t == T_STR && v.markup)
      return v;
    Value m = jinja_to_str(r, v);
    m.markup = 1;
    return m;
  }
  if (!strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "forceescape")) {
    if (v.t == T_STR && v.markup && name[0] != 'f')
      return v;
    return jinja_html_escape(r, jinja_to_str(r, v).s);
  }
  if (!strcmp(name, "length") || !strcmp(name, "count"))
    return jinja_v_int((int64_t)length_of(r, n, v));
  if (!strcmp(name, "default") || !strcmp(name, "d")) {
    Value def = jinja_arg(a, 0, "default_value", jinja_v_str(&r->c, "", 0));
    Value boolean = jinja_arg(a, 1, "boolean", jinja_v_bool(false));
    if (v.t == T_UNDEF || (jinja_truthy(&boolean) && !jinja_truthy(&v)))
      return def;
    return v;
  }
  if (!strcmp(name, "string"))
    return jinja_to_str(r, v);
  if (!strcmp(name, "tojson")) {
    /* HF's signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
    Value ascii = jinja_arg(a, 1, "ensure_ascii", jinja_v_bool(false));
    Value ind = jinja_arg(a, 0, "indent", NONE);
    Value seps = jinja_arg(a, 2, "separators", NONE);
    Value sort = jinja_arg(a, 3, "sort_keys", jinja_v_bool(false));
    JsonStyle st = { -1, NULL, NULL, jinja_truthy(&sort) };
    if (seps.t != T_NONE) {
      if (seps.t != T_LIST || seps.l->n != 2)
        jinja_rfail(r, n, "tojson: separators must be a pair of strings");
      st.item_sep = jinja_need_str(r, n, seps.l->items[0], "item separator");
      st.key_sep = jinja_need_str(r, n, seps.l->items[1], "key separator");
    }
    r->json_ascii = jinja_truthy(&ascii);
    st.indent = ind.t == T_NONE ? -1 : jinja_need_int(r, n, ind, "indent");
    if (st.indent > 64)
      st.indent = 64;
    Buf b = { 0 };
    json_out(r, n, &b, v, &st, 0);
    return jinja_buf_value(&r->c, &b);
  }
  if (!strcmp(name, "list")) {
    List *items = jinja_iterate(r, n, v);
    return list_from(r, items->items, items->n);
  }
  if (!strcmp(name, "items")) {
    if (v.t == T_UNDEF)
      return jinja_v_list(&r->c, 0);
    if (v.t != T_DICT)
      jinja_rfail(r, n, "can only get item pairs from a mapping, not %s", jinja_type_name(&v));
    Value items = dict_items(r, v.d);
    items.l->lazy = true;
    return items;
  }
  if (!strcmp(name, "first") || !strcmp(name, "last")) {
    List *items = jinja_iterate(r, n, v);
    if (name[0] == 'l' && v.t == T_LIST && v.l->lazy)
      jinja_rfail(r, n, "'generator' object is not reversible");
    if (items->n == 0)
      return jinja_make_undef(r, "No %s item, sequence was empty.", name);
    return items->items[name[0] == 'f' ? 0 : items->n - 1];
  }
  if (!strcmp(name, "reverse")) {
    if (v.t == T_STR) {
      List *chars = jinja_str_chars(r, v.s);
      Buf b = { 0 };
      for (size_t k = chars->n; k > 0; k--)
        jinja_buf_add(&r->c, &b, chars->items[k - 1].s->s, chars->items[k - 1].s->len);
      return jinja_buf_value(&r->c, &b);
    }
    List *items = jinja_iterate(r, n, v);
    Value res = jinja_v_list(&r->c, items->n);
    for (size_t k = 0; k < items->n; k++)
      res.l->items[k] = items->items[items->n - 1 - k];
    /* reversed() of a list is an iterator; of a generator, Jinja builds a list */
    res.l->lazy = !(v.t == T_LIST && v.l->lazy);
    return res;
  }
  if (!strcmp(name, "join")) {
    Value sep = jinja_arg(a, 0, "d", jinja_v_str(&r->c, "", 0));
    Value attr = jinja_arg(a, 1, "attribute", NONE);
    Str *s = jinja_need_str(r, n, jinja_to_str(r, sep), "separator");
    List *items = jinja_iterate(r, n, v);
    Buf b = { 0 };
    for (size_t k = 0; k < items->n; k++) {
      if (k)
        jinja_buf_add(&r->c, &b, s->s, s->len);
      Value x = items->items[k];
      if (attr.t == T_STR)
        x = attr_path(r, n, x, attr.s);
      jinja_to_str_buf(r, &b, x);
    }
    return jinja_buf_value(&r->c, &b);
  }
  if (!strcmp(name, "map")) {
    if (!jinja_truthy(&v)) {
      Value e = jinja_v_list(&r->c, 0);
      e.l->lazy = true;
      return e;
    }
    List *items = jinja_iterate(r, n, v);
    Value res = jinja_v_list(&r->c, items->n);
    Value attr = jinja_arg(a, 99, "attribute", UNDEF);
    Value def = jinja_arg(a, 99, "default", UNDEF);
    for (size_t k = 0; k < items->n; k++) {
      jinja_step(r, n);
      Value x = items->items[k];
      if (attr.t != T_UNDEF) {
        x = attr_path(r, n, x, jinja_to_str(r, attr).s);
        if (x.t == T_UNDEF && def.t != T_UNDEF)
          x = def;
      } else {
        Value fname = jinja_arg(a, 0, NULL, UNDEF);
        if (fname.t != T_STR)
          jinja_rfail(r, n, "map needs a filter name or attribute=");
        Args rest = args_shift(a, 1);
        rest.nkw = 0;
        x = jinja_apply_filter(r, n, fname.s->s, x, &rest);
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
    Value rev = is_sort ? jinja_arg(a, 0, "reverse", jinja_v_bool(false)) : jinja_v_bool(false);
    Value cs = jinja_arg(a, is_sort ? 1 : 0, "case_sensitive", jinja_v_bool(false));
    Value attr = jinja_arg(a, is_sort ? 2 : 1, "attribute", NONE);
    List *items = jinja_iterate(r, n, v);
    Value res = list_from(r, items->items, items->n);
    Value *keys = jinja_xalloc(&r->c, jinja_xmul(&r->c, items->n + 1, sizeof(Value)));
    for (size_t k = 0; k < items->n; k++)
      keys[k] = attr.t == T_STR ? attr_path(r, n, items->items[k], attr.s) : items->items[k];
    if (is_unique) {
      size_t count = 0;
      for (size_t k = 0; k < items->n; k++) {
        jinja_step(r, n);
        Value key = keys[k];
        if ((key.t == T_LIST && !key.l->tuple) || key.t == T_DICT || key.t == T_NS)
          jinja_rfail(r, n, "unhashable type: '%s'", jinja_type_name(&key));
        if (!jinja_truthy(&cs) && key.t == T_STR)
          key = map_case(r, key.s, jinja_cp_lower);
        bool seen = false;
        jinja_charge(r, n, k);
        for (size_t j = 0; j < k && !seen; j++) {
          Value other = keys[j];
          if (!jinja_truthy(&cs) && other.t == T_STR)
            other = map_case(r, other.s, jinja_cp_lower);
          seen = jinja_values_equal(&key, &other);
        }
        if (!seen)
          res.l->items[count++] = items->items[k];
      }
      res.l->n = count;
      res.l->lazy = true;
      return res;
    }
    merge_sort(r, n, res.l->items, keys, res.l->n, jinja_truthy(&rev), jinja_truthy(&cs));
    if (is_sort)
      return res;
    if (res.l->n == 0)
      return jinja_make_undef(r, "No aggregated item, sequence was empty.");
    return name[1] == 'i' ? res.l->items[0] : res.l->items[res.l->n - 1];
  }
  if (!strcmp(name, "sum")) {
    Value attr = jinja_arg(a, 0, "attribute", NONE);
    Value total = jinja_arg(a, 1, "start", jinja_v_int(0));
    List *items = jinja_iterate(r, n, v);
    for (size_t k = 0; k < items->n; k++)
      total = jinja_arith(r, n, OP_ADD, total, attr.t == T_STR ? attr_path(r, n, items->items[k], attr.s) : items->items[k]);
    return total;
  }
  if (!strcmp(name, "abs")) {
    if (v.t == T_INT) {
      if (v.i == INT64_MIN)
        jinja_rfail(r, n, "integer overflow");
      return jinja_v_int(v.i < 0 ? -v.i : v.i);
    }
    if (v.t == T_BOOL)
      return jinja_v_int(v.b);
    if (v.t == T_FLOAT)
      return jinja_v_float(fabs(v.f));
    jinja_rfail(r, n, "bad operand type for abs(): '%s'", jinja_type_name(&v));
  }
  if (!strcmp(name, "round")) {
    Value prec = jinja_arg(a, 0, "precision", jinja_v_int(0));
    Value method = jinja_arg(a, 1, "method", jinja_v_cstr(&r->c, "common"));
    if (!jinja_is_num(&v))
      jinja_rfail(r, n, "round needs a number, not %s", jinja_type_name(&v));
    int64_t digits = jinja_need_int(r, n, prec, "precision");
    double x = jinja_num_f(&v), m = pow(10.0, (double)digits);
    const char *how = jinja_need_str(r, n, method, "method")->s;
    /* Python's round() of an int stays an int */
    if (!strcmp(how, "common") && (v.t == T_INT || v.t == T_BOOL) && digits >= 0)
      return jinja_v_int(jinja_num_i(&v));
    double y;
    if (!strcmp(how, "common") && digits >= 0 && digits <= 60 && isfinite(x) && fabs(x) < 1e16) {
      /* Python's round(): correctly rounded from the exact binary value, ties to even,
       * which is what glibc's printf does */
      char tmp[400];
      locale_t old = uselocale(jinja_c_time_locale());
      snprintf(tmp, sizeof tmp, "%.*f", (int)digits, x);
      y = jinja_c_strtod(tmp, NULL);
      uselocale(old);
    } else if (!strcmp(how, "common"))
      y = round(x * m) / m;
    else if (!strcmp(how, "floor"))
      y = floor(x * m) / m;
    else if (!strcmp(how, "ceil"))
      y = ceil(x * m) / m;
    else
      jinja_rfail(r, n, "method must be common, ceil or floor");
    return jinja_v_float(y);
  }
  if ((!strcmp(name, "int") || !strcmp(name, "float")) && v.t == T_UNDEF)
    jinja_undef_fail(r, n, &v);
  if (!strcmp(name, "int")) {
    Value def = jinja_arg(a, 0, "default", jinja_v_int(0));
    if (v.t == T_INT)
      return v;
    if (v.t == T_BOOL)
      return jinja_v_int(v.b);
    if (v.t == T_FLOAT)
      return isfinite(v.f) && fabs(v.f) < 9.2e18 ? jinja_v_int((int64_t)v.f) : def;
    if (v.t == T_STR) {
      Value t = strip(r, v.s, NULL, true, true);
      char *end;
      errno = 0;
      long long i = strtoll(t.s->s, &end, 10);
      if (t.s->len && *end == '\0' && errno == 0)
        return jinja_v_int(i);
      double d = jinja_c_strtod(t.s->s, &end);
      if (t.s->len && *end == '\0' && isfinite(d) && fabs(d) < 9.2e18)
        return jinja_v_int((int64_t)d);
    }
    return def;
  }
  if (!strcmp(name, "float")) {
    Value def = jinja_arg(a, 0, "default", jinja_v_float(0.0));
    if (jinja_is_num(&v))
      return jinja_v_float(jinja_num_f(&v));
    if (v.t == T_STR) {
      Value t = strip(r, v.s, NULL, true, true);
      char *end;
      double d = jinja_c_strtod(t.s->s, &end);
      if (t.s->len && *end == '\0')
        return jinja_v_float(d);
    }
    return def;
  }
  if (!strcmp(name, "attr")) {
    Str *attr = jinja_need_str(r, n, jinja_arg(a, 0, "name", UNDEF), "attribute name");
    return jinja_get_attr(r, n, v, attr);
  }
  if (!strcmp(name, "dictsort")) {
    if (v.t != T_DICT)
      jinja_rfail(r, n, "dictsort needs a mapping");
    Value items = dict_items(r, v.d);
    Value *keys = jinja_xalloc(&r->c, jinja_xmul(&r->c, items.l->n + 1, sizeof(Value)));
    Value by = jinja_arg(a, 1, "by", jinja_v_cstr(&r->c, "key"));
    for (size_t k = 0; k < items.l->n; k++)
      keys[k] = items.l->items[k].l->items[!strcmp(jinja_to_str(r, by).s->s, "value") ? 1 : 0];
    Value cs = jinja_arg(a, 0, "case_sensitive", jinja_v_bool(false));
    Value rev = jinja_arg(a, 2, "reverse", jinja_v_bool(false));
    merge_sort(r, n, items.l->items, keys, items.l->n, jinja_truthy(&rev), jinja_truthy(&cs));
    return items;
  }
  /* string filters: the value is converted with str() first, like Jinja's soft_str */
  if (!strcmp(name, "trim") || !strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") ||
      !strcmp(name, "capitalize") || !strcmp(name, "replace") || !strcmp(name, "indent") ||
      !strcmp(name, "wordcount") || !strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "center") ||
      !strcmp(name, "truncate") || !strcmp(name, "striptags")) {
    if (v.t == T_UNDEF && strcmp(name, "trim") && strcmp(name, "upper") && strcmp(name, "lower"))
      v = jinja_v_str(&r->c, "", 0);
    bool mk = v.t == T_STR && v.markup;
    /* Jinja's indent does `s += "\n"` on the value itself: only strings work */
    if (!strcmp(name, "indent") && v.t != T_STR)
      jinja_rfail(r, n, "unsupported operand type(s) for +=: '%s' and 'str'", jinja_type_name(&v));
    Value res = apply_str_filter(r, n, name, jinja_to_str(r, v).s, a);
    /* Markup methods return Markup; replace and title go through plain str */
    if (mk && res.t == T_STR && strcmp(name, "replace") && strcmp(name, "title"))
      res.markup = 1;
    return res;
  }
  jinja_rfail(r, n, "no filter named '%s'", name);
}

static Value
apply_str_filter(R *r, const Node *n, const char *name, Str *s, const Args *a)
{
  {
    if (!strcmp(name, "trim")) {
      Value chars = jinja_arg(a, 0, "chars", NONE);
      return strip(r, s, chars.t == T_STR ? chars.s : NULL, true, true);
    }
    if (!strcmp(name, "upper")) return map_case(r, s, jinja_cp_upper);
    if (!strcmp(name, "lower")) return map_case(r, s, jinja_cp_lower);
    if (!strcmp(name, "title")) return jinja_title(r, s);
    if (!strcmp(name, "capitalize")) return capitalize(r, s);
    if (!strcmp(name, "replace")) {
      Str *old = jinja_need_str(r, n, jinja_arg(a, 0, "old", UNDEF), "old");
      Str *with = jinja_need_str(r, n, jinja_arg(a, 1, "new", UNDEF), "new");
      Value count = jinja_arg(a, 2, "count", NONE);
      return replace(r, s, old, with, count.t == T_NONE ? -1 : jinja_need_int(r, n, count, "count"));
    }
    if (!strcmp(name, "indent")) return indent_filter(r, n, s, a);  /* input checked by the caller */
    if (!strcmp(name, "wordcount")) {
      int64_t words = 0;
      bool in_word = false;
      for (size_t k = 0; k < s->len;) {
        size_t adv;
        uint32_t cp = jinja_utf8_next(s->s + k, s->len - k, &adv);
        bool w = jinja_cp_alpha(cp) || (cp >= '0' && cp <= '9') || cp == '_';
        if (w && !in_word)
          words++;
        in_word = w;
        k += adv;
      }
      return jinja_v_int(words);
    }
    if (!strcmp(name, "center")) {
      int64_t width = jinja_need_int(r, n, jinja_arg(a, 0, "width", jinja_v_int(80)), "width");
      int64_t len = (int64_t)jinja_utf8_count(s->s, s->len);
      if (width > 1 << 20)
        width = 1 << 20;
      if (width <= len)
        return jinja_v_str(&r->c, s->s, s->len);
      /* Python's str.center puts the odd space on the left when the width is odd */
      int64_t total = width - len, left = total / 2 + (total & width & 1);
      Buf b = { 0 };
      for (int64_t k = 0; k < left; k++)
        jinja_buf_addc(&r->c, &b, ' ');
      jinja_buf_add(&r->c, &b, s->s, s->len);
      for (int64_t k = 0; k < total - left; k++)
        jinja_buf_addc(&r->c, &b, ' ');
      return jinja_buf_value(&r->c, &b);
    }
    if (!strcmp(name, "escape") || !strcmp(name, "e")) {
      Buf b = { 0 };
      for (size_t k = 0; k < s->len; k++) {
        char ch = s->s[k];
        const char *rep = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;" : ch == '\'' ? "&#39;" : NULL;
        if (rep)
          jinja_buf_adds(&r->c, &b, rep);
        else
          jinja_buf_addc(&r->c, &b, ch);
      }
      return jinja_buf_value(&r->c, &b);
    }
  }
  jinja_rfail(r, n, "no filter named '%s'", name);
}

/* ---- methods ---- */

static Value call_str_method(R *r, const Node *n, Method *m, const Args *a);

Value
jinja_call_method(R *r, const Node *n, Method *m, const Args *a)
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
      Value chars = jinja_arg(a, 0, "chars", NONE);
      Str *set = chars.t == T_NONE ? NULL : jinja_need_str(r, n, chars, "chars");
      return strip(r, s, set, name[0] != 'r', name[0] != 'l');
    }
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
      Value pre = jinja_arg(a, 0, NULL, UNDEF);
      List *cands;
      Value one[1] = { pre };
      List single = { .n = 1, .items = one };
      cands = pre.t == T_LIST ? pre.l : &single;
      for (size_t k = 0; k < cands->n; k++) {
        Str *p = jinja_need_str(r, n, cands->items[k], name);
        if (p->len <= s->len &&
            memcmp(name[0] == 's' ? s->s : s->s + s->len - p->len, p->s, p->len) == 0)
          return jinja_v_bool(true);
      }
      return jinja_v_bool(false);
    }
    if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
      Value sep = jinja_arg(a, 0, "sep", NONE);
      Value maxsplit = jinja_arg(a, 1, "maxsplit", jinja_v_int(-1));
      int64_t ms = jinja_need_int(r, n, maxsplit, "maxsplit");
      if (name[0] == 'r' && ms >= 0) {
        /* rsplit with a limit: split fully, then re-join the leading parts */
        Value all = split(r, n, s, sep.t == T_NONE ? NULL : jinja_need_str(r, n, sep, "sep"), -1);
        if ((int64_t)all.l->n <= ms + 1)
          return all;
        size_t keep_from = all.l->n - (size_t)ms;
        Value res = jinja_v_list(&r->c, (size_t)ms + 1);
        Buf head = { 0 };
        for (size_t k = 0; k < keep_from; k++) {
          if (k)
            jinja_buf_adds(&r->c, &head, sep.t == T_NONE ? " " : sep.s->s);
          jinja_buf_add(&r->c, &head, all.l->items[k].s->s, all.l->items[k].s->len);
        }
        res.l->items[0] = jinja_buf_value(&r->c, &head);
        for (size_t k = keep_from; k < all.l->n; k++)
          res.l->items[k - keep_from + 1] = all.l->items[k];
        return res;
      }
      return split(r, n, s, sep.t == T_NONE ? NULL : jinja_need_str(r, n, sep, "sep"), ms);
    }
    if (!strcmp(name, "title")) return py_title(r, s);
    if (!strcmp(name, "upper")) return map_case(r, s, jinja_cp_upper);
    if (!strcmp(name, "lower") || !strcmp(name, "casefold")) return map_case(r, s, jinja_cp_lower);
    if (!strcmp(name, "capitalize")) return capitalize(r, s);
    if (!strcmp(name, "replace")) {
      Value count = jinja_arg(a, 2, "count", jinja_v_int(-1));
      return replace(r, s, jinja_need_str(r, n, jinja_arg(a, 0, NULL, UNDEF), "old"), jinja_need_str(r, n, jinja_arg(a, 1, NULL, UNDEF), "new"),
                     jinja_need_int(r, n, count, "count"));
    }
    jinja_charge(r, n, s->len / 64);
    if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") || !strcmp(name, "count")) {
      Str *sub = jinja_need_str(r, n, jinja_arg(a, 0, NULL, UNDEF), "substring");
      if (!strcmp(name, "count")) {
        if (sub->len == 0)
          return jinja_v_int((int64_t)jinja_utf8_count(s->s, s->len) + 1);
        int64_t c = 0;
        for (const char *p = s->s; (p = memmem(p, s->len - (size_t)(p - s->s), sub->s, sub->len)); p += sub->len)
          c++;
        return jinja_v_int(c);
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
          jinja_rfail(r, n, "substring not found");
        return jinja_v_int(-1);
      }
      return jinja_v_int((int64_t)jinja_utf8_count(s->s, (size_t)(hit - s->s)));
    }
    if (!strcmp(name, "join")) {
      List *items = jinja_iterate(r, n, jinja_arg(a, 0, NULL, UNDEF));
      Buf b = { 0 };
      for (size_t k = 0; k < items->n; k++) {
        if (k)
          jinja_buf_add(&r->c, &b, s->s, s->len);
        jinja_buf_add(&r->c, &b, jinja_need_str(r, n, items->items[k], "join item")->s, items->items[k].s->len);
      }
      return jinja_buf_value(&r->c, &b);
    }
    if (!strcmp(name, "splitlines")) {
      /* Python's line boundaries; no empty item after a final line break */
      Value res = jinja_v_list(&r->c, 0);
      size_t cap = 0, start = 0, k = 0;
      while (k < s->len) {
        size_t adv;
        uint32_t cp = jinja_utf8_next(s->s + k, s->len - k, &adv);
        bool nl = cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' || (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 ||
                  cp == 0x2028 || cp == 0x2029;
        if (nl || k + adv >= s->len) {
          size_t end = nl ? k : k + adv;
          JINJA_ARENA_RESERVE(&r->c, res.l->items, res.l->n, cap, res.l->n + 1, 8);
          res.l->items[res.l->n++] = jinja_v_str(&r->c, s->s + start, end - start);
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
        return jinja_v_bool(false);
      bool all = true, any_cased = false;
      for (size_t k = 0; k < s->len && all;) {
        size_t adv;
        uint32_t cp = jinja_utf8_next(s->s + k, s->len - k, &adv);
        if (!strcmp(name, "isdigit")) all = cp >= '0' && cp <= '9';
        else if (!strcmp(name, "isalpha")) all = jinja_cp_alpha(cp);
        else if (!strcmp(name, "isalnum")) all = jinja_cp_alpha(cp) || (cp >= '0' && cp <= '9');
        else if (!strcmp(name, "isspace")) all = jinja_py_space(cp);
        else if (!strcmp(name, "isupper")) { if (jinja_cp_lower(cp) != cp) any_cased = true; else if (jinja_cp_upper(cp) != cp) all = false; }
        else if (!strcmp(name, "islower")) { if (jinja_cp_upper(cp) != cp) any_cased = true; else if (jinja_cp_lower(cp) != cp) all = false; }
        k += adv;
      }
      if (!strcmp(name, "isupper") || !strcmp(name, "islower"))
        return jinja_v_bool(all && any_cased);
      return jinja_v_bool(all);
    }
    if (!strcmp(name, "format")) {
      /* str.format: {} {0} {name} with !s/!r; format specs are not supported */
      Buf b = { 0 };
      size_t auto_index = 0;
      for (size_t k = 0; k < s->len; k++) {
        char ch = s->s[k];
        if ((ch == '{' || ch == '}') && k + 1 < s->len && s->s[k + 1] == ch) {
          jinja_buf_addc(&r->c, &b, ch);
          k++;
          continue;
        }
        if (ch == '}')
          jinja_rfail(r, n, "Single '}' encountered in format string");
        if (ch != '{') {
          jinja_buf_addc(&r->c, &b, ch);
          continue;
        }
        const char *close = memchr(s->s + k, '}', s->len - k);
        if (!close)
          jinja_rfail(r, n, "Single '{' encountered in format string");
        size_t fstart = k + 1, fend = (size_t)(close - s->s);
        char conv = 0;
        size_t name_end = fend;
        for (size_t j = fstart; j < fend; j++)
          if (s->s[j] == '!' || s->s[j] == ':') {
            if (s->s[j] == ':')
              jinja_rfail(r, n, "format specifications in str.format are not supported");
            if (j + 2 != fend)
              jinja_rfail(r, n, "invalid conversion in format string");
            conv = s->s[j + 1];
            name_end = j;
            break;
          }
        Value v;
        if (name_end == fstart) {
          v = jinja_arg(a, auto_index++, NULL, UNDEF);
          if (auto_index > a->npos)
            jinja_rfail(r, n, "Replacement index %zu out of range for positional args tuple", auto_index - 1);
        } else if (s->s[fstart] >= '0' && s->s[fstart] <= '9') {
          size_t idx = (size_t)strtoul(s->s + fstart, NULL, 10);
          if (idx >= a->npos)
            jinja_rfail(r, n, "Replacement index %zu out of range for positional args tuple", idx);
          v = a->pos[idx];
        } else {
          Str *key = jinja_str_new(&r->c, s->s + fstart, name_end - fstart);
          v = jinja_arg(a, SIZE_MAX, key->s, (Value){ .t = 255 });
          if (v.t == 255)
            jinja_rfail(r, n, "KeyError: '%s'", key->s);
        }
        if (v.t == T_UNDEF)
          jinja_undef_fail(r, n, &v);
        if (conv == 'r')
          jinja_repr_buf(r, &b, v);
        else if (conv == 0 || conv == 's')
          jinja_to_str_buf(r, &b, v);
        else
          jinja_rfail(r, n, "Unknown conversion specifier %c", conv);
        k = fend;
      }
      return jinja_buf_value(&r->c, &b);
    }
    if (!strcmp(name, "swapcase")) {
      Buf b = { 0 };
      for (size_t k = 0; k < s->len;) {
        size_t adv;
        uint32_t cp = jinja_utf8_next(s->s + k, s->len - k, &adv);
        uint32_t up = jinja_cp_upper(cp);
        char tmp[4];
        jinja_buf_add(&r->c, &b, tmp, jinja_utf8_put(up != cp ? up : jinja_cp_lower(cp), tmp));
        k += adv;
      }
      return jinja_buf_value(&r->c, &b);
    }
    jinja_rfail(r, n, "str.%s() is not supported", name);
  }
  if (self.t == T_DICT) {
    if (!strcmp(name, "items")) return dict_items(r, self.d);
    if (!strcmp(name, "keys")) return list_from(r, self.d->keys, self.d->n);
    if (!strcmp(name, "values")) return list_from(r, self.d->vals, self.d->n);
    if (!strcmp(name, "get")) {
      Value key = jinja_arg(a, 0, NULL, UNDEF);
      Value *v = jinja_dict_find(self.d, &key);
      return v ? *v : jinja_arg(a, 1, NULL, NONE);
    }
    if (!strcmp(name, "copy")) {
      Value d = jinja_v_dict(&r->c);
      for (size_t k = 0; k < self.d->n; k++)
        jinja_dict_set(r, d.d, self.d->keys[k], self.d->vals[k]);
      return d;
    }
    jinja_rfail(r, n, "access to attribute '%s' of 'dict' object is unsafe", name);
  }
  if (self.t == T_LIST) {
    if (!strcmp(name, "index") || !strcmp(name, "count")) {
      Value x = jinja_arg(a, 0, NULL, UNDEF);
      int64_t c = 0;
      for (size_t k = 0; k < self.l->n; k++)
        if (jinja_values_equal(&self.l->items[k], &x)) {
          if (name[0] == 'i')
            return jinja_v_int((int64_t)k);
          c++;
        }
      if (name[0] == 'i')
        jinja_rfail(r, n, "value is not in list");
      return jinja_v_int(c);
    }
    if (!strcmp(name, "copy"))
      return list_from(r, self.l->items, self.l->n);
    jinja_rfail(r, n, "access to attribute '%s' of '%s' object is unsafe", name, jinja_type_name(&self));
  }
  if (self.t == T_LOOP && !strcmp(name, "cycle")) {
    if (a->npos == 0)
      jinja_rfail(r, n, "no items for cycling given");
    return a->pos[self.loop->index0 % a->npos];
  }
  jinja_rfail(r, n, "'%s' object has no method '%s'", jinja_type_name(&self), name);
}
