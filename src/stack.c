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

#include "stack.h"

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
