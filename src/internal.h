/* hakmem internal types, constants and the invariants every file relies on.
 *
 * Data flows one way: preload.c -> api.c -> heap.c / large.c -> (remote.c,
 * handoff.c, superslab.c) -> registry.c -> os.c.  Every file shares these types.
 *
 * Memory shape
 *   SuperSlab  2 MiB, aligned to 2 MiB, from mmap.  Header (this file's
 *              hak_superslab_t) at its start, then 32 units of 64 KiB.  A slab is
 *              a run of 1..16 units holding blocks of one size class; its
 *              metadata and its remote-free head live in the header, indexed by
 *              the slab's first unit.  Slab 0 starts after the header.
 *   Owner      A SuperSlab and all its slabs are owned by one thread heap at a
 *              time (or by nobody while abandoned).  Only the owner carves,
 *              allocates from, locally frees into, drains and releases them.
 *   Registry   A two-level map from 2 MiB region to a tag (registry.c): which
 *              heap owns the SuperSlab there, or which large mapping covers it.
 */
#ifndef HAKMEM_INTERNAL_H
#define HAKMEM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ck_stack.h>
#include <pthread.h>

#include "hakmem.h"

#define HAK_LIKELY(x)   __builtin_expect(!!(x), 1)
#define HAK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HAK_NOINLINE    __attribute__((noinline))
#define HAK_COLD        __attribute__((cold, noinline))
#define HAK_HIDDEN      __attribute__((visibility("hidden")))
#define HAK_CACHE_LINE  64
/* An empty asm that "may change" x: the compiler keeps x in one register
 * instead of recomputing it (GCC 12 recomputed a slab's address three times
 * on the local free path, 8 instructions). */
#define HAK_ONE_VALUE(x) __asm__("" : "+r"(x))

/* ---------------------------------------------------------------- geometry */

#define HAK_SS_SHIFT    21
#define HAK_SS_SIZE     ((size_t)1 << HAK_SS_SHIFT)          /* 2 MiB */
#define HAK_UNIT_SHIFT  16
#define HAK_UNIT_SIZE   ((size_t)1 << HAK_UNIT_SHIFT)        /* 64 KiB */
#define HAK_UNITS       ((int)(HAK_SS_SIZE / HAK_UNIT_SIZE)) /* 32 */
#define HAK_ALL_UNITS   0xffffffffu
#define HAK_PAGE_SIZE   ((size_t)4096)
#define HAK_MAX_SPAN    16           /* largest slab: 16 units = 1 MiB */

#define HAK_SMALL_MAX   ((size_t)256 * 1024)  /* largest size-class block */
#define HAK_NUM_SIZES   52           /* classes malloc's sizes map to (size_class.c) */
#define HAK_NUM_TWINS   8            /* and their uncoloured twins (hak_class_twin) */
#define HAK_NUM_CLASSES (HAK_NUM_SIZES + HAK_NUM_TWINS)
#define HAK_MIN_ALIGN   16           /* every block start is 16-aligned */
#define HAK_SLAB_ALIGN  4096         /* every slab start but a coloured one is page-aligned */
#define HAK_COLOR_ALIGN 64           /* every slab start is 64-aligned */
#define HAK_MAX_ALLOC   ((size_t)PTRDIFF_MAX - 2 * HAK_SS_SIZE)

static inline uintptr_t hak_align_up(uintptr_t x, uintptr_t a) { return (x + a - 1) & ~(a - 1); }

/* ------------------------------------------------------------- size classes */

/* Classes: 16..128 step 16 (8 classes), then four per power of two up to
 * 256 KiB.  Waste above 64 bytes is below 25%.  Classes HAK_NUM_SIZES and
 * up are twins (below). */
extern HAK_HIDDEN const uint32_t hak_class_size[HAK_NUM_CLASSES];  /* block size */

/* Slab colouring.  The blocks of a class whose size is a multiple of 128
 * start at a few offsets in a page only (4 of a page's 64 cache lines for
 * 1 KiB blocks), so their first lines, the ones malloc, free and programs
 * touch, crowd a few sets of every cache.  The slabs of such a class up to
 * 1 KiB are coloured: each starts a different number of cache lines into
 * its unit (superslab.c), so different slabs use different sets (Bonwick's
 * slab colouring).  A coloured block is then only HAK_COLOR_ALIGN-aligned:
 * a request for more alignment goes to the class's twin, a class of the
 * same block size whose slabs are never coloured (statistics count it with
 * its class). */
static inline bool hak_class_colored(size_t c)
{
  return c < HAK_NUM_SIZES && hak_class_size[c] % 128 == 0 && hak_class_size[c] <= 1024;
}
static inline size_t hak_class_twin(size_t c) { return HAK_NUM_SIZES + hak_class_size[c] / 128 - 1; }
unsigned hak_class_span(size_t c);  /* units per slab (size_class.c) */
/* hak_class_index: 16-byte steps up to 1024 (indexes 0..64), then 128-byte
 * steps up to HAK_SMALL_MAX (65..2104); every class above 1024 bytes is a
 * multiple of 256. */
#define HAK_CLASS_INDEXES ((HAK_SMALL_MAX + 127 + (56 << 7)) / 128 + 1)
extern HAK_HIDDEN const uint8_t  hak_class_of_index[HAK_CLASS_INDEXES];  /* index -> class */
extern HAK_HIDDEN const uint8_t  hak_class_batch[HAK_NUM_CLASSES];  /* remote frees held per run */
#define HAK_TCACHE_MAX   64
/* 64 KiB a class (16 KiB before: churn -8%, mixed -10%, the classes above
 * 256 B held fewer than 64 blocks); a thread holds at most 1.8 MiB in all
 * at these base bounds, where tcmalloc allows 4 MiB. */
#define HAK_TCACHE_BYTES (64 * 1024)
/* A class whose cache overflows may grow past its base bound, by doubling,
 * up to 4 times it (256 blocks, 256 KiB), while the heap's growth budget
 * lasts: HAK_TCACHE_GROW_BYTES of blocks over the base bounds, so a thread
 * holds at most 2.8 MiB.  Growth lapses at the heap's next maintenance
 * (heap.c, tcache_relax). */
#define HAK_TCACHE_GROWTH     4
#define HAK_TCACHE_GROW_BYTES (1024 * 1024)

/* The table index of a size n <= HAK_SMALL_MAX, without a branch: sizes
 * above and below 1 KiB mix in a program, and a branch between them
 * mispredicted (mixed: 0.19 a malloc; 10% of its time).  With i = n / 16
 * rounded up, the 128-byte index n / 128 rounded up + 56 is
 * (i + 455) >> 3, which is >= i exactly while i <= 64: the index is the
 * smaller of the two, one cmov (GCC 12 branches on a plain min).  j is
 * computed from n, (n + 15 + 16 * 455) >> 7, the same value, so that i and
 * j are two independent steps: malloc's result waits on this chain. */
static inline size_t hak_class_index(size_t n)
{
  size_t i = (n + 15) >> 4, j = (n + 15 + 16 * 455) >> 7;
#if defined(__x86_64__)
  __asm__("cmpq %[i], %[j]\n\tcmova %[i], %[j]" : [j] "+r"(j) : [i] "r"(i) : "cc");
#else
  if (i < j) j = i;
#endif
  return j;
}
static inline size_t hak_size_class(size_t n) { return hak_class_of_index[hak_class_index(n)]; }

/* Trailers (trailer.c): every block of the classes above 64 KiB, 80 KiB
 * to 256 KiB (HAK_TRAILED_FIRST to the last size class; the twins come
 * after it), ends in a checked trailer, HAK_TRAIL_ROOM bytes from the size
 * asked for.  A request above HAK_UNTRAILED_MAX (the 64 KiB class) takes
 * the class of n + HAK_TRAIL_ROOM, so a size class serves requests up to
 * HAK_SMALL_REQ_MAX.  The units of trailed classes' slabs have unit_tcls
 * HAK_TCLS_TRAILED (hak_superslab_t), a thread-cache list that is always
 * full, so the free fast path hands their blocks to hak_tcache_overflow,
 * which checks the trailer. */
#define HAK_TRAILED_FIRST  44
#define HAK_UNTRAILED_MAX  ((size_t)65536)
#define HAK_TRAIL_ROOM     24
#define HAK_SMALL_REQ_MAX  (HAK_SMALL_MAX - HAK_TRAIL_ROOM)
#define HAK_TCLS_TRAILED   HAK_NUM_CLASSES
static inline bool hak_class_trailed(size_t c) { return c - HAK_TRAILED_FIRST < HAK_NUM_SIZES - HAK_TRAILED_FIRST; }
/* The class for a request of n bytes (> HAK_UNTRAILED_MAX) aligned to align
 * (a page at most), with room for the trailer; -1 if none (large). */
int hak_trailed_class(size_t n, size_t align);
void *hak_trailer_set(void *p, size_t n, size_t cls);  /* p (may be NULL), a block of cls, given n bytes */
size_t hak_trailer_size(const void *p, size_t cls);    /* n; aborts if the trailer word was overwritten */
size_t hak_trailer_check(const void *p, size_t cls);   /* the same, and aborts if the canary changed */
/* Blocks a thread cache holds of class c at least (its base bound; heap.c
 * may grow it): HAK_TCACHE_MAX, or HAK_TCACHE_BYTES of blocks; none of a
 * class above HAK_TCACHE_BYTES.  Off the fast path (heap set-up and
 * flushes). */
static inline uint32_t hak_tcache_limit(size_t c)
{
  uint32_t k = HAK_TCACHE_BYTES / hak_class_size[c];
  return k > HAK_TCACHE_MAX ? HAK_TCACHE_MAX : k;
}
void hak_size_class_check(void);  /* debug builds */
/* Smallest class >= n whose block size is a multiple of align (align <= 4096),
 * or -1 if none. */
int hak_size_class_aligned(size_t n, size_t align);

/* ------------------------------------------------------------------ blocks */

/* A free block, on any of hakmem's lists (a slab's free or rfree list, a
 * remote-free stack, a heap's delayed list), holds two words:
 *   link  = next ^ hak_keys.link     the list link, never a raw address;
 *   check = link ^ hak_keys.check    the free-block signature.
 * A block is free iff link ^ check == hak_keys.check.  malloc checks the
 * signature of the block it pops (and of every block a list walk visits)
 * before it follows the link, so a free block overwritten by a buffer
 * overflow or a write after free is reported (hak_block_corrupt) instead of
 * handing out a wild pointer; free checks it to catch a double free; and
 * malloc clears check, which invalidates the signature: the keys are chosen
 * so that link ^ 0 never equals hak_keys.check (link's low 4 bits are those
 * of a 16-aligned address, check's key is odd).  The keys are a per-process
 * secret, set once at initialisation. */
typedef struct hak_block {
  uintptr_t link;
  uintptr_t check;
} hak_block_t;

typedef struct hak_keys {
  uintptr_t link;    /* low 4 bits 0 */
  uintptr_t check;   /* odd */
} hak_keys_t;
extern HAK_HIDDEN hak_keys_t hak_keys;

_Noreturn void hak_block_corrupt(const void *b);
/* The same for malloc's pops, returning (never) a value: there the call is
 * a tail jump, so malloc's fast path needs no stack frame. */
void *hak_block_corrupt_pop(const void *b);

static inline bool hak_block_is_free(const hak_block_t *b)
{
  return (b->link ^ b->check) == hak_keys.check;
}
/* Decode b's link into *next; false if b's two words do not match. */
static inline bool hak_block_decode(const hak_block_t *b, hak_block_t **next)
{
  uintptr_t link = b->link;
  *next = (hak_block_t *)(link ^ hak_keys.link);
  return (link ^ b->check) == hak_keys.check;
}
/* The next block on b's list; aborts if b is not an intact free block. */
static inline hak_block_t *hak_block_next(const hak_block_t *b)
{
  hak_block_t *next;
  if (HAK_UNLIKELY(!hak_block_decode(b, &next))) hak_block_corrupt(b);
  return next;
}
/* Make b a free block whose list continues with next. */
static inline void hak_block_set_next(hak_block_t *b, hak_block_t *next)
{
  uintptr_t link = (uintptr_t)next ^ hak_keys.link;
  b->link = link;
  b->check = link ^ hak_keys.check;
}
/* b is handed out: it no longer looks free. */
static inline void hak_block_claim(hak_block_t *b) { b->check = 0; }

/* -------------------------------------------------------------- remote free */

/* A slab's remote-free head: a Treiber stack of blocks freed by threads that
 * do not own the slab, with a delayed-free state in the two low bits (blocks are
 * 16-aligned).  Many producers push with CAS; only the owner takes the stack
 * (one exchange), so there is no ABA.  The state tells a remote freer where to
 * put the block:
 *   NORMAL          push on this stack.
 *   USE_DELAYED     the slab is full and out of the owner's lists: hand the block
 *                   to the owner heap's delayed list instead, so the owner sees
 *                   the slab again (set by the owner only).
 *   DELAYED_FREEING a freer is between the two steps of that hand-over; the
 *                   owner waits for it before it changes the state or gives the
 *                   heap away, and never frees the slab meanwhile.
 *   NEVER_DELAYED   the owner heap is going away: push on this stack only.
 * Padded to a cache line: remote freers of different slabs do not share lines,
 * and none shares a line with the owner's slab metadata. */
enum { HAK_RS_NORMAL = 0, HAK_RS_USE_DELAYED = 1, HAK_RS_DELAYED_FREEING = 2, HAK_RS_NEVER_DELAYED = 3,
       HAK_RS_KEEP = 4 /* hak_remote_collect: leave the state as it is */ };
#define HAK_RS_MASK ((uintptr_t)3)
/* The head word also counts the blocks on the stack in its top 16 bits, so
 * the owner takes them without walking the list (a walk is a cache miss per
 * block, each last written by another core).  Block addresses fit in 48 bits:
 * hakmem maps without address hints, and the kernel then never returns
 * addresses above 2^47.  A slab holds at most 4096 blocks. */
#define HAK_RS_COUNT_SHIFT 48
#define HAK_RS_COUNT_ONE   ((uintptr_t)1 << HAK_RS_COUNT_SHIFT)
#define HAK_RS_PTR_MASK    ((HAK_RS_COUNT_ONE - 1) & ~(uintptr_t)(HAK_MIN_ALIGN - 1))

typedef struct hak_remote {
  _Atomic(uintptr_t) head;  /* count << 48 | hak_block_t* | state */
  char pad_[HAK_CACHE_LINE - sizeof(uintptr_t)];
} hak_remote_t;

/* ------------------------------------------------------------------- slabs */

enum { HAK_SLAB_UNUSED = 0, HAK_SLAB_CUR, HAK_SLAB_PARTIAL, HAK_SLAB_FULL, HAK_SLAB_ORPHAN };

/* Slab metadata, in two cache lines.  Every field is written only by the
 * thread whose heap owns the SuperSlab (or the thread adopting or abandoning
 * it), never concurrently, so none is atomic.
 *  - The first line is everything the owner's malloc and free use: the free
 *    list, counts, list links, and its own copy of the geometry (start,
 *    minv, shift), so a local free reads one line of metadata.  Written on
 *    every owner malloc and free.
 *  - The second line is the slab's geometry (remote_*, the same values):
 *    written only when the slab is set up (hak_ss_alloc_slab), while
 *    it holds no block.  Remote freers read only this line (and the slab's
 *    hak_remote_t), so they never contend with the owner's writes to the
 *    first line (a shared line cost a cache miss on every remote free: 41%
 *    of a producer/consumer free's samples).
 * Invariants: used = blocks handed out and not yet returned to this free list
 * (blocks waiting on the remote stack or a delayed list, or held by a
 * thread cache, count as used);
 * capacity <= reserved; blocks [0, capacity) were carved; free and rfree
 * list only blocks of this slab; used == 0 means every carved block is on
 * free or rfree; remote_x == x for the geometry. */
typedef struct hak_slab {
  /* owner's working state */
  hak_block_t *free;            /* local free list (LIFO) */
  hak_block_t *rfree;           /* blocks taken from the remote stack while free
                                   was not empty: become free when it runs out */
  struct hak_slab *prev, *next; /* the owner heap's partial list of the class (circular) */
  uint8_t *start;               /* first block                                  } the    */
  uint64_t minv;                /* inverse of block_size's odd part mod 2^64    } owner's */
  uint32_t used;
  uint32_t capacity;            /* blocks carved so far (lazy, page by page) */
  uint8_t shift;                /* block_size's trailing zero bits              } geometry */
  uint8_t state;                /* HAK_SLAB_* */
  /* geometry: immutable while the slab holds a block */
  _Alignas(HAK_CACHE_LINE) uint8_t *remote_start;  /* start, minv and shift, */
  uint64_t remote_minv;                             /* for other threads     */
  uint8_t remote_shift;
  uint32_t reserved;            /* blocks the slab can hold */
  uint32_t block_size;          /* 0 while the slab is unused */
  uint8_t cls;
  uint8_t span;                 /* units */
  uint8_t unit;                 /* first unit index */
  uint32_t owner_id;            /* id of the heap that carved it (statistics) */
} hak_slab_t;

/* --------------------------------------------------------------- SuperSlab */

typedef struct hak_heap hak_heap_t;

/* A region waiting for an RCU grace period before it is unmapped. */
typedef struct hak_retired {
  ck_stack_entry_t link;
  void *base;
  size_t size;
} hak_retired_t;

#define HAK_SS_MAGIC 0x48414b5353ul  /* "HAKSS" */

/* SuperSlab header.  Written by the owner; remote freers read the immutable
 * fields (magic, and a slab's geometry, which cannot change while the slab
 * holds the block being freed) and CAS remote[].  owner is atomic: the
 * delayed-free hand-over reads it from another thread.  While abandoned the
 * header belongs to the handoff stack and then to the adopting thread. */
typedef struct hak_superslab {
  uint64_t magic;
  _Atomic(hak_heap_t *) owner;      /* NULL while abandoned */
  uint32_t free_units;              /* owner: bit u set = unit u not in a slab */
  uint32_t dirty_units;             /* owner: free units that may be committed */
  uint32_t dirty_aged;              /* owner: those of them that were already
                                       dirty at the owner's last purge sweep */
  struct hak_superslab *prev, *next;/* owner heap's SuperSlab list */
  ck_stack_entry_t handoff;         /* link on the abandoned stack or the cache */
  hak_retired_t retired;            /* link on the retire list */
  uint16_t unit_slab[HAK_UNITS];    /* owner writes; unit -> offset of its slab's
                                       metadata from the SuperSlab's start */
  uint8_t unit_tcls[HAK_UNITS];     /* owner writes and reads; unit -> the thread-
                                       cache list a local free of its slab's blocks
                                       goes to: the slab's class, or HAK_TCLS_TRAILED
                                       (0 while the unit is in no slab).  Here and not
                                       in the slab: the push waits on one dependent
                                       load fewer */
  hak_slab_t slabs[HAK_UNITS] __attribute__((aligned(HAK_CACHE_LINE)));
  hak_remote_t remote_heads[HAK_UNITS] __attribute__((aligned(HAK_CACHE_LINE)));
} hak_superslab_t;

#define HAK_SS_HEADER_SIZE hak_align_up(sizeof(hak_superslab_t), HAK_PAGE_SIZE)

/* No slab in it: every unit free. */
static inline bool hak_ss_empty(const hak_superslab_t *ss) { return ss->free_units == HAK_ALL_UNITS; }

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
static inline uint64_t hak_block_index(const uint8_t *start, uint64_t minv, unsigned shift, const void *p)
{
  uint64_t x = ((uintptr_t)p - (uintptr_t)start) * minv;
  return (x >> shift) | (x << ((64 - shift) & 63));
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

/* ---------------------------------------------------------------- registry */

/* Tags of the registry map: 2 MiB region -> what it is.
 *   0                      not hakmem's
 *   heap | HAK_TAG_SS      a SuperSlab owned by heap (heaps are 64-aligned)
 *   HAK_TAG_SS             an abandoned SuperSlab
 *   base_region<<2 | HAK_TAG_LARGE  part of the large mapping starting there
 *   HAK_TAG_NONE           never stored: the tag of a thread with no heap */
#define HAK_TAG_SS    ((uintptr_t)1)
#define HAK_TAG_LARGE ((uintptr_t)2)
#define HAK_TAG_NONE  ((uintptr_t)3)
#define HAK_TAG_KIND  ((uintptr_t)3)

#define HAK_MAP_LEAF_BITS 13
#define HAK_MAP_TOP_BITS  13   /* 21 + 13 + 13 = 47 bits of address space */
extern HAK_HIDDEN _Atomic(_Atomic(uintptr_t) *) hak_map_top[1u << HAK_MAP_TOP_BITS];

/* Lock-free lookup.  The leaf arrays are never freed, so the lookup itself
 * needs no protection; dereferencing the memory it names does (see api.c). */
static inline uintptr_t hak_map_get(const void *p)
{
  uintptr_t a = (uintptr_t)p;
  if (HAK_UNLIKELY(a >> (HAK_SS_SHIFT + HAK_MAP_LEAF_BITS + HAK_MAP_TOP_BITS))) return 0;
  _Atomic(uintptr_t) *leaf =
      atomic_load_explicit(&hak_map_top[a >> (HAK_SS_SHIFT + HAK_MAP_LEAF_BITS)], memory_order_acquire);
  if (HAK_UNLIKELY(leaf == NULL)) return 0;
  /* acquire: pairs with the release store that published the region, so its
   * header is visible before we read it. */
  return atomic_load_explicit(&leaf[(a >> HAK_SS_SHIFT) & ((1u << HAK_MAP_LEAF_BITS) - 1)],
                              memory_order_acquire);
}
bool hak_map_set_range(void *base, size_t size, uintptr_t tag);   /* false: ENOMEM */
void hak_map_clear_range(void *base, size_t size);
void hak_rcu_read_lock(void);
void hak_rcu_read_unlock(void);
/* Unmap region after a grace period (batched); never call inside a read section. */
void hak_retire(hak_retired_t *r, void *base, size_t size);
bool hak_retire_deferred(hak_retired_t *r, void *base, size_t size);  /* no flush; true: one is due */
void hak_retire_flush(void);
void hak_rcu_synchronize(void);   /* a grace period; never inside a read section */
void hak_rcu_register_thread(void);  /* map liburcu's reader arena now (init) */
void hak_registry_before_fork(void);
void hak_registry_after_fork(bool child);

/* ---------------------------------------------------------------------- os */

void *hak_os_map_aligned(size_t size, size_t align);  /* NULL on failure */
void  hak_os_unmap(void *p, size_t size);
void  hak_os_purge(void *p, size_t size);             /* give pages back, keep range */
void  hak_os_hugepage(void *p, size_t size);          /* prefer THP there */
void  hak_os_protect(void *p, size_t size, bool access); /* read+write, or no access */
bool  hak_os_grow_in_place(void *p, size_t old, size_t new_size);
bool  hak_os_move(void *from, size_t size, void *dst);  /* page tables only */
uint64_t hak_os_now_ms(void);
void  hak_write_stderr(const char *s);
/* Allocation-free text output (fmt.c): a buffer flushed with write(2) to fd,
 * or with fwrite to file when file is set. */
typedef struct hak_out {
  int fd;
  void *file;        /* FILE *, or NULL */
  size_t len;
  char buf[1024];
} hak_out_t;
void hak_out_flush(hak_out_t *o);
void hak_out_str(hak_out_t *o, const char *s);
void hak_out_strw(hak_out_t *o, const char *s, int width);  /* < 0: right-aligned */
void hak_out_u64(hak_out_t *o, uint64_t v, int width);      /* right-aligned */
void hak_out_kv(hak_out_t *o, const char *name, uint64_t v); /* " name=v" */
_Noreturn void hak_fatal(const char *what, const void *p);

/* ----------------------------------------------------------------- options */

/* Every field is written once, by hak_options_init, before the first block
 * is handed out; read-only afterwards.  The table of names, defaults and
 * ranges is in options.c. */
typedef struct hak_options {
  uint8_t stats;             /* HAKMEM_STATS: 0 off, 1 block counts + summary, 2 + tables */
  uint8_t verbose;           /* HAKMEM_VERBOSE: print the options at start-up */
  bool secure;               /* HAKMEM_SECURE: the checks that cost (README, secure.c) */
  uint32_t purge_delay_ms;   /* HAKMEM_PURGE_DELAY_MS: keep free pages this long */
  size_t purge_threshold;    /* HAKMEM_PURGE_THRESHOLD_KB: purge at once above */
  uint32_t ss_reserve;       /* HAKMEM_SS_RESERVE: empty SuperSlabs a heap keeps */
  uint32_t parked_heaps;     /* HAKMEM_PARKED_HEAPS: exited threads' heaps kept whole */
  uint32_t retire_batch;     /* HAKMEM_RETIRE_BATCH: regions per grace period */
  uint32_t ss_cache;         /* HAKMEM_SS_CACHE: empty SuperSlabs kept for any heap */
  size_t large_cache;        /* HAKMEM_LARGE_CACHE_KB: freed large mappings kept */
} hak_options_t;
extern HAK_HIDDEN hak_options_t hak_opt;
void hak_options_init(void);

/* ------------------------------------------------------------------- heaps */

/* Per-thread counters.  Written only by the owning thread (relaxed load+store,
 * a plain increment on x86), read by hak_stats_get from any thread.  Block
 * counts are kept only with HAKMEM_STATS>=1 (hak_opt.stats, fixed at
 * initialisation, before the first block is handed out): the test costs a
 * compare of a read-only byte instead of a counter update on every malloc
 * and free. */
typedef _Atomic(uint64_t) hak_counter_t;
static inline void hak_count(hak_counter_t *c, uint64_t n)
{
  if (HAK_UNLIKELY(hak_opt.stats))
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

typedef struct hak_heap_stats {
  hak_counter_t allocs[HAK_NUM_CLASSES];
  hak_counter_t frees[HAK_NUM_CLASSES];    /* blocks of the class freed by this thread */
  hak_counter_t remote_frees;
  hak_counter_t large_allocs, large_frees, large_bytes_alloc, large_bytes_free;
  hak_counter_t foreign_frees;
  hak_counter_t trail_in, trail_out;       /* bytes of trailed blocks beyond their usable
                                              size (trailer.c), handed out and returned */
  hak_counter_t slabs[HAK_NUM_CLASSES];    /* slabs carved minus slabs released by this
                                              heap (a delta: may wrap below 0 when it
                                              releases an adopted slab) */
} hak_heap_stats_t;

/* HAKMEM_STATS=2: blocks this heap freed that another heap's thread had
 * allocated, by owner id (an open-addressing table, linear probing; a slot's
 * owner never changes until the heap exits; owner 0 or a full table: the
 * overflow count).  Written only by the heap's thread; read by reports
 * (owner with acquire, after the count was stored: a reader never sees a
 * slot's owner without its first count). */
#define HAK_RROW_SLOTS 16
typedef struct hak_remote_row {
  struct { _Atomic(uint32_t) owner; hak_counter_t count; } slot[HAK_RROW_SLOTS];
  hak_counter_t overflow;
} hak_remote_row_t;

enum { HAK_HEAP_EMPTY = 0, HAK_HEAP_LIVE, HAK_HEAP_DEAD };

/* A run of remote frees a heap holds back (remote.c): n blocks of slab
 * (another heap's, or nobody's), linked as a free list first..last (last's
 * link unset); slab NULL when the slot is empty.  Thread-owned. */
#define HAK_PEND_SLOTS 32
typedef struct hak_pend {
  hak_slab_t *slab;
  hak_block_t *first, *last;
  uint32_t n, limit;          /* pushed when n reaches limit (hak_class_batch) */
} hak_pend_t;

/* 64: with 16, two SuperSlabs of a heap that owns a few of them often
 * shared a slot and evicted each other, and each miss took the registry
 * (churn at 4 threads: 3% of its time in hak_free_other/free_local). */
#define HAK_OWNED_SLOTS 64
#define HAK_OWNED_NONE  UINTPTR_MAX   /* never a SuperSlab's address */
/* The key of p's SuperSlab: its address, which free computes anyway (a key
 * of address >> HAK_SS_SHIFT cost free a register copy). */
static inline uintptr_t hak_owned_key(const void *p) { return (uintptr_t)p & ~(HAK_SS_SIZE - 1); }
#define HAK_OWNED_SLOT(h, p) ((h)->owned[((uintptr_t)(p) >> HAK_SS_SHIFT) % HAK_OWNED_SLOTS])

/* A thread heap.  Everything but `delayed` and `stats` is touched only by the
 * thread that owns the heap (a parked heap, see heap.c: by the thread that
 * took it off the parked list, under the list's lock).  cur[c] is never
 * NULL (it points at the shared empty slab when the class has no slab), so
 * the fast path has one test.
 * Heaps are never unmapped: a heap whose thread exited goes back to the pool
 * and is reused, so a stale pointer to it never faults. */
struct hak_heap {
  /* free's proof of ownership: HAK_OWNED_SLOT(k) == k for some of the
   * SuperSlabs this heap owns (k = hak_owned_key, their address), so a free
   * into one of them needs no registry lookup.  Exact: a slot holds k only
   * while the heap owns that SuperSlab (hak_ss_link sets it, hak_ss_unlink
   * clears it); other owned SuperSlabs are found through the registry
   * (hak_free_other in api.c, which puts them back in their slot).  All slots
   * HAK_OWNED_NONE while the fast paths are off (hak_fast_on). */
  uintptr_t owned[HAK_OWNED_SLOTS];
  /* The thread cache: per class, a LIFO of blocks this thread freed, which
   * malloc hands out before the current slab's: the block freed last,
   * whatever its slab, is the one most likely still in the CPU's cache
   * (tcmalloc's thread cache).  Blocks of its own slabs always go there;
   * blocks of other heaps' slabs (free_remote in api.c) only while there
   * is room and the thread allocates the class itself (cur[c] set), so a
   * thread that only frees holds none back, and of a transfer-cache class
   * (xfer.c) only when the class's slots are full.  Invariants: tcache[c] lists
   * hak_tcache_limit(c) - tcache_room[c] free blocks of class c (at most
   * hak_tcache_limit(c): a local free that takes the room below 0
   * flushes); they count as used in their slabs, whoever owns them, until
   * flushed (hak_tcache_flush: to the slab's free list if this heap owns
   * it then, else as a remote free), so no slab or SuperSlab holding one
   * can be released; empty whenever the heap is not live (thread exit,
   * collect and parking flush it).  The bound of class c is
   * hak_tcache_limit(c) + tcache_grown[c] (hak_tcache_overflow grows it,
   * heap maintenance resets it); blocks of other heaps are taken only
   * below the base bound (tcache_room[c] > tcache_grown[c]).  The sum of
   * tcache_grown[c] * block size stays within HAK_TCACHE_GROW_BYTES. */
  hak_block_t *tcache[HAK_NUM_CLASSES + 1];  /* + HAK_TCLS_TRAILED: room 0, empty */
  int32_t tcache_room[HAK_NUM_CLASSES + 1];
  int32_t tcache_grown[HAK_NUM_CLASSES + 1];
  hak_slab_t *cur[HAK_NUM_CLASSES];        /* fast path: slab being allocated from */
  uintptr_t tag;                            /* registry tag of SuperSlabs it owns */
  int state;                                /* HAK_HEAP_* */
  hak_slab_t *partial[HAK_NUM_CLASSES];     /* slabs with room: circular, oldest first */
  hak_superslab_t *ss_list, *ss_tail;       /* SuperSlabs owned: with room first */
  uint32_t empty_ss;                        /* owned SuperSlabs fully empty */
  uint32_t dirty_units;                     /* free units maybe committed */
  uint64_t swept_ms;                        /* last purge sweep (superslab.c) */
  uint64_t maintained_ms;                   /* last heap_maintain pass */
  uint8_t color[HAK_NUM_CLASSES];           /* colour of the class's next slab (superslab.c) */
  /* Remote frees held back (remote.c, "pending frees"), by slab; all
   * pushed before the heap parks or is given up.  pend_key: the key
   * (hak_owned_key) of the SuperSlab of the run last added to, while that
   * run is pending (its blocks pin the SuperSlab), else HAK_OWNED_NONE. */
  uintptr_t pend_key;
  uint32_t pend_runs;                       /* slots of pend[] in use */
  hak_pend_t pend[HAK_PEND_SLOTS];
  ck_stack_entry_t pool_link;               /* on the free-heap pool */
  struct hak_heap *all_next;                /* list of every heap ever made */
  struct hak_heap *park_prev, *park_next;   /* on the parked list (heap.c), under its lock */
  uint64_t parked_ms;                       /* when its thread exited and it was parked */
  /* Blocks freed by other threads into this heap's full slabs (MPSC stack:
   * remote freers push with CAS, the owner takes all with one exchange). */
  _Alignas(HAK_CACHE_LINE) _Atomic(hak_block_t *) delayed;
  _Alignas(HAK_CACHE_LINE) hak_heap_stats_t stats;
  /* Identity for the statistics: id is unique per heap acquisition (never
   * 0; a heap reused by a new thread gets a new one), set before the heap is
   * used; tid and name (the thread's name, two words of a char[16], at heap
   * start and at exit) only with HAKMEM_STATS=2. */
  _Atomic(uint32_t) id;
  _Atomic(int32_t) tid;
  _Atomic(uint64_t) name[2];
  hak_remote_row_t rrow;
} __attribute__((aligned(HAK_CACHE_LINE)));

extern HAK_HIDDEN hak_slab_t hak_slab_empty;
extern HAK_HIDDEN hak_heap_t hak_heap_empty;      /* before a thread's first malloc */
extern HAK_HIDDEN hak_heap_t hak_heap_dead;       /* after the thread's heap was abandoned */
extern HAK_HIDDEN __thread hak_heap_t *hak_tls_heap;

void *hak_heap_alloc_slow(hak_heap_t *h, size_t cls);
/* free() of p that failed the block-start or double-free check: abort with
 * the message that says which. */
_Noreturn void hak_free_invalid(const void *p, bool owner);
void  hak_heap_free_local_slow(hak_heap_t *h, hak_slab_t *s);
void  hak_heap_collect(hak_heap_t *h, bool force);
hak_heap_t *hak_heap_acquire(void);
hak_heap_t *hak_heap_thread_get(hak_heap_t *h, uintptr_t tag);
void  hak_heap_abandon(hak_heap_t *h);
void  hak_heap_thread_init(void);
void  hak_heap_init(void);
void  hak_heap_before_fork(void);
void  hak_heap_after_fork(bool child);
void  hak_heap_slab_unfull(hak_heap_t *h, hak_slab_t *s);
/* HAKMEM_STATS: count block p of class cls, just allocated, on the calling
 * thread's heap (the heap the pop used may have been a temporary one). */
void  hak_stats_count_alloc(const void *p, size_t cls);
/* HAKMEM_STATS: a trailed block's bytes beyond its usable size, handed out
 * (freed false) or returned, counted on the calling thread's heap h, so
 * that live_bytes is the sum of the live blocks' usable sizes. */
void  hak_stats_count_trail(hak_heap_t *h, uint64_t bytes, bool freed);
hak_heap_t *hak_heap_list(void);

/* Keep the newest `keep` blocks of the thread cache of class cls, give the
 * others back to their slabs (heap.c). */
void hak_tcache_flush(hak_heap_t *h, size_t cls, uint32_t keep);
/* Class cls's thread cache went past its bound: grow the bound, or flush
 * half (heap.c). */
void hak_tcache_overflow(hak_heap_t *h, size_t cls);

/* Small-block fast paths (the whole of malloc and free for a thread's own
 * blocks): no lock, no atomic read-modify-write, no fence, no statistics
 * (with HAKMEM_STATS the fast paths are off and api.c counts).  malloc pops
 * the thread cache, else the current slab; a local free pushes on the
 * thread cache (hak_heap_free_local). */
static inline void *hak_heap_pop(hak_heap_t *h, size_t cls)
{
  hak_block_t *t = h->tcache[cls], *next;
  if (HAK_LIKELY(t != NULL)) {
    if (HAK_UNLIKELY(!hak_block_decode(t, &next))) return hak_block_corrupt_pop(t);
    h->tcache[cls] = next;
    h->tcache_room[cls]++;
    hak_block_claim(t);
    return t;
  }
  hak_slab_t *s = h->cur[cls];
  hak_block_t *b = s->free;
  if (HAK_LIKELY(b != NULL)) {
    if (HAK_UNLIKELY(!hak_block_decode(b, &next))) return hak_block_corrupt_pop(b);
    s->free = next;
    __builtin_prefetch(next, 1);  /* the class's next malloc writes it: start the miss now */
    s->used++;
    hak_block_claim(b);
    return b;
  }
  return hak_heap_alloc_slow(h, cls);
}

/* A block of class cls for any caller but hak_malloc's fast path: counted. */
static inline void *hak_heap_alloc(hak_heap_t *h, size_t cls)
{
  void *p = hak_heap_pop(h, cls);
  if (HAK_UNLIKELY(hak_opt.stats) && p != NULL) hak_stats_count_alloc(p, cls);
  return p;
}

/* Put a free block of a slab this heap owns back on the slab's list.  The
 * current slab needs nothing more; another slab does when it becomes empty
 * (give it back) or was full (back on the partial list). */
static inline void hak_heap_push_block(hak_heap_t *h, hak_slab_t *s, hak_block_t *b)
{
  hak_block_set_next(b, s->free);
  s->free = b;
  uint32_t used = --s->used;
  unsigned st = s->state;
  /* One rarely taken branch, computed without branches: whether the slab
   * is the current one varies from free to free (a free of a random block
   * mispredicted 0.3 times per larson step on "state != CUR" alone). */
  if (HAK_UNLIKELY((st == HAK_SLAB_FULL) | ((used == 0) & (st != HAK_SLAB_CUR)))) hak_heap_free_local_slow(h, s);
}

/* Push the validated free block b on class c's thread cache; returns the
 * room left (below 0: the caller flushes, or must not push). */
static inline int32_t hak_tcache_push(hak_heap_t *h, size_t c, hak_block_t *b)
{
  hak_block_set_next(b, h->tcache[c]);
  h->tcache[c] = b;
  return --h->tcache_room[c];
}

/* Free of a block in a SuperSlab this heap owns (the caller proved it:
 * owned[] or the registry), uncounted: onto the class's thread cache. */
static inline void hak_heap_free_local(hak_heap_t *h, void *p)
{
  hak_superslab_t *ss = hak_ss_of(p);
  size_t u = hak_unit_of(p);
  HAK_ONE_VALUE(u);  /* computed once for both lookups below */
  hak_slab_t *s = hak_unit_slab(ss, u);
  HAK_ONE_VALUE(s);
  hak_block_t *b = (hak_block_t *)p;
  /* The block-start check comes first: only a block start may be read. */
  if (HAK_UNLIKELY(!hak_slab_is_block(s, p) || hak_block_is_free(b))) hak_free_invalid(p, true);
  /* The list from the SuperSlab's header, not the slab: the push waits on
   * one load fewer. */
  size_t c = ss->unit_tcls[u];
  if (HAK_UNLIKELY(hak_tcache_push(h, c, b) < 0)) hak_tcache_overflow(h, c);
}

/* -------------------------------------------------------------- superslab */

hak_superslab_t *hak_ss_create(hak_heap_t *h);
hak_slab_t *hak_ss_alloc_slab(hak_heap_t *h, size_t cls, bool may_map);  /* NULL: no room / ENOMEM */
void hak_ss_free_slab(hak_heap_t *h, hak_slab_t *s);
void hak_ss_release(hak_heap_t *h, hak_superslab_t *ss);    /* unregister + retire */
void hak_ss_purge(hak_heap_t *h, bool force);
void hak_ss_link(hak_heap_t *h, hak_superslab_t *ss);
void hak_ss_before_fork(void);
void hak_ss_after_fork(bool child);
void hak_ss_unlink(hak_heap_t *h, hak_superslab_t *ss);
bool hak_slab_extend(hak_slab_t *s);

/* ------------------------------------------------------------------ remote */

void hak_remote_free(hak_superslab_t *ss, hak_slab_t *s, hak_block_t *b);
#define HAK_REMOTE_BATCH 64   /* most remote frees a live heap holds back (remote.c) */
#define HAK_REMOTE_BATCH_BYTES ((size_t)4096)  /* and most bytes of them in one run (size_class.c) */

/* The transfer cache (xfer.c): free blocks of the classes above 1 KiB up to
 * the trailed ones (1280 B .. 64 KiB), freed into other heaps' slabs, for
 * any thread's next malloc of the class. */
#define HAK_XFER_FIRST 20
#define HAK_XFER_LAST  (HAK_TRAILED_FIRST - 1)  /* the trailed classes follow, to the last size */
static inline bool hak_class_xfer(size_t c) { return c - HAK_XFER_FIRST <= HAK_XFER_LAST - HAK_XFER_FIRST; }
/* Keep b, a validated block of class c being freed into another heap's
 * slab; false if the class's slots are full (b untouched but for its
 * free-block words). */
bool  hak_xfer_put(size_t c, hak_block_t *b);
void *hak_xfer_take(size_t c);  /* a block of class c, claimed, or NULL */
/* Give the blocks back to their slabs: of every class (all), or of those
 * no put or take used for a purge delay. */
void  hak_xfer_drain(uint64_t now, bool all);
void hak_remote_flush(hak_heap_t *h);
void hak_remote_pend_flush(hak_heap_t *h, hak_pend_t *e);
void hak_remote_pend_start(hak_heap_t *h, hak_pend_t *e, hak_slab_t *s, hak_block_t *b);

/* Add b to e, the pending run of its slab s (remote.c). */
static inline void hak_remote_pend_add(hak_heap_t *h, hak_pend_t *e, hak_slab_t *s, hak_block_t *b)
{
  hak_block_set_next(b, e->first);  /* last's link is set by the push */
  e->first = b;
  h->pend_key = hak_owned_key(s);   /* pinned by this run */
  if (HAK_UNLIKELY(++e->n == e->limit)) hak_remote_pend_flush(h, e);
}

/* Hold back the remote free of b, a validated block of s, on the live heap
 * h (remote.c, "pending frees"). */
static inline void hak_remote_defer(hak_heap_t *h, hak_slab_t *s, hak_block_t *b)
{
  uintptr_t a = (uintptr_t)s;
  hak_pend_t *e = &h->pend[((a >> 7) ^ (a >> HAK_SS_SHIFT)) % HAK_PEND_SLOTS];
  if (HAK_UNLIKELY(e->slab != s)) hak_remote_pend_start(h, e, s, b);
  else hak_remote_pend_add(h, e, s, b);
}
uint32_t hak_remote_collect(hak_slab_t *s, uintptr_t new_state);
uint32_t hak_remote_pending(hak_slab_t *s);
bool hak_remote_mark_full(hak_slab_t *s);
void hak_remote_set_state(hak_slab_t *s, uintptr_t state);
void hak_remote_drain_delayed(hak_heap_t *h);
void hak_remote_after_fork_child(hak_slab_t *s);

/* ----------------------------------------------------------------- handoff */

/* A multi-producer stack of intrusive entries handed between threads (ck);
 * see handoff.c.  spill is touched only under lock. */
typedef struct hak_handoff {
  ck_stack_t stack;
  pthread_mutex_t lock;
  ck_stack_entry_t *spill;
  _Atomic(uint32_t) count;
} hak_handoff_t;
#define HAK_HANDOFF_INITIALIZER { CK_STACK_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, NULL, 0 }

void hak_handoff_push(hak_handoff_t *q, ck_stack_entry_t *e);
ck_stack_entry_t *hak_handoff_pop(hak_handoff_t *q);
uint32_t hak_handoff_count(hak_handoff_t *q);
void hak_handoff_before_fork(hak_handoff_t *q);
void hak_handoff_after_fork(hak_handoff_t *q, bool child);

extern HAK_HIDDEN hak_handoff_t hak_abandoned;   /* SuperSlabs of exited threads */
void hak_handoff_abandon(hak_superslab_t *ss);
hak_superslab_t *hak_handoff_take(void);

/* ------------------------------------------------------------------- large */

/* Header of a large mapping, at its start.  Written by the allocating thread
 * before the block is handed out (and before the mapping is registered, when
 * fresh); while the block is live only `live` changes, by the one free that
 * wins its CAS, and `usable`/`dirty`, by realloc of the block's holder.
 * Once free, the mapping belongs to the cache (large.c), to large.c's
 * cold_held (the last mapping discarded while the cache was cold) or to the
 * retire list, and only the thread that took it out of a cache slot (or of
 * cold_held) touches it.
 * The mapping's layout is in large.c.  dirty_from: the offset from which
 * the block area (up to the guard) may hold non-zero data; the pages
 * between the header page and it read as zero (never touched since mapped
 * or purged). */
typedef struct hak_large {
  uint64_t magic;
  _Atomic(uint32_t) live;     /* 1 while allocated; the freeing CAS makes it 0 */
  void *map_base;
  size_t map_size;
  void *user;
  size_t usable;
  size_t dirty_from;
  uint32_t owner_id;          /* id of the allocating heap (0: none): remote-free count */
  size_t live_counted;        /* what its allocation added to large.c's live total */
  uint64_t freed_ms;          /* when it went to the cache */
  hak_retired_t retired;
} hak_large_t;

#define HAK_LARGE_MAGIC 0x48414b4c52474500ul  /* "HAKLRGE" */

/* grow: realloc's new block, placed with room to grow (large.c's layout). */
void *hak_large_alloc(hak_heap_t *h, size_t size, size_t align, bool zero, bool grow);
void  hak_large_retire(hak_large_t *l);   /* outside any read-side section */
void  hak_large_trim(void);
void  hak_large_decay(void);              /* purge cache entries idle past the purge delay */
hak_large_t *hak_large_free(hak_heap_t *h, hak_large_t *l, void *p);  /* non-NULL: retire it */
hak_large_t *hak_large_of(uintptr_t tag, const void *p);  /* NULL: not a large block */
/* Resize a live large block to size bytes, in place or by moving its pages
 * (no copy); its new address, or NULL (the block is untouched).  Outside any
 * read-side section. */
void *hak_large_resize(hak_heap_t *h, hak_large_t *l, size_t size);

/* ------------------------------------------------------------------- stats */

/* Process totals: `folded` holds the counts of exited threads' heaps (added
 * at exit) and of threads without a live heap, field for field like a
 * heap's; the others are the mapping counters.  Any thread adds with a
 * relaxed fetch_add: they are statistics, ordered by nothing. */
typedef struct hak_global_stats {
  hak_heap_stats_t folded;
  _Atomic(uint64_t) ss_mapped, ss_unmapped, mapped_bytes;
  _Atomic(uint64_t) ss_purged, purged_bytes;   /* purge passes over a SuperSlab's free units */
  _Atomic(uint64_t) heaps_abandoned, ss_adopted;
} hak_global_stats_t;
extern HAK_HIDDEN hak_global_stats_t hak_gstats;
static inline void hak_gcount(_Atomic(uint64_t) *c, uint64_t n)
{
  atomic_fetch_add_explicit(c, n, memory_order_relaxed);  /* statistics only */
}
void hak_stats_fold(hak_heap_t *h);        /* thread exit: into the totals */
void hak_stats_heap_start(hak_heap_t *h);  /* a heap starts serving a thread */
void hak_stats_init(void);   /* after options: keep a descriptor for the report */
/* HAKMEM_STATS=2, a free by heap h (maybe not live) of a block whose slab or
 * large mapping owner_id allocated: the remote-free path only. */
void hak_stats_count_remote(hak_heap_t *h, uint32_t owner_id);
size_t hak_large_cached_bytes(void);       /* committed bytes in the large cache */
/* glibc's heap-inspection calls with hakmem's numbers (exported by preload.c). */
struct mallinfo2;
void hak_stats_mallinfo2(struct mallinfo2 *out);
int  hak_stats_malloc_info(int options, FILE *f);
void hak_stats_malloc_stats(void);

/* ------------------------------------------------------------------ secure */

/* HAKMEM_SECURE=1 (secure.c): trailers, padding and zeroing of small blocks. */

void  *hak_secure_alloc(hak_heap_t *h, size_t n, size_t align, bool zero);
void   hak_secure_free(hak_slab_t *s, void *p, bool owner);
size_t hak_secure_usable(hak_slab_t *s, const void *p);

/* -------------------------------------------------------------- foreign */

/* The system allocator, for pointers hakmem did not hand out: glibc's own in
 * the preload library (preload.c), libc's (or the sanitizer's) otherwise
 * (sys_direct.c). */
void   hak_sys_free(void *p);
void  *hak_sys_realloc(void *p, size_t n);
size_t hak_sys_usable_size(void *p);

/* --------------------------------------------------------------------- init */

extern HAK_HIDDEN _Atomic(int) hak_init_state;   /* 0 none, 1 running, 2 ready */
void hak_init_slow(void);
bool hak_init_recursing(void);      /* malloc re-entered during initialisation */
void *hak_boot_alloc(size_t n);
bool hak_boot_owns(const void *p);
size_t hak_boot_size(const void *p);
void hak_sys_init(void);            /* resolve the system allocator (may allocate) */
static inline void hak_init(void)
{
  if (HAK_UNLIKELY(atomic_load_explicit(&hak_init_state, memory_order_acquire) != 2)) hak_init_slow();
}

/* The fast paths (hak_malloc_inline and hak_free_inline below): malloc
 * serves sizes below hak_fast_limit with hak_heap_pop, and free frees
 * blocks that owned[] proves local with hak_heap_free_local.  Both are off
 * (limit 0, owned[] empty) before initialisation, in secure mode and with
 * statistics: those calls take the out-of-line paths, which check and
 * count.  Written once by hak_init_slow. */
extern HAK_HIDDEN size_t hak_fast_limit;
static inline bool hak_fast_on(void) { return hak_fast_limit != 0; }

/* malloc and free themselves.  Out of line, api.c's slow halves:
 * hak_malloc_medium takes sizes at or above hak_fast_limit; hak_free_pinned
 * frees a block of the SuperSlab this heap's pending remote frees pin
 * (pend_key, remote.c); hak_free_other every block owned[] does not prove
 * local (the registry decides). */
void *hak_malloc_medium(size_t n);
void  hak_free_pinned(hak_heap_t *h, void *p);
void  hak_free_other(hak_heap_t *h, void *p);

/* The whole of a small malloc: one compare, a table lookup to the class (no
 * branch between small and medium sizes), then the pop.  Inline here so
 * that the exported malloc (preload.c) is this code, not a jump to
 * hak_malloc: without the jump bignum and churn at 1 thread ran 2.3% and
 * 1.7% faster (pinned, 7 interleaved runs), 2 instructions a pair fewer. */
static inline void *hak_malloc_inline(size_t n)
{
  if (HAK_LIKELY(n < hak_fast_limit)) return hak_heap_pop(hak_tls_heap, hak_size_class(n));
  return hak_malloc_medium(n);
}

/* free's fast path: a block of one of the SuperSlabs owned[] proves this
 * heap's needs no registry lookup (only this thread can release them).
 * Inline for the exported free, as hak_malloc_inline. */
static inline void hak_free_inline(void *p)
{
  hak_heap_t *h = hak_tls_heap;
  uintptr_t k = hak_owned_key(p);
  if (HAK_LIKELY(HAK_OWNED_SLOT(h, p) == k)) {
    hak_heap_free_local(h, p);
    return;
  }
  if (k == h->pend_key) {
    hak_free_pinned(h, p);
    return;
  }
  hak_free_other(h, p);
}

/* Is secure mode in force (secure.c)?  Outside secure mode with the fast
 * paths on, one load answers; otherwise initialise and ask. */
static inline bool hak_secure_mode(void)
{
  if (HAK_LIKELY(hak_fast_on())) return false;
  hak_init();
  return hak_opt.secure;
}

#endif /* HAKMEM_INTERNAL_H */
