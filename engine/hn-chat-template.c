/* hn-chat-template.c — the public chat-template API: parse a model's Jinja template,
 * render a conversation with it (the variables HF's apply_chat_template passes,
 * enable_thinking included), ask which variables it reads, and the ChatML fallback.
 * The interpreter itself lives in engine/jinja/ (see jinja-private.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-chat-template.h"
#include "jinja/jinja-private.h"

static void
normalize_source(Ctx *c, const char *src, size_t len, char **out, size_t *out_len)
{
  char *d = jinja_xalloc(c, len + 1);
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
    jinja_arena_free(&t->ctx.arena);
    free(t);
    return NULL;
  }
  char *src;
  size_t n;
  normalize_source(&t->ctx, source ? source : "", len, &src, &n);
  t->ctx.src = src;
  Lexer lx = { &t->ctx, src, n, 0, NULL, 0, 0 };
  jinja_lex_all(&lx);
  P p = { &t->ctx, lx.toks, 0, 0, 0, 0 };
  t->body = jinja_parse_body(&p, NULL, NULL, NULL);
  t->ctx.err = NULL;
  return t;
}

void
hn_chat_template_free(HnChatTemplate *tmpl)
{
  if (!tmpl)
    return;
  jinja_arena_free(&tmpl->ctx.arena);
  free(tmpl);
}

/* ---- entry points ---- */

static Value
from_json(R *r, const HnJson *j, int depth)
{
  if (depth > 512)
    jinja_rfail(r, NULL, "input JSON nested too deeply");
  switch (hn_json_type(j)) {
  case HN_JSON_NULL: return NONE;
  case HN_JSON_BOOL: return jinja_v_bool(hn_json_get_bool(j));
  case HN_JSON_NUMBER:
    return hn_json_is_integer(j) ? jinja_v_int(hn_json_get_int(j)) : jinja_v_float(hn_json_get_double(j));
  case HN_JSON_STRING: return jinja_v_str(&r->c, hn_json_get_string(j), hn_json_get_string_len(j));
  case HN_JSON_ARRAY: {
    Value l = jinja_v_list(&r->c, hn_json_length(j));
    for (size_t k = 0; k < l.l->n; k++)
      l.l->items[k] = from_json(r, hn_json_array_get(j, k), depth + 1);
    return l;
  }
  case HN_JSON_OBJECT: {
    Value d = jinja_v_dict(&r->c);
    for (size_t k = 0; k < hn_json_length(j); k++) {
      size_t kl;
      const char *key = hn_json_object_key_at(j, k, &kl);
      jinja_dict_set(r, d.d, jinja_v_str(&r->c, key, kl), from_json(r, hn_json_object_value_at(j, k), depth + 1));
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
    jinja_arena_free(&r->c.arena);
    free(r);
    return NULL;
  }
  Buf *out = jinja_xalloc0(&r->c, sizeof(Buf));
  out->limit = opts->max_output ? opts->max_output : HN_CHAT_DEFAULT_MAX_OUTPUT;
  r->out = out;
  Scope *root = jinja_scope_new(r, NULL);
  r->root = root;
  if (opts->extra)
    for (size_t k = 0; k < hn_json_length(opts->extra); k++) {
      size_t kl;
      const char *key = hn_json_object_key_at(opts->extra, k, &kl);
      jinja_scope_set(r, root, jinja_str_new(&r->c, key, kl), from_json(r, hn_json_object_value_at(opts->extra, k), 0));
    }
  jinja_scope_set_c(r, root, "messages", opts->messages ? from_json(r, opts->messages, 0) : jinja_v_list(&r->c, 0));
  jinja_scope_set_c(r, root, "bos_token", jinja_v_cstr(&r->c, opts->bos_token ? opts->bos_token : ""));
  jinja_scope_set_c(r, root, "eos_token", jinja_v_cstr(&r->c, opts->eos_token ? opts->eos_token : ""));
  jinja_scope_set_c(r, root, "add_generation_prompt", jinja_v_bool(opts->add_generation_prompt));
  /* Like a keyword argument of HF's apply_chat_template: given, it wins over extra. */
  if (opts->enable_thinking != HN_CHAT_THINKING_UNSET)
    jinja_scope_set_c(r, root, "enable_thinking", jinja_v_bool(opts->enable_thinking == HN_CHAT_THINKING_ON));
  r->scope = root;
  jinja_exec_list(r, &tmpl->body, root);
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
  jinja_arena_free(&r->c.arena);
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
  size_t need;
  if (!hn_add_size(b->len, n, &need) || !hn_add_size(need, 1, &need) ||
      !HN_ARRAY_RESERVE(b->data, b->cap, need, 256)) {
    b->failed = true;
    return;
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
