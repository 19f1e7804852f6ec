/* lc_return: memory freed by the program must go back to the OS.
 *
 * `--threads` threads (4) allocate `--total-mib` (1024) MiB in total, in
 * small blocks of mixed sizes (log-uniform 16 B .. 4 KiB), or with `--large`
 * in large blocks (log-uniform 1 .. 16 MiB), keeping the pointers in arrays,
 * and touch every page of every block.  When all are
 * done the main thread records the resident size (VmRSS) and the peak
 * (VmHWM).  Then every thread frees the even-numbered blocks of its own
 * array and the odd-numbered blocks of its neighbour's array, while the
 * neighbour is still alive (both free paths: by the owner, by another
 * thread).  The threads exit, the main thread joins them and frees the
 * arrays, and reads VmRSS again.  No allocator-specific call is made.
 *
 * `--settle-ms S` (default 0; 1000 with --large): an allocator may give
 * memory back a little later (a purge delay, a background thread).  RSS is
 * read right after the frees and then every 50 ms for up to S ms; polling
 * stops as soon as RSS is within the threshold.  No allocator call is made
 * meanwhile, so only the allocator's own timers or threads can lower it.
 *
 * Asserts (exit status 1 on failure):
 *   - every block's stamp is intact when it is freed;
 *   - if --max-final-pct P is given (P > 0): final RSS <= P% of peak RSS,
 *     final RSS being the lowest reading within the settle time (with S = 0,
 *     the one right after the frees).
 * With P = 0 (the default) the figures are only reported, which is how the
 * comparison run uses it for other allocators (polling the whole S ms).
 *
 * LC_METRICS names the frees by a thread other than the block's allocator
 * cross_frees (run_lifecycle.sh checks hakmem counted at least as many
 * remote frees), except with --large: large_cross_frees, not checked, since
 * hakmem keeps no owning thread for a large block (its own mapping) and so
 * counts no free of one as remote.
 *
 * Afterwards, for information only, it calls malloc_trim(0) (glibc's call;
 * under an allocator that does not export it this reaches glibc's own, idle
 * arena and does nothing for that allocator) and reports RSS again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/args.h"
#include "support/clock.h"
#include "support/fill.h"
#include "support/report.h"
#include "support/rng.h"
#include "support/rss.h"

typedef struct tstate {
  pthread_t th;
  int idx;
  size_t n;          /* blocks in the arrays */
  void **ptrs;
  uint32_t *sizes;
  size_t bytes;      /* requested bytes */
  unsigned long own_frees, cross_frees;
  size_t bad;        /* stamps found overwritten */
} tstate_t;

static long n_threads;
static size_t per_thread_bytes;
static int large_mode;          /* --large: blocks of 1 .. 16 MiB */
static size_t block_min = 16, block_max = 4096;
static tstate_t *ts;
static pthread_barrier_t bar_alloc_done, bar_measured, bar_free_done;

static uint64_t block_tag(int owner, size_t i, size_t size)
{
  return ts_stamp_tag((uint64_t)owner + 77, (uint64_t)i, size);
}

static void *thread_main(void *arg)
{
  tstate_t *t = (tstate_t *)arg;
  ts_xs rng = {ts_hash_pair(0x5E7u, (uint64_t)t->idx)};

  /* The arrays: sized for the worst case (all blocks of 16 B) is too much;
   * grow them as needed.  They are the program's own blocks, freed at the end. */
  size_t cap = large_mode ? 256 : 1u << 16;
  t->ptrs = malloc(cap * sizeof(void *));
  t->sizes = malloc(cap * sizeof(uint32_t));
  if (!t->ptrs || !t->sizes)
    TS_FAIL_EXIT("array allocation failed");
  while (t->bytes < per_thread_bytes) {
    if (t->n == cap) {
      cap *= 2;
      void **np = realloc(t->ptrs, cap * sizeof(void *));
      if (!np)
        TS_FAIL_EXIT("realloc of the pointer array failed");
      t->ptrs = np;
      uint32_t *ns = realloc(t->sizes, cap * sizeof(uint32_t));
      if (!ns)
        TS_FAIL_EXIT("realloc of the size array failed");
      t->sizes = ns;
    }
    size_t sz = ts_xs_size_log(&rng, block_min, block_max);
    void *p = malloc(sz);
    if (!p)
      TS_FAIL_EXIT("malloc(%zu) returned NULL after %zu MiB", sz, t->bytes >> 20);
    /* touch every byte (small blocks) or every page (large blocks: the stamp
     * has a word in each 4 KiB): RSS then reflects what the program holds */
    if (!large_mode)
      memset(p, 0xA5, sz);
    ts_stamp_fill(p, sz, block_tag(t->idx, t->n, sz));
    t->ptrs[t->n] = p;
    t->sizes[t->n] = (uint32_t)sz;
    t->n++;
    t->bytes += sz;
  }

  pthread_barrier_wait(&bar_alloc_done);
  pthread_barrier_wait(&bar_measured); /* main has read the peak */

  /* Free own even blocks and the neighbour's odd blocks, interleaved so that
   * both kinds of free run at the same time in every thread. */
  int nb = (t->idx + 1) % (int)n_threads;
  tstate_t *o = &ts[nb];
  size_t i = 0, j = 1;
  while (i < t->n || j < o->n) {
    if (i < t->n) {
      if (!ts_stamp_check(t->ptrs[i], t->sizes[i], block_tag(t->idx, i, t->sizes[i])))
        t->bad++;
      free(t->ptrs[i]);
      t->own_frees++;
      i += 2;
    }
    if (j < o->n) {
      if (!ts_stamp_check(o->ptrs[j], o->sizes[j], block_tag(nb, j, o->sizes[j])))
        t->bad++;
      free(o->ptrs[j]);
      t->cross_frees++;
      j += 2;
    }
  }

  /* Nobody reads this thread's arrays after this barrier. */
  pthread_barrier_wait(&bar_free_done);
  return NULL;
}

static const char *size_text(size_t n, char *buf, size_t len)
{
  if (n >= (1u << 20))
    snprintf(buf, len, "%zu MiB", n >> 20);
  else if (n >= 1024)
    snprintf(buf, len, "%zu KiB", n >> 10);
  else
    snprintf(buf, len, "%zu B", n);
  return buf;
}

int main(int argc, char **argv)
{
  large_mode = ts_arg_flag(argc, argv, "--large");
  if (large_mode) {
    block_min = (size_t)1 << 20;
    block_max = (size_t)16 << 20;
  }
  n_threads = ts_arg_long(argc, argv, "--threads", 4);
  long total_mib = ts_arg_long(argc, argv, "--total-mib", 1024);
  double max_final_pct = ts_arg_double(argc, argv, "--max-final-pct", 0.0);
  long settle_ms = ts_arg_long(argc, argv, "--settle-ms", large_mode ? 1000 : 0);
  if (n_threads < 2 || total_mib < 1 || settle_ms < 0)
    TS_FAIL_EXIT("need --threads >= 2, --total-mib >= 1 and --settle-ms >= 0");
  per_thread_bytes = ((size_t)total_mib << 20) / (size_t)n_threads;

  ts_mem start = ts_mem_now();
  char lo[32], hi[32];
  ts_out("lc_return: %ld threads allocate %ld MiB in blocks of %s .. %s; rss at start %.1f MiB\n",
         n_threads, total_mib, size_text(block_min, lo, sizeof lo),
         size_text(block_max, hi, sizeof hi), ts_mib(start.rss_kib));

  ts = calloc((size_t)n_threads, sizeof *ts);
  if (!ts)
    TS_FAIL_EXIT("calloc failed");
  pthread_barrier_init(&bar_alloc_done, NULL, (unsigned)n_threads + 1);
  pthread_barrier_init(&bar_measured, NULL, (unsigned)n_threads + 1);
  pthread_barrier_init(&bar_free_done, NULL, (unsigned)n_threads);

  double t0 = ts_now();
  for (long i = 0; i < n_threads; i++) {
    ts[i].idx = (int)i;
    int rc = pthread_create(&ts[i].th, NULL, thread_main, &ts[i]);
    if (rc != 0)
      TS_FAIL_EXIT("pthread_create: %s", strerror(rc));
  }
  pthread_barrier_wait(&bar_alloc_done);
  double t_alloc = ts_now() - t0;
  ts_mem peak = ts_mem_now();
  unsigned long blocks = 0;
  size_t bytes = 0;
  for (long i = 0; i < n_threads; i++) {
    blocks += ts[i].n;
    bytes += ts[i].bytes;
  }
  ts_out("lc_return: allocated %lu blocks, %.1f MiB requested, in %.2fs; rss %.1f MiB, peak %.1f MiB\n",
         blocks, (double)bytes / 1048576.0, t_alloc, ts_mib(peak.rss_kib), ts_mib(peak.hwm_kib));
  pthread_barrier_wait(&bar_measured);

  double t1 = ts_now();
  unsigned long own = 0, cross = 0, bad = 0;
  for (long i = 0; i < n_threads; i++) {
    int rc = pthread_join(ts[i].th, NULL);
    if (rc != 0)
      TS_FAIL_EXIT("pthread_join: %s", strerror(rc));
  }
  double t_free = ts_now() - t1;
  unsigned long arrays = 0;
  for (long i = 0; i < n_threads; i++) {
    own += ts[i].own_frees;
    cross += ts[i].cross_frees;
    bad += ts[i].bad;
    free(ts[i].ptrs);
    free(ts[i].sizes);
    arrays += 2;
  }
  unsigned long mallocs = blocks + arrays + 1;
  /* ts itself is freed at the very end; it is small. */

  ts_mem fin = ts_mem_now();
  double pct = 100.0 * (double)fin.rss_kib / (double)peak.hwm_kib;
  /* Settle: poll every 50 ms, stop once within the threshold. */
  double t_settle = ts_now();
  long best_kib = fin.rss_kib, best_ms = 0, waited_ms = 0;
  while (waited_ms < settle_ms &&
         !(max_final_pct > 0 && 100.0 * (double)best_kib / (double)peak.hwm_kib <= max_final_pct)) {
    ts_sleep(0.05);
    waited_ms = (long)((ts_now() - t_settle) * 1000.0);
    long r = ts_mem_now().rss_kib;
    if (r < best_kib) {
      best_kib = r;
      best_ms = waited_ms;
    }
  }
  double best_pct = 100.0 * (double)best_kib / (double)peak.hwm_kib;
  double wall = ts_now() - t0;
  ts_out("lc_return: freed %lu blocks (%lu by their owner, %lu by another thread) in %.2fs\n",
         own + cross, own, cross, t_free);
  ts_out("lc_return: peak rss %.1f MiB, rss after free %.1f MiB = %.1f%% of peak\n",
         ts_mib(peak.hwm_kib), ts_mib(fin.rss_kib), pct);
  if (settle_ms > 0)
    ts_out("lc_return: lowest rss within %ld ms (polled every 50 ms for %ld ms): %.1f MiB = %.1f%% "
           "of peak, reached after %ld ms\n",
           settle_ms, waited_ms, ts_mib(best_kib), best_pct, best_ms);

  malloc_trim(0);
  ts_mem trimmed = ts_mem_now();
  ts_out("lc_return: (information) rss after malloc_trim(0) %.1f MiB = %.1f%% of peak\n",
         ts_mib(trimmed.rss_kib), 100.0 * (double)trimmed.rss_kib / (double)peak.hwm_kib);

  int ok = 1;
  if (bad) {
    ts_err("FAIL: %lu blocks had their stamp overwritten (memory handed out twice or corrupted)\n", bad);
    ok = 0;
  }
  if (own + cross != blocks) {
    ts_err("FAIL: bookkeeping: freed %lu of %lu blocks\n", own + cross, blocks);
    ok = 0;
  }
  if (max_final_pct > 0) {
    if (best_pct > max_final_pct) {
      ts_err("FAIL: rss after freeing everything is %.1f MiB = %.1f%% of the %.1f MiB peak "
             "(limit %.1f%%; lowest within %ld ms of the frees)\n",
             ts_mib(best_kib), best_pct, ts_mib(peak.hwm_kib), max_final_pct, settle_ms);
      ok = 0;
    }
  } else {
    ts_out("lc_return: no threshold given: rss figures reported only\n");
  }

  ts_out("LC_METRICS prog=return blocks=%s wall_s=%.2f peak_rss_kib=%ld final_rss_kib=%ld "
         "final_pct=%.1f settled_rss_kib=%ld settled_pct=%.1f settled_ms=%ld "
         "trimmed_rss_kib=%ld mallocs=%lu %s=%lu result=%s\n",
         large_mode ? "large" : "small", wall, peak.hwm_kib, fin.rss_kib, pct, best_kib, best_pct,
         best_ms, trimmed.rss_kib, mallocs, large_mode ? "large_cross_frees" : "cross_frees", cross,
         ok ? "pass" : "fail");

  pthread_barrier_destroy(&bar_alloc_done);
  pthread_barrier_destroy(&bar_measured);
  pthread_barrier_destroy(&bar_free_done);
  free(ts);
  return ok ? 0 : 1;
}
