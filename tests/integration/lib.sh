# Shared helpers of the LD_PRELOAD tests; sourced, not run.
#
#   hk_init LIB          check LIB, make a scratch dir $HK_TMP (removed at exit)
#   hk_plain CMD...      run CMD without any preload
#   hk_preload CMD...    run CMD with LD_PRELOAD=LIB HAKMEM_STATS=1
#   hk_run_ok NAME WHY CMD...
#                        hk_preload CMD: stdout in $HK_TMP/out (and shown),
#                        stderr in $HK_TMP/err (shown without the statistics
#                        lines); fail if it died of a signal ("NAME died of
#                        signal N WHY") or exited with a status other than 0
#   hk_check_stats ERR MIN_ALLOCS WHAT
#                        ERR holds the stderr of an hk_preload run: it must have
#                        a "hakmem:" line whose allocs= is at least MIN_ALLOCS
#                        (the largest over all lines: a command may run several
#                        processes, each prints its own line)
#   hk_skip MSG / hk_fail MSG
#
# Validating the harness with another allocator (the stats check cannot pass
# there): HAKMEM_TEST_NO_STATS=1 turns hk_check_stats into a notice.

HK_SKIP=77

hk_skip() { echo "SKIP: $*"; exit "$HK_SKIP"; }
hk_fail() { echo "FAIL: $*" >&2; exit 1; }
hk_note() { echo "   $*"; }

hk_init() {
  HK_LIB=${1:-}
  [[ -n "$HK_LIB" ]] || hk_fail "usage: $0 /path/to/libhakmem.so ..."
  [[ -f "$HK_LIB" ]] || hk_fail "preload library $HK_LIB does not exist"
  HK_LIB=$(readlink -f "$HK_LIB")
  HK_TMP=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-test.XXXXXX")
  trap 'rm -rf "$HK_TMP"' EXIT
  # The reference run must not inherit a preload or hakmem options.
  unset HAKMEM_STATS
}

hk_need() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || hk_skip "$t is not installed"
  done
}

hk_plain() { env -u LD_PRELOAD -u HAKMEM_STATS "$@"; }

hk_preload() { env LD_PRELOAD="$HK_LIB" HAKMEM_STATS=1 "$@"; }

hk_run_ok() {
  local name=$1 why=$2 rc=0
  shift 2
  hk_preload "$@" > "$HK_TMP/out" 2> "$HK_TMP/err" || rc=$?
  cat "$HK_TMP/out"
  hk_strip_stats "$HK_TMP/err" >&2
  (( rc <= 128 )) || hk_fail "$name died of signal $((rc - 128))${why:+ $why}"
  (( rc == 0 )) || hk_fail "$name exited with status $rc"
}

# Prints the largest value of FIELD= over the "hakmem:" lines of a file.
hk_stat_max() {
  local file=$1 field=$2
  grep -E '^hakmem:' "$file" | grep -oE "(^|[[:space:]])${field}=[0-9]+" |
    sed 's/.*=//' | sort -n | tail -n 1
}

hk_check_stats() {
  local err=$1 min=$2 what=$3 lines allocs frees
  if [[ -n "${HAKMEM_TEST_NO_STATS:-}" ]]; then
    hk_note "notice: stats check of '$what' skipped (HAKMEM_TEST_NO_STATS set)"
    return 0
  fi
  lines=$(grep -cE '^hakmem:' "$err" || true)
  if [[ "$lines" -eq 0 ]]; then
    echo "--- stderr of $what (last 20 lines):" >&2
    tail -n 20 "$err" >&2
    hk_fail "$what: no 'hakmem:' statistics line on stderr with HAKMEM_STATS=1"
  fi
  allocs=$(hk_stat_max "$err" allocs)
  frees=$(hk_stat_max "$err" frees)
  if [[ -z "$allocs" || -z "$frees" ]]; then
    grep -E '^hakmem:' "$err" >&2
    hk_fail "$what: the 'hakmem:' line lacks allocs= or frees="
  fi
  hk_note "$what: $lines hakmem line(s), largest allocs=$allocs frees=$frees (need allocs >= $min)"
  hk_note "$(grep -E '^hakmem:' "$err" | sort -t= -k2 -n | tail -n 1)"
  if (( allocs < min )); then
    hk_fail "$what: allocs=$allocs < $min: hakmem did not serve the program's allocations"
  fi
}

# Removes the hakmem statistics lines (to compare the rest of a stderr).
hk_strip_stats() { grep -vE '^hakmem:' "$1" || true; }

# Writes about $2 MiB of deterministic, partly compressible text to $1.
# mawk/gawk with a fixed seed: the same bytes on every run of one machine.
hk_gen_input() {
  local out=$1 mib=$2
  awk -v target=$((mib * 1024 * 1024)) 'BEGIN {
    srand(20240601)
    split("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega malloc free slab heap thread remote", w, " ")
    nw = 0; for (k in w) nw++
    n = 0; line = 0
    while (n < target) {
      line++
      s = sprintf("%08d", line)
      m = 3 + int(rand() * 12)
      for (i = 0; i < m; i++) {
        r = rand()
        if (r < 0.7) s = s " " w[1 + int(rand() * nw)]
        else if (r < 0.9) s = s " " int(rand() * 1000000)
        else s = s " " sprintf("%x%x", int(rand() * 2147483647), int(rand() * 2147483647))
      }
      print s
      n += length(s) + 1
    }
  }' > "$out"
}
