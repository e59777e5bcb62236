/* test-markdown.c — Markdown to Pango markup and code blocks (no display)
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
  g_assert_cmpuint (blocks->len, ==, 3);
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

  HanashiMarkdownBlock *rest = block (blocks, 2);
  g_assert_nonnull (strstr (rest->markup, "<tt>│ <b>a</b> │ <b>b</b> │\n│ 1 │ 2 │</tt>"));
  g_assert_nonnull (strstr (rest->markup, "<i>quoted"));
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
  };
  for (gsize i = 0; i < G_N_ELEMENTS (inputs); i++) {
    g_autoptr (GPtrArray) blocks = hanashi_markdown_render (inputs[i], -1);
    for (guint k = 0; k < blocks->len; k++) {
      HanashiMarkdownBlock *b = blocks->pdata[k];
      if (b->kind == HANASHI_MARKDOWN_BLOCK_TEXT)
        assert_label_markup (b->markup);
    }
  }
  /* the quote goes on in italics after its code block */
  g_autoptr (GPtrArray) quote = hanashi_markdown_render (inputs[2], -1);
  g_assert_cmpuint (quote->len, ==, 3);
  g_assert_cmpstr (((HanashiMarkdownBlock *) quote->pdata[0])->markup, ==, "<i>quote</i>");
  g_assert_cmpstr (((HanashiMarkdownBlock *) quote->pdata[1])->code, ==, "code");
  g_assert_cmpstr (((HanashiMarkdownBlock *) quote->pdata[2])->markup, ==, "<i>after</i>");
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
  return g_test_run ();
}
