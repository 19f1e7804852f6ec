/* stress_larson - larson-style handoff of live blocks to successor threads.
 *
 * There are --threads slots; each slot has an array of --blocks live blocks.
 * The main thread fills the arrays, then starts one thread per slot.  A slot
 * thread runs --iters iterations, each picking a random array entry and
 * either freeing it and allocating a replacement, or reallocating it to a new
 * size (contents checked to survive the move).  Then it starts its successor,
 * hands it the array and exits; the successor joins it (so the predecessor's
 * heap is abandoned, with live blocks in it, before the successor touches
 * them) and carries on.  With --late-join, as in the published larson, the
 * successor starts on the array at once and joins its predecessor only when
 * its own iterations are done: its first frees race with the predecessor's
 * exit (its heap's parking or abandonment) instead of following it.  So most frees are of blocks whose owning thread has
 * exited: they must go back to abandoned or adopted slabs, and the memory
 * must come back (the run fails if hakmem maps more than --max-mapped-mib).
 *
 * After --seconds the last thread of each chain reports in; the main thread
 * joins it, frees all remaining blocks (allocated by dead threads) and checks
 * that the hakmem counters balance.
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

static const char *prog = "stress_larson";

typedef struct {
    ts_stress_opts c;
    int blocks;
    int iters;
    int realloc_pm;
    int late_join;
} config;

static config cfg = {
    .c = TS_STRESS_DEFAULTS(1, 2048),
    .blocks = 500,
    .iters = 4000,
    .realloc_pm = 125,
};

typedef struct {
    ts_block *arr;
    /* Written only by the slot's current thread; ordered between successive
     * threads by pthread_create / pthread_join, read by main after joining. */
    uint64_t ops, allocs, frees, reallocs, generations, large;
    pthread_t last; /* the chain's last thread, for main to join */
} slot_t;

typedef struct {
    unsigned slot;
    uint64_t gen;
    bool has_prev;
    pthread_t prev; /* predecessor, joined by this thread before it starts */
} gen_t;

static slot_t *slots;
static double deadline;
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static unsigned chains_done;

/* Reallocate b to a new size; the common prefix must survive. */
static void realloc_block(ts_block *b, ts_rng *r, uint64_t tag, unsigned owner)
{
    size_t old_size = b->size;
    uint64_t old_seed = ts_pat_seed((uintptr_t)b->p, b->size, b->tag);
    ts_block_check(prog, "before realloc", b);
    size_t ns = ts_stress_size(r, (unsigned)cfg.c.large_pm, ts_stress_max_large(&cfg.c));
    void *q = hak_realloc(b->p, ns);
    ts_check_fresh(prog, "hak_realloc", q, ns, 0);
    size_t keep = ns < old_size ? ns : old_size;
    size_t off = ts_pat_check(q, keep, old_seed);
    if (off != (size_t)-1)
        ts_die("%s: hak_realloc(%p, %zu -> %zu) = %p lost the contents: first bad byte at "
               "offset %zu of %zu kept", prog, b->p, old_size, ns, q, off, keep);
    b->p = q;
    b->size = ns;
    b->tag = tag;
    b->owner = (uint16_t)owner;
    b->api = TS_API_MALLOC;
    b->hops++;
    ts_block_fill(b);
}

static void *chain_thread(void *arg);

static void spawn(unsigned slot, uint64_t gen, bool has_prev, pthread_t prev)
{
    gen_t *g = ts_xcalloc(1, sizeof *g);
    g->slot = slot;
    g->gen = gen;
    g->has_prev = has_prev;
    g->prev = prev;
    pthread_t t;
    ts_thread_create(&t, chain_thread, g);
}

static void join_prev(const gen_t *g)
{
    int e = pthread_join(g->prev, NULL);
    if (e)
        ts_die("%s: pthread_join of predecessor: %s", prog, strerror(e));
}

static void *chain_thread(void *arg)
{
    gen_t g = *(gen_t *)arg;
    free(arg);
    if (g.has_prev && !cfg.late_join)
        join_prev(&g);
    slot_t *s = &slots[g.slot];
    unsigned owner = g.slot + 1;
    ts_rng r;
    uint64_t tagc = 0;
    ts_rng_init(&r, cfg.c.seed, ((uint64_t)g.slot << 40) ^ g.gen);
    size_t max_large = ts_stress_max_large(&cfg.c);
    s->generations++;

    for (int it = 0; it < cfg.iters && !ts_has_failed(); it++) {
        ts_block *b = &s->arr[ts_rng_below(&r, (uint64_t)cfg.blocks)];
        uint64_t tag = ts_new_tag(&tagc, owner) ^ (g.gen << 20);
        if (ts_rng_permille(&r, (unsigned)cfg.realloc_pm)) {
            realloc_block(b, &r, tag, owner);
            s->reallocs++;
            s->ops++;
        } else {
            ts_check_free(prog, "(freed by a later thread)", b, &r);
            s->frees++;
            size_t size = ts_stress_size(&r, (unsigned)cfg.c.large_pm, max_large);
            ts_alloc_fill(prog, b, size, tag, owner, &r);
            s->allocs++;
            if (size > TS_MAX_SMALL)
                s->large++;
            s->ops += 2;
        }
        if (g.slot == 0 && (it & 1023) == 0)
            ts_check_mapped(prog, &cfg.c);
    }

    if (g.has_prev && cfg.late_join)
        join_prev(&g);
    if (ts_now() < deadline && !ts_has_failed()) {
        spawn(g.slot, g.gen + 1, true, pthread_self());
    } else {
        s->last = pthread_self();
        pthread_mutex_lock(&done_mu);
        chains_done++;
        pthread_cond_signal(&done_cv);
        pthread_mutex_unlock(&done_mu);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    ts_opt extra[] = {
        {"blocks", TS_OPT_INT, &cfg.blocks, "live blocks per slot"},
        {"iters", TS_OPT_INT, &cfg.iters, "iterations per thread before it hands over"},
        {"realloc-permille", TS_OPT_INT, &cfg.realloc_pm, "iterations that realloc"},
        {"late-join", TS_OPT_INT, &cfg.late_join, "1: a successor joins its predecessor after its own iterations"},
    };
    ts_stress_parse_args(argc, argv, prog, &cfg.c, extra, TS_COUNT(extra));
    if (cfg.blocks < 1) cfg.blocks = 1;
    unsigned T = (unsigned)cfg.c.threads;
    slots = ts_xcalloc(T, sizeof *slots);

    hak_stats_t s0, s1;
    ts_accounting_begin(&s0);
    ts_rng r;
    uint64_t tagc = 0, ops = 0;
    ts_rng_init(&r, cfg.c.seed, 0xFFFFFFFFull);
    for (unsigned i = 0; i < T; i++) {
        slots[i].arr = ts_xcalloc((size_t)cfg.blocks, sizeof(ts_block));
        for (int k = 0; k < cfg.blocks; k++)
            ts_alloc_fill(prog, &slots[i].arr[k],
                          ts_stress_size(&r, (unsigned)cfg.c.large_pm, ts_stress_max_large(&cfg.c)),
                          ts_new_tag(&tagc, 0), 0, &r);
        ops += (uint64_t)cfg.blocks;
    }
    double t0 = ts_now();
    deadline = t0 + cfg.c.seconds;
    for (unsigned i = 0; i < T; i++)
        spawn(i, 0, false, pthread_self());

    pthread_mutex_lock(&done_mu);
    while (chains_done < T)
        pthread_cond_wait(&done_cv, &done_mu);
    pthread_mutex_unlock(&done_mu);
    for (unsigned i = 0; i < T; i++)
        pthread_join(slots[i].last, NULL);
    double secs = ts_now() - t0;

    /* Everything left was allocated by threads that have exited. */
    uint64_t allocs = (uint64_t)cfg.blocks * T, frees = 0, reallocs = 0, gens = 0, large = 0;
    for (unsigned i = 0; i < T; i++) {
        for (int k = 0; k < cfg.blocks; k++) {
            ts_check_free(prog, "(final free by main)", &slots[i].arr[k], &r);
            frees++;
        }
        ops += slots[i].ops + (uint64_t)cfg.blocks;
        allocs += slots[i].allocs;
        frees += slots[i].frees;
        reallocs += slots[i].reallocs;
        gens += slots[i].generations;
        large += slots[i].large;
        free(slots[i].arr);
    }
    ts_check_test_balance(allocs, frees);
    ts_check_accounting(prog, &s0, &s1);
    ts_check_counted_allocs(&s0, &s1, allocs, "at least ");
    if (gens > 0 && s1.heaps_abandoned == s0.heaps_abandoned)
        ts_fail("%" PRIu64 " threads exited holding live blocks, but hakmem counted no "
                "abandoned heap", gens);

    free(slots);
    return ts_stress_finishf(prog, &cfg.c, secs, ops,
                      "threads_spawned=%" PRIu64 " allocs=%" PRIu64 " reallocs=%" PRIu64
                      " large=%" PRIu64, gens, allocs, reallocs, large);
}
