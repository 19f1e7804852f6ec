/* use_api: a program linked against the installed libhakmem_api.a (with
 * `pkg-config hakmem-api` or CMake's hakmem::hakmem_api) checks the prefixed
 * API of hakmem.h.  Run with HAKMEM_STATS=1 (block counts are kept only then).
 *
 * Two threads allocate small and large blocks with hak_malloc, hak_calloc and
 * hak_posix_memalign; each frees half of its own blocks and the other thread
 * frees the rest (remote frees).  hak_stats_get must count them all, and the
 * live bytes must come back to where they started.  The program's own malloc
 * stays the system's: the static API replaces nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hakmem.h>

#define BLOCKS 4000
#define LARGE_EVERY 500 /* every 500th block is 1 MiB: a large mapping */

static int fails;
#define CHECK(c)                                                        \
  do {                                                                  \
    if (!(c)) {                                                         \
      fprintf(stderr, "use_api: %s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
      fails++;                                                          \
    }                                                                   \
  } while (0)

static void *blocks[2][BLOCKS];
static pthread_barrier_t barrier;

static size_t size_of(int i) { return i % LARGE_EVERY == 0 ? (1u << 20) : 16 + (size_t)i * 7 % 3000; }

static void *worker(void *arg) {
  int t = (int)(long)arg;
  for (int i = 0; i < BLOCKS; i++) {
    size_t n = size_of(i);
    void *p;
    if (i % 3 == 0) {
      p = hak_calloc(1, n);
      if (p) for (size_t k = 0; k < n; k += 512) CHECK(((unsigned char *)p)[k] == 0);
    } else if (i % 3 == 1) {
      if (hak_posix_memalign(&p, 256, n) != 0) p = NULL;
      CHECK(((uintptr_t)p & 255) == 0);
    } else {
      p = hak_malloc(n);
    }
    CHECK(p != NULL);
    CHECK(hak_malloc_usable_size(p) >= n);
    memset(p, 0x5a, n);
    blocks[t][i] = p;
  }
  /* Thread t frees its blocks i = t (mod 2) ... */
  for (int i = t; i < BLOCKS; i += 2) hak_free(blocks[t][i]);
  pthread_barrier_wait(&barrier);
  /* ... and those of the other thread, 1 - t, that it left: remote frees. */
  for (int i = t; i < BLOCKS; i += 2) hak_free(blocks[1 - t][i]);
  return NULL;
}

int main(void) {
  const char *env = getenv("HAKMEM_STATS");
  if (!env || strcmp(env, "0") == 0) {
    fprintf(stderr, "use_api: run with HAKMEM_STATS=1\n");
    return 2;
  }
  /* The static API does not replace the program's malloc. */
  Dl_info info;
  void *volatile m = (void *)malloc;
  CHECK(dladdr(m, &info) && info.dli_fname && !strstr(info.dli_fname, "hakmem"));

  hak_stats_t before, after;
  hak_stats_get(&before);
  pthread_barrier_init(&barrier, NULL, 2);
  pthread_t th[2];
  for (long t = 0; t < 2; t++)
    if (pthread_create(&th[t], NULL, worker, (void *)t) != 0) abort();
  for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&barrier);
  hak_stats_get(&after);

  uint64_t allocs = after.allocs - before.allocs, frees = after.frees - before.frees;
  uint64_t remote = after.remote_frees - before.remote_frees;
  uint64_t large = after.large_allocs - before.large_allocs;
  CHECK(allocs >= 2 * BLOCKS);
  CHECK(frees >= 2 * BLOCKS);
  CHECK(remote >= BLOCKS); /* half of each thread's blocks */
  CHECK(large >= 2 * (BLOCKS / LARGE_EVERY));
  CHECK(after.live_bytes == before.live_bytes);
  CHECK(after.superslabs_mapped > 0);
  hak_collect();
  if (fails) return 1;
  printf("use_api: allocs=%llu frees=%llu remote_frees=%llu large_allocs=%llu\n",
         (unsigned long long)allocs, (unsigned long long)frees, (unsigned long long)remote,
         (unsigned long long)large);
  return 0;
}
