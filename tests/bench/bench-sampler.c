/* bench-sampler — cost of the sampler chain and of the grammar mask on a synthetic
 * 150k-token vocabulary, in microseconds per token.  A benchmark, not a test: it prints
 * numbers and only fails if something errors.
 *
 * The vocabulary mixes what real BPE vocabularies hold: single bytes, words with and
 * without a leading space, digit runs, JSON punctuation and multi-byte UTF-8 pieces.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-grammar.h"
#include "hn-sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_VOCAB = 150000 };

static uint64_t bench_state = 0x1234567;

static uint32_t
rnd(void)
{
  bench_state = bench_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t) (bench_state >> 33);
}

static double
gauss(void)
{
  double u = (rnd() + 1.0) / 2147483650.0, v = (rnd() + 1.0) / 2147483650.0;
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static void
make_vocab(char **bytes, uint32_t *lens, bool *eog)
{
  static const char *const punct[] = { "{", "}", "[", "]", "\"", ":", ",", "\": ", "\", \"",
                                       "},", "],", "{\"", "[\"", " {", "\n", "\\n", "\\" };
  static const char *const mb[] = { "é", "ü", "€", "日本", "語", "😀", "\xC3", "\xE2\x82" };
  const char *letters = "etaoinshrdlucmfwypvbgkqjxz";
  for (int i = 0; i < N_VOCAB; i++) {
    char buf[64];
    size_t n = 0;
    if (i < 256) {
      buf[n++] = (char) i;
    } else if (i < 256 + (int) (sizeof punct / sizeof *punct)) {
      n = strlen(punct[i - 256]);
      memcpy(buf, punct[i - 256], n);
    } else {
      int kind = (int) (rnd() % 10);
      if (kind == 0) { /* digits */
        int len = 1 + (int) (rnd() % 4);
        for (int k = 0; k < len; k++)
          buf[n++] = (char) ('0' + rnd() % 10);
      } else if (kind == 1) { /* multibyte */
        const char *m = mb[rnd() % (sizeof mb / sizeof *mb)];
        if (rnd() % 2)
          buf[n++] = ' ';
        memcpy(buf + n, m, strlen(m));
        n += strlen(m);
      } else if (kind == 2) { /* punctuation + letters */
        const char *pu = punct[rnd() % (sizeof punct / sizeof *punct)];
        memcpy(buf, pu, strlen(pu));
        n = strlen(pu);
        int len = 1 + (int) (rnd() % 5);
        for (int k = 0; k < len; k++)
          buf[n++] = letters[rnd() % 26];
      } else { /* words */
        if (rnd() % 3)
          buf[n++] = ' ';
        int len = 2 + (int) (rnd() % 9);
        for (int k = 0; k < len; k++)
          buf[n++] = letters[(rnd() % 26 + rnd() % 26) / 2];
        if (rnd() % 5 == 0)
          buf[0] = (char) (buf[0] - 32 * (buf[0] >= 'a'));
      }
    }
    bytes[i] = malloc(n ? n : 1);
    memcpy(bytes[i], buf, n);
    lens[i] = (uint32_t) n;
    eog[i] = false;
  }
  eog[N_VOCAB - 1] = true;
  lens[N_VOCAB - 1] = 0;
}

static char *
read_all(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t) n + 1);
  *len = fread(b, 1, (size_t) n, f);
  b[*len] = 0;
  fclose(f);
  return b;
}

static void
fill_logits(float *logits, int step)
{
  /* a peaked, model-like row: gaussian logits, a handful of strong candidates */
  for (int i = 0; i < N_VOCAB; i++)
    logits[i] = (float) (gauss() * 2.0);
  for (int k = 0; k < 8; k++)
    logits[rnd() % N_VOCAB] += 8.0f + (float) (step % 3);
}

static double
bench_chain(const char *label, HnSamplerParams *p, float **rows, int n_rows)
{
  HnError err = { 0 };
  HnSampler *s = hn_sampler_new(p, N_VOCAB, 4096, &err);
  if (!s) {
    fprintf(stderr, "%s\n", err.message);
    exit(1);
  }
  int iters = 0;
  double t0 = hn_time_now();
  for (int rep = 0; rep < 3; rep++)
    for (int i = 0; i < n_rows; i++, iters++) {
      int32_t t = hn_sampler_sample(s, rows[i], NULL, &err);
      hn_sampler_accept(s, t);
    }
  double us = (hn_time_now() - t0) * 1e6 / iters;
  printf("%-52s %9.1f us/token\n", label, us);
  hn_sampler_free(s);
  return us;
}

int
main(int argc, char **argv)
{
  const char *dir = getenv("HANASHI_GRAMMARS");
  char **bytes = calloc(N_VOCAB, sizeof *bytes);
  uint32_t *lens = calloc(N_VOCAB, sizeof *lens);
  bool *eog = calloc(N_VOCAB, sizeof *eog);
  make_vocab(bytes, lens, eog);

  enum { N_ROWS = 64 };
  float *rows[N_ROWS];
  for (int i = 0; i < N_ROWS; i++) {
    rows[i] = malloc(N_VOCAB * sizeof(float));
    fill_logits(rows[i], i);
  }
  printf("sampler chain, %d-token vocabulary\n", N_VOCAB);
  HnSamplerParams p;
  hn_sampler_params_init(&p);
  p.seed = 1;
  bench_chain("defaults (top-k 40, top-p .95, min-p .05, T .8)", &p, rows, N_ROWS);
  p.repeat_penalty = 1.1f;
  p.frequency_penalty = 0.2f;
  p.presence_penalty = 0.2f;
  p.repeat_last_n = 256;
  bench_chain("defaults + penalties over 256 tokens", &p, rows, N_ROWS);
  hn_sampler_params_init(&p);
  p.seed = 1;
  p.top_k = 0;
  bench_chain("top-k off (top-p partial sort on all tokens)", &p, rows, N_ROWS);
  p.typical_p = 0.9f;
  bench_chain("top-k off, typical-p .9 (full sort)", &p, rows, N_ROWS);
  hn_sampler_params_init(&p);
  p.seed = 1;
  p.mirostat = 2;
  bench_chain("mirostat 2", &p, rows, N_ROWS);
  hn_sampler_params_init(&p);
  p.temperature = 0.0f;
  bench_chain("greedy", &p, rows, N_ROWS);

  if (dir == NULL) {
    printf("HANASHI_GRAMMARS not set: grammar benchmarks skipped\n");
    return 0;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/json.gbnf", dir);
  size_t len;
  char *text = read_all(path, &len);
  if (!text) {
    fprintf(stderr, "cannot read %s\n", path);
    return 1;
  }
  HnError err = { 0 };
  double t0 = hn_time_now();
  HnGrammarVocab *gv = hn_grammar_vocab_new(N_VOCAB, (const char *const *) bytes, lens, eog, &err);
  printf("%-52s %9.1f ms (once per model)\n", "grammar vocabulary index", (hn_time_now() - t0) * 1e3);
  HnGrammar *g = hn_grammar_parse(text, len, NULL, &err);
  if (!gv || !g) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  HnGrammarState *gs = hn_grammar_state_new(g, gv, &err);
  HnCandidate *cands = malloc(N_VOCAB * sizeof *cands);

  /* full mask in representative states of a JSON document */
  const char *doc = "{\"name\": \"Ada Lovelace\", \"born\": 1815, \"tags\": [\"math\", \"poet\"]}";
  double mask_total = 0;
  int masks = 0;
  double worst = 0;
  for (size_t i = 0; i < strlen(doc); i++) {
    for (int k = 0; k < N_VOCAB; k++)
      cands[k] = (HnCandidate){ k, 0.0f, 0.0f };
    double t1 = hn_time_now();
    hn_grammar_mask(gs, cands, N_VOCAB);
    double dt = hn_time_now() - t1;
    mask_total += dt;
    if (dt > worst)
      worst = dt;
    masks++;
    hn_grammar_accept_bytes(gs, doc + i, 1);
  }
  printf("%-52s %9.1f us (worst %.1f us)\n", "JSON grammar: full-vocabulary mask, mean",
         mask_total / masks * 1e6, worst * 1e6);

  /* generation with the grammar: random logits are the worst case, since the lazily
   * checked first choice is almost always rejected and the whole vocabulary is masked */
  hn_sampler_params_init(&p);
  p.seed = 1;
  HnSampler *s = hn_sampler_new(&p, N_VOCAB, 4096, &err);
  hn_grammar_state_reset(gs);
  int steps = 0;
  t0 = hn_time_now();
  for (int rep = 0; rep < 4; rep++)
    for (int i = 0; i < N_ROWS; i++) {
      int32_t t = hn_sampler_sample(s, rows[i], gs, &err);
      if (t < 0 || eog[t] || !hn_grammar_can_continue(gs)) {
        hn_grammar_state_reset(gs);
        continue;
      }
      hn_grammar_accept_token(gs, t);
      hn_sampler_accept(s, t);
      steps++;
    }
  printf("%-52s %9.1f us/token\n", "defaults + JSON grammar, random logits (worst case)",
         (hn_time_now() - t0) * 1e6 / steps);

  /* the common case: the model already wants a token the grammar allows */
  hn_grammar_state_reset(gs);
  hn_sampler_reset(s);
  float *row = malloc(N_VOCAB * sizeof(float));
  steps = 0;
  double spent = 0;
  for (int i = 0; i < 200; i++) {
    fill_logits(row, i);
    /* make an allowed token the clear favourite */
    for (int k = 0; k < N_VOCAB; k++)
      cands[k] = (HnCandidate){ k, 0.0f, 0.0f };
    hn_grammar_mask(gs, cands, N_VOCAB);
    for (int k = 0; k < N_VOCAB; k++)
      if (cands[k].logit == 0.0f && !eog[k]) {
        row[k] += 30.0f;
        break;
      }
    double t1 = hn_time_now();
    int32_t t = hn_sampler_sample(s, row, gs, &err);
    if (t >= 0 && !eog[t])
      hn_grammar_accept_token(gs, t);
    spent += hn_time_now() - t1;
    steps++;
    if (t < 0 || eog[t] || !hn_grammar_can_continue(gs))
      hn_grammar_state_reset(gs);
  }
  printf("%-52s %9.1f us/token\n", "defaults + JSON grammar, model agrees (lazy path)",
         spent * 1e6 / steps);

  hn_sampler_free(s);
  free(row);
  free(cands);
  hn_grammar_state_free(gs);
  hn_grammar_free(g);
  hn_grammar_vocab_free(gv);
  free(text);
  for (int i = 0; i < N_ROWS; i++)
    free(rows[i]);
  for (int i = 0; i < N_VOCAB; i++)
    free(bytes[i]);
  free(bytes);
  free(lens);
  free(eog);
  (void) argc;
  (void) argv;
  return 0;
}
