/* hakmem's shared structures and the invariants every file relies on; no
 * functions (each module's header has its own).  Layers: src/README.md.
 *
 * Memory shape
 *   SuperSlab  2 MiB, aligned to 2 MiB, from mmap.  Header (this file's
 *              hak_superslab_t) at its start, then 32 units of 64 KiB.  A slab is
 *              a run of 1..16 units holding blocks of one size class; its
 *              metadata and its remote-free head live in the header, indexed by
 *              the slab's first unit.  Slab 0 starts after the header.
 *   Owner      A SuperSlab and all its slabs are owned by one thread heap at a
 *              time (or by nobody while abandoned).  Only the owner carves,
 *              allocates from, locally frees into, drains and releases them:
 *              the owner heap's thread, or the purger holding the heap's
 *              lock while that thread idles (heap.c, "idle heaps"), never
 *              on the current slabs.
 *   Registry   A two-level map from 2 MiB region to a tag (registry.c): which
 *              heap owns the SuperSlab there, or which large mapping covers it.
 */
#ifndef HAKMEM_TYPES_H
#define HAKMEM_TYPES_H

#include <ck_stack.h>
#include <pthread.h>

#include "base.h"

/* ------------------------------------------------------------------ blocks */

/* A free block, on any of hakmem's lists (a slab's free or rfree list, a
 * remote-free stack, a heap's delayed list), holds two words:
 *   link  = next ^ hak_keys.link                 the list link, never a raw
 *                                                address;
 *   check = link ^ hak_keys.check ^ its address  the free-block signature.
 * A block b is free iff check == link ^ hak_keys.check ^ b: bound to b's
 * address, so the two words of a free block copied into a live one (a
 * struct copied from freed memory, a pool that copies whole blocks) do not
 * make that one look free.  malloc checks the
 * signature of the block it pops (and of every block a list walk visits)
 * before it follows the link, so a free block overwritten by a buffer
 * overflow or a write after free is reported (hak_block_corrupt) instead of
 * handing out a wild pointer; free checks it to catch a double free; and
 * malloc clears check, which invalidates the signature: 0 never equals
 * link ^ hak_keys.check ^ b (the low 4 bits of link and b are those of
 * 16-aligned addresses, check's key is odd).  The keys are a per-process
 * secret, set once at initialisation. */
typedef struct hak_block {
  uintptr_t link;
  uintptr_t check;
} hak_block_t;

/* Read by every malloc and free: a cache line of its own, so that no
 * variable another thread writes shares it (with hak_gstats beside it,
 * every slow-path count a thread made cost the other threads' fast paths
 * a miss). */
typedef struct hak_keys {
  _Alignas(HAK_CACHE_LINE) uintptr_t link;    /* low 4 bits 0 */
  uintptr_t check;   /* odd */
} hak_keys_t;

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
enum { HAK_RS_NORMAL = 0, HAK_RS_USE_DELAYED = 1, HAK_RS_DELAYED_FREEING = 2, HAK_RS_NEVER_DELAYED = 3 };
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
 * it, or the purger under the heap's lock), never concurrently.  Two are atomic only because the statistics
 * (mallinfo2 & co, stats_report.c) read them from any thread while the
 * owner works: used, and stat_cls, which the owner store relaxed
 * (superslab.h, hak_slab_used_set: a plain mov on x86, so the owner's paths
 * cost the same) and a reader loads relaxed -- a snapshot, ordered by
 * nothing.
 *  - The first line is the owner's working state: the free list, counts,
 *    list links, and its own copy of the geometry (start, minv, shift).
 *    The fast local free reads none of it: the geometry and capacity it
 *    checks are mirrored in its unit's entry of the SuperSlab header
 *    (hak_unit_geom_t).
 *  - The second line is the slab's geometry (remote_*, the same values):
 *    written only when the slab is set up (hak_ss_alloc_slab), while
 *    it holds no block.  Remote freers read only this line (and the slab's
 *    hak_remote_t), so they never contend with the owner's writes to the
 *    first line (a shared line costs a cache miss on every remote free).
 * Invariants: used = blocks handed out and not yet returned to this free list
 * (blocks waiting on the remote stack or a delayed list, or held by a
 * thread cache, count as used);
 * capacity <= reserved; blocks [0, capacity) were carved; free and rfree
 * list only blocks of this slab; used == 0 means every carved block is on
 * free or rfree; remote_x == x for the geometry; fresh: nothing has written
 * the slab's memory from block capacity on since its pages were last zero
 * (never touched, or purged), so a block carved there is zero but for the
 * link and check words the carving writes (set by hak_ss_alloc_slab, from
 * its units' dirty bits; cleared by hak_remote_collect when the slab goes
 * back to uncarved over written memory). */
typedef struct hak_slab {
  /* owner's working state */
  hak_block_t *free;            /* local free list (LIFO) */
  hak_block_t *rfree;           /* blocks taken from the remote stack while free
                                   was not empty: become free when it runs out */
  struct hak_slab *prev, *next; /* the owner heap's partial list of the class (circular) */
  uint8_t *start;               /* first block                                  } the    */
  uint64_t minv;                /* inverse of block_size's odd part mod 2^64    } owner's */
  _Atomic(uint32_t) used;       /* owner: hak_slab_used / hak_slab_used_set */
  uint32_t capacity;            /* blocks carved so far (lazy, page by page) */
  uint8_t shift;                /* block_size's trailing zero bits              } geometry */
  uint8_t state;                /* HAK_SLAB_* */
  uint8_t fresh;                /* see above: calloc skips zeroing its new blocks */
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
  _Atomic(uint8_t) stat_cls;    /* cls again, for the statistics' walk from any
                                   thread (stored relaxed at set-up, before
                                   used leaves 0) */
} hak_slab_t;

/* --------------------------------------------------------------- SuperSlab */

typedef struct hak_heap hak_heap_t;
/* malloc's pops (hak_tcache_pop_counted, hak_slab_pop_counted): after a
 * successful pop for n units of the heap profiler's countdown (16 bytes:
 * prof.h), the countdown (hak_heap_t.prof_left) goes down by n and, below
 * zero, the pop returns sampled(h, block, n) in the block's place
 * (alloc.c). */
typedef void *(*hak_pop_sampled_fn)(hak_heap_t *h, void *p, size_t n);

/* A region waiting for an RCU grace period before it is unmapped. */
typedef struct hak_retired {
  ck_stack_entry_t link;
  void *base;
  size_t size;
} hak_retired_t;

/* What the owner's free of a block in a unit needs, in 16 bytes of the
 * SuperSlab header, so that the free reads no slab metadata: its slab's
 * block-start geometry and carved capacity, and the thread-cache list the
 * block goes to (hak_unit_is_block, free.c).  Every unit of a slab holds
 * the same values: minv and shift = the slab's, start = the low 32 bits
 * of the slab's start, capacity = the slab's capacity (kept equal by
 * hak_slab_set_capacity), tcls = the slab's class, or HAK_TCLS_TRAILED;
 * a unit in no slab has capacity 0 and tcls 0.  Written by superslab.c
 * only, by the owner (as the slab's fields). */
typedef struct hak_unit_geom {
  uint64_t minv;
  uint32_t start;
  uint16_t capacity;
  uint8_t shift;
  uint8_t tcls;
} hak_unit_geom_t;

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
  uint32_t purged_units;            /* owner: units its last aged sweep purged and
                                       no slab took since (superslab.c) */
  struct hak_superslab *prev, *next;/* owner heap's SuperSlab list; while in the
                                       empty-SuperSlab cache, its list (superslab.c) */
  uint64_t cached_ms;               /* when it entered that cache (under its lock) */
  ck_stack_entry_t handoff;         /* link on the abandoned stack or the cache */
  hak_retired_t retired;            /* link on the retire list */
  uint16_t unit_slab[HAK_UNITS];    /* owner writes; unit -> offset of its slab's
                                       metadata from the SuperSlab's start */
  hak_unit_geom_t unit_geom[HAK_UNITS] __attribute__((aligned(16)));  /* owner writes and reads
                                       (superslab.c); 16-aligned: an entry never
                                       spans two cache lines */
  hak_slab_t slabs[HAK_UNITS] __attribute__((aligned(HAK_CACHE_LINE)));
  hak_remote_t remote_heads[HAK_UNITS] __attribute__((aligned(HAK_CACHE_LINE)));
} hak_superslab_t;

#define HAK_SS_HEADER_SIZE hak_align_up(sizeof(hak_superslab_t), HAK_PAGE_SIZE)

/* ----------------------------------------------------------------- options */

/* Every field is written once, by hak_options_init, before the first block
 * is handed out; read-only afterwards.  The table of names, defaults and
 * ranges is in options.c. */
typedef struct hak_options {
  uint8_t stats;             /* HAKMEM_STATS: 0 off, 1 block counts + summary, 2 + tables */
  uint8_t verbose;           /* HAKMEM_VERBOSE: print the options at start-up */
  bool secure;               /* HAKMEM_SECURE: the checks that cost (docs/hardening.md, secure.c) */
  uint32_t purge_delay_ms;   /* HAKMEM_PURGE_DELAY_MS: keep free pages this long */
  size_t purge_threshold;    /* HAKMEM_PURGE_THRESHOLD_KB: above it, a heap's sweeps wait a quarter of the delay */
  uint32_t ss_reserve;       /* HAKMEM_SS_RESERVE: empty SuperSlabs a heap keeps */
  uint32_t parked_heaps;     /* HAKMEM_PARKED_HEAPS: exited threads' heaps kept whole */
  uint32_t retire_batch;     /* HAKMEM_RETIRE_BATCH: regions per grace period */
  uint32_t ss_cache;         /* HAKMEM_SS_CACHE: empty SuperSlabs kept for any heap */
  size_t large_cache;        /* HAKMEM_LARGE_CACHE_KB: freed large mappings kept */
  uint8_t large_arena;       /* HAKMEM_LARGE_ARENA: large blocks up to 8 MiB in page arenas (arena.c) */
  uint8_t hugepages;         /* HAKMEM_HUGEPAGES: large blocks written whole get huge pages (large.c) */
  uint8_t prof;              /* HAKMEM_PROF: the sampling heap profiler (prof.c) */
  uint8_t prof_leaks;        /* HAKMEM_PROF_LEAKS: live sampled sites at exit */
  uint8_t prof_signal;       /* HAKMEM_PROF_SIGNAL: the signal that writes a profile */
  size_t prof_sample;        /* HAKMEM_PROF_SAMPLE: mean bytes between samples */
  char prof_file[256];       /* HAKMEM_PROF_FILE: the profile's path; "" = default */
  uint8_t purge_thread;      /* HAKMEM_PURGE_THREAD: a thread gives idle free pages back */
  uint32_t cache_delay_ms;   /* HAKMEM_CACHE_DELAY_MS: idle time before the global caches purge */
  uint8_t idle_take;         /* HAKMEM_IDLE_TAKE: the purger takes an idle thread's caches */
} hak_options_t;

/* ------------------------------------------------------------------- heaps */

/* Per-thread counters.  Written only by the owning thread (relaxed load+store,
 * a plain increment on x86), read by hak_stats_get from any thread.  Block
 * counts are kept only with HAKMEM_STATS>=1 (hak_opt.stats, fixed at
 * initialisation, before the first block is handed out): the test costs a
 * compare of a read-only byte instead of a counter update on every malloc
 * and free. */
typedef _Atomic(uint64_t) hak_counter_t;

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

enum { HAK_HEAP_UNSTARTED = 0, HAK_HEAP_LIVE, HAK_HEAP_DEAD };

/* A run of remote frees a heap holds back (remote.c): n blocks of slab
 * (another heap's, or nobody's), linked as a free list first..last (last's
 * link unset); slab NULL when the slot is empty.  Thread-owned. */
#define HAK_PEND_SLOTS 32
typedef struct hak_pend {
  hak_slab_t *slab;
  hak_block_t *first, *last;
  uint32_t n, limit;          /* pushed when n reaches limit (hak_class_batch) */
} hak_pend_t;

/* 64: with fewer, two SuperSlabs of a heap that owns a few of them often
 * share a slot and evict each other, and each miss takes the registry
 * (hak_free_generic). */
#define HAK_OWNED_SLOTS 64
#define HAK_OWNED_NONE  UINTPTR_MAX   /* never a SuperSlab's address */

/* A thread heap.  Everything but `delayed`, `stats` and `lock` is touched
 * only by the thread that owns the heap (a parked heap, see heap.c: by the
 * thread that took it off the parked list, or that takes one of its
 * SuperSlabs, under the list's lock), and,
 * while the heap's thread is idle, by the purger thread under `lock`: the
 * owner's slow paths hold `lock`, its fast paths (the thread cache, the
 * current slabs' pops) do not, and the purger touches them only once it
 * has taken the heap from the thread's hak_tls_heap and proved the thread
 * blocked outside hakmem (heap.c, "idle heaps").  cur[c] is never
 * NULL (it points at the sentinel slab, hak_slab_sentinel, when the class has no slab), so
 * the fast path has one test.
 * Heaps are never unmapped: a heap whose thread exited goes back to the pool
 * and is reused, so a stale pointer to it never faults.
 * Each field is written by one module (through its functions, the inline
 * ones of its header included):
 *   heap        cur, tag, state, maintained_ms, pool_link, all_next,
 *               park_prev, park_next, parked_ms, parked_cpu, parked,
 *               claimed, heir_tag, heir_ms, lock, reclaim_seen, reclaim_skip,
 *               reclaim_backoff, reclaim_idle, reclaim_kept, home_tid,
 *               home_slot, home_stack; heir_frees (through
 *               heap.h's inline functions)
 *   large       large_kept, large_kept_bytes, large_keep_big,
 *               large_big_freed
 *   tcache      tcache, tcache_room, tcache_grown
 *   partial     partial
 *   superslab   owned, ss_list, ss_tail, unused_ss, dirty_units, swept_ms,
 *               purge_shift, purge_calm, purge_regret, color
 *   remote      pend_key, pend_runs, pend; delayed (other threads push, the
 *               owner takes)
 *   stats       id, tid, name, rrow; stats is counted through stats.h's
 *               hak_count by the heap's thread, folded and zeroed by stats.c */
struct hak_heap {
  /* The thread cache: per class, a LIFO of blocks this thread freed, which
   * malloc hands out before the current slab's: the block freed last,
   * whatever its slab, is the one most likely still in the CPU's cache
   * (tcmalloc's thread cache).  Blocks of its own slabs always go there;
   * blocks of other heaps' slabs (free_remote in free.c) only while it is
   * less than half full and the thread allocates the class itself (cur[c] set), so a
   * thread that only frees holds none back, and of a transfer-cache class
   * (xfer.c) only when the class's slots are full.  Invariants: tcache[c] lists
   * hak_tcache_limit(c) - tcache_room[c] free blocks of class c (at most
   * hak_tcache_limit(c): a local free that takes the room below 0
   * flushes); they count as used in their slabs, whoever owns them, until
   * flushed (hak_tcache_flush, tcache.c: to the slab's free list if this heap owns
   * it then, else as a remote free), so no slab or SuperSlab holding one
   * can be released; empty whenever the heap is not live (thread exit,
   * collect and parking flush it).  The bound of class c is
   * hak_tcache_limit(c) + tcache_grown[c] (hak_tcache_overflow grows it,
   * heap maintenance resets it); blocks of other heaps are taken only
   * below half the base bound (hak_tcache_takes_foreign).  The sum of
   * tcache_grown[c] * block size stays within HAK_TCACHE_GROW_BYTES. */
  hak_block_t *tcache[HAK_NUM_CLASSES + 1];  /* + HAK_TCLS_TRAILED: room 0, empty */
  int32_t tcache_room[HAK_NUM_CLASSES + 1];
  int32_t tcache_grown[HAK_NUM_CLASSES + 1];
  /* free's proof of ownership: HAK_OWNED_SLOT(k) == k for some of the
   * SuperSlabs this heap owns (k = hak_owned_key, their address), so a free
   * into one of them needs no registry lookup.  Exact: a slot holds k only
   * while the heap owns that SuperSlab (hak_ss_link sets it, hak_ss_unlink
   * clears it); other owned SuperSlabs are found through the registry
   * (hak_free_generic in free.c, which puts them back in their slot).  All slots
   * HAK_OWNED_NONE while the fast paths are off (hak_fast_on). */
  uintptr_t owned[HAK_OWNED_SLOTS];
  hak_slab_t *cur[HAK_NUM_CLASSES];        /* fast path: slab being allocated from */
  /* The heap profiler's countdown (prof.h): what this heap's thread may
   * still allocate before the next sample, in units of 16 bytes; written by that thread only,
   * after a successful pop or in malloc's slow paths of a live heap, so
   * the static hak_heap_unstarted and hak_heap_dead keep INT64_MAX.
   * Set at thread start (heap.c) by hak_prof_next_left. */
  int64_t prof_left;
  uintptr_t tag;                            /* registry tag of SuperSlabs it owns */
  int state;                                /* HAK_HEAP_* */
  hak_slab_t *partial[HAK_NUM_CLASSES];     /* slabs with room: circular, oldest first */
  hak_superslab_t *ss_list, *ss_tail;       /* SuperSlabs owned: with room first */
  uint32_t unused_ss;                        /* owned SuperSlabs fully empty */
  uint32_t dirty_units;                     /* free units maybe committed */
  uint64_t swept_ms;                        /* last purge sweep (superslab.c) */
  /* The aged sweeps' delay is the purge delay << purge_shift (superslab.c,
   * hak_ss_purge): raised when a slab takes units the last sweep purged
   * (purge_regret: since that sweep), lowered after PURGE_CALM_SWEEPS
   * sweeps in a row without (purge_calm counts them). */
  uint8_t purge_shift, purge_calm;
  bool purge_regret;
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
  int32_t parked_cpu;                       /* the CPU that thread exited on (-1: unknown) */
  /* The heap this thread wanted at its start and could not have yet (see
   * hak_heap_inherit): its tag, or 0; and when the thread started. */
  uintptr_t heir_tag;
  uint64_t heir_ms;
  uint32_t heir_frees;                      /* remote frees since */
  /* 1 while on the parked list (written under the list's lock; any thread
   * reads it, relaxed, as a hint before it takes the lock). */
  _Atomic(uint8_t) parked;
  /* 1 while a thread waits to inherit this heap (set by that thread,
   * cleared by whoever takes the heap off the parked list, under its lock,
   * or by that thread when it gives up waiting): a new thread takes another
   * parked heap.  Relaxed: a hint for park_take, which holds the lock. */
  _Atomic(uint8_t) claimed;
  /* The heap's lock, taken by its thread on every slow path (heap.h,
   * hak_heap_lock) and by the purger, never waiting, to reclaim the heap of
   * an idle thread (heap.c): HAK_HEAP_OWNER or HAK_HEAP_RECLAIM while held
   * (never both), and a count of holds above them, which shows the purger
   * whether the thread made a slow-path call since its last look.  A heap
   * is only ever locked by one thread at a time, and is released before it
   * goes where another thread can take it (the parked list, the pool). */
  _Atomic(uint32_t) lock;
#define HAK_HEAP_OWNER   1u   /* lock: held by the heap's thread */
#define HAK_HEAP_RECLAIM 2u   /* lock: held by the purger (partial.c then leaves
                                 the current slabs and SuperSlab ownership
                                 alone: the owner's fast paths read them) */
#define HAK_HEAP_HOLD    4u   /* lock: each release adds this */
  /* The purger's own bookkeeping (its thread only): the lock word it saw
   * last, how many of its passes it still skips this heap (an idle heap
   * with nothing to give back is looked at less and less often: 1, 2, 4
   * .. 32 passes), the exponent, and how many looks in a row found it
   * idle. */
  uint32_t reclaim_seen, reclaim_skip, reclaim_backoff, reclaim_idle;
  struct hak_large *reclaim_kept;  /* large_kept as its last pass saw it */
  /* The thread whose heap this is (its kernel id, its hak_tls_heap, and an
   * address on its stack, so that the purger can take the heap from it,
   * heap.c "idle heaps"): written by that thread under `lock` when the
   * heap becomes its own, cleared under `lock` when the heap is parked or
   * given up (and in a fork child, for the heaps of the threads it does
   * not have, by its only thread), read by the purger under `lock`; 0 and
   * NULL while no thread has the heap. */
  int32_t home_tid;
  _Atomic(struct hak_heap *) *home_slot;
  uintptr_t home_stack;
  /* The arena run of a large block this heap's thread freed, kept out of
   * the arenas for the thread's next large malloc (large.c, "kept runs").
   * Written only by large.c: stored by a CAS from NULL (the thread's
   * free), taken by an exchange with NULL (the thread's malloc, or the
   * thread's exit, a collect or the purger giving it back): whoever takes
   * it owns the run.  acq_rel: the run's header, written before the store,
   * is seen by the taker.  NULL whenever the heap is not live. */
  _Atomic(struct hak_large *) large_kept;
  /* The bytes of the kept run's last block, 0 if none: large.c counts a
   * kept run in its live totals until it is reused or given back, and the
   * statistics subtract these (hak_heap_kept_bytes).  Raised before the
   * run is stored, lowered after it is taken (relaxed: a sum). */
  _Atomic(size_t) large_kept_bytes;
  /* Whether runs above 2 MiB are kept too, and the pages of the last such
   * run the thread freed without keeping it (0: none): kept once the
   * thread's next large malloc fitted that run, not once a kept one did
   * not fit (large.c, "kept runs").  The owner's, written only by large.c. */
  bool large_keep_big;
  uint32_t large_big_freed;
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
 * or purged).  dirty_to: the pages at or past it (up to the guard) hold
 * nothing either, so the block area's committed pages all lie in
 * [dirty_from, dirty_to) (none if dirty_to <= dirty_from): a block that
 * realloc placed at the bottom of its area and grew to a part of it has
 * committed no more than that part.  [probe_from, probe_to): the pages of
 * the first 2 MiB region that held nothing when the block was allocated and
 * were left to fault in (large.c's fill probe; equal: none), written with
 * the block's header, as is probe_wiped.
 * A block in an arena run (arena_pages != 0) has the header in the run's
 * first page, no mapping (map_base NULL) and no cache life: freed, the run
 * goes back to its arena (arena.c), and the header with it. */
typedef struct hak_large {
  uint64_t magic;
  _Atomic(uint32_t) live;     /* 1 while allocated; the freeing CAS makes it 0 */
  void *map_base;
  size_t map_size;
  void *user;
  size_t usable;
  size_t dirty_from, dirty_to;
  uint32_t owner_id;          /* id of the allocating heap (0: none): remote-free count */
  size_t live_counted;        /* what its allocation added to large.c's live total */
  uint64_t freed_ms;          /* when it went to the cache */
  uint32_t probe_from, probe_to;
  uint32_t arena_pages;       /* a block in an arena run of this many pages (arena.c); 0: its own mapping */
  uint32_t huge_from;         /* a mapping's: its area below has 4 KiB pages, above huge-page advice (large.c) */
  uint32_t probe_wiped;       /* 1: the probe's pages held an earlier block's data, purged at the allocation */
  hak_retired_t retired;
} hak_large_t;

#define HAK_LARGE_MAGIC 0x48414b4c52474500ul  /* "HAKLRGE" */

/* ------------------------------------------------------------------- stats */

/* Process totals: `folded` holds the counts of exited threads' heaps (added
 * at exit) and of threads without a live heap, field for field like a
 * heap's; the others are the mapping counters.  Any thread adds with a
 * relaxed fetch_add: they are statistics, ordered by nothing. */
typedef struct hak_global_stats {
  _Alignas(HAK_CACHE_LINE) hak_heap_stats_t folded;  /* whole lines: no read-mostly neighbour */
  _Atomic(uint64_t) ss_mapped, ss_unmapped, mapped_bytes;
  _Atomic(uint64_t) ss_purged, purged_bytes;   /* purge passes over a SuperSlab's free units */
  _Atomic(uint64_t) refaulted_bytes;           /* of those, taken by a slab before the next sweep */
  _Atomic(uint64_t) heaps_abandoned, ss_adopted;
  _Atomic(uint64_t) idle_reclaims;             /* heap.c, "idle heaps" */
  _Atomic(uint64_t) idle_takes;                /* heap.c, "idle heaps": of those, the fast paths' too */
} hak_global_stats_t;

/* ----------------------------------------------------------------- profiler */

#define HAK_PROF_SITES 4096          /* allocation sites (call stacks) kept */
#define HAK_PROF_BLOCKS (1u << 17)   /* sampled blocks live at once, at most */
#define HAK_PROF_FILTER 4096         /* buckets of the free path's filter */
#define HAK_PROF_DEPTH 32            /* frames kept per stack */
#define HAK_PROF_FX 65536            /* block estimates are kept in 1/65536ths */
#define HAK_PROF_SLOTS (1u << 16)    /* page slots for sampled blocks (256 MiB reserved) */

/* One allocation site of the heap profiler (prof.c): a call stack and the
 * estimates of what was allocated there.  key: 0 free, 1 being written by
 * the thread that claimed it (CAS from 0), else the stack's hash (>= 2);
 * depth and pc are written by that thread before it stores the hash
 * (release) and never after, so a reader that loads a hash (acquire) reads
 * them.  The counters are sums of the sampled blocks' weights (bytes, and
 * blocks in 1/HAK_PROF_FX), each updated with relaxed fetch_add: alloc_*
 * and live_* added by the allocating thread, live_* subtracted by the
 * freeing thread (never below zero: a block's subtraction happens after its
 * addition), remote_* added by a freeing thread that is not the allocating
 * one.  A site is never freed. */
typedef struct hak_prof_site {
  _Atomic(uint64_t) key;
  uint32_t depth;                    /* 1..HAK_PROF_DEPTH */
  uintptr_t pc[HAK_PROF_DEPTH];      /* return addresses, innermost first */
  _Atomic(uint64_t) alloc_bytes, alloc_fx, live_bytes, live_fx, remote_bytes, remote_fx;
} hak_prof_site_t;

/* A sampled block, live (prof.c).  key: 0 never used, 1 being written, 2
 * removed (reusable), else the block's address.  The allocating thread
 * claims a slot (CAS from 0 or 2 to 1), writes the other fields (relaxed)
 * and stores the address (release); the freeing thread loads the address
 * (acquire), reads the fields, then removes it (CAS to 2, release: a later
 * claim of the slot, acquire, writes after those reads). */
typedef struct hak_prof_block {
  _Atomic(uintptr_t) key;
  _Atomic(uint32_t) site;            /* index into hak_prof_tables_t.sites */
  _Atomic(uint32_t) tid;             /* the allocating thread's profiler id */
  _Atomic(uint64_t) bytes;           /* weight: bytes this sample stands for */
  _Atomic(uint64_t) fx;              /* weight: blocks, in 1/HAK_PROF_FX */
} hak_prof_block_t;

/* The profiler's tables: one mapping (os.c), made at start-up, never
 * unmapped.  filter[i] counts the live sampled blocks whose page hashes to
 * i (incremented before a block's address is published, decremented after
 * it is removed: relaxed, each free of such a block happens after its
 * allocation), so most frees skip the lookup. */
typedef struct hak_prof_tables {
  _Atomic(uint32_t) filter[HAK_PROF_FILTER];
  /* Sampled blocks' slots (prof.c): slot i is the page at slot_base + i
   * pages.  slot_head: the stack of freed slots, (pops << 32) | (i + 1),
   * 0 empty; the count in the high half changes at every push and pop, so
   * a CAS from a stale head fails (no ABA).  slot_next[i]: the slot below i
   * on the stack + 1, written by the pusher before its CAS (release), read
   * by a popper after its load of the head (acquire).  slot_carved: slots
   * ever taken from the never-used part (fetch_add; may pass
   * HAK_PROF_SLOTS, then that part is empty).  slot_live[i]: 1 from the
   * slot's allocation to its free (exchange: a second free of it aborts). */
  _Atomic(uint64_t) slot_head;
  _Atomic(uint32_t) slot_carved;
  _Atomic(uint32_t) slot_next[HAK_PROF_SLOTS];
  _Atomic(uint8_t) slot_live[HAK_PROF_SLOTS];
  hak_prof_block_t blocks[HAK_PROF_BLOCKS];
  hak_prof_site_t sites[HAK_PROF_SITES];
} hak_prof_tables_t;

/* The profiler's own counts (prof.c, relaxed fetch_add by any thread). */
typedef struct hak_prof_counts {
  _Atomic(uint64_t) samples;         /* blocks sampled */
  _Atomic(uint64_t) lost_sites;      /* samples whose stack found no free site: not counted */
  _Atomic(uint64_t) lost_blocks;     /* sampled blocks not recorded live: table full */
  _Atomic(uint64_t) lost_fork;       /* samples dropped while a fork was under way */
  _Atomic(uint64_t) recursions;      /* mallocs made by the profiler itself (unwinder): expected 0 */
} hak_prof_counts_t;

#endif /* HAKMEM_TYPES_H */
