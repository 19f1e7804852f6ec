#!/usr/bin/env bash
# ThreadSanitizer suite: configure a separate build with -DHAKMEM_TSAN=ON
# (prefixed API only: under TSan the sanitizer owns malloc), build it, run
# every test registered there (the stress suite, the lifecycle programs and
# the unit tests) and count ThreadSanitizer reports.
#
#   tsan/run.sh [extra ctest arguments, e.g. -R stress_prodcons]
#
# Environment:
#   TSAN_BUILD_DIR          build directory (default: <repo>/build-tsan)
#   TSAN_LOG_DIR            where reports and the ctest log go
#                           (default: <build dir>/tsan-logs, emptied first)
#   CC / CXX                compiler to use (default: the first of gcc, clang
#                           whose -fsanitize=thread links and runs here)
#   JOBS                    build parallelism (default 2)
#   HAKMEM_STRESS_SECONDS   run time of each stress ctest (default 3)
#
# TSAN_OPTIONS: halt_on_error=0 (keep running, report everything), exitcode=66
# (a process with reports fails), log_path (one report file per process).
# tsan/suppressions.txt is passed if it holds entries (see that file).
#
# Exit 0 only if every test passed and there is no report.  Prints a summary:
# tests run, stress programs and their operation counts, reports found.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TSAN_BUILD_DIR:-$repo/build-tsan}
logdir=${TSAN_LOG_DIR:-$build/tsan-logs}
jobs=${JOBS:-2}
secs=${HAKMEM_STRESS_SECONDS:-3}
supp=$repo/tsan/suppressions.txt

die() { echo "tsan/run.sh: $*" >&2; exit 2; }

# --- a compiler whose ThreadSanitizer works here -------------------------
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
cat > "$probe_dir/t.c" <<'EOF'
#include <pthread.h>
static int x;
static void *f(void *a) { (void)a; __atomic_fetch_add(&x, 1, __ATOMIC_SEQ_CST); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); pthread_join(t, 0); return x != 1; }
EOF
tsan_works() { "$1" -fsanitize=thread -g -O1 "$probe_dir/t.c" -o "$probe_dir/t" -lpthread \
                 >/dev/null 2>&1 && "$probe_dir/t" >/dev/null 2>&1; }

cmake_cc=()
if [[ -f "$build/CMakeCache.txt" ]]; then
  cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
  tsan_works "$cc" || die "$build was configured with $cc, whose -fsanitize=thread does not work; remove $build"
  grep -q '^HAKMEM_TSAN:BOOL=ON' "$build/CMakeCache.txt" ||
    die "$build exists and is not a TSan build; remove it or set TSAN_BUILD_DIR"
else
  if [[ -n "${CC:-}" ]]; then
    candidates=("$CC")
  else
    candidates=(gcc clang)
  fi
  cc=
  for c in "${candidates[@]}"; do
    if command -v "$c" >/dev/null && tsan_works "$c"; then cc=$c; break; fi
  done
  [[ -n "$cc" ]] || die "no compiler with a working -fsanitize=thread among: ${candidates[*]}
  gcc needs libtsan2 (Debian: apt-get install libtsan2), clang needs libclang-rt-14-dev"
  case "$cc" in
    *clang*) cxx=${CXX:-${cc/clang/clang++}} ;;
    *gcc*)   cxx=${CXX:-${cc/gcc/g++}} ;;
    *)       cxx=${CXX:-c++} ;;
  esac
  cmake_cc=(-DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx")
fi
echo "== tsan: compiler $($cc --version | head -n1)"

# --- configure and build --------------------------------------------------
echo "== tsan: configure $build"
cmake -S "$repo" -B "$build" "${cmake_cc[@]}" -DHAKMEM_TSAN=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHAKMEM_STRESS_SECONDS="$secs" \
      > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; die "configure failed"; }
rm -f "$build.configure.log"
echo "== tsan: build"
cmake --build "$build" -j"$jobs" > "$build/build.log" 2>&1 ||
  { tail -n 60 "$build/build.log"; die "build failed (full log: $build/build.log)"; }

# --- run ------------------------------------------------------------------
rm -rf "$logdir"
mkdir -p "$logdir"
opts="halt_on_error=0 exitcode=66 log_path=$logdir/tsan second_deadlock_stack=1"
if [[ -f "$supp" ]] && grep -qv '^[[:space:]]*\(#\|$\)' "$supp"; then
  opts="$opts suppressions=$supp"
  echo "== tsan: suppressions $supp ($(grep -cv '^[[:space:]]*\(#\|$\)' "$supp") entries)"
fi
export TSAN_OPTIONS="$opts${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
echo "== tsan: ctest (TSAN_OPTIONS=$TSAN_OPTIONS)"
start=$(date +%s)
ctest --test-dir "$build" -V "$@" > "$logdir/ctest.log" 2>&1
ctest_rc=$?
elapsed=$(( $(date +%s) - start ))

# --- summary --------------------------------------------------------------
grep -E '^ *[0-9]+/[0-9]+ Test +#' "$logdir/ctest.log" | sed 's/^/   /'
tests_line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$logdir/ctest.log" | tail -n1)
ran=$(sed -nE 's/.* out of ([0-9]+).*/\1/p' <<<"$tests_line")
failed=$(sed -nE 's/.* ([0-9]+) tests failed out of.*/\1/p' <<<"$tests_line")
# stress programs print one result line with ops=N and PASSED/FAILED
stress_lines=$(grep -E '^[0-9]+: stress_[a-z_]+: threads=.* ops=[0-9]+ ' "$logdir/ctest.log")
stress_n=$(grep -c . <<<"$stress_lines" || true)
[[ -z "$stress_lines" ]] && stress_n=0
ops_total=$(grep -oE ' ops=[0-9]+' <<<"$stress_lines" | awk -F= '{s += $2} END {print s + 0}')
reports=$(cat "$logdir"/tsan.* 2>/dev/null | grep -c 'WARNING: ThreadSanitizer' || true)
errors=$(cat "$logdir"/tsan.* 2>/dev/null | grep -c 'ERROR: ThreadSanitizer' || true)

echo "== tsan summary"
echo "   tests run:        ${ran:-0} (failed: ${failed:-?}) in ${elapsed} s"
echo "   stress programs:  $stress_n, operations: $ops_total"
grep -oE '^[0-9]+: (stress_[a-z_]+): threads=[0-9]+ .* ops=[0-9]+' <<<"$stress_lines" |
  sed -E 's/^[0-9]+: (stress_[a-z_]+): threads=([0-9]+) .* ops=([0-9]+)/     \1 threads=\2 ops=\3/'
echo "   tsan reports:     $reports (WARNING: ThreadSanitizer), $errors (ERROR: ThreadSanitizer)"
if (( reports + errors > 0 )); then
  echo "   report kinds:"
  cat "$logdir"/tsan.* | grep -E '^(WARNING|ERROR): ThreadSanitizer' | sort | uniq -c | sed 's/^/     /'
  echo "   first report (all in $logdir/tsan.*):"
  f=$(grep -lE '(WARNING|ERROR): ThreadSanitizer' "$logdir"/tsan.* | head -n1)
  sed -n '1,40p' "$f" | sed 's/^/     /'
fi
echo "   logs:             $logdir (ctest.log, tsan.<pid>)"

if (( ctest_rc != 0 || reports + errors > 0 )) || [[ -z "$tests_line" ]]; then
  echo "== tsan: FAIL"
  exit 1
fi
echo "== tsan: PASS"
exit 0
