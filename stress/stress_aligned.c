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
#include "stress_common.h"

static const char *prog = "stress_aligned";

typedef struct {
    st_common c;
    int max_align_kib;
    int keep;
} config;

static config cfg = {
    .c = ST_COMMON_DEFAULTS(10, 4096),
    .max_align_kib = 2048,
    .keep = 64,
};

typedef struct {
    st_worker base; /* id, thread, ops, allocs, frees, cross_frees */
    uint64_t sent, by_api[5], big_align;
} worker;

static st_ring *rings; /* rings[from * T + to] */
static st_team team;
static size_t page_size;

static const char *api_name[5] = {"hak_posix_memalign", "hak_aligned_alloc", "hak_memalign",
                                  "hak_valloc", "hak_pvalloc"};

static void alloc_aligned(worker *w, st_block *b, st_rng *r, uint64_t tag)
{
    unsigned max_shift = 63 - (unsigned)__builtin_clzll((uint64_t)cfg.max_align_kib * 1024);
    /* every alignment 8 B .. max is drawn; small ones (<= 4 KiB) more often,
     * because the big ones cost a mapping each */
    unsigned shift = st_rng_below(r, 4) == 0 || max_shift < 12
                         ? (unsigned)st_rng_range(r, 3, max_shift)
                         : (unsigned)st_rng_range(r, 3, 12);
    size_t align = (size_t)1 << shift;
    size_t max_large = st_max_large(&cfg.c);
    size_t size;
    switch (st_rng_below(r, 6)) {
    case 0: size = st_size_octaves(r, 1, align); break;              /* at most the alignment */
    case 1: size = align * (align <= 64 * ST_KIB ? st_rng_range(r, 1, 3) : 1); break; /* multiples */
    case 2: size = align + st_rng_range(r, 1, 64); break;            /* just above */
    default: size = st_random_size(r, (unsigned)cfg.c.large_pm, max_large); break;
    }
    unsigned api = (unsigned)st_rng_below(r, 10);
    api = api < 4 ? 0 : api < 7 ? 1 : api < 8 ? 2 : api < 9 ? 3 : 4;
    void *p = NULL;
    size_t need = align;
    b->api = ST_API_OTHER;
    switch (api) {
    case 0: {
        int e = hak_posix_memalign(&p, align, size);
        if (e != 0)
            st_die("%s: hak_posix_memalign(align %zu, size %zu) failed: %s", prog, align, size,
                   strerror(e));
        break;
    }
    case 1:
        p = hak_aligned_alloc(align, size);
        b->api = ST_API_ALIGNED_ALLOC;
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
    st_check_fresh(prog, api_name[api], p, size, need);
    if (api == 4 && hak_malloc_usable_size(p) < (size + page_size - 1) / page_size * page_size)
        st_die("%s: hak_pvalloc(%zu) = %p has usable size %zu, less than the size rounded up "
               "to a page", prog, size, p, hak_malloc_usable_size(p));
    b->p = p;
    b->size = size;
    b->align = align;
    b->tag = tag;
    b->hops = 0;
    b->owner = (uint16_t)w->base.id;
    st_fill(b);
    w->by_api[api]++;
    w->base.allocs++;
    w->base.ops++;
    if (align >= 64 * ST_KIB)
        w->big_align++;
}

/* Check alignment and pattern, then free (st_worker_free checks both). */
static void free_block(worker *w, st_block *b, st_rng *r, const char *where)
{
    st_worker_free(prog, &w->base, b, r, where);
}

static unsigned drain(worker *w, st_rng *r)
{
    unsigned T = (unsigned)cfg.c.threads, taken = 0;
    st_block b;
    for (unsigned from = 0; from < T; from++)
        for (int n = 0; n < ST_RING_CAP && st_ring_pop(&rings[(size_t)from * T + w->base.id], &b); n++) {
            free_block(w, &b, r, "(freed by receiver)");
            taken++;
        }
    return taken;
}

/* drain() for st_team_drain_to_end. */
static unsigned drain_final(st_worker *w, st_rng *r, void *unused)
{
    (void)unused;
    return drain((worker *)w, r);
}

static void *thread_main(void *arg)
{
    worker *w = arg;
    unsigned T = (unsigned)cfg.c.threads;
    st_rng r;
    uint64_t tagc = 0;
    st_rng_init(&r, cfg.c.seed, w->base.id);
    st_block *keep = st_xcalloc((size_t)cfg.keep, sizeof *keep);
    st_block b;

    st_team_wait_start(&team);
    for (uint64_t it = 0;; it++) {
        if ((it & 15) == 0) {
            if (st_team_time_up(&team))
                break;
            if (w->base.id == 0 && (it & 1023) == 0)
                st_check_mapped(prog, &cfg.c);
        }
        alloc_aligned(w, &b, &r, st_new_tag(&tagc, w->base.id));
        if (T > 1 && st_rng_below(&r, 4) != 0) {
            unsigned to = (unsigned)st_rng_below(&r, T - 1);
            if (to >= w->base.id)
                to++;
            w->sent++;
            if (!st_ring_push(&rings[(size_t)w->base.id * T + to], &b))
                free_block(w, &b, &r, "(freed by sender, ring full)");
        } else {
            st_keep_put(prog, &w->base, keep, cfg.keep, &b, &r);
        }
        if ((it & 3) == 0)
            drain(w, &r);
    }
    st_team_drain_to_end(&team, drain_final, &w->base, &r, NULL);
    st_keep_release(prog, &w->base, keep, cfg.keep, &r);
    return NULL;
}

int main(int argc, char **argv)
{
    st_opt extra[] = {
        {"max-align-kib", ST_OPT_INT, &cfg.max_align_kib, "largest alignment in KiB (power of 2)"},
        {"keep", ST_OPT_INT, &cfg.keep, "private blocks per thread"},
    };
    st_parse_args(argc, argv, prog, &cfg.c, extra, ST_COUNT(extra));
    if (cfg.keep < 1) cfg.keep = 1;
    if (cfg.max_align_kib < 1) cfg.max_align_kib = 1;
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    unsigned T = (unsigned)cfg.c.threads;
    rings = st_xcalloc((size_t)T * T, sizeof *rings);
    worker *w = st_xcalloc(T, sizeof *w);

    hak_stats_t s0, s1;
    st_worker sum;
    double secs = st_team_run(&team, cfg.c.threads, w, sizeof *w, thread_main, cfg.c.seconds,
                              &s0, &sum);
    uint64_t by_api[5] = {0}, big = 0;
    for (unsigned i = 0; i < T; i++) {
        big += w[i].big_align;
        for (int k = 0; k < 5; k++)
            by_api[k] += w[i].by_api[k];
    }
    st_check_test_balance(sum.allocs, sum.frees);
    st_check_accounting(prog, &s0, &s1);
    st_check_counted_allocs(&s0, &s1, sum.allocs, "");

    free(rings);
    free(w);
    return st_finishf(prog, &cfg.c, secs, sum.ops,
                      "allocs=%" PRIu64 " cross_thread_frees=%" PRIu64 " align_ge_64k=%" PRIu64
                      " posix_memalign=%" PRIu64 " aligned_alloc=%" PRIu64 " memalign=%" PRIu64
                      " valloc=%" PRIu64 " pvalloc=%" PRIu64,
                      sum.allocs, sum.cross_frees, big, by_api[0], by_api[1], by_api[2],
                      by_api[3], by_api[4]);
}
