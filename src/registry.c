/* The registry: which 2 MiB regions are hakmem's, and safe reclamation.
 *
 * A two-level map (hak_map_top -> leaf arrays of tags, see registry.h) answers
 * "is this pointer ours, and whose?" with two loads and no lock.  Leaves are
 * installed once with a CAS and never freed.  A region leaves the map first
 * (release store of 0), and its memory is unmapped only after a liburcu grace
 * period: every path that dereferences a region it does not own (remote free,
 * large free, usable size of another thread's block) runs inside an RCU
 * read-side section, so it never touches unmapped memory even when racing with
 * a release.  Grace periods are batched: retired regions (SuperSlabs and large
 * mappings) wait on a ck_stack
 * until hak_opt.retire_batch of them are pending.  While a purger thread
 * runs (purge.c) it waits out the grace periods, not the thread that
 * retired the region: liburcu-bp's synchronize_rcu sleeps 10 ms at a time
 * once a reader stays in its section for more than a few spins, and a
 * large free reads inside one while it purges pages (two threads freeing
 * 5-25 MiB buffers at once waited 8 ms a free).
 *
 * Flavour: urcu-bp.  It registers reader threads by itself on their first
 * read lock (the application creates the threads, not us) and, with
 * sys_membarrier, its read lock is a TLS increment and a compiler barrier.
 */
#include <pthread.h>
#include <urcu/urcu-bp.h>

#include "registry.h"
#include "os.h"
#include "options.h"
#include "stats.h"

_Atomic(_Atomic(uintptr_t) *) hak_map_top[1u << HAK_MAP_TOP_BITS];

#define LEAF_ENTRIES (1u << HAK_MAP_LEAF_BITS)
#define LEAF_BYTES   (LEAF_ENTRIES * sizeof(uintptr_t))

static _Atomic(uintptr_t) *map_leaf(uintptr_t region, bool create)
{
  size_t top = region >> HAK_MAP_LEAF_BITS;
  _Atomic(uintptr_t) *leaf = atomic_load_explicit(&hak_map_top[top], memory_order_acquire);
  if (leaf != NULL || !create) return leaf;
  _Atomic(uintptr_t) *fresh = hak_os_map_aligned(LEAF_BYTES, HAK_PAGE_SIZE);
  if (fresh == NULL) return NULL;
  /* release: the zeroed leaf is visible before its pointer; acquire on failure
   * to see the winner's leaf. */
  if (!atomic_compare_exchange_strong_explicit(&hak_map_top[top], &leaf, fresh, memory_order_acq_rel,
                                               memory_order_acquire)) {
    hak_os_unmap(fresh, LEAF_BYTES);
    return leaf;
  }
  return fresh;
}

bool hak_map_set_range(void *base, size_t size, uintptr_t tag)
{
  uintptr_t first = (uintptr_t)base >> HAK_SS_SHIFT;
  uintptr_t last = ((uintptr_t)base + size - 1) >> HAK_SS_SHIFT;
  for (uintptr_t r = first; r <= last; r++) {
    _Atomic(uintptr_t) *leaf = map_leaf(r, true);
    if (leaf == NULL) {
      for (uintptr_t q = first; q < r; q++)
        atomic_store_explicit(&map_leaf(q, false)[q & (LEAF_ENTRIES - 1)], 0, memory_order_release);
      return false;
    }
    /* release: the region's header (written before) is visible to any thread
     * that reads this tag with acquire. */
    atomic_store_explicit(&leaf[r & (LEAF_ENTRIES - 1)], tag, memory_order_release);
  }
  return true;
}

void hak_map_clear_range(void *base, size_t size)
{
  uintptr_t first = (uintptr_t)base >> HAK_SS_SHIFT;
  uintptr_t last = ((uintptr_t)base + size - 1) >> HAK_SS_SHIFT;
  for (uintptr_t r = first; r <= last; r++)
    atomic_store_explicit(&map_leaf(r, false)[r & (LEAF_ENTRIES - 1)], 0, memory_order_release);
}

/* Leaves never go away, and every tag is loaded with acquire (the header
 * of a region published with release is visible). */
void hak_map_for_each_ss(void (*f)(hak_superslab_t *ss, void *ctx), void *ctx)
{
  for (uintptr_t top = 0; top < (1u << HAK_MAP_TOP_BITS); top++) {
    _Atomic(uintptr_t) *leaf = atomic_load_explicit(&hak_map_top[top], memory_order_acquire);
    if (leaf == NULL) continue;
    for (uintptr_t i = 0; i < LEAF_ENTRIES; i++) {
      uintptr_t tag = atomic_load_explicit(&leaf[i], memory_order_acquire);
      if (tag != 0 && (tag & HAK_TAG_KIND) == HAK_TAG_SS)
        f((hak_superslab_t *)(((top << HAK_MAP_LEAF_BITS) | i) << HAK_SS_SHIFT), ctx);
    }
  }
}

/* liburcu-bp 0.13 declares its reader struct 128-byte aligned but carves the
 * readers from an arena whose data starts 32 bytes past such a boundary; the
 * accesses are word-sized loads and stores at 8-byte-aligned addresses, so
 * UBSan's alignment report on its inline read-side code is a false positive
 * in third-party code.  The ASan/UBSan build compiles this file with
 * -fno-sanitize=alignment (CMakeLists.txt) for that reason. */
void hak_rcu_read_lock(void) { urcu_bp_read_lock(); }
void hak_rcu_read_unlock(void) { urcu_bp_read_unlock(); }
void hak_rcu_synchronize(void) { urcu_bp_synchronize_rcu(); }

/* Register the calling thread as a reader now.  liburcu-bp registers a
 * thread at its first read lock, from an arena it maps on first use (room
 * for 8 threads, then grown by mmap/mremap), and abort()s if that mapping
 * fails.  Done once at initialisation (memory is there then), the arena
 * exists before the process can run out, so a later first read lock of up
 * to 7 more threads -- a free of a large or remote block, which must work
 * out of memory -- does not map.  (Beyond that liburcu still maps and may
 * abort: a limit of liburcu-bp.) */
void hak_rcu_register_thread(void) { urcu_bp_register_thread(); }

/* ------------------------------------------------------------ retire list */

static ck_stack_t retire_stack = CK_STACK_INITIALIZER;
static _Atomic(uint32_t) retire_pending;
static _Atomic(size_t) retire_bytes;

#define RETIRE_BYTES ((size_t)16 << 20)  /* flush sooner when this much waits */
/* Beyond this much waiting, the retiring thread flushes itself even while a
 * purger runs (it may be slow to get a CPU): what waits is address space,
 * and pages a region held when retired. */
#define RETIRE_BYTES_MAX ((size_t)256 << 20)
/* Set while a purger thread flushes for the others (hak_retire_set_async:
 * purge.c, cleared in a fork's child).  relaxed: a retire that misses the
 * change flushes itself, or rings a purger that flushes at its next pass. */
static _Atomic(bool) retire_async;

void hak_retire_set_async(bool on) { atomic_store_explicit(&retire_async, on, memory_order_relaxed); }

/* Whether regions wait for a flush.  seq_cst: the purger reads it after
 * arming its bell, and a retire rings after its push (os.c's bell). */
bool hak_retire_pending(void) { return atomic_load(&retire_pending) != 0; }

/* Unmap [base, base+size) after a grace period; r lives inside the region.
 * The region may still be in the registry (a freed large block stays there,
 * so a second free of it is still reported as a double free): the flush
 * takes it out before its grace period.  Once r is pushed, another thread's
 * flush may unmap it: nothing of it is read after the push. */
void hak_retire(hak_retired_t *r, void *base, size_t size)
{
  if (!hak_retire_deferred(r, base, size)) return;
  if (atomic_load_explicit(&retire_async, memory_order_relaxed) &&
      atomic_load_explicit(&retire_bytes, memory_order_relaxed) < RETIRE_BYTES_MAX) {
    hak_os_bell_ring();  /* the purger flushes */
    return;
  }
  hak_retire_flush();
}

/* As hak_retire, but never flushes (callable inside a read-side section):
 * returns whether a flush is due, for a caller that may run one.
 * relaxed: the counters are only a heuristic trigger; the stack itself
 * orders the entries. */
bool hak_retire_deferred(hak_retired_t *r, void *base, size_t size)
{
  r->base = base;
  r->size = size;
  size_t bytes = atomic_fetch_add_explicit(&retire_bytes, size, memory_order_relaxed) + size;
  ck_stack_push_upmc(&retire_stack, &r->link);
  uint32_t n = atomic_fetch_add_explicit(&retire_pending, 1, memory_order_relaxed) + 1;
  return n >= hak_opt.retire_batch || bytes >= RETIRE_BYTES;
}

/* Flushes run one at a time, so that one that returns has seen every region
 * retired before it unmapped: a collect's flush waits for the purger's
 * batch in flight (hak_collect's mapped_bytes once missed it under TSan).
 * Taken before urcu's locks, here and at fork. */
static pthread_mutex_t flush_lock = PTHREAD_MUTEX_INITIALIZER;

/* Take every pending region, wait one grace period, unmap them all.  Never
 * called inside a read-side section (synchronize_rcu would wait for itself). */
void hak_retire_flush(void)
{
  pthread_mutex_lock(&flush_lock);
  ck_stack_entry_t *e = ck_stack_batch_pop_upmc(&retire_stack);
  if (e == NULL) {
    pthread_mutex_unlock(&flush_lock);
    return;
  }
  uint32_t n = 0;
  size_t bytes = 0;
  for (ck_stack_entry_t *x = e; x != NULL; x = x->next) {
    n++;
    bytes += ((hak_retired_t *)x)->size;
  }
  atomic_fetch_sub_explicit(&retire_pending, n, memory_order_relaxed);
  atomic_fetch_sub_explicit(&retire_bytes, bytes, memory_order_relaxed);
  /* Out of the registry first, then a grace period: a reader that saw the
   * old tag has left its read-side section before the memory goes. */
  for (ck_stack_entry_t *x = e; x != NULL; x = x->next)
    hak_map_clear_range(((hak_retired_t *)x)->base, ((hak_retired_t *)x)->size);
  urcu_bp_synchronize_rcu();
  while (e != NULL) {
    hak_retired_t *r = (hak_retired_t *)e;  /* link is the first member */
    ck_stack_entry_t *next = e->next;       /* read before the memory goes */
    void *base = r->base;
    size_t size = r->size;
    hak_os_unmap(base, size);
    atomic_fetch_sub_explicit(&hak_gstats.mapped_bytes, size, memory_order_relaxed);
    e = next;
  }
  pthread_mutex_unlock(&flush_lock);
}

void hak_registry_before_fork(void)
{
  pthread_mutex_lock(&flush_lock);
  urcu_bp_before_fork();
}
void hak_registry_after_fork(bool child)
{
  if (child) {
    atomic_store_explicit(&retire_async, false, memory_order_relaxed);  /* no purger in the child */
    urcu_bp_after_fork_child();
    pthread_mutex_init(&flush_lock, NULL);
  } else {
    urcu_bp_after_fork_parent();
    pthread_mutex_unlock(&flush_lock);
  }
}
