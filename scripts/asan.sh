#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer suite: configure a separate
# build with -DHAKMEM_ASAN=ON (prefixed API only: under ASan the sanitizer owns
# malloc), build it, run every test registered there (the stress suite, the
# lifecycle programs and the unit tests) and count sanitizer reports.
#
#   scripts/asan.sh [extra ctest arguments, e.g. -L stress]
#
# Environment:
#   ASAN_BUILD_DIR          build directory (default: <repo>/build-asan)
#   ASAN_LOG_DIR            where reports and the ctest log go
#                           (default: <build dir>/asan-logs, emptied first)
#   CC / CXX                compiler (default: the first of gcc, clang whose
#                           -fsanitize=address,undefined links and runs here)
#   JOBS                    build parallelism (default 2)
#   HAKMEM_STRESS_SECONDS   run time of each stress ctest (default 3)
#
# ASan and LeakSanitizer write their reports to per-process files in the log
# directory (log_path); the build has -fno-sanitize-recover=undefined, so a
# UBSan finding stops the process, and its report goes to stderr (in
# ctest.log).  Exit 0 only if every test passed
# and no report was written.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${ASAN_BUILD_DIR:-$repo/build-asan}
logdir=${ASAN_LOG_DIR:-$build/asan-logs}
jobs=${JOBS:-2}
secs=${HAKMEM_STRESS_SECONDS:-3}

die() { echo "asan.sh: $*" >&2; exit 2; }

# --- a compiler whose ASan + UBSan work here --------------------------------
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
cat > "$probe_dir/t.c" <<'EOF'
#include <stdlib.h>
int main(void) { char *volatile p = malloc(16); p[3] = 1; int r = p[3] != 1; free(p); return r; }
EOF
asan_works() { "$1" -fsanitize=address,undefined -g -O1 "$probe_dir/t.c" -o "$probe_dir/t" \
                 >/dev/null 2>&1 && ASAN_OPTIONS=detect_leaks=0 "$probe_dir/t" >/dev/null 2>&1; }

cmake_cc=()
if [[ -f "$build/CMakeCache.txt" ]]; then
  cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
  asan_works "$cc" || die "$build was configured with $cc, whose -fsanitize=address,undefined does not work; remove $build"
  grep -q '^HAKMEM_ASAN:BOOL=ON' "$build/CMakeCache.txt" ||
    die "$build exists and is not an ASan build; remove it or set ASAN_BUILD_DIR"
else
  if [[ -n "${CC:-}" ]]; then candidates=("$CC"); else candidates=(gcc clang); fi
  cc=
  for c in "${candidates[@]}"; do
    if command -v "$c" >/dev/null && asan_works "$c"; then cc=$c; break; fi
  done
  [[ -n "$cc" ]] || die "no compiler with working -fsanitize=address,undefined among: ${candidates[*]}
  gcc needs libasan8 and libubsan1 (pulled in by gcc-12), clang needs libclang-rt-14-dev"
  case "$cc" in
    *clang*) cxx=${CXX:-${cc/clang/clang++}} ;;
    *gcc*)   cxx=${CXX:-${cc/gcc/g++}} ;;
    *)       cxx=${CXX:-c++} ;;
  esac
  cmake_cc=(-DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx")
fi
echo "== asan: compiler $($cc --version | head -n1)"

# --- configure and build ----------------------------------------------------
echo "== asan: configure $build"
cmake -S "$repo" -B "$build" "${cmake_cc[@]}" -DHAKMEM_ASAN=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHAKMEM_STRESS_SECONDS="$secs" \
      > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; die "configure failed"; }
rm -f "$build.configure.log"
echo "== asan: build"
cmake --build "$build" -j"$jobs" > "$build/build.log" 2>&1 ||
  { tail -n 60 "$build/build.log"; die "build failed (full log: $build/build.log)"; }

# --- run --------------------------------------------------------------------
rm -rf "$logdir"
mkdir -p "$logdir"
export ASAN_OPTIONS="log_path=$logdir/asan:detect_leaks=1:halt_on_error=1:abort_on_error=0:exitcode=67:check_initialization_order=1:strict_string_checks=1:detect_stack_use_after_return=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="log_path=$logdir/ubsan:print_stacktrace=1:halt_on_error=1:exitcode=68${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="log_path=$logdir/lsan${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
echo "== asan: ctest (ASAN_OPTIONS=$ASAN_OPTIONS)"
start=$(date +%s)
ctest --test-dir "$build" -V "$@" > "$logdir/ctest.log" 2>&1
ctest_rc=$?
elapsed=$(( $(date +%s) - start ))

# --- summary ----------------------------------------------------------------
grep -E '^ *[0-9]+/[0-9]+ Test +#' "$logdir/ctest.log" | sed 's/^/   /'
tests_line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$logdir/ctest.log" | tail -n1)
ran=$(sed -nE 's/.* out of ([0-9]+).*/\1/p' <<<"$tests_line")
failed=$(sed -nE 's/.* ([0-9]+) tests failed out of.*/\1/p' <<<"$tests_line")
stress_lines=$(grep -E '^[0-9]+: stress_[a-z_]+: threads=.* ops=[0-9]+ ' "$logdir/ctest.log")
stress_n=0
[[ -n "$stress_lines" ]] && stress_n=$(grep -c . <<<"$stress_lines")
ops_total=$(grep -oE ' ops=[0-9]+' <<<"$stress_lines" | awk -F= '{s += $2} END {print s + 0}')
# Reports land in the log_path files, except UBSan's non-recoverable ones
# (-fno-sanitize-recover), which go to stderr: captured in ctest.log.
shopt -s nullglob
logs=("$logdir"/asan.* "$logdir"/ubsan.* "$logdir"/lsan.* "$logdir/ctest.log")
count() { cat "${logs[@]}" | grep -cE "$1"; }
asan_n=$(count 'ERROR: AddressSanitizer')
lsan_n=$(count 'ERROR: LeakSanitizer')
ubsan_n=$(count 'runtime error:|ERROR: UndefinedBehaviorSanitizer')
reports=$(( asan_n + lsan_n + ubsan_n ))

echo "== asan summary"
echo "   tests run:        ${ran:-0} (failed: ${failed:-?}) in ${elapsed} s"
echo "   stress programs:  $stress_n, operations: $ops_total"
grep -oE '^[0-9]+: (stress_[a-z_]+): threads=[0-9]+ .* ops=[0-9]+' <<<"$stress_lines" |
  sed -E 's/^[0-9]+: (stress_[a-z_]+): threads=([0-9]+) .* ops=([0-9]+)/     \1 threads=\2 ops=\3/'
echo "   reports:          $asan_n AddressSanitizer, $lsan_n LeakSanitizer, $ubsan_n UBSan"
if (( reports > 0 )); then
  pat='ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|runtime error:'
  echo "   report kinds:"
  cat "${logs[@]}" | grep -ohE "(ERROR: [A-Za-z]+Sanitizer: [a-z-]+|runtime error: [a-z ]+)" |
    sort | uniq -c | sed 's/^/     /'
  f=$(grep -lE "$pat" "${logs[@]}" | head -n1)
  echo "   first report ($f):"
  grep -m1 -A30 -E "$pat" "$f" | sed 's/^/     /'
fi
echo "   logs:             $logdir (ctest.log, asan.<pid>, ubsan.<pid>)"

if (( ctest_rc != 0 || reports > 0 )) || [[ -z "$tests_line" ]]; then
  echo "== asan: FAIL"
  exit 1
fi
echo "== asan: PASS"
exit 0
