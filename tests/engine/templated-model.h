/* templated-model.h: a copy of a test model with a chat template of the test's own, for
 * the tests that compare what hanashi-cli and the engine thread do with one template.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "hn-gguf-writer.h"
#include "hn-gguf.h"

/* The test data's model @model_name (in HANASHI_TESTDATA/models) with
 * tokenizer.chat_template set to @tmpl, written as @dir/templated.gguf; its path, to free. */
static inline char *
model_with_template (const char *model_name, const char *tmpl, const char *dir)
{
  const char *testdata = g_getenv ("HANASHI_TESTDATA");
  g_assert_nonnull (testdata);
  g_autofree char *src_path = g_build_filename (testdata, "models", model_name, NULL);
  char *dst_path = g_build_filename (dir, "templated.gguf", NULL);
  HnError err = { 0 };
  HnGguf *src = hn_gguf_open (src_path, &err);
  g_assert_nonnull (src);
  HnGgufWriter *w = hn_gguf_writer_new (&err);
  g_assert_true (hn_gguf_writer_copy_kvs (w, src, &err));
  g_assert_true (hn_gguf_writer_set_str (w, "tokenizer.chat_template", tmpl, &err));
  for (int64_t i = 0; i < hn_gguf_n_tensors (src); i++)
    {
      const HnGgufTensor *t = hn_gguf_tensor (src, i);
      g_assert_true (hn_gguf_writer_add_tensor (w, t->name, (HnType) t->type, t->n_dims, t->ne, &err));
    }
  g_assert_true (hn_gguf_writer_begin (w, dst_path, &err));
  for (int64_t i = 0; i < hn_gguf_n_tensors (src); i++)
    {
      const HnGgufTensor *t = hn_gguf_tensor (src, i);
      g_assert_true (hn_gguf_writer_write (w, t->data, t->nbytes, &err));
    }
  g_assert_true (hn_gguf_writer_finish (w, &err));
  hn_gguf_writer_free (w);
  hn_gguf_close (src);
  return dst_path;
}
