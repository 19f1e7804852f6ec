/* unit_purge: the decay that gives free slab memory back (src/superslab.c,
 * hak_ss_purge), run with HAKMEM_PURGE_DELAY_MS=20 (ctest sets it).
 *
 * A slab's units that stay free go back to the OS within a few purge delays
 * even while the heap keeps freeing other slabs of the same SuperSlab: the
 * age that counts is the unit's own.  (The rule before was the SuperSlab's
 * last free: a busy SuperSlab never reached the delay, and its idle free
 * units stayed resident for as long as the program ran.)  And units freed a
 * moment ago are not purged at once: the next refill reuses them without
 * page faults.
 *
 * Layout, in the process's first SuperSlab (one thread, nothing else
 * allocated through hak_*): slab X of three 80 KiB blocks (4 units), then
 * the next slab of that class (live throughout: X's units never join a
 * free run with the units after it), then the cycling slabs of 192 KiB
 * blocks (6 units: never fit in X's 4).  Blocks above 64 KiB skip the thread
 * cache, so a free reaches its slab at once.  Residency is read with
 * mincore(2).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hakmem.h"
#include "support/check.h"
#include "support/clock.h"
#include "support/rss.h"

#define KiB ((size_t)1024)
#define DELAY_MS 20

static uint64_t now_ms(void)
{
  return (uint64_t)ts_now_ms();
}

/* Pages of [p, p + n) resident now. */
static size_t resident_pages(const void *p, size_t n)
{
  size_t r = ts_resident_pages(p, n);
  REQUIRE(r != (size_t)-1, "mincore failed");
  return r;
}

/* Allocate four 192 KiB blocks (slabs of two: the current slab's and a
 * new slab's) and free them: the slab that was current before is released
 * (an empty current slab would be kept), which is a purge point of the
 * heap.  Fails if a block lands in [lo, hi). */
static void cycle_slab(uintptr_t lo, uintptr_t hi)
{
  void *z[4];
  for (int i = 0; i < 4; i++) {
    z[i] = hak_malloc(192 * KiB);
    REQUIRE(z[i] != NULL, "hak_malloc(192 KiB)");
    memset(z[i], 0x5a, 4096);
    CHECK((uintptr_t)z[i] + 192 * KiB <= lo || (uintptr_t)z[i] >= hi,
          "the cycling slab's block %p reused slab X's units [%#lx, %#lx): the layout this test needs changed", z[i],
          (unsigned long)lo, (unsigned long)hi);
  }
  for (int i = 0; i < 4; i++) hak_free(z[i]);
}

int main(void)
{
  const char *d = getenv("HAKMEM_PURGE_DELAY_MS");
  if (d == NULL || atoi(d) != DELAY_MS || getenv("HAKMEM_STATS") != NULL) {
    fprintf(stderr, "unit_purge: needs HAKMEM_PURGE_DELAY_MS=%d and no HAKMEM_STATS (ctest sets them): skipped\n",
            DELAY_MS);
    return 77;
  }
  ts_check_section("unit age");
  /* X: the three 80 KiB blocks of a 4-unit slab; x3 starts the next slab
   * of the class, which becomes the current one (an empty current slab is
   * kept, not released) and keeps X's units out of any longer free run. */
  char *x[3];
  enum { X_ASK = 80 * KiB - 24 };  /* the 80 KiB class: its blocks keep 24 bytes for the trailer */
  for (int i = 0; i < 3; i++) {
    x[i] = hak_malloc(X_ASK);
    REQUIRE(x[i] != NULL, "hak_malloc(80 KiB)");
    memset(x[i], 1, X_ASK);
  }
  void *x3 = hak_malloc(X_ASK);
  REQUIRE(x3 != NULL, "hak_malloc(80 KiB)");
  uintptr_t lo = (uintptr_t)x[0], hi = (uintptr_t)x[2] + 80 * KiB;
  REQUIRE(hi - lo == 240 * KiB && ((uintptr_t)x3 < lo || (uintptr_t)x3 >= hi),
          "80 KiB blocks %p %p %p %p: not one slab of three and the next", x[0], x[1], x[2], x3);
  for (int i = 0; i < 3; i++) hak_free(x[i]);  /* X is empty: released, its units free and committed */
  CHECK(resident_pages(x[1], 80 * KiB) == 20, "slab X's pages went back at once (%zu of 20 resident): a refill "
        "right after would fault them in again", resident_pages(x[1], 80 * KiB));
  /* Keep the SuperSlab busy: a slab released every millisecond or so, for
   * up to 20 delays and at least 2 delays' worth of releases (so a thread
   * descheduled for long still gets its sweeps); X's units must go back
   * meanwhile (after 1-2 delays). */
  uint64_t start = now_ms();
  size_t left = 20;
  int cycles = 0;
  while ((now_ms() - start < 20 * DELAY_MS || cycles < 2 * DELAY_MS) &&
         (left = resident_pages(x[1], 80 * KiB)) != 0) {
    cycle_slab(lo, hi);
    cycles++;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  CHECK(left == 0, "%zu of slab X's 20 pages still resident after %d slab releases over %llu ms in its SuperSlab",
        left, cycles, (unsigned long long)(now_ms() - start));
  hak_free(x3);
  return ts_check_finish("unit_purge");
}
