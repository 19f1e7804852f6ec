/* hakmem: a lock-free, general-purpose malloc for multithreaded servers.
 *
 * Programs normally get hakmem with LD_PRELOAD=libhakmem.so, which exports the
 * standard malloc family.  Programs and tests that link hakmem directly (and the
 * ThreadSanitizer build, where the sanitizer owns malloc) use this prefixed API.
 * Every function here has the contract of its unprefixed C/POSIX counterpart.
 */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

void  *hak_malloc(size_t size);
void   hak_free(void *p);
void  *hak_calloc(size_t n, size_t size);
void  *hak_realloc(void *p, size_t size);
void  *hak_reallocarray(void *p, size_t n, size_t size);
int    hak_posix_memalign(void **out, size_t alignment, size_t size);
void  *hak_aligned_alloc(size_t alignment, size_t size);
void  *hak_memalign(size_t alignment, size_t size);
void  *hak_valloc(size_t size);
void  *hak_pvalloc(size_t size);
size_t hak_malloc_usable_size(const void *p);
void   hak_free_sized(void *p, size_t size);
void   hak_free_aligned_sized(void *p, size_t alignment, size_t size);

/* Process-wide counters.  Totals cover every thread, exited ones included;
 * the contributions of threads still running are read without stopping them,
 * so they are exact only when those threads are quiescent, but never count
 * a block twice: a thread that exits meanwhile moves its counts into the
 * totals, and a snapshot that saw the move sums again, so allocs and frees
 * never go down from one snapshot to the next.  The block counts
 * (allocs, frees, remote_frees, live_bytes, large_*, foreign_frees, slabs)
 * are kept only when the environment has HAKMEM_STATS=1 or 2 at start-up
 * (they cost two counter updates per malloc+free); the mapping counters
 * (superslabs_*, mapped_bytes, purged_bytes, refaulted_bytes,
 * large_cached_bytes, heaps_abandoned) always are.  Fields are only ever
 * added at the end. */
typedef struct hak_stats {
  uint64_t allocs;             /* blocks handed out (small and large) */
  uint64_t frees;              /* blocks taken back, by any thread */
  uint64_t remote_frees;       /* of frees: by a thread not owning the block */
  uint64_t live_bytes;         /* usable bytes of blocks not yet freed */
  uint64_t large_allocs;       /* of allocs: blocks with their own mapping */
  uint64_t superslabs_mapped;  /* SuperSlabs mapped since start */
  uint64_t superslabs_unmapped;/* SuperSlabs returned to the OS since start */
  uint64_t mapped_bytes;       /* bytes currently mapped (SuperSlabs + large) */
  uint64_t heaps_abandoned;    /* thread heaps abandoned at thread exit */
  uint64_t superslabs_adopted; /* adoptions of abandoned SuperSlabs, and of
                                  SuperSlabs taken from parked heaps (one may be
                                  adopted, drained and abandoned again many times) */
  uint64_t foreign_frees;      /* pointers handed to the system allocator */
  /* added later (hakmem 2): */
  uint64_t large_frees;        /* of frees: large blocks */
  uint64_t large_live_bytes;   /* usable bytes of large blocks not yet freed */
  uint64_t large_cached_bytes; /* committed bytes of freed large mappings kept for reuse */
  uint64_t superslabs_purged;  /* passes giving a SuperSlab's free pages back */
  uint64_t purged_bytes;       /* bytes given back by those passes */
  uint64_t peak_rss_bytes;     /* the process's peak resident set (VmHWM) */
  uint64_t slabs;              /* slabs in use (all classes, abandoned ones included) */
  /* added after them: */
  uint64_t idle_reclaims;      /* passes of the purger thread that took back
                                  blocks or pages from an idle thread's heap */
  uint64_t refaulted_bytes;    /* of purged_bytes: pages a new slab took again
                                  before the heap's next purge (each such slab
                                  makes that heap wait longer before purging) */
  uint64_t idle_takes;         /* of idle_reclaims: passes that also took the
                                  thread cache and current slabs of a thread
                                  blocked outside hakmem (HAKMEM_IDLE_TAKE) */
} hak_stats_t;

void hak_stats_get(hak_stats_t *out);

/* Per size class (block counts need HAKMEM_STATS=1 or 2, like hak_stats_t's). */
typedef struct hak_class_stats {
  uint64_t block_size;         /* bytes of each block of the class */
  uint64_t allocs;             /* blocks handed out */
  uint64_t frees;              /* blocks taken back, by any thread */
  uint64_t live_blocks;        /* allocs - frees */
  uint64_t slabs;              /* slabs of the class in use now */
} hak_class_stats_t;

/* Fills out[0 .. min(n, classes)-1] (class order: increasing block size) and
 * returns the number of classes. */
size_t hak_stats_get_classes(hak_class_stats_t *out, size_t n);

/* Prints the counters on f: the one-line summary of HAKMEM_STATS=1, then the
 * per-class table, large blocks, SuperSlabs, peak RSS and, with
 * HAKMEM_STATS=2, the remote-free matrix (the report HAKMEM_STATS=2 prints
 * at exit; docs/statistics.md). */
void hak_stats_print(FILE *f);

/* The heap profiler (HAKMEM_PROF=1; docs/profiler.md): write the profile of
 * the sampled blocks to path (NULL: HAKMEM_PROF_FILE, default
 * hakmem.PID.heap) and their remote frees to path.remote, in the format of
 * gperftools' heap profiler (`google-pprof --text PROGRAM path`).  Returns
 * 0, or -1 with errno (ENOTSUP: the profiler is off; the errors of open and
 * write).  Allocates nothing; safe in a signal handler. */
int hak_prof_dump(const char *path);

/* Return what this thread's heap caches and every retired mapping to the OS
 * now, instead of after the configured delay.  Never needed for correctness. */
void hak_collect(void);

#ifdef __cplusplus
}
#endif
#endif /* HAKMEM_H */
