/* The thread heap (heap.c): malloc's fast path (hak_heap_pop), the refill,
 * thread start and exit, parking, adoption, collect, fork. */
#ifndef HAKMEM_HEAP_H
#define HAKMEM_HEAP_H

#include "partial.h"
#include "tcache.h"

extern HAK_HIDDEN hak_slab_t hak_slab_sentinel;
extern HAK_HIDDEN hak_heap_t hak_heap_unstarted;      /* before a thread's first malloc */
extern HAK_HIDDEN hak_heap_t hak_heap_dead;       /* after the thread's heap was abandoned */
extern HAK_HIDDEN __thread hak_heap_t *hak_tls_heap;

/* The malloc slow path of a live heap: refill class cls and pop a block;
 * NULL (errno ENOMEM) if no memory. */
void *hak_heap_refill(hak_heap_t *h, size_t cls);
/* A live heap for the calling thread, which has none: a parked one (want
 * if it was parked last) or a new one; NULL on ENOMEM. */
hak_heap_t *hak_heap_thread_start(hak_heap_t *want);
/* A block of class cls for a thread whose heap was abandoned (a TLS
 * destructor's malloc after the heap's): from a heap made for it alone and
 * abandoned at once, so nothing it owns is stranded. */
void *hak_heap_alloc_orphan(size_t cls);
void  hak_heap_collect(hak_heap_t *h, bool force);
hak_heap_t *hak_heap_acquire(void);
hak_heap_t *hak_heap_thread_get(hak_heap_t *h, uintptr_t tag);
void  hak_heap_abandon(hak_heap_t *h);
void  hak_heap_init(void);
void  hak_heap_before_fork(void);
void  hak_heap_after_fork(bool child);
hak_heap_t *hak_heap_list(void);

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

#endif /* HAKMEM_HEAP_H */
