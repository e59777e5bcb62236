/* Tests for the generated Unicode tables and the UTF-8 decoder.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-unicode.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

static void
test_known (void)
{
  g_assert_true (hn_unicode_flags ('a') & HN_UC_LETTER);
  g_assert_true (hn_unicode_flags ('a') & HN_UC_LOWER);
  g_assert_true (hn_unicode_flags ('Q') & HN_UC_UPPER);
  /* the letter subcategories gpt-4o's split tells apart */
  g_assert_cmpuint (hn_unicode_flags (0x01C5), ==, HN_UC_LETTER | HN_UC_TITLE);    /* Dž */
  g_assert_cmpuint (hn_unicode_flags (0x02B0), ==, HN_UC_LETTER | HN_UC_MODIFIER); /* ʰ */
  g_assert_cmpuint (hn_unicode_flags (0x3005), ==, HN_UC_LETTER | HN_UC_MODIFIER); /* 々 */
  g_assert_cmpuint (hn_unicode_flags (0x4E00), ==, HN_UC_LETTER);                  /* 一, Lo */
  g_assert_cmpuint (hn_unicode_flags (0x00AA), ==, HN_UC_LETTER);                  /* ª, Lo */
  g_assert_true (hn_unicode_flags ('7') & HN_UC_NUMBER);
  g_assert_true (hn_unicode_flags ('!') & HN_UC_PUNCT);
  g_assert_true (hn_unicode_flags ('$') & HN_UC_SYMBOL);
  g_assert_true (hn_unicode_flags (' ') & HN_UC_WHITESPACE);
  g_assert_true (hn_unicode_flags ('\n') & HN_UC_WHITESPACE);
  g_assert_false (hn_unicode_flags ('a') & HN_UC_WHITESPACE);
  g_assert_true (hn_unicode_flags (0x00E9) & HN_UC_LETTER);       /* é */
  g_assert_true (hn_unicode_flags (0x3042) & HN_UC_LETTER);       /* あ */
  g_assert_true (hn_unicode_flags (0x4E16) & HN_UC_LETTER);       /* 世 */
  g_assert_true (hn_unicode_flags (0x0663) & HN_UC_NUMBER);       /* Arabic-Indic 3 */
  g_assert_true (hn_unicode_flags (0x2167) & HN_UC_NUMBER);       /* Roman numeral eight (Nl) */
  g_assert_true (hn_unicode_flags (0x3002) & HN_UC_PUNCT);        /* 。 */
  g_assert_true (hn_unicode_flags (0x1F999) & HN_UC_SYMBOL);      /* 🦙 */
  g_assert_true (hn_unicode_flags (0x0301) & HN_UC_MARK);         /* combining acute */
  g_assert_true (hn_unicode_flags (0x3000) & HN_UC_WHITESPACE);   /* ideographic space */
  g_assert_true (hn_unicode_flags (0x00A0) & HN_UC_WHITESPACE);   /* no-break space */
  g_assert_false (hn_unicode_flags (0x200B) & HN_UC_WHITESPACE);  /* zero width space is Cf */
  g_assert_true (hn_unicode_flags (0x200B) & HN_UC_OTHER);
  g_assert_true (hn_unicode_flags (0xD800) & HN_UC_OTHER);        /* surrogate */
  g_assert_true (hn_unicode_flags (0x10FFFF) & HN_UC_OTHER);
  g_assert_true (hn_unicode_flags (HN_UC_INVALID) & HN_UC_OTHER);
}

static void
test_counts (void)
{
  /* Unicode 15.0.0: sums of the general categories (see the header of hn-unicode-tables.c) */
  struct { uint32_t flag; int count; } want[] = {
    { HN_UC_LETTER, 2233 + 397 + 131612 + 31 + 1831 },
    { HN_UC_UPPER, 1831 },
    { HN_UC_LOWER, 2233 },
    { HN_UC_TITLE, 31 },
    { HN_UC_MODIFIER, 397 },
    { HN_UC_NUMBER, 680 + 236 + 915 },
    { HN_UC_PUNCT, 10 + 26 + 77 + 10 + 12 + 628 + 79 },
    { HN_UC_SYMBOL, 63 + 125 + 948 + 6634 },
    { HN_UC_MARK, 452 + 13 + 1985 },
    { HN_UC_SEPARATOR, 1 + 1 + 17 },
    { HN_UC_WHITESPACE, 25 },
  };
  int got[G_N_ELEMENTS (want)] = { 0 };
  for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
    uint32_t f = hn_unicode_flags (cp);
    for (size_t k = 0; k < G_N_ELEMENTS (want); k++)
      got[k] += (f & want[k].flag) != 0;
  }
  g_assert_cmpstr (hn_unicode_version, ==, "15.0.0");
  for (size_t k = 0; k < G_N_ELEMENTS (want); k++)
    g_assert_cmpint (got[k], ==, want[k].count);
}

static void
check_nfc (const char *in, const char *want)
{
  char *out;
  int64_t n = hn_utf8_nfc (in, strlen (in), &out);
  const char *got = out != NULL ? out : in;
  g_assert_cmpint (n, ==, (int64_t) strlen (want));
  g_assert_cmpint (memcmp (got, want, strlen (want)), ==, 0);
  free (out);
}

/* Normalization Form C, cases worked out from UAX #15 and the UCD: composition, Hangul,
 * canonical reordering, singletons, composition exclusions, blocking, invalid bytes.  (The
 * implementation was also run against the UCD's NormalizationTest.txt: 95 370 of 95 370.) */
static void
test_nfc (void)
{
  char *out;
  g_assert_cmpint (hn_utf8_nfc ("plain ASCII, caf\xc3\xa9", 16, &out), ==, 16);
  g_assert_null (out); /* nothing to change: the input is used as it is */
  check_nfc ("cafe\xcc\x81", "caf\xc3\xa9");                              /* e + U+0301 -> é */
  check_nfc ("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81");     /* L V T -> U+AC01 */
  check_nfc ("\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81");                 /* LV T -> U+AC01 */
  check_nfc ("s\xcc\x87\xcc\xa3", "\xe1\xb9\xa9");                        /* dots reordered, U+1E69 */
  check_nfc ("q\xcc\x87\xcc\xa3", "q\xcc\xa3\xcc\x87");                   /* reordered, no composite */
  check_nfc ("\xe2\x84\xab", "\xc3\x85");                                 /* ANGSTROM SIGN -> Å */
  check_nfc ("\xe2\x84\xa6", "\xce\xa9");                                 /* OHM SIGN -> Ω */
  check_nfc ("\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc");                 /* U+0958 is excluded */
  check_nfc ("a\xcc\x81\xcc\x81", "\xc3\xa1\xcc\x81");                    /* the second acute is blocked */
  check_nfc ("e\xff\xcc\x81", "e\xff\xcc\x81");                           /* an invalid byte blocks */
  check_nfc ("\xcc\x81" "e", "\xcc\x81" "e");                             /* nothing before a mark */
  g_assert_cmpuint (hn_unicode_ccc_of (0x0301), ==, 230);
  g_assert_cmpuint (hn_unicode_ccc_of (0x0323), ==, 220);
  g_assert_cmpuint (hn_unicode_ccc_of ('e'), ==, 0);
  /* a long run of marks in alternating classes is sorted without quadratic time */
  size_t n = 200000;
  char *marks = g_malloc (2 * n + 1);
  marks[0] = 'q';
  for (size_t i = 0; i + 1 < n; i++)
    memcpy (marks + 1 + 2 * i, i % 2 ? "\xcc\xa3" : "\xcc\x87", 2);
  size_t len = 1 + 2 * (n - 1);
  int64_t m = hn_utf8_nfc (marks, len, &out);
  g_assert_cmpint (m, ==, (int64_t) len);
  g_assert_cmpint (memcmp (out + 1, "\xcc\xa3", 2), ==, 0);       /* class 220 first */
  g_assert_cmpint (memcmp (out + len - 2, "\xcc\x87", 2), ==, 0); /* class 230 last */
  free (out);
  g_free (marks);
}

static void
test_utf8 (void)
{
  uint32_t cp;
  g_assert_cmpint (hn_utf8_decode ("\xe3\x81\x82", 3, &cp), ==, 3);
  g_assert_cmpuint (cp, ==, 0x3042);
  g_assert_cmpint (hn_utf8_decode ("\xf0\x9f\xa6\x99", 4, &cp), ==, 4);
  g_assert_cmpuint (cp, ==, 0x1F999);
  /* truncated, overlong, surrogate, out of range, stray continuation, bad lead bytes */
  const char *bad[] = { "\xe3\x81", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80", "\xff", "\xfe" };
  for (size_t i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_assert_cmpint (hn_utf8_decode (bad[i], strlen (bad[i]), &cp), ==, 1);
    g_assert_cmpuint (cp, ==, HN_UC_INVALID);
  }
  g_assert_cmpuint (hn_utf8_complete_prefix ("ab\xe3\x81", 4), ==, 2);
  g_assert_cmpuint (hn_utf8_complete_prefix ("ab\xe3\x81\x82", 5), ==, 5);
  g_assert_cmpuint (hn_utf8_complete_prefix ("ab\xf0", 3), ==, 2);
  /* every byte sequence decodes without reading past the end */
  GRand *r = g_rand_new_with_seed (9);
  for (int round = 0; round < 20000; round++) {
    char buf[4];
    size_t len = (size_t) g_rand_int_range (r, 1, 5);
    for (size_t i = 0; i < len; i++)
      buf[i] = (char) g_rand_int (r);
    int used = hn_utf8_decode (buf, len, &cp);
    g_assert_cmpint (used, >=, 1);
    g_assert_cmpint (used, <=, (int) len);
    if (cp != HN_UC_INVALID) {
      char enc[4];
      g_assert_cmpint (hn_utf8_encode (cp, enc), ==, used);
      g_assert_cmpint (memcmp (enc, buf, (size_t) used), ==, 0);
    }
  }
  g_rand_free (r);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/unicode/known", test_known);
  g_test_add_func ("/unicode/counts", test_counts);
  g_test_add_func ("/unicode/nfc", test_nfc);
  g_test_add_func ("/unicode/utf8", test_utf8);
  return g_test_run ();
}
