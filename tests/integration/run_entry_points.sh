#!/usr/bin/env bash
# Every entry point of the malloc family lands in hakmem under LD_PRELOAD.
#   run_entry_points.sh /path/to/libhakmem.so /path/to/preload_entry_points
# The program checks symbol resolution and block properties itself and prints
# expected_allocs=N, the number of allocations it made through the entry
# points.  hakmem's exit statistics must count at least that many allocs and
# frees: one entry point answered by glibc would leave them 2000 short.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$1"
prog=$2

hk_run_ok preload_entry_points "" "$prog" "$HK_LIB"

expected=$(sed -n 's/^expected_allocs=//p' "$HK_TMP/out")
[[ -n "$expected" ]] || hk_fail "the program did not print expected_allocs"
hk_check_stats "$HK_TMP/err" "$expected" "entry points program"
if [[ -z "${HAKMEM_TEST_NO_STATS:-}" ]]; then
  frees=$(hk_stat_max "$HK_TMP/err" frees)
  (( frees >= expected )) ||
    hk_fail "frees=$frees < $expected: a free entry point did not reach hakmem"
fi
echo "PASS"
