/* Fault injection: make hakmem's own mappings fail on demand, to test the
 * out-of-memory paths.  Compiled only into the test variant built with
 * -DHAKMEM_FAULT_INJECTION=1 (tests/CMakeLists.txt: hakmem_fault, and the
 * fuzzer); the release libraries have none of it and no test in os.c.
 *
 * Every attempt of a selected kind counts (from 1, since the last
 * hak_test_fail_mmap call).  Attempt k fails when k >= nth and, if every is
 * non-zero, (k - nth) is a multiple of every:
 *   hak_test_fail_mmap(1, 0, HAK_FAULT_ALL)   fail everything from now on
 *   hak_test_fail_mmap(5, 0, ...)             the 5th and every later one
 *   hak_test_fail_mmap(3, 3, ...)             every 3rd one
 *   hak_test_fail_mmap(0, 0, 0)               off
 * A failed call returns what the real call returns on ENOMEM (NULL or
 * false; munmap leaves the range mapped); nothing is mapped, moved or
 * unmapped.  The environment variables
 * HAKMEM_FAIL_MMAP=N (the Nth and later) and HAKMEM_FAIL_MMAP_EVERY=N (every
 * Nth), read at the first mapping, set the same for HAK_FAULT_ALL. */
#ifndef HAKMEM_FAULT_H
#define HAKMEM_FAULT_H

#include <stdint.h>

enum {
  HAK_FAULT_MAP = 1,    /* hak_os_map_aligned: SuperSlabs, large blocks, heaps, registry leaves */
  HAK_FAULT_GROW = 2,   /* hak_os_grow_in_place: mremap growing a large mapping */
  HAK_FAULT_MOVE = 4,   /* hak_os_move: mremap moving a large mapping's pages */
  HAK_FAULT_UNMAP = 8,  /* hak_os_unmap: munmap (ENOMEM: out of vm.max_map_count) */
  HAK_FAULT_ALL = 15
};

void hak_test_fail_mmap(long nth, long every, unsigned kinds);
uint64_t hak_test_fail_mmap_injected(void);  /* failures injected since start */

#endif /* HAKMEM_FAULT_H */
