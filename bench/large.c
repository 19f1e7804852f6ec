/* large.c - large blocks: multi-megabyte buffers, growth, cross-thread frees.
 *
 *   large threads seconds            (environment: LARGE_MODE, LARGE_ITERS)
 *
 * Models programs whose allocations are mostly large: image and media
 * buffers, decompression and I/O buffers, column chunks of an analytics
 * engine, growing arrays.  Two modes, chosen by LARGE_MODE:
 *
 *   mixed (default)  each thread keeps 8 live blocks of 256 KiB..64 MiB
 *                    (log-uniform) and replaces a random one at each step:
 *                    malloc, then write one byte in every 4 KiB page of the
 *                    new block.  25% of the steps instead grow a live block
 *                    with realloc to 1.5..2x (at most 64 MiB), check that its
 *                    first and last old bytes survived and write the new
 *                    pages.  A replaced block is not always freed by its
 *                    thread: with probability 25%*T/(T-1) (25% with one
 *                    thread) it is swapped into one of 4 shared exchange
 *                    slots (filled during setup, slot j by thread j%T), and
 *                    the block swapped out, often another thread's, is freed
 *                    instead, so about 25% of the frees are remote (printed
 *                    as remote=P%).  Live memory (the blocks and the
 *                    exchange slots) is capped at about 1 GiB overall: a new
 *                    block that would go over is made smaller (down to
 *                    256 KiB), a growth that would go over is done as a
 *                    replacement instead.
 *   buffers          each thread keeps max(4, 20/T) live buffers of 5..25 MiB
 *                    (about 300 MiB in all) and replaces a random one at each
 *                    step with a calloc'ed buffer of a new random size; it
 *                    checks that a few bytes of the new buffer (including
 *                    some page starts) are zero, then writes one byte in
 *                    every 4 KiB page.
 *
 * Every block starts with a header (magic, size, owner, tag) and carries a
 * pattern byte at every page start and at its last byte; the whole pattern
 * is checked before each free.  The live blocks are allocated (and touched)
 * before the clock starts and freed after it stops.  Each thread runs until
 * `seconds` elapse or, if LARGE_ITERS=N is set, for exactly N steps, and
 * then with 2+ threads in lockstep (a barrier after every step): the live
 * data is the sum of the threads' blocks, and when threads run unevenly its
 * peak is lower (one thread's peak is not met by the others'), so free-running
 * threads gave 4-thread mixed runs a live peak of 650-700 MiB under
 * allocators that starve one thread (glibc: one thread at step 7 while the
 * others were at 20-29) and 720-800 MiB under those that do not; with
 * lockstep every allocator meets the same live data, up to the order of
 * the exchanges within a step, so peak RSS compares.
 *
 * ops = malloc + calloc + realloc calls.  Prints one RESULT line (see
 * tests/support/bench.h) with the extras mode=..., live_peak_mib=N (the most bytes
 * live at once, setup included: the floor for any allocator's peak RSS;
 * it grows with the number of steps run, so a faster allocator meets a
 * higher one in the same seconds -- compare RSS at equal LARGE_ITERS), and
 * for mixed: reallocs=N remote=P%, and last elapsed_us=N (the steps'
 * time in microseconds: secs= has 3 decimals).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/bench.h"
#include "support/clock.h"
#include "support/rng.h"

#define PAGE 4096u
#define MAGIC 0x6C61726765626C6BULL
#define MIB ((size_t)1 << 20)

#define MIXED_LIVE 8
#define MIXED_MIN ((size_t)256 << 10)
#define MIXED_MAX ((size_t)64 << 20)
#define MIXED_CAP ((size_t)1 << 30)
#define NXCHG 4

#define BUF_TOTAL 20
#define BUF_MIN_PER_THREAD 4
#define BUF_MIN (5 * MIB)
#define BUF_MAX (25 * MIB)

enum { MODE_MIXED, MODE_BUFFERS };

typedef struct {
    uint64_t magic;
    uint64_t size;
    uint32_t owner;           /* allocating thread */
    uint32_t tag;
} hdr;

typedef struct {
    int mode;
    int nthreads;
    uint64_t iters;           /* 0: run until stopped */
    atomic_bool stop;
    pthread_barrier_t start;
    pthread_barrier_t step;   /* LARGE_ITERS with 2+ threads: lockstep */
    atomic_size_t live;       /* bytes in live blocks (+ exchange slots; mixed: reserved first) */
    atomic_size_t live_peak;  /* the most `live` has been */
    _Atomic(hdr *) xchg[NXCHG];
    uint32_t xchg_permille;   /* probability of going through the exchange */
    atomic_ullong bad;
} shared_state;

typedef struct {
    shared_state *s;
    int id;
    uint64_t seed;
    uint64_t ops, reallocs, frees, remote_frees;
    double t_end;
} worker;

static inline unsigned char pat(uint32_t tag, size_t off)
{
    uint64_t x = ((uint64_t)tag * 0x9E3779B97F4A7C15ULL + off) * 0xBF58476D1CE4E5B9ULL;
    return (unsigned char)(x >> 56) | 1;      /* never 0: calloc checks rely on it */
}

/* Writes the pattern into [from, h->size): every page start at or after
 * `from` (page 0 holds the header) and the last byte. */
static void write_pattern(hdr *h, size_t from)
{
    unsigned char *p = (unsigned char *)h;
    size_t size = h->size;
    size_t off = (from + PAGE - 1) / PAGE * PAGE;
    if (off == 0)
        off = PAGE;
    for (; off < size; off += PAGE)
        p[off] = pat(h->tag, off);
    p[size - 1] = pat(h->tag, size - 1);
}

static bool check_block(const hdr *h)
{
    if (h->magic != MAGIC || h->size < sizeof(hdr) || h->size > MIXED_MAX)
        return false;
    const unsigned char *p = (const unsigned char *)h;
    for (size_t off = PAGE; off < h->size; off += PAGE)
        if (p[off] != pat(h->tag, off))
            return false;
    return p[h->size - 1] == pat(h->tag, h->size - 1);
}

static void release(worker *w, hdr *h)
{
    if (!check_block(h)) {
        atomic_fetch_add(&w->s->bad, 1);
        fprintf(stderr, "large: block %p (thread %d) failed its check before free\n",
                (void *)h, w->id);
    } else if (h->owner != (uint32_t)w->id) {
        w->remote_frees++;
    }
    if (h->magic == MAGIC && h->size <= MIXED_MAX)
        atomic_fetch_sub(&w->s->live, (size_t)h->size);
    free(h);
    w->frees++;
}

/* Raises live_peak to at least `live` (after adding n bytes). */
static void note_live(shared_state *s, size_t n)
{
    size_t live = atomic_fetch_add(&s->live, n) + n;
    size_t peak = atomic_load_explicit(&s->live_peak, memory_order_relaxed);
    while (live > peak && !atomic_compare_exchange_weak(&s->live_peak, &peak, live))
        ;
}

static void init_block(worker *w, hdr *h, size_t size, ts_xs *r)
{
    h->magic = MAGIC;
    h->size = size;
    h->owner = (uint32_t)w->id;
    h->tag = (uint32_t)ts_xs_next(r);
    write_pattern(h, 0);
}

/* ---- buffers ---- */

static hdr *new_buffer(worker *w, ts_xs *r)
{
    size_t size = BUF_MIN + ts_xs_below(r, (uint32_t)(BUF_MAX - BUF_MIN + 1));
    unsigned char *p = calloc(1, size);
    if (!p)
        ts_bench_oom("large", size);
    w->ops++;
    bool zero = p[size - 1] == 0 && p[size / 2] == 0;
    for (size_t i = 0; i < sizeof(hdr); i++)
        zero = zero && p[i] == 0;
    for (int k = 0; k < 6; k++) {
        size_t pg = 1 + ts_xs_below(r, (uint32_t)((size - 1) / PAGE));
        zero = zero && p[pg * PAGE] == 0 && p[pg * PAGE - 1] == 0;
    }
    if (!zero) {
        atomic_fetch_add(&w->s->bad, 1);
        fprintf(stderr, "large: calloc(1, %zu) returned non-zero memory\n", size);
    }
    hdr *h = (hdr *)p;
    init_block(w, h, size, r);
    note_live(w->s, size);
    return h;
}

/* ---- mixed ---- */

/* Reserves up to `want` bytes of the live-memory cap, halving down to
 * MIXED_MIN (which is always granted: the overshoot is small). */
static size_t reserve(shared_state *s, size_t want)
{
    size_t cur = atomic_load(&s->live);
    for (;;) {
        if (cur + want > MIXED_CAP && want > MIXED_MIN) {
            want = want / 2 < MIXED_MIN ? MIXED_MIN : want / 2;
            continue;
        }
        if (atomic_compare_exchange_weak(&s->live, &cur, cur + want)) {
            note_live(s, 0);
            return want;
        }
    }
}

static bool reserve_exact(shared_state *s, size_t want)
{
    size_t cur = atomic_load(&s->live);
    while (cur + want <= MIXED_CAP)
        if (atomic_compare_exchange_weak(&s->live, &cur, cur + want)) {
            note_live(s, 0);
            return true;
        }
    return false;
}

static size_t mixed_size(ts_xs *r)
{
    unsigned shift = 18 + ts_xs_below(r, 8);               /* 256 KiB .. 32 MiB */
    size_t base = (size_t)1 << shift;
    return base + ts_xs_below(r, (uint32_t)base);          /* < 64 MiB */
}

static hdr *new_mixed(worker *w, ts_xs *r)
{
    size_t size = reserve(w->s, mixed_size(r));
    hdr *h = malloc(size);
    if (!h)
        ts_bench_oom("large", size);
    w->ops++;
    init_block(w, h, size, r);
    return h;
}

/* Frees a replaced block, or parks it in an exchange slot and frees the
 * block that was there (usually another thread's). */
static void retire_mixed(worker *w, hdr *h, ts_xs *r)
{
    shared_state *s = w->s;
    if (ts_xs_below(r, 1000) < s->xchg_permille) {
        uint32_t j = ts_xs_below(r, NXCHG);
        /* acq_rel: publish our block's contents, see the previous one's */
        h = atomic_exchange_explicit(&s->xchg[j], h, memory_order_acq_rel);
        if (!h)
            return;
    }
    release(w, h);
}

/* Grows b to 1.5..2x.  Returns false (nothing done) if it cannot grow. */
static bool grow_mixed(worker *w, hdr **slot, ts_xs *r)
{
    hdr *h = *slot;
    size_t old = h->size;
    size_t nsize = old + old / 2 + ts_xs_below(r, (uint32_t)(old / 2 + 1));
    if (nsize > MIXED_MAX)
        nsize = MIXED_MAX;
    if (nsize <= old || !reserve_exact(w->s, nsize - old))
        return false;
    uint32_t tag = h->tag;
    unsigned char first = pat(tag, PAGE), last = pat(tag, old - 1);
    unsigned char *p = realloc(h, nsize);
    if (!p)
        ts_bench_oom("large", nsize);
    w->ops++;
    w->reallocs++;
    h = (hdr *)p;
    if (h->magic != MAGIC || h->size != old || h->tag != tag || p[PAGE] != first ||
        p[old - 1] != last) {
        atomic_fetch_add(&w->s->bad, 1);
        fprintf(stderr, "large: realloc(%zu -> %zu) lost the old contents\n", old, nsize);
        /* repair the header so that the final free does not fault */
        h->magic = MAGIC;
        h->tag = tag;
        h->size = old;
        write_pattern(h, 0);
    }
    h->size = nsize;
    write_pattern(h, old);
    *slot = h;
    return true;
}

static void *run(void *arg)
{
    worker *w = arg;
    shared_state *s = w->s;
    ts_xs r;
    ts_xs_seed(&r, w->seed);
    hdr *live[BUF_TOTAL];
    int n;
    if (s->mode == MODE_BUFFERS) {
        n = BUF_TOTAL / s->nthreads;
        if (n < BUF_MIN_PER_THREAD)
            n = BUF_MIN_PER_THREAD;
        for (int i = 0; i < n; i++)
            live[i] = new_buffer(w, &r);
    } else {
        n = MIXED_LIVE;
        for (int i = 0; i < n; i++)
            live[i] = new_mixed(w, &r);
        /* fill the exchange first, or its empty slots would absorb the
         * first deposits of a short run and hide the remote frees */
        for (int j = w->id; j < NXCHG; j += s->nthreads)
            atomic_store(&s->xchg[j], new_mixed(w, &r));
    }
    w->ops = 0;               /* setup is not timed */
    w->frees = w->remote_frees = 0;

    pthread_barrier_wait(&s->start);
    for (uint64_t step = 0;; step++) {
        if (s->iters ? step >= s->iters : atomic_load_explicit(&s->stop, memory_order_relaxed))
            break;
        uint32_t i = ts_xs_below(&r, (uint32_t)n);
        if (s->mode == MODE_BUFFERS) {
            release(w, live[i]);
            live[i] = new_buffer(w, &r);
        } else if (ts_xs_below(&r, 4) == 0 && grow_mixed(w, &live[i], &r)) {
            /* grown in place of a replacement */
        } else {
            retire_mixed(w, live[i], &r);
            live[i] = new_mixed(w, &r);
        }
        if (s->iters && s->nthreads > 1)
            pthread_barrier_wait(&s->step);
    }
    w->t_end = ts_now();
    /* the final frees are all local: keep them out of remote=P% */
    uint64_t frees = w->frees, remote = w->remote_frees;
    for (int i = 0; i < n; i++)
        release(w, live[i]);
    w->frees = frees;
    w->remote_frees = remote;
    return NULL;
}

int main(int argc, char **argv)
{
    int threads;
    double secs;
    ts_bench_args(argc, argv,
                     "large blocks; LARGE_MODE=mixed (default) or buffers, "
                     "LARGE_ITERS=N for a fixed number of steps per thread",
                     &threads, &secs);
    static shared_state s;
    const char *mode = getenv("LARGE_MODE");
    if (!mode || !*mode)
        mode = "mixed";
    if (strcmp(mode, "mixed") == 0)
        s.mode = MODE_MIXED;
    else if (strcmp(mode, "buffers") == 0)
        s.mode = MODE_BUFFERS;
    else {
        fprintf(stderr, "large: LARGE_MODE must be mixed or buffers, not '%s'\n", mode);
        return 2;
    }
    const char *it = getenv("LARGE_ITERS");
    s.iters = 0;
    if (it && *it) {
        char *end;
        unsigned long long v = strtoull(it, &end, 10);
        if (*end != '\0' || v == 0) {
            fprintf(stderr, "large: LARGE_ITERS must be a positive integer\n");
            return 2;
        }
        s.iters = v;
    }
    s.nthreads = threads;
    s.xchg_permille = threads > 1 ? (uint32_t)(250 * threads / (threads - 1)) : 250;
    if (s.xchg_permille > 1000)
        s.xchg_permille = 1000;
    atomic_init(&s.stop, false);
    atomic_init(&s.live, 0);
    atomic_init(&s.live_peak, 0);
    atomic_init(&s.bad, 0);
    for (int j = 0; j < NXCHG; j++)
        atomic_init(&s.xchg[j], NULL);
    pthread_barrier_init(&s.start, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&s.step, NULL, (unsigned)threads);

    static worker w[TS_BENCH_MAX_THREADS];
    static pthread_t tid[TS_BENCH_MAX_THREADS];
    for (int i = 0; i < threads; i++) {
        w[i].s = &s;
        w[i].id = i;
        w[i].seed = ts_bench_seed(i);
        w[i].ops = w[i].reallocs = w[i].frees = w[i].remote_frees = 0;
        int rc = pthread_create(&tid[i], NULL, run, &w[i]);
        if (rc != 0) {
            fprintf(stderr, "large: pthread_create: %s\n", strerror(rc));
            return 1;
        }
    }
    pthread_barrier_wait(&s.start);
    double t0 = ts_now();
    if (!s.iters) {
        ts_sleep(secs);
        atomic_store_explicit(&s.stop, true, memory_order_relaxed);
    }
    double t_end = t0;
    uint64_t ops = 0, reallocs = 0, frees = 0, remote = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        if (w[i].t_end > t_end)
            t_end = w[i].t_end;
        ops += w[i].ops;
        reallocs += w[i].reallocs;
    }
    /* blocks left in the exchange: freed by main (counted as remote) */
    worker mainw = {.s = &s, .id = -1};
    for (int j = 0; j < NXCHG; j++) {
        hdr *h = atomic_exchange(&s.xchg[j], NULL);
        if (h)
            release(&mainw, h);
    }
    for (int i = 0; i < threads; i++) {
        frees += w[i].frees;
        remote += w[i].remote_frees;
    }
    pthread_barrier_destroy(&s.start);
    pthread_barrier_destroy(&s.step);

    char extra[192];
    size_t peak_mib = atomic_load(&s.live_peak) >> 20;
    /* elapsed_us: the steps' time to the microsecond (secs= has 3 decimals,
     * 2% of a 50 ms run of fixed steps) */
    unsigned long long us = (unsigned long long)((t_end - t0) * 1e6 + 0.5);
    if (s.mode == MODE_MIXED)
        snprintf(extra, sizeof extra, "mode=mixed live_peak_mib=%zu reallocs=%llu remote=%.1f%% elapsed_us=%llu",
                 peak_mib, (unsigned long long)reallocs, frees ? 100.0 * (double)remote / (double)frees : 0.0,
                 us);
    else
        snprintf(extra, sizeof extra, "mode=buffers live_peak_mib=%zu buffers=%d elapsed_us=%llu", peak_mib,
                 threads * (BUF_TOTAL / threads < BUF_MIN_PER_THREAD ? BUF_MIN_PER_THREAD
                                                                      : BUF_TOTAL / threads),
                 us);
    ts_bench_report("large", threads, t_end - t0, ops, extra);

    unsigned long long bad = atomic_load(&s.bad);
    if (bad) {
        fprintf(stderr, "large: %llu bad blocks\n", bad);
        return 3;
    }
    if (atomic_load(&s.live) != 0) {
        fprintf(stderr, "large: %zu live bytes left after the final frees\n",
                atomic_load(&s.live));
        return 3;
    }
    return 0;
}
