/* hanashi-engine.h: the GObject the app uses to talk to the engine thread.
 *
 * One engine thread owns the model and its context.  Every method here returns at once;
 * results arrive as signals emitted on the GMainContext that was the thread-default when
 * hanashi_engine_new() was called.  The command queue protocol is private to the .c file.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "hn-sampler.h"

G_BEGIN_DECLS

/* ---- errors ---------------------------------------------------------------------------- */

#define HANASHI_ENGINE_ERROR (hanashi_engine_error_quark ())
GQuark hanashi_engine_error_quark (void);

typedef enum {
  HANASHI_ENGINE_ERROR_FAILED,
  HANASHI_ENGINE_ERROR_MODEL_UNREADABLE,   /* open/read/mmap failed */
  HANASHI_ENGINE_ERROR_NOT_GGUF,           /* the file is not a GGUF model */
  HANASHI_ENGINE_ERROR_UNSUPPORTED_ARCH,   /* well-formed, architecture or type not implemented */
  HANASHI_ENGINE_ERROR_OUT_OF_MEMORY,      /* the context does not fit in memory */
  HANASHI_ENGINE_ERROR_GRAMMAR_INVALID,    /* GBNF or JSON schema did not parse */
  HANASHI_ENGINE_ERROR_TEMPLATE_FAILED,    /* chat template failed to render */
  HANASHI_ENGINE_ERROR_NO_MODEL,           /* generate/count without a loaded model */
  HANASHI_ENGINE_ERROR_CANCELLED,          /* the operation was cancelled */
  HANASHI_ENGINE_ERROR_INVALID_ARGUMENT,   /* a request field is out of range */
  HANASHI_ENGINE_ERROR_CONTEXT_CLAMPED,    /* (a warning) the context size asked for is more than
                                            * the model supports: its largest is used */
  HANASHI_ENGINE_ERROR_MODEL_TRUNCATED,    /* the model file ends before its data does: an
                                            * interrupted download or copy (HN_ERR_TRUNCATED) */
  HANASHI_ENGINE_ERROR_INVALID_NUMBERS,    /* the model computed NaN or infinite scores: its
                                            * weights are damaged (HN_ERR_INVALID_NUMBERS) */
  HANASHI_ENGINE_ERROR_PROMPT_TOO_LONG,    /* a message is longer than the whole context can
                                            * hold, even with older messages left out
                                            * (HN_ERR_TOO_LONG) */
  HANASHI_ENGINE_ERROR_GRAMMAR_TOO_COMPLEX, /* the grammar or JSON schema is valid but too large
                                            * or too ambiguous to follow within the work bounds
                                            * (HN_ERR_LIMIT) */
  HANASHI_ENGINE_ERROR_PARAM_UNAVAILABLE,  /* (a warning) a remote server does not take a parameter
                                            * the request set: it was not sent */
  HANASHI_ENGINE_ERROR_GPU_FAILED,         /* (a warning) the graphics device failed during the
                                            * generation: the processor runs every layer from now
                                            * on (the model info says so before this is emitted) */
} HanashiEngineError;

/* ---- enums ----------------------------------------------------------------------------- */

typedef enum {
  HANASHI_ENGINE_STATE_NO_MODEL,
  HANASHI_ENGINE_STATE_LOADING,
  HANASHI_ENGINE_STATE_READY,
  HANASHI_ENGINE_STATE_GENERATING,
} HanashiEngineState;

GType hanashi_engine_state_get_type (void) G_GNUC_CONST;
#define HANASHI_TYPE_ENGINE_STATE (hanashi_engine_state_get_type ())

typedef enum {
  HANASHI_STOP_REASON_EOG,          /* the model produced an end-of-generation token */
  HANASHI_STOP_REASON_MAX_TOKENS,   /* max_tokens reached */
  HANASHI_STOP_REASON_STOP_STRING,  /* one of the stop strings appeared (not emitted) */
  HANASHI_STOP_REASON_CANCELLED,    /* hanashi_engine_cancel() or a newer command */
  HANASHI_STOP_REASON_CONTEXT_FULL, /* nothing left to drop and the context is full */
  HANASHI_STOP_REASON_GRAMMAR_DONE, /* the grammar accepts nothing more */
} HanashiStopReason;

GType hanashi_stop_reason_get_type (void) G_GNUC_CONST;
#define HANASHI_TYPE_STOP_REASON (hanashi_stop_reason_get_type ())

typedef enum {
  HANASHI_ROLE_SYSTEM,
  HANASHI_ROLE_USER,
  HANASHI_ROLE_ASSISTANT,
} HanashiRole;

/* ---- model info (boxed, immutable once emitted) ----------------------------------------- */

typedef struct {
  char    *name;          /* general.name, or the file's basename */
  char    *arch;          /* general.architecture */
  char    *weight_type;   /* dominant weight type, e.g. "Q4_0" */
  char    *path;
  guint64  n_params;
  guint64  file_size;
  guint32  n_ctx;         /* context size actually allocated */
  guint32  n_batch;       /* most tokens evaluated per step while reading a prompt */
  guint32  n_ctx_train;
  guint32  n_vocab;
  /* The chat template reads enable_thinking (Qwen3): the app offers its Think switch. */
  gboolean thinking_switch;
  /* The template's generation prompt opens a thinking block (DeepSeek-R1), so a reply
   * starts inside the thinking and shows only its end marker. */
  gboolean reply_opens_thinking;
  /* The template mentions a closing thinking marker (it strips old thinking, as R1's and
   * Qwen3's do): a reply's lone "</think>" ends a thinking whose start the prompt wrote. */
  gboolean thinking_aware;
  /* A model on an OpenAI-compatible server (hanashi_engine_load_remote_async): the API root
   * ("http://host:8080/v1"), and whether the server is a Hanashi server (it takes Hanashi's
   * own parameters).  NULL/FALSE for a model file; name is then the model's id, path NULL
   * and the context sizes 0 (the server does not say). */
  char    *remote_url;
  gboolean remote_is_hanashi;
  /* Where the layers run: gpu_layers of the n_layers (the last ones) on the graphics device
   * gpu_device (NULL and 0: all on the processor).  gpu_notice: why the device chosen in
   * Preferences is not used, or stopped being used (a sentence in English for the log;
   * NULL when nothing went wrong).  0/NULL for a remote model. */
  char    *gpu_device;
  guint32  gpu_layers;
  guint32  n_layers;
  char    *gpu_notice;
} HanashiModelInfo;

GType hanashi_model_info_get_type (void) G_GNUC_CONST;
#define HANASHI_TYPE_MODEL_INFO (hanashi_model_info_get_type ())
HanashiModelInfo *hanashi_model_info_copy (const HanashiModelInfo *info);
void              hanashi_model_info_free (HanashiModelInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiModelInfo, hanashi_model_info_free)

/* ---- sampling parameters ---------------------------------------------------------------
 * A request carries the engine's own HnSamplerParams (hn-sampler.h): its numeric fields
 * are described by the table in hn-params.h, so there is no second list here.  Start from
 * hn_sampler_params_init(); logit_bias and stop are not taken from it (stop strings are
 * added with hanashi_generate_request_add_stop_string). */

/* ---- compiled grammars (boxed, refcounted, immutable) ------------------------------------
 * A GBNF grammar or JSON schema converted and parsed once.  The app checks what the user
 * typed by compiling it (on a worker thread) and hands that same object to the request,
 * so the engine thread does not parse it again.  Thread-safe to share: nothing changes it
 * after creation.  Errors: HANASHI_ENGINE_ERROR_GRAMMAR_INVALID ("line L, column C: …")
 * or HANASHI_ENGINE_ERROR_GRAMMAR_TOO_COMPLEX. */

typedef struct _HanashiGrammar HanashiGrammar;

GType hanashi_grammar_get_type (void) G_GNUC_CONST;
#define HANASHI_TYPE_GRAMMAR (hanashi_grammar_get_type ())
HanashiGrammar *hanashi_grammar_new_gbnf        (const char *gbnf, GError **error);
HanashiGrammar *hanashi_grammar_new_json_schema (const char *schema, GError **error);
HanashiGrammar *hanashi_grammar_ref             (HanashiGrammar *grammar);
void            hanashi_grammar_unref           (HanashiGrammar *grammar);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiGrammar, hanashi_grammar_unref)
/* For tests and diagnostics: how many grammars this process has parsed so far. */
guint           hanashi_grammar_get_n_parsed    (void);

/* ---- generation request (boxed, refcounted) -------------------------------------------- */

/* The chat template's enable_thinking variable. */
typedef enum {
  HANASHI_THINKING_DEFAULT,   /* undefined: the template's own default */
  HANASHI_THINKING_ON,
  HANASHI_THINKING_OFF,
} HanashiThinking;

typedef struct _HanashiGenerateRequest HanashiGenerateRequest;

GType hanashi_generate_request_get_type (void) G_GNUC_CONST;
#define HANASHI_TYPE_GENERATE_REQUEST (hanashi_generate_request_get_type ())

HanashiGenerateRequest *hanashi_generate_request_new   (const char *conversation_id);
HanashiGenerateRequest *hanashi_generate_request_ref   (HanashiGenerateRequest *req);
void                    hanashi_generate_request_unref (HanashiGenerateRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiGenerateRequest, hanashi_generate_request_unref)

const char *hanashi_generate_request_get_conversation_id (HanashiGenerateRequest *req);
void hanashi_generate_request_set_system_prompt  (HanashiGenerateRequest *req, const char *text);
void hanashi_generate_request_add_message        (HanashiGenerateRequest *req, HanashiRole role,
                                                  const char *content);
guint hanashi_generate_request_get_n_messages    (HanashiGenerateRequest *req);
/* The sampling params are copied in/out (max_new_tokens included; logit_bias and stop
 * are left out: they come back NULL/0). */
void hanashi_generate_request_set_sampling       (HanashiGenerateRequest *req,
                                                  const HnSamplerParams *params);
void hanashi_generate_request_get_sampling       (HanashiGenerateRequest *req,
                                                  HnSamplerParams *out);
/* At most one of grammar / JSON schema; setting one clears the other. */
void hanashi_generate_request_set_grammar        (HanashiGenerateRequest *req, const char *gbnf);
void hanashi_generate_request_set_json_schema    (HanashiGenerateRequest *req, const char *schema);
/* The grammar or schema set above, already compiled (by the caller's check): the engine
 * uses it instead of parsing the text again.  Setting a text clears it; set it after. */
void hanashi_generate_request_set_compiled_grammar (HanashiGenerateRequest *req,
                                                    HanashiGrammar         *grammar);
HanashiGrammar *hanashi_generate_request_get_compiled_grammar (HanashiGenerateRequest *req);
const char *hanashi_generate_request_get_grammar     (HanashiGenerateRequest *req);
const char *hanashi_generate_request_get_json_schema (HanashiGenerateRequest *req);
/* CFG: scale 1.0 = off. */
void hanashi_generate_request_set_cfg            (HanashiGenerateRequest *req,
                                                  const char *negative_prompt, double scale);
/* The same as the sampling params' max_new_tokens (-1 = until the context is full). */
void hanashi_generate_request_set_max_tokens     (HanashiGenerateRequest *req, int max_tokens);
void hanashi_generate_request_add_stop_string    (HanashiGenerateRequest *req, const char *stop);
/* NULL: the engine picks $XDG_CACHE_HOME/hanashi/sessions/<conversation-id>.hnsession. */
void hanashi_generate_request_set_session_path   (HanashiGenerateRequest *req, const char *path);
/* Passed to the chat template as enable_thinking (only templates that read it care). */
void hanashi_generate_request_set_thinking       (HanashiGenerateRequest *req, HanashiThinking thinking);
HanashiThinking hanashi_generate_request_get_thinking (HanashiGenerateRequest *req);
/* Record, for every sampled token, its @k (0 = off, at most HN_PROBS_MAX_K = 20) most
 * likely raw candidates and what the sampler chain did to them (HnTokenProbs, see
 * hn-sampler.h); they arrive through the "token-probs" signal. */
void hanashi_generate_request_set_probs_k        (HanashiGenerateRequest *req, int k);
int  hanashi_generate_request_get_probs_k        (HanashiGenerateRequest *req);
/* Continue a reply from exact tokens (a branch of an answer at one token): the reply
 * starts with @tokens as though the model had sampled them (they are not streamed again),
 * and the KV cells of the reply it branches from are reused up to where it differs.  The
 * ids are those of the loaded model (the "token-probs" records'); NULL or 0 = none. */
void hanashi_generate_request_set_reply_prefix   (HanashiGenerateRequest *req, const gint32 *tokens,
                                                  guint n_tokens);
/* FALSE: neither load nor save a session file for this request. */
void hanashi_generate_request_set_use_session    (HanashiGenerateRequest *req, gboolean use);

/* ---- generation statistics (boxed, emitted with "generation-done") --------------------- */

typedef struct {
  guint              n_prompt;          /* prompt tokens after templating */
  guint              n_reused;          /* of those, taken from KV cache / session file */
  guint              n_generated;
  double             prompt_tokens_per_second;
  double             gen_tokens_per_second;
  double             time_to_first_token;   /* seconds */
  HanashiStopReason  stop_reason;
  guint              n_messages_dropped;    /* oldest turns dropped to fit the context */
  guint              n_tokens_dropped;
  gboolean           session_saved;
  guint              grammar_truncated_steps; /* > 0: the grammar was too ambiguous to follow
                                               * in full, some allowed text may have been refused */
} HanashiGenerationStats;

GType hanashi_generation_stats_get_type (void) G_GNUC_CONST;
#define HANASHI_TYPE_GENERATION_STATS (hanashi_generation_stats_get_type ())
HanashiGenerationStats *hanashi_generation_stats_copy (const HanashiGenerationStats *stats);
void                    hanashi_generation_stats_free (HanashiGenerationStats *stats);

/* ---- the next token's logits (boxed, immutable), for the parameter panel's lens ---------
 * What the sampler would see for the first token of a reply to a conversation: the raw row,
 * the tokens before it (for the penalties) and what the request's grammar allows there, so
 * that the lens (hn_lens_compute, hn-sampler.h) can replay the chain under any settings
 * without running the model again. */
typedef struct {
  guint32  n_vocab;
  GBytes  *logits;          /* n_vocab floats: the raw row (after guidance, when CFG is on) */
  GBytes  *history;         /* gint32 tokens before it: the prompt as the model read it */
  GBytes  *allowed;         /* NULL without a grammar; else (n_vocab + 31) / 32 guint32
                             * words, bit i % 32 of word i / 32 set when the grammar allows
                             * token i as the reply's first token */
  GBytes  *newline_tokens;  /* gint32 tokens that penalize_nl = false exempts */
  /* The HN_PROBS_MAX_K most likely tokens of the raw row (n_top of them, fewer only for a
   * smaller vocabulary), most likely first, and their texts as valid UTF-8 (a control
   * token's name), for showing the candidates a lens finds. */
  guint32  n_top;
  gint32   top_ids[HN_PROBS_MAX_K];
  char    *top_texts[HN_PROBS_MAX_K];
} HanashiNextLogits;

GType hanashi_next_logits_get_type (void) G_GNUC_CONST;
#define HANASHI_TYPE_NEXT_LOGITS (hanashi_next_logits_get_type ())
HanashiNextLogits *hanashi_next_logits_copy (const HanashiNextLogits *next);
void               hanashi_next_logits_free (HanashiNextLogits *next);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiNextLogits, hanashi_next_logits_free)

/* ---- the engine ------------------------------------------------------------------------ */

#define HANASHI_TYPE_ENGINE (hanashi_engine_get_type ())
G_DECLARE_FINAL_TYPE (HanashiEngine, hanashi_engine, HANASHI, ENGINE, GObject)

/* Starts the engine thread; events are emitted on the current thread-default main context. */
HanashiEngine      *hanashi_engine_new              (void);

HanashiEngineState  hanashi_engine_get_state        (HanashiEngine *self);
/* NULL when no model is loaded.  Owned by the engine; copy to keep. */
const HanashiModelInfo *hanashi_engine_get_model_info (HanashiEngine *self);

/* Loads a model, replacing (and cancelling work on) the current one once the new one has
 * loaded: when it fails, the current model stays loaded and usable.  Progress via
 * "load-progress".  n_ctx 0 = model's training context capped at 4096; n_threads 0 = auto. */
void     hanashi_engine_load_model_async  (HanashiEngine       *self,
                                           const char          *path,
                                           guint                n_ctx,
                                           guint                n_threads,
                                           GCancellable        *cancellable,
                                           GAsyncReadyCallback  callback,
                                           gpointer             user_data);
gboolean hanashi_engine_load_model_finish (HanashiEngine  *self,
                                           GAsyncResult   *result,
                                           GError        **error);
void     hanashi_engine_unload            (HanashiEngine *self);

/* Loads a model that an OpenAI-compatible server serves (its id as GET /v1/models lists
 * it; NULL or "" = the first listed) in place of the current one, the same way as a file:
 * "model-loaded" and the other signals follow, generations stream from the server, and
 * hanashi_engine_load_model_finish() completes it.  "Loading" checks that the server answers
 * and lists the model (errors of HANASHI_REMOTE_ERROR, hanashi-remote.h).  Counting tokens is
 * not available for a remote model (HANASHI_ENGINE_ERROR_FAILED). */
typedef struct _HanashiRemote HanashiRemote;
void     hanashi_engine_load_remote_async (HanashiEngine       *self,
                                           HanashiRemote       *remote,
                                           const char          *model_id,
                                           GCancellable        *cancellable,
                                           GAsyncReadyCallback  callback,
                                           gpointer             user_data);

/* Queues a generation; returns its id (> 0) used by signals and cancel.  A generate while
 * another runs cancels the running one first. */
guint    hanashi_engine_generate          (HanashiEngine *self, HanashiGenerateRequest *req);
/* Cancels a generation (0 = whatever is running); it stops within one decode step and
 * still emits "generation-done" with HANASHI_STOP_REASON_CANCELLED. */
void     hanashi_engine_cancel            (HanashiEngine *self, guint request_id);
/* How many tokens of generation @request_id "token" has delivered so far (one signal can
 * carry several); 0 for any other request than the latest one to stream. */
guint    hanashi_engine_get_streamed_tokens (HanashiEngine *self, guint request_id);

/* What token @token of the loaded model writes: the bytes it adds to a reply (a UTF-8
 * character may be split over several tokens), or, for a token that adds none (a control
 * token such as the end of the reply), its spelling in the vocabulary with @is_control set.
 * NULL when no model is loaded, the model has no such token, or it cannot say (a model on a
 * server).  Immediate, and safe while a generation runs. */
GBytes  *hanashi_engine_dup_token_text      (HanashiEngine *self, gint32 token, gboolean *is_control);

/* Context meter: tokens the request's conversation takes after templating. */
void     hanashi_engine_count_tokens_async  (HanashiEngine          *self,
                                             HanashiGenerateRequest *req,
                                             GCancellable           *cancellable,
                                             GAsyncReadyCallback     callback,
                                             gpointer                user_data);
gint     hanashi_engine_count_tokens_finish (HanashiEngine  *self,
                                             GAsyncResult   *result,
                                             GError        **error);

/* The next token's logits for @req's conversation, for the panel's lens: the prompt as a
 * generation of @req would send it, read through the KV cache the conversation's replies
 * use (so a lens request after a reply costs little, and the reply after it reuses the
 * cache), one model run per call; no session file is read or written and no token is
 * emitted.  With a reply prefix (hanashi_generate_request_set_reply_prefix) the row is the
 * one after those tokens: the lens on a token picked in an answer, whose allowed set is
 * the grammar's after the prefix (none when the grammar rejects the prefix).
 * Runs on the engine thread in queue order; a later generate cancels it (the
 * task then fails with HANASHI_ENGINE_ERROR_CANCELLED), as does @cancellable.  Not
 * available for a remote model (HANASHI_ENGINE_ERROR_FAILED). */
void     hanashi_engine_next_logits_async   (HanashiEngine          *self,
                                             HanashiGenerateRequest *req,
                                             GCancellable           *cancellable,
                                             GAsyncReadyCallback     callback,
                                             gpointer                user_data);
HanashiNextLogits *hanashi_engine_next_logits_finish (HanashiEngine  *self,
                                                      GAsyncResult   *result,
                                                      GError        **error);
/* Session cache (sessions are written automatically after each reply, to
 * <dir>/<conversation-id>.hnsession; dir defaults to $XDG_CACHE_HOME/hanashi/sessions,
 * the limit to 2 GiB).  Forget and clear go through the command queue, so they never race a
 * save of the engine thread. */
void     hanashi_engine_set_session_dir        (HanashiEngine *self, const char *dir);
void     hanashi_engine_set_session_cache_limit (HanashiEngine *self, guint64 bytes);
/* Tokens evaluated per step while reading a prompt, for models loaded from now on (it sizes
 * the context's scratch memory); 0 = the engine's default, 512. */
void     hanashi_engine_set_batch_size          (HanashiEngine *self, guint n_batch);
/* Where the layers of models loaded from now on run.  @device: a graphics device's name as
 * hanashi_gpu_list_devices_async() gives it, or NULL for the best hardware device (never a
 * software driver).  @n_layers: how many of the last layers run there,
 * HANASHI_GPU_LAYERS_AUTO for as many as fit its memory with a margin, 0 for the processor
 * only (the default).  A device that cannot be used means the processor, and the model
 * info's gpu_notice says why. */
#define HANASHI_GPU_LAYERS_AUTO (-1)
void     hanashi_engine_set_gpu                 (HanashiEngine *self, const char *device, int n_layers);
void     hanashi_engine_forget_session         (HanashiEngine *self, const char *conversation_id);
void     hanashi_engine_clear_session_cache    (HanashiEngine *self);

/* The one definition of the session cache, for the engine and for Preferences without an
 * engine: the default folder ($XDG_CACHE_HOME/hanashi/sessions, owned string), the suffix
 * of its files, and clearing it.  Clearing deletes the session files and the temporary
 * files an interrupted save left beside them (NAME.hnsession.tmp.*), nothing else: the
 * folder may hold files that are not ours.  A missing folder is already clear. */
#define HANASHI_SESSION_SUFFIX ".hnsession"
char    *hanashi_session_cache_dup_default_dir (void);
gboolean hanashi_session_cache_clear           (const char    *dir,
                                                GCancellable  *cancellable,
                                                GError       **error);

/* ---- graphics devices ----------------------------------------------------------------- */
typedef struct {
  char    *name;
  char    *type;     /* "discrete", "integrated", "virtual", "cpu" (a software driver) or "other" */
  guint64  memory;   /* bytes of device-local memory */
} HanashiGpuDevice;
void hanashi_gpu_device_free (HanashiGpuDevice *device);
/* Whether this build has the Vulkan backend at all. */
gboolean   hanashi_gpu_supported               (void);
/* Lists the Vulkan devices in a worker thread (asking the driver takes a while): a
 * GPtrArray of HanashiGpuDevice (owned, may be empty), or an error of HANASHI_ENGINE_ERROR
 * (FAILED) whose message says why there is none (no driver, no Vulkan in this build). */
void       hanashi_gpu_list_devices_async     (GCancellable        *cancellable,
                                               GAsyncReadyCallback  callback,
                                               gpointer             user_data);
GPtrArray *hanashi_gpu_list_devices_finish    (GAsyncResult        *result,
                                               GError             **error);

/* Memory the system can give a model now, in bytes (MemAvailable, as the engine reads it
 * before it makes a context); FALSE when it cannot be known. */
gboolean hanashi_memory_available (guint64 *bytes);

/* ---- the loaded model, lent (refcounted) -----------------------------------------------
 * A model file the engine has loaded can be used at the same time by another part of the
 * process — the OpenAI-compatible server the app embeds (hanashi_server_new_for_loan,
 * hanashi-server.h) — which makes contexts of its own over the same weights instead of
 * loading the file a second time.  The weights and the vocabulary are read-only once loaded,
 * so any number of threads may use them at once.  The engine holds one reference while the
 * model is its current one and lets go when it unloads or replaces it; the weights are freed
 * when the last holder lets go (from whichever thread that is).  Thread-safe. */
typedef struct _HanashiModelLoan HanashiModelLoan;
HanashiModelLoan *hanashi_model_loan_ref   (HanashiModelLoan *loan);
void              hanashi_model_loan_unref (HanashiModelLoan *loan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiModelLoan, hanashi_model_loan_unref)
/* The file the model was loaded from, and the context size the engine gave it. */
const char       *hanashi_model_loan_get_path  (HanashiModelLoan *loan);
guint             hanashi_model_loan_get_n_ctx (HanashiModelLoan *loan);

/* A new reference to the model the engine thread holds now (it may already be newer than
 * "model-info" says, when a load has finished whose events are still on their way); NULL
 * when no model is loaded, or the model is on a server (there are no weights to lend). */
HanashiModelLoan *hanashi_engine_lend_model (HanashiEngine *self);

/* Signals (all emitted on the main context captured in hanashi_engine_new()):
 *   "load-progress"     (double fraction)
 *   "model-loaded"      (HanashiModelInfo *info)
 *   "prompt-progress"   (guint id, guint done, guint total)
 *   "token"             (guint id, const char *text, gint token_id)   text may hold several
 *                        coalesced tokens; token_id is then the last one
 *   "token-probs"       (guint id, GBytes *records)   with probs_k > 0: the HnTokenProbs
 *                        records (packed, n = size / sizeof (HnTokenProbs)) of the tokens
 *                        whose text the following "token" signal brings; the records of
 *                        tokens with no text of their own (end of generation, text held
 *                        back to the end) come alone before "generation-done"
 *   "generation-done"   (guint id, HanashiGenerationStats *stats)
 *   "context-dropped"   (guint id, guint n_messages, guint n_tokens)
 *   "error"             (guint id, GError *error)   id 0 for errors outside a generation
 *   "warning"           (guint id, GError *warning)  the generation goes on; the code says
 *                        what happened (HANASHI_ENGINE_ERROR_TEMPLATE_FAILED: the model's
 *                        chat template failed and ChatML was used instead), the message why
 *   "session-write-failed" (const char *message)    at most once per session file (also
 *                        logged with g_message); the previous file stays intact
 * Properties: "state" (HanashiEngineState, read-only), "model-info" (HanashiModelInfo, r/o).
 */

G_END_DECLS
