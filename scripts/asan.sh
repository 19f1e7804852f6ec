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
san=asan
san_script=asan.sh
san_flags=-fsanitize=address,undefined
san_cmake_option=HAKMEM_ASAN
san_build_kind="an ASan"
san_build_var=ASAN_BUILD_DIR
san_no_compiler="no compiler with working -fsanitize=address,undefined"
san_hint="gcc needs libasan8 and libubsan1 (pulled in by gcc-12), clang needs libclang-rt-14-dev"
source "$repo/scripts/sanitizer_suite.sh"

# --- a compiler whose ASan + UBSan work here --------------------------------
san_probe_dir
cat > "$probe_dir/t.c" <<'EOF'
#include <stdlib.h>
int main(void) { char *volatile p = malloc(16); p[3] = 1; int r = p[3] != 1; free(p); return r; }
EOF
san_works() { "$1" -fsanitize=address,undefined -g -O1 "$probe_dir/t.c" -o "$probe_dir/t" \
                >/dev/null 2>&1 && ASAN_OPTIONS=detect_leaks=0 "$probe_dir/t" >/dev/null 2>&1; }
san_pick_compiler

# --- configure and build ----------------------------------------------------
san_configure_and_build

# --- run --------------------------------------------------------------------
san_reset_logdir
export ASAN_OPTIONS="log_path=$logdir/asan:detect_leaks=1:halt_on_error=1:abort_on_error=0:exitcode=67:check_initialization_order=1:strict_string_checks=1:detect_stack_use_after_return=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="log_path=$logdir/ubsan:print_stacktrace=1:halt_on_error=1:exitcode=68${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="log_path=$logdir/lsan${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
echo "== asan: ctest (ASAN_OPTIONS=$ASAN_OPTIONS)"
san_run_ctest "$@"

# --- summary ----------------------------------------------------------------
san_collect_results
# Reports land in the log_path files, except UBSan's non-recoverable ones
# (-fno-sanitize-recover), which go to stderr: captured in ctest.log.
shopt -s nullglob
logs=("$logdir"/asan.* "$logdir"/ubsan.* "$logdir"/lsan.* "$logdir/ctest.log")
count() { cat "${logs[@]}" | grep -cE "$1"; }
asan_n=$(count 'ERROR: AddressSanitizer')
lsan_n=$(count 'ERROR: LeakSanitizer')
ubsan_n=$(count 'runtime error:|ERROR: UndefinedBehaviorSanitizer')
reports=$(( asan_n + lsan_n + ubsan_n ))

san_print_summary_head
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

san_finish "$reports"
