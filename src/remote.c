/* Remote free: the per-slab remote_heads[] stacks and the delayed-free
 * hand-over that brings a full slab back to its owner (protocol in types.h,
 * hak_remote_t). */
#include <sched.h>
#include <string.h>

#include "remote.h"
#include "os.h"
#include "size_class.h"
#include "block.h"
#include "superslab.h"

static inline hak_block_t *rs_ptr(uintptr_t v) { return (hak_block_t *)(v & HAK_RS_PTR_MASK); }
static inline uintptr_t rs_state(uintptr_t v) { return v & HAK_RS_MASK; }
static inline uint32_t rs_count(uintptr_t v) { return (uint32_t)(v >> HAK_RS_COUNT_SHIFT); }

/* Push first..last (linked, last's link set here) on heap h's delayed list:
 * any thread (MPSC; release: the blocks' words are visible to the owner's
 * acquiring exchange, hak_remote_delayed_take). */
static void delayed_push(hak_heap_t *h, hak_block_t *first, hak_block_t *last)
{
  hak_block_t *top = atomic_load_explicit(&h->delayed, memory_order_relaxed);
  do {
    hak_block_set_next(last, top);
  } while (!atomic_compare_exchange_weak_explicit(&h->delayed, &top, first, memory_order_release,
                                                  memory_order_relaxed));
}

/* Push the n blocks first..last of s (validated by the caller, linked as a
 * free list; last's link is set here) from a thread that does not own s.
 * The caller holds the RCU read lock, or the blocks are its pending ones
 * (hak_remote_defer), which keep s and its SuperSlab from being released. */
static void remote_push(hak_superslab_t *ss, hak_slab_t *s, hak_block_t *first, hak_block_t *last, uint32_t n)
{
  _Atomic(uintptr_t) *head = &ss->remote_heads[s->unit].head;
  uintptr_t old = atomic_load_explicit(head, memory_order_relaxed), nv;
  bool delayed;
  do {
    delayed = rs_state(old) == HAK_RS_USE_DELAYED;
    if (delayed) {
      nv = (old & ~HAK_RS_MASK) | HAK_RS_DELAYED_FREEING;
    } else {
      if (HAK_UNLIKELY(rs_count(old) + n > s->reserved)) hak_fatal("free(): remote list overflow (double free?)", first);
      hak_block_set_next(last, rs_ptr(old));
      nv = ((old & ~HAK_RS_PTR_MASK) + n * HAK_RS_COUNT_ONE) | (uintptr_t)first;  /* count+n, state kept */
    }
    /* release: the blocks' link and check are visible to the owner's
     * acquiring exchange; acquire: for the delayed path, ss->owner as the
     * owner published it before it set USE_DELAYED. */
  } while (!atomic_compare_exchange_weak_explicit(head, &old, nv, memory_order_acq_rel, memory_order_relaxed));
  if (HAK_LIKELY(!delayed)) return;

  /* The slab is full and out of the owner's lists: give the blocks to the
   * owner heap's delayed list so the owner finds the slab again.  The owner
   * cannot leave (abandon waits for DELAYED_FREEING to clear) and cannot free
   * the slab (it defers blocks whose slab is DELAYED_FREEING). */
  delayed_push(atomic_load_explicit(&ss->owner, memory_order_acquire), first, last);
  /* Back to NORMAL; only this thread may change DELAYED_FREEING.  release:
   * the push above happens before the owner sees the state change. */
  old = atomic_load_explicit(head, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(head, &old, (old & ~HAK_RS_MASK) | HAK_RS_NORMAL,
                                                memory_order_release, memory_order_relaxed)) {
  }
}

void hak_remote_free(hak_superslab_t *ss, hak_slab_t *s, hak_block_t *b)
{
  remote_push(ss, s, b, b, 1);
}

/* ------------------------------------------------------- pending frees */

/* A live heap batches its remote frees: frees into a slab of another heap
 * go on that slab's pending run in h->pend[] (a free list, newest first;
 * HAK_PEND_SLOTS runs, by a hash of the slab) and reach the slab's remote
 * stack with one CAS when the run ends: its slot is needed for another
 * slab, it holds HAK_REMOTE_BATCH blocks or 4 KiB (hak_class_batch), or
 * the thread next refills, collects or exits (hak_remote_flush).  A thread
 * that only frees and then idles holds at most HAK_PEND_SLOTS runs of 4 KiB
 * (128 KiB; why the limit is in bytes: size_class.c).  While
 * pending, the blocks count as used in their slab, so neither the slab nor
 * its SuperSlab can be released: a flush needs no RCU section, and a free
 * into the SuperSlab of the latest run finds it without the registry
 * (pend_key; free.c).  The blocks carry the free-block signature, so a
 * second free of one is caught like any double free. */
void hak_remote_pend_flush(hak_heap_t *h, hak_pend_t *e)
{
  hak_slab_t *s = e->slab;
  remote_push(hak_ss_of(s), s, e->first, e->last, e->n);
  if (hak_owned_key(s) == h->pend_key) h->pend_key = HAK_OWNED_NONE;  /* no longer known pinned */
  e->slab = NULL;
  e->first = e->last = NULL;
  e->n = 0;
  h->pend_runs--;
}

void hak_remote_flush(hak_heap_t *h)
{
  for (size_t i = 0; h->pend_runs != 0 && i < HAK_PEND_SLOTS; i++)
    if (h->pend[i].slab != NULL) hak_remote_pend_flush(h, &h->pend[i]);
}

void hak_remote_pend_start(hak_heap_t *h, hak_pend_t *e, hak_slab_t *s, hak_block_t *b)
{
  if (e->slab != NULL) hak_remote_pend_flush(h, e);
  h->pend_runs++;
  e->slab = s;
  e->last = b;
  e->limit = hak_class_batch[s->cls];
  hak_remote_pend_add(h, e, s, b);
}

/* Owner: take every block of the remote stack into s->free (or s->rfree) and set the state
 * to new_state (or keep it, with new_state > 3).  Returns the number taken. */
uint32_t hak_remote_collect(hak_slab_t *s, uintptr_t new_state)
{
  _Atomic(uintptr_t) *head = &hak_slab_remote(s)->head;
  uintptr_t old = atomic_load_explicit(head, memory_order_relaxed), nv;
  do {
    if (rs_ptr(old) == NULL && (new_state > HAK_RS_MASK || rs_state(old) == new_state)) return 0;
    nv = new_state > HAK_RS_MASK ? rs_state(old) : new_state;
    /* acquire: the pushers' writes to the blocks' link and check. */
  } while (!atomic_compare_exchange_weak_explicit(head, &old, nv, memory_order_acquire, memory_order_relaxed));
  hak_block_t *list = rs_ptr(old);
  if (list == NULL) return 0;
  uint32_t n = rs_count(old);
  uint32_t used = hak_slab_used(s);
  if (HAK_UNLIKELY(n > used)) hak_fatal("remote free list holds more blocks than the slab handed out", list);
  /* No walk in the common cases: a list's tail is found only by walking
   * it, a cache miss per block, each last written by another core.  When
   * these were the last blocks out, the slab is empty: it goes back to
   * uncarved (every block free, none on a list) instead of linking three
   * lists (a walk per collect dominated the sweeps of heap_maintain and
   * thread exit where threads come and go). */
  if (n == used && s->free != NULL && s->rfree != NULL) {
    s->free = s->rfree = NULL;
    hak_slab_set_capacity(s, 0);
    s->fresh = 0;  /* carved again over written memory */
  } else if (s->free == NULL) {
    s->free = list;  /* the refill case */
  } else if (s->rfree == NULL) {
    s->rfree = list;  /* free is used up first */
  } else {
    hak_block_t *tail = list;
    for (hak_block_t *n; (n = hak_block_next(tail)) != NULL;) tail = n;
    hak_block_set_next(tail, s->rfree);
    s->rfree = list;
  }
  hak_slab_used_set(s, used - n);
  return n;
}

/* Blocks waiting on s's remote stack: a snapshot (more may arrive). */
uint32_t hak_remote_pending(hak_slab_t *s)
{
  return rs_count(atomic_load_explicit(&hak_slab_remote(s)->head, memory_order_relaxed));
}

/* Owner: s is exhausted; ask remote freers to use the delayed list.  Fails
 * (false) if blocks are waiting on the stack: collect them instead. */
bool hak_remote_mark_full(hak_slab_t *s)
{
  _Atomic(uintptr_t) *head = &hak_slab_remote(s)->head;
  for (;;) {
    uintptr_t old = atomic_load_explicit(head, memory_order_relaxed);
    if (rs_ptr(old) != NULL) return false;
    if (rs_state(old) == HAK_RS_USE_DELAYED) return true;
    if (rs_state(old) == HAK_RS_DELAYED_FREEING) { sched_yield(); continue; }
    /* release: ss->owner (set before) is visible to a freer acquiring the
     * USE_DELAYED state. */
    if (atomic_compare_exchange_weak_explicit(head, &old, HAK_RS_USE_DELAYED, memory_order_release,
                                              memory_order_relaxed))
      return true;
  }
}

/* Owner: set the state bits, waiting out a hand-over in progress. */
void hak_remote_set_state(hak_slab_t *s, uintptr_t state)
{
  _Atomic(uintptr_t) *head = &hak_slab_remote(s)->head;
  for (;;) {
    uintptr_t old = atomic_load_explicit(head, memory_order_acquire);
    if (rs_state(old) == state) return;
    if (rs_state(old) == HAK_RS_DELAYED_FREEING) { sched_yield(); continue; }
    if (atomic_compare_exchange_weak_explicit(head, &old, (old & ~HAK_RS_MASK) | state, memory_order_acq_rel,
                                              memory_order_relaxed))
      return;
  }
}

/* Owner: take every block other threads handed over through h's delayed
 * list (partial.c frees them into their slabs). */
hak_block_t *hak_remote_delayed_take(hak_heap_t *h)
{
  /* acquire: the freers' writes to the blocks' link and check. */
  return atomic_exchange_explicit(&h->delayed, NULL, memory_order_acquire);
}

/* Owner: put first..last (linked, last's link unset) back on h's delayed
 * list, for the next take. */
void hak_remote_delayed_putback(hak_heap_t *h, hak_block_t *first, hak_block_t *last)
{
  delayed_push(h, first, last);
}

/* Is a freer between the two steps of a delayed hand-over into s?  The
 * owner then must not free s's blocks it took from the delayed list. */
bool hak_remote_handing_over(hak_slab_t *s)
{
  uintptr_t st = atomic_load_explicit(&hak_slab_remote(s)->head, memory_order_acquire);
  return rs_state(st) == HAK_RS_DELAYED_FREEING;
}

/* A heap starts serving a thread: no pending run, nothing delayed. */
void hak_remote_heap_reset(hak_heap_t *h)
{
  h->pend_key = HAK_OWNED_NONE;
  memset(h->pend, 0, sizeof h->pend);
  h->pend_runs = 0;
  atomic_store_explicit(&h->delayed, NULL, memory_order_relaxed);
}

/* In a fork child, for a slab of the forking thread's heap: a parent thread
 * that was between the two steps of a delayed hand-over does not exist in
 * the child, so its DELAYED_FREEING would never clear.  The slab is still full
 * in the owner's view: back to USE_DELAYED (the block it was handing over is
 * either on the delayed list already or lost to the child, never corrupted). */
void hak_remote_after_fork_child(hak_slab_t *s)
{
  _Atomic(uintptr_t) *head = &hak_slab_remote(s)->head;
  uintptr_t v = atomic_load_explicit(head, memory_order_relaxed);
  if (rs_state(v) == HAK_RS_DELAYED_FREEING)
    atomic_store_explicit(head, (v & ~HAK_RS_MASK) | HAK_RS_USE_DELAYED, memory_order_relaxed);
}
