/* hanashi-engine-errors.h — engine errors as sentences in the user's language
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* A translated sentence for an error from HanashiEngine; errors of other domains, and
 * engine errors without a sentence of their own, keep their message. */
char *hanashi_describe_engine_error (const GError *error);

G_END_DECLS
