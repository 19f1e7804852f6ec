/* Call stacks for the heap profiler (stack.c). */
#ifndef HAKMEM_STACK_H
#define HAKMEM_STACK_H

#include "base.h"

/* Load the unwinders (libgcc_s's and libunwind, dlopen'ed with RTLD_LOCAL
 * so that libunwind's _Unwind_* functions never replace the C++ runtime's)
 * and find the range of hakmem's own code.  May allocate (dlopen): call it
 * once hakmem is ready.  Returns false if there is no unwinder. */
bool hak_stack_init(void);

/* The frames a thread unwinds with libgcc before it turns to libunwind:
 * about libunwind's per-thread set-up (0.7-0.8 ms) over libgcc's cost per
 * frame (0.1 us). */
#define HAK_STACK_WARM_FRAMES 8192

/* The return addresses of the calling thread's stack, innermost first,
 * without the frames of hakmem's own code when hakmem is a shared object (the
 * preload library), else without the capture's own frame and the first skip
 * of its callers' (those in hakmem that are never inlined); at most max.
 * Allocates nothing through malloc (stack.c). */
int hak_stack_capture(uintptr_t *pcs, int max, int skip);

#endif /* HAKMEM_STACK_H */
