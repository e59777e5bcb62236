/* libFuzzer target: the thinking/answer splitter (hn-reasoning).  The first byte picks the
 * start mode, the second how the rest is cut into pieces.  Checks: any cut gives the same
 * split as the whole; pieces cut at character boundaries of valid UTF-8 leave both parts
 * valid UTF-8 after every piece (what the window shows while streaming); nothing grows.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hn-reasoning.h"
#include "hn-unicode.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

typedef struct {
  char *part[2];   /* thinking, answer */
  size_t len[2];
} Parts;

static void
collect (void *data, HnThinkPart part, const char *text, size_t len)
{
  Parts *p = data;
  if (part == HN_THINK_PART_ANSWER_WAS_THINKING) {
    memcpy (p->part[0] + p->len[0], p->part[1], p->len[1]);
    p->len[0] += p->len[1];
    p->len[1] = 0;
    return;
  }
  int k = part == HN_THINK_PART_THINKING ? 0 : 1;
  memcpy (p->part[k] + p->len[k], text, len);
  p->len[k] += len;
}

static bool
valid_utf8 (const char *s, size_t len)
{
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    int n = hn_utf8_decode (s + i, len - i, &cp);
    if (cp == HN_UC_INVALID)
      return false;
    i += (size_t) n;
  }
  return true;
}

static void
split (HnThinkStart start, const char *text, size_t len, size_t stride, bool at_chars, Parts *p)
{
  HnThinkSplitter s;
  hn_think_splitter_init (&s, start);
  size_t from = 0;
  while (from < len) {
    size_t to = stride == 0 ? len : from + stride;
    if (to > len)
      to = len;
    while (at_chars && to < len && ((unsigned char) text[to] & 0xC0) == 0x80)
      to++;
    hn_think_splitter_feed (&s, text + from, to - from, collect, p);
    if (at_chars && (!valid_utf8 (p->part[0], p->len[0]) || !valid_utf8 (p->part[1], p->len[1])))
      abort ();
    from = to;
  }
  hn_think_splitter_finish (&s, collect, p);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size < 2)
    return 0;
  HnThinkStart start = (HnThinkStart) (data[0] % 3);
  size_t stride = 1 + data[1] % 9;
  const char *text = (const char *) data + 2;
  size_t len = size - 2;
  Parts whole = { { malloc (len + 1), malloc (len + 1) }, { 0, 0 } };
  Parts cut = { { malloc (len + 1), malloc (len + 1) }, { 0, 0 } };
  bool utf8 = valid_utf8 (text, len);
  split (start, text, len, 0, false, &whole);
  split (start, text, len, stride, utf8, &cut);
  for (int k = 0; k < 2; k++)
    if (whole.len[k] != cut.len[k] || memcmp (whole.part[k], cut.part[k], whole.len[k]) != 0)
      abort ();
  if (whole.len[0] + whole.len[1] > len)
    abort ();
  for (int k = 0; k < 2; k++) {
    free (whole.part[k]);
    free (cut.part[k]);
  }
  return 0;
}
