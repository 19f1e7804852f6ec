/* stress_prodcons - producer-consumer rings over hakmem.
 *
 * Every thread is both producer and consumer.  Thread i owns one SPSC ring to
 * every other thread j (ring[i][j]).  In its loop it
 *   - allocates blocks (sizes across all classes, large blocks rarely, malloc
 *     or calloc), fills each with its pattern and sends it to a random other
 *     thread, which checks and frees it: a remote free;
 *   - keeps a small private set of blocks it replaces at random: local frees,
 *     and, when the replaced block came from another thread, remote frees of a
 *     block that stayed live for a while;
 *   - forwards some received blocks to a third thread (two hops), so a block
 *     is freed by a thread that is neither its allocator nor its first
 *     receiver.
 * Every block is pattern-checked before it is freed or forwarded.  After the
 * timed phase each thread stops producing, announces it, and drains its
 * inbound rings until every producer has announced and the rings are empty.
 * Then the hakmem counters must balance (allocs == frees, live_bytes back).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/clock.h"
#include "support/hak.h"
#include "support/report.h"

static const char *prog = "stress_prodcons";

typedef struct {
    ts_stress_opts c;
    int keep;       /* private blocks per thread */
    int send_pm;    /* per mille of allocations sent to another thread */
    int forward_pm; /* per mille of received blocks forwarded again */
} config;

typedef struct {
    ts_worker base; /* id, thread, ops, allocs, frees, cross_frees */
    uint64_t sent, forwarded, ring_full, large;
} worker;

static config cfg = {
    .c = TS_STRESS_DEFAULTS(1, 4096),
    .keep = 256,
    .send_pm = 600,
    .forward_pm = 150,
};
static ts_ring *rings;          /* rings[from * T + to] */
static ts_team team;

static inline ts_ring *ring(unsigned from, unsigned to)
{
    return &rings[(size_t)from * (unsigned)cfg.c.threads + to];
}

static void free_block(worker *w, ts_block *b, ts_rng *r, const char *where)
{
    ts_worker_free(prog, &w->base, b, r, where);
}

static unsigned drain(worker *w, ts_block *keep, ts_rng *r, bool producing);

/* Try to send `b` to another thread; on a full ring, free it here. */
static void send_or_free(worker *w, ts_block *b, ts_rng *r, unsigned not_to)
{
    unsigned T = (unsigned)cfg.c.threads;
    if (T > 1) {
        unsigned to;
        do
            to = (unsigned)ts_rng_below(r, T);
        while (to == w->base.id || (to == not_to && T > 2));
        b->hops++;
        /* A full ring: take what others sent us (so two threads sending to
         * each other cannot wait on each other), let the receiver run, and
         * try again a few times before freeing the block here. */
        for (int attempt = 0; attempt < 4; attempt++) {
            if (ts_ring_push(ring(w->base.id, to), b))
                return;
            if (drain(w, NULL, r, false) == 0) /* frees only: keep set unused */
                ts_idle();
        }
        b->hops--;
        w->ring_full++;
    }
    free_block(w, b, r, "(freed by sender, ring full)");
}

/* Take what others sent; free it, keep it, or forward it.  Returns the
 * number of blocks taken. */
static unsigned drain(worker *w, ts_block *keep, ts_rng *r, bool producing)
{
    unsigned T = (unsigned)cfg.c.threads, taken = 0;
    ts_block b;
    for (unsigned from = 0; from < T; from++) {
        if (from == w->base.id)
            continue;
        int n = 0;
        while (n++ < TS_RING_CAP && ts_ring_pop(ring(from, w->base.id), &b)) {
            taken++;
            ts_block_check(prog, "on receipt", &b);
            if (producing && b.hops < 2 && ts_rng_permille(r, (unsigned)cfg.forward_pm)) {
                send_or_free(w, &b, r, from);
                w->forwarded++;
            } else if (producing && ts_rng_below(r, 8) == 0) {
                /* keep it for a while: freed later, after more traffic */
                ts_keep_put(prog, &w->base, keep, cfg.keep, &b, r);
            } else {
                free_block(w, &b, r, "(freed by receiver)");
            }
        }
    }
    return taken;
}

/* drain() for ts_team_drain_to_end: frees only, the keep set is unused. */
static unsigned drain_final(ts_worker *w, ts_rng *r, void *unused)
{
    (void)unused;
    return drain((worker *)w, NULL, r, false);
}

static void *thread_main(void *arg)
{
    worker *w = arg;
    ts_rng r;
    uint64_t tagc = 0;
    ts_rng_init(&r, cfg.c.seed, w->base.id);
    ts_block *keep = ts_xcalloc((size_t)cfg.keep, sizeof *keep);
    size_t max_large = ts_stress_max_large(&cfg.c);

    ts_team_wait_start(&team);
    for (uint64_t it = 0;; it++) {
        if ((it & 63) == 0) {
            if (ts_team_time_up(&team))
                break;
            if (w->base.id == 0 && (it & 4095) == 0)
                ts_check_mapped(prog, &cfg.c);
        }
        ts_block b;
        size_t size = ts_stress_size(&r, (unsigned)cfg.c.large_pm, max_large);
        ts_alloc_fill(prog, &b, size, ts_new_tag(&tagc, w->base.id), w->base.id, &r);
        w->base.allocs++;
        w->base.ops++;
        if (size > TS_MAX_SMALL)
            w->large++;
        if (ts_rng_permille(&r, (unsigned)cfg.send_pm)) {
            w->sent++;
            send_or_free(w, &b, &r, w->base.id);
        } else {
            ts_keep_put(prog, &w->base, keep, cfg.keep, &b, &r);
        }
        if ((it & 7) == 0)
            drain(w, keep, &r, true);
    }

    /* Stop producing; drain until every producer stopped and rings are empty. */
    ts_team_drain_to_end(&team, drain_final, &w->base, &r, NULL);
    ts_keep_release(prog, &w->base, keep, cfg.keep, &r);
    return NULL;
}

int main(int argc, char **argv)
{
    ts_opt extra[] = {
        {"keep", TS_OPT_INT, &cfg.keep, "private blocks per thread"},
        {"send-permille", TS_OPT_INT, &cfg.send_pm, "allocations sent to another thread"},
        {"forward-permille", TS_OPT_INT, &cfg.forward_pm, "received blocks forwarded again"},
    };
    ts_stress_parse_args(argc, argv, prog, &cfg.c, extra, TS_COUNT(extra));
    if (cfg.keep < 1) cfg.keep = 1;
    unsigned T = (unsigned)cfg.c.threads;
    rings = ts_xcalloc((size_t)T * T, sizeof *rings);
    worker *w = ts_xcalloc(T, sizeof *w);

    hak_stats_t s0, s1;
    ts_worker sum;
    double secs = ts_team_run(&team, cfg.c.threads, w, sizeof *w, thread_main, cfg.c.seconds,
                              &s0, &sum);
    uint64_t sent = 0, fwd = 0, full = 0, large = 0;
    for (unsigned i = 0; i < T; i++) {
        sent += w[i].sent;
        fwd += w[i].forwarded;
        full += w[i].ring_full;
        large += w[i].large;
    }
    for (size_t i = 0; i < (size_t)T * T; i++)
        if (atomic_load(&rings[i].head) != atomic_load(&rings[i].tail))
            ts_fail("ring %zu not drained (test bug)", i);

    ts_check_test_balance(sum.allocs, sum.frees);
    ts_check_accounting(prog, &s0, &s1);
    ts_check_counted_allocs(&s0, &s1, sum.allocs, "");
    if (ts_counting() && T > 1 && sum.cross_frees > 0 && s1.remote_frees == s0.remote_frees)
        ts_fail("%" PRIu64 " blocks were freed by a thread other than their allocator, "
                "but hakmem counted no remote free", sum.cross_frees);

    free(rings);
    free(w);
    return ts_stress_finishf(prog, &cfg.c, secs, sum.ops,
                      "allocs=%" PRIu64 " cross_thread_frees=%" PRIu64 " sent=%" PRIu64
                      " forwarded=%" PRIu64 " ring_full=%" PRIu64 " large=%" PRIu64,
                      sum.allocs, sum.cross_frees, sent, fwd, full, large);
}
