/* The thread heap (heap.c): the malloc fast path's pop, refill, the
 * thread cache, thread start and exit. */
#ifndef HAKMEM_HEAP_H
#define HAKMEM_HEAP_H

#include "size_class.h"
#include "block.h"

#define HAK_TCACHE_MAX   64
/* 64 KiB a class (16 KiB before: churn -8%, mixed -10%, the classes above
 * 256 B held fewer than 64 blocks); a thread holds at most 1.8 MiB in all
 * at these base bounds, where tcmalloc allows 4 MiB. */
#define HAK_TCACHE_BYTES (64 * 1024)
/* A class whose cache overflows may grow past its base bound, by doubling,
 * up to 4 times it (256 blocks, 256 KiB), while the heap's growth budget
 * lasts: HAK_TCACHE_GROW_BYTES of blocks over the base bounds, so a thread
 * holds at most 2.8 MiB.  Growth lapses at the heap's next maintenance
 * (heap.c, tcache_relax). */
#define HAK_TCACHE_GROWTH     4
#define HAK_TCACHE_GROW_BYTES (1024 * 1024)
/* Blocks a thread cache holds of class c at least (its base bound; heap.c
 * may grow it): HAK_TCACHE_MAX, or HAK_TCACHE_BYTES of blocks; none of a
 * class above HAK_TCACHE_BYTES.  Off the fast path (heap set-up and
 * flushes). */
static inline uint32_t hak_tcache_limit(size_t c)
{
  uint32_t k = HAK_TCACHE_BYTES / hak_class_size[c];
  return k > HAK_TCACHE_MAX ? HAK_TCACHE_MAX : k;
}

extern HAK_HIDDEN hak_slab_t hak_slab_empty;
extern HAK_HIDDEN hak_heap_t hak_heap_empty;      /* before a thread's first malloc */
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
void  hak_heap_free_local_slow(hak_heap_t *h, hak_slab_t *s);
void  hak_heap_collect(hak_heap_t *h, bool force);
hak_heap_t *hak_heap_acquire(void);
hak_heap_t *hak_heap_thread_get(hak_heap_t *h, uintptr_t tag);
void  hak_heap_abandon(hak_heap_t *h);
void  hak_heap_thread_init(void);
void  hak_heap_init(void);
void  hak_heap_before_fork(void);
void  hak_heap_after_fork(bool child);
void  hak_heap_slab_unfull(hak_heap_t *h, hak_slab_t *s);
hak_heap_t *hak_heap_list(void);

/* Keep the newest `keep` blocks of the thread cache of class cls, give the
 * others back to their slabs (heap.c). */
void hak_tcache_flush(hak_heap_t *h, size_t cls, uint32_t keep);
/* Class cls's thread cache went past its bound: grow the bound, or flush
 * half (heap.c). */
void hak_tcache_overflow(hak_heap_t *h, size_t cls);

/* Small-block fast paths (the whole of malloc and free for a thread's own
 * blocks): no lock, no atomic read-modify-write, no fence, no statistics
 * (with HAKMEM_STATS the fast paths are off and alloc.c and free.c count).  malloc pops
 * the thread cache, else the current slab, and NULL if both are empty
 * (the caller refills: alloc.c); a local free pushes on the thread cache
 * (free.c). */
static inline void *hak_heap_pop(hak_heap_t *h, size_t cls)
{
  hak_block_t *t = h->tcache[cls], *next;
  if (HAK_LIKELY(t != NULL)) {
    if (HAK_UNLIKELY(!hak_block_decode(t, &next))) return hak_block_corrupt_pop(t);
    h->tcache[cls] = next;
    h->tcache_room[cls]++;
    hak_block_claim(t);
    return t;
  }
  hak_slab_t *s = h->cur[cls];
  hak_block_t *b = s->free;
  if (HAK_LIKELY(b != NULL)) {
    if (HAK_UNLIKELY(!hak_block_decode(b, &next))) return hak_block_corrupt_pop(b);
    s->free = next;
    __builtin_prefetch(next, 1);  /* the class's next malloc writes it: start the miss now */
    s->used++;
    hak_block_claim(b);
    return b;
  }
  return NULL;
}

/* Put a free block of a slab this heap owns back on the slab's list.  The
 * current slab needs nothing more; another slab does when it becomes empty
 * (give it back) or was full (back on the partial list). */
static inline void hak_heap_push_block(hak_heap_t *h, hak_slab_t *s, hak_block_t *b)
{
  hak_block_set_next(b, s->free);
  s->free = b;
  uint32_t used = --s->used;
  unsigned st = s->state;
  /* One rarely taken branch, computed without branches: whether the slab
   * is the current one varies from free to free (a free of a random block
   * mispredicted 0.3 times per larson step on "state != CUR" alone). */
  if (HAK_UNLIKELY((st == HAK_SLAB_FULL) | ((used == 0) & (st != HAK_SLAB_CUR)))) hak_heap_free_local_slow(h, s);
}

/* Push the validated free block b on class c's thread cache; returns the
 * room left (below 0: the caller flushes, or must not push). */
static inline int32_t hak_tcache_push(hak_heap_t *h, size_t c, hak_block_t *b)
{
  hak_block_set_next(b, h->tcache[c]);
  h->tcache[c] = b;
  return --h->tcache_room[c];
}

#endif /* HAKMEM_HEAP_H */
