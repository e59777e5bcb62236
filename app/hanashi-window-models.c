/* hanashi-window-models.c — the window's models: opening a file, the recent models, the
 * Models dialog, and loading with a progress bar.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-window"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-chat.h"
#include "hanashi-composer.h"
#include "hanashi-engine-errors.h"
#include "hanashi-models-dialog.h"
#include "hanashi-remote-endpoints.h"
#include "hanashi-window-private.h"

#define MAX_RECENT_MODELS 8

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

void
_hanashi_window_update_recent_models (HanashiWindow *self)
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

/* How long the device setting must stay unchanged before the model is loaded again. */
#define GPU_RELOAD_DELAY_MS 500

/* ---- the graphics card ------------------------------------------------------------------ */

/* Preferences' "Graphics Card" group, for the loads from now on. */
static void
apply_gpu_settings (HanashiWindow *self)
{
  g_autofree char *device = g_settings_get_string (self->settings, "gpu-device");
  int layers = g_settings_get_int (self->settings, "gpu-layers");
  if (g_str_equal (device, "processor"))
    hanashi_engine_set_gpu (self->engine, NULL, 0);
  else
    hanashi_engine_set_gpu (self->engine, g_str_equal (device, "auto") ? NULL : device,
                            layers < 0 ? HANASHI_GPU_LAYERS_AUTO : layers);
}

void
_hanashi_window_update_runs_on (HanashiWindow *self)
{
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  g_autofree char *text = NULL;

  /* a model on a server runs wherever the server runs it */
  if (info != NULL && info->remote_url == NULL)
    {
      if (info->gpu_layers > 0 && info->gpu_device != NULL)
        /* Translators: where the model runs, under its name: a graphics card's name, then
         * how many of the model's layers it runs */
        text = g_strdup_printf (_("Runs on %s, %u of %u layers"), info->gpu_device, info->gpu_layers, info->n_layers);
      else if (info->gpu_notice != NULL)
        text = g_strdup (_("Runs on the processor: the graphics card could not be used"));
      else
        text = g_strdup (_("Runs on the processor"));
    }
  gtk_label_set_label (self->runs_on_label, text != NULL ? text : "");
  gtk_widget_set_visible (GTK_WIDGET (self->runs_on_label), text != NULL);
  /* the engine's reason, for whoever wants the detail */
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->runs_on_label), info != NULL ? info->gpu_notice : NULL);
}

static void
gpu_reload_now (HanashiWindow *self)
{
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  self->gpu_reload_pending = FALSE;
  if (info == NULL || info->path == NULL || info->remote_url != NULL)
    return;
  g_autoptr (GFile) file = g_file_new_for_path (info->path);
  hanashi_window_open_model (self, file);
}

/* A reply being written is never cut short: the model is loaded again after it. */
static gboolean
gpu_reload_due (gpointer data)
{
  HanashiWindow *self = data;
  self->gpu_reload_source = 0;
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  if (info == NULL || info->path == NULL || info->remote_url != NULL)
    return G_SOURCE_REMOVE;
  if (hanashi_chat_get_generating (self->chat))
    {
      if (!self->gpu_reload_pending)
        hanashi_window_add_toast (self, _("The model will be loaded again on the chosen device once the reply is finished."));
      self->gpu_reload_pending = TRUE;
    }
  else
    gpu_reload_now (self);
  return G_SOURCE_REMOVE;
}

/* A spin button changes the setting at every step: the reload waits for a pause. */
static void
on_gpu_setting_changed (HanashiWindow *self)
{
  g_clear_handle_id (&self->gpu_reload_source, g_source_remove);
  self->gpu_reload_source = g_timeout_add (GPU_RELOAD_DELAY_MS, gpu_reload_due, self);
}

static void
on_generating_changed (HanashiWindow *self)
{
  if (self->gpu_reload_pending && !hanashi_chat_get_generating (self->chat))
    gpu_reload_now (self);
}

/* The device chosen could not be used: the log keeps the engine's reason, the toast says
 * what it means. */
static void
toast_gpu_notice (HanashiWindow *self, const HanashiModelInfo *info)
{
  if (info->gpu_notice == NULL)
    return;
  g_message ("Graphics device not used: %s", info->gpu_notice);
  hanashi_window_add_toast (self, _("The graphics card could not be used, so the model runs on the processor."));
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
  hanashi_chat_end_reply (self->chat);
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
  apply_gpu_settings (self);
  load = g_new0 (ModelLoad, 1);
  load->window = g_object_ref (self);
  load->path = g_strdup (path);
  hanashi_engine_load_model_async (self->engine, path,
                                   chosen_context != NULL ? (guint) g_settings_get_int (self->settings, "context-size") : 0,
                                   (guint) g_settings_get_int (self->settings, "n-threads"),
                                   self->load_cancellable, load_done, load);
}

/* ---- remote models ---------------------------------------------------------------------- */

typedef struct {
  HanashiWindow *window;
  char          *url;
  char          *model;
  GCancellable  *cancellable;   /* the window's load_cancellable when this started */
} RemoteLoad;

static void
remote_load_free (RemoteLoad *load)
{
  g_object_unref (load->window);
  g_free (load->url);
  g_free (load->model);
  g_clear_object (&load->cancellable);
  g_free (load);
}

/* Names the model and its server and says why, and what stays loaded. */
static void
toast_remote_failure (HanashiWindow *self, RemoteLoad *load, const GError *error)
{
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  g_autofree char *reason = hanashi_describe_engine_error (error);
  /* Translators: the first %s is a model's name, the second its server's address */
  g_autofree char *what = g_strdup_printf (_("“%s” on %s could not be used."), load->model, load->url);
  g_autofree char *kept = info ? g_strdup_printf (_("“%s” is still loaded."), info->name) : NULL;
  g_autofree char *text = g_strjoin (" ", what, reason, kept, NULL);
  g_message ("Remote model %s at %s not loaded: %s", load->model, load->url, error->message);
  hanashi_window_add_toast (self, text);
}

static gboolean
load_is_current (HanashiWindow *self, RemoteLoad *load)
{
  return load->cancellable == self->load_cancellable && !g_cancellable_is_cancelled (load->cancellable);
}

static void
remote_load_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  RemoteLoad *load = user_data;
  HanashiWindow *self = load->window;
  g_autoptr (GError) error = NULL;

  if (!hanashi_engine_load_model_finish (HANASHI_ENGINE (source), result, &error))
    {
      if (!g_error_matches (error, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_CANCELLED) &&
          !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        toast_remote_failure (self, load, error);
    }
  else
    _hanashi_window_remember_engine (self);
  if (load->cancellable == self->load_cancellable)
    {
      gtk_widget_set_visible (GTK_WIDGET (self->load_progress), FALSE);
      g_clear_object (&self->load_cancellable);
    }
  remote_load_free (load);
}

static void
remote_connected (GObject *source, GAsyncResult *result, gpointer user_data)
{
  RemoteLoad *load = user_data;
  HanashiWindow *self = load->window;
  g_autoptr (GError) error = NULL;
  (void) source;
  HanashiRemote *remote = hanashi_remote_connect_finish (result, NULL, NULL, &error);
  if (remote == NULL || !load_is_current (self, load))
    {
      if (remote == NULL && load_is_current (self, load))
        toast_remote_failure (self, load, error);
      if (load->cancellable == self->load_cancellable)
        {
          gtk_widget_set_visible (GTK_WIDGET (self->load_progress), FALSE);
          g_clear_object (&self->load_cancellable);
        }
      if (remote)
        hanashi_remote_unref (remote);
      remote_load_free (load);
      return;
    }
  hanashi_engine_load_remote_async (self->engine, remote, load->model, load->cancellable, remote_load_done, load);
  hanashi_remote_unref (remote);
}

void
hanashi_window_use_remote_model (HanashiWindow *self,
                                 const char    *url,
                                 const char    *model)
{
  g_return_if_fail (HANASHI_IS_WINDOW (self));
  g_return_if_fail (url != NULL && model != NULL);

  hanashi_chat_end_reply (self->chat);
  g_cancellable_cancel (self->load_cancellable);
  g_clear_object (&self->load_cancellable);
  self->load_cancellable = g_cancellable_new ();
  gtk_progress_bar_set_fraction (self->load_progress, 0);
  gtk_widget_set_visible (GTK_WIDGET (self->load_progress), TRUE);
  gtk_progress_bar_pulse (self->load_progress);
  RemoteLoad *load = g_new0 (RemoteLoad, 1);
  load->window = g_object_ref (self);
  load->url = g_strdup (url);
  load->model = g_strdup (model);
  load->cancellable = g_object_ref (self->load_cancellable);
  /* The key comes from the keyring on a worker thread, then the engine checks the model. */
  hanashi_remote_connect_async (url, NULL, load->cancellable, remote_connected, load);
}

/* The engine id of the model in use: a remote one's, or "" for a model file. */
static char *
current_engine_id (HanashiWindow *self)
{
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);
  if (info == NULL || info->remote_url == NULL)
    return g_strdup ("");
  return hanashi_remote_engine_id (info->remote_url, info->name);
}

void
_hanashi_window_remember_engine (HanashiWindow *self)
{
  gint64 id = hanashi_chat_get_conversation_id (self->chat);
  if (self->store == NULL || id <= 0 || hanashi_engine_get_model_info (self->engine) == NULL)
    return;
  g_autofree char *engine = current_engine_id (self);
  g_autoptr (GError) error = NULL;
  if (!hanashi_store_set_conversation_engine (self->store, id, engine, &error))
    g_debug ("The conversation's engine was not saved: %s", error->message);
}

void
_hanashi_window_restore_engine (HanashiWindow *self)
{
  gint64 id = hanashi_chat_get_conversation_id (self->chat);
  if (self->store == NULL || id <= 0)
    return;
  g_autoptr (HanashiStoredConversation) conversation = hanashi_store_dup_conversation (self->store, id, NULL);
  g_autofree char *url = NULL, *model = NULL;
  if (conversation == NULL || !hanashi_remote_engine_id_parse (conversation->engine, &url, &model))
    return;
  g_autofree char *current = current_engine_id (self);
  if (g_strcmp0 (current, conversation->engine) != 0)
    hanashi_window_use_remote_model (self, url, model);
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
  if (info->path != NULL)
    remember_model (self, info->path);
  hanashi_params_panel_set_remote (self->params_panel, info->remote_url != NULL, info->remote_is_hanashi);
  toast_gpu_notice (self, info);
  _hanashi_window_update_thinking_switch (self);
  self->context_used = -1;
  _hanashi_window_update_context_meter (self);
}

void
_hanashi_window_on_engine_state (HanashiEngine *engine,
                 GParamSpec    *pspec,
                 HanashiWindow *self)
{
  gboolean loaded = hanashi_engine_get_model_info (engine) != NULL;
  gboolean was_empty = g_strcmp0 (gtk_stack_get_visible_child_name (self->main_stack), "empty") == 0;

  _hanashi_window_update_main_page (self);
  _hanashi_window_update_thinking_switch (self);
  /* Once a model is there, typing goes straight into the composer. */
  if (loaded && was_empty)
    gtk_widget_grab_focus (GTK_WIDGET (self->composer));
  _hanashi_window_update_status (self);
  _hanashi_window_update_actions (self);
}

/* GtkFileChooserNative is what GTK 4.8 has; GTK 4.10 deprecated it for GtkFileDialog but
 * keeps it working (through the portal inside Flatpak either way), so newer GTKs use it too. */
G_GNUC_BEGIN_IGNORE_DEPRECATIONS
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
G_GNUC_END_IGNORE_DEPRECATIONS

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
on_model_loaded_for_dialog (HanashiEngine       *engine,
                            HanashiModelInfo    *info,
                            HanashiModelsDialog *dialog)
{
  hanashi_models_dialog_set_loaded_model (dialog, info->path);
}

static void
on_remote_model_activated (HanashiModelsDialog *dialog,
                           const char          *url,
                           const char          *model,
                           HanashiWindow       *self)
{
  hanashi_window_use_remote_model (self, url, model);
  gtk_window_close (GTK_WINDOW (dialog));
}

static void
choose_model_action (GtkWidget  *widget,
                     const char *action_name,
                     GVariant   *parameter)
{
  HanashiWindow *self = HANASHI_WINDOW (widget);
  HanashiModelsDialog *dialog = hanashi_models_dialog_new (GTK_WINDOW (self));
  const HanashiModelInfo *info = hanashi_engine_get_model_info (self->engine);

  /* The loaded model's file stays while it is loaded (its weights are mapped from it). */
  hanashi_models_dialog_set_loaded_model (dialog, info ? info->path : NULL);
  g_signal_connect_object (self->engine, "model-loaded", G_CALLBACK (on_model_loaded_for_dialog), dialog, 0);

  g_signal_connect_object (dialog, "model-activated", G_CALLBACK (on_model_activated), self, 0);
  g_signal_connect_object (dialog, "remote-model-activated", G_CALLBACK (on_remote_model_activated), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}


void
_hanashi_window_bind_models (HanashiWindow *self)
{
  g_signal_connect_object (self->settings, "changed::recent-models",
                           G_CALLBACK (_hanashi_window_update_recent_models), self, G_CONNECT_SWAPPED);
  g_signal_connect (self->engine, "load-progress", G_CALLBACK (on_load_progress), self);
  g_signal_connect (self->engine, "model-loaded", G_CALLBACK (on_model_loaded), self);
  g_signal_connect (self->engine, "notify::state", G_CALLBACK (_hanashi_window_on_engine_state), self);
  g_signal_connect (self->engine, "notify::model-info", G_CALLBACK (_hanashi_window_on_engine_state), self);
  g_signal_connect_object (self->settings, "changed::gpu-device", G_CALLBACK (on_gpu_setting_changed), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->settings, "changed::gpu-layers", G_CALLBACK (on_gpu_setting_changed), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->chat, "notify::generating", G_CALLBACK (on_generating_changed), self,
                           G_CONNECT_SWAPPED);
  _hanashi_window_update_recent_models (self);
}

void
_hanashi_window_class_init_models (GtkWidgetClass *widget_class)
{
  gtk_widget_class_install_action (widget_class, "win.open-model", NULL, open_model_action);
  gtk_widget_class_install_action (widget_class, "win.open-recent", "s", open_recent_action);
  gtk_widget_class_install_action (widget_class, "win.choose-model", NULL, choose_model_action);
}
