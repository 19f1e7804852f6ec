/* unit_teardown: allocation and free after a thread's heap was torn down.
 *
 * Other libraries' TLS destructors run after hakmem's own thread-exit handler
 * (pthread keys run in creation order; hakmem creates its key at its first
 * allocation, so any key made later runs after it).  In such a destructor a
 * thread frees blocks it allocated while alive, allocates new ones (which
 * must outlive the thread), reallocs, and frees blocks of other threads.
 * Afterwards every block is still intact and usable from the main thread, and
 * the counters balance once everything is freed: nothing was lost. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "hakmem.h"
#include "support/check.h"

#define N 64
#define THREADS 32

static pthread_key_t late_key;
static void *outlive[THREADS][N];     /* allocated in the late destructor */
static unsigned char *mine[THREADS];   /* array of blocks the thread made alive */
static _Atomic int destructor_runs;
static _Atomic int thread_failures;  /* CHECK's counters are main-thread only */

static void fill(void *p, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++) ((unsigned char *)p)[i] = (unsigned char)(seed + i * 7);
}
static int same(const void *p, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char *)p)[i] != (unsigned char)(seed + i * 7)) return 0;
  return 1;
}

static void late_destructor(void *arg)
{
  long id = (long)(intptr_t)arg - 1;
  void **alive = (void **)mine[id];
  /* free what the thread made while alive (its heap is gone now) */
  for (int i = 0; i < N; i++) {
    if (!same(alive[i], 16 + (size_t)i * 24, (unsigned)(id * 131 + i))) atomic_fetch_add(&thread_failures, 1);
    hak_free(alive[i]);
  }
  hak_free(alive);
  /* allocate blocks that outlive the thread, one through realloc */
  for (int i = 0; i < N; i++) {
    size_t n = 8 + (size_t)i * 40;
    void *p = hak_malloc(n);
    if (p == NULL) {
      atomic_fetch_add(&thread_failures, 1);
      continue;
    }
    fill(p, n, (unsigned)(id * 7 + i));
    outlive[id][i] = p;
  }
  void *r = hak_realloc(outlive[id][0], 5000);
  if (r != NULL) outlive[id][0] = r;
  else atomic_fetch_add(&thread_failures, 1);
  atomic_fetch_add(&destructor_runs, 1);
}

static void *worker(void *arg)
{
  long id = (long)(intptr_t)arg - 1;
  void **alive = hak_malloc(N * sizeof *alive);
  for (int i = 0; i < N; i++) {
    size_t n = 16 + (size_t)i * 24;
    alive[i] = hak_malloc(n);
    fill(alive[i], n, (unsigned)(id * 131 + i));
  }
  mine[id] = (unsigned char *)alive;
  pthread_setspecific(late_key, arg);  /* runs after hakmem's own handler */
  return NULL;
}

int main(void)
{
  ts_check_begin("blocks freed and made in late TLS destructors");
  hak_free(hak_malloc(1));  /* hakmem's key exists before ours */
  pthread_key_create(&late_key, late_destructor);
  hak_stats_t s0;
  hak_stats_get(&s0);
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(i + 1));
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  CHECK(atomic_load(&thread_failures) == 0, "%d corrupted blocks or failed allocations in late destructors",
        atomic_load(&thread_failures));
  CHECK(atomic_load(&destructor_runs) == THREADS, "%d of %d late destructors ran", atomic_load(&destructor_runs), THREADS);

  for (int id = 0; id < THREADS; id++)
    for (int i = 0; i < N; i++) {
      size_t n = i == 0 ? 0 : 8 + (size_t)i * 40;
      if (i != 0) CHECK(same(outlive[id][i], n, (unsigned)(id * 7 + i)), "block of thread %d made after teardown corrupted", id);
      else CHECK(same(outlive[id][0], 8, (unsigned)(id * 7)), "realloc'd block of thread %d lost its contents", id);
      hak_free(outlive[id][i]);
    }
  hak_stats_t s1;
  hak_stats_get(&s1);
  CHECK(s1.allocs - s0.allocs == s1.frees - s0.frees, "allocs +%llu but frees +%llu",
        (unsigned long long)(s1.allocs - s0.allocs), (unsigned long long)(s1.frees - s0.frees));
  CHECK(s1.live_bytes == s0.live_bytes, "live bytes %llu, started at %llu", (unsigned long long)s1.live_bytes,
        (unsigned long long)s0.live_bytes);
  CHECK(s1.heaps_abandoned - s0.heaps_abandoned >= THREADS, "only %llu heaps abandoned",
        (unsigned long long)(s1.heaps_abandoned - s0.heaps_abandoned));
  return ts_check_finish("unit_teardown");
}
