#!/usr/bin/env bash
# Debian's memcached (4 worker threads) under hakmem, driven by mc_load.
#   run_memcached.sh /path/to/libhakmem.so /path/to/mc_load
# Env: MC_LOAD_SECS (default 8) seconds of load; SERVER_TEST_PLAIN=1 runs
# memcached without hakmem (harness check, see server_lib.sh).
#
# 1. memcached -t 4 -I 1m -m 256 on a free loopback port under LD_PRELOAD.
# 2. mc_load: 4 threads, set/get/delete of 8 B .. 256 KiB values for
#    MC_LOAD_SECS, every value read back verified byte for byte, then every
#    key deleted (each reply checked).  Zero errors.
# 3. The server still answers (version, stats) and holds no item.
# 4. Memory.  memcached keeps item memory in its own slab allocator: 1 MiB
#    pages malloc'ed on demand and never freed, not even when every item is
#    deleted (under glibc too: RSS after the deletes equals the peak).  So
#    an RSS drop after the deletes is not something the allocator can give;
#    the checks are on what the allocator does control:
#    - its overhead: peak RSS - RSS at start - memcached's total_malloced
#      (the slab pages, from "stats slabs") <= 16 MiB.  Measured on the
#      reference machine: about 1 MiB under glibc and under hakmem; a 1 MiB
#      request costing more than it asks for, or per-thread caches holding
#      pages, shows up here.
#    - deleting does not grow it: RSS after the deletes <= peak RSS.
#    - hakmem's own account at exit (memcached frees nothing at SIGTERM):
#      total_malloced <= live_bytes <= total_malloced + 16 MiB, i.e. every
#      slab page memcached holds is a live hakmem block, and hakmem's live
#      count is not inflated (connections and thread buffers: ~1.5 MiB).
# 5. SIGTERM: memcached exits 0 and hakmem prints its statistics line.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
source "$here/../integration/lib.sh"
hk_init "$1"
source "$here/server_lib.sh"
mc=$2
secs=${MC_LOAD_SECS:-8}
hk_need memcached
[[ -x $mc ]] || hk_fail "load client $mc not found"

user=()
[[ $(id -u) -eq 0 ]] && user=(-u root)    # memcached refuses root without -u
srv_start memcached "$mc wait @PORT@ 0.2" \
  memcached "${user[@]}" -l 127.0.0.1 -p @PORT@ -U 0 -t 4 -I 1m -m 256 -c 256
read -r rss0 hwm0 < <(srv_mem)

rc=0
"$mc" load "$SRV_PORT" -t 4 -d "$secs" > "$HK_TMP/load.out" 2> "$HK_TMP/load.err" || rc=$?
cat "$HK_TMP/load.out"
if (( rc != 0 )); then
  cat "$HK_TMP/load.err" >&2
  hk_fail "mc_load reported errors (status $rc)"
fi
ops=$(sed -n 's/.* ops=\([0-9]*\) .*/\1/p' "$HK_TMP/load.out")
(( ops >= 100 )) || hk_fail "only ${ops:-0} operations in $secs s"

"$mc" stats "$SRV_PORT" > "$HK_TMP/stats.out" || hk_fail "memcached does not answer version/stats after the load"
stat() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" "$HK_TMP/stats.out"; }
items=$(stat curr_items) evictions=$(stat evictions) malloced=$(stat total_malloced)
hk_note "after the load and the deletes: curr_items=$items evictions=$evictions total_malloced=$malloced"
[[ $items == 0 ]] || hk_fail "memcached still holds $items items after every key was deleted"
[[ $evictions == 0 ]] || hk_fail "memcached evicted $evictions items: the verification assumes none (-m too small?)"
(( malloced > 0 )) || hk_fail "total_malloced=$malloced: no slab page allocated?"

read -r rss hwm < <(srv_mem)
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
overhead=$((hwm - rss0 - malloced / 1024))
hk_note "RSS: $(mib "$rss0") at start, peak $(mib "$hwm"), $(mib "$rss") after the deletes; slab pages $(mib $((malloced / 1024))); allocator overhead at peak $(mib "$overhead")"
(( rss <= hwm )) || hk_fail "RSS after the deletes ($rss kB) above the peak ($hwm kB)"
(( overhead <= 16 * 1024 )) ||
  hk_fail "peak RSS exceeds RSS at start + memcached's slab pages by $(mib "$overhead") (limit 16 MiB)"

srv_stop
[[ $SRV_RC == 0 ]] || { tail -n 20 "$HK_TMP/memcached.err" >&2; hk_fail "memcached exited with status $SRV_RC after SIGTERM"; }
hk_note "memcached exited 0 after SIGTERM"
hk_check_stats "$HK_TMP/memcached.err" 50 "memcached"
if [[ -z "${HAKMEM_TEST_NO_STATS:-}" ]]; then
  live=$(srv_stat "$HK_TMP/memcached.err" live_bytes)
  (( live >= malloced )) ||
    hk_fail "hakmem live_bytes=$live at exit < memcached's total_malloced=$malloced (memcached never frees its slab pages)"
  (( live - malloced <= 16 << 20 )) ||
    hk_fail "hakmem live_bytes=$live at exit exceeds memcached's total_malloced=$malloced by more than 16 MiB"
  hk_note "hakmem live_bytes at exit $live = total_malloced + $(( (live - malloced) >> 10 )) KiB"
fi
echo "PASS"
