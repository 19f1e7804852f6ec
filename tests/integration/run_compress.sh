#!/usr/bin/env bash
# A multithreaded Debian compressor under hakmem: the same compressed bytes
# as without it, and the output decompresses (also under hakmem) to the input.
#   run_compress.sh /path/to/libhakmem.so pigz|zstd|xz
# Input: 16-32 MiB of generated, partly compressible text.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$1"
tool=$2

case $tool in
  # pigz: 128 KiB blocks compressed on 2 threads, buffers per block.
  pigz) comp=(pigz -p 2 -6 -c) decomp=(pigz -p 2 -d -c) min_allocs=300 mib=32 ;;
  # zstd pools its job buffers: about a hundred allocations for this input.
  zstd) comp=(zstd -q -T2 -3 -c) decomp=(zstd -q -d -c) min_allocs=50 mib=32 ;;
  # xz -T2 -0 compresses 1 MiB blocks on 2 threads (xz is slow: less input).
  xz) comp=(xz -T2 -0 -c) decomp=(xz -T2 -d -c) min_allocs=100 mib=16 ;;
  *) hk_fail "unknown tool $tool" ;;
esac
hk_need "$tool" cmp

in="$HK_TMP/input"
hk_gen_input "$in" "$mib"
hk_note "input: $(stat -c %s "$in") bytes"

hk_plain "${comp[@]}" < "$in" > "$HK_TMP/ref.z" 2> "$HK_TMP/ref.err" ||
  { cat "$HK_TMP/ref.err" >&2; hk_fail "reference ${comp[*]} failed"; }
rc=0
hk_preload "${comp[@]}" < "$in" > "$HK_TMP/hak.z" 2> "$HK_TMP/hak.err" || rc=$?
if (( rc != 0 )); then
  hk_strip_stats "$HK_TMP/hak.err" | tail -n 20 >&2
  hk_fail "${comp[*]} under hakmem exited with status $rc"
fi
cmp "$HK_TMP/ref.z" "$HK_TMP/hak.z" ||
  hk_fail "$tool output under hakmem differs from the reference"
hk_note "compressed output identical ($(stat -c %s "$HK_TMP/hak.z") bytes)"

rc=0
hk_preload "${decomp[@]}" < "$HK_TMP/hak.z" > "$HK_TMP/roundtrip" 2> "$HK_TMP/hakd.err" || rc=$?
(( rc == 0 )) || { hk_strip_stats "$HK_TMP/hakd.err" >&2; hk_fail "${decomp[*]} under hakmem exited with status $rc"; }
cmp "$in" "$HK_TMP/roundtrip" || hk_fail "$tool round trip under hakmem does not give the input back"
hk_note "round trip under hakmem identical"

hk_check_stats "$HK_TMP/hak.err" "$min_allocs" "$tool compress"
hk_check_stats "$HK_TMP/hakd.err" 1 "$tool decompress"
echo "PASS"
