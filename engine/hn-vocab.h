/* hn-vocab.h — tokenizer vocabularies read from GGUF metadata (tokenizer.ggml.*):
 * text → token ids (SentencePiece-style "llama" and byte-level BPE "gpt2"), ids → bytes,
 * and a streaming decoder that only ever emits complete UTF-8.
 *
 * An HnVocab is immutable after hn_vocab_load() and may be shared between threads; it
 * copies everything it needs, so the HnGguf may be closed afterwards.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-common.h"
#include "hn-gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HN_VOCAB_SPM = 1, /* tokenizer.ggml.model = "llama" */
  HN_VOCAB_BPE = 2, /* tokenizer.ggml.model = "gpt2" */
} HnVocabType;

/* tokenizer.ggml.token_type values */
typedef enum {
  HN_TOKEN_TYPE_UNDEFINED = 0,
  HN_TOKEN_TYPE_NORMAL = 1,
  HN_TOKEN_TYPE_UNKNOWN = 2,
  HN_TOKEN_TYPE_CONTROL = 3,
  HN_TOKEN_TYPE_USER_DEFINED = 4,
  HN_TOKEN_TYPE_UNUSED = 5,
  HN_TOKEN_TYPE_BYTE = 6,
} HnTokenType;

typedef struct HnVocab HnVocab;

/* Loads the vocabulary of `gguf`.  Fails with HN_ERR_UNSUPPORTED for other tokenizer
 * models and HN_ERR_FORMAT for inconsistent data (bad ids, missing merges...).  A missing or
 * unknown tokenizer.ggml.pre value is not an error: the default split is used and
 * hn_vocab_notice() says so. */
HnVocab *hn_vocab_load(const HnGguf *gguf, HnError *err);
void hn_vocab_free(HnVocab *vocab);

int32_t hn_vocab_n_tokens(const HnVocab *vocab);
HnVocabType hn_vocab_type(const HnVocab *vocab);
/* The pre-tokenizer actually in use ("default", "gpt-2", "llama-bpe", ...; "" for SPM). */
const char *hn_vocab_pre_name(const HnVocab *vocab);
/* NULL, or a sentence for the user about how the vocabulary was loaded (an unknown
 * pre-tokenizer type). */
const char *hn_vocab_notice(const HnVocab *vocab);

/* Special ids, -1 when the vocabulary has none. */
int32_t hn_vocab_bos(const HnVocab *vocab);
int32_t hn_vocab_eos(const HnVocab *vocab);
int32_t hn_vocab_eot(const HnVocab *vocab);
int32_t hn_vocab_pad(const HnVocab *vocab);
int32_t hn_vocab_unk(const HnVocab *vocab);
bool hn_vocab_add_bos(const HnVocab *vocab);
bool hn_vocab_add_eos(const HnVocab *vocab);

/* End of generation: EOS, EOT and tokens named like <|im_end|>, <|eot_id|>, <|end|>,
 * <end_of_turn>, <|endoftext|>, <|eom_id|>.  False for out-of-range ids. */
bool hn_vocab_is_eog(const HnVocab *vocab, int32_t id);
/* Control tokens (token type CONTROL); false for out-of-range ids. */
bool hn_vocab_is_control(const HnVocab *vocab, int32_t id);
HnTokenType hn_vocab_token_type(const HnVocab *vocab, int32_t id);
float hn_vocab_token_score(const HnVocab *vocab, int32_t id);

/* The raw piece as stored in the vocabulary (e.g. "▁the", "Ġthe", "<0x0A>"), not
 * NUL-terminated; NULL (and *len = 0) for out-of-range ids. */
const char *hn_vocab_token_text(const HnVocab *vocab, int32_t id, size_t *len);
/* Id of the token whose raw piece is exactly `text` (NUL-terminated), or -1. */
int32_t hn_vocab_find_token(const HnVocab *vocab, const char *text);

/* Tokenizes text[0..len) (any bytes; invalid UTF-8 is handled, never rejected).
 * add_special: prepend BOS / append EOS as the vocabulary asks (hn_vocab_add_bos/eos).
 * parse_special: control and user-defined tokens written in the text become their ids
 * (longest match first); otherwise they are tokenized as plain text.
 * Returns the number of ids written; if n_max is too small, returns -(needed) and writes
 * nothing useful; on other errors returns INT32_MIN with `err` set. */
int32_t hn_tokenize(const HnVocab *vocab, const char *text, size_t len, bool add_special,
                    bool parse_special, int32_t *out, int32_t n_max, HnError *err);

/* A byte range [start, end) of a text. */
typedef struct {
  size_t start, end;
} HnTextRange;

/* hn_tokenize with parse_special, except that inside the guarded ranges (sorted, disjoint)
 * control tokens are not recognised: for chat prompts, where the template may write
 * special tokens and the messages must not.  A special token that would overlap a guarded
 * range is not matched either. */
int32_t hn_tokenize_guarded(const HnVocab *vocab, const char *text, size_t len, bool add_special,
                            const HnTextRange *guards, size_t n_guards, int32_t *out, int32_t n_max,
                            HnError *err);

/* The exact bytes token `id` stands for in text: byte tokens give their byte, SPM "▁"
 * becomes a space, BPE byte-unicode characters are mapped back to bytes.  Control tokens
 * give 0 bytes (their text is not part of the output); use hn_vocab_token_text() to show
 * them.  Copies at most `cap` bytes and returns the full length (like snprintf, but no
 * NUL is written); -1 for out-of-range ids.  O(length): precomputed at load. */
int32_t hn_token_to_bytes(const HnVocab *vocab, int32_t id, char *buf, size_t cap);
/* The same bytes without copying (NULL for out-of-range ids).  Valid as long as vocab. */
const char *hn_token_bytes(const HnVocab *vocab, int32_t id, size_t *len);

/* Concatenated bytes of ids[0..n).  For SPM vocabularies with add_space_prefix, a single
 * leading space of the first piece is dropped when remove_leading_space is true (the
 * inverse of the prefix the tokenizer adds).  render_special: control tokens are written
 * with their raw text instead of being dropped.  Returns the full length (copies at most
 * cap bytes, no NUL written), or -1 when an id is out of range (err set). */
int64_t hn_detokenize(const HnVocab *vocab, const int32_t *ids, size_t n, bool remove_leading_space,
                      bool render_special, char *buf, size_t cap, HnError *err);

/* Streaming decoder: push ids as they are generated; it returns only complete UTF-8
 * characters and keeps a cut-off character until a later token completes it.  Invalid
 * bytes that can never become a character are emitted as U+FFFD. */
typedef struct HnStreamDecoder HnStreamDecoder;

HnStreamDecoder *hn_stream_decoder_new(const HnVocab *vocab, bool render_special);
void hn_stream_decoder_free(HnStreamDecoder *dec);
/* Appends token `id`; returns a pointer to the newly complete text (valid until the next
 * call) and its length in *len (may be 0).  NULL for an out-of-range id. */
const char *hn_stream_decoder_push(HnStreamDecoder *dec, int32_t id, size_t *len);
/* End of stream: returns what is held back, incomplete sequences as U+FFFD. */
const char *hn_stream_decoder_flush(HnStreamDecoder *dec, size_t *len);
void hn_stream_decoder_reset(HnStreamDecoder *dec);

#ifdef __cplusplus
}
#endif
