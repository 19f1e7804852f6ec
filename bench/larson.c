/* larson.c - the Larson & Krishnan server benchmark, as published.
 *
 *   larson sleep_cnt min_size max_size chunks_per_thread rounds seed threads
 *
 * Follows the multi-threaded C version (malloc and free) of larson.cpp as
 * the allocator benchmark suites publish it (mimalloc-bench's
 * bench/larson), written again here; only the differences listed below
 * are ours.
 *
 *  - main warms up: it allocates threads * chunks_per_thread blocks of
 *    random size in [min_size, max_size), shuffles them, and replaces a
 *    random one 4 * threads * chunks_per_thread times; then it starts one
 *    thread per slice of chunks_per_thread blocks and starts the clock;
 *  - a thread runs chunks_per_thread * rounds iterations, each: free the
 *    block at a random slot of its slice, malloc a new random-size block
 *    into the slot, write 'a' at its byte 0, read byte 0 back (volatile),
 *    write 'b' at byte 1; it stops early once main raises the stop flag;
 *  - then it creates a successor thread on the same slice and returns,
 *    unjoined: nothing orders the successor's first free (of a block the
 *    predecessor allocated) after the predecessor's exit;
 *  - main sleeps sleep_cnt seconds, raises the stop flag, waits until
 *    every slice's current thread has finished, stops the clock and prints
 *
 *        Throughput = N operations per second, relative time: Ts.
 *
 *    where N is the mallocs performed (the frees are not counted) per
 *    second of the timed window, and T is 1e9 / N.
 *
 * Memory: as in the original, the slices (its thread_data, field for
 * field) are an array on main's stack and the table of blocks is static;
 * none comes from the allocator under test.  Where one slice's counters,
 * bumped every iteration, share a cache line with the fields the next
 * slice's thread reads every iteration decides much of the loop's time:
 * with the counters at the end of each slice instead of its start, and
 * the slices from calloc, the loop at 2 threads ran at half the original's
 * speed under every allocator.  The original's stack moves by a random
 * multiple of 16 bytes from run to run, and with it which fields share a
 * line: at 2 threads one placement in four has the slices share none, and
 * ran 1.4x faster than the others under every allocator.  Here the slices
 * start on a cache line, so every run lays them out the same way (one of
 * the three placements with sharing), and paired runs compare allocators,
 * not placements.
 *
 * Random numbers: the original's lran2 (Wolfram Gloger's generator), seeded
 * from `seed` for main, and from main's stream for each slice, in the
 * original's order, so the block sizes and victims are the original's.
 *
 * Ours: the threads are created detached (the original leaves them
 * joinable and never joins them, which keeps every exited thread's stack
 * mapped; that changes nothing in the order of frees); main waits for the
 * last threads to exit instead of sleeping 2.5 s; a failed malloc or
 * pthread_create is reported, not asserted.  The loop checks nothing else:
 * a block's contents are checked by stress/stress_larson, where checks
 * belong (an extra read of a victim before its free would bring it into
 * the cache and hide the allocator's own misses).
 *
 * LARSON_VERBOSE=1 adds a summary on stderr (threads created, frees).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/clock.h"

/* ------------------------------------------------------------------ lran2 */

#define LRAN2_MAX 714025L
#define LRAN2_IA  1366L
#define LRAN2_IC  150889L

typedef struct lran2 {
    long x, y, v[97];
} lran2_t;

static void lran2_init(lran2_t *d, long seed)
{
    long x = (LRAN2_IC - seed) % LRAN2_MAX;
    if (x < 0)
        x = -x;
    for (int j = 0; j < 97; j++) {
        x = (LRAN2_IA * x + LRAN2_IC) % LRAN2_MAX;
        d->v[j] = x;
    }
    d->x = (LRAN2_IA * x + LRAN2_IC) % LRAN2_MAX;
    d->y = d->x;
}

static inline long lran2(lran2_t *d)
{
    int j = (int)(d->y % 97);
    d->y = d->v[j];
    d->x = (LRAN2_IA * d->x + LRAN2_IC) % LRAN2_MAX;
    d->v[j] = d->x;
    return d->y;
}

/* ----------------------------------------------------------------- slices */

/* One slice of the blocks and the chain of threads that works on it: the
 * original's thread_data, field for field and in its order, so that the
 * slices' fields share cache lines as the original's do (the counters a
 * thread bumps every iteration sit near the start of its slice, the
 * generator's state at its end).  `alive` is ours, in the padding after
 * `finished`, so the size is the original's.  The fields but `finished`
 * and `alive` belong to the slice's current thread; a thread hands them to
 * its successor by creating it (pthread_create orders the two).  The
 * counters are relaxed atomics, so that main may read them while a late
 * successor runs (as the original reads them). */
typedef struct slice {
    int threadno;
    int num_blocks;         /* iterations per thread */
    int seed;
    int min_size, max_size;
    char **array;
    size_t *blksize;
    int asize;
    atomic_long allocs, frees, threads;
    long bytes_alloced;     /* the original's, never written */
    atomic_int finished;    /* the current thread left its loop */
    atomic_int alive;       /* threads created and not yet returned */
    lran2_t rgen;
} slice_t;

_Static_assert(sizeof(slice_t) == 880, "a slice is the size of the original's thread_data");

#define MAX_THREADS 1024    /* the original's is 100 */
#define MAX_BLOCKS 1000000  /* the original's */

static atomic_int stopflag;
/* The blocks of all slices and their sizes: static, as the original's. */
static char *blkp[MAX_BLOCKS];
static size_t blksize[MAX_BLOCKS];
static atomic_long spawn_failures;

static void *exercise_heap(void *arg);

static void bump(atomic_long *c) { atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed); }

static int start_thread(slice_t *s)
{
    pthread_attr_t pa;
    pthread_t pt;
    pthread_attr_init(&pa);
    pthread_attr_setscope(&pa, PTHREAD_SCOPE_SYSTEM);
    pthread_attr_setdetachstate(&pa, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add_explicit(&s->alive, 1, memory_order_relaxed);
    int rc = pthread_create(&pt, &pa, exercise_heap, s);
    pthread_attr_destroy(&pa);
    if (rc != 0)
        atomic_fetch_sub_explicit(&s->alive, 1, memory_order_relaxed);
    return rc;
}

static void *exercise_heap(void *arg)
{
    slice_t *s = arg;
    if (atomic_load_explicit(&stopflag, memory_order_relaxed)) {
        atomic_store_explicit(&s->finished, 1, memory_order_release);
        atomic_fetch_sub_explicit(&s->alive, 1, memory_order_release);
        return NULL;
    }
    atomic_store_explicit(&s->finished, 0, memory_order_relaxed);
    bump(&s->threads);
    int range = s->max_size - s->min_size;

    for (int cblks = 0; cblks < s->num_blocks; cblks++) {
        int victim = (int)(lran2(&s->rgen) % s->asize);
        free(s->array[victim]);
        bump(&s->frees);
        size_t blk_size = (size_t)(range == 0 ? s->min_size : s->min_size + lran2(&s->rgen) % range);
        char *p = malloc(blk_size);
        s->array[victim] = p;
        s->blksize[victim] = blk_size;
        if (p == NULL) {
            fprintf(stderr, "larson: malloc(%zu) failed\n", blk_size);
            abort();
        }
        bump(&s->allocs);
        /* Write something! */
        volatile char *chptr = p;
        *chptr++ = 'a';
        volatile char ch = *p;
        (void)ch;
        *chptr = 'b';
        if (atomic_load_explicit(&stopflag, memory_order_relaxed))
            break;
    }

    atomic_store_explicit(&s->finished, 1, memory_order_release);
    if (!atomic_load_explicit(&stopflag, memory_order_relaxed) && start_thread(s) != 0) {
        /* No successor: the slice stops here (the original asserts nothing
         * and loses the slice the same way). */
        atomic_fetch_add_explicit(&spawn_failures, 1, memory_order_relaxed);
    }
    atomic_fetch_sub_explicit(&s->alive, 1, memory_order_release);
    return NULL;
}

/* ------------------------------------------------------------------- main */

/* A new random-size block into slot c of the warm-up. */
static void warm_block(lran2_t *rgen, char **blkp, size_t *blksize, long c, long min_size, long range)
{
    size_t sz = (size_t)(range == 0 ? min_size : min_size + lran2(rgen) % range);
    blkp[c] = malloc(sz);
    blksize[c] = sz;
    if (blkp[c] == NULL) {
        fprintf(stderr, "larson: malloc(%zu) failed in the warm-up\n", sz);
        exit(1);
    }
}

static void warmup(lran2_t *rgen, char **blkp, size_t *blksize, long num_chunks, long min_size, long range)
{
    for (long c = 0; c < num_chunks; c++)
        warm_block(rgen, blkp, blksize, c, min_size, range);
    for (long c = num_chunks; c > 0; c--) {  /* a random permutation */
        long victim = lran2(rgen) % c;
        char *tmp = blkp[victim];
        size_t tmp_sz = blksize[victim];
        blkp[victim] = blkp[c - 1];
        blksize[victim] = blksize[c - 1];
        blkp[c - 1] = tmp;
        blksize[c - 1] = tmp_sz;
    }
    for (long c = 0; c < 4 * num_chunks; c++) {
        long victim = lran2(rgen) % num_chunks;
        free(blkp[victim]);
        warm_block(rgen, blkp, blksize, victim, min_size, range);
    }
}

static long parse_long(const char *s, const char *what, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "larson: %s must be an integer in [%ld, %ld], got '%s'\n", what, lo, hi, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr,
                "usage: %s sleep_cnt min_size max_size chunks_per_thread rounds seed threads\n"
                "  e.g. %s 2 8 1000 5000 100 4141 4\n",
                argv[0], argv[0]);
        return 2;
    }
    long sleep_cnt = parse_long(argv[1], "sleep_cnt", 1, 3600);
    long min_size = parse_long(argv[2], "min_size", 2, 1L << 30);  /* byte 1 is written */
    long max_size = parse_long(argv[3], "max_size", 2, 1L << 30);
    long chperthread = parse_long(argv[4], "chunks_per_thread", 1, MAX_BLOCKS);
    long num_rounds = parse_long(argv[5], "rounds", 1, INT_MAX);
    long seed = parse_long(argv[6], "seed", INT_MIN, INT_MAX);
    long num_threads = parse_long(argv[7], "threads", 1, MAX_THREADS);
    if (max_size < min_size) {
        fprintf(stderr, "larson: need min_size <= max_size (sizes are drawn from [min, max))\n");
        return 2;
    }
    long range = max_size - min_size;
    long num_chunks = num_threads * chperthread;
    if (num_chunks > MAX_BLOCKS || num_rounds * chperthread > INT_MAX) {
        fprintf(stderr, "larson: at most %d chunks in all and %d iterations a thread\n", MAX_BLOCKS, INT_MAX);
        return 2;
    }
    /* As in the original: the slices on main's stack, the blocks' table in
     * static storage, none of them from the allocator under test.  Ours:
     * the slices start on a cache line (see "Memory" above). */
    _Alignas(64) slice_t de_area[MAX_THREADS];
    memset(de_area, 0, sizeof de_area);

    lran2_t rgen;
    lran2_init(&rgen, seed);
    warmup(&rgen, blkp, blksize, num_chunks, min_size, range);

    for (long i = 0; i < num_threads; i++) {
        slice_t *s = &de_area[i];
        s->array = &blkp[i * chperthread];
        s->blksize = &blksize[i * chperthread];
        s->threadno = (int)i + 1;
        s->num_blocks = (int)(num_rounds * chperthread);
        s->asize = (int)chperthread;
        s->min_size = (int)min_size;
        s->max_size = (int)max_size;
        s->seed = (int)lran2(&rgen);
        lran2_init(&s->rgen, s->seed);
        int rc = start_thread(s);
        if (rc != 0) {
            fprintf(stderr, "larson: pthread_create: %s\n", strerror(rc));
            exit(1);  /* not return: the slices on this frame stay valid for the threads started */
        }
    }
    double start = ts_now();
    ts_sleep((double)sleep_cnt);
    atomic_store_explicit(&stopflag, 1, memory_order_relaxed);
    for (long i = 0; i < num_threads; i++)
        while (!atomic_load_explicit(&de_area[i].finished, memory_order_acquire))
            sched_yield();
    double duration = ts_now() - start;

    long sum_allocs = 0, sum_frees = 0, sum_threads = 0;
    for (long i = 0; i < num_threads; i++) {
        sum_allocs += atomic_load_explicit(&de_area[i].allocs, memory_order_relaxed);
        sum_frees += atomic_load_explicit(&de_area[i].frees, memory_order_relaxed);
        sum_threads += atomic_load_explicit(&de_area[i].threads, memory_order_relaxed);
    }
    double throughput = (double)sum_allocs / duration;
    printf("Throughput = %.0f operations per second, relative time: %.3fs.\n", throughput, 1.0e9 / throughput);
    fflush(stdout);

    /* Untimed: the last threads return before the process exits (the
     * original sleeps 2.5 s for them). */
    for (long i = 0; i < num_threads; i++)
        while (atomic_load_explicit(&de_area[i].alive, memory_order_acquire) != 0)
            sched_yield();
    const char *verbose = getenv("LARSON_VERBOSE");
    if (verbose != NULL && *verbose != 0 && *verbose != '0')
        fprintf(stderr, "larson: threads=%ld duration=%.3fs allocs=%ld frees=%ld threads-created=%ld spawn-failures=%ld\n",
                num_threads, duration, sum_allocs, sum_frees, sum_threads,
                atomic_load_explicit(&spawn_failures, memory_order_relaxed));
    return 0;
}
