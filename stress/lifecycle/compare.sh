#!/usr/bin/env bash
# compare.sh: run the lifecycle programs under hakmem, glibc, mimalloc, jemalloc
# and tcmalloc (those installed) in one go and print a markdown table of the figures.
#
#   stress/lifecycle/compare.sh [--build DIR] [--hakmem LIB] [--mimalloc LIB]
#                               [--programs "churn return return_large fork idle_owner refault refault_single"]
#                               [--allocators "hakmem glibc mimalloc jemalloc tcmalloc"]
#                               [--logs DIR]
#
#   --build DIR   the CMake build directory holding stress/lifecycle/lc_* and
#                 libhakmem.so (default: build, relative to the repository)
#   --hakmem LIB  default DIR/libhakmem.so
#   --mimalloc LIB default /usr/lib/x86_64-linux-gnu/libmimalloc.so.2
#   --logs DIR    keep every run's full output there (default: a new
#                 directory under /tmp, printed at the end)
#
# Every run goes through run_lifecycle.sh with the arguments of the ctests.
# Under hakmem the driver also checks the HAKMEM_STATS exit report (balance,
# remote frees).  The return tests assert "final RSS <= 5% of peak within
# 1 s of the frees" (small blocks) and the same (return_large: lc_return --large, 1 .. 16 MiB blocks),
# idle_owner "RSS <= 25% of peak within 2 s of the joins, the allocating thread
# idle", and refault "at most 64 minor faults a round after warm-up", only
# for hakmem; for the other allocators they only report the figures.  Exit status:
# 0 when every hakmem run passed, 1 otherwise (the other allocators' results
# are information).
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build="$repo/build"
hakmem=""
mimalloc="/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"
programs="churn return return_large fork idle_owner refault refault_single"
allocators="hakmem glibc mimalloc jemalloc tcmalloc"
logs=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --hakmem) hakmem="$2"; shift 2 ;;
    --mimalloc) mimalloc="$2"; shift 2 ;;
    --programs) programs="$2"; shift 2 ;;
    --allocators) allocators="$2"; shift 2 ;;
    --logs) logs="$2"; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -z "$hakmem" ]] && hakmem="$build/libhakmem.so"
bindir="$build/stress/lifecycle"
if [[ -z "$logs" ]]; then
  logs=$(mktemp -d "${TMPDIR:-/tmp}/lifecycle-compare.XXXXXX")
fi
mkdir -p "$logs"

field() { # field NAME LINE
  local re="(^|[[:space:]])$1=([^[:space:]]+)"
  if [[ "$2" =~ $re ]]; then echo "${BASH_REMATCH[2]}"; fi
}
mib() { # KiB -> MiB with one decimal
  if [[ -z "$1" ]]; then echo "?"; else awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; fi
}

prog_args() { # program allocator -> arguments (those of the ctests)
  case "$1" in
    churn) echo "--threads 20000 --concurrency 4" ;;
    return)
      if [[ "$2" == hakmem ]]; then echo "--threads 4 --total-mib 1024 --max-final-pct 5 --settle-ms 1000"
      else echo "--threads 4 --total-mib 1024 --max-final-pct 0 --settle-ms 1000"; fi ;;
    return_large)
      if [[ "$2" == hakmem ]]; then echo "--large --threads 4 --total-mib 1024 --max-final-pct 5"
      else echo "--large --threads 4 --total-mib 1024 --max-final-pct 0"; fi ;;
    fork) echo "--workers 4 --forks 200 --child-timeout 20" ;;
    idle_owner)
      if [[ "$2" == hakmem ]]; then echo "--threads 2 --total-mib 128 --max-final-pct 25 --settle-ms 2000"
      else echo "--threads 2 --total-mib 128 --max-final-pct 0 --settle-ms 2000"; fi ;;
    refault)
      if [[ "$2" == hakmem ]]; then echo "--rounds 300 --warmup 30 --max-faults 64"
      else echo "--rounds 300 --warmup 30"; fi ;;
    refault_single)
      if [[ "$2" == hakmem ]]; then echo "--single --blocks 60000 --rounds 100 --warmup 20 --max-faults 64"
      else echo "--single --blocks 60000 --rounds 100 --warmup 20"; fi ;;
  esac
}

rows=()
hakmem_failed=0
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for prog in $programs; do
  exe="$bindir/lc_${prog%_large}"
  exe="${exe%_single}"
  if [[ ! -x "$exe" ]]; then
    echo "compare.sh: $exe not built (cmake --build $build)" >&2
    exit 2
  fi
  for alloc in $allocators; do
    drv=(--quiet --timeout 300)
    lib=""
    case "$alloc" in
      hakmem) lib="$hakmem"; drv+=(--preload "$lib" --balanced) ;;
      glibc) ;;
      mimalloc) lib="$mimalloc"; drv+=(--preload "$lib" --no-stats) ;;
      jemalloc) lib=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2; drv+=(--preload "$lib" --no-stats) ;;
      tcmalloc) lib=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4; drv+=(--preload "$lib" --no-stats) ;;
      *) echo "compare.sh: unknown allocator $alloc" >&2; exit 2 ;;
    esac
    if [[ -n "$lib" && ! -f "$lib" ]]; then
      rows+=("| $prog | $alloc | - | - | - | library $lib not found | not run |")
      [[ "$alloc" == hakmem ]] && hakmem_failed=1
      continue
    fi
    log="$logs/$prog-$alloc.log"
    echo "compare.sh: $prog under $alloc ..." >&2
    # shellcheck disable=SC2046
    bash "$here/run_lifecycle.sh" "${drv[@]}" -- "$exe" $(prog_args "$prog" "$alloc") >"$log" 2>&1
    rc=$?
    m=$(grep '^LC_METRICS' "$log" | tail -n 1)
    report=$(grep '^hakmem:' "$log" | tail -n 1)
    # wall time of the whole process, as measured by the driver
    wall=$(sed -n 's/^run_lifecycle: .*(\([0-9.]*\)s)$/\1/p' "$log" | tail -n 1)
    peak=$(mib "$(field peak_rss_kib "$m")")
    final=$(mib "$(field final_rss_kib "$m")")
    notes=""
    case "$prog" in
      churn)
        final="$(mib "$(field warm_rss_kib "$m")") → $(mib "$(field end_rss_kib "$m")")"
        trend=$(field trend_kib "$m")
        notes="after warm-up → at end; trend $(mib "$trend") MiB; $(mib "$(field final_rss_kib "$m")") MiB after freeing all"
        ;;
      return)
        pct=$(field final_pct "$m")
        final="$final (${pct}%)"
        notes="after malloc_trim(0): $(mib "$(field trimmed_rss_kib "$m")") MiB"
        ;;
      return_large)
        pct=$(field settled_pct "$m")
        final="$final ($(field final_pct "$m")%) → $(mib "$(field settled_rss_kib "$m")") (${pct}%)"
        notes="right after the frees → lowest within 1 s (after $(field settled_ms "$m") ms); after malloc_trim(0): $(mib "$(field trimmed_rss_kib "$m")") MiB"
        ;;
      fork)
        notes="children exited 0: $(field children_ok "$m")/200; parent after freeing all"
        ;;
      idle_owner)
        pct=$(field settled_pct "$m")
        final="$final ($(field final_pct "$m")%) → $(mib "$(field settled_rss_kib "$m")") (${pct}%)"
        notes="right after the joins → lowest within 2 s (after $(field settled_ms "$m") ms), the allocating thread making no call"
        ;;
      refault*)
        notes="$(field faults_per_round "$m") minor faults a round after warm-up"
        ;;
    esac
    if [[ -n "$report" ]]; then
      notes="$notes; allocs=$(field allocs "$report") frees=$(field frees "$report") remote=$(field remote_frees "$report")"
    fi
    if [[ $rc -eq 0 ]]; then
      result="pass"
      if [[ ( "$prog" == return* || "$prog" == idle_owner ) && "$alloc" != hakmem ]]; then
        limit=10
        [[ "$prog" == return_large ]] && limit=5
        [[ "$prog" == idle_owner ]] && limit=25
        over=$(awk -v p="${pct:-100}" -v l="$limit" 'BEGIN { print (p > l) ? "above" : "within" }')
        result="report only ($over $limit%)"
      fi
    else
      result="**FAIL**"
      reason=$(grep -E 'FAIL' "$log" | head -n 3 | sed 's/|/\\|/g' | tr '\n' ' ')
      notes="$notes; $reason"
      [[ "$alloc" == hakmem ]] && hakmem_failed=1
    fi
    rows+=("| $prog | $alloc | ${wall:-?} | $peak | $final | $notes | $result |")
  done
done

echo
echo "Lifecycle comparison, $(date -u +%Y-%m-%d) on $(nproc) cores ($(uname -r)); hakmem: $hakmem"
echo "(load average before: $load_start; after: $(cut -d' ' -f1-3 /proc/loadavg): other work on the machine inflates wall times)"
echo
echo "| program | allocator | wall s | peak RSS MiB | final RSS MiB | notes | result |"
echo "|---|---|---:|---:|---:|---|---|"
for r in "${rows[@]}"; do echo "$r"; done
echo
echo "churn: 20,000 threads, 4 at a time; final RSS column = RSS after warm-up (4,000 threads) → at the end (before the final frees)."
echo "return: 1 GiB in 16 B-4 KiB blocks from 4 threads, all freed; final RSS = after the frees and joins (% of peak); threshold 10% asserted for hakmem only."
echo "return_large: the same in 1-16 MiB blocks; final RSS = right after the frees → lowest within 1 s (polled every 50 ms); threshold 5% asserted for hakmem only."
echo "fork: 200 forks while 4 threads allocate/free; peak/final RSS are the parent's."
echo "idle_owner: 128 MiB in 16 B-1 KiB blocks from the main thread, all freed by 2 other threads while it waits in pthread_join; final RSS = right after the joins → lowest within 2 s (polled every 50 ms, the main thread making no allocator call); threshold 25% asserted for hakmem only."
echo "refault: 300 rounds of 2 threads allocating 5,000 and 10,000 16-512 B blocks, freeing them and exiting; minor faults a round over the last 270; limit 64 asserted for hakmem only."
echo "refault_single: 100 rounds of the main thread allocating and freeing 60,000 16-512 B blocks; minor faults a round over the last 80; limit 64 asserted for hakmem only."
echo "wall s: the whole process, start to exit."
echo "Logs: $logs"
exit $hakmem_failed
