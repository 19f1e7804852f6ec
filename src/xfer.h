/* The transfer cache (xfer.c). */
#ifndef HAKMEM_XFER_H
#define HAKMEM_XFER_H

#include "types.h"

/* Keep b, a validated block of class c being freed into another heap's
 * slab; false if the class's slots are full (b untouched but for its
 * free-block words). */
bool  hak_xfer_put(size_t c, hak_block_t *b);
void *hak_xfer_take(size_t c);  /* a block of class c, claimed, or NULL */
/* Give the blocks back to their slabs: of every class (all), or of those
 * no put or take used for a purge delay. */
void  hak_xfer_drain(uint64_t now, bool all);
/* Blocks class c's slots hold now (a snapshot: the statistics). */
uint32_t hak_xfer_count(size_t c);

#endif /* HAKMEM_XFER_H */
