/* jinja-parser.c — recursive-descent parser from tokens to the AST.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "jinja-private.h"

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
  jinja_fail_at(p->c, t->line, t->col, "%s", msg);
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
  Node *n = jinja_xalloc0(p->c, sizeof(Node));
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
  JINJA_ARENA_RESERVE(p->c, v->items, v->n, v->cap, v->n + 1, 4);
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
      JINJA_ARENA_RESERVE(p->c, names, nnames, cap, nnames + 1, 4);
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
  n->args.items = jinja_xalloc0(p->c, sizeof(Node *));
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
        a->b->lit = jinja_v_int(name->i);
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
      n->lit = jinja_v_bool(true);
    else if (!strcmp(s, "false") || !strcmp(s, "False"))
      n->lit = jinja_v_bool(false);
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
    jinja_buf_add(p->c, &b, t->s->s, t->s->len);
    while (cur(p)->kind == K_STRING) {
      Token *more = advance(p);
      jinja_buf_add(p->c, &b, more->s->s, more->s->len);
    }
    n->lit = jinja_buf_value(p->c, &b);
    return n;
  }
  case K_INT:
    advance(p);
    n = node_new(p, E_LIT, t);
    n->lit = jinja_v_int(t->i);
    return n;
  case K_FLOAT:
    advance(p);
    n = node_new(p, E_LIT, t);
    n->lit = jinja_v_float(t->f);
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
  n->ops = jinja_xalloc(p->c, nops * sizeof(int));
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
  n->targets = jinja_xalloc(p->c, count * sizeof(Str *));
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
  n->kwnames = jinja_xalloc(p->c, (np ? np : 1) * sizeof(Str *));
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
    n->body = jinja_parse_body(p, ends, &which, t);
    Node *tail = n;
    while (!strcmp(which, "elif")) {
      Token *et = &p->t[p->pos - 1];
      Node *e = node_new(p, S_IF, et);
      e->a = parse_expr(p);
      expect_block_end(p);
      e->body = jinja_parse_body(p, ends, &which, et);
      tail->orelse.items = jinja_xalloc(p->c, sizeof(Node *));
      tail->orelse.items[0] = e;
      tail->orelse.n = 1;
      tail = e;
    }
    if (!strcmp(which, "else")) {
      expect_block_end(p);
      static const char *const endif[] = { "endif", NULL };
      tail->orelse = jinja_parse_body(p, endif, &which, t);
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
    n->body = jinja_parse_body(p, ends, &which, t);
    p->loops--;
    if (!strcmp(which, "else")) {
      expect_block_end(p);
      static const char *const endfor[] = { "endfor", NULL };
      /* break/continue in the else branch belong to an outer loop */
      int saved = p->loops;
      n->orelse = jinja_parse_body(p, endfor, &which, t);
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
    n->body = jinja_parse_body(p, ends, &which, t);
    expect_block_end(p);
    return n;
  }
  if (!strcmp(tag, "call")) {
    n = node_new(p, S_CALLBLOCK, t);
    n->name = jinja_str_new(p->c, "caller", 6);
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
    n->body = jinja_parse_body(p, ends, &which, t);
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
    n->body = jinja_parse_body(p, ends, &which, t);
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
    n->body = jinja_parse_body(p, ends, &which, t);
    expect_block_end(p);
    return n;
  }
  if (!strcmp(tag, "filter")) {
    n = node_new(p, S_FILTERBLOCK, t);
    n->c = parse_filter_chain(p, NULL);
    expect_block_end(p);
    static const char *const ends[] = { "endfilter", NULL };
    n->body = jinja_parse_body(p, ends, &which, t);
    expect_block_end(p);
    return n;
  }
  p_fail(p, t, "unknown or unsupported tag '%s'", tag);
}

NodeList
jinja_parse_body(P *p, const char *const *ends, const char **which, Token *opener)
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
