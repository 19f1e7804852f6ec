/* oom: a program that runs itself out of memory under LD_PRELOAD=libhakmem.so
 * with setrlimit(RLIMIT_AS), as a real program would meet it.
 *
 * Below a limit of its size + 32 MiB it allocates small, medium and large
 * blocks until malloc fails; each NULL must come with ENOMEM; calloc,
 * realloc growth, posix_memalign, aligned_alloc fail the same way
 * (posix_memalign returns ENOMEM); every block allocated before is intact.
 * It maps the address space left, page by page, before those calls and
 * the frees: with not one page to spare, the realloc of a large block is
 * hakmem's first RCU read-side section, whose reader registration in
 * liburcu-bp must not need a mapping then (it would abort).  Then it frees everything, raises the limit again and
 * allocates successfully.  Prints "oom: ok ..." and exits 0, or prints
 * FAIL lines and exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "support/report.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define MAX_BLOCKS 200000

static void *blk[MAX_BLOCKS];
static size_t len[MAX_BLOCKS];
static size_t nblk;

static unsigned char pat(size_t b, size_t i) { return (unsigned char)(b * 131 + i * 7 + (i >> 12)); }

static void fill(size_t b)
{
  unsigned char *p = blk[b];
  for (size_t i = 0; i < len[b]; i++) p[i] = pat(b, i);
}

static size_t bad_blocks(void)
{
  size_t bad = 0;
  for (size_t b = 0; b < nblk; b++) {
    const unsigned char *p = blk[b];
    for (size_t i = 0; i < len[b]; i++)
      if (p[i] != pat(b, i)) { bad++; break; }
  }
  return bad;
}

/* malloc size(i) until NULL or budget bytes; the number of blocks. */
static size_t until_null(size_t (*size)(size_t), const char *what, size_t budget)
{
  size_t got = 0, total = 0;
  for (size_t i = 0; nblk < MAX_BLOCKS && total < budget; i++) {
    size_t n = size(i);
    errno = 0;
    void *p = malloc(n);
    if (p == NULL) {
      if (errno != ENOMEM) FAIL("%s: malloc(%zu) NULL with errno %d", what, n, errno);
      return got;
    }
    blk[nblk] = p;
    len[nblk] = n;
    fill(nblk++);
    got++;
    total += n;
  }
  if (budget == SIZE_MAX) FAIL("%s: never ran out", what);
  return got;
}

static size_t small(size_t i) { return 16 + (i * 24) % 1000; }
static size_t medium(size_t i) { return 2 * KiB + (i * 7919) % (250 * KiB); }
static size_t large(size_t i) { return 300 * KiB + (i * 611953) % (3 * MiB); }

int main(void)
{
  /* stdio's buffers before the limit. */
  printf("oom: start\n");
  fflush(stdout);
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f == NULL || fscanf(f, "%lu", &pages) != 1) { fprintf(stderr, "FAIL: /proc/self/statm\n"); return 1; }
  fclose(f);
  struct rlimit old, lim;
  if (getrlimit(RLIMIT_AS, &old) != 0) { perror("getrlimit"); return 1; }
  lim = old;
  lim.rlim_cur = pages * (size_t)sysconf(_SC_PAGESIZE) + 32 * MiB;
  if (setrlimit(RLIMIT_AS, &lim) != 0) { perror("setrlimit"); return 1; }

  /* 8 MiB of small and of medium blocks, then large ones until malloc
   * fails, then small and medium ones until it fails. */
  size_t ns = until_null(small, "small", 8 * MiB);
  size_t nm = until_null(medium, "medium", 8 * MiB);
  size_t nl = until_null(large, "large", SIZE_MAX);
  size_t lb = ns + nm;   /* the first large block */
  nm += until_null(medium, "medium", SIZE_MAX);
  ns += until_null(small, "small", SIZE_MAX);
  /* Not a page left from here on. */
  static void *page[4096];
  size_t npages = 0;
  while (npages < 4096) {
    void *pg = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pg == MAP_FAILED) break;
    page[npages++] = pg;
  }
  if (npages == 4096) FAIL("4096 pages mapped beyond the point malloc failed");
  errno = 0;
  void *c = calloc(1, 8 * MiB);
  if (c != NULL || errno != ENOMEM) FAIL("calloc(8 MiB) out of memory: %p errno %d", c, errno);
  void *pm = (void *)1;
  int rc = posix_memalign(&pm, 4096, 8 * MiB);
  if (rc != ENOMEM || pm != (void *)1) FAIL("posix_memalign out of memory: %d %p", rc, pm);
  errno = 0;
  void *a = aligned_alloc(4 * MiB, 8 * MiB);
  if (a != NULL || errno != ENOMEM) FAIL("aligned_alloc out of memory: %p errno %d", a, errno);
  /* realloc growth of the first large block: NULL, the block unchanged */
  if (nl > 0) {
    errno = 0;
    void *r = realloc(blk[lb], 64 * MiB);
    if (r != NULL || errno != ENOMEM) FAIL("realloc(64 MiB) out of memory: %p errno %d", r, errno);
  }
  size_t bad = bad_blocks();
  if (bad) FAIL("%zu blocks changed after running out of memory", bad);
  if (ns == 0 || nm == 0 || nl == 0) FAIL("too little allocated before running out: %zu/%zu/%zu", ns, nm, nl);
  /* Free everything, newest first, still without a page to spare. */
  for (size_t b = nblk; b-- > 0;) free(blk[b]);
  nblk = 0;
  for (size_t i = 0; i < npages; i++) munmap(page[i], 4096);
  if (setrlimit(RLIMIT_AS, &old) != 0) { perror("setrlimit back"); return 1; }
  /* Memory is back. */
  for (size_t i = 0; i < 64; i++) {
    size_t n = i % 3 == 0 ? small(i) : i % 3 == 1 ? medium(i) : 4 * large(i);
    blk[nblk] = malloc(n);
    len[nblk] = n;
    if (blk[nblk] == NULL) { FAIL("malloc(%zu) after the limit was raised", n); continue; }
    fill(nblk++);
  }
  void *g = realloc(blk[2], 64 * MiB);
  if (g == NULL) FAIL("realloc(64 MiB) after the limit was raised");
  else { blk[2] = g; for (size_t i = 0; i < len[2]; i++) if (((unsigned char *)g)[i] != pat(2, i)) { FAIL("realloc lost byte %zu", i); break; } len[2] = 0; }
  if (bad_blocks()) FAIL("blocks changed after recovery");
  for (size_t b = 0; b < nblk; b++) free(blk[b]);
  printf("oom: %s small=%zu medium=%zu large=%zu, then %zu pages to the limit\n", ts_failures() ? "FAILED" : "ok",
         ns, nm, nl, npages);
  return ts_failures() ? 1 : 0;
}
