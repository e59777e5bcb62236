/* hanashi-markdown.c — turns md4c callbacks into Pango markup; code blocks are split out so
 * the message row can give them a highlighted source view and a copy button.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-markdown"

#include "config.h"

#include "hanashi-markdown.h"

#include <md4c.h>
#include <string.h>

typedef struct {
  GPtrArray *blocks;
  GString *markup;       /* current text block */
  GString *code;         /* non-NULL while inside a fenced/indented code block */
  char *code_language;
  GArray *list_counters; /* per nesting level: -1 = bullet, else next number */
  int table_cell;        /* index of the cell in the current row */
  gboolean in_heading;
  /* Spans opened and not yet closed, innermost last: the span type and its opening tag.
   * md4c can report a span's end without its start on odd input (seen with mixed ~ and ~~),
   * and the label needs well-formed markup, so closing goes through this stack. */
  GArray *span_types;
  GPtrArray *span_tags;
} RenderState;

static void close_open_spans (RenderState *st);

void
hanashi_markdown_block_free (HanashiMarkdownBlock *block)
{
  if (!block)
    return;
  g_free (block->markup);
  g_free (block->code);
  g_free (block->language);
  g_free (block);
}

static char *
tag_name (const char *tag)
{
  const char *start = tag[1] == '/' ? tag + 2 : tag + 1;
  return g_strndup (start, strcspn (start, " >"));
}

/* Rewrites `markup` so that its tags nest: a closing tag that does not match the innermost
 * open one closes the tags inside it first and opens them again after; one that matches
 * nothing open is dropped; whatever is still open at the end is closed.  *still_open gets
 * those last tags, outermost first, to open again in the next block.  Text is always
 * escaped, so every '<' starts one of the tags this file writes. */
static char *
balance_tags (const char *markup, GPtrArray **still_open)
{
  GString *out = g_string_new (NULL);
  GPtrArray *stack = g_ptr_array_new_with_free_func (g_free);
  const char *p = markup;
  for (const char *lt; (lt = strchr (p, '<')) != NULL && strchr (lt, '>') != NULL;) {
    const char *gt = strchr (lt, '>');
    g_string_append_len (out, p, lt - p);
    g_autofree char *tag = g_strndup (lt, (gsize) (gt - lt + 1));
    g_autofree char *name = tag_name (tag);
    if (tag[1] != '/') {
      g_string_append (out, tag);
      g_ptr_array_add (stack, g_steal_pointer (&tag));
    } else {
      gint match = -1;
      for (gint k = (gint) stack->len - 1; k >= 0 && match < 0; k--) {
        g_autofree char *open_name = tag_name (g_ptr_array_index (stack, k));
        if (g_str_equal (open_name, name))
          match = k;
      }
      if (match >= 0) {
        for (gint k = (gint) stack->len - 1; k > match; k--) {
          g_autofree char *inner = tag_name (g_ptr_array_index (stack, k));
          g_string_append_printf (out, "</%s>", inner);
        }
        g_string_append (out, tag);
        g_ptr_array_remove_index (stack, (guint) match);
        for (guint k = (guint) match; k < stack->len; k++)
          g_string_append (out, g_ptr_array_index (stack, k));
      }
    }
    p = gt + 1;
  }
  g_string_append (out, p);
  for (guint k = stack->len; k > 0; k--) {
    g_autofree char *name = tag_name (g_ptr_array_index (stack, k - 1));
    g_string_append_printf (out, "</%s>", name);
  }
  *still_open = stack;
  return g_string_free (out, FALSE);
}

/* Drops the newlines at the end of the text, also those between the closing tags that end
 * it: trailing blank lines would make labels taller than their text. */
static void
trim_trailing_newlines (GString *markup)
{
  g_autoptr (GString) closing = g_string_new (NULL);
  for (;;) {
    if (markup->len > 0 && markup->str[markup->len - 1] == '\n') {
      g_string_truncate (markup, markup->len - 1);
      continue;
    }
    const char *lt = markup->len > 0 && markup->str[markup->len - 1] == '>'
                       ? g_strrstr_len (markup->str, (gssize) markup->len, "<") : NULL;
    if (lt == NULL || lt[1] != '/')
      break;
    g_string_prepend (closing, lt);
    g_string_truncate (markup, (gsize) (lt - markup->str));
  }
  g_string_append (markup, closing->str);
}

static gboolean
has_visible_text (const char *markup)
{
  gboolean in_tag = FALSE;
  for (const char *p = markup; *p; p++) {
    if (*p == '<')
      in_tag = TRUE;
    else if (*p == '>')
      in_tag = FALSE;
    else if (!in_tag && !g_ascii_isspace (*p))
      return TRUE;
  }
  return FALSE;
}

/* Ends the current text block.  A code block can interrupt a quote, a list item or a
 * heading whose tags are still open: they are closed here, so that every label gets
 * well-formed markup, and opened again for the text that follows. */
static void
flush_text (RenderState *st)
{
  GPtrArray *open = NULL;
  g_autofree char *balanced = balance_tags (st->markup->str, &open);
  GString *text = g_string_new (balanced);
  trim_trailing_newlines (text);
  if (has_visible_text (text->str)) {
    HanashiMarkdownBlock *block = g_new0 (HanashiMarkdownBlock, 1);
    block->kind = HANASHI_MARKDOWN_BLOCK_TEXT;
    block->markup = g_strdup (text->str);
    g_ptr_array_add (st->blocks, block);
  }
  g_string_free (text, TRUE);
  g_string_truncate (st->markup, 0);
  for (guint i = 0; i < open->len; i++)
    g_string_append (st->markup, g_ptr_array_index (open, i));
  g_ptr_array_unref (open);
}

static void
append_escaped (GString *out, const char *text, gsize size)
{
  g_autofree char *escaped = g_markup_escape_text (text, (gssize) size);
  g_string_append (out, escaped);
}

static void
paragraph_break (RenderState *st)
{
  /* Right after a quote opens, its first paragraph needs no gap. */
  if (st->markup->len > 0 && !g_str_has_suffix (st->markup->str, "\n\n") && !g_str_has_suffix (st->markup->str, "<i>"))
    g_string_append (st->markup, g_str_has_suffix (st->markup->str, "\n") ? "\n" : "\n\n");
}

static int
enter_block (MD_BLOCKTYPE type, void *detail, void *userdata)
{
  RenderState *st = userdata;
  switch (type) {
  case MD_BLOCK_H: {
    static const char *const sizes[] = { "xx-large", "x-large", "large", "medium", "medium", "medium" };
    unsigned level = ((MD_BLOCK_H_DETAIL *) detail)->level;
    paragraph_break (st);
    g_string_append_printf (st->markup, "<span size=\"%s\" weight=\"bold\">", sizes[CLAMP (level, 1u, 6u) - 1]);
    st->in_heading = TRUE;
    break;
  }
  case MD_BLOCK_P:
    if (st->list_counters->len == 0)
      paragraph_break (st);
    break;
  case MD_BLOCK_QUOTE:
    paragraph_break (st);
    g_string_append (st->markup, "<i>");
    break;
  case MD_BLOCK_UL: {
    int bullet = -1;
    g_array_append_val (st->list_counters, bullet);
    if (st->list_counters->len == 1)
      paragraph_break (st);
    break;
  }
  case MD_BLOCK_OL: {
    int start = (int) ((MD_BLOCK_OL_DETAIL *) detail)->start;
    g_array_append_val (st->list_counters, start);
    if (st->list_counters->len == 1)
      paragraph_break (st);
    break;
  }
  case MD_BLOCK_LI: {
    if (st->markup->len > 0 && !g_str_has_suffix (st->markup->str, "\n"))
      g_string_append_c (st->markup, '\n');
    guint depth = st->list_counters->len;
    for (guint i = 1; i < depth; i++)
      g_string_append (st->markup, "    ");
    int *counter = &g_array_index (st->list_counters, int, depth ? depth - 1 : 0);
    if (depth == 0 || *counter < 0)
      g_string_append (st->markup, "• ");
    else
      g_string_append_printf (st->markup, "%d. ", (*counter)++);
    break;
  }
  case MD_BLOCK_HR:
    paragraph_break (st);
    g_string_append (st->markup, "────────");
    break;
  case MD_BLOCK_CODE: {
    MD_BLOCK_CODE_DETAIL *code = detail;
    flush_text (st);
    st->code = g_string_new (NULL);
    g_clear_pointer (&st->code_language, g_free);
    if (code->lang.text && code->lang.size > 0)
      st->code_language = g_strndup (code->lang.text, code->lang.size);
    break;
  }
  case MD_BLOCK_TABLE:
    paragraph_break (st);
    g_string_append (st->markup, "<tt>");
    break;
  case MD_BLOCK_TR:
    st->table_cell = 0;
    break;
  case MD_BLOCK_TH:
  case MD_BLOCK_TD:
    g_string_append (st->markup, st->table_cell++ == 0 ? "│ " : " │ ");
    if (type == MD_BLOCK_TH)
      g_string_append (st->markup, "<b>");
    break;
  default:
    break;
  }
  return 0;
}

static int
leave_block (MD_BLOCKTYPE type, void *detail, void *userdata)
{
  RenderState *st = userdata;
  (void) detail;
  close_open_spans (st);
  switch (type) {
  case MD_BLOCK_H:
    g_string_append (st->markup, "</span>\n");
    st->in_heading = FALSE;
    break;
  case MD_BLOCK_QUOTE:
    g_string_append (st->markup, "</i>\n");
    break;
  case MD_BLOCK_P:
    if (st->list_counters->len == 0)
      g_string_append_c (st->markup, '\n');
    break;
  case MD_BLOCK_UL:
  case MD_BLOCK_OL:
    g_array_set_size (st->list_counters, st->list_counters->len - 1);
    if (st->list_counters->len == 0)
      g_string_append_c (st->markup, '\n');
    break;
  case MD_BLOCK_HR:
    g_string_append_c (st->markup, '\n');
    break;
  case MD_BLOCK_CODE: {
    HanashiMarkdownBlock *block = g_new0 (HanashiMarkdownBlock, 1);
    block->kind = HANASHI_MARKDOWN_BLOCK_CODE;
    if (st->code->len > 0 && st->code->str[st->code->len - 1] == '\n')
      g_string_truncate (st->code, st->code->len - 1);
    block->code = g_string_free (g_steal_pointer (&st->code), FALSE);
    block->language = g_steal_pointer (&st->code_language);
    g_ptr_array_add (st->blocks, block);
    break;
  }
  case MD_BLOCK_TH:
    g_string_append (st->markup, "</b>");
    break;
  case MD_BLOCK_TR:
    g_string_append (st->markup, " │\n");
    break;
  case MD_BLOCK_TABLE:
    if (g_str_has_suffix (st->markup->str, "\n"))
      g_string_truncate (st->markup, st->markup->len - 1);
    g_string_append (st->markup, "</tt>\n");
    break;
  default:
    break;
  }
  return 0;
}

static const char *
span_close_tag (MD_SPANTYPE type)
{
  switch (type) {
  case MD_SPAN_EM: return "</i>";
  case MD_SPAN_STRONG: return "</b>";
  case MD_SPAN_DEL: return "</s>";
  case MD_SPAN_CODE: return "</tt>";
  case MD_SPAN_U: return "</u>";
  case MD_SPAN_A: return "</a>";
  default: return NULL;
  }
}

static int
enter_span (MD_SPANTYPE type, void *detail, void *userdata)
{
  RenderState *st = userdata;
  char *tag = NULL;
  switch (type) {
  case MD_SPAN_EM: tag = g_strdup ("<i>"); break;
  case MD_SPAN_STRONG: tag = g_strdup ("<b>"); break;
  case MD_SPAN_DEL: tag = g_strdup ("<s>"); break;
  case MD_SPAN_CODE: tag = g_strdup ("<tt>"); break;
  case MD_SPAN_U: tag = g_strdup ("<u>"); break;
  case MD_SPAN_A: {
    MD_SPAN_A_DETAIL *a = detail;
    g_autofree char *href = g_markup_escape_text (a->href.text ? a->href.text : "", a->href.size);
    tag = g_strdup_printf ("<a href=\"%s\">", href);
    break;
  }
  default:
    return 0;
  }
  g_string_append (st->markup, tag);
  g_array_append_val (st->span_types, type);
  g_ptr_array_add (st->span_tags, tag);
  return 0;
}

/* Closes the innermost open span of `type` (and reopens the ones inside it); a span that
 * is not open is ignored. */
static int
leave_span (MD_SPANTYPE type, void *detail, void *userdata)
{
  RenderState *st = userdata;
  (void) detail;
  gint found = -1;
  for (gint i = (gint) st->span_types->len - 1; i >= 0 && found < 0; i--)
    if (g_array_index (st->span_types, MD_SPANTYPE, i) == type)
      found = i;
  if (found < 0)
    return 0;
  for (gint i = (gint) st->span_types->len - 1; i >= found; i--)
    g_string_append (st->markup, span_close_tag (g_array_index (st->span_types, MD_SPANTYPE, i)));
  g_array_remove_index (st->span_types, (guint) found);
  g_ptr_array_remove_index (st->span_tags, (guint) found);
  for (guint i = (guint) found; i < st->span_types->len; i++)
    g_string_append (st->markup, g_ptr_array_index (st->span_tags, i));
  return 0;
}

/* Spans never outlive their block; md4c should have closed them all already. */
static void
close_open_spans (RenderState *st)
{
  while (st->span_types->len > 0) {
    guint top = st->span_types->len - 1;
    g_string_append (st->markup, span_close_tag (g_array_index (st->span_types, MD_SPANTYPE, top)));
    g_array_remove_index (st->span_types, top);
    g_ptr_array_remove_index (st->span_tags, top);
  }
}

static int
on_text (MD_TEXTTYPE type, const MD_CHAR *text, MD_SIZE size, void *userdata)
{
  RenderState *st = userdata;
  if (st->code) {
    g_string_append_len (st->code, text, size);
    return 0;
  }
  switch (type) {
  case MD_TEXT_NULLCHAR:
    g_string_append (st->markup, "\xEF\xBF\xBD");
    break;
  case MD_TEXT_BR:
    g_string_append_c (st->markup, '\n');
    break;
  case MD_TEXT_SOFTBR:
    g_string_append_c (st->markup, ' ');
    break;
  case MD_TEXT_ENTITY:
    /* Entities are shown as written; resolving them all is not worth a table here. */
  default:
    append_escaped (st->markup, text, size);
    break;
  }
  return 0;
}

/* The dialect both the chat view and the sidebar preview parse: GitHub's, raw HTML shown as
 * text. */
#define PARSER_FLAGS (MD_DIALECT_GITHUB | MD_FLAG_NOHTML)

/* md4c 0.4.8 looks a few bytes past the end of the text in some cases (an entity or a link
 * cut off at the very end, found by tests/fuzz/fuzz-markdown); what it finds there changed
 * its results and once made it report a text of gigabytes.  Zero padding gives it a
 * defined end to find. */
static void
parse_padded (const char *text, gssize length, const MD_PARSER *parser, void *userdata)
{
  if (length < 0)
    length = text ? (gssize) strlen (text) : 0;
  if (text == NULL || length == 0)
    return;
  g_autofree char *padded = g_malloc0 ((gsize) length + 64);
  memcpy (padded, text, (gsize) length);
  md_parse (padded, (MD_SIZE) length, parser, userdata);
}

GPtrArray *
hanashi_markdown_render (const char *text, gssize length)
{
  RenderState st = {
    .blocks = g_ptr_array_new_with_free_func ((GDestroyNotify) hanashi_markdown_block_free),
    .markup = g_string_new (NULL),
    .list_counters = g_array_new (FALSE, FALSE, sizeof (int)),
    .span_types = g_array_new (FALSE, FALSE, sizeof (MD_SPANTYPE)),
    .span_tags = g_ptr_array_new_with_free_func (g_free),
  };
  MD_PARSER parser = {
    .abi_version = 0,
    .flags = PARSER_FLAGS,
    .enter_block = enter_block,
    .leave_block = leave_block,
    .enter_span = enter_span,
    .leave_span = leave_span,
    .text = on_text,
  };
  parse_padded (text, length, &parser, &st);
  if (st.code) {
    /* An unterminated fence while streaming: show what has arrived as code. */
    HanashiMarkdownBlock *block = g_new0 (HanashiMarkdownBlock, 1);
    block->kind = HANASHI_MARKDOWN_BLOCK_CODE;
    block->code = g_string_free (g_steal_pointer (&st.code), FALSE);
    block->language = g_steal_pointer (&st.code_language);
    g_ptr_array_add (st.blocks, block);
  }
  close_open_spans (&st);
  flush_text (&st);
  g_string_free (st.markup, TRUE);
  g_array_unref (st.list_counters);
  g_array_unref (st.span_types);
  g_ptr_array_unref (st.span_tags);
  g_free (st.code_language);
  return st.blocks;
}

/* ---- plain text ---- */

static void
plain_separate (GString *plain)
{
  if (plain->len > 0 && plain->str[plain->len - 1] != ' ')
    g_string_append_c (plain, ' ');
}

static int
plain_leave_block (MD_BLOCKTYPE type, void *detail, void *userdata)
{
  (void) type;
  (void) detail;
  plain_separate (userdata);
  return 0;
}

static int
plain_enter_block (MD_BLOCKTYPE type, void *detail, void *userdata)
{
  (void) type;
  (void) detail;
  (void) userdata;
  return 0;
}

static int
plain_ignore_span (MD_SPANTYPE type, void *detail, void *userdata)
{
  (void) type;
  (void) detail;
  (void) userdata;
  return 0;
}

static int
plain_text (MD_TEXTTYPE type, const MD_CHAR *text, MD_SIZE size, void *userdata)
{
  GString *plain = userdata;
  switch (type) {
  case MD_TEXT_NULLCHAR:
    g_string_append (plain, "\xEF\xBF\xBD");
    break;
  case MD_TEXT_BR:
  case MD_TEXT_SOFTBR:
    plain_separate (plain);
    break;
  default:
    /* code keeps its line breaks in @text; a one-line preview wants spaces */
    for (MD_SIZE i = 0; i < size; i++) {
      if (text[i] == '\n' || text[i] == '\t' || text[i] == '\r')
        plain_separate (plain);
      else
        g_string_append_c (plain, text[i]);
    }
    break;
  }
  return 0;
}

char *
hanashi_markdown_to_plain (const char *text, gssize length)
{
  GString *plain = g_string_new (NULL);
  MD_PARSER parser = {
    .abi_version = 0,
    .flags = PARSER_FLAGS,
    .enter_block = plain_enter_block,
    .leave_block = plain_leave_block,
    .enter_span = plain_ignore_span,
    .leave_span = plain_ignore_span,
    .text = plain_text,
  };
  parse_padded (text, length, &parser, plain);
  while (plain->len > 0 && plain->str[plain->len - 1] == ' ')
    g_string_truncate (plain, plain->len - 1);
  return g_string_free (plain, FALSE);
}
