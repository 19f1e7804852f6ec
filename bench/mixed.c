/* mixed.c - random replacement of mixed-size blocks (glibc bench-malloc-thread shape).
 *
 *   mixed threads seconds
 *
 * The loop of glibc's benchtests/bench-malloc-thread: each thread owns an
 * array of 1000 slots, all filled at the start.  Each step picks a random
 * slot, frees its block and mallocs a new one of a random size, writing the
 * block's first and last bytes (a tag checked again before the block is
 * freed: a mismatch means overlapping blocks, exit status 3).
 *
 * Sizes: 63 of 64 steps 1..4096 bytes, log-uniform (a power-of-two range
 * 2^k..2^(k+1), k = 0..11, then uniform in it: a third of the blocks are at
 * most 16 bytes, two thirds at most 256 bytes); 1 step in 64 a block of
 * 4 KiB..32 KiB.  Unlike churn there are no bursts, the working set is
 * smaller and the sizes go down to 1 byte.
 *
 * ops = mallocs + frees.  Prints one RESULT line (see tests/support/bench.h).
 */
#include <stdint.h>
#include <stdlib.h>

#include "support/bench.h"
#include "support/rng.h"

#define SLOTS 1000

static inline size_t pick_size(ts_xs *r)
{
    uint64_t x = ts_xs_next(r);
    if ((x & 63) == 0)
        return 4097 + (size_t)((x >> 32) % (32768 - 4097 + 1));
    unsigned k = (unsigned)((x >> 6) % 12);                 /* 0..11 */
    size_t lo = (size_t)1 << k;
    return lo + (size_t)((x >> 32) % (lo + 1));             /* 2^k..2^(k+1) */
}

static inline unsigned char tag_of(const unsigned char *p, size_t size)
{
    return (unsigned char)(((uintptr_t)p >> 4) ^ size ^ 0x5A);
}

static void work(ts_bench_worker *w)
{
    ts_xs r;
    ts_xs_seed(&r, w->seed);
    unsigned char **slot = malloc(SLOTS * sizeof *slot);
    size_t *size = malloc(SLOTS * sizeof *size);
    if (!slot || !size)
        ts_bench_oom("mixed", SLOTS * sizeof *size);
    uint64_t ops = 0, bad = 0;

    for (int i = 0; i < SLOTS; i++) {
        size_t n = pick_size(&r);
        unsigned char *p = malloc(n);
        if (!p)
            ts_bench_oom("mixed", n);
        p[0] = p[n - 1] = tag_of(p, n);
        slot[i] = p;
        size[i] = n;
    }
    ops += SLOTS;

    while (!ts_bench_stopped(w)) {
        for (int k = 0; k < 64; k++) {
            uint32_t i = ts_xs_below(&r, SLOTS);
            unsigned char *p = slot[i];
            unsigned char t = tag_of(p, size[i]);
            if (p[0] != t || p[size[i] - 1] != t)
                bad++;
            free(p);
            size_t n = pick_size(&r);
            p = malloc(n);
            if (!p)
                ts_bench_oom("mixed", n);
            p[0] = p[n - 1] = tag_of(p, n);
            slot[i] = p;
            size[i] = n;
        }
        ops += 2 * 64;
    }
    for (int i = 0; i < SLOTS; i++)
        free(slot[i]);
    ops += SLOTS;
    free(slot);
    free(size);
    w->ops = ops;
    w->extra = bad;
}

int main(int argc, char **argv)
{
    return ts_bench_main(argc, argv, "mixed", "random replacement in 1000 slots, 1 B..32 KiB skewed small", work, "blocks were overwritten while live");
}
