/* The generation loop on the real test models (the fake-backend tests are in
 * test-generate.c): shipped grammars constrain real token vocabularies, a seed gives the same
 * output whatever the thread count, guidance follows its formula, and penalize_nl = false
 * really exempts the vocabulary's newline token.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "hn-context.h"
#include "hn-generate-model.h"
#include "hn-grammar.h"
#include "hn-json-schema.h"
#include "hn-model.h"
#include "hn-vocab.h"

typedef struct {
  HnModel *model;
  HnVocab *vocab;
  HnContext *ctx;
  HnGenModelBackend backend;
  HnGrammarVocab *gvocab;
} Engine;

static Engine *
engine_new (const char *name, int threads)
{
  Engine *e = g_new0 (Engine, 1);
  g_autofree char *path = g_build_filename (g_getenv ("HANASHI_TESTDATA"), "models", name, NULL);
  HnError err = { 0 };
  e->model = hn_model_load (path, NULL, &err);
  g_assert_nonnull (e->model);
  e->vocab = hn_vocab_load (hn_model_gguf (e->model), &err);
  g_assert_nonnull (e->vocab);
  HnContextParams p = hn_context_default_params ();
  p.n_ctx = 256;
  p.n_threads = threads;
  p.n_seq_max = 2;
  e->ctx = hn_context_new (e->model, &p, &err);
  g_assert_nonnull (e->ctx);
  g_assert_true (hn_gen_model_backend_init (&e->backend, e->ctx, e->vocab, &err));
  e->gvocab = hn_gen_grammar_vocab_new (e->vocab, &err);
  g_assert_nonnull (e->gvocab);
  return e;
}

static void
engine_free (Engine *e)
{
  hn_grammar_vocab_free (e->gvocab);
  hn_gen_model_backend_clear (&e->backend);
  hn_context_free (e->ctx);
  hn_vocab_free (e->vocab);
  hn_model_free (e->model);
  g_free (e);
}

typedef struct {
  GArray *tokens;
  GString *text;
  GArray *rows; /* the rows the sampler saw, when asked */
  int32_t n_vocab;
} Sink;

static bool
on_token (int32_t token, const char *text, size_t len, void *user_data)
{
  Sink *s = user_data;
  if (token >= 0)
    g_array_append_val (s->tokens, token);
  g_string_append_len (s->text, text, (gssize) len);
  return true;
}

static void
on_logits (const float *logits, int32_t n_vocab, void *user_data)
{
  Sink *s = user_data;
  s->n_vocab = n_vocab;
  if (s->rows)
    g_array_append_vals (s->rows, logits, (guint) n_vocab);
}

static GArray *
tokenize (Engine *e, const char *text, bool bos)
{
  HnError err = { 0 };
  int32_t buf[512];
  int32_t n = hn_tokenize (e->vocab, text, strlen (text), bos, false, buf, G_N_ELEMENTS (buf), &err);
  g_assert_cmpint (n, >, 0);
  GArray *a = g_array_new (FALSE, FALSE, sizeof (int32_t));
  g_array_append_vals (a, buf, (guint) n);
  return a;
}

typedef struct {
  const HnSamplerParams *sp;
  const HnGrammar *grammar;
  GArray *negative;
  float cfg_scale;
  gboolean want_rows;
} Run;

static Sink
generate (Engine *e, GArray *prompt, const Run *run, HnGenResult *res)
{
  Sink s = { g_array_new (FALSE, FALSE, sizeof (int32_t)), g_string_new (NULL),
             run->want_rows ? g_array_new (FALSE, FALSE, sizeof (float)) : NULL, 0 };
  HnGenRequest req;
  hn_gen_request_init (&req);
  req.prompt = (const int32_t *) prompt->data;
  req.n_prompt = prompt->len;
  req.sampler = run->sp;
  req.grammar = run->grammar;
  req.grammar_vocab = run->grammar ? e->gvocab : NULL;
  req.cfg_scale = run->cfg_scale;
  if (run->negative) {
    req.negative = (const int32_t *) run->negative->data;
    req.n_negative = run->negative->len;
  }
  req.on_token = on_token;
  req.on_logits = on_logits;
  req.user_data = &s;
  HnError err = { 0 };
  if (!hn_generate_with_backend (&e->backend.backend, &req, res, &err))
    g_error ("generate: %s", err.message);
  return s;
}

static void
sink_clear (Sink *s)
{
  g_array_unref (s->tokens);
  g_string_free (s->text, TRUE);
  if (s->rows)
    g_array_unref (s->rows);
}

static const char *models[] = { "tiny-llama-spm-q8_0.gguf", "tiny-qwen2-gpt2-q8_0.gguf", "stories260K-f32.gguf" };

/* ---- grammars ---- */

static char *
read_grammar (const char *name)
{
  g_autofree char *path = g_build_filename (g_getenv ("HANASHI_GRAMMARS"), name, NULL);
  char *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  return text;
}

/* Every shipped grammar, 20 seeds, both real vocabularies: each output is a prefix the
 * grammar accepts byte by byte (a fresh parse of the whole text), and every output that
 * ended because the grammar was complete is complete under that fresh parse; complete JSON
 * outputs parse as JSON. */
static void
test_shipped_grammars (void)
{
  const char *files[] = { "json.gbnf", "json-object.gbnf", "list.gbnf", "yes-no.gbnf", "arithmetic.gbnf" };
  for (size_t m = 0; m < G_N_ELEMENTS (models); m++) {
    Engine *e = engine_new (models[m], 2);
    g_autoptr (GArray) prompt = tokenize (e, "Answer:", true);
    for (size_t f = 0; f < G_N_ELEMENTS (files); f++) {
      g_autofree char *text = read_grammar (files[f]);
      HnError err = { 0 };
      HnGrammar *g = hn_grammar_parse (text, strlen (text), NULL, &err);
      g_assert_nonnull (g);
      int complete = 0;
      for (uint64_t seed = 1; seed <= 20; seed++) {
        HnSamplerParams sp;
        hn_sampler_params_init (&sp);
        sp.seed = seed;
        sp.temperature = 1.0f;
        sp.max_new_tokens = 40;
        Run run = { &sp, g, NULL, 1.0f, FALSE };
        HnGenResult res;
        Sink s = generate (e, prompt, &run, &res);
        GString *raw = g_string_new (NULL);
        for (guint i = 0; i < s.tokens->len; i++) {
          size_t len = 0;
          const char *b = hn_token_bytes (e->vocab, g_array_index (s.tokens, int32_t, i), &len);
          g_string_append_len (raw, b, (gssize) len);
        }
        HnGrammarState *st = hn_grammar_state_new (g, e->gvocab, &err);
        g_assert_nonnull (st);
        if (!hn_grammar_accept_bytes (st, raw->str, raw->len))
          g_error ("%s, %s, seed %d: output not accepted: '%s'", models[m], files[f], (int) seed, raw->str);
        if (res.stop_reason == HN_GEN_STOP_GRAMMAR || res.stop_reason == HN_GEN_STOP_EOG) {
          g_assert_true (hn_grammar_is_complete (st));
          complete++;
          if (g_str_has_prefix (files[f], "json")) {
            g_autoptr (JsonParser) parser = json_parser_new ();
            if (!json_parser_load_from_data (parser, raw->str, (gssize) raw->len, NULL))
            {
              GString *hex = g_string_new (NULL);
              for (gsize k = 0; k < raw->len; k++)
                g_string_append_printf (hex, "%02x ", (guint8) raw->str[k]);
              g_error ("%s, %s, seed %d: complete output is not JSON: %s", models[m], files[f], (int) seed, hex->str);
            }
          }
        }
        hn_grammar_state_free (st);
        g_string_free (raw, TRUE);
        sink_clear (&s);
      }
      g_test_message ("%s %s: %d of 20 runs complete", models[m], files[f], complete);
      if (strcmp (files[f], "yes-no.gbnf") == 0)
        g_assert_cmpint (complete, ==, 20);
      hn_grammar_free (g);
    }
    engine_free (e);
  }
}

/* A bounded schema (enum, maxLength, maxItems, bounded integers): every run on every test
 * model completes within the token limit, json-glib parses the output, and the values keep
 * the schema's limits. */
static void
test_bounded_schema (void)
{
  const char *schema =
    "{\"type\": \"object\", \"properties\": {"
    "  \"color\": {\"enum\": [\"red\", \"green\", \"blue\"]},"
    "  \"name\": {\"type\": \"string\", \"maxLength\": 5},"
    "  \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"boolean\"}, \"maxItems\": 3},"
    "  \"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 120}},"
    " \"required\": [\"color\", \"name\", \"tags\", \"age\"]}";
  HnError err = { 0 };
  char *gbnf = hn_json_schema_to_gbnf (schema, strlen (schema), &err);
  g_assert_nonnull (gbnf);
  HnGrammar *g = hn_grammar_parse (gbnf, strlen (gbnf), NULL, &err);
  g_assert_nonnull (g);
  const int limit = 300;
  for (size_t m = 0; m < G_N_ELEMENTS (models); m++) {
    Engine *e = engine_new (models[m], 2);
    g_autoptr (GArray) prompt = tokenize (e, "JSON:", true);
    int longest = 0;
    for (uint64_t seed = 1; seed <= 20; seed++) {
      HnSamplerParams sp;
      hn_sampler_params_init (&sp);
      sp.seed = seed;
      sp.temperature = 1.0f;
      sp.max_new_tokens = limit;
      Run run = { &sp, g, NULL, 1.0f, FALSE };
      HnGenResult res;
      Sink s = generate (e, prompt, &run, &res);
      if (res.stop_reason != HN_GEN_STOP_GRAMMAR && res.stop_reason != HN_GEN_STOP_EOG)
        g_error ("%s seed %d: stopped by %s after %u tokens: %s", models[m], (int) seed,
                 hn_gen_stop_reason_name (res.stop_reason), s.tokens->len, s.text->str);
      longest = MAX (longest, (int) s.tokens->len);
      g_autoptr (JsonParser) parser = json_parser_new ();
      g_autoptr (GError) error = NULL;
      if (!json_parser_load_from_data (parser, s.text->str, -1, &error))
        g_error ("%s seed %d: not JSON (%s): %s", models[m], (int) seed, error->message, s.text->str);
      JsonObject *o = json_node_get_object (json_parser_get_root (parser));
      g_assert_nonnull (o);
      const char *color = json_object_get_string_member (o, "color");
      g_assert_true (g_str_equal (color, "red") || g_str_equal (color, "green") || g_str_equal (color, "blue"));
      g_assert_cmpint (g_utf8_strlen (json_object_get_string_member (o, "name"), -1), <=, 5);
      JsonArray *tags = json_object_get_array_member (o, "tags");
      g_assert_cmpuint (json_array_get_length (tags), <=, 3);
      for (guint k = 0; k < json_array_get_length (tags); k++)
        g_assert_true (JSON_NODE_HOLDS_VALUE (json_array_get_element (tags, k)) &&
                       json_node_get_value_type (json_array_get_element (tags, k)) == G_TYPE_BOOLEAN);
      gint64 age = json_object_get_int_member (o, "age");
      g_assert_cmpint (age, >=, 0);
      g_assert_cmpint (age, <=, 120);
      sink_clear (&s);
    }
    g_test_message ("%s: 20 of 20 complete, longest %d tokens (limit %d)", models[m], longest, limit);
    engine_free (e);
  }
  hn_grammar_free (g);
  free (gbnf);
}

/* ---- seeds and threads ---- */

static void
test_seed_same_across_threads (void)
{
  for (size_t m = 0; m < G_N_ELEMENTS (models); m++) {
    GPtrArray *outputs = g_ptr_array_new_with_free_func (g_free);
    for (int threads = 1; threads <= 3; threads++) {
      Engine *e = engine_new (models[m], threads);
      g_autoptr (GArray) prompt = tokenize (e, "The weather today is", true);
      HnSamplerParams sp;
      hn_sampler_params_init (&sp);
      sp.seed = 1234;
      sp.temperature = 0.9f;
      sp.top_k = 0;
      sp.max_new_tokens = 24;
      Run run = { &sp, NULL, NULL, 1.0f, FALSE };
      HnGenResult res;
      Sink s = generate (e, prompt, &run, &res);
      g_assert_cmpuint (s.tokens->len, ==, 24);
      GString *ids = g_string_new (NULL);
      for (guint i = 0; i < s.tokens->len; i++)
        g_string_append_printf (ids, "%d ", g_array_index (s.tokens, int32_t, i));
      g_ptr_array_add (outputs, g_string_free (ids, FALSE));
      sink_clear (&s);
      engine_free (e);
    }
    g_assert_cmpstr (outputs->pdata[0], ==, outputs->pdata[1]);
    g_assert_cmpstr (outputs->pdata[0], ==, outputs->pdata[2]);
    g_ptr_array_unref (outputs);
  }
}

/* ---- classifier-free guidance ---- */

static void
log_softmax (const float *in, double *out, int n)
{
  double max = -INFINITY;
  for (int i = 0; i < n; i++)
    max = fmax (max, in[i]);
  double sum = 0;
  for (int i = 0; i < n; i++)
    sum += exp (in[i] - max);
  double lse = max + log (sum);
  for (int i = 0; i < n; i++)
    out[i] = in[i] - lse;
}

/* Logits of the last token of `tokens`, evaluated alone in a fresh engine. */
static float *
alone (const char *model, GArray *tokens)
{
  Engine *e = engine_new (model, 1);
  int32_t pos[256];
  for (guint i = 0; i < tokens->len; i++)
    pos[i] = (int32_t) i;
  HnBatch batch = { (int) tokens->len, (const int32_t *) tokens->data, pos, NULL, NULL };
  HnError err = { 0 };
  g_assert_true (hn_context_decode (e->ctx, &batch, &err));
  int n = hn_model_n_vocab (e->model);
  float *row = g_memdup2 (hn_context_get_logits (e->ctx, 0), sizeof (float) * (gsize) n);
  engine_free (e);
  return row;
}

static void
test_cfg (void)
{
  const char *model = models[0];
  Engine *e = engine_new (model, 1);
  g_autoptr (GArray) positive = tokenize (e, "Write a friendly note about the sea", true);
  g_autoptr (GArray) negative = tokenize (e, "Write a rude note about the sea", true);
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  sp.temperature = 0.0f;
  sp.max_new_tokens = 1;

  /* scale 1: bit-identical to no guidance, and the negative prompt is never evaluated */
  Run plain = { &sp, NULL, NULL, 1.0f, TRUE };
  HnGenResult r_plain, r_one;
  Sink s_plain = generate (e, positive, &plain, &r_plain);
  Run one = { &sp, NULL, negative, 1.0f, TRUE };
  Sink s_one = generate (e, positive, &one, &r_one);
  g_assert_cmpuint (s_plain.rows->len, ==, s_one.rows->len);
  g_assert_cmpint (memcmp (s_plain.rows->data, s_one.rows->data, sizeof (float) * s_plain.rows->len), ==, 0);
  g_assert_cmpuint (r_one.n_prompt_evaluated, ==, positive->len);

  /* scale 1.8: both sequences in the prompt batches, and the row the sampler sees is
   * log_softmax(neg) + s * (log_softmax(pos) - log_softmax(neg)) of the two evaluated alone */
  const float scale = 1.8f;
  Run guided = { &sp, NULL, negative, scale, TRUE };
  HnGenResult r_guided;
  Sink s_guided = generate (e, positive, &guided, &r_guided);
  g_assert_cmpuint (r_guided.n_prompt_evaluated, ==, positive->len + negative->len);
  int n = s_guided.n_vocab;
  g_autofree float *pos_row = alone (model, positive);
  g_autofree float *neg_row = alone (model, negative);
  g_autofree double *lp = g_new (double, n), *ln = g_new (double, n);
  log_softmax (pos_row, lp, n);
  log_softmax (neg_row, ln, n);
  /* the row itself, not renormalised: the sampler's softmax normalises it */
  const float *guided_row = (const float *) s_guided.rows->data;
  double worst = 0;
  for (int i = 0; i < n; i++) {
    double want = ln[i] + scale * (lp[i] - ln[i]);
    worst = fmax (worst, fabs (guided_row[i] - want));
  }
  g_test_message ("CFG: largest difference from the formula %.3g", worst);
  g_assert_cmpfloat (worst, <, 1e-5);
  /* and guidance changed something */
  g_assert_cmpint (memcmp (s_plain.rows->data, s_guided.rows->data, sizeof (float) * (gsize) n), !=, 0);
  sink_clear (&s_plain);
  sink_clear (&s_one);
  sink_clear (&s_guided);
  engine_free (e);
}

/* ---- penalize_nl ---- */

static void
test_newline_tokens_exempt (void)
{
  static const struct {
    const char *model, *newline;
  } cases[] = { { "tiny-llama-spm-q8_0.gguf", "<0x0A>" }, { "tiny-qwen2-gpt2-q8_0.gguf", "\xc4\x8a" } };
  for (size_t m = 0; m < G_N_ELEMENTS (cases); m++) {
    Engine *e = engine_new (cases[m].model, 1);
    int32_t nl = hn_vocab_find_token (e->vocab, cases[m].newline);
    g_assert_cmpint (nl, >=, 0);
    /* the backend found the newline token */
    gboolean found = FALSE;
    for (size_t i = 0; i < e->backend.backend.n_newline_tokens; i++)
      found |= e->backend.backend.newline_tokens[i] == nl;
    g_assert_true (found);

    /* a prompt full of newlines; the newline and another token get large biases so that
     * only the penalties decide between them */
    g_autoptr (GArray) prompt = tokenize (e, "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\no\np\nq\nr\ns\nt\n", true);
    int32_t other = hn_vocab_find_token (e->vocab, m == 0 ? "\xe2\x96\x81zebra" : "zebra");
    if (other < 0)
      other = 1000;
    HnLogitBias bias[2] = { { nl, 100.0f }, { other, 80.0f } };
    for (int penalize = 0; penalize <= 1; penalize++) {
      HnSamplerParams sp;
      hn_sampler_params_init (&sp);
      sp.temperature = 0.0f;
      sp.max_new_tokens = 1;
      sp.presence_penalty = 2.0f;
      sp.frequency_penalty = 2.0f;
      sp.repeat_last_n = -1;
      sp.penalize_nl = penalize;
      sp.logit_bias = bias;
      sp.n_logit_bias = 2;
      Run run = { &sp, NULL, NULL, 1.0f, FALSE };
      HnGenResult res;
      Sink s = generate (e, prompt, &run, &res);
      g_assert_cmpuint (s.tokens->len, ==, 1);
      g_assert_cmpint (g_array_index (s.tokens, int32_t, 0), ==, penalize ? other : nl);
      sink_clear (&s);
    }
    engine_free (e);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (g_getenv ("HANASHI_TESTDATA") == NULL || g_getenv ("HANASHI_GRAMMARS") == NULL) {
    g_test_message ("HANASHI_TESTDATA or HANASHI_GRAMMARS is not set");
    return 77;
  }
  g_test_add_func ("/generate-model/shipped-grammars", test_shipped_grammars);
  g_test_add_func ("/generate-model/bounded-schema", test_bounded_schema);
  g_test_add_func ("/generate-model/seed-same-across-threads", test_seed_same_across_threads);
  g_test_add_func ("/generate-model/cfg", test_cfg);
  g_test_add_func ("/generate-model/newline-exempt", test_newline_tokens_exempt);
  return g_test_run ();
}
