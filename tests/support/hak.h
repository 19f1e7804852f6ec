/* hak.h - test helpers that call hakmem's prefixed API (include/hakmem.h).
 * They live in hakmem_testsupport_api, the one part of the support library
 * that links hakmem_api; everything else in tests/support/ works under any
 * allocator.
 *
 *   - ts_stats_now: a statistics snapshot (the unit tests);
 *   - blocks through hak_*: allocate, check, free a ts_block (block.h);
 *   - the stress programs' accounting: a ballast, snapshots before and after
 *     a run, the balance of hakmem's counters, and a ceiling on mapped
 *     memory so that a leaking allocator fails fast instead of taking the
 *     machine down.
 * The programs keep their own bookkeeping in the system heap, never in
 * hakmem, so that hakmem's counters describe only the blocks under test.
 */
#ifndef HAKMEM_TS_HAK_H
#define HAKMEM_TS_HAK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hakmem.h"

#include "block.h"
#include "rng.h"
#include "stress.h"
#include "threads.h"

/* The counters now; every field is overwritten (the poison shows if not).
 * Inline, so that unit_faults, which links hakmem's core built with fault
 * injection instead of hakmem_api, can use it too. */
static inline hak_stats_t ts_stats_now(void)
{
    hak_stats_t s;
    memset(&s, 0xa5, sizeof s);
    hak_stats_get(&s);
    return s;
}

/* Does hakmem count blocks in this run?  Only with HAKMEM_STATS (the stress
 * suite's default); without it the fast paths (the thread cache among them)
 * are on and the block counts stay 0, so the checks on them are skipped. */
bool ts_counting(void);

/* ------------------------------------------------------------------ blocks */

/* Checks every fresh block gets: not NULL, aligned (to `align`, or 0: what
 * malloc promises for `size`), usable size covers it.  Ends the process
 * otherwise. */
void ts_check_fresh(const char *prog, const char *api, void *p, size_t size, size_t align);

/* Allocate `size` bytes through hak_malloc (mostly) or hak_calloc (1 in 16,
 * checked zeroed), check it and fill the pattern. */
void ts_alloc_fill(const char *prog, ts_block *blk, size_t size, uint64_t tag, unsigned owner,
                   ts_rng *r);

/* Check, then free the block through one of the free entry points (1 in 8
 * through the sized free that fits how it was allocated). */
void ts_check_free(const char *prog, const char *where, ts_block *blk, ts_rng *r);

/* Check and free a block on behalf of worker w, counting the free (and the
 * cross-thread free, when w did not allocate the block).  A block allocated
 * with an explicit alignment (align != 0) must still have it. */
void ts_worker_free(const char *prog, ts_worker *w, ts_block *b, ts_rng *r, const char *where);

/* A worker's private keep set: n slots of blocks that stay live a while.
 * Put b in a random slot, first freeing the block it replaces. */
void ts_keep_put(const char *prog, ts_worker *w, ts_block *keep, int n, const ts_block *b,
                 ts_rng *r);

/* At the end of a worker: free every block left in its keep set, then the
 * set itself (system heap). */
void ts_keep_release(const char *prog, ts_worker *w, ts_block *keep, int n, ts_rng *r);

/* -------------------------------------------------------------- accounting */

/* The memory ceiling, checked every so often by one thread while the others
 * run: mapped_bytes <= --max-mapped-mib, and mapped_bytes <=
 * --mapped-slack-mib + --mapped-per-live x live_bytes.  Ends the process when
 * either is exceeded. */
void ts_check_mapped(const char *prog, const ts_stress_opts *c);

/* Start of the accounted phase: a ballast, then the first snapshot. */
void ts_accounting_begin(hak_stats_t *s0);

/* After all threads are joined and every block freed: hakmem's counters must
 * balance against s0.  Prints the deltas; returns false (and reports)
 * otherwise.  Drops the ballast after the last snapshot (*out, if given). */
bool ts_check_accounting(const char *prog, const hak_stats_t *s0, hak_stats_t *out);

/* End-of-run check: hakmem counted at least the `allocs` allocations the test
 * made between the snapshots s0 and s1 (`made` words the message: "" or
 * "at least "). */
void ts_check_counted_allocs(const hak_stats_t *s0, const hak_stats_t *s1, uint64_t allocs,
                             const char *made);

/* In main: the whole accounted run of a team.  Takes the ballast and the
 * first snapshot (*s0), starts the n workers, joins them and adds up their
 * common counters (ts_team_join); returns the run time. */
double ts_team_run(ts_team *t, int n, void *workers, size_t worker_size, void *(*fn)(void *),
                   double seconds, hak_stats_t *s0, ts_worker *sum);

#endif /* HAKMEM_TS_HAK_H */
