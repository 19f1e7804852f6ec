/* stress_idle - an owner thread that goes idle and wakes up while other
 * threads free its blocks.
 *
 * One owner thread and --threads freer threads.  The owner runs cycles; in
 * each it
 *   - allocates --blocks blocks (20000; 2500 under TSan), mostly of
 *     16 B .. 2 KiB, --big-permille of 8 .. 32 KiB (each octave equally
 *     likely; large blocks only with --large-permille), through malloc or
 *     calloc, each filled with its pattern;
 *   - puts --local-permille of them in a private keep set, where each
 *     replaces (checks and frees) an older one: local frees, some of blocks
 *     from earlier cycles, made after an idle phase;
 *   - hands the others, in batches of --batch, to the freers through a
 *     mutex + condition-variable queue; a freer checks each block's pattern
 *     and frees it: remote frees onto the owner's slabs;
 *   - then idles, a random 0 .. --idle-ms ms in nanosleep, while the freers
 *     work.  This idle phase is the behaviour under test: a heap whose thread
 *     makes no slow-path call for a purge period is one hakmem's purger
 *     thread reclaims (takes its lock, returns the remote-freed blocks to
 *     their slabs, releases the empty ones), so the owner's next
 *     allocations, local frees and refills race with that reclaim, and the
 *     freers' remote frees race with both.  The ctests set
 *     HAKMEM_PURGE_DELAY_MS=10, so that most idle phases outlast the purge
 *     period (at the default 50 ms none would).
 * Before a cycle the owner waits on the condition variable until the queue
 * holds at most --blocks blocks (so a slow freer bounds the memory in
 * flight); that wait is another idle phase of its heap.
 *
 * The purger starts once hakmem has mapped 32 MiB (or taken back SuperSlabs
 * it had purged, which this program need not do).  So the owner first
 * allocates --prime-mib (40) MiB in 4 .. 16 KiB blocks and holds them across
 * the first idle phase; at the start of the second cycle it hands three in
 * four to the freers (in batches of their own) and frees the rest itself.
 * The prime blocks carry a stamp (fill.h: the first and last 16 bytes and a
 * word in every page), not the whole pattern: writing 40 MiB of pattern took
 * TSan 1.5 to 7 s, most of a run.  It checks hakmem maps at least 32 MiB
 * once they are allocated, and main checks at the end that the purger thread
 * (named hakmem-purge) is running, unless HAKMEM_PURGE_THREAD=0: otherwise
 * the run would not have exercised what it is for.
 *
 * At --seconds the owner stops, closes the queue and frees its keep set; the
 * freers drain the queue and exit.  Then every block has been freed once,
 * and the hakmem counters must balance (allocs == frees, live_bytes back),
 * with the remote frees counted.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/clock.h"
#include "support/hak.h"
#include "support/report.h"

static const char *prog = "stress_idle";

#define OWNER_ID 0u
#define PURGER_MIN_MAPPED (32 * TS_MIB) /* hakmem starts its purger thread past this */

/* Under TSan an allocation with its pattern costs some twenty times more: a
 * cycle of 20000 blocks took 400 ms there and a 3 s run had 6 idle phases.
 * Smaller cycles keep the number of idle phases, what the test is about,
 * near the other builds' (about 80 in Release, 50 under ASan). */
#if defined(HAKMEM_TSAN)
#define DEFAULT_BLOCKS 2500
#else
#define DEFAULT_BLOCKS 20000
#endif

typedef struct {
    ts_stress_opts c; /* c.threads: the freers (the owner comes on top) */
    int blocks;       /* allocated per cycle */
    int idle_ms;      /* longest idle phase */
    int batch;        /* blocks per batch handed to the freers */
    int keep;         /* the owner's keep set */
    int local_pm;     /* allocations put in the keep set, per mille */
    int big_pm;       /* 8 .. 32 KiB blocks, per mille */
    int prime_mib;    /* held across the first idle phase */
} config;

static config cfg = {
    .c = TS_STRESS_DEFAULTS(0, 1024),
    .blocks = DEFAULT_BLOCKS,
    .idle_ms = 40,
    .batch = 256,
    .keep = 1024,
    .local_pm = 150,
    .big_pm = 15,
    .prime_mib = 40,
};

typedef struct {
    ts_worker base; /* id (0: the owner), thread, ops, allocs, frees, cross_frees */
    uint64_t batches;  /* handed (owner) or taken (freer) */
    uint64_t cycles, idle_ms, waits, prime_blocks; /* the owner's */
} worker;

/* ------------------------------------------------------------------ queue */

/* A batch of blocks on its way from the owner to a freer (system heap). */
typedef struct batch {
    struct batch *next;
    int n;
    bool prime;    /* of prime blocks: stamped, not patterned */
    ts_block b[];
} batch_t;

/* Every field under mu.  The owner's pattern writes happen-before a freer's
 * checks through mu (push unlocks after the writes, pop locks before the
 * reads).  nonempty: a batch was queued or the queue closed (freers wait);
 * drained: a batch was taken (the owner waits, see queue_wait_below). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t nonempty, drained;
    batch_t *head, *tail;
    size_t queued; /* blocks in the queued batches */
    bool closed;   /* the owner hands nothing more */
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
       NULL, NULL, 0, false};

static void queue_push(batch_t *bt)
{
    pthread_mutex_lock(&q.mu);
    bt->next = NULL;
    if (q.tail)
        q.tail->next = bt;
    else
        q.head = bt;
    q.tail = bt;
    q.queued += (size_t)bt->n;
    pthread_cond_signal(&q.nonempty);
    pthread_mutex_unlock(&q.mu);
}

/* The next batch; NULL once the queue is closed and empty. */
static batch_t *queue_pop(void)
{
    pthread_mutex_lock(&q.mu);
    while (q.head == NULL && !q.closed)
        pthread_cond_wait(&q.nonempty, &q.mu);
    batch_t *bt = q.head;
    if (bt) {
        q.head = bt->next;
        if (q.head == NULL)
            q.tail = NULL;
        q.queued -= (size_t)bt->n;
        pthread_cond_signal(&q.drained);
    }
    pthread_mutex_unlock(&q.mu);
    return bt;
}

/* Wait until at most `limit` blocks are queued; returns whether it waited. */
static bool queue_wait_below(size_t limit)
{
    bool waited = false;
    pthread_mutex_lock(&q.mu);
    while (q.queued > limit) {
        waited = true;
        pthread_cond_wait(&q.drained, &q.mu);
    }
    pthread_mutex_unlock(&q.mu);
    return waited;
}

static void queue_close(void)
{
    pthread_mutex_lock(&q.mu);
    q.closed = true;
    pthread_cond_broadcast(&q.nonempty);
    pthread_mutex_unlock(&q.mu);
}

/* ------------------------------------------------------------------ owner */

static ts_team team;

static size_t idle_size(ts_rng *r, size_t max_large)
{
    if (cfg.c.large_pm && ts_rng_permille(r, (unsigned)cfg.c.large_pm))
        return ts_rng_size_octaves(r, TS_MAX_SMALL + 1, max_large);
    if (ts_rng_permille(r, (unsigned)cfg.big_pm))
        return ts_rng_size_octaves(r, 8 * TS_KIB, 32 * TS_KIB);
    return ts_rng_size_octaves(r, 16, 2 * TS_KIB);
}

static void owner_alloc(worker *w, ts_block *b, size_t size, uint64_t *tagc, ts_rng *r)
{
    ts_alloc_fill(prog, b, size, ts_new_tag(tagc, OWNER_ID), OWNER_ID, r);
    w->base.allocs++;
    w->base.ops++;
}

/* A prime block: allocated, checked fresh and stamped. */
static void prime_alloc(worker *w, ts_block *b, size_t size, uint64_t *tagc)
{
    void *p = hak_malloc(size);
    ts_check_fresh(prog, "hak_malloc", p, size, 0);
    *b = (ts_block){.p = p, .size = size, .tag = ts_new_tag(tagc, OWNER_ID), .owner = OWNER_ID,
                    .api = TS_API_MALLOC};
    ts_stamp_fill(p, size, b->tag);
    w->base.allocs++;
    w->base.ops++;
}

/* Check a prime block's stamp and free it on behalf of w, counted as
 * ts_worker_free counts. */
static void prime_free(ts_worker *w, ts_block *b, const char *where)
{
    if (!ts_stamp_check(b->p, b->size, b->tag))
        ts_die("%s: prime block %p of %zu bytes %s: its stamp was overwritten (handed out "
               "twice, or written by the allocator while live)", prog, b->p, b->size, where);
    hak_free(b->p);
    b->p = NULL;
    w->frees++;
    w->ops++;
    if (b->owner != w->id)
        w->cross_frees++;
}

/* Add b to the batch being filled (a new one: of prime blocks or not, as
 * `prime` says; a batch holds one kind); a full batch goes to the queue. */
static void hand(worker *w, batch_t **cur, const ts_block *b, bool prime)
{
    if (*cur == NULL) {
        *cur = ts_xcalloc(1, sizeof(batch_t) + (size_t)cfg.batch * sizeof(ts_block));
        (*cur)->prime = prime;
    }
    (*cur)->b[(*cur)->n] = *b;
    (*cur)->b[(*cur)->n].hops = 1;
    if (++(*cur)->n == cfg.batch) {
        queue_push(*cur);
        *cur = NULL;
        w->batches++;
    }
}

static void hand_rest(worker *w, batch_t **cur)
{
    if (*cur) {
        queue_push(*cur);
        *cur = NULL;
        w->batches++;
    }
}

/* The prime blocks: three in four to the freers, the rest freed here.
 * Called with no batch being filled. */
static void release_prime(worker *w, ts_block *prime, size_t n)
{
    batch_t *cur = NULL;
    for (size_t i = 0; i < n; i++) {
        if (i % 4 == 0)
            prime_free(&w->base, &prime[i], "freed by the owner");
        else
            hand(w, &cur, &prime[i], true);
    }
    hand_rest(w, &cur);
    free(prime);
}

static void owner_run(worker *w)
{
    ts_rng r;
    uint64_t tagc = 0;
    ts_rng_init(&r, cfg.c.seed, OWNER_ID);
    ts_block *keep = ts_xcalloc((size_t)cfg.keep, sizeof *keep);
    size_t max_large = ts_stress_max_large(&cfg.c);
    batch_t *cur = NULL;

    ts_team_wait_start(&team);

    /* Enough mapped for the purger to start; held across the first idle. */
    size_t prime_target = (size_t)cfg.prime_mib * TS_MIB, prime_bytes = 0, n_prime = 0;
    ts_block *prime = ts_xcalloc(prime_target / (4 * TS_KIB) + 1, sizeof *prime);
    while (prime_bytes < prime_target) {
        size_t size = ts_rng_size_octaves(&r, 4 * TS_KIB, 16 * TS_KIB);
        prime_alloc(w, &prime[n_prime++], size, &tagc);
        prime_bytes += size;
    }
    w->prime_blocks = n_prime;
    hak_stats_t s;
    hak_stats_get(&s);
    if (prime_target >= PURGER_MIN_MAPPED && s.mapped_bytes < PURGER_MIN_MAPPED)
        ts_fail("%s: hakmem maps %" PRIu64 " MiB after %d MiB of prime blocks: under the "
                "%zu MiB its purger thread needs to start", prog, s.mapped_bytes / TS_MIB,
                cfg.prime_mib, PURGER_MIN_MAPPED / TS_MIB);

    for (;;) {
        if (ts_team_time_up(&team))
            break;
        if (prime && w->cycles > 0) {
            release_prime(w, prime, n_prime);
            prime = NULL;
        }
        if (queue_wait_below((size_t)cfg.blocks))
            w->waits++;
        for (int i = 0; i < cfg.blocks; i++) {
            if ((i & 1023) == 1023 && ts_team_time_up(&team))
                break;
            ts_block b;
            owner_alloc(w, &b, idle_size(&r, max_large), &tagc, &r);
            if (ts_rng_permille(&r, (unsigned)cfg.local_pm))
                ts_keep_put(prog, &w->base, keep, cfg.keep, &b, &r); /* may free locally */
            else
                hand(w, &cur, &b, false);
        }
        hand_rest(w, &cur);
        w->cycles++;
        /* The idle phase: the workload under test, not a synchronisation
         * (every hand-over above goes through the queue's mutex). */
        unsigned ms = (unsigned)ts_rng_below(&r, (uint64_t)cfg.idle_ms + 1);
        ts_sleep(ms / 1000.0);
        w->idle_ms += ms;
    }
    if (prime)
        release_prime(w, prime, n_prime);
    queue_close();
    ts_keep_release(prog, &w->base, keep, cfg.keep, &r);
}

/* ------------------------------------------------------------------ freers */

static void freer_run(worker *w)
{
    ts_rng r;
    ts_rng_init(&r, cfg.c.seed, w->base.id);
    ts_team_wait_start(&team);
    batch_t *bt;
    while ((bt = queue_pop()) != NULL) {
        for (int i = 0; i < bt->n; i++) {
            if (bt->prime)
                prime_free(&w->base, &bt->b[i], "freed by a freer thread");
            else
                ts_worker_free(prog, &w->base, &bt->b[i], &r, "(freed by a freer thread)");
        }
        free(bt);
        w->batches++;
        if (w->base.id == 1 && (w->batches & 63) == 0)
            ts_check_mapped(prog, &cfg.c);
    }
}

static void *thread_main(void *arg)
{
    worker *w = arg;
    if (w->base.id == OWNER_ID)
        owner_run(w);
    else
        freer_run(w);
    return NULL;
}

/* Is a thread of this process named `name` (/proc/self/task/<tid>/comm)? */
static bool thread_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[64];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, comm, sizeof comm - 1);
        close(fd);
        if (n <= 0)
            continue;
        comm[n] = '\0';
        comm[strcspn(comm, "\n")] = '\0';
        found = strcmp(comm, name) == 0;
    }
    closedir(d);
    return found;
}

int main(int argc, char **argv)
{
    ts_opt extra[] = {
        {"blocks", TS_OPT_INT, &cfg.blocks, "blocks the owner allocates per cycle"},
        {"idle-ms", TS_OPT_INT, &cfg.idle_ms, "longest idle phase of the owner, ms"},
        {"batch", TS_OPT_INT, &cfg.batch, "blocks per batch handed to the freers"},
        {"keep", TS_OPT_INT, &cfg.keep, "the owner's private blocks"},
        {"local-permille", TS_OPT_INT, &cfg.local_pm, "allocations kept (and freed) by the owner"},
        {"big-permille", TS_OPT_INT, &cfg.big_pm, "blocks of 8 .. 32 KiB"},
        {"prime-mib", TS_OPT_INT, &cfg.prime_mib, "MiB held across the first idle phase"},
    };
    cfg.c.threads = 3;
    ts_stress_parse_args(argc, argv, prog, &cfg.c, extra, TS_COUNT(extra));
    if (cfg.blocks < 1) cfg.blocks = 1;
    if (cfg.batch < 1) cfg.batch = 1;
    if (cfg.keep < 1) cfg.keep = 1;
    unsigned n = (unsigned)cfg.c.threads + 1; /* the owner and the freers */
    worker *w = ts_xcalloc(n, sizeof *w);

    hak_stats_t s0, s1;
    ts_worker sum;
    double secs = ts_team_run(&team, (int)n, w, sizeof *w, thread_main, cfg.c.seconds, &s0, &sum);
    if (q.head != NULL || q.queued != 0)
        ts_fail("%s: the queue was not drained (test bug)", prog);

    /* The purger starts once and runs until exit: running now if it ever
     * started.  Expected unless turned off or the prime too small to map
     * what it needs. */
    const char *pt = getenv("HAKMEM_PURGE_THREAD");
    bool want_purger = (pt == NULL || ts_env_flag("HAKMEM_PURGE_THREAD")) &&
                       (size_t)cfg.prime_mib * TS_MIB >= PURGER_MIN_MAPPED;
    bool purger = thread_named("hakmem-purge");
    if (want_purger && !purger)
        ts_fail("%s: hakmem's purger thread (hakmem-purge) is not running after the run: the "
                "owner's idle phases were not exposed to it", prog);
    /* And it reclaimed the owner's heap in some of them (the blocks freed
     * into it while it idled, or its free pages). */
    hak_stats_t sr = ts_stats_now();
    if (want_purger && sr.idle_reclaims == 0)
        ts_fail("%s: the purger never reclaimed the idle owner's heap (idle_reclaims=0)", prog);

    ts_check_test_balance(sum.allocs, sum.frees);
    ts_check_accounting(prog, &s0, &s1);
    ts_check_counted_allocs(&s0, &s1, sum.allocs, "");
    if (ts_counting() && sum.cross_frees > 0 && s1.remote_frees == s0.remote_frees)
        ts_fail("%" PRIu64 " blocks were freed by a thread other than their allocator, "
                "but hakmem counted no remote free", sum.cross_frees);

    worker o = w[OWNER_ID];
    uint64_t taken = 0;
    for (unsigned i = 1; i < n; i++)
        taken += w[i].batches;
    if (taken != o.batches)
        ts_fail("%s: %" PRIu64 " batches handed, %" PRIu64 " taken (test bug)", prog, o.batches,
                taken);
    free(w);
    return ts_stress_finishf(prog, &cfg.c, secs, sum.ops,
                      "cycles=%" PRIu64 " allocs=%" PRIu64 " prime=%" PRIu64
                      " cross_thread_frees=%" PRIu64 " local_frees=%" PRIu64 " batches=%" PRIu64
                      " owner_waits=%" PRIu64 " idle_ms_mean=%.1f purger=%s idle_reclaims=%" PRIu64,
                      o.cycles, sum.allocs, o.prime_blocks, sum.cross_frees,
                      sum.frees - sum.cross_frees, o.batches, o.waits,
                      o.cycles ? (double)o.idle_ms / (double)o.cycles : 0.0,
                      purger ? "running" : "absent", sr.idle_reclaims);
}
