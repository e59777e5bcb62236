/* hn-reasoning.h — splits a reasoning model's output into its thinking and its answer.
 *
 * Reasoning models (Qwen3, DeepSeek-R1 and its distills, QwQ, ...) write their reasoning
 * between two markers before the answer: "<think>…</think>answer".  The markers are a
 * small table (hn_think_markers); the splitter recognises the opening marker only at the
 * start of the output (after whitespace), so a tag mentioned inside an answer stays text.
 * It is fed the output piece by piece as it streams, and a marker split across pieces
 * ("</th" + "ink>") is still found: bytes that may begin a marker are held back until the
 * next piece decides.
 *
 * Some templates (DeepSeek-R1) write the opening marker into the generation prompt, so the
 * output starts inside the thinking and has only the closing marker.  A caller that knows
 * this (hn_think_prompt_opens on the rendered prompt) starts the splitter inside; in AUTO
 * mode a closing marker seen before any opening one turns everything written so far into
 * thinking (the HN_THINK_PART_ANSWER_WAS_THINKING event), once.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char *open;
  const char *close;
} HnThinkMarkers;

/* The known marker pairs, terminated by { NULL, NULL }. */
extern const HnThinkMarkers hn_think_markers[];

/* The longest marker in the table, in bytes. */
#define HN_THINK_MAX_MARKER 24

typedef enum {
  HN_THINK_START_ANSWER,   /* thinking only when the output opens with a marker */
  HN_THINK_START_INSIDE,   /* the prompt opened the thinking: it ends at a closing marker */
  HN_THINK_START_AUTO,     /* as ANSWER, and a lone closing marker means the text before it
                            * was thinking */
} HnThinkStart;

typedef enum {
  HN_THINK_PART_THINKING,
  HN_THINK_PART_ANSWER,
  /* No text: the answer so far was thinking after all (AUTO mode); the receiver moves it. */
  HN_THINK_PART_ANSWER_WAS_THINKING,
} HnThinkPart;

typedef void (*HnThinkEmit)(void *data, HnThinkPart part, const char *text, size_t len);

typedef struct {
  int phase;
  int pair;                          /* index into hn_think_markers, -1: not known yet */
  char held[HN_THINK_MAX_MARKER];    /* bytes that may begin a marker */
  size_t n_held;
  bool part_has_text;                /* leading whitespace of each part is dropped */
  bool lone_close;                   /* AUTO: a closing marker may end an unopened thinking */
} HnThinkSplitter;

void hn_think_splitter_init(HnThinkSplitter *s, HnThinkStart start);
/* Splits @text; @emit gets runs of thinking and answer text in order (leading whitespace
 * of each part dropped). */
void hn_think_splitter_feed(HnThinkSplitter *s, const char *text, size_t len, HnThinkEmit emit, void *data);
/* The output ended: held-back bytes were text after all. */
void hn_think_splitter_finish(HnThinkSplitter *s, HnThinkEmit emit, void *data);
/* Whether the output is inside the thinking now (a marker opened it, or the prompt did). */
bool hn_think_splitter_thinking(const HnThinkSplitter *s);
/* Whether the output has reached its answer: the thinking closed, or the output began
 * with something other than an opening marker. */
bool hn_think_splitter_answering(const HnThinkSplitter *s);

/* Whether @text (a chat template's source) contains a closing marker of the table: such a
 * template knows thinking (R1's and Qwen3's cut it off earlier answers), so a lone closing
 * marker in a reply is worth believing (HN_THINK_START_AUTO). */
bool hn_think_mentions_close(const char *text, size_t len);

/* Whether a rendered prompt ends with an opening marker (trailing whitespace ignored), so
 * the reply starts inside the thinking. */
bool hn_think_prompt_opens(const char *prompt, size_t len);

#ifdef __cplusplus
}
#endif
