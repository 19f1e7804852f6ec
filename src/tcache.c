/* The thread cache (types.h, hak_heap_t's tcache): flushes back to the
 * slabs, the bounds' growth and relaxation, and the trailed classes' check.
 * The push and pop are inline in tcache.h. */
#include <string.h>

#include "tcache.h"
#include "size_class.h"
#include "block.h"
#include "trailer.h"
#include "superslab.h"
#include "remote.h"
#include "partial.h"
#include "os.h"

/* min(HAK_TCACHE_MAX, HAK_TCACHE_BYTES / block size) per class
 * (hak_class_size's order; hak_tcache_check verifies it). */
const uint8_t hak_tcache_base[HAK_NUM_CLASSES] = {
  64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
  51, 42, 36, 32, 25, 21, 18, 16, 12, 10, 9, 8, 6, 5, 4, 4, 3, 2, 2, 2, 1, 1, 1, 1,
  0, 0, 0, 0, 0, 0, 0, 0,
  64, 64, 64, 64, 64, 64, 64, 64,
};

#ifndef NDEBUG
void hak_tcache_check(void)
{
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) {
    uint32_t k = HAK_TCACHE_BYTES / hak_class_size[c];
    if (hak_tcache_base[c] != (k > HAK_TCACHE_MAX ? HAK_TCACHE_MAX : k)) hak_fatal("thread cache bound table", (void *)c);
  }
}
#endif

/* Give back the blocks from `rest` on (a list of class c's thread cache)
 * to their slabs: a run of blocks of one slab (blocks freed in the order
 * they were allocated lie on the list in such runs) with one splice onto
 * the slab's list, one count and one state check when this heap owns the
 * slab, else block by block to its owner as remote frees.  owned[] proves
 * most slabs ours without reading the SuperSlab's owner (a cache miss). */
static void flush_list(hak_heap_t *h, size_t c, hak_block_t *rest)
{
  hak_slab_t *s = hak_slab_at(rest), *after = NULL;
  while (rest != NULL) {
    hak_block_t *last = rest, *next = hak_block_next(rest);
    uint32_t k = 1;
    while (next != NULL && (after = hak_slab_at(next)) == s) {
      last = next;
      next = hak_block_next(next);
      k++;
    }
    h->tcache_room[c] += (int32_t)k;
    hak_superslab_t *ss = hak_ss_of(rest);
    if (HAK_LIKELY(HAK_OWNED_SLOT(h, rest) == hak_owned_key(rest) ||
                   atomic_load_explicit(&ss->owner, memory_order_relaxed) == h)) {
      hak_slab_push_run(h, s, rest, last, k);
    } else {
      for (hak_block_t *b = rest, *later; k > 0; b = later, k--) {
        later = k > 1 ? hak_block_next(b) : NULL;  /* before the defer relinks b */
        hak_remote_defer(h, s, b);
      }
    }
    rest = next;
    s = after;
  }
}

/* Keep the newest `keep` blocks of class c's thread cache; the others go
 * back to their slabs (a slab may become empty and go, or leave the full
 * state, as on any local free), or, when another heap owns the slab (or
 * nobody: abandoned), to its owner as remote frees.  Ownership cannot
 * change under us in a way that matters: only this thread makes a
 * SuperSlab ours, and one that is ours stays ours until this heap gives
 * it up, after flushing. */
void hak_tcache_flush(hak_heap_t *h, size_t c, uint32_t keep)
{
  hak_block_t *b = h->tcache[c], *rest = b;
  if (b == NULL) return;
  if (keep == 0) {
    h->tcache[c] = NULL;
  } else {
    for (uint32_t i = 1; i < keep && (rest = hak_block_next(b)) != NULL; i++) b = rest;
    rest = hak_block_next(b);
    hak_block_set_next(b, NULL);
  }
  if (rest != NULL) flush_list(h, c, rest);
}

void hak_tcache_flush_all(hak_heap_t *h)
{
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) hak_tcache_flush(h, c, 0);
}

/* Bytes of blocks the thread cache's grown bounds allow over their bases.
 * Asked only when a class may still grow, which happens at most twice a
 * class between two maintenance passes. */
static size_t tcache_grown_bytes(const hak_heap_t *h)
{
  size_t n = 0;
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) n += (size_t)h->tcache_grown[c] * hak_class_size[c];
  return n;
}

/* A free of a block of a trailed class came through the fast path, which
 * put it on the HAK_TCLS_TRAILED list (never any other block there): take it
 * back, check its trailer, and cache it under its class. */
static HAK_NOINLINE void tcache_trailed(hak_heap_t *h)
{
  hak_block_t *b = h->tcache[HAK_TCLS_TRAILED];
  h->tcache[HAK_TCLS_TRAILED] = NULL;
  h->tcache_room[HAK_TCLS_TRAILED] = 0;
  size_t c = hak_slab_at(b)->cls;
  (void)hak_trailer_check(b, c);
  if (hak_tcache_push(h, c, b) < 0) hak_tcache_overflow(h, c);
}

/* A class that overflows its bound frees runs of blocks that it allocates
 * again later (a request's temporaries freed together): flushing half to
 * the slabs each time, only to pop them back, is the work a bigger cache
 * saves (bench/strings frees some 200 blocks a class per request).  So the
 * bound doubles, up to HAK_TCACHE_GROWTH times the base (or HAK_TCACHE_GROW_CLASS
 * bytes of small blocks), while the heap's
 * budget lasts; after that the overflow flushes half as before. */
void hak_tcache_overflow(hak_heap_t *h, size_t c)
{
  if (c == HAK_TCLS_TRAILED) {
    tcache_trailed(h);
    return;
  }
  uint32_t base = hak_tcache_limit(c);
  uint32_t bound = base + (uint32_t)h->tcache_grown[c];
  uint32_t most = HAK_TCACHE_GROWTH * base;
  if (most < HAK_TCACHE_GROW_CLASS / hak_class_size[c]) most = HAK_TCACHE_GROW_CLASS / hak_class_size[c];
  uint32_t add = bound < most ? bound : 0;
  if (add > 0 && tcache_grown_bytes(h) + (size_t)add * hak_class_size[c] <= HAK_TCACHE_GROW_BYTES) {
    h->tcache_grown[c] += (int32_t)add;
    h->tcache_room[c] += (int32_t)add;
    return;
  }
  hak_tcache_flush(h, c, bound / 2);
}

/* Every class's bound back to its base (heap maintenance: growth lasts
 * while it is used), the blocks over it flushed. */
void hak_tcache_relax(hak_heap_t *h)
{
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) {
    int32_t g = h->tcache_grown[c];
    if (g == 0) continue;
    h->tcache_grown[c] = 0;
    h->tcache_room[c] -= g;
    if (h->tcache_room[c] < 0) hak_tcache_flush(h, c, hak_tcache_limit(c));
  }
}

void hak_tcache_reset(hak_heap_t *h)
{
  memset(h->tcache, 0, sizeof h->tcache);
  for (size_t c = 0; c < HAK_NUM_CLASSES; c++) h->tcache_room[c] = (int32_t)hak_tcache_limit(c);
  h->tcache_room[HAK_TCLS_TRAILED] = 0;  /* every push overflows: hak_tcache_overflow */
  memset(h->tcache_grown, 0, sizeof h->tcache_grown);
}
