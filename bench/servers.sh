#!/usr/bin/env bash
# bench/servers.sh - throughput and peak RSS of real servers (Debian's
# memcached and redis-server) under several allocators, as a markdown table.
#
#   bench/servers.sh [options]
#
# Options (each has an environment variable of the same meaning):
#   -a, --allocators LIST  ALLOCATORS   default "hakmem glibc mimalloc jemalloc tcmalloc"
#   -s, --servers LIST     SERVERS      default "memcached redis"
#   -r, --runs N           RUNS         rounds; medians are reported (default 3)
#       --mc-secs S        MC_SECS      seconds of mc_load per memcached run (default 5)
#       --mc-threads N     MC_THREADS   mc_load client threads (default 4; memcached -t 4)
#       --redis-n N        REDIS_N      redis-benchmark requests per command (default 50000)
#       --redis-io N       REDIS_IO     redis --io-threads (default 1: none, see below)
#   -o, --out DIR          OUT          output dir (default $BUILD_DIR/bench-servers)
#   -h, --help
# Other environment variables: BUILD_DIR (default <repo>/build: libhakmem.so
# and tests/servers/mc_load), HAKMEM_LIB (default $BUILD_DIR/libhakmem.so).
#
# memcached (-t 4 -I 1m -m 256): mc_load, the verifying client of the server
# tests (set/get/delete of 8 B .. 256 KiB values): ops/s.
# redis-server (no persistence): redis-benchmark -t set,get -c 50 --threads 2
# -r 100000 -d 256: requests/s of SET and GET.
# Peak RSS: the server's VmHWM (/proc/PID/status) just before it is stopped.
#
# Allocators are resolved as in bench/scaling.sh (bench/allocators.sh); the
# server alone gets LD_PRELOAD, never the clients.  redis-server is linked
# with jemalloc, so "glibc" preloads libc.so.6 for it (otherwise it would run
# on jemalloc), and "jemalloc" is its native allocator.
# REDIS_IO defaults to 1: redis's I/O threads spin while waiting for each
# other, which on a small or shared machine measures the scheduler, not the
# allocator (the server test, tests/servers/run_redis.sh, uses 2).
#
# Rounds are interleaved: each round runs every server under every allocator
# once, in an order rotated each round.  A default run (5 allocators, 3
# rounds) takes about 4 minutes.  Not run by scripts/test.sh.
# Exit status: 0 if every run succeeded, 1 if some failed (marked in the
# table), 2 on setup errors.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ALLOCATORS=${ALLOCATORS:-"hakmem glibc mimalloc jemalloc tcmalloc"}
SERVERS=${SERVERS:-"memcached redis"}
RUNS=${RUNS:-3}
MC_SECS=${MC_SECS:-5}
MC_THREADS=${MC_THREADS:-4}
REDIS_N=${REDIS_N:-50000}
REDIS_IO=${REDIS_IO:-1}
OUT=${OUT:-}

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -a|--allocators) ALLOCATORS=$2; shift 2 ;;
    -s|--servers) SERVERS=$2; shift 2 ;;
    -r|--runs) RUNS=$2; shift 2 ;;
    --mc-secs) MC_SECS=$2; shift 2 ;;
    --mc-threads) MC_THREADS=$2; shift 2 ;;
    --redis-n) REDIS_N=$2; shift 2 ;;
    --redis-io) REDIS_IO=$2; shift 2 ;;
    -o|--out) OUT=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "servers.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

die() { echo "servers.sh: $*" >&2; exit 2; }
note() { echo "servers.sh: $*" >&2; }
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
BUILD_DIR=$(abspath "${BUILD_DIR:-$ROOT/build}")
HAKMEM_LIB=$(abspath "${HAKMEM_LIB:-$BUILD_DIR/libhakmem.so}")
OUT=$(abspath "${OUT:-$BUILD_DIR/bench-servers}")
MC_LOAD=$BUILD_DIR/tests/servers/mc_load

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
for s in $SERVERS; do
  case $s in
    memcached) command -v memcached >/dev/null || die "memcached is not installed (scripts/install-deps.sh)"
               [[ -x $MC_LOAD ]] || die "$MC_LOAD is missing: build first" ;;
    redis) command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
             die "redis-server/redis-benchmark are not installed (scripts/install-deps.sh)" ;;
    *) die "unknown server '$s' (known: memcached redis)" ;;
  esac
done
[[ -x $MC_LOAD ]] || die "$MC_LOAD is missing: build first"   # also picks the ports

source "$ROOT/bench/allocators.sh"
resolve_allocators "$ALLOCATORS"
LIBC=$(find_lib libc.so.6) || die "libc.so.6 not found"

mkdir -p "$OUT"
RAW=$OUT/raw.csv
LOG=$OUT/servers.log
echo "server,allocator,run,metric,value" >"$RAW"
: >"$LOG"

# ---- one server process at a time; stopped on any exit
SPID=
source "$ROOT/tests/servers/proc_lib.sh"   # proc_alive, proc_kill
stop_server() {
  [[ -n $SPID ]] || return 0
  proc_kill "$SPID"
  SPID=
}
trap stop_server EXIT

# start_server PRELOAD READY_CMD CMD... (@PORT@ replaced); sets PORT, SPID
start_server() {
  local preload=$1 ready=$2 attempt i
  shift 2
  for ((attempt = 0; attempt < 5; attempt++)); do
    PORT=$("$MC_LOAD" freeport)
    if [[ -n $preload ]]; then
      env LD_PRELOAD="$preload" "${@//@PORT@/$PORT}" >>"$LOG" 2>&1 &
    else
      env -u LD_PRELOAD "${@//@PORT@/$PORT}" >>"$LOG" 2>&1 &
    fi
    SPID=$!
    for ((i = 0; i < 150; i++)); do
      proc_alive "$SPID" || break
      eval "${ready//@PORT@/$PORT}" >/dev/null 2>&1 && return 0
    done
    stop_server
  done
  return 1
}

hwm_kb() { awk '/^VmHWM:/ { print $2 }' "/proc/$SPID/status"; }

record() { echo "$1,$2,$3,$4,$5" >>"$RAW"; }

run_memcached() {   # name preload run
  local user=()
  [[ $(id -u) -eq 0 ]] && user=(-u root)
  start_server "$2" "$MC_LOAD wait @PORT@ 0.2" \
    memcached "${user[@]}" -l 127.0.0.1 -p @PORT@ -U 0 -t 4 -I 1m -m 256 -c 256 || return 1
  local out ops
  out=$("$MC_LOAD" load "$PORT" -t "$MC_THREADS" -d "$MC_SECS" 2>>"$LOG") || { echo "$out" >>"$LOG"; stop_server; return 1; }
  echo "memcached $1 run $3: $out" >>"$LOG"
  ops=$(sed -n 's/.* ops_per_s=\([0-9]*\).*/\1/p' <<<"$out")
  record memcached "$1" "$3" ops_per_s "$ops"
  record memcached "$1" "$3" peak_rss_kb "$(hwm_kb)"
  stop_server
  RES="$ops ops/s"
}

run_redis() {       # name preload run
  local preload=$2 out set get
  # glibc: preload libc itself, or redis-server runs on its own jemalloc
  [[ $1 == glibc && -z $preload ]] && preload=$LIBC
  start_server "$preload" "redis-cli -p @PORT@ ping | grep -q PONG || { sleep 0.1; false; }" \
    redis-server --bind 127.0.0.1 --port @PORT@ --protected-mode no --daemonize no \
    --save '' --appendonly no --dir "$OUT" --logfile '' --io-threads "$REDIS_IO" || return 1
  out=$(timeout 300 redis-benchmark -h 127.0.0.1 -p "$PORT" -t set,get -n "$REDIS_N" -c 50 --threads 2 \
        -r 100000 -d 256 -q 2>&1 | tr '\r' '\n' | grep 'requests per second') || { stop_server; return 1; }
  echo "redis $1 run $3: $(tr '\n' ' ' <<<"$out")" >>"$LOG"
  set=$(sed -n 's/^SET: \([0-9.]*\) requests.*/\1/p' <<<"$out")
  get=$(sed -n 's/^GET: \([0-9.]*\) requests.*/\1/p' <<<"$out")
  [[ -n $set && -n $get ]] || { stop_server; return 1; }
  record redis "$1" "$3" set_rps "$set"
  record redis "$1" "$3" get_rps "$get"
  record redis "$1" "$3" peak_rss_kb "$(hwm_kb)"
  stop_server
  RES="SET $set/s GET $get/s"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
note "${alloc_names[*]} x [$SERVERS] x $RUNS rounds; results in $OUT"
failures=0
for ((r = 1; r <= RUNS; r++)); do
  for s in $SERVERS; do
    for ((k = 0; k < nalloc; k++)); do
      i=$(((k + r - 1) % nalloc))
      name=${alloc_names[$i]} lib=${alloc_libs[$i]}
      RES=
      if "run_$s" "$name" "$lib" "$r"; then
        note "round $r/$RUNS $s $name: $RES"
      else
        failures=$((failures + 1))
        record "$s" "$name" "$r" failed 1
        note "round $r/$RUNS $s $name: FAILED (see $LOG)"
      fi
    done
  done
done

# ---- table: medians, and each allocator against the best of the others
TABLE=$OUT/table.md
{
  echo "hakmem bench/servers.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "machine: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs; load average $load_start at start, $(cut -d' ' -f1-3 /proc/loadavg) at end"
  echo "median of $RUNS rounds; memcached: mc_load ${MC_THREADS} threads ${MC_SECS} s; redis: redis-benchmark -n $REDIS_N -c 50 --threads 2 -d 256, io-threads $REDIS_IO"
  echo
  awk -F, -v AL="${alloc_names[*]}" -v SV="$SERVERS" '
  function sortn(a, n,   i, j, x) { for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x } }
  function median(a, n) { sortn(a, n); return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  function fmt(m, v) { if (v == "") return "FAIL"; if (m == "peak_rss_kb") return sprintf("%.1f MiB", v / 1024); return (v >= 1e6) ? sprintf("%.2f M", v / 1e6) : sprintf("%.1f k", v / 1e3) }
  NR > 1 && $4 != "failed" { k = $1 SUBSEP $2 SUBSEP $4; n = ++cnt[k]; val[k, n] = $5 + 0 }
  END {
    na = split(AL, al, " "); ns = split(SV, sv, " ")
    nm = 0
    for (s = 1; s <= ns; s++) {
      if (sv[s] == "memcached") { met[++nm] = "memcached ops_per_s"; met[++nm] = "memcached peak_rss_kb" }
      if (sv[s] == "redis") { met[++nm] = "redis set_rps"; met[++nm] = "redis get_rps"; met[++nm] = "redis peak_rss_kb" }
    }
    for (m = 1; m <= nm; m++) {
      split(met[m], p, " ")
      for (a = 1; a <= na; a++) {
        k = p[1] SUBSEP al[a] SUBSEP p[2]; n = cnt[k] + 0
        if (n == 0) { med[m, a] = ""; continue }
        for (i = 1; i <= n; i++) x[i] = val[k, i]
        med[m, a] = median(x, n)
      }
    }
    hdr = "| allocator |"; sep = "|---|"
    for (m = 1; m <= nm; m++) {
      split(met[m], p, " ")
      lab = p[1] " " ((p[2] == "ops_per_s") ? "ops/s" : (p[2] == "set_rps") ? "SET/s" : (p[2] == "get_rps") ? "GET/s" : "peak RSS")
      hdr = hdr " " lab " |"; sep = sep "---:|"
    }
    print hdr; print sep
    for (a = 1; a <= na; a++) {
      line = "| " al[a] " |"
      for (m = 1; m <= nm; m++) {
        v = med[m, a]; split(met[m], p, " "); rss = (p[2] == "peak_rss_kb")
        best = ""   # best of the other allocators: highest throughput, lowest RSS
        for (b = 1; b <= na; b++) if (b != a && med[m, b] != "" && (best == "" || (rss ? med[m, b] < best : med[m, b] > best))) best = med[m, b]
        cell = fmt(p[2], v)
        if (v != "" && best != "" && best > 0) cell = cell sprintf(" (%.2fx)", v / best)
        line = line " " cell " |"
      }
      print line
    }
    print ""
    print "(Nx): this allocator / the best of the other allocators (throughput: higher is better; peak RSS: lower is better)."
  }' "$RAW"
} >"$TABLE"
cat "$TABLE"
echo "table: $TABLE  raw runs: $RAW  log: $LOG"
if ((failures > 0)); then
  note "$failures runs failed; see $LOG"
  exit 1
fi
