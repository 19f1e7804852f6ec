/* Call stacks for the heap profiler (stack.c). */
#ifndef HAKMEM_STACK_H
#define HAKMEM_STACK_H

#include "base.h"

/* Load the unwinder (libunwind, dlopen'ed with RTLD_LOCAL so that its
 * _Unwind_* functions never replace the C++ runtime's) and find the range of
 * hakmem's own code.  May allocate (dlopen): call it once hakmem is ready.
 * Returns false if there is no unwinder. */
bool hak_stack_init(void);

/* The return addresses of the calling thread's stack, innermost first,
 * without the frames of hakmem's own code when hakmem is a shared object (the
 * preload library), else without the first skip frames (the capture's own
 * and its callers' in hakmem that are never inlined); at most max.  Allocates nothing: libunwind takes its
 * memory with mmap. */
int hak_stack_capture(uintptr_t *pcs, int max, int skip);

#endif /* HAKMEM_STACK_H */
