#!/usr/bin/env bash
# scripts/demo.sh - from a fresh Debian 12 to a larson comparison table.
#
#   scripts/demo.sh            (as root, from any directory)
#
# 1. installs what is missing (scripts/install-deps.sh --bench: build tools,
#    liburcu, Concurrency Kit, mimalloc, jemalloc, tcmalloc, gnuplot);
# 2. configures and builds hakmem and the benchmarks in build/
#    (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2);
# 3. runs the larson part of bench/scaling.sh at 1, 2 and 4 threads under
#    hakmem (LD_PRELOAD=build/libhakmem.so), glibc and every installed peer,
#    and prints the table (results, CSVs and a PNG in build/bench-results).
#
# Environment (all optional): BUILD_DIR (default build), RUNS (default 5),
# THREADS (default "1 2 4"), ALLOCATORS (default "hakmem glibc mimalloc
# jemalloc tcmalloc"), LARSON_ARGS (default "1 8 1000 5000 100 4141": the
# table setting of bench/scaling.sh but with a 1 s window instead of 2 s, so
# 75 runs and the build fit in about 3 minutes; LARSON_ARGS="2 8 1000 5000 100
# 4141" gives the full setting, about 40 s longer).
# A missing build/libhakmem.so after the build is an error.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

BUILD_DIR=${BUILD_DIR:-build}
LARSON_ARGS=${LARSON_ARGS:-"1 8 1000 5000 100 4141"}
export BUILD_DIR LARSON_ARGS
t0=$SECONDS

echo "== 1/3 dependencies" >&2
scripts/install-deps.sh --bench

echo "== 2/3 build ($BUILD_DIR)" >&2
mkdir -p "$BUILD_DIR"
blog=$BUILD_DIR/demo-build.log
if ! { cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release && cmake --build "$BUILD_DIR" -j2; } >"$blog" 2>&1; then
  tail -n 30 "$blog" >&2
  echo "demo.sh: the build failed (full log: $blog)" >&2
  exit 1
fi
case "$BUILD_DIR" in /*) lib=$BUILD_DIR/libhakmem.so ;; *) lib=$ROOT/$BUILD_DIR/libhakmem.so ;; esac
if [[ ! -f $lib ]]; then
  echo "demo.sh: $lib was not built; cannot compare hakmem" >&2
  exit 1
fi
if [[ ! -x $BUILD_DIR/bench/larson || ! -x $BUILD_DIR/bench/runmeasure ]]; then
  echo "demo.sh: $BUILD_DIR/bench/larson was not built" >&2
  exit 1
fi

echo "== 3/3 larson $LARSON_ARGS at ${THREADS:-1 2 4} threads, ${RUNS:-5} runs each" >&2
status=0
WORKLOADS=larson bench/scaling.sh || status=$?
echo "demo.sh: done in $((SECONDS - t0)) s" >&2
exit $status
