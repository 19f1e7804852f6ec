/* larson.c - the Larson & Krishnan server benchmark, written for hakmem.
 *
 *   larson sleep_cnt min_size max_size chunks_per_thread rounds seed threads
 *
 * Models a server in which each connection is served by a thread that frees
 * and allocates objects in a pool it inherited from the previous thread:
 *
 *  - main pre-fills, for each of `threads` lineages, an array of
 *    chunks_per_thread blocks of random size in [min_size, max_size);
 *  - it starts one worker per lineage; a worker performs
 *    chunks_per_thread * rounds iterations of "pick a random slot, free the
 *    block there, malloc a new random-size block into it, write its first
 *    bytes";
 *  - when a worker finishes its iterations it starts a successor thread that
 *    inherits the same array and exits, so the successor frees blocks its
 *    predecessor allocated (cross-thread frees) and threads are created and
 *    destroyed all the time (thread churn);
 *  - main sleeps sleep_cnt seconds, raises a stop flag, waits for every
 *    lineage to stop, and prints
 *
 *        Throughput = N operations per second
 *
 *    where N counts the mallocs plus the frees performed between the start
 *    of the workers and the moment the last one stopped.
 *
 * Each lineage has its own deterministic RNG seeded from `seed`, so a run's
 * sequence of sizes does not depend on scheduling (only how far it gets).
 * Threads are all joined: each successor joins its predecessor, and main
 * joins the last thread of each lineage.  Every block carries a small tag in
 * its first bytes that is checked before it is freed, so an allocator that
 * hands out overlapping blocks is caught (exit status 3).
 *
 * Set LARSON_VERBOSE=1 for a summary on stderr.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/bench.h"
#include "support/clock.h"
#include "support/rng.h"

#include <limits.h>

typedef struct lineage {
    char **blk;             /* chunks_per_thread live blocks */
    size_t *sz;             /* their sizes (for the tag check) */
    size_t n;               /* chunks_per_thread */
    ts_xs rng;
    uint64_t iters;         /* iterations per thread lifetime */
    /* Thread handoff.  `pred` is written by a thread just before it creates
     * its successor and read by the successor (pthread_create orders the
     * two); `last` is written by the final thread before it publishes `done`
     * with release order, and read by main after an acquire load of `done`. */
    pthread_t pred;
    bool has_pred;
    pthread_t last;
    atomic_int done;
    /* Counters, added once per thread lifetime. */
    atomic_ullong allocs;
    atomic_ullong frees;
    atomic_ullong threads;
    atomic_ullong spawn_failures;
    atomic_ullong tag_errors;
} lineage;

static size_t g_min, g_range;
static atomic_bool g_stop;

static inline void tag_write(char *p, size_t size, size_t slot)
{
    size_t k = size < 8 ? size : 8;
    for (size_t j = 0; j < k; j++)
        p[j] = (char)((size * 31u + slot * 7u + j) ^ 0xA5u);
}

static inline bool tag_ok(const char *p, size_t size, size_t slot)
{
    size_t k = size < 8 ? size : 8;
    for (size_t j = 0; j < k; j++)
        if (p[j] != (char)((size * 31u + slot * 7u + j) ^ 0xA5u))
            return false;
    return true;
}

static void *worker(void *arg)
{
    lineage *L = (lineage *)arg;

    if (L->has_pred) {
        /* The predecessor created us as its very last act; reap it. */
        pthread_join(L->pred, NULL);
        L->has_pred = false;
    }
    atomic_fetch_add_explicit(&L->threads, 1, memory_order_relaxed);

    for (;;) {
        uint64_t nalloc = 0, nfree = 0, bad = 0;
        bool stopped = false;
        for (uint64_t i = 0; i < L->iters; i++) {
            if (atomic_load_explicit(&g_stop, memory_order_relaxed)) {
                stopped = true;
                break;
            }
            size_t v = ts_xs_below(&L->rng, (uint32_t)L->n);
            char *old = L->blk[v];
            if (!tag_ok(old, L->sz[v], v))
                bad++;
            free(old);
            nfree++;
            size_t size = g_min + ts_xs_below(&L->rng, (uint32_t)g_range);
            char *p = malloc(size);
            if (p == NULL)
                ts_bench_oom("larson", size);
            tag_write(p, size, v);
            L->blk[v] = p;
            L->sz[v] = size;
            nalloc++;
        }
        atomic_fetch_add_explicit(&L->allocs, nalloc, memory_order_relaxed);
        atomic_fetch_add_explicit(&L->frees, nfree, memory_order_relaxed);
        if (bad)
            atomic_fetch_add_explicit(&L->tag_errors, bad, memory_order_relaxed);
        if (stopped)
            break;

        /* Hand the array to a successor thread and exit. */
        L->pred = pthread_self();
        L->has_pred = true;
        pthread_t next;
        if (pthread_create(&next, NULL, worker, L) == 0)
            return NULL;            /* L now belongs to the successor */
        /* Could not create a thread (resource limit): keep going here. */
        L->has_pred = false;
        atomic_fetch_add_explicit(&L->spawn_failures, 1, memory_order_relaxed);
    }

    L->last = pthread_self();
    atomic_store_explicit(&L->done, 1, memory_order_release);
    return NULL;
}

static long parse_long(const char *s, const char *what, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "larson: %s must be an integer in [%ld, %ld], got '%s'\n",
                what, lo, hi, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr,
                "usage: %s sleep_cnt min_size max_size chunks_per_thread rounds seed threads\n"
                "  e.g. %s 2 8 1000 5000 100 4141 4\n",
                argv[0], argv[0]);
        return 2;
    }
    long sleep_cnt = parse_long(argv[1], "sleep_cnt", 1, 3600);
    long min_size = parse_long(argv[2], "min_size", 1, 1L << 30);
    long max_size = parse_long(argv[3], "max_size", 2, 1L << 30);
    long chunks = parse_long(argv[4], "chunks_per_thread", 1, 1L << 24);
    long rounds = parse_long(argv[5], "rounds", 1, 1L << 30);
    long seed = parse_long(argv[6], "seed", LONG_MIN, LONG_MAX);
    long nthreads = parse_long(argv[7], "threads", 1, TS_BENCH_MAX_THREADS);
    if (max_size <= min_size) {
        fprintf(stderr, "larson: need min_size < max_size (sizes are drawn from [min,max))\n");
        return 2;
    }
    g_min = (size_t)min_size;
    g_range = (size_t)(max_size - min_size);
    atomic_init(&g_stop, false);

    lineage *L = calloc((size_t)nthreads, sizeof *L);
    if (!L)
        ts_bench_oom("larson", (size_t)nthreads * sizeof *L);

    /* Pre-fill in main: the first worker of each lineage frees main's blocks. */
    ts_xs fill;
    ts_xs_seed(&fill, (uint64_t)seed);
    for (long t = 0; t < nthreads; t++) {
        L[t].n = (size_t)chunks;
        L[t].iters = (uint64_t)chunks * (uint64_t)rounds;
        L[t].blk = malloc((size_t)chunks * sizeof(char *));
        L[t].sz = malloc((size_t)chunks * sizeof(size_t));
        if (!L[t].blk || !L[t].sz)
            ts_bench_oom("larson", (size_t)chunks * sizeof(char *));
        ts_xs_seed(&L[t].rng, (uint64_t)seed * 1000003ULL + (uint64_t)t + 1);
        atomic_init(&L[t].done, 0);
        atomic_init(&L[t].allocs, 0);
        atomic_init(&L[t].frees, 0);
        atomic_init(&L[t].threads, 0);
        atomic_init(&L[t].spawn_failures, 0);
        atomic_init(&L[t].tag_errors, 0);
        for (long i = 0; i < chunks; i++) {
            size_t size = g_min + ts_xs_below(&fill, (uint32_t)g_range);
            char *p = malloc(size);
            if (!p)
                ts_bench_oom("larson", size);
            tag_write(p, size, (size_t)i);
            L[t].blk[i] = p;
            L[t].sz[i] = size;
        }
    }

    double t0 = ts_now();
    for (long t = 0; t < nthreads; t++) {
        pthread_t tid;
        int rc = pthread_create(&tid, NULL, worker, &L[t]);
        if (rc != 0) {
            fprintf(stderr, "larson: pthread_create: %s\n", strerror(rc));
            return 1;
        }
        /* Not joined here: its successor (or main, if it is the last of its
         * lineage) joins it. */
    }

    ts_sleep((double)sleep_cnt);
    atomic_store_explicit(&g_stop, true, memory_order_relaxed);

    for (long t = 0; t < nthreads; t++) {
        while (!atomic_load_explicit(&L[t].done, memory_order_acquire))
            ts_sleep(0.0005);
        pthread_join(L[t].last, NULL);
    }
    double elapsed = ts_now() - t0;

    unsigned long long ops = 0, nthr = 0, fails = 0, bad = 0;
    for (long t = 0; t < nthreads; t++) {
        ops += atomic_load(&L[t].allocs) + atomic_load(&L[t].frees);
        nthr += atomic_load(&L[t].threads);
        fails += atomic_load(&L[t].spawn_failures);
        bad += atomic_load(&L[t].tag_errors);
    }

    /* Release what is left (more cross-thread frees: main frees the
     * workers' blocks) and check the tags one last time. */
    for (long t = 0; t < nthreads; t++) {
        for (size_t i = 0; i < L[t].n; i++) {
            if (!tag_ok(L[t].blk[i], L[t].sz[i], i))
                bad++;
            free(L[t].blk[i]);
        }
        free(L[t].blk);
        free(L[t].sz);
    }
    free(L);

    printf("Throughput = %.0f operations per second\n", (double)ops / elapsed);
    fflush(stdout);

    const char *verbose = getenv("LARSON_VERBOSE");
    if (verbose && *verbose && *verbose != '0')
        fprintf(stderr,
                "larson: threads=%ld elapsed=%.3fs ops=%llu worker-threads-created=%llu "
                "spawn-failures=%llu tag-errors=%llu\n",
                nthreads, elapsed, ops, nthr, fails, bad);
    if (bad) {
        fprintf(stderr, "larson: %llu blocks had their contents changed while live "
                        "(allocator returned overlapping or corrupted blocks)\n", bad);
        return 3;
    }
    return 0;
}
