/* fail.h: failure reporting for the LD_PRELOAD test programs (plain stdio,
 * no check framework: these programs run under the preload, single process).
 * FAIL(fmt, ...) counts a failure and prints the first 40 with their line. */
#ifndef HAKMEM_PRELOAD_FAIL_H
#define HAKMEM_PRELOAD_FAIL_H

#include <stdio.h>

static int failures;

#define FAIL(...)                                  \
  do {                                             \
    if (failures++ < 40) {                         \
      fprintf(stderr, "FAIL line %d: ", __LINE__); \
      fprintf(stderr, __VA_ARGS__);                \
      fputc('\n', stderr);                         \
    }                                              \
  } while (0)

#endif
