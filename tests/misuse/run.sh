#!/usr/bin/env bash
# tests/misuse/run.sh - run every heap-misuse case (cases.c, cases_cxx.cpp)
# under each allocator, one process per case, and tell which caught it.
#
#   tests/misuse/run.sh [options]
#
# Options:
#   --lib SPEC      an allocator to test (repeatable): hakmem, glibc, mimalloc,
#                   jemalloc, tcmalloc, NAME=/path/lib.so, or /path/lib.so (named
#                   after the file: .../libhakmem.so is "hakmem").  Default:
#                   glibc hakmem mimalloc jemalloc tcmalloc; peers that are not
#                   installed are skipped (scripts/install-deps.sh --bench).
#   --expect FILE   FILE lists cases (one a line, # starts a comment) that
#                   hakmem must catch: exit 1, naming them, if any is missed
#   --bin DIR       run misuse_cases and misuse_cases_cxx built in DIR (the
#                   cmake build: build/tests/misuse); default: compile
#                   them from the sources into a temporary directory
#   --cases REGEX   only the cases whose name matches (grep -E)
#   --timeout S     seconds per case before it is killed (default 10)
#   --jobs N        cases run at once (default: the number of CPUs)
#   --out DIR       results.csv and logs/ALLOCATOR/CASE.{out,err} go there
#                   (default $BUILD_DIR/misuse-results)
#   -q, --quiet     no per-case table, only the totals and the verdicts
#   -h, --help
# Environment: BUILD_DIR (default <repo>/build), HAKMEM_LIB (the library
# "hakmem" means, default $BUILD_DIR/libhakmem.so), CC, CXX.
#
# Verdict of one run (README.md): death by a signal, or an exit status other
# than those below, is "caught"; 10 (the program saw the correct result of a
# contract: NULL + ENOMEM, EINVAL, old contents gone) is "caught" too;
# 99 (unnoticed) and 98 (unnoticed, old contents readable) are "missed";
# a run killed by the timeout is "timeout" and counts as missed; 2 (the case
# could not set itself up) and 64/125-127 (could not run) are "error".
#
# Exit status: 0; 1 if --expect names a case hakmem missed (or one that does
# not exist); 2 on a setup error.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
source "$ROOT/bench/allocators.sh"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "run.sh: $*" >&2; exit 2; }
note() { echo "run.sh: $*" >&2; }
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

specs=() expect= bindir= filter= timeout_s=10 jobs=$(nproc) out= quiet=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --lib) specs+=("$2"); shift 2 ;;
    --expect) expect=$(abspath "$2"); shift 2 ;;
    --bin) bindir=$(abspath "$2"); shift 2 ;;
    --cases) filter=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --out) out=$(abspath "$2"); shift 2 ;;
    -q|--quiet) quiet=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "--timeout needs a positive number of seconds"
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive number"
[[ -z $expect || -r $expect ]] || die "cannot read $expect"

BUILD_DIR=$(abspath "${BUILD_DIR:-$ROOT/build}")
HAKMEM_LIB=$(abspath "${HAKMEM_LIB:-$BUILD_DIR/libhakmem.so}")
out=${out:-$BUILD_DIR/misuse-results}

# No core files; glibc's fatal messages to stderr (not the terminal); glibc's
# malloc in its default configuration; nothing preloaded but what a run asks.
ulimit -c 0
export LIBC_FATAL_STDERR_=1
unset LD_PRELOAD MALLOC_CHECK_ MALLOC_PERTURB_ GLIBC_TUNABLES

# ---- allocators ----
if [[ ${#specs[@]} -eq 0 ]]; then specs=(glibc hakmem mimalloc jemalloc tcmalloc); fi
list=()
for s in "${specs[@]}"; do
  if [[ $s == */* && $s != *=* ]]; then          # a path: named after the file
    n=$(basename "$s"); n=${n#lib}; n=${n%%.so*}
    s="$n=$s"
  fi
  list+=("$s")
done
resolve_allocators "${list[*]}"   # bench/allocators.sh: missing peers are skipped
hak=-1
for ((a = 0; a < nalloc; a++)); do [[ ${alloc_names[$a]} == hakmem ]] && hak=$a; done
[[ -z $expect || $hak -ge 0 ]] || die "--expect needs hakmem among the allocators"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- the case programs ----
if [[ -z $bindir ]]; then
  bindir=$tmp/bin
  mkdir -p "$bindir"
  # The flags of CMakeLists.txt: keep every call as written (see cases.c).
  ${CC:-cc} -std=gnu11 -O0 -g -fno-builtin -pthread -Wall -Wextra -o "$bindir/misuse_cases" "$HERE/cases.c" ||
    die "cannot compile cases.c"
  if command -v "${CXX:-c++}" >/dev/null; then
    ${CXX:-c++} -std=c++17 -O0 -g -fno-builtin -pthread -Wall -Wextra -o "$bindir/misuse_cases_cxx" "$HERE/cases_cxx.cpp" ||
      die "cannot compile cases_cxx.cpp"
  else
    note "no C++ compiler: C++ cases skipped"
  fi
fi
[[ -x $bindir/misuse_cases ]] || die "$bindir/misuse_cases is missing"

case_names=() case_cats=() case_bins=()
for b in misuse_cases misuse_cases_cxx; do
  [[ -x $bindir/$b ]] || continue
  while read -r name cat _; do
    [[ -z $filter ]] || grep -qE -- "$filter" <<<"$name" || continue
    case_names+=("$name") case_cats+=("$cat") case_bins+=("$bindir/$b")
  done < <("$bindir/$b" --list)
done
ncase=${#case_names[@]}
[[ $ncase -ge 1 ]] || die "no case to run${filter:+ (none matches '$filter')}"

expected=()
if [[ -n $expect ]]; then
  while read -r line; do
    line=${line%%#*}; line=${line//[[:space:]]/}
    [[ -n $line ]] && expected+=("$line")
  done <"$expect"
fi

# ---- run ----
rm -rf "$out/logs"
for n in "${alloc_names[@]}"; do mkdir -p "$out/logs/$n"; done

# run_one A I: case I under allocator A; its stdout, stderr and exit status
# go to logs/ALLOCATOR/CASE.{out,err,rc}.  The group's own stderr is
# /dev/null: bash's "Aborted" notice for the dead child is not the case's.
run_one() {
  local lib=${alloc_libs[$1]} c=${case_names[$2]} bin=${case_bins[$2]}
  local f=$out/logs/${alloc_names[$1]}/$c rc=0 t0 t1
  local envp=(env -u LD_PRELOAD)
  [[ -n $lib ]] && envp=(env LD_PRELOAD="$lib")
  t0=$EPOCHREALTIME
  { timeout -k 2 "$timeout_s" "${envp[@]}" "$bin" "$c" >"$f.out" 2>"$f.err" || rc=$?; } 2>/dev/null
  t1=$EPOCHREALTIME
  echo "$rc $(( (10#${t1//[.,]/} - 10#${t0//[.,]/}) / 1000 ))" >"$f.rc"
}

t0=$SECONDS
running=0
for ((a = 0; a < nalloc; a++)); do
  for ((i = 0; i < ncase; i++)); do
    if ((running >= jobs)); then wait -n || true; running=$((running - 1)); fi
    run_one "$a" "$i" &
    running=$((running + 1))
  done
done
wait
elapsed=$((SECONDS - t0))

# ---- verdicts ----
declare -A signames=([4]=SIGILL [5]=SIGTRAP [6]=SIGABRT [7]=SIGBUS [8]=SIGFPE [9]=SIGKILL
                     [11]=SIGSEGV [13]=SIGPIPE [15]=SIGTERM [31]=SIGSYS)
# first_line FILE: FIRST = its first non-blank line (160 characters at most).
first_line() {
  local l
  FIRST=
  [[ -s $1 ]] || return 0
  while IFS= read -r l || [[ -n $l ]]; do
    if [[ $l == *[^[:space:]]* ]]; then FIRST=${l:0:160}; FIRST=${FIRST//$'\r'/}; return 0; fi
  done <"$1"
}

# verdict[a,i] (caught missed timeout error), cell (for the table), how (one
# line), ms (wall time of the run)
declare -A verdict cell how ms
for ((a = 0; a < nalloc; a++)); do
  for ((i = 0; i < ncase; i++)); do
    f=$out/logs/${alloc_names[$a]}/${case_names[$i]}
    rc=125 t=0
    [[ -r $f.rc ]] && read -r rc t <"$f.rc"
    first_line "$f.err"; err=$FIRST
    first_line "$f.out"; sout=$FIRST
    k=$a,$i
    ms[$k]=$t
    if [[ $rc == 124 || $rc == 137 ]]; then
      verdict[$k]=timeout cell[$k]=T/O how[$k]="timeout after ${timeout_s}s${err:+: $err}"
    elif ((rc > 128)); then
      s=${signames[$((rc - 128))]:-signal $((rc - 128))}
      verdict[$k]=caught cell[$k]=${s#SIG} how[$k]="$s${err:+: $err}"
    else
      case $rc in
        99) verdict[$k]=missed cell[$k]=- how[$k]="exit 99 (unnoticed)${err:+; stderr: $err}" ;;
        98) verdict[$k]=missed cell[$k]=leak how[$k]="exit 98: ${sout:-old contents readable}" ;;
        10) verdict[$k]=caught cell[$k]=ok how[$k]="exit 10: $sout" ;;
        2|64|125|126|127) verdict[$k]=error cell[$k]=ERR how[$k]="exit $rc: ${sout:-$err}" ;;
        *) verdict[$k]=caught cell[$k]="exit$rc" how[$k]="exit $rc${err:+: $err}" ;;
      esac
    fi
  done
done

mkdir -p "$out"
csv=$out/results.csv
{
  echo "case,category,allocator,verdict,ms,how"
  for ((i = 0; i < ncase; i++)); do for ((a = 0; a < nalloc; a++)); do
    q=${how[$a,$i]//\"/\"\"}
    echo "${case_names[$i]},${case_cats[$i]},${alloc_names[$a]},${verdict[$a,$i]},${ms[$a,$i]},\"$q\""
  done; done
} >"$csv"

# ---- report ----
w=8; for c in "${case_names[@]}"; do ((${#c} > w)) && w=${#c}; done
header() { printf "%-${w}s" "$1"; for n in "${alloc_names[@]}"; do printf " %9s" "$n"; done; echo; }
if [[ $quiet == 0 ]]; then
  echo "cell: caught by ABRT/SEGV/... (signal), ok (correct NULL/errno, old contents gone), exitN;"
  echo "      missed: - (exit 99), leak (exit 98: old contents readable), T/O (timeout); ERR: the case could not run"
  header case
  for ((i = 0; i < ncase; i++)); do
    printf "%-${w}s" "${case_names[$i]}"
    for ((a = 0; a < nalloc; a++)); do printf " %9s" "${cell[$a,$i]}"; done
    echo
  done
  echo
fi

cats=()
for c in "${case_cats[@]}"; do [[ " ${cats[*]} " == *" $c "* ]] || cats+=("$c"); done
echo "caught per category (of N cases):"
header category
for c in "${cats[@]}" TOTAL; do
  n=0
  for ((i = 0; i < ncase; i++)); do [[ $c == TOTAL || ${case_cats[$i]} == "$c" ]] && n=$((n + 1)); done
  printf "%-${w}s" "$c ($n)"
  for ((a = 0; a < nalloc; a++)); do
    k=0
    for ((i = 0; i < ncase; i++)); do
      [[ $c == TOTAL || ${case_cats[$i]} == "$c" ]] && [[ ${verdict[$a,$i]} == caught ]] && k=$((k + 1))
    done
    printf " %9s" "$k"
  done
  echo
done
for ((a = 0; a < nalloc; a++)); do
  t=0 e=0
  for ((i = 0; i < ncase; i++)); do
    [[ ${verdict[$a,$i]} == timeout ]] && t=$((t + 1))
    [[ ${verdict[$a,$i]} == error ]] && e=$((e + 1))
  done
  ((t + e == 0)) || echo "${alloc_names[$a]}: $t timeout(s), $e case(s) that could not run"
done

glibc=-1
for ((a = 0; a < nalloc; a++)); do [[ ${alloc_names[$a]} == glibc ]] && glibc=$a; done
if ((glibc >= 0 && hak >= 0)); then
  echo
  echo "caught by glibc, missed by hakmem (how glibc caught it):"
  k=0
  for ((i = 0; i < ncase; i++)); do
    if [[ ${verdict[$glibc,$i]} == caught && ${verdict[$hak,$i]} != caught ]]; then
      printf "  %-${w}s %s\n" "${case_names[$i]}" "${how[$glibc,$i]}"
      k=$((k + 1))
    fi
  done
  echo "  ($k cases)"
  rev=()
  for ((i = 0; i < ncase; i++)); do
    [[ ${verdict[$hak,$i]} == caught && ${verdict[$glibc,$i]} != caught ]] && rev+=("${case_names[$i]}")
  done
  echo "caught by hakmem, missed by glibc (${#rev[@]} cases): ${rev[*]}"
fi
echo
echo "$ncase cases x $nalloc allocators in ${elapsed}s; results: $csv, logs: $out/logs"

# ---- expectations ----
if [[ -n $expect ]]; then
  declare -A index
  for ((i = 0; i < ncase; i++)); do index[${case_names[$i]}]=$i; done
  bad=0 ok=0
  declare -A listed
  for c in "${expected[@]}"; do
    listed[$c]=1
    if [[ -z ${index[$c]+x} ]]; then
      [[ -n $filter ]] && continue       # not selected by --cases
      echo "EXPECTED: $c: no such case"; bad=$((bad + 1)); continue
    fi
    i=${index[$c]}
    if [[ ${verdict[$hak,$i]} == caught ]]; then
      ok=$((ok + 1))
    else
      echo "EXPECTED CAUGHT, hakmem ${verdict[$hak,$i]}: $c (${how[$hak,$i]})"
      bad=$((bad + 1))
    fi
  done
  for ((i = 0; i < ncase; i++)); do
    c=${case_names[$i]}
    [[ ${verdict[$hak,$i]} == caught && -z ${listed[$c]+x} ]] &&
      echo "note: hakmem now catches $c, not listed in $(basename "$expect"): add it" >&2
  done
  echo "expect: $ok passed, $bad failed"
  ((bad == 0)) || exit 1
fi
exit 0
