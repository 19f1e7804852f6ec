/* stress_large - large blocks crossing threads and growing with realloc.
 *
 * The threads form a ring: thread i sends to thread i+1 over an SPSC ring,
 * keeping at most --inflight blocks in it.  Every block is large: 256 KiB + 1
 * up to --max-large-kib (32 MiB; each octave equally likely).  A new block
 * comes from hak_malloc, hak_calloc (--calloc-permille; checked all zero
 * before it is filled: a reused, dirty mapping must be cleared) or
 * hak_aligned_alloc / hak_posix_memalign with a 2, 4 or 8 MiB alignment
 * (--aligned-permille; checked aligned); it is filled with a pattern derived
 * from its address, size and a per-allocation tag and sent on.
 *
 * The receiver checks the whole pattern, then (--grow-permille) reallocates
 * it: mostly growing it to 1.25..2x (at most twice --max-large-kib), 1 in 5
 * shrinking it to a third (sometimes into the small classes).  The kept
 * prefix must hold the old pattern (hakmem moves the pages without copying,
 * or grows in place); the block is refilled for its new address and sent on
 * again, up to --hops times.  Otherwise the block goes into the receiver's
 * keep set (replacing, checking and freeing an older block there) or is
 * checked and freed at once: most frees are of another thread's block, and
 * the freed mappings are what the next allocations reuse.
 *
 * At the end every thread drains what still reaches it, frees its keep set;
 * the hakmem counters must balance (allocs == frees, live_bytes back).  The
 * mapped-memory ceiling of the other stress programs applies, widened by what
 * the large cache may hold as address space (16 mappings of the largest
 * grown block).  Sanitized builds use smaller blocks (--max-large-kib 2 MiB
 * under TSan, 8 MiB under ASan: every byte touched costs them shadow memory),
 * so a run does many more of the same kinds of operations.
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

static const char *prog = "stress_large";

#if defined(HAKMEM_TSAN)
#define DEFAULT_MAX_KIB (2 * 1024)
#elif defined(HAKMEM_ASAN)
#define DEFAULT_MAX_KIB (8 * 1024)
#else
#define DEFAULT_MAX_KIB (32 * 1024)
#endif

typedef struct {
    ts_stress_opts c;
    int grow_pm;    /* received blocks reallocated, per mille */
    int calloc_pm;  /* new blocks from calloc, per mille */
    int aligned_pm; /* new blocks with a 2..8 MiB alignment, per mille */
    int inflight;   /* blocks in a ring at most */
    int keep;       /* blocks a thread keeps live */
    int hops;       /* reallocs (and sends) of one block at most */
} config;

static config cfg = {
    .c = TS_STRESS_DEFAULTS(1000, DEFAULT_MAX_KIB),
    .grow_pm = 400,
    .calloc_pm = 250,
    .aligned_pm = 100,
    .inflight = 4,
    .keep = 4,
    .hops = 3,
};

typedef struct {
    ts_worker base;
    uint64_t callocs, aligned, grows, shrinks, moved, to_small, bytes;
} worker;

static ts_ring *rings; /* rings[i]: inbound to thread i */
static ts_team team;

static size_t max_block(void) { return ts_stress_max_large(&cfg.c); }

/* calloc'ed memory must be zero, also when it reuses a dirtied mapping. */
static void check_zeroed(const char *api, const void *p, size_t size) { ts_check_zero(prog, api, p, size); }

/* A new large block, checked, filled. */
static void new_block(worker *w, ts_block *b, ts_rng *r, uint64_t *tagc)
{
    size_t size = ts_rng_size_octaves(r, TS_MAX_SMALL + 1, max_block());
    memset(b, 0, sizeof *b);
    b->api = TS_API_MALLOC;
    if (ts_rng_permille(r, (unsigned)cfg.calloc_pm)) {
        size_t n = size % 8 == 0 ? size / 8 : size, m = size / n;
        b->p = hak_calloc(n, m);
        ts_check_fresh(prog, "hak_calloc", b->p, size, 0);
        check_zeroed("hak_calloc", b->p, size);
        w->callocs++;
    } else if (ts_rng_permille(r, (unsigned)cfg.aligned_pm)) {
        size_t align = (size_t)2 * TS_MIB << ts_rng_below(r, 3); /* 2, 4, 8 MiB */
        b->align = align;
        if (ts_rng_below(r, 2)) {
            b->p = hak_aligned_alloc(align, size);
            b->api = TS_API_ALIGNED_ALLOC;
            ts_check_fresh(prog, "hak_aligned_alloc", b->p, size, align);
        } else {
            void *out = NULL;
            int rc = hak_posix_memalign(&out, align, size);
            if (rc != 0)
                ts_die("%s: hak_posix_memalign(%zu, %zu) returned %d", prog, align, size, rc);
            b->p = out;
            b->api = TS_API_OTHER;
            ts_check_fresh(prog, "hak_posix_memalign", b->p, size, align);
        }
        w->aligned++;
    } else {
        b->p = hak_malloc(size);
        ts_check_fresh(prog, "hak_malloc", b->p, size, 0);
    }
    b->size = size;
    b->tag = ts_new_tag(tagc, w->base.id);
    b->owner = (uint16_t)w->base.id;
    ts_block_fill(b);
    w->base.allocs++;
    w->base.ops++;
    w->bytes += size;
}

/* Check b, reallocate it (grow mostly, shrink 1 in 5), check the kept prefix
 * and refill it. */
static void realloc_block(worker *w, ts_block *b, ts_rng *r, uint64_t tag)
{
    ts_block_check(prog, "on receipt, before realloc", b);
    size_t old = b->size, ns;
    if (ts_rng_below(r, 5) == 0) {
        ns = old / 3;
        w->shrinks++;
        if (ns <= TS_MAX_SMALL)
            w->to_small++;
    } else {
        ns = old + old / 4 + (size_t)ts_rng_below(r, old - old / 4 + 1); /* 1.25x .. 2x */
        if (ns > 2 * max_block())
            ns = 2 * max_block();
        w->grows++;
    }
    if (ns == 0)
        ns = 1;
    uint64_t old_seed = ts_pat_seed((uintptr_t)b->p, old, b->tag);
    void *q = hak_realloc(b->p, ns);
    ts_check_fresh(prog, "hak_realloc", q, ns, 0);
    size_t keep = ns < old ? ns : old;
    size_t off = ts_pat_check(q, keep, old_seed);
    if (off != (size_t)-1)
        ts_die("%s: hak_realloc(%p, %zu -> %zu) = %p by thread %u (block of thread %u) lost the "
               "contents: first bad byte at offset %zu of %zu kept",
               prog, b->p, old, ns, q, w->base.id, b->owner, off, keep);
    if (q != b->p)
        w->moved++;
    b->p = q;
    b->size = ns;
    b->tag = tag;
    b->align = 0; /* realloc promises malloc's alignment only */
    b->api = TS_API_MALLOC;
    b->hops++;
    ts_block_fill(b);
    w->bytes += ns;
    w->base.ops++;
}

static void send_or_free(worker *w, ts_block *b, ts_rng *r)
{
    unsigned to = (w->base.id + 1) % (unsigned)cfg.c.threads;
    if (!ts_ring_push(&rings[to], b))
        ts_worker_free(prog, &w->base, b, r, "(freed by sender, ring full)");
}

/* End-of-run drain: check (sometimes realloc) and free what arrives. */
static unsigned drain_final(ts_worker *base, ts_rng *r, void *extra)
{
    worker *w = (worker *)base;
    uint64_t *tagc = extra;
    unsigned taken = 0;
    ts_block b;
    while (ts_ring_pop(&rings[w->base.id], &b)) {
        if (ts_rng_permille(r, (unsigned)cfg.grow_pm))
            realloc_block(w, &b, r, ts_new_tag(tagc, w->base.id));
        ts_worker_free(prog, &w->base, &b, r, "(drained at the end)");
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
    ts_block *keep = ts_xcalloc((size_t)cfg.keep, sizeof *keep);
    unsigned to = (w->base.id + 1) % (unsigned)cfg.c.threads;
    ts_block b;

    ts_team_wait_start(&team);
    for (uint64_t it = 0;; it++) {
        if (ts_team_time_up(&team))
            break;
        if (w->base.id == 0 && (it & 7) == 0)
            ts_check_mapped(prog, &cfg.c);
        unsigned work = 0;
        if (ts_ring_used(&rings[to]) < (size_t)cfg.inflight) {
            new_block(w, &b, &r, &tagc);
            send_or_free(w, &b, &r);
            work++;
        }
        for (int n = 0; n < cfg.inflight && ts_ring_pop(&rings[w->base.id], &b); n++) {
            work++;
            if ((int)b.hops < cfg.hops && ts_rng_permille(&r, (unsigned)cfg.grow_pm)) {
                realloc_block(w, &b, &r, ts_new_tag(&tagc, w->base.id));
                send_or_free(w, &b, &r);
            } else if (ts_rng_below(&r, 2)) {
                ts_block_check(prog, "on receipt, kept", &b);
                ts_keep_put(prog, &w->base, keep, cfg.keep, &b, &r);
            } else {
                ts_worker_free(prog, &w->base, &b, &r, "(freed on receipt)");
            }
        }
        if (work == 0)
            ts_idle();
    }
    ts_team_drain_to_end(&team, drain_final, &w->base, &r, &tagc);
    ts_keep_release(prog, &w->base, keep, cfg.keep, &r);
    return NULL;
}

int main(int argc, char **argv)
{
    cfg.c.threads = 3;
    ts_opt extra[] = {
        {"grow-permille", TS_OPT_INT, &cfg.grow_pm, "received blocks reallocated, per mille"},
        {"calloc-permille", TS_OPT_INT, &cfg.calloc_pm, "new blocks from calloc, per mille"},
        {"aligned-permille", TS_OPT_INT, &cfg.aligned_pm,
         "new blocks aligned to 2..8 MiB, per mille"},
        {"inflight", TS_OPT_INT, &cfg.inflight, "blocks in each ring at most"},
        {"keep", TS_OPT_INT, &cfg.keep, "blocks each thread keeps live"},
        {"hops", TS_OPT_INT, &cfg.hops, "reallocs of one block at most"},
    };
    ts_stress_parse_args(argc, argv, prog, &cfg.c, extra, TS_COUNT(extra));
    if (cfg.c.threads < 2) {
        fprintf(stderr, "%s: needs --threads >= 2 (blocks cross threads)\n", prog);
        return 64;
    }
    if (cfg.c.max_large_kib <= (int)(TS_MAX_SMALL / TS_KIB)) {
        fprintf(stderr, "%s: --max-large-kib must exceed %zu\n", prog, TS_MAX_SMALL / TS_KIB);
        return 64;
    }
    if (cfg.inflight < 1) cfg.inflight = 1;
    if (cfg.keep < 1) cfg.keep = 1;
    /* The large cache may hold 16 freed mappings as address space; a grown
     * block's mapping is up to 1.25 x twice the largest block, 2 MiB rounded.
     * Every large mapping, cached or live, also ends with a 2 MiB PROT_NONE
     * guard region (address space, never committed: src/large.c).  A live
     * block's mapping may be any cached one that holds it: the best fit is
     * the smallest cached mapping that does, however much bigger (its spare
     * pages are purged, its address space stays, as jemalloc reuses extents
     * up to 64 x the request), so each of the threads x (inflight + keep)
     * live blocks may also hold up to one such mapping's address space
     * (with 8 MiB a live block before, 4 in 10 runs on a quiet VM went over
     * by 30-200 MiB, an older library too).  The absolute ceiling
     * (--max-mapped-mib, 4 GiB) still bounds it all. */
    int map_max_mib = (int)((5 * max_block() / 2 + 4 * TS_MIB) / TS_MIB);
    cfg.c.mapped_slack_mib += 16 * map_max_mib;
    cfg.c.mapped_slack_mib += 4 * 16 + (8 + map_max_mib) * cfg.c.threads * (cfg.inflight + cfg.keep);

    unsigned T = (unsigned)cfg.c.threads;
    rings = ts_xcalloc(T, sizeof *rings);
    worker *w = ts_xcalloc(T, sizeof *w);

    hak_stats_t s0, s1;
    ts_worker sum;
    double secs = ts_team_run(&team, cfg.c.threads, w, sizeof *w, thread_main, cfg.c.seconds,
                              &s0, &sum);
    uint64_t callocs = 0, aligned = 0, grows = 0, shrinks = 0, moved = 0, to_small = 0, bytes = 0;
    for (unsigned i = 0; i < T; i++) {
        callocs += w[i].callocs;
        aligned += w[i].aligned;
        grows += w[i].grows;
        shrinks += w[i].shrinks;
        moved += w[i].moved;
        to_small += w[i].to_small;
        bytes += w[i].bytes;
    }
    ts_check_test_balance(sum.allocs, sum.frees);
    hak_stats_t mid;
    hak_stats_get(&mid);
    ts_check_counted_allocs(&s0, &mid, sum.allocs, "at least ");
    if (mid.large_allocs - s0.large_allocs < sum.allocs)
        ts_fail("hakmem counted %" PRIu64 " large allocations, the test made %" PRIu64
                " (every one > 256 KiB)",
                mid.large_allocs - s0.large_allocs, sum.allocs);
    ts_check_accounting(prog, &s0, &s1);

    free(rings);
    free(w);
    return ts_stress_finishf(prog, &cfg.c, secs, sum.ops,
                      "allocs=%" PRIu64 " callocs=%" PRIu64 " aligned=%" PRIu64 " grows=%" PRIu64
                      " shrinks=%" PRIu64 " to_small=%" PRIu64 " moved=%" PRIu64
                      " avg_mib=%.1f cross_thread_frees=%" PRIu64,
                      sum.allocs, callocs, aligned, grows, shrinks, to_small, moved,
                      sum.ops ? (double)bytes / (double)sum.ops / (double)TS_MIB : 0.0,
                      sum.cross_frees);
}
