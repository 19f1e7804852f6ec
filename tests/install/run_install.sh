#!/usr/bin/env bash
# Install hakmem into a scratch prefix under the build directory, then build
# use_shared.c and use_api.c against the installed copy, once with pkg-config
# and once with CMake's find_package (consumer/), and run them.
#   run_install.sh BUILD_DIR LIBDIR(relative) SOURCE_DIR(tests/install) CC CMAKE
set -euo pipefail
build=$1 libdir_rel=$2 here=$3 cc=$4 cmake=$5
src_root=$(cd "$here/../.." && pwd)
work=$build/install-test
prefix=$work/prefix
libdir=$prefix/$libdir_rel
rm -rf "$prefix" "$work/pc" "$work/consumer"
mkdir -p "$work/pc"

fail() { echo "run_install: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" > "$work/install.log" ||
  { cat "$work/install.log"; fail "cmake --install"; }

step "installed files"
for f in include/hakmem.h "$libdir_rel/libhakmem.so.0.3.0" "$libdir_rel/libhakmem_api.a" \
         "$libdir_rel/pkgconfig/hakmem.pc" "$libdir_rel/pkgconfig/hakmem-api.pc" \
         "$libdir_rel/cmake/hakmem/hakmemConfig.cmake" \
         "$libdir_rel/cmake/hakmem/hakmemConfigVersion.cmake" \
         "$libdir_rel/cmake/hakmem/hakmemTargets.cmake" bin/hakmem share/doc/hakmem/LICENSE; do
  [[ -f $prefix/$f ]] || fail "$f not installed"
done
[[ -x $prefix/bin/hakmem ]] || fail "bin/hakmem not executable"
[[ $(readlink "$libdir/libhakmem.so.0") == libhakmem.so.0.3.0 ]] || fail "libhakmem.so.0 symlink"
[[ $(readlink "$libdir/libhakmem.so") == libhakmem.so.0 ]] || fail "libhakmem.so symlink"
soname=$(objdump -p "$libdir/libhakmem.so.0.3.0" | awk '$1 == "SONAME" {print $2}')
[[ $soname == libhakmem.so.0 ]] || fail "SONAME is '$soname'"
# Nothing installed may point back into the build or source tree (other
# than into the prefix, which is under the build tree here).
leak=$(grep -rIoh -e "$build/[^[:space:]\"';]*" -e "$src_root/[^[:space:]\"';]*" "$prefix" |
       grep -v -e "^$prefix/" -e "^$prefix\$" || true)
[[ -z $leak ]] || fail "installed files name the build/source tree: $leak"
grep -q "HAKMEM_LIB='$libdir/libhakmem.so.0'" "$prefix/bin/hakmem" ||
  fail "bin/hakmem does not preload $libdir/libhakmem.so.0"

# check_shared BINARY: links libhakmem.so.0, and its malloc is hakmem's.
check_shared() {
  objdump -p "$1" | grep -Eq 'NEEDED +libhakmem\.so\.0$' || fail "$1 does not need libhakmem.so.0"
  HAKMEM_STATS=1 "$1" "$libdir" > "$1.out" 2> "$1.err" ||
    { cat "$1.out" "$1.err"; fail "$1 failed"; }
  cat "$1.out"
  # 4 threads x 2 x 5000 blocks by malloc/calloc, counted by hakmem at exit.
  local n
  n=$(awk '/^hakmem:/ { for (i = 2; i <= NF; i++) if ($i ~ /^allocs=/) { sub(/^allocs=/, "", $i); print $i; exit } }' "$1.err")
  [[ -n $n && $n -ge 40000 ]] || { cat "$1.err"; fail "$1: no hakmem stats line with allocs >= 40000"; }
  echo "   HAKMEM_STATS=1: $(grep '^hakmem: ' "$1.err" | head -1 | cut -c1-100)"
}
# check_api BINARY: the hak_* API from the static library.
check_api() {
  if objdump -p "$1" | grep 'NEEDED.*libhakmem' >/dev/null; then fail "$1 needs libhakmem.so"; fi
  HAKMEM_STATS=1 "$1" > "$1.out" 2> "$1.err" || { cat "$1.out" "$1.err"; fail "$1 failed"; }
  cat "$1.out"
}

step "pkg-config (PKG_CONFIG_PATH=$libdir/pkgconfig)"
export PKG_CONFIG_PATH=$libdir/pkgconfig
[[ $(pkg-config --modversion hakmem) == 0.3.0 ]] || fail "pkg-config --modversion hakmem"
echo "   hakmem:     $(pkg-config --cflags --libs hakmem)"
echo "   hakmem-api: $(pkg-config --cflags --libs hakmem-api)"
# shellcheck disable=SC2046  # word splitting of pkg-config's output is intended
"$cc" -O1 -fno-builtin -o "$work/pc/use_shared" "$here/use_shared.c" \
  $(pkg-config --cflags --libs hakmem) -Wl,-rpath,"$libdir" -pthread -ldl ||
  fail "build with pkg-config hakmem"
check_shared "$work/pc/use_shared"
# shellcheck disable=SC2046
"$cc" -O1 -o "$work/pc/use_api" "$here/use_api.c" $(pkg-config --cflags --libs hakmem-api) ||
  fail "build with pkg-config hakmem-api"
check_api "$work/pc/use_api"
unset PKG_CONFIG_PATH

step "CMake find_package(hakmem) (CMAKE_PREFIX_PATH=$prefix)"
"$cmake" -S "$here/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DEXPECTED_PREFIX="$prefix" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release \
  > "$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "configure consumer"; }
grep -- '-- hakmem ' "$work/consumer.log"
"$cmake" --build "$work/consumer" >> "$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log"; fail "build consumer"; }
check_shared "$work/consumer/use_shared"
check_api "$work/consumer/use_api"
echo "run_install: ok"
