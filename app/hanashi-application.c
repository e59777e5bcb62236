/* hanashi-application.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-application"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-application.h"
#include "hanashi-preferences-window.h"
#include "hanashi-store-recovery.h"
#include "hanashi-window.h"

/* Another program's lock on the database goes away by itself: try again this often (s). */
#define STORE_RETRY_INTERVAL_S 3

struct _HanashiApplication
{
  AdwApplication parent_instance;

  /* Owned */
  HanashiEngine    *engine;
  HanashiServing   *serving;
  GSettings        *settings;

  /* The conversation database, shared by every window; see hanashi-application.h. */
  gboolean          store_opened;      /* the first open has happened */
  char             *store_path;
  HanashiStore     *store;             /* NULL while it cannot be opened at all */
  GError           *store_problem;     /* why it is missing or read-only, or NULL */
  GCancellable     *store_cancellable; /* the reopen running on a worker thread */
  guint             store_retry_source;
  gboolean          store_fresh_offer_pending; /* damaged: ask once a window is shown */
  AdwMessageDialog *fresh_dialog;      /* weak: the one "Start fresh?" question, while open */
};

enum {
  SIGNAL_STORE_CHANGED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (HanashiApplication, hanashi_application, ADW_TYPE_APPLICATION)

HanashiApplication *
hanashi_application_new (void)
{
  return g_object_new (HANASHI_TYPE_APPLICATION,
                       "application-id", APP_ID,
                       "flags", G_APPLICATION_HANDLES_OPEN,
                       "resource-base-path", "/io/github/hanashi/Hanashi",
                       NULL);
}

static void
apply_session_limit (HanashiApplication *self)
{
  /* The limit applies to every save, so a change in Preferences takes effect at once. */
  hanashi_engine_set_session_cache_limit (self->engine,
                                          (guint64) g_settings_get_int (self->settings, "session-cache-limit-mb") << 20);
}

static void tell (GtkWindow *window, const char *message);

/* Serving went off (a port in use, network without a key): the window says so, since
 * Preferences, where it was turned on, may be closed by now. */
static void
on_serving_failed (HanashiApplication *self,
                   const char         *message)
{
  /* the most recently focused chat window (Preferences may be the active one) */
  GtkWindow *window = NULL;
  for (GList *l = gtk_application_get_windows (GTK_APPLICATION (self)); l != NULL && window == NULL; l = l->next)
    if (HANASHI_IS_WINDOW (l->data))
      window = l->data;
  tell (window, message);
}

HanashiEngine *
hanashi_application_get_engine (HanashiApplication *self)
{
  g_return_val_if_fail (HANASHI_IS_APPLICATION (self), NULL);

  if (self->engine == NULL)
    {
      self->engine = hanashi_engine_new ();
      self->settings = g_settings_new (APP_ID);
      apply_session_limit (self);
      g_signal_connect_object (self->settings, "changed::session-cache-limit-mb",
                               G_CALLBACK (apply_session_limit), self, G_CONNECT_SWAPPED);
      /* serving starts with the engine when it was left on */
      self->serving = hanashi_serving_new (self->engine, self->settings);
      g_signal_connect_object (self->serving, "failed", G_CALLBACK (on_serving_failed), self, G_CONNECT_SWAPPED);
    }
  return self->engine;
}

HanashiServing *
hanashi_application_get_serving (HanashiApplication *self)
{
  g_return_val_if_fail (HANASHI_IS_APPLICATION (self), NULL);
  hanashi_application_get_engine (self);
  return self->serving;
}

/* ---- the conversation database ------------------------------------------------------------ */

static void reopen_store_async (HanashiApplication *self);

static gboolean
retry_store_timeout (gpointer data)
{
  HanashiApplication *self = data;
  self->store_retry_source = 0;
  reopen_store_async (self);
  return G_SOURCE_REMOVE;
}

/* Takes @problem (NULL: the store is writable).  A lock held by another program is retried
 * on its own; the other problems wait for the user (Try Again, sending, Start Fresh). */
static void
set_store_problem (HanashiApplication *self,
                   GError             *problem)
{
  g_clear_error (&self->store_problem);
  self->store_problem = problem;
  if (g_error_matches (problem, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_BUSY) &&
      self->store_retry_source == 0 && self->store_cancellable == NULL)
    self->store_retry_source = g_timeout_add_seconds (STORE_RETRY_INTERVAL_S, retry_store_timeout, self);
  self->store_fresh_offer_pending =
    self->store == NULL && g_error_matches (problem, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_CORRUPT);
}

/* A store opened again replaces the one the windows show (same file, so their chats stay). */
static void
replace_store (HanashiApplication *self,
               HanashiStore       *store,
               GError             *problem)
{
  if (store == NULL && self->store != NULL && problem != NULL)
    {
      /* Still not writable: keep showing what could be read. */
      g_error_free (problem);
      return;
    }
  g_set_object (&self->store, store);
  set_store_problem (self, problem);
  g_signal_emit (self, signals[SIGNAL_STORE_CHANGED], 0);
}

static void
store_reopened (GObject      *source,
                GAsyncResult *result,
                gpointer      user_data)
{
  g_autoptr (HanashiApplication) self = user_data;
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
reopen_store_async (HanashiApplication *self)
{
  if (self->store_cancellable != NULL)
    return;
  g_clear_handle_id (&self->store_retry_source, g_source_remove);
  self->store_cancellable = g_cancellable_new ();
  hanashi_store_open_best_async (self->store_path, self->store_cancellable, store_reopened, g_object_ref (self));
}

/* Closes what is open and opens the database again, here and now.  The read-only
 * connection goes first, from every window too: while it is open, SQLite hands a new
 * connection to the same file the read-only descriptor it keeps for its locks, and the new
 * one is read-only too. */
static void
reopen_store_now (HanashiApplication *self)
{
  GError *problem = NULL;
  g_autoptr (HanashiStore) store = NULL;

  if (self->store != NULL)
    {
      g_clear_object (&self->store);
      g_signal_emit (self, signals[SIGNAL_STORE_CHANGED], 0);
    }
  store = hanashi_store_open_best (self->store_path, &problem);
  replace_store (self, store, problem);
}

static void
open_store_once (HanashiApplication *self)
{
  GError *problem = NULL;

  if (self->store_opened)
    return;
  self->store_opened = TRUE;
  self->store_path = hanashi_store_dup_default_path ();
  self->store = hanashi_store_open_best (self->store_path, &problem);
  set_store_problem (self, problem);
}

HanashiStore *
hanashi_application_get_store (HanashiApplication *self)
{
  g_return_val_if_fail (HANASHI_IS_APPLICATION (self), NULL);
  open_store_once (self);
  return self->store;
}

const GError *
hanashi_application_get_store_problem (HanashiApplication *self)
{
  g_return_val_if_fail (HANASHI_IS_APPLICATION (self), NULL);
  open_store_once (self);
  return self->store_problem;
}

void
hanashi_application_retry_store (HanashiApplication *self)
{
  g_return_if_fail (HANASHI_IS_APPLICATION (self));
  open_store_once (self);
  /* A read-only database is reopened at once (nothing waits for a lock there); a missing
   * one on a worker thread, as it may be locked. */
  if (self->store != NULL)
    reopen_store_now (self);
  else
    reopen_store_async (self);
}

gboolean
hanashi_application_ensure_writable_store (HanashiApplication *self)
{
  g_return_val_if_fail (HANASHI_IS_APPLICATION (self), FALSE);
  open_store_once (self);
  if (self->store != NULL && self->store_problem == NULL)
    return TRUE;
  /* A lock is already being retried in the background; opening here would wait for it. */
  if (self->store_cancellable == NULL &&
      !g_error_matches (self->store_problem, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_BUSY))
    reopen_store_now (self);
  return self->store != NULL && self->store_problem == NULL;
}

/* Says @message on @window when it is one of ours (toasts live in the window). */
static void
tell (GtkWindow  *window,
      const char *message)
{
  if (window != NULL && HANASHI_IS_WINDOW (window))
    hanashi_window_add_toast (HANASHI_WINDOW (window), message);
  else
    g_message ("%s", message);
}

static void
start_fresh_store (HanashiApplication *self,
                   GtkWindow          *window)
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
      tell (window, error->message);
      return;
    }
  store = hanashi_store_open_best (self->store_path, &problem);
  replace_store (self, store, problem);
  aside_name = g_path_get_basename (aside);
  /* Translators: %s is the file name the damaged database was given */
  text = g_strdup_printf (_("A fresh conversation database was started. The damaged one was kept as “%s”."), aside_name);
  tell (window, text);
}

static void
on_fresh_store_response (AdwMessageDialog   *dialog,
                         const char         *response,
                         HanashiApplication *self)
{
  if (g_strcmp0 (response, "fresh") == 0)
    start_fresh_store (self, gtk_window_get_transient_for (GTK_WINDOW (dialog)));
}

void
hanashi_application_offer_fresh_store (HanashiApplication *self)
{
  AdwMessageDialog *dialog;
  GtkWindow *window;

  g_return_if_fail (HANASHI_IS_APPLICATION (self));
  self->store_fresh_offer_pending = FALSE;
  if (self->store != NULL || self->store_problem == NULL)
    return;
  /* One question for the whole application, however many windows ask it. */
  if (self->fresh_dialog != NULL)
    {
      gtk_window_present (GTK_WINDOW (self->fresh_dialog));
      return;
    }
  window = gtk_application_get_active_window (GTK_APPLICATION (self));
  /* AdwMessageDialog is deprecated from libadwaita 1.6 (AdwAlertDialog) but still works;
   * the tests of this offer look for it, so every version shows the same dialog. */
  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  dialog = ADW_MESSAGE_DIALOG (adw_message_dialog_new (window, _("Start a Fresh Conversation Database?"), NULL));
  /* Translators: %s says which file is damaged and how */
  adw_message_dialog_format_body (dialog, _("%s\n\nThe damaged file is kept beside it under a new name, so nothing in it is deleted, and a new, empty database takes its place."),
                                  self->store_problem->message);
  adw_message_dialog_add_responses (dialog, "cancel", _("_Not Now"), "fresh", _("_Start Fresh"), NULL);
  adw_message_dialog_set_response_appearance (dialog, "fresh", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (dialog, "fresh");
  adw_message_dialog_set_close_response (dialog, "cancel");
  G_GNUC_END_IGNORE_DEPRECATIONS
  g_signal_connect_object (dialog, "response", G_CALLBACK (on_fresh_store_response), self, 0);
  g_set_weak_pointer (&self->fresh_dialog, dialog);
  gtk_window_present (GTK_WINDOW (dialog));
}

/* The offer waits for a window: a dialog for a window not on screen yet has nowhere to go. */
static void
on_window_mapped (HanashiApplication *self)
{
  if (self->store_fresh_offer_pending)
    hanashi_application_offer_fresh_store (self);
}

static void
hanashi_application_window_added (GtkApplication *app,
                                  GtkWindow      *window)
{
  GTK_APPLICATION_CLASS (hanashi_application_parent_class)->window_added (app, window);
  if (HANASHI_IS_WINDOW (window))
    g_signal_connect_object (window, "map", G_CALLBACK (on_window_mapped), app, G_CONNECT_SWAPPED);
}

/* ---- windows and actions ------------------------------------------------------------------ */

static HanashiWindow *
get_or_create_window (HanashiApplication *self)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (self));
  if (window == NULL)
    window = GTK_WINDOW (hanashi_window_new (self));
  return HANASHI_WINDOW (window);
}

static void
hanashi_application_activate (GApplication *app)
{
  gtk_window_present (GTK_WINDOW (get_or_create_window (HANASHI_APPLICATION (app))));
}

static void
hanashi_application_open (GApplication  *app,
                          GFile        **files,
                          int            n_files,
                          const char    *hint)
{
  HanashiWindow *window = get_or_create_window (HANASHI_APPLICATION (app));
  /* One model at a time: the last file named wins. */
  if (n_files > 0)
    hanashi_window_open_model (window, files[n_files - 1]);
  gtk_window_present (GTK_WINDOW (window));
}

static void
about_action (GSimpleAction *action,
              GVariant      *parameter,
              gpointer       user_data)
{
  HanashiApplication *self = user_data;
  const char *developers[] = { "The Hanashi developers", NULL };

  GtkWindow *parent = gtk_application_get_active_window (GTK_APPLICATION (self));

  /* libadwaita 1.5 replaced the about window with an adaptive dialog; Debian 12's 1.2
   * (the tested build) keeps the window.  Both take the same properties. */
#define HANASHI_ABOUT_PROPERTIES \
                         "application-name", _("Hanashi"), \
                         "application-icon", APP_ID, \
                         "developer-name", _("The Hanashi developers"), \
                         "version", VERSION, \
                         "developers", developers, \
                         "copyright", "© 2026 The Hanashi developers", \
                         "license-type", GTK_LICENSE_GPL_3_0, \
                         "comments", _("Chat with language models that run on your own computer"), \
                         "website", "https://github.com/hanashi/hanashi", \
                         "issue-url", "https://github.com/hanashi/hanashi/issues", \
                         /* Translators: replace with your names, one per line */ \
                         "translator-credits", _("translator-credits")
#if ADW_CHECK_VERSION (1, 5, 0)
  adw_show_about_dialog (parent ? GTK_WIDGET (parent) : NULL, HANASHI_ABOUT_PROPERTIES, NULL);
#else
  adw_show_about_window (parent, HANASHI_ABOUT_PROPERTIES, NULL);
#endif
#undef HANASHI_ABOUT_PROPERTIES
}

static void
preferences_action (GSimpleAction *action,
                    GVariant      *parameter,
                    gpointer       user_data)
{
  HanashiWindow *window = get_or_create_window (HANASHI_APPLICATION (user_data));
  HanashiPreferencesWindow *preferences =
    hanashi_preferences_window_new (GTK_WINDOW (window), hanashi_application_get_engine (HANASHI_APPLICATION (user_data)));

  hanashi_preferences_window_set_serving (preferences, hanashi_application_get_serving (HANASHI_APPLICATION (user_data)));
  hanashi_preferences_window_present (preferences, GTK_WINDOW (window));
}

static void
shortcuts_action (GSimpleAction *action,
                  GVariant      *parameter,
                  gpointer       user_data)
{
  HanashiWindow *window = get_or_create_window (HANASHI_APPLICATION (user_data));

  /* GtkApplicationWindow builds the window from gtk/help-overlay.ui in our resources. */
  gtk_widget_activate_action (GTK_WIDGET (window), "win.show-help-overlay", NULL);
}

static void
quit_action (GSimpleAction *action,
             GVariant      *parameter,
             gpointer       user_data)
{
  g_application_quit (G_APPLICATION (user_data));
}

static const GActionEntry app_actions[] = {
  { "about", about_action },
  { "preferences", preferences_action },
  { "shortcuts", shortcuts_action },
  { "quit", quit_action },
};

static void
hanashi_application_startup (GApplication *app)
{
  G_APPLICATION_CLASS (hanashi_application_parent_class)->startup (app);

  g_action_map_add_action_entries (G_ACTION_MAP (app), app_actions, G_N_ELEMENTS (app_actions), app);
  /* "Serve the loaded model" on and off: "app.serve-enabled", the setting's own action, for
   * scripts (gapplication action io.github.hanashi.Hanashi serve-enabled) and tests */
  {
    g_autoptr (GSettings) settings = g_settings_new (APP_ID);
    g_autoptr (GAction) serve = g_settings_create_action (settings, "serve-enabled");
    g_action_map_add_action (G_ACTION_MAP (app), serve);
  }
  static const struct {
    const char *action;
    const char *accels[2];
  } accels[] = {
    { "app.quit", { "<primary>q", NULL } },
    { "app.preferences", { "<primary>comma", NULL } },
    { "win.open-model", { "<primary>o", NULL } },
    { "win.new-chat", { "<primary>n", NULL } },
    { "win.search", { "<primary>f", NULL } },
    { "win.toggle-panel", { "<primary><shift>p", NULL } },
    { "win.show-probabilities", { "<primary><shift>l", NULL } },
    { "win.stop", { "Escape", NULL } },
    /* The composer's own Ctrl+Z comes first while it has something to undo. */
    { "chat.undo-delete", { "<primary>z", NULL } },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (accels); i++)
    gtk_application_set_accels_for_action (GTK_APPLICATION (app), accels[i].action, accels[i].accels);
}

/* The port closes when the app quits, before the windows and the engine go. */
static void
hanashi_application_shutdown (GApplication *app)
{
  g_clear_object (&HANASHI_APPLICATION (app)->serving);
  G_APPLICATION_CLASS (hanashi_application_parent_class)->shutdown (app);
}

static void
hanashi_application_dispose (GObject *object)
{
  HanashiApplication *self = HANASHI_APPLICATION (object);

  g_clear_object (&self->serving);
  g_clear_object (&self->settings);
  g_clear_object (&self->engine);
  g_clear_handle_id (&self->store_retry_source, g_source_remove);
  g_cancellable_cancel (self->store_cancellable);
  g_clear_object (&self->store_cancellable);
  g_clear_weak_pointer (&self->fresh_dialog);
  g_clear_object (&self->store);
  g_clear_error (&self->store_problem);
  g_clear_pointer (&self->store_path, g_free);
  G_OBJECT_CLASS (hanashi_application_parent_class)->dispose (object);
}

static void
hanashi_application_class_init (HanashiApplicationClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GApplicationClass *app_class = G_APPLICATION_CLASS (klass);
  GtkApplicationClass *gtk_app_class = GTK_APPLICATION_CLASS (klass);

  object_class->dispose = hanashi_application_dispose;
  app_class->activate = hanashi_application_activate;
  app_class->open = hanashi_application_open;
  app_class->startup = hanashi_application_startup;
  app_class->shutdown = hanashi_application_shutdown;
  gtk_app_class->window_added = hanashi_application_window_added;

  signals[SIGNAL_STORE_CHANGED] = g_signal_new ("store-changed", G_TYPE_FROM_CLASS (klass),
                                                G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void
hanashi_application_init (HanashiApplication *self)
{
}
