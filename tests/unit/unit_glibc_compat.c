/* unit_glibc_compat.c - behaviours of glibc's malloc that programs written
 * against glibc rely on, checked on glibc's own functions and on hakmem's
 * side by side, each in a child process of its own:
 *
 *  - fork() from a signal handler that interrupts a fork() (POSIX lists fork
 *    as async-signal-safe): a process forks in a loop while another process
 *    sends it signals whose handler forks too.  Neither allocator may
 *    deadlock: every lock taken in a fork handler is released before a
 *    signal can be delivered again.  Bounded: a run still going after 20 s
 *    is killed and the check fails.
 *  - a failing posix_memalign returns ENOMEM and, for hakmem, sets errno to
 *    ENOMEM as every failing hakmem allocation does (POSIX only requires the
 *    return value; glibc's errno is printed), here under an address-space
 *    limit.
 *
 * In this program malloc is glibc's (it links the prefixed hakmem_api), so
 * the glibc side calls malloc & co and the hakmem side hak_*; hakmem's fork
 * handlers exist only once hakmem is initialised, so the glibc child never
 * touches hak_*.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hakmem.h"
#include "support/check.h"

/* ------------------------------------------------- fork in a signal handler */

static volatile sig_atomic_t handler_forks;

/* Fork, have the child exit at once, reap it: all async-signal-safe. */
static void fork_and_reap(void)
{
    pid_t c = fork();
    if (c == 0)
        _exit(0);
    if (c > 0)
        while (waitpid(c, NULL, 0) < 0 && errno == EINTR) {
        }
}

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    fork_and_reap();
    handler_forks = handler_forks + 1;
    errno = saved;
}

/* The stress, in a single-threaded child process (so that glibc's own fork
 * takes no lock of its own: with threads it serialises its fork handlers
 * under a lock and deadlocks here by itself): 2 s of forks, with
 * allocations in between, while a sender process signals it every 20 us.
 * Exits 0 when done. */
static void fork_signal_stress(bool use_hakmem)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    if (use_hakmem)
        hak_free(hak_malloc(64));   /* hakmem initialised: its fork handlers registered */
    pid_t me = getpid();
    pid_t sender = fork();
    if (sender == 0) {
        for (;;) {
            if (kill(me, SIGUSR1) != 0)
                _exit(0);
            struct timespec ts = { 0, 20000 };
            nanosleep(&ts, NULL);
        }
    }
    time_t end = time(NULL) + 2;
    long forks = 0;
    while (time(NULL) < end) {
        void *p = use_hakmem ? hak_malloc(100) : malloc(100);
        fork_and_reap();
        if (use_hakmem)
            hak_free(p);
        else
            free(p);
        forks++;
    }
    kill(sender, SIGKILL);
    waitpid(sender, NULL, 0);
    _exit(forks > 0 && handler_forks > 0 ? 0 : 4);
}

/* Run fork_signal_stress in a child; true if it finished within 20 s (the
 * child and its sender are killed otherwise). */
static bool run_bounded(bool use_hakmem, int *status)
{
    pid_t c = fork();
    if (c == 0) {
        setpgid(0, 0);   /* its own group: a hung run is killed with its sender */
        fork_signal_stress(use_hakmem);
    }
    if (c < 0)
        return false;
    for (int i = 0; i < 2000; i++) {   /* 20 s in steps of 10 ms */
        pid_t r = waitpid(c, status, WNOHANG);
        if (r == c)
            return true;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    kill(-c, SIGKILL);
    waitpid(c, status, 0);
    return false;
}

static void test_fork_in_signal_handler(void)
{
    ts_check_begin("fork() from a signal handler during fork()");
    int st = 0;
    bool done = run_bounded(false, &st);
    CHECK(done && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "glibc: the stress %s (status %d)", done ? "failed" : "hung for 20 s", st);
    done = run_bounded(true, &st);
    CHECK(done && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "hakmem: the stress %s (status %d): a lock of hakmem's fork handlers taken again by a signal "
          "handler's fork", done ? "failed" : "hung for 20 s", st);
}

/* ------------------------------------------- posix_memalign and errno */

/* In a child under a 1 GiB address-space limit: posix_memalign of 4 GiB
 * must return ENOMEM and leave errno ENOMEM.  Exit status: 0 ok, 1 wrong
 * return value, 2 errno not ENOMEM, 3 it succeeded. */
static int memalign_errno_child(bool use_hakmem)
{
    pid_t c = fork();
    if (c == 0) {
        if (use_hakmem)
            hak_free(hak_malloc(64));
        struct rlimit rl = { (rlim_t)1 << 30, (rlim_t)1 << 30 };
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(77);
        void *p = NULL;
        errno = 0;
        int rc = use_hakmem ? hak_posix_memalign(&p, 64, (size_t)4 << 30) : posix_memalign(&p, 64, (size_t)4 << 30);
        int e = errno;
        if (rc == 0)
            _exit(3);
        if (rc != ENOMEM || e != ENOMEM) fprintf(stderr, "   %s: posix_memalign returned %d, errno %d\n", use_hakmem ? "hakmem" : "glibc", rc, e);
        _exit(rc != ENOMEM ? 1 : e != ENOMEM ? 2 : 0);
    }
    int st = 0;
    waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

static void test_posix_memalign_errno(void)
{
    ts_check_begin("a failing posix_memalign sets errno to ENOMEM");
    int g = memalign_errno_child(false);
    if (g == 77) {
        printf("   skipped: setrlimit(RLIMIT_AS) not permitted\n");
        return;
    }
    /* glibc returns ENOMEM; whether errno is ENOMEM too depends on the path
     * its failure took (a failed mmap sets it, its other failures may not):
     * printed, not required. */
    printf("   glibc: %s\n", g == 0 ? "ENOMEM, errno ENOMEM" : g == 2 ? "ENOMEM, errno not ENOMEM" : "other");
    CHECK(g == 0 || g == 2, "glibc: status %d (1 wrong return, 3 succeeded)", g);
    int h = memalign_errno_child(true);
    CHECK(h == 0, "hakmem: status %d (1 wrong return, 2 errno not ENOMEM, 3 succeeded)", h);
}

/* ------------------------------------------------ the API's other contracts */

/* One contract, glibc's function and hakmem's side by side. */
#define SAME(what, glibc_ok, hakmem_ok) \
    do { CHECK(glibc_ok, "glibc: %s", what); CHECK(hakmem_ok, "hakmem: %s", what); } while (0)

static void test_contracts(void)
{
    ts_check_begin("glibc's contracts that programs rely on");
    SAME("malloc_usable_size(NULL) is 0", malloc_usable_size(NULL) == 0, hak_malloc_usable_size(NULL) == 0);

    /* volatile: the compiler may not see the sizes and warn */
    volatile size_t half = SIZE_MAX / 2 + 1, huge = SIZE_MAX - 4096;
    void *g, *h;
    int ge, he;
    errno = 0; g = calloc(half, 2); ge = errno;
    errno = 0; h = hak_calloc(half, 2); he = errno;
    SAME("calloc whose size overflows: NULL, errno ENOMEM", g == NULL && ge == ENOMEM, h == NULL && he == ENOMEM);
    errno = 0; g = reallocarray(NULL, half, 2); ge = errno;
    errno = 0; h = hak_reallocarray(NULL, half, 2); he = errno;
    SAME("reallocarray whose size overflows: NULL, errno ENOMEM", g == NULL && ge == ENOMEM, h == NULL && he == ENOMEM);
    errno = 0; g = malloc(huge); ge = errno;
    errno = 0; h = hak_malloc(huge); he = errno;
    SAME("malloc(SIZE_MAX - 4096): NULL, errno ENOMEM", g == NULL && ge == ENOMEM, h == NULL && he == ENOMEM);

    g = malloc(10);
    h = hak_malloc(10);
    errno = 0; g = realloc(g, 0); ge = errno;
    errno = 0; h = hak_realloc(h, 0); he = errno;
    SAME("realloc(p, 0) frees p and returns NULL, errno untouched", g == NULL && ge == 0, h == NULL && he == 0);

    g = memalign(24, 100);
    h = hak_memalign(24, 100);
    SAME("memalign(24, n): the alignment rounded up to 32", g != NULL && (uintptr_t)g % 32 == 0,
         h != NULL && (uintptr_t)h % 32 == 0);
    if (g != NULL) {
        memset(g, 7, 100);
        g = realloc(g, 5000);
        CHECK(g != NULL && ((unsigned char *)g)[99] == 7, "glibc: realloc of a memalign block keeps its bytes");
    }
    if (h != NULL) {
        memset(h, 7, 100);
        h = hak_realloc(h, 5000);
        CHECK(h != NULL && ((unsigned char *)h)[99] == 7, "hakmem: realloc of a memalign block keeps its bytes");
    }
    free(g);
    hak_free(h);

    void *gp = NULL, *hp = NULL;
    int gr = posix_memalign(&gp, 24, 100), hr = hak_posix_memalign(&hp, 24, 100);
    SAME("posix_memalign with an alignment not a power of two: EINVAL", gr == EINVAL, hr == EINVAL);

    /* The one difference: aligned_alloc with an alignment that is not a
     * power of two.  glibc 2.36 rounds it up as memalign does; C17 makes it
     * invalid, and glibc from 2.38 and hakmem return NULL with EINVAL (the
     * misuse suite counts it as caught). */
    errno = 0; g = aligned_alloc(24, 96); ge = errno;
    errno = 0; h = hak_aligned_alloc(24, 96); he = errno;
    printf("   aligned_alloc(24, 96): glibc %s, hakmem %s\n", g != NULL ? "a block" : "NULL",
           h == NULL && he == EINVAL ? "NULL + EINVAL" : "other");
    CHECK(h == NULL && he == EINVAL, "hakmem: aligned_alloc(24, 96) gave %p, errno %d", h, he);
    free(g);
}

int main(void)
{
#if defined(HAKMEM_TSAN) || defined(HAKMEM_ASAN)
    /* A sanitizer owns malloc and its own fork handling; the address-space
     * limit does not fit its shadow memory. */
    printf("unit_glibc_compat: skipped under a sanitizer\n");
    return 77;
#endif
    test_fork_in_signal_handler();
    test_posix_memalign_errno();
    test_contracts();
    return ts_check_finish("unit_glibc_compat");
}
