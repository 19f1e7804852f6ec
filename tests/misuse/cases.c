/* cases.c: the C heap-misuse programs of the misuse suite, one per table row.
 *
 *   misuse_cases CASE      runs one case: the process commits that one misuse
 *   misuse_cases --list    prints "case category description" lines
 *
 * Every case is a small program that commits exactly one heap misuse and then
 * goes on the way a real program would (it frees its other blocks, allocates
 * more of the same size) so that an allocator that checks late still can.
 * Exit status (README.md, "Verdict"):
 *   99  MISSED:  the misuse went unnoticed
 *   98  LEAKED:  missed, and the program could read old contents (a freed
 *                block's, or an earlier block's in a new one)
 *   10  HANDLED: the allocator behaved correctly where a contract says what it
 *                must do (a NULL result, old contents gone): caught
 *    2  SETUP:   the case could not run (pthread_create, mmap failed)
 * Death by a signal (SIGABRT, SIGSEGV, ...) or any other status: caught.
 *
 * Built -O0 -fno-builtin (CMakeLists.txt, run.sh) so that the compiler keeps
 * every malloc, free and memset as written; opaque() hides what a case does on
 * purpose from the compiler's warnings and folding. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "misuse_common.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

/* ---- helpers: what any program does around its bug ------------------------ */

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (p == NULL) setup_fail("malloc failed");
  return p;
}

/* The program's own data in a block (never the secret pattern). */
static void touch(void *p, size_t n) { memset(p, 0x11, n); }

/* A new block of n bytes holding the program's data. */
static char *xblock(size_t n) {
  char *p = xmalloc(n);
  touch(p, n);
  return p;
}

/* What a program does with the block realloc returned (NULL: nothing). */
static void use_and_free(char *q, size_t n) {
  if (q != NULL) { touch(q, n); free(q); }
}

/* Normal activity after the misuse: blocks of the same size allocated,
 * written and freed twice over, then a few small ones: where an allocator that
 * checks on reuse (free-list pointers, canaries, remote lists) looks.
 * Returns MISSED: a program that gets through it noticed nothing. */
static int carry_on(size_t n) {
  void *b[8];
  int k = n > 256 * KiB ? 2 : 8;
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < k; i++) { b[i] = xmalloc(n); memset(b[i], 0x22, n); }
    for (int i = 0; i < k; i++) free(b[i]);
  }
  for (size_t s = 16; s <= 256; s += 16) free(xmalloc(s));
  return MISSED;
}

/* Runs fn(arg) in a new thread, waits for its end, returns its result. */
static void *in_thread(void *(*fn)(void *), void *arg) {
  pthread_t t;
  void *r;
  if (pthread_create(&t, NULL, fn, arg) != 0 || pthread_join(t, &r) != 0) setup_fail("thread");
  return r;
}
static void *t_free(void *p) { free(p); return NULL; }
static size_t t_n; /* the size the thread helpers below allocate */
static void *t_malloc(void *arg) { (void)arg; return xblock(t_n); }
static void *t_malloc_free(void *arg) { void *p = t_malloc(arg); free(p); return p; }

/* A block of n bytes filled with the secret and freed: the stale pointer. */
static char *secret_freed(size_t n) {
  char *p = xmalloc(n);
  fill_secret(p, n);
  free(p);
  return p;
}
static void *t_secret_free(void *arg) { (void)arg; secret_freed(t_n); return NULL; }

/* fn (t_malloc, t_malloc_free, t_secret_free) for a block of n bytes, run in
 * a thread that then exits. */
static char *from_thread(void *(*fn)(void *), size_t n) {
  t_n = n;
  return in_thread(fn, NULL);
}

/* ---- stale pointers --------------------------------------------------------- */

/* What a case does through a stale pointer p to a freed block of n bytes
 * (the table's second parameter of the stale_* cases). */
enum { STALE_FREE, STALE_FREE_IN_THREAD, STALE_WRITE };
static void stale_use(char *p, size_t n, size_t how) {
  switch (how) {
  case STALE_FREE: free(opaque(p)); break;
  case STALE_FREE_IN_THREAD: in_thread(t_free, opaque(p)); break;
  default: memset(opaque(p), 'x', n); break;
  }
}

/* The freed block is handed out again (q, most likely p itself), then the
 * stale pointer is used, then q freed: with STALE_FREE one of the two frees
 * is a double free whether or not q == p. */
static int stale_reused(size_t n, size_t how) {
  char *p = xblock(n);
  free(p);
  char *q = xblock(n);
  stale_use(p, n, how);
  free(q);
  return carry_on(n);
}

/* Another thread frees main's block (a remote free); then the stale pointer
 * is used. */
static int stale_cross_thread(size_t n, size_t how) {
  char *p = xblock(n);
  in_thread(t_free, p);
  stale_use(p, n, how);
  return carry_on(n);
}

/* ---- double free ------------------------------------------------------------ */

static int free_twice(char *p, size_t n) {
  free(p);
  free(opaque(p));
  return carry_on(n);
}

static int df_immediate(size_t n, size_t unused) {
  (void)unused;
  return free_twice(xblock(n), n);
}

/* Other allocations (other sizes, and some of the same) between the frees. */
static int df_later(size_t n, size_t unused) {
  (void)unused;
  char *p = xblock(n);
  void *keep = xmalloc(n);
  free(p);
  void *o[6];
  for (int i = 0; i < 6; i++) o[i] = xmalloc(n / 2 + 16 * (size_t)i + 8);
  for (int i = 0; i < 6; i++) free(o[i]);
  free(opaque(p));
  free(keep);
  return carry_on(n);
}

/* free(p); free(q); free(p): the classic fastbin "dup". */
static int df_interleaved(size_t n, size_t unused) {
  (void)unused;
  char *p = xmalloc(n), *q = xmalloc(n);
  free(p);
  free(q);
  free(opaque(p));
  return carry_on(n);
}

/* Thread A frees p (a remote free), thread B allocates the same size (and
 * may get p), then main frees its stale p, then B's block.  p is main's
 * block, or (owner_exited) one that a thread allocated before it exited. */
static int df_thread_reuse(size_t n, size_t owner_exited) {
  char *p = owner_exited ? from_thread(t_malloc, n) : xblock(n);
  in_thread(t_free, p);
  char *q = from_thread(t_malloc, n);
  free(opaque(p));
  free(q);
  return carry_on(n);
}

/* The allocating thread exited holding the block; main frees it twice. */
static int df_owner_exited(size_t n, size_t unused) {
  (void)unused;
  return free_twice(from_thread(t_malloc, n), n);
}

/* The allocating thread freed the block and exited; main frees it again. */
static int df_owner_exited_freed(size_t n, size_t unused) {
  (void)unused;
  char *p = from_thread(t_malloc_free, n);
  free(opaque(p));
  return carry_on(n);
}

/* realloc(p, 0) frees p (and returns NULL, in glibc); then free(p). */
static int df_realloc0(size_t n, size_t unused) {
  (void)unused;
  char *p = xblock(n);
  void *r = realloc(p, 0);
  free(r); /* NULL, or a minimum block if this allocator keeps one */
  free(opaque(p));
  return carry_on(n);
}

/* realloc to m, then free(p) and free(q): if the block moved, free(p) is the
 * double free; if it grew in place, free(q) is. */
static int df_realloc_moved(size_t n, size_t m) {
  char *p = xblock(n);
  void *blocker = xmalloc(n); /* keeps p from growing in place */
  char *q = realloc(p, m);
  if (q == NULL) setup_fail("realloc");
  free(opaque(p));
  free(q);
  free(blocker);
  return carry_on(n);
}

static int df_aligned(size_t n, size_t align) {
  void *p;
  if (posix_memalign(&p, align, n) != 0) setup_fail("posix_memalign");
  touch(p, n);
  return free_twice(p, n);
}

/* ---- invalid free ------------------------------------------------------------ */

/* free of p + off: a pointer inside a live block.  The program believes the
 * block freed and never frees p (one misuse only). */
static int if_interior(size_t n, size_t off) {
  if (off == 0) off = n / 2;
  char *p = xblock(n);
  free(opaque(p + off));
  return carry_on(n);
}

/* free of p, a pointer into memory that malloc never handed out (stack,
 * static, literal, the program's own mapping), then small blocks. */
static int free_foreign(const char *p) {
  free(opaque(p));
  return carry_on(64);
}

static int if_stack(size_t unused, size_t unused2) {
  (void)unused, (void)unused2;
  char buf[128];
  touch(buf, sizeof buf);
  return free_foreign(buf + 16);
}

static char hak_global_buf[4096];
static int if_global(size_t unused, size_t unused2) {
  (void)unused, (void)unused2;
  touch(hak_global_buf, sizeof hak_global_buf);
  return free_foreign(hak_global_buf + 1024);
}

static int if_literal(size_t unused, size_t unused2) {
  (void)unused, (void)unused2;
  const char *name = "default-name"; /* a string a program forgot to strdup */
  return free_foreign(name);
}

/* free of memory the program mapped itself, at an offset (0: page start) from
 * a 2 MiB boundary when 'aligned' (the granule of hakmem's registry). */
static int if_mmap(size_t n, size_t aligned) {
  size_t len = n + 2 * MiB;
  char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) setup_fail("mmap");
  char *p = aligned ? (char *)(((uintptr_t)m + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1)) : m + 4096;
  touch(p, n);
  free_foreign(p);
  munmap(m, len);
  return MISSED;
}

/* free of an address where nothing was ever allocated, off bytes past the
 * program's first small block: a block-start-looking address in the heap. */
static int if_never_allocated(size_t n, size_t off) {
  char *p = xblock(n);
  free(opaque(p + off));
  carry_on(n);
  free(p);
  return MISSED;
}

/* malloc_usable_size of a pointer that is not a block: stack, or interior. */
static int if_usable_size(size_t n, size_t off) {
  char buf[128];
  touch(buf, sizeof buf);
  char *p = n ? xblock(n) : buf + 16;
  size_t u = malloc_usable_size(opaque(p + off));
  printf("malloc_usable_size returned %zu\n", u);
  return carry_on(64);
}

/* ---- overflow and underflow ------------------------------------------------- */

/* Four blocks of size n; the second gets k bytes written just past its end
 * (a copy of n + k bytes: overflow) or just before its start (underflow),
 * then the program frees it, frees its neighbours, and goes on.  warm: a
 * large block of size n was allocated and freed before (a program handling
 * its second large request). */
static int bad_write(size_t n, size_t k, int under, int warm) {
  if (warm) free(xblock(n));
  char *b[4];
  for (int i = 0; i < 4; i++) b[i] = xblock(n);
  if (under) memset(b[1] - k, 'x', k); /* the bug */
  else memset(b[1], 'x', n + k);       /* the bug */
  free(b[1]);
  free(b[0]);
  free(b[2]);
  free(b[3]);
  return carry_on(n);
}
static int ov(size_t n, size_t over) { return bad_write(n, over, 0, 0); }
static int ov_warm(size_t n, size_t over) { return bad_write(n, over, 0, 1); }
static int un(size_t n, size_t under) { return bad_write(n, under, 1, 0); }
static int un_warm(size_t n, size_t under) { return bad_write(n, under, 1, 1); }

/* ---- write after free --------------------------------------------------------- */

#define WHOLE ((size_t)-1)

/* Writes into a freed block (all of it, or one 8-byte field at offset
 * 'field'), then goes on allocating the same size. */
static int waf(size_t n, size_t field) {
  char *p = xblock(n);
  void *keep = xmalloc(n);
  free(p);
  char *s = opaque(p);
  if (field == WHOLE) memset(s, 'x', n);
  else memset(s + field, 'x', 8);
  carry_on(n);
  free(keep);
  return MISSED;
}

/* ---- read after free, leaked contents ------------------------------------- */

/* Fills a block with the secret, frees it, reads it back: a fault, or no
 * secret left, is HANDLED; the secret still readable is LEAKED.  'later':
 * small allocations happen between the free and the read. */
static int raf(size_t n, size_t later) {
  char *p = secret_freed(n);
  if (later) for (size_t s = 16; s <= 4096; s *= 2) free(xmalloc(s));
  return secret_verdict(opaque(p), n, "the freed block");
}

/* A block of size n filled with the secret and freed; is the secret in a new
 * block of size m? */
static int leak(size_t n, size_t m) {
  secret_freed(n);
  char *q = xmalloc(m);
  return secret_verdict(q, m, "a new block");
}

/* A program that serves several requests with a buffer of size n: each new
 * buffer is checked for the previous request's secret. */
static int leak_repeat(size_t n, size_t rounds) {
  size_t seen = 0;
  for (size_t r = 0; r < rounds; r++) {
    char *q = xmalloc(n);
    seen += count_secret(q, n);
    fill_secret(q, n);
    free(q);
  }
  if (seen) {
    printf("LEAKED: %zu words of an earlier block's secret in new blocks\n", seen);
    return LEAKED;
  }
  printf("HANDLED: no earlier secret in new blocks\n");
  return HANDLED;
}

/* A thread fills a block with the secret, frees it and exits; main allocates. */
static int leak_cross_thread(size_t n, size_t unused) {
  (void)unused;
  from_thread(t_secret_free, n);
  char *q = xmalloc(n);
  return secret_verdict(q, n, "a new block");
}

/* calloc must zero a block even when it recycles one that held the secret. */
static int leak_calloc(size_t n, size_t unused) {
  (void)unused;
  secret_freed(n);
  unsigned char *q = calloc(1, n);
  if (q == NULL) setup_fail("calloc");
  size_t nonzero = 0;
  for (size_t i = 0; i < n; i++) nonzero += q[i] != 0;
  if (nonzero) {
    printf("LEAKED: calloc(1, %zu) has %zu non-zero bytes\n", n, nonzero);
    return LEAKED;
  }
  printf("HANDLED: calloc block zeroed\n");
  return HANDLED;
}

/* ---- realloc and size contracts --------------------------------------------- */

static int re_freed(size_t n, size_t m) {
  char *p = xblock(n);
  free(p);
  use_and_free(realloc(opaque(p), m), m);
  return carry_on(n);
}

static int re_interior(size_t n, size_t off) {
  char *p = xblock(n);
  use_and_free(realloc(opaque(p + off), 2 * n), 2 * n);
  return carry_on(n);
}

static int re_stack(size_t unused, size_t unused2) {
  (void)unused, (void)unused2;
  char buf[128];
  touch(buf, sizeof buf);
  use_and_free(realloc(opaque(buf), 256), 256);
  return carry_on(64);
}

/* A result that must be NULL (errno should then be want: reported, but the
 * NULL alone is the verdict, as the suite's brief counts it). */
static int expect_null(const char *call, void *r, int want) {
  int e = errno;
  if (r == NULL) {
    printf("HANDLED: %s returned NULL, errno %s%s\n", call, strerror(e), e == want ? "" : " (not the standard one)");
    return HANDLED;
  }
  printf("MISSED: %s returned %p\n", call, r);
  return MISSED;
}

static int re_huge(size_t n, size_t m) {
  char *p = xblock(n);
  errno = 0;
  void *r = realloc(p, m);
  int v = expect_null("realloc(p, huge)", r, ENOMEM);
  if (r != NULL) { free(r); return v; }
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0x11) { printf("MISSED: the block changed after a failed realloc\n"); return MISSED; }
  free(p);
  return v;
}

/* calloc(nmemb, size) whose product overflows size_t. */
static int calloc_overflow(size_t nmemb, size_t size) {
  errno = 0;
  void *r = calloc(nmemb, size);
  return expect_null("calloc(overflowing product)", r, ENOMEM);
}

static int reallocarray_overflow(size_t nmemb, size_t size) {
  char *p = xblock(64);
  errno = 0;
  void *r = reallocarray(p, nmemb, size);
  int v = expect_null("reallocarray(overflowing product)", r, ENOMEM);
  free(r != NULL ? r : p);
  return v;
}

/* ---- misc ----------------------------------------------------------------- */

static int malloc_huge(size_t n, size_t unused) {
  (void)unused;
  errno = 0;
  return expect_null("malloc(huge)", malloc(n), ENOMEM);
}

static int memalign_bad(size_t n, size_t align) {
  void *p = (void *)0x1;
  int rc = posix_memalign(&p, align, n);
  if (rc == EINVAL && p == (void *)0x1) {
    printf("HANDLED: posix_memalign(align %zu) returned EINVAL\n", align);
    return HANDLED;
  }
  printf("MISSED: posix_memalign(align %zu) returned %d, pointer %p\n", align, rc, p);
  return MISSED;
}

static int aligned_alloc_bad(size_t n, size_t align) {
  errno = 0;
  return expect_null("aligned_alloc(bad alignment)", aligned_alloc(align, n), EINVAL);
}

/* ---- the table ---------------------------------------------------------------- */

static const struct hak_case hak_cases[] = {
  /* double free */
  {"double_free_small", "double_free", df_immediate, 40, 0, "free twice, 40 B"},
  {"double_free_small16", "double_free", df_immediate, 16, 0, "free twice, 16 B (smallest class)"},
  {"double_free_medium", "double_free", df_immediate, 100 * KiB, 0, "free twice, 100 KiB"},
  {"double_free_medium_page", "double_free", df_immediate, 4 * KiB, 0, "free twice, 4 KiB (a page)"},
  {"double_free_large", "double_free", df_immediate, 1 * MiB, 0, "free twice, 1 MiB"},
  {"double_free_large_odd", "double_free", df_immediate, 3 * MiB + 5, 0, "free twice, 3 MiB + 5 B"},
  {"double_free_large_16m", "double_free", df_immediate, 16 * MiB, 0, "free twice, 16 MiB"},
  {"double_free_small_later", "double_free", df_later, 48, 0, "free, other allocations, free again, 48 B"},
  {"double_free_medium_later", "double_free", df_later, 64 * KiB, 0, "free, other allocations, free again, 64 KiB"},
  {"double_free_large_later", "double_free", df_later, 2 * MiB, 0, "free, other allocations, free again, 2 MiB"},
  {"double_free_small_interleaved", "double_free", df_interleaved, 32, 0, "free(p) free(q) free(p), 32 B"},
  {"double_free_small_reused", "double_free", stale_reused, 40, STALE_FREE, "free, block handed out again, stale free, 40 B"},
  {"double_free_large_reused", "double_free", stale_reused, 1 * MiB, STALE_FREE, "free, block handed out again, stale free, 1 MiB"},
  {"double_free_small_thread_reuse", "double_free", df_thread_reuse, 40, 0, "thread A frees, thread B allocates, stale free, 40 B"},
  {"double_free_small_owner_exited", "double_free", df_owner_exited, 40, 0, "owner thread exited, freed twice, 40 B"},
  {"double_free_small_owner_exited_freed", "double_free", df_owner_exited_freed, 40, 0, "owner freed and exited, freed again, 40 B"},
  {"double_free_small_owner_exited_reuse", "double_free", df_thread_reuse, 40, 1, "owner exited, A frees, B allocates, stale free, 40 B"},
  {"double_free_medium_owner_exited", "double_free", df_owner_exited, 100 * KiB, 0, "owner thread exited, freed twice, 100 KiB"},
  {"double_free_small_cross_thread", "double_free", stale_cross_thread, 40, STALE_FREE, "another thread frees, owner frees, 40 B"},
  {"double_free_small_two_threads", "double_free", stale_cross_thread, 40, STALE_FREE_IN_THREAD, "two other threads free, 40 B"},
  {"double_free_medium_cross_thread", "double_free", stale_cross_thread, 100 * KiB, STALE_FREE, "another thread frees, owner frees, 100 KiB"},
  {"double_free_large_cross_thread", "double_free", stale_cross_thread, 1 * MiB, STALE_FREE, "another thread frees, owner frees, 1 MiB"},
  {"double_free_realloc0", "double_free", df_realloc0, 40, 0, "realloc(p, 0) then free(p), 40 B"},
  {"double_free_realloc_moved", "double_free", df_realloc_moved, 40, 4 * KiB, "realloc 40 B -> 4 KiB, free old and new pointer"},
  {"double_free_large_realloc_moved", "double_free", df_realloc_moved, 1 * MiB, 8 * MiB, "realloc 1 -> 8 MiB, free old and new pointer"},
  {"double_free_aligned", "double_free", df_aligned, 200, 64, "posix_memalign(64, 200), free twice"},
  {"double_free_aligned_page", "double_free", df_aligned, 10 * KiB, 4096, "posix_memalign(4096, 10 KiB), free twice"},

  /* invalid free */
  {"invalid_free_small_plus1", "invalid_free", if_interior, 40, 1, "free(p + 1), 40 B"},
  {"invalid_free_small_plus16", "invalid_free", if_interior, 64, 16, "free(p + 16), 64 B"},
  {"invalid_free_small_half", "invalid_free", if_interior, 48, 0, "free(p + 24), 48 B"},
  {"invalid_free_medium_plus1", "invalid_free", if_interior, 100 * KiB, 1, "free(p + 1), 100 KiB"},
  {"invalid_free_medium_plus16", "invalid_free", if_interior, 100 * KiB, 16, "free(p + 16), 100 KiB"},
  {"invalid_free_medium_half", "invalid_free", if_interior, 100 * KiB, 0, "free(p + 50 KiB), 100 KiB"},
  {"invalid_free_large_plus1", "invalid_free", if_interior, 1 * MiB, 1, "free(p + 1), 1 MiB"},
  {"invalid_free_large_plus16", "invalid_free", if_interior, 1 * MiB, 16, "free(p + 16), 1 MiB"},
  {"invalid_free_large_half", "invalid_free", if_interior, 1 * MiB, 0, "free(p + 512 KiB), 1 MiB"},
  {"invalid_free_misaligned", "invalid_free", if_interior, 64, 8, "free(p + 8), 64 B: not 16-aligned"},
  {"invalid_free_stack", "invalid_free", if_stack, 0, 0, "free of a stack address"},
  {"invalid_free_global", "invalid_free", if_global, 0, 0, "free of a static array"},
  {"invalid_free_literal", "invalid_free", if_literal, 0, 0, "free of a string literal"},
  {"invalid_free_mmap", "invalid_free", if_mmap, 64 * KiB, 0, "free of a page the program mapped"},
  {"invalid_free_mmap_2m", "invalid_free", if_mmap, 64 * KiB, 1, "free of a 2 MiB-aligned address the program mapped"},
  {"invalid_free_never_allocated", "invalid_free", if_never_allocated, 64, 8 * KiB, "free(p + 8 KiB) past the first 64 B block"},
  {"invalid_free_usable_size_stack", "invalid_free", if_usable_size, 0, 0, "malloc_usable_size of a stack address"},
  {"invalid_free_usable_size_interior", "invalid_free", if_usable_size, 64, 16, "malloc_usable_size(p + 16), 64 B"},

  /* overflow: n + k bytes written into a block of n */
  {"overflow_small_1", "overflow", ov, 40, 1, "40 B block, 1 B past the end"},
  {"overflow_small_8", "overflow", ov, 40, 8, "40 B block, 8 B past the end"},
  {"overflow_small_32", "overflow", ov, 40, 32, "40 B block, 32 B past the end"},
  {"overflow_small_1m", "overflow", ov, 40, 1 * MiB, "40 B block, 1 MiB past the end"},
  {"overflow_small16_1", "overflow", ov, 16, 1, "16 B block, 1 B past the end"},
  {"overflow_small24_1", "overflow", ov, 24, 1, "24 B block, 1 B past the end"},
  {"overflow_small64_1", "overflow", ov, 64, 1, "64 B block, 1 B past the end"},
  {"overflow_medium_1", "overflow", ov, 100 * KiB + 8, 1, "100 KiB + 8 B block, 1 B past the end"},
  {"overflow_medium_8", "overflow", ov, 100 * KiB + 8, 8, "100 KiB + 8 B block, 8 B past the end"},
  {"overflow_medium_32", "overflow", ov, 100 * KiB + 8, 32, "100 KiB + 8 B block, 32 B past the end"},
  {"overflow_medium_1m", "overflow", ov, 100 * KiB + 8, 1 * MiB, "100 KiB + 8 B block, 1 MiB past the end"},
  {"overflow_medium1k_1", "overflow", ov, 1000, 1, "1000 B block, 1 B past the end"},
  {"overflow_medium4k_1", "overflow", ov, 4 * KiB, 1, "4 KiB block (a page), 1 B past the end"},
  {"overflow_medium200k_1", "overflow", ov, 200 * KiB, 1, "200 KiB block, 1 B past the end"},
  {"overflow_large_1", "overflow", ov, 1 * MiB + 8, 1, "1 MiB + 8 B block, 1 B past the end"},
  {"overflow_large_8", "overflow", ov, 1 * MiB + 8, 8, "1 MiB + 8 B block, 8 B past the end"},
  {"overflow_large_32", "overflow", ov, 1 * MiB + 8, 32, "1 MiB + 8 B block, 32 B past the end"},
  {"overflow_large_1m", "overflow", ov, 1 * MiB + 8, 1 * MiB, "1 MiB + 8 B block, 1 MiB past the end"},
  {"overflow_large4m_1", "overflow", ov, 4 * MiB, 1, "4 MiB block (page multiple), 1 B past the end"},
  {"overflow_large_warm_1", "overflow", ov_warm, 1 * MiB + 8, 1, "1 MiB + 8 B, a large block freed before, 1 B past the end"},
  {"overflow_large_warm_32", "overflow", ov_warm, 1 * MiB + 8, 32, "1 MiB + 8 B, a large block freed before, 32 B past the end"},

  /* underflow: k bytes written just before a block of n */
  {"underflow_small_1", "underflow", un, 40, 1, "40 B block, 1 B before the start"},
  {"underflow_small_8", "underflow", un, 40, 8, "40 B block, 8 B before the start"},
  {"underflow_small_32", "underflow", un, 40, 32, "40 B block, 32 B before the start"},
  {"underflow_small_1m", "underflow", un, 40, 1 * MiB, "40 B block, 1 MiB before the start"},
  {"underflow_small16_1", "underflow", un, 16, 1, "16 B block, 1 B before the start"},
  {"underflow_medium_1", "underflow", un, 100 * KiB + 8, 1, "100 KiB + 8 B block, 1 B before the start"},
  {"underflow_medium_8", "underflow", un, 100 * KiB + 8, 8, "100 KiB + 8 B block, 8 B before the start"},
  {"underflow_medium_32", "underflow", un, 100 * KiB + 8, 32, "100 KiB + 8 B block, 32 B before the start"},
  {"underflow_medium_1m", "underflow", un, 100 * KiB + 8, 1 * MiB, "100 KiB + 8 B block, 1 MiB before the start"},
  {"underflow_large_1", "underflow", un, 1 * MiB + 8, 1, "1 MiB + 8 B block, 1 B before the start"},
  {"underflow_large_8", "underflow", un, 1 * MiB + 8, 8, "1 MiB + 8 B block, 8 B before the start"},
  {"underflow_large_32", "underflow", un, 1 * MiB + 8, 32, "1 MiB + 8 B block, 32 B before the start"},
  {"underflow_large_1m", "underflow", un, 1 * MiB + 8, 1 * MiB, "1 MiB + 8 B block, 1 MiB before the start"},
  {"underflow_large_warm_8", "underflow", un_warm, 1 * MiB + 8, 8, "1 MiB + 8 B, a large block freed before, 8 B before the start"},

  /* write after free */
  {"write_after_free_small", "write_after_free", waf, 40, WHOLE, "whole 40 B block written after free"},
  {"write_after_free_small_first", "write_after_free", waf, 40, 0, "first 8 B of a 40 B block written after free"},
  {"write_after_free_small_field", "write_after_free", waf, 64, 24, "8 B at offset 24 of a 64 B block written after free"},
  {"write_after_free_medium", "write_after_free", waf, 100 * KiB, WHOLE, "whole 100 KiB block written after free"},
  {"write_after_free_medium_field", "write_after_free", waf, 100 * KiB, 4096, "8 B at offset 4 KiB of a 100 KiB block written after free"},
  {"write_after_free_large", "write_after_free", waf, 1 * MiB, WHOLE, "whole 1 MiB block written after free"},
  {"write_after_free_large_field", "write_after_free", waf, 1 * MiB, 64 * KiB, "8 B at offset 64 KiB of a 1 MiB block written after free"},
  {"write_after_free_large_16m", "write_after_free", waf, 16 * MiB, WHOLE, "whole 16 MiB block written after free"},
  {"write_after_free_small_reused", "write_after_free", stale_reused, 40, STALE_WRITE, "40 B block written through a stale pointer after reuse"},
  {"write_after_free_large_reused", "write_after_free", stale_reused, 1 * MiB, STALE_WRITE, "1 MiB block written through a stale pointer after reuse"},
  {"write_after_free_small_cross_thread", "write_after_free", stale_cross_thread, 40, STALE_WRITE, "another thread frees, owner writes, 40 B"},

  /* read after free: the freed block's secret must not be readable */
  {"read_after_free_large", "read_after_free", raf, 1 * MiB, 0, "secret of a freed 1 MiB block read back"},
  {"read_after_free_large_4m", "read_after_free", raf, 4 * MiB, 0, "secret of a freed 4 MiB block read back"},
  {"read_after_free_large_16m", "read_after_free", raf, 16 * MiB, 0, "secret of a freed 16 MiB block read back"},
  {"read_after_free_large_later", "read_after_free", raf, 1 * MiB, 1, "secret of a freed 1 MiB block read back after small allocations"},
  {"read_after_free_medium200k", "read_after_free", raf, 200 * KiB, 0, "secret of a freed 200 KiB block read back"},

  /* leaked contents: a new block must not hold an earlier block's secret */
  {"leak_small", "leak", leak, 64, 64, "new 64 B block after a freed one"},
  {"leak_medium", "leak", leak, 4 * KiB, 4 * KiB, "new 4 KiB block after a freed one"},
  {"leak_medium_100k", "leak", leak, 100 * KiB, 100 * KiB, "new 100 KiB block after a freed one"},
  {"leak_medium_200k", "leak", leak, 200 * KiB, 200 * KiB, "new 200 KiB block after a freed one"},
  {"leak_large", "leak", leak, 1 * MiB, 1 * MiB, "new 1 MiB block after a freed one"},
  {"leak_large_4m", "leak", leak, 4 * MiB, 4 * MiB, "new 4 MiB block after a freed one"},
  {"leak_large_16m", "leak", leak, 16 * MiB, 16 * MiB, "new 16 MiB block after a freed one"},
  {"leak_large_smaller", "leak", leak, 2 * MiB, 1 * MiB, "new 1 MiB block after a freed 2 MiB one"},
  {"leak_large_repeat", "leak", leak_repeat, 1 * MiB, 4, "four 1 MiB buffers in turn, each checked for the last one's secret"},
  {"leak_large_cross_thread", "leak", leak_cross_thread, 1 * MiB, 0, "new 1 MiB block after another thread's freed one"},
  {"leak_calloc_medium", "leak", leak_calloc, 100 * KiB, 0, "calloc 100 KiB after a freed block with a secret"},
  {"leak_calloc_large", "leak", leak_calloc, 4 * MiB, 0, "calloc 4 MiB after a freed block with a secret"},

  /* realloc misuse, overflowing sizes */
  {"realloc_freed_small", "realloc", re_freed, 40, 80, "realloc of a freed 40 B block"},
  {"realloc_freed_medium", "realloc", re_freed, 100 * KiB, 200 * KiB, "realloc of a freed 100 KiB block"},
  {"realloc_freed_large", "realloc", re_freed, 1 * MiB, 2 * MiB, "realloc of a freed 1 MiB block"},
  {"realloc_interior_small", "realloc", re_interior, 64, 16, "realloc(p + 16), 64 B"},
  {"realloc_interior_large", "realloc", re_interior, 1 * MiB, 4096, "realloc(p + 4 KiB), 1 MiB"},
  {"realloc_stack", "realloc", re_stack, 0, 0, "realloc of a stack address"},
  {"realloc_huge", "realloc", re_huge, 64, SIZE_MAX - 4096, "realloc(p, SIZE_MAX - 4096): NULL + ENOMEM, p intact"},
  {"realloc_calloc_overflow", "realloc", calloc_overflow, SIZE_MAX / 16 + 2, 16, "calloc(SIZE_MAX/16 + 2, 16): product wraps to 16"},
  {"realloc_calloc_overflow_2", "realloc", calloc_overflow, SIZE_MAX / 2 + 2, 2, "calloc(SIZE_MAX/2 + 2, 2): product wraps to 2"},
  {"realloc_reallocarray_overflow", "realloc", reallocarray_overflow, SIZE_MAX / 8 + 2, 8, "reallocarray with a wrapping product"},

  /* misc */
  {"misc_malloc_size_max", "misc", malloc_huge, SIZE_MAX, 0, "malloc(SIZE_MAX): NULL + ENOMEM"},
  {"misc_malloc_ptrdiff_max", "misc", malloc_huge, (size_t)PTRDIFF_MAX + 1, 0, "malloc(PTRDIFF_MAX + 1): NULL + ENOMEM"},
  {"misc_posix_memalign_npot", "misc", memalign_bad, 64, 24, "posix_memalign(24, 64): EINVAL"},
  {"misc_posix_memalign_small", "misc", memalign_bad, 64, 4, "posix_memalign(4, 64): EINVAL (below sizeof(void *))"},
  {"misc_posix_memalign_zero", "misc", memalign_bad, 64, 0, "posix_memalign(0, 64): EINVAL"},
  {"misc_aligned_alloc_npot", "misc", aligned_alloc_bad, 96, 24, "aligned_alloc(24, 96): NULL + EINVAL"},
  {"misc_aligned_alloc_zero", "misc", aligned_alloc_bad, 64, 0, "aligned_alloc(0, 64): NULL + EINVAL"},
  {"misc_free_large_page", "misc", if_interior, 4 * MiB, 4096, "free(p + 4 KiB), 4 MiB block"},
  {"misc_free_large_2m", "misc", if_interior, 4 * MiB, 2 * MiB, "free(p + 2 MiB), 4 MiB block"},
  {"misc_free_medium_64k", "misc", if_interior, 200 * KiB, 64 * KiB, "free(p + 64 KiB), 200 KiB block"},
  {NULL, NULL, NULL, 0, 0, NULL},
};

int main(int argc, char **argv) { return hak_case_main(hak_cases, argc, argv); }
