/* lc_churn: many short-lived threads whose blocks outlive them.
 *
 * The main thread keeps `--concurrency` worker threads running until
 * `--threads` have run in total.  Each worker
 *   1. takes up to `--consume` blocks from the shared queue (blocks allocated
 *      by threads that have already exited), checks their stamps, frees them;
 *   2. allocates and frees `--local` short-lived blocks itself;
 *   3. allocates `--keep` blocks of mixed sizes (16 B .. 64 KiB, about 3% in
 *      64 KiB .. 1 MiB, some through calloc), stamps them, leaves them in its
 *      slot and exits.
 * The main thread joins a finished worker, and only then moves the worker's
 * blocks to the shared queue: every block in the queue belongs to a thread
 * that has exited.  When the queue holds more than `--queue-cap` blocks the
 * main thread frees the oldest ones itself.  So every block kept by a worker
 * is freed after its thread exited, either by a later worker or by the main
 * thread.
 *
 * Every `--sample-every` joined threads the main thread reads VmRSS/VmHWM.
 * Assertions (exit status 1 on failure):
 *   - every stamp intact (no block handed out twice, no corruption);
 *   - blocks allocated == blocks freed by the program (bookkeeping);
 *   - RSS at the end   <= max-growth x RSS after the warm-up (--warmup-pct);
 *   - peak RSS at end  <= max-growth x peak RSS after the warm-up;
 *   - no linear growth: the least-squares slope of RSS over the samples after
 *     warm-up, extrapolated over the post-warm-up span, adds at most
 *     --max-trend (fraction) of the warm-up RSS.
 * The process frees everything before it returns, so an allocator's exit
 * report must show as many frees as allocations (checked by the driver).
 */
#define _GNU_SOURCE
#include <errno.h>
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

typedef struct block {
  void *p;
  size_t size;
  uint64_t tag;
} block_t;

/* ---------- parameters ---------- */
static long n_threads, concurrency, sample_every, keep_n, consume_n, local_n, queue_cap;
static double warmup_pct, max_growth, max_trend;

/* ---------- program-side bookkeeping (independent of the allocator) ---------- */
static atomic_ulong blocks_allocated; /* malloc/calloc calls that returned a block */
static atomic_ulong blocks_freed;
static atomic_ulong freed_after_owner_exit; /* blocks freed by a later thread or main */

/* ---------- the shared queue: blocks of exited threads ----------
 * A ring of block descriptors under one mutex.  Its capacity covers the cap
 * plus one worker's batch, so publishing never overflows. */
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static block_t *q_ring;
static size_t q_capacity, q_head, q_count;

static void q_push_locked(block_t b)
{
  if (q_count == q_capacity)
    TS_FAIL_EXIT("queue overflow (count %zu)", q_count);
  q_ring[(q_head + q_count) % q_capacity] = b;
  q_count++;
}

static block_t q_pop_head_locked(void)
{
  block_t b = q_ring[q_head];
  q_head = (q_head + 1) % q_capacity;
  q_count--;
  return b;
}

/* Pop a random element: swap it with the head, then pop the head.  Random
 * lifetimes spread frees over many slabs (fragmentation), unlike FIFO. */
static block_t q_pop_random_locked(ts_xs *rng)
{
  size_t i = (q_head + (size_t)(ts_xs_next(rng) % q_count)) % q_capacity;
  block_t t = q_ring[i];
  q_ring[i] = q_ring[q_head];
  q_ring[q_head] = t;
  return q_pop_head_locked();
}

static void free_checked(block_t b, const char *who)
{
  if (!ts_stamp_check(b.p, b.size, b.tag))
    TS_FAIL_EXIT("%s: stamp of block %p (%zu B) overwritten: the memory was handed out twice or corrupted",
            who, b.p, b.size);
  free(b.p);
  atomic_fetch_add_explicit(&blocks_freed, 1, memory_order_relaxed);
}

/* ---------- worker slots ---------- */
typedef struct slot {
  pthread_t th;
  long gen;         /* index of the thread running in this slot */
  int idx;
  int nbatch;
  block_t *batch;   /* keep_n entries, allocated once by main */
  block_t *taken;   /* consume_n entries: scratch for popped blocks */
} slot_t;

static slot_t *slots;

/* finished workers report their slot here; main waits on done_cv */
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static int *done_list;
static int done_count;

static size_t churn_size(ts_xs *rng)
{
  uint64_t r = ts_xs_next(rng) % 100;
  if (r < 3)
    return ts_xs_size_log(rng, 65537, 1u << 20); /* "some larger" */
  return ts_xs_size_log(rng, 16, 65536);
}

static void *worker(void *arg)
{
  slot_t *s = (slot_t *)arg;
  ts_xs rng = {ts_hash_pair(0xC4u, (uint64_t)s->gen)};

  /* 1. free blocks of exited threads */
  size_t ntaken = 0;
  pthread_mutex_lock(&q_mu);
  while (ntaken < (size_t)consume_n && q_count > 0)
    s->taken[ntaken++] = q_pop_random_locked(&rng);
  pthread_mutex_unlock(&q_mu);
  for (size_t i = 0; i < ntaken; i++)
    free_checked(s->taken[i], "worker");
  atomic_fetch_add_explicit(&freed_after_owner_exit, ntaken, memory_order_relaxed);

  /* 2. short-lived blocks of its own */
  for (long i = 0; i < local_n; i++) {
    size_t sz = ts_xs_size_log(&rng, 16, 4096);
    void *p = malloc(sz);
    if (!p)
      TS_FAIL_EXIT("malloc(%zu) returned NULL", sz);
    atomic_fetch_add_explicit(&blocks_allocated, 1, memory_order_relaxed);
    uint64_t tag = ts_stamp_tag((uint64_t)s->gen, 1000000u + (uint64_t)i, sz);
    ts_stamp_fill(p, sz, tag);
    block_t b = {p, sz, tag};
    free_checked(b, "worker-local");
  }

  /* 3. blocks that will outlive this thread */
  s->nbatch = 0;
  for (long i = 0; i < keep_n; i++) {
    size_t sz = churn_size(&rng);
    void *p;
    if (ts_xs_next(&rng) % 8 == 0) {
      p = calloc(1, sz);
      if (p) {
        const unsigned char *c = (const unsigned char *)p;
        for (size_t off = 0; off < sz; off += 4096)
          if (c[off] != 0)
            TS_FAIL_EXIT("calloc(1, %zu) returned non-zero memory at offset %zu", sz, off);
        if (c[sz - 1] != 0)
          TS_FAIL_EXIT("calloc(1, %zu) returned non-zero memory at its end", sz);
      }
    } else {
      p = malloc(sz);
    }
    if (!p)
      TS_FAIL_EXIT("allocation of %zu bytes returned NULL", sz);
    atomic_fetch_add_explicit(&blocks_allocated, 1, memory_order_relaxed);
    uint64_t tag = ts_stamp_tag((uint64_t)s->gen, (uint64_t)i, sz);
    ts_stamp_fill(p, sz, tag);
    s->batch[s->nbatch++] = (block_t){p, sz, tag};
  }

  /* 4. report; main joins this thread before it touches the batch */
  pthread_mutex_lock(&done_mu);
  done_list[done_count++] = s->idx;
  pthread_cond_signal(&done_cv);
  pthread_mutex_unlock(&done_mu);
  return NULL;
}

static void launch(slot_t *s, long gen)
{
  s->gen = gen;
  int rc = pthread_create(&s->th, NULL, worker, s);
  if (rc != 0)
    TS_FAIL_EXIT("pthread_create (thread %ld): %s", gen, strerror(rc));
}

int main(int argc, char **argv)
{
  n_threads = ts_arg_long(argc, argv, "--threads", 20000);
  concurrency = ts_arg_long(argc, argv, "--concurrency", 4);
  sample_every = ts_arg_long(argc, argv, "--sample-every", 1000);
  keep_n = ts_arg_long(argc, argv, "--keep", 32);
  consume_n = ts_arg_long(argc, argv, "--consume", 16);
  local_n = ts_arg_long(argc, argv, "--local", 32);
  queue_cap = ts_arg_long(argc, argv, "--queue-cap", 2048);
  warmup_pct = ts_arg_double(argc, argv, "--warmup-pct", 20.0);
  max_growth = ts_arg_double(argc, argv, "--max-growth", 1.5);
  max_trend = ts_arg_double(argc, argv, "--max-trend", 0.25);

  if (n_threads < 1 || concurrency < 1 || sample_every < 1 || keep_n < 1 ||
      consume_n < 0 || local_n < 0 || queue_cap < 0 || warmup_pct <= 0 ||
      warmup_pct >= 100)
    TS_FAIL_EXIT("bad parameters");
  long n_samples = n_threads / sample_every;
  long warm_threads = (long)((double)n_threads * warmup_pct / 100.0 + 0.5);
  long warm_sample = warm_threads / sample_every; /* 1-based index of the warm-up sample */
  if (warm_sample < 1 || n_samples - warm_sample < 3)
    TS_FAIL_EXIT("need a warm-up sample and at least 3 samples after it (threads %ld, sample-every %ld)",
            n_threads, sample_every);

  ts_out("lc_churn: threads=%ld concurrency=%ld keep=%ld consume=%ld local=%ld queue_cap=%ld "
         "warmup=%ld threads max_growth=%.2f max_trend=%.2f\n",
         n_threads, concurrency, keep_n, consume_n, local_n, queue_cap, warm_threads,
         max_growth, max_trend);

  /* The program's own arrays: allocated up front, freed at the end. */
  q_capacity = (size_t)queue_cap + (size_t)keep_n + 1;
  q_ring = malloc(q_capacity * sizeof *q_ring);
  slots = calloc((size_t)concurrency, sizeof *slots);
  done_list = malloc((size_t)concurrency * sizeof *done_list);
  ts_mem *samples = calloc((size_t)n_samples + 1, sizeof *samples);
  if (!q_ring || !slots || !done_list || !samples)
    TS_FAIL_EXIT("setup allocation failed");
  unsigned long setup_blocks = 4;
  for (long i = 0; i < concurrency; i++) {
    slots[i].idx = (int)i;
    slots[i].batch = malloc((size_t)keep_n * sizeof(block_t));
    slots[i].taken = malloc(((size_t)consume_n + 1) * sizeof(block_t));
    if (!slots[i].batch || !slots[i].taken)
      TS_FAIL_EXIT("setup allocation failed");
    setup_blocks += 2;
  }
  atomic_fetch_add(&blocks_allocated, setup_blocks);

  double t0 = ts_now();
  long launched = 0, joined = 0;
  unsigned long main_frees = 0;
  for (; launched < concurrency && launched < n_threads; launched++)
    launch(&slots[launched], launched);

  while (joined < n_threads) {
    pthread_mutex_lock(&done_mu);
    while (done_count == 0)
      pthread_cond_wait(&done_cv, &done_mu);
    int si = done_list[--done_count];
    pthread_mutex_unlock(&done_mu);

    slot_t *s = &slots[si];
    int rc = pthread_join(s->th, NULL);
    if (rc != 0)
      TS_FAIL_EXIT("pthread_join: %s", strerror(rc));
    joined++;

    /* The thread has exited: its blocks may now be freed by others. */
    pthread_mutex_lock(&q_mu);
    for (int i = 0; i < s->nbatch; i++)
      q_push_locked(s->batch[i]);
    s->nbatch = 0;
    size_t excess = q_count > (size_t)queue_cap ? q_count - (size_t)queue_cap : 0;
    block_t trim[excess ? excess : 1];
    for (size_t i = 0; i < excess; i++)
      trim[i] = q_pop_head_locked();
    pthread_mutex_unlock(&q_mu);
    for (size_t i = 0; i < excess; i++)
      free_checked(trim[i], "main");
    main_frees += excess;
    atomic_fetch_add_explicit(&freed_after_owner_exit, excess, memory_order_relaxed);

    if (launched < n_threads) {
      launch(s, launched);
      launched++;
    }

    if (joined % sample_every == 0) {
      long k = joined / sample_every;
      samples[k] = ts_mem_now();
      ts_out("  after %6ld threads: rss %8.1f MiB  peak %8.1f MiB  queue %zu  %.1fs\n", joined,
             ts_mib(samples[k].rss_kib), ts_mib(samples[k].hwm_kib), q_count, ts_now() - t0);
    }
  }
  double t_run = ts_now() - t0;

  /* Free what is left, then the program's own arrays. */
  pthread_mutex_lock(&q_mu);
  while (q_count > 0) {
    block_t b = q_pop_head_locked();
    free_checked(b, "main-drain");
    main_frees++;
    atomic_fetch_add_explicit(&freed_after_owner_exit, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&q_mu);
  ts_mem after_drain = ts_mem_now();

  ts_mem warm = samples[warm_sample];
  ts_mem end = samples[n_samples];

  /* least-squares slope of RSS (KiB per sample) over the samples after warm-up */
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  long m = 0;
  for (long k = warm_sample; k <= n_samples; k++, m++) {
    double x = (double)k, y = (double)samples[k].rss_kib;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  double slope = ((double)m * sxy - sx * sy) / ((double)m * sxx - sx * sx);
  double trend_kib = slope * (double)(n_samples - warm_sample);
  double max_post_rss = 0;
  for (long k = warm_sample; k <= n_samples; k++)
    if ((double)samples[k].rss_kib > max_post_rss)
      max_post_rss = (double)samples[k].rss_kib;

  unsigned long na = atomic_load(&blocks_allocated);
  unsigned long nf_blocks = atomic_load(&blocks_freed) + setup_blocks; /* arrays freed below */

  ts_out("lc_churn: %ld threads in %.2fs; blocks allocated %lu, freed after their thread exited %lu "
         "(%lu by main)\n",
         n_threads, t_run, na, (unsigned long)atomic_load(&freed_after_owner_exit), main_frees);
  ts_out("lc_churn: rss after warm-up (%ld threads) %.1f MiB, at end %.1f MiB (x%.2f, max x%.2f "
         "after warm-up); peak %.1f -> %.1f MiB (x%.2f); trend over the post-warm-up span "
         "%+.1f MiB (%+.0f%% of warm-up rss); rss after freeing all %.1f MiB\n",
         warm_threads, ts_mib(warm.rss_kib), ts_mib(end.rss_kib),
         (double)end.rss_kib / (double)warm.rss_kib, max_post_rss / (double)warm.rss_kib,
         ts_mib(warm.hwm_kib), ts_mib(end.hwm_kib), (double)end.hwm_kib / (double)warm.hwm_kib,
         trend_kib / 1024.0, 100.0 * trend_kib / (double)warm.rss_kib,
         ts_mib(after_drain.rss_kib));

  int ok = 1;
  if (na != nf_blocks) {
    ts_err("FAIL: program bookkeeping: %lu blocks allocated, %lu freed\n", na, nf_blocks);
    ok = 0;
  }
  if ((double)end.rss_kib > max_growth * (double)warm.rss_kib) {
    ts_err("FAIL: rss grew after warm-up: %.1f MiB at end > %.2f x %.1f MiB\n",
           ts_mib(end.rss_kib), max_growth, ts_mib(warm.rss_kib));
    ok = 0;
  }
  if ((double)end.hwm_kib > max_growth * (double)warm.hwm_kib) {
    ts_err("FAIL: peak rss kept growing after warm-up: %.1f MiB at end > %.2f x %.1f MiB\n",
           ts_mib(end.hwm_kib), max_growth, ts_mib(warm.hwm_kib));
    ok = 0;
  }
  if (trend_kib > max_trend * (double)warm.rss_kib) {
    ts_err("FAIL: rss grows linearly after warm-up: slope %.1f KiB per %ld threads, %+.1f MiB over "
           "the run > %.0f%% of %.1f MiB\n",
           slope, sample_every, trend_kib / 1024.0, 100.0 * max_trend, ts_mib(warm.rss_kib));
    ok = 0;
  }

  ts_out("LC_METRICS prog=churn wall_s=%.2f warm_rss_kib=%ld end_rss_kib=%ld peak_rss_kib=%ld "
         "final_rss_kib=%ld trend_kib=%.0f mallocs=%lu result=%s\n",
         t_run, warm.rss_kib, end.rss_kib, end.hwm_kib, after_drain.rss_kib, trend_kib, na,
         ok ? "pass" : "fail");

  for (long i = 0; i < concurrency; i++) {
    free(slots[i].batch);
    free(slots[i].taken);
  }
  free(samples);
  free(done_list);
  free(slots);
  free(q_ring);
  return ok ? 0 : 1;
}
