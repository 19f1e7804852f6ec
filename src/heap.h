/* The thread heap (heap.c): malloc's fast path (hak_heap_pop), the refill,
 * thread start and exit, parking, adoption, collect, fork. */
#ifndef HAKMEM_HEAP_H
#define HAKMEM_HEAP_H

#include "partial.h"
#include "tcache.h"

extern HAK_HIDDEN hak_slab_t hak_slab_sentinel;  /* no block: cur[c] of a class without a slab */
extern HAK_HIDDEN hak_heap_t hak_heap_unstarted;  /* a thread's, before its first malloc or free */
extern HAK_HIDDEN hak_heap_t hak_heap_dead;       /* after the thread's heap was abandoned */
/* The calling thread's heap, or a placeholder (hak_heap_unstarted,
 * hak_heap_dead).  Atomic: the purger swaps an idle thread's heap for the
 * placeholder (heap.c, "idle heaps"); loads are plain moves on x86. */
extern HAK_HIDDEN __thread _Atomic(hak_heap_t *) hak_tls_heap;
/* The fast paths' read of it: relaxed (a plain load on every target).  A
 * heap the purger swapped out is seen by the thread's next call: the swap
 * comes before the purger finds the thread blocked, and the thread's wake-up
 * orders it; the slow path then takes the heap's lock (acquire). */
static inline hak_heap_t *hak_heap_self(void) { return atomic_load_explicit(&hak_tls_heap, memory_order_relaxed); }
/* The block the calling thread's last refill carved from a fresh slab
 * (hak_slab_t.fresh) and handed out: zero but for its link and check words.
 * Written by that thread only: set by the refill (heap.c), cleared and
 * read by calloc (alloc.c) around its own allocation, so it never names a
 * block that was handed out before. */
extern HAK_HIDDEN __thread void *hak_heap_fresh_block;

void hak_heap_lock_wait(hak_heap_t *h);

/* Take h's lock for a slow path of the calling thread, which owns h (or is
 * taking it: heap.c).  Uncontended but for the purger's brief holds on a
 * heap idle for a purge delay, so one compare-and-swap on a line only this
 * thread writes.  Returns false if the thread holds it already (a slow
 * path inside another: then the outer one releases it). */
static inline bool hak_heap_lock(hak_heap_t *h)
{
  uint32_t v = atomic_load_explicit(&h->lock, memory_order_relaxed);
  if (HAK_UNLIKELY(v & HAK_HEAP_OWNER)) return false;
  /* acquire: the purger's writes to the heap, before its release, are seen. */
  if (HAK_UNLIKELY((v & HAK_HEAP_RECLAIM) ||
                   !atomic_compare_exchange_strong_explicit(&h->lock, &v, v | HAK_HEAP_OWNER, memory_order_acquire,
                                                            memory_order_relaxed)))
    hak_heap_lock_wait(h);
  return true;
}

/* Release what hak_heap_lock took (held: its result).  Release order: the
 * purger's acquire sees this thread's writes to the heap. */
static inline void hak_heap_unlock(hak_heap_t *h, bool held)
{
  if (!held) return;
  uint32_t v = atomic_load_explicit(&h->lock, memory_order_relaxed);
  atomic_store_explicit(&h->lock, (v & ~(HAK_HEAP_OWNER | HAK_HEAP_RECLAIM)) + HAK_HEAP_HOLD, memory_order_release);
}

/* The malloc slow path of a live heap: refill class cls and pop a block;
 * NULL (errno ENOMEM) if no memory. */
void *hak_heap_refill(hak_heap_t *h, size_t cls);
/* A live heap for the calling thread, which has none: a parked one (want
 * if it is parked) or a new one; NULL on ENOMEM. */
hak_heap_t *hak_heap_thread_start(hak_heap_t *want);
/* A block of class cls for a thread whose heap was abandoned (a TLS
 * destructor's malloc after the heap's): from a heap made for it alone and
 * abandoned at once, so nothing it owns is stranded. */
void *hak_heap_alloc_orphan(size_t cls);
/* The heap of a thread whose first call is a free of a block tagged tag
 * (registry.h): the parked heap that owns the block if there is one, else as
 * hak_heap_thread_start; h itself if none can be had. */
hak_heap_t *hak_heap_thread_get(hak_heap_t *h, uintptr_t tag);
/* The live heap h of a thread that wanted another at its start (h->heir_tag
 * != 0): that heap if it is parked now (h parked in its place), else h. */
hak_heap_t *hak_heap_inherit(hak_heap_t *h);
/* A remote free by a thread that waits to inherit: counted (heap.c). */
static inline void hak_heap_count_heir(hak_heap_t *h)
{
  if (HAK_UNLIKELY(h->heir_tag != 0)) h->heir_frees++;
}
hak_heap_t *hak_heap_acquire(void);       /* an empty heap, live, not the thread's */
void  hak_heap_abandon(hak_heap_t *h);    /* hand everything h owns to the living threads */
/* Give back what h caches (thread cache, pending frees, empty slabs, free
 * pages; with force, parked heaps and the transfer cache too), then unmap
 * every retired region. */
void  hak_heap_collect(hak_heap_t *h, bool force);
void  hak_heap_init(void);                /* the thread-exit key (init.c) */
void  hak_heap_before_fork(void);         /* take the heaps' rare-path locks */
void  hak_heap_after_fork(bool child);
hak_heap_t *hak_heap_list(void);          /* every heap ever made (statistics) */
/* The heaps' kept large runs (large.c): their bytes, and in *runs (if not
 * NULL) how many; a snapshot. */
size_t hak_heap_kept_bytes(size_t *runs);
/* free's slow paths into a slab of the live heap h, under its lock: a
 * thread-cache class over its bound (tcache.c, hak_tcache_overflow), and a
 * block straight to its slab with the fast paths off (partial.h,
 * hak_slab_push). */
void hak_heap_overflow(hak_heap_t *h, size_t cls);
void hak_heap_push_block(hak_heap_t *h, hak_slab_t *s, hak_block_t *b);
/* The purger's pass (purge.c): the live heaps whose threads made no slow-path
 * call since its last pass give back what they can without their thread
 * (see heap.c, "idle heaps").  True if a heap was busy or gave something
 * back: the purger comes back after a purge delay. */
bool hak_heap_reclaim_idle(void);
/* The purger's pass over the parked heaps: those parked for their delay
 * (heap.c, park_delay_ms) are abandoned, their free pages given back.  Returns when the oldest one
 * left falls due, 0 if none is parked. */
uint64_t hak_heap_expire_parked(void);
/* The heaps parked now, at most max of them into out (statistics: the
 * pointers only, to compare, never to follow). */
size_t hak_heap_parked(hak_heap_t **out, size_t max);

/* Small-block fast path (the whole of malloc for a thread's own blocks): no
 * lock, no atomic read-modify-write, no fence, no statistics (with
 * HAKMEM_STATS the fast paths are off and alloc.c and free.c count).  The
 * thread cache first, else the current slab; NULL if both are empty (the
 * caller refills: alloc.c). */
static inline void *hak_heap_pop(hak_heap_t *h, size_t cls)
{
  void *t = hak_tcache_pop(h, cls);
  if (HAK_LIKELY(t != NULL)) return t;
  return hak_slab_pop(h->cur[cls]);
}

/* malloc's pop for n bytes: hak_heap_pop with the profiler's countdown
 * (hak_pop_sampled_fn).  A pop that succeeds proves h a live heap (the
 * placeholders hak_heap_unstarted and hak_heap_dead have no block), whose
 * countdown only this thread writes. */
static inline __attribute__((always_inline)) void *hak_heap_pop_counted(hak_heap_t *h, size_t cls, size_t n,
                                                                        hak_pop_sampled_fn sampled)
{
  void *t = hak_tcache_pop_counted(h, cls, n, sampled);
  if (HAK_LIKELY(t != NULL)) return t;
  return hak_slab_pop_counted(h, h->cur[cls], n, sampled);
}

/* A block of class cls from the live heap h, refilling if the pop misses;
 * NULL (errno ENOMEM) if no memory.  Off the fast path. */
static inline void *hak_heap_get(hak_heap_t *h, size_t cls)
{
  void *p = hak_heap_pop(h, cls);
  return p != NULL ? p : hak_heap_refill(h, cls);
}

#endif /* HAKMEM_HEAP_H */
