#!/usr/bin/env bash
# bench/cost.sh - costs that do not depend on the host's load: for each
# fixed-work workload and each allocator, cachegrind's instruction count,
# D1 and last-level cache misses, and the run's minor page faults.
#
#   bench/cost.sh [-w "WORKLOADS"] [-a "ALLOCATORS"] [-o FILE]
#
# A workload here does the same work in every run (it stops after a count,
# never after a time): the fixed-work variants in build/bench/fixed/ (the
# timed programs built with -DTS_BENCH_FIXED, stopping after BENCH_CHECKS
# looks at their stop flag), glibc_simple and mstress with BENCH_ROUNDS.
# Each runs once under valgrind --tool=cachegrind --cache-sim=yes (the
# allocator preloaded; cachegrind does not replace malloc) and once natively
# under /usr/bin/time for its minor page faults.  The counts cover the whole
# program: its own work is the same for every allocator, so the differences
# are the allocator's.  Single-threaded: at one thread the counts are exact
# and repeatable; the threaded workloads are for the paired timed runs of
# bench/scaling.sh.
#
# Options and environment:
#   -w, --workloads  WORKLOADS   default "glibc_simple bignum mixed strbuild churn strings mstress bigbuf"
#   -a, --allocators ALLOCATORS  default "hakmem glibc mimalloc jemalloc tcmalloc"
#                                (NAME=/path/lib.so for others; see bench/allocators.sh)
#   -o, --out FILE   OUT         also write the table there (markdown)
#   BUILD_DIR   build tree (default <repo>/build); HAKMEM_LIB (default $BUILD_DIR/libhakmem.so)
#   SCALE       multiplies every workload's work (default 1)
#
# Prints a markdown table: per workload and allocator, Ir, D1 misses
# (reads + writes), LL misses (instruction, data reads and writes), minor
# faults, and each count over the best peer's (lowest among the others).
# About 2 minutes per allocator at SCALE=1 (valgrind runs ~50x slower).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORKLOADS=${WORKLOADS:-"glibc_simple bignum mixed strbuild churn strings mstress bigbuf"}
ALLOCATORS=${ALLOCATORS:-"hakmem glibc mimalloc jemalloc tcmalloc"}
OUT=${OUT:-}
SCALE=${SCALE:-1}

die() { echo "cost.sh: $*" >&2; exit 2; }
note() { echo "cost.sh: $*" >&2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    -w|--workloads) WORKLOADS=$2; shift 2 ;;
    -a|--allocators) ALLOCATORS=$2; shift 2 ;;
    -o|--out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done

BUILD_DIR=${BUILD_DIR:-$ROOT/build}
HAKMEM_LIB=${HAKMEM_LIB:-$BUILD_DIR/libhakmem.so}
BIN=$BUILD_DIR/bench
command -v valgrind >/dev/null || die "valgrind is not installed (apt-get install valgrind)"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is not installed (apt-get install time)"
[[ $SCALE =~ ^[0-9]+$ && $SCALE -ge 1 ]] || die "SCALE must be a positive integer"
source "$ROOT/bench/allocators.sh"
resolve_allocators "$ALLOCATORS"

# workload_cmd NAME: the environment assignments and the command of a run.
workload_cmd() {
  case "$1" in
    glibc_simple) echo "BENCH_ROUNDS=$SCALE GLIBC_SIMPLE_ITERS=200000 $BIN/glibc_simple 1 1" ;;
    mstress)      echo "BENCH_ROUNDS=$((2 * SCALE)) MSTRESS_SCALE=50 $BIN/mstress 1 1" ;;
    bignum)       echo "BENCH_CHECKS=$((4000 * SCALE)) $BIN/fixed/bignum 1 0.01" ;;
    mixed)        echo "BENCH_CHECKS=$((20000 * SCALE)) $BIN/fixed/mixed 1 0.01" ;;
    strbuild)     echo "BENCH_CHECKS=$((20000 * SCALE)) $BIN/fixed/strbuild 1 0.01" ;;
    churn)        echo "BENCH_CHECKS=$((2000 * SCALE)) $BIN/fixed/churn 1 0.01" ;;
    strings)      echo "BENCH_CHECKS=$((200 * SCALE)) $BIN/fixed/strings 1 0.01" ;;
    bigbuf)       echo "BENCH_CHECKS=$((20 * SCALE)) $BIN/fixed/bigbuf 1 0.01" ;;
    *) die "unknown workload '$1' (known: glibc_simple mstress bignum mixed strbuild churn strings bigbuf)" ;;
  esac
}
for w in $WORKLOADS; do
  read -r -a c <<<"$(workload_cmd "$w")"
  prog=${c[-3]}
  [[ -x $prog ]] || die "$prog is missing: build first (cmake --build $BUILD_DIR -j2)"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run_one W I: cachegrind and fault counts of workload W under allocator I,
# as "Ir D1 LL faults ops" (ops: the RESULT line's, a check that the runs
# did the same work).
run_one() {
  local w=$1 i=$2 lib=${alloc_libs[$2]} envs=() args=() x
  for x in $(workload_cmd "$w"); do
    if [[ ${#args[@]} -eq 0 && $x == *=* ]]; then envs+=("$x"); else args+=("$x"); fi
  done
  local pre=(-u LD_PRELOAD)
  [[ -n $lib ]] && pre=("LD_PRELOAD=$lib")
  local cg=$tmp/cg.$w.$i
  if ! env "${pre[@]}" "${envs[@]}" valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$cg" \
      "${args[@]}" >"$cg.stdout" 2>"$cg.log"; then
    note "$w under ${alloc_names[$i]}: the cachegrind run failed:"; tail -5 "$cg.log" >&2
    echo "FAIL FAIL FAIL FAIL FAIL"; return
  fi
  local faults
  faults=$(env "${pre[@]}" "${envs[@]}" /usr/bin/time -f '%R' "${args[@]}" 2>&1 >/dev/null | tail -1)
  local ops
  ops=$(sed -n 's/^RESULT .* ops=\([0-9]*\) .*/\1/p' "$cg.stdout" | head -1)
  # events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
  awk -v f="$faults" -v ops="${ops:-?}" '/^summary:/ { printf "%s %d %d %s %s\n", $2, $6 + $9, $4 + $7 + $10, f, ops }' "$cg"
}

declare -A res
for w in $WORKLOADS; do
  for ((i = 0; i < nalloc; i++)); do
    note "$w: ${alloc_names[$i]}"
    res[$w,$i]=$(run_one "$w" "$i")
  done
done

# best peer: the lowest count among the allocators other than hakmem
ratio() {  # ratio W I FIELD: this allocator's count over the best other's
  local w=$1 i=$2 f=$3 best= v j x
  v=$(cut -d' ' -f"$f" <<<"${res[$w,$i]}")
  for ((j = 0; j < nalloc; j++)); do
    [[ $j == "$i" ]] && continue
    x=$(cut -d' ' -f"$f" <<<"${res[$w,$j]}")
    [[ $x == FAIL ]] && continue
    if [[ -z $best ]] || awk -v a="$x" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$x; fi
  done
  if [[ $v == FAIL || -z $best || $best == 0 ]]; then echo "-"; else awk -v a="$v" -v b="$best" 'BEGIN { printf "%.2f", a / b }'; fi
}
human() { awk -v x="$1" 'BEGIN { if (x == "FAIL") print x; else if (x >= 1e9) printf "%.2fG", x / 1e9; else if (x >= 1e6) printf "%.1fM", x / 1e6; else if (x >= 1e3) printf "%.1fk", x / 1e3; else printf "%d", x }'; }

{
  echo "Fixed-work costs (cachegrind --cache-sim=yes; minor faults from /usr/bin/time), SCALE=$SCALE," \
       "$(date -u +%Y-%m-%d), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo
  echo "| workload | allocator | Ir | D1 misses | LL misses | minor faults | Ir / best other | D1 / best other | faults / best other | ops |"
  echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"
  for w in $WORKLOADS; do
    for ((i = 0; i < nalloc; i++)); do
      read -r ir d1 ll f ops <<<"${res[$w,$i]}"
      echo "| $w | ${alloc_names[$i]} | $(human "$ir") | $(human "$d1") | $(human "$ll") | $f | $(ratio "$w" "$i" 1) | $(ratio "$w" "$i" 2) | $(ratio "$w" "$i" 4) | $ops |"
    done
  done
} | tee "${OUT:-/dev/null}"
