/* hanashi-cli generate --probs K: the JSON-lines contract.  Every line parses (json-glib)
 * into exactly {"token", "text", "candidates": [{"token", "logprob", "p", "removed_by"}…]};
 * the candidates agree with an independent computation of the chain (probs-reference.h)
 * on the logits that `hanashi-cli logits` gives for the same tokens; the texts put
 * together are the text that generate prints without --probs.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "cli-run.h"
#include "hn-sampler.h"

#include "probs-reference.h"

enum { N_VOCAB = 512 }; /* stories260K */

static char *
model_path (void)
{
  return g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", "stories260K-f32.gguf", NULL);
}

/* The members of an object, in order, joined by commas. */
static char *
member_names (JsonObject *o)
{
  GString *s = g_string_new (NULL);
  JsonObjectIter it;
  const char *name;
  JsonNode *node;
  json_object_iter_init_ordered (&it, o);
  while (json_object_iter_next_ordered (&it, &name, &node))
    g_string_append_printf (s, "%s%s", s->len ? "," : "", name);
  return g_string_free (s, FALSE);
}

/* Parses one line into an HnTokenProbs, checking its shape on the way. */
static void
parse_line (const char *line, HnTokenProbs *rec, char **text, size_t k)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  GError *error = NULL;
  if (!json_parser_load_from_data (parser, line, -1, &error))
    g_error ("line does not parse: %s: %s", error->message, line);
  JsonNode *root = json_parser_get_root (parser);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (root));
  JsonObject *o = json_node_get_object (root);
  g_autofree char *names = member_names (o);
  g_assert_cmpstr (names, ==, "token,text,candidates");
  memset (rec, 0, sizeof *rec);
  rec->token = (int32_t) json_object_get_int_member (o, "token");
  *text = g_strdup (json_object_get_string_member (o, "text"));
  JsonArray *cands = json_object_get_array_member (o, "candidates");
  g_assert_cmpuint (json_array_get_length (cands), ==, k);
  rec->n_candidates = (uint32_t) k;
  for (guint i = 0; i < k; i++) {
    JsonObject *c = json_array_get_object_element (cands, i);
    g_autofree char *cn = member_names (c);
    g_assert_cmpstr (cn, ==, "token,logprob,p,removed_by");
    HnProbCandidate *pc = &rec->candidates[i];
    pc->id = (int32_t) json_object_get_int_member (c, "token");
    pc->logprob = (float) json_object_get_double_member (c, "logprob");
    pc->p = (float) json_object_get_double_member (c, "p");
    JsonNode *stage = json_object_get_member (c, "removed_by");
    if (JSON_NODE_HOLDS_NULL (stage)) {
      pc->removed_by = HN_STAGE_NONE;
    } else {
      pc->removed_by = (uint8_t) hn_sampler_stage_from_name (json_node_get_string (stage));
      g_assert_cmpint (pc->removed_by, !=, HN_STAGE_NONE);
      g_assert_cmpfloat (pc->p, ==, 0.0);
    }
    if (i > 0)
      g_assert_cmpfloat (pc->logprob, <=, rec->candidates[i - 1].logprob);
  }
}

typedef struct {
  const char *name;
  const char *args[16];
} Case;

static const Case cases[] = {
  { "greedy", { NULL } },
  { "sampled", { "--temp", "0.9", "--seed", "3", NULL } },
  { "truncations", { "--temp", "1.2", "--top-k", "8", "--top-p", "0.8", "--min-p", "0.05", "--typical", "0.9", "--seed", "5", NULL } },
  { "penalties", { "--temp", "0.7", "--top-k", "0", "--repeat-penalty", "1.4", "--presence-penalty", "0.3",
                   "--frequency-penalty", "0.2", "--repeat-last-n", "16", "--seed", "9", NULL } },
};

static void
test_contract (void)
{
  g_autofree char *model = model_path ();
  g_autofree char *dir = g_dir_make_tmp ("hanashi-cli-probs-XXXXXX", NULL);
  g_autofree char *logits_path = g_build_filename (dir, "logits.f32", NULL);
  const char *prompt = "1,403,407,261,378,316";
  size_t compared = 0, steps = 0;
  for (size_t ci = 0; ci < G_N_ELEMENTS (cases); ci++) {
    const Case *cs = &cases[ci];
    size_t k = 3 + ci * 4;
    g_autofree char *k_text = g_strdup_printf ("%zu", k);
    GPtrArray *args = g_ptr_array_new ();
    const char *fixed[] = { "generate", "-m", model, "--tokens", prompt, "-n", "8", "-t", "1" };
    for (size_t i = 0; i < G_N_ELEMENTS (fixed); i++)
      g_ptr_array_add (args, (gpointer) fixed[i]);
    for (size_t i = 0; cs->args[i]; i++)
      g_ptr_array_add (args, (gpointer) cs->args[i]);
    g_ptr_array_add (args, NULL);
    g_autofree char *plain = NULL, *err = NULL;
    g_assert_cmpint (cli_run_status ((const char *const *) args->pdata, &plain, &err), ==, 0);
    g_ptr_array_remove_index (args, args->len - 1);
    g_ptr_array_add (args, (gpointer) "--probs");
    g_ptr_array_add (args, k_text);
    g_ptr_array_add (args, NULL);
    g_autofree char *out = NULL, *err2 = NULL;
    if (cli_run_status ((const char *const *) args->pdata, &out, &err2) != 0)
      g_error ("generate --probs failed: %s", err2);
    g_ptr_array_unref (args);

    /* one object per line, every line an object */
    g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
    guint n_lines = g_strv_length (lines);
    g_assert_cmpstr (lines[n_lines - 1], ==, ""); /* the output ends with a newline */
    n_lines--;
    g_assert_cmpuint (n_lines, >=, 1);
    HnTokenProbs *recs = g_new0 (HnTokenProbs, n_lines);
    GString *texts = g_string_new (NULL);
    GString *tokens = g_string_new (prompt);
    for (guint i = 0; i < n_lines; i++) {
      g_autofree char *text = NULL;
      parse_line (lines[i], &recs[i], &text, k);
      g_string_append (texts, text);
      g_string_append_printf (tokens, ",%d", recs[i].token);
    }
    /* the same tokens as without --probs: the texts make the plain output */
    g_string_append_c (texts, '\n');
    g_assert_cmpstr (texts->str, ==, plain);

    /* the logits of every position, teacher-forced, and the chain recomputed on them */
    const char *largs[] = { "logits", "-m", model, "--tokens", tokens->str, "-o", logits_path, "-t", "1", NULL };
    g_autofree char *lout = NULL, *lerr = NULL;
    g_assert_cmpint (cli_run_status (largs, &lout, &lerr), ==, 0);
    g_autofree char *raw = NULL;
    gsize raw_len = 0;
    g_assert_true (g_file_get_contents (logits_path, &raw, &raw_len, NULL));
    g_auto (GStrv) prompt_ids = g_strsplit (prompt, ",", -1);
    guint n_prompt = g_strv_length (prompt_ids);
    g_assert_cmpuint (raw_len, ==, (n_prompt + n_lines) * N_VOCAB * sizeof (float));
    HnSamplerParams sp;
    hn_sampler_params_init (&sp);
    sp.temperature = 0.0f; /* the CLI's greedy default */
    for (size_t i = 0; cs->args[i]; i += 2) {
      static const struct { const char *opt, *key; } keys[] = {
        { "--temp", "temperature" }, { "--top-k", "top_k" }, { "--top-p", "top_p" }, { "--min-p", "min_p" },
        { "--typical", "typical_p" }, { "--repeat-penalty", "repeat_penalty" }, { "--presence-penalty", "presence_penalty" },
        { "--frequency-penalty", "frequency_penalty" }, { "--repeat-last-n", "repeat_last_n" }, { "--seed", "seed" },
      };
      for (size_t j = 0; j < G_N_ELEMENTS (keys); j++)
        if (strcmp (cs->args[i], keys[j].opt) == 0)
          g_assert_true (hn_sampler_params_set (&sp, keys[j].key, g_ascii_strtod (cs->args[i + 1], NULL), NULL));
    }
    g_auto (GStrv) all_ids = g_strsplit (tokens->str, ",", -1);
    int32_t *history = g_new (int32_t, n_prompt + n_lines);
    for (guint i = 0; i < n_prompt + n_lines; i++)
      history[i] = (int32_t) g_ascii_strtoll (all_ids[i], NULL, 10);
    RefChain ref;
    ref_init (&ref, N_VOCAB);
    const float *rows = (const float *) raw;
    for (guint i = 0; i < n_lines; i++) {
      const float *row = rows + (size_t) (n_prompt - 1 + i) * N_VOCAB;
      /* stories' vocabulary has no newline token, so penalize_nl exempts nothing */
      ref_chain (&ref, row, &sp, history, n_prompt + i, NULL, 0, NULL, 0.0);
      compared += ref_check_record_full (&ref, row, &recs[i], k, FALSE); /* the line has no p of its own */
      steps++;
    }
    g_test_message ("%s: %u tokens", cs->name, n_lines);
    ref_clear (&ref);
    g_free (history);
    g_free (recs);
    g_string_free (texts, TRUE);
    g_string_free (tokens, TRUE);
  }
  g_assert_cmpuint (compared * 10, >=, steps * 8);
  g_unlink (logits_path);
  g_rmdir (dir);
}

static void
test_bad_options (void)
{
  g_autofree char *model = model_path ();
  const char *bad[][3] = { { "--probs", "0", NULL }, { "--probs", "21", NULL }, { "--probs", "x", NULL } };
  for (size_t i = 0; i < G_N_ELEMENTS (bad); i++) {
    const char *args[] = { "generate", "-m", model, "-p", "Once", "-n", "2", bad[i][0], bad[i][1], NULL };
    g_autofree char *out = NULL, *err = NULL;
    g_assert_cmpint (cli_run_status (args, &out, &err), !=, 0);
    g_assert_nonnull (strstr (err, "--probs"));
  }
  const char *both[] = { "generate", "-m", model, "-p", "Once", "-n", "2", "--probs", "3", "--ids", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (cli_run_status (both, &out, &err), !=, 0);
  g_assert_nonnull (strstr (err, "cannot be combined"));
  const char *help[] = { "generate", "--help", NULL };
  g_autofree char *hout = NULL, *herr = NULL;
  g_assert_cmpint (cli_run_status (help, &hout, &herr), ==, 0);
  g_assert_nonnull (strstr (herr, "--probs K"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cli-probs/contract", test_contract);
  g_test_add_func ("/cli-probs/bad-options", test_bad_options);
  return g_test_run ();
}
