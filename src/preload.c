/* The LD_PRELOAD layer: the exported malloc family and glibc's internal
 * entry points.  It includes alloc.c (which includes free.c), so the
 * exported malloc and free are the fast paths themselves, not calls. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdlib.h>

#include "alloc.c"
#include "stats_report.h"

#define HAK_EXPORT __attribute__((visibility("default")))

__attribute__((constructor)) static void hak_preload_init(void) { hak_init(); }

/* ------------------------------------------------------------- exports */

HAK_EXPORT void *malloc(size_t n) { return hak_malloc_inline(n); }  /* not a jump to hak_malloc */
HAK_EXPORT void free(void *p) { hak_free_inline(p); }
HAK_EXPORT void *calloc(size_t n, size_t size) { return hak_calloc(n, size); }
HAK_EXPORT void *realloc(void *p, size_t n) { return hak_realloc(p, n); }
HAK_EXPORT void *reallocarray(void *p, size_t n, size_t size) { return hak_reallocarray(p, n, size); }
HAK_EXPORT int posix_memalign(void **out, size_t a, size_t n) { return hak_posix_memalign(out, a, n); }
HAK_EXPORT void *aligned_alloc(size_t a, size_t n) { return hak_aligned_alloc(a, n); }
HAK_EXPORT void *memalign(size_t a, size_t n) { return hak_memalign(a, n); }
HAK_EXPORT void *valloc(size_t n) { return hak_valloc(n); }
HAK_EXPORT void *pvalloc(size_t n) { return hak_pvalloc(n); }
HAK_EXPORT size_t malloc_usable_size(void *p) { return hak_malloc_usable_size(p); }
HAK_EXPORT void free_sized(void *p, size_t n) { hak_free_sized(p, n); }
HAK_EXPORT void free_aligned_sized(void *p, size_t a, size_t n) { hak_free_aligned_sized(p, a, n); }
HAK_EXPORT void cfree(void *p) { hak_free(p); }

/* glibc's internal names: programs (and some libraries) call them directly;
 * a block from one must be freeable by the other. */
HAK_EXPORT void *__libc_malloc(size_t n) { return hak_malloc(n); }
HAK_EXPORT void __libc_free(void *p) { hak_free(p); }
HAK_EXPORT void *__libc_calloc(size_t n, size_t size) { return hak_calloc(n, size); }
HAK_EXPORT void *__libc_realloc(void *p, size_t n) { return hak_realloc(p, n); }
HAK_EXPORT void *__libc_memalign(size_t a, size_t n) { return hak_memalign(a, n); }
HAK_EXPORT void *__libc_valloc(size_t n) { return hak_valloc(n); }
HAK_EXPORT void *__libc_pvalloc(size_t n) { return hak_pvalloc(n); }
HAK_EXPORT int __posix_memalign(void **out, size_t a, size_t n) { return hak_posix_memalign(out, a, n); }

/* malloc_trim: give cached memory back now.  Returns 1 if memory went back
 * to the system (pages purged or unmapped, cached large pages released),
 * else 0, as glibc's does: read from the mapping counters around the
 * collect, so another thread's purge meanwhile counts too, and its fresh
 * mappings may hide an unmap (then the purge counter usually tells). */
HAK_EXPORT int malloc_trim(size_t pad)
{
  (void)pad;
  hak_init();
  uint64_t purged = atomic_load_explicit(&hak_gstats.purged_bytes, memory_order_relaxed);
  uint64_t mapped = atomic_load_explicit(&hak_gstats.mapped_bytes, memory_order_relaxed);
  size_t cached = hak_stats_large_cached();
  hak_collect();
  return atomic_load_explicit(&hak_gstats.purged_bytes, memory_order_relaxed) > purged ||
         atomic_load_explicit(&hak_gstats.mapped_bytes, memory_order_relaxed) < mapped ||
         hak_stats_large_cached() < cached;
}

/* glibc's heap inspection: hakmem's numbers in glibc's formats (meaning of
 * each field: stats.c, hak_stats_mallinfo2; docs/statistics.md). */
HAK_EXPORT struct mallinfo2 mallinfo2(void)
{
  struct mallinfo2 m;
  hak_stats_mallinfo2(&m);
  return m;
}

static int sat_int(size_t v) { return v > (size_t)INT_MAX ? INT_MAX : (int)v; }

/* The int version: each field saturates at INT_MAX (glibc's wraps). */
HAK_EXPORT struct mallinfo mallinfo(void)
{
  struct mallinfo2 m2;
  hak_stats_mallinfo2(&m2);
  struct mallinfo m = {
    .arena = sat_int(m2.arena), .ordblks = sat_int(m2.ordblks), .smblks = sat_int(m2.smblks),
    .hblks = sat_int(m2.hblks), .hblkhd = sat_int(m2.hblkhd), .usmblks = sat_int(m2.usmblks),
    .fsmblks = sat_int(m2.fsmblks), .uordblks = sat_int(m2.uordblks), .fordblks = sat_int(m2.fordblks),
    .keepcost = sat_int(m2.keepcost),
  };
  return m;
}

HAK_EXPORT int malloc_info(int options, FILE *f) { return hak_stats_malloc_info(options, f); }
HAK_EXPORT void malloc_stats(void) { hak_stats_malloc_stats(); }
