/* hn-json-schema.h — converts a JSON Schema (a practical subset) to a GBNF grammar that
 * accepts exactly the JSON documents the schema describes.
 *
 * Supported: type (object, array, string, number, integer, boolean, null, or a list of
 * them), properties (emitted in their written order) with required (optional properties
 * may be left out), additionalProperties (false by default; true or a schema allows
 * extra members after the listed ones), items, minItems, maxItems, minLength, maxLength,
 * enum, const, minimum/maximum on integers (exclusiveMinimum/exclusiveMaximum too),
 * anyOf, oneOf, allOf with a single member, $ref to #/definitions/... or #/$defs/....
 * Anything else is an error naming the keyword, never silently ignored when it would
 * allow documents the schema forbids ("format", "pattern" and "description" and other
 * annotations are ignored; "pattern" is refused).
 *
 * The grammar emits compact JSON (no whitespace between tokens), which keeps bounded
 * schemas bounded.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns a malloc'ed NUL-terminated GBNF text whose start rule is `root`. */
char *hn_json_schema_to_gbnf(const char *schema_json, size_t len, HnError *err);

#ifdef __cplusplus
}
#endif
