/* hanashi-preferences-window.c: engine settings, session cache, default parameters and
 * model folders, all stored in GSettings.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-preferences-window"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-params-panel.h"
#include "hanashi-preferences-window.h"
#include "hanashi-model-scan.h"
#include "hanashi-serve-page.h"

struct _HanashiPreferencesWindow
{
#if HANASHI_PREFERENCES_DIALOG
  AdwPreferencesDialog parent_instance;
#else
  AdwPreferencesWindow parent_instance;
#endif

  GtkSpinButton       *threads_spin;
  GtkSpinButton       *context_spin;
  GtkSpinButton       *batch_spin;
  GtkSpinButton       *cache_spin;
  GtkButton           *clear_cache_button;
  AdwPreferencesGroup *parameters_group;
  AdwPreferencesGroup *folders_group;
  GtkButton           *add_folder_button;
  AdwPreferencesGroup *gpu_group;
  AdwComboRow         *gpu_device_row;
  AdwActionRow        *gpu_layers_row;
  GtkSpinButton       *gpu_layers_spin;

  /* The device row's entries: "auto", the devices' names, "processor" (as gpu-device
   * stores them), in the order of its model. */
  GPtrArray           *gpu_choices;
  GPtrArray           *gpu_devices;      /* HanashiGpuDevice, NULL until listed */
  gboolean             gpu_updating;     /* the row is being rebuilt, not chosen from */
  GCancellable        *gpu_cancellable;

  GPtrArray           *folder_rows;
  HanashiEngine       *engine;
  GSettings           *settings;
};

#if HANASHI_PREFERENCES_DIALOG
G_DEFINE_FINAL_TYPE (HanashiPreferencesWindow, hanashi_preferences_window, ADW_TYPE_PREFERENCES_DIALOG)
#else
G_DEFINE_FINAL_TYPE (HanashiPreferencesWindow, hanashi_preferences_window, ADW_TYPE_PREFERENCES_WINDOW)
#endif

static void
toast (HanashiPreferencesWindow *self, const char *text)
{
#if HANASHI_PREFERENCES_DIALOG
  adw_preferences_dialog_add_toast (ADW_PREFERENCES_DIALOG (self), adw_toast_new (text));
#else
  adw_preferences_window_add_toast (ADW_PREFERENCES_WINDOW (self), adw_toast_new (text));
#endif
}

/* ---- session cache -------------------------------------------------------------------- */

static gboolean
cache_mb_to_gb (GValue *value, GVariant *variant, gpointer data)
{
  g_value_set_double (value, g_variant_get_int32 (variant) / 1024.0);
  return TRUE;
}

static GVariant *
cache_gb_to_mb (const GValue *value, const GVariantType *type, gpointer data)
{
  return g_variant_new_int32 ((gint32) (g_value_get_double (value) * 1024.0 + 0.5));
}

static void
apply_cache_limit (HanashiPreferencesWindow *self)
{
  if (self->engine)
    hanashi_engine_set_session_cache_limit (self->engine,
                                            (guint64) g_settings_get_int (self->settings, "session-cache-limit-mb") << 20);
}

/* Without an engine the files are removed directly (in a worker thread: there may be
 * many gigabytes of them), by the same function the engine thread uses. */
static void
clear_sessions_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  g_autofree char *dir = hanashi_session_cache_dup_default_dir ();
  g_autoptr (GError) error = NULL;

  if (hanashi_session_cache_clear (dir, cancellable, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, g_steal_pointer (&error));
}

static void
on_sessions_cleared (GObject *source, GAsyncResult *result, gpointer data)
{
  HanashiPreferencesWindow *self = HANASHI_PREFERENCES_WINDOW (source);
  g_autoptr (GError) error = NULL;
  gtk_widget_set_sensitive (GTK_WIDGET (self->clear_cache_button), TRUE);
  if (g_task_propagate_boolean (G_TASK (result), &error))
    toast (self, _("Session cache cleared"));
  else
    {
      g_autofree char *text = g_strdup_printf (_("Could not clear the session cache: %s"), error->message);
      toast (self, text);
    }
}

static void
on_clear_cache (HanashiPreferencesWindow *self)
{
  if (self->engine)
    {
      hanashi_engine_clear_session_cache (self->engine);
      toast (self, _("Session cache cleared"));
      return;
    }
  gtk_widget_set_sensitive (GTK_WIDGET (self->clear_cache_button), FALSE);
  g_autoptr (GTask) task = g_task_new (self, NULL, on_sessions_cleared, NULL);
  g_task_run_in_thread (task, clear_sessions_thread);
}

/* ---- graphics card -------------------------------------------------------------------- */

/* The layer count -1 reads "Auto". */
static gboolean
on_gpu_layers_output (GtkSpinButton *spin, gpointer data)
{
  if (gtk_adjustment_get_value (gtk_spin_button_get_adjustment (spin)) >= 0)
    return FALSE;
  /* Translators: the layer count on the graphics card when it is as many as fit */
  gtk_editable_set_text (GTK_EDITABLE (spin), _("Auto"));
  return TRUE;
}

static int
on_gpu_layers_input (GtkSpinButton *spin, double *value, gpointer data)
{
  const char *text = gtk_editable_get_text (GTK_EDITABLE (spin));
  g_autofree char *stripped = g_strstrip (g_strdup (text));
  if (g_ascii_strcasecmp (stripped, "auto") == 0 || g_utf8_collate (stripped, _("Auto")) == 0)
    {
      *value = -1;
      return TRUE;
    }
  return FALSE;
}

static char *
describe_device (const HanashiGpuDevice *device)
{
  g_autofree char *memory = g_format_size (device->memory);
  if (g_strcmp0 (device->type, "cpu") == 0)
    /* Translators: a Vulkan driver that runs on the processor (such as llvmpipe): its name
     * and memory */
    return g_strdup_printf (_("%s (software, %s)"), device->name, memory);
  /* Translators: a graphics card's name and memory */
  return g_strdup_printf (_("%s (%s)"), device->name, memory);
}

/* Fills the device row from the devices listed (or not yet) and selects the setting. */
static void
rebuild_gpu_devices (HanashiPreferencesWindow *self)
{
  g_autofree char *chosen = g_settings_get_string (self->settings, "gpu-device");
  g_autoptr (GtkStringList) labels = gtk_string_list_new (NULL);
  gboolean chosen_listed = g_str_equal (chosen, "auto") || g_str_equal (chosen, "processor");

  g_ptr_array_set_size (self->gpu_choices, 0);
  gtk_string_list_append (labels, _("Automatic"));
  g_ptr_array_add (self->gpu_choices, g_strdup ("auto"));
  for (guint i = 0; self->gpu_devices != NULL && i < self->gpu_devices->len; i++)
    {
      const HanashiGpuDevice *device = g_ptr_array_index (self->gpu_devices, i);
      g_autofree char *label = describe_device (device);
      gtk_string_list_append (labels, label);
      g_ptr_array_add (self->gpu_choices, g_strdup (device->name));
      chosen_listed |= g_str_equal (chosen, device->name);
    }
  /* a device chosen before that is not there (yet): kept, not silently replaced */
  if (!chosen_listed)
    {
      g_autofree char *label = self->gpu_devices != NULL
                               /* Translators: a graphics card chosen before that this computer does not have now */
                               ? g_strdup_printf (_("%s (not found)"), chosen)
                               : g_strdup (chosen);
      gtk_string_list_append (labels, label);
      g_ptr_array_add (self->gpu_choices, g_strdup (chosen));
    }
  gtk_string_list_append (labels, _("Processor Only"));
  g_ptr_array_add (self->gpu_choices, g_strdup ("processor"));

  self->gpu_updating = TRUE;
  adw_combo_row_set_model (self->gpu_device_row, G_LIST_MODEL (labels));
  for (guint i = 0; i < self->gpu_choices->len; i++)
    if (g_str_equal (g_ptr_array_index (self->gpu_choices, i), chosen))
      adw_combo_row_set_selected (self->gpu_device_row, i);
  self->gpu_updating = FALSE;
  gtk_widget_set_sensitive (GTK_WIDGET (self->gpu_layers_row), !g_str_equal (chosen, "processor"));
}

/* The setting changed (here or elsewhere): the row follows without being rebuilt under
 * the choice just made. */
static void
on_gpu_device_setting_changed (HanashiPreferencesWindow *self)
{
  g_autofree char *chosen = g_settings_get_string (self->settings, "gpu-device");
  guint index = 0;
  gboolean found = FALSE;
  for (guint i = 0; i < self->gpu_choices->len && !found; i++)
    if (g_str_equal (g_ptr_array_index (self->gpu_choices, i), chosen))
      {
        index = i;
        found = TRUE;
      }
  if (!found)
    {
      rebuild_gpu_devices (self);
      return;
    }
  if (adw_combo_row_get_selected (self->gpu_device_row) != index)
    {
      self->gpu_updating = TRUE;
      adw_combo_row_set_selected (self->gpu_device_row, index);
      self->gpu_updating = FALSE;
    }
  gtk_widget_set_sensitive (GTK_WIDGET (self->gpu_layers_row), !g_str_equal (chosen, "processor"));
}

static void
on_gpu_device_selected (HanashiPreferencesWindow *self)
{
  guint selected = adw_combo_row_get_selected (self->gpu_device_row);
  if (self->gpu_updating || selected >= self->gpu_choices->len)
    return;
  g_settings_set_string (self->settings, "gpu-device", g_ptr_array_index (self->gpu_choices, selected));
}

static void
on_gpu_devices_listed (GObject *source, GAsyncResult *result, gpointer data)
{
  g_autoptr (HanashiPreferencesWindow) self = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) devices = hanashi_gpu_list_devices_finish (result, &error);
  /* the window was closed meanwhile */
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  if (devices == NULL)
    {
      g_message ("No graphics devices: %s", error->message);
      adw_preferences_group_set_description (self->gpu_group,
                                             _("No graphics card with a Vulkan driver was found, so models run on the processor."));
      devices = g_ptr_array_new ();
    }
  g_clear_pointer (&self->gpu_devices, g_ptr_array_unref);
  self->gpu_devices = g_steal_pointer (&devices);
  rebuild_gpu_devices (self);
}

static void
setup_gpu_group (HanashiPreferencesWindow *self)
{
  self->gpu_choices = g_ptr_array_new_with_free_func (g_free);
  g_settings_bind (self->settings, "gpu-layers", gtk_spin_button_get_adjustment (self->gpu_layers_spin), "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_signal_connect (self->gpu_layers_spin, "output", G_CALLBACK (on_gpu_layers_output), NULL);
  g_signal_connect (self->gpu_layers_spin, "input", G_CALLBACK (on_gpu_layers_input), NULL);
  gtk_spin_button_update (self->gpu_layers_spin);
  g_signal_connect_swapped (self->gpu_device_row, "notify::selected", G_CALLBACK (on_gpu_device_selected), self);
  g_signal_connect_swapped (self->settings, "changed::gpu-device", G_CALLBACK (on_gpu_device_setting_changed), self);
  rebuild_gpu_devices (self);
  if (!hanashi_gpu_supported ())
    {
      adw_preferences_group_set_description (self->gpu_group,
                                             _("This copy of Hanashi was built without Vulkan, so models run on the processor."));
      gtk_widget_set_sensitive (GTK_WIDGET (self->gpu_group), FALSE);
      return;
    }
  /* asking the driver takes a while: never on the main loop */
  self->gpu_cancellable = g_cancellable_new ();
  hanashi_gpu_list_devices_async (self->gpu_cancellable, on_gpu_devices_listed, g_object_ref (self));
}

/* ---- model folders -------------------------------------------------------------------- */

static void rebuild_folders (HanashiPreferencesWindow *self);

static void
on_remove_folder (GtkButton *button, HanashiPreferencesWindow *self)
{
  const char *folder = g_object_get_data (G_OBJECT (button), "folder");
  g_auto (GStrv) folders = g_settings_get_strv (self->settings, "model-folders");
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  for (char **f = folders; *f; f++)
    if (!g_str_equal (*f, folder))
      g_strv_builder_add (builder, *f);
  g_auto (GStrv) updated = g_strv_builder_end (builder);
  g_settings_set_strv (self->settings, "model-folders", (const char *const *) updated);
}

static void
rebuild_folders (HanashiPreferencesWindow *self)
{
  for (guint i = 0; i < self->folder_rows->len; i++)
    adw_preferences_group_remove (self->folders_group, g_ptr_array_index (self->folder_rows, i));
  g_ptr_array_set_size (self->folder_rows, 0);

  g_autofree char *own = hanashi_model_scan_dup_app_folder ();
  g_autofree char *own_escaped = g_markup_escape_text (own, -1);
  GtkWidget *own_row = adw_action_row_new ();
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (own_row), own_escaped);
  adw_action_row_set_subtitle (ADW_ACTION_ROW (own_row), _("Downloads go here"));
  adw_preferences_group_add (self->folders_group, own_row);
  g_ptr_array_add (self->folder_rows, own_row);

  g_auto (GStrv) folders = g_settings_get_strv (self->settings, "model-folders");
  for (char **f = folders; *f; f++)
    {
      GtkWidget *row = adw_action_row_new ();
      g_autofree char *escaped = g_markup_escape_text (*f, -1);
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), escaped);
      GtkWidget *remove = gtk_button_new_from_icon_name ("list-remove-symbolic");
      gtk_widget_set_valign (remove, GTK_ALIGN_CENTER);
      gtk_widget_add_css_class (remove, "flat");
      gtk_widget_set_tooltip_text (remove, _("Remove Folder"));
      gtk_accessible_update_property (GTK_ACCESSIBLE (remove), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Remove Folder"), -1);
      g_object_set_data_full (G_OBJECT (remove), "folder", g_strdup (*f), g_free);
      g_signal_connect (remove, "clicked", G_CALLBACK (on_remove_folder), self);
      adw_action_row_add_suffix (ADW_ACTION_ROW (row), remove);
      adw_preferences_group_add (self->folders_group, row);
      g_ptr_array_add (self->folder_rows, row);
    }
}

static void
add_folder (HanashiPreferencesWindow *self, GFile *folder)
{
  g_autofree char *path = g_file_get_path (folder);
  if (!path)
    return;
  g_auto (GStrv) folders = g_settings_get_strv (self->settings, "model-folders");
  if (g_strv_contains ((const char *const *) folders, path))
    return;
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  g_strv_builder_addv (builder, (const char **) folders);
  g_strv_builder_add (builder, path);
  g_auto (GStrv) updated = g_strv_builder_end (builder);
  g_settings_set_strv (self->settings, "model-folders", (const char *const *) updated);
}

G_GNUC_BEGIN_IGNORE_DEPRECATIONS
/* GtkFileChooserNative is what GTK 4.8 has (GtkFileDialog arrived in 4.10); it goes
 * through the portal inside Flatpak either way. */
static void
on_folder_chosen (GtkNativeDialog *chooser, int response, HanashiPreferencesWindow *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr (GFile) folder = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (chooser));
      if (folder)
        add_folder (self, folder);
    }
  gtk_native_dialog_destroy (chooser);
  g_object_unref (chooser);
}

static void
on_add_folder (HanashiPreferencesWindow *self)
{
  /* A dialog is not a window of its own: the chooser belongs to the one it is shown in. */
  GtkWindow *window = GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (self)));
  GtkFileChooserNative *chooser = gtk_file_chooser_native_new (_("Add Model Folder"), window,
                                                               GTK_FILE_CHOOSER_ACTION_SELECT_FOLDER,
                                                               _("_Add"), _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (chooser), TRUE);
  g_signal_connect (chooser, "response", G_CALLBACK (on_folder_chosen), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (chooser));
}
G_GNUC_END_IGNORE_DEPRECATIONS

/* ---- GObject -------------------------------------------------------------------------- */

static void
hanashi_preferences_window_dispose (GObject *object)
{
  HanashiPreferencesWindow *self = HANASHI_PREFERENCES_WINDOW (object);
  g_cancellable_cancel (self->gpu_cancellable);
  g_clear_object (&self->gpu_cancellable);
  g_clear_pointer (&self->gpu_choices, g_ptr_array_unref);
  g_clear_pointer (&self->gpu_devices, g_ptr_array_unref);
  /* the bindings keep the settings object alive after the window */
  if (self->settings != NULL)
    g_signal_handlers_disconnect_by_data (self->settings, self);
  g_clear_object (&self->engine);
  g_clear_object (&self->settings);
  g_clear_pointer (&self->folder_rows, g_ptr_array_unref);
  gtk_widget_dispose_template (GTK_WIDGET (self), HANASHI_TYPE_PREFERENCES_WINDOW);
  G_OBJECT_CLASS (hanashi_preferences_window_parent_class)->dispose (object);
}

static void
hanashi_preferences_window_class_init (HanashiPreferencesWindowClass *klass)
{
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  G_OBJECT_CLASS (klass)->dispose = hanashi_preferences_window_dispose;
  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hanashi/Hanashi/ui/hanashi-preferences-window.ui");
  gtk_widget_class_bind_template_child (widget_class, HanashiPreferencesWindow, threads_spin);
  gtk_widget_class_bind_template_child (widget_class, HanashiPreferencesWindow, context_spin);
  gtk_widget_class_bind_template_child (widget_class, HanashiPreferencesWindow, batch_spin);
  gtk_widget_class_bind_template_child (widget_class, HanashiPreferencesWindow, cache_spin);
  gtk_widget_class_bind_template_child (widget_class, HanashiPreferencesWindow, clear_cache_button);
  gtk_widget_class_bind_template_child (widget_class, HanashiPreferencesWindow, parameters_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiPreferencesWindow, folders_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiPreferencesWindow, add_folder_button);
  gtk_widget_class_bind_template_child (widget_class, HanashiPreferencesWindow, gpu_group);
  gtk_widget_class_bind_template_child (widget_class, HanashiPreferencesWindow, gpu_device_row);
  gtk_widget_class_bind_template_child (widget_class, HanashiPreferencesWindow, gpu_layers_row);
  gtk_widget_class_bind_template_child (widget_class, HanashiPreferencesWindow, gpu_layers_spin);
}

static void
hanashi_preferences_window_init (HanashiPreferencesWindow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
#if HANASHI_PREFERENCES_DIALOG
  adw_dialog_set_content_width (ADW_DIALOG (self), 640);
  adw_dialog_set_content_height (ADW_DIALOG (self), 720);
#else
  gtk_window_set_modal (GTK_WINDOW (self), TRUE);
  gtk_window_set_default_size (GTK_WINDOW (self), 640, 720);
#endif
  self->folder_rows = g_ptr_array_new ();
  self->settings = g_settings_new (APP_ID);

  g_settings_bind (self->settings, "n-threads", gtk_spin_button_get_adjustment (self->threads_spin), "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "context-size", gtk_spin_button_get_adjustment (self->context_spin), "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "batch-size", gtk_spin_button_get_adjustment (self->batch_spin), "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind_with_mapping (self->settings, "session-cache-limit-mb", gtk_spin_button_get_adjustment (self->cache_spin), "value",
                                G_SETTINGS_BIND_DEFAULT, cache_mb_to_gb, cache_gb_to_mb, NULL, NULL);
  g_signal_connect_swapped (self->settings, "changed::session-cache-limit-mb", G_CALLBACK (apply_cache_limit), self);
  g_signal_connect_swapped (self->settings, "changed::model-folders", G_CALLBACK (rebuild_folders), self);
  g_signal_connect_swapped (self->clear_cache_button, "clicked", G_CALLBACK (on_clear_cache), self);
  g_signal_connect_swapped (self->add_folder_button, "clicked", G_CALLBACK (on_add_folder), self);

  HanashiParamsPanel *defaults = hanashi_params_panel_new_for_defaults ();
  gtk_widget_set_name (GTK_WIDGET (defaults), "default-parameters");
  adw_preferences_group_add (self->parameters_group, GTK_WIDGET (defaults));
  rebuild_folders (self);
  setup_gpu_group (self);
}

HanashiPreferencesWindow *
hanashi_preferences_window_new (GtkWindow *parent, HanashiEngine *engine)
{
#if HANASHI_PREFERENCES_DIALOG
  HanashiPreferencesWindow *self = g_object_new (HANASHI_TYPE_PREFERENCES_WINDOW, NULL);
#else
  HanashiPreferencesWindow *self = g_object_new (HANASHI_TYPE_PREFERENCES_WINDOW,
                                                 "transient-for", parent, NULL);
#endif
  g_set_object (&self->engine, engine);
  return self;
}

void
hanashi_preferences_window_present (HanashiPreferencesWindow *self,
                                    GtkWindow                *parent)
{
  g_return_if_fail (HANASHI_IS_PREFERENCES_WINDOW (self));
#if HANASHI_PREFERENCES_DIALOG
  adw_dialog_present (ADW_DIALOG (self), parent != NULL ? GTK_WIDGET (parent) : NULL);
#else
  if (parent != NULL && gtk_window_get_transient_for (GTK_WINDOW (self)) == NULL)
    gtk_window_set_transient_for (GTK_WINDOW (self), parent);
  gtk_window_present (GTK_WINDOW (self));
#endif
}

void
hanashi_preferences_window_set_serving (HanashiPreferencesWindow *self,
                                        HanashiServing           *serving)
{
  g_return_if_fail (HANASHI_IS_PREFERENCES_WINDOW (self));
  g_return_if_fail (HANASHI_IS_SERVING (serving));
  /* a page of its own: the server's settings are apart from the engine's */
  AdwPreferencesPage *page = ADW_PREFERENCES_PAGE (hanashi_serve_page_new (serving));
#if HANASHI_PREFERENCES_DIALOG
  adw_preferences_dialog_add (ADW_PREFERENCES_DIALOG (self), page);
#else
  adw_preferences_window_add (ADW_PREFERENCES_WINDOW (self), page);
#endif
}
