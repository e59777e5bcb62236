/* Chat window costs: opening a long conversation, and one streamed token into a long
 * Markdown reply and into a long code block (parse + update of the row's widgets +
 * layout).  Needs a display
 * (xvfb-run -a meson test -C build --benchmark --suite bench chat-view --verbose).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>

#include "hanashi-application.h"
#include "hanashi-chat-view.h"
#include "hanashi-message.h"
#include "hanashi-window.h"
#include "../app/test-xdg.h"
#include "hanashi-test-seams.h"

#define ROUNDS 5

static int
compare_doubles (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static double
median (double *values, int n)
{
  qsort (values, n, sizeof *values, compare_doubles);
  return values[n / 2];
}

/* Runs everything pending, including the next frame's layout and drawing. */
static void
flush (GtkWidget *window)
{
  GdkFrameClock *clock = gtk_widget_get_frame_clock (window);
  gint64 start = gdk_frame_clock_get_frame_counter (clock);
  gtk_widget_queue_draw (window);
  while (gdk_frame_clock_get_frame_counter (clock) < start + 1)
    g_main_context_iteration (NULL, TRUE);
  while (g_main_context_iteration (NULL, FALSE))
    ;
}

static void
bench_open_conversation (HanashiWindow *window, guint n)
{
  HanashiStore *store = hanashi_window_get_store (window);
  gint64 conversation = hanashi_store_create_conversation (store, "bench", NULL);
  gint64 parent = 0;
  double times[ROUNDS], sync_times[ROUNDS];

  for (guint i = 0; i < n; i++)
    {
      g_autofree char *text = g_strdup_printf ("Message %u with **some** text and `code` in it.", i);
      parent = hanashi_store_add_message (store, conversation, parent, 0, i % 2 ? "assistant" : "user", text, TRUE, NULL);
    }
  for (int r = 0; r < ROUNDS; r++)
    {
      hanashi_window_load_conversation (window, 0);
      flush (GTK_WIDGET (window));
      gint64 start = g_get_monotonic_time ();
      hanashi_window_load_conversation (window, conversation);
      sync_times[r] = (g_get_monotonic_time () - start) / 1000.0;
      flush (GTK_WIDGET (window));
      times[r] = (g_get_monotonic_time () - start) / 1000.0;
    }
  g_print ("open a %u-message conversation: read + build the list %.1f ms, until drawn %.1f ms (medians of %d)\n",
           n, median (sync_times, ROUNDS), median (times, ROUNDS), ROUNDS);
}

static HanashiChatView *
find_chat_view (HanashiWindow *window)
{
  HanashiChatView *view = NULL;
  for (GtkWidget *child = GTK_WIDGET (window); child && !view; )
    {
      /* depth-first search for the chat view */
      if (HANASHI_IS_CHAT_VIEW (child))
        view = HANASHI_CHAT_VIEW (child);
      else if (gtk_widget_get_first_child (child))
        child = gtk_widget_get_first_child (child);
      else
        {
          while (child && !gtk_widget_get_next_sibling (child))
            child = gtk_widget_get_parent (child);
          child = child ? gtk_widget_get_next_sibling (child) : NULL;
        }
    }
  g_assert_nonnull (view);
  return view;
}

static void
bench_stream (HanashiWindow *window, int n_tokens)
{
  HanashiChatView *view = find_chat_view (window);
  GListStore *store = g_list_store_new (HANASHI_TYPE_MESSAGE);
  g_autoptr (HanashiMessage) reply = hanashi_message_new (1, "assistant", "");
  double *times = g_new (double, n_tokens);
  GtkWidget *w = GTK_WIDGET (window);

  hanashi_chat_view_set_model (view, G_LIST_MODEL (store));
  g_list_store_append (store, reply);
  flush (w);
  for (int i = 0; i < n_tokens; i++)
    {
      /* Paragraphs of 40 words, a code block every 200 tokens: a typical long answer. */
      const char *piece = i % 200 == 100 ? "\n\n```c\nint x = 1;\n```\n\n" : i % 40 == 39 ? " end.\n\n" : " word";
      gint64 start = g_get_monotonic_time ();
      hanashi_message_append_text (reply, piece);
      /* Layout of the grown row is part of the cost: measure it at the list's width. */
      int min, nat;
      gtk_widget_measure (GTK_WIDGET (view), GTK_ORIENTATION_VERTICAL, gtk_widget_get_width (GTK_WIDGET (view)),
                          &min, &nat, NULL, NULL);
      times[i] = (g_get_monotonic_time () - start) / 1000.0;
      if (i % 10 == 0)
        flush (w);
    }
  for (int upto = 250; upto <= n_tokens; upto *= 2)
    {
      double window_times[50];
      for (int k = 0; k < 50; k++)
        window_times[k] = times[upto - 50 + k];
      g_print ("one token into a %d-token reply (Markdown, row update, measure): median %.2f ms\n",
               upto, median (window_times, 50));
    }
  hanashi_chat_view_set_model (view, hanashi_window_get_messages (window));
  g_object_unref (store);
  g_free (times);
}

/* One streamed token into a reply that is a single long C code block, the worst case for
 * a code block: its text, highlighting and layout grow with every token.  Four tokens a
 * line. */
static void
bench_stream_code (HanashiWindow *window, int n_lines)
{
  HanashiChatView *view = find_chat_view (window);
  GListStore *store = g_list_store_new (HANASHI_TYPE_MESSAGE);
  g_autoptr (HanashiMessage) reply = hanashi_message_new (1, "assistant", "Here:\n\n```c\n");
  int n_tokens = 4 * n_lines;
  double *times = g_new (double, n_tokens);
  GtkWidget *w = GTK_WIDGET (window);

  hanashi_chat_view_set_model (view, G_LIST_MODEL (store));
  g_list_store_append (store, reply);
  flush (w);
  for (int i = 0; i < n_tokens; i++)
    {
      const char *pieces[] = { "  total", " += values[i]", " * 2;", "  /* twice */\n" };
      gint64 start = g_get_monotonic_time ();
      hanashi_message_append_text (reply, pieces[i % 4]);
      int min, nat;
      gtk_widget_measure (GTK_WIDGET (view), GTK_ORIENTATION_VERTICAL, gtk_widget_get_width (GTK_WIDGET (view)),
                          &min, &nat, NULL, NULL);
      times[i] = (g_get_monotonic_time () - start) / 1000.0;
      if (i % 10 == 0)
        flush (w);
    }
  for (int upto = 50; upto <= n_lines; upto *= 2)
    {
      double window_times[40];
      for (int k = 0; k < 40; k++)
        window_times[k] = times[4 * upto - 40 + k];
      g_print ("one token into a %d-line code block (Markdown, highlighting, row update, measure): median %.2f ms\n",
               upto, median (window_times, 40));
    }
  hanashi_chat_view_set_model (view, hanashi_window_get_messages (window));
  g_object_unref (store);
  g_free (times);
}

int
main (int argc, char **argv)
{
  test_xdg_setup ();
  hanashi_test_use_scripted_backend ();
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  gtk_init ();
  adw_init ();

  g_autoptr (HanashiApplication) app = hanashi_application_new ();
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, NULL));
  g_autofree char *model = g_build_filename (g_get_user_data_dir (), "bench.gguf", NULL);
  g_assert_true (g_file_set_contents (model, "GGUF", 4, NULL));

  HanashiWindow *window = hanashi_window_new (app);
  gtk_window_set_default_size (GTK_WINDOW (window), 1100, 760);
  gtk_window_present (GTK_WINDOW (window));
  while (!gtk_widget_get_mapped (GTK_WIDGET (window)))
    g_main_context_iteration (NULL, TRUE);
  g_autoptr (GFile) file = g_file_new_for_path (model);
  hanashi_window_open_model (window, file);
  while (hanashi_engine_get_model_info (hanashi_window_get_engine (window)) == NULL)
    g_main_context_iteration (NULL, TRUE);

  bench_open_conversation (window, 200);
  bench_open_conversation (window, 2000);
  bench_stream (window, 2000);
  bench_stream_code (window, 200);
  gtk_window_destroy (GTK_WINDOW (window));
  return 0;
}
