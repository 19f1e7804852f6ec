/* The statistics' sums and reports (stats_report.c). */
#ifndef HAKMEM_STATS_REPORT_H
#define HAKMEM_STATS_REPORT_H

#include <stdio.h>

#include "base.h"

/* glibc's heap-inspection calls with hakmem's numbers (exported by preload.c). */
struct mallinfo2;
void hak_stats_mallinfo2(struct mallinfo2 *out);
/* Freed large bytes hakmem keeps committed: the large cache, the arenas'
 * idle pages and the heaps' kept runs (hak_stats_t.large_cached_bytes). */
size_t hak_stats_large_cached(void);
int  hak_stats_malloc_info(int options, FILE *f);
void hak_stats_malloc_stats(void);

#endif /* HAKMEM_STATS_REPORT_H */
