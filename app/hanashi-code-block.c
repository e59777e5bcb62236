/* hanashi-code-block.c
 *
 * The code is a selectable GtkLabel, not a GtkTextView: a text view reports the height of
 * its last validated layout whatever width it is measured for, and validates new lines
 * only after it has been allocated, so in the chat's list a block that streamed in, or
 * that a recycled row was given, kept a height of a line or none until the window was
 * resized.  A label's height is computed from its text at the width asked for, every
 * time.  GtkSourceView's highlighter still does the colours: a GtkSourceBuffer that no
 * view shows holds the code, and its style tags become the label's Pango attributes.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-code-block"

#include "config.h"

#include <adwaita.h>
#include <glib/gi18n.h>
#include <gtksourceview/gtksource.h>

#include "hanashi-code-block.h"

struct _HanashiCodeBlock
{
  GtkWidget parent_instance;

  GtkWidget       *overlay;
  GtkLabel        *label;
  GtkSourceBuffer *buffer;   /* the highlighter's copy of the code */
  GString         *code;
};

G_DEFINE_FINAL_TYPE (HanashiCodeBlock, hanashi_code_block, GTK_TYPE_WIDGET)

GtkWidget *
hanashi_code_block_new (void)
{
  return g_object_new (HANASHI_TYPE_CODE_BLOCK, NULL);
}

const char *
hanashi_code_block_get_code (HanashiCodeBlock *self)
{
  g_return_val_if_fail (HANASHI_IS_CODE_BLOCK (self), NULL);
  return self->code->str;
}

static void
copy_clicked (HanashiCodeBlock *self,
              GtkButton        *button)
{
  gdk_clipboard_set_text (gtk_widget_get_clipboard (GTK_WIDGET (button)), self->code->str);
  /* The window says "Copied" (a block outside a window, in tests, has no such action). */
  gtk_widget_activate_action (GTK_WIDGET (button), "chat.copied", NULL);
}

/* The attributes one highlighting tag stands for, over [start, end) in bytes.  Only what
 * a style scheme sets: colours, weight, slant, underline and strikethrough. */
static void
add_tag_attributes (PangoAttrList *attributes,
                    GtkTextTag    *tag,
                    guint          start,
                    guint          end)
{
  gboolean foreground_set, background_set, weight_set, style_set, underline_set, strikethrough_set;
  g_autoptr (GdkRGBA) foreground = NULL;
  g_autoptr (GdkRGBA) background = NULL;
  int weight;
  PangoStyle style;
  PangoUnderline underline;
  gboolean strikethrough;
  PangoAttribute *attribute;

  g_object_get (tag,
                "foreground-set", &foreground_set, "foreground-rgba", &foreground,
                "background-set", &background_set, "background-rgba", &background,
                "weight-set", &weight_set, "weight", &weight,
                "style-set", &style_set, "style", &style,
                "underline-set", &underline_set, "underline", &underline,
                "strikethrough-set", &strikethrough_set, "strikethrough", &strikethrough,
                NULL);

#define ADD(make) \
  G_STMT_START { \
    attribute = (make); \
    attribute->start_index = start; \
    attribute->end_index = end; \
    pango_attr_list_insert (attributes, attribute); \
  } G_STMT_END
#define CHANNEL(value) ((guint16) CLAMP ((value) * 65535.0 + 0.5, 0, 65535))
  if (foreground_set && foreground != NULL)
    {
      ADD (pango_attr_foreground_new (CHANNEL (foreground->red), CHANNEL (foreground->green), CHANNEL (foreground->blue)));
      if (foreground->alpha < 1)
        ADD (pango_attr_foreground_alpha_new (CHANNEL (foreground->alpha)));
    }
  if (background_set && background != NULL)
    {
      ADD (pango_attr_background_new (CHANNEL (background->red), CHANNEL (background->green), CHANNEL (background->blue)));
      if (background->alpha < 1)
        ADD (pango_attr_background_alpha_new (CHANNEL (background->alpha)));
    }
  if (weight_set)
    ADD (pango_attr_weight_new (weight));
  if (style_set)
    ADD (pango_attr_style_new (style));
  if (underline_set)
    ADD (pango_attr_underline_new (underline));
  if (strikethrough_set)
    ADD (pango_attr_strikethrough_new (strikethrough));
#undef CHANNEL
#undef ADD
}

/* The label's attributes from the highlighter's tags.  Tags come lowest priority first and
 * Pango lets the attribute inserted last win among those starting at one index, so a
 * more specific style overrides a general one as in a source view. */
static void
update_attributes (HanashiCodeBlock *self)
{
  GtkTextBuffer *buffer = GTK_TEXT_BUFFER (self->buffer);
  PangoAttrList *attributes = pango_attr_list_new ();
  GtkTextIter start, end, at;
  const char *text = self->code->str;
  const char *cursor = text;
  int cursor_offset = 0;

  gtk_text_buffer_get_bounds (buffer, &start, &end);
  gtk_source_buffer_ensure_highlight (self->buffer, &start, &end);
  at = start;
  while (!gtk_text_iter_is_end (&at))
    {
      GtkTextIter next = at;
      gtk_text_iter_forward_to_tag_toggle (&next, NULL);
      g_autoptr (GSList) tags = gtk_text_iter_get_tags (&at);
      if (tags != NULL)
        {
          /* Character offsets to byte offsets, walking forward only. */
          const char *from = g_utf8_offset_to_pointer (cursor, gtk_text_iter_get_offset (&at) - cursor_offset);
          const char *to = g_utf8_offset_to_pointer (from, gtk_text_iter_get_offset (&next) - gtk_text_iter_get_offset (&at));
          for (GSList *l = tags; l != NULL; l = l->next)
            add_tag_attributes (attributes, l->data, (guint) (from - text), (guint) (to - text));
          cursor = to;
          cursor_offset = gtk_text_iter_get_offset (&next);
        }
      at = next;
    }
  gtk_label_set_attributes (self->label, attributes);
  pango_attr_list_unref (attributes);
}

static void
update_scheme (HanashiCodeBlock *self)
{
  gboolean dark = adw_style_manager_get_dark (adw_style_manager_get_default ());
  GtkSourceStyleScheme *scheme = gtk_source_style_scheme_manager_get_scheme (
    gtk_source_style_scheme_manager_get_default (), dark ? "Adwaita-dark" : "Adwaita");
  if (scheme != NULL && gtk_source_buffer_get_style_scheme (self->buffer) != scheme)
    {
      gtk_source_buffer_set_style_scheme (self->buffer, scheme);
      update_attributes (self);
    }
}

void
hanashi_code_block_set_code (HanashiCodeBlock *self,
                             const char       *code,
                             const char       *language)
{
  GtkTextBuffer *buffer;
  GtkSourceLanguage *lang = NULL;
  GtkTextIter end;

  g_return_if_fail (HANASHI_IS_CODE_BLOCK (self));
  buffer = GTK_TEXT_BUFFER (self->buffer);
  if (code == NULL)
    code = "";

  if (language != NULL && *language != '\0')
    {
      g_autofree char *id = g_ascii_strdown (language, -1);
      lang = gtk_source_language_manager_get_language (gtk_source_language_manager_get_default (), id);
    }
  if (gtk_source_buffer_get_language (self->buffer) != lang)
    gtk_source_buffer_set_language (self->buffer, lang);
  else if (g_str_equal (code, self->code->str))
    return;

  /* While streaming, a code block usually only grows: append instead of resetting so the
   * highlighter does not start over on every token. */
  if (g_str_has_prefix (code, self->code->str))
    {
      gtk_text_buffer_get_end_iter (buffer, &end);
      gtk_text_buffer_insert (buffer, &end, code + self->code->len, -1);
    }
  else
    gtk_text_buffer_set_text (buffer, code, -1);
  g_string_assign (self->code, code);
  gtk_label_set_text (self->label, code);
  update_attributes (self);
}

static void
hanashi_code_block_dispose (GObject *object)
{
  HanashiCodeBlock *self = HANASHI_CODE_BLOCK (object);

  g_clear_pointer (&self->overlay, gtk_widget_unparent);
  g_clear_object (&self->buffer);
  G_OBJECT_CLASS (hanashi_code_block_parent_class)->dispose (object);
}

static void
hanashi_code_block_finalize (GObject *object)
{
  HanashiCodeBlock *self = HANASHI_CODE_BLOCK (object);

  g_string_free (self->code, TRUE);
  G_OBJECT_CLASS (hanashi_code_block_parent_class)->finalize (object);
}

static void
hanashi_code_block_class_init (HanashiCodeBlockClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = hanashi_code_block_dispose;
  object_class->finalize = hanashi_code_block_finalize;
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "codeblock");
}

static void
hanashi_code_block_init (HanashiCodeBlock *self)
{
  GtkWidget *label = gtk_label_new (NULL);
  GtkWidget *copy = gtk_button_new_from_icon_name ("edit-copy-symbolic");

  self->code = g_string_new (NULL);
  self->buffer = gtk_source_buffer_new (NULL);
  gtk_source_buffer_set_highlight_syntax (self->buffer, TRUE);

  self->label = GTK_LABEL (label);
  gtk_label_set_selectable (self->label, TRUE);
  gtk_label_set_wrap (self->label, TRUE);
  gtk_label_set_wrap_mode (self->label, PANGO_WRAP_WORD_CHAR);
  gtk_label_set_xalign (self->label, 0);
  gtk_label_set_yalign (self->label, 0);
  gtk_widget_set_halign (label, GTK_ALIGN_FILL);
  /* Like the text blocks: a click selects, it does not move the focus off the actions. */
  gtk_widget_set_focus_on_click (label, FALSE);
  /* Room for the copy button on the right. */
  gtk_widget_set_margin_top (label, 8);
  gtk_widget_set_margin_bottom (label, 8);
  gtk_widget_set_margin_start (label, 8);
  gtk_widget_set_margin_end (label, 40);
  gtk_widget_add_css_class (label, "code-block");
  gtk_widget_add_css_class (label, "monospace");

  gtk_widget_set_tooltip_text (copy, _("Copy Code"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (copy), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Copy Code"), -1);
  gtk_widget_set_halign (copy, GTK_ALIGN_END);
  gtk_widget_set_valign (copy, GTK_ALIGN_START);
  gtk_widget_set_margin_top (copy, 4);
  gtk_widget_set_margin_end (copy, 4);
  gtk_widget_add_css_class (copy, "flat");
  g_signal_connect_object (copy, "clicked", G_CALLBACK (copy_clicked), self, G_CONNECT_SWAPPED);

  self->overlay = gtk_overlay_new ();
  gtk_overlay_set_child (GTK_OVERLAY (self->overlay), label);
  gtk_overlay_add_overlay (GTK_OVERLAY (self->overlay), copy);
  gtk_widget_set_parent (self->overlay, GTK_WIDGET (self));

  gtk_widget_add_css_class (GTK_WIDGET (self), "card");
  gtk_widget_set_overflow (GTK_WIDGET (self), GTK_OVERFLOW_HIDDEN);

  update_scheme (self);
  g_signal_connect_object (adw_style_manager_get_default (), "notify::dark",
                           G_CALLBACK (update_scheme), self, G_CONNECT_SWAPPED);
}
