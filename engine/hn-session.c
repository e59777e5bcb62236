/* hn-session.c: session file write (atomic, through the I/O seam) and validated read.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-session.h"
#include "hn-array.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char session_magic[8] = { 'H', 'N', 'S', 'E', 'S', 'S', 'N', '\0' };

uint64_t
hn_session_hash (const void *data, size_t size, uint64_t seed)
{
  const uint8_t *p = data;
  uint64_t h = seed ? seed : 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; i++)
    {
      h ^= p[i];
      h *= 0x100000001b3ull;
    }
  return h;
}

/* ---- I/O seam ----------------------------------------------------------------------------- */

static int real_open (const char *path, int flags, mode_t mode) { return open (path, flags, mode); }

static const HnSessionIO real_io = {
  real_open, pwrite, fsync, close, rename, unlink, pread, fstat,
};

static const HnSessionIO *session_io = &real_io;

void hn_session_set_io (const HnSessionIO *io) { session_io = io ? io : &real_io; }
const HnSessionIO *hn_session_default_io (void) { return &real_io; }

/* ---- header ------------------------------------------------------------------------------- */

typedef struct {
  uint32_t version;
  HnSessionParams params;
  uint32_t n_tokens;
  uint64_t payload_size;
  uint64_t payload_hash;
  uint32_t rows_from;
} Header;

static void put32 (uint8_t *p, uint32_t v) { memcpy (p, &v, 4); }
static void put64 (uint8_t *p, uint64_t v) { memcpy (p, &v, 8); }
static uint32_t get32 (const uint8_t *p) { uint32_t v; memcpy (&v, p, 4); return v; }
static uint64_t get64 (const uint8_t *p) { uint64_t v; memcpy (&v, p, 8); return v; }

static void
header_encode (const Header *h, uint8_t out[HN_SESSION_HEADER_SIZE])
{
  memcpy (out, session_magic, 8);
  put32 (out + 8, h->version);
  put32 (out + 12, HN_SESSION_HEADER_SIZE);
  put64 (out + 16, h->params.model_fingerprint);
  put32 (out + 24, h->params.kv_type);
  put32 (out + 28, h->params.n_layer);
  put32 (out + 32, h->params.n_embd_k);
  put32 (out + 36, h->params.n_embd_v);
  put32 (out + 40, h->params.rope_type);
  memcpy (out + 44, &h->params.rope_freq_base, 4);
  memcpy (out + 48, &h->params.rope_freq_scale, 4);
  put32 (out + 52, h->n_tokens);
  put64 (out + 56, h->payload_size);
  put64 (out + 64, h->payload_hash);
  put32 (out + 72, h->rows_from);
  put32 (out + 76, 0);
  put64 (out + 80, hn_session_hash (out, 80, 0));
}

static bool
payload_size_for (const HnSessionParams *p, uint32_t n_tokens, uint64_t *out)
{
  /* Each factor is bounded (validated below), so 64-bit arithmetic cannot overflow. */
  if (p->n_layer == 0 || p->n_layer > 4096 || p->n_embd_k == 0 || p->n_embd_k > (1u << 20)
      || p->n_embd_v == 0 || p->n_embd_v > (1u << 20) || n_tokens > HN_SESSION_MAX_TOKENS)
    return false;
  uint64_t row_bytes = ((uint64_t) p->n_embd_k + p->n_embd_v) * 2u;
  *out = (uint64_t) n_tokens * 4u + (uint64_t) p->n_layer * n_tokens * row_bytes;
  return true;
}

/* ---- write -------------------------------------------------------------------------------- */

typedef struct {
  int fd;
  off_t offset;
  uint64_t hash;
  uint8_t buf[1 << 16];
  size_t used;
} Writer;

static bool
write_all (int fd, const void *data, size_t size, off_t offset)
{
  const uint8_t *p = data;
  while (size > 0)
    {
      ssize_t n = session_io->pwrite (fd, p, size, offset);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          if (n == 0)
            errno = ENOSPC;
          return false;
        }
      p += n;
      size -= (size_t) n;
      offset += n;
    }
  return true;
}

static bool
writer_flush (Writer *w)
{
  if (w->used == 0)
    return true;
  if (!write_all (w->fd, w->buf, w->used, w->offset))
    return false;
  w->offset += (off_t) w->used;
  w->used = 0;
  return true;
}

static bool
writer_put (Writer *w, const void *data, size_t size)
{
  const uint8_t *p = data;
  w->hash = hn_session_hash (p, size, w->hash);
  while (size > 0)
    {
      size_t room = sizeof w->buf - w->used;
      size_t take = size < room ? size : room;
      memcpy (w->buf + w->used, p, take);
      w->used += take;
      p += take;
      size -= take;
      if (w->used == sizeof w->buf && !writer_flush (w))
        return false;
    }
  return true;
}

static void
fsync_parent_dir (const char *path)
{
  char *dir = strdup (path);
  if (dir == NULL)
    return;
  char *slash = strrchr (dir, '/');
  if (slash == dir)
    slash[1] = '\0';
  else if (slash != NULL)
    *slash = '\0';
  else
    strcpy (dir, ".");
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0)
    {
      fsync (fd);
      close (fd);
    }
  free (dir);
}

/* 64 unpredictable bits for a temporary name.  getrandom() does not fail for 8 bytes once
 * the pool is initialised; the clock-and-pid mix only stands in if it is unavailable, and
 * O_EXCL keeps even a guessed name safe. */
static uint64_t
temp_name_bits (void)
{
  static uint64_t counter;
  uint64_t bits = 0;
  if (getrandom (&bits, sizeof bits, GRND_NONBLOCK) == (ssize_t) sizeof bits)
    return bits;
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  bits = ((uint64_t) ts.tv_sec << 30) ^ (uint64_t) ts.tv_nsec ^ ((uint64_t) getpid () << 40)
         ^ (++counter * 0x9e3779b97f4a7c15ull);
  return hn_session_hash (&bits, sizeof bits, 0);
}

#define TEMP_NAME_TRIES 64

/* Creates the temporary file beside `path` (so that the final rename stays within one file
 * system) under a fresh unpredictable name.  O_EXCL makes the open fail on anything already
 * there, a planted symbolic link included, and O_NOFOLLOW says the same for links
 * explicitly: nothing is ever written through a name someone else chose.  `tmp` receives
 * the name (room for strlen (path) + 32 bytes). */
static int
create_temp_beside (const char *path, char *tmp, size_t tmp_size)
{
  for (int attempt = 0; attempt < TEMP_NAME_TRIES; attempt++)
    {
      snprintf (tmp, tmp_size, "%s.tmp.%016llx", path, (unsigned long long) temp_name_bits ());
      int fd = session_io->open (tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd >= 0 || (errno != EEXIST && errno != ELOOP))
        return fd;
    }
  errno = EEXIST;
  return -1;
}

bool
hn_session_write (const char *path, const HnSessionParams *params, const int32_t *tokens,
                  uint32_t n_tokens, HnSessionRowFn rows, void *user, HnError *err)
{
  Header h = { .version = HN_SESSION_VERSION, .params = *params, .n_tokens = n_tokens };
  if (path == NULL || (n_tokens > 0 && (tokens == NULL || rows == NULL))
      || !payload_size_for (params, n_tokens, &h.payload_size))
    return hn_error_set (err, HN_ERR_INVALID_ARG, "session: invalid parameters");

  size_t tmp_len = strlen (path) + 32;
  char *tmp = malloc (tmp_len);
  if (tmp == NULL)
    return hn_error_set (err, HN_ERR_NOMEM, "session: out of memory");

  Writer *w = calloc (1, sizeof *w);
  if (w == NULL)
    {
      free (tmp);
      return hn_error_set (err, HN_ERR_NOMEM, "session: out of memory");
    }
  w->fd = create_temp_beside (path, tmp, tmp_len);
  if (w->fd < 0)
    {
      hn_error_set (err, HN_ERR_IO, "session: cannot create a temporary file beside %s: %s", path,
                    strerror (errno));
      free (w);
      free (tmp);
      return false;
    }
  w->offset = HN_SESSION_HEADER_SIZE;
  w->hash = 0;
  /* rows a sliding-window cache no longer holds are written as zeros (see rows_from) */
  size_t row_max = (params->n_embd_k > params->n_embd_v ? params->n_embd_k : params->n_embd_v) * 2u;
  uint8_t *zeros = calloc (1, row_max);

  bool ok = zeros != NULL && writer_put (w, tokens, (size_t) n_tokens * 4u);
  if (zeros == NULL)
    errno = ENOMEM;
  size_t k_bytes = (size_t) params->n_embd_k * 2u, v_bytes = (size_t) params->n_embd_v * 2u;
  for (uint32_t l = 0; ok && l < params->n_layer; l++)
    for (int is_v = 0; is_v < 2; is_v++)
      for (uint32_t i = 0; ok && i < n_tokens; i++)
        {
          const void *row = rows (user, l, is_v, i);
          if (row == NULL && i + 1 > h.rows_from)
            h.rows_from = i + 1;
          ok = writer_put (w, row ? row : zeros, is_v ? v_bytes : k_bytes);
        }
  free (zeros);
  ok = ok && writer_flush (w);
  if (ok)
    {
      uint8_t head[HN_SESSION_HEADER_SIZE];
      h.payload_hash = w->hash;
      header_encode (&h, head);
      ok = write_all (w->fd, head, sizeof head, 0) && session_io->fsync (w->fd) == 0;
    }
  int saved_errno = errno;
  if (session_io->close (w->fd) != 0 && ok)
    {
      ok = false;
      saved_errno = errno;
    }
  if (ok && session_io->rename (tmp, path) != 0)
    {
      ok = false;
      saved_errno = errno;
    }
  if (!ok)
    {
      session_io->unlink (tmp);
      hn_error_set (err, HN_ERR_IO, "session: cannot write %s: %s", path, strerror (saved_errno));
    }
  else
    fsync_parent_dir (path);
  free (w);
  free (tmp);
  return ok;
}

/* ---- read --------------------------------------------------------------------------------- */

struct HnSession {
  HnSessionParams params;
  uint32_t n_tokens;
  uint32_t rows_from;
  uint8_t *payload;
};

/* Reads exactly `size` bytes at `offset`; an error of the disk is HN_ERR_IO, a file that
 * ends early is HN_ERR_FORMAT (truncated). */
static bool
read_exact (int fd, void *data, size_t size, off_t offset, const char *path, HnError *err)
{
  uint8_t *p = data;
  while (size > 0)
    {
      ssize_t n = session_io->pread (fd, p, size, offset);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return hn_error_set (err, HN_ERR_IO, "session: cannot read %s: %s", path, strerror (errno));
      if (n == 0)
        return hn_error_set (err, HN_ERR_FORMAT, "session: %s is truncated", path);
      p += n;
      size -= (size_t) n;
      offset += n;
    }
  return true;
}

HnSession *
hn_session_read (const char *path, const HnSessionParams *expect, HnError *err)
{
  uint8_t head[HN_SESSION_HEADER_SIZE];
  HnSession *s = NULL;
  int fd = session_io->open (path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0)
    {
      hn_error_set (err, errno == ENOENT ? HN_ERR_NOT_FOUND : HN_ERR_IO, "session: cannot open %s: %s",
                    path, strerror (errno));
      return NULL;
    }
  struct stat st;
  if (session_io->fstat (fd, &st) != 0)
    {
      hn_error_set (err, HN_ERR_IO, "session: cannot read %s: %s", path, strerror (errno));
      goto out;
    }
  if (st.st_size < (off_t) HN_SESSION_HEADER_SIZE)
    {
      hn_error_set (err, HN_ERR_FORMAT, "session: %s is truncated", path);
      goto out;
    }
  if (!read_exact (fd, head, sizeof head, 0, path, err))
    goto out;
  if (memcmp (head, session_magic, 8) != 0)
    {
      hn_error_set (err, HN_ERR_FORMAT, "session: %s is not a session file", path);
      goto out;
    }
  if (get32 (head + 8) != HN_SESSION_VERSION || get32 (head + 12) != HN_SESSION_HEADER_SIZE)
    {
      hn_error_set (err, HN_ERR_UNSUPPORTED, "session: %s has format version %u, expected %u",
                    path, get32 (head + 8), HN_SESSION_VERSION);
      goto out;
    }
  if (get64 (head + 80) != hn_session_hash (head, 80, 0))
    {
      hn_error_set (err, HN_ERR_FORMAT, "session: %s has a corrupt header", path);
      goto out;
    }
  HnSessionParams p = {
    .model_fingerprint = get64 (head + 16), .kv_type = get32 (head + 24),
    .n_layer = get32 (head + 28), .n_embd_k = get32 (head + 32), .n_embd_v = get32 (head + 36),
    .rope_type = get32 (head + 40),
  };
  memcpy (&p.rope_freq_base, head + 44, 4);
  memcpy (&p.rope_freq_scale, head + 48, 4);
  if (p.model_fingerprint != expect->model_fingerprint || p.kv_type != expect->kv_type
      || p.n_layer != expect->n_layer || p.n_embd_k != expect->n_embd_k
      || p.n_embd_v != expect->n_embd_v || p.rope_type != expect->rope_type
      || memcmp (&p.rope_freq_base, &expect->rope_freq_base, 4) != 0
      || memcmp (&p.rope_freq_scale, &expect->rope_freq_scale, 4) != 0)
    {
      hn_error_set (err, HN_ERR_FORMAT, "session: %s belongs to another model or context settings", path);
      goto out;
    }
  uint32_t n_tokens = get32 (head + 52), rows_from = get32 (head + 72);
  uint64_t payload_size = get64 (head + 56), expected_size;
  if (!payload_size_for (&p, n_tokens, &expected_size) || expected_size != payload_size || rows_from > n_tokens
      || (uint64_t) st.st_size != HN_SESSION_HEADER_SIZE + payload_size || payload_size > SIZE_MAX)
    {
      hn_error_set (err, HN_ERR_FORMAT, "session: %s has inconsistent sizes (truncated?)", path);
      goto out;
    }
  s = calloc (1, sizeof *s);
  uint8_t *payload = malloc (payload_size ? (size_t) payload_size : 1);
  if (s == NULL || payload == NULL)
    {
      free (payload);
      free (s);
      s = NULL;
      hn_error_set (err, HN_ERR_NOMEM, "session: out of memory reading %s", path);
      goto out;
    }
  s->payload = payload;
  if (!read_exact (fd, payload, (size_t) payload_size, HN_SESSION_HEADER_SIZE, path, err))
    {
      hn_session_free (s);
      s = NULL;
      goto out;
    }
  if (hn_session_hash (payload, (size_t) payload_size, 0) != get64 (head + 64))
    {
      hn_error_set (err, HN_ERR_FORMAT, "session: %s has a corrupt payload", path);
      hn_session_free (s);
      s = NULL;
      goto out;
    }
  s->params = p;
  s->n_tokens = n_tokens;
  s->rows_from = rows_from;
out:
  session_io->close (fd);
  return s;
}

void
hn_session_free (HnSession *session)
{
  if (session == NULL)
    return;
  free (session->payload);
  free (session);
}

const int32_t *
hn_session_tokens (const HnSession *s, uint32_t *n_tokens)
{
  *n_tokens = s->n_tokens;
  return (const int32_t *) s->payload;
}

const void *
hn_session_row (const HnSession *s, uint32_t layer, bool is_v, uint32_t i)
{
  if (layer >= s->params.n_layer || i >= s->n_tokens)
    return NULL;
  size_t k_bytes = (size_t) s->params.n_embd_k * 2u, v_bytes = (size_t) s->params.n_embd_v * 2u;
  size_t layer_bytes = (size_t) s->n_tokens * (k_bytes + v_bytes);
  size_t off = (size_t) s->n_tokens * 4u + layer * layer_bytes;
  if (is_v)
    off += (size_t) s->n_tokens * k_bytes + i * v_bytes;
  else
    off += i * k_bytes;
  return s->payload + off;
}

uint32_t
hn_session_rows_from (const HnSession *s)
{
  return s->rows_from;
}

uint32_t
hn_session_common_prefix (const int32_t *a, uint32_t n_a, const int32_t *b, uint32_t n_b)
{
  uint32_t n = n_a < n_b ? n_a : n_b, i = 0;
  while (i < n && a[i] == b[i])
    i++;
  return i;
}

bool
hn_session_touch (const char *path)
{
  return utimensat (AT_FDCWD, path, NULL, 0) == 0;
}

typedef struct {
  char *path;
  uint64_t size;
  struct timespec mtime;
} CacheEntry;

static int
cache_entry_cmp (const void *a, const void *b)
{
  const CacheEntry *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec)
    return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec)
    return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp (x->path, y->path);
}

int
hn_session_cache_evict (const char *dir, uint64_t limit_bytes, const char *keep_path, HnError *err)
{
  DIR *d = opendir (dir);
  if (d == NULL)
    {
      if (errno == ENOENT)
        return 0;
      hn_error_set (err, HN_ERR_IO, "session cache: cannot open %s: %s", dir, strerror (errno));
      return -1;
    }
  CacheEntry *entries = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  struct dirent *de;
  int deleted = 0;
  while ((de = readdir (d)) != NULL)
    {
      size_t len = strlen (de->d_name);
      if (len < 10 || strcmp (de->d_name + len - 10, ".hnsession") != 0)
        continue;
      size_t plen = strlen (dir) + len + 2;
      char *path = malloc (plen);
      if (path == NULL)
        break;
      snprintf (path, plen, "%s/%s", dir, de->d_name);
      struct stat st;
      /* lstat: a link named like a session file is not ours to count or follow */
      if (lstat (path, &st) != 0 || !S_ISREG (st.st_mode))
        {
          free (path);
          continue;
        }
      if (!HN_ARRAY_RESERVE (entries, cap, n + 1, 32))
        {
          free (path);
          break;
        }
      entries[n++] = (CacheEntry) { path, (uint64_t) st.st_size, st.st_mtim };
      total += (uint64_t) st.st_size;
    }
  closedir (d);
  if (n > 0)
    qsort (entries, n, sizeof *entries, cache_entry_cmp);
  for (size_t i = 0; i < n && total > limit_bytes; i++)
    {
      if (keep_path != NULL && strcmp (entries[i].path, keep_path) == 0)
        continue;
      if (unlink (entries[i].path) == 0)
        {
          total -= entries[i].size;
          deleted++;
        }
    }
  for (size_t i = 0; i < n; i++)
    free (entries[i].path);
  free (entries);
  return deleted;
}
