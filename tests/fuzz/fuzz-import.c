/* libFuzzer target: the conversation JSON importer (the sidebar's Import).  Whatever it
 * accepts must export again, and that export must import to the same export (a fixed
 * point), and render as Markdown.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hanashi-conversation-io.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  GError *error = NULL;
  HanashiConversationData *parsed = hanashi_conversation_import_json_data ((const char *) data, size, &error);
  if (parsed == NULL) {
    if (error == NULL || error->message == NULL || error->message[0] == '\0') {
      fprintf (stderr, "import failed without a message\n");
      abort ();
    }
    g_error_free (error);
    return 0;
  }
  char *json = hanashi_conversation_data_to_json (parsed);
  char *markdown = hanashi_conversation_data_to_markdown (parsed);
  HanashiConversationData *again = hanashi_conversation_import_json_data (json, strlen (json), &error);
  if (again == NULL) {
    fprintf (stderr, "an export does not import again: %s\n%s\n", error->message, json);
    abort ();
  }
  char *json2 = hanashi_conversation_data_to_json (again);
  if (strcmp (json, json2) != 0) {
    fprintf (stderr, "export → import → export changed the text:\n%s\n---\n%s\n", json, json2);
    abort ();
  }
  g_free (json);
  g_free (json2);
  g_free (markdown);
  hanashi_conversation_data_free (parsed);
  hanashi_conversation_data_free (again);
  return 0;
}
