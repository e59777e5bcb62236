/* hanashi-test-seams.h — every seam through which the tests reach into Hanashi, in one
 * place.  The product offers a hook for each and nothing more; the fakes live here, in the
 * test-support library (tests/support/, linked only by tests and benchmarks).
 *
 *   seam                 product hook                                     fake / helper
 *   -------------------  -----------------------------------------------  ------------------------------
 *   engine backend       hanashi_engine_set_default_backend()              hanashi_test_scripted_backend()
 *                        (engine/glib/hanashi-engine-backend.h)            and its hooks below
 *   available memory     HANASHI_MEM_AVAILABLE_MB, read by                 hanashi_test_set_memory_available_mb()
 *                        hn_memory_available() (engine/hn-memory.c)
 *   session file I/O     hn_session_set_io() (engine/hn-session.h)         the failing HnSessionIO tables of
 *                                                                          tests/engine/test-session.c
 *   SQLite I/O faults    none: SQLite's own sqlite3_vfs_register()         tests/app/store-faults-vfs.h
 *   model hub address    HANASHI_HUB_URL, read by                          hanashi_test_set_hub_url()
 *                        hanashi_download_resolve_uri_at()
 *                        (engine/download/hanashi-download.c)
 *   device memory        HANASHI_VULKAN_MEMORY_LIMIT (bytes), read by      set in tests/engine/test-cli-vulkan.c
 *                        hn-vk.c's device choice (engine/vulkan)           (forces the out-of-memory fall-back)
 *                                                                          and test-vulkan-offload.c (Auto layers)
 *   device failures      HANASHI_VULKAN_FAIL (shader:NAME, push-           set in tests/engine/test-cli-vulkan.c
 *                        descriptors, range:BYTES, lost:N, timeout:N,      and test-vulkan-offload.c (the failure
 *                        unbuilt, small-workgroups), read by hn-vk.c       table of docs/vulkan.md), unbuilt in
 *                        (engine/vulkan)                                   tests/app/test-gpu.c (no-Vulkan build),
 *                                                                          small-workgroups in test-vulkan-matmul.c
 *   API-key store        hanashi_secret_store_set_default()                hanashi_secret_store_memory()
 *                        (app/hanashi-remote-endpoints.h)                  (in memory, no keyring needed)
 *
 * docs/testing.md lists the same table.  A new seam is added here, to that table and to
 * the product hook's own comment, or not at all.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "hanashi-engine-backend.h"

G_BEGIN_DECLS

/* ---- the scripted engine backend ---------------------------------------------------------
 * Deterministic and cheap, with the control flow of the real one: "models" are any
 * readable file; a generation renders the request (with the template set below, else
 * ChatML) and produces "tok0 tok1 ..." (max_new_tokens of them, default 16) with a small
 * sleep per token so that cancels land mid-stream; with probs_k > 0, token i comes with a
 * made-up record (candidates i, 1000 + i, …, raw probabilities 1/2, 1/4, …, the last
 * removed by "top_k").  Token i writes what piece i does ("tokI " by default) and candidate
 * k * 1000 + i writes "altK_I " (hanashi_engine_dup_token_text); a request with a reply
 * prefix of n tokens goes on with token n.  Install it with
 * hanashi_test_use_scripted_backend() (engines made afterwards use it). */
const HanashiEngineBackend *hanashi_test_scripted_backend     (void);
void                        hanashi_test_use_scripted_backend (void);
/* Its hooks (process-wide, thread-safe):
 * - the pieces the next generations produce instead of "tokN " (NULL: back to those);
 * - a chat template for models loaded from now on (NULL: none, ChatML), which sets the
 *   model info's thinking flags as the real backend does and renders every request;
 * - the prompt the last generation rendered (template or ChatML; free with g_free);
 * - a pause: generations wait before their token @index until it is set to -1 (or they
 *   are cancelled), so a test can look at a reply half written. */
void  hanashi_test_scripted_set_reply        (const char * const *pieces);
void  hanashi_test_scripted_set_template     (const char *source);
char *hanashi_test_scripted_dup_last_prompt  (void);
void  hanashi_test_scripted_hold_at          (int index);
/* hanashi_engine_next_logits_async on it: a 256-byte vocabulary, the rendered prompt's bytes
 * (and a reply prefix's ids) as the history, deterministic logits (a permutation of 4.0, 3.7, 3.4, … chosen by the
 * prompt; the top ids' texts are "tID"), and with a grammar the even ids allowed.  How many
 * such model runs there were, so that a test can tell that a slider move runs none. */
guint hanashi_test_scripted_next_logits_runs (void);
/* The reply prefix the last such run was asked for (a copy to g_free; none: @n_tokens 0). */
gint32 *hanashi_test_scripted_dup_last_lens_prefix (guint *n_tokens);
/* Where the layers run: every scripted model has 4; a device named with
 * hanashi_engine_set_gpu takes the layers asked for (Auto: all), the automatic choice is
 * the processor (no hardware device).  The last load's request (device, or NULL; free it)
 * and layer count; and a failure: with a notice set, a named device is not used and the
 * model info's gpu_notice is that notice (NULL: devices work again). */
char *hanashi_test_scripted_dup_last_gpu     (int *n_layers);
void  hanashi_test_scripted_set_gpu_failure  (const char *notice);

/* ---- the environment's seams -------------------------------------------------------------- */

/* What hn_memory_available() reports, in megabytes (10^6 bytes); NULL: the system's own
 * figure again.  A text that is not a whole number is ignored by the engine, as on a
 * user's machine. */
void  hanashi_test_set_memory_available_mb   (const char *megabytes);
/* The model hub the downloads resolve against (e.g. a local server); NULL: the real one. */
void  hanashi_test_set_hub_url               (const char *url);

G_END_DECLS
