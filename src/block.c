/* The free-block encoding's secret keys and the report of a broken free
 * block (block.h). */
#include <sys/random.h>
#include <time.h>

#include "block.h"
#include "os.h"

hak_keys_t hak_keys;

static uintptr_t make_key(void)
{
  uintptr_t k = 0;
  if (getrandom(&k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    k = (uintptr_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uintptr_t)&k;
  }
  return k;
}

void hak_block_init(void)
{
  /* types.h, hak_block_t: check odd, link 16-aligned. */
  hak_keys.link = make_key() & ~(uintptr_t)(HAK_MIN_ALIGN - 1);
  hak_keys.check = make_key() | 1;
}

/* A block on a free list whose two words no longer match: something wrote
 * into it after it was freed (a buffer overflow from the block before it, a
 * write after free).  Following its link would hand out a wild pointer. */
_Noreturn HAK_COLD void hak_block_corrupt(const void *b)
{
  hak_fatal("malloc(): heap corruption: a free block was overwritten (buffer overflow or write after free)", b);
}

HAK_COLD void *hak_block_corrupt_pop(const void *b) { hak_block_corrupt(b); }
