/* The statistics' sums and reports (stats_report.c). */
#ifndef HAKMEM_STATS_REPORT_H
#define HAKMEM_STATS_REPORT_H

#include <stdio.h>

#include "base.h"

/* glibc's heap-inspection calls with hakmem's numbers (exported by preload.c). */
struct mallinfo2;
void hak_stats_mallinfo2(struct mallinfo2 *out);
int  hak_stats_malloc_info(int options, FILE *f);
void hak_stats_malloc_stats(void);

#endif /* HAKMEM_STATS_REPORT_H */
