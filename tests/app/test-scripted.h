/* The start of the window tests that run on the engine's scripted backend (they link the
 * test seams of tests/support, which the remote tests do not).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "hanashi-test-seams.h"
#include "test-xdg.h"

/* The start of a window test's main on the engine's scripted backend: a private XDG tree,
 * then GTK.  test_xdg_cleanup () (where the test uses it) after g_test_run. */
static inline void
scripted_test_init (int *argc, char ***argv)
{
  test_xdg_setup ();
  hanashi_test_use_scripted_backend ();
  gtk_test_init (argc, argv, NULL);
  adw_init ();
}
