/* hanashi-code-block.h — a fenced code block of a reply: highlighted, selectable, with a
 * copy button
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define HANASHI_TYPE_CODE_BLOCK (hanashi_code_block_get_type ())
G_DECLARE_FINAL_TYPE (HanashiCodeBlock, hanashi_code_block, HANASHI, CODE_BLOCK, GtkWidget)

/* CSS: the block is a "card"; its text has the classes "code-block" and "monospace". */
GtkWidget  *hanashi_code_block_new       (void);
/* Shows @code highlighted as @language (a fence's info word such as "python"; NULL, empty
 * or unknown: plain).  Code that only grew since the last call (a streaming reply) is
 * highlighted from where it was, not from the start. */
void        hanashi_code_block_set_code  (HanashiCodeBlock *self,
                                          const char       *code,
                                          const char       *language);
const char *hanashi_code_block_get_code  (HanashiCodeBlock *self);

G_END_DECLS
