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

/* The block p of n bytes was just allocated / the live block p is being
 * freed (before it can be reused).  Called only with HAKMEM_PROF=1 (the
 * fast paths are off then, so every malloc and free comes by them). */
void hak_prof_alloc_slow(void *p, size_t n);
void hak_prof_free_slow(void *p);
extern HAK_HIDDEN __thread uint64_t hak_prof_left;   /* bytes before this thread's next sample */
extern HAK_HIDDEN hak_prof_tables_t *_Atomic hak_prof_tables;

static inline uint32_t hak_prof_filter_index(uintptr_t p)
{
  return (uint32_t)(((p >> 12) * 0x9e3779b97f4a7c15ull) >> (64 - 12));
}

static inline void hak_prof_alloc(void *p, size_t n)
{
  if (n == 0) n = 1;
  if (HAK_LIKELY(hak_prof_left > n)) {
    hak_prof_left -= n;
    return;
  }
  hak_prof_alloc_slow(p, n);
}

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
