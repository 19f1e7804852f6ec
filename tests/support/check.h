/* check.h - a minimal check framework for the C unit tests.
 *
 * CHECK(cond, fmt, ...) counts a check; when cond is false it prints the
 * file, line, condition and a formatted explanation on stderr and counts a
 * failure.  Output is capped so that a broken allocator cannot flood the log.
 * REQUIRE is CHECK for a condition the rest cannot go on without: the
 * process exits 1.  ts_check_finish() prints a summary and returns the
 * process exit status.
 *
 * The tests print with stdio, which under the prefixed-API build uses the C
 * library's own malloc, never hakmem's: printing never disturbs the counters
 * the tests read.
 */
#ifndef HAKMEM_TS_CHECK_H
#define HAKMEM_TS_CHECK_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* 1 in a build under AddressSanitizer or ThreadSanitizer (their shadow
 * memory makes big blocks slow and cannot be locked), else 0. */
#if defined(HAKMEM_ASAN) || defined(HAKMEM_TSAN) || defined(__SANITIZE_ADDRESS__) || \
    defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

/* Count one check (the macros below do). */
void ts_check_count(void);

/* Count and print a failed check (at most the first 60 are printed). */
void ts_check_report(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Evaluates cond once; the message arguments only when it failed. */
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        ts_check_count();                                                  \
        if (!(cond))                                                       \
            ts_check_report(__FILE__, __LINE__, #cond, __VA_ARGS__);       \
    } while (0)

/* A condition the rest of a test cannot go on without (a NULL block). */
#define REQUIRE(cond, ...)                                                 \
    do {                                                                   \
        ts_check_count();                                                  \
        if (!(cond)) {                                                     \
            ts_check_report(__FILE__, __LINE__, #cond, __VA_ARGS__);       \
            fprintf(stderr, "FATAL: cannot continue after this failure\n"); \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

/* Name the section that failures are reported under, and print "-- name". */
void ts_check_begin(const char *name);

/* Name the section without printing it.  The name is kept as a pointer. */
void ts_check_section(const char *name);

/* Print "prog: N checks, M failed"; returns the exit status (1 if any
 * check failed). */
int ts_check_finish(const char *prog);

/* Blocks held at once must not overlap: a check per overlapping pair of
 * the n blocks [ptrs[i], ptrs[i] + lens[i]) (a length of 0 counts as 1);
 * returns how many there were (0 is the only good answer). */
size_t ts_check_disjoint(void **ptrs, const size_t *lens, size_t n, const char *what);

#endif /* HAKMEM_TS_CHECK_H */
