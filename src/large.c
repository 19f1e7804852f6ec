/* Large blocks (beyond the largest size class, or aligned beyond a page):
 * each has its own mapping, aligned to 2 MiB and covering whole 2 MiB
 * regions, so the registry maps every region it covers to its header.  The
 * header sits at the start of the mapping; the block follows at the first
 * offset that meets the alignment.  Freed mappings are unmapped after an RCU
 * grace period (batched with retired SuperSlabs). */
#include <errno.h>

#include "internal.h"

/* Count blocks and bytes in the heap's counters, or in the totals for a
 * thread without a live heap. */
static void count_large(hak_heap_t *h, bool alloc, uint64_t blocks, size_t bytes)
{
  if (h->state == HAK_HEAP_LIVE) {
    hak_count(alloc ? &h->stats.large_allocs : &h->stats.large_frees, blocks);
    hak_count(alloc ? &h->stats.large_bytes_alloc : &h->stats.large_bytes_free, bytes);
  } else {
    hak_gcount(alloc ? &hak_gstats.allocs : &hak_gstats.frees, blocks);
    hak_gcount(alloc ? &hak_gstats.live_bytes_in : &hak_gstats.live_bytes_out, bytes);
    if (alloc) hak_gcount(&hak_gstats.large_allocs, blocks);
  }
}

void *hak_large_alloc(hak_heap_t *h, size_t size, size_t align)
{
  if (align < HAK_MIN_ALIGN) align = HAK_MIN_ALIGN;
  size_t off = hak_align_up(sizeof(hak_large_t), align);
  if (size > HAK_MAX_ALLOC || off > HAK_MAX_ALLOC - size) { errno = ENOMEM; return NULL; }
  size_t need = off + size;
  size_t map_size = hak_align_up(need, HAK_SS_SIZE);
  size_t map_align = align > HAK_SS_SIZE ? align : HAK_SS_SIZE;
  hak_large_t *l = hak_os_map_aligned(map_size, map_align);
  if (l == NULL) { errno = ENOMEM; return NULL; }
  l->magic = HAK_LARGE_MAGIC;
  atomic_store_explicit(&l->live, 1, memory_order_relaxed);
  l->map_base = l;
  l->map_size = map_size;
  l->user = (char *)l + off;
  l->usable = hak_align_up(need, HAK_PAGE_SIZE) - off;
  uintptr_t tag = (((uintptr_t)l >> HAK_SS_SHIFT) << 2) | HAK_TAG_LARGE;
  if (!hak_map_set_range(l, map_size, tag)) {
    hak_os_unmap(l, map_size);
    errno = ENOMEM;
    return NULL;
  }
  hak_gcount(&hak_gstats.mapped_bytes, map_size);
  count_large(h, true, 1, l->usable);
  return l->user;
}

/* The header of the large block p, if p is one (caller holds the RCU read
 * lock, so the header stays mapped). */
hak_large_t *hak_large_of(uintptr_t tag, const void *p)
{
  hak_large_t *l = (hak_large_t *)((tag >> 2) << HAK_SS_SHIFT);
  if (l->magic != HAK_LARGE_MAGIC || l->user != p) return NULL;
  return l;
}

/* Take l out of use (under the RCU read lock); the caller retires the
 * mapping once it has left the read-side section. */
void hak_large_free(hak_heap_t *h, hak_large_t *l, void *p)
{
  uint32_t one = 1;
  /* acq_rel: exactly one free wins; a second one is a double free. */
  if (!atomic_compare_exchange_strong_explicit(&l->live, &one, 0, memory_order_acq_rel, memory_order_relaxed))
    hak_fatal("free(): double free of a large block", p);
  hak_map_clear_range(l->map_base, l->map_size);
  count_large(h, false, 1, l->usable);
}

/* Grow or shrink in place within the mapping; false if it does not fit. */
bool hak_large_resize(hak_heap_t *h, hak_large_t *l, size_t size)
{
  size_t off = (size_t)((char *)l->user - (char *)l);
  if (size > l->map_size - off) return false;
  size_t usable = hak_align_up(off + size, HAK_PAGE_SIZE) - off;
  if (usable > l->usable) {
    count_large(h, true, 0, usable - l->usable);
  } else if (usable < l->usable) {
    count_large(h, false, 0, l->usable - usable);
    hak_os_purge((char *)l->user + usable, l->usable - usable);  /* give the tail back */
  }
  l->usable = usable;
  return true;
}
