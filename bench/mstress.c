/* mstress.c - mimalloc's thread stress test as mimalloc-bench publishes and
 * runs it (its bench/mstress/mstress.c, from mimalloc's test/test-stress.c).
 *
 *   mstress threads seconds
 *
 * Written again here: a round starts `threads` threads and joins them;
 * thread i makes 100 * SCALE * (i % 8 + 1) allocations (so some threads do
 * more), each of 2^k pointer-sized words (k < 5; k < 7 for the ones it
 * retains), about 2% of them 100x larger and some of those 1000x or 10000x
 * (up to 10 MiB); every block is allocated with malloc and filled, and
 * checked when it is freed.  At each step a thread allocates (into its
 * growing array, which it reallocs by 100,000 entries) or retains, frees a
 * random earlier block with probability 2/3, and with probability 1/4
 * exchanges one of its blocks with a random slot of a shared array of 1000
 * (atomic exchange): so blocks are freed by other threads, and by threads of
 * later rounds.  After a round main frees about half of the shared slots'
 * blocks.  Random numbers: the test's splitmix64 steps (no increment, so a
 * seed of 0 would stay 0), seeded with (tid + 1) * 43 per thread and 43 * 43
 * for main, as published.  mimalloc's own copy of the test has since moved
 * to calloc and leaves the 1000x and 10000x blocks out below SCALE 100;
 * mimalloc-bench's, followed here, does neither.
 *
 * SCALE is 50 (MSTRESS_SCALE), mimalloc-bench's setting.  The published
 * test runs a fixed number of rounds; here rounds run until `seconds` have
 * passed (at least one), or exactly BENCH_ROUNDS rounds if that is set (a
 * fixed amount of work, for bench/cost.sh).  The shared slots are emptied
 * at the end, as the test's last round does.
 *
 * ops = allocations + frees (malloc and free calls; the arrays' reallocs are
 * not counted).  Prints one RESULT line (see tests/support/bench.h) with
 * rounds=N; exits 3 if a block's contents changed (the test aborts).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/bench.h"
#include "support/clock.h"

#define TRANSFERS 1000
#define COOKIE 0xbf58476d1ce4e5b9UL

static _Atomic(void *) transfer[TRANSFERS];
static long scale = 50;
static atomic_ullong total_ops, corrupt;

static uintptr_t pick(uintptr_t *r)
{
    uintptr_t x = *r;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9UL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebUL;
    x ^= x >> 31;
    *r = x;
    return x;
}

static int chance(size_t perc, uintptr_t *r) { return pick(r) % 100 <= perc; }

static void *alloc_items(size_t items, uintptr_t *r)
{
    if (chance(1, r)) {
        if (chance(1, r))
            items *= 10000;     /* 0.01% giant */
        else if (chance(10, r))
            items *= 1000;      /* 0.1% huge */
        else
            items *= 100;       /* 1% large */
    }
    if (items == 40)
        items++;                /* the published test avoids this size */
    uintptr_t *p = malloc(items * sizeof(uintptr_t));
    if (p == NULL)
        ts_bench_oom("mstress", items * sizeof(uintptr_t));
    for (uintptr_t i = 0; i < items; i++)
        p[i] = (items - i) ^ COOKIE;
    return p;
}

static void free_items(void *p)
{
    if (p != NULL) {
        uintptr_t *q = p;
        uintptr_t items = q[0] ^ COOKIE;
        for (uintptr_t i = 0; i < items; i++)
            if ((q[i] ^ COOKIE) != items - i) {
                atomic_fetch_add_explicit(&corrupt, 1, memory_order_relaxed);
                break;
            }
    }
    free(p);
}

static void *stress(void *arg)
{
    intptr_t tid = (intptr_t)arg;
    uintptr_t r = (uintptr_t)((tid + 1) * 43);
    const size_t max_item_shift = 5;
    const size_t max_item_retained_shift = max_item_shift + 2;
    size_t allocs = 100 * (size_t)scale * (size_t)(tid % 8 + 1);
    size_t retain = allocs / 2;
    void **data = NULL;
    size_t data_size = 0, data_top = 0;
    void **retained = malloc(retain * sizeof(void *));
    size_t retain_top = 0;
    unsigned long long ops = 0;
    if (retained == NULL && retain != 0)
        ts_bench_oom("mstress", retain * sizeof(void *));

    while (allocs > 0 || retain > 0) {
        if (retain == 0 || (chance(50, &r) && allocs > 0)) {
            allocs--;
            if (data_top >= data_size) {
                data_size += 100000;
                data = realloc(data, data_size * sizeof(void *));
                if (data == NULL)
                    ts_bench_oom("mstress", data_size * sizeof(void *));
            }
            data[data_top++] = alloc_items((size_t)1 << (pick(&r) % max_item_shift), &r);
        } else {
            retained[retain_top++] = alloc_items((size_t)1 << (pick(&r) % max_item_retained_shift), &r);
            retain--;
        }
        ops++;
        if (chance(66, &r) && data_top > 0) {
            size_t idx = pick(&r) % data_top;
            if (data[idx] != NULL)
                ops++;
            free_items(data[idx]);
            data[idx] = NULL;
        }
        if (chance(25, &r) && data_top > 0) {
            size_t data_idx = pick(&r) % data_top;
            size_t transfer_idx = pick(&r) % TRANSFERS;
            data[data_idx] = atomic_exchange(&transfer[transfer_idx], data[data_idx]);
        }
    }
    for (size_t i = 0; i < retain_top; i++)
        free_items(retained[i]);
    for (size_t i = 0; i < data_top; i++) {
        if (data[i] != NULL)
            ops++;
        free_items(data[i]);
    }
    ops += retain_top;
    free(retained);
    free(data);
    atomic_fetch_add_explicit(&total_ops, ops, memory_order_relaxed);
    return NULL;
}

static void run_round(int nthreads)
{
    pthread_t *threads = calloc((size_t)nthreads, sizeof(pthread_t));
    if (threads == NULL)
        ts_bench_oom("mstress", (size_t)nthreads * sizeof(pthread_t));
    for (intptr_t i = 0; i < nthreads; i++)
        if (pthread_create(&threads[i], NULL, stress, (void *)i) != 0) {
            fprintf(stderr, "mstress: pthread_create failed\n");
            exit(1);
        }
    for (int i = 0; i < nthreads; i++)
        pthread_join(threads[i], NULL);
    free(threads);
}

/* Free the blocks of the shared slots: about half (all when last). */
static unsigned long long drain_transfers(uintptr_t *r, int last)
{
    unsigned long long freed = 0;
    for (int i = 0; i < TRANSFERS; i++)
        if (chance(50, r) || last) {
            void *p = atomic_exchange(&transfer[i], NULL);
            if (p != NULL)
                freed++;
            free_items(p);
        }
    return freed;
}

int main(int argc, char **argv)
{
    int threads;
    double secs;
    ts_bench_args(argc, argv, "mimalloc's thread stress test (rounds of threads that exchange blocks)", &threads, &secs);
    const char *s = getenv("MSTRESS_SCALE");
    if (s != NULL && atol(s) > 0)
        scale = atol(s);
    const char *fixed = getenv("BENCH_ROUNDS");
    long rounds_wanted = fixed != NULL ? atol(fixed) : 0;

    uintptr_t r = 43 * 43;
    unsigned long long main_ops = 0;
    long rounds = 0;
    double t0 = ts_now();
    for (;;) {
        run_round(threads);
        rounds++;
        int last = rounds_wanted > 0 ? rounds >= rounds_wanted : ts_now() - t0 >= secs;
        main_ops += drain_transfers(&r, last);
        if (last)
            break;
    }
    double el = ts_now() - t0;
    char extra[64];
    snprintf(extra, sizeof extra, "rounds=%ld scale=%ld", rounds, scale);
    ts_bench_report("mstress", threads, el, atomic_load(&total_ops) + main_ops, extra);
    if (atomic_load(&corrupt) != 0) {
        fprintf(stderr, "mstress: %llu blocks had their contents changed while live\n",
                (unsigned long long)atomic_load(&corrupt));
        return 3;
    }
    return 0;
}
