/* unit_purge: the decay that gives free slab memory back (src/superslab.c,
 * hak_ss_purge), run with HAKMEM_PURGE_DELAY_MS=20 (ctest sets it).
 *
 * A slab's units that stay free go back to the OS within a few purge delays
 * even while the heap keeps freeing other slabs of the same SuperSlab: the
 * age that counts is the unit's own.  (The rule before was the SuperSlab's
 * last free: a busy SuperSlab never reached the delay, and its idle free
 * units stayed resident for as long as the program ran.)  And units freed a
 * moment ago are not purged at once: the next refill reuses them without
 * page faults.  And a heap whose new slab takes units its last sweep purged
 * (they fault in again) waits longer before its next sweeps.
 *
 * Layout, in the process's first SuperSlab (one thread, nothing else
 * allocated through hak_*): slab X of three 80 KiB blocks (4 units), then
 * the next slab of that class (live throughout: X's units never join a
 * free run with the units after it), then the cycling slabs of 192 KiB
 * blocks (6 units: never fit in X's 4).  Blocks above 64 KiB skip the thread
 * cache, so a free reaches its slab at once.  Residency is read with
 * mincore(2).
 *
 * The refault check needs the refill to come within one delay of the
 * sweep that purged X (a later sweep forgets what the last one purged).  A
 * host that stalls the thread longer breaks that premise, not the heap:
 * the scenario then runs again in a fresh child process (up to
 * STALL_RETRIES times), and fails if the premise held and the heap did not
 * count the refault.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hakmem.h"
#include "support/check.h"
#include "support/clock.h"
#include "support/rss.h"

#define KiB ((size_t)1024)
#define DELAY_MS 20
#define STALL_RETRIES 5
#define EXIT_STALLED 75  /* a child's scenario met a host stall: run it again */

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

/* Cycle slabs until [p, p + n) is no longer resident or `limit` ms have
 * passed; the ms it took. */
static uint64_t cycle_until_purged(const void *p, size_t n, uintptr_t lo, uintptr_t hi, uint64_t limit)
{
  uint64_t start = now_ms();
  while (now_ms() - start < limit && resident_pages(p, n) != 0) {
    cycle_slab(lo, hi);
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return now_ms() - start;
}

/* Right after the sweep that purged slab X's units: a new slab of X's class
 * takes them again (the cycling slabs' units are held, so X's are the first
 * free run).  Those pages fault in again: counted in refaulted_bytes, and
 * the heap's sweeps now come at least twice the delay apart, so X's units,
 * released again, stay resident for at least three delays (one to two
 * before: the test fails on a heap with a fixed delay), and still go back. */
static void refault_backoff(char **x, uintptr_t lo, uintptr_t hi, uint64_t purge_cycle_ms)
{
  ts_check_section("refault backoff");
  hak_stats_t before, after;
  hak_stats_get(&before);
  void *z[4], *y[6];
  for (int i = 0; i < 4; i++) {
    z[i] = hak_malloc(192 * KiB);
    REQUIRE(z[i] != NULL, "hak_malloc(192 KiB)");
  }
  /* y[0], y[1] fill x3's slab, y[2..4] a new slab, y[5] the one after
   * (current, so that the one before can be released when empty). */
  for (int i = 0; i < 6; i++) {
    y[i] = hak_malloc(80 * KiB - 24);
    REQUIRE(y[i] != NULL, "hak_malloc(80 KiB)");
  }
  hak_stats_get(&after);
  uint64_t since_purge = now_ms() - purge_cycle_ms;
  REQUIRE((uintptr_t)y[2] == (uintptr_t)x[0] && (uintptr_t)y[4] == (uintptr_t)x[2],
          "the new slab's blocks %p..%p are not slab X's %p..%p: the layout this test needs changed", y[2], y[4],
          (void *)x[0], (void *)x[2]);
  if (after.refaulted_bytes == before.refaulted_bytes && since_purge >= DELAY_MS) {
    fprintf(stderr, "unit_purge: the refill came %llu ms after the purging sweep's cycle began (more than a "
            "delay: the host stalled the thread): the scenario runs again\n", (unsigned long long)since_purge);
    exit(EXIT_STALLED);
  }
  CHECK(after.refaulted_bytes - before.refaulted_bytes == 4 * 64 * KiB,
        "refaulted_bytes grew by %llu, not by slab X's 4 purged units (256 KiB)",
        (unsigned long long)(after.refaulted_bytes - before.refaulted_bytes));
  for (int i = 2; i < 5; i++) memset(y[i], 2, 80 * KiB - 24);
  for (int i = 2; i < 5; i++) hak_free(y[i]);  /* X's slab empty again: released, its units dirty */
  for (int i = 0; i < 4; i++) hak_free(z[i]);
  uint64_t took = cycle_until_purged(x[1], 80 * KiB, lo, hi, 40 * DELAY_MS);
  CHECK(resident_pages(x[1], 80 * KiB) == 0, "slab X's pages still resident %llu ms after its second release",
        (unsigned long long)took);
  CHECK(took >= 3 * DELAY_MS, "slab X's units went back %llu ms after a sweep that purged them had to be undone: "
        "the sweeps did not wait longer (3 delays at least)", (unsigned long long)took);
  for (int i = 0; i < 6; i++)
    if (i < 2 || i == 5) hak_free(y[i]);
}

/* The whole scenario, in a process that has allocated nothing through
 * hak_* yet. */
static int scenario(void)
{
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
  uint64_t start = now_ms(), cycle_ms = start;
  size_t left = 20;
  int cycles = 0;
  while ((now_ms() - start < 20 * DELAY_MS || cycles < 2 * DELAY_MS) &&
         (left = resident_pages(x[1], 80 * KiB)) != 0) {
    cycle_ms = now_ms();  /* the cycle whose release may run the purging sweep */
    cycle_slab(lo, hi);
    cycles++;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  CHECK(left == 0, "%zu of slab X's 20 pages still resident after %d slab releases over %llu ms in its SuperSlab",
        left, cycles, (unsigned long long)(now_ms() - start));
  if (left == 0) refault_backoff(x, lo, hi, cycle_ms);
  hak_free(x3);
  return ts_check_finish("unit_purge");
}

int main(void)
{
  const char *d = getenv("HAKMEM_PURGE_DELAY_MS");
  if (d == NULL || atoi(d) != DELAY_MS || getenv("HAKMEM_STATS") != NULL) {
    fprintf(stderr, "unit_purge: needs HAKMEM_PURGE_DELAY_MS=%d and no HAKMEM_STATS (ctest sets them): skipped\n",
            DELAY_MS);
    return 77;
  }
  for (int run = 0; run < STALL_RETRIES; run++) {
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork failed");
    if (pid == 0) _exit(scenario());
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid failed");
    if (!WIFEXITED(status)) {
      fprintf(stderr, "unit_purge: the scenario's process died (status %#x)\n", (unsigned)status);
      return 1;
    }
    if (WEXITSTATUS(status) != EXIT_STALLED) return WEXITSTATUS(status);
  }
  fprintf(stderr, "unit_purge: the host stalled the scenario %d times in a row\n", STALL_RETRIES);
  return 1;
}
