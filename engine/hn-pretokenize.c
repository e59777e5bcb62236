/* hn-pretokenize.c — the pre-tokenizer splits of byte-level BPE vocabularies, written as
 * hand-made matchers over code points (no regex engine).  A split is a sequence of stages;
 * each stage cuts every piece of the previous stage into its matches and the gaps between
 * them, exactly like applying the vocabulary's regexes one after another.  Invalid UTF-8
 * bytes are single code points of class "other".
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-vocab-private.h"
#include "hn-unicode.h"

#include <stdlib.h>

typedef struct {
  const uint32_t *cp;
  const uint32_t *fl;
  int64_t end; /* piece end (exclusive) */
} Ctx;

#define L(i) (c->fl[i] & HN_UC_LETTER)
#define N(i) (c->fl[i] & HN_UC_NUMBER)
#define S(i) (c->fl[i] & HN_UC_WHITESPACE)
#define P(i) (c->fl[i] & HN_UC_PUNCT)

/* Case folding as the case-insensitive contractions of the original tokenizers' regex
 * engines apply it to the letters s, t, r, e, v, m, l, d: the ASCII capitals, and U+017F
 * LATIN SMALL LETTER LONG S, whose simple case folding is 's' (no other code point folds to
 * one of these letters). */
static uint32_t
fold_case(uint32_t cp)
{
  if (cp >= 'A' && cp <= 'Z')
    return cp + 32;
  return cp == 0x017F ? 's' : cp;
}

/* 's 't 're 've 'm 'll 'd, optionally case-insensitive: length matched or 0 */
static int64_t
contraction(const Ctx *c, int64_t i, bool icase)
{
  if (c->cp[i] != '\'' || i + 1 >= c->end)
    return 0;
  uint32_t a = c->cp[i + 1], b = i + 2 < c->end ? c->cp[i + 2] : 0;
  if (icase) {
    a = fold_case(a);
    b = fold_case(b);
  }
  if (a == 's' || a == 't' || a == 'm' || a == 'd')
    return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
    return 3;
  return 0;
}

/* \s+(?!\S) then \s+ at i (which is whitespace) */
static int64_t
whitespace_run(const Ctx *c, int64_t i)
{
  int64_t j = i;
  while (j < c->end && S(j))
    j++;
  if (j < c->end && j - i > 1)
    return j - i - 1; /* leave the last space to the next word */
  return j - i;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static int64_t
match_gpt2(const Ctx *c, int64_t i)
{
  int64_t k = contraction(c, i, false);
  if (k)
    return k;
  int64_t j = i;
  if (c->cp[j] == ' ' && j + 1 < c->end)
    j++;
  if (L(j)) {
    while (j < c->end && L(j))
      j++;
    return j - i;
  }
  if (N(j)) {
    while (j < c->end && N(j))
      j++;
    return j - i;
  }
  if (!S(j) && !L(j) && !N(j)) {
    while (j < c->end && !S(j) && !L(j) && !N(j))
      j++;
    return j - i;
  }
  return whitespace_run(c, i);
}

/* The alternatives that llama3, qwen2 and gpt-4o share after their letter and number rules:
 *  ?[^\s\p{L}\p{N}]+[\r\n]*  (gpt-4o: [\r\n/]*) | \s*[\r\n]+ | \s+(?!\S) | \s+ */
static int64_t
symbols_or_whitespace(const Ctx *c, int64_t i, bool trailing_slash)
{
  int64_t j = i;
  if (c->cp[i] == ' ' && j + 1 < c->end && !S(j + 1) && !L(j + 1) && !N(j + 1))
    j++;
  if (!S(j) && !L(j) && !N(j)) {
    while (j < c->end && !S(j) && !L(j) && !N(j))
      j++;
    while (j < c->end && (c->cp[j] == '\r' || c->cp[j] == '\n' || (trailing_slash && c->cp[j] == '/')))
      j++;
    return j - i;
  }
  /* \s*[\r\n]+ : whitespace run ending at its last newline */
  j = i;
  int64_t last_nl = -1;
  while (j < c->end && S(j)) {
    if (c->cp[j] == '\r' || c->cp[j] == '\n')
      last_nl = j;
    j++;
  }
  if (last_nl >= 0)
    return last_nl + 1 - i;
  return whitespace_run(c, i);
}

/* llama3 (digits {1,3}) and qwen2 (single digits):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static int64_t
match_llama3_like(const Ctx *c, int64_t i, int max_digits)
{
  int64_t k = contraction(c, i, true);
  if (k)
    return k;
  int64_t j = i;
  uint32_t cp = c->cp[i];
  if (!(cp == '\r' || cp == '\n' || L(i) || N(i)) && i + 1 < c->end && L(i + 1))
    j++;
  if (L(j)) {
    while (j < c->end && L(j))
      j++;
    return j - i;
  }
  if (N(i)) {
    j = i;
    while (j < c->end && N(j) && j - i < max_digits)
      j++;
    return j - i;
  }
  return symbols_or_whitespace(c, i, false);
}

static int64_t
match_llama3(const Ctx *c, int64_t i)
{
  return match_llama3_like(c, i, 3);
}

static int64_t
match_qwen2(const Ctx *c, int64_t i)
{
  return match_llama3_like(c, i, 1);
}

/* gpt-4o (OpenAI's o200k split) tells letters apart by case.  "Upper" is Lu Lt Lm Lo or a
 * mark, "lower" is Ll Lm Lo or a mark; Lm, Lo and marks are both. */
#define O200K_UPPER(i) ((L(i) && !(c->fl[i] & HN_UC_LOWER)) || (c->fl[i] & HN_UC_MARK))
#define O200K_LOWER(i) ((L(i) && !(c->fl[i] & (HN_UC_UPPER | HN_UC_TITLE))) || (c->fl[i] & HN_UC_MARK))

/* [^\r\n\p{L}\p{N}] : the optional first character of a word */
static bool
word_prefix(const Ctx *c, int64_t i)
{
  return c->cp[i] != '\r' && c->cp[i] != '\n' && !L(i) && !N(i);
}

/* upper*lower+ at k, as a backtracking regex engine matches it: the greedy upper run gives
 * characters back until lower+ can start.  If the run is followed by a lower-only letter
 * (Ll), lower+ continues from there; otherwise it can only be the run's last character that
 * is both upper and lower, so the match ends right after that one.  Returns the end, or -1. */
static int64_t
o200k_upper_lower(const Ctx *c, int64_t k)
{
  int64_t e = k, last_both = -1;
  while (e < c->end && O200K_UPPER(e)) {
    if (O200K_LOWER(e))
      last_both = e;
    e++;
  }
  if (e < c->end && O200K_LOWER(e)) {
    while (e < c->end && O200K_LOWER(e))
      e++;
    return e;
  }
  return last_both >= 0 ? last_both + 1 : -1;
}

/* upper+lower* at k: the end, or -1 */
static int64_t
o200k_upper_then_lower(const Ctx *c, int64_t k)
{
  if (!O200K_UPPER(k))
    return -1;
  int64_t e = k;
  while (e < c->end && O200K_UPPER(e))
    e++;
  while (e < c->end && O200K_LOWER(e))
    e++;
  return e;
}

/* [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 * |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 * |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * Alternatives are tried in order, each first with the optional prefix character and then
 * without it, as the regex engine backtracks.  A mark is both a possible prefix and a letter. */
static int64_t
match_gpt4o(const Ctx *c, int64_t i)
{
  bool prefix = word_prefix(c, i) && i + 1 < c->end;
  int64_t e = prefix ? o200k_upper_lower(c, i + 1) : -1;
  if (e < 0)
    e = o200k_upper_lower(c, i);
  if (e < 0 && prefix)
    e = o200k_upper_then_lower(c, i + 1);
  if (e < 0)
    e = o200k_upper_then_lower(c, i);
  if (e >= 0)
    return e + (e < c->end ? contraction(c, e, true) : 0) - i;
  if (N(i)) {
    int64_t j = i;
    while (j < c->end && N(j) && j - i < 3)
      j++;
    return j - i;
  }
  return symbols_or_whitespace(c, i, true);
}

/* falcon's gpt2 variant: the same without the trailing bare \s+ */
static int64_t
match_gpt2_no_bare_ws(const Ctx *c, int64_t i)
{
  int64_t k = match_gpt2(c, i);
  if (S(i) && !(c->cp[i] == ' ' && k > 1 && !S(i + 1))) {
    int64_t j = i;
    while (j < c->end && S(j))
      j++;
    if (j < c->end && j - i == 1)
      return 0; /* \s+(?!\S) cannot match a single space before a non-space */
  }
  return k;
}

static int64_t
match_one_number(const Ctx *c, int64_t i)
{
  return N(i) ? 1 : 0;
}

static bool
is_punct_or_math(const Ctx *c, int64_t j)
{
  uint32_t cp = c->cp[j];
  return P(j) || cp == '$' || cp == '+' || cp == '<' || cp == '=' || cp == '>' || cp == '^' || cp == '~' ||
         cp == '|';
}

/* [\p{P}\$\+<=>\^~\|`]+ */
static int64_t
match_falcon_punct(const Ctx *c, int64_t i)
{
  int64_t j = i;
  while (j < c->end && (is_punct_or_math(c, j) || c->cp[j] == '`'))
    j++;
  return j - i;
}

/* [\p{P}\$\+<=>\^~\|]+ (the default split's first stage: falcon's without the backtick) */
static int64_t
match_default_punct(const Ctx *c, int64_t i)
{
  int64_t j = i;
  while (j < c->end && is_punct_or_math(c, j))
    j++;
  return j - i;
}

/* \p{N}+ */
static int64_t
match_numbers(const Ctx *c, int64_t i)
{
  int64_t j = i;
  while (j < c->end && N(j))
    j++;
  return j - i;
}

static int64_t
match_three_digits(const Ctx *c, int64_t i)
{
  if (i + 3 > c->end)
    return 0;
  for (int k = 0; k < 3; k++)
    if (c->cp[i + k] < '0' || c->cp[i + k] > '9')
      return 0;
  return 3;
}

static int64_t
match_newline(const Ctx *c, int64_t i)
{
  return (c->cp[i] == '\r' || c->cp[i] == '\n') ? 1 : 0;
}

/* \s?\p{L}+ */
static int64_t
match_ws_letters(const Ctx *c, int64_t i)
{
  int64_t j = i;
  if (S(j) && j + 1 < c->end)
    j++;
  if (!L(j))
    return 0;
  while (j < c->end && L(j))
    j++;
  return j - i;
}

/* \s?\p{P}+ */
static int64_t
match_ws_punct(const Ctx *c, int64_t i)
{
  int64_t j = i;
  if (S(j) && j + 1 < c->end)
    j++;
  if (!P(j))
    return 0;
  while (j < c->end && P(j))
    j++;
  return j - i;
}

static bool
is_cjk_hangul(uint32_t cp)
{
  return (cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x0800 && cp <= 0x4E00) || (cp >= 0xAC00 && cp <= 0xD7FF);
}

/* [一-龥ࠀ-一가-퟿]+ */
static int64_t
match_cjk(const Ctx *c, int64_t i)
{
  int64_t j = i;
  while (j < c->end && c->cp[j] != HN_UC_INVALID && is_cjk_hangul(c->cp[j]))
    j++;
  return j - i;
}

/* deepseek-llm spells its letters out instead of \p{L}: the cased letters (Lu, Ll, Lt) of
 * these blocks, a fixed list that does not follow Unicode updates.  Sorted, disjoint. */
static const uint32_t deepseek_letters[][2] = {
  { 0x0041, 0x005A }, { 0x0061, 0x007A }, { 0x00B5, 0x00B5 }, { 0x00C0, 0x00D6 }, { 0x00D8, 0x00F6 },
  { 0x00F8, 0x01BA }, { 0x01BC, 0x01BF }, { 0x01C4, 0x0293 }, { 0x0295, 0x02AF }, { 0x0370, 0x0373 },
  { 0x0376, 0x0377 }, { 0x037B, 0x037D }, { 0x037F, 0x037F }, { 0x0386, 0x0386 }, { 0x0388, 0x038A },
  { 0x038C, 0x038C }, { 0x038E, 0x03A1 }, { 0x03A3, 0x03F5 }, { 0x03F7, 0x0481 }, { 0x048A, 0x052F },
  { 0x0531, 0x0556 }, { 0x10A0, 0x10C5 }, { 0x13A0, 0x13F5 }, { 0x13F8, 0x13FD }, { 0x1C90, 0x1CBA },
  { 0x1CBD, 0x1CBF }, { 0x1D00, 0x1D2B }, { 0x1D6B, 0x1D77 }, { 0x1D79, 0x1D9A }, { 0x1E00, 0x1F15 },
  { 0x1F18, 0x1F1D }, { 0x1F20, 0x1F45 }, { 0x1F48, 0x1F4D }, { 0x1F50, 0x1F57 }, { 0x1F59, 0x1F59 },
  { 0x1F5B, 0x1F5B }, { 0x1F5D, 0x1F5D }, { 0x1F5F, 0x1F7D }, { 0x1F80, 0x1FB4 }, { 0x1FB6, 0x1FBC },
  { 0x1FBE, 0x1FBE }, { 0x1FC2, 0x1FC4 }, { 0x1FC6, 0x1FCC }, { 0x1FD0, 0x1FD3 }, { 0x1FD6, 0x1FDB },
  { 0x1FE0, 0x1FEC }, { 0x1FF2, 0x1FF4 }, { 0x1FF6, 0x1FFC }, { 0x2102, 0x2102 }, { 0x2107, 0x2107 },
  { 0x210A, 0x2113 }, { 0x2115, 0x2115 }, { 0x2119, 0x211D }, { 0x2124, 0x2124 }, { 0x2126, 0x2126 },
  { 0x2128, 0x2128 }, { 0x212A, 0x212D }, { 0x212F, 0x2134 }, { 0x2139, 0x2139 }, { 0x213C, 0x213F },
  { 0x2145, 0x2149 }, { 0x214E, 0x214E }, { 0x2183, 0x2184 }, { 0x2C00, 0x2C7B }, { 0x2C7E, 0x2CE4 },
  { 0x2CEB, 0x2CEE }, { 0x2CF2, 0x2CF3 }, { 0xA640, 0xA66D }, { 0xA680, 0xA69B }, { 0xA722, 0xA76F },
  { 0xA771, 0xA787 }, { 0xA78B, 0xA78E }, { 0xAB70, 0xABBF }, { 0xFB00, 0xFB06 }, { 0xFB13, 0xFB17 },
  { 0xFF21, 0xFF3A }, { 0xFF41, 0xFF5A }, { 0x10400, 0x1044F }, { 0x104B0, 0x104D3 }, { 0x104D8, 0x104FB },
  { 0x10C80, 0x10CB2 }, { 0x10CC0, 0x10CF2 }, { 0x118A0, 0x118DF }, { 0x1E900, 0x1E943 },
};

static bool
is_deepseek_letter(uint32_t cp)
{
  size_t lo = 0, hi = HN_ARRAY_LEN(deepseek_letters);
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (cp < deepseek_letters[mid][0])
      hi = mid;
    else if (cp > deepseek_letters[mid][1])
      lo = mid + 1;
    else
      return true;
  }
  return false;
}

/* \s?[deepseek letters]+ */
static int64_t
match_ws_deepseek_letters(const Ctx *c, int64_t i)
{
  int64_t j = i;
  if (S(j) && j + 1 < c->end)
    j++;
  if (c->cp[j] == HN_UC_INVALID || !is_deepseek_letter(c->cp[j]))
    return 0;
  while (j < c->end && c->cp[j] != HN_UC_INVALID && is_deepseek_letter(c->cp[j]))
    j++;
  return j - i;
}

/* ASCII and full-width punctuation and symbols (including the ASCII letters, which the
 * class's :-~ range spans), curly quotes, ideographic space, comma and full stop. */
static bool
is_deepseek_punct(uint32_t cp)
{
  return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x7E) || (cp >= 0xFF01 && cp <= 0xFF0F) ||
         (cp >= 0xFF1A && cp <= 0xFF5E) || (cp >= 0x2018 && cp <= 0x201F) || (cp >= 0x3000 && cp <= 0x3002);
}

static int64_t
deepseek_punct_run(const Ctx *c, int64_t j)
{
  int64_t k = j;
  while (k < c->end && is_deepseek_punct(c->cp[k]))
    k++;
  return k - j;
}

/* \s?[!-/:-~！-／：-～‘-‟　-。]+ ; the ideographic space is both \s and in the class, so when
 * the optional space leaves nothing to match the run may start at the space itself */
static int64_t
match_ws_deepseek_punct(const Ctx *c, int64_t i)
{
  if (S(i) && i + 1 < c->end) {
    int64_t k = deepseek_punct_run(c, i + 1);
    if (k > 0)
      return k + 1;
  }
  return deepseek_punct_run(c, i);
}

/* \s+$ within the piece.  A whitespace run that stops before the end cannot match at any of
 * its positions: a negative result tells run_stage to skip it whole (linear on long runs). */
static int64_t
match_trailing_ws(const Ctx *c, int64_t i)
{
  if (!S(i))
    return 0;
  int64_t j = i;
  while (j < c->end && S(j))
    j++;
  return j == c->end ? j - i : -(j - i);
}

/* A matcher returns the length of its match at i, 0 for no match at i, or -k for no match at
 * any of i .. i+k-1. */
typedef int64_t (*Matcher)(const Ctx *c, int64_t i);

/* cuts pieces [in] into matches and gaps; pieces are code point index pairs */
static int64_t
run_stage(Matcher m, const uint32_t *cp, const uint32_t *fl, const int64_t *in, int64_t n_in, int64_t *out)
{
  int64_t n_out = 0;
  for (int64_t p = 0; p < n_in; p++) {
    Ctx c = { cp, fl, in[2 * p + 1] };
    int64_t gap = in[2 * p];
    for (int64_t i = in[2 * p]; i < c.end;) {
      int64_t k = m(&c, i);
      if (k <= 0) {
        i += k < 0 ? -k : 1;
        continue;
      }
      if (gap < i) {
        out[2 * n_out] = gap;
        out[2 * n_out + 1] = i;
        n_out++;
      }
      out[2 * n_out] = i;
      out[2 * n_out + 1] = i + k;
      n_out++;
      i += k;
      gap = i;
    }
    if (gap < c.end) {
      out[2 * n_out] = gap;
      out[2 * n_out + 1] = c.end;
      n_out++;
    }
  }
  return n_out;
}

int64_t
hn_pretokenize(HnPreType pre, const char *text, size_t len, uint32_t **pieces_out)
{
  *pieces_out = NULL;
  Matcher stages[6];
  int n_stages = 0;
  switch (pre) {
  case HN_PRE_STARCODER:
    stages[n_stages++] = match_one_number;
    stages[n_stages++] = match_gpt2;
    break;
  case HN_PRE_LLAMA3:
    stages[n_stages++] = match_llama3;
    break;
  case HN_PRE_QWEN2:
    stages[n_stages++] = match_qwen2;
    break;
  case HN_PRE_GPT4O:
    stages[n_stages++] = match_gpt4o;
    break;
  case HN_PRE_FALCON:
    stages[n_stages++] = match_falcon_punct;
    stages[n_stages++] = match_gpt2_no_bare_ws;
    stages[n_stages++] = match_three_digits;
    break;
  case HN_PRE_DEEPSEEK_CODER:
    stages[n_stages++] = match_newline;
    stages[n_stages++] = match_ws_letters;
    stages[n_stages++] = match_ws_punct;
    stages[n_stages++] = match_cjk;
    stages[n_stages++] = match_one_number;
    break;
  case HN_PRE_DEEPSEEK_LLM:
    stages[n_stages++] = match_newline;
    stages[n_stages++] = match_ws_deepseek_letters;
    stages[n_stages++] = match_ws_deepseek_punct;
    stages[n_stages++] = match_trailing_ws;
    stages[n_stages++] = match_cjk;
    stages[n_stages++] = match_numbers;
    break;
  case HN_PRE_GPT2:
    stages[n_stages++] = match_gpt2;
    break;
  case HN_PRE_DEFAULT:
  default:
    stages[n_stages++] = match_default_punct;
    stages[n_stages++] = match_gpt2;
    stages[n_stages++] = match_numbers;
    stages[n_stages++] = match_three_digits;
    break;
  }
  uint32_t *cp = malloc(sizeof(uint32_t) * (len + 1));
  uint32_t *fl = malloc(sizeof(uint32_t) * (len + 1));
  uint32_t *boff = malloc(sizeof(uint32_t) * (len + 1));
  int64_t *a = malloc(sizeof(int64_t) * 2 * (len + 1));
  int64_t *b = malloc(sizeof(int64_t) * 2 * (len + 1));
  if (!cp || !fl || !boff || !a || !b) {
    free(cp);
    free(fl);
    free(boff);
    free(a);
    free(b);
    return -1;
  }
  int64_t n_cp = 0;
  for (size_t i = 0; i < len;) {
    uint32_t c;
    int used = hn_utf8_decode(text + i, len - i, &c);
    cp[n_cp] = c;
    fl[n_cp] = hn_unicode_flags(c);
    boff[n_cp] = (uint32_t)i;
    n_cp++;
    i += (size_t)used;
  }
  boff[n_cp] = (uint32_t)len;
  int64_t n = 0;
  if (n_cp > 0) {
    a[0] = 0;
    a[1] = n_cp;
    n = 1;
  }
  for (int s = 0; s < n_stages; s++) {
    n = run_stage(stages[s], cp, fl, a, n, b);
    int64_t *t = a;
    a = b;
    b = t;
  }
  uint32_t *pieces = malloc(sizeof(uint32_t) * 2 * (size_t)(n + 1));
  if (pieces != NULL)
    for (int64_t p = 0; p < n; p++) {
      pieces[2 * p] = boff[a[2 * p]];
      pieces[2 * p + 1] = boff[a[2 * p + 1]];
    }
  free(cp);
  free(fl);
  free(boff);
  free(a);
  free(b);
  *pieces_out = pieces;
  return pieces ? n : -1;
}
