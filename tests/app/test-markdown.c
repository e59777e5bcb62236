/* test-markdown.c — Markdown to Pango markup, code blocks and tables (no display)
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <pango/pango.h>
#include <string.h>

#include "hanashi-markdown.h"

static HanashiMarkdownBlock *
block (GPtrArray *blocks, guint i)
{
  g_assert_cmpuint (i, <, blocks->len);
  return blocks->pdata[i];
}

static void
assert_valid_markup (GPtrArray *blocks)
{
  g_autoptr(GRegex) link_tags = g_regex_new ("<a href=\"[^\"]*\">|</a>", 0, 0, NULL);
  for (guint i = 0; i < blocks->len; i++) {
    HanashiMarkdownBlock *b = blocks->pdata[i];
    if (b->kind != HANASHI_MARKDOWN_BLOCK_TEXT)
      continue;
    g_autoptr(GError) error = NULL;
    /* Links are a GtkLabel extension of Pango markup; Pango alone rejects them. */
    g_autofree char *plain = g_regex_replace (link_tags, b->markup, -1, 0, "", 0, NULL);
    g_assert_true (pango_parse_markup (plain, -1, 0, NULL, NULL, NULL, &error));
    g_assert_no_error (error);
  }
}

static void
test_inline (void)
{
  g_autoptr(GPtrArray) blocks = hanashi_markdown_render ("Some *em* and **strong** `a<b` [link](https://x.org/?a=1&b=2) ~~old~~", -1);
  g_assert_cmpuint (blocks->len, ==, 1);
  g_assert_cmpint (block (blocks, 0)->kind, ==, HANASHI_MARKDOWN_BLOCK_TEXT);
  g_assert_cmpstr (block (blocks, 0)->markup, ==,
                   "Some <i>em</i> and <b>strong</b> <tt>a&lt;b</tt> "
                   "<a href=\"https://x.org/?a=1&amp;b=2\">link</a> <s>old</s>");
  assert_valid_markup (blocks);
}

static void
test_blocks (void)
{
  const char *md =
    "# Title\n\nIntro <b>not html</b>.\n\n"
    "- one\n- two\n  1. nested\n\n"
    "3. three\n4. four\n\n"
    "```python\nprint('hi')\n```\n\n"
    "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    "> quoted\n";
  g_autoptr(GPtrArray) blocks = hanashi_markdown_render (md, -1);
  g_assert_cmpuint (blocks->len, ==, 4);
  HanashiMarkdownBlock *text = block (blocks, 0);
  g_assert_cmpint (text->kind, ==, HANASHI_MARKDOWN_BLOCK_TEXT);
  g_assert_true (g_str_has_prefix (text->markup, "<span size=\"xx-large\" weight=\"bold\">Title</span>"));
  g_assert_nonnull (strstr (text->markup, "Intro &lt;b&gt;not html&lt;/b&gt;."));
  g_assert_nonnull (strstr (text->markup, "• one\n• two\n    1. nested"));
  g_assert_nonnull (strstr (text->markup, "3. three\n4. four"));

  HanashiMarkdownBlock *code = block (blocks, 1);
  g_assert_cmpint (code->kind, ==, HANASHI_MARKDOWN_BLOCK_CODE);
  g_assert_cmpstr (code->code, ==, "print('hi')");
  g_assert_cmpstr (code->language, ==, "python");

  HanashiMarkdownBlock *table = block (blocks, 2);
  g_assert_cmpint (table->kind, ==, HANASHI_MARKDOWN_BLOCK_TABLE);
  g_assert_cmpuint (table->n_rows, ==, 2);
  g_assert_cmpuint (table->n_columns, ==, 2);
  g_assert_cmpstr (hanashi_markdown_block_get_cell (table, 1, 1), ==, "2");

  HanashiMarkdownBlock *quote = block (blocks, 3);
  g_assert_cmpstr (quote->markup, ==, "quoted");
  g_assert_cmpuint (quote->quote_depth, ==, 1);
  g_assert_cmpuint (text->quote_depth, ==, 0);
  assert_valid_markup (blocks);
}

static void
test_streaming_and_garbage (void)
{
  /* A half-streamed fence and unbalanced emphasis still give valid output. */
  g_autoptr(GPtrArray) partial = hanashi_markdown_render ("Here:\n```c\nint x", -1);
  g_assert_cmpuint (partial->len, ==, 2);
  g_assert_cmpint (block (partial, 1)->kind, ==, HANASHI_MARKDOWN_BLOCK_CODE);
  g_assert_cmpstr (block (partial, 1)->code, ==, "int x");
  assert_valid_markup (partial);

  const char *nasty[] = { "", "**", "<<>>&&", "* [x](<>)", "|", "```", "\x01\x02 a\0b", "1. \n   - \n     > ``", NULL };
  for (guint i = 0; nasty[i]; i++) {
    g_autoptr(GPtrArray) blocks = hanashi_markdown_render (nasty[i], -1);
    assert_valid_markup (blocks);
  }
  g_autoptr(GPtrArray) empty = hanashi_markdown_render (NULL, -1);
  g_assert_cmpuint (empty->len, ==, 0);
}

/* Label markup = Pango markup + GtkLabel's <a href> links. */
static void
assert_label_markup (const char *markup)
{
  g_autoptr (GRegex) open = g_regex_new ("<a href=\"[^\"<>]*\">", 0, 0, NULL);
  g_autofree char *a = g_regex_replace_literal (open, markup, -1, 0, "<span>", 0, NULL);
  g_autoptr (GRegex) close = g_regex_new ("</a>", 0, 0, NULL);
  g_autofree char *b = g_regex_replace_literal (close, a, -1, 0, "</span>", 0, NULL);
  g_autoptr (GError) error = NULL;
  if (!pango_parse_markup (b, -1, 0, NULL, NULL, NULL, &error))
    g_error ("invalid label markup (%s): %s", error->message, markup);
}

static void assert_all_markup_valid (GPtrArray *blocks);

/* Inputs the fuzzer (tests/fuzz/fuzz-markdown) found to give broken markup. */
static void
test_fuzz_regressions (void)
{
  const char *inputs[] = {
    /* md4c reports the end of a strikethrough it never started */
    "[link](https://example.o#~condeconrip:~~ **52**\\\ncrip: t~>x<\n\n| a |pe",
    /* a fenced code block inside a quote cuts the quote's italic in two */
    "Some *emphasis\n- two\n  0. nested\n\n> ~~~4 **5>x</scipt>\n\n    indented\n",
    "> quote\n> ```\n> code\n> ```\n> after\n",
    "# Head ```x```\n1. *a ~~b\n   ```\n   c\n   ```\n   d~~ e*\n",
    /* emphasis closed inside a heading's span, across a list */
    "       =\n\n##\n\n- o- two\n a [*******************o- two\n a [**************an1 :=#  **52"
    "* *\"**************(********\n** arta [ink](ng**).i\nZ******* o- two\n a [****************"
    "** =a [**************an#  **52* a [ink](ng**).i\n****Z******\"**************(*****a [a [**"
    "************an#  **52* a [ink][**************an2****** a [**************an#  **52* a [ink]"
    "(ng**).i\n****Z******\"**************(*****a [a [**************an#  **52* a [ink][********"
    "******an2 :-#  **52* a [ink](ng**).i\nZ******* o- two\n a [****************** a [* a [ink]"
    "(ng**).i\n****Z*wo\n a [a [**************an> t%\n    #  **52* a [ink][**************an2 :-"
    "#  **521 a [ink](ng**).i\nZ******* o- two\n a [****************** a [**************an#  **"
    "52* a [ink](ng**).i\n****Z******\"**************(*************\n***\"*********amp;**** **5"
    "2* a [ink](ng**).i\nZ******* o- two\n a [****************** a [* a [ink](ng**).i\n****Z*wo"
    "\n a [a [**************an#  **51* a [ink][**************an2 :-#  **521 a [ink](ng**).i\nZ*"
    "****** o- two\n a [****************** a [**************an#  **52* a [ink](ng**).i\n****Z**"
    "****\"**************(*************\n***\"*********amp;**************************\n-*\005an"
    "#  **52* a [inkY(ng**)&i\n*********- two\n a [a [**********a**********[ink](ng**).i\n****Z"
    "******\"**************(*******\n*** artd q",
    /* a TeX span over lines, which md4c hands out in pieces */
    "#\neeeeeeeeeeeeeeeee#\n$ eeeeeeeee#\n$ #\n\n#\n# $s$ \n",
  };
  for (gsize i = 0; i < G_N_ELEMENTS (inputs); i++) {
    g_autoptr (GPtrArray) blocks = hanashi_markdown_render (inputs[i], -1);
    assert_all_markup_valid (blocks);
  }
  /* the quote goes on after its code block, which is quoted too */
  g_autoptr (GPtrArray) quote = hanashi_markdown_render (inputs[2], -1);
  g_assert_cmpuint (quote->len, ==, 3);
  for (guint i = 0; i < 3; i++)
    g_assert_cmpuint (((HanashiMarkdownBlock *) quote->pdata[i])->quote_depth, ==, 1);
  g_assert_cmpstr (((HanashiMarkdownBlock *) quote->pdata[0])->markup, ==, "quote");
  g_assert_cmpstr (((HanashiMarkdownBlock *) quote->pdata[1])->code, ==, "code");
  g_assert_cmpstr (((HanashiMarkdownBlock *) quote->pdata[2])->markup, ==, "after");
}

/* Every text block and table cell is markup a GtkLabel takes. */
static void
assert_all_markup_valid (GPtrArray *blocks)
{
  for (guint k = 0; k < blocks->len; k++)
    {
      HanashiMarkdownBlock *b = blocks->pdata[k];
      if (b->kind == HANASHI_MARKDOWN_BLOCK_TEXT)
        assert_label_markup (b->markup);
      else if (b->kind == HANASHI_MARKDOWN_BLOCK_TABLE)
        for (guint r = 0; r < b->n_rows; r++)
          for (guint c = 0; c < b->n_columns; c++)
            assert_label_markup (hanashi_markdown_block_get_cell (b, r, c));
    }
}

/* A table is a block of cells with the alignment of the separator row's colons. */
static void
test_table (void)
{
  const char *md =
    "Before the table.\n\n"
    "| Name | Left | Centre | Right |\n"
    "|------|:-----|:------:|------:|\n"
    "| *a*  | b    | `c<d`  | 1.5   |\n"
    "| e \\| f | g |\n"
    "| h | i | j | k | extra |\n"
    "\nAfter it.";
  g_autoptr (GPtrArray) blocks = hanashi_markdown_render (md, -1);
  g_assert_cmpuint (blocks->len, ==, 3);
  g_assert_cmpstr (block (blocks, 0)->markup, ==, "Before the table.");
  g_assert_cmpstr (block (blocks, 2)->markup, ==, "After it.");

  HanashiMarkdownBlock *table = block (blocks, 1);
  g_assert_cmpint (table->kind, ==, HANASHI_MARKDOWN_BLOCK_TABLE);
  g_assert_cmpuint (table->n_columns, ==, 4);
  g_assert_cmpuint (table->n_rows, ==, 4);
  g_assert_cmpuint (table->n_header_rows, ==, 1);
  g_assert_cmpuint (table->quote_depth, ==, 0);
  g_assert_cmpint (table->alignments[0], ==, HANASHI_MARKDOWN_ALIGN_DEFAULT);
  g_assert_cmpint (table->alignments[1], ==, HANASHI_MARKDOWN_ALIGN_LEFT);
  g_assert_cmpint (table->alignments[2], ==, HANASHI_MARKDOWN_ALIGN_CENTER);
  g_assert_cmpint (table->alignments[3], ==, HANASHI_MARKDOWN_ALIGN_RIGHT);

  const char *expected[4][4] = {
    { "Name", "Left", "Centre", "Right" },
    { "<i>a</i>", "b", "<tt>c&lt;d</tt>", "1.5" },
    { "e | f", "g", "", "" },          /* a short row is filled up */
    { "h", "i", "j", "k" },            /* cells past the header's are dropped */
  };
  for (guint r = 0; r < 4; r++)
    for (guint c = 0; c < 4; c++)
      g_assert_cmpstr (hanashi_markdown_block_get_cell (table, r, c), ==, expected[r][c]);
  assert_all_markup_valid (blocks);

  /* Inside a quote and a list: the table knows its quote; the list goes on after it. */
  g_autoptr (GPtrArray) quoted = hanashi_markdown_render ("> | x |\n> |--:|\n> | 1 |\n", -1);
  g_assert_cmpuint (quoted->len, ==, 1);
  g_assert_cmpint (block (quoted, 0)->kind, ==, HANASHI_MARKDOWN_BLOCK_TABLE);
  g_assert_cmpuint (block (quoted, 0)->quote_depth, ==, 1);
  g_assert_cmpint (block (quoted, 0)->alignments[0], ==, HANASHI_MARKDOWN_ALIGN_RIGHT);
  g_autoptr (GPtrArray) listed = hanashi_markdown_render ("- item\n\n  | a |\n  |---|\n  | 1 |\n\n  more\n- next", -1);
  g_assert_cmpuint (listed->len, ==, 3);
  g_assert_cmpint (block (listed, 1)->kind, ==, HANASHI_MARKDOWN_BLOCK_TABLE);
  g_assert_nonnull (strstr (block (listed, 2)->markup, "more"));
  g_assert_nonnull (strstr (block (listed, 2)->markup, "• next"));
}

/* While a reply streams, the renderer sees every prefix of the table: each gives valid
 * cells, and once the table is there it stays a table that only grows. */
static void
test_table_streaming (void)
{
  const char *md =
    "Compare:\n\n"
    "| Model | Size | **Speed** |\n"
    "|:------|-----:|:---------:|\n"
    "| tiny  | 1.1B | *fast*    |\n"
    "| big ~~model~~ | 70B | slow |\n"
    "\nThat is all.";
  gsize length = strlen (md);
  guint last_rows = 0;
  gboolean seen_table = FALSE;
  for (gsize cut = 0; cut <= length; cut++)
    {
      g_autoptr (GPtrArray) blocks = hanashi_markdown_render (md, (gssize) cut);
      assert_all_markup_valid (blocks);
      HanashiMarkdownBlock *table = NULL;
      for (guint i = 0; i < blocks->len; i++)
        if (block (blocks, i)->kind == HANASHI_MARKDOWN_BLOCK_TABLE)
          table = block (blocks, i);
      if (seen_table)
        {
          g_assert_nonnull (table);
          g_assert_cmpuint (table->n_columns, ==, 3);
          g_assert_cmpuint (table->n_rows, >=, last_rows);
          g_assert_cmpint (table->alignments[1], ==, HANASHI_MARKDOWN_ALIGN_RIGHT);
        }
      if (table)
        {
          seen_table = TRUE;
          last_rows = table->n_rows;
        }
    }
  g_assert_true (seen_table);
  g_assert_cmpuint (last_rows, ==, 3);
}

/* Quotes are blocks of their own, as deep as they are nested; no italics. */
static void
test_quote (void)
{
  g_autoptr (GPtrArray) blocks = hanashi_markdown_render ("Said:\n\n> first *line*\n> goes on\n>\n> > inner\n>\n> outer again\n\nplain", -1);
  g_assert_cmpuint (blocks->len, ==, 5);
  const struct { const char *markup; guint depth; } expected[] = {
    { "Said:", 0 }, { "first <i>line</i> goes on", 1 }, { "inner", 2 }, { "outer again", 1 }, { "plain", 0 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (expected); i++)
    {
      g_assert_cmpint (block (blocks, i)->kind, ==, HANASHI_MARKDOWN_BLOCK_TEXT);
      g_assert_cmpstr (block (blocks, i)->markup, ==, expected[i].markup);
      g_assert_cmpuint (block (blocks, i)->quote_depth, ==, expected[i].depth);
    }
}

/* The range of text a markup's attribute of @type covers (-1 when there is none). */
static void
attribute_range (const char *markup, PangoAttrType type, int *start, int *end, char **text)
{
  g_autoptr (PangoAttrList) attrs = NULL;
  g_assert_true (pango_parse_markup (markup, -1, 0, &attrs, text, NULL, NULL));
  *start = *end = -1;
  PangoAttrIterator *it = pango_attr_list_get_iterator (attrs);
  do
    {
      PangoAttribute *attr = pango_attr_iterator_get (it, type);
      if (attr && (type != PANGO_ATTR_STRIKETHROUGH || ((PangoAttrInt *) attr)->value))
        {
          *start = (int) attr->start_index;
          *end = (int) attr->end_index;
        }
    }
  while (*start < 0 && pango_attr_iterator_next (it));
  pango_attr_iterator_destroy (it);
}

/* ~~struck~~ (and GitHub's single ~) comes out struck through, and only that text. */
static void
test_strikethrough (void)
{
  const char *inputs[] = { "keep ~~gone~~ keep", "keep ~gone~ keep", "| a |\n|---|\n| keep ~~gone~~ keep |" };
  for (guint i = 0; i < G_N_ELEMENTS (inputs); i++)
    {
      g_autoptr (GPtrArray) blocks = hanashi_markdown_render (inputs[i], -1);
      g_assert_cmpuint (blocks->len, ==, 1);
      HanashiMarkdownBlock *b = block (blocks, 0);
      const char *markup = b->kind == HANASHI_MARKDOWN_BLOCK_TABLE ? hanashi_markdown_block_get_cell (b, 1, 0) : b->markup;
      int start, end;
      g_autofree char *text = NULL;
      attribute_range (markup, PANGO_ATTR_STRIKETHROUGH, &start, &end, &text);
      g_assert_cmpstr (text, ==, "keep gone keep");
      g_assert_cmpint (start, ==, 5);
      g_assert_cmpint (end, ==, 9);
    }
}

/* Task items show a ticked or empty box in place of the bullet. */
static void
test_task_list (void)
{
  g_autoptr (GPtrArray) blocks = hanashi_markdown_render ("- [x] done\n- [ ] open\n- [X] also done\n- plain\n\n1. [ ] first\n2. [x] second", -1);
  g_assert_cmpuint (blocks->len, ==, 1);
  g_assert_cmpstr (block (blocks, 0)->markup, ==,
                   "☑ done\n☐ open\n☑ also done\n• plain\n\n1. ☐ first\n2. ☑ second");
  /* "[x]" that is not at the start of an item stays text */
  g_autoptr (GPtrArray) text = hanashi_markdown_render ("- see [x] here", -1);
  g_assert_cmpstr (block (text, 0)->markup, ==, "• see [x] here");
}

/* TeX is shown as code: inline in the line, display math on a line of its own; dollar
 * amounts stay text. */
static void
test_math (void)
{
  static const struct { const char *markdown, *markup; } cases[] = {
    { "Area $\\pi r^2$ here", "Area <tt>\\pi r^2</tt> here" },
    { "Energy $$E = mc^2$$ follows", "Energy\n<tt>E = mc^2</tt>\nfollows" },
    { "$$\n\\frac{a}{b} < 1\n$$", "<tt>\\frac{a}{b} &lt; 1</tt>" },
    { "It costs $5 and $10 today", "It costs $5 and $10 today" },
    { "From $3 to $4.", "From $3 to $4." },
    { "**$x$** and `$y$`", "<b><tt>x</tt></b> and <tt>$y$</tt>" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GPtrArray) blocks = hanashi_markdown_render (cases[i].markdown, -1);
      g_assert_cmpuint (blocks->len, ==, 1);
      g_assert_cmpstr (block (blocks, 0)->markup, ==, cases[i].markup);
      assert_all_markup_valid (blocks);
    }
  /* The sidebar's preview keeps what was typed. */
  g_autofree char *plain = hanashi_markdown_to_plain ("It costs $5 and $10, or $x$", -1);
  g_assert_cmpstr (plain, ==, "It costs $5 and $10, or $x$");
}

/* The sidebar's preview: the words without the markup, on one line. */
static void
test_plain (void)
{
  static const struct { const char *markdown, *plain; } cases[] = {
    { "Use **slicing** or `reversed()`:\n\n```python\nnumbers = [1, 2]\nprint(numbers)\n```\n- a *new* list\n- in place",
      "Use slicing or reversed(): numbers = [1, 2] print(numbers) a new list in place" },
    { "# Title\nSome _text_ with a [link](https://example.com \"t\").", "Title Some text with a link." },
    { "1 < 2 & 3 > 2", "1 < 2 & 3 > 2" },
    { "> quoted\n> lines", "quoted lines" },
    { "| a | b |\n|---|---|\n| 1 | 2 |", "a b 1 2" },
    { "日本語の**太字**と`コード`", "日本語の太字とコード" },
    { "Use **slicing** or `rev", "Use slicing or `rev" },  /* a snippet cut in the middle */
    { "", "" },
    { "   \n\n  ", "" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree char *plain = hanashi_markdown_to_plain (cases[i].markdown, -1);
    g_assert_cmpstr (plain, ==, cases[i].plain);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/markdown/inline", test_inline);
  g_test_add_func ("/markdown/plain", test_plain);
  g_test_add_func ("/markdown/blocks", test_blocks);
  g_test_add_func ("/markdown/streaming-and-garbage", test_streaming_and_garbage);
  g_test_add_func ("/markdown/fuzz-regressions", test_fuzz_regressions);
  g_test_add_func ("/markdown/table", test_table);
  g_test_add_func ("/markdown/table-streaming", test_table_streaming);
  g_test_add_func ("/markdown/quote", test_quote);
  g_test_add_func ("/markdown/strikethrough", test_strikethrough);
  g_test_add_func ("/markdown/task-list", test_task_list);
  g_test_add_func ("/markdown/math", test_math);
  return g_test_run ();
}
