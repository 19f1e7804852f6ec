/* entry_points: run with LD_PRELOAD=libhakmem.so; every allocation entry
 * point must land in the preload library.
 *
 *   preload_entry_points /path/to/libhakmem.so
 *
 * 1. For each name, the definition the process uses (dlsym RTLD_DEFAULT) must
 *    be the one of the preload library (dlsym on its handle).
 * 2. Each allocating entry point is called ROUNDS times, paired with a
 *    different freeing entry point (blocks cross between the glibc-named and
 *    the standard names), checking alignment, usable size and contents.
 *    It prints "expected_allocs=N" for the script, which compares it with the
 *    allocs= of hakmem's exit statistics: an entry point that did not reach
 *    hakmem leaves the count short by ROUNDS.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "support/report.h"

/* glibc exports these but no header declares them. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

#define ROUNDS 2000

static const char *const names[] = {
    "malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "malloc_usable_size", "free_sized", "free_aligned_sized",
    "__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc", "__libc_memalign",
    "__posix_memalign"};

static void check_block(const char *how, void *p, size_t size, size_t align, int zeroed) {
  if (!p) {
    FAIL("%s(%zu) returned NULL", how, size);
    return;
  }
  if ((uintptr_t)p % align) FAIL("%s(%zu) = %p not aligned to %zu", how, size, p, align);
  size_t u = malloc_usable_size(p);
  if (u < size) FAIL("%s(%zu): malloc_usable_size %zu", how, size, u);
  if (zeroed) {
    for (size_t i = 0; i < size; i++)
      if (((unsigned char *)p)[i]) {
        FAIL("%s(%zu): byte %zu not zero", how, size, i);
        break;
      }
  }
  memset(p, 0xab, size);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s /path/to/preloaded/libhakmem.so\n", argv[0]);
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  if (!lib) {
    fprintf(stderr, "FAIL: %s is not loaded in this process (run with LD_PRELOAD): %s\n", argv[1],
            dlerror());
    return 1;
  }
  /* 1. Resolution: the process's definition is the preload library's. */
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *in_lib = dlsym(lib, names[i]);
    void *used = dlsym(RTLD_DEFAULT, names[i]);
    if (!in_lib) {
      FAIL("%s is not defined by %s", names[i], argv[1]);
      continue;
    }
    if (used != in_lib) {
      Dl_info di = {0};
      dladdr(used, &di);
      FAIL("%s resolves to %p in %s, not to the preload library's %p", names[i], used,
           di.dli_fname ? di.dli_fname : "?", in_lib);
    }
  }
  /* Entry points that glibc 2.36 does not have, or that headers lack. */
  int (*posix_memalign_u)(void **, size_t, size_t) =
      (int (*)(void **, size_t, size_t))dlsym(RTLD_DEFAULT, "__posix_memalign");
  void (*free_sized_f)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
  void (*free_aligned_sized_f)(void *, size_t, size_t) =
      (void (*)(void *, size_t, size_t))dlsym(RTLD_DEFAULT, "free_aligned_sized");
  if (!posix_memalign_u || !free_sized_f || !free_aligned_sized_f) {
    fprintf(stderr, "FAIL: __posix_memalign, free_sized or free_aligned_sized missing; %d failures\n",
            ts_failures());
    return 1;
  }

  /* 2. Calls.  Each counted allocation is paired with a free through a
   * different name, so that blocks cross between the name families. */
  const long page = sysconf(_SC_PAGESIZE);
  unsigned long expected = 0;
  for (int r = 0; r < ROUNDS; r++) {
    size_t s = 1 + (size_t)(r * 7919) % 3000; /* varied sizes across classes */
    void *p;

    p = malloc(s);                   check_block("malloc", p, s, 16, 0);             __libc_free(p);
    p = __libc_malloc(s);            check_block("__libc_malloc", p, s, 16, 0);      free(p);
    p = calloc(s, 3);                check_block("calloc", p, s * 3, 16, 1);         __libc_free(p);
    p = __libc_calloc(3, s);         check_block("__libc_calloc", p, s * 3, 16, 1);  free(p);
    p = realloc(NULL, s);            check_block("realloc(NULL)", p, s, 16, 0);      __libc_free(p);
    p = __libc_realloc(NULL, s);     check_block("__libc_realloc(NULL)", p, s, 16, 0); free(p);
    p = memalign(64, s);             check_block("memalign", p, s, 64, 0);           __libc_free(p);
    p = __libc_memalign(256, s);     check_block("__libc_memalign", p, s, 256, 0);   free(p);
    p = NULL;
    if (posix_memalign_u(&p, 128, s)) FAIL("__posix_memalign(128, %zu) failed", s);
    check_block("__posix_memalign", p, s, 128, 0);                                    __libc_free(p);
    p = NULL;
    if (posix_memalign(&p, 32, s)) FAIL("posix_memalign(32, %zu) failed", s);
    check_block("posix_memalign", p, s, 32, 0);                                       free(p);
    p = aligned_alloc(512, s);       check_block("aligned_alloc", p, s, 512, 0);     free_aligned_sized_f(p, 512, s);
    p = valloc(s);                   check_block("valloc", p, s, (size_t)page, 0);   free(p);
    p = pvalloc(s);                  check_block("pvalloc", p, s, (size_t)page, 0);  __libc_free(p);
    p = reallocarray(NULL, s, 2);    check_block("reallocarray(NULL)", p, s * 2, 16, 0); free_sized_f(p, s * 2);
    expected += 14;

    /* Now and then, realloc of a block from the other family, contents
     * preserved.  How a moving realloc is counted is hakmem's choice, so it
     * runs rarely: its count stays far below the ROUNDS that a missing entry
     * point would take away. */
    if (r % 100) continue;
    unsigned char *q = __libc_malloc(s);
    if (!q) { FAIL("__libc_malloc"); continue; }
    for (size_t i = 0; i < s; i++) q[i] = (unsigned char)(i * 31 + 7);
    unsigned char *q2 = realloc(q, s * 4 + 100);
    unsigned char *q3 = q2 ? __libc_realloc(q2, s / 2 + 1) : NULL;
    if (!q3) { FAIL("realloc chain returned NULL"); continue; }
    for (size_t i = 0; i < s / 2 + 1; i++)
      if (q3[i] != (unsigned char)(i * 31 + 7)) { FAIL("realloc chain lost byte %zu", i); break; }
    free(q3);
    expected += 1;
  }
  /* Harmless: glibc's introspection calls must not crash under the preload. */
  struct mallinfo2 mi = mallinfo2();
  (void)mi;
  free(NULL);
  __libc_free(NULL);

  printf("expected_allocs=%lu\n", expected);
  if (ts_failures()) {
    fprintf(stderr, "entry_points: %d failures\n", ts_failures());
    return 1;
  }
  printf("entry_points: all calls behaved\n");
  return 0;
}
