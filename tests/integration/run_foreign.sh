#!/usr/bin/env bash
# Blocks from glibc's own allocator given to hakmem's free/realloc/
# malloc_usable_size under LD_PRELOAD: handled, not crashed on.
#   run_foreign.sh /path/to/libhakmem.so /path/to/preload_foreign
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$1"
prog=$2

hk_run_ok preload_foreign "on a foreign pointer" "$prog"

# 5000 mallocs + 5000 strdups and more went to hakmem.
hk_check_stats "$HK_TMP/err" 10000 "foreign-pointer program"
if [[ -z "${HAKMEM_TEST_NO_STATS:-}" ]]; then
  expected=$(sed -n 's/^foreign_frees=//p' "$HK_TMP/out")
  got=$(hk_stat_max "$HK_TMP/err" foreign_frees)
  if [[ -n "$got" ]]; then
    # The statistics line reports them: all must have gone to the system.
    (( got >= expected )) ||
      hk_fail "hakmem reports foreign_frees=$got, the program freed $expected glibc blocks"
    hk_note "foreign_frees=$got (program freed $expected glibc blocks, plus reallocs)"
  fi
fi
echo "PASS"
