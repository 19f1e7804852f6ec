/* unit_xfer.c: the transfer cache (src/xfer.c), with the fast paths on (no
 * HAKMEM_STATS, which turns it off): a block of a class above 1 KiB that a
 * thread frees into another heap's slab goes to a slot that any thread's
 * next malloc of the class takes before its heap carves; hak_collect gives
 * the blocks back to their owner's slab.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "hakmem.h"
#include "support/check.h"

#define SIZE (20 * 1024)  /* the 20 KiB class: above 1 KiB, below the trailed ones */
#define N 8               /* fewer than the 16 slots of a class */

static void *blocks[N];

static int owned(const void *p)
{
  for (int i = 0; i < N; i++)
    if (blocks[i] == p) return 1;
  return 0;
}

static void *free_all(void *arg)
{
  (void)arg;
  for (int i = 0; i < N; i++) hak_free(blocks[i]);
  return NULL;
}

/* One malloc of SIZE by a new thread (whose heap has no slab of the class),
 * kept live: the address. */
static void *malloc_one(void *arg)
{
  *(void **)arg = hak_malloc(SIZE);
  return NULL;
}

static void run(void *(*fn)(void *), void *arg)
{
  pthread_t t;
  if (pthread_create(&t, NULL, fn, arg) != 0 || pthread_join(t, NULL) != 0) CHECK(0, "cannot run a thread");
}

static void fill(void)
{
  for (int i = 0; i < N; i++) {
    blocks[i] = hak_malloc(SIZE);
    REQUIRE(blocks[i] != NULL, "hak_malloc(%d)", SIZE);
    ((char *)blocks[i])[0] = (char)i;
  }
}

/* Main allocates, a second thread frees them all (main's heap stays
 * live), a third thread's malloc gets one of them instead of carving. */
static void test_reuse_across_heaps(void)
{
  ts_check_begin("a block freed into another live heap's slab is a third thread's next malloc");
  fill();
  run(free_all, NULL);
  void *got = NULL;
  run(malloc_one, &got);
  REQUIRE(got != NULL, "hak_malloc(%d) in a new thread", SIZE);
  CHECK(owned(got), "the new thread's malloc gave %p, none of the %d blocks another thread had just freed", got, N);
  hak_free(got);
}

/* After hak_collect the slots are empty: a new thread carves its own
 * block, and the freed blocks are back in main's slabs, where main's
 * mallocs find them. */
static void test_collect_drains(void)
{
  ts_check_begin("hak_collect gives the blocks back to their owner's slabs");
  hak_collect();  /* whatever the test before left */
  fill();
  run(free_all, NULL);
  hak_collect();
  void *got = NULL;
  run(malloc_one, &got);
  REQUIRE(got != NULL, "hak_malloc(%d) in a new thread", SIZE);
  CHECK(!owned(got), "after hak_collect a new thread's malloc still gave %p, a block of the transfer cache", got);
  hak_free(got);
  void *again[N];
  int back = 0;
  for (int i = 0; i < N; i++) {
    again[i] = hak_malloc(SIZE);
    REQUIRE(again[i] != NULL, "hak_malloc(%d)", SIZE);
    back += owned(again[i]);
  }
  CHECK(back >= N / 2, "only %d of %d blocks came back to their owner's mallocs after hak_collect", back, N);
  printf("   %d of %d blocks back to the owner after hak_collect\n", back, N);
  for (int i = 0; i < N; i++) hak_free(again[i]);
}

int main(void)
{
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (getenv("HAKMEM_STATS") != NULL || getenv("HAKMEM_SECURE") != NULL) {
    printf("SKIP: the transfer cache is off with HAKMEM_STATS or HAKMEM_SECURE\n");
    return 77;
  }
  test_reuse_across_heaps();
  test_collect_drains();
  return ts_check_finish("unit_xfer");
}
