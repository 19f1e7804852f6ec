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
supp=$repo/tsan/suppressions.txt
san=tsan
san_script=tsan/run.sh
san_flags=-fsanitize=thread
san_cmake_option=HAKMEM_TSAN
san_build_kind="a TSan"
san_build_var=TSAN_BUILD_DIR
san_no_compiler="no compiler with a working -fsanitize=thread"
san_hint="gcc needs libtsan2 (Debian: apt-get install libtsan2), clang needs libclang-rt-14-dev"
source "$repo/scripts/sanitizer_suite.sh"

# --- a compiler whose ThreadSanitizer works here -------------------------
san_probe_dir
cat > "$probe_dir/t.c" <<'EOF'
#include <pthread.h>
static int x;
static void *f(void *a) { (void)a; __atomic_fetch_add(&x, 1, __ATOMIC_SEQ_CST); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); pthread_join(t, 0); return x != 1; }
EOF
san_works() { "$1" -fsanitize=thread -g -O1 "$probe_dir/t.c" -o "$probe_dir/t" -lpthread \
                >/dev/null 2>&1 && "$probe_dir/t" >/dev/null 2>&1; }
san_pick_compiler

# --- configure and build --------------------------------------------------
san_configure_and_build

# --- run ------------------------------------------------------------------
san_reset_logdir
opts="halt_on_error=0 exitcode=66 log_path=$logdir/tsan second_deadlock_stack=1"
if [[ -f "$supp" ]] && grep -qv '^[[:space:]]*\(#\|$\)' "$supp"; then
  opts="$opts suppressions=$supp"
  echo "== tsan: suppressions $supp ($(grep -cv '^[[:space:]]*\(#\|$\)' "$supp") entries)"
fi
export TSAN_OPTIONS="$opts${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
echo "== tsan: ctest (TSAN_OPTIONS=$TSAN_OPTIONS)"
san_run_ctest "$@"

# --- summary --------------------------------------------------------------
san_collect_results
reports=$(cat "$logdir"/tsan.* 2>/dev/null | grep -c 'WARNING: ThreadSanitizer' || true)
errors=$(cat "$logdir"/tsan.* 2>/dev/null | grep -c 'ERROR: ThreadSanitizer' || true)

san_print_summary_head
echo "   tsan reports:     $reports (WARNING: ThreadSanitizer), $errors (ERROR: ThreadSanitizer)"
if (( reports + errors > 0 )); then
  echo "   report kinds:"
  cat "$logdir"/tsan.* | grep -E '^(WARNING|ERROR): ThreadSanitizer' | sort | uniq -c | sed 's/^/     /'
  echo "   first report (all in $logdir/tsan.*):"
  f=$(grep -lE '(WARNING|ERROR): ThreadSanitizer' "$logdir"/tsan.* | head -n1)
  sed -n '1,40p' "$f" | sed 's/^/     /'
fi
echo "   logs:             $logdir (ctest.log, tsan.<pid>)"

san_finish $(( reports + errors ))
