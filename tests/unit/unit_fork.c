/* unit_fork: behaviour that needs a child process.
 *
 *   unit_fork double_free        hak_free twice on a small block
 *   unit_fork double_free_later  a small block freed, others freed, then it again
 *   unit_fork interior           hak_free(p + 8) / (p + 1) inside a small block
 *   unit_fork interior_medium    hak_free(p + 4096) inside a 100000-byte block
 *   unit_fork double_free_remote another thread frees a small block twice (the
 *                                second while the first is a pending remote free)
 *   unit_fork double_free_remote_pushed  the same, after the run was pushed
 *   unit_fork fork_threads       fork() while other threads allocate and the
 *                                purger thread runs: the child's allocator works
 *   unit_fork                    all of the above
 *
 * A misuse case forks a child that commits the misuse with its stderr on a
 * pipe.  The child must die of SIGABRT and say "hakmem" on stderr.  If the
 * misuse goes unnoticed the child exits 0 and the case fails; a child that
 * hangs is ended by alarm() (SIGALRM), which also fails the case.
 *
 * Under ThreadSanitizer the program reports a skip (exit 77).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hakmem.h"
#include "support/check.h"
#include "support/child.h"
#include "support/threads.h"

#define SKIP_CODE 77
#define CHILD_SECONDS 20 /* a misuse child's alarm */

/* Some freed-or-not work the child does after the misuse returned, so that a
 * corrupted free list has a chance to show; then the child exits 0. */
static void after_misuse(void) {
  void *p[64];
  for (int i = 0; i < 64; i++) p[i] = hak_malloc(64);
  for (int i = 0; i < 64; i++) hak_free(p[i]);
  fprintf(stderr, "child: the misuse returned normally\n");
  _exit(0);
}

static void misuse_double_free(void) {
  char *p = hak_malloc(64);
  memset(p, 1, 64);
  hak_free(p);
  hak_free(p);
  after_misuse();
}

static void misuse_double_free_later(void) {
  char *a = hak_malloc(48), *b = hak_malloc(48), *c = hak_malloc(48);
  hak_free(a);
  hak_free(b);
  hak_free(c);
  hak_free(a); /* a is no longer at the head of any list */
  after_misuse();
}

static void misuse_interior(void) {
  char *keep = hak_malloc(64); /* the slab holds another live block */
  char *p = hak_malloc(64);
  (void)keep;
  hak_free(p + 8);
  after_misuse();
}

static void misuse_interior_odd(void) {
  char *keep = hak_malloc(256);
  char *p = hak_malloc(256);
  (void)keep;
  hak_free(p + 1);
  after_misuse();
}

static void misuse_interior_medium(void) {
  char *keep = hak_malloc(100000);
  char *p = hak_malloc(100000);
  (void)keep;
  hak_free(p + 4096);
  after_misuse();
}

/* A one-byte overflow from a 32-byte block into the free block after it
 * (a fresh slab hands its blocks out in address order): the next malloc of
 * the class pops that block and finds its free-list words changed. */
static void misuse_overflow_into_free(void) {
  char *p = hak_malloc(32);
  memset(p, 'A', 33);
  void *q = hak_malloc(32);
  void *r = hak_malloc(32);
  (void)q;
  (void)r;
  after_misuse();
}

/* A write after free over the freed block's first bytes, then the malloc
 * that would hand out the block behind its link. */
static void misuse_write_after_free(void) {
  char *p = hak_malloc(96);
  hak_free(p);
  memset(p, 0x41, 8);
  void *q = hak_malloc(96);
  void *r = hak_malloc(96);
  (void)q;
  (void)r;
  after_misuse();
}

/* The same, with the write only over the link's second word. */
static void misuse_write_after_free_check(void) {
  char *p = hak_malloc(160);
  hak_free(p);
  p[12] ^= 1;
  void *q = hak_malloc(160);
  void *r = hak_malloc(160);
  (void)q;
  (void)r;
  after_misuse();
}

/* Remote double frees: another thread frees a block twice.  Its first free
 * leaves the block on the freeing heap's pending run (remote frees are
 * batched, src/remote.c), so the second must be caught there, and after
 * the run was pushed (other blocks of the slab freed in between). */
struct remote_twice { char *p; char *others[200]; int n_others; };

static void *free_remote_twice(void *arg) {
  struct remote_twice *r = arg;
  hak_free(r->p);
  for (int i = 0; i < r->n_others; i++) hak_free(r->others[i]);
  hak_free(r->p);
  return NULL;
}

static void remote_twice(int n_others) {
  static struct remote_twice r;
  r.p = hak_malloc(64);
  memset(r.p, 1, 64);
  r.n_others = n_others;
  for (int i = 0; i < n_others; i++) r.others[i] = hak_malloc(64);
  pthread_t t;
  if (pthread_create(&t, NULL, free_remote_twice, &r) != 0) _exit(3);
  pthread_join(t, NULL);
  after_misuse();
}

static void misuse_double_free_remote(void) { remote_twice(0); }
static void misuse_double_free_remote_pushed(void) { remote_twice(200); }

/* ------------------------------------------------------------------ */
/* Trailers (src/trailer.c): blocks of the classes above 64 KiB
 * end in canary bytes right after the size asked for and a checked word at
 * the block's end. */

#define TRAILED 70000  /* a size of the 80 KiB class, usable exactly */
#define MSG_OVERFLOW "the bytes after a block were overwritten"
#define MSG_END "the end of a block was overwritten"

/* One byte past the block, then the free (the fast path's thread cache). */
static void misuse_trailer_overflow(void) {
  char *p = hak_malloc(TRAILED);
  memset(p, 'x', TRAILED + 1);
  hak_free(p);
  after_misuse();
}

/* The same through calloc and the aligned allocators, at the top class, and
 * a realloc instead of the free. */
static void misuse_trailer_overflow_calloc(void) {
  char *p = hak_calloc(1, 200 * 1024);
  p[200 * 1024] = 1;
  hak_free(p);
  after_misuse();
}
static void misuse_trailer_overflow_aligned(void) {
  void *v = NULL;
  if (hak_posix_memalign(&v, 4096, TRAILED) != 0) _exit(3);
  memset(v, 'x', TRAILED + 8);
  hak_free(v);
  after_misuse();
}
static void misuse_trailer_overflow_top(void) {
  size_t n = 256 * 1024 - 24;  /* the largest request of the top class */
  char *p = hak_malloc(n);
  p[n] = 0;
  hak_free(p);
  after_misuse();
}
static void misuse_trailer_overflow_realloc(void) {
  char *p = hak_malloc(TRAILED);
  p[TRAILED + 3] = 'x';
  p = hak_realloc(p, TRAILED + 100);
  after_misuse();
}

/* An underflow of a block hits the end of the block before it: two
 * neighbours of the class (a fresh slab hands its blocks out in address
 * order), the byte before the second overwritten, the first freed. */
static void misuse_trailer_underflow(void) {
  char *a = hak_malloc(TRAILED), *b = hak_malloc(TRAILED);
  if (b != a + 80 * 1024) {
    fprintf(stderr, "child: blocks %p and %p are not neighbours\n", (void *)a, (void *)b);
    _exit(4);
  }
  b[-1] = 'x';
  hak_free(b);
  hak_free(a);
  after_misuse();
}

/* The overflowed block freed by another thread (free_remote). */
static void *free_one(void *p) {
  hak_free(p);
  return NULL;
}
static void misuse_trailer_overflow_remote(void) {
  char *p = hak_malloc(TRAILED);
  memset(p, 'x', TRAILED + 16);
  pthread_t t;
  if (pthread_create(&t, NULL, free_one, p) != 0) _exit(3);
  pthread_join(t, NULL);
  after_misuse();
}

/* A double free of a block that another thread's free put in the transfer
 * cache (src/xfer.c: blocks of 1-64 KiB freed into another heap's slab). */
static void *free_one_xfer(void *p) {
  hak_free(p);
  return NULL;
}
static void misuse_double_free_xfer(void) {
  char *p = hak_malloc(20 * 1024);
  memset(p, 1, 64);
  pthread_t t;
  if (pthread_create(&t, NULL, free_one_xfer, p) != 0) _exit(3);
  pthread_join(t, NULL);
  hak_free(p);
  after_misuse();
}

/* ------------------------------------------------------------------ */
/* fork() while another thread is inside the allocator. */

static atomic_bool stop_churn;

/* Churn threads that have started: their own start-up (pthread_getattr_np
 * and, under ASan, the sanitizer's allocator) is done. */
static atomic_int churn_running;

static void *churn(void *arg) {
  (void)arg;
  void *slot[256] = {0};
  uint32_t x = 1;
  atomic_fetch_add(&churn_running, 1);
  while (!atomic_load_explicit(&stop_churn, memory_order_relaxed)) {
    x = x * 1664525u + 1013904223u;
    unsigned i = x >> 24;
    hak_free(slot[i]);
    size_t size = (x & 0x10000) ? (x >> 4) % 200000 : (x >> 4) % 512;
    slot[i] = hak_malloc(size);
    if (slot[i]) memset(slot[i], 7, size < 64 ? size : 64);
  }
  for (int i = 0; i < 256; i++) hak_free(slot[i]);
  return NULL;
}

/* Blocks of a thread that exited before the fork: its heap is parked then
 * (a new thread of the child takes it). */
static void *parked[64];
static void *short_lived(void *arg) {
  (void)arg;
  for (int i = 0; i < 64; i++) {
    parked[i] = hak_malloc((size_t)i * 48 + 16);
    if (parked[i]) memset(parked[i], 5, 16);
  }
  return NULL;
}

static int child_work(void) {
  for (int i = 0; i < 64; i++) hak_free(parked[i]);  /* into the parked heap */
  /* The child uses the allocator for all size ranges, and from a new thread. */
  void *p[1000];
  for (int round = 0; round < 20; round++) {
    for (int i = 0; i < 1000; i++) {
      size_t size = (size_t)(i * 37 + round) % (i % 50 == 0 ? 300000 : 2000);
      p[i] = hak_malloc(size);
      if (!p[i]) return 2;
      memset(p[i], i & 0xff, size);
    }
    for (int i = 0; i < 1000; i++) hak_free(p[i]);
  }
  void *big = hak_malloc(5u << 20);
  if (!big) return 3;
  memset(big, 1, 5u << 20);
  hak_free(big);
  pthread_t t;
  atomic_store(&stop_churn, false);
  if (pthread_create(&t, NULL, churn, NULL) != 0) return 4;
  for (int i = 0; i < 20000; i++) hak_free(hak_malloc((size_t)i % 3000));
  atomic_store(&stop_churn, true);
  pthread_join(t, NULL);
  return 0;
}

/* Start hakmem's purger thread from this thread, before any fork, and wait
 * until it runs.  It starts at a refill once 32 MiB are mapped.  Started
 * instead by a churn thread's refill at the moment of a fork, its start-up
 * (inside AddressSanitizer, which frees in pthread_getattr_np) could hold a
 * lock of the sanitizer's allocator, which GCC 12's runtime does not take
 * across fork: the child then hung in the sanitizer (seen under ASan). */
static void start_purger(void) {
  const char *env = getenv("HAKMEM_PURGE_THREAD");
  if (env && env[0] == '0') return;
  void *big = hak_malloc(48u << 20);  /* mapped: above the threshold */
  REQUIRE(big != NULL, "malloc(48 MiB)");
  static void *small[4000];
  for (int i = 0; i < 4000; i++) small[i] = hak_malloc((size_t)(i % 64 + 1) * 32);  /* refills */
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  bool running;
  do {
    running = ts_thread_named("hakmem-purge");  /* its first act (src/purge.c) */
    if (!running) sched_yield();
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (!running && now.tv_sec - t0.tv_sec < CHILD_SECONDS);
  CHECK(running, "the purger thread started at a refill with 48 MiB mapped");
  for (int i = 0; i < 4000; i++) hak_free(small[i]);
  hak_free(big);
}

static void test_fork_threads(void) {
  ts_check_begin("fork while another thread allocates");
  start_purger();
  pthread_t t[2];
  atomic_store(&stop_churn, false);
  REQUIRE(pthread_create(&t[0], NULL, churn, NULL) == 0, "pthread_create");
  REQUIRE(pthread_create(&t[1], NULL, churn, NULL) == 0, "pthread_create");
  /* Fork only once both threads run hakmem code.  A fork while a new
   * thread is still starting can inherit a lock of AddressSanitizer's own
   * allocator (GCC 12's runtime does not take it across fork): the child's
   * pthread_create then hangs inside the sanitizer, not in hakmem (seen
   * in about half of the ASan runs once hakmem's loop before the first
   * fork got faster). */
  while (atomic_load(&churn_running) < 2) sched_yield();
  int ok = 0;
  const int forks = 40;
  for (int i = 0; i < forks; i++) {
    /* The parent allocates too, so the fork can land anywhere. */
    for (int k = 0; k < 500; k++) hak_free(hak_malloc((size_t)(k * 13 + i) % 4000));
    pthread_t sl;
    REQUIRE(pthread_create(&sl, NULL, short_lived, NULL) == 0, "pthread_create");
    pthread_join(sl, NULL);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
      alarm(CHILD_SECONDS);
      _exit(child_work());
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    bool good = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    CHECK(good, "fork #%d: child %s %d%s", i, WIFSIGNALED(st) ? "died of signal" : "exited with",
          WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
          WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? " (hung: a lock held at fork time?)" : "");
    ok += good;
    for (int k = 0; k < 64; k++) hak_free(parked[k]);
  }
  atomic_store(&stop_churn, true);
  pthread_join(t[0], NULL);
  pthread_join(t[1], NULL);
  printf("   %d of %d children worked\n", ok, forks);
}

static const ts_misuse cases[] = {
    {"double_free", misuse_double_free, NULL},
    {"double_free_later", misuse_double_free_later, NULL},
    {"interior", misuse_interior, NULL},
    {"interior_odd", misuse_interior_odd, NULL},
    {"interior_medium", misuse_interior_medium, NULL},
    {"overflow_into_free", misuse_overflow_into_free, NULL},
    {"write_after_free", misuse_write_after_free, NULL},
    {"write_after_free_check", misuse_write_after_free_check, NULL},
    {"double_free_remote", misuse_double_free_remote, NULL},
    {"double_free_remote_pushed", misuse_double_free_remote_pushed, NULL},
    {"trailer_overflow", misuse_trailer_overflow, MSG_OVERFLOW},
    {"trailer_overflow_calloc", misuse_trailer_overflow_calloc, MSG_OVERFLOW},
    {"trailer_overflow_aligned", misuse_trailer_overflow_aligned, MSG_OVERFLOW},
    {"trailer_overflow_top", misuse_trailer_overflow_top, MSG_OVERFLOW},
    {"trailer_overflow_realloc", misuse_trailer_overflow_realloc, MSG_OVERFLOW},
    {"trailer_underflow", misuse_trailer_underflow, MSG_END},
    {"trailer_overflow_remote", misuse_trailer_overflow_remote, MSG_OVERFLOW},
    {"double_free_xfer", misuse_double_free_xfer, "double free"},
};

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
#if defined(HAKMEM_TSAN) || defined(__SANITIZE_THREAD__)
  (void)argc;
  (void)argv;
  (void)cases;
  (void)test_fork_threads;
  (void)ts_expect_abort;
  printf("SKIP: fork-based tests are not run under ThreadSanitizer\n");
  return SKIP_CODE;
#else
  const char *only = argc > 1 ? argv[1] : NULL;
  bool ran = false;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (only && strcmp(only, cases[i].name) != 0 &&
        !(strcmp(only, "interior") == 0 && strcmp(cases[i].name, "interior_odd") == 0))
      continue;
    ts_expect_abort("misuse", &cases[i], CHILD_SECONDS);
    ran = true;
  }
  if (!only || strcmp(only, "fork_threads") == 0) {
    test_fork_threads();
    ran = true;
  }
  if (!ran) {
    fprintf(stderr, "unit_fork: unknown case '%s'\n", only);
    return 2;
  }
  return ts_check_finish("unit_fork");
#endif
}
