#!/usr/bin/env bash
# bench/insn.sh - instructions per malloc+free pair, per allocator, counted
# by valgrind's callgrind on bench/insn (64 blocks of 16..1000 B allocated,
# then freed in reverse order, per iteration).
#
#   bench/insn.sh
#
# Each allocator runs twice, with ITERS_A and ITERS_B iterations; start-up,
# the warm-up and exit are the same in both runs, so
#   insns/pair = (Ir_B - Ir_A) / ((ITERS_B - ITERS_A) * 64)
# is the cost of one malloc + free in steady state, plus the few instructions
# of the loop around them (the same for every allocator).  Instruction counts
# are not time: they ignore cache misses, branch mispredictions and atomics'
# latency, but they are exact and do not depend on the machine's load.
#
# Environment:
#   ALLOCATORS  default "hakmem glibc mimalloc jemalloc tcmalloc"; an entry
#               may also be NAME=/path/to/lib.so.  Missing peers are skipped.
#   BUILD_DIR   build tree holding bench/insn and libhakmem.so (default <repo>/build)
#   HAKMEM_LIB  the preload library for "hakmem" (default $BUILD_DIR/libhakmem.so)
#   ITERS_A, ITERS_B  iteration counts of the two runs (default 2000, 12000)
#
# Prints a markdown table.  Takes about 15 s (valgrind runs the program
# about 50x slower; the two runs of an allocator run in parallel).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ALLOCATORS=${ALLOCATORS:-"hakmem glibc mimalloc jemalloc tcmalloc"}
ITERS_A=${ITERS_A:-2000}
ITERS_B=${ITERS_B:-12000}
PAIRS_PER_ITER=64

case "${1:-}" in
  -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "insn.sh: no arguments expected (try --help)" >&2; exit 2 ;;
esac

die() { echo "insn.sh: $*" >&2; exit 2; }
note() { echo "insn.sh: $*" >&2; }
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

BUILD_DIR=$(abspath "${BUILD_DIR:-$ROOT/build}")
HAKMEM_LIB=$(abspath "${HAKMEM_LIB:-$BUILD_DIR/libhakmem.so}")
PROG=$BUILD_DIR/bench/insn

command -v valgrind >/dev/null 2>&1 || die "valgrind is not installed (apt-get install valgrind)"
[[ -x $PROG ]] || die "$PROG is missing: build first (cmake -S $ROOT -B $BUILD_DIR -DCMAKE_BUILD_TYPE=Release && cmake --build $BUILD_DIR -j2)"
[[ $ITERS_A =~ ^[0-9]+$ && $ITERS_B =~ ^[0-9]+$ && $ITERS_B -gt $ITERS_A ]] ||
  die "ITERS_A and ITERS_B must be integers with ITERS_B > ITERS_A"

find_lib() {     # find_lib soname...: first existing path (as in scaling.sh)
  local dirs=("/usr/lib/$(uname -m)-linux-gnu" /usr/lib64 /usr/lib /usr/local/lib) d n
  for n in "$@"; do for d in "${dirs[@]}"; do
    [[ -e $d/$n ]] && { echo "$d/$n"; return 0; }
  done; done
  return 1
}

names=() libs=()
for a in $ALLOCATORS; do
  name=$a lib=
  case "$a" in
    *=*) name=${a%%=*}; lib=$(abspath "${a#*=}") ;;
    hakmem) lib=$HAKMEM_LIB; [[ -e $lib ]] || die "hakmem library $lib not found: build it, set HAKMEM_LIB, or drop hakmem from ALLOCATORS" ;;
    glibc) lib= ;;
    mimalloc) lib=$(find_lib libmimalloc.so.2 libmimalloc.so) || { note "mimalloc not installed: skipped"; continue; } ;;
    jemalloc) lib=$(find_lib libjemalloc.so.2 libjemalloc.so) || { note "jemalloc not installed: skipped"; continue; } ;;
    tcmalloc) lib=$(find_lib libtcmalloc_minimal.so.4 libtcmalloc.so.4) || { note "tcmalloc not installed: skipped"; continue; } ;;
    *) die "unknown allocator '$a' (use NAME=/path/lib.so for others)" ;;
  esac
  [[ -z $lib || -e $lib ]] || die "$name: $lib not found"
  if [[ -n $lib ]] && ! LD_PRELOAD=$lib cat /proc/self/maps 2>/dev/null | grep -qF "$(readlink -f "$lib")"; then
    die "$name: LD_PRELOAD=$lib does not load (see: LD_PRELOAD=$lib true)"
  fi
  names+=("$name") libs+=("$lib")
done
[[ ${#names[@]} -ge 1 ]] || die "no allocator to run"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run_cg OUT LIB ITERS: callgrind run with LIB preloaded (empty: glibc).
# callgrind does not replace malloc (unlike memcheck), so the preloaded
# allocator is the one that runs; valgrind passes LD_PRELOAD on to the
# client after its own preload.
run_cg() {
  local envset=(-u LD_PRELOAD)
  [[ -n $2 ]] && envset=("LD_PRELOAD=$2")
  env "${envset[@]}" valgrind --tool=callgrind --callgrind-out-file="$1" \
    "$PROG" "$3" >"$1.log" 2>&1
}
# lib_ir OUT NAME...: instructions executed in the object(s) whose file name
# is one of NAME (self cost: cost lines under ob=, not the inclusive cost
# lines that follow calls=; an id is named at its first use, in ob= or cob=)
lib_ir() {
  local out=$1; shift
  awk -v names=" $* " '
    function id(s) { return substr(s, index(s, "("), index(s, ")") - index(s, "(") + 1) }
    /^c?ob=\(/ { n = split($0, p, "/"); if (NF > 1 && index(names, " " p[n] " ")) want[id($1)] = 1 }
    /^ob=/ { cur = id($1); next }
    /^calls=/ { skip = 1; next }
    /^[0-9+*-]/ { if (skip) { skip = 0; next } self[cur] += $2 }
    END { s = 0; for (k in want) s += self[k]; printf "%.0f\n", s }' "$out"
}
ir_total() { sed -n 's/^summary: *\([0-9][0-9]*\).*/\1/p; s/^totals: *\([0-9][0-9]*\).*/\1/p' "$1" | head -1; }

results=()
for ((i = 0; i < ${#names[@]}; i++)); do
  name=${names[$i]} lib=${libs[$i]}
  run_cg "$tmp/$i.a" "$lib" "$ITERS_A" & pa=$!
  run_cg "$tmp/$i.b" "$lib" "$ITERS_B" & pb=$!
  ok=1
  wait $pa || ok=0
  wait $pb || ok=0
  if [[ $ok == 0 ]]; then
    note "$name: valgrind run failed:"; tail -5 "$tmp/$i.a.log" "$tmp/$i.b.log" >&2
    results+=("FAIL"); continue
  fi
  a=$(ir_total "$tmp/$i.a") b=$(ir_total "$tmp/$i.b")
  [[ -n $a && -n $b ]] || { note "$name: no instruction total in the callgrind output"; results+=("FAIL"); continue; }
  # the extra iterations must run in glibc's malloc (libc.so.6) for glibc
  # and not for the others: otherwise the preload silently failed.  (The
  # preloaded library's own share is not checked: valgrind does not always
  # attribute its code to it, e.g. tcmalloc's malloc shows up under "???".)
  la=$(lib_ir "$tmp/$i.a" libc.so.6) lb=$(lib_ir "$tmp/$i.b" libc.so.6)
  if [[ -z $lib ]]; then want=1; else want=0; fi
  if ! awk -v d=$((b - a)) -v l=$((lb - la)) -v w=$want 'BEGIN { exit !(d > 0 && (l > 0.5 * d) == w) }'; then
    if [[ -z $lib ]]; then note "$name: malloc/free did not run in libc.so.6 (an LD_PRELOAD in the environment?)"
    else note "$name: malloc/free ran in glibc, not in $lib (preload failed?)"; fi
    results+=("FAIL"); continue
  fi
  results+=("$(awk -v a="$a" -v b="$b" -v n=$(((ITERS_B - ITERS_A) * PAIRS_PER_ITER)) 'BEGIN { printf "%.1f", (b - a) / n }')")
done

hak=
for ((i = 0; i < ${#names[@]}; i++)); do
  [[ ${names[$i]} == hakmem && ${results[$i]} != FAIL ]] && hak=${results[$i]}
done

echo "insns per malloc+free pair (callgrind Ir, 64 blocks of 16..1000 B per iteration," \
     "$ITERS_B - $ITERS_A iterations; $(uname -m), $(ldd --version 2>/dev/null | head -1 | sed 's/.* //') glibc)"
echo
if [[ -n $hak ]]; then
  echo "| allocator | insns/pair | hakmem/allocator |"
  echo "|-----------|-----------:|-----------------:|"
else
  echo "| allocator | insns/pair |"
  echo "|-----------|-----------:|"
fi
for ((i = 0; i < ${#names[@]}; i++)); do
  r=${results[$i]}
  if [[ -n $hak ]]; then
    ratio=-
    [[ $r != FAIL && ${names[$i]} != hakmem ]] && ratio=$(awk -v h="$hak" -v x="$r" 'BEGIN { printf "%.2fx", h / x }')
    printf '| %-9s | %10s | %16s |\n' "${names[$i]}" "$r" "$ratio"
  else
    printf '| %-9s | %10s |\n' "${names[$i]}" "$r"
  fi
done
if [[ -n $hak ]]; then
  echo
  echo "hakmem/allocator: hakmem's instructions / this allocator's (below 1.00x hakmem executes fewer)."
fi
for r in "${results[@]}"; do [[ $r == FAIL ]] && exit 1; done
exit 0
