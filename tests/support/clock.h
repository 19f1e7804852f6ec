/* clock.h - the monotonic clock and sleeping, for the test programs. */
#ifndef HAKMEM_TS_CLOCK_H
#define HAKMEM_TS_CLOCK_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC.  Inline: the benchmarks read it around what
 * they time. */
static inline double ts_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Milliseconds on CLOCK_MONOTONIC. */
double ts_now_ms(void);

/* Sleep for `secs` seconds (nothing for secs <= 0), resuming after signals. */
void ts_sleep(double secs);

#endif /* HAKMEM_TS_CLOCK_H */
