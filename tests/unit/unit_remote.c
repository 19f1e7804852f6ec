/* unit_remote: blocks freed by threads that do not own them come back.
 *
 * 1. Owner alive: thread A allocates N blocks of a size and waits (on a
 *    condition variable) while thread B frees them all and exits.  The
 *    counters must show N remote frees; when A then allocates 1.5 N blocks of
 *    the same size (the slab it was carving may still hand out fresh blocks
 *    first), the memory of at least 90% of the first N blocks must come back
 *    (the 64 KiB units they were in: the remote frees reached A's slabs and
 *    A reuses them, as they are or released and carved again); after A frees
 *    everything, live_bytes is back where it started.
 * 2. Owner gone: in each round a thread allocates many blocks and exits;
 *    the main thread, which has a heap of its own, frees them (remote frees
 *    into the exited thread's parked heap) and collects (parked heaps are
 *    abandoned, their SuperSlabs adopted).  Over the rounds mapped memory
 *    must stay bounded: abandoned slabs are found again once emptied.
 * 2b. Heir: a thread allocates blocks and exits; the next thread to start
 *    takes its parked heap whole: it frees those blocks as its own (no
 *    remote free) and its new blocks come from the same SuperSlabs.
 * 2c. Heirs out of order: of three parked heaps, a thread whose first call
 *    frees a block of the middle one takes that one, not the oldest or the
 *    newest.
 * 2d. A living thread that runs out of room takes a SuperSlab of a parked
 *    heap (mostly free, one live block in it) before it maps one.
 * 3. Ping-pong: two threads allocate blocks and hand them to each other to
 *    check and free; every block is a remote free, contents intact, counters
 *    balanced at the end.
 * 4. A new thread whose first call is realloc of another thread's block.
 * 5. Pending remote frees (held back in runs): bounded, and pushed by the
 *    freeing thread's next refill.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hakmem.h"
#include "support/check.h"
#include "support/fill.h"
#include "support/hak.h"

#define MiB ((size_t)1 << 20)
#define UNIT ((uintptr_t)64 * 1024) /* a SuperSlab unit (src/base.h, HAK_UNIT_SIZE) */

static int uptr_cmp(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------ */
/* A phase counter under a mutex: each side waits for the phase it needs. */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase;

static void set_phase(int p) {
  pthread_mutex_lock(&mu);
  phase = p;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static void wait_phase(int p) {
  pthread_mutex_lock(&mu);
  while (phase != p) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
}

/* ------------------------------------------------------------------ */
/* 1. Owner alive. */

static const size_t owner_sizes[] = {16, 48, 100, 512, 1024, 8000, 40000};
#define N_OWNER_SIZES (sizeof owner_sizes / sizeof owner_sizes[0])

static size_t count_for(size_t size) {
  size_t n = 32 * MiB / size;
  return n > 10000 ? 10000 : n;
}

struct owner_ctx {
  void **first;       /* the blocks A allocated first, handed to B */
  size_t n, size;
  size_t reused;      /* how many first-round blocks' memory A got back in its second round */
  bool alloc_failed;
};

static struct owner_ctx octx;

static void *owner_thread(void *arg) {
  (void)arg;
  for (size_t k = 0; k < N_OWNER_SIZES; k++) {
    size_t size = owner_sizes[k], n = count_for(size);
    wait_phase((int)(10 * k + 1));
    octx.size = size;
    octx.n = n;
    octx.alloc_failed = false;
    octx.first = malloc(n * sizeof(void *));
    uintptr_t *sorted = malloc(n * sizeof(uintptr_t));
    void **second = malloc((n + n / 2) * sizeof(void *));
    if (!octx.first || !sorted || !second) abort();
    for (size_t i = 0; i < n; i++) {
      octx.first[i] = hak_malloc(size);
      if (!octx.first[i]) {
        octx.alloc_failed = true;
        n = octx.n = i;
        break;
      }
      memset(octx.first[i], (int)(i & 0xff), size);
      sorted[i] = (uintptr_t)octx.first[i] & ~(UNIT - 1);
    }
    qsort(sorted, n, sizeof *sorted, uptr_cmp);
    set_phase((int)(10 * k + 2)); /* main: let B free them */
    wait_phase((int)(10 * k + 3));
    /* Allocate half as many again as before: the slab A was carving when
     * it stopped may still hold fresh blocks, which may come first. */
    size_t n2 = n + n / 2, got = 0;
    unsigned char *hit = calloc(n ? n : 1, 1);
    if (!hit) abort();
    for (size_t i = 0; i < n2; i++) {
      second[i] = hak_malloc(size);
      if (!second[i]) {
        octx.alloc_failed = true;
        break;
      }
      got++;
      /* The memory came back if the block lies in a 64 KiB unit that
       * held first-round blocks: a slab whose blocks all came back may be
       * released and carved again, a few cache lines off (slab colouring),
       * so addresses need not repeat. */
      uintptr_t key = (uintptr_t)second[i] & ~(UNIT - 1);
      uintptr_t *at = bsearch(&key, sorted, n, sizeof *sorted, uptr_cmp);
      if (at && !hit[at - sorted]) {
        size_t lo = (size_t)(at - sorted), hi = lo;
        while (lo > 0 && sorted[lo - 1] == key) lo--;
        while (hi + 1 < n && sorted[hi + 1] == key) hi++;
        memset(hit + lo, 1, hi - lo + 1);
      }
      memset(second[i], 0x3c, size);
    }
    size_t reused = 0;
    for (size_t i = 0; i < n; i++) reused += hit[i];
    for (size_t i = 0; i < got; i++) hak_free(second[i]);
    octx.reused = reused;
    free(hit);
    free(sorted);
    free(second);
    set_phase((int)(10 * k + 4));
  }
  return NULL;
}

struct free_job { void **blocks; size_t n, size; size_t corrupt; };

static void *freeing_thread(void *arg) {
  struct free_job *j = arg;
  for (size_t i = 0; i < j->n; i++) {
    unsigned char *b = j->blocks[i];
    if (b[0] != (unsigned char)(i & 0xff) || b[j->size - 1] != (unsigned char)(i & 0xff)) j->corrupt++;
    hak_free(b);
  }
  return NULL;
}

static void test_owner_alive(void) {
  ts_check_begin("remote frees return to a live owner");
  hak_stats_t base = ts_stats_now();
  pthread_t a;
  REQUIRE(pthread_create(&a, NULL, owner_thread, NULL) == 0, "pthread_create");
  for (size_t k = 0; k < N_OWNER_SIZES; k++) {
    set_phase((int)(10 * k + 1));
    wait_phase((int)(10 * k + 2)); /* A holds n blocks and waits */
    size_t n = octx.n, size = octx.size;
    CHECK(!octx.alloc_failed, "size %zu: thread A's allocation failed", size);
    hak_stats_t s0 = ts_stats_now();
    struct free_job job = {octx.first, n, size, 0};
    pthread_t b;
    REQUIRE(pthread_create(&b, NULL, freeing_thread, &job) == 0, "pthread_create");
    pthread_join(b, NULL);
    hak_stats_t s1 = ts_stats_now();
    CHECK(job.corrupt == 0, "size %zu: %zu blocks arrived corrupted in thread B", size, job.corrupt);
    CHECK(s1.remote_frees - s0.remote_frees >= n,
          "size %zu: B freed %zu blocks of A, remote_frees grew by %llu", size, n,
          (unsigned long long)(s1.remote_frees - s0.remote_frees));
    CHECK(s1.frees - s0.frees == n, "size %zu: frees grew by %llu, expected %zu", size,
          (unsigned long long)(s1.frees - s0.frees), n);
    CHECK(s1.allocs == s0.allocs, "size %zu: allocs grew by %llu while only B freed", size,
          (unsigned long long)(s1.allocs - s0.allocs));
    CHECK(s1.live_bytes == base.live_bytes,
          "size %zu: live_bytes %llu after B freed every block, %llu at the start", size,
          (unsigned long long)s1.live_bytes, (unsigned long long)base.live_bytes);
    free(octx.first);
    set_phase((int)(10 * k + 3));
    wait_phase((int)(10 * k + 4)); /* A allocated n again, and freed them */
    CHECK(!octx.alloc_failed, "size %zu: thread A's second allocation failed", size);
    CHECK(octx.reused * 10 >= n * 9,
          "size %zu: after B freed A's %zu blocks, A allocated %zu and got back the memory "
          "(64 KiB units) of only %zu of them (need >= 90%%)", size, n, n + n / 2, octx.reused);
    printf("   size %zu: %zu blocks, %zu reused (%.1f%%), remote_frees +%llu\n", size, n,
           octx.reused, n ? 100.0 * (double)octx.reused / (double)n : 0.0,
           (unsigned long long)(s1.remote_frees - s0.remote_frees));
    hak_stats_t s2 = ts_stats_now();
    CHECK(s2.live_bytes == base.live_bytes, "size %zu: live_bytes %llu at the end, %llu at the start",
          size, (unsigned long long)s2.live_bytes, (unsigned long long)base.live_bytes);
  }
  pthread_join(a, NULL);
  hak_stats_t end = ts_stats_now();
  CHECK(end.allocs - base.allocs == end.frees - base.frees, "owner test: %llu allocs, %llu frees",
        (unsigned long long)(end.allocs - base.allocs), (unsigned long long)(end.frees - base.frees));
}

/* ------------------------------------------------------------------ */
/* 2. Owner gone before its blocks are freed. */

struct gone_job { void **blocks; size_t n, size; bool failed; };

static void *alloc_and_exit(void *arg) {
  struct gone_job *j = arg;
  for (size_t i = 0; i < j->n; i++) {
    j->blocks[i] = hak_malloc(j->size);
    if (!j->blocks[i]) {
      j->failed = true;
      j->n = i;
      return NULL;
    }
    memset(j->blocks[i], (int)(i & 0xff), j->size);
  }
  return NULL;
}

static void test_owner_gone(void) {
  ts_check_begin("blocks of exited threads, freed remotely, are reused");
  enum { ROUNDS = 14, N = 20000 };
  const size_t sizes[] = {128, 64, 1000}; /* each round uses one of these */
  void **blocks = malloc(N * sizeof(void *));
  REQUIRE(blocks != NULL, "test's own malloc failed");
  hak_free(hak_malloc(1)); /* main has a heap: its frees below are remote */
  hak_stats_t base = ts_stats_now(), after1 = base;
  for (int r = 0; r < ROUNDS; r++) {
    size_t size = sizes[r % 3];
    struct gone_job aj = {blocks, N, size, false};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, alloc_and_exit, &aj) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(!aj.failed, "round %d: allocation of %d blocks of %zu failed", r, N, size);
    struct free_job fj = {blocks, aj.n, size, 0};
    freeing_thread(&fj);  /* main: a remote free into the parked heap */
    CHECK(fj.corrupt == 0, "round %d: %zu blocks corrupted", r, fj.corrupt);
    hak_collect();
    if (r == 2) after1 = ts_stats_now(); /* every size has been through once */
  }
  hak_stats_t end = ts_stats_now();
  /* A leak would grow by about (ROUNDS - 3) * N * size ~ 25+ MiB. */
  CHECK(end.mapped_bytes <= after1.mapped_bytes + 8 * MiB,
        "%d rounds of alloc-in-exiting-thread / remote free grew mapped_bytes from %llu "
        "(after the first three rounds) to %llu", ROUNDS, (unsigned long long)after1.mapped_bytes,
        (unsigned long long)end.mapped_bytes);
  CHECK(end.heaps_abandoned - base.heaps_abandoned >= ROUNDS,
        "%d threads exited holding live blocks, heaps_abandoned grew by %llu", ROUNDS,
        (unsigned long long)(end.heaps_abandoned - base.heaps_abandoned));
  CHECK(end.remote_frees - base.remote_frees >= (uint64_t)ROUNDS * N,
        "remote_frees grew by %llu, expected >= %d", (unsigned long long)(end.remote_frees - base.remote_frees),
        ROUNDS * N);
  CHECK(end.live_bytes == base.live_bytes, "live_bytes %llu at the end, %llu at the start",
        (unsigned long long)end.live_bytes, (unsigned long long)base.live_bytes);
  CHECK(end.allocs - base.allocs == end.frees - base.frees, "%llu allocs, %llu frees",
        (unsigned long long)(end.allocs - base.allocs), (unsigned long long)(end.frees - base.frees));
  printf("   mapped after 3 rounds %llu, after %d rounds %llu; SuperSlabs mapped %llu, unmapped %llu, adopted %llu\n",
         (unsigned long long)after1.mapped_bytes, ROUNDS, (unsigned long long)end.mapped_bytes,
         (unsigned long long)end.superslabs_mapped, (unsigned long long)end.superslabs_unmapped,
         (unsigned long long)end.superslabs_adopted);
  free(blocks);
}

/* ------------------------------------------------------------------ */
/* 2b. Heir: the next thread takes an exited thread's heap whole. */

struct heir_job { void **blocks; size_t n, size, corrupt, reused; };

static void *heir_thread(void *arg) {
  struct heir_job *j = arg;
  for (size_t i = 0; i < j->n; i++) {
    unsigned char *b = j->blocks[i];
    if (b[0] != (unsigned char)(i & 0xff) || b[j->size - 1] != (unsigned char)(i & 0xff)) j->corrupt++;
    hak_free(b);
  }
  /* The memory freed above is this heap's: the new blocks come from the
   * same SuperSlabs (2 MiB regions). */
  void **again = malloc(j->n * sizeof *again);
  if (again == NULL) return NULL;
  for (size_t i = 0; i < j->n; i++) {
    void *p = again[i] = hak_malloc(j->size);
    for (size_t k = 0; k < j->n && p != NULL; k++)
      if ((uintptr_t)p >> 21 == (uintptr_t)j->blocks[k] >> 21) { j->reused++; break; }
  }
  for (size_t i = 0; i < j->n; i++) hak_free(again[i]);
  free(again);
  return NULL;
}

static void test_heir(void) {
  ts_check_begin("the next thread takes an exited thread's heap");
  enum { N = 2000 };
  const size_t size = 96;
  void **blocks = malloc(N * sizeof(void *));
  REQUIRE(blocks != NULL, "test's own malloc failed");
  hak_collect(); /* no parked heap is left from the tests before */
  hak_stats_t s0 = ts_stats_now();
  struct gone_job aj = {blocks, N, size, false};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, alloc_and_exit, &aj) == 0, "pthread_create");
  pthread_join(t, NULL);
  REQUIRE(!aj.failed, "allocation of %d blocks of %zu failed", N, size);
  struct heir_job hj = {blocks, N, size, 0, 0};
  REQUIRE(pthread_create(&t, NULL, heir_thread, &hj) == 0, "pthread_create");
  pthread_join(t, NULL);
  hak_stats_t s1 = ts_stats_now();
  CHECK(hj.corrupt == 0, "%zu blocks corrupted", hj.corrupt);
  CHECK(s1.remote_frees == s0.remote_frees, "the heir's frees of the parked heap's blocks counted %llu remote",
        (unsigned long long)(s1.remote_frees - s0.remote_frees));
  CHECK(hj.reused == N, "only %zu of the heir's %d new blocks are in the exited thread's SuperSlabs", hj.reused, N);
  CHECK(s1.superslabs_mapped == s0.superslabs_mapped, "%llu SuperSlabs mapped meanwhile",
        (unsigned long long)(s1.superslabs_mapped - s0.superslabs_mapped));
  CHECK(s1.allocs - s0.allocs == s1.frees - s0.frees, "%llu allocs, %llu frees",
        (unsigned long long)(s1.allocs - s0.allocs), (unsigned long long)(s1.frees - s0.frees));
  CHECK(s1.live_bytes == s0.live_bytes, "live_bytes %llu, %llu at the start", (unsigned long long)s1.live_bytes,
        (unsigned long long)s0.live_bytes);
  printf("   heir: %zu of %d new blocks in the parked heap's SuperSlabs, remote_frees +%llu\n", hj.reused, N,
         (unsigned long long)(s1.remote_frees - s0.remote_frees));
  free(blocks);
}

/* 2c. Heirs out of order: threads X, W and Y allocate, all alive at once
 * (so they have three heaps), then exit in that order, so W's heap is
 * neither the one parked longest nor the one parked last.  A thread whose
 * first call frees one of W's blocks takes W's heap: it frees W's blocks as
 * its own; then Y's heir takes Y's and X's heir X's. */
struct twin_job {
  struct gone_job alloc;
  pthread_barrier_t *allocated; /* the three and main: all have allocated */
  sem_t go;                     /* main: exit now */
};

static void *alloc_wait_exit(void *arg) {
  struct twin_job *j = arg;
  alloc_and_exit(&j->alloc);
  pthread_barrier_wait(j->allocated);
  while (sem_wait(&j->go) != 0) {
  }
  return NULL;
}

static void run_heir(struct heir_job *hj) {
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, heir_thread, hj) == 0, "pthread_create");
  pthread_join(t, NULL);
}

static void test_heir_any_parked(void) {
  ts_check_begin("a thread whose first free is of a parked heap takes that heap");
  enum { N = 2000, T = 3 };
  static const char *const names[T] = {"X (parked first)", "W (parked second)", "Y (parked last)"};
  static const int heir_order[T] = {1, 2, 0}; /* W, Y, X */
  const size_t size = 160;
  void **blocks[T];
  struct twin_job jobs[T];
  pthread_t threads[T];
  pthread_barrier_t allocated;
  hak_collect(); /* no parked heap is left from the tests before */
  hak_stats_t sb = ts_stats_now();
  REQUIRE(pthread_barrier_init(&allocated, NULL, T + 1) == 0, "pthread_barrier_init");
  for (int i = 0; i < T; i++) {
    blocks[i] = malloc(N * sizeof(void *));
    REQUIRE(blocks[i] != NULL, "test's own malloc failed");
    jobs[i] = (struct twin_job){.alloc = {blocks[i], N, size, false}, .allocated = &allocated};
    REQUIRE(sem_init(&jobs[i].go, 0, 0) == 0, "sem_init");
    REQUIRE(pthread_create(&threads[i], NULL, alloc_wait_exit, &jobs[i]) == 0, "pthread_create");
  }
  pthread_barrier_wait(&allocated);
  for (int i = 0; i < T; i++) { /* parked in this order */
    sem_post(&jobs[i].go);
    pthread_join(threads[i], NULL);
    REQUIRE(!jobs[i].alloc.failed, "allocation of %d blocks of %zu failed", N, size);
  }
  for (int k = 0; k < T; k++) {
    int i = heir_order[k];
    hak_stats_t s0 = ts_stats_now();
    struct heir_job hj = {blocks[i], N, size, 0, 0};
    run_heir(&hj);
    hak_stats_t s1 = ts_stats_now();
    CHECK(hj.corrupt == 0, "%s: %zu blocks corrupted", names[i], hj.corrupt);
    CHECK(s1.remote_frees == s0.remote_frees, "the heir of %s freed %llu of its %d blocks remotely", names[i],
          (unsigned long long)(s1.remote_frees - s0.remote_frees), N);
    CHECK(hj.reused == N, "the heir of %s: %zu of %d new blocks in the freed heap's SuperSlabs", names[i],
          hj.reused, N);
    printf("   heir of %s: remote_frees +%llu\n", names[i], (unsigned long long)(s1.remote_frees - s0.remote_frees));
  }
  hak_stats_t se = ts_stats_now();
  CHECK(se.live_bytes == sb.live_bytes, "live_bytes %llu at the end, %llu before the threads allocated",
        (unsigned long long)se.live_bytes, (unsigned long long)sb.live_bytes);
  pthread_barrier_destroy(&allocated);
  for (int i = 0; i < T; i++) {
    sem_destroy(&jobs[i].go);
    free(blocks[i]);
  }
}

/* 2d. X allocates a SuperSlab's worth of blocks and frees all but a few,
 * Y starts (one block: a heap of its own), X exits (its heap is parked:
 * one mostly free SuperSlab, pinned by the blocks it kept), then Y
 * allocates more than its own SuperSlab holds: the rest comes from X's
 * SuperSlab, no SuperSlab is mapped meanwhile. */
enum { STEAL_SIZE = 1000, STEAL_X = 1800, STEAL_Y = 3000, STEAL_KEEP = 600 };
struct steal_job {
  void **blocks;
  size_t n;
  sem_t ready, go;
  bool failed;
};

static void *steal_x(void *arg) {
  struct steal_job *j = arg;
  for (size_t i = 0; i < STEAL_X; i++)
    if ((j->blocks[i] = hak_malloc(STEAL_SIZE)) == NULL) j->failed = true;
  for (size_t i = 0; i < STEAL_X; i++)
    if (i % STEAL_KEEP != 0) hak_free(j->blocks[i]);
  sem_post(&j->ready);
  while (sem_wait(&j->go) != 0) {
  }
  return NULL;
}

static void *steal_y(void *arg) {
  struct steal_job *j = arg;
  void *first = hak_malloc(STEAL_SIZE);
  if (first == NULL) j->failed = true;
  sem_post(&j->ready);
  while (sem_wait(&j->go) != 0) {
  }
  for (size_t i = 0; i < STEAL_Y; i++)
    if ((j->blocks[i] = hak_malloc(STEAL_SIZE)) == NULL) j->failed = true;
  for (size_t i = 0; i < STEAL_Y; i++) hak_free(j->blocks[i]);
  hak_free(first);
  return NULL;
}

static void test_steal_parked(void) {
  ts_check_begin("a living thread out of room takes a parked heap's SuperSlab before it maps one");
  void **bx = calloc(STEAL_X, sizeof(void *)), **by = calloc(STEAL_Y, sizeof(void *));
  REQUIRE(bx != NULL && by != NULL, "test's own malloc failed");
  hak_collect(); /* no parked heap, no cached SuperSlab is left from the tests before */
  struct steal_job xj = {.blocks = bx}, yj = {.blocks = by};
  REQUIRE(sem_init(&xj.ready, 0, 0) == 0 && sem_init(&xj.go, 0, 0) == 0 && sem_init(&yj.ready, 0, 0) == 0 &&
              sem_init(&yj.go, 0, 0) == 0,
          "sem_init");
  pthread_t tx, ty;
  REQUIRE(pthread_create(&tx, NULL, steal_x, &xj) == 0, "pthread_create");
  sem_wait(&xj.ready);
  REQUIRE(pthread_create(&ty, NULL, steal_y, &yj) == 0, "pthread_create");
  sem_wait(&yj.ready);
  sem_post(&xj.go);
  pthread_join(tx, NULL); /* X's heap is parked */
  hak_stats_t s0 = ts_stats_now();
  sem_post(&yj.go);
  pthread_join(ty, NULL);
  hak_stats_t s1 = ts_stats_now();
  REQUIRE(!xj.failed && !yj.failed, "allocation of blocks of %d failed", STEAL_SIZE);
  size_t in_x = 0;
  for (size_t i = 0; i < STEAL_Y; i++)
    for (size_t k = 0; k < STEAL_X; k += STEAL_KEEP)
      if ((uintptr_t)by[i] >> 21 == (uintptr_t)bx[k] >> 21) {
        in_x++;
        break;
      }
  CHECK(in_x >= STEAL_Y / 4, "only %zu of Y's %d blocks are in the parked heap's SuperSlab", in_x, STEAL_Y);
  CHECK(s1.superslabs_mapped == s0.superslabs_mapped, "%llu SuperSlabs mapped while Y allocated",
        (unsigned long long)(s1.superslabs_mapped - s0.superslabs_mapped));
  for (size_t k = 0; k < STEAL_X; k += STEAL_KEEP) hak_free(bx[k]);
  printf("   %zu of Y's %d blocks in the parked heap's SuperSlab, SuperSlabs mapped +%llu, adopted +%llu\n", in_x,
         STEAL_Y, (unsigned long long)(s1.superslabs_mapped - s0.superslabs_mapped),
         (unsigned long long)(s1.superslabs_adopted - s0.superslabs_adopted));
  sem_destroy(&xj.ready);
  sem_destroy(&xj.go);
  sem_destroy(&yj.ready);
  sem_destroy(&yj.go);
  free(bx);
  free(by);
}

/* A successor created by a thread that returns right after, unjoined (as in
 * larson): its first free names its creator's heap while the creator still
 * runs, so it cannot take that heap then.  Once the creator has exited, the
 * successor takes the creator's heap, and its frees of the creator's blocks
 * are local from then on instead of remote for its whole life. */
enum { SUCC_N = 16384 };
struct succ_job {
  void **b;
  size_t size;
  pthread_t creator, successor;
  sem_t first_freed, done;
  hak_stats_t s0, s1;
  bool failed;
};

static void *succ_thread(void *arg) {
  struct succ_job *j = arg;
  j->s0 = ts_stats_now();
  hak_free(j->b[0]); /* the creator is still running */
  sem_post(&j->first_freed);
  pthread_join(j->creator, NULL); /* its heap is parked now */
  for (size_t i = 1; i < SUCC_N; i++) hak_free(j->b[i]);
  j->s1 = ts_stats_now();
  sem_post(&j->done);
  return NULL;
}

static void *succ_creator(void *arg) {
  struct succ_job *j = arg;
  for (size_t i = 0; i < SUCC_N; i++) {
    j->b[i] = hak_malloc(j->size);
    if (j->b[i] == NULL) j->failed = true;
  }
  if (j->failed || pthread_create(&j->successor, NULL, succ_thread, j) != 0) abort();
  sem_wait(&j->first_freed);
  return NULL;  /* unjoined by its creator: main joins the successor at the end */
}

static void test_successor_inherits(void) {
  ts_check_begin("a successor that starts before its creator exits takes the creator's heap");
  hak_collect();
  struct succ_job j = {.size = 96};
  j.b = malloc(SUCC_N * sizeof(void *));
  REQUIRE(j.b != NULL, "test's own malloc failed");
  REQUIRE(sem_init(&j.first_freed, 0, 0) == 0 && sem_init(&j.done, 0, 0) == 0, "sem_init");
  REQUIRE(pthread_create(&j.creator, NULL, succ_creator, &j) == 0, "pthread_create");
  sem_wait(&j.done); /* the successor joined the creator */
  /* Its exit parks its heap and folds that heap's counts into the totals:
   * a snapshot taken meanwhile (the next test's first) may count them
   * twice, as hak_stats_get is exact only once the threads are quiescent. */
  pthread_join(j.successor, NULL);
  uint64_t remote = j.s1.remote_frees - j.s0.remote_frees;
  CHECK(remote < SUCC_N / 2, "%llu of %d frees of the exited creator's blocks were remote",
        (unsigned long long)remote, SUCC_N);
  printf("   successor: %llu of %d frees remote\n", (unsigned long long)remote, SUCC_N);
  sem_destroy(&j.first_freed);
  sem_destroy(&j.done);
  free(j.b);
}

/* ------------------------------------------------------------------ */
/* 3. Ping-pong: each thread allocates, the other checks and frees. */

#define RING 256
struct mailbox {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  void *slot[RING];
  size_t head, tail; /* head: next to take, tail: next to put */
  bool done;
};

static void mb_put(struct mailbox *m, void *p) {
  pthread_mutex_lock(&m->mu);
  while (m->tail - m->head == RING) pthread_cond_wait(&m->cv, &m->mu);
  m->slot[m->tail++ % RING] = p;
  pthread_cond_broadcast(&m->cv);
  pthread_mutex_unlock(&m->mu);
}

/* Takes up to max blocks; returns 0 only when the sender is done and empty. */
static size_t mb_take(struct mailbox *m, void **out, size_t max) {
  pthread_mutex_lock(&m->mu);
  while (m->tail == m->head && !m->done) pthread_cond_wait(&m->cv, &m->mu);
  size_t n = 0;
  while (n < max && m->head != m->tail) out[n++] = m->slot[m->head++ % RING];
  pthread_cond_broadcast(&m->cv);
  pthread_mutex_unlock(&m->mu);
  return n;
}

static void mb_close(struct mailbox *m) {
  pthread_mutex_lock(&m->mu);
  m->done = true;
  pthread_cond_broadcast(&m->cv);
  pthread_mutex_unlock(&m->mu);
}

struct pp_side {
  struct mailbox *out, *in;
  unsigned seed;
  size_t sent, received, bad;
  bool alloc_failed;
};

#define PP_BLOCKS 150000

static size_t pp_size(uint32_t x) { return 8 + (x % 61 == 0 ? x % 30000 : x % 1500); }

static void *pp_sender(void *arg) {
  struct pp_side *s = arg;
  uint32_t x = s->seed;
  for (size_t i = 0; i < PP_BLOCKS; i++) {
    x = x * 1664525u + 1013904223u;
    size_t size = pp_size(x);
    uint32_t *b = hak_malloc(size);
    if (!b) {
      s->alloc_failed = true;
      break;
    }
    b[0] = x; /* the receiver recomputes the size from it */
    ((unsigned char *)b)[size - 1] = (unsigned char)(x >> 8);
    mb_put(s->out, b);
    s->sent++;
  }
  mb_close(s->out);
  return NULL;
}

static void *pp_receiver(void *arg) {
  struct pp_side *s = arg;
  void *batch[64];
  size_t n;
  while ((n = mb_take(s->in, batch, 64)) > 0) {
    for (size_t i = 0; i < n; i++) {
      uint32_t *b = batch[i];
      size_t size = pp_size(b[0]);
      if (((unsigned char *)b)[size - 1] != (unsigned char)(b[0] >> 8)) s->bad++;
      if (hak_malloc_usable_size(b) < size) s->bad++;
      hak_free(b);
      s->received++;
    }
  }
  return NULL;
}

/* One thread per side does both jobs: it allocates for the peer and frees
 * what the peer sends, so each side owns blocks and frees foreign ones.
 * Neither side exits before both receivers are done: a receiver may take
 * over the heap of a sender that exited (hak_heap_inherit), and its frees
 * are then no longer remote. */
static pthread_barrier_t pp_done;
static void *pp_thread(void *arg) {
  pthread_t r;
  if (pthread_create(&r, NULL, pp_receiver, arg) != 0) abort();
  pp_sender(arg);
  pthread_join(r, NULL);
  pthread_barrier_wait(&pp_done);
  return NULL;
}

static void test_ping_pong(void) {
  ts_check_begin("ping-pong: every block freed by the other thread");
  static struct mailbox ab = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, false};
  static struct mailbox ba = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, false};
  struct pp_side a = {&ab, &ba, 12345u, 0, 0, 0, false};
  struct pp_side b = {&ba, &ab, 67890u, 0, 0, 0, false};
  hak_stats_t s0 = ts_stats_now();
  pthread_t ta, tb;
  REQUIRE(pthread_barrier_init(&pp_done, NULL, 2) == 0, "pthread_barrier_init");
  REQUIRE(pthread_create(&ta, NULL, pp_thread, &a) == 0, "pthread_create");
  REQUIRE(pthread_create(&tb, NULL, pp_thread, &b) == 0, "pthread_create");
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  pthread_barrier_destroy(&pp_done);
  hak_stats_t s1 = ts_stats_now();
  CHECK(!a.alloc_failed && !b.alloc_failed, "an allocation failed");
  CHECK(a.sent == PP_BLOCKS && b.sent == PP_BLOCKS, "sent %zu and %zu", a.sent, b.sent);
  CHECK(a.received == b.sent && b.received == a.sent, "received %zu of %zu and %zu of %zu",
        a.received, b.sent, b.received, a.sent);
  CHECK(a.bad == 0 && b.bad == 0, "%zu and %zu blocks arrived corrupted or too small", a.bad, b.bad);
  uint64_t total = a.sent + b.sent;
  CHECK(s1.allocs - s0.allocs == total, "allocs grew by %llu, expected %llu",
        (unsigned long long)(s1.allocs - s0.allocs), (unsigned long long)total);
  CHECK(s1.frees - s0.frees == total, "frees grew by %llu, expected %llu",
        (unsigned long long)(s1.frees - s0.frees), (unsigned long long)total);
  CHECK(s1.remote_frees - s0.remote_frees == total,
        "remote_frees grew by %llu; every one of the %llu frees was by a non-owner",
        (unsigned long long)(s1.remote_frees - s0.remote_frees), (unsigned long long)total);
  CHECK(s1.live_bytes == s0.live_bytes, "live_bytes %llu after, %llu before",
        (unsigned long long)s1.live_bytes, (unsigned long long)s0.live_bytes);
}

/* ------------------------------------------------------------------ */
/* 4. realloc as the first call of a new thread, on another thread's block. */

struct realloc_job { void *p; size_t from, to; size_t bad; };

static void *realloc_first(void *arg) {
  struct realloc_job *j = arg;
  unsigned char *q = hak_realloc(j->p, j->to);
  if (!q) {
    j->bad = SIZE_MAX;
    return NULL;
  }
  size_t keep = j->from < j->to ? j->from : j->to;
  j->bad = keep - ts_words_verify(q, keep, j->from);
  j->p = q;
  return NULL;
}

static void test_realloc_first_call(void) {
  ts_check_begin("a new thread's first call is realloc of a foreign-thread block");
  static const size_t pairs[][2] = {{24, 5000}, {5000, 24}, {100, 3 * MiB}, {3 * MiB, 100}, {64, 64}};
  hak_stats_t s0 = ts_stats_now();
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    struct realloc_job j = {hak_malloc(pairs[i][0]), pairs[i][0], pairs[i][1], 0};
    REQUIRE(j.p != NULL, "hak_malloc(%zu)", j.from);
    ts_words_fill(j.p, j.from, j.from);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, realloc_first, &j) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(j.bad == 0, "realloc %zu -> %zu in a new thread: %s", j.from, j.to,
          j.bad == SIZE_MAX ? "returned NULL" : "contents changed");
    if (j.bad != SIZE_MAX) hak_free(j.p);
  }
  hak_stats_t s1 = ts_stats_now();
  CHECK(s1.live_bytes == s0.live_bytes, "live_bytes %llu after, %llu before",
        (unsigned long long)s1.live_bytes, (unsigned long long)s0.live_bytes);
}

/* ------------------------------------------------------------------ */
/* 5. Pending remote frees.  A thread's remote frees into one slab are held
 *    back in runs (src/remote.c) and pushed with one CAS per run: at
 *    HAK_REMOTE_BATCH (64) blocks or 4 KiB of them, or at the thread's
 *    next refill or exit.  B frees the owner's 250 blocks and stays alive
 *    and idle: the owner must get back all but what the runs may hold, at
 *    most a run's limit per slab the blocks span (64 blocks of 64 bytes,
 *    one slab; 4 blocks of 1 KiB, in about 5 slabs: 20, where runs of
 *    16 KiB held 58).  Then B's first malloc (a refill) pushes the rest:
 *    the owner, which takes remote frees before it carves fresh blocks,
 *    must get back all 250 (checked by address for 64-byte blocks). */

#define PEND_N 250         /* a multiple of neither limit: the last runs are held */

struct pend_job { void **blocks; size_t size; int step; pthread_mutex_t mu; pthread_cond_t cv; };

static void pend_wait(struct pend_job *j, int step) {
  pthread_mutex_lock(&j->mu);
  while (j->step < step) pthread_cond_wait(&j->cv, &j->mu);
  pthread_mutex_unlock(&j->mu);
}
static void pend_set(struct pend_job *j, int step) {
  pthread_mutex_lock(&j->mu);
  j->step = step;
  pthread_cond_broadcast(&j->cv);
  pthread_mutex_unlock(&j->mu);
}

static void *pend_freer(void *arg) {
  struct pend_job *j = arg;
  for (int i = 0; i < PEND_N; i++) hak_free(j->blocks[i]);
  pend_set(j, 1);                 /* freed everything; now idle */
  pend_wait(j, 2);
  void *q = hak_malloc(j->size);  /* this thread's first malloc: a refill */
  hak_free(q);
  pend_set(j, 3);
  pend_wait(j, 4);
  return NULL;
}

/* How many of old[0..n) does allocating m blocks of size bytes hand back?
 * The m blocks go to out[]. */
static int pend_reused(void **old, int n, void **out, int m, size_t size) {
  int hits = 0;
  for (int i = 0; i < m; i++) {
    out[i] = hak_malloc(size);
    REQUIRE(out[i] != NULL, "hak_malloc(%zu)", size);
    for (int k = 0; k < n; k++) hits += out[i] == old[k];
  }
  return hits;
}

static void test_pending_remote_frees(size_t size, int held_max) {
  static char name[2][128];
  char *nm = name[size > 64];  /* check_section keeps the pointer */
  snprintf(nm, sizeof name[0], "pending remote frees of %zu-byte blocks: at most %d held while the freer "
           "idles, the rest pushed by its refill", size, held_max);
  ts_check_begin(nm);
  static void *old[PEND_N], *got[2 * PEND_N + 64];
  struct pend_job j = {old, size, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
  for (int i = 0; i < PEND_N; i++) REQUIRE((old[i] = hak_malloc(size)) != NULL, "hak_malloc(%zu)", size);
  pthread_t b;
  REQUIRE(pthread_create(&b, NULL, pend_freer, &j) == 0, "pthread_create");
  pend_wait(&j, 1);
  int first = pend_reused(old, PEND_N, got, PEND_N + held_max, size);
  CHECK(first >= PEND_N - held_max && first <= PEND_N,
        "with the freeing thread idle, %d of %d freed blocks came back (at most %d may be held)", first,
        PEND_N, held_max);
  for (int i = 0; i < PEND_N + held_max; i++) hak_free(got[i]);
  pend_set(&j, 2);
  pend_wait(&j, 3);
  /* The free list (the blocks just freed) comes first, then the remote
   * stack.  By address only for a class whose slabs are not coloured: a
   * coloured slab (1 KiB) whose blocks all came back may be released and
   * carved again a few cache lines off (size_class.h, hak_class_colored). */
  if (size == 64) {
    int second = pend_reused(old, PEND_N, got, 2 * PEND_N, size);
    CHECK(second == PEND_N, "after the freeing thread's refill, %d of %d freed blocks came back", second,
          PEND_N);
    printf("   %d of %d back while the freer idled, %d after its refill\n", first, PEND_N, second);
    for (int i = 0; i < 2 * PEND_N; i++) hak_free(got[i]);
  } else {
    printf("   %d of %d back while the freer idled\n", first, PEND_N);
  }
  pend_set(&j, 4);
  pthread_join(b, NULL);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_pending_remote_frees(64, 64);   /* one slab, a run of 64 blocks */
  test_pending_remote_frees(1024, 20); /* 5 slabs at most, runs of 4 blocks (4 KiB) */
  test_owner_alive();
  test_owner_gone();
  test_heir();
  test_heir_any_parked();
  test_steal_parked();
  test_successor_inherits();
  test_ping_pong();
  test_realloc_first_call();
  return ts_check_finish("unit_remote");
}
