/* use_shared: a program linked against an installed libhakmem.so (with
 * `pkg-config hakmem` or CMake's hakmem::hakmem) checks that linking it
 * replaced the malloc family of the program, as the README promises.
 *
 *   use_shared LIBDIR    exit 0 iff malloc, free, calloc, realloc and
 *                        posix_memalign resolve into LIBDIR/libhakmem.so.0
 *
 * It then allocates from 4 threads, each freeing half of its blocks and
 * handing the other half to the next thread (remote frees), so that run with
 * HAKMEM_STATS=1 hakmem's exit line counts at least 4 * 2 * BLOCKS allocations
 * (checked by run_install.sh). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define BLOCKS 5000

static int fails;

static void expect_in(const char *name, void *addr, const char *want) {
  Dl_info info;
  char got[PATH_MAX];
  if (!dladdr(addr, &info) || !info.dli_fname || !realpath(info.dli_fname, got)) {
    fprintf(stderr, "use_shared: %s: dladdr/realpath failed\n", name);
    fails++;
  } else if (strcmp(got, want) != 0) {
    fprintf(stderr, "use_shared: %s comes from %s, not %s\n", name, got, want);
    fails++;
  }
}

static void *handed[THREADS][BLOCKS];
static pthread_barrier_t barrier;

static void *worker(void *arg) {
  int t = (int)(long)arg;
  void *mine[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    size_t n = 16 + (size_t)(i * 37 + t * 101) % 4000;
    mine[i] = malloc(n);
    handed[t][i] = calloc(1, n);
    if (!mine[i] || !handed[t][i]) abort();
    memset(mine[i], t, n);
  }
  for (int i = 0; i < BLOCKS; i++) free(mine[i]);
  pthread_barrier_wait(&barrier);
  /* Free what the previous thread allocated. */
  int from = (t + THREADS - 1) % THREADS;
  for (int i = 0; i < BLOCKS; i++) free(handed[from][i]);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: use_shared LIBDIR\n");
    return 2;
  }
  char path[PATH_MAX], want[PATH_MAX];
  snprintf(path, sizeof path, "%s/libhakmem.so.0", argv[1]);
  if (!realpath(path, want)) {
    perror(path);
    return 1;
  }
  /* volatile: the addresses the program really calls, from its GOT. */
  void *volatile fns[] = {(void *)malloc, (void *)free, (void *)calloc, (void *)realloc,
                          (void *)posix_memalign};
  const char *names[] = {"malloc", "free", "calloc", "realloc", "posix_memalign"};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) expect_in(names[i], fns[i], want);

  pthread_barrier_init(&barrier, NULL, THREADS);
  pthread_t th[THREADS];
  for (long t = 0; t < THREADS; t++)
    if (pthread_create(&th[t], NULL, worker, (void *)t) != 0) abort();
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&barrier);

  if (fails) return 1;
  printf("use_shared: malloc family from %s\n", want);
  return 0;
}
