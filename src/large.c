/* Large blocks (beyond the largest size class, or aligned beyond a unit, 64 KiB):
 * each has its own mapping, aligned to 2 MiB and covering whole 2 MiB
 * regions, so the registry maps every region it covers to its header;
 * except, unless HAKMEM_LARGE_ARENA=0, while the cache is warm, blocks of
 * up to 8 MiB aligned to at most 2 MiB, which take runs of pages in the
 * page arenas (arena.c; "arena blocks" below: their layout and what they
 * trade).
 *
 * Layout of a mapping (E = map_size - GUARD):
 *   [0, PAGE)      the header (hak_large_t), always readable and writable;
 *   [PAGE, user)   a hole, never touched by the block's holder;
 *   user - 8       a canary word (canary.h, of address user), checked by free and
 *                  realloc: a buffer underflow of the block overwrites it;
 *   [user, E)      the block, placed so that it ends at E (a block that
 *                  realloc made starts at the bottom instead, with room to
 *                  grow above it: realloc will likely grow it again);
 *   [user + usable, E)  when the block's size is not a multiple of its
 *                  alignment, the bytes left before the guard (at most
 *                  TAIL_MAX, large_tail): canary bytes (canary.h), checked by free and
 *                  realloc, so an overflow of 1 to 15 bytes is caught
 *                  there (the guard catches the rest); malloc_usable_size
 *                  is then the size asked for;
 *   [E, map_size)  the guard region: PROT_NONE, so a buffer overflow faults
 *                  at its first byte past the block (the block is exact
 *                  when its size is a multiple of its alignment, 16).
 * With HAKMEM_SECURE=1, while a mapping is free (in the cache), [PAGE, E)
 * is PROT_NONE too, so a write or read after free faults instead of
 * reaching the next holder's data, and a reused block is zeroed even for
 * malloc (no old contents leak).  Protections change only when a mapping
 * enters or leaves the cache (two mprotect calls per reuse), never on a
 * live block.
 *
 * Default mode: the cache starts cold (cache_temp).  A freed mapping is
 * then discarded, not cached: its pages are purged and [PAGE, E) made
 * PROT_NONE at once (a write or read after free faults, whenever the unmap
 * comes), and it is never reused (a new block gets fresh pages: no old
 * contents); it stays reserved and registered, its header saying free,
 * until the next discard retires it (cold_held: a double free of it is
 * still reported).  The first large allocation after a discard turns the
 * cache warm: the program reuses large blocks, and from then on frees cache
 * as described below, unchecked, as glibc reuses large blocks once its mmap
 * threshold rose.  The cache turns cold again when a decay pass has purged
 * every entry (its pages went unused for the purge delay: going cold then
 * costs only system calls) and at hak_large_trim.  What cold costs: the
 * first reuse of each cold phase gets fresh pages instead of the freed
 * block's (one block's page faults).
 *
 * VMAs: [0, huge_from) normal pages, [huge_from, E) huge-page advised, the
 * guard; huge_from is 2 MiB, or E where a block of 2 MiB or more gets no
 * huge pages (big_huge).
 * mremap cannot take a range spanning VMAs, so growth works on the runs:
 * in place it extends the guard's VMA and opens its front part; a move
 * remaps each run to the new mapping.
 *
 * What makes big blocks fast is not touching fresh memory: every 4 KiB
 * page fault costs microseconds, so a fresh 16 MiB buffer costs 4096 faults
 * before the program writes a byte.  Hence:
 *  - Huge pages, with HAKMEM_HUGEPAGES=1 (large_huge_on; off by default,
 *    docs/tuning.md says why): the block area past the first 2 MiB region
 *    is advised MADV_HUGEPAGE, so one fault maps 2 MiB (the first region,
 *    which holds the header, keeps 4 KiB pages; a block of 2 MiB or more
 *    gets none until the program is seen writing such blocks whole,
 *    big_huge).  Purges never split a huge page (see large_region_floor):
 *    a split region faults 4 KiB at a time for good.
 *  - Fresh pages cost far more than reused ones: the kernel zeroes every
 *    new page, and a reused page is only written.  So a mapping is
 *    reused, and only the pages beyond what its next block needs (more
 *    than an eighth of that block, and more than SPARE_KEEP) go back.
 *  - A cache of freed mappings, once warm (CACHE_SLOTS slots; committed pages at most
 *    hak_opt.large_cache bytes, and above a quarter of that at most half
 *    the large bytes still live or what they leave of their recent peak,
 *    cache_bound; beyond that a mapping is cached as address
 *    space only): the next large allocation takes the
 *    best fit, or grows a smaller one by remapping (its pages are reused,
 *    only the extra is fresh).  Cached mappings stay registered (their
 *    header says free, so a stray free of one is caught).  An entry idle
 *    for longer than the purge delay (longer while allocations take from
 *    the cache: large_keep_ms) has its pages given back (hak_large_decay,
 *    run by large operations and by heap maintenance).
 *  - The fill probe (fill_score): where the program writes its large
 *    blocks whole, malloc commits the block's pages that hold nothing
 *    (with huge pages on, those of the first 2 MiB region, which has 4 KiB
 *    pages) with one system call (hak_os_populate); calloc never does,
 *    realloc's growth only for the first region.
 *  - calloc zeroes only the part of a reused mapping that may be dirty.
 *  - realloc grows in place, or moves the pages to a larger mapping by
 *    remapping page tables: nothing is copied.
 * A mapping that leaves the registry is unmapped after an RCU grace period
 * (registry.c's retire list), so a racing reader never touches unmapped
 * memory. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "large.h"
#include "arena.h"
#include "os.h"
#include "options.h"
#include "canary.h"
#include "stats.h"
#include "registry.h"
#include "superslab.h"

/* 128: a program that frees a few dozen big buffers and allocates them
 * again (a round of work) found 16 slots full and had the rest unmapped,
 * pages and all; 64 held 40 buffers of 16 MiB a round, 128 hold 100
 * (bench/results/history.md). */
#define CACHE_SLOTS 128
/* Cached mappings that hold no committed page (address space only) stay
 * only while the cache holds fewer mappings than this; else they are
 * unmapped: the slots are for pages a round of work reuses, and address
 * space is bounded as with 16 slots (RLIMIT_AS, stress_large's bound). */
#define CACHE_BARE_MAX 16
#define GUARD HAK_SS_SIZE     /* the last 2 MiB region of every large mapping */
#define CACHE_MAP_MAX ((size_t)1 << 30)  /* larger mappings are unmapped when freed */
#define SPARE_KEEP ((size_t)256 << 10)  /* spare pages a reused mapping keeps below its block */

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
/* Threads that take entries out of the cache to put them back (a decay
 * pass, cache_make_room), and how many such passes have begun:
 * hak_large_trim empties the slots again until no pass overlapped its
 * emptying, so an entry that was out meanwhile (and went back into a slot
 * already emptied) does not stay cached after it.  seq_cst, with
 * cache_take_slot's acq_rel exchange: a trim that found a slot already
 * taken sees the counts that the taker raised first. */
static _Atomic(uint32_t) cache_borrowers;
static _Atomic(uint64_t) cache_borrows;
/* Bytes of large blocks live in the process.  The cache keeps committed
 * pages up to a quarter of hak_opt.large_cache, and beyond that only up to
 * half of the live bytes or what they leave of their recent peak
 * (cache_bound): a program that frees its big buffers keeps the pages it
 * is likely to need again, and gives them back once they idle for the
 * purge delay, while one that keeps replacing big buffers reuses them.  relaxed:
 * a sizing heuristic, ordered by nothing.  With the number of them, they
 * are also mallinfo2's figures when the block counts are off
 * (hak_large_live).  They count kept runs (below) too. */
static struct large_counts {
  /* A line of their own: a large malloc and free that do not reuse a kept
   * run write them, and a line shared with what every large malloc reads
   * (the decay's times and sizes) cost each of two threads a miss a call. */
  _Alignas(HAK_CACHE_LINE) _Atomic(size_t) live_bytes;
  _Atomic(size_t) live_count;
} large_counts;
/* The most large bytes live at once lately: the peak since the last time
 * an allocation found the peak older than PEAK_WINDOW_MS (it then starts
 * again from the live bytes), or the one of the window before, whichever
 * is more (large_peak_prev: the window before, if it ended less than a
 * window ago), so the peak does not drop to the live bytes of the moment a
 * window ends (a round of work that freed its big blocks then had the
 * cache purged at its next allocation).  A program that frees its big blocks and
 * allocates them again (rounds of work, threads replaced) will need that
 * much again soon, so the cache may hold the freed pages up to the peak
 * (hak_large_free's bound): the live and the cached bytes together stay
 * within the peak, and the pages idle past the purge delay go back all the
 * same (hak_large_decay).  Written by allocations; relaxed: a sizing
 * heuristic. */
static _Atomic(size_t) large_peak_bytes;
static _Atomic(size_t) large_peak_prev;
static _Atomic(uint64_t) large_peak_ms;
#define PEAK_WINDOW_MS 1000
/* Mappings a free purged whole to stay within the bound while no purger
 * thread ran, which would have let the cache keep them up to the peak:
 * after PURGER_MIN_BOUND_PURGES of them the purger starts (purge.c), so a
 * program that frees and allocates a buffer above a quarter of
 * hak_opt.large_cache again and again stops faulting it in each time.
 * relaxed: a count that only starts the purger. */
static _Atomic(uint32_t) bound_purges;
uint32_t hak_large_bound_purges(void) { return atomic_load_explicit(&bound_purges, memory_order_relaxed); }

/* The cache's temperature (default mode only; in secure mode the cache is
 * always used, its mappings protected).  Cold: a freed mapping is not
 * cached but discarded (purged, block area PROT_NONE, unmapped later), so a
 * write or read after free faults and no later block can carry its data.
 * A large allocation after a discard means the program reuses large blocks:
 * the cache turns warm and frees cache as usual (glibc raises its mmap
 * threshold at the free of an mmapped chunk, in the same spirit).  It turns
 * cold again once idle: when a decay pass has given back the pages of every
 * entry (large_cool), or at hak_large_trim.  Transitions:
 *   COLD -> COLD_DISCARDED   a discard (hak_large_free)
 *   COLD_DISCARDED -> WARM   a large allocation (hak_large_alloc)
 *   WARM -> COLD             idle (hak_large_decay), or hak_large_trim
 * relaxed: a heuristic; a free that raced with a transition either caches
 * or discards, both are correct (see the top comment for what it costs). */
enum { LARGE_COLD, LARGE_COLD_DISCARDED, LARGE_WARM };
static _Atomic(uint32_t) cache_temp;
static _Atomic(uint64_t) cache_put_ms;    /* when a free last cached a mapping */
static _Atomic(uint64_t) cache_take_ms;   /* when an allocation last took one */
/* The last mapping discarded cold: kept reserved (purged, PROT_NONE, its
 * header registered and saying free) until the next discard or a trim, so
 * a double free of the block most recently freed is still reported however
 * big it was (retired at once, a mapping of 16 MiB or more would be
 * unmapped at once, and a second free would reach glibc's free). */
static _Atomic(hak_large_t *) cold_held;

static size_t large_region_tag_base(const hak_large_t *l)
{
  return (((uintptr_t)l >> HAK_SS_SHIFT) << 2) | HAK_TAG_LARGE;
}

/* The end of l's block area: the guard of its mapping, or its arena run's end. */
static inline size_t large_end(const hak_large_t *l)
{
  return l->arena_pages != 0 ? (size_t)l->arena_pages * HAK_PAGE_SIZE : l->map_size - GUARD;
}

/* Committed pages of the block area (an estimate from above: pages in
 * [dirty_from, dirty_to) may be committed, the others are not). */
static inline size_t large_committed(const hak_large_t *l)
{
  return l->dirty_to > l->dirty_from ? l->dirty_to - l->dirty_from : 0;
}

/* The block of l may touch its area up to offset to (past the first 2 MiB
 * region, a touch commits the whole huge page). */
static inline void large_dirty_upto(hak_large_t *l, size_t to)
{
  if (to > HAK_SS_SIZE) to = hak_align_up(to, HAK_SS_SIZE);
  if (to > l->dirty_to) l->dirty_to = to;
}

/* The most canary bytes after a fresh block (top comment). */
#define TAIL_MAX 64

/* The canary bytes of l: the bytes between its block and the guard when
 * there are at most TAIL_MAX (a fresh block whose size is not a multiple of
 * its alignment); otherwise none are left there (a fresh block that fills
 * its area) or a multiple of the page (a block realloc placed or resized:
 * its end is page-rounded), and it has none. */
static size_t large_tail(const hak_large_t *l)
{
  size_t rest = large_end(l) - (size_t)((const char *)l->user - (const char *)l) - l->usable;
  return rest <= TAIL_MAX ? rest : 0;
}

static void large_write_tail(hak_large_t *l) { hak_canary_fill((uint8_t *)l->user + l->usable, large_tail(l)); }

static void large_check_tail(const hak_large_t *l)
{
  if (HAK_UNLIKELY(!hak_canary_intact((const uint8_t *)l->user + l->usable, large_tail(l))))
    hak_fatal("free(): heap corruption: the bytes after a large block were overwritten (buffer overflow)",
              l->user);
}

/* free()/realloc() of a block whose canary word is gone: the program wrote
 * before the start of its block. */
static void large_check_canary(const hak_large_t *l)
{
  if (HAK_UNLIKELY(((const uintptr_t *)l->user)[-1] != hak_canary_word(l->user)))
    hak_fatal("free(): heap corruption: the bytes before a large block were overwritten (buffer underflow)",
              l->user);
}

/* The block area [PAGE, E) becomes inaccessible (free) or usable again.
 * Made usable again in secure mode only, and then without huge pages: with
 * transparent huge pages in the block area, protecting cached mappings on
 * Linux 6.18 let old data survive where the pages had been purged
 * (stress_large: calloc met non-zero bytes, about 1 run in 5; never without
 * THP or without the protection).  The cause is not understood; this
 * pairing avoids it.  A cold discard (default mode, huge pages) protects a
 * mapping that is never made usable again: it is only unmapped. */
static void large_protect(hak_large_t *l, bool access)
{
  hak_os_protect((char *)l + HAK_PAGE_SIZE, large_end(l) - HAK_PAGE_SIZE, access);
}

/* Unmap l after a grace period.  It stays in the registry, its header
 * saying free, until the retire list is flushed, so a second free of its
 * block in the meantime is still reported as a double free.  Outside any
 * read-side section (it may flush). */
static void large_retire(hak_large_t *l)
{
  hak_retire(&l->retired, l->map_base, l->map_size);
}

/* Whether large blocks get huge pages at all: HAKMEM_HUGEPAGES, never in
 * secure mode (see large_protect's note).  Without them huge_from is E on
 * every mapping, and large_fill commits a block's pages throughout. */
static inline bool large_huge_on(void) { return hak_opt.hugepages && !hak_opt.secure; }

/* Huge pages for the 2 MiB regions of [from, to) that l covers whole.
 * Returns whether [from, to) is advised: false with huge pages off or an
 * empty range, where the caller's huge_from is E. */
static bool large_hugepage(hak_large_t *l, size_t from, size_t to)
{
  if (!large_huge_on() || to <= from) return false;
  size_t r0 = hak_align_up(from, HAK_SS_SIZE), r1 = to & ~(HAK_SS_SIZE - 1);
  if (r1 > r0) hak_os_hugepage((char *)l + r0, r1 - r0);
  return true;
}

/* Huge pages past the first region of l, a mapping taken for a block of
 * 2 MiB or more, or none, as big_huge said, whatever a reused mapping had:
 * it was made (or grown: large_grow_mapping advises what it adds) for a
 * block of another phase of the program.  Pages it has committed stay as
 * they are. */
static void large_set_huge(hak_large_t *l, bool huge)
{
  size_t end = large_end(l);
  huge = huge && large_huge_on();
  if ((l->huge_from < end) == huge) return;
  if (huge) {
    large_hugepage(l, HAK_SS_SIZE, end);
    l->huge_from = HAK_SS_SIZE;
  } else {
    hak_os_hugepage_off((char *)l + l->huge_from, end - l->huge_from);
    l->huge_from = (uint32_t)end;
  }
}

/* The start of the unit of commitment holding offset x: its page in the
 * first 2 MiB region (normal pages), its 2 MiB region beyond (huge-page
 * advised: a touch commits the whole region).  Purges start and end on
 * these units: purging part of a huge page splits it, and every later
 * fault in its region is then a 4 KiB one, 512 where one would do. */
static inline size_t large_region_floor(size_t x)
{
  return x < HAK_SS_SIZE ? x & ~(HAK_PAGE_SIZE - 1) : x & ~(HAK_SS_SIZE - 1);
}

/* Give back l's committed pages below offset keep (rounded down to its
 * unit of commitment; the header page stays).  keep = E: every page of the
 * block area. */
static void large_purge_below(hak_large_t *l, size_t keep)
{
  size_t from = l->dirty_from & ~(HAK_PAGE_SIZE - 1);
  keep = large_region_floor(keep);
  if (keep <= from) return;
  hak_os_purge((char *)l + from, keep - from);
  l->dirty_from = keep;
  if (keep >= l->dirty_to) l->dirty_to = 0;  /* nothing left committed */
}

/* ------------------------------------------------------------------ cache */

/* Give back every committed page of a cached mapping (inaccessible in
 * secure mode: opened for the purge). */
static void large_purge_cached(hak_large_t *l)
{
  if (large_committed(l) == 0) return;
  if (hak_opt.secure) large_protect(l, true);
  large_purge_below(l, large_end(l));
  if (hak_opt.secure) large_protect(l, false);
}

/* A pass that takes entries out to put them back begins, and ends. */
static void borrow_begin(void)
{
  atomic_fetch_add(&cache_borrowers, 1);
  atomic_fetch_add(&cache_borrows, 1);
}

static void borrow_end(void) { atomic_fetch_sub(&cache_borrowers, 1); }

static hak_large_t *cache_take_slot(unsigned i)
{
  hak_large_t *l = atomic_exchange_explicit(&cache_slot[i], NULL, memory_order_acq_rel);
  if (l != NULL) {
    atomic_fetch_sub_explicit(&cache_bytes, large_committed(l), memory_order_relaxed);
    atomic_fetch_sub_explicit(&cache_count, 1, memory_order_relaxed);
  }
  return l;
}

/* Whether the cache keeps l, taken out of it or freed: not if it holds no
 * page while the cache holds CACHE_BARE_MAX mappings or more. */
static bool cache_keeps(const hak_large_t *l)
{
  return large_committed(l) != 0 || atomic_load_explicit(&cache_count, memory_order_relaxed) < CACHE_BARE_MAX;
}

/* Put a free mapping in an empty slot; false if none is empty. */
static bool cache_put_slot(hak_large_t *l)
{
  for (unsigned i = 0; i < CACHE_SLOTS; i++) {
    hak_large_t *empty = NULL;
    if (atomic_load_explicit(&cache_slot[i], memory_order_relaxed) != NULL) continue;
    atomic_store_explicit(&cache_slot_size[i], l->map_size, memory_order_relaxed);
    atomic_store_explicit(&cache_slot_dirty[i], large_committed(l), memory_order_relaxed);
    atomic_fetch_add_explicit(&cache_bytes, large_committed(l), memory_order_relaxed);
    atomic_fetch_add_explicit(&cache_count, 1, memory_order_relaxed);
    /* release: the header (dirty, freed_ms) is visible to the taker. */
    if (atomic_compare_exchange_strong_explicit(&cache_slot[i], &empty, l, memory_order_release,
                                                memory_order_relaxed))
      return true;
    atomic_fetch_sub_explicit(&cache_bytes, large_committed(l), memory_order_relaxed);
    atomic_fetch_sub_explicit(&cache_count, 1, memory_order_relaxed);
  }
  return false;
}

/* The cached mapping that best serves a block of need bytes of mapping:
 * the one whose committed pages cover most of the block (every page it
 * lacks is a page fault later; the block sits at the top of the area,
 * where the committed pages are, and a smaller mapping grows at the top,
 * so the fresh pages are need - committed either way); among equals one
 * that needs no growth, then the one with the fewest pages to spare (the
 * caller purges many spare pages), then the smallest.  Choosing the
 * smallest mapping that holds the block first (before) took a purged
 * mapping over a dirty one a little too small: a whole block of page
 * faults, and the dirty one purged later.  NULL if the cache is empty or
 * another thread took the mapping picked first. */
static hak_large_t *cache_take_once(size_t need)
{
  int pick = -1;
  size_t pick_fresh = SIZE_MAX, pick_spare = SIZE_MAX, pick_size = SIZE_MAX;
  bool pick_fits = false;
  /* No further than the cache's last entry (the count is advisory: an
   * entry put meanwhile may be missed, as if it came after the pick). */
  uint32_t left = atomic_load_explicit(&cache_count, memory_order_relaxed);
  for (unsigned i = 0; i < CACHE_SLOTS && left != 0; i++) {
    if (atomic_load_explicit(&cache_slot[i], memory_order_relaxed) == NULL) continue;
    left--;
    size_t sz = atomic_load_explicit(&cache_slot_size[i], memory_order_relaxed);
    size_t dirty = atomic_load_explicit(&cache_slot_dirty[i], memory_order_relaxed);
    size_t fresh = need > dirty ? need - dirty : 0, spare = dirty > need ? dirty - need : 0;
    bool fits = sz >= need;
    bool better = fresh != pick_fresh ? fresh < pick_fresh
                : fits != pick_fits   ? fits
                : spare != pick_spare ? spare < pick_spare
                                      : sz < pick_size;
    if (!better) continue;
    pick = (int)i;
    pick_fresh = fresh;
    pick_spare = spare;
    pick_size = sz;
    pick_fits = fits;
  }
  return pick >= 0 ? cache_take_slot((unsigned)pick) : NULL;
}

/* cache_take_once until it takes a mapping or the cache is empty: a slot
 * another thread emptied between the scan and the exchange is no reason
 * to map fresh pages (bench/realloc_grow.c at 2 threads mapped 63 new
 * mappings a second so, and faulted 20k pages where 7k do).  Each failed
 * try means another thread took a mapping, so the tries are bounded by the
 * slots. */
static hak_large_t *cache_take(size_t need)
{
  for (unsigned tries = 0; tries < CACHE_SLOTS; tries++) {
    if (atomic_load_explicit(&cache_count, memory_order_relaxed) == 0) return NULL;
    hak_large_t *l = cache_take_once(need);
    if (l != NULL) {
      atomic_store_explicit(&cache_take_ms, hak_os_now_ms(), memory_order_relaxed);
      return l;
    }
  }
  return NULL;
}

/* Purge cached mappings, oldest slots first, until the cache's committed
 * pages are at most target: the mapping being freed now is the likeliest to
 * be reused next, so it keeps its pages and older ones give theirs up. */
static void cache_make_room(size_t target)
{
  borrow_begin();
  for (unsigned n = 0; n < CACHE_SLOTS; n++) {
    if (atomic_load_explicit(&cache_bytes, memory_order_relaxed) <= target) break;
    static _Atomic(unsigned) purge_next;
    unsigned i = atomic_fetch_add_explicit(&purge_next, 1, memory_order_relaxed) % CACHE_SLOTS;
    if (atomic_load_explicit(&cache_slot[i], memory_order_relaxed) == NULL) continue;
    hak_large_t *c = cache_take_slot(i);
    if (c == NULL) continue;
    large_purge_cached(c);
    /* Every slot refilled meanwhile: c goes, unmapped at a later flush (we
     * may be inside a read-side section, where no grace period can run). */
    if (!cache_keeps(c) || !cache_put_slot(c)) (void)hak_retire_deferred(&c->retired, c->map_base, c->map_size);
  }
  borrow_end();
}

/* ------------------------------------------------------------------- bank */

/* The page bank: committed pages that a reused mapping has to spare, kept
 * for the next block that lacks some, instead of purged there and faulted
 * fresh here.  A program that replaces big buffers by ones of other sizes
 * reuses each freed mapping for the next block: when that block is
 * smaller, the pages below it are spare; when larger, the part the
 * mapping lacks is fresh.  With the bank the one feeds the other.  Pages
 * move by remapping page tables (hak_os_move: nothing is copied, a huge
 * page moves whole), one 2 MiB unit at a time, between the block area of
 * a mapping (its units past the first region) and a slot of the bank.
 * Every VMA boundary in a block area lies on a unit boundary (the first
 * region, the guard, growth and these moves all work in units), so a unit
 * never spans two VMAs, which mremap refuses.  Not in secure mode (its
 * protections work on whole mappings).
 *
 * The bank holds at most a quarter of the large bytes live and
 * hak_opt.large_cache (bank_room).  Its pages go back when it has seen no
 * deposit and no withdrawal for hak_opt.cache_delay_ms (hak_large_decay:
 * the purger thread or large operations; a step of a big-buffer program
 * that faults a buffer in can take longer than the purge delay).
 * Invariants: bank_base, bank_full under bank_lock; slot i
 * of the bank holds a deposited unit iff bit i of bank_full is set (other
 * slots read as zero: never used, withdrawn, or purged); bank_bytes
 * mirrors popcount(bank_full) units (read without the lock only as a
 * hint).  Operations try the lock and skip the bank when another thread
 * holds it (deposits purge instead, withdrawals take fresh pages), so no
 * fork handler is needed: a child forked while the lock was held never
 * uses its bank. */
#define BANK_SLOTS 64
#define BANK_UNIT HAK_SS_SIZE
static pthread_mutex_t bank_lock = PTHREAD_MUTEX_INITIALIZER;
static char *bank_base;                   /* BANK_SLOTS units, mapped at the first deposit */
static uint64_t bank_full;
static _Atomic(size_t) bank_bytes;
static _Atomic(uint64_t) bank_active_ms;  /* last deposit or withdrawal; relaxed, a time stamp */

static inline size_t unit_up(size_t x) { return hak_align_up(x, BANK_UNIT); }
static inline size_t unit_down(size_t x) { return x & ~(BANK_UNIT - 1); }

static bool bank_lock_try(void)
{
  return !hak_opt.secure && pthread_mutex_trylock(&bank_lock) == 0;
}

static void bank_unlock(bool moved)
{
  atomic_store_explicit(&bank_bytes, (size_t)hak_popcount64(bank_full) * BANK_UNIT, memory_order_relaxed);
  if (moved) atomic_store_explicit(&bank_active_ms, hak_os_now_ms(), memory_order_relaxed);
  pthread_mutex_unlock(&bank_lock);
}

/* The units the bank may hold: a quarter of the large bytes live (the
 * program's working set of big blocks), at most hak_opt.large_cache and
 * BANK_SLOTS.  Half of hak_opt.large_cache (before) filled at 2 threads of
 * bench/bigbuf: spare units then went back and the next blocks faulted
 * theirs fresh (bench/results/history.md). */
static size_t bank_room(void)
{
  size_t room = atomic_load_explicit(&large_counts.live_bytes, memory_order_relaxed) / 4;
  if (room > hak_opt.large_cache) room = hak_opt.large_cache;
  room /= BANK_UNIT;
  return room < BANK_SLOTS ? room : BANK_SLOTS;
}

/* Move the units [from, to) of l's block area (unit offsets past the first
 * region, pages committed or not) into the bank, from the bottom up, as
 * far as it has room; the offset up to which they went. */
static size_t bank_deposit(hak_large_t *l, size_t from, size_t to)
{
  if (to <= from || !bank_lock_try()) return from;
  if (bank_base == NULL) bank_base = hak_os_map_aligned((size_t)BANK_SLOTS * BANK_UNIT, BANK_UNIT);
  size_t room = bank_room(), at = from;
  while (bank_base != NULL && at < to && (size_t)hak_popcount64(bank_full) < room) {
    unsigned slot = (unsigned)__builtin_ctzll(~bank_full);
    if (!hak_os_move((char *)l + at, BANK_UNIT, bank_base + (size_t)slot * BANK_UNIT)) break;
    bank_full |= (uint64_t)1 << slot;
    at += BANK_UNIT;
  }
  bank_unlock(at != from);
  if (at != from) hak_os_bell_ring();  /* the purger gives them back if unused */
  return at;
}

/* Fill the units [from, to) of l's block area, which hold no committed
 * page, with banked pages, from the top down (next to the committed part
 * above); the lowest offset filled (to: none). */
static size_t bank_withdraw(hak_large_t *l, size_t from, size_t to)
{
  if (to <= from || atomic_load_explicit(&bank_bytes, memory_order_relaxed) == 0 || !bank_lock_try()) return to;
  size_t at = to;
  while (at > from && bank_full != 0) {
    unsigned slot = (unsigned)__builtin_ctzll(bank_full);
    if (!hak_os_move(bank_base + (size_t)slot * BANK_UNIT, BANK_UNIT, (char *)l + at - BANK_UNIT)) break;
    bank_full &= ~((uint64_t)1 << slot);
    at -= BANK_UNIT;
  }
  bank_unlock(at != to);
  return at;
}

/* Give the bank's pages back if it is idle for the purge delay (all if
 * force); when it is next due, 0 if it holds none. */
static uint64_t bank_decay(uint64_t now, bool force)
{
  if (atomic_load_explicit(&bank_bytes, memory_order_relaxed) == 0) return 0;
  uint64_t due = atomic_load_explicit(&bank_active_ms, memory_order_relaxed) + hak_opt.cache_delay_ms;
  if (!force && now < due) return due;
  if (!bank_lock_try()) return now + 1;
  if (bank_full != 0) hak_os_purge(bank_base, (size_t)BANK_SLOTS * BANK_UNIT);
  bank_full = 0;
  bank_unlock(false);
  return 0;
}

/* ------------------------------------------------------------- fill probe */

/* Whether the program writes its large blocks whole, which decides whether
 * malloc commits a block's fresh first-region pages at once (large_fill),
 * and whether blocks get huge pages (arena_huge, hak_large_alloc).  A
 * program that uses part of a big buffer must not get all of it committed,
 * so it is measured, on the blocks left to fault in 4 KiB at a time
 * (probes): at the free of one, its pages that were fresh at its allocation
 * [probe_from, probe_to) (a mapping's in its first region, an arena
 * block's first 2 MiB) are looked at (mincore, on their last
 * FILL_LOOK_PAGES: probe_look); at least 7/8 of them resident counts +1,
 * fewer -2 (the score stays within +-FILL_SCORE_MAX).
 * Two scores: one for blocks under 2 MiB, one for blocks of 2 MiB or more
 * (big_block), so a program's big tables used in part and its big buffers
 * written whole are told apart from its smaller blocks (bench/mstress
 * writes arrays of 800 KB in part and blocks of up to 5 MiB whole).
 * Blocks are committed (have huge pages) while their score is positive,
 * except every FILL_PROBE_EVERY-th (arena blocks: ARENA_PROBE_EVERY-th),
 * which stays a probe: committed pages would read as written.  A block
 * with fewer than FILL_PROBE_MIN fresh pages there is neither.  relaxed:
 * heuristics, ordered by nothing. */
#define FILL_SCORE_MAX 8
#define FILL_PROBE_EVERY 4
#define FILL_PROBE_MIN 16
#define FILL_LOOK_PAGES 64
static _Atomic(int) fill_score[2];  /* [big_block(usable)] */
static _Atomic(uint32_t) fill_count;

static inline bool big_block(size_t usable) { return usable >= HAK_SS_SIZE; }

static inline int score_of(bool big) { return atomic_load_explicit(&fill_score[big], memory_order_relaxed); }

/* Whether the next block counts as every FILL_PROBE_EVERY-th. */
static inline bool fill_turn(void)
{
  return atomic_fetch_add_explicit(&fill_count, 1, memory_order_relaxed) % FILL_PROBE_EVERY == 0;
}

/* Whether a block left to fault in (not committed) is a probe: yes, but
 * while the score is at its floor, only every FILL_PROBE_EVERY-th (the
 * others fault in as the program touches them, as a probe would, without
 * its two mincore calls: most of a malloc and free of a 16 MiB buffer
 * used in part); the first that finds its block written whole lifts the
 * score off the floor, and every block is a probe again. */
static inline bool probe_due(bool big) { return score_of(big) > -FILL_SCORE_MAX || fill_turn(); }

/* Look at a probe's pages [at, at + pages pages): at their last
 * FILL_LOOK_PAGES, which tell a block written whole from one used in part
 * as all of them would (a buffer filled from its start reaches them
 * last), at an eighth of the cost (mincore's is by the page: 1.7 us for
 * 2 MiB, two calls a malloc and free of a big buffer used in part, while
 * its score is not positive).  *resident of *looked pages; false if
 * mincore failed. */
static bool probe_look(const void *at, size_t pages, size_t *resident, size_t *looked)
{
  unsigned char vec[FILL_LOOK_PAGES];
  size_t n = pages < FILL_LOOK_PAGES ? pages : FILL_LOOK_PAGES;
  if (!hak_os_residency((const char *)at + (pages - n) * HAK_PAGE_SIZE, n * HAK_PAGE_SIZE, vec)) return false;
  *resident = hak_os_count_resident(vec, 0, n);
  *looked = n;
  return true;
}

/* The score moved by delta, within +-FILL_SCORE_MAX; returns it. */
static int score_add(bool big, int delta)
{
  int score = score_of(big) + delta;
  if (score > FILL_SCORE_MAX) score = FILL_SCORE_MAX;
  if (score < -FILL_SCORE_MAX) score = -FILL_SCORE_MAX;
  atomic_store_explicit(&fill_score[big], score, memory_order_relaxed);
  return score;
}

/* Blocks of 2 MiB or more get huge pages only where the program is seen
 * writing such blocks whole (their score above 0, big_huge).  Before
 * that, and where it writes them in part, the block keeps 4 KiB pages
 * throughout, as every other allocator's do, and its first 2 MiB are its
 * probe: a buffer used in part (a big table written sparsely, a 64 MiB
 * calloc touched once a MiB) holds what it touches, not a huge page per
 * region (eight 8 MiB blocks written once a MiB held 63.5 MB with huge
 * pages before any evidence, 0.4 MB under mimalloc, jemalloc, tcmalloc
 * and glibc).  The evidence comes from freed probes (large_fill_probe) and,
 * before there is any, from the thread's last big probe, still live
 * (tls_live_probe, large_live_evidence): a thread that allocates a big
 * buffer and writes it before its next gets huge pages from its second
 * buffer on.  The thread's own, not the process's last: threads that
 * start at once each found another's probe not yet written (bench/large at
 * 4 threads faulted twice as many pages as with huge pages at once). */
static __thread uintptr_t tls_live_probe;  /* its address | its pages - 1; 0: none */

/* l, a block of `usable` bytes, is a probe at offsets [from, to): set it,
 * and if it is big, this thread's next big allocation may look at it. */
static void large_probe_set(hak_large_t *l, size_t usable, size_t from, size_t to)
{
  l->probe_from = (uint32_t)from;
  l->probe_to = (uint32_t)to;
  if (big_block(usable)) tls_live_probe = ((uintptr_t)l + from) | ((to - from) / HAK_PAGE_SIZE - 1);
}

/* The big blocks' score, after, before any evidence (score 0), a look at
 * this thread's last big probe: if its pages were written (at least 7/8
 * resident), it counts as a block written whole, once.  Only that way: one
 * not written yet may be written later, and is looked at again.  The block
 * may be freed or unmapped meanwhile (mincore then fails, or reads another
 * mapping's pages: a heuristic, which the freed probes correct). */
static int large_live_evidence(void)
{
  int score = score_of(true);
  uintptr_t v = tls_live_probe;
  if (score != 0 || v == 0) return score;
  size_t pages = (v & (HAK_PAGE_SIZE - 1)) + 1, resident, looked;
  const void *at = (const void *)(v & ~(uintptr_t)(HAK_PAGE_SIZE - 1));
  if (!probe_look(at, pages, &resident, &looked) || resident * 8 < looked * 7) return score;
  tls_live_probe = 0;
  return score_add(true, 1);
}

/* Whether a block of 2 MiB or more gets huge pages (see large_probe_set): while
 * its score is above 0, after a look at the live evidence; else it is a
 * probe.  Once the score is positive, the evidence that the program went
 * on to write its big blocks in part comes from the blocks that start in
 * their mapping's first region (large_fill); probing the region where the
 * others start too (one in 16, a fresh mapping each) cost bench/bigbuf a
 * tenth more page faults, and bench/mstress at 4 threads a quarter more
 * where the probes left the arenas, whose regions may hold the huge pages
 * of the blocks before and cannot be probed. */
static bool big_huge(void) { return large_live_evidence() > 0; }

/* Commit the pages [from, to) of l's block area (page offsets) with one
 * call, at most hak_opt.large_cache bytes of them: the committed pages a
 * user lets hakmem hold beyond what the program wrote, which bounds what a
 * block the evidence misjudges (a huge buffer used in part, in a program
 * that writes its other blocks whole) holds before it is written. */
static void large_populate(hak_large_t *l, size_t from, size_t to)
{
  if (to - from > hak_opt.large_cache) to = from + (hak_opt.large_cache & ~(HAK_PAGE_SIZE - 1));
  if (to > from) hak_os_populate((char *)l + from, to - from);
}

/* The end of a probe over the pages [from, to): at most 2 MiB (what
 * large_fill_probe looks at), or 0 if fewer than FILL_PROBE_MIN pages. */
static size_t probe_end(size_t from, size_t to)
{
  if (to > from + HAK_SS_SIZE) to = from + HAK_SS_SIZE;
  return to < from + FILL_PROBE_MIN * HAK_PAGE_SIZE ? 0 : to;
}

/* A big block before evidence on a reused mapping whose first-region pages
 * an earlier block wrote (at least the watermark says so: l->dirty_from)
 * is a probe too: if fewer than 1/8 of the pages probe_look sees are
 * resident, at least 7/8 at its free then means this block wrote them;
 * if more, the last FILL_PROBE_MIN of them go back first (one madvise
 * call, and as many page faults if the block is written whole) and are
 * its probe, so that its free tells all the same.  Without it, a
 * program that used its big blocks in part and then writes them whole
 * reuses its cached mappings for them, whose dirty first regions could
 * not be probed: it found the evidence one fresh mapping at a time (with
 * 4 blocks of 12.5 MiB cached, one a round), and not at all once the
 * cache kept every mapping's pages.  While the score is positive, every
 * FILL_PROBE_EVERY-th such block is one (large_fill), as the blocks on
 * fresh pages are: else a program that went on to use its big blocks in
 * part, in mappings its whole writes had filled, never lowered it.  One
 * mincore call a block that is a probe. */
static void large_probe_reused(hak_large_t *l, size_t from, size_t end, size_t usable)
{
  size_t to = probe_end(from, (end < l->huge_from ? end : l->huge_from) & ~(HAK_PAGE_SIZE - 1));
  size_t resident, looked;
  if (to == 0 || !probe_look((const char *)l + from, (to - from) / HAK_PAGE_SIZE, &resident, &looked)) return;
  if (resident * 8 >= looked) {
    from = to - FILL_PROBE_MIN * HAK_PAGE_SIZE;
    hak_os_purge((char *)l + from, to - from);
    l->probe_wiped = 1;
  }
  large_probe_set(l, usable, from, to);
}

/* The block of l at [off, off + size) was just placed (l->usable set); its
 * pages below l->dirty_from that huge pages do not cover (huge_from) hold
 * nothing.  Commit them or make l a probe (malloc); commit those of the
 * first region always for realloc's move (grow), which copies the old
 * block in at once (only the copy is sure to be written: past it the block
 * faults as the program goes); neither in secure mode (which zeroes every
 * block it hands out). */
static void large_fill(hak_large_t *l, size_t off, size_t size, bool zero, bool grow)
{
  size_t usable = l->usable, from = off & ~(HAK_PAGE_SIZE - 1), to = l->dirty_from;
  size_t cap = grow ? HAK_SS_SIZE : l->huge_from;
  if (to > off + size) to = off + size;
  if (to > cap) to = cap;
  to &= ~(HAK_PAGE_SIZE - 1);
  l->probe_from = l->probe_to = l->probe_wiped = 0;
  if (hak_opt.secure) return;
  if (to < from + FILL_PROBE_MIN * HAK_PAGE_SIZE) {
    if (!zero && !grow && big_block(usable) && (score_of(true) <= 0 ? probe_due(true) : fill_turn()))
      large_probe_reused(l, from, off + usable, usable);
    return;
  }
  bool big = big_block(usable);
  if (grow || (!zero && score_of(big) > 0 && !fill_turn())) {
    large_populate(l, from, to);
    return;
  }
  /* A reused mapping's 4 KiB pages may reach further than a probe looks. */
  if (probe_due(big)) large_probe_set(l, usable, from, probe_end(from, to));
}

/* Whether the arena run of a block of `size` bytes gets huge pages (never
 * with them off, large_huge_on: a block that would get them is committed
 * then, arena_commit): a big block's as big_huge said (`huge_big`; a
 * probe, *probe, if not and its pages turn out clean); a smaller one's
 * while the score of such blocks says the program writes them whole, except every ARENA_PROBE_EVERY-th run, which
 * is a probe then too (a probe's region faults 4 KiB at a time for the
 * runs that share it too, so they are rarer than the mappings'). */
#define ARENA_PROBE_EVERY 16
static _Atomic(uint32_t) arena_count;

static bool arena_huge(size_t size, bool huge_big, bool *probe)
{
  if (big_block(size)) {
    *probe = !huge_big;
    return huge_big && large_huge_on();
  }
  *probe = score_of(false) <= 0 ||
           atomic_fetch_add_explicit(&arena_count, 1, memory_order_relaxed) % ARENA_PROBE_EVERY == 0;
  return !*probe && large_huge_on();
}

/* The arena block of l at [off, off + usable), on clean pages, is a probe:
 * its pages past the header's, up to 2 MiB. */
static void arena_probe(hak_large_t *l, size_t off, size_t usable)
{
  size_t from = hak_align_up(off, HAK_PAGE_SIZE), to = probe_end(from, (off + usable) & ~(HAK_PAGE_SIZE - 1));
  if (to != 0) large_probe_set(l, usable, from, to);
}

/* The arena block of l at [off, off + size), on clean pages, is not a probe
 * and gets no huge pages: the program writes such blocks whole, so commit
 * its pages with one system call instead of a fault per page (large_fill's
 * counterpart; clean pages only: a reused run's are mostly resident). */
static void arena_commit(hak_large_t *l, size_t off, size_t size)
{
  size_t from = hak_align_up(off, HAK_PAGE_SIZE), to = (off + size) & ~(HAK_PAGE_SIZE - 1);
  if (to >= from + FILL_PROBE_MIN * HAK_PAGE_SIZE) large_populate(l, from, to);
}

/* Zero [from, to) of l's block area, which may hold an earlier block's
 * data (calloc, secure mode).  Where the program uses its big blocks in
 * part (their score is not positive), the whole pages of a range of
 * ZERO_PURGE_MIN or more (a big block's) go back instead (one madvise, and a fault for
 * each page the program then touches): a cached mapping keeps its pages
 * for the next block, and a 16 MiB calloc written in two pages, freed and
 * allocated again, memset 16 MiB a round (0.64 ms; glibc, tcmalloc and
 * mimalloc do as much, jemalloc 7 us).  Not in secure mode, nor with
 * huge pages on, which a purge would split: memset. */
#define ZERO_PURGE_MIN HAK_SS_SIZE
static void large_zero(hak_large_t *l, size_t from, size_t to)
{
  size_t lo = hak_align_up(from, HAK_PAGE_SIZE), hi = to & ~(HAK_PAGE_SIZE - 1);
  if (hak_opt.secure || large_huge_on() || hi < lo + ZERO_PURGE_MIN || score_of(true) > 0) {
    memset((char *)l + from, 0, to - from);
    return;
  }
  memset((char *)l + from, 0, lo - from);
  hak_os_purge((char *)l + lo, hi - lo);
  memset((char *)l + hi, 0, to - hi);
}

/* The block of l is being freed: if it was a probe, score it; whether it
 * was a probe that the block used in part. */
static bool large_fill_probe(const hak_large_t *l)
{
  if (l->probe_to == l->probe_from) return false;
  size_t pages = (l->probe_to - l->probe_from) / HAK_PAGE_SIZE, resident, looked;
  if (pages > HAK_SS_SIZE / HAK_PAGE_SIZE) hak_fatal("large block: a fill probe spans more than 2 MiB", l->user);
  if (!probe_look((const char *)l + l->probe_from, pages, &resident, &looked)) return false;
  bool whole = resident * 8 >= looked * 7;
  (void)score_add(big_block(l->usable), whole ? 1 : -2);
  return !whole;
}

/* ------------------------------------------------------------ temperature */

/* Whether a free caches its mapping (see cache_temp). */
static inline bool large_warm(void)
{
  return hak_opt.secure || atomic_load_explicit(&cache_temp, memory_order_relaxed) == LARGE_WARM;
}

/* Warm to cold once the cache is idle: a decay pass gave back the pages of
 * every entry (hak_large_decay), and no mapping was cached since the purge
 * delay (a free that raced with the pass).  The cache's pages went unused
 * for the purge delay: reusing its mappings now would save only the mmap
 * and munmap calls, not a page fault, so going cold costs little.  A
 * program that keeps replacing large buffers reuses them before they are
 * due, or holds them live (nothing cached, nothing purged): it stays warm. */
static void large_cool(uint64_t now)
{
  if (atomic_load_explicit(&cache_temp, memory_order_relaxed) != LARGE_WARM) return;
  if (atomic_load_explicit(&cache_bytes, memory_order_relaxed) != 0) return;
  uint64_t put = atomic_load_explicit(&cache_put_ms, memory_order_relaxed);
  if (put > now || now - put < hak_opt.purge_delay_ms) return;
  uint32_t warm = LARGE_WARM;
  atomic_compare_exchange_strong_explicit(&cache_temp, &warm, LARGE_COLD, memory_order_relaxed,
                                          memory_order_relaxed);
}

/* A free in the cold phase: l's pages go back now (as an munmap would give
 * them), its block area becomes PROT_NONE (a write or read after free
 * faults at once), and it replaces cold_held.  Returns the mapping held
 * before (the caller retires it), or NULL.  l is never reused: see
 * large_protect's note. */
/* COLD -> COLD_DISCARDED (see cache_temp); false if the cache was not cold. */
static bool cache_note_discard(void)
{
  uint32_t cold = LARGE_COLD;
  return atomic_compare_exchange_strong_explicit(&cache_temp, &cold, LARGE_COLD_DISCARDED, memory_order_relaxed,
                                                 memory_order_relaxed);
}

static hak_large_t *large_discard(hak_large_t *l)
{
  large_purge_below(l, large_end(l));
  large_protect(l, false);
  (void)cache_note_discard();
  /* acq_rel: l's header (dirty_from) goes to the thread that takes it out;
   * the previous one's comes to us. */
  return atomic_exchange_explicit(&cold_held, l, memory_order_acq_rel);
}

/* How long a free large page keeps its memory (a cached mapping's, or a
 * page arena's): the purge delay; but while the program takes from where
 * it lies (taken_ms, within HAKMEM_CACHE_DELAY_MS) and a purger thread
 * runs, HAKMEM_CACHE_DELAY_MS, as the empty SuperSlabs' cache does.  A
 * round of work that frees its big buffers and allocates them again, one
 * at a time and each written whole, takes longer than the purge delay: the
 * buffers freed first had their pages given back before the allocations
 * reached them (40 buffers of 16 MiB: 110k page faults a round).  So does
 * a step of a program that writes a block of tens of MiB between two
 * takes: with "taken within the purge delay", bench/large.c's pages went
 * back between its steps and faulted in again (1.13x and 1.16x the time
 * at 2 and 4 threads, bench/results/history.md).  The bound on the cached
 * bytes holds all the same, and an idle program's pages go back a cache
 * delay after its last take (a purge delay of 0 keeps none). */
static uint64_t large_keep_ms(uint64_t now, uint64_t taken_ms)
{
  uint64_t keep = hak_opt.purge_delay_ms;
  if (hak_ss_purger() && keep != 0 && now - taken_ms < hak_opt.cache_delay_ms && hak_opt.cache_delay_ms > keep)
    keep = hak_opt.cache_delay_ms;
  return keep;
}

/* Give back the pages of cache entries freed more than large_keep_ms ago
 * (they stay cached, as address space only); the cache turns cold if no
 * entry keeps pages.  Cheap when nothing is due. */
void hak_large_decay(void)
{
  /* The arenas' free pages age on their own; their passes leave the
   * cache's temperature to the cached mappings. */
  if (hak_arena_idle_bytes() != 0) {
    uint64_t now = hak_os_now_ms();
    (void)hak_arena_decay(now, false, large_keep_ms(now, hak_arena_taken_ms()));
  }
  uint64_t oldest = atomic_load_explicit(&cache_oldest_ms, memory_order_relaxed);
  if (atomic_load_explicit(&bank_bytes, memory_order_relaxed) != 0) (void)bank_decay(hak_os_now_ms(), false);
  if (oldest == 0) return;
  uint64_t now = hak_os_now_ms();
  if (now - oldest < hak_opt.purge_delay_ms) return;
  if (!atomic_compare_exchange_strong_explicit(&cache_oldest_ms, &oldest, 0, memory_order_relaxed,
                                               memory_order_relaxed))
    return;  /* another thread does this pass */
  borrow_begin();
  uint64_t next = 0, keep = large_keep_ms(now, atomic_load_explicit(&cache_take_ms, memory_order_relaxed));
  bool purged = false;
  for (unsigned i = 0; i < CACHE_SLOTS; i++) {
    if (atomic_load_explicit(&cache_slot[i], memory_order_relaxed) == NULL) continue;
    hak_large_t *l = cache_take_slot(i);
    if (l == NULL) continue;
    if (large_committed(l) > 0) {
      if (now - l->freed_ms >= keep) {
        large_purge_cached(l);
        purged = true;
      } else {
        /* cache_oldest_ms is a free time: the pass falls due a purge
         * delay after it. */
        uint64_t at = l->freed_ms + keep - hak_opt.purge_delay_ms;
        if (next == 0 || at < next) next = at;
      }
    }
    if (!cache_keeps(l) || !cache_put_slot(l)) large_retire(l);
  }
  borrow_end();
  if (next != 0) {
    uint64_t none = 0;
    atomic_compare_exchange_strong_explicit(&cache_oldest_ms, &none, next, memory_order_relaxed,
                                            memory_order_relaxed);
  } else if (purged) {
    large_cool(now);
  }
}

/* Give every cached mapping back (hak_collect, malloc_trim); the cache
 * starts cold again, and the peak again from the live bytes. */
void hak_large_trim(void)
{
  atomic_store_explicit(&cache_temp, LARGE_COLD, memory_order_relaxed);
  atomic_store_explicit(&large_peak_bytes, atomic_load_explicit(&large_counts.live_bytes, memory_order_relaxed),
                        memory_order_relaxed);
  atomic_store_explicit(&large_peak_prev, 0, memory_order_relaxed);
  /* Again while a decay pass or cache_make_room overlapped the emptying:
   * it may have put an entry back into a slot already emptied.  Bounded:
   * other threads' frees may keep making room, and what they cache after
   * the trim began may stay. */
  for (int tries = 0; tries < 64; tries++) {
    while (atomic_load(&cache_borrowers) != 0) sched_yield();
    uint64_t begun = atomic_load(&cache_borrows);
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
      hak_large_t *l = cache_take_slot(i);
      if (l != NULL) large_retire(l);
    }
    if (atomic_load(&cache_borrowers) == 0 && atomic_load(&cache_borrows) == begun) break;
  }
  hak_large_t *held = atomic_exchange_explicit(&cold_held, NULL, memory_order_acq_rel);
  if (held != NULL) large_retire(held);
  (void)bank_decay(hak_os_now_ms(), true);
  (void)hak_arena_decay(hak_os_now_ms(), true, 0);
  hak_retire_flush();
}

/* ------------------------------------------------------------------ grow */

/* Grow l's mapping to map_size bytes without copying: in place when the
 * address space after it is free, else by moving its pages to a new aligned
 * mapping.  The block area keeps its offsets; [old E, new E) becomes block
 * area (huge-page advised), and the guard moves to the new end.  The
 * header at its (possibly new) address, or NULL (l untouched).  The caller
 * owns l (a live block it holds, or a mapping out of the cache, unprotected). */
static hak_large_t *large_grow_mapping(hak_large_t *l, size_t map_size)
{
  size_t old_size = l->map_size, old_end = large_end(l), end = map_size - GUARD;
  /* In place: the guard is the last VMA; extend it and open its front. */
  if (hak_os_grow_in_place((char *)l + old_end, GUARD, map_size - old_end)) {
    if (hak_map_set_range((char *)l + old_size, map_size - old_size, large_region_tag_base(l))) {
      hak_gcount(&hak_gstats.mapped_bytes, map_size - old_size);
      l->map_size = map_size;
      hak_os_protect((char *)l + old_end, end - old_end, true);
      if (!large_hugepage(l, old_end, end)) l->huge_from = (uint32_t)end;
      else if (l->huge_from > old_end) l->huge_from = (uint32_t)old_end;
      return l;
    }
    (void)hak_os_grow_in_place((char *)l + old_end, map_size - old_end, GUARD);  /* cannot fail */
    return NULL;
  }
  size_t off = (size_t)((char *)l->user - (char *)l);
  hak_large_t *n = hak_os_map_aligned(map_size, HAK_SS_SIZE);
  if (n == NULL) return NULL;
  /* Create the registry's leaves now (tag 0: not yet ours), so publishing
   * after the move cannot fail.  Then move the runs: [0, 2 MiB) and the
   * huge-page advised [2 MiB, E). */
  size_t run = old_end < HAK_SS_SIZE ? old_end : HAK_SS_SIZE;
  if (!hak_map_set_range(n, map_size, 0) || !hak_os_move(l, run, n)) {
    hak_os_unmap(n, map_size);
    return NULL;
  }
  /* The kernel may refuse the second run (it moved the first): copy it
   * then, so nothing has to be moved back (which could fail too). */
  if (old_end > run && !hak_os_move((char *)l + run, old_end - run, (char *)n + run)) {
    /* Units the bank moved in are VMAs of their own (see the bank): one
     * unit at a time then. */
    for (size_t at = run; at < old_end; at += BANK_UNIT)
      if (!hak_os_move((char *)l + at, BANK_UNIT, (char *)n + at)) memcpy((char *)n + at, (char *)l + at, BANK_UNIT);
  }
  hak_gcount(&hak_gstats.mapped_bytes, map_size);
  /* From here on l reads as zero: only n is used. */
  n->map_base = n;
  n->map_size = map_size;
  n->user = (char *)n + off;
  /* After a move the whole block area counts as dirty.  Keeping the old
   * dirty_from was wrong on Linux 6.18: in stress_large, about 1 run in 15
   * found old bytes below dirty_from in a calloc'ed block whose mapping had
   * been moved twice (purged in between); the exact kernel behaviour behind
   * it is not pinned down.  With this, 0 in 90 runs; the cost is that a
   * later calloc of this mapping zeroes pages that may already be zero. */
  n->dirty_from = HAK_PAGE_SIZE;
  ((uintptr_t *)n->user)[-1] = hak_canary_word(n->user);  /* the canary names the address */
  hak_os_protect((char *)n + end, GUARD, false);
  n->huge_from = large_hugepage(n, HAK_SS_SIZE, end) ? HAK_SS_SIZE : (uint32_t)end;
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
  if (alloc) {
    HAK_COUNT(h, large_allocs, blocks);
    HAK_COUNT(h, large_bytes_alloc, bytes);
  } else {
    HAK_COUNT(h, large_frees, blocks);
    HAK_COUNT(h, large_bytes_free, bytes);
  }
}

/* A mapping of map_size bytes or more: from the cache (grown if needed,
 * unprotected), or fresh, with huge pages for the 2 MiB regions of
 * [huge_from, huge_to) (offsets).  NULL on ENOMEM. */
static hak_large_t *large_map(size_t map_size, size_t map_align, size_t huge_from, size_t huge_to,
                              size_t *fresh_from)
{
  if (map_align <= HAK_SS_SIZE) {
    hak_large_t *l = cache_take(map_size);
    if (l != NULL) {
      if (hak_opt.secure) large_protect(l, true);
      *fresh_from = large_end(l);  /* grown: the new part holds no page */
      if (l->map_size < map_size) {
        hak_large_t *g = large_grow_mapping(l, map_size);
        if (g == NULL) large_retire(l);
        l = g;
      }
    }
    if (l != NULL) return l;
  }
  hak_large_t *l = hak_os_map_aligned(map_size, map_align);
  if (l == NULL) return NULL;
  size_t end = map_size - GUARD;
  l->huge_from = (uint32_t)(large_hugepage(l, huge_from, huge_to) ? huge_from : end);
  hak_os_protect((char *)l + end, GUARD, false);
  l->map_base = l;
  l->map_size = map_size;
  l->dirty_from = end;
  l->dirty_to = 0;
  *fresh_from = end;
  hak_gcount(&hak_gstats.mapped_bytes, map_size);
  if (!hak_map_set_range(l, map_size, large_region_tag_base(l))) {
    hak_os_unmap(l, map_size);
    atomic_fetch_sub_explicit(&hak_gstats.mapped_bytes, map_size, memory_order_relaxed);
    return NULL;
  }
  return l;
}

/* An allocation brought the live large bytes to live (see large_peak_bytes). */
static void large_note_peak(size_t live)
{
  uint64_t now = hak_os_now_ms();
  /* <=: a program at its peak (the same buffers replaced) writes no shared
   * line per allocation; its peak ages out of the window and starts again
   * from the live bytes. */
  uint64_t since = now - atomic_load_explicit(&large_peak_ms, memory_order_relaxed);
  size_t peak = atomic_load_explicit(&large_peak_bytes, memory_order_relaxed);
  if (since < PEAK_WINDOW_MS) {
    if (live > peak) atomic_store_explicit(&large_peak_bytes, live, memory_order_relaxed);
    return;
  }
  atomic_store_explicit(&large_peak_prev, since < 2 * PEAK_WINDOW_MS ? peak : live, memory_order_relaxed);
  atomic_store_explicit(&large_peak_bytes, live, memory_order_relaxed);
  atomic_store_explicit(&large_peak_ms, now, memory_order_relaxed);
}

/* What the live large bytes leave of their recent peak, beyond `held`
 * bytes the caches hold already, while a purger thread runs (it gives idle
 * pages back when the program idles); 0 without one. */
static size_t peak_room(size_t held)
{
  if (!hak_ss_purger()) return 0;
  size_t live = atomic_load_explicit(&large_counts.live_bytes, memory_order_relaxed);
  size_t peak = atomic_load_explicit(&large_peak_bytes, memory_order_relaxed);
  size_t prev = atomic_load_explicit(&large_peak_prev, memory_order_relaxed);
  if (prev > peak) peak = prev;
  return peak > live + held ? peak - live - held : 0;
}

/* The idle bytes the page arenas may keep (hak_large_free): up to
 * hak_opt.large_cache, or what the live large bytes leave of their recent
 * peak beyond the cached mappings' (peak_room), with an eighth more for
 * the runs' headers and rounding.  A program that frees more than
 * hak_opt.large_cache of big blocks at once and allocates them again (a
 * round of work) had the rest purged at its free and faulted in again at
 * its next allocation: a hundred 1 MiB buffers replaced each round faulted
 * 10k pages a round.  The live and the idle bytes stay within the peak. */
static size_t arena_bound(void)
{
  size_t room = peak_room(atomic_load_explicit(&cache_bytes, memory_order_relaxed));
  room += room / 8;
  return room > hak_opt.large_cache ? room : hak_opt.large_cache;
}

/* The committed bytes the cache may hold now: a quarter of
 * hak_opt.large_cache, or half the large bytes live (at most
 * hak_opt.large_cache), or what the live ones leave of the recent peak
 * beyond the arenas' idle pages (peak_room), whichever is most, and
 * CACHE_SLACK more.  The peak counts only while a purger thread runs,
 * which gives the pages back when the program idles (without it, a
 * program that went idle would keep them).  The sizes above are usable
 * bytes, but a cached mapping's committed pages also hold the page under
 * its block's start and its end's rounding (to a huge page, with them
 * on): without the slack a program that freed a buffer of the bound's
 * size, or at its peak, and allocated it again had the whole mapping
 * purged at each free and faulted in again (7 us a pair at 16 MiB written
 * in two pages; 16 MiB grown by realloc and written whole, 4,100 faults
 * a round). */
#define CACHE_SLACK HAK_SS_SIZE
static size_t cache_bound(void)
{
  size_t live = atomic_load_explicit(&large_counts.live_bytes, memory_order_relaxed);
  size_t bound = hak_opt.large_cache / 4;
  if (live / 2 > bound) bound = live / 2;
  if (bound > hak_opt.large_cache) bound = hak_opt.large_cache;
  size_t room = peak_room(hak_arena_idle_bytes());
  return (room > bound ? room : bound) + CACHE_SLACK;
}

/* The block of l, its header written, goes live and is counted.  The live
 * total moves only here and in large_uncount (by the same amount), not on
 * every realloc: a realloc loop must not write a shared line per call.  A
 * kept run (below) is counted still: its new block moves the total by the
 * difference alone, so a thread that frees and allocates a buffer of the
 * same size writes no shared line. */
static void large_publish(hak_heap_t *h, hak_large_t *l, bool kept)
{
  /* release: a reader that finds the block live sees its header written */
  atomic_store_explicit(&l->live, 1, memory_order_release);
  count_large(h, true, 1, l->usable);
  size_t was = kept ? l->live_counted : 0;
  l->live_counted = l->usable;
  if (!kept) atomic_fetch_add_explicit(&large_counts.live_count, 1, memory_order_relaxed);
  if (l->usable < was) atomic_fetch_sub_explicit(&large_counts.live_bytes, was - l->usable, memory_order_relaxed);
  if (l->usable <= was) return;
  size_t add = l->usable - was;
  large_note_peak(atomic_fetch_add_explicit(&large_counts.live_bytes, add, memory_order_relaxed) + add);
}

/* l's block, freed (or its kept run, given back), leaves the live totals. */
static void large_uncount(hak_large_t *l)
{
  atomic_fetch_sub_explicit(&large_counts.live_bytes, l->live_counted, memory_order_relaxed);
  atomic_fetch_sub_explicit(&large_counts.live_count, 1, memory_order_relaxed);
}

/* ------------------------------------------------------------ arena blocks */

/* Arena blocks (arena.c): once the cache is warm (the program reuses large
 * blocks), a block of up to HAK_ARENA_BLOCK_MAX (less its alignment above
 * a page) aligned to at most HAK_ARENA_ALIGN_MAX takes a run of pages from
 * the arenas: the header at its start, then the block, placed to end within
 * 15 bytes of the run's end (those are canary bytes, large_tail) if its
 * alignment lets it (large_arena_alloc).  The word before the canary word holds the header's address
 * (hak_large_of finds the header from the block).  Pages freed by one
 * block serve the next of any size: no system call, no page fault, nothing
 * zeroed by the kernel while the program keeps reusing them; free pages go
 * back by whole huge pages once idle for the purge delay (arena.c).  What
 * the mappings give and arena blocks do not: no guard region after the
 * block (an overflow past the canary bytes reaches the next run's header,
 * found when that block is freed); realloc beyond the run's free
 * neighbours moves the block to a mapping (a copy; the mapping then grows
 * by mremap).  Not in secure mode,
 * whose protections work on whole mappings, nor while the cache is cold,
 * whose freed blocks fault on any access. */
static bool large_arena_fits(size_t size, size_t align, bool grow)
{
  return !grow && align <= HAK_ARENA_ALIGN_MAX && size <= HAK_ARENA_BLOCK_MAX - (align > HAK_PAGE_SIZE ? align : 0) &&
         hak_opt.large_arena && !hak_opt.secure && large_warm();
}

bool hak_large_arena_serves(size_t size) { return large_arena_fits(size, HAK_MIN_ALIGN, false); }

/* Where an arena block may start in its run: past the header, the header's
 * address and the canary word (the block may share the header's page). */
#define ARENA_BLOCK_MIN (hak_align_up(sizeof(hak_large_t), HAK_MIN_ALIGN) + 2 * sizeof(uintptr_t))

/* An arena block of size bytes aligned to align: up to a page, placed as
 * late in its run as the alignment lets it; above, a page into its run
 * (the header's), the run placed so that the block is aligned.  Its usable
 * size counts what it leaves of the run's end past TAIL_MAX (as a
 * mapping's). */
/* The run l of `pages` pages, its block freed, goes back to the arenas:
 * its pages stay for the next blocks while the arenas' idle pages stay
 * within arena_bound, and until they idle for the purge delay
 * (hak_arena_decay); beyond it they go back now. */
static void arena_run_give(hak_large_t *l)
{
  size_t bytes = (size_t)l->arena_pages * HAK_PAGE_SIZE;
  bool over = hak_arena_idle_bytes() + bytes > arena_bound();
  atomic_store_explicit(&cache_put_ms, hak_os_now_ms(), memory_order_relaxed);
  hak_arena_give(l, l->arena_pages, over, l->freed_ms);
}

/* ---------------------------------------------------------------- kept runs */

/* A thread that frees a large block and allocates another of about its
 * size (a scratch buffer per request) would take the arenas' lock twice a
 * pair, and threads doing so at once wait on it: 1 MiB malloc and free in
 * a loop cost 2 us a pair at 2 threads.  So the run of an arena block of
 * at most KEEP_MAX a thread frees stays out of the arenas in its heap's
 * slot (hak_heap_t.large_kept, one run), and its next large malloc that
 * fits it (KEEP_SLACK: at most an eighth more pages than it needs, and the
 * default alignment; not calloc, which the arenas zero where dirty) takes
 * it back without a lock.  A malloc that does not fit gives it back to the
 * arenas; so do the thread's exit, a collect (malloc_trim), the heap's
 * maintenance (at most every purge delay, from small-block refills), and
 * the purger's second pass in a row that finds the same run kept (heap.c,
 * hak_heap_reclaim_idle), so a thread holds at most one run, for about a
 * purge delay unless it reuses it.  A kept run stays in
 * the live totals (large_publish) until it is given back; the statistics
 * count it as cached (hak_heap_kept_bytes).  A run above KEEP_SMALL, up to
 * KEEP_MAX (the largest block the arenas serve), is kept only once the
 * thread was seen allocating a block that fits the big run it freed last
 * (large_keep_big), and no longer once a kept one did not fit: a 2-8 MiB
 * scratch buffer per request cost 200-600 ns a malloc and free at 1
 * thread and 0.6-1.6 us at 2 (the arenas' lock and bitmaps), 50-76 ns
 * kept, where keeping every big run held the runs of bench/mstress's
 * outgrown arrays, which no malloc reused, until their threads exited
 * (0.97x). */
#define KEEP_SMALL HAK_SS_SIZE
#define KEEP_MAX (HAK_ARENA_BLOCK_MAX + 2 * HAK_PAGE_SIZE)

/* Whether a block of `pages` pages fits a run of run_pages: at most an
 * eighth more. */
static inline bool run_fits(size_t run_pages, size_t pages)
{
  return run_pages >= pages && run_pages <= pages + pages / 8;
}

/* Keep the run of l (its block just freed) in h's slot, if h is live, the
 * slot empty and the run small enough. */
static bool kept_put(hak_heap_t *h, hak_large_t *l)
{
  size_t bytes = (size_t)l->arena_pages * HAK_PAGE_SIZE;
  if (h->state != HAK_HEAP_LIVE || bytes > KEEP_MAX) return false;
  if (bytes > KEEP_SMALL && !h->large_keep_big) {
    h->large_big_freed = l->arena_pages;
    return false;
  }
  hak_large_t *none = NULL;
  l->freed_ms = hak_os_now_ms();  /* its age, if it goes back to the arenas (arena_run_give) */
  /* Counted before the run is visible: a taker's subtraction (the purger
   * may take it at once) never comes first and wraps the sum. */
  atomic_fetch_add_explicit(&h->large_kept_bytes, l->live_counted, memory_order_relaxed);
  /* seq_cst: the publication the ring below needs ordered before its read. */
  if (atomic_compare_exchange_strong_explicit(&h->large_kept, &none, l, memory_order_seq_cst, memory_order_relaxed)) {
    /* A purger asleep without a deadline sets one: if the thread idles from
     * here on, its next passes give the run back (hak_heap_reclaim_idle).
     * Without it the run stayed for good (unit_large's idle-thread test
     * under load: 1 MiB kept after 4.5 s). */
    hak_os_bell_ring_after_rmw();
    return true;
  }
  atomic_fetch_sub_explicit(&h->large_kept_bytes, l->live_counted, memory_order_relaxed);
  return false;
}

/* Take h's kept run, if any; NULL if none. */
static hak_large_t *kept_take(hak_heap_t *h)
{
  if (atomic_load_explicit(&h->large_kept, memory_order_relaxed) == NULL) return NULL;
  hak_large_t *l = atomic_exchange_explicit(&h->large_kept, NULL, memory_order_acq_rel);
  if (l != NULL) atomic_fetch_sub_explicit(&h->large_kept_bytes, l->live_counted, memory_order_relaxed);
  return l;
}

/* The run of l (its block freed, or a kept run taken) goes back to the
 * arenas, out of the live totals. */
static void arena_run_retire(hak_large_t *l)
{
  large_uncount(l);
  arena_run_give(l);
}

bool hak_large_kept_release(hak_heap_t *h)
{
  hak_large_t *l = kept_take(h);
  if (l != NULL) arena_run_retire(l);
  return l != NULL;
}

/* h's kept run, if a block of `pages` pages fits it (fits: the default
 * alignment, not calloc); a kept run that does not goes back to the
 * arenas first, where the block may take its pages (merged with their
 * free neighbours).  None for a heap that is not a live thread's: the
 * placeholder of threads that have none yet (hak_heap_unstarted) is
 * shared, and kept_put keeps no run there; its fields stay unwritten. */
static hak_large_t *kept_fit(hak_heap_t *h, size_t pages, bool fits)
{
  if (h->state != HAK_HEAP_LIVE) return NULL;
  hak_large_t *l = kept_take(h);
  if (l == NULL) {
    if (fits && run_fits(h->large_big_freed, pages)) h->large_keep_big = true;
    h->large_big_freed = 0;
    return NULL;
  }
  if (fits && run_fits(l->arena_pages, pages)) return l;
  if ((size_t)l->arena_pages * HAK_PAGE_SIZE > KEEP_SMALL) h->large_keep_big = false;
  arena_run_retire(l);
  return NULL;
}

static void *large_arena_alloc(hak_heap_t *h, size_t size, size_t align, bool zero, bool huge_big)
{
  size_t span = hak_align_up(size, HAK_MIN_ALIGN), pages, off;
  if (align <= HAK_PAGE_SIZE) {
    pages = hak_align_up(ARENA_BLOCK_MIN + span, HAK_PAGE_SIZE) / HAK_PAGE_SIZE;
    off = (pages * HAK_PAGE_SIZE - span) & ~(align - 1);
    if (off < ARENA_BLOCK_MIN) off = (++pages * HAK_PAGE_SIZE - span) & ~(align - 1);
  } else {
    off = HAK_PAGE_SIZE;
    pages = 1 + hak_align_up(span, HAK_PAGE_SIZE) / HAK_PAGE_SIZE;
  }
  bool probe = false, clean = false;
  hak_large_t *l = kept_fit(h, pages, align <= HAK_MIN_ALIGN && !zero);
  bool kept = l != NULL;
  if (kept) {
    pages = l->arena_pages;  /* the block ends at the run's end, as placed below */
    off = pages * HAK_PAGE_SIZE - span;
  }
  size_t end = pages * HAK_PAGE_SIZE, usable = end - off;
  if (usable - size <= TAIL_MAX) usable = size;  /* the rest is canary bytes (large_tail) */
  if (l == NULL) {
    bool huge = arena_huge(size, huge_big, &probe);
    l = hak_arena_take(pages, align, off, zero ? off : 0, zero ? end : 0, huge, &clean);
    if (l == NULL) return NULL;
  }
  l->magic = HAK_LARGE_MAGIC;
  l->owner_id = atomic_load_explicit(&h->id, memory_order_relaxed);
  l->map_base = NULL;
  l->map_size = 0;
  l->dirty_from = l->dirty_to = 0;  /* an arena block is never cached */
  l->huge_from = 0;                 /* nor filled by large_fill: its run's regions decide */
  l->freed_ms = 0;
  l->probe_from = l->probe_to = l->probe_wiped = 0;
  if (probe && clean) arena_probe(l, off, usable);
  else if (clean && !kept && !zero && !large_huge_on()) arena_commit(l, off, size);
  l->arena_pages = (uint32_t)pages;
  l->user = (char *)l + off;
  l->usable = usable;
  ((uintptr_t *)l->user)[-2] = (uintptr_t)l;
  ((uintptr_t *)l->user)[-1] = hak_canary_word(l->user);
  large_write_tail(l);
  large_publish(h, l, kept);
  return l->user;
}

/* Resize the arena block of l in its run: the tail pages go back to the
 * arena, or the free pages after the run join it; NULL if they are not
 * free (the caller moves the block). */
static void *large_arena_resize(hak_heap_t *h, hak_large_t *l, size_t size)
{
  size_t off = (size_t)((char *)l->user - (char *)l);
  if (size > HAK_ARENA_BLOCK_MAX) return NULL;
  size_t pages = hak_align_up(off + size, HAK_PAGE_SIZE) / HAK_PAGE_SIZE;
  if (pages > l->arena_pages &&
      !hak_arena_extend(l, l->arena_pages, pages - l->arena_pages,
                        big_block(size) || score_of(false) > 0))
    return NULL;
  l->probe_from = l->probe_to = 0;  /* a probe's pages may be gone, or hold what the program copied */
  if (pages < l->arena_pages) hak_arena_give((char *)l + pages * HAK_PAGE_SIZE, l->arena_pages - pages, false, 0);
  l->arena_pages = (uint32_t)pages;
  size_t usable = pages * HAK_PAGE_SIZE - off;  /* page-rounded: no canary bytes (large_tail) */
  if (usable > l->usable) count_large(h, true, 0, usable - l->usable);
  else if (usable < l->usable) count_large(h, false, 0, l->usable - usable);
  l->usable = usable;
  return l->user;
}

void *hak_large_alloc(hak_heap_t *h, size_t size, size_t align, bool zero, bool grow)
{
  /* Entries idle past the purge delay give their pages back before this
   * allocation looks at the cache (so after an idle period the cache turns
   * cold even if no small-block refill ran the decay meanwhile). */
  hak_large_decay();
  /* A large block freed (discarded) and now another allocated: the program
   * reuses large blocks, the cache turns warm. */
  if (atomic_load_explicit(&cache_temp, memory_order_relaxed) == LARGE_COLD_DISCARDED) {
    uint32_t discarded = LARGE_COLD_DISCARDED;
    atomic_compare_exchange_strong_explicit(&cache_temp, &discarded, LARGE_WARM, memory_order_relaxed,
                                            memory_order_relaxed);
  }
  if (align < HAK_MIN_ALIGN) align = HAK_MIN_ALIGN;
  /* The block starts past the header page and a canary word. */
  size_t off_min = hak_align_up(HAK_PAGE_SIZE + sizeof(uintptr_t), align);
  if (size > HAK_MAX_ALLOC - GUARD || off_min > HAK_MAX_ALLOC - GUARD - size) { errno = ENOMEM; return NULL; }
  /* A zero-byte block still gets a byte of the block area: with an
   * alignment of 2 MiB or more it would otherwise start at the guard
   * (found by tests/fuzz/fuzz_api in the previous layout, where it lay outside
   * the mapping). */
  if (size == 0) size = 1;
  /* Whether a block of 2 MiB or more gets huge pages (ignored for the
   * others): by the evidence (big_huge), unless realloc grows it (filled
   * as a rule) or, with huge pages on, it is aligned to 2 MiB or more (see
   * below).  With them off, "huge pages" means its pages committed at
   * malloc, which only the evidence decides: every block aligned to 2 MiB
   * was committed whole (posix_memalign(2 MiB, 3,000,000), 16 bytes
   * written: 48 us a malloc and free, mimalloc 0.85). */
  bool by_evidence = !grow && (align < HAK_SS_SIZE || !large_huge_on()) && big_block(size);
  bool huge_big = !by_evidence || big_huge();
  if (large_arena_fits(size, align, grow)) {
    void *p = large_arena_alloc(h, size, align, zero, huge_big);
    if (p != NULL) return p;
  }
  size_t map_size = hak_align_up(off_min + size, HAK_SS_SIZE) + GUARD;
  /* Huge pages past the first region of a fresh mapping: a block ends at
   * the guard, so it covers them whole, but one aligned to 2 MiB or more
   * starts a region it may not fill (it sits as placed below), and a huge
   * page there held all 2 MiB for it: then only the regions it covers. */
  size_t area = map_size - GUARD, fresh_from, huge_from = HAK_SS_SIZE, huge_to = area;
  if (!grow && align >= HAK_SS_SIZE) {
    huge_from = (area - size) & ~(align - 1);
    huge_to = hak_align_up(huge_from + size, HAK_PAGE_SIZE);
  } else if (!huge_big) {
    huge_from = huge_to;  /* 4 KiB pages throughout; the fill probe (large_fill) sees the first 2 MiB */
  }
  hak_large_t *l = large_map(map_size, align > HAK_SS_SIZE ? align : HAK_SS_SIZE, huge_from, huge_to, &fresh_from);
  if (l == NULL) { errno = ENOMEM; return NULL; }
  if (by_evidence) large_set_huge(l, huge_big);
  size_t end = large_end(l), off, usable;
  if (!grow) {
    off = (end - size) & ~(align - 1);  /* the block ends at the guard */
    usable = end - off;
    if (usable - size <= TAIL_MAX) usable = size;  /* the rest is canary bytes (large_tail) */
  } else {
    /* A block realloc will likely grow again: at the bottom of its area,
     * with the rest above it to grow into without a system call. */
    off = off_min;
    usable = hak_align_up(off + size, HAK_PAGE_SIZE) - off;
    if (usable > end - off) usable = end - off;
  }
  l->magic = HAK_LARGE_MAGIC;
  l->owner_id = atomic_load_explicit(&h->id, memory_order_relaxed);
  l->user = (char *)l + off;
  l->usable = usable;
  /* A reused mapping may hold dirty pages below this block (a larger block
   * used it before).  They go back once they exceed an eighth of the block
   * and SPARE_KEEP (whole units: a huge page under the block's start
   * stays), so a live block holds at most that much more than its size
   * plus 2 MiB.  Below SPARE_KEEP, a block a little smaller than the last
   * one in its mapping would give back pages that the next larger block
   * faults in again, and each purge flushes the other CPUs' TLBs; keeping
   * more than that saves few faults and costs RSS
   * (bench/results/history.md). */
  size_t below = off - sizeof(uintptr_t);  /* the canary word */
  /* The lowest unit the block touches, past the first region. */
  size_t low = off > HAK_SS_SIZE ? unit_down(off) : HAK_SS_SIZE;
  /* The part a growth added holds no page: its units come from the bank
   * first, before any spare units go in below. */
  if (!grow && fresh_from < end && unit_up(fresh_from) < end)
    (void)bank_withdraw(l, unit_up(fresh_from) > low ? unit_up(fresh_from) : low, end);
  if (l->dirty_from < below) {
    /* Whole units of them go to the bank (see bank_deposit), and the pages
     * left below those units go back, so the committed pages stay one
     * range [dirty_from, dirty_to), without a hole that a later block
     * would take for committed and fault in. */
    size_t from = unit_up(l->dirty_from > HAK_SS_SIZE ? l->dirty_from : HAK_SS_SIZE), to = unit_down(below);
    size_t banked_to = to > from ? bank_deposit(l, from, to) : from;
    if (banked_to > from) {
      size_t start = l->dirty_from & ~(HAK_PAGE_SIZE - 1);
      if (from > start) hak_os_purge((char *)l + start, from - start);
      l->dirty_from = banked_to;
    }
    size_t keep = l->usable / 8 > SPARE_KEEP ? l->usable / 8 : SPARE_KEEP;
    if (below > l->dirty_from && below - l->dirty_from > keep) large_purge_below(l, below);
  } else if (!grow) {
    /* Units of the block below the committed part [dirty_from, E) hold no
     * page: from the bank too. */
    size_t top = unit_down(l->dirty_from);
    if (top > low) {
      size_t filled = bank_withdraw(l, low, top);
      if (filled < top) l->dirty_from = filled;  /* calloc zeroes them */
    }
  }
  large_fill(l, off, size, zero, grow);
  ((uintptr_t *)l->user)[-1] = hak_canary_word(l->user);
  if ((zero || hak_opt.secure) && l->dirty_from < off + usable)
    large_zero(l, l->dirty_from > off ? l->dirty_from : off, off + usable);
  large_write_tail(l);
  /* The holder may write all of it, and a huge page commits its region. */
  if (l->dirty_from > large_region_floor(below)) l->dirty_from = large_region_floor(below);
  large_dirty_upto(l, off + usable);
  large_publish(h, l, false);
  /* The bound holds at every allocation too, not only at frees: the
   * pages cached below the peak give way as the live bytes climb back to
   * it (and at a new peak the cache keeps only what the bound without the
   * peak allows), so live and cached stay within the peak. */
  size_t bound = cache_bound();
  if (atomic_load_explicit(&cache_bytes, memory_order_relaxed) > bound) cache_make_room(bound);
  return l->user;
}

/* The header of the large block p, if p is one (caller holds the RCU read
 * lock, so the header stays mapped). */
hak_large_t *hak_large_of(uintptr_t tag, const void *p)
{
  hak_large_t *l = (hak_large_t *)((tag >> 2) << HAK_SS_SHIFT);
  if (l->magic == HAK_ARENA_MAGIC && (l = hak_arena_header_of(l, p)) == NULL) return NULL;
  if (l->magic != HAK_LARGE_MAGIC || l->user != p) return NULL;
  return l;
}

/* Free the large block p (the caller holds the RCU read lock).  Returns a
 * mapping the caller must retire once it has left the read-side section (p's
 * own, or one the cache gave up for it), or p's arena run to give back then
 * (both with hak_large_retire), or NULL.  Nothing here takes a lock. */
hak_large_t *hak_large_free(hak_heap_t *h, hak_large_t *l, void *p)
{
  uint32_t one = 1;
  /* acq_rel: exactly one free wins; a second one is a double free. */
  if (!atomic_compare_exchange_strong_explicit(&l->live, &one, 0, memory_order_acq_rel, memory_order_relaxed))
    hak_fatal("free(): double free of a large block", p);
  large_check_canary(l);
  large_check_tail(l);
  /* A block used in part in pages an earlier block wrote (its probe's
   * were wiped, large_probe_reused): the program now uses its big blocks
   * in part, and the next block in this mapping holds only what it
   * touches. */
  if (large_fill_probe(l) && l->probe_wiped && l->arena_pages == 0) large_purge_below(l, large_end(l));
  count_large(h, false, 1, l->usable);
  /* Freed by a thread that did not allocate it (ids, not tags: a heap is
   * reused by the next thread, with a new id but the same tag). */
  if (hak_opt.stats && atomic_load_explicit(&h->id, memory_order_relaxed) != l->owner_id) {
    HAK_COUNT(h, remote_frees, 1);
    if (hak_opt.stats >= 2) hak_stats_count_remote(h, l->owner_id);
  }
  if (l->arena_pages != 0) {
    /* Its run goes to the thread's slot (kept runs) or back to the arenas
     * whole, the header with it; the cache stays warm.  arena_bound, not
     * cache_bound's tighter bound: free pages between live runs are the
     * arenas' working room, and a program that frees its big blocks at the
     * end of a round of work allocates them again in the next (mstress at
     * 4 threads refaulted 86 MB a second under cache_bound; bench/large,
     * whose cached mappings of up to 64 MiB filled the shared bound, had
     * every arena run purged at its free).  The give-back takes the
     * arenas' lock, so the caller does it once out of its read-side
     * section (hak_large_retire): fork_prepare holds that lock while it
     * waits for urcu's grace-period lock, and a grace period waits for
     * every reader.  The run stays mapped meanwhile (arenas never unmap)
     * and is this thread's (it won the exchange of live above). */
    return kept_put(h, l) ? NULL : l;
  }
  large_uncount(l);
  if (!large_warm()) return large_discard(l);
  size_t cached = atomic_load_explicit(&cache_bytes, memory_order_relaxed);
  size_t bound = cache_bound();
  size_t committed = large_committed(l);
  if (cached + committed > bound) cache_make_room(bound > committed ? bound - committed : 0);
  if (atomic_load_explicit(&cache_bytes, memory_order_relaxed) + committed > bound) {
    /* Still over the bound: cache it as address space only (its pages go
     * back now).  It stays registered with its header saying free, so a
     * second free of it is still caught as a double free, and a later
     * allocation saves the mmap, the munmap and the grace period. */
    if (l->map_size > CACHE_MAP_MAX) return l;
    large_purge_below(l, large_end(l));
    if (!hak_ss_purger()) atomic_fetch_add_explicit(&bound_purges, 1, memory_order_relaxed);
  }
  if (!cache_keeps(l)) return l;
  if (hak_opt.secure) large_protect(l, false);  /* a write or read after free faults */
  uint64_t now = hak_os_now_ms();
  bool dirty = large_committed(l) > 0;
  l->freed_ms = now;
  atomic_store_explicit(&cache_put_ms, now, memory_order_relaxed);  /* before l is visible in a slot */
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
  if (dirty) {
    atomic_compare_exchange_strong_explicit(&cache_oldest_ms, &none, now, memory_order_relaxed,
                                            memory_order_relaxed);
    hak_os_bell_ring();  /* the purger (purge.c) gives the pages back if they stay unused */
  }
  return evicted == l ? NULL : evicted;
}

/* The earlier of two due times, 0 meaning none. */
static inline uint64_t due_earliest(uint64_t a, uint64_t b) { return a == 0 || (b != 0 && b < a) ? b : a; }

uint64_t hak_large_next_due(void)
{
  uint64_t oldest = atomic_load_explicit(&cache_oldest_ms, memory_order_relaxed);
  uint64_t due = oldest == 0 ? 0 : oldest + hak_opt.purge_delay_ms;
  due = due_earliest(due, bank_decay(hak_os_now_ms(), false));
  return due_earliest(due, hak_arena_next_due());
}

size_t hak_large_cached_bytes(void)
{
  return atomic_load_explicit(&cache_bytes, memory_order_relaxed) + hak_arena_idle_bytes();
}

size_t hak_large_live(size_t *count)
{
  *count = atomic_load_explicit(&large_counts.live_count, memory_order_relaxed);
  return atomic_load_explicit(&large_counts.live_bytes, memory_order_relaxed);
}

void hak_large_retire(hak_large_t *l)
{
  if (l->arena_pages != 0) {  /* an arena block's run (hak_large_free) */
    arena_run_retire(l);
    return;
  }
  large_retire(l);
  hak_large_decay();
}

/* Whether realloc resizing l's block to size bytes moves it (a copy to a
 * new block, and l freed into the cache with its pages) instead of working
 * on l's own pages.  A buffer shrunk after a big message is often grown
 * again for the next one: shrunk in place, its tail went back and faulted
 * in again at every growth (16 MiB to 1 MiB and back, written: 4.9 ms a
 * cycle, tcmalloc and mimalloc 0.75).  Only where the copy is small next
 * to the pages it saves: a block the page arenas serve, a quarter of the
 * other size at most.
 *  - A shrink, not while the cache is cold: its copy would take a mapping
 *    of its own (the arenas serve a program once it reuses large blocks),
 *    and the next growth another.  A shrink in place then counts as a
 *    discard (large_discard): the next large allocation turns the cache
 *    warm.
 *  - A growth past l's area, while the cache holds a mapping: the copy
 *    takes it, pages and all, where a move (large_grow_mapping) faults the
 *    new part in. */
static bool resize_moves(const hak_large_t *l, size_t size)
{
  if (hak_opt.secure) return false;
  if (size < l->usable) {
    if (size > l->usable / 4 || size > HAK_ARENA_BLOCK_MAX) return false;
    return !cache_note_discard();
  }
  /* A page more: a block resized in place ends on a page boundary, so its
   * usable size holds the rounding of its start. */
  size_t off = (size_t)((char *)l->user - (char *)l);
  return off + size > large_end(l) && l->usable <= size / 4 + HAK_PAGE_SIZE &&
         l->usable <= HAK_ARENA_BLOCK_MAX + HAK_PAGE_SIZE && atomic_load_explicit(&cache_count, memory_order_relaxed) != 0;
}

/* Whether realloc to size bytes leaves l's block as it is: a shrink to at
 * least half of it, as a small block's (alloc.c), while the pages kept
 * past the new size are at most hak_opt.large_cache.  Given back, they
 * faulted in again at the next growth (16 MiB to 8 MiB and back, written:
 * 2.5 ms a cycle, tcmalloc and mimalloc 0.33, which keep them too). */
static bool resize_keeps(const hak_large_t *l, size_t size)
{
  return size <= l->usable && size >= l->usable / 2 && l->usable - size <= hak_opt.large_cache && !hak_opt.secure;
}

/* Resize in place (or leave as it is: resize_keeps; or let realloc move
 * it: resize_moves) within the mapping, or grow the mapping without copying.
 * The block keeps its start; growth moves its end (and the guard) up. */
void *hak_large_resize(hak_heap_t *h, hak_large_t *l, size_t size)
{
  large_check_canary(l);
  large_check_tail(l);
  if (l->arena_pages != 0) return large_arena_resize(h, l, size);
  size_t off = (size_t)((char *)l->user - (char *)l);
  if (size > HAK_MAX_ALLOC - GUARD - off) return NULL;
  if (resize_keeps(l, size)) return l->user;
  if (resize_moves(l, size)) return NULL;
  if (off + size > large_end(l)) {
    /* Grow by at least a quarter, so a loop of small reallocs moves rarely. */
    size_t want = off + size + (size >> 2);
    hak_large_t *n = large_grow_mapping(l, hak_align_up(want, HAK_SS_SIZE) + GUARD);
    if (n == NULL) return NULL;
    l = n;
  }
  /* The block grows and shrinks by pages inside its area: only a fresh
   * block ends exactly at the guard. */
  size_t usable = hak_align_up(off + size, HAK_PAGE_SIZE) - off;
  if (usable > large_end(l) - off) usable = large_end(l) - off;
  if (usable < l->usable) {
    /* The tail goes back, from its first whole unit of commitment on (the
     * huge page under the new end stays whole). */
    size_t from = off + usable, to = off + l->usable;
    if (from >= HAK_SS_SIZE) from = hak_align_up(from, HAK_SS_SIZE);
    to = large_region_floor(to);
    if (to > from) {
      hak_os_purge((char *)l + from, to - from);
      if (to >= l->dirty_to) l->dirty_to = from;
    }
  }
  large_dirty_upto(l, off + usable);
  if (usable > l->usable) count_large(h, true, 0, usable - l->usable);
  else if (usable < l->usable) count_large(h, false, 0, l->usable - usable);
  l->usable = usable;  /* page-rounded: no canary bytes (large_tail) */
  l->probe_from = l->probe_to = 0;  /* resized: its pages no longer say how it was filled */
  return l->user;
}
