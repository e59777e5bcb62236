/* hanashi-chat.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-chat"

#include "config.h"

#include <glib/gi18n.h>
#include <string.h>

#include "hanashi-chat.h"
#include "hanashi-conversation-io.h"
#include "hanashi-message.h"
#include "hanashi-token-probs.h"

/* Candidates recorded per token of a reply (see hn-sampler.h: cheap, so always on). */
#define REPLY_PROBS_K 10

/* A streaming reply is written to the database at most this often (µs). */
#define COMMIT_INTERVAL_US (250 * 1000)
#define TITLE_MAX_CHARS 40

struct _HanashiChat
{
  GObject parent_instance;

  /* Owned */
  HanashiEngine  *engine;
  HanashiStore   *store;
  GListStore     *messages;
  char           *title;
  char           *system_prompt;
  char           *params_json;        /* as loaded; the panel's current ones come from dup_params */
  gboolean        thinking;

  const HanashiChatSettingsSource *source;
  gpointer                         source_data;

  gint64          conversation_id;    /* 0: a new chat not stored yet */
  gint64          editing_id;         /* the user message being edited, or 0 */

  /* The reply being written */
  HanashiMessage *reply;
  char           *reply_params;       /* the parameters it was generated with */
  guint           reply_id;           /* the engine's request id, 0 when idle */
  gint64          reply_committed;    /* monotonic time of the last commit */
  gboolean        reply_save_failed;  /* said once per reply, not every 250 ms */
  int             reply_prompt_tokens; /* the request's length as the engine counts it, -1 until known */
  GCancellable   *reply_count_cancellable;
  guint           reply_n_tokens;     /* tokens received so far */
  gint64          reply_first_token;  /* monotonic times of the first and the latest token */
  gint64          reply_last_token;
  double          last_speed;         /* of the open chat's latest reply, 0 when unknown */

  GPtrArray      *unsaved;            /* finished replies waiting to be saved */
  guint           retry_source;

  /* Undo of the last message deletion: the conversation's messages before it, and the ids
   * after it, so that Undo never overwrites what happened since. */
  GPtrArray      *undo_messages;
  GArray         *undo_after_ids;
  gint64          undo_conversation;
};

G_DEFINE_FINAL_TYPE (HanashiChat, hanashi_chat, G_TYPE_OBJECT)

enum {
  PROP_0,
  PROP_CONVERSATION_ID,
  PROP_TITLE,
  PROP_GENERATING,
  PROP_EDITING_ID,
  PROP_CAN_UNDO,
  PROP_REPLY_CONTEXT_TOKENS,
  N_PROPS
};

enum {
  SIGNAL_CHANGED,
  SIGNAL_REPLY_STARTED,
  SIGNAL_MESSAGE_DELETED,
  SIGNAL_PROBLEM,
  SIGNAL_NOTICE,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

static void
report (HanashiChat  *self,
        const char   *what,
        const GError *error)
{
  g_signal_emit (self, signals[SIGNAL_PROBLEM], 0, what, error);
}

static void
notice (HanashiChat *self,
        const char  *text)
{
  g_signal_emit (self, signals[SIGNAL_NOTICE], 0, text);
}

static void
emit_changed (HanashiChat *self)
{
  g_signal_emit (self, signals[SIGNAL_CHANGED], 0);
}

static void
set_conversation (HanashiChat *self,
                  gint64       id,
                  const char  *stored_title)
{
  /* Titles stored before they were made from plain text may still hold Markdown. */
  g_autofree char *title = hanashi_conversation_title_strip_markdown (stored_title);
  if (g_strcmp0 (self->title, title) != 0)
    {
      g_free (self->title);
      self->title = g_steal_pointer (&title);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_TITLE]);
    }
  if (self->conversation_id != id)
    {
      self->conversation_id = id;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CONVERSATION_ID]);
    }
}

static void
set_editing (HanashiChat *self,
             gint64       id)
{
  if (self->editing_id == id)
    return;
  self->editing_id = id;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_EDITING_ID]);
}

/* ---- the visible thread ------------------------------------------------------------------ */

static HanashiMessage *
find_message (HanashiChat *self,
              gint64       id,
              int         *index)
{
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->messages));
  for (guint i = 0; i < n; i++)
    {
      g_autoptr (HanashiMessage) item = g_list_model_get_item (G_LIST_MODEL (self->messages), i);
      if (hanashi_message_get_id (item) == id)
        {
          if (index != NULL)
            *index = (int) i;
          return item;   /* the list keeps it alive */
        }
    }
  return NULL;
}

static gint64
last_message_id (HanashiChat *self)
{
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->messages));
  g_autoptr (HanashiMessage) last = n > 0 ? g_list_model_get_item (G_LIST_MODEL (self->messages), n - 1) : NULL;
  return last ? hanashi_message_get_id (last) : 0;
}

/* Walks the message tree from the root, following the shown alternative at each step. */
static GPtrArray *
build_thread (GPtrArray *stored)
{
  g_autoptr (GHashTable) children = g_hash_table_new_full (g_int64_hash, g_int64_equal, NULL,
                                                           (GDestroyNotify) g_ptr_array_unref);
  GPtrArray *thread = g_ptr_array_new_with_free_func (g_object_unref);
  gint64 parent = 0;

  for (guint i = 0; i < stored->len; i++)
    {
      HanashiStoredMessage *m = g_ptr_array_index (stored, i);
      GPtrArray *kids = g_hash_table_lookup (children, &m->parent_id);
      if (kids == NULL)
        {
          kids = g_ptr_array_new ();
          g_hash_table_insert (children, &m->parent_id, kids);
        }
      g_ptr_array_add (kids, m);
    }

  /* Each step moves to a message with a larger id than any visited in a well-formed tree,
   * but a damaged database could hold a cycle: never take more steps than rows. */
  for (guint step = 0; step < stored->len; step++)
    {
      GPtrArray *kids = g_hash_table_lookup (children, &parent);
      HanashiStoredMessage *pick = NULL;
      guint index = 0, n = 0;

      if (kids == NULL)
        break;
      for (guint i = 0; i < kids->len; i++)
        {
          HanashiStoredMessage *m = g_ptr_array_index (kids, i);
          if (m->shown || pick == NULL || !pick->shown)
            pick = m;
        }
      for (guint i = 0; i < kids->len; i++)
        {
          HanashiStoredMessage *m = g_ptr_array_index (kids, i);
          if (m->alternative_group != pick->alternative_group)
            continue;
          if (m == pick)
            index = n;
          n++;
        }
      HanashiMessage *message = hanashi_message_new_from_stored (pick);
      hanashi_message_set_alternatives (message, index, n);
      g_ptr_array_add (thread, message);
      parent = pick->id;
    }
  return thread;
}

/* Re-reads the conversation; unchanged leading messages keep their objects (and rows). */
static void
reload_thread (HanashiChat *self)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) stored = NULL;
  g_autoptr (GPtrArray) thread = NULL;
  guint n_old = g_list_model_get_n_items (G_LIST_MODEL (self->messages));
  guint keep = 0;

  if (self->store == NULL || self->conversation_id == 0)
    {
      g_list_store_remove_all (self->messages);
      return;
    }
  stored = hanashi_store_list_messages (self->store, self->conversation_id, &error);
  if (stored == NULL)
    {
      report (self, _("Could not read the conversation"), error);
      return;
    }
  thread = build_thread (stored);
  for (; keep < MIN (n_old, thread->len); keep++)
    {
      g_autoptr (HanashiMessage) old = g_list_model_get_item (G_LIST_MODEL (self->messages), keep);
      HanashiMessage *fresh = g_ptr_array_index (thread, keep);
      if (hanashi_message_get_id (old) != hanashi_message_get_id (fresh) || old == self->reply)
        break;
      hanashi_message_set_text (old, hanashi_message_get_text (fresh));
      hanashi_message_set_thinking (old, hanashi_message_get_thinking (fresh),
                                    hanashi_message_get_thinking_seconds (fresh));
      hanashi_message_set_alternatives (old, hanashi_message_get_alternative_index (fresh),
                                        hanashi_message_get_n_alternatives (fresh));
    }
  g_list_store_splice (self->messages, keep, n_old - keep,
                       thread->pdata + keep, thread->len - keep);
}

static void
truncate_thread (HanashiChat *self,
                 guint        length)
{
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->messages));
  if (length < n)
    g_list_store_splice (self->messages, length, n - length, NULL, 0);
}

static char *
conversation_key (gint64 id)
{
  return g_strdup_printf ("%" G_GINT64_FORMAT, id);
}

/* ---- requests ------------------------------------------------------------------------------
 * Replies keep a reasoning model's thinking apart from the answer
 * (hanashi_message_append_output), so the thread sent back to the model, copies and exports
 * carry the answer only.  The chat's Think switch applies when the model's template reads
 * enable_thinking. */

static const char *
current_system_prompt (HanashiChat *self)
{
  if (self->source == NULL || self->source->get_system_prompt == NULL)
    return self->system_prompt;
  return self->source->get_system_prompt (self->source_data);
}

static gboolean
current_thinking (HanashiChat *self)
{
  if (self->source == NULL || self->source->get_thinking == NULL)
    return self->thinking;
  return self->source->get_thinking (self->source_data);
}

static gboolean
thinking_switch_shown (HanashiChat *self)
{
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  return info != NULL && info->thinking_switch;
}

/* Where a reply starts: inside the thinking when the template's generation prompt opened it
 * (DeepSeek-R1) and the user did not switch thinking off; otherwise a leading marker opens
 * it, and, for templates that know thinking, a lone end marker closes one. */
static HanashiThinkStart
reply_start (HanashiChat *self)
{
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  if (info == NULL)
    return HANASHI_THINK_START_ANSWER;
  if (info->reply_opens_thinking && !(info->thinking_switch && !current_thinking (self)))
    return HANASHI_THINK_START_INSIDE;
  return info->thinking_aware ? HANASHI_THINK_START_AUTO : HANASHI_THINK_START_ANSWER;
}

/* The first @n_messages of the visible thread as an engine request, plus @extra_user. */
static HanashiGenerateRequest *
build_request (HanashiChat *self,
               guint        n_messages,
               const char  *extra_user)
{
  g_autofree char *key = conversation_key (self->conversation_id);
  HanashiGenerateRequest *req = hanashi_generate_request_new (key);
  const char *system_prompt = current_system_prompt (self);

  if (*system_prompt != '\0')
    hanashi_generate_request_set_system_prompt (req, system_prompt);
  for (guint i = 0; i < n_messages; i++)
    {
      g_autoptr (HanashiMessage) m = g_list_model_get_item (G_LIST_MODEL (self->messages), i);
      hanashi_generate_request_add_message (req, hanashi_message_is_user (m) ? HANASHI_ROLE_USER : HANASHI_ROLE_ASSISTANT,
                                            hanashi_message_get_text (m));
    }
  if (extra_user != NULL)
    hanashi_generate_request_add_message (req, HANASHI_ROLE_USER, extra_user);
  if (thinking_switch_shown (self))
    hanashi_generate_request_set_thinking (req, current_thinking (self) ? HANASHI_THINKING_ON : HANASHI_THINKING_OFF);
  return req;
}

HanashiGenerateRequest *
hanashi_chat_build_request (HanashiChat *self,
                            const char  *draft)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), NULL);
  return build_request (self, g_list_model_get_n_items (G_LIST_MODEL (self->messages)), draft);
}

static gboolean
apply_params (HanashiChat             *self,
              HanashiGenerateRequest  *req,
              GError                 **error)
{
  if (self->source == NULL || self->source->apply_params == NULL)
    return TRUE;
  return self->source->apply_params (self->source_data, req, error);
}

static char *
dup_params_json (HanashiChat *self)
{
  if (self->source == NULL || self->source->dup_params_json == NULL)
    return NULL;
  return self->source->dup_params_json (self->source_data);
}

/* ---- the reply being written ------------------------------------------------------------ */

static gboolean
store_reply_text (HanashiChat     *self,
                  HanashiMessage  *message,
                  const char      *params,
                  gboolean         complete,
                  GError         **error)
{
  return hanashi_store_update_reply (self->store, hanashi_message_get_id (message),
                                     hanashi_message_get_text (message),
                                     hanashi_message_get_thinking (message),
                                     hanashi_message_get_thinking_seconds (message),
                                     hanashi_message_get_token_count (message),
                                     hanashi_message_get_generation_seconds (message),
                                     params, complete, error);
}

/* Finished replies whose last save failed are tried again until the database takes them,
 * so a passing problem (disk full, a lock) does not cost the answer. */
static void
save_unsaved (HanashiChat *self)
{
  if (self->store == NULL)
    return;
  for (guint i = 0; i < self->unsaved->len;)
    {
      HanashiMessage *message = g_ptr_array_index (self->unsaved, i);
      g_autoptr (GError) error = NULL;
      const char *params = g_object_get_data (G_OBJECT (message), "hanashi-params");

      if (store_reply_text (self, message, params, TRUE, &error) ||
          g_error_matches (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND))
        g_ptr_array_remove_index (self->unsaved, i);
      else
        i++;
    }
}

static gboolean
retry_unsaved (gpointer data)
{
  HanashiChat *self = data;

  save_unsaved (self);
  if (self->unsaved->len > 0)
    return G_SOURCE_CONTINUE;
  self->retry_source = 0;
  return G_SOURCE_REMOVE;
}

static void
commit_reply (HanashiChat *self,
              gboolean     complete)
{
  g_autoptr (GError) error = NULL;

  if (self->reply == NULL || self->store == NULL)
    return;
  self->reply_committed = g_get_monotonic_time ();
  if (store_reply_text (self, self->reply, complete ? self->reply_params : NULL, complete, &error))
    return;
  if (!self->reply_save_failed)
    report (self, _("Could not save the reply"), error);
  self->reply_save_failed = TRUE;
  if (complete)
    {
      g_object_set_data_full (G_OBJECT (self->reply), "hanashi-params", g_strdup (self->reply_params), g_free);
      g_ptr_array_add (self->unsaved, g_object_ref (self->reply));
      if (self->retry_source == 0)
        self->retry_source = g_timeout_add_seconds (1, retry_unsaved, self);
    }
}

static void
clear_reply (HanashiChat *self)
{
  g_clear_object (&self->reply);
  g_clear_pointer (&self->reply_params, g_free);
  self->reply_id = 0;
  g_cancellable_cancel (self->reply_count_cancellable);
  g_clear_object (&self->reply_count_cancellable);
  self->reply_prompt_tokens = -1;
  self->reply_n_tokens = 0;
  self->reply_first_token = self->reply_last_token = 0;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_GENERATING]);
}

/* The time @n_tokens took as the main loop saw them arrive, for replies the engine gives
 * no speed for (a stopped one, say): the pace between the first token and the last, the
 * first one's wait being the prompt's.  0 when there are too few to tell. */
static double
measured_generation_seconds (HanashiChat *self,
                             guint        n_tokens)
{
  gint64 span = self->reply_last_token - self->reply_first_token;

  if (self->reply_n_tokens < 2 || span <= 0)
    return 0;
  return (double) span / G_USEC_PER_SEC * n_tokens / (self->reply_n_tokens - 1);
}

/* Ends the current reply on our side: whatever arrives later for it is ignored. */
static void
finish_reply (HanashiChat *self)
{
  if (self->reply == NULL)
    return;
  /* A reply ended on our side (another action, another chat) gets no statistics from
   * the engine: what arrived here says how long and how fast it was. */
  if (hanashi_message_get_token_count (self->reply) == 0 && self->reply_n_tokens > 0)
    {
      double seconds = measured_generation_seconds (self, self->reply_n_tokens);
      hanashi_message_set_stats (self->reply, (int) self->reply_n_tokens, seconds);
      if (seconds > 0)
        self->last_speed = self->reply_n_tokens / seconds;
    }
  hanashi_message_end_output (self->reply);
  hanashi_message_set_complete (self->reply, TRUE);
  commit_reply (self, TRUE);
  /* the records once, with the finished reply (a lost record costs the shading only) */
  g_autoptr (GBytes) probs = hanashi_message_dup_token_probs_blob (self->reply);
  if (probs != NULL && self->store != NULL)
    hanashi_store_set_token_probs (self->store, hanashi_message_get_id (self->reply), probs, NULL);
  clear_reply (self);
  emit_changed (self);
}

static void
abandon_reply (HanashiChat *self)
{
  if (self->reply_id != 0)
    hanashi_engine_cancel (self->engine, self->reply_id);
  finish_reply (self);
}

/* Undo of a deletion lasts until the next change to the chat it was made in: after one,
 * bringing the old messages back would overwrite it. */
static void
forget_undo_of_open_chat (HanashiChat *self)
{
  if (self->undo_messages != NULL && self->undo_conversation == self->conversation_id)
    hanashi_chat_forget_undo (self);
}

static void
reply_prompt_counted (GObject      *source,
                      GAsyncResult *result,
                      gpointer      user_data)
{
  g_autoptr (HanashiChat) self = user_data;
  g_autoptr (GError) error = NULL;
  int n = hanashi_engine_count_tokens_finish (HANASHI_ENGINE (source), result, &error);

  /* Cancelled: that reply has ended, and the fields belong to the next one. */
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED) ||
      g_error_matches (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED))
    return;
  if (self->reply != NULL && n >= 0)
    {
      self->reply_prompt_tokens = n;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_REPLY_CONTEXT_TOKENS]);
    }
}

/* A reply that starts with given tokens (a branch of an answer at one token). */
typedef struct {
  const gint32 *tokens;
  guint         n_tokens;
  const char   *text;       /* what they write */
  GBytes       *records;    /* their HnTokenProbs */
} ReplyPrefix;

/* Starts a reply to the first @n_context messages of the thread, stored as a child of
 * @parent_id (and as an alternative of @alternative_of when that is not 0), starting with
 * @prefix when that is not NULL. */
static gboolean
start_reply (HanashiChat       *self,
             guint              n_context,
             gint64             parent_id,
             gint64             alternative_of,
             const ReplyPrefix *prefix,
             GError           **error)
{
  g_autoptr (HanashiGenerateRequest) req = build_request (self, n_context, NULL);
  g_autoptr (HanashiMessage) message = NULL;
  g_autoptr (GPtrArray) alternatives = NULL;
  gint64 id;

  if (!apply_params (self, req, error))
    return FALSE;
  id = hanashi_store_add_message (self->store, self->conversation_id, parent_id, alternative_of,
                                  "assistant", "", FALSE, error);
  if (id == 0)
    return FALSE;

  message = hanashi_message_new (id, "assistant", "");
  hanashi_message_set_parent_id (message, parent_id);
  hanashi_message_set_complete (message, FALSE);
  hanashi_message_begin_output (message, reply_start (self));
  if (prefix != NULL)
    {
      /* through the thinking splitter, as if it had streamed */
      hanashi_message_append_output (message, prefix->text);
      hanashi_message_append_token_probs (message, prefix->records);
      hanashi_generate_request_set_reply_prefix (req, prefix->tokens, prefix->n_tokens);
    }
  alternatives = hanashi_store_list_alternatives (self->store, id, NULL);
  if (alternatives != NULL)
    hanashi_message_set_alternatives (message, alternatives->len - 1, alternatives->len);
  truncate_thread (self, n_context);
  g_list_store_append (self->messages, message);

  self->reply = g_steal_pointer (&message);
  self->reply_params = dup_params_json (self);
  self->reply_committed = g_get_monotonic_time ();
  self->reply_save_failed = FALSE;
  hanashi_generate_request_set_probs_k (req, REPLY_PROBS_K);
  forget_undo_of_open_chat (self);
  /* Counted before the generation is queued (the engine thread takes commands in order),
   * so the context meter can add each token to it while the reply streams. */
  self->reply_count_cancellable = g_cancellable_new ();
  {
    g_autoptr (HanashiGenerateRequest) counted = build_request (self, n_context, NULL);
    hanashi_engine_count_tokens_async (self->engine, counted, self->reply_count_cancellable,
                                       reply_prompt_counted, g_object_ref (self));
  }
  self->reply_id = hanashi_engine_generate (self->engine, req);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_GENERATING]);
  g_signal_emit (self, signals[SIGNAL_REPLY_STARTED], 0);
  return TRUE;
}

static void
on_token (HanashiEngine *engine,
          guint          id,
          const char    *text,
          int            token_id,
          HanashiChat   *self)
{
  if (id == 0 || id != self->reply_id || self->reply == NULL)
    return;
  self->reply_last_token = g_get_monotonic_time ();
  if (self->reply_n_tokens == 0)
    self->reply_first_token = self->reply_last_token;
  /* One signal can carry several tokens the main loop was too busy to take one by one. */
  self->reply_n_tokens = hanashi_engine_get_streamed_tokens (engine, id);
  hanashi_message_append_output (self->reply, text);
  if (self->reply_prompt_tokens >= 0)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_REPLY_CONTEXT_TOKENS]);
  if (g_get_monotonic_time () - self->reply_committed >= COMMIT_INTERVAL_US)
    commit_reply (self, FALSE);
}

static void
on_token_probs (HanashiEngine *engine,
                guint          id,
                GBytes        *records,
                HanashiChat   *self)
{
  if (id == 0 || id != self->reply_id || self->reply == NULL)
    return;
  hanashi_message_append_token_probs (self->reply, records);
}

static void
on_generation_done (HanashiEngine          *engine,
                    guint                   id,
                    HanashiGenerationStats *stats,
                    HanashiChat            *self)
{
  double seconds;

  if (id == 0 || id != self->reply_id || self->reply == NULL)
    return;
  seconds = stats->gen_tokens_per_second > 0 ? stats->n_generated / stats->gen_tokens_per_second
                                             : measured_generation_seconds (self, stats->n_generated);
  hanashi_message_set_stats (self->reply, (int) stats->n_generated, seconds);
  self->last_speed = seconds > 0 ? stats->n_generated / seconds : 0;
  if (stats->grammar_truncated_steps > 0)
    notice (self, _("The grammar is too ambiguous to follow in full: some text it allows may have been refused."));
  finish_reply (self);
}

static void
on_engine_error (HanashiEngine *engine,
                 guint          id,
                 GError        *error,
                 HanashiChat   *self)
{
  if (id == 0 || id != self->reply_id || self->reply == NULL)
    return;
  /* A reply that never started leaves nothing worth keeping; the thread is read again so
   * a regenerated answer's earlier version comes back. */
  if (*hanashi_message_get_text (self->reply) == '\0' && *hanashi_message_get_thinking (self->reply) == '\0')
    {
      if (self->store != NULL)
        hanashi_store_delete_message (self->store, hanashi_message_get_id (self->reply), NULL);
      clear_reply (self);
      reload_thread (self);
      return;
    }
  /* What arrived is kept, marked as cut off (a server that failed or went away midway). */
  hanashi_message_end_output (self->reply);
  hanashi_message_set_complete (self->reply, FALSE);
  commit_reply (self, FALSE);
  clear_reply (self);
  emit_changed (self);
}

/* The speed of another model's replies says nothing about this one. */
static void
on_model_loaded (HanashiEngine    *engine,
                 HanashiModelInfo *info,
                 HanashiChat      *self)
{
  self->last_speed = 0;
}

/* ---- conversations ------------------------------------------------------------------------ */

static char *
make_title (const char *text)
{
  g_autofree char *first_line = NULL;
  const char *end = strchr (text, '\n');
  g_autofree char *stripped = NULL;

  /* The first line as plain text: "**Bold** question" is titled "Bold question".  A first
   * line with no text of its own (a code fence) gives way to the whole message. */
  first_line = end ? g_strndup (text, end - text) : g_strdup (text);
  stripped = hanashi_conversation_title_strip_markdown (first_line);
  if (!*stripped)
    {
      g_free (stripped);
      stripped = hanashi_conversation_title_strip_markdown (text);
    }
  if (g_utf8_strlen (stripped, -1) <= TITLE_MAX_CHARS)
    return g_steal_pointer (&stripped);
  g_autofree char *cut = g_utf8_substring (stripped, 0, TITLE_MAX_CHARS - 1);
  return g_strconcat (g_strchomp (cut), "…", NULL);
}

static gboolean
ensure_conversation (HanashiChat  *self,
                     const char   *first_text,
                     GError      **error)
{
  g_autofree char *title = NULL;
  g_autofree char *params = NULL;
  gint64 id;

  if (self->conversation_id != 0)
    return TRUE;
  title = make_title (first_text);
  id = hanashi_store_create_conversation (self->store, title, error);
  if (id == 0)
    return FALSE;
  set_conversation (self, id, title);
  params = dup_params_json (self);
  /* Settings chosen before the first message belong to the new conversation. */
  if (!hanashi_store_set_system_prompt (self->store, id, current_system_prompt (self), error) ||
      !hanashi_store_set_conversation_params (self->store, id, params, error) ||
      !hanashi_store_set_conversation_thinking (self->store, id, current_thinking (self), error))
    return FALSE;
  return TRUE;
}

/* The speed of the visible thread's latest reply that has one: each chat shows its own. */
static double
latest_reply_speed (HanashiChat *self)
{
  for (guint i = g_list_model_get_n_items (G_LIST_MODEL (self->messages)); i > 0; i--)
    {
      g_autoptr (HanashiMessage) m = g_list_model_get_item (G_LIST_MODEL (self->messages), i - 1);
      if (!hanashi_message_is_user (m))
        return hanashi_message_get_tokens_per_second (m);
    }
  return 0;
}

gboolean
hanashi_chat_load (HanashiChat  *self,
                   gint64        conversation_id,
                   GError      **error)
{
  g_autoptr (HanashiStoredConversation) conversation = NULL;
  gboolean ok = TRUE;

  g_return_val_if_fail (HANASHI_IS_CHAT (self), FALSE);

  abandon_reply (self);
  set_editing (self, 0);
  if (conversation_id != 0 && self->store != NULL)
    {
      conversation = hanashi_store_dup_conversation (self->store, conversation_id, error);
      ok = conversation != NULL;
    }
  if (conversation == NULL)
    conversation_id = 0;
  g_free (self->system_prompt);
  self->system_prompt = g_strdup (conversation ? conversation->system_prompt : "");
  g_free (self->params_json);
  self->params_json = conversation ? g_strdup (conversation->params_json) : NULL;
  self->thinking = conversation == NULL || !conversation->thinking_off;
  set_conversation (self, conversation_id, conversation ? conversation->title : "");
  g_list_store_remove_all (self->messages);
  reload_thread (self);
  self->last_speed = latest_reply_speed (self);
  return ok;
}

gboolean
hanashi_chat_set_system_prompt (HanashiChat  *self,
                                const char   *prompt,
                                GError      **error)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), FALSE);

  g_free (self->system_prompt);
  self->system_prompt = g_strdup (prompt ? prompt : "");
  if (self->conversation_id == 0 || self->store == NULL)
    return TRUE;
  return hanashi_store_set_system_prompt (self->store, self->conversation_id, self->system_prompt, error);
}

gboolean
hanashi_chat_set_thinking (HanashiChat  *self,
                           gboolean      thinking,
                           GError      **error)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), FALSE);

  self->thinking = !!thinking;
  if (self->conversation_id == 0 || self->store == NULL)
    return TRUE;
  return hanashi_store_set_conversation_thinking (self->store, self->conversation_id, self->thinking, error);
}

gboolean
hanashi_chat_save_params (HanashiChat  *self,
                          GError      **error)
{
  g_autofree char *json = NULL;

  g_return_val_if_fail (HANASHI_IS_CHAT (self), FALSE);

  if (self->conversation_id == 0 || self->store == NULL)
    return TRUE;
  json = dup_params_json (self);
  return hanashi_store_set_conversation_params (self->store, self->conversation_id, json, error);
}

/* ---- sending -------------------------------------------------------------------------------- */

gboolean
hanashi_chat_send (HanashiChat  *self,
                   const char   *text,
                   GError      **error)
{
  g_autoptr (HanashiGenerateRequest) check = NULL;
  g_autoptr (HanashiMessage) message = NULL;
  g_autoptr (GPtrArray) alternatives = NULL;
  g_autoptr (GError) local_error = NULL;
  guint n_context;
  gint64 parent_id;
  gint64 alternative_of = 0;
  gint64 id;

  g_return_val_if_fail (HANASHI_IS_CHAT (self), FALSE);
  g_return_val_if_fail (text != NULL, FALSE);

  g_autofree char *trimmed = g_strstrip (g_strdup (text));
  if (*trimmed == '\0')
    return FALSE;
  if (self->reply != NULL || hanashi_engine_get_model_info (self->engine) == NULL)
    return FALSE;
  if (self->store == NULL)
    {
      g_set_error_literal (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_FAILED,
                           _("Messages cannot be saved: the conversation database could not be opened."));
      return FALSE;
    }

  n_context = g_list_model_get_n_items (G_LIST_MODEL (self->messages));
  parent_id = last_message_id (self);
  if (self->editing_id != 0)
    {
      g_autoptr (HanashiStoredMessage) edited = hanashi_store_dup_message (self->store, self->editing_id, NULL);
      int index;
      if (edited != NULL && find_message (self, self->editing_id, &index) != NULL)
        {
          n_context = (guint) index;
          parent_id = edited->parent_id;
          alternative_of = edited->id;
        }
    }

  /* Refuse before storing anything when the panel's grammar cannot be used. */
  check = build_request (self, n_context, text);
  if (!apply_params (self, check, error))
    return FALSE;

  /* Named after the first line that has words in it. */
  if (!ensure_conversation (self, trimmed, error))
    return FALSE;
  id = hanashi_store_add_message (self->store, self->conversation_id, parent_id, alternative_of,
                                  "user", text, TRUE, error);
  if (id == 0)
    return FALSE;

  set_editing (self, 0);
  forget_undo_of_open_chat (self);
  emit_changed (self);
  message = hanashi_message_new (id, "user", text);
  hanashi_message_set_parent_id (message, parent_id);
  if (alternative_of != 0 && (alternatives = hanashi_store_list_alternatives (self->store, id, NULL)) != NULL)
    hanashi_message_set_alternatives (message, alternatives->len - 1, alternatives->len);
  truncate_thread (self, n_context);
  g_list_store_append (self->messages, message);

  if (!start_reply (self, n_context + 1, id, 0, NULL, &local_error))
    report (self, _("Could not start the reply"), local_error);
  return TRUE;
}

void
hanashi_chat_stop (HanashiChat *self)
{
  g_return_if_fail (HANASHI_IS_CHAT (self));

  /* The engine still reports "generation-done" with the stats of the partial reply. */
  if (self->reply_id != 0)
    hanashi_engine_cancel (self->engine, self->reply_id);
}

void
hanashi_chat_end_reply (HanashiChat *self)
{
  g_return_if_fail (HANASHI_IS_CHAT (self));
  abandon_reply (self);
}

/* ---- message actions ---------------------------------------------------------------------- */

/* The message @id of the thread, after ending a reply being written unless that reply is
 * the message itself (changing the thread under it would attach it to the wrong place). */
static HanashiMessage *
prepare_action (HanashiChat *self,
                gint64       id,
                gboolean     allowed_on_reply,
                int         *index)
{
  if (self->store == NULL)
    return NULL;
  if (self->reply != NULL && hanashi_message_get_id (self->reply) == id && !allowed_on_reply)
    return NULL;
  abandon_reply (self);
  return find_message (self, id, index);
}

void
hanashi_chat_begin_edit (HanashiChat *self,
                         gint64       message_id)
{
  g_return_if_fail (HANASHI_IS_CHAT (self));

  if (prepare_action (self, message_id, FALSE, NULL) != NULL)
    set_editing (self, message_id);
}

void
hanashi_chat_cancel_edit (HanashiChat *self)
{
  g_return_if_fail (HANASHI_IS_CHAT (self));
  set_editing (self, 0);
}

void
hanashi_chat_regenerate (HanashiChat *self,
                         gint64       message_id)
{
  g_autoptr (GError) error = NULL;
  HanashiMessage *message;
  int index;

  g_return_if_fail (HANASHI_IS_CHAT (self));

  message = prepare_action (self, message_id, FALSE, &index);
  if (message == NULL)
    return;
  if (hanashi_engine_get_model_info (self->engine) == NULL)
    {
      notice (self, _("No model is loaded."));
      return;
    }
  if (!start_reply (self, (guint) index, hanashi_message_get_parent_id (message), message_id, NULL, &error))
    report (self, _("Could not start the reply"), error);
}

/* The answer @message's tokens as the loaded model writes them (a control token: NULL),
 * checked against its text: NULL, with a notice, when they do not spell it (another model
 * wrote it). */
static GPtrArray *
answer_pieces (HanashiChat *self, HanashiMessage *message, GArray *records)
{
  /* The texts come from the loaded model: only the one that wrote the answer spells its
   * tokens back into its text, and only its ids mean the same tokens. */
  g_autoptr (GPtrArray) pieces = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  for (guint i = 0; i < records->len; i++)
    {
      gboolean is_control = FALSE;
      GBytes *bytes = hanashi_engine_dup_token_text (self->engine, g_array_index (records, HnTokenProbs, i).token,
                                                     &is_control);
      if (bytes != NULL && is_control)
        g_clear_pointer (&bytes, g_bytes_unref);
      else if (bytes == NULL)
        bytes = g_bytes_new (NULL, 0);
      g_ptr_array_add (pieces, bytes);
    }
  g_autoptr (GArray) spans = hanashi_token_spans_map (hanashi_message_get_text (message),
                                                      (GBytes *const *) pieces->pdata, pieces->len);
  if (spans == NULL)
    {
      notice (self, _("This answer can be continued from a token only with the model that wrote it."));
      return NULL;
    }
  return g_steal_pointer (&pieces);
}

/* @message (an answer of the thread shown, or NULL) and its token @token_index: its
 * records; NULL when there is no such token or no model to continue it with (a notice says
 * so). */
static GArray *
token_records (HanashiChat    *self,
               HanashiMessage *message,
               guint           token_index)
{
  if (message == NULL || hanashi_message_is_user (message))
    return NULL;
  if (hanashi_engine_get_model_info (self->engine) == NULL)
    {
      notice (self, _("No model is loaded."));
      return NULL;
    }
  GArray *records = hanashi_message_get_token_probs (message);
  if (records == NULL || token_index >= records->len)
    return NULL;
  return records;
}

void
hanashi_chat_branch (HanashiChat *self,
                     gint64       message_id,
                     guint        token_index,
                     gint32       candidate)
{
  g_autoptr (GError) error = NULL;
  GArray *records = NULL;
  int index;

  g_return_if_fail (HANASHI_IS_CHAT (self));

  HanashiMessage *message = prepare_action (self, message_id, FALSE, &index);
  if ((records = token_records (self, message, token_index)) == NULL)
    return;
  HnTokenProbs chosen = g_array_index (records, HnTokenProbs, token_index);
  gboolean listed = FALSE;
  for (guint i = 0; i < chosen.n_candidates && !listed; i++)
    if (chosen.candidates[i].id == candidate)
      {
        /* the same distribution, another choice */
        chosen.token = candidate;
        chosen.logprob = chosen.candidates[i].logprob;
        chosen.p = chosen.candidates[i].p;
        listed = TRUE;
      }
  if (!listed)
    return;
  g_autoptr (GPtrArray) pieces = answer_pieces (self, message, records);
  if (pieces == NULL)
    return;

  g_autoptr (GArray) tokens = g_array_sized_new (FALSE, FALSE, sizeof (gint32), token_index + 1);
  g_autoptr (GByteArray) written = g_byte_array_new ();
  for (guint i = 0; i <= token_index; i++)
    {
      GBytes *piece = i < token_index ? g_ptr_array_index (pieces, i) : NULL;
      g_autoptr (GBytes) chosen_piece = NULL;
      if (i == token_index)
        {
          gboolean is_control = FALSE;
          chosen_piece = hanashi_engine_dup_token_text (self->engine, candidate, &is_control);
          piece = is_control ? NULL : chosen_piece;
        }
      gint32 token = i < token_index ? g_array_index (records, HnTokenProbs, i).token : candidate;
      g_array_append_val (tokens, token);
      if (piece != NULL)
        g_byte_array_append (written, g_bytes_get_data (piece, NULL), (guint) g_bytes_get_size (piece));
    }
  /* a character cut by the branch is shown as a replacement character */
  g_autofree char *text = g_utf8_make_valid ((const char *) written->data, (gssize) written->len);
  GByteArray *all = g_byte_array_new ();
  g_byte_array_append (all, (const guint8 *) records->data, token_index * (guint) sizeof (HnTokenProbs));
  g_byte_array_append (all, (const guint8 *) &chosen, sizeof chosen);
  g_autoptr (GBytes) prefix_records = g_byte_array_free_to_bytes (all);
  ReplyPrefix prefix = { (const gint32 *) (void *) tokens->data, tokens->len, text, prefix_records };
  if (!start_reply (self, (guint) index, hanashi_message_get_parent_id (message), message_id, &prefix, &error))
    report (self, _("Could not start the reply"), error);
}

HanashiGenerateRequest *
hanashi_chat_build_token_request (HanashiChat *self,
                                  gint64       message_id,
                                  guint        token_index,
                                  gint32      *chosen)
{
  GArray *records = NULL;
  int index;

  g_return_val_if_fail (HANASHI_IS_CHAT (self), NULL);

  /* looking at an answer leaves a reply being written alone */
  HanashiMessage *message = self->store != NULL ? find_message (self, message_id, &index) : NULL;
  if ((records = token_records (self, message, token_index)) == NULL)
    return NULL;
  g_autoptr (GPtrArray) pieces = answer_pieces (self, message, records);
  if (pieces == NULL)
    return NULL;
  g_autoptr (GArray) tokens = g_array_sized_new (FALSE, FALSE, sizeof (gint32), token_index);
  for (guint i = 0; i < token_index; i++)
    g_array_append_val (tokens, g_array_index (records, HnTokenProbs, i).token);
  HanashiGenerateRequest *req = build_request (self, (guint) index, NULL);
  hanashi_generate_request_set_reply_prefix (req, (const gint32 *) (void *) tokens->data, tokens->len);
  if (chosen != NULL)
    *chosen = g_array_index (records, HnTokenProbs, token_index).token;
  return req;
}

void
hanashi_chat_switch_alternative (HanashiChat *self,
                                 gint64       message_id,
                                 int          delta)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) alternatives = NULL;
  int index = -1;

  g_return_if_fail (HANASHI_IS_CHAT (self));

  if (prepare_action (self, message_id, FALSE, NULL) == NULL)
    return;
  alternatives = hanashi_store_list_alternatives (self->store, message_id, &error);
  if (alternatives == NULL)
    {
      report (self, _("Could not switch versions"), error);
      return;
    }
  for (guint i = 0; i < alternatives->len; i++)
    if (((HanashiStoredMessage *) g_ptr_array_index (alternatives, i))->id == message_id)
      index = (int) i;
  index += delta;
  if (index < 0 || index >= (int) alternatives->len)
    return;
  if (!hanashi_store_show_alternative (self->store, ((HanashiStoredMessage *) g_ptr_array_index (alternatives, index))->id, &error))
    {
      report (self, _("Could not switch versions"), error);
      return;
    }
  forget_undo_of_open_chat (self);
  reload_thread (self);
}

static GArray *
message_ids (GPtrArray *messages)
{
  GArray *ids = g_array_sized_new (FALSE, FALSE, sizeof (gint64), messages->len);
  for (guint i = 0; i < messages->len; i++)
    g_array_append_val (ids, ((HanashiStoredMessage *) g_ptr_array_index (messages, i))->id);
  return ids;
}

static gboolean
same_ids (GArray *a, GArray *b)
{
  return a->len == b->len && memcmp (a->data, b->data, a->len * sizeof (gint64)) == 0;
}

gboolean
hanashi_chat_get_can_undo (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), FALSE);
  return self->undo_messages != NULL;
}

gint64
hanashi_chat_get_undo_conversation_id (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), 0);
  return self->undo_messages != NULL ? self->undo_conversation : 0;
}

void
hanashi_chat_forget_undo (HanashiChat *self)
{
  g_return_if_fail (HANASHI_IS_CHAT (self));

  if (self->undo_messages == NULL)
    return;
  g_clear_pointer (&self->undo_messages, g_ptr_array_unref);
  g_clear_pointer (&self->undo_after_ids, g_array_unref);
  self->undo_conversation = 0;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CAN_UNDO]);
}

void
hanashi_chat_undo_delete (HanashiChat *self)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) now = NULL;
  g_autoptr (GArray) now_ids = NULL;

  g_return_if_fail (HANASHI_IS_CHAT (self));

  if (self->undo_messages == NULL || self->store == NULL)
    return;
  now = hanashi_store_list_messages (self->store, self->undo_conversation, &error);
  if (now == NULL)
    {
      report (self, _("Could not bring the message back"), error);
      return;
    }
  now_ids = message_ids (now);
  if (!same_ids (now_ids, self->undo_after_ids))
    {
      notice (self, _("The chat has changed since, so the message cannot be brought back."));
      hanashi_chat_forget_undo (self);
      return;
    }
  if (!hanashi_store_replace_messages (self->store, self->undo_conversation, self->undo_messages, &error))
    report (self, _("Could not bring the message back"), error);
  else if (self->undo_conversation == self->conversation_id)
    reload_thread (self);
  hanashi_chat_forget_undo (self);
  emit_changed (self);
}

static void
remember_undo (HanashiChat *self,
               GPtrArray   *before)
{
  g_autoptr (GPtrArray) after = hanashi_store_list_messages (self->store, self->conversation_id, NULL);

  if (after == NULL)
    return;   /* the deletion stands; only Undo is not offered */
  g_clear_pointer (&self->undo_messages, g_ptr_array_unref);
  g_clear_pointer (&self->undo_after_ids, g_array_unref);
  self->undo_messages = g_ptr_array_ref (before);
  self->undo_after_ids = message_ids (after);
  self->undo_conversation = self->conversation_id;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CAN_UNDO]);
  g_signal_emit (self, signals[SIGNAL_MESSAGE_DELETED], 0);
}

void
hanashi_chat_delete_message (HanashiChat *self,
                             gint64       id)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) alternatives = NULL;
  g_autoptr (GPtrArray) before = NULL;
  HanashiMessage *message;
  gint64 parent_id;
  gboolean ok;

  g_return_if_fail (HANASHI_IS_CHAT (self));

  message = prepare_action (self, id, TRUE, NULL);
  if (message == NULL)
    return;
  parent_id = hanashi_message_get_parent_id (message);
  before = hanashi_store_list_messages (self->store, self->conversation_id, &error);
  if (before == NULL)
    {
      report (self, _("Could not delete the message"), error);
      return;
    }
  alternatives = hanashi_store_list_alternatives (self->store, id, &error);
  if (alternatives == NULL)
    {
      report (self, _("Could not delete the message"), error);
      return;
    }
  if (alternatives->len > 1)
    {
      /* The replies that followed answer this version only: they go with it, and the
       * neighbouring version is shown instead. */
      gint64 neighbour = 0;
      for (guint i = 0; i < alternatives->len; i++)
        {
          HanashiStoredMessage *m = g_ptr_array_index (alternatives, i);
          if (m->id == id)
            {
              HanashiStoredMessage *n = g_ptr_array_index (alternatives, i > 0 ? i - 1 : i + 1);
              neighbour = n->id;
              break;
            }
        }
      ok = hanashi_store_delete_branch (self->store, id, &error) &&
           (neighbour == 0 || hanashi_store_show_alternative (self->store, neighbour, &error));
    }
  else
    {
      /* A single message: the thread closes up around it. */
      ok = hanashi_store_reparent_children (self->store, id, parent_id, self->conversation_id, &error) &&
           hanashi_store_delete_message (self->store, id, &error);
    }
  if (!ok)
    report (self, _("Could not delete the message"), error);
  else
    remember_undo (self, before);
  reload_thread (self);
  emit_changed (self);
}

/* ---- accessors ------------------------------------------------------------------------------ */

HanashiEngine *
hanashi_chat_get_engine (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), NULL);
  return self->engine;
}

void
hanashi_chat_set_store (HanashiChat  *self,
                        HanashiStore *store)
{
  g_return_if_fail (HANASHI_IS_CHAT (self));

  g_set_object (&self->store, store);
}

HanashiStore *
hanashi_chat_get_store (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), NULL);
  return self->store;
}

void
hanashi_chat_set_settings_source (HanashiChat                     *self,
                                  const HanashiChatSettingsSource *source,
                                  gpointer                         user_data)
{
  g_return_if_fail (HANASHI_IS_CHAT (self));
  self->source = source;
  self->source_data = user_data;
}

GListModel *
hanashi_chat_get_messages (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), NULL);
  return G_LIST_MODEL (self->messages);
}

gint64
hanashi_chat_get_conversation_id (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), 0);
  return self->conversation_id;
}

const char *
hanashi_chat_get_title (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), NULL);
  return self->title;
}

const char *
hanashi_chat_get_system_prompt (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), NULL);
  return self->system_prompt;
}

gboolean
hanashi_chat_get_thinking (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), TRUE);
  return self->thinking;
}

const char *
hanashi_chat_get_params_json (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), NULL);
  return self->params_json;
}

gboolean
hanashi_chat_get_generating (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), FALSE);
  return self->reply != NULL;
}

guint
hanashi_chat_get_request_id (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), 0);
  return self->reply_id;
}

gint64
hanashi_chat_get_editing_id (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), 0);
  return self->editing_id;
}

double
hanashi_chat_get_last_speed (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), 0);
  return self->last_speed;
}

int
hanashi_chat_get_reply_context_tokens (HanashiChat *self)
{
  g_return_val_if_fail (HANASHI_IS_CHAT (self), -1);
  if (self->reply == NULL || self->reply_prompt_tokens < 0)
    return -1;
  return self->reply_prompt_tokens + (int) self->reply_n_tokens;
}

/* ---- the object ------------------------------------------------------------------------------ */

HanashiChat *
hanashi_chat_new (HanashiEngine *engine)
{
  HanashiChat *self;

  g_return_val_if_fail (HANASHI_IS_ENGINE (engine), NULL);

  self = g_object_new (HANASHI_TYPE_CHAT, NULL);
  self->engine = g_object_ref (engine);
  g_signal_connect (engine, "token", G_CALLBACK (on_token), self);
  g_signal_connect (engine, "token-probs", G_CALLBACK (on_token_probs), self);
  g_signal_connect (engine, "generation-done", G_CALLBACK (on_generation_done), self);
  g_signal_connect (engine, "error", G_CALLBACK (on_engine_error), self);
  g_signal_connect (engine, "model-loaded", G_CALLBACK (on_model_loaded), self);
  return self;
}

static void
hanashi_chat_get_property (GObject    *object,
                           guint       prop_id,
                           GValue     *value,
                           GParamSpec *pspec)
{
  HanashiChat *self = HANASHI_CHAT (object);

  switch (prop_id)
    {
    case PROP_CONVERSATION_ID:
      g_value_set_int64 (value, self->conversation_id);
      break;
    case PROP_TITLE:
      g_value_set_string (value, self->title);
      break;
    case PROP_GENERATING:
      g_value_set_boolean (value, self->reply != NULL);
      break;
    case PROP_EDITING_ID:
      g_value_set_int64 (value, self->editing_id);
      break;
    case PROP_CAN_UNDO:
      g_value_set_boolean (value, self->undo_messages != NULL);
      break;
    case PROP_REPLY_CONTEXT_TOKENS:
      g_value_set_int (value, hanashi_chat_get_reply_context_tokens (self));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hanashi_chat_dispose (GObject *object)
{
  HanashiChat *self = HANASHI_CHAT (object);

  /* What was written of a reply is kept, and a last try for answers the database refused. */
  if (self->reply != NULL)
    {
      hanashi_message_set_complete (self->reply, TRUE);
      commit_reply (self, TRUE);
      g_clear_object (&self->reply);
    }
  /* The engine belongs to the application and outlives a closed window's chat. */
  if (self->reply_id != 0 && self->engine != NULL)
    hanashi_engine_cancel (self->engine, self->reply_id);
  self->reply_id = 0;
  g_clear_handle_id (&self->retry_source, g_source_remove);
  if (self->unsaved != NULL)
    save_unsaved (self);
  if (self->engine != NULL)
    g_signal_handlers_disconnect_by_data (self->engine, self);
  g_clear_object (&self->engine);
  g_clear_object (&self->store);
  g_clear_pointer (&self->unsaved, g_ptr_array_unref);
  g_clear_pointer (&self->undo_messages, g_ptr_array_unref);
  g_clear_pointer (&self->undo_after_ids, g_array_unref);
  g_clear_pointer (&self->reply_params, g_free);
  g_clear_object (&self->reply_count_cancellable);
  G_OBJECT_CLASS (hanashi_chat_parent_class)->dispose (object);
}

static void
hanashi_chat_finalize (GObject *object)
{
  HanashiChat *self = HANASHI_CHAT (object);

  g_clear_object (&self->messages);
  g_free (self->title);
  g_free (self->system_prompt);
  g_free (self->params_json);
  G_OBJECT_CLASS (hanashi_chat_parent_class)->finalize (object);
}

static void
hanashi_chat_class_init (HanashiChatClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->get_property = hanashi_chat_get_property;
  object_class->dispose = hanashi_chat_dispose;
  object_class->finalize = hanashi_chat_finalize;

  properties[PROP_CONVERSATION_ID] = g_param_spec_int64 ("conversation-id", NULL, NULL, 0, G_MAXINT64, 0,
                                                         G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_TITLE] = g_param_spec_string ("title", NULL, NULL, "",
                                                G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_GENERATING] = g_param_spec_boolean ("generating", NULL, NULL, FALSE,
                                                      G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_EDITING_ID] = g_param_spec_int64 ("editing-id", NULL, NULL, 0, G_MAXINT64, 0,
                                                    G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_CAN_UNDO] = g_param_spec_boolean ("can-undo", NULL, NULL, FALSE,
                                                    G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_REPLY_CONTEXT_TOKENS] = g_param_spec_int ("reply-context-tokens", NULL, NULL, -1, G_MAXINT, -1,
                                                            G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  signals[SIGNAL_CHANGED] = g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                          0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_REPLY_STARTED] = g_signal_new ("reply-started", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                                0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_MESSAGE_DELETED] = g_signal_new ("message-deleted", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                                  0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_PROBLEM] = g_signal_new ("problem", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                          0, NULL, NULL, NULL, G_TYPE_NONE, 2,
                                          G_TYPE_STRING, G_TYPE_ERROR | G_SIGNAL_TYPE_STATIC_SCOPE);
  signals[SIGNAL_NOTICE] = g_signal_new ("notice", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                         0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
hanashi_chat_init (HanashiChat *self)
{
  self->messages = g_list_store_new (HANASHI_TYPE_MESSAGE);
  self->unsaved = g_ptr_array_new_with_free_func (g_object_unref);
  self->title = g_strdup ("");
  self->system_prompt = g_strdup ("");
  self->thinking = TRUE;
  self->reply_prompt_tokens = -1;
}
