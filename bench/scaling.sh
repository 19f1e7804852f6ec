#!/usr/bin/env bash
# bench/scaling.sh - run the hakmem workloads under several allocators and
# thread counts, and summarise them as a markdown table, CSV files and a PNG.
#
#   bench/scaling.sh [options]
#
# Options (each has an environment variable of the same meaning):
#   -w, --workloads LIST   WORKLOADS   default "larson churn prodcons strings realloc falseshare
#                                       pcqueue turnover large bignum mixed strbuild mstress bigbuf
#                                       glibc_simple"
#   -a, --allocators LIST  ALLOCATORS  default "hakmem glibc mimalloc jemalloc tcmalloc"
#   -t, --threads LIST     THREADS     default "1 2 4"
#   -r, --runs N           RUNS        runs per point, the median is reported (default 5)
#   -s, --secs S           SECS        duration of each non-larson run (default 1)
#   -o, --out DIR          OUT         output dir (default $BUILD_DIR/bench-results)
#       --quick                        WORKLOADS=larson
#   -h, --help
# Other environment variables:
#   BUILD_DIR    build tree holding bench/ and libhakmem.so (default <repo>/build)
#   HAKMEM_LIB   the preload library for "hakmem" (default $BUILD_DIR/libhakmem.so)
#   LARSON_ARGS  larson arguments before the thread count
#                (default "2 8 1000 5000 100 4141": sleep 2 s, sizes 8..1000 B,
#                5000 blocks per thread, 100 rounds, seed 4141)
#   TIMEOUT      seconds before a run is killed (default: 3x its duration + 30)
#   LARGE_MODE   read by the large workload itself (inherited): mixed (default)
#                or buffers
#   LARGE_ITERS  steps per thread of every large run (default 40): equal work
#                for every allocator, so time and peak RSS compare; SECS is
#                not used for large (LARGE_ITERS=0: timed runs of SECS instead)
#   BIGBUF_STEPS steps per thread of every bigbuf run (default 40), by
#                bench/fixed/bigbuf: equal work, as for large (0: timed runs
#                of bench/bigbuf for SECS instead)
#
# An allocator entry may also be NAME=/path/to/lib.so.  "hakmem" missing is an
# error (drop it from ALLOCATORS to measure the others only); missing peers
# are skipped.  Runs are interleaved: for each workload and thread count,
# round r runs every allocator once (in an order rotated each round), so slow
# drift of the machine affects all allocators alike.
#
# Exit status: 0 if every run succeeded, 1 if some run failed or crashed
# (the table is still printed, with the failures marked), 2 on setup errors.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

WORKLOADS=${WORKLOADS:-"larson churn prodcons strings realloc falseshare pcqueue turnover large bignum mixed strbuild mstress bigbuf glibc_simple"}
ALLOCATORS=${ALLOCATORS:-"hakmem glibc mimalloc jemalloc tcmalloc"}
THREADS=${THREADS:-"1 2 4"}
RUNS=${RUNS:-5}
SECS=${SECS:-1}
LARSON_ARGS=${LARSON_ARGS:-"2 8 1000 5000 100 4141"}
TIMEOUT=${TIMEOUT:-}
OUT=${OUT:-}
# Equal work for large: a timed run lets a fast allocator do 30x the steps of a
# slow one, and its live data (so its peak RSS) grows with the steps it runs.
# 40 steps per thread take the slowest peer 1.5-3.5 s on the 2-vCPU VM.
LARGE_ITERS=${LARGE_ITERS:-40}
# The same for bigbuf: its 20 live buffers take random sizes, so the most
# bytes live at once, and with them the peak RSS, rise with the number of
# steps run (at 1 thread in 3 s hakmem ran about 4,500 steps and peaked at
# 429 MB, against 381 MB for 40 steps; jemalloc ran about 120, 377 MB).
BIGBUF_STEPS=${BIGBUF_STEPS:-40}

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    -w|--workloads) WORKLOADS=$2; shift 2 ;;
    -a|--allocators) ALLOCATORS=$2; shift 2 ;;
    -t|--threads) THREADS=$2; shift 2 ;;
    -r|--runs) RUNS=$2; shift 2 ;;
    -s|--secs) SECS=$2; shift 2 ;;
    -o|--out) OUT=$2; shift 2 ;;
    --quick) WORKLOADS=larson; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "scaling.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

die() { echo "scaling.sh: $*" >&2; exit 2; }
note() { echo "scaling.sh: $*" >&2; }

abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
BUILD_DIR=$(abspath "${BUILD_DIR:-$ROOT/build}")
HAKMEM_LIB=$(abspath "${HAKMEM_LIB:-$BUILD_DIR/libhakmem.so}")
OUT=$(abspath "${OUT:-$BUILD_DIR/bench-results}")
BIN=$BUILD_DIR/bench

[[ $RUNS =~ ^[0-9]+$ && $RUNS -ge 1 ]] || die "RUNS must be a positive integer"
[[ $RUNS -ge 5 ]] || note "warning: RUNS=$RUNS; medians of fewer than 5 runs are noisy"
for t in $THREADS; do [[ $t =~ ^[1-9][0-9]*$ ]] || die "bad thread count '$t'"; done
read -r -a larson_args <<<"$LARSON_ARGS"
[[ $LARGE_ITERS =~ ^[0-9]+$ ]] || die "LARGE_ITERS must be a number of steps (0: timed runs)"
if [[ $LARGE_ITERS == 0 ]]; then unset LARGE_ITERS; else export LARGE_ITERS; fi
[[ $BIGBUF_STEPS =~ ^[0-9]+$ ]] || die "BIGBUF_STEPS must be a number of steps (0: timed runs)"
[[ $BIGBUF_STEPS == 0 ]] && BIGBUF_STEPS=
[[ ${#larson_args[@]} -eq 6 ]] || die "LARSON_ARGS needs 6 numbers: sleep min max chunks rounds seed"
larson_sleep=${larson_args[0]}

known_workloads="larson churn prodcons strings realloc falseshare pcqueue turnover large bignum mixed strbuild mstress bigbuf glibc_simple"
for w in $WORKLOADS; do
  [[ " $known_workloads " == *" $w "* ]] || die "unknown workload '$w' (known: $known_workloads)"
  [[ -x $BIN/$w ]] || die "$BIN/$w is missing: build first (cmake -S $ROOT -B $BUILD_DIR -DCMAKE_BUILD_TYPE=Release && cmake --build $BUILD_DIR -j2)"
  [[ $w != bigbuf || -z $BIGBUF_STEPS || -x $BIN/fixed/bigbuf ]] || die "$BIN/fixed/bigbuf is missing: build first"
done
[[ -x $BIN/runmeasure ]] || die "$BIN/runmeasure is missing: build first"

# ---- allocators ----
source "$ROOT/bench/allocators.sh"
resolve_allocators "$ALLOCATORS"

mkdir -p "$OUT"
RAW=$OUT/raw.csv
LOG=$OUT/stderr.log
echo "workload,threads,allocator,run,ops_per_s,maxrss_kb,wall_s,status,extra,ops,secs,minflt" >"$RAW"
: >"$LOG"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- plan ----
nwl=0; for w in $WORKLOADS; do nwl=$((nwl + 1)); done
nth=0; for t in $THREADS; do nth=$((nth + 1)); done
total=$((nwl * nth * RUNS * nalloc))
est=0
for w in $WORKLOADS; do
  if [[ $w == larson ]]; then d=$larson_sleep; else d=$SECS; fi
  # large: setup (touching ~300 MiB) plus the steps: about 3 s for a slow peer
  [[ $w == large ]] && d=$(awk -v s="${LARGE_ITERS:-$SECS}" 'BEGIN { print (ENVIRON["LARGE_ITERS"] != "") ? 3 : s + 1 }')
  # bigbuf: the setup's 20 buffers a thread plus the steps, 1.5-4 s for a slow peer
  [[ $w == bigbuf && -n $BIGBUF_STEPS ]] && d=3
  est=$(awk -v e="$est" -v d="$d" -v n=$((nth * RUNS * nalloc)) 'BEGIN { printf "%d", e + n * (d + 0.15) }')
done
ncpu=$(nproc)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${load_start%% *}" -v n="$ncpu" 'BEGIN { exit !(l > 0.5 * n) }'; then
  note "warning: the machine is busy (load average $load_start on $ncpu CPUs): expect noisy results"
fi
note "$total runs: workloads [$WORKLOADS] x threads [$THREADS] x $RUNS runs x allocators [${alloc_names[*]}], about $((est / 60))m$((est % 60))s"
note "this machine has $ncpu CPUs: thread counts above $ncpu oversubscribe"
note "results in $OUT"

fmt_rate() { awk -v x="$1" 'BEGIN { if (x == "") print "FAIL"; else if (x >= 1e9) printf "%.2fG", x / 1e9; else if (x >= 1e6) printf "%.2fM", x / 1e6; else if (x >= 1e3) printf "%.1fk", x / 1e3; else printf "%d", x }'; }

# ---- run ----
failures=0
done_runs=0
t_start=$SECONDS
for w in $WORKLOADS; do
  for t in $THREADS; do
    if [[ $w == larson ]]; then
      cmd=("$BIN/larson" "${larson_args[@]}" "$t"); dur=$larson_sleep
    elif [[ $w == bigbuf && -n $BIGBUF_STEPS ]]; then
      cmd=(env "BENCH_CHECKS=$BIGBUF_STEPS" "$BIN/fixed/bigbuf" "$t" "$SECS"); dur=10
    else
      cmd=("$BIN/$w" "$t" "$SECS"); dur=$SECS
    fi
    to=${TIMEOUT:-$(awk -v d="$dur" 'BEGIN { printf "%d", 3 * d + 30 }')}
    for ((r = 1; r <= RUNS; r++)); do
      for ((k = 0; k < nalloc; k++)); do
        i=$(((k + r - 1) % nalloc))          # rotate the order every round
        name=${alloc_names[$i]} lib=${alloc_libs[$i]}
        echo "### $w threads=$t allocator=$name run=$r: ${cmd[*]}" >>"$LOG"
        set +e
        stdout=$("$BIN/runmeasure" -p "$lib" -t "$to" -o "$tmp/res" -- "${cmd[@]}" 2>>"$LOG")
        set -e
        res=$(cat "$tmp/res" 2>/dev/null || echo "maxrss_kb=0 minflt=0 wall_s=0 status=norun")
        rss=$(sed -n 's/.*maxrss_kb=\([0-9]*\).*/\1/p' <<<"$res")
        flt=$(sed -n 's/.*minflt=\([0-9]*\).*/\1/p' <<<"$res")
        wall=$(sed -n 's/.*wall_s=\([0-9.]*\).*/\1/p' <<<"$res")
        status=$(sed -n 's/.*status=\([^ ]*\).*/\1/p' <<<"$res")
        extra= nops= secs=
        if [[ $w == larson ]]; then
          ops=$(sed -n 's/^Throughput = *\([0-9][0-9]*\) operations per second.*/\1/p' <<<"$stdout" | head -1)
        else
          ops=$(sed -n 's/^RESULT .* ops\/s=\([0-9][0-9]*\).*/\1/p' <<<"$stdout" | head -1)
          # key=value pairs after ops/s (e.g. falseshare's shared=P%)
          extra=$(sed -n 's/^RESULT .* ops\/s=[0-9]* *//p' <<<"$stdout" | head -1 | tr -d ',')
          nops=$(sed -n 's/^RESULT .* ops=\([0-9][0-9]*\) .*/\1/p' <<<"$stdout" | head -1)
          secs=$(sed -n 's/^RESULT .* secs=\([0-9.][0-9.]*\) .*/\1/p' <<<"$stdout" | head -1)
          us=$(sed -n 's/^RESULT .* elapsed_us=\([0-9][0-9]*\).*/\1/p' <<<"$stdout" | head -1)
          [[ -n $us ]] && secs=$(awk -v u="$us" 'BEGIN { printf "%.6f", u / 1e6 }')
          # large, bigbuf and mstress run few, slow steps (tens to thousands
          # of ops/s), so the rate is recomputed from ops and secs with
          # decimals (the RESULT line rounds)
          if [[ ($w == large || $w == bigbuf || $w == mstress) && -n $ops && -n $nops && -n $secs ]]; then
            ops=$(awk -v n="$nops" -v s="$secs" 'BEGIN { if (s > 0) printf "%.3f", n / s; else print "" }')
          fi
        fi
        if [[ $status != exit:0 || -z $ops ]]; then
          failures=$((failures + 1))
          [[ -z $ops ]] && status="$status/no-result"
          ops=
          echo "### FAILED: status=$status stdout: $stdout" >>"$LOG"
        else
          [[ -n $stdout ]] && echo "$stdout" >>"$LOG"
        fi
        echo "$w,$t,$name,$r,${ops:-NA},${rss:-0},${wall:-0},$status,$extra,${nops:-},${secs:-},${flt:-0}" >>"$RAW"
        done_runs=$((done_runs + 1))
        el=$((SECONDS - t_start))
        eta=$(((total - done_runs) * el / done_runs))
        if [[ -n $ops ]]; then
          what="$(fmt_rate "$ops") ops/s, $((rss / 1024)) MiB"
        else
          what="FAILED ($status), see $LOG"
        fi
        printf '[%4d/%d] %-10s T=%-2s run %d/%d %-9s %s  (ETA %dm%02ds)\n' \
          "$done_runs" "$total" "$w" "$t" "$r" "$RUNS" "$name" "$what" \
          $((eta / 60)) $((eta % 60)) >&2
      done
    done
  done
done

# ---- summary, table, plot data ----
SUMMARY=$OUT/summary.csv
TABLE=$OUT/table.md
cpu_model=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "no commit")
{
  echo "hakmem bench/scaling.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit"
  echo "machine: ${cpu_model:-unknown CPU}, $ncpu CPUs, $(uname -sr); load average $load_start at start, $(cut -d' ' -f1-3 /proc/loadavg) at end"
  settings="median of $RUNS runs per point"
  [[ " $WORKLOADS " == *" larson "* ]] && settings="$settings; larson ${larson_args[*]} T"
  if [[ " $WORKLOADS " == *" large "* && -n ${LARGE_ITERS:-} ]]; then
    [[ $WORKLOADS != large ]] && settings="$settings; other non-larson workloads ${SECS}s per run"
    settings="$settings; large LARGE_MODE=${LARGE_MODE:-mixed} LARGE_ITERS=$LARGE_ITERS steps per thread"
  elif [[ $WORKLOADS != larson ]]; then
    settings="$settings; non-larson workloads ${SECS}s per run"
  fi
  [[ " $WORKLOADS " == *" bigbuf "* && -n $BIGBUF_STEPS ]] && settings="$settings; bigbuf $BIGBUF_STEPS steps per thread"
  echo "$settings"
  echo
} >"$TABLE"

awk -F, -v WL="$WORKLOADS" -v TH="$THREADS" -v AL="${alloc_names[*]}" \
    -v SUMMARY="$SUMMARY" -v OUTDIR="$OUT" -v RUNS="$RUNS" -v NCPU="$ncpu" \
    -v LARGEMODE="${LARGE_MODE:-mixed}" -v LARGEITERS="${LARGE_ITERS:-}" -v BIGBUFSTEPS="$BIGBUF_STEPS" '
function sortn(a, n,   i, j, x) {
  for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
}
function median(a, n) { sortn(a, n); return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
function rate(x) {
  if (x >= 1e9) return sprintf("%.2f G", x / 1e9)
  if (x >= 1e6) return sprintf("%.2f M", x / 1e6)
  if (x >= 1e3) return sprintf("%.1f k", x / 1e3)
  if (x >= 100) return sprintf("%d", x)
  return sprintf("%.1f", x)
}
function num(x) { return (x >= 1000) ? sprintf("%.0f", x) : sprintf("%.3f", x) }
function mib(kb) { return sprintf("%.1f MiB", kb / 1024) }
# Lines of a footnote: per thread count (from tmin threads), the median for
# each allocator of the per-run values v[k, run] of workload w, as fmt.
function per_thread_medians(w, v, fmt, tmin,   t, a, k, n, m, i, z, line) {
  for (t = 1; t <= nt; t++) {
    if (th[t] + 0 < tmin) continue
    line = "  " th[t] " threads:"
    for (a = 1; a <= na; a++) {
      k = wl[w] SUBSEP th[t] SUBSEP al[a]
      n = ok[k] + 0; m = 0
      for (i = 1; i <= n; i++) if ((k, i) in v) z[++m] = v[k, i]
      line = line sprintf(" %s %s", al[a], m ? sprintf(fmt, median(z, m)) : "?") (a < na ? "," : "")
    }
    print line
  }
}
NR == 1 { next }
{
  k = $1 SUBSEP $2 SUBSEP $3
  runs[k]++
  if ($5 != "NA") {
    n = ++ok[k]; ops[k, n] = $5 + 0; rss[k, n] = $6 + 0; secs[k, n] = ($11 == "") ? -1 : $11 + 0; flt[k, n] = $12 + 0
    byrun[k, $4 + 0] = $5 + 0
    if (match($9, /shared=[0-9.]+/)) shared[k, n] = substr($9, RSTART + 7, RLENGTH - 7) + 0
    if (match($9, /live_peak_mib=[0-9]+/) && (lp = substr($9, RSTART + 14, RLENGTH - 14) + 0) > 0)
      overlive[k, n] = ($6 / 1024) / lp
  }
}
END {
  nw = split(WL, wl, " "); nt = split(TH, th, " "); na = split(AL, al, " ")
  hashak = 0; for (a = 1; a <= na; a++) if (al[a] == "hakmem") hashak = 1
  print "workload,threads,allocator,runs,runs_ok,median_ops_per_s,min_ops_per_s,max_ops_per_s,median_maxrss_kb,median_secs,ops_vs_best,rss_vs_lowest,hakmem_vs_this_paired,median_minflt,minflt_vs_lowest" > SUMMARY
  for (w = 1; w <= nw; w++) for (t = 1; t <= nt; t++) for (a = 1; a <= na; a++) {
    k = wl[w] SUBSEP th[t] SUBSEP al[a]
    n = ok[k] + 0
    if (n == 0) { med[k] = ""; mrss[k] = ""; continue }
    for (i = 1; i <= n; i++) { x[i] = ops[k, i]; y[i] = rss[k, i]; z[i] = secs[k, i]; fz[i] = flt[k, i] }
    med[k] = median(x, n); mrss[k] = median(y, n); msecs[k] = median(z, n); mflt[k] = median(fz, n)
    mn[k] = x[1]; mx[k] = x[n]
  }
  # hakmem / this allocator, paired by round: the median over the rounds of
  # the throughput of hakmem in the round / that of this allocator in the
  # same round.  The runs of one round follow each other, so a swing of the
  # machine between rounds moves both sides of a ratio (the medians of the
  # two columns can come from different phases).
  for (w = 1; w <= nw; w++) for (t = 1; t <= nt; t++) for (a = 1; a <= na; a++) {
    k = wl[w] SUBSEP th[t] SUBSEP al[a]; kh = wl[w] SUBSEP th[t] SUBSEP "hakmem"; paired[k] = ""
    if (!hashak || al[a] == "hakmem") continue
    m = 0
    for (r = 1; r <= RUNS; r++)
      if (((kh, r) in byrun) && ((k, r) in byrun) && byrun[k, r] > 0) q[++m] = byrun[kh, r] / byrun[k, r]
    if (m > 0) paired[k] = median(q, m)
  }
  # per workload and thread count: the best throughput, the lowest peak RSS
  # and the fewest minor faults
  for (w = 1; w <= nw; w++) for (t = 1; t <= nt; t++) {
    kb = wl[w] SUBSEP th[t]; best[kb] = 0; low[kb] = 0; lowf[kb] = -1
    for (a = 1; a <= na; a++) {
      k = wl[w] SUBSEP th[t] SUBSEP al[a]
      if (med[k] == "") continue
      if (med[k] > best[kb]) best[kb] = med[k]
      if (mrss[k] > 0 && (low[kb] == 0 || mrss[k] < low[kb])) low[kb] = mrss[k]
      if (lowf[kb] < 0 || mflt[k] < lowf[kb]) lowf[kb] = mflt[k]
    }
  }
  for (w = 1; w <= nw; w++) for (t = 1; t <= nt; t++) for (a = 1; a <= na; a++) {
    k = wl[w] SUBSEP th[t] SUBSEP al[a]; kb = wl[w] SUBSEP th[t]
    if (med[k] == "") { printf "%s,%s,%s,%d,0,,,,,,,,,,\n", wl[w], th[t], al[a], runs[k] >> SUMMARY; continue }
    vbest[k] = (med[k] > 0) ? best[kb] / med[k] : 0
    vlow[k] = (low[kb] > 0) ? mrss[k] / low[kb] : 0
    vlowf[k] = (lowf[kb] > 0) ? mflt[k] / lowf[kb] : 0
    printf "%s,%s,%s,%d,%d,%s,%s,%s,%.0f,%s,%.3f,%.3f,%s,%.0f,%.3f\n", wl[w], th[t], al[a], runs[k], ok[k], num(med[k]), num(mn[k]), num(mx[k]), mrss[k],
      (msecs[k] >= 0) ? sprintf("%.6f", msecs[k]) : "", vbest[k], vlow[k], (paired[k] != "") ? sprintf("%.3f", paired[k]) : "", mflt[k], vlowf[k] >> SUMMARY
  }
  close(SUMMARY)

  printf "| %-10s | %7s | %-9s | %14s | %13s | %12s | %9s | %11s | %11s | %9s | %10s | %13s |\n", "workload", "threads", "allocator", "ops/s (median)", "peak RSS", "minor faults", "vs 1T", "hakmem/peer", "paired", "time/best", "RSS/lowest", "faults/lowest"
  printf "|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", "------------", "--------:", "-----------", "---------------:", "--------------:", "-------------:", "----------:", "------------:", "------------:", "----------:", "-----------:", "--------------:"
  for (w = 1; w <= nw; w++) {
    for (t = 1; t <= nt; t++) for (a = 1; a <= na; a++) {
      k = wl[w] SUBSEP th[t] SUBSEP al[a]
      k1 = wl[w] SUBSEP th[1] SUBSEP al[a]
      kh = wl[w] SUBSEP th[t] SUBSEP "hakmem"
      if (med[k] == "") { cell = "FAIL (0/" runs[k] ")"; rcell = "-"; fcell = "-"; scale = "-"; ratio = "-"; pr = "-"; tb = "-"; rl = "-"; fl = "-" }
      else {
        cell = rate(med[k]); if (ok[k] < runs[k]) cell = cell " (" ok[k] "/" runs[k] " ok)"
        rcell = mib(mrss[k])
        fcell = rate(mflt[k])
        scale = (med[k1] != "" && med[k1] > 0) ? sprintf("%.2fx", med[k] / med[k1]) : "-"
        if (!hashak || al[a] == "hakmem") ratio = "-"
        else ratio = (med[kh] != "" && med[k] > 0) ? sprintf("%.2fx", med[kh] / med[k]) : "-"
        pr = (paired[k] != "") ? sprintf("%.2fx", paired[k]) : "-"
        tb = vbest[k] > 0 ? sprintf("%.2fx", vbest[k]) : "-"
        rl = vlow[k] > 0 ? sprintf("%.2fx", vlow[k]) : "-"
        fl = vlowf[k] > 0 ? sprintf("%.2fx", vlowf[k]) : "-"
      }
      printf "| %-10s | %7s | %-9s | %14s | %13s | %12s | %9s | %11s | %11s | %9s | %10s | %13s |\n", wl[w], th[t], al[a], cell, rcell, fcell, scale, ratio, pr, tb, rl, fl
    }
  }
  print ""
  print "vs 1T: median throughput at this thread count / at " th[1] " thread(s) (the 4T/1T ratio on 4-thread rows)."
  if (hashak) print "hakmem/peer: hakmem median throughput / this allocator median, same workload and threads (>1: hakmem faster)."
  if (hashak) print "paired: the median over the rounds of hakmem / this allocator within one round (the runs of a round follow each other, so a swing of the machine between rounds moves both sides; where it differs from hakmem/peer, the machine changed phase during the point)."
  print "time/best: the best median throughput of the row'"'"'s workload and threads / this allocator'"'"'s (1.00x: the fastest; at equal work, its time / the best time)."
  print "RSS/lowest: this allocator'"'"'s median peak RSS / the lowest median of the row'"'"'s workload and threads (1.00x: the least memory)."
  print "minor faults: the median of the runs'"'"' minor page faults (ru_minflt: pages touched for the first time or again after being given back); faults/lowest: this allocator'"'"'s / the fewest of the row'"'"'s workload and threads."
  for (w = 1; w <= nw; w++) {
    if (wl[w] == "prodcons") print "prodcons: threads = producer/consumer pairs (2T threads)."
    if (wl[w] == "pcqueue") print "pcqueue: threads = producer/consumer pairs (2T threads); ops = frees."
    if (wl[w] == "large") {
      if (LARGEITERS != "") print "large: LARGE_MODE=" LARGEMODE ", LARGE_ITERS=" LARGEITERS " steps per thread for every allocator (equal work: peak RSS compares); ops/s = steps (one malloc/calloc/realloc each) / elapsed time of the steps, setup excluded."
      else print "large: LARGE_MODE=" LARGEMODE ", timed runs; ops = malloc/calloc/realloc calls (a faster allocator runs more steps, and its live data peaks higher)."
    }
    if (wl[w] == "bigbuf") {
      if (BIGBUFSTEPS != "") print "bigbuf: " BIGBUFSTEPS " steps per thread for every allocator (bench/fixed/bigbuf; equal work: peak RSS compares); ops/s = mallocs and frees / elapsed time, the setup of 20 buffers a thread included."
      else print "bigbuf: timed runs; a faster allocator runs more steps, and its live data peaks higher."
    }
    if (wl[w] == "falseshare") print "falseshare: ops = writes to blocks, not mallocs."
  }
  print "This machine has " NCPU " CPUs: larger thread counts oversubscribe it."
  for (w = 1; w <= nw; w++) {
    if (wl[w] != "large") continue
    print ""
    print "large, peak RSS / the run'"'"'s live peak (live_peak_mib: the most bytes the workload held at once; median; the allocator'"'"'s own overhead, apart from how the schedule moved the live data):"
    per_thread_medians(w, overlive, "%.2f", 0)
  }
  for (w = 1; w <= nw; w++) {
    if (wl[w] != "falseshare") continue
    print ""
    print "falseshare, blocks sharing a 64-byte line with another thread'"'"'s block (median; 0% is ideal):"
    per_thread_medians(w, shared, "%.1f%%", 2)
  }

  # one gnuplot data file per workload: threads, then Mops/s per allocator
  for (w = 1; w <= nw; w++) {
    f = OUTDIR "/" wl[w] ".dat"
    line = "threads"; for (a = 1; a <= na; a++) line = line " " al[a]
    print line > f
    for (t = 1; t <= nt; t++) {
      line = th[t]
      for (a = 1; a <= na; a++) {
        k = wl[w] SUBSEP th[t] SUBSEP al[a]
        line = line " " ((med[k] == "") ? "?" : sprintf("%.6g", med[k] / 1e6))   # %g: large runs at tens of ops/s
      }
      print line > f
    }
    close(f)
  }
}' "$RAW" >>"$TABLE"

cat "$TABLE"

# ---- chart ----
if command -v gnuplot >/dev/null 2>&1; then
  PNG=$OUT/scaling.png
  cols=$(( nwl < 3 ? nwl : 3 ))
  rows=$(( (nwl + cols - 1) / cols ))
  xtics=$(echo $THREADS | sed 's/ /, /g')
  term="pngcairo size $((cols * 600)),$((rows * 380)) font 'DejaVu Sans,10'"
  gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1 || term="png size $((cols * 600)),$((rows * 380))"
  {
    echo "set terminal $term"
    echo "set output '$PNG'"
    echo "set datafile missing '?'"
    echo "set multiplot layout $rows,$cols title 'hakmem scaling: throughput vs threads (median of $RUNS runs, $ncpu CPUs)'"
    echo "set key outside right top vertical font ',9'"
    echo "set grid"
    echo "set xtics ($xtics)"
    echo "set logscale x 2"
    echo "set xrange [*:*]"
    echo "set offsets graph 0.05, graph 0.05, 0, 0"
    echo "set yrange [0:*]"
    # fixed, distinguishable colours; hakmem (if present) drawn thicker
    colors=('#d62728' '#1f77b4' '#2ca02c' '#9467bd' '#ff7f0e' '#8c564b' '#17becf' '#7f7f7f')
    for ((k = 0; k < nalloc; k++)); do
      lw=1.5; [[ ${alloc_names[$k]} == hakmem ]] && lw=3
      echo "set linetype $((k + 1)) lc rgb '${colors[$((k % 8))]}' lw $lw pt $((k % 4 + 5)) ps 1.2"
    done
    echo "set xlabel 'threads'"
    echo "set ylabel 'Mops/s'"
    for w in $WORKLOADS; do
      label=$w
      [[ $w == prodcons ]] && label="prodcons (x = pairs)"
      [[ $w == pcqueue ]] && label="pcqueue (x = pairs, Mfrees/s)"
      scale=1 ylabel=Mops/s
      [[ $w == large ]] && { label="large, ${LARGE_MODE:-mixed} (allocations/s)"; scale=1e6; ylabel=ops/s; }
      [[ $w == falseshare ]] && label="falseshare (Mwrites/s)"
      echo "set title '$label'"
      echo "set ylabel '$ylabel'"
      echo "plot for [i=2:$((nalloc + 1))] '$OUT/$w.dat' using 1:(column(i)*$scale) with linespoints lt (i-1) title columnheader(i)"
    done
    echo "unset multiplot"
  } >"$OUT/scaling.gp"
  if gnuplot "$OUT/scaling.gp" 2>>"$LOG"; then
    echo
    echo "chart: $PNG"
  else
    note "gnuplot failed (see $LOG); data files are in $OUT"
  fi
else
  note "gnuplot not installed: no chart (data files are in $OUT)"
fi
echo "table: $TABLE  summary: $SUMMARY  raw runs: $RAW"

if [[ $failures -gt 0 ]]; then
  note "$failures of $total runs failed; see $LOG"
  exit 1
fi
