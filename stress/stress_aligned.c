/* stress_aligned - aligned allocations of every alignment, freed elsewhere.
 *
 * Each thread allocates blocks with every power-of-two alignment from 8 bytes
 * to 2 MiB (--max-align-kib), through hak_posix_memalign, hak_aligned_alloc
 * (sizes that are and are not multiples of the alignment), hak_memalign,
 * hak_valloc and hak_pvalloc.  Every block is checked aligned (and its usable
 * size checked), filled with its pattern and sent to a random other thread,
 * which checks alignment and pattern again and frees it (hak_free, or
 * hak_free_aligned_sized for aligned_alloc blocks).  Some blocks stay a while
 * in a private set and are freed locally.  Sizes: below, at and above the
 * alignment, across the small classes and into large blocks.  At the end the
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

static const char *prog = "stress_aligned";

typedef struct {
    ts_stress_opts c;
    int max_align_kib;
    int keep;
} config;

static config cfg = {
    .c = TS_STRESS_DEFAULTS(10, 4096),
    .max_align_kib = 2048,
    .keep = 64,
};

typedef struct {
    ts_worker base; /* id, thread, ops, allocs, frees, cross_frees */
    uint64_t sent, by_api[5], big_align;
} worker;

static ts_ring *rings; /* rings[from * T + to] */
static ts_team team;
static size_t page_size;

static const char *api_name[5] = {"hak_posix_memalign", "hak_aligned_alloc", "hak_memalign",
                                  "hak_valloc", "hak_pvalloc"};

static void alloc_aligned(worker *w, ts_block *b, ts_rng *r, uint64_t tag)
{
    unsigned max_shift = 63 - (unsigned)__builtin_clzll((uint64_t)cfg.max_align_kib * 1024);
    /* every alignment 8 B .. max is drawn; small ones (<= 4 KiB) more often,
     * because the big ones cost a mapping each */
    unsigned shift = ts_rng_below(r, 4) == 0 || max_shift < 12
                         ? (unsigned)ts_rng_range(r, 3, max_shift)
                         : (unsigned)ts_rng_range(r, 3, 12);
    size_t align = (size_t)1 << shift;
    size_t max_large = ts_stress_max_large(&cfg.c);
    size_t size;
    switch (ts_rng_below(r, 6)) {
    case 0: size = ts_rng_size_octaves(r, 1, align); break;              /* at most the alignment */
    case 1: size = align * (align <= 64 * TS_KIB ? ts_rng_range(r, 1, 3) : 1); break; /* multiples */
    case 2: size = align + ts_rng_range(r, 1, 64); break;            /* just above */
    default: size = ts_stress_size(r, (unsigned)cfg.c.large_pm, max_large); break;
    }
    unsigned api = (unsigned)ts_rng_below(r, 10);
    api = api < 4 ? 0 : api < 7 ? 1 : api < 8 ? 2 : api < 9 ? 3 : 4;
    void *p = NULL;
    size_t need = align;
    b->api = TS_API_OTHER;
    switch (api) {
    case 0: {
        int e = hak_posix_memalign(&p, align, size);
        if (e != 0)
            ts_die("%s: hak_posix_memalign(align %zu, size %zu) failed: %s", prog, align, size,
                   strerror(e));
        break;
    }
    case 1:
        p = hak_aligned_alloc(align, size);
        b->api = TS_API_ALIGNED_ALLOC;
        break;
    case 2:
        p = hak_memalign(align, size);
        break;
    case 3:
        p = hak_valloc(size);
        need = align = page_size;
        break;
    case 4:
        p = hak_pvalloc(size);
        need = align = page_size;
        break;
    }
    ts_check_fresh(prog, api_name[api], p, size, need);
    if (api == 4 && hak_malloc_usable_size(p) < (size + page_size - 1) / page_size * page_size)
        ts_die("%s: hak_pvalloc(%zu) = %p has usable size %zu, less than the size rounded up "
               "to a page", prog, size, p, hak_malloc_usable_size(p));
    b->p = p;
    b->size = size;
    b->align = align;
    b->tag = tag;
    b->hops = 0;
    b->owner = (uint16_t)w->base.id;
    ts_block_fill(b);
    w->by_api[api]++;
    w->base.allocs++;
    w->base.ops++;
    if (align >= 64 * TS_KIB)
        w->big_align++;
}

/* Check alignment and pattern, then free (ts_worker_free checks both). */
static void free_block(worker *w, ts_block *b, ts_rng *r, const char *where)
{
    ts_worker_free(prog, &w->base, b, r, where);
}

static unsigned drain(worker *w, ts_rng *r)
{
    unsigned T = (unsigned)cfg.c.threads, taken = 0;
    ts_block b;
    for (unsigned from = 0; from < T; from++)
        for (int n = 0; n < TS_RING_CAP && ts_ring_pop(&rings[(size_t)from * T + w->base.id], &b); n++) {
            free_block(w, &b, r, "(freed by receiver)");
            taken++;
        }
    return taken;
}

/* drain() for ts_team_drain_to_end. */
static unsigned drain_final(ts_worker *w, ts_rng *r, void *unused)
{
    (void)unused;
    return drain((worker *)w, r);
}

static void *thread_main(void *arg)
{
    worker *w = arg;
    unsigned T = (unsigned)cfg.c.threads;
    ts_rng r;
    uint64_t tagc = 0;
    ts_rng_init(&r, cfg.c.seed, w->base.id);
    ts_block *keep = ts_xcalloc((size_t)cfg.keep, sizeof *keep);
    ts_block b;

    ts_team_wait_start(&team);
    for (uint64_t it = 0;; it++) {
        if ((it & 15) == 0) {
            if (ts_team_time_up(&team))
                break;
            if (w->base.id == 0 && (it & 1023) == 0)
                ts_check_mapped(prog, &cfg.c);
        }
        alloc_aligned(w, &b, &r, ts_new_tag(&tagc, w->base.id));
        if (T > 1 && ts_rng_below(&r, 4) != 0) {
            unsigned to = (unsigned)ts_rng_below(&r, T - 1);
            if (to >= w->base.id)
                to++;
            w->sent++;
            if (!ts_ring_push(&rings[(size_t)w->base.id * T + to], &b))
                free_block(w, &b, &r, "(freed by sender, ring full)");
        } else {
            ts_keep_put(prog, &w->base, keep, cfg.keep, &b, &r);
        }
        if ((it & 3) == 0)
            drain(w, &r);
    }
    ts_team_drain_to_end(&team, drain_final, &w->base, &r, NULL);
    ts_keep_release(prog, &w->base, keep, cfg.keep, &r);
    return NULL;
}

int main(int argc, char **argv)
{
    ts_opt extra[] = {
        {"max-align-kib", TS_OPT_INT, &cfg.max_align_kib, "largest alignment in KiB (power of 2)"},
        {"keep", TS_OPT_INT, &cfg.keep, "private blocks per thread"},
    };
    ts_stress_parse_args(argc, argv, prog, &cfg.c, extra, TS_COUNT(extra));
    if (cfg.keep < 1) cfg.keep = 1;
    if (cfg.max_align_kib < 1) cfg.max_align_kib = 1;
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    unsigned T = (unsigned)cfg.c.threads;
    rings = ts_xcalloc((size_t)T * T, sizeof *rings);
    worker *w = ts_xcalloc(T, sizeof *w);

    hak_stats_t s0, s1;
    ts_worker sum;
    double secs = ts_team_run(&team, cfg.c.threads, w, sizeof *w, thread_main, cfg.c.seconds,
                              &s0, &sum);
    uint64_t by_api[5] = {0}, big = 0;
    for (unsigned i = 0; i < T; i++) {
        big += w[i].big_align;
        for (int k = 0; k < 5; k++)
            by_api[k] += w[i].by_api[k];
    }
    ts_check_test_balance(sum.allocs, sum.frees);
    ts_check_accounting(prog, &s0, &s1);
    ts_check_counted_allocs(&s0, &s1, sum.allocs, "");

    free(rings);
    free(w);
    return ts_stress_finishf(prog, &cfg.c, secs, sum.ops,
                      "allocs=%" PRIu64 " cross_thread_frees=%" PRIu64 " align_ge_64k=%" PRIu64
                      " posix_memalign=%" PRIu64 " aligned_alloc=%" PRIu64 " memalign=%" PRIu64
                      " valloc=%" PRIu64 " pvalloc=%" PRIu64,
                      sum.allocs, sum.cross_frees, big, by_api[0], by_api[1], by_api[2],
                      by_api[3], by_api[4]);
}
