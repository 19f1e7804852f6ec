/* unit_tcache.c: the thread cache (src/tcache.c; hak_heap_pop in
 * src/heap.h, free_local_fast in src/free.c), with the fast paths on (no
 * HAKMEM_STATS): which block malloc hands out after frees, of the thread's
 * own blocks and of another thread's.
 *
 * Each test runs in a thread of its own, so it starts with a fresh heap.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hakmem.h"
#include "support/check.h"

#define SIZE 64
#define MANY 3000   /* 64-byte blocks: more than one 64 KiB slab holds */
#define FEW 600     /* more than a class's base bound (64 blocks), less than a slab */

static void run(void *(*fn)(void *))
{
  pthread_t t;
  if (pthread_create(&t, NULL, fn, NULL) != 0 || pthread_join(t, NULL) != 0) {
    CHECK(0, "cannot run a thread");
  }
}

/* A block freed into a slab that is not the current one (full, by then) is
 * the next block malloc hands out: the cache is per class, whatever the
 * slab.  A per-slab list would hand out a block of the current slab. */
static void *cross_slab(void *arg)
{
  (void)arg;
  ts_check_section("cross_slab");
  void **p = malloc(MANY * sizeof *p);
  CHECK(p != NULL, "no memory for the test");
  if (p == NULL) return NULL;
  for (int i = 0; i < MANY; i++) p[i] = hak_malloc(SIZE);
  void *old = p[0];
  hak_free(old);
  void *q = hak_malloc(SIZE);
  CHECK(q == old, "malloc after a free into the first (full) slab gave %p, not the block just freed %p", q, old);
  p[0] = q;
  for (int i = 0; i < MANY; i++) hak_free(p[i]);
  free(p);
  return NULL;
}

/* After n frees, malloc hands the newest blocks back in reverse order of
 * their frees, but no more than the bound: a free that passes the bound
 * (64 blocks) doubles it, up to the larger of 8 times (512) and 128 KiB of
 * blocks (2048 of 64 bytes), and past that the cache keeps the newest half,
 * the older blocks go back to their slab.  So the run of blocks that come
 * back in exact reverse order is at least half the largest bound and at
 * most that bound; a fixed bound gives 32..64, an unbounded cache all n. */
static void lifo_run(size_t size, int n, int largest)
{
  void **b = malloc(2 * (size_t)n * sizeof *b), **q = b + n;
  CHECK(b != NULL, "no memory for the test");
  if (b == NULL) return;
  for (int i = 0; i < n; i++) b[i] = hak_malloc(size);
  for (int i = 0; i < n; i++) hak_free(b[i]);
  for (int i = 0; i < n; i++) q[i] = hak_malloc(size);
  int run = 0;
  while (run < n && q[run] == b[n - 1 - run]) run++;
  CHECK(run >= largest / 2 && run <= largest, "%zu-byte blocks: %d came back newest first (expected %d..%d)", size,
        run, largest / 2, largest);
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < i; j++) CHECK(q[i] != q[j], "block %p handed out twice", q[i]);
  }
  for (int i = 0; i < n; i++) hak_free(q[i]);
  free(b);
}

static void *bounded_lifo(void *arg)
{
  (void)arg;
  ts_check_section("bounded_lifo");
  lifo_run(512, 1200, 512);  /* 8 times the base bound */
  lifo_run(64, 2600, 2048); /* 128 KiB of small blocks */
  return NULL;
}

/* A flush hands a run of blocks of one slab back with one splice and one
 * count (tcache.c).  Blocks freed in the order they were allocated form
 * such runs; one in KEEP stays live, so a slab of 64-byte blocks keeps one
 * or two.  A run counted too many would give back a slab that still holds
 * a live block: the 4 KiB blocks carved next, filled, would overwrite it.
 * A block listed twice would be handed out twice. */
static void *run_splice(void *arg)
{
  (void)arg;
  ts_check_section("run_splice");
  enum { N = 4000, KEEP = 700, BIG = 4096, NBIG = 1024 };
  static uintptr_t *a[N];
  static unsigned char *c[NBIG];
  for (int i = 0; i < N; i++) {
    a[i] = hak_malloc(SIZE);
    CHECK(a[i] != NULL, "malloc(%d) failed", SIZE);
    if (a[i] == NULL) return NULL;
    a[i][0] = (uintptr_t)i;
  }
  for (int i = 0; i < N; i++)
    if (i % KEEP != 0) hak_free(a[i]);
  hak_collect();  /* the rest of the thread cache, flushed too */
  for (int i = 0; i < NBIG; i++) {
    c[i] = hak_malloc(BIG);
    if (c[i] != NULL) memset(c[i], 0xab, BIG);
  }
  for (int i = 0; i < N; i += KEEP)
    CHECK(a[i][0] == (uintptr_t)i, "the live block %p lost its tag (%#lx) to a later malloc", (void *)a[i],
          (unsigned long)a[i][0]);
  for (int i = 0; i < NBIG; i++) hak_free(c[i]);
  for (int i = 0; i < N; i += KEEP) hak_free(a[i]);
  /* Every slab empty now: all blocks come back, once each. */
  for (int i = 0; i < N; i++) {
    a[i] = hak_malloc(SIZE);
    if (a[i] != NULL) a[i][0] = (uintptr_t)i;
  }
  for (int i = 0; i < N; i++)
    CHECK(a[i] != NULL && a[i][0] == (uintptr_t)i, "block %p (malloc %d) handed out twice", (void *)a[i], i);
  for (int i = 0; i < N; i++) hak_free(a[i]);
  return NULL;
}

/* Blocks of another thread's heap: the freeing thread keeps one in its
 * cache when it allocates that class itself (its next malloc gets the block
 * it just freed, still in its CPU's cache), and not when it has never
 * allocated the class (a thread that only frees holds nothing back: the
 * block goes to its owner).  The owner stays alive meanwhile, so its slab
 * is another live heap's. */
static pthread_mutex_t owner_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t owner_cond = PTHREAD_COND_INITIALIZER;
static void *owner_blocks[3];
static int owner_state;  /* 0: starting, 1: blocks ready, 2: may exit; under owner_lock */

static void *owner(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&owner_lock);
  owner_blocks[0] = hak_malloc(SIZE);
  owner_blocks[1] = hak_malloc(SIZE);
  owner_blocks[2] = hak_malloc(SIZE);
  owner_state = 1;
  pthread_cond_broadcast(&owner_cond);
  while (owner_state != 2) pthread_cond_wait(&owner_cond, &owner_lock);
  pthread_mutex_unlock(&owner_lock);
  return NULL;
}

static void *foreign_free(void *arg)
{
  (void)arg;
  ts_check_section("foreign_free");
  /* Never allocated SIZE: the foreign block goes to its owner. */
  void *x = owner_blocks[0];
  hak_free(x);
  void *q = hak_malloc(SIZE);
  CHECK(q != NULL && q != x, "a thread that had not allocated the class got another heap's block %p back", x);
  /* Allocates SIZE now: the next foreign block comes straight back. */
  void *y = owner_blocks[1];
  hak_free(y);
  void *r = hak_malloc(SIZE);
  CHECK(r == y, "malloc after freeing another heap's block %p gave %p", y, r);
  hak_free(q);
  hak_free(r);
  return NULL;
}

/* A cache grown past its base bound takes no more blocks of other heaps:
 * held there, they kept their slabs from their owners (larson at 4
 * threads: 181 -> 151 M ops/s with 256 blocks of them).  The thread
 * allocates the class, so below the base bound the block would stay. */
static void *foreign_over_base(void *arg)
{
  (void)arg;
  ts_check_section("foreign_over_base");
  void *b[FEW];
  for (int i = 0; i < FEW; i++) b[i] = hak_malloc(SIZE);
  for (int i = 0; i < FEW; i++) hak_free(b[i]);   /* the cache grows past its base bound */
  void *y = owner_blocks[2];
  hak_free(y);
  void *r = hak_malloc(SIZE);
  CHECK(r != NULL && r != y, "a cache over its base bound kept another heap's block %p", y);
  hak_free(r);
  return NULL;
}

/* A unit that served one class and then another: the local free finds
 * the block's thread-cache list in the SuperSlab's header (unit_geom,
 * src/types.h), which must follow the unit to its new slab.  48-byte
 * blocks fill a unit; hak_collect gives them back (their slabs empty, the
 * SuperSlab to the cache); 1 KiB blocks are carved until one lands in
 * that unit; freed, it must come back to a 1 KiB malloc, and a 48-byte
 * malloc must not get memory inside it.  A stale list would file it under
 * 48 bytes: then both checks fail. */
static void *unit_reuse(void *arg)
{
  (void)arg;
  ts_check_section("unit_reuse");
  enum { NA = 2000, NB = 256 };
  static void *a[NA], *b[NB];
  for (int i = 0; i < NA; i++) a[i] = hak_malloc(48);
  uintptr_t unit = (uintptr_t)a[0] >> 16;
  for (int i = 0; i < NA; i++) hak_free(a[i]);
  hak_collect();
  int hit = -1, nb = 0;
  while (nb < NB && hit < 0) {
    b[nb] = hak_malloc(1024);
    if (b[nb] != NULL && (uintptr_t)b[nb] >> 16 == unit) hit = nb;
    nb++;
  }
  CHECK(hit >= 0, "no 1 KiB block of %d reused the unit the 48-byte blocks had (%#lx)", nb,
        (unsigned long)unit);
  if (hit >= 0) {
    void *old = b[hit];
    hak_free(old);
    void *q = hak_malloc(1024);
    CHECK(q == old, "a 1 KiB malloc after freeing the 1 KiB block %p gave %p", old, q);
    b[hit] = q;
    void *r = hak_malloc(48);
    CHECK(r == NULL || (uintptr_t)r + 48 <= (uintptr_t)q || (uintptr_t)r >= (uintptr_t)q + 1024,
          "a 48-byte malloc gave %p, inside the live 1 KiB block %p", r, q);
    hak_free(r);
  }
  for (int i = 0; i < nb; i++) hak_free(b[i]);
  return NULL;
}

int main(void)
{
  if (getenv("HAKMEM_STATS") != NULL || getenv("HAKMEM_SECURE") != NULL) {
    fprintf(stderr, "unit_tcache: the thread cache is off with HAKMEM_STATS or HAKMEM_SECURE: skipped\n");
    return 77;
  }
  run(cross_slab);
  run(bounded_lifo);
  run(unit_reuse);
  run(run_splice);
  pthread_t o;
  if (pthread_create(&o, NULL, owner, NULL) != 0) {
    CHECK(0, "cannot run a thread");
  } else {
    pthread_mutex_lock(&owner_lock);
    while (owner_state != 1) pthread_cond_wait(&owner_cond, &owner_lock);
    pthread_mutex_unlock(&owner_lock);
    run(foreign_free);
    run(foreign_over_base);
    pthread_mutex_lock(&owner_lock);
    owner_state = 2;
    pthread_cond_broadcast(&owner_cond);
    pthread_mutex_unlock(&owner_lock);
    pthread_join(o, NULL);
  }
  return ts_check_finish("unit_tcache");
}
