/* hn-chat.h — the conversation core: messages in, a streamed reply out.
 *
 * Everything a chat needs between a list of messages and the generation loop lives here,
 * once, without GLib, so that the engine thread (engine/glib), `hanashi-cli chat` and
 * `hanashi-cli generate` run the same code:
 *
 *  - the model's chat template rendered with the special-token guards (message text is
 *    tokenized so that it can never produce control tokens), or ChatML when the model has
 *    no template or its template fails (hn_chat_render_fallback_ranges, the one ChatML
 *    writer);
 *  - the conversation fitted to the context: the oldest turns are dropped, the system
 *    prompt and the last user message stay, and room is left for the reply;
 *  - the longest matching prefix reused from the KV cells this chat holds, or from the
 *    conversation's session file the first time the conversation is seen; after dropped
 *    turns the cells after the drop are shifted down (hn_kv_cache_seq_shift) instead of
 *    evaluated again;
 *  - generation with the sampler, a grammar (GBNF or JSON schema) and CFG;
 *  - the session file saved atomically after the reply, and the cache directory trimmed.
 *
 * Ownership: an HnChatModel borrows a loaded model and its vocabulary and owns what every
 * conversation of that model shares (the parsed template, BOS/EOS texts, newline tokens,
 * the grammar view of the vocabulary).  An HnChat borrows an HnChatModel and owns one
 * context (KV cache) and what that context holds, so several chats can run over one
 * model.  A chat is used by one thread at a time; an HnChatModel may be shared by chats on
 * several threads once hn_chat_model_grammar_vocab() has been called (it builds the
 * grammar view lazily, the only thing it changes after creation).
 *
 * Nothing here allocates per generated token: the token lists are sized by the context at
 * hn_chat_new.  See docs/engine-thread.md ("The model backend") for the rules in detail.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-chat-template.h"
#include "hn-context.h"
#include "hn-generate.h"
#include "hn-grammar.h"
#include "hn-model.h"
#include "hn-sampler.h"
#include "hn-vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct HnChatModel HnChatModel;
typedef struct HnChat HnChat;

/* One message: role "system", "user" or "assistant" (others are passed to the template as
 * they are; only "user" starts a turn), content UTF-8. */
typedef struct {
  const char *role;
  const char *content;
} HnChatMessage;

/* ---- the model side ----------------------------------------------------------------- */

/* Borrows model and vocab (they must outlive the HnChatModel).  A template that does not
 * parse is not an error: the chats use ChatML and say why (HN_CHAT_WARNING_TEMPLATE_FALLBACK). */
HnChatModel *hn_chat_model_new(const HnModel *model, const HnVocab *vocab, HnError *err);
void hn_chat_model_free(HnChatModel *cm);

/* The parsed template (NULL: none, or it did not parse) and the BOS/EOS texts it sees. */
const HnChatTemplate *hn_chat_model_template(const HnChatModel *cm);
const char *hn_chat_model_bos_text(const HnChatModel *cm);
const char *hn_chat_model_eos_text(const HnChatModel *cm);
/* The grammar matcher's view of the vocabulary, built on first use (NULL on failure). */
const HnGrammarVocab *hn_chat_model_grammar_vocab(HnChatModel *cm, HnError *err);

/* A rendered and tokenized conversation. */
typedef struct {
  int32_t *tokens;
  size_t n_tokens;
  char *fallback_reason; /* why ChatML was used instead of the model's template, or NULL */
} HnChatPrompt;

void hn_chat_prompt_clear(HnChatPrompt *prompt);

/* The system prompt (NULL or "" = none) and the messages, rendered with the generation
 * prompt on and tokenized exactly as hn_chat_generate does before anything is dropped:
 * the context meter. */
bool hn_chat_model_tokenize(HnChatModel *cm, const char *system, const HnChatMessage *messages,
                            size_t n_messages, HnChatThinking thinking, HnChatPrompt *out, HnError *err);

/* ---- one conversation ----------------------------------------------------------------- */

/* A context over the chat model's model (n_seq_max is raised to 2: sequence 1 holds the CFG
 * negative prompt during a guided reply).  hn_context_notice(hn_chat_context()) says when
 * the context size was clamped. */
HnChat *hn_chat_new(HnChatModel *cm, const HnContextParams *params, HnError *err);
void hn_chat_free(HnChat *chat);
HnContext *hn_chat_context(HnChat *chat);

/* The tokens whose keys and values sequence 0 holds, at positions 0..n-1: after a reply,
 * the prompt and the generated tokens that went through the model (not the last sampled
 * one when generation stopped right after it). */
const int32_t *hn_chat_tokens_held(const HnChat *chat, size_t *n_tokens);

/* The tokens the last hn_chat_generate sampled, in order (also the last one, which may not
 * have gone through the model); valid until the next call. */
const int32_t *hn_chat_reply_tokens(const HnChat *chat, size_t *n_tokens);

/* Empties the KV cache and forgets which conversation it held. */
void hn_chat_forget(HnChat *chat);

typedef struct {
  /* The conversation: the system prompt (NULL or "" = none; it is never dropped), then the
   * messages. */
  const char *system;
  const HnChatMessage *messages;
  size_t n_messages;
  HnChatThinking thinking;           /* the template's enable_thinking */
  /* Or the prompt as tokens (with negative_tokens for CFG): used as they are, no template,
   * nothing dropped.  Set prompt_tokens to use this mode. */
  const int32_t *prompt_tokens;
  size_t n_prompt_tokens;
  const int32_t *negative_tokens;
  size_t n_negative_tokens;

  const HnSamplerParams *sampler;    /* NULL = defaults; validated; max_new_tokens < 0 = no
                                      * limit; the stop strings come from here too */
  /* At most one constraint: a parsed grammar (borrowed), else a JSON schema, else GBNF. */
  const HnGrammar *grammar;
  const char *json_schema;
  const char *gbnf;
  /* CFG: with messages, the conversation is rendered a second time with cfg_negative in
   * place of the system prompt; with prompt tokens, negative_tokens.  1 = off. */
  const char *cfg_negative;
  float cfg_scale;
  /* Record the probs_k (0 = off, at most HN_PROBS_MAX_K) most likely raw candidates of
   * every sampled token with their fate in the sampler chain (see hn-sampler.h). */
  int32_t probs_k;
  /* A forced start of the reply, as exact token ids (not retokenized text): the reply goes
   * on after them as if the model had sampled them (a branch of an answer at one token).
   * They follow the rendered conversation (or prompt_tokens, and the negative prompt with
   * CFG), so the KV cells of a reply that began with the same tokens are reused; they count
   * in HnChatStats.n_prompt and are not in hn_chat_reply_tokens or on_text.  NULL = none. */
  const int32_t *reply_prefix;
  size_t n_reply_prefix;

  /* Which conversation this is: a request whose conversation differs from the one the KV
   * cache holds (compared as strings, NULL equal to NULL; a new chat holds NULL's empty
   * state) starts from an empty cache and restores what it can from session_path. */
  const char *conversation;
  const char *session_path;          /* NULL: no session file is read or written */
  const char *session_cache_dir;     /* trimmed to session_cache_limit bytes after a save (NULL: not) */
  uint64_t session_cache_limit;
} HnChatRequest;

void hn_chat_request_init(HnChatRequest *req);

/* Something the caller may want to know; the generation goes on. */
typedef enum {
  HN_CHAT_WARNING_TEMPLATE_FALLBACK = 1, /* the model's template failed: ChatML was used */
  HN_CHAT_WARNING_SESSION_MISSING,       /* there is no session file (yet): nothing restored */
  HN_CHAT_WARNING_SESSION_NOT_USED,      /* the session file is damaged, stale or foreign */
  HN_CHAT_WARNING_SESSION_NOT_SAVED,     /* writing it failed; the previous file is intact */
  HN_CHAT_WARNING_SESSION_CACHE_NOT_TRIMMED, /* the cache directory could not be trimmed */
} HnChatWarning;

/* How the prompt met the KV cache, before anything is evaluated. */
typedef struct {
  size_t n_prompt;       /* prompt tokens (after dropping) */
  size_t n_cached;       /* of those, already in the KV cache (restored or kept) */
  bool restored;         /* the session file was read for this request */
  size_t n_restored;     /* tokens restored from it */
} HnChatReuse;

typedef struct {
  /* Text that may be shown now (complete UTF-8, stop-string candidates held back) and the
   * token it ends with; text held back until the end comes with the last token.  Return
   * false to stop. */
  bool (*on_text)(void *user_data, const char *text, size_t len, int32_t token);
  /* Prompt tokens evaluated so far (both sequences with CFG), once per batch. */
  void (*on_prompt_progress)(void *user_data, size_t done, size_t total);
  /* Polled between layers of a decode and after every token: true = stop now. */
  bool (*is_cancelled)(void *user_data);
  void (*on_warning)(void *user_data, HnChatWarning code, const char *message);
  /* The oldest n_messages of the request's messages (the system prompt stays) were left out
   * to fit the context; sent before anything is evaluated. */
  void (*on_context_dropped)(void *user_data, size_t n_messages, size_t n_tokens);
  void (*on_reuse)(void *user_data, const HnChatReuse *reuse);
  /* With probs_k > 0, once per sampled token (end-of-generation included), before its text. */
  void (*on_probs)(void *user_data, const HnTokenProbs *probs);
  /* Once, before the first token is drawn: the row it is drawn from (after guidance), the
   * tokens before it (the prompt as evaluated) and the newline tokens penalize_nl = false
   * exempts.  What the panel's lens needs to replay the sampler on this position; valid
   * during the call. */
  void (*on_first_logits)(void *user_data, const float *logits, int32_t n_vocab, const int32_t *history,
                          size_t n_history, const int32_t *newline_tokens, size_t n_newline_tokens);
  void *user_data;
} HnChatCallbacks;

typedef struct {
  size_t n_prompt;           /* prompt tokens after templating and dropping */
  size_t n_reused;           /* prompt tokens not evaluated (at most n_prompt - 1) */
  size_t n_evaluated;        /* prompt tokens evaluated (both sequences with CFG) */
  size_t n_generated;        /* tokens sampled */
  size_t n_messages_dropped;
  size_t n_tokens_dropped;
  /* EOG, MAX_TOKENS, STRING, GRAMMAR, CONTEXT_FULL (also when the KV cells ran out),
   * CANCELLED (is_cancelled said so) or CALLBACK (on_text returned false). */
  HnGenStopReason stop_reason;
  int stop_string_index;
  size_t grammar_truncated_steps;
  double prompt_seconds, generate_seconds;
  double time_to_first_token; /* from the call to the first generated token; 0 = none */
  uint64_t seed;
  bool session_saved;
} HnChatStats;

/* Runs one reply.  Returns false with err set when the request is invalid (sampler
 * parameters, grammar, no messages, a last message longer than the context:
 * HN_ERR_TOO_LONG) or the generation failed; a cancelled or full-context reply is a
 * success with its stop reason.  stats is filled as far as the call got.  Callbacks may be
 * NULL, and so may any of their members. */
bool hn_chat_generate(HnChat *chat, const HnChatRequest *req, const HnChatCallbacks *callbacks,
                      HnChatStats *stats, HnError *err);

/* ---- several conversations decoded together -------------------------------------------
 *
 * An HnChatBatch runs up to n_seq requests at once on ONE context: each request is a
 * sequence of its KV cache, and every hn_chat_batch_step is one forward pass over the next
 * token of every sequence that is generating, plus prompt tokens of sequences that are
 * still reading theirs (at most n_batch rows in all, so a long prompt is read over several
 * steps while the others keep generating).  Concurrent requests share each pass over the
 * weights instead of taking turns.
 *
 * Each sequence has its own sampler, grammar, penalties, stop strings, callbacks and
 * cancellation, and keeps the longest prefix of its previous conversation as a chat does
 * (hn_chat_generate); a request whose prompt shares more with what an idle sequence holds
 * starts from a copy of that sequence's cells.  The rows of a pass are computed with
 * kernels fixed per row (HnBatch.sampled), so a reply is token for token the reply
 * hn_chat_generate gives on a chat of the same context size, alone, with the same seed
 * (dense models on the processor; see docs/server.md for the limits).
 *
 * Sequences join (hn_chat_batch_start) and leave (a finished one is taken with
 * hn_chat_batch_take_result) between steps.  One thread drives a batch; the request
 * (its strings, sampler parameters, grammar) and the callbacks must stay valid until the
 * sequence's result was taken.  Session files are not read or written here. */
#define HN_CHAT_BATCH_MAX 16

typedef struct HnChatBatch HnChatBatch;

/* params->n_ctx is each sequence's context (positions, and what prompts are fitted to);
 * the KV cache has n_seq times as many cells, and sequences n_seq..2*n_seq-1 hold CFG
 * negative prompts.  n_seq from 1 to HN_CHAT_BATCH_MAX. */
HnChatBatch *hn_chat_batch_new(HnChatModel *cm, const HnContextParams *params, int n_seq, HnError *err);
void hn_chat_batch_free(HnChatBatch *batch);
int hn_chat_batch_n_seq(const HnChatBatch *batch);
HnContext *hn_chat_batch_context(HnChatBatch *batch);

/* Prepares req on an idle sequence as hn_chat_generate would (template, fitting, reuse,
 * with on_warning / on_context_dropped / on_reuse called now); nothing is evaluated until
 * the next step.  False with err set for a request hn_chat_generate would refuse, or a
 * session_path; the sequence stays idle. */
bool hn_chat_batch_start(HnChatBatch *batch, int seq, const HnChatRequest *req, const HnChatCallbacks *callbacks,
                         HnError *err);
/* Whether the sequence has a request (running, or finished and not yet taken). */
bool hn_chat_batch_busy(const HnChatBatch *batch, int seq);
/* Sequences that still generate or read their prompt. */
int hn_chat_batch_n_running(const HnChatBatch *batch);
/* One forward pass for every running sequence (nothing when none runs), with their
 * callbacks called from here.  A sequence whose callbacks say stop, or that is cancelled,
 * ends without disturbing the others.  Returns false only when the pass itself failed;
 * then every sequence in it has finished with that error. */
bool hn_chat_batch_step(HnChatBatch *batch, HnError *err);
/* When the sequence has finished: its stats, and true when it succeeded (a cancelled or
 * full-context reply is a success with its stop reason), else false with err set; the
 * sequence is idle afterwards.  False with *finished false while it runs. */
bool hn_chat_batch_take_result(HnChatBatch *batch, int seq, bool *finished, HnChatStats *stats, HnError *err);
/* The tokens the sequence's last request sampled, as hn_chat_reply_tokens. */
const int32_t *hn_chat_batch_reply_tokens(const HnChatBatch *batch, int seq, size_t *n_tokens);
/* Which tokens the sequence holds, as hn_chat_tokens_held. */
const int32_t *hn_chat_batch_tokens_held(const HnChatBatch *batch, int seq, size_t *n_tokens);
/* Empties an idle sequence. */
void hn_chat_batch_forget(HnChatBatch *batch, int seq);

#ifdef __cplusplus
}
#endif
