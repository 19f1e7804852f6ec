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

/* Which allocations are sampled: each heap counts down the bytes its
 * thread allocates, in units of 16 (hak_heap_t.prof_left, written by the
 * heap's thread only; malloc's fast path subtracts after a successful pop:
 * alloc.c); when the count goes below zero the allocation is sampled and
 * hak_prof_next_left gives the next count.  With the profiler off that is
 * INT64_MAX, which no thread allocates: nothing is ever sampled.  The unit:
 * malloc's fast path has (n + 15) / 16 in a register already (the size
 * class lookup), where n itself would cost it a move. */
int64_t hak_prof_next_left(void);
static inline int64_t hak_prof_units(size_t n) { return (int64_t)((n + 15) >> 4); }

/* Sampled blocks' home: one reservation (HAK_PROF_SLOTS slots of a page,
 * each page-aligned, for blocks of at most HAK_PAGE_SIZE bytes) that init.c
 * registers with the tag HAK_TAG_PROF, so that a free of a sampled block,
 * by any thread, misses owned[] and reaches the registry and
 * hak_prof_slot_free; free's fast path pays nothing.  A slot comes from a
 * lock-free stack of freed slots, else from the part never used;
 * hak_prof_slot_alloc returns NULL when all are live.  hak_prof_region:
 * the reservation (false: none, the profiler is off). */
bool hak_prof_region(void **base, size_t *size);
void hak_prof_disable(void);                    /* before hak_prof_start: the region is not registered */
void *hak_prof_slot_alloc(void);
void hak_prof_slot_free(void *p);               /* the record goes, then the slot */
size_t hak_prof_slot_usable(const void *p);     /* 0 if free; aborts if not a slot start */

/* Record the sampled block p of n bytes (a slot, or a large block whose
 * free comes by hak_free_generic and hak_prof_free). */
void hak_prof_record(void *p, size_t n);
void hak_prof_free_slow(void *p);
extern HAK_HIDDEN hak_prof_tables_t *_Atomic hak_prof_tables;

static inline uint32_t hak_prof_filter_index(uintptr_t p)
{
  return (uint32_t)(((p >> 12) * 0x9e3779b97f4a7c15ull) >> (64 - 12));
}

/* The live large block p is being freed (before it can be reused): if
 * sampled, its record goes. */
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
