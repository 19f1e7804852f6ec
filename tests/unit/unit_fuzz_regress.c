/* unit_fuzz_regress: what tests/fuzz/fuzz_api found, as plain calls of the hak_*
 * API (each section names the bug and its fix).
 *
 *   zero-size, 2 MiB+ alignment: posix_memalign / aligned_alloc /
 *     memalign(align >= 2 MiB, 0) returned base + map_size, one byte past its
 *     own mapping and so outside the registry: malloc_usable_size asked the
 *     system allocator about it and free handed it to the system allocator
 *     (a crash; the mapping leaked).  Fix: src/large.c, a zero-byte large
 *     block has a byte inside its mapping. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "hakmem.h"
#include "support/check.h"
#include "support/hak.h"

#define MiB ((size_t)1 << 20)

static void zero_size_big_alignment(void)
{
  ts_check_begin("zero-byte blocks aligned to 2 MiB and more");
  hak_stats_t before = ts_stats_now();
  for (size_t align = 4096; align <= 32 * MiB; align <<= 1) {
    void *p = NULL;
    int rc = hak_posix_memalign(&p, align, 0);
    CHECK(rc == 0 && p != NULL && ts_aligned_to(p, align), "posix_memalign(%zu, 0): %d %p", align, rc, p);
    void *q = hak_aligned_alloc(align, 0);
    CHECK(q != NULL && ts_aligned_to(q, align), "aligned_alloc(%zu, 0): %p", align, q);
    void *r = hak_memalign(align, 0);
    CHECK(r != NULL && ts_aligned_to(r, align), "memalign(%zu, 0): %p", align, r);
    /* hakmem's own blocks: a usable size of their own (a pointer hakmem does
     * not know would be given to the system allocator, which aborts under
     * ASan and reads garbage otherwise), freed by hakmem. */
    CHECK(hak_malloc_usable_size(p) > 0, "usable size of posix_memalign(%zu, 0) block is 0", align);
    CHECK(hak_malloc_usable_size(q) > 0, "usable size of aligned_alloc(%zu, 0) block is 0", align);
    hak_free(p);
    hak_free(q);
    hak_free(r);
  }
  hak_stats_t after = ts_stats_now();
  CHECK(after.allocs - before.allocs == 3 * 14, "allocs +%llu, expected 42",
        (unsigned long long)(after.allocs - before.allocs));
  CHECK(after.frees - before.frees == 3 * 14, "frees +%llu, expected 42 (a block went to the system allocator)",
        (unsigned long long)(after.frees - before.frees));
  CHECK(after.foreign_frees == before.foreign_frees, "foreign_frees +%llu",
        (unsigned long long)(after.foreign_frees - before.foreign_frees));
}

int main(void)
{
  zero_size_big_alignment();
  return ts_check_finish("unit_fuzz_regress");
}
