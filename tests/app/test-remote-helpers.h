/* The remote-engine GUI tests' shared steps: the Models window's Servers page (adding a
 * server by its address and key, waiting for its models) and waiting for the window to
 * use a remote model.  See test-window-helpers.h for the window itself.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "hanashi-models-dialog.h"
#include "hanashi-remote-endpoints.h"
#include "test-window-helpers.h"
#include "test-xdg.h"

/* The start of a remote test's main: a private XDG tree, GTK, and the in-memory secret
 * store (no keyring in a test).  test_xdg_cleanup () after g_test_run. */
static inline void
remote_test_init (int *argc, char ***argv)
{
  test_xdg_setup ();
  hanashi_secret_store_set_default (hanashi_secret_store_memory ());
  gtk_test_init (argc, argv, NULL);
  adw_init ();
}

/* The first widget under @root named @name (gtk_widget_set_name) and, when @model is not
 * NULL, made for that model (the rows of a server's models carry it as "model" data). */
static inline GtkWidget *
find_named_for_model (GtkWidget *root, const char *name, const char *model)
{
  if (g_strcmp0 (gtk_widget_get_name (root), name) == 0
      && (model == NULL || g_strcmp0 (g_object_get_data (G_OBJECT (root), "model"), model) == 0))
    return root;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = find_named_for_model (child, name, model);
      if (found)
        return found;
    }
  return NULL;
}

/* Models → Servers, as the user opens it from the window. */
static inline HanashiModelsDialog *
open_models_dialog (HanashiWindow *window)
{
  gtk_widget_activate_action (GTK_WIDGET (window), "win.choose-model", NULL);
  HanashiModelsDialog *dialog = HANASHI_MODELS_DIALOG (find_toplevel (HANASHI_TYPE_MODELS_DIALOG));
  g_assert_nonnull (dialog);
  return dialog;
}

/* Types @url and @key into the Servers page and presses Add Server; the answer (the
 * server's models or a sentence) comes later, from the main loop. */
static inline void
add_server (HanashiModelsDialog *dialog, const char *url, const char *key)
{
  GtkWidget *url_row = find_named (GTK_WIDGET (dialog), "server-url-row");
  GtkWidget *key_row = find_named (GTK_WIDGET (dialog), "server-key-row");
  g_assert_nonnull (url_row);
  g_assert_nonnull (key_row);
  gtk_editable_set_text (GTK_EDITABLE (key_row), key);
  gtk_editable_set_text (GTK_EDITABLE (url_row), url);
  g_signal_emit_by_name (find_named (GTK_WIDGET (dialog), "add-server"), "clicked");
}

typedef struct {
  GtkWidget  *root;
  const char *model;
} ChatButtonWanted;

static inline gboolean
chat_button_shown (gpointer data)
{
  ChatButtonWanted *wanted = data;
  return find_named_for_model (wanted->root, "remote-model-chat", wanted->model) != NULL;
}

/* Waits for the server's @model to be listed in @dialog; returns its Chat button. */
static inline GtkWidget *
wait_for_chat_button (HanashiModelsDialog *dialog, const char *model)
{
  ChatButtonWanted wanted = { GTK_WIDGET (dialog), model };
  wait_until (chat_button_shown, &wanted);
  return find_named_for_model (GTK_WIDGET (dialog), "remote-model-chat", model);
}

typedef struct {
  HanashiWindow *window;
  const char    *name;
} ModelWanted;

static inline gboolean
model_is (gpointer data)
{
  ModelWanted *wanted = data;
  const HanashiModelInfo *info = hanashi_engine_get_model_info (hanashi_window_get_engine (wanted->window));
  return info != NULL && g_strcmp0 (info->name, wanted->name) == 0;
}

/* Runs the main loop until @window's engine uses the model called @name. */
static inline void
wait_for_model (HanashiWindow *window, const char *name)
{
  ModelWanted wanted = { window, name };
  wait_until (model_is, &wanted);
}
