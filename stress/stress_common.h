/* stress_common.h - helpers shared by the hakmem stress programs.
 *
 * The stress programs link the prefixed API (hakmem_api) so the same sources
 * run in the normal, ThreadSanitizer and AddressSanitizer builds.  They keep
 * their own bookkeeping (rings, arrays, thread records) in the system heap,
 * never in hakmem, so that the hakmem counters describe only the blocks under
 * test.
 *
 * What is here:
 *   - st_rng: splitmix64, one per thread, seeded from --seed and the thread id;
 *   - st_random_size: sizes across every small class (1 B .. 256 KiB, biased to
 *     the small ones, with extra weight on power-of-two boundaries) and, with a
 *     probability given in per mille, large blocks (256 KiB + 1 .. a few MiB);
 *   - st_fill / st_check: a pattern derived from the block's address, its
 *     requested size and a per-allocation tag.  The tag matters: if the
 *     allocator hands the same address out twice, both owners write different
 *     patterns and whichever checks second sees the other's bytes;
 *   - st_ring: a bounded single-producer single-consumer ring of blocks, built
 *     on C11 acquire/release, used to move blocks between threads;
 *   - argument parsing (--seconds, --threads, --seed, ... with program
 *     specific options), timing, the stats snapshot and the final accounting
 *     check, and a memory ceiling so a leaking allocator fails fast instead of
 *     taking the machine down.
 *   - the end-of-run checks and the result line (st_finishf);
 *   - st_team / st_worker: the worker threads of the ring-based programs
 *     (started together, stopped at a deadline, drained to the end, joined
 *     and their counters added up) and their private keep sets.
 *
 * Every report of a failure starts with "FAIL" and the program exits non-zero.
 */
#ifndef HAKMEM_STRESS_COMMON_H
#define HAKMEM_STRESS_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hakmem.h"

#define ST_KIB ((size_t)1024)
#define ST_MIB ((size_t)1024 * 1024)
#define ST_MAX_SMALL (256 * ST_KIB) /* largest size class */
#define ST_MAX_THREADS 256

/* ------------------------------------------------------------------ timing */

static inline double st_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ----------------------------------------------------------------- failing */

/* Set once any thread found a failure; threads poll it to stop early. */
static _Atomic int st_failed;

static inline bool st_has_failed(void)
{
    return atomic_load_explicit(&st_failed, memory_order_relaxed) != 0;
}

/* Print "FAIL: <message>" to stderr and mark the run failed: the one
 * reporting path behind st_fail and st_die. */
static void st_vreport(const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    fprintf(stderr, "FAIL: %s\n", buf);
    atomic_store_explicit(&st_failed, 1, memory_order_relaxed);
}

/* Report a failure and let the program run to its end (it exits non-zero). */
static void st_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void st_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    st_vreport(fmt, ap);
    va_end(ap);
}

/* Report a failure that makes the heap untrustworthy (a corrupted block) and
 * stop the process now: continuing would only cascade. */
static void st_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void st_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    st_vreport(fmt, ap);
    va_end(ap);
    fflush(stderr);
    fflush(stdout);
    _exit(2);
}

/* --------------------------------------------------------------------- RNG */

typedef struct {
    uint64_t s;
} st_rng;

static inline uint64_t st_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline void st_rng_init(st_rng *r, uint64_t seed, uint64_t stream)
{
    r->s = st_mix64(seed ^ st_mix64(stream + 0x632BE59BD9B4E019ull));
}

static inline uint64_t st_rng_next(st_rng *r)
{
    r->s += 0x9E3779B97F4A7C15ull;
    return st_mix64(r->s);
}

/* Uniform in [0, n), n > 0. */
static inline uint64_t st_rng_below(st_rng *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)st_rng_next(r) * n) >> 64);
}

/* Uniform in [lo, hi]. */
static inline uint64_t st_rng_range(st_rng *r, uint64_t lo, uint64_t hi)
{
    return lo + st_rng_below(r, hi - lo + 1);
}

/* Probability per mille. */
static inline bool st_rng_permille(st_rng *r, unsigned pm)
{
    return st_rng_below(r, 1000) < pm;
}

/* ------------------------------------------------------------------- sizes */

/* A size in [lo, hi] with every power of two (octave) equally likely. */
static inline size_t st_size_octaves(st_rng *r, size_t lo, size_t hi)
{
    unsigned lo_bit = 63 - (unsigned)__builtin_clzll(lo);
    unsigned hi_bit = 63 - (unsigned)__builtin_clzll(hi);
    unsigned b = (unsigned)st_rng_range(r, lo_bit, hi_bit);
    size_t a = (size_t)1 << b, z = ((size_t)2 << b) - 1;
    if (a < lo) a = lo;
    if (z > hi) z = hi;
    return (size_t)st_rng_range(r, a, z);
}

/* A size near a likely class boundary: q = 2^k, 1.25, 1.5 or 1.75 x 2^k, and
 * q - 1, q, q + 1; k is mostly small (the hot classes), sometimes up to hi. */
static inline size_t st_size_boundary(st_rng *r, size_t lo, size_t hi)
{
    unsigned kmax = 63 - (unsigned)__builtin_clzll(hi | 8);
    for (;;) {
        unsigned top = st_rng_below(r, 8) == 0 || kmax < 12 ? kmax : 12;
        unsigned k = (unsigned)st_rng_range(r, 3, top);
        size_t q = ((size_t)1 << k) / 4 * st_rng_range(r, 4, 7);
        size_t s = q + (size_t)st_rng_range(r, 0, 2) - 1;
        if (s >= lo && s <= hi)
            return s;
    }
}

/* The size mix of the stress programs, biased like real programs to the
 * small classes but reaching every class: 70 % in 1 B..1 KiB, 20 % in
 * 1..16 KiB, 2 % in 16..256 KiB (each octave equally likely), 8 % on likely
 * class boundaries including 256 KiB itself.  large_pm per mille are large
 * blocks (256 KiB + 1 .. max_large), 1 in 8 of them exactly 256 KiB + 1. */
static inline size_t st_random_size(st_rng *r, unsigned large_pm, size_t max_large)
{
    if (large_pm && max_large > ST_MAX_SMALL && st_rng_permille(r, large_pm)) {
        if (st_rng_below(r, 8) == 0)
            return ST_MAX_SMALL + 1;
        return st_size_octaves(r, ST_MAX_SMALL + 1, max_large);
    }
    uint64_t d = st_rng_below(r, 100);
    if (d < 70)
        return st_size_octaves(r, 1, ST_KIB);
    if (d < 90)
        return st_size_octaves(r, ST_KIB + 1, 16 * ST_KIB);
    if (d < 92)
        return st_size_octaves(r, 16 * ST_KIB + 1, ST_MAX_SMALL);
    if (st_rng_below(r, 64) == 0)
        return ST_MAX_SMALL;
    return st_size_boundary(r, 1, ST_MAX_SMALL);
}

/* ----------------------------------------------------------------- blocks */

/* How a block was obtained: decides which sized free may release it (C23:
 * free_sized for malloc/calloc/realloc, free_aligned_sized for aligned_alloc). */
enum { ST_API_MALLOC = 0, ST_API_ALIGNED_ALLOC = 1, ST_API_OTHER = 2 };

typedef struct {
    void *p;
    size_t size;    /* requested size */
    uint64_t tag;   /* per-allocation pattern tag */
    size_t align;   /* alignment asked for (0: plain malloc family) */
    uint32_t hops;  /* times the block changed hands / was reallocated */
    uint16_t owner; /* thread that allocated it */
    uint16_t api;   /* ST_API_* */
} st_block;

/* A tag unique to this allocation (thread id in the high bits). */
static inline uint64_t st_new_tag(uint64_t *counter, unsigned tid)
{
    return ((uint64_t)(tid + 1) << 40) ^ ++*counter;
}

/* Minimum alignment a malloc-family block of `size` bytes must have: suitable
 * for any object with fundamental alignment that fits (x86-64: max_align_t is
 * 16 bytes, so 16 for size >= 16, 8 for 8..15, ...). */
static inline size_t st_min_align(size_t size)
{
    size_t a = _Alignof(max_align_t);
    while (a > 1 && a > size)
        a >>= 1;
    return a;
}

/* Pattern.  A table of ST_PAT_WORDS random 64-bit words is laid out twice in
 * a row, so any window of ST_PAT_WORDS words starting in the first copy is
 * contiguous.  A block's pattern is the window starting at word
 * seed % ST_PAT_WORDS, where the seed mixes the block's address, its size and
 * a per-allocation tag; a block longer than the window repeats it.  So fill is
 * memcpy and check is memcmp: fast natively, and fast under TSan and ASan,
 * which check a whole range per intercepted call instead of per word.  Two
 * allocations that get the same address (a block handed out twice) draw
 * different windows (equal only with probability 1 / ST_PAT_WORDS), and
 * anything the allocator writes into a live block (a free-list link, a
 * header) differs from the random words there. */
#define ST_PAT_WORDS 65536u
static uint64_t st_pat_table[2 * ST_PAT_WORDS];

__attribute__((constructor)) static void st_pat_init(void)
{
    st_rng r = {0x5DEECE66DA3C9E21ull};
    for (unsigned i = 0; i < ST_PAT_WORDS; i++)
        st_pat_table[i] = st_pat_table[i + ST_PAT_WORDS] = st_rng_next(&r);
}

static inline uint64_t st_pattern_seed(uintptr_t addr, size_t size, uint64_t tag)
{
    return st_mix64((uint64_t)addr ^ st_mix64((uint64_t)size * 0xD6E8FEB86659FD93ull ^ tag));
}

static inline const unsigned char *st_pat_window(uint64_t seed)
{
    return (const unsigned char *)&st_pat_table[seed % ST_PAT_WORDS];
}

#define ST_PAT_BYTES ((size_t)ST_PAT_WORDS * 8)

static inline void st_fill_seed(void *p, size_t size, uint64_t seed)
{
    const unsigned char *w = st_pat_window(seed);
    unsigned char *b = (unsigned char *)p;
    for (size_t off = 0; off < size; off += ST_PAT_BYTES)
        memcpy(b + off, w, size - off < ST_PAT_BYTES ? size - off : ST_PAT_BYTES);
}

static inline void st_fill(const st_block *blk)
{
    st_fill_seed(blk->p, blk->size, st_pattern_seed((uintptr_t)blk->p, blk->size, blk->tag));
}

/* Compare the first `len` bytes at p with the pattern of `seed`.  Returns the
 * offset of the first differing byte, or (size_t)-1 when all match. */
static inline size_t st_check_seed(const void *p, size_t len, uint64_t seed)
{
    const unsigned char *w = st_pat_window(seed);
    const unsigned char *b = (const unsigned char *)p;
    for (size_t off = 0; off < len; off += ST_PAT_BYTES) {
        size_t n = len - off < ST_PAT_BYTES ? len - off : ST_PAT_BYTES;
        if (memcmp(b + off, w, n) != 0) {
            for (size_t i = 0; i < n; i++)
                if (b[off + i] != w[i])
                    return off + i;
        }
    }
    return (size_t)-1;
}

/* Describe a corrupted block and stop the process. */
static void st_report_corrupt(const char *prog, const char *where, const void *p, size_t size,
                              size_t align, uint64_t tag, uint64_t seed, size_t off)
    __attribute__((noreturn));
static void st_report_corrupt(const char *prog, const char *where, const void *p, size_t size,
                              size_t align, uint64_t tag, uint64_t seed, size_t off)
{
    const unsigned char *b = (const unsigned char *)p;
    const unsigned char *w = st_pat_window(seed);
    size_t start = off & ~(size_t)7, n = size - start < 8 ? size - start : 8;
    uint64_t want = 0, got = 0;
    memcpy(&got, b + start, n);
    memcpy(&want, w + start % ST_PAT_BYTES, n);
    size_t bad = 0;
    for (size_t i = off; i < size; i++)
        bad += b[i] != w[i % ST_PAT_BYTES];
    st_die("%s: block %p size %zu align %zu tag %#" PRIx64 " corrupted %s: first bad byte at "
           "offset %zu (%zu bad bytes from there); bytes %zu..%zu hold %#018" PRIx64
           " instead of %#018" PRIx64 "%s (block handed out twice, or written while live)",
           prog, p, size, align, tag, where, off, bad, start, start + n - 1, got, want,
           n == 8 && (got >> 47) == 0 && got > 4096 ? " [looks like a pointer]" : "");
}

static inline void st_check(const char *prog, const char *where, const st_block *blk)
{
    uint64_t seed = st_pattern_seed((uintptr_t)blk->p, blk->size, blk->tag);
    size_t off = st_check_seed(blk->p, blk->size, seed);
    if (off != (size_t)-1)
        st_report_corrupt(prog, where, blk->p, blk->size, blk->align, blk->tag, seed, off);
}

/* Checks every fresh block gets: not NULL, aligned, usable size covers it. */
static inline void st_check_fresh(const char *prog, const char *api, void *p, size_t size,
                                  size_t align)
{
    if (p == NULL)
        st_die("%s: %s(%zu, align %zu) returned NULL (errno %d)", prog, api, size, align, errno);
    size_t need = align ? align : st_min_align(size);
    if ((uintptr_t)p % need)
        st_die("%s: %s(%zu) returned %p, not aligned to %zu", prog, api, size, p, need);
    size_t us = hak_malloc_usable_size(p);
    if (us < size)
        st_die("%s: %s(%zu) returned %p with malloc_usable_size %zu < size", prog, api, size, p,
               us);
}

/* Check, then free the block through one of the free entry points. */
static inline void st_check_free(const char *prog, const char *where, st_block *blk, st_rng *r)
{
    st_check(prog, where, blk);
    bool sized = st_rng_below(r, 8) == 0;
    if (sized && blk->api == ST_API_MALLOC)
        hak_free_sized(blk->p, blk->size);
    else if (sized && blk->api == ST_API_ALIGNED_ALLOC)
        hak_free_aligned_sized(blk->p, blk->align, blk->size);
    else
        hak_free(blk->p);
    blk->p = NULL;
}

/* Dies unless the size bytes at p (just returned by api) are all zero. */
static inline void st_check_zero(const char *prog, const char *api, const void *p, size_t size)
{
    static const unsigned char zero[4096];
    const unsigned char *b = (const unsigned char *)p;
    for (size_t off = 0; off < size; off += sizeof zero) {
        size_t len = size - off < sizeof zero ? size - off : sizeof zero;
        if (memcmp(b + off, zero, len) != 0)
            for (size_t i = off; i < off + len; i++)
                if (b[i])
                    st_die("%s: %s(%zu bytes) = %p: byte %zu is %#x, not zero", prog, api, size, p, i,
                           b[i]);
    }
}

/* Allocate `size` bytes through malloc (mostly) or calloc (1 in 16, checked
 * zeroed), check it and fill the pattern. */
static inline void st_alloc_fill(const char *prog, st_block *blk, size_t size, uint64_t tag,
                                 unsigned owner, st_rng *r)
{
    void *p;
    bool zeroed = st_rng_below(r, 16) == 0;
    if (zeroed) {
        size_t n = 1 + (size_t)st_rng_below(r, 4), m;
        while (size % n)
            n--;
        m = size / n;
        p = hak_calloc(n, m);
        st_check_fresh(prog, "hak_calloc", p, size, 0);
        st_check_zero(prog, "hak_calloc", p, size);
    } else {
        p = hak_malloc(size);
        st_check_fresh(prog, "hak_malloc", p, size, 0);
    }
    blk->p = p;
    blk->size = size;
    blk->tag = tag;
    blk->align = 0;
    blk->hops = 0;
    blk->owner = (uint16_t)owner;
    blk->api = ST_API_MALLOC;
    st_fill(blk);
}

/* ------------------------------------------------------------------- rings */

/* Bounded SPSC ring of blocks.  The producer publishes a slot with a release
 * store of tail; the consumer reads the slot after an acquire load of tail and
 * frees the slot with a release store of head, which the producer's acquire
 * load of head orders before it reuses the slot.  So the block's contents
 * (pattern written by the producer) happen-before the consumer's check. */
#define ST_RING_CAP 256
typedef struct {
    _Alignas(64) _Atomic size_t head; /* consumer */
    _Alignas(64) _Atomic size_t tail; /* producer */
    _Alignas(64) st_block slot[ST_RING_CAP];
} st_ring;

static inline bool st_ring_push(st_ring *q, const st_block *b)
{
    size_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    size_t h = atomic_load_explicit(&q->head, memory_order_acquire);
    if (t - h == ST_RING_CAP)
        return false;
    q->slot[t % ST_RING_CAP] = *b;
    atomic_store_explicit(&q->tail, t + 1, memory_order_release);
    return true;
}

static inline bool st_ring_pop(st_ring *q, st_block *b)
{
    size_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
    size_t t = atomic_load_explicit(&q->tail, memory_order_acquire);
    if (h == t)
        return false;
    *b = q->slot[h % ST_RING_CAP];
    atomic_store_explicit(&q->head, h + 1, memory_order_release);
    return true;
}

/* Blocks in the ring, as the producer sees it (an upper bound). */
static inline size_t st_ring_used(st_ring *q)
{
    size_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    size_t h = atomic_load_explicit(&q->head, memory_order_acquire);
    return t - h;
}

/* -------------------------------------------------------------- arguments */

typedef enum { ST_OPT_INT, ST_OPT_DOUBLE, ST_OPT_U64 } st_opt_type;

typedef struct {
    const char *name; /* without the leading "--" */
    st_opt_type type;
    void *dst;
    const char *help;
} st_opt;

/* Options every program has. */
typedef struct {
    double seconds;      /* run time of the timed phase */
    int threads;         /* worker threads */
    uint64_t seed;       /* RNG seed (0: from the clock, printed) */
    int large_pm;        /* large blocks, per mille of allocations */
    int max_large_kib;   /* largest large block */
    int max_mapped_mib;  /* fail if hakmem maps more than this */
    int mapped_slack_mib;/* ... or more than this + mapped_per_live x live */
    int mapped_per_live;
} st_common;

/* The st_common defaults every program shares (3 s, 4 threads, a 4 GiB
 * absolute ceiling, mapped <= slack + 4 x live); the programs differ only in
 * their large-block mix. */
#define ST_COMMON_DEFAULTS(large_permille, max_large_kibibytes)                                  \
    {.seconds = 3, .threads = 4, .large_pm = (large_permille),                                 \
     .max_large_kib = (max_large_kibibytes), .max_mapped_mib = 4096, .mapped_per_live = 4}

/* Number of elements of an array (for the program-specific option tables). */
#define ST_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void st_usage(const char *prog, const st_opt *opts, int n)
{
    fprintf(stderr, "usage: %s [options]\n", prog);
    for (int i = 0; i < n; i++) {
        char def[32];
        switch (opts[i].type) {
        case ST_OPT_INT: snprintf(def, sizeof def, "%d", *(int *)opts[i].dst); break;
        case ST_OPT_U64: snprintf(def, sizeof def, "%" PRIu64, *(uint64_t *)opts[i].dst); break;
        case ST_OPT_DOUBLE: snprintf(def, sizeof def, "%g", *(double *)opts[i].dst); break;
        }
        fprintf(stderr, "  --%-18s %s (default %s)\n", opts[i].name, opts[i].help, def);
    }
}

/* Parse --name value / --name=value for the common options plus `extra`. */
static void st_parse_args(int argc, char **argv, const char *prog, st_common *c,
                          const st_opt *extra, int n_extra)
{
    st_opt opts[64];
    int n = 0;
    opts[n++] = (st_opt){"seconds", ST_OPT_DOUBLE, &c->seconds, "run time in seconds"};
    opts[n++] = (st_opt){"threads", ST_OPT_INT, &c->threads, "worker threads"};
    opts[n++] = (st_opt){"seed", ST_OPT_U64, &c->seed, "RNG seed (0 = from the clock)"};
    opts[n++] = (st_opt){"large-permille", ST_OPT_INT, &c->large_pm,
                         "large blocks (> 256 KiB) per 1000 allocations"};
    opts[n++] = (st_opt){"max-large-kib", ST_OPT_INT, &c->max_large_kib,
                         "largest large block in KiB"};
    opts[n++] = (st_opt){"max-mapped-mib", ST_OPT_INT, &c->max_mapped_mib,
                         "fail if hakmem's mapped_bytes exceeds this"};
    opts[n++] = (st_opt){"mapped-slack-mib", ST_OPT_INT, &c->mapped_slack_mib,
                         "... or this + mapped-per-live x live_bytes (0: 256 + 64 x threads)"};
    opts[n++] = (st_opt){"mapped-per-live", ST_OPT_INT, &c->mapped_per_live,
                         "see --mapped-slack-mib"};
    for (int i = 0; i < n_extra && n < 64; i++)
        opts[n++] = extra[i];

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            st_usage(prog, opts, n);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "%s: unexpected argument '%s'\n", prog, a);
            st_usage(prog, opts, n);
            exit(64);
        }
        a += 2;
        size_t len = strcspn(a, "=");
        const st_opt *o = NULL;
        for (int k = 0; k < n; k++)
            if (strlen(opts[k].name) == len && !strncmp(opts[k].name, a, len))
                o = &opts[k];
        if (!o) {
            fprintf(stderr, "%s: unknown option '%s'\n", prog, argv[i]);
            st_usage(prog, opts, n);
            exit(64);
        }
        if (a[len] == '=')
            val = a + len + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            fprintf(stderr, "%s: option --%s needs a value\n", prog, o->name);
            exit(64);
        }
        char *end;
        errno = 0;
        switch (o->type) {
        case ST_OPT_INT: {
            long v = strtol(val, &end, 0);
            if (*end || errno || v < 0 || v > 1000000000) goto bad;
            *(int *)o->dst = (int)v;
            break;
        }
        case ST_OPT_U64: {
            unsigned long long v = strtoull(val, &end, 0);
            if (*end || errno) goto bad;
            *(uint64_t *)o->dst = v;
            break;
        }
        case ST_OPT_DOUBLE: {
            double v = strtod(val, &end);
            if (*end || errno || v < 0) goto bad;
            *(double *)o->dst = v;
            break;
        }
        }
        continue;
    bad:
        fprintf(stderr, "%s: bad value '%s' for --%s\n", prog, val, o->name);
        exit(64);
    }
    if (c->threads < 1 || c->threads > ST_MAX_THREADS) {
        fprintf(stderr, "%s: --threads must be 1..%d\n", prog, ST_MAX_THREADS);
        exit(64);
    }
    if (c->large_pm > 1000) c->large_pm = 1000;
    /* Measured on the first hakmem: mapped - 4 x live peaks at 60-110 MiB
     * with 2 threads, 90-180 with 4, 110-300 with 8 (caches, partial slabs and
     * reserves grow per thread); the default leaves about twice that. */
    if (c->mapped_slack_mib == 0)
        c->mapped_slack_mib = 256 + 64 * c->threads;
    if (c->seed == 0)
        c->seed = st_mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
}

static inline size_t st_max_large(const st_common *c)
{
    return (size_t)c->max_large_kib * ST_KIB;
}

/* -------------------------------------------------------------- accounting */

/* The memory ceiling: a leak (freed blocks that never come back to their
 * slabs) must fail the run in bounded time rather than exhaust the machine.
 * Two limits, checked every so often by one thread while the others run:
 *   mapped_bytes <= --max-mapped-mib                     (absolute), and
 *   mapped_bytes <= --mapped-slack-mib + --mapped-per-live x live_bytes
 * The second catches a leak long before the first: the programs keep a
 * bounded working set, so in a correct allocator mapped memory follows live
 * memory (plus caches, partly filled slabs, reserves: the slack); when frees
 * are lost, live_bytes stays bounded (hakmem counts the free) while mapped
 * memory keeps growing.  hak_stats_get runs concurrently with the working
 * threads on purpose (its counters must be safe to read that way). */
static _Atomic uint64_t st_peak_mapped, st_peak_excess;

static inline void st_check_mapped(const char *prog, const st_common *c)
{
    hak_stats_t s;
    hak_stats_get(&s);
    uint64_t allowed = (uint64_t)c->mapped_slack_mib * ST_MIB +
                       (uint64_t)c->mapped_per_live * s.live_bytes;
    uint64_t excess = s.mapped_bytes > (uint64_t)c->mapped_per_live * s.live_bytes
                          ? s.mapped_bytes - (uint64_t)c->mapped_per_live * s.live_bytes
                          : 0;
    if (s.mapped_bytes > atomic_load_explicit(&st_peak_mapped, memory_order_relaxed))
        atomic_store_explicit(&st_peak_mapped, s.mapped_bytes, memory_order_relaxed);
    if (excess > atomic_load_explicit(&st_peak_excess, memory_order_relaxed))
        atomic_store_explicit(&st_peak_excess, excess, memory_order_relaxed);
    if (s.mapped_bytes > (uint64_t)c->max_mapped_mib * ST_MIB)
        st_die("%s: hakmem maps %" PRIu64 " MiB, over the ceiling of %d MiB (live_bytes %" PRIu64
               " MiB): memory is not coming back",
               prog, s.mapped_bytes / ST_MIB, c->max_mapped_mib, s.live_bytes / ST_MIB);
    if (s.mapped_bytes > allowed)
        st_die("%s: hakmem maps %" PRIu64 " MiB for %" PRIu64 " MiB of live blocks, over %d MiB + "
               "%d x live: freed memory is not coming back (superslabs mapped %" PRIu64
               ", unmapped %" PRIu64 ")",
               prog, s.mapped_bytes / ST_MIB, s.live_bytes / ST_MIB, c->mapped_slack_mib,
               c->mapped_per_live, s.superslabs_mapped, s.superslabs_unmapped);
}

/* Ballast: blocks held from before the first snapshot to after the last.
 * hak_stats_get reports live_bytes as max(0, in - out); from a start at zero
 * an allocator that under-counts live bytes (frees counted bigger than their
 * allocations) would read 0 again at the end and look balanced.  With the
 * ballast the starting value is about 8 MiB, so a drift either way shows.
 * The large block is never touched: it costs address space, not memory. */
#define ST_BALLAST_SMALL 8
static void *st_ballast[1 + ST_BALLAST_SMALL];

static void st_ballast_take(void)
{
    static const size_t sizes[ST_BALLAST_SMALL] = {1, 16, 100, 1000, 5000, 40000, 200000,
                                                   ST_MAX_SMALL};
    st_ballast[0] = hak_malloc(8 * ST_MIB);
    for (int i = 0; i < ST_BALLAST_SMALL; i++)
        st_ballast[1 + i] = hak_malloc(sizes[i]);
    for (int i = 0; i <= ST_BALLAST_SMALL; i++)
        if (!st_ballast[i])
            st_die("ballast allocation failed");
}

static void st_ballast_drop(void)
{
    for (int i = 0; i <= ST_BALLAST_SMALL; i++) {
        hak_free(st_ballast[i]);
        st_ballast[i] = NULL;
    }
}

/* Start of the accounted phase: ballast, then the first snapshot. */
static void st_accounting_begin(hak_stats_t *s0)
{
    st_ballast_take();
    hak_stats_get(s0);
}

/* After all threads are joined and every block freed: the hakmem counters
 * must balance.  Prints the deltas; returns false (and reports) otherwise.
 * Drops the ballast after the last snapshot. */
static bool st_check_accounting(const char *prog, const hak_stats_t *s0, hak_stats_t *out)
{
    hak_stats_t s1;
    hak_stats_get(&s1);
    st_ballast_drop();
    if (out)
        *out = s1;
    uint64_t da = s1.allocs - s0->allocs, df = s1.frees - s0->frees;
    int64_t dl = (int64_t)(s1.live_bytes - s0->live_bytes);
    printf("%s: stats delta allocs=%" PRIu64 " frees=%" PRIu64 " remote_frees=%" PRIu64
           " live_bytes=%+" PRId64 " large_allocs=%" PRIu64 " heaps_abandoned=%" PRIu64
           " superslabs_adopted=%" PRIu64 " superslabs_mapped=%" PRIu64
           " superslabs_unmapped=%" PRIu64 " mapped_bytes_now=%" PRIu64
           " peak_mapped_mib=%" PRIu64 " peak_mapped_over_live_mib=%" PRIu64 "\n",
           prog, da, df, s1.remote_frees - s0->remote_frees, dl,
           s1.large_allocs - s0->large_allocs, s1.heaps_abandoned - s0->heaps_abandoned,
           s1.superslabs_adopted - s0->superslabs_adopted,
           s1.superslabs_mapped - s0->superslabs_mapped,
           s1.superslabs_unmapped - s0->superslabs_unmapped, s1.mapped_bytes,
           atomic_load(&st_peak_mapped) / ST_MIB, atomic_load(&st_peak_excess) / ST_MIB);
    bool ok = true;
    if (da != df) {
        st_fail("%s: accounting: %" PRIu64 " allocs but %" PRIu64 " frees after everything was "
                "freed (difference %" PRId64 ")",
                prog, da, df, (int64_t)(da - df));
        ok = false;
    }
    if (dl != 0) {
        st_fail("%s: accounting: live_bytes is %+" PRId64 " from its starting value after "
                "everything was freed",
                prog, dl);
        ok = false;
    }
    return ok;
}

/* The program's result line (tsan/run.sh reads ops=). */
static int st_finish(const char *prog, const st_common *c, double secs, uint64_t ops,
                     const char *extra)
{
    bool failed = st_has_failed();
    printf("%s: threads=%d seconds=%.2f seed=%#" PRIx64 " ops=%" PRIu64 " ops_per_sec=%.0f %s %s\n",
           prog, c->threads, secs, c->seed, ops, secs > 0 ? (double)ops / secs : 0.0,
           extra ? extra : "", failed ? "FAILED" : "PASSED");
    fflush(stdout);
    return failed ? 1 : 0;
}

/* st_finish with the program-specific counters given printf-style (formatted
 * into the same 256-byte buffer every program used). */
static inline int st_finishf(const char *prog, const st_common *c, double secs, uint64_t ops,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static inline int st_finishf(const char *prog, const st_common *c, double secs, uint64_t ops,
                      const char *fmt, ...)
{
    char extra[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(extra, sizeof extra, fmt, ap);
    va_end(ap);
    return st_finish(prog, c, secs, ops, extra);
}

/* End-of-run check: the program's own count of blocks allocated and freed
 * must agree (else the test, not hakmem, lost a block). */
static inline void st_check_test_balance(uint64_t allocs, uint64_t frees)
{
    if (allocs != frees)
        st_fail("the test itself lost track of blocks: %" PRIu64 " allocated, %" PRIu64
                " freed", allocs, frees);
}

/* Does hakmem count blocks in this run?  Only with HAKMEM_STATS (the
 * suite's default); without it the fast paths (the thread cache among
 * them) are on and the block counts stay 0, so the checks on them are
 * skipped (the *_fast ctests). */
static inline bool st_counting(void)
{
    const char *v = getenv("HAKMEM_STATS");
    return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

/* End-of-run check: hakmem counted at least the `allocs` allocations the test
 * made between the snapshots s0 and s1 (`made` words the message: "" or
 * "at least "). */
static inline void st_check_counted_allocs(const hak_stats_t *s0, const hak_stats_t *s1,
                                    uint64_t allocs, const char *made)
{
    if (st_counting() && s1->allocs - s0->allocs < allocs)
        st_fail("hakmem counted %" PRIu64 " allocs, the test made %s%" PRIu64,
                s1->allocs - s0->allocs, made, allocs);
}

/* Nothing to do until another thread moves: give it the CPU (the suites run
 * more threads than cores).  Only a courtesy: correctness never depends on
 * it, every wait is a loop on an acquire load. */
static inline void st_idle(void)
{
    sched_yield();
}

/* Thread creation that reports instead of crashing. */
static inline void st_thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
    int e = pthread_create(t, NULL, fn, arg);
    if (e)
        st_die("pthread_create: %s", strerror(e));
}

/* Calloc for the test's own bookkeeping (system heap, never hakmem). */
static inline void *st_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p)
        st_die("out of memory for bookkeeping (%zu x %zu)", n, size);
    return p;
}

/* ------------------------------------------------------------ worker teams */

/* The part of a worker-thread record that the ring-based programs
 * (prodcons, realloc, aligned) share; each program's own worker type has it
 * as its first member, `base`, so a worker pointer is also an st_worker
 * pointer. */
typedef struct {
    unsigned id;
    pthread_t th;
    uint64_t ops, allocs, frees, cross_frees;
} st_worker;

/* Worker threads that start together (a barrier releases them once the clock
 * has started), run until a shared deadline, then drain what the others sent
 * them until every one has stopped producing. */
typedef struct {
    int n;                       /* worker threads */
    pthread_barrier_t start;     /* the n workers + main */
    _Atomic int producers_done;  /* workers that stopped producing */
    double t0, deadline;         /* start of the timed phase, its end */
} st_team;

/* Create one thread running fn per worker record (`workers`: n records of
 * worker_size bytes, each starting with an st_worker, numbered 0..n-1 here),
 * start the clock and release them together. */
static inline void st_team_start(st_team *t, int n, void *workers, size_t worker_size,
                          void *(*fn)(void *), double seconds)
{
    t->n = n;
    atomic_store(&t->producers_done, 0);
    pthread_barrier_init(&t->start, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        st_worker *w = (st_worker *)((char *)workers + (size_t)i * worker_size);
        w->id = (unsigned)i;
        st_thread_create(&w->th, fn, w);
    }
    t->t0 = st_now();
    t->deadline = t->t0 + seconds;
    pthread_barrier_wait(&t->start);
}

/* In a worker, before its first operation: wait for the start. */
static inline void st_team_wait_start(st_team *t)
{
    pthread_barrier_wait(&t->start);
}

/* In a worker: the timed phase is over (deadline passed, or a failure). */
static inline bool st_team_time_up(const st_team *t)
{
    return st_now() >= t->deadline || st_has_failed();
}

/* A worker's drain step: take what other workers sent, return how many. */
typedef unsigned (*st_drain_fn)(st_worker *w, st_rng *r, void *extra);

/* In a worker, after its timed phase: stop producing, announce it, and drain
 * until every worker has announced and nothing is left.  A producer's pushes
 * happen-before its release increment, and the last increment is seen by our
 * acquire load, so one drain after seeing all producers done takes everything
 * that was ever sent to us. */
static inline void st_team_drain_to_end(st_team *t, st_drain_fn drain, st_worker *w, st_rng *r,
                                 void *extra)
{
    atomic_fetch_add_explicit(&t->producers_done, 1, memory_order_release);
    for (;;) {
        bool all = atomic_load_explicit(&t->producers_done, memory_order_acquire) == t->n;
        if (drain(w, r, extra) == 0 && !all)
            st_idle();
        if (all)
            break;
    }
}

/* In main: join every worker, add up their common counters into *sum and
 * return the run time since the start (the program adds up its own counters
 * afterwards). */
static inline double st_team_join(st_team *t, void *workers, size_t worker_size, st_worker *sum)
{
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < t->n; i++) {
        st_worker *w = (st_worker *)((char *)workers + (size_t)i * worker_size);
        pthread_join(w->th, NULL);
        sum->ops += w->ops;
        sum->allocs += w->allocs;
        sum->frees += w->frees;
        sum->cross_frees += w->cross_frees;
    }
    double secs = st_now() - t->t0;
    pthread_barrier_destroy(&t->start);
    return secs;
}

/* In main: the whole accounted run of a team.  Takes the ballast and the
 * first snapshot (*s0), starts the n workers, joins them and adds up their
 * common counters (st_team_join); returns the run time. */
static inline double st_team_run(st_team *t, int n, void *workers, size_t worker_size,
                                 void *(*fn)(void *), double seconds, hak_stats_t *s0,
                                 st_worker *sum)
{
    st_accounting_begin(s0);
    st_team_start(t, n, workers, worker_size, fn, seconds);
    return st_team_join(t, workers, worker_size, sum);
}

/* Check and free a block on behalf of worker w, counting the free (and the
 * cross-thread free, when w did not allocate the block).  A block allocated
 * with an explicit alignment (align != 0) must still have it. */
static inline void st_worker_free(const char *prog, st_worker *w, st_block *b, st_rng *r,
                                  const char *where)
{
    if (b->align && (uintptr_t)b->p % b->align)
        st_die("%s: block %p (size %zu) %s is not aligned to %zu", prog, b->p, b->size, where,
               b->align);
    st_check_free(prog, where, b, r);
    w->frees++;
    w->ops++;
    if (b->owner != w->id)
        w->cross_frees++;
}

/* A worker's private keep set: n slots of blocks that stay live a while.
 * Put b in a random slot, first freeing the block it replaces. */
static inline void st_keep_put(const char *prog, st_worker *w, st_block *keep, int n,
                               const st_block *b, st_rng *r)
{
    st_block *slot = &keep[st_rng_below(r, (uint64_t)n)];
    if (slot->p)
        st_worker_free(prog, w, slot, r, "(replaced in keep set)");
    *slot = *b;
}

/* At the end of a worker: free every block left in its keep set, then the
 * set itself. */
static inline void st_keep_release(const char *prog, st_worker *w, st_block *keep, int n,
                                   st_rng *r)
{
    for (int i = 0; i < n; i++)
        if (keep[i].p)
            st_worker_free(prog, w, &keep[i], r, "(final free of keep set)");
    free(keep);
}

#endif /* HAKMEM_STRESS_COMMON_H */
