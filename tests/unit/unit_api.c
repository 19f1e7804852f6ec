/* unit_api: single-threaded checks of the prefixed hakmem API (include/hakmem.h).
 *
 * Each section states the contract it checks.  Every failure is printed with
 * its file, line and values; the program exits 1 if any check failed.
 * It links the static hakmem_api library and builds in the sanitizer
 * variants too (there the sanitizer owns malloc, hakmem owns hak_*).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hakmem.h"
#include "support/check.h"
#include "support/fill.h"
#include "support/hak.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

static size_t page_size;


static int uptr_cmp(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* ---------------------------------------------------------------- */
/* ---------------------------------------------------------------- */
/* Sizes 0 .. 320 KiB and several MiB: non-NULL, 16-aligned, usable >= size,
 * the whole usable size writable, all blocks held at once distinct and
 * disjoint, and no block's bytes disturbed by the writes into the others. */

static size_t build_size_list(size_t *out, size_t cap) {
  size_t n = 0;
  for (size_t s = 0; s <= 2048; s++) out[n++] = s;
  static const size_t muls[] = {4, 5, 6, 7};
  static const long offs[] = {-17, -1, 0, 1, 15};
  for (int k = 11; k <= 18; k++) {
    for (size_t m = 0; m < 4; m++) {
      for (size_t o = 0; o < 5; o++) {
        long s = (long)(muls[m] << (k - 2)) + offs[o];
        if (s > 2048 && n < cap) out[n++] = (size_t)s;
      }
    }
  }
  static const size_t tail[] = {300 * KiB, 320 * KiB - 1, 320 * KiB, 320 * KiB + 1,
                                384 * KiB + 7, 512 * KiB, MiB - 1, MiB, MiB + 1,
                                2 * MiB - 16, 2 * MiB, 2 * MiB + 1, 3 * MiB + 5,
                                4 * MiB, 8 * MiB + 1, 16 * MiB};
  for (size_t i = 0; i < sizeof tail / sizeof tail[0] && n < cap; i++) out[n++] = tail[i];
  return n;
}

static void test_sizes(void) {
  ts_check_begin("malloc sizes 0..320KiB and large");
  size_t cap = 4096, *sizes = calloc(cap, sizeof *sizes);
  size_t n = build_size_list(sizes, cap);
  void **p = calloc(n, sizeof *p);
  size_t *us = calloc(n, sizeof *us);
  REQUIRE(sizes && p && us, "test's own calloc failed");
  hak_stats_t s0 = ts_stats_now();

  for (size_t i = 0; i < n; i++) {
    p[i] = hak_malloc(sizes[i]);
    REQUIRE(p[i] != NULL, "hak_malloc(%zu) returned NULL", sizes[i]);
    CHECK(ts_aligned_to(p[i], 16), "hak_malloc(%zu) = %p not 16-aligned", sizes[i], p[i]);
    us[i] = hak_malloc_usable_size(p[i]);
    CHECK(us[i] >= sizes[i], "usable_size %zu < requested %zu", us[i], sizes[i]);
    ts_words_fill(p[i], us[i], i + 1);
  }
  for (size_t i = 0; i < n; i++) {
    size_t at = ts_words_verify(p[i], us[i], i + 1);
    CHECK(at == us[i], "block #%zu (size %zu, usable %zu) at %p corrupted at offset %zu",
          i, sizes[i], us[i], p[i], at);
  }
  ts_check_disjoint(p, us, n, "mixed sizes");

  hak_stats_t s1 = ts_stats_now();
  CHECK(s1.allocs - s0.allocs == n, "allocs delta %llu, expected %zu",
        (unsigned long long)(s1.allocs - s0.allocs), n);
  uint64_t usable_sum = 0;
  for (size_t i = 0; i < n; i++) usable_sum += us[i];
  CHECK(s1.live_bytes - s0.live_bytes == usable_sum,
        "live_bytes grew by %llu, usable sizes add to %llu",
        (unsigned long long)(s1.live_bytes - s0.live_bytes), (unsigned long long)usable_sum);
  CHECK(s1.large_allocs - s0.large_allocs >= 3,
        "large_allocs delta %llu: blocks of 4, 8 and 16 MiB should have their own mapping",
        (unsigned long long)(s1.large_allocs - s0.large_allocs));
  CHECK(s1.mapped_bytes >= s1.live_bytes, "mapped_bytes %llu < live_bytes %llu",
        (unsigned long long)s1.mapped_bytes, (unsigned long long)s1.live_bytes);

  for (size_t i = 0; i < n; i++) hak_free(p[i]);
  hak_stats_t s2 = ts_stats_now();
  CHECK(s2.frees - s1.frees == n, "frees delta %llu, expected %zu",
        (unsigned long long)(s2.frees - s1.frees), n);
  CHECK(s2.live_bytes == s0.live_bytes, "live_bytes %llu after freeing all, was %llu",
        (unsigned long long)s2.live_bytes, (unsigned long long)s0.live_bytes);

  /* Many blocks of each of a few small sizes held at once. */
  static const size_t same[] = {0, 1, 8, 16, 24, 48, 64, 100, 128, 1000, 4096, 20000};
  const size_t maxcnt = 3000;
  void **q = calloc(maxcnt, sizeof *q);
  size_t *qu = calloc(maxcnt, sizeof *qu);
  REQUIRE(q && qu, "test's own calloc failed");
  for (size_t k = 0; k < sizeof same / sizeof same[0]; k++) {
    size_t cnt = same[k] ? 8 * MiB / same[k] : maxcnt; /* at most ~8 MiB a size */
    if (cnt > maxcnt) cnt = maxcnt;
    for (size_t i = 0; i < cnt; i++) {
      q[i] = hak_malloc(same[k]);
      REQUIRE(q[i] != NULL, "hak_malloc(%zu) #%zu returned NULL", same[k], i);
      CHECK(ts_aligned_to(q[i], 16), "hak_malloc(%zu) = %p not 16-aligned", same[k], q[i]);
      qu[i] = hak_malloc_usable_size(q[i]);
      CHECK(qu[i] >= same[k], "usable %zu < %zu", qu[i], same[k]);
      ts_words_fill(q[i], qu[i], 7000 + i);
    }
    for (size_t i = 0; i < cnt; i++) {
      size_t at = ts_words_verify(q[i], qu[i], 7000 + i);
      CHECK(at == qu[i], "size %zu block #%zu corrupted at offset %zu", same[k], i, at);
    }
    char what[64];
    snprintf(what, sizeof what, "%zu blocks of size %zu", cnt, same[k]);
    ts_check_disjoint(q, qu, cnt, what);
    for (size_t i = 0; i < cnt; i++) hak_free(q[i]);
  }
  free(q);
  free(qu);
  free(sizes);
  free(p);
  free(us);
}

/* ---------------------------------------------------------------- */
/* calloc returns zeroed memory, also when it reuses a block that was dirtied. */

static void test_calloc(void) {
  ts_check_begin("calloc zeroes, also reused blocks");
  static const size_t sizes[] = {1, 8, 16, 24, 40, 64, 100, 256, 1000, 4096, 5000,
                                 32 * KiB, 100000, 256 * KiB, 1 * MiB, 3 * MiB + 3, 8 * MiB};
  void **p = malloc(4096 * sizeof *p);
  uintptr_t *seen = malloc(4096 * sizeof *seen);
  REQUIRE(p && seen, "test's own malloc failed");
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t s = sizes[k];
    size_t batch = 256 * KiB / s;
    if (batch < 4) batch = 4;
    if (batch > 4096) batch = 4096;
    const int rounds = s >= MiB ? 5 : 20;
    /* Each round callocs a batch, checks it is zero, dirties every usable
     * byte with 0xff and frees it; later rounds get those dirty blocks back. */
    size_t nseen = 0, reused = 0;
    for (int r = 0; r < rounds; r++) {
      for (size_t i = 0; i < batch; i++) {
        p[i] = hak_calloc(1, s);
        REQUIRE(p[i] != NULL, "hak_calloc(1, %zu) returned NULL", s);
        size_t at = ts_first_nonzero(p[i], s);
        CHECK(at == s, "round %d: hak_calloc(1, %zu) = %p has byte 0x%02x at offset %zu", r, s,
              p[i], ((unsigned char *)p[i])[at < s ? at : 0], at);
      }
      for (size_t i = 0; i < batch && r > 0; i++) {
        uintptr_t key = (uintptr_t)p[i];
        reused += bsearch(&key, seen, nseen, sizeof *seen, uptr_cmp) != NULL;
      }
      for (size_t i = 0; i < batch; i++) {
        if (r == 0) seen[nseen++] = (uintptr_t)p[i]; /* the blocks dirtied in round 0 */
        memset(p[i], 0xff, hak_malloc_usable_size(p[i]));
        hak_free(p[i]);
      }
      if (r == 0) qsort(seen, nseen, sizeof *seen, uptr_cmp);
    }
    if (s < MiB)
      CHECK(reused > 0, "calloc(1, %zu): %d rounds of %zu blocks never reused a dirtied block, "
            "so calloc-after-reuse was not exercised", s, rounds, batch);
  }
  free(p);
  free(seen);
  /* malloc + dirty + free + calloc of the same size, one block at a time. */
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    unsigned char *d = hak_malloc(sizes[k]);
    REQUIRE(d != NULL, "hak_malloc(%zu)", sizes[k]);
    memset(d, 0xff, hak_malloc_usable_size(d));
    hak_free(d);
    unsigned char *c = hak_calloc(sizes[k], 1);
    REQUIRE(c != NULL, "hak_calloc(%zu, 1)", sizes[k]);
    size_t at = ts_first_nonzero(c, sizes[k]);
    CHECK(at == sizes[k], "malloc/fill/free/calloc(%zu, 1): byte at offset %zu is 0x%02x (same block: %s)",
          sizes[k], at, c[at < sizes[k] ? at : 0], c == d ? "yes" : "no");
    hak_free(c);
  }
  /* The element count and size are multiplied. */
  unsigned *a = hak_calloc(1000, sizeof(unsigned));
  REQUIRE(a != NULL, "hak_calloc(1000, 4) returned NULL");
  CHECK(hak_malloc_usable_size(a) >= 4000, "usable %zu < 4000", hak_malloc_usable_size(a));
  CHECK(ts_first_nonzero(a, 4000) == 4000, "calloc(1000,4) not zero");
  hak_free(a);
  void *z = hak_calloc(0, 0);
  CHECK(z != NULL, "hak_calloc(0, 0) returned NULL (glibc returns a unique block)");
  hak_free(z);

  /* Overflowing or impossible products: NULL with ENOMEM. */
  static const size_t bad[][2] = {
      {SIZE_MAX / 2, 3},
      {SIZE_MAX, 2},
      {2, SIZE_MAX},
      {SIZE_MAX / 2 + 1, 2},           /* product wraps to exactly 0 */
      {(size_t)1 << 33, (size_t)1 << 31}, /* product wraps to exactly 0 */
      {(size_t)1 << 32, (size_t)1 << 32},
      {(size_t)1 << 32, ((size_t)1 << 32) + 1}, /* wraps to 2^32 */
      {SIZE_MAX, SIZE_MAX},
      {(size_t)PTRDIFF_MAX, 1},        /* no overflow, simply too large */
      {1, SIZE_MAX},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    errno = 0;
    void *r = hak_calloc(bad[i][0], bad[i][1]);
    int e = errno;
    CHECK(r == NULL, "hak_calloc(%#zx, %#zx) = %p, expected NULL", bad[i][0], bad[i][1], r);
    CHECK(e == ENOMEM, "hak_calloc(%#zx, %#zx): errno %d (%s), expected ENOMEM",
          bad[i][0], bad[i][1], e, strerror(e));
    if (r) hak_free(r);
  }
}

/* calloc skips zeroing a block carved just now from a slab on fresh pages
 * (alloc.c).  A block that malloc carved that way, dirtied and freed, is
 * the next calloc's of its size (the thread cache is LIFO) and must be
 * zeroed in full; so must every block carved after it. */
static void test_calloc_fresh(void) {
  ts_check_begin("calloc after malloc carved a fresh block");
  /* Sizes of distinct classes (the program's first allocations). */
  static const size_t sizes[] = {4500, 6100, 9000, 13000, 21000, 47000, 70000, 150000, 230000};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t s = sizes[k];
    unsigned char *d = hak_malloc(s);
    REQUIRE(d != NULL, "hak_malloc(%zu)", s);
    memset(d, 0xff, hak_malloc_usable_size(d));
    hak_free(d);
    unsigned char *c = hak_calloc(1, s);
    REQUIRE(c != NULL, "hak_calloc(1, %zu)", s);
    CHECK(c == d, "calloc(1, %zu) did not get the block malloc freed (%p, %p): the case is not exercised", s,
          (void *)d, (void *)c);
    size_t at = ts_first_nonzero(c, s);
    CHECK(at == s, "calloc(1, %zu) of the block malloc carved and dirtied: byte at offset %zu is 0x%02x", s, at,
          c[at < s ? at : 0]);
    unsigned char *more[8];
    for (int i = 0; i < 8; i++) {
      more[i] = hak_calloc(1, s);
      REQUIRE(more[i] != NULL, "hak_calloc(1, %zu)", s);
      at = ts_first_nonzero(more[i], s);
      CHECK(at == s, "calloc(1, %zu) #%d: byte at offset %zu is 0x%02x", s, i, at, more[i][at < s ? at : 0]);
      memset(more[i], 0xee, s);
    }
    for (int i = 0; i < 8; i++) hak_free(more[i]);
    hak_free(c);
  }
}

/* ---------------------------------------------------------------- */
/* Requests no allocator can serve: NULL and ENOMEM, never a crash. */

static void test_huge(void) {
  ts_check_begin("huge requests fail with ENOMEM");
  static const size_t huge[] = {SIZE_MAX,
                                SIZE_MAX - 1,
                                SIZE_MAX - 15,
                                SIZE_MAX - 4095,
                                SIZE_MAX - 2 * 1024 * 1024,
                                (size_t)PTRDIFF_MAX + 1,
                                (size_t)PTRDIFF_MAX,
                                (size_t)1 << 50};
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
    size_t s = huge[i];
    errno = 0;
    void *r = hak_malloc(s);
    int e = errno;
    CHECK(r == NULL && e == ENOMEM, "hak_malloc(%#zx) = %p errno %d, expected NULL/ENOMEM", s, r, e);
    if (r) hak_free(r);

    errno = 0;
    r = hak_aligned_alloc(64, s);
    e = errno;
    CHECK(r == NULL && e == ENOMEM, "hak_aligned_alloc(64, %#zx) = %p errno %d, expected NULL/ENOMEM", s, r, e);
    if (r) hak_free(r);

    errno = 0;
    r = hak_memalign(2 * MiB, s);
    e = errno;
    CHECK(r == NULL && e == ENOMEM, "hak_memalign(2MiB, %#zx) = %p errno %d, expected NULL/ENOMEM", s, r, e);
    if (r) hak_free(r);

    void *out = (void *)0x5a5a;
    int rc = hak_posix_memalign(&out, 4096, s);
    CHECK(rc == ENOMEM, "hak_posix_memalign(4096, %#zx) returned %d, expected ENOMEM", s, rc);
    if (rc == 0) hak_free(out);

    errno = 0;
    r = hak_valloc(s);
    e = errno;
    CHECK(r == NULL && e == ENOMEM, "hak_valloc(%#zx) = %p errno %d, expected NULL/ENOMEM", s, r, e);
    if (r) hak_free(r);

    errno = 0; /* pvalloc rounds up to a page: must not wrap to a tiny block */
    r = hak_pvalloc(s);
    e = errno;
    CHECK(r == NULL && e == ENOMEM, "hak_pvalloc(%#zx) = %p errno %d, expected NULL/ENOMEM", s, r, e);
    if (r) hak_free(r);

    /* realloc failure leaves the old block valid and unchanged. */
    for (size_t from = 100; from <= 4 * MiB; from *= 200) {
      void *old = hak_malloc(from);
      REQUIRE(old != NULL, "hak_malloc(%zu)", from);
      ts_words_fill(old, from, 99);
      errno = 0;
      r = hak_realloc(old, s);
      e = errno;
      CHECK(r == NULL && e == ENOMEM, "hak_realloc(%zu-byte block, %#zx) = %p errno %d, expected NULL/ENOMEM",
            from, s, r, e);
      if (r) {
        hak_free(r);
      } else {
        CHECK(ts_words_verify(old, from, 99) == from, "block changed by a failed realloc");
        hak_free(old);
      }
    }
  }
}

/* ---------------------------------------------------------------- */
/* realloc: NULL -> malloc, size 0 -> free and NULL, contents preserved. */

static void test_realloc(void) {
  ts_check_begin("realloc");
  hak_stats_t s0 = ts_stats_now();
  void *p = hak_realloc(NULL, 100);
  REQUIRE(p != NULL, "hak_realloc(NULL, 100) returned NULL");
  CHECK(ts_aligned_to(p, 16), "realloc(NULL,100) = %p not 16-aligned", p);
  CHECK(hak_malloc_usable_size(p) >= 100, "usable %zu", hak_malloc_usable_size(p));
  memset(p, 0x11, 100);
  hak_stats_t s1 = ts_stats_now();
  CHECK(s1.allocs - s0.allocs == 1, "realloc(NULL, 100) counted %llu allocs, expected 1",
        (unsigned long long)(s1.allocs - s0.allocs));
  errno = 0;
  void *r = hak_realloc(p, 0);
  CHECK(r == NULL, "hak_realloc(p, 0) = %p, expected NULL (glibc frees p)", r);
  hak_stats_t s2 = ts_stats_now();
  CHECK(s2.frees - s1.frees == 1, "realloc(p, 0) counted %llu frees, expected 1",
        (unsigned long long)(s2.frees - s1.frees));
  CHECK(s2.live_bytes == s0.live_bytes, "live_bytes %llu after realloc(p,0), was %llu",
        (unsigned long long)s2.live_bytes, (unsigned long long)s0.live_bytes);
  if (r) hak_free(r);

  /* The same for a large block. */
  p = hak_realloc(NULL, 5 * MiB);
  REQUIRE(p != NULL, "hak_realloc(NULL, 5MiB) returned NULL");
  memset(p, 0x22, 5 * MiB);
  r = hak_realloc(p, 0);
  CHECK(r == NULL, "hak_realloc(large, 0) = %p, expected NULL", r);
  hak_stats_t s3 = ts_stats_now();
  CHECK(s3.live_bytes == s0.live_bytes, "live_bytes %llu after realloc(large,0), was %llu",
        (unsigned long long)s3.live_bytes, (unsigned long long)s0.live_bytes);
  if (r) hak_free(r);

  r = hak_realloc(NULL, 0);
  CHECK(r != NULL, "hak_realloc(NULL, 0) returned NULL (glibc: malloc(0), a unique block)");
  hak_free(r);

  /* Grow and shrink between all pairs of these sizes. */
  static const size_t sz[] = {1, 15, 16, 17, 64, 100, 500, 1024, 4000, 8192, 20000,
                              65536, 100000, 300 * KiB, 1 * MiB, 3 * MiB + 1, 9 * MiB};
  const size_t n = sizeof sz / sizeof sz[0];
  uintptr_t seed = 1;
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < n; j++) {
      size_t from = sz[i], to = sz[j], keep = from < to ? from : to;
      void *a = hak_malloc(from);
      REQUIRE(a != NULL, "hak_malloc(%zu)", from);
      ts_words_fill(a, from, ++seed);
      void *b = hak_realloc(a, to);
      REQUIRE(b != NULL, "hak_realloc(%zu -> %zu) returned NULL", from, to);
      CHECK(ts_aligned_to(b, 16), "realloc(%zu -> %zu) = %p not 16-aligned", from, to, b);
      size_t u = hak_malloc_usable_size(b);
      CHECK(u >= to, "realloc(%zu -> %zu): usable %zu", from, to, u);
      size_t at = ts_words_verify(b, keep, seed);
      CHECK(at == keep, "realloc(%zu -> %zu) lost contents at offset %zu", from, to, at);
      memset(b, 0x5c, u); /* the whole new block is writable */
      hak_free(b);
    }
  }
  /* A chain of small growth steps, as string building does. */
  size_t cur = 1;
  unsigned char *s = hak_malloc(cur);
  REQUIRE(s != NULL, "hak_malloc(1)");
  s[0] = 0;
  while (cur < 600 * KiB) {
    size_t next = cur + cur / 3 + 1;
    unsigned char *t = hak_realloc(s, next);
    REQUIRE(t != NULL, "realloc chain %zu -> %zu", cur, next);
    for (size_t k = 0; k < cur; k++)
      if (t[k] != (unsigned char)(k * 7)) {
        CHECK(t[k] == (unsigned char)(k * 7), "realloc chain %zu -> %zu: byte %zu changed", cur, next, k);
        break;
      }
    for (size_t k = cur; k < next; k++) t[k] = (unsigned char)(k * 7);
    s = t;
    cur = next;
  }
  hak_free(s);
  /* A small block that must grow a little gets 3/8 more than it had (so
   * appending a byte at a time does not move it at every class); one
   * that grows by more gets what was asked, rounded to its class only.
   * A block of a trailed class (above 64 KiB) whose usable size is the
   * size asked for grows in place while its block has room. */
  for (size_t from = 16; from <= 128 * KiB; from = from * 3 / 2) {
    void *a = hak_malloc(from);
    REQUIRE(a != NULL, "hak_malloc(%zu)", from);
    size_t u = hak_malloc_usable_size(a);
    void *b = hak_realloc(a, u + 1);
    REQUIRE(b != NULL, "hak_realloc(%zu -> %zu)", u, u + 1);
    size_t v = hak_malloc_usable_size(b);
    CHECK(v >= u + u / 4 + u / 8 || (b == a && v == u + 1),
          "realloc of a %zu-byte block to %zu gave %zu usable (%s), expected >= %zu or in place", u, u + 1, v,
          b == a ? "in place" : "moved", u + u / 4 + u / 8);
    void *c = hak_realloc(b, 4 * v);
    REQUIRE(c != NULL, "hak_realloc(%zu -> %zu)", v, 4 * v);
    size_t w = hak_malloc_usable_size(c);
    CHECK(w >= 4 * v && w <= 5 * v, "realloc of a %zu-byte block to %zu gave %zu usable, expected %zu..%zu", v,
          4 * v, w, 4 * v, 5 * v);
    hak_free(c);
  }
  hak_stats_t s4 = ts_stats_now();
  CHECK(s4.live_bytes == s0.live_bytes, "live_bytes %llu after realloc tests, was %llu",
        (unsigned long long)s4.live_bytes, (unsigned long long)s0.live_bytes);
}

/* ---------------------------------------------------------------- */
/* reallocarray: overflow is ENOMEM and leaves the block alone. */

static void test_reallocarray(void) {
  ts_check_begin("reallocarray");
  void *p = hak_reallocarray(NULL, 10, 10);
  REQUIRE(p != NULL, "hak_reallocarray(NULL, 10, 10) returned NULL");
  CHECK(hak_malloc_usable_size(p) >= 100, "usable %zu", hak_malloc_usable_size(p));
  ts_words_fill(p, 100, 4242);
  static const size_t bad[][2] = {{SIZE_MAX / 2, 3}, {SIZE_MAX, 2}, {SIZE_MAX / 2 + 1, 2},
                                  {(size_t)1 << 32, (size_t)1 << 32}, {3, SIZE_MAX / 2}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    errno = 0;
    void *r = hak_reallocarray(p, bad[i][0], bad[i][1]);
    int e = errno;
    CHECK(r == NULL, "hak_reallocarray(p, %#zx, %#zx) = %p, expected NULL", bad[i][0], bad[i][1], r);
    CHECK(e == ENOMEM, "hak_reallocarray(p, %#zx, %#zx): errno %d, expected ENOMEM", bad[i][0], bad[i][1], e);
    if (r) {
      p = r; /* it succeeded (wrongly); keep a valid pointer */
      ts_words_fill(p, 100, 4242);
    }
  }
  CHECK(ts_words_verify(p, 100, 4242) == 100, "block changed by failed reallocarray");
  void *q = hak_reallocarray(p, 1000, 50);
  REQUIRE(q != NULL, "hak_reallocarray(p, 1000, 50) returned NULL");
  CHECK(hak_malloc_usable_size(q) >= 50000, "usable %zu", hak_malloc_usable_size(q));
  CHECK(ts_words_verify(q, 100, 4242) == 100, "reallocarray grow lost contents");
  memset(q, 1, 50000);
  hak_free(q);
  errno = 0;
  void *r = hak_reallocarray(NULL, SIZE_MAX / 4, 8);
  CHECK(r == NULL && errno == ENOMEM, "hak_reallocarray(NULL, SIZE_MAX/4, 8) = %p errno %d", r, errno);
}

/* ---------------------------------------------------------------- */
/* posix_memalign rejects alignments that are not a power-of-two multiple of
 * sizeof(void *) with EINVAL and does not write *out. */

static void test_bad_alignment(void) {
  ts_check_begin("posix_memalign EINVAL");
  static const size_t bad[] = {0, 1, 2, 3, sizeof(void *) / 2, 12, 24, 48, 96, 4097,
                               3 * 4096, 3 * MiB, SIZE_MAX, SIZE_MAX - 7, ((size_t)1 << 40) + 8};
  static const size_t sizes[] = {0, 1, 100, 100000};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      void *sentinel = (void *)(uintptr_t)0xdeadbeef;
      void *out = sentinel;
      int rc = hak_posix_memalign(&out, bad[i], sizes[k]);
      CHECK(rc == EINVAL, "hak_posix_memalign(align %#zx, size %zu) returned %d, expected EINVAL",
            bad[i], sizes[k], rc);
      CHECK(out == sentinel, "hak_posix_memalign(align %#zx, size %zu) wrote *out = %p on failure",
            bad[i], sizes[k], out);
      if (rc == 0 && out != sentinel) hak_free(out);
    }
  }
}

/* ---------------------------------------------------------------- */
/* Every power-of-two alignment up to 2 MiB, for three APIs. */

static void test_alignments(void) {
  ts_check_begin("alignments 1..2MiB: posix_memalign, aligned_alloc, memalign");
  hak_stats_t s0 = ts_stats_now();
  static const size_t sizes[] = {1, 44, 1000, 100000};
  enum { NS = 4, NAPI = 3 };
  for (size_t a = 1; a <= 2 * MiB; a <<= 1) {
    void *p[NAPI][NS];
    size_t u[NAPI][NS];
    for (size_t k = 0; k < NS; k++) {
      size_t s = sizes[k];
      p[0][k] = NULL;
      if (a >= sizeof(void *)) {
        void *out = NULL;
        int rc = hak_posix_memalign(&out, a, s);
        CHECK(rc == 0 && out != NULL, "hak_posix_memalign(%zu, %zu) returned %d, %p", a, s, rc, out);
        p[0][k] = rc == 0 ? out : NULL;
      }
      p[1][k] = hak_aligned_alloc(a, s);
      CHECK(p[1][k] != NULL, "hak_aligned_alloc(%zu, %zu) returned NULL (errno %d)", a, s, errno);
      p[2][k] = hak_memalign(a, s);
      CHECK(p[2][k] != NULL, "hak_memalign(%zu, %zu) returned NULL (errno %d)", a, s, errno);
      for (int api = 0; api < NAPI; api++) {
        u[api][k] = 0;
        if (!p[api][k]) continue;
        CHECK(ts_aligned_to(p[api][k], a), "api %d align %zu size %zu: %p misaligned", api, a, s, p[api][k]);
        u[api][k] = hak_malloc_usable_size(p[api][k]);
        CHECK(u[api][k] >= s, "api %d align %zu size %zu: usable %zu", api, a, s, u[api][k]);
        ts_words_fill(p[api][k], u[api][k], a * 131 + (size_t)api * 17 + k);
      }
    }
    void *all[NAPI * NS];
    size_t lens[NAPI * NS], m = 0;
    for (int api = 0; api < NAPI; api++)
      for (size_t k = 0; k < NS; k++) {
        if (!p[api][k]) continue;
        size_t at = ts_words_verify(p[api][k], u[api][k], a * 131 + (size_t)api * 17 + k);
        CHECK(at == u[api][k], "api %d align %zu size %zu: corrupted at %zu", api, a, sizes[k], at);
        all[m] = p[api][k];
        lens[m++] = u[api][k];
      }
    char what[48];
    snprintf(what, sizeof what, "aligned blocks, alignment %zu", a);
    ts_check_disjoint(all, lens, m, what);
    for (size_t k = 0; k < NS; k++) {
      if (p[0][k]) hak_free(p[0][k]);
      if (p[1][k]) hak_free_aligned_sized(p[1][k], a, sizes[k]);
      if (p[2][k]) hak_free(p[2][k]);
    }
  }
  void *x = hak_aligned_alloc(8, 44);
  CHECK(x != NULL && ts_aligned_to(x, 8), "hak_aligned_alloc(8, 44) = %p", x);
  if (x) {
    CHECK(hak_malloc_usable_size(x) >= 44, "usable %zu", hak_malloc_usable_size(x));
    memset(x, 3, 44);
    hak_free(x);
  }
  x = hak_aligned_alloc(64, 100);
  CHECK(x != NULL && ts_aligned_to(x, 64), "hak_aligned_alloc(64, 100) = %p", x);
  hak_free(x);
  x = hak_aligned_alloc(4096, 3 * MiB + 1);
  CHECK(x != NULL && ts_aligned_to(x, 4096), "hak_aligned_alloc(4096, 3MiB+1) = %p", x);
  if (x) memset(x, 1, 3 * MiB + 1);
  hak_free(x);
  hak_stats_t s1 = ts_stats_now();
  CHECK(s1.live_bytes == s0.live_bytes, "live_bytes %llu after aligned tests, was %llu",
        (unsigned long long)s1.live_bytes, (unsigned long long)s0.live_bytes);
  CHECK(s1.allocs - s0.allocs == s1.frees - s0.frees, "aligned tests: %llu allocs but %llu frees",
        (unsigned long long)(s1.allocs - s0.allocs), (unsigned long long)(s1.frees - s0.frees));
}

/* Many blocks aligned beyond a page (8 to 64 KiB), more than a SuperSlab
 * holds: each aligned, intact and disjoint from the others, and together
 * mapped within a few times their size.  A mapping of its own per block
 * (2 MiB-aligned, a system call apiece) would map over 2 MiB a block. */
static void test_alignments_many(void) {
  ts_check_begin("600 blocks aligned to 8, 16, 32 and 64 KiB: aligned, disjoint, mapped compactly");
  enum { N = 600 };
  static void *p[N];
  static size_t len[N];
  for (size_t a = 8 * KiB; a <= 64 * KiB; a <<= 1) {
    const size_t sizes[4] = {1, a / 2 + 8, a, 3 * a / 2};
    hak_stats_t s0 = ts_stats_now();
    size_t asked = 0;
    for (size_t i = 0; i < N; i++) {
      size_t n = sizes[i % 4];
      p[i] = NULL;
      len[i] = 0;
      int rc = hak_posix_memalign(&p[i], a, n);
      CHECK(rc == 0 && p[i] != NULL, "hak_posix_memalign(%zu, %zu) returned %d", a, n, rc);
      if (rc != 0) continue;
      CHECK(ts_aligned_to(p[i], a), "block %zu of %zu B: %p not aligned to %zu", i, n, p[i], a);
      len[i] = hak_malloc_usable_size(p[i]);
      CHECK(len[i] >= n, "block %zu of %zu B aligned to %zu: usable %zu", i, n, a, len[i]);
      ts_words_fill(p[i], len[i], a + i);
      asked += n;
    }
    hak_stats_t s1 = ts_stats_now();
    uint64_t grew = s1.mapped_bytes > s0.mapped_bytes ? s1.mapped_bytes - s0.mapped_bytes : 0;
    CHECK(grew <= 4 * asked + 4 * MiB, "alignment %zu: %zu B asked mapped %llu B more", a, asked,
          (unsigned long long)grew);
    size_t m = 0;
    for (size_t i = 0; i < N; i++) {
      if (p[i] == NULL) continue;
      size_t at = ts_words_verify(p[i], len[i], a + i);
      CHECK(at == len[i], "alignment %zu block %zu: corrupted at %zu", a, i, at);
      p[m] = p[i];
      len[m++] = len[i];
    }
    char what[48];
    snprintf(what, sizeof what, "blocks aligned to %zu", a);
    ts_check_disjoint(p, len, m, what);
    for (size_t i = 0; i < m; i++) hak_free(p[i]);
  }
}

/* ---------------------------------------------------------------- */

static void test_valloc_pvalloc(void) {
  ts_check_begin("valloc, pvalloc");
  static const size_t sizes[] = {1, 100, 4095, 4096, 4097, 10000, 100000, 3 * MiB + 5};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t s = sizes[i];
    void *v = hak_valloc(s);
    REQUIRE(v != NULL, "hak_valloc(%zu) returned NULL", s);
    CHECK(ts_aligned_to(v, page_size), "hak_valloc(%zu) = %p not page-aligned", s, v);
    CHECK(hak_malloc_usable_size(v) >= s, "valloc(%zu): usable %zu", s, hak_malloc_usable_size(v));
    memset(v, 0x77, hak_malloc_usable_size(v));
    void *pv = hak_pvalloc(s);
    REQUIRE(pv != NULL, "hak_pvalloc(%zu) returned NULL", s);
    size_t rounded = (s + page_size - 1) & ~(page_size - 1);
    CHECK(ts_aligned_to(pv, page_size), "hak_pvalloc(%zu) = %p not page-aligned", s, pv);
    CHECK(hak_malloc_usable_size(pv) >= rounded, "pvalloc(%zu): usable %zu < page-rounded %zu", s,
          hak_malloc_usable_size(pv), rounded);
    memset(pv, 0x78, rounded);
    CHECK(((unsigned char *)v)[s - 1] == 0x77, "valloc block overwritten by pvalloc block");
    hak_free(v);
    hak_free(pv);
  }
}

/* ---------------------------------------------------------------- */

static void test_free_variants(void) {
  ts_check_begin("free(NULL), free_sized, free_aligned_sized");
  hak_stats_t s0 = ts_stats_now();
  hak_free(NULL);
  hak_free_sized(NULL, 0);
  hak_free_sized(NULL, 100);
  hak_free_aligned_sized(NULL, 64, 100);
  hak_stats_t s1 = ts_stats_now();
  CHECK(s1.frees == s0.frees, "freeing NULL counted %llu frees",
        (unsigned long long)(s1.frees - s0.frees));
  static const size_t sizes[] = {0, 1, 24, 200, 3000, 70000, 300 * KiB, 5 * MiB};
  const size_t n = sizeof sizes / sizeof sizes[0];
  for (size_t i = 0; i < n; i++) {
    void *p = hak_malloc(sizes[i]);
    REQUIRE(p != NULL, "hak_malloc(%zu)", sizes[i]);
    hak_free_sized(p, sizes[i]);
    void *a = hak_aligned_alloc(256, sizes[i]);
    REQUIRE(a != NULL, "hak_aligned_alloc(256, %zu)", sizes[i]);
    hak_free_aligned_sized(a, 256, sizes[i]);
  }
  hak_stats_t s2 = ts_stats_now();
  CHECK(s2.frees - s1.frees == 2 * n, "free_sized/free_aligned_sized counted %llu frees, expected %zu",
        (unsigned long long)(s2.frees - s1.frees), 2 * n);
  CHECK(s2.allocs - s1.allocs == 2 * n, "counted %llu allocs, expected %zu",
        (unsigned long long)(s2.allocs - s1.allocs), 2 * n);
  CHECK(s2.live_bytes == s0.live_bytes, "live_bytes %llu after sized frees, was %llu",
        (unsigned long long)s2.live_bytes, (unsigned long long)s0.live_bytes);
}

/* ---------------------------------------------------------------- */
/* Freed memory is reused: alloc/free cycles do not grow the mapped memory,
 * and an immediate malloc after a free of the same size stays within a small
 * set of addresses (a LIFO free list returns the very same block). */

static void test_reuse(void) {
  ts_check_begin("memory reuse: cycles do not grow mapped memory");
  static const size_t sizes[] = {16, 64, 256, 1024, 4096, 32 * KiB, 100000, 300 * KiB, 4 * MiB};
  const uint64_t slack = 8 * MiB;
#if defined(HAKMEM_TSAN) || defined(HAKMEM_ASAN)
  const size_t max_cycles = 250000; /* sanitizers: slower; the address check still bites */
#else
  const size_t max_cycles = 1000000;
#endif
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t s = sizes[k];
    size_t cycles = 64 * MiB / s;
    if (cycles < 2000) cycles = 2000;
    if (cycles > max_cycles) cycles = max_cycles;
    uintptr_t *addr = malloc(cycles * sizeof *addr);
    REQUIRE(addr != NULL, "test's own malloc failed");
    void *w = hak_malloc(s); /* warm up the class */
    hak_free(w);
    hak_collect();
    /* The large cache is cold after a collect: a freed large block is
     * discarded (its mapping kept reserved until the next discard), and the
     * next large allocation turns the cache warm.  That block is freed
     * here, so the cycles start warm and its mapping is in m0. */
    if (s > 256 * KiB) hak_free(hak_malloc(s));
    hak_stats_t m0 = ts_stats_now();
    for (size_t i = 0; i < cycles; i++) {
      unsigned char *p = hak_malloc(s);
      REQUIRE(p != NULL, "hak_malloc(%zu) returned NULL in cycle %zu", s, i);
      p[0] = 1;
      p[s - 1] = 2;
      addr[i] = (uintptr_t)p;
      hak_free(p);
    }
    hak_stats_t m1 = ts_stats_now();
    CHECK(m1.mapped_bytes <= m0.mapped_bytes + slack,
          "size %zu: %zu malloc/free cycles grew mapped_bytes from %llu to %llu", s, cycles,
          (unsigned long long)m0.mapped_bytes, (unsigned long long)m1.mapped_bytes);
    qsort(addr, cycles, sizeof *addr, uptr_cmp);
    size_t distinct = 0;
    for (size_t i = 0; i < cycles; i++) distinct += i == 0 || addr[i] != addr[i - 1];
    /* The addresses cycled through may cover at most about 2 MiB (a slab or
     * SuperSlab of blocks).  Large blocks (own mapping: counted in
     * large_allocs) may be mapped anew each time, so only the mapped bytes
     * are bounded for them. */
    bool large = m1.large_allocs != m0.large_allocs;
    size_t limit = (size_t)(2 * MiB / s) > 8 ? (size_t)(2 * MiB / s) : 8;
    CHECK(large || distinct <= limit,
          "size %zu: %zu immediate malloc-after-free cycles used %zu distinct addresses (limit %zu)",
          s, cycles, distinct, limit);
    if (!large && distinct != 1)
      printf("   note: size %zu: immediate reuse used %zu distinct addresses (LIFO gives 1)\n", s, distinct);
    free(addr);

    /* Rounds of a batch: allocate many, free all; the second and later
     * rounds must fit in what the first one mapped. */
    size_t batch = 4 * MiB / s;
    if (batch < 16) batch = 16;
    if (batch > 100000) batch = 100000;
    void **b = malloc(batch * sizeof *b);
    REQUIRE(b != NULL, "test's own malloc failed");
    hak_stats_t r1 = {0};
    const int rounds = s >= MiB ? 4 : 10;
    for (int r = 0; r < rounds; r++) {
      for (size_t i = 0; i < batch; i++) {
        b[i] = hak_malloc(s);
        REQUIRE(b[i] != NULL, "hak_malloc(%zu) returned NULL in batch round %d", s, r);
        ((char *)b[i])[0] = (char)i;
      }
      for (size_t i = 0; i < batch; i++) hak_free(b[i]);
      if (r == 0) r1 = ts_stats_now();
    }
    hak_stats_t r2 = ts_stats_now();
    CHECK(r2.mapped_bytes <= r1.mapped_bytes + slack,
          "size %zu: %d rounds of %zu blocks grew mapped_bytes from %llu (after round 1) to %llu",
          s, rounds, batch, (unsigned long long)r1.mapped_bytes, (unsigned long long)r2.mapped_bytes);
    free(b);
  }
}

/* ---------------------------------------------------------------- */
/* Slab colouring (src/size_class.h, hak_class_colored): the slabs of the
 * classes of 128, 256, ..., 1024 bytes start at different cache lines, and
 * aligned requests stay aligned (they get uncoloured twins), counted with
 * their class. */

enum { COLOR_N = 2048 };

static size_t class_live(size_t block_size) {
  hak_class_stats_t cs[128];
  size_t n = hak_stats_get_classes(cs, 128);
  for (size_t c = 0; c < n && c < 128; c++)
    if (cs[c].block_size == block_size) return cs[c].live_blocks;
  return 0;
}

static void test_coloring(void) {
  ts_check_begin("slab colouring: blocks of 128..1024 B start at varying lines; aligned ones stay aligned");
  static void *p[COLOR_N];
  for (size_t bs = 128; bs <= 1024; bs += 128) {
    /* COLOR_N blocks of the class fill several slabs (64 KiB each). */
    uint64_t lines = 0;  /* bit k: some block starts at the k-th cache line of a page */
    for (size_t i = 0; i < COLOR_N; i++) {
      p[i] = hak_malloc(bs);
      REQUIRE(p[i] != NULL, "hak_malloc(%zu) #%zu", bs, i);
      CHECK(ts_aligned_to(p[i], 64), "hak_malloc(%zu) = %p not 64-aligned", bs, p[i]);
      lines |= (uint64_t)1 << ((uintptr_t)p[i] / 64 % 64);
    }
    /* Uncoloured, the blocks of one slab start at 64 / gcd(bs / 64, 64) of
     * a page's lines, whatever the slab (4 for 1 KiB); coloured, at least
     * twice as many across slabs. */
    size_t step = bs / 64, g = step & -step, plain = 64 / (g < 64 ? g : 64);
    size_t want = 2 * plain < 64 ? 2 * plain : 64;
    CHECK((size_t)__builtin_popcountll(lines) >= want,
          "%d blocks of %zu B start at %d of a page's 64 cache lines, expected at least %zu",
          COLOR_N, bs, __builtin_popcountll(lines), want);
    for (size_t i = 0; i < COLOR_N; i++) hak_free(p[i]);
  }
  /* More than 64-byte alignment from the coloured classes' sizes. */
  static const size_t sizes[] = {100, 128, 200, 256, 500, 512, 1000, 1024};
  for (size_t a = 128; a <= 4096; a <<= 1) {
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
      size_t s = sizes[k], live0 = class_live(1024);
      for (size_t i = 0; i < 256; i++) {
        void *o = NULL;
        int rc = hak_posix_memalign(&o, a, s);
        REQUIRE(rc == 0 && o != NULL, "hak_posix_memalign(%zu, %zu) returned %d", a, s, rc);
        CHECK(ts_aligned_to(o, a), "hak_posix_memalign(%zu, %zu) = %p misaligned", a, s, o);
        p[i] = o;
        ts_words_fill(p[i], s, a + s + i);
      }
      if (a == 1024 && s > 512)  /* the twin of 1 KiB serves these: counted as 1 KiB blocks */
        CHECK(class_live(1024) == live0 + 256, "1 KiB class: %zu live blocks after 256 aligned ones, %zu before",
              class_live(1024), live0);
      for (size_t i = 0; i < 256; i++) {
        size_t at = ts_words_verify(p[i], s, a + s + i);
        CHECK(at == s, "aligned %zu size %zu block %zu corrupted at %zu", a, s, i, at);
        hak_free(p[i]);
      }
    }
  }
}

/* ---------------------------------------------------------------- */
/* Exact counters for a known single-threaded sequence. */

static void test_stats_exact(void) {
  ts_check_begin("stats count a single-threaded sequence exactly");
  hak_stats_t s0 = ts_stats_now();
  enum { N = 200 };
  void *p[N];
  uint64_t usable = 0, large = 0;
  for (int i = 0; i < N; i++) {
    size_t s;
    switch (i % 8) {
      case 0: p[i] = hak_malloc(s = 8 + (size_t)i); break;
      case 1: p[i] = hak_calloc(3, s = 100 + (size_t)i); s *= 3; break;
      case 2: p[i] = hak_aligned_alloc(64, s = 500); break;
      case 3: { void *o = NULL; hak_posix_memalign(&o, 128, s = 3000); p[i] = o; break; }
      case 4: p[i] = hak_memalign(4096, s = 70000); break;
      case 5: p[i] = hak_valloc(s = 10); break;
      case 6: p[i] = hak_malloc(s = 6 * MiB + (size_t)i); large++; break;
      default: p[i] = hak_pvalloc(s = 5000); break;
    }
    REQUIRE(p[i] != NULL, "allocation #%d of %zu bytes returned NULL", i, s);
    usable += hak_malloc_usable_size(p[i]);
  }
  hak_stats_t s1 = ts_stats_now();
  CHECK(s1.allocs - s0.allocs == N, "allocs delta %llu, expected %d",
        (unsigned long long)(s1.allocs - s0.allocs), N);
  CHECK(s1.frees == s0.frees, "frees delta %llu, expected 0", (unsigned long long)(s1.frees - s0.frees));
  CHECK(s1.remote_frees == s0.remote_frees, "remote_frees changed in a single thread");
  CHECK(s1.live_bytes - s0.live_bytes == usable, "live_bytes delta %llu, usable sizes add to %llu",
        (unsigned long long)(s1.live_bytes - s0.live_bytes), (unsigned long long)usable);
  CHECK(s1.large_allocs - s0.large_allocs >= large && s1.large_allocs - s0.large_allocs <= N,
        "large_allocs delta %llu, expected at least the %llu blocks of 6 MiB",
        (unsigned long long)(s1.large_allocs - s0.large_allocs), (unsigned long long)large);
  for (int i = 0; i < N; i += 2) hak_free(p[i]);
  hak_stats_t s2 = ts_stats_now();
  CHECK(s2.frees - s1.frees == N / 2, "frees delta %llu, expected %d",
        (unsigned long long)(s2.frees - s1.frees), N / 2);
  for (int i = 1; i < N; i += 2) hak_free(p[i]);
  hak_stats_t s3 = ts_stats_now();
  CHECK(s3.allocs - s0.allocs == N && s3.frees - s0.frees == N,
        "after freeing all: allocs delta %llu frees delta %llu, expected %d each",
        (unsigned long long)(s3.allocs - s0.allocs), (unsigned long long)(s3.frees - s0.frees), N);
  CHECK(s3.remote_frees == s0.remote_frees, "remote_frees changed in a single thread");
  CHECK(s3.live_bytes == s0.live_bytes, "live_bytes %llu, was %llu before",
        (unsigned long long)s3.live_bytes, (unsigned long long)s0.live_bytes);
  CHECK(s3.superslabs_unmapped <= s3.superslabs_mapped, "unmapped %llu > mapped %llu SuperSlabs",
        (unsigned long long)s3.superslabs_unmapped, (unsigned long long)s3.superslabs_mapped);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  page_size = (size_t)sysconf(_SC_PAGESIZE);
  hak_stats_t start = ts_stats_now();
  test_calloc_fresh();  /* first: its sizes' classes have no slab yet */
  test_sizes();
  test_calloc();
  test_huge();
  test_realloc();
  test_reallocarray();
  test_bad_alignment();
  test_alignments();
  test_alignments_many();
  test_valloc_pvalloc();
  test_free_variants();
  test_reuse();
  test_coloring();
  test_stats_exact();
  ts_check_begin("everything freed");
  hak_stats_t end = ts_stats_now();
  CHECK(end.live_bytes == start.live_bytes, "live_bytes %llu at the end, %llu at the start",
        (unsigned long long)end.live_bytes, (unsigned long long)start.live_bytes);
  CHECK(end.allocs - start.allocs == end.frees - start.frees, "%llu allocs but %llu frees",
        (unsigned long long)(end.allocs - start.allocs), (unsigned long long)(end.frees - start.frees));
  CHECK(end.remote_frees == start.remote_frees, "remote frees in a single-threaded program: %llu",
        (unsigned long long)(end.remote_frees - start.remote_frees));
  return ts_check_finish("unit_api");
}
