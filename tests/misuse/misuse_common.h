/* misuse_common.h: what the misuse-suite programs (cases.c, cases_cxx.cpp)
 * share: the exit statuses of the verdict, the secret pattern, and main().
 *
 * A program is a table of cases (struct hak_case, ended by a NULL name);
 * hak_case_main runs the one named by argv[1] in this process and exits with
 * its status, or prints the table with --list.  Valid C11 and C++17. */
#ifndef HAKMEM_MISUSE_COMMON_H
#define HAKMEM_MISUSE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit statuses (README.md, "Verdict"). */
enum { HANDLED = 10, LEAKED = 98, MISSED = 99, SETUP = 2 };

/* One case: run(a, b) commits the misuse and returns its status.
 * Invariant: name is unique in its table and starts with its category. */
struct hak_case {
  const char *name;
  const char *category;
  int (*run)(size_t a, size_t b);
  size_t a, b;
  const char *what;
};

/* Returns p unchanged, but the compiler can no longer see where it points:
 * no warning for a free of a stack address, no folding of a stale read. */
static inline void *opaque(const void *p) {
  void *q = (void *)(uintptr_t)p;
  __asm__ volatile("" : "+r"(q));
  return q;
}

static inline void setup_fail(const char *what) {
  printf("SETUP: %s failed\n", what);
  exit(SETUP);
}

/* The secret: a 64-bit word no allocator writes, stored in every aligned
 * word of a block. */
#define HAK_SECRET UINT64_C(0x5ec2e75ec2e7c0de)

static inline void fill_secret(void *p, size_t n) {
  uint64_t *w = (uint64_t *)p;
  for (size_t i = 0; i < n / 8; i++) w[i] = HAK_SECRET;
}

/* Aligned words of [p, p+n) equal to the secret; volatile reads, so a stale
 * read really happens (and faults if the memory is gone). */
static inline size_t count_secret(const void *p, size_t n) {
  const volatile uint64_t *w = (const volatile uint64_t *)p;
  size_t seen = 0;
  for (size_t i = 0; i < n / 8; i++) seen += w[i] == HAK_SECRET;
  return seen;
}

/* LEAKED if any word of the secret is in [p, p+n), else HANDLED. */
static inline int secret_verdict(const void *p, size_t n, const char *where) {
  size_t seen = count_secret(p, n);
  if (seen) {
    printf("LEAKED: %zu of %zu words of the secret readable in %s\n", seen, n / 8, where);
    return LEAKED;
  }
  printf("HANDLED: no word of the secret in %s\n", where);
  return HANDLED;
}

static inline int hak_case_main(const struct hak_case *cases, int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (const struct hak_case *c = cases; c->name; c++) printf("%s %s %s\n", c->name, c->category, c->what);
    return 0;
  }
  if (argc == 2)
    for (const struct hak_case *c = cases; c->name; c++)
      if (strcmp(c->name, argv[1]) == 0) {
        setvbuf(stdout, NULL, _IONBF, 0); /* a line printed before a crash is kept */
        return c->run(c->a, c->b);
      }
  fprintf(stderr, "usage: %s CASE | --list\n", argv[0]);
  return 64;
}

#endif /* HAKMEM_MISUSE_COMMON_H */
