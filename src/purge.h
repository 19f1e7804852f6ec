/* The purger thread: free pages given back once they have sat idle for the
 * purge delay, even while the program makes no call (purge.c). */
#ifndef HAKMEM_PURGE_H
#define HAKMEM_PURGE_H

#include "base.h"

void hak_purge_maybe_start(void);   /* from a slow path that holds nothing of hakmem's */
void hak_purge_after_fork(bool child);
void hak_purge_stop(void);          /* at exit: the thread ends (joined) */

#endif /* HAKMEM_PURGE_H */
