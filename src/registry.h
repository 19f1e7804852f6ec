/* The registry: which 2 MiB regions are hakmem's (registry.c). */
#ifndef HAKMEM_REGISTRY_H
#define HAKMEM_REGISTRY_H

#include "base.h"
#include "types.h"

/* Tags of the registry map: 2 MiB region -> what it is.
 *   0                      not hakmem's
 *   heap | HAK_TAG_SS      a SuperSlab owned by heap (heaps are 64-aligned)
 *   HAK_TAG_SS             an abandoned SuperSlab
 *   base_region<<2 | HAK_TAG_LARGE  part of the large mapping starting there
 *   HAK_TAG_NONE           never stored: the tag of a thread with no heap
 *   HAK_TAG_PROF           the heap profiler's slots (prof.c): kind NONE,
 *                          so no test of kind SS or LARGE takes it */
#define HAK_TAG_SS    ((uintptr_t)1)
#define HAK_TAG_LARGE ((uintptr_t)2)
#define HAK_TAG_NONE  ((uintptr_t)3)
#define HAK_TAG_KIND  ((uintptr_t)3)
#define HAK_TAG_PROF  ((uintptr_t)4 | HAK_TAG_NONE)

#define HAK_MAP_LEAF_BITS 13
#define HAK_MAP_TOP_BITS  13   /* 21 + 13 + 13 = 47 bits of address space */
extern HAK_HIDDEN _Atomic(_Atomic(uintptr_t) *) hak_map_top[1u << HAK_MAP_TOP_BITS];

/* Lock-free lookup.  The leaf arrays are never freed, so the lookup itself
 * needs no protection; dereferencing the memory it names does (see free.c). */
static inline uintptr_t hak_map_get(const void *p)
{
  uintptr_t a = (uintptr_t)p;
  if (HAK_UNLIKELY(a >> (HAK_SS_SHIFT + HAK_MAP_LEAF_BITS + HAK_MAP_TOP_BITS))) return 0;
  _Atomic(uintptr_t) *leaf =
      atomic_load_explicit(&hak_map_top[a >> (HAK_SS_SHIFT + HAK_MAP_LEAF_BITS)], memory_order_acquire);
  if (HAK_UNLIKELY(leaf == NULL)) return 0;
  /* acquire: pairs with the release store that published the region, so its
   * header is visible before we read it. */
  return atomic_load_explicit(&leaf[(a >> HAK_SS_SHIFT) & ((1u << HAK_MAP_LEAF_BITS) - 1)],
                              memory_order_acquire);
}
bool hak_map_set_range(void *base, size_t size, uintptr_t tag);   /* false: ENOMEM */
void hak_map_clear_range(void *base, size_t size);
/* Call f(ss, ctx) for every SuperSlab in the map (owned, abandoned or
 * cached), in address order.  The caller holds the RCU read lock: each
 * stays mapped while f reads it, though it may change owner or leave the
 * map meanwhile.  Off every allocation path (the statistics). */
void hak_map_for_each_ss(void (*f)(hak_superslab_t *ss, void *ctx), void *ctx);
void hak_rcu_read_lock(void);
void hak_rcu_read_unlock(void);
/* Unmap region after a grace period (batched; by the purger thread while
 * one runs); never call inside a read section. */
void hak_retire(hak_retired_t *r, void *base, size_t size);
bool hak_retire_deferred(hak_retired_t *r, void *base, size_t size);  /* no flush; true: one is due */
void hak_retire_flush(void);
bool hak_retire_pending(void);             /* whether any region waits for a flush */
void hak_retire_set_async(bool on);        /* a purger thread flushes (purge.c) */
void hak_rcu_synchronize(void);   /* a grace period; never inside a read section */
void hak_rcu_register_thread(void);  /* map liburcu's reader arena now (init) */
void hak_registry_before_fork(void);
void hak_registry_after_fork(bool child);

#endif /* HAKMEM_REGISTRY_H */
