/* rss.c - the process's memory as the kernel reports it (rss.h). */
#include "rss.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "report.h"

/* Read a small /proc file into buf (NUL-terminated) with open/read only. */
static size_t read_proc(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, size - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == size - 1)
            break;
    }
    close(fd);
    buf[len] = '\0';
    return len;
}

static long status_field(const char *buf, const char *key)
{
    const char *p = strstr(buf, key);
    if (!p)
        return -1;
    p += strlen(key);
    while (*p == ' ' || *p == '\t')
        p++;
    return strtol(p, NULL, 10);
}

bool ts_mem_read(ts_mem *m)
{
    char buf[8192];
    m->rss_kib = m->hwm_kib = -1;
    if (read_proc("/proc/self/status", buf, sizeof buf) == 0)
        return false;
    m->rss_kib = status_field(buf, "\nVmRSS:");
    m->hwm_kib = status_field(buf, "\nVmHWM:");
    return m->rss_kib >= 0 && m->hwm_kib >= 0;
}

ts_mem ts_mem_now(void)
{
    ts_mem m;
    if (!ts_mem_read(&m))
        TS_FAIL_EXIT("VmRSS/VmHWM not readable from /proc/self/status");
    return m;
}

/* Field `index` (0: size, 1: resident) of /proc/self/statm, in bytes. */
static size_t statm_bytes(int index)
{
    char buf[256];
    if (read_proc("/proc/self/statm", buf, sizeof buf) == 0)
        return 0;
    char *p = buf, *end;
    unsigned long pages = 0;
    for (int i = 0; i <= index; i++) {
        errno = 0;
        pages = strtoul(p, &end, 10);
        if (end == p || errno)
            return 0;
        p = end;
    }
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

size_t ts_vm_bytes(void)
{
    return statm_bytes(0);
}

size_t ts_rss_bytes(void)
{
    return statm_bytes(1);
}

size_t ts_resident_pages(const void *p, size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t from = (uintptr_t)p & ~(uintptr_t)(page - 1);
    size_t pages = ((uintptr_t)p + n - from + page - 1) / page, res = 0;
    unsigned char vec[256];
    for (size_t done = 0; done < pages; done += sizeof vec) {
        size_t k = pages - done < sizeof vec ? pages - done : sizeof vec;
        if (mincore((void *)(from + done * page), k * page, vec) != 0)
            return (size_t)-1;
        for (size_t i = 0; i < k; i++)
            res += vec[i] & 1;
    }
    return res;
}

long ts_minflt(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

long ts_rss_settle(long first_kib, long peak_kib, double max_pct, long settle_ms, long poll_ms, long *best_ms,
                   long *waited_ms)
{
    double t0 = ts_now();
    long best = first_kib;
    *best_ms = *waited_ms = 0;
    while (*waited_ms < settle_ms && !(max_pct > 0 && 100.0 * (double)best / (double)peak_kib <= max_pct)) {
        ts_sleep((double)poll_ms / 1000.0);
        *waited_ms = (long)((ts_now() - t0) * 1000.0);
        long r = ts_mem_now().rss_kib;
        if (r < best) {
            best = r;
            *best_ms = *waited_ms;
        }
    }
    return best;
}
