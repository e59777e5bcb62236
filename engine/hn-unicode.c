/* hn-unicode.c — UTF-8 and code point classes (tables in hn-unicode-tables.c). */
#include "hn-unicode.h"

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
