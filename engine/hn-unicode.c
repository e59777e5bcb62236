/* hn-unicode.c — UTF-8 and code point classes (tables in hn-unicode-tables.c).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-unicode.h"

#include <stdlib.h>
#include <string.h>

uint32_t
hn_unicode_flags(uint32_t cp)
{
  if (cp < 128)
    return hn_unicode_ascii_flags[cp];
  if (cp > 0x10FFFF)
    return HN_UC_OTHER;
  size_t lo = 0, hi = hn_unicode_n_ranges;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (hn_unicode_ranges[mid].last < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return hn_unicode_ranges[lo].flags;
}

int
hn_utf8_decode(const char *str, size_t len, uint32_t *cp)
{
  const unsigned char *s = (const unsigned char *)str;
  unsigned char c = s[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  int n;
  uint32_t value, min;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    value = c & 0x1F;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    value = c & 0x0F;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    value = c & 0x07;
    min = 0x10000;
  } else {
    *cp = HN_UC_INVALID;
    return 1;
  }
  if ((size_t)n > len) {
    *cp = HN_UC_INVALID;
    return 1;
  }
  for (int i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) {
      *cp = HN_UC_INVALID;
      return 1;
    }
    value = value << 6 | (s[i] & 0x3F);
  }
  if (value < min || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
    *cp = HN_UC_INVALID;
    return 1;
  }
  *cp = value;
  return n;
}

int
hn_utf8_encode(uint32_t cp, char *buf)
{
  unsigned char *b = (unsigned char *)buf;
  if (cp < 0x80) {
    b[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    b[0] = (unsigned char)(0xC0 | cp >> 6);
    b[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    b[0] = (unsigned char)(0xE0 | cp >> 12);
    b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    b[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  b[0] = (unsigned char)(0xF0 | cp >> 18);
  b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
  b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
  b[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

size_t
hn_utf8_complete_prefix(const char *str, size_t len)
{
  const unsigned char *s = (const unsigned char *)str;
  /* Look back at most 3 bytes for the start of a sequence cut off by the end. */
  size_t back = 0;
  while (back < 3 && back < len && (s[len - 1 - back] & 0xC0) == 0x80)
    back++;
  if (back == len)
    return len; /* nothing but continuation bytes: invalid, not incomplete */
  unsigned char lead = s[len - 1 - back];
  size_t need = (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : (lead & 0xF8) == 0xF0 ? 4 : 1;
  if (need > back + 1)
    return len - 1 - back;
  return len;
}

uint8_t
hn_unicode_ccc_of(uint32_t cp)
{
  if (cp < 0x300 || cp > 0x10FFFF)
    return 0;
  size_t lo = 0, hi = hn_unicode_n_ccc;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (hn_unicode_ccc[mid].last < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < hn_unicode_n_ccc && hn_unicode_ccc[lo].first <= cp ? hn_unicode_ccc[lo].ccc : 0;
}

/* Hangul syllables are composed and decomposed arithmetically (Unicode, chapter 3.12). */
enum {
  HANGUL_S = 0xAC00,
  HANGUL_L = 0x1100,
  HANGUL_V = 0x1161,
  HANGUL_T = 0x11A7,
  HANGUL_L_COUNT = 19,
  HANGUL_V_COUNT = 21,
  HANGUL_T_COUNT = 28,
  HANGUL_N_COUNT = HANGUL_V_COUNT * HANGUL_T_COUNT,
  HANGUL_S_COUNT = HANGUL_L_COUNT * HANGUL_N_COUNT,
};

static const HnUnicodeDecomposition *
find_decomposition(uint32_t cp)
{
  size_t lo = 0, hi = hn_unicode_n_decompositions;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (hn_unicode_decompositions[mid].cp < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < hn_unicode_n_decompositions && hn_unicode_decompositions[lo].cp == cp ? &hn_unicode_decompositions[lo]
                                                                                     : NULL;
}

/* Appends the full canonical decomposition of cp to out; returns the new count. */
static size_t
decompose(uint32_t cp, uint32_t *out, size_t n)
{
  if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_S_COUNT) {
    uint32_t s = cp - HANGUL_S;
    out[n++] = HANGUL_L + s / HANGUL_N_COUNT;
    out[n++] = HANGUL_V + (s % HANGUL_N_COUNT) / HANGUL_T_COUNT;
    if (s % HANGUL_T_COUNT != 0)
      out[n++] = HANGUL_T + s % HANGUL_T_COUNT;
    return n;
  }
  const HnUnicodeDecomposition *d = cp == HN_UC_INVALID || cp < 0xC0 ? NULL : find_decomposition(cp);
  if (d == NULL) {
    out[n++] = cp;
    return n;
  }
  n = decompose(d->first, out, n);
  return d->second != 0 ? decompose(d->second, out, n) : n;
}

/* The primary composite of a + b, or 0. */
static uint32_t
compose(uint32_t a, uint32_t b)
{
  if (a >= HANGUL_L && a < HANGUL_L + HANGUL_L_COUNT && b >= HANGUL_V && b < HANGUL_V + HANGUL_V_COUNT)
    return HANGUL_S + ((a - HANGUL_L) * HANGUL_V_COUNT + (b - HANGUL_V)) * HANGUL_T_COUNT;
  if (a >= HANGUL_S && a < HANGUL_S + HANGUL_S_COUNT && (a - HANGUL_S) % HANGUL_T_COUNT == 0 && b > HANGUL_T &&
      b < HANGUL_T + HANGUL_T_COUNT)
    return a + (b - HANGUL_T);
  size_t lo = 0, hi = hn_unicode_n_compositions;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const HnUnicodeComposition *c = &hn_unicode_compositions[mid];
    if (c->first < a || (c->first == a && c->second < b))
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < hn_unicode_n_compositions && hn_unicode_compositions[lo].first == a &&
      hn_unicode_compositions[lo].second == b)
    return hn_unicode_compositions[lo].composite;
  return 0;
}

/* Canonical ordering: a stable sort of each run of non-starters by combining class.  Short
 * runs by insertion; long ones (only in crafted text) by counting, so that no input is
 * quadratic. */
static bool
canonical_order(uint32_t *cps, size_t n)
{
  uint32_t *tmp = NULL;
  for (size_t a = 0; a < n;) {
    if (hn_unicode_ccc_of(cps[a]) == 0) {
      a++;
      continue;
    }
    size_t b = a;
    while (b < n && hn_unicode_ccc_of(cps[b]) != 0)
      b++;
    if (b - a <= 16) {
      for (size_t i = a + 1; i < b; i++) {
        uint32_t cp = cps[i];
        uint8_t k = hn_unicode_ccc_of(cp);
        size_t j = i;
        while (j > a && hn_unicode_ccc_of(cps[j - 1]) > k) {
          cps[j] = cps[j - 1];
          j--;
        }
        cps[j] = cp;
      }
    } else {
      if (tmp == NULL && (tmp = malloc(sizeof(uint32_t) * n)) == NULL)
        return false;
      size_t start[257] = { 0 };
      for (size_t i = a; i < b; i++)
        start[hn_unicode_ccc_of(cps[i]) + 1]++;
      for (int k = 0; k < 256; k++)
        start[k + 1] += start[k];
      for (size_t i = a; i < b; i++)
        tmp[start[hn_unicode_ccc_of(cps[i])]++] = cps[i];
      memcpy(cps + a, tmp, sizeof(uint32_t) * (b - a));
    }
    a = b;
  }
  free(tmp);
  return true;
}

int64_t
hn_utf8_nfc(const char *s, size_t len, char **out)
{
  *out = NULL;
  bool needed = false;
  for (size_t i = 0; i < len && !needed;) {
    if ((unsigned char)s[i] < 0xCC) { /* below U+0300 nothing changes */
      i++;
      continue;
    }
    uint32_t cp;
    i += (size_t)hn_utf8_decode(s + i, len - i, &cp);
    needed = cp != HN_UC_INVALID && (hn_unicode_flags(cp) & HN_UC_NFC_CHECK);
  }
  if (!needed)
    return (int64_t)len;
  /* A code point of k >= 2 bytes decomposes into at most 4 code points (at most 1.5 per
   * byte in Unicode 15), ASCII and invalid bytes into 1: 2 per byte is enough.  An invalid
   * byte is kept as 0x80000000 | byte. */
  uint32_t *cps = malloc(sizeof(uint32_t) * (2 * len + 1));
  if (cps == NULL)
    return -1;
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    int used = hn_utf8_decode(s + i, len - i, &cp);
    if (cp == HN_UC_INVALID)
      cps[n++] = 0x80000000u | (unsigned char)s[i];
    else
      n = decompose(cp, cps, n);
    i += (size_t)used;
  }
  if (!canonical_order(cps, n)) {
    free(cps);
    return -1;
  }
  /* canonical composition: a character joins the last starter unless a character between
   * them has a combining class of 0 or one at least as high (it is then "blocked") */
  size_t kept = 0;
  int64_t starter = -1;
  int last_class = -1;
  for (size_t i = 0; i < n; i++) {
    uint32_t cp = cps[i];
    int k = hn_unicode_ccc_of(cp);
    if (starter >= 0 && (last_class < k || last_class == 0)) {
      uint32_t c = (cp & 0x80000000u) ? 0 : compose(cps[starter], cp);
      if (c != 0) {
        cps[starter] = c;
        continue;
      }
    }
    if (k == 0) {
      starter = (int64_t)kept;
      last_class = 0;
    } else
      last_class = k;
    if (starter < 0)
      last_class = -1; /* nothing to compose with yet */
    cps[kept++] = cp;
  }
  char *buf = malloc(4 * kept + 1);
  if (buf == NULL) {
    free(cps);
    return -1;
  }
  size_t o = 0;
  for (size_t i = 0; i < kept; i++) {
    if (cps[i] & 0x80000000u)
      buf[o++] = (char)(cps[i] & 0xFF);
    else
      o += (size_t)hn_utf8_encode(cps[i], buf + o);
  }
  free(cps);
  *out = buf;
  return (int64_t)o;
}
