/* Trailers of medium blocks: an overflow past a block of a class above
 * 64 KiB (80 KiB to 256 KiB), or an underflow into the end of the block
 * before it, is caught by free (and realloc), in the default mode.
 *
 * Every block of such a class (hak_class_trailed) has a trailer: a request
 * of n bytes whose class would be trailed takes the class of n +
 * HAK_TRAIL_ROOM instead (alloc.c, hak_trailed_class), so there is always
 * room.  Layout of the block (block size bs):
 *   [0, n)           the caller's (malloc_usable_size is n);
 *   [n, n + CANARY)  canary bytes (canary.h);
 *   ...              unused;
 *   [bs - 8, bs)     the trailer word, n ^ the canary word of the block's
 *                    address (canary.h).
 * An overflow of the block hits the canary bytes; an underflow of the block
 * after it hits the word (it then decodes to no size that fits).  Who
 * writes: whoever hands the block out (malloc, calloc, the aligned
 * allocators, realloc in place), before the caller has it; who reads: free,
 * realloc and malloc_usable_size, called by the block's holder.  So the
 * trailer is the holder's, like the block's bytes, and needs no atomics.
 *
 * Cost: nothing on the paths of the smaller classes (bench/insn.sh: the
 * same instructions a pair).  Sizes above HAK_UNTRAILED_MAX leave malloc's
 * inline path for hak_malloc_generic; a free of a trailed block goes
 * through the thread cache's overflow path (hak_tcache_overflow: the
 * units' tcls is HAK_TCLS_TRAILED, whose cache has no room) or
 * free_remote's class test.  Per block: two cache lines written by malloc
 * and read by free, the canary's and the word's, which is why the classes
 * of 16 to 64 KiB have none: a program that touches only the ends of such
 * blocks (bench/churn.c) or grows strings through them by realloc
 * (bench/strbuild.c) pays for those lines in time.  Above 64 KiB a
 * program's own use of the block dwarfs two lines.
 * Off in secure mode, which keeps a trailer on every block (secure.c). */
#include <string.h>

#include "trailer.h"
#include "os.h"
#include "size_class.h"
#include "canary.h"

#define CANARY 16  /* HAK_TRAIL_ROOM - 8: the canary bytes, then the word */

static inline uint64_t *trailer_word(const void *p, size_t bs) { return (uint64_t *)((uintptr_t)p + bs - 8); }

int hak_trailed_class(size_t n, size_t align)
{
  size_t need = n + HAK_TRAIL_ROOM;
  if (need > HAK_SMALL_MAX) return -1;
  return align <= HAK_MIN_ALIGN ? (int)hak_size_class(need) : hak_size_class_aligned(need, align);
}

void *hak_trailer_set(void *p, size_t n, size_t cls)
{
  if (p == NULL) return NULL;
  hak_canary_fill((char *)p + n, CANARY);
  *trailer_word(p, hak_class_size[cls]) = n ^ hak_canary_word(p);
  return p;
}

size_t hak_trailer_size(const void *p, size_t cls)
{
  size_t bs = hak_class_size[cls];
  uint64_t n = *trailer_word(p, bs) ^ hak_canary_word(p);
  if (HAK_UNLIKELY(n > bs - HAK_TRAIL_ROOM))
    hak_fatal("heap corruption: the end of a block was overwritten (buffer overflow, or underflow of the block "
              "after it)", p);
  return (size_t)n;
}

size_t hak_trailer_check(const void *p, size_t cls)
{
  size_t n = hak_trailer_size(p, cls);
  if (HAK_UNLIKELY(!hak_canary_intact((const char *)p + n, CANARY)))
    hak_fatal("heap corruption: the bytes after a block were overwritten (buffer overflow)", p);
  return n;
}
