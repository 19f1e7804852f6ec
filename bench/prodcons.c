/* prodcons.c - producer/consumer: every block is freed by another thread.
 *
 *   prodcons pairs seconds
 *
 * Models a pipeline (e.g. an I/O thread that builds request objects and a
 * worker thread that consumes and releases them).  The first argument is
 * the number of PAIRS: `prodcons 2 1` runs 2 producers and 2 consumers.
 * Each producer mallocs blocks of 16..1024 B (skewed to small), writes a
 * header into them and pushes them on a bounded single-producer /
 * single-consumer lock-free ring (C11 acquire/release); its consumer pops
 * them, checks the header and frees them.  So every free is a remote free.
 * When the ring is full the producer yields; when it is empty the consumer
 * yields.  At the end the consumer drains the ring, so nothing leaks.
 *
 * ops = mallocs + frees.  Prints one RESULT line (see tests/support/bench.h);
 * "threads=" in it is the number of pairs.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/bench.h"
#include "support/rng.h"

#include <sched.h>

#define RING_SIZE 1024u           /* power of two */
#define CACHELINE 64

typedef struct {
    /* producer-owned and consumer-owned indexes on their own lines */
    _Alignas(CACHELINE) atomic_size_t head;     /* next slot to write */
    _Alignas(CACHELINE) atomic_size_t tail;     /* next slot to read */
    _Alignas(CACHELINE) atomic_bool producer_done;
    _Alignas(CACHELINE) void *slot[RING_SIZE];
} ring;

typedef struct {
    ring *rings;          /* one per pair */
    atomic_ullong bad;    /* blocks with a wrong header */
} shared_state;

typedef struct {
    uint64_t magic;
    uint64_t size;
} hdr;

#define MAGIC 0x70726F64636F6E73ULL

static inline size_t pick_size(ts_xs *r)
{
    uint32_t c = ts_xs_below(r, 100);
    if (c < 70)
        return 16 + ts_xs_below(r, 113);       /* 16..128 */
    if (c < 95)
        return 129 + ts_xs_below(r, 384);      /* 129..512 */
    return 513 + ts_xs_below(r, 512);          /* 513..1024 */
}

static void producer(ts_bench_worker *w, ring *q)
{
    ts_xs r;
    ts_xs_seed(&r, w->seed);
    uint64_t ops = 0;
    size_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
    size_t tail_seen = atomic_load_explicit(&q->tail, memory_order_acquire);
    while (!ts_bench_stopped(w)) {
        for (int k = 0; k < 64; k++) {
            size_t size = pick_size(&r);
            hdr *h = malloc(size);
            if (!h)
                ts_bench_oom("prodcons", size);
            h->magic = MAGIC;
            h->size = size;
            if (size > sizeof(hdr))
                ((char *)h)[size - 1] = 0x5A;
            ops++;
            /* wait for room; re-read the consumer's index only when the
             * ring looks full.  The acquire pairs with the consumer's
             * release of `tail`: it is done with the slots we overwrite. */
            while (head - tail_seen >= RING_SIZE) {
                tail_seen = atomic_load_explicit(&q->tail, memory_order_acquire);
                if (head - tail_seen >= RING_SIZE)
                    sched_yield();
            }
            q->slot[head & (RING_SIZE - 1)] = h;
            head++;
            /* release: publishes the slot and the block's contents. */
            atomic_store_explicit(&q->head, head, memory_order_release);
        }
    }
    atomic_store_explicit(&q->producer_done, true, memory_order_release);
    w->ops = ops;
}

static void consumer(ts_bench_worker *w, ring *q, shared_state *s)
{
    uint64_t ops = 0, bad = 0;
    size_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
    for (;;) {
        size_t head = atomic_load_explicit(&q->head, memory_order_acquire);
        if (head == tail) {
            /* Empty.  Stop only once the producer is done and we have seen
             * everything it pushed: re-read head after the done flag. */
            if (atomic_load_explicit(&q->producer_done, memory_order_acquire) &&
                atomic_load_explicit(&q->head, memory_order_acquire) == tail)
                break;
            sched_yield();
            continue;
        }
        while (tail != head) {
            hdr *h = q->slot[tail & (RING_SIZE - 1)];
            if (h->magic != MAGIC || h->size < 16 || h->size > 1024 ||
                (h->size > sizeof(hdr) && ((char *)h)[h->size - 1] != 0x5A))
                bad++;
            free(h);
            ops++;
            tail++;
            /* release: we no longer read the slots before `tail`.  Publish
             * every 32 blocks and at the end of the batch. */
            if ((tail & 31) == 0 || tail == head)
                atomic_store_explicit(&q->tail, tail, memory_order_release);
        }
    }
    if (bad)
        atomic_fetch_add(&s->bad, bad);
    w->ops = ops;
}

static void work(ts_bench_worker *w)
{
    shared_state *s = w->shared;
    int pair = w->id / 2;
    /* Named, so HAKMEM_STATS=2's remote-free matrix labels its rows. */
    char name[32];
    snprintf(name, sizeof name, "%s-%d", w->id % 2 == 0 ? "producer" : "consumer", pair);
    name[15] = 0;  /* the kernel's limit */
    pthread_setname_np(pthread_self(), name);
    if (w->id % 2 == 0)
        producer(w, &s->rings[pair]);
    else
        consumer(w, &s->rings[pair], s);
}

int main(int argc, char **argv)
{
    int pairs;
    double secs;
    static ts_bench_worker w[TS_BENCH_MAX_THREADS];
    ts_bench_args(argc, argv,
                     "producer/consumer pairs; the first argument is the number of pairs",
                     &pairs, &secs);
    if (pairs * 2 > TS_BENCH_MAX_THREADS) {
        fprintf(stderr, "prodcons: at most %d pairs\n", TS_BENCH_MAX_THREADS / 2);
        return 2;
    }
    shared_state s;
    s.rings = aligned_alloc(CACHELINE, (size_t)pairs * sizeof(ring));
    if (!s.rings)
        ts_bench_oom("prodcons", (size_t)pairs * sizeof(ring));
    for (int i = 0; i < pairs; i++) {
        atomic_init(&s.rings[i].head, 0);
        atomic_init(&s.rings[i].tail, 0);
        atomic_init(&s.rings[i].producer_done, false);
    }
    atomic_init(&s.bad, 0);

    double el = ts_bench_run(pairs * 2, secs, work, &s, w);
    free(s.rings);

    unsigned long long bad = atomic_load(&s.bad);
    ts_bench_report("prodcons", pairs, el, ts_bench_sum_ops(w, pairs * 2), NULL);
    if (bad) {
        fprintf(stderr, "prodcons: %llu blocks arrived with a corrupted header\n", bad);
        return 3;
    }
    return 0;
}
