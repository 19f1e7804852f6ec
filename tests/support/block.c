/* block.c - a block under test: pattern and checks (block.h). */
#include "block.h"

#include <inttypes.h>
#include <string.h>

#include "report.h"

size_t ts_min_align(size_t size)
{
    size_t a = _Alignof(max_align_t);
    while (a > 1 && a > size)
        a >>= 1;
    return a;
}

void ts_block_fill(const ts_block *blk)
{
    ts_pat_fill(blk->p, blk->size, ts_pat_seed((uintptr_t)blk->p, blk->size, blk->tag));
}

void ts_report_corrupt(const char *prog, const char *where, const void *p, size_t size,
                       size_t align, uint64_t tag, uint64_t seed, size_t off)
{
    const unsigned char *b = (const unsigned char *)p;
    const unsigned char *w = ts_pat_window(seed);
    size_t start = off & ~(size_t)7, n = size - start < 8 ? size - start : 8;
    uint64_t want = 0, got = 0;
    memcpy(&got, b + start, n);
    memcpy(&want, w + start % TS_PAT_BYTES, n);
    size_t bad = 0;
    for (size_t i = off; i < size; i++)
        bad += b[i] != w[i % TS_PAT_BYTES];
    ts_die("%s: block %p size %zu align %zu tag %#" PRIx64 " corrupted %s: first bad byte at "
           "offset %zu (%zu bad bytes from there); bytes %zu..%zu hold %#018" PRIx64
           " instead of %#018" PRIx64 "%s (block handed out twice, or written while live)",
           prog, p, size, align, tag, where, off, bad, start, start + n - 1, got, want,
           n == 8 && (got >> 47) == 0 && got > 4096 ? " [looks like a pointer]" : "");
}

void ts_block_check(const char *prog, const char *where, const ts_block *blk)
{
    uint64_t seed = ts_pat_seed((uintptr_t)blk->p, blk->size, blk->tag);
    size_t off = ts_pat_check(blk->p, blk->size, seed);
    if (off != (size_t)-1)
        ts_report_corrupt(prog, where, blk->p, blk->size, blk->align, blk->tag, seed, off);
}

void ts_check_zero(const char *prog, const char *api, const void *p, size_t size)
{
    size_t i = ts_first_nonzero(p, size);
    if (i < size)
        ts_die("%s: %s(%zu bytes) = %p: byte %zu is %#x, not zero", prog, api, size, p, i,
               ((const unsigned char *)p)[i]);
}
