#!/usr/bin/env bash
# GNU sort with 2 threads under hakmem: the same output as without it.
#   run_sort.sh /path/to/libhakmem.so
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$1"
hk_need sort cmp

in="$HK_TMP/input"
hk_gen_input "$in" 24
# -S: a buffer smaller than the input, so sort also writes and merges runs.
args=(--parallel=2 -S 8M -T "$HK_TMP" -k2,2 -k1,1n "$in")
export LC_ALL=C
hk_plain sort "${args[@]}" > "$HK_TMP/ref.out" 2> "$HK_TMP/ref.err" ||
  { cat "$HK_TMP/ref.err" >&2; hk_fail "reference sort failed"; }
rc=0
hk_preload sort "${args[@]}" > "$HK_TMP/hak.out" 2> "$HK_TMP/hak.err" || rc=$?
if (( rc != 0 )); then
  hk_strip_stats "$HK_TMP/hak.err" | tail -n 20 >&2
  hk_fail "sort under hakmem exited with status $rc"
fi
cmp "$HK_TMP/ref.out" "$HK_TMP/hak.out" || hk_fail "sort output under hakmem differs"
hk_note "sorted output identical ($(wc -l < "$HK_TMP/hak.out") lines)"
hk_check_stats "$HK_TMP/hak.err" 40 "sort --parallel=2"
echo "PASS"
