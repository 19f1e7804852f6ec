/* Canaries: the one keyed scheme behind every check of the words and bytes
 * hakmem keeps around a block: secure mode's trailers (secure.c), the
 * medium classes' trailers (trailer.c), and a large block's canary word and
 * tail bytes (large.c).  Both kinds derive from the secret key
 * hak_keys.check (block.c), set once at initialisation:
 *   - a canary word is bound to an address: a word copied from another
 *     block, or a value a program wrote, does not match at this one; its
 *     bytes have their high bit set too, so a text or zero byte written
 *     over any one of them never matches (a one-byte underflow of a large
 *     block, `p[-1] = 'A'`, is caught every time, not 255 times in 256);
 *   - canary bytes fill the slack after a block: each has its high bit
 *     set, so text (the commonest overflow) never matches them. */
#ifndef HAKMEM_CANARY_H
#define HAKMEM_CANARY_H

#include <string.h>

#include "block.h"

/* The canary word of address p: 56 keyed bits, each byte's high bit set. */
static inline uint64_t hak_canary_word(const void *p)
{
  return (hak_keys.check ^ ((uintptr_t)p * 0x9e3779b97f4a7c15ull)) | 0x8080808080808080ull;
}

/* Eight canary bytes as one word: byte i of a run of canary bytes is byte
 * i % 8 of it (little-endian). */
static inline uint64_t hak_canary_bytes8(void) { return hak_keys.check | 0x8080808080808080ull; }

/* Write n canary bytes at dst (any alignment). */
static inline void hak_canary_fill(void *dst, size_t n)
{
  uint64_t w = hak_canary_bytes8();
  uint8_t *d = dst;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) memcpy(d + i, &w, 8);
  for (; i < n; i++) d[i] = (uint8_t)(w >> (8 * (i & 7)));
}

/* Are the n bytes at src the canary bytes hak_canary_fill wrote? */
static inline bool hak_canary_intact(const void *src, size_t n)
{
  uint64_t w = hak_canary_bytes8(), diff = 0;
  const uint8_t *s = src;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, s + i, 8);
    diff |= v ^ w;
  }
  for (; i < n; i++) diff |= (uint8_t)(s[i] ^ (uint8_t)(w >> (8 * (i & 7))));
  return diff == 0;
}

#endif /* HAKMEM_CANARY_H */
