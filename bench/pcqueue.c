/* pcqueue.c - batches of blocks through one shared, locked work queue.
 *
 *   pcqueue pairs seconds
 *
 * Models a thread pool fed through a single mutex + condition-variable work
 * queue (the classic pthread job queue): N producer threads allocate
 * 64-byte message objects in batches of 64, write a header into each and
 * push every full batch on ONE bounded FIFO (256 batches) shared by all
 * threads; N consumer threads pop batches, check each block's header and
 * free it.  The first argument is N, the number of producer/consumer PAIRS:
 * `pcqueue 2 1` runs 2 producers and 2 consumers.
 *
 * Every free is a remote free, and consumers never allocate: the batch
 * containers (a fixed array of 64 pointers inside a struct) are allocated
 * before the timed phase and recycled through a second, free-batch queue,
 * so the consumers' only allocator calls are free().  Producers stop after
 * `seconds`; consumers then drain the queue, so nothing leaks.
 *
 * ops = frees (one per block, i.e. per message), not mallocs + frees.
 * Prints one RESULT line (see tests/support/bench.h); "threads=" in it is the number
 * of pairs.  Extra: batches=N (batches passed through the queue).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/bench.h"

#define BATCH 64              /* blocks per batch */
#define QCAP 256              /* capacity of the shared work queue, in batches */
#define BLOCK_SIZE 64
#define MAGIC 0x7063717565756521ULL

typedef struct {
    uint64_t magic;
    uint32_t producer;
    uint32_t idx;             /* position in its batch */
    uint64_t seq;             /* producer's running block number */
    uint64_t check;           /* function of the fields above */
    uint64_t pad[4];          /* pattern derived from seq */
} msg;

_Static_assert(sizeof(msg) == BLOCK_SIZE, "msg must fill the 64-byte block");

typedef struct {
    uint32_t n;
    uint32_t producer;
    void *blk[BATCH];
} batch;

/* bounded FIFO of batch pointers under one mutex */
typedef struct {
    pthread_mutex_t m;
    pthread_cond_t not_empty, not_full;
    batch **ring;
    size_t cap, head, count;
} bqueue;

typedef struct {
    bqueue work;              /* full batches: producers -> consumers */
    bqueue spare;             /* empty batch containers: consumers -> producers */
    int producers_left;       /* protected by work.m */
    int pairs;
    atomic_ullong bad;
    atomic_ullong batches;
} shared_state;

static inline uint64_t check_of(uint64_t seq, uint32_t producer, uint32_t idx)
{
    return (MAGIC ^ (seq * 0x9E3779B97F4A7C15ULL)) + ((uint64_t)producer << 32) + idx;
}

static void q_init(bqueue *q, size_t cap)
{
    pthread_mutex_init(&q->m, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    q->ring = malloc(cap * sizeof *q->ring);
    if (!q->ring)
        ts_bench_oom("pcqueue", cap * sizeof *q->ring);
    q->cap = cap;
    q->head = q->count = 0;
}

static void q_destroy(bqueue *q)
{
    free(q->ring);
    pthread_mutex_destroy(&q->m);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
}

/* Blocks while the queue is full. */
static void q_push(bqueue *q, batch *b)
{
    pthread_mutex_lock(&q->m);
    while (q->count == q->cap)
        pthread_cond_wait(&q->not_full, &q->m);
    q->ring[(q->head + q->count) % q->cap] = b;
    q->count++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->m);
}

/* Blocks while the queue is empty.  With `left` set, returns NULL once the
 * queue is empty and *left (protected by q->m) has dropped to 0. */
static batch *q_pop(bqueue *q, const int *left)
{
    pthread_mutex_lock(&q->m);
    while (q->count == 0 && (!left || *left > 0))
        pthread_cond_wait(&q->not_empty, &q->m);
    batch *b = NULL;
    if (q->count > 0) {
        b = q->ring[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        pthread_cond_signal(&q->not_full);
    }
    pthread_mutex_unlock(&q->m);
    return b;
}

static void producer(ts_bench_worker *w, shared_state *s)
{
    uint32_t me = (uint32_t)w->id;
    uint64_t seq = 0;
    while (!ts_bench_stopped(w)) {
        batch *b = q_pop(&s->spare, NULL);
        b->producer = me;
        b->n = BATCH;
        for (uint32_t k = 0; k < BATCH; k++) {
            msg *m = malloc(BLOCK_SIZE);
            if (!m)
                ts_bench_oom("pcqueue", BLOCK_SIZE);
            m->magic = MAGIC;
            m->producer = me;
            m->idx = k;
            m->seq = seq;
            m->check = check_of(seq, me, k);
            for (int i = 0; i < 4; i++)
                m->pad[i] = seq ^ ((uint64_t)(i + 1) * 0x0101010101010101ULL);
            b->blk[k] = m;
            seq++;
        }
        q_push(&s->work, b);
    }
    pthread_mutex_lock(&s->work.m);
    s->producers_left--;
    pthread_cond_broadcast(&s->work.not_empty);
    pthread_mutex_unlock(&s->work.m);
    w->ops = 0;           /* ops counts frees only */
    w->extra = seq;       /* mallocs */
}

static void consumer(ts_bench_worker *w, shared_state *s)
{
    uint64_t frees = 0, bad = 0, batches = 0;
    batch *b;
    while ((b = q_pop(&s->work, &s->producers_left)) != NULL) {
        for (uint32_t k = 0; k < b->n; k++) {
            msg *m = b->blk[k];
            bool ok = m->magic == MAGIC && m->producer == b->producer && m->idx == k &&
                      m->check == check_of(m->seq, m->producer, k);
            for (int i = 0; ok && i < 4; i++)
                ok = m->pad[i] == (m->seq ^ ((uint64_t)(i + 1) * 0x0101010101010101ULL));
            if (!ok)
                bad++;
            free(m);
            frees++;
        }
        batches++;
        b->n = 0;
        q_push(&s->spare, b);
    }
    if (bad)
        atomic_fetch_add(&s->bad, bad);
    atomic_fetch_add(&s->batches, batches);
    w->ops = frees;
    w->extra = 0;
}

static void work(ts_bench_worker *w)
{
    shared_state *s = w->shared;
    if (w->id < s->pairs)
        producer(w, s);
    else
        consumer(w, s);
}

int main(int argc, char **argv)
{
    int pairs;
    double secs;
    static ts_bench_worker w[TS_BENCH_MAX_THREADS];
    ts_bench_args(argc, argv,
                     "N producers and N consumers sharing one locked queue of 64-block batches; "
                     "the first argument is N",
                     &pairs, &secs);
    if (pairs * 2 > TS_BENCH_MAX_THREADS) {
        fprintf(stderr, "pcqueue: at most %d pairs\n", TS_BENCH_MAX_THREADS / 2);
        return 2;
    }

    /* Enough containers that the spare queue never runs dry for good: the
     * work queue holds at most QCAP, each thread holds at most one. */
    size_t nbatch = QCAP + 2 * (size_t)pairs + 2;
    static shared_state s;
    q_init(&s.work, QCAP);
    q_init(&s.spare, nbatch);
    s.producers_left = pairs;
    s.pairs = pairs;
    atomic_init(&s.bad, 0);
    atomic_init(&s.batches, 0);
    batch *pool = malloc(nbatch * sizeof *pool);
    if (!pool)
        ts_bench_oom("pcqueue", nbatch * sizeof *pool);
    for (size_t i = 0; i < nbatch; i++) {
        pool[i].n = 0;
        q_push(&s.spare, &pool[i]);
    }

    double el = ts_bench_run(pairs * 2, secs, work, &s, w);

    uint64_t mallocs = 0, frees = ts_bench_sum_ops(w, pairs * 2);
    for (int i = 0; i < pairs; i++)
        mallocs += w[i].extra;
    bool drained = s.work.count == 0 && s.spare.count == nbatch;
    free(pool);
    q_destroy(&s.work);
    q_destroy(&s.spare);

    char extra[64];
    snprintf(extra, sizeof extra, "batches=%llu",
             (unsigned long long)atomic_load(&s.batches));
    ts_bench_report("pcqueue", pairs, el, frees, extra);

    unsigned long long bad = atomic_load(&s.bad);
    if (bad) {
        fprintf(stderr, "pcqueue: %llu blocks arrived with a corrupted header\n", bad);
        return 3;
    }
    if (mallocs != frees || !drained) {
        fprintf(stderr, "pcqueue: %llu mallocs but %llu frees (queue not drained)\n",
                (unsigned long long)mallocs, (unsigned long long)frees);
        return 3;
    }
    return 0;
}
