/* stress_rounds - rounds of threads of unequal work that exchange blocks.
 *
 * The shape of mimalloc's thread stress test (bench/mstress.c), with every
 * block checked.  Each round starts --threads threads and joins them.  A
 * thread's work is drawn per round: 1 to 4 times --blocks allocations, so
 * the heap a thread takes over (an exited thread's, parked whole) is often
 * smaller or larger than what it needs.  A thread keeps what it allocates
 * until its end, frees a random one of its blocks with probability 1/3
 * each step, and with probability 1/8 swaps one of its blocks with a random
 * slot of a shared table of --table blocks (under a mutex): so its blocks
 * are freed by threads of this round and of later rounds, and an exited
 * thread's SuperSlabs stay pinned by a few live blocks.  At its end a
 * thread checks and frees everything it holds.
 *
 * The behaviour under test: a thread whose heap has no free unit left
 * takes a mostly free SuperSlab of a parked heap (its slabs with live blocks
 * included) while other threads free blocks into that SuperSlab, take other
 * parked heaps or park their own.  The run reports the SuperSlabs adopted
 * (adoptions and those taken from parked heaps).  After --seconds main
 * frees the table's blocks and checks that the hakmem counters balance.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/clock.h"
#include "support/hak.h"
#include "support/report.h"

static const char *prog = "stress_rounds";

/* Under TSan an allocation with its pattern costs some twenty times more;
 * smaller rounds keep several rounds in a run. */
#if defined(HAKMEM_TSAN)
#define DEFAULT_BLOCKS 1500
#else
#define DEFAULT_BLOCKS 6000
#endif

typedef struct {
    ts_stress_opts c;
    int blocks; /* allocations of a thread with the least work */
    int table;  /* slots of the shared table */
} config;

static config cfg = {
    .c = TS_STRESS_DEFAULTS(0, 1024),
    .blocks = DEFAULT_BLOCKS,
    .table = 1000,
};

/* The shared table: every slot under table_mu (the pattern written before
 * a swap is read after the next one). */
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static ts_block *table;

typedef struct {
    unsigned id;   /* 1 .. threads (0: main) */
    uint64_t round, seed;
    int work;      /* allocations this round */
    /* Written by the thread, read by main after the join. */
    uint64_t allocs, frees, swaps, ops;
} job_t;

static void swap_with_table(ts_block *b, ts_rng *r)
{
    size_t k = (size_t)ts_rng_below(r, (uint64_t)cfg.table);
    pthread_mutex_lock(&table_mu);
    ts_block t = table[k];
    table[k] = *b;
    *b = t;
    pthread_mutex_unlock(&table_mu);
}

static void *round_thread(void *arg)
{
    job_t *j = arg;
    ts_rng r;
    uint64_t tagc = 0;
    ts_rng_init(&r, j->seed, ((uint64_t)j->id << 40) ^ j->round);
    size_t max_large = ts_stress_max_large(&cfg.c);
    ts_block *mine = ts_xcalloc((size_t)j->work, sizeof *mine);
    size_t n = 0;
    for (int i = 0; i < j->work && !ts_has_failed(); i++) {
        size_t size = ts_stress_size(&r, (unsigned)cfg.c.large_pm, max_large);
        ts_alloc_fill(prog, &mine[n++], size, ts_new_tag(&tagc, j->id), j->id, &r);
        j->allocs++;
        j->ops++;
        if (ts_rng_permille(&r, 333)) {
            ts_block *b = &mine[ts_rng_below(&r, (uint64_t)n)];
            if (b->p != NULL) {
                ts_check_free(prog, "(freed by its thread)", b, &r);
                j->frees++;
                j->ops++;
            }
        }
        if (ts_rng_permille(&r, 125)) {
            swap_with_table(&mine[ts_rng_below(&r, (uint64_t)n)], &r);
            j->swaps++;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (mine[i].p != NULL) {
            ts_check_free(prog, "(freed at its thread's end)", &mine[i], &r);
            j->frees++;
            j->ops++;
        }
    free(mine);
    return NULL;
}

int main(int argc, char **argv)
{
    ts_opt extra[] = {
        {"blocks", TS_OPT_INT, &cfg.blocks, "allocations of the thread with the least work"},
        {"table", TS_OPT_INT, &cfg.table, "slots of the shared table"},
    };
    ts_stress_parse_args(argc, argv, prog, &cfg.c, extra, TS_COUNT(extra));
    if (cfg.blocks < 1) cfg.blocks = 1;
    if (cfg.table < 1) cfg.table = 1;
    unsigned T = (unsigned)cfg.c.threads;
    table = ts_xcalloc((size_t)cfg.table, sizeof *table);
    job_t *jobs = ts_xcalloc(T, sizeof *jobs);
    pthread_t *threads = ts_xcalloc(T, sizeof *threads);

    hak_stats_t s0, s1;
    ts_accounting_begin(&s0);
    ts_rng r;
    ts_rng_init(&r, cfg.c.seed, 0xFFFFFFFFull);
    uint64_t allocs = 0, frees = 0, swaps = 0, ops = 0, rounds = 0;
    double t0 = ts_now();
    while ((rounds == 0 || ts_now() - t0 < cfg.c.seconds) && !ts_has_failed()) {
        for (unsigned i = 0; i < T; i++) {
            jobs[i] = (job_t){.id = i + 1, .round = rounds, .seed = cfg.c.seed,
                              .work = cfg.blocks * (int)(1 + ts_rng_below(&r, 4))};
            ts_thread_create(&threads[i], round_thread, &jobs[i]);
        }
        for (unsigned i = 0; i < T; i++) {
            pthread_join(threads[i], NULL);
            allocs += jobs[i].allocs;
            frees += jobs[i].frees;
            swaps += jobs[i].swaps;
            ops += jobs[i].ops;
        }
        rounds++;
        if ((rounds & 7) == 0)
            ts_check_mapped(prog, &cfg.c);
    }
    double secs = ts_now() - t0;

    /* The table's blocks: allocated by threads that have exited. */
    for (int k = 0; k < cfg.table; k++)
        if (table[k].p != NULL) {
            ts_check_free(prog, "(final free by main)", &table[k], &r);
            frees++;
        }
    ts_check_test_balance(allocs, frees);
    ts_check_accounting(prog, &s0, &s1);
    ts_check_counted_allocs(&s0, &s1, allocs, "");
    free(table);
    free(jobs);
    free(threads);
    return ts_stress_finishf(prog, &cfg.c, secs, ops,
                             "rounds=%" PRIu64 " allocs=%" PRIu64 " swaps=%" PRIu64
                             " superslabs_adopted=%" PRIu64,
                             rounds, allocs, swaps, s1.superslabs_adopted - s0.superslabs_adopted);
}
