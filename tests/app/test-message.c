/* test-message.c — HanashiMessage properties and notifications (no display) */
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
    .generation_seconds = 0.0, .complete = TRUE,
  };
  g_autoptr(HanashiMessage) m = hanashi_message_new_from_stored (&stored);
  g_assert_true (hanashi_message_is_user (m));
  g_assert_cmpstr (hanashi_message_get_text (m), ==, "Hi");
  g_assert_cmpint (hanashi_message_get_token_count (m), ==, 2);
  g_assert_true (hanashi_message_get_complete (m));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/message/streaming", test_streaming);
  g_test_add_func ("/message/from-stored", test_from_stored);
  return g_test_run ();
}
