/* Page arenas for large blocks: runs of pages split and merged by the page
 * (arena.c). */
#ifndef HAKMEM_ARENA_H
#define HAKMEM_ARENA_H

#include "types.h"

#define HAK_ARENA_MAGIC 0x48414b4152454e41ul  /* "HAKARENA" */
#define HAK_ARENA_BLOCK_MAX ((size_t)8 << 20)  /* the largest block an arena serves */

#define HAK_ARENA_ALIGN_MAX HAK_SS_SIZE          /* the largest alignment an arena block gets */

/* A run of `pages` pages for a large block, or NULL (out of memory); if
 * align (a power of two, at most HAK_ARENA_ALIGN_MAX) is more than a page,
 * the run's address plus `lead` (a page multiple) is a multiple of it.
 * Pages of the run that may hold old data are zeroed in [zero_from,
 * zero_to) (byte offsets into the run; zero_to 0: none).  huge: the 2 MiB
 * regions it has pages in get transparent huge pages.  *clean: its pages
 * held nothing, and no region they are in had huge pages (a touch there
 * commits 4 KiB: what is resident later is what the holder wrote). */
void *hak_arena_take(size_t pages, size_t align, size_t lead, size_t zero_from, size_t zero_to, bool huge,
                     bool *clean);
/* Give back a run that hak_arena_take handed out, or its tail; purge: its
 * pages go back to the OS now (splitting the huge pages it shares with
 * other runs; else they stay for the next runs until a decay pass finds
 * them idle).  freed_ms: when the block they held was freed (0: now; a
 * run kept out of the arenas meanwhile ages from its block's free). */
void hak_arena_give(void *run, size_t pages, bool purge, uint64_t freed_ms);
/* Extend the run at `run` of `pages` pages by `more` pages in place, if the
 * pages after it are free; those that may hold old data are not zeroed.
 * huge: as hak_arena_take's. */
bool hak_arena_extend(void *run, size_t pages, size_t more, bool huge);
/* The header of the block at p if p lies in the arena at `base` and names
 * a run start before it (the word at p - 16), else NULL; unchecked beyond
 * that (the caller checks the header's magic and block address). */
void *hak_arena_header_of(const void *base, const void *p);
/* Give back the free pages idle for keep_ms, by whole huge pages (all if
 * force: arena.c, arena_claim); when the next pass is due, 0 if no free
 * page keeps memory. */
uint64_t hak_arena_decay(uint64_t now, bool force, uint64_t keep_ms);
uint64_t hak_arena_taken_ms(void);  /* when a run was last taken (0: never) */
uint64_t hak_arena_next_due(void);
size_t hak_arena_idle_bytes(void);  /* free pages that may keep memory */
void hak_arena_before_fork(void);
void hak_arena_after_fork(bool child);

#endif /* HAKMEM_ARENA_H */
