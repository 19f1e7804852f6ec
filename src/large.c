/* Large blocks (beyond the largest size class, or aligned beyond a page):
 * each has its own mapping, aligned to 2 MiB and covering whole 2 MiB
 * regions, so the registry maps every region it covers to its header.  The
 * header sits at the start of the mapping; the block follows at the first
 * offset that meets the alignment.
 *
 * What makes big blocks fast is not touching fresh memory: on these VMs a
 * 4 KiB page fault costs about 15 us, so a fresh 16 MiB buffer costs 60 ms
 * of faults before the program writes a byte.  Hence:
 *  - Huge pages: the 2 MiB regions a block covers whole are advised
 *    MADV_HUGEPAGE, so one fault maps 2 MiB (a partly used tail region keeps
 *    4 KiB pages, so RSS still follows use).
 *  - A cache of freed mappings (CACHE_SLOTS slots; committed pages at most
 *    hak_opt.large_cache bytes, and above a quarter of that at most half
 *    the large bytes still live; beyond that a mapping is cached as address
 *    space only): the next large allocation takes the
 *    best fit, or grows a smaller one by remapping (its pages are reused,
 *    only the extra is fresh).  Cached mappings stay registered (their
 *    header says free, so a stray free of one is caught).  An entry idle
 *    for longer than the purge delay has its pages given back
 *    (hak_large_decay, run by large operations and by heap maintenance).
 *  - calloc zeroes only the part of a reused mapping that may be dirty.
 *  - realloc grows in place, or moves the pages to a larger mapping by
 *    remapping page tables: nothing is copied.
 * A mapping that leaves the registry is unmapped after an RCU grace period
 * (registry.c's retire list), so a racing reader never touches unmapped
 * memory. */
#include <errno.h>
#include <string.h>

#include "internal.h"

#define CACHE_SLOTS 16
#define CACHE_MAP_MAX ((size_t)1 << 30)  /* larger mappings are unmapped when freed */

/* Cache slots: a slot holds a free mapping or NULL; a thread owns a mapping
 * once its exchange took it out of the slot.  slot_size is advisory (the
 * size of what the slot held when last filled), so a taker can pick the
 * best fit without reading headers it does not own. */
static _Atomic(hak_large_t *) cache_slot[CACHE_SLOTS];
static _Atomic(size_t) cache_slot_size[CACHE_SLOTS];
static _Atomic(size_t) cache_slot_dirty[CACHE_SLOTS];  /* advisory, like the size */
static _Atomic(size_t) cache_bytes;          /* dirty bytes cached, advisory */
static _Atomic(uint32_t) cache_count;        /* mappings cached, advisory */
static _Atomic(uint64_t) cache_oldest_ms;    /* earliest unpurged entry's free time, 0: none */
/* Bytes of large blocks live in the process.  The cache keeps committed
 * pages up to a quarter of hak_opt.large_cache, and beyond that only up to
 * half of the live bytes: a program that frees its big buffers and goes
 * idle keeps at most that quarter (no timer is needed to give the rest
 * back), while one that keeps replacing big buffers reuses them.  relaxed:
 * a sizing heuristic, ordered by nothing. */
static _Atomic(size_t) large_live_bytes;

static size_t large_region_tag_base(const hak_large_t *l)
{
  return (((uintptr_t)l >> HAK_SS_SHIFT) << 2) | HAK_TAG_LARGE;
}

/* Unmap l after a grace period.  It stays in the registry, its header
 * saying free, until the retire list is flushed, so a second free of its
 * block in the meantime is still reported as a double free.  Outside any
 * read-side section (it may flush). */
static void large_retire(hak_large_t *l)
{
  hak_retire(&l->retired, l->map_base, l->map_size);
}

/* Huge pages for the 2 MiB regions of [from, to) that l covers whole. */
static void large_hugepage(hak_large_t *l, size_t from, size_t to)
{
  from = hak_align_up(from, HAK_SS_SIZE);
  to &= ~(HAK_SS_SIZE - 1);
  if (to > from) hak_os_hugepage((char *)l + from, to - from);
}

/* Give back l's pages beyond offset keep (page-rounded; the header page stays). */
static void large_purge_from(hak_large_t *l, size_t keep)
{
  keep = hak_align_up(keep < HAK_PAGE_SIZE ? HAK_PAGE_SIZE : keep, HAK_PAGE_SIZE);
  if (l->dirty > keep) hak_os_purge((char *)l + keep, l->dirty - keep);
  if (l->dirty > keep) l->dirty = keep;
}

/* ------------------------------------------------------------------ cache */

static hak_large_t *cache_take_slot(unsigned i)
{
  hak_large_t *l = atomic_exchange_explicit(&cache_slot[i], NULL, memory_order_acquire);
  if (l != NULL) {
    atomic_fetch_sub_explicit(&cache_bytes, l->dirty, memory_order_relaxed);
    atomic_fetch_sub_explicit(&cache_count, 1, memory_order_relaxed);
  }
  return l;
}

/* Put a free mapping in an empty slot; false if none is empty. */
static bool cache_put_slot(hak_large_t *l)
{
  for (unsigned i = 0; i < CACHE_SLOTS; i++) {
    hak_large_t *empty = NULL;
    if (atomic_load_explicit(&cache_slot[i], memory_order_relaxed) != NULL) continue;
    atomic_store_explicit(&cache_slot_size[i], l->map_size, memory_order_relaxed);
    atomic_store_explicit(&cache_slot_dirty[i], l->dirty, memory_order_relaxed);
    atomic_fetch_add_explicit(&cache_bytes, l->dirty, memory_order_relaxed);
    atomic_fetch_add_explicit(&cache_count, 1, memory_order_relaxed);
    /* release: the header (dirty, freed_ms) is visible to the taker. */
    if (atomic_compare_exchange_strong_explicit(&cache_slot[i], &empty, l, memory_order_release,
                                                memory_order_relaxed))
      return true;
    atomic_fetch_sub_explicit(&cache_bytes, l->dirty, memory_order_relaxed);
    atomic_fetch_sub_explicit(&cache_count, 1, memory_order_relaxed);
  }
  return false;
}

/* The cached mapping that best serves need bytes: the smallest that holds
 * it, and among those the one with the most committed pages (every page it
 * lacks is a page fault later; its excess pages are purged by the caller if
 * they are many), else the largest smaller one (to be grown: its pages are
 * reused, only the rest is fresh), else NULL. */
static hak_large_t *cache_take(size_t need)
{
  if (atomic_load_explicit(&cache_count, memory_order_relaxed) == 0) return NULL;
  int best = -1, smaller = -1;
  size_t best_size = SIZE_MAX, best_dirty = 0, smaller_size = 0;
  for (unsigned i = 0; i < CACHE_SLOTS; i++) {
    if (atomic_load_explicit(&cache_slot[i], memory_order_relaxed) == NULL) continue;
    size_t sz = atomic_load_explicit(&cache_slot_size[i], memory_order_relaxed);
    size_t dirty = atomic_load_explicit(&cache_slot_dirty[i], memory_order_relaxed);
    if (sz >= need && (sz < best_size || (sz == best_size && dirty > best_dirty))) {
      best = (int)i;
      best_size = sz;
      best_dirty = dirty;
    }
    if (sz < need && sz > smaller_size) { smaller = (int)i; smaller_size = sz; }
  }
  int pick = best >= 0 ? best : smaller;
  return pick >= 0 ? cache_take_slot((unsigned)pick) : NULL;
}

/* Purge cached mappings, oldest slots first, until the cache's committed
 * pages are at most target: the mapping being freed now is the likeliest to
 * be reused next, so it keeps its pages and older ones give theirs up. */
static void cache_make_room(size_t target)
{
  for (unsigned n = 0; n < CACHE_SLOTS; n++) {
    if (atomic_load_explicit(&cache_bytes, memory_order_relaxed) <= target) return;
    static _Atomic(unsigned) purge_next;
    unsigned i = atomic_fetch_add_explicit(&purge_next, 1, memory_order_relaxed) % CACHE_SLOTS;
    if (atomic_load_explicit(&cache_slot[i], memory_order_relaxed) == NULL) continue;
    hak_large_t *c = cache_take_slot(i);
    if (c == NULL) continue;
    large_purge_from(c, 0);
    /* Every slot refilled meanwhile: c goes, unmapped at a later flush (we
     * may be inside a read-side section, where no grace period can run). */
    if (!cache_put_slot(c)) (void)hak_retire_deferred(&c->retired, c->map_base, c->map_size);
  }
}

/* Give back the pages of cache entries freed more than the purge delay ago
 * (they stay cached, as address space only).  Cheap when nothing is due. */
void hak_large_decay(void)
{
  uint64_t oldest = atomic_load_explicit(&cache_oldest_ms, memory_order_relaxed);
  if (oldest == 0) return;
  uint64_t now = hak_os_now_ms();
  if (now - oldest < hak_opt.purge_delay_ms) return;
  if (!atomic_compare_exchange_strong_explicit(&cache_oldest_ms, &oldest, 0, memory_order_relaxed,
                                               memory_order_relaxed))
    return;  /* another thread does this pass */
  uint64_t next = 0;
  for (unsigned i = 0; i < CACHE_SLOTS; i++) {
    if (atomic_load_explicit(&cache_slot[i], memory_order_relaxed) == NULL) continue;
    hak_large_t *l = cache_take_slot(i);
    if (l == NULL) continue;
    if (l->dirty > HAK_PAGE_SIZE) {
      if (now - l->freed_ms >= hak_opt.purge_delay_ms) large_purge_from(l, 0);
      else if (next == 0 || l->freed_ms < next) next = l->freed_ms;
    }
    if (!cache_put_slot(l)) large_retire(l);
  }
  if (next != 0) {
    uint64_t none = 0;
    atomic_compare_exchange_strong_explicit(&cache_oldest_ms, &none, next, memory_order_relaxed,
                                            memory_order_relaxed);
  }
}

/* Give every cached mapping back (hak_collect, malloc_trim). */
void hak_large_trim(void)
{
  for (unsigned i = 0; i < CACHE_SLOTS; i++) {
    hak_large_t *l = cache_take_slot(i);
    if (l != NULL) large_retire(l);
  }
  hak_retire_flush();
}

/* ------------------------------------------------------------------ grow */

/* Grow l's mapping to map_size bytes without copying: in place when the
 * address space after it is free, else by moving its pages to a new aligned
 * mapping.  used: the bytes the block will cover (for huge pages).  The header at its (possibly new) address, or NULL (l untouched).
 * The caller owns l (a live block it holds, or a mapping out of the cache). */
static hak_large_t *large_grow_mapping(hak_large_t *l, size_t map_size, size_t used)
{
  size_t old_size = l->map_size;
  if (hak_os_grow_in_place(l, old_size, map_size)) {
    if (hak_map_set_range((char *)l + old_size, map_size - old_size, large_region_tag_base(l))) {
      hak_gcount(&hak_gstats.mapped_bytes, map_size - old_size);
      l->map_size = map_size;
      large_hugepage(l, old_size, used);
      return l;
    }
    (void)hak_os_grow_in_place(l, map_size, old_size);  /* shrinking in place cannot fail */
    return NULL;
  }
  size_t off = (size_t)((char *)l->user - (char *)l), dirty = l->dirty;
  hak_large_t *n = hak_os_map_aligned(map_size, HAK_SS_SIZE);
  if (n == NULL) return NULL;
  /* Create the registry's leaves now (tag 0: not yet ours), so publishing
   * after the move cannot fail. */
  if (!hak_map_set_range(n, map_size, 0) || !hak_os_move(l, old_size, n)) {
    hak_os_unmap(n, map_size);
    return NULL;
  }
  hak_gcount(&hak_gstats.mapped_bytes, map_size);
  /* From here on l reads as zero: only n is used. */
  n->map_base = n;
  n->map_size = map_size;
  n->user = (char *)n + off;
  n->dirty = dirty;
  large_hugepage(n, 0, used);
  hak_map_set_range(n, map_size, large_region_tag_base(n));
  /* The old range now reads as zero (its header's magic is gone, so a racing
   * stray free of the old address is caught); it leaves the registry and is
   * unmapped after a grace period.  Its retire record lives in its first
   * page. */
  hak_large_t *old = l;
  hak_map_clear_range(old, old_size);
  hak_retire(&old->retired, old, old_size);
  return n;
}

/* ----------------------------------------------------------------- alloc */

/* Count blocks and bytes in the heap's counters, or in the totals for a
 * thread without a live heap. */
static void count_large(hak_heap_t *h, bool alloc, uint64_t blocks, size_t bytes)
{
  if (!hak_opt.stats) return;
  if (h->state == HAK_HEAP_LIVE) {
    hak_count(alloc ? &h->stats.large_allocs : &h->stats.large_frees, blocks);
    hak_count(alloc ? &h->stats.large_bytes_alloc : &h->stats.large_bytes_free, bytes);
  } else {
    hak_gcount(alloc ? &hak_gstats.allocs : &hak_gstats.frees, blocks);
    hak_gcount(alloc ? &hak_gstats.live_bytes_in : &hak_gstats.live_bytes_out, bytes);
    if (alloc) hak_gcount(&hak_gstats.large_allocs, blocks);
  }
}

/* A mapping of at least need bytes: from the cache (grown if needed), or
 * fresh.  NULL on ENOMEM. */
static hak_large_t *large_map(size_t need, size_t map_align)
{
  size_t map_size = hak_align_up(need, HAK_SS_SIZE);
  if (map_align <= HAK_SS_SIZE) {
    hak_large_t *l = cache_take(need);
    if (l != NULL && l->map_size < map_size) {
      hak_large_t *g = large_grow_mapping(l, map_size, need);
      if (g == NULL) large_retire(l);
      l = g;
    }
    if (l != NULL) return l;
  }
  hak_large_t *l = hak_os_map_aligned(map_size, map_align);
  if (l == NULL) return NULL;
  large_hugepage(l, 0, need);  /* before the header's write faults the first page in */
  l->map_base = l;
  l->map_size = map_size;
  l->dirty = 0;
  hak_gcount(&hak_gstats.mapped_bytes, map_size);
  if (!hak_map_set_range(l, map_size, large_region_tag_base(l))) {
    hak_os_unmap(l, map_size);
    atomic_fetch_sub_explicit(&hak_gstats.mapped_bytes, map_size, memory_order_relaxed);
    return NULL;
  }
  return l;
}

void *hak_large_alloc(hak_heap_t *h, size_t size, size_t align, bool zero)
{
  hak_init();  /* a thread's first call may be a large one: options first */
  if (align < HAK_MIN_ALIGN) align = HAK_MIN_ALIGN;
  size_t off = hak_align_up(sizeof(hak_large_t), align);
  if (size > HAK_MAX_ALLOC || off > HAK_MAX_ALLOC - size) { errno = ENOMEM; return NULL; }
  /* A zero-byte block still gets a byte inside the mapping: with an
   * alignment of 2 MiB or more, off is the whole first part of the mapping,
   * and user == base + map_size would lie outside it (not registered: its
   * free went to the system allocator; found by fuzz/fuzz_api). */
  size_t need = off + (size ? size : 1);
  hak_large_t *l = large_map(need, align > HAK_SS_SIZE ? align : HAK_SS_SIZE);
  if (l == NULL) { errno = ENOMEM; return NULL; }
  l->magic = HAK_LARGE_MAGIC;
  l->owner_tag = h->tag;
  l->user = (char *)l + off;
  l->usable = hak_align_up(need, HAK_PAGE_SIZE) - off;
  size_t end = off + l->usable;
  /* A reused mapping may hold dirty pages past this block's end.  Faulting
   * pages back costs more than keeping a few, so they stay unless they
   * exceed both 1 MiB and the block's own size (then a large block never
   * holds more than twice its size plus 1 MiB). */
  if (l->dirty > end && l->dirty - end > ((size_t)1 << 20) && l->dirty - end > l->usable)
    large_purge_from(l, end);
  if (zero && l->dirty > off) memset(l->user, 0, (l->dirty < end ? l->dirty : end) - off);
  if (l->dirty < end) l->dirty = end;  /* the holder may write all of it */
  /* release: a reader that finds the block live sees its header written */
  atomic_store_explicit(&l->live, 1, memory_order_release);
  count_large(h, true, 1, l->usable);
  /* The live total moves only here and in free (by the same amount), not on
   * every realloc: a realloc loop must not write a shared line per call. */
  l->live_counted = l->usable;
  atomic_fetch_add_explicit(&large_live_bytes, l->live_counted, memory_order_relaxed);
  hak_large_decay();
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

/* Free the large block p (the caller holds the RCU read lock).  Returns a
 * mapping the caller must retire once it has left the read-side section (p's
 * own, or one the cache gave up for it), or NULL. */
hak_large_t *hak_large_free(hak_heap_t *h, hak_large_t *l, void *p)
{
  uint32_t one = 1;
  /* acq_rel: exactly one free wins; a second one is a double free. */
  if (!atomic_compare_exchange_strong_explicit(&l->live, &one, 0, memory_order_acq_rel, memory_order_relaxed))
    hak_fatal("free(): double free of a large block", p);
  count_large(h, false, 1, l->usable);
  atomic_fetch_sub_explicit(&large_live_bytes, l->live_counted, memory_order_relaxed);
  if (h->tag != l->owner_tag && hak_opt.stats) {  /* freed by a thread that did not allocate it */
    if (h->state == HAK_HEAP_LIVE) hak_count(&h->stats.remote_frees, 1);
    else hak_gcount(&hak_gstats.remote_frees, 1);
  }
  size_t cached = atomic_load_explicit(&cache_bytes, memory_order_relaxed);
  size_t bound = atomic_load_explicit(&large_live_bytes, memory_order_relaxed) / 2;
  if (bound < hak_opt.large_cache / 4) bound = hak_opt.large_cache / 4;
  if (bound > hak_opt.large_cache) bound = hak_opt.large_cache;
  if (cached + l->dirty > bound) cache_make_room(bound > l->dirty ? bound - l->dirty : 0);
  if (atomic_load_explicit(&cache_bytes, memory_order_relaxed) + l->dirty > bound) {
    /* Still over the bound: cache it as address space only (its pages go
     * back now).  It stays registered with its header saying free, so a
     * second free of it is still caught as a double free, and a later
     * allocation saves the mmap, the munmap and the grace period. */
    if (l->map_size > CACHE_MAP_MAX) return l;
    large_purge_from(l, 0);
  }
  uint64_t now = hak_os_now_ms();
  bool dirty = l->dirty > HAK_PAGE_SIZE;
  l->freed_ms = now;
  /* All slots full: the mapping in a slot taken in turn makes room (the
   * caller retires it), so the most recently freed mappings stay cached. */
  hak_large_t *evicted = NULL;
  while (!cache_put_slot(l)) {
    if (evicted != NULL) return l;  /* contended: retire l itself */
    static _Atomic(unsigned) evict_next;
    unsigned i = atomic_fetch_add_explicit(&evict_next, 1, memory_order_relaxed) % CACHE_SLOTS;
    evicted = cache_take_slot(i);
    if (evicted == NULL) evicted = l;  /* raced: at most one more try */
  }
  /* l may already be another thread's: only the values read before. */
  uint64_t none = 0;
  if (dirty)
    atomic_compare_exchange_strong_explicit(&cache_oldest_ms, &none, now, memory_order_relaxed,
                                            memory_order_relaxed);
  return evicted == l ? NULL : evicted;
}

void hak_large_retire(hak_large_t *l)
{
  large_retire(l);
  hak_large_decay();
}

/* Resize in place within the mapping, or grow the mapping without copying. */
void *hak_large_resize(hak_heap_t *h, hak_large_t *l, size_t size)
{
  size_t off = (size_t)((char *)l->user - (char *)l);
  if (size > HAK_MAX_ALLOC - off) return NULL;
  if (off + size > l->map_size) {
    /* Grow by at least a quarter, so a loop of small reallocs moves rarely. */
    size_t want = off + size + (size >> 2);
    size_t map_size = hak_align_up(want, HAK_SS_SIZE);
    hak_large_t *n = large_grow_mapping(l, map_size, off + size);
    if (n == NULL) return NULL;
    l = n;
  }
  size_t usable = hak_align_up(off + size, HAK_PAGE_SIZE) - off;
  if (usable > l->usable) {
    count_large(h, true, 0, usable - l->usable);
  } else if (usable < l->usable) {
    count_large(h, false, 0, l->usable - usable);
    large_purge_from(l, off + usable);  /* give the tail back */
  }
  l->usable = usable;
  if (l->dirty < off + usable) l->dirty = off + usable;
  return l->user;
}
