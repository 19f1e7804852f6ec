/* bignum.c - big-number arithmetic: short-lived 16..200 byte blocks.
 *
 *   bignum threads seconds
 *
 * Models an interpreter's or a crypto/math library's arbitrary-precision
 * integers: every number is one malloc'd block (an 8-byte header and 1..24
 * 64-bit limbs, 16..200 bytes) and every operation allocates its result,
 * while operands and temporaries are freed soon after.
 *
 * Each thread computes Fibonacci numbers F(0), F(1), ... by big-number
 * addition, keeping the last 32 in a ring (the live set; the oldest is freed
 * when a new one arrives), up to F(1000) (11 limbs), then starts over.  After
 * every addition it checks the new number with one of these, chosen at
 * random:
 *   - Cassini's identity F(n-2) F(n) - F(n-1)^2 = (-1)^(n-1)  (2 mul, 1 sub)
 *   - F(n) mod p for a small prime p, against F(n) mod p computed in 64-bit
 *     words, and q p + r == F(n) for the quotient q   (div, mul, add)
 *   - (F(n) << s) >> s == F(n) for s in 1..127         (shl, shr)
 *   - F(n) - F(n-1) == F(n-2)                          (sub)
 * A failed check means an allocator corrupted a number: exit status 3.
 *
 * Every cycle F(0)..F(1000) restarts the thread's RNG from its seed, so each
 * complete cycle hashes to the same checksum; the RESULT line prints
 * check=<hex> (per-thread cycle checksums xor-ed), which is the same in
 * every run with the same thread count, whatever the allocator.
 *
 * ops = mallocs + frees.  Prints one RESULT line (see tests/support/bench.h).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/bench.h"
#include "support/rng.h"

typedef unsigned __int128 u128;

typedef struct {
    uint32_t n;         /* limbs in use, no leading zero limb; 0 for zero */
    uint32_t cap;       /* limbs allocated */
    uint64_t d[];       /* little-endian limbs */
} bn;

#define RING 32
#define MAX_FIB_LIMBS 11        /* F(n) < 2^704: n <= ~1010 */
#define NPRIMES 4

static const uint64_t primes[NPRIMES] = {
    1000000007ULL, 998244353ULL, 4294967291ULL, 2305843009213693951ULL};

typedef struct {
    uint64_t ops;
    uint64_t bad;
} ctx;

static bn *bn_new(ctx *c, uint32_t cap)
{
    if (cap == 0)
        cap = 1;
    size_t size = sizeof(bn) + (size_t)cap * sizeof(uint64_t);
    bn *x = malloc(size);
    if (!x)
        ts_bench_oom("bignum", size);
    x->n = 0;
    x->cap = cap;
    c->ops++;
    return x;
}

static void bn_free(ctx *c, bn *x)
{
    free(x);
    c->ops++;
}

static void bn_norm(bn *x)
{
    while (x->n > 0 && x->d[x->n - 1] == 0)
        x->n--;
}

static bn *bn_small(ctx *c, uint64_t v)
{
    bn *x = bn_new(c, 1);
    x->d[0] = v;
    x->n = v != 0;
    return x;
}

static bool bn_eq(const bn *a, const bn *b)
{
    return a->n == b->n && memcmp(a->d, b->d, a->n * sizeof(uint64_t)) == 0;
}

static bool bn_is_small(const bn *a, uint64_t v)
{
    return v == 0 ? a->n == 0 : (a->n == 1 && a->d[0] == v);
}

static bn *bn_add(ctx *c, const bn *a, const bn *b)
{
    if (a->n < b->n) {
        const bn *t = a;
        a = b;
        b = t;
    }
    bn *r = bn_new(c, a->n + 1);
    uint64_t carry = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        u128 s = (u128)a->d[i] + (i < b->n ? b->d[i] : 0) + carry;
        r->d[i] = (uint64_t)s;
        carry = (uint64_t)(s >> 64);
    }
    r->d[a->n] = carry;
    r->n = a->n + 1;
    bn_norm(r);
    return r;
}

/* a - b, requires a >= b */
static bn *bn_sub(ctx *c, const bn *a, const bn *b)
{
    bn *r = bn_new(c, a->n);
    uint64_t borrow = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        uint64_t bi = i < b->n ? b->d[i] : 0;
        uint64_t t = a->d[i] - bi;
        uint64_t b1 = a->d[i] < bi;
        r->d[i] = t - borrow;
        borrow = b1 | (t < borrow);
    }
    r->n = a->n;
    bn_norm(r);
    return r;
}

static int bn_cmp(const bn *a, const bn *b)
{
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    for (uint32_t i = a->n; i-- > 0;)
        if (a->d[i] != b->d[i])
            return a->d[i] < b->d[i] ? -1 : 1;
    return 0;
}

static bn *bn_mul(ctx *c, const bn *a, const bn *b)
{
    bn *r = bn_new(c, a->n + b->n);
    r->n = a->n + b->n;
    memset(r->d, 0, r->n * sizeof(uint64_t));
    for (uint32_t i = 0; i < a->n; i++) {
        uint64_t carry = 0;
        for (uint32_t j = 0; j < b->n; j++) {
            u128 t = (u128)a->d[i] * b->d[j] + r->d[i + j] + carry;
            r->d[i + j] = (uint64_t)t;
            carry = (uint64_t)(t >> 64);
        }
        r->d[i + b->n] = carry;
    }
    bn_norm(r);
    return r;
}

/* quotient of a / m (allocated), remainder in *rem; m != 0 */
static bn *bn_divmod_small(ctx *c, const bn *a, uint64_t m, uint64_t *rem)
{
    bn *q = bn_new(c, a->n);
    u128 r = 0;
    for (uint32_t i = a->n; i-- > 0;) {
        u128 cur = (r << 64) | a->d[i];
        q->d[i] = (uint64_t)(cur / m);
        r = cur % m;
    }
    q->n = a->n;
    bn_norm(q);
    *rem = (uint64_t)r;
    return q;
}

static bn *bn_shl(ctx *c, const bn *a, unsigned s)
{
    unsigned limbs = s / 64, bits = s % 64;
    bn *r = bn_new(c, a->n + limbs + 1);
    memset(r->d, 0, limbs * sizeof(uint64_t));
    uint64_t prev = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        r->d[i + limbs] = (a->d[i] << bits) | (bits ? prev >> (64 - bits) : 0);
        prev = a->d[i];
    }
    r->d[a->n + limbs] = bits ? prev >> (64 - bits) : 0;
    r->n = a->n + limbs + 1;
    bn_norm(r);
    return r;
}

static bn *bn_shr(ctx *c, const bn *a, unsigned s)
{
    unsigned limbs = s / 64, bits = s % 64;
    uint32_t n = a->n > limbs ? a->n - limbs : 0;
    bn *r = bn_new(c, n);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t lo = a->d[i + limbs] >> bits;
        uint64_t hi = (bits && i + limbs + 1 < a->n) ? a->d[i + limbs + 1] << (64 - bits) : 0;
        r->d[i] = lo | hi;
    }
    r->n = n;
    bn_norm(r);
    return r;
}

static uint64_t mix(uint64_t h, const bn *x)
{
    h ^= x->n;
    h *= 0x100000001B3ULL;
    for (uint32_t i = 0; i < x->n; i++) {
        h ^= x->d[i];
        h *= 0x100000001B3ULL;
        h ^= h >> 29;
    }
    return h;
}

static uint64_t addmod(uint64_t a, uint64_t b, uint64_t m)
{
    return (uint64_t)(((u128)a + b) % m);
}

/* One check of the newest number f[2] = F(n) against f[1] = F(n-1) and
 * f[0] = F(n-2).  Returns the value to mix into the checksum. */
static uint64_t check(ctx *c, ts_xs *r, bn *const f[3], uint64_t n,
                      const uint64_t fm[NPRIMES])
{
    switch (ts_xs_below(r, 4)) {
    case 0: {                   /* Cassini */
        bn *x = bn_mul(c, f[0], f[2]);
        bn *y = bn_mul(c, f[1], f[1]);
        bool odd = (n - 1) & 1;     /* x - y = (-1)^(n-1) */
        bn *z = odd ? bn_sub(c, y, x) : bn_sub(c, x, y);
        if ((odd ? bn_cmp(y, x) : bn_cmp(x, y)) < 0 || !bn_is_small(z, 1))
            c->bad++;
        uint64_t h = x->n ? x->d[x->n - 1] : 0;
        bn_free(c, z);
        bn_free(c, y);
        bn_free(c, x);
        return h;
    }
    case 1: {                   /* division by a small prime */
        int k = (int)ts_xs_below(r, NPRIMES);
        uint64_t rem;
        bn *q = bn_divmod_small(c, f[2], primes[k], &rem);
        if (rem != fm[k])
            c->bad++;
        bn *p = bn_small(c, primes[k]);
        bn *t = bn_mul(c, q, p);
        bn_free(c, p);
        bn *rr = bn_small(c, rem);
        bn *u = bn_add(c, t, rr);
        bn_free(c, rr);
        bn_free(c, t);
        if (!bn_eq(u, f[2]))
            c->bad++;
        uint64_t h = q->n ? q->d[0] : 0;
        bn_free(c, u);
        bn_free(c, q);
        return h ^ rem;
    }
    case 2: {                   /* shift round trip */
        unsigned s = 1 + ts_xs_below(r, 127);
        bn *t = bn_shl(c, f[2], s);
        bn *u = bn_shr(c, t, s);
        if (!bn_eq(u, f[2]))
            c->bad++;
        uint64_t h = t->n ? t->d[t->n - 1] : 0;
        bn_free(c, t);
        bn_free(c, u);
        return h;
    }
    default: {                  /* F(n) - F(n-1) = F(n-2) */
        bn *d = bn_sub(c, f[2], f[1]);
        if (!bn_eq(d, f[0]))
            c->bad++;
        uint64_t h = d->n ? d->d[0] : 0;
        bn_free(c, d);
        return h;
    }
    }
}

static void work(ts_bench_worker *w)
{
    ctx c = {0, 0};
    ts_xs r;
    bn *ring[RING];
    uint64_t first = 0, cycles = 0;

    while (!ts_bench_stopped(w)) {
        /* one cycle: F(0) .. F(~1000) */
        ts_xs_seed(&r, w->seed);
        uint64_t h = 0xCBF29CE484222325ULL;
        uint64_t fm[NPRIMES], fm_prev[NPRIMES];
        for (int k = 0; k < NPRIMES; k++) {
            fm_prev[k] = 0;     /* F(0) */
            fm[k] = 1;          /* F(1) */
        }
        ring[0] = bn_small(&c, 0);
        ring[1] = bn_small(&c, 1);
        uint64_t n = 1;         /* index of the newest number */
        bool stopped = false;
        for (;;) {
            bn *a = ring[(n - 1) % RING], *b = ring[n % RING];
            if (b->n > MAX_FIB_LIMBS)
                break;
            bn *f = bn_add(&c, a, b);
            n++;
            if (n >= RING)
                bn_free(&c, ring[n % RING]);
            ring[n % RING] = f;
            for (int k = 0; k < NPRIMES; k++) {
                uint64_t t = addmod(fm[k], fm_prev[k], primes[k]);
                fm_prev[k] = fm[k];
                fm[k] = t;
            }
            h = mix(h, f);
            bn *const tri[3] = {ring[(n - 2) % RING], ring[(n - 1) % RING], f};
            h ^= check(&c, &r, tri, n, fm);
            h *= 0x9E3779B97F4A7C15ULL;
            if ((n & 15) == 0 && ts_bench_stopped(w)) {
                stopped = true;
                break;
            }
        }
        uint64_t lo = n + 1 > RING ? n + 1 - RING : 0;
        for (uint64_t i = lo; i <= n; i++)
            bn_free(&c, ring[i % RING]);
        if (stopped)
            break;
        if (cycles++ == 0)
            first = h;
        else if (h != first)
            c.bad++;
    }
    w->ops = c.ops;
    w->extra = c.bad;
    w->seed = first;            /* reported as the checksum */
}

int main(int argc, char **argv)
{
    int threads;
    double secs;
    static ts_bench_worker w[TS_BENCH_MAX_THREADS];
    ts_bench_args(argc, argv, "big-number arithmetic in 16..200 byte blocks", &threads, &secs);
    double el = ts_bench_run(threads, secs, work, NULL, w);
    uint64_t bad = 0, sum = 0;
    for (int i = 0; i < threads; i++) {
        bad += w[i].extra;
        sum ^= w[i].seed;
    }
    char suffix[64];
    snprintf(suffix, sizeof suffix, "check=%016llx", (unsigned long long)sum);
    ts_bench_report("bignum", threads, el, ts_bench_sum_ops(w, threads), suffix);
    if (bad) {
        fprintf(stderr, "bignum: %llu wrong results (corrupted numbers)\n",
                (unsigned long long)bad);
        return 3;
    }
    return 0;
}
