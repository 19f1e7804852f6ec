/* hak.c - test helpers over hakmem's prefixed API (hak.h). */
#include "hak.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "report.h"

bool ts_counting(void)
{
    return ts_env_flag("HAKMEM_STATS");
}

/* ------------------------------------------------------------------ blocks */

void ts_check_fresh(const char *prog, const char *api, void *p, size_t size, size_t align)
{
    if (p == NULL)
        ts_die("%s: %s(%zu, align %zu) returned NULL (errno %d)", prog, api, size, align, errno);
    size_t need = align ? align : ts_min_align(size);
    if ((uintptr_t)p % need)
        ts_die("%s: %s(%zu) returned %p, not aligned to %zu", prog, api, size, p, need);
    size_t us = hak_malloc_usable_size(p);
    if (us < size)
        ts_die("%s: %s(%zu) returned %p with malloc_usable_size %zu < size", prog, api, size, p,
               us);
}

void ts_alloc_fill(const char *prog, ts_block *blk, size_t size, uint64_t tag, unsigned owner,
                   ts_rng *r)
{
    void *p;
    bool zeroed = ts_rng_below(r, 16) == 0;
    if (zeroed) {
        size_t n = 1 + (size_t)ts_rng_below(r, 4), m;
        while (size % n)
            n--;
        m = size / n;
        p = hak_calloc(n, m);
        ts_check_fresh(prog, "hak_calloc", p, size, 0);
        ts_check_zero(prog, "hak_calloc", p, size);
    } else {
        p = hak_malloc(size);
        ts_check_fresh(prog, "hak_malloc", p, size, 0);
    }
    blk->p = p;
    blk->size = size;
    blk->tag = tag;
    blk->align = 0;
    blk->hops = 0;
    blk->owner = (uint16_t)owner;
    blk->api = TS_API_MALLOC;
    ts_block_fill(blk);
}

void ts_check_free(const char *prog, const char *where, ts_block *blk, ts_rng *r)
{
    ts_block_check(prog, where, blk);
    bool sized = ts_rng_below(r, 8) == 0;
    if (sized && blk->api == TS_API_MALLOC)
        hak_free_sized(blk->p, blk->size);
    else if (sized && blk->api == TS_API_ALIGNED_ALLOC)
        hak_free_aligned_sized(blk->p, blk->align, blk->size);
    else
        hak_free(blk->p);
    blk->p = NULL;
}

void ts_worker_free(const char *prog, ts_worker *w, ts_block *b, ts_rng *r, const char *where)
{
    if (b->align && (uintptr_t)b->p % b->align)
        ts_die("%s: block %p (size %zu) %s is not aligned to %zu", prog, b->p, b->size, where,
               b->align);
    ts_check_free(prog, where, b, r);
    w->frees++;
    w->ops++;
    if (b->owner != w->id)
        w->cross_frees++;
}

void ts_keep_put(const char *prog, ts_worker *w, ts_block *keep, int n, const ts_block *b,
                 ts_rng *r)
{
    ts_block *slot = &keep[ts_rng_below(r, (uint64_t)n)];
    if (slot->p)
        ts_worker_free(prog, w, slot, r, "(replaced in keep set)");
    *slot = *b;
}

void ts_keep_release(const char *prog, ts_worker *w, ts_block *keep, int n, ts_rng *r)
{
    for (int i = 0; i < n; i++)
        if (keep[i].p)
            ts_worker_free(prog, w, &keep[i], r, "(final free of keep set)");
    free(keep);
}

/* -------------------------------------------------------------- accounting */

/* The second limit of the ceiling catches a leak long before the first: the
 * programs keep a bounded working set, so in a correct allocator mapped
 * memory follows live memory (plus caches, partly filled slabs, reserves: the
 * slack); when frees are lost, live_bytes stays bounded (hakmem counts the
 * free) while mapped memory keeps growing.  hak_stats_get runs concurrently
 * with the working threads on purpose (its counters must be safe to read that
 * way).  The peaks are printed with the accounting deltas. */
static _Atomic uint64_t peak_mapped, peak_excess;

void ts_check_mapped(const char *prog, const ts_stress_opts *c)
{
    hak_stats_t s;
    hak_stats_get(&s);
    uint64_t allowed = (uint64_t)c->mapped_slack_mib * TS_MIB +
                       (uint64_t)c->mapped_per_live * s.live_bytes;
    uint64_t excess = s.mapped_bytes > (uint64_t)c->mapped_per_live * s.live_bytes
                          ? s.mapped_bytes - (uint64_t)c->mapped_per_live * s.live_bytes
                          : 0;
    if (s.mapped_bytes > atomic_load_explicit(&peak_mapped, memory_order_relaxed))
        atomic_store_explicit(&peak_mapped, s.mapped_bytes, memory_order_relaxed);
    if (excess > atomic_load_explicit(&peak_excess, memory_order_relaxed))
        atomic_store_explicit(&peak_excess, excess, memory_order_relaxed);
    if (s.mapped_bytes > (uint64_t)c->max_mapped_mib * TS_MIB)
        ts_die("%s: hakmem maps %" PRIu64 " MiB, over the ceiling of %d MiB (live_bytes %" PRIu64
               " MiB): memory is not coming back",
               prog, s.mapped_bytes / TS_MIB, c->max_mapped_mib, s.live_bytes / TS_MIB);
    if (s.mapped_bytes > allowed)
        ts_die("%s: hakmem maps %" PRIu64 " MiB for %" PRIu64 " MiB of live blocks, over %d MiB + "
               "%d x live: freed memory is not coming back (superslabs mapped %" PRIu64
               ", unmapped %" PRIu64 ")",
               prog, s.mapped_bytes / TS_MIB, s.live_bytes / TS_MIB, c->mapped_slack_mib,
               c->mapped_per_live, s.superslabs_mapped, s.superslabs_unmapped);
}

/* Ballast: blocks held from before the first snapshot to after the last.
 * hak_stats_get reports live_bytes as max(0, in - out); from a start at zero
 * an allocator that under-counts live bytes (frees counted bigger than their
 * allocations) would read 0 again at the end and look balanced.  With the
 * ballast the starting value is about 8 MiB, so a drift either way shows.
 * The large block is never touched: it costs address space, not memory. */
#define BALLAST_SMALL 8
static void *ballast[1 + BALLAST_SMALL];

static void ballast_take(void)
{
    static const size_t sizes[BALLAST_SMALL] = {1, 16, 100, 1000, 5000, 40000, 200000,
                                                TS_MAX_SMALL};
    ballast[0] = hak_malloc(8 * TS_MIB);
    for (int i = 0; i < BALLAST_SMALL; i++)
        ballast[1 + i] = hak_malloc(sizes[i]);
    for (int i = 0; i <= BALLAST_SMALL; i++)
        if (!ballast[i])
            ts_die("ballast allocation failed");
}

static void ballast_drop(void)
{
    for (int i = 0; i <= BALLAST_SMALL; i++) {
        hak_free(ballast[i]);
        ballast[i] = NULL;
    }
}

void ts_accounting_begin(hak_stats_t *s0)
{
    ballast_take();
    hak_stats_get(s0);
}

bool ts_check_accounting(const char *prog, const hak_stats_t *s0, hak_stats_t *out)
{
    hak_stats_t s1;
    hak_stats_get(&s1);
    ballast_drop();
    if (out)
        *out = s1;
    uint64_t da = s1.allocs - s0->allocs, df = s1.frees - s0->frees;
    int64_t dl = (int64_t)(s1.live_bytes - s0->live_bytes);
    printf("%s: stats delta allocs=%" PRIu64 " frees=%" PRIu64 " remote_frees=%" PRIu64
           " live_bytes=%+" PRId64 " large_allocs=%" PRIu64 " heaps_abandoned=%" PRIu64
           " superslabs_adopted=%" PRIu64 " superslabs_mapped=%" PRIu64
           " superslabs_unmapped=%" PRIu64 " mapped_bytes_now=%" PRIu64
           " peak_mapped_mib=%" PRIu64 " peak_mapped_over_live_mib=%" PRIu64 "\n",
           prog, da, df, s1.remote_frees - s0->remote_frees, dl,
           s1.large_allocs - s0->large_allocs, s1.heaps_abandoned - s0->heaps_abandoned,
           s1.superslabs_adopted - s0->superslabs_adopted,
           s1.superslabs_mapped - s0->superslabs_mapped,
           s1.superslabs_unmapped - s0->superslabs_unmapped, s1.mapped_bytes,
           atomic_load(&peak_mapped) / TS_MIB, atomic_load(&peak_excess) / TS_MIB);
    bool ok = true;
    if (da != df) {
        ts_fail("%s: accounting: %" PRIu64 " allocs but %" PRIu64 " frees after everything was "
                "freed (difference %" PRId64 ")",
                prog, da, df, (int64_t)(da - df));
        ok = false;
    }
    if (dl != 0) {
        ts_fail("%s: accounting: live_bytes is %+" PRId64 " from its starting value after "
                "everything was freed",
                prog, dl);
        ok = false;
    }
    return ok;
}

void ts_check_counted_allocs(const hak_stats_t *s0, const hak_stats_t *s1, uint64_t allocs,
                             const char *made)
{
    if (ts_counting() && s1->allocs - s0->allocs < allocs)
        ts_fail("hakmem counted %" PRIu64 " allocs, the test made %s%" PRIu64,
                s1->allocs - s0->allocs, made, allocs);
}

double ts_team_run(ts_team *t, int n, void *workers, size_t worker_size, void *(*fn)(void *),
                   double seconds, hak_stats_t *s0, ts_worker *sum)
{
    ts_accounting_begin(s0);
    ts_team_start(t, n, workers, worker_size, fn, seconds);
    return ts_team_join(t, workers, worker_size, sum);
}
