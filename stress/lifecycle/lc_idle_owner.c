/* lc_idle_owner: memory freed by other threads must go back to the OS even
 * when the thread that allocated it has gone idle.
 *
 * The main thread allocates `--total-mib` (128) MiB in small blocks of mixed
 * sizes (log-uniform 16 B .. 1 KiB, seeded by `--seed`), writes every byte
 * and a stamp, and keeps the pointers in arrays allocated up front (a first
 * pass of the same generator counts the blocks).  It reads the peak resident
 * size (VmHWM).  Then it starts `--threads` (2) threads that between them
 * free every block, each a contiguous share of the array, checking the
 * stamps, and exit.  The main thread joins them (pthread_join) and from then
 * on makes no allocator call at all: it reads VmRSS right after the joins
 * and then every 50 ms for up to `--settle-ms` (2000) ms, stopping as soon as
 * RSS is within the threshold.  It prints nothing until the verdict (the
 * support library's output goes through a stack buffer and write(2) anyway).
 *
 * This is the shape of a server whose main thread allocates its tables at
 * start-up and then waits in pthread_join while workers free them: an
 * allocator that takes back a block freed by another thread only when the
 * allocating thread next calls it (a remote-free list collected on refill)
 * keeps all of it resident for good, since that thread never calls again.
 * Only the allocator's own threads or timers can lower RSS here.
 *
 * Asserts (exit status 1 on failure):
 *   - every block's stamp is intact when it is freed;
 *   - every block was freed (the program's own bookkeeping);
 *   - if --max-final-pct P is given (P > 0): the lowest RSS reading within
 *     the settle time <= P% of the peak RSS; the failure message gives the
 *     peak, the lowest reading and how long the polling went on.
 * With P = 0 (the default) the figures are only reported, which is how the
 * comparison run uses it for other allocators (polling the whole S ms).
 *
 * LC_METRICS names the frees cross_frees: every block is freed by a thread
 * other than its allocator, whose owner (the main thread) is alive, so
 * run_lifecycle.sh checks hakmem counted at least that many remote frees.
 * The arrays are freed after the verdict, so the exit report balances.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
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

#define BLOCK_MIN 16
#define BLOCK_MAX 1024
#define POLL_MS 50

typedef struct worker {
  pthread_t th;
  size_t first, end;     /* the share: blocks [first, end) */
  unsigned long frees;
  unsigned long bad;     /* stamps found overwritten */
} worker_t;

/* Written by main before the workers start (pthread_create orders it),
 * read-only afterwards. */
static void **ptrs;
static uint16_t *sizes;  /* requested sizes, <= BLOCK_MAX */
static size_t n_blocks;

static uint64_t block_tag(size_t i, size_t size)
{
  return ts_stamp_tag(0x1D1Eu, (uint64_t)i, size);
}

static void *worker_main(void *arg)
{
  worker_t *w = (worker_t *)arg;
  for (size_t i = w->first; i < w->end; i++) {
    if (!ts_stamp_check(ptrs[i], sizes[i], block_tag(i, sizes[i])))
      w->bad++;
    free(ptrs[i]);
    w->frees++;
  }
  return NULL;
}

/* The number of blocks the generator seeded by `seed` draws until their
 * sizes add up to `total` bytes: the main thread's allocation loop draws
 * exactly these. */
static size_t count_blocks(uint64_t seed, size_t total)
{
  ts_xs rng = {ts_hash_pair(seed, 0)};
  size_t n = 0, bytes = 0;
  while (bytes < total) {
    bytes += ts_xs_size_log(&rng, BLOCK_MIN, BLOCK_MAX);
    n++;
  }
  return n;
}

int main(int argc, char **argv)
{
  long n_threads = ts_arg_long(argc, argv, "--threads", 2);
  long total_mib = ts_arg_long(argc, argv, "--total-mib", 128);
  double max_final_pct = ts_arg_double(argc, argv, "--max-final-pct", 0.0);
  long settle_ms = ts_arg_long(argc, argv, "--settle-ms", 2000);
  uint64_t seed = (uint64_t)ts_arg_long(argc, argv, "--seed", 0x1D1E);
  if (n_threads < 1 || total_mib < 1 || settle_ms < 0)
    TS_FAIL_EXIT("need --threads >= 1, --total-mib >= 1 and --settle-ms >= 0");
  size_t total = (size_t)total_mib << 20;

  ts_mem start = ts_mem_now();
  n_blocks = count_blocks(seed, total);
  ts_out("lc_idle_owner: the main thread allocates %ld MiB in %zu blocks of %d B .. %d B, "
         "%ld threads free them; rss at start %.1f MiB\n",
         total_mib, n_blocks, BLOCK_MIN, BLOCK_MAX, n_threads, ts_mib(start.rss_kib));

  double t0 = ts_now();
  ptrs = malloc(n_blocks * sizeof *ptrs);
  sizes = malloc(n_blocks * sizeof *sizes);
  worker_t *ws = calloc((size_t)n_threads, sizeof *ws);
  if (!ptrs || !sizes || !ws)
    TS_FAIL_EXIT("allocation of the arrays failed");
  unsigned long mallocs = 3;

  ts_xs rng = {ts_hash_pair(seed, 0)};
  size_t bytes = 0;
  for (size_t i = 0; i < n_blocks; i++) {
    size_t sz = ts_xs_size_log(&rng, BLOCK_MIN, BLOCK_MAX);
    void *p = malloc(sz);
    if (!p)
      TS_FAIL_EXIT("malloc(%zu) returned NULL after %zu MiB", sz, bytes >> 20);
    /* every byte written: RSS then reflects what the program holds */
    memset(p, 0xA5, sz);
    ts_stamp_fill(p, sz, block_tag(i, sz));
    ptrs[i] = p;
    sizes[i] = (uint16_t)sz;
    bytes += sz;
  }
  mallocs += n_blocks;
  double t_alloc = ts_now() - t0;
  ts_mem peak = ts_mem_now();
  ts_out("lc_idle_owner: allocated %zu blocks, %.1f MiB requested, in %.2fs; rss %.1f MiB, "
         "peak %.1f MiB\n",
         n_blocks, (double)bytes / 1048576.0, t_alloc, ts_mib(peak.rss_kib),
         ts_mib(peak.hwm_kib));

  /* Contiguous shares: each slab's blocks go back mostly through one thread. */
  double t1 = ts_now();
  for (long k = 0; k < n_threads; k++) {
    ws[k].first = n_blocks * (size_t)k / (size_t)n_threads;
    ws[k].end = n_blocks * (size_t)(k + 1) / (size_t)n_threads;
    int rc = pthread_create(&ws[k].th, NULL, worker_main, &ws[k]);
    if (rc != 0)
      TS_FAIL_EXIT("pthread_create: %s", strerror(rc));
  }
  for (long k = 0; k < n_threads; k++) {
    int rc = pthread_join(ws[k].th, NULL);
    if (rc != 0)
      TS_FAIL_EXIT("pthread_join: %s", strerror(rc));
  }
  double t_free = ts_now() - t1;

  /* From here to the verdict the main thread makes no allocator call: no
   * malloc, no free, no output (ts_mem_now reads /proc with open/read into
   * a stack buffer, ts_sleep is nanosleep).  Whatever lowers RSS now is the
   * allocator's own doing. */
  ts_mem fin = ts_mem_now();
  long best_ms, waited_ms;
  long best_kib = ts_rss_settle(fin.rss_kib, peak.hwm_kib, max_final_pct, settle_ms, POLL_MS, &best_ms, &waited_ms);
  double pct = 100.0 * (double)fin.rss_kib / (double)peak.hwm_kib;
  double best_pct = 100.0 * (double)best_kib / (double)peak.hwm_kib;

  unsigned long frees = 0, bad = 0;
  for (long k = 0; k < n_threads; k++) {
    frees += ws[k].frees;
    bad += ws[k].bad;
  }
  ts_out("lc_idle_owner: %ld threads freed %lu blocks (all allocated by the main thread) in "
         "%.2fs\n", n_threads, frees, t_free);
  ts_out("lc_idle_owner: peak rss %.1f MiB, rss after the joins %.1f MiB = %.1f%% of peak\n",
         ts_mib(peak.hwm_kib), ts_mib(fin.rss_kib), pct);
  ts_out("lc_idle_owner: lowest rss while the main thread made no allocator call (polled every "
         "%d ms for %ld ms): %.1f MiB = %.1f%% of peak, reached after %ld ms\n",
         POLL_MS, waited_ms, ts_mib(best_kib), best_pct, best_ms);

  int ok = 1;
  if (bad) {
    ts_err("FAIL: %lu blocks had their stamp overwritten (memory handed out twice or corrupted)\n",
           bad);
    ok = 0;
  }
  if (frees != n_blocks) {
    ts_err("FAIL: bookkeeping: freed %lu of %zu blocks\n", frees, n_blocks);
    ok = 0;
  }
  if (max_final_pct > 0) {
    if (best_pct > max_final_pct) {
      ts_err("FAIL: rss stays at %.1f MiB = %.1f%% of the %.1f MiB peak (limit %.1f%%) after "
             "other threads freed every block of the idle main thread: lowest reading within "
             "%ld ms of the joins (right after them: %.1f MiB)\n",
             ts_mib(best_kib), best_pct, ts_mib(peak.hwm_kib), max_final_pct, waited_ms,
             ts_mib(fin.rss_kib));
      ok = 0;
    } else {
      ts_out("lc_idle_owner: rss within %.1f%% of peak after %ld ms\n", max_final_pct, best_ms);
    }
  } else {
    ts_out("lc_idle_owner: no threshold given: rss figures reported only\n");
  }

  double wall = ts_now() - t0;
  ts_out("LC_METRICS prog=idle_owner wall_s=%.2f peak_rss_kib=%ld final_rss_kib=%ld "
         "final_pct=%.1f settled_rss_kib=%ld settled_pct=%.1f settled_ms=%ld mallocs=%lu "
         "cross_frees=%lu result=%s\n",
         wall, peak.hwm_kib, fin.rss_kib, pct, best_kib, best_pct, best_ms, mallocs, frees,
         ok ? "pass" : "fail");

  free(ws);
  free(sizes);
  free(ptrs);
  return ok ? 0 : 1;
}
