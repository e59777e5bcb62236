/* hanashi-window-store.c — the window and its database: locked, read-only or damaged
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-window"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-chat.h"
#include "hanashi-sidebar.h"
#include "hanashi-store-recovery.h"
#include "hanashi-window-private.h"

/* Another program's lock on the database goes away by itself: try again this often (s). */
#define STORE_RETRY_INTERVAL_S 3

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
  hanashi_chat_set_store (self->chat, self->store);
  apply_store_problem (self, problem);
  hanashi_sidebar_set_store (self->sidebar, self->store);
  if (!had_store && self->store != NULL && hanashi_chat_get_conversation_id (self->chat) == 0 &&
      g_list_model_get_n_items (hanashi_chat_get_messages (self->chat)) == 0)
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
      hanashi_chat_set_store (self->chat, NULL);
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
gboolean
_hanashi_window_ensure_writable_store (HanashiWindow *self)
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

/* Opens the database for the window (writable if it can be, else read-only) and puts the
 * banner that says what is wrong with it above the chat, below the loading bar. */
void
_hanashi_window_open_store (HanashiWindow *self)
{
  g_autoptr (GError) error = NULL;

  self->store_banner = hanashi_store_banner_new ();
  gtk_box_insert_child_after (GTK_BOX (self->chat_pane), GTK_WIDGET (self->store_banner),
                              GTK_WIDGET (self->load_progress));
  g_signal_connect_swapped (self->store_banner, "retry", G_CALLBACK (retry_store), self);
  g_signal_connect_swapped (self->store_banner, "start-fresh", G_CALLBACK (offer_fresh_store), self);
  g_signal_connect (self, "map", G_CALLBACK (on_window_mapped), NULL);
  self->store_path = hanashi_store_default_path ();
  self->store = hanashi_store_open_best (self->store_path, &error);
  apply_store_problem (self, g_steal_pointer (&error));
}
