/* stress_prodcons - producer-consumer rings over hakmem.
 *
 * Every thread is both producer and consumer.  Thread i owns one SPSC ring to
 * every other thread j (ring[i][j]).  In its loop it
 *   - allocates blocks (sizes across all classes, large blocks rarely, malloc
 *     or calloc), fills each with its pattern and sends it to a random other
 *     thread, which checks and frees it: a remote free;
 *   - keeps a small private set of blocks it replaces at random: local frees,
 *     and, when the replaced block came from another thread, remote frees of a
 *     block that stayed live for a while;
 *   - forwards some received blocks to a third thread (two hops), so a block
 *     is freed by a thread that is neither its allocator nor its first
 *     receiver.
 * Every block is pattern-checked before it is freed or forwarded.  After the
 * timed phase each thread stops producing, announces it, and drains its
 * inbound rings until every producer has announced and the rings are empty.
 * Then the hakmem counters must balance (allocs == frees, live_bytes back).
 */
#include "stress_common.h"

static const char *prog = "stress_prodcons";

typedef struct {
    st_common c;
    int keep;       /* private blocks per thread */
    int send_pm;    /* per mille of allocations sent to another thread */
    int forward_pm; /* per mille of received blocks forwarded again */
} config;

typedef struct {
    unsigned id;
    pthread_t th;
    uint64_t ops, allocs, frees, cross_frees, sent, forwarded, ring_full, large;
} worker;

static config cfg = {
    .c = {.seconds = 3, .threads = 4, .large_pm = 1, .max_large_kib = 4096,
          .max_mapped_mib = 4096, .mapped_per_live = 4},
    .keep = 256,
    .send_pm = 600,
    .forward_pm = 150,
};
static st_ring *rings;          /* rings[from * T + to] */
static _Atomic int producers_done;
static pthread_barrier_t start_barrier;
static double deadline;

static inline st_ring *ring(unsigned from, unsigned to)
{
    return &rings[(size_t)from * (unsigned)cfg.c.threads + to];
}

static void free_block(worker *w, st_block *b, st_rng *r, const char *where)
{
    st_check_free(prog, where, b, r);
    w->frees++;
    w->ops++;
    if (b->owner != w->id)
        w->cross_frees++;
}

static unsigned drain(worker *w, st_block *keep, st_rng *r, bool producing);

/* Try to send `b` to another thread; on a full ring, free it here. */
static void send_or_free(worker *w, st_block *b, st_rng *r, unsigned not_to)
{
    unsigned T = (unsigned)cfg.c.threads;
    if (T > 1) {
        unsigned to;
        do
            to = (unsigned)st_rng_below(r, T);
        while (to == w->id || (to == not_to && T > 2));
        b->hops++;
        /* A full ring: take what others sent us (so two threads sending to
         * each other cannot wait on each other), let the receiver run, and
         * try again a few times before freeing the block here. */
        for (int attempt = 0; attempt < 4; attempt++) {
            if (st_ring_push(ring(w->id, to), b))
                return;
            if (drain(w, NULL, r, false) == 0) /* frees only: keep set unused */
                st_idle();
        }
        b->hops--;
        w->ring_full++;
    }
    free_block(w, b, r, "(freed by sender, ring full)");
}

/* Take what others sent; free it, keep it, or forward it.  Returns the
 * number of blocks taken. */
static unsigned drain(worker *w, st_block *keep, st_rng *r, bool producing)
{
    unsigned T = (unsigned)cfg.c.threads, taken = 0;
    st_block b;
    for (unsigned from = 0; from < T; from++) {
        if (from == w->id)
            continue;
        int n = 0;
        while (n++ < ST_RING_CAP && st_ring_pop(ring(from, w->id), &b)) {
            taken++;
            st_check(prog, "on receipt", &b);
            if (producing && b.hops < 2 && st_rng_permille(r, (unsigned)cfg.forward_pm)) {
                send_or_free(w, &b, r, from);
                w->forwarded++;
            } else if (producing && st_rng_below(r, 8) == 0) {
                /* keep it for a while: freed later, after more traffic */
                st_block *slot = &keep[st_rng_below(r, (uint64_t)cfg.keep)];
                if (slot->p)
                    free_block(w, slot, r, "(replaced in keep set)");
                *slot = b;
            } else {
                free_block(w, &b, r, "(freed by receiver)");
            }
        }
    }
    return taken;
}

static void *thread_main(void *arg)
{
    worker *w = arg;
    st_rng r;
    uint64_t tagc = 0;
    st_rng_init(&r, cfg.c.seed, w->id);
    st_block *keep = st_xcalloc((size_t)cfg.keep, sizeof *keep);
    size_t max_large = st_max_large(&cfg.c);

    pthread_barrier_wait(&start_barrier);
    for (uint64_t it = 0;; it++) {
        if ((it & 63) == 0) {
            if (st_now() >= deadline || st_has_failed())
                break;
            if (w->id == 0 && (it & 4095) == 0)
                st_check_mapped(prog, &cfg.c);
        }
        st_block b;
        size_t size = st_random_size(&r, (unsigned)cfg.c.large_pm, max_large);
        st_alloc_fill(prog, &b, size, st_new_tag(&tagc, w->id), w->id, &r);
        w->allocs++;
        w->ops++;
        if (size > ST_MAX_SMALL)
            w->large++;
        if (st_rng_permille(&r, (unsigned)cfg.send_pm)) {
            w->sent++;
            send_or_free(w, &b, &r, w->id);
        } else {
            st_block *slot = &keep[st_rng_below(&r, (uint64_t)cfg.keep)];
            if (slot->p)
                free_block(w, slot, &r, "(replaced in keep set)");
            *slot = b;
        }
        if ((it & 7) == 0)
            drain(w, keep, &r, true);
    }

    /* Stop producing; drain until every producer stopped and rings are empty.
     * A producer's pushes happen-before its release increment, and the last
     * increment is seen by our acquire load, so one drain after seeing all
     * producers done takes everything that was ever sent to us. */
    atomic_fetch_add_explicit(&producers_done, 1, memory_order_release);
    for (;;) {
        bool all = atomic_load_explicit(&producers_done, memory_order_acquire) == cfg.c.threads;
        if (drain(w, keep, &r, false) == 0 && !all)
            st_idle();
        if (all)
            break;
    }
    for (int i = 0; i < cfg.keep; i++)
        if (keep[i].p)
            free_block(w, &keep[i], &r, "(final free of keep set)");
    free(keep);
    return NULL;
}

int main(int argc, char **argv)
{
    st_opt extra[] = {
        {"keep", ST_OPT_INT, &cfg.keep, "private blocks per thread"},
        {"send-permille", ST_OPT_INT, &cfg.send_pm, "allocations sent to another thread"},
        {"forward-permille", ST_OPT_INT, &cfg.forward_pm, "received blocks forwarded again"},
    };
    st_parse_args(argc, argv, prog, &cfg.c, extra, 3);
    if (cfg.keep < 1) cfg.keep = 1;
    unsigned T = (unsigned)cfg.c.threads;
    rings = st_xcalloc((size_t)T * T, sizeof *rings);
    worker *w = st_xcalloc(T, sizeof *w);
    pthread_barrier_init(&start_barrier, NULL, T + 1);

    hak_stats_t s0, s1;
    st_accounting_begin(&s0);
    for (unsigned i = 0; i < T; i++) {
        w[i].id = i;
        st_thread_create(&w[i].th, thread_main, &w[i]);
    }
    double t0 = st_now();
    deadline = t0 + cfg.c.seconds;
    pthread_barrier_wait(&start_barrier);
    uint64_t ops = 0, allocs = 0, frees = 0, cross = 0, sent = 0, fwd = 0, full = 0, large = 0;
    for (unsigned i = 0; i < T; i++) {
        pthread_join(w[i].th, NULL);
        ops += w[i].ops;
        allocs += w[i].allocs;
        frees += w[i].frees;
        cross += w[i].cross_frees;
        sent += w[i].sent;
        fwd += w[i].forwarded;
        full += w[i].ring_full;
        large += w[i].large;
    }
    double secs = st_now() - t0;
    for (size_t i = 0; i < (size_t)T * T; i++)
        if (atomic_load(&rings[i].head) != atomic_load(&rings[i].tail))
            st_fail("ring %zu not drained (test bug)", i);

    if (allocs != frees)
        st_fail("the test itself lost track of blocks: %" PRIu64 " allocated, %" PRIu64
                " freed", allocs, frees);
    st_check_accounting(prog, &s0, &s1);
    if (s1.allocs - s0.allocs < allocs)
        st_fail("hakmem counted %" PRIu64 " allocs, the test made %" PRIu64,
                s1.allocs - s0.allocs, allocs);
    if (T > 1 && cross > 0 && s1.remote_frees == s0.remote_frees)
        st_fail("%" PRIu64 " blocks were freed by a thread other than their allocator, "
                "but hakmem counted no remote free", cross);

    char extra_s[256];
    snprintf(extra_s, sizeof extra_s,
             "allocs=%" PRIu64 " cross_thread_frees=%" PRIu64 " sent=%" PRIu64
             " forwarded=%" PRIu64 " ring_full=%" PRIu64 " large=%" PRIu64,
             allocs, cross, sent, fwd, full, large);
    free(rings);
    free(w);
    pthread_barrier_destroy(&start_barrier);
    return st_finish(prog, &cfg.c, secs, ops, extra_s);
}
