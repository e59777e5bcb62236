/* hanashi-application.h
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "hanashi-engine.h"
#include "hanashi-serving.h"
#include "hanashi-store.h"

G_BEGIN_DECLS

#define HANASHI_TYPE_APPLICATION (hanashi_application_get_type ())
G_DECLARE_FINAL_TYPE (HanashiApplication, hanashi_application, HANASHI, APPLICATION, AdwApplication)

HanashiApplication *hanashi_application_new (void);
/* The one engine of the process, made on first use, with the session cache limit from
 * GSettings kept up to date; every window and Preferences use it (borrowed). */
HanashiEngine      *hanashi_application_get_engine (HanashiApplication *self);
/* "Serve the loaded model" (hanashi-serving.h) over that engine, made with it; the action
 * "app.serve-enabled" is its setting.  NULL once the application has shut down.  Borrowed. */
HanashiServing     *hanashi_application_get_serving (HanashiApplication *self);

/* The conversation database of the process, opened on first use (writable if it can be,
 * else read-only so that earlier chats stay visible); every window shows it.  NULL while it
 * cannot be opened at all.  Borrowed. */
HanashiStore       *hanashi_application_get_store         (HanashiApplication *self);
/* Why the store is missing or read-only (a sentence naming the file), or NULL.  Borrowed. */
const GError       *hanashi_application_get_store_problem (HanashiApplication *self);
/* Try Again: reopens a read-only database now, a missing one on a worker thread. */
void                hanashi_application_retry_store       (HanashiApplication *self);
/* Before a message is stored: a database that could not be written is tried once more (its
 * folder may be writable again).  FALSE when it still cannot be written; the problem says
 * why. */
gboolean            hanashi_application_ensure_writable_store (HanashiApplication *self);
/* For a damaged database: asks once, in a dialog over the active window, whether to set
 * the file aside and start a fresh one.  Asked by itself when the first window is shown. */
void                hanashi_application_offer_fresh_store (HanashiApplication *self);

/* Signal "store-changed" (): the store or its problem changed (a reopen, a fresh start, the
 * lock went away); windows show hanashi_application_get_store() again. */

G_END_DECLS
