/* SuperSlab geometry lookups, and the SuperSlab module (superslab.c). */
#ifndef HAKMEM_SUPERSLAB_H
#define HAKMEM_SUPERSLAB_H

#include "base.h"
#include "types.h"

/* No slab in it: every unit free. */
static inline bool hak_ss_unused(const hak_superslab_t *ss) { return ss->free_units == HAK_ALL_UNITS; }
/* Units in its slabs. */
static inline uint32_t hak_ss_units_used(const hak_superslab_t *ss)
{
  return (uint32_t)hak_popcount64(~ss->free_units & HAK_ALL_UNITS);
}

static inline hak_superslab_t *hak_ss_of(const void *p)
{
  return (hak_superslab_t *)((uintptr_t)p & ~(HAK_SS_SIZE - 1));
}
static inline size_t hak_unit_of(const void *p) { return ((uintptr_t)p >> HAK_UNIT_SHIFT) & (HAK_UNITS - 1); }
static inline hak_slab_t *hak_unit_slab(hak_superslab_t *ss, size_t u)
{
  return (hak_slab_t *)((char *)ss + ss->unit_slab[u]);
}
static inline hak_slab_t *hak_slab_of(hak_superslab_t *ss, const void *p) { return hak_unit_slab(ss, hak_unit_of(p)); }
/* The slab of a block in a SuperSlab (its SuperSlab found from p). */
static inline hak_slab_t *hak_slab_at(const void *p) { return hak_slab_of(hak_ss_of(p), p); }
static inline hak_remote_t *hak_slab_remote(hak_slab_t *s)
{
  hak_superslab_t *ss = hak_ss_of(s);
  return &ss->remote_heads[s->unit];
}
/* The block index of p in a slab whose first block is at start, or a value
 * >= limit if p is not a block start below limit: the owner passes the
 * slab's first-line geometry and s->capacity (blocks carved so far); other
 * threads pass remote_* and s->reserved, which, unlike capacity, does not
 * change while the slab holds blocks.  Exact division test with no
 * division: for block_size = odd << shift, off * minv rotated right by
 * shift equals off / block_size when block_size divides off, and is larger
 * than any index (> 2^64 / block_size) when it does not
 * (Granlund-Montgomery). */
static inline uint64_t hak_block_index_of(uint64_t off, uint64_t minv, unsigned shift)
{
  uint64_t x = off * minv;
  return (x >> shift) | (x << ((64 - shift) & 63));
}
static inline uint64_t hak_block_index(const uint8_t *start, uint64_t minv, unsigned shift, const void *p)
{
  return hak_block_index_of((uintptr_t)p - (uintptr_t)start, minv, shift);
}
/* Is p, in the unit whose entry is g, a carved block start of its slab
 * (the owner's free: the test of hak_slab_is_block from the SuperSlab
 * header alone)?  The offset is taken modulo 2^32 from the start's low
 * bits: a p below the start gives 2^32 - d with d < 2 MiB, which, a
 * multiple of the block size or not, indexes past any slab's 4096 blocks. */
static inline bool hak_unit_is_block(const hak_unit_geom_t *g, const void *p)
{
  uint32_t off = (uint32_t)(uintptr_t)p - g->start;
  return hak_block_index_of(off, g->minv, g->shift) < g->capacity;
}
static inline const hak_unit_geom_t *hak_unit_geom_of(const hak_superslab_t *ss, const void *p)
{
  return &ss->unit_geom[hak_unit_of(p)];
}
/* Is p a carved block start of s (the owner's test)? */
static inline bool hak_slab_is_block(const hak_slab_t *s, const void *p)
{
  return hak_block_index(s->start, s->minv, s->shift, p) < s->capacity;
}
/* Is p a block start of s (another thread's test: reads only the geometry line)? */
static inline bool hak_slab_is_block_remote(const hak_slab_t *s, const void *p)
{
  return hak_block_index(s->remote_start, s->remote_minv, s->remote_shift, p) < s->reserved;
}
_Static_assert(offsetof(hak_slab_t, state) < HAK_CACHE_LINE, "the owner's fields fit one line");

/* A slab's used count (types.h, hak_slab_t).  Only the owner stores it;
 * relaxed, a plain load or store on x86: the statistics read it from other
 * threads (stats_report.c), so it is atomic, and only that. */
static inline uint32_t hak_slab_used(const hak_slab_t *s)
{
  return atomic_load_explicit(&s->used, memory_order_relaxed);
}
static inline void hak_slab_used_set(hak_slab_t *s, uint32_t n)
{
  atomic_store_explicit(&s->used, n, memory_order_relaxed);
}
/* Set s's carved capacity, in the slab and in its units' entries (the
 * owner, as every write of capacity). */
void hak_slab_set_capacity(hak_slab_t *s, uint32_t capacity);

/* The key of p's SuperSlab: its address, which free computes anyway (a key
 * of address >> HAK_SS_SHIFT cost free a register copy). */
static inline uintptr_t hak_owned_key(const void *p) { return (uintptr_t)p & ~(HAK_SS_SIZE - 1); }
#define HAK_OWNED_SLOT(h, p) ((h)->owned[((uintptr_t)(p) >> HAK_SS_SHIFT) % HAK_OWNED_SLOTS])
/* p's SuperSlab, which h owns (the registry said so), takes its slot. */
static inline void hak_ss_owned_put(hak_heap_t *h, const void *p) { HAK_OWNED_SLOT(h, p) = hak_owned_key(p); }

hak_superslab_t *hak_ss_create(hak_heap_t *h);
hak_slab_t *hak_ss_alloc_slab(hak_heap_t *h, size_t cls, bool may_map);  /* NULL: no room / ENOMEM */
void hak_ss_free_slab(hak_heap_t *h, hak_slab_t *s);
void hak_ss_release(hak_heap_t *h, hak_superslab_t *ss);    /* to the cache of empty ones, or unmapped */
void hak_ss_set_purger(bool on);          /* a purger thread runs: the cache keeps pages */
bool hak_ss_purger(void);                 /* whether one runs (relaxed: a hint) */
uint32_t hak_ss_cache_refaults(void);     /* SuperSlabs taken back purged (no purger ran) */
uint64_t hak_ss_cache_decay(bool force);  /* age the cache; when it is next due (0: never) */
void hak_ss_purge(hak_heap_t *h, bool force);
void hak_ss_link(hak_heap_t *h, hak_superslab_t *ss);
void hak_ss_heap_reset(hak_heap_t *h);  /* a heap starts serving a thread: owns none */
void hak_ss_before_fork(void);
void hak_ss_after_fork(bool child);
void hak_ss_unlink(hak_heap_t *h, hak_superslab_t *ss);
bool hak_slab_extend(hak_slab_t *s);

#endif /* HAKMEM_SUPERSLAB_H */
