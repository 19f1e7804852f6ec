/* Large blocks (beyond the largest size class, or aligned beyond a page):
 * each has its own mapping, aligned to 2 MiB and covering whole 2 MiB
 * regions, so the registry maps every region it covers to its header.  The
 * header sits at the start of the mapping; the block follows at the first
 * offset that meets the alignment.
 *
 * A freed mapping of at most LARGE_CACHE_MAX goes to a small cache, still
 * registered (its header says it is free, so a stray free of it is caught),
 * and the next large allocation that fits reuses it at once: servers churn
 * buffers of a few hundred KiB, and the cache saves the mmap, the munmap and
 * the page faults.  The cache holds at most hak_opt.large_cache bytes.  Any
 * other mapping leaves the registry and is unmapped after an RCU grace period
 * (registry.c's retire list), so a racing reader never touches unmapped
 * memory. */
#include <errno.h>
#include <string.h>

#include "internal.h"

#define LARGE_CACHE_MAX ((size_t)8 << 20)

static hak_handoff_t cache = HAK_HANDOFF_INITIALIZER;
static _Atomic(size_t) cache_bytes;

static hak_large_t *large_of_link(ck_stack_entry_t *e)
{
  return (hak_large_t *)((char *)e - offsetof(hak_large_t, retired.link));
}

/* Take l out of the registry; it is unmapped after a grace period (the
 * registry's retire list).  Outside any read-side section (it may flush). */
static void large_retire(hak_large_t *l)
{
  hak_map_clear_range(l->map_base, l->map_size);
  hak_retire(&l->retired, l->map_base, l->map_size);
}

/* A cached mapping for need bytes (header included) if the one on top fits
 * without wasting more than half; one that does not fit is retired, so the
 * cache follows the sizes in use. */
static hak_large_t *cache_take(size_t need, size_t map_align)
{
  if (map_align > HAK_SS_SIZE || atomic_load_explicit(&cache_bytes, memory_order_relaxed) == 0) return NULL;
  ck_stack_entry_t *e = hak_handoff_pop(&cache);
  if (e == NULL) return NULL;
  hak_large_t *l = large_of_link(e);
  atomic_fetch_sub_explicit(&cache_bytes, l->map_size, memory_order_relaxed);
  if (l->map_size >= need && l->map_size <= 2 * hak_align_up(need, HAK_SS_SIZE)) return l;
  large_retire(l);
  return NULL;
}

/* Give every cached mapping back (hak_collect, malloc_trim). */
void hak_large_trim(void)
{
  ck_stack_entry_t *e;
  while ((e = hak_handoff_pop(&cache)) != NULL) {
    hak_large_t *l = large_of_link(e);
    atomic_fetch_sub_explicit(&cache_bytes, l->map_size, memory_order_relaxed);
    large_retire(l);
  }
  hak_retire_flush();
}

void hak_large_before_fork(void) { hak_handoff_before_fork(&cache); }
void hak_large_after_fork(bool child) { hak_handoff_after_fork(&cache, child); }

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

void *hak_large_alloc(hak_heap_t *h, size_t size, size_t align, bool zero)
{
  if (align < HAK_MIN_ALIGN) align = HAK_MIN_ALIGN;
  size_t off = hak_align_up(sizeof(hak_large_t), align);
  if (size > HAK_MAX_ALLOC || off > HAK_MAX_ALLOC - size) { errno = ENOMEM; return NULL; }
  size_t need = off + size;
  size_t map_align = align > HAK_SS_SIZE ? align : HAK_SS_SIZE;
  hak_large_t *l = cache_take(need, map_align);
  bool fresh = l == NULL;
  if (fresh) {
    size_t map_size = hak_align_up(need, HAK_SS_SIZE);
    l = hak_os_map_aligned(map_size, map_align);
    if (l == NULL) { errno = ENOMEM; return NULL; }
    l->map_base = l;
    l->map_size = map_size;
    hak_gcount(&hak_gstats.mapped_bytes, map_size);
  }
  char *old_end = fresh ? NULL : (char *)l->user + l->usable;  /* pages the last use touched */
  l->magic = HAK_LARGE_MAGIC;
  /* release: a reader that finds the block live sees its header written */
  atomic_store_explicit(&l->live, 1, memory_order_release);
  l->user = (char *)l + off;
  l->usable = hak_align_up(need, HAK_PAGE_SIZE) - off;
  /* A reused mapping may still hold pages its last block touched beyond
   * this one's end.  Faulting pages back costs more than keeping a few, so
   * they stay unless they exceed both 1 MiB and the block's own size (then a
   * large block never holds more than twice its size plus 1 MiB). */
  char *new_end = (char *)l->user + l->usable;
  size_t stale = old_end > new_end ? (size_t)(old_end - new_end) : 0;
  if (stale > ((size_t)1 << 20) && stale > l->usable)
    hak_os_purge(new_end, (size_t)(old_end - new_end));
  if (fresh) {
    uintptr_t tag = (((uintptr_t)l >> HAK_SS_SHIFT) << 2) | HAK_TAG_LARGE;
    if (!hak_map_set_range(l, l->map_size, tag)) {
      hak_os_unmap(l, l->map_size);
      atomic_fetch_sub_explicit(&hak_gstats.mapped_bytes, l->map_size, memory_order_relaxed);
      errno = ENOMEM;
      return NULL;
    }
  }
  if (zero && !fresh) memset(l->user, 0, size);  /* fresh mappings are zero */
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

/* Free the large block p (the caller holds the RCU read lock).  Returns
 * true if the mapping must be retired by the caller once it has left the
 * read-side section; false if it went to the cache. */
bool hak_large_free(hak_heap_t *h, hak_large_t *l, void *p)
{
  uint32_t one = 1;
  /* acq_rel: exactly one free wins; a second one is a double free. */
  if (!atomic_compare_exchange_strong_explicit(&l->live, &one, 0, memory_order_acq_rel, memory_order_relaxed))
    hak_fatal("free(): double free of a large block", p);
  count_large(h, false, 1, l->usable);
  size_t cached = atomic_load_explicit(&cache_bytes, memory_order_relaxed);
  if (l->map_size <= LARGE_CACHE_MAX && cached + l->map_size <= hak_opt.large_cache) {
    atomic_fetch_add_explicit(&cache_bytes, l->map_size, memory_order_relaxed);
    hak_handoff_push(&cache, &l->retired.link);
    return false;
  }
  return true;
}

void hak_large_retire(hak_large_t *l) { large_retire(l); }

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
