/* hanashi-composer.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-composer"

#include "config.h"

#include <adwaita.h>
#include <glib/gi18n.h>

#include "hanashi-composer.h"

struct _HanashiComposer
{
  GtkWidget parent_instance;

  /* Template widgets */
  GtkRevealer *editing_revealer;
  GtkButton   *cancel_edit_button;
  GtkTextView *text_view;
  GtkTextView *system_prompt_view;
  GtkStack    *button_stack;
  GtkToggleButton *think_button;

  /* Owned */
  char        *system_prompt;

  gboolean     generating;
  gboolean     setting_prompt;
  gboolean     setting_thinking;
  gboolean     preediting;     /* an input method is composing text */
};

G_DEFINE_FINAL_TYPE (HanashiComposer, hanashi_composer, GTK_TYPE_WIDGET)

enum {
  PROP_0,
  PROP_GENERATING,
  PROP_EDITING,
  N_PROPS
};

enum {
  SIGNAL_SYSTEM_PROMPT_CHANGED,
  SIGNAL_EDIT_CANCELLED,
  SIGNAL_THINKING_CHANGED,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

HanashiComposer *
hanashi_composer_new (void)
{
  return g_object_new (HANASHI_TYPE_COMPOSER, NULL);
}

GtkTextView *
hanashi_composer_get_text_view (HanashiComposer *self)
{
  g_return_val_if_fail (HANASHI_IS_COMPOSER (self), NULL);
  return self->text_view;
}

static char *
dup_buffer_text (GtkTextView *view)
{
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (view);
  GtkTextIter start, end;

  gtk_text_buffer_get_bounds (buffer, &start, &end);
  return gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
}

char *
hanashi_composer_dup_text (HanashiComposer *self)
{
  g_return_val_if_fail (HANASHI_IS_COMPOSER (self), NULL);
  return dup_buffer_text (self->text_view);
}

void
hanashi_composer_set_text (HanashiComposer *self,
                           const char      *text)
{
  g_return_if_fail (HANASHI_IS_COMPOSER (self));
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->text_view), text ? text : "", -1);
}

gboolean
hanashi_composer_get_generating (HanashiComposer *self)
{
  g_return_val_if_fail (HANASHI_IS_COMPOSER (self), FALSE);
  return self->generating;
}

void
hanashi_composer_set_generating (HanashiComposer *self,
                                 gboolean         generating)
{
  g_return_if_fail (HANASHI_IS_COMPOSER (self));
  generating = !!generating;
  if (self->generating == generating)
    return;
  self->generating = generating;
  gtk_stack_set_visible_child_name (self->button_stack, generating ? "stop" : "send");
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_GENERATING]);
}

gboolean
hanashi_composer_get_editing (HanashiComposer *self)
{
  g_return_val_if_fail (HANASHI_IS_COMPOSER (self), FALSE);
  return gtk_revealer_get_reveal_child (self->editing_revealer);
}

void
hanashi_composer_set_editing (HanashiComposer *self,
                              gboolean         editing)
{
  g_return_if_fail (HANASHI_IS_COMPOSER (self));
  if (hanashi_composer_get_editing (self) == !!editing)
    return;
  gtk_revealer_set_reveal_child (self->editing_revealer, editing);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_EDITING]);
}

const char *
hanashi_composer_get_system_prompt (HanashiComposer *self)
{
  g_return_val_if_fail (HANASHI_IS_COMPOSER (self), NULL);
  return self->system_prompt ? self->system_prompt : "";
}

void
hanashi_composer_set_system_prompt (HanashiComposer *self,
                                    const char      *prompt)
{
  g_return_if_fail (HANASHI_IS_COMPOSER (self));
  g_free (self->system_prompt);
  self->system_prompt = g_strdup (prompt ? prompt : "");
  self->setting_prompt = TRUE;
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->system_prompt_view), self->system_prompt, -1);
  self->setting_prompt = FALSE;
}

static void
on_system_prompt_changed (GtkTextBuffer   *buffer,
                          HanashiComposer *self)
{
  if (self->setting_prompt)
    return;
  g_free (self->system_prompt);
  self->system_prompt = dup_buffer_text (self->system_prompt_view);
  g_signal_emit (self, signals[SIGNAL_SYSTEM_PROMPT_CHANGED], 0);
}

static gboolean
on_key_pressed (GtkEventControllerKey *controller,
                guint                  keyval,
                guint                  keycode,
                GdkModifierType        state,
                HanashiComposer       *self)
{
  if (keyval != GDK_KEY_Return && keyval != GDK_KEY_KP_Enter && keyval != GDK_KEY_ISO_Enter)
    return GDK_EVENT_PROPAGATE;
  /* With Japanese or Chinese input, Enter first confirms the conversion. */
  if (self->preediting)
    return GDK_EVENT_PROPAGATE;
  /* Shift+Enter (and Ctrl+Enter) fall through to the text view: a new line. */
  if (state & (GDK_SHIFT_MASK | GDK_CONTROL_MASK | GDK_ALT_MASK))
    return GDK_EVENT_PROPAGATE;
  gtk_widget_activate_action (GTK_WIDGET (self), "win.send", NULL);
  return GDK_EVENT_STOP;
}

static void
on_preedit_changed (GtkTextView     *view,
                    const char      *preedit,
                    HanashiComposer *self)
{
  self->preediting = preedit != NULL && *preedit != '\0';
}

void
hanashi_composer_set_thinking_available (HanashiComposer *self,
                                         gboolean         available)
{
  g_return_if_fail (HANASHI_IS_COMPOSER (self));
  gtk_widget_set_visible (GTK_WIDGET (self->think_button), available);
}

gboolean
hanashi_composer_get_thinking_available (HanashiComposer *self)
{
  g_return_val_if_fail (HANASHI_IS_COMPOSER (self), FALSE);
  return gtk_widget_get_visible (GTK_WIDGET (self->think_button));
}

gboolean
hanashi_composer_get_thinking (HanashiComposer *self)
{
  g_return_val_if_fail (HANASHI_IS_COMPOSER (self), TRUE);
  return gtk_toggle_button_get_active (self->think_button);
}

void
hanashi_composer_set_thinking (HanashiComposer *self,
                               gboolean         thinking)
{
  g_return_if_fail (HANASHI_IS_COMPOSER (self));
  self->setting_thinking = TRUE;
  gtk_toggle_button_set_active (self->think_button, thinking);
  self->setting_thinking = FALSE;
}

GtkToggleButton *
hanashi_composer_get_think_button (HanashiComposer *self)
{
  g_return_val_if_fail (HANASHI_IS_COMPOSER (self), NULL);
  return self->think_button;
}

static void
on_think_toggled (GtkToggleButton *button,
                  HanashiComposer *self)
{
  if (!self->setting_thinking)
    g_signal_emit (self, signals[SIGNAL_THINKING_CHANGED], 0);
}

static void
on_cancel_edit (GtkButton       *button,
                HanashiComposer *self)
{
  hanashi_composer_set_editing (self, FALSE);
  g_signal_emit (self, signals[SIGNAL_EDIT_CANCELLED], 0);
}

static gboolean
hanashi_composer_grab_focus (GtkWidget *widget)
{
  return gtk_widget_grab_focus (GTK_WIDGET (HANASHI_COMPOSER (widget)->text_view));
}

static void
hanashi_composer_get_property (GObject    *object,
                               guint       prop_id,
                               GValue     *value,
                               GParamSpec *pspec)
{
  HanashiComposer *self = HANASHI_COMPOSER (object);

  switch (prop_id)
    {
    case PROP_GENERATING:
      g_value_set_boolean (value, self->generating);
      break;
    case PROP_EDITING:
      g_value_set_boolean (value, hanashi_composer_get_editing (self));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hanashi_composer_dispose (GObject *object)
{
  gtk_widget_dispose_template (GTK_WIDGET (object), HANASHI_TYPE_COMPOSER);
  /* Template roots without an id are not cleared by dispose_template. */
  for (GtkWidget *child; (child = gtk_widget_get_first_child (GTK_WIDGET (object))) != NULL;)
    gtk_widget_unparent (child);
  G_OBJECT_CLASS (hanashi_composer_parent_class)->dispose (object);
}

static void
hanashi_composer_finalize (GObject *object)
{
  g_free (HANASHI_COMPOSER (object)->system_prompt);
  G_OBJECT_CLASS (hanashi_composer_parent_class)->finalize (object);
}

static void
hanashi_composer_class_init (HanashiComposerClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->get_property = hanashi_composer_get_property;
  object_class->dispose = hanashi_composer_dispose;
  object_class->finalize = hanashi_composer_finalize;
  widget_class->grab_focus = hanashi_composer_grab_focus;

  properties[PROP_GENERATING] = g_param_spec_boolean ("generating", NULL, NULL, FALSE,
                                                      G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_EDITING] = g_param_spec_boolean ("editing", NULL, NULL, FALSE,
                                                   G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  signals[SIGNAL_SYSTEM_PROMPT_CHANGED] = g_signal_new ("system-prompt-changed", G_TYPE_FROM_CLASS (klass),
                                                        G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_EDIT_CANCELLED] = g_signal_new ("edit-cancelled", G_TYPE_FROM_CLASS (klass),
                                                 G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_THINKING_CHANGED] = g_signal_new ("thinking-changed", G_TYPE_FROM_CLASS (klass),
                                                   G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 0);

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hanashi/Hanashi/ui/hanashi-composer.ui");
  gtk_widget_class_bind_template_child (widget_class, HanashiComposer, editing_revealer);
  gtk_widget_class_bind_template_child (widget_class, HanashiComposer, cancel_edit_button);
  gtk_widget_class_bind_template_child (widget_class, HanashiComposer, text_view);
  gtk_widget_class_bind_template_child (widget_class, HanashiComposer, system_prompt_view);
  gtk_widget_class_bind_template_child (widget_class, HanashiComposer, button_stack);
  gtk_widget_class_bind_template_child (widget_class, HanashiComposer, think_button);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
}

static void
hanashi_composer_init (HanashiComposer *self)
{
  GtkEventController *keys = gtk_event_controller_key_new ();

  gtk_widget_init_template (GTK_WIDGET (self));
  self->system_prompt = g_strdup ("");

  /* Capture phase: the text view would otherwise insert the newline first. */
  gtk_event_controller_set_propagation_phase (keys, GTK_PHASE_CAPTURE);
  g_signal_connect (keys, "key-pressed", G_CALLBACK (on_key_pressed), self);
  gtk_widget_add_controller (GTK_WIDGET (self->text_view), keys);
  g_signal_connect (self->text_view, "preedit-changed", G_CALLBACK (on_preedit_changed), self);

  g_signal_connect (gtk_text_view_get_buffer (self->system_prompt_view), "changed",
                    G_CALLBACK (on_system_prompt_changed), self);
  g_signal_connect (self->cancel_edit_button, "clicked", G_CALLBACK (on_cancel_edit), self);
  g_signal_connect (self->think_button, "toggled", G_CALLBACK (on_think_toggled), self);
}
