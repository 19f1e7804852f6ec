/* The hak_* API: dispatch by size (size class or large mapping) and by owner
 * (this thread's heap, another heap, a large mapping, or the system
 * allocator), and each function's contract: malloc, calloc, realloc and the
 * aligned family here, every free in free.c (included here). */
#include <errno.h>
#include <string.h>

#include "os.h"
#include "boot.h"
#include "size_class.h"
#include "sys.h"
#include "options.h"
#include "block.h"
#include "stats.h"
#include "secure.h"
#include "trailer.h"
#include "registry.h"
#include "superslab.h"
#include "remote.h"
#include "xfer.h"
#include "large.h"
#include "partial.h"
#include "tcache.h"
#include "heap.h"
#include "purge.h"
#include "prof.h"
#include "prof_dump.h"
#include "init.h"
#include "hakmem.h"

#define HAK_IN_ALLOC_C
#include "free.c"

/* Is secure mode in force (secure.c)?  Outside secure mode with the fast
 * paths on, one load answers; otherwise initialise and ask. */
static inline bool hak_secure_mode(void)
{
  if (HAK_LIKELY(hak_fast_on())) return false;
  hak_init();
  return hak_opt.secure;
}

void *hak_malloc_generic(size_t n);

static void *alloc_large(hak_heap_t *h, size_t n, size_t align, bool zero, bool grow);

/* HAKMEM_PROF: a block of n bytes aligned to align to be sampled (the
 * countdown ran out), or NULL (then the caller allocates as usual).  A
 * sampled block of up to a page is a slot of the profiler's region
 * (prof.c), a larger one a large block: the free of either, by whichever
 * thread, misses owned[] and comes by hak_free_generic, where the profiler
 * takes it back, so the fast paths stay on while profiling. */
static HAK_NOINLINE void *prof_sampled(hak_heap_t *h, size_t n, size_t align, bool zero)
{
  h->prof_left = hak_prof_next_left();
  if (!hak_prof_active()) return NULL;
  void *p;
  if (n <= HAK_PAGE_SIZE && align <= HAK_PAGE_SIZE) {
    p = hak_prof_slot_alloc();
    if (p == NULL) return NULL;   /* every slot live: not sampled */
    if (zero || hak_opt.secure) memset(p, 0, n);
  } else {
    p = alloc_large(h, n, align < HAK_MIN_ALIGN ? HAK_MIN_ALIGN : align, zero || hak_opt.secure, false);
  }
  hak_prof_record(p, n);
  return p;
}

/* The countdown of a live heap on malloc's slow paths (a static placeholder
 * heap is never written); true: sample this allocation. */
static inline bool prof_due(hak_heap_t *h, size_t n)
{
  if (h->state != HAK_HEAP_LIVE) return false;
  h->prof_left -= hak_prof_units(n);
  return HAK_UNLIKELY(h->prof_left < 0);
}

/* malloc's fast path popped p for `units` 16-byte units (prof.h) and the
 * countdown ran out (hak_heap_pop_counted): p goes back and a sampled block
 * of that many bytes (the request rounded up to 16) comes instead. */
static HAK_NOINLINE __attribute__((returns_nonnull)) void *prof_sample_popped(hak_heap_t *h, void *p, size_t units)
{
  void *q = prof_sampled(h, units << 4, HAK_MIN_ALIGN, false);
  if (q == NULL) return p;
  hak_free(p);
  return q;
}

/* ------------------------------------------------------------------ malloc */

/* A pop that missed (heap.h, hak_heap_pop): a live heap refills.  A thread
 * without one gets its heap here, at its first malloc, once hakmem is
 * initialised (a malloc that recurses into the initialisation gets a block
 * of the bootstrap area); a thread whose heap was abandoned gets the block
 * from a heap of its own for just that block. */
static HAK_NOINLINE void *alloc_refill(hak_heap_t *h, size_t cls, size_t n)
{
  if (HAK_LIKELY(h->state == HAK_HEAP_LIVE)) {
    if (HAK_UNLIKELY(h->heir_tag != 0)) h = hak_heap_inherit(h);
    void *p = hak_heap_refill(h, cls);
    /* Here, with nothing of hakmem's held: pthread_create allocates. */
    hak_purge_maybe_start();
    if (HAK_UNLIKELY(prof_due(h, n)) && p != NULL) return prof_sample_popped(h, p, (size_t)hak_prof_units(n));
    return p;
  }
  if (h->state == HAK_HEAP_DEAD) return hak_heap_alloc_orphan(cls);
  hak_init();
  if (hak_init_recursing()) return hak_boot_alloc(hak_class_size[cls]);
  h = hak_heap_thread_start(NULL);
  if (h == NULL) { errno = ENOMEM; return NULL; }
  return hak_heap_get(h, cls);
}

/* The whole of a small malloc: one compare, a table lookup to the class (no
 * branch between small and medium sizes), then the pop.  Inline here so
 * that the exported malloc (preload.c) is this code, not a jump to
 * hak_malloc: the jump cost time and instructions on every pair
 * (bench/results/history.md). */
static HAK_INLINE void *hak_malloc_inline(size_t n)
{
  if (HAK_LIKELY(n < hak_fast_limit)) {
    hak_heap_t *h = hak_heap_self();
    size_t c = hak_fast_size_class(n);
    /* and the profiler's countdown, in its units (prof.h) */
    void *p = hak_heap_pop_counted(h, c, (size_t)hak_prof_units(n), prof_sample_popped);
    if (HAK_LIKELY(p != NULL)) return p;
    return alloc_refill(h, c, n);
  }
  return hak_malloc_generic(n);
}

/* HAKMEM_STATS: count block p of class cls, just allocated, on the calling
 * thread's heap (the heap the pop used may have been a temporary one). */
static void count_alloc(const void *p, size_t cls)
{
  if (hak_boot_owns(p)) return;  /* start-up memory: never counted, freed or not */
  HAK_COUNT(hak_tls_heap, allocs[cls], 1);  /* not live: a heap made for one block and abandoned */
}

/* A block of class cls for any caller but malloc's fast path: counted. */
static void *alloc_counted(hak_heap_t *h, size_t cls)
{
  void *p = hak_heap_pop(h, cls);
  if (p == NULL) p = alloc_refill(h, cls, 0);
  if (HAK_UNLIKELY(hak_opt.stats) && p != NULL) count_alloc(p, cls);
  return p;
}

/* A large block (large.c); a thread's first call may be a large one, so
 * hakmem is initialised first (the options decide the mapping).  A program
 * of large blocks alone starts the purger here (nothing of hakmem's is
 * held after the allocation), which gives back its idle pages when it
 * idles and lets the large caches keep what its recent peak needs. */
static void *alloc_large(hak_heap_t *h, size_t n, size_t align, bool zero, bool grow)
{
  hak_init();
  void *p = hak_large_alloc(h, n, align, zero, grow);
  hak_purge_maybe_start();
  return p;
}

static HAK_NOINLINE void *malloc_large(size_t n)
{
  if (n > HAK_MAX_ALLOC) { errno = ENOMEM; return NULL; }
  return alloc_large(hak_tls_heap, n, HAK_MIN_ALIGN, false, false);
}

/* A block of n bytes aligned to align in secure mode (secure.c): every
 * block is zeroed, with a trailer; large ones get their own mapping. */
static HAK_NOINLINE void *secure_alloc(size_t n, size_t align)
{
  int c = hak_secure_class(n, align);
  if (c < 0) return alloc_large(hak_tls_heap, n, align < HAK_MIN_ALIGN ? HAK_MIN_ALIGN : align, true, false);
  void *p = alloc_counted(hak_tls_heap, (size_t)c);
  return p != NULL ? hak_secure_prepare(p, n, (size_t)c) : NULL;
}

/* A block of the trailed class c for n bytes, its trailer written
 * (trailer.c); counted. */
static void *trailed_alloc(size_t c, size_t n)
{
  void *p = hak_trailer_set(alloc_counted(hak_tls_heap, c), n, c);
  /* The thread's heap after the allocation, as alloc_counted counts. */
  if (HAK_UNLIKELY(hak_opt.stats) && p != NULL) hak_stats_count_trail(hak_tls_heap, hak_class_size[c] - n, false);
  return p;
}

/* A block of a size class for n <= HAK_SMALL_REQ_MAX bytes (counted),
 * with a trailer if its class has one. */
static void *small_alloc(size_t n)
{
  size_t c = hak_size_class(n);
  if (!hak_class_trailed(c)) return alloc_counted(hak_tls_heap, c);
  return trailed_alloc((size_t)hak_trailed_class(n, HAK_MIN_ALIGN), n);
}

/* Sizes from the trailed classes up, and every size while the fast paths
 * are off: a size class, a secure block, or a large block. */
static inline void *malloc_generic(size_t n)
{
  /* The process's first malloc comes here too (the fast limit starts at 0). */
  if (HAK_UNLIKELY(hak_secure_mode())) return secure_alloc(n, HAK_MIN_ALIGN);
  if (HAK_LIKELY(n <= HAK_SMALL_REQ_MAX)) return small_alloc(n);
  return malloc_large(n);
}

HAK_NOINLINE void *hak_malloc_generic(size_t n)
{
  hak_heap_t *h = hak_tls_heap;
  if (n <= HAK_MAX_ALLOC && prof_due(h, n)) {
    void *q = prof_sampled(h, n, HAK_MIN_ALIGN, false);
    if (q != NULL) return q;
  }
  return malloc_generic(n);
}

void *hak_malloc(size_t n) { return hak_malloc_inline(n); }

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

/* realloc's move: a new block of n bytes, the first min(old, n) bytes
 * copied, p freed; NULL (p untouched) if none.  A small block that grows
 * gets room to grow, and so does a large one: a mapping of its own, which
 * later growth extends by mremap.  But a large block that outgrew its arena
 * run takes another run while the arenas serve n: their pages are
 * committed, so the copy is all the move costs, where a fresh mapping's
 * pages fault in too. */
static void *realloc_move(hak_heap_t *h, void *p, size_t old, size_t n)
{
  void *q;
  if (n > HAK_MAX_ALLOC) q = hak_malloc(n);  /* its ENOMEM */
  else if (n > HAK_SMALL_REQ_MAX)
    q = alloc_large(h, n, HAK_MIN_ALIGN, false, old <= HAK_SMALL_REQ_MAX || !hak_large_arena_serves(n));
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
  hak_slab_t *s = hak_slab_at(p);
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
  if (tag == HAK_TAG_PROF) return realloc_move(h, p, old, n);   /* the profiler's: a free and a malloc */
  if ((tag & HAK_TAG_KIND) == HAK_TAG_LARGE) {
    if (n > HAK_SMALL_REQ_MAX) {
      void *q = large_resize(h, p, n);
      if (q != NULL && HAK_UNLIKELY(hak_opt.prof)) {   /* for the profiler, a free and a malloc */
        hak_prof_free(p);
        if (prof_due(h, n)) {
          h->prof_left = hak_prof_next_left();
          hak_prof_record(q, n);
        }
      }
      if (q != NULL) return q;
    }
  } else if (tag != 0) {
    /* A live slab block: the caller holds it, so its slab stays. */
    hak_slab_t *s = hak_slab_at(p);
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

static void *calloc_any(size_t n, size_t size)
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
    return alloc_large(hak_tls_heap, total, HAK_MIN_ALIGN, true, false);  /* zeroes only if reused */
  }
  if (HAK_UNLIKELY(hak_secure_mode())) return secure_alloc(total, HAK_MIN_ALIGN);
  if (total < HAK_PAGE_SIZE) {
    void *p = small_alloc(total);
    if (p != NULL) memset(p, 0, total);
    return p;
  }
  /* A block the refill carves from a fresh slab is zero but for its link
   * and check words: the kernel zeroed its pages, and the first write to
   * them is the caller's (mstress: most of its page faults were calloc's
   * memset, which then wrote zeroes over zeroes). */
  hak_heap_fresh_block = NULL;
  void *p = small_alloc(total);
  if (p != NULL) memset(p, 0, p == hak_heap_fresh_block ? sizeof(hak_block_t) : total);
  return p;
}

void *hak_calloc(size_t n, size_t size)
{
  size_t total;
  hak_heap_t *h = hak_tls_heap;
  if (!__builtin_mul_overflow(n, size, &total) && total <= HAK_MAX_ALLOC && prof_due(h, total)) {
    void *q = prof_sampled(h, total, HAK_MIN_ALIGN, true);
    if (q != NULL) return q;
  }
  return calloc_any(n, size);
}

/* ----------------------------------------------------------------- aligned */

/* align: a power of two.  Up to a unit (64 KiB), a size class whose block
 * size is a multiple of align serves it (a slab of such a class starts so
 * aligned, superslab.c's slab_start, so every block of it is); beyond, or
 * for more than the largest class, a large mapping. */
static void *alloc_aligned_any(size_t align, size_t n)
{
  if (n > HAK_MAX_ALLOC) {
    errno = ENOMEM;
    return NULL;
  }
  if (HAK_UNLIKELY(hak_secure_mode())) return secure_alloc(n, align);
  int c = hak_size_class_aligned(n, align);
  if (c >= 0 && !hak_class_trailed((size_t)c)) return alloc_counted(hak_tls_heap, (size_t)c);
  if (c >= 0) c = hak_trailed_class(n, align);
  if (c >= 0) return trailed_alloc((size_t)c, n);
  return alloc_large(hak_tls_heap, n, align, false, false);
}

static void *alloc_aligned(size_t align, size_t n)
{
  if (align <= HAK_MIN_ALIGN) return hak_malloc(n);
  hak_heap_t *h = hak_tls_heap;
  if (n <= HAK_MAX_ALLOC && prof_due(h, n)) {
    void *q = prof_sampled(h, n, align, false);
    if (q != NULL) return q;
  }
  return alloc_aligned_any(align, n);
}

static bool pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

int hak_posix_memalign(void **out, size_t alignment, size_t size)
{
  if (alignment < sizeof(void *) || !pow2(alignment)) return EINVAL;
  void *p = alloc_aligned(alignment, size);
  if (p == NULL) {
    errno = ENOMEM;  /* POSIX asks only the return value; programs read errno, as with glibc */
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

/* ---------------------------------------------------------------- profiler */

/* Exported by the preload library too: a program run under it may call it. */
__attribute__((visibility("default"))) int hak_prof_dump(const char *path)
{
  hak_init();
  return hak_prof_write(path);
}

/* ---------------------------------------------------------------- collect */

void hak_collect(void)
{
  hak_heap_collect(hak_tls_heap, true);
  hak_large_trim();
}
