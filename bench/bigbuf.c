/* bigbuf.c - big buffers replaced at random.
 *
 *   bigbuf threads seconds
 *
 * The shape of a program that works on large buffers (a media or
 * compression server, an image pipeline): each thread keeps 20 live buffers
 * of 5 to 25 MiB (uniform), each written in full when it is allocated; a
 * step frees a random one and allocates a buffer of a new random size in
 * its place, and writes it in full.  What it measures is what the
 * allocator does with memory it gets back: keep it and reuse it (the next
 * buffer's writes hit pages already mapped), or give it back and take the
 * page faults again (the kernel zeroes every page on its first touch).  The
 * writes are memset, half or more of the time of any allocator.
 *
 * ops = mallocs + frees.  Prints one RESULT line (see tests/support/bench.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support/bench.h"
#include "support/rng.h"

#define BUFFERS 20
#define MIB ((size_t)1 << 20)

static size_t pick_size(ts_xs *r) { return 5 * MIB + (size_t)(ts_xs_next(r) % (20 * MIB + 1)); }

static void work(ts_bench_worker *w)
{
    ts_xs r;
    ts_xs_seed(&r, w->seed);
    unsigned char *buf[BUFFERS];
    uint64_t ops = 0;
    for (int i = 0; i < BUFFERS; i++) {
        size_t n = pick_size(&r);
        buf[i] = malloc(n);
        if (buf[i] == NULL)
            ts_bench_oom("bigbuf", n);
        memset(buf[i], i, n);
        ops++;
    }
    while (!ts_bench_stopped(w)) {
        uint32_t i = ts_xs_below(&r, BUFFERS);
        free(buf[i]);
        size_t n = pick_size(&r);
        buf[i] = malloc(n);
        if (buf[i] == NULL)
            ts_bench_oom("bigbuf", n);
        memset(buf[i], (int)ops, n);
        ops += 2;
    }
    for (int i = 0; i < BUFFERS; i++)
        free(buf[i]);
    w->ops = ops + BUFFERS;
}

int main(int argc, char **argv)
{
    return ts_bench_main(argc, argv, "bigbuf", "20 live buffers of 5-25 MiB per thread, replaced at random",
                         work, "");
}
