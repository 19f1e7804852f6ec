/* child.h - run something in a child process with its stderr captured, for
 * the unit tests that check what a process prints or how it dies.
 *
 *   - ts_capture_child: the general form;
 *   - ts_run_self: run this test program again with one argument (the tests
 *     of what hakmem prints at start-up or at exit);
 *   - ts_expect_abort: run a misuse case (a double free, an interior free...)
 *     and check that hakmem stopped it the way it promises: death by
 *     SIGABRT, with a message on stderr that names hakmem.
 * They report through the check framework (check.h).
 */
#ifndef HAKMEM_TS_CHILD_H
#define HAKMEM_TS_CHILD_H

#include <stddef.h>

/* Fork; the child sends its stderr into a pipe and calls child(ctx), then
 * exits 0 if that returns.  The parent reads the child's whole stderr, keeps
 * the first size - 1 bytes in buf (NUL-terminated; *len, if given, their
 * number), waits for the child and returns its wait status. */
int ts_capture_child(void (*child)(const void *ctx), const void *ctx, char *buf, size_t size,
                     size_t *len);

/* Run /proc/self/exe with argv { this program's name, arg }, after setup(ctx)
 * in the child (its environment, say); its stderr into buf as above.
 * Returns its exit status, or 128 + the signal that killed it. */
int ts_run_self(const char *arg, void (*setup)(const void *ctx), const void *ctx, char *buf,
                size_t size);

/* A misuse case.  msg: a part of the message the abort must print (NULL: any
 * that names hakmem). */
typedef struct {
    const char *name;
    void (*fn)(void);
    const char *msg;
} ts_misuse;

/* Run m->fn in a child (killed by SIGALRM after child_seconds) and check
 * that it died of SIGABRT with a message naming hakmem (and m->msg); the
 * checks are reported in the section "group: name". */
void ts_expect_abort(const char *group, const ts_misuse *m, unsigned child_seconds);

#endif /* HAKMEM_TS_CHILD_H */
