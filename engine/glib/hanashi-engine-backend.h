/* hanashi-engine-backend.h: what the engine thread needs from an inference engine.
 *
 * The thread protocol (queue, events, cancel, coalescing) is independent of the model code;
 * the real backend (hn-model/hn-context/hn-generate) and the tests' scripted backend
 * (tests/support/) both fill in this table.  All functions run on the engine thread only.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>
#include "hanashi-engine.h"
#include "hn-chat-template.h"
#include "hn-grammar.h"
#include "hn-model.h"
#include "hn-sampler.h"
#include "hn-vocab.h"

typedef struct {
  /* Called per token produced; returns FALSE to stop. */
  gboolean (*on_token) (gpointer data, const char *text, gint token_id);
  void     (*on_prompt_progress) (gpointer data, guint done, guint total);
  gpointer data;
  /* Poll per token and per ubatch; TRUE = stop now. */
  gboolean (*is_cancelled) (gpointer data);
  /* Something the user may want to know that does not stop the generation (e.g. the chat
   * template failed and ChatML was used). */
  /* @code is a HanashiEngineError saying what went wrong; the generation goes on */
  void     (*on_warning) (gpointer data, int code, const char *message);
  /* The oldest n_messages of the request (after the system prompt) were left out to fit
   * the context; sent before the first token. */
  void     (*on_context_dropped) (gpointer data, guint n_messages, guint n_tokens);
  /* Writing the session file failed (the previous file is intact). */
  void     (*on_session_write_failed) (gpointer data, const char *message);
  /* With probs_k > 0: the record of each sampled token, before its text (if any). */
  void     (*on_probs) (gpointer data, const HnTokenProbs *probs);
  /* For load: where the layers run (hanashi_engine_set_gpu: a device name or NULL for the
   * best hardware device, and a layer count, HANASHI_GPU_LAYERS_AUTO or 0). */
  const char *gpu_device;
  int         gpu_layers;
} HanashiBackendSink;

/* Where the generation's session file lives; path NULL = no session for this request. */
typedef struct {
  const char *path;
  const char *dir;          /* the cache directory the LRU limit applies to (may be NULL) */
  guint64     limit;        /* total size of the cache directory, bytes */
} HanashiBackendSession;

typedef struct {
  gpointer (*load)     (const char *path, guint n_ctx, guint n_threads, guint n_batch,
                        HanashiBackendSink *sink, void (*progress) (gpointer data, double fraction),
                        HanashiModelInfo **info_out, GError **error);
  void     (*unload)   (gpointer model);
  gboolean (*generate) (gpointer model, HanashiGenerateRequest *req,
                        const HanashiBackendSession *session, HanashiBackendSink *sink,
                        HanashiGenerationStats *stats, GError **error);
  gint     (*count_tokens) (gpointer model, HanashiGenerateRequest *req, GError **error);
  /* Backends whose models are not files (the remote one): loads model @name from @source
   * (a HanashiRemote) instead of `load`.  NULL for the others. */
  gpointer (*load_from) (gpointer source, const char *name, HanashiBackendSink *sink,
                         HanashiModelInfo **info_out, GError **error);
  /* The next token's logits for @req (hanashi_engine_next_logits_async); only
   * sink->is_cancelled is polled.  NULL: not available with this backend. */
  HanashiNextLogits *(*next_logits) (gpointer model, HanashiGenerateRequest *req, HanashiBackendSink *sink,
                                     GError **error);
  /* The bytes @token adds to a reply (*len may be 0: a control token), and its spelling in
   * the vocabulary (for showing a control token); NULL for a token the model does not have.
   * Unlike the rest, called on the main thread too (hanashi_engine_dup_token_text, under
   * the engine's model lock), so it only reads what load made.  NULL: the backend's models
   * cannot say (the remote one). */
  const char *(*token_text) (gpointer model, gint32 token, gboolean spelling, gsize *len);
  /* A new reference to @model's weights for hanashi_engine_lend_model(); NULL for backends
   * with nothing to lend (the remote one, the tests' scripted one). */
  HanashiModelLoan *(*lend) (gpointer model);
} HanashiEngineBackend;

/* A loan over @model and @vocab, which it takes (they are freed with its last reference);
 * @path and @n_ctx are what hanashi_model_loan_get_path/n_ctx say. */
HanashiModelLoan *hanashi_model_loan_new       (HnModel *model, HnVocab *vocab, const char *path, guint n_ctx);
const HnModel    *hanashi_model_loan_get_model (HanashiModelLoan *loan);
const HnVocab    *hanashi_model_loan_get_vocab (HanashiModelLoan *loan);

/* Replaces the backend used by engines created afterwards; NULL: the real one.  The one
 * seam of the engine thread for tests: the scripted backend they use lives under tests/
 * (tests/support/hanashi-test-seams.h), not in the product. */
void hanashi_engine_set_default_backend (const HanashiEngineBackend *backend);
/* Models on an OpenAI-compatible server (hanashi-engine-remote-backend.c; builds with
 * libsoup only, HANASHI_HAVE_REMOTE): chosen per load by hanashi_engine_load_remote_async. */
const HanashiEngineBackend *hanashi_engine_remote_backend (void);
/* The real engine (hn-model, hn-context, hn-generate, session files); the default. */
const HanashiEngineBackend *hanashi_engine_model_backend (void);

/* Fills info->thinking_switch, reply_opens_thinking and thinking_aware from a parsed chat
 * template and its source (NULL: all FALSE). */
void hanashi_engine_template_traits (const HnChatTemplate *tmpl, const char *source, const char *bos,
                                     const char *eos, HanashiModelInfo *info);

/* Request accessors for backends. */
const char  *hanashi_generate_request_get_system_prompt (HanashiGenerateRequest *req);
HanashiRole  hanashi_generate_request_get_message_role  (HanashiGenerateRequest *req, guint i);
const char  *hanashi_generate_request_get_message_text  (HanashiGenerateRequest *req, guint i);
int          hanashi_generate_request_get_max_tokens    (HanashiGenerateRequest *req);
const char * const *hanashi_generate_request_get_stop_strings (HanashiGenerateRequest *req);
/* The parsed grammar inside (valid while the HanashiGrammar is referenced). */
const HnGrammar    *hanashi_grammar_get_hn                    (HanashiGrammar *grammar);
const char  *hanashi_generate_request_get_session_path  (HanashiGenerateRequest *req);
gboolean     hanashi_generate_request_get_use_session   (HanashiGenerateRequest *req);
const char  *hanashi_generate_request_get_cfg_negative  (HanashiGenerateRequest *req);
double       hanashi_generate_request_get_cfg_scale     (HanashiGenerateRequest *req);
/* The forced start of the reply (hanashi_generate_request_set_reply_prefix); NULL, 0: none. */
const gint32 *hanashi_generate_request_get_reply_prefix (HanashiGenerateRequest *req, guint *n_tokens);
