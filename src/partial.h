/* A heap's slabs (partial.c): partial lists, blocks back to their slabs,
 * empty slabs released.  Owner thread only (or the purger, under the
 * heap's lock: partial.c). */
#ifndef HAKMEM_PARTIAL_H
#define HAKMEM_PARTIAL_H

#include "block.h"
#include "superslab.h"

/* Pop a block from s, the current slab of its class, claimed; NULL if its
 * free list is empty.  With sampled: malloc's countdown on h, as
 * hak_tcache_pop_counted. */
static inline __attribute__((always_inline)) void *hak_slab_pop_counted(hak_heap_t *h, hak_slab_t *s, size_t n,
                                                                        hak_pop_sampled_fn sampled)
{
  hak_block_t *b = s->free, *next;
  if (HAK_LIKELY(b != NULL)) {
    if (HAK_UNLIKELY(!hak_block_decode(b, &next))) return hak_block_corrupt_pop(b);
    s->free = next;
    __builtin_prefetch(next, 1);  /* the class's next malloc writes it: start the miss now */
    hak_slab_used_set(s, hak_slab_used(s) + 1);
    hak_block_claim(b);
    if (sampled != NULL && HAK_UNLIKELY((h->prof_left -= (int64_t)n) < 0)) {
      b = sampled(h, b, n);
      if (b == NULL) __builtin_unreachable();   /* never NULL: the test after the pop folds away */
    }
    return b;
  }
  return NULL;
}

static inline void *hak_slab_pop(hak_slab_t *s) { return hak_slab_pop_counted(NULL, s, 0, NULL); }

/* The blocks a collect set aside become the free list (free is empty). */
static inline bool hak_slab_take_rfree(hak_slab_t *s)
{
  if (s->rfree == NULL) return false;
  s->free = s->rfree;
  s->rfree = NULL;
  return true;
}


void hak_slab_push_slow(hak_heap_t *h, hak_slab_t *s);

/* Put the free blocks first .. last of a slab this heap owns (k of them,
 * linked in that order) back on the slab's list.  The current slab needs
 * nothing more; another slab does when it becomes empty (give it back) or
 * was full (back on the partial list). */
static inline void hak_slab_push_run(hak_heap_t *h, hak_slab_t *s, hak_block_t *first, hak_block_t *last, uint32_t k)
{
  hak_block_set_next(last, s->free);
  s->free = first;
  uint32_t used = hak_slab_used(s) - k;
  hak_slab_used_set(s, used);
  unsigned st = s->state;
  /* One rarely taken branch, computed without branches: whether the slab
   * is the current one varies from free to free, so a branch on
   * "state != CUR" alone mispredicts often on frees of random blocks. */
  if (HAK_UNLIKELY((st == HAK_SLAB_FULL) | ((used == 0) & (st != HAK_SLAB_CUR)))) hak_slab_push_slow(h, s);
}

/* Put one free block of a slab this heap owns back on the slab's list. */
static inline void hak_slab_push(hak_heap_t *h, hak_slab_t *s, hak_block_t *b) { hak_slab_push_run(h, s, b, b, 1); }

/* Partial lists: per class, circular, oldest first (partial.c). */
void hak_partial_push(hak_heap_t *h, hak_slab_t *s);
void hak_partial_remove(hak_heap_t *h, hak_slab_t *s);
void hak_partial_reset(hak_heap_t *h);    /* every list empty */
/* An empty slab, out of every list, leaves the heap (and its SuperSlab,
 * if empty beyond the reserve). */
void hak_partial_release(hak_heap_t *h, hak_slab_t *s);
/* Free the blocks other threads handed over through the delayed list; _of:
 * only those of SuperSlab ss, the others stay on the list. */
uint32_t hak_partial_drain_delayed(hak_heap_t *h);
uint32_t hak_partial_drain_delayed_of(hak_heap_t *h, const hak_superslab_t *ss);
/* Release class c's partial slabs whose blocks all wait on their remote
 * stacks. */
uint32_t hak_partial_sweep(hak_heap_t *h, size_t c);
/* Both: the delayed list drained, then every class swept (heap maintenance,
 * and the purger's for an idle heap).  Returns blocks freed plus slabs
 * released. */
uint32_t hak_partial_take_back(hak_heap_t *h);

#endif /* HAKMEM_PARTIAL_H */
