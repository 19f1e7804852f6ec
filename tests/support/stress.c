/* stress.c - the stress programs' options, size mix and result line
 * (stress.h). */
#include "stress.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "report.h"

void ts_stress_parse_args(int argc, char **argv, const char *prog, ts_stress_opts *c,
                          const ts_opt *extra, int n_extra)
{
    ts_opt opts[64];
    int n = 0;
    opts[n++] = (ts_opt){"seconds", TS_OPT_DOUBLE, &c->seconds, "run time in seconds"};
    opts[n++] = (ts_opt){"threads", TS_OPT_INT, &c->threads, "worker threads"};
    opts[n++] = (ts_opt){"seed", TS_OPT_U64, &c->seed, "RNG seed (0 = from the clock)"};
    opts[n++] = (ts_opt){"large-permille", TS_OPT_INT, &c->large_pm,
                         "large blocks (> 256 KiB) per 1000 allocations"};
    opts[n++] = (ts_opt){"max-large-kib", TS_OPT_INT, &c->max_large_kib,
                         "largest large block in KiB"};
    opts[n++] = (ts_opt){"max-mapped-mib", TS_OPT_INT, &c->max_mapped_mib,
                         "fail if hakmem's mapped_bytes exceeds this"};
    opts[n++] = (ts_opt){"mapped-slack-mib", TS_OPT_INT, &c->mapped_slack_mib,
                         "... or this + mapped-per-live x live_bytes (0: 256 + 64 x threads)"};
    opts[n++] = (ts_opt){"mapped-per-live", TS_OPT_INT, &c->mapped_per_live,
                         "see --mapped-slack-mib"};
    for (int i = 0; i < n_extra && n < 64; i++)
        opts[n++] = extra[i];

    ts_parse_opts(argc, argv, prog, opts, n);
    if (c->threads < 1 || c->threads > TS_STRESS_MAX_THREADS) {
        fprintf(stderr, "%s: --threads must be 1..%d\n", prog, TS_STRESS_MAX_THREADS);
        exit(64);
    }
    if (c->large_pm > 1000) c->large_pm = 1000;
    /* Measured on the first hakmem: mapped - 4 x live peaks at 60-110 MiB
     * with 2 threads, 90-180 with 4, 110-300 with 8 (caches, partial slabs and
     * reserves grow per thread); the default leaves about twice that. */
    if (c->mapped_slack_mib == 0)
        c->mapped_slack_mib = 256 + 64 * c->threads;
    if (c->seed == 0)
        c->seed = ts_seed_from_clock();
}

size_t ts_stress_size(ts_rng *r, unsigned large_pm, size_t max_large)
{
    if (large_pm && max_large > TS_MAX_SMALL && ts_rng_permille(r, large_pm)) {
        if (ts_rng_below(r, 8) == 0)
            return TS_MAX_SMALL + 1;
        return ts_rng_size_octaves(r, TS_MAX_SMALL + 1, max_large);
    }
    uint64_t d = ts_rng_below(r, 100);
    if (d < 70)
        return ts_rng_size_octaves(r, 1, TS_KIB);
    if (d < 90)
        return ts_rng_size_octaves(r, TS_KIB + 1, 16 * TS_KIB);
    if (d < 92)
        return ts_rng_size_octaves(r, 16 * TS_KIB + 1, TS_MAX_SMALL);
    if (ts_rng_below(r, 64) == 0)
        return TS_MAX_SMALL;
    return ts_rng_size_boundary(r, 1, TS_MAX_SMALL);
}

void *ts_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p)
        ts_die("out of memory for bookkeeping (%zu x %zu)", n, size);
    return p;
}

void ts_check_test_balance(uint64_t allocs, uint64_t frees)
{
    if (allocs != frees)
        ts_fail("the test itself lost track of blocks: %" PRIu64 " allocated, %" PRIu64
                " freed", allocs, frees);
}

int ts_stress_finishf(const char *prog, const ts_stress_opts *c, double secs, uint64_t ops,
                      const char *fmt, ...)
{
    char extra[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(extra, sizeof extra, fmt, ap);
    va_end(ap);
    bool failed = ts_has_failed();
    printf("%s: threads=%d seconds=%.2f seed=%#" PRIx64 " ops=%" PRIu64 " ops_per_sec=%.0f %s %s\n",
           prog, c->threads, secs, c->seed, ops, secs > 0 ? (double)ops / secs : 0.0, extra,
           failed ? "FAILED" : "PASSED");
    fflush(stdout);
    return failed ? 1 : 0;
}
