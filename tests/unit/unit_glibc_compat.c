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
 *  - the whole malloc family as a preloaded program calls it (the probe,
 *    below: this program again, on glibc and under LD_PRELOAD): errno after
 *    every failing call, malloc(0), realloc(p, 0), the aligned family,
 *    malloc_trim, mallopt, malloc_info, mallinfo, exited threads, exit with
 *    threads running, fork of a threaded process, atfork and atexit
 *    handlers that allocate; a table of both allocators' answers.
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
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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

/* ------------------------------------ the whole malloc family, preloaded */

/* The rest runs as a probe: this program again (/proc/self/exe --probe),
 * once on glibc's malloc and once with LD_PRELOAD=libhakmem.so (its path in
 * HAKMEM_TEST_PRELOAD, set by ctest), calling the standard names -- the
 * calls a program written against glibc makes, mallopt, malloc_trim and
 * mallinfo included, which exist only in the preload library.  The probe
 * prints one "key=value" line a behaviour; the parent prints glibc's and
 * hakmem's side by side and checks them against probe_expect below.  The
 * probe never calls hak_*: this executable's own (prefixed) hakmem stays
 * idle. */

static const char *probe_errno(int e, int sentinel)
{
    return e == sentinel ? "errno-unchanged" : e == ENOMEM ? "ENOMEM" : e == EINVAL ? "EINVAL" : "errno-other";
}

#define SENTINEL 4242

/* "NULL,ENOMEM" or "ptr,errno-unchanged" for a call made with errno set to
 * SENTINEL; frees a block it got. */
static void probe_result(const char *key, void *p, int e)
{
    printf("%s=%s,%s\n", key, p != NULL ? "ptr" : "NULL", probe_errno(e, SENTINEL));
    free(p);
}
#define PROBE(key, call) do { errno = SENTINEL; void *p_ = (call); int e_ = errno; probe_result(key, p_, e_); } while (0)

static bool bytes_are(const void *p, int v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != (unsigned char)v) return false;
    return true;
}

static void probe_failures(void)
{
    volatile size_t half = SIZE_MAX / 2 + 1, huge = SIZE_MAX - 4096, over = (size_t)PTRDIFF_MAX + 1;
    volatile size_t tib64 = (size_t)1 << 46;
    PROBE("malloc(SIZE_MAX-4096)", malloc(huge));
    PROBE("malloc(PTRDIFF_MAX+1)", malloc(over));
    PROBE("malloc(64TiB)", malloc(tib64));
    PROBE("calloc(overflow)", calloc(half, 2));
    PROBE("calloc(1,SIZE_MAX-4096)", calloc(1, huge));
    PROBE("aligned_alloc(64,huge)", aligned_alloc(64, huge));
    PROBE("aligned_alloc(24,96)", aligned_alloc(24, 96));
    PROBE("aligned_alloc(0,16)", aligned_alloc(0, 16));
    PROBE("memalign(64,huge)", memalign(64, huge));
    PROBE("memalign(SIZE_MAX/2+2,16)", memalign(half + 1, 16));
    PROBE("memalign(3,16)", memalign(3, 16));
    PROBE("valloc(huge)", valloc(huge));
    PROBE("pvalloc(huge)", pvalloc(huge));
    PROBE("pvalloc(SIZE_MAX-100)", pvalloc(SIZE_MAX - 100));
    /* realloc and reallocarray that fail leave the block as it was */
    char *b = malloc(100);
    memset(b, 5, 100);
    errno = SENTINEL;
    void *r = realloc(b, huge);
    int e = errno;
    printf("realloc(p,huge)=%s,%s,%s\n", r ? "ptr" : "NULL", probe_errno(e, SENTINEL),
           r == NULL && bytes_are(b, 5, 100) ? "block-kept" : "block-lost");
    errno = SENTINEL;
    r = reallocarray(b, half, 2);
    e = errno;
    printf("reallocarray(p,overflow)=%s,%s,%s\n", r ? "ptr" : "NULL", probe_errno(e, SENTINEL),
           r == NULL && bytes_are(b, 5, 100) ? "block-kept" : "block-lost");
    free(r != NULL ? r : b);
    /* posix_memalign: returns the error, leaves errno and *out alone on EINVAL */
    static const struct { const char *key; size_t align, size; } pm[] = {
        { "posix_memalign(24,100)", 24, 100 }, { "posix_memalign(0,100)", 0, 100 },
        { "posix_memalign(4,100)", 4, 100 }, { "posix_memalign(64,huge)", 64, SIZE_MAX - 4096 },
        { "posix_memalign(64,0)", 64, 0 },
    };
    for (size_t i = 0; i < sizeof pm / sizeof pm[0]; i++) {
        void *out = &errno;   /* any recognisable pointer */
        errno = SENTINEL;
        int rc = posix_memalign(&out, pm[i].align, pm[i].size);
        e = errno;
        printf("%s=%s,%s,%s\n", pm[i].key, rc == 0 ? "0" : rc == EINVAL ? "EINVAL" : rc == ENOMEM ? "ENOMEM" : "other",
               probe_errno(e, SENTINEL), rc == 0 ? (out != NULL ? "ptr" : "NULL") : out == &errno ? "out-untouched" : "out-written");
        if (rc == 0) free(out);
    }
}

/* Successful calls leave errno alone (glibc's free guarantees it since
 * 2.33, POSIX.1-2024 requires it of free). */
static void probe_errno_kept(void)
{
    static const size_t sizes[] = { 0, 16, 1000, 40000, 300000, 8u << 20 };
    const char *first = "kept";
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        errno = SENTINEL;
        void *p = malloc(sizes[i]);
        if (errno != SENTINEL) first = "malloc";
        memset(p, 1, sizes[i]);
        errno = SENTINEL;
        p = realloc(p, sizes[i] * 2 + 1);
        if (errno != SENTINEL) first = "realloc";
        errno = SENTINEL;
        free(p);
        if (errno != SENTINEL) first = "free";
        errno = SENTINEL;
        p = calloc(1, sizes[i]);
        free(p);
        if (errno != SENTINEL) first = "calloc/free";
    }
    errno = SENTINEL;
    free(NULL);
    if (errno != SENTINEL) first = "free(NULL)";
    printf("errno-after-successful-calls=%s\n", first);
}

static void probe_contracts(void)
{
    printf("malloc_usable_size(NULL)=%zu\n", malloc_usable_size(NULL));
    void *a = malloc(0), *b = malloc(0);
    printf("malloc(0)=%s\n", a && b && a != b ? "unique-non-NULL" : "other");
    free(a);
    free(b);
    a = calloc(0, 5);
    b = calloc(5, 0);
    printf("calloc(0,n),calloc(n,0)=%s\n", a && b && a != b ? "unique-non-NULL" : "other");
    free(a);
    free(b);
    errno = SENTINEL;
    a = realloc(malloc(10), 0);
    printf("realloc(p,0)=%s,%s\n", a ? "ptr" : "NULL(freed)", probe_errno(errno, SENTINEL));
    free(a);
    a = realloc(NULL, 0);
    printf("realloc(NULL,0)=%s\n", a ? "non-NULL" : "NULL");
    free(a);
    errno = SENTINEL;
    a = reallocarray(malloc(10), 0, 8);
    printf("reallocarray(p,0,8)=%s,%s\n", a ? "ptr" : "NULL(freed)", probe_errno(errno, SENTINEL));
    free(a);
    char *c = reallocarray(NULL, 10, 10);
    memset(c, 3, 100);
    c = reallocarray(c, 1000, 10);
    printf("reallocarray(grow)=%s\n", c && bytes_are(c, 3, 100) ? "content-kept" : "content-lost");
    free(c);
    /* calloc zeroes a reused block, small and large */
    bool zero = true;
    static const size_t zs[] = { 100, 5000, 300000, 4u << 20 };
    for (size_t i = 0; i < sizeof zs / sizeof zs[0]; i++)
        for (int k = 0; k < 3; k++) {
            void *d = malloc(zs[i]);
            memset(d, 0xff, zs[i]);
            free(d);
            d = calloc(1, zs[i]);
            zero = zero && d && bytes_are(d, 0, zs[i]);
            free(d);
        }
    printf("calloc-of-a-reused-block=%s\n", zero ? "zeroed" : "not-zeroed");
    /* usable size: at least the request, and all of it writable */
    bool usable = true;
    for (size_t n = 1; n < 300000; n = n * 3 + 1) {
        char *d = malloc(n);
        size_t u = malloc_usable_size(d);
        usable = usable && u >= n;
        memset(d, 1, u);
        free(d);
    }
    printf("malloc_usable_size(p)=%s\n", usable ? ">=request,writable" : "too-small");
    /* realloc of the aligned family's blocks keeps the contents */
    bool kept = true;
    for (int kind = 0; kind < 5; kind++)
        for (size_t grow = 5000; grow <= (2u << 20); grow *= 20) {
            char *d = NULL;
            if (kind == 0) d = memalign(64, 100);
            else if (kind == 1) d = aligned_alloc(256, 512);
            else if (kind == 2 && posix_memalign((void **)&d, 4096, 100) != 0) d = NULL;
            else if (kind == 3) d = valloc(100);
            else if (kind == 4) d = pvalloc(100);
            if (d == NULL) { kept = false; continue; }
            memset(d, 9, 100);
            d = realloc(d, grow);
            kept = kept && d && bytes_are(d, 9, 100);
            d = realloc(d, 50);
            kept = kept && d && bytes_are(d, 9, 50);
            free(d);
        }
    printf("realloc-of-memalign/aligned_alloc/posix_memalign/valloc/pvalloc=%s\n", kept ? "content-kept" : "content-lost");
    void *v = pvalloc(1);
    printf("pvalloc(1)=%s\n", v && (uintptr_t)v % 4096 == 0 && malloc_usable_size(v) >= 4096 ? "page-aligned,>=page" : "other");
    free(v);
}

static void probe_trim_and_opts(void)
{
    void *p[1000];
    for (int i = 0; i < 1000; i++) {
        p[i] = malloc(1000);
        memset(p[i], 1, 1000);
    }
    for (int i = 0; i < 1000; i++) free(p[i]);
    printf("malloc_trim(0)-after-freeing-1MB=%d\n", malloc_trim(0));
    printf("malloc_trim(0)-again=%d\n", malloc_trim(0));
    printf("mallopt(M_TRIM_THRESHOLD,1MiB)=%d\n", mallopt(M_TRIM_THRESHOLD, 1 << 20));
    printf("mallopt(M_MXFAST,1MiB)=%d\n", mallopt(M_MXFAST, 1 << 20));
    printf("mallopt(unknown)=%d\n", mallopt(9999, 1));
}

/* Tags balanced, one root element <malloc ...>. */
static const char *xml_check(const char *s)
{
    const char *stack[64];
    size_t depth = 0, roots = 0, len[64];
    for (const char *t = strchr(s, '<'); t != NULL; t = strchr(t + 1, '<')) {
        const char *end = strchr(t, '>');
        if (end == NULL) return "unclosed-tag";
        bool closing = t[1] == '/', empty = end[-1] == '/';
        const char *name = t + 1 + closing;
        size_t n = strcspn(name, " />");
        if (n == 0) return "no-name";
        if (closing) {
            if (depth == 0 || len[depth - 1] != n || strncmp(stack[depth - 1], name, n) != 0) return "mismatched";
            depth--;
        } else {
            if (depth == 0 && (roots++ > 0 || strncmp(name, "malloc", n) != 0)) return "bad-root";
            if (!empty) {
                if (depth == 64) return "too-deep";
                stack[depth] = name;
                len[depth++] = n;
            }
        }
        for (const char *q = t + 1; q < end; q++)
            if (*q == '<') return "stray-<";
    }
    return depth == 0 && roots == 1 ? "valid" : "unbalanced";
}

static void probe_inspection(void)
{
    void *p = malloc(100), *big = malloc(5u << 20);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    int rc = malloc_info(0, f);
    fclose(f);
    printf("malloc_info(0)=%d,xml-%s\n", rc, buf ? xml_check(buf) : "none");
    free(buf);
    free(p);
    free(big);
    /* 2.5 GiB live (untouched): a mallinfo field beyond INT_MAX */
    void *huge = malloc((size_t)5 << 29);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo mi = mallinfo();
#pragma GCC diagnostic pop
    bool nonneg = mi.arena >= 0 && mi.ordblks >= 0 && mi.hblks >= 0 && mi.hblkhd >= 0 && mi.uordblks >= 0 &&
                  mi.fordblks >= 0 && mi.keepcost >= 0;
    printf("mallinfo()-with-2.5GiB-live=%s\n", huge == NULL ? "skipped" : nonneg ? "returns,fields>=0" : "returns,wrapped-negative");
    free(huge);
}

/* ---- threads, fork, exit handlers */

#define SLOTS 64
static _Atomic(void *) slot[SLOTS];
static atomic_bool stop_threads;

static void *slot_worker(void *arg)
{
    unsigned x = (unsigned)(uintptr_t)arg;
    while (!atomic_load(&stop_threads)) {
        x = x * 1103515245u + 12345u;
        size_t n = 16 + (x >> 8) % (x % 16 == 0 ? 200000 : 2000);
        void *p = malloc(n);
        memset(p, 1, n < 64 ? n : 64);
        free(atomic_exchange(&slot[(x >> 4) % SLOTS], p));
    }
    return NULL;
}

static void alloc_free_some(void)
{
    void *p[200];
    for (int i = 0; i < 200; i++) p[i] = malloc((size_t)(i * 37 % 3000) + (i % 50 == 0 ? 1u << 20 : 1));
    for (int i = 0; i < 200; i++) free(p[i]);
}

static void atfork_handler(void) { alloc_free_some(); }
static void atexit_handler(void)
{
    alloc_free_some();
    for (int i = 0; i < SLOTS; i++) free(atomic_exchange(&slot[i], NULL));
    static const char ok[] = "atexit-handler-done\n";
    if (write(1, ok, sizeof ok - 1) < 0) _exit(5);
}

static void *child_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < SLOTS; i += 2) free(atomic_exchange(&slot[i], NULL));
    alloc_free_some();
    return NULL;
}

/* Fork `rounds` children that each run child() (which must not return);
 * true if every one exited with status 0.  alarm: a deadlock fails the
 * check, not the run. */
static bool fork_rounds(int rounds, void (*child)(void))
{
    int ok = 0;
    for (int r = 0; r < rounds; r++) {
        fflush(stdout);
        pid_t c = fork();
        if (c == 0) {
            alarm(10);
            child();
            _exit(4);
        }
        int st = 0;
        if (c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
    }
    return ok == rounds;
}

/* A child of a process whose threads allocate and free: it frees the blocks
 * they left in the slots (a thread of its own, then its main thread),
 * allocates, and exits through an atexit handler that does the same. */
static void fork_threads_child(void)
{
    atexit(atexit_handler);
    /* a thread of the child's own frees some of the slots */
    pthread_t ct;
    if (pthread_create(&ct, NULL, child_thread, NULL) != 0) _exit(3);
    pthread_join(ct, NULL);
    for (int i = 0; i < SLOTS; i++) free(atomic_exchange(&slot[i], NULL));
    alloc_free_some();
    exit(0);
}

static void probe_fork_threads(void)
{
    pthread_t t[3];
    for (uintptr_t i = 0; i < 3; i++) pthread_create(&t[i], NULL, slot_worker, (void *)(i + 1));
    pthread_atfork(atfork_handler, atfork_handler, atfork_handler);
    bool ok = fork_rounds(20, fork_threads_child);
    atomic_store(&stop_threads, true);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    printf("fork-of-a-threaded-process,atfork-and-atexit-handlers-allocating=%s\n", ok ? "ok" : "failed");
}

/* exit() called by one thread while others allocate and free: the exit
 * handlers (hakmem's destructors included) run beside them. */
static void *exit_now(void *arg)
{
    (void)arg;
    alloc_free_some();
    exit(0);
}

static void exit_with_threads_child(void)
{
    atomic_store(&stop_threads, false);
    pthread_t t[4];
    for (uintptr_t i = 0; i < 3; i++) pthread_create(&t[i], NULL, slot_worker, (void *)(i + 7));
    pthread_create(&t[3], NULL, exit_now, NULL);
    for (;;) alloc_free_some();
}

static void probe_exit_with_threads(void)
{
    printf("exit()-while-other-threads-allocate=%s\n", fork_rounds(10, exit_with_threads_child) ? "ok" : "failed");
}

/* Blocks of a thread that has exited, freed by another; a TLS destructor
 * that allocates and frees at thread exit. */
static pthread_key_t tls_key;
static void tls_destructor(void *p)
{
    free(p);
    alloc_free_some();
}

static void *leave_blocks(void *arg)
{
    void **out = arg;
    pthread_setspecific(tls_key, malloc(50));
    for (int i = 0; i < 100; i++) {
        out[i] = malloc((size_t)(i * 997 % 70000) + (i == 99 ? 3u << 20 : 1));
        memset(out[i], 7, 16);
    }
    return NULL;
}

static void probe_exited_thread(void)
{
    pthread_key_create(&tls_key, tls_destructor);
    static void *blocks[8][100];
    bool ok = true;
    for (int round = 0; round < 8; round++) {
        pthread_t t;
        pthread_create(&t, NULL, leave_blocks, blocks[round]);
        pthread_join(t, NULL);
    }
    for (int round = 0; round < 8; round++)
        for (int i = 0; i < 100; i++) {
            ok = ok && bytes_are(blocks[round][i], 7, 16);
            free(blocks[round][i]);
        }
    alloc_free_some();
    printf("free-of-blocks-of-an-exited-thread,TLS-destructor-allocating=%s\n", ok ? "ok" : "content-lost");
}

static int probe_main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    probe_failures();
    probe_errno_kept();
    probe_contracts();
    probe_trim_and_opts();
    probe_inspection();
    probe_exited_thread();
    probe_exit_with_threads();
    probe_fork_threads();
    return 0;
}

/* What the parent expects of each key: glibc's value (NULL: printed, not
 * checked -- it depends on glibc's version or the machine) and hakmem's
 * (NULL: the same as glibc's, whatever that is). */
static const struct {
    const char *key, *glibc, *hakmem, *why;
} probe_expect[] = {
    { "malloc(SIZE_MAX-4096)", "NULL,ENOMEM", NULL, NULL },
    { "malloc(PTRDIFF_MAX+1)", "NULL,ENOMEM", NULL, NULL },
    /* the kernel's overcommit policy decides, for both */
    { "malloc(64TiB)", NULL, NULL, NULL },
    { "calloc(overflow)", "NULL,ENOMEM", NULL, NULL },
    { "calloc(1,SIZE_MAX-4096)", "NULL,ENOMEM", NULL, NULL },
    { "aligned_alloc(64,huge)", "NULL,ENOMEM", NULL, NULL },
    { "aligned_alloc(24,96)", NULL, "NULL,EINVAL",
      "C17: an alignment that is not a power of two is invalid; glibc before 2.38 rounds it up, 2.38 and later "
      "fail with EINVAL as hakmem does (the misuse suite counts it as caught)" },
    { "aligned_alloc(0,16)", NULL, "NULL,EINVAL", "as aligned_alloc(24,96): 0 is not a power of two" },
    { "memalign(64,huge)", "NULL,ENOMEM", NULL, NULL },
    { "memalign(SIZE_MAX/2+2,16)", "NULL,EINVAL", NULL, NULL },
    { "memalign(3,16)", "ptr,errno-unchanged", NULL, NULL },
    { "valloc(huge)", "NULL,ENOMEM", NULL, NULL },
    { "pvalloc(huge)", "NULL,ENOMEM", NULL, NULL },
    { "pvalloc(SIZE_MAX-100)", "NULL,ENOMEM", NULL, NULL },
    { "realloc(p,huge)", "NULL,ENOMEM,block-kept", NULL, NULL },
    { "reallocarray(p,overflow)", "NULL,ENOMEM,block-kept", NULL, NULL },
    { "posix_memalign(24,100)", "EINVAL,errno-unchanged,out-untouched", NULL, NULL },
    { "posix_memalign(0,100)", "EINVAL,errno-unchanged,out-untouched", NULL, NULL },
    { "posix_memalign(4,100)", "EINVAL,errno-unchanged,out-untouched", NULL, NULL },
    { "posix_memalign(64,huge)", "ENOMEM,ENOMEM,out-untouched", NULL, NULL },
    { "posix_memalign(64,0)", "0,errno-unchanged,ptr", NULL, NULL },
    { "errno-after-successful-calls", "kept", NULL, NULL },
    { "malloc_usable_size(NULL)", "0", NULL, NULL },
    { "malloc(0)", "unique-non-NULL", NULL, NULL },
    { "calloc(0,n),calloc(n,0)", "unique-non-NULL", NULL, NULL },
    { "realloc(p,0)", "NULL(freed),errno-unchanged", NULL, NULL },
    { "realloc(NULL,0)", "non-NULL", NULL, NULL },
    { "reallocarray(p,0,8)", "NULL(freed),errno-unchanged", NULL, NULL },
    { "reallocarray(grow)", "content-kept", NULL, NULL },
    { "calloc-of-a-reused-block", "zeroed", NULL, NULL },
    { "malloc_usable_size(p)", ">=request,writable", NULL, NULL },
    { "realloc-of-memalign/aligned_alloc/posix_memalign/valloc/pvalloc", "content-kept", NULL, NULL },
    { "pvalloc(1)", "page-aligned,>=page", NULL, NULL },
    /* 1: memory went back to the system; 0: there was nothing to give back */
    { "malloc_trim(0)-after-freeing-1MB", "1", NULL, NULL },
    { "malloc_trim(0)-again", "0", NULL, NULL },
    /* hakmem does not replace mallopt: glibc's answers (1 for a known
     * parameter it accepts, 0 for a value it rejects, and -- glibc 2.36 --
     * 1 for an unknown parameter too); hakmem has no such knobs */
    { "mallopt(M_TRIM_THRESHOLD,1MiB)", "1", NULL, NULL },
    { "mallopt(M_MXFAST,1MiB)", "0", NULL, NULL },
    { "mallopt(unknown)", NULL, NULL, NULL },
    { "malloc_info(0)", "0,xml-valid", NULL, NULL },
    /* glibc's int fields wrap (2.5 GiB of hblkhd turns negative); hakmem's
     * saturate at INT_MAX */
    { "mallinfo()-with-2.5GiB-live", NULL, "returns,fields>=0",
      "mallinfo's fields are int: glibc's wrap past INT_MAX, hakmem's saturate there (mallinfo2 has the true sizes)" },
    { "free-of-blocks-of-an-exited-thread,TLS-destructor-allocating", "ok", NULL, NULL },
    { "exit()-while-other-threads-allocate", "ok", NULL, NULL },
    { "fork-of-a-threaded-process,atfork-and-atexit-handlers-allocating", "ok", NULL, NULL },
};
#define NEXPECT (sizeof probe_expect / sizeof probe_expect[0])

/* Run the probe, LD_PRELOAD=lib if lib; its output in out (NUL-ended). */
static bool run_probe(const char *lib, char *out, size_t cap)
{
    int fd[2];
    if (pipe(fd) != 0) return false;
    pid_t c = fork();
    if (c == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        if (lib != NULL) setenv("LD_PRELOAD", lib, 1);
        else unsetenv("LD_PRELOAD");
        unsetenv("HAKMEM_STATS");
        execl("/proc/self/exe", "unit_glibc_compat", "--probe", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd[0], out + n, cap - 1 - n)) != 0)
        if (r > 0) n += (size_t)r;
        else if (errno != EINTR) break;
    out[n] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(c, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fprintf(stderr, "   probe (%s) ended with status %#x\n", lib ? "hakmem" : "glibc", st);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* The value of key in a probe's output ("(missing)" if none). */
static const char *probe_value(const char *out, const char *key, char *buf, size_t cap)
{
    size_t k = strlen(key);
    for (const char *l = out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        if (strncmp(l, key, k) == 0 && l[k] == '=') {
            size_t n = strcspn(l + k + 1, "\n");
            if (n >= cap) n = cap - 1;
            memcpy(buf, l + k + 1, n);
            buf[n] = 0;
            return buf;
        }
    }
    return "(missing)";
}

static void test_preloaded(void)
{
    ts_check_begin("the malloc family under LD_PRELOAD, glibc's and hakmem's side by side");
    const char *lib = getenv("HAKMEM_TEST_PRELOAD");
    if (lib == NULL || access(lib, R_OK) != 0) {
        printf("   skipped: HAKMEM_TEST_PRELOAD does not name libhakmem.so (ctest sets it)\n");
        return;
    }
    static char g[16384], h[16384];
    bool gok = run_probe(NULL, g, sizeof g), hok = run_probe(lib, h, sizeof h);
    CHECK(gok, "glibc: the probe failed");
    CHECK(hok, "hakmem: the probe failed (a crash or a hang in a fork child?)");
    CHECK(strstr(g, "atexit-handler-done") != NULL, "glibc: no child's atexit handler ran to its end");
    CHECK(strstr(h, "atexit-handler-done") != NULL, "hakmem: no child's atexit handler ran to its end");
    printf("   %-66s %-38s %s\n", "call", "glibc", "hakmem");
    for (size_t i = 0; i < NEXPECT; i++) {
        char gb[128], hb[128];
        const char *gv = probe_value(g, probe_expect[i].key, gb, sizeof gb);
        const char *hv = probe_value(h, probe_expect[i].key, hb, sizeof hb);
        const char *want = probe_expect[i].hakmem ? probe_expect[i].hakmem : gv;
        bool diff = strcmp(gv, hv) != 0;
        printf("   %-66s %-38s %s%s\n", probe_expect[i].key, gv, hv, diff ? "   (differs)" : "");
        if (probe_expect[i].why != NULL && diff) printf("      why: %s\n", probe_expect[i].why);
        if (probe_expect[i].glibc != NULL)
            CHECK(strcmp(gv, probe_expect[i].glibc) == 0, "glibc: %s = %s, expected %s", probe_expect[i].key, gv,
                  probe_expect[i].glibc);
        CHECK(strcmp(hv, want) == 0, "hakmem: %s = %s, expected %s%s", probe_expect[i].key, hv, want,
              probe_expect[i].hakmem ? "" : " (glibc's)");
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--probe") == 0)
        return probe_main();
#if defined(HAKMEM_TSAN) || defined(HAKMEM_ASAN)
    /* A sanitizer owns malloc and its own fork handling; the address-space
     * limit does not fit its shadow memory. */
    printf("unit_glibc_compat: skipped under a sanitizer\n");
    return 77;
#endif
    test_fork_in_signal_handler();
    test_posix_memalign_errno();
    test_contracts();
    test_preloaded();
    return ts_check_finish("unit_glibc_compat");
}
