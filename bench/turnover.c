/* turnover.c - short-lived threads replacing blocks in a shared table.
 *
 *   turnover threads seconds
 *
 * Models a server that spawns a thread per task (or a pool that retires
 * and respawns its workers) over a shared cache of objects: 8192 slots,
 * each holding one live block.  `threads` worker threads run at a time;
 * each does 2000 replacements of random slots (take the pointer out with
 * an atomic exchange, check the block, free it, malloc a new one, write its
 * header and pattern, store it back) and exits.  The main thread joins
 * every worker that finished and creates a new one in its place, until
 * `seconds` have elapsed.  So most blocks are freed by a thread other than
 * the one that allocated it, often after that thread has exited, and the
 * allocator sees a steady stream of thread births and deaths.
 *
 * Sizes: 99% 16..1024 B skewed small (60% 16..128, 30% 129..512, 10%
 * 513..1024), 1% 1..32 KiB.  A slot found empty (another worker is
 * replacing that block) is skipped and another slot is drawn.  The table is
 * filled before the clock starts and freed (and checked) at the end.
 *
 * ops = mallocs + frees (a replacement counts 2).  Prints one RESULT line
 * (see tests/support/bench.h) with the extra threads_created=N (workers started,
 * including the first `threads`).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/bench.h"
#include "support/clock.h"
#include "support/rng.h"

#define NSLOTS 8192
#define ROUNDS 2000
#define MAGIC 0x7475726Eu

typedef struct {
    uint32_t magic;
    uint32_t size;
    uint32_t slot;
    uint32_t gen;             /* writer's serial number and round, mixed */
} hdr;

typedef struct lane lane;

typedef struct {
    _Atomic(hdr *) slot[NSLOTS];
    atomic_bool stop;
    atomic_ullong bad;
    pthread_mutex_t m;
    pthread_cond_t done;      /* a worker finished (CLOCK_MONOTONIC) */
    int ndone;                /* protected by m */
} shared_state;

struct lane {
    shared_state *s;
    pthread_t tid;
    uint64_t serial;          /* which worker this is (0, 1, 2, ...) */
    bool running;             /* main only */
    bool finished;            /* protected by s->m */
    uint64_t ops;             /* summed over the lane's workers, under s->m */
    uint64_t skipped;
};

static inline size_t pick_size(ts_xs *r)
{
    uint32_t c = ts_xs_below(r, 1000);
    if (c < 10)
        return 1025 + ts_xs_below(r, 32768 - 1025 + 1);   /* 1% 1..32 KiB */
    if (c < 604)
        return 16 + ts_xs_below(r, 128 - 16 + 1);
    if (c < 901)
        return 129 + ts_xs_below(r, 512 - 129 + 1);
    return 513 + ts_xs_below(r, 1024 - 513 + 1);
}

static inline unsigned char tail_byte(const hdr *h)
{
    return (unsigned char)(h->gen ^ (h->gen >> 8) ^ h->slot ^ 0x5A);
}

static hdr *make_block(ts_xs *r, uint32_t slot, uint32_t gen)
{
    size_t size = pick_size(r);
    hdr *h = malloc(size);
    if (!h)
        ts_bench_oom("turnover", size);
    h->magic = MAGIC;
    h->size = (uint32_t)size;
    h->slot = slot;
    h->gen = gen;
    unsigned char *p = (unsigned char *)h;
    if (size > sizeof(hdr) + 1)
        p[sizeof(hdr)] = (unsigned char)~tail_byte(h);
    if (size > sizeof(hdr))
        p[size - 1] = tail_byte(h);
    return h;
}

static bool block_ok(const hdr *h, uint32_t slot)
{
    if (h->magic != MAGIC || h->slot != slot || h->size < 16 || h->size > 32768)
        return false;
    const unsigned char *p = (const unsigned char *)h;
    if (h->size > sizeof(hdr) + 1 && p[sizeof(hdr)] != (unsigned char)~tail_byte(h))
        return false;
    return h->size == sizeof(hdr) || p[h->size - 1] == tail_byte(h);
}

static void *worker(void *arg)
{
    lane *l = arg;
    shared_state *s = l->s;
    ts_xs r;
    ts_xs_seed(&r, 0x9E3779B97F4A7C15ULL * (l->serial + 1) + 7);
    uint64_t ops = 0, bad = 0, skipped = 0;
    uint32_t gen_base = (uint32_t)(l->serial * 0x10001u);
    for (uint32_t done = 0; done < ROUNDS;) {
        if ((done & 63) == 0 && atomic_load_explicit(&s->stop, memory_order_relaxed))
            break;
        uint32_t i = ts_xs_below(&r, NSLOTS);
        /* acquire: the block's contents, written before the release store
         * of whoever put it there, are visible */
        hdr *old = atomic_exchange_explicit(&s->slot[i], NULL, memory_order_acquire);
        if (!old) {
            skipped++;        /* another worker is replacing this one */
            continue;
        }
        if (!block_ok(old, i))
            bad++;
        free(old);
        hdr *nb = make_block(&r, i, gen_base + done);
        atomic_store_explicit(&s->slot[i], nb, memory_order_release);
        ops += 2;
        done++;
    }
    if (bad)
        atomic_fetch_add(&s->bad, bad);
    pthread_mutex_lock(&s->m);
    l->ops += ops;
    l->skipped += skipped;
    l->finished = true;
    s->ndone++;
    pthread_cond_signal(&s->done);
    pthread_mutex_unlock(&s->m);
    return NULL;
}

static void start_worker(lane *l, uint64_t serial)
{
    l->serial = serial;
    l->finished = false;
    int rc = pthread_create(&l->tid, NULL, worker, l);
    if (rc != 0) {
        fprintf(stderr, "turnover: pthread_create: %s\n", strerror(rc));
        exit(1);
    }
    l->running = true;
}

int main(int argc, char **argv)
{
    int threads;
    double secs;
    ts_bench_args(argc, argv,
                     "short-lived threads replacing blocks in a shared table of 8192 slots",
                     &threads, &secs);

    static shared_state s;
    static lane lanes[TS_BENCH_MAX_THREADS];
    atomic_init(&s.stop, false);
    atomic_init(&s.bad, 0);
    pthread_mutex_init(&s.m, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s.done, &ca);
    pthread_condattr_destroy(&ca);
    s.ndone = 0;

    ts_xs r;
    ts_xs_seed(&r, 4141);
    for (uint32_t i = 0; i < NSLOTS; i++)
        atomic_init(&s.slot[i], make_block(&r, i, 0xFFFFFFFFu - i));

    uint64_t created = 0;
    double t0 = ts_now();
    double deadline = t0 + secs;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += (time_t)secs;
    dl.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }

    for (int k = 0; k < threads; k++) {
        lanes[k].s = &s;
        lanes[k].ops = lanes[k].skipped = 0;
        start_worker(&lanes[k], created++);
    }
    for (;;) {
        pthread_mutex_lock(&s.m);
        while (s.ndone == 0 && ts_now() < deadline)
            pthread_cond_timedwait(&s.done, &s.m, &dl);
        int fin[TS_BENCH_MAX_THREADS], nfin = 0;
        for (int k = 0; k < threads; k++)
            if (lanes[k].running && lanes[k].finished)
                fin[nfin++] = k;
        s.ndone = 0;
        pthread_mutex_unlock(&s.m);
        bool over = ts_now() >= deadline;
        for (int j = 0; j < nfin; j++) {
            pthread_join(lanes[fin[j]].tid, NULL);
            lanes[fin[j]].running = false;
            if (!over)
                start_worker(&lanes[fin[j]], created++);
        }
        if (over)
            break;
    }
    atomic_store_explicit(&s.stop, true, memory_order_relaxed);
    for (int k = 0; k < threads; k++)
        if (lanes[k].running)
            pthread_join(lanes[k].tid, NULL);
    double el = ts_now() - t0;

    uint64_t ops = 0, skipped = 0;
    for (int k = 0; k < threads; k++) {
        ops += lanes[k].ops;
        skipped += lanes[k].skipped;
    }
    unsigned long long bad = atomic_load(&s.bad);
    for (uint32_t i = 0; i < NSLOTS; i++) {
        hdr *h = atomic_load(&s.slot[i]);
        if (!h || !block_ok(h, i))
            bad++;
        free(h);
    }
    pthread_mutex_destroy(&s.m);
    pthread_cond_destroy(&s.done);

    char extra[80];
    snprintf(extra, sizeof extra, "threads_created=%llu skipped=%llu",
             (unsigned long long)created, (unsigned long long)skipped);
    ts_bench_report("turnover", threads, el, ops, extra);
    if (bad) {
        fprintf(stderr, "turnover: %llu blocks had a corrupted header or pattern\n", bad);
        return 3;
    }
    return 0;
}
