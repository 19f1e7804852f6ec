/* unit_block_start: the owner's free checks that a pointer is a carved
 * block start from its unit's entry in the SuperSlab header (src/types.h,
 * hak_unit_geom_t), which mirrors the slab's geometry and carved capacity
 * in every unit the slab spans.  24 KiB blocks: a slab of two units holds
 * five, carved one at a time (a block is above a page), the fourth and
 * fifth in the second unit.
 *  - Carved blocks of both units free and come back (an entry whose
 *    capacity lagged the slab's would abort these frees).
 *  - The fourth block's start, not carved yet (the slab has handed out one
 *    block), is "not a block start" (an entry whose capacity ran ahead of
 *    the slab's would take it into the thread cache, and the next malloc of
 *    the size would hand out memory the slab may carve again).  In a child
 *    process; skipped under ThreadSanitizer (fork).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hakmem.h"
#include "support/check.h"
#include "support/child.h"

#define SIZE (24 * 1024)
#define SLAB_BLOCKS 5
#define UNIT_SHIFT 16  /* 64 KiB units */

static unsigned unit_of(const void *p) { return (unsigned)(((uintptr_t)p >> UNIT_SHIFT) & 31); }

/* The first block a fresh process gets of SIZE, and the start of the fourth
 * block of its slab, in the slab's second unit; exits 2 if the layout is not
 * that (a change of the size classes: the test must follow). */
static char *first_and_fourth(char **fourth)
{
  char *p = hak_malloc(SIZE);
  if (p == NULL) _exit(2);
  size_t bs = hak_malloc_usable_size(p);
  *fourth = p + 3 * bs;
  if (bs != SIZE || unit_of(*fourth) != unit_of(p) + 1) {
    fprintf(stderr, "unit_block_start: 24 KiB blocks at %p, size %zu: not the layout the test expects\n",
            (void *)p, bs);
    _exit(2);
  }
  return p;
}

static void free_uncarved(void)
{
  char *fourth;
  (void)first_and_fourth(&fourth);
  hak_free(fourth);
  _exit(0);  /* the free took it: the check failed */
}

static void carved_both_units(void)
{
  ts_check_begin("carved blocks in both units of a slab free and come back");
  char *b[SLAB_BLOCKS], *again[SLAB_BLOCKS];
  char *fourth;
  b[0] = first_and_fourth(&fourth);
  for (int i = 1; i < SLAB_BLOCKS; i++) {
    b[i] = hak_malloc(SIZE);
    REQUIRE(b[i] != NULL, "hak_malloc(%d)", SIZE);
  }
  CHECK(b[3] == fourth, "the fourth 24 KiB block is at %p, not %p: the slab was not fresh", (void *)b[3],
        (void *)fourth);
  for (int i = SLAB_BLOCKS; i-- > 0;) hak_free(b[i]);
  for (int i = 0; i < SLAB_BLOCKS; i++) again[i] = hak_malloc(SIZE);
  for (int i = 0; i < SLAB_BLOCKS; i++)
    CHECK(again[i] == b[i], "block %d: %p after the frees, %p before (unit %u)", i, (void *)again[i],
          (void *)b[i], unit_of(b[i]));
  for (int i = 0; i < SLAB_BLOCKS; i++) hak_free(again[i]);
}

int main(void)
{
  setvbuf(stdout, NULL, _IOLBF, 0);
#if defined(__SANITIZE_THREAD__)
  puts("unit_block_start: skipped under ThreadSanitizer (fork)");
  return 77;
#endif
  if (getenv("HAKMEM_SECURE") != NULL) {
    puts("unit_block_start: the fast paths are off in secure mode: skipped");
    return 77;
  }
  /* First, in a fresh child: the slab has carved one block. */
  ts_misuse m = {"an uncarved block start in the slab's second unit", free_uncarved, "not a block start"};
  ts_expect_abort("block start", &m, 10);
  carved_both_units();
  return ts_check_finish("unit_block_start");
}
