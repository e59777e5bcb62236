/* hanashi-composer.h: where the user writes: a multi-line entry with Send/Stop and the
 * conversation's system prompt.
 *
 * Enter activates "win.send" and Shift+Enter inserts a new line; the Send button turns
 * into Stop ("win.stop") while a reply is being written.  The window reads the text,
 * and clears it only once the message is safely stored.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define HANASHI_TYPE_COMPOSER (hanashi_composer_get_type ())
G_DECLARE_FINAL_TYPE (HanashiComposer, hanashi_composer, HANASHI, COMPOSER, GtkWidget)

HanashiComposer *hanashi_composer_new               (void);
char            *hanashi_composer_dup_text          (HanashiComposer *self);
void             hanashi_composer_set_text          (HanashiComposer *self,
                                                     const char      *text);
GtkTextView     *hanashi_composer_get_text_view     (HanashiComposer *self);
void             hanashi_composer_set_generating    (HanashiComposer *self,
                                                     gboolean         generating);
gboolean         hanashi_composer_get_generating    (HanashiComposer *self);
/* Editing an earlier message: shows a note with a Cancel button ("editing" property). */
void             hanashi_composer_set_editing       (HanashiComposer *self,
                                                     gboolean         editing);
gboolean         hanashi_composer_get_editing       (HanashiComposer *self);
const char      *hanashi_composer_get_system_prompt (HanashiComposer *self);
/* Does not emit "system-prompt-changed". */
void             hanashi_composer_set_system_prompt (HanashiComposer *self,
                                                     const char      *prompt);

/* The chat's Think switch, shown only when the model's template has enable_thinking. */
void             hanashi_composer_set_thinking_available (HanashiComposer *self,
                                                          gboolean         available);
gboolean         hanashi_composer_get_thinking_available (HanashiComposer *self);
gboolean         hanashi_composer_get_thinking      (HanashiComposer *self);
/* Does not emit "thinking-changed". */
void             hanashi_composer_set_thinking      (HanashiComposer *self,
                                                     gboolean         thinking);
GtkToggleButton *hanashi_composer_get_think_button  (HanashiComposer *self);

/* Signals:
 *   "system-prompt-changed" ()  the user edited the system prompt
 *   "edit-cancelled"        ()  the user left editing mode
 *   "thinking-changed"      ()  the user flipped the Think switch */

G_END_DECLS
