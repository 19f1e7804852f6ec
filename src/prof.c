/* The sampling heap profiler: which blocks are sampled, their call stacks
 * (allocation sites) and the sampled blocks still live.
 *
 * Sampling is tcmalloc's: each thread counts down the bytes it allocates,
 * from a random interval drawn from an exponential distribution of mean
 * HAKMEM_PROF_SAMPLE = T; the allocation that reaches zero is sampled and a
 * new interval drawn.  The sample points form a Poisson process over the
 * allocated bytes, so a block of s bytes is sampled with probability
 * p = 1 - exp(-s/T), and a sampled block stands for s/p bytes and 1/p
 * blocks: the estimates are unbiased whatever the sizes.
 *
 * Memory: one mapping (os.c) of fixed-size tables (types.h,
 * hak_prof_tables_t): HAK_PROF_SITES sites and HAK_PROF_BLOCKS live sampled
 * blocks.  A sample that finds no room is counted lost, never allocated
 * for.  Everything is lock-free: slots are claimed with a CAS.
 *
 * The fast paths stay on: malloc's counts down (hak_heap_t.prof_left), and
 * a sampled block of up to a page is served by a slot of the profiler's
 * region (below), a larger one by a mapping of its own (large.c); the free
 * of either, by any thread, misses owned[] and comes by hak_free_generic:
 * a slot's to hak_prof_slot_free, a large block's to hak_prof_free, which
 * looks at one filter counter (only a free of a page with sampled blocks
 * looks the block up).
 *
 * Signals: nothing here takes a lock.  A malloc made while this thread
 * captures a stack (by the unwinder, or by a signal handler) is not
 * sampled; the first is counted (counts.recursions). */
#include <sched.h>
#include <time.h>

#include "prof.h"
#include "os.h"
#include "fmt.h"
#include "fmath.h"
#include "options.h"
#include "stack.h"

hak_prof_tables_t *_Atomic hak_prof_tables;   /* set once by hak_prof_start (release) */
static hak_prof_tables_t *tables;             /* hak_prof_init: mapped, not yet published */
static hak_prof_counts_t counts;
static double interval;                       /* HAKMEM_PROF_SAMPLE, written at init */

static char *slot_base;                       /* hak_prof_init: HAK_PROF_SLOTS pages, read-only after */

/* This thread's sampling state, its own. */
static __thread uint64_t tls_rng;              /* xorshift state, 0 until seeded */
static __thread uint32_t tls_tid;              /* profiler thread id, 0 until needed */
static __thread uint32_t tls_inside;           /* recording sections entered (nested: a signal) */
static __thread bool tls_capturing;            /* capturing a stack: no sampling */
static __thread bool tls_forking;              /* this thread runs the fork handlers */
static _Atomic(uint32_t) next_tid;

/* Fork: threads inside a recording section, and the fork under way.  A
 * recording thread increments busy and then reads forking; the forking
 * thread sets forking and then waits for busy to drain (both seq_cst: one of
 * the two sees the other). */
static _Atomic(uint32_t) busy;
static _Atomic(bool) forking;

#define BLOCK_PROBES 64
#define SITE_PROBES 256
#define KEY_BUSY 1
#define KEY_GONE 2

void hak_prof_init(void)
{
  if (!hak_opt.prof) return;
  interval = (double)hak_opt.prof_sample;
  tables = hak_os_map_aligned(hak_align_up(sizeof(hak_prof_tables_t), HAK_PAGE_SIZE), HAK_PAGE_SIZE);
  /* 2 MiB-aligned: the registry's regions are the region's alone. */
  slot_base = tables != NULL ? hak_os_map_aligned((size_t)HAK_PROF_SLOTS * HAK_PAGE_SIZE, HAK_SS_SIZE) : NULL;
  if (slot_base == NULL) {
    hak_write_stderr("hakmem: HAKMEM_PROF=1: cannot map the profiler's tables; profiling off\n");
    tables = NULL;   /* a mapped table is left: once, at start-up */
  }
}

void hak_prof_disable(void)
{
  hak_write_stderr("hakmem: HAKMEM_PROF=1: cannot register the profiler's slots; profiling off\n");
  tables = NULL;
}

bool hak_prof_region(void **base, size_t *size)
{
  if (tables == NULL) return false;
  *base = slot_base;
  *size = (size_t)HAK_PROF_SLOTS * HAK_PAGE_SIZE;
  return true;
}

void hak_prof_start(void)
{
  if (tables == NULL) return;
  if (!hak_stack_init()) {
    hak_write_stderr("hakmem: HAKMEM_PROF=1 needs an unwinder (libgcc_s.so.1 or libunwind.so.8); profiling off\n");
    return;
  }
  atomic_store_explicit(&hak_prof_tables, tables, memory_order_release);
}

bool hak_prof_active(void) { return atomic_load_explicit(&hak_prof_tables, memory_order_acquire) != NULL; }

void hak_prof_get_counts(hak_prof_counts_t *out)
{
  atomic_store_explicit(&out->samples, atomic_load_explicit(&counts.samples, memory_order_relaxed), memory_order_relaxed);
  atomic_store_explicit(&out->lost_sites, atomic_load_explicit(&counts.lost_sites, memory_order_relaxed), memory_order_relaxed);
  atomic_store_explicit(&out->lost_blocks, atomic_load_explicit(&counts.lost_blocks, memory_order_relaxed), memory_order_relaxed);
  atomic_store_explicit(&out->lost_fork, atomic_load_explicit(&counts.lost_fork, memory_order_relaxed), memory_order_relaxed);
  atomic_store_explicit(&out->recursions, atomic_load_explicit(&counts.recursions, memory_order_relaxed), memory_order_relaxed);
}

void hak_prof_capture_guard(bool on) { tls_capturing = on; }

static void count(_Atomic(uint64_t) *c, uint64_t n) { atomic_fetch_add_explicit(c, n, memory_order_relaxed); }

/* ------------------------------------------------------------------ fork */

/* Enter a recording section; false while a fork is under way (then wait:
 * wait until it is over and enter, else give up). */
static bool enter(bool wait)
{
  for (;;) {
    tls_inside++;   /* first: a fork from a signal handler here waits for no more than it counts */
    atomic_fetch_add_explicit(&busy, 1, memory_order_seq_cst);
    if (tls_forking || !atomic_load_explicit(&forking, memory_order_seq_cst)) return true;
    atomic_fetch_sub_explicit(&busy, 1, memory_order_release);
    tls_inside--;
    if (!wait) return false;
    while (atomic_load_explicit(&forking, memory_order_acquire)) sched_yield();
  }
}

static void leave(void)
{
  tls_inside--;
  atomic_fetch_sub_explicit(&busy, 1, memory_order_release);
}

/* Signals are blocked (init.c): no handler of this thread records during
 * the wait; a section this thread was in when it forked (fork from a
 * signal handler) is its own, not waited for. */
void hak_prof_before_fork(void)
{
  if (tables == NULL) return;
  tls_forking = true;
  atomic_store_explicit(&forking, true, memory_order_seq_cst);
  while (atomic_load_explicit(&busy, memory_order_acquire) > tls_inside) sched_yield();
}

/* In the parent and the child: in the child no other thread exists, and
 * none was inside a section when it forked. */
void hak_prof_after_fork(void)
{
  if (tables == NULL) return;
  tls_forking = false;
  atomic_store_explicit(&forking, false, memory_order_release);
}

/* ---------------------------------------------------------------- sampling */

static uint64_t rng_next(void)
{
  uint64_t x = tls_rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  tls_rng = x;
  return x * 0x2545f4914f6cdd1dull;
}

static void rng_seed(void)
{
  static _Atomic(uint64_t) seeds;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uintptr_t)&tls_rng;
  s ^= (atomic_fetch_add_explicit(&seeds, 1, memory_order_relaxed) + 1) * 0x9e3779b97f4a7c15ull;
  tls_rng = s != 0 ? s : 1;
}

/* An exponential interval of mean T bytes, at least 1. */
static uint64_t next_interval(void)
{
  double u = (double)((rng_next() >> 11) + 1) * 0x1.0p-53;   /* (0, 1] */
  double x = -hak_log(u) * interval / 16;   /* in units of 16 bytes (prof.h) */
  if (x < 1) return 1;
  if (x > 0x1.0p62) return (uint64_t)1 << 62;
  return (uint64_t)x;
}

static uint32_t thread_id(void)
{
  if (HAK_UNLIKELY(tls_tid == 0)) tls_tid = atomic_fetch_add_explicit(&next_tid, 1, memory_order_relaxed) + 1;
  return tls_tid;
}

static uint64_t stack_hash(const uintptr_t *pc, uint32_t depth)
{
  uint64_t h = depth;
  for (uint32_t i = 0; i < depth; i++) {
    h = (h ^ pc[i]) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  return h | KEY_GONE;   /* >= 2: never a free or busy key */
}

static bool same_stack(const hak_prof_site_t *s, const uintptr_t *pc, uint32_t depth)
{
  if (s->depth != depth) return false;
  for (uint32_t i = 0; i < depth; i++)
    if (s->pc[i] != pc[i]) return false;
  return true;
}

/* The site of this stack, claimed if new; -1 if none is free within
 * SITE_PROBES.  A slot being written is passed over: the same stack may
 * then get two sites, which pprof adds up. */
static int64_t site_get(hak_prof_tables_t *t, const uintptr_t *pc, uint32_t depth)
{
  uint64_t h = stack_hash(pc, depth);
  uint32_t i = (uint32_t)(h >> 32) % HAK_PROF_SITES;
  for (int k = 0; k < SITE_PROBES; k++, i = (i + 1) % HAK_PROF_SITES) {
    hak_prof_site_t *s = &t->sites[i];
    uint64_t key = atomic_load_explicit(&s->key, memory_order_acquire);
    if (key == 0) {
      if (atomic_compare_exchange_strong_explicit(&s->key, &key, KEY_BUSY, memory_order_acquire,
                                                  memory_order_acquire)) {
        s->depth = depth;
        for (uint32_t d = 0; d < depth; d++) s->pc[d] = pc[d];
        atomic_store_explicit(&s->key, h, memory_order_release);
        return i;
      }
      /* key now holds the winner's: busy, or (written meanwhile) a hash */
    }
    if (key == h && same_stack(s, pc, depth)) return i;
  }
  return -1;
}

static uint32_t block_index(uintptr_t p) { return (uint32_t)(((p >> 4) * 0x9e3779b97f4a7c15ull) >> (64 - 17)); }
_Static_assert(HAK_PROF_BLOCKS == 1u << 17, "block_index's bits");

static bool block_put(hak_prof_tables_t *t, uintptr_t p, uint32_t site, uint64_t bytes, uint64_t fx)
{
  uint32_t i = block_index(p);
  for (int k = 0; k < BLOCK_PROBES; k++, i = (i + 1) % HAK_PROF_BLOCKS) {
    hak_prof_block_t *b = &t->blocks[i];
    uintptr_t key = atomic_load_explicit(&b->key, memory_order_relaxed);
    if (key != 0 && key != KEY_GONE) continue;
    if (!atomic_compare_exchange_strong_explicit(&b->key, &key, KEY_BUSY, memory_order_acquire, memory_order_relaxed))
      continue;
    atomic_store_explicit(&b->site, site, memory_order_relaxed);
    atomic_store_explicit(&b->tid, thread_id(), memory_order_relaxed);
    atomic_store_explicit(&b->bytes, bytes, memory_order_relaxed);
    atomic_store_explicit(&b->fx, fx, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->filter[hak_prof_filter_index(p)], 1, memory_order_relaxed);
    atomic_store_explicit(&b->key, p, memory_order_release);
    return true;
  }
  return false;
}

/* Record the sampled block p of n bytes: its stack, its site's estimates,
 * and the block itself while it lives. */
static HAK_NOINLINE void sample(hak_prof_tables_t *t, void *p, size_t n)
{
  count(&counts.samples, 1);
  uintptr_t pc[HAK_PROF_DEPTH];
  tls_capturing = true;
  int depth = hak_stack_capture(pc, HAK_PROF_DEPTH, 1);   /* sample's own frame */
  tls_capturing = false;
  if (depth <= 0) {
    pc[0] = 0;
    depth = 1;
  }
  /* The countdown runs in units of 16 bytes (prof.h): a block of u units
   * crosses it with probability 1 - exp(-16u/T), accurately. */
  double prob = -hak_expm1(-(double)(16 * (uint64_t)hak_prof_units(n)) / interval);
  uint64_t bytes = (uint64_t)((double)n / prob + 0.5);
  uint64_t fx = (uint64_t)((double)HAK_PROF_FX / prob + 0.5);
  int64_t s = site_get(t, pc, (uint32_t)depth);
  if (s < 0) {
    count(&counts.lost_sites, 1);
    return;
  }
  hak_prof_site_t *site = &t->sites[s];
  count(&site->alloc_bytes, bytes);
  count(&site->alloc_fx, fx);
  if (!block_put(t, (uintptr_t)p, (uint32_t)s, bytes, fx)) {
    count(&counts.lost_blocks, 1);
    return;
  }
  count(&site->live_bytes, bytes);
  count(&site->live_fx, fx);
}

int64_t hak_prof_next_left(void)
{
  if (HAK_LIKELY(!hak_opt.prof)) return INT64_MAX;
  if (HAK_UNLIKELY(tls_rng == 0)) rng_seed();
  return (int64_t)next_interval();
}

/* The countdown ran out inside this block (the next interval starts after
 * it: exponential intervals have no memory, the process stays Poisson). */
void hak_prof_record(void *p, size_t n)
{
  hak_prof_tables_t *t = atomic_load_explicit(&hak_prof_tables, memory_order_acquire);
  if (t == NULL || p == NULL) return;
  if (tls_capturing) {   /* the unwinder, or a signal handler meanwhile: never sampled */
    count(&counts.recursions, 1);
    return;
  }
  if (!enter(false)) {
    count(&counts.lost_fork, 1);
    return;
  }
  sample(t, p, n == 0 ? 1 : n);
  leave();
}

/* A free of a block on a page with sampled blocks: is p one? */
void hak_prof_free_slow(void *p)
{
  hak_prof_tables_t *t = atomic_load_explicit(&hak_prof_tables, memory_order_acquire);
  enter(true);
  uint32_t i = block_index((uintptr_t)p);
  for (int k = 0; k < BLOCK_PROBES; k++, i = (i + 1) % HAK_PROF_BLOCKS) {
    hak_prof_block_t *b = &t->blocks[i];
    uintptr_t key = atomic_load_explicit(&b->key, memory_order_acquire);
    if (key == 0) break;
    if (key != (uintptr_t)p) continue;
    uint32_t s = atomic_load_explicit(&b->site, memory_order_relaxed);
    uint32_t tid = atomic_load_explicit(&b->tid, memory_order_relaxed);
    uint64_t bytes = atomic_load_explicit(&b->bytes, memory_order_relaxed);
    uint64_t fx = atomic_load_explicit(&b->fx, memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&b->key, &key, KEY_GONE, memory_order_release, memory_order_relaxed))
      break;   /* removed by a concurrent free of the same block: a double free, caught elsewhere */
    atomic_fetch_sub_explicit(&t->filter[hak_prof_filter_index((uintptr_t)p)], 1, memory_order_relaxed);
    hak_prof_site_t *site = &t->sites[s];
    atomic_fetch_sub_explicit(&site->live_bytes, bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&site->live_fx, fx, memory_order_relaxed);
    if (tid != thread_id()) {
      count(&site->remote_bytes, bytes);
      count(&site->remote_fx, fx);
    }
    break;
  }
  leave();
}

/* ------------------------------------------------------------------ slots */

/* A free slot, or NULL when every slot is live.  acquire: the last free of
 * the slot (its pusher's release) happens before its new owner's use. */
void *hak_prof_slot_alloc(void)
{
  hak_prof_tables_t *t = atomic_load_explicit(&hak_prof_tables, memory_order_acquire);
  if (t == NULL) return NULL;
  uint64_t head = atomic_load_explicit(&t->slot_head, memory_order_acquire);
  uint32_t i;
  for (;;) {
    if ((uint32_t)head == 0) {
      if (atomic_load_explicit(&t->slot_carved, memory_order_relaxed) >= HAK_PROF_SLOTS) return NULL;
      i = atomic_fetch_add_explicit(&t->slot_carved, 1, memory_order_relaxed);
      if (i >= HAK_PROF_SLOTS) return NULL;
      break;
    }
    i = (uint32_t)head - 1;
    uint64_t next = atomic_load_explicit(&t->slot_next[i], memory_order_relaxed);
    uint64_t want = (((head >> 32) + 1) << 32) | next;
    if (atomic_compare_exchange_weak_explicit(&t->slot_head, &head, want, memory_order_acquire,
                                              memory_order_acquire))
      break;
  }
  atomic_store_explicit(&t->slot_live[i], 1, memory_order_relaxed);
  return slot_base + (size_t)i * HAK_PAGE_SIZE;
}

/* The slot of p, a pointer into the region; aborts unless p starts one. */
static uint32_t slot_index(const void *p, const char *what)
{
  size_t off = (size_t)((const char *)p - slot_base);
  if (off % HAK_PAGE_SIZE != 0 || off / HAK_PAGE_SIZE >= HAK_PROF_SLOTS) hak_fatal(what, p);
  return (uint32_t)(off / HAK_PAGE_SIZE);
}

size_t hak_prof_slot_usable(const void *p)
{
  hak_prof_tables_t *t = atomic_load_explicit(&hak_prof_tables, memory_order_acquire);
  uint32_t i = slot_index(p, "not a block start");
  return atomic_load_explicit(&t->slot_live[i], memory_order_relaxed) ? HAK_PAGE_SIZE : 0;
}

/* The record goes first: once the slot is on the stack another thread may
 * sample it again under the same address. */
void hak_prof_slot_free(void *p)
{
  hak_prof_tables_t *t = atomic_load_explicit(&hak_prof_tables, memory_order_acquire);
  uint32_t i = slot_index(p, "free(): not a block start");
  if (atomic_exchange_explicit(&t->slot_live[i], 0, memory_order_relaxed) != 1) hak_fatal("free(): double free", p);
  hak_prof_free_slow(p);
  uint64_t head = atomic_load_explicit(&t->slot_head, memory_order_relaxed);
  uint64_t want;
  do {
    atomic_store_explicit(&t->slot_next[i], (uint32_t)head, memory_order_relaxed);
    want = (((head >> 32) + 1) << 32) | (i + 1);
  } while (!atomic_compare_exchange_weak_explicit(&t->slot_head, &head, want, memory_order_release,
                                                  memory_order_relaxed));
}
