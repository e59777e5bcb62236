/* hn-json-schema.c — JSON Schema (subset) to GBNF.
 *
 * The schema is read with hn-json (which keeps the written order of object members, the
 * order properties are emitted in); every schema node becomes a GBNF expression, and
 * objects, arrays, references and integer ranges get rules of their own.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-json-schema.h"

#include "hn-grammar.h"

#include "hn-json.h"
#include "hn-array.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================ JSON access ======== */

typedef HnJson JNode;
#define J_NULL HN_JSON_NULL
#define J_BOOL HN_JSON_BOOL
#define J_NUM HN_JSON_NUMBER
#define J_STR HN_JSON_STRING
#define J_ARR HN_JSON_ARRAY
#define J_OBJ HN_JSON_OBJECT

static const JNode *
jget(const JNode *obj, const char *key)
{
  return hn_json_is_object(obj) ? hn_json_object_get(obj, key) : NULL;
}

/* i-th element of an array or value of an object */
static const JNode *
jitem(const JNode *n, size_t i)
{
  return hn_json_is_object(n) ? hn_json_object_value_at(n, i) : hn_json_array_get(n, i);
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
  size_t need;
  if (!hn_add_size(b->len, n, &need) || !hn_add_size(need, 1, &need) ||
      !HN_ARRAY_RESERVE(b->s, b->cap, need, 256)) {
    b->oom = true;
    return;
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
  /* $ref targets already given a rule, with an open-addressed index by node (entry + 1,
   * 0 = empty; at most half full) so that many references stay linear */
  const JNode **ref_nodes;
  char **ref_names;
  size_t n_refs, ref_cap;
  uint32_t *ref_index;
  size_t ref_index_cap;
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

/* GBNF literal of the compact JSON text of a value (for const and enum). */
static void
literal_of_value(Buf *out, const JNode *v)
{
  size_t len = 0;
  char *text = hn_json_write(v, &HN_JSON_WRITE_COMPACT, &len);
  if (text == NULL)
    out->oom = true;
  else
    add_literal(out, text, len);
  free(text);
}

/* GBNF literal of a JSON string (an object key). */
static void
literal_of_key(Buf *out, const char *key)
{
  size_t len = 0;
  char *text = hn_json_quote(key, strlen(key), false, &len);
  if (text == NULL)
    out->oom = true;
  else
    add_literal(out, text, len);
  free(text);
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
  if (v && hn_json_type(v) == J_NUM) {
    double x = upper ? floor(hn_json_get_double(v)) : ceil(hn_json_get_double(v));
    if (fabs(x) > 1e17)
      return cerr(c, "%s %g is too large", key, hn_json_get_double(v));
    *value = (long long) x;
    *has = true;
    if (ex && hn_json_type(ex) == J_BOOL && hn_json_get_bool(ex) && x == hn_json_get_double(v))
      *value += upper ? -1 : 1;
  } else if (v) {
    return cerr(c, "%s must be a number", key);
  }
  if (ex && hn_json_type(ex) == J_NUM) {
    double x = upper ? ceil(hn_json_get_double(ex)) - 1 : floor(hn_json_get_double(ex)) + 1;
    if (fabs(x) > 1e17)
      return cerr(c, "%s %g is too large", excl_key, hn_json_get_double(ex));
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
  double x = hn_json_get_double(v);
  if (hn_json_type(v) != J_NUM || x < 0 || x != floor(x) || x > 10000)
    return cerr(c, "%s must be an integer between 0 and 10000", key);
  *out = (long long) x;
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
  if (items && hn_json_type(items) == J_ARR)
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

/* The names in `required` as an indexed object (names -> null), so that checking them
 * against `properties` and looking each property up is linear in the schema, not quadratic
 * (20,000 required properties took 39 s).  Key lengths are taken from the JSON values, so a
 * name with an embedded NUL is kept whole. */
static HnJson *
required_set(Conv *c, const JNode *required)
{
  HnJson *set = hn_json_new_object();
  if (set == NULL) {
    cerr(c, "out of memory");
    return NULL;
  }
  size_t n = required ? hn_json_length(required) : 0;
  for (size_t i = 0; i < n; i++) {
    const JNode *r = jitem(required, i);
    if (hn_json_type(r) != J_STR)
      continue;
    if (!hn_json_object_set_len(set, hn_json_get_string(r), hn_json_get_string_len(r), hn_json_new_null())) {
      hn_json_free(set);
      cerr(c, "out of memory");
      return NULL;
    }
  }
  return set;
}

static bool
is_required(const HnJson *required, const JNode *props, size_t i)
{
  size_t len = 0;
  const char *key = hn_json_object_key_at(props, i, &len);
  return hn_json_object_get_len(required, key, len) != NULL;
}

static bool
gen_object(Conv *c, const JNode *s, Buf *out)
{
  const JNode *props = jget(s, "properties");
  const JNode *required = jget(s, "required");
  const JNode *addl = jget(s, "additionalProperties");
  if (props && hn_json_type(props) != J_OBJ)
    return cerr(c, "'properties' must be an object");
  if (required && hn_json_type(required) != J_ARR)
    return cerr(c, "'required' must be an array");
  if (jget(s, "patternProperties"))
    return cerr(c, "the keyword 'patternProperties' is not supported");
  size_t n = props ? hn_json_length(props) : 0;
  if (required)
    for (size_t i = 0; i < hn_json_length(required); i++) {
      const JNode *r = jitem(required, i);
      const char *name = hn_json_get_string(r);
      if (name == NULL || hn_json_object_get_len(props, name, hn_json_get_string_len(r)) == NULL)
        return cerr(c, "required property '%s' is not listed in 'properties'", name ? name : "?");
    }
  HnJson *required_names = required_set(c, required);
  if (required_names == NULL)
    return false;
  /* extra members: allowed when additionalProperties says so, or when no properties are
   * listed at all ({"type": "object"} means any object) */
  bool extra = addl ? !(hn_json_type(addl) == J_BOOL && !hn_json_get_bool(addl)) : n == 0;
  char *extra_kv = NULL;
  if (extra) {
    Buf v = { 0 };
    if (addl && hn_json_type(addl) == J_OBJ) {
      if (!gen(c, addl, &v)) {
        free(v.s);
        hn_json_free(required_names);
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
      hn_json_free(required_names);
      return cerr(c, "out of memory");
    }
    emit_rule(c, extra_kv, kv.s);
    free(kv.s);
  }
  /* kv_i, then F_i (nothing written yet) and C_i (something written: commas first) */
  int base = ++c->counter;
  for (size_t i = 0; i < n; i++) {
    Buf v = { 0 };
    if (!gen(c, jitem(props, i), &v)) {
      free(v.s);
      free(extra_kv);
      hn_json_free(required_names);
      return false;
    }
    Buf kv = { 0 };
    literal_of_key(&kv, hn_json_object_key_at(props, i, NULL));
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
      bool req = is_required(required_names, props, i);
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
  hn_json_free(required_names);
  buf_printf(out, "( \"{\" obj-%d-f0 \"}\" )", base);
  return true;
}

/* ---- dispatch -------------------------------------------------------------------- */

/* The index slot of node: where it is, or the empty slot where it would go. */
static size_t
ref_slot(const Conv *c, const JNode *node)
{
  if (c->ref_index == NULL)
    return 0;
  size_t mask = c->ref_index_cap - 1;
  size_t slot = (size_t) (((uintptr_t) node >> 4) * 0x9e3779b97f4a7c15ull) & mask;
  while (c->ref_index[slot] != 0 && c->ref_nodes[c->ref_index[slot] - 1] != node)
    slot = (slot + 1) & mask;
  return slot;
}

static bool
ref_index_grow(Conv *c)
{
  size_t cap = c->ref_index_cap ? c->ref_index_cap * 2 : 64;
  uint32_t *old = c->ref_index;
  size_t old_cap = c->ref_index_cap;
  c->ref_index = calloc(cap, sizeof *c->ref_index);
  if (c->ref_index == NULL) {
    c->ref_index = old;
    return false;
  }
  c->ref_index_cap = cap;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i] != 0)
      c->ref_index[ref_slot(c, c->ref_nodes[old[i] - 1])] = old[i];
  free(old);
  return true;
}

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
  size_t slot = ref_slot(c, target);
  if (c->ref_index != NULL && c->ref_index[slot] != 0) {
    const char *known = c->ref_names[c->ref_index[slot] - 1];
    buf_add(out, known, strlen(known));
    return true;
  }
  if ((c->n_refs + 1) * 2 > c->ref_index_cap) {
    if (!ref_index_grow(c))
      return cerr(c, "out of memory");
    slot = ref_slot(c, target);
  }
  if (c->n_refs == c->ref_cap) {
    size_t cap;
    if (!hn_array_grown_cap(c->ref_cap, c->n_refs + 1, sizeof *c->ref_nodes, 16, &cap) ||
        !HN_ARRAY_RESIZE(c->ref_nodes, cap) || !HN_ARRAY_RESIZE(c->ref_names, cap))
      return cerr(c, "out of memory");
    c->ref_cap = cap;
  }
  char *rule = new_rule_name(c, "ref");
  if (!rule)
    return cerr(c, "out of memory");
  /* register before generating, so that a recursive schema refers to itself */
  c->ref_nodes[c->n_refs] = target;
  c->ref_names[c->n_refs] = rule;
  c->n_refs++;
  c->ref_index[slot] = (uint32_t) c->n_refs;
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
  if (hn_json_type(list) != J_ARR || hn_json_length(list) == 0)
    return cerr(c, "'%s' must be a non-empty array", kw);
  buf_add(out, "( ", 2);
  for (size_t i = 0; i < hn_json_length(list); i++) {
    if (i)
      buf_add(out, " | ", 3);
    if (!gen(c, jitem(list, i), out))
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
  if (hn_json_type(s) == J_BOOL) {
    if (!hn_json_get_bool(s)) {
      cerr(c, "the schema 'false' allows nothing");
      goto done;
    }
    c->need_value = true;
    buf_add(out, "value", 5);
    ok = true;
    goto done;
  }
  if (hn_json_type(s) != J_OBJ) {
    cerr(c, "a schema must be an object or a boolean");
    goto done;
  }
  const JNode *v;
  if ((v = jget(s, "$ref"))) {
    ok = hn_json_type(v) == J_STR ? gen_ref(c, hn_json_get_string(v), out) : cerr(c, "$ref must be a string");
    goto done;
  }
  if ((v = jget(s, "const"))) {
    literal_of_value(out, v);
    ok = true;
    goto done;
  }
  if ((v = jget(s, "enum"))) {
    if (hn_json_type(v) != J_ARR || hn_json_length(v) == 0) {
      cerr(c, "'enum' must be a non-empty array");
      goto done;
    }
    buf_add(out, "( ", 2);
    for (size_t i = 0; i < hn_json_length(v); i++) {
      if (i)
        buf_add(out, " | ", 3);
      literal_of_value(out, jitem(v, i));
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
    if (hn_json_type(v) != J_ARR || hn_json_length(v) != 1) {
      cerr(c, "'allOf' is supported with exactly one schema");
      goto done;
    }
    ok = gen(c, jitem(v, 0), out);
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
  if (hn_json_type(v) == J_STR) {
    ok = gen_type(c, s, hn_json_get_string(v), out);
    goto done;
  }
  if (hn_json_type(v) == J_ARR && hn_json_length(v) > 0) {
    buf_add(out, "( ", 2);
    for (size_t i = 0; i < hn_json_length(v); i++) {
      if (hn_json_type(jitem(v, i)) != J_STR) {
        cerr(c, "'type' entries must be strings");
        goto done;
      }
      if (i)
        buf_add(out, " | ", 3);
      if (!gen_type(c, s, hn_json_get_string(jitem(v, i)), out))
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
  HnJson *root = hn_json_parse(schema_json, len, err);
  if (root == NULL) {
    hn_error_prefix(err, "schema");
    return NULL;
  }
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
  /* A schema can be valid JSON and still describe no value, e.g. one that only refers to
   * itself ({"$ref": "#"}): the grammar it gives is then left-recursive.  Checking the result
   * here turns that into a clear refusal instead of a grammar error later. */
  if (result != NULL) {
    HnError gerr = { 0 };
    HnGrammar *g = hn_grammar_parse(result, strlen(result), NULL, &gerr);
    if (g == NULL && gerr.code == HN_ERR_LIMIT) {
      /* the position in the generated grammar means nothing to the schema's author */
      hn_error_set(err, HN_ERR_LIMIT,
                   "schema: too large to follow: the grammar it gives has more than %u elements or "
                   "too many rules (lengths and item counts up to 10000 each add rules)",
                   HN_GRAMMAR_MAX_ELEMENTS);
      free(result);
      result = NULL;
    } else if (g == NULL) {
      hn_error_set(err, HN_ERR_UNSUPPORTED, "schema: no value can match it (%s)", gerr.message);
      free(result);
      result = NULL;
    }
    hn_grammar_free(g);
  }
  free(top.s);
  free(c.rules.s);
  for (size_t i = 0; i < c.n_refs; i++)
    free(c.ref_names[i]);
  free(c.ref_names);
  free(c.ref_nodes);
  free(c.ref_index);
  hn_json_free(root);
  return result;
}
