/* hanashi-tsan.h: telling ThreadSanitizer about hand-overs it cannot see.
 *
 * GLib's GMutex, GCond and GAsyncQueue are built on futexes and inline atomics inside an
 * uninstrumented libglib, so ThreadSanitizer sees no happens-before edge through them and
 * reports every object passed through a GAsyncQueue as a race.  Rather than suppressing
 * those reports (which would hide real races in the same code), the hand-over points are
 * annotated: the pushing thread releases the queue's address after the push, the popping
 * thread acquires it after the pop, with the same ordering GAsyncQueue's internal mutex
 * gives (everything the pusher wrote before a push is visible to whoever pops afterwards).
 *
 * Without -fsanitize=thread the annotations compile to nothing.  Defining
 * HANASHI_TSAN_NO_ANNOTATIONS in a TSan build turns them off, to check that TSan then
 * reports the hand-overs (i.e. that the annotations, not luck, keep the tests clean).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#if defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define HANASHI_TSAN 1
#  endif
#endif
#if !defined(HANASHI_TSAN) && defined(__SANITIZE_THREAD__)
#  define HANASHI_TSAN 1
#endif

#if defined(HANASHI_TSAN) && !defined(HANASHI_TSAN_NO_ANNOTATIONS)
#  include <sanitizer/tsan_interface.h>
/* Everything this thread wrote so far happens before whatever follows an acquire of @addr. */
#  define hanashi_tsan_release(addr) __tsan_release ((void *) (addr))
/* What other threads wrote before they released @addr happens before what follows here. */
#  define hanashi_tsan_acquire(addr) __tsan_acquire ((void *) (addr))
/* The dynamic-annotation entry points of the TSan runtime (gcc's and clang's). */
void AnnotateIgnoreWritesBegin (const char *file, int line);
void AnnotateIgnoreWritesEnd (const char *file, int line);
/* Between these, this thread's writes, allocations and frees included, are not checked.
 * Only around one GLib call, for GLib's own bookkeeping that GLib's invisible mutexes order
 * and no annotation outside the call can reach: a queue pop frees the list node that the
 * pushing thread allocated before the popper gets to the acquire that pairs with the push;
 * attaching a source allocates the context's list that the main thread frees. */
#  define hanashi_tsan_ignore_writes_begin() AnnotateIgnoreWritesBegin (__FILE__, __LINE__)
#  define hanashi_tsan_ignore_writes_end() AnnotateIgnoreWritesEnd (__FILE__, __LINE__)
#else
#  define hanashi_tsan_release(addr) ((void) (addr))
#  define hanashi_tsan_acquire(addr) ((void) (addr))
#  define hanashi_tsan_ignore_writes_begin() ((void) 0)
#  define hanashi_tsan_ignore_writes_end() ((void) 0)
#endif
