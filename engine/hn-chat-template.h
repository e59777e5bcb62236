/* hn-chat-template.h — renders Hugging Face style chat templates (a Jinja2 subset).
 *
 * A template is parsed once (hn_chat_template_new) and rendered any number of times; the
 * parsed template is read-only during rendering, so renders of one template may run in
 * parallel.  Rendering follows Jinja2 as model hubs configure it: trim_blocks and
 * lstrip_blocks on, the loopcontrols extension, an immutable sandbox (no list.append),
 * HF's tojson (no HTML escaping, ensure_ascii off, keys in insertion order),
 * raise_exception(msg) and strftime_now(fmt).  See docs/chat-templates.md for the subset.
 *
 * Errors are HN_ERR_TEMPLATE.  Syntax and runtime errors carry "line L, column C: ...";
 * an error raised by the template with raise_exception(msg) carries exactly msg.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"
#include "hn-json.h"
#include "hn-vocab.h"

#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct HnChatTemplate HnChatTemplate;

/* Parses the template source (UTF-8, at most HN_CHAT_TEMPLATE_MAX_SOURCE bytes). */
#define HN_CHAT_TEMPLATE_MAX_SOURCE (1u << 20)
HnChatTemplate *hn_chat_template_new(const char *source, size_t len, HnError *err);
void hn_chat_template_free(HnChatTemplate *tmpl);

/* The template variable enable_thinking (Qwen3 and similar reasoning models switch their
 * thinking block on and off with it). */
typedef enum {
  HN_CHAT_THINKING_UNSET = 0,     /* undefined, the template's own default */
  HN_CHAT_THINKING_ON,            /* enable_thinking = true */
  HN_CHAT_THINKING_OFF,           /* enable_thinking = false */
} HnChatThinking;

typedef struct {
  /* JSON array of message objects ({"role", "content", ...}); the whole objects are
   * passed, so extra keys (tool_calls, name, ...) reach the template.  NULL = []. */
  const HnJson *messages;
  const char *bos_token;          /* NULL = "" */
  const char *eos_token;          /* NULL = "" */
  bool add_generation_prompt;
  /* Optional JSON object of further variables (tools, documents, ...); undefined unless given. */
  const HnJson *extra;
  /* Defines enable_thinking unless UNSET (then a member of extra of that name, if any, is used). */
  HnChatThinking enable_thinking;
  /* strftime_now() formats this time (local time zone) when has_now, else the current time. */
  bool has_now;
  time_t now;
  /* Limits (0 = defaults below). */
  size_t max_output;              /* bytes of rendered text */
  size_t max_memory;              /* bytes of working memory */
  uint64_t max_steps;             /* loop iterations + macro calls + statements executed */
} HnChatRenderOptions;

#define HN_CHAT_DEFAULT_MAX_OUTPUT (16u << 20)
#define HN_CHAT_DEFAULT_MAX_MEMORY (256u << 20)
#define HN_CHAT_DEFAULT_MAX_STEPS 20000000ull
/* Nesting of macro calls, and of expressions/statements in the parser. */
#define HN_CHAT_MAX_DEPTH 200

/* Whether the template refers to the variable @name anywhere, e.g. "enable_thinking": the
 * app offers its Think switch only for templates that read it. */
bool hn_chat_template_uses_variable(const HnChatTemplate *tmpl, const char *name);

/* Renders into a malloc'd NUL-terminated string (which may contain NUL bytes when the
 * input does; *out_len gives the exact length). */
char *hn_chat_template_render(const HnChatTemplate *tmpl, const HnChatRenderOptions *opts,
                              size_t *out_len, HnError *err);

/* The built-in fallback format (ChatML), used when a model has no template or its
 * template fails:
 *   for each message: "<|im_start|>" role "\n" content "<|im_end|>\n"
 *   then, if add_generation_prompt: "<|im_start|>assistant\n"
 * A content that is not a string is written as JSON; a missing one as "". */
char *hn_chat_render_fallback(const HnJson *messages, bool add_generation_prompt,
                              size_t *out_len, HnError *err);

/* The same text, plus where each message's content landed: one range per non-empty
 * content, in order (malloc'd, *ranges_out NULL when there are none).  The conversation
 * core tokenizes these ranges guarded, so a message cannot smuggle in control tokens. */
char *hn_chat_render_fallback_ranges(const HnJson *messages, bool add_generation_prompt,
                                     size_t *out_len, HnTextRange **ranges_out, size_t *n_ranges_out,
                                     HnError *err);

#ifdef __cplusplus
}
#endif
