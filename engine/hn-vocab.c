/* hn-vocab.c — loading tokenizer.ggml.* metadata, lookups, special-token splitting,
 * detokenization and the streaming decoder.  The tokenizers themselves live in
 * hn-tokenizer-spm.c and hn-tokenizer-bpe.c.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-vocab-private.h"
#include "hn-unicode.h"
#include "hn-array.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HN_VOCAB_MAX_TOKENS (1 << 24)

uint64_t
hn_vocab_hash_bytes(const char *s, size_t len)
{
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h ^ (h >> 29);
}

int32_t
hn_vocab_lookup(const HnVocab *vocab, const char *s, size_t len)
{
  uint32_t slot = (uint32_t)hn_vocab_hash_bytes(s, len) & vocab->text_index_mask;
  for (;;) {
    int32_t id = vocab->text_index[slot];
    if (id < 0)
      return -1;
    const HnVocabToken *t = &vocab->tokens[id];
    if (t->text_len == len && memcmp(vocab->text + t->text_off, s, len) == 0)
      return id;
    slot = (slot + 1) & vocab->text_index_mask;
  }
}

static uint64_t
merge_hash(uint64_t key)
{
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return key;
}

int32_t
hn_vocab_merge_rank(const HnVocab *vocab, int32_t left, int32_t right, int32_t *result)
{
  if (vocab->merges == NULL || left < 0 || right < 0)
    return -1;
  uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
  uint64_t slot = merge_hash(key) & vocab->merges_mask;
  for (;;) {
    const HnMergeSlot *m = &vocab->merges[slot];
    if (m->key == UINT64_MAX)
      return -1;
    if (m->key == key) {
      *result = m->result;
      return m->rank;
    }
    slot = (slot + 1) & vocab->merges_mask;
  }
}

static int
spm_char_len(unsigned char c)
{
  return c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

bool
hn_vocab_spm_pair_possible(const HnVocab *vocab, const char *s, size_t len)
{
  if (vocab->spm_pairs == NULL)
    return true;
  uint64_t h = hn_vocab_hash_bytes(s, len) | 1;
  uint64_t slot = h & vocab->spm_pairs_mask;
  for (;;) {
    uint64_t e = vocab->spm_pairs[slot];
    if (e == 0)
      return false;
    if (e == h)
      return true;
    slot = (slot + 1) & vocab->spm_pairs_mask;
  }
}

static bool
spm_pairs_insert(uint64_t *table, uint64_t mask, uint64_t h)
{
  uint64_t slot = h & mask;
  while (table[slot] != 0 && table[slot] != h)
    slot = (slot + 1) & mask;
  bool added = table[slot] == 0;
  table[slot] = h;
  return added;
}

/* Records every pair of neighbouring characters of every token (characters split as the
 * SPM tokenizer splits text: by the lead byte's length).  The set grows as distinct pairs
 * come (at most half full): a 262 144-token vocabulary has millions of pairs but far fewer
 * distinct ones, so sizing it for all would waste tens of megabytes. */
static bool
build_spm_pairs(HnVocab *v)
{
  uint64_t cap = 1024, count = 0;
  v->spm_pairs = calloc(cap, sizeof(uint64_t));
  if (v->spm_pairs == NULL)
    return false;
  v->spm_pairs_mask = cap - 1;
  for (int32_t i = 0; i < v->n_tokens; i++) {
    const char *s = v->text + v->tokens[i].text_off;
    size_t len = v->tokens[i].text_len;
    size_t a = 0;
    size_t la = HN_MIN((size_t)spm_char_len((unsigned char)s[0]), len);
    while (len > 0 && a + la < len) {
      size_t b = a + la;
      size_t lb = HN_MIN((size_t)spm_char_len((unsigned char)s[b]), len - b);
      if (2 * (count + 1) > cap) {
        uint64_t *grown = calloc(cap * 2, sizeof(uint64_t));
        if (grown == NULL)
          return false;
        for (uint64_t k = 0; k < cap; k++)
          if (v->spm_pairs[k] != 0)
            spm_pairs_insert(grown, cap * 2 - 1, v->spm_pairs[k]);
        free(v->spm_pairs);
        v->spm_pairs = grown;
        cap *= 2;
        v->spm_pairs_mask = cap - 1;
      }
      count += spm_pairs_insert(v->spm_pairs, v->spm_pairs_mask, hn_vocab_hash_bytes(s + a, la + lb) | 1);
      a = b;
      la = lb;
    }
  }
  return true;
}

void
hn_vocab_free(HnVocab *vocab)
{
  if (vocab == NULL)
    return;
  free(vocab->spm_pairs);
  free(vocab->tokens);
  free(vocab->text);
  free(vocab->bytes);
  free(vocab->text_index);
  free(vocab->merges);
  free(vocab->eog);
  free(vocab->specials);
  free(vocab->special_lens);
  free(vocab->special_table);
  free(vocab);
}

/* GPT-2's reversible byte → printable code point mapping. */
static uint32_t
byte_to_unicode(int b)
{
  if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
    return (uint32_t)b;
  int n = 0;
  for (int i = 0; i < b; i++)
    if (!((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255)))
      n++;
  return 256u + (uint32_t)n;
}

static int
unicode_to_byte(uint32_t cp)
{
  if (cp < 256)
    return ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174)) ? (int)cp : -1;
  if (cp >= 256 + 68)
    return -1;
  int n = 0;
  for (int i = 0; i < 256; i++)
    if (!((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255))) {
      if (256u + (uint32_t)n == cp)
        return i;
      n++;
    }
  return -1;
}

static int
parse_byte_token(const char *s, size_t len)
{
  /* "<0xAB>" */
  if (len != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>')
    return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0)
      return -1;
    v = v * 16 + d;
  }
  return v;
}

/* tokenizer.ggml.pre values and what they mean, as the converters and the reference engine
 * use them.  Several names share a split but not the BOS / ignore_merges defaults (dbrx and
 * smaug-bpe split like LLaMA 3 without its other rules). */
static const struct {
  const char *name;
  HnPreType pre;
  bool add_bos;       /* default for tokenizer.ggml.add_bos_token */
  bool ignore_merges; /* look the whole piece up before merging */
  bool nfc;           /* the original tokenizer normalizes the text to NFC first (Qwen's) */
} pre_names[] = {
  { "default", HN_PRE_DEFAULT, false, false },
  { "gpt-2", HN_PRE_GPT2, false, false },          { "gpt2", HN_PRE_GPT2, false, false },
  { "phi-2", HN_PRE_GPT2, false, false },          { "mpt", HN_PRE_GPT2, false, false },
  { "olmo", HN_PRE_GPT2, false, false },           { "gpt-neox", HN_PRE_GPT2, false, false },
  { "jina-es", HN_PRE_GPT2, false, false },        { "jina-de", HN_PRE_GPT2, false, false },
  { "jina-v2-es", HN_PRE_GPT2, false, false },     { "jina-v2-de", HN_PRE_GPT2, false, false },
  { "gigachat", HN_PRE_GPT2, false, false },       { "exaone4", HN_PRE_GPT2, false, false },
  { "starcoder", HN_PRE_STARCODER, false, false }, { "refact", HN_PRE_STARCODER, false, false },
  { "command-r", HN_PRE_STARCODER, false, false }, { "smollm", HN_PRE_STARCODER, false, false },
  { "codeshell", HN_PRE_STARCODER, false, false }, { "exaone", HN_PRE_STARCODER, false, false },
  { "llama-bpe", HN_PRE_LLAMA3, true, true },      { "llama3", HN_PRE_LLAMA3, true, true },
  { "llama-v3", HN_PRE_LLAMA3, true, true },       { "falcon3", HN_PRE_LLAMA3, true, true },
  { "dbrx", HN_PRE_LLAMA3, false, false },         { "smaug-bpe", HN_PRE_LLAMA3, false, false },
  { "qwen2", HN_PRE_QWEN2, false, false, true },   { "deepseek-r1-qwen", HN_PRE_QWEN2, false, false, true },
  { "megrez", HN_PRE_QWEN2, false, false },
  { "falcon", HN_PRE_FALCON, false, false },
  { "deepseek-coder", HN_PRE_DEEPSEEK_CODER, false, false },
  { "deepseek-llm", HN_PRE_DEEPSEEK_LLM, false, false },
  { "gpt-4o", HN_PRE_GPT4O, false, false },        { "llama4", HN_PRE_GPT4O, false, false },
};

static bool
get_id(const HnGguf *gguf, const char *key, int32_t fallback, int32_t n, int32_t *out, HnError *err)
{
  int64_t v;
  HnError e = { 0 };
  if (!hn_gguf_get_i64(gguf, key, &v, &e)) {
    if (e.code != HN_ERR_NOT_FOUND) {
      if (err)
        *err = e;
      return false;
    }
    v = fallback;
  }
  *out = (v >= 0 && v < n) ? (int32_t)v : -1;
  return true;
}

static bool
is_eog_name(const char *s, size_t len)
{
  static const char *names[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                 "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
                                 /* DeepSeek's bars are U+FF5C FULLWIDTH VERTICAL LINE (octal \234 ends the escape
                                  * before the 'e') */
                                 "<\xef\xbd\234end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                 "<|return|>", "<|call|>" };
  for (size_t i = 0; i < HN_ARRAY_LEN(names); i++)
    if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0)
      return true;
  return false;
}

static struct HnSpecialSlot *
special_slot(const HnVocab *v, const char *s, size_t len)
{
  uint64_t slot = hn_vocab_hash_bytes(s, len) & v->special_table_mask;
  for (;;) {
    struct HnSpecialSlot *e = &v->special_table[slot];
    if (e->any < 0)
      return e;
    const HnVocabToken *t = &v->tokens[e->any];
    if (t->text_len == len && memcmp(v->text + t->text_off, s, len) == 0)
      return e;
    slot = (slot + 1) & v->special_table_mask;
  }
}

/* The hashed form of the large special-token groups (see HnVocab).  v->specials is sorted
 * by first byte, then longest first, then id, so the first token seen with a text has the
 * lowest id. */
static bool
build_special_table(HnVocab *v)
{
  uint64_t cap = 16;
  while (cap < (uint64_t)v->n_specials * 2)
    cap <<= 1;
  v->special_table = malloc(sizeof *v->special_table * cap);
  v->special_lens = malloc(sizeof(uint32_t) * ((size_t)v->n_specials + 1));
  if (v->special_table == NULL || v->special_lens == NULL)
    return false;
  v->special_table_mask = cap - 1;
  for (uint64_t k = 0; k < cap; k++)
    v->special_table[k] = (struct HnSpecialSlot){ -1, -1 };
  int32_t n_lens = 0;
  for (int b = 0; b < 256; b++) {
    v->special_len_start[b] = n_lens;
    if (v->special_start[b + 1] - v->special_start[b] <= HN_SPECIALS_SCANNED)
      continue;
    for (int32_t k = v->special_start[b]; k < v->special_start[b + 1]; k++) {
      int32_t id = v->specials[k];
      const HnVocabToken *t = &v->tokens[id];
      if (n_lens == v->special_len_start[b] || v->special_lens[n_lens - 1] != t->text_len)
        v->special_lens[n_lens++] = t->text_len;
      if (t->text_len >= 2) {
        unsigned char second = (unsigned char)v->text[t->text_off + 1];
        v->special_second_byte[b][second >> 5] |= 1u << (second & 31);
      }
      struct HnSpecialSlot *e = special_slot(v, v->text + t->text_off, t->text_len);
      if (e->any < 0)
        e->any = id;
      if (e->user < 0 && t->type == HN_TOKEN_TYPE_USER_DEFINED)
        e->user = id;
    }
  }
  v->special_len_start[256] = n_lens;
  return true;
}

static int
cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

HnVocab *
hn_vocab_load(const HnGguf *gguf, HnError *err)
{
  HnStr model;
  if (!hn_gguf_get_str(gguf, "tokenizer.ggml.model", &model, err)) {
    hn_error_prefix(err, "tokenizer");
    return NULL;
  }
  HnVocab *v = calloc(1, sizeof *v);
  if (v == NULL) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory loading the vocabulary");
    return NULL;
  }
  if (hn_str_eq(model, "llama"))
    v->type = HN_VOCAB_SPM;
  else if (hn_str_eq(model, "gpt2"))
    v->type = HN_VOCAB_BPE;
  else {
    hn_error_set(err, HN_ERR_UNSUPPORTED, "tokenizer model '%.*s' is not supported (only 'llama' and 'gpt2')",
                 (int)HN_MIN(model.len, 64), model.data);
    goto fail;
  }

  HnGgufArray toks;
  if (!hn_gguf_get_array(gguf, "tokenizer.ggml.tokens", &toks, err))
    goto fail;
  if (toks.type != HN_GGUF_STRING || toks.count == 0 || toks.count > HN_VOCAB_MAX_TOKENS) {
    hn_error_set(err, HN_ERR_FORMAT, "tokenizer.ggml.tokens must be a non-empty string array of at most %d entries",
                 HN_VOCAB_MAX_TOKENS);
    goto fail;
  }
  int32_t n = (int32_t)toks.count;
  v->n_tokens = n;
  HnStr *strs = malloc(sizeof(HnStr) * (size_t)n);
  v->tokens = calloc((size_t)n, sizeof *v->tokens);
  v->eog = calloc((size_t)n, 1);
  if (strs == NULL || v->tokens == NULL || v->eog == NULL) {
    free(strs);
    hn_error_set(err, HN_ERR_NOMEM, "out of memory loading %d tokens", n);
    goto fail;
  }
  hn_gguf_array_strings(&toks, strs);
  size_t total = 0;
  for (int32_t i = 0; i < n; i++) {
    if (strs[i].len > (1u << 20)) {
      free(strs);
      hn_error_set(err, HN_ERR_FORMAT, "token %d is implausibly long", i);
      goto fail;
    }
    total += strs[i].len;
  }
  if (total > (1u << 30)) {
    free(strs);
    hn_error_set(err, HN_ERR_FORMAT, "tokenizer.ggml.tokens holds too much text");
    goto fail;
  }
  v->text = malloc(total + 1);
  v->bytes = malloc(total + 1); /* decoded bytes are never longer than the piece */
  uint32_t cap = 1;
  while (cap < (uint32_t)n * 2u)
    cap <<= 1;
  v->text_index = malloc(sizeof(int32_t) * cap);
  if (v->text == NULL || v->bytes == NULL || v->text_index == NULL) {
    free(strs);
    hn_error_set(err, HN_ERR_NOMEM, "out of memory loading the vocabulary");
    goto fail;
  }
  memset(v->text_index, 0xff, sizeof(int32_t) * cap);
  v->text_index_mask = cap - 1;
  size_t off = 0;
  for (int32_t i = 0; i < n; i++) {
    memcpy(v->text + off, strs[i].data, strs[i].len);
    v->tokens[i].text_off = (uint32_t)off;
    v->tokens[i].text_len = (uint32_t)strs[i].len;
    v->tokens[i].type = HN_TOKEN_TYPE_NORMAL;
    off += strs[i].len;
  }
  free(strs);
  /* first occurrence wins for duplicate pieces */
  for (int32_t i = 0; i < n; i++) {
    const char *s = v->text + v->tokens[i].text_off;
    size_t len = v->tokens[i].text_len;
    if (hn_vocab_lookup(v, s, len) >= 0)
      continue;
    uint32_t slot = (uint32_t)hn_vocab_hash_bytes(s, len) & v->text_index_mask;
    while (v->text_index[slot] >= 0)
      slot = (slot + 1) & v->text_index_mask;
    v->text_index[slot] = i;
  }

  HnGgufArray arr;
  HnError e = { 0 };
  if (hn_gguf_get_array(gguf, "tokenizer.ggml.scores", &arr, &e)) {
    if (arr.count != (uint64_t)n || (arr.type != HN_GGUF_FLOAT32 && arr.type != HN_GGUF_FLOAT64)) {
      hn_error_set(err, HN_ERR_FORMAT, "tokenizer.ggml.scores must hold one float per token");
      goto fail;
    }
    for (int32_t i = 0; i < n; i++)
      v->tokens[i].score = (float)hn_gguf_array_float(&arr, (uint64_t)i);
  } else if (e.code != HN_ERR_NOT_FOUND) {
    if (err)
      *err = e;
    goto fail;
  }
  e.code = HN_OK;
  if (hn_gguf_get_array(gguf, "tokenizer.ggml.token_type", &arr, &e)) {
    if (arr.count != (uint64_t)n || arr.type == HN_GGUF_STRING || arr.type == HN_GGUF_ARRAY ||
        arr.type == HN_GGUF_FLOAT32 || arr.type == HN_GGUF_FLOAT64) {
      hn_error_set(err, HN_ERR_FORMAT, "tokenizer.ggml.token_type must hold one integer per token");
      goto fail;
    }
    for (int32_t i = 0; i < n; i++) {
      int64_t t = hn_gguf_array_int(&arr, (uint64_t)i);
      v->tokens[i].type = (t >= 0 && t <= 6) ? (uint8_t)t : HN_TOKEN_TYPE_UNDEFINED;
    }
  } else if (e.code != HN_ERR_NOT_FOUND) {
    if (err)
      *err = e;
    goto fail;
  }

  /* defaults per tokenizer type, as the reference engine applies them */
  bool is_spm = v->type == HN_VOCAB_SPM;
  if (!get_id(gguf, "tokenizer.ggml.bos_token_id", is_spm ? 1 : 11, n, &v->bos, err) ||
      !get_id(gguf, "tokenizer.ggml.eos_token_id", is_spm ? 2 : 11, n, &v->eos, err) ||
      !get_id(gguf, "tokenizer.ggml.unknown_token_id", is_spm ? 0 : -1, n, &v->unk, err) ||
      !get_id(gguf, "tokenizer.ggml.padding_token_id", -1, n, &v->pad, err) ||
      !get_id(gguf, "tokenizer.ggml.eot_token_id", -1, n, &v->eot, err) ||
      !get_id(gguf, "tokenizer.ggml.eom_token_id", -1, n, &v->eom, err))
    goto fail;

  /* A missing or unknown tokenizer.ggml.pre gets the default split, as in the reference
   * engine: refusing the model would be worse for the user than a split that may differ on
   * rare inputs.  The notice says so, once, where the caller can show it. */
  v->pre = HN_PRE_DEFAULT;
  v->notice[0] = '\0';
  bool add_bos_default = is_spm;
  strcpy(v->pre_name, is_spm ? "" : "default");
  if (!is_spm) {
    HnStr pre;
    e.code = HN_OK;
    if (hn_gguf_get_str(gguf, "tokenizer.ggml.pre", &pre, &e)) {
      bool known = false;
      for (size_t i = 0; i < HN_ARRAY_LEN(pre_names); i++)
        if (hn_str_eq(pre, pre_names[i].name)) {
          v->pre = pre_names[i].pre;
          v->ignore_merges = pre_names[i].ignore_merges;
          v->normalize_nfc = pre_names[i].nfc;
          add_bos_default = pre_names[i].add_bos;
          snprintf(v->pre_name, sizeof v->pre_name, "%s", pre_names[i].name);
          known = true;
        }
      if (!known) {
        /* the name is arbitrary bytes: keep printable ASCII so the sentence stays valid text */
        char name[41];
        size_t n_name = pre.len < sizeof name - 1 ? (size_t)pre.len : sizeof name - 1;
        for (size_t i = 0; i < n_name; i++)
          name[i] = pre.data[i] >= 0x20 && pre.data[i] < 0x7f ? pre.data[i] : '?';
        name[n_name] = '\0';
        snprintf(v->notice, sizeof v->notice,
                 "The model's tokenizer type \"%s\" is unknown; its text is split the default way, "
                 "which may differ slightly from its training.", name);
      }
    }
  }
  if (!hn_gguf_get_bool_or(gguf, "tokenizer.ggml.add_bos_token", add_bos_default, &v->add_bos, err) ||
      !hn_gguf_get_bool_or(gguf, "tokenizer.ggml.add_eos_token", false, &v->add_eos, err) ||
      !hn_gguf_get_bool_or(gguf, "tokenizer.ggml.add_space_prefix", is_spm, &v->add_space_prefix, err))
    goto fail;
  if (v->add_bos && v->bos < 0)
    v->add_bos = false;
  if (v->add_eos && v->eos < 0)
    v->add_eos = false;

  /* token bytes, byte tokens */
  for (int i = 0; i < 256; i++)
    v->byte_token[i] = -1;
  size_t boff = 0;
  for (int32_t i = 0; i < n; i++) {
    HnVocabToken *t = &v->tokens[i];
    const char *s = v->text + t->text_off;
    size_t len = t->text_len;
    t->bytes_off = (uint32_t)boff;
    char *dst = v->bytes + boff;
    size_t out = 0;
    if (t->type == HN_TOKEN_TYPE_CONTROL || t->type == HN_TOKEN_TYPE_UNKNOWN || t->type == HN_TOKEN_TYPE_UNUSED) {
      out = 0;
    } else if (is_spm) {
      int b = t->type == HN_TOKEN_TYPE_BYTE ? parse_byte_token(s, len) : -1;
      if (b >= 0) {
        dst[out++] = (char)b;
        if (v->byte_token[b] < 0)
          v->byte_token[b] = i;
      } else {
        for (size_t k = 0; k < len;) {
          if (k + 3 <= len && memcmp(s + k, "\xe2\x96\x81", 3) == 0) {
            dst[out++] = ' ';
            k += 3;
          } else
            dst[out++] = s[k++];
        }
      }
    } else if (t->type == HN_TOKEN_TYPE_USER_DEFINED) {
      memcpy(dst, s, len);
      out = len;
    } else {
      for (size_t k = 0; k < len;) {
        uint32_t cp;
        int used = hn_utf8_decode(s + k, len - k, &cp);
        int b = cp == HN_UC_INVALID ? -1 : unicode_to_byte(cp);
        if (b < 0) { /* not byte-level text: keep as is */
          memcpy(dst + out, s + k, (size_t)used);
          out += (size_t)used;
        } else
          dst[out++] = (char)b;
        k += (size_t)used;
      }
    }
    t->bytes_len = (uint32_t)out;
    boff += out;
  }
  if (!is_spm) {
    for (int b = 0; b < 256; b++) {
      char buf[4];
      int l = hn_utf8_encode(byte_to_unicode(b), buf);
      v->byte_token[b] = hn_vocab_lookup(v, buf, (size_t)l);
    }
  }

  /* merges */
  if (!is_spm) {
    e.code = HN_OK;
    if (!hn_gguf_get_array(gguf, "tokenizer.ggml.merges", &arr, &e) || arr.type != HN_GGUF_STRING) {
      hn_error_set(err, HN_ERR_FORMAT, "a gpt2 tokenizer needs tokenizer.ggml.merges (string array)");
      goto fail;
    }
    if (arr.count > HN_VOCAB_MAX_TOKENS) {
      hn_error_set(err, HN_ERR_FORMAT, "tokenizer.ggml.merges is too large");
      goto fail;
    }
    HnStr *ms = malloc(sizeof(HnStr) * (arr.count + 1));
    uint64_t mcap = 1;
    while (mcap < arr.count * 2 + 2)
      mcap <<= 1;
    v->merges = malloc(sizeof(HnMergeSlot) * mcap);
    char *scratch = malloc((1u << 21) + 1);
    if (ms == NULL || v->merges == NULL || scratch == NULL) {
      free(ms);
      free(scratch);
      hn_error_set(err, HN_ERR_NOMEM, "out of memory loading merges");
      goto fail;
    }
    v->merges_mask = mcap - 1;
    for (uint64_t i = 0; i < mcap; i++)
      v->merges[i].key = UINT64_MAX;
    hn_gguf_array_strings(&arr, ms);
    for (uint64_t r = 0; r < arr.count; r++) {
      const char *s = ms[r].data;
      size_t len = ms[r].len;
      size_t sp = 0;
      for (size_t k = 1; k < len; k++)
        if (s[k] == ' ') {
          sp = k;
          break;
        }
      if (sp == 0)
        continue;
      int32_t l = hn_vocab_lookup(v, s, sp);
      int32_t rr = hn_vocab_lookup(v, s + sp + 1, len - sp - 1);
      memcpy(scratch, s, sp);
      memcpy(scratch + sp, s + sp + 1, len - sp - 1);
      int32_t res = hn_vocab_lookup(v, scratch, len - 1);
      if (l < 0 || rr < 0 || res < 0)
        continue;
      uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)rr;
      uint64_t slot = merge_hash(key) & v->merges_mask;
      while (v->merges[slot].key != UINT64_MAX && v->merges[slot].key != key)
        slot = (slot + 1) & v->merges_mask;
      if (v->merges[slot].key == key)
        continue; /* earlier rank wins */
      v->merges[slot].key = key;
      v->merges[slot].rank = (int32_t)r;
      v->merges[slot].result = res;
    }
    free(ms);
    free(scratch);
  }

  /* end of generation */
  if (v->eos >= 0)
    v->eog[v->eos] = 1;
  if (v->eot >= 0)
    v->eog[v->eot] = 1;
  if (v->eom >= 0)
    v->eog[v->eom] = 1;
  for (int32_t i = 0; i < n; i++) {
    const HnVocabToken *t = &v->tokens[i];
    if (is_eog_name(v->text + t->text_off, t->text_len)) {
      v->eog[i] = 1;
      if (v->eot < 0 && strncmp(v->text + t->text_off, "<|endoftext|>", t->text_len) != 0)
        v->eot = i;
    }
  }

  if (is_spm && !build_spm_pairs(v)) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto fail;
  }

  /* specials for parse_special by first byte, longest first (ties: lower id); token texts
   * are at most 1 << 20 bytes, so the length fits in 24 bits of the key */
  v->specials = malloc(sizeof(int32_t) * (size_t)n);
  uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)n);
  if (v->specials == NULL || keys == NULL) {
    free(keys);
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto fail;
  }
  int32_t per_byte[256] = { 0 };
  for (int32_t i = 0; i < n; i++) {
    const HnVocabToken *t = &v->tokens[i];
    if ((t->type == HN_TOKEN_TYPE_CONTROL || t->type == HN_TOKEN_TYPE_USER_DEFINED) && t->text_len > 0) {
      unsigned char c = (unsigned char)v->text[t->text_off];
      keys[v->n_specials++] = (uint64_t)c << 56 | (uint64_t)((1u << 24) - 1 - t->text_len) << 32 | (uint32_t)i;
      v->n_user_defined += t->type == HN_TOKEN_TYPE_USER_DEFINED;
      per_byte[c]++;
    }
  }
  qsort(keys, (size_t)v->n_specials, sizeof(uint64_t), cmp_u64);
  for (int32_t k = 0; k < v->n_specials; k++)
    v->specials[k] = (int32_t)(uint32_t)keys[k];
  free(keys);
  v->special_start[0] = 0;
  for (int b = 0; b < 256; b++)
    v->special_start[b + 1] = v->special_start[b] + per_byte[b];
  if (!build_special_table(v)) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto fail;
  }
  return v;

fail:
  hn_vocab_free(v);
  return NULL;
}

int32_t hn_vocab_n_tokens(const HnVocab *v) { return v->n_tokens; }
HnVocabType hn_vocab_type(const HnVocab *v) { return v->type; }
const char *hn_vocab_pre_name(const HnVocab *v) { return v->pre_name; }
const char *hn_vocab_notice(const HnVocab *v) { return v->notice[0] ? v->notice : NULL; }
int32_t hn_vocab_bos(const HnVocab *v) { return v->bos; }
int32_t hn_vocab_eos(const HnVocab *v) { return v->eos; }
int32_t hn_vocab_eot(const HnVocab *v) { return v->eot; }
int32_t hn_vocab_pad(const HnVocab *v) { return v->pad; }
int32_t hn_vocab_unk(const HnVocab *v) { return v->unk; }
bool hn_vocab_add_bos(const HnVocab *v) { return v->add_bos; }
bool hn_vocab_add_eos(const HnVocab *v) { return v->add_eos; }

bool
hn_vocab_is_eog(const HnVocab *v, int32_t id)
{
  return id >= 0 && id < v->n_tokens && v->eog[id];
}

bool
hn_vocab_is_control(const HnVocab *v, int32_t id)
{
  return id >= 0 && id < v->n_tokens && v->tokens[id].type == HN_TOKEN_TYPE_CONTROL;
}

HnTokenType
hn_vocab_token_type(const HnVocab *v, int32_t id)
{
  return (id >= 0 && id < v->n_tokens) ? (HnTokenType)v->tokens[id].type : HN_TOKEN_TYPE_UNDEFINED;
}

float
hn_vocab_token_score(const HnVocab *v, int32_t id)
{
  return (id >= 0 && id < v->n_tokens) ? v->tokens[id].score : 0.0f;
}

const char *
hn_vocab_token_text(const HnVocab *v, int32_t id, size_t *len)
{
  if (id < 0 || id >= v->n_tokens) {
    *len = 0;
    return NULL;
  }
  *len = v->tokens[id].text_len;
  return v->text + v->tokens[id].text_off;
}

int32_t
hn_vocab_find_token(const HnVocab *v, const char *text)
{
  return hn_vocab_lookup(v, text, strlen(text));
}

const char *
hn_token_bytes(const HnVocab *v, int32_t id, size_t *len)
{
  if (id < 0 || id >= v->n_tokens) {
    *len = 0;
    return NULL;
  }
  *len = v->tokens[id].bytes_len;
  return v->bytes + v->tokens[id].bytes_off;
}

int32_t
hn_token_to_bytes(const HnVocab *v, int32_t id, char *buf, size_t cap)
{
  size_t len;
  const char *b = hn_token_bytes(v, id, &len);
  if (b == NULL)
    return -1;
  memcpy(buf, b, HN_MIN(len, cap));
  return (int32_t)len;
}

/* Tokenizes a run of plain text (no specials). */
static int64_t
tokenize_plain(const HnVocab *v, const char *text, size_t len, bool first, int32_t *out, int64_t n,
               int64_t n_max)
{
  if (len == 0)
    return n;
  if (v->type == HN_VOCAB_SPM)
    return hn_tokenize_spm(v, text, len, v->add_space_prefix && first, out, n, n_max);
  if (v->normalize_nfc) {
    char *normalized;
    int64_t n_normalized = hn_utf8_nfc(text, len, &normalized);
    if (n_normalized < 0)
      return -1;
    if (normalized != NULL) {
      n = hn_tokenize_bpe(v, normalized, (size_t)n_normalized, out, n, n_max);
      free(normalized);
      return n;
    }
  }
  return hn_tokenize_bpe(v, text, len, out, n, n_max);
}

static int32_t
match_special(const HnVocab *v, const char *text, size_t len, bool parse_special)
{
  unsigned char c = (unsigned char)text[0];
  if (v->special_start[c + 1] - v->special_start[c] > HN_SPECIALS_SCANNED) {
    /* one lookup per distinct length, longest first */
    unsigned char second = len >= 2 ? (unsigned char)text[1] : 0;
    bool longer_possible = len >= 2 && (v->special_second_byte[c][second >> 5] & (1u << (second & 31)));
    for (int32_t k = v->special_len_start[c]; k < v->special_len_start[c + 1]; k++) {
      uint32_t l = v->special_lens[k];
      if (l > len || (l >= 2 && !longer_possible))
        continue;
      const struct HnSpecialSlot *e = special_slot(v, text, l);
      int32_t id = parse_special ? e->any : e->user;
      if (id >= 0)
        return id;
    }
    return -1;
  }
  for (int32_t k = v->special_start[c]; k < v->special_start[c + 1]; k++) {
    const HnVocabToken *t = &v->tokens[v->specials[k]];
    if (t->text_len <= len && (parse_special || t->type == HN_TOKEN_TYPE_USER_DEFINED) &&
        memcmp(v->text + t->text_off, text, t->text_len) == 0)
      return v->specials[k];
  }
  return -1;
}

/* Is [i, i + n) clear of every guarded range?  Ranges are sorted and disjoint. */
static bool
outside_guards(const HnTextRange *guards, size_t n_guards, size_t *next, size_t i, size_t n)
{
  while (*next < n_guards && guards[*next].end <= i)
    (*next)++;
  return *next >= n_guards || i + n <= guards[*next].start;
}

static int32_t tokenize_impl(const HnVocab *v, const char *text, size_t len, bool add_special,
                             bool parse_special, const HnTextRange *guards, size_t n_guards,
                             int32_t *out, int32_t n_max, HnError *err);

int32_t
hn_tokenize(const HnVocab *v, const char *text, size_t len, bool add_special, bool parse_special,
            int32_t *out, int32_t n_max, HnError *err)
{
  return tokenize_impl(v, text, len, add_special, parse_special, NULL, 0, out, n_max, err);
}

int32_t
hn_tokenize_guarded(const HnVocab *v, const char *text, size_t len, bool add_special,
                    const HnTextRange *guards, size_t n_guards, int32_t *out, int32_t n_max,
                    HnError *err)
{
  for (size_t k = 0; k < n_guards; k++)
    if (guards[k].start > guards[k].end || guards[k].end > len ||
        (k > 0 && guards[k].start < guards[k - 1].end)) {
      hn_error_set(err, HN_ERR_INVALID_ARG, "hn_tokenize_guarded: ranges must be sorted, disjoint and inside the text");
      return INT32_MIN;
    }
  return tokenize_impl(v, text, len, add_special, true, guards, n_guards, out, n_max, err);
}

static int32_t
tokenize_impl(const HnVocab *v, const char *text, size_t len, bool add_special, bool parse_special,
              const HnTextRange *guards, size_t n_guards, int32_t *out, int32_t n_max, HnError *err)
{
  if (n_max < 0 || (text == NULL && len > 0)) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "hn_tokenize: bad arguments");
    return INT32_MIN;
  }
  if (len > (size_t)INT32_MAX / 2) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "text too long to tokenize (%zu bytes)", len);
    return INT32_MIN;
  }
  int64_t n = 0;
  if (add_special && v->add_bos) {
    if (n < n_max)
      out[n] = v->bos;
    n++;
  }
  bool first = true;
  size_t start = 0;
  if ((parse_special && v->n_specials > 0) || v->n_user_defined > 0) {
    size_t next_guard = 0;
    for (size_t i = 0; i < len;) {
      int32_t id = match_special(v, text + i, len - i, parse_special);
      /* inside a guarded range only what parse_special = false would match */
      if (id >= 0 && v->tokens[id].type != HN_TOKEN_TYPE_USER_DEFINED &&
          !outside_guards(guards, n_guards, &next_guard, i, v->tokens[id].text_len))
        id = match_special(v, text + i, len - i, false);
      if (id < 0) {
        i++;
        continue;
      }
      n = tokenize_plain(v, text + start, i - start, first, out, n, n_max);
      if (n < 0)
        goto nomem;
      if (i > start)
        first = false;
      if (n < n_max)
        out[n] = id;
      n++;
      first = true; /* the reference engine re-adds the space prefix after a special token */
      i += v->tokens[id].text_len;
      start = i;
    }
  }
  n = tokenize_plain(v, text + start, len - start, first, out, n, n_max);
  if (n < 0)
    goto nomem;
  if (add_special && v->add_eos) {
    if (n < n_max)
      out[n] = v->eos;
    n++;
  }
  if (n > INT32_MAX) {
    hn_error_set(err, HN_ERR_NOMEM, "too many tokens");
    return INT32_MIN;
  }
  return n > n_max ? -(int32_t)n : (int32_t)n;
nomem:
  hn_error_set(err, HN_ERR_NOMEM, "out of memory while tokenizing");
  return INT32_MIN;
}

int64_t
hn_detokenize(const HnVocab *v, const int32_t *ids, size_t n, bool remove_leading_space, bool render_special,
              char *buf, size_t cap, HnError *err)
{
  size_t total = 0;
  bool seen_text = false;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= v->n_tokens) {
      hn_error_set(err, HN_ERR_INVALID_ARG, "token id %d is out of range (vocabulary of %d)", ids[i], v->n_tokens);
      return -1;
    }
    const HnVocabToken *t = &v->tokens[ids[i]];
    const char *b = v->bytes + t->bytes_off;
    size_t len = t->bytes_len;
    if (render_special && t->type == HN_TOKEN_TYPE_CONTROL) {
      b = v->text + t->text_off;
      len = t->text_len;
    }
    if (!seen_text && len > 0) {
      seen_text = true;
      if (remove_leading_space && v->type == HN_VOCAB_SPM && v->add_space_prefix && b[0] == ' ') {
        b++;
        len--;
      }
    }
    if (total < cap)
      memcpy(buf + total, b, HN_MIN(len, cap - total));
    total += len;
  }
  return (int64_t)total;
}

struct HnStreamDecoder {
  const HnVocab *vocab;
  bool render_special;
  char *pending;
  size_t n_pending, cap_pending;
  char *out;
  size_t cap_out;
};

HnStreamDecoder *
hn_stream_decoder_new(const HnVocab *vocab, bool render_special)
{
  HnStreamDecoder *d = calloc(1, sizeof *d);
  if (d == NULL)
    return NULL;
  d->vocab = vocab;
  d->render_special = render_special;
  return d;
}

void
hn_stream_decoder_free(HnStreamDecoder *d)
{
  if (d == NULL)
    return;
  free(d->pending);
  free(d->out);
  free(d);
}

void
hn_stream_decoder_reset(HnStreamDecoder *d)
{
  d->n_pending = 0;
}

static bool
reserve(char **p, size_t *cap, size_t need)
{
  return HN_ARRAY_RESERVE(*p, *cap, need, 64);
}

/* Moves the valid part of pending into out, replacing invalid bytes with U+FFFD; keeps a
 * trailing incomplete sequence unless `final`. */
static const char *
drain(HnStreamDecoder *d, bool final, size_t *len)
{
  size_t keep_from = final ? d->n_pending : hn_utf8_complete_prefix(d->pending, d->n_pending);
  if (!reserve(&d->out, &d->cap_out, keep_from * 3 + 4)) {
    *len = 0;
    return NULL;
  }
  size_t o = 0;
  for (size_t i = 0; i < keep_from;) {
    uint32_t cp;
    int used = hn_utf8_decode(d->pending + i, keep_from - i, &cp);
    if (cp == HN_UC_INVALID) {
      memcpy(d->out + o, "\xef\xbf\xbd", 3);
      o += 3;
    } else {
      memcpy(d->out + o, d->pending + i, (size_t)used);
      o += (size_t)used;
    }
    i += (size_t)used;
  }
  memmove(d->pending, d->pending + keep_from, d->n_pending - keep_from);
  d->n_pending -= keep_from;
  *len = o;
  return d->out ? d->out : "";
}

const char *
hn_stream_decoder_push(HnStreamDecoder *d, int32_t id, size_t *len)
{
  const HnVocab *v = d->vocab;
  *len = 0;
  if (id < 0 || id >= v->n_tokens)
    return NULL;
  const HnVocabToken *t = &v->tokens[id];
  const char *b = v->bytes + t->bytes_off;
  size_t n = t->bytes_len;
  if (d->render_special && t->type == HN_TOKEN_TYPE_CONTROL) {
    b = v->text + t->text_off;
    n = t->text_len;
  }
  if (!reserve(&d->pending, &d->cap_pending, d->n_pending + n + 1))
    return NULL;
  memcpy(d->pending + d->n_pending, b, n);
  d->n_pending += n;
  return drain(d, false, len);
}

const char *
hn_stream_decoder_flush(HnStreamDecoder *d, size_t *len)
{
  if (!reserve(&d->pending, &d->cap_pending, 1)) {
    *len = 0;
    return NULL;
  }
  return drain(d, true, len);
}
