/* hn-json.h — a small JSON library for the GLib-free engine core.
 *
 * Values form a tree owned by its root: free the root with hn_json_free() and every
 * child goes with it.  Strings are UTF-8 with an explicit length and may contain NUL
 * (from "\u0000"); they are always NUL-terminated as well for convenience.  Numbers keep
 * an exact int64 when the text is an integer that fits, and a double always.  Object keys
 * keep insertion order (duplicate keys in parsed text: the last one wins, at the position
 * of the first).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HN_JSON_NULL = 0,
  HN_JSON_BOOL,
  HN_JSON_NUMBER,
  HN_JSON_STRING,
  HN_JSON_ARRAY,
  HN_JSON_OBJECT,
} HnJsonType;

typedef struct HnJson HnJson;

/* Default nesting limit of hn_json_parse (arrays + objects). */
#define HN_JSON_MAX_DEPTH 256

/* ---- parsing ---------------------------------------------------------------------- */

/* Parses exactly one JSON document (RFC 8259; surrounding whitespace allowed).  Errors
 * are HN_ERR_FORMAT with "line L, column C: ..." (1-based, columns count bytes). */
HnJson *hn_json_parse(const char *text, size_t len, HnError *err);
/* Same with an explicit nesting limit (0 = HN_JSON_MAX_DEPTH). */
HnJson *hn_json_parse_ex(const char *text, size_t len, int max_depth, HnError *err);

void hn_json_free(HnJson *v);

/* ---- construction (all return NULL only on allocation failure) --------------------- */

HnJson *hn_json_new_null(void);
HnJson *hn_json_new_bool(bool b);
HnJson *hn_json_new_int(int64_t i);
HnJson *hn_json_new_double(double d);
HnJson *hn_json_new_string(const char *s);              /* NUL-terminated */
HnJson *hn_json_new_string_len(const char *s, size_t len);
HnJson *hn_json_new_array(void);
HnJson *hn_json_new_object(void);
HnJson *hn_json_copy(const HnJson *v);                  /* deep copy */

/* Takes ownership of `item` (also on failure, where it is freed). */
bool hn_json_array_append(HnJson *array, HnJson *item);
/* Takes ownership of `value`; replaces an existing key in place. */
bool hn_json_object_set(HnJson *object, const char *key, HnJson *value);
bool hn_json_object_set_len(HnJson *object, const char *key, size_t key_len, HnJson *value);

/* ---- inspection ------------------------------------------------------------------- */

HnJsonType hn_json_type(const HnJson *v);   /* NULL counts as HN_JSON_NULL */
const char *hn_json_type_name(HnJsonType t); /* "null", "boolean", ... */
static inline bool hn_json_is_null(const HnJson *v) { return hn_json_type(v) == HN_JSON_NULL; }
static inline bool hn_json_is_bool(const HnJson *v) { return hn_json_type(v) == HN_JSON_BOOL; }
static inline bool hn_json_is_number(const HnJson *v) { return hn_json_type(v) == HN_JSON_NUMBER; }
static inline bool hn_json_is_string(const HnJson *v) { return hn_json_type(v) == HN_JSON_STRING; }
static inline bool hn_json_is_array(const HnJson *v) { return hn_json_type(v) == HN_JSON_ARRAY; }
static inline bool hn_json_is_object(const HnJson *v) { return hn_json_type(v) == HN_JSON_OBJECT; }

bool hn_json_get_bool(const HnJson *v);          /* false unless a true bool */
/* True when the number was written as an integer (no fraction/exponent) fitting int64,
 * or constructed with hn_json_new_int. */
bool hn_json_is_integer(const HnJson *v);
int64_t hn_json_get_int(const HnJson *v);        /* integral value, or the double truncated (saturating); 0 if not a number */
double hn_json_get_double(const HnJson *v);      /* 0 if not a number */
const char *hn_json_get_string(const HnJson *v); /* NULL unless a string */
size_t hn_json_get_string_len(const HnJson *v);  /* 0 unless a string */

/* Arrays and objects: number of elements / members (0 for other types). */
size_t hn_json_length(const HnJson *v);
HnJson *hn_json_array_get(const HnJson *array, size_t index);      /* NULL if out of range */
HnJson *hn_json_object_get(const HnJson *object, const char *key); /* NULL if absent */
HnJson *hn_json_object_get_len(const HnJson *object, const char *key, size_t key_len);
/* Member by position (insertion order); key_len may be NULL. */
const char *hn_json_object_key_at(const HnJson *object, size_t index, size_t *key_len);
HnJson *hn_json_object_value_at(const HnJson *object, size_t index);

/* Structural equality (numbers compare by value, object key order ignored). */
bool hn_json_equal(const HnJson *a, const HnJson *b);

/* ---- serialization ---------------------------------------------------------------- */

typedef struct {
  int indent;              /* < 0: compact one-liner; >= 0: newline + N spaces per level
                              (Python: indent=0 still puts newlines) */
  bool ensure_ascii;       /* escape every non-ASCII character as \uXXXX (surrogate pairs) */
  bool python_separators;  /* ", " and ": " on one line (Python json.dumps / Jinja tojson);
                              with indent the item separator is "," + newline either way */
  bool sort_keys;          /* emit object members sorted by key bytes */
} HnJsonWriteOptions;

/* Compact, UTF-8 kept as is, "," and ":" separators. */
#define HN_JSON_WRITE_COMPACT ((HnJsonWriteOptions){ -1, false, false, false })

/* Returns a malloc'd NUL-terminated string (length in *out_len if not NULL).  Non-finite
 * numbers are written as NaN/Infinity/-Infinity like Python does.  Integral doubles are
 * written with ".0" as Python does (1.0), integers without. */
char *hn_json_write(const HnJson *v, const HnJsonWriteOptions *opts, size_t *out_len);

/* Writes a JSON string literal for the given bytes into a malloc'd buffer. */
char *hn_json_quote(const char *s, size_t len, bool ensure_ascii, size_t *out_len);

#ifdef __cplusplus
}
#endif
