/* Tests for hn-generate: the loop driven by a scripted model (stop reasons, streaming of
 * split UTF-8, stop strings, cancellation, context limit), grammar-constrained
 * generation from random logits under every shipped grammar and JSON schemas (never a
 * forbidden byte; bounded grammars finish and parse as JSON with json-glib), and
 * classifier-free guidance (scale 1 bit-identical, the combined row equal to the formula
 * over two separate evaluations).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-cfg.h"
#include "hn-generate.h"
#include "hn-json-schema.h"

#include <glib.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

/* ---- a fake model ---------------------------------------------------------------
 * Logits are a deterministic function of the tokens of the sequence so far (a hash), so
 * two evaluations of the same sequence agree exactly, whichever batch they ran in.  In
 * scripted mode, the token script[pos - n_prompt] gets a huge logit. */

#define MAX_CTX 512

typedef struct {
  int32_t n_vocab;
  int32_t eog;
  char **bytes;
  uint32_t *lens;
  int32_t tokens[2][MAX_CTX];
  int32_t len[2];
  float *rows; /* logits of the items that asked, in order */
  size_t n_rows;
  const int32_t *script;
  size_t n_script;
  size_t script_base;
  int decodes;
  int max_items_seen;
} Fake;

static uint64_t
mix(uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

static void
fake_row(Fake *f, int seq, int32_t upto, float *row)
{
  uint64_t h = 1469598103934665603ULL;
  for (int32_t i = 0; i <= upto; i++)
    h = mix(h ^ (uint64_t) f->tokens[seq][i] * 0x9E3779B97F4A7C15ULL);
  for (int32_t v = 0; v < f->n_vocab; v++) {
    uint64_t r = mix(h + (uint64_t) v);
    row[v] = (float) ((double) (r >> 11) * 0x1.0p-53 * 8.0 - 4.0);
  }
  if (f->script && seq == 0) {
    size_t k = (size_t) upto + 1 - f->script_base;
    if (upto + 1 >= (int32_t) f->script_base && k < f->n_script)
      row[f->script[k]] = 100.0f;
  }
}

static bool
fake_decode(void *self, const HnGenBatchItem *items, size_t n, HnError *err)
{
  Fake *f = self;
  f->decodes++;
  if ((int) n > f->max_items_seen)
    f->max_items_seen = (int) n;
  f->n_rows = 0;
  for (size_t i = 0; i < n; i++) {
    const HnGenBatchItem *it = &items[i];
    if (it->seq < 0 || it->seq > 1 || it->pos < 0 || it->pos >= MAX_CTX)
      return hn_error_set(err, HN_ERR_INVALID_ARG, "bad item");
    if (it->pos != f->len[it->seq])
      return hn_error_set(err, HN_ERR_INVALID_ARG, "position %d out of order (have %d)", it->pos,
                          f->len[it->seq]);
    f->tokens[it->seq][it->pos] = it->token;
    f->len[it->seq]++;
  }
  for (size_t i = 0; i < n; i++)
    if (items[i].want_logits)
      fake_row(f, items[i].seq, items[i].pos, f->rows + (f->n_rows++) * (size_t) f->n_vocab);
  return true;
}

static const float *
fake_logits(void *self, size_t k)
{
  Fake *f = self;
  return k < f->n_rows ? f->rows + k * (size_t) f->n_vocab : NULL;
}

static void
fake_truncate(void *self, int32_t seq, int32_t from)
{
  Fake *f = self;
  if (f->len[seq] > from)
    f->len[seq] = from;
}

static bool
fake_is_eog(void *self, int32_t t)
{
  return t == ((Fake *) self)->eog;
}

static const char *
fake_bytes(void *self, int32_t t, size_t *len)
{
  Fake *f = self;
  *len = f->lens[t];
  return f->bytes[t];
}

/* Vocabulary: the pieces below (ids 0..), then random combinations; last id = EOG. */
static const char *const pieces[] = {
  "Hello", " wor", "ld", "</", "s>", "\xC3", "\xA9", "\n", "{", "}", "[", "]", "\"", ":", ",",
  " ", "yes", "no", "y", "es", "n", "o", "-", " item", "1", "2", "0", "9", ".", "e", "+",
  "(", ")", "*", "/", "=", "true", "false", "null", "a", "b", "\\", "u", "\": ", "\", \"",
  "é", "€", "\xE2\x82", "\xAC", "tr", "ue", "fal", "se", "nu", "ll", "\t", "x", "z",
};

static Fake *
fake_new(int32_t n_vocab)
{
  Fake *f = g_new0(Fake, 1);
  f->n_vocab = n_vocab;
  f->eog = n_vocab - 1;
  f->bytes = g_new0(char *, n_vocab);
  f->lens = g_new0(uint32_t, n_vocab);
  GRand *r = g_rand_new_with_seed(2024);
  for (int32_t i = 0; i < n_vocab - 1; i++) {
    GString *s = g_string_new(NULL);
    int32_t n_pieces = (int32_t) G_N_ELEMENTS(pieces);
    if (i < n_pieces)
      g_string_append(s, pieces[i]);
    else if (i < n_pieces + 95) /* every printable ASCII character, as real vocabularies have */
      g_string_append_c(s, (char) (' ' + (i - n_pieces)));
    else {
      int n = g_rand_int_range(r, 1, 4);
      for (int k = 0; k < n; k++)
        g_string_append(s, pieces[g_rand_int_range(r, 0, G_N_ELEMENTS(pieces))]);
    }
    f->lens[i] = (uint32_t) s->len;
    f->bytes[i] = g_string_free(s, FALSE);
  }
  f->bytes[n_vocab - 1] = g_strdup("");
  f->rows = g_new(float, (size_t) n_vocab * 2 * MAX_CTX);
  g_rand_free(r);
  return f;
}

static void
fake_free(Fake *f)
{
  for (int32_t i = 0; i < f->n_vocab; i++)
    g_free(f->bytes[i]);
  g_free(f->bytes);
  g_free(f->lens);
  g_free(f->rows);
  g_free(f);
}

static HnGenBackend
backend_of(Fake *f)
{
  return (HnGenBackend){ .self = f, .n_vocab = f->n_vocab, .n_ctx = MAX_CTX, .max_batch = 64,
                         .decode = fake_decode, .get_logits = fake_logits,
                         .kv_truncate = fake_truncate, .is_eog = fake_is_eog,
                         .token_bytes = fake_bytes };
}

/* ---- collecting output ---- */

typedef struct {
  GString *text;
  GArray *tokens;
  GPtrArray *pieces;
  int cancel_after;
  volatile bool cancel;
  GArray *rows; /* float rows seen by the sampler, when recording */
  int32_t n_vocab;
} Sink;

static bool
on_token(int32_t token, const char *text, size_t len, void *user)
{
  Sink *s = user;
  g_string_append_len(s->text, text, (gssize) len);
  g_ptr_array_add(s->pieces, g_strndup(text, len));
  if (token >= 0)
    g_array_append_val(s->tokens, token);
  if (s->cancel_after > 0 && (int) s->tokens->len >= s->cancel_after)
    s->cancel = true;
  return true;
}

static void
on_logits(const float *row, int32_t n, void *user)
{
  Sink *s = user;
  if (s->rows)
    g_array_append_vals(s->rows, row, (guint) n);
}

static void
sink_init(Sink *s)
{
  memset(s, 0, sizeof *s);
  s->text = g_string_new(NULL);
  s->tokens = g_array_new(FALSE, FALSE, sizeof(int32_t));
  s->pieces = g_ptr_array_new_with_free_func(g_free);
}

static void
sink_clear(Sink *s)
{
  g_string_free(s->text, TRUE);
  g_array_free(s->tokens, TRUE);
  g_ptr_array_free(s->pieces, TRUE);
  if (s->rows)
    g_array_free(s->rows, TRUE);
}

static const int32_t prompt[] = { 100, 101, 102, 103, 104 };

static void
test_scripted (void)
{
  Fake *f = fake_new(400);
  HnGenBackend b = backend_of(f);
  /* "Hello" " wor" "ld" "\xC3" "\xA9" "</" "s>" */
  const int32_t script[] = { 0, 1, 2, 5, 6, 3, 4, 399 };
  f->script = script;
  f->n_script = G_N_ELEMENTS(script);
  f->script_base = G_N_ELEMENTS(prompt);
  HnSamplerParams sp;
  hn_sampler_params_init(&sp);
  sp.seed = 1;
  HnGenRequest req;
  hn_gen_request_init(&req);
  req.prompt = prompt;
  req.n_prompt = G_N_ELEMENTS(prompt);
  req.sampler = &sp;
  req.on_token = on_token;
  Sink s;
  sink_init(&s);
  req.user_data = &s;
  HnGenResult res;
  HnError err = { 0 };
  /* no stop string: runs to EOG, "é" arrives whole with the second byte */
  g_assert_true(hn_generate_with_backend(&b, &req, &res, &err));
  g_assert_cmpint(res.stop_reason, ==, HN_GEN_STOP_EOG);
  g_assert_cmpstr(s.text->str, ==, "Hello world\xC3\xA9</s>");
  g_assert_cmpstr(g_ptr_array_index(s.pieces, 3), ==, "");
  g_assert_cmpstr(g_ptr_array_index(s.pieces, 4), ==, "\xC3\xA9");
  g_assert_cmpuint(res.n_generated, ==, 8);
  sink_clear(&s);

  /* stop string: the text before it, "</" held back then dropped */
  const char *stops[] = { "</s>" };
  sp.stop = stops;
  sp.n_stop = 1;
  sink_init(&s);
  req.user_data = &s;
  g_assert_true(hn_generate_with_backend(&b, &req, &res, &err));
  g_assert_cmpint(res.stop_reason, ==, HN_GEN_STOP_STRING);
  g_assert_cmpint(res.stop_string_index, ==, 0);
  g_assert_cmpstr(s.text->str, ==, "Hello world\xC3\xA9");
  g_assert_cmpstr(g_ptr_array_index(s.pieces, 5), ==, ""); /* "</" held back */
  sink_clear(&s);

  /* max tokens */
  sp.n_stop = 0;
  sp.max_new_tokens = 3;
  sink_init(&s);
  req.user_data = &s;
  g_assert_true(hn_generate_with_backend(&b, &req, &res, &err));
  g_assert_cmpint(res.stop_reason, ==, HN_GEN_STOP_MAX_TOKENS);
  g_assert_cmpuint(res.n_generated, ==, 3);
  g_assert_cmpstr(s.text->str, ==, "Hello world");
  sink_clear(&s);

  /* cancellation */
  sp.max_new_tokens = -1;
  f->script = NULL;
  sink_init(&s);
  s.cancel_after = 4;
  req.user_data = &s;
  req.cancel = &s.cancel;
  sp.logit_bias = (HnLogitBias[]){ { 399, -INFINITY } };
  sp.n_logit_bias = 1;
  g_assert_true(hn_generate_with_backend(&b, &req, &res, &err));
  g_assert_cmpint(res.stop_reason, ==, HN_GEN_STOP_CANCELLED);
  g_assert_cmpuint(res.n_generated, ==, 4);
  sink_clear(&s);

  /* context full: MAX_CTX positions */
  sink_init(&s);
  req.user_data = &s;
  req.cancel = NULL;
  g_assert_true(hn_generate_with_backend(&b, &req, &res, &err));
  g_assert_cmpint(res.stop_reason, ==, HN_GEN_STOP_CONTEXT_FULL);
  g_assert_cmpuint(res.n_generated + G_N_ELEMENTS(prompt), ==, MAX_CTX + 1);
  sink_clear(&s);

  /* bad requests */
  req.n_prompt = 0;
  g_assert_false(hn_generate_with_backend(&b, &req, &res, &err));
  g_assert_cmpint(res.stop_reason, ==, HN_GEN_STOP_ERROR);
  req.n_prompt = G_N_ELEMENTS(prompt);
  req.cfg_scale = 2.0f;
  g_assert_false(hn_generate_with_backend(&b, &req, &res, &err));
  g_assert_nonnull(strstr(err.message, "negative prompt"));
  fake_free(f);
}

/* Same seed and request: same tokens (the sampler has its own RNG). */
static void
test_reproducible (void)
{
  Fake *f = fake_new(300);
  HnGenBackend b = backend_of(f);
  HnSamplerParams sp;
  hn_sampler_params_init(&sp);
  sp.seed = 77;
  sp.max_new_tokens = 40;
  sp.temperature = 1.5f;
  HnGenRequest req;
  hn_gen_request_init(&req);
  req.prompt = prompt;
  req.n_prompt = G_N_ELEMENTS(prompt);
  req.sampler = &sp;
  req.on_token = on_token;
  GArray *runs[2];
  for (int i = 0; i < 2; i++) {
    Sink s;
    sink_init(&s);
    req.user_data = &s;
    HnGenResult res;
    HnError err = { 0 };
    g_assert_true(hn_generate_with_backend(&b, &req, &res, &err));
    g_assert_cmpuint(res.seed, ==, 77);
    runs[i] = g_array_ref(s.tokens);
    sink_clear(&s);
  }
  g_assert_cmpuint(runs[0]->len, ==, runs[1]->len);
  g_assert_cmpmem(runs[0]->data, runs[0]->len * 4, runs[1]->data, runs[1]->len * 4);
  g_array_unref(runs[0]);
  g_array_unref(runs[1]);
  fake_free(f);
}

/* ---- grammar-constrained generation ---- */

static char *
read_grammar_file(const char *name, gsize *len)
{
  const char *dir = g_getenv("HANASHI_GRAMMARS");
  g_assert_nonnull(dir);
  g_autofree char *path = g_build_filename(dir, name, NULL);
  char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, len, NULL));
  return text;
}

static HnGrammarVocab *
grammar_vocab_of(Fake *f)
{
  bool *eog = g_new0(bool, f->n_vocab);
  eog[f->eog] = true;
  HnError err = { 0 };
  HnGrammarVocab *v = hn_grammar_vocab_new(f->n_vocab, (const char *const *) f->bytes, f->lens, eog, &err);
  g_assert_nonnull(v);
  g_free(eog);
  return v;
}

/* Generates under the grammar for 20 seeds; checks every output byte-exactly against a
 * fresh parse.  Returns how many runs ended with the grammar complete. */
static int
run_grammar(Fake *f, HnGrammarVocab *gv, const char *gbnf, size_t len, int max_tokens,
            gboolean want_json, const char *label)
{
  HnError err = { 0 };
  HnGrammar *g = hn_grammar_parse(gbnf, len, NULL, &err);
  if (!g)
    g_error("%s: %s", label, err.message);
  HnGenBackend b = backend_of(f);
  int complete_runs = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    HnSamplerParams sp;
    hn_sampler_params_init(&sp);
    sp.seed = seed;
    sp.max_new_tokens = max_tokens;
    sp.temperature = 1.0f;
    HnGenRequest req;
    hn_gen_request_init(&req);
    req.prompt = prompt;
    req.n_prompt = G_N_ELEMENTS(prompt);
    req.sampler = &sp;
    req.grammar = g;
    req.grammar_vocab = gv;
    req.on_token = on_token;
    Sink s;
    sink_init(&s);
    req.user_data = &s;
    HnGenResult res;
    if (!hn_generate_with_backend(&b, &req, &res, &err)) {
      GString *so_far = g_string_new(NULL);
      for (guint i = 0; i < s.tokens->len; i++) {
        int32_t t = g_array_index(s.tokens, int32_t, i);
        g_string_append_printf(so_far, "[%d '%s'] ", t, f->bytes[t]);
      }
      g_error("%s seed %d: %s after %s", label, (int) seed, err.message, so_far->str);
    }
    /* the concatenated token bytes, checked by an independent byte-level parse */
    GString *raw = g_string_new(NULL);
    for (guint i = 0; i < s.tokens->len; i++) {
      int32_t t = g_array_index(s.tokens, int32_t, i);
      g_string_append_len(raw, f->bytes[t], f->lens[t]);
    }
    HnGrammarState *check = hn_grammar_state_new(g, NULL, &err);
    if (!hn_grammar_accept_bytes(check, raw->str, raw->len))
      g_error("%s seed %d: output violates the grammar: %s", label, (int) seed, raw->str);
    gboolean complete = hn_grammar_is_complete(check);
    hn_grammar_state_free(check);
    if (res.stop_reason == HN_GEN_STOP_EOG || res.stop_reason == HN_GEN_STOP_GRAMMAR)
      g_assert_true(complete);
    if (complete && (res.stop_reason == HN_GEN_STOP_EOG || res.stop_reason == HN_GEN_STOP_GRAMMAR)) {
      complete_runs++;
      if (want_json) {
        g_autoptr(JsonParser) parser = json_parser_new();
        GError *jerr = NULL;
        if (!json_parser_load_from_data(parser, raw->str, (gssize) raw->len, &jerr))
          g_error("%s seed %d: not JSON (%s): %s", label, (int) seed, jerr->message, raw->str);
      }
    }
    g_autofree char *shown = g_strescape(raw->str, NULL);
    g_test_message("%s seed %d: %s after %zu tokens: %.80s", label, (int) seed,
                   hn_gen_stop_reason_name(res.stop_reason), res.n_generated, shown);
    g_string_free(raw, TRUE);
    sink_clear(&s);
  }
  hn_grammar_free(g);
  return complete_runs;
}

static void
test_shipped_grammars (void)
{
  Fake *f = fake_new(3000);
  HnGrammarVocab *gv = grammar_vocab_of(f);
  const char *files[] = { "json.gbnf", "json-object.gbnf", "list.gbnf", "yes-no.gbnf", "arithmetic.gbnf" };
  for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
    gsize len;
    g_autofree char *text = read_grammar_file(files[i], &len);
    int complete = run_grammar(f, gv, text, len, 48, FALSE, files[i]);
    if (strcmp(files[i], "yes-no.gbnf") == 0)
      g_assert_cmpint(complete, ==, 20); /* bounded: always finishes */
  }
  hn_grammar_vocab_free(gv);
  fake_free(f);
}

static void
test_bounded_schemas (void)
{
  Fake *f = fake_new(3000);
  HnGrammarVocab *gv = grammar_vocab_of(f);
  const char *schemas[] = {
    "{\"type\": \"object\", \"properties\": {"
    "  \"color\": {\"enum\": [\"red\", \"green\", \"blue\"]},"
    "  \"name\": {\"type\": \"string\", \"maxLength\": 6},"
    "  \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"boolean\"}, \"maxItems\": 3},"
    "  \"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 120},"
    "  \"delta\": {\"type\": \"integer\", \"minimum\": -50, \"maximum\": 50}},"
    " \"required\": [\"color\", \"name\", \"age\"]}",
    "{\"type\": \"array\", \"items\": {\"enum\": [1, 2, \"x\", null]}, \"minItems\": 1, \"maxItems\": 4}",
    "{\"enum\": [\"yes\", \"no\"]}",
  };
  for (size_t i = 0; i < G_N_ELEMENTS(schemas); i++) {
    HnError err = { 0 };
    char *gbnf = hn_json_schema_to_gbnf(schemas[i], strlen(schemas[i]), &err);
    g_assert_nonnull(gbnf);
    /* a bounded grammar: every run must finish well within the token limit */
    int complete = run_grammar(f, gv, gbnf, strlen(gbnf), 400, TRUE, "schema");
    g_assert_cmpint(complete, ==, 20);
    free(gbnf);
  }
  hn_grammar_vocab_free(gv);
  fake_free(f);
}

/* ---- classifier-free guidance ---- */

static const int32_t negative[] = { 200, 201, 103, 104 };

static GArray *
run_cfg(Fake *f, float scale, GArray **tokens)
{
  HnGenBackend b = backend_of(f);
  b.max_batch = 4; /* several prompt batches, each mixing both sequences */
  HnSamplerParams sp;
  hn_sampler_params_init(&sp);
  sp.seed = 5;
  sp.max_new_tokens = 12;
  HnGenRequest req;
  hn_gen_request_init(&req);
  req.prompt = prompt;
  req.n_prompt = G_N_ELEMENTS(prompt);
  req.negative = negative;
  req.n_negative = G_N_ELEMENTS(negative);
  req.cfg_scale = scale;
  req.sampler = &sp;
  req.on_token = on_token;
  req.on_logits = on_logits;
  Sink s;
  sink_init(&s);
  s.rows = g_array_new(FALSE, FALSE, sizeof(float));
  req.user_data = &s;
  HnGenResult res;
  HnError err = { 0 };
  f->len[0] = f->len[1] = 0;
  g_assert_true(hn_generate_with_backend(&b, &req, &res, &err));
  GArray *rows = g_array_ref(s.rows);
  *tokens = g_array_ref(s.tokens);
  sink_clear(&s);
  return rows;
}

static void
test_cfg (void)
{
  Fake *f = fake_new(500);
  /* scale 1: no second sequence at all, identical rows and tokens */
  GArray *t1, *t_plain;
  GArray *r1 = run_cfg(f, 1.0f, &t1);
  g_assert_cmpint(f->len[1], ==, 0);
  int decodes_cfg1 = f->decodes;
  f->decodes = 0;
  HnGenBackend b = backend_of(f);
  b.max_batch = 4;
  (void) b;
  GArray *r_plain;
  {
    /* the same request without any negative prompt */
    HnSamplerParams sp;
    hn_sampler_params_init(&sp);
    sp.seed = 5;
    sp.max_new_tokens = 12;
    HnGenRequest req;
    hn_gen_request_init(&req);
    req.prompt = prompt;
    req.n_prompt = G_N_ELEMENTS(prompt);
    req.sampler = &sp;
    req.on_token = on_token;
    req.on_logits = on_logits;
    Sink s;
    sink_init(&s);
    s.rows = g_array_new(FALSE, FALSE, sizeof(float));
    req.user_data = &s;
    HnGenResult res;
    HnError err = { 0 };
    f->len[0] = f->len[1] = 0;
    g_assert_true(hn_generate_with_backend(&b, &req, &res, &err));
    r_plain = g_array_ref(s.rows);
    t_plain = g_array_ref(s.tokens);
    sink_clear(&s);
  }
  g_assert_cmpint(f->decodes, ==, decodes_cfg1);
  g_assert_cmpmem(r1->data, r1->len * 4, r_plain->data, r_plain->len * 4);
  g_assert_cmpmem(t1->data, t1->len * 4, t_plain->data, t_plain->len * 4);

  /* scale 1.7: every row the sampler saw equals the formula over two separate
   * evaluations of the positive and negative sequences */
  GArray *tg;
  GArray *rg = run_cfg(f, 1.7f, &tg);
  g_assert_cmpint(f->max_items_seen, <=, 4);
  int32_t nv = f->n_vocab;
  float *pos = g_new(float, nv), *neg = g_new(float, nv), *want = g_new(float, nv);
  Fake *solo = fake_new(500);
  for (guint step = 0; step < tg->len; step++) {
    /* positive: prompt + generated[0..step) ; negative: negative + generated[0..step) */
    solo->len[0] = solo->len[1] = 0;
    int32_t seqp[64], seqn[64];
    size_t np = 0, nn = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(prompt); i++)
      seqp[np++] = prompt[i];
    for (size_t i = 0; i < G_N_ELEMENTS(negative); i++)
      seqn[nn++] = negative[i];
    for (guint i = 0; i < step; i++) {
      seqp[np++] = g_array_index(tg, int32_t, i);
      seqn[nn++] = g_array_index(tg, int32_t, i);
    }
    memcpy(solo->tokens[0], seqp, np * 4);
    memcpy(solo->tokens[1], seqn, nn * 4);
    fake_row(solo, 0, (int32_t) np - 1, pos);
    fake_row(solo, 1, (int32_t) nn - 1, neg);
    /* the formula, written out independently in double precision */
    double zp = 0, zn = 0, mp = -INFINITY, mn = -INFINITY;
    for (int32_t v = 0; v < nv; v++) {
      mp = fmax(mp, pos[v]);
      mn = fmax(mn, neg[v]);
    }
    for (int32_t v = 0; v < nv; v++) {
      zp += exp(pos[v] - mp);
      zn += exp(neg[v] - mn);
    }
    const float *got = &g_array_index(rg, float, (size_t) step * nv);
    /* compare as distributions: log_softmax of what the sampler saw */
    double mg = -INFINITY, zg = 0;
    for (int32_t v = 0; v < nv; v++)
      mg = fmax(mg, got[v]);
    for (int32_t v = 0; v < nv; v++)
      zg += exp(got[v] - mg);
    double zw = 0, mw = -INFINITY;
    for (int32_t v = 0; v < nv; v++) {
      double lp = pos[v] - mp - log(zp), ln = neg[v] - mn - log(zn);
      want[v] = (float) (ln + 1.7 * (lp - ln));
      mw = fmax(mw, want[v]);
    }
    for (int32_t v = 0; v < nv; v++)
      zw += exp(want[v] - mw);
    for (int32_t v = 0; v < nv; v++) {
      double a = got[v] - mg - log(zg), w = want[v] - mw - log(zw);
      if (fabs(a - w) > 1e-5)
        g_error("step %u token %d: guided %.8f, formula %.8f", step, v, a, w);
    }
  }
  fake_free(solo);
  g_free(pos);
  g_free(neg);
  g_free(want);
  g_array_unref(r1);
  g_array_unref(t1);
  g_array_unref(r_plain);
  g_array_unref(t_plain);
  g_array_unref(rg);
  g_array_unref(tg);
  fake_free(f);
}

static void
test_cfg_combine (void)
{
  float pos[4] = { 1.0f, 2.0f, 3.0f, -INFINITY }, neg[4] = { 3.0f, 2.0f, 1.0f, 0.0f };
  float out[4];
  double zp = log(exp(1) + exp(2) + exp(3)), zn = log(exp(3) + exp(2) + exp(1) + 1);
  hn_cfg_combine(pos, neg, 2.0f, out, 4);
  for (int i = 0; i < 3; i++) {
    double lp = pos[i] - zp, ln = neg[i] - zn;
    g_assert_cmpfloat_with_epsilon(out[i], ln + 2.0 * (lp - ln), 1e-6);
  }
  g_assert_true(isinf(out[3]) && out[3] < 0); /* banned in the positive row stays banned */
  hn_cfg_combine(pos, neg, 0.0f, out, 4);
  for (int i = 0; i < 4; i++)
    g_assert_cmpfloat_with_epsilon(out[i], neg[i] - zn, 1e-6);
  float row[3] = { 0.0f, 0.0f, 0.0f };
  hn_log_softmax(row, 3);
  for (int i = 0; i < 3; i++)
    g_assert_cmpfloat_with_epsilon(row[i], -log(3.0), 1e-6);
}

int
main (int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/generate/scripted", test_scripted);
  g_test_add_func("/generate/reproducible", test_reproducible);
  g_test_add_func("/generate/shipped-grammars", test_shipped_grammars);
  g_test_add_func("/generate/bounded-schemas", test_bounded_schemas);
  g_test_add_func("/generate/cfg", test_cfg);
  g_test_add_func("/generate/cfg-combine", test_cfg_combine);
  return g_test_run();
}
