/* hn-vocab-private.h — the HnVocab layout shared by the loader and the tokenizers.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-vocab.h"

typedef enum {
  HN_PRE_DEFAULT = 0,    /* "default", a missing key and unknown values */
  HN_PRE_GPT2,           /* gpt-2, mpt, olmo, gpt-neox, phi-2, ... */
  HN_PRE_STARCODER,      /* starcoder, refact, command-r, smollm, codeshell, exaone: digits split, then gpt-2 */
  HN_PRE_LLAMA3,         /* llama-bpe, llama3, dbrx, smaug-bpe */
  HN_PRE_QWEN2,          /* qwen2 (also Qwen3), deepseek-r1-qwen, megrez: llama3 with single digits */
  HN_PRE_FALCON,
  HN_PRE_DEEPSEEK_CODER,
  HN_PRE_DEEPSEEK_LLM,
  HN_PRE_GPT4O,          /* gpt-4o, llama4: OpenAI's o200k split (letters by case) */
} HnPreType;

/* Special-token groups (same first byte) up to this size are scanned; larger ones hashed. */
#define HN_SPECIALS_SCANNED 16

typedef struct {
  uint32_t text_off, text_len;   /* raw piece in vocab->text */
  uint32_t bytes_off, bytes_len; /* decoded bytes in vocab->bytes */
  float score;
  uint8_t type;
} HnVocabToken;

typedef struct {
  uint64_t key; /* left id << 32 | right id, or UINT64_MAX when empty */
  int32_t rank;
  int32_t result;
} HnMergeSlot;

struct HnVocab {
  HnVocabType type;
  HnPreType pre;
  char pre_name[32];
  char notice[192]; /* "" or a sentence for the user (unknown pre-tokenizer) */
  int32_t n_tokens;
  HnVocabToken *tokens;
  char *text;
  char *bytes;
  /* text → id, open addressing, power-of-two size, -1 empty */
  int32_t *text_index;
  uint32_t text_index_mask;
  HnMergeSlot *merges;
  uint64_t merges_mask;
  int32_t byte_token[256]; /* SPM: <0xXX>; BPE: the single byte-level character */
  int32_t bos, eos, eot, eom, pad, unk;
  bool add_bos, add_eos, add_space_prefix, ignore_merges;
  bool normalize_nfc; /* plain text is put in Normalization Form C before splitting (qwen2) */
  uint8_t *eog; /* per token flag */
  /* parse_special candidates grouped by first byte, longest first within a group (ties:
   * lower id): those starting with byte b are specials[special_start[b] .. special_start[b + 1]).
   * Vocabularies like Gemma's hold thousands of control and user-defined tokens; only the few
   * that start with the text's byte are compared. */
  int32_t *specials;
  int32_t n_specials;
  int32_t n_user_defined; /* matched even without parse_special, like added tokens */
  int32_t special_start[257];
  /* Large groups (more than HN_SPECIALS_SCANNED, e.g. Gemma's 6 000 "<unused…>" tokens all
   * starting with '<') are not scanned: their distinct lengths, longest first, are
   * special_lens[special_len_start[b] .. special_len_start[b + 1]), and each length is one
   * lookup of the text in special_table (text → lowest special id, lowest user-defined id). */
  uint32_t *special_lens;
  int32_t special_len_start[257];
  struct HnSpecialSlot {
    int32_t any, user; /* any = -1: empty slot */
  } *special_table;
  uint64_t special_table_mask;
  /* per large group: bitmap of the second bytes of its tokens; a text whose second byte is
   * not there can only match a one-byte token (Gemma's 30 space runs vs. " the") */
  uint32_t special_second_byte[256][8];
  /* SPM: hashes of every pair of neighbouring characters inside some token (0 = empty) */
  uint64_t *spm_pairs;
  uint64_t spm_pairs_mask;
};

uint64_t hn_vocab_hash_bytes(const char *s, size_t len);
/* Whether the two characters s[0..len) (neighbours in the text) occur next to each other
 * in some token; false means no merge can ever join them. */
bool hn_vocab_spm_pair_possible(const HnVocab *vocab, const char *s, size_t len);
int32_t hn_vocab_lookup(const HnVocab *vocab, const char *s, size_t len);
/* rank of merging left+right, or -1; *result the merged id */
int32_t hn_vocab_merge_rank(const HnVocab *vocab, int32_t left, int32_t right, int32_t *result);

/* Appends ids to out (may write past n_max? no: counts only).  Both return the new count
 * (which may exceed n_max: ids beyond n_max are not written) or -1 on allocation failure. */
int64_t hn_tokenize_spm(const HnVocab *vocab, const char *text, size_t len, bool add_prefix,
                        int32_t *out, int64_t n, int64_t n_max);
int64_t hn_tokenize_bpe(const HnVocab *vocab, const char *text, size_t len, int32_t *out,
                        int64_t n, int64_t n_max);

/* Pre-tokenizer: splits text into pieces (byte offsets).  Returns the count, or -1 on
 * allocation failure; *pieces is malloc'ed (pairs start, end). */
int64_t hn_pretokenize(HnPreType pre, const char *text, size_t len, uint32_t **pieces);
