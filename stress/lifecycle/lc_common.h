/* Shared helpers for the lifecycle stress programs (churn, return, fork).
 *
 * These programs are plain malloc/free users so that one binary runs under
 * hakmem (LD_PRELOAD), glibc and mimalloc alike.  The helpers themselves
 * avoid the heap: output goes through a stack buffer and write(2), and
 * /proc/self/status is read with open/read, so the allocator counters seen at
 * exit contain only the program's own blocks (stdio would malloc a stdout
 * buffer that is never freed).
 */
#ifndef LC_COMMON_H
#define LC_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------- output without touching the heap ---------- */

static void lc_write_all(int fd, const char *s, size_t n)
{
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    s += w;
    n -= (size_t)w;
  }
}

__attribute__((format(printf, 2, 3)))
static void lc_fdprintf(int fd, const char *fmt, ...)
{
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n >= sizeof buf)
    n = (int)sizeof buf - 1;
  lc_write_all(fd, buf, (size_t)n);
}

#define lc_out(...) lc_fdprintf(1, __VA_ARGS__)
#define lc_err(...) lc_fdprintf(2, __VA_ARGS__)

/* A failed check: say where and why, and end the process with status 1.
 * _exit, not exit: other threads may still be inside the allocator, and the
 * exit report of a process that already failed is of no use. */
#define LC_FAIL(...)                                                    \
  do {                                                                  \
    lc_err("FAIL %s:%d: ", __FILE__, __LINE__);                         \
    lc_err(__VA_ARGS__);                                                \
    lc_err("\n");                                                       \
    _exit(1);                                                           \
  } while (0)

/* ---------- memory figures from /proc/self/status ---------- */

typedef struct lc_mem {
  long rss_kib; /* VmRSS: resident now */
  long hwm_kib; /* VmHWM: peak resident since start */
} lc_mem_t;

static long lc_status_field(const char *buf, const char *key)
{
  const char *p = strstr(buf, key);
  if (!p)
    return -1;
  p += strlen(key);
  while (*p == ' ' || *p == '\t')
    p++;
  return strtol(p, NULL, 10);
}

static lc_mem_t lc_mem_now(void)
{
  lc_mem_t m = {-1, -1};
  char buf[8192];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    LC_FAIL("open /proc/self/status: %s", strerror(errno));
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    len += (size_t)r;
    if (len == sizeof buf - 1)
      break;
  }
  close(fd);
  buf[len] = '\0';
  m.rss_kib = lc_status_field(buf, "\nVmRSS:");
  m.hwm_kib = lc_status_field(buf, "\nVmHWM:");
  if (m.rss_kib < 0 || m.hwm_kib < 0)
    LC_FAIL("VmRSS/VmHWM not found in /proc/self/status");
  return m;
}

static double lc_mib(long kib) { return (double)kib / 1024.0; }

/* ---------- time ---------- */

static double lc_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------- random numbers (per thread state, no locking) ---------- */

static inline uint64_t lc_rand(uint64_t *s)
{
  /* xorshift64*: state must be non-zero */
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

static inline uint64_t lc_seed(uint64_t a, uint64_t b)
{
  uint64_t z = a * 0x9E3779B97F4A7C15ULL + b + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return z ? z : 1;
}

/* Log-uniform size in [lo, hi]: as many blocks of 16-31 B as of 4-8 KiB,
 * which is roughly how real programs spread their requests. */
static inline size_t lc_size_log(uint64_t *s, size_t lo, size_t hi)
{
  unsigned lo_b = 63u - (unsigned)__builtin_clzll(lo);
  unsigned hi_b = 63u - (unsigned)__builtin_clzll(hi);
  unsigned e = lo_b + (unsigned)(lc_rand(s) % (hi_b - lo_b + 1));
  size_t base = (size_t)1 << e;
  size_t n = base + (size_t)(lc_rand(s) % base);
  if (n < lo)
    n = lo;
  if (n > hi)
    n = hi;
  return n;
}

/* ---------- block contents: detect blocks handed out twice ----------
 *
 * A block is stamped with a 64-bit tag derived from (owner, index, size):
 * the whole block is filled for sizes up to 256 B, otherwise the first and
 * last 16 bytes plus one word in every 4 KiB page (which also makes every
 * page of the block resident, so RSS reflects what the program holds).
 * lc_check() verifies the stamp before the block is freed; if the allocator
 * gave two live requests overlapping memory, one stamp is overwritten.
 */
static inline uint64_t lc_tag(uint64_t owner, uint64_t idx, size_t size)
{
  return lc_seed(owner ^ ((uint64_t)size << 40), idx);
}

static inline void lc_fill(void *p, size_t size, uint64_t tag)
{
  unsigned char *b = (unsigned char *)p;
  if (size <= 256) {
    for (size_t i = 0; i < size; i++)
      b[i] = (unsigned char)(tag >> ((i & 7) * 8)) ^ (unsigned char)i;
    return;
  }
  memcpy(b, &tag, 8);
  memcpy(b + 8, &size, 8);
  for (size_t off = 4096; off + 8 <= size - 16; off += 4096) {
    uint64_t v = tag ^ off;
    memcpy(b + off, &v, 8);
  }
  uint64_t t2 = ~tag;
  memcpy(b + size - 16, &t2, 8);
  memcpy(b + size - 8, &size, 8);
}

/* Returns 1 if the stamp is intact. */
static inline int lc_check(const void *p, size_t size, uint64_t tag)
{
  const unsigned char *b = (const unsigned char *)p;
  if (size <= 256) {
    for (size_t i = 0; i < size; i++)
      if (b[i] != ((unsigned char)(tag >> ((i & 7) * 8)) ^ (unsigned char)i))
        return 0;
    return 1;
  }
  uint64_t v;
  size_t sz;
  memcpy(&v, b, 8);
  memcpy(&sz, b + 8, 8);
  if (v != tag || sz != size)
    return 0;
  for (size_t off = 4096; off + 8 <= size - 16; off += 4096) {
    memcpy(&v, b + off, 8);
    if (v != (tag ^ off))
      return 0;
  }
  memcpy(&v, b + size - 16, 8);
  memcpy(&sz, b + size - 8, 8);
  return v == ~tag && sz == size;
}

/* ---------- tiny argument parsing: --name value ---------- */

static long lc_arg_long(int argc, char **argv, const char *name, long dflt)
{
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) {
      char *end;
      errno = 0;
      long v = strtol(argv[i + 1], &end, 10);
      if (errno || *end)
        LC_FAIL("bad value for %s: %s", name, argv[i + 1]);
      return v;
    }
  return dflt;
}

static double lc_arg_double(int argc, char **argv, const char *name, double dflt)
{
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) {
      char *end;
      errno = 0;
      double v = strtod(argv[i + 1], &end);
      if (errno || *end)
        LC_FAIL("bad value for %s: %s", name, argv[i + 1]);
      return v;
    }
  return dflt;
}

#endif /* LC_COMMON_H */
