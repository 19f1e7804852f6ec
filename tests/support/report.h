/* report.h - how the test programs report failures and print without
 * touching the heap.
 *
 * ts_fail / ts_die: "FAIL: <message>" on stderr; the run is marked failed
 * (ts_has_failed, which every thread may poll to stop early).  ts_die also
 * ends the process at once (status 2): for a failure that makes the heap
 * untrustworthy, where going on would only cascade.
 *
 * ts_fail_at / FAIL: count a failure and print the first 40 with their line.
 *
 * ts_fdprintf / ts_out / ts_err / TS_FAIL_EXIT: output through a stack
 * buffer and write(2), never stdio, for programs whose allocator counters
 * must show only their own blocks (stdio would allocate a buffer that is
 * never freed).
 */
#ifndef HAKMEM_TS_REPORT_H
#define HAKMEM_TS_REPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <unistd.h>

/* Report a failure and let the program run to its end (it exits non-zero). */
void ts_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Report a failure and end the process now (_exit(2)). */
void ts_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Has any thread reported a failure? */
bool ts_has_failed(void);

/* Count a failure and print "FAIL line <line>: <message>" on stderr, for the
 * first 40 (the LD_PRELOAD test programs, one process, plain stdio). */
void ts_fail_at(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Failures counted by ts_fail_at so far. */
int ts_failures(void);

#define FAIL(...) ts_fail_at(__LINE__, __VA_ARGS__)

/* printf to a file descriptor through a 1 KiB stack buffer (longer output is
 * cut); no heap, no stdio. */
void ts_fdprintf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ts_out(...) ts_fdprintf(1, __VA_ARGS__)
#define ts_err(...) ts_fdprintf(2, __VA_ARGS__)

/* A failed check: say where and why on stderr (no heap) and end the process
 * with status 1.  _exit, not exit: other threads may still be inside the
 * allocator, and the exit report of a process that already failed is of no
 * use. */
#define TS_FAIL_EXIT(...)                                               \
    do {                                                                \
        ts_err("FAIL %s:%d: ", __FILE__, __LINE__);                     \
        ts_err(__VA_ARGS__);                                            \
        ts_err("\n");                                                   \
        _exit(1);                                                       \
    } while (0)

#endif /* HAKMEM_TS_REPORT_H */
