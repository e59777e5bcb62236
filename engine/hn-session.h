/* hn-session.h: prompt-cache session files (the KV state of a conversation on disk).
 *
 * A session file holds the evaluated tokens of a conversation and, for every layer, the F16
 * K and V rows of exactly those tokens' cells -- nothing else.  It is written atomically
 * (a temporary file created exclusively beside it under an unpredictable name, never through
 * an existing file or link; fsync, rename, fsync of the directory) and validated completely
 * when read:
 * any mismatch (model fingerprint, KV settings, version, sizes, checksums) makes the load fail
 * with HN_ERR_FORMAT / HN_ERR_UNSUPPORTED, and callers treat that as "no cache, re-evaluate".
 *
 * Layout (little-endian):
 *   header (HN_SESSION_HEADER_SIZE bytes): magic "HNSESSN\0", version, header size, model
 *   fingerprint, kv type, n_layer, n_embd_k, n_embd_v, rope type, rope base, rope scale,
 *   n_tokens, payload size, payload hash, rows_from (u32) and 4 zero bytes, header hash
 *   (FNV-1a 64 of all preceding bytes)
 *   payload: int32 tokens[n_tokens]; then per layer: K rows [n_tokens][n_embd_k] F16,
 *            V rows [n_tokens][n_embd_v] F16.  payload hash = FNV-1a 64 of the payload.
 *   Rows of tokens before rows_from may be zeros instead: a sliding-window layer's cache
 *   had already handed them on (version 2; version 1 had no rows_from and is not read).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "hn-common.h"

#define HN_SESSION_VERSION 2u
#define HN_SESSION_HEADER_SIZE 88u
#define HN_SESSION_KV_F16 1u
#define HN_SESSION_MAX_TOKENS (1u << 22)

/* Everything that changes what the KV rows contain: a file is only reused when all match. */
typedef struct {
  uint64_t model_fingerprint;   /* hn_session_fingerprint() of the GGUF metadata + tensor table */
  uint32_t kv_type;             /* HN_SESSION_KV_F16 */
  uint32_t n_layer;
  uint32_t n_embd_k;            /* per token, per layer (n_head_kv * head_dim) */
  uint32_t n_embd_v;
  uint32_t rope_type;
  float    rope_freq_base;
  float    rope_freq_scale;
} HnSessionParams;

/* 64-bit FNV-1a; pass 0 as seed to start, the previous result to continue. */
uint64_t hn_session_hash (const void *data, size_t size, uint64_t seed);
/* Fingerprint of a model from the bytes of its GGUF header, metadata and tensor table. */
static inline uint64_t hn_session_fingerprint (const void *gguf_head, size_t size) {
  return hn_session_hash (gguf_head, size, 0);
}

/* Where the rows come from when writing: pointer to the F16 row of token index i (0-based in
 * the token list) for a layer; is_v selects V.  Must return n_embd_{k,v} * 2 bytes, or NULL
 * for a row that no longer exists (zeros are written and rows_from moves past i). */
typedef const void *(*HnSessionRowFn) (void *user, uint32_t layer, bool is_v, uint32_t i);

bool hn_session_write (const char *path, const HnSessionParams *params,
                       const int32_t *tokens, uint32_t n_tokens,
                       HnSessionRowFn rows, void *user, HnError *err);

typedef struct HnSession HnSession;

/* Reads and validates a file written for `expect`.  Fails (never crashes) on anything else. */
HnSession *hn_session_read (const char *path, const HnSessionParams *expect, HnError *err);
void       hn_session_free (HnSession *session);
const int32_t *hn_session_tokens (const HnSession *session, uint32_t *n_tokens);
/* F16 row of token index i (i < n_tokens). */
const void *hn_session_row (const HnSession *session, uint32_t layer, bool is_v, uint32_t i);
/* The first token index from which every layer's rows were saved (0: all of them). */
uint32_t hn_session_rows_from (const HnSession *session);

/* Length of the common prefix of two token lists. */
uint32_t hn_session_common_prefix (const int32_t *a, uint32_t n_a, const int32_t *b, uint32_t n_b);

/* Marks a file as just used (mtime = now) for the LRU cache. */
bool hn_session_touch (const char *path);
/* Deletes least-recently-used "*.hnsession" files in dir until their total size is at most
 * limit_bytes; never deletes keep_path.  Returns the number of files deleted, -1 on error. */
int  hn_session_cache_evict (const char *dir, uint64_t limit_bytes, const char *keep_path,
                             HnError *err);

/* File-I/O seam for fault injection (tests replace it to simulate ENOSPC, EROFS, short
 * writes, failed fsync or rename, and reads that fail or return garbage).  Functions follow the POSIX calls of the same name; errno carries the failure. */
typedef struct {
  int     (*open) (const char *path, int flags, mode_t mode);
  ssize_t (*pwrite) (int fd, const void *buf, size_t count, off_t offset);
  int     (*fsync) (int fd);
  int     (*close) (int fd);
  int     (*rename) (const char *from, const char *to);
  int     (*unlink) (const char *path);
  ssize_t (*pread) (int fd, void *buf, size_t count, off_t offset);  /* reading, too */
  int     (*fstat) (int fd, struct stat *st);  /* the size of the file being read */
} HnSessionIO;

/* NULL restores the real calls.  Process-global: for tests only (a test seam, listed with
 * the others in tests/support/hanashi-test-seams.h). */
void hn_session_set_io (const HnSessionIO *io);
const HnSessionIO *hn_session_default_io (void);
