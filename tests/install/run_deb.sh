#!/usr/bin/env bash
# The Debian package: build it with cpack, inspect it with dpkg-deb, install
# it into a scratch root with its own dpkg database, and use what it installed.
#   run_deb.sh BUILD_DIR LIBDIR(relative, e.g. lib/x86_64-linux-gnu) CPACK
set -euo pipefail
build=$1 libdir_rel=$2 cpack=$3
work=$build/install-test/deb
rm -rf "$work"
mkdir -p "$work"
fail() { echo "run_deb: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }
for tool in dpkg dpkg-deb; do
  command -v "$tool" > /dev/null || { echo "run_deb: SKIP: no $tool"; exit 77; }
done

step "cpack -G DEB"
(cd "$build" && "$cpack" -G DEB -B "$work/out") > "$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack"; }
debs=("$work"/out/hakmem_*.deb)
[[ ${#debs[@]} -eq 1 && -f ${debs[0]} ]] || fail "expected one hakmem_*.deb, got: ${debs[*]}"
deb=${debs[0]}
echo "   $(basename "$deb")"

step "dpkg-deb -c"
dpkg-deb -c "$deb" > "$work/contents"
lib=/usr/$libdir_rel
for f in "$lib/libhakmem.so.0.3.0" "$lib/libhakmem.so.0 -> libhakmem.so.0.3.0" \
         "$lib/libhakmem.so -> libhakmem.so.0" "$lib/libhakmem_api.a" /usr/include/hakmem.h \
         "$lib/pkgconfig/hakmem.pc" "$lib/pkgconfig/hakmem-api.pc" \
         "$lib/cmake/hakmem/hakmemConfig.cmake" "$lib/cmake/hakmem/hakmemTargets.cmake" \
         /usr/bin/hakmem /usr/share/doc/hakmem/LICENSE; do
  grep -q -- " \.$f\$" "$work/contents" || { cat "$work/contents"; fail "dpkg-deb -c: no $f"; }
done
grep -Eq '^-rwxr-xr-x root/root .* \./usr/bin/hakmem$' "$work/contents" ||
  fail "usr/bin/hakmem is not an executable owned by root"
if grep -v ' \./usr/' "$work/contents"; then fail "files outside /usr"; fi
awk '{ print "   " $1, $2, $NF == "" ? $0 : substr($0, index($0, "./")) }' "$work/contents" | grep -v '/$'

step "dpkg-deb -I"
dpkg-deb -I "$deb" > "$work/info"
grep -E '^ (Package|Version|Architecture|Depends|Suggests|Section):' "$work/info"
[[ $(dpkg-deb -f "$deb" Package) == hakmem ]] || fail "Package"
[[ $(dpkg-deb -f "$deb" Version) == 0.3.0 ]] || fail "Version"
depends=$(dpkg-deb -f "$deb" Depends)
# libhakmem.so.0 needs liburcu-bp.so.8 (liburcu8) and libc.
[[ $depends =~ (^|, )liburcu8( |,|$) ]] || fail "Depends lacks liburcu8: '$depends'"
[[ $depends =~ (^|, )libc6( |,|$) ]] || fail "Depends lacks libc6: '$depends'"
# Listings go to files first: with pipefail, `grep -q` exiting at its first
# match can kill the writer with SIGPIPE and fail the pipeline.
dpkg-deb --ctrl-tarfile "$deb" > "$work/control.tar"
tar -tf "$work/control.tar" > "$work/control.list"
grep -qx './shlibs' "$work/control.list" || fail "no shlibs control file"
tar -xOf "$work/control.tar" ./triggers > "$work/triggers"
grep -qx 'activate-noawait ldconfig' "$work/triggers" ||
  fail "no ldconfig trigger"
# The maintainer scripts leave ldconfig to the trigger (they would run it on
# the host below, not in the scratch root).
for script in postinst postrm; do
  if tar -xOf "$work/control.tar" "./$script" 2>/dev/null | grep -v '^#' | grep ldconfig >/dev/null; then
    fail "$script runs ldconfig"
  fi
done

step "dpkg -i into a scratch root"
root=$work/root
admin=$root/var/lib/dpkg
mkdir -p "$admin/updates" "$admin/info"
touch "$admin/status" "$admin/available"
# dpkg wants ldconfig and start-stop-daemon on PATH (it checks, even with
# --instdir); they live in /sbin.
# --log: not the host's /var/log/dpkg.log.  Works as root and not.
PATH=$PATH:/usr/sbin:/sbin dpkg --instdir="$root" --admindir="$admin" --log=/dev/null \
  --force-not-root --force-script-chrootless --force-depends -i "$deb" > "$work/dpkg.log" 2>&1 ||
  { cat "$work/dpkg.log"; fail "dpkg -i"; }
status=$(dpkg-query --admindir="$admin" -W -f='${Package} ${Version} ${Status}' hakmem)
echo "   dpkg-query: $status"
[[ $status == "hakmem 0.3.0 install ok installed" ]] || fail "dpkg status: '$status'"
dpkg-query --admindir="$admin" -L hakmem > "$work/listed"
for f in "$lib/libhakmem.so.0" /usr/bin/hakmem /usr/include/hakmem.h "$lib/pkgconfig/hakmem.pc"; do
  grep -qx "$f" "$work/listed" || fail "dpkg -L hakmem lacks $f"
  [[ -e $root$f ]] || fail "$root$f not installed"
done
sed 's/^/   /' "$work/listed" | grep -E 'bin/|\.so|\.pc$|\.h$'

step "what it installed works"
# The launcher and .pc files name the real /usr paths, not the scratch root.
grep -q "^HAKMEM_LIB='$lib/libhakmem.so.0'\$" "$root/usr/bin/hakmem" || fail "launcher path"
grep -qx "libdir=$lib" "$root$lib/pkgconfig/hakmem.pc" || fail "hakmem.pc libdir"
[[ $("$root/usr/bin/hakmem" --version) == "hakmem 0.3.0" ]] || fail "launcher --version"
# The packaged library replaces malloc in a real program.
HAKMEM_STATS=1 LD_PRELOAD=$root$lib/libhakmem.so.0 ls / > /dev/null 2> "$work/ls.err" ||
  { cat "$work/ls.err"; fail "ls under the packaged library"; }
grep -Eq '^hakmem: (.* )?allocs=[1-9]' "$work/ls.err" || { cat "$work/ls.err"; fail "no stats line"; }
echo "   LD_PRELOAD=<root>$lib/libhakmem.so.0: $(grep '^hakmem:' "$work/ls.err" | cut -c1-80)"
echo "run_deb: ok"
