/* Size classes (size_class.c). */
#ifndef HAKMEM_SIZE_CLASS_H
#define HAKMEM_SIZE_CLASS_H

#include "base.h"

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

/* The table index of a size n <= HAK_SMALL_MAX, without a branch: sizes
 * above and below 1 KiB mix in a program, and a branch between them
 * mispredicts (bench/mixed.c spends much of its time there).  With i = n / 16
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
 * HAK_SMALL_REQ_MAX.  The units of trailed classes' slabs have tcls
 * HAK_TCLS_TRAILED (hak_unit_geom_t), a thread-cache list that is always
 * full, so the free fast path hands their blocks to hak_tcache_overflow,
 * which checks the trailer. */
#define HAK_TRAILED_FIRST  44
#define HAK_UNTRAILED_MAX  ((size_t)65536)
#define HAK_TRAIL_ROOM     24
#define HAK_SMALL_REQ_MAX  (HAK_SMALL_MAX - HAK_TRAIL_ROOM)
#define HAK_TCLS_TRAILED   HAK_NUM_CLASSES
static inline bool hak_class_trailed(size_t c) { return c - HAK_TRAILED_FIRST < HAK_NUM_SIZES - HAK_TRAILED_FIRST; }
void hak_size_class_check(void);  /* debug builds */
/* Smallest class >= n whose block size is a multiple of align (align <= 4096),
 * or -1 if none. */
int hak_size_class_aligned(size_t n, size_t align);

/* malloc's fast path, sizes n below hak_fast_limit (at most 64 KiB): the
 * class by one load at (n + 15) >> 4, the request's 16-byte units, which
 * the profiler's countdown (prof.h) uses too.  Four instructions fewer a
 * malloc than hak_size_class, and a shorter chain to the block (the table
 * index is the units); 4 KiB of table, of which the sizes up to 1 KiB use
 * the first 65 bytes.  Filled by hak_size_class_init, before
 * hak_options_init opens the fast path (hak_fast_limit). */
#define HAK_FAST_INDEXES (HAK_UNTRAILED_MAX / 16 + 1)
/* Whole cache lines, so that its last one holds no variable that is
 * written (see hak_keys_t). */
#define HAK_FAST_TABLE ((HAK_FAST_INDEXES + HAK_CACHE_LINE - 1) / HAK_CACHE_LINE * HAK_CACHE_LINE)
extern HAK_HIDDEN uint8_t hak_fast_class[HAK_FAST_TABLE];
static inline size_t hak_fast_size_class(size_t n) { return hak_fast_class[(n + 15) >> 4]; }
void hak_size_class_init(void);
#define HAK_REMOTE_BATCH 64   /* most remote frees a live heap holds back (remote.c) */
#define HAK_REMOTE_BATCH_BYTES ((size_t)4096)  /* and most bytes of them in one run (size_class.c) */
/* The transfer cache (xfer.c): free blocks of the classes above 1 KiB up to
 * the trailed ones (1280 B .. 64 KiB), freed into other heaps' slabs, for
 * any thread's next malloc of the class. */
#define HAK_XFER_FIRST 20
#define HAK_XFER_LAST  (HAK_TRAILED_FIRST - 1)  /* the trailed classes follow, to the last size */
static inline bool hak_class_xfer(size_t c) { return c - HAK_XFER_FIRST <= HAK_XFER_LAST - HAK_XFER_FIRST; }

#endif /* HAKMEM_SIZE_CLASS_H */
