/* lc_idle_cache: what an idle thread's own caches hold must go back to the
 * OS too, and the thread must find its memory intact when it wakes.
 *
 * `--owners` (8) threads each allocate `--class-kib` (96) KiB of blocks of
 * every size 16, 32 .. 1024 B (all written, each with a stamp), keep
 * `--keep` (64) of them live, free a quarter of the rest themselves (those
 * land in the thread's own cache and current slabs) and hand the others to
 * `--freers` (2) threads, which check and free them: remote frees onto the
 * owners' current slabs.  Then every owner blocks in read() on a pipe and
 * makes no allocator call.  An allocator that takes back such memory only
 * at the owning thread's next call keeps it resident for as long as the
 * thread sleeps; the blocks the owners kept pin a few pages at most.
 *
 * Settle phase: once the freers are done, main reads RSS right away and
 * then every 50 ms for up to `--settle-ms` (2000) ms, stopping as soon as it
 * is within `--max-final-pct` (0: report only) of the peak.  Then main wakes
 * the owners, and each checks its kept blocks' stamps, frees them, and runs
 * `--wake-rounds` (200) rounds of allocating, checking and freeing 64
 * blocks of mixed sizes.
 *
 * Race phase (`--race-ms T`, T > 0; no settle phase; `--prime-mib M`
 * first allocates and frees M MiB of 4 KiB blocks, so that hakmem, which
 * starts its purger thread once it has mapped 32 MiB, has it running): for
 * T ms each owner
 * loops: allocate a batch, hand three quarters to the freers through a
 * locked queue, free the rest, check the kept blocks (renewing one), and
 * sleep 0 .. `--idle-ms` (20) ms in nanosleep.  Run with a short purge
 * delay, the allocator's purger takes the owners' caches while they sleep
 * and the owners wake in the middle of it: every stamp must survive.
 *
 * Asserts (exit status 1): every stamp intact when checked, every block
 * freed once (the program's own count), and with --max-final-pct P > 0 the
 * lowest RSS reading of the settle phase <= P% of the peak.  LC_METRICS
 * gives mallocs and cross_frees (blocks freed by a freer while their owner
 * lived) for run_lifecycle.sh.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/args.h"
#include "support/clock.h"
#include "support/fill.h"
#include "support/report.h"
#include "support/rng.h"
#include "support/rss.h"

#define SIZE_STEP 16
#define SIZE_MAX_B 1024
#define N_SIZES (SIZE_MAX_B / SIZE_STEP)
#define POLL_MS 50
#define WAKE_BATCH 64

typedef struct {
  void *p;
  uint32_t size;
  uint64_t tag;
} blk_t;

/* The freers' queue: owners push, freers pop, under `qlock`. */
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static blk_t *queue;
static size_t q_len, q_cap;
static int q_closed;

static atomic_ulong n_mallocs, n_frees, n_cross, n_bad;

typedef struct {
  pthread_t th;
  int id;
  int pipe_fd[2];
  int ready;         /* settle phase: set under qlock when the owner sleeps */
} owner_t;

static long class_kib, keep_n, wake_rounds, race_ms, idle_ms;
static uint64_t seed;
static double race_end;

static void fail_exit_oom(size_t n) { TS_FAIL_EXIT("malloc(%zu) returned NULL", n); }

static blk_t new_block(uint32_t size, uint64_t *serial, int owner)
{
  void *p = malloc(size);
  if (p == NULL) fail_exit_oom(size);
  atomic_fetch_add_explicit(&n_mallocs, 1, memory_order_relaxed);
  uint64_t tag = ts_stamp_tag((uint64_t)owner, (*serial)++, size);
  memset(p, 0x5A, size);
  ts_stamp_fill(p, size, tag);
  return (blk_t){ p, size, tag };
}

static void check_free(const blk_t *b)
{
  if (!ts_stamp_check(b->p, b->size, b->tag)) atomic_fetch_add_explicit(&n_bad, 1, memory_order_relaxed);
  free(b->p);
  atomic_fetch_add_explicit(&n_frees, 1, memory_order_relaxed);
}

static void queue_push(const blk_t *b, size_t n)
{
  pthread_mutex_lock(&qlock);
  if (q_len + n > q_cap) {
    size_t cap = (q_len + n) * 2;
    blk_t *q = realloc(queue, cap * sizeof *q);
    if (q == NULL) fail_exit_oom(cap * sizeof *q);
    queue = q;
    q_cap = cap;
  }
  memcpy(queue + q_len, b, n * sizeof *b);
  q_len += n;
  pthread_cond_broadcast(&qcond);
  pthread_mutex_unlock(&qlock);
}

static void *freer_main(void *arg)
{
  (void)arg;
  blk_t batch[256];
  for (;;) {
    pthread_mutex_lock(&qlock);
    while (q_len == 0 && !q_closed) pthread_cond_wait(&qcond, &qlock);
    size_t n = q_len < 256 ? q_len : 256;
    memcpy(batch, queue + q_len - n, n * sizeof *batch);
    q_len -= n;
    int done = q_closed && n == 0;
    pthread_cond_broadcast(&qcond);
    pthread_mutex_unlock(&qlock);
    if (done) return NULL;
    for (size_t i = 0; i < n; i++) check_free(&batch[i]);
    atomic_fetch_add_explicit(&n_cross, n, memory_order_relaxed);
  }
}

/* Allocate `count` blocks of sizes drawn by r, free a quarter, queue the rest. */
static void churn(blk_t *tmp, size_t count, ts_xs *r, uint64_t *serial, int owner)
{
  for (size_t i = 0; i < count; i++) tmp[i] = new_block((uint32_t)(SIZE_STEP * (1 + ts_xs_below(r, N_SIZES))), serial, owner);
  size_t local = count / 4;
  for (size_t i = 0; i < local; i++) check_free(&tmp[i]);
  queue_push(tmp + local, count - local);
}

static void check_kept(blk_t *keep)
{
  for (long i = 0; i < keep_n; i++)
    if (!ts_stamp_check(keep[i].p, keep[i].size, keep[i].tag)) atomic_fetch_add_explicit(&n_bad, 1, memory_order_relaxed);
}

static void *owner_main(void *arg)
{
  owner_t *o = arg;
  uint64_t serial = 0;
  ts_xs r = { ts_hash_pair(seed, (uint64_t)o->id + 1) };
  blk_t *keep = calloc((size_t)keep_n, sizeof *keep);
  if (keep == NULL) fail_exit_oom((size_t)keep_n * sizeof *keep);
  for (long i = 0; i < keep_n; i++) keep[i] = new_block((uint32_t)(SIZE_STEP * (1 + i % N_SIZES)), &serial, o->id);

  if (race_ms > 0) {
    blk_t tmp[WAKE_BATCH];
    while (ts_now() < race_end) {
      churn(tmp, WAKE_BATCH, &r, &serial, o->id);
      check_kept(keep);
      long k = (long)ts_xs_below(&r, (uint32_t)keep_n);
      check_free(&keep[k]);
      keep[k] = new_block(keep[k].size, &serial, o->id);
      ts_sleep((double)ts_xs_below(&r, (uint32_t)idle_ms + 1) / 1000.0);
    }
  } else {
    /* Every size: class_kib KiB of each, in batches. */
    blk_t *tmp = malloc(sizeof *tmp * ((size_t)class_kib * 1024 / SIZE_STEP));
    if (tmp == NULL) fail_exit_oom((size_t)class_kib * 1024);
    for (uint32_t size = SIZE_STEP; size <= SIZE_MAX_B; size += SIZE_STEP) {
      size_t count = (size_t)class_kib * 1024 / size;
      for (size_t i = 0; i < count; i++) tmp[i] = new_block(size, &serial, o->id);
      size_t local = count / 4;
      for (size_t i = 0; i < local; i++) check_free(&tmp[i]);
      queue_push(tmp + local, count - local);
    }
    free(tmp);
    pthread_mutex_lock(&qlock);
    o->ready = 1;
    pthread_cond_broadcast(&qcond);
    pthread_mutex_unlock(&qlock);
    /* Idle: no allocator call until main writes to the pipe. */
    char c;
    while (read(o->pipe_fd[0], &c, 1) < 0 && errno == EINTR) {
    }
    check_kept(keep);
    blk_t batch[WAKE_BATCH];
    for (long round = 0; round < wake_rounds; round++) {
      for (int i = 0; i < WAKE_BATCH; i++)
        batch[i] = new_block((uint32_t)(SIZE_STEP * (1 + ts_xs_below(&r, N_SIZES))), &serial, o->id);
      for (int i = 0; i < WAKE_BATCH; i++) check_free(&batch[i]);
    }
  }
  for (long i = 0; i < keep_n; i++) check_free(&keep[i]);
  free(keep);
  atomic_fetch_add_explicit(&n_mallocs, 1, memory_order_relaxed);  /* keep itself */
  atomic_fetch_add_explicit(&n_frees, 1, memory_order_relaxed);
  return NULL;
}

int main(int argc, char **argv)
{
  long n_owners = ts_arg_long(argc, argv, "--owners", 8);
  long n_freers = ts_arg_long(argc, argv, "--freers", 2);
  class_kib = ts_arg_long(argc, argv, "--class-kib", 96);
  keep_n = ts_arg_long(argc, argv, "--keep", 64);
  wake_rounds = ts_arg_long(argc, argv, "--wake-rounds", 200);
  race_ms = ts_arg_long(argc, argv, "--race-ms", 0);
  idle_ms = ts_arg_long(argc, argv, "--idle-ms", 20);
  long settle_ms = ts_arg_long(argc, argv, "--settle-ms", 2000);
  double max_final_pct = ts_arg_double(argc, argv, "--max-final-pct", 0.0);
  seed = (uint64_t)ts_arg_long(argc, argv, "--seed", 0x1DCA);
  if (n_owners < 1 || n_freers < 1 || class_kib < 1 || keep_n < 1 || wake_rounds < 0 || race_ms < 0 ||
      idle_ms < 0 || settle_ms < 0)
    TS_FAIL_EXIT("need --owners, --freers, --class-kib, --keep >= 1 and the others >= 0");

  long prime_mib = ts_arg_long(argc, argv, "--prime-mib", 0);
  double t0 = ts_now();
  /* hakmem starts its purger once it has mapped 32 MiB: the race phase's
   * own work maps less. */
  if (prime_mib > 0) {
    size_t n = (size_t)prime_mib * 256;
    void **prime = malloc(n * sizeof *prime);
    if (prime == NULL) TS_FAIL_EXIT("allocation of the prime table failed");
    for (size_t i = 0; i < n; i++) {
      prime[i] = malloc(4096);
      if (prime[i] == NULL) fail_exit_oom(4096);
      memset(prime[i], 0x11, 4096);
    }
    for (size_t i = 0; i < n; i++) free(prime[i]);
    free(prime);
  }
  race_end = t0 + (double)race_ms / 1000.0;
  owner_t *os = calloc((size_t)n_owners, sizeof *os);
  pthread_t *fs = calloc((size_t)n_freers, sizeof *fs);
  if (os == NULL || fs == NULL) TS_FAIL_EXIT("allocation of the thread tables failed");
  for (long k = 0; k < n_freers; k++)
    if (pthread_create(&fs[k], NULL, freer_main, NULL) != 0) TS_FAIL_EXIT("pthread_create failed");
  for (long k = 0; k < n_owners; k++) {
    os[k].id = (int)k;
    if (pipe(os[k].pipe_fd) != 0) TS_FAIL_EXIT("pipe: %s", strerror(errno));
    if (pthread_create(&os[k].th, NULL, owner_main, &os[k]) != 0) TS_FAIL_EXIT("pthread_create failed");
  }

  ts_mem peak = { 0 }, fin = { 0 };
  long best_kib = 0, best_ms = 0, waited_ms = 0;
  double best_pct = 0, pct = 0;
  if (race_ms == 0) {
    /* Every owner asleep and the queue drained: the freers are done. */
    pthread_mutex_lock(&qlock);
    for (;;) {
      long ready = 0;
      for (long k = 0; k < n_owners; k++) ready += os[k].ready;
      if (ready == n_owners && q_len == 0) break;
      pthread_cond_wait(&qcond, &qlock);
    }
    pthread_mutex_unlock(&qlock);
    ts_sleep(0.02);  /* the freers' last batch: free() calls after the pop */
    peak = ts_mem_now();
    fin = peak;
    best_kib = ts_rss_settle(fin.rss_kib, peak.hwm_kib, max_final_pct, settle_ms, POLL_MS, &best_ms, &waited_ms);
    pct = 100.0 * (double)fin.rss_kib / (double)peak.hwm_kib;
    best_pct = 100.0 * (double)best_kib / (double)peak.hwm_kib;
    for (long k = 0; k < n_owners; k++)
      if (write(os[k].pipe_fd[1], "w", 1) != 1) TS_FAIL_EXIT("write: %s", strerror(errno));
  }
  for (long k = 0; k < n_owners; k++) pthread_join(os[k].th, NULL);
  pthread_mutex_lock(&qlock);
  q_closed = 1;
  pthread_cond_broadcast(&qcond);
  pthread_mutex_unlock(&qlock);
  for (long k = 0; k < n_freers; k++) pthread_join(fs[k], NULL);

  unsigned long mallocs = atomic_load(&n_mallocs), frees = atomic_load(&n_frees), bad = atomic_load(&n_bad);
  int ok = 1;
  if (race_ms == 0) {
    ts_out("lc_idle_cache: %ld owners idle in read(): peak rss %.1f MiB, rss once the freers were done "
           "%.1f MiB = %.1f%% of peak, lowest within %ld ms %.1f MiB = %.1f%% (after %ld ms)\n",
           n_owners, ts_mib(peak.hwm_kib), ts_mib(fin.rss_kib), pct, waited_ms, ts_mib(best_kib), best_pct,
           best_ms);
    if (max_final_pct > 0 && best_pct > max_final_pct) {
      ts_err("FAIL: rss stays at %.1f%% of the peak (limit %.1f%%) while the owners sleep\n", best_pct,
             max_final_pct);
      ok = 0;
    }
  } else {
    ts_out("lc_idle_cache: %ld owners, %ld ms of allocate, hand over, sleep 0 .. %ld ms\n", n_owners, race_ms,
           idle_ms);
  }
  if (bad != 0) {
    ts_err("FAIL: %lu blocks had their stamp overwritten (memory handed out twice or corrupted)\n", bad);
    ok = 0;
  }
  if (frees != mallocs) {
    ts_err("FAIL: bookkeeping: %lu mallocs, %lu frees\n", mallocs, frees);
    ok = 0;
  }
  ts_out("LC_METRICS prog=idle_cache wall_s=%.2f peak_rss_kib=%ld settled_rss_kib=%ld settled_pct=%.1f "
         "mallocs=%lu cross_frees=%lu result=%s\n",
         ts_now() - t0, peak.hwm_kib, best_kib, best_pct, mallocs, atomic_load(&n_cross), ok ? "pass" : "fail");
  free(queue);
  free(fs);
  free(os);
  return ok ? 0 : 1;
}
