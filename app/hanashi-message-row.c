/* hanashi-message-row.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-message-row"

#include "config.h"

#include <adwaita.h>
#include <glib/gi18n.h>

#include "hanashi-code-block.h"
#include "hanashi-markdown.h"
#include "hanashi-markdown-table.h"
#include "hanashi-token-view.h"
#include "hanashi-message-row.h"

struct _HanashiMessageRow
{
  GtkWidget parent_instance;

  /* Template widgets */
  GtkWidget *outer;
  GtkWidget *bubble;
  GtkLabel  *role_label;
  GtkExpander *thinking_expander;
  GtkLabel  *thinking_label;
  GtkWidget *content;
  GtkWidget *alternatives_box;
  GtkLabel  *alternatives_label;
  GtkLabel  *stats_label;
  GtkWidget *copy_button;
  GtkWidget *edit_button;
  GtkWidget *regenerate_button;
  GtkWidget *delete_button;

  /* Owned */
  HanashiMessage *message;
  GPtrArray      *blocks;   /* the kinds of the content's children, to reuse them */

  /* "Show probabilities": the engine whose model names the records' tokens while the lens
   * is on (NULL: off); the token view (made on first use) replaces the content while it
   * shows the answer, the note says why it does not. */
  HanashiEngine  *lens_engine;
  GtkWidget      *token_view;
  GtkWidget      *lens_note;
};

G_DEFINE_FINAL_TYPE (HanashiMessageRow, hanashi_message_row, GTK_TYPE_WIDGET)

static guint n_instances;

guint
hanashi_message_row_get_n_instances (void)
{
  return n_instances;
}

HanashiMessageRow *
hanashi_message_row_new (void)
{
  return g_object_new (HANASHI_TYPE_MESSAGE_ROW, NULL);
}

HanashiMessage *
hanashi_message_row_get_message (HanashiMessageRow *self)
{
  g_return_val_if_fail (HANASHI_IS_MESSAGE_ROW (self), NULL);
  return self->message;
}

static GtkWidget *
create_text_block (void)
{
  GtkWidget *label = gtk_label_new (NULL);
  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_selectable (GTK_LABEL (label), TRUE);
  gtk_widget_set_halign (label, GTK_ALIGN_FILL);
  /* Selectable labels would otherwise take focus before the message actions. */
  gtk_widget_set_focus_on_click (label, FALSE);
  return label;
}

static void
clear_content (HanashiMessageRow *self)
{
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (self->content)) != NULL)
    gtk_box_remove (GTK_BOX (self->content), child);
  g_ptr_array_set_size (self->blocks, 0);
}

/* Rebuilds the content from the text, reusing existing children of the same kind so a
 * streaming reply does not recreate its widgets on every token. */
static void
update_content (HanashiMessageRow *self)
{
  const char *text = self->message ? hanashi_message_get_text (self->message) : "";
  g_autoptr (GPtrArray) blocks = NULL;
  GtkWidget *child;
  guint i;

  if (self->message == NULL || hanashi_message_is_user (self->message))
    {
      HanashiMarkdownBlock *block = g_new0 (HanashiMarkdownBlock, 1);
      blocks = g_ptr_array_new_with_free_func ((GDestroyNotify) hanashi_markdown_block_free);
      block->kind = HANASHI_MARKDOWN_BLOCK_TEXT;
      block->markup = g_markup_escape_text (text, -1);
      g_ptr_array_add (blocks, block);
    }
  else
    blocks = hanashi_markdown_render (text, -1);

  child = gtk_widget_get_first_child (self->content);
  for (i = 0; i < blocks->len; i++)
    {
      HanashiMarkdownBlock *block = g_ptr_array_index (blocks, i);

      if (child != NULL && GPOINTER_TO_INT (g_ptr_array_index (self->blocks, i)) != (int) block->kind)
        {
          /* Kinds diverge from here on: drop the rest and build anew. */
          while (child != NULL)
            {
              GtkWidget *next = gtk_widget_get_next_sibling (child);
              gtk_box_remove (GTK_BOX (self->content), child);
              child = next;
            }
          g_ptr_array_set_size (self->blocks, i);
        }
      if (child == NULL)
        {
          child = block->kind == HANASHI_MARKDOWN_BLOCK_CODE    ? hanashi_code_block_new ()
                : block->kind == HANASHI_MARKDOWN_BLOCK_TABLE ? hanashi_markdown_table_new ()
                                                              : create_text_block ();
          gtk_box_append (GTK_BOX (self->content), child);
          g_ptr_array_add (self->blocks, GINT_TO_POINTER (block->kind));
        }
      if (block->kind == HANASHI_MARKDOWN_BLOCK_CODE)
        hanashi_code_block_set_code (HANASHI_CODE_BLOCK (child), block->code, block->language);
      else if (block->kind == HANASHI_MARKDOWN_BLOCK_TABLE)
        hanashi_markdown_table_update (child, block);
      else if (g_strcmp0 (gtk_label_get_label (GTK_LABEL (child)), block->markup) != 0)
        gtk_label_set_markup (GTK_LABEL (child), block->markup);
      hanashi_markdown_set_quote_depth (child, block->quote_depth);
      child = gtk_widget_get_next_sibling (child);
    }
  while (child != NULL)
    {
      GtkWidget *next = gtk_widget_get_next_sibling (child);
      gtk_box_remove (GTK_BOX (self->content), child);
      child = next;
    }
  g_ptr_array_set_size (self->blocks, blocks->len);
}

static void
update_footer (HanashiMessageRow *self)
{
  HanashiMessage *m = self->message;
  guint n = m ? hanashi_message_get_n_alternatives (m) : 1;
  guint index = m ? hanashi_message_get_alternative_index (m) : 0;
  gboolean user = m == NULL || hanashi_message_is_user (m);
  gboolean complete = m == NULL || hanashi_message_get_complete (m);
  g_autofree char *alternatives = g_strdup_printf ("%u / %u", index + 1, n);

  gtk_widget_set_visible (self->alternatives_box, n > 1);
  gtk_label_set_text (self->alternatives_label, alternatives);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "row.previous-alternative", index > 0);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "row.next-alternative", index + 1 < n);

  gtk_widget_set_visible (self->edit_button, user);
  gtk_widget_set_visible (self->regenerate_button, !user);

  if (!user && m != NULL && hanashi_message_get_token_count (m) > 0)
    {
      int tokens = hanashi_message_get_token_count (m);
      double speed = hanashi_message_get_tokens_per_second (m);
      /* Translators: the footer of a reply: its length in tokens and the generation speed */
      g_autofree char *count = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%d token", "%d tokens", tokens), tokens);
      g_autofree char *stats = speed > 0 ? g_strdup_printf (_("%s · %.1f tokens/s"), count, speed) : g_strdup (count);
      gtk_label_set_text (self->stats_label, stats);
    }
  else if (!complete)
    gtk_label_set_text (self->stats_label, _("Writing…"));
  else
    gtk_label_set_text (self->stats_label, "");
}

/* "Thought for 12 s" */
static char *
describe_thinking_time (double seconds)
{
  if (seconds <= 0)
    /* Translators: the header of a reasoning model's thinking when its duration is unknown */
    return g_strdup (_("Thoughts"));
  if (seconds < 1)
    return g_strdup (_("Thought for less than a second"));
  int total = (int) (seconds + 0.5);
  if (total < 60)
    /* Translators: the header of a reasoning model's thinking; %d is seconds */
    return g_strdup_printf (_("Thought for %d s"), total);
  /* Translators: the header of a reasoning model's thinking; minutes and seconds */
  return g_strdup_printf (_("Thought for %d min %d s"), total / 60, total % 60);
}

static void
update_thinking (HanashiMessageRow *self)
{
  HanashiMessage *m = self->message;
  const char *thinking = m ? hanashi_message_get_thinking (m) : "";
  gboolean active = m != NULL && hanashi_message_get_thinking_active (m);
  g_autofree char *title = active ? g_strdup (_("Thinking…"))
                                  : describe_thinking_time (m ? hanashi_message_get_thinking_seconds (m) : 0);

  gtk_widget_set_visible (GTK_WIDGET (self->thinking_expander), active || *thinking != '\0');
  gtk_expander_set_label (self->thinking_expander, title);
  if (g_strcmp0 (gtk_label_get_text (self->thinking_label), thinking) != 0)
    gtk_label_set_text (self->thinking_label, thinking);
}

/* Open while the thinking streams, folded when the answer starts; in between the user's
 * own choice stands. */
static void
on_thinking_active_changed (HanashiMessageRow *self)
{
  gtk_expander_set_expanded (self->thinking_expander, hanashi_message_get_thinking_active (self->message));
  update_thinking (self);
}

static void
update_role (HanashiMessageRow *self)
{
  gboolean user = self->message == NULL || hanashi_message_is_user (self->message);

  gtk_label_set_text (self->role_label, user ? _("You") : _("Assistant"));
  if (user)
    {
      gtk_widget_add_css_class (GTK_WIDGET (self), "user");
      gtk_widget_remove_css_class (GTK_WIDGET (self), "assistant");
    }
  else
    {
      gtk_widget_add_css_class (GTK_WIDGET (self), "assistant");
      gtk_widget_remove_css_class (GTK_WIDGET (self), "user");
    }
  /* The user's messages sit on the right like in a messenger; replies use the full width. */
  gtk_widget_set_halign (self->bubble, user ? GTK_ALIGN_END : GTK_ALIGN_FILL);
  gtk_widget_set_halign (self->outer, GTK_ALIGN_FILL);
}

static void
on_branch (HanashiTokenView  *view,
           guint              token_index,
           int                candidate,
           HanashiMessageRow *self)
{
  (void) view;
  if (self->message != NULL)
    gtk_widget_activate_action (GTK_WIDGET (self), "chat.branch", "(xui)", hanashi_message_get_id (self->message),
                                token_index, candidate);
}

static void
on_show_in_lens (HanashiTokenView  *view,
                 guint              token_index,
                 HanashiMessageRow *self)
{
  (void) view;
  if (self->message != NULL)
    gtk_widget_activate_action (GTK_WIDGET (self), "chat.show-token-in-lens", "(xu)",
                                hanashi_message_get_id (self->message), token_index);
}

/* The lens on an answer: its tokens shaded, or the content and a line saying why not.  A
 * reply being written keeps its Markdown until it is complete (its tokens would be mapped
 * again for every piece). */
static void
update_lens (HanashiMessageRow *self)
{
  gboolean on = self->lens_engine != NULL && self->message != NULL && !hanashi_message_is_user (self->message) &&
                hanashi_message_get_complete (self->message) && *hanashi_message_get_text (self->message) != '\0';
  const char *note = NULL;
  gboolean tokens_shown = FALSE;

  if (on)
    {
      GArray *records = hanashi_message_get_token_probs (self->message);
      if (records == NULL)
        note = _("No token probabilities were recorded for this answer.");
      else
        {
          if (self->token_view == NULL)
            {
              self->token_view = hanashi_token_view_new ();
              g_signal_connect (self->token_view, "branch", G_CALLBACK (on_branch), self);
              g_signal_connect (self->token_view, "show-in-lens", G_CALLBACK (on_show_in_lens), self);
              gtk_widget_insert_after (self->token_view, gtk_widget_get_parent (self->content), self->content);
            }
          tokens_shown = hanashi_token_view_set_answer (HANASHI_TOKEN_VIEW (self->token_view), self->lens_engine,
                                                        hanashi_message_get_text (self->message), records);
          if (!tokens_shown)
            note = _("The token probabilities can be shown only with the model that wrote this answer.");
        }
    }
  else if (self->token_view != NULL)
    hanashi_token_view_set_answer (HANASHI_TOKEN_VIEW (self->token_view), NULL, NULL, NULL);
  if (self->token_view != NULL)
    gtk_widget_set_visible (self->token_view, tokens_shown);
  gtk_widget_set_visible (self->content, !tokens_shown);
  if (note != NULL && self->lens_note == NULL)
    {
      self->lens_note = gtk_label_new (NULL);
      gtk_label_set_wrap (GTK_LABEL (self->lens_note), TRUE);
      gtk_label_set_xalign (GTK_LABEL (self->lens_note), 0);
      gtk_widget_add_css_class (self->lens_note, "caption");
      gtk_widget_add_css_class (self->lens_note, "dim-label");
      gtk_box_append (GTK_BOX (gtk_widget_get_parent (self->content)), self->lens_note);
    }
  if (self->lens_note != NULL)
    {
      gtk_label_set_label (GTK_LABEL (self->lens_note), note != NULL ? note : "");
      gtk_widget_set_visible (self->lens_note, note != NULL);
    }
}

void
hanashi_message_row_set_lens (HanashiMessageRow *self,
                              HanashiEngine     *engine)
{
  g_return_if_fail (HANASHI_IS_MESSAGE_ROW (self));
  g_return_if_fail (engine == NULL || HANASHI_IS_ENGINE (engine));

  if (self->lens_engine == engine)
    return;
  if (self->lens_engine != NULL)
    g_signal_handlers_disconnect_by_data (self->lens_engine, self);
  g_set_object (&self->lens_engine, engine);
  /* the token texts are the loaded model's: another model maps differently (or not) */
  if (engine != NULL)
    g_signal_connect_swapped (engine, "notify::model-info", G_CALLBACK (update_lens), self);
  update_lens (self);
}

GtkWidget *
hanashi_message_row_get_token_view (HanashiMessageRow *self)
{
  g_return_val_if_fail (HANASHI_IS_MESSAGE_ROW (self), NULL);
  return self->token_view != NULL && gtk_widget_get_visible (self->token_view) ? self->token_view : NULL;
}

const char *
hanashi_message_row_get_lens_note (HanashiMessageRow *self)
{
  g_return_val_if_fail (HANASHI_IS_MESSAGE_ROW (self), NULL);
  return self->lens_note != NULL && gtk_widget_get_visible (self->lens_note)
           ? gtk_label_get_label (GTK_LABEL (self->lens_note)) : NULL;
}

static void
on_text_changed (HanashiMessageRow *self)
{
  update_content (self);
  if (self->lens_engine != NULL)
    update_lens (self);
}

void
hanashi_message_row_set_message (HanashiMessageRow *self,
                                 HanashiMessage    *message)
{
  g_return_if_fail (HANASHI_IS_MESSAGE_ROW (self));

  if (self->message == message)
    return;
  if (self->message != NULL)
    g_signal_handlers_disconnect_by_data (self->message, self);
  g_set_object (&self->message, message);
  clear_content (self);
  if (message != NULL)
    {
      g_signal_connect_swapped (message, "notify::text", G_CALLBACK (on_text_changed), self);
      g_signal_connect_swapped (message, "notify::complete", G_CALLBACK (update_footer), self);
      g_signal_connect_swapped (message, "notify::complete", G_CALLBACK (update_lens), self);
      g_signal_connect_swapped (message, "notify::token-count", G_CALLBACK (update_footer), self);
      g_signal_connect_swapped (message, "notify::generation-seconds", G_CALLBACK (update_footer), self);
      g_signal_connect_swapped (message, "notify::alternative-index", G_CALLBACK (update_footer), self);
      g_signal_connect_swapped (message, "notify::n-alternatives", G_CALLBACK (update_footer), self);
      g_signal_connect_swapped (message, "notify::thinking", G_CALLBACK (update_thinking), self);
      g_signal_connect_swapped (message, "notify::thinking-seconds", G_CALLBACK (update_thinking), self);
      g_signal_connect_swapped (message, "notify::thinking-active", G_CALLBACK (on_thinking_active_changed), self);
    }
  /* The buttons activate the chat's actions ("chat.copy", …) for this message. */
  {
    GtkWidget *buttons[] = { self->copy_button, self->edit_button, self->regenerate_button, self->delete_button };
    gint64 id = message != NULL ? hanashi_message_get_id (message) : 0;
    for (gsize i = 0; i < G_N_ELEMENTS (buttons); i++)
      gtk_actionable_set_action_target (GTK_ACTIONABLE (buttons[i]), "x", id);
  }
  gtk_expander_set_expanded (self->thinking_expander, message != NULL && hanashi_message_get_thinking_active (message));
  update_role (self);
  update_thinking (self);
  update_content (self);
  update_lens (self);
  update_footer (self);
}

/* The arrows are enabled per row (the first version has no previous one), so they are the
 * row's own actions, passing the message id on to the chat's. */
static void
previous_alternative_action (GtkWidget  *widget,
                             const char *action_name,
                             GVariant   *parameter)
{
  HanashiMessageRow *self = HANASHI_MESSAGE_ROW (widget);

  if (self->message != NULL)
    gtk_widget_activate_action (widget, "chat.previous-alternative", "x", hanashi_message_get_id (self->message));
}

static void
next_alternative_action (GtkWidget  *widget,
                         const char *action_name,
                         GVariant   *parameter)
{
  HanashiMessageRow *self = HANASHI_MESSAGE_ROW (widget);

  if (self->message != NULL)
    gtk_widget_activate_action (widget, "chat.next-alternative", "x", hanashi_message_get_id (self->message));
}

static void
hanashi_message_row_dispose (GObject *object)
{
  HanashiMessageRow *self = HANASHI_MESSAGE_ROW (object);

  hanashi_message_row_set_message (self, NULL);
  hanashi_message_row_set_lens (self, NULL);
  gtk_widget_dispose_template (GTK_WIDGET (self), HANASHI_TYPE_MESSAGE_ROW);
  /* Template roots without an id are not cleared by dispose_template. */
  for (GtkWidget *child; (child = gtk_widget_get_first_child (GTK_WIDGET (self))) != NULL;)
    gtk_widget_unparent (child);
  G_OBJECT_CLASS (hanashi_message_row_parent_class)->dispose (object);
}

static void
hanashi_message_row_finalize (GObject *object)
{
  HanashiMessageRow *self = HANASHI_MESSAGE_ROW (object);

  g_ptr_array_unref (self->blocks);
  n_instances--;
  G_OBJECT_CLASS (hanashi_message_row_parent_class)->finalize (object);
}

static void
hanashi_message_row_class_init (HanashiMessageRowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hanashi_message_row_dispose;
  object_class->finalize = hanashi_message_row_finalize;

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hanashi/Hanashi/ui/hanashi-message-row.ui");
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, outer);
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, bubble);
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, role_label);
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, thinking_expander);
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, thinking_label);
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, content);
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, alternatives_box);
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, alternatives_label);
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, stats_label);
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, copy_button);
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, edit_button);
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, regenerate_button);
  gtk_widget_class_bind_template_child (widget_class, HanashiMessageRow, delete_button);

  gtk_widget_class_install_action (widget_class, "row.previous-alternative", NULL, previous_alternative_action);
  gtk_widget_class_install_action (widget_class, "row.next-alternative", NULL, next_alternative_action);

  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "messagerow");
}

static void
hanashi_message_row_init (HanashiMessageRow *self)
{
  n_instances++;
  self->blocks = g_ptr_array_new ();
  gtk_widget_init_template (GTK_WIDGET (self));
  update_role (self);
}
