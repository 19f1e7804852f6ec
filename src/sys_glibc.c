/* The system allocator of the preload library: glibc's free, realloc and
 * malloc_usable_size, for pointers hakmem did not allocate. */
#include <dlfcn.h>

#include "sys.h"
#include "os.h"

/* glibc's free/realloc/malloc_usable_size, for foreign pointers (allocated
 * before hakmem took over, or by code bound to glibc directly).  Resolved at
 * load time by the constructor, so a foreign free never calls into the
 * dynamic loader; written once, then only read (atomics for the rare case
 * that two threads resolve them concurrently). */
static _Atomic(void *) sys_free_fn, sys_realloc_fn, sys_usable_fn;

void hak_sys_init(void)
{
  if (atomic_load_explicit(&sys_free_fn, memory_order_acquire) != NULL) return;
  void *r = dlsym(RTLD_NEXT, "realloc");
  void *u = dlsym(RTLD_NEXT, "malloc_usable_size");
  void *f = dlsym(RTLD_NEXT, "free");
  if (f == NULL || r == NULL || u == NULL) hak_fatal("cannot find glibc's allocator", NULL);
  atomic_store_explicit(&sys_realloc_fn, r, memory_order_relaxed);
  atomic_store_explicit(&sys_usable_fn, u, memory_order_relaxed);
  atomic_store_explicit(&sys_free_fn, f, memory_order_release);  /* last: the guard above */
}

static void *sys_fn(_Atomic(void *) *fn)
{
  void *f = atomic_load_explicit(fn, memory_order_acquire);
  if (HAK_UNLIKELY(f == NULL)) {
    hak_sys_init();
    f = atomic_load_explicit(fn, memory_order_acquire);
  }
  return f;
}

void hak_sys_free(void *p) { ((void (*)(void *))sys_fn(&sys_free_fn))(p); }
void *hak_sys_realloc(void *p, size_t n) { return ((void *(*)(void *, size_t))sys_fn(&sys_realloc_fn))(p, n); }
size_t hak_sys_usable_size(void *p) { return ((size_t(*)(void *))sys_fn(&sys_usable_fn))(p); }
