/* hn-grammar.h — GBNF grammars and a pushdown matcher that constrains generation.
 *
 * Syntax (the format common to local-LLM tools):
 *   name ::= alternatives          rules; `root` is where matching starts
 *   a | b                          alternation       ( ... )  grouping
 *   x?  x*  x+  x{m}  x{m,}  x{m,n}   repetition
 *   "text"                         literal; escapes \n \r \t \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH
 *   [a-z0-9_]  [^"\\]              character classes with ranges, escapes and negation
 *   .                              any code point
 *   # comment                      to the end of the line
 * A rule ends at the end of its line unless the line ends inside parentheses or right
 * after `::=` or `|`.  Left recursion, undefined rules and a missing root are errors;
 * errors are "line L, column C: message".
 *
 * Matching works on Unicode code points; bytes are decoded as UTF-8 on the way, so a
 * token may end inside a multi-byte character.  The state is a set of stacks (one per
 * live parse), bounded by HN_GRAMMAR_MAX_STACKS and HN_GRAMMAR_MAX_DEPTH.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"
#include "hn-sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HN_GRAMMAR_MAX_STACKS 1024
/* Longest parse stack (nesting of rules still open); 20,000 nested rules must work. */
#define HN_GRAMMAR_MAX_DEPTH 65536
#define HN_GRAMMAR_MAX_REPEAT 10000
#define HN_GRAMMAR_MAX_ELEMENTS (1u << 22)

typedef struct HnGrammar HnGrammar;

/* Parses GBNF text (need not be NUL-terminated).  `root` names the start rule (NULL =
 * "root").  err->code is HN_ERR_GRAMMAR on a syntax or structure error, HN_ERR_LIMIT when the
 * grammar is larger than the engine follows (HN_GRAMMAR_MAX_ELEMENTS, 2^24 rules).  Parsing
 * is linear in the text plus the rules that repetitions generate. */
HnGrammar *hn_grammar_parse(const char *text, size_t len, const char *root, HnError *err);
void hn_grammar_free(HnGrammar *grammar);
size_t hn_grammar_n_rules(const HnGrammar *grammar);

/* The vocabulary as the matcher sees it: the exact bytes of every token, and which
 * tokens end generation.  Arrays are copied; a token with no bytes that is not an
 * end-of-generation token is never allowed. */
typedef struct HnGrammarVocab HnGrammarVocab;
HnGrammarVocab *hn_grammar_vocab_new(int32_t n_vocab, const char *const *token_bytes,
                                     const uint32_t *token_len, const bool *is_eog, HnError *err);
void hn_grammar_vocab_free(HnGrammarVocab *vocab);
int32_t hn_grammar_vocab_n_vocab(const HnGrammarVocab *vocab);

/* A parse in progress.  `vocab` may be NULL for byte-level use only; both the grammar
 * and the vocabulary must outlive the state. */
HnGrammarState *hn_grammar_state_new(const HnGrammar *grammar, const HnGrammarVocab *vocab,
                                     HnError *err);
void hn_grammar_state_free(HnGrammarState *state);
void hn_grammar_state_reset(HnGrammarState *state);

/* Would these bytes continue a valid parse?  (The state is not changed.) */
bool hn_grammar_accepts_bytes(HnGrammarState *state, const void *bytes, size_t len);
/* Consumes the bytes; false (state unchanged) if the grammar forbids them. */
bool hn_grammar_accept_bytes(HnGrammarState *state, const void *bytes, size_t len);

/* The same for a token of the vocabulary: an end-of-generation token is accepted iff the
 * grammar is complete; accepting one leaves the state as it was. */
bool hn_grammar_accepts_token_bytes(HnGrammarState *state, int32_t token);
bool hn_grammar_accept_token(HnGrammarState *state, int32_t token);

/* Sets the logit of every candidate the grammar forbids to -INFINITY. */
void hn_grammar_mask(HnGrammarState *state, HnCandidate *cands, size_t n);
/* The same on a whole row of n_vocab logits. */
void hn_grammar_mask_logits(HnGrammarState *state, float *logits, int32_t n_vocab);

/* The input so far is a complete sentence of the grammar (generation may end here). */
bool hn_grammar_is_complete(const HnGrammarState *state);
/* More input could still be accepted (false: only the end remains, or the parse died). */
bool hn_grammar_can_continue(const HnGrammarState *state);
/* Number of live stacks (for tests). */
size_t hn_grammar_state_n_stacks(const HnGrammarState *state);
/* Steps since the last reset (accepting or masking) that hit the work budget or
 * HN_GRAMMAR_MAX_STACKS and kept only the parses found so far.  Nothing the grammar forbids
 * gets through such a step, but some continuations it allows may be refused: a grammar
 * this ambiguous is worth a warning to the user. */
size_t hn_grammar_state_truncated_steps(const HnGrammarState *state);
/* Masks since the last reset that ran out of their work budget before reaching the end of
 * the vocabulary (each also counts as a truncated step): the tokens not reached were
 * forbidden, so nothing the grammar forbids got through, but some it allows may have been
 * refused.  One mask is bounded to about a tenth of a second of work. */
size_t hn_grammar_state_truncated_masks(const HnGrammarState *state);
/* The current state or the last mask is known to be incomplete (a bound was hit): when
 * such a mask allows nothing, the reason is the bound, not the grammar. */
bool hn_grammar_state_incomplete(const HnGrammarState *state);

#ifdef __cplusplus
}
#endif
