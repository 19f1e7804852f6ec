#!/usr/bin/env bash
# run_lifecycle.sh: run one lifecycle program and judge it.
#
#   run_lifecycle.sh [--preload LIB] [--no-stats] [--balanced] [--timeout SEC]
#                    [--quiet] -- PROGRAM [ARGS...]
#
#   --preload LIB  run under LD_PRELOAD=LIB with HAKMEM_STATS=1 and expect
#                  hakmem's exit report (a stderr line starting "hakmem:");
#                  without it the program runs on glibc's malloc.
#   --no-stats     LIB is not hakmem (e.g. mimalloc): expect no report.
#   --balanced     the report must show allocs == frees and live_bytes == 0
#                  (the programs free every block before they return).
#   --timeout SEC  kill the program after SEC seconds (default 100): a hang
#                  is a failure reported as such.
#   --quiet        print only the verdict lines and the program's LC_METRICS.
#
# Checks, any failing makes the exit status 1:
#   - the program exited 0 in time and printed "LC_METRICS ... result=pass";
#   - with a hakmem report: allocs >= the program's own count of allocations
#     (mallocs=N in LC_METRICS; proves hakmem served them), remote_frees >=
#     the program's count of frees by a non-owning thread whose owner was
#     alive (cross_frees=N, lc_return only; lc_return --large reports
#     large_cross_frees instead, not checked: hakmem counts no free of a
#     large block as remote), and with --balanced the balance.
#
# glibc caches the stacks of exited threads together with their DTV, a block
# it allocates through malloc and frees only when the stack leaves the cache:
# without GLIBC_TUNABLES=glibc.pthread.stack_cache_size=0 a process that
# created threads ends with a few such blocks live, which are not the
# program's.  The driver sets that tunable so the balance is exact.
set -u

preload=""
stats=1
balanced=0
timeout_s=100
quiet=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --preload) preload="$2"; shift 2 ;;
    --no-stats) stats=0; shift ;;
    --balanced) balanced=1; shift ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --quiet) quiet=1; shift ;;
    --) shift; break ;;
    *) echo "run_lifecycle: unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ $# -lt 1 ]]; then
  echo "usage: run_lifecycle.sh [--preload LIB] [--no-stats] [--balanced] [--timeout SEC] -- PROGRAM [ARGS...]" >&2
  exit 2
fi
[[ -z "$preload" ]] && stats=0
prog_name=$(basename "$1")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lifecycle.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

tunables="glibc.pthread.stack_cache_size=0"
if [[ -n "${GLIBC_TUNABLES:-}" ]]; then
  tunables="${GLIBC_TUNABLES}:${tunables}"
fi
envs=(GLIBC_TUNABLES="$tunables")
if [[ -n "$preload" ]]; then
  if [[ ! -f "$preload" ]]; then
    echo "run_lifecycle: FAIL: preload library $preload not found" >&2
    exit 1
  fi
  envs+=(LD_PRELOAD="$preload")
  [[ $stats -eq 1 ]] && envs+=(HAKMEM_STATS=1)
fi

[[ $quiet -eq 0 ]] && echo "run_lifecycle: ${envs[*]} $*"
start_ns=$(date +%s%N)
# Only the program runs under the preload (timeout itself would print an
# exit report of its own).
timeout --kill-after=5 "$timeout_s" env "${envs[@]}" "$@" >"$tmp/out" 2>"$tmp/err"
rc=$?
end_ns=$(date +%s%N)
wall=$(awk -v a="$start_ns" -v b="$end_ns" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')

if [[ $quiet -eq 0 ]]; then
  cat "$tmp/out"
  cat "$tmp/err" >&2
else
  grep '^LC_METRICS' "$tmp/out"
  grep -E '^(FAIL|lc_[a-z]+: (child|fork))' "$tmp/err" >&2
fi

fail=0
verdict() { echo "run_lifecycle: $prog_name: $*"; }
bad() { verdict "FAIL: $*"; fail=1; }

if [[ $rc -eq 124 || $rc -eq 137 ]]; then
  bad "timed out after ${timeout_s}s (exit status $rc)"
elif [[ $rc -ge 128 ]]; then
  bad "killed by signal $((rc - 128))"
elif [[ $rc -ne 0 ]]; then
  bad "exit status $rc"
fi

metrics=$(grep '^LC_METRICS' "$tmp/out" | tail -n 1)
field() { # field NAME LINE -> value of NAME=... (whole word), empty if absent
  local re="(^|[[:space:]])$1=([^[:space:]]+)"
  if [[ "$2" =~ $re ]]; then echo "${BASH_REMATCH[2]}"; fi
}
if [[ -z "$metrics" ]]; then
  bad "no LC_METRICS line in the program's output"
else
  result=$(field result "$metrics")
  [[ "$result" == "pass" ]] || bad "program reports result=$result"
fi

if [[ $stats -eq 1 ]]; then
  report=$(grep '^hakmem:' "$tmp/err" | tail -n 1)
  nreports=$(grep -c '^hakmem:' "$tmp/err")
  if [[ -z "$report" ]]; then
    bad "no 'hakmem:' exit report on stderr (HAKMEM_STATS=1 under LD_PRELOAD=$preload)"
  else
    [[ $quiet -eq 1 ]] && echo "$report"
    [[ $nreports -gt 1 ]] && verdict "note: $nreports exit reports, judging the last"
    allocs=$(field allocs "$report")
    frees=$(field frees "$report")
    remote=$(field remote_frees "$report")
    live=$(field live_bytes "$report")
    if [[ -z "$allocs" || -z "$frees" ]]; then
      bad "exit report lacks allocs=/frees=: $report"
    else
      mallocs=$(field mallocs "$metrics")
      if [[ -n "$mallocs" && $allocs -lt $mallocs ]]; then
        bad "hakmem counted allocs=$allocs, fewer than the program's own $mallocs allocations"
      fi
      cross=$(field cross_frees "$metrics")
      if [[ -n "$cross" ]]; then
        if [[ -z "$remote" ]]; then
          bad "exit report lacks remote_frees="
        elif [[ $remote -lt $cross ]]; then
          bad "hakmem counted remote_frees=$remote, fewer than the $cross blocks the program freed from a thread that did not allocate them (owner alive)"
        fi
      fi
      if [[ $balanced -eq 1 ]]; then
        if [[ $allocs -ne $frees ]]; then
          bad "exit report is not balanced: allocs=$allocs frees=$frees (difference $((allocs - frees))) although the program freed every block"
        fi
        if [[ -n "$live" && $live -ne 0 ]]; then
          bad "exit report shows live_bytes=$live although the program freed every block"
        fi
      fi
    fi
  fi
fi

if [[ $fail -eq 0 ]]; then
  verdict "PASS (${wall}s)"
else
  verdict "failed (${wall}s)"
fi
exit $fail
