/* report.c - failure reports and heap-free output (report.h). */
#include "report.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>

/* Set once any thread found a failure. */
static _Atomic int failed;

bool ts_has_failed(void)
{
    return atomic_load_explicit(&failed, memory_order_relaxed) != 0;
}

/* Print "FAIL: <message>" to stderr and mark the run failed: the one
 * reporting path behind ts_fail and ts_die. */
static void vreport(const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    fprintf(stderr, "FAIL: %s\n", buf);
    atomic_store_explicit(&failed, 1, memory_order_relaxed);
}

void ts_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
}

void ts_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    fflush(stderr);
    fflush(stdout);
    _exit(2);
}

static atomic_int failures_at;

void ts_fail_at(int line, const char *fmt, ...)
{
    if (atomic_fetch_add(&failures_at, 1) >= 40)
        return;
    fprintf(stderr, "FAIL line %d: ", line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int ts_failures(void)
{
    return atomic_load(&failures_at);
}

static void write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        s += w;
        n -= (size_t)w;
    }
}

void ts_fdprintf(int fd, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf)
        n = (int)sizeof buf - 1;
    write_all(fd, buf, (size_t)n);
}
