/* glibc_simple.c - glibc's malloc micro-benchmark (benchtests/
 * bench-malloc-simple.c), as mimalloc-bench runs it ("glibc-simple").
 *
 *   glibc_simple threads seconds
 *
 * Written again here after the published program: for each block size of
 * 16, 32 and 64 bytes, batches of 25, 100, 400 and 1600 blocks of that
 * size are allocated, each block filled an int at a time, then freed in
 * the order they were allocated; a batch size runs NUM_ITERS / batch times
 * (NUM_ITERS = 2,000,000, mimalloc-bench's; GLIBC_SIMPLE_ITERS sets
 * another).  Per size: a warm-up pass over the four batch sizes, a pass on
 * the main thread, a pass on a second thread (created and joined), and a
 * pass on the main thread again.
 *
 * Ours: `threads` copies of the whole program run at once (1 is the
 * published benchmark); each copy repeats it until `seconds` have passed
 * (at least once), or exactly BENCH_ROUNDS times if that is set (a fixed
 * amount of work, for bench/cost.sh).
 *
 * ops = mallocs + frees.  Prints one RESULT line (see tests/support/bench.h).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/bench.h"
#include "support/clock.h"

#define NUM_ALLOCS 4
#define MAX_ALLOCS 1600

static const int allocs[NUM_ALLOCS] = { 25, 100, 400, MAX_ALLOCS };
static size_t num_iters = 2000000;
static long rounds_wanted;
static double secs_wanted;
static atomic_ullong total_ops;

typedef struct run {
    size_t iters, size;
    int n;
} run_t;

static uint64_t do_benchmark(const run_t *a, int **arr)
{
    for (size_t j = 0; j < a->iters; j++) {
        for (int i = 0; i < a->n; i++) {
            arr[i] = malloc(a->size);
            if (arr[i] == NULL)
                ts_bench_oom("glibc_simple", a->size);
            for (size_t g = 0; g < a->size / sizeof(int); g++)
                arr[i][g] = (int)g;
        }
        for (int i = 0; i < a->n; i++)
            free(arr[i]);
    }
    return 2 * (uint64_t)a->iters * (uint64_t)a->n;
}

typedef struct pass {
    run_t *runs;
    int **arr;
    uint64_t ops;
} pass_t;

static void *thread_test(void *p)
{
    pass_t *t = p;
    for (int i = 0; i < NUM_ALLOCS; i++)
        t->ops += do_benchmark(&t->runs[i], t->arr);
    return p;
}

static uint64_t bench(size_t size)
{
    run_t tests[3][NUM_ALLOCS];
    uint64_t ops = 0;
    int **arr = malloc(MAX_ALLOCS * sizeof(void *));
    if (arr == NULL)
        ts_bench_oom("glibc_simple", MAX_ALLOCS * sizeof(void *));
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < NUM_ALLOCS; i++) {
            tests[t][i].n = allocs[i];
            tests[t][i].size = size;
            tests[t][i].iters = num_iters / (size_t)allocs[i];
            if (t == 0)
                ops += do_benchmark(&tests[0][i], arr);  /* warm-up */
        }
    for (int i = 0; i < NUM_ALLOCS; i++)
        ops += do_benchmark(&tests[0][i], arr);
    pass_t p = { tests[2], arr, 0 };
    pthread_t t;
    if (pthread_create(&t, NULL, thread_test, &p) != 0) {
        fprintf(stderr, "glibc_simple: pthread_create failed\n");
        exit(1);
    }
    pthread_join(t, NULL);
    ops += p.ops;
    for (int i = 0; i < NUM_ALLOCS; i++)
        ops += do_benchmark(&tests[1][i], arr);
    free(arr);
    return ops;
}

static void *copy(void *arg)
{
    (void)arg;
    uint64_t ops = 0;
    double t0 = ts_now();
    for (long round = 1;; round++) {
        ops += bench(16);
        ops += bench(2 * 16);
        ops += bench(4 * 16);
        if (rounds_wanted > 0 ? round >= rounds_wanted : ts_now() - t0 >= secs_wanted)
            break;
    }
    atomic_fetch_add_explicit(&total_ops, ops, memory_order_relaxed);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads;
    ts_bench_args(argc, argv, "glibc's bench-malloc-simple (batches of one size, filled, freed in order)", &threads,
                  &secs_wanted);
    const char *s = getenv("GLIBC_SIMPLE_ITERS");
    if (s != NULL && atol(s) > 0)
        num_iters = (size_t)atol(s);
    s = getenv("BENCH_ROUNDS");
    if (s != NULL)
        rounds_wanted = atol(s);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    if (t == NULL)
        ts_bench_oom("glibc_simple", (size_t)threads * sizeof *t);
    double t0 = ts_now();
    if (threads == 1) {
        copy(NULL);  /* the published program: on the main thread */
    } else {
        for (int i = 0; i < threads; i++)
            if (pthread_create(&t[i], NULL, copy, NULL) != 0) {
                fprintf(stderr, "glibc_simple: pthread_create failed\n");
                return 1;
            }
        for (int i = 0; i < threads; i++)
            pthread_join(t[i], NULL);
    }
    double el = ts_now() - t0;
    free(t);
    ts_bench_report("glibc_simple", threads, el, atomic_load(&total_ops), NULL);
    return 0;
}
