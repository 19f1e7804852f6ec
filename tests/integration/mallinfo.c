/* mallinfo.c - glibc's heap-inspection calls report hakmem's numbers under
 * LD_PRELOAD=libhakmem.so (with HAKMEM_STATS=1: block counts on).
 *
 *   mallinfo XMLFILE
 *
 * Checks in process (exit 1 on a failure): mallinfo2's arena is whole
 * SuperSlabs (2 MiB each), uordblks grows by at least the bytes of N live
 * blocks and falls back when they are freed, a large block shows in
 * hblks/hblkhd, mallinfo agrees with mallinfo2, malloc_info rejects
 * options != 0.  Writes malloc_info's XML (taken while the N blocks are
 * live) to XMLFILE and calls malloc_stats (stderr), for the script to check.
 * None of these hold under glibc's malloc: its arena is not made of 2 MiB
 * SuperSlabs and its XML has no allocator="hakmem".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1000
#define SIZE 100       /* a 112-byte size class */
#define BIG (8u << 20)
#define SS (2u << 20)

static int failures;
#define EXPECT(cond, ...)                                   \
  do {                                                      \
    if (!(cond)) {                                          \
      fprintf(stderr, "FAIL: %s: ", #cond);                 \
      fprintf(stderr, __VA_ARGS__);                         \
      fputc('\n', stderr);                                  \
      failures++;                                           \
    }                                                       \
  } while (0)

int main(int argc, char **argv)
{
  if (argc != 2) { fprintf(stderr, "usage: mallinfo XMLFILE\n"); return 2; }
  struct mallinfo2 m0 = mallinfo2();
  static void *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = malloc(SIZE);
    if (p[i] == NULL) return 2;
    memset(p[i], i, SIZE);
  }
  void *big = malloc(BIG);
  if (big == NULL) return 2;
  memset(big, 1, BIG);
  struct mallinfo2 m1 = mallinfo2();
  printf("mallinfo2 before: arena=%zu uordblks=%zu fordblks=%zu hblks=%zu hblkhd=%zu ordblks=%zu keepcost=%zu\n",
         m0.arena, m0.uordblks, m0.fordblks, m0.hblks, m0.hblkhd, m0.ordblks, m0.keepcost);
  printf("mallinfo2 live:   arena=%zu uordblks=%zu fordblks=%zu hblks=%zu hblkhd=%zu ordblks=%zu keepcost=%zu\n",
         m1.arena, m1.uordblks, m1.fordblks, m1.hblks, m1.hblkhd, m1.ordblks, m1.keepcost);
  EXPECT(m1.arena > 0 && m1.arena % SS == 0, "arena=%zu: not whole 2 MiB SuperSlabs", m1.arena);
  EXPECT(m1.uordblks >= m0.uordblks + (size_t)N * SIZE, "uordblks %zu -> %zu after %d x %d bytes", m0.uordblks,
         m1.uordblks, N, SIZE);
  EXPECT(m1.uordblks + m1.fordblks == m1.arena, "uordblks %zu + fordblks %zu != arena %zu", m1.uordblks,
         m1.fordblks, m1.arena);
  EXPECT(m1.hblks >= m0.hblks + 1 && m1.hblkhd >= m0.hblkhd + BIG, "hblks %zu -> %zu, hblkhd %zu -> %zu", m0.hblks,
         m1.hblks, m0.hblkhd, m1.hblkhd);
  EXPECT(m1.ordblks >= 1, "ordblks (slabs in use) %zu", m1.ordblks);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  struct mallinfo mi = mallinfo();
#pragma GCC diagnostic pop
  EXPECT((size_t)mi.arena == m1.arena && (size_t)mi.hblkhd == m1.hblkhd, "mallinfo arena=%d hblkhd=%d", mi.arena,
         mi.hblkhd);

  FILE *f = fopen(argv[1], "w");
  if (f == NULL) { perror(argv[1]); return 2; }
  EXPECT(malloc_info(0, f) == 0, "malloc_info(0) failed");
  fclose(f);
  EXPECT(malloc_info(1, stdout) == EINVAL, "malloc_info(1) accepted");
  malloc_stats();

  for (int i = 0; i < N; i++) free(p[i]);
  free(big);
  struct mallinfo2 m2 = mallinfo2();
  printf("mallinfo2 freed:  arena=%zu uordblks=%zu hblks=%zu hblkhd=%zu keepcost=%zu\n", m2.arena, m2.uordblks,
         m2.hblks, m2.hblkhd, m2.keepcost);
  EXPECT(m2.uordblks + (size_t)N * SIZE <= m1.uordblks, "uordblks %zu -> %zu after freeing %d x %d bytes",
         m1.uordblks, m2.uordblks, N, SIZE);
  EXPECT(m2.hblks + 1 == m1.hblks, "hblks %zu -> %zu after freeing the large block", m1.hblks, m2.hblks);
  printf("expected_live_blocks=%d expected_size=%d\n", N, SIZE);
  return failures != 0;
}
