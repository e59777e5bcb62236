/* test-message.c — HanashiMessage properties and notifications (no display)
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hanashi-message.h"

static void
count_notify (GObject *object, GParamSpec *pspec, gpointer data)
{
  (void) object; (void) pspec;
  (*(int *) data)++;
}

static void
test_streaming (void)
{
  g_autoptr(HanashiMessage) m = hanashi_message_new (7, "assistant", "");
  int text_notifies = 0;
  g_signal_connect (m, "notify::text", G_CALLBACK (count_notify), &text_notifies);
  hanashi_message_set_complete (m, FALSE);
  hanashi_message_append_text (m, "Hel");
  hanashi_message_append_text (m, "");
  hanashi_message_append_text (m, "lo");
  g_assert_cmpstr (hanashi_message_get_text (m), ==, "Hello");
  g_assert_cmpint (text_notifies, ==, 2);
  hanashi_message_set_text (m, "Hello");
  g_assert_cmpint (text_notifies, ==, 2);
  g_assert_false (hanashi_message_get_complete (m));
  g_assert_false (hanashi_message_is_user (m));
  g_assert_cmpint (hanashi_message_get_id (m), ==, 7);

  g_assert_cmpfloat (hanashi_message_get_tokens_per_second (m), ==, 0.0);
  hanashi_message_set_stats (m, 20, 0.5);
  g_assert_cmpfloat_with_epsilon (hanashi_message_get_tokens_per_second (m), 40.0, 1e-9);
}

static void
test_from_stored (void)
{
  HanashiStoredMessage stored = {
    .id = 3, .role = (char *) "user", .text = (char *) "Hi", .token_count = 2,
    .generation_seconds = 0.0, .complete = TRUE, .thinking = (char *) "hm", .thinking_seconds = 2.5,
  };
  g_autoptr(HanashiMessage) m = hanashi_message_new_from_stored (&stored);
  g_assert_true (hanashi_message_is_user (m));
  g_assert_cmpstr (hanashi_message_get_text (m), ==, "Hi");
  g_assert_cmpint (hanashi_message_get_token_count (m), ==, 2);
  g_assert_true (hanashi_message_get_complete (m));
  g_assert_cmpstr (hanashi_message_get_thinking (m), ==, "hm");
  g_assert_cmpfloat (hanashi_message_get_thinking_seconds (m), ==, 2.5);
}

/* Output is split into thinking and answer; "thinking-active" rises and falls once. */
static void
test_thinking_output (void)
{
  g_autoptr(HanashiMessage) m = hanashi_message_new (8, "assistant", "");
  int active_notifies = 0;
  g_signal_connect (m, "notify::thinking-active", G_CALLBACK (count_notify), &active_notifies);
  hanashi_message_begin_output (m, HANASHI_THINK_START_ANSWER);
  hanashi_message_append_output (m, "<think>\nstep one");
  g_assert_true (hanashi_message_get_thinking_active (m));
  g_assert_cmpstr (hanashi_message_get_thinking (m), ==, "step one");
  hanashi_message_append_output (m, "\n</thi");
  g_assert_true (hanashi_message_get_thinking_active (m));
  g_usleep (2000);
  hanashi_message_append_output (m, "nk>\n\nDone.");
  g_assert_false (hanashi_message_get_thinking_active (m));
  g_assert_cmpstr (hanashi_message_get_thinking (m), ==, "step one");
  g_assert_cmpstr (hanashi_message_get_text (m), ==, "Done.");
  g_assert_cmpfloat (hanashi_message_get_thinking_seconds (m), >=, 0.002);
  hanashi_message_end_output (m);
  g_assert_cmpint (active_notifies, ==, 2);
  /* After the output, appending is plain text again. */
  hanashi_message_append_output (m, " <think>");
  g_assert_cmpstr (hanashi_message_get_text (m), ==, "Done. <think>");

  /* Only the end marker (the prompt opened the thinking, unknown to us), with a template
   * that knows thinking: it moves over.  Without one it stays text. */
  g_autoptr(HanashiMessage) plain = hanashi_message_new (11, "assistant", "");
  hanashi_message_begin_output (plain, HANASHI_THINK_START_ANSWER);
  hanashi_message_append_output (plain, "Close it with </think>.");
  hanashi_message_end_output (plain);
  g_assert_cmpstr (hanashi_message_get_text (plain), ==, "Close it with </think>.");
  g_assert_cmpstr (hanashi_message_get_thinking (plain), ==, "");
  g_autoptr(HanashiMessage) r1 = hanashi_message_new (9, "assistant", "");
  hanashi_message_begin_output (r1, HANASHI_THINK_START_AUTO);
  hanashi_message_append_output (r1, "pondering");
  g_assert_cmpstr (hanashi_message_get_text (r1), ==, "pondering");
  hanashi_message_append_output (r1, "</think>Answer");
  g_assert_cmpstr (hanashi_message_get_text (r1), ==, "Answer");
  g_assert_cmpstr (hanashi_message_get_thinking (r1), ==, "pondering");
  g_assert_false (hanashi_message_get_thinking_active (r1));
  hanashi_message_end_output (r1);

  /* Stopped while thinking: it ends there, no answer. */
  g_autoptr(HanashiMessage) cut = hanashi_message_new (10, "assistant", "");
  hanashi_message_begin_output (cut, HANASHI_THINK_START_INSIDE);
  /* Nothing yet: the section appears with the first words. */
  g_assert_false (hanashi_message_get_thinking_active (cut));
  hanashi_message_append_output (cut, "half a thou");
  g_assert_true (hanashi_message_get_thinking_active (cut));
  hanashi_message_end_output (cut);
  g_assert_false (hanashi_message_get_thinking_active (cut));
  g_assert_cmpstr (hanashi_message_get_thinking (cut), ==, "half a thou");
  g_assert_cmpstr (hanashi_message_get_text (cut), ==, "");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/message/streaming", test_streaming);
  g_test_add_func ("/message/from-stored", test_from_stored);
  g_test_add_func ("/message/thinking-output", test_thinking_output);
  return g_test_run ();
}
