/* The parameter panel's lens in the window, on the scripted backend (which answers the
 * next-token request with deterministic rows and counts them): opened, it shows the next
 * token's candidates; moving top-k changes which bars are greyed and labelled "top-k";
 * temperature changes the after-chain probabilities; a grammar marks what it forbids;
 * none of that runs the model again, while a new message in the conversation does.
 * Criticals are fatal (gtk_test_init).  Also the user guide's screenshot of the lens.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <adwaita.h>
#include <string.h>

#include "hanashi-lens-view.h"
#include "hanashi-params.h"
#include "hanashi-test-seams.h"
#include "test-screenshot.h"
#include "test-widgets.h"
#include "test-scripted.h"
#include "test-lens-helpers.h"
#include "test-window-helpers.h"
#include "test-xdg.h"

/* The probability after the chain that bar @i shows ("TEXT  12.0% → 34.0%"). */
static double
after_chain (HanashiProbChart *chart, guint i)
{
  const char *label = hanashi_prob_chart_get_bar_label (chart, i);
  const char *arrow = strstr (label, "→ ");
  g_assert_nonnull (arrow);
  return g_ascii_strtod (arrow + strlen ("→ "), NULL);
}

/* The bars survive up to @kept; the rest are greyed and say which stage removed them. */
static void
assert_cut_at (HanashiProbChart *chart, guint kept, const char *stage)
{
  guint n = hanashi_prob_chart_get_n_bars (chart);
  g_assert_cmpuint (n, ==, HN_PROBS_MAX_K);
  g_autofree char *removed = g_strdup_printf ("removed by %s", stage);
  for (guint i = 0; i < n; i++)
    {
      gboolean greyed = hanashi_prob_chart_bar_is_removed (chart, i);
      g_assert_true (greyed == (i >= kept));
      if (greyed)
        g_assert_nonnull (strstr (hanashi_prob_chart_get_bar_label (chart, i), removed));
    }
}

static void
test_lens_follows_sliders (void)
{
  g_autoptr (HanashiApplication) app = make_app ();
  HanashiWindow *window = make_window (app, 1200, 900, TRUE);
  HanashiParamsPanel *panel = get_panel (window);
  gtk_widget_activate_action (GTK_WIDGET (window), "win.toggle-panel", NULL);
  HanashiLensView *lens = hanashi_params_panel_get_lens (panel);
  HanashiProbChart *chart = hanashi_lens_view_get_chart (lens);
  set_spin (panel, "top_k", 3);
  set_spin (panel, "top_p", 1.0);
  set_spin (panel, "min_p", 0.0);
  set_spin (panel, "temperature", 1.0);
  /* closed, the lens asks for nothing */
  run_for (400);
  guint runs = hanashi_test_scripted_next_logits_runs ();
  g_assert_cmpuint (hanashi_lens_view_get_n_recomputes (lens), ==, 0);

  /* opened by a click, as a user would */
  GtkWidget *expander = find_named (GTK_WIDGET (panel), "lens-expander");
  g_assert_nonnull (expander);
  gtk_expander_set_expanded (GTK_EXPANDER (expander), TRUE);
  wait_until (chart_filled, chart);
  g_assert_cmpuint (hanashi_test_scripted_next_logits_runs (), ==, runs + 1);
  runs = hanashi_test_scripted_next_logits_runs ();
  assert_cut_at (chart, 3, "top-k");
  /* the scripted candidates are named "tID" */
  g_assert_true (g_str_has_prefix (hanashi_prob_chart_get_bar_label (chart, 0), "t"));

  /* top-k 6: three more bars light up, at once */
  set_spin (panel, "top_k", 6);
  assert_cut_at (chart, 6, "top-k");
  double warm = after_chain (chart, 0);

  /* a colder temperature sharpens the survivors: the first gains, the last loses */
  double last_warm = after_chain (chart, 5);
  set_spin (panel, "temperature", 0.3);
  g_assert_cmpfloat (after_chain (chart, 0), >, warm);
  g_assert_cmpfloat (after_chain (chart, 5), <, last_warm);
  assert_cut_at (chart, 6, "top-k");

  /* greedy: only the first stays, the rest removed by temperature 0 */
  set_spin (panel, "temperature", 0.0);
  assert_cut_at (chart, 1, "temperature 0 (greedy)");
  set_spin (panel, "temperature", 1.0);

  /* mirostat: the lens says its cut depends on its state */
  GtkWidget *note = find_named (GTK_WIDGET (panel), "lens-note");
  g_assert_false (gtk_widget_get_visible (note));
  gtk_drop_down_set_selected (GTK_DROP_DOWN (find_named (GTK_WIDGET (panel), "mirostat")), 2);
  g_assert_true (gtk_widget_get_visible (note));
  g_assert_true (hanashi_prob_chart_bar_is_removed (chart, HN_PROBS_MAX_K - 1));
  g_assert_nonnull (strstr (hanashi_prob_chart_get_bar_label (chart, HN_PROBS_MAX_K - 1), "removed by mirostat"));
  gtk_drop_down_set_selected (GTK_DROP_DOWN (find_named (GTK_WIDGET (panel), "mirostat")), 0);
  g_assert_false (gtk_widget_get_visible (note));

  /* all those moves: no model run */
  run_for (600);
  g_assert_cmpuint (hanashi_test_scripted_next_logits_runs (), ==, runs);
  g_assert_cmpuint (hanashi_lens_view_get_n_recomputes (lens), >=, 6);

  /* a grammar: its allowed set comes from the engine (one run), then the bars it forbids
   * (the scripted grammar allows even ids) are greyed with "grammar" */
  set_spin (panel, "top_k", 0);
  gtk_drop_down_set_selected (GTK_DROP_DOWN (find_named (GTK_WIDGET (panel), "grammar-mode")),
                              HANASHI_GRAMMAR_MODE_CUSTOM);
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (GTK_TEXT_VIEW (find_named (GTK_WIDGET (panel), "gbnf-editor"))),
                            "root ::= \"a\"", -1);
  runs_awaited = runs + 1;
  wait_until (runs_reached, NULL);
  run_for (300);
  guint forbidden = 0;
  for (guint i = 0; i < hanashi_prob_chart_get_n_bars (chart); i++)
    {
      const char *label = hanashi_prob_chart_get_bar_label (chart, i);
      unsigned id = (unsigned) g_ascii_strtoull (label + 1, NULL, 10);
      gboolean by_grammar = strstr (label, "removed by grammar") != NULL;
      g_assert_true (by_grammar == (id % 2 == 1));
      forbidden += by_grammar;
    }
  g_assert_cmpuint (forbidden, >, 0);
  gtk_drop_down_set_selected (GTK_DROP_DOWN (find_named (GTK_WIDGET (panel), "grammar-mode")), HANASHI_GRAMMAR_MODE_NONE);
  run_for (400);
  runs = hanashi_test_scripted_next_logits_runs ();

  /* the conversation changes: the lens follows its next token, with one run */
  g_autofree char *before = g_strdup (hanashi_prob_chart_get_bar_label (chart, 0));
  send_text (window, "Tell me a story");
  wait_until (reply_done, window);
  runs_awaited = runs + 1;
  wait_until (runs_reached, NULL);
  run_for (300);
  g_assert_cmpstr (hanashi_prob_chart_get_bar_label (chart, 0), !=, before);
  set_spin (panel, "top_k", 8);
  set_spin (panel, "temperature", 0.7);
  test_screenshot (GTK_WIDGET (window), "lens");

  /* closed: nothing more is fetched */
  gtk_expander_set_expanded (GTK_EXPANDER (expander), FALSE);
  runs = hanashi_test_scripted_next_logits_runs ();
  hanashi_composer_set_text (get_composer (window), "a draft");
  run_for (600);
  g_assert_cmpuint (hanashi_test_scripted_next_logits_runs (), ==, runs);
  wait_until (no_undo_toast, window);
  gtk_window_destroy (GTK_WINDOW (window));
}

int
main (int argc, char **argv)
{
  scripted_test_init (&argc, &argv);
  write_scripted_model (g_get_user_data_dir ());
  g_test_add_func ("/Hanashi/Lens/follows-sliders", test_lens_follows_sliders);
  int status = g_test_run ();
  g_free (model_path);
  return status;
}
