/* damaged-models.h — copies of a test model damaged the way real files get damaged: cut
 * short (an interrupted download) or holding NaN weights (a broken conversion or a bad
 * disk).  The copies go into a directory the test owns; the test data is only read.
 * Header-only (static functions) so that the CLI and the engine-thread tests share it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>
#include <math.h>
#include <string.h>

#include "hn-gguf.h"
#include "hn-quants.h"

/* The first `n_bytes` bytes of `src`, written to dir/name.  Returns the new path. */
static inline char *
damaged_model_truncated (const char *src, const char *dir, const char *name, gsize n_bytes)
{
  g_autofree char *bytes = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (src, &bytes, &len, NULL));
  g_assert_cmpuint (n_bytes, <, len);
  char *path = g_build_filename (dir, name, NULL);
  g_assert_true (g_file_set_contents (path, bytes, (gssize) n_bytes, NULL));
  return path;
}

/* A copy of `src` (whose tensor `tensor` must be F32) with every value of that tensor NaN,
 * written to dir/name.  Returns the new path. */
static inline char *
damaged_model_nan (const char *src, const char *dir, const char *name, const char *tensor)
{
  g_autofree char *bytes = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (src, &bytes, &len, NULL));
  HnError err = { 0 };
  HnGguf *g = hn_gguf_open_memory (bytes, len, &err);
  g_assert_nonnull (g);
  const HnGgufTensor *t = hn_gguf_find_tensor (g, tensor);
  g_assert_nonnull (t);
  g_assert_cmpuint (t->type, ==, HN_TYPE_F32);
  gsize at = (gsize) ((const char *) t->data - bytes);
  float nan_value = NAN;
  for (gsize i = 0; i < t->nbytes / sizeof (float); i++)
    memcpy (bytes + at + i * sizeof (float), &nan_value, sizeof (float));
  hn_gguf_close (g);
  char *path = g_build_filename (dir, name, NULL);
  g_assert_true (g_file_set_contents (path, bytes, (gssize) len, NULL));
  return path;
}
