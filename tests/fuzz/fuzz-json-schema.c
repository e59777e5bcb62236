/* libFuzzer target: JSON Schema → GBNF.  Whatever the converter accepts must be a grammar
 * the GBNF parser accepts too.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>

#include "hn-grammar.h"
#include "hn-json-schema.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  HnError err = { 0 };
  char *gbnf = hn_json_schema_to_gbnf ((const char *) data, size, &err);
  if (gbnf == NULL)
    return 0;
  size_t len = 0;
  while (gbnf[len] != '\0')
    len++;
  HnGrammar *g = hn_grammar_parse (gbnf, len, NULL, &err);
  if (g == NULL) {
    fprintf (stderr, "converted schema does not parse: %s\n%s\n", err.message, gbnf);
    abort ();
  }
  hn_grammar_free (g);
  free (gbnf);
  return 0;
}
