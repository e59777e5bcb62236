/* libFuzzer target: both tokenizers (the SentencePiece LLaMA vocabulary and the GPT-2
 * byte-level BPE vocabulary of the test data), both detokenizers and every pre-tokenizer
 * split.  Checked properties: byte-level BPE without special parsing gives back the exact
 * input bytes; the streaming decoder's output, once flushed, is valid UTF-8; every split's
 * pieces are non-empty and tile the input in order.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hn-gguf.h"
#include "hn-unicode.h"
#include "hn-vocab-private.h" /* hn_pretokenize and the split types */

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static HnVocab *
load (const char *name)
{
  const char *dir = getenv ("HANASHI_TESTDATA");
  if (dir == NULL) {
    fprintf (stderr, "fuzz-tokenizer: set HANASHI_TESTDATA\n");
    abort ();
  }
  char path[4096];
  snprintf (path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", dir, name);
  HnError err = { 0 };
  HnGguf *g = hn_gguf_open (path, &err);
  HnVocab *v = g ? hn_vocab_load (g, &err) : NULL;
  if (v == NULL) {
    fprintf (stderr, "fuzz-tokenizer: %s: %s\n", path, err.message);
    abort ();
  }
  hn_gguf_close (g);
  return v;
}

static bool
valid_utf8 (const char *s, size_t n)
{
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    int used = hn_utf8_decode (s + i, n - i, &cp);
    if (cp == HN_UC_INVALID)
      return false;
    i += (size_t) used;
  }
  return true;
}

static void
check (const HnVocab *v, const uint8_t *data, size_t size, bool parse_special, bool lossless)
{
  static int32_t ids[8192];
  static char text[65536];
  HnError err = { 0 };
  int32_t n = hn_tokenize (v, (const char *) data, size, false, parse_special, ids, 8192, &err);
  if (n < 0 || n > 8192)
    return; /* too many tokens for the buffer: fine, nothing to check */
  int64_t len = hn_detokenize (v, ids, (size_t) n, false, false, text, sizeof text, &err);
  if (lossless && (len != (int64_t) size || memcmp (text, data, size) != 0)) {
    fprintf (stderr, "byte-level BPE lost bytes: %zu in, %lld out\n", size, (long long) len);
    abort ();
  }
  HnStreamDecoder *d = hn_stream_decoder_new (v, false);
  for (int32_t i = 0; i < n; i++) {
    size_t piece = 0;
    const char *p = hn_stream_decoder_push (d, ids[i], &piece);
    if (!valid_utf8 (p, piece)) {
      fprintf (stderr, "the stream decoder emitted invalid UTF-8\n");
      abort ();
    }
  }
  size_t rest = 0;
  const char *p = hn_stream_decoder_flush (d, &rest);
  if (!valid_utf8 (p, rest)) {
    fprintf (stderr, "the stream decoder flushed invalid UTF-8\n");
    abort ();
  }
  hn_stream_decoder_free (d);
}

static void
check_splits (const uint8_t *data, size_t size)
{
  for (int pre = HN_PRE_DEFAULT; pre <= HN_PRE_GPT4O; pre++) {
    uint32_t *pieces;
    int64_t n = hn_pretokenize ((HnPreType) pre, (const char *) data, size, &pieces);
    if (n < 0)
      abort ();
    uint32_t at = 0;
    for (int64_t p = 0; p < n; p++) {
      if (pieces[2 * p] != at || pieces[2 * p + 1] <= at) {
        fprintf (stderr, "split %d: piece %lld does not follow the previous one\n", pre, (long long) p);
        abort ();
      }
      at = pieces[2 * p + 1];
    }
    if (at != size) {
      fprintf (stderr, "split %d: the pieces cover %u of %zu bytes\n", pre, at, size);
      abort ();
    }
    free (pieces);
  }
}

static void
check_nfc (const uint8_t *data, size_t size)
{
  char *once = NULL, *twice = NULL;
  int64_t n1 = hn_utf8_nfc ((const char *) data, size, &once);
  if (n1 < 0)
    abort ();
  const char *text1 = once != NULL ? once : (const char *) data;
  int64_t n2 = hn_utf8_nfc (text1, (size_t) n1, &twice);
  if (n2 != n1 || (twice != NULL && memcmp (twice, text1, (size_t) n1) != 0)) {
    fprintf (stderr, "NFC is not idempotent\n");
    abort ();
  }
  free (once);
  free (twice);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static HnVocab *spm, *bpe;
  if (spm == NULL) {
    spm = load ("llama-spm");
    bpe = load ("gpt-2");
  }
  if (size > 16384)
    return 0;
  check (spm, data, size, false, false);
  check (spm, data, size, true, false);
  check (bpe, data, size, false, true);
  check (bpe, data, size, true, false);
  check_splits (data, size);
  check_nfc (data, size);
  return 0;
}
