/* Page arenas: the pages of large blocks up to HAK_ARENA_BLOCK_MAX, split
 * and merged by the page, so that a freed block's pages serve the next
 * blocks of any size without a system call, a page fault or the kernel
 * zeroing them again.
 *
 * An arena is ARENA_SIZE of address space, aligned to its size (the arena
 * of a page is its address rounded down) and registered whole with the
 * large tag (registry.c): its header, at its base, has the magic where a
 * large mapping's header has its own, so hak_large_of tells them apart.
 * After the header come ARENA_PAGES pages, handed out as runs: first fit in
 * address order, so the low pages are reused and the high ones stay
 * untouched.  A run holds one large block (large.c): its header, then the
 * block.  A 2 MiB region past the first (the header's) has transparent
 * huge pages once a run taken with them (large.c decides: while the
 * program writes blocks of that size whole) has pages there: its fresh
 * pages fault in 2 MiB at a time, until its pages go back whole.  A block
 * smaller than a huge page is often touched in part (a buffer sized for
 * the largest message), and a huge page commits 2 MiB at its first byte.
 * Arenas are never unmapped; their free pages go back to the OS in decay
 * passes (hak_arena_decay, arena_claim): a group of 64 pages once none of
 * them was freed for the purge delay, and a region with huge pages once
 * all of it is free and idle as long, so pages a program reuses within the
 * delay are never refaulted and no huge page is split.
 *
 * Invariants (all fields under arena_lock, written only here):
 *   free     bit i set: page i belongs to no run (never set past ARENA_PAGES);
 *   dirty    bit i clear: page i holds no memory (never touched, or purged);
 *            set: it may (a run taken marks all its pages dirty);
 *   freed_ms when a page of the group of word w was last freed;
 *   huge     huge[r]: region r + 1 is advised huge pages.  Set under the
 *            lock by a take or extension with huge pages of a run with
 *            pages there (hak_arena_take, hak_arena_extend), which then
 *            advises it; read under the lock by takes of runs with pages
 *            there (run_clean); cleared, with the advice, by whoever holds
 *            all of its pages outside the lock (no take may touch them):
 *            a purging hak_arena_give, or the pass that claimed them.  Read
 *            by a pass under the lock only where some of its pages are free;
 *   purging  pages a pass took out of free to purge outside the lock: they
 *            are in no run, free again (and clean) when the pass ends;
 *   idle     popcount(free & dirty), summed in arena_idle_pages (kept by
 *            each change to the bits, over the words it touched);
 *   max_run  at least the longest run of free pages: ARENA_PAGES after
 *            any change that frees pages, the longest found after a
 *            search that failed (run_find);
 *   first_free  no word below it has a free page: lowered by a change
 *            that frees pages, raised by a search to the first word with
 *            one it saw;
 *   hint_n, hint_pos  no run of at least hint_n free pages starts below
 *            page hint_pos: set by a search that found one there, void
 *            (hint_n SIZE_MAX) after any change that frees pages;
 *   arena_due_ms  the earliest time a pass may claim idle pages (0:
 *            none), when the next pass has work.
 * A mutex, not lock-free: large blocks are allocated hundreds of times less
 * often than small ones, and each holds it for a bitmap scan. */
#include <pthread.h>
#include <string.h>

#include "arena.h"
#include "options.h"
#include "os.h"
#include "registry.h"
#include "stats.h"

#define ARENA_SIZE ((size_t)64 << 20)
#define ARENA_META ((size_t)16 << 10)  /* the header's pages */
#define ARENA_PAGES ((ARENA_SIZE - ARENA_META) / HAK_PAGE_SIZE)
#define ARENA_WORDS ((ARENA_PAGES + 63) / 64)
#define RUN_MAX_PAGES (HAK_ARENA_BLOCK_MAX / HAK_PAGE_SIZE + 2)  /* a block, its header, rounding */
#define HUGE_FIRST ((HAK_SS_SIZE - ARENA_META) / HAK_PAGE_SIZE)  /* pages of the first 2 MiB region */
#define HUGE_PAGES (HAK_SS_SIZE / HAK_PAGE_SIZE)                 /* pages of a huge page */
#define HUGE_REGIONS ((ARENA_PAGES - HUGE_FIRST) / HUGE_PAGES)     /* the regions past the first */

_Static_assert((ARENA_PAGES - HUGE_FIRST) % HUGE_PAGES == 0, "the arena ends on a huge page");

typedef struct hak_arena {
  uint64_t magic;  /* HAK_ARENA_MAGIC; first, like hak_large_t's */
  struct hak_arena *next;
  char *data;      /* page 0 */
  size_t idle;
  size_t max_run;  /* at least its longest run of free pages (run_find) */
  size_t first_free;  /* no free page in a word below this one (run_find) */
  size_t hint_n, hint_pos;  /* no run of hint_n free pages or more starts below page hint_pos */
  uint64_t free[ARENA_WORDS], dirty[ARENA_WORDS], purging[ARENA_WORDS], freed_ms[ARENA_WORDS];
  bool huge[HUGE_REGIONS];
} hak_arena_t;

_Static_assert(sizeof(hak_arena_t) <= ARENA_META, "the arena header fits its pages");

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_arena_t *arena_first, *arena_last;   /* under arena_lock, oldest first */
static bool arena_decaying;                     /* under arena_lock: a pass is purging */
static pthread_cond_t arena_pass_done = PTHREAD_COND_INITIALIZER;  /* signalled when it ends */
static _Atomic(size_t) arena_idle_pages;        /* relaxed: a hint outside the lock */
static _Atomic(uint64_t) arena_due_ms;          /* written under the lock; relaxed reads: a hint */
static _Atomic(uint64_t) arena_taken_ms;        /* the last take: written under the lock; relaxed reads: a hint */

/* ---------------------------------------------------------------- bitmaps */

static inline uint64_t bits_mask(size_t bit, size_t n)
{
  return (n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1) << bit;
}

/* Set or clear bits [from, from + n) of m. */
static void bits_put(uint64_t *m, size_t from, size_t n, bool set)
{
  while (n != 0) {
    size_t b = from % 64, k = 64 - b < n ? 64 - b : n;
    uint64_t mask = bits_mask(b, k);
    if (set) m[from / 64] |= mask;
    else m[from / 64] &= ~mask;
    from += k;
    n -= k;
  }
}

/* Whether every bit (all) or some bit (!all) of [from, from + n) is set in
 * m, or in m & o when o is given. */
static bool bits_test(const uint64_t *m, const uint64_t *o, size_t from, size_t n, bool all)
{
  while (n != 0) {
    size_t b = from % 64, k = 64 - b < n ? 64 - b : n;
    uint64_t mask = bits_mask(b, k), w = m[from / 64] & (o != NULL ? o[from / 64] : ~(uint64_t)0) & mask;
    if (all ? w != mask : w != 0) return !all;
    from += k;
    n -= k;
  }
  return all;
}

static bool bits_all(const uint64_t *m, size_t from, size_t n) { return bits_test(m, NULL, from, n, true); }

/* The first run of n free pages of a, or -1.  A search that fails learns
 * a's longest run (max_run), so the next ones skip a in one test until
 * pages of it are freed (every change that frees pages sets max_run to
 * ARENA_PAGES: arena_recount, hak_arena_give).  Without it, a take
 * scanned every full arena before the one with room: blocks of 300,000
 * bytes aligned to 64 KiB, 1,000 live in 6 arenas, spent half their
 * malloc and free here.  A search starts at the first word with a free
 * page (first_free, which it moves up to the first it sees): blocks taken
 * one after another otherwise each scanned past all the ones before
 * (64 blocks of 1 MiB: a third of a malloc and free).  A search for at
 * least as many pages as the last one that succeeded starts where that
 * one found its run (hint_n, hint_pos: first fit found none before it,
 * and takes only shrink runs): blocks placed with alignment gaps between
 * them, where first_free stays at the first gap, otherwise each scanned
 * every gap before them. */
static long run_found(hak_arena_t *a, size_t n, size_t start)
{
  a->hint_n = n;
  a->hint_pos = start;
  return (long)start;
}

static long run_find(hak_arena_t *a, size_t n)
{
  if (a->max_run < n) return -1;
  bool hinted = n >= a->hint_n && a->hint_pos / 64 > a->first_free;
  /* Below the hint, runs are shorter than hint_n: the bound if none is
   * found above it. */
  size_t run = 0, start = 0, longest = hinted ? a->hint_n - 1 : 0, first = ARENA_WORDS;
  for (size_t w = hinted ? a->hint_pos / 64 : a->first_free; w < ARENA_WORDS; w++) {
    uint64_t f = a->free[w];
    if (!hinted && f != 0 && first == ARENA_WORDS) a->first_free = first = w;
    if (f == ~(uint64_t)0) {
      if (run == 0) start = w * 64;
      if ((run += 64) >= n) return run_found(a, n, start);
      continue;
    }
    if (run > longest) longest = run;
    if (f == 0) { run = 0; continue; }
    for (unsigned b = 0; b < 64;) {
      uint64_t rest = f >> b;
      if (rest & 1) {
        unsigned len = (unsigned)__builtin_ctzll(~rest);  /* the free pages from b */
        if (run == 0) start = w * 64 + b;
        if ((run += len) >= n) return run_found(a, n, start);
        b += len;   /* a run that reaches bit 63 goes on in the next word */
      } else {
        if (run > longest) longest = run;
        run = 0;
        b = rest == 0 ? 64 : b + (unsigned)__builtin_ctzll(rest);
      }
    }
  }
  a->max_run = run > longest ? run : longest;
  if (!hinted && first == ARENA_WORDS) a->first_free = ARENA_WORDS;
  return -1;
}

/* The first run of n free pages of a whose address plus lead is a multiple
 * of align (above a page), or -1: a run of n + align pages - 1 holds one. */
static long run_find_aligned(hak_arena_t *a, size_t n, size_t align, size_t lead)
{
  if (align <= HAK_PAGE_SIZE) return run_find(a, n);
  size_t step = align / HAK_PAGE_SIZE;
  long at = run_find(a, n + step - 1);
  if (at < 0) return -1;
  uintptr_t start = (uintptr_t)a->data + (size_t)at * HAK_PAGE_SIZE + lead;
  return at + (long)((hak_align_up(start, align) - start) / HAK_PAGE_SIZE);
}

static size_t arena_count_idle(const hak_arena_t *a)
{
  size_t n = 0;
  for (size_t w = 0; w < ARENA_WORDS; w++) n += (size_t)hak_popcount64(a->free[w] & a->dirty[w]);
  return n;
}

/* a's idle count, and the total, now idle (under the lock).  No idle page
 * left: nothing is due either (arena_due_ms 0), so that the next give sets
 * its due time and wakes the purger.  A take that used the last idle pages
 * left the old due time behind; a give after it found that time earlier
 * than its own, did not ring, and a purger asleep without a deadline never
 * gave its pages back (unit_large's idle-thread test under load, 4.5 s). */
static void arena_set_idle(hak_arena_t *a, size_t idle)
{
  size_t total = atomic_load_explicit(&arena_idle_pages, memory_order_relaxed) - a->idle + idle;
  atomic_store_explicit(&arena_idle_pages, total, memory_order_relaxed);
  if (total == 0) atomic_store_explicit(&arena_due_ms, 0, memory_order_relaxed);
  a->idle = idle;
}

/* After a change to a's bits anywhere (under the lock): every word counted
 * (a decay pass, a fork child). */
static void arena_recount(hak_arena_t *a)
{
  a->max_run = ARENA_PAGES;
  a->first_free = 0;
  a->hint_n = SIZE_MAX;
  arena_set_idle(a, arena_count_idle(a));
}

/* popcount(free & dirty) over the words holding pages [from, from + n),
 * n > 0: a take, give or extension recounts only those (a count of the
 * whole arena, 256 words, was most of a large malloc and free's time). */
static size_t idle_in(const hak_arena_t *a, size_t from, size_t n)
{
  size_t c = 0;
  if (n == 0) return 0;
  for (size_t w = from / 64; w <= (from + n - 1) / 64; w++) c += (size_t)hak_popcount64(a->free[w] & a->dirty[w]);
  return c;
}

/* Pages [i, i + n) of a join a run (under the lock): out of free, dirty
 * from now on (a take, an extension). */
static void run_mark(hak_arena_t *a, size_t i, size_t n)
{
  size_t idle = a->idle - idle_in(a, i, n);
  bits_put(a->free, i, n, false);
  bits_put(a->dirty, i, n, true);
  arena_set_idle(a, idle + idle_in(a, i, n));
}

/* ----------------------------------------------------------------- arenas */

static inline hak_arena_t *arena_of(const void *p)
{
  return (hak_arena_t *)((uintptr_t)p & ~(uintptr_t)(ARENA_SIZE - 1));
}

static inline size_t page_index(const hak_arena_t *a, const void *p)
{
  return (size_t)((const char *)p - a->data) / HAK_PAGE_SIZE;
}

/* The regions [*r0, *r1) (huge[] indexes) that pages [i, i + n) cover
 * whole (whole) or have pages in. */
static void regions_of(size_t i, size_t n, bool whole, size_t *r0, size_t *r1)
{
  size_t up = whole ? HUGE_PAGES - 1 : 0, last = whole ? 0 : HUGE_PAGES - 1;
  *r0 = i <= HUGE_FIRST ? 0 : (i - HUGE_FIRST + up) / HUGE_PAGES;
  *r1 = i + n <= HUGE_FIRST ? 0 : (i + n - HUGE_FIRST + last) / HUGE_PAGES;
  if (*r1 < *r0) *r1 = *r0;
}

static char *region_base(hak_arena_t *a, size_t r) { return (char *)a + (r + 1) * HAK_SS_SIZE; }

/* Whether pages [i, i + n) of a, about to be taken (under the lock), hold
 * nothing and lie in regions without huge pages: a touch there commits a
 * page, so their residency later says what the block's holder wrote. */
static bool run_clean(const hak_arena_t *a, size_t i, size_t n)
{
  if (bits_test(a->dirty, NULL, i, n, false)) return false;
  size_t r0, r1;
  regions_of(i, n, false, &r0, &r1);
  for (size_t r = r0; r < r1; r++)
    if (a->huge[r]) return false;
  return true;
}

/* A run [i, i + n) of a was taken or grown (under the lock): with huge,
 * the regions it has pages in get huge pages.  Returns the span of those
 * that had none, [*r0, *r1), for huge_advise after the lock. */
static void huge_mark(hak_arena_t *a, size_t i, size_t n, bool huge, size_t *r0, size_t *r1)
{
  size_t from, to;
  *r0 = *r1 = 0;
  if (!huge) return;
  regions_of(i, n, false, &from, &to);
  for (size_t r = from; r < to; r++) {
    if (a->huge[r]) continue;
    a->huge[r] = true;
    if (*r1 == 0) *r0 = r;
    *r1 = r + 1;
  }
}

static void huge_advise(hak_arena_t *a, size_t r0, size_t r1)
{
  if (r1 > r0) hak_os_hugepage(region_base(a, r0), (r1 - r0) * HAK_SS_SIZE);
}

/* Pages [i, i + n) of a were purged by their holder: the regions they
 * cover whole lose their huge pages. */
static void huge_off(hak_arena_t *a, size_t i, size_t n)
{
  size_t r0, r1;
  regions_of(i, n, true, &r0, &r1);
  for (size_t r = r0; r < r1; r++) {
    if (!a->huge[r]) continue;
    size_t e = r;  /* the advised regions from r: one call */
    while (e < r1 && a->huge[e]) a->huge[e++] = false;
    hak_os_hugepage_off(region_base(a, r), (e - r) * HAK_SS_SIZE);
    r = e;
  }
}

/* A new arena, registered and linked (under the lock), or NULL. */
static hak_arena_t *arena_new(void)
{
  hak_arena_t *a = hak_os_map_aligned(ARENA_SIZE, ARENA_SIZE);
  if (a == NULL) return NULL;
  if (!hak_map_set_range(a, ARENA_SIZE, (((uintptr_t)a >> HAK_SS_SHIFT) << 2) | HAK_TAG_LARGE)) {
    hak_os_unmap(a, ARENA_SIZE);
    return NULL;
  }
  a->magic = HAK_ARENA_MAGIC;
  a->data = (char *)a + ARENA_META;
  bits_put(a->free, 0, ARENA_PAGES, true);
  a->max_run = ARENA_PAGES;
  a->hint_n = SIZE_MAX;
  if (arena_last != NULL) arena_last->next = a;
  else arena_first = a;
  arena_last = a;
  hak_gcount(&hak_gstats.mapped_bytes, ARENA_SIZE);
  return a;
}

void *hak_arena_take(size_t pages, size_t align, size_t lead, size_t zero_from, size_t zero_to, bool huge,
                     bool *clean)
{
  if (pages == 0 || pages > RUN_MAX_PAGES || align > HAK_ARENA_ALIGN_MAX) return NULL;
  uint64_t was_dirty[(RUN_MAX_PAGES + 63) / 64] = { 0 };
  pthread_mutex_lock(&arena_lock);
  hak_arena_t *a;
  long at = -1;
  for (a = arena_first; a != NULL; a = a->next)
    if ((at = run_find_aligned(a, pages, align, lead)) >= 0) break;
  if (a == NULL && (a = arena_new()) != NULL) at = run_find_aligned(a, pages, align, lead);
  if (a == NULL || at < 0) {
    pthread_mutex_unlock(&arena_lock);
    return NULL;
  }
  size_t i = (size_t)at;
  if (zero_to > zero_from)
    for (size_t k = 0; k < pages; k++)
      if (a->dirty[(i + k) / 64] >> ((i + k) % 64) & 1) was_dirty[k / 64] |= (uint64_t)1 << (k % 64);
  *clean = run_clean(a, i, pages);
  run_mark(a, i, pages);
  size_t r0, r1;
  huge_mark(a, i, pages, huge, &r0, &r1);
  atomic_store_explicit(&arena_taken_ms, hak_os_now_ms(), memory_order_relaxed);
  pthread_mutex_unlock(&arena_lock);
  huge_advise(a, r0, r1);
  char *run = a->data + i * HAK_PAGE_SIZE;
  /* The pages that may hold old data, within [zero_from, zero_to): ours now. */
  for (size_t k = zero_from / HAK_PAGE_SIZE; zero_to > zero_from && k * HAK_PAGE_SIZE < zero_to; k++) {
    if (!(was_dirty[k / 64] >> (k % 64) & 1)) continue;
    size_t from = k * HAK_PAGE_SIZE > zero_from ? k * HAK_PAGE_SIZE : zero_from;
    size_t to = (k + 1) * HAK_PAGE_SIZE < zero_to ? (k + 1) * HAK_PAGE_SIZE : zero_to;
    memset(run + from, 0, to - from);
  }
  return run;
}

void hak_arena_give(void *run, size_t pages, bool purge, uint64_t freed_ms)
{
  hak_arena_t *a = arena_of(run);
  size_t i = page_index(a, run), from = i, to = purge ? i + pages : i;
  if (to > from) {  /* still ours: in no run, not free */
    hak_os_purge(a->data + from * HAK_PAGE_SIZE, (to - from) * HAK_PAGE_SIZE);
    huge_off(a, from, to - from);
    hak_gcount(&hak_gstats.purged_bytes, (to - from) * HAK_PAGE_SIZE);
  }
  uint64_t now = freed_ms != 0 ? freed_ms : hak_os_now_ms();
  pthread_mutex_lock(&arena_lock);
  size_t idle = a->idle - idle_in(a, i, pages);
  bits_put(a->free, i, pages, true);
  a->max_run = ARENA_PAGES;
  if (i / 64 < a->first_free) a->first_free = i / 64;
  a->hint_n = SIZE_MAX;
  bits_put(a->dirty, from, to - from, false);
  for (size_t w = i / 64; w <= (i + pages - 1) / 64; w++)
    if (a->freed_ms[w] < now) a->freed_ms[w] = now;
  uint64_t due = now + hak_opt.purge_delay_ms, was_due = atomic_load_explicit(&arena_due_ms, memory_order_relaxed);
  bool sooner = was_due == 0 || due < was_due;
  if (sooner) atomic_store_explicit(&arena_due_ms, due, memory_order_relaxed);
  arena_set_idle(a, idle + idle_in(a, i, pages));
  pthread_mutex_unlock(&arena_lock);
  if (sooner) hak_os_bell_ring();  /* the purger gives them back if they stay unused */
}

bool hak_arena_extend(void *run, size_t pages, size_t more, bool huge)
{
  hak_arena_t *a = arena_of(run);
  size_t i = page_index(a, run) + pages;
  if (i + more > ARENA_PAGES || pages + more > RUN_MAX_PAGES) return false;
  pthread_mutex_lock(&arena_lock);
  bool ok = bits_all(a->free, i, more);
  size_t r0 = 0, r1 = 0;
  if (ok) {
    run_mark(a, i, more);
    huge_mark(a, i - pages, pages + more, huge, &r0, &r1);
  }
  pthread_mutex_unlock(&arena_lock);
  huge_advise(a, r0, r1);
  return ok;
}

void *hak_arena_header_of(const void *base, const void *p)
{
  const hak_arena_t *a = base;
  uintptr_t q = (uintptr_t)p;
  if (q < (uintptr_t)a->data + 2 * sizeof(uintptr_t) || (q & (HAK_MIN_ALIGN - 1)) != 0) return NULL;
  uintptr_t h = ((const uintptr_t *)p)[-2];
  if (h < (uintptr_t)a->data || h >= q || (h & (HAK_PAGE_SIZE - 1)) != 0) return NULL;
  return (void *)h;
}

/* ------------------------------------------------------------------ decay */

/* Purge the runs of a->purging (outside the lock: no run holds them), each
 * with one call: a run that crosses words is one range, so a claimed huge
 * page goes back whole (a piece of one would split it, and its region would
 * fault 4 KiB at a time from then on). */
static void arena_purge_claimed(hak_arena_t *a)
{
  size_t start = 0, len = 0;  /* the run being gathered */
  for (size_t w = 0; w <= ARENA_WORDS; w++) {
    uint64_t c = w < ARENA_WORDS ? a->purging[w] : 0;
    for (unsigned b = 0; b < 64;) {
      uint64_t rest = c >> b;
      unsigned ones = ~rest == 0 ? 64 : (unsigned)__builtin_ctzll(~rest);  /* the claimed pages from b */
      if (ones != 0) {
        if (len == 0) start = w * 64 + b;
        len += ones;
        b += ones;
        continue;
      }
      if (len != 0) {
        hak_os_purge(a->data + start * HAK_PAGE_SIZE, len * HAK_PAGE_SIZE);
        huge_off(a, start, len);
        hak_gcount(&hak_gstats.purged_bytes, len * HAK_PAGE_SIZE);
        len = 0;
      }
      if (rest == 0) break;
      b += (unsigned)__builtin_ctzll(rest);
    }
  }
}

/* Claim for a pass (under the lock) the pages of [from, from + n) that are
 * free and, if idle_only, dirty: out of free, into purging.  Returns how
 * many. */
static size_t arena_claim_range(hak_arena_t *a, size_t from, size_t n, bool idle_only)
{
  size_t claimed = 0, idle = 0;
  while (n != 0) {
    size_t w = from / 64, b = from % 64, k = 64 - b < n ? 64 - b : n;
    uint64_t c = a->free[w] & (idle_only ? a->dirty[w] : ~(uint64_t)0) & bits_mask(b, k);
    a->purging[w] |= c;
    a->free[w] &= ~c;
    claimed += (size_t)hak_popcount64(c);
    idle += (size_t)hak_popcount64(c & a->dirty[w]);
    from += k;
    n -= k;
  }
  arena_set_idle(a, a->idle - idle);  /* out of free: idle no more */
  return claimed;
}

/* Claim (under the lock) the idle pages of [from, from + n) whose group
 * (the 64 pages of a freed_ms word) had none freed for `delay`; say when
 * the others fall due (*next, as arena_claim).  Returns the pages claimed. */
static size_t arena_claim_groups(hak_arena_t *a, size_t from, size_t n, uint64_t now, uint64_t delay,
                                 uint64_t *next)
{
  size_t claimed = 0;
  for (size_t w = from / 64; w * 64 < from + n; w++) {
    size_t lo = w * 64 > from ? w * 64 : from, hi = (w + 1) * 64 < from + n ? (w + 1) * 64 : from + n;
    if (!bits_test(a->free, a->dirty, lo, hi - lo, false)) continue;
    if (now - a->freed_ms[w] < delay) {
      if (*next == 0 || a->freed_ms[w] + delay < *next) *next = a->freed_ms[w] + delay;
      continue;
    }
    claimed += arena_claim_range(a, lo, hi - lo, true);
  }
  return claimed;
}

/* A pass's view of a's free pages (under the lock): claim those it gives
 * back, and say when the rest falls due (*next, the earliest; 0: none).
 * Pages that cannot be part of a huge page go by their group's age
 * (arena_claim_groups, `delay`: the caller's keep time, the purge delay,
 * longer while the program takes runs): the first 2 MiB region, which
 * holds the header, and any region without huge-page advice where only
 * advised ranges get huge pages (hak_os_huge_only_advised): there a live
 * run no longer keeps its free neighbours' pages for PINNED_DELAYS delays
 * (unit_large's "beside a live one").
 * The other regions may have huge pages: one goes back whole, with its
 * advice, once all its pages are free and their groups idle for `delay`.
 * A region a run still holds in part (pinned) keeps its free pages for
 * PINNED_DELAYS delays, since giving back part of a huge page splits it
 * and the region then faults 4 KiB at a time; then its idle pages go back
 * alone, so a long-lived block does not keep its neighbours' memory.  A
 * pinned region is never claimed whole: its live pages are a run's.  A
 * region all free and clean that still has huge pages is claimed whole
 * too, to lose them (huge_off).  force: every free page that keeps memory,
 * and those regions, at once.  Returns the pages claimed. */
#define PINNED_DELAYS 4
static size_t arena_claim(hak_arena_t *a, uint64_t now, bool force, uint64_t delay, uint64_t *next)
{
  size_t claimed = 0;
  if (force) {
    claimed = arena_claim_range(a, 0, HUGE_FIRST, true);
    for (size_t r = 0, from = HUGE_FIRST; r < HUGE_REGIONS; r++, from += HUGE_PAGES)
      claimed += arena_claim_range(a, from, HUGE_PAGES, !(bits_all(a->free, from, HUGE_PAGES) && a->huge[r]));
    return claimed;
  }
  claimed += arena_claim_groups(a, 0, HUGE_FIRST, now, delay, next);
  bool small = hak_os_huge_only_advised();  /* an unadvised region has 4 KiB pages */
  for (size_t r = 0, from = HUGE_FIRST; r < HUGE_REGIONS; r++, from += HUGE_PAGES) {
    /* All in runs: nothing to claim, and huge[r] may be a purging giver's
     * to clear outside the lock. */
    if (!bits_test(a->free, NULL, from, HUGE_PAGES, false)) continue;
    if (small && !a->huge[r]) {
      claimed += arena_claim_groups(a, from, HUGE_PAGES, now, delay, next);
      continue;
    }
    bool whole = bits_all(a->free, from, HUGE_PAGES);
    /* Nothing idle there, and no advice to take back. */
    if (!bits_test(a->free, a->dirty, from, HUGE_PAGES, false) && !(whole && a->huge[r])) continue;
    uint64_t at = 0;  /* when the region's last group falls due */
    for (size_t w = from / 64; w <= (from + HUGE_PAGES - 1) / 64; w++)
      if (a->freed_ms[w] + delay > at) at = a->freed_ms[w] + delay;
    if (!whole) at += (PINNED_DELAYS - 1) * delay;
    if (now < at) {
      if (*next == 0 || at < *next) *next = at;
      continue;
    }
    claimed += arena_claim_range(a, from, HUGE_PAGES, !whole);
  }
  return claimed;
}

uint64_t hak_arena_decay(uint64_t now, bool force, uint64_t keep_ms)
{
  if (atomic_load_explicit(&arena_idle_pages, memory_order_relaxed) == 0) return 0;
  uint64_t due = atomic_load_explicit(&arena_due_ms, memory_order_relaxed);
  if (!force && now < due) return due;
  pthread_mutex_lock(&arena_lock);
  /* A pass is purging outside the lock: a forced one (malloc_trim) waits
   * for it, so that every idle page is gone when it returns; another
   * looks again soon. */
  while (force && arena_decaying) pthread_cond_wait(&arena_pass_done, &arena_lock);
  if (arena_decaying) {
    pthread_mutex_unlock(&arena_lock);
    return now + 1;
  }
  size_t claimed = 0;
  uint64_t next = 0;
  for (hak_arena_t *a = arena_first; a != NULL; a = a->next) claimed += arena_claim(a, now, force, keep_ms, &next);
  arena_decaying = claimed != 0;
  hak_arena_t *last = arena_last;
  atomic_store_explicit(&arena_due_ms, next, memory_order_relaxed);  /* gives during the purge only lower it */
  pthread_mutex_unlock(&arena_lock);
  if (claimed == 0) return next;
  /* arena_decaying keeps the purging bits ours; arenas are only appended,
   * so the links up to `last` were written before it was read. */
  for (hak_arena_t *a = arena_first;; a = a->next) {
    arena_purge_claimed(a);
    if (a == last) break;
  }
  pthread_mutex_lock(&arena_lock);
  for (hak_arena_t *a = arena_first; a != NULL; a = a->next) {
    for (size_t w = 0; w < ARENA_WORDS; w++) {
      a->free[w] |= a->purging[w];
      a->dirty[w] &= ~a->purging[w];
      a->purging[w] = 0;
    }
    arena_recount(a);
  }
  arena_decaying = false;
  pthread_cond_broadcast(&arena_pass_done);
  if (atomic_load_explicit(&arena_idle_pages, memory_order_relaxed) == 0)
    atomic_store_explicit(&arena_due_ms, 0, memory_order_relaxed);
  next = atomic_load_explicit(&arena_due_ms, memory_order_relaxed);
  pthread_mutex_unlock(&arena_lock);
  return next;
}

uint64_t hak_arena_taken_ms(void) { return atomic_load_explicit(&arena_taken_ms, memory_order_relaxed); }

uint64_t hak_arena_next_due(void)
{
  if (atomic_load_explicit(&arena_idle_pages, memory_order_relaxed) == 0) return 0;
  return atomic_load_explicit(&arena_due_ms, memory_order_relaxed);
}

size_t hak_arena_idle_bytes(void)
{
  return atomic_load_explicit(&arena_idle_pages, memory_order_relaxed) * HAK_PAGE_SIZE;
}

/* ------------------------------------------------------------------- fork */

void hak_arena_before_fork(void) { pthread_mutex_lock(&arena_lock); }

/* In the child a pass that was purging is gone: its pages are free again
 * (still counted dirty: they may not have been purged). */
void hak_arena_after_fork(bool child)
{
  if (!child) {
    pthread_mutex_unlock(&arena_lock);
    return;
  }
  pthread_mutex_init(&arena_lock, NULL);
  pthread_cond_init(&arena_pass_done, NULL);
  for (hak_arena_t *a = arena_first; a != NULL && arena_decaying; a = a->next) {
    for (size_t w = 0; w < ARENA_WORDS; w++) {
      a->free[w] |= a->purging[w];
      a->purging[w] = 0;
    }
    arena_recount(a);
  }
  if (arena_decaying) atomic_store_explicit(&arena_due_ms, 1, memory_order_relaxed);  /* due: the next pass looks again */
  arena_decaying = false;
}
