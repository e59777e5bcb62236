/* hn-array.h — the one growable-array helper of the engine core.
 *
 * Arrays in the engine are plain (pointer, length, capacity) triples in the structs that
 * own them; this header only grows them.  Capacity doubles (starting from a first
 * capacity chosen by the caller) until the wanted element count fits, every size
 * computation is checked for overflow, and failure (out of memory, or a size that does
 * not fit in size_t) leaves the array and its capacity as they were, so the caller can
 * report the error and still free what it holds.
 *
 *   if (!HN_ARRAY_RESERVE(v->items, v->cap, v->n + 1, 16))
 *     return false;
 *   v->items[v->n++] = item;
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The capacity that holds `need` elements of `elem_size` bytes: `cap` (or `first_cap` when
 * `cap` is 0) doubled until it reaches `need`.  Returns `cap` itself when it is already
 * enough.  False when the capacity or its size in bytes would overflow size_t. */
bool hn_array_grown_cap(size_t cap, size_t need, size_t elem_size, size_t first_cap, size_t *out);

/* Reallocates the array that *items_ptr points to (a `T **` passed as void *) to exactly
 * `n` elements of `elem_size` bytes.  On failure *items_ptr is unchanged (and still
 * owned by the caller).  Use HN_ARRAY_RESIZE. */
bool hn_array_resize_impl(void *items_ptr, size_t n, size_t elem_size);

/* Grows the array to hold at least `need` elements, updating *cap.  Use HN_ARRAY_RESERVE. */
bool hn_array_reserve_impl(void *items_ptr, size_t *cap, size_t need, size_t elem_size, size_t first_cap);

/* `items` is an lvalue of pointer type (`T *`), `cap` a size_t lvalue; both are updated
 * only on success.  Evaluate to true on success. */
#define HN_ARRAY_RESERVE(items, cap, need, first_cap) \
  hn_array_reserve_impl(&(items), &(cap), (need), sizeof *(items), (first_cap))
#define HN_ARRAY_RESIZE(items, n) hn_array_resize_impl(&(items), (n), sizeof *(items))

#ifdef __cplusplus
}
#endif
