/* hn-memory.h — how much memory a model and context will take, and whether it is there.
 *
 * The engine refuses a context it cannot fit before allocating anything large, so a model
 * that is too big gets a sentence instead of the OOM killer.  "Available" is the kernel's
 * MemAvailable (what can be allocated without swapping), which the HANASHI_MEM_AVAILABLE_MB
 * environment variable replaces for tests (1 MB = 1,000,000 bytes, as in the messages): a
 * test seam, listed with the others in tests/support/hanashi-test-seams.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hn-common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint64_t weights;  /* mapped tensor bytes (all are read for every token) + owned copies */
  uint64_t kv_cache; /* F16 K and V rows of every cell, and the cell table */
  uint64_t scratch;  /* activations, matmul packing, attention work, one row of logits */
  int n_ctx;         /* the context size the KV figure is for */
  uint64_t held;     /* of weights, what the process holds already (the copy placed at load,
                      * which MemAvailable no longer counts) */
} HnMemoryNeed;

uint64_t hn_memory_need_total(const HnMemoryNeed *need);

/* Parses the MemAvailable line of /proc/meminfo text; false when absent or malformed. */
bool hn_memory_parse_meminfo(const char *text, uint64_t *bytes);

/* HANASHI_MEM_AVAILABLE_MB if set (and a number), else MemAvailable; false when neither can
 * be read (the check is then skipped rather than guessed). */
bool hn_memory_available(uint64_t *bytes);

/* Fails with HN_ERR_NOMEM and e.g. "This model needs about 5.2 GB of memory but only 3.1 GB
 * is available." when the need exceeds what is available (MemAvailable plus `held`). */
bool hn_memory_check(const HnMemoryNeed *need, HnError *err);

/* "5.2 GB" at 1 GB and above, "640 MB" below (decimal units, like GNOME's tools). */
void hn_memory_format(uint64_t bytes, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
