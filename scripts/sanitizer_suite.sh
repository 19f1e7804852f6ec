# sanitizer_suite.sh - the steps scripts/asan.sh and tsan/run.sh share, sourced
# by both (not run on its own).  Each step is a function; the scripts keep
# only what differs: the probe program, build option, sanitizer options and
# which report patterns they count.
#
# The sourcing script sets, before calling anything here:
#   san              short name in messages: "asan" or "tsan"
#   san_script       name in error messages: "asan.sh" or "tsan/run.sh"
#   repo             the repository's top directory
#   build, logdir    build and log directories
#   san_flags        the compiler flags the probe tests (for messages)
#   san_cmake_option the CMake option of that build (HAKMEM_ASAN, HAKMEM_TSAN)
#   san_build_kind   "an ASan" / "a TSan" (for messages)
#   san_build_var    the env var that names the build directory
#   san_no_compiler  first line of the message when no compiler works
#   san_hint         second line of it: which packages provide the runtime
# and defines san_works CC: does the sanitizer compile, link and run the probe
# program "$probe_dir/t.c" (written by the script after san_probe_dir) with CC.

jobs=${JOBS:-2}
secs=${HAKMEM_STRESS_SECONDS:-3}

# Print an error naming the calling script and exit 2.
die() { echo "$san_script: $*" >&2; exit 2; }

# Make a temporary directory for the compiler probe ($probe_dir), removed at exit.
san_probe_dir() {
  probe_dir=$(mktemp -d)
  trap 'rm -rf "$probe_dir"' EXIT
}

# Choose the compiler: the one an existing build was configured with (it must
# still work, and the build must be of this sanitizer's kind), else $CC, else
# the first of gcc, clang that passes san_works.  Sets cc and cmake_cc (the
# -DCMAKE_*_COMPILER arguments for a fresh build).
san_pick_compiler() {
  cmake_cc=()
  if [[ -f "$build/CMakeCache.txt" ]]; then
    cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
    san_works "$cc" || die "$build was configured with $cc, whose $san_flags does not work; remove $build"
    grep -q "^$san_cmake_option:BOOL=ON" "$build/CMakeCache.txt" ||
      die "$build exists and is not $san_build_kind build; remove it or set $san_build_var"
  else
    local candidates c cxx
    if [[ -n "${CC:-}" ]]; then candidates=("$CC"); else candidates=(gcc clang); fi
    cc=
    for c in "${candidates[@]}"; do
      if command -v "$c" >/dev/null && san_works "$c"; then cc=$c; break; fi
    done
    [[ -n "$cc" ]] || die "$san_no_compiler among: ${candidates[*]}
  $san_hint"
    case "$cc" in
      *clang*) cxx=${CXX:-${cc/clang/clang++}} ;;
      *gcc*)   cxx=${CXX:-${cc/gcc/g++}} ;;
      *)       cxx=${CXX:-c++} ;;
    esac
    cmake_cc=(-DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx")
  fi
  echo "== $san: compiler $($cc --version | head -n1)"
}

# Configure (with the sanitizer's CMake option, RelWithDebInfo) and build;
# on failure show the log's end and exit 2.
san_configure_and_build() {
  echo "== $san: configure $build"
  cmake -S "$repo" -B "$build" "${cmake_cc[@]}" -D"$san_cmake_option"=ON \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHAKMEM_STRESS_SECONDS="$secs" \
        > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; die "configure failed"; }
  rm -f "$build.configure.log"
  echo "== $san: build"
  cmake --build "$build" -j"$jobs" > "$build/build.log" 2>&1 ||
    { tail -n 60 "$build/build.log"; die "build failed (full log: $build/build.log)"; }
}

# Empty the log directory (the sanitizer options point their log_path there).
san_reset_logdir() {
  rm -rf "$logdir"
  mkdir -p "$logdir"
}

# Run ctest verbosely (arguments: extra ctest arguments) into
# $logdir/ctest.log.  Sets ctest_rc and elapsed (seconds).
san_run_ctest() {
  local start
  start=$(date +%s)
  ctest --test-dir "$build" -V "$@" > "$logdir/ctest.log" 2>&1
  ctest_rc=$?
  elapsed=$(( $(date +%s) - start ))
}

# Read ctest.log: print each test's result line, and set tests_line, ran,
# failed, stress_lines (the stress programs' result lines: ops=N and
# PASSED/FAILED), stress_n and ops_total.
san_collect_results() {
  grep -E '^ *[0-9]+/[0-9]+ Test +#' "$logdir/ctest.log" | sed 's/^/   /'
  tests_line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$logdir/ctest.log" | tail -n1)
  ran=$(sed -nE 's/.* out of ([0-9]+).*/\1/p' <<<"$tests_line")
  failed=$(sed -nE 's/.* ([0-9]+) tests failed out of.*/\1/p' <<<"$tests_line")
  stress_lines=$(grep -E '^[0-9]+: stress_[a-z_]+: threads=.* ops=[0-9]+ ' "$logdir/ctest.log")
  stress_n=0
  [[ -n "$stress_lines" ]] && stress_n=$(grep -c . <<<"$stress_lines")
  ops_total=$(grep -oE ' ops=[0-9]+' <<<"$stress_lines" | awk -F= '{s += $2} END {print s + 0}')
}

# The summary's first lines: its title, tests run, the stress programs with
# their thread and operation counts.
san_print_summary_head() {
  echo "== $san summary"
  echo "   tests run:        ${ran:-0} (failed: ${failed:-?}) in ${elapsed} s"
  echo "   stress programs:  $stress_n, operations: $ops_total"
  grep -oE '^[0-9]+: (stress_[a-z_]+): threads=[0-9]+ .* ops=[0-9]+' <<<"$stress_lines" |
    sed -E 's/^[0-9]+: (stress_[a-z_]+): threads=([0-9]+) .* ops=([0-9]+)/     \1 threads=\2 ops=\3/'
}

# The verdict (argument: number of sanitizer reports): exit 0 only if ctest
# passed, ran, and there is no report.
san_finish() {
  if (( ctest_rc != 0 || $1 > 0 )) || [[ -z "$tests_line" ]]; then
    echo "== $san: FAIL"
    exit 1
  fi
  echo "== $san: PASS"
  exit 0
}
