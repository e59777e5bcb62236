/* main.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi"

#include "config.h"

#include <glib/gi18n.h>
#include <locale.h>

#include "hanashi-application.h"

int
main (int   argc,
      char *argv[])
{
  g_autoptr (HanashiApplication) app = NULL;

  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);

  app = hanashi_application_new ();
  return g_application_run (G_APPLICATION (app), argc, argv);
}
