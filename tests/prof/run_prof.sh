#!/usr/bin/env bash
# The heap profiler end to end: tests/prof/prof_demo under
# LD_PRELOAD=libhakmem.so with HAKMEM_PROF=1, its profiles read by Debian's
# google-pprof (package google-perftools), no tool of ours.
#
#   run_prof.sh LIB PROF_DEMO CASE
#     pprof        exit from main: google-pprof --text names leak_site (live)
#                  and produce (remote file), estimates within 20% of the
#                  truth; the leak report names leak_site; the profiler's
#                  unwinder made no malloc (recursions=0)
#     fork         the fork child's own profile (FILE.PID): the parent's
#                  blocks it inherited and its own (child_site), within 20%
#     thread-exit  main calls pthread_exit, another thread exit(): complete
#     dump         hak_prof_dump(FILE) from the program
#     signal       HAKMEM_PROF_SIGNAL=12 and raise(SIGUSR2): FILE.1 written
#
# HAKMEM_PROF_SAMPLE=131072: each site's 64 MiB gives 512 samples on
# average, a standard error of 4.4%: 20% is 4.5 of them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
hk_init "$1"
demo=$2 case=$3
hk_need google-pprof

export HAKMEM_PROF=1 HAKMEM_PROF_SAMPLE=131072
mib=$((64 << 20))
prof=$HK_TMP/demo.heap

run() {
  env HAKMEM_PROF_FILE="$prof" LD_PRELOAD="$HK_LIB" "$demo" "$@" >"$HK_TMP/out" 2>"$HK_TMP/err" ||
    { cat "$HK_TMP/err" >&2; hk_fail "prof_demo $* exited with $?"; }
  cat "$HK_TMP/out"
}

# text FILE [pprof options]: google-pprof's table in bytes (or objects).
# Cached: google-pprof takes a second or two a run.
text() {
  local f=$1; shift
  local key
  key=$(echo "$f $*" | md5sum | cut -c1-16)
  if [[ ! -f $HK_TMP/text.$key ]]; then
    google-pprof --text "$@" "$demo" "$f" >"$HK_TMP/text.$key" 2>"$HK_TMP/pprof.err" ||
      { cat "$HK_TMP/pprof.err" >&2; hk_fail "google-pprof failed on $f"; }
  fi
  cat "$HK_TMP/text.$key"
}

# check FILE FUNCTION COLUMN WANT WHAT [pprof options]: the function's
# figure (column 1 flat, 4 cumulative) within 20% of WANT.
check() {
  local f=$1 fn=$2 col=$3 want=$4 what=$5; shift 5
  text "$f" "$@" >"$HK_TMP/text"
  local got
  got=$(awk -v fn="$fn" -v c="$col" '$6 == fn { v = $c; sub(/[^0-9.]+$/, "", v); print v; exit }' "$HK_TMP/text")
  if [[ -z "$got" ]]; then
    cat "$HK_TMP/text" >&2
    hk_fail "google-pprof does not name $fn in $f"
  fi
  awk -v g="$got" -v w="$want" 'BEGIN { r = g / w; exit !(r > 0.8 && r < 1.2) }' ||
    { cat "$HK_TMP/text" >&2; hk_fail "$what: $fn $got, truth $want (more than 20% off)"; }
  hk_note "$what: $fn $got (truth $want)"
}

# The two sites of a profile pair: leak_site live, produce freed remotely.
check_sites() {
  local f=$1 leak_mult=${2:-1}
  check "$f" leak_site 1 "$((leak_mult * mib))" "live bytes" --show_bytes
  check "$f" leak_site 1 "$((leak_mult * 16384))" "live blocks" --inuse_objects
  check "$f.remote" produce 1 "$mib" "remote-freed bytes" --show_bytes
  check "$f.remote" produce 1 32768 "remote-freed blocks" --inuse_objects
  # produce's blocks are all freed: nothing of it live.
  text "$f" --show_bytes >"$HK_TMP/text"
  awk '$6 == "produce" && $1 + 0 > 0 { exit 1 }' "$HK_TMP/text" || hk_fail "produce has live bytes in $f"
}

case $case in
  pprof)
    HAKMEM_PROF_LEAKS=1 run
    check_sites "$prof"
    grep -q '^hakmem: leak: about' "$HK_TMP/err" || hk_fail "no leak report on stderr"
    grep -A3 '^hakmem: leak: about' "$HK_TMP/err" | head -n 4
    grep -q 'recursions=0 ' "$HK_TMP/err" || { cat "$HK_TMP/err" >&2; hk_fail "the profiler allocated while unwinding"; }
    grep '^hakmem: prof:' "$HK_TMP/err"
    ;;
  fork)
    run fork
    [[ -f $prof ]] || hk_fail "the parent wrote no profile"
    shopt -s nullglob
    kids=("$prof".[0-9]*)
    kids=("${kids[@]/*.remote/}")
    [[ ${#kids[@]} -ge 1 && -n ${kids[0]} ]] || hk_fail "the fork child wrote no profile ($prof.PID)"
    child=${kids[0]}
    hk_note "child profile: ${child##*/}"
    check_sites "$child" 2
    check "$child" child_site 4 "$mib" "child's own live bytes" --show_bytes
    ;;
  thread-exit)
    run thread-exit
    check_sites "$prof"
    ;;
  dump)
    run dump "$HK_TMP/api.heap"
    check_sites "$HK_TMP/api.heap"
    ;;
  signal)
    HAKMEM_PROF_SIGNAL=12 run signal
    [[ -f $prof.1 && -f $prof.1.remote ]] || hk_fail "the signal handler wrote no $prof.1"
    check_sites "$prof.1"
    ;;
  *) hk_fail "unknown case $case" ;;
esac
echo PASS
