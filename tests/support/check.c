/* check.c - the check framework of the C unit tests (check.h). */
#include "check.h"

#include <stdarg.h>
#include <stdint.h>

#define MAX_PRINTED 60

static unsigned long checks;
static unsigned long failures;
static const char *section = "";

void ts_check_count(void)
{
    checks++;
}

void ts_check_report(const char *file, int line, const char *cond, const char *fmt, ...)
{
    failures++;
    if (failures > MAX_PRINTED) {
        if (failures == MAX_PRINTED + 1)
            fprintf(stderr, "FAIL ... (further failures counted, not printed)\n");
        return;
    }
    fprintf(stderr, "FAIL [%s] %s:%d: %s: ", section, file, line, cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

void ts_check_begin(const char *name)
{
    section = name;
    printf("-- %s\n", name);
    fflush(stdout);
}

void ts_check_section(const char *name)
{
    section = name;
}

int ts_check_finish(const char *prog)
{
    printf("%s: %lu checks, %lu failed\n", prog, checks, failures);
    fflush(stdout);
    return failures ? 1 : 0;
}

/* Sort the blocks' [lo, hi) and compare neighbours. */

struct span { uintptr_t lo, hi; size_t idx; };

static int span_cmp(const void *a, const void *b) {
  const struct span *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

size_t ts_check_disjoint(void **ptrs, const size_t *lens, size_t n, const char *what) {
  struct span *s = calloc(n, sizeof *s);
  REQUIRE(s != NULL, "test's own calloc failed");
  for (size_t i = 0; i < n; i++) {
    s[i].lo = (uintptr_t)ptrs[i];
    s[i].hi = (uintptr_t)ptrs[i] + (lens[i] ? lens[i] : 1);
    s[i].idx = i;
  }
  qsort(s, n, sizeof *s, span_cmp);
  size_t bad = 0;
  for (size_t i = 0; i + 1 < n; i++) {
    if (s[i].hi > s[i + 1].lo) {
      bad++;
      CHECK(s[i].hi <= s[i + 1].lo,
            "%s: block #%zu [%#lx, +%zu) overlaps block #%zu at %#lx", what, s[i].idx,
            (unsigned long)s[i].lo, (size_t)(s[i].hi - s[i].lo), s[i + 1].idx,
            (unsigned long)s[i + 1].lo);
    }
  }
  free(s);
  return bad;
}
