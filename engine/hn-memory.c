/* hn-memory.c — memory estimates against MemAvailable.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-memory.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t
hn_memory_need_total(const HnMemoryNeed *need)
{
  return need->weights + need->kv_cache + need->scratch;
}

bool
hn_memory_parse_meminfo(const char *text, uint64_t *bytes)
{
  for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    if (strncmp(line, "MemAvailable:", 13) != 0)
      continue;
    char *end;
    errno = 0;
    unsigned long long kb = strtoull(line + 13, &end, 10);
    if (errno != 0 || end == line + 13)
      return false;
    while (*end == ' ')
      end++;
    if (strncmp(end, "kB", 2) != 0 || kb > UINT64_MAX / 1024)
      return false;
    *bytes = (uint64_t) kb * 1024;
    return true;
  }
  return false;
}

bool
hn_memory_available(uint64_t *bytes)
{
  const char *override = getenv("HANASHI_MEM_AVAILABLE_MB");
  if (override && *override) {
    char *end;
    errno = 0;
    unsigned long long mb = strtoull(override, &end, 10);
    if (errno == 0 && *end == '\0' && mb <= UINT64_MAX / 1000000) {
      *bytes = (uint64_t) mb * 1000000;
      return true;
    }
  }
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f)
    return false;
  char text[8192];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  return hn_memory_parse_meminfo(text, bytes);
}

void
hn_memory_format(uint64_t bytes, char *buf, size_t size)
{
  if (bytes >= 1000000000u)
    snprintf(buf, size, "%.1f GB", (double) bytes / 1e9);
  else
    snprintf(buf, size, "%" PRIu64 " MB", (bytes + 500000) / 1000000);
}

bool
hn_memory_check(const HnMemoryNeed *need, HnError *err)
{
  uint64_t available;
  if (!hn_memory_available(&available))
    return true;
  uint64_t total = hn_memory_need_total(need);
  available += need->held < need->weights ? need->held : need->weights;
  if (total <= available)
    return true;
  char need_s[32], avail_s[32], kv_s[32];
  hn_memory_format(total, need_s, sizeof need_s);
  hn_memory_format(available, avail_s, sizeof avail_s);
  /* When the context is a big share, say so: it is the one part people can change. */
  if (need->kv_cache >= total / 4 && need->n_ctx > 0) {
    hn_memory_format(need->kv_cache, kv_s, sizeof kv_s);
    return hn_error_set(err, HN_ERR_NOMEM,
                        "This model needs about %s of memory but only %s is available. "
                        "The context of %d tokens takes %s of that; a smaller context size needs less.",
                        need_s, avail_s, need->n_ctx, kv_s);
  }
  return hn_error_set(err, HN_ERR_NOMEM, "This model needs about %s of memory but only %s is available.",
                      need_s, avail_s);
}
