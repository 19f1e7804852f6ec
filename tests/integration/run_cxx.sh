#!/usr/bin/env bash
# A threaded C++ program (new/delete, std::string, containers, shared_ptr
# destroyed in other threads) prints the same with and without hakmem.
#   run_cxx.sh /path/to/libhakmem.so /path/to/cxx_threads
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$1"
prog=$2

hk_plain "$prog" > "$HK_TMP/ref.out" 2> "$HK_TMP/ref.err" ||
  { cat "$HK_TMP/ref.err" >&2; hk_fail "reference run (no preload) failed"; }
rc=0
hk_preload "$prog" > "$HK_TMP/hak.out" 2> "$HK_TMP/hak.err" || rc=$?
if (( rc != 0 )); then
  hk_strip_stats "$HK_TMP/hak.err" | tail -n 30 >&2
  hk_fail "cxx_threads under hakmem exited with status $rc"
fi
cat "$HK_TMP/hak.out"
if ! cmp -s "$HK_TMP/ref.out" "$HK_TMP/hak.out"; then
  diff "$HK_TMP/ref.out" "$HK_TMP/hak.out" >&2 || true
  hk_fail "cxx_threads output differs under hakmem"
fi
# 120000 items of several blocks each, plus the containers.
hk_check_stats "$HK_TMP/hak.err" 500000 "cxx_threads"
echo "PASS"
