/* bench-tokenize — tokenizer speed: 100 KB of English-like text with the LLaMA
 * SentencePiece and the GPT-2 byte-level BPE vocabularies (median of repetitions), and
 * 1 MB of a single repeated character, which must stay far from quadratic.  The same for a
 * SentencePiece vocabulary of Gemma's size (262 144 tokens), built here: Gemma's control
 * and user-defined tokens, the LLaMA pieces with their scores, and filler pieces (CJK,
 * Hangul, random Latin, Cyrillic and Devanagari words) — plus the size of its tables.
 * A benchmark, not a test: it prints numbers and fails only on errors.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-gguf-writer.h"
#include "hn-gguf.h"
#include "hn-unicode.h"
#include "hn-vocab-private.h" /* to add up the tables' sizes */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
median_ms(const HnVocab *v, const char *text, size_t len, bool parse_special, int reps, int32_t *ids, int32_t n_max,
          int32_t *n_out)
{
  double t[32];
  for (int r = 0; r < reps; r++) {
    HnError err = { 0 };
    double t0 = hn_time_now();
    int32_t n = hn_tokenize(v, text, len, false, parse_special, ids, n_max, &err);
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

/* Bytes the vocabulary's tables take (allocated; the SPM pair set is touched sparsely). */
static size_t
vocab_bytes(const HnVocab *v)
{
  size_t text = 0;
  for (int32_t i = 0; i < v->n_tokens; i++)
    text += v->tokens[i].text_len;
  size_t n = (size_t)v->n_tokens;
  size_t total = n * sizeof(HnVocabToken) + 2 * text + (v->text_index_mask + 1) * sizeof(int32_t) + n /* eog */ +
                 n * sizeof(int32_t) /* specials */;
  if (v->merges != NULL)
    total += (v->merges_mask + 1) * sizeof(HnMergeSlot);
  if (v->spm_pairs != NULL)
    total += (v->spm_pairs_mask + 1) * sizeof(uint64_t);
  return total;
}

#define GEMMA_N_TOKENS 262144

/* Appends a piece (copied into the pool) with its score and type. */
typedef struct {
  char **texts;
  float *scores;
  int32_t *types;
  size_t n;
} Pieces;

static void
add_piece(Pieces *p, const char *text, size_t len, float score, int32_t type)
{
  char *copy = malloc(len + 1);
  memcpy(copy, text, len);
  copy[len] = '\0';
  p->texts[p->n] = copy;
  p->scores[p->n] = score;
  p->types[p->n] = type;
  p->n++;
}

/* A random word of n letters from [first, first + range), "▁"-prefixed when asked. */
static size_t
random_word(char *buf, bool space, int n, uint32_t first, uint32_t range)
{
  size_t o = 0;
  if (space) {
    memcpy(buf, "\xe2\x96\x81", 3);
    o = 3;
  }
  for (int i = 0; i < n; i++)
    o += (size_t)hn_utf8_encode(first + rnd() % range, buf + o);
  return o;
}

/* Writes the Gemma-sized vocabulary to `path`; false on errors (printed). */
static bool
write_gemma_sized(const char *llama_path, const char *path)
{
  HnError err = { 0 };
  HnGguf *g = hn_gguf_open(llama_path, &err);
  HnGgufArray toks, scores, types;
  if (g == NULL || !hn_gguf_get_array(g, "tokenizer.ggml.tokens", &toks, &err) ||
      !hn_gguf_get_array(g, "tokenizer.ggml.scores", &scores, &err) ||
      !hn_gguf_get_array(g, "tokenizer.ggml.token_type", &types, &err)) {
    fprintf(stderr, "%s: %s\n", llama_path, err.message);
    hn_gguf_close(g);
    return false;
  }
  Pieces p = { calloc(GEMMA_N_TOKENS, sizeof(char *)), calloc(GEMMA_N_TOKENS, sizeof(float)),
               calloc(GEMMA_N_TOKENS, sizeof(int32_t)), 0 };
  HnStr *strs = calloc(toks.count, sizeof(HnStr));
  char buf[128];
  static const char *const fixed[] = { "<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[multimodal]" };
  for (size_t i = 0; i < 6; i++)
    add_piece(&p, fixed[i], strlen(fixed[i]), 0, i == 3 ? HN_TOKEN_TYPE_UNKNOWN : HN_TOKEN_TYPE_CONTROL);
  for (int i = 0; i < 6242; i++) {
    int l = snprintf(buf, sizeof buf, "<unused%d>", i);
    add_piece(&p, buf, (size_t)l, 0, HN_TOKEN_TYPE_CONTROL);
  }
  add_piece(&p, "<start_of_turn>", 15, 0, HN_TOKEN_TYPE_CONTROL);
  add_piece(&p, "<end_of_turn>", 13, 0, HN_TOKEN_TYPE_CONTROL);
  for (int n = 2; n <= 31; n++) {
    memset(buf, ' ', (size_t)n);
    add_piece(&p, buf, (size_t)n, 0, HN_TOKEN_TYPE_USER_DEFINED);
  }
  static const char *const tags[] = { "table", "tr", "td", "th", "thead", "tbody", "h1", "h2", "h3", "h4",
                                      "h5", "h6", "p", "b", "i", "u", "s", "a", "ul", "ol", "li", "div",
                                      "span", "code", "pre", "em", "strong", "br", "hr", "img", "sup", "sub" };
  for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
    int l = snprintf(buf, sizeof buf, "<%s>", tags[i]);
    add_piece(&p, buf, (size_t)l, 0, HN_TOKEN_TYPE_USER_DEFINED);
    l = snprintf(buf, sizeof buf, "</%s>", tags[i]);
    add_piece(&p, buf, (size_t)l, 0, HN_TOKEN_TYPE_USER_DEFINED);
  }
  for (int b = 0; b < 256; b++) {
    int l = snprintf(buf, sizeof buf, "<0x%02X>", b);
    add_piece(&p, buf, (size_t)l, 0, HN_TOKEN_TYPE_BYTE);
  }
  hn_gguf_array_strings(&toks, strs);
  for (uint64_t i = 0; i < toks.count; i++)
    if (hn_gguf_array_int(&types, i) == HN_TOKEN_TYPE_NORMAL)
      add_piece(&p, strs[i].data, strs[i].len, (float)hn_gguf_array_float(&scores, i), HN_TOKEN_TYPE_NORMAL);
  free(strs);
  hn_gguf_close(g);
  /* filler below every LLaMA score: whole CJK and Hangul blocks, then random words */
  float score = -100000.0f;
  for (uint32_t cp = 0x4E00; cp <= 0x9FFF && p.n < GEMMA_N_TOKENS; cp++) {
    int l = hn_utf8_encode(cp, buf);
    add_piece(&p, buf, (size_t)l, score--, HN_TOKEN_TYPE_NORMAL);
  }
  for (uint32_t cp = 0xAC00; cp <= 0xD7A3 && p.n < GEMMA_N_TOKENS; cp++) {
    int l = hn_utf8_encode(cp, buf);
    add_piece(&p, buf, (size_t)l, score--, HN_TOKEN_TYPE_NORMAL);
  }
  while (p.n < GEMMA_N_TOKENS) {
    uint32_t r = rnd() % 10;
    int n = 2 + (int)(rnd() % 9);
    size_t l = r < 6   ? random_word(buf, true, n, 'a', 26)
               : r < 8 ? random_word(buf, false, n, 'a', 26)
               : r < 9 ? random_word(buf, true, n, 0x0430, 32)
                       : random_word(buf, true, n, 0x0915, 37);
    add_piece(&p, buf, l, score--, HN_TOKEN_TYPE_NORMAL);
  }
  HnGgufWriter *w = hn_gguf_writer_new(&err);
  bool ok = w != NULL && hn_gguf_writer_set_str(w, "general.architecture", "gemma3", &err) &&
            hn_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", &err) &&
            hn_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)p.texts, p.n, &err) &&
            hn_gguf_writer_set_array(w, "tokenizer.ggml.scores", HN_GGUF_FLOAT32, p.scores, p.n, &err) &&
            hn_gguf_writer_set_array(w, "tokenizer.ggml.token_type", HN_GGUF_INT32, p.types, p.n, &err) &&
            hn_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 2, &err) &&
            hn_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 1, &err) &&
            hn_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 3, &err) &&
            hn_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false, &err) &&
            hn_gguf_writer_begin(w, path, &err) && hn_gguf_writer_finish(w, &err);
  if (!ok)
    fprintf(stderr, "%s: %s\n", path, err.message);
  hn_gguf_writer_free(w);
  for (size_t i = 0; i < p.n; i++)
    free(p.texts[i]);
  free(p.texts);
  free(p.scores);
  free(p.types);
  return ok;
}

static bool
bench_file(const char *name, const char *path, const char *text, size_t text_len, char *same, size_t big, int32_t *ids)
{
  HnError err = { 0 };
  HnGguf *g = hn_gguf_open(path, &err);
  if (g == NULL) {
    fprintf(stderr, "%s\n", err.message);
    return false;
  }
  double t0 = hn_time_now();
  HnVocab *v = hn_vocab_load(g, &err);
  double load_ms = (hn_time_now() - t0) * 1000.0;
  hn_gguf_close(g);
  if (v == NULL) {
    fprintf(stderr, "%s\n", err.message);
    return false;
  }
  int32_t n;
  double ms = median_ms(v, text, text_len, false, 9, ids, (int32_t)big, &n);
  printf("%-10s %d tokens, load %.1f ms, tables %.1f MiB\n", name, hn_vocab_n_tokens(v), load_ms,
         vocab_bytes(v) / 1048576.0);
  printf("%-10s 100 KB English-like text: %d tokens, median %.2f ms (%.1f MB/s)\n", name, n, ms,
         text_len / 1e3 / ms);
  const char chars[] = { 'a', ' ', '\n' };
  for (size_t c = 0; c < sizeof chars; c++) {
    memset(same, chars[c], big);
    double ms1 = median_ms(v, same, big, false, 3, ids, (int32_t)big + 16, &n);
    printf("%-10s 1 MB of 0x%02x: %d tokens, median %.1f ms\n", name, chars[c], n, ms1);
  }
  /* markup: every '<' is where special tokens (thousands in Gemma's vocabulary) may start;
   * parse_special on, as for a chat prompt */
  static const char markup[] = "<ul><li>item</li>\n  <li><code>x < y</code></li></ul>\n";
  size_t html_len = 100 * 1024;
  for (size_t o = 0; o < html_len; o += sizeof markup - 1)
    memcpy(same + o, markup, HN_MIN(sizeof markup - 1, html_len - o));
  double ms2 = median_ms(v, same, html_len, true, 9, ids, (int32_t)big, &n);
  printf("%-10s 100 KB of HTML markup: %d tokens, median %.2f ms\n", name, n, ms2);
  hn_vocab_free(v);
  return true;
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
  char path[4096];
  for (size_t k = 0; k < 2; k++) {
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", td, names[k]);
    if (!bench_file(names[k], path, text, text_len, same, big, ids))
      return 1;
  }
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char dir[2048];
  snprintf(dir, sizeof dir, "%s/hanashi-bench-XXXXXX", tmp);
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  char llama[4096];
  snprintf(llama, sizeof llama, "%s/vocab/ggml-vocab-llama-spm.gguf", td);
  snprintf(path, sizeof path, "%s/gemma-sized.gguf", dir);
  bool ok = write_gemma_sized(llama, path) && bench_file("spm-262k", path, text, text_len, same, big, ids);
  unlink(path);
  rmdir(dir);
  free(text);
  free(same);
  free(ids);
  return ok ? 0 : 1;
}
