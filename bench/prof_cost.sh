#!/usr/bin/env bash
# bench/prof_cost.sh - the heap profiler's cost: hakmem with HAKMEM_PROF=1
# against hakmem without, paired (interleaved rounds, the order alternating),
# the median of the per-round throughput ratios.
#
#   bench/prof_cost.sh
#
# Environment:
#   ROUNDS       rounds (default 9)
#   BUILD_DIR    build tree (default <repo>/build)
#   LARSON_ARGS  larson's arguments (default "2 8 1000 5000 100 4141 2":
#                bench/README.md's setting at 2 threads)
#   LARSON4_ARGS the same at 4 threads (default "2 8 1000 5000 100 4141 4")
#   PRODCONS_ARGS  prodcons' (default "2 1": two producer/consumer pairs, 1 s)
#   PROF_ENV     the profiler's settings (default "HAKMEM_PROF=1")
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
ROUNDS=${ROUNDS:-9}
LARSON_ARGS=${LARSON_ARGS:-"2 8 1000 5000 100 4141 2"}
LARSON4_ARGS=${LARSON4_ARGS:-"2 8 1000 5000 100 4141 4"}
PRODCONS_ARGS=${PRODCONS_ARGS:-"2 1"}
PROF_ENV=${PROF_ENV:-"HAKMEM_PROF=1"}
lib=$BUILD_DIR/libhakmem.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# throughput NAME ENV...: one run's operations per second.
throughput() {
  local name=$1; shift
  local out
  case $name in
    larson|larson4) local args=$LARSON_ARGS
            [[ $name == larson4 ]] && args=$LARSON4_ARGS
            out=$(cd "$tmp" && env "$@" LD_PRELOAD="$lib" HAKMEM_PROF_FILE="$tmp/p.heap" "$BUILD_DIR/bench/larson" $args)
            awk '/Throughput/ { print $3 }' <<<"$out" ;;
    prodcons) out=$(cd "$tmp" && env "$@" LD_PRELOAD="$lib" HAKMEM_PROF_FILE="$tmp/p.heap" "$BUILD_DIR/bench/prodcons" $PRODCONS_ARGS)
              sed -n 's/.*ops\/s=\([0-9.]*\).*/\1/p' <<<"$out" ;;
  esac
}

echo "| workload | rounds | median on/off | min | max |"
echo "|---|---:|---:|---:|---:|"
for w in larson larson4 prodcons; do
  ratios=()
  for ((r = 0; r < ROUNDS; r++)); do
    if ((r % 2)); then
      on=$(throughput $w $PROF_ENV); off=$(throughput $w HAKMEM_PROF=0)
    else
      off=$(throughput $w HAKMEM_PROF=0); on=$(throughput $w $PROF_ENV)
    fi
    ratios+=("$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.4f", a / b }')")
    echo "prof_cost: $w round $r: off $off on $on" >&2
  done
  printf '%s\n' "${ratios[@]}" | sort -g | awk -v w=$w -v n=$ROUNDS '
    { v[NR] = $1 } END { printf "| %s | %d | %.3f | %.3f | %.3f |\n", w, n, v[int((NR + 1) / 2)], v[1], v[NR] }'
done
