/* The Models page: local models with their metadata, and a download from a local HTTP
 * server (127.0.0.1) through the dialog that then shows up in the list.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>
#include <stdlib.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>

#include "hanashi-catalog.h"
#include "hanashi-model-file.h"
#include "hanashi-model-scan.h"
#include "hanashi-models-dialog.h"
#include "hn-quantize.h"
#include "test-widgets.h"
#include "test-xdg.h"
#include "test-screenshot.h"
#include "hanashi-test-seams.h"

static const char *
testdata_models (void)
{
  static char *dir;
  if (!dir)
    dir = g_build_filename (g_getenv ("HANASHI_TESTDATA") ? g_getenv ("HANASHI_TESTDATA") : "", "models", NULL);
  return dir;
}

static void
collect_rows (GtkWidget *root, GPtrArray *rows)
{
  if (ADW_IS_ACTION_ROW (root))
    g_ptr_array_add (rows, root);
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    collect_rows (child, rows);
}

static AdwActionRow *
find_row_for_path (HanashiModelsDialog *dialog, const char *path)
{
  g_autoptr (GPtrArray) rows = g_ptr_array_new ();
  collect_rows (GTK_WIDGET (dialog), rows);
  for (guint i = 0; i < rows->len; i++)
    if (g_strcmp0 (g_object_get_data (rows->pdata[i], "path"), path) == 0)
      return rows->pdata[i];
  return NULL;
}

static GtkWidget *
find_button_with_tooltip (GtkWidget *root, const char *tooltip)
{
  if (GTK_IS_BUTTON (root) && gtk_widget_get_visible (root)
      && g_strcmp0 (gtk_widget_get_tooltip_text (root), tooltip) == 0)
    return root;
  for (GtkWidget *c = gtk_widget_get_first_child (root); c; c = gtk_widget_get_next_sibling (c))
    {
      GtkWidget *found = find_button_with_tooltip (c, tooltip);
      if (found)
        return found;
    }
  return NULL;
}

static void
on_models_changed (HanashiModelsDialog *dialog, int *count)
{
  (*count)++;
}

static void
on_model_activated (HanashiModelsDialog *dialog, const char *path, char **out)
{
  g_free (*out);
  *out = g_strdup (path);
}

static void
wait_for_scan (HanashiModelsDialog *dialog, int *count)
{
  int before = *count;
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (*count == before && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpint (*count, >, before);
}

/* A new Models window, presented, once its first scan of the model folders is done;
 * @scans (which must live as long as the window) counts its scans, for wait_for_scan. */
static HanashiModelsDialog *
present_scanned_dialog (int *scans)
{
  HanashiModelsDialog *dialog = hanashi_models_dialog_new (NULL);
  *scans = 0;
  g_signal_connect (dialog, "models-changed", G_CALLBACK (on_models_changed), scans);
  gtk_window_present (GTK_WINDOW (dialog));
  wait_for_scan (dialog, scans);
  return dialog;
}

static char *
link_model (const char *folder, const char *name)
{
  g_assert_cmpint (g_mkdir_with_parents (folder, 0755), ==, 0);
  g_autofree char *target = g_build_filename (testdata_models (), name, NULL);
  char *link = g_build_filename (folder, name, NULL);
  g_assert_cmpint (symlink (target, link), ==, 0);
  return link;
}

static void
test_lists_local_models (void)
{
  g_autofree char *q8 = g_build_filename (testdata_models (), "quant-llama-v512-q8_0.gguf", NULL);
  if (!g_file_test (q8, G_FILE_TEST_EXISTS))
    {
      g_test_skip ("no test models");
      return;
    }
  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();
  g_autofree char *app_model = link_model (app_folder, "quant-llama-v512-q8_0.gguf");
  g_autofree char *extra = g_build_filename (g_get_user_data_dir (), "elsewhere", NULL);
  g_autofree char *extra_model = link_model (extra, "tiny-qwen2-gpt2-q8_0.gguf");
  g_autofree char *broken = g_build_filename (app_folder, "broken.gguf", NULL);
  g_assert_true (g_file_set_contents (broken, "GGUF but not really", -1, NULL));

  g_autoptr (GSettings) settings = g_settings_new (APP_ID);
  const char *folders[] = { extra, NULL };
  g_settings_set_strv (settings, "model-folders", folders);

  int scans;
  HanashiModelsDialog *dialog = present_scanned_dialog (&scans);

  /* The metadata read in the worker thread: the file is a 4-layer LLaMA with dim 256,
   * ffn 768, 8 query and 4 KV heads and a 512-token vocabulary, mostly Q8_0. */
  g_autoptr (HanashiLocalModel) model = hanashi_model_scan_file (app_model);
  g_assert_null (model->error);
  g_assert_cmpstr (model->arch, ==, "llama");
  g_assert_cmpstr (model->weight_type, ==, "Q8_0");
  guint64 per_layer = 256 * 256 * 2 + 256 * 128 * 2 + 3 * 256 * 768 + 2 * 256;
  guint64 expected = 4 * per_layer + 512 * 256 + 256;
  g_assert_true (model->n_params == expected || model->n_params == expected + 512 * 256);
  g_assert_cmpuint (model->file_size, ==, 3643904);
  g_assert_cmpuint (model->n_ctx_train, >, 0);
  g_assert_true (model->in_app_folder);

  /* Mixed files are listed with the weight type the engine reports for them once loaded.
   * The 32000-token model in Q4_K keeps its output matrix in Q6_K, and with so large a
   * vocabulary that matrix alone holds more bytes than all Q4_K tensors together: the
   * file is still a Q4_K model, as the engine says, not a Q6_K one. */
  g_autofree char *mixed_path = g_build_filename (testdata_models (), "quant-llama-v512-q4_k_m.gguf", NULL);
  g_autoptr (HanashiLocalModel) mixed = hanashi_model_scan_file (mixed_path);
  g_assert_null (mixed->error);
  g_autofree char *engine_type = hanashi_model_file_dup_weight_type (mixed_path, NULL);
  g_assert_cmpstr (mixed->weight_type, ==, engine_type);
  g_assert_cmpstr (mixed->weight_type, ==, "Q4_K");

  g_autofree char *quant_dir = g_dir_make_tmp ("hanashi-quant-XXXXXX", NULL);
  g_assert_nonnull (quant_dir);
  g_autofree char *source = g_build_filename (testdata_models (), "tiny-llama-spm-q8_0.gguf", NULL);
  g_autofree char *q4_k = g_build_filename (quant_dir, "tiny-llama-q4_k.gguf", NULL);
  HnError err = { 0 };
  if (!hn_quantize_model (source, q4_k, hn_quantize_target_find ("Q4_K"), 2, NULL, NULL, &err))
    g_error ("%s", err.message);
  g_autoptr (HanashiLocalModel) large_vocab = hanashi_model_scan_file (q4_k);
  g_assert_null (large_vocab->error);
  g_autofree char *large_vocab_type = hanashi_model_file_dup_weight_type (q4_k, NULL);
  g_assert_cmpstr (large_vocab->weight_type, ==, large_vocab_type);
  g_assert_cmpstr (large_vocab->weight_type, ==, "Q4_K");
  g_unlink (q4_k);
  g_rmdir (quant_dir);

  AdwActionRow *row = find_row_for_path (dialog, app_model);
  g_assert_nonnull (row);
  const char *subtitle = adw_action_row_get_subtitle (row);
  g_assert_nonnull (strstr (subtitle, "llama"));
  g_assert_nonnull (strstr (subtitle, "Q8_0"));
  g_autofree char *size = g_format_size (3643904);
  g_assert_nonnull (strstr (subtitle, size));
  g_autofree char *params = hanashi_model_format_params (model->n_params);
  g_assert_nonnull (strstr (subtitle, params));
  g_autofree char *ctx = g_strdup_printf ("%u-token context", model->n_ctx_train);
  g_assert_nonnull (strstr (subtitle, ctx));

  test_screenshot (GTK_WIDGET (dialog), "models-installed");
  AdwViewStack *view_stack = NULL;
  {
    g_autoptr (GPtrArray) todo = g_ptr_array_new ();
    g_ptr_array_add (todo, dialog);
    while (todo->len && !view_stack)
      {
        GtkWidget *cur = g_ptr_array_steal_index (todo, todo->len - 1);
        if (ADW_IS_VIEW_STACK (cur))
          view_stack = ADW_VIEW_STACK (cur);
        for (GtkWidget *c = gtk_widget_get_first_child (cur); c; c = gtk_widget_get_next_sibling (c))
          g_ptr_array_add (todo, c);
      }
  }
  g_assert_nonnull (view_stack);
  adw_view_stack_set_visible_child_name (view_stack, "download");
  test_screenshot (GTK_WIDGET (dialog), "models-download");
  adw_view_stack_set_visible_child_name (view_stack, "installed");

  AdwActionRow *qwen = find_row_for_path (dialog, extra_model);
  g_assert_nonnull (qwen);
  g_assert_nonnull (strstr (adw_action_row_get_subtitle (qwen), "qwen2"));

  AdwActionRow *bad = find_row_for_path (dialog, broken);
  g_assert_nonnull (bad);
  g_assert_true (g_str_has_prefix (adw_action_row_get_subtitle (bad), "Not usable"));

  /* Delete is offered only for the app's own folder. */
  gboolean app_has_delete = FALSE, extra_has_delete = FALSE;
  for (GtkWidget *w = GTK_WIDGET (row); w; w = NULL)
    {
      g_autoptr (GPtrArray) stack = g_ptr_array_new ();
      g_ptr_array_add (stack, w);
      while (stack->len)
        {
          GtkWidget *cur = g_ptr_array_steal_index (stack, stack->len - 1);
          if (GTK_IS_BUTTON (cur) && g_strcmp0 (gtk_widget_get_tooltip_text (cur), "Delete Model") == 0)
            app_has_delete = TRUE;
          for (GtkWidget *c = gtk_widget_get_first_child (cur); c; c = gtk_widget_get_next_sibling (c))
            g_ptr_array_add (stack, c);
        }
    }
  for (GtkWidget *w = GTK_WIDGET (qwen); w; w = NULL)
    {
      g_autoptr (GPtrArray) stack = g_ptr_array_new ();
      g_ptr_array_add (stack, w);
      while (stack->len)
        {
          GtkWidget *cur = g_ptr_array_steal_index (stack, stack->len - 1);
          if (GTK_IS_BUTTON (cur) && g_strcmp0 (gtk_widget_get_tooltip_text (cur), "Delete Model") == 0)
            extra_has_delete = TRUE;
          for (GtkWidget *c = gtk_widget_get_first_child (cur); c; c = gtk_widget_get_next_sibling (c))
            g_ptr_array_add (stack, c);
        }
    }
  g_assert_true (app_has_delete);
  g_assert_false (extra_has_delete);

  /* Delete asks first; confirming removes the file and its row. */
  GtkWidget *delete_button = NULL;
  {
    g_autoptr (GPtrArray) stack = g_ptr_array_new ();
    g_ptr_array_add (stack, find_row_for_path (dialog, broken));
    while (stack->len)
      {
        GtkWidget *cur = g_ptr_array_steal_index (stack, stack->len - 1);
        if (GTK_IS_BUTTON (cur) && g_strcmp0 (gtk_widget_get_tooltip_text (cur), "Delete Model") == 0)
          delete_button = cur;
        for (GtkWidget *c = gtk_widget_get_first_child (cur); c; c = gtk_widget_get_next_sibling (c))
          g_ptr_array_add (stack, c);
      }
  }
  g_assert_nonnull (delete_button);
  g_signal_emit_by_name (delete_button, "clicked");
  AdwMessageDialog *confirm = NULL;
  g_autoptr (GListModel) toplevels = g_object_ref (gtk_window_get_toplevels ());
  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr (GObject) window = g_list_model_get_item (toplevels, i);
      if (ADW_IS_MESSAGE_DIALOG (window))
        confirm = ADW_MESSAGE_DIALOG (window);
    }
  g_assert_nonnull (confirm);
  g_assert_true (g_file_test (broken, G_FILE_TEST_EXISTS));
  adw_message_dialog_response (confirm, "delete");
  wait_for_scan (dialog, &scans);
  g_assert_false (g_file_test (broken, G_FILE_TEST_EXISTS));
  g_assert_null (find_row_for_path (dialog, broken));
  g_assert_nonnull (find_row_for_path (dialog, app_model));

  /* Open hands the path to the window. */
  g_autofree char *activated = NULL;
  g_signal_connect (dialog, "model-activated", G_CALLBACK (on_model_activated), &activated);
  GtkWidget *open = adw_action_row_get_activatable_widget (find_row_for_path (dialog, app_model));
  g_assert_nonnull (open);
  g_signal_emit_by_name (open, "clicked");
  g_assert_cmpstr (activated, ==, app_model);

  g_settings_reset (settings, "model-folders");
}

/* ---- a local HTTP server --------------------------------------------------------------- */

static GBytes *served_model;
static int served_ranges;
static char *last_hub_path;   /* the last request under /hub/: a stand-in for Hugging Face */

/* Streams half the model in small pieces and then stalls, so a download can be paused and
 * cancelled midway. */
typedef struct {
  SoupServerMessage *msg;
  gsize offset;
  guint source;
} SlowBody;

static gboolean
slow_next_chunk (gpointer data)
{
  SlowBody *body = data;
  gsize size = g_bytes_get_size (served_model);
  /* Half the file, then nothing: the download can only end by pause or cancel. */
  if (body->offset >= size / 2)
    return G_SOURCE_CONTINUE;
  gsize n = MIN ((gsize) 8192, size - body->offset);
  g_autoptr (GBytes) chunk = g_bytes_new_from_bytes (served_model, body->offset, n);
  soup_message_body_append_bytes (soup_server_message_get_response_body (body->msg), chunk);
  body->offset += n;
  if (body->offset >= size)
    soup_message_body_complete (soup_server_message_get_response_body (body->msg));
  /* The server writes what it has and waits for the next unpause. */
  soup_server_message_unpause (body->msg);
  if (body->offset >= size)
    {
      body->source = 0;
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

/* Bodies still being trickled: a stalled one never finishes by itself, so a test stops
 * them before its model bytes go away (a later test would otherwise meet its timer). */
static GList *slow_bodies;

static void
slow_body_finished (SoupServerMessage *msg, SlowBody *body)
{
  g_clear_handle_id (&body->source, g_source_remove);
}

static void
slow_body_free (gpointer data, GClosure *closure)
{
  SlowBody *body = data;
  g_clear_handle_id (&body->source, g_source_remove);
  slow_bodies = g_list_remove (slow_bodies, body);
  g_free (body);
}

static void
stop_slow_bodies (void)
{
  for (GList *l = slow_bodies; l; l = l->next)
    g_clear_handle_id (&((SlowBody *) l->data)->source, g_source_remove);
}

static void
serve_slowly (SoupServerMessage *msg)
{
  SlowBody *body = g_new0 (SlowBody, 1);
  body->msg = msg;
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (msg);
  soup_message_headers_set_content_length (headers, (goffset) g_bytes_get_size (served_model));
  soup_server_message_set_status (msg, 200, NULL);
  soup_server_message_pause (msg);
  body->source = g_timeout_add (5, slow_next_chunk, body);
  slow_bodies = g_list_prepend (slow_bodies, body);
  g_signal_connect_data (msg, "finished", G_CALLBACK (slow_body_finished), body, slow_body_free, 0);
}

static void
serve (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
  if (g_str_has_prefix (path, "/slow/"))
    {
      serve_slowly (msg);
      return;
    }
  if (g_str_has_prefix (path, "/hub/"))
    {
      g_free (last_hub_path);
      last_hub_path = g_strdup (path + strlen ("/hub"));
    }
  if (!g_str_has_suffix (path, "/stories260K-f32.gguf") && !g_str_has_prefix (path, "/hub/"))
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }
  gsize size = g_bytes_get_size (served_model);
  SoupRange *ranges = NULL;
  int n_ranges = 0;
  SoupMessageHeaders *request = soup_server_message_get_request_headers (msg);
  if (soup_message_headers_get_ranges (request, (goffset) size, &ranges, &n_ranges) && n_ranges == 1)
    {
      g_autoptr (GBytes) tail = g_bytes_new_from_bytes (served_model, (gsize) ranges[0].start,
                                                        (gsize) (ranges[0].end - ranges[0].start + 1));
      soup_message_headers_set_content_range (soup_server_message_get_response_headers (msg),
                                              ranges[0].start, ranges[0].end, (goffset) size);
      soup_server_message_set_status (msg, 206, NULL);
      soup_message_body_append_bytes (soup_server_message_get_response_body (msg), tail);
      soup_message_headers_free_ranges (request, ranges);
      served_ranges++;
      return;
    }
  soup_server_message_set_status (msg, 200, NULL);
  soup_message_body_append_bytes (soup_server_message_get_response_body (msg), served_model);
}

static SoupServer *
start_server (guint *port)
{
  SoupServer *server = soup_server_new (NULL, NULL);
  soup_server_add_handler (server, NULL, serve, NULL, NULL);
  g_autoptr (GError) error = NULL;
  g_assert_true (soup_server_listen_local (server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error));
  g_assert_no_error (error);
  GSList *uris = soup_server_get_uris (server);
  g_assert_nonnull (uris);
  *port = (guint) g_uri_get_port (uris->data);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  return server;
}

/* A loopback server (start_server) serving the test data's stories260K-f32.gguf as
 * served_model; NULL, the test skipped, without the test data. */
static SoupServer *
serve_test_model (guint *port)
{
  g_autofree char *model_path = g_build_filename (testdata_models (), "stories260K-f32.gguf", NULL);
  g_autoptr (GMappedFile) mapped = g_mapped_file_new (model_path, FALSE, NULL);
  if (!mapped)
    {
      g_test_skip ("no test models");
      return NULL;
    }
  served_model = g_mapped_file_get_bytes (mapped);   /* holds the mapping */
  return start_server (port);
}

/* What an interrupted run leaves for @name in the app's model folder: the first half of
 * served_model as NAME.part and @record (the address, then any checksum and size lines)
 * as NAME.part.uri.  Returns the finished file's path (to free). */
static char *
write_interrupted_download (const char *name, const char *record)
{
  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();
  g_assert_cmpint (g_mkdir_with_parents (app_folder, 0755), ==, 0);
  char *dest = g_build_filename (app_folder, name, NULL);
  g_autofree char *part = g_strconcat (dest, ".part", NULL);
  g_autofree char *part_uri = g_strconcat (dest, ".part.uri", NULL);
  gsize half = g_bytes_get_size (served_model) / 2;
  g_assert_true (g_file_set_contents (part, g_bytes_get_data (served_model, NULL), (gssize) half, NULL));
  g_assert_true (g_file_set_contents (part_uri, record, -1, NULL));
  return dest;
}

static void
on_download_done (HanashiDownload *download, gboolean *done)
{
  *done = TRUE;
}

static void
test_download_appears_in_list (void)
{
  guint port = 0;
  g_autoptr (SoupServer) server = serve_test_model (&port);
  if (server == NULL)
    return;
  g_autoptr (GError) error = NULL;

  int scans;
  HanashiModelsDialog *dialog = present_scanned_dialog (&scans);

  /* A wrong address: refused with a sentence, nothing starts. */
  g_assert_null (hanashi_models_dialog_download (dialog, "not an address", NULL, &error));
  g_assert_nonnull (error);
  g_clear_error (&error);

  /* Type the address into the page and press Download, as a person would. */
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/someone/tiny/resolve/main/stories260K-f32.gguf", port);
  gtk_editable_set_text (GTK_EDITABLE (find_named (GTK_WIDGET (dialog), "address-row")), url);
  g_signal_emit_by_name (find_named (GTK_WIDGET (dialog), "custom-download"), "clicked");

  /* The same call again finds the running download instead of starting a second one. */
  HanashiDownload *download = hanashi_models_dialog_download (dialog, url, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (download);
  GtkWidget *progress = NULL;
  {
    g_autoptr (GPtrArray) stack = g_ptr_array_new ();
    g_ptr_array_add (stack, dialog);
    while (stack->len && !progress)
      {
        GtkWidget *cur = g_ptr_array_steal_index (stack, stack->len - 1);
        if (GTK_IS_PROGRESS_BAR (cur))
          progress = cur;
        for (GtkWidget *c = gtk_widget_get_first_child (cur); c; c = gtk_widget_get_next_sibling (c))
          g_ptr_array_add (stack, c);
      }
  }
  g_assert_nonnull (progress);

  gboolean done = FALSE;
  g_signal_connect (download, "finished", G_CALLBACK (on_download_done), &done);
  int before = scans;
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  while ((!done || scans == before) && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_assert_true (done);
  if (hanashi_download_get_error (download))
    g_error ("download failed: %s", hanashi_download_get_error (download)->message);
  g_assert_cmpint (hanashi_download_get_state (download), ==, HANASHI_DOWNLOAD_STATE_DONE);
  g_assert_cmpint (scans, >, before);
  g_assert_cmpfloat (gtk_progress_bar_get_fraction (GTK_PROGRESS_BAR (progress)), ==, 1.0);

  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();
  g_autofree char *dest = g_build_filename (app_folder, "stories260K-f32.gguf", NULL);
  g_autofree char *part = g_strconcat (dest, ".part", NULL);
  g_autofree char *part_uri = g_strconcat (dest, ".part.uri", NULL);
  g_assert_true (g_file_test (dest, G_FILE_TEST_IS_REGULAR));
  g_assert_false (g_file_test (part, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (part_uri, G_FILE_TEST_EXISTS));
  AdwActionRow *row = find_row_for_path (dialog, dest);
  g_assert_nonnull (row);
  g_assert_nonnull (strstr (adw_action_row_get_subtitle (row), "llama"));

  /* A missing file fails with the server's answer in words, and leaves nothing behind
   * to resume. */
  g_autofree char *missing_url = g_strdup_printf ("http://127.0.0.1:%u/a/b/resolve/main/missing.gguf", port);
  HanashiDownload *missing = hanashi_models_dialog_download (dialog, missing_url, NULL, &error);
  g_assert_no_error (error);
  gboolean missing_done = FALSE;
  g_signal_connect (missing, "finished", G_CALLBACK (on_download_done), &missing_done);
  deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (!missing_done && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpint (hanashi_download_get_state (missing), ==, HANASHI_DOWNLOAD_STATE_FAILED);
  g_assert_error (hanashi_download_get_error (missing), HANASHI_DOWNLOAD_ERROR, HANASHI_DOWNLOAD_ERROR_NOT_FOUND);
  g_autofree char *missing_uri = g_build_filename (app_folder, "missing.gguf.part.uri", NULL);
  g_assert_false (g_file_test (missing_uri, G_FILE_TEST_EXISTS));
  g_assert_null (find_button_with_tooltip (GTK_WIDGET (dialog), "Resume Download"));
  /* Its Cancel button clears the row away. */
  GtkWidget *dismiss = find_button_with_tooltip (GTK_WIDGET (dialog), "Cancel Download");
  g_assert_nonnull (dismiss);
  g_signal_emit_by_name (dismiss, "clicked");
  g_assert_null (find_button_with_tooltip (GTK_WIDGET (dialog), "Cancel Download"));

  /* Downloading it again is refused: it is already there. */
  g_assert_null (hanashi_models_dialog_download (dialog, url, NULL, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_EXISTS);

  gtk_window_destroy (GTK_WINDOW (dialog));
  g_clear_pointer (&served_model, g_bytes_unref);
}

/* A .part file with its address from an earlier run: listed as paused, untouched until
 * the user resumes it, then completed with a Range request. */
static void
test_resume_after_restart (void)
{
  guint port = 0;
  g_autoptr (SoupServer) server = serve_test_model (&port);
  if (server == NULL)
    return;

  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/x/y/resolve/main/stories260K-f32.gguf", port);
  g_autofree char *dest = write_interrupted_download ("resumed.gguf", url);
  g_autofree char *part = g_strconcat (dest, ".part", NULL);
  g_autofree char *part_uri = g_strconcat (dest, ".part.uri", NULL);
  gsize half = g_bytes_get_size (served_model) / 2;

  int scans;
  HanashiModelsDialog *dialog = present_scanned_dialog (&scans);
  for (int i = 0; i < 20; i++)
    g_main_context_iteration (NULL, FALSE);

  /* Offered, not started. */
  served_ranges = 0;
  GtkWidget *resume = NULL;
  {
    g_autoptr (GPtrArray) stack = g_ptr_array_new ();
    g_ptr_array_add (stack, dialog);
    while (stack->len)
      {
        GtkWidget *cur = g_ptr_array_steal_index (stack, stack->len - 1);
        if (GTK_IS_BUTTON (cur) && gtk_widget_get_visible (cur)
            && g_strcmp0 (gtk_widget_get_tooltip_text (cur), "Resume Download") == 0)
          resume = cur;
        for (GtkWidget *c = gtk_widget_get_first_child (cur); c; c = gtk_widget_get_next_sibling (c))
          g_ptr_array_add (stack, c);
      }
  }
  g_assert_nonnull (resume);
  struct stat st;
  g_assert_cmpint (g_stat (part, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, (goffset) half);
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));

  int before = scans;
  g_signal_emit_by_name (resume, "clicked");
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  while (scans == before && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpint (scans, >, before);
  g_assert_cmpint (served_ranges, ==, 1);
  g_assert_true (g_file_test (dest, G_FILE_TEST_IS_REGULAR));
  g_assert_false (g_file_test (part, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (part_uri, G_FILE_TEST_EXISTS));
  g_assert_nonnull (find_row_for_path (dialog, dest));

  gtk_window_destroy (GTK_WINDOW (dialog));
  g_clear_pointer (&served_model, g_bytes_unref);
}

static void
wait_for_state (HanashiDownload *download, HanashiDownloadState state)
{
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (hanashi_download_get_state (download) != state && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpint (hanashi_download_get_state (download), ==, state);
}

/* Pause, resume and cancel with the row's buttons. */
static void
test_pause_resume_cancel (void)
{
  guint port = 0;
  g_autoptr (SoupServer) server = serve_test_model (&port);
  if (server == NULL)
    return;

  int scans;
  HanashiModelsDialog *dialog = present_scanned_dialog (&scans);

  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/slow/r/resolve/main/slow-model.gguf", port);
  g_autoptr (GError) error = NULL;
  HanashiDownload *download = hanashi_models_dialog_download (dialog, url, NULL, &error);
  g_assert_no_error (error);
  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();
  g_autofree char *dest = g_build_filename (app_folder, "slow-model.gguf", NULL);
  g_autofree char *part = g_strconcat (dest, ".part", NULL);
  g_autofree char *part_uri = g_strconcat (dest, ".part.uri", NULL);

  /* Until the first bytes are in (not a fixed time: a loaded machine may take a while). */
  gint64 until = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  while (hanashi_download_get_received (download) == 0 && g_get_monotonic_time () < until)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpint (hanashi_download_get_state (download), ==, HANASHI_DOWNLOAD_STATE_RUNNING);
  g_assert_cmpuint (hanashi_download_get_received (download), <, g_bytes_get_size (served_model));

  GtkWidget *pause = find_button_with_tooltip (GTK_WIDGET (dialog), "Pause Download");
  g_assert_nonnull (pause);
  g_signal_emit_by_name (pause, "clicked");
  wait_for_state (download, HANASHI_DOWNLOAD_STATE_PAUSED);
  g_assert_cmpuint (hanashi_download_get_received (download), >, 0);
  g_assert_true (g_file_test (part, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (part_uri, G_FILE_TEST_EXISTS));

  GtkWidget *resume = find_button_with_tooltip (GTK_WIDGET (dialog), "Resume Download");
  g_assert_nonnull (resume);
  g_signal_emit_by_name (resume, "clicked");
  g_assert_cmpint (hanashi_download_get_state (download), ==, HANASHI_DOWNLOAD_STATE_RUNNING);

  GtkWidget *cancel = find_button_with_tooltip (GTK_WIDGET (dialog), "Cancel Download");
  g_assert_nonnull (cancel);
  g_object_ref (download);
  g_signal_emit_by_name (cancel, "clicked");
  wait_for_state (download, HANASHI_DOWNLOAD_STATE_CANCELLED);
  for (int i = 0; i < 10; i++)
    g_main_context_iteration (NULL, FALSE);
  g_assert_false (g_file_test (part, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (part_uri, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
  g_assert_null (find_button_with_tooltip (GTK_WIDGET (dialog), "Cancel Download"));
  g_object_unref (download);

  gtk_window_destroy (GTK_WINDOW (dialog));
  stop_slow_bodies ();
  g_clear_pointer (&served_model, g_bytes_unref);
}


/* ---- the recommended models ------------------------------------------------------------- */

static void
collect_catalog_rows (GtkWidget *root, GPtrArray *rows)
{
  if (ADW_IS_ACTION_ROW (root) && g_object_get_data (G_OBJECT (root), "catalog-id"))
    g_ptr_array_add (rows, root);
  for (GtkWidget *child = gtk_widget_get_first_child (root); child; child = gtk_widget_get_next_sibling (child))
    collect_catalog_rows (child, rows);
}

static const HanashiCatalogEntry *
catalog_entry (GPtrArray *catalog, const char *id)
{
  for (guint i = 0; i < catalog->len; i++)
    {
      const HanashiCatalogEntry *entry = g_ptr_array_index (catalog, i);
      if (g_str_equal (entry->id, id))
        return entry;
    }
  return NULL;
}

static void
show_download_page (HanashiModelsDialog *dialog)
{
  g_autoptr (GPtrArray) todo = g_ptr_array_new ();
  g_ptr_array_add (todo, dialog);
  while (todo->len)
    {
      GtkWidget *cur = g_ptr_array_steal_index (todo, todo->len - 1);
      if (ADW_IS_VIEW_STACK (cur))
        {
          adw_view_stack_set_visible_child_name (ADW_VIEW_STACK (cur), "download");
          return;
        }
      for (GtkWidget *c = gtk_widget_get_first_child (cur); c; c = gtk_widget_get_next_sibling (c))
        g_ptr_array_add (todo, c);
    }
  g_assert_not_reached ();
}

/* With the memory figure overridden, every recommended row says whether it fits by the
 * rule (memory needed ≤ available), names both figures when it does not, and the rows
 * that fit come first. */
static void
check_memory_fit (const char *available_mb)
{
  hanashi_test_set_memory_available_mb (available_mb);
  guint64 available = g_ascii_strtoull (available_mb, NULL, 10) * 1000000;
  g_autoptr (GPtrArray) catalog = hanashi_catalog_load_default ();
  g_assert_cmpuint (catalog->len, >=, 10);

  int scans;
  HanashiModelsDialog *dialog = present_scanned_dialog (&scans);

  g_autoptr (GPtrArray) rows = g_ptr_array_new ();
  collect_catalog_rows (GTK_WIDGET (dialog), rows);
  g_assert_cmpuint (rows->len, ==, catalog->len);
  gboolean seen_too_large = FALSE;
  guint n_fit = 0;
  for (guint i = 0; i < rows->len; i++)
    {
      AdwActionRow *row = rows->pdata[i];
      const HanashiCatalogEntry *entry = catalog_entry (catalog, g_object_get_data (G_OBJECT (row), "catalog-id"));
      g_assert_nonnull (entry);
      const char *subtitle = adw_action_row_get_subtitle (row);
      gboolean fits = entry->memory_bytes <= available;
      g_autofree char *need = g_format_size (entry->memory_bytes);
      g_autofree char *have = g_format_size (available);
      g_autofree char *too_large = g_strdup_printf ("Needs %s of memory; this computer has %s available", need, have);
      g_autofree char *fitting = g_strdup_printf ("Fits in memory (needs %s)", need);
      if (fits)
        {
          g_assert_nonnull (strstr (subtitle, fitting));
          g_assert_false (seen_too_large); /* fitting rows come first */
          n_fit++;
        }
      else
        {
          g_assert_nonnull (strstr (subtitle, too_large));
          seen_too_large = TRUE;
        }
      g_assert_cmpint (GPOINTER_TO_INT (g_object_get_data (G_OBJECT (row), "fits-memory")), ==, fits);
      g_autofree char *size = g_format_size (entry->size_bytes);
      g_assert_nonnull (strstr (subtitle, size));
      g_assert_nonnull (strstr (subtitle, entry->license));
    }
  if (g_str_equal (available_mb, "4000"))
    {
      show_download_page (dialog);
      test_screenshot (GTK_WIDGET (dialog), "models-catalog");
      /* 4 GB: the small models fit, Qwen3 30B-A3B does not. */
      g_assert_cmpuint (n_fit, >, 0);
      g_assert_true (seen_too_large);
    }
  gtk_window_destroy (GTK_WINDOW (dialog));
  hanashi_test_set_memory_available_mb (NULL);
}

static void
test_catalog_memory_fit (void)
{
  check_memory_fit ("4000");
  check_memory_fit ("1000");
  check_memory_fit ("64000");
  check_memory_fit ("100");
}

/* The shipped catalog: every entry pinned, and its address built from the revision. */
static void
test_catalog_entries (void)
{
  g_autoptr (GPtrArray) catalog = hanashi_catalog_load_default ();
  for (guint i = 0; i < catalog->len; i++)
    {
      const HanashiCatalogEntry *entry = g_ptr_array_index (catalog, i);
      g_autoptr (GError) error = NULL;
      g_autofree char *uri = hanashi_catalog_entry_uri (entry, &error);
      g_assert_no_error (error);
      g_autofree char *expected = g_strdup_printf ("https://huggingface.co/%s/resolve/%s/%s", entry->repo,
                                                   entry->revision, entry->file);
      g_assert_cmpstr (uri, ==, expected);
      g_assert_true (hanashi_download_sha256_is_valid (entry->sha256));
      g_assert_cmpuint (entry->memory_bytes, >, entry->size_bytes);
    }

  /* Entries without a pin are not offered; the others are, in order. */
  const char *json =
    "{\"models\": ["
    " {\"id\": \"a\", \"name\": \"A\", \"repo\": \"o/r\", \"file\": \"a.gguf\", \"size_bytes\": 10,"
    "  \"revision\": \"0123456789abcdef0123456789abcdef01234567\","
    "  \"sha256\": \"ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\", \"memory_bytes\": 5},"
    " {\"id\": \"no-sha\", \"name\": \"B\", \"repo\": \"o/r\", \"file\": \"b.gguf\", \"size_bytes\": 10,"
    "  \"revision\": \"0123456789abcdef0123456789abcdef01234567\"},"
    " {\"id\": \"branch\", \"name\": \"C\", \"repo\": \"o/r\", \"file\": \"c.gguf\", \"size_bytes\": 10,"
    "  \"revision\": \"main\", \"sha256\": \"abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789\"},"
    " {\"id\": \"no-size\", \"name\": \"D\", \"repo\": \"o/r\", \"file\": \"d.gguf\", \"size_bytes\": -4,"
    "  \"revision\": \"0123456789abcdef0123456789abcdef01234567\","
    "  \"sha256\": \"abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789\"},"
    " 7 ]}";
  g_autoptr (GBytes) bytes = g_bytes_new_static (json, strlen (json));
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) parsed = hanashi_catalog_parse (bytes, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (parsed->len, ==, 1);
  const HanashiCatalogEntry *a = g_ptr_array_index (parsed, 0);
  g_assert_cmpstr (a->id, ==, "a");
  g_assert_cmpstr (a->sha256, ==, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
  g_assert_cmpuint (a->memory_bytes, ==, 10); /* never less than the weights */

  g_autoptr (GBytes) broken = g_bytes_new_static ("{\"models\": 3}", 13);
  g_assert_null (hanashi_catalog_parse (broken, &error));
  g_assert_nonnull (error);
}

static GtkWidget *
download_row_for (HanashiModelsDialog *dialog, const char *dest)
{
  g_autoptr (GPtrArray) stack = g_ptr_array_new ();
  g_ptr_array_add (stack, dialog);
  while (stack->len)
    {
      GtkWidget *cur = g_ptr_array_steal_index (stack, stack->len - 1);
      if (g_strcmp0 (g_object_get_data (G_OBJECT (cur), "destination"), dest) == 0)
        return cur;
      for (GtkWidget *c = gtk_widget_get_first_child (cur); c; c = gtk_widget_get_next_sibling (c))
        g_ptr_array_add (stack, c);
    }
  return NULL;
}

static GtkLabel *
download_status_for (HanashiModelsDialog *dialog, const char *dest)
{
  GtkWidget *row = download_row_for (dialog, dest);
  return row ? GTK_LABEL (find_named (row, "download-status")) : NULL;
}

/* Until the download is done, failed or cancelled (the state the row shows). */
static void
wait_finished (HanashiDownload *download)
{
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  for (;;)
    {
      HanashiDownloadState state = hanashi_download_get_state (download);
      if (state == HANASHI_DOWNLOAD_STATE_DONE || state == HANASHI_DOWNLOAD_STATE_FAILED
          || state == HANASHI_DOWNLOAD_STATE_CANCELLED)
        break;
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, TRUE);
    }
  for (int i = 0; i < 10; i++)
    g_main_context_iteration (NULL, FALSE);
}

/* Until the row of the download into `dest` shows an error. */
static GtkLabel *
wait_for_error_row (HanashiModelsDialog *dialog, const char *dest)
{
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  for (;;)
    {
      GtkLabel *status = download_status_for (dialog, dest);
      if (status && gtk_widget_has_css_class (GTK_WIDGET (status), "error"))
        {
          for (int i = 0; i < 10; i++)
            g_main_context_iteration (NULL, FALSE);
          return status;
        }
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, TRUE);
    }
}

/* A download that fails before its first byte (nothing listens on the port) says why in
 * one sentence: no " — 0 bytes" after it. */
static void
test_failed_row_is_one_sentence (void)
{
  HanashiModelsDialog *dialog = hanashi_models_dialog_new (NULL);
  gtk_window_present (GTK_WINDOW (dialog));
  /* Port 1 on the loopback: refused at once, nothing received. */
  g_autoptr (GError) error = NULL;
  HanashiDownload *download = hanashi_models_dialog_download (dialog, "http://127.0.0.1:1/unreachable.gguf", NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (download);
  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();
  g_autofree char *dest = g_build_filename (app_folder, "unreachable.gguf", NULL);
  GtkLabel *status = wait_for_error_row (dialog, dest);
  const GError *failure = hanashi_download_get_error (download);
  g_assert_nonnull (failure);
  g_assert_cmpstr (gtk_label_get_text (status), ==, failure->message);
  g_assert_null (strstr (gtk_label_get_text (status), " — "));
  hanashi_download_cancel (download);
  gtk_window_destroy (GTK_WINDOW (dialog));
}

/* A recommended model's Download button fetches the catalog's file at its pinned revision
 * and holds it to the catalog's size: served by a stand-in hub whose file is not the
 * expected one, the download stops with an error row and keeps nothing. */
static void
test_catalog_download_is_pinned (void)
{
  guint port = 0;
  g_autoptr (SoupServer) server = serve_test_model (&port);
  if (server == NULL)
    return;
  g_autofree char *hub = g_strdup_printf ("http://127.0.0.1:%u/hub", port);
  hanashi_test_set_hub_url (hub);
  hanashi_test_set_memory_available_mb ("1000000");

  int scans;
  HanashiModelsDialog *dialog = present_scanned_dialog (&scans);

  g_autoptr (GPtrArray) catalog = hanashi_catalog_load_default ();
  const HanashiCatalogEntry *entry = g_ptr_array_index (catalog, 0);
  g_autoptr (GPtrArray) rows = g_ptr_array_new ();
  collect_catalog_rows (GTK_WIDGET (dialog), rows);
  GtkWidget *button = NULL;
  for (guint i = 0; i < rows->len && !button; i++)
    if (g_str_equal (g_object_get_data (rows->pdata[i], "catalog-id"), entry->id))
      button = find_button_with_tooltip (rows->pdata[i], "Download");
  g_assert_nonnull (button);
  g_clear_pointer (&last_hub_path, g_free);
  g_signal_emit_by_name (button, "clicked");

  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();
  g_autofree char *dest = g_build_filename (app_folder, entry->file, NULL);
  g_autofree char *part = g_strconcat (dest, ".part", NULL);
  g_autofree char *part_uri = g_strconcat (dest, ".part.uri", NULL);
  /* The record beside the .part (written before the download starts, removed only from
   * the main loop) holds the catalog's checksum and size. */
  {
    g_autofree char *record = NULL;
    g_assert_true (g_file_get_contents (part_uri, &record, NULL, NULL));
    g_autofree char *uri = g_strdup_printf ("%s/%s/resolve/%s/%s\n", hub, entry->repo, entry->revision, entry->file);
    g_autofree char *sha_line = g_strdup_printf ("\nsha256=%s\n", entry->sha256);
    g_autofree char *size_line = g_strdup_printf ("\nsize=%" G_GUINT64_FORMAT "\n", entry->size_bytes);
    g_assert_true (g_str_has_prefix (record, uri));
    g_assert_nonnull (strstr (record, sha_line));
    g_assert_nonnull (strstr (record, size_line));
  }
  GtkLabel *status = wait_for_error_row (dialog, dest);

  /* The file at the pinned revision was asked for, and the catalog's size refused it. */
  g_autofree char *expected_path = g_strdup_printf ("/%s/resolve/%s/%s", entry->repo, entry->revision, entry->file);
  g_assert_cmpstr (last_hub_path, ==, expected_path);
  g_autofree char *catalog_size = g_format_size_full (entry->size_bytes, G_FORMAT_SIZE_LONG_FORMAT);
  g_assert_nonnull (strstr (gtk_label_get_text (status), catalog_size));
  g_assert_nonnull (strstr (gtk_label_get_text (status), "was expected"));
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (part, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (part_uri, G_FILE_TEST_EXISTS));
  g_assert_null (find_button_with_tooltip (download_row_for (dialog, dest), "Resume Download"));
  show_download_page (dialog);
  test_screenshot (GTK_WIDGET (dialog), "models-download-error");

  gtk_window_destroy (GTK_WINDOW (dialog));
  hanashi_test_set_hub_url (NULL);
  hanashi_test_set_memory_available_mb (NULL);
  g_clear_pointer (&served_model, g_bytes_unref);
}

/* The form's checksum: a wrong one fails with the sentence in an error row and nothing
 * kept; a malformed one is refused before anything starts; the right one finishes and
 * the row says it was verified. */
static void
test_checksum_mismatch_row (void)
{
  guint port = 0;
  g_autoptr (SoupServer) server = serve_test_model (&port);
  if (server == NULL)
    return;

  int scans;
  HanashiModelsDialog *dialog = present_scanned_dialog (&scans);

  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();
  g_autofree char *dest = g_build_filename (app_folder, "checked.gguf", NULL);
  g_autofree char *part = g_strconcat (dest, ".part", NULL);
  g_autofree char *part_uri = g_strconcat (dest, ".part.uri", NULL);
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/hub/o/r/resolve/main/checked.gguf", port);
  const char *wrong = "00000000000000000000000000000000000000000000000000000000000000ff";

  /* Malformed: refused at once, nothing starts. */
  gtk_editable_set_text (GTK_EDITABLE (find_named (GTK_WIDGET (dialog), "address-row")), url);
  gtk_editable_set_text (GTK_EDITABLE (find_named (GTK_WIDGET (dialog), "sha256-row")), "not-a-checksum");
  g_signal_emit_by_name (find_named (GTK_WIDGET (dialog), "custom-download"), "clicked");
  g_assert_null (download_status_for (dialog, dest));
  g_assert_false (g_file_test (part_uri, G_FILE_TEST_EXISTS));

  /* Wrong: downloaded, found not to match, deleted; the row says so in the error style. */
  gtk_editable_set_text (GTK_EDITABLE (find_named (GTK_WIDGET (dialog), "sha256-row")), wrong);
  g_signal_emit_by_name (find_named (GTK_WIDGET (dialog), "custom-download"), "clicked");
  GtkLabel *status = wait_for_error_row (dialog, dest);
  g_assert_false (gtk_widget_has_css_class (GTK_WIDGET (status), "dim-label"));
  g_assert_nonnull (strstr (gtk_label_get_text (status), "SHA-256"));
  g_assert_nonnull (strstr (gtk_label_get_text (status), wrong));
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (part, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (part_uri, G_FILE_TEST_EXISTS));
  g_assert_null (find_button_with_tooltip (download_row_for (dialog, dest), "Resume Download"));
  GtkWidget *dismiss = find_button_with_tooltip (download_row_for (dialog, dest), "Cancel Download");
  g_assert_nonnull (dismiss);
  g_signal_emit_by_name (dismiss, "clicked");
  g_assert_null (download_row_for (dialog, dest));

  /* Right: finished, and the row says the checksum matched. */
  g_autofree char *right = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, served_model);
  g_autoptr (GError) error = NULL;
  HanashiDownload *good = hanashi_models_dialog_download_verified (dialog, url, NULL, NULL, right,
                                                                   g_bytes_get_size (served_model), &error);
  g_assert_no_error (error);
  wait_finished (good);
  if (hanashi_download_get_error (good))
    g_error ("download failed: %s", hanashi_download_get_error (good)->message);
  g_assert_cmpint (hanashi_download_get_state (good), ==, HANASHI_DOWNLOAD_STATE_DONE);
  status = download_status_for (dialog, dest);
  g_assert_nonnull (status);
  g_assert_false (gtk_widget_has_css_class (GTK_WIDGET (status), "error"));
  g_assert_nonnull (strstr (gtk_label_get_text (status), "SHA-256 checksum matches"));
  g_assert_true (g_file_test (dest, G_FILE_TEST_IS_REGULAR));

  gtk_window_destroy (GTK_WINDOW (dialog));
  g_clear_pointer (&served_model, g_bytes_unref);
}

/* The checksum and size are kept beside the .part file: after a restart the resumed
 * download is still held to them. */
static void
test_resume_keeps_checksum (void)
{
  guint port = 0;
  g_autoptr (SoupServer) server = serve_test_model (&port);
  if (server == NULL)
    return;

  const char *wrong = "abababababababababababababababababababababababababababababababab";
  g_autofree char *record = g_strdup_printf ("http://127.0.0.1:%u/x/y/resolve/main/stories260K-f32.gguf\n"
                                             "sha256=%s\nsize=%" G_GSIZE_FORMAT "\n",
                                             port, wrong, g_bytes_get_size (served_model));
  g_autofree char *dest = write_interrupted_download ("kept.gguf", record);
  g_autofree char *part = g_strconcat (dest, ".part", NULL);
  g_autofree char *part_uri = g_strconcat (dest, ".part.uri", NULL);

  int scans;
  HanashiModelsDialog *dialog = present_scanned_dialog (&scans);

  GtkWidget *row = download_row_for (dialog, dest);
  g_assert_nonnull (row);
  GtkWidget *resume = find_button_with_tooltip (row, "Resume Download");
  g_assert_nonnull (resume);
  g_signal_emit_by_name (resume, "clicked");
  GtkLabel *status = wait_for_error_row (dialog, dest);
  /* The checksum from the record, not none: the error names it. */
  g_assert_nonnull (strstr (gtk_label_get_text (status), wrong));
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (part, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (part_uri, G_FILE_TEST_EXISTS));

  gtk_window_destroy (GTK_WINDOW (dialog));
  g_clear_pointer (&served_model, g_bytes_unref);
}

static AdwMessageDialog *
find_message_dialog (void)
{
  AdwMessageDialog *found = NULL;
  g_autoptr (GListModel) toplevels = g_object_ref (gtk_window_get_toplevels ());
  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr (GObject) window = g_list_model_get_item (toplevels, i);
      if (ADW_IS_MESSAGE_DIALOG (window) && gtk_widget_get_visible (GTK_WIDGET (window)))
        found = ADW_MESSAGE_DIALOG (window);
    }
  return found;
}

/* Two quantizations of one model have one general.name: their rows say which is which
 * (weight type and size), and two copies of one file say their file names. */
static void
test_same_name_models (void)
{
  g_autofree char *source = g_build_filename (testdata_models (), "tiny-llama-spm-q8_0.gguf", NULL);
  if (!g_file_test (source, G_FILE_TEST_EXISTS))
    {
      g_test_skip ("no test models");
      return;
    }
  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();
  g_assert_cmpint (g_mkdir_with_parents (app_folder, 0755), ==, 0);
  g_autofree char *q8 = link_model (app_folder, "tiny-llama-spm-q8_0.gguf");
  g_autofree char *q4 = g_build_filename (app_folder, "tiny-llama-spm-q4_k.gguf", NULL);
  HnError err = { 0 };
  if (!hn_quantize_model (source, q4, hn_quantize_target_find ("Q4_K"), 2, NULL, NULL, &err))
    g_error ("%s", err.message);
  g_autoptr (HanashiLocalModel) q8_info = hanashi_model_scan_file (q8);
  g_autoptr (HanashiLocalModel) q4_info = hanashi_model_scan_file (q4);
  g_assert_cmpstr (q8_info->name, ==, q4_info->name);

  int scans;
  HanashiModelsDialog *dialog = present_scanned_dialog (&scans);

  g_autofree char *q8_size = g_format_size (q8_info->file_size);
  g_autofree char *q4_size = g_format_size (q4_info->file_size);
  g_autofree char *q8_title = g_strdup_printf ("%s (Q8_0, %s)", q8_info->name, q8_size);
  g_autofree char *q4_title = g_strdup_printf ("%s (Q4_K, %s)", q4_info->name, q4_size);
  g_assert_cmpstr (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (find_row_for_path (dialog, q8))), ==, q8_title);
  g_assert_cmpstr (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (find_row_for_path (dialog, q4))), ==, q4_title);

  /* A second copy of the Q8_0 file: weight type and size no longer tell them apart. */
  g_autofree char *copy = g_build_filename (app_folder, "copy-of-tiny.gguf", NULL);
  g_assert_cmpint (symlink (source, copy), ==, 0);
  hanashi_models_dialog_refresh (dialog);
  wait_for_scan (dialog, &scans);
  g_autofree char *copy_title = g_strdup_printf ("%s (Q8_0, %s, copy-of-tiny.gguf)", q8_info->name, q8_size);
  g_autofree char *q8_file_title = g_strdup_printf ("%s (Q8_0, %s, tiny-llama-spm-q8_0.gguf)", q8_info->name, q8_size);
  g_assert_cmpstr (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (find_row_for_path (dialog, copy))), ==, copy_title);
  g_assert_cmpstr (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (find_row_for_path (dialog, q8))), ==, q8_file_title);
  g_assert_cmpstr (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (find_row_for_path (dialog, q4))), ==, q4_title);

  gtk_window_destroy (GTK_WINDOW (dialog));
  g_unlink (copy);
  g_unlink (q4);
  g_unlink (q8);
}

/* The loaded model is refused (its weights are mapped from the file); once another model
 * is loaded, the same button asks and deletes. */
static void
test_delete_loaded_model (void)
{
  g_autofree char *source = g_build_filename (testdata_models (), "tiny-llama-spm-q8_0.gguf", NULL);
  if (!g_file_test (source, G_FILE_TEST_EXISTS))
    {
      g_test_skip ("no test models");
      return;
    }
  g_autofree char *app_folder = hanashi_model_scan_dup_app_folder ();
  g_autofree char *model = link_model (app_folder, "tiny-llama-spm-q8_0.gguf");
  /* Loaded under another name for the same file: a link outside the app's folder. */
  g_autofree char *elsewhere = g_build_filename (g_get_user_data_dir (), "loaded-through-link", NULL);
  g_autofree char *loaded_link = link_model (elsewhere, "tiny-llama-spm-q8_0.gguf");

  HanashiModelsDialog *dialog = hanashi_models_dialog_new (NULL);
  int scans = 0;
  g_signal_connect (dialog, "models-changed", G_CALLBACK (on_models_changed), &scans);
  hanashi_models_dialog_set_loaded_model (dialog, loaded_link);
  gtk_window_present (GTK_WINDOW (dialog));
  wait_for_scan (dialog, &scans);

  GtkWidget *row = GTK_WIDGET (find_row_for_path (dialog, model));
  g_assert_nonnull (row);
  GtkWidget *delete_button = find_button_with_tooltip (row, "Delete Model");
  g_assert_nonnull (delete_button);
  g_signal_emit_by_name (delete_button, "clicked");
  for (int i = 0; i < 20; i++)
    g_main_context_iteration (NULL, FALSE);
  g_assert_null (find_message_dialog ());
  g_assert_true (g_file_test (model, G_FILE_TEST_EXISTS));

  /* Asked while another model is loaded, confirmed after this one was loaded: refused. */
  hanashi_models_dialog_set_loaded_model (dialog, NULL);
  g_signal_emit_by_name (delete_button, "clicked");
  AdwMessageDialog *confirm = find_message_dialog ();
  g_assert_nonnull (confirm);
  hanashi_models_dialog_set_loaded_model (dialog, model);
  adw_message_dialog_response (confirm, "delete");
  for (int i = 0; i < 20; i++)
    g_main_context_iteration (NULL, FALSE);
  g_assert_true (g_file_test (model, G_FILE_TEST_EXISTS));

  /* Another model loaded: asked and deleted, the row gone. */
  hanashi_models_dialog_set_loaded_model (dialog, "/nonexistent/other.gguf");
  g_signal_emit_by_name (delete_button, "clicked");
  confirm = find_message_dialog ();
  g_assert_nonnull (confirm);
  adw_message_dialog_response (confirm, "delete");
  wait_for_scan (dialog, &scans);
  g_assert_false (g_file_test (model, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (source, G_FILE_TEST_EXISTS));
  g_assert_null (find_row_for_path (dialog, model));

  gtk_window_destroy (GTK_WINDOW (dialog));
  g_unlink (loaded_link);
  g_rmdir (elsewhere);
}

static gboolean
heartbeat (gpointer data)
{
  return G_SOURCE_CONTINUE;
}

int
main (int argc, char **argv)
{
  /* A heartbeat, so that waiting loops with deadlines never block in an idle context. */
  g_timeout_add (100, heartbeat, NULL);
  /* Only our schemas are visible to the tests; GNOME's proxy settings are not. */
  g_setenv ("GIO_USE_PROXY_RESOLVER", "dummy", TRUE);
  test_xdg_setup ();
  g_test_init (&argc, &argv, NULL);
  gtk_init ();
  adw_init ();

  g_test_add_func ("/models-dialog/local-models", test_lists_local_models);
  g_test_add_func ("/models-dialog/same-name-models", test_same_name_models);
  g_test_add_func ("/models-dialog/delete-loaded-model", test_delete_loaded_model);
  g_test_add_func ("/models-dialog/download", test_download_appears_in_list);
  g_test_add_func ("/models-dialog/resume-after-restart", test_resume_after_restart);
  g_test_add_func ("/models-dialog/pause-resume-cancel", test_pause_resume_cancel);
  g_test_add_func ("/models-dialog/catalog-entries", test_catalog_entries);
  g_test_add_func ("/models-dialog/catalog-memory-fit", test_catalog_memory_fit);
  g_test_add_func ("/models-dialog/catalog-download-is-pinned", test_catalog_download_is_pinned);
  g_test_add_func ("/models-dialog/checksum-mismatch-row", test_checksum_mismatch_row);
  g_test_add_func ("/models-dialog/failed-row-is-one-sentence", test_failed_row_is_one_sentence);
  g_test_add_func ("/models-dialog/resume-keeps-checksum", test_resume_keeps_checksum);
  return g_test_run ();
}
