/* The bootstrap area: blocks handed out while hakmem initialises (a
 * recursion into malloc on the initialising thread), from a small static
 * area that free recognises and ignores. */
#include <errno.h>

#include "boot.h"

#define BOOT_SIZE ((size_t)64 * 1024)
static _Alignas(HAK_CACHE_LINE) uint8_t boot_area[BOOT_SIZE];
static _Atomic(size_t) boot_used;

/* Bump allocation; each block is preceded by its size.  Never reused, so a
 * bootstrap block is zero when handed out. */
void *hak_boot_alloc(size_t n)
{
  size_t need = hak_align_up(n + HAK_MIN_ALIGN, HAK_MIN_ALIGN);
  if (n > BOOT_SIZE) { errno = ENOMEM; return NULL; }
  size_t off = atomic_fetch_add_explicit(&boot_used, need, memory_order_relaxed);
  if (off + need > BOOT_SIZE) { errno = ENOMEM; return NULL; }
  *(size_t *)(boot_area + off) = n;
  return boot_area + off + HAK_MIN_ALIGN;
}

bool hak_boot_owns(const void *p)
{
  return (const uint8_t *)p >= boot_area && (const uint8_t *)p < boot_area + BOOT_SIZE;
}

size_t hak_boot_size(const void *p) { return *(const size_t *)((const uint8_t *)p - HAK_MIN_ALIGN); }
