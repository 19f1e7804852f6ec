/* Cross-thread handoff: SuperSlabs of exited threads wait on a Concurrency
 * Kit stack until a living thread adopts them on refill.
 *
 * Pushes are lock-free (ck_stack_push_upmc).  Pops are serialised by a mutex:
 * with a single popper at a time a Treiber pop has no ABA (pushers only add),
 * and adoption is a rare path.  `pending` mirrors the stack's size in a C11
 * atomic so the refill path can look without touching ck's volatile head. */
#include <pthread.h>

#include "internal.h"

static ck_stack_t abandoned = CK_STACK_INITIALIZER;
static pthread_mutex_t pop_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(uint32_t) pending;

void hak_handoff_abandon(hak_superslab_t *ss)
{
  ck_stack_push_upmc(&abandoned, &ss->handoff);
  /* release: pairs with the acquire in hak_handoff_adopt (the stack's own
   * CAS already orders the entry; this orders the count). */
  atomic_fetch_add_explicit(&pending, 1, memory_order_release);
}

bool hak_handoff_pending(void) { return atomic_load_explicit(&pending, memory_order_relaxed) != 0; }
uint32_t hak_handoff_count(void) { return atomic_load_explicit(&pending, memory_order_relaxed); }

/* Pop one abandoned SuperSlab for h, or NULL. */
hak_superslab_t *hak_handoff_take(void)
{
  if (atomic_load_explicit(&pending, memory_order_acquire) == 0) return NULL;
  pthread_mutex_lock(&pop_lock);
  ck_stack_entry_t *e = ck_stack_pop_upmc(&abandoned);
  pthread_mutex_unlock(&pop_lock);
  if (e == NULL) return NULL;
  atomic_fetch_sub_explicit(&pending, 1, memory_order_relaxed);
  return (hak_superslab_t *)((char *)e - offsetof(hak_superslab_t, handoff));
}

void hak_handoff_before_fork(void) { pthread_mutex_lock(&pop_lock); }
void hak_handoff_after_fork(bool child)
{
  if (child) pthread_mutex_init(&pop_lock, NULL);
  else pthread_mutex_unlock(&pop_lock);
}
