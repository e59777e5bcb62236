/* hanashi-window.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-window"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-chat-view.h"
#include "hanashi-composer.h"
#include "hanashi-message.h"
#include "hanashi-models-dialog.h"
#include "hanashi-params-panel.h"
#include "hanashi-sidebar.h"
#include "hanashi-store-recovery.h"
#include "hanashi-window.h"
#include "hanashi-engine-errors.h"

/* A streaming reply is written to the database at most this often (µs). */
#define COMMIT_INTERVAL_US (250 * 1000)
#define MAX_RECENT_MODELS 8
#define TITLE_MAX_CHARS 40
/* Another program's lock on the database goes away by itself: try again this often (s). */
#define STORE_RETRY_INTERVAL_S 3

struct _HanashiWindow
{
  AdwApplicationWindow parent_instance;

  /* Template widgets */
  AdwToastOverlay    *toast_overlay;
  AdwLeaflet         *leaflet;
  HanashiSidebar     *sidebar;
  GtkWidget          *chat_pane;
  GtkLabel           *model_label;
  GtkWidget          *status_box;
  GtkLevelBar        *context_bar;
  GtkLabel           *status_label;
  GtkProgressBar     *load_progress;
  AdwFlap            *flap;
  GtkStack           *main_stack;
  AdwStatusPage      *empty_page;
  GtkWidget          *recent_group;
  GtkListBox         *recent_list;
  HanashiChatView    *chat_view;
  HanashiComposer    *composer;
  HanashiParamsPanel *params_panel;

  /* Owned */
  GSettings          *settings;
  HanashiStore       *store;
  char               *store_path;
  GError             *store_problem;     /* why the store is missing or read-only, or NULL */
  HanashiStoreBanner *store_banner;
  GCancellable       *store_cancellable; /* the reopen running on a worker thread */
  guint               store_retry_source;
  gboolean            store_fresh_offer_pending; /* damaged: ask once the window is shown */
  HanashiEngine      *engine;
  GListStore         *messages;
  GCancellable       *count_cancellable;
  GCancellable       *load_cancellable;
  HanashiMessage     *reply;             /* the message being generated */
  char               *reply_params;      /* the parameters it was generated with */

  gint64              conversation_id;   /* 0: a new chat not stored yet */
  gint64              editing_id;        /* the user message being edited, or 0 */
  guint               reply_id;          /* the engine's request id, 0 when idle */
  gint64              reply_committed;   /* monotonic time of the last commit */
  gboolean            reply_save_failed; /* said once per reply, not every 250 ms */
  GPtrArray          *unsaved;           /* finished replies waiting to be saved */
  guint               retry_source;
  guint               draft_count_source; /* recount the context shortly after typing */
  int                 context_used;      /* -1 while unknown */
  double              last_speed;

  /* Undo of the last message deletion: the conversation's messages before it, and the ids
   * after it, so that Undo never overwrites what happened since. */
  GPtrArray          *undo_messages;
  GArray             *undo_after_ids;
  gint64              undo_conversation;
  AdwToast           *undo_toast;        /* weak; the toast that offers it, while shown */
};

G_DEFINE_FINAL_TYPE (HanashiWindow, hanashi_window, ADW_TYPE_APPLICATION_WINDOW)

enum {
  PROP_0,
  PROP_PANEL_REVEALED,
  PROP_CONVERSATION_ID,
  N_PROPS
};

enum {
  SIGNAL_CONVERSATIONS_CHANGED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static GParamSpec *properties[N_PROPS];

static void update_actions (HanashiWindow *self);
static void update_context_meter (HanashiWindow *self);

HanashiWindow *
hanashi_window_new (HanashiApplication *application)
{
  return g_object_new (HANASHI_TYPE_WINDOW, "application", application, NULL);
}

HanashiStore *
hanashi_window_get_store (HanashiWindow *self)
{
  g_return_val_if_fail (HANASHI_IS_WINDOW (self), NULL);
  return self->store;
}

HanashiEngine *
hanashi_window_get_engine (HanashiWindow *self)
{
  g_return_val_if_fail (HANASHI_IS_WINDOW (self), NULL);
  return self->engine;
}

GListModel *
hanashi_window_get_messages (HanashiWindow *self)
{
  g_return_val_if_fail (HANASHI_IS_WINDOW (self), NULL);
  return G_LIST_MODEL (self->messages);
}

gint64
hanashi_window_get_conversation_id (HanashiWindow *self)
{
  g_return_val_if_fail (HANASHI_IS_WINDOW (self), 0);
  return self->conversation_id;
}

void
hanashi_window_add_toast (HanashiWindow *self,
                          const char    *message)
{
  g_return_if_fail (HANASHI_IS_WINDOW (self));
  adw_toast_overlay_add_toast (self->toast_overlay, adw_toast_new (message));
}

static void
toast_error (HanashiWindow *self,
             const char    *what,
             const GError  *error)
{
  /* The store's errors are whole sentences already ("The disk is full, so …"). */
  if (error->domain == HANASHI_STORE_ERROR)
    {
      hanashi_window_add_toast (self, error->message);
      return;
    }
  /* Translators: the first %s says what failed, the second why */
  g_autofree char *text = g_strdup_printf (_("%s: %s"), what, error->message);
  hanashi_window_add_toast (self, text);
}

/* ---- the database: locked, read-only or damaged ----------------------------------------- */

static void reopen_store_async (HanashiWindow *self);

static gboolean
retry_store_timeout (gpointer data)
{
  HanashiWindow *self = data;
  self->store_retry_source = 0;
  reopen_store_async (self);
  return G_SOURCE_REMOVE;
}

/* Takes @problem (NULL: the store is writable) and shows it.  A lock held by another
 * program is retried on its own; the other problems wait for the user (Try Again, sending,
 * Start Fresh). */
static void
apply_store_problem (HanashiWindow *self,
                     GError        *problem)
{
  g_clear_error (&self->store_problem);
  self->store_problem = problem;
  hanashi_store_banner_set_problem (self->store_banner, problem);
  if (g_error_matches (problem, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_BUSY) &&
      self->store_retry_source == 0 && self->store_cancellable == NULL)
    self->store_retry_source = g_timeout_add_seconds (STORE_RETRY_INTERVAL_S, retry_store_timeout, self);
  self->store_fresh_offer_pending =
    self->store == NULL && g_error_matches (problem, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_CORRUPT);
}

/* A store opened again replaces the one shown (same file, so the open chat stays); the
 * history appears if there was none. */
static void
replace_store (HanashiWindow *self,
               HanashiStore  *store,
               GError        *problem)
{
  gboolean had_store = self->store != NULL;

  if (store == NULL && self->store != NULL && problem != NULL)
    {
      /* Still not writable: keep showing what could be read. */
      g_error_free (problem);
      return;
    }
  g_set_object (&self->store, store);
  apply_store_problem (self, problem);
  hanashi_sidebar_set_store (self->sidebar, self->store);
  if (!had_store && self->store != NULL && self->conversation_id == 0 &&
      g_list_model_get_n_items (G_LIST_MODEL (self->messages)) == 0)
    {
      g_autoptr (GPtrArray) conversations = hanashi_store_list_conversations (self->store, NULL, NULL);
      if (conversations != NULL && conversations->len > 0)
        hanashi_window_load_conversation (self, ((HanashiStoredConversation *) g_ptr_array_index (conversations, 0))->id);
    }
}

static void
store_reopened (GObject      *source,
                GAsyncResult *result,
                gpointer      user_data)
{
  g_autoptr (HanashiWindow) self = user_data;
  GError *problem = NULL;
  g_autoptr (HanashiStore) store = hanashi_store_open_best_finish (result, &problem);

  if (g_error_matches (problem, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      g_error_free (problem);
      return;
    }
  g_clear_object (&self->store_cancellable);
  replace_store (self, store, problem);
}

/* On a worker thread: a locked database makes SQLite wait up to its busy timeout. */
static void
reopen_store_async (HanashiWindow *self)
{
  if (self->store_cancellable != NULL)
    return;
  g_clear_handle_id (&self->store_retry_source, g_source_remove);
  self->store_cancellable = g_cancellable_new ();
  hanashi_store_open_best_async (self->store_path, self->store_cancellable, store_reopened, g_object_ref (self));
}

/* Closes what is open and opens the database again, here and now.  The read-only
 * connection goes first: while it is open, SQLite hands a new connection to the same file
 * the read-only descriptor it keeps for its locks, and the new one is read-only too. */
static void
reopen_store_now (HanashiWindow *self)
{
  GError *problem = NULL;
  g_autoptr (HanashiStore) store = NULL;

  if (self->store != NULL)
    {
      hanashi_sidebar_set_store (self->sidebar, NULL);
      g_clear_object (&self->store);
    }
  store = hanashi_store_open_best (self->store_path, &problem);
  replace_store (self, store, problem);
}

/* Try Again: a read-only database is reopened at once (nothing waits for a lock there);
 * a missing one on a worker thread, as it may be locked. */
static void
retry_store (HanashiWindow *self)
{
  if (self->store != NULL)
    reopen_store_now (self);
  else
    reopen_store_async (self);
}

/* Before a message is stored: a database that could not be written is tried once more
 * (the folder may be writable again); if it still cannot, the sentence says which file and
 * why, and the text stays in the composer. */
static gboolean
ensure_writable_store (HanashiWindow *self)
{
  if (self->store != NULL && self->store_problem == NULL)
    return TRUE;
  /* A lock is already being retried in the background; opening here would wait for it. */
  if (self->store_cancellable == NULL &&
      !g_error_matches (self->store_problem, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_BUSY))
    {
      reopen_store_now (self);
      if (self->store != NULL && self->store_problem == NULL)
        return TRUE;
    }
  hanashi_window_add_toast (self, self->store_problem != NULL
                                  ? self->store_problem->message
                                  : _("Messages cannot be saved: the conversation database could not be opened."));
  return FALSE;
}

static void
start_fresh_store (HanashiWindow *self)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *aside = NULL;
  g_autofree char *aside_name = NULL;
  g_autofree char *text = NULL;
  GError *problem = NULL;
  g_autoptr (HanashiStore) store = NULL;

  /* Only a database that could not be opened at all is replaced. */
  if (self->store != NULL)
    return;
  g_clear_handle_id (&self->store_retry_source, g_source_remove);
  aside = hanashi_store_set_aside (self->store_path, &error);
  if (aside == NULL)
    {
      hanashi_window_add_toast (self, error->message);
      return;
    }
  store = hanashi_store_open_best (self->store_path, &problem);
  replace_store (self, store, problem);
  aside_name = g_path_get_basename (aside);
  /* Translators: %s is the file name the damaged database was given */
  text = g_strdup_printf (_("A fresh conversation database was started. The damaged one was kept as “%s”."), aside_name);
  hanashi_window_add_toast (self, text);
}

static void
on_fresh_store_response (AdwMessageDialog *dialog,
                         const char       *response,
                         HanashiWindow    *self)
{
  if (g_strcmp0 (response, "fresh") == 0)
    start_fresh_store (self);
}

static void
offer_fresh_store (HanashiWindow *self)
{
  AdwMessageDialog *dialog;

  self->store_fresh_offer_pending = FALSE;
  if (self->store != NULL || self->store_problem == NULL)
    return;
  dialog = ADW_MESSAGE_DIALOG (adw_message_dialog_new (GTK_WINDOW (self), _("Start a Fresh Conversation Database?"), NULL));
  /* Translators: %s says which file is damaged and how */
  adw_message_dialog_format_body (dialog, _("%s\n\nThe damaged file is kept beside it under a new name, so nothing in it is deleted, and a new, empty database takes its place."),
                                  self->store_problem->message);
  adw_message_dialog_add_responses (dialog, "cancel", _("_Not Now"), "fresh", _("_Start Fresh"), NULL);
  adw_message_dialog_set_response_appearance (dialog, "fresh", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (dialog, "fresh");
  adw_message_dialog_set_close_response (dialog, "cancel");
  g_signal_connect_object (dialog, "response", G_CALLBACK (on_fresh_store_response), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

/* The offer waits for the window: a dialog for a window not on screen yet has nowhere to go. */
static void
on_window_mapped (HanashiWindow *self)
{
  if (self->store_fresh_offer_pending)
    offer_fresh_store (self);
}

/* ---- the visible thread --------------------------------------------------------------- */

/* The no-model page stands in for an empty chat only: earlier chats stay readable (and
 * copyable) without a model, with sending disabled. */
static void
update_main_page (HanashiWindow *self)
{
  gboolean loaded = hanashi_engine_get_model_info (self->engine) != NULL;
  gboolean has_messages = g_list_model_get_n_items (G_LIST_MODEL (self->messages)) > 0;

  gtk_stack_set_visible_child_name (self->main_stack, loaded || has_messages ? "chat" : "empty");
}

static int
message_index (HanashiWindow  *self,
               HanashiMessage *message)
{
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->messages));
  for (guint i = 0; i < n; i++)
    {
      g_autoptr (HanashiMessage) item = g_list_model_get_item (G_LIST_MODEL (self->messages), i);
      if (item == message)
        return (int) i;
    }
  return -1;
}

static gint64
last_message_id (HanashiWindow *self)
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
reload_thread (HanashiWindow *self)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) stored = NULL;
  g_autoptr (GPtrArray) thread = NULL;
  guint n_old = g_list_model_get_n_items (G_LIST_MODEL (self->messages));
  guint keep = 0;

  if (self->store == NULL || self->conversation_id == 0)
    {
      g_list_store_remove_all (self->messages);
      update_context_meter (self);
      return;
    }
  stored = hanashi_store_list_messages (self->store, self->conversation_id, &error);
  if (stored == NULL)
    {
      toast_error (self, _("Could not read the conversation"), error);
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
  update_context_meter (self);
}

static void
truncate_thread (HanashiWindow *self,
                 guint          length)
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

/* ---- a reasoning model's thinking ---------------------------------------------------------
 * Replies keep their thinking apart from the answer (hanashi_message_append_output), so the
 * thread sent back to the model, copies and exports carry the answer only.  The chat's Think
 * switch is offered when the model's template reads enable_thinking, and passed to it. */

static gboolean
thinking_switch_shown (HanashiWindow *self)
{
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  return info != NULL && info->thinking_switch;
}

static void
set_request_thinking (HanashiWindow          *self,
                      HanashiGenerateRequest *req)
{
  if (thinking_switch_shown (self))
    hanashi_generate_request_set_thinking (req, hanashi_composer_get_thinking (self->composer)
                                                ? HANASHI_THINKING_ON : HANASHI_THINKING_OFF);
}

/* Where a reply starts: inside the thinking when the template's generation prompt opened it
 * (DeepSeek-R1) and the user did not switch thinking off; otherwise a leading marker opens
 * it, and, for templates that know thinking, a lone end marker closes one. */
static HnThinkStart
reply_start (HanashiWindow *self)
{
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  if (info == NULL)
    return HN_THINK_START_ANSWER;
  if (info->reply_opens_thinking && !(info->thinking_switch && !hanashi_composer_get_thinking (self->composer)))
    return HN_THINK_START_INSIDE;
  return info->thinking_aware ? HN_THINK_START_AUTO : HN_THINK_START_ANSWER;
}

static void
update_thinking_switch (HanashiWindow *self)
{
  hanashi_composer_set_thinking_available (self->composer, thinking_switch_shown (self));
}

static void
on_thinking_changed (HanashiComposer *composer,
                     HanashiWindow   *self)
{
  g_autoptr (GError) error = NULL;

  if (self->conversation_id == 0 || self->store == NULL)
    return;
  if (!hanashi_store_set_conversation_thinking (self->store, self->conversation_id,
                                                hanashi_composer_get_thinking (composer), &error))
    toast_error (self, _("Could not save the Think switch"), error);
  update_context_meter (self);
}

/* The first @n_messages of the visible thread as an engine request, plus @extra_user. */
static HanashiGenerateRequest *
build_request (HanashiWindow *self,
               guint          n_messages,
               const char    *extra_user)
{
  g_autofree char *key = conversation_key (self->conversation_id);
  HanashiGenerateRequest *req = hanashi_generate_request_new (key);
  const char *system_prompt = hanashi_composer_get_system_prompt (self->composer);

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
  set_request_thinking (self, req);
  return req;
}

/* ---- status: model name, context meter, speed --------------------------------------- */

static void
update_status (HanashiWindow *self)
{
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  g_autoptr (GString) status = g_string_new (NULL);

  gtk_label_set_label (self->model_label, info ? info->name : _("No Model"));
  gtk_widget_set_visible (GTK_WIDGET (self->context_bar), info != NULL && self->context_used >= 0);
  if (info != NULL && self->context_used >= 0)
    {
      double fraction = info->n_ctx > 0 ? (double) self->context_used / info->n_ctx : 0;
      gtk_level_bar_set_value (self->context_bar, CLAMP (fraction, 0.0, 1.0));
      /* Translators: the context meter: tokens used / context size */
      g_string_append_printf (status, _("%d / %u"), self->context_used, info->n_ctx);
      g_autofree char *tooltip = g_strdup_printf (_("%d of %u context tokens used"), self->context_used, info->n_ctx);
      gtk_widget_set_tooltip_text (GTK_WIDGET (self->context_bar), tooltip);
    }
  if (info != NULL && self->last_speed > 0)
    {
      if (status->len > 0)
        g_string_append (status, " · ");
      /* Translators: the speed of the last reply */
      g_string_append_printf (status, _("%.1f tok/s"), self->last_speed);
    }
  gtk_label_set_label (self->status_label, status->str);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->model_label), status->len > 0 ? status->str : NULL);
}

static void
count_done (GObject      *source,
            GAsyncResult *result,
            gpointer      user_data)
{
  g_autoptr (HanashiWindow) self = user_data;
  g_autoptr (GError) error = NULL;
  int n = hanashi_engine_count_tokens_finish (HANASHI_ENGINE (source), result, &error);

  if (n < 0)
    {
      /* A newer count replaced this one, or the model went away: nothing to show. */
      if (!g_error_matches (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED) &&
          !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_debug ("Counting tokens failed: %s", error->message);
      return;
    }
  self->context_used = n;
  update_status (self);
}

static void
update_context_meter (HanashiWindow *self)
{
  g_autoptr (HanashiGenerateRequest) req = NULL;

  g_cancellable_cancel (self->count_cancellable);
  g_clear_object (&self->count_cancellable);
  if (hanashi_engine_get_model_info (self->engine) == NULL)
    {
      update_status (self);
      return;
    }
  self->count_cancellable = g_cancellable_new ();
  /* The draft counts as the next user message, so the meter shows what sending it costs
   * (while an earlier message is being edited, the thread after it would change anyway). */
  g_autofree char *draft = hanashi_composer_get_editing (self->composer) ? NULL
                           : hanashi_composer_dup_text (self->composer);
  if (draft != NULL)
    g_strstrip (draft);
  req = build_request (self, g_list_model_get_n_items (G_LIST_MODEL (self->messages)),
                       draft != NULL && *draft != '\0' ? draft : NULL);
  hanashi_engine_count_tokens_async (self->engine, req, self->count_cancellable, count_done, g_object_ref (self));
}

/* ---- generation ------------------------------------------------------------------------ */

static gboolean
store_reply_text (HanashiWindow   *self,
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
save_unsaved (HanashiWindow *self)
{
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
  HanashiWindow *self = data;

  save_unsaved (self);
  if (self->unsaved->len > 0)
    return G_SOURCE_CONTINUE;
  self->retry_source = 0;
  return G_SOURCE_REMOVE;
}

static void
commit_reply (HanashiWindow *self,
              gboolean       complete)
{
  g_autoptr (GError) error = NULL;

  if (self->reply == NULL || self->store == NULL)
    return;
  self->reply_committed = g_get_monotonic_time ();
  if (store_reply_text (self, self->reply, complete ? self->reply_params : NULL, complete, &error))
    return;
  if (!self->reply_save_failed)
    toast_error (self, _("Could not save the reply"), error);
  self->reply_save_failed = TRUE;
  if (complete)
    {
      g_object_set_data_full (G_OBJECT (self->reply), "hanashi-params", g_strdup (self->reply_params), g_free);
      g_ptr_array_add (self->unsaved, g_object_ref (self->reply));
      if (self->retry_source == 0)
        self->retry_source = g_timeout_add_seconds (1, retry_unsaved, self);
    }
}

/* Ends the current reply on our side: whatever arrives later for it is ignored. */
static void
finish_reply (HanashiWindow *self)
{
  if (self->reply == NULL)
    return;
  hanashi_message_end_output (self->reply);
  hanashi_message_set_complete (self->reply, TRUE);
  commit_reply (self, TRUE);
  g_clear_object (&self->reply);
  g_clear_pointer (&self->reply_params, g_free);
  self->reply_id = 0;
  hanashi_composer_set_generating (self->composer, FALSE);
  update_actions (self);
  update_context_meter (self);
  g_signal_emit (self, signals[SIGNAL_CONVERSATIONS_CHANGED], 0);
}

static void
abandon_reply (HanashiWindow *self)
{
  if (self->reply_id != 0)
    hanashi_engine_cancel (self->engine, self->reply_id);
  finish_reply (self);
}

/* Starts a reply to the first @n_context messages of the thread, stored as a child of
 * @parent_id (and as an alternative of @alternative_of when that is not 0). */
static gboolean
start_reply (HanashiWindow  *self,
             guint           n_context,
             gint64          parent_id,
             gint64          alternative_of,
             GError        **error)
{
  g_autoptr (HanashiGenerateRequest) req = build_request (self, n_context, NULL);
  g_autoptr (HanashiMessage) message = NULL;
  g_autoptr (GPtrArray) alternatives = NULL;
  gint64 id;

  if (!hanashi_params_panel_apply_to_request (self->params_panel, req, error))
    return FALSE;
  id = hanashi_store_add_message (self->store, self->conversation_id, parent_id, alternative_of,
                                  "assistant", "", FALSE, error);
  if (id == 0)
    return FALSE;

  message = hanashi_message_new (id, "assistant", "");
  hanashi_message_set_parent_id (message, parent_id);
  hanashi_message_set_complete (message, FALSE);
  hanashi_message_begin_output (message, reply_start (self));
  alternatives = hanashi_store_list_alternatives (self->store, id, NULL);
  if (alternatives != NULL)
    hanashi_message_set_alternatives (message, alternatives->len - 1, alternatives->len);
  truncate_thread (self, n_context);
  g_list_store_append (self->messages, message);

  self->reply = g_steal_pointer (&message);
  self->reply_params = hanashi_params_panel_dup_params_json (self->params_panel);
  self->reply_committed = g_get_monotonic_time ();
  self->reply_save_failed = FALSE;
  self->reply_id = hanashi_engine_generate (self->engine, req);
  hanashi_composer_set_generating (self->composer, TRUE);
  hanashi_chat_view_scroll_to_bottom (self->chat_view);
  update_actions (self);
  return TRUE;
}

/* A long conversation can take a while to read before the first token: the bar under the
 * header (also used for loading) shows how far the engine is. */
static void
on_prompt_progress (HanashiEngine *engine,
                    guint          id,
                    guint          done,
                    guint          total,
                    HanashiWindow *self)
{
  if (id == 0 || id != self->reply_id || total == 0)
    return;
  gtk_progress_bar_set_fraction (self->load_progress, (double) done / total);
  gtk_widget_set_visible (GTK_WIDGET (self->load_progress), done < total);
}

static void
on_token (HanashiEngine *engine,
          guint          id,
          const char    *text,
          int            token_id,
          HanashiWindow *self)
{
  if (id == 0 || id != self->reply_id || self->reply == NULL)
    return;
  if (self->load_cancellable == NULL)
    gtk_widget_set_visible (GTK_WIDGET (self->load_progress), FALSE);
  hanashi_message_append_output (self->reply, text);
  if (g_get_monotonic_time () - self->reply_committed >= COMMIT_INTERVAL_US)
    commit_reply (self, FALSE);
}

static void
on_generation_done (HanashiEngine          *engine,
                    guint                   id,
                    HanashiGenerationStats *stats,
                    HanashiWindow          *self)
{
  double seconds;

  if (id == 0 || id != self->reply_id || self->reply == NULL)
    return;
  seconds = stats->gen_tokens_per_second > 0 ? stats->n_generated / stats->gen_tokens_per_second : 0;
  hanashi_message_set_stats (self->reply, (int) stats->n_generated, seconds);
  self->last_speed = stats->gen_tokens_per_second;
  if (stats->grammar_truncated_steps > 0)
    hanashi_window_add_toast (self, _("The grammar is too ambiguous to follow in full: some text it allows may have been refused."));
  finish_reply (self);
  update_status (self);
}

static void
on_engine_error (HanashiEngine *engine,
                 guint          id,
                 GError        *error,
                 HanashiWindow *self)
{
  g_autofree char *text = hanashi_describe_engine_error (error);

  hanashi_window_add_toast (self, text);
  if (id == 0 || id != self->reply_id || self->reply == NULL)
    return;
  /* A reply that never started leaves nothing worth keeping; the thread is read again so
   * a regenerated answer's earlier version comes back. */
  if (*hanashi_message_get_text (self->reply) == '\0' && *hanashi_message_get_thinking (self->reply) == '\0')
    {
      g_autoptr (HanashiMessage) reply = g_steal_pointer (&self->reply);
      if (self->store != NULL)
        hanashi_store_delete_message (self->store, hanashi_message_get_id (reply), NULL);
      g_clear_pointer (&self->reply_params, g_free);
      self->reply_id = 0;
      hanashi_composer_set_generating (self->composer, FALSE);
      update_actions (self);
      reload_thread (self);
      return;
    }
  finish_reply (self);
}

static void
on_context_dropped (HanashiEngine *engine,
                    guint          id,
                    guint          n_messages,
                    guint          n_tokens,
                    HanashiWindow *self)
{
  if (id == 0 || id != self->reply_id)
    return;
  /* Translators: said when a long chat no longer fits in the model's context */
  g_autofree char *text = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE,
                                                         "The oldest message no longer fits in the context: the model did not see it.",
                                                         "The %u oldest messages no longer fit in the context: the model did not see them.",
                                                         n_messages), n_messages);
  hanashi_window_add_toast (self, text);
}

static void
on_engine_warning (HanashiEngine *engine,
                   guint          id,
                   GError        *warning,
                   HanashiWindow *self)
{
  g_autofree char *text = NULL;

  /* The engine's reason is technical and English: the log keeps it, the toast says what
   * it means for the user. */
  g_message ("Engine warning: %s", warning->message);
  if (g_error_matches (warning, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_TEMPLATE_FAILED))
    text = g_strdup (_("The model’s chat template could not be used, so the chat is written in the ChatML format instead. Answers may be worse."));
  else if (g_error_matches (warning, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CONTEXT_CLAMPED))
    text = g_strdup (_("This model supports a smaller context than the one set in Preferences, so it uses the largest it supports."));
  else
    text = hanashi_describe_engine_error (warning);
  hanashi_window_add_toast (self, text);
}

static char *
make_title (const char *text)
{
  g_autofree char *first_line = NULL;
  const char *end = strchr (text, '\n');
  g_autofree char *stripped = NULL;

  first_line = end ? g_strndup (text, end - text) : g_strdup (text);
  stripped = g_strstrip (g_strdup (first_line));
  if (g_utf8_strlen (stripped, -1) <= TITLE_MAX_CHARS)
    return g_steal_pointer (&stripped);
  g_autofree char *cut = g_utf8_substring (stripped, 0, TITLE_MAX_CHARS - 1);
  return g_strconcat (g_strchomp (cut), "…", NULL);
}

static gboolean
ensure_conversation (HanashiWindow  *self,
                     const char     *first_text,
                     GError        **error)
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
  self->conversation_id = id;
  gtk_window_set_title (GTK_WINDOW (self), title);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CONVERSATION_ID]);
  params = hanashi_params_panel_dup_params_json (self->params_panel);
  /* Settings chosen before the first message belong to the new conversation. */
  if (!hanashi_store_set_system_prompt (self->store, id, hanashi_composer_get_system_prompt (self->composer), error) ||
      !hanashi_store_set_conversation_params (self->store, id, params, error) ||
      !hanashi_store_set_conversation_thinking (self->store, id, hanashi_composer_get_thinking (self->composer), error))
    return FALSE;
  return TRUE;
}

static void
send_action (GtkWidget  *widget,
             const char *action_name,
             GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);
  g_autofree char *text = hanashi_composer_dup_text (self->composer);
  g_autoptr (HanashiGenerateRequest) check = NULL;
  g_autoptr (HanashiMessage) message = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) alternatives = NULL;
  guint n_context = g_list_model_get_n_items (G_LIST_MODEL (self->messages));
  gint64 parent_id = last_message_id (self);
  gint64 alternative_of = 0;
  gint64 id;

  g_autofree char *trimmed = g_strstrip (g_strdup (text));
  if (*trimmed == '\0')
    return;
  if (self->reply != NULL || hanashi_engine_get_model_info (self->engine) == NULL)
    return;
  if (!ensure_writable_store (self))
    return;

  if (self->editing_id != 0)
    {
      g_autoptr (HanashiStoredMessage) edited = hanashi_store_get_message (self->store, self->editing_id, NULL);
      for (guint i = 0; edited != NULL && i < n_context; i++)
        {
          g_autoptr (HanashiMessage) m = g_list_model_get_item (G_LIST_MODEL (self->messages), i);
          if (hanashi_message_get_id (m) == self->editing_id)
            {
              n_context = i;
              parent_id = edited->parent_id;
              alternative_of = edited->id;
              break;
            }
        }
    }

  /* Refuse before storing anything when the panel's grammar cannot be used. */
  check = build_request (self, n_context, text);
  if (!hanashi_params_panel_apply_to_request (self->params_panel, check, &error))
    {
      hanashi_window_add_toast (self, error->message);
      return;
    }

  /* Named after the first line that has words in it. */
  if (!ensure_conversation (self, trimmed, &error))
    {
      toast_error (self, _("Could not save the message"), error);
      return;
    }
  id = hanashi_store_add_message (self->store, self->conversation_id, parent_id, alternative_of,
                                  "user", text, TRUE, &error);
  if (id == 0)
    {
      /* The text stays in the composer, so nothing typed is lost. */
      toast_error (self, _("Could not save the message"), error);
      return;
    }

  hanashi_composer_set_text (self->composer, "");
  hanashi_composer_set_editing (self->composer, FALSE);
  self->editing_id = 0;
  g_signal_emit (self, signals[SIGNAL_CONVERSATIONS_CHANGED], 0);
  message = hanashi_message_new (id, "user", text);
  hanashi_message_set_parent_id (message, parent_id);
  if (alternative_of != 0 && (alternatives = hanashi_store_list_alternatives (self->store, id, NULL)) != NULL)
    hanashi_message_set_alternatives (message, alternatives->len - 1, alternatives->len);
  truncate_thread (self, n_context);
  g_list_store_append (self->messages, message);

  if (!start_reply (self, n_context + 1, id, 0, &error))
    toast_error (self, _("Could not start the reply"), error);
}

static void
stop_action (GtkWidget  *widget,
             const char *action_name,
             GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);

  /* The engine still reports "generation-done" with the stats of the partial reply. */
  if (self->reply_id != 0)
    hanashi_engine_cancel (self->engine, self->reply_id);
}

/* ---- message actions ------------------------------------------------------------------- */

static void
switch_alternative (HanashiWindow  *self,
                    HanashiMessage *message,
                    int             delta)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) alternatives = hanashi_store_list_alternatives (self->store, hanashi_message_get_id (message), &error);
  int index = -1;

  if (alternatives == NULL)
    {
      toast_error (self, _("Could not switch versions"), error);
      return;
    }
  for (guint i = 0; i < alternatives->len; i++)
    if (((HanashiStoredMessage *) g_ptr_array_index (alternatives, i))->id == hanashi_message_get_id (message))
      index = (int) i;
  index += delta;
  if (index < 0 || index >= (int) alternatives->len)
    return;
  if (!hanashi_store_show_alternative (self->store, ((HanashiStoredMessage *) g_ptr_array_index (alternatives, index))->id, &error))
    {
      toast_error (self, _("Could not switch versions"), error);
      return;
    }
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

static void
forget_message_undo (HanashiWindow *self)
{
  g_clear_pointer (&self->undo_messages, g_ptr_array_unref);
  g_clear_pointer (&self->undo_after_ids, g_array_unref);
  self->undo_conversation = 0;
}

static void
undo_delete_message_action (GtkWidget  *widget,
                            const char *action_name,
                            GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) now = NULL;
  g_autoptr (GArray) now_ids = NULL;

  if (self->undo_messages == NULL || self->store == NULL)
    return;
  now = hanashi_store_list_messages (self->store, self->undo_conversation, &error);
  if (now == NULL)
    {
      toast_error (self, _("Could not bring the message back"), error);
      return;
    }
  now_ids = message_ids (now);
  if (!same_ids (now_ids, self->undo_after_ids))
    {
      hanashi_window_add_toast (self, _("The chat has changed since, so the message cannot be brought back."));
      forget_message_undo (self);
      return;
    }
  if (!hanashi_store_replace_messages (self->store, self->undo_conversation, self->undo_messages, &error))
    toast_error (self, _("Could not bring the message back"), error);
  else if (self->undo_conversation == self->conversation_id)
    reload_thread (self);
  forget_message_undo (self);
  g_signal_emit (self, signals[SIGNAL_CONVERSATIONS_CHANGED], 0);
}

static void
on_message_undo_dismissed (AdwToast      *toast,
                           HanashiWindow *self)
{
  /* Undo runs before dismissal; after it, or once the toast is gone, there is nothing to
   * undo any more. */
  if (self->undo_toast == toast)
    {
      g_clear_weak_pointer (&self->undo_toast);
      forget_message_undo (self);
    }
}

static void
offer_message_undo (HanashiWindow *self,
                    GPtrArray     *before)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) after = hanashi_store_list_messages (self->store, self->conversation_id, &error);
  AdwToast *toast;

  if (after == NULL)
    return;   /* the deletion stands; only Undo is not offered */
  forget_message_undo (self);
  self->undo_messages = g_ptr_array_ref (before);
  self->undo_after_ids = message_ids (after);
  self->undo_conversation = self->conversation_id;
  /* One deletion can be undone at a time: a toast still on screen now undoes the newest
   * (dismissing it and adding another while it animates crashes libadwaita 1.2). */
  if (self->undo_toast != NULL)
    return;

  toast = adw_toast_new (_("Message deleted"));
  adw_toast_set_button_label (toast, _("_Undo"));
  adw_toast_set_action_name (toast, "win.undo-delete-message");
  adw_toast_set_priority (toast, ADW_TOAST_PRIORITY_HIGH);
  g_signal_connect_object (toast, "dismissed", G_CALLBACK (on_message_undo_dismissed), self, 0);
  g_set_weak_pointer (&self->undo_toast, toast);
  adw_toast_overlay_add_toast (self->toast_overlay, toast);
}

static void
delete_message (HanashiWindow  *self,
                HanashiMessage *message)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) alternatives = NULL;
  g_autoptr (GPtrArray) before = NULL;
  gint64 id = hanashi_message_get_id (message);
  gboolean ok;

  before = hanashi_store_list_messages (self->store, self->conversation_id, &error);
  if (before == NULL)
    {
      toast_error (self, _("Could not delete the message"), error);
      return;
    }
  alternatives = hanashi_store_list_alternatives (self->store, id, &error);
  if (alternatives == NULL)
    {
      toast_error (self, _("Could not delete the message"), error);
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
      ok = hanashi_store_reparent_children (self->store, id, hanashi_message_get_parent_id (message),
                                            self->conversation_id, &error) &&
           hanashi_store_delete_message (self->store, id, &error);
    }
  if (!ok)
    toast_error (self, _("Could not delete the message"), error);
  else
    offer_message_undo (self, before);
  reload_thread (self);
  g_signal_emit (self, signals[SIGNAL_CONVERSATIONS_CHANGED], 0);
}

static void
on_message_action (HanashiChatView *view,
                   const char      *action,
                   HanashiMessage  *message,
                   HanashiWindow   *self)
{
  g_autoptr (GError) error = NULL;
  int index;

  if (self->store == NULL)
    return;
  /* Changing the thread under a streaming reply would attach it to the wrong place. */
  if (message == self->reply && !g_str_equal (action, "delete"))
    return;
  abandon_reply (self);

  index = message_index (self, message);
  if (index < 0)
    return;

  if (g_str_equal (action, "edit"))
    {
      self->editing_id = hanashi_message_get_id (message);
      hanashi_composer_set_text (self->composer, hanashi_message_get_text (message));
      hanashi_composer_set_editing (self->composer, TRUE);
      gtk_widget_grab_focus (GTK_WIDGET (self->composer));
    }
  else if (g_str_equal (action, "regenerate"))
    {
      if (hanashi_engine_get_model_info (self->engine) == NULL)
        {
          hanashi_window_add_toast (self, _("No model is loaded."));
          return;
        }
      if (!start_reply (self, index, hanashi_message_get_parent_id (message), hanashi_message_get_id (message), &error))
        toast_error (self, _("Could not start the reply"), error);
    }
  else if (g_str_equal (action, "delete"))
    delete_message (self, message);
  else if (g_str_equal (action, "previous"))
    switch_alternative (self, message, -1);
  else if (g_str_equal (action, "next"))
    switch_alternative (self, message, +1);
}

static void
on_edit_cancelled (HanashiComposer *composer,
                   HanashiWindow   *self)
{
  self->editing_id = 0;
  hanashi_composer_set_text (self->composer, "");
}

/* ---- conversations ---------------------------------------------------------------------- */

void
hanashi_window_load_conversation (HanashiWindow *self,
                                  gint64         conversation_id)
{
  g_autoptr (HanashiStoredConversation) conversation = NULL;
  g_autoptr (GError) error = NULL;

  g_return_if_fail (HANASHI_IS_WINDOW (self));

  abandon_reply (self);
  /* The text of a message being edited belongs to the chat it came from. */
  if (self->editing_id != 0)
    hanashi_composer_set_text (self->composer, "");
  self->editing_id = 0;
  hanashi_composer_set_editing (self->composer, FALSE);
  if (conversation_id != 0 && self->store != NULL)
    {
      conversation = hanashi_store_get_conversation (self->store, conversation_id, &error);
      if (conversation == NULL)
        {
          toast_error (self, _("Could not open the conversation"), error);
          conversation_id = 0;
        }
    }
  if (self->conversation_id != conversation_id)
    {
      self->conversation_id = conversation_id;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CONVERSATION_ID]);
    }
  /* The title names the window in the window switcher. */
  gtk_window_set_title (GTK_WINDOW (self), conversation && *conversation->title ? conversation->title : _("Hanashi"));
  hanashi_composer_set_system_prompt (self->composer, conversation ? conversation->system_prompt : "");
  hanashi_composer_set_thinking (self->composer, conversation == NULL || !conversation->thinking_off);
  /* "{}" and NULL both mean: the defaults from Preferences. */
  hanashi_params_panel_set_params_json (self->params_panel, conversation ? conversation->params_json : NULL);
  g_list_store_remove_all (self->messages);
  reload_thread (self);
  hanashi_chat_view_scroll_to_bottom (self->chat_view);
  adw_leaflet_set_visible_child (self->leaflet, self->chat_pane);
}

static gboolean
count_draft_cb (gpointer data)
{
  HanashiWindow *self = data;

  self->draft_count_source = 0;
  update_context_meter (self);
  return G_SOURCE_REMOVE;
}

static void
on_draft_changed (GtkTextBuffer *buffer,
                  HanashiWindow *self)
{
  if (gtk_widget_in_destruction (GTK_WIDGET (self)))
    return;
  /* Counting goes through the engine thread: once typing pauses, not per keystroke. */
  g_clear_handle_id (&self->draft_count_source, g_source_remove);
  self->draft_count_source = g_timeout_add (300, count_draft_cb, self);
}

static void
on_system_prompt_changed (HanashiComposer *composer,
                          HanashiWindow   *self)
{
  g_autoptr (GError) error = NULL;

  if (self->conversation_id == 0 || self->store == NULL)
    return;
  if (!hanashi_store_set_system_prompt (self->store, self->conversation_id,
                                        hanashi_composer_get_system_prompt (composer), &error))
    toast_error (self, _("Could not save the system prompt"), error);
  update_context_meter (self);
}

static void
on_params_changed (HanashiParamsPanel *panel,
                   HanashiWindow      *self)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *json = NULL;

  if (self->conversation_id == 0 || self->store == NULL)
    return;
  json = hanashi_params_panel_dup_params_json (panel);
  if (!hanashi_store_set_conversation_params (self->store, self->conversation_id, json, &error))
    toast_error (self, _("Could not save the parameters"), error);
}

static void
on_conversation_activated (HanashiSidebar *sidebar,
                           gint64          id,
                           HanashiWindow  *self)
{
  hanashi_window_load_conversation (self, id);
}

static void
on_conversation_deleted (HanashiSidebar *sidebar,
                         gint64          id,
                         HanashiWindow  *self)
{
  g_autofree char *key = conversation_key (id);

  /* Its saved engine state is of no use any more (Undo restores only the messages). */
  hanashi_engine_forget_session (self->engine, key);
  if (id == self->conversation_id)
    hanashi_window_load_conversation (self, 0);
}

static void
on_conversations_changed (HanashiWindow *self)
{
  hanashi_sidebar_reload (self->sidebar);
  hanashi_sidebar_select (self->sidebar, self->conversation_id);
}

static void
new_chat_action (GtkWidget  *widget,
                 const char *action_name,
                 GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);

  hanashi_window_load_conversation (self, 0);
  gtk_widget_grab_focus (GTK_WIDGET (self->composer));
}

static void
show_chats_action (GtkWidget  *widget,
                   const char *action_name,
                   GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);
  adw_leaflet_set_visible_child (self->leaflet, GTK_WIDGET (self->sidebar));
}

static void
search_action (GtkWidget  *widget,
               const char *action_name,
               GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);

  /* Search lives in the sidebar: bring it into view on a narrow window. */
  adw_leaflet_set_visible_child (self->leaflet, GTK_WIDGET (self->sidebar));
  hanashi_sidebar_focus_search (self->sidebar);
}

/* ---- models ------------------------------------------------------------------------------ */

static void
remember_model (HanashiWindow *self,
                const char    *path)
{
  g_auto (GStrv) recent = g_settings_get_strv (self->settings, "recent-models");
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  g_auto (GStrv) updated = NULL;
  guint n = 1;

  g_strv_builder_add (builder, path);
  for (guint i = 0; recent[i] != NULL && n < MAX_RECENT_MODELS; i++)
    if (!g_str_equal (recent[i], path))
      {
        g_strv_builder_add (builder, recent[i]);
        n++;
      }
  updated = g_strv_builder_end (builder);
  g_settings_set_strv (self->settings, "recent-models", (const char * const *) updated);
}

static void
update_recent_models (HanashiWindow *self)
{
  g_auto (GStrv) recent = g_settings_get_strv (self->settings, "recent-models");
  GtkWidget *child;
  guint n = 0;

  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->recent_list))) != NULL)
    gtk_list_box_remove (self->recent_list, child);
  for (guint i = 0; recent[i] != NULL; i++)
    {
      g_autofree char *name = g_path_get_basename (recent[i]);
      g_autofree char *dir = g_path_get_dirname (recent[i]);
      GtkWidget *row;

      if (!g_file_test (recent[i], G_FILE_TEST_IS_REGULAR))
        continue;
      row = adw_action_row_new ();
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), name);
      adw_action_row_set_subtitle (ADW_ACTION_ROW (row), dir);
      adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
      adw_action_row_add_suffix (ADW_ACTION_ROW (row), gtk_image_new_from_icon_name ("go-next-symbolic"));
      gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (row), TRUE);
      gtk_actionable_set_action_name (GTK_ACTIONABLE (row), "win.open-recent");
      gtk_actionable_set_action_target (GTK_ACTIONABLE (row), "s", recent[i]);
      gtk_list_box_append (self->recent_list, row);
      n++;
    }
  gtk_widget_set_visible (self->recent_group, n > 0);
}

typedef struct {
  HanashiWindow *window;
  char          *path;
} ModelLoad;

static void
model_load_free (ModelLoad *load)
{
  g_object_unref (load->window);
  g_free (load->path);
  g_free (load);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ModelLoad, model_load_free)

/* Names the file and says why, and that the model in use stays (the engine keeps it). */
static char *
describe_load_failure (HanashiWindow *self,
                       const char    *path,
                       const GError  *error)
{
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  g_autofree char *name = g_path_get_basename (path);
  g_autofree char *reason = hanashi_describe_engine_error (error);
  /* Translators: %s is a file name */
  g_autofree char *what = g_strdup_printf (_("“%s” could not be opened as a model."), name);
  g_autofree char *kept = NULL;

  if (info != NULL)
    /* Translators: %s is the name of the model that was loaded before */
    kept = g_strdup_printf (_("“%s” is still loaded."), info->name);
  return g_strjoin (" ", what, reason, kept, NULL);
}

static void
load_done (GObject      *source,
           GAsyncResult *result,
           gpointer      user_data)
{
  g_autoptr (ModelLoad) load = user_data;
  HanashiWindow *self = load->window;
  g_autoptr (GError) error = NULL;

  if (!hanashi_engine_load_model_finish (HANASHI_ENGINE (source), result, &error))
    {
      if (!g_error_matches (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED) &&
          !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        {
          g_autofree char *text = describe_load_failure (self, load->path, error);
          g_message ("Model %s not loaded: %s", load->path, error->message);
          hanashi_window_add_toast (self, text);
        }
    }
  /* A load replaced by a newer one must not hide the newer one's progress. */
  if (G_IS_TASK (result) && g_task_get_cancellable (G_TASK (result)) != self->load_cancellable)
    return;
  gtk_widget_set_visible (GTK_WIDGET (self->load_progress), FALSE);
  g_clear_object (&self->load_cancellable);
}

void
hanashi_window_open_model (HanashiWindow *self,
                           GFile         *file)
{
  g_autofree char *path = NULL;
  ModelLoad *load;

  g_return_if_fail (HANASHI_IS_WINDOW (self));
  g_return_if_fail (G_IS_FILE (file));

  path = g_file_get_path (file);
  if (path == NULL)
    {
      hanashi_window_add_toast (self, _("Only model files on this computer can be opened."));
      return;
    }
  abandon_reply (self);
  g_cancellable_cancel (self->load_cancellable);
  g_clear_object (&self->load_cancellable);
  self->load_cancellable = g_cancellable_new ();
  gtk_progress_bar_set_fraction (self->load_progress, 0);
  gtk_widget_set_visible (GTK_WIDGET (self->load_progress), TRUE);
  /* Context size, threads and batch size shape the context, so they apply from the next
   * load.  A context size left at its default asks for what the model supports up to that
   * default (0), so that a smaller model is not warned about a choice nobody made. */
  g_autoptr (GVariant) chosen_context = g_settings_get_user_value (self->settings, "context-size");
  hanashi_engine_set_batch_size (self->engine, (guint) g_settings_get_int (self->settings, "batch-size"));
  load = g_new0 (ModelLoad, 1);
  load->window = g_object_ref (self);
  load->path = g_strdup (path);
  hanashi_engine_load_model_async (self->engine, path,
                                   chosen_context != NULL ? (guint) g_settings_get_int (self->settings, "context-size") : 0,
                                   (guint) g_settings_get_int (self->settings, "n-threads"),
                                   self->load_cancellable, load_done, load);
}

static void
on_load_progress (HanashiEngine *engine,
                  double         fraction,
                  HanashiWindow *self)
{
  gtk_progress_bar_set_fraction (self->load_progress, fraction);
}

static void
on_model_loaded (HanashiEngine    *engine,
                 HanashiModelInfo *info,
                 HanashiWindow    *self)
{
  remember_model (self, info->path);
  update_thinking_switch (self);
  self->context_used = -1;
  self->last_speed = 0;
  update_context_meter (self);
}

static void
on_engine_state (HanashiEngine *engine,
                 GParamSpec    *pspec,
                 HanashiWindow *self)
{
  gboolean loaded = hanashi_engine_get_model_info (engine) != NULL;
  gboolean was_empty = g_strcmp0 (gtk_stack_get_visible_child_name (self->main_stack), "empty") == 0;

  update_main_page (self);
  update_thinking_switch (self);
  /* Once a model is there, typing goes straight into the composer. */
  if (loaded && was_empty)
    gtk_widget_grab_focus (GTK_WIDGET (self->composer));
  update_status (self);
  update_actions (self);
}

static void
on_model_chosen (GtkNativeDialog *dialog,
                 int              response,
                 gpointer         user_data)
{
  HanashiWindow *self = user_data;

  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr (GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
      if (file != NULL)
        hanashi_window_open_model (self, file);
    }
  gtk_native_dialog_destroy (dialog);
  g_object_unref (dialog);
  g_object_unref (self);
}

static void
open_model_action (GtkWidget  *widget,
                   const char *action_name,
                   GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);
  GtkFileChooserNative *chooser;
  g_autoptr (GtkFileFilter) filter = gtk_file_filter_new ();

  gtk_file_filter_set_name (filter, _("GGUF Models"));
  gtk_file_filter_add_suffix (filter, "gguf");

  chooser = gtk_file_chooser_native_new (_("Open Model File"), GTK_WINDOW (self),
                                         GTK_FILE_CHOOSER_ACTION_OPEN, _("_Open"), _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (chooser), TRUE);
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (chooser), filter);
  g_signal_connect (chooser, "response", G_CALLBACK (on_model_chosen), g_object_ref (self));
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (chooser));
}

static void
open_recent_action (GtkWidget  *widget,
                    const char *action_name,
                    GVariant   *parameter)
{
  g_autoptr (GFile) file = g_file_new_for_path (g_variant_get_string (parameter, NULL));
  hanashi_window_open_model (HANASHI_WINDOW (widget), file);
}

static void
on_model_activated (HanashiModelsDialog *dialog,
                    const char          *path,
                    HanashiWindow       *self)
{
  g_autoptr (GFile) file = g_file_new_for_path (path);
  hanashi_window_open_model (self, file);
  gtk_window_close (GTK_WINDOW (dialog));
}

static void
choose_model_action (GtkWidget  *widget,
                     const char *action_name,
                     GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);
  HanashiModelsDialog *dialog = hanashi_models_dialog_new (GTK_WINDOW (self));

  g_signal_connect_object (dialog, "model-activated", G_CALLBACK (on_model_activated), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

/* ---- actions and properties ------------------------------------------------------------ */

static void
update_actions (HanashiWindow *self)
{
  gboolean loaded = hanashi_engine_get_model_info (self->engine) != NULL;

  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.send", loaded && self->reply == NULL);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.stop", self->reply_id != 0);
}

static void
hanashi_window_get_property (GObject    *object,
                             guint       prop_id,
                             GValue     *value,
                             GParamSpec *pspec)
{
  HanashiWindow *self = HANASHI_WINDOW (object);

  switch (prop_id)
    {
    case PROP_CONVERSATION_ID:
      g_value_set_int64 (value, self->conversation_id);
      break;
    case PROP_PANEL_REVEALED:
      /* The property action asks before the template exists. */
      g_value_set_boolean (value, self->flap != NULL && adw_flap_get_reveal_flap (self->flap));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hanashi_window_set_property (GObject      *object,
                             guint         prop_id,
                             const GValue *value,
                             GParamSpec   *pspec)
{
  HanashiWindow *self = HANASHI_WINDOW (object);

  switch (prop_id)
    {
    case PROP_PANEL_REVEALED:
      if (self->flap != NULL)
        adw_flap_set_reveal_flap (self->flap, g_value_get_boolean (value));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
on_flap_revealed (AdwFlap       *flap,
                  GParamSpec    *pspec,
                  HanashiWindow *self)
{
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_PANEL_REVEALED]);
}

static void
apply_session_limit (HanashiWindow *self)
{
  /* The limit applies to every save, so a change in Preferences takes effect at once. */
  hanashi_engine_set_session_cache_limit (self->engine,
                                          (guint64) g_settings_get_int (self->settings, "session-cache-limit-mb") << 20);
}

static void
on_folded (AdwLeaflet    *leaflet,
           GParamSpec    *pspec,
           HanashiWindow *self)
{
  /* Narrow header bars need the room for the model name; the numbers move to its tooltip. */
  gtk_widget_set_visible (self->status_box, !adw_leaflet_get_folded (leaflet));
}

static void
hanashi_window_dispose (GObject *object)
{
  HanashiWindow *self = HANASHI_WINDOW (object);

  if (self->reply != NULL)
    {
      hanashi_message_set_complete (self->reply, TRUE);
      commit_reply (self, TRUE);
      g_clear_object (&self->reply);
    }
  /* A last try for answers the database refused so far. */
  g_clear_handle_id (&self->retry_source, g_source_remove);
  g_clear_handle_id (&self->draft_count_source, g_source_remove);
  if (self->unsaved != NULL && self->store != NULL)
    save_unsaved (self);
  g_clear_pointer (&self->unsaved, g_ptr_array_unref);
  g_cancellable_cancel (self->count_cancellable);
  g_cancellable_cancel (self->load_cancellable);
  g_clear_object (&self->count_cancellable);
  g_clear_object (&self->load_cancellable);
  if (self->engine != NULL)
    g_signal_handlers_disconnect_by_data (self->engine, self);
  g_clear_object (&self->engine);
  g_clear_object (&self->store);
  g_clear_handle_id (&self->store_retry_source, g_source_remove);
  g_cancellable_cancel (self->store_cancellable);
  g_clear_object (&self->store_cancellable);
  g_clear_error (&self->store_problem);
  g_clear_pointer (&self->store_path, g_free);
  g_clear_object (&self->settings);
  if (self->messages != NULL)
    g_signal_handlers_disconnect_by_data (self->messages, self);
  g_clear_object (&self->messages);
  g_clear_weak_pointer (&self->undo_toast);
  g_clear_pointer (&self->undo_messages, g_ptr_array_unref);
  g_clear_pointer (&self->undo_after_ids, g_array_unref);
  g_clear_pointer (&self->reply_params, g_free);
  G_OBJECT_CLASS (hanashi_window_parent_class)->dispose (object);
}

static void
hanashi_window_class_init (HanashiWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hanashi_window_dispose;
  object_class->get_property = hanashi_window_get_property;
  object_class->set_property = hanashi_window_set_property;

  properties[PROP_PANEL_REVEALED] = g_param_spec_boolean ("panel-revealed", NULL, NULL, FALSE,
                                                          G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_CONVERSATION_ID] = g_param_spec_int64 ("conversation-id", NULL, NULL, 0, G_MAXINT64, 0,
                                                        G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  signals[SIGNAL_CONVERSATIONS_CHANGED] = g_signal_new ("conversations-changed", G_TYPE_FROM_CLASS (klass),
                                                        G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 0);

  g_type_ensure (HANASHI_TYPE_SIDEBAR);
  g_type_ensure (HANASHI_TYPE_CHAT_VIEW);
  g_type_ensure (HANASHI_TYPE_COMPOSER);
  g_type_ensure (HANASHI_TYPE_PARAMS_PANEL);

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hanashi/Hanashi/ui/hanashi-window.ui");
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, leaflet);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, sidebar);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, chat_pane);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, model_label);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, status_box);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, context_bar);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, status_label);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, load_progress);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, flap);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, main_stack);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, empty_page);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, recent_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, recent_list);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, chat_view);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, composer);
  gtk_widget_class_bind_template_child (widget_class, HanashiWindow, params_panel);

  gtk_widget_class_install_action (widget_class, "win.open-model", NULL, open_model_action);
  gtk_widget_class_install_action (widget_class, "win.open-recent", "s", open_recent_action);
  gtk_widget_class_install_action (widget_class, "win.choose-model", NULL, choose_model_action);
  gtk_widget_class_install_action (widget_class, "win.new-chat", NULL, new_chat_action);
  gtk_widget_class_install_action (widget_class, "win.search", NULL, search_action);
  gtk_widget_class_install_action (widget_class, "win.show-chats", NULL, show_chats_action);
  gtk_widget_class_install_action (widget_class, "win.send", NULL, send_action);
  gtk_widget_class_install_action (widget_class, "win.stop", NULL, stop_action);
  gtk_widget_class_install_action (widget_class, "win.undo-delete-message", NULL, undo_delete_message_action);
  gtk_widget_class_install_property_action (widget_class, "win.toggle-panel", "panel-revealed");
}

static void
hanashi_window_init (HanashiWindow *self)
{
  g_autofree char *db_path = hanashi_store_default_path ();
  g_autoptr (GError) error = NULL;

  gtk_widget_init_template (GTK_WIDGET (self));
  self->context_used = -1;
  self->messages = g_list_store_new (HANASHI_TYPE_MESSAGE);
  g_signal_connect_swapped (self->messages, "items-changed", G_CALLBACK (update_main_page), self);
  self->unsaved = g_ptr_array_new_with_free_func (g_object_unref);
  hanashi_chat_view_set_model (self->chat_view, G_LIST_MODEL (self->messages));

  self->settings = g_settings_new (APP_ID);
  g_settings_bind (self->settings, "window-width", self, "default-width", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "window-height", self, "default-height", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "window-maximized", self, "maximized", G_SETTINGS_BIND_DEFAULT);
  g_signal_connect_object (self->settings, "changed::recent-models", G_CALLBACK (update_recent_models), self, G_CONNECT_SWAPPED);

  /* Above the chat, below the loading bar: what is wrong with the database, if anything. */
  self->store_banner = hanashi_store_banner_new ();
  gtk_box_insert_child_after (GTK_BOX (self->chat_pane), GTK_WIDGET (self->store_banner),
                              GTK_WIDGET (self->load_progress));
  g_signal_connect_swapped (self->store_banner, "retry", G_CALLBACK (retry_store), self);
  g_signal_connect_swapped (self->store_banner, "start-fresh", G_CALLBACK (offer_fresh_store), self);
  g_signal_connect (self, "map", G_CALLBACK (on_window_mapped), NULL);
  self->store_path = g_steal_pointer (&db_path);
  self->store = hanashi_store_open_best (self->store_path, &error);
  apply_store_problem (self, g_steal_pointer (&error));

  self->engine = hanashi_engine_new ();
  apply_session_limit (self);
  g_signal_connect_object (self->settings, "changed::session-cache-limit-mb",
                           G_CALLBACK (apply_session_limit), self, G_CONNECT_SWAPPED);
  g_signal_connect (self->engine, "token", G_CALLBACK (on_token), self);
  g_signal_connect (self->engine, "prompt-progress", G_CALLBACK (on_prompt_progress), self);
  g_signal_connect (self->engine, "generation-done", G_CALLBACK (on_generation_done), self);
  g_signal_connect (self->engine, "error", G_CALLBACK (on_engine_error), self);
  g_signal_connect (self->engine, "warning", G_CALLBACK (on_engine_warning), self);
  g_signal_connect (self->engine, "context-dropped", G_CALLBACK (on_context_dropped), self);
  g_signal_connect (self->engine, "load-progress", G_CALLBACK (on_load_progress), self);
  g_signal_connect (self->engine, "model-loaded", G_CALLBACK (on_model_loaded), self);
  g_signal_connect (self->engine, "notify::state", G_CALLBACK (on_engine_state), self);
  g_signal_connect (self->engine, "notify::model-info", G_CALLBACK (on_engine_state), self);

  hanashi_sidebar_set_store (self->sidebar, self->store);
  /* Folded, the chats pane is the whole window and its header needs the window buttons;
   * the sidebar keeps them off for the wide layout. */
  for (GtkWidget *w = gtk_widget_get_first_child (GTK_WIDGET (self->sidebar)); w != NULL; w = gtk_widget_get_first_child (w))
    {
      GtkWidget *header = w;
      for (; header != NULL && !ADW_IS_HEADER_BAR (header); header = gtk_widget_get_next_sibling (header))
        ;
      if (header != NULL)
        {
          g_object_bind_property (self->leaflet, "folded", header, "show-end-title-buttons", G_BINDING_SYNC_CREATE);
          break;
        }
    }
  g_signal_connect (self->sidebar, "conversation-activated", G_CALLBACK (on_conversation_activated), self);
  g_signal_connect (self->sidebar, "conversation-deleted", G_CALLBACK (on_conversation_deleted), self);
  g_signal_connect (self, "conversations-changed", G_CALLBACK (on_conversations_changed), NULL);
  g_signal_connect (self, "notify::conversation-id", G_CALLBACK (on_conversations_changed), NULL);
  g_signal_connect (self->chat_view, "message-action", G_CALLBACK (on_message_action), self);
  g_signal_connect (self->composer, "system-prompt-changed", G_CALLBACK (on_system_prompt_changed), self);
  g_signal_connect (self->composer, "thinking-changed", G_CALLBACK (on_thinking_changed), self);
  g_signal_connect (self->composer, "edit-cancelled", G_CALLBACK (on_edit_cancelled), self);
  g_signal_connect_object (gtk_text_view_get_buffer (hanashi_composer_get_text_view (self->composer)), "changed",
                           G_CALLBACK (on_draft_changed), self, 0);
  g_signal_connect (self->params_panel, "changed", G_CALLBACK (on_params_changed), self);
  g_signal_connect (self->flap, "notify::reveal-flap", G_CALLBACK (on_flap_revealed), self);
  g_signal_connect (self->leaflet, "notify::folded", G_CALLBACK (on_folded), self);

  update_recent_models (self);
  on_engine_state (self->engine, NULL, self);
  /* A narrow window opens on the chat, not on the list of chats. */
  adw_leaflet_set_visible_child (self->leaflet, self->chat_pane);
  on_folded (self->leaflet, NULL, self);

  /* Pick up where the user left off: the most recently active conversation. */
  if (self->store != NULL)
    {
      g_autoptr (GPtrArray) conversations = hanashi_store_list_conversations (self->store, NULL, NULL);
      if (conversations != NULL && conversations->len > 0)
        hanashi_window_load_conversation (self, ((HanashiStoredConversation *) g_ptr_array_index (conversations, 0))->id);
    }
}
