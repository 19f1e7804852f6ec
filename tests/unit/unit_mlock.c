/* unit_mlock: calloc returns zeroes in a process whose memory is locked.
 *
 * hakmem gives free pages back with madvise(MADV_DONTNEED) (src/os.c,
 * hak_os_purge) and counts them as zero from then on: calloc of a reused
 * large mapping zeroes only the part recorded as dirty (src/large.c,
 * dirty_from).  MADV_DONTNEED fails with EINVAL on locked pages, so after
 * mlockall(MCL_CURRENT | MCL_FUTURE) (real-time programs, programs keeping
 * secrets out of swap) a purge leaves the old bytes in place, and a calloc
 * that trusts it returns them.
 *
 * The program locks its memory (it exits 77, skipped, if it may not lock
 * enough even after raising RLIMIT_MEMLOCK, and under a sanitizer, whose
 * terabytes of shadow cannot be locked).  Then, in rounds, it writes a
 * non-zero byte into every byte of blocks, frees them and callocs the same
 * sizes, checking that every byte is zero, after each way hakmem purges:
 *   - hak_collect between the frees and the callocs (the heap's free
 *     SuperSlab units, the large cache, retired mappings; the cached large
 *     mappings are unmapped, so the callocs get fresh ones);
 *   - none: freed large blocks of 300 KiB to 9 MiB put more in the large
 *     cache than it keeps committed with nothing live (a quarter of
 *     HAKMEM_LARGE_CACHE_KB), so it purges its older entries, and the
 *     callocs reuse them;
 *   - a 9 MiB mapping reused for a 1 MiB calloc (the pages below that
 *     block go back, or to the page bank), then for 9 MiB again;
 *   - large blocks grown and shrunk by realloc (a shrink purges the tail)
 *     before the free.
 * The first two also run sizes of the size classes (4 KiB to 200 KiB),
 * whose blocks calloc zeroes whatever their pages held (src/alloc.c): the
 * check is that this stays so.  The first round of the cache phase finds
 * the cache cold (freed mappings are discarded, not reused); the later ones
 * reuse.  ctest runs the program with the default options and with
 * HAKMEM_PURGE_DELAY_MS=0, under which free pages are purged at the first
 * chance instead of after 50 ms.
 *
 * A failure names the phase, the size, the round and the first non-zero
 * byte: the byte written in that round (0x80 | (37 * round + 1)) or, say,
 * the canary word of a block the mapping held before.  Peak locked memory
 * is about 200 MiB; the run takes about a second.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "hakmem.h"
#include "support/check.h"
#include "support/fill.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define ROUNDS 4
#define COUNT(a) (sizeof(a) / sizeof *(a))

static const size_t large_sizes[] = { 300 * KiB, 1 * MiB, 3 * MiB, 5 * MiB, 9 * MiB };
static const size_t small_sizes[] = { 4 * KiB, 16 * KiB, 64 * KiB, 200 * KiB };

/* ------------------------------------------------------------------ setup */

/* What the program may lock: more than it locks at its peak (about 200 MiB,
 * of which 128 MiB are the large blocks' page bank, src/large.c, mapped in
 * one piece: under MCL_FUTURE every new mapping is locked whole). */
#define LOCK_NEEDED ((rlim_t)512 << 20)
#define CAP_IPC_LOCK_BIT 14

/* Whether this process's effective capabilities include CAP_IPC_LOCK, which
 * lifts RLIMIT_MEMLOCK. */
static bool has_cap_ipc_lock(void)
{
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return false;
  char line[256];
  unsigned long long caps = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "CapEff: %llx", &caps) == 1) break;
  fclose(f);
  return (caps >> CAP_IPC_LOCK_BIT) & 1;
}

/* Whether the process may lock LOCK_NEEDED bytes: with less, a mapping
 * hakmem makes later fails (EAGAIN) and the test would fail for want of
 * memory, not for what it checks. */
static bool may_lock_enough(void)
{
  struct rlimit lim;
  if (getrlimit(RLIMIT_MEMLOCK, &lim) == 0 && (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= LOCK_NEEDED))
    return true;
  return has_cap_ipc_lock();
}

/* Lock all memory, now and future (raising RLIMIT_MEMLOCK if need be);
 * false, with the reason printed, if the process may not. */
static bool lock_memory(void)
{
  int rc = mlockall(MCL_CURRENT | MCL_FUTURE), first = errno;
  if (rc != 0 || !may_lock_enough()) {
    struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
    (void)setrlimit(RLIMIT_MEMLOCK, &unlimited);
    if (rc != 0) rc = mlockall(MCL_CURRENT | MCL_FUTURE);
  }
  if (rc != 0) {
    printf("SKIP: mlockall(MCL_CURRENT | MCL_FUTURE): %s (needs CAP_IPC_LOCK or a higher RLIMIT_MEMLOCK)\n",
           strerror(first));
    return false;
  }
  if (!may_lock_enough()) {
    munlockall();
    printf("SKIP: RLIMIT_MEMLOCK is below the %llu MiB this test may lock, and no CAP_IPC_LOCK\n",
           (unsigned long long)(LOCK_NEEDED >> 20));
    return false;
  }
  return true;
}

/* What the kernel does with MADV_DONTNEED on a locked page (a note for the
 * reader of a failure, not a check: hakmem must work either way). */
static void note_kernel(void)
{
  size_t n = 4096;
  unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  p[0] = 0x5a;
  int rc = madvise(p, n, MADV_DONTNEED);
  printf("note: madvise(MADV_DONTNEED) on a locked page: %s; the page then reads %#x\n",
         rc == 0 ? "succeeds" : strerror(errno), p[0]);
  munmap(p, n);
}

/* --------------------------------------------------------------- helpers */

/* The byte written into round's blocks: never zero. */
static unsigned char pattern(int round) { return (unsigned char)(0x80 | (round * 37 + 1)); }

static void *dirty_block(size_t n, int round)
{
  void *p = hak_malloc(n);
  REQUIRE(p != NULL, "hak_malloc(%zu)", n);
  memset(p, pattern(round), n);
  return p;
}

/* calloc n bytes and check every one of them is zero. */
static void *calloc_checked(const char *phase, size_t n, int round)
{
  unsigned char *p = hak_calloc(1, n);
  REQUIRE(p != NULL, "hak_calloc(1, %zu)", n);
  size_t at = ts_first_nonzero(p, n);
  CHECK(at == n, "%s: hak_calloc(1, %zu) in round %d: byte %zu is %#x, not zero", phase, n, round, at,
        at < n ? p[at] : 0);
  return p;
}

/* Dirty a block of each size and free them; if collect, hak_collect; then
 * calloc each size, check it and free it.  Largest first: in this order the
 * cache phase maps no page bank (src/large.c: 128 MiB, which MCL_FUTURE
 * locks whole; test_smaller maps it), which keeps the peak near 200 MiB. */
static void dirty_then_calloc(const char *phase, const size_t *sizes, size_t n, int round, bool collect)
{
  void *p[8];
  REQUIRE(n <= COUNT(p), "%zu sizes", n);
  for (size_t i = n; i-- > 0;) p[i] = dirty_block(sizes[i], round);
  for (size_t i = 0; i < n; i++) hak_free(p[i]);
  if (collect) hak_collect();
  for (size_t i = n; i-- > 0;) p[i] = calloc_checked(phase, sizes[i], round);
  for (size_t i = 0; i < n; i++) hak_free(p[i]);
}

/* ---------------------------------------------------------------- phases */

/* Every size, the purges of hak_collect between the free and the calloc. */
static void test_collect(void)
{
  ts_check_begin("calloc after hak_collect");
  for (int r = 0; r < ROUNDS; r++) {
    dirty_then_calloc("collect, large", large_sizes, COUNT(large_sizes), r, true);
    dirty_then_calloc("collect, small", small_sizes, COUNT(small_sizes), r, true);
  }
}

/* No hak_collect: the large cache purges what it cannot keep, and the
 * callocs reuse those mappings. */
static void test_cache(void)
{
  ts_check_begin("calloc of large mappings the cache purged");
  hak_collect();
  for (int r = 0; r < ROUNDS; r++) {
    dirty_then_calloc("cache, large", large_sizes, COUNT(large_sizes), r, false);
    dirty_then_calloc("cache, small", small_sizes, COUNT(small_sizes), r, false);
  }
}

/* A big mapping reused for a smaller block gives back the pages below it;
 * the big size reusing it again must not find them. */
static void test_smaller(void)
{
  ts_check_begin("calloc of a big mapping reused for a smaller block");
  hak_collect();
  for (int r = 0; r < ROUNDS; r++) {
    hak_free(dirty_block(9 * MiB, r));
    void *s = calloc_checked("smaller, 1 MiB in 9 MiB", 1 * MiB, r);
    memset(s, pattern(r), 1 * MiB);
    hak_free(s);
    hak_free(calloc_checked("smaller, 9 MiB again", 9 * MiB, r));
  }
}

/* realloc grows (in place or by moving the pages) and shrinks (the tail is
 * purged) large blocks before they are freed; every other round, hak_collect
 * before the callocs. */
static void test_realloc(void)
{
  static const size_t steps[] = { 1 * MiB, 6 * MiB, 300 * KiB, 3 * MiB, 600 * KiB };
  ts_check_begin("calloc after realloc growth and shrink");
  hak_collect();
  for (int r = 0; r < ROUNDS; r++) {
    unsigned char *p = dirty_block(steps[0], r);
    for (size_t i = 1; i < COUNT(steps); i++) {
      p = hak_realloc(p, steps[i]);
      REQUIRE(p != NULL, "hak_realloc(%zu)", steps[i]);
      memset(p, pattern(r), steps[i]);
    }
    hak_free(p);
    if (r % 2 == 1) hak_collect();
    for (size_t i = 0; i < COUNT(steps); i++) hak_free(calloc_checked("realloc", steps[i], r));
  }
}

int main(void)
{
  if (SANITIZED) {
    printf("SKIP: a sanitizer's shadow memory cannot be locked\n");
    return 77;
  }
  if (!lock_memory()) return 77;
  note_kernel();
  test_collect();
  test_cache();
  test_smaller();
  test_realloc();
  return ts_check_finish("unit_mlock");
}
