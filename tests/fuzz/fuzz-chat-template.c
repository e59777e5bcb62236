/* libFuzzer target: the chat-template parser and renderer over a fixed conversation, with
 * tight limits so that a template looping for long is cut off, not timed out.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hn-chat-template.h"
#include "hn-json.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static HnJson *messages;
  if (messages == NULL) {
    static const char conversation[] =
      "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
      " {\"role\": \"user\", \"content\": \"Hi <b>\\u3042</b> {{ x }}\"},"
      " {\"role\": \"assistant\", \"content\": \"Hello!\", \"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"a\": 1}}]},"
      " {\"role\": \"user\", \"content\": [1, 2.5, null, true]}]";
    HnError err = { 0 };
    messages = hn_json_parse (conversation, strlen (conversation), &err);
    if (messages == NULL)
      abort ();
  }
  HnError err = { 0 };
  HnChatTemplate *t = hn_chat_template_new ((const char *) data, size, &err);
  if (t == NULL)
    return 0;
  HnChatRenderOptions o = { 0 };
  o.messages = messages;
  o.bos_token = "<s>";
  o.eos_token = "</s>";
  o.add_generation_prompt = size & 1;
  o.has_now = true;
  o.now = 1700000000;
  o.max_output = 1u << 16;
  o.max_memory = 16u << 20;
  o.max_steps = 200000;
  size_t len = 0;
  char *out = hn_chat_template_render (t, &o, &len, &err);
  free (out);
  hn_chat_template_free (t);
  return 0;
}
