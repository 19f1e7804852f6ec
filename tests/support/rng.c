/* rng.c - the test programs' pseudo-random numbers (rng.h). */
#include "rng.h"

#include <time.h>
#include <unistd.h>

size_t ts_rng_size_octaves(ts_rng *r, size_t lo, size_t hi)
{
    unsigned lo_bit = 63 - (unsigned)__builtin_clzll(lo);
    unsigned hi_bit = 63 - (unsigned)__builtin_clzll(hi);
    unsigned b = (unsigned)ts_rng_range(r, lo_bit, hi_bit);
    size_t a = (size_t)1 << b, z = ((size_t)2 << b) - 1;
    if (a < lo)
        a = lo;
    if (z > hi)
        z = hi;
    return (size_t)ts_rng_range(r, a, z);
}

size_t ts_rng_size_boundary(ts_rng *r, size_t lo, size_t hi)
{
    unsigned kmax = 63 - (unsigned)__builtin_clzll(hi | 8);
    for (;;) {
        unsigned top = ts_rng_below(r, 8) == 0 || kmax < 12 ? kmax : 12;
        unsigned k = (unsigned)ts_rng_range(r, 3, top);
        size_t q = ((size_t)1 << k) / 4 * ts_rng_range(r, 4, 7);
        size_t s = q + (size_t)ts_rng_range(r, 0, 2) - 1;
        if (s >= lo && s <= hi)
            return s;
    }
}

uint64_t ts_seed_from_clock(void)
{
    return ts_mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
}

uint64_t ts_hash_pair(uint64_t a, uint64_t b)
{
    uint64_t z = ts_mix64(a * TS_GOLDEN + b + 0x632BE59BD9B4E019ULL);
    return z ? z : 1;
}

size_t ts_xs_size_log(ts_xs *r, size_t lo, size_t hi)
{
    unsigned lo_b = 63u - (unsigned)__builtin_clzll(lo);
    unsigned hi_b = 63u - (unsigned)__builtin_clzll(hi);
    unsigned e = lo_b + (unsigned)(ts_xs_next(r) % (hi_b - lo_b + 1));
    size_t base = (size_t)1 << e;
    size_t n = base + (size_t)(ts_xs_next(r) % base);
    if (n < lo)
        n = lo;
    if (n > hi)
        n = hi;
    return n;
}
