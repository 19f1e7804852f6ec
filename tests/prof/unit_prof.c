/* unit_prof: the heap profiler through the prefixed API (ctest runs it with
 * HAKMEM_PROF=1 HAKMEM_PROF_SAMPLE=4096; the TSan suite too).
 *
 *   1. one thread keeps 8 MiB of 1 KiB blocks (malloc, calloc, aligned):
 *      hak_prof_dump's profile estimates them within 20%
 *   2. producers hand blocks to consumers, which free them (remote frees),
 *      while another thread writes profiles: the remote file estimates them
 *      within 20%, the live figures do not move
 *   3. a fork child keeps 8 MiB more and writes its own profile: the
 *      parent's blocks and its own, within 20%
 *   4. calloc of sampled blocks (reused slots) zeroes, realloc keeps the
 *      bytes, the usable size covers the request
 * 8 MiB at a 4 KiB mean interval is about 2048 samples: a standard error
 * of 2.2%. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hakmem.h"
#include "support/check.h"

#define BLOCK 1024
#define KEPT ((8u << 20) / BLOCK)
#define PAIRS 2
#define PASSED_PER_PAIR ((8u << 20) / BLOCK / PAIRS)
#define QUEUE 256

typedef struct { uint64_t live_blocks, live_bytes, alloc_blocks, alloc_bytes; } header_t;

static char dir[64];

static bool read_header(const char *path, header_t *h)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) return false;
  unsigned long a, b, c, d;
  int n = fscanf(f, "heap profile: %lu: %lu [%lu: %lu] @ heapprofile", &a, &b, &c, &d);
  fclose(f);
  *h = (header_t){ a, b, c, d };
  return n == 4;
}

static bool near(uint64_t got, uint64_t want) { return got > want * 0.8 && got < want * 1.2; }

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void check_dump(const char *name, uint64_t live, uint64_t remote)
{
  char p[128], r[160];
  path_of(p, sizeof p, name);
  snprintf(r, sizeof r, "%s.remote", p);
  header_t h, hr;
  REQUIRE(read_header(p, &h), "%s: no heap profile header", p);
  REQUIRE(read_header(r, &hr), "%s: no heap profile header", r);
  CHECK(near(h.live_bytes, live), "%s: live bytes %lu, truth %lu", name, (unsigned long)h.live_bytes, (unsigned long)live);
  CHECK(near(h.live_blocks, live / BLOCK), "%s: live blocks %lu, truth %lu", name, (unsigned long)h.live_blocks,
        (unsigned long)(live / BLOCK));
  CHECK(h.alloc_bytes >= h.live_bytes, "%s: allocated %lu < live %lu", name, (unsigned long)h.alloc_bytes,
        (unsigned long)h.live_bytes);
  if (remote == 0) CHECK(hr.live_bytes == 0, "%s: remote bytes %lu, truth 0", name, (unsigned long)hr.live_bytes);
  else CHECK(near(hr.live_bytes, remote), "%s: remote bytes %lu, truth %lu", name, (unsigned long)hr.live_bytes,
             (unsigned long)remote);
}

static void dump(const char *name)
{
  char p[128];
  path_of(p, sizeof p, name);
  REQUIRE(hak_prof_dump(p) == 0, "hak_prof_dump(%s): %s", p, strerror(errno));
}

/* ------------------------------------------------------------ 1. kept blocks */

static void *kept[2][KEPT];

static void keep(void **v)
{
  for (unsigned i = 0; i < KEPT; i++) {
    if (i % 3 == 0) v[i] = hak_malloc(BLOCK);
    else if (i % 3 == 1) v[i] = hak_calloc(1, BLOCK);
    else v[i] = hak_aligned_alloc(64, BLOCK);
    REQUIRE(v[i] != NULL, "allocation failed");
  }
}

/* ------------------------------------------------- 2. producers, consumers */

typedef struct {
  void *slot[QUEUE];
  _Atomic(unsigned) head, tail;   /* one producer, one consumer */
} queue_t;

static queue_t queues[PAIRS];
static _Atomic(bool) done;

static void *producer(void *arg)
{
  queue_t *q = arg;
  for (unsigned i = 0; i < PASSED_PER_PAIR; i++) {
    void *p = hak_malloc(BLOCK);
    unsigned t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    while (t - atomic_load_explicit(&q->head, memory_order_acquire) == QUEUE) sched_yield();
    q->slot[t % QUEUE] = p;
    atomic_store_explicit(&q->tail, t + 1, memory_order_release);
  }
  return NULL;
}

static void *consumer(void *arg)
{
  queue_t *q = arg;
  for (unsigned i = 0; i < PASSED_PER_PAIR; i++) {
    unsigned h = atomic_load_explicit(&q->head, memory_order_relaxed);
    while (atomic_load_explicit(&q->tail, memory_order_acquire) == h) sched_yield();
    hak_free(q->slot[h % QUEUE]);
    atomic_store_explicit(&q->head, h + 1, memory_order_release);
  }
  return NULL;
}

static void *dumper(void *arg)
{
  (void)arg;
  while (!atomic_load_explicit(&done, memory_order_acquire)) dump("during.heap");
  return NULL;
}

int main(void)
{
  ts_check_begin("unit_prof");
  snprintf(dir, sizeof dir, "/tmp/unit_prof.XXXXXX");
  REQUIRE(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));

  ts_check_section("kept blocks");
  keep(kept[0]);
  dump("kept.heap");
  check_dump("kept.heap", KEPT * BLOCK, 0);

  ts_check_section("remote frees while profiles are written");
  pthread_t p[PAIRS], c[PAIRS], d;
  pthread_create(&d, NULL, dumper, NULL);
  for (int i = 0; i < PAIRS; i++) {
    pthread_create(&c[i], NULL, consumer, &queues[i]);
    pthread_create(&p[i], NULL, producer, &queues[i]);
  }
  for (int i = 0; i < PAIRS; i++) {
    pthread_join(p[i], NULL);
    pthread_join(c[i], NULL);
  }
  atomic_store_explicit(&done, true, memory_order_release);
  pthread_join(d, NULL);
  dump("remote.heap");
  check_dump("remote.heap", KEPT * BLOCK, PAIRS * PASSED_PER_PAIR * BLOCK);

  ts_check_section("fork child");
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    keep(kept[1]);
    char path[128];
    path_of(path, sizeof path, "child.heap");
    _exit(hak_prof_dump(path) == 0 ? 0 : 1);
  }
  int st;
  REQUIRE(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed");
  check_dump("child.heap", 2 * KEPT * BLOCK, PAIRS * PASSED_PER_PAIR * BLOCK);

  /* About one block in four is sampled: a sampled block's slot is reused
   * by the next sample, after this loop wrote it. */
  ts_check_section("calloc, realloc and usable size of sampled blocks");
  for (unsigned i = 0; i < 4096; i++) {
    unsigned char *z = hak_calloc(1, BLOCK);
    REQUIRE(z != NULL, "calloc failed");
    for (unsigned j = 0; j < BLOCK; j++) REQUIRE(z[j] == 0, "calloc: byte %u of block %u is %u", j, i, z[j]);
    REQUIRE(hak_malloc_usable_size(z) >= BLOCK, "usable size %zu", hak_malloc_usable_size(z));
    memset(z, (int)(i & 0xff), BLOCK);
    z = hak_realloc(z, 3 * BLOCK);
    REQUIRE(z != NULL, "realloc failed");
    for (unsigned j = 0; j < BLOCK; j++) REQUIRE(z[j] == (i & 0xff), "realloc lost byte %u of block %u", j, i);
    hak_free(z);
  }

  for (unsigned i = 0; i < KEPT; i++) hak_free(kept[0][i]);
  dump("freed.heap");
  header_t h;
  char path[128];
  path_of(path, sizeof path, "freed.heap");
  REQUIRE(read_header(path, &h), "no header");
  CHECK(h.live_bytes < KEPT * BLOCK / 50, "after the frees: %lu bytes live", (unsigned long)h.live_bytes);

  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "unit_prof: could not remove %s\n", dir);
  return ts_check_finish("unit_prof");
}
