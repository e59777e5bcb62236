/* hn-grammar-private.h — the compiled form of a GBNF grammar, shared by the parser
 * (hn-grammar-parser.c, which builds it) and the matcher (hn-grammar-matcher.c, which
 * runs it).
 *
 * A grammar is flattened into one array of elements.  Every alternative of every rule is
 * a run of elements closed by EL_END; an element is a literal code point, a character
 * class or a reference to a rule.  Repetition and grouping are rewritten into generated
 * rules while parsing (x* becomes R ::= x R | ε), so the matcher only knows these three.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#ifndef HN_GRAMMAR_PRIVATE_H
#define HN_GRAMMAR_PRIVATE_H

#include "hn-grammar.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EL_END = 0, EL_RULE, EL_LIT, EL_CLASS };

typedef struct {
  uint32_t type;
  uint32_t value; /* rule index, code point or class index */
} Elem;

typedef struct {
  uint32_t off, n; /* into ranges[] (pairs) */
  bool negated;
} CharClass;

struct HnGrammar {
  Elem *elems;
  size_t n_elems;
  CharClass *classes;
  size_t n_classes;
  uint32_t *ranges; /* lo, hi pairs */
  uint32_t *alts;   /* start position of each alternative, grouped by rule */
  uint32_t *rule_alt_off, *rule_alt_n;
  size_t n_rules;
};

#endif
