/* foreign: run with LD_PRELOAD=libhakmem.so.  Blocks from glibc's own
 * allocator (not hakmem's) are given to free, realloc and malloc_usable_size,
 * which hakmem answers: no crash, contents kept, sizes right.
 *
 * glibc's malloc is reached through dlsym on libc.so.6's own handle, which
 * under the preload still names glibc's definition.  Blocks of every glibc
 * kind are used: small (arena), large (glibc mmaps >= 128 KiB), calloc,
 * memalign.  Some are freed by another thread, interleaved with hakmem's
 * own allocations.  The program prints foreign_frees=N, the number of glibc
 * blocks it handed to free().
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/report.h"

static void *(*sys_malloc)(size_t);
static void *(*sys_calloc)(size_t, size_t);
static void *(*sys_memalign)(size_t, size_t);

static unsigned long foreign_frees;

static unsigned char pat(size_t seed, size_t i) { return (unsigned char)(seed * 131 + i * 7 + (i >> 8)); }

static void fill(void *p, size_t n, size_t seed) {
  for (size_t i = 0; i < n; i++) ((unsigned char *)p)[i] = pat(seed, i);
}

static size_t verify(const void *p, size_t n, size_t seed) {
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char *)p)[i] != pat(seed, i)) return i;
  return n;
}

static void *sys_block(size_t s, size_t seed) {
  void *f = sys_malloc(s);
  if (!f) {
    FAIL("glibc malloc(%zu) returned NULL", s);
    exit(1);
  }
  fill(f, s, seed);
  return f;
}

struct batch { void **p; size_t n; };

static void *free_batch(void *arg) {
  struct batch *b = arg;
  for (size_t i = 0; i < b->n; i++) {
    void *mine = malloc(32 + i % 200); /* hakmem's, interleaved */
    free(b->p[i]);
    free(mine);
  }
  return NULL;
}

int main(void) {
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (!libc) {
    fprintf(stderr, "FAIL: dlopen(libc.so.6, RTLD_NOLOAD): %s\n", dlerror());
    return 1;
  }
  sys_malloc = (void *(*)(size_t))dlsym(libc, "malloc");
  sys_calloc = (void *(*)(size_t, size_t))dlsym(libc, "calloc");
  sys_memalign = (void *(*)(size_t, size_t))dlsym(libc, "memalign");
  void *used_malloc = dlsym(RTLD_DEFAULT, "malloc");
  if (!sys_malloc || !sys_calloc || !sys_memalign) {
    fprintf(stderr, "FAIL: glibc's malloc, calloc or memalign not found\n");
    return 1;
  }
  if (used_malloc == (void *)sys_malloc) {
    fprintf(stderr, "FAIL: malloc is glibc's own: this must run under LD_PRELOAD\n");
    return 1;
  }
  Dl_info di;
  if (!dladdr((void *)sys_malloc, &di) || !di.dli_fname || !strstr(di.dli_fname, "libc.so")) {
    fprintf(stderr, "FAIL: the 'system' malloc is not in libc.so (%s)\n",
            di.dli_fname ? di.dli_fname : "?");
    return 1;
  }

  /* hakmem blocks that must survive everything below. */
  enum { OWN = 200 };
  void *own[OWN];
  for (size_t i = 0; i < OWN; i++) {
    own[i] = malloc(16 + i * 40);
    if (!own[i]) { FAIL("malloc"); return 1; }
    fill(own[i], 16 + i * 40, 1000 + i);
  }

  static const size_t sizes[] = {1, 8, 24, 100, 1000, 4000, 5000, 65536, 131071,
                                 200000, 1 << 20, 5 << 20};
  const size_t ns = sizeof sizes / sizeof sizes[0];

  /* malloc_usable_size and free of glibc blocks. */
  for (size_t i = 0; i < ns; i++) {
    void *f = sys_block(sizes[i], i);
    size_t u = malloc_usable_size(f);
    if (u < sizes[i]) FAIL("malloc_usable_size(glibc block of %zu) = %zu", sizes[i], u);
    if (verify(f, sizes[i], i) != sizes[i]) FAIL("glibc block of %zu changed", sizes[i]);
    free(f);
    foreign_frees++;
  }

  /* realloc of glibc blocks, growing and shrinking, then free. */
  for (size_t i = 0; i < ns; i++) {
    for (size_t j = 0; j < ns; j++) {
      size_t from = sizes[i], to = sizes[j], keep = from < to ? from : to;
      void *f = sys_block(from, i * 31 + j);
      unsigned char *g = realloc(f, to);
      if (!g) {
        FAIL("realloc(glibc block of %zu, %zu) returned NULL", from, to);
        continue;
      }
      size_t at = verify(g, keep, i * 31 + j);
      if (at != keep) FAIL("realloc(glibc block %zu -> %zu) lost byte %zu", from, to, at);
      size_t u = malloc_usable_size(g);
      if (u < to) FAIL("realloc(glibc block %zu -> %zu): usable size %zu", from, to, u);
      memset(g, 0x5a, to);
      free(g);
    }
  }
  /* realloc(glibc block, 0) frees it. */
  void *z = realloc(sys_block(300, 3), 0);
  if (z) free(z);

  /* calloc'd and memalign'd glibc blocks. */
  void *c = sys_calloc(10, 100);
  void *m1 = sys_memalign(64, 1000);
  void *m2 = sys_memalign(4096, 100000);
  void *m3 = sys_memalign(1 << 16, 3 << 20);
  if (!c || !m1 || !m2 || !m3) { FAIL("glibc calloc/memalign returned NULL"); return 1; }
  if (malloc_usable_size(m2) < 100000) FAIL("usable size of glibc memalign block %zu", malloc_usable_size(m2));
  free(c);
  free(m1);
  free(m2);
  free(m3);
  foreign_frees += 4;

  /* Many glibc blocks freed by another thread, mixed with hakmem's blocks. */
  enum { MANY = 3000 };
  struct batch b = {calloc(MANY, sizeof(void *)), MANY};
  if (!b.p) { FAIL("calloc"); return 1; }
  for (size_t i = 0; i < MANY; i++) b.p[i] = sys_block(8 + (i * 13) % 700 + (i % 100 == 0 ? 200000 : 0), i);
  pthread_t t;
  if (pthread_create(&t, NULL, free_batch, &b)) { FAIL("pthread_create"); return 1; }
  pthread_join(t, NULL);
  foreign_frees += MANY;
  free(b.p);

  /* hakmem keeps serving the program: these must show in its statistics. */
  for (int i = 0; i < 5000; i++) {
    char *s = malloc(10 + (size_t)i % 500);
    if (!s) { FAIL("malloc"); break; }
    snprintf(s, 10, "%d", i);
    char *d = strdup(s);
    if (!d || strcmp(d, s)) FAIL("strdup");
    free(d);
    free(s);
  }
  for (size_t i = 0; i < OWN; i++) {
    size_t at = verify(own[i], 16 + i * 40, 1000 + i);
    if (at != 16 + i * 40) FAIL("hakmem block %zu changed at byte %zu", i, at);
    free(own[i]);
  }

  printf("foreign_frees=%lu\n", foreign_frees);
  if (ts_failures()) {
    fprintf(stderr, "foreign: %d failures\n", ts_failures());
    return 1;
  }
  printf("foreign: all checks passed\n");
  return 0;
}
