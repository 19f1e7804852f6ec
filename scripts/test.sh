#!/usr/bin/env bash
# Install what is missing, build hakmem, and run every test:
#   1. the Release build's ctest suite (unit, contract, real programs under
#      LD_PRELOAD, stress, lifecycle),
#   2. the ThreadSanitizer suite (tsan/run.sh),
#   3. the AddressSanitizer + UBSan suite (scripts/asan.sh).
# Exit 0 only if all pass.  Env: JOBS (default 2), SKIP_SANITIZERS=1 to run only 1.
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
echo "== all tests passed in $(( $(date +%s) - start )) s"
