/* churn.c - thread-local churn of mixed sizes.
 *
 *   churn threads seconds
 *
 * Models request handlers that allocate and free objects of many sizes, all
 * within one thread: each thread keeps a working set of live blocks and
 * repeatedly replaces a random one with a block of a new random size.  Every
 * eighth step it instead runs a short "request": a burst of 1..32 blocks
 * allocated and then freed in reverse order (stack-like temporaries).
 *
 * Sizes span 16 B .. 64 KiB, skewed to small:
 *   60% 16..128 B, 25% 129 B..1 KiB, 10% 1..8 KiB, 5% 8..64 KiB.
 * Each new block gets its first and last bytes written.
 *
 * ops = mallocs + frees.  Prints one RESULT line (see tests/support/bench.h).
 */
#include <stdint.h>
#include <stdlib.h>

#include "support/bench.h"
#include "support/rng.h"

#define WORKING_SET 2048
#define BURST_MAX 32

static inline size_t pick_size(ts_xs *r)
{
    uint32_t c = ts_xs_below(r, 100);
    if (c < 60)
        return 16 + ts_xs_below(r, 128 - 16 + 1);
    if (c < 85)
        return 129 + ts_xs_below(r, 1024 - 129 + 1);
    if (c < 95)
        return 1025 + ts_xs_below(r, 8192 - 1025 + 1);
    return 8193 + ts_xs_below(r, 65536 - 8193 + 1);
}

static inline char *alloc_touch(size_t size)
{
    char *p = malloc(size);
    if (!p)
        ts_bench_oom("churn", size);
    p[0] = (char)size;
    p[size - 1] = (char)(size >> 8);
    return p;
}

static void work(ts_bench_worker *w)
{
    ts_xs r;
    ts_xs_seed(&r, w->seed);
    char **set = malloc(WORKING_SET * sizeof(char *));
    char *burst[BURST_MAX];
    if (!set)
        ts_bench_oom("churn", WORKING_SET * sizeof(char *));
    uint64_t ops = 0;
    for (int i = 0; i < WORKING_SET; i++)
        set[i] = alloc_touch(pick_size(&r));
    ops += WORKING_SET;

    uint64_t step = 0;
    while (!ts_bench_stopped(w)) {
        /* check the stop flag every 64 steps */
        for (int k = 0; k < 64; k++, step++) {
            if ((step & 7) == 7) {
                int n = 1 + (int)ts_xs_below(&r, BURST_MAX);
                for (int i = 0; i < n; i++)
                    burst[i] = alloc_touch(pick_size(&r));
                for (int i = n - 1; i >= 0; i--)
                    free(burst[i]);
                ops += 2 * (uint64_t)n;
            } else {
                uint32_t v = ts_xs_below(&r, WORKING_SET);
                free(set[v]);
                set[v] = alloc_touch(pick_size(&r));
                ops += 2;
            }
        }
    }
    for (int i = 0; i < WORKING_SET; i++)
        free(set[i]);
    ops += WORKING_SET;
    free(set);
    w->ops = ops;
}

int main(int argc, char **argv)
{
    int threads;
    double secs;
    ts_bench_worker w[TS_BENCH_MAX_THREADS];
    ts_bench_args(argc, argv, "thread-local churn of mixed sizes 16B..64KiB", &threads, &secs);
    double el = ts_bench_run(threads, secs, work, NULL, w);
    ts_bench_report("churn", threads, el, ts_bench_sum_ops(w, threads), NULL);
    return 0;
}
