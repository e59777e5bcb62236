/* hanashi-store-recovery.c — the database as the window opens it: writable when it can be,
 * read-only when it cannot (the history stays visible), and a damaged file put aside on
 * request instead of being overwritten.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-store-recovery"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "hanashi-store-recovery.h"

/* Why the writable open failed, as the end of a sentence.  Permissions are checked with
 * the effective user, the one the file system judges by. */
static char *
describe_reason (const char   *path,
                 const GError *error)
{
  g_autofree char *dir = g_path_get_dirname (path);

  if (error->domain == HANASHI_STORE_ERROR)
    switch ((HanashiStoreError) error->code)
      {
      case HANASHI_STORE_ERROR_READ_ONLY:
      case HANASHI_STORE_ERROR_IO:
        if (faccessat (AT_FDCWD, dir, W_OK, AT_EACCESS) != 0)
          /* Translators: the first %s is a folder, the second the system's reason */
          return g_strdup_printf (_("its folder “%s” cannot be written to (%s)"), dir, g_strerror (errno));
        if (g_file_test (path, G_FILE_TEST_EXISTS) && faccessat (AT_FDCWD, path, W_OK, AT_EACCESS) != 0)
          /* Translators: %s is the system's reason */
          return g_strdup_printf (_("the file cannot be written to (%s)"), g_strerror (errno));
        break;
      case HANASHI_STORE_ERROR_BUSY:
        return g_strdup (_("another program is using it"));
      case HANASHI_STORE_ERROR_CORRUPT:
        return g_strdup (_("it is damaged or is not a database"));
      case HANASHI_STORE_ERROR_NO_SPACE:
        return g_strdup (_("the disk is full"));
      case HANASHI_STORE_ERROR_FAILED:
      case HANASHI_STORE_ERROR_NOT_FOUND:
      case HANASHI_STORE_ERROR_TOO_NEW:
      default:
        break;
      }
  /* The store's own sentence, without its full stop: it ends the caller's sentence. */
  {
    char *reason = g_strdup (error->message);
    if (g_str_has_suffix (reason, "。"))
      reason[strlen (reason) - strlen ("。")] = '\0';
    else if (g_str_has_suffix (reason, "."))
      reason[strlen (reason) - 1] = '\0';
    return reason;
  }
}

HanashiStore *
hanashi_store_open_best (const char  *path,
                         GError     **problem)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GError) read_error = NULL;
  g_autoptr (HanashiStore) store = hanashi_store_new (path, &error);
  g_autofree char *reason = NULL;

  if (store != NULL)
    return g_steal_pointer (&store);
  reason = describe_reason (path, error);
  g_debug ("The database %s cannot be opened for writing: %s", path, error->message);

  /* Busy and damaged files are not worth reading: the first waits for the same lock, the
   * second would show a part of the history as if it were all of it. */
  if (g_error_matches (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_READ_ONLY) ||
      g_error_matches (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_IO))
    store = hanashi_store_new_read_only (path, &read_error);
  if (store != NULL)
    /* Translators: the first %s is the database file, the second why it cannot be written */
    g_set_error (problem, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_READ_ONLY,
                 _("The conversation database “%s” cannot be written: %s. Earlier chats are shown, but nothing new can be saved."),
                 path, reason);
  else
    /* Translators: the first %s is the database file, the second why it could not be opened */
    g_set_error (problem, HANASHI_STORE_ERROR, error->code,
                 _("The conversation database “%s” could not be opened: %s."), path, reason);
  return g_steal_pointer (&store);
}

typedef struct {
  HanashiStore *store;
  GError       *problem;
} OpenResult;

static void
open_result_free (OpenResult *result)
{
  g_clear_object (&result->store);
  g_clear_error (&result->problem);
  g_free (result);
}

static void
open_best_thread (GTask        *task,
                  gpointer      source_object,
                  gpointer      task_data,
                  GCancellable *cancellable)
{
  OpenResult *result = g_new0 (OpenResult, 1);
  result->store = hanashi_store_open_best (task_data, &result->problem);
  g_task_return_pointer (task, result, (GDestroyNotify) open_result_free);
}

void
hanashi_store_open_best_async (const char          *path,
                               GCancellable        *cancellable,
                               GAsyncReadyCallback  callback,
                               gpointer             user_data)
{
  g_autoptr (GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  g_task_set_source_tag (task, hanashi_store_open_best_async);
  g_task_set_task_data (task, g_strdup (path), g_free);
  g_task_run_in_thread (task, open_best_thread);
}

HanashiStore *
hanashi_store_open_best_finish (GAsyncResult  *result,
                                GError       **problem)
{
  OpenResult *opened = g_task_propagate_pointer (G_TASK (result), problem);
  HanashiStore *store;

  if (opened == NULL)
    return NULL;   /* cancelled: @problem says so */
  store = g_steal_pointer (&opened->store);
  if (opened->problem != NULL)
    g_propagate_error (problem, g_steal_pointer (&opened->problem));
  open_result_free (opened);
  return store;
}

char *
hanashi_store_set_aside (const char  *path,
                         GError     **error)
{
  g_autoptr (GDateTime) now = g_date_time_new_now_local ();
  g_autofree char *stamp = g_date_time_format (now, "%Y%m%d-%H%M%S");
  g_autofree char *target = g_strdup_printf ("%s.damaged-%s", path, stamp);
  const char *suffixes[] = { "-wal", "-shm" };

  for (int n = 2; g_file_test (target, G_FILE_TEST_EXISTS); n++)
    {
      g_free (target);
      target = g_strdup_printf ("%s.damaged-%s-%d", path, stamp, n);
    }
  if (g_rename (path, target) != 0)
    {
      int saved = errno;
      /* Translators: the first %s is the database file, the second the system's reason */
      g_set_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_IO,
                   _("The damaged conversation database “%s” could not be moved aside: %s."), path, g_strerror (saved));
      return NULL;
    }
  /* A journal left beside a new database must never be replayed into it. */
  for (gsize i = 0; i < G_N_ELEMENTS (suffixes); i++)
    {
      g_autofree char *from = g_strconcat (path, suffixes[i], NULL);
      g_autofree char *to = g_strconcat (target, suffixes[i], NULL);
      if (g_file_test (from, G_FILE_TEST_EXISTS) && g_rename (from, to) != 0)
        g_unlink (from);
    }
  return g_steal_pointer (&target);
}

/* ---- the banner -------------------------------------------------------------------------- */

struct _HanashiStoreBanner
{
  GtkWidget  parent_instance;
  GtkWidget *box;
  GtkLabel  *label;
  GtkWidget *retry_button;
  GtkWidget *fresh_button;
};

G_DEFINE_FINAL_TYPE (HanashiStoreBanner, hanashi_store_banner, GTK_TYPE_WIDGET)

enum { SIGNAL_RETRY, SIGNAL_START_FRESH, N_SIGNALS };
static guint signals[N_SIGNALS];

HanashiStoreBanner *
hanashi_store_banner_new (void)
{
  return g_object_new (HANASHI_TYPE_STORE_BANNER, NULL);
}

void
hanashi_store_banner_set_problem (HanashiStoreBanner *self,
                                  const GError       *problem)
{
  g_return_if_fail (HANASHI_IS_STORE_BANNER (self));
  gtk_widget_set_visible (GTK_WIDGET (self), problem != NULL);
  gtk_label_set_text (self->label, problem ? problem->message : "");
  gtk_widget_set_visible (self->fresh_button,
                          g_error_matches (problem, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_CORRUPT));
}

const char *
hanashi_store_banner_get_text (HanashiStoreBanner *self)
{
  g_return_val_if_fail (HANASHI_IS_STORE_BANNER (self), NULL);
  return gtk_widget_get_visible (GTK_WIDGET (self)) ? gtk_label_get_text (self->label) : NULL;
}

static void
on_retry_clicked (HanashiStoreBanner *self)
{
  g_signal_emit (self, signals[SIGNAL_RETRY], 0);
}

static void
on_fresh_clicked (HanashiStoreBanner *self)
{
  g_signal_emit (self, signals[SIGNAL_START_FRESH], 0);
}

static void
hanashi_store_banner_dispose (GObject *object)
{
  HanashiStoreBanner *self = HANASHI_STORE_BANNER (object);
  g_clear_pointer (&self->box, gtk_widget_unparent);
  G_OBJECT_CLASS (hanashi_store_banner_parent_class)->dispose (object);
}

static void
hanashi_store_banner_class_init (HanashiStoreBannerClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = hanashi_store_banner_dispose;
  gtk_widget_class_set_layout_manager_type (GTK_WIDGET_CLASS (klass), GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (GTK_WIDGET_CLASS (klass), "storebanner");
  signals[SIGNAL_RETRY] = g_signal_new ("retry", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                        0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_START_FRESH] = g_signal_new ("start-fresh", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                              0, NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void
hanashi_store_banner_init (HanashiStoreBanner *self)
{
  self->box = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 12);
  gtk_widget_set_parent (self->box, GTK_WIDGET (self));
  gtk_widget_add_css_class (GTK_WIDGET (self), "store-banner");

  self->label = GTK_LABEL (gtk_label_new (NULL));
  gtk_label_set_wrap (self->label, TRUE);
  gtk_label_set_xalign (self->label, 0);
  gtk_label_set_selectable (self->label, TRUE);
  gtk_widget_set_hexpand (GTK_WIDGET (self->label), TRUE);
  gtk_box_append (GTK_BOX (self->box), GTK_WIDGET (self->label));

  self->retry_button = gtk_button_new_with_mnemonic (_("_Try Again"));
  gtk_widget_set_valign (self->retry_button, GTK_ALIGN_CENTER);
  g_signal_connect_swapped (self->retry_button, "clicked", G_CALLBACK (on_retry_clicked), self);
  gtk_box_append (GTK_BOX (self->box), self->retry_button);

  self->fresh_button = gtk_button_new_with_mnemonic (_("_Start Fresh…"));
  gtk_widget_set_valign (self->fresh_button, GTK_ALIGN_CENTER);
  gtk_widget_add_css_class (self->fresh_button, "destructive-action");
  g_signal_connect_swapped (self->fresh_button, "clicked", G_CALLBACK (on_fresh_clicked), self);
  gtk_box_append (GTK_BOX (self->box), self->fresh_button);

  gtk_widget_set_visible (GTK_WIDGET (self), FALSE);
}
