/* Compiler macros and the allocator's geometry: the bottom of src/ (see
 * src/README.md for the layers).  No types, no functions but arithmetic. */
#ifndef HAKMEM_BASE_H
#define HAKMEM_BASE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#define HAK_LIKELY(x)   __builtin_expect(!!(x), 1)
#define HAK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HAK_NOINLINE    __attribute__((noinline))
#define HAK_INLINE      inline __attribute__((always_inline))  /* the exported entry points' fast paths */
#define HAK_COLD        __attribute__((cold, noinline))
#define HAK_HIDDEN      __attribute__((visibility("hidden")))
#define HAK_CACHE_LINE  64
/* An empty asm that "may change" x: the compiler keeps x in one register
 * instead of recomputing it (GCC 12 recomputed a slab's address three times
 * on the local free path, 8 instructions). */
#define HAK_ONE_VALUE(x) __asm__("" : "+r"(x))

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
/* ... and aligned to its block size's largest power-of-two divisor up to
 * this (superslab.c, slab_start): a class whose size is a multiple of an
 * alignment up to it serves aligned requests (hak_size_class_aligned) */
#define HAK_SLAB_ALIGN_MAX HAK_UNIT_SIZE
#define HAK_COLOR_ALIGN 64           /* every slab start is 64-aligned */
#define HAK_MAX_ALLOC   ((size_t)PTRDIFF_MAX - 2 * HAK_SS_SIZE)

static inline uintptr_t hak_align_up(uintptr_t x, uintptr_t a) { return (x + a - 1) & ~(a - 1); }
/* The set bits of x.  Not __builtin_popcountll: built for the baseline
 * x86-64 (no POPCNT instruction), it is a call to libgcc's table loop, 6.6%
 * of a 1 MiB malloc and free that counts an arena's idle pages.  The empty
 * asm keeps the compiler from seeing the idiom and making it that call. */
static inline unsigned hak_popcount64(uint64_t x)
{
  x -= (x >> 1) & 0x5555555555555555u;
  __asm__("" : "+r"(x));
  x = (x & 0x3333333333333333u) + ((x >> 2) & 0x3333333333333333u);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fu;
  return (unsigned)((x * 0x0101010101010101u) >> 56);
}

#endif /* HAKMEM_BASE_H */
