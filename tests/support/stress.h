/* stress.h - what the stress programs (stress/) share besides blocks and
 * threads: the options every one of them has, the size mix they draw from,
 * and the end of a run (the test's own bookkeeping, the result line).
 * Every report of a failure starts with "FAIL" and the program exits
 * non-zero.  The checks against hakmem's own counters are in hak.h.
 */
#ifndef HAKMEM_TS_STRESS_H
#define HAKMEM_TS_STRESS_H

#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "block.h"
#include "rng.h"

#define TS_STRESS_MAX_THREADS 256

/* Options every stress program has. */
typedef struct {
    double seconds;      /* run time of the timed phase */
    int threads;         /* worker threads */
    uint64_t seed;       /* RNG seed (0: from the clock, printed) */
    int large_pm;        /* large blocks, per mille of allocations */
    int max_large_kib;   /* largest large block */
    int max_mapped_mib;  /* fail if hakmem maps more than this */
    int mapped_slack_mib;/* ... or more than this + mapped_per_live x live */
    int mapped_per_live;
} ts_stress_opts;

/* The defaults every program shares (3 s, 4 threads, a 4 GiB absolute
 * ceiling, mapped <= slack + 4 x live); the programs differ only in their
 * large-block mix. */
#define TS_STRESS_DEFAULTS(large_permille, max_large_kibibytes)                                 \
    {.seconds = 3, .threads = 4, .large_pm = (large_permille),                                 \
     .max_large_kib = (max_large_kibibytes), .max_mapped_mib = 4096, .mapped_per_live = 4}

/* Parse --name value / --name=value for the common options plus `extra`
 * (ts_parse_opts), then check and complete them: --threads 1..256, a default
 * --mapped-slack-mib for the thread count, a seed from the clock if none. */
void ts_stress_parse_args(int argc, char **argv, const char *prog, ts_stress_opts *c,
                          const ts_opt *extra, int n_extra);

/* The largest large block, in bytes. */
static inline size_t ts_stress_max_large(const ts_stress_opts *c)
{
    return (size_t)c->max_large_kib * TS_KIB;
}

/* The size mix of the stress programs, biased like real programs to the
 * small classes but reaching every class: 70 % in 1 B..1 KiB, 20 % in
 * 1..16 KiB, 2 % in 16..256 KiB (each octave equally likely), 8 % on likely
 * class boundaries including 256 KiB itself.  large_pm per mille are large
 * blocks (256 KiB + 1 .. max_large), 1 in 8 of them exactly 256 KiB + 1. */
size_t ts_stress_size(ts_rng *r, unsigned large_pm, size_t max_large);

/* Calloc for the test's own bookkeeping (system heap, never the allocator
 * under test); ends the process when it fails. */
void *ts_xcalloc(size_t n, size_t size);

/* End-of-run check: the program's own count of blocks allocated and freed
 * must agree (else the test, not hakmem, lost a block). */
void ts_check_test_balance(uint64_t allocs, uint64_t frees);

/* The program's result line (tsan/run.sh reads ops=), with the program's own
 * counters given printf-style; returns the exit status (1 if any failure
 * was reported). */
int ts_stress_finishf(const char *prog, const ts_stress_opts *c, double secs, uint64_t ops,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif /* HAKMEM_TS_STRESS_H */
