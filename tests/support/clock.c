/* clock.c - the monotonic clock and sleeping (clock.h). */
#include "clock.h"

#include <errno.h>
#include <time.h>

double ts_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void ts_sleep(double secs)
{
    struct timespec req, rem;
    if (secs <= 0)
        return;
    req.tv_sec = (time_t)secs;
    req.tv_nsec = (long)((secs - (double)req.tv_sec) * 1e9);
    while (nanosleep(&req, &rem) != 0 && errno == EINTR)
        req = rem;
}
