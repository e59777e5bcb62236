/* hanashi-engine-backend.h: what the engine thread needs from an inference engine.
 *
 * The thread protocol (queue, events, cancel, coalescing) is independent of the model code;
 * the real backend (hn-model/hn-context/hn-generate) and the scripted test backend both fill
 * in this table.  All functions run on the engine thread only.
 */
#pragma once

#include <glib.h>
#include "hanashi-engine.h"
#include "hn-chat-template.h"
#include "hn-grammar.h"
#include "hn-sampler.h"

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
} HanashiEngineBackend;

/* Replaces the backend used by engines created afterwards (tests).  Without a call, the
 * environment variable HANASHI_ENGINE_BACKEND=scripted selects the scripted backend (for
 * GUI tests); otherwise the real engine backend is used. */
void hanashi_engine_set_default_backend (const HanashiEngineBackend *backend);
/* The real engine (hn-model, hn-context, hn-generate, session files); the default. */
const HanashiEngineBackend *hanashi_engine_model_backend (void);
/* Scripted backend: "models" are any readable file; generation produces "tok0 tok1 ..."
 * (max_tokens, default 16) with a small sleep per token so cancels land mid-stream.  With
 * probs_k > 0, token i comes with a made-up record: id i, candidates i, 1000 + i, 2000 + i,
 * … with raw probabilities 0.5, 0.25, …, the last of them removed by "top_k". */
const HanashiEngineBackend *hanashi_engine_scripted_backend (void);
/* Test hooks of the scripted backend (process-wide, thread-safe):
 * - the pieces the next generations produce instead of "tokN " (NULL: back to those);
 * - a chat template for models loaded from now on (NULL: none, ChatML), which sets the
 *   model info's thinking flags as the real backend does and renders every request;
 * - the prompt the last generation rendered (template or ChatML; free with g_free);
 * - a pause: generations wait before their token @index until it is set to -1 (or they
 *   are cancelled), so a test can look at a reply half written. */
void  hanashi_engine_scripted_set_reply    (const char * const *pieces);
void  hanashi_engine_scripted_hold_at      (int index);
void  hanashi_engine_scripted_set_template (const char *source);
char *hanashi_engine_scripted_dup_last_prompt (void);

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
