/* Large blocks: one mapping each (large.c). */
#ifndef HAKMEM_LARGE_H
#define HAKMEM_LARGE_H

#include "types.h"

/* grow: realloc's new block, placed with room to grow (large.c's layout). */
void *hak_large_alloc(hak_heap_t *h, size_t size, size_t align, bool zero, bool grow);
/* Whether a block of size bytes with the default alignment would come from
 * the page arenas now (large.c, "arena blocks"). */
bool  hak_large_arena_serves(size_t size);
void  hak_large_retire(hak_large_t *l);   /* outside any read-side section */
void  hak_large_trim(void);
void  hak_large_decay(void);              /* purge cache entries idle past the purge delay */
uint64_t hak_large_next_due(void);        /* when an entry next falls due (0: none keeps pages) */
/* Mappings purged at their free for the cache's bound while no purger
 * thread ran (starts it: purge.c). */
uint32_t hak_large_bound_purges(void);
hak_large_t *hak_large_free(hak_heap_t *h, hak_large_t *l, void *p);  /* non-NULL: hak_large_retire it */
hak_large_t *hak_large_of(uintptr_t tag, const void *p);  /* NULL: not a large block */
/* Resize a live large block to size bytes, in place or by moving its pages
 * (no copy); its new address, or NULL (the block is untouched).  Outside any
 * read-side section. */
void *hak_large_resize(hak_heap_t *h, hak_large_t *l, size_t size);
/* Committed bytes in the large cache and the arenas' idle pages; not the
 * kept runs, which large.c counts as live (hak_heap_kept_bytes). */
size_t hak_large_cached_bytes(void);
/* h's kept run (large.c, "kept runs"), if any, goes back to the arenas;
 * whether there was one. */
bool  hak_large_kept_release(hak_heap_t *h);
/* Bytes of live large blocks (each counted at its usable size when it was
 * allocated) and, in *count, their number, kept runs included (the
 * statistics subtract hak_heap_kept_bytes); kept with the statistics off. */
size_t hak_large_live(size_t *count);

#endif /* HAKMEM_LARGE_H */
