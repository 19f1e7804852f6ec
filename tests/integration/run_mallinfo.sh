#!/usr/bin/env bash
# glibc's mallinfo2/mallinfo/malloc_info/malloc_stats report hakmem's numbers
# under LD_PRELOAD.
#   run_mallinfo.sh /path/to/libhakmem.so /path/to/preload_mallinfo PYTHON
# The program checks mallinfo2/mallinfo itself; here: malloc_info's XML
# parses, says allocator="hakmem", lists the program's 1000 live 100-byte
# blocks in the 112-byte class and carries hakmem's counters; malloc_stats
# printed glibc's lines and hakmem's report on stderr.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hk_init "$1"
prog=$2 python=${3:-python3}
hk_need "$python"

rc=0
hk_preload "$prog" "$HK_TMP/info.xml" > "$HK_TMP/out" 2> "$HK_TMP/err" || rc=$?
cat "$HK_TMP/out"
if (( rc != 0 )); then
  cat "$HK_TMP/err" >&2
  hk_fail "preload_mallinfo exited with status $rc"
fi
grep -q '^Arena 0 (hakmem' "$HK_TMP/err" || hk_fail "malloc_stats: no 'Arena 0 (hakmem' line on stderr"
grep -q '^system bytes     = ' "$HK_TMP/err" || hk_fail "malloc_stats: no glibc-style 'system bytes' line"
[[ $(grep -c '^hakmem: allocs=' "$HK_TMP/err") -ge 2 ]] ||
  hk_fail "malloc_stats: no hakmem summary line besides the exit report"
hk_check_stats "$HK_TMP/err" 1000 "mallinfo program"

"$python" - "$HK_TMP/info.xml" <<'PY' || hk_fail "malloc_info's XML is not hakmem's (above)"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "malloc" and root.get("allocator") == "hakmem", root.attrib
sizes = root.find("heap/sizes")
assert sizes is not None, "no heap/sizes"
c112 = [s for s in sizes.findall("size") if s.get("to") == "112"]
assert c112 and int(c112[0].get("count")) >= 1000 and int(c112[0].get("total")) == 112 * int(c112[0].get("count")), \
    [s.attrib for s in sizes]
mmap = [t for t in root.findall("total") if t.get("type") == "mmap"]
assert mmap and int(mmap[0].get("count")) >= 1 and int(mmap[0].get("size")) >= 8 << 20, [t.attrib for t in mmap]
h = root.find("hakmem")
assert h is not None and int(h.get("allocs")) >= 1001 and int(h.get("stats")) == 1, h.attrib if h is not None else None
cur = [s for s in root.findall("system") if s.get("type") == "current"]
assert cur and int(cur[0].get("size")) % (2 << 20) == 0, [s.attrib for s in cur]
print("   malloc_info: allocator=hakmem, class 112: %s live blocks, hakmem allocs=%s" % (c112[0].get("count"), h.get("allocs")))
PY
echo "PASS"
