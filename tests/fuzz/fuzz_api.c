/* fuzz_api: a libFuzzer target for the prefixed hak_* API.
 *
 * The input is a program: each operation is an opcode byte and a few
 * argument bytes (a slot, a size, an alignment), run over a table of SLOTS
 * live blocks.  Every block is filled with a pattern derived from its own
 * id and the byte offset, and checked whenever the program touches it:
 *   - realloc keeps the prefix (min of the old and new size), also when it
 *     moves the block or fails (then the block is unchanged);
 *   - free and free_sized: the block was intact until then;
 *   - calloc is zero; every block is 16-aligned, and aligned to what
 *     posix_memalign / aligned_alloc / memalign / valloc asked for;
 *   - malloc_usable_size >= the size asked for, and never shrinks a live
 *     block's contents;
 *   - no new block overlaps a live one;
 *   - a NULL comes only from memory running out: an impossible size, or a
 *     mapping failed on purpose (the FAULT opcode: hakmem's fault injection,
 *     src/fault.h, for the rest of the input), and then with errno ENOMEM.
 * Any mismatch aborts (libFuzzer saves the input).
 *
 * Blocks above 64 KiB are checked on a sample: their first and last 4 KiB
 * and the first word of every page, of every 16th page above 4 MiB (a page
 * lost, moved or zeroed shows).
 * The live total is capped at 256 MiB and one block at 64 MiB.  A helper
 * thread, driven synchronously (so a run stays deterministic), frees blocks
 * of the main thread (remote frees), allocates blocks the main thread later
 * frees, and exits and restarts (its heap is abandoned and adopted).
 *
 * Build and run: scripts/fuzz.sh [SECONDS]. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hakmem.h"
#include "fault.h"
#include "support/fill.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define SLOTS 64
#define LIVE_MAX (256 * MiB)
#define BLOCK_MAX (64 * MiB)
#define SAMPLE_ABOVE (64 * KiB)

typedef struct {
  unsigned char *p;
  size_t n;          /* bytes asked for (the pattern covers them) */
  uint64_t id;       /* pattern seed */
} slot_t;

static slot_t slot[SLOTS];
static size_t live_bytes;
static uint64_t next_id;
static bool faults_on;   /* fault injection active: NULL + ENOMEM is allowed */

#define DIE(...)                        \
  do {                                  \
    fprintf(stderr, "fuzz_api: " __VA_ARGS__); \
    fputc('\n', stderr);                \
    abort();                            \
  } while (0)

/* ------------------------------------------------------------ patterns */

/* The unit tests' word pattern (tests/support/fill.h), never the zero word:
 * a zeroed page shows. */
static inline uint64_t mix(uint64_t id, uint64_t k)
{
  return ts_words_mix(id, k) | 1;
}

/* The pattern byte at offset i of block id. */
static inline unsigned char pat(uint64_t id, size_t i) { return (unsigned char)(mix(id, i >> 3) >> ((i & 7) * 8)); }

/* Apply fill (write) or check over [a, b) of p, a word at a time where whole. */
static void range(unsigned char *p, size_t a, size_t b, uint64_t id, bool write, const char *what)
{
  size_t i = a;
  while (i < b) {
    if ((i & 7) == 0 && i + 8 <= b) {
      uint64_t v = mix(id, i >> 3), w;
      if (write) {
        memcpy(p + i, &v, 8);
      } else {
        memcpy(&w, p + i, 8);
        if (w != v) DIE("%s: block %p id %llu: word at offset %zu is %#llx, expected %#llx", what, (void *)p,
                        (unsigned long long)id, i, (unsigned long long)w, (unsigned long long)v);
      }
      i += 8;
    } else {
      unsigned char v = pat(id, i);
      if (write) p[i] = v;
      else if (p[i] != v)
        DIE("%s: block %p id %llu: byte at offset %zu is %#x, expected %#x", what, (void *)p,
            (unsigned long long)id, i, p[i], v);
      i++;
    }
  }
}

/* The pattern of a block of n bytes over its first limit bytes: all of it,
 * or above SAMPLE_ABOVE the sample (first and last 4 KiB, a word a page). */
static void pattern(unsigned char *p, size_t n, size_t limit, uint64_t id, bool write, const char *what)
{
  if (limit > n) limit = n;
  if (n <= SAMPLE_ABOVE) {
    range(p, 0, limit, id, write, what);
    return;
  }
  /* A word every page up to 4 MiB, every 16th page beyond (each sampled
   * page is a page fault of the kernel's: they were most of the run time). */
  size_t stride = n <= 4 * MiB ? 4096 : 64 * KiB;
  range(p, 0, limit < 4096 ? limit : 4096, id, write, what);
  for (size_t o = stride; o + 8 <= limit && o < n - 4096; o += stride) range(p, o, o + 8, id, write, what);
  if (limit > n - 4096) range(p, n - 4096, limit, id, write, what);
}

/* calloc's zeroes over the same sample. */
static void check_zero(const unsigned char *p, size_t n)
{
  static const unsigned char zero[4096];
  size_t full = n <= 4 * MiB ? n : 4096;
  for (size_t o = 0; o < full; o += 4096) {
    size_t len = n - o < 4096 ? n - o : 4096;
    if (memcmp(p + o, zero, len) != 0) DIE("calloc(%zu): non-zero byte near offset %zu", n, o);
  }
  for (size_t o = full; o < n; o += 64 * KiB)
    if (p[o] != 0 || p[n - 1] != 0) DIE("calloc(%zu): non-zero byte at offset %zu", n, o);
}

/* --------------------------------------------------------------- input */

typedef struct { const uint8_t *d; size_t n, i; } input_t;

static unsigned byte(input_t *in) { return in->i < in->n ? in->d[in->i++] : 0; }
static unsigned u16(input_t *in) { unsigned lo = byte(in); return lo | byte(in) << 8; }

/* A size: tiny, small, medium (around the 256 KiB class limit), or large. */
static size_t size_arg(input_t *in)
{
  unsigned k = byte(in);
  switch (k >> 6) {
  case 0: return k & 63 ? byte(in) : 0;
  case 1: return u16(in) % 4097;
  case 2: return (size_t)u16(in) * 5;                   /* 0 .. 320 KiB */
  default: {   /* 256 KiB .. 4 MiB, or near BLOCK_MAX for k == 255 (every
                 * 2 MiB region a block covers is a huge page the kernel
                 * zeroes when the pattern touches it: most of the run time) */
    if (k == 255) return BLOCK_MAX - u16(in);
    return 256 * KiB + ((size_t)u16(in) << (k % 7));
  }
  }
}

/* An alignment: mostly powers of two 1 .. 8 MiB, sometimes not one. */
static size_t align_arg(input_t *in)
{
  unsigned k = byte(in);
  if (k >= 240) return (size_t)(k - 230) * 3;   /* not a power of two (or 0) */
  return (size_t)1 << (k % 24);
}

/* ------------------------------------------------------ block bookkeeping */

static void check_new(void *p, size_t n, size_t align, const char *what)
{
  if ((uintptr_t)p % 16 != 0) DIE("%s(%zu): %p not 16-aligned", what, n, p);
  if (align > 1 && (uintptr_t)p % align != 0) DIE("%s(%zu): %p not %zu-aligned", what, n, p, align);
  size_t u = hak_malloc_usable_size(p);
  if (u < n) DIE("%s(%zu): usable size %zu", what, n, u);
  for (int i = 0; i < SLOTS; i++) {
    slot_t *s = &slot[i];
    if (s->p == NULL) continue;
    size_t sn = s->n ? s->n : 1, nn = n ? n : 1;
    if ((unsigned char *)p < s->p + sn && s->p < (unsigned char *)p + nn)
      DIE("%s(%zu): %p overlaps the live block %p (%zu bytes)", what, n, p, (void *)s->p, s->n);
  }
}

/* A NULL result: allowed only out of memory, with ENOMEM. */
static void check_null(size_t n, int err, const char *what)
{
  bool impossible = n > PTRDIFF_MAX / 2;
  if (!faults_on && !impossible) DIE("%s(%zu) returned NULL (errno %d) with memory available", what, n, err);
  if (err != ENOMEM) DIE("%s(%zu) returned NULL with errno %d, not ENOMEM", what, n, err);
}

static void put(slot_t *s, void *p, size_t n)
{
  s->p = p;
  s->n = n;
  s->id = ++next_id;
  live_bytes += n;
  pattern(s->p, n, n, s->id, true, "fill");
}

static void drop(slot_t *s, int how)
{
  if (s->p == NULL) return;
  pattern(s->p, s->n, s->n, s->id, false, "free");
  if (how == 0) hak_free(s->p);
  else hak_free_sized(s->p, s->n);
  live_bytes -= s->n;
  s->p = NULL;
}

static bool fits(slot_t *s, size_t n) { return n <= BLOCK_MAX && live_bytes - (s->p ? s->n : 0) + n <= LIVE_MAX; }

/* ------------------------------------------------------- helper thread */

/* One request at a time; the main thread waits for its completion. */
enum { H_NONE, H_FREE, H_ALLOC, H_EXIT };
static pthread_mutex_t h_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t h_cond = PTHREAD_COND_INITIALIZER;
static int h_req;
static void *h_ptr;
static size_t h_size;
static pthread_t h_thread;
static bool h_running;

static void *helper(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&h_lock);
  for (;;) {
    while (h_req == H_NONE) pthread_cond_wait(&h_cond, &h_lock);
    int r = h_req;
    if (r == H_FREE) hak_free(h_ptr);
    else if (r == H_ALLOC) h_ptr = hak_malloc(h_size);
    h_req = H_NONE;
    pthread_cond_broadcast(&h_cond);
    if (r == H_EXIT) break;
  }
  pthread_mutex_unlock(&h_lock);
  return NULL;
}

static void helper_call(int req)
{
  if (!h_running) {
    if (req == H_EXIT) return;
    if (pthread_create(&h_thread, NULL, helper, NULL) != 0) DIE("pthread_create");
    h_running = true;
  }
  pthread_mutex_lock(&h_lock);
  h_req = req;
  pthread_cond_broadcast(&h_cond);
  while (h_req != H_NONE) pthread_cond_wait(&h_cond, &h_lock);
  pthread_mutex_unlock(&h_lock);
  if (req == H_EXIT) {
    pthread_join(h_thread, NULL);
    h_running = false;
  }
}

/* ---------------------------------------------------------------- run */

static void dump_smaps(void)
{
  char cmd[128];
  snprintf(cmd, sizeof cmd, "cp /proc/%d/smaps %s", (int)getpid(), getenv("FUZZ_API_SMAPS"));
  if (system(cmd) != 0) fprintf(stderr, "smaps copy failed\n");
}

/* FUZZ_API_STATS=1: hakmem's counters at exit (HAKMEM_STATS's line). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  if (getenv("FUZZ_API_STATS") != NULL) setenv("HAKMEM_STATS", "1", 1);
  if (getenv("FUZZ_API_SMAPS") != NULL) atexit(dump_smaps);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  input_t in = {data, size, 0};
  while (in.i < in.n) {
    unsigned op = byte(&in) % 16;
    slot_t *s = &slot[byte(&in) % SLOTS];
    size_t n, align;
    void *p;
    int err;
    switch (op) {
    case 0:   /* malloc */
    case 1:
      n = size_arg(&in);
      if (!fits(s, n)) break;
      drop(s, 0);
      errno = 0;
      p = hak_malloc(n);
      err = errno;
      if (p == NULL) { check_null(n, err, "malloc"); break; }
      check_new(p, n, 0, "malloc");
      put(s, p, n);
      break;
    case 2: { /* calloc */
      size_t m = 1 + byte(&in) % 8;
      n = size_arg(&in) / m;
      if (!fits(s, n * m)) break;
      drop(s, 0);
      errno = 0;
      p = hak_calloc(m, n);
      err = errno;
      if (p == NULL) { check_null(n * m, err, "calloc"); break; }
      check_zero(p, n * m);
      check_new(p, n * m, 0, "calloc");
      put(s, p, n * m);
      break;
    }
    case 3:   /* realloc: grow, shrink, to 0, from NULL */
    case 4: {
      unsigned k = byte(&in);
      if (k < 16) n = 0;
      else if (k < 96 && s->p != NULL) n = s->n * (k - 16) / 80;            /* shrink */
      else if (k < 160 && s->p != NULL) n = s->n + s->n / 4 + (k - 96) * 4096; /* grow */
      else n = size_arg(&in);
      if (!fits(s, n)) break;
      size_t old = s->p ? s->n : 0;
      if (s->p) pattern(s->p, s->n, s->n, s->id, false, "before realloc");
      errno = 0;
      p = hak_realloc(s->p, n);
      err = errno;
      if (n == 0 && s->p != NULL) {   /* glibc's semantics: freed, NULL */
        if (p != NULL) DIE("realloc(p, 0) returned %p", p);
        live_bytes -= s->n;
        s->p = NULL;
        break;
      }
      if (p == NULL) {
        check_null(n, err, "realloc");
        if (s->p) pattern(s->p, s->n, s->n, s->id, false, "after a failed realloc");
        break;
      }
      size_t keep = old < n ? old : n;
      /* The prefix moved along (what the old size's pattern covered below
       * the new size); then the block gets a fresh pattern. */
      if (s->p) {
        pattern(p, old, keep, s->id, false, "realloc prefix");
        live_bytes -= s->n;
        s->p = NULL;
      }
      check_new(p, n, 0, "realloc");
      put(s, p, n);
      break;
    }
    case 5:   /* posix_memalign */
    case 6: { /* aligned_alloc, memalign, valloc, pvalloc */
      align = align_arg(&in);
      n = size_arg(&in);
      unsigned which = op == 5 ? 0 : 1 + byte(&in) % 4;
      size_t need = which == 4 ? (n + 4095) / 4096 * 4096 + (n == 0) * 4096 : n;
      if (!fits(s, need) || align > 8 * MiB) break;
      drop(s, 0);
      bool pow2 = align != 0 && (align & (align - 1)) == 0;
      errno = 0;
      if (which == 0) {
        int saved = errno = 4321;
        p = (void *)1;
        int rc = hak_posix_memalign(&p, align, n);
        /* errno: ENOMEM after a failure (as glibc), untouched otherwise */
        if (rc == ENOMEM ? errno != ENOMEM : errno != saved) DIE("posix_memalign: errno %d after %d", errno, rc);
        if (align < sizeof(void *) || !pow2) {
          if (rc != EINVAL || p != (void *)1) DIE("posix_memalign(%zu, %zu): %d", align, n, rc);
          break;
        }
        if (rc != 0) {
          if (p != (void *)1) DIE("failed posix_memalign wrote *out");
          check_null(n, rc, "posix_memalign");
          break;
        }
      } else if (which == 1) {
        p = hak_aligned_alloc(align, n);
        if (!pow2) {
          if (p != NULL || errno != EINVAL) DIE("aligned_alloc(%zu): %p errno %d", align, p, errno);
          break;
        }
      } else if (which == 2) {
        p = hak_memalign(align, n);
        if (!pow2 && align != 0) { size_t a = 16; while (a < align) a <<= 1; align = a; }
      } else {
        p = which == 3 ? hak_valloc(n) : hak_pvalloc(n);
        align = 4096;
        n = need;
      }
      err = errno;
      if (p == NULL) { check_null(n, err, "aligned allocation"); break; }
      check_new(p, n, align, "aligned allocation");
      put(s, p, n);
      break;
    }
    case 7:   /* free */
      drop(s, 0);
      break;
    case 8:   /* free_sized */
      drop(s, 1);
      break;
    case 9:   /* malloc_usable_size, contents */
      if (s->p == NULL) break;
      if (hak_malloc_usable_size(s->p) < s->n) DIE("usable size below %zu", s->n);
      pattern(s->p, s->n, s->n, s->id, false, "check");
      break;
    case 10: { /* reallocarray, with an overflowing product sometimes */
      size_t m = byte(&in);
      n = size_arg(&in);
      if (m == 255) { /* overflow: NULL, ENOMEM, the block unchanged */
        errno = 0;
        p = hak_reallocarray(s->p, SIZE_MAX / 2, 3);
        if (p != NULL || errno != ENOMEM) DIE("reallocarray overflow: %p errno %d", p, errno);
        if (s->p) pattern(s->p, s->n, s->n, s->id, false, "after reallocarray overflow");
        break;
      }
      size_t total = m * n, old = s->p ? s->n : 0;
      if (m == 0 || total == 0 || !fits(s, total)) break;
      errno = 0;
      p = hak_reallocarray(s->p, m, n);
      err = errno;
      if (p == NULL) {
        check_null(total, err, "reallocarray");
        if (s->p) pattern(s->p, s->n, s->n, s->id, false, "after a failed reallocarray");
        break;
      }
      if (s->p) {
        pattern(p, old, old < total ? old : total, s->id, false, "reallocarray prefix");
        live_bytes -= s->n;
        s->p = NULL;
      }
      check_new(p, total, 0, "reallocarray");
      put(s, p, total);
      break;
    }
    case 11: { /* a huge request: NULL, ENOMEM */
      unsigned k = byte(&in);
      errno = 0;
      p = k & 1 ? hak_malloc(SIZE_MAX - k) : hak_calloc(SIZE_MAX / 3, 5);
      if (p != NULL || errno != ENOMEM) DIE("huge request: %p errno %d", p, errno);
      break;
    }
    case 12: { /* fault injection for the rest of the input (or off) */
      unsigned k = byte(&in);
      long nth = 1 + (long)(k % 8), every = (long)((k >> 3) % 4);
      /* mmap and mremap (grow, move); not munmap: a failed munmap abandons
       * its range by design (src/os.c), so over a long run the address
       * space -- and ASan's shadow, committed for every fresh address --
       * grew without bound (4 GiB RSS in 10 minutes).  unit_faults tests it. */
      unsigned kinds = byte(&in) & (HAK_FAULT_MAP | HAK_FAULT_GROW | HAK_FAULT_MOVE);
      hak_test_fail_mmap(kinds ? nth : 0, every, kinds);
      faults_on = kinds != 0;
      break;
    }
    case 13:  /* the helper frees a block of ours (a remote free) */
      if (s->p == NULL) break;
      pattern(s->p, s->n, s->n, s->id, false, "before a remote free");
      h_ptr = s->p;
      helper_call(H_FREE);
      live_bytes -= s->n;
      s->p = NULL;
      break;
    case 14:  /* the helper allocates a block; we free it later */
      n = size_arg(&in);
      if (!fits(s, n)) break;
      drop(s, 0);
      h_size = n;
      errno = 0;
      helper_call(H_ALLOC);
      p = h_ptr;
      err = errno;   /* errno is per thread: only NULL-ness is checked */
      (void)err;
      if (p == NULL) {
        if (!faults_on) DIE("helper malloc(%zu) returned NULL", n);
        break;
      }
      check_new(p, n, 0, "helper malloc");
      put(s, p, n);
      break;
    default:  /* the helper exits (its heap is abandoned), or hak_collect */
      if (byte(&in) & 1) helper_call(H_EXIT);
      else hak_collect();
      break;
    }
  }
  /* Leave nothing: every block checked and freed, injection off. */
  hak_test_fail_mmap(0, 0, 0);
  faults_on = false;
  for (int i = 0; i < SLOTS; i++) drop(&slot[i], i & 1);
  if (live_bytes != 0) DIE("live_bytes %zu after freeing everything", live_bytes);
  return 0;
}
