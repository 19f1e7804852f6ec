#!/usr/bin/env bash
# A program that runs itself out of address space (setrlimit RLIMIT_AS)
# under LD_PRELOAD: malloc & co fail with ENOMEM, the process goes on, its
# blocks stay intact, and allocation works again once the limit is raised.
#   run_oom.sh /path/to/libhakmem.so /path/to/preload_oom
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$1"
prog=$2

hk_run_ok preload_oom "out of memory" "$prog"
grep -q '^oom: ok' "$HK_TMP/out" || hk_fail "no 'oom: ok' line"
hk_check_stats "$HK_TMP/err" 1000 "out-of-memory program"
echo "PASS"
