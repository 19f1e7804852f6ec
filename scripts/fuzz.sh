#!/usr/bin/env bash
# Build the libFuzzer target tests/fuzz/fuzz_api (clang, ASan + UBSan, fault
# injection) in its own build directory and run it.
#
#   scripts/fuzz.sh [SECONDS]      run for SECONDS (default 60)
#
# Environment:
#   FUZZ_BUILD_DIR   build directory (default: <repo>/build-fuzz); the corpus
#                    grows in <build dir>/corpus across runs, crashing inputs
#                    land in <build dir>/artifacts/
#   CC / CXX         compiler (default clang / clang++)
#   JOBS             build parallelism (default 2)
#   FUZZ_ARGS        extra libFuzzer arguments
# Exit 0 if the run ended without a crash, non-zero otherwise (libFuzzer's
# status; the crashing input's path is in its output).  Reproduce a crash:
#   <build dir>/tests/fuzz/fuzz_api <artifact>
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
secs=${1:-60}
build=${FUZZ_BUILD_DIR:-$repo/build-fuzz}
cc=${CC:-clang}
cxx=${CXX:-clang++}

command -v "$cc" >/dev/null || { echo "fuzz.sh: $cc not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
echo "== fuzz: configure $build ($cc)"
cmake -S "$repo" -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHAKMEM_FUZZ=ON -DHAKMEM_BUILD_TESTS=OFF >/dev/null
echo "== fuzz: build"
cmake --build "$build" -j"${JOBS:-2}" --target fuzz_api >"$build/fuzz-build.log" 2>&1 ||
  { tail -n 40 "$build/fuzz-build.log"; echo "fuzz.sh: build failed" >&2; exit 2; }

corpus=$build/corpus
mkdir -p "$corpus" "$build/artifacts"
# A few seeds the first time: each opcode, sizes of every kind, realloc
# growth of a large block, the helper thread, fault injection.
if [[ -z "$(ls -A "$corpus")" ]]; then
  printf '\x00\x01\x05\x00\x02\x41\x10\x20\x07\x01\x07\x02' >"$corpus/seed-small"
  printf '\x00\x03\xc5\x30\x10\x03\x03\xa0\x03\x03\xc0\xc9\x40\x20\x09\x03\x07\x03' >"$corpus/seed-large-realloc"
  printf '\x02\x04\x03\xc2\x00\x40\x05\x05\x0c\x80\x00\x00\x06\x06\x14\x85\x10\x00\x01' >"$corpus/seed-calloc-aligned"
  printf '\x00\x07\x80\x10\x10\x0d\x07\x0e\x08\x41\x30\x00\x0f\x08\x01\x07\x08' >"$corpus/seed-threads"
  printf '\x00\x09\xc3\x00\x20\x0c\x00\xe1\x00\x0a\xc4\x00\x30\x03\x09\xa8\x0c\x00\x00\x00\x0b\xc4\x00\x30' >"$corpus/seed-faults"
fi

# Inputs that once crashed (tests/fuzz/regress/, named after the bug) run first.
echo "== fuzz: replay tests/fuzz/regress/"
"$build/tests/fuzz/fuzz_api" -rss_limit_mb=4096 -timeout=60 "$repo"/tests/fuzz/regress/* >"$build/regress.log" 2>&1 ||
  { tail -n 30 "$build/regress.log"; echo "fuzz.sh: a regression input crashes again" >&2; exit 1; }
echo "== fuzz: run ${secs} s (corpus $corpus)"
# -max_len: a program of a few hundred operations, reached soon (-len_control
# below the default 100); -rss_limit_mb: live blocks
# are capped at 256 MiB, plus hakmem's caches and ASan's own memory;
# -timeout: one input (at most a few thousand operations) takes well under it.
"$build/tests/fuzz/fuzz_api" -max_total_time="$secs" -max_len=2048 -len_control=10 -rss_limit_mb=4096 -timeout=60 \
  -print_final_stats=1 -artifact_prefix="$build/artifacts/" ${FUZZ_ARGS:-} "$corpus"
echo "== fuzz: PASS (no crash in ${secs} s)"
