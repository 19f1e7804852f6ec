/* bench.h - the harness of the bench/ workloads.
 *
 * Every workload program takes `threads seconds` and prints exactly one line
 * on stdout:
 *
 *   RESULT <name> threads=<T> secs=<elapsed> ops=<N> ops/s=<N>[ key=value ...]
 *
 * bench/scaling.sh parses the integer after "ops/s=".  The programs call plain
 * malloc/free/realloc: the allocator under test is chosen with LD_PRELOAD.
 *
 * A timed run of N identical workers (ts_bench_run): each worker loops until
 * its stop flag is raised (ts_bench_stopped, inline: it is read inside the
 * timed loops) and reports how many allocator operations it performed.  All
 * workers and main meet at a barrier before the clock starts; main then
 * sleeps, raises the flag and joins everybody.  The elapsed time covers the
 * window from the barrier to the last join, so work done while draining after
 * the flag is both counted and timed.
 */
#ifndef HAKMEM_TS_BENCH_H
#define HAKMEM_TS_BENCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define TS_BENCH_MAX_THREADS 1024

/* "<prog>: allocation of <size> bytes failed" on stderr, exit 1.  Inline:
 * it is the failure branch of the allocations in the timed loops, which stay
 * as they were compiled. */
static inline void ts_bench_oom(const char *prog, size_t size)
{
    fprintf(stderr, "%s: allocation of %zu bytes failed\n", prog, size);
    exit(1);
}

/* Parse `prog threads seconds` (threads 1..TS_BENCH_MAX_THREADS, seconds in
 * (0, 3600]); prints the usage with `what` and exits 2 otherwise. */
void ts_bench_args(int argc, char **argv, const char *what, int *threads, double *secs);

typedef struct ts_bench_worker {
    int id;
    int nthreads;
    atomic_bool *stop;
    pthread_barrier_t *start;
    void *shared;       /* workload-specific, shared by all workers */
    uint64_t ops;       /* written by the worker, read by main after join */
    uint64_t extra;     /* workload-specific counter */
    uint64_t seed;
} ts_bench_worker;

typedef void (*ts_bench_fn)(ts_bench_worker *w);

/* The seed of worker i (w->seed in ts_bench_run's workers). */
static inline uint64_t ts_bench_seed(int i)
{
    return 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1) + 42;
}

/* Runs fn in `n` threads for `secs` seconds.  Returns the elapsed time;
 * w[] (n entries) holds each worker's counters afterwards. */
double ts_bench_run(int n, double secs, ts_bench_fn fn, void *shared, ts_bench_worker *w);

/* A fixed amount of work (bench/cost.sh): the variants built with
 * -DTS_BENCH_FIXED (build/bench/fixed/) stop each worker after it has asked
 * ts_bench_stopped BENCH_CHECKS times (set by ts_bench_run from the
 * environment), whatever the time, so two runs do the same work.  The
 * timed programs are built without it: their loops are unchanged. */
extern __thread uint64_t ts_bench_checks_left;

/* Has main raised the stop flag?  Read inside the timed loops. */
#ifdef TS_BENCH_FIXED
static inline bool ts_bench_stopped(const ts_bench_worker *w)
{
    (void)w;
    return ts_bench_checks_left-- == 0;
}
#else
static inline bool ts_bench_stopped(const ts_bench_worker *w)
{
    return atomic_load_explicit(w->stop, memory_order_relaxed);
}
#endif

/* Sums of the workers' ops and extra counters. */
uint64_t ts_bench_sum_ops(const ts_bench_worker *w, int n);
uint64_t ts_bench_sum_extra(const ts_bench_worker *w, int n);

/* Prints the RESULT line (with an optional " key=value..." suffix). */
void ts_bench_report(const char *name, int threads, double elapsed, uint64_t ops,
                     const char *suffix);

/* The main() of a workload whose workers count errors in w->extra: parse
 * `threads seconds`, run fn on every thread, print the RESULT line, and
 * return 3 (after "<name>: N <what>" on stderr) if any worker saw an error. */
int ts_bench_main(int argc, char **argv, const char *name, const char *description,
                  ts_bench_fn fn, const char *what);

#endif /* HAKMEM_TS_BENCH_H */
