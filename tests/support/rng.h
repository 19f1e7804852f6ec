/* rng.h - the test programs' pseudo-random numbers.
 *
 * Two generators, each the one a group of programs has always used (their
 * sequences are part of what a run does, so neither may change):
 *   - ts_rng: splitmix64, one stream per thread, seeded from a run seed and a
 *     stream number (the stress programs);
 *   - ts_xs: xorshift64* (the lifecycle and bench programs), seeded either by
 *     one splitmix64 step (ts_xs_seed) or from a pair of numbers
 *     (ts_hash_pair).
 * The per-draw functions are inline: the bench programs draw inside their
 * timed loops, where a call would change what is measured.
 */
#ifndef HAKMEM_TS_RNG_H
#define HAKMEM_TS_RNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TS_GOLDEN 0x9E3779B97F4A7C15ull

/* splitmix64's output function: a bijective 64-bit mix. */
static inline uint64_t ts_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ------------------------------------------------------------ splitmix64 */

typedef struct {
    uint64_t s;
} ts_rng;

static inline void ts_rng_init(ts_rng *r, uint64_t seed, uint64_t stream)
{
    r->s = ts_mix64(seed ^ ts_mix64(stream + 0x632BE59BD9B4E019ull));
}

static inline uint64_t ts_rng_next(ts_rng *r)
{
    r->s += TS_GOLDEN;
    return ts_mix64(r->s);
}

/* Uniform in [0, n), n > 0. */
static inline uint64_t ts_rng_below(ts_rng *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)ts_rng_next(r) * n) >> 64);
}

/* Uniform in [lo, hi]. */
static inline uint64_t ts_rng_range(ts_rng *r, uint64_t lo, uint64_t hi)
{
    return lo + ts_rng_below(r, hi - lo + 1);
}

/* True with a probability of pm per mille. */
static inline bool ts_rng_permille(ts_rng *r, unsigned pm)
{
    return ts_rng_below(r, 1000) < pm;
}

/* A size in [lo, hi] with every power of two (octave) equally likely. */
size_t ts_rng_size_octaves(ts_rng *r, size_t lo, size_t hi);

/* A size near a likely class boundary: q = 2^k, 1.25, 1.5 or 1.75 x 2^k, and
 * q - 1, q, q + 1; k is mostly small (the hot classes), sometimes up to hi. */
size_t ts_rng_size_boundary(ts_rng *r, size_t lo, size_t hi);

/* A seed from the clock and the process id (a run given no seed). */
uint64_t ts_seed_from_clock(void);

/* -------------------------------------------------------------- xorshift64* */

typedef struct {
    uint64_t s; /* never 0 */
} ts_xs;

static inline uint64_t ts_xs_next(ts_xs *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* One splitmix64 step of the state *x. */
static inline uint64_t ts_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += TS_GOLDEN);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Seeded by one splitmix64 step from `seed` (the bench programs). */
static inline void ts_xs_seed(ts_xs *r, uint64_t seed)
{
    uint64_t x = seed;
    r->s = ts_splitmix64(&x);
    if (r->s == 0)
        r->s = 0x1234567887654321ULL;
}

/* Uniform in [0, n) for n <= 2^32 (multiply-shift, negligible bias). */
static inline uint32_t ts_xs_below(ts_xs *r, uint32_t n)
{
    return (uint32_t)(((ts_xs_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* A non-zero 64-bit value mixed from (a, b): a state for ts_xs (the
 * lifecycle programs seed their generators with it) or a tag. */
uint64_t ts_hash_pair(uint64_t a, uint64_t b);

/* Log-uniform size in [lo, hi]: as many sizes in 16-31 as in 4096-8191,
 * roughly how real programs spread their requests. */
size_t ts_xs_size_log(ts_xs *r, size_t lo, size_t hi);

#endif /* HAKMEM_TS_RNG_H */
