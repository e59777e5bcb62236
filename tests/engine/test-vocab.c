/* Tokenizer tests: every vocabulary in testdata/vocab against its reference ids, the
 * reference prompts of the test models, special tokens, the streaming decoder and random
 * bytes into every tokenizer.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-gguf.h"
#include "hn-gguf-writer.h"
#include <glib/gstdio.h>
#include "hn-vocab-private.h" /* hn_pretokenize, for the splits without a test vocabulary */

#include <glib.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "cli-run.h"

static const char *
testdata (void)
{
  return g_getenv ("HANASHI_TESTDATA");
}

static HnVocab *
load_vocab (const char *path)
{
  HnError err = { 0 };
  HnGguf *g = hn_gguf_open (path, &err);
  g_assert_nonnull (g);
  HnVocab *v = hn_vocab_load (g, &err);
  if (v == NULL)
    g_error ("%s: %s", path, err.message);
  hn_gguf_close (g);
  return v;
}

static GArray *
tokenize (const HnVocab *v, const char *text, size_t len, bool add_special, bool parse_special)
{
  HnError err = { 0 };
  int32_t n = hn_tokenize (v, text, len, add_special, parse_special, NULL, 0, &err);
  g_assert_cmpint (n, !=, INT32_MIN);
  GArray *ids = g_array_sized_new (FALSE, TRUE, sizeof (int32_t), (guint) ABS (n));
  g_array_set_size (ids, (guint) ABS (n));
  if (n != 0) {
    int32_t m = hn_tokenize (v, text, len, add_special, parse_special, (int32_t *) ids->data, ABS (n), &err);
    g_assert_cmpint (m, ==, ABS (n));
  }
  return ids;
}

static char *
ids_to_string (const int32_t *ids, size_t n)
{
  GString *s = g_string_new ("");
  for (size_t i = 0; i < n; i++)
    g_string_append_printf (s, "%s%d", i ? " " : "", ids[i]);
  return g_string_free (s, FALSE);
}

static void
test_vocab_file (gconstpointer data)
{
  const char *path = data;
  HnVocab *v = load_vocab (path);
  g_autofree char *inp_path = g_strconcat (path, ".inp", NULL);
  g_autofree char *out_path = g_strconcat (path, ".out", NULL);
  g_autofree char *inp = NULL, *outs = NULL;
  g_assert_true (g_file_get_contents (inp_path, &inp, NULL, NULL));
  g_assert_true (g_file_get_contents (out_path, &outs, NULL, NULL));
  g_auto (GStrv) strings = g_strsplit (inp, "\n__ggml_vocab_test__\n", -1);
  g_auto (GStrv) lines = g_strsplit (outs, "\n", -1);
  guint n_strings = g_strv_length (strings);
  /* the file ends with a separator line, leaving an empty last element */
  if (n_strings > 0 && strings[n_strings - 1][0] == '\0')
    n_strings--;
  g_assert_cmpuint (g_strv_length (lines), >=, n_strings);
  int failures = 0, lossy = 0;
  for (guint i = 0; i < n_strings; i++) {
    const char *s = strings[i];
    GArray *ids = tokenize (v, s, strlen (s), false, false);
    g_autofree char *got = ids_to_string ((int32_t *) ids->data, ids->len);
    g_autofree char *want = g_strstrip (g_strdup (lines[i]));
    if (strcmp (got, want) != 0) {
      g_test_message ("%s: string %u %s\n  want %s\n  got  %s", path, i, s, want, got);
      failures++;
    }
    char buf[8192];
    HnError err = { 0 };
    int64_t n = hn_detokenize (v, (int32_t *) ids->data, ids->len, true, false, buf, sizeof buf, &err);
    g_assert_cmpint (n, >=, 0);
    if (n > (int64_t) sizeof buf || (size_t) n != strlen (s) || memcmp (buf, s, strlen (s)) != 0) {
      lossy++;
      g_test_message ("not lossless: string %u %s", i, s);
    }
    g_array_unref (ids);
  }
  g_test_message ("%s: %u strings, %d mismatches, %d not round-tripping", path, n_strings, failures, lossy);
  g_assert_cmpint (failures, ==, 0);
  g_assert_cmpint (lossy, ==, 0);
  hn_vocab_free (v);
}

/* data: "models/NAME.gguf" or "arch/models/NAME.gguf"; the references lie in the sibling
 * reference/ folder.  Only the vocabulary is loaded, so the architecture models of arch/
 * are checked whatever the forward pass supports. */
static void
test_reference_prompts (gconstpointer data)
{
  const char *rel = data;
  g_autofree char *gguf = g_build_filename (testdata (), rel, NULL);
  g_autofree char *models_dir = g_path_get_dirname (gguf);
  g_autofree char *parent = g_path_get_dirname (models_dir);
  g_autofree char *dir = g_build_filename (parent, "reference", NULL);
  g_autofree char *model = g_path_get_basename (gguf);
  HnVocab *v = load_vocab (gguf);
  g_autofree char *base = g_strndup (model, strlen (model) - 5);
  int checked = 0;
  for (int p = 0; p < 5; p++) {
    g_autofree char *name = g_strdup_printf ("%s.p%d.json", base, p);
    g_autofree char *jpath = g_build_filename (dir, name, NULL);
    if (!g_file_test (jpath, G_FILE_TEST_EXISTS))
      continue;
    g_autoptr (JsonParser) parser = json_parser_new ();
    g_assert_true (json_parser_load_from_file (parser, jpath, NULL));
    JsonObject *o = json_node_get_object (json_parser_get_root (parser));
    const char *prompt = json_object_get_string_member (o, "prompt");
    JsonArray *want = json_object_get_array_member (o, "prompt_tokens");
    GArray *ids = tokenize (v, prompt, strlen (prompt), true, false);
    g_assert_cmpuint (ids->len, ==, json_array_get_length (want));
    for (guint i = 0; i < ids->len; i++)
      g_assert_cmpint (g_array_index (ids, int32_t, i), ==, json_array_get_int_element (want, i));
    g_array_unref (ids);
    checked++;
  }
  g_assert_cmpint (checked, >, 0);
  hn_vocab_free (v);
}

static char *
vocab_path (const char *name)
{
  g_autofree char *file = g_strdup_printf ("ggml-vocab-%s.gguf", name);
  return g_build_filename (testdata (), "vocab", file, NULL);
}

static void
test_specials (void)
{
  g_autofree char *path = vocab_path ("phi-3");
  HnVocab *v = load_vocab (path);
  int32_t end = hn_vocab_find_token (v, "<|end|>");
  g_assert_cmpint (end, >=, 0);
  g_assert_true (hn_vocab_is_eog (v, end));
  g_assert_true (hn_vocab_is_eog (v, hn_vocab_eos (v)));
  g_assert_true (hn_vocab_add_bos (v));
  g_assert_false (hn_vocab_add_eos (v));
  const char *text = "Hi<|end|>there";
  GArray *on = tokenize (v, text, strlen (text), false, true);
  GArray *off = tokenize (v, text, strlen (text), false, false);
  gboolean found_on = FALSE, found_off = FALSE;
  for (guint i = 0; i < on->len; i++)
    found_on |= g_array_index (on, int32_t, i) == end;
  for (guint i = 0; i < off->len; i++)
    found_off |= g_array_index (off, int32_t, i) == end;
  g_assert_true (found_on);
  g_assert_false (found_off);
  GArray *bos = tokenize (v, "Hi", 2, true, false);
  g_assert_cmpint (g_array_index (bos, int32_t, 0), ==, hn_vocab_bos (v));
  g_array_unref (on);
  g_array_unref (off);
  g_array_unref (bos);
  hn_vocab_free (v);

  g_autofree char *gpt2 = vocab_path ("gpt-2");
  v = load_vocab (gpt2);
  g_assert_false (hn_vocab_add_bos (v));
  g_assert_cmpstr (hn_vocab_pre_name (v), ==, "gpt-2");
  g_assert_true (hn_vocab_is_eog (v, hn_vocab_find_token (v, "<|endoftext|>")));
  hn_vocab_free (v);

  /* DeepSeek's end-of-sentence token is spelled with full-width bars */
  g_autofree char *deepseek = vocab_path ("deepseek-coder");
  v = load_vocab (deepseek);
  int32_t eos_ds = hn_vocab_find_token (v, "<\uff5cend\u2581of\u2581sentence\uff5c>");
  g_assert_cmpint (eos_ds, >=, 0);
  g_assert_true (hn_vocab_is_eog (v, eos_ds));
  g_assert_false (hn_vocab_is_eog (v, hn_vocab_find_token (v, "<\uff5cbegin\u2581of\u2581sentence\uff5c>")));
  hn_vocab_free (v);
}

static GArray *
tokenize_guarded (const HnVocab *v, const char *text, const HnTextRange *guards, size_t n_guards)
{
  HnError err = { 0 };
  int32_t buf[256];
  int32_t n = hn_tokenize_guarded (v, text, strlen (text), false, guards, n_guards, buf, 256, &err);
  g_assert_cmpint (n, >=, 0);
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (int32_t));
  g_array_append_vals (ids, buf, (guint) n);
  return ids;
}

static gboolean
ids_equal (GArray *a, GArray *b)
{
  return a->len == b->len && memcmp (a->data, b->data, a->len * sizeof (int32_t)) == 0;
}

/* Special tokens are matched outside the guarded ranges only; without ranges the result is
 * hn_tokenize with parse_special, and a guarded range alone tokenizes like plain text. */
static void
test_guarded (void)
{
  g_autofree char *path = vocab_path ("phi-3");
  HnVocab *v = load_vocab (path);
  int32_t end = hn_vocab_find_token (v, "<|end|>");
  const char *text = "<|user|>Say <|end|> now<|end|>";
  GArray *special = tokenize (v, text, strlen (text), false, true);
  GArray *none = tokenize_guarded (v, text, NULL, 0);
  g_assert_true (ids_equal (special, none));
  /* guard "Say <|end|> now" (bytes 8..23): one <|end|> left, the template's */
  HnTextRange r = { 8, 23 };
  GArray *guarded = tokenize_guarded (v, text, &r, 1);
  guint n_end = 0;
  for (guint i = 0; i < guarded->len; i++)
    n_end += g_array_index (guarded, int32_t, i) == end;
  g_assert_cmpuint (n_end, ==, 1);
  g_assert_cmpint (g_array_index (guarded, int32_t, guarded->len - 1), ==, end);
  g_assert_cmpint (g_array_index (guarded, int32_t, 0), ==, hn_vocab_find_token (v, "<|user|>"));
  /* a special token that would reach into a guarded range is not matched either */
  HnTextRange tail = { 25, strlen (text) };
  GArray *cut = tokenize_guarded (v, text, &tail, 1);
  n_end = 0;
  for (guint i = 0; i < cut->len; i++)
    n_end += g_array_index (cut, int32_t, i) == end;
  g_assert_cmpuint (n_end, ==, 1);
  /* everything guarded = parse_special off */
  HnTextRange all = { 0, strlen (text) };
  GArray *plain = tokenize_guarded (v, text, &all, 1);
  GArray *off = tokenize (v, text, strlen (text), false, false);
  g_assert_true (ids_equal (plain, off));
  /* bad ranges are refused */
  HnError err = { 0 };
  HnTextRange bad[2] = { { 5, 9 }, { 7, 12 } };
  int32_t buf[64];
  g_assert_cmpint (hn_tokenize_guarded (v, text, strlen (text), false, bad, 2, buf, 64, &err), ==, INT32_MIN);
  g_assert_cmpint (err.code, ==, HN_ERR_INVALID_ARG);
  g_array_unref (special);
  g_array_unref (none);
  g_array_unref (guarded);
  g_array_unref (cut);
  g_array_unref (plain);
  g_array_unref (off);
  hn_vocab_free (v);
}

static void
check_stream (const HnVocab *v, const char *text)
{
  GArray *ids = tokenize (v, text, strlen (text), false, false);
  HnStreamDecoder *d = hn_stream_decoder_new (v, false);
  GString *all = g_string_new ("");
  int partial_seen = 0;
  for (guint i = 0; i < ids->len; i++) {
    size_t len;
    size_t raw_len;
    hn_token_bytes (v, g_array_index (ids, int32_t, i), &raw_len);
    const char *s = hn_stream_decoder_push (d, g_array_index (ids, int32_t, i), &len);
    g_assert_nonnull (s);
    g_assert_true (g_utf8_validate (s, (gssize) len, NULL));
    g_assert_null (g_strstr_len (s, (gssize) len, "\xef\xbf\xbd"));
    if (len == 0 && raw_len > 0)
      partial_seen++;
    g_string_append_len (all, s, (gssize) len);
  }
  size_t len;
  const char *s = hn_stream_decoder_flush (d, &len);
  g_assert_cmpuint (len, ==, 0);
  (void) s;
  const char *expect = text;
  if (hn_vocab_type (v) == HN_VOCAB_SPM && all->len > 0 && all->str[0] == ' ')
    g_string_erase (all, 0, 1);
  g_assert_cmpstr (all->str, ==, expect);
  g_test_message ("%s: %u tokens, %d held back", text, ids->len, partial_seen);
  g_string_free (all, TRUE);
  hn_stream_decoder_free (d);
  g_array_unref (ids);
}

static void
test_stream (void)
{
  const char *names[] = { "llama-spm", "gpt-2", "phi-3" };
  for (size_t k = 0; k < G_N_ELEMENTS (names); k++) {
    g_autofree char *path = vocab_path (names[k]);
    HnVocab *v = load_vocab (path);
    check_stream (v, "こんにちは、世界！今日は🦙と🎉で遊びます。");
    check_stream (v, "Emoji: 👨‍👩‍👧‍👦 🇯🇵 ok");
    /* byte tokens one by one: the first two bytes of あ hold nothing */
    int32_t ids[3];
    const unsigned char bytes[3] = { 0xE3, 0x81, 0x82 };
    HnStreamDecoder *d = hn_stream_decoder_new (v, false);
    size_t len;
    for (int i = 0; i < 3; i++) {
      char piece[2] = { (char) bytes[i], 0 };
      GArray *a = tokenize (v, piece, 1, false, false);
      g_assert_cmpuint (a->len, >=, 1);
      ids[i] = g_array_index (a, int32_t, a->len - 1);
      g_array_unref (a);
      const char *s = hn_stream_decoder_push (d, ids[i], &len);
      if (i < 2)
        g_assert_cmpuint (len, ==, 0);
      else {
        g_assert_cmpuint (len, ==, 3);
        g_assert_cmpint (memcmp (s, "あ", 3), ==, 0);
      }
    }
    /* a cut-off character at the end becomes U+FFFD on flush */
    hn_stream_decoder_push (d, ids[0], &len);
    g_assert_cmpuint (len, ==, 0);
    const char *s = hn_stream_decoder_flush (d, &len);
    g_assert_cmpuint (len, ==, 3);
    g_assert_cmpint (memcmp (s, "\xef\xbf\xbd", 3), ==, 0);
    hn_stream_decoder_free (d);
    hn_vocab_free (v);
  }
}

static void
test_fuzz (void)
{
  g_autofree char *dir = g_build_filename (testdata (), "vocab", NULL);
  GDir *d = g_dir_open (dir, 0, NULL);
  const char *name;
  GRand *rand = g_rand_new_with_seed (1234);
  while ((name = g_dir_read_name (d)) != NULL) {
    if (!g_str_has_suffix (name, ".gguf"))
      continue;
    g_autofree char *path = g_build_filename (dir, name, NULL);
    HnVocab *v = load_vocab (path);
    for (int round = 0; round < 200; round++) {
      char buf[300];
      size_t len = (size_t) g_rand_int_range (rand, 0, sizeof buf);
      for (size_t i = 0; i < len; i++) {
        guint32 r = g_rand_int (rand);
        /* mix ASCII, spaces, UTF-8 lead/continuation bytes and specials' first bytes */
        buf[i] = (char) ((r & 3) == 0 ? ' ' : (r & 3) == 1 ? 'a' + (r >> 8) % 26 : (r >> 8));
      }
      GArray *ids = tokenize (v, buf, len, round & 1, round & 2);
      char out[4096];
      HnError err = { 0 };
      int64_t n = hn_detokenize (v, (int32_t *) ids->data, ids->len, false, false, out, sizeof out, &err);
      g_assert_cmpint (n, >=, 0);
      if (hn_vocab_type (v) == HN_VOCAB_BPE && !(round & 2) && strstr (name, "gpt-2") != NULL) {
        /* byte-level BPE is lossless on any bytes when all 256 byte tokens exist (falcon
         * and starcoder lack some, e.g. 0xC0, which then cannot be represented) */
        g_assert_cmpint (n, ==, (int64_t) len);
        g_assert_cmpint (memcmp (out, buf, len), ==, 0);
      }
      g_array_unref (ids);
    }
    hn_vocab_free (v);
  }
  g_rand_free (rand);
  g_dir_close (d);
}

/* Random bytes through every pre-tokenizer split, including those without a test
 * vocabulary: the pieces must tile the input exactly, in order, without empty pieces. */
static void
test_fuzz_splits (void)
{
  GRand *rand = g_rand_new_with_seed (99);
  for (int pre = HN_PRE_DEFAULT; pre <= HN_PRE_GPT4O; pre++)
    for (int round = 0; round < 500; round++) {
      char buf[200];
      size_t len = (size_t) g_rand_int_range (rand, 0, sizeof buf);
      for (size_t i = 0; i < len; i++) {
        guint32 r = g_rand_int (rand);
        static const char ascii[] = " \t\n\r'sdtm0123456789.,!$+<`|~aZ";
        buf[i] = (r & 1) ? ascii[(r >> 8) % (sizeof ascii - 1)] : (char) (r >> 8);
      }
      uint32_t *pieces;
      int64_t n = hn_pretokenize ((HnPreType) pre, buf, len, &pieces);
      g_assert_cmpint (n, >=, 0);
      uint32_t at = 0;
      for (int64_t p = 0; p < n; p++) {
        g_assert_cmpuint (pieces[2 * p], ==, at);
        g_assert_cmpuint (pieces[2 * p + 1], >, at);
        at = pieces[2 * p + 1];
      }
      g_assert_cmpuint (at, ==, len);
      g_free (pieces);
    }
  g_rand_free (rand);
}

static void
check_split (HnPreType pre, const char *text, const char *const *want)
{
  uint32_t *pieces;
  int64_t n = hn_pretokenize (pre, text, strlen (text), &pieces);
  g_assert_cmpint (n, >=, 0);
  int64_t i = 0;
  for (; want[i] != NULL; i++) {
    g_assert_cmpint (i, <, n);
    g_autofree char *got = g_strndup (text + pieces[2 * i], pieces[2 * i + 1] - pieces[2 * i]);
    g_assert_cmpstr (got, ==, want[i]);
  }
  g_assert_cmpint (i, ==, n);
  g_free (pieces);
}

static void
test_pretokenize (void)
{
  const char *text = "Hello world 12345 it's\n\n  ok!!\n";
  const char *const llama3[] = { "Hello", " world", " ", "123", "45", " it", "'s", "\n\n", " ", " ok", "!!\n", NULL };
  check_split (HN_PRE_LLAMA3, text, llama3);
  const char *const qwen2[] = { "Hello", " world", " ", "1", "2", "3", "4", "5", " it", "'s", "\n\n", " ", " ok", "!!\n", NULL };
  check_split (HN_PRE_QWEN2, text, qwen2);
  const char *const gpt2[] = { "Hello", " world", " 12345", " it", "'s", "\n\n ", " ok", "!!", "\n", NULL };
  check_split (HN_PRE_GPT2, text, gpt2);
  const char *const llama3_case[] = { "I", "'M", " fine", ",", "\tok", NULL };
  check_split (HN_PRE_LLAMA3, "I'M fine,\tok", llama3_case);
  const char *const starcoder[] = { "x", "1", "2", " ", "3", NULL };
  check_split (HN_PRE_STARCODER, "x12 3", starcoder);
}

/* A small vocabulary laid out like Gemma's SentencePiece one (tokenizer.ggml.model "llama"):
 * control tokens <pad> <eos> <bos>, <unk>, the turn markers, whitespace runs and an HTML tag
 * as user-defined tokens with literal spaces (as the converter writes them), all 256 byte
 * tokens, and normal pieces whose scores give the merge order (higher first). */
static const struct {
  const char *text;
  float score;
  int type;
} gemma_like[] = {
  { "<pad>", 0, HN_TOKEN_TYPE_CONTROL },           { "<eos>", 0, HN_TOKEN_TYPE_CONTROL },
  { "<bos>", 0, HN_TOKEN_TYPE_CONTROL },           { "<unk>", 0, HN_TOKEN_TYPE_UNKNOWN },
  { "<start_of_turn>", 0, HN_TOKEN_TYPE_CONTROL }, { "<end_of_turn>", 0, HN_TOKEN_TYPE_CONTROL },
  { "  ", 0, HN_TOKEN_TYPE_USER_DEFINED },         { "   ", 0, HN_TOKEN_TYPE_USER_DEFINED },
  { "    ", 0, HN_TOKEN_TYPE_USER_DEFINED },       { "<table>", 0, HN_TOKEN_TYPE_USER_DEFINED },
  /* single characters: never merged into, their scores do not matter */
  { "\u2581", -100, 1 }, { "\n", -100, 1 }, { "H", -100, 1 }, { "e", -100, 1 }, { "l", -100, 1 },
  { "o", -100, 1 },      { "w", -100, 1 },  { "r", -100, 1 }, { "d", -100, 1 }, { "a", -100, 1 },
  { "b", -100, 1 },      { "x", -100, 1 },  { "<", -100, 1 }, { ">", -100, 1 }, { "s", -100, 1 },
  { "u", -100, 1 },      { "i", -100, 1 },
  /* merges */
  { "ll", -10, 1 }, { "He", -11, 1 }, { "Hell", -12, 1 }, { "Hello", -13, 1 }, { "or", -14, 1 },
  { "\u2581w", -15, 1 }, { "\u2581wor", -16, 1 }, { "ld", -18, 1 }, { "\u2581world", -19, 1 },
  { "\n\n", -20, 1 }, { "\u2581b", -21, 1 }, { "<e", -22, 1 }, { "os", -23, 1 }, { "<eos", -24, 1 },
  { "\u2581Hello", -26, 1 },
};

#define GEMMA_LIKE_UNUSED 40
#define GEMMA_LIKE_TILDES 17

/* Writes the Gemma-like vocabulary; add_space_prefix: "false" as Gemma files set it, or
 * NULL for no key (SentencePiece's default, a prefix).  Like Gemma's, it ends with many
 * control tokens <unusedN>: the special tokens starting with '<' are then too many to scan
 * and are looked up by length (both ways must find the same tokens). */
static HnVocab *
load_gemma_like (const char *dir, const char *add_space_prefix)
{
  HnError err = { 0 };
  size_t n_fixed = G_N_ELEMENTS (gemma_like), n = n_fixed + 256 + GEMMA_LIKE_UNUSED + GEMMA_LIKE_TILDES;
  const char **texts = g_new0 (const char *, n);
  float *scores = g_new0 (float, n);
  int32_t *types = g_new0 (int32_t, n);
  char *bytes = g_malloc0 (256 * 8); /* "<0xNN>" for every byte */
  char *unused = g_malloc0 (GEMMA_LIKE_UNUSED * 16);
  for (int i = 0; i < GEMMA_LIKE_UNUSED; i++) {
    g_snprintf (unused + 16 * i, 16, "<unused%d>", i);
    texts[n_fixed + 256 + (size_t) i] = unused + 16 * i;
    types[n_fixed + 256 + (size_t) i] = HN_TOKEN_TYPE_CONTROL;
  }
  /* not Gemma's: a large group of user-defined tokens with a one-byte member, "~" and "~1"
   * ... "~16" */
  char *tildes = g_malloc0 (GEMMA_LIKE_TILDES * 8);
  for (int i = 0; i < GEMMA_LIKE_TILDES; i++) {
    if (i > 0)
      g_snprintf (tildes + 8 * i, 8, "~%d", i);
    else
      strcpy (tildes, "~");
    texts[n_fixed + 256 + GEMMA_LIKE_UNUSED + (size_t) i] = tildes + 8 * i;
    types[n_fixed + 256 + GEMMA_LIKE_UNUSED + (size_t) i] = HN_TOKEN_TYPE_USER_DEFINED;
  }
  for (size_t i = 0; i < n_fixed; i++) {
    texts[i] = gemma_like[i].text;
    scores[i] = gemma_like[i].score;
    types[i] = gemma_like[i].type;
  }
  for (int b = 0; b < 256; b++) {
    g_snprintf (bytes + 8 * b, 8, "<0x%02X>", b);
    texts[n_fixed + (size_t) b] = bytes + 8 * b;
    types[n_fixed + (size_t) b] = HN_TOKEN_TYPE_BYTE;
  }
  HnGgufWriter *w = hn_gguf_writer_new (&err);
  g_assert_true (hn_gguf_writer_set_str (w, "general.architecture", "gemma2", &err));
  g_assert_true (hn_gguf_writer_set_str (w, "tokenizer.ggml.model", "llama", &err));
  g_assert_true (hn_gguf_writer_set_str_array (w, "tokenizer.ggml.tokens", texts, n, &err));
  g_assert_true (hn_gguf_writer_set_array (w, "tokenizer.ggml.scores", HN_GGUF_FLOAT32, scores, n, &err));
  g_assert_true (hn_gguf_writer_set_array (w, "tokenizer.ggml.token_type", HN_GGUF_INT32, types, n, &err));
  g_assert_true (hn_gguf_writer_set_u32 (w, "tokenizer.ggml.bos_token_id", 2, &err));
  g_assert_true (hn_gguf_writer_set_u32 (w, "tokenizer.ggml.eos_token_id", 1, &err));
  g_assert_true (hn_gguf_writer_set_u32 (w, "tokenizer.ggml.unknown_token_id", 3, &err));
  g_assert_true (hn_gguf_writer_set_u32 (w, "tokenizer.ggml.padding_token_id", 0, &err));
  g_assert_true (hn_gguf_writer_set_bool (w, "tokenizer.ggml.add_bos_token", true, &err));
  if (add_space_prefix != NULL)
    g_assert_true (hn_gguf_writer_set_bool (w, "tokenizer.ggml.add_space_prefix",
                                            strcmp (add_space_prefix, "true") == 0, &err));
  g_autofree char *path = g_build_filename (dir, "gemma-like.gguf", NULL);
  g_assert_true (hn_gguf_writer_begin (w, path, &err));
  g_assert_true (hn_gguf_writer_finish (w, &err));
  hn_gguf_writer_free (w);
  g_free (texts);
  g_free (scores);
  g_free (types);
  g_free (bytes);
  g_free (unused);
  g_free (tildes);
  HnVocab *v = load_vocab (path);
  g_unlink (path);
  return v;
}

/* Tokenizes text and compares with the expected pieces (raw vocabulary texts); without
 * parse_special the ids must also detokenize back to exactly the text. */
static void
check_pieces (const HnVocab *v, const char *text, bool parse_special, const char *const *want)
{
  GArray *ids = tokenize (v, text, strlen (text), false, parse_special);
  guint n_want = g_strv_length ((char **) want);
  for (guint i = 0; i < MIN (ids->len, n_want); i++) {
    size_t len;
    const char *piece = hn_vocab_token_text (v, g_array_index (ids, int32_t, i), &len);
    g_autofree char *got = g_strndup (piece, len);
    g_assert_cmpstr (got, ==, want[i]);
    g_assert_cmpint (g_array_index (ids, int32_t, i), ==, hn_vocab_find_token (v, want[i]));
  }
  g_assert_cmpuint (ids->len, ==, n_want);
  if (!parse_special) {
    char buf[256];
    HnError err = { 0 };
    int64_t n = hn_detokenize (v, (int32_t *) ids->data, ids->len, true, false, buf, sizeof buf, &err);
    g_assert_cmpint (n, ==, (int64_t) strlen (text));
    g_assert_cmpint (memcmp (buf, text, strlen (text)), ==, 0);
  }
  g_array_unref (ids);
}

/* Gemma's SentencePiece rules end to end, expected pieces derived by hand from the merge
 * order above: no space prefix when the file says so, byte fallback, "\n" pieces, user-defined
 * whitespace runs matched literally (longest first), the turn markers, and control tokens
 * that typed text never becomes. */
static void
test_gemma_spm (void)
{
  g_autofree char *dir = g_dir_make_tmp ("hanashi-gemma-XXXXXX", NULL);
  HnVocab *v = load_gemma_like (dir, "false");
  g_assert_cmpint (hn_vocab_type (v), ==, HN_VOCAB_SPM);
  const char *const hello[] = { "Hello", "\u2581world", NULL };
  check_pieces (v, "Hello world", false, hello);
  /* a leading space is the text's own and comes back */
  const char *const world[] = { "\u2581world", NULL };
  check_pieces (v, " world", false, world);
  const char *const lines[] = { "Hello", "\n\n", "w", "or", "ld", NULL };
  check_pieces (v, "Hello\n\nworld", false, lines);
  /* characters without a piece fall back to their UTF-8 bytes */
  const char *const check[] = { "Hello", "\u2581", "<0xE2>", "<0x9C>", "<0x93>", NULL };
  check_pieces (v, "Hello \u2713", false, check);
  const char *const cjk[] = { "<0xE6>", "<0x97>", "<0xA5>", "x", NULL };
  check_pieces (v, "\u65e5x", false, cjk);
  /* whitespace runs: the longest user-defined run, and no prefix after it */
  const char *const run4[] = { "a", "    ", "b", NULL };
  check_pieces (v, "a    b", false, run4);
  const char *const run5[] = { "a", "    ", "\u2581b", NULL };
  check_pieces (v, "a     b", false, run5);
  const char *const run2[] = { "a", "  ", "\n", NULL };
  check_pieces (v, "a  \n", false, run2);
  const char *const tag[] = { "x", "<table>", "x", NULL };
  check_pieces (v, "x<table>x", false, tag);
  /* "<eos" + ">" would be the control token <eos>: merges never make one */
  const char *const typed[] = { "<eos", ">", NULL };
  check_pieces (v, "<eos>", false, typed);
  const char *const parsed[] = { "<eos>", NULL };
  check_pieces (v, "<eos>", true, parsed);
  const char *const turn[] = { "<start_of_turn>", "u", "s", "e", "r", "\n", "H", "i", "<end_of_turn>", "\n", NULL };
  check_pieces (v, "<start_of_turn>user\nHi<end_of_turn>\n", true, turn);
  /* the longest special token wins: <unused3> and <unused39> share a beginning */
  const char *const unused[] = { "<unused39>", "<unused3>", "x", "<table>", NULL };
  check_pieces (v, "<unused39><unused3>x<table>", true, unused);
  const char *const unused_text[] = { "<", "u", "<0x6E>", "u", "s", "e", "d", "<0x33>", ">", NULL };
  check_pieces (v, "<unused3>", false, unused_text);
  const char *const tilde[] = { "a", "~", "b", "~12", "x", "~1", NULL };
  check_pieces (v, "a~b~12x~1", false, tilde);
  /* BOS as the file asks; end of generation: <eos> and <end_of_turn>, not <start_of_turn> */
  GArray *with_bos = tokenize (v, "Hello", 5, true, false);
  g_assert_cmpuint (with_bos->len, ==, 2);
  g_assert_cmpint (g_array_index (with_bos, int32_t, 0), ==, hn_vocab_find_token (v, "<bos>"));
  g_array_unref (with_bos);
  int32_t end_of_turn = hn_vocab_find_token (v, "<end_of_turn>");
  g_assert_true (hn_vocab_is_eog (v, end_of_turn));
  g_assert_true (hn_vocab_is_eog (v, hn_vocab_find_token (v, "<eos>")));
  g_assert_false (hn_vocab_is_eog (v, hn_vocab_find_token (v, "<start_of_turn>")));
  g_assert_cmpint (hn_vocab_eot (v), ==, end_of_turn);
  check_stream (v, "Hello \u65e5\u672c world");
  hn_vocab_free (v);

  /* the same vocabulary without the key: SentencePiece's default prefix */
  v = load_gemma_like (dir, NULL);
  const char *const prefixed[] = { "\u2581Hello", "\u2581world", NULL };
  check_pieces (v, "Hello world", false, prefixed);
  hn_vocab_free (v);
  g_rmdir (dir);
}

/* GPT-2's byte → printable character map (bytes outside the printable ranges go to 256 + n). */
static guint32
byte_char (int b)
{
  if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
    return (guint32) b;
  int n = 0;
  for (int i = 0; i < b; i++)
    n += !((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255));
  return 256u + (guint32) n;
}

/* A byte-level BPE vocabulary with the given tokenizer.ggml.pre: the 256 byte characters, two
 * merges ("o" "W" across a CamelCase boundary, "1" "2" across single digits), and Qwen's and
 * Phi's end-of-turn tokens as control tokens. */
static HnVocab *
load_small_bpe (const char *dir, const char *pre)
{
  HnError err = { 0 };
  static const char *const extra[] = { "oW", "12", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|end|>" };
  size_t n = 256 + G_N_ELEMENTS (extra);
  const char **texts = g_new0 (const char *, n);
  int32_t *types = g_new0 (int32_t, n);
  char *chars = g_malloc0 (256 * 8);
  for (int b = 0; b < 256; b++) {
    g_unichar_to_utf8 (byte_char (b), chars + 8 * b);
    texts[b] = chars + 8 * b;
    types[b] = HN_TOKEN_TYPE_NORMAL;
  }
  for (size_t i = 0; i < G_N_ELEMENTS (extra); i++) {
    texts[256 + i] = extra[i];
    types[256 + i] = i < 2 ? HN_TOKEN_TYPE_NORMAL : HN_TOKEN_TYPE_CONTROL;
  }
  const char *merges[] = { "o W", "1 2" };
  HnGgufWriter *w = hn_gguf_writer_new (&err);
  g_assert_true (hn_gguf_writer_set_str (w, "tokenizer.ggml.model", "gpt2", &err));
  g_assert_true (hn_gguf_writer_set_str (w, "tokenizer.ggml.pre", pre, &err));
  g_assert_true (hn_gguf_writer_set_str_array (w, "tokenizer.ggml.tokens", texts, n, &err));
  g_assert_true (hn_gguf_writer_set_array (w, "tokenizer.ggml.token_type", HN_GGUF_INT32, types, n, &err));
  g_assert_true (hn_gguf_writer_set_str_array (w, "tokenizer.ggml.merges", merges, G_N_ELEMENTS (merges), &err));
  g_assert_true (hn_gguf_writer_set_u32 (w, "tokenizer.ggml.eos_token_id", 256 + 2, &err));
  g_autofree char *path = g_build_filename (dir, "small-bpe.gguf", NULL);
  g_assert_true (hn_gguf_writer_begin (w, path, &err));
  g_assert_true (hn_gguf_writer_finish (w, &err));
  hn_gguf_writer_free (w);
  g_free (texts);
  g_free (types);
  g_free (chars);
  HnVocab *v = load_vocab (path);
  g_unlink (path);
  return v;
}

/* The split reaches the merges: gpt-4o cuts "HelloWorld" between o and W, so the merge "oW"
 * cannot apply; qwen2 keeps digits apart, so "12" cannot either, and normalizes to NFC.  Qwen3's <|im_end|> and
 * <|endoftext|> and Phi's <|end|> end generation; <|im_end|> is the end of turn. */
static void
test_bpe_splits_end_to_end (void)
{
  g_autofree char *dir = g_dir_make_tmp ("hanashi-bpe-XXXXXX", NULL);
  static const struct {
    const char *pre, *text;
    guint n_tokens;
  } cases[] = {
    { "gpt-4o", "HelloWorld", 10 }, { "gpt-2", "HelloWorld", 9 },  { "qwen2", "HelloWorld", 9 },
    { "qwen2", "x123", 4 },         { "llama-bpe", "x123", 3 },    { "gpt-4o", "x123", 3 },
  };
  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++) {
    HnVocab *v = load_small_bpe (dir, cases[i].pre);
    g_assert_cmpstr (hn_vocab_pre_name (v), ==, cases[i].pre);
    GArray *ids = tokenize (v, cases[i].text, strlen (cases[i].text), false, false);
    g_assert_cmpuint (ids->len, ==, cases[i].n_tokens);
    char buf[64];
    HnError err = { 0 };
    int64_t len = hn_detokenize (v, (int32_t *) ids->data, ids->len, true, false, buf, sizeof buf, &err);
    g_assert_cmpint (len, ==, (int64_t) strlen (cases[i].text));
    g_assert_cmpint (memcmp (buf, cases[i].text, (size_t) len), ==, 0);
    g_array_unref (ids);
    /* qwen2 puts the text in NFC first (Qwen's tokenizer does): e + U+0301 is é there */
    GArray *composed = tokenize (v, "caf\u00e9", strlen ("caf\u00e9"), false, false);
    GArray *decomposed = tokenize (v, "cafe\u0301", strlen ("cafe\u0301"), false, false);
    g_assert_cmpint (ids_equal (composed, decomposed), ==, strcmp (cases[i].pre, "qwen2") == 0);
    g_array_unref (composed);
    g_array_unref (decomposed);
    int32_t im_end = hn_vocab_find_token (v, "<|im_end|>");
    g_assert_true (hn_vocab_is_eog (v, im_end));
    g_assert_true (hn_vocab_is_eog (v, hn_vocab_find_token (v, "<|endoftext|>")));
    g_assert_true (hn_vocab_is_eog (v, hn_vocab_find_token (v, "<|end|>")));
    g_assert_false (hn_vocab_is_eog (v, hn_vocab_find_token (v, "<|im_start|>")));
    g_assert_cmpint (hn_vocab_eot (v), ==, im_end);
    hn_vocab_free (v);
  }
  g_rmdir (dir);
}

/* qwen2 (Qwen2, Qwen2.5, Qwen3): the LLaMA 3 split with single digits.  Expected pieces
 * derived by hand from the regex in Qwen's tokenizer.json:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static void
test_pretokenize_qwen2 (void)
{
  const char *const caps[] = { "I", "'M", " ", "2", "0", "2", "4", "'s", " WE", "'LL", " go", NULL };
  check_split (HN_PRE_QWEN2, "I'M 2024's WE'LL go", caps);
  /* a whitespace run ends at its last newline; before a word one space stays with it */
  const char *const lines[] = { "a", " \n\n", " ", " b", "  \n", NULL };
  check_split (HN_PRE_QWEN2, "a \n\n  b  \n", lines);
  const char *const trailing[] = { "x", "\r\n", "y", "\t ", NULL };
  check_split (HN_PRE_QWEN2, "x\r\ny\t ", trailing);
  /* a combining mark is not a letter: it stands alone after the letters */
  const char *const mark[] = { "cafe", "\u0301", " ok", NULL };
  check_split (HN_PRE_QWEN2, "cafe\u0301 ok", mark);
  /* punctuation before letters joins them (CJK letters are \p{L} like any other) */
  const char *const cjk[] = { "你好", "，世界", "(hello", ")", NULL };
  check_split (HN_PRE_QWEN2, "你好，世界(hello)", cjk);
  const char *const emoji[] = { "hi", " \U0001F44B\U0001F3FD!", NULL };
  check_split (HN_PRE_QWEN2, "hi \U0001F44B\U0001F3FD!", emoji);
  /* every \p{N} alone, Arabic-Indic digits too */
  const char *const digits[] = { "\u0661", "\u0662", "\u0663", "3", "rd", NULL };
  check_split (HN_PRE_QWEN2, "\u0661\u0662\u06633rd", digits);
  /* case-insensitive contractions fold U+017F LONG S to s, as the regex engine does */
  const char *const long_s[] = { "it", "'\u017f", "a", NULL };
  check_split (HN_PRE_QWEN2, "it'\u017fa", long_s);
  /* the slash is only special in gpt-4o */
  const char *const slash[] = { "path", "/to", " //\n", "/x", NULL };
  check_split (HN_PRE_QWEN2, "path/to //\n/x", slash);
}

/* gpt-4o (Phi-4-mini, OpenAI's o200k): words by case.  Expected pieces derived by hand from
 * the regex published in tiktoken:
 * [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 * |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 * |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static void
test_pretokenize_gpt4o (void)
{
  /* CamelCase: capitals, then lower case; a run of capitals keeps the last one before lower case */
  const char *const camel[] = { "Hello", "World", " JSONParser", " i", "Phone", NULL };
  check_split (HN_PRE_GPT4O, "HelloWorld JSONParser iPhone", camel);
  /* contractions only end a word, in any case */
  const char *const caps[] = { "DON'T", " STOP", " we'RE", " I'm", NULL };
  check_split (HN_PRE_GPT4O, "DON'T STOP we'RE I'm", caps);
  const char *const long_s[] = { "it'\u017f", "a", NULL };
  check_split (HN_PRE_GPT4O, "it'\u017fa", long_s);
  /* numbers in threes */
  const char *const digits[] = { "123", "45", " ", "\u0661\u0662\u0663", "\u06643", "rd", NULL };
  check_split (HN_PRE_GPT4O, "12345 \u0661\u0662\u0663\u06643rd", digits);
  /* symbols take the newlines and slashes after them */
  const char *const slash[] = { "path", "/to", " //\n/", "x", NULL };
  check_split (HN_PRE_GPT4O, "path/to //\n/x", slash);
  const char *const lines[] = { "a", " \n\n", " ", " b", "  \n", NULL };
  check_split (HN_PRE_GPT4O, "a \n\n  b  \n", lines);
  const char *const trailing[] = { "x", "\r\n", "y", "\t ", NULL };
  check_split (HN_PRE_GPT4O, "x\r\ny\t ", trailing);
  /* a combining mark counts as upper and lower case: it stays in the word */
  const char *const mark[] = { "cafe\u0301", " ok", NULL };
  check_split (HN_PRE_GPT4O, "cafe\u0301 ok", mark);
  /* É decomposed in capitals: the mark is the only "lower" character of the capitals run, so
   * the first word ends after it; precomposed, the whole word is capitals */
  const char *const ecole[] = { "E\u0301", "COLE", " \u00c9COLE", NULL };
  check_split (HN_PRE_GPT4O, "E\u0301COLE \u00c9COLE", ecole);
  /* a mark before a capital: the first alternative matches the mark alone */
  const char *const mark_first[] = { "\u0301", "A", NULL };
  check_split (HN_PRE_GPT4O, "\u0301A", mark_first);
  /* Lt (Dž) is upper only, Lm (ʰ) both */
  const char *const title[] = { "a", "\u01c5ungla", " A\u02b0b", " a\u02b0", "B", NULL };
  check_split (HN_PRE_GPT4O, "a\u01c5ungla A\u02b0b a\u02b0B", title);
  /* CJK letters (Lo) are both: after them capitals start a new word, before them not */
  const char *const cjk[] = { "日本語", "ABC", " ABC日本語", "，世界", NULL };
  check_split (HN_PRE_GPT4O, "日本語ABC ABC日本語，世界", cjk);
  const char *const emoji[] = { "hi", " \U0001F44B\U0001F3FD!", NULL };
  check_split (HN_PRE_GPT4O, "hi \U0001F44B\U0001F3FD!", emoji);
}

/* The default split (punctuation and math runs, then GPT-2, then numbers, then three ASCII
 * digits) differs from GPT-2 at apostrophes and long numbers. */
static void
test_pretokenize_default (void)
{
  const char *const def[] = { "don", "'", "t", " stop", "...", " ", "123", "4", NULL };
  check_split (HN_PRE_DEFAULT, "don't stop... 1234", def);
  const char *const gpt2[] = { "don", "'t", " stop", "...", " 1234", NULL };
  check_split (HN_PRE_GPT2, "don't stop... 1234", gpt2);
  const char *const math[] = { "a", "+", "b", "=", "123", "45", " x", "!!", NULL };
  check_split (HN_PRE_DEFAULT, "a+b=12345 x!!", math);
  /* the backtick is falcon's only difference in the first stage */
  const char *const tick_default[] = { "a", "`", "b", "|", "c", NULL };
  check_split (HN_PRE_DEFAULT, "a`b|c", tick_default);
  const char *const tick_falcon[] = { "a", "`", "b", "|", "c", NULL };
  check_split (HN_PRE_FALCON, "a`b|c", tick_falcon);
  const char *const falcon[] = { "x", "``", "y", " ", "123", "4", NULL };
  check_split (HN_PRE_FALCON, "x``y 1234", falcon);
}

/* deepseek-llm: newlines, spelled-out cased letters, ASCII/full-width punctuation (whose
 * range also spans the ASCII letters, so a Latin word with an accent splits again), trailing
 * whitespace, CJK/Hangul runs, numbers. */
static void
test_pretokenize_deepseek_llm (void)
{
  const char *const mixed[] = { "Hello", ",", " World", "!", " ", "3", ".", "14", " ", "你好", "\n", "\n",
                                "Greek", " \u03a9\u03bc\u03ad\u03b3\u03b1", "  ", NULL };
  check_split (HN_PRE_DEEPSEEK_LLM, "Hello, World! 3.14 你好\n\nGreek \u03a9\u03bc\u03ad\u03b3\u03b1  ", mixed);
  const char *const accent[] = { "Caf", "\u00e9", " au", " lait", NULL };
  check_split (HN_PRE_DEEPSEEK_LLM, "Caf\u00e9 au lait", accent);
  /* the ideographic space is \s and also in the punctuation class */
  const char *const ideographic[] = { "\u3000\u3002", "\u3000", "x", NULL };
  check_split (HN_PRE_DEEPSEEK_LLM, "\u3000\u3002\u3000x", ideographic);
  /* digits are not letters, punctuation or CJK: one run of numbers */
  const char *const digits[] = { "2024", "\u5e74", NULL };
  check_split (HN_PRE_DEEPSEEK_LLM, "2024\u5e74", digits);
}

/* A long whitespace run that is not at the end of its piece must not be rescanned at every
 * position (the \s+$ stage): 200 000 spaces and a digit split in one pass. */
static void
test_pretokenize_long_whitespace (void)
{
  size_t n = 200000;
  char *text = g_malloc (n + 2);
  memset (text, ' ', n);
  text[n] = '7';
  text[n + 1] = '\0';
  uint32_t *pieces;
  int64_t count = hn_pretokenize (HN_PRE_DEEPSEEK_LLM, text, n + 1, &pieces);
  g_assert_cmpint (count, ==, 2);
  g_assert_cmpuint (pieces[1], ==, n);
  g_assert_cmpuint (pieces[2], ==, n);
  g_free (pieces);
  g_free (text);
}

/* tokenizer.ggml.pre names: which split, BOS default and notice each one gets.  The GPT-2
 * vocabulary is rewritten with each name (and without the key). */
static HnVocab *
load_with_pre (const char *pre, const char *dir)
{
  HnError err = { 0 };
  g_autofree char *src = vocab_path ("gpt-2");
  HnGguf *g = hn_gguf_open (src, &err);
  g_assert_nonnull (g);
  HnGgufWriter *w = hn_gguf_writer_new (&err);
  g_assert_true (hn_gguf_writer_copy_kvs (w, g, &err));
  hn_gguf_writer_remove_kv (w, "tokenizer.ggml.add_bos_token");
  if (pre != NULL)
    g_assert_true (hn_gguf_writer_set_str (w, "tokenizer.ggml.pre", pre, &err));
  else
    hn_gguf_writer_remove_kv (w, "tokenizer.ggml.pre");
  g_autofree char *path = g_build_filename (dir, "vocab.gguf", NULL);
  g_assert_true (hn_gguf_writer_begin (w, path, &err));
  g_assert_true (hn_gguf_writer_finish (w, &err));
  hn_gguf_writer_free (w);
  hn_gguf_close (g);
  return load_vocab (path);
}

static void
test_pre_names (void)
{
  g_autofree char *dir = g_dir_make_tmp ("hanashi-vocab-XXXXXX", NULL);
  static const struct {
    const char *pre, *split;
    gboolean add_bos, notice;
  } cases[] = {
    { "default", "default", FALSE, FALSE },          { NULL, "default", FALSE, FALSE },
    { "no-such-tokenizer", "default", FALSE, TRUE }, { "gpt-2", "gpt-2", FALSE, FALSE },
    { "mpt", "mpt", FALSE, FALSE },                  { "olmo", "olmo", FALSE, FALSE },
    { "gpt-neox", "gpt-neox", FALSE, FALSE },        { "starcoder", "starcoder", FALSE, FALSE },
    { "refact", "refact", FALSE, FALSE },            { "command-r", "command-r", FALSE, FALSE },
    { "smollm", "smollm", FALSE, FALSE },            { "llama-bpe", "llama-bpe", TRUE, FALSE },
    { "dbrx", "dbrx", FALSE, FALSE },                { "qwen2", "qwen2", FALSE, FALSE },
    { "falcon", "falcon", FALSE, FALSE },            { "deepseek-llm", "deepseek-llm", FALSE, FALSE },
    { "deepseek-coder", "deepseek-coder", FALSE, FALSE }, { "deepseek-r1-qwen", "deepseek-r1-qwen", FALSE, FALSE },
    { "megrez", "megrez", FALSE, FALSE },            { "gpt-4o", "gpt-4o", FALSE, FALSE },
    { "llama4", "llama4", FALSE, FALSE },
  };
  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++) {
    HnVocab *v = load_with_pre (cases[i].pre, dir);
    g_assert_cmpstr (hn_vocab_pre_name (v), ==, cases[i].split);
    g_assert_cmpint (hn_vocab_add_bos (v), ==, cases[i].add_bos);
    g_assert_cmpint (hn_vocab_notice (v) != NULL, ==, cases[i].notice);
    if (cases[i].notice)
      g_assert_nonnull (strstr (hn_vocab_notice (v), cases[i].pre));
    hn_vocab_free (v);
  }
  /* the same text splits differently under the names that mean different splits */
  HnVocab *a = load_with_pre ("gpt-2", dir), *b = load_with_pre ("no-such-tokenizer", dir);
  GArray *ta = tokenize (a, "don't", 5, false, false), *tb = tokenize (b, "don't", 5, false, false);
  g_assert_cmpuint (ta->len, ==, 2);
  g_assert_cmpuint (tb->len, ==, 3);
  g_array_unref (ta);
  g_array_unref (tb);
  hn_vocab_free (a);
  hn_vocab_free (b);
  g_autofree char *path = g_build_filename (dir, "vocab.gguf", NULL);
  g_unlink (path);
  g_rmdir (dir);
}

static void
test_cli (void)
{
  if (g_getenv ("HANASHI_CLI") == NULL) {
    g_test_skip ("HANASHI_CLI not set");
    return;
  }
  g_autofree char *spm = vocab_path ("llama-spm");
  const char *a1[] = { "tokenize", "-m", spm, "-p", "Hello world", NULL };
  CliRun r = cli_run_argv (a1);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==, "[1, 15043, 3186]\n");
  cli_run_clear (&r);
  const char *a2[] = { "tokenize", "-m", spm, "-p", "Hello world", "--no-bos", NULL };
  r = cli_run_argv (a2);
  g_assert_cmpstr (r.out, ==, "[15043, 3186]\n");
  cli_run_clear (&r);
  const char *a3[] = { "detokenize", "-m", spm, "--ids", "1,15043,3186", NULL };
  r = cli_run_argv (a3);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==, "Hello world");
  cli_run_clear (&r);
  const char *a4[] = { "detokenize", "-m", spm, "--ids", "1,99999", NULL };
  r = cli_run_argv (a4);
  g_assert_cmpint (r.status, !=, 0);
  cli_run_clear (&r);
  const char *a5[] = { "tokenize", "-m", spm, NULL };
  r = cli_run_argv (a5);
  g_assert_cmpint (r.status, !=, 0);
  cli_run_clear (&r);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (testdata () == NULL || !g_file_test (testdata (), G_FILE_TEST_IS_DIR))
    return 77;
  g_autofree char *dir = g_build_filename (testdata (), "vocab", NULL);
  GDir *d = g_dir_open (dir, 0, NULL);
  g_assert_nonnull (d);
  const char *name;
  GPtrArray *paths = g_ptr_array_new_with_free_func (g_free);
  while ((name = g_dir_read_name (d)) != NULL)
    if (g_str_has_suffix (name, ".gguf")) {
      char *path = g_build_filename (dir, name, NULL);
      g_ptr_array_add (paths, path);
      g_autofree char *tp = g_strdup_printf ("/vocab/%s", name);
      g_test_add_data_func (tp, path, test_vocab_file);
    }
  g_dir_close (d);
  static const char *models[] = { "models/stories260K-f32.gguf", "models/tiny-llama-spm-q8_0.gguf",
                                  "models/tiny-qwen2-gpt2-q8_0.gguf", "models/quant-llama-v512-f32.gguf" };
  for (size_t i = 0; i < G_N_ELEMENTS (models); i++) {
    g_autofree char *tp = g_strdup_printf ("/vocab/reference/%s", models[i] + strlen ("models/"));
    g_test_add_data_func (tp, models[i], test_reference_prompts);
  }
  /* every architecture model (Gemma 2's with the LLaMA SentencePiece vocabulary, Qwen3's
   * with GPT-2's, the others with the 512-token one), found by listing */
  g_autofree char *arch_dir = g_build_filename (testdata (), "arch", "models", NULL);
  GDir *ad = g_dir_open (arch_dir, 0, NULL);
  while (ad != NULL && (name = g_dir_read_name (ad)) != NULL)
    if (g_str_has_suffix (name, ".gguf")) {
      char *rel = g_build_filename ("arch", "models", name, NULL);
      g_ptr_array_add (paths, rel);
      g_autofree char *tp = g_strdup_printf ("/vocab/reference/arch/%s", name);
      g_test_add_data_func (tp, rel, test_reference_prompts);
    }
  if (ad != NULL)
    g_dir_close (ad);
  g_test_add_func ("/vocab/specials", test_specials);
  g_test_add_func ("/vocab/guarded", test_guarded);
  g_test_add_func ("/vocab/stream", test_stream);
  g_test_add_func ("/vocab/fuzz", test_fuzz);
  g_test_add_func ("/vocab/fuzz-splits", test_fuzz_splits);
  g_test_add_func ("/vocab/pretokenize", test_pretokenize);
  g_test_add_func ("/vocab/pretokenize/default", test_pretokenize_default);
  g_test_add_func ("/vocab/gemma-spm", test_gemma_spm);
  g_test_add_func ("/vocab/bpe-splits", test_bpe_splits_end_to_end);
  g_test_add_func ("/vocab/pretokenize/qwen2", test_pretokenize_qwen2);
  g_test_add_func ("/vocab/pretokenize/gpt-4o", test_pretokenize_gpt4o);
  g_test_add_func ("/vocab/pretokenize/deepseek-llm", test_pretokenize_deepseek_llm);
  g_test_add_func ("/vocab/pretokenize/long-whitespace", test_pretokenize_long_whitespace);
  g_test_add_func ("/vocab/pre-names", test_pre_names);
  g_test_add_func ("/vocab/cli", test_cli);
  int r = g_test_run ();
  g_ptr_array_unref (paths);
  return r;
}
