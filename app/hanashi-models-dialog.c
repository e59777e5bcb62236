/* hanashi-models-dialog.c */
#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-models-dialog.h"

struct _HanashiModelsDialog
{
  AdwWindow parent_instance;
};

G_DEFINE_FINAL_TYPE (HanashiModelsDialog, hanashi_models_dialog, ADW_TYPE_WINDOW)

enum { SIGNAL_MODEL_ACTIVATED, SIGNAL_MODELS_CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
hanashi_models_dialog_class_init (HanashiModelsDialogClass *klass)
{
  signals[SIGNAL_MODEL_ACTIVATED] = g_signal_new ("model-activated", G_TYPE_FROM_CLASS (klass),
                                                  G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                  G_TYPE_NONE, 1, G_TYPE_STRING);
  signals[SIGNAL_MODELS_CHANGED] = g_signal_new ("models-changed", G_TYPE_FROM_CLASS (klass),
                                                 G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                 G_TYPE_NONE, 0);
  gtk_widget_class_set_template_from_resource (GTK_WIDGET_CLASS (klass),
                                               "/io/github/hanashi/Hanashi/ui/hanashi-models-dialog.ui");
}

static void
hanashi_models_dialog_init (HanashiModelsDialog *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
}

HanashiModelsDialog *
hanashi_models_dialog_new (GtkWindow *parent)
{
  return g_object_new (HANASHI_TYPE_MODELS_DIALOG, "transient-for", parent, NULL);
}

void
hanashi_models_dialog_refresh (HanashiModelsDialog *self)
{
  g_signal_emit (self, signals[SIGNAL_MODELS_CHANGED], 0);
}

HanashiDownload *
hanashi_models_dialog_download (HanashiModelsDialog *self, const char *repo_or_url,
                                const char *file, GError **error)
{
  g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "not yet");
  return NULL;
}
