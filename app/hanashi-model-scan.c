/* hanashi-model-scan.c: metadata of local GGUF files.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-model-scan"

#include "config.h"

#include <glib/gi18n.h>
#include <string.h>

#include "hanashi-model-file.h"
#include "hanashi-model-scan.h"

void
hanashi_local_model_free (HanashiLocalModel *model)
{
  if (!model)
    return;
  g_free (model->path);
  g_free (model->name);
  g_free (model->arch);
  g_free (model->weight_type);
  g_free (model->license);
  g_free (model->error);
  g_free (model);
}

char *
hanashi_model_scan_dup_app_folder (void)
{
  return g_build_filename (g_get_user_data_dir (), "hanashi", "models", NULL);
}

HanashiLocalModel *
hanashi_model_scan_file (const char *path)
{
  HanashiLocalModel *model = g_new0 (HanashiLocalModel, 1);
  model->path = g_strdup (path);
  g_autoptr (GFile) file = g_file_new_for_path (path);
  g_autoptr (GFileInfo) info = g_file_query_info (file, G_FILE_ATTRIBUTE_STANDARD_SIZE, 0, NULL, NULL);
  if (info)
    model->file_size = (guint64) g_file_info_get_size (info);

  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();
  g_autofree char *dir = g_path_get_dirname (path);
  model->in_app_folder = g_strcmp0 (dir, app_folder) == 0;

  /* The engine's own answers (one read of the header), so that the list and the loaded
   * model never disagree. */
  g_autoptr (GError) error = NULL;
  g_autoptr (HanashiModelFileFacts) facts = hanashi_model_file_read_facts (path, &error);
  if (!facts)
    {
      model->name = g_path_get_basename (path);
      model->error = g_strdup (error->message);
      return model;
    }
  model->name = (facts->name && *facts->name) ? g_steal_pointer (&facts->name) : g_path_get_basename (path);
  model->arch = g_steal_pointer (&facts->arch);
  model->license = g_steal_pointer (&facts->license);
  model->weight_type = g_steal_pointer (&facts->weight_type);
  model->n_ctx_train = facts->n_ctx_train;
  model->n_params = facts->n_params;
  return model;
}

static int
compare_models (gconstpointer a, gconstpointer b)
{
  const HanashiLocalModel *ma = *(HanashiLocalModel *const *) a;
  const HanashiLocalModel *mb = *(HanashiLocalModel *const *) b;
  int by_name = g_utf8_collate (ma->name, mb->name);
  return by_name ? by_name : g_strcmp0 (ma->path, mb->path);
}

static void
scan_folder (const char *folder, GHashTable *seen, GPtrArray *models, GCancellable *cancellable)
{
  g_autoptr (GDir) dir = g_dir_open (folder, 0, NULL);
  if (!dir)
    return;
  const char *entry;
  while ((entry = g_dir_read_name (dir)) && !g_cancellable_is_cancelled (cancellable))
    {
      if (!g_str_has_suffix (entry, ".gguf") && !g_str_has_suffix (entry, ".GGUF"))
        continue;
      g_autofree char *path = g_build_filename (folder, entry, NULL);
      g_autofree char *canonical = g_canonicalize_filename (path, NULL);
      if (!g_file_test (path, G_FILE_TEST_IS_REGULAR) || g_hash_table_contains (seen, canonical))
        continue;
      g_hash_table_add (seen, g_steal_pointer (&canonical));
      g_ptr_array_add (models, hanashi_model_scan_file (path));
    }
}

static void
scan_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  char **extra = task_data;
  g_autoptr (GPtrArray) models = g_ptr_array_new_with_free_func ((GDestroyNotify) hanashi_local_model_free);
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();
  scan_folder (app_folder, seen, models, cancellable);
  for (char **folder = extra; folder && *folder; folder++)
    scan_folder (*folder, seen, models, cancellable);
  g_ptr_array_sort (models, compare_models);
  if (g_task_return_error_if_cancelled (task))
    return;
  g_task_return_pointer (task, g_steal_pointer (&models), (GDestroyNotify) g_ptr_array_unref);
}

void
hanashi_model_scan_async (const char *const *extra_folders, GCancellable *cancellable,
                          GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr (GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  g_task_set_source_tag (task, hanashi_model_scan_async);
  g_task_set_task_data (task, g_strdupv ((char **) extra_folders), (GDestroyNotify) g_strfreev);
  g_task_run_in_thread (task, scan_thread);
}

GPtrArray *
hanashi_model_scan_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

char *
hanashi_model_format_params (guint64 n)
{
  if (n >= 1000000000ull)
    return g_strdup_printf ("%.1fB", n / 1e9);
  if (n >= 10000000ull)
    return g_strdup_printf ("%.0fM", n / 1e6);
  if (n >= 1000000ull)
    return g_strdup_printf ("%.1fM", n / 1e6);
  if (n >= 1000ull)
    return g_strdup_printf ("%.0fK", n / 1e3);
  return g_strdup_printf ("%" G_GUINT64_FORMAT, n);
}
