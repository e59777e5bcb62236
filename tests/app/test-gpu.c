/* The graphics card in the app: Preferences' "Graphics Card" group (device and layers
 * written to GSettings, the Processor-only choice, a build without Vulkan through the
 * HANASHI_VULKAN_FAIL=unbuilt seam), and the window on the scripted backend (the choice
 * reaching the engine when the model is loaded again, never in the middle of a reply, and
 * the line under the model's name saying where it runs).  The devices listed are the
 * machine's: with none (or no driver) the part that picks one says so and is left out.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>

#include "hanashi-preferences-window.h"
#include "test-scripted.h"
#include "test-window-helpers.h"

typedef struct {
  HanashiPreferencesWindow *window;
  const char *initial_description;
} Listing;

/* The devices were listed: the row has more than Automatic and Processor Only, or the
 * group says why there are none. */
static gboolean
devices_listed (gpointer data)
{
  Listing *l = data;
  AdwPreferencesGroup *group = ADW_PREFERENCES_GROUP (find_named (GTK_WIDGET (l->window), "graphics-card"));
  AdwComboRow *row = ADW_COMBO_ROW (find_named (GTK_WIDGET (l->window), "gpu-device"));
  return g_list_model_get_n_items (adw_combo_row_get_model (row)) > 2
         || g_strcmp0 (adw_preferences_group_get_description (group), l->initial_description) != 0;
}

static const char *
row_label (AdwComboRow *row, guint i)
{
  GtkStringObject *item = g_list_model_get_item (adw_combo_row_get_model (row), i);
  const char *label = gtk_string_object_get_string (item);
  g_object_unref (item);  /* the model keeps it */
  return label;
}

static void
test_preferences_rows (void)
{
  g_autoptr (GSettings) settings = g_settings_new (APP_ID);
  HanashiPreferencesWindow *window = hanashi_preferences_window_new (NULL, NULL);
  gtk_window_present (GTK_WINDOW (window));
  GtkWidget *group = find_named (GTK_WIDGET (window), "graphics-card");
  AdwComboRow *device_row = ADW_COMBO_ROW (find_named (GTK_WIDGET (window), "gpu-device"));
  GtkSpinButton *layers = GTK_SPIN_BUTTON (find_named (GTK_WIDGET (window), "gpu-layers"));
  g_assert_nonnull (group);
  g_assert_nonnull (device_row);
  g_assert_nonnull (layers);
  g_assert_true (gtk_widget_get_sensitive (group));

  /* the default: Auto layers on the automatic device */
  g_assert_cmpstr (gtk_editable_get_text (GTK_EDITABLE (layers)), ==, "Auto");
  g_assert_cmpuint (adw_combo_row_get_selected (device_row), ==, 0);
  Listing listing = { window, adw_preferences_group_get_description (ADW_PREFERENCES_GROUP (group)) };
  g_autofree char *initial = g_strdup (listing.initial_description);
  listing.initial_description = initial;
  wait_until (devices_listed, &listing);

  GListModel *model = adw_combo_row_get_model (device_row);
  guint n = g_list_model_get_n_items (model);
  g_assert_cmpuint (n, >=, 2);
  g_assert_cmpstr (row_label (device_row, 0), ==, "Automatic");
  g_assert_cmpstr (row_label (device_row, n - 1), ==, "Processor Only");

  /* Processor only: written, and the layer count has nothing to say */
  adw_combo_row_set_selected (device_row, n - 1);
  g_autofree char *processor = g_settings_get_string (settings, "gpu-device");
  g_assert_cmpstr (processor, ==, "processor");
  g_assert_false (gtk_widget_get_sensitive (gtk_widget_get_ancestor (GTK_WIDGET (layers), ADW_TYPE_ACTION_ROW)));
  adw_combo_row_set_selected (device_row, 0);
  g_autofree char *automatic = g_settings_get_string (settings, "gpu-device");
  g_assert_cmpstr (automatic, ==, "auto");
  g_assert_true (gtk_widget_get_sensitive (gtk_widget_get_ancestor (GTK_WIDGET (layers), ADW_TYPE_ACTION_ROW)));

  /* a number of layers, typed; "Auto" typed back */
  gtk_spin_button_set_value (layers, 7);
  g_assert_cmpint (g_settings_get_int (settings, "gpu-layers"), ==, 7);
  gtk_editable_set_text (GTK_EDITABLE (layers), "Auto");
  gtk_spin_button_update (layers);
  g_assert_cmpint (g_settings_get_int (settings, "gpu-layers"), ==, -1);
  g_assert_cmpstr (gtk_editable_get_text (GTK_EDITABLE (layers)), ==, "Auto");

  /* a device of this machine, by name */
  if (n > 2)
    {
      adw_combo_row_set_selected (device_row, 1);
      g_autofree char *device = g_settings_get_string (settings, "gpu-device");
      g_assert_true (g_str_has_prefix (row_label (device_row, 1), device));
      /* a setting made elsewhere moves the row */
      g_settings_set_string (settings, "gpu-device", "processor");
      g_assert_cmpuint (adw_combo_row_get_selected (device_row), ==, n - 1);
    }
  else
    g_test_message ("no Vulkan device here: choosing one is not tested");

  gtk_window_destroy (GTK_WINDOW (window));
  g_settings_reset (settings, "gpu-device");
  g_settings_reset (settings, "gpu-layers");
}

/* A build without Vulkan: the group is there, insensitive, and says why. */
static void
test_preferences_without_vulkan (void)
{
  g_setenv ("HANASHI_VULKAN_FAIL", "unbuilt", TRUE);
  HanashiPreferencesWindow *window = hanashi_preferences_window_new (NULL, NULL);
  gtk_window_present (GTK_WINDOW (window));
  GtkWidget *group = find_named (GTK_WIDGET (window), "graphics-card");
  g_assert_false (gtk_widget_get_sensitive (group));
  g_assert_cmpstr (adw_preferences_group_get_description (ADW_PREFERENCES_GROUP (group)), ==,
                   "This copy of Hanashi was built without Vulkan, so models run on the processor.");
  gtk_window_destroy (GTK_WINDOW (window));
  g_unsetenv ("HANASHI_VULKAN_FAIL");
}

static const char *expected_runs_on;

static gboolean
runs_on_is (gpointer window)
{
  GtkWidget *label = find_named (GTK_WIDGET (window), "runs-on");
  return gtk_widget_get_visible (label) && g_strcmp0 (gtk_label_get_label (GTK_LABEL (label)), expected_runs_on) == 0;
}

static void
wait_runs_on (HanashiWindow *window, const char *text)
{
  expected_runs_on = text;
  wait_until (runs_on_is, window);
}

static void
assert_last_gpu (const char *device, int n_layers)
{
  int layers = -2;
  g_autofree char *last = hanashi_test_scripted_dup_last_gpu (&layers);
  g_assert_cmpstr (last, ==, device);
  g_assert_cmpint (layers, ==, n_layers);
}

static gboolean
waited (gpointer data)
{
  return g_get_monotonic_time () >= *(gint64 *) data;
}

static void
test_window_runs_on (void)
{
  g_autoptr (GSettings) settings = g_settings_new (APP_ID);
  g_settings_set_string (settings, "gpu-device", "processor");
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 900, 700, TRUE);

  /* Processor only reaches the engine as no layers, and the window says so */
  assert_last_gpu (NULL, 0);
  wait_runs_on (window, "Runs on the processor");

  /* a device and a layer count: the model is loaded again with them */
  g_settings_set_int (settings, "gpu-layers", 3);
  g_settings_set_string (settings, "gpu-device", "Test Graphics");
  wait_runs_on (window, "Runs on Test Graphics, 3 of 4 layers");
  assert_last_gpu ("Test Graphics", 3);
  g_settings_set_int (settings, "gpu-layers", -1);
  wait_runs_on (window, "Runs on Test Graphics, 4 of 4 layers");
  assert_last_gpu ("Test Graphics", -1);

  /* never in the middle of a reply: the new choice waits for its end */
  hanashi_test_scripted_hold_at (2);
  send_text (window, "Hello");
  g_settings_set_int (settings, "gpu-layers", 1);
  gint64 later = g_get_monotonic_time () + G_USEC_PER_SEC;
  wait_until (waited, &later);
  g_assert_false (reply_done (window));
  assert_last_gpu ("Test Graphics", -1);
  hanashi_test_scripted_hold_at (-1);
  wait_until (reply_done, window);
  wait_runs_on (window, "Runs on Test Graphics, 1 of 4 layers");
  assert_last_gpu ("Test Graphics", 1);

  /* the device cannot be used: the processor, and the engine's reason in the tooltip */
  hanashi_test_scripted_set_gpu_failure ("The graphics device ran out of memory for the key cache.");
  g_settings_set_int (settings, "gpu-layers", 2);
  wait_runs_on (window, "Runs on the processor: the graphics card could not be used");
  GtkWidget *label = find_named (GTK_WIDGET (window), "runs-on");
  g_assert_cmpstr (gtk_widget_get_tooltip_text (label), ==, "The graphics device ran out of memory for the key cache.");
  hanashi_test_scripted_set_gpu_failure (NULL);

  /* the automatic choice finds no hardware device in the scripted world */
  g_settings_set_string (settings, "gpu-device", "auto");
  wait_runs_on (window, "Runs on the processor");
  assert_last_gpu (NULL, 2);

  gtk_window_destroy (GTK_WINDOW (window));
  g_settings_reset (settings, "gpu-device");
  g_settings_reset (settings, "gpu-layers");
}

int
main (int argc, char **argv)
{
  scripted_test_init (&argc, &argv);
  write_scripted_model (g_get_user_data_dir ());
  g_test_add_func ("/gpu/preferences-rows", test_preferences_rows);
  g_test_add_func ("/gpu/preferences-without-vulkan", test_preferences_without_vulkan);
  g_test_add_func ("/gpu/window-runs-on", test_window_runs_on);
  int status = g_test_run ();
  g_free (model_path);
  return status;
}
