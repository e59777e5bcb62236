/* test-engine-errors.c — every engine error the person can meet has a sentence of its own
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <gio/gio.h>
#include <string.h>

#include "hanashi-engine-errors.h"
#include "hanashi-engine.h"

/* What the engine says is technical English; the window must say what it means instead. */
static const char engine_message[] = "tensor 'blk.0.attn_q.weight' extends past end of file";

static void
test_described (void)
{
  const HanashiEngineError described[] = {
    HANASHI_ENGINE_ERROR_MODEL_UNREADABLE, HANASHI_ENGINE_ERROR_NOT_GGUF,
    HANASHI_ENGINE_ERROR_UNSUPPORTED_ARCH, HANASHI_ENGINE_ERROR_OUT_OF_MEMORY,
    HANASHI_ENGINE_ERROR_NO_MODEL, HANASHI_ENGINE_ERROR_TEMPLATE_FAILED,
    HANASHI_ENGINE_ERROR_MODEL_TRUNCATED, HANASHI_ENGINE_ERROR_INVALID_NUMBERS,
    HANASHI_ENGINE_ERROR_PROMPT_TOO_LONG, HANASHI_ENGINE_ERROR_GRAMMAR_TOO_COMPLEX,
    HANASHI_ENGINE_ERROR_GPU_FAILED,
  };
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (described); i++)
    {
      g_autoptr (GError) error = g_error_new_literal (HANASHI_ENGINE_ERROR, described[i], engine_message);
      char *text = hanashi_describe_engine_error (error);
      g_assert_nonnull (strstr (text, ".") );
      g_assert_null (strstr (text, engine_message));
      /* one sentence per kind of failure, so the person can tell them apart */
      g_assert_false (g_hash_table_contains (seen, text));
      g_hash_table_add (seen, text);
    }

  g_autoptr (GError) truncated = g_error_new_literal (HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_MODEL_TRUNCATED, engine_message);
  g_autofree char *truncated_text = hanashi_describe_engine_error (truncated);
  g_assert_nonnull (strstr (truncated_text, "incomplete"));
  g_autoptr (GError) nan = g_error_new_literal (HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_INVALID_NUMBERS, engine_message);
  g_autofree char *nan_text = hanashi_describe_engine_error (nan);
  g_assert_nonnull (strstr (nan_text, "invalid numbers"));
}

static void
test_kept (void)
{
  /* The grammar's own message says where it is wrong, so it is kept inside the sentence. */
  g_autoptr (GError) grammar = g_error_new_literal (HANASHI_ENGINE_ERROR, HANASHI_ENGINE_ERROR_GRAMMAR_INVALID,
                                                    "line 2, column 5: expected '::='");
  g_autofree char *grammar_text = hanashi_describe_engine_error (grammar);
  g_assert_nonnull (strstr (grammar_text, "line 2, column 5: expected '::='"));
  g_assert_cmpstr (grammar_text, !=, grammar->message);

  /* Other domains keep their message. */
  g_autoptr (GError) io = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_FAILED, "The disk is full.");
  g_autofree char *io_text = hanashi_describe_engine_error (io);
  g_assert_cmpstr (io_text, ==, "The disk is full.");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/engine-errors/described", test_described);
  g_test_add_func ("/engine-errors/kept", test_kept);
  return g_test_run ();
}
