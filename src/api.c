/* The hak_* API: dispatch by size (size class or large mapping) and by owner
 * (this thread's heap, another heap, a large mapping, or the system
 * allocator), and each function's contract.
 *
 * Safety of a pointer we do not own: the registry lookup names the region;
 * before we read its memory we enter an RCU read-side section and look again,
 * so the region cannot be unmapped under us even if the pointer is bad (a
 * double free racing with the owner's release).  A pointer in a SuperSlab
 * this heap owns needs no such care: only this thread can release it. */
#include <errno.h>
#include <string.h>

#include "internal.h"

/* ------------------------------------------------------------------ malloc */

static HAK_NOINLINE void *malloc_large(size_t n)
{
  if (n > HAK_MAX_ALLOC) { errno = ENOMEM; return NULL; }
  return hak_large_alloc(hak_tls_heap, n, HAK_MIN_ALIGN, false, false);
}

/* hak_malloc's fast path serves n below it: every class without a trailer
 * (HAK_UNTRAILED_MAX + 1) once initialised, 0 before (the first malloc
 * initialises), in secure mode and with statistics (internal.h,
 * hak_fast_on). */
size_t hak_fast_limit = 0;

/* A block of the trailed class c for n bytes, its trailer written
 * (trailer.c); counted. */
static void *trailed_alloc(size_t c, size_t n)
{
  void *p = hak_trailer_set(hak_heap_alloc(hak_tls_heap, c), n, c);
  /* The thread's heap after the allocation, as hak_heap_alloc counts. */
  if (HAK_UNLIKELY(hak_opt.stats) && p != NULL) hak_stats_count_trail(hak_tls_heap, hak_class_size[c] - n, false);
  return p;
}

/* A block of a size class for n <= HAK_SMALL_REQ_MAX bytes (counted),
 * with a trailer if its class has one. */
static void *small_alloc(size_t n)
{
  size_t c = hak_size_class(n);
  if (!hak_class_trailed(c)) return hak_heap_alloc(hak_tls_heap, c);
  return trailed_alloc((size_t)hak_trailed_class(n, HAK_MIN_ALIGN), n);
}

/* Free of the slab block p of s with the fast paths off: its trailer
 * checked (not in secure mode, which checks its own) and counted. */
static void trailer_free_checked(hak_heap_t *h, hak_slab_t *s, const void *p)
{
  size_t n = hak_trailer_check(p, s->cls);
  if (hak_opt.stats) hak_stats_count_trail(h, s->block_size - n, true);
}

/* Sizes from the trailed classes up, and every size while the fast paths
 * are off: a size class, a secure block, or a large block. */
HAK_NOINLINE void *hak_malloc_medium(size_t n)
{
  /* The process's first malloc comes here too (the fast limit starts at 0). */
  if (HAK_UNLIKELY(hak_secure_mode())) return hak_secure_alloc(hak_tls_heap, n, HAK_MIN_ALIGN, false);
  if (HAK_LIKELY(n <= HAK_SMALL_REQ_MAX)) return small_alloc(n);
  return malloc_large(n);
}

void *hak_malloc(size_t n) { return hak_malloc_inline(n); }

/* -------------------------------------------------------------------- free */

static inline void count_on(hak_counter_t *c)  /* hak_count, statistics known on */
{
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* A free of a block of another heap's slab (owner: the slab's carver), with
 * statistics on. */
static void count_free_remote(hak_heap_t *h, size_t cls, uint32_t owner)
{
  if (h->state == HAK_HEAP_LIVE) {
    count_on(&h->stats.frees[cls]);
    count_on(&h->stats.remote_frees);
  } else {
    hak_gcount(&hak_gstats.folded.frees[cls], 1);
    hak_gcount(&hak_gstats.folded.remote_frees, 1);
  }
  if (hak_opt.stats >= 2) hak_stats_count_remote(h, owner);
}

static void free_foreign(hak_heap_t *h, void *p)
{
  if (p == NULL || hak_boot_owns(p)) return;
  if (h->state == HAK_HEAP_LIVE) hak_count(&h->stats.foreign_frees, 1);
  else if (hak_opt.stats) hak_gcount(&hak_gstats.folded.foreign_frees, 1);
  hak_sys_free(p);
}

/* free_remote's cases off its common path: a bad pointer, secure mode,
 * statistics, a thread without a live heap, a trailed block. */
static HAK_NOINLINE void free_remote_checked(hak_heap_t *h, hak_superslab_t *ss, hak_slab_t *s, void *p)
{
  if (!hak_slab_is_block_remote(s, p) || hak_block_is_free((hak_block_t *)p)) hak_free_invalid(p, false);
  if (HAK_UNLIKELY(hak_opt.secure)) hak_secure_free(s, p, false);
  else if (hak_class_trailed(s->cls)) trailer_free_checked(h, s, p);
  /* Counted before the push: then the owner may reuse the slab. */
  if (HAK_UNLIKELY(hak_opt.stats)) count_free_remote(h, s->cls, s->owner_id);
  if (h->state == HAK_HEAP_LIVE) hak_remote_defer(h, s, (hak_block_t *)p);
  else hak_remote_free(ss, s, (hak_block_t *)p);
}

/* The end of free_remote for a validated block b of class c: this thread's
 * cache while it has room below the base bound and the thread allocates
 * the class itself, else held back for the owner (see free_remote). */
static inline void free_remote_keep(hak_heap_t *h, hak_slab_t *s, hak_block_t *b, size_t c)
{
  if (h->tcache_room[c] > h->tcache_grown[c] && h->cur[c] != &hak_slab_empty) {
    (void)hak_tcache_push(h, c, b);
    return;
  }
  hak_remote_defer(h, s, b);
}

/* free_remote of a block of a class above 1 KiB (one range test on the
 * common path).  A trailed block (never thread-cached: its class is above
 * HAK_TCACHE_BYTES) has its trailer checked.  A transfer-cache block
 * (xfer.c) goes to the transfer cache first, where any thread's malloc of
 * the class finds it, before this thread's cache and the owner's slab
 * (prototypes, bench/turnover at 16 threads: 24.3 -> 16.4 MiB peak RSS with
 * this order, 22.5 -> 21.3 MiB with the thread cache first). */
static HAK_NOINLINE void free_remote_big(hak_heap_t *h, hak_superslab_t *ss, hak_slab_t *s, hak_block_t *b, size_t c)
{
  if (hak_class_trailed(c)) {
    free_remote_checked(h, ss, s, b);
    return;
  }
  if (hak_xfer_put(c, b)) return;
  free_remote_keep(h, s, b, c);
}

/* A block of a SuperSlab another heap owns (or nobody: abandoned).  The
 * caller holds the RCU read lock, or p is in the SuperSlab that this heap's
 * pending frees pin (pend_key).  A thread that allocates the class keeps
 * the block in its thread cache while its cache has room: its next malloc of
 * the class gets the block it just freed, still in its CPU's cache, where
 * the block's owner would get it cold (bench/turnover, where nearly every
 * free is of another thread's block: 10.6 -> 16.2 M ops/s at 4 threads,
 * 7.9 -> 11.1 M at 16, medians of 5).  Else the free is held back
 * for its owner (hak_remote_defer).  Only below the class's base bound:
 * a grown cache (hak_tcache_overflow) that also held 256 blocks of other
 * heaps kept them from their slabs' owners (larson at 4 threads: 181 ->
 * 151 M ops/s).  Only tail calls: no registers to save. */
static inline void free_remote(hak_heap_t *h, void *p)
{
  hak_superslab_t *ss = hak_ss_of(p);
  hak_slab_t *s = hak_slab_of(ss, p);
  hak_block_t *b = (hak_block_t *)p;
  if (HAK_UNLIKELY(!hak_slab_is_block_remote(s, p) || hak_block_is_free(b) || !hak_fast_on() ||
                   h->state != HAK_HEAP_LIVE)) {
    free_remote_checked(h, ss, s, p);
    return;
  }
  size_t c = s->cls;
  /* Transfer-cache and trailed classes, out of line: this path stays tail
   * calls. */
  if (HAK_UNLIKELY(c - HAK_XFER_FIRST < HAK_NUM_SIZES - HAK_XFER_FIRST)) {
    free_remote_big(h, ss, s, b, c);
    return;
  }
  free_remote_keep(h, s, b, c);
}

/* A block of a SuperSlab this heap owns, with the fast paths off (secure
 * mode, statistics): hak_heap_free_local's checks first (only a block start
 * that is not free may be read), then the secure checks and the count. */
static void free_local_checked(hak_heap_t *h, void *p)
{
  hak_slab_t *s = hak_slab_of(hak_ss_of(p), p);
  if (!hak_slab_is_block(s, p) || hak_block_is_free((hak_block_t *)p)) hak_free_invalid(p, true);
  if (HAK_UNLIKELY(hak_opt.secure)) hak_secure_free(s, p, true);
  else if (hak_class_trailed(s->cls)) trailer_free_checked(h, s, p);
  hak_count(&h->stats.frees[s->cls], 1);
  hak_heap_push_block(h, s, (hak_block_t *)p);
}

/* A block of a SuperSlab this heap owns (the registry said so) that
 * owned[] did not prove.  With the fast paths on, its SuperSlab takes the
 * slot (evicting another owned one, which the registry still finds), so
 * the next free into it is fast again. */
static void free_local(hak_heap_t *h, void *p)
{
  if (HAK_UNLIKELY(!hak_fast_on())) {
    free_local_checked(h, p);
    return;
  }
  HAK_OWNED_SLOT(h, p) = hak_owned_key(p);
  hak_heap_free_local(h, p);
}

/* A block of the SuperSlab this heap's pending frees pin (pend_key): it
 * cannot be released, so neither the registry nor an RCU section is
 * needed.  Out of line, apart from hak_free_other, so that this common remote
 * path saves no registers. */
HAK_NOINLINE void hak_free_pinned(hak_heap_t *h, void *p) { free_remote(h, p); }

HAK_NOINLINE void hak_free_other(hak_heap_t *h, void *p)
{
  uintptr_t tag = hak_map_get(p);
  if (tag == h->tag) { free_local(h, p); return; }
  if (tag == 0) { free_foreign(h, p); return; }
  if (HAK_UNLIKELY(h->state == HAK_HEAP_EMPTY)) {
    h = hak_heap_thread_get(h, tag);
    /* Read again: the heap it got is ours now, so a tag naming it is not
     * stale (the first read may predate a give-up and the heap's reuse). */
    if (hak_map_get(p) == h->tag) {  /* a parked heap that owns p */
      free_local(h, p);
      return;
    }
  }
  hak_rcu_read_lock();
  tag = hak_map_get(p);
  if ((tag & HAK_TAG_KIND) == HAK_TAG_SS) {
    free_remote(h, p);
    hak_rcu_read_unlock();
    return;
  }
  if ((tag & HAK_TAG_KIND) == HAK_TAG_LARGE) {
    hak_large_t *l = hak_large_of(tag, p);
    if (l == NULL) hak_fatal("free(): invalid pointer into a large block", p);
    hak_large_t *retire = hak_large_free(h, l, p);
    hak_rcu_read_unlock();
    if (retire != NULL) hak_large_retire(retire);  /* outside the read section */
    return;
  }
  hak_rcu_read_unlock();
  free_foreign(h, p);  /* the region left the registry meanwhile */
}

void hak_free(void *p) { hak_free_inline(p); }

void hak_free_sized(void *p, size_t size) { (void)size; hak_free(p); }
void hak_free_aligned_sized(void *p, size_t alignment, size_t size)
{
  (void)alignment;
  (void)size;
  hak_free(p);
}

/* ------------------------------------------------------------- usable size */

/* Usable size of the slab block p of s: what secure mode's or the
 * default trailer records, else the block size. */
static size_t slab_usable(hak_slab_t *s, const void *p)
{
  if (HAK_UNLIKELY(hak_opt.secure)) return hak_secure_usable(s, p);
  return hak_class_trailed(s->cls) ? hak_trailer_size(p, s->cls) : s->block_size;
}

/* Usable size of a hakmem block (tag != 0); aborts on a pointer that is not a
 * block start.  Returns 0 if the region vanished (a freed block). */
static size_t usable_size(hak_heap_t *h, const void *p, uintptr_t tag)
{
  if (tag == h->tag) {
    hak_slab_t *s = hak_slab_of(hak_ss_of(p), p);
    if (!hak_slab_is_block(s, p)) hak_fatal("not a block start", p);
    return slab_usable(s, p);
  }
  size_t n = 0;
  hak_rcu_read_lock();
  tag = hak_map_get(p);
  if ((tag & HAK_TAG_KIND) == HAK_TAG_SS) {
    hak_slab_t *s = hak_slab_of(hak_ss_of(p), p);
    if (!hak_slab_is_block_remote(s, p)) hak_fatal("not a block start", p);
    n = slab_usable(s, p);
  } else if ((tag & HAK_TAG_KIND) == HAK_TAG_LARGE) {
    hak_large_t *l = hak_large_of(tag, p);
    if (l == NULL) hak_fatal("invalid pointer into a large block", p);
    n = l->usable;
  }
  hak_rcu_read_unlock();
  return n;
}

size_t hak_malloc_usable_size(const void *p)
{
  if (p == NULL) return 0;
  uintptr_t tag = hak_map_get(p);
  if (tag == 0) return hak_boot_owns(p) ? hak_boot_size(p) : hak_sys_usable_size((void *)p);
  return usable_size(hak_tls_heap, p, tag);
}

/* ----------------------------------------------------------------- realloc */

/* Resize the live large block p in place or by moving its pages (no copy);
 * its new address, or NULL.  The lookup runs in a read-side section; the
 * resize does not (it may retire the old range): the block is live and the
 * caller holds it, so it cannot go away meanwhile. */
static void *large_resize(hak_heap_t *h, void *p, size_t n)
{
  hak_rcu_read_lock();
  uintptr_t tag = hak_map_get(p);
  hak_large_t *l = (tag & HAK_TAG_KIND) == HAK_TAG_LARGE ? hak_large_of(tag, p) : NULL;
  bool live = l != NULL && atomic_load_explicit(&l->live, memory_order_acquire) == 1;
  hak_rcu_read_unlock();
  if (l != NULL && !live) hak_fatal("realloc(): pointer was freed", p);
  return l != NULL ? hak_large_resize(h, l, n) : NULL;
}

/* The size realloc gives a block of old bytes that must grow to n <=
 * HAK_SMALL_REQ_MAX: at least 3/8 more than old (rpmalloc's rule), so a buffer
 * that grows a little at a time moves every third class or so, not at
 * every class boundary (bench/strbuild appends 1..64 bytes a call), and
 * one that grows by more gets just n. */
static size_t realloc_grow_size(size_t old, size_t n)
{
  size_t want = old + old / 4 + old / 8;
  if (n >= want) return n;
  return want < HAK_SMALL_REQ_MAX ? want : HAK_SMALL_REQ_MAX;
}

/* realloc's move: a new block of n bytes (one with room to grow: large, or
 * a small block that grows), the first min(old, n) bytes copied, p freed;
 * NULL (p untouched) if none. */
static void *realloc_move(hak_heap_t *h, void *p, size_t old, size_t n)
{
  void *q;
  if (n > HAK_SMALL_REQ_MAX) q = n <= HAK_MAX_ALLOC ? hak_large_alloc(h, n, HAK_MIN_ALIGN, false, true) : hak_malloc(n);
  else q = hak_malloc(n > old ? realloc_grow_size(old, n) : n);
  if (q == NULL) return NULL;
  memcpy(q, p, old < n ? old : n);
  hak_free(p);
  return q;
}

/* realloc of the live block p of a trailed class (not in secure mode): its
 * trailer checked, then rewritten for n if the block still fits (with its
 * trailer) and wastes at most half, else moved. */
static HAK_NOINLINE void *realloc_trailed(hak_heap_t *h, hak_slab_t *s, void *p, size_t n)
{
  size_t bs = s->block_size, old = hak_trailer_check(p, s->cls);
  if (n > bs - HAK_TRAIL_ROOM || n < bs / 2) return realloc_move(h, p, old, n);
  if (HAK_UNLIKELY(hak_opt.stats)) {
    hak_stats_count_trail(h, bs - old, true);
    hak_stats_count_trail(h, bs - n, false);
  }
  return hak_trailer_set(p, n, s->cls);
}

/* realloc of a block of this heap's own, owned[] proved it (fast paths on). */
static void *realloc_local(hak_heap_t *h, void *p, size_t n)
{
  hak_slab_t *s = hak_slab_of(hak_ss_of(p), p);
  if (HAK_UNLIKELY(!hak_slab_is_block(s, p))) hak_fatal("realloc(): not a block start", p);
  if (HAK_UNLIKELY(hak_block_is_free((hak_block_t *)p))) hak_fatal("realloc(): pointer was freed", p);
  if (HAK_UNLIKELY(hak_class_trailed(s->cls))) return realloc_trailed(h, s, p, n);
  size_t old = s->block_size;
  if (n <= old && n >= old / 2) return p;  /* fits and wastes at most half */
  return realloc_move(h, p, old, n);
}

/* realloc of anything but a block owned[] proves this heap's. */
static HAK_NOINLINE void *realloc_other(hak_heap_t *h, void *p, size_t n)
{
  if (p == NULL) return hak_malloc(n);
  uintptr_t tag = hak_map_get(p);
  if (tag == 0 && !hak_boot_owns(p)) return hak_sys_realloc(p, n);
  if (n == 0) {
    hak_free(p);
    return NULL;
  }
  size_t old = tag == 0 ? hak_boot_size(p) : usable_size(h, p, tag);
  if (tag != 0 && old == 0) hak_fatal("realloc(): pointer was freed", p);
  if ((tag & HAK_TAG_KIND) == HAK_TAG_LARGE) {
    if (n > HAK_SMALL_REQ_MAX) {
      void *q = large_resize(h, p, n);
      if (q != NULL) return q;
    }
  } else if (tag != 0) {
    /* A live slab block: the caller holds it, so its slab stays. */
    hak_slab_t *s = hak_slab_of(hak_ss_of(p), p);
    if (hak_class_trailed(s->cls) && !hak_opt.secure) return realloc_trailed(h, s, p, n);
    if (n <= old && n >= old / 2) return p;  /* fits and wastes at most half */
  }
  return realloc_move(h, p, old, n);
}

/* glibc's semantics: realloc(NULL, n) is malloc(n); realloc(p, 0) frees p and
 * returns NULL; on failure p is untouched.  The general case is out of line,
 * so the common one (a block of this thread's that still fits) saves no
 * registers (it pushed six). */
void *hak_realloc(void *p, size_t n)
{
  hak_heap_t *h = hak_tls_heap;
  if (HAK_LIKELY(HAK_OWNED_SLOT(h, p) == hak_owned_key(p)) && n != 0) return realloc_local(h, p, n);
  return realloc_other(h, p, n);
}

void *hak_reallocarray(void *p, size_t n, size_t size)
{
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return hak_realloc(p, total);
}

/* ------------------------------------------------------------------ calloc */

void *hak_calloc(size_t n, size_t size)
{
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if (total > HAK_SMALL_REQ_MAX) {
    if (total > HAK_MAX_ALLOC) {
      errno = ENOMEM;
      return NULL;
    }
    return hak_large_alloc(hak_tls_heap, total, HAK_MIN_ALIGN, true, false);  /* zeroes only if reused */
  }
  if (HAK_UNLIKELY(hak_secure_mode())) return hak_secure_alloc(hak_tls_heap, total, HAK_MIN_ALIGN, true);
  void *p = small_alloc(total);
  if (p != NULL) memset(p, 0, total);
  return p;
}

/* ----------------------------------------------------------------- aligned */

/* align: a power of two.  Up to a page, a size class whose block size is a
 * multiple of align serves it (slabs start page-aligned, so every block of
 * such a class is aligned); beyond, a large mapping. */
static void *alloc_aligned(size_t align, size_t n)
{
  if (align <= HAK_MIN_ALIGN) return hak_malloc(n);
  if (n > HAK_MAX_ALLOC) {
    errno = ENOMEM;
    return NULL;
  }
  if (HAK_UNLIKELY(hak_secure_mode())) return hak_secure_alloc(hak_tls_heap, n, align, false);
  int c = hak_size_class_aligned(n, align);
  if (c >= 0 && !hak_class_trailed((size_t)c)) return hak_heap_alloc(hak_tls_heap, (size_t)c);
  if (c >= 0) c = hak_trailed_class(n, align);
  if (c >= 0) return trailed_alloc((size_t)c, n);
  return hak_large_alloc(hak_tls_heap, n, align, false, false);
}

static bool pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

int hak_posix_memalign(void **out, size_t alignment, size_t size)
{
  if (alignment < sizeof(void *) || !pow2(alignment)) return EINVAL;
  int saved = errno;
  void *p = alloc_aligned(alignment, size);
  if (p == NULL) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}

/* C11/C23: the alignment must be a power of two (EINVAL otherwise). */
void *hak_aligned_alloc(size_t alignment, size_t size)
{
  if (!pow2(alignment)) {
    errno = EINVAL;
    return NULL;
  }
  return alloc_aligned(alignment, size);
}

/* glibc's memalign: an alignment that is not a power of two is rounded up. */
void *hak_memalign(size_t alignment, size_t size)
{
  if (alignment > ((size_t)1 << (sizeof(size_t) * 8 - 1))) {
    errno = EINVAL;
    return NULL;
  }
  if (!pow2(alignment)) {
    size_t a = HAK_MIN_ALIGN;
    while (a < alignment) a <<= 1;
    alignment = a;
  }
  return alloc_aligned(alignment, size);
}

void *hak_valloc(size_t size) { return alloc_aligned(HAK_PAGE_SIZE, size); }

void *hak_pvalloc(size_t size)
{
  if (size > HAK_MAX_ALLOC) {
    errno = ENOMEM;
    return NULL;
  }
  size_t rounded = size == 0 ? HAK_PAGE_SIZE : hak_align_up(size, HAK_PAGE_SIZE);
  return alloc_aligned(HAK_PAGE_SIZE, rounded);
}

/* ---------------------------------------------------------------- collect */

void hak_collect(void)
{
  hak_heap_collect(hak_tls_heap, true);
  hak_large_trim();
}
