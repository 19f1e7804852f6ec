/* rss.h - what the kernel says about the process's memory: resident and
 * peak resident size, address-space size, resident pages of a range, page
 * faults.  None of these allocates, so they can run under the allocator they
 * measure.
 */
#ifndef HAKMEM_TS_RSS_H
#define HAKMEM_TS_RSS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    long rss_kib; /* VmRSS: resident now */
    long hwm_kib; /* VmHWM: peak resident since start */
} ts_mem;

/* VmRSS and VmHWM from /proc/self/status; false if they cannot be read. */
bool ts_mem_read(ts_mem *m);

/* ts_mem_read, or the process ends (TS_FAIL_EXIT) if it fails. */
ts_mem ts_mem_now(void);

/* KiB as MiB, for printing. */
static inline double ts_mib(long kib)
{
    return (double)kib / 1024.0;
}

/* The address-space size (VmSize) and resident size of the process in bytes,
 * from /proc/self/statm; 0 for what cannot be read. */
size_t ts_vm_bytes(void);
size_t ts_rss_bytes(void);

/* Pages of [p, p + n) resident now (mincore; the range widened to whole
 * pages), or (size_t)-1 if mincore fails. */
size_t ts_resident_pages(const void *p, size_t n);

/* The lowest of first_kib (a reading just taken) and RSS read every poll_ms
 * for up to settle_ms, stopping early once it is at most max_pct% of
 * peak_kib (never, with max_pct <= 0).  *best_ms: when that lowest reading
 * came (0: first_kib); *waited_ms: how long the polling went on.  Allocates
 * nothing. */
long ts_rss_settle(long first_kib, long peak_kib, double max_pct, long settle_ms, long poll_ms, long *best_ms,
                   long *waited_ms);

/* Minor page faults of the process so far (getrusage). */
long ts_minflt(void);

#endif /* HAKMEM_TS_RSS_H */
