/* The thread cache (tcache.c): per class, a LIFO of blocks this thread
 * freed, which malloc hands out first (types.h, hak_heap_t). */
#ifndef HAKMEM_TCACHE_H
#define HAKMEM_TCACHE_H

#include "size_class.h"
#include "block.h"

#define HAK_TCACHE_MAX   64
/* 64 KiB a class, so that the classes above 256 B hold their 64 blocks
 * too (bench/results/history.md); a thread holds at most 1.8 MiB in all
 * at these base bounds, where tcmalloc allows 4 MiB. */
#define HAK_TCACHE_BYTES (64 * 1024)
/* A class whose cache overflows may grow past its base bound, by doubling,
 * up to 8 times it (512 blocks, 512 KiB), while the heap's growth budget
 * lasts: HAK_TCACHE_GROW_BYTES of blocks over the base bounds, so a thread
 * holds at most 4.8 MiB.  Growth lapses at the heap's next maintenance
 * (hak_tcache_relax).  A thread that replaces blocks of many classes at
 * random (bench/churn.c) keeps each class's cache between empty and full
 * with room to spare only with both: 4 times and 1 MiB cost it 4-5% of its
 * time in flushes and refills (bench/results/history.md). */
#define HAK_TCACHE_GROWTH     8
#define HAK_TCACHE_GROW_BYTES ((size_t)3 << 20)
/* A class of small blocks may grow further, to HAK_TCACHE_GROW_CLASS bytes
 * of blocks (8192 of 16 bytes): a program that frees a batch of a few
 * thousand small blocks and allocates the next batch (glibc's malloc
 * benchmark) then reuses them from the cache instead of flushing half of
 * it to the slabs at every overflow and popping them back from there. */
#define HAK_TCACHE_GROW_CLASS (128 * 1024)
/* Blocks a thread cache holds of class c at least (its base bound; tcache.c
 * may grow it): HAK_TCACHE_MAX, or HAK_TCACHE_BYTES of blocks; none of a
 * class above HAK_TCACHE_BYTES.  A table (tcache.c), not a division: a
 * remote free asks (hak_tcache_takes_foreign). */
extern HAK_HIDDEN const uint8_t hak_tcache_base[HAK_NUM_CLASSES];
static inline uint32_t hak_tcache_limit(size_t c) { return hak_tcache_base[c]; }

/* Blocks class c's thread cache holds (types.h, hak_heap_t's invariant);
 * the heap's own thread only. */
static inline uint32_t hak_tcache_count(const hak_heap_t *h, size_t c)
{
  int32_t n = (int32_t)hak_tcache_limit(c) + h->tcache_grown[c] - h->tcache_room[c];
  return n > 0 ? (uint32_t)n : 0;
}

/* Whether class c's thread cache takes a block of another heap's slab
 * (free.c, free_remote): only while it holds fewer than half its base
 * bound.  Such a block stays another heap's: malloc hands it out again, and
 * its next free is remote again.  Up to the whole bound, a thread whose
 * frees are mostly its own (bench/larson, where each thread's successor
 * gives up the heap it started with) kept the blocks of other heaps
 * circulating between its cache and its program for good: 13% of larson's
 * frees at 4 threads were remote, 3% with half the bound (more of them go
 * back to their owners), for 1.15x the throughput and no more memory.  A
 * thread whose frees are nearly all of other threads' blocks
 * (bench/turnover.c) still keeps half a cache of them. */
static inline bool hak_tcache_takes_foreign(const hak_heap_t *h, size_t c)
{
  return hak_tcache_count(h, c) < hak_tcache_limit(c) / 2;
}

/* Pop a block of class c from the thread cache, claimed; NULL if empty.
 * With sampled (a constant: always inlined), malloc's countdown too, in
 * the branch of a successful pop, so that no code follows the corrupt
 * block's call and malloc's fast path needs no stack frame. */
static inline __attribute__((always_inline)) void *hak_tcache_pop_counted(hak_heap_t *h, size_t c, size_t n,
                                                                          hak_pop_sampled_fn sampled)
{
  hak_block_t *t = h->tcache[c], *next;
  if (HAK_LIKELY(t != NULL)) {
    if (HAK_UNLIKELY(!hak_block_decode(t, &next))) return hak_block_corrupt_pop(t);
    h->tcache[c] = next;
    h->tcache_room[c]++;
    hak_block_claim(t);
    if (sampled != NULL && HAK_UNLIKELY((h->prof_left -= (int64_t)n) < 0)) {
      t = sampled(h, t, n);
      if (t == NULL) __builtin_unreachable();   /* never NULL: the test after the pop folds away */
    }
    return t;
  }
  return NULL;
}

static inline void *hak_tcache_pop(hak_heap_t *h, size_t c) { return hak_tcache_pop_counted(h, c, 0, NULL); }

/* Push the validated free block b on class c's thread cache; returns the
 * room left (below 0: the caller flushes, or must not push). */
static inline int32_t hak_tcache_push(hak_heap_t *h, size_t c, hak_block_t *b)
{
  hak_block_set_next(b, h->tcache[c]);
  h->tcache[c] = b;
  return --h->tcache_room[c];
}

/* Keep the newest `keep` blocks of the thread cache of class cls, give the
 * others back to their slabs. */
void hak_tcache_flush(hak_heap_t *h, size_t cls, uint32_t keep);
void hak_tcache_flush_all(hak_heap_t *h);
/* Class cls's thread cache went past its bound: grow the bound, or flush
 * half. */
void hak_tcache_overflow(hak_heap_t *h, size_t cls);
/* Every class's bound back to its base (heap maintenance), the blocks over
 * it flushed. */
void hak_tcache_relax(hak_heap_t *h);
/* A heap starts serving a thread: every class empty, at its base bound. */
void hak_tcache_reset(hak_heap_t *h);

#ifndef NDEBUG
/* hak_tcache_base agrees with its formula (aborts if not). */
void hak_tcache_check(void);
#endif

#endif /* HAKMEM_TCACHE_H */
