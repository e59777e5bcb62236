/* hanashi-models-dialog.c: the Models page.
 *
 * Downloads belong to the process, not to one dialog: closing the dialog does not stop
 * them, and a dialog opened later shows their rows again.  A download's address is kept
 * next to its .part file (FILE.part.uri) so it can be resumed after a restart.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-models-dialog"

#include "config.h"

#include <errno.h>
#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "hanashi-catalog.h"
#include "hanashi-model-scan.h"
#include "hanashi-models-dialog.h"
#include "hanashi-remote-endpoints.h"

struct _HanashiModelsDialog
{
  AdwWindow parent_instance;

  AdwToastOverlay     *toast_overlay;
  AdwViewStack        *stack;
  AdwPreferencesGroup *installed_group;
  AdwPreferencesGroup *downloads_group;
  AdwPreferencesGroup *curated_group;
  AdwPreferencesGroup *custom_group;
  AdwEntryRow         *address_row;
  AdwEntryRow         *file_row;
  AdwEntryRow         *sha256_row;
  GtkButton           *custom_download_button;
  GtkButton           *refresh_button;
  AdwPreferencesGroup *server_models_group;
  AdwEntryRow         *server_url_row;
  AdwEntryRow         *server_key_row;
  GtkButton           *add_server_button;
  GPtrArray           *server_rows;      /* GtkWidget* in server_models_group */
  GCancellable        *servers_cancellable;

  GPtrArray           *installed_rows;   /* GtkWidget*, to remove on refresh */
  GPtrArray           *download_rows;    /* DownloadRow* */
  GPtrArray           *models;           /* HanashiLocalModel*, last scan */
  GPtrArray           *catalog;          /* HanashiCatalogEntry*, the recommended models */
  GCancellable        *cancellable;
  GSettings           *settings;
  char                *loaded_model;     /* the engine's model file, or NULL */
};

G_DEFINE_FINAL_TYPE (HanashiModelsDialog, hanashi_models_dialog, ADW_TYPE_WINDOW)

enum { SIGNAL_MODEL_ACTIVATED, SIGNAL_MODELS_CHANGED, SIGNAL_REMOTE_MODEL_ACTIVATED, N_SIGNALS };
static guint signals[N_SIGNALS];

/* Every download of this process, newest last. */
static GPtrArray *all_downloads;

static GPtrArray *
get_all_downloads (void)
{
  if (!all_downloads)
    all_downloads = g_ptr_array_new_with_free_func (g_object_unref);
  return all_downloads;
}

static char *
format_size (guint64 bytes)
{
  return g_format_size_full (bytes, G_FORMAT_SIZE_DEFAULT);
}

static void
show_toast (HanashiModelsDialog *self, const char *text)
{
  AdwToast *toast = adw_toast_new (text);
  adw_toast_set_timeout (toast, 6);
  adw_toast_overlay_add_toast (self->toast_overlay, toast);
}

/* ---- installed models -------------------------------------------------------------------- */

static void
on_open_clicked (GtkButton *button, HanashiModelsDialog *self)
{
  const char *path = g_object_get_data (G_OBJECT (button), "path");
  g_autofree char *copy = g_strdup (path);
  g_signal_emit (self, signals[SIGNAL_MODEL_ACTIVATED], 0, copy);
  gtk_window_close (GTK_WINDOW (self));
}

static void
on_launch_folder_done (GObject *source, GAsyncResult *result, gpointer data)
{
  g_autoptr (GError) error = NULL;
  if (!g_app_info_launch_default_for_uri_finish (result, &error))
    g_message ("Could not show the model folder: %s", error->message);
}

typedef struct {
  char *uri;
  char *folder_uri;
} RevealData;

static void
reveal_data_free (RevealData *data)
{
  g_free (data->uri);
  g_free (data->folder_uri);
  g_free (data);
}

static void
on_show_items_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  RevealData *data = user_data;
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), result, &error);
  /* Without a file manager service, open the folder itself. */
  if (!reply)
    g_app_info_launch_default_for_uri_async (data->folder_uri, NULL, NULL, on_launch_folder_done, NULL);
  reveal_data_free (data);
}

static void
on_session_bus (GObject *source, GAsyncResult *result, gpointer user_data)
{
  RevealData *data = user_data;
  g_autoptr (GDBusConnection) bus = g_bus_get_finish (result, NULL);
  if (!bus)
    {
      g_app_info_launch_default_for_uri_async (data->folder_uri, NULL, NULL, on_launch_folder_done, NULL);
      reveal_data_free (data);
      return;
    }
  const char *uris[] = { data->uri, NULL };
  g_dbus_connection_call (bus, "org.freedesktop.FileManager1", "/org/freedesktop/FileManager1",
                          "org.freedesktop.FileManager1", "ShowItems",
                          g_variant_new ("(^ass)", uris, ""), NULL, G_DBUS_CALL_FLAGS_NONE, 5000,
                          NULL, on_show_items_done, data);
}

static void
on_reveal_clicked (GtkButton *button, HanashiModelsDialog *self)
{
  const char *path = g_object_get_data (G_OBJECT (button), "path");
  g_autoptr (GFile) file = g_file_new_for_path (path);
  g_autoptr (GFile) folder = g_file_get_parent (file);
  RevealData *data = g_new0 (RevealData, 1);
  data->uri = g_file_get_uri (file);
  data->folder_uri = g_file_get_uri (folder);
  g_bus_get (G_BUS_TYPE_SESSION, NULL, on_session_bus, data);
}

typedef struct {
  HanashiModelsDialog *self;
  char *path;
} DeleteData;

static void
delete_data_free (DeleteData *data)
{
  g_object_unref (data->self);
  g_free (data->path);
  g_free (data);
}

static void
on_delete_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  DeleteData *data = user_data;
  g_autoptr (GError) error = NULL;
  if (!g_file_delete_finish (G_FILE (source), result, &error))
    {
      g_autofree char *text = g_strdup_printf (_("Could not delete the model: %s"), error->message);
      show_toast (data->self, text);
    }
  hanashi_models_dialog_refresh (data->self);
  delete_data_free (data);
}

/* Whether @path is the loaded model, under this name or another (a link, another spelling
 * of the same folder): the same file on the same device. */
static gboolean
is_loaded_model (HanashiModelsDialog *self, const char *path)
{
  if (!self->loaded_model)
    return FALSE;
  g_autofree char *a = g_canonicalize_filename (path, NULL);
  g_autofree char *b = g_canonicalize_filename (self->loaded_model, NULL);
  if (g_str_equal (a, b))
    return TRUE;
  GStatBuf sa, sb;
  return g_stat (a, &sa) == 0 && g_stat (b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static void
refuse_loaded_delete (HanashiModelsDialog *self, const char *name)
{
  /* Translators: %s is a model's name */
  g_autofree char *text = g_strdup_printf (_("“%s” is in use. Open another model before deleting it."), name);
  show_toast (self, text);
}

static void
on_delete_response (GtkWidget *dialog, const char *response, DeleteData *data)
{
  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();
  g_autofree char *folder = g_path_get_dirname (data->path);
  g_autofree char *canonical_folder = g_canonicalize_filename (folder, NULL);
  g_autofree char *canonical_app_folder = g_canonicalize_filename (app_folder, NULL);
  if (g_strcmp0 (response, "delete") == 0 && is_loaded_model (data->self, data->path))
    {
      /* Loaded while the question was open. */
      g_autofree char *name = g_path_get_basename (data->path);
      refuse_loaded_delete (data->self, name);
      delete_data_free (data);
      return;
    }
  /* Only the app's own downloads are deleted, whatever the caller passed: the file must sit
   * directly in the app's models folder ("models/../x" is not in it). */
  if (g_strcmp0 (response, "delete") == 0 && g_strcmp0 (canonical_folder, canonical_app_folder) == 0)
    {
      g_autoptr (GFile) file = g_file_new_for_path (data->path);
      g_file_delete_async (file, G_PRIORITY_DEFAULT, NULL, on_delete_done, data);
      return;
    }
  delete_data_free (data);
}

/* AdwMessageDialog is what libadwaita 1.2 has (AdwAlertDialog came in 1.5). */
G_GNUC_BEGIN_IGNORE_DEPRECATIONS
static void
on_delete_clicked (GtkButton *button, HanashiModelsDialog *self)
{
  const char *path = g_object_get_data (G_OBJECT (button), "path");
  const char *name = g_object_get_data (G_OBJECT (button), "name");
  if (is_loaded_model (self, path))
    {
      refuse_loaded_delete (self, name);
      return;
    }
  g_autofree char *body = g_strdup_printf (_("“%s” will be removed from this computer. You can download it again later."), name);
  GtkWidget *dialog = adw_message_dialog_new (GTK_WINDOW (self), _("Delete Model?"), body);
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog), "cancel", _("_Cancel"), "delete", _("_Delete"), NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "delete", ADW_RESPONSE_DESTRUCTIVE);
  adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  DeleteData *data = g_new0 (DeleteData, 1);
  data->self = g_object_ref (self);
  data->path = g_strdup (path);
  g_signal_connect (dialog, "response", G_CALLBACK (on_delete_response), data);
  gtk_window_present (GTK_WINDOW (dialog));
}
G_GNUC_END_IGNORE_DEPRECATIONS

static GtkWidget *
icon_button (const char *icon, const char *tooltip)
{
  GtkWidget *button = gtk_button_new_from_icon_name (icon);
  gtk_widget_set_valign (button, GTK_ALIGN_CENTER);
  gtk_widget_add_css_class (button, "flat");
  gtk_widget_set_tooltip_text (button, tooltip);
  gtk_accessible_update_property (GTK_ACCESSIBLE (button), GTK_ACCESSIBLE_PROPERTY_LABEL, tooltip, -1);
  return button;
}

/* "llama · 1.1B parameters · Q4_K · 638 MB · 2048-token context · Apache-2.0" */
static char *
describe_model (const HanashiLocalModel *model)
{
  g_autoptr (GPtrArray) parts = g_ptr_array_new_with_free_func (g_free);
  if (model->error)
    g_ptr_array_add (parts, g_strdup_printf (_("Not usable: %s"), model->error));
  if (model->arch)
    g_ptr_array_add (parts, g_strdup (model->arch));
  if (model->n_params)
    {
      g_autofree char *count = hanashi_model_format_params (model->n_params);
      g_ptr_array_add (parts, g_strdup_printf (_("%s parameters"), count));
    }
  if (model->weight_type)
    g_ptr_array_add (parts, g_strdup (model->weight_type));
  g_ptr_array_add (parts, format_size (model->file_size));
  if (model->n_ctx_train)
    g_ptr_array_add (parts, g_strdup_printf (_("%u-token context"), model->n_ctx_train));
  if (model->license && *model->license)
    g_ptr_array_add (parts, g_strdup (model->license));
  g_ptr_array_add (parts, NULL);
  return g_strjoinv (" · ", (char **) parts->pdata);
}

static char *
weight_type_and_size (const HanashiLocalModel *model)
{
  g_autofree char *size = format_size (model->file_size);
  if (!model->weight_type)
    return g_steal_pointer (&size);
  /* Translators: a model's weight type and file size, e.g. "Q4_K, 638 MB" */
  return g_strdup_printf (_("%s, %s"), model->weight_type, size);
}

static guint
count_in (GHashTable *counts, const char *key)
{
  return GPOINTER_TO_UINT (g_hash_table_lookup (counts, key));
}

static void
count_one (GHashTable *counts, const char *key)
{
  g_hash_table_insert (counts, g_strdup (key), GUINT_TO_POINTER (count_in (counts, key) + 1));
}

/* The row titles: a model's name, and where two models share a name (two quantizations of
 * one model), its weight type and size after it; where even those are the same, its file
 * name.  Returns one string per model, in order. */
static GPtrArray *
model_titles (GPtrArray *models)
{
  g_autoptr (GHashTable) name_counts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GHashTable) label_counts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  GPtrArray *titles = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < models->len; i++)
    count_one (name_counts, ((HanashiLocalModel *) models->pdata[i])->name);
  for (guint i = 0; i < models->len; i++)
    {
      HanashiLocalModel *model = models->pdata[i];
      if (count_in (name_counts, model->name) < 2)
        {
          g_ptr_array_add (titles, g_strdup (model->name));
          continue;
        }
      g_autofree char *detail = weight_type_and_size (model);
      /* Translators: a model's name, then what tells it from another model of that name */
      g_ptr_array_add (titles, g_strdup_printf (_("%s (%s)"), model->name, detail));
      count_one (label_counts, titles->pdata[i]);
    }
  for (guint i = 0; i < models->len; i++)
    if (count_in (label_counts, titles->pdata[i]) > 1)
      {
        HanashiLocalModel *model = models->pdata[i];
        g_autofree char *detail = weight_type_and_size (model);
        g_autofree char *file = g_path_get_basename (model->path);
        g_free (titles->pdata[i]);
        /* Translators: a model's name, its weight type and size, and its file name */
        titles->pdata[i] = g_strdup_printf (_("%s (%s, %s)"), model->name, detail, file);
      }
  return titles;
}

static void
add_installed_row (HanashiModelsDialog *self, GtkWidget *row)
{
  adw_preferences_group_add (self->installed_group, row);
  g_ptr_array_add (self->installed_rows, row);
}

static void
show_models (HanashiModelsDialog *self)
{
  for (guint i = 0; i < self->installed_rows->len; i++)
    adw_preferences_group_remove (self->installed_group, g_ptr_array_index (self->installed_rows, i));
  g_ptr_array_set_size (self->installed_rows, 0);

  if (!self->models || self->models->len == 0)
    {
      GtkWidget *row = adw_action_row_new ();
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), _("No models yet"));
      adw_action_row_set_subtitle (ADW_ACTION_ROW (row), _("Download one from the Download page, or add a folder with .gguf files in Preferences."));
      add_installed_row (self, row);
      return;
    }

  g_autoptr (GPtrArray) titles = model_titles (self->models);
  for (guint i = 0; i < self->models->len; i++)
    {
      HanashiLocalModel *model = g_ptr_array_index (self->models, i);
      GtkWidget *row = adw_action_row_new ();
      g_autofree char *title = g_markup_escape_text (titles->pdata[i], -1);
      g_autofree char *description = describe_model (model);
      g_autofree char *subtitle = g_markup_escape_text (description, -1);
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
      adw_action_row_set_subtitle (ADW_ACTION_ROW (row), subtitle);
      gtk_widget_set_tooltip_text (row, model->path);
      g_object_set_data_full (G_OBJECT (row), "path", g_strdup (model->path), g_free);

      if (!model->error)
        {
          GtkWidget *open = gtk_button_new_with_mnemonic (_("_Open"));
          gtk_widget_set_valign (open, GTK_ALIGN_CENTER);
          g_object_set_data_full (G_OBJECT (open), "path", g_strdup (model->path), g_free);
          g_signal_connect (open, "clicked", G_CALLBACK (on_open_clicked), self);
          adw_action_row_add_suffix (ADW_ACTION_ROW (row), open);
          adw_action_row_set_activatable_widget (ADW_ACTION_ROW (row), open);
        }
      GtkWidget *reveal = icon_button ("folder-open-symbolic", _("Show in Files"));
      g_object_set_data_full (G_OBJECT (reveal), "path", g_strdup (model->path), g_free);
      g_signal_connect (reveal, "clicked", G_CALLBACK (on_reveal_clicked), self);
      adw_action_row_add_suffix (ADW_ACTION_ROW (row), reveal);
      if (model->in_app_folder)
        {
          GtkWidget *remove = icon_button ("user-trash-symbolic", _("Delete Model"));
          g_object_set_data_full (G_OBJECT (remove), "path", g_strdup (model->path), g_free);
          g_object_set_data_full (G_OBJECT (remove), "name", g_strdup (model->name), g_free);
          g_signal_connect (remove, "clicked", G_CALLBACK (on_delete_clicked), self);
          adw_action_row_add_suffix (ADW_ACTION_ROW (row), remove);
        }
      add_installed_row (self, row);
    }
}

static void
on_scan_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (GError) error = NULL;
  GPtrArray *models = hanashi_model_scan_finish (result, &error);
  if (!models)
    return;   /* cancelled: the dialog may be gone */
  HanashiModelsDialog *self = user_data;
  g_clear_pointer (&self->models, g_ptr_array_unref);
  self->models = models;
  show_models (self);
  g_signal_emit (self, signals[SIGNAL_MODELS_CHANGED], 0);
}

void
hanashi_models_dialog_set_loaded_model (HanashiModelsDialog *self,
                                        const char          *path)
{
  g_return_if_fail (HANASHI_IS_MODELS_DIALOG (self));
  g_free (self->loaded_model);
  self->loaded_model = g_strdup (path);
}

void
hanashi_models_dialog_refresh (HanashiModelsDialog *self)
{
  g_return_if_fail (HANASHI_IS_MODELS_DIALOG (self));
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  self->cancellable = g_cancellable_new ();
  g_auto (GStrv) folders = self->settings ? g_settings_get_strv (self->settings, "model-folders") : NULL;
  hanashi_model_scan_async ((const char *const *) folders, self->cancellable, on_scan_done, self);
}

/* ---- downloads ---------------------------------------------------------------------------- */

typedef struct {
  HanashiModelsDialog *self;       /* not a reference: rows die with the dialog */
  HanashiDownload     *download;
  GtkWidget           *row;
  GtkProgressBar      *bar;
  GtkLabel            *status;
  GtkWidget           *pause_button;
  GtkWidget           *cancel_button;
  gulong               notify_id;
  gulong               finished_id;
} DownloadRow;

/* Failures that a retry may fix keep their .part file and can be resumed, also after
 * a restart; a 404, a wrong file or a bad address cannot. */
static gboolean
failure_is_resumable (HanashiDownload *download)
{
  const GError *failure = hanashi_download_get_error (download);
  return hanashi_download_get_state (download) == HANASHI_DOWNLOAD_STATE_FAILED && failure
         && failure->domain == HANASHI_DOWNLOAD_ERROR
         && (failure->code == HANASHI_DOWNLOAD_ERROR_OFFLINE
             || failure->code == HANASHI_DOWNLOAD_ERROR_INTERRUPTED
             || failure->code == HANASHI_DOWNLOAD_ERROR_DISK_FULL
             || failure->code == HANASHI_DOWNLOAD_ERROR_HTTP
             || failure->code == HANASHI_DOWNLOAD_ERROR_IO);
}

static void
update_download_row (DownloadRow *dr)
{
  HanashiDownload *download = dr->download;
  guint64 received = hanashi_download_get_received (download);
  guint64 total = hanashi_download_get_total (download);
  if (total > 0)
    gtk_progress_bar_set_fraction (dr->bar, MIN (1.0, (double) received / (double) total));
  g_autofree char *progress = hanashi_download_format_progress (download);

  const char *state_text = NULL;
  gboolean can_pause = FALSE, can_resume = FALSE, can_cancel = TRUE;
  switch (hanashi_download_get_state (download))
    {
    case HANASHI_DOWNLOAD_STATE_IDLE:
    case HANASHI_DOWNLOAD_STATE_PAUSED:
      state_text = _("Paused");
      can_resume = TRUE;
      break;
    case HANASHI_DOWNLOAD_STATE_RUNNING:
      can_pause = TRUE;
      break;
    case HANASHI_DOWNLOAD_STATE_VERIFYING:
      state_text = _("Checking the file…");
      break;
    case HANASHI_DOWNLOAD_STATE_DONE:
      /* Say whether the bytes were checked against a published checksum. */
      state_text = hanashi_download_get_sha256 (download) ? _("Finished; the SHA-256 checksum matches")
                                                          : _("Finished; not verified, as no checksum was given");
      gtk_progress_bar_set_fraction (dr->bar, 1.0);
      can_cancel = FALSE;
      break;
    case HANASHI_DOWNLOAD_STATE_FAILED:
      {
        const GError *error = hanashi_download_get_error (download);
        state_text = error ? error->message : _("The download failed.");
        can_resume = failure_is_resumable (download);
        break;
      }
    case HANASHI_DOWNLOAD_STATE_CANCELLED:
      state_text = _("Cancelled");
      can_cancel = FALSE;
      break;
    }
  /* A failure's sentence stands alone ("…try again. — 0 bytes" read as one broken
   * sentence); the bar still shows how much a resumable download has kept.  Before the
   * first byte, "0 bytes" says nothing either. */
  if (hanashi_download_get_state (download) == HANASHI_DOWNLOAD_STATE_FAILED || received == 0)
    g_clear_pointer (&progress, g_free);
  if (!state_text && !progress)
    state_text = _("Connecting…");
  g_autofree char *text = state_text ? (progress && *progress ? g_strdup_printf ("%s — %s", state_text, progress)
                                                               : g_strdup (state_text))
                                     : g_strdup (progress);
  gtk_label_set_text (dr->status, text);
  /* A failure reads as one: in the error colour, not dimmed like progress text. */
  gboolean failed = hanashi_download_get_state (download) == HANASHI_DOWNLOAD_STATE_FAILED;
  if (failed)
    {
      gtk_widget_remove_css_class (GTK_WIDGET (dr->status), "dim-label");
      gtk_widget_add_css_class (GTK_WIDGET (dr->status), "error");
    }
  else
    {
      gtk_widget_remove_css_class (GTK_WIDGET (dr->status), "error");
      gtk_widget_add_css_class (GTK_WIDGET (dr->status), "dim-label");
    }

  gtk_widget_set_visible (dr->pause_button, can_pause || can_resume);
  gtk_button_set_icon_name (GTK_BUTTON (dr->pause_button),
                            can_pause ? "media-playback-pause-symbolic" : "media-playback-start-symbolic");
  const char *pause_label = can_pause ? _("Pause Download") : _("Resume Download");
  gtk_widget_set_tooltip_text (dr->pause_button, pause_label);
  gtk_accessible_update_property (GTK_ACCESSIBLE (dr->pause_button), GTK_ACCESSIBLE_PROPERTY_LABEL, pause_label, -1);
  gtk_widget_set_visible (dr->cancel_button, can_cancel);
}

static void
on_download_notify (HanashiDownload *download, GParamSpec *pspec, DownloadRow *dr)
{
  update_download_row (dr);
}

static void
on_download_finished (HanashiDownload *download, DownloadRow *dr)
{
  update_download_row (dr);
  HanashiDownloadState state = hanashi_download_get_state (download);
  gboolean resumable = failure_is_resumable (download);
  if (state == HANASHI_DOWNLOAD_STATE_DONE || state == HANASHI_DOWNLOAD_STATE_CANCELLED
      || (state == HANASHI_DOWNLOAD_STATE_FAILED && !resumable))
    {
      GFile *dest = hanashi_download_get_destination (download);
      g_autofree char *part = g_strconcat (g_file_peek_path (dest), ".part.uri", NULL);
      g_unlink (part);
    }
  if (state == HANASHI_DOWNLOAD_STATE_DONE)
    hanashi_models_dialog_refresh (dr->self);
  else if (state == HANASHI_DOWNLOAD_STATE_CANCELLED)
    {
      /* Nothing is left of a cancelled download: its row goes too (this frees `dr`). */
      HanashiModelsDialog *self = dr->self;
      adw_preferences_group_remove (self->downloads_group, dr->row);
      g_ptr_array_remove (self->download_rows, dr);
      gtk_widget_set_visible (GTK_WIDGET (self->downloads_group), self->download_rows->len > 0);
    }
  else if (state == HANASHI_DOWNLOAD_STATE_FAILED)
    {
      const GError *error = hanashi_download_get_error (download);
      if (error)
        show_toast (dr->self, error->message);
    }
}

static void
on_pause_clicked (GtkButton *button, DownloadRow *dr)
{
  HanashiDownloadState state = hanashi_download_get_state (dr->download);
  if (state == HANASHI_DOWNLOAD_STATE_RUNNING)
    hanashi_download_pause (dr->download);
  else
    hanashi_download_start (dr->download);
}

static void
on_cancel_clicked (GtkButton *button, DownloadRow *dr)
{
  /* A paused or failed download finishes right here, and its row (with `dr`) goes
   * away; a running one reports through its state notifications. */
  hanashi_download_cancel (dr->download);
}

static void
download_row_free (DownloadRow *dr)
{
  g_clear_signal_handler (&dr->notify_id, dr->download);
  g_clear_signal_handler (&dr->finished_id, dr->download);
  g_object_unref (dr->download);
  g_free (dr);
}

static void
add_download_row (HanashiModelsDialog *self, HanashiDownload *download)
{
  DownloadRow *dr = g_new0 (DownloadRow, 1);
  dr->self = self;
  dr->download = g_object_ref (download);

  GFile *dest = hanashi_download_get_destination (download);
  g_autofree char *name = g_file_get_basename (dest);
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  gtk_widget_set_margin_start (box, 12);
  gtk_widget_set_margin_end (box, 6);
  gtk_widget_set_margin_top (box, 8);
  gtk_widget_set_margin_bottom (box, 8);
  GtkWidget *top = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  GtkWidget *title = gtk_label_new (name);
  gtk_label_set_xalign (GTK_LABEL (title), 0);
  gtk_label_set_ellipsize (GTK_LABEL (title), PANGO_ELLIPSIZE_MIDDLE);
  gtk_widget_set_hexpand (title, TRUE);
  gtk_box_append (GTK_BOX (top), title);
  dr->pause_button = icon_button ("media-playback-pause-symbolic", _("Pause Download"));
  g_signal_connect (dr->pause_button, "clicked", G_CALLBACK (on_pause_clicked), dr);
  gtk_box_append (GTK_BOX (top), dr->pause_button);
  dr->cancel_button = icon_button ("process-stop-symbolic", _("Cancel Download"));
  g_signal_connect (dr->cancel_button, "clicked", G_CALLBACK (on_cancel_clicked), dr);
  gtk_box_append (GTK_BOX (top), dr->cancel_button);
  gtk_box_append (GTK_BOX (box), top);
  dr->bar = GTK_PROGRESS_BAR (gtk_progress_bar_new ());
  gtk_box_append (GTK_BOX (box), GTK_WIDGET (dr->bar));
  dr->status = GTK_LABEL (gtk_label_new (NULL));
  gtk_widget_set_name (GTK_WIDGET (dr->status), "download-status");
  gtk_label_set_xalign (dr->status, 0);
  gtk_label_set_wrap (dr->status, TRUE);
  gtk_widget_add_css_class (GTK_WIDGET (dr->status), "caption");
  gtk_box_append (GTK_BOX (box), GTK_WIDGET (dr->status));

  dr->row = adw_preferences_row_new ();
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (dr->row), name);
  gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (dr->row), FALSE);
  gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (dr->row), box);
  g_object_set_data_full (G_OBJECT (dr->row), "destination", g_file_get_path (dest), g_free);
  adw_preferences_group_add (self->downloads_group, dr->row);
  gtk_widget_set_visible (GTK_WIDGET (self->downloads_group), TRUE);

  dr->notify_id = g_signal_connect (download, "notify", G_CALLBACK (on_download_notify), dr);
  dr->finished_id = g_signal_connect (download, "finished", G_CALLBACK (on_download_finished), dr);
  g_ptr_array_add (self->download_rows, dr);
  update_download_row (dr);
}

/* A name for the file in the models folder: the last path segment, or `file`. */
static char *
destination_name (const char *uri, const char *file, GError **error)
{
  g_autofree char *name = NULL;
  g_autoptr (GUri) parsed = g_uri_parse (uri, G_URI_FLAGS_NONE, NULL);
  if (parsed)
    {
      g_autofree char *path = g_uri_unescape_string (g_uri_get_path (parsed), NULL);
      if (path)
        name = g_path_get_basename (path);
    }
  if (!name || !g_str_has_suffix (name, ".gguf"))
    {
      g_free (name);
      name = file && *file ? g_path_get_basename (file) : NULL;
    }
  if (!name || !g_str_has_suffix (name, ".gguf") || name[0] == '.' || strchr (name, '/'))
    {
      g_set_error_literal (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_INVALID_URI,
                           _("The address does not name a .gguf file."));
      return NULL;
    }
  return g_steal_pointer (&name);
}

static HanashiDownload *
find_download_for (GFile *dest)
{
  GPtrArray *downloads = get_all_downloads ();
  for (guint i = 0; i < downloads->len; i++)
    {
      HanashiDownload *download = g_ptr_array_index (downloads, i);
      GFile *other = hanashi_download_get_destination (download);
      HanashiDownloadState state = hanashi_download_get_state (download);
      if (g_file_equal (other, dest) && state != HANASHI_DOWNLOAD_STATE_DONE
          && state != HANASHI_DOWNLOAD_STATE_CANCELLED)
        return download;
    }
  return NULL;
}

/* What a download needs to resume after a restart: its address, and the checksum and size
 * it must match, one per line beside the .part file (FILE.gguf.part.uri). */
static void
remember_download (const char *path, const char *uri, const char *sha256, guint64 size)
{
  g_autoptr (GString) text = g_string_new (uri);
  g_string_append_c (text, '\n');
  if (sha256)
    g_string_append_printf (text, "sha256=%s\n", sha256);
  if (size > 0)
    g_string_append_printf (text, "size=%" G_GUINT64_FORMAT "\n", size);
  g_autofree char *uri_path = g_strconcat (path, ".part.uri", NULL);
  g_autoptr (GError) error = NULL;
  if (!g_file_set_contents (uri_path, text->str, (gssize) text->len, &error))
    g_message ("The download cannot be resumed after a restart: %s", error->message);
}

HanashiDownload *
hanashi_models_dialog_download (HanashiModelsDialog *self, const char *repo_or_url,
                                const char *file, GError **error)
{
  return hanashi_models_dialog_download_verified (self, repo_or_url, file, NULL, NULL, 0, error);
}

HanashiDownload *
hanashi_models_dialog_download_verified (HanashiModelsDialog *self, const char *repo_or_url,
                                         const char *file, const char *revision,
                                         const char *sha256, guint64 size, GError **error)
{
  g_return_val_if_fail (HANASHI_IS_MODELS_DIALOG (self), NULL);
  if (sha256 && !*sha256)
    sha256 = NULL;
  if (sha256 && !hanashi_download_sha256_is_valid (sha256))
    {
      g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_CHECKSUM,
                   _("“%s” is not a SHA-256 checksum: it must be 64 hexadecimal digits."), sha256);
      return NULL;
    }
  g_autofree char *uri = hanashi_download_resolve_uri_at (repo_or_url, file, revision, error);
  if (!uri)
    return NULL;
  g_autofree char *name = destination_name (uri, file, error);
  if (!name)
    return NULL;
  g_autofree char *folder = hanashi_model_scan_dup_app_folder ();
  if (g_mkdir_with_parents (folder, 0755) != 0)
    {
      int saved = errno;
      g_set_error (error, HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_IO,
                   _("Could not create the models folder %s: %s"), folder, g_strerror (saved));
      return NULL;
    }
  g_autofree char *path = g_build_filename (folder, name, NULL);
  g_autoptr (GFile) dest = g_file_new_for_path (path);

  HanashiDownload *existing = find_download_for (dest);
  /* A download that failed for good, or that was held to other values, is replaced (its
   * row goes with it); any other is the same download asked for again. */
  if (existing && hanashi_download_get_state (existing) == HANASHI_DOWNLOAD_STATE_FAILED
      && (!failure_is_resumable (existing) || g_strcmp0 (hanashi_download_get_sha256 (existing), sha256) != 0))
    {
      hanashi_download_cancel (existing);
      existing = NULL;
    }
  if (existing)
    {
      if (hanashi_download_get_state (existing) != HANASHI_DOWNLOAD_STATE_RUNNING)
        hanashi_download_start (existing);
      return existing;
    }
  if (g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_EXISTS, _("“%s” is already downloaded."), name);
      return NULL;
    }

  HanashiDownload *download = hanashi_download_new (uri, dest, sha256);
  hanashi_download_set_expected_size (download, size);
  remember_download (path, uri, hanashi_download_get_sha256 (download), size);
  g_ptr_array_add (get_all_downloads (), download);
  add_download_row (self, download);
  hanashi_download_start (download);
  return download;
}

/* Unfinished downloads from an earlier run: a .part file with its address beside it. */
static void
adopt_unfinished_downloads (void)
{
  g_autofree char *folder = hanashi_model_scan_dup_app_folder ();
  g_autoptr (GDir) dir = g_dir_open (folder, 0, NULL);
  if (!dir)
    return;
  const char *entry;
  while ((entry = g_dir_read_name (dir)))
    {
      if (!g_str_has_suffix (entry, ".gguf.part.uri"))
        continue;
      g_autofree char *uri_path = g_build_filename (folder, entry, NULL);
      g_autofree char *dest_path = g_strndup (uri_path, strlen (uri_path) - strlen (".part.uri"));
      g_autofree char *part_path = g_strconcat (dest_path, ".part", NULL);
      g_autofree char *contents = NULL;
      g_autoptr (GFile) dest = g_file_new_for_path (dest_path);
      if (!g_file_test (part_path, G_FILE_TEST_EXISTS) || !g_file_get_contents (uri_path, &contents, NULL, NULL)
          || find_download_for (dest))
        continue;
      g_auto (GStrv) lines = g_strsplit (contents, "\n", -1);
      const char *uri = g_strstrip (lines[0]);
      const char *sha256 = NULL;
      guint64 size = 0;
      for (guint i = 1; lines[i]; i++)
        {
          char *line = g_strstrip (lines[i]);
          if (g_str_has_prefix (line, "sha256=") && hanashi_download_sha256_is_valid (line + 7))
            sha256 = line + 7;
          else if (g_str_has_prefix (line, "size="))
            size = g_ascii_strtoull (line + 5, NULL, 10);
        }
      if (!hanashi_download_uri_is_allowed (uri, NULL))
        continue;
      /* Paused until the user resumes it: nothing downloads without being asked. */
      HanashiDownload *download = hanashi_download_new (uri, dest, sha256);
      hanashi_download_set_expected_size (download, size);
      g_ptr_array_add (get_all_downloads (), download);
    }
}

static void
on_curated_download (GtkButton *button, HanashiModelsDialog *self)
{
  const HanashiCatalogEntry *entry = g_object_get_data (G_OBJECT (button), "catalog-entry");
  g_autoptr (GError) error = NULL;
  /* The catalog's pinned revision, size and checksum travel with the download. */
  if (!hanashi_models_dialog_download_verified (self, entry->repo, entry->file, entry->revision,
                                                entry->sha256, entry->size_bytes, &error))
    show_toast (self, error->message);
}

static void
on_custom_download (HanashiModelsDialog *self)
{
  const char *address = gtk_editable_get_text (GTK_EDITABLE (self->address_row));
  const char *file = gtk_editable_get_text (GTK_EDITABLE (self->file_row));
  g_autofree char *sha256 = g_strstrip (g_strdup (gtk_editable_get_text (GTK_EDITABLE (self->sha256_row))));
  g_autoptr (GError) error = NULL;
  if (!hanashi_models_dialog_download_verified (self, address, file, NULL, sha256, 0, &error))
    {
      show_toast (self, error->message);
      return;
    }
  gtk_editable_set_text (GTK_EDITABLE (self->address_row), "");
  gtk_editable_set_text (GTK_EDITABLE (self->file_row), "");
  gtk_editable_set_text (GTK_EDITABLE (self->sha256_row), "");
}

/* The recommended models, those that fit this computer's memory first (each group in
 * catalog order), each with its size, the memory it needs and whether that is there. */
static void
load_curated (HanashiModelsDialog *self)
{
  self->catalog = hanashi_catalog_load_default ();
  g_autoptr (GPtrArray) fitting = g_ptr_array_new ();
  g_autoptr (GPtrArray) too_large = g_ptr_array_new ();
  for (guint i = 0; i < self->catalog->len; i++)
    {
      HanashiCatalogEntry *entry = g_ptr_array_index (self->catalog, i);
      g_ptr_array_add (hanashi_catalog_fits_memory (entry->memory_bytes, NULL) ? fitting : too_large, entry);
    }
  g_ptr_array_extend_and_steal (fitting, g_steal_pointer (&too_large));

  for (guint i = 0; i < fitting->len; i++)
    {
      const HanashiCatalogEntry *entry = g_ptr_array_index (fitting, i);
      g_autofree char *fit_text = NULL;
      gboolean fits = hanashi_catalog_fits_memory (entry->memory_bytes, &fit_text);
      g_autofree char *size = format_size (entry->size_bytes);
      /* Translators: "1.7B parameters · 1.3 GB · Apache-2.0" */
      g_autofree char *details = g_strdup_printf (_("%s parameters · %s · %s"), entry->parameters, size, entry->license);
      /* The descriptions are translated (marked in hanashi-catalog.c); gettext ("") would
       * return the catalogue's header. */
      const char *description = *entry->description ? _(entry->description) : "";
      g_autofree char *subtitle_raw = g_strdup_printf ("%s\n%s\n%s", description, details, fit_text);
      g_autofree char *title = g_markup_escape_text (entry->name, -1);
      g_autofree char *subtitle = g_markup_escape_text (subtitle_raw, -1);

      GtkWidget *row = adw_action_row_new ();
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
      adw_action_row_set_subtitle (ADW_ACTION_ROW (row), subtitle);
      g_autofree char *tooltip = g_strdup_printf ("%s/%s @ %.12s", entry->repo, entry->file, entry->revision);
      gtk_widget_set_tooltip_text (row, tooltip);
      g_object_set_data_full (G_OBJECT (row), "catalog-id", g_strdup (entry->id), g_free);
      g_object_set_data (G_OBJECT (row), "fits-memory", GINT_TO_POINTER (fits));
      if (!fits)
        {
          GtkWidget *warning = gtk_image_new_from_icon_name ("dialog-warning-symbolic");
          gtk_widget_add_css_class (warning, "warning");
          gtk_widget_set_tooltip_text (warning, fit_text);
          gtk_accessible_update_property (GTK_ACCESSIBLE (warning), GTK_ACCESSIBLE_PROPERTY_LABEL, fit_text, -1);
          adw_action_row_add_suffix (ADW_ACTION_ROW (row), warning);
        }
      GtkWidget *button = icon_button ("folder-download-symbolic", _("Download"));
      g_autofree char *label = g_strdup_printf (_("Download %s"), entry->name);
      gtk_accessible_update_property (GTK_ACCESSIBLE (button), GTK_ACCESSIBLE_PROPERTY_LABEL, label, -1);
      g_object_set_data (G_OBJECT (button), "catalog-entry", (gpointer) entry);
      g_signal_connect (button, "clicked", G_CALLBACK (on_curated_download), self);
      adw_action_row_add_suffix (ADW_ACTION_ROW (row), button);
      adw_preferences_group_add (self->curated_group, row);
    }
}

/* ---- servers ------------------------------------------------------------------------------- */

static void
on_remote_model_chat (GtkButton *button, HanashiModelsDialog *self)
{
  const char *url = g_object_get_data (G_OBJECT (button), "url");
  const char *model = g_object_get_data (G_OBJECT (button), "model");
  g_signal_emit (self, signals[SIGNAL_REMOTE_MODEL_ACTIVATED], 0, url, model);
}

static void refresh_servers (HanashiModelsDialog *self);

static void
on_remove_server (GtkButton *button, HanashiModelsDialog *self)
{
  const char *url = g_object_get_data (G_OBJECT (button), "url");
  if (self->settings)
    hanashi_remote_endpoints_forget (self->settings, url);
  refresh_servers (self);
}

static void
add_server_row (HanashiModelsDialog *self, GtkWidget *row)
{
  adw_preferences_group_add (self->server_models_group, row);
  g_ptr_array_add (self->server_rows, row);
  gtk_widget_set_visible (GTK_WIDGET (self->server_models_group), TRUE);
}

/* The server's row (its address, how many models or why none), then one row per model. */
static void
show_server (HanashiModelsDialog *self, const char *url, char **models, const GError *error)
{
  GtkWidget *row = adw_action_row_new ();
  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), url);
  gtk_widget_add_css_class (row, "property");
  if (error)
    {
      g_autofree char *why = hanashi_describe_remote_error (error);
      adw_action_row_set_subtitle (ADW_ACTION_ROW (row), why ? why : error->message);
    }
  else
    {
      guint n = g_strv_length (models);
      g_autofree char *count = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%u model", "%u models", n), n);
      adw_action_row_set_subtitle (ADW_ACTION_ROW (row), count);
    }
  GtkWidget *remove = gtk_button_new_from_icon_name ("user-trash-symbolic");
  gtk_widget_set_valign (remove, GTK_ALIGN_CENTER);
  gtk_widget_add_css_class (remove, "flat");
  /* Translators: %s is a server's address */
  g_autofree char *remove_label = g_strdup_printf (_("Remove %s"), url);
  gtk_widget_set_tooltip_text (remove, _("Remove Server"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (remove), GTK_ACCESSIBLE_PROPERTY_LABEL, remove_label, -1);
  g_object_set_data_full (G_OBJECT (remove), "url", g_strdup (url), g_free);
  g_signal_connect (remove, "clicked", G_CALLBACK (on_remove_server), self);
  adw_action_row_add_suffix (ADW_ACTION_ROW (row), remove);
  add_server_row (self, row);

  for (guint i = 0; models && models[i]; i++)
    {
      GtkWidget *model_row = adw_action_row_new ();
      adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (model_row), FALSE);
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (model_row), models[i]);
      adw_action_row_set_subtitle (ADW_ACTION_ROW (model_row), url);
      GtkWidget *chat = gtk_button_new_with_mnemonic (_("_Chat"));
      gtk_widget_set_valign (chat, GTK_ALIGN_CENTER);
      gtk_widget_set_name (chat, "remote-model-chat");
      /* Translators: %s is a model's name on a server */
      g_autofree char *chat_label = g_strdup_printf (_("Chat with %s"), models[i]);
      gtk_accessible_update_property (GTK_ACCESSIBLE (chat), GTK_ACCESSIBLE_PROPERTY_LABEL, chat_label, -1);
      g_object_set_data_full (G_OBJECT (chat), "url", g_strdup (url), g_free);
      g_object_set_data_full (G_OBJECT (chat), "model", g_strdup (models[i]), g_free);
      g_signal_connect (chat, "clicked", G_CALLBACK (on_remote_model_chat), self);
      adw_action_row_add_suffix (ADW_ACTION_ROW (model_row), chat);
      add_server_row (self, model_row);
    }
}

typedef struct {
  HanashiModelsDialog *self;
  char *url;
  gboolean adding;    /* from the Add Server button: toast errors, remember the address */
} ServerQuery;

static void
server_query_free (ServerQuery *q)
{
  g_object_unref (q->self);
  g_free (q->url);
  g_free (q);
}

static void
on_server_connected (GObject *source, GAsyncResult *result, gpointer data)
{
  ServerQuery *q = data;
  HanashiModelsDialog *self = q->self;
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) models = NULL;
  (void) source;
  HanashiRemote *remote = hanashi_remote_connect_finish (result, &models, NULL, &error);
  if (self->server_rows == NULL   /* disposed */
      || g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)
      || g_error_matches (error, HANASHI_REMOTE_ERROR, HANASHI_REMOTE_ERROR_CANCELLED))
    {
      if (remote)
        hanashi_remote_unref (remote);
      server_query_free (q);
      return;
    }
  if (q->adding)
    {
      gtk_widget_set_sensitive (GTK_WIDGET (self->add_server_button), TRUE);
      if (remote == NULL)
        {
          g_autofree char *why = hanashi_describe_remote_error (error);
          adw_toast_overlay_add_toast (self->toast_overlay, adw_toast_new (why ? why : error->message));
          server_query_free (q);
          return;
        }
      if (self->settings)
        hanashi_remote_endpoints_add (self->settings, hanashi_remote_get_api_url (remote));
      gtk_editable_set_text (GTK_EDITABLE (self->server_url_row), "");
      gtk_editable_set_text (GTK_EDITABLE (self->server_key_row), "");
      hanashi_remote_unref (remote);
      refresh_servers (self);
      server_query_free (q);
      return;
    }
  show_server (self, remote ? hanashi_remote_get_api_url (remote) : q->url, models, error);
  if (remote)
    hanashi_remote_unref (remote);
  server_query_free (q);
}

static void
query_server (HanashiModelsDialog *self, const char *url, const char *key, gboolean adding)
{
  ServerQuery *q = g_new0 (ServerQuery, 1);
  q->self = g_object_ref (self);
  q->url = g_strdup (url);
  q->adding = adding;
  hanashi_remote_connect_async (url, key, adding ? NULL : self->servers_cancellable, on_server_connected, q);
}

static void
refresh_servers (HanashiModelsDialog *self)
{
  g_cancellable_cancel (self->servers_cancellable);
  g_clear_object (&self->servers_cancellable);
  self->servers_cancellable = g_cancellable_new ();
  for (guint i = 0; i < self->server_rows->len; i++)
    adw_preferences_group_remove (self->server_models_group, g_ptr_array_index (self->server_rows, i));
  g_ptr_array_set_size (self->server_rows, 0);
  gtk_widget_set_visible (GTK_WIDGET (self->server_models_group), FALSE);
  if (self->settings == NULL)
    return;
  g_auto (GStrv) urls = hanashi_remote_endpoints_dup_urls (self->settings);
  for (char **url = urls; *url; url++)
    query_server (self, *url, NULL, FALSE);
}

static void
on_add_server (HanashiModelsDialog *self)
{
  const char *url = gtk_editable_get_text (GTK_EDITABLE (self->server_url_row));
  const char *key = gtk_editable_get_text (GTK_EDITABLE (self->server_key_row));
  if (*url == '\0' || !gtk_widget_get_sensitive (GTK_WIDGET (self->add_server_button)))
    return;
  gtk_widget_set_sensitive (GTK_WIDGET (self->add_server_button), FALSE);
  query_server (self, url, key, TRUE);
}

/* ---- GObject ------------------------------------------------------------------------------ */

static void
hanashi_models_dialog_dispose (GObject *object)
{
  HanashiModelsDialog *self = HANASHI_MODELS_DIALOG (object);
  g_cancellable_cancel (self->cancellable);
  g_cancellable_cancel (self->servers_cancellable);
  g_clear_object (&self->servers_cancellable);
  g_clear_pointer (&self->server_rows, g_ptr_array_unref);
  g_clear_object (&self->cancellable);
  g_clear_pointer (&self->download_rows, g_ptr_array_unref);
  g_clear_pointer (&self->installed_rows, g_ptr_array_unref);
  g_clear_pointer (&self->models, g_ptr_array_unref);
  g_clear_pointer (&self->catalog, g_ptr_array_unref);
  g_clear_pointer (&self->loaded_model, g_free);
  g_clear_object (&self->settings);
  gtk_widget_dispose_template (GTK_WIDGET (self), HANASHI_TYPE_MODELS_DIALOG);
  G_OBJECT_CLASS (hanashi_models_dialog_parent_class)->dispose (object);
}

static void
hanashi_models_dialog_class_init (HanashiModelsDialogClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = hanashi_models_dialog_dispose;

  signals[SIGNAL_MODEL_ACTIVATED] = g_signal_new ("model-activated", G_TYPE_FROM_CLASS (klass),
                                                  G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                  G_TYPE_NONE, 1, G_TYPE_STRING);
  signals[SIGNAL_REMOTE_MODEL_ACTIVATED] = g_signal_new ("remote-model-activated", G_TYPE_FROM_CLASS (klass),
                                                         G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                         G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_STRING);
  signals[SIGNAL_MODELS_CHANGED] = g_signal_new ("models-changed", G_TYPE_FROM_CLASS (klass),
                                                 G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                 G_TYPE_NONE, 0);

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hanashi/Hanashi/ui/hanashi-models-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, stack);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, installed_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, downloads_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, curated_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, custom_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, address_row);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, file_row);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, sha256_row);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, custom_download_button);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, refresh_button);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, server_models_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, server_url_row);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, server_key_row);
  gtk_widget_class_bind_template_child (widget_class, HanashiModelsDialog, add_server_button);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Escape, 0, "window.close", NULL);
}

static void
hanashi_models_dialog_init (HanashiModelsDialog *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->installed_rows = g_ptr_array_new ();
  self->download_rows = g_ptr_array_new_with_free_func ((GDestroyNotify) download_row_free);

  GSettingsSchema *schema = g_settings_schema_source_lookup (g_settings_schema_source_get_default (), APP_ID, TRUE);
  if (schema && g_settings_schema_has_key (schema, "model-folders"))
    {
      self->settings = g_settings_new (APP_ID);
      g_signal_connect_swapped (self->settings, "changed::model-folders",
                                G_CALLBACK (hanashi_models_dialog_refresh), self);
    }
  g_clear_pointer (&schema, g_settings_schema_unref);

  g_signal_connect_swapped (self->refresh_button, "clicked", G_CALLBACK (hanashi_models_dialog_refresh), self);
  g_signal_connect_swapped (self->custom_download_button, "clicked", G_CALLBACK (on_custom_download), self);
  g_signal_connect_swapped (self->address_row, "entry-activated", G_CALLBACK (on_custom_download), self);
  g_signal_connect_swapped (self->file_row, "entry-activated", G_CALLBACK (on_custom_download), self);
  g_signal_connect_swapped (self->sha256_row, "entry-activated", G_CALLBACK (on_custom_download), self);

  self->server_rows = g_ptr_array_new ();
  g_signal_connect_swapped (self->add_server_button, "clicked", G_CALLBACK (on_add_server), self);
  g_signal_connect_swapped (self->server_url_row, "entry-activated", G_CALLBACK (on_add_server), self);
  g_signal_connect_swapped (self->server_key_row, "entry-activated", G_CALLBACK (on_add_server), self);
  refresh_servers (self);

  load_curated (self);
  adopt_unfinished_downloads ();
  GPtrArray *downloads = get_all_downloads ();
  for (guint i = 0; i < downloads->len; i++)
    {
      HanashiDownload *download = g_ptr_array_index (downloads, i);
      HanashiDownloadState state = hanashi_download_get_state (download);
      if (state != HANASHI_DOWNLOAD_STATE_DONE && state != HANASHI_DOWNLOAD_STATE_CANCELLED)
        add_download_row (self, download);
    }
  hanashi_models_dialog_refresh (self);
}

HanashiModelsDialog *
hanashi_models_dialog_new (GtkWindow *parent)
{
  return g_object_new (HANASHI_TYPE_MODELS_DIALOG, "transient-for", parent, NULL);
}
