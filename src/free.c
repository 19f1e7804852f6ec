/* free: every kind of free (a block of this thread's heap, of another
 * heap, of a large mapping, of the system allocator) and the usable size.
 * Included by alloc.c, so that the exported entry points inline the fast
 * paths; never compiled alone.
 *
 * Safety of a pointer we do not own: the registry lookup names the region;
 * before we read its memory we enter an RCU read-side section and look again,
 * so the region cannot be unmapped under us even if the pointer is bad (a
 * double free racing with the owner's release).  A pointer in a SuperSlab
 * this heap owns needs no such care: only this thread can release it. */
#ifndef HAK_IN_ALLOC_C
#error "free.c is included by alloc.c"
#endif

/* A free whose pointer failed the block-start or double-free check (the
 * owner's limit is the carved capacity, another thread's the reservation). */
static _Noreturn HAK_COLD void free_invalid(const void *p, bool owner)
{
  hak_slab_t *s = hak_slab_at(p);
  /* A block start past the carved capacity is free too when its slab went
   * back to uncarved with every block free (hak_remote_collect): its
   * signature is still there. */
  if (!(owner ? hak_slab_is_block(s, p) : hak_slab_is_block_remote(s, p)) &&
      !(owner && hak_slab_is_block_remote(s, p) && hak_block_is_free((const hak_block_t *)p)))
    hak_fatal("free(): not a block start", p);
  hak_fatal("free(): double free", p);
}

/* Free of the slab block p of s with the fast paths off: its trailer
 * checked (not in secure mode, which checks its own) and counted. */
static void trailer_free_checked(hak_heap_t *h, hak_slab_t *s, const void *p)
{
  size_t n = hak_trailer_check(p, s->cls);
  if (hak_opt.stats) hak_stats_count_trail(h, s->block_size - n, true);
}

/* Free of a block in a SuperSlab this heap owns (the caller proved it:
 * owned[] or the registry), uncounted: onto the class's thread cache. */
static inline void free_local_fast(hak_heap_t *h, void *p)
{
  /* Only the SuperSlab header's entry for p's unit: no slab metadata. */
  const hak_unit_geom_t *g = hak_unit_geom_of(hak_ss_of(p), p);
  hak_block_t *b = (hak_block_t *)p;
  /* The block-start check comes first: only a block start may be read. */
  if (HAK_UNLIKELY(!hak_unit_is_block(g, p) || hak_block_is_free(b))) free_invalid(p, true);
  size_t c = g->tcls;
  if (HAK_UNLIKELY(hak_tcache_push(h, c, b) < 0)) hak_heap_overflow(h, c);
}

/* -------------------------------------------------------------------- free */

/* A free of a block of another heap's slab (owner: the slab's carver), with
 * statistics on. */
static void count_free_remote(hak_heap_t *h, size_t cls, uint32_t owner)
{
  HAK_COUNT(h, frees[cls], 1);
  HAK_COUNT(h, remote_frees, 1);
  if (hak_opt.stats >= 2) hak_stats_count_remote(h, owner);
}

static void free_foreign(hak_heap_t *h, void *p)
{
  if (p == NULL || hak_boot_owns(p)) return;
  HAK_COUNT(h, foreign_frees, 1);
  hak_sys_free(p);
}

/* free_remote's cases off its common path: a bad pointer, secure mode,
 * statistics, a thread without a live heap, a trailed block. */
static HAK_NOINLINE void free_remote_checked(hak_heap_t *h, hak_superslab_t *ss, hak_slab_t *s, void *p)
{
  if (!hak_slab_is_block_remote(s, p) || hak_block_is_free((hak_block_t *)p)) free_invalid(p, false);
  if (HAK_UNLIKELY(hak_opt.secure)) hak_secure_free(s, p, false);
  else if (hak_class_trailed(s->cls)) trailer_free_checked(h, s, p);
  /* Counted before the push: then the owner may reuse the slab. */
  if (HAK_UNLIKELY(hak_opt.stats)) count_free_remote(h, s->cls, s->owner_id);
  hak_heap_count_heir(h);
  if (h->state == HAK_HEAP_LIVE) hak_remote_defer(h, s, (hak_block_t *)p);
  else hak_remote_free(ss, s, (hak_block_t *)p);
}

/* The end of free_remote for a validated block b of class c: this thread's
 * cache while it is less than half full (hak_tcache_takes_foreign) and the
 * thread allocates the class itself, else held back for the owner (see
 * free_remote). */
static inline void free_remote_keep(hak_heap_t *h, hak_slab_t *s, hak_block_t *b, size_t c)
{
  if (hak_tcache_takes_foreign(h, c) && h->cur[c] != &hak_slab_sentinel) {
    (void)hak_tcache_push(h, c, b);
    return;
  }
  hak_remote_defer(h, s, b);
}

/* free_remote of a block of a class above 1 KiB (one range test on the
 * common path).  A trailed block (never thread-cached: its class is above
 * HAK_TCACHE_BYTES) has its trailer checked.  A transfer-cache block
 * (xfer.c) goes to the transfer cache first, where any thread's malloc of
 * the class finds it, before this thread's cache and the owner's slab:
 * in this order the blocks reach the next thread that needs the class
 * soonest, and peak RSS stays lowest (bench/results/history.md). */
static HAK_NOINLINE void free_remote_xfer_trailed(hak_heap_t *h, hak_superslab_t *ss, hak_slab_t *s, hak_block_t *b, size_t c)
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
 * the block in its thread cache while its cache is less than half full: its
 * next malloc of the class gets the block it just freed, still in its CPU's
 * cache, where the block's owner would get it cold (programs where nearly
 * every free is of another thread's block, like bench/turnover.c, gain
 * most).  Else the free is held back for its owner (hak_remote_defer).
 * Only below half the class's base bound: a grown cache
 * (hak_tcache_overflow) holding up to 256 blocks of other heaps would keep
 * them from their slabs' owners, which then carve fresh memory, and a full
 * one kept them circulating (tcache.h).  Only tail calls: no registers to
 * save. */
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
  hak_heap_count_heir(h);
  /* Transfer-cache and trailed classes, out of line: this path stays tail
   * calls. */
  if (HAK_UNLIKELY(c - HAK_XFER_FIRST < HAK_NUM_SIZES - HAK_XFER_FIRST)) {
    free_remote_xfer_trailed(h, ss, s, b, c);
    return;
  }
  free_remote_keep(h, s, b, c);
}

/* A block of a SuperSlab this heap owns, with the fast paths off (secure
 * mode, statistics): free_local_fast's checks first (only a block start
 * that is not free may be read), then the secure checks and the count. */
static void free_local_checked(hak_heap_t *h, void *p)
{
  hak_slab_t *s = hak_slab_at(p);
  if (!hak_slab_is_block(s, p) || hak_block_is_free((hak_block_t *)p)) free_invalid(p, true);
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
  hak_ss_owned_put(h, p);
  free_local_fast(h, p);
}

/* A block of the SuperSlab this heap's pending frees pin (pend_key): it
 * cannot be released, so neither the registry nor an RCU section is
 * needed.  Out of line, apart from hak_free_generic, so that this common remote
 * path saves no registers. */
HAK_NOINLINE void hak_free_pinned(hak_heap_t *h, void *p) { free_remote(h, p); }

/* Every free that owned[] and pend_key did not prove: the registry
 * decides.  This heap's own SuperSlab, another heap's or an abandoned one
 * (under the RCU read lock), a large mapping, or a pointer hakmem did not
 * hand out (the system allocator's).  A thread without a heap gets one
 * here. */
HAK_NOINLINE void hak_free_generic(hak_heap_t *h, void *p)
{
  uintptr_t tag = hak_map_get(p);
  if (tag == h->tag) { free_local(h, p); return; }
  if (tag == 0) { free_foreign(h, p); return; }
  if (HAK_UNLIKELY(tag == HAK_TAG_PROF)) {  /* a sampled block (alloc.c, prof_sampled): never unmapped */
    hak_prof_slot_free(p);
    return;
  }
  if (HAK_UNLIKELY(tag == h->heir_tag)) {  /* the heap this thread wanted (heap.c) */
    h = hak_heap_inherit(h);
    if (tag == h->tag) { free_local(h, p); return; }
  }
  if (HAK_UNLIKELY(h->state == HAK_HEAP_UNSTARTED)) {
    hak_init();
    if (!hak_init_recursing()) h = hak_heap_thread_get(h, tag);
    /* Read again: the heap it got is ours now, so a tag naming it is not
     * stale (the first read may predate a give-up and the heap's reuse). */
    if (hak_map_get(p) == h->tag) {  /* a parked heap that owns p */
      free_local(h, p);
      return;
    }
  }
  hak_rcu_read_lock();
  /* The lock's first use in a thread registers it, a call out of hakmem:
   * the purger may have taken h meanwhile (tprobe.c); the free then starts
   * again, from the placeholder's slow path. */
  if (HAK_UNLIKELY(hak_heap_self() != h)) {
    hak_rcu_read_unlock();
    hak_free(p);
    return;
  }
  tag = hak_map_get(p);
  if ((tag & HAK_TAG_KIND) == HAK_TAG_SS) {
    free_remote(h, p);
    hak_rcu_read_unlock();
    return;
  }
  if ((tag & HAK_TAG_KIND) == HAK_TAG_LARGE) {
    hak_large_t *l = hak_large_of(tag, p);
    if (l == NULL) hak_fatal("free(): invalid pointer into a large block", p);
    if (HAK_UNLIKELY(hak_opt.prof)) hak_prof_free(p);   /* a sampled block (alloc.c, prof_sampled)? */
    hak_large_t *retire = hak_large_free(h, l, p);
    hak_rcu_read_unlock();
    if (retire != NULL) hak_large_retire(retire);  /* outside the read section */
    return;
  }
  hak_rcu_read_unlock();
  free_foreign(h, p);  /* the region left the registry meanwhile */
}

/* free's fast path: a block of one of the SuperSlabs owned[] proves this
 * heap's needs no registry lookup (only this thread can release them).
 * Inline for the exported free, as hak_malloc_inline. */
static HAK_INLINE void hak_free_inline(void *p)
{
  hak_heap_t *h = hak_heap_self();
  uintptr_t k = hak_owned_key(p);
  if (HAK_LIKELY(HAK_OWNED_SLOT(h, p) == k)) {
    free_local_fast(h, p);
    return;
  }
  if (k == h->pend_key) {
    hak_free_pinned(h, p);
    return;
  }
  hak_free_generic(h, p);
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
    hak_slab_t *s = hak_slab_at(p);
    if (!hak_slab_is_block(s, p)) hak_fatal("not a block start", p);
    return slab_usable(s, p);
  }
  if (tag == HAK_TAG_PROF) return hak_prof_slot_usable(p);
  size_t n = 0;
  hak_rcu_read_lock();
  tag = hak_map_get(p);
  if ((tag & HAK_TAG_KIND) == HAK_TAG_SS) {
    hak_slab_t *s = hak_slab_at(p);
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

