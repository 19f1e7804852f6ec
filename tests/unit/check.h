/* check.h: a minimal check framework for hakmem's C tests.
 *
 * CHECK(cond, fmt, ...) counts a check; when cond is false it prints the
 * file, line, condition and a formatted explanation on stderr and counts a
 * failure.  Output is capped so that a broken allocator cannot flood the log.
 * check_finish() prints a summary and returns the process exit status.
 *
 * The tests print with stdio, which under the prefixed-API build uses the C
 * library's own malloc, never hakmem's: printing never disturbs the counters
 * the tests read.
 */
#ifndef HAKMEM_TEST_CHECK_H
#define HAKMEM_TEST_CHECK_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long check_count;
static unsigned long check_failures;
static const char *check_section = "";

#define CHECK_MAX_PRINTED 60

static void check_report(const char *file, int line, const char *cond,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void check_report(const char *file, int line, const char *cond,
                         const char *fmt, ...) {
  check_failures++;
  if (check_failures > CHECK_MAX_PRINTED) {
    if (check_failures == CHECK_MAX_PRINTED + 1)
      fprintf(stderr, "FAIL ... (further failures counted, not printed)\n");
    return;
  }
  fprintf(stderr, "FAIL [%s] %s:%d: %s: ", check_section, file, line, cond);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
}

/* Evaluates cond once; the message arguments only when it failed. */
#define CHECK(cond, ...)                                          \
  do {                                                            \
    check_count++;                                                \
    if (!(cond)) check_report(__FILE__, __LINE__, #cond, __VA_ARGS__); \
  } while (0)

/* A condition the rest of a test cannot go on without (a NULL block). */
#define REQUIRE(cond, ...)                                        \
  do {                                                            \
    check_count++;                                                \
    if (!(cond)) {                                                \
      check_report(__FILE__, __LINE__, #cond, __VA_ARGS__);       \
      fprintf(stderr, "FATAL: cannot continue after this failure\n"); \
      exit(1);                                                    \
    }                                                             \
  } while (0)

static inline void check_begin(const char *name) {
  check_section = name;
  printf("-- %s\n", name);
  fflush(stdout);
}

static inline int check_finish(const char *prog) {
  printf("%s: %lu checks, %lu failed\n", prog, check_count, check_failures);
  fflush(stdout);
  return check_failures ? 1 : 0;
}

/* A pattern that depends on the block (seed) and the offset, so that two
 * overlapping blocks overwrite each other's bytes with different values.
 * Written and checked a 64-bit word at a time (fast, also under sanitizers):
 * the word at offset 8k is mix(seed, k); the bytes of a final partial word
 * are the low bytes of its value. */
static inline uint64_t check_mix(uintptr_t seed, size_t k) {
  uint64_t x = (uint64_t)seed * 0x9E3779B97F4A7C15ull + k;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return x;
}

static inline void check_fill(void *p, size_t n, uintptr_t seed) {
  unsigned char *b = p;
  size_t k = 0;
  for (; (k + 1) * 8 <= n; k++) {
    uint64_t v = check_mix(seed, k);
    memcpy(b + k * 8, &v, 8);
  }
  uint64_t v = check_mix(seed, k);
  for (size_t i = k * 8; i < n; i++, v >>= 8) b[i] = (unsigned char)v;
}

/* Returns the first offset whose byte differs from the pattern, or n. */
static inline size_t check_verify(const void *p, size_t n, uintptr_t seed) {
  const unsigned char *b = p;
  size_t k = 0;
  for (; (k + 1) * 8 <= n; k++) {
    uint64_t v = check_mix(seed, k), w;
    memcpy(&w, b + k * 8, 8);
    if (w != v) {
      for (size_t i = 0; i < 8; i++, v >>= 8)
        if (b[k * 8 + i] != (unsigned char)v) return k * 8 + i;
    }
  }
  uint64_t v = check_mix(seed, k);
  for (size_t i = k * 8; i < n; i++, v >>= 8)
    if (b[i] != (unsigned char)v) return i;
  return n;
}

/* Returns the offset of the first non-zero byte, or n. */
static inline size_t check_first_nonzero(const void *p, size_t n) {
  static const unsigned char zero[4096];
  const unsigned char *b = p;
  for (size_t off = 0; off < n; off += sizeof zero) {
    size_t len = n - off < sizeof zero ? n - off : sizeof zero;
    if (memcmp(b + off, zero, len) != 0) {
      for (size_t i = off; i < off + len; i++)
        if (b[i]) return i;
    }
  }
  return n;
}

#endif
