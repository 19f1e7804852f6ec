/* The purger thread: free pages given back once they have sat idle for the
 * purge delay, even while the program makes no call (purge.c). */
#ifndef HAKMEM_PURGE_H
#define HAKMEM_PURGE_H

#include "base.h"

enum { HAK_PURGER_NONE, HAK_PURGER_STARTING, HAK_PURGER_RUNNING, HAK_PURGER_FAILED };
extern HAK_HIDDEN _Atomic(uint32_t) hak_purger_state;  /* purge.c */
void hak_purge_start(void);  /* the start, if the process mapped enough (below) */

/* From a refill that holds nothing of hakmem's: start the thread if it is
 * due.  Once it has started (or failed), one load. */
static inline void hak_purge_maybe_start(void)
{
  if (HAK_UNLIKELY(atomic_load_explicit(&hak_purger_state, memory_order_relaxed) == HAK_PURGER_NONE))
    hak_purge_start();
}
void hak_purge_after_fork(bool child);
void hak_purge_stop(void);          /* at exit: the thread ends (joined) */

#endif /* HAKMEM_PURGE_H */
