/* hn-array.c — growth of the engine's plain arrays (see hn-array.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-array.h"
#include "hn-common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool
hn_array_grown_cap(size_t cap, size_t need, size_t elem_size, size_t first_cap, size_t *out)
{
  size_t c = cap ? cap : (first_cap ? first_cap : 1);
  while (c < need) {
    if (c > SIZE_MAX / 2)
      return false;
    c *= 2;
  }
  size_t bytes;
  if (!hn_mul_size(c, elem_size ? elem_size : 1, &bytes))
    return false;
  *out = c;
  return true;
}

/* The pointer is read and written through memcpy so that one function serves arrays of
 * every element type (object pointers share one representation on every target the
 * engine supports). */
bool
hn_array_resize_impl(void *items_ptr, size_t n, size_t elem_size)
{
  size_t bytes;
  if (!hn_mul_size(n, elem_size, &bytes))
    return false;
  void *old;
  memcpy(&old, items_ptr, sizeof old);
  void *grown = realloc(old, bytes ? bytes : 1);
  if (grown == NULL)
    return false;
  memcpy(items_ptr, &grown, sizeof grown);
  return true;
}

bool
hn_array_reserve_impl(void *items_ptr, size_t *cap, size_t need, size_t elem_size, size_t first_cap)
{
  if (need <= *cap)
    return true;
  size_t c;
  if (!hn_array_grown_cap(*cap, need, elem_size, first_cap, &c))
    return false;
  if (!hn_array_resize_impl(items_ptr, c, elem_size))
    return false;
  *cap = c;
  return true;
}
