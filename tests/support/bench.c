/* bench.c - the harness of the bench/ workloads (bench.h). */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

void ts_bench_args(int argc, char **argv, const char *what, int *threads, double *secs)
{
    char *end;
    if (argc != 3) {
        fprintf(stderr, "usage: %s threads seconds\n  %s\n", argv[0], what);
        exit(2);
    }
    long t = strtol(argv[1], &end, 10);
    if (*end != '\0' || t < 1 || t > TS_BENCH_MAX_THREADS) {
        fprintf(stderr, "%s: threads must be 1..%d\n", argv[0], TS_BENCH_MAX_THREADS);
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

__thread uint64_t ts_bench_checks_left = UINT64_MAX;
static uint64_t fixed_checks = UINT64_MAX;   /* BENCH_CHECKS, read by ts_bench_run */

typedef struct {
    ts_bench_fn fn;
    ts_bench_worker *w;
} trampoline;

static void *thread_main(void *arg)
{
    trampoline *t = (trampoline *)arg;
    ts_bench_checks_left = fixed_checks;
    pthread_barrier_wait(t->w->start);
    t->fn(t->w);
    return NULL;
}

double ts_bench_run(int n, double secs, ts_bench_fn fn, void *shared, ts_bench_worker *w)
{
    pthread_t tid[TS_BENCH_MAX_THREADS];
    trampoline tr[TS_BENCH_MAX_THREADS];
    pthread_barrier_t start;
    atomic_bool stop;

    atomic_init(&stop, false);
    const char *checks = getenv("BENCH_CHECKS");
    if (checks != NULL && *checks != 0)
        fixed_checks = strtoull(checks, NULL, 10);
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        w[i].id = i;
        w[i].nthreads = n;
        w[i].stop = &stop;
        w[i].start = &start;
        w[i].shared = shared;
        w[i].ops = 0;
        w[i].extra = 0;
        w[i].seed = ts_bench_seed(i);
        tr[i].fn = fn;
        tr[i].w = &w[i];
        int rc = pthread_create(&tid[i], NULL, thread_main, &tr[i]);
        if (rc != 0) {
            fprintf(stderr, "pthread_create: %s\n", strerror(rc));
            exit(1);
        }
    }
    pthread_barrier_wait(&start);
    double t0 = ts_now();
    if (fixed_checks == UINT64_MAX)   /* else the workers stop by themselves */
        ts_sleep(secs);
    /* relaxed is enough: the store only has to become visible eventually,
     * and the workers' results are published to main by pthread_join. */
    atomic_store_explicit(&stop, true, memory_order_relaxed);
    for (int i = 0; i < n; i++)
        pthread_join(tid[i], NULL);
    double el = ts_now() - t0;
    pthread_barrier_destroy(&start);
    return el;
}

uint64_t ts_bench_sum_ops(const ts_bench_worker *w, int n)
{
    uint64_t s = 0;
    for (int i = 0; i < n; i++)
        s += w[i].ops;
    return s;
}

uint64_t ts_bench_sum_extra(const ts_bench_worker *w, int n)
{
    uint64_t s = 0;
    for (int i = 0; i < n; i++)
        s += w[i].extra;
    return s;
}

void ts_bench_report(const char *name, int threads, double elapsed, uint64_t ops,
                     const char *suffix)
{
    double rate = elapsed > 0 ? (double)ops / elapsed : 0.0;
    printf("RESULT %s threads=%d secs=%.3f ops=%llu ops/s=%.0f%s%s\n", name, threads, elapsed,
           (unsigned long long)ops, rate, suffix && *suffix ? " " : "", suffix ? suffix : "");
    fflush(stdout);
}

int ts_bench_main(int argc, char **argv, const char *name, const char *description,
                  ts_bench_fn fn, const char *what)
{
    int threads;
    double secs;
    static ts_bench_worker w[TS_BENCH_MAX_THREADS];
    ts_bench_args(argc, argv, description, &threads, &secs);
    double el = ts_bench_run(threads, secs, fn, NULL, w);
    uint64_t bad = ts_bench_sum_extra(w, threads);
    ts_bench_report(name, threads, el, ts_bench_sum_ops(w, threads), NULL);
    if (bad) {
        fprintf(stderr, "%s: %llu %s\n", name, (unsigned long long)bad, what);
        return 3;
    }
    return 0;
}
