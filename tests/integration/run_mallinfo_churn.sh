#!/usr/bin/env bash
# mallinfo2's uordblks does not grow with the number of threads that came
# and went (tests/integration/mallinfo_churn.c), with hakmem's statistics
# off (the default: the figures come from the slabs' own counts) and on
# (HAKMEM_STATS=1: from the block counts); glibc's malloc first, as the
# reference the program's checks are written against.
#   run_mallinfo_churn.sh /path/to/libhakmem.so /path/to/preload_mallinfo_churn
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$1"
prog=$2

run() {   # run WANT CMD...: CMD must pass and report malloc WANT
  local want=$1 rc=0
  shift
  "$@" > "$HK_TMP/out" 2> "$HK_TMP/err" || rc=$?
  sed 's/^/   /' "$HK_TMP/out"
  hk_strip_stats "$HK_TMP/err" >&2
  grep -qx "malloc: $want" "$HK_TMP/out" || hk_fail "the program did not run on $want's malloc"
  (( rc == 0 )) || hk_fail "mallinfo_churn under $want ($*) exited with status $rc"
}

echo "glibc (reference):"
run glibc hk_plain "$prog" 4000
echo "hakmem, statistics off:"
run hakmem env LD_PRELOAD="$HK_LIB" "$prog" 20000
echo "hakmem, HAKMEM_STATS=1:"
run hakmem env LD_PRELOAD="$HK_LIB" HAKMEM_STATS=1 "$prog" 20000
echo "PASS"
