/* stress_realloc - realloc chains that move blocks between threads.
 *
 * The threads form a ring: thread i receives from thread i-1 and sends to
 * thread i+1 over SPSC rings.  A chain starts with hak_malloc or
 * hak_realloc(NULL, n); every thread that receives the block checks its
 * pattern, reallocates it (hak_realloc, or hak_reallocarray) to a new size and
 * passes it on.  New sizes walk up and down: a step to a neighbouring size
 * class (+-1 byte around powers of two and quarter steps), a jump anywhere in
 * the small classes, or into large blocks (> 256 KiB) and back.  After each
 * realloc the common prefix must still hold the old pattern (realloc keeps
 * contents up to the smaller size); the block is then refilled for its new
 * address and size.  A chain ends after --chain reallocs, freed by whichever
 * thread holds it (mostly not the thread that allocated it).  At the end the
 * hakmem counters must balance.
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

static const char *prog = "stress_realloc";

typedef struct {
    ts_stress_opts c;
    int chain;    /* reallocs per chain */
    int inflight; /* chains a thread starts per drain round */
} config;

static config cfg = {
    .c = TS_STRESS_DEFAULTS(4, 2048),
    .chain = 24,
    .inflight = 4,
};

typedef struct {
    ts_worker base; /* id, thread, ops, frees, cross_frees (allocs unused) */
    uint64_t chains, reallocs, foreign, moved, large, grow, shrink, bytes;
} worker;

static ts_ring *rings; /* rings[i]: inbound to thread i */
static ts_team team;

static size_t next_size(ts_rng *r, size_t old)
{
    size_t max_large = ts_stress_max_large(&cfg.c);
    size_t limit = max_large > TS_MAX_SMALL ? max_large : TS_MAX_SMALL;
    uint64_t d = ts_rng_below(r, 64);
    if (d < 24) {
        /* a neighbouring class: factors symmetric in log (no drift), +-1 */
        static const unsigned num[] = {2, 1, 5, 4, 3, 2, 7, 4};
        static const unsigned den[] = {1, 2, 4, 5, 2, 3, 4, 7};
        unsigned k = (unsigned)ts_rng_below(r, 8);
        size_t s = old / den[k] * num[k] + old % den[k] * num[k] / den[k];
        s = s + (size_t)ts_rng_below(r, 3);
        s = s > 1 ? s - 1 : 1;
        return s > limit ? limit : s;
    }
    if (d == 24 && max_large > TS_MAX_SMALL)
        return ts_rng_size_octaves(r, TS_MAX_SMALL + 1, max_large); /* into large */
    if (d < 32)
        return ts_rng_size_boundary(r, 1, TS_MAX_SMALL);
    return ts_stress_size(r, (unsigned)cfg.c.large_pm, max_large);
}

/* Check b, reallocate it to a new size, check the kept prefix, refill. */
static void realloc_step(worker *w, ts_block *b, ts_rng *r, uint64_t tag)
{
    ts_block_check(prog, "on receipt, before realloc", b);
    size_t old_size = b->size;
    void *old_p = b->p;
    uint64_t old_seed = ts_pat_seed((uintptr_t)b->p, b->size, b->tag);
    size_t ns = next_size(r, old_size);
    void *q;
    const char *api;
    if (ts_rng_below(r, 8) == 0 && ns % 4 == 0) {
        api = "hak_reallocarray";
        q = hak_reallocarray(b->p, ns / 4, 4);
    } else {
        api = "hak_realloc";
        q = hak_realloc(b->p, ns);
    }
    ts_check_fresh(prog, api, q, ns, 0);
    size_t keep = ns < old_size ? ns : old_size;
    size_t off = ts_pat_check(q, keep, old_seed);
    if (off != (size_t)-1)
        ts_die("%s: %s(%p, %zu -> %zu) = %p by thread %u (block from thread %u) lost the "
               "contents: first bad byte at offset %zu of %zu kept",
               prog, api, old_p, old_size, ns, q, w->base.id, b->owner, off, keep);
    if (ns > old_size)
        w->grow++;
    else if (ns < old_size)
        w->shrink++;
    if (b->owner != w->base.id)
        w->foreign++;     /* realloc of a block another thread allocated */
    if (q != old_p) {
        w->moved++;
        b->owner = (uint16_t)w->base.id; /* the new block is this thread's */
    }
    if (ns > TS_MAX_SMALL)
        w->large++;
    b->p = q;
    b->size = ns;
    b->tag = tag;
    b->hops++;
    ts_block_fill(b);
    w->reallocs++;
    w->bytes += ns;
    w->base.ops++;
}

static void free_block(worker *w, ts_block *b, ts_rng *r, const char *where)
{
    ts_worker_free(prog, &w->base, b, r, where);
}

static void pass_on(worker *w, ts_block *b, ts_rng *r)
{
    unsigned to = (w->base.id + 1) % (unsigned)cfg.c.threads;
    if (!ts_ring_push(&rings[to], b))
        free_block(w, b, r, "(freed by sender, ring full)");
}

/* The end-of-run drain for ts_team_drain_to_end: every block still arriving
 * gets one last realloc and is freed (extra: the worker's tag counter). */
static unsigned drain_final(ts_worker *base, ts_rng *r, void *extra)
{
    worker *w = (worker *)base;
    uint64_t *tagc = extra;
    unsigned taken = 0;
    ts_block b;
    while (ts_ring_pop(&rings[w->base.id], &b)) {
        realloc_step(w, &b, r, ts_new_tag(tagc, w->base.id));
        free_block(w, &b, r, "(drained at the end)");
        taken++;
    }
    return taken;
}

static void *thread_main(void *arg)
{
    worker *w = arg;
    ts_rng r;
    uint64_t tagc = 0;
    ts_rng_init(&r, cfg.c.seed, w->base.id);
    size_t max_large = ts_stress_max_large(&cfg.c);
    ts_block b;

    ts_team_wait_start(&team);
    for (uint64_t it = 0;; it++) {
        if ((it & 7) == 0 && ts_team_time_up(&team))
            break;
        if (w->base.id == 0 && (it & 255) == 0)
            ts_check_mapped(prog, &cfg.c);
        unsigned work = 0;
        /* start new chains while the next thread's ring has room */
        unsigned to = (w->base.id + 1) % (unsigned)cfg.c.threads;
        for (int k = 0; k < cfg.inflight && ts_ring_used(&rings[to]) < TS_RING_CAP / 2; k++) {
            size_t size = ts_stress_size(&r, (unsigned)cfg.c.large_pm, max_large);
            memset(&b, 0, sizeof b);
            if (ts_rng_below(&r, 4) == 0) {
                b.p = hak_realloc(NULL, size);
                ts_check_fresh(prog, "hak_realloc(NULL)", b.p, size, 0);
            } else {
                b.p = hak_malloc(size);
                ts_check_fresh(prog, "hak_malloc", b.p, size, 0);
            }
            b.size = size;
            b.tag = ts_new_tag(&tagc, w->base.id);
            b.owner = (uint16_t)w->base.id;
            b.api = TS_API_MALLOC;
            ts_block_fill(&b);
            w->chains++;
            w->base.ops++;
            work++;
            pass_on(w, &b, &r);
        }
        /* continue the chains that reached us */
        for (int n = 0; n < TS_RING_CAP && ts_ring_pop(&rings[w->base.id], &b); n++) {
            work++;
            realloc_step(w, &b, &r, ts_new_tag(&tagc, w->base.id));
            if ((int)b.hops >= cfg.chain)
                free_block(w, &b, &r, "(end of chain)");
            else
                pass_on(w, &b, &r);
        }
        if (work == 0)
            ts_idle(); /* waiting for the next thread to catch up */
    }

    /* Stop starting and passing on; finish what still arrives (one last
     * realloc each, then free). */
    ts_team_drain_to_end(&team, drain_final, &w->base, &r, &tagc);
    return NULL;
}

int main(int argc, char **argv)
{
    ts_opt extra[] = {
        {"chain", TS_OPT_INT, &cfg.chain, "reallocs per chain before the block is freed"},
        {"inflight", TS_OPT_INT, &cfg.inflight, "chains started per round per thread"},
    };
    ts_stress_parse_args(argc, argv, prog, &cfg.c, extra, TS_COUNT(extra));
    if (cfg.inflight < 1) cfg.inflight = 1;
    unsigned T = (unsigned)cfg.c.threads;
    rings = ts_xcalloc(T, sizeof *rings);
    worker *w = ts_xcalloc(T, sizeof *w);

    hak_stats_t s0, s1;
    ts_worker sum;
    double secs = ts_team_run(&team, cfg.c.threads, w, sizeof *w, thread_main, cfg.c.seconds,
                              &s0, &sum);
    uint64_t chains = 0, reallocs = 0, moved = 0, large = 0, grow = 0, shrink = 0, bytes = 0,
             foreign = 0;
    for (unsigned i = 0; i < T; i++) {
        chains += w[i].chains;
        reallocs += w[i].reallocs;
        moved += w[i].moved;
        large += w[i].large;
        grow += w[i].grow;
        shrink += w[i].shrink;
        bytes += w[i].bytes;
        foreign += w[i].foreign;
    }
    if (chains != sum.frees)
        ts_fail("the test itself lost track of blocks: %" PRIu64 " chains, %" PRIu64 " freed",
                chains, sum.frees);
    ts_check_accounting(prog, &s0, &s1);

    free(rings);
    free(w);
    return ts_stress_finishf(prog, &cfg.c, secs, sum.ops,
                      "chains=%" PRIu64 " reallocs=%" PRIu64 " of_other_threads_blocks=%" PRIu64
                      " moved=%" PRIu64 " grow=%" PRIu64 " shrink=%" PRIu64 " large=%" PRIu64
                      " avg_size=%" PRIu64 " cross_thread_frees=%" PRIu64,
                      chains, reallocs, foreign, moved, grow, shrink, large,
                      reallocs ? bytes / reallocs : 0, sum.cross_frees);
}
