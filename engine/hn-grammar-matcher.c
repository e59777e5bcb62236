/* hn-grammar-matcher.c — the pushdown matcher of a parsed grammar.
 *
 * A parse stack is a list of element positions, the top being the next element to
 * match; stacks are kept expanded so that every top is a character element (an empty
 * stack means "the input may end here").  Reading a code point advances every stack whose
 * top matches it and expands rule references at the new top, which may fork the stack
 * into one per alternative.  Token masks walk the vocabulary sorted by bytes, so a prefix
 * shared by many tokens is matched once, within per-byte and per-mask work budgets.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-grammar-private.h"
#include "hn-array.h"

/* ==================================================================== Matcher ==== */

static inline bool
class_matches(const HnGrammar *g, uint32_t cls, uint32_t cp)
{
  const CharClass *c = &g->classes[cls];
  const uint32_t *r = g->ranges + c->off;
  bool in = false;
  for (uint32_t i = 0; i < c->n; i++)
    if (cp >= r[2 * i] && cp <= r[2 * i + 1]) {
      in = true;
      break;
    }
  return in != c->negated;
}

static inline bool
elem_matches(const HnGrammar *g, Elem e, uint32_t cp)
{
  return e.type == EL_LIT ? e.value == cp : class_matches(g, e.value, cp);
}

/* Could the element match some code point in [lo, hi]?  (Over-approximates for negated
 * classes; the exact test happens when the code point is complete.) */
static bool
elem_may_match_range(const HnGrammar *g, Elem e, uint32_t lo, uint32_t hi)
{
  if (e.type == EL_LIT)
    return e.value >= lo && e.value <= hi;
  const CharClass *c = &g->classes[e.value];
  const uint32_t *r = g->ranges + c->off;
  for (uint32_t i = 0; i < c->n; i++) {
    bool overlaps = r[2 * i] <= hi && r[2 * i + 1] >= lo;
    bool covers = r[2 * i] <= lo && r[2 * i + 1] >= hi;
    if (!c->negated && overlaps)
      return true;
    if (c->negated && covers)
      return false;
  }
  return c->negated;
}

typedef struct {
  uint32_t *data;
  size_t len, cap;
  uint32_t *off; /* n + 1 entries */
  uint32_t *hash;
  size_t n, cap_n;
  /* Open-addressed index over the stacks (entry + 1, 0 = empty), at most half full, so
   * that adding a stack costs its length, not the number of stacks already present: a
   * linear scan made a step quadratic in stacks (fuzz-gbnf: seconds per byte). */
  uint32_t *index;
  size_t index_mask;
  uint32_t partial_cp;
  uint32_t partial_left;
  bool overflow;
} StackSet;

static size_t
index_slot_of_hash(const StackSet *s, uint32_t h)
{
  size_t slot = h & s->index_mask;
  while (s->index[slot] != 0)
    slot = (slot + 1) & s->index_mask;
  return slot;
}

/* Reallocates the index for room_for entries and re-enters the present ones. */
static bool
index_rebuild(StackSet *s, size_t room_for)
{
  size_t size = 32;
  while (size < 2 * room_for)
    size *= 2;
  uint32_t *index = calloc(size, sizeof *index);
  if (index == NULL)
    return false;
  free(s->index);
  s->index = index;
  s->index_mask = size - 1;
  for (size_t i = 0; i < s->n; i++)
    s->index[index_slot_of_hash(s, s->hash[i])] = (uint32_t) i + 1;
  return true;
}

static void
set_clear(StackSet *s)
{
  /* empty only the slots in use: sets are cleared once per trie node while masking, far
   * too often to wipe the whole index */
  for (size_t i = 0; i < s->n; i++) {
    size_t slot = s->hash[i] & s->index_mask;
    while (s->index[slot] != i + 1)
      slot = (slot + 1) & s->index_mask;
    s->index[slot] = 0;
  }
  s->len = 0;
  s->n = 0;
  s->partial_cp = 0;
  s->partial_left = 0;
  s->overflow = false;
  if (s->off)
    s->off[0] = 0;
}

static void
set_free(StackSet *s)
{
  free(s->data);
  free(s->off);
  free(s->hash);
  free(s->index);
  memset(s, 0, sizeof *s);
}

static bool
set_init(StackSet *s)
{
  memset(s, 0, sizeof *s);
  s->cap_n = 16;
  s->cap = 256;
  s->data = malloc(s->cap * sizeof *s->data);
  s->off = malloc((s->cap_n + 1) * sizeof *s->off);
  s->hash = malloc(s->cap_n * sizeof *s->hash);
  if (!s->data || !s->off || !s->hash || !index_rebuild(s, s->cap_n)) {
    set_free(s);
    return false;
  }
  set_clear(s);
  return true;
}

static uint32_t
hash_stack(const uint32_t *st, size_t len)
{
  uint32_t h = 2166136261u ^ (uint32_t) len;
  for (size_t i = 0; i < len; i++)
    h = (h ^ st[i]) * 16777619u;
  return h;
}

static void
set_add(StackSet *s, const uint32_t *st, size_t len)
{
  uint32_t h = hash_stack(st, len);
  for (size_t slot = h & s->index_mask; s->index[slot] != 0; slot = (slot + 1) & s->index_mask) {
    size_t i = s->index[slot] - 1;
    if (s->hash[i] == h && s->off[i + 1] - s->off[i] == len &&
        memcmp(s->data + s->off[i], st, len * sizeof *st) == 0)
      return;
  }
  if (s->n >= HN_GRAMMAR_MAX_STACKS) {
    s->overflow = true;
    return;
  }
  if (s->n + 1 > s->cap_n) {
    /* off[] has one entry more than there are stacks: the end of the last one */
    size_t nc;
    if (!hn_array_grown_cap(s->cap_n, s->n + 1, sizeof *s->off, 1, &nc) ||
        !HN_ARRAY_RESIZE(s->off, nc + 1) || !HN_ARRAY_RESIZE(s->hash, nc) ||
        !index_rebuild(s, nc)) {
      s->overflow = true;
      return;
    }
    s->cap_n = nc;
  }
  if (len > SIZE_MAX - s->len || !HN_ARRAY_RESERVE(s->data, s->cap, s->len + len, 1)) {
    s->overflow = true;
    return;
  }
  memcpy(s->data + s->len, st, len * sizeof *st);
  s->len += len;
  s->hash[s->n] = h;
  s->index[index_slot_of_hash(s, h)] = (uint32_t) s->n + 1;
  s->n++;
  s->off[s->n] = (uint32_t) s->len;
}

/* A rule reference being expanded: its alternatives are tried in order, each on top of the
 * first `base` elements of the expander's buffer. */
typedef struct {
  uint32_t rule;
  uint32_t next_alt;
  uint32_t base;
} ExpandFrame;

typedef struct {
  const HnGrammar *g;
  uint32_t *buf; /* HN_GRAMMAR_MAX_DEPTH + 2 */
  long budget;
  ExpandFrame *frames; /* the expansion's own stack (grows; bounded by the budget) */
  size_t frames_cap;
  size_t truncated_steps; /* steps that hit the budget or the stack limit */
  long work; /* units spent by the steps since the current mask (or token check) began */
} Expander;

/* Expansion work allowed per byte: one unit per expansion and per eight stack elements
 * hashed.  The shipped grammars need at most 40 on real models, a 1,000-way alternative
 * about 1,000, the deepest repetition test 5,633, a chain of 20,000 nested rules about
 * 22,500; an ambiguous grammar that could spend millions per byte stops here, about a
 * millisecond.  Beyond it the step keeps the stacks found so far. */
#define EXPAND_BUDGET_PER_BYTE 50000

/* One expansion of the stack buf[0..len): a stack whose top is a character (or that is
 * empty) goes to dst; a rule reference at the top is replaced by what follows it and
 * becomes a frame whose alternatives expand() tries next.  False when the step must give
 * up (budget spent or no memory); dst is then marked as overflowed. */
static bool
expand_top(Expander *x, StackSet *dst, size_t len, size_t *n_frames)
{
  if (--x->budget < 0) {
    dst->overflow = true;
    x->budget = -1; /* the rest of this step gives up at once too */
    return false;
  }
  if (len == 0) {
    set_add(dst, x->buf, 0);
    return true;
  }
  const HnGrammar *g = x->g;
  uint32_t p = x->buf[len - 1];
  Elem e = g->elems[p];
  if (e.type != EL_RULE) {
    /* adding a stack hashes and copies it: charge its length, so that a step's work is
     * bounded in elements touched, not just in calls (fuzz-gbnf found a grammar of long,
     * many stacks that took seconds per byte) */
    x->budget -= (long) (len / 8);
    if (x->budget < 0) {
      dst->overflow = true;
      return false;
    }
    set_add(dst, x->buf, len);
    return true;
  }
  size_t base = len - 1;
  if (g->elems[p + 1].type != EL_END)
    x->buf[base++] = p + 1; /* what follows the reference, once the rule is done */
  if (!HN_ARRAY_RESERVE(x->frames, x->frames_cap, *n_frames + 1, 64)) {
    dst->overflow = true;
    x->budget = -1;
    return false;
  }
  x->frames[(*n_frames)++] = (ExpandFrame){ e.value, 0, (uint32_t) base };
  return true;
}

/* buf[0..len) is a stack whose top may be a rule reference: add every fully expanded
 * stack it stands for to dst, depth first (the order of the alternatives).  The expansion
 * keeps its own stack of frames instead of recursing: a chain of rules (r1 ::= r2, r2 ::=
 * r3, ... thousands deep, as a JSON schema with many properties gives) nests as deep as
 * it is long, which a fixed recursion limit refused and the C stack could not hold.  Only
 * the budget bounds it now.  A frame is dropped as its last alternative starts, so a
 * chain of single-alternative rules needs one frame, not one per rule. */
static void
expand(Expander *x, StackSet *dst, size_t len)
{
  size_t n_frames = 0;
  if (!expand_top(x, dst, len, &n_frames))
    return;
  const HnGrammar *g = x->g;
  while (n_frames > 0) {
    ExpandFrame *f = &x->frames[n_frames - 1];
    uint32_t start = g->alts[g->rule_alt_off[f->rule] + f->next_alt];
    size_t l = f->base;
    if (++f->next_alt == g->rule_alt_n[f->rule])
      n_frames--;
    if (g->elems[start].type != EL_END) {
      if (l >= HN_GRAMMAR_MAX_DEPTH) {
        dst->overflow = true;
        continue;
      }
      x->buf[l++] = start;
    }
    if (!expand_top(x, dst, l, &n_frames))
      return;
  }
}

/* Advances every stack of src by the complete code point cp. */
static void
step_cp(Expander *x, const StackSet *src, uint32_t cp, StackSet *dst)
{
  const HnGrammar *g = x->g;
  for (size_t i = 0; i < src->n; i++) {
    size_t len = src->off[i + 1] - src->off[i];
    if (len == 0)
      continue;
    const uint32_t *st = src->data + src->off[i];
    uint32_t top = st[len - 1];
    if (!elem_matches(g, g->elems[top], cp))
      continue;
    memcpy(x->buf, st, (len - 1) * sizeof *st);
    size_t l = len - 1;
    if (g->elems[top + 1].type != EL_END)
      x->buf[l++] = top + 1;
    expand(x, dst, l);
  }
}

static void
filter_partial(const HnGrammar *g, const StackSet *src, uint32_t lo, uint32_t hi, StackSet *dst)
{
  for (size_t i = 0; i < src->n; i++) {
    size_t len = src->off[i + 1] - src->off[i];
    if (len == 0)
      continue;
    const uint32_t *st = src->data + src->off[i];
    if (elem_may_match_range(g, g->elems[st[len - 1]], lo, hi))
      set_add(dst, st, len);
  }
}

static bool step_byte_untallied(Expander *x, const StackSet *src, uint8_t b, StackSet *dst);

/* dst = src after one byte.  Returns whether any parse survives.  The step's work (its
 * expansion units and the stacks it looked at) is added to x->work. */
static bool
step_byte(Expander *x, const StackSet *src, uint8_t b, StackSet *dst)
{
  bool alive = step_byte_untallied(x, src, b, dst);
  if (dst->overflow)
    x->truncated_steps++;
  x->work += EXPAND_BUDGET_PER_BYTE - (x->budget > 0 ? x->budget : 0) + (long) src->n;
  return alive;
}

static bool
step_byte_untallied(Expander *x, const StackSet *src, uint8_t b, StackSet *dst)
{
  set_clear(dst);
  x->budget = EXPAND_BUDGET_PER_BYTE;
  uint32_t val, left;
  if (src->partial_left == 0) {
    if (b < 0x80) {
      step_cp(x, src, b, dst);
      return dst->n > 0;
    }
    if (b >= 0xC2 && b <= 0xDF) {
      left = 1;
      val = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      left = 2;
      val = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      left = 3;
      val = b & 0x07;
    } else {
      return false;
    }
  } else {
    if ((b & 0xC0) != 0x80)
      return false;
    val = (src->partial_cp << 6) | (b & 0x3F);
    left = src->partial_left - 1;
    /* Only shortest forms and no surrogates, checked at the second byte (so that an
     * overlong spelling of an allowed character cannot slip through).  A 3-byte sequence
     * is at its second byte exactly when the bits so far are below 0x10, because a valid
     * 4-byte one has at least 0x10 after its second byte. */
    if (src->partial_left == 3 && (val < 0x10 || val > 0x10F))
      return false;
    if (src->partial_left == 2 && src->partial_cp < 0x10 && (val < 0x20 || (val >= 0x360 && val <= 0x37F)))
      return false;
    if (left == 0) {
      if (val > 0x10FFFF || (val >= 0xD800 && val <= 0xDFFF))
        return false;
      step_cp(x, src, val, dst);
      return dst->n > 0;
    }
  }
  uint32_t lo = val << (6 * left);
  uint32_t hi = lo | ((1u << (6 * left)) - 1);
  if (src->partial_left == 0) /* the lead byte: the shortest code point of its length */
    lo = HN_MAX(lo, left == 1 ? 0x80u : left == 2 ? 0x800u : 0x10000u);
  hi = HN_MIN(hi, 0x10FFFFu);
  filter_partial(x->g, src, lo, hi, dst);
  dst->partial_cp = val;
  dst->partial_left = left;
  return dst->n > 0;
}

static bool
set_is_complete(const StackSet *s)
{
  if (s->partial_left != 0)
    return false;
  for (size_t i = 0; i < s->n; i++)
    if (s->off[i + 1] == s->off[i])
      return true;
  return false;
}

/* ---- Vocabulary ---------------------------------------------------------------- */

#define MAX_TOKEN_BYTES 1024

struct HnGrammarVocab {
  int32_t n_vocab;
  uint8_t *blob;
  size_t *tok_off;    /* n_vocab + 1 */
  bool *is_eog;
  int32_t *order;     /* tokens with bytes, sorted by bytes */
  uint16_t *lcp;      /* common prefix with the previous token in order */
  size_t n_order;
  size_t max_len;
};

typedef struct {
  const uint8_t *bytes;
  uint32_t len;
  int32_t id;
} SortEntry;

static int
sort_entry_cmp(const void *pa, const void *pb)
{
  const SortEntry *a = pa, *b = pb;
  int c = memcmp(a->bytes, b->bytes, a->len < b->len ? a->len : b->len);
  if (c != 0)
    return c;
  if (a->len != b->len)
    return a->len < b->len ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

HnGrammarVocab *
hn_grammar_vocab_new(int32_t n_vocab, const char *const *token_bytes, const uint32_t *token_len,
                     const bool *is_eog, HnError *err)
{
  if (n_vocab <= 0 || n_vocab > (1 << 24) || token_bytes == NULL || token_len == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "invalid vocabulary for the grammar"), NULL;
  HnGrammarVocab *v = calloc(1, sizeof *v);
  if (v == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  v->n_vocab = n_vocab;
  size_t total = 0;
  for (int32_t i = 0; i < n_vocab; i++) {
    uint32_t l = token_len[i];
    if (l > MAX_TOKEN_BYTES)
      l = 0; /* never allowed under a grammar */
    total += l;
  }
  v->blob = malloc(total ? total : 1);
  v->tok_off = malloc(((size_t) n_vocab + 1) * sizeof *v->tok_off);
  v->is_eog = calloc((size_t) n_vocab, sizeof *v->is_eog);
  v->order = malloc((size_t) n_vocab * sizeof *v->order);
  v->lcp = malloc((size_t) n_vocab * sizeof *v->lcp);
  if (!v->blob || !v->tok_off || !v->is_eog || !v->order || !v->lcp) {
    hn_grammar_vocab_free(v);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  }
  size_t w = 0;
  for (int32_t i = 0; i < n_vocab; i++) {
    uint32_t l = token_len[i] > MAX_TOKEN_BYTES ? 0 : token_len[i];
    if (l > 0 && token_bytes[i] == NULL)
      l = 0;
    v->tok_off[i] = w;
    if (l)
      memcpy(v->blob + w, token_bytes[i], l);
    w += l;
    if (is_eog)
      v->is_eog[i] = is_eog[i];
    if (l > 0 && !v->is_eog[i])
      v->order[v->n_order++] = i;
    if (l > v->max_len)
      v->max_len = l;
  }
  v->tok_off[n_vocab] = w;
  /* sorted by bytes, so that tokens sharing a prefix are neighbours (built once per model) */
  SortEntry *entries = malloc((v->n_order ? v->n_order : 1) * sizeof *entries);
  if (entries == NULL) {
    hn_grammar_vocab_free(v);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  }
  for (size_t k = 0; k < v->n_order; k++) {
    int32_t t = v->order[k];
    entries[k] = (SortEntry){ v->blob + v->tok_off[t],
                              (uint32_t) (v->tok_off[t + 1] - v->tok_off[t]), t };
  }
  qsort(entries, v->n_order, sizeof *entries, sort_entry_cmp);
  for (size_t k = 0; k < v->n_order; k++)
    v->order[k] = entries[k].id;
  free(entries);
  for (size_t k = 0; k < v->n_order; k++) {
    if (k == 0) {
      v->lcp[k] = 0;
      continue;
    }
    int32_t a = v->order[k - 1], b = v->order[k];
    size_t la = v->tok_off[a + 1] - v->tok_off[a], lb = v->tok_off[b + 1] - v->tok_off[b];
    size_t m = la < lb ? la : lb, i = 0;
    while (i < m && v->blob[v->tok_off[a] + i] == v->blob[v->tok_off[b] + i])
      i++;
    v->lcp[k] = (uint16_t) i;
  }
  return v;
}

void
hn_grammar_vocab_free(HnGrammarVocab *v)
{
  if (v == NULL)
    return;
  free(v->blob);
  free(v->tok_off);
  free(v->is_eog);
  free(v->order);
  free(v->lcp);
  free(v);
}

int32_t
hn_grammar_vocab_n_vocab(const HnGrammarVocab *v)
{
  return v->n_vocab;
}

/* ---- State ----------------------------------------------------------------------- */

struct HnGrammarState {
  const HnGrammar *g;
  const HnGrammarVocab *v;
  StackSet cur, tmp[2];
  StackSet *levels; /* max_len + 1 for masking; levels[0] unused (cur is the root) */
  size_t n_levels;
  uint8_t *allowed;
  Expander x;
  /* Masking memo: distinct stack sets met while walking the vocabulary, and for each of
   * them the set reached by every byte.  Parse states repeat constantly (inside a JSON
   * string every letter leads back to the same set), so most steps of the walk become
   * one table lookup.  Kept across calls; flushed when full. */
  StackSet *memo_sets;
  uint32_t *memo_hash;
  size_t memo_n;
  int32_t *memo_trans; /* MEMO_CAP * 256 */
  int32_t *memo_level; /* set index per prefix length */
  bool last_mask_truncated; /* the last mask ran out of work before the end of the vocabulary */
  size_t truncated_masks;
};

/* Work allowed for one mask (the walk over the vocabulary) or one lazy token check, in the
 * units of EXPAND_BUDGET_PER_BYTE.  Measured with the LLaMA vocabulary (32,000 tokens): the
 * shipped json.gbnf needs at most 31,000 per mask (its first, with an empty memo), most masks
 * a few hundred; the ambiguous grammar of /grammar/wide-expansion would need far more than
 * this for almost every mask, and stops at it after 0.2-0.3 s on the shared test machine
 * under load (about 50 ns a unit there, some 20 ns when idle).  Without this bound one
 * token's mask could take seconds: thousands of byte steps, each allowed 50,000 units.
 * When it runs out, the tokens not yet checked stay forbidden: the mask stays safe (it never
 * allows what the grammar forbids), and the step is counted in
 * hn_grammar_state_truncated_steps and hn_grammar_state_truncated_masks. */
#define MASK_WORK_BUDGET 5000000L

#define MEMO_CAP 1024
#define MEMO_UNKNOWN (-2)
#define MEMO_DEAD (-1)

HnGrammarState *
hn_grammar_state_new(const HnGrammar *g, const HnGrammarVocab *v, HnError *err)
{
  if (g == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "no grammar"), NULL;
  HnGrammarState *s = calloc(1, sizeof *s);
  if (s == NULL)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  s->g = g;
  s->v = v;
  s->x.g = g;
  s->x.buf = malloc((HN_GRAMMAR_MAX_DEPTH + 2) * sizeof *s->x.buf);
  bool ok = s->x.buf && set_init(&s->cur) && set_init(&s->tmp[0]) && set_init(&s->tmp[1]);
  if (ok && v) {
    s->n_levels = v->max_len + 1;
    s->levels = calloc(s->n_levels, sizeof *s->levels);
    s->allowed = calloc((size_t) v->n_vocab, 1);
    s->memo_sets = calloc(MEMO_CAP, sizeof *s->memo_sets);
    s->memo_hash = calloc(MEMO_CAP, sizeof *s->memo_hash);
    s->memo_trans = malloc((size_t) MEMO_CAP * 256 * sizeof *s->memo_trans);
    s->memo_level = calloc(s->n_levels + 1, sizeof *s->memo_level);
    ok = s->levels && s->allowed && s->memo_sets && s->memo_hash && s->memo_trans &&
         s->memo_level;
    for (size_t i = 1; ok && i < s->n_levels; i++)
      ok = set_init(&s->levels[i]);
  }
  if (!ok) {
    hn_grammar_state_free(s);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory"), NULL;
  }
  hn_grammar_state_reset(s);
  return s;
}

void
hn_grammar_state_free(HnGrammarState *s)
{
  if (s == NULL)
    return;
  set_free(&s->cur);
  set_free(&s->tmp[0]);
  set_free(&s->tmp[1]);
  if (s->levels)
    for (size_t i = 0; i < s->n_levels; i++)
      set_free(&s->levels[i]);
  free(s->levels);
  free(s->allowed);
  if (s->memo_sets)
    for (size_t i = 0; i < MEMO_CAP; i++)
      set_free(&s->memo_sets[i]);
  free(s->memo_sets);
  free(s->memo_hash);
  free(s->memo_trans);
  free(s->memo_level);
  free(s->x.buf);
  free(s->x.frames);
  free(s);
}

void
hn_grammar_state_reset(HnGrammarState *s)
{
  set_clear(&s->cur);
  s->x.buf[0] = 0; /* the reference to root */
  s->x.budget = EXPAND_BUDGET_PER_BYTE;
  s->x.truncated_steps = 0;
  s->truncated_masks = 0;
  s->last_mask_truncated = false;
  expand(&s->x, &s->cur, 1);
  if (s->cur.overflow)
    s->x.truncated_steps++;
}

/* Runs the bytes from cur through the scratch sets; returns the final set or NULL (also
 * when the work exceeds work_limit: the bytes then count as refused, which is safe). */
static StackSet *
run_bytes(HnGrammarState *s, const uint8_t *b, size_t len, long work_limit)
{
  const StackSet *src = &s->cur;
  StackSet *dst = NULL;
  s->x.work = 0;
  for (size_t i = 0; i < len; i++) {
    if (s->x.work > work_limit)
      return NULL;
    dst = &s->tmp[i & 1];
    if (!step_byte(&s->x, src, b[i], dst))
      return NULL;
    src = dst;
  }
  return dst;
}

bool
hn_grammar_accepts_bytes(HnGrammarState *s, const void *bytes, size_t len)
{
  if (len == 0)
    return true;
  return run_bytes(s, bytes, len, LONG_MAX) != NULL;
}

bool
hn_grammar_accept_bytes(HnGrammarState *s, const void *bytes, size_t len)
{
  if (len == 0)
    return true;
  StackSet *end = run_bytes(s, bytes, len, LONG_MAX);
  if (end == NULL)
    return false;
  StackSet t = s->cur;
  s->cur = *end;
  *end = t;
  return true;
}

static bool
token_span(const HnGrammarState *s, int32_t token, const uint8_t **b, size_t *len)
{
  if (s->v == NULL || token < 0 || token >= s->v->n_vocab)
    return false;
  *b = s->v->blob + s->v->tok_off[token];
  *len = s->v->tok_off[token + 1] - s->v->tok_off[token];
  return true;
}

bool
hn_grammar_accepts_token_bytes(HnGrammarState *s, int32_t token)
{
  const uint8_t *b;
  size_t len;
  if (!token_span(s, token, &b, &len))
    return false;
  if (s->v->is_eog[token])
    return set_is_complete(&s->cur);
  if (len == 0)
    return false;
  /* the sampler's quick check of its favourite: if that alone costs a mask's budget, say no
   * and let the (bounded) mask decide */
  return run_bytes(s, b, len, MASK_WORK_BUDGET) != NULL;
}

bool
hn_grammar_accept_token(HnGrammarState *s, int32_t token)
{
  const uint8_t *b;
  size_t len;
  if (!token_span(s, token, &b, &len))
    return false;
  if (s->v->is_eog[token])
    return set_is_complete(&s->cur);
  if (len == 0)
    return false;
  return hn_grammar_accept_bytes(s, b, len);
}

static uint32_t
set_hash(const StackSet *s)
{
  uint32_t h = 0x9747b28cu ^ (uint32_t) s->n ^ (s->partial_cp << 8) ^ s->partial_left;
  for (size_t i = 0; i < s->n; i++)
    h = (h ^ s->hash[i]) * 16777619u;
  return h;
}

static bool
set_equal(const StackSet *a, const StackSet *b)
{
  return a->n == b->n && a->len == b->len && a->partial_cp == b->partial_cp &&
         a->partial_left == b->partial_left &&
         memcmp(a->off, b->off, (a->n + 1) * sizeof *a->off) == 0 &&
         memcmp(a->data, b->data, a->len * sizeof *a->data) == 0;
}

/* dst = src, raw (src is already free of duplicates). */
static bool
set_assign(StackSet *dst, const StackSet *src)
{
  if (dst->data == NULL && !set_init(dst))
    return false;
  set_clear(dst); /* empties the index while it still matches the old entries */
  if (src->len > dst->cap) {
    if (!HN_ARRAY_RESIZE(dst->data, src->len))
      return false;
    dst->cap = src->len;
  }
  if (src->n > dst->cap_n) {
    if (!HN_ARRAY_RESIZE(dst->off, src->n + 1) || !HN_ARRAY_RESIZE(dst->hash, src->n))
      return false;
    dst->cap_n = src->n;
  }
  if (dst->index_mask + 1 < 2 * dst->cap_n && !index_rebuild(dst, dst->cap_n))
    return false;
  memcpy(dst->data, src->data, src->len * sizeof *dst->data);
  memcpy(dst->off, src->off, (src->n + 1) * sizeof *dst->off);
  memcpy(dst->hash, src->hash, src->n * sizeof *dst->hash);
  dst->len = src->len;
  for (size_t i = 0; i < src->n; i++) {
    dst->index[index_slot_of_hash(dst, dst->hash[i])] = (uint32_t) dst->n + 1;
    dst->n++;
  }
  dst->partial_cp = src->partial_cp;
  dst->partial_left = src->partial_left;
  dst->overflow = src->overflow;
  return true;
}

/* Index of the memo entry equal to set, adding it if new; -1 when the memo is full. */
static int32_t
memo_intern(HnGrammarState *s, const StackSet *set)
{
  uint32_t h = set_hash(set);
  for (size_t i = 0; i < s->memo_n; i++)
    if (s->memo_hash[i] == h && set_equal(&s->memo_sets[i], set))
      return (int32_t) i;
  if (s->memo_n >= MEMO_CAP || !set_assign(&s->memo_sets[s->memo_n], set))
    return -1;
  s->memo_hash[s->memo_n] = h;
  int32_t *row = s->memo_trans + s->memo_n * 256;
  for (int b = 0; b < 256; b++)
    row[b] = MEMO_UNKNOWN;
  return (int32_t) s->memo_n++;
}

typedef enum { WALK_DONE, WALK_MEMO_FULL, WALK_OUT_OF_WORK } WalkResult;

/* Fills s->allowed for every token: a walk over the tokens sorted by their bytes, where
 * each token reuses the parse states of the prefix it shares with the previous one and a
 * dead prefix rules out every token that starts with it.  WALK_MEMO_FULL: the memo filled
 * up (the caller flushes it and walks again); WALK_OUT_OF_WORK: the mask's budget ran out,
 * the tokens not reached stay forbidden. */
static WalkResult
compute_allowed_memo(HnGrammarState *s)
{
  const HnGrammarVocab *v = s->v;
  memset(s->allowed, 0, (size_t) v->n_vocab);
  int32_t root = memo_intern(s, &s->cur);
  if (root < 0)
    return WALK_MEMO_FULL;
  int32_t *lv = s->memo_level;
  lv[0] = root;
  size_t valid = 0;          /* lv[0..valid] hold the states of the current prefix */
  size_t dead_at = SIZE_MAX; /* a prefix of this length has no parse */
  for (size_t k = 0; k < v->n_order; k++) {
    int32_t t = v->order[k];
    size_t lcp = v->lcp[k];
    if (dead_at != SIZE_MAX && lcp >= dead_at)
      continue;
    dead_at = SIZE_MAX;
    if (valid > lcp)
      valid = lcp;
    const uint8_t *b = v->blob + v->tok_off[t];
    size_t len = v->tok_off[t + 1] - v->tok_off[t];
    bool alive = true;
    while (valid < len) {
      int32_t si = lv[valid];
      int32_t *slot = &s->memo_trans[(size_t) si * 256 + b[valid]];
      int32_t next = *slot;
      if (next == MEMO_UNKNOWN) {
        if (s->x.work > MASK_WORK_BUDGET)
          return WALK_OUT_OF_WORK;
        StackSet *tmp = &s->tmp[0];
        if (step_byte(&s->x, &s->memo_sets[si], b[valid], tmp)) {
          next = memo_intern(s, tmp);
          if (next < 0)
            return WALK_MEMO_FULL;
        } else {
          next = MEMO_DEAD;
        }
        *slot = next;
      }
      valid++;
      if (next == MEMO_DEAD) {
        dead_at = valid;
        alive = false;
        break;
      }
      lv[valid] = next;
    }
    if (alive)
      s->allowed[t] = 1;
  }
  return WALK_DONE;
}

/* The same walk without the memo, for grammars whose states do not repeat. */
static WalkResult
compute_allowed_direct(HnGrammarState *s)
{
  const HnGrammarVocab *v = s->v;
  memset(s->allowed, 0, (size_t) v->n_vocab);
  size_t valid = 0;
  size_t dead_at = SIZE_MAX;
  for (size_t k = 0; k < v->n_order; k++) {
    int32_t t = v->order[k];
    size_t lcp = v->lcp[k];
    if (dead_at != SIZE_MAX && lcp >= dead_at)
      continue;
    dead_at = SIZE_MAX;
    if (valid > lcp)
      valid = lcp;
    const uint8_t *b = v->blob + v->tok_off[t];
    size_t len = v->tok_off[t + 1] - v->tok_off[t];
    bool alive = true;
    while (valid < len) {
      if (s->x.work > MASK_WORK_BUDGET)
        return WALK_OUT_OF_WORK;
      const StackSet *src = valid == 0 ? &s->cur : &s->levels[valid];
      StackSet *dst = &s->levels[valid + 1];
      bool ok = step_byte(&s->x, src, b[valid], dst);
      valid++;
      if (!ok) {
        dead_at = valid;
        alive = false;
        break;
      }
    }
    if (alive)
      s->allowed[t] = 1;
  }
  return WALK_DONE;
}

static void
compute_allowed(HnGrammarState *s)
{
  s->x.work = 0;
  WalkResult r = compute_allowed_memo(s);
  if (r == WALK_MEMO_FULL) {
    s->memo_n = 0;
    r = compute_allowed_memo(s);
  }
  if (r == WALK_MEMO_FULL) {
    s->memo_n = 0;
    r = compute_allowed_direct(s);
  }
  s->last_mask_truncated = r == WALK_OUT_OF_WORK;
  if (s->last_mask_truncated) {
    s->truncated_masks++;
    s->x.truncated_steps++;
  }
}

void
hn_grammar_mask(HnGrammarState *s, HnCandidate *cands, size_t n)
{
  if (s->v == NULL) {
    for (size_t i = 0; i < n; i++)
      cands[i].logit = -INFINITY;
    return;
  }
  compute_allowed(s);
  bool complete = set_is_complete(&s->cur);
  for (size_t i = 0; i < n; i++) {
    int32_t t = cands[i].id;
    if (t < 0 || t >= s->v->n_vocab)
      cands[i].logit = -INFINITY;
    else if (s->v->is_eog[t])
      cands[i].logit = complete ? cands[i].logit : -INFINITY;
    else if (!s->allowed[t])
      cands[i].logit = -INFINITY;
  }
}

void
hn_grammar_mask_logits(HnGrammarState *s, float *logits, int32_t n_vocab)
{
  if (s->v == NULL || n_vocab != s->v->n_vocab) {
    for (int32_t i = 0; i < n_vocab; i++)
      logits[i] = -INFINITY;
    return;
  }
  compute_allowed(s);
  bool complete = set_is_complete(&s->cur);
  for (int32_t t = 0; t < n_vocab; t++)
    if (s->v->is_eog[t] ? !complete : !s->allowed[t])
      logits[t] = -INFINITY;
}

bool
hn_grammar_is_complete(const HnGrammarState *s)
{
  return set_is_complete(&s->cur);
}

bool
hn_grammar_can_continue(const HnGrammarState *s)
{
  for (size_t i = 0; i < s->cur.n; i++)
    if (s->cur.off[i + 1] > s->cur.off[i])
      return true;
  return false;
}

size_t
hn_grammar_state_n_stacks(const HnGrammarState *s)
{
  return s->cur.n;
}

size_t
hn_grammar_state_truncated_steps(const HnGrammarState *s)
{
  return s->x.truncated_steps;
}

size_t
hn_grammar_state_truncated_masks(const HnGrammarState *s)
{
  return s->truncated_masks;
}

bool
hn_grammar_state_incomplete(const HnGrammarState *s)
{
  return s->cur.overflow || s->last_mask_truncated;
}
