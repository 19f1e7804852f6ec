#!/usr/bin/env bash
# Debian's redis-server with I/O threads under hakmem.
#   run_redis.sh /path/to/libhakmem.so /path/to/python3 /path/to/redis_check.py
# Env: REDIS_BENCH_SECS (default 4) seconds of redis-benchmark batches;
# REDIS_DATA_MIB (default 6) MiB of string data in the verified data set;
# SERVER_TEST_PLAIN=1 runs redis without hakmem (see server_lib.sh).
#
# Debian links redis-server with libjemalloc.so.2.  Under LD_PRELOAD hakmem
# serves malloc, calloc, realloc, free and malloc_usable_size (the calls redis
# makes through zmalloc); redis's jemalloc-only calls (mallctl, nallocx,
# malloc_stats_print) still reach jemalloc, which holds almost nothing:
# INFO memory's allocator_* fields and MEMORY PURGE are jemalloc's, not
# hakmem's.  See tests/servers/README.md.
#
# 1. redis-server --io-threads 2 --io-threads-do-reads yes, no persistence,
#    on a free loopback port, under LD_PRELOAD.
# 2. redis-benchmark (set,get,lpush,lpop,incr,hset,sadd; 16 clients, 2
#    threads) in batches of 1000 requests per command for REDIS_BENCH_SECS
#    (at least one batch); every batch must exit 0 with no error reply (redis-benchmark
#    exits at the first error reply).
# 3. redis_check.py: write a known data set (strings of 1 B .. 256 KiB,
#    lists, hashes, sets) over 4 connections, read it all back, verify every
#    byte.  FLUSHALL, DBSIZE 0, then the same again: the peak RSS of the
#    second round may exceed the first one's by at most 25% of the first
#    round's growth (the memory freed by FLUSHALL is reused, not leaked).
# 4. Live bytes: redis's INFO used_memory (the sum of malloc_usable_size over
#    the blocks redis allocated through zmalloc) with the data set loaded,
#    against hakmem's live_bytes (the usable sizes of all its live blocks) in
#    its exit line.  Redis does not free its data set at SIGTERM, nothing else
#    runs between the two readings, so they must agree up to the memory redis
#    allocates outside zmalloc (libc, OpenSSL, Lua: about 0.2 MiB measured) and
#    the INFO client's buffers freed at its disconnect:
#      used_memory - 1 MiB <= live_bytes <= used_memory + 1 MiB + used_memory/50.
#    (An exact, same-instant comparison needs hakmem to answer redis's
#    mallctl("stats.allocated"); see tests/servers/README.md.)
# 5. SIGTERM: redis exits 0 and hakmem prints its statistics line.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
source "$here/../integration/lib.sh"
hk_init "$1"
check=$3
command -v "$2" >/dev/null 2>&1 || hk_skip "python interpreter '$2' not found"
# The interpreter itself, not a wrapper script (a pyenv shim is a bash script
# that costs a tenth of a second per call).
HK_PY=$(env -u LD_PRELOAD "$2" -c 'import sys; print(sys.executable)') || hk_fail "cannot run $2"
source "$here/server_lib.sh"
bench_secs=${REDIS_BENCH_SECS:-4}
data_mib=${REDIS_DATA_MIB:-6}
hk_need redis-server redis-benchmark timeout
chk() { "$HK_PY" "$check" "$@"; }

srv_start redis "$HK_PY $check @PORT@ wait 0.2" \
  redis-server --bind 127.0.0.1 --port @PORT@ --protected-mode no --daemonize no \
  --save '' --appendonly no --dir "$HK_TMP" --logfile '' \
  --io-threads 2 --io-threads-do-reads yes
read -r rss0 hwm0 < <(srv_mem)

# ---- redis-benchmark, in batches
cmds=set,get,lpush,lpop,incr,hset,sadd
batches=0 requests=0
start=$SECONDS
while (( batches == 0 || SECONDS - start < bench_secs )); do
  out=$HK_TMP/bench.$batches
  rcode=0
  timeout 120 redis-benchmark -h 127.0.0.1 -p "$SRV_PORT" -t "$cmds" -n 1000 -c 16 --threads 2 \
    -r 10000 -d 64 -q > "$out" 2>&1 || rcode=$?
  tr '\r' '\n' < "$out" | grep -E 'requests per second' > "$out.rps" || true
  if (( rcode != 0 )) || grep -qE 'Error|ERR' "$out" || [[ $(wc -l < "$out.rps") -ne 7 ]]; then
    tr '\r' '\n' < "$out" | grep -v 'rps=' | tail -n 20 >&2
    hk_fail "redis-benchmark batch $batches: status $rcode, $(wc -l < "$out.rps") of 7 commands completed"
  fi
  batches=$((batches + 1)) requests=$((requests + 7000))
done
hk_note "redis-benchmark: $batches batches, $requests requests, 0 errors in $((SECONDS - start)) s; last batch:"
sed 's/^ */     /' "$out.rps"

# ---- verified data set, twice around a FLUSHALL
rcode=0
chk "$SRV_PORT" load "$data_mib" > "$HK_TMP/load1" || rcode=$?
cat "$HK_TMP/load1"
(( rcode == 0 )) || hk_fail "data set check failed (round 1)"
read -r rss1 hwm1 < <(srv_mem)
chk "$SRV_PORT" flush || hk_fail "FLUSHALL did not empty the database"
read -r rss_flush _ < <(srv_mem)
rcode=0
chk "$SRV_PORT" load "$data_mib" > "$HK_TMP/load2" || rcode=$?
cat "$HK_TMP/load2"
(( rcode == 0 )) || hk_fail "data set check failed (round 2, after FLUSHALL)"
read -r rss2 hwm2 < <(srv_mem)
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
hk_note "RSS: $(mib "$rss0") at start, peak $(mib "$hwm1") after round 1, $(mib "$rss_flush") after FLUSHALL, peak $(mib "$hwm2") after round 2"
growth=$((hwm1 - rss0))
(( hwm2 - hwm1 <= growth / 4 )) ||
  hk_fail "peak RSS grew by $(mib $((hwm2 - hwm1))) in round 2 (round 1 grew it by $(mib "$growth")): freed memory not reused"

# ---- live bytes: INFO used_memory now, hakmem's live_bytes at exit
chk "$SRV_PORT" info > "$HK_TMP/info" || hk_fail "INFO failed"
used=$(sed -n 's/.*used_memory=\([0-9]*\).*/\1/p' "$HK_TMP/info")
[[ -n $used ]] || hk_fail "no used_memory in INFO memory"
srv_stop
[[ $SRV_RC == 0 ]] || { tail -n 20 "$HK_TMP/redis.err" "$HK_TMP/redis.out" >&2; hk_fail "redis-server exited with status $SRV_RC after SIGTERM"; }
hk_note "redis-server exited 0 after SIGTERM"
hk_check_stats "$HK_TMP/redis.err" 10000 "redis-server"
if [[ -z "${HAKMEM_TEST_NO_STATS:-}" ]]; then
  live=$(srv_stat "$HK_TMP/redis.err" live_bytes)
  diff=$((live - used))
  hk_note "used_memory=$used before SIGTERM, hakmem live_bytes=$live at exit: difference $((diff / 1024)) KiB"
  (( diff >= -(1 << 20) && diff <= (1 << 20) + used / 50 )) ||
    hk_fail "hakmem's live_bytes ($live) and redis's used_memory ($used) disagree by $diff bytes"
fi
echo "PASS"
