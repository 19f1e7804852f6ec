/* Call stacks for the heap profiler, from the DWARF call-frame information
 * (.eh_frame) every Debian program and library carries, frame pointers or
 * not.  Two well-kept unwinders, each where it is cheaper:
 *
 * - libgcc's _Unwind_Backtrace (libgcc_s.so.1, on every Debian system): no
 *   per-thread state; it finds each frame's FDE with glibc's _dl_find_object
 *   (lock-free) and interprets it, about 1 us for a 10-frame stack.
 * - libunwind's unw_backtrace (libunwind.so.8): about 70 ns once warm, but
 *   a thread's first call maps and clears a 256 KiB per-thread trace cache
 *   (64 page faults, 0.7-0.8 ms here), unmapped again when the thread exits.
 *
 * A thread unwinds with libgcc until it has unwound HAK_STACK_WARM_FRAMES
 * frames, and with libunwind after that (when libunwind is installed): the
 * ski-rental rule.  A thread that lives for a few hundred samples --
 * larson's, a pool's short tasks -- never pays libunwind's set-up; a
 * long-lived one pays it once it has spent about as much on libgcc's
 * unwinds, the sooner the deeper its stacks.  Both report the same return
 * addresses; the capture's own frame (called from two places), hakmem's
 * frames and a final 0 are dropped from either.
 *
 * Both are loaded with dlopen(RTLD_LOCAL) when the profiler starts, not
 * linked: libunwind.so.8 also defines the _Unwind_* functions of the C++
 * exception runtime and a weak backtrace(), which a linked dependency of
 * the preload library would put in front of libgcc_s's for every program,
 * profiled or not.  Loaded locally, its symbols stay out of the global scope.
 *
 * Neither allocates through malloc while it unwinds: libunwind's pools and
 * its trace cache come from mmap, libgcc's state lives on the stack (the
 * profiler counts any malloc made while it captures a stack:
 * docs/profiler.md). */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <unwind.h>

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
#define HAK_GCC_UNWIND_LIB "libgcc_s.so.1"

/* Written once by hak_stack_init, before the profiler is switched on (the
 * release store of prof.c's state publishes them), read-only after. */
static int (*unw_backtrace_fn)(void **, int);   /* NULL: libunwind absent */
static _Unwind_Reason_Code (*gcc_backtrace_fn)(_Unwind_Trace_Fn, void *);
static _Unwind_Ptr (*gcc_get_ip_fn)(struct _Unwind_Context *);
static uintptr_t self_lo, self_hi;   /* hakmem's code when it is a shared object, else 0, 0 */

static __thread uint32_t tls_frames;   /* frames this thread unwound with libgcc */

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

static void *load(const char *lib, const char *sym)
{
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  return h != NULL ? dlsym(h, sym) : NULL;
}

bool hak_stack_init(void)
{
  int index = 0;
  dl_iterate_phdr(find_self, &index);
#ifdef HAKMEM_TSAN
  unw_backtrace_fn = fp_backtrace;
  return true;
#endif
  gcc_backtrace_fn = (_Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void *))load(HAK_GCC_UNWIND_LIB, "_Unwind_Backtrace");
  gcc_get_ip_fn = (_Unwind_Ptr (*)(struct _Unwind_Context *))load(HAK_GCC_UNWIND_LIB, "_Unwind_GetIP");
  if (gcc_get_ip_fn == NULL) gcc_backtrace_fn = NULL;
  unw_backtrace_fn = (int (*)(void **, int))load(HAKMEM_UNWIND_LIB, "unw_backtrace");
  return gcc_backtrace_fn != NULL || unw_backtrace_fn != NULL;
}

typedef struct gcc_trace {
  void **buf;
  int n, max;
} gcc_trace_t;

static _Unwind_Reason_Code gcc_frame(struct _Unwind_Context *ctx, void *arg)
{
  gcc_trace_t *t = arg;
  void *ip = (void *)gcc_get_ip_fn(ctx);
  if (t->n >= t->max || ip == NULL) return _URC_END_OF_STACK;
  t->buf[t->n++] = ip;
  return _URC_NO_REASON;
}

/* The raw stack, innermost first: its caller's frame first. */
static HAK_INLINE int unwind(void **buf, int max)
{
  if (unw_backtrace_fn != NULL && (tls_frames >= HAK_STACK_WARM_FRAMES || gcc_backtrace_fn == NULL))
    return unw_backtrace_fn(buf, max);
  gcc_trace_t t = { buf, 0, max };
  gcc_backtrace_fn(gcc_frame, &t);
  tls_frames += (uint32_t)t.n;
  return t.n;
}

HAK_NOINLINE int hak_stack_capture(uintptr_t *pcs, int max, int skip)
{
  void *buf[96];   /* hakmem's frames and the max kept */
  int n = unwind(buf, 96);
  while (n > 0 && buf[n - 1] == NULL) n--;
  int i = 1;   /* frame 0 is this function's own: the unwinders' calls differ */
  if (self_hi == 0) i = 1 + skip < n ? 1 + skip : 1;
  while (i < n && (uintptr_t)buf[i] - self_lo < self_hi - self_lo) i++;   /* hakmem's frames */
  if (i == n) i = 0;   /* no frame outside hakmem: keep them all */
  int k = 0;
  for (; i < n && k < max; i++) pcs[k++] = (uintptr_t)buf[i];
  return k;
}
