/* libFuzzer target: the GGUF reader (header, metadata, tensor table) over arbitrary bytes,
 * then everything that reads metadata from an accepted file: the vocabulary loader and the
 * chat-template parser.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stddef.h>
#include <stdint.h>

#include "hn-chat-template.h"
#include "hn-gguf.h"
#include "hn-vocab.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  HnError err = { 0 };
  HnGguf *g = hn_gguf_open_memory (data, size, &err);
  if (g == NULL)
    return 0;
  /* walk everything the reader accepted */
  for (int64_t i = 0; i < hn_gguf_n_kv (g); i++)
    (void) hn_gguf_kv (g, i);
  for (int64_t i = 0; i < hn_gguf_n_tensors (g); i++)
    (void) hn_gguf_tensor (g, i);
  HnVocab *v = hn_vocab_load (g, &err);
  if (v != NULL) {
    int32_t ids[64];
    (void) hn_tokenize (v, "Hello world! 123 <s>", 20, true, true, ids, 64, &err);
    hn_vocab_free (v);
  }
  HnStr tmpl;
  if (hn_gguf_get_str (g, "tokenizer.chat_template", &tmpl, &err)) {
    HnChatTemplate *t = hn_chat_template_new (tmpl.data, (size_t) tmpl.len, &err);
    hn_chat_template_free (t);
  }
  hn_gguf_close (g);
  return 0;
}
