/* Tests for hn-reasoning: splitting a reasoning model's output into thinking and answer,
 * however the output is cut into pieces.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-reasoning.h"
#include "hn-chat-template.h"
#include "hn-json.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  GString *thinking, *answer;
  guint moved;   /* HN_THINK_PART_ANSWER_WAS_THINKING events */
} Parts;

static void
collect (void *data, HnThinkPart part, const char *text, size_t len)
{
  Parts *p = data;
  switch (part)
    {
    case HN_THINK_PART_THINKING: g_string_append_len (p->thinking, text, (gssize) len); break;
    case HN_THINK_PART_ANSWER: g_string_append_len (p->answer, text, (gssize) len); break;
    case HN_THINK_PART_ANSWER_WAS_THINKING:
      g_assert_cmpuint (len, ==, 0);
      g_string_append (p->thinking, p->answer->str);
      g_string_truncate (p->answer, 0);
      p->moved++;
      break;
    }
}

/* Feeds @text cut at the given byte offsets (ascending, ending with -1). */
static Parts
split_at (HnThinkStart start, const char *text, const int *cuts)
{
  Parts p = { g_string_new (NULL), g_string_new (NULL), 0 };
  HnThinkSplitter s;
  hn_think_splitter_init (&s, start);
  size_t from = 0, len = strlen (text);
  for (const int *c = cuts; c && *c >= 0; c++)
    {
      hn_think_splitter_feed (&s, text + from, (size_t) *c - from, collect, &p);
      from = (size_t) *c;
    }
  hn_think_splitter_feed (&s, text + from, len - from, collect, &p);
  hn_think_splitter_finish (&s, collect, &p);
  return p;
}

static void
parts_clear (Parts *p)
{
  g_string_free (p->thinking, TRUE);
  g_string_free (p->answer, TRUE);
}

/* The split of @text is @thinking / @answer, whole, byte by byte and cut at every point. */
static void
check (HnThinkStart start, const char *text, const char *thinking, const char *answer)
{
  int len = (int) strlen (text);
  Parts whole = split_at (start, text, NULL);
  if (g_strcmp0 (whole.thinking->str, thinking) != 0 || g_strcmp0 (whole.answer->str, answer) != 0)
    g_error ("\"%s\" (start %d): thinking \"%s\" answer \"%s\", expected \"%s\" / \"%s\"",
             text, start, whole.thinking->str, whole.answer->str, thinking, answer);
  parts_clear (&whole);
  int *bytes = g_new (int, len + 1);
  for (int i = 0; i < len; i++)
    bytes[i] = i + 1;
  bytes[len] = -1;
  Parts one = split_at (start, text, len > 0 ? bytes : NULL);
  g_assert_cmpstr (one.thinking->str, ==, thinking);
  g_assert_cmpstr (one.answer->str, ==, answer);
  parts_clear (&one);
  g_free (bytes);
  for (int at = 1; at < len; at++)
    {
      int cuts[] = { at, -1 };
      Parts two = split_at (start, text, cuts);
      if (g_strcmp0 (two.thinking->str, thinking) != 0 || g_strcmp0 (two.answer->str, answer) != 0)
        g_error ("\"%s\" cut at %d: thinking \"%s\" answer \"%s\"", text, at, two.thinking->str, two.answer->str);
      parts_clear (&two);
    }
}

static void
test_markers (void)
{
  check (HN_THINK_START_ANSWER, "<think>add 2 and 2</think>\n\nIt is **4**.", "add 2 and 2", "It is **4**.");
  /* Qwen3 writes newlines around both; leading whitespace of each part goes. */
  check (HN_THINK_START_ANSWER, "\n<think>\nfirst\nsecond\n</think>\n\nAnswer", "first\nsecond\n", "Answer");
  check (HN_THINK_START_ANSWER, "<thinking>hmm</thinking>ok", "hmm", "ok");
  check (HN_THINK_START_ANSWER, "<seed:think>s</seed:think>a", "s", "a");
  check (HN_THINK_START_ANSWER, "\xe2\x97\x81think\xe2\x96\xb7k\xe2\x97\x81/think\xe2\x96\xb7\xe6\x97\xa5",
         "k", "\xe6\x97\xa5");
  /* A pair closes with its own marker only. */
  check (HN_THINK_START_ANSWER, "<think>a</thinking>b</think>c", "a</thinking>b", "c");
  /* No thinking, and a tag inside an answer is text. */
  check (HN_THINK_START_ANSWER, "Plain answer.", "", "Plain answer.");
  check (HN_THINK_START_ANSWER, "Use <think> and </think> tags.", "", "Use <think> and </think> tags.");
  check (HN_THINK_START_ANSWER, "<thin", "", "<thin");
  check (HN_THINK_START_ANSWER, "<b>bold</b>", "", "<b>bold</b>");
  /* After the thinking, markers are text. */
  check (HN_THINK_START_ANSWER, "<think>x</think>y</think><think>z", "x", "y</think><think>z");
  /* Stopped while thinking: all of it is thinking, a held-back half marker too. */
  check (HN_THINK_START_ANSWER, "<think>still going</thi", "still going</thi", "");
  check (HN_THINK_START_ANSWER, "<think>", "", "");
  check (HN_THINK_START_ANSWER, "", "", "");
}

static void
test_prompt_opened (void)
{
  /* DeepSeek-R1's generation prompt opens the thinking: the output has only the end. */
  check (HN_THINK_START_INSIDE, "\nreasoning here\n</think>\n\nThe answer", "reasoning here\n", "The answer");
  check (HN_THINK_START_INSIDE, "no end yet", "no end yet", "");
  /* Without that knowledge the answer is taken for thinking only when the end comes. */
  check (HN_THINK_START_ANSWER, "reasoning</think>answer", "", "reasoning</think>answer");
  check (HN_THINK_START_AUTO, "reasoning</think>answer", "reasoning", "answer");
  check (HN_THINK_START_AUTO, "just an answer", "", "just an answer");
  check (HN_THINK_START_AUTO, "<think>a</think>b</think>c", "a", "b</think>c");
  check (HN_THINK_START_AUTO, "r</think>a</think>b", "r", "a</think>b");
  Parts p = split_at (HN_THINK_START_AUTO, "r</think>a", NULL);
  g_assert_cmpuint (p.moved, ==, 1);
  parts_clear (&p);

  const char *r1 = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c><think>\n";
  g_assert_true (hn_think_prompt_opens (r1, strlen (r1)));
  const char *qwen_on = "<|im_start|>assistant\n";
  const char *qwen_off = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  g_assert_false (hn_think_prompt_opens (qwen_on, strlen (qwen_on)));
  g_assert_false (hn_think_prompt_opens (qwen_off, strlen (qwen_off)));
  g_assert_false (hn_think_prompt_opens ("", 0));

  const char *r1_tmpl = "{% set content = content.split('</think>')[-1] %}";
  g_assert_true (hn_think_mentions_close (r1_tmpl, strlen (r1_tmpl)));
  g_assert_true (hn_think_mentions_close ("x</thinking>", 12));
  g_assert_false (hn_think_mentions_close ("<think> only", 12));
  g_assert_false (hn_think_mentions_close ("</think", 7));
  g_assert_false (hn_think_mentions_close (NULL, 0));
}

static void
test_state (void)
{
  HnThinkSplitter s;
  Parts p = { g_string_new (NULL), g_string_new (NULL), 0 };
  hn_think_splitter_init (&s, HN_THINK_START_ANSWER);
  g_assert_false (hn_think_splitter_thinking (&s));
  g_assert_false (hn_think_splitter_answering (&s));
  hn_think_splitter_feed (&s, " <thi", 5, collect, &p);
  g_assert_false (hn_think_splitter_thinking (&s));
  hn_think_splitter_feed (&s, "nk>", 3, collect, &p);
  g_assert_true (hn_think_splitter_thinking (&s));
  hn_think_splitter_feed (&s, "x</think>", 9, collect, &p);
  g_assert_false (hn_think_splitter_thinking (&s));
  g_assert_true (hn_think_splitter_answering (&s));
  parts_clear (&p);
}

/* Random outputs made of markers, near-markers and text: any cut gives the whole's split. */
static void
test_random_cuts (void)
{
  static const char *const pieces[] = {
    "<think>", "</think>", "<thinking>", "</thinking>", "<", "</", "<th", "</thi", "think", ">", " ", "\n",
    "a", "word", "\xe2\x97\x81", "\xe2\x97\x81think\xe2\x96\xb7", "\xe2\x97\x81/think\xe2\x96\xb7", "<seed:think>",
  };
  GRand *rnd = g_rand_new_with_seed (17);
  for (int iter = 0; iter < 2000; iter++)
    {
      GString *text = g_string_new (NULL);
      int n = g_rand_int_range (rnd, 0, 12);
      for (int k = 0; k < n; k++)
        g_string_append (text, pieces[g_rand_int_range (rnd, 0, G_N_ELEMENTS (pieces))]);
      HnThinkStart start = (HnThinkStart) g_rand_int_range (rnd, 0, 3);
      Parts whole = split_at (start, text->str, NULL);
      int cuts[5], nc = 0, at = 0;
      while (nc < 4 && at < (int) text->len)
        {
          at += g_rand_int_range (rnd, 1, 6);
          if (at < (int) text->len)
            cuts[nc++] = at;
        }
      cuts[nc] = -1;
      Parts cut = split_at (start, text->str, cuts);
      g_assert_cmpstr (cut.thinking->str, ==, whole.thinking->str);
      g_assert_cmpstr (cut.answer->str, ==, whole.answer->str);
      /* Nothing is lost but markers and leading whitespace. */
      g_assert_cmpuint (whole.thinking->len + whole.answer->len, <=, text->len);
      parts_clear (&whole);
      parts_clear (&cut);
      g_string_free (text, TRUE);
    }
  g_rand_free (rnd);
}

/* The real templates in the test data: DeepSeek-R1's generation prompt opens the thinking,
 * Qwen2.5's and Llama 3's do not.  -1: no test data. */
static int
template_opens_thinking (const char *name)
{
  const char *dir = g_getenv ("HANASHI_TESTDATA");
  g_autofree char *path = g_build_filename (dir ? dir : "../shared/testdata", "templates", name, NULL);
  g_autofree char *text = NULL;
  gsize len = 0;
  if (!g_file_get_contents (path, &text, &len, NULL))
    return -1;
  HnJson *doc = hn_json_parse (text, len, NULL);
  g_assert_nonnull (doc);
  const HnJson *src = hn_json_object_get (doc, "template");
  HnChatTemplate *t = hn_chat_template_new (hn_json_get_string (src), hn_json_get_string_len (src), NULL);
  g_assert_nonnull (t);
  const char *msgs = "[{\"role\":\"user\",\"content\":\"Hi\"}]";
  HnJson *messages = hn_json_parse (msgs, strlen (msgs), NULL);
  HnChatRenderOptions o = { .messages = messages, .add_generation_prompt = true,
                            .bos_token = hn_json_get_string (hn_json_object_get (doc, "bos_token")),
                            .eos_token = hn_json_get_string (hn_json_object_get (doc, "eos_token")) };
  size_t out_len = 0;
  char *prompt = hn_chat_template_render (t, &o, &out_len, NULL);
  g_assert_nonnull (prompt);
  int opens = hn_think_prompt_opens (prompt, out_len);
  free (prompt);
  hn_json_free (messages);
  hn_chat_template_free (t);
  hn_json_free (doc);
  return opens;
}

static void
test_real_templates (void)
{
  int r1 = template_opens_thinking ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.json");
  if (r1 < 0)
    {
      g_test_skip ("no test data");
      return;
    }
  g_assert_cmpint (r1, ==, TRUE);
  g_assert_cmpint (template_opens_thinking ("Qwen-Qwen2.5-7B-Instruct.json"), ==, FALSE);
  g_assert_cmpint (template_opens_thinking ("meta-llama-Llama-3.1-8B-Instruct.json"), ==, FALSE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/reasoning/markers", test_markers);
  g_test_add_func ("/reasoning/prompt-opened", test_prompt_opened);
  g_test_add_func ("/reasoning/state", test_state);
  g_test_add_func ("/reasoning/random-cuts", test_random_cuts);
  g_test_add_func ("/reasoning/real-templates", test_real_templates);
  return g_test_run ();
}
