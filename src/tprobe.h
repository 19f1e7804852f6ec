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
 * throughout the call, on the stack that holds `on_stack` (an address the
 * thread took from its own stack), with neither its user-mode program
 * counter nor any word of that stack (from its stack pointer to the end of
 * that mapping) inside hakmem's executable code: then it is inside no
 * hakmem function, not even one a signal handler interrupted.  A thread
 * blocked on another stack (a signal handler on an alternate signal
 * stack, a coroutine's stack) is refused: the frames of the code it left
 * are not on the stack read.  False whenever it cannot tell (the thread
 * ran, /proc or process_vm_readv refused, the probe not usable). */
bool hak_tprobe_outside(int tid, uintptr_t on_stack);
/* Whether thread tid of this process is blocked in the kernel now (one
 * look, which proves nothing about hakmem's code: a cheap first test, so
 * that a running thread is not made to wait for a probe). */
bool hak_tprobe_blocked(int tid);

#endif /* HAKMEM_TPROBE_H */
