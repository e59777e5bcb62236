/* hanashi-window-store.c — the window as a view of the application's database: the chat and
 * the chats pane follow it, and a banner above the chat says what is wrong with it (locked,
 * read-only or damaged).  Opening, retrying and starting fresh belong to the application
 * (hanashi-application.h), which owns the store for every window.
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

static HanashiApplication *
get_application (HanashiWindow *self)
{
  return HANASHI_APPLICATION (gtk_window_get_application (GTK_WINDOW (self)));
}

/* Shows the application's store: the chat, the chats pane and the banner follow it, and
 * the history appears if there was none. */
static void
show_store (HanashiWindow *self)
{
  HanashiApplication *app = get_application (self);
  HanashiStore *store = hanashi_application_get_store (app);
  gboolean had_store = self->store != NULL;

  if (store != self->store)
    {
      g_set_object (&self->store, store);
      hanashi_chat_set_store (self->chat, self->store);
      hanashi_sidebar_set_store (self->sidebar, self->store);
    }
  hanashi_store_banner_set_problem (self->store_banner, hanashi_application_get_store_problem (app));
  if (!had_store && self->store != NULL && hanashi_chat_get_conversation_id (self->chat) == 0 &&
      g_list_model_get_n_items (hanashi_chat_get_messages (self->chat)) == 0)
    {
      /* Pick up where the user left off: the most recently active conversation. */
      g_autoptr (GPtrArray) conversations = hanashi_store_list_conversations (self->store, NULL, NULL);
      if (conversations != NULL && conversations->len > 0)
        hanashi_window_load_conversation (self, ((HanashiStoredConversation *) g_ptr_array_index (conversations, 0))->id);
    }
}

/* Before a message is stored: if the database still cannot be written, the sentence says
 * which file and why, and the text stays in the composer. */
gboolean
_hanashi_window_ensure_writable_store (HanashiWindow *self)
{
  HanashiApplication *app = get_application (self);
  const GError *problem;

  if (hanashi_application_ensure_writable_store (app))
    return TRUE;
  problem = hanashi_application_get_store_problem (app);
  hanashi_window_add_toast (self, problem != NULL
                                  ? problem->message
                                  : _("Messages cannot be saved: the conversation database could not be opened."));
  return FALSE;
}

/* Binds the window to the application's store and puts the banner above the chat, below
 * the loading bar.  Needs the chat (_hanashi_window_bind_chat). */
void
_hanashi_window_bind_store (HanashiWindow *self)
{
  HanashiApplication *app = get_application (self);

  self->store_banner = hanashi_store_banner_new ();
#if HANASHI_WINDOW_SPLIT_VIEWS
  /* the toolbar view's top bars: the header bar, the loading bar, then this */
  adw_toolbar_view_add_top_bar (ADW_TOOLBAR_VIEW (self->chat_pane), GTK_WIDGET (self->store_banner));
#else
  gtk_box_insert_child_after (GTK_BOX (self->chat_pane), GTK_WIDGET (self->store_banner),
                              GTK_WIDGET (self->load_progress));
#endif
  g_signal_connect_swapped (self->store_banner, "retry", G_CALLBACK (hanashi_application_retry_store), app);
  g_signal_connect_swapped (self->store_banner, "start-fresh", G_CALLBACK (hanashi_application_offer_fresh_store), app);
  g_signal_connect_object (app, "store-changed", G_CALLBACK (show_store), self, G_CONNECT_SWAPPED);
  show_store (self);
}
