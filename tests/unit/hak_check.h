/* hak_check.h: helpers of the C tests that check the hak_* API. */
#ifndef HAKMEM_TEST_HAK_CHECK_H
#define HAKMEM_TEST_HAK_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "hakmem.h"

static inline bool aligned_to(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* The counters now; every field is overwritten (the poison shows if not). */
static inline hak_stats_t stats_now(void) {
  hak_stats_t s;
  memset(&s, 0xa5, sizeof s);
  hak_stats_get(&s);
  return s;
}

#endif /* HAKMEM_TEST_HAK_CHECK_H */
