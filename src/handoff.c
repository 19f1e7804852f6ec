/* Cross-thread handoff through Concurrency Kit stacks: SuperSlabs of exited
 * threads waiting for adoption, empty SuperSlabs waiting for reuse, heaps of
 * exited threads waiting for a new thread.
 *
 * Pushes are lock-free (ck_stack_push_upmc: one CAS, never allocates).  A pop
 * takes the whole ck stack with one atomic exchange (ck_stack_batch_pop_upmc)
 * into a spill list that only the holder of `lock` touches, and serves from
 * it: no ABA (the exchange has no expected value), every hand-over is a
 * release CAS / acquire exchange pair, and each entry is moved once.  Pops
 * are rare paths (refill without free slabs, thread start), so the lock is
 * never on a steady-state path.  `count` mirrors the size in a C11 atomic so
 * callers can look cheaply. */
#include "handoff.h"

void hak_handoff_push(hak_handoff_t *q, ck_stack_entry_t *e)
{
  ck_stack_push_upmc(&q->stack, e);
  /* release: a reader of a non-zero count finds the entry (after the lock). */
  atomic_fetch_add_explicit(&q->count, 1, memory_order_release);
}

ck_stack_entry_t *hak_handoff_pop(hak_handoff_t *q)
{
  if (atomic_load_explicit(&q->count, memory_order_acquire) == 0) return NULL;
  pthread_mutex_lock(&q->lock);
  ck_stack_entry_t *e = q->spill;
  if (e == NULL) e = ck_stack_batch_pop_upmc(&q->stack);
  if (e != NULL) {
    q->spill = e->next;
    atomic_fetch_sub_explicit(&q->count, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&q->lock);
  return e;
}

uint32_t hak_handoff_count(hak_handoff_t *q) { return atomic_load_explicit(&q->count, memory_order_relaxed); }

void hak_handoff_before_fork(hak_handoff_t *q) { pthread_mutex_lock(&q->lock); }
void hak_handoff_after_fork(hak_handoff_t *q, bool child)
{
  if (child) pthread_mutex_init(&q->lock, NULL);
  else pthread_mutex_unlock(&q->lock);
}

/* ------------------------------------------------- abandoned SuperSlabs */

hak_handoff_t hak_abandoned = HAK_HANDOFF_INITIALIZER;

void hak_handoff_abandon(hak_superslab_t *ss) { hak_handoff_push(&hak_abandoned, &ss->handoff); }

hak_superslab_t *hak_handoff_take(void)
{
  ck_stack_entry_t *e = hak_handoff_pop(&hak_abandoned);
  return e ? (hak_superslab_t *)((char *)e - offsetof(hak_superslab_t, handoff)) : NULL;
}
