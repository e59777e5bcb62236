/* hn-reasoning.c — the thinking/answer splitter (see hn-reasoning.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-reasoning.h"

#include <string.h>

const HnThinkMarkers hn_think_markers[] = {
  { "<think>", "</think>" },              /* Qwen3, QwQ, DeepSeek-R1 and its distills */
  { "<thinking>", "</thinking>" },        /* models tuned on Claude-style traces */
  { "<seed:think>", "</seed:think>" },    /* ByteDance Seed-OSS */
  { "\xe2\x97\x81think\xe2\x96\xb7", "\xe2\x97\x81/think\xe2\x96\xb7" },   /* Kimi: ◁think▷ ◁/think▷ */
  { NULL, NULL },
};

enum {
  PH_LEADING,     /* nothing but whitespace yet: an opening marker may come */
  PH_THINKING,    /* inside the thinking, looking for its closing marker */
  PH_WATCH,       /* answer (AUTO): a lone closing marker would make it thinking */
  PH_ANSWER,      /* answer, final: no more markers */
};

void
hn_think_splitter_init(HnThinkSplitter *s, HnThinkStart start)
{
  memset(s, 0, sizeof *s);
  s->pair = -1;
  s->phase = start == HN_THINK_START_INSIDE ? PH_THINKING : PH_LEADING;
  s->lone_close = start == HN_THINK_START_AUTO;
}

/* The markers the current phase looks for: opening ones while leading, closing ones after.
 * Returns the marker of pair k, or NULL when pair k is not looked for. */
static const char *
marker_for(const HnThinkSplitter *s, size_t k)
{
  switch (s->phase) {
  case PH_LEADING: return hn_think_markers[k].open;
  case PH_THINKING: return s->pair < 0 || (size_t)s->pair == k ? hn_think_markers[k].close : NULL;
  case PH_WATCH: return hn_think_markers[k].close;
  default: return NULL;
  }
}

/* 1: held is a whole marker (its pair in *pair), 0: it begins one, -1: it begins none. */
static int
match_held(const HnThinkSplitter *s, int *pair)
{
  if (s->phase == PH_ANSWER)
    return -1;
  bool prefix = false;
  for (size_t k = 0; hn_think_markers[k].open != NULL; k++) {
    const char *m = marker_for(s, k);
    if (m == NULL)
      continue;
    size_t n = strlen(m);
    if (s->n_held <= n && memcmp(m, s->held, s->n_held) == 0) {
      if (s->n_held == n) {
        *pair = (int)k;
        return 1;
      }
      prefix = true;
    }
  }
  return prefix ? 0 : -1;
}

/* Output collects runs of one part so the receiver gets few calls. */
typedef struct {
  HnThinkEmit emit;
  void *data;
  HnThinkPart part;
  char buf[256];
  size_t n;
} Out;

static void
out_flush(Out *o)
{
  if (o->n > 0)
    o->emit(o->data, o->part, o->buf, o->n);
  o->n = 0;
}

static bool
is_space(char c)
{
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* One byte of text of the current phase's part. */
static void
put_text(HnThinkSplitter *s, Out *o, char c)
{
  if (s->phase == PH_LEADING) {
    if (is_space(c))
      return;
    /* Not an opening marker: this is an answer. */
    s->phase = s->lone_close ? PH_WATCH : PH_ANSWER;
  }
  if (!s->part_has_text && is_space(c))
    return;
  s->part_has_text = true;
  HnThinkPart part = s->phase == PH_THINKING ? HN_THINK_PART_THINKING : HN_THINK_PART_ANSWER;
  if (part != o->part || o->n == sizeof o->buf)
    out_flush(o);
  o->part = part;
  o->buf[o->n++] = c;
}

static void
on_marker(HnThinkSplitter *s, Out *o, int pair)
{
  out_flush(o);
  switch (s->phase) {
  case PH_LEADING:
    s->phase = PH_THINKING;
    s->pair = pair;
    break;
  case PH_WATCH:
    o->emit(o->data, HN_THINK_PART_ANSWER_WAS_THINKING, "", 0);
    s->phase = PH_ANSWER;
    s->pair = pair;
    break;
  default:   /* PH_THINKING */
    s->phase = PH_ANSWER;
    s->pair = pair;
    break;
  }
  s->part_has_text = false;
}

/* Decides what the held bytes are, keeping back only a possible beginning of a marker. */
static void
settle_held(HnThinkSplitter *s, Out *o)
{
  while (s->n_held > 0) {
    int pair = -1;
    int m = match_held(s, &pair);
    if (m == 1) {
      s->n_held = 0;
      on_marker(s, o, pair);
      return;
    }
    if (m == 0)
      return;
    /* The first byte begins no marker: it is text; the rest may still. */
    char c = s->held[0];
    memmove(s->held, s->held + 1, --s->n_held);
    put_text(s, o, c);
  }
}

void
hn_think_splitter_feed(HnThinkSplitter *s, const char *text, size_t len, HnThinkEmit emit, void *data)
{
  Out o = { .emit = emit, .data = data, .part = HN_THINK_PART_ANSWER };
  for (size_t i = 0; i < len; i++) {
    if (s->phase == PH_ANSWER && s->n_held == 0) {
      put_text(s, &o, text[i]);
      continue;
    }
    s->held[s->n_held++] = text[i];
    settle_held(s, &o);
  }
  out_flush(&o);
}

void
hn_think_splitter_finish(HnThinkSplitter *s, HnThinkEmit emit, void *data)
{
  Out o = { .emit = emit, .data = data, .part = HN_THINK_PART_ANSWER };
  size_t n = s->n_held;
  char held[HN_THINK_MAX_MARKER];
  memcpy(held, s->held, n);
  s->n_held = 0;
  for (size_t i = 0; i < n; i++)
    put_text(s, &o, held[i]);
  out_flush(&o);
}

bool
hn_think_splitter_thinking(const HnThinkSplitter *s)
{
  return s->phase == PH_THINKING;
}

bool
hn_think_splitter_answering(const HnThinkSplitter *s)
{
  return s->phase == PH_WATCH || s->phase == PH_ANSWER;
}

bool
hn_think_mentions_close(const char *text, size_t len)
{
  for (size_t k = 0; text != NULL && hn_think_markers[k].open != NULL; k++) {
    const char *m = hn_think_markers[k].close;
    size_t n = strlen(m);
    for (size_t i = 0; i + n <= len; i++)
      if (text[i] == m[0] && memcmp(text + i, m, n) == 0)
        return true;
  }
  return false;
}

bool
hn_think_prompt_opens(const char *prompt, size_t len)
{
  while (len > 0 && is_space(prompt[len - 1]))
    len--;
  for (size_t k = 0; hn_think_markers[k].open != NULL; k++) {
    size_t n = strlen(hn_think_markers[k].open);
    if (len >= n && memcmp(prompt + len - n, hn_think_markers[k].open, n) == 0)
      return true;
  }
  return false;
}
