#!/usr/bin/env bash
# A program that runs itself out of address space (setrlimit RLIMIT_AS)
# under LD_PRELOAD: malloc & co fail with ENOMEM, the process goes on, its
# blocks stay intact, and allocation works again once the limit is raised.
#   run_oom.sh /path/to/libhakmem.so /path/to/preload_oom
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$1"
prog=$2

rc=0
hk_preload "$prog" > "$HK_TMP/out" 2> "$HK_TMP/err" || rc=$?
cat "$HK_TMP/out"
hk_strip_stats "$HK_TMP/err" >&2
if (( rc > 128 )); then
  hk_fail "preload_oom died of signal $((rc - 128)) out of memory"
fi
(( rc == 0 )) || hk_fail "preload_oom exited with status $rc"
grep -q '^oom: ok' "$HK_TMP/out" || hk_fail "no 'oom: ok' line"
hk_check_stats "$HK_TMP/err" 1000 "out-of-memory program"
echo "PASS"
