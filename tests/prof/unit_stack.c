/* unit_stack: the profiler's call stacks (src/stack.c) do not depend on
 * which unwinder took them.  A thread unwinds with libgcc for its first
 * HAK_STACK_WARM_FRAMES frames and with libunwind after: a site captured
 * before, at and after the switch must give the same return addresses, or one
 * allocation site would be split in two in every long-lived thread's
 * profile.  Each capture must also name its caller, stack_site.
 *
 * Under ThreadSanitizer both are the frame-pointer walk: the same check. */
#include <stdint.h>
#include <string.h>

#include "stack.h"
#include "support/check.h"

#define DEPTH 32

static uintptr_t first[DEPTH];
static int first_depth;

/* Captures here, from one call site; fails the first differing capture. */
static __attribute__((noinline)) int stack_site(int round)
{
  uintptr_t pcs[DEPTH];
  int depth = hak_stack_capture(pcs, DEPTH, 0);
  if (round == 0) {
    memcpy(first, pcs, sizeof pcs);
    first_depth = depth;
    return 1;
  }
  return depth == first_depth && memcmp(pcs, first, (size_t)depth * sizeof pcs[0]) == 0;
}

static __attribute__((noinline)) int stack_caller(int round) { return stack_site(round) + 0 * round; }

int main(void)
{
  REQUIRE(hak_stack_init(), "no unwinder: libgcc_s.so.1 and libunwind.so.8 both missing");
  /* each capture unwinds 3 frames at least: the switch comes before a third */
  int rounds = HAK_STACK_WARM_FRAMES;
  for (int r = 0; r < rounds; r++) {
    int ok = stack_caller(r);
    CHECK(ok, "capture %d (of %d; the unwinder changes after %d frames) differs from the first", r, rounds,
          HAK_STACK_WARM_FRAMES);
    if (!ok) break;
  }
  CHECK(first_depth >= 3, "a stack of %d frames (stack_site, stack_caller, main...)", first_depth);
  /* frame 0: the return into stack_site (the capture drops its own) */
  CHECK(first_depth >= 1 && first[0] - (uintptr_t)&stack_site < 256, "frame 0 %#lx is not in stack_site (%p)",
        (unsigned long)first[0], (void *)&stack_site);
  return ts_check_finish("unit_stack");
}
