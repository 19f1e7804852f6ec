/* HAKMEM_SECURE=1: the checks that cost too much to be on by default
 * (docs/hardening.md).  Large blocks get theirs in large.c (cached
 * mappings inaccessible, reused blocks zeroed); small and medium blocks get
 * theirs here:
 *
 *   [0, n)          the program's n bytes (malloc_usable_size says n);
 *   [n, bs - 4)     padding: canary bytes (canary.h);
 *   [bs - 4, bs)    the trailer: (bs - n) ^ the canary word of the block's
 *                   address folded to 32 bits (canary.h), 0 if never
 *                   allocated.
 *
 * The class is chosen for n + 4 (at least 32 bytes: a free block's list
 * words stay clear of the trailer), so every block has its trailer.  free
 * checks the block's padding and trailer (an overflow past the block), and,
 * when the freeing thread owns the slab, the trailer of the block before it
 * (an underflow: the bytes just before a block are the end of the previous
 * one).  A freed block is zeroed except its list words and trailer, and
 * malloc checks that it still is (a write after free), so no block carries
 * an earlier one's data.  Slabs are carved zeroed.
 *
 * Default mode pays nothing for this: in secure mode the fast paths are off
 * (options.h, hak_fast_on), so every call reaches the out-of-line paths
 * that call this file. */
#include <string.h>

#include "secure.h"
#include "os.h"
#include "size_class.h"
#include "canary.h"

#define TRAILER ((uint32_t)sizeof(uint32_t))

/* The trailer's key: p's canary word folded to 32 bits. */
static inline uint32_t secure_key(const void *p)
{
  uint64_t k = hak_canary_word(p);
  return (uint32_t)(k ^ (k >> 32));
}
static inline uint32_t *secure_trailer(uint8_t *p, uint32_t bs) { return (uint32_t *)(p + bs - TRAILER); }

/* p's requested size, or SIZE_MAX if its trailer is not one malloc wrote. */
static size_t secure_size(uint8_t *p, uint32_t bs)
{
  uint32_t raw;
  memcpy(&raw, secure_trailer(p, bs), sizeof raw);
  uint32_t slack = raw ^ secure_key(p);
  if (raw == 0 || slack < TRAILER || slack > bs) return SIZE_MAX;
  return bs - slack;
}

int hak_secure_class(size_t n, size_t align)
{
  /* Room for the trailer, and past a free block's list words. */
  size_t need = n > sizeof(hak_block_t) ? n + TRAILER : sizeof(hak_block_t) + TRAILER;
  if (n > HAK_SMALL_MAX - TRAILER) return -1;
  return align <= HAK_MIN_ALIGN ? (int)hak_size_class(need) : hak_size_class_aligned(need, align);
}

void *hak_secure_prepare(void *block, size_t n, size_t c)
{
  uint8_t *p = block;
  uint32_t bs = hak_class_size[c];
  /* A free block is zero past its list words up to its trailer. */
  uint64_t any = 0;
  uint32_t i = sizeof(hak_block_t), end = bs - TRAILER;
  for (; i + 8 <= end; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    any |= w;
  }
  for (; i < end; i++) any |= p[i];
  if (HAK_UNLIKELY(any != 0)) hak_fatal("malloc(): heap corruption: a free block was written after free", p);
  memset(p, 0, sizeof(hak_block_t));
  hak_canary_fill(p + n, bs - TRAILER - n);
  uint32_t t = (uint32_t)(bs - n) ^ secure_key(p);
  memcpy(secure_trailer(p, bs), &t, sizeof t);
  return p;
}

/* The block was a valid, allocated block start of s: check its end (and,
 * for the owner, the end of the block before it), then zero it. */
void hak_secure_free(hak_slab_t *s, void *ptr, bool owner)
{
  uint8_t *p = ptr;
  uint32_t bs = s->block_size;
  size_t n = secure_size(p, bs);
  if (n == SIZE_MAX) hak_fatal("free(): heap corruption: the end of a block was overwritten (buffer overflow)", p);
  if (!hak_canary_intact(p + n, bs - TRAILER - n))
    hak_fatal("free(): heap corruption: the bytes after a block were overwritten (buffer overflow)", p);
  /* Only the owner allocates in this slab, so the trailer of the block
   * before cannot change under it; a remote freer of that block leaves
   * its trailer alone. */
  if (owner && p != s->start) {
    uint8_t *q = p - bs;
    uint32_t raw;
    memcpy(&raw, secure_trailer(q, bs), sizeof raw);
    if (raw != 0 && secure_size(q, bs) == SIZE_MAX)
      hak_fatal("free(): heap corruption: the bytes before a block were overwritten (buffer underflow)", p);
  }
  memset(p + sizeof(hak_block_t), 0, bs - TRAILER - sizeof(hak_block_t));
}

size_t hak_secure_usable(hak_slab_t *s, const void *p)
{
  size_t n = secure_size((uint8_t *)p, s->block_size);
  if (n == SIZE_MAX) hak_fatal("malloc_usable_size(): heap corruption: the end of a block was overwritten", p);
  return n;
}
