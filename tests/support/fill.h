/* fill.h - patterns written into blocks and checked later, so that a block
 * handed out twice, or written by the allocator while live, shows.
 *
 * Three kinds, each with its own trade-off:
 *   - the window pattern (ts_pat_*): a window of a table of random words,
 *     chosen by a seed that mixes the block's address, size and a tag; fill is
 *     memcpy and check is memcmp, fast natively and under the sanitizers,
 *     which check a whole range per intercepted call (the stress programs);
 *   - the word pattern (ts_words_*): the word at offset 8k is a mix of the
 *     seed and k, so two overlapping blocks differ at every word (the unit
 *     tests);
 *   - the stamp (ts_stamp_*): the whole block up to 256 bytes, otherwise its
 *     first and last 16 bytes and one word in every 4 KiB page, which also
 *     makes every page resident (the lifecycle programs, which measure RSS).
 * None of them allocates.
 */
#ifndef HAKMEM_TS_FILL_H
#define HAKMEM_TS_FILL_H

#include <stddef.h>
#include <stdint.h>

#include "rng.h"

/* ---------------------------------------------------------- window pattern */

/* A table of TS_PAT_WORDS random words is laid out twice in a row, so any
 * window of TS_PAT_WORDS words starting in the first copy is contiguous; a
 * block longer than the window repeats it.  Two allocations that get the
 * same address draw different windows (equal only with probability
 * 1 / TS_PAT_WORDS). */
#define TS_PAT_WORDS 65536u
#define TS_PAT_BYTES ((size_t)TS_PAT_WORDS * 8)

/* The seed of a block's pattern. */
static inline uint64_t ts_pat_seed(uintptr_t addr, size_t size, uint64_t tag)
{
    return ts_mix64((uint64_t)addr ^ ts_mix64((uint64_t)size * 0xD6E8FEB86659FD93ull ^ tag));
}

/* The first TS_PAT_BYTES bytes of the pattern of `seed`. */
const unsigned char *ts_pat_window(uint64_t seed);

/* Write the pattern of `seed` into the `size` bytes at p. */
void ts_pat_fill(void *p, size_t size, uint64_t seed);

/* Compare the first `len` bytes at p with the pattern of `seed`: the offset
 * of the first differing byte, or (size_t)-1 when all match. */
size_t ts_pat_check(const void *p, size_t len, uint64_t seed);

/* ------------------------------------------------------------ word pattern */

/* The value of word k of the pattern of `seed`. */
static inline uint64_t ts_words_mix(uintptr_t seed, size_t k)
{
    uint64_t x = (uint64_t)seed * TS_GOLDEN + k;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return x;
}

/* Write the pattern of `seed` into the n bytes at p (the bytes of a final
 * partial word are the low bytes of its value). */
void ts_words_fill(void *p, size_t n, uintptr_t seed);

/* The first offset whose byte differs from the pattern, or n. */
size_t ts_words_verify(const void *p, size_t n, uintptr_t seed);

/* The offset of the first non-zero byte of the n bytes at p, or n. */
size_t ts_first_nonzero(const void *p, size_t n);

/* ------------------------------------------------------------------ stamp */

/* The tag of the block number idx of `owner`, of `size` bytes. */
uint64_t ts_stamp_tag(uint64_t owner, uint64_t idx, size_t size);

void ts_stamp_fill(void *p, size_t size, uint64_t tag);

/* 1 if the stamp of `tag` is intact, else 0. */
int ts_stamp_check(const void *p, size_t size, uint64_t tag);

#endif /* HAKMEM_TS_FILL_H */
