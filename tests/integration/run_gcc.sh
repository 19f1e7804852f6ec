#!/usr/bin/env bash
# The compiler under hakmem produces byte-identical objects.
#   run_gcc.sh /path/to/libhakmem.so CC CXX TESTS_DIR INCLUDE_DIR
# gcc -O2 compiles tests/unit/unit_api.c and a generated file with many
# functions; g++ -O2 compiles tests/integration/cxx_threads.cpp (template-heavy).
# Each object is compared (cmp) with the one compiled without hakmem.  The
# driver, cc1/cc1plus and as all run under the preload.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$1"
cc=$2 cxx=$3 src=$4 inc=$5
command -v "$cc" >/dev/null 2>&1 || hk_skip "C compiler $cc not found"
command -v "$cxx" >/dev/null 2>&1 || hk_skip "C++ compiler $cxx not found"

# A generated translation unit: many functions with loops, switches, structs.
gen="$HK_TMP/generated.c"
{
  echo '#include <stddef.h>'
  echo '#include <string.h>'
  echo 'struct rec { int a; long b; char name[32]; double w[8]; };'
  for i in $(seq 1 150); do
    cat <<C
static int helper_$i(const struct rec *r, int n) {
  int acc = $i;
  for (int k = 0; k < n; k++) {
    switch ((r[k].a + k) % 5) {
      case 0: acc += r[k].a * $i; break;
      case 1: acc ^= (int)r[k].b << ($i % 7); break;
      case 2: acc -= (int)strlen(r[k].name); break;
      case 3: acc += (int)(r[k].w[k % 8] * $i.5); break;
      default: acc = acc * 31 + k;
    }
  }
  return acc;
}
int api_$i(struct rec *r, int n) {
  for (int k = 0; k < n; k++) { r[k].a += $i; r[k].w[$i % 8] *= 1.0001; }
  return helper_$i(r, n) + (n > 1 ? helper_$((i > 1 ? i - 1 : 1))(r + 1, n - 1) : 0);
}
C
  done
} > "$gen"

compile() { # mode out lang-compiler args...
  local mode=$1 out=$2 comp=$3
  shift 3
  local run=hk_plain
  [[ $mode == hak ]] && run=hk_preload
  if ! $run "$comp" -O2 -frandom-seed=hakmem -c -o "$out" "$@" 2>> "$HK_TMP/$mode.err"; then
    hk_strip_stats "$HK_TMP/$mode.err" | tail -n 30 >&2
    hk_fail "$mode compile failed: $comp $*"
  fi
}

: > "$HK_TMP/ref.err"
: > "$HK_TMP/hak.err"
for mode in ref hak; do
  compile $mode "$HK_TMP/unit_api.$mode.o" "$cc" -std=gnu11 -I "$inc" -I "$src" "$src/unit/unit_api.c"
  compile $mode "$HK_TMP/generated.$mode.o" "$cc" -std=gnu11 "$gen"
  compile $mode "$HK_TMP/cxx.$mode.o" "$cxx" -std=gnu++17 -pthread "$src/integration/cxx_threads.cpp"
done
for o in unit_api generated cxx; do
  cmp "$HK_TMP/$o.ref.o" "$HK_TMP/$o.hak.o" ||
    hk_fail "object $o.o compiled under hakmem differs from the reference"
  hk_note "$o.o identical ($(stat -c %s "$HK_TMP/$o.hak.o") bytes)"
done
# cc1 and cc1plus make many thousands of allocations each.
hk_check_stats "$HK_TMP/hak.err" 20000 "gcc/g++ -O2"
echo "PASS"
