/* libFuzzer target: the session-file loader.  The input is served as the file's bytes
 * through the session I/O seam, so no file is written per run.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "hn-session.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static const uint8_t *input;
static size_t input_size;

static int
fake_open (const char *path, int flags, mode_t mode)
{
  (void) path;
  (void) mode;
  if ((flags & O_ACCMODE) != O_RDONLY) {
    errno = EROFS;
    return -1;
  }
  return 1000; /* never a real descriptor: every call below is faked */
}

static ssize_t
fake_pread (int fd, void *buf, size_t count, off_t offset)
{
  (void) fd;
  if (offset < 0 || (size_t) offset >= input_size)
    return 0;
  size_t n = input_size - (size_t) offset < count ? input_size - (size_t) offset : count;
  memcpy (buf, input + offset, n);
  return (ssize_t) n;
}

static int
fake_fstat (int fd, struct stat *st)
{
  (void) fd;
  memset (st, 0, sizeof *st);
  st->st_size = (off_t) input_size;
  return 0;
}

static int
fake_close (int fd)
{
  (void) fd;
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static HnSessionIO io;
  if (io.open == NULL) {
    io = *hn_session_default_io ();
    io.open = fake_open;
    io.pread = fake_pread;
    io.close = fake_close;
    io.fstat = fake_fstat;
    hn_session_set_io (&io);
  }
  input = data;
  input_size = size;
  /* the settings of the seed corpus files; other settings must be rejected cleanly too */
  HnSessionParams params = {
    .model_fingerprint = 0x1234abcd5678ef00ull, .kv_type = HN_SESSION_KV_F16, .n_layer = 3,
    .n_embd_k = 8, .n_embd_v = 12, .rope_type = 0, .rope_freq_base = 10000.0f, .rope_freq_scale = 1.0f,
  };
  HnError err = { 0 };
  HnSession *s = hn_session_read ("fuzz.hnsession", &params, &err);
  if (s != NULL) {
    uint32_t n = 0;
    const int32_t *tokens = hn_session_tokens (s, &n);
    int64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) {
      sum += tokens[i];
      const uint8_t *k = hn_session_row (s, 2, false, i);
      const uint8_t *v = hn_session_row (s, 2, true, i);
      sum += k[15] + v[23];
    }
    (void) sum;
    hn_session_free (s);
  }
  return 0;
}
