/* hn-unicode.h — code point classes for the tokenizers' pre-tokenizer rules, and UTF-8
 * decoding that never fails (invalid bytes come back one at a time, flagged).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  HN_UC_LETTER = 1 << 0,      /* \p{L} */
  HN_UC_NUMBER = 1 << 1,      /* \p{N} */
  HN_UC_PUNCT = 1 << 2,       /* \p{P} */
  HN_UC_SYMBOL = 1 << 3,      /* \p{S} */
  HN_UC_MARK = 1 << 4,        /* \p{M} */
  HN_UC_SEPARATOR = 1 << 5,   /* \p{Z} */
  HN_UC_OTHER = 1 << 6,       /* \p{C} (control, format, private use, surrogate, unassigned) */
  HN_UC_UPPER = 1 << 7,       /* \p{Lu} */
  HN_UC_LOWER = 1 << 8,       /* \p{Ll} */
  HN_UC_WHITESPACE = 1 << 9,  /* \s: the White_Space property */
  HN_UC_UNASSIGNED = 1 << 10, /* \p{Cn} */
  HN_UC_TITLE = 1 << 11,      /* \p{Lt} */
  HN_UC_MODIFIER = 1 << 12,   /* \p{Lm}; \p{Lo} is a letter with none of UPPER, LOWER, TITLE, MODIFIER */
  HN_UC_NFC_CHECK = 1 << 13,  /* NFC_QC No or Maybe, or combining class > 0: NFC may change it */
};

typedef struct {
  uint32_t first, last;
  uint32_t flags;
} HnUnicodeRange;

extern const char hn_unicode_version[];
extern const size_t hn_unicode_n_ranges;
extern const HnUnicodeRange hn_unicode_ranges[];
extern const uint16_t hn_unicode_ascii_flags[128];

typedef struct {
  uint32_t first, last;
  uint8_t ccc;
} HnUnicodeCcc;

typedef struct {
  uint32_t cp, first, second; /* second 0: a single code point */
} HnUnicodeDecomposition;

typedef struct {
  uint32_t first, second, composite;
} HnUnicodeComposition;

extern const size_t hn_unicode_n_ccc, hn_unicode_n_decompositions, hn_unicode_n_compositions;
extern const HnUnicodeCcc hn_unicode_ccc[];
extern const HnUnicodeDecomposition hn_unicode_decompositions[];
extern const HnUnicodeComposition hn_unicode_compositions[];

/* Code point used for a byte that does not start a valid UTF-8 sequence. */
#define HN_UC_INVALID 0xFFFFFFFFu

/* Flags of a code point (HN_UC_OTHER for HN_UC_INVALID and values above U+10FFFF). */
uint32_t hn_unicode_flags(uint32_t cp);

/* Decodes one code point from s[0..len) (len > 0).  Returns the number of bytes used
 * (1..4).  Overlong forms, surrogates, values past U+10FFFF and truncated sequences are
 * invalid: *cp is HN_UC_INVALID and exactly one byte is consumed. */
int hn_utf8_decode(const char *s, size_t len, uint32_t *cp);

/* Canonical combining class (0 for starters and HN_UC_INVALID). */
uint8_t hn_unicode_ccc_of(uint32_t cp);

/* Normalization Form C of s[0..len): canonical decomposition, canonical ordering, canonical
 * composition (UAX #15).  Bytes that are not valid UTF-8 are kept as they are and block
 * composition like a starter.  Returns the normalized length and *out (malloc'ed, the
 * caller frees), or -1 when out of memory.  When nothing can change (no code point flagged
 * HN_UC_NFC_CHECK), returns len and sets *out to NULL: use the input. */
int64_t hn_utf8_nfc(const char *s, size_t len, char **out);

/* Encodes a code point (<= U+10FFFF) into buf (4 bytes); returns the length. */
int hn_utf8_encode(uint32_t cp, char *buf);

/* Length of the longest prefix of s[0..len) that is complete, valid UTF-8 up to the
 * point where a sequence is cut off at the end (used by the streaming decoder). */
size_t hn_utf8_complete_prefix(const char *s, size_t len);

#ifdef __cplusplus
}
#endif
