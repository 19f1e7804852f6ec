/* insn.c - instruction-count probe for the malloc/free fast path.
 *
 *   insn [iters]          (default 100000)
 *
 * One thread.  Each iteration allocates 64 blocks of 16..1000 bytes (a
 * fixed size sequence, the same in every iteration) and frees them in
 * reverse order.  A warm-up of 1000 iterations runs first, so the measured
 * loop sees every size class already populated.
 *
 * Meant to be run under `valgrind --tool=callgrind` by bench/insn.sh, twice
 * with different `iters`: the difference of the two instruction totals
 * divided by the difference in malloc+free pairs is the cost of one pair,
 * with start-up, warm-up and exit cancelled out.  The loop itself adds a few
 * instructions per pair (load the size, call, store the pointer; load it
 * back, call), the same for every allocator.
 *
 * Prints one short line (iterations and a checksum of the block addresses).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NBLOCKS 64
#define WARMUP 1000

static size_t sizes[NBLOCKS];

static uintptr_t run(long iters)
{
    void *p[NBLOCKS];
    uintptr_t sum = 0;
    for (long it = 0; it < iters; it++) {
        for (int i = 0; i < NBLOCKS; i++) {
            p[i] = malloc(sizes[i]);
            if (!p[i]) {
                fprintf(stderr, "insn: malloc(%zu) failed\n", sizes[i]);
                exit(1);
            }
        }
        sum += (uintptr_t)p[it & (NBLOCKS - 1)];
        for (int i = NBLOCKS - 1; i >= 0; i--)
            free(p[i]);
    }
    return sum;
}

int main(int argc, char **argv)
{
    long iters = 100000;
    if (argc > 1) {
        char *end;
        iters = strtol(argv[1], &end, 10);
        if (*end != '\0' || iters < 0) {
            fprintf(stderr, "usage: %s [iters]\n", argv[0]);
            return 2;
        }
    }
    /* a fixed pseudo-random sequence covering 16..1000 bytes */
    uint32_t x = 12345;
    for (int i = 0; i < NBLOCKS; i++) {
        x = x * 1103515245u + 12345u;
        sizes[i] = 16 + (x >> 8) % (1000 - 16 + 1);
    }
    uintptr_t s = run(WARMUP);
    s += run(iters);
    printf("insn: %ld iterations x %d malloc+free pairs (sum %lx)\n", iters,
           NBLOCKS, (unsigned long)(s & 0xffff));
    return 0;
}
