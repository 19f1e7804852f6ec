/* A heap's slabs: the per-class partial lists, a freed block's return to
 * its slab (and the slab's to the partial list, or to its SuperSlab once
 * empty), the delayed list's blocks, and the sweep of slabs whose blocks
 * all came back by remote frees.  Every function runs on the owner heap's
 * thread, or on the purger's while it reclaims the heap of an idle thread
 * (its lock held with HAK_HEAP_RECLAIM, heap.c "idle heaps"): then the
 * current slabs and the SuperSlabs' ownership are left alone. */
#include "partial.h"
#include "options.h"
#include "block.h"
#include "superslab.h"
#include "remote.h"

/* Is the purger working on h (it holds h's lock)? */
static inline bool by_purger(const hak_heap_t *h)
{
  return atomic_load_explicit(&h->lock, memory_order_relaxed) & HAK_HEAP_RECLAIM;
}

/* Per class a circular doubly linked list, oldest first.  A slab joins at
 * the tail when it gets room back and refills take the head: the slab that
 * has had the longest time to collect frees is used first, so a refill gets
 * many blocks rather than the one that was just freed (LIFO here would cycle
 * a slab with one free block through full and back on every malloc). */
void hak_partial_push(hak_heap_t *h, hak_slab_t *s)
{
  hak_slab_t *head = h->partial[s->cls];
  s->state = HAK_SLAB_PARTIAL;
  if (head == NULL) {
    s->prev = s->next = s;
    h->partial[s->cls] = s;
    return;
  }
  s->next = head;
  s->prev = head->prev;
  head->prev->next = s;
  head->prev = s;
}

void hak_partial_remove(hak_heap_t *h, hak_slab_t *s)
{
  if (s->next == s) {
    h->partial[s->cls] = NULL;
  } else {
    s->prev->next = s->next;
    s->next->prev = s->prev;
    if (h->partial[s->cls] == s) h->partial[s->cls] = s->next;
  }
  s->prev = s->next = NULL;
}

void hak_partial_reset(hak_heap_t *h)
{
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) h->partial[c] = NULL;
}

/* An empty slab leaves the heap; an empty SuperSlab beyond the reserve goes
 * back to the OS. */
void hak_partial_release(hak_heap_t *h, hak_slab_t *s)
{
  hak_superslab_t *ss = hak_ss_of(s);
  hak_ss_free_slab(h, s);
  if (hak_ss_unused(ss) && h->unused_ss > hak_opt.ss_reserve && !by_purger(h)) hak_ss_release(h, ss);
  hak_ss_purge(h, false);
}

void hak_slab_push_slow(hak_heap_t *h, hak_slab_t *s)
{
  if (h->state != HAK_HEAP_LIVE) return;  /* abandoning: lists are being torn down */
  if (s->state == HAK_SLAB_FULL) {
    hak_remote_set_state(s, HAK_RS_NORMAL);
    hak_partial_push(h, s);
  }
  if (hak_slab_used(s) == 0 && s->state == HAK_SLAB_PARTIAL) {
    hak_partial_remove(h, s);
    hak_partial_release(h, s);
  }
}

/* Free the blocks other threads handed over through the delayed list
 * (remote.c): every one, or (only != NULL) those of SuperSlab `only`.  A
 * block whose slab is still DELAYED_FREEING (its freer has not finished) is
 * put back for the next drain, so the slab is never freed under the freer;
 * so is, for the purger, a block of a current slab, and a block of another
 * SuperSlab than `only`.  Returns the number of blocks freed. */
static uint32_t drain_delayed(hak_heap_t *h, const hak_superslab_t *only)
{
  hak_block_t *b = hak_remote_delayed_take(h);
  hak_block_t *later = NULL, *later_tail = NULL;
  uint32_t n = 0;
  while (b != NULL) {
    hak_block_t *next = hak_block_next(b);
    hak_slab_t *s = hak_slab_at(b);
    if ((only != NULL && hak_ss_of(b) != only) || hak_remote_handing_over(s) ||
        (s->state == HAK_SLAB_CUR && by_purger(h))) {
      hak_block_set_next(b, later);
      later = b;
      if (later_tail == NULL) later_tail = b;
    } else {
      hak_slab_push(h, s, b);  /* counted by its freer */
      n++;
    }
    b = next;
  }
  if (later != NULL) hak_remote_delayed_putback(h, later, later_tail);
  return n;
}

uint32_t hak_partial_drain_delayed(hak_heap_t *h) { return drain_delayed(h, NULL); }

uint32_t hak_partial_drain_delayed_of(hak_heap_t *h, const hak_superslab_t *ss) { return drain_delayed(h, ss); }

/* Release the partial slabs of class c whose remaining blocks all wait on
 * their remote stacks (collected only then: no list walk, hak_remote_collect),
 * looking at 4096 of them at most (a heap with more catches up next time).
 * Returns the number released. */
uint32_t hak_partial_sweep(hak_heap_t *h, size_t c)
{
  hak_slab_t *s = h->partial[c];
  uint32_t released = 0;
  for (size_t n = s ? 1 : 0; s != NULL; n++) {
    hak_slab_t *next = s->next == h->partial[c] ? NULL : s->next;
    if (hak_remote_pending(s) == hak_slab_used(s) && hak_remote_collect(s, HAK_RS_KEEP_STATE) > 0 && hak_slab_used(s) == 0) {
      hak_partial_remove(h, s);
      hak_partial_release(h, s);
      released++;
    }
    s = next;
    if (n > 4096) break;
  }
  return released;
}

uint32_t hak_partial_take_back(hak_heap_t *h)
{
  uint32_t n = 0;
  /* Full slabs that other threads freed into become partial, so the
   * sweep sees them too. */
  if (atomic_load_explicit(&h->delayed, memory_order_relaxed) != NULL) n += hak_partial_drain_delayed(h);
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) n += hak_partial_sweep(h, c);
  return n;
}
