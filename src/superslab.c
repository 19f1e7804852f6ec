/* SuperSlabs: map, carve into slabs, give slabs back, purge, release.
 * Every function here runs on the owner heap's thread (see types.h). */
#include <pthread.h>
#include <string.h>

#include "superslab.h"
#include "os.h"
#include "size_class.h"
#include "options.h"
#include "block.h"
#include "stats.h"
#include "registry.h"

/* Empty SuperSlabs waiting for reuse by any heap, still in the registry as
 * unowned (a stray free into one fails the block-start check).  Saves the
 * mmap/munmap pair and the RCU grace period of a release when a program's
 * footprint goes up and down, and, while a purger thread runs (purge.c),
 * the page faults too: a SuperSlab enters the cache with its free pages
 * committed and gives them back only once the cache has been idle for
 * hak_opt.cache_delay_ms (hak_ss_cache_decay, cache_active_ms), so the
 * threads of a program that exit and start again (a thread pool, rounds of
 * workers) reuse the pages their predecessors left instead of faulting
 * fresh ones.  Without the purger
 * nothing would age them, so a SuperSlab is purged as it enters.
 * Invariants: under cache_lock, the list runs newest (cache_new) to oldest
 * (cache_old) through prev/next, cached_ms falling from new to old; cache_count
 * mirrors the length (read without the lock only as a hint).  Taken from
 * the new end (the likeliest to still have pages), purged and unmapped
 * from the old end.  Clean entries beyond hak_opt.ss_cache go back
 * (unregistered, unmapped) once they have been cached for SS_CACHE_KEEP_MS. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_superslab_t *cache_new, *cache_old;     /* under cache_lock */
static _Atomic(uint32_t) cache_count;
/* Set while a purger thread runs (hak_ss_set_purger): empty SuperSlabs keep
 * their pages in the cache.  relaxed: a release that misses a change purges
 * at once or leaves the pages to the purger's next pass, both correct. */
static _Atomic(bool) cache_deferred;
/* SuperSlabs taken from the cache while no purger ran: each had its pages
 * given back as it entered, and its next slabs fault them in again (a
 * program whose threads exit and start, each needing more than the
 * SuperSlab its parked heap keeps).  relaxed: a count that only starts the
 * purger (hak_ss_cache_refaults). */
static _Atomic(uint32_t) cache_refaults;
#define SS_CACHE_KEEP_MS 1000
#define PURGE_SHIFT_MAX 3    /* aged sweeps at most 8 purge delays apart */
#define PURGE_CALM_SWEEPS 4  /* sweeps without a refault before the delay halves */
/* When a SuperSlab last entered or left the cache.  A cache in use is not
 * idle: its dirty entries wait until it has seen no put and no take for
 * hak_opt.cache_delay_ms, so a program whose threads exit and whose next
 * threads take the SuperSlabs back over seconds (rounds of workers)
 * refaults none of them, while one that goes idle gets them back after
 * that delay.  A dirty entry goes back after SS_CACHE_HORIZON_MS however
 * busy the cache.  relaxed: a time stamp, ordered by nothing. */
static _Atomic(uint64_t) cache_active_ms;
#define SS_CACHE_HORIZON_MS 10000

void hak_ss_before_fork(void) { pthread_mutex_lock(&cache_lock); }
void hak_ss_after_fork(bool child)
{
  if (child) {
    pthread_mutex_init(&cache_lock, NULL);
    atomic_store_explicit(&cache_deferred, false, memory_order_relaxed);  /* no purger in the child */
  } else {
    pthread_mutex_unlock(&cache_lock);
  }
}

void hak_ss_set_purger(bool on) { atomic_store_explicit(&cache_deferred, on, memory_order_relaxed); }
bool hak_ss_purger(void) { return atomic_load_explicit(&cache_deferred, memory_order_relaxed); }
uint32_t hak_ss_cache_refaults(void) { return atomic_load_explicit(&cache_refaults, memory_order_relaxed); }

/* Under cache_lock. */
static void cache_unlink(hak_superslab_t *ss)
{
  if (ss->prev) ss->prev->next = ss->next;
  else cache_new = ss->next;
  if (ss->next) ss->next->prev = ss->prev;
  else cache_old = ss->prev;
  ss->prev = ss->next = NULL;
  atomic_store_explicit(&cache_count, atomic_load_explicit(&cache_count, memory_order_relaxed) - 1,
                        memory_order_relaxed);
}

/* Under cache_lock: ss at the new end. */
static void cache_insert(hak_superslab_t *ss)
{
  ss->prev = NULL;
  ss->next = cache_new;
  if (cache_new) cache_new->prev = ss;
  else cache_old = ss;
  cache_new = ss;
  atomic_store_explicit(&cache_count, atomic_load_explicit(&cache_count, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

static inline uint32_t units_mask(unsigned first, unsigned span)
{
  return (uint32_t)((((uint64_t)1 << span) - 1) << first);
}

/* Where unit u's blocks may start: past the header in unit 0. */
static inline uint8_t *unit_start(hak_superslab_t *ss, unsigned u)
{
  return (uint8_t *)ss + (u == 0 ? HAK_SS_HEADER_SIZE : (size_t)u << HAK_UNIT_SHIFT);
}

/* The colour of h's next slab of class cls (size_class.h, hak_class_colored):
 * how far into its unit the first block starts, one cache line more than
 * the class's slab before (modulo the block size), so a heap's slabs of the
 * class cover every line of a page.  It costs a slab at most one block (a
 * 1 KiB slab holds 63 instead of 64).  A colour taken from the unit's index
 * instead covered far fewer lines: a heap's slabs of one class often sit a
 * fixed number of units apart. */
static size_t slab_color(hak_heap_t *h, size_t cls)
{
  if (!hak_class_colored(cls)) return 0;
  return (size_t)h->color[cls]++ * HAK_COLOR_ALIGN % hak_class_size[cls];
}

/* Where a slab of class cls at unit u starts: past the header in unit 0,
 * then a coloured class's colour.  A slab of an uncoloured class starts
 * aligned to its block size's largest power-of-two divisor, up to a unit
 * (unit 0's start, past the header, rounded up to it: no class has a block
 * fewer there, the header already takes one), so every block of a class
 * whose size is a multiple of an alignment up to 64 KiB has that alignment
 * (hak_size_class_aligned). */
static uint8_t *slab_start(hak_heap_t *h, hak_superslab_t *ss, unsigned u, size_t cls)
{
  uint8_t *p = unit_start(ss, u);
  if (hak_class_colored(cls)) return p + slab_color(h, cls);
  size_t a = (size_t)1 << __builtin_ctz(hak_class_size[cls]);
  return (uint8_t *)hak_align_up((uintptr_t)p, a < HAK_SLAB_ALIGN_MAX ? a : HAK_SLAB_ALIGN_MAX);
}

/* Field by field, no memset: the statistics' walk (stats_report.c) may be
 * loading used and stat_cls from another thread, so those are stored as the
 * atomics they are. */
static void slab_reset(hak_superslab_t *ss, unsigned u)
{
  hak_slab_t *s = &ss->slabs[u];
  s->free = s->rfree = NULL;
  s->prev = s->next = NULL;
  s->minv = s->remote_minv = 0;
  hak_slab_used_set(s, 0);
  s->capacity = s->reserved = s->block_size = s->owner_id = 0;
  s->shift = s->remote_shift = s->state = s->cls = s->fresh = 0;
  atomic_store_explicit(&s->stat_cls, 0, memory_order_relaxed);
  s->unit = (uint8_t)u;
  s->span = 1;
  s->start = s->remote_start = unit_start(ss, u);
  ss->unit_slab[u] = (uint16_t)((char *)s - (char *)ss);
  ss->unit_geom[u] = (hak_unit_geom_t){ 0 };
}

/* The heap's SuperSlab list keeps those with free units in front and the full
 * ones behind, so looking for room stops at the first full one. */
static void list_insert(hak_heap_t *h, hak_superslab_t *ss)
{
  if (ss->free_units != 0 || h->ss_list == NULL) {
    ss->prev = NULL;
    ss->next = h->ss_list;
    if (h->ss_list) h->ss_list->prev = ss;
    else h->ss_tail = ss;
    h->ss_list = ss;
  } else {
    ss->next = NULL;
    ss->prev = h->ss_tail;
    h->ss_tail->next = ss;
    h->ss_tail = ss;
  }
}

static void list_remove(hak_heap_t *h, hak_superslab_t *ss)
{
  if (ss->prev) ss->prev->next = ss->next;
  else h->ss_list = ss->next;
  if (ss->next) ss->next->prev = ss->prev;
  else h->ss_tail = ss->prev;
  ss->prev = ss->next = NULL;
}

/* A heap starts serving a thread: no SuperSlab. */
void hak_ss_heap_reset(hak_heap_t *h)
{
  for (size_t i = 0; i < HAK_OWNED_SLOTS; i++) h->owned[i] = HAK_OWNED_NONE;
  h->ss_list = h->ss_tail = NULL;
  h->unused_ss = h->dirty_units = 0;
  h->swept_ms = 0;
  h->purge_shift = h->purge_calm = 0;
  h->purge_regret = false;
}

void hak_ss_link(hak_heap_t *h, hak_superslab_t *ss)
{
  list_insert(h, ss);
  if (hak_fast_on()) HAK_OWNED_SLOT(h, ss) = hak_owned_key(ss);
  if (hak_ss_unused(ss)) h->unused_ss++;
  /* Its free pages get a full purge delay with the new owner (an adopter
   * adopted it to allocate: they are about to be reused, not purged and
   * refaulted). */
  ss->dirty_aged = ss->purged_units = 0;
  h->dirty_units += (uint32_t)hak_popcount64(ss->dirty_units);
}

void hak_ss_unlink(hak_heap_t *h, hak_superslab_t *ss)
{
  list_remove(h, ss);
  if (HAK_OWNED_SLOT(h, ss) == hak_owned_key(ss)) HAK_OWNED_SLOT(h, ss) = HAK_OWNED_NONE;
  if (hak_ss_unused(ss)) h->unused_ss--;
  h->dirty_units -= (uint32_t)hak_popcount64(ss->dirty_units);
}

/* The newest cached empty SuperSlab, off the cache, or NULL. */
static hak_superslab_t *cache_take(void)
{
  if (atomic_load_explicit(&cache_count, memory_order_relaxed) == 0) return NULL;
  pthread_mutex_lock(&cache_lock);
  hak_superslab_t *ss = cache_new;
  if (ss != NULL) cache_unlink(ss);
  pthread_mutex_unlock(&cache_lock);
  if (ss != NULL) atomic_store_explicit(&cache_active_ms, hak_os_now_ms(), memory_order_relaxed);
  return ss;
}

hak_superslab_t *hak_ss_create(hak_heap_t *h)
{
  hak_superslab_t *ss = cache_take();
  if (ss != NULL) {
    if (!hak_ss_purger()) atomic_fetch_add_explicit(&cache_refaults, 1, memory_order_relaxed);
    atomic_store_explicit(&ss->owner, h, memory_order_relaxed);
    hak_map_set_range(ss, HAK_SS_SIZE, h->tag);  /* the leaf exists: cannot fail */
    hak_ss_link(h, ss);
    return ss;
  }
  ss = hak_os_map_aligned(HAK_SS_SIZE, HAK_SS_SIZE);
  if (ss == NULL) return NULL;
  /* Fresh anonymous memory is zero: only the non-zero fields are written. */
  ss->magic = HAK_SS_MAGIC;
  atomic_store_explicit(&ss->owner, h, memory_order_relaxed);
  ss->free_units = HAK_ALL_UNITS;
  for (unsigned u = 0; u < HAK_UNITS; u++) slab_reset(ss, u);
  if (!hak_map_set_range(ss, HAK_SS_SIZE, h->tag)) {
    hak_os_unmap(ss, HAK_SS_SIZE);
    return NULL;
  }
  hak_ss_link(h, ss);
  hak_gcount(&hak_gstats.ss_mapped, 1);
  hak_gcount(&hak_gstats.mapped_bytes, HAK_SS_SIZE);
  return ss;
}

static int find_run(uint32_t free, unsigned span)
{
  for (unsigned u = 0; u + span <= HAK_UNITS; u++) {
    uint32_t m = units_mask(u, span);
    if ((free & m) == m) return (int)u;
  }
  return -1;
}

/* The inverse of odd x modulo 2^64 (Newton's iteration: each step doubles
 * the correct low bits; x is its own inverse modulo 8). */
static uint64_t mod_inverse(uint64_t x)
{
  uint64_t y = x;
  for (int i = 0; i < 5; i++) y *= 2 - x * y;
  return y;
}

/* A slab takes units m of ss that the heap's last aged sweep purged: they
 * fault in again, the sweep came too soon, and the next ones wait twice as
 * long (once per sweep; hak_ss_purge). */
static void purge_regret(hak_heap_t *h, hak_superslab_t *ss, uint32_t m)
{
  hak_gcount(&hak_gstats.refaulted_bytes, (size_t)hak_popcount64(ss->purged_units & m) * HAK_UNIT_SIZE);
  ss->purged_units &= ~m;
  if (!h->purge_regret && h->purge_shift < PURGE_SHIFT_MAX) h->purge_shift++;
  h->purge_regret = true;
  h->purge_calm = 0;
}

/* A new slab of class cls: from a SuperSlab in use if one has room, else from
 * an empty one the heap keeps, else (if may_map) from a cached or new one. */
hak_slab_t *hak_ss_alloc_slab(hak_heap_t *h, size_t cls, bool may_map)
{
  unsigned span = hak_class_span(cls);
  hak_superslab_t *pick = NULL;
  int unit = -1;
  /* Free units whose pages are still committed first: carving into them
   * costs no page fault (where threads come and go, faults on purged or
   * never-touched units are most of the page faults). */
  if (h->dirty_units != 0) {
    for (hak_superslab_t *ss = h->ss_list; ss != NULL && ss->free_units != 0; ss = ss->next) {
      int u = ss->dirty_units != 0 ? find_run(ss->free_units & ss->dirty_units, span) : -1;
      if (u < 0) continue;
      pick = ss;
      unit = u;
      break;
    }
  }
  for (hak_superslab_t *ss = h->ss_list; pick == NULL && ss != NULL && ss->free_units != 0; ss = ss->next) {
    int u = find_run(ss->free_units, span);
    if (u < 0) continue;
    pick = ss;
    unit = u;
    if (!hak_ss_unused(ss)) break;  /* prefer filling SuperSlabs in use */
  }
  if (pick == NULL) {
    if (!may_map) return NULL;
    pick = hak_ss_create(h);
    if (pick == NULL) return NULL;
    unit = 0;
  }
  hak_superslab_t *ss = pick;
  uint32_t m = units_mask((unsigned)unit, span);
  uint32_t dirty = ss->dirty_units & m;
  h->dirty_units -= (uint32_t)hak_popcount64(dirty);
  ss->dirty_units &= ~m;
  ss->dirty_aged &= ~m;
  if (HAK_UNLIKELY(ss->purged_units & m)) purge_regret(h, ss, m);
  if (hak_ss_unused(ss)) h->unused_ss--;
  ss->free_units &= ~m;
  if (ss->free_units == 0) {  /* now full: behind the others */
    list_remove(h, ss);
    list_insert(h, ss);
  }

  hak_slab_t *s = &ss->slabs[unit];
  uint32_t bs = hak_class_size[cls];
  uint8_t *end = (uint8_t *)ss + ((size_t)(unit + span) << HAK_UNIT_SHIFT);
  s->free = s->rfree = NULL;
  hak_slab_used_set(s, 0);
  s->fresh = dirty == 0;  /* none of its units committed: all zero */
  s->block_size = bs;
  s->shift = s->remote_shift = (uint8_t)__builtin_ctz(bs);
  s->minv = s->remote_minv = mod_inverse(bs >> s->shift);
  s->start = s->remote_start = slab_start(h, ss, (unsigned)unit, cls);
  s->reserved = (uint32_t)((size_t)(end - s->start) / bs);
  s->prev = s->next = NULL;
  s->cls = (uint8_t)cls;
  atomic_store_explicit(&s->stat_cls, (uint8_t)cls, memory_order_relaxed);  /* before used leaves 0 */
  s->state = HAK_SLAB_CUR;
  s->span = (uint8_t)span;
  s->owner_id = atomic_load_explicit(&h->id, memory_order_relaxed);
  hak_count(&h->stats.slabs[cls], 1);
  s->capacity = 0;
  hak_unit_geom_t g = { .minv = s->minv, .start = (uint32_t)(uintptr_t)s->start, .capacity = 0,
                        .shift = s->shift,
                        .tcls = hak_class_trailed(cls) ? HAK_TCLS_TRAILED : (uint8_t)cls };
  for (unsigned u = (unsigned)unit; u < (unsigned)unit + span; u++) {
    ss->unit_slab[u] = (uint16_t)((char *)s - (char *)ss);
    ss->unit_geom[u] = g;
  }
  /* No thread can reach a slab that holds no block: plain reset is enough,
   * but the head is atomic, so store it as one. */
  atomic_store_explicit(&ss->remote_heads[unit].head, HAK_RS_NORMAL, memory_order_relaxed);
  return s;
}

/* Carve the next page or so of never-used blocks onto the free list, so a
 * fresh slab only commits the memory it is actually using. */
bool hak_slab_extend(hak_slab_t *s)
{
  if (s->capacity >= s->reserved) return false;
  uint32_t bs = s->block_size;
  uint32_t n = bs >= HAK_PAGE_SIZE ? 1 : (uint32_t)(HAK_PAGE_SIZE / bs);
  if (n > s->reserved - s->capacity) n = s->reserved - s->capacity;
  uint8_t *first = s->start + (size_t)s->capacity * bs;
  if (HAK_UNLIKELY(hak_opt.secure)) memset(first, 0, (size_t)n * bs);  /* secure.c: free blocks are zero */
  hak_block_t *prev = s->free;
  for (uint32_t i = n; i-- > 0;) {
    hak_block_t *b = (hak_block_t *)(first + (size_t)i * bs);
    hak_block_set_next(b, prev);
    prev = b;
  }
  s->free = prev;
  hak_slab_set_capacity(s, s->capacity + n);
  return true;
}

void hak_slab_set_capacity(hak_slab_t *s, uint32_t capacity)
{
  hak_superslab_t *ss = hak_ss_of(s);
  s->capacity = capacity;
  for (unsigned u = s->unit; u < (unsigned)s->unit + s->span; u++) ss->unit_geom[u].capacity = (uint16_t)capacity;
}

/* Give an empty slab's units back to its SuperSlab.  The caller has taken
 * it out of every list; its remote stack is empty (used == 0). */
void hak_ss_free_slab(hak_heap_t *h, hak_slab_t *s)
{
  hak_superslab_t *ss = hak_ss_of(s);
  unsigned unit = s->unit, span = s->span;
  uint32_t m = units_mask(unit, span);
  hak_count(&h->stats.slabs[s->cls], (uint64_t)-1);  /* the heap's delta; sums stay exact */
  for (unsigned u = unit; u < unit + span; u++) slab_reset(ss, u);
  if (ss->free_units == 0) {  /* has room again: to the front */
    ss->free_units = m;
    list_remove(h, ss);
    list_insert(h, ss);
  }
  ss->free_units |= m;
  uint32_t newly_dirty = m & ~ss->dirty_units;
  ss->dirty_units |= m;
  h->dirty_units += (uint32_t)hak_popcount64(newly_dirty);
  if (hak_ss_unused(ss)) h->unused_ss++;
}

static void purge_units(hak_superslab_t *ss, uint32_t units);

/* Unregister ss (empty, owned by nobody else) and unmap it after a grace
 * period. */
static void ss_unmap(hak_superslab_t *ss)
{
  hak_map_clear_range(ss, HAK_SS_SIZE);
  hak_gcount(&hak_gstats.ss_unmapped, 1);
  hak_retire(&ss->retired, ss, HAK_SS_SIZE);
}

/* Take an empty ss out of the heap and into the cache (see cache_lock).
 * Its pages stay while a purger thread runs; otherwise they go back now,
 * and when the cache is full ss is unregistered and unmapped after a
 * grace period. */
void hak_ss_release(hak_heap_t *h, hak_superslab_t *ss)
{
  if (h != NULL) hak_ss_unlink(h, ss);
  bool deferred = atomic_load_explicit(&cache_deferred, memory_order_relaxed);
  if (!deferred && atomic_load_explicit(&cache_count, memory_order_relaxed) >= hak_opt.ss_cache) {
    ss_unmap(ss);
    return;
  }
  if (!deferred) purge_units(ss, ss->dirty_units);
  ss->dirty_aged = 0;
  atomic_store_explicit(&ss->owner, NULL, memory_order_relaxed);
  hak_map_set_range(ss, HAK_SS_SIZE, HAK_TAG_SS);
  bool dirty = ss->dirty_units != 0;  /* read now: once cached, ss is the cache's */
  pthread_mutex_lock(&cache_lock);
  ss->cached_ms = hak_os_now_ms();
  atomic_store_explicit(&cache_active_ms, ss->cached_ms, memory_order_relaxed);
  cache_insert(ss);
  pthread_mutex_unlock(&cache_lock);
  if (dirty) hak_os_bell_ring();  /* the purger's next pass has work */
}

#define CACHE_BATCH 16  /* SuperSlabs purged or unmapped per hold of cache_lock */

static inline uint64_t cache_keep_ms(void)
{
  return hak_opt.cache_delay_ms > SS_CACHE_KEEP_MS ? hak_opt.cache_delay_ms : SS_CACHE_KEEP_MS;
}

/* One batch of the cache's aging (see cache_lock), oldest entries first:
 * purge the dirty ones once the cache is idle (see cache_active_ms), unmap
 * clean ones beyond hak_opt.ss_cache cached for cache_keep_ms (force: all
 * of both).  Returns whether the batch was full (more may be due); lowers
 * *next_due to the time the next entry falls due (0: none is pending). */
static bool cache_decay_batch(uint64_t now, bool force, uint64_t *next_due)
{
  hak_superslab_t *gone[CACHE_BATCH];
  unsigned n_gone = 0, n_purged = 0;
  uint64_t delay = hak_opt.cache_delay_ms, keep = cache_keep_ms();
  uint64_t active = atomic_load_explicit(&cache_active_ms, memory_order_relaxed);
  pthread_mutex_lock(&cache_lock);
  hak_superslab_t *prev;
  for (hak_superslab_t *ss = cache_old; ss != NULL && n_gone < CACHE_BATCH && n_purged < CACHE_BATCH; ss = prev) {
    prev = ss->prev;
    uint64_t age = now > ss->cached_ms ? now - ss->cached_ms : 0;
    if (ss->dirty_units != 0) {
      uint64_t since = active > ss->cached_ms ? active : ss->cached_ms;  /* idle since */
      if (!force && (since >= now || now - since < delay) && age < SS_CACHE_HORIZON_MS) {
        /* Every newer entry is due later still, for either step. */
        uint64_t due = since + delay;
        if (due > ss->cached_ms + SS_CACHE_HORIZON_MS) due = ss->cached_ms + SS_CACHE_HORIZON_MS;
        if (*next_due == 0 || due < *next_due) *next_due = due;
        break;
      }
      purge_units(ss, ss->dirty_units);
      n_purged++;
    }
    if (atomic_load_explicit(&cache_count, memory_order_relaxed) <= hak_opt.ss_cache) continue;
    if (force || age >= keep) {
      cache_unlink(ss);
      gone[n_gone++] = ss;
    } else {
      uint64_t due = ss->cached_ms + keep;
      if (*next_due == 0 || due < *next_due) *next_due = due;
    }
  }
  pthread_mutex_unlock(&cache_lock);
  for (unsigned i = 0; i < n_gone; i++) ss_unmap(gone[i]);
  return n_gone == CACHE_BATCH || n_purged == CACHE_BATCH;
}

/* Age the cache (see cache_decay_batch); the time the next entry falls due,
 * or 0 if none is pending.  Run by the purger thread, and by collect with
 * force.  Outside any read-side section (unmapping may flush the retire
 * list). */
uint64_t hak_ss_cache_decay(bool force)
{
  uint64_t next_due = 0;
  while (cache_decay_batch(hak_os_now_ms(), force, &next_due)) {
  }
  if (force) hak_retire_flush();
  return next_due;
}

/* Give back the pages of `units`, free dirty units of ss. */
static void purge_units(hak_superslab_t *ss, uint32_t units)
{
  uint32_t d = units;
  while (d != 0) {
    unsigned first = (unsigned)__builtin_ctz(d), last = first;
    while (last + 1 < HAK_UNITS && (d >> (last + 1)) & 1) last++;
    uint8_t *from = unit_start(ss, first);
    uint8_t *to = (uint8_t *)ss + ((size_t)(last + 1) << HAK_UNIT_SHIFT);
    hak_os_purge(from, (size_t)(to - from));
    hak_gcount(&hak_gstats.purged_bytes, (size_t)(to - from));
    d &= ~units_mask(first, last - first + 1);
  }
  if (units != 0) hak_gcount(&hak_gstats.ss_purged, 1);
  ss->dirty_units &= ~units;
  ss->dirty_aged &= ~units;
}

/* Return the pages of free units to the OS with a decay, in sweeps at most
 * purge_delay_ms apart (a quarter of that while the heap holds more than
 * purge_threshold of them), times 2^purge_shift: a sweep gives back the
 * units that were free and dirty at the previous sweep and have not been
 * used since, so a unit goes back after one to two sweep delays of disuse;
 * all of them when forced.  A heap whose new slabs take units its last
 * sweep purged (purge_regret) faults them in again: its sweeps then wait
 * twice as long, up to 2^PURGE_SHIFT_MAX delays, and return to the purge
 * delay a step per PURGE_CALM_SWEEPS sweeps without such a refault.  So a
 * program whose threads reuse their free units every few delays keeps them
 * (mimalloc's thread-stress test at 4 threads: a quarter fewer page
 * faults, 7% faster), and one that does not returns them as before.
 * Pages freed a moment ago are likely to be reused by the next refill:
 * purging them costs a madvise (an IPI to every CPU running this process)
 * and a page fault per page soon after.  A unit's own age decides, not
 * its SuperSlab's last slab release: a SuperSlab whose slabs were released
 * now and then never reached the delay, and its idle units stayed
 * committed. */
void hak_ss_purge(hak_heap_t *h, bool force)
{
  if (h->dirty_units == 0) return;
  uint64_t now = hak_os_now_ms();
  bool over = (size_t)h->dirty_units * HAK_UNIT_SIZE > hak_opt.purge_threshold;
  uint64_t age = (over ? hak_opt.purge_delay_ms / 4 : hak_opt.purge_delay_ms) << h->purge_shift;
  if (!force && now - h->swept_ms < age) return;
  h->swept_ms = now;
  if (!force && !h->purge_regret && h->purge_shift > 0 && ++h->purge_calm >= PURGE_CALM_SWEEPS) {
    h->purge_shift--;
    h->purge_calm = 0;
  }
  h->purge_regret = false;
  for (hak_superslab_t *ss = h->ss_list; ss != NULL && ss->free_units != 0; ss = ss->next) {
    uint32_t idle = force ? ss->dirty_units : ss->dirty_units & ss->dirty_aged;
    if (idle != 0) {
      h->dirty_units -= (uint32_t)hak_popcount64(idle);
      purge_units(ss, idle);
    }
    ss->purged_units = force ? 0 : idle;
    ss->dirty_aged = ss->dirty_units;
  }
}
