/* hanashi-window-private.h — the window's instance struct and the functions its files
 * share: hanashi-window.c (the class, layout, status and chats pane),
 * hanashi-window-chat.c (the view of its HanashiChat), hanashi-window-store.c (the view
 * of the application's database) and hanashi-window-models.c (loading models).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "hanashi-chat.h"
#include "hanashi-chat-view.h"
#include "hanashi-composer.h"
#include "hanashi-params-panel.h"
#include "hanashi-sidebar.h"
#include "hanashi-store-recovery.h"
#include "hanashi-window.h"

G_BEGIN_DECLS

/* libadwaita 1.4 brought the adaptive split views, breakpoints and toolbar views (and
 * deprecated AdwLeaflet and AdwFlap): with it the window is built from
 * hanashi-window-split.ui, with Debian 12's 1.2 from hanashi-window.ui (docs/gui.md,
 * "Two libadwaitas").  Everything else is the same widgets. */
#define HANASHI_WINDOW_SPLIT_VIEWS ADW_CHECK_VERSION (1, 4, 0)

struct _HanashiWindow
{
  AdwApplicationWindow parent_instance;

  /* Template widgets */
  AdwToastOverlay    *toast_overlay;
  AdwToastOverlay    *chat_toast_overlay;  /* over the messages only, above the composer */
#if HANASHI_WINDOW_SPLIT_VIEWS
  AdwNavigationSplitView *split_view;    /* chats │ chat */
#else
  AdwLeaflet         *leaflet;
#endif
  HanashiSidebar     *sidebar;
  GtkWidget          *chat_pane;         /* a GtkBox, or with split views an AdwToolbarView */
  GtkLabel           *model_label;
  GtkWidget          *status_box;
  GtkLevelBar        *context_bar;
  GtkLabel           *status_label;
  GtkLabel           *runs_on_label;   /* under the model's name: where its layers run */
  GtkProgressBar     *load_progress;
#if HANASHI_WINDOW_SPLIT_VIEWS
  AdwOverlaySplitView *panel_split;      /* chat │ parameter panel */
#else
  AdwFlap            *flap;
#endif
  GtkStack           *main_stack;
  AdwStatusPage      *empty_page;
  GtkWidget          *recent_group;
  GtkListBox         *recent_list;
  HanashiChatView    *chat_view;
  HanashiComposer    *composer;
  HanashiParamsPanel *params_panel;

  /* Owned */
  GSettings          *settings;
  HanashiStore       *store;             /* the application's store, as shown (a view) */
  HanashiStoreBanner *store_banner;
  HanashiEngine      *engine;
  HanashiChat        *chat;              /* the conversation shown */
  gboolean            show_probabilities; /* the answers' token lens (win.show-probabilities) */
  GCancellable       *count_cancellable;
  GCancellable       *load_cancellable;
  guint               draft_count_source; /* recount the context shortly after typing */
  guint               lens_source;       /* fetch the lens's row shortly after a change */
  GCancellable       *lens_cancellable;
  /* a token picked in an answer that the lens shows instead of the next token (0: none) */
  gint64              lens_pick_message;
  guint               lens_pick_index;
  int                 context_used;      /* -1 while unknown */
  AdwToast           *undo_toast;        /* weak; the toast offering Undo, while shown */
  GSimpleActionGroup *chat_actions;      /* "chat.": the message actions and undo-delete */
  guint               undo_dismiss_source; /* takes the Undo toast away once the offer ends */
  guint               undo_toast_source;   /* shows it once the previous one has left */
  gint64              undo_toast_gone;     /* monotonic time an Undo toast last went away */
  gint64              undo_toast_shown;    /* monotonic time the Undo toast was added */
  guint               gpu_reload_source;   /* reloads the model shortly after the device setting changed */
  gboolean            gpu_reload_pending;  /* ... once the reply being written is finished */
};

/* hanashi-window.c */
void  _hanashi_window_toast_error            (HanashiWindow *self,
                                              const char    *what,
                                              const GError  *error);
AdwToastOverlay *_hanashi_window_get_toast_overlay (HanashiWindow *self);
void  _hanashi_window_update_main_page       (HanashiWindow *self);
void  _hanashi_window_show_chat_pane         (HanashiWindow *self);
void  _hanashi_window_update_thinking_switch (HanashiWindow *self);
void  _hanashi_window_update_status          (HanashiWindow *self);
/* hanashi-window-models.c: the line under the model's name saying where it runs */
void  _hanashi_window_update_runs_on         (HanashiWindow *self);
void  _hanashi_window_update_context_meter   (HanashiWindow *self);

/* hanashi-window-lens.c */
void  _hanashi_window_refresh_lens           (HanashiWindow *self);
void  _hanashi_window_dispose_lens           (HanashiWindow *self);
void  _hanashi_window_lens_wanted            (HanashiWindow *self);
void  _hanashi_window_show_token_in_lens     (HanashiWindow *self,
                                              gint64         message_id,
                                              guint          token_index);
void  _hanashi_window_class_init_lens        (GtkWidgetClass *widget_class);
void  _hanashi_window_update_actions         (HanashiWindow *self);
char *_hanashi_window_conversation_key       (gint64         id);
void  _hanashi_window_notify_conversation_id (HanashiWindow *self);
void  _hanashi_window_emit_conversations_changed (HanashiWindow *self);

/* hanashi-window-models.c: a conversation's engine ("" or a remote model's id) is saved
 * when a reply starts and when a remote model is chosen, and a remote one is used again
 * when the conversation is shown */
void  _hanashi_window_remember_engine        (HanashiWindow *self);
void  _hanashi_window_restore_engine         (HanashiWindow *self);

/* hanashi-window-chat.c */
void  _hanashi_window_class_init_chat        (GtkWidgetClass *widget_class);
void  _hanashi_window_bind_chat              (HanashiWindow  *self);

/* hanashi-window-store.c */
void     _hanashi_window_bind_store            (HanashiWindow *self);
gboolean _hanashi_window_ensure_writable_store (HanashiWindow *self);

/* hanashi-window-models.c */
void  _hanashi_window_class_init_models      (GtkWidgetClass *widget_class);
void  _hanashi_window_bind_models            (HanashiWindow  *self);
void  _hanashi_window_update_recent_models   (HanashiWindow  *self);
void  _hanashi_window_on_engine_state        (HanashiEngine  *engine,
                                              GParamSpec     *pspec,
                                              HanashiWindow  *self);

G_END_DECLS
