/* block.h - a block under test as the stress programs track it: where it
 * is, what was asked, its pattern tag; its pattern written and checked; and
 * a bounded single-producer single-consumer ring that moves blocks between
 * threads.
 */
#ifndef HAKMEM_TS_BLOCK_H
#define HAKMEM_TS_BLOCK_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fill.h"

#define TS_KIB ((size_t)1024)
#define TS_MIB ((size_t)1024 * 1024)
#define TS_MAX_SMALL (256 * TS_KIB) /* hakmem's largest size class */

/* How a block was obtained: decides which sized free may release it (C23:
 * free_sized for malloc/calloc/realloc, free_aligned_sized for aligned_alloc). */
enum { TS_API_MALLOC = 0, TS_API_ALIGNED_ALLOC = 1, TS_API_OTHER = 2 };

typedef struct {
    void *p;
    size_t size;    /* requested size */
    uint64_t tag;   /* per-allocation pattern tag */
    size_t align;   /* alignment asked for (0: plain malloc family) */
    uint32_t hops;  /* times the block changed hands / was reallocated */
    uint16_t owner; /* thread that allocated it */
    uint16_t api;   /* TS_API_* */
} ts_block;

/* A tag unique to this allocation (thread id in the high bits).  The tag
 * matters: if the allocator hands the same address out twice, both owners
 * write different patterns and whichever checks second sees the other's. */
static inline uint64_t ts_new_tag(uint64_t *counter, unsigned tid)
{
    return ((uint64_t)(tid + 1) << 40) ^ ++*counter;
}

/* Minimum alignment a malloc-family block of `size` bytes must have: suitable
 * for any object with fundamental alignment that fits (x86-64: max_align_t is
 * 16 bytes, so 16 for size >= 16, 8 for 8..15, ...). */
size_t ts_min_align(size_t size);

/* Is p aligned to a (a power of two)? */
static inline bool ts_aligned_to(const void *p, size_t a)
{
    return ((uintptr_t)p & (a - 1)) == 0;
}

/* Write the block's window pattern (fill.h): seeded by its address, size and
 * tag. */
void ts_block_fill(const ts_block *blk);

/* Check the block's pattern; on a mismatch describe the corruption and end
 * the process (ts_die).  prog and where name the program and the moment. */
void ts_block_check(const char *prog, const char *where, const ts_block *blk);

/* Describe a corrupted block (first bad byte at `off` of the pattern of
 * `seed`) and end the process. */
void ts_report_corrupt(const char *prog, const char *where, const void *p, size_t size,
                       size_t align, uint64_t tag, uint64_t seed, size_t off)
    __attribute__((noreturn));

/* End the process unless the size bytes at p (just returned by api) are all
 * zero. */
void ts_check_zero(const char *prog, const char *api, const void *p, size_t size);

/* ------------------------------------------------------------------- rings */

/* Bounded SPSC ring of blocks.  The producer publishes a slot with a release
 * store of tail; the consumer reads the slot after an acquire load of tail and
 * frees the slot with a release store of head, which the producer's acquire
 * load of head orders before it reuses the slot.  So the block's contents
 * (pattern written by the producer) happen-before the consumer's check. */
#define TS_RING_CAP 256
typedef struct {
    alignas(64) _Atomic size_t head; /* consumer */
    alignas(64) _Atomic size_t tail; /* producer */
    alignas(64) ts_block slot[TS_RING_CAP];
} ts_ring;

static inline bool ts_ring_push(ts_ring *q, const ts_block *b)
{
    size_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    size_t h = atomic_load_explicit(&q->head, memory_order_acquire);
    if (t - h == TS_RING_CAP)
        return false;
    q->slot[t % TS_RING_CAP] = *b;
    atomic_store_explicit(&q->tail, t + 1, memory_order_release);
    return true;
}

static inline bool ts_ring_pop(ts_ring *q, ts_block *b)
{
    size_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
    size_t t = atomic_load_explicit(&q->tail, memory_order_acquire);
    if (h == t)
        return false;
    *b = q->slot[h % TS_RING_CAP];
    atomic_store_explicit(&q->head, h + 1, memory_order_release);
    return true;
}

/* Blocks in the ring, as the producer sees it (an upper bound). */
static inline size_t ts_ring_used(ts_ring *q)
{
    size_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    size_t h = atomic_load_explicit(&q->head, memory_order_acquire);
    return t - h;
}

#endif /* HAKMEM_TS_BLOCK_H */
