/* unit_mallinfo_walk.c: mallinfo2's figures with the statistics off (no
 * HAKMEM_STATS), read while other threads allocate and free.  With the
 * block counts off, hak_stats_mallinfo2 (stats_report.c) walks every
 * SuperSlab in the registry and reads each slab's used count while its
 * owner changes it: under ThreadSanitizer (tsan/run.sh) this is the test
 * that shows those reads are atomics and nothing else is read unsafely.
 * Checks: uordblks never exceeds arena while the threads run; once they
 * have freed everything and exited, uordblks is back within 64 KiB of
 * where it started; and live blocks of the main thread show in it.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hakmem.h"
#include "support/check.h"

void hak_stats_mallinfo2(struct mallinfo2 *out);   /* src/stats_report.h */

#define THREADS 3
#define SLOTS 256
static _Atomic(void *) slot[SLOTS];   /* blocks handed between the threads */
static atomic_bool stop;

static void *worker(void *arg)
{
  uint32_t x = (uint32_t)(uintptr_t)arg * 2654435761u + 1;
  void *own[32] = { 0 };
  for (long i = 0; !atomic_load_explicit(&stop, memory_order_relaxed) || i < 20000; i++) {
    x = x * 1103515245u + 12345u;
    size_t n = 16 + (x >> 8) % (x % 64 == 0 ? 100000 : 1500);
    void *p = hak_malloc(n);
    memset(p, 1, n < 32 ? n : 32);
    if (x & 1) {
      hak_free(own[(x >> 3) % 32]);
      own[(x >> 3) % 32] = p;
    } else {
      hak_free(atomic_exchange(&slot[(x >> 3) % SLOTS], p));   /* often another thread's */
    }
  }
  for (int i = 0; i < 32; i++) hak_free(own[i]);
  return NULL;
}

int main(void)
{
  ts_check_begin("mallinfo2 with the statistics off, beside running threads");
  struct mallinfo2 m0, m;
  hak_free(hak_malloc(16));
  hak_stats_mallinfo2(&m0);
  pthread_t t[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(i + 1));
  for (int r = 0; r < 200; r++) {
    hak_stats_mallinfo2(&m);
    CHECK(m.uordblks <= m.arena && m.uordblks + m.fordblks == m.arena,
          "uordblks %zu, fordblks %zu, arena %zu", m.uordblks, m.fordblks, m.arena);
  }
  atomic_store(&stop, true);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < SLOTS; i++) hak_free(atomic_exchange(&slot[i], NULL));
  hak_collect();   /* the main thread's remote frees held back go to their slabs */
  hak_stats_mallinfo2(&m);
  CHECK(m.uordblks < m0.uordblks + (64u << 10), "uordblks %zu after everything was freed, %zu at the start",
        m.uordblks, m0.uordblks);
  static void *live[1000];
  for (int i = 0; i < 1000; i++) live[i] = hak_malloc(200);
  struct mallinfo2 m1;
  hak_stats_mallinfo2(&m1);
  CHECK(m1.uordblks >= m.uordblks + 1000 * 200, "1000 live blocks of 200 bytes: uordblks %zu -> %zu",
        m.uordblks, m1.uordblks);
  for (int i = 0; i < 1000; i++) hak_free(live[i]);
  return ts_check_finish("unit_mallinfo_walk");
}
