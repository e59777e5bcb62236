/* jinja-private.h — what the parts of the chat-template interpreter share: the arena and
 * error context, values, tokens, the AST and the evaluator's state.  Private to
 * engine/jinja/ and engine/hn-chat-template.c.
 *
 * Pipeline: source → newline normalisation → lexer (applies the whitespace rules:
 * {%- -%}, trim_blocks, lstrip_blocks) → token array → recursive-descent parser → AST →
 * tree-walking evaluator.  Everything a parse or a render allocates lives in an arena
 * freed in one go, and errors unwind with longjmp to the entry point: no partial
 * ownership to track in a tree walker that can fail anywhere.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#ifndef HN_JINJA_PRIVATE_H
#define HN_JINJA_PRIVATE_H

#include "hn-array.h"
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
/* ==== shared context: error unwinding ==================================================== */

typedef struct {
  Arena arena;
  HnError *err;
  jmp_buf jump;
  const char *src; /* for positions of the parser */
} Ctx;
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
/* ==== growable byte buffer (in the arena) =============================================== */

typedef struct {
  char *data;
  size_t len, cap;
  size_t limit; /* 0 = only the arena limit */
} Buf;
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

/* jinja-values.c */
void jinja_arena_free(Arena *a);
void *jinja_arena_try_alloc(Arena *a, size_t n);
_Noreturn void jinja_fail_at(Ctx *c, int line, int col, const char *fmt, ...) HN_PRINTF(4, 5);
_Noreturn void jinja_fail_nomem(Ctx *c);
void *jinja_xalloc(Ctx *c, size_t n);
void *jinja_xalloc0(Ctx *c, size_t n);
size_t jinja_xmul(Ctx *c, size_t a, size_t b);
uint32_t jinja_utf8_next(const char *s, size_t n, size_t *adv);
size_t jinja_utf8_put(uint32_t cp, char *out);
bool jinja_py_space(uint32_t c);
size_t jinja_trailing_space(const char *s, size_t n);
size_t jinja_leading_space(const char *s, size_t n);
size_t jinja_utf8_count(const char *s, size_t n);
locale_t jinja_c_time_locale(void);
double jinja_c_strtod(const char *s, char **end);
uint32_t jinja_cp_upper(uint32_t c);
uint32_t jinja_cp_lower(uint32_t c);
bool jinja_cp_alpha(uint32_t c);
Value jinja_v_bool(bool b);
Value jinja_v_int(int64_t i);
Value jinja_v_float(double f);
Str *jinja_str_new(Ctx *c, const char *s, size_t n);
Value jinja_v_str(Ctx *c, const char *s, size_t n);
Value jinja_v_cstr(Ctx *c, const char *s);
Value jinja_v_list(Ctx *c, size_t n);
Value jinja_v_dict(Ctx *c);
const char *jinja_type_name(const Value *v);
void jinja_buf_reserve(Ctx *c, Buf *b, size_t extra);
void jinja_buf_addc(Ctx *c, Buf *b, char ch);
void jinja_buf_adds(Ctx *c, Buf *b, const char *s);
Value jinja_buf_value(Ctx *c, Buf *b);
/* HN_ARRAY_RESERVE for arrays in the arena: gives the array *items_ptr (a `T **` with `n`
 * elements in use and capacity *cap) room for `need` elements, by the same doubling rule;
 * the old block stays in the arena until the arena is freed.  Out of memory unwinds. */
void jinja_arena_reserve(Ctx *c, void *items_ptr, size_t n, size_t *cap, size_t need, size_t elem_size,
                         size_t first_cap);
#define JINJA_ARENA_RESERVE(c, items, n, cap, need, first_cap) \
  jinja_arena_reserve((c), &(items), (n), &(cap), (need), sizeof *(items), (first_cap))
void jinja_buf_add(Ctx *c, Buf *b, const char *s, size_t n);
Value *jinja_dict_find(Dict *d, const Value *key);
Value *jinja_dict_find_str(Dict *d, const char *key, size_t len);
void jinja_dict_set(R *r, Dict *d, Value key, Value v);
bool jinja_truthy(const Value *v);
bool jinja_is_num(const Value *v);
double jinja_num_f(const Value *v);
int64_t jinja_num_i(const Value *v);
void jinja_float_str(double d, char *out, size_t n);
void jinja_repr_buf(R *r, Buf *b, Value v);
void jinja_to_str_buf(R *r, Buf *b, Value v);
Value jinja_to_str(R *r, Value v);
bool jinja_values_equal(const Value *a, const Value *b);
int jinja_compare(R *r, const Node *n, const Value *a, const Value *b, const char *opname);
List *jinja_str_chars(R *r, const Str *s);
List *jinja_iterate(R *r, const Node *n, Value v);

/* jinja-lexer.c */
void jinja_lex_all(Lexer *lx);

/* jinja-parser.c */
NodeList jinja_parse_body(P *p, const char *const *ends, const char **which, Token *opener);

/* jinja-eval.c */
_Noreturn void jinja_rfail(R *r, const Node *n, const char *fmt, ...) HN_PRINTF(3, 4);
_Noreturn void jinja_undef_fail(R *r, const Node *n, const Value *v);
Value jinja_make_undef(R *r, const char *fmt, ...) HN_PRINTF(2, 3);
void jinja_step(R *r, const Node *n);
void jinja_charge(R *r, const Node *n, size_t amount);
Scope *jinja_scope_new(R *r, Scope *parent);
void jinja_scope_set(R *r, Scope *s, Str *name, Value v);
void jinja_scope_set_c(R *r, Scope *s, const char *name, Value v);
Value jinja_get_attr(R *r, const Node *n, Value obj, const Str *name);
Value jinja_get_item(R *r, const Node *n, Value obj, Value key);
Value jinja_html_escape(R *r, const Str *s);
Value jinja_arith(R *r, const Node *n, int op, Value a, Value b);
bool jinja_contains(R *r, const Node *n, Value item, Value container);
Value jinja_arg(const Args *a, size_t index, const char *kw, Value def);
Str *jinja_need_str(R *r, const Node *n, Value v, const char *what);
int64_t jinja_need_int(R *r, const Node *n, Value v, const char *what);
Value jinja_call_value(R *r, const Node *n, Value callee, const Args *a);
int jinja_exec_list(R *r, const NodeList *l, Scope *sc);

/* jinja-filters.c */
bool jinja_run_test(R *r, const Node *n, const char *name, Value v, const Args *a);
Value jinja_apply_filter(R *r, const Node *n, const char *name, Value v, const Args *a);
Value jinja_call_method(R *r, const Node *n, Method *m, const Args *a);

#endif
