/* Call stacks for the heap profiler: libunwind's unw_backtrace, which
 * unwinds with the DWARF call-frame information every Debian program and
 * library carries (.eh_frame), frame pointers or not.
 *
 * libunwind is loaded with dlopen(RTLD_LOCAL) when the profiler starts, not
 * linked: libunwind.so.8 also defines the _Unwind_* functions of the C++
 * exception runtime and a weak backtrace(), which a linked dependency of
 * the preload library would put in front of libgcc_s's for every program,
 * profiled or not.  Loaded locally, its symbols stay out of the global scope.
 *
 * unw_backtrace allocates nothing through malloc: libunwind's memory pools
 * and its per-thread trace cache come from mmap, and it finds the unwind
 * tables with dl_iterate_phdr (the profiler counts any malloc made while it
 * captures a stack: docs/profiler.md). */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include "stack.h"

/* Under ThreadSanitizer (HAKMEM_TSAN, built with -fno-omit-frame-pointer)
 * stacks come from walking the frame-pointer chain instead: libunwind's
 * per-thread cache is torn down at thread exit through a pthread key
 * destructor that TSan's pthread_mutex_lock interceptor cannot run there
 * (the thread's TSan state is already gone: a crash), and libunwind itself
 * is not instrumented.  The walk reads only the calling thread's own stack
 * between the current frame and the stack's top (pthread_getattr_np, once
 * per thread), each frame above the last, so a frame of code built without
 * frame pointers (libc's) ends the walk early but never reads outside the
 * stack. */
#ifdef HAKMEM_TSAN
static __thread uintptr_t tls_stack_hi;   /* this thread's stack top, 0 until known */

static uintptr_t stack_top(void)
{
  if (tls_stack_hi == 0) {
    pthread_attr_t a;
    void *lo;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &a) != 0) return 0;
    if (pthread_attr_getstack(&a, &lo, &size) == 0) tls_stack_hi = (uintptr_t)lo + size;
    pthread_attr_destroy(&a);
  }
  return tls_stack_hi;
}

static int fp_backtrace(void **buf, int max)
{
  uintptr_t hi = stack_top();
  uintptr_t *fp = __builtin_frame_address(0);
  int n = 0;
  buf[n++] = __builtin_return_address(0);   /* stands for this frame, as unw_backtrace's first */
  while (n < max && hi != 0) {
    uintptr_t next = fp[0];
    if (next <= (uintptr_t)fp || next % sizeof(uintptr_t) != 0 || next + 2 * sizeof(uintptr_t) > hi) break;
    fp = (uintptr_t *)next;
    if (fp[1] == 0) break;
    buf[n++] = (void *)fp[1];
  }
  return n;
}
#endif

#ifndef HAKMEM_UNWIND_LIB
#define HAKMEM_UNWIND_LIB "libunwind.so.8"
#endif

/* Written once by hak_stack_init, before the profiler is switched on (the
 * release store of prof.c's state publishes them), read-only after. */
static int (*unw_backtrace_fn)(void **, int);
static uintptr_t self_lo, self_hi;   /* hakmem's code when it is a shared object, else 0, 0 */

/* dl_iterate_phdr callback: the executable segment of the object holding
 * hak_stack_init, unless that object is the program itself (hakmem linked
 * statically: then its frames cannot be told from the program's). */
static int find_self(struct dl_phdr_info *info, size_t size, void *ctx)
{
  (void)size;
  int *index = ctx;
  uintptr_t me = (uintptr_t)&hak_stack_init;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (me < lo || me >= hi) continue;
    if (*index > 0) {
      self_lo = lo;
      self_hi = hi;
    }
    return 1;
  }
  ++*index;
  return 0;
}

bool hak_stack_init(void)
{
#ifdef HAKMEM_TSAN
  unw_backtrace_fn = fp_backtrace;
  int tindex = 0;
  dl_iterate_phdr(find_self, &tindex);
  return true;
#endif
  void *lib = dlopen(HAKMEM_UNWIND_LIB, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return false;
  void *f = dlsym(lib, "unw_backtrace");
  if (f == NULL) return false;
  unw_backtrace_fn = (int (*)(void **, int))f;
  int index = 0;
  dl_iterate_phdr(find_self, &index);
  return true;
}

HAK_NOINLINE int hak_stack_capture(uintptr_t *pcs, int max, int skip)
{
  void *buf[96];   /* hakmem's frames and the max kept */
  int n = unw_backtrace_fn(buf, 96);
  int i = 0;
  if (self_hi == 0) i = skip < n ? skip : 0;
  while (i < n && (uintptr_t)buf[i] - self_lo < self_hi - self_lo) i++;   /* hakmem's frames */
  if (i == n) i = 0;   /* no frame outside hakmem: keep them all */
  int k = 0;
  for (; i < n && k < max; i++) pcs[k++] = (uintptr_t)buf[i];
  return k;
}
