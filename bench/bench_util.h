/* bench_util.h - shared helpers for the hakmem server-like workloads.
 *
 * Every workload program takes `threads seconds` and prints exactly one line
 * on stdout:
 *
 *   RESULT <name> threads=<T> secs=<elapsed> ops=<N> ops/s=<N>[ key=value ...]
 *
 * bench/scaling.sh parses the integer after "ops/s=".  The programs call plain
 * malloc/free/realloc: the allocator under test is chosen with LD_PRELOAD.
 * They are compiled with -fno-builtin-malloc and friends so that the compiler
 * neither elides nor merges allocation pairs.
 */
#ifndef HAKMEM_BENCH_UTIL_H
#define HAKMEM_BENCH_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_THREADS 1024

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sleep for `secs` seconds, resuming after signals. */
static inline void bench_sleep(double secs)
{
    struct timespec req, rem;
    if (secs <= 0)
        return;
    req.tv_sec = (time_t)secs;
    req.tv_nsec = (long)((secs - (double)req.tv_sec) * 1e9);
    while (nanosleep(&req, &rem) != 0 && errno == EINTR)
        req = rem;
}

/* ---- deterministic per-thread RNG: splitmix64 seeding, xorshift64* ---- */

typedef struct {
    uint64_t s;
} bench_rng;

static inline uint64_t bench_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline void bench_rng_seed(bench_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    r->s = bench_splitmix64(&x);
    if (r->s == 0)
        r->s = 0x1234567887654321ULL;
}

static inline uint64_t bench_rng_next(bench_rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [0, n) for n <= 2^32 (multiply-shift, negligible bias). */
static inline uint32_t bench_rng_below(bench_rng *r, uint32_t n)
{
    return (uint32_t)(((bench_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

static inline void bench_oom(const char *prog, size_t size)
{
    fprintf(stderr, "%s: allocation of %zu bytes failed\n", prog, size);
    exit(1);
}

/* ---- argument parsing: `prog threads seconds` ---- */

static inline void bench_parse_args(int argc, char **argv, const char *what,
                                    int *threads, double *secs)
{
    char *end;
    if (argc != 3) {
        fprintf(stderr, "usage: %s threads seconds\n  %s\n", argv[0], what);
        exit(2);
    }
    long t = strtol(argv[1], &end, 10);
    if (*end != '\0' || t < 1 || t > BENCH_MAX_THREADS) {
        fprintf(stderr, "%s: threads must be 1..%d\n", argv[0], BENCH_MAX_THREADS);
        exit(2);
    }
    double s = strtod(argv[2], &end);
    if (*end != '\0' || !(s > 0) || s > 3600) {
        fprintf(stderr, "%s: seconds must be in (0, 3600]\n", argv[0]);
        exit(2);
    }
    *threads = (int)t;
    *secs = s;
}

/* ---- a timed run of N identical workers ----
 *
 * Each worker loops until `stop` becomes true and reports how many allocator
 * operations it performed.  All workers and main meet at a barrier before the
 * clock starts; main then sleeps, raises `stop` and joins everybody.  The
 * elapsed time covers the window from the barrier to the last join, so work
 * done while draining after `stop` is both counted and timed.
 */

typedef struct bench_worker {
    int id;
    int nthreads;
    atomic_bool *stop;
    pthread_barrier_t *start;
    void *shared;       /* workload-specific, shared by all workers */
    uint64_t ops;       /* written by the worker, read by main after join */
    uint64_t extra;     /* workload-specific counter */
    uint64_t seed;
} bench_worker;

typedef void (*bench_worker_fn)(bench_worker *w);

typedef struct {
    bench_worker_fn fn;
    bench_worker *w;
} bench_trampoline;

static inline void *bench_thread_main(void *arg)
{
    bench_trampoline *t = (bench_trampoline *)arg;
    pthread_barrier_wait(t->w->start);
    t->fn(t->w);
    return NULL;
}

/* Runs fn in `n` threads for `secs` seconds.  Returns the elapsed time;
 * w[] (n entries) holds each worker's counters afterwards. */
static inline double bench_run(int n, double secs, bench_worker_fn fn,
                               void *shared, bench_worker *w)
{
    pthread_t tid[BENCH_MAX_THREADS];
    bench_trampoline tr[BENCH_MAX_THREADS];
    pthread_barrier_t start;
    atomic_bool stop;

    atomic_init(&stop, false);
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        w[i].id = i;
        w[i].nthreads = n;
        w[i].stop = &stop;
        w[i].start = &start;
        w[i].shared = shared;
        w[i].ops = 0;
        w[i].extra = 0;
        w[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1) + 42;
        tr[i].fn = fn;
        tr[i].w = &w[i];
        int rc = pthread_create(&tid[i], NULL, bench_thread_main, &tr[i]);
        if (rc != 0) {
            fprintf(stderr, "pthread_create: %s\n", strerror(rc));
            exit(1);
        }
    }
    pthread_barrier_wait(&start);
    double t0 = bench_now();
    bench_sleep(secs);
    /* relaxed is enough: the store only has to become visible eventually,
     * and the workers' results are published to main by pthread_join. */
    atomic_store_explicit(&stop, true, memory_order_relaxed);
    for (int i = 0; i < n; i++)
        pthread_join(tid[i], NULL);
    double el = bench_now() - t0;
    pthread_barrier_destroy(&start);
    return el;
}

static inline bool bench_stopped(const bench_worker *w)
{
    return atomic_load_explicit(w->stop, memory_order_relaxed);
}

static inline uint64_t bench_sum_ops(const bench_worker *w, int n)
{
    uint64_t s = 0;
    for (int i = 0; i < n; i++)
        s += w[i].ops;
    return s;
}

/* Prints the RESULT line (with an optional " key=value..." suffix). */
static inline void bench_report(const char *name, int threads, double elapsed,
                                uint64_t ops, const char *suffix)
{
    double rate = elapsed > 0 ? (double)ops / elapsed : 0.0;
    printf("RESULT %s threads=%d secs=%.3f ops=%llu ops/s=%.0f%s%s\n", name,
           threads, elapsed, (unsigned long long)ops, rate,
           suffix && *suffix ? " " : "", suffix ? suffix : "");
    fflush(stdout);
}

/* Sum of the workers' error counts (w->extra). */
static inline uint64_t bench_sum_extra(const bench_worker *w, int n)
{
    uint64_t s = 0;
    for (int i = 0; i < n; i++)
        s += w[i].extra;
    return s;
}

/* The main() of a workload whose workers count errors in w->extra: parse
 * `threads seconds`, run fn on every thread, print the RESULT line, and
 * return 3 (after "<name>: N <what>" on stderr) if any worker saw an error. */
static inline int bench_main(int argc, char **argv, const char *name, const char *description,
                             bench_worker_fn fn, const char *what)
{
    int threads;
    double secs;
    static bench_worker w[BENCH_MAX_THREADS];
    bench_parse_args(argc, argv, description, &threads, &secs);
    double el = bench_run(threads, secs, fn, NULL, w);
    uint64_t bad = bench_sum_extra(w, threads);
    bench_report(name, threads, el, bench_sum_ops(w, threads), NULL);
    if (bad) {
        fprintf(stderr, "%s: %llu %s\n", name, (unsigned long long)bad, what);
        return 3;
    }
    return 0;
}

#endif /* HAKMEM_BENCH_UTIL_H */
