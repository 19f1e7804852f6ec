/* lc_refault: threads that come and go must reuse the pages their
 * predecessors freed, not fault them in again, in a small process too.
 *
 * Round after round (`--rounds`, 300) the main thread starts two threads and
 * joins them.  Thread k (k = 0, 1) allocates (k + 1) x `--blocks` (5000)
 * blocks of 16 B .. 512 B (log-uniform, seeded per round and thread),
 * stamps each, then checks and frees every one and exits.  So every round
 * needs the same few MiB again, all of it freed a moment before: the shape
 * of a server that runs a thread per task, or a pool that retires and
 * respawns its workers, while its footprint stays far below what makes an
 * allocator start background work for big programs.
 *
 * An allocator that gives the pages of an exited thread's memory back at
 * once makes the next round's threads fault them in again, a page fault
 * per 4 KiB (each costing microseconds, and the kernel zeroing the page):
 * here about a thousand a round.  One that keeps them for reuse faults only
 * the new threads' stacks.
 *
 * With --single the main thread does the work of the rounds itself, a
 * batch of `--blocks` blocks a round: the same reuse without threads, a
 * program whose footprint rises and falls by a few MiB.
 *
 * Asserts (exit status 1 on failure):
 *   - every stamp intact when its block is freed;
 *   - with --max-faults F (F > 0): the minor page faults of the process over
 *     the rounds after the first `--warmup` (30), divided by their number,
 *     are at most F.  With F = 0 (the default) the figure is only reported,
 *     which is how the comparison run uses it for other allocators.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/args.h"
#include "support/clock.h"
#include "support/fill.h"
#include "support/report.h"
#include "support/rng.h"
#include "support/rss.h"

#define BLOCK_MIN 16
#define BLOCK_MAX 512

typedef struct worker {
  pthread_t th;
  uint64_t seed;
  size_t n;              /* blocks to allocate */
  void **p;              /* their pointers and sizes: arrays of n, or NULL */
  uint16_t *sz;          /* (then the worker allocates and frees its own) */
  unsigned long bad;     /* stamps found overwritten */
  int oom;               /* a malloc returned NULL */
} worker_t;

static uint64_t block_tag(uint64_t seed, size_t i, size_t size)
{
  return ts_stamp_tag(0x2EFAu, seed ^ (uint64_t)i, size);
}

static void *worker_main(void *arg)
{
  worker_t *w = (worker_t *)arg;
  bool own = w->p == NULL;
  void **p = own ? malloc(w->n * sizeof *p) : w->p;
  uint16_t *sz = own ? malloc(w->n * sizeof *sz) : w->sz;
  if (p == NULL || sz == NULL) {
    w->oom = 1;
    if (own) {
      free(p);
      free(sz);
    }
    return NULL;
  }
  ts_xs rng = {ts_hash_pair(w->seed, 1)};
  size_t got = 0;
  for (; got < w->n; got++) {
    size_t s = ts_xs_size_log(&rng, BLOCK_MIN, BLOCK_MAX);
    p[got] = malloc(s);
    if (p[got] == NULL) {
      w->oom = 1;
      break;
    }
    ts_stamp_fill(p[got], s, block_tag(w->seed, got, s));
    sz[got] = (uint16_t)s;
  }
  for (size_t i = 0; i < got; i++) {
    if (!ts_stamp_check(p[i], sz[i], block_tag(w->seed, i, sz[i])))
      w->bad++;
    free(p[i]);
  }
  if (own) {
    free(sz);
    free(p);
  }
  return NULL;
}

int main(int argc, char **argv)
{
  long rounds = ts_arg_long(argc, argv, "--rounds", 300);
  long warmup = ts_arg_long(argc, argv, "--warmup", 30);
  long blocks = ts_arg_long(argc, argv, "--blocks", 5000);
  double max_faults = ts_arg_double(argc, argv, "--max-faults", 0.0);
  bool single = ts_arg_flag(argc, argv, "--single");
  if (rounds < 1 || warmup < 0 || warmup >= rounds || blocks < 1)
    TS_FAIL_EXIT("need --rounds >= 1, 0 <= --warmup < --rounds and --blocks >= 1");
  if (single)
    ts_out("lc_refault: %ld rounds of the main thread allocating %ld blocks of %d B .. %d B and "
           "freeing them; faults counted after %ld rounds\n",
           rounds, blocks, BLOCK_MIN, BLOCK_MAX, warmup);
  else
    ts_out("lc_refault: %ld rounds of 2 threads allocating %ld and %ld blocks of %d B .. %d B, "
           "freeing them and exiting; faults counted after %ld rounds\n",
           rounds, blocks, 2 * blocks, BLOCK_MIN, BLOCK_MAX, warmup);

  double t0 = ts_now();
  long flt0 = 0;
  unsigned long bad = 0, mallocs = 0;
  int oom = 0;
  /* --single: the arrays once, outside the rounds (a large block each
   * time would be a different program). */
  void **ptrs = single ? malloc((size_t)blocks * sizeof *ptrs) : NULL;
  uint16_t *sizes = single ? malloc((size_t)blocks * sizeof *sizes) : NULL;
  if (single && (ptrs == NULL || sizes == NULL)) TS_FAIL_EXIT("allocation of the arrays failed");
  for (long r = 0; r < rounds; r++) {
    if (r == warmup) flt0 = ts_minflt();
    worker_t w[2];
    if (single) {
      memset(&w[0], 0, sizeof w[0]);
      w[0].seed = ts_hash_pair((uint64_t)r, 2);
      w[0].n = (size_t)blocks;
      w[0].p = ptrs;
      w[0].sz = sizes;
      worker_main(&w[0]);
      bad += w[0].bad;
      oom |= w[0].oom;
      mallocs += w[0].n;
      continue;
    }
    for (int k = 0; k < 2; k++) {
      memset(&w[k], 0, sizeof w[k]);
      w[k].seed = ts_hash_pair((uint64_t)r, (uint64_t)k);
      w[k].n = (size_t)blocks * (size_t)(k + 1);
      int rc = pthread_create(&w[k].th, NULL, worker_main, &w[k]);
      if (rc != 0) TS_FAIL_EXIT("pthread_create: %s", strerror(rc));
    }
    for (int k = 0; k < 2; k++) {
      int rc = pthread_join(w[k].th, NULL);
      if (rc != 0) TS_FAIL_EXIT("pthread_join: %s", strerror(rc));
      bad += w[k].bad;
      oom |= w[k].oom;
      mallocs += w[k].n + 2;
    }
  }
  long faults = ts_minflt() - flt0;
  if (single) mallocs += 2;
  free(sizes);
  free(ptrs);
  double per_round = (double)faults / (double)(rounds - warmup);
  double wall = ts_now() - t0;
  ts_out("lc_refault: %ld minor faults over the last %ld rounds: %.1f a round; %.3f ms a round\n",
         faults, rounds - warmup, per_round, 1000.0 * wall / (double)rounds);

  int ok = 1;
  if (oom) {
    ts_err("FAIL: a malloc returned NULL\n");
    ok = 0;
  }
  if (bad) {
    ts_err("FAIL: %lu blocks had their stamp overwritten (memory handed out twice or corrupted)\n",
           bad);
    ok = 0;
  }
  if (max_faults > 0 && per_round > max_faults) {
    ts_err("FAIL: %.1f minor page faults a round after warm-up (limit %.1f): the pages the "
           "exited threads freed are given back and faulted in again by their successors\n",
           per_round, max_faults);
    ok = 0;
  }
  ts_mem fin = ts_mem_now();
  ts_out("LC_METRICS prog=refault wall_s=%.2f peak_rss_kib=%ld final_rss_kib=%ld faults_per_round=%.1f "
         "mallocs=%lu result=%s\n",
         wall, fin.hwm_kib, fin.rss_kib, per_round, mallocs, ok ? "pass" : "fail");
  return ok ? 0 : 1;
}
