/* jinja-eval.c — the tree-walking evaluator: scopes, attribute and item access, operators,
 * calls and macros, expressions and statements.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "jinja-private.h"

static Value eval(R *r, const Node *n);

_Noreturn void
jinja_rfail(R *r, const Node *n, const char *fmt, ...)
{
  char msg[HN_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  jinja_fail_at(&r->c, n ? n->line : 0, n ? n->col : 0, "%s", msg);
}

_Noreturn void
jinja_undef_fail(R *r, const Node *n, const Value *v)
{
  jinja_rfail(r, n, "%s", v->s ? v->s->s : "value is undefined");
}

Value
jinja_make_undef(R *r, const char *fmt, ...)
{
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  Value v = { .t = T_UNDEF };
  v.s = jinja_str_new(&r->c, msg, strlen(msg));
  return v;
}

void
jinja_step(R *r, const Node *n)
{
  if (++r->steps > r->max_steps)
    jinja_rfail(r, n, "the template ran for more than %llu steps (endless loop?)", (unsigned long long)r->max_steps);
}

/* Work that does not allocate (scans, comparisons) is charged to the step budget, so
 * that a loop over a large value cannot run for minutes without hitting a limit. */
void
jinja_charge(R *r, const Node *n, size_t amount)
{
  r->steps += amount;
  if (r->steps > r->max_steps)
    jinja_rfail(r, n, "the template ran for more than %llu steps (endless loop?)", (unsigned long long)r->max_steps);
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

Scope *
jinja_scope_new(R *r, Scope *parent)
{
  Scope *s = jinja_xalloc0(&r->c, sizeof(Scope));
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

void
jinja_scope_set(R *r, Scope *s, Str *name, Value v)
{
  Value *slot = scope_find_local(s, name->s, name->len);
  if (slot) {
    *slot = v;
    return;
  }
  if (s->n == s->cap) {
    /* names and values share one capacity: the values grow to what the names got */
    size_t cap = s->cap;
    JINJA_ARENA_RESERVE(&r->c, s->names, s->n, cap, s->n + 1, 8);
    JINJA_ARENA_RESERVE(&r->c, s->vals, s->n, s->cap, cap, 8);
  }
  s->names[s->n] = name;
  s->vals[s->n] = v;
  s->n++;
}

void
jinja_scope_set_c(R *r, Scope *s, const char *name, Value v)
{
  jinja_scope_set(r, s, jinja_str_new(&r->c, name, strlen(name)), v);
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
  return jinja_make_undef(r, "'%.100s' is undefined", name->s);
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
  v.meth = jinja_xalloc(&r->c, sizeof(Method));
  v.meth->self = self;
  v.meth->name = name;
  return v;
}

static Value
loop_attr(R *r, LoopState *ls, const char *name)
{
  size_t i = ls->index0, len = ls->length;
  if (!strcmp(name, "index")) return jinja_v_int((int64_t)i + 1);
  if (!strcmp(name, "index0")) return jinja_v_int((int64_t)i);
  if (!strcmp(name, "revindex")) return jinja_v_int((int64_t)(len - i));
  if (!strcmp(name, "revindex0")) return jinja_v_int((int64_t)(len - i - 1));
  if (!strcmp(name, "first")) return jinja_v_bool(i == 0);
  if (!strcmp(name, "last")) return jinja_v_bool(i + 1 == len);
  if (!strcmp(name, "length")) return jinja_v_int((int64_t)len);
  if (!strcmp(name, "depth")) return jinja_v_int((int64_t)ls->depth0 + 1);
  if (!strcmp(name, "depth0")) return jinja_v_int((int64_t)ls->depth0);
  if (!strcmp(name, "previtem"))
    return i > 0 ? ls->items->items[i - 1] : jinja_make_undef(r, "there is no previous item");
  if (!strcmp(name, "nextitem"))
    return i + 1 < len ? ls->items->items[i + 1] : jinja_make_undef(r, "there is no next item");
  if (!strcmp(name, "cycle")) {
    Value self = { .t = T_LOOP };
    self.loop = ls;
    return method_value(r, self, "cycle");
  }
  return jinja_make_undef(r, "'LoopContext object' has no attribute '%.100s'", name);
}

Value
jinja_get_attr(R *r, const Node *n, Value obj, const Str *name)
{
  if (obj.t == T_DICT || obj.t == T_NS)
    jinja_charge(r, n, obj.d->n / 16);
  switch (obj.t) {
  case T_UNDEF: jinja_undef_fail(r, n, &obj);
  case T_DICT: {
    if (name_in(name->s, DICT_METHODS))
      return method_value(r, obj, name->s);
    Value *v = jinja_dict_find_str(obj.d, name->s, name->len);
    if (v)
      return *v;
    break;
  }
  case T_NS: {
    Value *v = jinja_dict_find_str(obj.d, name->s, name->len);
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
  return jinja_make_undef(r, "'%s object' has no attribute '%.100s'", obj.t == T_DICT ? "dict" : jinja_type_name(&obj), name->s);
}

Value
jinja_get_item(R *r, const Node *n, Value obj, Value key)
{
  switch (obj.t) {
  case T_UNDEF: jinja_undef_fail(r, n, &obj);
  case T_DICT:
  case T_NS: {
    Value *v = jinja_dict_find(obj.d, &key);
    if (v)
      return *v;
    if (key.t == T_STR && obj.t == T_DICT && name_in(key.s->s, DICT_METHODS))
      return method_value(r, obj, key.s->s);
    if (key.t == T_STR)
      return jinja_make_undef(r, "'dict object' has no attribute '%.100s'", key.s->s);
    return jinja_make_undef(r, "'dict object' has no item");
    }
  case T_LIST:
  case T_STR: {
    /* Jinja turns a failed subscript into an undefined value */
    if (obj.t == T_LIST && obj.l->lazy)
      return jinja_make_undef(r, "'generator object' has no item");
    if (key.t == T_STR)
      return jinja_get_attr(r, n, obj, key.s);
    if (key.t != T_INT && key.t != T_BOOL)
      return jinja_make_undef(r, "'%s object' has no item", jinja_type_name(&obj));
    int64_t i = jinja_num_i(&key);
    if (obj.t == T_LIST) {
      int64_t len = (int64_t)obj.l->n;
      if (i < 0)
        i += len;
      if (i < 0 || i >= len)
        return jinja_make_undef(r, "%s object has no element %lld", jinja_type_name(&obj), (long long)jinja_num_i(&key));
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
        return jinja_make_undef(r, "str object has no element %lld", (long long)jinja_num_i(&key));
      Value ch = jinja_v_str(&r->c, obj.s->s + i, 1);
    ch.markup = obj.markup;
    return ch;
    }
    List *chars = jinja_str_chars(r, obj.s);
    int64_t len = (int64_t)chars->n;
    if (i < 0)
      i += len;
    if (i < 0 || i >= len)
      return jinja_make_undef(r, "str object has no element %lld", (long long)jinja_num_i(&key));
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
  return jinja_make_undef(r, "'%s object' has no item", jinja_type_name(&obj));
}

/* Python slice index adjustment. */
static Value
do_slice(R *r, const Node *n, Value obj, Value vstart, Value vstop, Value vstep)
{
  int64_t step_v = 1;
  if (vstep.t != T_NONE && vstep.t != T_UNDEF) {
    if (vstep.t != T_INT && vstep.t != T_BOOL)
      jinja_rfail(r, n, "slice indices must be integers or None");
    step_v = jinja_num_i(&vstep);
    if (step_v == 0)
      jinja_rfail(r, n, "slice step cannot be zero");
  }
  List *items;
  bool is_str = obj.t == T_STR;
  /* slices bypass Jinja's getitem: Python's TypeError surfaces */
  if (obj.t == T_LIST && obj.l->lazy)
    jinja_rfail(r, n, "'generator' object is not subscriptable");
  if (obj.t == T_LIST)
    items = obj.l;
  else if (is_str)
    items = jinja_str_chars(r, obj.s);
  else if (obj.t == T_UNDEF)
    jinja_undef_fail(r, n, &obj);
  else if (obj.t == T_DICT)
    jinja_rfail(r, n, "unhashable type: 'slice'");
  else
    jinja_rfail(r, n, "'%s' object is not subscriptable", jinja_type_name(&obj));
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
      jinja_rfail(r, n, "slice indices must be integers or None");
    int64_t x = jinja_num_i(b);
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
      jinja_buf_add(&r->c, &b, ch->s->s, ch->s->len);
    }
    Value sv = jinja_buf_value(&r->c, &b);
    sv.markup = obj.markup;
    return sv;
  }
  Value res = jinja_v_list(&r->c, count);
  res.l->tuple = obj.l->tuple;
  for (size_t k = 0; k < count; k++)
    res.l->items[k] = items->items[start + (int64_t)k * step_v];
  return res;
}

/* ---- arithmetic ---- */

/* markupsafe.escape(): the result is Markup */
Value
jinja_html_escape(R *r, const Str *s)
{
  Buf b = { 0 };
  for (size_t k = 0; k < s->len; k++) {
    char ch = s->s[k];
    const char *rep = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;" : ch == '\'' ? "&#39;" : NULL;
    if (rep)
      jinja_buf_adds(&r->c, &b, rep);
    else
      jinja_buf_addc(&r->c, &b, ch);
  }
  Value v = jinja_buf_value(&r->c, &b);
  v.markup = 1;
  return v;
}

static Value
repeat_value(R *r, const Node *n, Value seq, int64_t times)
{
  if (times < 0)
    times = 0;
  if (seq.t == T_STR) {
    size_t total = jinja_xmul(&r->c, seq.s->len, (size_t)times);
    if (total > r->c.arena.limit)
      jinja_fail_nomem(&r->c);
    Buf b = { 0 };
    for (int64_t k = 0; k < times; k++)
      jinja_buf_add(&r->c, &b, seq.s->s, seq.s->len);
    return jinja_buf_value(&r->c, &b);
  }
  size_t total = jinja_xmul(&r->c, seq.l->n, (size_t)times);
  Value res = jinja_v_list(&r->c, total);
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
      jinja_buf_addc(&r->c, &b, ch);
      continue;
    }
    if (++k >= fmt->len)
      jinja_rfail(r, n, "incomplete format");
    char conv = fmt->s[k];
    if (conv == '%') {
      jinja_buf_addc(&r->c, &b, '%');
      continue;
    }
    if (used >= list->n)
      jinja_rfail(r, n, "not enough arguments for format string");
    Value v = list->items[used++];
    if (v.t == T_UNDEF)
      jinja_undef_fail(r, n, &v);
    if (conv == 's')
      jinja_to_str_buf(r, &b, v);
    else if (conv == 'r')
      jinja_repr_buf(r, &b, v);
    else if (conv == 'd' || conv == 'i') {
      if (!jinja_is_num(&v))
        jinja_rfail(r, n, "%%%c format: a number is required, not %s", conv, jinja_type_name(&v));
      jinja_to_str_buf(r, &b, jinja_v_int(v.t == T_FLOAT ? (int64_t)v.f : jinja_num_i(&v)));
    } else
      jinja_rfail(r, n, "unsupported format character '%c'", conv);
  }
  if (used < list->n)
    jinja_rfail(r, n, "not all arguments converted during string formatting");
  return jinja_buf_value(&r->c, &b);
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

Value
jinja_arith(R *r, const Node *n, int op, Value a, Value b)
{
  if (a.t == T_UNDEF)
    jinja_undef_fail(r, n, &a);
  if (b.t == T_UNDEF)
    jinja_undef_fail(r, n, &b);
  if (jinja_is_num(&a) && jinja_is_num(&b)) {
    if (a.t != T_FLOAT && b.t != T_FLOAT && op != OP_DIV) {
      int64_t x = jinja_num_i(&a), y = jinja_num_i(&b), z;
      switch (op) {
      case OP_ADD:
        if (__builtin_add_overflow(x, y, &z))
          jinja_rfail(r, n, "integer overflow");
        return jinja_v_int(z);
      case OP_SUB:
        if (__builtin_sub_overflow(x, y, &z))
          jinja_rfail(r, n, "integer overflow");
        return jinja_v_int(z);
      case OP_MUL:
        if (__builtin_mul_overflow(x, y, &z))
          jinja_rfail(r, n, "integer overflow");
        return jinja_v_int(z);
      case OP_FLOORDIV:
      case OP_MOD: {
        if (y == 0)
          jinja_rfail(r, n, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1)
          jinja_rfail(r, n, "integer overflow");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          q--;
          m += y;
        }
        return jinja_v_int(op == OP_MOD ? m : q);
      }
      case OP_POW: {
        if (y < 0)
          return jinja_v_float(pow((double)x, (double)y));
        int64_t result = 1, base = x;
        while (y > 0) {
          if (y & 1)
            if (__builtin_mul_overflow(result, base, &result))
              jinja_rfail(r, n, "integer overflow");
          y >>= 1;
          if (y && __builtin_mul_overflow(base, base, &base))
            jinja_rfail(r, n, "integer overflow");
        }
        return jinja_v_int(result);
      }
      }
    }
    double x = jinja_num_f(&a), y = jinja_num_f(&b);
    switch (op) {
    case OP_ADD: return jinja_v_float(x + y);
    case OP_SUB: return jinja_v_float(x - y);
    case OP_MUL: return jinja_v_float(x * y);
    case OP_DIV:
      if (y == 0)
        jinja_rfail(r, n, "division by zero");
      return jinja_v_float(x / y);
    case OP_FLOORDIV: {
      if (y == 0)
        jinja_rfail(r, n, "float floor division by zero");
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
      return jinja_v_float(floordiv);
    }
    case OP_MOD: {
      if (y == 0)
        jinja_rfail(r, n, "float modulo");
      double m = fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0)))
        m += y;
      return jinja_v_float(m);
    }
    case OP_POW: return jinja_v_float(pow(x, y));
    }
  }
  if (op == OP_ADD && a.t == T_STR && b.t == T_STR && (a.markup || b.markup)) {
    Value x = a.markup ? a : jinja_html_escape(r, a.s), y = b.markup ? b : jinja_html_escape(r, b.s);
    Value res = jinja_arith(r, n, OP_ADD, (Value){ .t = T_STR, .s = x.s }, (Value){ .t = T_STR, .s = y.s });
    res.markup = 1;
    return res;
  }
  if (op == OP_ADD && a.t == T_STR && b.t == T_STR) {
    Buf buf = { 0 };
    jinja_buf_reserve(&r->c, &buf, a.s->len + b.s->len);
    jinja_buf_add(&r->c, &buf, a.s->s, a.s->len);
    jinja_buf_add(&r->c, &buf, b.s->s, b.s->len);
    return jinja_buf_value(&r->c, &buf);
  }
  if (op == OP_ADD && a.t == T_LIST && b.t == T_LIST && a.l->tuple == b.l->tuple && !a.l->lazy && !b.l->lazy) {
    Value res = jinja_v_list(&r->c, a.l->n + b.l->n);
    res.l->tuple = a.l->tuple;
    if (a.l->n)
      memcpy(res.l->items, a.l->items, a.l->n * sizeof(Value));
    if (b.l->n)
      memcpy(res.l->items + a.l->n, b.l->items, b.l->n * sizeof(Value));
    return res;
  }
  if (op == OP_MUL && (a.t == T_STR || (a.t == T_LIST && !a.l->lazy)) && (b.t == T_INT || b.t == T_BOOL)) {
    Value res = repeat_value(r, n, a, jinja_num_i(&b));
    res.markup = a.markup;
    return res;
  }
  if (op == OP_MUL && (b.t == T_STR || (b.t == T_LIST && !b.l->lazy)) && (a.t == T_INT || a.t == T_BOOL)) {
    Value res = repeat_value(r, n, b, jinja_num_i(&a));
    res.markup = b.markup;
    return res;
  }
  if (op == OP_ADD && (a.t == T_STR || a.t == T_LIST))
    jinja_rfail(r, n, "can only concatenate %s (not \"%s\") to %s", jinja_type_name(&a), jinja_type_name(&b), jinja_type_name(&a));
  if (op == OP_MOD && a.t == T_STR)
    return printf_format(r, n, a.s, b);
  jinja_rfail(r, n, "unsupported operand type(s) for %s: '%s' and '%s'", op_symbol(op), jinja_type_name(&a), jinja_type_name(&b));
}

bool
jinja_contains(R *r, const Node *n, Value item, Value container)
{
  jinja_charge(r, n, value_size(&container));
  switch (container.t) {
  case T_STR:
    if (item.t != T_STR)
      jinja_rfail(r, n, "'in <string>' requires string as left operand, not %s", jinja_type_name(&item));
    if (item.s->len == 0)
      return true;
    return memmem(container.s->s, container.s->len, item.s->s, item.s->len) != NULL;
  case T_LIST:
    for (size_t k = 0; k < container.l->n; k++)
      if (jinja_values_equal(&container.l->items[k], &item))
        return true;
    return false;
  case T_DICT:
    if ((item.t == T_LIST && !item.l->tuple) || item.t == T_DICT || item.t == T_NS)
      jinja_rfail(r, n, "unhashable type: '%s'", jinja_type_name(&item));
    return jinja_dict_find(container.d, &item) != NULL;
  case T_UNDEF: return false;
  default: jinja_rfail(r, n, "argument of type '%s' is not iterable", jinja_type_name(&container));
  }
}

/* ---- arguments ---- */

Value
jinja_arg(const Args *a, size_t index, const char *kw, Value def)
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
    jinja_rfail(r, n, "%s takes at most %zu positional argument(s), %zu given", what, max_pos, a->npos);
  for (size_t k = 0; k < a->nkw; k++) {
    bool ok = false;
    for (size_t j = 0; kws && kws[j]; j++)
      if (!strcmp(a->kwn[k]->s, kws[j]))
        ok = true;
    if (!ok)
      jinja_rfail(r, n, "%s got an unexpected keyword argument '%s'", what, a->kwn[k]->s);
  }
}

Str *
jinja_need_str(R *r, const Node *n, Value v, const char *what)
{
  if (v.t == T_STR)
    return v.s;
  if (v.t == T_UNDEF)
    jinja_undef_fail(r, n, &v);
  jinja_rfail(r, n, "%s must be a string, not %s", what, jinja_type_name(&v));
}

int64_t
jinja_need_int(R *r, const Node *n, Value v, const char *what)
{
  if (v.t == T_INT || v.t == T_BOOL)
    return jinja_num_i(&v);
  if (v.t == T_UNDEF)
    jinja_undef_fail(r, n, &v);
  jinja_rfail(r, n, "%s must be an integer, not %s", what, jinja_type_name(&v));
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
      jinja_rfail(r, n, "range expected at least 1 argument, got 0");
    int64_t start = 0, stop, stp = 1;
    if (a->npos == 1) {
      stop = jinja_need_int(r, n, a->pos[0], "range() argument");
    } else {
      start = jinja_need_int(r, n, a->pos[0], "range() argument");
      stop = jinja_need_int(r, n, a->pos[1], "range() argument");
      if (a->npos == 3)
        stp = jinja_need_int(r, n, a->pos[2], "range() argument");
    }
    if (stp == 0)
      jinja_rfail(r, n, "range() arg 3 must not be zero");
    double count_d = stp > 0 ? ceil(((double)stop - (double)start) / (double)stp)
                             : ceil(((double)start - (double)stop) / (double)-stp);
    if (count_d < 0)
      count_d = 0;
    if (count_d > MAX_RANGE)
      jinja_rfail(r, n, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", MAX_RANGE);
    size_t count = (size_t)count_d;
    Value res = jinja_v_list(&r->c, count);
    for (size_t k = 0; k < count; k++)
      res.l->items[k] = jinja_v_int(start + (int64_t)k * stp);
    return res;
  }
  case FN_NAMESPACE:
  case FN_DICT: {
    Value d = jinja_v_dict(&r->c);
    if (fn == FN_NAMESPACE)
      d.t = T_NS;
    for (size_t k = 0; k < a->npos; k++) {
      if (a->pos[k].t != T_DICT)
        jinja_rfail(r, n, "%s() positional arguments must be mappings", fn == FN_DICT ? "dict" : "namespace");
      for (size_t j = 0; j < a->pos[k].d->n; j++)
        jinja_dict_set(r, d.d, a->pos[k].d->keys[j], a->pos[k].d->vals[j]);
    }
    for (size_t k = 0; k < a->nkw; k++) {
      Value key = { .t = T_STR };
      key.s = a->kwn[k];
      jinja_dict_set(r, d.d, key, a->kwv[k]);
    }
    return d;
  }
  case FN_RAISE: {
    Value msg = jinja_arg(a, 0, NULL, jinja_v_cstr(&r->c, "raise_exception() called"));
    Value s = jinja_to_str(r, msg);
    jinja_fail_at(&r->c, 0, 0, "%s", s.s->s);
  }
  case FN_STRFTIME: {
    Str *fmt = jinja_need_str(r, n, jinja_arg(a, 0, NULL, UNDEF), "strftime_now() format");
    struct tm tm;
    if (!localtime_r(&r->now, &tm))
      jinja_rfail(r, n, "cannot convert the current time");
    locale_t cloc = jinja_c_time_locale();
    size_t cap = 256 + fmt->len * 16;
    if (fmt->len > 1024)
      jinja_rfail(r, n, "strftime_now() format too long");
    char *out = jinja_xalloc(&r->c, cap);
    /* The format comes from the template by design (strftime_now is part of the HF API). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    size_t len = cloc ? strftime_l(out, cap, fmt->s, &tm, cloc) : strftime(out, cap, fmt->s, &tm);
#pragma GCC diagnostic pop
    return jinja_v_str(&r->c, out, len);
  }
  }
  jinja_rfail(r, n, "not callable");
}

static Value
call_macro_with(R *r, const Node *n, Macro *m, const Args *a, const Value *caller)
{
  const Node *def = m->node;
  size_t np = def->kwargs.n;
  if (a->npos > np)
    jinja_rfail(r, n, "macro '%s' takes not more than %zu argument(s)", def->name->s, np);
  if (++r->macro_depth > HN_CHAT_MAX_DEPTH)
    jinja_rfail(r, n, "macro calls nested deeper than %d", HN_CHAT_MAX_DEPTH);
  jinja_step(r, n);
  Scope *sc = jinja_scope_new(r, m->scope);
  Scope *saved_scope = r->scope;
  for (size_t k = 0; k < a->nkw; k++) {
    bool known = false;
    for (size_t j = 0; j < np; j++)
      if (!strcmp(def->kwnames[j]->s, a->kwn[k]->s))
        known = true;
    if (!known)
      jinja_rfail(r, n, "macro '%s' takes no keyword argument '%s'", def->name->s, a->kwn[k]->s);
  }
  for (size_t j = 0; j < np; j++) {
    Value v;
    if (j < a->npos) {
      v = a->pos[j];
    } else {
      v = jinja_arg(a, SIZE_MAX, def->kwnames[j]->s, (Value){ .t = 255 });
      if (v.t == 255) {
        if (def->kwargs.items[j]) {
          r->scope = sc;
          v = eval(r, def->kwargs.items[j]);
          r->scope = saved_scope;
        } else {
          v = jinja_make_undef(r, "'%.100s' is undefined", def->kwnames[j]->s);
        }
      }
    }
    jinja_scope_set(r, sc, def->kwnames[j], v);
  }
  if (caller)
    jinja_scope_set_c(r, sc, "caller", *caller);
  Buf out = { 0 };
  Buf *saved_out = r->out;
  r->out = &out;
  r->scope = sc;
  jinja_exec_list(r, &def->body, sc);
  r->out = saved_out;
  r->scope = saved_scope;
  r->macro_depth--;
  return jinja_buf_value(&r->c, &out);
}

static Value
call_macro(R *r, const Node *n, Macro *m, const Args *a)
{
  return call_macro_with(r, n, m, a, NULL);
}

Value
jinja_call_value(R *r, const Node *n, Value callee, const Args *a)
{
  switch (callee.t) {
  case T_FUNC: return call_builtin(r, n, callee.fn, a);
  case T_MACRO: return call_macro(r, n, callee.m, a);
  case T_METHOD: return jinja_call_method(r, n, callee.meth, a);
  case T_UNDEF: jinja_undef_fail(r, n, &callee);
  default: jinja_rfail(r, n, "'%s' object is not callable", jinja_type_name(&callee));
  }
}

static void
eval_args(R *r, const Node *n, Args *a)
{
  a->npos = n->args.n;
  a->nkw = n->kwargs.n;
  a->kwn = n->kwnames;
  a->pos = a->npos ? jinja_xalloc(&r->c, a->npos * sizeof(Value)) : NULL;
  a->kwv = a->nkw ? jinja_xalloc(&r->c, a->nkw * sizeof(Value)) : NULL;
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
    Value res = jinja_v_list(&r->c, n->args.n);
    res.l->tuple = n->kind == E_TUPLE;
    for (size_t k = 0; k < n->args.n; k++)
      res.l->items[k] = eval(r, n->args.items[k]);
    return res;
  }
  case E_DICT: {
    Value d = jinja_v_dict(&r->c);
    for (size_t k = 0; k < n->args.n; k++) {
      Value key = eval(r, n->args.items[k]);
      if (key.t == T_LIST && !key.l->tuple)
        jinja_rfail(r, n->args.items[k], "unhashable type: 'list'");
      if (key.t == T_DICT || key.t == T_UNDEF)
        jinja_rfail(r, n->args.items[k], "unhashable type: '%s'", jinja_type_name(&key));
      jinja_dict_set(r, d.d, key, eval(r, n->kwargs.items[k]));
    }
    return d;
  }
  case E_ATTR: return jinja_get_attr(r, n, eval(r, n->a), n->name);
  case E_INDEX: return jinja_get_item(r, n, eval(r, n->a), eval(r, n->b));
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
    return jinja_call_value(r, n, callee, &a);
  }
  case E_FILTER: {
    Value input = n->a ? eval(r, n->a) : r->block_input;
    Args a;
    eval_args(r, n, &a);
    return jinja_apply_filter(r, n, n->name->s, input, &a);
  }
  case E_TEST: {
    Value v = eval(r, n->a);
    Args a;
    eval_args(r, n, &a);
    bool res = jinja_run_test(r, n, n->name->s, v, &a);
    return jinja_v_bool(res != n->negated);
  }
  case E_UNARY: {
    Value v = eval(r, n->a);
    if (v.t == T_UNDEF)
      jinja_undef_fail(r, n, &v);
    if (!jinja_is_num(&v))
      jinja_rfail(r, n, "bad operand type for unary %s: '%s'", n->op == OP_NEG ? "-" : "+", jinja_type_name(&v));
    if (n->op == OP_POS)
      return v.t == T_BOOL ? jinja_v_int(v.b) : v;
    if (v.t == T_FLOAT)
      return jinja_v_float(-v.f);
    if (jinja_num_i(&v) == INT64_MIN)
      jinja_rfail(r, n, "integer overflow");
    return jinja_v_int(-jinja_num_i(&v));
  }
  case E_BIN: return jinja_arith(r, n, n->op, eval(r, n->a), eval(r, n->b));
  case E_AND: {
    Value a = eval(r, n->a);
    return jinja_truthy(&a) ? eval(r, n->b) : a;
  }
  case E_OR: {
    Value a = eval(r, n->a);
    return jinja_truthy(&a) ? a : eval(r, n->b);
  }
  case E_NOT: {
    Value a = eval(r, n->a);
    return jinja_v_bool(!jinja_truthy(&a));
  }
  case E_CMP: {
    Value left = eval(r, n->a);
    for (size_t k = 0; k < n->args.n; k++) {
      Value right = eval(r, n->args.items[k]);
      bool ok;
      jinja_charge(r, n, HN_MIN(value_size(&left), value_size(&right)));
      switch (n->ops[k]) {
      case OP_EQ: ok = jinja_values_equal(&left, &right); break;
      case OP_NE: ok = !jinja_values_equal(&left, &right); break;
      case OP_LT: ok = jinja_compare(r, n, &left, &right, "<") < 0; break;
      case OP_LE: ok = jinja_compare(r, n, &left, &right, "<=") <= 0; break;
      case OP_GT: ok = jinja_compare(r, n, &left, &right, ">") > 0; break;
      case OP_GE: ok = jinja_compare(r, n, &left, &right, ">=") >= 0; break;
      case OP_IN: ok = jinja_contains(r, n, left, right); break;
      default: ok = !jinja_contains(r, n, left, right); break;
      }
      if (!ok)
        return jinja_v_bool(false);
      left = right;
    }
    return jinja_v_bool(true);
  }
  case E_COND: {
    Value c = eval(r, n->b);
    if (jinja_truthy(&c))
      return eval(r, n->a);
    return n->c ? eval(r, n->c) : jinja_make_undef(r, "the inline if-expression has no else");
  }
  case E_CONCAT: {
    Buf b = { 0 };
    for (size_t k = 0; k < n->args.n; k++)
      jinja_to_str_buf(r, &b, eval(r, n->args.items[k]));
    return jinja_buf_value(&r->c, &b);
  }
  default:
    jinja_rfail(r, n, "internal error: not an expression");
  }
}

static Value
eval(R *r, const Node *n)
{
  if (++r->depth > MAX_EVAL_DEPTH)
    jinja_rfail(r, n, "the template nests too deeply");
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
    jinja_scope_set(r, sc, n->targets[0], v);
    return;
  }
  List *items;
  if (v.t == T_LIST)
    items = v.l;
  else if (v.t == T_STR || v.t == T_DICT)
    items = jinja_iterate(r, n, v);
  else
    jinja_rfail(r, n, "cannot unpack non-iterable %s object", jinja_type_name(&v));
  if (items->n != n->ntargets)
    jinja_rfail(r, n, "%s values to unpack (expected %zu)", items->n > n->ntargets ? "too many" : "not enough", n->ntargets);
  for (size_t k = 0; k < n->ntargets; k++)
    jinja_scope_set(r, sc, n->targets[k], items->items[k]);
}

static Value
capture(R *r, const NodeList *body, Scope *sc)
{
  Buf out = { 0 };
  Buf *saved = r->out;
  r->out = &out;
  jinja_exec_list(r, body, sc);
  r->out = saved;
  return jinja_buf_value(&r->c, &out);
}

static int
exec_for(R *r, const Node *n, Scope *sc)
{
  Value seq = eval(r, n->a);
  List *items = jinja_iterate(r, n->a, seq);
  Scope *ls = jinja_scope_new(r, sc);
  if (n->b) {
    /* the filter sees the loop variables but not `loop`; loop.length counts what passes */
    Value filtered = jinja_v_list(&r->c, items->n);
    size_t count = 0;
    for (size_t k = 0; k < items->n; k++) {
      jinja_step(r, n);
      ls->n = 0;
      assign_targets(r, n, ls, items->items[k]);
      r->scope = ls;
      Value c = eval(r, n->b);
      r->scope = sc;
      if (jinja_truthy(&c))
        filtered.l->items[count++] = items->items[k];
    }
    filtered.l->n = count;
    items = filtered.l;
  }
  LoopState *state = jinja_xalloc0(&r->c, sizeof(LoopState));
  state->items = items;
  state->length = items->n;
  /* loop.depth counts recursive loop() calls, which are not supported: always 1 */
  Value loopv = { .t = T_LOOP };
  loopv.loop = state;
  Str *loop_name = jinja_str_new(&r->c, "loop", 4);
  /* Jinja clears its "no iteration" flag at the end of the body, so an iteration left
   * with break or continue does not count: the else block still runs. */
  bool completed = false;
  for (size_t k = 0; k < items->n; k++) {
    jinja_step(r, n);
    state->index0 = k;
    ls->n = 0; /* each iteration starts with a fresh scope, as in Jinja */
    jinja_scope_set(r, ls, loop_name, loopv);
    assign_targets(r, n, ls, items->items[k]);
    r->scope = ls;
    int flow = jinja_exec_list(r, &n->body, ls);
    r->scope = sc;
    if (flow == FLOW_NORMAL)
      completed = true;
    if (flow == FLOW_BREAK)
      break;
  }
  if (!completed && n->orelse.n)
    return jinja_exec_list(r, &n->orelse, sc);
  return FLOW_NORMAL;
}

static int
exec_node(R *r, const Node *n, Scope *sc)
{
  jinja_step(r, n);
  switch (n->kind) {
  case S_TEXT:
    jinja_buf_add(&r->c, r->out, n->name->s, n->name->len);
    return FLOW_NORMAL;
  case S_OUTPUT:
    jinja_to_str_buf(r, r->out, eval(r, n->a));
    return FLOW_NORMAL;
  case S_IF: {
    Value c = eval(r, n->a);
    return jinja_exec_list(r, jinja_truthy(&c) ? &n->body : &n->orelse, sc);
  }
  case S_FOR: return exec_for(r, n, sc);
  case S_SET: {
    Value v = eval(r, n->b);
    if (n->a) {
      Value target = lookup(r, sc, n->a->name);
      if (target.t != T_NS)
        jinja_rfail(r, n, "cannot assign attribute on non-namespace object");
      Value key = { .t = T_STR };
      key.s = n->name;
      jinja_dict_set(r, target.d, key, v);
      return FLOW_NORMAL;
    }
    assign_targets(r, n, sc, v);
    return FLOW_NORMAL;
  }
  case S_SETBLOCK: {
    /* the body of a block set has a scope of its own */
    Value v = capture(r, &n->body, jinja_scope_new(r, sc));
    if (n->c) {
      r->block_input = v;
      v = eval(r, n->c);
    }
    jinja_scope_set(r, sc, n->targets[0], v);
    return FLOW_NORMAL;
  }
  case S_MACRO: {
    Value m = { .t = T_MACRO };
    m.m = jinja_xalloc(&r->c, sizeof(Macro));
    m.m->node = n;
    m.m->scope = sc;
    jinja_scope_set(r, sc, n->name, m);
    return FLOW_NORMAL;
  }
  case S_BREAK: return FLOW_BREAK;
  case S_CONTINUE: return FLOW_CONTINUE;
  case S_PASSBLOCK: return jinja_exec_list(r, &n->body, sc);
  case S_CALLBLOCK: {
    Value callee = eval(r, n->a->a);
    if (callee.t != T_MACRO)
      jinja_rfail(r, n, "{%% call %%} needs a macro, not %s", jinja_type_name(&callee));
    Args a;
    eval_args(r, n->a, &a);
    Value caller = { .t = T_MACRO };
    caller.m = jinja_xalloc(&r->c, sizeof(Macro));
    caller.m->node = n;
    caller.m->scope = sc;
    jinja_to_str_buf(r, r->out, call_macro_with(r, n, callee.m, &a, &caller));
    return FLOW_NORMAL;
  }
  case S_FILTERBLOCK: {
    Value v = capture(r, &n->body, jinja_scope_new(r, sc));
    r->block_input = v;
    jinja_to_str_buf(r, r->out, eval(r, n->c));
    return FLOW_NORMAL;
  }
  default:
    jinja_rfail(r, n, "internal error: not a statement");
  }
}

int
jinja_exec_list(R *r, const NodeList *l, Scope *sc)
{
  if (++r->depth > MAX_EVAL_DEPTH)
    jinja_rfail(r, l->n ? l->items[0] : NULL, "the template nests too deeply");
  Scope *saved = r->scope;
  r->scope = sc;
  int flow = FLOW_NORMAL;
  for (size_t k = 0; k < l->n && flow == FLOW_NORMAL; k++)
    flow = exec_node(r, l->items[k], sc);
  r->scope = saved;
  r->depth--;
  return flow;
}
