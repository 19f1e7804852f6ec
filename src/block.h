/* The free-block encoding (types.h, hak_block_t) and its checks (block.c). */
#ifndef HAKMEM_BLOCK_H
#define HAKMEM_BLOCK_H

#include "base.h"
#include "types.h"

extern HAK_HIDDEN hak_keys_t hak_keys;
void hak_block_init(void);  /* the keys, once, at initialisation (init.c) */

/* A free block whose two words no longer match: abort with the message. */
_Noreturn void hak_block_corrupt(const void *b);
/* The same for malloc's pops, returning (never) a value, declared
 * non-NULL: there the call is a tail jump and the caller's test for NULL
 * folds away, so malloc's fast path needs no stack frame. */
__attribute__((returns_nonnull)) void *hak_block_corrupt_pop(const void *b);

/* b's signature when its link word is `link` (types.h): bound to b's
 * address, so the two words copied anywhere else are no free block. */
static inline uintptr_t hak_block_sign(const hak_block_t *b, uintptr_t link)
{
  return link ^ hak_keys.check ^ (uintptr_t)b;
}
static inline bool hak_block_is_free(const hak_block_t *b)
{
  return b->check == hak_block_sign(b, b->link);
}
/* Decode b's link into *next; false if b's two words do not match. */
static inline bool hak_block_decode(const hak_block_t *b, hak_block_t **next)
{
  uintptr_t link = b->link;
  *next = (hak_block_t *)(link ^ hak_keys.link);
  return b->check == hak_block_sign(b, link);
}
/* The next block on b's list; aborts if b is not an intact free block. */
static inline hak_block_t *hak_block_next(const hak_block_t *b)
{
  hak_block_t *next;
  if (HAK_UNLIKELY(!hak_block_decode(b, &next))) hak_block_corrupt(b);
  return next;
}
/* Make b a free block whose list continues with next. */
static inline void hak_block_set_next(hak_block_t *b, hak_block_t *next)
{
  uintptr_t link = (uintptr_t)next ^ hak_keys.link;
  b->link = link;
  b->check = hak_block_sign(b, link);
}
/* b is handed out: it no longer looks free. */
static inline void hak_block_claim(hak_block_t *b) { b->check = 0; }

#endif /* HAKMEM_BLOCK_H */
