#!/usr/bin/env bash
# Install what is missing, build hakmem, and run every test:
#   1. the Release build's ctest suite (unit, contract, real programs under
#      LD_PRELOAD, stress, lifecycle),
#   2. the ThreadSanitizer suite (tsan/run.sh),
#   3. the AddressSanitizer + UBSan suite (scripts/asan.sh),
#   4. a short libFuzzer run of tests/fuzz/fuzz_api (scripts/fuzz.sh).
# Exit 0 only if all pass.  Env: JOBS (default 2), SKIP_SANITIZERS=1 to run only 1,
# FUZZ_SECONDS (default 60), SKIP_FUZZ=1 to leave out 4.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}

scripts/install-deps.sh

start=$(date +%s)
echo "== build (Release)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$JOBS"

echo "== ctest (Release)"
ctest --test-dir build --output-on-failure -j"$JOBS"

if [[ "${SKIP_SANITIZERS:-0}" != 1 ]]; then
  echo "== ThreadSanitizer suite"
  tsan/run.sh
  echo "== AddressSanitizer + UBSan suite"
  scripts/asan.sh
fi

# --- fuzzing: a short run of tests/fuzz/fuzz_api (its corpus grows in build-fuzz/) ---
if [[ "${SKIP_FUZZ:-0}" != 1 ]]; then
  echo "== libFuzzer (tests/fuzz/fuzz_api, ${FUZZ_SECONDS:-60} s)"
  fuzz_log=$(mktemp)
  scripts/fuzz.sh "${FUZZ_SECONDS:-60}" >"$fuzz_log" 2>&1 || { tail -n 60 "$fuzz_log"; rm -f "$fuzz_log"; exit 1; }
  grep -E '^(stat::(number_of_executed_units|average_exec_per_sec)|== fuzz: PASS)' "$fuzz_log"; rm -f "$fuzz_log"
fi
# ------------------------------------------------------------------------------

echo "== all tests passed in $(( $(date +%s) - start )) s"
