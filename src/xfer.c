/* The transfer cache: free blocks of the classes above 1 KiB up to 64 KiB
 * (HAK_XFER_FIRST..HAK_XFER_LAST) that a thread freed into another heap's
 * slab, kept in a small array per class that any thread's next malloc of
 * the class takes from before its heap carves fresh pages (tcmalloc's
 * transfer cache, in spirit).
 *
 * Why: a thread heap owns its slabs, and a class that a thread allocates
 * rarely still costs each heap a slab with a block or two carved.  Where
 * threads come and go and every block is freed by another thread
 * (bench/turnover.c), each heap carves such blocks of its own while the
 * blocks other threads freed wait in other heaps' thread caches and remote
 * stacks.  With the cache taking those frees first, peak RSS falls to
 * jemalloc's, throughput unchanged or better (bench/results/history.md).
 *
 * Invariants.  A block in a slot is a validated free block of its class
 * (it carries the free-block signature, types.h, so a second free of it
 * is caught as a double free, and a write into it by the next malloc that
 * takes it); it counts as used in its slab, like a block in a thread cache,
 * so neither its slab nor its SuperSlab can be released while it is here,
 * and no registry lookup or RCU section is needed to give it back.  Slots
 * are exchanged, never compared against an old value, so there is no ABA:
 * put is a CAS from NULL (release: the block's words are written first),
 * take an exchange to NULL (acquire).  At most XFER_SLOTS blocks a class:
 * 16 times the class sizes, 6.5 MiB if every slot of every class is full.
 * A class that no free put into and no malloc took from for a purge delay
 * is drained back to the blocks' owners at the next heap maintenance
 * (heap.c), and every class at hak_collect / malloc_trim. */
#include "xfer.h"
#include "os.h"
#include "size_class.h"
#include "options.h"
#include "block.h"
#include "superslab.h"
#include "remote.h"

#define XFER_SLOTS 16

typedef struct hak_xfer {
  _Atomic(hak_block_t *) slot[XFER_SLOTS];  /* a free block or NULL */
  _Atomic(uint64_t) used_ms;                /* when a put or a take last succeeded */
} __attribute__((aligned(HAK_CACHE_LINE))) hak_xfer_t;

static hak_xfer_t xfer[HAK_XFER_LAST + 1];

/* Stamp the class's last use (a store only when the millisecond changed). */
static inline void xfer_used(hak_xfer_t *x)
{
  uint64_t now = hak_os_now_ms();
  if (atomic_load_explicit(&x->used_ms, memory_order_relaxed) != now)
    atomic_store_explicit(&x->used_ms, now, memory_order_relaxed);
}

uint32_t hak_xfer_count(size_t c)
{
  if (c < HAK_XFER_FIRST || c > HAK_XFER_LAST) return 0;
  uint32_t n = 0;
  /* relaxed: only whether a slot is full, not the block, is read */
  for (int i = 0; i < XFER_SLOTS; i++) n += atomic_load_explicit(&xfer[c].slot[i], memory_order_relaxed) != NULL;
  return n;
}

bool hak_xfer_put(size_t c, hak_block_t *b)
{
  hak_xfer_t *x = &xfer[c];
  hak_block_set_next(b, NULL);  /* free-looking before another thread can see it */
  for (int i = 0; i < XFER_SLOTS; i++) {
    hak_block_t *none = NULL;
    if (atomic_load_explicit(&x->slot[i], memory_order_relaxed) == NULL &&
        atomic_compare_exchange_strong_explicit(&x->slot[i], &none, b, memory_order_release, memory_order_relaxed)) {
      xfer_used(x);
      return true;
    }
  }
  return false;
}

void *hak_xfer_take(size_t c)
{
  hak_xfer_t *x = &xfer[c];
  for (int i = 0; i < XFER_SLOTS; i++) {
    if (atomic_load_explicit(&x->slot[i], memory_order_relaxed) == NULL) continue;
    hak_block_t *b = atomic_exchange_explicit(&x->slot[i], NULL, memory_order_acquire);
    if (b == NULL) continue;
    if (HAK_UNLIKELY(!hak_block_is_free(b))) return hak_block_corrupt_pop(b);
    hak_block_claim(b);
    xfer_used(x);
    return b;
  }
  return NULL;
}

void hak_xfer_drain(uint64_t now, bool all)
{
  for (size_t c = HAK_XFER_FIRST; c <= HAK_XFER_LAST; c++) {
    hak_xfer_t *x = &xfer[c];
    if (!all && now - atomic_load_explicit(&x->used_ms, memory_order_relaxed) < hak_opt.purge_delay_ms) continue;
    for (int i = 0; i < XFER_SLOTS; i++) {
      if (atomic_load_explicit(&x->slot[i], memory_order_relaxed) == NULL) continue;
      hak_block_t *b = atomic_exchange_explicit(&x->slot[i], NULL, memory_order_acquire);
      if (b == NULL) continue;
      hak_superslab_t *ss = hak_ss_of(b);
      hak_remote_free(ss, hak_slab_of(ss, b), b);  /* pinned by b: no RCU needed */
    }
  }
}
