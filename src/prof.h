/* The sampling heap profiler: sampling, sites and live sampled blocks
 * (prof.c); its output is prof_dump.c's. */
#ifndef HAKMEM_PROF_H
#define HAKMEM_PROF_H

#include "base.h"
#include "types.h"

/* At initialisation, after the options (no allocation): map the tables.
 * Then, once hakmem is ready (may allocate: it loads the unwinder): start
 * sampling.  Both do nothing unless HAKMEM_PROF=1. */
void hak_prof_init(void);
void hak_prof_start(void);
bool hak_prof_active(void);          /* sampling (tables mapped, unwinder loaded) */

/* Which allocations are sampled: each thread counts down the bytes it
 * allocates (hak_prof_due, on malloc's fast path too: a subtraction from a
 * thread-local and a branch); when the count runs out the allocation is
 * sampled.  Every thread starts at INT64_MAX, which no thread allocates:
 * with the profiler off nothing is ever sampled; with it on,
 * hak_prof_thread_start (heap.c, as a thread gets its heap) draws the
 * thread's first interval. */
extern HAK_HIDDEN __thread int64_t hak_prof_left;
static inline bool hak_prof_due(size_t n)
{
  hak_prof_left -= (int64_t)n;
  return HAK_UNLIKELY(hak_prof_left < 0);
}
void hak_prof_thread_start(void);
void hak_prof_rearm(void);                 /* the next interval, after a sample */

/* Record the sampled block p of n bytes (a block with a mapping of its own,
 * whose free comes by hak_free_generic: see alloc.c, prof_sampled). */
void hak_prof_record(void *p, size_t n);
void hak_prof_free_slow(void *p);
extern HAK_HIDDEN hak_prof_tables_t *_Atomic hak_prof_tables;

static inline uint32_t hak_prof_filter_index(uintptr_t p)
{
  return (uint32_t)(((p >> 12) * 0x9e3779b97f4a7c15ull) >> (64 - 12));
}

/* The live block p is being freed (before it can be reused): if sampled,
 * its record goes. */
static inline void hak_prof_free(void *p)
{
  hak_prof_tables_t *t = atomic_load_explicit(&hak_prof_tables, memory_order_acquire);
  if (t == NULL) return;
  /* relaxed: a sampled block's increment happened before its free (see
   * hak_prof_tables_t) */
  if (HAK_LIKELY(atomic_load_explicit(&t->filter[hak_prof_filter_index((uintptr_t)p)], memory_order_relaxed) == 0))
    return;
  hak_prof_free_slow(p);
}

/* Fork (init.c's handlers): wait until no thread is recording, and keep
 * them from starting, so the child inherits consistent tables. */
void hak_prof_before_fork(void);
void hak_prof_after_fork(void);

void hak_prof_get_counts(hak_prof_counts_t *out);

/* While on, this thread's mallocs are not sampled but counted as the
 * profiler's own (counts.recursions): around code that must not allocate. */
void hak_prof_capture_guard(bool on);

#endif /* HAKMEM_PROF_H */
