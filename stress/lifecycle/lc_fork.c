/* lc_fork: fork() while other threads allocate and free.
 *
 * `--workers` threads (4) loop until told to stop: each iteration takes a
 * random slot of a shared table of blocks (atomic exchange), checks and frees
 * the block it held (often one another worker allocated), allocates a new
 * block of mixed size (16 B .. 32 KiB, 1% of 64 KiB .. 1 MiB) and stores it in the
 * slot; plus short-lived malloc/free pairs.  Meanwhile the process forks
 * `--forks` times (200): even-numbered forks from the main thread, odd ones
 * from worker 0 (so a child's only thread is sometimes not the main thread).
 * Just before each fork the forking thread allocates a batch of blocks
 * (16 B .. 1 MiB).
 *
 * Each child, with whatever state the allocator was in at the fork:
 *   - checks and frees the forking thread's batch;
 *   - starts a thread; the child's first thread frees the even slots of the
 *     table and the new thread the odd ones (blocks allocated by parent
 *     threads that do not exist in the child), both check every stamp;
 *   - both allocate, realloc and free blocks of mixed sizes;
 *   - with --child-linger-ms N, the child then blocks N ms in poll(): the
 *     heaps of the parent's other threads stay live and idle in the child
 *     (their threads and stacks are gone), and an allocator's background
 *     thread gets the time to pass over them;
 *   - _exit(0) when all checks held, a distinct non-zero code otherwise.
 * The parent frees its copy of the batch and waits for each child with a
 * deadline (--child-timeout seconds; SIGCHLD is blocked in every thread and
 * waited for with sigtimedwait).  A child still running at the deadline is
 * killed and counted as hung.
 *
 * Asserts (exit status 1 on failure): every child exited with status 0
 * (none hung, none killed by a signal), every stamp checked by the parent
 * was intact, and the parent freed everything it allocated.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/args.h"
#include "support/clock.h"
#include "support/fill.h"
#include "support/report.h"
#include "support/rng.h"
#include "support/rss.h"

/* Child exit codes */
enum {
  CHILD_OK = 0,
  CHILD_BAD_STAMP = 2,
  CHILD_ENOMEM = 3,
  CHILD_THREAD = 4,
  CHILD_BAD_REALLOC = 5,
};

/* A block describes itself: [0,8) size, [8,16) tag, the rest stamped with
 * ts_stamp_fill.  So a slot is a single atomic pointer and a child can check any
 * block it finds without other bookkeeping.  Minimum size 16. */
static void stamp(void *p, size_t size, uint64_t tag)
{
  memcpy(p, &size, 8);
  memcpy((char *)p + 8, &tag, 8);
  ts_stamp_fill((char *)p + 16, size - 16, tag);
}

/* returns the block's size, or 0 if the stamp is broken */
static size_t check(const void *p)
{
  size_t size;
  uint64_t tag;
  memcpy(&size, p, 8);
  memcpy(&tag, (const char *)p + 8, 8);
  if (size < 16 || size > (64u << 20))
    return 0;
  return ts_stamp_check((const char *)p + 16, size - 16, tag) ? size : 0;
}

static long n_workers, n_forks, slots_per_worker, batch_n, child_blocks;
static double child_timeout;
static long child_linger_ms;

static _Atomic(void *) *table; /* n_workers * slots_per_worker slots */
static size_t table_n;
static atomic_int stop;
static atomic_ulong parent_allocs, parent_frees, parent_bad;

/* fork requests to worker 0: main stores the fork number + 1 in fork_req,
 * worker 0 forks and publishes the child's pid under fork_mu. */
static atomic_long fork_req;
static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fork_cv = PTHREAD_COND_INITIALIZER;
static pid_t fork_resp_pid;
static int fork_resp_ready;
static int fork_resp_errno;

static size_t worker_size(ts_xs *rng)
{
  if (ts_xs_next(rng) % 100 == 0)
    return ts_xs_size_log(rng, 64u << 10, 1u << 20);
  return ts_xs_size_log(rng, 16, 32u << 10);
}

/* ---------------- the child ---------------- */

typedef struct child_part {
  size_t first;   /* free table slots first, first+2, ... */
  uint64_t seed;
  int rc;
} child_part_t;

static void child_work(child_part_t *cp)
{
  /* the parent's blocks from the table */
  for (size_t i = cp->first; i < table_n; i += 2) {
    void *p = atomic_load_explicit(&table[i], memory_order_acquire);
    if (!p)
      continue;
    if (!check(p)) {
      cp->rc = CHILD_BAD_STAMP;
      return;
    }
    atomic_store_explicit(&table[i], NULL, memory_order_relaxed);
    free(p);
  }
  /* new blocks of its own: allocate, grow/shrink some, free */
  ts_xs rng = {cp->seed};
  void **mine = malloc((size_t)child_blocks * sizeof(void *));
  if (!mine) {
    cp->rc = CHILD_ENOMEM;
    return;
  }
  for (long i = 0; i < child_blocks; i++) {
    size_t sz = worker_size(&rng);
    mine[i] = malloc(sz);
    if (!mine[i]) {
      cp->rc = CHILD_ENOMEM;
      return;
    }
    stamp(mine[i], sz, ts_stamp_tag(cp->seed, (uint64_t)i, sz));
  }
  for (long i = 0; i < child_blocks; i += 3) {
    size_t old = check(mine[i]);
    if (!old) {
      cp->rc = CHILD_BAD_STAMP;
      return;
    }
    size_t nsz = (i % 2) ? old * 2 + 100 : (old / 2 > 16 ? old / 2 : 16);
    unsigned char *q = realloc(mine[i], nsz);
    if (!q) {
      cp->rc = CHILD_ENOMEM;
      return;
    }
    /* the contents up to the smaller size must have moved along: all of
     * the old stamp when growing, the header when shrinking */
    size_t hdr;
    memcpy(&hdr, q, 8);
    if (hdr != old || (nsz >= old && check(q) != old)) {
      cp->rc = CHILD_BAD_REALLOC;
      return;
    }
    stamp(q, nsz, ts_stamp_tag(cp->seed, 1000000u + (uint64_t)i, nsz));
    mine[i] = q;
  }
  for (long i = 0; i < child_blocks; i++) {
    if (!check(mine[i])) {
      cp->rc = CHILD_BAD_STAMP;
      return;
    }
    free(mine[i]);
  }
  free(mine);
  cp->rc = CHILD_OK;
}

static void *child_thread(void *arg)
{
  child_work((child_part_t *)arg);
  return NULL;
}

static int child_main(void **batch, long nbatch, long fork_no)
{
  for (long i = 0; i < nbatch; i++) {
    if (!check(batch[i]))
      return CHILD_BAD_STAMP;
    free(batch[i]);
  }
  free(batch);

  child_part_t a = {0, ts_hash_pair(0xF0u, (uint64_t)fork_no * 2), -1};
  child_part_t b = {1, ts_hash_pair(0xF0u, (uint64_t)fork_no * 2 + 1), -1};
  pthread_t th;
  if (pthread_create(&th, NULL, child_thread, &b) != 0)
    return CHILD_THREAD;
  child_work(&a);
  if (pthread_join(th, NULL) != 0)
    return CHILD_THREAD;
  if (child_linger_ms > 0)
    (void)poll(NULL, 0, (int)child_linger_ms);
  if (a.rc != CHILD_OK)
    return a.rc;
  return b.rc;
}

/* ---------------- forking ---------------- */

/* Allocate a batch, fork, and in the parent free the batch.  Returns the
 * child's pid, or -1 with errno set. */
static pid_t do_fork(long fork_no, ts_xs *rng)
{
  void **batch = malloc((size_t)batch_n * sizeof(void *));
  if (!batch)
    TS_FAIL_EXIT("malloc of the batch array failed");
  for (long i = 0; i < batch_n; i++) {
    size_t sz = (i % 16 == 15) ? ts_xs_size_log(rng, 64u << 10, 1u << 20) : ts_xs_size_log(rng, 16, 32u << 10);
    batch[i] = malloc(sz);
    if (!batch[i])
      TS_FAIL_EXIT("malloc(%zu) failed before fork", sz);
    stamp(batch[i], sz, ts_stamp_tag(0xBA7Cu + (uint64_t)fork_no, (uint64_t)i, sz));
  }
  atomic_fetch_add(&parent_allocs, (unsigned long)batch_n + 1);

  pid_t pid = fork();
  if (pid == 0)
    _exit(child_main(batch, batch_n, fork_no));
  int saved = errno;

  for (long i = 0; i < batch_n; i++) {
    if (!check(batch[i]))
      atomic_fetch_add(&parent_bad, 1);
    free(batch[i]);
  }
  free(batch);
  atomic_fetch_add(&parent_frees, (unsigned long)batch_n + 1);
  errno = saved;
  return pid;
}

/* ---------------- workers ---------------- */

typedef struct worker {
  pthread_t th;
  int idx;
  unsigned long ops;
} worker_t;

static void *worker_main(void *arg)
{
  worker_t *w = (worker_t *)arg;
  ts_xs rng = {ts_hash_pair(0x3Fu, (uint64_t)w->idx)};
  unsigned long allocs = 0, frees = 0, bad = 0;
  uint64_t serial = 0;

  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    if (w->idx == 0) {
      long req = atomic_load_explicit(&fork_req, memory_order_acquire);
      if (req != 0) {
        pid_t pid = do_fork(req - 1, &rng);
        int e = errno;
        atomic_store_explicit(&fork_req, 0, memory_order_relaxed);
        pthread_mutex_lock(&fork_mu);
        fork_resp_pid = pid;
        fork_resp_errno = e;
        fork_resp_ready = 1;
        pthread_cond_signal(&fork_cv);
        pthread_mutex_unlock(&fork_mu);
      }
    }

    /* replace a random slot of the shared table */
    size_t i = (size_t)(ts_xs_next(&rng) % table_n);
    void *old = atomic_exchange_explicit(&table[i], NULL, memory_order_acq_rel);
    if (old) {
      if (!check(old))
        bad++;
      free(old);
      frees++;
    }
    size_t sz = worker_size(&rng);
    void *p = malloc(sz);
    if (!p)
      TS_FAIL_EXIT("worker %d: malloc(%zu) returned NULL", w->idx, sz);
    allocs++;
    stamp(p, sz, ts_stamp_tag(0x3Fu + (uint64_t)w->idx, serial++, sz));
    void *expected = NULL;
    if (!atomic_compare_exchange_strong_explicit(&table[i], &expected, p, memory_order_acq_rel,
                                                 memory_order_relaxed)) {
      free(p); /* another worker refilled the slot meanwhile */
      frees++;
    }

    /* short-lived pairs */
    for (int k = 0; k < 4; k++) {
      size_t s2 = ts_xs_size_log(&rng, 16, 2048);
      void *q = malloc(s2);
      if (!q)
        TS_FAIL_EXIT("worker %d: malloc(%zu) returned NULL", w->idx, s2);
      stamp(q, s2, serial);
      if (!check(q))
        bad++;
      free(q);
      allocs++;
      frees++;
    }
    w->ops++;
  }
  atomic_fetch_add(&parent_allocs, allocs);
  atomic_fetch_add(&parent_frees, frees);
  atomic_fetch_add(&parent_bad, bad);
  return NULL;
}

/* ---------------- waiting with a deadline ---------------- */

/* Returns 1 and the status if the child ended before the deadline, 0 if it
 * hung (it is then killed and reaped). */
static int wait_child(pid_t pid, const sigset_t *chld, double timeout, int *status)
{
  double deadline = ts_now() + timeout;
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid)
      return 1;
    if (r < 0 && errno != EINTR)
      TS_FAIL_EXIT("waitpid(%d): %s", (int)pid, strerror(errno));
    double left = deadline - ts_now();
    if (left <= 0) {
      kill(pid, SIGKILL);
      while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
      return 0;
    }
    struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
    /* returns on SIGCHLD (of this or an earlier child) or at the deadline;
     * either way the loop asks waitpid again */
    sigtimedwait(chld, NULL, &ts);
  }
}

int main(int argc, char **argv)
{
  n_workers = ts_arg_long(argc, argv, "--workers", 4);
  n_forks = ts_arg_long(argc, argv, "--forks", 200);
  slots_per_worker = ts_arg_long(argc, argv, "--slots", 128);
  batch_n = ts_arg_long(argc, argv, "--batch", 32);
  child_blocks = ts_arg_long(argc, argv, "--child-blocks", 64);
  child_timeout = ts_arg_double(argc, argv, "--child-timeout", 20.0);
  child_linger_ms = ts_arg_long(argc, argv, "--child-linger-ms", 0);
  if (n_workers < 1 || n_forks < 1 || slots_per_worker < 1 || batch_n < 1 || child_blocks < 1 ||
      child_linger_ms < 0 || child_linger_ms > 60000)
    TS_FAIL_EXIT("bad parameters");

  /* SIGCHLD blocked in every thread (workers inherit the mask), so that it
   * stays pending for sigtimedwait in the main thread. */
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &chld, NULL);

  table_n = (size_t)n_workers * (size_t)slots_per_worker;
  table = calloc(table_n, sizeof *table);
  worker_t *ws = calloc((size_t)n_workers, sizeof *ws);
  if (!table || !ws)
    TS_FAIL_EXIT("setup allocation failed");
  atomic_fetch_add(&parent_allocs, 2);

  ts_out("lc_fork: %ld workers, %ld forks (odd ones from worker 0), table of %zu blocks, "
         "batch %ld, child timeout %.0fs\n",
         n_workers, n_forks, table_n, batch_n, child_timeout);

  double t0 = ts_now();
  for (long i = 0; i < n_workers; i++) {
    ws[i].idx = (int)i;
    int rc = pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
    if (rc != 0)
      TS_FAIL_EXIT("pthread_create: %s", strerror(rc));
  }

  ts_xs rng = {ts_hash_pair(0x11u, 0)};
  long ok_children = 0, failed = 0, hung = 0, fork_errors = 0;
  double fork_sum = 0, fork_max = 0, wait_sum = 0, wait_max = 0;
  for (long f = 0; f < n_forks; f++) {
    pid_t pid;
    int err;
    double tf = ts_now();
    if (f % 2 == 0 || n_workers < 1) {
      pid = do_fork(f, &rng);
      err = errno;
    } else {
      pthread_mutex_lock(&fork_mu);
      fork_resp_ready = 0;
      pthread_mutex_unlock(&fork_mu);
      atomic_store_explicit(&fork_req, f + 1, memory_order_release);
      pthread_mutex_lock(&fork_mu);
      while (!fork_resp_ready)
        pthread_cond_wait(&fork_cv, &fork_mu);
      pid = fork_resp_pid;
      err = fork_resp_errno;
      pthread_mutex_unlock(&fork_mu);
    }
    if (pid < 0) {
      ts_err("lc_fork: fork %ld failed: %s\n", f, strerror(err));
      fork_errors++;
      continue;
    }
    double tw = ts_now();
    int st = 0;
    int ended = wait_child(pid, &chld, child_timeout, &st);
    double te = ts_now();
    fork_sum += tw - tf;
    wait_sum += te - tw;
    if (tw - tf > fork_max)
      fork_max = tw - tf;
    if (te - tw > wait_max)
      wait_max = te - tw;
    if (!ended) {
      ts_err("lc_fork: child %ld (pid %d, forked by %s) still running after %.0fs: killed\n", f,
             (int)pid, f % 2 ? "worker 0" : "main", child_timeout);
      hung++;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      ok_children++;
    } else {
      failed++;
      if (WIFEXITED(st))
        ts_err("lc_fork: child %ld (forked by %s) exited with status %d\n", f,
               f % 2 ? "worker 0" : "main", WEXITSTATUS(st));
      else if (WIFSIGNALED(st))
        ts_err("lc_fork: child %ld (forked by %s) killed by signal %d (%s)\n", f,
               f % 2 ? "worker 0" : "main", WTERMSIG(st), strsignal(WTERMSIG(st)));
    }
    if ((f + 1) % 50 == 0) {
      ts_mem m = ts_mem_now();
      ts_out("  after %4ld forks: %ld ok, %ld failed, %ld hung; rss %.1f MiB  %.1fs\n", f + 1,
             ok_children, failed, hung, ts_mib(m.rss_kib), ts_now() - t0);
    }
  }

  atomic_store(&stop, 1);
  unsigned long ops = 0;
  for (long i = 0; i < n_workers; i++) {
    pthread_join(ws[i].th, NULL);
    ops += ws[i].ops;
  }
  ts_mem peak = ts_mem_now();
  for (size_t i = 0; i < table_n; i++) {
    void *p = atomic_load(&table[i]);
    if (p) {
      if (!check(p))
        atomic_fetch_add(&parent_bad, 1);
      free(p);
      atomic_fetch_add(&parent_frees, 1);
    }
  }
  free(ws);
  free(table);
  atomic_fetch_add(&parent_frees, 2);
  ts_mem fin = ts_mem_now();
  double wall = ts_now() - t0;

  unsigned long na = atomic_load(&parent_allocs), nf = atomic_load(&parent_frees);
  unsigned long bad = atomic_load(&parent_bad);
  ts_out("lc_fork: %ld forks in %.2fs: %ld children exited 0, %ld failed, %ld hung, %ld fork errors; "
         "workers did %lu iterations meanwhile\n",
         n_forks, wall, ok_children, failed, hung, fork_errors, ops);
  ts_out("lc_fork: fork+batch in the forking thread %.1f ms avg, %.1f ms max; wait for the child "
         "%.1f ms avg, %.1f ms max\n",
         1e3 * fork_sum / (double)n_forks, 1e3 * fork_max, 1e3 * wait_sum / (double)n_forks,
         1e3 * wait_max);
  ts_out("lc_fork: parent peak rss %.1f MiB, rss after freeing all %.1f MiB\n", ts_mib(peak.hwm_kib),
         ts_mib(fin.rss_kib));

  int ok = 1;
  if (ok_children != n_forks) {
    ts_err("FAIL: only %ld of %ld children exited with status 0 (%ld failed, %ld hung, %ld fork errors)\n",
           ok_children, n_forks, failed, hung, fork_errors);
    ok = 0;
  }
  if (bad) {
    ts_err("FAIL: parent found %lu blocks with an overwritten stamp\n", bad);
    ok = 0;
  }
  if (na != nf) {
    ts_err("FAIL: parent bookkeeping: %lu allocated, %lu freed\n", na, nf);
    ok = 0;
  }
  ts_out("LC_METRICS prog=fork wall_s=%.2f peak_rss_kib=%ld final_rss_kib=%ld children_ok=%ld "
         "children_failed=%ld children_hung=%ld mallocs=%lu result=%s\n",
         wall, peak.hwm_kib, fin.rss_kib, ok_children, failed, hung, na, ok ? "pass" : "fail");
  return ok ? 0 : 1;
}
