/* falseshare.c - passive false-sharing probe.
 *
 *   falseshare threads seconds
 *
 * Models a dispatcher thread that allocates small objects (sessions,
 * counters, request states) and hands them to worker threads, which then
 * update them over and over.  If the allocator carves consecutive small
 * blocks of one thread out of the same cache line, blocks that end up used
 * by different threads share cache lines and every write bounces the line
 * between cores.
 *
 * Rounds: thread 0 allocates BLOCKS blocks of 16 bytes for each thread,
 * interleaved (block i of thread 0, block i of thread 1, ...); after a
 * barrier every thread (thread 0 included) increments each of its own blocks
 * WRITES times, then frees them (a remote free for blocks thread 0
 * allocated for someone else), and a second barrier ends the round.
 *
 * ops = block writes.  The RESULT line also reports shared=P%: the share of
 * blocks that sat on a 64-byte line together with another thread's block
 * (0% is ideal; with 1 thread it is always 0).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/bench.h"

#define BLOCKS 256          /* per thread and round */
#define WRITES 512          /* increments of each block per round */
#define BLOCK_SIZE 16
#define LINE 64

typedef struct {
    int n;
    pthread_barrier_t bar;
    atomic_bool go;                 /* thread 0's decision for this round */
    uint64_t ***blk;                /* blk[t][i]: block i of thread t */
    /* bookkeeping for the shared-line measure (thread 0 only) */
    struct pos { uintptr_t line; int owner; } *pos;
    uint64_t blocks_seen, blocks_shared, rounds;
} state;

static int cmp_pos(const void *a, const void *b)
{
    const struct pos *x = a, *y = b;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return (x->owner > y->owner) - (x->owner < y->owner);
}

/* Counts the blocks that share their cache line with a block of another
 * thread.  A block may straddle two lines; its first line is what counts. */
static void measure(state *s)
{
    int total = s->n * BLOCKS, k = 0;
    for (int t = 0; t < s->n; t++)
        for (int i = 0; i < BLOCKS; i++) {
            s->pos[k].line = (uintptr_t)s->blk[t][i] / LINE;
            s->pos[k].owner = t;
            k++;
        }
    qsort(s->pos, (size_t)total, sizeof s->pos[0], cmp_pos);
    for (int a = 0; a < total;) {
        int b = a;
        while (b < total && s->pos[b].line == s->pos[a].line)
            b++;
        if (s->pos[a].owner != s->pos[b - 1].owner)   /* sorted by owner */
            s->blocks_shared += (uint64_t)(b - a);
        a = b;
    }
    s->blocks_seen += (uint64_t)total;
}

static void work(ts_bench_worker *w)
{
    state *s = w->shared;
    uint64_t *mine[BLOCKS];
    uint64_t ops = 0;
    for (;;) {
        if (w->id == 0) {
            bool go = !ts_bench_stopped(w);
            if (go) {
                for (int i = 0; i < BLOCKS; i++)
                    for (int t = 0; t < s->n; t++) {
                        uint64_t *p = malloc(BLOCK_SIZE);
                        if (!p)
                            ts_bench_oom("falseshare", BLOCK_SIZE);
                        *p = 0;
                        s->blk[t][i] = p;
                    }
                measure(s);
                s->rounds++;
            }
            atomic_store_explicit(&s->go, go, memory_order_relaxed);
        }
        pthread_barrier_wait(&s->bar);      /* orders thread 0's writes */
        if (!atomic_load_explicit(&s->go, memory_order_relaxed))
            break;
        for (int i = 0; i < BLOCKS; i++)
            mine[i] = s->blk[w->id][i];
        for (int rep = 0; rep < WRITES; rep++)
            for (int i = 0; i < BLOCKS; i++)
                (*(volatile uint64_t *)mine[i])++;
        ops += (uint64_t)WRITES * BLOCKS;
        for (int i = 0; i < BLOCKS; i++) {
            if (*mine[i] != WRITES) {
                fprintf(stderr, "falseshare: block %p of thread %d holds %llu, expected %d "
                                "(blocks overlap)\n", (void *)mine[i], w->id,
                        (unsigned long long)*mine[i], WRITES);
                exit(3);
            }
            free(mine[i]);
        }
        pthread_barrier_wait(&s->bar);      /* blk[] may be refilled */
    }
    w->ops = ops;
}

int main(int argc, char **argv)
{
    int threads;
    double secs;
    static ts_bench_worker w[TS_BENCH_MAX_THREADS];
    ts_bench_args(argc, argv,
                     "thread 0 allocates 16-byte blocks that other threads write", &threads,
                     &secs);
    state s;
    memset(&s, 0, sizeof s);
    s.n = threads;
    pthread_barrier_init(&s.bar, NULL, (unsigned)threads);
    atomic_init(&s.go, false);
    s.blk = malloc((size_t)threads * sizeof *s.blk);
    s.pos = malloc((size_t)threads * BLOCKS * sizeof *s.pos);
    if (!s.blk || !s.pos)
        ts_bench_oom("falseshare", (size_t)threads * BLOCKS * sizeof *s.pos);
    for (int t = 0; t < threads; t++) {
        s.blk[t] = malloc(BLOCKS * sizeof(uint64_t *));
        if (!s.blk[t])
            ts_bench_oom("falseshare", BLOCKS * sizeof(uint64_t *));
    }

    double el = ts_bench_run(threads, secs, work, &s, w);

    char extra[96];
    snprintf(extra, sizeof extra, "shared=%.1f%% rounds=%llu",
             s.blocks_seen ? 100.0 * (double)s.blocks_shared / (double)s.blocks_seen : 0.0,
             (unsigned long long)s.rounds);
    ts_bench_report("falseshare", threads, el, ts_bench_sum_ops(w, threads), extra);

    for (int t = 0; t < threads; t++)
        free(s.blk[t]);
    free(s.blk);
    free(s.pos);
    pthread_barrier_destroy(&s.bar);
    return 0;
}
