/* bench-tokenize — tokenizer speed: 100 KB of English-like text with the LLaMA
 * SentencePiece and the GPT-2 byte-level BPE vocabularies (median of repetitions), and
 * 1 MB of a single repeated character, which must stay far from quadratic.  A benchmark,
 * not a test: it prints numbers and fails only on errors. */
#include "hn-gguf.h"
#include "hn-vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 42;

static uint32_t
rnd(void)
{
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(state >> 33);
}

/* Deterministic English-like prose: common words, capitals after full stops, commas,
 * numbers and paragraph breaks. */
static char *
make_text(size_t size)
{
  static const char *const words[] = {
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
    "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you",
    "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will",
    "would", "who", "so", "no", "program", "license", "software", "freedom", "distribute", "modify", "source",
    "code", "covered", "work", "conditions", "copyright", "permission", "however", "everything", "particular",
    "information", "understanding", "government", "development", "international", "tokenizer", "yesterday",
  };
  char *text = malloc(size + 64);
  size_t o = 0;
  bool cap = true;
  while (o < size) {
    const char *w = words[rnd() % (sizeof words / sizeof words[0])];
    size_t l = strlen(w);
    memcpy(text + o, w, l);
    if (cap && text[o] >= 'a' && text[o] <= 'z')
      text[o] -= 32;
    cap = false;
    o += l;
    uint32_t r = rnd() % 100;
    if (r < 6) {
      text[o++] = '.';
      cap = true;
    } else if (r < 12)
      text[o++] = ',';
    else if (r < 13)
      o += (size_t)sprintf(text + o, " %u", rnd() % 10000);
    if (r == 0) {
      memcpy(text + o, "\n\n", 2);
      o += 2;
    } else
      text[o++] = ' ';
  }
  text[size] = '\0';
  return text;
}

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double
median_ms(const HnVocab *v, const char *text, size_t len, int reps, int32_t *ids, int32_t n_max, int32_t *n_out)
{
  double t[32];
  for (int r = 0; r < reps; r++) {
    HnError err = { 0 };
    double t0 = hn_time_now();
    int32_t n = hn_tokenize(v, text, len, false, false, ids, n_max, &err);
    t[r] = (hn_time_now() - t0) * 1000.0;
    if (n < 0) {
      fprintf(stderr, "tokenize failed: %d %s\n", n, err.message);
      exit(1);
    }
    *n_out = n;
  }
  qsort(t, (size_t)reps, sizeof(double), cmp_double);
  return t[reps / 2];
}

int
main(void)
{
  const char *td = getenv("HANASHI_TESTDATA");
  if (td == NULL)
    return 77;
  const char *names[] = { "llama-spm", "gpt-2" };
  size_t text_len = 100 * 1024, big = 1024 * 1024;
  char *text = make_text(text_len);
  char *same = malloc(big);
  int32_t *ids = malloc(sizeof(int32_t) * (big + 16));
  for (size_t k = 0; k < 2; k++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", td, names[k]);
    HnError err = { 0 };
    HnGguf *g = hn_gguf_open(path, &err);
    if (g == NULL) {
      fprintf(stderr, "%s\n", err.message);
      return 1;
    }
    double t0 = hn_time_now();
    HnVocab *v = hn_vocab_load(g, &err);
    double load_ms = (hn_time_now() - t0) * 1000.0;
    hn_gguf_close(g);
    if (v == NULL) {
      fprintf(stderr, "%s\n", err.message);
      return 1;
    }
    int32_t n;
    double ms = median_ms(v, text, text_len, 9, ids, (int32_t)big, &n);
    printf("%-10s load %.1f ms; 100 KB English-like text: %d tokens, median %.2f ms (%.1f MB/s)\n", names[k],
           load_ms, n, ms, text_len / 1e3 / ms);
    const char chars[] = { 'a', ' ', '\n' };
    for (size_t c = 0; c < sizeof chars; c++) {
      memset(same, chars[c], big);
      double ms1 = median_ms(v, same, big, 3, ids, (int32_t)big + 16, &n);
      printf("%-10s 1 MB of 0x%02x: %d tokens, median %.1f ms\n", names[k], chars[c], n, ms1);
    }
    hn_vocab_free(v);
  }
  free(text);
  free(same);
  free(ids);
  return 0;
}
