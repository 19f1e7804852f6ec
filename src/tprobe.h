/* The thread probe (tprobe.c): is another thread of this process blocked
 * in the kernel, outside hakmem's code, for the whole of a look? */
#ifndef HAKMEM_TPROBE_H
#define HAKMEM_TPROBE_H

#include "base.h"

/* Find hakmem's code (dl_iterate_phdr, which takes the loader's lock: call
 * it holding nothing of hakmem's).  The purger's alone, as the rest. */
void hak_tprobe_init(void);
/* Whether the probe can tell: hak_tprobe_init found hakmem in a shared
 * object (preloaded or linked as one), not in the program itself. */
bool hak_tprobe_usable(void);

/* True only if thread tid of this process stayed blocked in the kernel
 * throughout the call, with neither its user-mode program counter nor any
 * word of its stack (from its stack pointer to the end of that mapping)
 * inside hakmem's executable code: then it is inside no hakmem function,
 * not even one a signal handler interrupted.  False whenever it cannot
 * tell (the thread ran, /proc or process_vm_readv refused, the probe not
 * usable). */
bool hak_tprobe_outside(int tid);
/* Whether thread tid of this process is blocked in the kernel now (one
 * look, which proves nothing about hakmem's code: a cheap first test, so
 * that a running thread is not made to wait for a probe). */
bool hak_tprobe_blocked(int tid);

#endif /* HAKMEM_TPROBE_H */
