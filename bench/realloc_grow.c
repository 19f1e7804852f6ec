/* realloc_grow.c - growing buffers with realloc.
 *
 *   realloc threads seconds
 *
 * Models response buffers, string builders and dynamic arrays: each thread
 * grows 4 buffers side by side (round-robin, so a buffer's neighbour is
 * often in the way of growing in place), each from 16 B towards a target
 * size between 4 KiB and 1 MiB (log-uniform), then frees it and starts a
 * new one.  Half of the buffers grow by doubling (vector-style), the other
 * half by appending 16..2048 bytes at a time (string-builder style).
 * Appended bytes are written only at a few positions (the new end and a
 * marker), and the first bytes are checked after every realloc, so the run
 * measures the allocator rather than memcpy of untouched memory... except
 * for the copies the allocator itself decides to make.
 *
 * ops = malloc + realloc + free calls.  Prints one RESULT line.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support/bench.h"
#include "support/rng.h"

#define NBUF 4
#define MIN_TARGET (4u << 10)
#define MAX_TARGET (1u << 20)

typedef struct {
    unsigned char *p;
    size_t size, target;
    bool doubling;
    unsigned char tag;
} buf;

static void start(buf *b, ts_xs *r)
{
    /* log-uniform target in [4 KiB, 1 MiB] */
    unsigned shift = 12 + ts_xs_below(r, 9);               /* 12..20 */
    size_t t = (size_t)1 << shift;
    t += ts_xs_below(r, (uint32_t)t);
    b->target = t > MAX_TARGET ? MAX_TARGET : t;
    b->doubling = ts_xs_below(r, 2) == 0;
    b->size = 16;
    b->tag = (unsigned char)ts_xs_next(r);
    b->p = malloc(b->size);
    if (!b->p)
        ts_bench_oom("realloc", b->size);
    memset(b->p, b->tag, 8);
    b->p[b->size - 1] = 0xEE;
}

static void work(ts_bench_worker *w)
{
    ts_xs r;
    ts_xs_seed(&r, w->seed);
    buf b[NBUF];
    uint64_t ops = 0, bad = 0;
    for (int i = 0; i < NBUF; i++) {
        start(&b[i], &r);
        ops++;
    }
    while (!ts_bench_stopped(w)) {
        for (int k = 0; k < 32; k++) {
            buf *x = &b[k % NBUF];
            if (x->size >= x->target) {
                free(x->p);
                ops++;
                start(x, &r);
                ops++;
                continue;
            }
            size_t old = x->size;
            size_t n = x->doubling ? old * 2 : old + 16 + ts_xs_below(&r, 2033);
            if (n > x->target)
                n = x->target;
            unsigned char *p = realloc(x->p, n);
            if (!p)
                ts_bench_oom("realloc", n);
            ops++;
            /* contents must survive: first 8 bytes and the old last byte */
            for (int j = 0; j < 8; j++)
                if (p[j] != x->tag)
                    bad++;
            if (p[old - 1] != 0xEE)
                bad++;
            p[old + (n - old) / 2] = x->tag;
            p[n - 1] = 0xEE;
            x->p = p;
            x->size = n;
        }
    }
    for (int i = 0; i < NBUF; i++) {
        free(b[i].p);
        ops++;
    }
    w->ops = ops;
    w->extra = bad;
}

int main(int argc, char **argv)
{
    return ts_bench_main(argc, argv, "realloc", "realloc growth of buffers from 16 B up to 1 MiB", work, "bytes were not preserved across realloc");
}
