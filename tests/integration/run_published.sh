#!/usr/bin/env bash
# The benchmarks that follow published ones (bench/README.md), each run
# briefly under hakmem: larson with its unjoined thread handoff, mimalloc's
# thread stress test (which checks every block it frees), glibc's malloc
# micro-benchmark and the big-buffer shape.  Each must exit 0, print its
# result line, and have had its allocations served by hakmem.
#   run_published.sh /path/to/libhakmem.so BENCH_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$1"
bin=$2

# run NAME PATTERN MIN_ALLOCS ENV... -- CMD...: run CMD under hakmem with
# ENV, require PATTERN on stdout and MIN_ALLOCS allocations counted.
run() {
  local name=$1 pattern=$2 min=$3; shift 3
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local rc=0
  env "${envs[@]}" LD_PRELOAD="$HK_LIB" HAKMEM_STATS=1 "$@" >"$HK_TMP/$name.out" 2>"$HK_TMP/$name.err" || rc=$?
  if (( rc != 0 )); then
    hk_strip_stats "$HK_TMP/$name.err" | tail -n 20 >&2
    hk_fail "$name under hakmem exited with status $rc"
  fi
  grep -qE "$pattern" "$HK_TMP/$name.out" || { cat "$HK_TMP/$name.out" >&2; hk_fail "$name printed no result line"; }
  hk_note "$name: $(head -1 "$HK_TMP/$name.out")"
  hk_check_stats "$HK_TMP/$name.err" "$min" "$name"
}

run larson '^Throughput = [0-9]+ operations per second' 100000 -- "$bin/larson" 1 8 1000 1000 10 4141 3
run mstress '^RESULT mstress threads=4 .* rounds=2 ' 10000 BENCH_ROUNDS=2 MSTRESS_SCALE=5 -- "$bin/mstress" 4 1
run glibc_simple '^RESULT glibc_simple threads=2 ' 100000 BENCH_ROUNDS=1 GLIBC_SIMPLE_ITERS=20000 -- "$bin/glibc_simple" 2 1
run bigbuf '^RESULT bigbuf threads=1 .* ops=44 ' 20 BENCH_CHECKS=2 -- "$bin/fixed/bigbuf" 1 0.01
echo "PASS"
