/* Remote frees (remote.c). */
#ifndef HAKMEM_REMOTE_H
#define HAKMEM_REMOTE_H

#include "block.h"
#include "superslab.h"

void hak_remote_free(hak_superslab_t *ss, hak_slab_t *s, hak_block_t *b);
void hak_remote_flush(hak_heap_t *h);
void hak_remote_pend_flush(hak_heap_t *h, hak_pend_t *e);
void hak_remote_pend_start(hak_heap_t *h, hak_pend_t *e, hak_slab_t *s, hak_block_t *b);

/* Add b to e, the pending run of its slab s (remote.c). */
static inline void hak_remote_pend_add(hak_heap_t *h, hak_pend_t *e, hak_slab_t *s, hak_block_t *b)
{
  hak_block_set_next(b, e->first);  /* last's link is set by the push */
  e->first = b;
  h->pend_key = hak_owned_key(s);   /* pinned by this run */
  if (HAK_UNLIKELY(++e->n == e->limit)) hak_remote_pend_flush(h, e);
}

/* Hold back the remote free of b, a validated block of s, on the live heap
 * h (remote.c, "pending frees"). */
static inline void hak_remote_defer(hak_heap_t *h, hak_slab_t *s, hak_block_t *b)
{
  uintptr_t a = (uintptr_t)s;
  hak_pend_t *e = &h->pend[((a >> 7) ^ (a >> HAK_SS_SHIFT)) % HAK_PEND_SLOTS];
  if (HAK_UNLIKELY(e->slab != s)) hak_remote_pend_start(h, e, s, b);
  else hak_remote_pend_add(h, e, s, b);
}
/* Owner: take s's remote stack into its free lists and set the state to
 * new_state (a HAK_RS_* state, or HAK_RS_KEEP_STATE to leave it as it is);
 * the number of blocks taken. */
#define HAK_RS_KEEP_STATE ((uintptr_t)4)
uint32_t hak_remote_collect(hak_slab_t *s, uintptr_t new_state);
uint32_t hak_remote_pending(hak_slab_t *s);
bool hak_remote_mark_full(hak_slab_t *s);
void hak_remote_set_state(hak_slab_t *s, uintptr_t state);
hak_block_t *hak_remote_delayed_take(hak_heap_t *h);
void hak_remote_delayed_putback(hak_heap_t *h, hak_block_t *first, hak_block_t *last);
bool hak_remote_handing_over(hak_slab_t *s);
void hak_remote_heap_reset(hak_heap_t *h);  /* a heap starts serving a thread */
void hak_remote_after_fork_child(hak_slab_t *s);

#endif /* HAKMEM_REMOTE_H */
