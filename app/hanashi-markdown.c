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
  guint quote_depth;     /* block quotes open around the current text */
  /* The table being read (NULL outside one): its cells go into @table_cells, each cell's
   * markup is gathered in @markup, and the text before the table waits in @before_table. */
  HanashiMarkdownBlock *table;
  GPtrArray *table_cells;
  GArray *table_alignments;
  guint table_cell;      /* index of the cell in the current row */
  gboolean in_table_head;
  GString *before_table;
  /* Display math ($$…$$) stands on its own line: the text after it starts a new one. */
  gboolean line_break_pending;
  /* The TeX span being read: where its markup starts, its text (to show it as typed
   * should it turn out to be two prices, "$5 and $10") and where that ends in the input. */
  gboolean in_math;
  gsize math_markup_start;
  GString *math_text;
  const char *math_source_end;
  /* The padded input md4c reads (text pointers lie in it) */
  const char *input_start;
  const char *input_end;
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
  g_strfreev (block->cells);
  g_free (block->alignments);
  g_free (block);
}

const char *
hanashi_markdown_block_get_cell (const HanashiMarkdownBlock *block, guint row, guint column)
{
  g_return_val_if_fail (block != NULL && block->kind == HANASHI_MARKDOWN_BLOCK_TABLE, NULL);
  g_return_val_if_fail (row < block->n_rows && column < block->n_columns, NULL);
  return block->cells[row * block->n_columns + column];
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
    block->quote_depth = st->quote_depth;
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
  if (st->markup->len > 0 && !g_str_has_suffix (st->markup->str, "\n\n"))
    g_string_append (st->markup, g_str_has_suffix (st->markup->str, "\n") ? "\n" : "\n\n");
}

static HanashiMarkdownAlign
align_from_md (MD_ALIGN align)
{
  switch (align) {
  case MD_ALIGN_LEFT: return HANASHI_MARKDOWN_ALIGN_LEFT;
  case MD_ALIGN_CENTER: return HANASHI_MARKDOWN_ALIGN_CENTER;
  case MD_ALIGN_RIGHT: return HANASHI_MARKDOWN_ALIGN_RIGHT;
  case MD_ALIGN_DEFAULT:
  default: return HANASHI_MARKDOWN_ALIGN_DEFAULT;
  }
}

/* A table is a block of its own (a grid in the view): the text before it becomes a block,
 * and the tags still open there are opened again after the table. */
static void
begin_table (RenderState *st, const MD_BLOCK_TABLE_DETAIL *detail)
{
  flush_text (st);
  st->before_table = g_string_new (st->markup->str);
  g_string_truncate (st->markup, 0);
  st->table = g_new0 (HanashiMarkdownBlock, 1);
  st->table->kind = HANASHI_MARKDOWN_BLOCK_TABLE;
  st->table->quote_depth = st->quote_depth;
  /* md4c gives every row the header's number of cells; a table without any is not kept. */
  st->table->n_columns = detail ? detail->col_count : 0;
  st->table_cells = g_ptr_array_new_with_free_func (g_free);
  st->table_alignments = g_array_new (FALSE, TRUE, sizeof (HanashiMarkdownAlign));
  g_array_set_size (st->table_alignments, st->table->n_columns);
}

static void
end_table (RenderState *st)
{
  HanashiMarkdownBlock *table = g_steal_pointer (&st->table);
  g_ptr_array_add (st->table_cells, NULL);
  table->cells = (char **) g_ptr_array_free (g_steal_pointer (&st->table_cells), FALSE);
  table->alignments = (HanashiMarkdownAlign *) (void *) g_array_free (g_steal_pointer (&st->table_alignments), FALSE);
  if (table->n_rows > 0 && table->n_columns > 0)
    g_ptr_array_add (st->blocks, table);
  else
    hanashi_markdown_block_free (table);
  g_string_assign (st->markup, st->before_table->str);
  g_string_free (g_steal_pointer (&st->before_table), TRUE);
}

static void
begin_cell (RenderState *st, const MD_BLOCK_TD_DETAIL *detail)
{
  g_string_truncate (st->markup, 0);
  if (st->table_cell < st->table->n_columns && st->table->n_rows == 0 && detail)
    g_array_index (st->table_alignments, HanashiMarkdownAlign, st->table_cell) = align_from_md (detail->align);
}

static void
end_cell (RenderState *st)
{
  if (st->table_cell++ >= st->table->n_columns)
    return;   /* more cells than the header: not shown, as on GitHub */
  GPtrArray *open = NULL;
  char *cell = balance_tags (st->markup->str, &open);
  g_ptr_array_unref (open);
  g_strstrip (cell);
  g_ptr_array_add (st->table_cells, cell);
  g_string_truncate (st->markup, 0);
}

static void
end_row (RenderState *st)
{
  for (; st->table_cell < st->table->n_columns; st->table_cell++)
    g_ptr_array_add (st->table_cells, g_strdup (""));
  st->table->n_rows++;
  if (st->in_table_head)
    st->table->n_header_rows++;
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
    /* Quoted text is a block of its own, which the view sets off with a bar. */
    flush_text (st);
    st->quote_depth++;
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
    const MD_BLOCK_LI_DETAIL *item = detail;
    if (st->markup->len > 0 && !g_str_has_suffix (st->markup->str, "\n"))
      g_string_append_c (st->markup, '\n');
    guint depth = st->list_counters->len;
    for (guint i = 1; i < depth; i++)
      g_string_append (st->markup, "    ");
    gboolean task = item != NULL && item->is_task;
    int *counter = depth ? &g_array_index (st->list_counters, int, depth - 1) : NULL;
    if (counter != NULL && *counter >= 0)
      g_string_append_printf (st->markup, "%d. ", (*counter)++);
    else if (!task)
      g_string_append (st->markup, "• ");
    /* A task's box takes the place of the bullet: ☑ done, ☐ open. */
    if (task)
      g_string_append (st->markup, item->task_mark == ' ' ? "\xE2\x98\x90 " : "\xE2\x98\x91 ");
    break;
  }
  case MD_BLOCK_HR:
    paragraph_break (st);
    g_string_append (st->markup, "────────");
    break;
  case MD_BLOCK_CODE: {
    MD_BLOCK_CODE_DETAIL *code = detail;
    if (st->table)
      break;   /* md4c puts no code in cells; should it ever, it stays text */
    flush_text (st);
    st->code = g_string_new (NULL);
    g_clear_pointer (&st->code_language, g_free);
    if (code->lang.text && code->lang.size > 0)
      st->code_language = g_strndup (code->lang.text, code->lang.size);
    break;
  }
  case MD_BLOCK_TABLE:
    if (st->table == NULL)
      begin_table (st, detail);
    break;
  case MD_BLOCK_THEAD:
    st->in_table_head = TRUE;
    break;
  case MD_BLOCK_TR:
    st->table_cell = 0;
    break;
  case MD_BLOCK_TH:
  case MD_BLOCK_TD:
    if (st->table)
      begin_cell (st, detail);
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
  st->line_break_pending = FALSE;
  switch (type) {
  case MD_BLOCK_H:
    g_string_append (st->markup, "</span>\n");
    st->in_heading = FALSE;
    break;
  case MD_BLOCK_QUOTE:
    flush_text (st);
    if (st->quote_depth > 0)
      st->quote_depth--;
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
    if (st->code == NULL)
      break;
    HanashiMarkdownBlock *block = g_new0 (HanashiMarkdownBlock, 1);
    block->kind = HANASHI_MARKDOWN_BLOCK_CODE;
    block->quote_depth = st->quote_depth;
    if (st->code->len > 0 && st->code->str[st->code->len - 1] == '\n')
      g_string_truncate (st->code, st->code->len - 1);
    block->code = g_string_free (g_steal_pointer (&st->code), FALSE);
    block->language = g_steal_pointer (&st->code_language);
    g_ptr_array_add (st->blocks, block);
    break;
  }
  case MD_BLOCK_TH:
  case MD_BLOCK_TD:
    if (st->table)
      end_cell (st);
    break;
  case MD_BLOCK_TR:
    if (st->table)
      end_row (st);
    break;
  case MD_BLOCK_THEAD:
    st->in_table_head = FALSE;
    break;
  case MD_BLOCK_TABLE:
    if (st->table)
      end_table (st);
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
  case MD_SPAN_LATEXMATH:
  case MD_SPAN_LATEXMATH_DISPLAY: return "</tt>";
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
  /* TeX is not typeset: the formula is shown as code, display math on a line of its own. */
  case MD_SPAN_LATEXMATH:
  case MD_SPAN_LATEXMATH_DISPLAY:
    tag = g_strdup ("<tt>");
    if (type == MD_SPAN_LATEXMATH_DISPLAY && st->markup->len > 0 && !g_str_has_suffix (st->markup->str, "\n")) {
      while (g_str_has_suffix (st->markup->str, " "))
        g_string_truncate (st->markup, st->markup->len - 1);
      g_string_append_c (st->markup, '\n');
    }
    st->line_break_pending = FALSE;
    st->in_math = TRUE;
    st->math_markup_start = st->markup->len;
    g_string_truncate (st->math_text, 0);
    st->math_source_end = NULL;
    break;
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

/* Whether the text between two dollar signs is TeX, by pandoc's rule: no space inside
 * either sign, and no digit right after the closing one, which makes "$5 and $10" prices.
 */
static gboolean
is_tex (const RenderState *st)
{
  const GString *tex = st->math_text;
  if (tex->len == 0 || g_ascii_isspace (tex->str[0]) || g_ascii_isspace (tex->str[tex->len - 1]))
    return FALSE;
  /* Only text that md4c hands out from the input tells what follows the closing sign. */
  const char *end = st->math_source_end;
  if (end == NULL || end < st->input_start || end + 1 >= st->input_end)
    return TRUE;
  return !(end[0] == '$' && g_ascii_isdigit (end[1]));
}

/* Ends a TeX span that is not TeX: its markup gives way to the text as typed. */
static void
math_as_typed (RenderState *st, guint stack_index)
{
  g_string_truncate (st->markup, st->math_markup_start);
  g_array_remove_index (st->span_types, stack_index);
  g_ptr_array_remove_index (st->span_tags, stack_index);
  GString *typed = g_string_new ("$");
  g_string_append_len (typed, st->math_text->str, (gssize) st->math_text->len);
  g_string_append_c (typed, '$');
  append_escaped (st->markup, typed->str, typed->len);
  g_string_free (typed, TRUE);
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
  if (type == MD_SPAN_LATEXMATH || type == MD_SPAN_LATEXMATH_DISPLAY) {
    gboolean innermost = (guint) found + 1 == st->span_types->len;
    st->in_math = FALSE;
    if (innermost && type == MD_SPAN_LATEXMATH && !is_tex (st)) {
      math_as_typed (st, (guint) found);
      return 0;
    }
    while (innermost && g_str_has_suffix (st->markup->str, " ") && st->markup->len > st->math_markup_start)
      g_string_truncate (st->markup, st->markup->len - 1);
  }
  for (gint i = (gint) st->span_types->len - 1; i >= found; i--)
    g_string_append (st->markup, span_close_tag (g_array_index (st->span_types, MD_SPANTYPE, i)));
  g_array_remove_index (st->span_types, (guint) found);
  g_ptr_array_remove_index (st->span_tags, (guint) found);
  for (guint i = (guint) found; i < st->span_types->len; i++)
    g_string_append (st->markup, g_ptr_array_index (st->span_tags, i));
  if (type == MD_SPAN_LATEXMATH_DISPLAY)
    st->line_break_pending = TRUE;
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
  st->in_math = FALSE;
}

static int
on_text (MD_TEXTTYPE type, const MD_CHAR *text, MD_SIZE size, void *userdata)
{
  RenderState *st = userdata;
  if (st->code) {
    g_string_append_len (st->code, text, size);
    return 0;
  }
  if (st->in_math) {
    if (type == MD_TEXT_LATEXMATH) {
      g_string_append_len (st->math_text, text, size);
      st->math_source_end = text + size;
    } else if (type == MD_TEXT_SOFTBR || type == MD_TEXT_BR) {
      g_string_append_c (st->math_text, ' ');
      if (st->markup->len == st->math_markup_start + strlen ("<tt>"))
        return 0;   /* "$$" and then the formula on the next line */
    }
  }
  if (st->line_break_pending) {
    st->line_break_pending = FALSE;
    if (type == MD_TEXT_BR || type == MD_TEXT_SOFTBR) {
      g_string_append_c (st->markup, '\n');
      return 0;
    }
    g_string_append_c (st->markup, '\n');
    while (size > 0 && (*text == ' ' || *text == '\t')) {
      text++;
      size--;
    }
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

/* The dialect both the chat view and the sidebar preview parse: GitHub's (tables,
 * strikethrough, task lists, autolinks), raw HTML shown as text.  The chat view also
 * reads TeX math; the preview keeps the dollar signs as typed, prices and formulas alike. */
#define PARSER_FLAGS (MD_DIALECT_GITHUB | MD_FLAG_NOHTML)
#define RENDER_FLAGS (PARSER_FLAGS | MD_FLAG_LATEXMATHSPANS)

/* md4c 0.4.8 looks a few bytes past the end of the text in some cases (an entity or a link
 * cut off at the very end, found by tests/fuzz/fuzz-markdown); what it finds there changed
 * its results and once made it report a text of gigabytes.  Zero padding gives it a
 * defined end to find. */
static void
parse_padded (const char *text, gssize length, const MD_PARSER *parser, void *userdata,
              const char **input_start, const char **input_end)
{
  if (length < 0)
    length = text ? (gssize) strlen (text) : 0;
  if (text == NULL || length == 0)
    return;
  g_autofree char *padded = g_malloc0 ((gsize) length + 64);
  memcpy (padded, text, (gsize) length);
  if (input_start && input_end) {
    *input_start = padded;
    *input_end = padded + length + 64;
  }
  md_parse (padded, (MD_SIZE) length, parser, userdata);
}

/* The number of cells in a table row as GitHub counts them: an outer pipe at either end
 * does not start a cell, an escaped one (\|) is text. */
static guint
count_row_cells (const char *line, gsize length)
{
  while (length > 0 && (line[length - 1] == ' ' || line[length - 1] == '\t' || line[length - 1] == '\r'))
    length--;
  gsize start = 0;
  if (length > 0 && line[0] == '|')
    start = 1;
  gboolean trailing_pipe = length > start && line[length - 1] == '|' && !(length >= 2 && line[length - 2] == '\\');
  guint pipes = 0;
  for (gsize i = start; i < length; i++) {
    if (line[i] == '\\')
      i++;
    else if (line[i] == '|')
      pipes++;
  }
  return trailing_pipe ? pipes : pipes + 1;
}

/* Whether a line (containers stripped) could be a table's delimiter row: only pipes,
 * dashes, colons and blanks, with a pipe and a dash among them. */
static gboolean
is_delimiter_row_candidate (const char *line, gsize length)
{
  gboolean pipe = FALSE, dash = FALSE;
  for (gsize i = 0; i < length; i++) {
    if (line[i] == '|')
      pipe = TRUE;
    else if (line[i] == '-')
      dash = TRUE;
    else if (line[i] != ':' && line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
      return FALSE;
  }
  return pipe && dash;
}

/* A line's start past the markers of quotes and the indentation of lists. */
static gsize
skip_container_prefix (const char *line, gsize length)
{
  gsize i = 0;
  while (i < length && (line[i] == ' ' || line[i] == '\t' || line[i] == '>'))
    i++;
  return i;
}

/* A fence line (``` or ~~~) opens a code block, or closes the one open; returns the new
 * fence (its character and length; 0 when none is open). */
static void
track_fence (const char *body, gsize length, char *fence_char, gsize *fence_length)
{
  gsize run = 0;
  while (run < length && (body[run] == '`' || body[run] == '~') && body[run] == body[0])
    run++;
  if (run < 3)
    return;
  if (*fence_length == 0) {
    *fence_char = body[0];
    *fence_length = run;
  } else if (body[0] == *fence_char && run >= *fence_length) {
    *fence_length = 0;
  }
}

/* GitHub makes a table only of a header row and a delimiter row with as many cells; md4c
 * also takes a delimiter row with fewer, and cuts the header to it.  A streamed reply goes
 * through such rows cell by cell ("|:--" a table of one column, "|:--|-" text again, then
 * two columns …), and its view flipped between a paragraph and a grid at every token.  A
 * zero-width space before such a row keeps md4c from reading it as a delimiter row, so it
 * stays text until it has all its cells.  Returns NULL when there is no such row. */
static char *
guard_short_delimiter_rows (const char *text, gsize length, gsize *guarded_length)
{
  GString *out = NULL;
  gsize copied = 0;
  const char *previous = NULL;
  gsize previous_length = 0;
  char fence_char = 0;
  gsize fence_length = 0;
  for (gsize start = 0; start < length;) {
    const char *newline = memchr (text + start, '\n', length - start);
    gsize end = newline ? (gsize) (newline - text) : length;
    const char *line = text + start;
    gsize line_length = end - start;
    gsize prefix = skip_container_prefix (line, line_length);
    const char *body = line + prefix;
    gsize body_length = line_length - prefix;
    gboolean in_fence = fence_length > 0;
    track_fence (body, body_length, &fence_char, &fence_length);
    if (!in_fence && fence_length == 0 && previous != NULL && is_delimiter_row_candidate (body, body_length)
        && memchr (previous, '|', previous_length) != NULL
        && count_row_cells (body, body_length) != count_row_cells (previous, previous_length)) {
      if (out == NULL)
        out = g_string_sized_new (length + 16);
      g_string_append_len (out, text + copied, (gssize) (start + prefix - copied));
      g_string_append (out, "\xE2\x80\x8B");
      copied = start + prefix;
    }
    previous = in_fence || fence_length > 0 ? NULL : body;
    previous_length = body_length;
    start = end + 1;
  }
  if (out == NULL)
    return NULL;
  g_string_append_len (out, text + copied, (gssize) (length - copied));
  *guarded_length = out->len;
  return g_string_free (out, FALSE);
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
    .math_text = g_string_new (NULL),
  };
  MD_PARSER parser = {
    .abi_version = 0,
    .flags = RENDER_FLAGS,
    .enter_block = enter_block,
    .leave_block = leave_block,
    .enter_span = enter_span,
    .leave_span = leave_span,
    .text = on_text,
  };
  if (length < 0)
    length = text ? (gssize) strlen (text) : 0;
  gsize guarded_length = 0;
  g_autofree char *guarded = text ? guard_short_delimiter_rows (text, (gsize) length, &guarded_length) : NULL;
  if (guarded != NULL)
    parse_padded (guarded, (gssize) guarded_length, &parser, &st, &st.input_start, &st.input_end);
  else
    parse_padded (text, length, &parser, &st, &st.input_start, &st.input_end);
  if (st.table) {
    /* md4c always closes its blocks; a table left open would be a parser bug, and its
     * rows so far are still worth showing. */
    close_open_spans (&st);
    end_table (&st);
  }
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
  g_string_free (st.math_text, TRUE);
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
  parse_padded (text, length, &parser, plain, NULL, NULL);
  while (plain->len > 0 && plain->str[plain->len - 1] == ' ')
    g_string_truncate (plain, plain->len - 1);
  return g_string_free (plain, FALSE);
}
