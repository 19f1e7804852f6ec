/* unit_faults: out of memory.  When hakmem cannot map memory, every
 * allocation function returns NULL with errno ENOMEM (posix_memalign returns
 * ENOMEM and leaves *out alone), realloc leaves the old block as it was, the
 * process keeps running, nothing allocated before is lost or changed, and
 * allocation works again once memory is back.
 *
 * Two ways to run out:
 *   - fault injection (this file built as unit_faults, linked with the test
 *     variant hakmem_fault: src/fault.h): hakmem's Nth and later mappings
 *     fail, or every Nth, or only its mremap calls (realloc growth);
 *   - a real address-space limit, setrlimit(RLIMIT_AS) (built as
 *     unit_faults_rlimit, linked with the release hakmem_api): every mmap of
 *     the process fails past the limit, liburcu's and glibc's too.
 *
 *   unit_faults [section]    sections (all by default):
 *     threads1, threads4     workers allocate small, medium and large blocks,
 *                            calloc, posix_memalign, aligned_alloc and realloc
 *                            growth until each fails; verify every block; the
 *                            memory comes back; each allocates again, verifies
 *                            and frees everything.  The workers' first
 *                            allocation comes after memory ran out (heap
 *                            creation under failure).  Injection build: the
 *                            6th and later mappings fail; rlimit build: the
 *                            limit is the process's size + 24 MiB.
 *     realloc                (injection) realloc growth of a large block when
 *                            mremap fails: copied instead; when mmap fails too:
 *                            NULL, the block unchanged; the large cache's
 *                            grow-a-smaller-mapping path failing.
 *     unmap                  (injection) munmap failing with ENOMEM (out of
 *                            vm.max_map_count): the range is abandoned.
 *     first                  (injection) 160 threads at once, each first
 *                            allocation failing (heap creation and SuperSlab
 *                            mapping), then succeeding.
 *     every                  (injection) 4 threads of random operations while
 *                            every 3rd mapping fails.
 *     env                    (injection, only when named) run with
 *                            HAKMEM_FAIL_MMAP_EVERY=3: some large mallocs
 *                            fail from the start.
 * After each section the counters balance: every block handed out was freed,
 * failed calls counted nothing.
 *
 * Under AddressSanitizer or ThreadSanitizer the rlimit build exits 77 (skip):
 * the sanitizers reserve terabytes of shadow address space at start, so any
 * RLIMIT_AS the test could set is exceeded already and the sanitizer's own
 * mappings would fail.  The injection build runs there in full.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hakmem.h"
#include "support/check.h"
#include "support/fill.h"
#include "support/hak.h"
#include "support/rss.h"
#ifdef HAKMEM_FAULT_INJECTION
#include "fault.h"
#endif

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

/* ------------------------------------------------------------ tracking */

/* Failures inside worker threads (CHECK's counters belong to the main
 * thread): counted here and printed at once (stderr is unbuffered, so the
 * print allocates nothing, also under the limit). */
static _Atomic unsigned long thread_failures;

/* The counters now, checked against before: allocs and frees moved by as
 * much (no block lost or counted twice) and, if live, live_bytes is back
 * where it was.  Returns the counters read. */
static hak_stats_t check_balanced(hak_stats_t before, bool live)
{
  hak_stats_t after = ts_stats_now();
  CHECK(after.allocs - before.allocs == after.frees - before.frees,
        "allocs +%llu, frees +%llu: blocks lost or counted twice",
        (unsigned long long)(after.allocs - before.allocs), (unsigned long long)(after.frees - before.frees));
  if (live)
    CHECK(after.live_bytes == before.live_bytes, "live_bytes %llu, was %llu",
          (unsigned long long)after.live_bytes, (unsigned long long)before.live_bytes);
  return after;
}
#define TCHECK(cond, ...)                                                \
  do {                                                                   \
    if (!(cond)) {                                                       \
      if (atomic_fetch_add(&thread_failures, 1) < 40) {                  \
        fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
        fprintf(stderr, __VA_ARGS__);                                    \
        fputc('\n', stderr);                                             \
      }                                                                  \
    }                                                                    \
  } while (0)

typedef struct { void *p; size_t n; uintptr_t seed; } blk_t;

/* A worker's blocks.  The array is allocated (by libc) before memory runs
 * out, with room for BUDGET bytes of the smallest size. */
typedef struct {
  blk_t *v;
  size_t len, cap;
  uintptr_t next_seed;
} set_t;

#define BUDGET (64 * MiB)   /* per kind of size: stop there if nothing failed */
#define MIN_SMALL 128

static void set_init(set_t *s, uintptr_t seed_base)
{
  s->cap = 3 * BUDGET / MIN_SMALL + 1024;
  s->v = calloc(s->cap, sizeof *s->v);
  REQUIRE(s->v != NULL, "test's own calloc failed");
  s->len = 0;
  s->next_seed = seed_base;
}

/* Fill p (n bytes) with a fresh pattern and track it. */
static void track(set_t *s, void *p, size_t n)
{
  TCHECK(s->len < s->cap, "tracking array full");
  if (s->len >= s->cap) return;
  uintptr_t seed = s->next_seed++;
  ts_words_fill(p, n, seed);
  s->v[s->len++] = (blk_t){p, n, seed};
}

static size_t verify_all(set_t *s, const char *when)
{
  size_t bad = 0;
  for (size_t i = 0; i < s->len; i++) {
    size_t off = ts_words_verify(s->v[i].p, s->v[i].n, s->v[i].seed);
    if (off != s->v[i].n) {
      bad++;
      TCHECK(off == s->v[i].n, "%s: block %p (%zu bytes) differs at offset %zu", when, s->v[i].p,
             s->v[i].n, off);
    }
  }
  return bad;
}

static void free_all(set_t *s)
{
  for (size_t i = 0; i < s->len; i++) hak_free(s->v[i].p);
  s->len = 0;
}

/* A NULL result must come with errno ENOMEM. */
#define EXPECT_ENOMEM(what) TCHECK(errno == ENOMEM, "%s: NULL with errno %d, not ENOMEM", what, errno)

/* ------------------------------------------------------- running out */

/* How memory runs out and comes back: injection or the address-space limit. */
#if defined(HAKMEM_FAULT_INJECTION)
#define MODE "injection"
static void memory_off(void) { hak_test_fail_mmap(6, 0, HAK_FAULT_ALL); }
static void memory_on(void) { hak_test_fail_mmap(0, 0, 0); }
#else
#define MODE "rlimit"
static struct rlimit saved_limit;

static void memory_off(void)
{
  size_t vm = ts_vm_bytes();
  REQUIRE(vm != 0, "cannot read /proc/self/statm");
  REQUIRE(getrlimit(RLIMIT_AS, &saved_limit) == 0, "getrlimit: %s", strerror(errno));
  struct rlimit l = saved_limit;
  l.rlim_cur = vm + 24 * MiB;
  if (saved_limit.rlim_max != RLIM_INFINITY && l.rlim_cur > saved_limit.rlim_max) l.rlim_cur = saved_limit.rlim_max;
  REQUIRE(setrlimit(RLIMIT_AS, &l) == 0, "setrlimit: %s", strerror(errno));
}

static void memory_on(void)
{
  REQUIRE(setrlimit(RLIMIT_AS, &saved_limit) == 0, "setrlimit back: %s", strerror(errno));
}
#endif

/* ----------------------------------------------------------- workers */

typedef struct {
  int id;
  set_t set;
  pthread_barrier_t *bar;
  unsigned long failures_seen;   /* NULL results under the shortage */
  bool small_failed, medium_failed, large_failed;
} worker_t;

static size_t small_size(size_t i) { return MIN_SMALL + (i * 40) % (1024 - MIN_SMALL + 1); }
static size_t medium_size(size_t i) { return 2 * KiB + (i * 7919) % (250 * KiB); }
static size_t large_size(size_t i) { return 300 * KiB + (i * 611953) % (4 * MiB); }

/* Allocate blocks of size(i) with malloc until one fails or BUDGET bytes. */
static bool alloc_until_failure(worker_t *w, size_t (*size)(size_t), const char *what)
{
  size_t total = 0;
  for (size_t i = 0; total < BUDGET; i++) {
    size_t n = size(i);
    errno = 0;
    void *p = hak_malloc(n);
    if (p == NULL) {
      EXPECT_ENOMEM(what);
      w->failures_seen++;
      return true;
    }
    track(&w->set, p, n);
    total += n;
  }
  return false;
}

/* Every other allocation function, until each fails (bounded). */
static void others_until_failure(worker_t *w)
{
  bool failed = false;
  size_t total = 0;   /* each loop below stops at BUDGET bytes if nothing failed */
  for (size_t i = 0; total < BUDGET && !failed; i++) {   /* calloc: zeroed, or NULL + ENOMEM */
    size_t n = i % 2 ? small_size(i) : large_size(i);
    errno = 0;
    unsigned char *p = hak_calloc(1, n);
    if (p == NULL) { EXPECT_ENOMEM("calloc"); failed = true; break; }
    TCHECK(ts_first_nonzero(p, n) == n, "calloc(%zu): byte %zu not zero", n, ts_first_nonzero(p, n));
    track(&w->set, p, n);
    total += n;
  }
  w->failures_seen += failed;
  failed = false;
  total = 0;
  /* posix_memalign: ENOMEM returned and in errno (as glibc's, which
   * programs read), *out untouched */
  for (size_t i = 0; total < BUDGET && !failed; i++) {
    size_t n = i % 2 ? medium_size(i) : large_size(i), align = (size_t)64 << (i % 7);
    void *sentinel = (void *)(uintptr_t)0x5eed, *p = sentinel;
    errno = 1234;
    int rc = hak_posix_memalign(&p, align, n);
    if (rc != 0) {
      TCHECK(rc == ENOMEM, "posix_memalign returned %d, not ENOMEM", rc);
      TCHECK(p == sentinel, "posix_memalign failed and wrote *out");
      TCHECK(errno == ENOMEM, "posix_memalign left errno %d, not ENOMEM", errno);
      failed = true;
      break;
    }
    TCHECK(ts_aligned_to(p, align), "posix_memalign: %p not %zu-aligned", p, align);
    track(&w->set, p, n);
    total += n;
  }
  w->failures_seen += failed;
  failed = false;
  total = 0;
  for (size_t i = 0; total < BUDGET && !failed; i++) {   /* aligned_alloc, up to 4 MiB alignment */
    size_t align = (size_t)4096 << (i % 11), n = align * (1 + i % 3);
    errno = 0;
    void *p = hak_aligned_alloc(align, n);
    if (p == NULL) { EXPECT_ENOMEM("aligned_alloc"); failed = true; break; }
    TCHECK(ts_aligned_to(p, align), "aligned_alloc: %p not %zu-aligned", p, align);
    track(&w->set, p, n);
    total += n;
  }
  w->failures_seen += failed;
  /* realloc growth of a large block far beyond what is left: NULL + ENOMEM,
   * the block unchanged (it stays tracked).  1 GiB never fits. */
  for (size_t i = 0; i < w->set.len; i++) {
    blk_t *b = &w->set.v[i];
    if (b->n <= 256 * KiB) continue;
    errno = 0;
    void *q = hak_realloc(b->p, 1024 * MiB);
    TCHECK(q == NULL, "realloc to 1 GiB succeeded out of memory");
    if (q == NULL) {
      EXPECT_ENOMEM("realloc growth");
      w->failures_seen++;
    } else {
      b->p = q;   /* keep the test going: the prefix must still be there */
    }
    break;
  }
  errno = 0;
  TCHECK(hak_malloc(1024 * MiB) == NULL, "malloc(1 GiB) succeeded out of memory");
  EXPECT_ENOMEM("malloc(1 GiB)");
}

/* After memory is back: one of each kind succeeds and is right. */
static void alloc_again(worker_t *w)
{
  for (size_t i = 0; i < 8; i++) {
    size_t sizes[3] = {small_size(i), medium_size(i), large_size(i)};
    for (int k = 0; k < 3; k++) {
      void *p = hak_malloc(sizes[k]);
      TCHECK(p != NULL, "malloc(%zu) failed after memory came back (errno %d)", sizes[k], errno);
      if (p != NULL) track(&w->set, p, sizes[k]);
    }
  }
  unsigned char *c = hak_calloc(3, 500 * KiB);
  TCHECK(c != NULL && ts_first_nonzero(c, 1500 * KiB) == 1500 * KiB, "calloc after recovery");
  if (c != NULL) track(&w->set, c, 1500 * KiB);
  void *p = NULL;
  TCHECK(hak_posix_memalign(&p, 4096, 10000) == 0 && ts_aligned_to(p, 4096), "posix_memalign after recovery");
  if (p != NULL) track(&w->set, p, 10000);
  void *a = hak_aligned_alloc(4 * MiB, 5 * MiB);
  TCHECK(a != NULL && ts_aligned_to(a, 4 * MiB), "aligned_alloc after recovery");
  if (a != NULL) track(&w->set, a, 5 * MiB);
  /* realloc growth of a large block now works and keeps its contents */
  for (size_t i = 0; i < w->set.len; i++) {
    blk_t *b = &w->set.v[i];
    if (b->n <= 256 * KiB) continue;
    size_t old = b->n;
    void *q = hak_realloc(b->p, old + 9 * MiB);
    TCHECK(q != NULL, "realloc growth after recovery failed");
    if (q == NULL) break;
    size_t off = ts_words_verify(q, old, b->seed);
    TCHECK(off == old, "realloc growth lost byte %zu of %zu", off, old);
    b->p = q;
    b->n = old + 9 * MiB;
    ts_words_fill(q, b->n, b->seed);
    break;
  }
}

static void *worker(void *arg)
{
  worker_t *w = arg;
  pthread_barrier_wait(w->bar);      /* memory is short from here on */
  w->small_failed = alloc_until_failure(w, small_size, "malloc small");
  w->medium_failed = alloc_until_failure(w, medium_size, "malloc medium");
  w->large_failed = alloc_until_failure(w, large_size, "malloc large");
  others_until_failure(w);
  verify_all(&w->set, "after the failures");
  pthread_barrier_wait(w->bar);      /* main restores memory */
  pthread_barrier_wait(w->bar);
  alloc_again(w);
  verify_all(&w->set, "after recovery");
  free_all(&w->set);
  return NULL;
}

/* Main's own blocks, allocated before memory runs out and checked after. */
static void main_blocks(set_t *s)
{
  for (size_t i = 0; i < 64; i++) {
    size_t n = i % 3 == 0 ? small_size(i) : i % 3 == 1 ? medium_size(i) : large_size(i);
    void *p = hak_malloc(n);
    REQUIRE(p != NULL, "malloc(%zu) before the test", n);
    track(s, p, n);
  }
  /* Some freed: the caches hold memory the shortage may be served from. */
  for (size_t i = 0; i < s->len; i += 4) {
    hak_free(s->v[i].p);
    s->v[i] = s->v[--s->len];
  }
}

static void section_threads(int nthreads)
{
  char name[64];
  snprintf(name, sizeof name, "%d thread%s, %s", nthreads, nthreads > 1 ? "s" : "", MODE);
  ts_check_begin(name);
  atomic_store(&thread_failures, 0);
  hak_stats_t before = ts_stats_now();
  set_t mine;
  set_init(&mine, 1u << 30);
  main_blocks(&mine);

  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)nthreads + 1);
  worker_t *w = calloc((size_t)nthreads, sizeof *w);
  pthread_t *t = calloc((size_t)nthreads, sizeof *t);
  REQUIRE(w != NULL && t != NULL, "test's own calloc failed");
  for (int i = 0; i < nthreads; i++) {
    w[i].id = i;
    w[i].bar = &bar;
    set_init(&w[i].set, (uintptr_t)(i + 1) << 32);
    REQUIRE(pthread_create(&t[i], NULL, worker, &w[i]) == 0, "pthread_create");
  }
  fflush(NULL);
  memory_off();
  pthread_barrier_wait(&bar);        /* workers run out */
  pthread_barrier_wait(&bar);        /* ... and have verified their blocks */
  memory_on();
#ifdef HAKMEM_FAULT_INJECTION
  uint64_t injected = hak_test_fail_mmap_injected();
#endif
  pthread_barrier_wait(&bar);        /* workers allocate again */
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);

  CHECK(verify_all(&mine, "main's blocks") == 0, "main's blocks changed");
  unsigned long seen = 0, small = 0, medium = 0, large = 0;
  for (int i = 0; i < nthreads; i++) {
    seen += w[i].failures_seen;
    small += w[i].small_failed;
    medium += w[i].medium_failed;
    large += w[i].large_failed;
    free(w[i].set.v);
  }
  printf("   %lu allocation failures seen; malloc failed in %lu/%lu/%lu of %d threads "
         "(small/medium/large)\n", seen, small, medium, large, nthreads);
#ifdef HAKMEM_FAULT_INJECTION
  printf("   %llu mappings failed by injection\n", (unsigned long long)injected);
  CHECK(injected > 0, "no mapping failed: the test tested nothing");
#endif
  /* Every thread ran out of each kind (budget permitting: the large kind
   * always does, it maps per block). */
  CHECK(large == (unsigned long)nthreads, "only %lu of %d threads saw a large malloc fail", large, nthreads);
  CHECK(seen >= 4u * (unsigned)nthreads, "only %lu failures in %d threads", seen, nthreads);
  CHECK(atomic_load(&thread_failures) == 0, "%lu failures in the workers", atomic_load(&thread_failures));
  free_all(&mine);
  free(mine.v);
  free(w);
  free(t);
  pthread_barrier_destroy(&bar);

  hak_stats_t after = check_balanced(before, true);
  CHECK(after.mapped_bytes < ((uint64_t)1 << 40), "mapped_bytes %llu: the count went below zero",
        (unsigned long long)after.mapped_bytes);
}

#ifdef HAKMEM_FAULT_INJECTION
/* -------------------------------------------------- realloc and mremap */

static void section_realloc(void)
{
  ts_check_begin("realloc growth when mremap fails (injection)");
  atomic_store(&thread_failures, 0);
  hak_stats_t before = ts_stats_now();
  size_t n = 12 * MiB;  /* above the arenas' 8 MiB: a mapping of its own, grown by mremap */
  void *p = hak_malloc(n);
  REQUIRE(p != NULL, "malloc(12 MiB)");
  ts_words_fill(p, n, 77);

  /* mremap fails, mmap works: the block is copied to a new one. */
  uint64_t inj = hak_test_fail_mmap_injected();
  hak_test_fail_mmap(1, 0, HAK_FAULT_GROW | HAK_FAULT_MOVE);
  void *q = hak_realloc(p, 24 * MiB);
  hak_test_fail_mmap(0, 0, 0);
  REQUIRE(q != NULL, "realloc(24 MiB) with mremap failing: NULL (errno %d)", errno);
  CHECK(hak_test_fail_mmap_injected() > inj, "no mremap was failed: the path was not taken");
  CHECK(ts_words_verify(q, n, 77) == n, "realloc by copy lost the contents");
  CHECK(hak_malloc_usable_size(q) >= 24 * MiB, "usable %zu", hak_malloc_usable_size(q));
  ts_words_fill(q, 24 * MiB, 78);
  n = 24 * MiB;

  /* Everything fails: NULL, ENOMEM, the block as it was. */
  size_t usable = hak_malloc_usable_size(q);
  hak_test_fail_mmap(1, 0, HAK_FAULT_ALL);
  errno = 0;
  void *r = hak_realloc(q, 100 * MiB);
  int err = errno;
  hak_test_fail_mmap(0, 0, 0);
  CHECK(r == NULL && err == ENOMEM, "realloc(100 MiB) with every mapping failing: %p, errno %d", r, err);
  CHECK(hak_malloc_usable_size(q) == usable, "usable size changed: %zu, was %zu", hak_malloc_usable_size(q), usable);
  CHECK(ts_words_verify(q, n, 78) == n, "the block changed after a failed realloc");

  /* Shrinking needs no mapping: works while mappings fail. */
  hak_test_fail_mmap(1, 0, HAK_FAULT_ALL);
  r = hak_realloc(q, 2 * MiB);
  hak_test_fail_mmap(0, 0, 0);
  CHECK(r != NULL, "large shrink failed while mappings fail");
  if (r != NULL) q = r, n = 2 * MiB;
  CHECK(ts_words_verify(q, n, 78) == n, "shrink lost the contents");

  /* Memory back: the same growth works. */
  r = hak_realloc(q, 100 * MiB);
  CHECK(r != NULL, "realloc(100 MiB) after recovery failed");
  if (r != NULL) {
    CHECK(ts_words_verify(r, n, 78) == n, "growth after recovery lost the contents");
    q = r;
  }
  hak_free(q);

  /* The large cache: a freed 4 MiB mapping is the best a 10 MiB request
   * finds; growing it fails, so does a fresh mapping: NULL, ENOMEM. */
  hak_collect();   /* the cache empty: the next mapping freed is the only one */
  void *a = hak_malloc(4 * MiB), *keep = hak_malloc(6 * MiB);
  REQUIRE(a != NULL && keep != NULL, "malloc 4 + 6 MiB");
  ts_words_fill(keep, 6 * MiB, 79);
  hak_free(a);
  hak_test_fail_mmap(1, 0, HAK_FAULT_ALL);
  errno = 0;
  void *b = hak_malloc(10 * MiB);
  err = errno;
  void *c = hak_calloc(1, 10 * MiB);
  int err2 = errno;
  hak_test_fail_mmap(0, 0, 0);
  CHECK(b == NULL && err == ENOMEM, "malloc(10 MiB) from the cache while mappings fail: %p errno %d", b, err);
  CHECK(c == NULL && err2 == ENOMEM, "calloc(10 MiB) while mappings fail: %p errno %d", c, err2);
  CHECK(ts_words_verify(keep, 6 * MiB, 79) == 6 * MiB, "a live large block changed");
  b = hak_calloc(1, 10 * MiB);
  CHECK(b != NULL && ts_first_nonzero(b, 10 * MiB) == 10 * MiB, "calloc(10 MiB) after recovery");
  hak_free(b);
  hak_free(keep);

  /* The registry's leaves and everything else fail, one at a time: every
   * Nth mapping for N = 1..4, a large block grown step by step. */
  for (long every = 1; every <= 4; every++) {
    void *g = hak_malloc(300 * KiB);
    REQUIRE(g != NULL, "malloc(300 KiB)");
    size_t gn = 300 * KiB;
    ts_words_fill(g, gn, 80);
    hak_test_fail_mmap(every, every, HAK_FAULT_ALL);
    for (int step = 0; step < 12; step++) {
      size_t want = gn * 3 / 2 + 4096;
      errno = 0;
      void *h = hak_realloc(g, want);
      if (h == NULL) {
        CHECK(errno == ENOMEM, "realloc growth: errno %d", errno);
        CHECK(ts_words_verify(g, gn, 80) == gn, "failed growth changed the block");
        continue;
      }
      CHECK(ts_words_verify(h, gn, 80) == gn, "growth to %zu lost the contents", want);
      g = h;
      gn = want;
      ts_words_fill(g, gn, 80);
    }
    hak_test_fail_mmap(0, 0, 0);
    hak_free(g);
  }
  hak_collect();
  check_balanced(before, true);
}

/* --------------------------------------------------- munmap failing */

/* munmap failing with ENOMEM (a process out of vm.max_map_count): the range
 * is abandoned, the process goes on. */
static void section_unmap(void)
{
  ts_check_begin("munmap fails with ENOMEM (injection)");
  atomic_store(&thread_failures, 0);
  hak_stats_t before = ts_stats_now();
  uint64_t inj = hak_test_fail_mmap_injected();
  hak_test_fail_mmap(1, 0, HAK_FAULT_UNMAP);
  for (int round = 0; round < 2; round++) {
    void *big[24];
    for (int i = 0; i < 24; i++) {
      size_t n = (size_t)(1 + i % 3) * MiB;
      big[i] = hak_malloc(n);
      REQUIRE(big[i] != NULL, "malloc(%zu) while munmap fails", n);
      ts_words_fill(big[i], n, (uintptr_t)(round * 100 + i));
    }
    for (int i = 0; i < 24; i++) {
      size_t n = (size_t)(1 + i % 3) * MiB;
      CHECK(ts_words_verify(big[i], n, (uintptr_t)(round * 100 + i)) == n, "block changed");
      hak_free(big[i]);
    }
    hak_collect();   /* the cache and the retire list: unmapped now, or tried */
  }
  hak_test_fail_mmap(0, 0, 0);
  uint64_t failed = hak_test_fail_mmap_injected() - inj;
  printf("   %llu munmap calls failed\n", (unsigned long long)failed);
  CHECK(failed > 0, "no munmap failed: the test tested nothing");
  void *p = hak_malloc(5 * MiB);
  CHECK(p != NULL, "malloc after munmap failures");
  hak_free(p);
  check_balanced(before, false);
}

/* ------------------------------------------------ first allocation */

#define FIRST_THREADS 160
static pthread_barrier_t first_bar;

static _Atomic unsigned first_nulls;

/* The first small and large malloc of a fresh thread while every mapping
 * fails: NULL + ENOMEM, unless what earlier sections freed is cached (the
 * SuperSlab and large caches hand out memory without mapping). */
static void *first_try(size_t n, unsigned char seed)
{
  errno = 0;
  void *p = hak_malloc(n);
  if (p == NULL) {
    TCHECK(errno == ENOMEM, "first malloc(%zu) while mappings fail: NULL, errno %d", n, errno);
    atomic_fetch_add(&first_nulls, 1);
  } else {
    memset(p, seed, n);
  }
  return p;
}

/* Above the page arenas' 8 MiB: a large first block needs a mapping of its
 * own (a smaller one may come from an arena's free pages, which need none). */
#define FIRST_LARGE (9 * MiB)

static void *first_worker(void *arg)
{
  (void)arg;
  pthread_barrier_wait(&first_bar);      /* every mapping fails */
  void *p0 = first_try(100, 1), *l0 = first_try(FIRST_LARGE, 2);
  pthread_barrier_wait(&first_bar);
  pthread_barrier_wait(&first_bar);      /* mappings work again */
  void *p = hak_malloc(100), *l = hak_malloc(MiB);
  TCHECK(p != NULL && l != NULL, "malloc after recovery failed");
  if (p != NULL) ts_words_fill(p, 100, 5);
  if (l != NULL) ts_words_fill(l, MiB, 6);
  pthread_barrier_wait(&first_bar);      /* all live at once: distinct heaps */
  if (p != NULL) TCHECK(ts_words_verify(p, 100, 5) == 100, "small block changed");
  if (l != NULL) TCHECK(ts_words_verify(l, MiB, 6) == MiB, "large block changed");
  if (p0 != NULL) TCHECK(ts_first_nonzero(p0, 100) == 0 && ((unsigned char *)p0)[99] == 1, "block changed");
  if (l0 != NULL) TCHECK(((unsigned char *)l0)[0] == 2 && ((unsigned char *)l0)[MiB - 1] == 2, "block changed");
  hak_free(p);
  hak_free(l);
  hak_free(p0);
  hak_free(l0);
  return NULL;
}

static void section_first(void)
{
  ts_check_begin("a thread's first allocation fails (injection)");
  atomic_store(&thread_failures, 0);
  hak_stats_t before = ts_stats_now();
  pthread_barrier_init(&first_bar, NULL, FIRST_THREADS + 1);
  pthread_t t[FIRST_THREADS];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 128 * KiB);
  int started = 0;
  for (; started < FIRST_THREADS; started++)
    if (pthread_create(&t[started], &attr, first_worker, NULL) != 0) break;
  REQUIRE(started == FIRST_THREADS, "pthread_create %d", started);
  uint64_t inj = hak_test_fail_mmap_injected();
  hak_test_fail_mmap(1, 0, HAK_FAULT_ALL);
  pthread_barrier_wait(&first_bar);
  pthread_barrier_wait(&first_bar);
  hak_test_fail_mmap(0, 0, 0);
  uint64_t failed = hak_test_fail_mmap_injected() - inj;
  pthread_barrier_wait(&first_bar);
  pthread_barrier_wait(&first_bar);
  for (int i = 0; i < FIRST_THREADS; i++) pthread_join(t[i], NULL);
  pthread_attr_destroy(&attr);
  pthread_barrier_destroy(&first_bar);
  unsigned nulls = atomic_load(&first_nulls);
  printf("   %d threads, %llu mappings failed, %u of %d first mallocs returned NULL\n", FIRST_THREADS,
         (unsigned long long)failed, nulls, 2 * FIRST_THREADS);
  /* The caches hold at most 16 SuperSlabs and 16 large mappings: most of
   * the 160 threads find nothing there and must fail. */
  CHECK(nulls >= FIRST_THREADS && failed >= nulls, "only %u NULLs, %llu mappings failed", nulls,
        (unsigned long long)failed);
  CHECK(atomic_load(&thread_failures) == 0, "%lu failures in the threads", atomic_load(&thread_failures));
  check_balanced(before, true);
}

/* ------------------------------------------------ every Nth mapping */

#define EVERY_THREADS 4
#define EVERY_OPS (SANITIZED ? 1000 : 3000)   /* the sanitizers' shadow makes big blocks slow */
#define EVERY_SLOTS 256

static uint64_t rng_next(uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void *every_worker(void *arg)
{
  uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(uintptr_t)arg + 1;
  blk_t slot[EVERY_SLOTS] = {{0}};
  uintptr_t seed = (uintptr_t)arg << 40;
  unsigned long nulls = 0;
  for (int op = 0; op < EVERY_OPS; op++) {
    blk_t *b = &slot[rng_next(&rng) % EVERY_SLOTS];
    uint64_t r = rng_next(&rng);
    size_t n = r % 8 == 0 ? 256 * KiB + r % (1536 * KiB) : r % 8 < 3 ? 1 + r % (64 * KiB) : 1 + r % 1024;
    if (b->p != NULL) {
      size_t off = ts_words_verify(b->p, b->n, b->seed);
      TCHECK(off == b->n, "block %p of %zu bytes changed at %zu", b->p, b->n, off);
      if (r % 3 == 0) {   /* realloc: NULL leaves it; else the prefix moved along */
        errno = 0;
        void *q = hak_realloc(b->p, n);
        if (q == NULL) {
          nulls++;
          EXPECT_ENOMEM("realloc");
          continue;
        }
        size_t keep = b->n < n ? b->n : n;
        TCHECK(ts_words_verify(q, keep, b->seed) == keep, "realloc lost the prefix");
        b->p = q;
        b->n = n;
        b->seed = ++seed;
        ts_words_fill(q, n, b->seed);
        continue;
      }
      hak_free(b->p);
      b->p = NULL;
      continue;
    }
    errno = 0;
    void *p;
    switch (r % 4) {
    case 0: p = hak_malloc(n); break;
    case 1:
      p = hak_calloc(1, n);
      if (p != NULL) TCHECK(ts_first_nonzero(p, n) == n, "calloc(%zu) not zero", n);
      break;
    case 2: {
      size_t align = (size_t)16 << (r >> 8) % 12;
      int rc = hak_posix_memalign(&p, align, n);
      if (rc != 0) { TCHECK(rc == ENOMEM, "posix_memalign: %d", rc); p = NULL; errno = ENOMEM; }
      else TCHECK(ts_aligned_to(p, align), "misaligned");
      break;
    }
    default: p = hak_aligned_alloc((size_t)64 << (r >> 8) % 10, n); break;
    }
    if (p == NULL) {
      nulls++;
      EXPECT_ENOMEM("allocation");
      continue;
    }
    b->p = p;
    b->n = n;
    b->seed = ++seed;
    ts_words_fill(p, n, b->seed);
  }
  for (int i = 0; i < EVERY_SLOTS; i++) {
    if (slot[i].p == NULL) continue;
    TCHECK(ts_words_verify(slot[i].p, slot[i].n, slot[i].seed) == slot[i].n, "block changed");
    hak_free(slot[i].p);
  }
  return (void *)nulls;
}

static void section_every(void)
{
  ts_check_begin("every 3rd mapping fails, 4 threads of random operations (injection)");
  atomic_store(&thread_failures, 0);
  hak_stats_t before = ts_stats_now();
  uint64_t inj = hak_test_fail_mmap_injected();
  hak_test_fail_mmap(3, 3, HAK_FAULT_ALL);
  pthread_t t[EVERY_THREADS];
  for (long i = 0; i < EVERY_THREADS; i++)
    REQUIRE(pthread_create(&t[i], NULL, every_worker, (void *)(i + 1)) == 0, "pthread_create");
  unsigned long nulls = 0;
  for (int i = 0; i < EVERY_THREADS; i++) {
    void *r;
    pthread_join(t[i], &r);
    nulls += (unsigned long)(uintptr_t)r;
  }
  hak_test_fail_mmap(0, 0, 0);
  uint64_t failed = hak_test_fail_mmap_injected() - inj;
  printf("   %llu mappings failed, %lu calls returned NULL\n", (unsigned long long)failed, nulls);
  CHECK(failed > 0 && nulls > 0, "nothing failed: the test tested nothing");
  CHECK(atomic_load(&thread_failures) == 0, "%lu failures in the threads", atomic_load(&thread_failures));
  /* Memory back: the same threads' work succeeds again. */
  void *p = hak_malloc(5 * MiB), *q = hak_malloc(100);
  CHECK(p != NULL && q != NULL, "malloc after recovery");
  hak_free(p);
  hak_free(q);
  check_balanced(before, true);
}
/* ------------------------------------------------ the environment */

/* Run with HAKMEM_FAIL_MMAP_EVERY=3 (ctest unit_faults_env): every 3rd
 * mapping fails from the process's start, with no call of the test hook. */
static void section_env(void)
{
  ts_check_begin("HAKMEM_FAIL_MMAP_EVERY from the environment (injection)");
  const char *e = getenv("HAKMEM_FAIL_MMAP_EVERY");
  REQUIRE(e != NULL && atoi(e) > 2, "run with HAKMEM_FAIL_MMAP_EVERY=3 or more");
  unsigned long ok = 0, nulls = 0;
  void *keep[64] = {0};
  for (int i = 0; i < 64; i++) {
    errno = 0;
    keep[i] = hak_malloc((size_t)(1 + i % 4) * MiB);
    if (keep[i] == NULL) {
      nulls++;
      CHECK(errno == ENOMEM, "NULL with errno %d", errno);
    } else {
      ok++;
      memset(keep[i], i, MiB);
    }
  }
  printf("   %lu large mallocs succeeded, %lu failed, %llu mappings failed\n", ok, nulls,
         (unsigned long long)hak_test_fail_mmap_injected());
  CHECK(ok > 0 && nulls > 0 && hak_test_fail_mmap_injected() >= nulls, "every 3rd mapping did not fail");
  for (int i = 0; i < 64; i++) {
    if (keep[i] == NULL) continue;
    CHECK(((unsigned char *)keep[i])[0] == i && ((unsigned char *)keep[i])[MiB - 1] == i, "block changed");
    hak_free(keep[i]);
  }
}

#endif /* HAKMEM_FAULT_INJECTION */

int main(int argc, char **argv)
{
  const char *only = argc > 1 ? argv[1] : NULL;
  setenv("HAKMEM_STATS", "1", 1);   /* exact block counts (read at hakmem's start) */
#if !defined(HAKMEM_FAULT_INJECTION)
  if (SANITIZED) {
    printf("unit_faults_rlimit: skipped: a sanitizer's shadow memory exceeds any RLIMIT_AS\n");
    return 77;
  }
#endif
#ifdef HAKMEM_FAULT_INJECTION
  if (only && !strcmp(only, "env")) {   /* first: the environment's failures start at once */
    section_env();
    return ts_check_finish(argv[0]);
  }
#endif
  hak_free(hak_malloc(1));   /* hakmem initialised before any section */
  printf("unit_faults (%s)\n", MODE);
  fflush(stdout);
  if (!only || !strcmp(only, "threads1")) section_threads(1);
  if (!only || !strcmp(only, "threads4")) section_threads(4);
#ifdef HAKMEM_FAULT_INJECTION
  if (!only || !strcmp(only, "realloc")) section_realloc();
  if (!only || !strcmp(only, "unmap")) section_unmap();
  if (!only || !strcmp(only, "first")) section_first();
  if (!only || !strcmp(only, "every")) section_every();
#endif
  return ts_check_finish(argv[0]);
}
