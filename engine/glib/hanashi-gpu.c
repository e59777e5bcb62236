/* hanashi-gpu.c: the graphics devices for Preferences, listed off the main loop.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-engine"

#include "hanashi-engine.h"

#include "hn-vk.h"

/* More devices than any computer has; the rest would not be listed. */
#define MAX_DEVICES 16

void
hanashi_gpu_device_free (HanashiGpuDevice *device)
{
  if (device == NULL)
    return;
  g_free (device->name);
  g_free (device->type);
  g_free (device);
}

gboolean
hanashi_gpu_supported (void)
{
  return hn_vk_built ();
}

static void
list_devices_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  HnVkDeviceInfo infos[MAX_DEVICES];
  HnError err = { 0 };
  int n = hn_vk_list_devices (infos, MAX_DEVICES, &err);
  if (n < 0)
    {
      g_task_return_new_error (task, HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_FAILED, "%s", err.message);
      return;
    }
  GPtrArray *devices = g_ptr_array_new_with_free_func ((GDestroyNotify) hanashi_gpu_device_free);
  for (int i = 0; i < MIN (n, MAX_DEVICES); i++)
    {
      HanashiGpuDevice *device = g_new0 (HanashiGpuDevice, 1);
      device->name = g_strdup (infos[i].name);
      device->type = g_strdup (infos[i].type);
      device->memory = infos[i].memory;
      g_ptr_array_add (devices, device);
    }
  g_task_return_pointer (task, devices, (GDestroyNotify) g_ptr_array_unref);
}

void
hanashi_gpu_list_devices_async (GCancellable        *cancellable,
                                GAsyncReadyCallback  callback,
                                gpointer             user_data)
{
  g_autoptr (GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  g_task_set_source_tag (task, hanashi_gpu_list_devices_async);
  g_task_run_in_thread (task, list_devices_thread);
}

GPtrArray *
hanashi_gpu_list_devices_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}
